/*
 * live.c - lanesched-bench live: one trace replayed over NATS against lanesched by producer
 * threads and simulated GPU workers, at one or both durability levels, and with --baseline the
 * same trace through JetStream (baseline.c) in the same session, for the end-to-end items/s
 * ratio. The flags, children, pacing, the workers' GPU step and the output are the shared NATS
 * layer's (net.h).
 *
 * Owns: the live runs: one producer thread per model (Submit requests paced by the trace), the
 * workers (one thread each, its own connection, lc_consumer and the run's gpu_t), lanes.stats
 * and VmRSS sampling and the drain.
 *
 * Invariants:
 *  1. Each item is submitted once, as <run tag>-<trace index> (net.c invariant 1); the library
 *     retries with the same bytes, so the daemon's dedupe never merges two items.
 *  2. Token difference = tokens_received - tokens_completed between lanes.stats taken before the
 *     load and after the drain (deltas, so --url works on a daemon that ran before). Nonzero, a
 *     run that did not drain, an item no system stored or an item delivered with another
 *     prefix_tokens than its producer sent makes the exit status 1.
 *  3. Every wait is bounded: submits (2 s x 10 retries; a producer stops after two failed
 *     requests in a row), pulls (250 ms), acks (5 s x 2), the first lanes.stats (5 s), worker
 *     registration (NET_READY_MS), the drain (ends after --drain-timeout without a completion)
 *     and the whole run (net_run_t.limit_s); the children's startup is net_env.c's.
 *
 * Rejected alternatives:
 *  - One shared NATS connection: a connection per producer and per worker is what separate
 *    processes would have, and no thread's traffic queues behind another's.
 *  - Pull-then-wait workers: the contract asks to keep credits outstanding, so each worker sends
 *    its next one-batch pull as soon as a batch arrives (the batch after it is packed while this
 *    one is served); JetStream's Fetch loop is the baseline's equivalent.
 *  - Fire-and-forget acks: the AckReply says the tombstones are durable, so the worker waits for
 *    it as lanesched-consume does (JetStream's natsMsg_Ack does not wait; the output says so).
 */
#include "live.h"

#include "baseline.h"
#include "clients/c/lanes_client.h"
#include "common/clock.h"
#include "live_int.h"

#include <inttypes.h>
#include <math.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIVE_PULL_WAIT_MS        250
#define LIVE_PREFETCH_EXPIRES_MS 1000u
#define LIVE_SUBMIT_TIMEOUT_MS   2000
#define LIVE_SUBMIT_RETRIES      10u
#define LIVE_SUBMIT_GIVE_UP      2u /* consecutive failed requests that end a producer */
#define LIVE_ACK_TIMEOUT_MS      5000

/* ---- live: producers and workers ------------------------------------------------------------ */

typedef struct {
    net_run_t *run;
    uint32_t model;
    size_t index; /* worker index */
    pthread_t thread;
    bool started;
    char error[200];
} live_thread_t;

static void live_error_note(live_thread_t *x, const char *fmt, const char *a, const char *b)
{
    if (x->error[0] == '\0')
        snprintf(x->error, sizeof(x->error), fmt, a, b);
}

