/*
 * disk_int.h - private to store/disk/: the disk backend's in-memory state, and the layer below both
 * the running backend and recovery, which rebuilds the same state at open.
 *
 * The files of the disk backend:
 *
 *   disk.c         the vtable, open and close, lane-level operations, current shapes
 *   disk_item.c    an item's life: append, peek, commit, tombstone, return, scan
 *   recovery.c     rebuilds the state at open from the index and the segment files
 *   -------------- the layer below, declared here ------------------------------------------
 *   disk_flush.c   the readable boundary: writes the turn's gathered writes, syncs, moves it
 *   disk_restate.c the journal kept bounded while items wait: a waiting segment's states
 *                  written again into the current journal file, so older files can go
 *   disk_journal.c the state journal: delivery counts and tombstones appended as records, its
 *                  files created, synced and deleted once no live segment needs them
 *   disk_seg.c     one segment file of a model's log: create, reserve space, pick for an
 *                  append, gather its writes, mark dirty, doom (delete at the next flush)
 *   disk_map.c     the shared mappings of segment files: reads without a system call, and the
 *                  bound on what they keep resident
 *   disk_fd.c      the cache of open segment descriptors
 *   disk_watch.c   the watch on the segments directory: files deleted or replaced under the store
 *   disk_io.c      the I/O engine: a batch of syncs in flight at once (io_uring), or one system
 *                  call each where io_uring is not available
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
#include "common/pool.h"
#include "store/disk/index_int.h"
#include "store/disk/journal_int.h"
#include "store/disk/segment_int.h"
#include "store/store_int.h"

#include <pthread.h>
#include <sys/uio.h>

typedef struct dseg dseg_t;
typedef struct dqueue dqueue_t;

/* The descriptor cache's size when the configuration leaves it to the store: half the soft
 * RLIMIT_NOFILE (the rest is the process's: NATS sockets, LMDB, logs), at least DISK_FD_MIN
 * and at most DISK_FD_MAX. A working set of thousands of segments (models whose items wait
 * long) then stays open instead of churning (an LRU smaller than a cyclic working set misses on
 * every access). */
#define DISK_FD_MIN 64u
#define DISK_FD_MAX 65536u
/* Segments mapped at once at most: each mapping is one entry of the process's memory map
 * (vm.max_map_count, 65530 by default, shared with malloc, LMDB and the libraries); a segment
 * past the cap is read and written with system calls (as STORE_IO_PLAIN). Logs are per model,
 * so a store holds far fewer live segments than this. */
#define DISK_MAP_MAX 16384u
/* Segments written and synced together by one wave of a flush: beyond a thousand syncs in
 * flight nothing is gained, and a wave must stay under half the descriptor cache. */
#define DISK_WAVE_MAX 1024u
/* Settled items' pending records kept for reuse: a commit takes one per item and a tombstone
 * gives it back, so a malloc and a free per item became an array's pop and push. Enough for a
 * few hundred batches in flight; past it they go back to malloc (32 bytes each and a pointer in
 * the array: 320 KiB at most). */
#define DISK_PEND_KEEP 8192u
/* Segments deleted this run that disk_t.deleted remembers (disk_seg.c invariant 4): the last
 * this many, so a model that drains every few seconds (the idle seal) costs no memory that
 * grows with the run. A late completion of a deleted segment's ref only follows a settled one
 * (the scheduler settles each position once), so no real caller reaches this far back. */
#define DISK_DELETED_KEEP 4096u
/* An arena grown past this is given back once no flush used more than a quarter of it for
 * DISK_ARENA_IDLE_NS: while turns stay large it is kept, since growing it again from nothing
 * copies it once per doubling and faults every page in again; once the load falls it goes.
 * Since a turn's entries are written ahead at DISK_SPILL_BYTES, only entries of megabytes grow
 * it this far. */
#define DISK_ARENA_KEEP (4u << 20)
/* Under a saturating load small turns come between large ones (a turn that drained the event
 * queue leaves the next a few Submits): given back after one small turn, an 8-16 MiB arena was
 * freed and faulted in again six times in one run, a third of the daemon's page faults
 * (docs/throughput.md, "Page faults per item"). A second spans many large turns at any load
 * that grows the arena past DISK_ARENA_KEEP; an idle daemon's flushes (every timer turn) give
 * it back a second after the load stopped. */
