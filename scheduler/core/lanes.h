/*
 * lanes.h - rolling lanes of one shape: which lane an item of length L joins, when a lane opens,
 * quiesces and goes back to the free list (lanes.c). The first layer of the scheduling core;
 * usable alone (the bench's simulator and microbench drive it directly).
 */
#ifndef LANESCHED_LANES_H
#define LANESCHED_LANES_H

#include "scheduler/core/status.h"

#include <stddef.h>
#include <stdint.h>

/* The policy constants, each with the reason it has this value. */

/* Lane budget per shape. A budget of 128 puts every shape at full pressure under sustained load,
 * where waste climbs without limit; 2,048 keeps the threshold low for longer (`lanesched-bench
 * sim --preset sustained`: lanes-128 against lanes-seed; docs/bench.md). */
#define LANES_MAX 2048u
/* Waste threshold when no lanes are in use: be strict while structure is cheap ... */
#define LANES_THRESHOLD_MIN_PCT 1u
/* ... rising linearly to this at full pressure: tolerate waste rather than run out of lanes. */
#define LANES_THRESHOLD_MAX_PCT 10u
/* A new lane needs at least this much waste: trivial waste on short prompts never opens one. */
#define LANES_FLOOR_TOKENS 16u
/* Waste above this opens a lane whatever the percentage: a long prompt never absorbs large
 * padding just because its fraction looks small. */
#define LANES_CAP_TOKENS 128u
/* Quiesce a lane holding fewer than this many queued items (the article's rule; the `lanes`
 * policy quiesces only lanes holding none, lanes_quiesce_rule_t) ... */
#define LANES_QUIESCE_ITEMS 4u
/* ... that has had no arrival for this long, so idle lane ids return to the free list. */
#define LANES_QUIESCE_IDLE_NS 5000000000ull
/* How often the maintenance tick is meant to run (the daemon's timer). */
#define LANES_TICK_NS 1000000000ull

typedef struct lanes lanes_t;

/* Called when a quiescing lane has drained and its id goes back to the free list. */
typedef void (*lanes_release_fn)(void *ctx, uint32_t lane, void *lane_user);

typedef enum { LANE_FREE = 0, LANE_ACTIVE, LANE_QUIESCING } lane_state_t;

/* A snapshot of one lane, copied out. */
typedef struct {
    lane_state_t state;
    uint32_t target; /* tokens; only ever rises while the lane lives */
    uint64_t queued_items;
    uint64_t queued_tokens;
    uint64_t inflight_items;
    uint64_t last_arrival_ns;
    void *user; /* borrowed: what the owner attached with lanes_user_set */
} lanes_lane_t;

/* The decision for one item: join `lane`, opening it first when `open` is set. */
typedef struct {
    uint32_t lane;
    uint32_t tokens;
    uint32_t new_target; /* the lane's target after accepting */
    int open;
    int force_fit;  /* would have opened a lane, but the budget is used up */
    int reactivate; /* force-fit into a quiescing lane: every lane in use was quiescing */
} lanes_choice_t;

typedef struct {
    uint64_t opened;
    uint64_t reuses; /* items into an existing lane */
    uint64_t force_fits;
    uint64_t quiesced;
} lanes_counters_t;

/* max_lanes: LANES_MAX in the daemon; the simulator also runs 128. The release callback may be
 * NULL. *out is returned to the caller, freed with lanes_destroy. */
sched_status_t lanes_create(uint32_t max_lanes, lanes_release_fn release, void *release_ctx,
                            lanes_t **out /* out */);
void lanes_destroy(lanes_t *lanes);

/*
 * The waste threshold at `in_use` lanes, as an exact fraction num/den:
 * 1% + 9% * in_use / max_lanes. With the daemon's budget max_lanes is LANES_MAX (2,048); a
 * smaller budget (the simulator's 128) reaches the 10% end at its own cap, as the article's
 * earlier 128-lane broker did. Exposed so tests pin the constants.
 */
void lanes_threshold(const lanes_t *lanes, uint32_t in_use, uint64_t *out_num /* out */,
                     uint64_t *out_den /* out */);

