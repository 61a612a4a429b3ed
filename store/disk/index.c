/*
 * index.c - the disk store's LMDB index (layout: index_int.h).
 *
 * Owns the LMDB environment and its four databases. Knows rows, not policy: it never decides
 * what a boundary or target should be, it records them.
 *
 * Invariants:
 *   1. Rows are encoded field by field in little-endian order, never as struct dumps, so the
 *      index is independent of compiler padding and host byte order.
 *   2. Every put goes through one wrapper that the fault hook can fail (STORE_FAULT_MDB_PUT).
 *   3. A write transaction is used by one caller at a time; the disk store batches every index
 *      change of a flush into one transaction (never one per item).
 *   4. Every value written ends with a CRC-32C over the key and the value (index_int.h); a
 *      value read is handed on only after its length, its CRC and its fields' bounds are
 *      checked, whatever bytes LMDB returns: nothing read here sizes an allocation.
 *
 * Rejected: a database per model (named databases are a fixed, small set in LMDB: mdb_env_set_
 * maxdbs); keys carry the model instead. SQLite as the index: LMDB's single-writer mmap B-tree
 * is what the design names, and needs no SQL for four key-value tables.
 */
#include "store/disk/index_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/stat.h>

struct index {
    int last_rc; /* LMDB's code for the last failed commit: an errno when positive */
    MDB_env *env;
    MDB_dbi segments, lanes, current, meta;
};

struct index_txn {
    index_t *index;
    MDB_txn *txn;
};

static const char meta_next_segment_id[] = "next_segment_id";
static const char meta_format[] = "format";

/* Segment row layouts: the fixed part before the model bytes, now and in store format 1. */
#define INDEX_ROW_FIXED      56u
#define INDEX_ROW_FIXED_LANE 68u

STATUS_STR(index_status_str, index_status_t, INDEX_STATUS_MAP, "unknown index status")

const char *index_lmdb_str(int rc)
{
    return mdb_strerror(rc);
}

/*
 * Reserves room in the data file up front: twice what its pages hold, at least
 * INDEX_PREALLOC_BYTES. LMDB grows its file a commit at a time; on a full disk that growth would
 * fail a commit, and a failed commit puts the store in its error state. With room reserved, a full
 * disk is met where it can be refused item by item (a segment append) while the index keeps
 * committing into pages it already has. What it holds is the pages in use (LMDB's last page),
 * not the file's size: that includes the last open's reservation, so doubling it would double
 * the file at every open up to the map size. Best effort: on a nearly full disk it reserves
 * what it can.
 */
static void index_preallocate(MDB_env *env, const char *path, uint64_t map_bytes)
{
    MDB_envinfo info;
    MDB_stat stat;
    if (mdb_env_info(env, &info) != 0 || mdb_env_stat(env, &stat) != 0)
        return;
    uint64_t used = ((uint64_t)info.me_last_pgno + 1) * stat.ms_psize;
    char file[4200];
    snprintf(file, sizeof(file), "%s/data.mdb", path);
    int fd = open(file, O_RDWR | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return;
    if (fstat(fd, &sb) == 0) {
        uint64_t have = (uint64_t)sb.st_size;
        uint64_t want = used * 2 > INDEX_PREALLOC_BYTES ? used * 2 : INDEX_PREALLOC_BYTES;
        if (want > map_bytes)
            want = map_bytes;
        while (want > have && posix_fallocate(fd, 0, (off_t)want) != 0)
            want = have + (want - have) / 2;
    }
    close(fd);
}

index_status_t index_open(const char *path, uint64_t map_bytes, int nosync, index_t **out,
                          int *out_lmdb_rc)
{
    index_status_t st = INDEX_ELMDB;
    MDB_txn *txn = NULL;
    int rc = 0;
    index_t *ix = calloc(1, sizeof(*ix));
    if (ix == NULL)
        return INDEX_ENOMEM;
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        rc = errno;
        goto out;
    }
    if ((rc = mdb_env_create(&ix->env)) != 0 || (rc = mdb_env_set_maxdbs(ix->env, 4)) != 0 ||
        (rc = mdb_env_set_mapsize(ix->env, map_bytes)) != 0)
        goto out;
    if ((rc = mdb_env_open(ix->env, path, nosync ? MDB_NOSYNC : 0, 0644)) != 0)
        goto out;
    index_preallocate(ix->env, path, map_bytes);
    if ((rc = mdb_txn_begin(ix->env, NULL, 0, &txn)) != 0 ||
        (rc = mdb_dbi_open(txn, "segments", MDB_CREATE, &ix->segments)) != 0 ||
        (rc = mdb_dbi_open(txn, "lanes", MDB_CREATE, &ix->lanes)) != 0 ||
        (rc = mdb_dbi_open(txn, "current", MDB_CREATE, &ix->current)) != 0 ||
        (rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &ix->meta)) != 0)
        goto out;
    rc = mdb_txn_commit(txn);
    txn = NULL;
    if (rc != 0)
        goto out;
    *out = ix;
    ix = NULL;
    st = INDEX_OK;
