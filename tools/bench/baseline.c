/*
 * baseline.c - lanesched-bench baseline: the same trace through what a NATS user would build
 * instead of lanesched: a JetStream work-queue stream with file storage, producers publishing
 * one message per item, and the same simulated GPU workers on a pull consumer acking each
 * message. `live --baseline` runs it after the lanesched runs on the same trace; `baseline`
 * runs it alone. The flags, children, pacing, workers' GPU step and the output are live.c's
 * (bench.h, "the shared NATS run").
 *
 * Owns: the stream BENCH_WQ (subjects bench.wq.>) and its consumers for the length of a run,
 * the run's producer and worker threads and their NATS connections, the stream-info sampling.
 *
 * Invariants:
 *  1. Stream: work-queue retention, file storage, one replica. One durable pull consumer per
 *     model (bench-<model index>, filter bench.wq.<model>, explicit acks, 30 s ack wait) shared
 *     by that model's workers, so each message goes to one worker and leaves the stream at its
 *     ack.
 *  2. Every item is one message on bench.wq.<model>: the shared payload (run nonce, trace index,
 *     send time) plus its signature and tokens, with Nats-Msg-Id = the item id, so an item
 *     published again is stored once (JetStream's dedupe window standing in for lanesched's).
 *  3. Producers publish up to --batch messages asynchronously, then wait for their acks
 *     (js_PublishAsyncComplete, 5 s); items without an ack are published again with the same id,
 *     at most 10 times in all. An item's ack time is its own pub ack's (the ack handler).
 *  4. FIFO workers: a worker fetches up to max_batch_size messages (whatever is at the head of
 *     its model's queue) and serves them in stream order as consecutive batches under its own
 *     contract: a batch closes before the item that would make len > max_batch_size or
 *     len * pad_to > max_batch_tokens (a single item always fits), pad_to being the longest item
 *     rounded up to 8. That is packer_fill, lanesched's own packer, so only the grouping
 *     differs. Batches of several shapes go through gpu_serve_mixed: a hit only when the batch
 *     holds one shape the worker had cached. Each message is acked (natsMsg_Ack, no reply
 *     awaited) once its batch is served; a batch starts, for the wait figures, when the worker
 *     starts serving it.
 *  5. The run is drained when every producer is done, every stored item was served and the
 *     stream holds no message. Every wait is bounded: fetches (250 ms), ack waits (5 s x 10),
 *     JetStream becoming ready (10 s), worker start (15 s), the drain (ends after
 *     --drain-timeout without an ack) and the whole run (net_run_t.limit_s, as live's).
 *  6. The stream is deleted at the end of the run, and a stale BENCH_WQ at its start.
 *
 * Rejected alternatives:
 *  - js_Publish one message at a time: a round trip per item; a window of async publishes then
 *    a wait for their acks is what lanesched's producer does with one Submit of --batch items.
 *  - One message per batch (Fetch of 1): a worker with batch slots would not leave them empty.
 *  - Splitting a fetched list by shape before batching: that is shape-aware scheduling, the
 *    thing this baseline stands for not having.
 *  - A consumer per worker: a work-queue stream refuses overlapping consumers; the workers of
 *    a model share one pull consumer, the documented pattern.
 *  - Memory storage: the issue asks for file storage, the level that survives a restart.
 */
#include "bench.h"

#include "common/clock.h"
#include "scheduler/core/sched.h"

#include <inttypes.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BASE_STREAM       "BENCH_WQ"
#define BASE_SUBJECTS     "bench.wq.>"
#define BASE_PAYLOAD_LEN  (NET_PAYLOAD_LEN + 12u) /* + signature (8) + tokens (4) */
#define BASE_FETCH_MS     250
#define BASE_PUB_WAIT_MS  5000
#define BASE_PUB_ATTEMPTS 10
#define BASE_ACK_WAIT_NS  30000000000ll
#define BASE_JS_READY_MS  10000u
#define BASE_READY_MS     15000u
#define BASE_SAMPLE_MS    250u
#define BASE_PRINT_MS     1000u

typedef struct {
    net_run_t *run;
    uint32_t model;
    size_t index; /* worker index */
    const char *subject, *durable;
    pthread_t thread;
    bool started;
    char error[200];
    atomic_uint pub_errors; /* the ack handler's (another thread) */
    char pub_error[200];    /* written by the first pub error only */
} base_thread_t;

static void base_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void base_error_note(char *buf, size_t len, const char *what, natsStatus s, jsErrCode jerr)
{
    if (buf[0] != '\0')
        return;
    const char *last = nats_GetLastError(NULL);
    snprintf(buf, len, "%s: %s (JetStream error %d)%s%s", what, natsStatus_GetText(s), (int)jerr,
             last != NULL && last[0] ? ": " : "", last != NULL ? last : "");
}

