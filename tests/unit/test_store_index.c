/*
 * test_store_index.c - the disk store against a damaged or refused LMDB index, a segment file
 * taken away under a running store, and delivery counts across restarts (the store's
 * findings; each case failed before the index rows carried checksums).
 *
 * Each test builds a store in a fresh mkdtemp directory through the public API, closes it,
 * damages the index with LMDB's own API (the row layout restated from store/disk/index_int.h on
 * purpose: the tests must notice if it drifts), reopens it and checks what comes back against
 * what was acknowledged, with the recovery report and the log lines. LANES_TEST_STORE_IO_PLAIN
 * runs it with plain system calls (fstat instead of inotify for the files taken away).
 *
 * A little longer than the house rule's ~600 lines: each finding needs its own store, its own
 * damage done through LMDB, and the report, the log and the items checked after the reopen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"
#include "support/fs.h"

/* ---- the index row format, restated (store/disk/index_int.h) -----------------------------------
 */

#define ROW_ENTRIES  16u
#define ROW_READABLE 32u
#define ENTRY_BYTES  80u /* 56 + id 8 + payload 16 */
/* Store format 1 (one file per lane): its segment row put the model at 68, and its segment
 * header the signature at 24 and the lane at 32 (version 1). */
#define ROW_FIXED_FORMAT1 68u

static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- a store and what it acknowledged ----------------------------------------------------- */

enum { MAX_LOGS = 64 };

typedef struct {
    char dir[64];
    store_disk_config_t cfg;
    store_t *s;
    store_queue_t *q;
    store_recovery_t rep;
    char logs[MAX_LOGS][320];
    int levels[MAX_LOGS];
    size_t n_logs;
} fx_t;

static void fx_log(void *ctx, int level, const char *msg)
{
    fx_t *f = ctx;
    if (getenv("STORE_TEST_LOGS") != NULL)
        fprintf(stderr, "  [store %d] %s\n", level, msg);
    if (f->n_logs < MAX_LOGS) {
        snprintf(f->logs[f->n_logs], sizeof(f->logs[0]), "%s", msg);
        f->levels[f->n_logs++] = level;
    }
}

static int fx_logged(const fx_t *f, int level, const char *a, const char *b)
{
    for (size_t i = 0; i < f->n_logs; i++) {
        if (f->levels[i] == level && strstr(f->logs[i], a) != NULL &&
            (b == NULL || strstr(f->logs[i], b) != NULL))
            return 1;
    }
    return 0;
}

static int fx_logged_any(const fx_t *f, const char *a)
{
    for (size_t i = 0; i < f->n_logs; i++) {
        if (strstr(f->logs[i], a) != NULL)
            return 1;
    }
    return 0;
}

static store_status_t fx_open(fx_t *f)
{
    f->n_logs = 0;
    memset(&f->rep, 0, sizeof(f->rep));
    f->s = NULL;
    store_status_t st = store_open_disk(&f->cfg, &f->rep, &f->s);
    if (st == STORE_OK) {
        store_key_t k = {"llama", 0xA1A1, 0};
        assert_int_equal(store_queue_open(f->s, &k, &f->q), STORE_OK);
    }
    return st;
}

static fx_t *fx_new(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    *state = f;
    snprintf(f->dir, sizeof(f->dir), "/tmp/lanes-test-index-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->cfg = (store_disk_config_t){.dir = f->dir,
                                   .log = fx_log,
                                   .log_ctx = f,
                                   .io = getenv("LANES_TEST_STORE_IO_PLAIN") ? STORE_IO_PLAIN
                                                                             : STORE_IO_AUTO};
    assert_int_equal(fx_open(f), STORE_OK);
    return f;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    if (f != NULL) {
        store_close(f->s);
        char path[128];
        snprintf(path, sizeof(path), "chmod -R u+rwX %s 2>/dev/null", f->dir);
        if (system(path) != 0) {
            /* best effort: the tree is removed below either way */
        }
        fs_remove_tree(f->dir);
        free(f);
    }
    *state = NULL;
    return 0;
}

static void fx_close(fx_t *f)
{
    store_close(f->s);
    f->s = NULL;
}

/* Appends items tagged from..to-1 (id = tag, 16-byte payload) to q; returns the last's ref. */
static store_ref_t fx_append_to(fx_t *f, store_queue_t *q, uint64_t from, uint64_t to)
{
    store_ref_t ref = {0, 0};
    for (uint64_t t = from; t < to; t++) {
        uint8_t id[8], payload[16];
        put64(id, t);
        memset(payload, (int)(t & 0xFF), sizeof(payload));
        store_item_t it = {.id = id,
                           .id_len = 8,
                           .payload = payload,
                           .payload_len = sizeof(payload),
                           .tokens = 3,
                           .arrival_ns = 1000 + t};
        assert_int_equal(store_append(f->s, q, &it, &ref), STORE_OK);
    }
    return ref;
}

/* The same into f->q. */
static store_ref_t fx_append(fx_t *f, uint64_t from, uint64_t to)
{
    return fx_append_to(f, f->q, from, to);
}

