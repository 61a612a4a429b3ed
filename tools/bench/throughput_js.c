/*
 * throughput_js.c - one JetStream run of `throughput`, driven the way a NATS user who knows
 * JetStream would: a work-queue stream with file storage on the bench's nats-server, producers
 * publishing every item asynchronously with a window (js_PublishAsync, MaxPending = cfg.pending,
 * js_PublishAsyncComplete at the end) on its model's subject, consumers on one durable pull
 * consumer per model keeping pull requests of cfg.fetch messages in flight and acking each
 * message. The same items and phases as throughput_lanes.c; a grid cell (throughput_grid.c) runs
 * the end-to-end phase alone. How many producers and consumers, the fetch size and the windows
 * are cfg's: throughput_grid.c tries several and keeps the best.
 *
 * Invariants:
 *  1. Every item is one message with Nats-Msg-Id = its id, so an item published again is stored
 *     once (JetStream's dedupe, standing in for lanesched's); it is confirmed by its PubAck,
 *     whose latency is measured from the send time in its payload.
 *  2. A publish that failed or was never acknowledged is published again with the same id, at
 *     most TPJ_ROUNDS rounds; what is still unconfirmed then counts as failed.
 *  3. An ack (+ACK on the message's reply subject, what natsMsg_Ack sends) does not wait, and the
 *     server applies acks some time after it received them, so a drain or end-to-end phase ends
 *     when every item of it was consumed and acked and the stream is empty (polled every 2 ms):
 *     the work queue's promise, an acked item gone, holds by then.
 *  4. The stream is deleted at the end of the run, and a stale one at its start.
 *  5. A consumer keeps cfg.requested messages requested per model it serves, in pull requests of
 *     cfg.fetch, topped up at half (nats.go's Consume does the same with its threshold); a status
 *     message (408 timeout, 409) ends the oldest request of its model, the server fills one
 *     inbox's requests in order, and a request silent half a second past its expiry is forgotten
 *     (as lanesched's client forgets its pulls), so a status that never came cannot stall a
 *     consumer.
 *  6. Consumer thread c serves model c % models when there are at least as many consumers as
 *     models, else every model m with m % consumers == c, on one connection with an inbox per
 *     model (<inbox>.<m>): one consumer process can drain several work queues.
 *
 * Rejected alternatives:
 *  - js_Publish per message: a round trip per item; an expert publishes asynchronously.
 *  - natsMsg_AckSync: a round trip per message; lanesched's acks are confirmed but windowed,
 *    JetStream's fire-and-forget ack is what its users send (the report says so).
 *  - A push consumer: the comparison is with pull fetch in batches, the work-queue pattern.
 *  - natsSubscription_Fetch (baseline_worker.c's): nats.c 3.4.1
 *    wrote past the end of its message array under this load (a Fetch of 64 returned more than 64,
 *    caught by ASan, heap corruption in release builds), and one Fetch in flight per consumer
 *    leaves the server idle between batches. The pull requests are sent as Fetch sends them, kept
 *    in flight as nats.go's Consume keeps them.
 */
#include "throughput_int.h"

#include "common/clock.h"

#include <inttypes.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TPJ_STREAM          "TP_WQ"
#define TPJ_SUBJECTS        "tp.wq.>"
#define TPJ_ROUNDS          4
#define TPJ_COMPLETE_MS     30000
#define TPJ_STALL_MS        30000
#define TPJ_FETCH_MS        200   /* a consumer's wait for its next message */
#define TPJ_EMPTY_WAIT_MS   5000u /* per watch sample: how long the stream may take to empty */
#define TPJ_PULLS_MAX       256   /* pull requests in flight per consumer and model, at most */
#define TPJ_MAX_WAITING     4096  /* pull requests the server keeps waiting per consumer */
#define TPJ_PULL_EXPIRES_MS 1000u /* a pull request's life on the server */
#define TPJ_PULL_GRACE_MS   500u  /* after it, how long its 408 status may take to come */
#define TPJ_READY_MS        10000u
#define TPJ_ACK_WAIT_NS     30000000000ll
#define TPJ_MAX_ACK_PEND    1000000

typedef struct {
    tp_run_t *run;
    const tp_js_cfg_t *cfg;
    uint32_t index, count;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* failed[] is written by the ack handler's thread */
    uint64_t *failed;
    size_t n_failed, cap_failed;
} tpj_thread_t;