static void *live_producer_main(void *arg)
{
    live_thread_t *x = arg;
    net_run_t *run = x->run;
    const net_trace_t *t = run->trace;
    const char *model = wl_model_name(x->model);
    const uint32_t *ix = t->by_model[x->model];
    size_t n = t->n_by_model[x->model], next = 0, batch = run->opts->batch;
    lc_client_t *client = NULL;
    codec_work_item_t *wi = calloc(batch, sizeof(*wi));
    char(*ids)[40] = calloc(batch, sizeof(*ids));
    uint8_t(*payloads)[NET_PAYLOAD_LEN] = calloc(batch, sizeof(*payloads));
    lc_item_result_t *results = calloc(batch, sizeof(*results));
    uint32_t *tokens = calloc(batch, sizeof(*tokens));
    char name[64], err[256] = "";
    unsigned failures = 0;

    if (wi == NULL || ids == NULL || payloads == NULL || results == NULL || tokens == NULL) {
        live_error_note(x, "%s%s", "out of memory", "");
        goto out;
    }
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    snprintf(name, sizeof(name), "bench-%s-producer-%" PRIu32, run->tag, x->model);
    cc.servers = run->url;
    cc.prefix = run->opts->prefix;
    cc.name = name;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &client);
    if (st != LC_OK) {
        live_error_note(x, "connect: %s: %s", lc_status_str(st), err);
        goto out;
    }
    while (next < n) {
        size_t k = net_pace_take(run, x->model, next);
        if (k == 0)
            break;
        uint64_t sent = clock_mono_ns();
        for (size_t j = 0; j < k; j++) {
            uint32_t i = ix[next + j];
            const wl_item_t *it = &t->items[i];
            int len = snprintf(ids[j], sizeof(ids[j]), "%s-%" PRIu32, run->tag, i);
            net_payload_encode(run, i, sent, payloads[j]);
            /* A signature of 0 cannot be sent (proto3: absent); never seen in practice. */
            wi[j] = (codec_work_item_t){.id = {(const uint8_t *)ids[j], (size_t)len},
                                        .model = model,
                                        .has_signature = true,
                                        .signature = it->signature != 0 ? it->signature : 1,
                                        .tokens = it->tokens,
                                        .prefix_tokens = it->prefix_tokens,
                                        .payload = {payloads[j], NET_PAYLOAD_LEN}};
            tokens[j] = it->tokens;
            atomic_store(&run->sent_ns[i], sent);
        }
        lc_submit_summary_t sum;
        st = lc_submit_request(client, model, wi, k, LIVE_SUBMIT_TIMEOUT_MS, LIVE_SUBMIT_RETRIES,
                               results, &sum);
        uint64_t acked = clock_mono_ns();
        for (size_t j = 0; j < k; j++) {
            uint32_t i = ix[next + j];
            if (st == LC_OK && results[j].status != CODEC_ITEM_REJECTED) {
                atomic_store(&run->acked_ns[i], acked);
                atomic_fetch_add(&run->accepted_items, 1);
                atomic_fetch_add(&run->accepted_tokens, tokens[j]);
                if (results[j].status == CODEC_ITEM_DUPLICATE)
                    atomic_fetch_add(&run->duplicates, 1);
            } else {
                atomic_fetch_add(&run->failed_items, 1);
                if (st == LC_OK)
                    live_error_note(x, "item rejected: %s%s", results[j].reason, "");
            }
        }
        next += k;
        if (st == LC_OK) {
            failures = 0;
            continue;
        }
        live_error_note(x, "submit: %s: %s", lc_status_str(st), lc_client_error_get(client));
        if (++failures >= LIVE_SUBMIT_GIVE_UP)
            break; /* nobody stores anything any more: the rest counts as failed */
    }
out:
    if (next < n)
        atomic_fetch_add(&run->failed_items, n - next); /* never submitted */
    atomic_fetch_add(&run->producers_done, 1);
    lc_client_close(client);
    free(wi);
    free(ids);
    free(payloads);
    free(results);
    free(tokens);
    return NULL;
}

/* Serves one batch, pricing a miss with the prefix_tokens the Batch carries, and acks it whole.
 * An item whose prefix_tokens differs from its trace row's is a wire mismatch, which fails the
 * run: the daemon did not carry what its producer sent. */
static void live_batch_handle(live_thread_t *x, lc_consumer_t *c, const codec_batch_t *b,
                              net_items_t *s)
{
    net_run_t *run = x->run;
    size_t m = 0;
    for (size_t i = 0; i < b->n_items; i++) {
        if (!net_payload_decode(run, b->items[i].payload.ptr, b->items[i].payload.len,
                                &s->idx[m])) {
            atomic_fetch_add(&run->foreign_items, 1);
            continue;
        }
        s->sigs[m] = b->signature;
        s->tokens[m] = b->items[i].tokens;
        s->prefix[m] = b->items[i].prefix_tokens;
        if (s->prefix[m] != run->trace->items[s->idx[m]].prefix_tokens)
            atomic_fetch_add(&run->wire_mismatches, 1);
        m++;
    }
    net_worker_serve(run, run->workers[x->index], s, 0, m, b->pad_to);
    lc_ack_reply_t reply;
    lc_status_t st = lc_ack_all_send(c, b->batch_id, LIVE_ACK_TIMEOUT_MS, &reply);
    if (st == LC_OK) {
        net_worker_acked(run, m);
    } else {
        atomic_fetch_add(&run->worker_errors, 1);
        live_error_note(x, "ack: %s: %s", lc_status_str(st), lc_consumer_error_get(c));
    }
}

