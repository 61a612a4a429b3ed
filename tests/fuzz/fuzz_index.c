/*
 * fuzz_index.c - libFuzzer harness: index rows. Each run copies the base store (fuzz_store.c),
 * rewrites rows of its LMDB index through liblmdb as the input says (so the B-tree stays valid
 * and only the rows are wrong: what a flipped bit in a value, a stale row or a foreign writer
 * leaves), and recovers through store_open_disk (fuzz_store_walk's checks).
 *
 * Input: operations [op][arg u32 LE]: row = arg % rows (every row of the four databases,
 * listed at the start of the run); op & 7: 0 xor a byte of the value (at (arg >> 8) % length)
 * with (op | 1), 1 truncate the value to (arg >> 8) % length bytes, 2 replace the value with
 * the next op >> 3 input bytes, 3 delete the row, 4 put a row into database (arg >> 8) % 4
 * with key and value of the next op >> 3 input bytes each (split in half), 5-7 write 8 bytes
 * of the next input at (arg >> 8) % length of the value.
 */
#include "tests/fuzz/fuzz.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INDEX_ROWS_MAX 256
/* The rewrite's map, 32 KB below the store's (fuzz_store.c's FUZZ_INDEX_MAP, 128 KB): rows
 * put in by the input cannot fill the map the store recovers into. A full map is refused by
 * the store as any failed index write is (it fails, and says so), which is not damage the
 * harness looks for; with no headroom one input in ~240,000 did exactly that. */
#define FUZZ_REWRITE_MAP (96u << 10)

static const char *const index_dbs[4] = {"segments", "lanes", "current", "meta"};

typedef struct {
    int db;
    size_t klen, vlen;
    uint8_t key[600], val[600];
} index_row_t;

static index_row_t rows[INDEX_ROWS_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_store_fresh();
    char path[400];
    snprintf(path, sizeof(path), "%s/index", dir);
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi[4];
    if (mdb_env_create(&env) != 0 || mdb_env_set_maxdbs(env, 4) != 0 ||
        mdb_env_set_mapsize(env, FUZZ_REWRITE_MAP) != 0 ||
        mdb_env_open(env, path, MDB_NOSYNC, 0644) != 0 || mdb_txn_begin(env, NULL, 0, &txn) != 0)
        abort();
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        MDB_cursor *cur = NULL;
        MDB_val k, v;
        if (mdb_dbi_open(txn, index_dbs[i], MDB_CREATE, &dbi[i]) != 0 ||
            mdb_cursor_open(txn, dbi[i], &cur) != 0)
            abort();
        for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && n < INDEX_ROWS_MAX;
             rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            if (k.mv_size > sizeof(rows[n].key) || v.mv_size > sizeof(rows[n].val))
                continue;
            rows[n] = (index_row_t){.db = i, .klen = k.mv_size, .vlen = v.mv_size};
            memcpy(rows[n].key, k.mv_data, k.mv_size);
            memcpy(rows[n].val, v.mv_data, v.mv_size);
            n++;
        }
        mdb_cursor_close(cur);
    }
    const uint8_t *p = data, *end = data + size;
    int rc = 0;
    while (n != 0 && end - p >= 5 && rc != MDB_MAP_FULL && rc != MDB_TXN_FULL) {
        uint8_t op = p[0];
        uint32_t arg = fuzz_get32(p + 1);
        p += 5;
        index_row_t *r = &rows[arg % n];
        size_t want = op >> 3, at = r->vlen ? (arg >> 8) % r->vlen : 0;
        want = want < (size_t)(end - p) ? want : (size_t)(end - p);
        MDB_val k = {r->klen, r->key};
        switch (op & 7) {
        case 0:
            if (r->vlen != 0)
                r->val[at] ^= op | 1;
            break;
        case 1:
            r->vlen = at;
            break;
        case 2:
            memcpy(r->val, p, want);
            r->vlen = want;
            p += want;
            break;
        case 3:
            rc = mdb_del(txn, dbi[r->db], &k, NULL);
            continue;
        case 4: {
            size_t half = want / 2;
            MDB_val nk = {half, (void *)p}, nv = {want - half, (void *)(p + half)};
            if (half != 0)
                rc = mdb_put(txn, dbi[(arg >> 8) % 4], &nk, &nv, 0);
            p += want;
            continue;
        }
        default:
            if (end - p >= 8 && at + 8 <= r->vlen) {
                memcpy(r->val + at, p, 8);
                p += 8;
            }
            break;
        }
        MDB_val v = {r->vlen, r->val};
        rc = mdb_put(txn, dbi[r->db], &k, &v, 0);
    }
    /* Rows past the small map (MDB_MAP_FULL, from a put or from the commit) leave the rows as
     * they were: the run then recovers the unchanged index, which is no less a run. */
    if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL)
        mdb_txn_abort(txn);
    else if ((rc = mdb_txn_commit(txn)) != 0 && rc != MDB_MAP_FULL)
        abort();
    mdb_env_close(env);
    fuzz_store_walk(dir);
    return 0;
}