#define DISK_ARENA_IDLE_NS 1000000000ull
/* A turn's gathered entry runs are written ahead of its flush once the arena would pass this
 * (disk_flush.c invariant 8): a saturated turn gathers megabytes, and the flush's pwritev then
 * read an arena long gone from the CPU's cache, the kernel's copy into the page cache the
 * largest entry of a perf profile of the daemon. Half the L2 cache of the machines measured on,
 * so the arena and the turn's other data both fit (`perf record` under `lanesched-bench
 * throughput --durability process --no-jetstream --no-fabric --no-client-check --items 600000`,
 * docs/throughput.md, "Writing a turn ahead"). */
#define DISK_SPILL_BYTES (512u << 10)
/* Restating (disk_restate.c) starts only once at least this many journal files older than the
 * current one are kept: below it the journal is a few tens of MiB (8 MiB files) whatever waits,
 * not worth walking a waiting segment's entries on the owner thread. A bound, not a tuned value. */
#define DISK_RESTATE_FILES 4u
/* ... and only when the older files hold at least this many times the records restating writes
 * (one per entry of the segments holding them): the journal then writes at most a quarter more
 * records than the items' own, and keeps at most about this many times 24 bytes per entry of
 * the segments that hold waiting items, however long they wait. */
#define DISK_RESTATE_GAIN 4u
/* Segments whose records are all in the last this many files before the current one are not
 * restated: a model's backlog under a load its workers are behind on fills those, and its
 * segments drain within a few files anyway, so restating them would walk 64 MiB for a file or
 * two (tools/bench/journal_bound.sh: the busy model's segments were restated along with the
 * waiting one without it). Less than DISK_RESTATE_FILES, so restating always frees a file. */
#define DISK_RESTATE_RECENT 2u

typedef struct disk_io disk_io_t;
typedef struct disk_io_op disk_io_op_t;

/* One gathered write of a turn, written at the next flush: a run of entries appended back to
 * back, or the tombstone of one entry (a journal record). Owned by disk_t.writes; chained per
 * segment. */
typedef struct {
    uint64_t off;   /* file offset: of the run, or of the entry tombstoned */
    size_t at;      /* entry runs: where the bytes are in disk_t.arena */
    uint32_t len;   /* bytes of the run, or of the entry */
    uint32_t items; /* entries in the run (0: a tombstone) */
    uint32_t next;  /* the segment's next write, DISK_WRITE_NONE at the end */
} dwrite_t;

/* A journal record waiting to be written (disk_journal.c): encoded when written, under the seed
 * of the journal file it lands in. */
typedef struct {
    dseg_t *seg; /* borrowed */
    jnl_record_t rec;
} dstaged_t;

/* One file of the state journal. Owned by disk_t.jnls. */
typedef struct {
    uint64_t id;
    uint64_t ino;
    int fd;         /* owned; -1 once it takes no more records and needs no sync */
    int needs_sync; /* records stored since its last fdatasync (power level) */
    int written;    /* records stored since the last flush's check (disk_watch.c) */
    int gone;       /* its name was deleted or replaced under the store */
    int doomed;     /* no live segment needs its records: unlinked at the next flush */
    uint64_t bytes; /* its size (store_usage_get) */
} djnl_t;

#define DISK_WRITE_NONE UINT32_MAX

/* One segment file of a model's log. Owned by disk_t.segments; listed (borrowed) by its
 * model's segs and by disk_t.slots. */