static void *live_worker_main(void *arg)
{
    live_thread_t *x = arg;
    net_run_t *run = x->run;
    const net_opts_t *o = run->opts;
    lc_client_t *client = NULL;
    lc_consumer_t *c = NULL;
    size_t cap = o->gpu.max_batch_size + 1;
    net_items_t s;
    char name[64], err[256] = "";
    bool ready = false;

    if (net_items_init(&s, cap) != 0) {
        live_error_note(x, "%s%s", "out of memory", "");
        goto out;
    }
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    snprintf(name, sizeof(name), "bench-%s-worker-%zu", run->tag, x->index);
    cc.servers = run->url;
    cc.prefix = o->prefix;
    cc.name = name;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &client);
    if (st != LC_OK) {
        live_error_note(x, "connect: %s: %s", lc_status_str(st), err);
        goto out;
    }
    lc_consumer_config_t kc;
    lc_consumer_config_init(&kc);
    kc.model = wl_model_name(x->model);
    kc.max_batch_size = o->gpu.max_batch_size;
    kc.max_batch_tokens = o->gpu.max_batch_tokens;
    kc.max_input_tokens = o->gpu.max_input_tokens;
    kc.name = name;
    kc.cache_shapes = o->gpu.cache_shapes;
    if (o->declare_cost) { /* Register's cost fields: the simulated worker's, in wall time */
        kc.batch_fixed_us = (uint32_t)((double)o->gpu.batch_fixed_ns * o->time_scale / 1000.0);
        kc.token_ns = (uint32_t)(o->gpu.ns_per_padded_token * o->time_scale + 0.5);
    }
    kc.request_timeout_ms = LIVE_ACK_TIMEOUT_MS;
    kc.request_retries = 2;
    kc.pull_max_batches = 1;
    st = lc_consumer_open(client, &kc, &c);
    if (st != LC_OK) {
        live_error_note(x, "register: %s: %s", lc_status_str(st), lc_client_error_get(client));
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->workers_ready, 1);
    while (!net_stopping(run)) {
        codec_batch_t *b = NULL;
        st = lc_batch_next(c, LIVE_PULL_WAIT_MS, &b);
        if (st == LC_OK) {
            /* The next batch is packed while this one is served (one credit outstanding). */
            lc_pull_send(c, 1, LIVE_PREFETCH_EXPIRES_MS);
            live_batch_handle(x, c, b, &s);
            codec_batch_destroy(b);
        } else if (st == LC_EEMPTY || st == LC_ETIMEOUT) {
            continue;
        } else if (st == LC_EUNKNOWN_CONSUMER ||
                   (st == LC_EREFUSED && strstr(lc_consumer_error_get(c), "unknown_consumer"))) {
            /* The daemon's error is "unknown_consumer: ...", which lc_batch_next reports as
             * LC_EREFUSED: matched on the code word here. */
            atomic_fetch_add(&run->worker_errors, 1);
            if (lc_consumer_register(c) != LC_OK)
                net_sleep_ms(100);
        } else {
            atomic_fetch_add(&run->worker_errors, 1);
            live_error_note(x, "pull: %s: %s", lc_status_str(st), lc_consumer_error_get(c));
            net_sleep_ms(100);
        }
    }
    lc_bye_send(c, 2000);
out:
    if (!ready)
        atomic_fetch_add(&run->workers_failed, 1);
    lc_consumer_close(c);
    lc_client_close(client);
    net_items_fini(&s);
    return NULL;
}

/* ---- live: one run against one daemon -------------------------------------------------------- */

static void live_threads_join(live_thread_t *xs, size_t n)
{
    for (size_t i = 0; xs != NULL && i < n; i++) {
        if (xs[i].started)
            pthread_join(xs[i].thread, NULL);
        xs[i].started = false;
    }
}

static void live_threads_error_print(const live_thread_t *xs, size_t n, const char *what)
{
    for (size_t i = 0; xs != NULL && i < n; i++)
        if (xs[i].error[0] != '\0')
            fprintf(stderr, "lanesched-bench: %s %zu: %s\n", what, i, xs[i].error);
}

