/*
 * sim.c - lanesched-bench sim mode: one trace through one policy, as a deterministic
 * discrete-event simulation in simulated time.
 *
 * Owns: the event loop, the simulated clock, dispatch and completion on the workers of every
 * model, sampling, the final figures and the invariant checks; the baseline policies' queues are
 * sim_queue.c's and the run's state (built from the trace, torn down) sim_state.c's. Rolling
 * lanes are NOT implemented here: those policies run
 * the project's scheduler (sched_create over store_open_memory; sched_submit / sched_fill /
 * sched_commit / sched_complete / sched_tick) with its clock reading the simulated time. Every
 * policy packs with the project's packer (packer_fill), so the policies differ only in how they
 * group items into queues and which queue they serve next.
 *
 * The loop: events are arrivals (from the trace), batch completions (a worker's service time
 * has elapsed) and ticks (every sample_ns: the scheduler's maintenance tick and a sample of the
 * figures). At each instant, completions are settled first, then arrivals are submitted, then
 * every idle worker (model by model, worker by worker) asks its policy for a batch; a batch
 * occupies its worker for gpu_serve's service time. The run ends when the trace is exhausted,
 * no worker is busy and nothing is queued.
 *
 * Policies:
 *   FIFO      one queue per model, arrival order, no length or shape awareness. Its batches mix
 *             shapes; such a batch is a cache hit only if all its items share one shape the
 *             worker had cached (gpu_serve_mixed).
 *   POW2      per shape, one queue per power-of-two length bucket (L in (2^(k-1), 2^k]).
 *   RANGE64   per shape, one queue per fixed 64-token range (L in [64k+1, 64k+64]).
 *             Both bucket policies choose what goes next with the same sticky-shape rule as the
 *             scheduler (stay on the model's current shape while it has queued items, else the
 *             shape with the most queued tokens), then the bucket with the most queued tokens:
 *             so their hit rates are comparable and the difference in waste is the grouping.
 *   LANES_*   the scheduler with a 128 or 2,048 lane budget; LANES_STARVE adds the starvation
 *             bound (sched_config_t.starvation_ns).
 *
 * Invariants (each checked; the first broken one is reported and ends the run):
 *   1. Every trace item is submitted once, dispatched once and completed once; at the end
 *      tokens_in = tokens_done and nothing is queued or in flight (for the scheduler also its
 *      own counters and the store's pending count).
 *   2. Every batch respects the contract: 1 <= n <= max_batch_size; pad_to is a multiple of 8,
 *      at least every item's length; n * pad_to <= max_batch_tokens unless n = 1.
 *   3. Every non-FIFO batch is shape-pure and of the worker's model (besides sched's own guard).
 *   4. Simulated time never goes backwards; an item is dispatched no earlier than it arrived.
 *
 * Baseline queue accounting ("queues in use", "new queues per second", comparable with lanes)
 * is sim_queue.c's invariant 2.
 *
 * Rejected:
 *   - A second implementation of lanes or packing to make the simulator faster: the point is to
 *     measure the project's code, and the scheduler's memory path runs millions of items/s.
 *   - Wall-clock time or threads: results must be identical run to run, on any machine.
 *   - FIFO batches split by shape so they can hit: that is no longer FIFO.
 */
#include "sim_int.h"

#include "store/store.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *sim_policy_name(sim_policy_t policy)
{
    switch (policy) {
    case SIM_FIFO:
        return "fifo";
    case SIM_POW2:
        return "pow2";
    case SIM_RANGE64:
        return "range64";
    case SIM_LANES_128:
        return "lanes-128";
    case SIM_LANES_SEED:
        return "lanes-seed";
    case SIM_LANES_STARVE:
        return "lanes-starve";
    case SIM_LANES:
        return "lanes";
    default:
        return "unknown";
    }
}

int sim_policy_from_name(const char *name)
{
    if (strcmp(name, "lanes-2048") == 0)
        return SIM_LANES_SEED;
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        if (strcmp(name, sim_policy_name((sim_policy_t)p)) == 0)
            return p;
    }
    return -1;
}

void sim_config_default(sim_config_t *cfg)
{
    *cfg = (sim_config_t){
        .workers_per_model = 2,
        .starvation_ns = 2000000000ull,
        .age_bound_ns = SCHED_AGE_BOUND_DEFAULT_NS,
        .hold_ns = SCHED_HOLD_DEFAULT_NS,
        .declare_cost = 1,
        .sample_ns = LANES_TICK_NS,
    };
    gpu_config_default(&cfg->gpu);
}