struct dseg {
    uint64_t id;
    uint64_t seq; /* order among its model's segments */
    uint64_t created_ns;
    uint32_t model_idx;
    uint32_t slot; /* its index in disk_t.slots: how a queued record names it */
    int fd;        /* owned; -1 while closed by the fd cache */
    uint8_t *map;  /* owned: MAP_SHARED of [0, map_len), or NULL (not mapped: system calls) */
    uint64_t map_len;
    uint64_t *populated; /* owned with map: a bit per chunk populated (disk_map.c) */
    uint64_t pop_tail;   /* ... and how far the chunk the file ends in is */
    uint32_t header_len;
    uint64_t size;     /* bytes written to the file, header included */
    uint64_t readable; /* durable boundary: what the index has recorded as flushed */
    uint64_t entries;  /* valid entries below size */
    uint64_t tokens;
    uint64_t flushed_entries; /* ... and below readable: what the index row says */
    uint64_t flushed_tokens;
    uint64_t deleted;     /* tombstoned entries */
    uint64_t reserved;    /* file bytes reserved ahead of size (fallocate), appends stay within */
    uint64_t ino;         /* inode of the file, to find it deleted or replaced under the store */
    uint64_t jnl_min;     /* the oldest journal holding a record of it (UINT64_MAX: none) */
    uint64_t appended_ns; /* monotonic: its creation, then the last flush that wrote entries */
    uint32_t w_head, w_tail; /* its gathered writes, in disk_t.writes (DISK_WRITE_NONE: none) */
    uint64_t spilled;        /* gathered entries below this were written ahead of the flush */
    int sealed;
    int doomed;         /* fully tombstoned: row deleted and file unlinked at the next flush; out of
                         * every map and list already but the dirty list and its slot */
    int gone;           /* its name was deleted or replaced under the store (disk_watch.c) */
    int written;        /* the flush in progress wrote entries to it */
    int needs_sync;     /* entries written since the last fdatasync */
    int dirty;          /* on the dirty list: index row (and maybe sync) due at the next flush */
    int map_failed;     /* mmap refused it once: system calls from then on */
    int restate_failed; /* a restatement found it inconsistent: never tried again (disk_restate.c)
                         */
    dseg_t *dirty_next; /* borrowed link of disk_t.dirty */
    dseg_t *lru_prev, *lru_next; /* borrowed links of the open-fd list, most recent first */
};

/*
 * A queued item: where its entry is and what the scheduler needs without reading it. 16 bytes;
 * the queue array grows by a quarter, so with its slack a queued item costs at most 20 bytes of
 * memory past the array's first size (exactly 16 right after recovery, which trims), and the
 * payload stays on disk. The item's id, payload, arrival, prefix_tokens and max_wait_ms are read
 * from the entry when peeked; the queue keeps its front's arrival (dqueue_t.head_arrival_ns),
 * the only one asked for without a peek.
 *
 *   +--------+--------+--------+-----------------+
 *   | offset | length | tokens | slot:24 | dlv:8 |
 *   +--------+--------+--------+-----------------+  4 x u32
 *
 * Rejected: the arrival in every record (24 bytes: a third more memory per queued item, for a
 * figure the scheduler reads at a lane's front only); the length read from the entry (the
 * journal's records and the batched reads of unmapped segments need it before any read).
 */
typedef struct {
    uint32_t offset;
    uint32_t length;
    uint32_t tokens;
    uint32_t slot_dlv; /* segment slot << 8 | deliveries (saturating at SEG_DELIVERIES_MAX) */
} drec_t;

#define DISK_SLOT_MAX ((1u << 24) - 1u)

static inline uint32_t drec_slot(const drec_t *r)
{
    return r->slot_dlv >> 8;
}
static inline uint32_t drec_deliveries(const drec_t *r)
{
    return r->slot_dlv & 0xFFu;
}
static inline uint32_t drec_slot_dlv(uint32_t slot, uint32_t deliveries)
{
    return slot << 8 | (deliveries < SEG_DELIVERIES_MAX ? deliveries : SEG_DELIVERIES_MAX);
}

/* A chunk of a segment's mapping populated (disk_map.c): the segment named by its slot
 * and checked by its id (it may have been deleted since). */
typedef struct {
    uint64_t seg_id;
    uint32_t slot;
    uint32_t chunk;
} dresident_t;

/* A committed item: its record and its queue. Owned by disk_t.pending. */
typedef struct {
    drec_t rec;
    dqueue_t *q; /* borrowed */
} dpend_t;

