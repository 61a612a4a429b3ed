/*
 * check.c - the scheduling core's executable invariants (sched.c's 1, 4 and 7; lanes.c's own
 * rules are checked by lanes_check in lanes.c, which alone sees the lanes' arrays).
 *
 * Invariants of the checks themselves:
 *   1. A check reads and never writes, so calling it changes no behaviour.
 *   2. The per-operation check (sched_check_op) is O(models) plus the lanes the operation
 *      touched: the conservation rule from the totals the scheduler keeps, and each touched lane
 *      against the store. The full recount (sched_check) runs at create and every tick: every
 *      lane, every in-flight record, the totals against the lanes, workers and heaps.
 *
 * Rejected:
 *   - The full recount after every operation: a Debug run of the bench's sustained preset spends
 *     nearly all its time re-walking untouched lanes.
 *   - Summing every shape's lanes after every operation: O(shapes) per operation, so with a
 *     shape per prompt a Debug build is quadratic in the shapes.
 */
#include "scheduler/core/sched_int.h"

#include "common/invariant.h"

int sched_batch_check(const sched_batch_t *b, const packer_contract_t *k)
{
    INVARIANT_HOLDS(b->n >= 1 && b->n <= k->max_batch_size, "batch %llu holds %zu items (max %u)",
                    (unsigned long long)b->batch_id, b->n, k->max_batch_size);
    INVARIANT_HOLDS(!b->dead_letter || b->n == 1, "dead letter batch %llu holds %zu items",
                    (unsigned long long)b->batch_id, b->n);
    uint64_t longest = 0, real = 0;
    for (size_t i = 0; i < b->n; i++) {
        const store_view_t *v = &b->items_view[i];
        INVARIANT_HOLDS(v->signature == b->signature,
                        "item %zu of batch %llu has shape %016llx, the batch %016llx", i,
                        (unsigned long long)b->batch_id, (unsigned long long)v->signature,
                        (unsigned long long)b->signature);
        longest = v->tokens > longest ? v->tokens : longest;
        real += v->tokens;
    }
    INVARIANT_HOLDS(b->pad_to == packer_pad(longest) && b->real_tokens == real &&
                        b->padded_tokens == b->n * (uint64_t)b->pad_to,
                    "batch %llu: pad_to %u for longest %llu, real %llu of %llu, padded %llu",
                    (unsigned long long)b->batch_id, b->pad_to, (unsigned long long)longest,
                    (unsigned long long)b->real_tokens, (unsigned long long)real,
                    (unsigned long long)b->padded_tokens);
    INVARIANT_HOLDS(b->n == 1 || b->padded_tokens <= k->max_batch_tokens,
                    "batch %llu pads to %llu tokens, budget %u", (unsigned long long)b->batch_id,
                    (unsigned long long)b->padded_tokens, k->max_batch_tokens);
    return 1;
}

/* The conservation rule (invariant 1) from the totals the scheduler keeps: O(models), so it can
 * run after every operation whatever the number of shapes. */
static int sched_check_totals(const sched_t *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        const sched_model_t *m = s->models[i];
        INVARIANT_HOLDS(m->current == NULL || m->current->model_idx == i,
                        "model %s's current shape belongs to model %u", m->name,
                        m->current ? m->current->model_idx : 0);
    }
    const sched_counters_t *k = &s->counters;
    INVARIANT_HOLDS(s->items_restored + k->items_received ==
                        s->queued_items + s->inflight_items + k->items_completed,
                    "items: restored %llu + received %llu != queued %llu + in flight %llu + "
                    "completed %llu",
                    (unsigned long long)s->items_restored, (unsigned long long)k->items_received,
                    (unsigned long long)s->queued_items, (unsigned long long)s->inflight_items,
                    (unsigned long long)k->items_completed);
    INVARIANT_HOLDS(s->tokens_restored + k->tokens_received ==
                        s->queued_tokens + s->inflight_tokens + k->tokens_completed,
                    "tokens: restored %llu + received %llu != queued %llu + in flight %llu + "
                    "completed %llu",
                    (unsigned long long)s->tokens_restored, (unsigned long long)k->tokens_received,
                    (unsigned long long)s->queued_tokens, (unsigned long long)s->inflight_tokens,
                    (unsigned long long)k->tokens_completed);
    return 1;
}

