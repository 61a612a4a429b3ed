/*
 * throughput_lanes.c - one lanesched run of `throughput`: a fresh daemon at one durability level,
 * producers that keep a window of Submits in flight (lc_submit_async), consumers that keep
 * credits outstanding (prefetch) and ack without waiting (lc_ack_async_all_send), every worker
 * serving instantly. Three phases: submit-only (no consumer pulls), drain (consumers only), end
 * to end (both at once, on new items). Consumer k of a model declares a prefix cache of
 * cache_lo + k % (cache_hi - cache_lo + 1) shapes (Register.cache_shapes) and checks every batch
 * against its contract and the workload.
 *
 * Invariants:
 *  1. An item counts as confirmed only when its SubmitReply said ACCEPTED or DUPLICATE (the
 *     library resends unanswered Submits with the same ids, so a DUPLICATE is an item a lost
 *     attempt stored); consumed when a batch carried it; done when the AckReply of its batch
 *     came back. A phase's time ends at its last confirmation (submit-only) or its last AckReply
 *     (drain, end to end), never at the moment the watch noticed.
 *  2. Token difference = tokens_received - tokens_completed between lanes.stats before the load
 *     and after the run (net.c's rule for live): nonzero fails the run.
 *  3. Every wait is bounded: connecting (NET_READY_MS), each phase (throughput_run.c invariant
 *     4), the last acks and Bye (5 s each), the daemon's stop (net_env.c).
 *  4. A batch breaks the contract when it mixes models or shapes, an item's shape or tokens are
 *     not the workload's for its index, pad_to is not its longest item rounded up to 8, or it
 *     holds more than max_batch_size items or, with two or more, more than max_batch_tokens
 *     padded tokens (subjects.md, "What a batch promises"). Each such item or batch is counted
 *     and fails the run.
 *  5. Memory per queued item is the daemon's RSS growth over the items it says it holds after the
 *     submit phase (lanes.stats stored_items of every model), not over the items sent.
 *
 * Rejected alternatives:
 *  - One shared connection for every thread: separate processes would each have their own, and
 *    one connection's lock and flusher would be the bench's limit, not the daemon's.
 *  - Acks with `all` per item positions: one Ack per batch is what a consumer sends.
 */
#include "throughput_int.h"

#include "clients/c/lanes_client.h"
#include "common/clock.h"
#include "live_int.h"

#include <inttypes.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TPL_TIMEOUT_MS    10000 /* a Submit or Ack attempt */
#define TPL_RETRIES       3u
#define TPL_PULL_WAIT_MS  200
#define TPL_CLOSE_WAIT_MS 5000

typedef struct {
    tp_run_t *run;
    uint32_t index, count;
    pthread_t thread;
    bool started;
} tpl_thread_t;

static lc_client_t *tpl_connect(tpl_thread_t *x, const char *what)
{
    tp_run_t *run = x->run;
    lc_client_config_t cc;
    char name[64], err[256] = "";
    lc_client_config_init(&cc);
    snprintf(name, sizeof(name), "tp-%s-%s-%u", run->tag, what, x->index);
    cc.servers = net_url();
    cc.prefix = run->o->net.prefix;
    cc.name = name;
    /* Each thread keeps Submits or pulls in flight, so no write is waited for: the flusher
     * gathers them, as for the JetStream driver and any producer of thousands of Submits a
     * second (lanes_client.h, nats_flusher). */
    cc.nats_flusher = true;
    lc_client_t *client = NULL;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &client);
    if (st != LC_OK)
        tp_run_error(run, "%s %u: connect: %s: %s", what, x->index, lc_status_str(st), err);
    return client;
}

/* ---- producers ------------------------------------------------------------------------------ */

static void tpl_submit_done(void *closure, const lc_submit_done_t *d)
{
    tpl_thread_t *x = closure;
    tp_run_t *run = x->run;
    uint64_t ok = 0;
    for (size_t j = 0; d->status == LC_OK && j < d->n; j++) {
        if (d->results[j].status == CODEC_ITEM_REJECTED) {
            tp_run_error(run, "item %" PRIu64 " rejected: %s", d->tag + j, d->results[j].reason);
            atomic_fetch_add(&run->failed, 1);
            continue;
        }
        if (d->results[j].status == CODEC_ITEM_DUPLICATE)
            atomic_fetch_add(&run->duplicates, 1);
        ok++;
    }
    if (d->status != LC_OK) {
        tp_run_error(run, "submit: %s: %s", lc_status_str(d->status), d->error);
        atomic_fetch_add(&run->failed, d->n);
    }
    tp_confirmed_note(run, ok, d->latency_ns);
}