/* Decides where an item of `tokens` (> 0) goes. Changes nothing observable; it only reserves
 * the memory lanes_accept may need, so that lanes_accept cannot fail. */
sched_status_t lanes_assign(lanes_t *lanes, uint32_t tokens, lanes_choice_t *out /* out */);

/* Applies a choice from lanes_assign (no other lanes_* mutation in between): opens the lane or
 * raises its target, and counts the item as queued, arrived at now_ns. */
void lanes_accept(lanes_t *lanes, const lanes_choice_t *choice, uint64_t now_ns);

/*
 * Puts back a lane that existed before a restart, with its recorded target and the items the
 * store recovered into it (active, last arrival now_ns). Ids below it that are not in use become
 * free. SCHED_EINVAL if the id is beyond the budget or already in use, or target is 0.
 */
sched_status_t lanes_restore(lanes_t *lanes, uint32_t lane, uint32_t target, uint64_t queued_items,
                             uint64_t queued_tokens, uint64_t now_ns);

/* Attaches an owner pointer to a lane (the scheduler: the lane's store queue). */
void lanes_user_set(lanes_t *lanes, uint32_t lane, void *user);

/* Item movements the owner reports, so counts and the drain rule stay exact. */
void lanes_note_dispatched(lanes_t *lanes, uint32_t lane, uint64_t items, uint64_t tokens);
void lanes_note_completed(lanes_t *lanes, uint32_t lane, uint64_t items);
void lanes_note_returned(lanes_t *lanes, uint32_t lane, uint64_t items, uint64_t tokens);

/* Which lanes without an arrival for LANES_QUIESCE_IDLE_NS the tick quiesces. SPARSE, the
 * article's rule: those holding fewer than LANES_QUIESCE_ITEMS queued items. EMPTY: those
 * holding no queued item. A lane with no arrival for 5 s whose items still queue is one whose
 * items wait longer than that for a worker (overload, a burst's backlog); quiescing it sends
 * the next item of its length to a new lane, and the batch its items wait for leaves that item
 * behind for a batch of its own. */
typedef enum { LANES_QUIESCE_RULE_SPARSE = 0, LANES_QUIESCE_RULE_EMPTY } lanes_quiesce_rule_t;

/* Maintenance tick: quiesce idle lanes by the rule, release drained ones. Returns how many
 * lanes it quiesced now. */
uint32_t lanes_tick(lanes_t *lanes, uint64_t now_ns, lanes_quiesce_rule_t rule);

/*
 * Walks the lanes that hold queued items in descending queued-token order (ties: lower id
 * first). `prev` is NULL for the first lane, else the lane returned last (borrowed). Returns 1
 * and sets *out_lane, or 0 when there is none left.
 */
int lanes_next_by_tokens(const lanes_t *lanes, const uint32_t *prev, uint32_t *out_lane /* out */);

uint32_t lanes_in_use(const lanes_t *lanes);       /* active + quiescing */
uint32_t lanes_sorted_count(const lanes_t *lanes); /* active lanes, the ones that take items */
/* The idx-th active lane in ascending target order (idx < lanes_sorted_count). */
uint32_t lanes_sorted_lane(const lanes_t *lanes, uint32_t idx);
/* 1 and the active lane's index in that order; 0 for a lane that is not active. */
int lanes_sorted_pos(const lanes_t *lanes, uint32_t lane, uint32_t *out_idx /* out */);
sched_status_t lanes_get(const lanes_t *lanes, uint32_t lane, lanes_lane_t *out /* out */);
uint64_t lanes_queued_tokens(const lanes_t *lanes); /* dispatchable tokens of the shape */
uint64_t lanes_queued_items(const lanes_t *lanes);  /* dispatchable items of the shape */
const lanes_counters_t *lanes_counters(const lanes_t *lanes);
/* Debug-build invariants (lanes.c's 1, 2, 3, 5): 1 when they hold; otherwise the first broken
 * rule is reported on stderr and 0 returned. Called after every mutation when NDEBUG is unset. */
int lanes_check(const lanes_t *lanes);

#endif
