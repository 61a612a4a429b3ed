/*
 * sim_int.h - private to sim.c, sim_queue.c and sim_state.c: one sim run's state.
 */
#ifndef LANESCHED_BENCH_SIM_INT_H
#define LANESCHED_BENCH_SIM_INT_H

#include "bench.h"

#include "scheduler/core/sched.h"

#include <stddef.h>
#include <stdint.h>

#define SIM_SHAPES_MAX   (1u << 20)
#define SIM_POW2_BUCKETS 33u
#define SIM_RANGE        64u

enum { ITEM_FUTURE = 0, ITEM_QUEUED, ITEM_INFLIGHT, ITEM_DONE };

/* A baseline queue: item indices in arrival order, idx[head .. len). */
typedef struct {
    uint32_t *idx;
    size_t head, len, cap;
    uint64_t queued_tokens;
    uint64_t last_arrival_ns;
    int ever;
} sim_queue_t;

/* A baseline group of queues: a shape's buckets (FIFO: a model's single queue). */
typedef struct {
    sim_queue_t *buckets; /* n_buckets, allocated at the first item */
    uint64_t queued_items, queued_tokens;
} sim_group_t;

typedef struct {
    gpu_t *gpu;
    uint32_t model;
    int busy;
    uint64_t end_ns;
    uint64_t batch_id;      /* the scheduler's */
    sched_worker_t *worker; /* the scheduler's view of it (SIM_LANES), owned by the scheduler */
    uint32_t *batch;        /* item indices in service */
    uint32_t n_batch;
} sim_worker_t;

typedef struct {
    const sim_config_t *cfg;
    const wl_item_t *items;
    size_t n;
    sim_policy_t policy;
    sim_result_t *r;
    int failed;
    uint64_t now;
    uint64_t wake_ns;  /* the earliest sched_retry_ns of a fill that found nothing, or the next
                          bucket to reach its queue delay */
    uint64_t delay_ns; /* POW2, RANGE64: the queue delay (sim_queue.c invariant 4); 0: none */

    uint32_t models, n_shapes;
    uint32_t *shape_model;   /* per shape */
    uint32_t **model_shapes; /* per model: its shapes, ascending */
    uint32_t *model_n_shapes;
    uint8_t *state; /* per item: ITEM_* */
    uint8_t *seen;  /* per worker x shape: the worker has served that shape (cold misses) */
    uint64_t *waits;
    size_t n_waits;
    uint64_t queued_items;

    sim_worker_t *workers;
    size_t n_workers;
    packer_contract_t contract;
    uint32_t batch_cap; /* most items one batch can hold */
    uint32_t *tok;      /* scratch: batch_cap */
    uint64_t *sig;      /* scratch: batch_cap */
    uint32_t *pfx;      /* scratch: batch_cap, the items' prefix_tokens */

    /* rolling lanes */
    store_t *store;
    sched_t *sched;
    sched_model_t **sched_models; /* per model, opened once */
    uint32_t max_lanes;
    uint64_t *sig_sorted; /* the shapes' signatures, ascending, to index shape_full */
    uint32_t n_sigs;
    uint8_t *shape_full; /* per entry of sig_sorted: lanes in use reached max_lanes */

    /* baselines */
    sim_group_t *groups; /* FIFO: per model; else per shape */
    uint32_t n_groups, n_buckets;
    int64_t *current; /* per model: the sticky shape, -1 none */
    uint64_t switches;

    sim_sample_t win;                      /* the window since the last sample */
    uint64_t opened_before, reuses_before; /* the counters at the last sample */
    size_t series_cap;
    uint64_t queues_sum;
} sim_t;

/* Records the first broken invariant in s->r->error (printf format); later ones are dropped. */
void sim_fail(sim_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* sim_state.c: builds s from s->cfg and the trace (0, or -1 with s->r->error); sim_teardown frees
 * it, also after a failed sim_setup. sim_u64_cmp orders uint64_t for qsort. */
int sim_setup(sim_t *s);
void sim_teardown(sim_t *s);
int sim_u64_cmp(const void *a, const void *b);

/* sim_queue.c: the baseline policies. sim_base_submit queues item i (0, or -1 out of memory);
 * sim_base_take packs w's next batch into w->batch (1; 0 nothing queued for w's model; -1
 * failure, in s->r->error) with *pr its packing; sim_base_count adds the queues in use to *sum
 * and raises *max to the most one group has; sim_queue_in_use is invariant 2 of sim_queue.c. */
int sim_base_submit(sim_t *s, uint32_t i);
int sim_base_take(sim_t *s, sim_worker_t *w, packer_result_t *pr /* out */);
void sim_base_count(const sim_t *s, uint32_t *sum /* in, out */, uint32_t *max /* in, out */);
int sim_queue_in_use(const sim_queue_t *q, uint64_t now);

#endif