static natsStatus tpj_connect(tp_run_t *run, const char *what, uint32_t i, natsConnection **nc)
{
    natsOptions *no = NULL;
    char name[64];
    snprintf(name, sizeof(name), "tp-%s-%s-%u", run->tag, what, i);
    natsStatus s = natsOptions_Create(&no);
    if (s == NATS_OK)
        s = natsOptions_SetURL(no, net_url());
    if (s == NATS_OK)
        s = natsOptions_SetName(no, name);
    if (s == NATS_OK)
        s = natsConnection_Connect(nc, no);
    natsOptions_Destroy(no);
    return s;
}

static void tpj_subject(uint32_t model, char *out, size_t len)
{
    snprintf(out, len, "tp.wq." TP_MODEL_FMT, model);
}

/* ---- producers ------------------------------------------------------------------------------ */

static void tpj_failed_add(tpj_thread_t *x, uint64_t idx)
{
    pthread_mutex_lock(&x->mu);
    if (x->n_failed == x->cap_failed) {
        size_t cap = x->cap_failed ? 2 * x->cap_failed : 64;
        uint64_t *f = realloc(x->failed, cap * sizeof(*f));
        if (f != NULL) {
            x->failed = f;
            x->cap_failed = cap;
        }
    }
    if (x->n_failed < x->cap_failed)
        x->failed[x->n_failed++] = idx;
    pthread_mutex_unlock(&x->mu);
}

static void tpj_puback(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
    tpj_thread_t *x = closure;
    tp_run_t *run = x->run;
    (void)js;
    const uint8_t *p = (const uint8_t *)natsMsg_GetData(msg);
    uint64_t idx = 0;
    if (tp_payload_read(run, p, (size_t)natsMsg_GetDataLength(msg), &idx)) {
        if (pa != NULL) {
            uint64_t sent = 0;
            for (int i = 0; i < 8; i++)
                sent |= (uint64_t)p[16 + i] << (8 * i);
            if (pa->Duplicate)
                atomic_fetch_add(&run->duplicates, 1);
            tp_confirmed_note(run, 1, clock_mono_ns() - sent);
        } else {
            tpj_failed_add(x, idx);
            if (pae != NULL)
                tp_run_error(run, "JetStream pub ack: %s (error %d)", natsStatus_GetText(pae->Err),
                             (int)pae->ErrCode);
        }
    }
    natsMsg_Destroy(msg);
}

static natsStatus tpj_publish(tpj_thread_t *x, jsCtx *js, uint64_t i, uint8_t *payload)
{
    tp_run_t *run = x->run;
    char id[64], subject[64];
    tpj_subject(tp_workload_model(run->wl, run->items, i), subject, sizeof(subject));
    snprintf(id, sizeof(id), "%s-%" PRIu64, run->tag, i);
    tp_payload_make(run, i, clock_mono_ns(), payload);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = id;
    return js_PublishAsync(js, subject, payload, (int)run->o->payload_bytes, &po);
}

/* Publishes [first, end), then the failures again (invariant 2). */
static void tpj_produce(tpj_thread_t *x, jsCtx *js, uint64_t first, uint64_t end, uint8_t *payload)
{
    tp_run_t *run = x->run;
    for (uint64_t i = first; i < end && !atomic_load(&run->stop); i++) {
        natsStatus s = tpj_publish(x, js, i, payload);
        if (s != NATS_OK)
            tpj_failed_add(x, i);
    }
    for (int round = 0;; round++) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = TPJ_COMPLETE_MS;
        if (js_PublishAsyncComplete(js, &po) == NATS_TIMEOUT) {
            natsMsgList pending = {0};
            if (js_PublishAsyncGetPendingList(&pending, js) == NATS_OK) {
                for (int k = 0; k < pending.Count; k++) {
                    uint64_t idx;
                    natsMsg *m = pending.Msgs[k];
                    if (tp_payload_read(run, natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                                        &idx))
                        tpj_failed_add(x, idx);
                }
                natsMsgList_Destroy(&pending);
            }
        }
        pthread_mutex_lock(&x->mu);
        size_t n = x->n_failed;
        uint64_t *again = n ? malloc(n * sizeof(*again)) : NULL;
        if (again != NULL)
            memcpy(again, x->failed, n * sizeof(*again));
        x->n_failed = 0;
        pthread_mutex_unlock(&x->mu);
        if (n == 0 || round + 1 == TPJ_ROUNDS || atomic_load(&run->stop) || again == NULL) {
            atomic_fetch_add(&run->failed, n);
            free(again);
            return;
        }
        for (size_t k = 0; k < n; k++)
            if (tpj_publish(x, js, again[k], payload) != NATS_OK)
                tpj_failed_add(x, again[k]);
        free(again);
    }
}

