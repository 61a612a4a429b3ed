/*
 * sched_int.h - private to scheduler/: the scheduler's tables, shared by its .c files.
 * Never included from outside the module.
 */
#ifndef LANESCHED_SCHED_INT_H
#define LANESCHED_SCHED_INT_H

#include "scheduler/core/sched.h"

#include "common/map.h"

/* Waits of committed items (waits.c): WAITS_SUB buckets per power of two of nanoseconds. */
#define WAITS_SUB_BITS 3u
#define WAITS_SUB      (1u << WAITS_SUB_BITS)
#define WAITS_EXP_MAX  40u
#define WAITS_BUCKETS  ((WAITS_EXP_MAX - WAITS_SUB_BITS + 1) * WAITS_SUB)
typedef struct {
    uint64_t count[WAITS_BUCKETS];
    uint64_t n, max;
} waits_t;
void waits_note(waits_t *w, uint64_t wait_ns);

/* budget.c: lateness is measured in this many shares of the budget. */
#define BUDGET_LATE_BUCKETS 64u

/* A model's heaps of shapes (heap.c). */
enum { HEAP_TOKENS = 0, HEAP_COLD, HEAP_OLDEST, HEAP_COUNT };
#define HEAP_ABSENT SIZE_MAX

/* budget.c invariant 8: a shape's or a model's arrivals, the last one, the mean gap between them
 * (decayed) and how many gaps it rests on (none before a second arrival). */
typedef struct {
    uint64_t last_ns;
    double mean_ns;
    uint32_t n; /* gaps seen */
} budget_gaps_t;

typedef struct sched_shape {
    struct sched *sched;
    uint32_t model_idx;
    uint32_t index; /* its place in its model's shapes[] */
    uint64_t seq;   /* order of first sight: ties between shapes go to the earlier */
    uint64_t signature;
    lanes_t *lanes;
    uint32_t warm; /* workers whose cache holds it (worker.c); a warm shape is not reclaimed */
    size_t heap_pos[HEAP_COUNT];
    /* A lower bound of its oldest queued item's arrival (shapes.c invariant 5); oldest_stale once
     * a dispatch may have taken that item. */
    uint64_t oldest_ns;
    int oldest_stale;
    uint64_t drain_ns;  /* budget.c invariant 4: items arrived by then are due */
    budget_gaps_t gaps; /* budget.c invariant 8 */
} sched_shape_t;

typedef struct {
    struct sched_shape **a;
    size_t n, cap;
} shape_heap_t;

/* budget.c invariant 7: a model's last held fill. */
typedef struct {
    int valid;
    uint64_t until_ns; /* its retry time */
    uint64_t arrivals; /* the model's arrivals then */
    packer_contract_t contract;
    const struct sched_worker *worker; /* NULL: any worker of the model */
} budget_memo_t;

/* A model (model.c): the handle sched_model_t. */
struct sched_model {
    char *name;
    uint32_t index;                    /* its place in s->models (the shape key's model part) */
    uint32_t refs;                     /* sched_model_open minus sched_model_close */
    struct sched_model *next_same_key; /* the next name under the same map key */
    sched_shape_t **shapes; /* unordered (a reclaimed shape's place takes the last one) */
    size_t n_shapes;
    size_t cap_shapes;
    size_t n_active;                      /* shapes holding queued items */
    budget_gaps_t gaps;                   /* over all its shapes (select.c invariant 5 d) */
    uint64_t queued_items, queued_tokens; /* over its shapes (shapes_queued_note) */
    sched_shape_t *current;        /* the sticky shape; mirrors the store's current-shape field */
    struct sched_worker **workers; /* the model's workers, unordered */
    size_t n_workers, cap_workers;
    shape_heap_t heaps[HEAP_COUNT];
    /* hold.c: decayed sums of its arrivals (items, tokens) as of load_t_ns, the first at
     * load_t0_ns; the short-memory item sum as of burst_t_ns and its decayed peak rate as of
     * peak_t_ns (items per second) */
    double load_items, load_tokens;
    uint64_t load_t_ns, load_t0_ns;
    double burst_items, peak_rate;
    uint64_t burst_t_ns, peak_t_ns;
    uint32_t tokens_cap; /* the most tokens an arrival counts with (hold.c invariant 5); 0: none */
    uint32_t tokens_cap_next; /* the most a contract declared since cap_t_ns */
    uint64_t cap_t_ns;        /* when the contracts' window began (HOLD_CAP_WINDOW_NS) */
    /* budget.c: the model's wait budget (0: none), the age at which its items are due, and how
     * late its due items went (decayed counts per 1/BUDGET_LATE_BUCKETS of the budget, the last
     * one beyond it) as of late_t_ns */
    uint64_t slo_ns, due_ns;
    double late[BUDGET_LATE_BUCKETS + 1];
    uint64_t late_t_ns;
    uint64_t arrivals; /* items submitted and returned (budget.c invariant 7) */
    /* budget.c invariant 9: its committed batches' items and charged tokens (padded, and the
     * prefixes of misses) per real token, decayed; 0 before the first */
    double batch_items, batch_charge;
    budget_memo_t held;
};

