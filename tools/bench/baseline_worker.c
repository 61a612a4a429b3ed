/*
 * baseline_worker.c - the JetStream baseline's workers: FIFO consumers of their model's work
 * queue, serving what they fetch with the same simulated GPU as lanesched's workers.
 *
 * Invariant: a worker fetches up to max_batch_size messages (whatever is at the head of its
 * model's queue) and serves them in stream order as consecutive batches under its own contract:
 * a batch closes before the item that would make len > max_batch_size or len * pad_to >
 * max_batch_tokens (a single item always fits), pad_to being the longest item rounded up to 8.
 * That is packer_fill, lanesched's own packer, so only the grouping differs. Batches of several
 * shapes go through gpu_serve_mixed: a hit only when the batch holds one shape the worker had
 * cached. Each message is acked (natsMsg_Ack, no reply awaited) once its batch is served; a
 * batch starts, for the wait figures, when the worker starts serving it.
 *
 * Rejected alternatives:
 *  - One message per batch (Fetch of 1): a worker with batch slots would not leave them empty.
 *  - Splitting a fetched list by shape before batching: that is shape-aware scheduling, the
 *    thing this baseline stands for not having.
 */
#include "baseline_int.h"

#include "scheduler/core/sched.h"

#include <stdio.h>
#include <stdlib.h>

#define BASE_FETCH_MS 250

typedef struct {
    natsMsg **msgs;
    net_items_t items;
    size_t n;
} base_batch_t;

/* Serves and acks the fetched items [off, off + n) as one batch padded to pad_to. */
static void base_batch_serve(base_thread_t *x, const base_batch_t *b, size_t off, size_t n,
                             uint32_t pad_to)
{
    net_run_t *run = x->run;
    net_worker_serve(run, run->workers[x->index], &b->items, off, n, pad_to);
    for (size_t i = off; i < off + n; i++) {
        natsStatus s = natsMsg_Ack(b->msgs[i], NULL);
        if (s != NATS_OK) {
            atomic_fetch_add(&run->worker_errors, 1);
            base_error_note(x->error, sizeof(x->error), "ack", s, 0);
        }
    }
    net_worker_acked(run, n);
}

/* The fetched list in stream order, foreign items acked and dropped, then cut into consecutive
 * batches by the project's packer (the invariant). */
static void base_list_serve(base_thread_t *x, base_batch_t *b, natsMsgList *list)
{
    net_run_t *run = x->run;
    const gpu_config_t *g = &run->opts->gpu;
    const packer_contract_t contract = {g->max_batch_size, g->max_batch_tokens,
                                        g->max_input_tokens};
    b->n = 0;
    for (int i = 0; i < list->Count; i++) {
        natsMsg *msg = list->Msgs[i];
        uint32_t idx = 0, tokens = 0;
        uint64_t sig = 0;
        if (!base_item_decode(run, msg, &idx, &sig, &tokens)) {
            atomic_fetch_add(&run->foreign_items, 1);
            natsMsg_Ack(msg, NULL);
            continue;
        }
        b->msgs[b->n] = msg;
        b->items.idx[b->n] = idx;
        b->items.sigs[b->n] = sig;
        b->items.tokens[b->n] = tokens;
        b->items.prefix[b->n] = run->trace->items[idx].prefix_tokens; /* JetStream carries none */
        b->n++;
    }
    for (size_t off = 0; off < b->n;) {
        packer_result_t pr;
        if (packer_fill(&contract, b->items.tokens + off, b->n - off, &pr) != SCHED_OK) {
            atomic_fetch_add(&run->worker_errors, 1); /* a contract the packer refuses */
            pr.count = 1;
            pr.pad_to = (uint32_t)packer_pad(b->items.tokens[off]);
        }
        base_batch_serve(x, b, off, pr.count, pr.pad_to);
        off += pr.count;
    }
    b->n = 0;
}

void *base_worker_main(void *arg)
{
    base_thread_t *x = arg;
    net_run_t *run = x->run;
    size_t cap = run->opts->gpu.max_batch_size;
    base_batch_t b = {.msgs = calloc(cap, sizeof(natsMsg *))};
    int items_ok = net_items_init(&b.items, cap) == 0;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    natsSubscription *sub = NULL;
    char name[64];
    jsErrCode jerr = 0;
    bool ready = false;

    if (b.msgs == NULL || !items_ok) {
        snprintf(x->error, sizeof(x->error), "out of memory");
        goto out;
    }
    snprintf(name, sizeof(name), "bench-%s-worker-%zu", run->tag, x->index);
    natsStatus s = base_connect(run, name, &nc);
    if (s == NATS_OK)
        s = natsConnection_JetStream(&js, nc, NULL);
    if (s != NATS_OK) {
        base_error_note(x->error, sizeof(x->error), "connect", s, 0);
        goto out;
    }
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = BASE_STREAM;
    so.Consumer = x->durable;
    s = js_PullSubscribe(&sub, js, x->subject, x->durable, NULL, &so, &jerr);
    if (s != NATS_OK) {
        base_error_note(x->error, sizeof(x->error), "pull subscribe", s, jerr);
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->workers_ready, 1);
    while (!net_stopping(run)) {
        natsMsgList list = {0};
        jerr = 0;
        s = natsSubscription_Fetch(&list, sub, (int)cap, BASE_FETCH_MS, &jerr);
        if (s == NATS_OK)
            base_list_serve(x, &b, &list);
        else if (s != NATS_TIMEOUT) {
            atomic_fetch_add(&run->worker_errors, 1);
            base_error_note(x->error, sizeof(x->error), "fetch", s, jerr);
            base_sleep_ms(100);
        }
        natsMsgList_Destroy(&list);
    }
    natsConnection_FlushTimeout(nc, 1000); /* the last acks */
out:
    if (!ready)
        atomic_fetch_add(&run->workers_failed, 1);
    /* Closed first: nats.c 3.4's read loop may hold the subscription of a message it read
     * (nats.c issue #637). Not Unsubscribe: the consumer is the stream's, not ours. */
    if (nc != NULL)
        natsConnection_Close(nc);
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(b.msgs);
    net_items_fini(&b.items);
    return NULL;
}
