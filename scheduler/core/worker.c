/*
 * worker.c - what the core keeps of one consumer: its cost model (declared in Register, or
 * estimated from its dispatch-to-ack times) and a model of its prefix cache (the shapes it
 * served last), which the `lanes` policy packs and chooses with.
 *
 * The estimate. Each completed batch gives one sample: x = the tokens it computed (its padded
 * tokens, plus its shape's prefix when the core's model of the cache says it missed), y = the
 * commit-to-completion time, counted from the later of the batch's commit and the worker's
 * previous completion, because a worker that pulls ahead (one credit outstanding) only starts a
 * batch when it finished the one before. The model y = fixed + token * x is fitted by least
 * squares over exponentially weighted moments (West's update: numerically stable, O(1) per
 * sample, no history kept), so an old cost fades with a half-life of WORKER_HALF_LIFE batches.
 * It is used once WORKER_MIN_SAMPLES batches are in and their padded sizes spread by at least
 * WORKER_MIN_SPREAD (coefficient of variation): without spread, fixed and per-token cost cannot
 * be told apart, and until then packing merges nothing (the article's one-lane batches).
 * On exact samples it is exact after the minimum; with timing jitter the per-token part
 * converges much faster than the fixed part, and a changed cost is followed within a few
 * hundred batches (tests/unit/test_worker.c bounds each; docs/bench.md has the figures).
 *
 * Invariants:
 *   1. A shape's `warm` count is the number of workers whose cache holds it; a worker's cache
 *      holds at most `cache` distinct shapes, the most recent first.
 *   2. The estimate never goes negative: a fit with a negative part puts it to 0 and gives the
 *      whole mean to the other.
 *   3. A destroyed worker leaves no pointer behind: its shapes' warm counts drop, its batches in
 *      flight forget it (their completions are not sampled).
 *   4. A worker lists exactly the in-flight batches whose holder it is (sched.c invariant 10),
 *      so what a consumer holds is counted, expired and released in O(its batches).
 *
 * Rejected:
 *   - Dispatch-to-ack time alone: with a credit outstanding it counts the time the batch waited
 *     behind the previous one, and the fixed cost would come out as a whole batch.
 *   - A sliding window of samples: the same answer with memory per worker; the weighted moments
 *     forget smoothly in O(1).
 */
#include "scheduler/core/sched_int.h"

#include "common/invariant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Samples weigh half as much this many batches later: long enough that noise averages out,
 * short enough that a worker whose cost changes (another engine, another GPU clock) is followed
 * within a few hundred batches (test_worker_estimate_follows_a_changed_cost). */
#define WORKER_HALF_LIFE 64.0
/* Batches before an estimate is used: fewer cannot separate the two parts from noise. */
#define WORKER_MIN_SAMPLES 8u
/* Padded sizes must spread at least this much (standard deviation over mean) to fit a line. */
#define WORKER_MIN_SPREAD 0.05

sched_status_t sched_worker_create(sched_t *s, sched_model_t *m, const sched_worker_config_t *cfg,
                                   sched_worker_t **out)
{
    if (s == NULL || m == NULL || cfg == NULL || out == NULL)
        return SCHED_EINVAL;
    uint32_t cache = cfg->cache_shapes == 0 ? 1 : cfg->cache_shapes;
    if (cache > SCHED_CACHE_SHAPES_MAX)
        cache = SCHED_CACHE_SHAPES_MAX;
    sched_worker_t *w = calloc(1, sizeof(*w));
    sched_shape_t **warm = calloc(cache, sizeof(*warm));
    if (w == NULL || warm == NULL)
        goto oom;
    if (m->n_workers == m->cap_workers) {
        size_t cap = m->cap_workers ? m->cap_workers * 2 : 4;
        sched_worker_t **ws = realloc(m->workers, cap * sizeof(*ws));
        if (ws == NULL)
            goto oom;
        m->workers = ws;
        m->cap_workers = cap;
    }
    w->sched = s;
    w->model_idx = m->index;
    w->index = (uint32_t)m->n_workers;
    w->declared = cfg->batch_fixed_us != 0 || cfg->token_ns != 0;
    w->declared_cost = (packer_cost_t){(double)cfg->batch_fixed_us * 1000.0, (double)cfg->token_ns};
    w->cache = cache;
    w->warm = warm;
    m->workers[m->n_workers++] = w;
    *out = w;
    return SCHED_OK;
oom:
    free(w);
    free(warm);
    return SCHED_ENOMEM;
}