/* The tags queued in f->q, in order, into tags (room for 256); their deliveries too. */
static size_t fx_queued(fx_t *f, uint64_t *tags, uint32_t *deliveries)
{
    store_view_t views[256];
    size_t n = 0;
    assert_int_equal(store_peek(f->s, f->q, views, 256, &n), STORE_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(views[i].id_len, 8);
        tags[i] = get64(views[i].id_view);
        if (deliveries != NULL)
            deliveries[i] = views[i].deliveries;
        uint8_t payload[16];
        memset(payload, (int)(tags[i] & 0xFF), sizeof(payload));
        assert_int_equal(views[i].payload_len, sizeof(payload));
        assert_memory_equal(views[i].payload_view, payload, sizeof(payload));
    }
    return n;
}

/* Asserts the queue holds exactly tags from..to-1, in order. */
static void fx_assert_holds(fx_t *f, uint64_t from, uint64_t to)
{
    uint64_t tags[256];
    size_t n = fx_queued(f, tags, NULL);
    assert_int_equal(n, to - from);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tags[i], from + i);
}

static void seg_file(const fx_t *f, uint64_t id, char *buf, size_t size)
{
    snprintf(buf, size, "%s/segments/%016" PRIx64 ".seg", f->dir, id);
}

static long long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* Opens the index's table `db` for writing, through LMDB's own API. */
static void index_txn_begin(const fx_t *f, const char *db, MDB_env **env, MDB_txn **txn,
                            MDB_dbi *dbi)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/index", f->dir);
    assert_int_equal(mdb_env_create(env), 0);
    assert_int_equal(mdb_env_set_maxdbs(*env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(*env, 1ull << 30), 0);
    assert_int_equal(mdb_env_open(*env, path, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(*env, NULL, 0, txn), 0);
    assert_int_equal(mdb_dbi_open(*txn, db, 0, dbi), 0);
}

static void index_txn_commit(MDB_env *env, MDB_txn *txn)
{
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Rewrites the value of table `db`'s row under key (klen bytes) with edit(); fix_crc recomputes
 * the row's CRC (a row damaged in a way its checksum cannot see), else the CRC stays stale. */
static void index_edit(const fx_t *f, const char *db, const void *key, size_t klen,
                       void (*edit)(uint8_t *val, size_t *len), int fix_crc)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    index_txn_begin(f, db, &env, &txn, &dbi);
    MDB_val k = {klen, (void *)key}, v;
    assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
    uint8_t val[512];
    size_t len = v.mv_size;
    assert_true(len >= 4 && len <= sizeof(val));
    memcpy(val, v.mv_data, len);
    edit(val, &len);
    if (fix_crc)
        put32(val + len - 4, crc32c(crc32c(0, key, klen), val, len - 4));
    v = (MDB_val){len, val};
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    index_txn_commit(env, txn);
}

/* Adds a row of `len` bytes of `fill` under key to table `db`: a row no checksum verifies. */
static void index_add_garbage(const fx_t *f, const char *db, const void *key, size_t klen, int fill,
                              size_t len)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    index_txn_begin(f, db, &env, &txn, &dbi);
    uint8_t val[512];
    assert_true(len <= sizeof(val));
    memset(val, fill, len);
    MDB_val k = {klen, (void *)key}, v = {len, val};
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    index_txn_commit(env, txn);
}

static void seg_key(uint64_t id, uint8_t key[8])
{
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t)(id >> (8 * (7 - i)));
}

/* ---- the index is checked, never trusted blindly -------------------------------- */

static void edit_flip_entries_high_bit(uint8_t *val, size_t *len)
{
    (void)len;
    val[ROW_ENTRIES + 7] ^= 0x40; /* entries += 2^62: one flipped bit */
}

static void check_count_damage(void **state, int fix_crc)
{
    fx_t *f = fx_new(state);
    store_ref_t ref = fx_append(f, 0, 40);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    uint8_t key[8];
    seg_key(ref.queue, key);
    index_edit(f, "segments", key, 8, edit_flip_entries_high_bit, fix_crc);
    /* Before: recovery reserved room for 2^62 entries and the store could never open again. */
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 1);
    assert_int_equal(f->rep.entries_live, 40);
    assert_int_equal(f->rep.torn_tails, 0);
    assert_int_equal(f->rep.corrupt_regions, 0);
    assert_int_equal(f->rep.index_rebuilt, 0);
    fx_assert_holds(f, 0, 40);
    assert_true(fx_logged(f, STORE_LOG_ERROR, "index row of segment", "not used"));
    /* The open wrote a checked row: the next one trusts it. */
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 0);
    fx_assert_holds(f, 0, 40);
}

static void test_row_entry_count_bit_flip_is_rejected_and_sizes_nothing(void **state)
{
    check_count_damage(state, 0);
}

/* The same count behind a valid checksum (what only a bug could write): out of bounds for the
 * boundary it claims, so still rejected, and still sizes nothing. */
static void test_row_impossible_count_behind_valid_checksum_is_rejected(void **state)
{
    check_count_damage(state, 1);
}

static uint64_t g_lower_by;

static void edit_lower_boundary(uint8_t *val, size_t *len)
{
    (void)len;
    put64(val + ROW_READABLE, get64(val + ROW_READABLE) - g_lower_by);
}

