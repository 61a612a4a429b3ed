/*
 * shapes.c - the shape table: models by name, shapes by (model, signature), each shape with
 * its own rolling lanes.
 *
 * Invariants:
 *   1. The key everywhere is (model, signature); length is never part of it and nothing is
 *      shared across shapes: lanes, pressure and thresholds are local to one shape.
 *   2. A shape, once created, lives until the scheduler is destroyed, so pointers to it held by
 *      in-flight batches stay valid.
 *   3. A lane's store queue is attached as the lane's user pointer when the lane opens and is
 *      released when the lane's id goes back to the free list.
 *
 * Rejected: hashing the model name into the shape key. Models are few and interned to a small
 * index, which makes the key exact ((signature, model index)) with no collision handling.
 */
#include "scheduler/core/sched_int.h"

#include <stdlib.h>
#include <string.h>

long shapes_model_lookup(const struct sched *s, const char *name)
{
    for (size_t i = 0; i < s->n_models; i++) {
        if (strcmp(s->models[i]->name, name) == 0)
            return (long)i;
    }
    return -1;
}

sched_status_t shapes_model_intern(struct sched *s, const char *name, uint32_t *out_idx)
{
    long found = shapes_model_lookup(s, name);
    if (found >= 0) {
        *out_idx = (uint32_t)found;
        return SCHED_OK;
    }
    sched_status_t st = SCHED_ENOMEM;
    sched_model_t *m = calloc(1, sizeof(*m));
    sched_model_t **models = realloc(s->models, (s->n_models + 1) * sizeof(*models));
    if (models != NULL)
        s->models = models;
    if (m == NULL || models == NULL || (m->name = strdup(name)) == NULL)
        goto out;
    *out_idx = (uint32_t)s->n_models;
    s->models[s->n_models++] = m;
    m = NULL;
    st = SCHED_OK;
out:
    free(m);
    return st;
}

static void shapes_lane_released(void *ctx, uint32_t lane, void *lane_user)
{
    sched_shape_t *shape = ctx;
    (void)lane;
    if (lane_user != NULL)
        store_queue_release(shape->sched->store, lane_user);
}

sched_status_t shapes_intern(struct sched *s, uint32_t model_idx, uint64_t signature,
                             sched_shape_t **out)
{
    map_key_t key = {signature, model_idx};
    sched_shape_t *shape = map_get(&s->shapes, key);
    if (shape != NULL) {
        *out = shape;
        return SCHED_OK;
    }
    sched_model_t *model = s->models[model_idx];
    sched_status_t st = SCHED_ENOMEM;
    if (map_reserve(&s->shapes, 1) != MAP_OK)
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
    shape->model_idx = model_idx;
    shape->signature = signature;
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
        free(m->name);
        free(m);
    }
    free(s->models);
    map_fini(&s->shapes);
}

void shapes_tick(struct sched *s, uint64_t now_ns)
{
    for (size_t i = 0; i < s->n_models; i++) {
        sched_model_t *m = s->models[i];
        for (size_t j = 0; j < m->n_shapes; j++)
            s->counters.lanes_quiesced += lanes_tick(m->shapes[j]->lanes, now_ns);
    }
}