/* The core's view of one consumer (worker.c). */
struct sched_worker {
    struct sched *sched;
    uint32_t model_idx;
    uint32_t index; /* its place in its model's workers[] */
    int declared;
    packer_cost_t declared_cost;
    /* The estimator's exponentially weighted moments of (padded tokens, service ns). */
    double w, mean_x, mean_y, s_xx, s_xy;
    uint64_t samples;
    uint64_t last_done_ns; /* when its last batch completed: the next one cannot start earlier */
    uint32_t cache;        /* prefix cache capacity, in shapes */
    uint32_t n_warm;
    sched_shape_t **warm;   /* its cache as an LRU of shapes, most recent first; each pinned */
    sched_shape_t *current; /* cache affinity: the shape this worker drains */
    struct sched_inflight *batches; /* its batches in flight, newest first (sched.c invariant 10) */
    uint32_t n_batches;
};

typedef struct {
    store_ref_t ref;
    uint64_t arrival_ns;
    uint32_t tokens;
    uint32_t lane;
    uint32_t bytes; /* id and payload, as appended */
    uint8_t settled;
} sched_inflight_item_t;

/* The fill's scratch (fill.c): the views a fill peeked, their tokens, delivery counts and lanes,
 * and the copies of a merged batch's ids and payloads where its views are transient (extend.c:
 * peeking one lane may reuse the store's buffer behind the views of another). Owned by the
 * scheduler, valid until the next sched_* call. */
typedef struct {
    store_view_t *views; /* cap entries, as tokens, deliveries and lane_of */
    uint32_t *tokens;
    uint32_t *deliveries; /* fill.c's window, before its views are read */
    uint32_t *lane_of;    /* the lane of each view of the filled batch */
    size_t cap;
    uint8_t *arena;
    size_t arena_cap;
} fill_scratch_t;

/* A committed batch until every position is completed or returned: the one record of a batch
 * in flight (its holder and ack deadline included). */
typedef struct sched_inflight {
    uint64_t batch_id;
    sched_shape_t *shape;
    struct sched_worker *worker; /* the holder; NULL: none, or destroyed since */
    struct sched_inflight *worker_prev, *worker_next; /* in the worker's list */
    uint64_t commit_ns;
    uint64_t deadline_ns; /* 0: none (sched_batch_deadline_set) */
    uint64_t padded_tokens;
    uint32_t prefix_charged; /* the prefix tokens the worker computes for it (sched_batch_t) */
    uint32_t lane;           /* the lane it was chosen from */
    uint32_t n;
    uint32_t unsettled;
    int sampled; /* its completion time went to the worker's estimator */
    sched_inflight_item_t items[];
} sched_inflight_t;

/* A model's wait budget set by name (sched_slo_set). */
typedef struct {
    char *model;
    uint64_t slo_ns;
} sched_slo_t;

