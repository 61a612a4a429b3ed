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
 * Rejected: round-robin or oldest-first across shapes. Each switch flushes the engine's prefix
 * cache; draining one shape at a time pays that cost once per shape instead of once per batch.
 * (A starvation bound that lets an old shape preempt at a batch boundary is a later, optional
 * addition whose cost in hit rate is to be measured.)
 */
#include "scheduler/sched_int.h"

sched_status_t select_shape(struct sched *s, sched_model_t *model, sched_shape_t **out)
{
    sched_shape_t *cur = model->current;
    if (cur != NULL && lanes_queued_tokens(cur->lanes) > 0) {
        *out = cur;
        return SCHED_OK;
    }
    sched_shape_t *best = NULL;
    uint64_t best_tokens = 0;
    for (size_t i = 0; i < model->n_shapes; i++) {
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