static void *tpj_producer_main(void *arg)
{
    tpj_thread_t *x = arg;
    tp_run_t *run = x->run;
    const tp_opts_t *o = run->o;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    uint8_t *payload = malloc(o->payload_bytes);
    bool ready = false;
    if (payload != NULL)
        tp_payload_fill(run, payload);
    natsStatus s = payload != NULL ? tpj_connect(run, "producer", x->index, &nc) : NATS_NO_MEMORY;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = (int64_t)x->cfg->pending;
    jo.PublishAsync.AckHandler = tpj_puback;
    jo.PublishAsync.AckHandlerClosure = x;
    jo.PublishAsync.StallWait = TPJ_STALL_MS;
    if (s == NATS_OK)
        s = natsConnection_JetStream(&js, nc, &jo);
    if (s != NATS_OK) {
        tp_run_error(run, "JetStream producer %u: %s", x->index, natsStatus_GetText(s));
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->ready, 1);
    static const uint32_t phases[2] = {TP_SUBMIT, TP_E2E};
    for (uint32_t k = run->e2e_only ? 1 : 0; k < 2 && !atomic_load(&run->stop); k++) {
        while (atomic_load(&run->go) <= k && !atomic_load(&run->stop))
            net_sleep_ms(1);
        uint64_t first, end;
        tp_share(run, phases[k], x->index, x->count, &first, &end);
        tpj_produce(x, js, first, end, payload);
        atomic_fetch_add(&run->gone, 1);
    }
out:
    if (!ready)
        atomic_fetch_add(&run->ready, 1);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(payload);
    return NULL;
}

/* ---- consumers ------------------------------------------------------------------------------ */

/* Pull requests in flight, oldest first (the server fills one inbox's requests in order). */
typedef struct {
    uint32_t left[TPJ_PULLS_MAX];       /* messages each may still bring */
    uint64_t lost_after[TPJ_PULLS_MAX]; /* monotonic: expiry + grace; silent past it = gone */
    size_t head, n;
    uint64_t requested; /* messages asked for and not yet come or expired */
} tpj_pulls_t;

static natsStatus tpj_pull_send(natsConnection *nc, const char *next, const char *inbox,
                                tpj_pulls_t *p, uint32_t batch)
{
    char body[96];
    snprintf(body, sizeof(body), "{\"batch\":%" PRIu32 ",\"expires\":%" PRIu64 "}", batch,
             (uint64_t)TPJ_PULL_EXPIRES_MS * UINT64_C(1000000));
    natsStatus s = natsConnection_PublishRequestString(nc, next, inbox, body);
    if (s == NATS_OK) {
        size_t at = (p->head + p->n++) % TPJ_PULLS_MAX;
        p->left[at] = batch;
        p->lost_after[at] =
            clock_mono_ns() + (TPJ_PULL_EXPIRES_MS + TPJ_PULL_GRACE_MS) * 1000000ull;
        p->requested += batch;
    }
    return s;
}

static void tpj_pull_pop(tpj_pulls_t *p)
{
    p->requested -= p->left[p->head];
    p->head = (p->head + 1) % TPJ_PULLS_MAX;
    p->n--;
}

/* Forgets the requests silent past their expiry and a grace (their status never came). */
static void tpj_pulls_expire(tpj_pulls_t *p, uint64_t now)
{
    while (p->n > 0 && p->lost_after[p->head] <= now)
        tpj_pull_pop(p);
}

/* The model of a message on a consumer's inbox, or -1 (invariant 6). A status comes on the
 * request's own reply subject, <inbox>.<m>; a stream message keeps the subject it was published
 * on, and its ack subject names the durable consumer, one per model:
 * $JS.ACK[.<domain>.<account>].TP_WQ.<durable>.<...> */
