/*
 * sched.h - the contract of lanesched's scheduling core.
 *
 * The third of three layers, each usable alone (the bench's simulator drives all three):
 * lanes.h (rolling lanes of one shape), packer.h (the four-integer contract and the cost of a
 * merge), and here the scheduler: the models and their shapes, selection (sticky draining, the
 * age bound, cache affinity), the shape guard, the workers the core keeps of consumers
 * (sched_worker_*: cost model or its estimate, warm shapes), and the life of a batch (fill ->
 * commit -> complete / return) over a store (store/store.h). Two policies: `lanes` (the
 * default) and `lanes-seed` (the article's; sched_policy_t).
 *
 * No NATS here and no clock of its own: time comes from an injected clock, so every timing rule
 * (the quiesce rule) is tested exactly. "The article" below is Corey James's article on the
 * shape-aware broker this design comes from (docs/policy.md).
 */
#ifndef LANESCHED_SCHED_H
#define LANESCHED_SCHED_H

#include "scheduler/core/lanes.h"
#include "scheduler/core/packer.h"
#include "scheduler/core/status.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

typedef uint64_t (*sched_clock_fn)(void *ctx); /* monotonic nanoseconds */

/* How the core chooses and packs batches. */
typedef enum {
    /* The default. With consumers that bring a worker (sched_worker_create): cost-aware packing
     * across neighbouring lanes of the shape, and cache affinity when a model has more active
     * shapes than the worker's prefix cache holds; a lane is quiesced only once none of its
     * items queues (LANES_QUIESCE_RULE_EMPTY). The age bound (starvation_ns) is meant to be on
     * (SCHED_AGE_BOUND_DEFAULT_NS): the daemon and the bench set it. */
    SCHED_POLICY_LANES = 0,
    /* The article's policy: a batch from one lane, every worker of a model on the model's one
     * current shape, the article's quiesce rule (LANES_QUIESCE_RULE_SPARSE). With starvation_ns
     * 0 it is exactly the scheduler before the `lanes` policy existed (lanesched-bench's
     * lanes-seed). */
    SCHED_POLICY_SEED,
    SCHED_POLICY_COUNT
} sched_policy_t;

/* "lanes", "lanes-seed"; NULL for an unknown value. */
const char *sched_policy_name(sched_policy_t policy);

typedef struct {
    uint32_t max_lanes; /* 0 = LANES_MAX */
    sched_clock_fn clock;
    void *clock_ctx; /* borrowed */
    /* An item delivered this many times is handed out alone, marked dead_letter, instead of
     * in a batch: one poisonous item cannot loop forever. 0 = no limit. */
    uint32_t max_deliveries;
    /* Starvation bound (0 = off, the default): when a shape other than the model's current one
     * holds an item that has waited longer than this, the next batch comes from the shape with
     * the oldest such item, preempting the sticky shape at a batch boundary. Each preemption
     * costs a prefix-cache switch; its price in hit rate is measured by lanesched-bench. */
    uint64_t starvation_ns;
    sched_policy_t policy; /* SCHED_POLICY_LANES when zeroed */
    /* The `lanes` policy merges a neighbouring lane into a batch when the padding it adds costs
     * less than this share of the fixed cost of the separate batch it saves (extend.c). 0 =
     * SCHED_MERGE_CREDIT_DEFAULT; at most 1 (the whole fixed cost). */
    double merge_credit;
    /* The credit while the model's offered load is at least hold_load + hold_ramp (where the
     * hold is whole): 0 = SCHED_MERGE_CREDIT_LOADED x merge_credit (at most 1); at most 1. */
    double merge_credit_loaded;
    /* The `lanes` policy's hold (hold.c; 0 = off): while a model's offered load is at least
     * hold_load (0 = SCHED_HOLD_LOAD_DEFAULT) of its workers' time, a batch whose fixed cost is
     * at least hold_share (0 = SCHED_HOLD_SHARE_DEFAULT) of its GPU time waits for company
     * until its oldest item has waited hold_ns. */
    uint64_t hold_ns;
    double hold_load;
    double hold_share;
    double hold_ramp;
    /* In a burst regime (a model's recent peak load over its workers' time), the hold is
     * hold_burst x hold_ns whatever the load now (0 = SCHED_HOLD_BURST_DEFAULT; < 0 = no burst
     * regime, the gate and ramp alone). */
    double hold_burst;
    /* The wait budget (budget.c; 0 = none): the p99 queue wait the user accepts, for every model
     * (sched_slo_set: one model's). Under it the `lanes` policy's batches wait for company until
     * the budget's due age, and that age is the model's age bound; hold_* and starvation_ns
     * then do not apply to the model. */
    uint64_t slo_ns;
} sched_config_t;