void sim_fail(sim_t *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = 1;
    s->r->ok = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->r->error, sizeof(s->r->error), fmt, ap);
    va_end(ap);
}

int sim_policy_is_lanes(sim_policy_t p)
{
    return p == SIM_LANES_128 || p == SIM_LANES_SEED || p == SIM_LANES_STARVE || p == SIM_LANES;
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch and completion.                                                                    */

/* Checks a packed batch (invariants 2-4) and puts its items in flight on the worker. */
static void sim_batch_start(sim_t *s, sim_worker_t *w, uint32_t pad_to, uint64_t padded,
                            uint64_t real, int pure_sig_known, uint64_t sig)
{
    uint32_t n = w->n_batch;
    uint64_t sum = 0;
    uint32_t longest = 0, prefix = 0;
    if (n == 0 || n > s->contract.max_batch_size)
        sim_fail(s, "batch of %" PRIu32 " items (contract: 1..%" PRIu32 ")", n,
                 s->contract.max_batch_size);
    if (pad_to % PACKER_PAD_MULTIPLE != 0 || padded != (uint64_t)n * pad_to ||
        (n > 1 && padded > s->contract.max_batch_tokens))
        sim_fail(s, "batch pad_to %" PRIu32 " x %" PRIu32 " items breaks the contract", pad_to, n);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = w->batch[k];
        const wl_item_t *it = &s->items[i];
        if (s->state[i] != ITEM_QUEUED)
            sim_fail(s, "item %" PRIu32 " dispatched in state %d", i, s->state[i]);
        if (it->model != w->model)
            sim_fail(s, "item %" PRIu32 " of model %" PRIu32 " went to a worker of model %" PRIu32,
                     i, it->model, w->model);
        if (pure_sig_known && it->signature != sig)
            sim_fail(s, "batch of shape %016" PRIx64 " holds item %" PRIu32 " of %016" PRIx64, sig,
                     i, it->signature);
        if (it->t_ns > s->now)
            sim_fail(s, "item %" PRIu32 " dispatched before it arrived", i);
        s->state[i] = ITEM_INFLIGHT;
        s->waits[s->n_waits++] = s->now - it->t_ns;
        s->sig[k] = it->signature;
        s->pfx[k] = it->prefix_tokens;
        if (it->prefix_tokens > prefix)
            prefix = it->prefix_tokens;
        sum += it->tokens;
        if (it->tokens > longest)
            longest = it->tokens;
    }
    if (sum != real || longest > pad_to || pad_to != packer_pad(longest))
        sim_fail(s, "batch tokens %" PRIu64 " / pad_to %" PRIu32 " disagree with its items", real,
                 pad_to);
    uint64_t misses = gpu_stats(w->gpu)->misses;
    uint64_t ns = s->policy == SIM_FIFO ? gpu_serve_mixed(w->gpu, s->sig, s->pfx, n, pad_to, real)
                                        : gpu_serve(w->gpu, sig, n, pad_to, real, prefix);
    /* A miss is cold when the worker never served the batch's (first item's) shape before. */
    uint8_t *seen = &s->seen[(size_t)(w - s->workers) * s->n_shapes + s->items[w->batch[0]].shape];
    if (gpu_stats(w->gpu)->misses != misses && !*seen)
        s->r->cold_misses++;
    for (uint32_t k = 0; k < n; k++)
        s->seen[(size_t)(w - s->workers) * s->n_shapes + s->items[w->batch[k]].shape] = 1;
    s->queued_items -= n;
    s->win.padded += padded;
    s->win.real += real;
    s->win.batches++;
    w->busy = 1;
    w->end_ns = s->now + ns;
}