out:
    if (txn != NULL)
        mdb_txn_abort(txn);
    if (ix != NULL) {
        if (ix->env != NULL)
            mdb_env_close(ix->env);
        free(ix);
    }
    if (st != INDEX_OK && out_lmdb_rc != NULL)
        *out_lmdb_rc = rc;
    return st;
}

void index_close(index_t *index)
{
    if (index == NULL)
        return;
    mdb_env_close(index->env);
    free(index);
}

static size_t index_lane_key(uint8_t *key, const char *model, uint64_t signature, uint32_t lane)
{
    size_t n = strlen(model);
    memcpy(key, model, n);
    key[n++] = 0;
    for (int i = 7; i >= 0; i--)
        key[n++] = (uint8_t)(signature >> (i * 8));
    for (int i = 3; i >= 0; i--)
        key[n++] = (uint8_t)(lane >> (i * 8));
    return n;
}

static void index_id_key(uint8_t *key, uint64_t id)
{
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)(id >> ((7 - i) * 8));
}

/* The CRC of a row: the key's bytes, then the value's bytes before the CRC. */
static uint32_t index_row_crc(const void *key, size_t key_len, const void *val, size_t len)
{
    return store_crc32c(store_crc32c(0, key, key_len), val, len);
}

/* 1 when the value's last 4 bytes are the row's CRC (val_len >= 4). */
static int index_row_crc_ok(const void *key, size_t key_len, const uint8_t *val, size_t val_len)
{
    return store_get32(val + val_len - 4) == index_row_crc(key, key_len, val, val_len - 4);
}

int index_segment_row_decode(const uint8_t *key, size_t key_len, const uint8_t *p, size_t val_len,
                             index_segment_row_t *row)
{
    if (key_len != 8)
        return 0;
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id = id << 8 | key[i];
    index_segment_row_t r = {.segment_id = id, .trust = INDEX_ROW_DAMAGED};
    uint32_t model_len = val_len >= INDEX_ROW_FIXED ? store_get32(p + 52) : 0;
    if (model_len != 0 && model_len <= SEG_MODEL_MAX &&
        val_len == INDEX_ROW_FIXED + (size_t)model_len + 4 &&
        index_row_crc_ok(key, key_len, p, val_len))
        r.trust = INDEX_ROW_CHECKED;
    if (r.trust == INDEX_ROW_DAMAGED) {
        /* Store format 1's layout, with its CRC or from before rows had one. */
        uint32_t old_len = val_len >= INDEX_ROW_FIXED_LANE ? store_get32(p + 64) : 0;
        if (old_len != 0 && old_len <= SEG_MODEL_MAX &&
            (val_len == INDEX_ROW_FIXED_LANE + (size_t)old_len ||
             (val_len == INDEX_ROW_FIXED_LANE + (size_t)old_len + 4 &&
              index_row_crc_ok(key, key_len, p, val_len))))
            r.trust = INDEX_ROW_FORMAT_LANE;
        *row = r;
        return 1;
    }
    r.sequence = store_get64(p);
    r.created_ns = store_get64(p + 8);
    r.entries = store_get64(p + 16);
    r.tokens = store_get64(p + 24);
    r.readable = store_get64(p + 32);
    r.deleted = store_get64(p + 40);
    uint32_t flags = store_get32(p + 48);
    r.sealed = (int)(flags & 1);
    memcpy(r.model, p + INDEX_ROW_FIXED, model_len);
    r.model[model_len] = '\0';
    /* Bounds: a boundary inside a segment's possible size; no more entries below it than fit
     * (SEG_ENTRY_HEADER bytes each), no more completed than there are. */
    if ((flags & ~1u) != 0 || memchr(r.model, '\0', model_len) != NULL ||
        r.readable < SEG_HEADER_FIXED || r.readable > UINT32_MAX ||
        r.entries > (r.readable - SEG_HEADER_FIXED) / SEG_ENTRY_HEADER || r.deleted > r.entries ||
        r.tokens < r.entries) {
        *row = (index_segment_row_t){.segment_id = id, .trust = INDEX_ROW_DAMAGED};
        return 1;
    }
    *row = r;
    return 1;
}