void sched_worker_destroy(sched_t *s, sched_worker_t *w)
{
    if (s == NULL || w == NULL)
        return;
    s->filled_valid = 0;
    sched_model_t *m = s->models[w->model_idx];
    if (m->held.worker == w) /* budget.c invariant 7: no memo outlives its worker */
        m->held.valid = 0;
    for (uint32_t i = 0; i < w->n_warm; i++) {
        w->warm[i]->warm--;
        heap_fix(m, w->warm[i]);
    }
    m->workers[w->index] = m->workers[--m->n_workers];
    m->workers[w->index]->index = w->index;
    while (w->batches != NULL) /* invariant 3 */
        worker_batch_unlink(w, w->batches);
    free(w->warm);
    free(w);
}

void worker_destroy_all(struct sched *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        sched_model_t *m = s->models[i];
        for (size_t k = 0; k < m->n_workers; k++) {
            free(m->workers[k]->warm);
            free(m->workers[k]);
        }
        free(m->workers);
        m->workers = NULL;
        m->n_workers = 0;
    }
}

void sched_worker_sample(sched_worker_t *w, uint64_t padded_tokens, uint64_t service_ns)
{
    double decay = pow(0.5, 1.0 / WORKER_HALF_LIFE);
    double x = (double)padded_tokens, y = (double)service_ns;
    double w_new = w->w * decay + 1.0;
    double dx = x - w->mean_x, dy = y - w->mean_y;
    w->mean_x += dx / w_new;
    w->mean_y += dy / w_new;
    w->s_xx = w->s_xx * decay + dx * (x - w->mean_x);
    w->s_xy = w->s_xy * decay + dx * (y - w->mean_y);
    w->w = w_new;
    w->samples++;
}

/* The fitted line (invariant 2); 0 when the samples cannot give one yet. */
static int worker_estimate(const sched_worker_t *w, packer_cost_t *out)
{
    if (w->samples < WORKER_MIN_SAMPLES || !(w->mean_x > 0.0))
        return 0;
    double var = w->s_xx / w->w;
    if (!(var >= (WORKER_MIN_SPREAD * w->mean_x) * (WORKER_MIN_SPREAD * w->mean_x)))
        return 0;
    double token = w->s_xy / w->s_xx;
    double fixed = w->mean_y - token * w->mean_x;
    if (token < 0.0) {
        token = 0.0;
        fixed = w->mean_y;
    }
    if (fixed < 0.0) {
        fixed = 0.0;
        token = w->mean_y / w->mean_x;
    }
    *out = (packer_cost_t){fixed, token};
    return 1;
}

int worker_cost(const sched_worker_t *w, packer_cost_t *out)
{
    if (w->declared) {
        *out = w->declared_cost;
        return 1;
    }
    return worker_estimate(w, out);
}

void sched_worker_info(const sched_worker_t *w, sched_worker_info_t *out)
{
    *out = (sched_worker_info_t){
        .estimated = !w->declared,
        .samples = w->samples,
        .cache_shapes = w->cache,
        .warm_shapes = w->n_warm,
    };
    out->known = worker_cost(w, &out->cost);
}

int worker_is_warm(const sched_worker_t *w, const sched_shape_t *shape)
{
    for (uint32_t i = 0; i < w->n_warm; i++) {
        if (w->warm[i] == shape)
            return 1;
    }
    return 0;
}

sched_status_t worker_warm_touch(sched_worker_t *w, sched_shape_t *shape)
{
    sched_model_t *m = w->sched->models[w->model_idx];
    uint32_t at = 0;
    while (at < w->n_warm && w->warm[at] != shape)
        at++;
    if (at == w->n_warm) { /* a new shape: it enters, the least recent leaves when full */
        if (w->n_warm < w->cache) {
            w->n_warm++;
        } else {
            at = w->n_warm - 1;
            w->warm[at]->warm--;
            heap_fix(m, w->warm[at]); /* invariant 1: a shape nobody has warm is cold */
        }
        shape->warm++;
        heap_fix(m, shape);
    }
    memmove(&w->warm[1], &w->warm[0], at * sizeof(w->warm[0]));
    w->warm[0] = shape;
    return SCHED_OK;
}