/* One batch for an idle worker. 1: dispatched; 0: nothing to do; -1: failure. */
static int sim_dispatch(sim_t *s, sim_worker_t *w)
{
    uint64_t hits_before = gpu_stats(w->gpu)->hits;
    if (sim_policy_is_lanes(s->policy)) {
        sched_consumer_t c = {
            .model = s->sched_models[w->model], .contract = s->contract, .worker = w->worker};
        sched_batch_t b;
        sched_status_t st = sched_fill(s->sched, &c, &b);
        if (st == SCHED_EEMPTY) {
            uint64_t retry = sched_retry_ns(s->sched);
            if (retry > s->now && (s->wake_ns <= s->now || retry < s->wake_ns))
                s->wake_ns = retry;
            return 0;
        }
        if (st != SCHED_OK) {
            sim_fail(s, "sched_fill: %s", sched_status_str(st));
            return -1;
        }
        if (b.n > s->batch_cap) {
            sim_fail(s, "sched_fill: %zu items over the contract", b.n);
            return -1;
        }
        for (size_t k = 0; k < b.n; k++) {
            uint32_t idx;
            if (b.items_view[k].id_len != sizeof(idx)) {
                sim_fail(s, "batch item with a %zu-byte id", b.items_view[k].id_len);
                return -1;
            }
            memcpy(&idx, b.items_view[k].id_view, sizeof(idx));
            if (idx >= s->n || b.items_view[k].tokens != s->items[idx].tokens) {
                sim_fail(s, "batch item %" PRIu32 " is not the trace's", idx);
                return -1;
            }
            w->batch[k] = idx;
        }
        w->n_batch = (uint32_t)b.n;
        w->batch_id = b.batch_id;
        sim_batch_start(s, w, b.pad_to, b.padded_tokens, b.real_tokens, 1, b.signature);
        if ((st = sched_commit(s->sched, &b)) != SCHED_OK) {
            sim_fail(s, "sched_commit: %s", sched_status_str(st));
            return -1;
        }
    } else {
        packer_result_t pr;
        int got = sim_base_take(s, w, &pr);
        if (got <= 0)
            return got;
        uint64_t sig = s->items[w->batch[0]].signature;
        sim_batch_start(s, w, pr.pad_to, pr.padded_tokens, pr.real_tokens, s->policy != SIM_FIFO,
                        sig);
    }
    s->win.hits += gpu_stats(w->gpu)->hits - hits_before;
    return s->failed ? -1 : 1;
}

static void sim_complete(sim_t *s, sim_worker_t *w)
{
    if (sim_policy_is_lanes(s->policy)) {
        sched_settled_t done = {0};
        sched_status_t st = sched_complete(s->sched, w->batch_id, NULL, 0, &done);
        if (st != SCHED_OK || done.positions != w->n_batch)
            sim_fail(s, "sched_complete: %s (%" PRIu32 " of %" PRIu32 ")", sched_status_str(st),
                     done.positions, w->n_batch);
    }
    for (uint32_t k = 0; k < w->n_batch; k++) {
        uint32_t i = w->batch[k];
        if (s->state[i] != ITEM_INFLIGHT)
            sim_fail(s, "item %" PRIu32 " completed in state %d", i, s->state[i]);
        s->state[i] = ITEM_DONE;
        s->r->items_done++;
        s->r->tokens_done += s->items[i].tokens;
    }
    w->busy = 0;
    w->n_batch = 0;
}

static int sim_submit(sim_t *s, uint32_t i)
{
    const wl_item_t *it = &s->items[i];
    if (s->state[i] != ITEM_FUTURE) {
        sim_fail(s, "item %" PRIu32 " submitted twice", i);
        return -1;
    }
    if (sim_policy_is_lanes(s->policy)) {
        sched_item_t si = {
            .model = s->sched_models[it->model],
            .signature = it->signature,
            .tokens = it->tokens,
            .id = (const uint8_t *)&i,
            .id_len = sizeof(i),
            .prefix_tokens = it->prefix_tokens,
        };
        sched_status_t st = sched_submit(s->sched, &si, NULL);
        if (st != SCHED_OK) {
            sim_fail(s, "sched_submit: %s", sched_status_str(st));
            return -1;
        }
    } else if (sim_base_submit(s, i) != 0) {
        sim_fail(s, "out of memory");
        return -1;
    }
    s->state[i] = ITEM_QUEUED;
    s->queued_items++;
    s->r->items_in++;
    s->r->tokens_in += it->tokens;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Sampling.                                                                                   */

typedef struct {
    sim_t *s;
    uint32_t sum, max;
} sim_lane_count_t;

static void sim_lanes_visit(void *ctx, const char *model, uint64_t signature, const lanes_t *lanes,
                            int current)
{
    (void)model;
    (void)current;
    sim_lane_count_t *c = ctx;
    uint32_t n = lanes_in_use(lanes);
    c->sum += n;
    if (n > c->max)
        c->max = n;
    if (n >= c->s->max_lanes) {
        uint32_t lo = 0, hi = c->s->n_sigs; /* binary search: the first >= signature */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (c->s->sig_sorted[mid] < signature)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < c->s->n_sigs && c->s->sig_sorted[lo] == signature)
            c->s->shape_full[lo] = 1;
    }
}

