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
 * Backends: memory (store_open_memory, memory.c) keeps everything in RAM and nothing survives
 * store_close. The disk backend (store_open_disk: one append log of segment files per model +
 * an LMDB index, store/disk/, whose files disk_int.h lists; the format is in docs/store.md)
 * implements the same functions.
 *
 * Ownership: every pointer a caller passes in is borrowed for the duration of the call; the store
 * copies what it keeps. Every pointer the store hands out is a view owned by the store: views from
 * store_peek stay valid until the next call that mutates the store (append, commit, tombstone,
 * return, queue_release, close), and a view marked transient only until the next store_peek;
 * they are named *_view to say so.
 */
#ifndef LANESCHED_STORE_H
#define LANESCHED_STORE_H

#include "common/status.h"
#include <stddef.h>
#include <stdint.h>

#define STORE_STATUS_MAP(X)                                                                    \
    X(STORE_OK, "ok")                                                                          \
    X(STORE_ENOMEM, "out of memory")                                                           \
    X(STORE_EINVAL, "invalid argument")                                                        \
    X(STORE_ESTALE, "commit does not match the head of the lane queue (peek is stale)")        \
    X(STORE_ENOTPENDING,                                                                       \
      "item is not pending (never committed, or already completed or returned)")               \
    X(STORE_EBUSY, "lane queue still holds queued or pending items")                           \
    X(STORE_EIO, "I/O error: the store is in an error state and acknowledges nothing more")    \
    X(STORE_ENOSPC, "no space left on the device: the item was not stored")                    \
    X(STORE_ECORRUPT, "corrupt data found on disk")                                            \
    X(STORE_EINDEX, "LMDB index error")                                                        \
    X(STORE_EFORMAT, "the data directory was written in a store format this version does not " \
                     "read")

STATUS_ENUM(store_status_t, STORE_STATUS_MAP, STORE_STATUS_COUNT);

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
 * Where an item lives: `queue` names the lane queue (the disk backend: the segment file of the
 * model's log that holds the entry), `offset` the position inside it (the disk backend: the
 * entry's byte offset). Plain value, copyable. Within a lane queue, (queue, offset) pairs grow
 * in append order, so they are the item's arrival order.
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
    /* Kept with the item and handed back by every peek, after a restart too (the wire's
     * WorkItem fields 9 and 10); the store gives them no meaning. 0 = none. */
    uint32_t prefix_tokens;
    uint32_t max_wait_ms;
} store_item_t;

/*
 * A peeked item. Every pointer is a view into the store, valid until the next mutating call, or,
 * with `transient` set, until the next store_peek, which may reuse the buffer it lies in (the
 * disk store reading entries it has no mapping for). `signature` is the routing key recorded with
 * the item (the disk backend: in the item's entry, under its CRC), which is what the scheduler's
 * shape guard checks.
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
    uint32_t prefix_tokens; /* as appended (store_item_t) */
    uint32_t max_wait_ms;
    uint8_t transient; /* 1: valid until the next store_peek only */
} store_view_t;

/* Opens an empty in-memory store. On success *out (returned to the caller) is freed with
 * store_close. */
store_status_t store_open_memory(store_t **out /* out */);

/* What a disk store's appends survive once store_flush has returned. */
typedef enum {
    /* A crash of the process: the flush hands the turn's appends and tombstones to the kernel
     * (one write per touched model log), and the LMDB index commits without syncing. The
     * default: no disk flush per batch. */
    STORE_DURABLE_PROCESS = 0,
    /* Power loss: the flush also fdatasync()s every touched segment (all of them at once), then
     * commits the index with a sync. Appends made between two flushes share one sync (group
     * commit); the caller bounds how long appends wait for it (see store_unflushed_bytes). */
    STORE_DURABLE_POWER = 1,
} store_durability_t;

/* How the disk store talks to the kernel (measured by lanesched-storebench). */
typedef enum {
    /* Segment files mapped (MAP_SHARED) for reads and the 4-byte state words (peeks, delivery
     * counts and tombstones without a system call), io_uring for the power level's syncs where
     * the kernel allows it (a seccomp filter or kernel.io_uring_disabled may not), and inotify
     * to see segment files deleted under the store; each falls back to what STORE_IO_PLAIN
     * does. */
    STORE_IO_AUTO = 0,
    /* pread()/pwrite() instead of mappings, one system call per sync, and an fstat() of every
     * segment a flush wrote instead of an inotify watch on the segments directory: what runs
     * where none of those is available. */
    STORE_IO_PLAIN = 1,
} store_io_t;

