/*
 * shapes.c - the shape table: shapes by (model, signature), each with its own rolling lanes.
 *
 * Invariants:
 *   1. The key everywhere is (model, signature); length is never part of it and nothing is
 *      shared across shapes: lanes, pressure and thresholds are local to one shape.
 *   2. A shape lives while anything points at it: it is reclaimed by the tick only once every
 *      lane of it has been released (so nothing of it is queued or in flight), no worker's
 *      cache holds it and it is not its model's current shape, unless the model has no
 *      workers left (nothing then asks for the sticky shape, and the model's current shape is
 *      cleared with it). So a producer that makes a new shape per prompt costs memory for the
 *      shapes in use, not for every shape ever seen, and a model served and gone (every item
 *      done, no worker, no reference) costs nothing: its place goes to the next name.
 *   3. A lane's store queue is attached as the lane's user pointer when the lane opens and is
 *      released when the lane's id goes back to the free list.
 *   4. A model's n_active is the number of its shapes holding queued items, and its queued_items
 *      and queued_tokens their sums over its shapes, kept by
 *      shapes_queued_note at every change of a shape's queued items.
 *   5. A shape's oldest_ns is a lower bound of its oldest queued item's arrival: when a dispatch
 *      takes that item the bound stays (every item left arrived later) and the shape is marked
 *      stale; the exact value is read from the store only when the shape reaches the top of its
 *      model's HEAP_OLDEST (shapes_oldest_top), so a dispatch costs no scan of the shape's lanes
 *      unless the age bound asks.
 *
 * Rejected: hashing the model name into the shape key. Models are interned to a small index
 * (model.c), which makes the key exact ((signature, model index)) with no collision handling.
 */
#include "scheduler/core/sched_int.h"

#include <stdlib.h>
#include <string.h>

static void shapes_lane_released(void *ctx, uint32_t lane, void *lane_user)
{
    sched_shape_t *shape = ctx;
    (void)lane;
    if (lane_user != NULL)
        store_queue_release(shape->sched->store, lane_user);
}

sched_status_t shapes_intern(struct sched *s, sched_model_t *model, uint64_t signature,
                             sched_shape_t **out)
{
    map_key_t key = {signature, model->index};
    sched_shape_t *shape = map_get(&s->shapes, key);
    if (shape != NULL) {
        *out = shape;
        return SCHED_OK;
    }
    sched_status_t st = SCHED_ENOMEM;
    if (map_reserve(&s->shapes, 1) != MAP_OK || heap_reserve(model) != SCHED_OK)
        goto out;
    if (model->n_shapes == model->cap_shapes) {
        size_t cap = model->cap_shapes ? model->cap_shapes * 2 : 8;
        sched_shape_t **shapes = realloc(model->shapes, cap * sizeof(*shapes));
        if (shapes == NULL)
            goto out;
        model->shapes = shapes;
        model->cap_shapes = cap;
    }
    shape = calloc(1, sizeof(*shape));
    if (shape == NULL)
        goto out;
    shape->sched = s;
    shape->model_idx = model->index;
    shape->index = (uint32_t)model->n_shapes;
    shape->seq = s->next_shape_seq++;
    shape->signature = signature;
    for (int h = 0; h < HEAP_COUNT; h++)
        shape->heap_pos[h] = HEAP_ABSENT;
    st = lanes_create(s->max_lanes, shapes_lane_released, shape, &shape->lanes);
    if (st != SCHED_OK)
        goto out;
    map_put(&s->shapes, key, shape);
    model->shapes[model->n_shapes++] = shape;
    *out = shape;
    shape = NULL;
out:
    free(shape);
    return st;
}

void shapes_destroy_all(struct sched *s)
{
    for (size_t i = 0; i < s->n_models; i++) {
        sched_model_t *m = s->models[i];
        for (size_t j = 0; j < m->n_shapes; j++) {
            lanes_destroy(m->shapes[j]->lanes);
            free(m->shapes[j]);
        }
        free(m->shapes);
        heap_free(m);
    }
    map_fini(&s->shapes);
}

/* Frees an idle shape (invariant 2); its place in the model takes the model's last shape. */
static void shapes_reclaim(struct sched *s, sched_model_t *m, sched_shape_t *shape)
{
    map_del(&s->shapes, (map_key_t){shape->signature, shape->model_idx}, NULL);
    heap_drop(m, shape);
    sched_shape_t *last = m->shapes[--m->n_shapes];
    m->shapes[shape->index] = last;
    last->index = shape->index;
    lanes_destroy(shape->lanes);
    free(shape);
    s->counters.shapes_reclaimed++;
}