typedef struct sched sched_t;

/* A model: its name interned once (model.c). A handle is valid while its model is referenced
 * (sched_model_open) or in use (it holds shapes or workers). */
typedef struct sched_model sched_model_t;

/* An item to submit. Every pointer is borrowed for the call (the store copies). */
typedef struct {
    sched_model_t *model;
    uint64_t signature;
    uint32_t tokens;
    const uint8_t *id;
    size_t id_len;
    const uint8_t *payload;
    size_t payload_len;
    /* Tokens of the cacheable prefix the signature covers (WorkItem.prefix_tokens; 0 =
     * unknown): a worker whose cache holds the shape skips them, one that does not computes
     * them once for the batch. */
    uint32_t prefix_tokens;
    /* The item's own wait budget in ms (WorkItem.max_wait_ms; 0 = its model's, see
     * sched_config_t.slo_ns): it caps the model's budget for this item, never raises it. */
    uint32_t max_wait_ms;
} sched_item_t;

typedef struct {
    uint32_t lane;
    int opened;
    int force_fit;
} sched_placement_t;

typedef struct sched_worker sched_worker_t;

typedef struct {
    sched_model_t *model; /* borrowed for the call */
    packer_contract_t contract;
    /* Borrowed: the consumer's state in the core (cost model, warm shapes), or NULL for a
     * consumer the core knows nothing of: it is then packed and served as SCHED_POLICY_SEED
     * would, whatever the policy. */
    sched_worker_t *worker;
} sched_consumer_t;

/* ------------------------------------------------------------------------------------------ */
/* Workers: what the core keeps of one consumer (worker.c).                                   */

/* A worker that declares a prefix cache of more shapes than this is tracked as this many, so
 * what a client declares cannot grow the core's memory; engines keep a handful. */
#define SCHED_CACHE_SHAPES_MAX 256u

typedef struct {
    /* The worker's declared cost: batch_fixed_us microseconds per batch plus token_ns
     * nanoseconds per padded token. Both 0: not declared; the core estimates them from the
     * worker's dispatch-to-ack times (worker.c says how). One 0 and one set: declared, with 0
     * meaning "costs nothing". */
    uint32_t batch_fixed_us;
    uint32_t token_ns;
    uint32_t cache_shapes; /* shapes the worker's prefix cache holds; 0 = 1 */
} sched_worker_config_t;

typedef struct {
    packer_cost_t cost; /* valid when known */
    int known;          /* declared, or estimated from enough samples: packing may merge */
    int estimated;      /* from samples rather than declared */
    uint64_t samples;   /* batches measured */
    uint32_t cache_shapes;
    uint32_t warm_shapes; /* shapes now in the worker's cache (as the core models it) */
} sched_worker_info_t;

/*
 * A consumer of `model` becomes known to the core (the model is then in use). The worker is
 * owned by the scheduler: freed by sched_worker_destroy, or by sched_destroy. *out is a handle
 * to pass in sched_consumer_t.worker.
 */
sched_status_t sched_worker_create(sched_t *sched, sched_model_t *model,
                                   const sched_worker_config_t *cfg,
                                   sched_worker_t **out /* out */);
/* Forgets a worker (its consumer left or died); its batches in flight stay in flight, with no
 * holder. NULL-safe. */
void sched_worker_destroy(sched_t *sched, sched_worker_t *worker);
void sched_worker_info(const sched_worker_t *worker, sched_worker_info_t *out /* out */);
/* One measured batch: the tokens it computed (padded tokens, plus its prefix when the worker
 * did not hold the shape: sched_batch_t.prefix_charged) and the time it took. The core calls it
 * when a batch of the worker completes (sched_complete); exposed so the estimator is tested
 * alone. */
void sched_worker_sample(sched_worker_t *worker, uint64_t padded_tokens, uint64_t service_ns);

/*
 * A packed batch. `items` is a view into the scheduler and the store, valid until the next
 * sched_* call on the same scheduler. The batch id is unique for the scheduler's life.
 */