struct sched {
    store_t *store; /* borrowed */
    uint32_t max_lanes;
    sched_clock_fn clock;
    void *clock_ctx;
    uint32_t max_deliveries;
    uint64_t starvation_ns;
    sched_policy_t policy;
    double merge_credit;
    double merge_credit_loaded; /* ... while the offered load is where the hold is whole */
    uint64_t hold_ns;           /* 0: no hold (hold.c) */
    double hold_load;           /* the gate: offered load at least this */
    double hold_ramp;           /* ... and the whole hold from hold_load + hold_ramp */
    double hold_share;          /* held while the fixed cost is at least this share of the batch */
    double hold_burst; /* the hold's length in a burst regime, in hold_ns; 0: no burst regime */
    uint64_t slo_ns;   /* every model's wait budget (budget.c); 0: none */
    sched_slo_t *slos; /* per-model budgets, n_slos of them */
    size_t n_slos;
    uint64_t retry_ns;      /* sched_retry_ns: set by the last fill that found nothing */
    sched_model_t **models; /* model.c */
    size_t n_models;
    map_t model_names; /* the names' XXH64 pair -> the first sched_model_t under it */
    map_t shapes;      /* (signature, model index) -> sched_shape_t */
    map_t inflight;    /* (batch_id, 0) -> sched_inflight_t */
    uint64_t next_batch_id;
    /* The batch of the last sched_fill, valid until the next call that mutates anything. */
    sched_batch_t filled;
    sched_shape_t *filled_shape;
    struct sched_worker *filled_worker;
    int filled_valid;
    int filled_extendable;   /* the lane fill took its whole lane, with room left */
    int held;                /* the last fill's batch waits (hold.c) */
    uint64_t fill_now_ns;    /* the clock, read once per sched_fill: its decisions share one now */
    fill_scratch_t scratch;  /* fill.c */
    uint64_t *done_arrivals; /* sched_complete's arrivals of the items it first completed */
    size_t done_cap;
    uint64_t next_shape_seq;
    sched_counters_t counters;
    uint64_t items_restored, tokens_restored; /* queued in the store when the scheduler opened */
    uint64_t inflight_items, inflight_tokens; /* committed, neither completed nor returned */
    uint64_t queued_items, queued_tokens;     /* the sums over every shape's lanes */
    waits_t waits;                            /* arrival -> commit of every committed item */
    store_status_t store_status;              /* the store's answer behind the last SCHED_ESTORE */
};

/* First peek window of a fill, in entries (doubled while the packer takes all of it; fill.c). */
#define SCHED_PEEK_FIRST 64u
/* The batch count inside one epoch: the low 32 bits of a batch id (sched.c invariant 4). */
#define SCHED_EPOCH_SHIFT 32

/* fill.c: the scratch holds at least n views (and tokens, lanes). */
sched_status_t fill_scratch_reserve(fill_scratch_t *f, size_t n);
/* Gives a peak's scratch back (the tick): past FILL_SCRATCH_KEEP entries, it is freed. */
void fill_scratch_trim(fill_scratch_t *f);
void fill_scratch_free(fill_scratch_t *f);

/* model.c */
/* The model named `name` (borrowed), or NULL. */
sched_model_t *model_find(const struct sched *s, const char *name);
/* The model, added on first sight (in the place of one neither in use nor referenced). */
sched_status_t model_intern(struct sched *s, const char *name, sched_model_t **out /* out */);
/* Whether the model holds shapes or workers (model.c invariant 2). */
int model_in_use(const sched_model_t *m);
void model_destroy_all(struct sched *s);
/* model.c's invariants 1 and 4. */
int model_check(const struct sched *s);

/* shapes.c */
/* The shape (model, signature), created on first sight. */
sched_status_t shapes_intern(struct sched *s, sched_model_t *model, uint64_t signature,
                             sched_shape_t **out /* out */);
void shapes_destroy_all(struct sched *s);
/* The policy's quiesce rule (lanes_quiesce_rule_t) on every shape, then idle shapes reclaimed. */
void shapes_tick(struct sched *s, uint64_t now_ns);
/* After the shape's queued items and tokens changed from before_items, before_tokens: keeps the
 * scheduler's queued totals, its model's n_active and heaps. */
void shapes_queued_note(struct sched *s, sched_shape_t *shape, uint64_t before_items,
                        uint64_t before_tokens);
/* The shape with the oldest queued item, its bound made exact (shapes.c invariant 5); NULL when
 * none holds items. */
sched_shape_t *shapes_oldest_top(struct sched *s, sched_model_t *m);
/* The shape's oldest arrival made exact, its heap place kept. */
uint64_t shapes_oldest_exact(struct sched *s, sched_model_t *m, sched_shape_t *shape);
/* The same as shapes_oldest_top among the shapes not in except[0..n) (n <=
 * SCHED_CACHE_SHAPES_MAX + 1). */