static void edit_lower_boundary_and_count(uint8_t *val, size_t *len)
{
    (void)len;
    put64(val + ROW_READABLE, get64(val + ROW_READABLE) - g_lower_by);
    put64(val + ROW_ENTRIES, get64(val + ROW_ENTRIES) - g_lower_by / ENTRY_BYTES);
}

/* Before: lowering one row's boundary by 9 entries dropped 9 ACCEPTED items, cut the file and
 * logged that they were never acknowledged. */
static void test_row_lowered_boundary_drops_no_acknowledged_item(void **state)
{
    fx_t *f = fx_new(state);
    store_ref_t ref = fx_append(f, 0, 30);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    char path[128];
    seg_file(f, ref.queue, path, sizeof(path));
    long long size = file_size(path);
    uint8_t key[8];
    seg_key(ref.queue, key);
    g_lower_by = 9 * ENTRY_BYTES;
    index_edit(f, "segments", key, 8, edit_lower_boundary, 0);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 1);
    assert_int_equal(f->rep.torn_tails, 0);
    assert_int_equal(f->rep.torn_bytes, 0);
    assert_int_equal(f->rep.entries_live, 30);
    fx_assert_holds(f, 0, 30);
    assert_int_equal(file_size(path), size);
    assert_false(fx_logged_any(f, "never acknowledged"));
}

/* A boundary lowered behind a valid checksum while the row's entry count still counts the
 * entries past it: the count and the entries' CRCs win over the boundary. */
static void test_row_boundary_below_its_entry_count_keeps_the_entries(void **state)
{
    fx_t *f = fx_new(state);
    store_ref_t ref = fx_append(f, 0, 30);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    char path[128];
    seg_file(f, ref.queue, path, sizeof(path));
    long long size = file_size(path);
    uint8_t key[8];
    seg_key(ref.queue, key);
    g_lower_by = 9 * ENTRY_BYTES;
    index_edit(f, "segments", key, 8, edit_lower_boundary, 1);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 0);
    assert_int_equal(f->rep.boundary_entries_kept, 9);
    assert_int_equal(f->rep.torn_tails, 0);
    fx_assert_holds(f, 0, 30);
    assert_int_equal(file_size(path), size);
    assert_true(fx_logged(f, STORE_LOG_WARN, "valid entries past the boundary", "kept"));
    fx_close(f);
    /* With the count lowered too, the row is consistent: past it the entries were never
     * acknowledged, and are cut as a torn tail. */
    index_edit(f, "segments", key, 8, edit_lower_boundary_and_count, 1);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.torn_tails, 1);
    assert_int_equal(f->rep.torn_bytes, 9 * ENTRY_BYTES);
    fx_assert_holds(f, 0, 30 - 9);
}

static void edit_strip_crc(uint8_t *val, size_t *len)
{
    (void)val;
    *len -= 4;
}

/* A segment row without its checksum (no version of this format wrote one) is not trusted: its
 * file is scanned as the index did not know it, and the next flush writes a checked row. */
static void test_rows_without_checksum_are_not_trusted_and_rewritten(void **state)
{
    fx_t *f = fx_new(state);
    store_ref_t ref = fx_append(f, 0, 12);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_append(f, 12, 15); /* never flushed: never written */
    fx_close(f);
    uint8_t key[8];
    seg_key(ref.queue, key);
    index_edit(f, "segments", key, 8, edit_strip_crc, 0);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 1);
    assert_true(fx_logged(f, STORE_LOG_ERROR, "index row of segment", "not used"));
    fx_assert_holds(f, 0, 12);
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 0);
    fx_close(f);
    /* Rewritten with its checksum: damaging it now is seen. */
    index_edit(f, "segments", key, 8, edit_flip_entries_high_bit, 0);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 1);
    fx_assert_holds(f, 0, 12);
}

static void edit_flip_first_byte(uint8_t *val, size_t *len)
{
    (void)len;
    val[0] ^= 0x10;
}

/* A damaged lane target drops that row only: no rebuild, nothing re-adopted. */
static void test_damaged_lane_row_is_dropped_alone(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 5);
    assert_int_equal(store_queue_target_set(f->s, f->q, 777), STORE_OK);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    uint8_t key[32];
    size_t klen = strlen("llama");
    memcpy(key, "llama", klen);
    key[klen++] = 0;
    uint64_t sig = 0xA1A1;
    for (int i = 7; i >= 0; i--)
        key[klen++] = (uint8_t)(sig >> (8 * i));
    for (int i = 0; i < 4; i++)
        key[klen++] = 0;
    index_edit(f, "lanes", key, klen, edit_flip_first_byte, 0);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.rows_rejected, 1);
    assert_int_equal(f->rep.index_rebuilt, 0);
    assert_int_equal(f->rep.adopted_files, 0);
    fx_assert_holds(f, 0, 5);
    uint32_t target = 0;
    assert_true(store_queue_next(f->s, NULL, NULL, NULL, &target));
    assert_int_equal(target, 3); /* back to the longest item it holds */
}