/* A value of `want` bytes plus its CRC, or (legacy) of `want` bytes alone: 1 checked, 0 legacy,
 * -1 neither. */
static int index_value_check(const MDB_val *k, const MDB_val *v, size_t want)
{
    if (v->mv_size == want + 4)
        return index_row_crc_ok(k->mv_data, k->mv_size, v->mv_data, v->mv_size) ? 1 : -1;
    return v->mv_size == want ? 0 : -1;
}

/* LMDB codes that mean its files are damaged, as opposed to an operator's problem. */
int index_rc_is_damage(int rc)
{
    return rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
           rc == MDB_VERSION_MISMATCH || rc == MDB_PANIC || rc == MDB_INCOMPATIBLE ||
           rc == MDB_BAD_TXN;
}

/* How a cursor walk ended: MDB_NOTFOUND is its end; anything else is an error. */
static index_status_t index_walk_end(int rc)
{
    if (rc == MDB_NOTFOUND)
        return INDEX_OK;
    return index_rc_is_damage(rc) ? INDEX_EDAMAGED : INDEX_ELMDB;
}

index_status_t index_load(index_t *index, index_visitor_t *vis)
{
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    index_status_t st = INDEX_ELMDB;
    int rc;
    if ((rc = mdb_txn_begin(index->env, NULL, MDB_RDONLY, &txn)) != 0) {
        st = index_rc_is_damage(rc) ? INDEX_EDAMAGED : INDEX_ELMDB;
        index->last_rc = rc;
        goto out;
    }
    vis->next_segment_id = 0;
    vis->has_meta = 0;
    vis->format = 0;
    k.mv_data = (void *)meta_format;
    k.mv_size = sizeof(meta_format) - 1;
    rc = mdb_get(txn, index->meta, &k, &v);
    if (rc == 0 && index_value_check(&k, &v, 4) >= 0)
        vis->format = store_get32(v.mv_data);
    else if (rc == 0)
        vis->rejected(vis->ctx, "meta", "format fails its checksum or length");
    else if (rc != MDB_NOTFOUND) {
        st = index_walk_end(rc);
        goto out;
    }
    k.mv_data = (void *)meta_next_segment_id;
    k.mv_size = sizeof(meta_next_segment_id) - 1;
    rc = mdb_get(txn, index->meta, &k, &v);
    if (rc == 0 && index_value_check(&k, &v, 8) >= 0) {
        vis->next_segment_id = store_get64(v.mv_data);
        vis->has_meta = 1;
    } else if (rc == 0) {
        vis->rejected(vis->ctx, "meta", "next_segment_id fails its checksum or length");
    } else if (rc != MDB_NOTFOUND) {
        st = index_walk_end(rc);
        goto out;
    }

    if (mdb_cursor_open(txn, index->segments, &cur) != 0)
        goto out;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        index_segment_row_t row;
        if (!index_segment_row_decode(k.mv_data, k.mv_size, v.mv_data, v.mv_size, &row)) {
            vis->rejected(vis->ctx, "segments", "a key that is not a segment id");
            continue;
        }
        if (vis->segment(vis->ctx, &row) != 0) {
            st = INDEX_ENOMEM;
            goto out;
        }
    }
    if ((st = index_walk_end(rc)) != INDEX_OK)
        goto out;
    mdb_cursor_close(cur);
    cur = NULL;
    st = INDEX_ELMDB;

    if (mdb_cursor_open(txn, index->lanes, &cur) != 0)
        goto out;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const uint8_t *kp = k.mv_data;
        const uint8_t *nul = k.mv_size > 0 ? memchr(kp, 0, k.mv_size) : NULL;
        if (nul == NULL || nul == kp || (size_t)(nul - kp) > SEG_MODEL_MAX ||
            k.mv_size != (size_t)(nul - kp) + 13 || index_value_check(&k, &v, 4) < 0) {
            vis->rejected(vis->ctx, "lanes", "a row that fails its checksum or format");
            continue;
        }
        uint64_t sig = 0;
        uint32_t lane = 0;
        for (int i = 1; i <= 8; i++)
            sig = sig << 8 | nul[i];
        for (int i = 9; i <= 12; i++)
            lane = lane << 8 | nul[i];
        if (vis->lane(vis->ctx, (const char *)kp, sig, lane, store_get32(v.mv_data)) != 0) {
            st = INDEX_ENOMEM;
            goto out;
        }
    }
    if ((st = index_walk_end(rc)) != INDEX_OK)
        goto out;
    mdb_cursor_close(cur);
    cur = NULL;
    st = INDEX_ELMDB;

    if (mdb_cursor_open(txn, index->current, &cur) != 0)
        goto out;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        char model[SEG_MODEL_MAX + 1];
        if (k.mv_size == 0 || k.mv_size > SEG_MODEL_MAX ||
            memchr(k.mv_data, 0, k.mv_size) != NULL || index_value_check(&k, &v, 8) < 0) {
            vis->rejected(vis->ctx, "current", "a row that fails its checksum or format");
            continue;
        }
        memcpy(model, k.mv_data, k.mv_size);
        model[k.mv_size] = '\0';
        if (vis->current(vis->ctx, model, store_get64(v.mv_data)) != 0) {
            st = INDEX_ENOMEM;
            goto out;
        }
    }
    st = index_walk_end(rc);
