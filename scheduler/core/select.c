/*
 * select.c - per-model sticky shape selection.
 *
 * Invariants:
 *   1. While the model's current shape has dispatchable tokens, every batch of the model comes
 *      from it, for every consumer of the model: that is what keeps all their prefix caches warm
 *      on the same prefix.
 *   2. Only when the current shape is dry does the model switch, to the shape with the most
 *      dispatchable tokens (ties: the shape seen first), and the switch is written to the
 *      store's current-shape field and counted.
 *
 *   3. With the starvation bound (off by default), a shape whose oldest item has waited past the
 *      bound preempts the current shape at the next batch boundary; among several, the one
 *      with the oldest item goes first.
 *   4. With the bound on, within the chosen shape the lane holding its oldest item goes first
 *      once that item has waited past the bound (select_lane_starved); otherwise lanes go in
 *      descending queued tokens. Without it, a lane holding one short item waits as long as
 *      the shape's bigger lanes keep filling, so a shape-level bound alone bounds nothing
 *      for that item (and a preempting shape would be served at its fullest lane, not at the
 *      item that made it preempt).
 *
 * Rejected:
 *   - Round-robin or oldest-first across shapes. Each switch flushes the engine's prefix cache;
 *     draining one shape at a time pays that cost once per shape instead of once per batch.
 *   - A bound on shapes only (this file's first version): a preempting shape was served at its
 *     fullest lane, and a short item alone in a lane of the current shape waited as long as
 *     bigger lanes kept filling (16.9 s against a 2 s bound on bench's steady preset).
 */
#include "scheduler/core/sched_int.h"

/* Arrival time of the shape's oldest readable queued item and its lane (out_lane may be NULL);
 * 0 when it has none. */
static int select_oldest(struct sched *s, const sched_shape_t *shape, uint64_t *out,
                         uint32_t *out_lane)
{
    int found = 0;
    lanes_lane_t lane;
    for (uint32_t id = 0; lanes_get(shape->lanes, id, &lane) == SCHED_OK; id++) {
        uint64_t t = 0;
        if (lane.queued_items == 0 || lane.user == NULL ||
            !store_queue_oldest(s->store, lane.user, &t))
            continue;
        if (!found || t < *out) {
            *out = t;
            if (out_lane != NULL)
                *out_lane = id;
        }
        found = 1;
    }
    return found;
}

/* With the starvation bound on: the other shape whose oldest item waited past the bound
 * longest, or NULL. */
static sched_shape_t *select_starved(struct sched *s, sched_model_t *model, sched_shape_t *cur)
{
    uint64_t now = s->clock(s->clock_ctx), best_t = 0;
    sched_shape_t *best = NULL;
    for (size_t i = 0; i < model->n_shapes; i++) {
        sched_shape_t *sh = model->shapes[i];
        uint64_t t = 0;
        if (sh == cur || lanes_queued_tokens(sh->lanes) == 0 || !select_oldest(s, sh, &t, NULL))
            continue;
        if (now > t && now - t > s->starvation_ns && (best == NULL || t < best_t)) {
            best = sh;
            best_t = t;
        }
    }
    return best;
}

sched_status_t select_shape(struct sched *s, sched_model_t *model, sched_shape_t **out)
{
    sched_shape_t *cur = model->current;
    sched_shape_t *best = s->starvation_ns != 0 ? select_starved(s, model, cur) : NULL;
    if (best != NULL)
        s->counters.starvation_preemptions++;
    else if (cur != NULL && lanes_queued_tokens(cur->lanes) > 0) {
        *out = cur;
        return SCHED_OK;
    }
    uint64_t best_tokens = 0;
    int starved = best != NULL;
    for (size_t i = 0; !starved && i < model->n_shapes; i++) {
        uint64_t t = lanes_queued_tokens(model->shapes[i]->lanes);
        if (t > best_tokens) {
            best = model->shapes[i];
            best_tokens = t;
        }
    }
    if (best == NULL)
        return SCHED_EEMPTY;
    if ((s->store_status = store_current_shape_set(s->store, model->name, best->signature)) !=
        STORE_OK)
        return SCHED_ESTORE;
    if (cur != NULL)
        s->counters.shape_switches++;
    model->current = best;
    *out = best;
    return SCHED_OK;
}

int select_lane_starved(struct sched *s, const sched_shape_t *shape, uint32_t *out_lane)
{
    uint64_t t = 0;
    uint32_t lane = 0;
    if (s->starvation_ns == 0 || !select_oldest(s, shape, &t, &lane))
        return 0;
    uint64_t now = s->clock(s->clock_ctx);
    if (now <= t || now - t <= s->starvation_ns)
        return 0;
    *out_lane = lane;
    return 1;
}
