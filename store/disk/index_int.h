/*
 * index_int.h - private to store/disk/: the LMDB index of the disk store.
 *
 * One LMDB environment in <data dir>/index with four named databases:
 *
 *   segments  key: segment id, u64 big-endian (so a cursor walks ids in order)
 *             value (little-endian), one row per segment file of a model's log:
 *               0 sequence u64 | 8 created_ns u64 | 16 entries u64 | 24 tokens u64 |
 *               32 readable u64 (durable boundary, bytes) | 40 deleted u64 |
 *               48 flags u32 (bit 0: sealed) | 52 model_len u32 | 56 model bytes | crc32c u32
 *   lanes     key: model bytes || 0x00 || signature u64 BE || lane u32 BE
 *             value: target u32 LE (tokens) | crc32c u32
 *   current   key: model bytes; value: signature u64 LE (the model's current shape) | crc32c u32
 *   meta      key: "next_segment_id"; value: u64 LE | crc32c u32
 *             key: "epoch"; value: u32 LE (opens counted, store_epoch_next) | crc32c u32
 *             key: "format"; value: u32 LE (INDEX_FORMAT) | crc32c u32
 *
 * Every value ends with the CRC-32C of the key's bytes followed by the value's bytes before the
 * CRC, so a row is checked whole and a row cannot be moved under another key unnoticed. Values
 * of the lanes, current and meta tables without the CRC (the length an older version wrote) are
 * read as legacy rows. A segment row in store format 1's layout (one per lane: its signature
 * and lane at 8 and 56, its model at 68; with or without the CRC) is recognised only so that
 * recovery can refuse the directory (INDEX_ROW_FORMAT_LANE).
 *
 * The segments are the source of truth; the index makes recovery fast and holds the durable
 * boundary (bytes past it were never acknowledged) and the lane targets. A missing or
 * unreadable index is set aside and rebuilt from the segment files; a row that fails its CRC
 * or its bounds is handed to the loader as damaged (a segment row: recovery scans that file as
 * if the index did not know it) or rejected (the other tables: dropped), never trusted.
 *
 * Ownership: index_open's *out is returned to the caller, freed with index_close; a transaction
 * from index_begin is owned by the index until index_commit or index_abort ends and frees it
 * (abort is NULL-safe). Every other pointer is borrowed for the call. What index_load passes
 * to the visitor is valid for the callback only: the row a copy on the loader's stack, model
 * strings views into LMDB's map; a callback copies what it keeps.
 */
#ifndef LANESCHED_INDEX_INT_H
#define LANESCHED_INDEX_INT_H

#include "common/status.h"
#include "store/disk/segment_int.h"
#include "store/store_int.h"

#include <lmdb.h>

/* Least index file space reserved at open (see index_preallocate): 256 LMDB pages, room for
 * a few thousand segment rows, small enough for a tiny data volume. */
#define INDEX_PREALLOC_BYTES (1ull << 20)

#define INDEX_STATUS_MAP(X)            \
    X(INDEX_OK, "ok")                  \
    X(INDEX_ENOMEM, "out of memory")   \
    X(INDEX_ELMDB, "LMDB call failed") \
    X(INDEX_EDAMAGED, "index content is not readable")

STATUS_ENUM(index_status_t, INDEX_STATUS_MAP, INDEX_STATUS_COUNT);

const char *index_status_str(index_status_t status);

typedef struct index index_t;
typedef struct index_txn index_txn_t;

/* The store format the index records (meta key "format"), the segment files' SEG_VERSION. */
#define INDEX_FORMAT SEG_VERSION

/* How far a segment row can be trusted. */
typedef enum {
    INDEX_ROW_CHECKED = 0, /* its CRC verified and its fields are within bounds */
    INDEX_ROW_DAMAGED,     /* CRC or bounds fail: only segment_id (from the key) is known */
    INDEX_ROW_FORMAT_LANE, /* a row of store format 1 (one file per lane): never used */
} index_row_trust_t;