out:
    if (cur != NULL)
        mdb_cursor_close(cur);
    if (txn != NULL)
        mdb_txn_abort(txn);
    return st;
}

index_status_t index_begin(index_t *index, index_txn_t **out)
{
    index_txn_t *t = malloc(sizeof(*t));
    if (t == NULL)
        return INDEX_ENOMEM;
    t->index = index;
    if (mdb_txn_begin(index->env, NULL, 0, &t->txn) != 0) {
        free(t);
        return INDEX_ELMDB;
    }
    *out = t;
    return INDEX_OK;
}

index_status_t index_commit(index_txn_t *txn)
{
    int rc = mdb_txn_commit(txn->txn);
    if (rc != 0)
        txn->index->last_rc = rc;
    free(txn);
    return rc == 0 ? INDEX_OK : INDEX_ELMDB;
}

void index_abort(index_txn_t *txn)
{
    if (txn == NULL)
        return;
    mdb_txn_abort(txn->txn);
    free(txn);
}

/* Puts key -> val, where val has room for the CRC after its vlen bytes (invariant 4). */
static index_status_t index_put(index_txn_t *t, MDB_dbi dbi, void *key, size_t klen, uint8_t *val,
                                size_t vlen)
{
    if (store_fault_hit(STORE_FAULT_MDB_PUT))
        return INDEX_ELMDB;
    store_put32(val + vlen, index_row_crc(key, klen, val, vlen));
    MDB_val k = {klen, key}, v = {vlen + 4, val};
    return mdb_put(t->txn, dbi, &k, &v, 0) == 0 ? INDEX_OK : INDEX_ELMDB;
}

