/*
 * lanes.c - the rolling lanes of one shape: which lane an item of a given length joins.
 *
 * Owns: per-lane state indexed by lane id (target, counts, last arrival, state), the active
 * lanes sorted by target, and the free list of released ids.
 *
 * Invariants:
 *   1. At most max_lanes ids are in use (active or quiescing); ids are dense from 0 and a
 *      released id is reused (free list, last released first) before a new one is minted.
 *   2. sorted_target[] is non-decreasing and lists exactly the active lanes; quiescing lanes
 *      take no items and so are not in it. lane[id].pos is the lane's index in it. The one
 *      exception to "quiescing takes nothing": when every lane in use is quiescing and the
 *      budget is spent, the best of them is reactivated rather than refuse the item.
 *   3. A lane's target only rises while the lane lives, and is at least the length of every
 *      item it ever accepted: joining the lane above never changes it, joining the lane below
 *      raises it to the item's length, which stays <= the next lane's target (so 2 holds).
 *   4. Lanes are never merged: a lane id keeps naming the same queue (and, on disk, the same
 *      segment chain) until it drains and is released.
 *   5. queued_items and queued_tokens of the shape equal the sums over its lanes.
 *   Debug builds check them: the lane an operation touched after every operation (its place in
 *   the order, its neighbours), every lane after an open, a restore or a tick (lanes_check).
 *   6. lanes_assign decides without changing anything a caller can see; lanes_accept applies
 *      and cannot fail, because lanes_assign already reserved the memory an open needs.
 *
 * Threshold arithmetic is exact: a waste fraction w/d exceeds the threshold num/den iff
 * w * den > num * d, all in 64-bit integers. Floating point would put the boundary cases the
 * tests pin (waste 55 of 1000 at 1,024 lanes is exactly 5.5%) at the mercy of rounding.
 *
 * Rejected alternatives:
 *   - A balanced tree of targets: at most 2,048 lanes, opened rarely compared with items
 *     assigned; a sorted array gives a cache-friendly binary search and a memmove on open.
 *   - Fixed arrays of max_lanes per shape: 2,048 lanes cost ~150 KiB per shape even for shapes
 *     that only ever need a handful; arrays grow by doubling instead.
 *   - Merging neighbouring lanes when targets converge: it would change a queue's identity
 *     under items already on disk, and the article keeps lanes stable for that reason.
 */
#include "scheduler/core/lanes.h"

#include "common/invariant.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    lane_state_t state;
    uint32_t target;
    uint32_t pos; /* index in sorted_* while active */
    uint64_t queued_items;
    uint64_t queued_tokens;
    uint64_t inflight_items;
    uint64_t last_arrival_ns;
    void *user;
} lane_t;

struct lanes {
    uint32_t max_lanes;
    uint32_t next_id; /* ids below it have been minted */
    uint32_t cap;     /* capacity of lane[] and sorted_*[] */
    uint32_t n_sorted;
    uint32_t n_free;
    uint32_t in_use;
    lane_t *lane;
    uint32_t *sorted_target;
    uint32_t *sorted_lane;
    uint32_t *free_ids;
    uint64_t queued_items, queued_tokens; /* sums over the lanes */
    lanes_release_fn release;
    void *release_ctx;
    lanes_counters_t counters;
};

static int lanes_check_lane(const lanes_t *l, uint32_t id);

sched_status_t lanes_create(uint32_t max_lanes, lanes_release_fn release, void *release_ctx,
                            lanes_t **out)
{
    if (max_lanes == 0 || out == NULL)
        return SCHED_EINVAL;
    lanes_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return SCHED_ENOMEM;
    l->max_lanes = max_lanes;
    l->release = release;
    l->release_ctx = release_ctx;
    *out = l;
    return SCHED_OK;
}

void lanes_destroy(lanes_t *lanes)
{
    if (lanes == NULL)
        return;
    free(lanes->lane);
    free(lanes->sorted_target);
    free(lanes->sorted_lane);
    free(lanes->free_ids);
    free(lanes);
}

void lanes_threshold(const lanes_t *lanes, uint32_t in_use, uint64_t *out_num, uint64_t *out_den)
{
    uint64_t max = lanes->max_lanes;
    *out_num = max * LANES_THRESHOLD_MIN_PCT +
               (uint64_t)(LANES_THRESHOLD_MAX_PCT - LANES_THRESHOLD_MIN_PCT) * in_use;
    *out_den = 100 * max;
}