/* A damaged segment row's key (not verified: the CRC over it fails) names the id next to the
 * last, its file is gone, and the directory holds a journal file of the reserved last name.
 * Before: recovery advanced the id counter from that key, two draws later it reached the last
 * id, whose journal name already existed, and the store failed at its first commit. */
static void test_damaged_row_without_file_moves_no_id_counter(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 5);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    uint8_t key[8];
    seg_key(UINT64_MAX - 1, key);
    index_add_garbage(f, "segments", key, 8, 0x5A, 60);
    char path[128];
    snprintf(path, sizeof(path), "%s/journal/ffffffffffffffff.jnl", f->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.missing_files, 1);
    assert_true(fx_logged(f, STORE_LOG_ERROR, "fffffffffffffffe", "fails its checksum"));
    store_ref_t last = fx_append(f, 5, 10);
    assert_true(last.queue < UINT64_MAX / 2);
    assert_int_equal(store_flush(f->s), STORE_OK);
    store_view_t v[16];
    size_t n = 0;
    assert_int_equal(store_peek(f->s, f->q, v, 16, &n), STORE_OK);
    assert_int_equal(n, 10);
    store_ref_t refs[16];
    for (size_t i = 0; i < n; i++)
        refs[i] = v[i].ref;
    assert_int_equal(store_commit(f->s, f->q, refs, n), STORE_OK);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.missing_files, 0);
    uint32_t deliveries[256];
    uint64_t tags[256];
    assert_int_equal(fx_queued(f, tags, deliveries), 10);
    for (size_t i = 0; i < 10; i++) {
        assert_int_equal(tags[i], i);
        assert_int_equal(deliveries[i], 1);
    }
}

static void edit_last_segment_id(uint8_t *val, size_t *len)
{
    (void)len;
    put64(val, UINT64_MAX);
}

/* A verified meta row whose counter stands at the last id (what only a bug could write): the
 * store opens and serves what it holds, refuses the next segment with a message that says why,
 * and loses nothing. */
static void test_exhausted_segment_ids_fail_the_store_and_lose_nothing(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 5);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    static const char meta_key[] = "next_segment_id";
    index_edit(f, "meta", meta_key, sizeof(meta_key) - 1, edit_last_segment_id, 1);
    assert_int_equal(fx_open(f), STORE_OK);
    fx_assert_holds(f, 0, 5);
    uint8_t id[8] = {9}, payload[16] = {0};
    store_item_t it = {.id = id,
                       .id_len = 8,
                       .payload = payload,
                       .payload_len = sizeof(payload),
                       .tokens = 3,
                       .arrival_ns = 2000};
    store_ref_t ref;
    assert_int_equal(store_append(f->s, f->q, &it, &ref), STORE_EIO);
    assert_true(fx_logged(f, STORE_LOG_ERROR, "ids are exhausted", NULL));
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    fx_assert_holds(f, 0, 5);
}

/* ---- operator errors are not damage; an empty index over segments warns --------- */

static int count_aside(const fx_t *f)
{
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += strncmp(de->d_name, "index.damaged-", 14) == 0;
    closedir(d);
    return n;
}

/* Before: data.mdb not readable set the index aside and adopted every segment. As root the
 * open runs in a child that drops to an unprivileged user, for whom mode 000 means EACCES. */
static void test_index_permission_denied_is_an_operator_error(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 10);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    char path[128];
    snprintf(path, sizeof(path), "%s/index/data.mdb", f->dir);
    assert_int_equal(chmod(path, 0), 0);
    /* Everything else is open to the child, so that only the index's permission stands in the
     * way (and setting it aside would have been possible). */
    char cmd[320];
    snprintf(cmd, sizeof(cmd), "chmod 0777 %s %s/index %s/segments", f->dir, f->dir, f->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/index/lock.mdb", f->dir);
    assert_int_equal(chmod(path, 0666), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(77);
        store_status_t st = fx_open(f);
        if (st == STORE_OK)
            _exit(1); /* opened: the index was set aside or read anyway */
        if (st != STORE_EINDEX)
            _exit(2);
        if (!fx_logged(f, STORE_LOG_ERROR, "not damage", "Permission denied"))
            _exit(3);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(count_aside(f), 0);
    /* Fixed by the operator: everything is there. */
    snprintf(path, sizeof(path), "%s/index/data.mdb", f->dir);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.index_rebuilt, 0);
    assert_int_equal(f->rep.adopted_files, 0);
    fx_assert_holds(f, 0, 10);
}

/* Before: an index truncated to 0 bytes was taken for a new one, silently. */
static void test_index_truncated_to_zero_warns_and_rebuilds(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 10);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    char path[128];
    snprintf(path, sizeof(path), "%s/index/data.mdb", f->dir);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.index_rebuilt, 1);
    assert_int_equal(f->rep.adopted_files, 1);
    assert_true(fx_logged(f, STORE_LOG_WARN, "is empty", "segment files exist"));
    fx_assert_holds(f, 0, 10);
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.index_rebuilt, 0);
    fx_assert_holds(f, 0, 10);
}

/* ---- a segment deleted while the store runs ------------------------------------- */

