/*
 * baseline.c - lanesched-bench baseline: the same trace through what a NATS user would build
 * instead of lanesched: a JetStream work-queue stream with file storage, producers publishing
 * one message per item (baseline_producer.c), and the same simulated GPU workers on a pull
 * consumer acking each message (baseline_worker.c). `live --baseline` runs it after the
 * lanesched runs on the same trace; `baseline` runs it alone. The flags, children, pacing,
 * workers' GPU step and the output are the shared NATS layer's (net.h).
 *
 * Owns: the stream BENCH_WQ (subjects bench.wq.>) and its consumers for the length of a run,
 * the run's producer and worker threads, the stream-info sampling, the item's message format.
 *
 * Invariants:
 *  1. Stream: work-queue retention, file storage, one replica. One durable pull consumer per
 *     model (bench-<model index>, filter bench.wq.<model>, explicit acks, 30 s ack wait) shared
 *     by that model's workers, so each message goes to one worker and leaves the stream at its
 *     ack.
 *  2. Every item is one message on bench.wq.<model>: the shared payload (run nonce, trace index,
 *     send time) plus its signature and tokens, with Nats-Msg-Id = the item id, so an item
 *     published again is stored once (JetStream's dedupe window standing in for lanesched's).
 *  3. The run is drained when every producer is done, every stored item was served and the
 *     stream holds no message. Every wait is bounded: fetches (250 ms), ack waits (5 s x 10),
 *     JetStream becoming ready (10 s), worker start (15 s), the drain (ends after
 *     --drain-timeout without an ack) and the whole run (net_run_t.limit_s, as live's).
 *  4. The stream is deleted at the end of the run, and a stale BENCH_WQ at its start.
 *
 * Rejected alternatives:
 *  - A consumer per worker: a work-queue stream refuses overlapping consumers; the workers of
 *    a model share one pull consumer, the documented pattern.
 *  - Memory storage: lanesched's disk store is compared with file storage, the level that survives
 * a restart.
 */
#include "baseline.h"

#include "baseline_int.h"
#include "common/clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BASE_SUBJECTS    "bench.wq.>"
#define BASE_ACK_WAIT_NS 30000000000ll
#define BASE_JS_READY_MS 10000u
#define BASE_READY_MS    15000u
#define BASE_SAMPLE_MS   250u
#define BASE_PRINT_MS    1000u

void base_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void base_error_note(char *buf, size_t len, const char *what, natsStatus s, jsErrCode jerr)
{
    if (buf[0] != '\0')
        return;
    const char *last = nats_GetLastError(NULL);
    snprintf(buf, len, "%s: %s (JetStream error %d)%s%s", what, natsStatus_GetText(s), (int)jerr,
             last != NULL && last[0] ? ": " : "", last != NULL ? last : "");
}

void base_item_encode(const net_run_t *run, uint32_t idx, uint64_t sent_ns, uint8_t *out)
{
    const wl_item_t *it = &run->trace->items[idx];
    net_payload_encode(run, idx, sent_ns, out);
    for (int i = 0; i < 8; i++)
        out[NET_PAYLOAD_LEN + i] = (uint8_t)(it->signature >> (8 * i));
    for (int i = 0; i < 4; i++)
        out[NET_PAYLOAD_LEN + 8 + i] = (uint8_t)(it->tokens >> (8 * i));
}

int base_item_decode(const net_run_t *run, const natsMsg *msg, uint32_t *idx, uint64_t *sig,
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

natsStatus base_connect(const net_run_t *run, const char *name, natsConnection **nc)
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

/* ---- the run --------------------------------------------------------------------------------- */

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
        js_DeleteStream(js, BASE_STREAM, NULL, &jerr); /* a stale one (invariant 4) */
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

/* The run through the stream on run->url. 0, or -1 when it could not be set up (run->error). */
static int base_stream_run(net_run_t *run)
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

    /* Invariant 3. */
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

void base_run(const net_opts_t *o, const net_trace_t *t, const char *url, net_result_t *res)
{
    net_run_t run;
    memset(res, 0, sizeof(*res));
    snprintf(res->system, sizeof(res->system), "jetstream");
    snprintf(res->durability, sizeof(res->durability), "file");
    if (net_run_init(&run, o, t, url, 'j') != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        return;
    }
    if (base_stream_run(&run) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", run.error);
    } else if (net_result_fill(&run, res) != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
    } else {
        res->ran = true;
    }
    net_run_free(&run);
}

int base_main(int argc, char **argv)
{
    net_session_t s;
    if (!net_session_open(&s, argc, argv, true))
        return net_session_close(&s);
    if (!net_stopping(NULL)) {
        net_result_t res;
        base_run(&s.opts, &s.trace, net_url(), &res);
        net_session_result_add(&s, &res);
    }
    net_session_report(&s);
    return net_session_close(&s);
}