/* Grows every per-lane array to hold at least min_cap lane ids. */
static sched_status_t lanes_grow(lanes_t *l, uint32_t min_cap)
{
    if (min_cap <= l->cap)
        return SCHED_OK;
    uint32_t cap = l->cap ? l->cap : 4;
    while (cap < min_cap)
        cap *= 2;
    if (cap > l->max_lanes)
        cap = l->max_lanes;
    lane_t *lane = realloc(l->lane, cap * sizeof(*lane));
    if (lane == NULL)
        return SCHED_ENOMEM;
    l->lane = lane;
    uint32_t *st = realloc(l->sorted_target, cap * sizeof(*st));
    if (st == NULL)
        return SCHED_ENOMEM;
    l->sorted_target = st;
    uint32_t *sl = realloc(l->sorted_lane, cap * sizeof(*sl));
    if (sl == NULL)
        return SCHED_ENOMEM;
    l->sorted_lane = sl;
    uint32_t *fr = realloc(l->free_ids, cap * sizeof(*fr));
    if (fr == NULL)
        return SCHED_ENOMEM;
    l->free_ids = fr;
    l->cap = cap;
    return SCHED_OK;
}

/* Grows the arrays so that one more lane id can be minted. */
static sched_status_t lanes_reserve(lanes_t *l)
{
    if (l->next_id < l->cap || l->n_free > 0 || l->next_id >= l->max_lanes)
        return SCHED_OK;
    return lanes_grow(l, l->next_id + 1);
}

/*
 * First index in sorted_target with target >= tokens. Branch-free halving (the compare becomes
 * a conditional move): lengths are random, so a branching search mispredicts about half its
 * steps, and this search is the hot path of every submit.
 */
static uint32_t lanes_lower_bound(const lanes_t *l, uint32_t tokens)
{
    uint32_t n = l->n_sorted;
    if (n == 0)
        return 0;
    const uint32_t *base = l->sorted_target;
    while (n > 1) {
        uint32_t half = n / 2;
        base = base[half] < tokens ? base + half : base;
        n -= half;
    }
    return (uint32_t)(base - l->sorted_target) + (*base < tokens);
}

/*
 * Every lane in use is quiescing and the budget is spent: the item must still go somewhere, so
 * the quiescing lane with the smallest waste fraction takes it and becomes active again.
 */
static void lanes_pick_quiescing(const lanes_t *l, uint32_t tokens, lanes_choice_t *c)
{
    uint64_t best_w = 0, best_d = 1;
    int found = 0;
    for (uint32_t id = 0; id < l->next_id; id++) {
        if (l->lane[id].state != LANE_QUIESCING)
            continue;
        uint32_t t = l->lane[id].target;
        uint64_t w = t >= tokens ? t - tokens : tokens - t;
        uint64_t d = t >= tokens ? t : tokens;
        if (!found || w * best_d < best_w * d) {
            found = 1;
            best_w = w;
            best_d = d;
            c->lane = id;
            c->new_target = t >= tokens ? t : tokens;
        }
    }
    c->reactivate = 1;
}

sched_status_t lanes_assign(lanes_t *lanes, uint32_t tokens, lanes_choice_t *out)
{
    if (lanes == NULL || tokens == 0 || out == NULL)
        return SCHED_EINVAL;
    lanes_t *l = lanes;
    if (lanes_reserve(l) != SCHED_OK)
        return SCHED_ENOMEM;

    uint32_t pos = lanes_lower_bound(l, tokens);
    int have_above = pos < l->n_sorted;
    int have_below = pos > 0;
    lanes_choice_t c = {.tokens = tokens};
    uint64_t waste = 0, denom = 1;
    int have_best = 0;

    if (have_above) {
        c.lane = l->sorted_lane[pos];
        c.new_target = l->sorted_target[pos];
        waste = l->sorted_target[pos] - tokens;
        denom = l->sorted_target[pos];
        have_best = 1;
    }
    if (have_below) {
        uint64_t w = tokens - l->sorted_target[pos - 1];
        /* below wins only with a strictly smaller fraction: w / tokens < waste / denom */
        if (!have_best || w * denom < waste * tokens) {
            c.lane = l->sorted_lane[pos - 1];
            c.new_target = tokens;
            waste = w;
            denom = tokens;
            have_best = 1;
        }
    }

    int want_open = !have_best;
    if (have_best) {
        uint64_t num, den;
        lanes_threshold(l, l->in_use, &num, &den);
        int over_threshold = waste * den > num * denom;
        want_open = (over_threshold && waste >= LANES_FLOOR_TOKENS) || waste > LANES_CAP_TOKENS;
    }
    if (want_open && l->in_use < l->max_lanes) {
        c.open = 1;
        c.lane = l->n_free > 0 ? l->free_ids[l->n_free - 1] : l->next_id;
        c.new_target = tokens;
    } else if (want_open) {
        c.force_fit = 1;
        if (!have_best)
            lanes_pick_quiescing(l, tokens, &c);
    }
    *out = c;
    return SCHED_OK;
}