static long tpj_msg_model(natsMsg *m, const char *inbox, bool status)
{
    size_t base = strlen(inbox);
    const char *subj = natsMsg_GetSubject(m), *reply = natsMsg_GetReply(m), *at;
    char *end = NULL;
    if (status) {
        if (subj == NULL || strncmp(subj, inbox, base) != 0 || subj[base] != '.')
            return -1;
        long v = strtol(subj + base + 1, &end, 10);
        return end != subj + base + 1 && *end == '\0' ? v : -1;
    }
    if (reply == NULL || (at = strstr(reply, "." TPJ_STREAM ".")) == NULL)
        return -1;
    at += strlen("." TPJ_STREAM ".");
    unsigned m_idx = 0;
    char dot = 0;
    if (sscanf(at, TP_MODEL_FMT "%c", &m_idx, &dot) != 2 || dot != '.')
        return -1;
    return (long)m_idx;
}

/* A message on the consumer's inbox: a status ending the oldest request of its model, or an item
 * acked and counted. Acks of a phase's last items are flushed before the phase ends
 * (invariant 3). */
static void tpj_msg_take(tpj_thread_t *x, natsConnection *nc, tpj_pulls_t *p, natsMsg *m,
                         bool status)
{
    tp_run_t *run = x->run;
    if (status) {
        if (p->n > 0) /* 408 request timeout, 409 (max waiting, leadership): the request ended */
            tpj_pull_pop(p);
        return;
    }
    if (p->n > 0) { /* one of the oldest request's messages */
        p->requested--;
        if (--p->left[p->head] == 0)
            tpj_pull_pop(p);
    }
    uint64_t idx;
    if (tp_payload_read(run, natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &idx))
        tp_consumed_note(run, idx);
    const char *reply = natsMsg_GetReply(m);
    if (reply == NULL || natsConnection_PublishString(nc, reply, "+ACK") != NATS_OK) {
        tp_run_error(run, "JetStream consumer %u: ack failed", x->index);
        return;
    }
    uint64_t items = run->items, before = atomic_fetch_add(&run->acked_items, 1);
    if (before + 1 == items || before + 1 == 2 * items)
        natsConnection_FlushTimeout(nc, 5000);
    atomic_store(&run->last_ack_ns, clock_mono_ns());
}

/* The models consumer c serves (invariant 6) into ms; how many. */
static uint32_t tpj_models_served(const tp_run_t *run, uint32_t c, uint32_t consumers, uint32_t *ms)
{
    uint32_t models = run->wl->models, n = 0;
    if (consumers >= models) {
        ms[n++] = c % models;
        return n;
    }
    for (uint32_t m = c; m < models; m += consumers)
        ms[n++] = m;
    return n;
}

static void *tpj_consumer_main(void *arg)
{
    tpj_thread_t *x = arg;
    tp_run_t *run = x->run;
    const tp_js_cfg_t *cfg = x->cfg;
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    natsInbox *inbox = NULL;
    char wild[160];
    bool ready = false;
    uint32_t models = run->wl->models;
    uint32_t *served = calloc(models, sizeof(*served));
    tpj_pulls_t *pulls = calloc(models, sizeof(*pulls)); /* by position in served */
    uint32_t n_served = served != NULL ? tpj_models_served(run, x->index, x->count, served) : 0;
    natsStatus s = served != NULL && pulls != NULL ? tpj_connect(run, "consumer", x->index, &nc)
                                                   : NATS_NO_MEMORY;
    if (s == NATS_OK)
        s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
        snprintf(wild, sizeof(wild), "%s.*", (const char *)inbox);
        s = natsConnection_SubscribeSync(&sub, nc, wild);
    }
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(sub, -1, -1);
    if (s != NATS_OK) {
        tp_run_error(run, "JetStream consumer %u: %s", x->index, natsStatus_GetText(s));
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->ready, 1);
    while (!atomic_load(&run->consume) && !atomic_load(&run->stop))
        net_sleep_ms(1);
    while (!atomic_load(&run->stop)) {
        for (uint32_t k = 0; k < n_served; k++) {
            tpj_pulls_t *p = &pulls[k];
            char next[128], reply[160];
            snprintf(next, sizeof(next), "$JS.API.CONSUMER.MSG.NEXT." TPJ_STREAM "." TP_MODEL_FMT,
                     served[k]);
            snprintf(reply, sizeof(reply), "%s.%u", (const char *)inbox, served[k]);
            tpj_pulls_expire(p, clock_mono_ns());
            if (p->requested * 2 > cfg->requested)
                continue;
            while (p->requested + cfg->fetch <= cfg->requested && p->n < TPJ_PULLS_MAX) {
                s = tpj_pull_send(nc, next, reply, p, cfg->fetch);
                if (s != NATS_OK) {
                    tp_run_error(run, "JetStream consumer %u: pull: %s", x->index,
                                 natsStatus_GetText(s));
                    net_sleep_ms(50);
                    break;
                }
            }
        }
        natsMsg *m = NULL;
        s = natsSubscription_NextMsg(&m, sub, TPJ_FETCH_MS);
        if (s == NATS_OK) {
            const char *status = NULL;
            bool st = natsMsgHeader_Get(m, "Status", &status) == NATS_OK;
            long model = tpj_msg_model(m, (const char *)inbox, st);
            uint32_t k = 0;
            while (k < n_served && (long)served[k] != model)
                k++;
            if (k < n_served)
                tpj_msg_take(x, nc, &pulls[k], m, st);
            else
                atomic_fetch_add(&run->foreign, 1);
            natsMsg_Destroy(m);
        }
    }
    natsConnection_FlushTimeout(nc, 2000);