/* A lane queue. Owned by disk_t (the `all` list; disk_t.queues maps to it). */
struct dqueue {
    struct store_queue base;
    const char *model; /* view: interned in disk_t.models */
    uint64_t signature;
    uint32_t lane;
    uint32_t model_idx;
    uint32_t target;
    int target_dirty;
    int indexed;  /* the index holds its lane row (read at the open, or written by a flush) */
    drec_t *recs; /* owned: queued items, recs[head .. head+len), ascending (segment seq, offset) */
    size_t head, len, cap;
    size_t n_unflushed;            /* the last n_unflushed of them are past the readable boundary */
    uint64_t head_arrival_ns;      /* the arrival of recs[head] (when len > 0) */
    uint64_t unflushed_arrival_ns; /* ... of the first unflushed one (when n_unflushed > 0) */
    int on_flush;         /* on disk_t.flush_queues: unflushed records or a target to write */
    dqueue_t *flush_next; /* borrowed link of disk_t.flush_queues */
    dqueue_t *all_next, *all_prev; /* borrowed links of disk_t.all */
};

/* A model: its name, its current shape and its log. */
typedef struct {
    char *name; /* owned */
    int has_current;
    int current_dirty;
    uint64_t current;
    dseg_t **segs; /* owned array of borrowed segments: its live ones, ascending sequence; only
                    * the last may be unsealed (the one appends go to) */
    size_t n_segs, cap_segs;
    uint64_t next_seq;
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
    index_t *index; /* owned */
    int failed;     /* sticky error state: nothing more is acknowledged */
    map_t queues;   /* (signature, model_idx << 32 | lane) -> dqueue_t, borrowed from `all` */
    map_t segments; /* (id, 0) -> dseg_t, owned */
    map_t deleted;  /* (id, 0) -> final size + 1, as a pointer: segments deleted this run */
    uint64_t *deleted_ids; /* owned: deleted's ids, oldest first (disk_seg_forget) */
    size_t n_deleted_ids, cap_deleted_ids;
    map_t pending;    /* (segment id, offset) -> dpend_t, owned (from pend_pool) */
    pool_t pend_pool; /* owned: freed dpend_t kept for the next commit (DISK_PEND_KEEP) */
    dqueue_t *all;    /* owned list of every queue */
    dmodel_t *models; /* owned array */
    size_t n_models;
    dseg_t **slots; /* owned array of borrowed segments (live and doomed), by slot; NULL: free */
    uint32_t n_slots, cap_slots;
    uint32_t *free_slots; /* owned: slots to hand out again */
    uint32_t n_free_slots, cap_free_slots;
    dlane_key_t *released; /* owned: lanes released since the last flush, rows to delete */
    size_t n_released;
    dseg_t *dirty;               /* borrowed list of segments due at the next flush */
    dqueue_t *flush_queues;      /* borrowed list of queues due at the next flush */
    dseg_t *lru_head, *lru_tail; /* borrowed list of the segments with an open fd */
    unsigned open_fds;
    unsigned fd_cache_max; /* open descriptors kept at most (DISK_FD_MIN .. DISK_FD_MAX) */
    unsigned mapped;       /* segments with a mapping (at most DISK_MAP_MAX) */
    dresident_t *resident; /* owned ring: populated chunks, oldest first (disk_map.c) */
    size_t resident_head, n_resident, cap_resident;
    int populate_unsupported; /* the kernel has no MADV_POPULATE_READ */
    uint64_t page_bytes;      /* the system's page size, read once at open */
    disk_io_t *io;            /* owned */
    uint8_t *arena;           /* owned: the bytes of the turn's appended entries */
    size_t arena_len, arena_cap;
    uint64_t arena_busy_ns; /* the last flush that used more than a quarter of the arena */
    dwrite_t *writes;       /* owned: the turn's gathered writes */
    size_t n_writes, cap_writes;
    disk_io_op_t *ops; /* owned: a flush's syncs */
    size_t cap_ops;
    dseg_t **wave;      /* owned array of borrowed segments: a flush's wave (disk_wave_max) */
    unsigned dir_dirty; /* segment files created or unlinked since the directory was last synced */
    int watch_fd;       /* owned: inotify on the segments directory, -1 without one */
    int reserve_unsupported; /* the file system has no fallocate: appends are written at once */
    uint64_t next_segment_id;
    int meta_dirty;
    int rows_dirty; /* some model's current_dirty is set */
    uint64_t unflushed_bytes;
    uint8_t *scratch; /* owned: peek reads and append encoding (the system-call path) */
    size_t scratch_cap;
    /* The state journal (disk_journal.c). */
    int jnl_dir_fd;
    djnl_t *jnls; /* owned array, ascending id: every journal file kept; the last one takes the
                   * records when jnl_live */
    size_t n_jnls, cap_jnls;
    int jnl_live;      /* the last of jnls is this run's current journal */
    uint8_t *jnl_map;  /* owned: MAP_SHARED of the current journal, or NULL (pwrite) */
    uint64_t jnl_size; /* the current journal's file bytes */
    uint64_t jnl_pos;  /* where its next record goes */
    uint32_t jnl_seed;
    dstaged_t *staged; /* owned: records to write (disk_jnl_stage) */
    size_t n_staged, cap_staged;
    uint8_t *jnl_buf; /* owned: encoded records of the pwrite path */
    size_t cap_jnl_buf;
    unsigned jnl_dir_dirty;  /* journal files created or unlinked since the directory was synced */
    int jnl_retire;          /* segments were deleted or a journal filled: some may be retired */
    uint64_t jnl_pin_below;  /* a journal filled: current segments with records in files below
                              * this id are sealed at the next flush (disk_seg_idle_seal); 0 none */
    uint64_t idle_next_ns;   /* monotonic: the next look for idle drained current segments */
    int jnl_doomed;          /* some journal is doomed: unlinked at the next flush */
    int jnl_rotated;         /* a journal file filled since the last flush looked: restating
                              * may be due (disk_restate.c) */
    uint64_t restate_below;  /* restating the sealed segments with records in journal files below
                              * this id, one a flush; 0 none */
    uint64_t restated;       /* segments restated since the open (store_usage_get) */
    uint64_t written_ahead;  /* disk_flush_spill calls since the open (store_usage_get) */
    dseg_t *restating;       /* borrowed: the segment whose records this flush staged, or NULL */
    uint64_t restate_from;   /* ... the current journal file when they were staged */
    size_t restate_records;  /* ... how many */
    uint64_t restate_ns;     /* ... how long staging them took */
    pthread_mutex_t *log_mu; /* borrowed: held around each log line while recovery's scans run
                              * on several threads (recovery.c); NULL otherwise */
} disk_t;