static int sim_sample(sim_t *s)
{
    sim_lane_count_t c = {s, 0, 0};
    uint64_t opened, reuses;
    if (sim_policy_is_lanes(s->policy)) {
        sched_tick(s->sched);
        sched_shapes_visit(s->sched, sim_lanes_visit, &c);
        opened = sched_counters(s->sched)->lanes_opened;
        reuses = sched_counters(s->sched)->lane_reuses;
    } else {
        sim_base_count(s, &c.sum, &c.max);
        opened = s->r->opened;
        reuses = s->r->reuses;
    }
    s->win.opened = opened - s->opened_before;
    s->win.reuses = reuses - s->reuses_before;
    s->opened_before = opened;
    s->reuses_before = reuses;
    sim_result_t *r = s->r;
    if (r->n_series == s->series_cap) {
        size_t cap = s->series_cap ? s->series_cap * 2 : 256;
        sim_sample_t *g = realloc(r->series, cap * sizeof(*g));
        if (g == NULL)
            return -1;
        r->series = g;
        s->series_cap = cap;
    }
    sim_sample_t smp = s->win;
    smp.t_s = (double)s->now / 1e9;
    smp.queues = c.sum;
    smp.queues_max = c.max;
    smp.queued_items = s->queued_items > UINT32_MAX ? UINT32_MAX : (uint32_t)s->queued_items;
    r->series[r->n_series++] = smp;
    if (c.sum > r->queues_peak)
        r->queues_peak = c.sum;
    if (c.max > r->queues_max_peak)
        r->queues_max_peak = c.max;
    s->queues_sum += c.sum;
    s->win = (sim_sample_t){0};
    return 0;
}

/* Final figures and the end-of-run checks (invariant 1). */
static void sim_finish(sim_t *s)
{
    sim_result_t *r = s->r;
    for (size_t k = 0; k < s->n_workers; k++) {
        const gpu_stats_t *g = gpu_stats(s->workers[k].gpu);
        r->batches += g->batches;
        r->items_served += g->items;
        r->padded_tokens += g->padded_tokens;
        r->real_tokens += g->real_tokens;
        r->hits += g->hits;
        r->misses += g->misses;
        r->busy_ns += g->busy_ns;
        r->prefix_tokens += g->prefix_tokens;
        r->prefix_saved_tokens += g->prefix_saved_tokens;
    }
    r->queues_mean = r->n_series ? (double)s->queues_sum / (double)r->n_series : 0.0;
    r->arrival_s = s->n ? (double)s->items[s->n - 1].t_ns / 1e9 : 0.0;
    r->end_ns = s->now;
    if (s->n_waits != 0) {
        qsort(s->waits, s->n_waits, sizeof(*s->waits), sim_u64_cmp);
        r->wait_p50_ns = s->waits[(s->n_waits - 1) / 2];
        r->wait_p99_ns = s->waits[(size_t)((double)(s->n_waits - 1) * 0.99)];
        r->wait_max_ns = s->waits[s->n_waits - 1];
        double sum = 0.0;
        for (size_t i = 0; i < s->n_waits; i++)
            sum += (double)s->waits[i];
        r->wait_mean_ns = sum / (double)s->n_waits;
    }
    r->shapes = s->n_sigs;
    for (uint32_t k = 0; k < s->n_sigs; k++)
        r->shapes_full += s->shape_full[k];
    if (sim_policy_is_lanes(s->policy)) {
        const sched_counters_t *c = sched_counters(s->sched);
        r->opened = c->lanes_opened;
        r->reuses = c->lane_reuses;
        r->force_fits = c->force_fits;
        r->quiesced = c->lanes_quiesced;
        r->shape_switches = c->shape_switches;
        r->preemptions = c->starvation_preemptions;
        r->holds = c->holds;
        r->merged_batches = c->merged_batches;
        r->merged_lanes = c->merged_lanes;
        if (s->n_workers != 0 && s->workers[0].worker != NULL) {
            sched_worker_info_t wi;
            sched_worker_info(s->workers[0].worker, &wi);
            r->cost_known = wi.known;
            r->cost_estimated = wi.estimated;
            r->cost_fixed_ns = wi.cost.fixed_ns;
            r->cost_token_ns = wi.cost.token_ns;
        }
        if (c->tokens_received != r->tokens_in || c->tokens_completed != r->tokens_in ||
            c->items_completed != r->items_in || c->padded_tokens != r->padded_tokens ||
            c->real_tokens != r->real_tokens || store_pending_count(s->store) != 0)
            sim_fail(s,
                     "scheduler counters disagree: received %" PRIu64 ", completed %" PRIu64
                     ", submitted %" PRIu64 ", pending %" PRIu64,
                     c->tokens_received, c->tokens_completed, r->tokens_in,
                     (uint64_t)store_pending_count(s->store));
    } else {
        r->shape_switches = s->switches;
    }
    if (r->items_in != s->n || r->items_done != r->items_in || r->tokens_done != r->tokens_in ||
        r->items_served != r->items_in || r->real_tokens != r->tokens_in || s->queued_items != 0 ||
        s->n_waits != s->n)
        sim_fail(s,
                 "items in %" PRIu64 " / done %" PRIu64 " / trace %zu, tokens in %" PRIu64
                 " / done %" PRIu64 ", still queued %" PRIu64,
                 r->items_in, r->items_done, s->n, r->tokens_in, r->tokens_done, s->queued_items);
}