/* How the power-loss level makes a flush's segments durable. */
typedef enum {
    /* fdatasync of every touched segment, all in flight at once (io_uring), else one after
     * another. */
    STORE_SYNC_FILES = 0,
    /* One syncfs() of the data directory's file system for all touched segments: cheapest
     * when many segments are touched and the file system holds little else that is dirty
     * (its cost grows with every dirty page of every process on it). Needs Linux >= 5.8, the
     * first that reports writeback errors through syncfs. */
    STORE_SYNC_FS = 1,
} store_sync_t;

enum { STORE_LOG_INFO = 0, STORE_LOG_WARN = 1, STORE_LOG_ERROR = 2 };

/* A log line from the store. `msg` is borrowed for the call. */
typedef void (*store_log_fn)(void *ctx, int level, const char *msg);

/* Default size at which a segment is sealed and a new one started for its model: large enough
 * that roll-over (a file create and two fsyncs) is rare, small enough that whole-file deletion
 * reclaims space soon after the segment's items complete. */
#define STORE_SEGMENT_MAX_DEFAULT (64ull << 20)

/* Default bound on the segment bytes the disk store keeps mapped in the process's resident
 * memory (store_disk_config_t.resident_bytes): the entries peeks and commits touch, populated
 * 256 KiB at a time; past it the mappings are dropped from the process at the next flush (the
 * page cache keeps the pages) and populated again on demand. A lane's entries are spread over its
 * model's log, so a drain reads the whole stretch of the log its queue spans: a bound below that
 * stretch populates a chunk again for nearly every item. 1 GiB holds the log of over a million
 * queued items of 512 bytes; the pages are the kernel's page cache, reclaimed under memory
 * pressure like any clean or written-back file page, and not the process's own memory
 * (`lanesched-bench throughput --durability process` with --store-resident-mb 16 against 1024;
 * docs/store.md). */
#define STORE_RESIDENT_DEFAULT (1ull << 30)

/* Default idle time after which a model's drained current segment is sealed and deleted
 * (store_disk_config_t.idle_seal_ms). A model that stopped appending would otherwise keep its
 * file, descriptor and mapping, and pin every state journal file written since its segment's
 * first record (they fill with every other model's records), until it appended 64 MiB more or the
 * daemon restarted. Ten seconds costs a model with sporadic traffic at most one segment file
 * created per ten seconds; a busy model's segment is never idle. */
#define STORE_IDLE_SEAL_MS_DEFAULT 10000u

/* Default threads for recovery's segment scans: the second core scans the files of half the
 * models (by bytes) while the opening thread scans the rest. A model's files stay on one thread
 * (its lanes' arrival order is the files' order), so one model gains nothing
 * (`lanesched-storebench --phases recovery --recovery-threads 1` against 2; docs/store.md). */
#define STORE_RECOVERY_THREADS_DEFAULT 2u
/* More is refused (STORE_EINVAL): a bound on what a configuration can ask (threads past the
 * models or the cores gain nothing, and each holds its own lane table and notes while the scan
 * runs), not a tuned value. */
#define STORE_RECOVERY_THREADS_MAX 64u

typedef struct {
    const char *dir;            /* data directory, created if missing; borrowed for the call */
    uint64_t segment_max_bytes; /* 0 = STORE_SEGMENT_MAX_DEFAULT */
    store_durability_t durability;
    uint64_t index_map_bytes; /* LMDB map size; 0 = 1 GiB */
    store_log_fn log;         /* NULL = stderr */
    void *log_ctx;            /* borrowed; must outlive the store */
    store_io_t io;
    store_sync_t sync;          /* power level only */
    unsigned max_open_files;    /* segment descriptors kept open; 0 = half of RLIMIT_NOFILE */
    uint64_t resident_bytes;    /* mapped segment bytes touched before they are dropped from the
                                 * process; 0 = STORE_RESIDENT_DEFAULT */
    uint64_t journal_max_bytes; /* size of each state journal file; 0 = the default (8 MiB); at
                                   most 2 GiB (STORE_EINVAL past it) */
    unsigned recovery_threads;  /* threads scanning the segment files at open, one model's files
                                 * on one thread; 0 = STORE_RECOVERY_THREADS_DEFAULT, 1 = the
                                 * opening thread alone; at most STORE_RECOVERY_THREADS_MAX */
    uint64_t idle_seal_ms;      /* a model's current segment with every entry completed and no
                                 * append for this long is sealed, and so deleted; 0 =
                                 * STORE_IDLE_SEAL_MS_DEFAULT */
    uint64_t spill_bytes;       /* a turn's appended entries are written ahead of its flush once
                                 * they pass this many bytes (the boundaries still move at the
                                 * flush); 0 = the store's default, sized to the CPU cache */
} store_disk_config_t;

