/*
 * recovery_scan_int.h - private to store/disk/recovery*.c: one segment file as recovery found it,
 * the state journal's records sorted per segment file (recovery_journal.c), the scan that
 * queues its entries (recovery_scan.c), for recovery.c, and how recovery opens a file it found.
 */
#ifndef LANESCHED_RECOVERY_SCAN_INT_H
#define LANESCHED_RECOVERY_SCAN_INT_H

#include "store/disk/disk_int.h"

#include <sys/stat.h>

/* A journal record of a segment file, as the scan applies it: the rank of the state it names
 * (seg_state_rank) for the entry at offset of that length. */
typedef struct {
    uint32_t offset;
    uint32_t length;
    uint32_t rank;
} rec_jrec_t;

/* A segment file found on disk, before it is scanned. */
typedef struct {
    uint64_t id;
    seg_header_t header;
    uint32_t model_idx; /* the header's model, interned */
    /* The index's row for it when the row can be used: its CRC verified (or it predates
     * CRCs) and its keys agree with the header. NULL: scanned as if the index did not know
     * it. Borrowed from the loader's row array. */
    const index_segment_row_t *row;
    int row_rejected; /* the index had a row for it that could not be used */
    uint64_t file_size;
    uint64_t ino;
    /* The journal's records naming this file, ascending offset (borrowed from rec_journal_t),
     * and the oldest journal file holding one (UINT64_MAX: none). */
    const rec_jrec_t *jrecs;
    size_t n_jrecs;
    uint64_t jnl_min;
    dseg_t *seg; /* borrowed: attached to d by rec_attach, which owns it from then on */
} rec_file_t;

/* The journal files found (ids ascending) and their records, sorted per segment file. Owned by
 * the caller (rec_journal_list, then rec_journal_fini). */
typedef struct {
    uint64_t *ids; /* owned */
    size_t n_ids;
    uint32_t foreign_version; /* a journal file of another format, 0 if none */
    uint64_t foreign_id;
    rec_jrec_t *recs; /* owned: every file's records, back to back */
} rec_journal_t;

/* Opens name (borrowed) in dirfd with flags (O_RDONLY or O_RDWR) if it is a regular file, and
 * returns the descriptor (returned to the caller to close), *sb its fstat. -1 with *regular 0:
 * gone, or a link, FIFO, socket, device or directory (never left open; *sb untouched); -1 with
 * *regular 1: a regular file that could not be opened (errno). */
int rec_regular_open(int dirfd, const char *name, int flags, int *regular /* out */,
                     struct stat *sb /* out */);

/* Lists the journal files and checks their headers' format; changes nothing. */
store_status_t rec_journal_list(disk_t *d, rec_journal_t *j);
/* Reads every record of the listed journal files, keeps those naming one of files[0 .. n) (sorted
 * as the scans will run) and hands each file its records, sorted by offset. Counts damaged and
 * stale records in *rep. */
store_status_t rec_journal_load(disk_t *d, rec_journal_t *j, rec_file_t *files, size_t n,
                                store_recovery_t *rep);
void rec_journal_fini(rec_journal_t *j);

/*
 * The lanes recovery has met, and the entries of the file being scanned waiting to be queued.
 * While the lanes met are few, a scan pushes each live entry onto its lane's queue. Past
 * REC_DIRECT_LANES it notes each entry with its lane's number (a hash table the size of the
 * lanes, instead of the queue map and queue structures per entry), then queues the noted
 * entries lane by lane: each lane's array grown once per chunk, its records written in file
 * order.
 * Owned by the caller (rec_lanes_init / rec_lanes_fini), shared by the scans of one recovery.
 */
typedef struct {
    uint64_t signature;
    uint32_t lane;
    uint32_t model_idx;
    uint32_t idx; /* + 1: 0 marks an empty slot */
} rec_lane_slot_t;

typedef struct {
    dqueue_t *q;         /* borrowed */
    uint32_t n;          /* entries noted and not yet queued */
    uint32_t max_tokens; /* the longest entry queued in the lane (its target's floor) */
    uint64_t tokens;     /* tokens of the n entries */
    drec_t *dest;        /* where the next of them goes in q->recs */
} rec_lane_t;

typedef struct {
    uint32_t lane; /* index into lanes */
    drec_t rec;
} rec_item_t;

/* An entry whose lane is being looked up: its slot prefetched, resolved REC_PENDING at a time
 * so that the lookups' cache misses overlap. */
typedef struct {
    uint64_t signature;
    uint32_t lane;
    uint32_t model_idx;
    drec_t rec;
    uint64_t arrival_ns;
} rec_pending_t;

#define REC_PENDING 16u
#define REC_FRONT   64u

/* Up to this many lanes, a scan pushes each entry onto its lane's queue at once (the queues'
 * ends stay in the cache); past it, entries are noted and queued lane by lane. */
#define REC_DIRECT_LANES 64u

typedef struct {
    rec_lane_slot_t *slots; /* owned; cap slots, a power of two */
    size_t cap;
    rec_lane_t *lanes; /* owned */
    size_t n_lanes, cap_lanes;
    uint32_t *touched; /* owned: the lanes the current file has entries of */
    size_t n_touched;
    rec_item_t *items; /* owned: REC_NOTED_MAX live entries, in file order */
    size_t n_items;
    rec_pending_t pending[REC_PENDING]; /* the entries after the noted ones, in file order */
    size_t n_pending;
    rec_lane_slot_t front[REC_FRONT]; /* recent lanes by a cheap hash: most lookups of a few
                                       * lanes end here */
    pthread_mutex_t *mu; /* borrowed: held to create a queue when scans of several threads share
                          * the store; NULL for a scan alone */
} rec_lanes_t;

/* Entries noted before they are queued: enough that a lane's array grows once for many of its
 * entries even with tens of thousands of lanes (32 MiB of notes at most per recovery thread,
 * freed after the open; the pages a scan never reaches are never touched).
 * Chosen with lanesched-storebench --phases recovery --models 2 --shapes 64 --lanes 200
 * (docs/store.md). */
#define REC_NOTED_MAX 1048576u

void rec_lanes_fini(rec_lanes_t *l);

/* Attaches f's segment to d as its header describes it, no entry read yet (f->seg; d owns it
 * from here). Recovery attaches every file before any scan, on one thread. */
store_status_t rec_attach(disk_t *d, rec_file_t *f);

/* recovery_threads.c: the threads recovery may use (cfg.recovery_threads, 0 for the default; 1
 * while a fault hook is armed), and running parts[0 .. n) (each `size` bytes) with fn, part 0
 * on this thread and the others on threads of their own, log lines one at a time meanwhile;
 * every part has run when it returns. n is at most rec_threads(d). */
unsigned rec_threads(const disk_t *d);
void rec_parts_run(disk_t *d, void *(*fn)(void *), void *parts, size_t size, size_t n);

/* Scans f's file into its attached segment: queues its live entries under their lane, repairs
 * what it may (cut torn tails, count tombstones) and records every dropped byte in *rep.
 * Touches only f's segment, the queues of f's model and *lanes, and creates queues under
 * lanes->mu: scans of files of different models may run on different threads. */
store_status_t rec_scan(disk_t *d, rec_lanes_t *lanes, rec_file_t *f, store_recovery_t *rep);

#endif
