/*
 * sim_state.c - a sim run's state, built from the trace before the first event and torn down
 * after the last: the shape and model tables, per-item state, the workers, and either the
 * scheduler over the memory store (rolling lanes) or the baseline queues.
 *
 * Invariants:
 *   1. The trace is checked before anything runs: models < WL_MODELS_MAX, shapes < SIM_SHAPES_MAX,
 *      tokens in [1, SCHED_MAX_TOKENS], nondecreasing arrival times, nonzero signatures, and one
 *      (model, signature) per shape index; a trace that breaks one is a setup failure.
 *   2. The scheduler's clock is the simulated clock (sim_t.now), never the machine's.
 *   3. sim_teardown frees whatever sim_setup allocated, also after a failed setup.
 */
#include "sim_int.h"

#include "store/store.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

static uint64_t sim_clock(void *ctx)
{
    return ((const sim_t *)ctx)->now;
}

int sim_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int sim_setup(sim_t *s)
{
    const sim_config_t *cfg = s->cfg;
    uint32_t max_shape = 0, max_tokens = 1;
    s->models = 0;
    for (size_t i = 0; i < s->n; i++) {
        const wl_item_t *it = &s->items[i];
        if (it->model >= WL_MODELS_MAX || it->shape >= SIM_SHAPES_MAX || it->tokens == 0 ||
            it->tokens > SCHED_MAX_TOKENS || (i > 0 && it->t_ns < s->items[i - 1].t_ns) ||
            it->signature == 0) {
            sim_fail(s, "trace item %zu is out of range or out of order", i);
            return -1;
        }
        if (it->model + 1 > s->models)
            s->models = it->model + 1;
        if (it->shape > max_shape)
            max_shape = it->shape;
        if (it->tokens > max_tokens)
            max_tokens = it->tokens;
    }
    s->n_shapes = s->n ? max_shape + 1 : 0;
    s->shape_model = calloc(s->n_shapes + 1, sizeof(*s->shape_model));
    uint64_t *shape_sig = calloc(s->n_shapes + 1, sizeof(*shape_sig));
    s->model_n_shapes = calloc(s->models + 1, sizeof(*s->model_n_shapes));
    s->model_shapes = calloc(s->models + 1, sizeof(*s->model_shapes));
    s->state = calloc(s->n + 1, 1);
    s->waits = malloc((s->n + 1) * sizeof(*s->waits));
    if (s->shape_model == NULL || shape_sig == NULL || s->model_n_shapes == NULL ||
        s->model_shapes == NULL || s->state == NULL || s->waits == NULL)
        goto oom;
    for (size_t i = 0; i < s->n; i++) { /* a shape index names one (model, signature) */
        const wl_item_t *it = &s->items[i];
        if (shape_sig[it->shape] == 0) {
            shape_sig[it->shape] = it->signature;
            s->shape_model[it->shape] = it->model;
            s->model_n_shapes[it->model]++;
        } else if (shape_sig[it->shape] != it->signature ||
                   s->shape_model[it->shape] != it->model) {
            free(shape_sig);
            sim_fail(s, "trace shape %" PRIu32 " has two signatures or models", it->shape);
            return -1;
        }
    }
    s->sig_sorted = malloc((s->n_shapes + 1) * sizeof(*s->sig_sorted));
    s->shape_full = calloc(s->n_shapes + 1, 1);
    if (s->sig_sorted == NULL || s->shape_full == NULL)
        goto oom;
    for (uint32_t sh = 0; sh < s->n_shapes; sh++) {
        if (shape_sig[sh] != 0)
            s->sig_sorted[s->n_sigs++] = shape_sig[sh];
    }
    qsort(s->sig_sorted, s->n_sigs, sizeof(*s->sig_sorted), sim_u64_cmp);
    for (uint32_t m = 0; m < s->models; m++) {
        s->model_shapes[m] = malloc((s->model_n_shapes[m] + 1) * sizeof(uint32_t));
        if (s->model_shapes[m] == NULL)
            goto oom;
        s->model_n_shapes[m] = 0;
    }
    for (uint32_t sh = 0; sh < s->n_shapes; sh++) {
        if (shape_sig[sh] != 0) {
            uint32_t m = s->shape_model[sh];
            s->model_shapes[m][s->model_n_shapes[m]++] = sh;
        }
    }
    free(shape_sig);
    shape_sig = NULL;

    s->contract = (packer_contract_t){
        .max_batch_size = cfg->gpu.max_batch_size,
        .max_batch_tokens = cfg->gpu.max_batch_tokens,
        .max_input_tokens = cfg->gpu.max_input_tokens,
    };
    uint32_t cap = cfg->gpu.max_batch_tokens / PACKER_PAD_MULTIPLE;
    s->batch_cap = cap == 0 ? 1 : (cap < cfg->gpu.max_batch_size ? cap : cfg->gpu.max_batch_size);
    s->tok = malloc(s->batch_cap * sizeof(*s->tok));
    s->sig = malloc(s->batch_cap * sizeof(*s->sig));
    s->pfx = malloc(s->batch_cap * sizeof(*s->pfx));
    s->n_workers = (size_t)s->models * cfg->workers_per_model;
    s->workers = calloc(s->n_workers + 1, sizeof(*s->workers));
    s->seen = calloc(s->n_workers * s->n_shapes + 1, 1);
    if (s->tok == NULL || s->sig == NULL || s->pfx == NULL || s->workers == NULL || s->seen == NULL)
        goto oom;
    for (size_t k = 0; k < s->n_workers; k++) {
        sim_worker_t *w = &s->workers[k];
        w->model = (uint32_t)(k / cfg->workers_per_model);
        w->batch = malloc(s->batch_cap * sizeof(*w->batch));
        if (w->batch == NULL || gpu_create(&cfg->gpu, &w->gpu) != 0) {
            sim_fail(s, "gpu_create: bad worker config or out of memory");
            return -1;
        }
    }

    if (sim_policy_is_lanes(s->policy)) {
        store_status_t sst = store_open_memory(&s->store);
        if (sst != STORE_OK) {
            sim_fail(s, "store_open_memory: %s", store_status_str(sst));
            return -1;
        }
        s->max_lanes = s->policy == SIM_LANES_128 ? 128 : LANES_MAX;
        sched_config_t sc = {
            .max_lanes = s->max_lanes,
            .clock = sim_clock,
            .clock_ctx = s,
            .starvation_ns = s->policy == SIM_LANES_STARVE ? cfg->starvation_ns
                             : s->policy == SIM_LANES      ? cfg->age_bound_ns
                                                           : 0,
            .policy = s->policy == SIM_LANES ? SCHED_POLICY_LANES : SCHED_POLICY_SEED,
            .merge_credit = cfg->merge_credit,
            .merge_credit_loaded = cfg->merge_credit_loaded,
            .hold_ns = s->policy == SIM_LANES ? cfg->hold_ns : 0,
            .hold_load = cfg->hold_load,
            .hold_share = cfg->hold_share,
            .hold_ramp = cfg->hold_ramp,
            .hold_burst = cfg->hold_burst,
            .slo_ns = s->policy == SIM_LANES ? cfg->slo_ns : 0,
        };
        sched_status_t st = sched_create(&sc, s->store, &s->sched);
        if (st != SCHED_OK) {
            sim_fail(s, "sched_create: %s", sched_status_str(st));
            return -1;
        }
        if ((s->sched_models = calloc(s->models, sizeof(*s->sched_models))) == NULL)
            goto oom;
        for (uint32_t m = 0; m < s->models; m++) {
            if ((st = sched_model_open(s->sched, wl_model_name(m), &s->sched_models[m])) !=
                SCHED_OK) {
                sim_fail(s, "sched_model_open: %s", sched_status_str(st));
                return -1;
            }
        }
        /* The `lanes` policy's workers register their cost (or not) and their cache, as a
         * consumer would in Register. */
        sched_worker_config_t wc = {
            .batch_fixed_us = cfg->declare_cost ? (uint32_t)(cfg->gpu.batch_fixed_ns / 1000) : 0,
            .token_ns = cfg->declare_cost ? (uint32_t)llround(cfg->gpu.ns_per_padded_token) : 0,
            .cache_shapes = cfg->gpu.cache_shapes,
        };
        for (size_t k = 0; s->policy == SIM_LANES && k < s->n_workers; k++) {
            sim_worker_t *w = &s->workers[k];
            if ((st = sched_worker_create(s->sched, s->sched_models[w->model], &wc, &w->worker)) !=
                SCHED_OK) {
                sim_fail(s, "sched_worker_create: %s", sched_status_str(st));
                return -1;
            }
        }
    } else {
        s->n_groups = s->policy == SIM_FIFO ? s->models : s->n_shapes;
        s->n_buckets = s->policy == SIM_FIFO   ? 1
                       : s->policy == SIM_POW2 ? SIM_POW2_BUCKETS
                                               : (max_tokens - 1) / SIM_RANGE + 1;
        s->groups = calloc(s->n_groups + 1, sizeof(*s->groups));
        s->current = malloc((s->models + 1) * sizeof(*s->current));
        if (s->groups == NULL || s->current == NULL)
            goto oom;
        for (uint32_t m = 0; m < s->models; m++)
            s->current[m] = -1;
    }
    return 0;
oom:
    free(shape_sig);
    sim_fail(s, "out of memory");
    return -1;
}

void sim_teardown(sim_t *s)
{
    for (uint32_t m = 0; s->sched_models != NULL && m < s->models; m++)
        sched_model_close(s->sched, s->sched_models[m]);
    free(s->sched_models);
    sched_destroy(s->sched);
    store_close(s->store);
    for (uint32_t g = 0; s->groups != NULL && g < s->n_groups; g++) {
        for (uint32_t b = 0; s->groups[g].buckets != NULL && b < s->n_buckets; b++)
            free(s->groups[g].buckets[b].idx);
        free(s->groups[g].buckets);
    }
    free(s->groups);
    free(s->current);
    for (size_t k = 0; s->workers != NULL && k < s->n_workers; k++) {
        gpu_destroy(s->workers[k].gpu);
        free(s->workers[k].batch);
    }
    free(s->workers);
    for (uint32_t m = 0; s->model_shapes != NULL && m < s->models; m++)
        free(s->model_shapes[m]);
    free(s->model_shapes);
    free(s->model_n_shapes);
    free(s->shape_model);
    free(s->state);
    free(s->seen);
    free(s->waits);
    free(s->tok);
    free(s->sig);
    free(s->pfx);
    free(s->sig_sorted);
    free(s->shape_full);
}