sched_shape_t *shapes_oldest_except(struct sched *s, sched_model_t *m, sched_shape_t *const *except,
                                    size_t n_except);
/* Reads the shape's oldest readable item from the store (O(lanes)) into oldest_ns. */
void shapes_oldest_refresh(struct sched *s, sched_shape_t *shape);
/* The shape's oldest readable queued item: 1, its arrival and its lane (may be NULL); 0 when it
 * has none. O(lanes). */
int shapes_oldest(struct sched *s, const sched_shape_t *shape, uint64_t *out_ns /* out */,
                  uint32_t *out_lane /* out */);

/* heap.c */
/* Room for one more shape in each of the model's heaps, so heap_fix cannot fail. */
sched_status_t heap_reserve(sched_model_t *m);
void heap_free(sched_model_t *m);
/* After any change of the shape's queued tokens, items, warm count or oldest bound. */
void heap_fix(sched_model_t *m, sched_shape_t *shape);
/* Takes the shape out of every heap (it is being reclaimed). */
void heap_drop(sched_model_t *m, sched_shape_t *shape);
sched_shape_t *heap_top(const sched_model_t *m, int h);
/* The top of heap h sifted down again after its key changed. */
void heap_top_resift(sched_model_t *m, int h);
/* One heap alone: the shape taken out (if in it) or put in (it must not be in it). */
void heap_remove_one(sched_model_t *m, int h, sched_shape_t *shape);
void heap_insert_one(sched_model_t *m, int h, sched_shape_t *shape);
/* heap.c's invariants 1 and 2 for one model (full recount: the tick's check). */
int heap_check(const sched_model_t *m);
/* The same as far as one shape reaches them: its membership and its place against its parent
 * and children, O(1) (after every operation that touched it). */
int heap_check_shape(const sched_model_t *m, const sched_shape_t *shape);
/* worker.c's invariant 1 for one worker, O(cache^2). */
int worker_check(const struct sched_worker *w);

/* hold.c */
/* An item of `tokens` arrived for the model at `now`. */
void hold_arrival_note(sched_model_t *m, uint32_t tokens, uint64_t now);
/* A contract filled for the model: the longest input its workers run (hold.c invariant 5). */
void hold_contract_note(sched_model_t *m, const packer_contract_t *k, uint64_t now);
/* A model place reused by another name (model.c invariant 3) starts with no arrivals. */
void hold_model_init(sched_model_t *m);
/* The model's offered load as a share of its workers' time, each item costed in a full batch of
 * its own length under contract k and cost (hold.c invariant 1). */
double hold_load(const sched_model_t *m, const packer_contract_t *k, const packer_cost_t *cost,
                 uint64_t now);
/* Whether s->filled waits (hold.c invariants 2, 3): 1 and *out_until, when the hold ends. */
int hold_batch(struct sched *s, const sched_consumer_t *c, sched_model_t *m,
               const packer_cost_t *cost, uint64_t now, uint64_t *out_until /* out */);

/* budget.c */
/* 1 when the model's wait budget rules c's fills: a budget set, the `lanes` policy, a worker. */
int budget_on(const struct sched *s, const sched_consumer_t *c, const sched_model_t *m);
/* The model's budget and due age from the configuration (at its interning). */
void budget_model_init(struct sched *s, sched_model_t *m);
void budget_free(struct sched *s);
/* An item of model m committed after waiting wait_ns: how late it went past its due age. */
void budget_note_commit(sched_model_t *m, const store_view_t *v, uint64_t wait_ns);
/* budget.c invariant 9: a committed batch's size and what its tokens cost. */
void budget_note_batch(sched_model_t *m, const sched_batch_t *b);
/* Every tick: each budgeted model's due age from the lateness it measured (budget.c). */
void budget_tick(struct sched *s, uint64_t now);
/* The age past which an item of the model goes first: the due age under a budget, else the
 * configured age bound (starvation_ns). */
uint64_t budget_age_bound(const struct sched *s, const sched_model_t *m);
/* The same for one shape: under a budget, a shape that expects no company before its items are
 * due keeps the configured age bound (budget.c invariant 8). */
