/*
 * baseline_producer.c - the JetStream baseline's producers: one thread per model, publishing
 * each item as one message on bench.wq.<model>, paced by the trace like lanesched's producers.
 *
 * Invariant: a producer publishes up to --batch messages asynchronously, then waits for their
 * acks (js_PublishAsyncComplete, 5 s); items without an ack are published again with the same
 * id, at most 10 times in all. An item's ack time is its own pub ack's (the ack handler).
 *
 * Rejected alternatives:
 *  - js_Publish one message at a time: a round trip per item; a window of async publishes then
 *    a wait for their acks is what lanesched's producer does with one Submit of --batch items.
 */
#include "baseline_int.h"

#include "common/clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE_PUB_WAIT_MS  5000
#define BASE_PUB_ATTEMPTS 10

static void base_puback_on(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
    base_thread_t *x = closure;
    net_run_t *run = x->run;
    uint32_t idx = 0, tokens = 0;
    uint64_t sig = 0;
    (void)js;
    if (pa != NULL && base_item_decode(run, msg, &idx, &sig, &tokens)) {
        uint64_t expected = 0;
        if (atomic_compare_exchange_strong(&run->acked_ns[idx], &expected, clock_mono_ns())) {
            atomic_fetch_add(&run->accepted_items, 1);
            atomic_fetch_add(&run->accepted_tokens, tokens);
            if (pa->Duplicate)
                atomic_fetch_add(&run->duplicates, 1);
        }
    } else if (pae != NULL && atomic_fetch_add(&x->pub_errors, 1) == 0) {
        snprintf(x->pub_error, sizeof(x->pub_error), "pub ack: %s (JetStream error %d) %s",
                 natsStatus_GetText(pae->Err), (int)pae->ErrCode,
                 pae->ErrText != NULL ? pae->ErrText : "");
    }
    natsMsg_Destroy(msg);
}

void *base_producer_main(void *arg)
{
    base_thread_t *x = arg;
    net_run_t *run = x->run;
    const net_trace_t *t = run->trace;
    const uint32_t *ix = t->by_model[x->model];
    size_t n = t->n_by_model[x->model], next = 0, batch = run->opts->batch;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    uint8_t(*payloads)[BASE_PAYLOAD_LEN] = calloc(batch, sizeof(*payloads));
    char(*ids)[40] = calloc(batch, sizeof(*ids));
    char name[64];
    jsErrCode jerr = 0;

    if (payloads == NULL || ids == NULL) {
        snprintf(x->error, sizeof(x->error), "out of memory");
        goto out;
    }
    snprintf(name, sizeof(name), "bench-%s-producer-%" PRIu32, run->tag, x->model);
    natsStatus s = base_connect(run, name, &nc);
    if (s != NATS_OK) {
        base_error_note(x->error, sizeof(x->error), "connect", s, 0);
        goto out;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = (int64_t)batch;
    jo.PublishAsync.AckHandler = base_puback_on;
    jo.PublishAsync.AckHandlerClosure = x;
    if ((s = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK) {
        base_error_note(x->error, sizeof(x->error), "JetStream context", s, 0);
        goto out;
    }
    while (next < n) {
        size_t k = net_pace_take(run, x->model, next);
        if (k == 0)
            break;
        uint64_t sent = clock_mono_ns();
        for (size_t j = 0; j < k; j++) {
            uint32_t i = ix[next + j];
            snprintf(ids[j], sizeof(ids[j]), "%s-%" PRIu32, run->tag, i);
            base_item_encode(run, i, sent, payloads[j]);
            atomic_store(&run->sent_ns[i], sent);
        }
        for (int attempt = 0; attempt < BASE_PUB_ATTEMPTS && !net_stopping(run); attempt++) {
            bool any = false;
            for (size_t j = 0; j < k; j++) {
                if (atomic_load(&run->acked_ns[ix[next + j]]) != 0)
                    continue;
                any = true;
                jsPubOptions po;
                jsPubOptions_Init(&po);
                po.MsgId = ids[j];
                s = js_PublishAsync(js, x->subject, payloads[j], (int)BASE_PAYLOAD_LEN, &po);
                if (s != NATS_OK)
                    base_error_note(x->error, sizeof(x->error), "publish", s, 0);
            }
            if (!any)
                break;
            jsPubOptions po;
            jsPubOptions_Init(&po);
            po.MaxWait = BASE_PUB_WAIT_MS;
            s = js_PublishAsyncComplete(js, &po);
            if (s != NATS_OK)
                base_error_note(x->error, sizeof(x->error), "wait for pub acks", s, jerr);
        }
        for (size_t j = 0; j < k; j++)
            if (atomic_load(&run->acked_ns[ix[next + j]]) == 0)
                atomic_fetch_add(&run->failed_items, 1);
        next += k;
    }
out:
    if (next < n)
        atomic_fetch_add(&run->failed_items, n - next); /* never published */
    atomic_fetch_add(&run->producers_done, 1);
    if (js != NULL) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = 1000;
        js_PublishAsyncComplete(js, &po);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(payloads);
    free(ids);
    return NULL;
}