typedef struct {
    uint64_t batch_id;
    const char *model_view;
    uint64_t signature;
    uint32_t lane;  /* the lane the batch was chosen from (its first items) */
    uint32_t lanes; /* lanes its items come from: 1, or more after cost-aware merging */
    uint32_t pad_to;
    uint64_t padded_tokens;
    uint64_t real_tokens;
    /* The shape's prefix (the longest prefix_tokens of its items), and what the worker pays for
     * it as the core models its cache: the prefix when the shape is not warm in it, else 0. */
    uint32_t prefix_tokens;
    uint32_t prefix_charged;
    size_t n;
    /* Each lane's items together and in that lane's arrival order, the chosen lane first. */
    const store_view_t *items_view;
    int dead_letter; /* one item past max_deliveries: publish it as dead, commit, complete */
} sched_batch_t;

typedef struct {
    uint64_t items_received, tokens_received;
    uint64_t items_routed, tokens_routed; /* each delivery counts */
    uint64_t items_completed, tokens_completed;
    uint64_t items_returned;
    uint64_t lanes_opened, lane_reuses, lanes_quiesced, force_fits;
    uint64_t shape_switches;
    uint64_t starvation_preemptions; /* switches forced by the starvation bound */
    uint64_t padded_tokens, real_tokens;
    uint64_t batches;          /* committed (dead letters included) */
    uint64_t merged_batches;   /* committed batches holding items of more than one lane */
    uint64_t merged_lanes;     /* lanes those batches took beyond the first */
    uint64_t shapes_reclaimed; /* idle shapes freed by the tick */
    uint64_t holds;            /* fills whose batch waited for company (hold.c) */
    /* Bytes of merged batches' ids and payloads copied out of transient views (extend.c
     * invariant 3): 0 while the store's views outlive its peeks (the memory store, the disk
     * store's mappings). */
    uint64_t fill_copied_bytes;
    /* Batch times as workers' completions measured them (worker.c), summed: the GPU busy time
     * the scheduler saw. A batch counts once, at its first completion. */
    uint64_t service_ns, service_batches;
} sched_counters_t;

/*
 * `store` is borrowed and must outlive the scheduler. Every queue the store already holds (a
 * recovered disk store) is restored as a lane of its shape, with its recorded target raised to
 * its longest item if need be, and each model's current shape is read back from the store.
 * *out is freed with sched_destroy.
 */
sched_status_t sched_create(const sched_config_t *config, store_t *store, sched_t **out /* out */);
/* Frees the scheduler. Batches still in flight stay pending in the store. NULL-safe. */
void sched_destroy(sched_t *sched);

/* The age bound the `lanes` policy runs with unless told otherwise (starvation_ns): the longest
 * that keeps its p99 wait under both bucket schemes' at every load of the steady sweep; GPU time,
 * waste and capacity do not move with it. Chosen with `lanesched-bench sweep --preset steady
 * --age-bound-ms B` (docs/policy.md, "Choosing the constants"). */
#define SCHED_AGE_BOUND_DEFAULT_NS 20000000ull
/* The share of a separate batch's fixed cost a merge is credited with (merge_credit). A lane
 * left out of a batch is not sent alone at once: it keeps filling while it waits, so the batch
 * a merge saves is worth less than a whole fixed cost, and the whole (1.0) spends nearly every
 * saving on padding. The smallest share with lanes' p99 wait under both bucket schemes' at
 * every load of the steady sweep: `lanesched-bench sweep --preset steady --merge-credit X`
 * (docs/policy.md, "Choosing the constants"). */
#define SCHED_MERGE_CREDIT_DEFAULT 0.07
/* Once a model's offered load is where the hold is whole, the credit is this many times
 * merge_credit. The queue then sets the wait, a lane left out waits behind it in any case, and
 * a batch saved is worker time every queued item gets back; more spends it on padding again. The
 * factor with the most capacity at the 5 s SLO over seven seeds (every one gains), steady's
 * waste at 71% unchanged: `lanesched-bench sweep --preset steady [--prefixes] --seed N
 * --merge-credit-loaded X` (docs/policy.md, "Choosing the constants"). */