uint64_t budget_shape_bound(const struct sched *s, const sched_shape_t *shape);
/* Whether waiting may bring the shape company: always without a budget; under one, while its
 * mean arrival gap, over at least BUDGET_GAP_SAMPLES gaps, is shorter than the due age (budget.c
 * invariant 8). */
int budget_company(const struct sched *s, const sched_shape_t *shape);
/* budget.c invariant 8: whether the next arrival is expected before end (the mean gap, or the
 * silence since the last arrival when longer, reaches no further than end); if so, *out_ask is
 * when to ask again should nothing arrive: when the silence would reach the time left. Arrivals
 * seen once expect none. */
int budget_company_before(const budget_gaps_t *g, uint64_t now, uint64_t end,
                          uint64_t *out_ask /* out */);
/* An item of the shape of model m arrived at now (budget.c invariant 8). */
void budget_arrival_note(sched_model_t *m, sched_shape_t *shape, uint64_t now);
/* budget.c invariant 7: 1 when the consumer's fill would be held as the model's last one was
 * (s->held and s->retry_ns set); budget_held_note records a fill just made. */
int budget_held_again(struct sched *s, const sched_consumer_t *c, const sched_model_t *m);
void budget_held_note(struct sched *s, const sched_consumer_t *c, sched_model_t *m);
/* Whether a batch is full to the contract: its items, or no further item of its pad fits. */
int budget_full(const sched_batch_t *b, const packer_contract_t *k);
/* Under a budget: whether s->filled waits for company (budget.c invariants 2, 3, 10): 1 and
 * *out_until, when its first item is due. */
int budget_hold(struct sched *s, const sched_consumer_t *c, const sched_model_t *m,
                sched_shape_t *shape, uint64_t now, uint64_t *out_until /* out */);

/* worker.c */
/* The worker served a batch of this shape: its cache model takes it as the most recent. */
sched_status_t worker_warm_touch(struct sched_worker *w, sched_shape_t *shape);
int worker_is_warm(const struct sched_worker *w, const sched_shape_t *shape);
/* The in-flight record joins / leaves its holder's list (worker.c invariant 4). */
void worker_batch_link(struct sched_worker *w, struct sched_inflight *rec);
void worker_batch_unlink(struct sched_worker *w, struct sched_inflight *rec);
/* The cost packing uses for this worker: 1 and *out when known (declared, or estimated). */
int worker_cost(const struct sched_worker *w, packer_cost_t *out /* out */);
void worker_destroy_all(struct sched *s);

/* extend.c: extends s->filled (items of one lane of shape in s->views) with whole neighbouring
 * lanes while each merge pays at cost and the contract holds; cap bounds the items. `full`: the
 * merge is credited the whole fixed cost and a lane's front may fill the batch (budget.c
 * invariant 6). */
sched_status_t extend_fill(struct sched *s, const sched_consumer_t *consumer,
                           const packer_cost_t *cost, sched_shape_t *shape, uint64_t cap, int full);

/* check.c: the invariants after one operation that touched `lane` of `shape` (NULL: no lane). */
int sched_check_op(const struct sched *s, const sched_shape_t *shape, uint32_t lane);
/* The same after an operation that touched lanes[0..n) of shape (repeats are checked once). */
int sched_check_op_lanes(const struct sched *s, const sched_shape_t *shape, const uint32_t *lanes,
                         size_t n);

/* select.c: the model's shape for the next batch (sticky): SCHED_EEMPTY when it has no work,
 * SCHED_ESTORE when recording a switch failed. */
sched_status_t select_shape(struct sched *s, sched_model_t *model, const sched_consumer_t *consumer,
                            sched_shape_t **out /* out */);
/* 1 when each worker of the model chooses its own shape (affinity to its warm shapes: the active
 * shapes outnumber its cache, or outnumber the model's workers while some are not warm in it),
 * 0 when the model's workers follow one sticky shape (select.c invariant 5). */
int select_affine_mode(const sched_model_t *model, const struct sched_worker *w);
/* With the starvation bound on: 1 and the lane holding the shape's oldest readable item when
 * that item has waited past the bound; 0 otherwise (out_lane untouched). */
int select_lane_starved(struct sched *s, const sched_shape_t *shape, uint32_t *out_lane /* out */);

#endif