/* Sends items [first, end) of the phase in Submits of o->batch; false after a failure. */
static bool tpl_produce(tpl_thread_t *x, lc_client_t *client, uint64_t first, uint64_t end,
                        codec_work_item_t *items, char (*ids)[TP_ID_MAX], uint8_t *payloads)
{
    tp_run_t *run = x->run;
    const tp_opts_t *o = run->o;
    for (uint64_t i = first; i < end && !atomic_load(&run->stop);) {
        size_t n = end - i < o->batch ? (size_t)(end - i) : o->batch;
        tp_items_make(run, i, n, clock_mono_ns(), items, ids, payloads);
        lc_status_t st = lc_submit_async(client, items[0].model, items, n, i);
        if (st != LC_OK) {
            tp_run_error(run, "producer %u: submit: %s: %s", x->index, lc_status_str(st),
                         lc_client_error_get(client));
            atomic_fetch_add(&run->failed, end - i);
            return false;
        }
        i += n;
    }
    lc_status_t st = lc_submit_async_complete(client, TPL_TIMEOUT_MS * (1 + TPL_RETRIES));
    if (st != LC_OK)
        tp_run_error(run, "producer %u: %s", x->index, lc_client_error_get(client));
    return st == LC_OK;
}

static void *tpl_producer_main(void *arg)
{
    tpl_thread_t *x = arg;
    tp_run_t *run = x->run;
    const tp_opts_t *o = run->o;
    codec_work_item_t *items = calloc(o->batch, sizeof(*items));
    char(*ids)[TP_ID_MAX] = calloc(o->batch, sizeof(*ids));
    uint8_t *payloads = malloc((size_t)o->batch * o->payload_bytes);
    lc_client_t *client = NULL;
    bool ready = false;
    if (items == NULL || ids == NULL || payloads == NULL) {
        tp_run_error(run, "producer %u: out of memory", x->index);
        goto out;
    }
    for (uint32_t j = 0; j < o->batch; j++)
        tp_payload_fill(run, payloads + (size_t)j * o->payload_bytes);
    if ((client = tpl_connect(x, "producer")) == NULL)
        goto out;
    lc_submit_async_config_t ac;
    lc_submit_async_config_init(&ac);
    ac.window = o->window;
    ac.timeout_ms = TPL_TIMEOUT_MS;
    ac.retries = TPL_RETRIES;
    ac.done = tpl_submit_done;
    ac.closure = x;
    lc_status_t st = lc_submit_async_open(client, &ac);
    if (st != LC_OK) {
        tp_run_error(run, "producer %u: %s", x->index, lc_client_error_get(client));
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->ready, 1);
    static const uint32_t phases[2] = {TP_SUBMIT, TP_E2E};
    for (uint32_t k = 0; k < 2 && !atomic_load(&run->stop); k++) {
        while (atomic_load(&run->go) <= k && !atomic_load(&run->stop))
            net_sleep_ms(1);
        uint64_t first, end;
        tp_share(run, phases[k], x->index, x->count, &first, &end);
        bool ok = tpl_produce(x, client, first, end, items, ids, payloads);
        atomic_fetch_add(&run->gone, 1);
        if (!ok)
            break;
    }
out:
    if (!ready)
        atomic_fetch_add(&run->ready, 1); /* counted, so the start barrier does not wait */
    lc_client_close(client);
    free(items);
    free(ids);
    free(payloads);
    return NULL;
}

/* ---- consumers ------------------------------------------------------------------------------ */

static void tpl_ack_done(void *closure, uint64_t batch_id, lc_status_t st, const lc_ack_reply_t *r)
{
    tpl_thread_t *x = closure;
    if (st == LC_OK)
        tp_acked_note(x->run, r->acked);
    else
        tp_run_error(x->run, "consumer %u: ack of batch %" PRIu64 ": %s", x->index, batch_id,
                     lc_status_str(st));
}