static void check_taken_away(void **state, int replace)
{
    fx_t *f = fx_new(state);
    store_ref_t ref = fx_append(f, 0, 8);
    assert_int_equal(store_flush(f->s), STORE_OK);
    char path[128];
    seg_file(f, ref.queue, path, sizeof(path));
    if (replace) {
        char tmp[160];
        snprintf(tmp, sizeof(tmp), "%s.copy", path);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "cp %s %s && mv %s %s", path, tmp, tmp, path);
        assert_int_equal(system(cmd), 0);
    } else {
        assert_int_equal(unlink(path), 0);
    }
    /* Before: these were acknowledged into a file that was gone, and lost at the restart. */
    fx_append(f, 8, 12);
    assert_int_equal(store_flush(f->s), STORE_EIO);
    assert_true(
        fx_logged(f, STORE_LOG_ERROR, "was deleted or replaced while the store was running", NULL));
    assert_int_equal(store_flush(f->s), STORE_EIO);
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    if (replace) {
        /* The copy holds the 8 acknowledged items and nothing of the refused flush. */
        fx_assert_holds(f, 0, 8);
    } else {
        assert_int_equal(f->rep.missing_files, 1);
        assert_int_equal(f->rep.missing_live_entries, 8);
        assert_true(fx_logged(f, STORE_LOG_ERROR, "its file is gone", "8 live entries"));
        fx_assert_holds(f, 0, 0);
    }
}

static void test_segment_deleted_while_running_fails_the_next_flush(void **state)
{
    check_taken_away(state, 0);
}

static void test_segment_replaced_while_running_fails_the_next_flush(void **state)
{
    check_taken_away(state, 1);
}

/* A tombstone into a deleted file is refused the same way. */
static void test_tombstone_into_deleted_segment_fails_the_flush(void **state)
{
    fx_t *f = fx_new(state);
    store_ref_t ref = fx_append(f, 0, 4);
    assert_int_equal(store_flush(f->s), STORE_OK);
    store_view_t v;
    size_t n = 0;
    assert_int_equal(store_peek(f->s, f->q, &v, 1, &n), STORE_OK);
    assert_int_equal(store_commit(f->s, f->q, &v.ref, 1), STORE_OK);
    char path[128];
    seg_file(f, ref.queue, path, sizeof(path));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(store_tombstone(f->s, v.ref, NULL), STORE_OK);
    assert_int_equal(store_flush(f->s), STORE_EIO);
}

/* ---- another store format ------------------------------------------------------------------ */

/* A segment file of store format 1 (header version 1, the routing keys in it, one entry of 32
 * bytes + id after it), restated here: what a lanesched before the per-model logs wrote. */
static size_t format1_segment(uint64_t id, uint8_t *buf)
{
    static const char model[] = "llama";
    size_t hdr = 64 + 8; /* 64 + "llama" padded to 8 */
    memset(buf, 0, hdr + 48);
    memcpy(buf, "LANESEG", 8);
    put32(buf + 8, 1);
    put32(buf + 12, (uint32_t)hdr);
    put64(buf + 16, id);
    put64(buf + 24, 0xA1A1);
    put32(buf + 32, 0);
    put32(buf + 36, (uint32_t)strlen(model));
    put64(buf + 40, 0);
    put64(buf + 48, 1);
    memcpy(buf + 64, model, strlen(model));
    put32(buf + 56, crc32c(0, buf, hdr));
    uint8_t *e = buf + hdr; /* LIVE, 40 bytes: 32 + an 8-byte id */
    put32(e, 0x4556494Cu);
    put32(e + 4, 40);
    e[8] = 8;
    put32(e + 12, 5);
    put64(e + 16, 77);
    memcpy(e + 32, "old-item", 8);
    uint8_t sid[8];
    put64(sid, id);
    put32(e + 28, crc32c(crc32c(crc32c(0, sid, 8), e + 4, 24), e + 32, 8));
    return hdr + 40;
}

static int dir_has(const char *dir, const char *name)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A directory a lanesched of store format 1 left (one file per lane, no index of ours): the
 * open refuses it with a line that names it and says what to do, and changes nothing (a
 * format-1 header read as format 2 would have been quarantined, its items lost). */
