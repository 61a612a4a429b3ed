/*
 * memory_int.h - private to store/: the memory backend's state (memory.c) and its executable
 * invariants (memory_check.c), which the unit tests call on structures they break on purpose.
 *
 * Ownership: the mem_store_t owns every queue (through queues_by_id), every item (queued: in
 * its queue's array; pending: in the pending map) and the model names. Check functions borrow
 * what they are given and only read it.
 */
#ifndef LANESCHED_MEMORY_INT_H
#define LANESCHED_MEMORY_INT_H

#include "common/map.h"
#include "store/store_int.h"

typedef struct mem_queue mem_queue_t;

/* One item; owned by its queue's array while queued, by the pending map while pending. */
typedef struct {
    store_ref_t ref;
    mem_queue_t *queue; /* borrowed: the queue it belongs to */
    uint64_t arrival_ns;
    uint32_t tokens;
    uint32_t deliveries;
    uint32_t prefix_tokens;
    uint32_t max_wait_ms;
    uint32_t id_len;
    uint32_t payload_len;
    uint8_t bytes[]; /* id, then payload */
} mem_item_t;

struct mem_queue {
    struct store_queue base;
    uint64_t signature;
    uint32_t model_idx;
    uint32_t lane;
    uint32_t target;
    uint64_t next_offset;
    mem_item_t **items; /* owned array; queued items are items[head .. head + len), owned */
    size_t head;
    size_t len;
    size_t cap;
};

typedef struct {
    char *name; /* owned */
    int has_current;
    uint64_t current;
} mem_model_t;

typedef struct {
    struct store base;
    map_t queues_by_key; /* (signature, model_idx << 32 | lane) -> mem_queue_t, borrowed */
    map_t queues_by_id;  /* (id, 0) -> mem_queue_t, owned */
    map_t pending;       /* (queue id, offset) -> mem_item_t, owned */
    map_t released;      /* (id, 0) -> the released queue's next offset + 1, as a pointer */
    mem_model_t *models; /* owned array */
    size_t n_models;
    uint64_t next_queue_id;
} mem_store_t;

/* ---- memory_check.c: executable invariants (common/invariant.h) ----------------------------- */

/* One queue's counters and bounds, O(1). */
int mem_queue_counts_check(const mem_queue_t *q);
/* One queue whole: counters against its items, order, refs. O(items). */
int mem_queue_check(const mem_store_t *ms, const mem_queue_t *q);
/* After an operation on q: its counters, and all of it when its length is a power of two. */
int mem_queue_touched_check(const mem_store_t *ms, const mem_queue_t *q);
/* The whole store: every queue, both queue maps, the pending map. O(store). */
int mem_check(const mem_store_t *ms);

#endif