/* The batch against the contract and the workload (invariant 4). */
static void tpl_batch_check(tpl_thread_t *x, const codec_batch_t *b, uint32_t model,
                            uint32_t max_batch_tokens)
{
    tp_run_t *run = x->run;
    const tp_workload_t *wl = run->wl;
    uint32_t longest = 0;
    uint64_t bad = 0;
    for (size_t i = 0; i < b->n_items; i++) {
        const codec_batch_item_t *bi = &b->items[i];
        uint64_t idx;
        if (bi->tokens > longest)
            longest = bi->tokens;
        if (bi->payload.len < TP_HEADER_LEN ||
            !tp_payload_read(run, bi->payload.ptr, bi->payload.len, &idx))
            continue; /* counted foreign */
        tp_item_t it;
        tp_workload_item(wl, run->items, idx, &it);
        if (it.model != model || it.signature != b->signature || it.tokens != bi->tokens) {
            if (bad++ == 0)
                tp_run_error(run,
                             "consumer %u: batch %" PRIu64 " item %" PRIu64 ": model %u shape "
                             "%016" PRIx64 " tokens %u, the workload says model %u shape "
                             "%016" PRIx64 " tokens %u",
                             x->index, b->batch_id, idx, model, b->signature, bi->tokens, it.model,
                             it.signature, it.tokens);
        }
    }
    uint32_t pad = (longest + 7u) / 8u * 8u;
    bool size_ok = b->n_items >= 1 && b->n_items <= run->o->max_batch_size &&
                   (b->n_items == 1 || (uint64_t)b->n_items * b->pad_to <= max_batch_tokens);
    if (b->pad_to != pad || !size_ok || strcmp(b->model, wl->names[model]) != 0) {
        if (bad++ == 0)
            tp_run_error(run,
                         "consumer %u: batch %" PRIu64 " of model %s: %zu items pad_to %u "
                         "(longest %u), contract %u items %u tokens",
                         x->index, b->batch_id, b->model, b->n_items, b->pad_to, longest,
                         run->o->max_batch_size, max_batch_tokens);
    }
    if (bad > 0)
        atomic_fetch_add(&run->contract, bad);
}

static void tpl_batch_take(tpl_thread_t *x, lc_consumer_t *c, const codec_batch_t *b,
                           uint32_t model, uint32_t max_batch_tokens)
{
    tp_run_t *run = x->run;
    atomic_fetch_add(&run->batches, 1);
    tpl_batch_check(x, b, model, max_batch_tokens);
    for (size_t i = 0; i < b->n_items; i++) {
        uint64_t idx;
        if (tp_payload_read(run, b->items[i].payload.ptr, b->items[i].payload.len, &idx))
            tp_consumed_note(run, idx);
    }
    lc_status_t st = lc_ack_async_all_send(c, b->batch_id);
    if (st != LC_OK)
        tp_run_error(run, "consumer %u: ack: %s: %s", x->index, lc_status_str(st),
                     lc_consumer_error_get(c));
}

static void *tpl_consumer_main(void *arg)
{
    tpl_thread_t *x = arg;
    tp_run_t *run = x->run;
    const tp_opts_t *o = run->o;
    char name[64];
    lc_client_t *client = NULL;
    lc_consumer_t *c = NULL;
    bool ready = false;
    uint32_t model = x->index % o->models, k_of_model = x->index / o->models;
    if ((client = tpl_connect(x, "consumer")) == NULL)
        goto out;
    lc_consumer_config_t k;
    lc_consumer_config_init(&k);
    snprintf(name, sizeof(name), "tp-%s-consumer-%u", run->tag, x->index);
    k.model = run->wl->names[model];
    k.name = name;
    k.max_batch_size = o->max_batch_size;
    k.max_batch_tokens = tp_max_batch_tokens(o);
    if (o->cache_lo > 0)
        k.cache_shapes = o->cache_lo + k_of_model % (o->cache_hi - o->cache_lo + 1);
    k.request_timeout_ms = TPL_TIMEOUT_MS;
    k.request_retries = TPL_RETRIES;
    k.prefetch = o->prefetch;
    k.ack_window = o->ack_window;
    k.ack_done = tpl_ack_done;
    k.ack_closure = x;
    lc_status_t st = lc_consumer_open(client, &k, &c);
    if (st != LC_OK) {
        tp_run_error(run, "consumer %u: register: %s: %s", x->index, lc_status_str(st),
                     lc_client_error_get(client));
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->ready, 1);
    while (!atomic_load(&run->consume) && !atomic_load(&run->stop))
        net_sleep_ms(1);
    while (!atomic_load(&run->stop)) {
        codec_batch_t *b = NULL;
        st = lc_batch_next(c, TPL_PULL_WAIT_MS, &b);
        if (st == LC_OK) {
            tpl_batch_take(x, c, b, model, k.max_batch_tokens);
            codec_batch_destroy(b);
        } else if (st == LC_EUNKNOWN_CONSUMER) {
            tp_run_error(run, "consumer %u: the daemon forgot it", x->index);
            if (lc_consumer_register(c) != LC_OK)
                net_sleep_ms(100);
        } else if (st != LC_EEMPTY && st != LC_ETIMEOUT) {
            tp_run_error(run, "consumer %u: %s: %s", x->index, lc_status_str(st),
                         lc_consumer_error_get(c));
            net_sleep_ms(50);
        }
    }
    lc_ack_async_complete(c, TPL_CLOSE_WAIT_MS);
    lc_bye_send(c, TPL_CLOSE_WAIT_MS);
out:
    if (!ready)
        atomic_fetch_add(&run->ready, 1);
    lc_consumer_close(c);
    lc_client_close(client);
    return NULL;
}