/* ------------------------------------------------------------------------------------------ */
/* The event loop.                                                                             */

/* Runs events until the trace is exhausted, nobody is busy and nothing is queued. 0 when it
 * got there; -1 when an invariant broke or memory ran out (s->r->error says which). */
static int sim_loop(sim_t *s)
{
    size_t next = 0;
    uint64_t next_tick = s->cfg->sample_ns;
    for (;;) {
        /* every idle worker asks for a batch, model by model */
        for (size_t k = 0; k < s->n_workers; k++) {
            sim_worker_t *w = &s->workers[k];
            if (w->busy)
                continue;
            int got = sim_dispatch(s, w);
            if (got < 0)
                return -1;
            /* 0: this model has nothing; its other idle workers would find nothing either,
             * except under cache affinity, where each worker chooses for itself */
            while (got == 0 && w->worker == NULL && k + 1 < s->n_workers &&
                   s->workers[k + 1].model == w->model)
                k++;
        }
        uint64_t t = UINT64_MAX;
        if (next < s->n)
            t = s->items[next].t_ns;
        for (size_t k = 0; k < s->n_workers; k++) {
            if (s->workers[k].busy && s->workers[k].end_ns < t)
                t = s->workers[k].end_ns;
        }
        if (s->wake_ns > s->now && s->wake_ns < t)
            t = s->wake_ns; /* a worker held back from a cold shape, or a bucket's delay */
        if (t == UINT64_MAX)
            break; /* nothing arrives, nobody is busy, and the workers found nothing queued */
        if (next_tick <= t) {
            s->now = next_tick;
            next_tick += s->cfg->sample_ns;
            if (sim_sample(s) != 0) {
                sim_fail(s, "out of memory");
                return -1;
            }
            continue;
        }
        if (t < s->now) {
            sim_fail(s, "simulated time went backwards"); /* invariant 4 */
            return -1;
        }
        s->now = t;
        for (size_t k = 0; k < s->n_workers; k++) {
            if (s->workers[k].busy && s->workers[k].end_ns == s->now)
                sim_complete(s, &s->workers[k]);
        }
        for (; next < s->n && s->items[next].t_ns <= s->now; next++) {
            if (sim_submit(s, (uint32_t)next) != 0)
                return -1;
        }
        if (s->store != NULL && store_flush(s->store) != STORE_OK) {
            sim_fail(s, "store_flush failed");
            return -1;
        }
        if (s->failed)
            return -1;
    }
    if (sim_sample(s) != 0) { /* the last, partial window */
        sim_fail(s, "out of memory");
        return -1;
    }
    return 0;
}

int sim_run(const sim_config_t *cfg, const wl_item_t *items, size_t n, sim_policy_t policy,
            sim_result_t *out)
{
    if (out == NULL)
        return -1;
    *out = (sim_result_t){.policy = policy, .ok = 1};
    if (cfg == NULL || (items == NULL && n != 0) || policy >= SIM_POLICY_COUNT ||
        cfg->workers_per_model == 0 || cfg->sample_ns == 0 || n >= UINT32_MAX) {
        snprintf(out->error, sizeof(out->error), "invalid arguments");
        out->ok = 0;
        return -1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sim_t s = {.cfg = cfg, .items = items, .n = n, .policy = policy, .r = out};
    if (policy == SIM_POW2 || policy == SIM_RANGE64)
        s.delay_ns = out->delay_ns = cfg->bucket_delay_ns;
    int rc = -1;
    if (sim_setup(&s) != 0)
        goto out;
    (void)sim_loop(&s); /* a broken invariant is in out->error; the figures so far still count */
    sim_finish(&s);
    rc = 0;
out:
    sim_teardown(&s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return rc;
}

void sim_result_free(sim_result_t *result)
{
    if (result == NULL)
        return;
    free(result->series);
    result->series = NULL;
    result->n_series = 0;
}