static void base_item_encode(const net_run_t *run, uint32_t idx, uint64_t sent_ns, uint8_t *out)
{
    const wl_item_t *it = &run->trace->items[idx];
    net_payload_encode(run, idx, sent_ns, out);
    for (int i = 0; i < 8; i++)
        out[NET_PAYLOAD_LEN + i] = (uint8_t)(it->signature >> (8 * i));
    for (int i = 0; i < 4; i++)
        out[NET_PAYLOAD_LEN + 8 + i] = (uint8_t)(it->tokens >> (8 * i));
}

/* 1 with the item's index, signature and tokens from the message, 0 for another run's. */
static int base_item_decode(const net_run_t *run, const natsMsg *msg, uint32_t *idx, uint64_t *sig,
                            uint32_t *tokens)
{
    const uint8_t *p = (const uint8_t *)natsMsg_GetData((natsMsg *)msg);
    int len = natsMsg_GetDataLength((natsMsg *)msg);
    if (len < (int)BASE_PAYLOAD_LEN || !net_payload_decode(run, p, (size_t)len, idx))
        return 0;
    *sig = 0;
    *tokens = 0;
    for (int i = 0; i < 8; i++)
        *sig |= (uint64_t)p[NET_PAYLOAD_LEN + i] << (8 * i);
    for (int i = 0; i < 4; i++)
        *tokens |= (uint32_t)p[NET_PAYLOAD_LEN + 8 + i] << (8 * i);
    return 1;
}

static natsStatus base_connect(const net_run_t *run, const char *name, natsConnection **nc)
{
    natsOptions *no = NULL;
    natsStatus s = natsOptions_Create(&no);
    if (s == NATS_OK)
        s = natsOptions_SetURL(no, run->url);
    if (s == NATS_OK)
        s = natsOptions_SetName(no, name);
    if (s == NATS_OK)
        s = natsConnection_Connect(nc, no);
    natsOptions_Destroy(no);
    return s;
}

/* ---- producers (invariants 2 and 3) ---------------------------------------------------------- */

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

static void *base_producer_main(void *arg)
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

/* ---- workers (invariant 4) ---------------------------------------------------------------------
 */

typedef struct {
    natsMsg **msgs;
    uint32_t *idx, *tokens;
    uint64_t *sigs;
    size_t n;
} base_batch_t;

/* Serves and acks the fetched items [off, off + n) as one batch padded to pad_to. */
static void base_batch_serve(base_thread_t *x, const base_batch_t *b, size_t off, size_t n,
                             uint32_t pad_to)
{
    net_run_t *run = x->run;
    net_worker_serve(run, run->workers[x->index], b->idx + off, b->sigs + off, b->tokens + off, n,
                     pad_to);
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
 * batches by the project's packer (invariant 4). */
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
        b->idx[b->n] = idx;
        b->sigs[b->n] = sig;
        b->tokens[b->n] = tokens;
        b->n++;
    }
    for (size_t off = 0; off < b->n;) {
        packer_result_t pr;
        if (packer_fill(&contract, b->tokens + off, b->n - off, &pr) != SCHED_OK) {
            atomic_fetch_add(&run->worker_errors, 1); /* a contract the packer refuses */
            pr.count = 1;
            pr.pad_to = (uint32_t)packer_pad(b->tokens[off]);
        }
        base_batch_serve(x, b, off, pr.count, pr.pad_to);
        off += pr.count;
    }
    b->n = 0;
}