typedef struct {
    uint64_t segment_id;
    index_row_trust_t trust;
    uint64_t sequence;
    uint64_t created_ns;
    uint64_t entries;
    uint64_t tokens;
    uint64_t readable;
    uint64_t deleted;
    int sealed;
    char model[SEG_MODEL_MAX + 1];
} index_segment_row_t;

/* Callbacks for index_load; each row is a copy the callback may keep. Return nonzero to stop
 * (the load then fails with INDEX_ENOMEM). `rejected` hears of every row that cannot be used
 * at all (table name and why; static strings). */
typedef struct {
    int (*segment)(void *ctx, const index_segment_row_t *row);
    int (*lane)(void *ctx, const char *model, uint64_t signature, uint32_t lane, uint32_t target);
    int (*current)(void *ctx, const char *model, uint64_t signature);
    void (*rejected)(void *ctx, const char *table, const char *why);
    void *ctx;
    uint64_t next_segment_id; /* out: 0 when the meta row is missing or rejected */
    int has_meta;             /* out: a meta row was found and accepted */
    uint32_t format;          /* out: the meta "format" row, 0 when missing or rejected */
} index_visitor_t;

/*
 * Opens the environment in `path` (created if missing). `nosync`: commits hand data to the
 * kernel but do not fsync (survives a process crash, not power loss). On failure *out is
 * untouched and *out_lmdb_rc (may be NULL) has LMDB's code.
 */
index_status_t index_open(const char *path, uint64_t map_bytes, int nosync, index_t **out /* out */,
                          int *out_lmdb_rc /* out */);
void index_close(index_t *index);

/* Reads every row through the visitor. A row that does not decode is handed over as damaged or
 * rejected (the visitor's comment), never fails the load; INDEX_EDAMAGED when LMDB itself finds
 * its pages corrupt, INDEX_ELMDB for any other LMDB failure (out of readers, memory, ...). */
index_status_t index_load(index_t *index, index_visitor_t *visitor);

/* Decodes a segment row from its key and value bytes (any bytes: a fuzzer's entry point).
 * *out gets the row with its trust; 0 when the key is not a segment id at all (out untouched). */
int index_segment_row_decode(const uint8_t *key, size_t key_len, const uint8_t *val, size_t val_len,
                             index_segment_row_t *out /* out */);

/* 1 when rc (from index_open or LMDB) says the index's files are damaged (set aside and
 * rebuild); 0 for what an operator must fix (permissions, a read-only file system, no space,
 * too many open files...), where the index is left as it is and the open fails. */
int index_rc_is_damage(int rc);

/* One write transaction; every put/del below goes into it. Commit or abort ends it. */
index_status_t index_begin(index_t *index, index_txn_t **out /* out */);
index_status_t index_commit(index_txn_t *txn);
void index_abort(index_txn_t *txn);

index_status_t index_segment_put(index_txn_t *txn, const index_segment_row_t *row);
index_status_t index_segment_del(index_txn_t *txn, uint64_t segment_id);
index_status_t index_lane_put(index_txn_t *txn, const char *model, uint64_t signature,
                              uint32_t lane, uint32_t target);
index_status_t index_lane_del(index_txn_t *txn, const char *model, uint64_t signature,
                              uint32_t lane);
index_status_t index_current_put(index_txn_t *txn, const char *model, uint64_t signature);
/* The meta rows of a flush: next_segment_id and the format (INDEX_FORMAT). */
index_status_t index_meta_put(index_txn_t *txn, uint64_t next_segment_id);

/* Counts one more epoch in the meta database (key "epoch": u32 LE) in a transaction of its own
 * and returns it (1 .. STORE_EPOCH_MAX; a random start when the key is missing). */
index_status_t index_epoch_next(index_t *index, uint32_t *out_epoch /* out */);

/* LMDB's code for the last failed commit (an errno when positive, e.g. ENOSPC), 0 if none. */
int index_error_get(const index_t *index);

/* The last LMDB error text, for logs (static storage). */
const char *index_lmdb_str(int rc);

#endif