static void lanes_sorted_insert(lanes_t *l, uint32_t id)
{
    uint32_t pos = lanes_lower_bound(l, l->lane[id].target);
    uint32_t tail = l->n_sorted - pos;
    memmove(l->sorted_target + pos + 1, l->sorted_target + pos, tail * sizeof(uint32_t));
    memmove(l->sorted_lane + pos + 1, l->sorted_lane + pos, tail * sizeof(uint32_t));
    l->sorted_target[pos] = l->lane[id].target;
    l->sorted_lane[pos] = id;
    l->n_sorted++;
    for (uint32_t i = pos; i < l->n_sorted; i++)
        l->lane[l->sorted_lane[i]].pos = i;
}

static void lanes_sorted_remove(lanes_t *l, uint32_t id)
{
    uint32_t pos = l->lane[id].pos;
    uint32_t tail = l->n_sorted - pos - 1;
    memmove(l->sorted_target + pos, l->sorted_target + pos + 1, tail * sizeof(uint32_t));
    memmove(l->sorted_lane + pos, l->sorted_lane + pos + 1, tail * sizeof(uint32_t));
    l->n_sorted--;
    for (uint32_t i = pos; i < l->n_sorted; i++)
        l->lane[l->sorted_lane[i]].pos = i;
}

void lanes_accept(lanes_t *lanes, const lanes_choice_t *choice, uint64_t now_ns)
{
    lanes_t *l = lanes;
    uint32_t id = choice->lane;
    lane_t *ln;
    if (choice->open) {
        if (l->n_free > 0)
            l->n_free--;
        else
            l->next_id++;
        ln = &l->lane[id];
        *ln = (lane_t){.state = LANE_ACTIVE, .target = choice->tokens};
        lanes_sorted_insert(l, id);
        l->in_use++;
        l->counters.opened++;
    } else if (choice->reactivate) {
        ln = &l->lane[id];
        ln->state = LANE_ACTIVE;
        ln->target = choice->new_target;
        lanes_sorted_insert(l, id);
        l->counters.reuses++;
        l->counters.force_fits++;
    } else {
        ln = &l->lane[id];
        if (choice->new_target > ln->target) {
            ln->target = choice->new_target;
            l->sorted_target[ln->pos] = choice->new_target;
        }
        l->counters.reuses++;
        if (choice->force_fit)
            l->counters.force_fits++;
    }
    ln->queued_items++;
    ln->queued_tokens += choice->tokens;
    ln->last_arrival_ns = now_ns;
    l->queued_items++;
    l->queued_tokens += choice->tokens;
    INVARIANT_CHECK(choice->open || choice->reactivate ? lanes_check(l) : lanes_check_lane(l, id));
}

sched_status_t lanes_restore(lanes_t *lanes, uint32_t lane, uint32_t target, uint64_t queued_items,
                             uint64_t queued_tokens, uint64_t now_ns)
{
    lanes_t *l = lanes;
    if (l == NULL || lane >= l->max_lanes || target == 0 ||
        (lane < l->next_id && l->lane[lane].state != LANE_FREE))
        return SCHED_EINVAL;
    if (lanes_grow(l, lane + 1) != SCHED_OK)
        return SCHED_ENOMEM;
    if (lane < l->next_id) {
        for (uint32_t i = 0; i < l->n_free; i++) {
            if (l->free_ids[i] == lane) {
                l->free_ids[i] = l->free_ids[--l->n_free];
                break;
            }
        }
    } else {
        /* ids skipped over were released before the restart: they are free */
        for (uint32_t id = l->next_id; id < lane; id++) {
            l->lane[id] = (lane_t){.state = LANE_FREE};
            l->free_ids[l->n_free++] = id;
        }
        l->next_id = lane + 1;
    }
    l->lane[lane] = (lane_t){
        .state = LANE_ACTIVE,
        .target = target,
        .queued_items = queued_items,
        .queued_tokens = queued_tokens,
        .last_arrival_ns = now_ns,
    };
    lanes_sorted_insert(l, lane);
    l->in_use++;
    l->queued_items += queued_items;
    l->queued_tokens += queued_tokens;
    INVARIANT_CHECK(lanes_check(l));
    return SCHED_OK;
}

