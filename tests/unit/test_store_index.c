/*
 * test_store_index.c - the disk store against a damaged or refused LMDB index, a segment file
 * taken away under a running store, and delivery counts across restarts (the store's
 * findings; each case failed before the index rows carried checksums).
 *
 * Each test builds a store in a fresh mkdtemp directory through the public API, closes it,
 * damages the index with LMDB's own API (the row layout restated from store/index_int.h on
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

/* ---- the index row format, restated (store/index_int.h) ----------------------------------- */

#define ROW_ENTRIES  24u
#define ROW_READABLE 40u
#define ENTRY_BYTES  56u /* 32 + id 8 + payload 16 */

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

/* Appends items tagged from..to-1 (id = tag, 16-byte payload), then flushes. */
static store_ref_t fx_append(fx_t *f, uint64_t from, uint64_t to)
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
        assert_int_equal(store_append(f->s, f->q, &it, &ref), STORE_OK);
    }
    return ref;
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

/* Rewrites the value of table `db`'s row under key (klen bytes) with edit(); fix_crc recomputes
 * the row's CRC (a row damaged in a way its checksum cannot see), else the CRC stays stale. */
static void index_edit(const fx_t *f, const char *db, const void *key, size_t klen,
                       void (*edit)(uint8_t *val, size_t *len), int fix_crc)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/index", f->dir);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(env, 1ull << 30), 0);
    assert_int_equal(mdb_env_open(env, path, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, db, 0, &dbi), 0);
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
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
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

/* Rows an older version wrote (no checksum) are read, trusted for their boundary, and
 * rewritten with a checksum. */
static void test_rows_without_checksum_are_read_and_rewritten(void **state)
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
    assert_int_equal(f->rep.rows_rejected, 0);
    fx_assert_holds(f, 0, 12);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_row_entry_count_bit_flip_is_rejected_and_sizes_nothing,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_row_impossible_count_behind_valid_checksum_is_rejected,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_row_lowered_boundary_drops_no_acknowledged_item,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_row_boundary_below_its_entry_count_keeps_the_entries,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_rows_without_checksum_are_read_and_rewritten, fx_teardown),
        cmocka_unit_test_teardown(test_damaged_lane_row_is_dropped_alone, fx_teardown),
        cmocka_unit_test_teardown(test_index_permission_denied_is_an_operator_error, fx_teardown),
        cmocka_unit_test_teardown(test_index_truncated_to_zero_warns_and_rebuilds, fx_teardown),
        cmocka_unit_test_teardown(test_segment_deleted_while_running_fails_the_next_flush,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_segment_replaced_while_running_fails_the_next_flush,
                                  fx_teardown),
        cmocka_unit_test_teardown(test_tombstone_into_deleted_segment_fails_the_flush, fx_teardown),
        cmocka_unit_test_teardown(test_delivery_counts_survive_restarts, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