static void *base_worker_main(void *arg)
{
    base_thread_t *x = arg;
    net_run_t *run = x->run;
    size_t cap = run->opts->gpu.max_batch_size;
    base_batch_t b = {.msgs = calloc(cap, sizeof(natsMsg *)),
                      .idx = calloc(cap, sizeof(uint32_t)),
                      .tokens = calloc(cap, sizeof(uint32_t)),
                      .sigs = calloc(cap, sizeof(uint64_t))};
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    natsSubscription *sub = NULL;
    char name[64];
    jsErrCode jerr = 0;
    bool ready = false;

    if (b.msgs == NULL || b.idx == NULL || b.tokens == NULL || b.sigs == NULL) {
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
    natsSubscription_Destroy(sub); /* not Unsubscribe: the consumer is the stream's, not ours */
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(b.msgs);
    free(b.idx);
    free(b.tokens);
    free(b.sigs);
    return NULL;
}

/* ---- the run -----------------------------------------------------------------------------------
 */

static void base_threads_join(base_thread_t *xs, size_t n, const char *what)
{
    for (size_t i = 0; xs != NULL && i < n; i++) {
        if (xs[i].started)
            pthread_join(xs[i].thread, NULL);
        xs[i].started = false;
        if (xs[i].error[0] != '\0')
            fprintf(stderr, "lanesched-bench: JetStream %s %zu: %s\n", what, i, xs[i].error);
        if (atomic_load(&xs[i].pub_errors) > 0)
            fprintf(stderr, "lanesched-bench: JetStream %s %zu: %u pub errors, the first: %s\n",
                    what, i, atomic_load(&xs[i].pub_errors), xs[i].pub_error);
        xs[i].error[0] = '\0';
        atomic_store(&xs[i].pub_errors, 0);
    }
}

/* The stream (invariant 1), retried while JetStream is still starting. */
static int base_stream_create(net_run_t *run, jsCtx *js)
{
    const char *subjects[] = {BASE_SUBJECTS};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = BASE_STREAM;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Retention = js_WorkQueuePolicy;
    sc.Storage = js_FileStorage;
    sc.Replicas = 1;
    uint64_t until = clock_mono_ns() + BASE_JS_READY_MS * 1000000ull;
    for (;;) {
        jsStreamInfo *si = NULL;
        jsErrCode jerr = 0;
        js_DeleteStream(js, BASE_STREAM, NULL, &jerr); /* a stale one (invariant 6) */
        jerr = 0;
        natsStatus s = js_AddStream(&si, js, &sc, NULL, &jerr);
        jsStreamInfo_Destroy(si);
        if (s == NATS_OK)
            return 0;
        if (clock_mono_ns() > until || net_stopping(run)) {
            base_error_note(run->error, sizeof(run->error),
                            "cannot create the JetStream stream (is JetStream enabled?)", s, jerr);
            return -1;
        }
        base_sleep_ms(100);
    }
}

int net_baseline_run(net_run_t *run)
{
    int rc = -1;
    const net_opts_t *o = run->opts;
    const net_trace_t *t = run->trace;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    bool stream = false;
    base_thread_t *workers = calloc(run->n_workers, sizeof(*workers));
    base_thread_t *producers = calloc(t->cfg.models, sizeof(*producers));
    char(*subjects)[80] = calloc(t->cfg.models, sizeof(*subjects));
    char(*durables)[32] = calloc(t->cfg.models, sizeof(*durables));
    const char *label = "jetstream";
    jsErrCode jerr = 0;
    int server_pid = 0;

    if (workers == NULL || producers == NULL || subjects == NULL || durables == NULL) {
        snprintf(run->error, sizeof(run->error), "out of memory");
        goto out;
    }
    natsStatus s = base_connect(run, "bench-jetstream-control", &nc);
    if (s == NATS_OK)
        s = natsConnection_JetStream(&js, nc, NULL);
    if (s != NATS_OK) {
        base_error_note(run->error, sizeof(run->error), "connect", s, 0);
        goto out;
    }
    if (base_stream_create(run, js) != 0)
        goto out;
    stream = true;
    for (uint32_t m = 0; m < t->cfg.models; m++) {
        snprintf(subjects[m], sizeof(subjects[m]), "bench.wq.%s", wl_model_name(m));
        snprintf(durables[m], sizeof(durables[m]), "bench-%" PRIu32, m);
        jsConsumerConfig cc;
        jsConsumerConfig_Init(&cc);
        cc.Durable = durables[m];
        cc.FilterSubject = subjects[m];
        cc.AckPolicy = js_AckExplicit;
        cc.AckWait = BASE_ACK_WAIT_NS;
        cc.MaxAckPending = 100000;
        jsConsumerInfo *ci = NULL;
        s = js_AddConsumer(&ci, js, BASE_STREAM, &cc, NULL, &jerr);
        jsConsumerInfo_Destroy(ci);
        if (s != NATS_OK) {
            base_error_note(run->error, sizeof(run->error), "add consumer", s, jerr);
            goto out;
        }
    }
    server_pid = net_server_pid();
    if (server_pid > 0) {
        net_rss_peak_reset(server_pid);
        run->rss_base_kb = run->rss_peak_kb = net_rss_kb(server_pid, false);
    }

    for (size_t k = 0; k < run->n_workers; k++) {
        uint32_t m = (uint32_t)(k / o->workers);
        workers[k] = (base_thread_t){
            .run = run, .model = m, .index = k, .subject = subjects[m], .durable = durables[m]};
        workers[k].started =
            pthread_create(&workers[k].thread, NULL, base_worker_main, &workers[k]) == 0;
        if (!workers[k].started)
            atomic_fetch_add(&run->workers_failed, 1);
    }
    uint64_t until = clock_mono_ns() + BASE_READY_MS * 1000000ull;
    while (atomic_load(&run->workers_ready) + atomic_load(&run->workers_failed) < run->n_workers &&
           clock_mono_ns() < until && !net_stopping(run))
        base_sleep_ms(10);
    if (atomic_load(&run->workers_ready) < run->n_workers) {
        snprintf(run->error, sizeof(run->error), "%u of %zu JetStream workers subscribed",
                 atomic_load(&run->workers_ready), run->n_workers);
        goto out;
    }
    run->t0_ns = clock_mono_ns() + 20000000ull;
    for (uint32_t m = 0; m < t->cfg.models; m++) {
        producers[m] = (base_thread_t){.run = run, .model = m, .subject = subjects[m]};
        producers[m].started =
            pthread_create(&producers[m].thread, NULL, base_producer_main, &producers[m]) == 0;
        if (!producers[m].started) {
            atomic_fetch_add(&run->failed_items, t->n_by_model[m]);
            atomic_fetch_add(&run->producers_done, 1);
        }
    }

    /* Invariant 5. */
    uint64_t deadline = run->t0_ns + (uint64_t)(run->limit_s * 1e9), progress_at = 0;
    uint64_t next_sample = clock_mono_ns(), served_last = 0;
    uint64_t next_print = run->t0_ns + BASE_PRINT_MS * 1000000ull, print_at = run->t0_ns;
    uint64_t acked_prev = 0, msgs = 0;
    for (;;) {
        struct timespec ts = {(time_t)(next_sample / 1000000000ull),
                              (long)(next_sample % 1000000000ull)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        uint64_t now = clock_mono_ns();
        next_sample = now + BASE_SAMPLE_MS * 1000000ull;
        jsStreamInfo *si = NULL;
        jerr = 0;
        if (js_GetStreamInfo(&si, js, BASE_STREAM, NULL, &jerr) == NATS_OK && si != NULL) {
            msgs = si->State.Msgs;
            if (msgs > run->peak_queued)
                run->peak_queued = msgs;
        }
        jsStreamInfo_Destroy(si);
        if (server_pid > 0) {
            long kb = net_rss_kb(server_pid, false);
            if (kb > run->rss_peak_kb)
                run->rss_peak_kb = kb;
        }
        if (now >= next_print) {
            gpu_stats_t tally;
            net_run_tally_get(run, &tally);
            uint64_t acked = atomic_load(&run->acked_items);
            double dt = (double)(now - print_at) / 1e9;
            net_progress_show(
                run, label, dt > 0 ? (double)(acked - acked_prev) / dt : 0.0, (double)msgs, -1.0,
                report_pct(tally.padded_tokens - tally.real_tokens, tally.padded_tokens),
                tally.batches > 0 ? report_pct(tally.hits, tally.batches) : -1.0);
            acked_prev = acked;
            print_at = now;
            next_print = now + BASE_PRINT_MS * 1000000ull;
        }
        uint64_t served = atomic_load(&run->acked_items);
        if (served != served_last || progress_at == 0) {
            served_last = served;
            progress_at = now;
        }
        if (atomic_load(&run->producers_done) == t->cfg.models) {
            if (msgs == 0 && atomic_load(&run->served_items) >= atomic_load(&run->accepted_items)) {
                run->drained = true;
                break;
            }
            if (now - progress_at > (uint64_t)(o->drain_timeout_s * 1e9)) {
                net_progress_end(run);
                fprintf(stderr,
                        "lanesched-bench: JetStream: not drained; nothing acked for %.0f s after "
                        "the last publish\n",
                        o->drain_timeout_s);
                break;
            }
        }
        if (net_stopping(run))
            break;
        if (now > deadline) {
            net_progress_end(run);
            fprintf(stderr, "lanesched-bench: JetStream: stopped at the run's limit of %.0f s\n",
                    run->limit_s);
            break;
        }
    }
    net_progress_end(run);
    rc = 0;
out:
    atomic_store(&run->stop, true);
    base_threads_join(producers, producers != NULL ? t->cfg.models : 0, "producer");
    base_threads_join(workers, workers != NULL ? run->n_workers : 0, "worker");
    if (rc == 0 && server_pid > 0) {
        long hwm = net_rss_kb(server_pid, true);
        if (hwm > run->rss_peak_kb)
            run->rss_peak_kb = hwm;
    }
    if (stream) {
        jerr = 0;
        js_DeleteStream(js, BASE_STREAM, NULL, &jerr);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(workers);
    free(producers);
    free(subjects);
    free(durables);
    return rc;
}

int bench_baseline_main(int argc, char **argv)
{
    return net_main(argc, argv, true);
}