static void test_directory_of_store_format_1_is_refused_unchanged(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    *state = f;
    snprintf(f->dir, sizeof(f->dir), "/tmp/lanes-test-index-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->cfg = (store_disk_config_t){.dir = f->dir, .log = fx_log, .log_ctx = f};
    char path[160];
    snprintf(path, sizeof(path), "%s/segments", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    uint8_t buf[256];
    size_t len = format1_segment(3, buf);
    seg_file(f, 3, path, sizeof(path));
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    assert_int_equal(fx_open(f), STORE_EFORMAT);
    assert_null(f->s);
    assert_true(fx_logged(f, STORE_LOG_ERROR, f->dir, "store format 1"));
    assert_true(fx_logged(f, STORE_LOG_ERROR, "Nothing was changed", "Drain the directory"));
    /* Nothing changed: the file as it was, no index made, nothing quarantined. */
    assert_int_equal(file_size(path), (long long)len);
    fp = fopen(path, "rb");
    uint8_t back[256];
    assert_int_equal(fread(back, 1, sizeof(back), fp), len);
    fclose(fp);
    assert_memory_equal(back, buf, len);
    assert_false(dir_has(f->dir, "index"));
    assert_false(dir_has(f->dir, "quarantine"));
    /* The same file with one bit of its version flipped is damage, not a format: quarantined,
     * and the store opens. */
    buf[8] ^= 0x03;
    fp = fopen(path, "wb");
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.quarantined_files, 1);
}

static void edit_row_to_format1(uint8_t *val, size_t *len)
{
    /* The same row in format 1's layout: model at 68, its length at 64 (signature, lane and
     * the counts zero: only the layout is recognised). */
    uint8_t model[64];
    uint32_t model_len = (uint32_t)(*len - 4 - 56);
    memcpy(model, val + 56, model_len);
    memset(val, 0, ROW_FIXED_FORMAT1);
    put32(val + 64, model_len);
    memcpy(val + ROW_FIXED_FORMAT1, model, model_len);
    *len = ROW_FIXED_FORMAT1 + model_len + 4;
}

/* An index whose segment rows are format 1's: refused the same way, nothing changed. */
static void test_index_of_store_format_1_is_refused_unchanged(void **state)
{
    fx_t *f = fx_new(state);
    store_ref_t ref = fx_append(f, 0, 6);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    uint8_t key[8];
    seg_key(ref.queue, key);
    index_edit(f, "segments", key, 8, edit_row_to_format1, 1);
    char path[160];
    seg_file(f, ref.queue, path, sizeof(path));
    long long size = file_size(path);
    assert_int_equal(fx_open(f), STORE_EFORMAT);
    assert_true(fx_logged(f, STORE_LOG_ERROR, f->dir, "segment rows of format 1"));
    assert_int_equal(file_size(path), size);
    assert_int_equal(count_aside(f), 0);
    assert_false(dir_has(f->dir, "quarantine"));
}

/* A directory with no segment file and no segment row left (drained), whose index has no
 * format row (what format 1 wrote): taken over, its lane targets and current shapes kept. */
static void test_drained_directory_without_format_row_is_taken_over(void **state)
{
    fx_t *f = fx_new(state);
    assert_int_equal(store_queue_target_set(f->s, f->q, 321), STORE_OK);
    assert_int_equal(store_current_shape_set(f->s, "llama", 0xA1A1), STORE_OK);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    char path[128];
    snprintf(path, sizeof(path), "%s/index", f->dir);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_open(env, path, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {6, (void *)"format"};
    assert_int_equal(mdb_del(txn, dbi, &k, NULL), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    assert_int_equal(fx_open(f), STORE_OK);
    uint32_t target = 0;
    assert_true(store_queue_next(f->s, NULL, NULL, NULL, &target));
    assert_int_equal(target, 321);
    int has = 0;
    uint64_t sig = 0;
    assert_int_equal(store_current_shape_get(f->s, "llama", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0xA1A1);
}

/* A meta "format" row's value (u32 LE and its CRC) set to `format`. */
static uint32_t edit_format_to;
static void edit_format(uint8_t *val, size_t *len)
{
    assert_int_equal(*len, 8);
    put32(val, edit_format_to);
}

/* Rewrites a file's bytes [off, off + len) with buf. */
static void file_patch(const char *path, uint64_t off, const uint8_t *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static uint32_t meta_format(const fx_t *f)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/index", f->dir);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_open(env, path, MDB_RDONLY, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
    MDB_val k = {6, (void *)"format"}, v;
    assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
    uint32_t format = (uint32_t)((const uint8_t *)v.mv_data)[0];
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return format;
}

/*
 * A directory of store format 2 (segment headers of version 2, delivery counts and tombstones
 * stored in the entries' state words, no journal) is read as it is: its tombstones and counts
 * are honoured, its files are never written again, new states go to the journal over them, and
 * from the first flush the index says format 3 (a format-2 lanesched then refuses it).
 */
static void test_directory_of_store_format_2_is_read_and_kept(void **state)
{
    fx_t *f = fx_new(state);
    store_ref_t last = fx_append(f, 0, 6);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    /* Format 2: version 2 in the header (and its CRC), the states in place, no journal. */
    char path[160];
    seg_file(f, last.queue, path, sizeof(path));
    uint8_t hdr[72];
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(hdr, 1, sizeof(hdr), fp), sizeof(hdr));
    fclose(fp);
    uint32_t hdr_len = (uint32_t)hdr[12] | (uint32_t)hdr[13] << 8;
    assert_int_equal(hdr_len, 72); /* 64 + "llama" padded to 8 */
    put32(hdr + 8, 2);
    put32(hdr + 56, 0);
    put32(hdr + 56, crc32c(0, hdr, hdr_len));
    file_patch(path, 0, hdr, hdr_len);
    uint8_t word[4];
    put32(word, 0x424D4F54u); /* item 1: "TOMB" */
    file_patch(path, hdr_len + 1 * ENTRY_BYTES, word, 4);
    put32(word, 0x00564C44u | 3u << 24); /* item 2: "DLV" 3 */
    file_patch(path, hdr_len + 2 * ENTRY_BYTES, word, 4);
    snprintf(path, sizeof(path), "rm -rf %s/journal", f->dir);
    assert_int_equal(system(path), 0);
    edit_format_to = 2;
    index_edit(f, "meta", "format", 6, edit_format, 1);
    assert_int_equal(meta_format(f), 2);

    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.entries_tombstoned, 1);
    assert_int_equal(f->rep.journal_files, 0);
    uint64_t tags[256];
    uint32_t deliveries[256];
    assert_int_equal(fx_queued(f, tags, deliveries), 5);
    assert_int_equal(tags[1], 2);
    assert_int_equal(deliveries[1], 3);
    assert_int_equal(deliveries[0] + deliveries[2] + deliveries[3] + deliveries[4], 0);
    assert_int_equal(meta_format(f), 3); /* the open's flush */
    /* New states go to the journal, over the entries' own words; the file is not written. */
    seg_file(f, last.queue, path, sizeof(path));
    long long size = file_size(path);
    store_view_t v[2];
    size_t n = 0;
    assert_int_equal(store_peek(f->s, f->q, v, 2, &n), STORE_OK);
    store_ref_t refs[2] = {v[0].ref, v[1].ref};
    assert_int_equal(store_commit(f->s, f->q, refs, 2), STORE_OK);
    assert_int_equal(store_tombstone(f->s, refs[0], NULL), STORE_OK);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    assert_int_equal(file_size(path), size);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(f->rep.entries_tombstoned, 2);
    assert_int_equal(fx_queued(f, tags, deliveries), 4);
    assert_int_equal(tags[0], 2);
    assert_int_equal(deliveries[0], 4); /* "DLV" 3 in place, then a commit: 4 */
}

/* A journal file of a newer store format refuses the directory, as a segment file would. */
static void test_journal_of_a_newer_format_is_refused_unchanged(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 2);
    assert_int_equal(store_flush(f->s), STORE_OK);
    store_view_t v;
    size_t n = 0;
    assert_int_equal(store_peek(f->s, f->q, &v, 1, &n), STORE_OK);
    assert_int_equal(store_commit(f->s, f->q, &v.ref, 1), STORE_OK); /* a journal file */
    fx_close(f);
    char path[160];
    snprintf(path, sizeof(path), "%s/journal", f->dir);
    DIR *dir = opendir(path);
    assert_non_null(dir);
    char name[64] = "";
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        if (de->d_name[0] != '.')
            snprintf(name, sizeof(name), "%.40s", de->d_name);
    }
    closedir(dir);
    assert_true(name[0] != '\0');
    snprintf(path, sizeof(path), "%s/journal/%s", f->dir, name);
    uint8_t hdr[64];
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(hdr, 1, sizeof(hdr), fp), sizeof(hdr));
    fclose(fp);
    put32(hdr + 8, 4);
    put32(hdr + 56, 0);
    put32(hdr + 56, crc32c(0, hdr, sizeof(hdr)));
    file_patch(path, 0, hdr, sizeof(hdr));
    assert_int_equal(fx_open(f), STORE_EFORMAT);
    assert_true(fx_logged(f, STORE_LOG_ERROR, "journal file of store format 4", name));
    assert_true(fx_logged(f, STORE_LOG_ERROR, "Nothing was changed", NULL));
    /* The version bits flipped without a valid CRC: damage, reported, the open goes on. */
    hdr[8] ^= 0x01;
    file_patch(path, 0, hdr, sizeof(hdr));
    assert_int_equal(fx_open(f), STORE_OK);
    assert_true(fx_logged(f, STORE_LOG_ERROR, "header fails its checks", name));
    uint64_t tags[256];
    uint32_t deliveries[256];
    assert_int_equal(fx_queued(f, tags, deliveries), 2);
    assert_int_equal(deliveries[0], 1); /* its record still verifies on its own */
}