#define SCHED_MERGE_CREDIT_LOADED 2.0
/* The hold (hold.c). Below the gate the buckets' p99 is too short to spend any of it, so the
 * hold starts at SCHED_HOLD_LOAD_DEFAULT of the workers' time and reaches its whole length
 * SCHED_HOLD_RAMP_DEFAULT later; the length is the longest that keeps the p99 under the buckets'
 * at every load on seven seeds; the share keeps a batch of a few mid-length items from waiting.
 * Chosen with `lanesched-bench sim|sweep --preset steady --hold-ms H --hold-load L --hold-ramp R
 * --hold-share S --seed N` (docs/policy.md, "Choosing the constants"). */
#define SCHED_HOLD_DEFAULT_NS    350000000ull
#define SCHED_HOLD_LOAD_DEFAULT  0.6
#define SCHED_HOLD_SHARE_DEFAULT 0.2
#define SCHED_HOLD_RAMP_DEFAULT  0.15
/* The burst regime (hold.c): once a second of a model's arrivals has asked for more than its
 * workers' whole time within the last minute or so, the queue the burst built sets the tail,
 * and items between bursts can wait for company at little cost to it. The factor is the most
 * GPU time saved before the median wait climbs, with the sweeps' p99 under the buckets' at every
 * load on seven seeds: `lanesched-bench sim --preset bursty --hold-burst F --seed N`
 * (docs/policy.md, "Choosing the constants"). */
#define SCHED_HOLD_BURST_DEFAULT 2.0
/* The factor a config's hold_burst stands for: 0 (no burst regime) when negative, the default
 * when 0. */
double sched_hold_burst_resolve(double configured);
/* The credits a config's merge_credit and merge_credit_loaded stand for (0: the defaults),
 * into *out_credit and *out_loaded. */
void sched_merge_credit_resolve(double credit, double loaded, double *out_credit /* out */,
                                double *out_loaded /* out */);

/* One model's wait budget (0: none), over sched_config_t.slo_ns; kept for a model not seen yet.
 * SCHED_ENOMEM, or SCHED_EINVAL for an empty name. */
sched_status_t sched_slo_set(sched_t *sched, const char *model, uint64_t slo_ns);

/* Longest item the scheduler takes: pad_to and padded-token sums stay within 32/64 bits. */
#define SCHED_MAX_TOKENS (UINT32_MAX - PACKER_PAD_MULTIPLE)

/* Places one item: shape lookup (created on first sight), lane choice, store append. On
 * SCHED_ESTORE, sched_store_status says why (STORE_ENOSPC: the disk is full). */
sched_status_t sched_submit(sched_t *sched, const sched_item_t *item,
                            sched_placement_t *out /* out, may be NULL */);

/*
 * Packs the next batch for a consumer: stays on the model's current shape while it has
 * dispatchable tokens, else switches to the shape with the most; within the shape tries lanes
 * in descending queued-token order. Peeks only: no item moves until sched_commit (choosing the
 * batch may switch the model's current shape and uses a batch id). The shape guard runs on the
 * batch before it is returned. SCHED_EEMPTY when the model has no readable work.
 */
sched_status_t sched_fill(sched_t *sched, const sched_consumer_t *consumer,
                          sched_batch_t *out /* out */);

/*
 * Commits the batch last returned by sched_fill, once the consumer's channel has taken it:
 * the store's three commit steps, then the batch is in flight under its id. A batch that is
 * never committed (the publish failed) leaves nothing behind: its items are still queued.
 * SCHED_ESTORE: the batch is not in flight, and its items are queued again, except where a
 * merged batch's later lane failed and the earlier lanes could not be put back either: those
 * stay in flight under the batch's id with no worker (sched_batch_pending says so), and the
 * caller returns them with sched_return.
 */
sched_status_t sched_commit(sched_t *sched, const sched_batch_t *batch);

/* What one completion or return did, for the caller's own books. */
typedef struct {
    uint32_t positions;     /* positions settled by this call */
    uint64_t bytes;         /* their ids' and payloads' bytes, as submitted */
    uint64_t items, tokens; /* completions only: the first completions among them (the items and
                               tokens the completed counters gained) */
    int closed;             /* no position is left: the batch's record is gone */
    /* Completions only. When the batch was committed (the caller's clock), the worker's busy
     * time this call measured (the batch's first completion: counters.service_ns gained it; 0
     * otherwise), and the arrivals of the `items` first completions (a view, valid until the
     * next sched_complete; NULL when items is 0 or out of memory). */
    uint64_t commit_ns;
    uint64_t service_ns;
    const uint64_t *arrivals_view;
    int held; /* the batch had a holder (a delivery; 0: a dead letter) */
} sched_settled_t;