static inline disk_t *disk_of(store_t *s)
{
    return (disk_t *)s;
}

/* Segments in one wave of a flush (the size of disk_t.wave). */
static inline size_t disk_wave_max(const disk_t *d)
{
    return d->fd_cache_max / 2 < DISK_WAVE_MAX ? d->fd_cache_max / 2 : DISK_WAVE_MAX;
}

/* The pending map's key of an entry. */
static inline map_key_t disk_ref_key(uint64_t seg_id, uint64_t offset)
{
    return (map_key_t){seg_id, offset};
}

/* The segment a record's entry is in. */
static inline dseg_t *disk_rec_seg(const disk_t *d, const drec_t *r)
{
    return d->slots[drec_slot(r)];
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
/* The same for an interned model. */
store_status_t disk_queue_get_idx(disk_t *d, uint32_t model_idx, uint64_t signature, uint32_t lane,
                                  dqueue_t **out /* out */);
/* Puts q on the list of queues the next flush visits (unflushed records, a target to write). */
void disk_queue_mark_flush(disk_t *d, dqueue_t *q);
/* Room for `extra` more records after the last. */
store_status_t disk_queue_reserve(dqueue_t *q, size_t extra);
/* Appends a copy of *rec, whose entry arrived at arrival_ns, and counts it as queued. */
store_status_t disk_queue_push(dqueue_t *q, const drec_t *rec, uint64_t arrival_ns);
/* The arrival of a readable record's entry, from its mapping or a read of its header (a failed
 * read fails the store). */
store_status_t disk_rec_arrival(disk_t *d, const drec_t *rec, uint64_t *out_ns /* out */);
/* Index of the first queued record not before (seg, offset). */
size_t disk_queue_lower_bound(const disk_t *d, const dqueue_t *q, const dseg_t *seg,
                              uint64_t offset);
/* The queued record of the entry at (seg, offset), e read from it (its lane is the entry's own),
 * or NULL when its lane does not hold it: every live entry is queued or pending, so an entry
 * neither queued nor pending was completed. A view into the queue, valid until it changes. */
const drec_t *disk_queue_find(const disk_t *d, const dseg_t *seg, uint64_t offset,
                              const seg_entry_t *e);
/* Frees the array's slack (after recovery, which knows the final sizes). */
void disk_queue_trim(dqueue_t *q);
/* Frees q and its array. */
void disk_queue_free(dqueue_t *q);
/* Drops q from d's map and lists and frees it (it must hold no record). */
void disk_queue_destroy(disk_t *d, dqueue_t *q);

/* ---- disk_map.c: shared mappings of segment files ------------------------------------------ */

/* The bytes [off, off + len) of seg, readable below its size: a view into its mapping (mapped
 * on first use), or NULL when the segment is not mapped (STORE_IO_PLAIN, the cap, or a refused
 * mmap): the caller reads with a system call. Counts what it hands out towards the resident
 * bound. */
const uint8_t *disk_map_view(disk_t *d, dseg_t *seg, uint64_t off, uint64_t len);
/* Unmaps seg (at its deletion or close). */
void disk_map_drop(disk_t *d, dseg_t *seg);
/* After a flush: drops from the process the chunks populated longest ago until at most
 * resident_bytes stay (the page cache keeps the pages; a later access populates them again). */
void disk_map_trim(disk_t *d);

/* ---- disk_fd.c: the descriptor cache -------------------------------------------------------- */

/* Sizes the cache from the configuration or RLIMIT_NOFILE (see DISK_FD_MIN). */
void disk_fd_limit_init(disk_t *d);
/* Closes least recently used descriptors until one more fits the cache (fd_cache_max). */
store_status_t disk_fd_make_room(disk_t *d);
/* Hands an open descriptor (taken) to the cache, after disk_fd_make_room. */
void disk_fd_attach(disk_t *d, dseg_t *seg, int fd);
/* The segment's descriptor (a view: owned by the cache), opened on demand. */
store_status_t disk_fd_get(disk_t *d, dseg_t *seg, int *out_fd /* out */);
/* Closes the segment's descriptor if it has one. */
void disk_fd_close(disk_t *d, dseg_t *seg);

/* ---- disk_seg.c: segment files -------------------------------------------------------------- */

/* The next segment or journal id into *out_id, not yet taken: the caller advances
 * next_segment_id once the file exists. STORE_EIO (the store fails) when the counter reached
 * the last id, which is never handed out. */
store_status_t disk_seg_id_draw(disk_t *d, uint64_t *out_id /* out */);
/* Lists seg (taken: owned by d->segments from then on) under its model (seg->model_idx), in
 * sequence order, and gives it a slot. */
store_status_t disk_seg_attach(disk_t *d, dseg_t *seg);
/* Closes seg's descriptor and frees it; it must be out of every list and map first. */
void disk_seg_free(disk_t *d, dseg_t *seg);
/* Puts seg on the dirty list: its index row is written at the next flush. */
void disk_seg_mark_dirty(disk_t *d, dseg_t *seg);
/* Makes sure the file has room for `size` more bytes past seg->size (reserved with fallocate
 * ahead of the appends): STORE_ENOSPC, with nothing changed, when the disk is full. */
store_status_t disk_seg_reserve(disk_t *d, dseg_t *seg, uint64_t size);
/* Gathers an entry of `len` bytes for seg at seg->size, written at the next flush: *out_buf is
 * where the caller encodes it (a view into disk_t.arena, valid until the next gather). */
store_status_t disk_seg_gather_entry(disk_t *d, dseg_t *seg, uint32_t len,
                                     uint8_t **out_buf /* out */);
/* Gathers the tombstone of the entry of `len` bytes at `off` of seg, written to the journal at
 * the next flush. */
store_status_t disk_seg_gather_tomb(disk_t *d, dseg_t *seg, uint64_t off, uint32_t len);
/* Is a tombstone for the entry at `off` among seg's gathered writes? */
int disk_seg_gathered_tomb(const disk_t *d, const dseg_t *seg, uint64_t off);
/* Reads and checks the readable entry at `off` of seg: 1 and *out when it is one whose CRC
 * verifies, 0 when it is not one (a length out of bounds, a CRC that fails), -1 when it could not
 * be read (a descriptor, a pread, memory for scratch); out untouched but at 1. Through the
 * mapping, or two preads into disk_t.scratch without one. */
int disk_seg_entry_read(disk_t *d, dseg_t *seg, uint64_t off, seg_entry_t *out /* out */);
/* Room for `need` bytes in disk_t.scratch (peek reads, appends encoded for the system calls). */
store_status_t disk_scratch_reserve(disk_t *d, size_t need);
/* The index row of seg at its readable boundary. */
index_segment_row_t disk_seg_row(const disk_t *d, const dseg_t *seg);
/* The segment of the model's log the next entry of `size` bytes goes to, rolling over at the
 * size cap. */
store_status_t disk_seg_pick(disk_t *d, uint32_t model_idx, uint64_t size, dseg_t **out /* out */);
/* Dooms a sealed, fully tombstoned segment: out of its model's list and the segment map now;
 * its row is deleted and its file unlinked by the next flush, which then frees seg. */
store_status_t disk_seg_delete(disk_t *d, dseg_t *seg);
/* Every entry of seg completed, and everything appended to it flushed. */
static inline int disk_seg_drained(const dseg_t *seg)
{
    return seg->deleted == seg->entries && seg->size == seg->readable;
}
/* Invariant 4 of disk_seg.c: forgets all but the last DISK_DELETED_KEEP deleted segments; after
 * a flush's commit, when none of them is doomed any more. */
void disk_seg_forget(disk_t *d);
/* Seals seg (a model's last, unsealed segment) and deletes it when nothing in it is live. */
store_status_t disk_seg_seal(disk_t *d, dseg_t *seg);
/* Invariant 8 of disk_seg.c, at the start of a flush at monotonic time now. */
store_status_t disk_seg_idle_seal(disk_t *d, uint64_t now);
/* Unlinks a doomed segment's file (after the flush's index commit) and frees seg, also when
 * the unlink fails (the store is then failed, and recovery deletes the file). */
store_status_t disk_seg_unlink(disk_t *d, dseg_t *seg);
/* Syncs the segments directory (after a create, rename or unlink in it). `changes` is how many
 * entries the sync makes durable (at least 1): a fault armed on syncs counts each as its own
 * sync, as when every create was followed by one. */
store_status_t disk_fsync_dir(disk_t *d, unsigned changes);

/* ---- disk_flush.c: the readable boundary ---------------------------------------------------- */

/* store_flush of the disk backend. */
store_status_t disk_flush(disk_t *d);
/* Writes the turn's gathered entry runs ahead of its flush (disk_flush.c invariant 8); the
 * boundaries do not move. */
store_status_t disk_flush_spill(disk_t *d);
/* Frees the turn's gathered writes and doomed segments without writing them (close). */
void disk_flush_discard(disk_t *d);
/* Writes iov[0 .. n) back to back from off, finishing short writes and retrying EINTR; 0 or an
 * errno (ENOSPC for a write of nothing). iov is borrowed and advanced past what was written. */
int disk_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off);