/* ---- the run ----------------------------------------------------------------------------------
 */

static uint64_t tpl_done(tp_run_t *run)
{
    uint64_t a = atomic_load(&run->consumed_items), b = atomic_load(&run->acked_items);
    return a < b ? a : b;
}

static void tpl_threads_join(tpl_thread_t *xs, size_t n)
{
    for (size_t i = 0; xs != NULL && i < n; i++)
        if (xs[i].started)
            pthread_join(xs[i].thread, NULL);
}

static bool tpl_threads_start(tpl_thread_t *xs, uint32_t n, tp_run_t *run, void *(*fn)(void *))
{
    for (uint32_t i = 0; i < n; i++) {
        xs[i] = (tpl_thread_t){.run = run, .index = i, .count = n};
        xs[i].started = pthread_create(&xs[i].thread, NULL, fn, &xs[i]) == 0;
        if (!xs[i].started)
            return false;
    }
    return true;
}

/* The daemon's memory over the items it holds after the submit phase (invariant 5). */
static void tpl_memory_take(tp_result_t *res, natsConnection *nc, const char *prefix, int pid)
{
    net_stats_t st;
    res->rss_peak_kb = net_rss_kb(pid, true);
    res->anon_end_kb = tp_anon_kb(pid);
    res->queued = live_stats_fetch(nc, prefix, &st) == 0 ? st.stored_items : 0;
    if (res->queued == 0)
        return;
    if (res->rss_base_kb > 0 && res->rss_peak_kb > res->rss_base_kb)
        res->bytes_per_queued_item =
            (double)(res->rss_peak_kb - res->rss_base_kb) * 1024.0 / (double)res->queued;
    if (res->anon_base_kb > 0 && res->anon_end_kb > res->anon_base_kb)
        res->anon_bytes_per_queued_item =
            (double)(res->anon_end_kb - res->anon_base_kb) * 1024.0 / (double)res->queued;
}

/* The phases against a ready daemon (the submit phase alone for the probe); false when one did
 * not finish. */
static bool tpl_phases(tp_run_t *run, tp_result_t *res, int pid, natsConnection *nc)
{
    const tp_opts_t *o = run->o;
    const char *label = res->label;
    tp_phase_result_t *ph = res->phase;
    uint64_t items = run->items;
    net_rss_peak_reset(pid);
    res->rss_base_kb = net_rss_kb(pid, false);
    res->anon_base_kb = tp_anon_kb(pid);

    uint64_t t0 = clock_mono_ns();
    atomic_store(&run->go, 1);
    bool ok =
        tp_phase_watch(run, label, "submit", items, tp_confirmed_count, pid, t0, &ph[TP_SUBMIT]);
    ph[TP_SUBMIT].elapsed_s = (double)(atomic_load(&run->last_confirm_ns) - t0) / 1e9;
    tp_latency_take(run, &ph[TP_SUBMIT]);
    tpl_memory_take(res, nc, o->net.prefix, pid);
    if (!ok || res->role == TP_ROLE_PROBE)
        return ok;
    while (atomic_load(&run->gone) < res->producers && !net_stopping(NULL))
        net_sleep_ms(1);

    t0 = clock_mono_ns();
    atomic_store(&run->consume, true);
    ok = tp_phase_watch(run, label, "drain", items, tpl_done, pid, t0, &ph[TP_DRAIN]);
    ph[TP_DRAIN].elapsed_s = (double)(atomic_load(&run->last_ack_ns) - t0) / 1e9;
    if (!ok)
        return false;

    t0 = clock_mono_ns();
    atomic_store(&run->go, 2);
    ok = tp_phase_watch(run, label, "e2e", 2 * items, tpl_done, pid, t0, &ph[TP_E2E]);
    uint64_t end = atomic_load(&run->last_ack_ns);
    ph[TP_E2E].elapsed_s = (double)(end - t0) / 1e9;
    tp_latency_take(run, &ph[TP_E2E]);
    return ok;
}