out:
    if (!ready)
        atomic_fetch_add(&run->ready, 1);
    if (nc != NULL) /* closed before the free: nats.c 3.4's read loop (issue #637) */
        natsConnection_Close(nc);
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    natsConnection_Destroy(nc);
    free(served);
    free(pulls);
    return NULL;
}

/* ---- the run
 * ----------------------------------------------------------------------------------
 */

/* Items done: consumed and acked, and once every one of the phase is, only when the stream is
 * empty too (the server applies acks after it received them): the phase ends then (invariant
 * 3). */
static uint64_t tpj_done(tp_run_t *run)
{
    uint64_t a = atomic_load(&run->consumed_items), b = atomic_load(&run->acked_items);
    uint64_t done = a < b ? a : b, items = run->items;
    if (done != items && done != 2 * items)
        return done;
    if (atomic_load(&run->acks_sent_ns) < atomic_load(&run->last_ack_ns))
        atomic_store(&run->acks_sent_ns, atomic_load(&run->last_ack_ns));
    uint64_t until = clock_mono_ns() + TPJ_EMPTY_WAIT_MS * 1000000ull;
    while (clock_mono_ns() < until && !net_stopping(NULL)) {
        jsStreamInfo *si = NULL;
        jsErrCode jerr = 0;
        uint64_t msgs = UINT64_MAX;
        if (js_GetStreamInfo(&si, run->system, TPJ_STREAM, NULL, &jerr) == NATS_OK && si != NULL)
            msgs = si->State.Msgs;
        jsStreamInfo_Destroy(si);
        if (msgs == 0) {
            atomic_store(&run->last_ack_ns, clock_mono_ns());
            return done;
        }
        net_sleep_ms(2);
    }
    return done - 1; /* not empty yet: the watch asks again */
}

static int tpj_stream_create(jsCtx *js, uint32_t models, char *err, size_t errlen)
{
    const char *subjects[] = {TPJ_SUBJECTS};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = TPJ_STREAM;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Retention = js_WorkQueuePolicy;
    sc.Storage = js_FileStorage;
    sc.Replicas = 1;
    jsErrCode jerr = 0;
    natsStatus s = NATS_OK;
    uint64_t until = clock_mono_ns() + TPJ_READY_MS * 1000000ull;
    for (;;) {
        jsStreamInfo *si = NULL;
        js_DeleteStream(js, TPJ_STREAM, NULL, &jerr); /* a stale one (invariant 4) */
        s = js_AddStream(&si, js, &sc, NULL, &jerr);
        jsStreamInfo_Destroy(si);
        if (s == NATS_OK || clock_mono_ns() > until || net_stopping(NULL))
            break;
        net_sleep_ms(100);
    }
    for (uint32_t m = 0; s == NATS_OK && m < models; m++) {
        char subject[64], durable[32];
        tpj_subject(m, subject, sizeof(subject));
        snprintf(durable, sizeof(durable), TP_MODEL_FMT, m);
        jsConsumerConfig cc;
        jsConsumerConfig_Init(&cc);
        cc.Durable = durable;
        cc.FilterSubject = subject;
        cc.AckPolicy = js_AckExplicit;
        cc.AckWait = TPJ_ACK_WAIT_NS;
        cc.MaxAckPending = TPJ_MAX_ACK_PEND;
        cc.MaxWaiting = TPJ_MAX_WAITING;
        jsConsumerInfo *ci = NULL;
        s = js_AddConsumer(&ci, js, TPJ_STREAM, &cc, NULL, &jerr);
        jsConsumerInfo_Destroy(ci);
    }
    if (s != NATS_OK)
        snprintf(err, errlen, "JetStream stream/consumer: %s (error %d)", natsStatus_GetText(s),
                 (int)jerr);
    return s == NATS_OK ? 0 : -1;
}