/* ---- disk_restate.c: the journal bounded while items wait ----------------------------------- */

/* At a flush, before its journal write: decides whether restating is due (after a journal file
 * filled) and stages the records of at most one segment (disk_jnl_write writes them). Never
 * fails: a segment it cannot restate is logged and left as it is, one refused memory is tried
 * again at the next flush. */
void disk_restate_begin(disk_t *d);
/* After that write (and at the power level its sync) succeeded: the segment needs only the files
 * from the one its records went to (disk_restate.c invariant 2). */
void disk_restate_commit(disk_t *d);
/* After it failed: the records were dropped, nothing changes. */
void disk_restate_abort(disk_t *d);

/* ---- disk_journal.c: the state journal ------------------------------------------------------ */

/* The journal file size when the configuration leaves it to the store. */
#define DISK_JNL_DEFAULT_BYTES (8u << 20)

/* Opens the journal directory (creating it) into d->jnl_dir_fd. */
store_status_t disk_jnl_dir_open(disk_t *d);
/* Lists a journal file recovery found (it takes no more records). */
store_status_t disk_jnl_adopt(disk_t *d, uint64_t id);
/* Stages the record of a new state of the entry of `len` bytes at `off` of seg (borrowed until
 * disk_jnl_write, which writes or drops it). Nothing is written until then. */
