/*
 * disk_int.h - private to store/: the disk backend's in-memory state, and the layer below both
 * the running backend and recovery, which rebuilds the same state at open.
 *
 * The files of the disk backend:
 *
 *   disk.c         the vtable, open and close, lane-level operations, current shapes
 *   disk_item.c    an item's life: append, peek, commit, tombstone, return, scan
 *   recovery.c     rebuilds the state at open from the index and the segment files
 *   -------------- the layer below, declared here ------------------------------------------
 *   disk_flush.c   the readable boundary: makes appends durable, then moves it
 *   disk_seg.c     one segment file: create, pick for an append, mark dirty, delete
 *   disk_fd.c      the cache of open segment descriptors
 *   disk_check.c   the executable invariants (read only)
 *   disk_queue.c   models and lane queues: the in-memory record arrays
 *   disk_epoch.c   the store's epoch, counted in the index
 *   disk_log.c     log lines, corruption reports and the sticky error state
 *
 * Calls run down this list, never up: disk.c calls any file below it; disk_item.c and
 * recovery.c call only the layer below (never each other, never disk.c); inside the layer each
 * file calls only files listed after it. recovery.c and disk_item.c see this header and their
 * own (recovery_int.h, disk_item_int.h), so nothing above the layer is declared to them.
 *
 * Ownership, unless a declaration says otherwise: every pointer parameter is borrowed for the
 * call; what an out pointer receives is owned by the disk_t and valid until the structure it
 * names is freed (a queue at its release, a segment at its deletion, everything at close).
 */
#ifndef LANESCHED_DISK_INT_H
#define LANESCHED_DISK_INT_H

#include "common/map.h"
#include "store/index_int.h"
#include "store/segment_int.h"
#include "store/store_int.h"

typedef struct dseg dseg_t;
typedef struct dqueue dqueue_t;

/* At most this many segment files are kept open; the least recently used is closed (and, at
 * the power-loss level, synced first, so no writeback error can be missed by a later fd). */
#define DISK_FD_CACHE 256u

/* One segment file. Owned by disk_t.segments; listed (borrowed) by its queue's segs. */
struct dseg {
    uint64_t id;
    uint64_t seq;
    uint64_t created_ns;
    dqueue_t *q; /* borrowed: the lane queue whose segs lists this segment */
    int fd;      /* owned; -1 while closed by the fd cache */
    uint32_t header_len;
    uint64_t size;     /* bytes written to the file, header included */
    uint64_t readable; /* durable boundary: what the index has recorded as flushed */
    uint64_t entries;  /* valid entries below size */
    uint64_t tokens;
    uint64_t flushed_entries; /* ... and below readable: what the index row says */
    uint64_t flushed_tokens;
    uint64_t deleted; /* tombstoned entries */
    int sealed;
    int needs_sync;     /* written since the last fdatasync */
    int dirty;          /* on the dirty list: index row (and maybe sync) due at the next flush */
    dseg_t *dirty_next; /* borrowed link of disk_t.dirty */
    dseg_t *lru_prev, *lru_next; /* borrowed links of the open-fd list, most recent first */
};

/*
 * A queued item: where its entry is and what the scheduler needs without reading it. 32 bytes;
 * the queue array grows by half, so with its slack a queued item costs at most 48 bytes of
 * memory (exactly 32 right after recovery, which trims), and the payload stays on disk.
 */
typedef struct {
    dseg_t *seg; /* borrowed: the segment holding the entry (owned by disk_t.segments) */
    uint64_t arrival_ns;
    uint32_t offset;
    uint32_t length;
    uint32_t tokens;
    uint32_t deliveries;
} drec_t;

/* A lane queue. Owned by disk_t (the `all` list; disk_t.queues maps to it). */
struct dqueue {
    struct store_queue base;
    const char *model; /* view: interned in disk_t.models */
    uint64_t signature;
    uint32_t lane;
    uint32_t model_idx;
    uint32_t target;
    int target_dirty;
    dseg_t **segs; /* owned array of borrowed segments: live ones, ascending sequence; only the
                    * last may be unsealed */
    size_t n_segs, cap_segs;
    uint64_t next_seq;
    drec_t *recs; /* owned: queued items, recs[head .. head+len), ascending (seq, offset) */
    size_t head, len, cap;
    size_t n_unflushed;            /* the last n_unflushed of them are past the readable boundary */
    dqueue_t *all_next, *all_prev; /* borrowed links of disk_t.all */
};

typedef struct {
    char *name; /* owned */
    int has_current;
    int current_dirty;
    uint64_t current;
} dmodel_t;

typedef struct {
    char *model; /* owned */
    uint64_t signature;
    uint32_t lane;
} dlane_key_t;

typedef struct {
    struct store base;
    store_disk_config_t cfg; /* cfg.dir is NULL (the copy is `dir`); cfg.log_ctx borrowed */
    char *dir;               /* owned */
    int dir_fd;
    int seg_dir_fd;
    index_t *index;   /* owned */
    int failed;       /* sticky error state: nothing more is acknowledged */
    map_t queues;     /* (signature, model_idx << 32 | lane) -> dqueue_t, borrowed from `all` */
    map_t segments;   /* (id, 0) -> dseg_t, owned */
    map_t deleted;    /* (id, 0) -> final size + 1, as a pointer: segments deleted this run */
    map_t pending;    /* (segment id, offset) -> drec_t, owned (malloc'd) */
    dqueue_t *all;    /* owned list of every queue */
    dmodel_t *models; /* owned array */
    size_t n_models;
    dlane_key_t *released; /* owned: lanes released since the last flush, rows to delete */
    size_t n_released;
    dseg_t *dirty;               /* borrowed list of segments due at the next flush */
    dseg_t *lru_head, *lru_tail; /* borrowed list of the segments with an open fd */
    unsigned open_fds;
    uint64_t next_segment_id;
    int meta_dirty;
    int rows_dirty; /* some lane's target_dirty or model's current_dirty is set */
    uint64_t unflushed_bytes;
    uint8_t *scratch; /* owned: peek reads and append encoding */
    size_t scratch_cap;
} disk_t;

