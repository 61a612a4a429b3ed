/*
 * sched_int.h - private to scheduler/: the scheduler's tables, shared by its .c files.
 * Never included from outside the module.
 */
#ifndef LANESCHED_SCHED_INT_H
#define LANESCHED_SCHED_INT_H

#include "scheduler/core/sched.h"

#include "common/map.h"

typedef struct sched_shape {
    struct sched *sched;
    uint32_t model_idx;
    uint64_t signature;
    lanes_t *lanes;
} sched_shape_t;

typedef struct {
    char *name;
    sched_shape_t **shapes; /* in order of first sight */
    size_t n_shapes;
    size_t cap_shapes;
    sched_shape_t *current; /* the sticky shape; mirrors the store's current-shape field */
} sched_model_t;

typedef struct {
    store_ref_t ref;
    uint32_t tokens;
    uint8_t settled;
} sched_inflight_item_t;

/* A committed batch until every position is completed or returned. */
typedef struct {
    uint64_t batch_id;
    sched_shape_t *shape;
    uint32_t lane;
    uint32_t n;
    uint32_t unsettled;
    sched_inflight_item_t items[];
} sched_inflight_t;

struct sched {
    store_t *store; /* borrowed */
    uint32_t max_lanes;
    sched_clock_fn clock;
    void *clock_ctx;
    uint32_t max_deliveries;
    uint64_t starvation_ns;
    sched_model_t **models;
    size_t n_models;
    map_t shapes;   /* (signature, model_idx) -> sched_shape_t */
    map_t inflight; /* (batch_id, 0) -> sched_inflight_t */
    uint64_t next_batch_id;
    /* The batch of the last sched_fill, valid until the next call that mutates anything. */
    sched_batch_t filled;
    sched_shape_t *filled_shape;
    int filled_valid;
    store_view_t *views; /* scratch for peeks, views_cap entries */
    uint32_t *tokens;
    size_t views_cap;
    sched_counters_t counters;
    uint64_t items_restored, tokens_restored; /* queued in the store when the scheduler opened */
    uint64_t inflight_items, inflight_tokens; /* committed, neither completed nor returned */
    store_status_t store_status;              /* the store's answer behind the last SCHED_ESTORE */
};

/* shapes.c */
/* Index of the model named `name`, or -1. */
long shapes_model_lookup(const struct sched *s, const char *name);
/* Index of the model, added on first sight. */
sched_status_t shapes_model_intern(struct sched *s, const char *name, uint32_t *out_idx /* out */);
/* The shape (model_idx, signature), created on first sight. */
sched_status_t shapes_intern(struct sched *s, uint32_t model_idx, uint64_t signature,
                             sched_shape_t **out /* out */);
void shapes_destroy_all(struct sched *s);
void shapes_tick(struct sched *s, uint64_t now_ns);

/* check.c: the invariants after one operation that touched `lane` of `shape` (NULL: no lane). */
int sched_check_op(const struct sched *s, const sched_shape_t *shape, uint32_t lane);

/* select.c: the model's shape for the next batch (sticky): SCHED_EEMPTY when it has no work,
 * SCHED_ESTORE when recording a switch failed. */
sched_status_t select_shape(struct sched *s, sched_model_t *model, sched_shape_t **out /* out */);
/* With the starvation bound on: 1 and the lane holding the shape's oldest readable item when
 * that item has waited past the bound; 0 otherwise (out_lane untouched). */
int select_lane_starved(struct sched *s, const sched_shape_t *shape, uint32_t *out_lane /* out */);

#endif
