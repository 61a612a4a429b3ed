/*
 * store.h - the contract of lanesched's item store.
 *
 * The store keeps work items in per-lane queues keyed by (model, signature, lane) and knows
 * nothing of scheduling policy: it never chooses a lane, a shape or a batch size. The scheduler
 * decides; the store appends, peeks, commits, tombstones and returns.
 *
 * Life of an item:
 *
 *   store_append ──> queued ──store_peek──> (still queued: peeking changes nothing)
 *                       │
 *                 store_commit (after the consumer's channel took the batch)
 *                       v
 *                    pending ──store_tombstone──> completed (never comes back)
 *                       │
 *                 store_return (nak, dead consumer, ack deadline)
 *                       v
 *                    queued again, at the front of its lane, in original order
 *
 * Backends: memory (this file's store_open_memory) keeps everything in RAM and nothing survives
 * store_close. The disk backend (segment files + LMDB index) implements the same functions.
 *
 * Ownership: every pointer a caller passes in is borrowed for the duration of the call; the store
 * copies what it keeps. Every pointer the store hands out is a view owned by the store: views from
 * store_peek stay valid until the next call that mutates the store (append, commit, tombstone,
 * return, queue_release, close) and are named *_view to say so.
 */
#ifndef LANESCHED_STORE_H
#define LANESCHED_STORE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_STATUS_MAP(X)                                                                   \
    X(OK, "ok")                                                                               \
    X(ENOMEM, "out of memory")                                                                \
    X(EINVAL, "invalid argument")                                                             \
    X(ESTALE, "commit does not match the head of the lane queue (peek is stale)")             \
    X(ENOTPENDING, "item is not pending (never committed, or already completed or returned)") \
    X(EBUSY, "lane queue still holds queued or pending items")                                \
    X(EIO, "I/O error: the store is in an error state and acknowledges nothing more")

typedef enum {
#define STORE_STATUS_ENUM(name, text) STORE_##name,
    STORE_STATUS_MAP(STORE_STATUS_ENUM)
#undef STORE_STATUS_ENUM
        STORE_STATUS_COUNT
} store_status_t;

/* Returns a static string; never NULL (unknown values give "unknown store status"). */
const char *store_status_str(store_status_t status);

typedef struct store store_t;

/* One lane's queue. Owned by the store; valid until store_queue_release or store_close. */
typedef struct store_queue store_queue_t;

/* Routing keys of a lane queue. `model` is borrowed for the call. */
typedef struct {
    const char *model;
    uint64_t signature;
    uint32_t lane;
} store_key_t;

/*
 * Where an item lives: `queue` names the lane queue (the disk backend: the segment), `offset`
 * the position inside it (the disk backend: the entry's byte offset). Plain value, copyable.
 * Offsets grow in append order within a queue, so they are the item's arrival order.
 */
typedef struct {
    uint64_t queue;
    uint64_t offset;
} store_ref_t;

/* An item to append. All pointers borrowed for the call; the store copies the bytes. */
typedef struct {
    const uint8_t *id;
    size_t id_len;
    const uint8_t *payload;
    size_t payload_len;
    uint32_t tokens;
    uint64_t arrival_ns;
} store_item_t;

/*
 * A peeked item. Every pointer is a view into the store, valid until the next mutating call.
 * `signature` is the routing key recorded with the item (the disk backend: the segment header),
 * which is what the scheduler's shape guard checks.
 */
typedef struct {
    store_ref_t ref;
    const uint8_t *id_view;
    size_t id_len;
    const uint8_t *payload_view;
    size_t payload_len;
    uint32_t tokens;
    uint32_t deliveries; /* commits so far, this one not included */
    uint64_t signature;
    uint64_t arrival_ns;
} store_view_t;

/* Opens an empty in-memory store. On success *out (returned to the caller) is freed with
 * store_close. */
store_status_t store_open_memory(store_t **out /* out */);

/* Closes the store and frees everything it owns, pending items included. NULL-safe. */
void store_close(store_t *store);

/*
 * Opens (creating if needed) the queue of one lane. Calling it twice with the same key returns
 * the same queue. *out is owned by the store.
 */
store_status_t store_queue_open(store_t *store, const store_key_t *key,
                                store_queue_t **out /* out */);

/* Releases an empty queue (no queued and no pending items), e.g. when its lane id is freed. */
store_status_t store_queue_release(store_t *store, store_queue_t *queue);

/* Appends at the back of the queue. On success *out_ref names the new item. */
store_status_t store_append(store_t *store, store_queue_t *queue, const store_item_t *item,
                            store_ref_t *out_ref /* out, may be NULL */);

/*
 * Peeks at up to `max` items from the front of the queue, in order, changing nothing.
 * `views` is caller memory for `max` entries; *out_n receives how many were filled.
 */
store_status_t store_peek(store_t *store, store_queue_t *queue, store_view_t *views, size_t max,
                          size_t *out_n /* out */);

/*
 * Commits a dispatched batch: the refs must be the current front of one queue, in order.
 * Three steps: (1) check every ref against the queue, changing nothing, so a stale peek fails
 * with STORE_ESTALE and no effect; (2) advance the queue past them; (3) add each to the pending
 * map (never persisted) and count one more delivery.
 */
store_status_t store_commit(store_t *store, store_queue_t *queue, const store_ref_t *refs,
                            size_t n);

/*
 * Completes a pending item. *out_completed (may be NULL) is 1 when this call completed it and
 * 0 when it was already complete (completing twice is harmless and counted once). A ref that
 * was never committed, or was returned to the queue, gives STORE_ENOTPENDING.
 */
store_status_t store_tombstone(store_t *store, store_ref_t ref, int *out_completed /* out */);

/*
 * Puts pending items back at the front of their queues, each at its original position relative
 * to the other queued items (arrival order). All-or-nothing: if any ref is not pending, nothing
 * changes and STORE_ENOTPENDING is returned.
 */
store_status_t store_return(store_t *store, const store_ref_t *refs, size_t n);

/* Queue totals: items and tokens queued (not pending). Either out pointer may be NULL. */
void store_queue_count(const store_queue_t *queue, uint64_t *out_items, uint64_t *out_tokens);

/* Number of pending items across the store. */
uint64_t store_pending_count(const store_t *store);

/*
 * The per-model "current shape" field of the storage tier, shared by every consumer of the
 * model. Get succeeds with *out_has = 0 when the model never had one.
 */
store_status_t store_current_shape_set(store_t *store, const char *model, uint64_t signature);
store_status_t store_current_shape_get(store_t *store, const char *model, int *out_has /* out */,
                                       uint64_t *out_signature /* out */);

#endif