/* The scheduler's queued totals against the sum over every shape's lanes (the full check). */
static int sched_check_queued(const sched_t *s)
{
    uint64_t queued_items = 0, queued_tokens = 0;
    for (size_t i = 0; i < s->n_models; i++) {
        const sched_model_t *m = s->models[i];
        for (size_t j = 0; j < m->n_shapes; j++) {
            queued_items += lanes_queued_items(m->shapes[j]->lanes);
            queued_tokens += lanes_queued_tokens(m->shapes[j]->lanes);
        }
    }
    INVARIANT_HOLDS(queued_items == s->queued_items && queued_tokens == s->queued_tokens,
                    "the lanes hold %llu items %llu tokens, the scheduler counts %llu and %llu",
                    (unsigned long long)queued_items, (unsigned long long)queued_tokens,
                    (unsigned long long)s->queued_items, (unsigned long long)s->queued_tokens);
    return 1;
}

/* A lane's counts in the lanes against its queue's counts in the store. */
static int sched_check_lane(const sched_shape_t *shape, uint32_t id)
{
    lanes_lane_t lane;
    if (lanes_get(shape->lanes, id, &lane) != SCHED_OK || lane.state == LANE_FREE)
        return 1;
    uint64_t items = 0, tokens = 0;
    if (lane.user != NULL)
        store_queue_count(lane.user, &items, &tokens);
    INVARIANT_HOLDS(items == lane.queued_items && tokens == lane.queued_tokens,
                    "shape %016llx lane %u: the lanes count %llu items %llu tokens, the store "
                    "%llu and %llu",
                    (unsigned long long)shape->signature, id, (unsigned long long)lane.queued_items,
                    (unsigned long long)lane.queued_tokens, (unsigned long long)items,
                    (unsigned long long)tokens);
    return 1;
}

int sched_check_op(const sched_t *s, const sched_shape_t *shape, uint32_t lane)
{
    return sched_check_totals(s) &&
           (shape == NULL || (sched_check_lane(shape, lane) &&
                              heap_check_shape(s->models[shape->model_idx], shape)));
}

int sched_check_op_lanes(const sched_t *s, const sched_shape_t *shape, const uint32_t *lanes,
                         size_t n)
{
    if (!sched_check_totals(s))
        return 0;
    if (shape != NULL && !heap_check_shape(s->models[shape->model_idx], shape))
        return 0;
    for (size_t i = 0; shape != NULL && i < n; i++) {
        if ((i == 0 || lanes[i] != lanes[i - 1]) && !sched_check_lane(shape, lanes[i]))
            return 0;
    }
    return 1;
}

/* Workers and the counts kept about them: every warm count is the number of workers whose cache
 * holds the shape, a cache holds distinct shapes of its own model within its capacity, each
 * model's n_active is the number of its shapes holding queued items and its queued sums theirs,
 * and a model not in use has no current shape (model.c invariant 3: its place may go to another
 * name). */