store_status_t disk_jnl_stage(disk_t *d, dseg_t *seg, uint64_t off, uint32_t len, uint32_t state);
/* Writes every staged record at the end of the journal (through its mapping: no system call;
 * or one pwrite per file), starting a new file when the current one is full. Fails the store,
 * saying `what`, on an error or a fault armed on writes (one per record);
 * the staged records are dropped either way. */
store_status_t disk_jnl_write(disk_t *d, const char *what);
/* Power level: puts in ops (room for disk_jnl_sync_max, borrowed) the fdatasync of every
 * journal file with records not yet synced, and how many into *out_n. Fails the store on a fault
 * armed on syncs (out_n untouched). */
size_t disk_jnl_sync_max(const disk_t *d);
store_status_t disk_jnl_sync_ops(disk_t *d, disk_io_op_t *ops, size_t *out_n /* out */);
/* After those syncs succeeded: files rotated away are closed; the directory is synced if files
 * were created in it or unlinked from it. */
store_status_t disk_jnl_synced(disk_t *d);
/* Dooms the journal files no live segment needs (older than every live segment's jnl_min), when
 * segments were deleted or a file filled since the last call. */
void disk_jnl_retire(disk_t *d);
/* Unlinks the doomed journal files (at a flush, after the segments directory's sync). */
store_status_t disk_jnl_unlink_doomed(disk_t *d);
/* The journal file of an id, or NULL. */
djnl_t *disk_jnl_find(disk_t *d, uint64_t id);
/* Closes and frees every journal file's state (close). */
void disk_jnl_close(disk_t *d);

