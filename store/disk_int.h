/*
 * disk_int.h - private to store/: the disk backend's in-memory state, shared by disk.c (the
 * running store) and recovery.c (which rebuilds it at open).
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

/* One segment file. */
struct dseg {
    uint64_t id;
    uint64_t seq;
    uint64_t created_ns;
    dqueue_t *q;
    int fd; /* -1 while closed by the fd cache */
    uint32_t header_len;
    uint64_t size;     /* bytes written to the file, header included */
    uint64_t readable; /* durable boundary: what the index has recorded as flushed */
    uint64_t entries;  /* valid entries below size */
    uint64_t tokens;
    uint64_t flushed_entries; /* ... and below readable: what the index row says */
    uint64_t flushed_tokens;
    uint64_t deleted; /* tombstoned entries */
    int sealed;
    int needs_sync; /* written since the last fdatasync */
    int dirty;      /* on the dirty list: index row (and maybe sync) due at the next flush */
    dseg_t *dirty_next;
    dseg_t *lru_prev, *lru_next; /* open-fd list, most recent first */
};

/*
 * A queued item: where its entry is and what the scheduler needs without reading it. 32 bytes;
 * the queue array grows by half, so with its slack a queued item costs at most 48 bytes of
 * memory (exactly 32 right after recovery, which trims), and the payload stays on disk.
 */
typedef struct {
    dseg_t *seg;
    uint64_t arrival_ns;
    uint32_t offset;
    uint32_t length;
    uint32_t tokens;
    uint32_t deliveries;
} drec_t;

struct dqueue {
    struct store_queue base;
    const char *model; /* interned in disk_t.models */
    uint64_t signature;
    uint32_t lane;
    uint32_t model_idx;
    uint32_t target;
    int target_dirty;
    dseg_t **segs; /* live segments, ascending sequence; only the last may be unsealed */
    size_t n_segs, cap_segs;
    uint64_t next_seq;
    drec_t *recs; /* queued items: recs[head .. head+len), ascending (seq, offset) */
    size_t head, len, cap;
    size_t n_unflushed; /* the last n_unflushed of them are past the readable boundary */
    dqueue_t *all_next, *all_prev;
};

typedef struct {
    char *name;
    int has_current;
    int current_dirty;
    uint64_t current;
} dmodel_t;

typedef struct {
    char *model;
    uint64_t signature;
    uint32_t lane;
} dlane_key_t;

typedef struct {
    struct store base;
    store_disk_config_t cfg;
    char *dir;
    int dir_fd;
    int seg_dir_fd;
    index_t *index;
    int failed;     /* sticky error state: nothing more is acknowledged */
    map_t queues;   /* (signature, model_idx << 32 | lane) -> dqueue_t */
    map_t segments; /* (id, 0) -> dseg_t */
    map_t deleted;  /* (id, 0) -> final size + 1, as a pointer: segments deleted this run */
    map_t pending;  /* (segment id, offset) -> drec_t (malloc'd) */
    dqueue_t *all;
    dmodel_t *models;
    size_t n_models;
    dlane_key_t *released; /* lanes released since the last flush: rows to delete */
    size_t n_released;
    dseg_t *dirty;
    dseg_t *lru_head, *lru_tail;
    unsigned open_fds;
    uint64_t next_segment_id;
    int meta_dirty;
    int rows_dirty; /* some lane's target_dirty or model's current_dirty is set */
    uint64_t unflushed_bytes;
    uint8_t *scratch; /* peek reads and append encoding */
    size_t scratch_cap;
} disk_t;

/* disk.c helpers recovery.c uses. */
void disk_log(disk_t *d, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void disk_corrupt(disk_t *d, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
store_status_t disk_model_intern(disk_t *d, const char *model, uint32_t *out_idx);
store_status_t disk_queue_get(disk_t *d, const char *model, uint64_t signature, uint32_t lane,
                              dqueue_t **out);
store_status_t disk_queue_reserve(dqueue_t *q, size_t extra);
store_status_t disk_queue_push(dqueue_t *q, const drec_t *rec);
/* Frees the array's slack (after recovery, which knows the final sizes). */
void disk_queue_trim(dqueue_t *q);
store_status_t disk_seg_attach(disk_t *d, dqueue_t *q, dseg_t *seg);
void disk_seg_free(disk_t *d, dseg_t *seg);
void disk_seg_mark_dirty(disk_t *d, dseg_t *seg);
index_segment_row_t disk_seg_row(const dseg_t *seg);
store_status_t disk_fsync_dir(disk_t *d);
store_status_t disk_seg_delete(disk_t *d, dseg_t *seg);

/* recovery.c: rebuilds d's queues from the index and the segment files. */
store_status_t disk_recover(disk_t *d, store_recovery_t *report);

#endif