void lanes_user_set(lanes_t *lanes, uint32_t lane, void *user)
{
    lanes->lane[lane].user = user;
}

static void lanes_release_if_drained(lanes_t *l, uint32_t id)
{
    lane_t *ln = &l->lane[id];
    if (ln->state != LANE_QUIESCING || ln->queued_items != 0 || ln->inflight_items != 0)
        return;
    void *user = ln->user;
    *ln = (lane_t){.state = LANE_FREE};
    l->free_ids[l->n_free++] = id;
    l->in_use--;
    if (l->release != NULL)
        l->release(l->release_ctx, id, user);
}

void lanes_note_dispatched(lanes_t *lanes, uint32_t lane, uint64_t items, uint64_t tokens)
{
    lane_t *ln = &lanes->lane[lane];
    ln->queued_items -= items;
    ln->queued_tokens -= tokens;
    ln->inflight_items += items;
    lanes->queued_items -= items;
    lanes->queued_tokens -= tokens;
    INVARIANT_CHECK(lanes_check_lane(lanes, lane));
}

void lanes_note_completed(lanes_t *lanes, uint32_t lane, uint64_t items)
{
    lanes->lane[lane].inflight_items -= items;
    lanes_release_if_drained(lanes, lane);
    INVARIANT_CHECK(lanes_check_lane(lanes, lane));
}

void lanes_note_returned(lanes_t *lanes, uint32_t lane, uint64_t items, uint64_t tokens)
{
    lane_t *ln = &lanes->lane[lane];
    ln->inflight_items -= items;
    ln->queued_items += items;
    ln->queued_tokens += tokens;
    lanes->queued_items += items;
    lanes->queued_tokens += tokens;
    INVARIANT_CHECK(lanes_check_lane(lanes, lane));
}

uint32_t lanes_tick(lanes_t *lanes, uint64_t now_ns, lanes_quiesce_rule_t rule)
{
    uint32_t quiesced = 0;
    uint64_t below = rule == LANES_QUIESCE_RULE_EMPTY ? 1 : LANES_QUIESCE_ITEMS;
    for (uint32_t id = 0; id < lanes->next_id; id++) {
        lane_t *ln = &lanes->lane[id];
        if (ln->state == LANE_ACTIVE && ln->queued_items < below && now_ns >= ln->last_arrival_ns &&
            now_ns - ln->last_arrival_ns >= LANES_QUIESCE_IDLE_NS) {
            lanes_sorted_remove(lanes, id);
            ln->state = LANE_QUIESCING;
            quiesced++;
        }
        lanes_release_if_drained(lanes, id);
    }
    lanes->counters.quiesced += quiesced;
    INVARIANT_CHECK(lanes_check(lanes));
    return quiesced;
}

int lanes_next_by_tokens(const lanes_t *lanes, const uint32_t *prev, uint32_t *out_lane)
{
    uint64_t bound = UINT64_MAX;
    uint32_t bound_id = 0;
    if (prev != NULL) {
        bound = lanes->lane[*prev].queued_tokens;
        bound_id = *prev;
    }
    int found = 0;
    uint32_t best = 0;
    uint64_t best_tokens = 0;
    for (uint32_t id = 0; id < lanes->next_id; id++) {
        uint64_t t = lanes->lane[id].queued_tokens;
        if (lanes->lane[id].queued_items == 0)
            continue;
        /* strictly after prev in (tokens desc, id asc) order */
        if (prev != NULL && (t > bound || (t == bound && id <= bound_id)))
            continue;
        if (!found || t > best_tokens) {
            found = 1;
            best = id;
            best_tokens = t;
        }
    }
    if (found)
        *out_lane = best;
    return found;
}

uint32_t lanes_in_use(const lanes_t *lanes)
{
    return lanes->in_use;
}

uint32_t lanes_sorted_count(const lanes_t *lanes)
{
    return lanes->n_sorted;
}

uint32_t lanes_sorted_lane(const lanes_t *lanes, uint32_t idx)
{
    return lanes->sorted_lane[idx];
}

int lanes_sorted_pos(const lanes_t *lanes, uint32_t lane, uint32_t *out_idx)
{
    if (lane >= lanes->next_id || lanes->lane[lane].state != LANE_ACTIVE)
        return 0;
    *out_idx = lanes->lane[lane].pos;
    return 1;
}