/* ---- delivery counts survive a restart ------------------------------------------------------ */

/* Before: every restart reset the count, so an item whose batch crashed the daemon was
 * delivered forever; now the scheduler sees the count grow and dead-letters it at its limit. */
static void test_delivery_counts_survive_restarts(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 3);
    assert_int_equal(store_flush(f->s), STORE_OK);
    for (uint32_t round = 1; round <= 4; round++) {
        store_view_t v[2];
        size_t n = 0;
        assert_int_equal(store_peek(f->s, f->q, v, 2, &n), STORE_OK);
        assert_int_equal(n, 2);
        assert_int_equal(v[0].deliveries, round - 1);
        store_ref_t refs[2] = {v[0].ref, v[1].ref};
        assert_int_equal(store_commit(f->s, f->q, refs, 2), STORE_OK);
        fx_close(f); /* the crash: no flush, nothing completed */
        assert_int_equal(fx_open(f), STORE_OK);
        uint64_t tags[256];
        uint32_t deliveries[256];
        assert_int_equal(fx_queued(f, tags, deliveries), 3);
        assert_int_equal(tags[0], 0);
        assert_int_equal(deliveries[0], round);
        assert_int_equal(deliveries[1], round);
        assert_int_equal(deliveries[2], 0);
    }
}