static int sched_check_workers(const sched_t *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        const sched_model_t *m = s->models[i];
        size_t active = 0;
        uint64_t items = 0, tokens = 0;
        for (size_t j = 0; j < m->n_shapes; j++) {
            const sched_shape_t *shape = m->shapes[j];
            INVARIANT_HOLDS(shape->index == j && shape->model_idx == i,
                            "shape %016llx of model %s at %zu says %u of model %u",
                            (unsigned long long)shape->signature, m->name, j, shape->index,
                            shape->model_idx);
            active += lanes_queued_items(shape->lanes) != 0;
            items += lanes_queued_items(shape->lanes);
            tokens += lanes_queued_tokens(shape->lanes);
            uint32_t warm = 0;
            for (size_t w = 0; w < m->n_workers; w++)
                warm += (uint32_t)worker_is_warm(m->workers[w], shape);
            INVARIANT_HOLDS(warm == shape->warm, "shape %016llx is warm in %u workers, counted %u",
                            (unsigned long long)shape->signature, warm, shape->warm);
        }
        INVARIANT_HOLDS(active == m->n_active, "model %s has %zu active shapes, counted %zu",
                        m->name, active, m->n_active);
        INVARIANT_HOLDS(items == m->queued_items && tokens == m->queued_tokens,
                        "model %s queues %llu items of %llu tokens, counted %llu of %llu", m->name,
                        (unsigned long long)items, (unsigned long long)tokens,
                        (unsigned long long)m->queued_items, (unsigned long long)m->queued_tokens);
        INVARIANT_HOLDS(model_in_use(m) || m->current == NULL,
                        "model %s holds neither shapes nor workers but a current shape", m->name);
        if (!heap_check(m))
            return 0;
        for (size_t w = 0; w < m->n_workers; w++) {
            const struct sched_worker *wk = m->workers[w];
            INVARIANT_HOLDS(wk->index == w && wk->model_idx == i,
                            "worker %zu of model %s: index %u, model %u", w, m->name, wk->index,
                            wk->model_idx);
            if (!worker_check(wk))
                return 0;
        }
    }
    return 1;
}

int sched_check(const sched_t *s)
{
    if (!sched_check_totals(s) || !sched_check_queued(s) || !sched_check_workers(s) ||
        !model_check(s))
        return 0;
    for (size_t i = 0; i < s->n_models; i++) {
        const sched_model_t *m = s->models[i];
        for (size_t j = 0; j < m->n_shapes; j++) {
            const sched_shape_t *shape = m->shapes[j];
            if (!lanes_check(shape->lanes))
                return 0;
            lanes_lane_t lane;
            for (uint32_t id = 0; lanes_get(shape->lanes, id, &lane) == SCHED_OK; id++) {
                if (!sched_check_lane(shape, id))
                    return 0;
            }
        }
    }
    uint64_t inflight_items = 0, inflight_tokens = 0, held = 0, listed = 0;
    for (size_t i = 0; i < s->n_models; i++) {
        for (size_t w = 0; w < s->models[i]->n_workers; w++)
            listed += s->models[i]->workers[w]->n_batches;
    }
    for (size_t i = 0; i < s->inflight.cap; i++) {
        const sched_inflight_t *rec = s->inflight.slots[i].value;
        if (rec == NULL)
            continue;
        held += rec->worker != NULL;
        uint32_t unsettled = 0;
        for (uint32_t k = 0; k < rec->n; k++) {
            if (rec->items[k].settled)
                continue;
            unsettled++;
            inflight_tokens += rec->items[k].tokens;
        }
        INVARIANT_HOLDS(unsettled == rec->unsettled && unsettled > 0,
                        "batch %llu: %u unsettled positions, record says %u",
                        (unsigned long long)rec->batch_id, unsettled, rec->unsettled);
        INVARIANT_HOLDS(rec->batch_id < s->next_batch_id, "batch %llu not below next id %llu",
                        (unsigned long long)rec->batch_id,
                        (unsigned long long)s->next_batch_id); /* invariant 4 */
        inflight_items += unsettled;
    }
    INVARIANT_HOLDS(held == listed, "%llu in-flight records have a holder, the workers list %llu",
                    (unsigned long long)held, (unsigned long long)listed); /* invariant 10 */
    INVARIANT_HOLDS(inflight_items == s->inflight_items && inflight_tokens == s->inflight_tokens,
                    "in-flight records hold %llu items %llu tokens, the totals say %llu and %llu",
                    (unsigned long long)inflight_items, (unsigned long long)inflight_tokens,
                    (unsigned long long)s->inflight_items, (unsigned long long)s->inflight_tokens);
    return 1;
}