sched_status_t lanes_get(const lanes_t *lanes, uint32_t lane, lanes_lane_t *out)
{
    if (lanes == NULL || out == NULL || lane >= lanes->next_id)
        return SCHED_EINVAL;
    const lane_t *ln = &lanes->lane[lane];
    *out = (lanes_lane_t){
        .state = ln->state,
        .target = ln->target,
        .queued_items = ln->queued_items,
        .queued_tokens = ln->queued_tokens,
        .inflight_items = ln->inflight_items,
        .last_arrival_ns = ln->last_arrival_ns,
        .user = ln->user,
    };
    return SCHED_OK;
}

uint64_t lanes_queued_tokens(const lanes_t *lanes)
{
    return lanes->queued_tokens;
}

uint64_t lanes_queued_items(const lanes_t *lanes)
{
    return lanes->queued_items;
}

const lanes_counters_t *lanes_counters(const lanes_t *lanes)
{
    return &lanes->counters;
}

int lanes_check(const lanes_t *l)
{
    uint8_t free_seen[LANES_MAX] = {0};
    INVARIANT_HOLDS(l->max_lanes <= LANES_MAX && l->next_id <= l->max_lanes &&
                        l->next_id <= (l->cap ? l->cap : l->next_id),
                    "next_id %u, cap %u, max_lanes %u", l->next_id, l->cap, l->max_lanes);
    for (uint32_t i = 0; i < l->n_free; i++) {
        uint32_t id = l->free_ids[i];
        INVARIANT_HOLDS(id < l->next_id && !free_seen[id], "free id %u listed twice or unminted",
                        id);
        INVARIANT_HOLDS(l->lane[id].state == LANE_FREE, "lane %u is free and in use (state %d)", id,
                        (int)l->lane[id].state);
        free_seen[id] = 1;
    }
    uint32_t in_use = 0, active = 0;
    uint64_t queued = 0, queued_items = 0;
    for (uint32_t id = 0; id < l->next_id; id++) {
        const lane_t *ln = &l->lane[id];
        INVARIANT_HOLDS(ln->state != LANE_FREE || free_seen[id], "lane %u is free but not listed",
                        id);
        if (ln->state == LANE_FREE)
            continue;
        in_use++;
        INVARIANT_HOLDS(ln->target > 0, "lane %u in use with target 0", id);
        queued += ln->queued_tokens;
        queued_items += ln->queued_items;
        if (ln->state != LANE_ACTIVE)
            continue;
        active++;
        INVARIANT_HOLDS(ln->pos < l->n_sorted && l->sorted_lane[ln->pos] == id &&
                            l->sorted_target[ln->pos] == ln->target,
                        "active lane %u not at its sorted position %u", id, ln->pos);
    }
    INVARIANT_HOLDS(in_use == l->in_use && l->in_use <= l->max_lanes, "%u lanes in use, counted %u",
                    in_use, l->in_use);
    INVARIANT_HOLDS(active == l->n_sorted, "%u active lanes, %u sorted", active, l->n_sorted);
    for (uint32_t i = 1; i < l->n_sorted; i++)
        INVARIANT_HOLDS(l->sorted_target[i - 1] <= l->sorted_target[i],
                        "targets out of order at %u: %u > %u", i, l->sorted_target[i - 1],
                        l->sorted_target[i]);
    INVARIANT_HOLDS(queued == l->queued_tokens && queued_items == l->queued_items,
                    "lanes hold %llu items %llu tokens, the shape says %llu and %llu",
                    (unsigned long long)queued_items, (unsigned long long)queued,
                    (unsigned long long)l->queued_items, (unsigned long long)l->queued_tokens);
    return 1;
}

/* The rules of lanes_check as far as one lane touched by an operation reaches them. */
static int lanes_check_lane(const lanes_t *l, uint32_t id)
{
    INVARIANT_HOLDS(id < l->next_id, "lane %u was never minted", id);
    const lane_t *ln = &l->lane[id];
    INVARIANT_HOLDS(ln->state == LANE_FREE || ln->target > 0, "lane %u in use with target 0", id);
    INVARIANT_HOLDS(ln->queued_tokens <= l->queued_tokens && ln->queued_items <= l->queued_items,
                    "lane %u holds more than its shape", id);
    if (ln->state != LANE_ACTIVE)
        return 1;
    uint32_t p = ln->pos;
    INVARIANT_HOLDS(p < l->n_sorted && l->sorted_lane[p] == id && l->sorted_target[p] == ln->target,
                    "active lane %u not at its sorted position %u", id, p);
    INVARIANT_HOLDS((p == 0 || l->sorted_target[p - 1] <= ln->target) &&
                        (p + 1 == l->n_sorted || ln->target <= l->sorted_target[p + 1]),
                    "lane %u (target %u) out of order with its neighbours", id, ln->target);
    return 1;
}