/* ---- disk_watch.c: segment files deleted or replaced under the store ----------------------- */

/* Starts the watch on the segments directory (d->watch_fd, -1 when inotify is not available:
 * fstat checks instead). */
void disk_watch_open(disk_t *d);
/* Adds <data dir>/<sub> (borrowed) to the watch (the journal directory, once it exists). */
void disk_watch_add(disk_t *d, const char *sub);
void disk_watch_close(disk_t *d);
/* After a flush's writes, before its commit: fails the store when a segment or a journal file it
 * wrote to is gone (deleted, renamed away or over). */
store_status_t disk_watch_check(disk_t *d);

/* ---- disk_io.c: the I/O engine -------------------------------------------------------------- */

typedef enum {
    DISK_IO_WRITE = 0, /* pwrite of buf[0 .. len) at off */
    DISK_IO_SYNC,      /* fdatasync */
    DISK_IO_SYNCFS,    /* syncfs of the file system holding fd */
} disk_io_kind_t;

/* One operation of a batch. buf is borrowed until disk_io_run returns. */
struct disk_io_op {
    disk_io_kind_t kind;
    int fd;
    const void *buf;
    uint32_t len;
    uint64_t off;
    int res; /* out: 0, or a positive errno */
};

/* Sets up the engine for cfg.io (STORE_IO_AUTO: io_uring when the kernel allows it). */
store_status_t disk_io_open(disk_t *d, disk_io_t **out /* out */);
void disk_io_close(disk_io_t *io);
/* Runs ops[0 .. n) together and waits for all of them; each op's res says how it went. The
 * operations of one call may run in any order relative to each other: syncs come in a call of
 * their own, after the writes they cover returned. */
void disk_io_run(disk_io_t *io, disk_io_op_t *ops, size_t n);

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