/* Completes positions of an in-flight batch (all of them when positions is NULL). Already
 * settled positions are skipped, so repeating an ack is harmless. *out (may be NULL) says what
 * this call did; unlike other out pointers it is also set on SCHED_ESTORE, because the positions
 * before the failure are completed and stay so. */
sched_status_t sched_complete(sched_t *sched, uint64_t batch_id, const uint32_t *positions,
                              size_t n, sched_settled_t *out /* out */);

/* Returns positions (all when NULL) of an in-flight batch to the front of their lane. */
sched_status_t sched_return(sched_t *sched, uint64_t batch_id, const uint32_t *positions, size_t n,
                            sched_settled_t *out /* out */);
/* Returns every position of a batch no one received (the transport found no subscriber): as
 * sched_return, with each item's delivery count back down by one (store_return_unseen). */
sched_status_t sched_return_unseen(sched_t *sched, uint64_t batch_id,
                                   sched_settled_t *out /* out */);

/* 1 while the batch has positions neither completed nor returned. */
int sched_batch_pending(const sched_t *sched, uint64_t batch_id);

/* An in-flight batch as the core records it. */
typedef struct {
    sched_worker_t *worker; /* borrowed: its holder; NULL for none, or a holder destroyed since */
    uint32_t positions;     /* 0 .. positions - 1 exist */
    uint32_t unsettled;
    uint64_t deadline_ns; /* 0: none */
} sched_batch_info_t;

/* 1 and *out for a batch in flight; 0 (out untouched) for an unknown or settled one. */
int sched_batch_info(const sched_t *sched, uint64_t batch_id, sched_batch_info_t *out /* out */);
/* Sets the batch's ack deadline (the caller's clock; 0: none). SCHED_EUNKNOWN when it is not in
 * flight. The core only keeps it: the caller decides what a passed deadline means. */
sched_status_t sched_batch_deadline_set(sched_t *sched, uint64_t batch_id, uint64_t deadline_ns);
/* The batches in flight a worker holds: how many, the newest (1 and *out_id; 0 when none), one
 * whose deadline is at or before now_ns (1 and *out_id; 0 when none), and the earliest deadline
 * of them, or `bound` if that is earlier (or none is set). */
size_t sched_worker_batches(const sched_worker_t *worker);
int sched_worker_batch_newest(const sched_worker_t *worker, uint64_t *out_id /* out */);
/* The next older batch of the same holder after batch_id: 1 and *out_id; 0 when none. */
int sched_batch_older(const sched_t *sched, uint64_t batch_id, uint64_t *out_id /* out */);
int sched_worker_batch_expired(const sched_worker_t *worker, uint64_t now_ns,
                               uint64_t *out_id /* out */);
uint64_t sched_worker_deadline_next(const sched_worker_t *worker, uint64_t bound);
/* Moves every set deadline of the worker's batches by_ns later: time the caller did not see
 * pass (its own loop stalled) counts against no one. */
void sched_worker_deadlines_shift(sched_worker_t *worker, uint64_t by_ns);

/* Maintenance tick (every LANES_TICK_NS): the policy's quiesce rule (lanes_quiesce_rule_t) on
 * every shape, idle shapes (no lane in use, in no worker's cache, not their model's current
 * shape) freed, and fill scratch grown past a few hundred entries by a large batch released. */
void sched_tick(sched_t *sched);

/*
 * After a sched_fill that returned SCHED_EEMPTY: the time at which a fill for the same consumer
 * may find work without anything else happening first (cache affinity holds a worker back from
 * a cold shape until its oldest item reaches the cold bound), or 0 when only new work or a
 * completion can change the answer. The daemon and the simulator wake for it.
 */
uint64_t sched_retry_ns(const sched_t *sched);

/* Items and tokens queued (dispatchable, not in flight) over every model: 0 and 0 when the
 * scheduler holds nothing to dispatch, whether it was received or recovered. */
void sched_queued(const sched_t *sched, uint64_t *out_items /* out */,
                  uint64_t *out_tokens /* out */);

/* Items and tokens in flight (committed, not settled), and those the store held when the
 * scheduler opened: restored + received = queued + in flight + completed, in items and tokens
 * (check.c), so a process that recovered items can still balance what it took against what it
 * completed. */
void sched_inflight(const sched_t *sched, uint64_t *out_items /* out */,
                    uint64_t *out_tokens /* out */);