void worker_batch_link(sched_worker_t *w, sched_inflight_t *rec)
{
    rec->worker = w;
    rec->worker_prev = NULL;
    rec->worker_next = w->batches;
    if (w->batches != NULL)
        w->batches->worker_prev = rec;
    w->batches = rec;
    w->n_batches++;
}

void worker_batch_unlink(sched_worker_t *w, sched_inflight_t *rec)
{
    if (rec->worker_prev != NULL)
        rec->worker_prev->worker_next = rec->worker_next;
    else
        w->batches = rec->worker_next;
    if (rec->worker_next != NULL)
        rec->worker_next->worker_prev = rec->worker_prev;
    rec->worker = NULL;
    rec->worker_prev = rec->worker_next = NULL;
    w->n_batches--;
}

size_t sched_worker_batches(const sched_worker_t *w)
{
    return w != NULL ? w->n_batches : 0;
}

int sched_worker_batch_newest(const sched_worker_t *w, uint64_t *out_id)
{
    if (w == NULL || w->batches == NULL)
        return 0;
    *out_id = w->batches->batch_id;
    return 1;
}

int sched_worker_batch_expired(const sched_worker_t *w, uint64_t now_ns, uint64_t *out_id)
{
    for (const sched_inflight_t *rec = w != NULL ? w->batches : NULL; rec != NULL;
         rec = rec->worker_next) {
        if (rec->deadline_ns != 0 && rec->deadline_ns <= now_ns) {
            *out_id = rec->batch_id;
            return 1;
        }
    }
    return 0;
}

uint64_t sched_worker_deadline_next(const sched_worker_t *w, uint64_t bound)
{
    for (const sched_inflight_t *rec = w != NULL ? w->batches : NULL; rec != NULL;
         rec = rec->worker_next) {
        if (rec->deadline_ns != 0 && rec->deadline_ns < bound)
            bound = rec->deadline_ns;
    }
    return bound;
}

void sched_worker_deadlines_shift(sched_worker_t *w, uint64_t by_ns)
{
    for (sched_inflight_t *rec = w != NULL ? w->batches : NULL; rec != NULL;
         rec = rec->worker_next) {
        if (rec->deadline_ns != 0)
            rec->deadline_ns =
                rec->deadline_ns > UINT64_MAX - by_ns ? UINT64_MAX : rec->deadline_ns + by_ns;
    }
}

int worker_check(const sched_worker_t *w)
{
    uint32_t listed = 0;
    for (const sched_inflight_t *rec = w->batches; rec != NULL; rec = rec->worker_next) {
        INVARIANT_HOLDS(
            rec->worker == w && (rec->worker_next == NULL || rec->worker_next->worker_prev == rec),
            "batch %llu in a worker's list is not linked to it", (unsigned long long)rec->batch_id);
        listed++;
    }
    INVARIANT_HOLDS(listed == w->n_batches, "a worker lists %u batches, counts %u", listed,
                    w->n_batches);
    INVARIANT_HOLDS(w->n_warm <= w->cache, "a worker holds %u shapes in a cache of %u", w->n_warm,
                    w->cache);
    for (uint32_t a = 0; a < w->n_warm; a++) {
        INVARIANT_HOLDS(w->warm[a]->warm >= 1 && w->warm[a]->model_idx == w->model_idx,
                        "a worker's warm shape %016llx counts %u workers, model %u of %u",
                        (unsigned long long)w->warm[a]->signature, w->warm[a]->warm,
                        w->warm[a]->model_idx, w->model_idx);
        for (uint32_t b = a + 1; b < w->n_warm; b++)
            INVARIANT_HOLDS(w->warm[a] != w->warm[b], "a worker holds shape %016llx twice",
                            (unsigned long long)w->warm[a]->signature);
    }
    return 1;
}