bool tp_lanes_run(const tp_opts_t *o, const tp_workload_t *wl, const char *level,
                  uint32_t producers, uint32_t consumers, tp_role_t role, uint64_t items_probe,
                  tp_result_t *res)
{
    bool ok = false, have_run = false, probe = role == TP_ROLE_PROBE;
    tp_run_t run;
    natsConnection *nc = NULL;
    if (probe)
        consumers = 0;
    tpl_thread_t *prod = calloc(producers, sizeof(*prod));
    tpl_thread_t *cons = calloc(consumers > 0 ? consumers : 1, sizeof(*cons));
    net_stats_t s0, s1;
    char what[48];
    memset(res, 0, sizeof(*res));
    tp_workload_short(wl, what, sizeof(what));
    snprintf(res->system, sizeof(res->system), "lanesched");
    snprintf(res->durability, sizeof(res->durability), "%s", level);
    snprintf(res->store, sizeof(res->store), "%s", o->store);
    snprintf(res->label, sizeof(res->label), "lanesched %s %s %ux%u%s, %s", level, o->store,
             producers, consumers, probe ? " memory probe" : "", what);
    res->role = role;
    res->shapes = wl->shapes;
    res->producers = producers;
    res->consumers = consumers;
    res->items = probe ? items_probe : o->items;
    if (prod == NULL || cons == NULL ||
        tp_run_init(&run, o, wl, res->items, strcmp(level, "power") == 0 ? 'w' : 'p') != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    have_run = true;
    setenv("LANESCHED_STORE", o->store, 1); /* the daemon's flag through its environment */
    int started = net_daemon_start(&o->net, level, "lanes", res->error, sizeof(res->error));
    unsetenv("LANESCHED_STORE");
    if (started != 0)
        goto out;
    int pid = net_daemon_pid();
    run.files = tp_files_open(net_daemon_data_dir());
    natsStatus ns = natsConnection_ConnectTo(&nc, net_url());
    uint64_t until = clock_mono_ns() + 5000000000ull;
    while (ns == NATS_OK && live_stats_fetch(nc, o->net.prefix, &s0) != 0) {
        if (clock_mono_ns() > until || net_stopping(NULL)) {
            ns = NATS_TIMEOUT;
            break;
        }
        net_sleep_ms(50);
    }
    if (ns != NATS_OK) {
        snprintf(res->error, sizeof(res->error), "no lanes.stats from the daemon: %s",
                 natsStatus_GetText(ns));
        goto out;
    }
    bool threads = tpl_threads_start(prod, producers, &run, tpl_producer_main) &&
                   tpl_threads_start(cons, consumers, &run, tpl_consumer_main);
    until = clock_mono_ns() + NET_READY_MS * 1000000ull;
    while (threads && atomic_load(&run.ready) < producers + consumers && clock_mono_ns() < until &&
           !net_stopping(NULL))
        net_sleep_ms(5);
    if (!threads || atomic_load(&run.ready) < producers + consumers || run.error[0] != '\0') {
        snprintf(res->error, sizeof(res->error), "clients not ready: %.200s",
                 run.error[0] ? run.error : "timeout");
        goto out;
    }
    res->ran = tpl_phases(&run, res, pid, nc);
    atomic_store(&run.stop, true);
    tpl_threads_join(prod, producers);
    tpl_threads_join(cons, consumers);
    memset(prod, 0, producers * sizeof(*prod));
    memset(cons, 0, consumers * sizeof(*cons));
    if (!probe && live_stats_fetch(nc, o->net.prefix, &s1) == 0) {
        res->have_tokens = true;
        res->token_difference = (int64_t)(s1.tokens_received - s0.tokens_received) -
                                (int64_t)(s1.tokens_completed - s0.tokens_completed);
    }
    tp_run_tally(&run, res);
    if (run.error[0] != '\0')
        snprintf(res->error, sizeof(res->error), "%s", run.error);
    ok = true;
out:
    if (have_run) {
        atomic_store(&run.stop, true);
        tpl_threads_join(prod, producers);
        tpl_threads_join(cons, consumers);
        tp_files_close(run.files);
        tp_run_free(&run);
    }
    natsConnection_Destroy(nc);
    net_daemon_stop();
    free(prod);
    free(cons);
    if (probe) /* nothing is consumed: the probe holds its items (invariant 5) */
        res->ok = ok && res->ran && res->failed == 0 && res->queued > 0;
    else
        res->ok = ok && tp_result_clean(res);
    return ok;
}