void sched_restored(const sched_t *sched, uint64_t *out_items /* out */,
                    uint64_t *out_tokens /* out */);

/* How long committed items waited, arrival to commit: the q-quantile (0 <= q < 1; 1 = the
 * longest), to within 12.5% above the true value (waits.c); 0 before any commit. */
uint64_t sched_wait_quantile_ns(const sched_t *sched, double q);

/* Entries of fill scratch the scheduler holds now (each a store_view_t and a token count). */
size_t sched_scratch_entries(const sched_t *sched);

/* Borrowed view of the counters, valid until sched_destroy. */
const sched_counters_t *sched_counters(const sched_t *sched);

/* The store's status behind the most recent SCHED_ESTORE. */
store_status_t sched_store_status(const sched_t *sched);

/* Calls fn for every shape the scheduler knows; `model` and `lanes` are borrowed for the call.
 * `current` is set for each model's current shape. */
typedef void (*sched_shape_visit_fn)(void *ctx, const char *model, uint64_t signature,
                                     const lanes_t *lanes, int current);
void sched_shapes_visit(const sched_t *sched, sched_shape_visit_fn fn, void *ctx);

/* The lanes of a shape, or NULL if the scheduler has never seen it. Borrowed view. */
const lanes_t *sched_lanes_view(const sched_t *sched, const sched_model_t *model,
                                uint64_t signature);

/* The model named `name` (borrowed), interned on first sight: one reference, given back with
 * sched_model_close. The handle is returned to the caller, valid while referenced or in use. */
sched_status_t sched_model_open(sched_t *sched, const char *name, sched_model_t **out /* out */);
void sched_model_close(sched_t *sched, sched_model_t *model); /* NULL-safe */
/* The model named `name`, or NULL: a borrowed handle, valid until the next call that may free
 * models (sched_tick, sched_model_open of another name). */
sched_model_t *sched_model_find(const sched_t *sched, const char *name);
const char *sched_model_name(const sched_model_t *model); /* view, valid with the handle */

/* How many models the scheduler has in use (holding shapes or workers: model.c invariant 2),
 * whether `model` (NULL: none) is one of them, and how many shapes `model` has (NULL: every
 * model's): what the daemon's limits on client-made state count. */
size_t sched_model_count(const sched_t *sched);
int sched_model_in_use(const sched_model_t *model);
size_t sched_shape_count(const sched_t *sched, const sched_model_t *model);

/* The arrival of the model's oldest queued item (the store's clock, as store_view_t.arrival_ns):
 * 1 and *out_ns, or 0 (untouched) when it has nothing queued. O(log shapes) from the age heap. */
int sched_model_oldest(sched_t *sched, sched_model_t *model, uint64_t *out_ns /* out */);
/* The model's oldest queued item as a batch of one marked dead_letter, when it arrived at or
 * before cutoff_ns: SCHED_OK and *out, committed and completed like any dead letter (its
 * holder is none); SCHED_EEMPTY when the oldest item is younger. The queue age limit
 * (JetStream's max_age): the caller publishes it as expired. */
sched_status_t sched_fill_expired(sched_t *sched, sched_model_t *model, uint64_t cutoff_ns,
                                  sched_batch_t *out /* out */);

/* The model's current shape: 0 with *out_sig untouched when it has none. */
int sched_current_shape(const sched_t *sched, const sched_model_t *model,
                        uint64_t *out_sig /* out */);

/*
 * The shape guard: every item of the batch must carry `current`. On a mismatch it prints the
 * offending batch and aborts the process: a poisoned prefix cache is worse than a restart.
 */
void sched_guard_check(const sched_batch_t *batch, uint64_t current);

/*
 * Debug-build invariants (common/invariant.h), compiled in every build so tests can call them
 * and called after every operation when NDEBUG is unset. Each returns 1 when its rules hold;
 * otherwise it reports the first broken rule on stderr and returns 0.
 *   sched_check: token and item conservation (restored + received = queued + in flight +
 *     completed), the lanes' counts equal to the store's queue counts, every lane set valid
 *     (lanes_check), in-flight records consistent, batch ids below the next.
 *   sched_batch_check: a filled batch within the consumer's contract and of one shape.
 */
int sched_check(const sched_t *sched);
int sched_batch_check(const sched_batch_t *batch, const packer_contract_t *contract);

#endif