static inline disk_t *disk_of(store_t *s)
{
    return (disk_t *)s;
}

/* The pending map's key of an entry. */
static inline map_key_t disk_ref_key(uint64_t seg_id, uint64_t offset)
{
    return (map_key_t){seg_id, offset};
}

/* ---- disk_log.c: log lines and the error state ---------------------------------------------- */

void disk_log(disk_t *d, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Logs corruption with the source line that found it (pass STORE_CORRUPT_BKPT). */
void disk_corrupt(disk_t *d, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Puts the store in its error state and says why, once; returns STORE_EIO. `what` borrowed. */
store_status_t disk_fail(disk_t *d, const char *what, int err);

/* ---- disk_queue.c: models and lane queues --------------------------------------------------- */

/* Returns 1 and the model's index when `model` is interned, else 0. */
int disk_model_find(const disk_t *d, const char *model, uint32_t *out_idx /* out */);
/* Interns `model` (copied) if it is new. */
store_status_t disk_model_intern(disk_t *d, const char *model, uint32_t *out_idx /* out */);
/* The queue of (model, signature, lane), created empty if it is new. */
store_status_t disk_queue_get(disk_t *d, const char *model, uint64_t signature, uint32_t lane,
                              dqueue_t **out /* out */);
/* Room for `extra` more records after the last. */
store_status_t disk_queue_reserve(dqueue_t *q, size_t extra);
/* Appends a copy of *rec and counts it as queued. */
store_status_t disk_queue_push(dqueue_t *q, const drec_t *rec);
/* Index of the first queued record not before (seg, offset). */
size_t disk_queue_lower_bound(const dqueue_t *q, const dseg_t *seg, uint64_t offset);
/* Frees the array's slack (after recovery, which knows the final sizes). */
void disk_queue_trim(dqueue_t *q);
/* Frees q and its arrays; its segments are not touched. */
void disk_queue_free(dqueue_t *q);
/* Drops q from d's map and list and frees it (its segments must be gone). */
void disk_queue_destroy(disk_t *d, dqueue_t *q);

/* ---- disk_fd.c: the descriptor cache -------------------------------------------------------- */

/* Closes least recently used descriptors until one more fits the cache (DISK_FD_CACHE). */
store_status_t disk_fd_make_room(disk_t *d);
/* Hands an open descriptor (taken) to the cache, after disk_fd_make_room. */
void disk_fd_attach(disk_t *d, dseg_t *seg, int fd);
/* The segment's descriptor (a view: owned by the cache), opened on demand. */
store_status_t disk_fd_get(disk_t *d, dseg_t *seg, int *out_fd /* out */);
/* Closes the segment's descriptor if it has one. */
void disk_fd_close(disk_t *d, dseg_t *seg);

/* ---- disk_seg.c: segment files -------------------------------------------------------------- */

/* Lists seg (taken: owned by d->segments from then on) under q. */
store_status_t disk_seg_attach(disk_t *d, dqueue_t *q, dseg_t *seg);
/* Closes seg's descriptor and frees it; it must be out of every list and map first. */
void disk_seg_free(disk_t *d, dseg_t *seg);
/* Puts seg on the dirty list: its index row is written at the next flush. */
void disk_seg_mark_dirty(disk_t *d, dseg_t *seg);
/* The index row of seg at its readable boundary. */
index_segment_row_t disk_seg_row(const dseg_t *seg);
/* The segment the next entry of `size` bytes goes to, rolling over at the size cap. */
store_status_t disk_seg_pick(disk_t *d, dqueue_t *q, uint64_t size, dseg_t **out /* out */);
/* Deletes a sealed, fully tombstoned segment and frees seg. */
store_status_t disk_seg_delete(disk_t *d, dseg_t *seg);
/* Syncs the segments directory (after a create, rename or unlink in it). */
store_status_t disk_fsync_dir(disk_t *d);

/* ---- disk_flush.c: the readable boundary ---------------------------------------------------- */

/* store_flush of the disk backend. */
store_status_t disk_flush(disk_t *d);

/* ---- disk_epoch.c: the store's epoch -------------------------------------------------------- */

/* store_epoch_next of the disk backend: counted in the index (index_epoch_next). */
store_status_t disk_epoch_next(store_t *store, uint32_t *out_epoch /* out */);

/* ---- disk_check.c: executable invariants (common/invariant.h) ------------------------------- */

/* One segment's fields, O(1). */
int disk_seg_check(const disk_t *d, const dseg_t *seg);
/* One queue's counters and bounds, O(1): what every operation on it checks. */
int disk_queue_counts_check(const dqueue_t *q);
/* One queue whole: counters against its records, order, boundaries, segments. O(records). */
int disk_queue_check(const disk_t *d, const dqueue_t *q);
/* After an operation on q: its counters, and all of it when its length is a power of two (so
 * a run of appends costs O(1) each, amortised). */
int disk_queue_touched_check(const disk_t *d, const dqueue_t *q);
/* The whole store: every queue, the pending map, the descriptor and dirty lists. O(store). */
int disk_check(const disk_t *d);

#endif
