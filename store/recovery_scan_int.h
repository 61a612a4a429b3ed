/*
 * recovery_scan_int.h - private to store/recovery*.c: one segment file as recovery found it,
 * and the scan that queues its entries (recovery_scan.c), for recovery.c.
 */
#ifndef LANESCHED_RECOVERY_SCAN_INT_H
#define LANESCHED_RECOVERY_SCAN_INT_H

#include "store/disk_int.h"

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
} rec_file_t;

/* Lane queues recently met by the scan, by (signature, lane): a direct-mapped cache in front of
 * the queue map. Caller memory, zeroed before the first scan; valid across scans (a slot names
 * the model too). */
#define REC_CACHE_BITS 12
typedef struct {
    uint64_t signature;
    uint32_t lane;
    uint32_t model_idx;
    dqueue_t *q; /* borrowed; NULL: empty slot */
} rec_cache_slot_t;
typedef struct {
    rec_cache_slot_t slots[1u << REC_CACHE_BITS];
} rec_cache_t;

/* Scans f's file, queues its live entries under their lane, repairs what it may (cut torn
 * tails, count tombstones) and records every dropped byte in *rep. The segment is attached to
 * d (owned by it) before its entries are queued, whatever the scan returns. */
store_status_t rec_scan(disk_t *d, rec_cache_t *cache, rec_file_t *f, store_recovery_t *rep);

#endif