void shapes_tick(struct sched *s, uint64_t now_ns)
{
    /* `lanes` keeps a lane whose items still queue (lanes_quiesce_rule_t): fewer, fuller batches
     * wherever items wait longer than the idle time, the same elsewhere (`lanesched-bench sim
     * --preset sustained --prefixes`, `sweep`; docs/bench.md, "Why `lanes` spent more GPU time
     * than range64 on sustained") */
    lanes_quiesce_rule_t rule =
        s->policy == SCHED_POLICY_LANES ? LANES_QUIESCE_RULE_EMPTY : LANES_QUIESCE_RULE_SPARSE;
    for (size_t i = 0; i < s->n_models; i++) {
        sched_model_t *m = s->models[i];
        for (size_t j = 0; j < m->n_shapes;) {
            sched_shape_t *shape = m->shapes[j];
            s->counters.lanes_quiesced += lanes_tick(shape->lanes, now_ns, rule);
            if (lanes_in_use(shape->lanes) == 0 && shape->warm == 0 &&
                (shape != m->current || m->n_workers == 0)) {
                if (shape == m->current)
                    m->current = NULL;
                shapes_reclaim(s, m, shape); /* j now holds the model's last shape */
            } else {
                j++;
            }
        }
    }
}

void shapes_queued_note(struct sched *s, sched_shape_t *shape, uint64_t before,
                        uint64_t before_tokens)
{
    uint64_t now = lanes_queued_items(shape->lanes);
    s->queued_items = s->queued_items - before + now;
    s->queued_tokens = s->queued_tokens - before_tokens + lanes_queued_tokens(shape->lanes);
    sched_model_t *m = s->models[shape->model_idx];
    m->queued_items = m->queued_items - before + now;
    m->queued_tokens = m->queued_tokens - before_tokens + lanes_queued_tokens(shape->lanes);
    if (before == 0 && now != 0)
        m->n_active++;
    else if (before != 0 && now == 0)
        m->n_active--;
    heap_fix(m, shape);
}

/* Lanes shapes_oldest gathers before it reads any queue: a chunk's queues, then their fronts,
 * are asked for first (the queues lie apart in memory, and reading them in turn waited for two
 * misses per lane); the stack holds a chunk, and each lane's record is read once. */
#define SHAPES_OLDEST_CHUNK 64u

int shapes_oldest(struct sched *s, const sched_shape_t *shape, uint64_t *out_ns, uint32_t *out_lane)
{
    int found = 0;
    lanes_lane_t lane;
    uint32_t ids[SHAPES_OLDEST_CHUNK];
    void *users[SHAPES_OLDEST_CHUNK];
    uint32_t id = 0;
    for (int more = 1; more;) {
        uint32_t n = 0;
        while (n < SHAPES_OLDEST_CHUNK && (more = lanes_get(shape->lanes, id, &lane) == SCHED_OK)) {
            if (lane.queued_items != 0 && lane.user != NULL) {
                ids[n] = id;
                users[n++] = lane.user;
            }
            id++;
        }
        for (unsigned level = 0; level < 2; level++)
            for (uint32_t i = 0; i < n; i++)
                store_queue_prefetch(s->store, users[i], level);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t t = 0;
            if (!store_queue_oldest(s->store, users[i], &t))
                continue;
            if (!found || t < *out_ns) {
                *out_ns = t;
                if (out_lane != NULL)
                    *out_lane = ids[i];
            }
            found = 1;
        }
    }
    return found;
}

void shapes_oldest_refresh(struct sched *s, sched_shape_t *shape)
{
    uint64_t t = 0;
    /* Nothing readable yet (appended since the last flush): it counts as arriving now, which
     * is late by at most the time since that flush. */
    if (!shapes_oldest(s, shape, &t, NULL))
        t = s->clock(s->clock_ctx);
    shape->oldest_ns = t;
    shape->oldest_stale = 0;
}

sched_shape_t *shapes_oldest_top(struct sched *s, sched_model_t *m)
{
    sched_shape_t *top;
    while ((top = heap_top(m, HEAP_OLDEST)) != NULL && top->oldest_stale) { /* invariant 5 */
        shapes_oldest_refresh(s, top);
        heap_top_resift(m, HEAP_OLDEST);
    }
    return top;
}

uint64_t shapes_oldest_exact(struct sched *s, sched_model_t *m, sched_shape_t *shape)
{
    if (shape->oldest_stale) {
        shapes_oldest_refresh(s, shape);
        heap_fix(m, shape);
    }
    return shape->oldest_ns;
}

sched_shape_t *shapes_oldest_except(struct sched *s, sched_model_t *m, sched_shape_t *const *except,
                                    size_t n_except)
{
    size_t removed = 0;
    sched_shape_t *gone[SCHED_CACHE_SHAPES_MAX + 1];
    for (size_t i = 0; i < n_except && removed < sizeof(gone) / sizeof(gone[0]); i++) {
        if (except[i] != NULL && except[i]->heap_pos[HEAP_OLDEST] != HEAP_ABSENT) {
            heap_remove_one(m, HEAP_OLDEST, except[i]);
            gone[removed++] = except[i];
        }
    }
    sched_shape_t *top = shapes_oldest_top(s, m);
    for (size_t i = 0; i < removed; i++)
        heap_insert_one(m, HEAP_OLDEST, gone[i]);
    return top;
}