/* The daemon at daemon_pid (0: unknown) serves prefix on url; level and policy name the run. */
static int live_run(const net_opts_t *o, const net_trace_t *t, const char *url, const char *level,
                    const char *policy, int daemon_pid, net_result_t *res)
{
    int rc = -1;
    net_run_t run;
    natsConnection *nc = NULL;
    live_thread_t *workers = NULL, *producers = NULL;
    net_stats_t s0 = {0}, s = {0}, prev = {0};
    char label[48];
    bool have_run = false;

    memset(res, 0, sizeof(*res));
    snprintf(res->system, sizeof(res->system), "lanesched");
    snprintf(res->durability, sizeof(res->durability), "%s", level);
    snprintf(res->policy, sizeof(res->policy), "%s", policy);
    snprintf(label, sizeof(label), "lanesched %s %s", policy, level);
    char run_name[48];
    snprintf(run_name, sizeof(run_name), "%s-%s", level, policy);
    char kind = strcmp(level, "process") == 0 ? 'p' : strcmp(level, "power") == 0 ? 'w' : 'x';
    if (net_run_init(&run, o, t, url, kind) != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    have_run = true;
    natsStatus ns = natsConnection_ConnectTo(&nc, url);
    if (ns != NATS_OK) {
        snprintf(res->error, sizeof(res->error), "connect %s: %s", url, natsStatus_GetText(ns));
        goto out;
    }
    uint64_t until = clock_mono_ns() + 5000000000ull;
    while (live_stats_fetch(nc, o->prefix, &s0) != 0) {
        if (clock_mono_ns() > until || net_stopping(&run)) {
            snprintf(res->error, sizeof(res->error), "no lanesched answers on %s.stats at %s",
                     o->prefix, url);
            goto out;
        }
        net_sleep_ms(100);
    }
    if (daemon_pid > 0) {
        net_rss_peak_reset(daemon_pid);
        run.rss_base_kb = net_rss_kb(daemon_pid, false);
        run.rss_peak_kb = run.rss_base_kb;
    }

    workers = calloc(run.n_workers, sizeof(*workers));
    producers = calloc(t->cfg.models, sizeof(*producers));
    if (workers == NULL || producers == NULL) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    for (size_t k = 0; k < run.n_workers; k++) {
        workers[k] = (live_thread_t){.run = &run, .model = (uint32_t)(k / o->workers), .index = k};
        workers[k].started =
            pthread_create(&workers[k].thread, NULL, live_worker_main, &workers[k]) == 0;
        if (!workers[k].started)
            atomic_fetch_add(&run.workers_failed, 1);
    }
    until = clock_mono_ns() + NET_READY_MS * 1000000ull;
    while (atomic_load(&run.workers_ready) + atomic_load(&run.workers_failed) < run.n_workers &&
           clock_mono_ns() < until && !net_stopping(&run))
        net_sleep_ms(10);
    if (atomic_load(&run.workers_ready) < run.n_workers) {
        atomic_store(&run.stop, true);
        live_threads_join(workers, run.n_workers);
        live_threads_error_print(workers, run.n_workers, "worker");
        snprintf(res->error, sizeof(res->error), "%u of %zu workers registered",
                 atomic_load(&run.workers_ready), run.n_workers);
        goto out;
    }

    run.t0_ns = clock_mono_ns() + 20000000ull;
    for (uint32_t m = 0; m < t->cfg.models; m++) {
        producers[m] = (live_thread_t){.run = &run, .model = m};
        producers[m].started =
            pthread_create(&producers[m].thread, NULL, live_producer_main, &producers[m]) == 0;
        if (!producers[m].started) {
            atomic_fetch_add(&run.failed_items, t->n_by_model[m]);
            atomic_fetch_add(&run.producers_done, 1);
        }
    }

    /* Invariant 3: the run ends drained, stalled past the drain timeout, at its limit or on a
     * signal. */
    uint64_t deadline = run.t0_ns + (uint64_t)(run.limit_s * 1e9), progress_at = 0;
    uint64_t next_sample = clock_mono_ns(), next_print = run.t0_ns + NET_PRINT_MS * 1000000ull;
    uint64_t print_at = run.t0_ns, completed_last = 0;
    prev = s0;
    s = s0;
    for (;;) {
        net_sleep_until(next_sample);
        uint64_t now = clock_mono_ns();
        next_sample = now + NET_SAMPLE_MS * 1000000ull;
        if (live_stats_fetch(nc, o->prefix, &s) == 0) {
            uint64_t held = s.queued_items + s.inflight_items;
            if (held > run.peak_queued)
                run.peak_queued = held;
        }
        if (daemon_pid > 0) {
            long kb = net_rss_kb(daemon_pid, false);
            if (kb > run.rss_peak_kb)
                run.rss_peak_kb = kb;
        }
        if (now >= next_print) {
            gpu_stats_t tally;
            net_run_tally_get(&run, &tally);
            double dt = (double)(now - print_at) / 1e9;
            uint64_t padded = s.padded_tokens - s0.padded_tokens,
                     real = s.real_tokens - s0.real_tokens;
            net_progress_show(
                &run, label, dt > 0 ? (double)(s.items_completed - prev.items_completed) / dt : 0,
                (double)s.queued_items, (double)s.lanes, report_pct(padded - real, padded),
                tally.batches > 0 ? report_pct(tally.hits, tally.batches) : -1.0);
            prev = s;
            print_at = now;
            next_print = now + NET_PRINT_MS * 1000000ull;
        }
        if (s.items_completed != completed_last || progress_at == 0) {
            completed_last = s.items_completed;
            progress_at = now;
        }
        if (atomic_load(&run.producers_done) == t->cfg.models) {
            if (s.queued_items == 0 && s.inflight_items == 0 &&
                s.items_received - s0.items_received >= atomic_load(&run.accepted_items) &&
                s.tokens_completed - s0.tokens_completed >=
                    s.tokens_received - s0.tokens_received) {
                run.drained = true;
                break;
            }
            if (now - progress_at > (uint64_t)(o->drain_timeout_s * 1e9)) {
                net_progress_end(&run);
                fprintf(stderr,
                        "lanesched-bench: %s: not drained; nothing completed for %.0f s after the "
                        "last submit\n",
                        label, o->drain_timeout_s);
                break;
            }
        }
        if (net_stopping(&run))
            break;
        if (daemon_pid > 0 && net_daemon_exited()) {
            net_progress_end(&run);
            fprintf(stderr, "lanesched-bench: %s: lanesched exited during the run\n", label);
            net_daemon_log_print(run_name);
            daemon_pid = 0;
            break;
        }
        if (now > deadline) {
            net_progress_end(&run);
            fprintf(stderr, "lanesched-bench: %s: stopped at the run's limit of %.0f s\n", label,
                    run.limit_s);
            break;
        }
    }
    net_progress_end(&run);
    atomic_store(&run.stop, true);
    live_threads_join(producers, t->cfg.models);
    live_threads_join(workers, run.n_workers);
    live_threads_error_print(producers, t->cfg.models, "producer");
    live_threads_error_print(workers, run.n_workers, "worker");

    if (live_stats_fetch(nc, o->prefix, &s) == 0) {
        res->have_stats = true;
        live_stats_delta(&s0, &s, &res->delta);
        res->token_difference =
            (int64_t)res->delta.tokens_received - (int64_t)res->delta.tokens_completed;
        res->daemon_waste_pct =
            report_pct(res->delta.padded_tokens - res->delta.real_tokens, res->delta.padded_tokens);
    }
    if (daemon_pid > 0) {
        long hwm = net_rss_kb(daemon_pid, true);
        if (hwm > run.rss_peak_kb)
            run.rss_peak_kb = hwm;
    }
    if (net_result_fill(&run, res) != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    res->ran = true;
    rc = 0;
out:
    if (have_run) {
        atomic_store(&run.stop, true);
        live_threads_join(producers, t->cfg.models);
        live_threads_join(workers, run.n_workers);
        net_run_free(&run);
    }
    free(workers);
    free(producers);
    natsConnection_Destroy(nc);
    return rc;
}

/* ---- the live run against the simulator ----------------------------------------------------- */

/* |a - b| over the larger, in percent (0 when both are 0). */
static double live_diff_pct(double a, double b)
{
    double hi = a > b ? a : b, d = a > b ? a - b : b - a;
    return hi > 0 ? 100.0 * d / hi : 0.0;
}

/* --vs-sim: each lanesched run beside sim's run of its policy on the same trace, with the same
 * workers, contract, cost, cache and budget (the sim's clock is the trace's, so --time-scale
 * must be 1). False when a figure differs by more than the tolerance. */
static bool live_vs_sim(const net_session_t *s)
{
    const net_opts_t *o = &s->opts;
    sim_config_t sc;
    sim_config_default(&sc);
    sc.workers_per_model = o->workers;
    sc.gpu = o->gpu;
    sc.declare_cost = o->declare_cost;
    sc.slo_ns = (uint64_t)o->slo_ms * 1000000u;
    bool ok = true;
    printf("\n== live against sim on the same trace (GPU time, waste and hit rate as the workers "
           "charge and count them; tolerance %.3g%% of the larger)\n",
           o->vs_sim_pct);
    printf("%-28s %12s %12s %12s\n", "run", "gpu.s", "waste%", "hit%");
    for (size_t i = 0; i < s->n_results; i++) {
        const net_result_t *r = &s->results[i];
        if (!r->ran || strcmp(r->system, "lanesched") != 0)
            continue;
        int p = sim_policy_from_name(r->policy);
        if (p != SIM_LANES && p != SIM_LANES_SEED) {
            printf("%-28s not compared (policy %s unknown to the bench)\n", r->durability,
                   r->policy);
            continue;
        }
        sim_result_t sr;
        if (sim_run(&sc, s->trace.items, s->trace.n_items, (sim_policy_t)p, &sr) != 0 || !sr.ok) {
            printf("%-28s sim failed: %s\n", r->durability, sr.error);
            sim_result_free(&sr);
            ok = false;
            continue;
        }
        double lg = (double)r->tally.busy_ns / 1e9, sg = (double)sr.busy_ns / 1e9;
        double lw = r->waste_pct,
               sw = report_pct(sr.padded_tokens - sr.real_tokens, sr.padded_tokens);
        double lh = r->hit_pct, sh = report_pct(sr.hits, sr.batches);
        double dg = live_diff_pct(lg, sg), dw = live_diff_pct(lw, sw), dh = live_diff_pct(lh, sh);
        char name[64];
        snprintf(name, sizeof(name), "%s %s, live", r->durability, r->policy);
        printf("%-28s %12.2f %12.2f %12.2f\n", name, lg, lw, lh);
        snprintf(name, sizeof(name), "%s %s, sim", r->durability, r->policy);
        printf("%-28s %12.2f %12.2f %12.2f\n", name, sg, sw, sh);
        /* a percentage also agrees within half a point (0.8% against 0.9% waste) */
        bool same = dg <= o->vs_sim_pct && (dw <= o->vs_sim_pct || fabs(lw - sw) <= 0.5) &&
                    (dh <= o->vs_sim_pct || fabs(lh - sh) <= 0.5);
        printf("%-28s %11.1f%% %11.1f%% %11.1f%%  %s\n", "difference", dg, dw, dh,
               same ? "within the tolerance (or half a point)" : "OVER the tolerance");
        ok &= same;
        sim_result_free(&sr);
    }
    return ok;
}

/* ---- the mode ------------------------------------------------------------------------------- */

int live_main(int argc, char **argv)
{
    net_session_t s;
    if (!net_session_open(&s, argc, argv, false))
        return net_session_close(&s);
    const net_opts_t *o = &s.opts;
    static const char *const levels[] = {"process", "power"};
    static const char *const policies[] = {"lanes", "lanes-seed"};
    for (int p = 0; p < 2 && !net_stopping(NULL); p++) {
        if (o->url == NULL && !(o->policies & (1u << p)))
            continue;
        for (int l = 0; l < 2 && !net_stopping(NULL); l++) {
            if (o->url == NULL && !(o->durability & (1u << l)))
                continue;
            const char *level = o->url != NULL ? "existing" : levels[l];
            const char *policy = o->url != NULL ? "existing" : policies[p];
            int pid = 0;
            if (o->url == NULL) {
                if (net_daemon_start(o, level, policy, s.err, sizeof(s.err)) != 0)
                    return net_session_close(&s);
                pid = net_daemon_pid();
            }
            net_result_t res;
            live_run(o, &s.trace, net_url(), level, policy, pid, &res);
            net_session_result_add(&s, &res);
            net_daemon_stop();
            if (o->url != NULL)
                break;
        }
        if (o->url != NULL)
            break;
    }
    if (o->baseline && !net_stopping(NULL)) {
        net_result_t res;
        base_run(o, &s.trace, net_url(), &res);
        net_session_result_add(&s, &res);
    }
    net_session_report(&s);
    if (o->vs_sim_pct > 0 && !net_stopping(NULL) && !live_vs_sim(&s) && s.rc == 0)
        s.rc = 1;
    return net_session_close(&s);
}