static bool tpj_phases(tp_run_t *run, tp_result_t *res, int pid)
{
    tp_phase_result_t *ph = res->phase;
    uint64_t items = run->items, t0;
    bool ok;
    net_rss_peak_reset(pid);
    res->rss_base_kb = net_rss_kb(pid, false);
    res->anon_base_kb = tp_anon_kb(pid);
    if (!run->e2e_only) {
        t0 = clock_mono_ns();
        atomic_store(&run->go, 1);
        ok = tp_phase_watch(run, res->label, "submit", items, tp_confirmed_count, 0, t0,
                            &ph[TP_SUBMIT]);
        ph[TP_SUBMIT].elapsed_s = (double)(atomic_load(&run->last_confirm_ns) - t0) / 1e9;
        tp_latency_take(run, &ph[TP_SUBMIT]);
        res->rss_peak_kb = net_rss_kb(pid, true);
        res->anon_end_kb = tp_anon_kb(pid);
        res->queued = items;
        if (res->rss_base_kb > 0 && res->rss_peak_kb > res->rss_base_kb)
            res->bytes_per_queued_item =
                (double)(res->rss_peak_kb - res->rss_base_kb) * 1024.0 / (double)items;
        if (res->anon_base_kb > 0 && res->anon_end_kb > res->anon_base_kb)
            res->anon_bytes_per_queued_item =
                (double)(res->anon_end_kb - res->anon_base_kb) * 1024.0 / (double)items;
        if (!ok)
            return false;
        while (atomic_load(&run->gone) < res->producers && !net_stopping(NULL))
            net_sleep_ms(1);
        t0 = clock_mono_ns();
        atomic_store(&run->consume, true);
        ok = tp_phase_watch(run, res->label, "drain", items, tpj_done, 0, t0, &ph[TP_DRAIN]);
        ph[TP_DRAIN].elapsed_s = (double)(atomic_load(&run->last_ack_ns) - t0) / 1e9;
        ph[TP_DRAIN].acks_sent_s = (double)(atomic_load(&run->acks_sent_ns) - t0) / 1e9;
        if (!ok)
            return false;
    } else {
        /* a grid cell: the first phase's items count as done, the end-to-end phase alone runs */
        atomic_store(&run->consumed_items, items);
        atomic_store(&run->acked_items, items);
        atomic_store(&run->consume, true);
    }
    t0 = clock_mono_ns();
    atomic_store(&run->go, 2);
    ok = tp_phase_watch(run, res->label, "e2e", 2 * items, tpj_done, 0, t0, &ph[TP_E2E]);
    ph[TP_E2E].elapsed_s = (double)(atomic_load(&run->last_ack_ns) - t0) / 1e9;
    ph[TP_E2E].acks_sent_s = (double)(atomic_load(&run->acks_sent_ns) - t0) / 1e9;
    tp_latency_take(run, &ph[TP_E2E]);
    return ok;
}

static void tpj_threads_join(tpj_thread_t *xs, size_t n)
{
    for (size_t i = 0; xs != NULL && i < n; i++) {
        if (xs[i].started)
            pthread_join(xs[i].thread, NULL);
        xs[i].started = false;
    }
}

static bool tpj_threads_start(tpj_thread_t *xs, uint32_t n, tp_run_t *run, const tp_js_cfg_t *cfg,
                              void *(*fn)(void *))
{
    for (uint32_t i = 0; i < n; i++) {
        xs[i].run = run;
        xs[i].cfg = cfg;
        xs[i].index = i;
        xs[i].count = n;
        pthread_mutex_init(&xs[i].mu, NULL);
        xs[i].started = pthread_create(&xs[i].thread, NULL, fn, &xs[i]) == 0;
        if (!xs[i].started)
            return false;
    }
    return true;
}

