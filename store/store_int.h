/*
 * store_int.h - private to store/ and store/disk/: the backend vtable and the fields every
 * backend shares. Never included from outside the store, except by the store's unit tests
 * (test_store_check.c), which reach the pieces no public call shows.
 */
#ifndef LANESCHED_STORE_INT_H
#define LANESCHED_STORE_INT_H

#include "store/store.h"

/* The part of a lane queue every backend keeps; backends embed it first. */
struct store_queue {
    uint64_t id;
    uint64_t queued_items;
    uint64_t queued_tokens;
    uint64_t pending_items;
};

/* A backend's half of each store.h call, reached through store.c after its argument checks;
 * pointers and ownership as the store.h call says. */
struct store_ops {
    int (*queue_oldest)(const store_t *store, const store_queue_t *queue, uint64_t *out);
    void (*queue_prefetch)(const store_t *store, const store_queue_t *queue,
                           unsigned level); /* NULL: no hint */
    store_status_t (*queue_scan)(store_t *store, store_queue_t *queue, store_scan_fn fn, void *ctx);
    store_status_t (*flush)(store_t *store);
    uint64_t (*unflushed_bytes)(const store_t *store);
    store_status_t (*queue_target_set)(store_t *store, store_queue_t *queue, uint32_t target);
    int (*queue_next)(store_t *store, store_queue_t *prev, store_queue_t **out, store_key_t *key,
                      uint32_t *target);
    void (*close)(store_t *store);
    store_status_t (*queue_open)(store_t *store, const store_key_t *key, store_queue_t **out);
    store_status_t (*queue_release)(store_t *store, store_queue_t *queue);
    store_status_t (*append)(store_t *store, store_queue_t *queue, const store_item_t *item,
                             store_ref_t *out_ref);
    store_status_t (*peek)(store_t *store, store_queue_t *queue, store_view_t *views, size_t max,
                           size_t *out_n);
    store_status_t (*peek_tokens)(store_t *store, store_queue_t *queue, uint32_t *tokens,
                                  uint32_t *deliveries, size_t max, size_t *out_n);
    store_status_t (*commit)(store_t *store, store_queue_t *queue, const store_ref_t *refs,
                             size_t n);
    store_status_t (*tombstone)(store_t *store, store_ref_t ref, int *out_completed);
    void (*prefetch)(const store_t *store, store_ref_t ref, unsigned level); /* NULL: no hint */
    /* unseen: store_return_unseen (each delivery count back down by one) */
    store_status_t (*ret)(store_t *store, const store_ref_t *refs, size_t n, int unseen);
    uint64_t (*pending_count)(const store_t *store);
    void (*usage_get)(const store_t *store, store_usage_t *out);
    store_status_t (*current_shape_set)(store_t *store, const char *model, uint64_t signature);
    store_status_t (*current_shape_get)(store_t *store, const char *model, int *out_has,
                                        uint64_t *out_signature);
    store_status_t (*epoch_next)(store_t *store, uint32_t *out_epoch);
};

/* A random epoch in 1 .. 2^20, where a store without a recorded epoch starts. */
uint32_t store_epoch_random(void);

struct store {
    const struct store_ops *ops;
};

#endif