/* What recovery found and did at open. Every dropped byte is counted here and logged. */
typedef struct {
    uint64_t segments; /* segment files recovered */
    uint64_t entries_live;
    uint64_t entries_tombstoned;
    uint64_t tokens_live;
    uint64_t torn_tails; /* segments whose tail past the durable boundary was cut */
    uint64_t torn_bytes;
    uint64_t corrupt_regions; /* damaged stretches below the durable boundary, skipped */
    uint64_t corrupt_bytes;
    uint64_t damaged_state_words; /* entry intact, state word unreadable: treated as live */
    uint64_t deleted_count_repairs;
    uint64_t missing_files;        /* indexed segments without a file */
    uint64_t missing_live_entries; /* live entries the index says those files held */
    uint64_t adopted_files;        /* segment files the index did not know */
    uint64_t quarantined_files;    /* files with an unreadable header, moved aside */
    uint64_t removed_segments;     /* fully tombstoned segments deleted at open */
    int index_rebuilt;             /* the LMDB index was missing, empty or damaged */
    uint64_t elapsed_ns;
    /* Index rows not trusted: a checksum that fails, a format older than the checksum, or keys
     * that disagree with the file's header. Their files are scanned as if adopted: every entry
     * whose CRC verifies is kept, the boundary the row claimed is not used. */
    uint64_t rows_rejected;
    /* Rows whose entry count says more entries are durable than their boundary covers: the
     * valid entries past the boundary, up to the count, are kept (counted here). */
    uint64_t boundary_entries_kept;
    /* The state journal (delivery counts and tombstones): files read, records that verified and
     * name an entry recovery found (applied), damaged records (skipped: the entry they named
     * keeps a lower state, a redelivery at worst), records of segments that no longer exist
     * (deleted: nothing to apply), records naming no entry of a segment that exists (its entry
     * was damaged or cut), and files no live segment needs (deleted at the first flush). */
    uint64_t journal_files;
    uint64_t journal_records;
    uint64_t journal_damaged_records;
    uint64_t journal_stale_records;
    uint64_t journal_unmatched_records;
    uint64_t journal_retired_files;
    /* Tombstones an index row counted that the scan did not find: lost with journal records (its
     * files deleted or cut under the store, or an OS crash at the process level, whose index is
     * not synced, wrote the index before them; those completed entries come back live and are
     * delivered again, never lost) or with entries in damaged regions (dropped): an upper bound
     * of the completed items that come back; warned per segment. */
    uint64_t tombstones_missing;
} store_recovery_t;

/*
 * Opens (creating if needed) a disk store in cfg->dir and recovers it: every live entry is
 * queued again in its lane, in arrival order, so work pending before a crash is queued again.
 * *out_report (may be NULL) receives what recovery found. *out is freed with store_close.
 * A directory holding segments of another store format (one file per lane, format 1) is refused
 * with STORE_EFORMAT and a log line that names it and says what to do; nothing in it is changed.
 */
store_status_t store_open_disk(const store_disk_config_t *cfg,
                               store_recovery_t *out_report /* out */, store_t **out /* out */);

/*
 * Closes the store and frees everything it owns, pending items included. It does not flush:
 * appends since the last store_flush were never acknowledged and are dropped at the next open,
 * exactly as after a crash. NULL-safe.
 */
void store_close(store_t *store);

/*
 * Writes every append and tombstone since the last flush (the disk store gathers them in
 * memory: nothing reaches a file before this call), makes them durable at the configured
 * level, then advances the readable boundary of each touched segment and records it in the
 * index (one LMDB transaction). Appended items become visible to peek only after this returns
 * STORE_OK. A failure puts the store in its error state (STORE_EIO from then on): a sync that
 * failed is never retried. A segment file deleted or replaced under a running store fails the
 * flush that would write to it, with a log line naming the file. A no-op for the memory store.
 */
store_status_t store_flush(store_t *store);