/* The index's data file keeps room reserved for commits (twice its pages in use, at least 1 MiB),
 * and a restart does not grow it: it used to double at every open, to the map size. */
static void test_restarts_do_not_grow_the_index_file(void **state)
{
    fx_t *f = fx_new(state);
    fx_append(f, 0, 3);
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    char path[128];
    snprintf(path, sizeof(path), "%s/index/data.mdb", f->dir);
    long long first = file_size(path);
    assert_true(first >= 1ll << 20);
    for (int i = 0; i < 6; i++) {
        fx_close(f);
        assert_int_equal(fx_open(f), STORE_OK);
    }
    assert_int_equal(file_size(path), first);
}

static size_t count_in(fx_t *f, store_queue_t *q)
{
    store_view_t v[256];
    size_t n = 0;
    assert_int_equal(store_peek(f->s, q, v, 256, &n), STORE_OK);
    return n;
}

/* A segment whose entries all completed is deleted while a journal file still holds its
 * records (another segment's record keeps the file). With the index lost, the id counter comes
 * from the files: the journal's records must keep the deleted segment's id from being handed
 * out again, or its old tombstones would complete the new segment's items at the next open. */
static void test_index_rebuild_never_reuses_a_journaled_segment_id(void **state)
{
    fx_t *f = fx_new(state);
    store_key_t kb = {"alpha", 0xB2B2, 0};
    store_queue_t *qb;
    store_view_t v[16];
    size_t n = 0;
    fx_append(f, 0, 10);
    assert_int_equal(store_flush(f->s), STORE_OK);
    assert_int_equal(store_peek(f->s, f->q, v, 1, &n), STORE_OK);
    store_ref_t first = v[0].ref;
    assert_int_equal(store_commit(f->s, f->q, &first, 1), STORE_OK); /* the journal's record */
    assert_int_equal(store_queue_open(f->s, &kb, &qb), STORE_OK);
    fx_append_to(f, qb, 100, 110);
    assert_int_equal(store_flush(f->s), STORE_OK);
    assert_int_equal(store_peek(f->s, qb, v, 10, &n), STORE_OK);
    assert_int_equal(n, 10);
    store_ref_t refs[10];
    for (size_t i = 0; i < 10; i++)
        refs[i] = v[i].ref;
    uint64_t old_segment = refs[0].queue;
    assert_int_equal(store_commit(f->s, qb, refs, 10), STORE_OK);
    for (size_t i = 0; i < 10; i++) {
        int c = 0;
        assert_int_equal(store_tombstone(f->s, refs[i], &c), STORE_OK);
    }
    assert_int_equal(store_flush(f->s), STORE_OK);
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK); /* alpha's segment, all completed, is deleted */
    fx_assert_holds(f, 0, 10);
    fx_close(f);

    char path[512];
    snprintf(path, sizeof(path), "%s/index/data.mdb", f->dir);
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(store_queue_open(f->s, &kb, &qb), STORE_OK);
    fx_append_to(f, qb, 200, 210);
    assert_int_equal(store_flush(f->s), STORE_OK);
    assert_int_equal(store_peek(f->s, qb, v, 1, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_true(v[0].ref.queue > old_segment);
    fx_close(f);
    assert_int_equal(fx_open(f), STORE_OK);
    assert_int_equal(store_queue_open(f->s, &kb, &qb), STORE_OK);
    assert_int_equal(count_in(f, qb), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_index_rebuild_never_reuses_a_journaled_segment_id,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_row_entry_count_bit_flip_is_rejected_and_sizes_nothing,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_row_impossible_count_behind_valid_checksum_is_rejected,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_row_lowered_boundary_drops_no_acknowledged_item,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_row_boundary_below_its_entry_count_keeps_the_entries,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_rows_without_checksum_are_not_trusted_and_rewritten,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_directory_of_store_format_1_is_refused_unchanged,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_index_of_store_format_1_is_refused_unchanged, fx_teardown),
        cmocka_unit_test_teardown(test_directory_of_store_format_2_is_read_and_kept, fx_teardown),
        cmocka_unit_test_teardown(test_journal_of_a_newer_format_is_refused_unchanged, fx_teardown),
        cmocka_unit_test_teardown(test_drained_directory_without_format_row_is_taken_over,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_damaged_lane_row_is_dropped_alone, fx_teardown),
        cmocka_unit_test_teardown(test_damaged_row_without_file_moves_no_id_counter, fx_teardown),
        cmocka_unit_test_teardown(test_exhausted_segment_ids_fail_the_store_and_lose_nothing,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_index_permission_denied_is_an_operator_error, fx_teardown),
        cmocka_unit_test_teardown(test_index_truncated_to_zero_warns_and_rebuilds, fx_teardown),
        cmocka_unit_test_teardown(test_segment_deleted_while_running_fails_the_next_flush,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_segment_replaced_while_running_fails_the_next_flush,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_tombstone_into_deleted_segment_fails_the_flush, fx_teardown),
        cmocka_unit_test_teardown(test_delivery_counts_survive_restarts, fx_teardown),
        cmocka_unit_test_teardown(test_restarts_do_not_grow_the_index_file, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