bool tp_js_run(const tp_opts_t *o, const tp_workload_t *wl, const tp_js_cfg_t *cfg, tp_role_t role,
               uint64_t items, tp_result_t *res)
{
    bool ok = false, have_run = false, stream = false;
    tp_run_t run;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    uint32_t producers = cfg->producers, consumers = cfg->consumers;
    tpj_thread_t *prod = calloc(producers, sizeof(*prod)), *cons = calloc(consumers, sizeof(*cons));
    char what[96];
    memset(res, 0, sizeof(*res));
    tp_js_cfg_format(cfg, what, sizeof(what));
    snprintf(res->system, sizeof(res->system), "jetstream");
    snprintf(res->durability, sizeof(res->durability), "file");
    snprintf(res->store, sizeof(res->store), "file");
    snprintf(res->label, sizeof(res->label), "jetstream%s %.60s%s",
             role == TP_ROLE_GRID ? " grid" : "", what, wl->uniform ? ", uniform, best case" : "");
    res->role = role;
    res->shapes = wl->shapes;
    res->js = *cfg;
    res->producers = producers;
    res->consumers = consumers;
    res->items = role == TP_ROLE_GRID ? items : o->items;
    if (prod == NULL || cons == NULL || tp_run_init(&run, o, wl, res->items, 'j') != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    run.e2e_only = role == TP_ROLE_GRID;
    have_run = true;
    natsStatus s = tpj_connect(&run, "control", 0, &nc);
    if (s == NATS_OK)
        s = natsConnection_JetStream(&js, nc, NULL);
    if (s != NATS_OK) {
        snprintf(res->error, sizeof(res->error), "connect: %s", natsStatus_GetText(s));
        goto out;
    }
    if (tpj_stream_create(js, wl->models, res->error, sizeof(res->error)) != 0)
        goto out;
    stream = true;
    run.system = js;
    run.files = tp_files_open(net_server_store_dir());
    bool threads = tpj_threads_start(prod, producers, &run, cfg, tpj_producer_main) &&
                   tpj_threads_start(cons, consumers, &run, cfg, tpj_consumer_main);
    uint64_t until = clock_mono_ns() + NET_READY_MS * 1000000ull;
    while (threads && atomic_load(&run.ready) < producers + consumers && clock_mono_ns() < until &&
           !net_stopping(NULL))
        net_sleep_ms(5);
    if (!threads || atomic_load(&run.ready) < producers + consumers || run.error[0] != '\0') {
        snprintf(res->error, sizeof(res->error), "clients not ready: %.200s",
                 run.error[0] ? run.error : "timeout");
        goto out;
    }
    res->ran = tpj_phases(&run, res, net_server_pid());
    atomic_store(&run.stop, true);
    tpj_threads_join(prod, producers);
    tpj_threads_join(cons, consumers);
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    if (js_GetStreamInfo(&si, js, TPJ_STREAM, NULL, &jerr) == NATS_OK && si != NULL &&
        si->State.Msgs != 0)
        tp_run_error(&run, "%" PRIu64 " messages left in the stream after the run", si->State.Msgs);
    jsStreamInfo_Destroy(si);
    tp_run_tally(&run, res);
    if (run.error[0] != '\0')
        snprintf(res->error, sizeof(res->error), "%s", run.error);
    ok = true;
out:
    if (have_run) {
        atomic_store(&run.stop, true);
        tpj_threads_join(prod, producers);
        tpj_threads_join(cons, consumers);
        tp_files_close(run.files);
        tp_run_free(&run);
    }
    for (uint32_t i = 0; prod != NULL && i < producers; i++) {
        free(prod[i].failed);
        if (prod[i].run != NULL)
            pthread_mutex_destroy(&prod[i].mu);
    }
    for (uint32_t i = 0; cons != NULL && i < consumers; i++)
        if (cons[i].run != NULL)
            pthread_mutex_destroy(&cons[i].mu);
    if (stream) {
        jsErrCode derr = 0;
        js_DeleteStream(js, TPJ_STREAM, NULL, &derr);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(prod);
    free(cons);
    res->ok = ok && tp_result_clean(res);
    return ok;
}