/* Bytes appended since the last flush (0 for the memory store): callers group-commit with it. */
uint64_t store_unflushed_bytes(const store_t *store);

/*
 * Opens (creating if needed) the queue of one lane. Calling it twice with the same key returns
 * the same queue. *out is owned by the store.
 */
store_status_t store_queue_open(store_t *store, const store_key_t *key,
                                store_queue_t **out /* out */);

/* Releases an empty queue (no queued and no pending items), e.g. when its lane id is freed. */
store_status_t store_queue_release(store_t *store, store_queue_t *queue);

/* Appends at the back of the queue. On success *out_ref names the new item. The disk store
 * reserves the entry's room in its segment file (fallocate, ahead of need) before it says OK,
 * so a full disk refuses this item (STORE_ENOSPC) and nothing else; the bytes are written at
 * the next store_flush. */
store_status_t store_append(store_t *store, store_queue_t *queue, const store_item_t *item,
                            store_ref_t *out_ref /* out, may be NULL */);

/*
 * Peeks at up to `max` items from the front of the queue, in order, changing nothing.
 * `views` is caller memory for `max` entries; *out_n receives how many were filled.
 */
store_status_t store_peek(store_t *store, store_queue_t *queue, store_view_t *views, size_t max,
                          size_t *out_n /* out */);

/*
 * The tokens and delivery counts of up to `max` items from the front of the queue, as
 * store_peek would give them, without reading an entry: what a packer needs to choose how many
 * to take before store_peek reads those (the disk store keeps both in memory; an entry read is a
 * cache miss or more). `tokens` and `deliveries` are caller memory for `max` entries each.
 */
store_status_t store_peek_tokens(store_t *store, store_queue_t *queue, uint32_t *tokens,
                                 uint32_t *deliveries, size_t max, size_t *out_n /* out */);

/*
 * Commits a dispatched batch: the refs must be the current front of one queue, in order.
 * Three steps: (1) check every ref against the queue, changing nothing, so a stale peek fails
 * with STORE_ESTALE and no effect; (2) advance the queue past them; (3) add each to the pending
 * map (never persisted) and count one more delivery. The disk store also writes the new count
 * into each entry's state word before it returns (one submission for the batch; it survives a
 * crash of the process, not a power loss), so after a restart store_peek's deliveries are what
 * was recorded (at most 255) and an item whose batch crashes the daemon reaches its limit.
 */
store_status_t store_commit(store_t *store, store_queue_t *queue, const store_ref_t *refs,
                            size_t n);

/*
 * Completes a pending item. *out_completed (may be NULL) is 1 when this call completed it and
 * 0 when it was already complete (completing twice is harmless and counted once; the disk store
 * knows the items of a deleted segment complete for its last DISK_DELETED_KEEP deletions). A
 * ref that was never committed, or was returned to the queue, gives STORE_ENOTPENDING. The disk
 * store writes the tombstone at the next store_flush (an item completed but not flushed is
 * delivered again after a crash).
 */
store_status_t store_tombstone(store_t *store, store_ref_t ref, int *out_completed /* out */);

/*
 * A hint ahead of store_tombstone(ref), for settling a batch item by item: level 0 asks the cache
 * for what finding ref reads, level 1 (issued later, when level 0 has had time) for what
 * tombstoning it reads behind that. Changes nothing; a backend without a use for it ignores it.
 */
void store_prefetch(const store_t *store, store_ref_t ref, unsigned level);

/*
 * Puts pending items back at the front of their queues, each at its original position relative
 * to the other queued items (arrival order). All-or-nothing: if any ref is not pending, nothing
 * changes and STORE_ENOTPENDING is returned.
 */
store_status_t store_return(store_t *store, const store_ref_t *refs, size_t n);
/*
 * store_return for items whose batch no one received (the transport said it reached no
 * subscriber): each item's delivery count goes back down by one (not below 0, not from the
 * saturated 255). In memory only: the disk store's journal keeps the count its commit wrote, so
 * after a restart such an item may count that delivery (one more, never fewer).
 */
store_status_t store_return_unseen(store_t *store, const store_ref_t *refs, size_t n);

/* Records a lane's target length with its queue (the disk store keeps it in the index, so the
 * lane comes back with the same target after a restart). Written at the next flush. */
store_status_t store_queue_target_set(store_t *store, store_queue_t *queue, uint32_t target);