static index_status_t index_del(index_txn_t *t, MDB_dbi dbi, void *key, size_t klen)
{
    MDB_val k = {klen, key};
    int rc = mdb_del(t->txn, dbi, &k, NULL);
    return rc == 0 || rc == MDB_NOTFOUND ? INDEX_OK : INDEX_ELMDB;
}

index_status_t index_segment_put(index_txn_t *txn, const index_segment_row_t *row)
{
    uint8_t key[8], val[INDEX_ROW_FIXED + SEG_MODEL_MAX + 4];
    size_t model_len = strlen(row->model);
    index_id_key(key, row->segment_id);
    store_put64(val, row->sequence);
    store_put64(val + 8, row->created_ns);
    store_put64(val + 16, row->entries);
    store_put64(val + 24, row->tokens);
    store_put64(val + 32, row->readable);
    store_put64(val + 40, row->deleted);
    store_put32(val + 48, row->sealed ? 1u : 0u);
    store_put32(val + 52, (uint32_t)model_len);
    memcpy(val + INDEX_ROW_FIXED, row->model, model_len);
    return index_put(txn, txn->index->segments, key, 8, val, INDEX_ROW_FIXED + model_len);
}

index_status_t index_segment_del(index_txn_t *txn, uint64_t segment_id)
{
    uint8_t key[8];
    index_id_key(key, segment_id);
    return index_del(txn, txn->index->segments, key, 8);
}

index_status_t index_lane_put(index_txn_t *txn, const char *model, uint64_t signature,
                              uint32_t lane, uint32_t target)
{
    uint8_t key[SEG_MODEL_MAX + 13], val[8];
    size_t klen = index_lane_key(key, model, signature, lane);
    store_put32(val, target);
    return index_put(txn, txn->index->lanes, key, klen, val, 4);
}

index_status_t index_lane_del(index_txn_t *txn, const char *model, uint64_t signature,
                              uint32_t lane)
{
    uint8_t key[SEG_MODEL_MAX + 13];
    size_t klen = index_lane_key(key, model, signature, lane);
    return index_del(txn, txn->index->lanes, key, klen);
}

index_status_t index_current_put(index_txn_t *txn, const char *model, uint64_t signature)
{
    uint8_t val[12];
    store_put64(val, signature);
    return index_put(txn, txn->index->current, (void *)model, strlen(model), val, 8);
}

index_status_t index_meta_put(index_txn_t *txn, uint64_t next_segment_id)
{
    uint8_t val[12], fmt[8];
    store_put64(val, next_segment_id);
    store_put32(fmt, INDEX_FORMAT);
    index_status_t st = index_put(txn, txn->index->meta, (void *)meta_next_segment_id,
                                  sizeof(meta_next_segment_id) - 1, val, 8);
    if (st == INDEX_OK)
        st = index_put(txn, txn->index->meta, (void *)meta_format, sizeof(meta_format) - 1, fmt, 4);
    return st;
}

int index_error_get(const index_t *index)
{
    return index->last_rc;
}

index_status_t index_epoch_next(index_t *index, uint32_t *out_epoch)
{
    static const char key[] = "epoch";
    index_txn_t *t = NULL;
    index_status_t st = index_begin(index, &t);
    if (st != INDEX_OK)
        return st;
    MDB_val k = {sizeof(key) - 1, (void *)key}, v;
    int rc = mdb_get(t->txn, index->meta, &k, &v);
    uint32_t epoch;
    if (rc == 0 && index_value_check(&k, &v, 4) >= 0)
        epoch = store_get32(v.mv_data) % STORE_EPOCH_MAX + 1u;
    else if (rc == 0 || rc == MDB_NOTFOUND)
        epoch = store_epoch_random(); /* new, rebuilt, or a damaged value */
    else {
        index_abort(t);
        return INDEX_ELMDB;
    }
    uint8_t val[8]; /* the epoch and its CRC (invariant 4) */
    store_put32(val, epoch);
    if ((st = index_put(t, index->meta, (void *)key, sizeof(key) - 1, val, 4)) != INDEX_OK) {
        index_abort(t);
        return st;
    }
    if ((st = index_commit(t)) == INDEX_OK)
        *out_epoch = epoch;
    return st;
}