/*
 * Walks the open queues (after a disk open: every recovered lane), in no particular order.
 * prev NULL starts; returns 0 at the end. out_key->model is a view valid until the store
 * closes. Any out pointer may be NULL.
 */
int store_queue_next(store_t *store, store_queue_t *prev, store_queue_t **out /* out */,
                     store_key_t *out_key /* out */, uint32_t *out_target /* out */);

/*
 * Calls fn for every queued item of the queue, in order, with a view whose payload is not read
 * (payload_view NULL; payload_len is the payload's length); the view is valid for the call only.
 * For rebuilding caches at start (the daemon's dedupe window and queue limits); it reads entry
 * headers, not payloads.
 */
typedef void (*store_scan_fn)(void *ctx, const store_view_t *view);
store_status_t store_queue_scan(store_t *store, store_queue_t *queue, store_scan_fn fn, void *ctx);

/* A hint ahead of store_queue_oldest(queue), for asking it of many queues in turn: level 0 asks
 * the cache for the queue's own record, level 1 (issued later) for its front item's. Changes
 * nothing; a backend without a use for it ignores it. */
void store_queue_prefetch(const store_t *store, const store_queue_t *queue, unsigned level);

/* Arrival time of the queue's front (oldest queued, readable) item; 0 when there is none.
 * O(1), no I/O: the scheduler's starvation bound asks it of every lane. */
int store_queue_oldest(const store_t *store, const store_queue_t *queue,
                       uint64_t *out_arrival_ns /* out */);

/* Queue totals: items and tokens queued (not pending). Either out pointer may be NULL. */
void store_queue_count(const store_queue_t *queue, uint64_t *out_items, uint64_t *out_tokens);

/* Number of pending items across the store. */
uint64_t store_pending_count(const store_t *store);

/* What a store keeps on disk (all 0 for the memory store). */
typedef struct {
    uint64_t segment_files;    /* live segment files */
    uint64_t segment_bytes;    /* bytes written to them, headers included */
    uint64_t journal_files;    /* state journal files kept */
    uint64_t journal_bytes;    /* their sizes (each is allocated whole when created) */
    uint64_t journal_restated; /* segments whose journal records were restated since the open */
    uint64_t written_ahead;    /* times a turn's entries were written ahead of its flush since
                                * the open (store_disk_config_t.spill_bytes) */
} store_usage_t;

/* Fills *out: O(live segments + journal files). */
void store_usage_get(const store_t *store, store_usage_t *out /* out */);

/*
 * The per-model "current shape" field of the storage tier, shared by every consumer of the
 * model. Get succeeds with *out_has = 0 when the model never had one.
 */
store_status_t store_current_shape_set(store_t *store, const char *model, uint64_t signature);
store_status_t store_current_shape_get(store_t *store, const char *model, int *out_has /* out */,
                                       uint64_t *out_signature /* out */);

/*
 * The store's epoch: a number from 1 to STORE_EPOCH_MAX that this call has not returned for this
 * store before. The disk store counts in its index (meta key "epoch", committed before the call
 * returns, durable at the store's level); a missing index (new, or set aside and rebuilt) starts
 * at a random epoch, so a rebuilt index rarely meets one it used before. The memory store counts
 * in the process, from a random start, so it never repeats within a process's life. After
 * STORE_EPOCH_MAX the count starts again at 1. The scheduler puts it in its batch ids, so an id
 * handed out before a restart is not handed out again.
 */
#define STORE_EPOCH_MAX ((1u << 21) - 1u)
store_status_t store_epoch_next(store_t *store, uint32_t *out_epoch /* out */);

/* ---- test-only fault injection (store/disk/fault.c) --------------------------------------------
 */

typedef enum {
    STORE_FAULT_WRITE = 0,
    STORE_FAULT_FSYNC,
    STORE_FAULT_RENAME,
    STORE_FAULT_UNLINK,
    STORE_FAULT_MDB_PUT,
    STORE_FAULT_ALLOC, /* the journal's pwrite buffer (disk_journal.c invariant 6) */
    STORE_FAULT_COUNT
} store_fault_op_t;

/* Makes the nth call of kind `op` from now on fail (nth >= 1; 0 disarms). Process-wide. */
void store_fault_arm(store_fault_op_t op, unsigned long nth);
void store_fault_disarm_all(void);
/* How many faults of kind `op` have fired since the process started. */
unsigned long store_fault_fired(store_fault_op_t op);

#endif
