/*
 * test_recovery.c - crash points and recovery of the disk store (store/store.h).
 *
 * Every test drives a disk store through a rig that keeps a reference log of what the store
 * acknowledged, "crashes" it, reopens it with store_open_disk and checks the invariant against
 * the log. A crash is store_close without a flush (store_close never flushes: that is what a
 * crash leaves, minus pwrites the kernel already holds, which survive a process crash anyway),
 * or an armed fault (store_fault_arm) that fails one write / fsync / rename / unlink / LMDB put
 * and puts the store in its error state, then store_close.
 *
 * The invariant, checked after every reopen (rig_reopen):
 *   - every item whose append was followed by a successful store_flush and that was never
 *     tombstoned is queued again, exactly once, with its id, payload, tokens and arrival time,
 *     in arrival order within its lane;
 *   - nothing completed (tombstone, then a successful flush) comes back;
 *   - an item that was appended but never flushed, or whose tombstone was never flushed, may or
 *     may not come back, but never twice; nothing the test never appended appears;
 *   - the recovery report's entries_live and tokens_live are what the queues hold;
 *   - every item comes back with the deliveries its commits recorded (store_commit appends the
 *     count to the journal before it returns; a commit that failed may or may not have);
 *   - nothing is pending after an open.
 *
 * What the disk backend's refs mean (store.h): ref.queue names the segment, ref.offset the
 * entry's byte offset in it. The tests use that, the file name of a segment (16 hex digits
 * of its id + ".seg" under <dir>/segments) and of a journal file (".jnl" under <dir>/journal),
 * to find, count and damage files; nothing else of the private format (test_corruption.c
 * restates the format where a test needs it).
 *
 * LANES_TEST_STORE_IO_PLAIN (no io_uring) and LANES_TEST_STORE_SYNCFS (syncfs at the power
 * level) in the environment select the other I/O paths; CTest runs the file once per path.
 *
 * Longer than the house rule's ~600 lines: the fault sweeps rerun each case failing the 1st,
 * 2nd, ... Nth operation, and each case needs its own setup and expected state.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/fs.h"

#include "store/store.h"

/* ---- lanes and items ---------------------------------------------------------------------- */

enum { NL = 3 }; /* lanes every rig knows; lane 2 is another model */
static const char *const lane_model[NL] = {"llama", "llama", "qwen"};
static const uint64_t lane_sig[NL] = {0xA1A1, 0xA1A1, 0xB2B2};
static const uint32_t lane_no[NL] = {0, 1, 0};

enum { MAX_ITEMS = 1024, PAYLOAD = 40, MAX_LOGS = 64 };

/* What the test knows of one item. Its index in the log is its tag, carried in its id. */
typedef struct {
    int lane;
    uint32_t tokens;
    store_ref_t ref;
    int appended;   /* store_append returned OK */
    int acked;      /* ... and a store_flush returned OK after it */
    int tomb_tried; /* store_tombstone was called on it (whatever it returned) */
    int tomb_ok;    /* store_tombstone returned OK */
    int completed;  /* tomb_ok, and a store_flush returned OK after it: must never come back */
    int pending;
    int gone;            /* a reopen did not bring it back: it must never appear again */
    uint32_t deliveries; /* commits that returned OK */
    int delivery_unsure; /* a commit of it failed: its count may be one more */
} litem_t;

typedef struct {
    char dir[64];
    store_disk_config_t cfg;
    store_t *s;
    store_queue_t *q[NL];
    litem_t items[MAX_ITEMS];
    size_t n;
    store_status_t first_error; /* the first status other than OK a step got */
    store_recovery_t rep;       /* of the last open */
    char logs[MAX_LOGS][256];   /* log lines of the last open and after */
    int log_level[MAX_LOGS];
    size_t n_logs;
} rig_t;

static uint32_t tag_tokens(size_t tag)
{
    return (uint32_t)(1 + tag * 7 % 97);
}

static uint64_t tag_arrival(size_t tag)
{
    return 1000000007ull * (tag + 1);
}

static void tag_payload(size_t tag, uint8_t *buf)
{
    for (size_t i = 0; i < PAYLOAD; i++)
        buf[i] = (uint8_t)(tag * 13 + i * 7 + 1);
}

/* The per-item fields the store keeps without reading them (0 = none for some items). */
static uint32_t tag_prefix(size_t tag)
{
    return tag % 4 == 0 ? 0 : (uint32_t)(tag * 3 + 1);
}

static uint32_t tag_max_wait(size_t tag)
{
    return tag % 5 == 0 ? 0 : (uint32_t)(tag * 10 + 7);
}

static void tag_id(size_t tag, uint8_t *buf)
{
    for (size_t i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)tag >> (8 * i));
}

/* ---- files ---------------------------------------------------------------------------------- */

static void seg_path(const rig_t *r, uint64_t segment_id, char *buf, size_t size)
{
    snprintf(buf, size, "%s/segments/%016" PRIx64 ".seg", r->dir, segment_id);
}

static int path_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int seg_exists(const rig_t *r, uint64_t segment_id)
{
    char path[128];
    seg_path(r, segment_id, path, sizeof(path));
    return path_exists(path);
}

/* Files in <dir>/<sub> whose name ends with `suffix` (or starts with it, if prefix); each is
 * deleted as well when `remove`. */
static size_t each_entry(const rig_t *r, const char *sub, const char *fix, int prefix, int remove)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", r->dir, sub);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return 0;
    size_t n = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        size_t len = strlen(de->d_name), flen = strlen(fix);
        if (len < flen)
            continue;
        if (prefix ? strncmp(de->d_name, fix, flen) == 0
                   : strcmp(de->d_name + len - flen, fix) == 0) {
            assert_true(!remove || unlinkat(dirfd(dir), de->d_name, 0) == 0);
            n++;
        }
    }
    closedir(dir);
    return n;
}

static size_t count_entries(const rig_t *r, const char *sub, const char *fix, int prefix)
{
    return each_entry(r, sub, fix, prefix, 0);
}

static size_t count_segment_files(const rig_t *r)
{
    return count_entries(r, "segments", ".seg", 0);
}

static size_t count_journal_files(const rig_t *r)
{
    return count_entries(r, "journal", ".jnl", 0);
}

static uint8_t *read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    uint8_t *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *out_len = (size_t)len;
    return buf;
}

/* Overwrites `len` bytes at `off` of a file with a pattern that is nothing the store writes. */
static void scribble(const char *path, off_t off, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    uint8_t *junk = malloc(len);
    assert_non_null(junk);
    for (size_t i = 0; i < len; i++)
        junk[i] = (uint8_t)(0x5A ^ (i * 131));
    assert_int_equal(pwrite(fd, junk, len, off), (ssize_t)len);
    free(junk);
    close(fd);
}

/* ---- the rig ----------------------------------------------------------------------------------
 */

static void rig_log(void *ctx, int level, const char *msg)
{
    rig_t *r = ctx;
    if (getenv("STORE_TEST_LOGS") != NULL)
        fprintf(stderr, "  [store %d] %s\n", level, msg);
    if (r->n_logs < MAX_LOGS) {
        snprintf(r->logs[r->n_logs], sizeof(r->logs[0]), "%s", msg);
        r->log_level[r->n_logs++] = level;
    }
}

/* A log line at `level` that contains every one of the NULL-terminated strings. */
static int rig_logged(const rig_t *r, int level, ...)
{
    for (size_t i = 0; i < r->n_logs; i++) {
        if (r->log_level[i] != level)
            continue;
        va_list ap;
        va_start(ap, level);
        int all = 1;
        for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
            all &= strstr(r->logs[i], want) != NULL;
        va_end(ap);
        if (all)
            return 1;
    }
    return 0;
}

static void rig_open_queues(rig_t *r)
{
    for (int l = 0; l < NL; l++) {
        store_key_t k = {lane_model[l], lane_sig[l], lane_no[l]};
        r->q[l] = NULL;
        assert_int_equal(store_queue_open(r->s, &k, &r->q[l]), STORE_OK);
        assert_non_null(r->q[l]);
    }
}

/* The journal file size of the next rig_new (0: the store's default); the teardown resets it. */
static uint64_t rig_journal_bytes;
/* The idle time after which a drained current segment is sealed (0: the store's default); the
 * teardown resets it. */
static uint64_t rig_idle_seal_ms;
/* The bytes of entries a turn gathers before writing them ahead of its flush (0: the store's
 * default); the teardown resets it. */
static uint64_t rig_spill_bytes;

/* A rig on a fresh directory; *state holds it so the teardown frees it if the test fails. */
static rig_t *rig_new(void **state, uint64_t segment_max_bytes, store_durability_t durability)
{
    rig_t *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    *state = r;
    snprintf(r->dir, sizeof(r->dir), "/tmp/lanes-test-recovery-XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    r->cfg = (store_disk_config_t){
        .dir = r->dir,
        .segment_max_bytes = segment_max_bytes,
        .durability = durability,
        .log = rig_log,
        .log_ctx = r,
        .io = getenv("LANES_TEST_STORE_IO_PLAIN") ? STORE_IO_PLAIN : STORE_IO_AUTO,
        .sync = getenv("LANES_TEST_STORE_SYNCFS") ? STORE_SYNC_FS : STORE_SYNC_FILES,
        .journal_max_bytes = rig_journal_bytes,
        .idle_seal_ms = rig_idle_seal_ms,
        .spill_bytes = rig_spill_bytes};
    assert_int_equal(store_open_disk(&r->cfg, &r->rep, &r->s), STORE_OK);
    assert_int_equal(r->rep.segments, 0);
    assert_int_equal(r->rep.entries_live, 0);
    assert_int_equal(r->rep.index_rebuilt, 0);
    rig_open_queues(r);
    return r;
}

/* rig_new with plain I/O (the journal written with pwrite, no inotify), whatever the
 * environment says; the environment is left as it was (the variable is read at the open only). */
static rig_t *rig_new_plain(void **state, uint64_t segment_max_bytes, store_durability_t durability)
{
    const char *was = getenv("LANES_TEST_STORE_IO_PLAIN");
    assert_int_equal(setenv("LANES_TEST_STORE_IO_PLAIN", "1", 1), 0);
    rig_t *r = rig_new(state, segment_max_bytes, durability);
    if (was == NULL)
        assert_int_equal(unsetenv("LANES_TEST_STORE_IO_PLAIN"), 0);
    return r;
}

static void rig_free(rig_t *r)
{
    if (r == NULL)
        return;
    store_close(r->s);
    fs_remove_tree(r->dir);
    free(r);
}

static int rig_teardown(void **state)
{
    rig_journal_bytes = 0;
    rig_idle_seal_ms = 0;
    rig_spill_bytes = 0;
    store_fault_disarm_all();
    rig_free(*state);
    *state = NULL;
    return 0;
}

/* Records the first failure; returns 1 when st is OK. */
static int rig_ok(rig_t *r, store_status_t st)
{
    if (st != STORE_OK && r->first_error == STORE_OK)
        r->first_error = st;
    return st == STORE_OK;
}

static int rig_append(rig_t *r, int lane)
{
    assert_true(r->n < MAX_ITEMS);
    size_t tag = r->n;
    uint8_t id[8], payload[PAYLOAD];
    tag_id(tag, id);
    tag_payload(tag, payload);
    store_item_t item = {.id = id,
                         .id_len = sizeof(id),
                         .payload = payload,
                         .payload_len = sizeof(payload),
                         .tokens = tag_tokens(tag),
                         .arrival_ns = tag_arrival(tag),
                         .prefix_tokens = tag_prefix(tag),
                         .max_wait_ms = tag_max_wait(tag)};
    store_ref_t ref;
    if (!rig_ok(r, store_append(r->s, r->q[lane], &item, &ref)))
        return 0;
    r->items[r->n++] = (litem_t){.lane = lane, .tokens = item.tokens, .ref = ref, .appended = 1};
    return 1;
}

static int rig_flush(rig_t *r)
{
    if (!rig_ok(r, store_flush(r->s)))
        return 0;
    for (size_t i = 0; i < r->n; i++) {
        litem_t *it = &r->items[i];
        if (it->appended && !it->gone)
            it->acked = 1;
        if (it->tomb_ok)
            it->completed = 1;
    }
    return 1;
}

/* Commits the first k queued items of a lane (k = 0: all peek shows); they become pending. */
static int rig_commit(rig_t *r, int lane, size_t k)
{
    store_view_t views[MAX_ITEMS];
    size_t n = 0;
    if (!rig_ok(r, store_peek(r->s, r->q[lane], views, k ? k : MAX_ITEMS, &n)))
        return 0;
    assert_true(k == 0 || n == k);
    store_ref_t refs[MAX_ITEMS];
    size_t tags[MAX_ITEMS];
    for (size_t i = 0; i < n; i++) {
        refs[i] = views[i].ref;
        tags[i] = 0;
        for (size_t b = 0; b < 8; b++)
            tags[i] |= (size_t)views[i].id_view[b] << (8 * b);
        assert_true(tags[i] < r->n);
    }
    if (!rig_ok(r, store_commit(r->s, r->q[lane], refs, n))) {
        for (size_t i = 0; i < n; i++)
            r->items[tags[i]].delivery_unsure = 1;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        assert_false(r->items[tags[i]].pending);
        r->items[tags[i]].pending = 1;
        r->items[tags[i]].deliveries++;
    }
    return 1;
}

static int rig_tombstone(rig_t *r, size_t tag)
{
    litem_t *it = &r->items[tag];
    assert_true(it->pending);
    it->tomb_tried = 1;
    int done = -1;
    if (!rig_ok(r, store_tombstone(r->s, it->ref, &done)))
        return 0;
    assert_int_equal(done, 1);
    it->tomb_ok = 1;
    it->pending = 0;
    return 1;
}

static int rig_return(rig_t *r, size_t tag)
{
    litem_t *it = &r->items[tag];
    assert_true(it->pending);
    if (!rig_ok(r, store_return(r->s, &it->ref, 1)))
        return 0;
    it->pending = 0;
    return 1;
}

/* The tags of a lane's items that are alive (appended, not gone, not tombstoned), in order. */
static size_t rig_lane_items(const rig_t *r, int lane, size_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        const litem_t *it = &r->items[i];
        if (it->lane == lane && it->appended && !it->gone && !it->tomb_ok)
            out[n++] = i;
    }
    return n;
}

/* A crash: close without flushing. */
static void rig_crash(rig_t *r)
{
    store_close(r->s);
    r->s = NULL;
}

/* Must this item be back after a reopen? */
static int rig_must_survive(const litem_t *it)
{
    return it->appended && it->acked && !it->tomb_tried && !it->gone;
}

/*
 * Reopens the store (faults disarmed) and checks the invariant against the log. Afterwards the
 * log says what the store holds now: every item that came back is live and acknowledged
 * (recovery recorded it), every appended item that did not is gone for good.
 */
static void rig_reopen(rig_t *r)
{
    store_fault_disarm_all();
    if (r->s != NULL)
        rig_crash(r);
    r->n_logs = 0;
    r->first_error = STORE_OK;
    memset(&r->rep, 0xA5, sizeof(r->rep));
    assert_int_equal(store_open_disk(&r->cfg, &r->rep, &r->s), STORE_OK);
    assert_non_null(r->s);
    assert_int_equal(store_pending_count(r->s), 0);
    assert_int_equal(store_unflushed_bytes(r->s), 0);

    uint8_t *seen = calloc(r->n + 1, 1);
    store_view_t *views = malloc(MAX_ITEMS * sizeof(*views));
    assert_non_null(seen);
    assert_non_null(views);
    uint64_t entries = 0, tokens = 0;
    int lanes_seen[NL] = {0};
    store_queue_t *q = NULL;
    store_key_t key;
    while (store_queue_next(r->s, q, &q, &key, NULL)) {
        int lane = -1;
        for (int l = 0; l < NL; l++) {
            if (strcmp(key.model, lane_model[l]) == 0 && key.signature == lane_sig[l] &&
                key.lane == lane_no[l])
                lane = l;
        }
        assert_true(lane >= 0);
        assert_false(lanes_seen[lane]);
        lanes_seen[lane] = 1;
        size_t n = 0;
        assert_int_equal(store_peek(r->s, q, views, MAX_ITEMS, &n), STORE_OK);
        assert_true(n < MAX_ITEMS);
        uint64_t q_items = 0, q_tokens = 0;
        store_queue_count(q, &q_items, &q_tokens);
        assert_int_equal(q_items, n);
        uint64_t lane_tokens = 0;
        size_t prev = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            const store_view_t *v = &views[i];
            assert_int_equal(v->id_len, 8);
            size_t tag = 0;
            for (size_t b = 0; b < 8; b++)
                tag |= (size_t)v->id_view[b] << (8 * b);
            if (tag >= r->n || seen[tag] || !r->items[tag].appended || r->items[tag].gone ||
                r->items[tag].completed) {
                print_error("item %zu came back but %s\n", tag,
                            tag >= r->n               ? "was never appended"
                            : seen[tag]               ? "it came back twice"
                            : !r->items[tag].appended ? "its append failed"
                            : r->items[tag].completed ? "it was completed"
                                                      : "an earlier reopen had dropped it");
                fail();
            }
            seen[tag] = 1;
            litem_t *it = &r->items[tag];
            assert_int_equal(it->lane, lane);
            assert_int_equal(v->tokens, tag_tokens(tag));
            assert_int_equal(v->arrival_ns, tag_arrival(tag));
            assert_int_equal(v->signature, lane_sig[lane]);
            assert_int_equal(v->prefix_tokens, tag_prefix(tag));
            assert_int_equal(v->max_wait_ms, tag_max_wait(tag));
            if (v->deliveries != it->deliveries &&
                !(it->delivery_unsure && v->deliveries == it->deliveries + 1)) {
                print_error("item %zu came back with %" PRIu32 " deliveries, its commits "
                            "recorded %" PRIu32 "%s\n",
                            tag, v->deliveries, it->deliveries,
                            it->delivery_unsure ? " (or one more)" : "");
                fail();
            }
            it->deliveries = v->deliveries;
            uint8_t payload[PAYLOAD];
            tag_payload(tag, payload);
            assert_int_equal(v->payload_len, PAYLOAD);
            assert_memory_equal(v->payload_view, payload, PAYLOAD);
            /* Arrival order within the lane. */
            assert_true(prev == SIZE_MAX || prev < tag);
            prev = tag;
            it->ref = v->ref;
            entries++;
            tokens += v->tokens;
            lane_tokens += v->tokens;
        }
        assert_int_equal(q_tokens, lane_tokens);
    }
    for (size_t i = 0; i < r->n; i++) {
        if (rig_must_survive(&r->items[i]) && !seen[i]) {
            print_error("item %zu (lane %d) was acknowledged and never completed but did not "
                        "come back\n",
                        i, r->items[i].lane);
            fail();
        }
    }
    assert_int_equal(r->rep.entries_live, entries);
    assert_int_equal(r->rep.tokens_live, tokens);
    for (size_t i = 0; i < r->n; i++) {
        litem_t *it = &r->items[i];
        if (seen[i]) {
            *it = (litem_t){.lane = it->lane,
                            .tokens = it->tokens,
                            .ref = it->ref,
                            .appended = 1,
                            .acked = 1,
                            .deliveries = it->deliveries};
        } else if (it->appended) {
            it->gone = 1;
            it->pending = 0;
        }
    }
    free(seen);
    free(views);
    rig_open_queues(r);
}

static size_t rig_count_back(const rig_t *r, size_t from, size_t to)
{
    size_t n = 0;
    for (size_t i = from; i < to; i++)
        n += r->items[i].appended && !r->items[i].gone;
    return n;
}

/* Bytes of one entry: every item has the same id and payload sizes. */
static uint64_t rig_entry_size(const rig_t *r)
{
    for (size_t i = 1; i < r->n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (r->items[i].ref.queue == r->items[j].ref.queue && r->items[i].appended &&
                r->items[j].appended)
                return r->items[i].ref.offset - r->items[j].ref.offset;
        }
    }
    fail_msg("no two items share a segment");
    return 0;
}

/* Appends to `lane` until its segment is full: the next append of the lane rolls over. */
static void rig_fill_segment(rig_t *r, int lane, uint64_t segment_max)
{
    assert_true(rig_append(r, lane));
    assert_true(rig_append(r, lane));
    uint64_t e = rig_entry_size(r);
    assert_true(e > 0);
    for (;;) {
        const litem_t *last = &r->items[r->n - 1];
        /* The segment is last->ref.offset + e bytes long; one more entry still fits? */
        if (last->ref.offset + 2 * e > segment_max)
            return;
        assert_true(rig_append(r, lane));
    }
}

/* ---- crash points ------------------------------------------------------------------------- */

static void test_crash_after_append_before_flush_keeps_every_flushed_item(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 5; i++) {
        assert_true(rig_append(r, 0));
        assert_true(rig_append(r, 1));
    }
    assert_true(rig_flush(r));
    size_t acked = r->n;
    /* Lane 0 gets 3 unflushed entries; lane 2 a first segment the index never heard of. */
    for (int i = 0; i < 3; i++)
        assert_true(rig_append(r, 0));
    size_t lane2_from = r->n;
    for (int i = 0; i < 2; i++)
        assert_true(rig_append(r, 2));
    rig_crash(r);
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, acked), acked);
    /* Appends are gathered until the flush: a crash before it left no byte of them in a file,
     * so nothing unacknowledged comes back and there is no tail to cut. */
    assert_int_equal(r->rep.torn_tails, 0);
    assert_int_equal(r->rep.torn_bytes, 0);
    assert_int_equal(rig_count_back(r, acked, r->n), 0);
    /* The new segment's file (made at the append, header only) is adopted, found empty and
     * removed. */
    assert_int_equal(r->rep.adopted_files, 1);
    assert_int_equal(r->rep.removed_segments, 1);
    assert_int_equal(r->rep.corrupt_regions, 0);
    assert_int_equal(r->rep.missing_files, 0);
    (void)lane2_from;
    /* The recovered store works: append, flush, crash, reopen. */
    assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    rig_reopen(r);
    assert_int_equal(r->rep.torn_tails, 0);
    assert_int_equal(rig_count_back(r, 0, r->n), acked + 1);
}

/* The crash point a pwrite per append used to leave at every append: the bytes are in the
 * files (the flush wrote them), the index transaction that would record them is not. */
static void test_crash_after_flush_writes_before_index_cuts_tails_and_adopts_new_file(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 5; i++) {
        assert_true(rig_append(r, 0));
        assert_true(rig_append(r, 1));
    }
    assert_true(rig_flush(r));
    size_t acked = r->n;
    /* Lane 0 gets 3 entries past its durable boundary; lane 2 a first segment the index never
     * heard of. */
    for (int i = 0; i < 3; i++)
        assert_true(rig_append(r, 0));
    size_t lane2_from = r->n;
    for (int i = 0; i < 2; i++)
        assert_true(rig_append(r, 2));
    uint64_t e = rig_entry_size(r);
    store_fault_arm(STORE_FAULT_MDB_PUT, 1);
    assert_false(rig_flush(r));
    assert_int_equal(r->first_error, STORE_EIO);
    rig_crash(r);
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, acked), acked);
    /* Bytes past the recorded boundary were never acknowledged: cut, and counted exactly. */
    assert_int_equal(r->rep.torn_tails, 1);
    assert_int_equal(r->rep.torn_bytes, 3 * e);
    assert_int_equal(rig_count_back(r, acked, lane2_from), 0);
    /* The unindexed file is adopted whole (its entries were never acknowledged either; they
     * may come back, once). */
    assert_int_equal(r->rep.adopted_files, 1);
    assert_int_equal(rig_count_back(r, lane2_from, r->n), 2);
    assert_int_equal(r->rep.corrupt_regions, 0);
    assert_int_equal(r->rep.missing_files, 0);
    /* The recovered store works: append, flush, crash, reopen. */
    assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    rig_reopen(r);
    assert_int_equal(r->rep.torn_tails, 0);
    assert_int_equal(rig_count_back(r, 0, r->n), acked + 3);
}

static void test_crash_after_flush_before_index_update_cuts_only_unacknowledged(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 6; i++) {
        assert_true(rig_append(r, 0));
        assert_true(rig_append(r, 1));
    }
    assert_true(rig_flush(r));
    size_t acked = r->n;
    for (int i = 0; i < 4; i++)
        assert_true(rig_append(r, 0));
    uint64_t e = rig_entry_size(r);
    /* The data is in the file, the index transaction that would record the boundary fails. */
    unsigned long fired = store_fault_fired(STORE_FAULT_MDB_PUT);
    store_fault_arm(STORE_FAULT_MDB_PUT, 1);
    assert_false(rig_flush(r));
    assert_int_equal(r->first_error, STORE_EIO);
    assert_int_equal(store_fault_fired(STORE_FAULT_MDB_PUT), fired + 1);
    /* Failed: nothing more is acknowledged. */
    assert_int_equal(store_flush(r->s), STORE_EIO);
    assert_false(rig_append(r, 1));
    rig_crash(r);
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, acked), acked);
    assert_int_equal(rig_count_back(r, acked, r->n), 0);
    assert_int_equal(r->rep.torn_tails, 1);
    assert_int_equal(r->rep.torn_bytes, 4 * e);
    assert_int_equal(r->rep.corrupt_regions, 0);
}

static void test_crash_between_commit_steps_requeues_committed_items(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 8; i++)
        assert_true(rig_append(r, 0));
    for (int i = 0; i < 3; i++)
        assert_true(rig_append(r, 2));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 5));
    assert_true(rig_commit(r, 2, 3));
    assert_true(rig_tombstone(r, 0));
    assert_true(rig_flush(r));
    assert_true(rig_return(r, 1));
    assert_true(rig_commit(r, 0, 1)); /* item 1 again: a second delivery */
    assert_int_equal(store_pending_count(r->s), 7);
    rig_crash(r);
    rig_reopen(r);
    /* Everything committed and not completed is queued again, with no delivery counted. */
    assert_int_equal(r->rep.entries_live, 10);
    assert_int_equal(r->rep.entries_tombstoned, 1);
    assert_true(r->items[0].gone);
    for (size_t i = 1; i < r->n; i++)
        assert_false(r->items[i].gone);
}

/* A commit refused for memory (the journal's pwrite buffer, disk_journal.c invariant 6) counts
 * no delivery, also when its records span journal files: the items stay queued with the
 * deliveries they had, the store stays usable, and a restart finds the same counts. Plain I/O:
 * the journal is written with pwrite, from the buffer. */
static void test_commit_refused_for_memory_counts_no_delivery(void **state)
{
    rig_journal_bytes = 64 + 24 * 8; /* 8 records a file */
    rig_t *r = rig_new_plain(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 20; i++)
        assert_true(rig_append(r, 0));
    assert_true(rig_append(r, 1));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 5)); /* 3 records left in the current journal file */
    /* 12 records: 3 would fit this file, 8 the next, 1 the one after. */
    store_view_t v[12];
    store_ref_t refs[12];
    size_t n = 0;
    assert_int_equal(store_peek(r->s, r->q[0], v, 12, &n), STORE_OK);
    assert_int_equal(n, 12);
    for (size_t i = 0; i < n; i++)
        refs[i] = v[i].ref;
    unsigned long fired = store_fault_fired(STORE_FAULT_ALLOC);
    store_fault_arm(STORE_FAULT_ALLOC, 1);
    assert_int_equal(store_commit(r->s, r->q[0], refs, n), STORE_ENOMEM);
    assert_int_equal(store_fault_fired(STORE_FAULT_ALLOC), fired + 1);
    assert_int_equal(store_pending_count(r->s), 5);
    assert_true(rig_commit(r, 1, 1)); /* the store still takes commits */
    assert_int_equal(store_pending_count(r->s), 6);
    /* After a crash every item has exactly the deliveries its successful commits counted: none
     * of the refused commit's counts reached the journal. */
    rig_reopen(r);
    assert_int_equal(r->rep.entries_live, 21);
}

/* Journal files deleted under a stopped store lose their tombstones and delivery counts: the
 * completed items come back and are delivered again (never a loss), and recovery says so with
 * a warning and tombstones_missing, where a crash before the index commit (the case below) is
 * an ordinary repair. */
/* Six items of lane 0 appended and flushed, the first three committed, items 0 and 2
 * tombstoned (not yet flushed): where the two journal cases part. */
static rig_t *rig_two_tombstoned(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 6; i++)
        assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 3));
    assert_true(rig_tombstone(r, 0));
    assert_true(rig_tombstone(r, 2));
    return r;
}

static void test_lost_journal_tombstones_are_reported(void **state)
{
    rig_t *r = rig_two_tombstoned(state);
    assert_true(rig_flush(r));
    rig_crash(r);
    assert_true(each_entry(r, "journal", ".jnl", 0, 1) > 0);
    for (int k = 0; k < 3; k++) /* what the lost journal held: back, never delivered */
        r->items[k] = (litem_t){
            .lane = r->items[k].lane, .tokens = r->items[k].tokens, .appended = 1, .acked = 1};
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, r->n), 6);
    assert_int_equal(r->rep.tombstones_missing, 2);
    assert_int_equal(r->rep.deleted_count_repairs, 1);
    assert_true(rig_logged(r, STORE_LOG_WARN, "completed items come back", NULL));
    rig_reopen(r); /* repaired and recorded: nothing missing the second time */
    assert_int_equal(r->rep.tombstones_missing, 0);
}

static void test_crash_between_tombstone_and_deleted_count_keeps_item_completed(void **state)
{
    rig_t *r = rig_two_tombstoned(state);
    /* The flush appends the tombstones to the journal; the index transaction that would carry
     * the deleted count fails (a crash between the two). */
    store_fault_arm(STORE_FAULT_MDB_PUT, 1);
    assert_false(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    assert_true(r->items[0].gone);
    assert_true(r->items[2].gone);
    assert_false(r->items[1].gone);
    assert_int_equal(rig_count_back(r, 0, r->n), 4);
    assert_int_equal(r->rep.entries_tombstoned, 2);
    assert_int_equal(r->rep.deleted_count_repairs, 1);
    /* Repaired and recorded: the next open finds nothing to repair. */
    rig_reopen(r);
    assert_int_equal(r->rep.deleted_count_repairs, 0);
    assert_int_equal(r->rep.entries_tombstoned, 2);
}

enum { SMALL_SEGMENT = 1024 };

static void test_crash_during_rollover_header_write(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_fill_segment(r, 0, SMALL_SEGMENT);
    assert_true(rig_flush(r));
    size_t acked = r->n;
    size_t files = count_segment_files(r);
    assert_int_equal(files, 1);
    /* The next append starts a new segment: its header write fails. */
    unsigned long fired = store_fault_fired(STORE_FAULT_WRITE);
    store_fault_arm(STORE_FAULT_WRITE, 1);
    assert_false(rig_append(r, 0));
    assert_int_equal(r->first_error, STORE_EIO);
    assert_int_equal(store_fault_fired(STORE_FAULT_WRITE), fired + 1);
    assert_int_equal(count_segment_files(r), files); /* the half-made file is removed */
    assert_int_equal(store_flush(r->s), STORE_EIO);
    assert_false(rig_append(r, 1));
    rig_crash(r);
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, r->n), acked);
    assert_int_equal(r->rep.adopted_files, 0);
    assert_int_equal(r->rep.torn_tails, 0);
    assert_int_equal(r->rep.segments, 1);
    /* Appends resume in a new segment. */
    assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, r->n), acked + 1);
    assert_int_equal(r->rep.segments, 2);
}

/* Power level: the process level syncs no directory (a crash of the process loses no entry).
 * The flush syncs the directory before it writes any entry, so the new file holds its header
 * only when that sync fails. */
static void test_crash_during_rollover_directory_fsync(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_POWER);
    rig_fill_segment(r, 1, SMALL_SEGMENT);
    assert_true(rig_flush(r));
    size_t acked = r->n;
    size_t files = count_segment_files(r);
    /* The new segment's file and header are written; the directory sync of the flush after it
     * fails. */
    unsigned long fired = store_fault_fired(STORE_FAULT_FSYNC);
    store_fault_arm(STORE_FAULT_FSYNC, 1);
    assert_true(rig_append(r, 1));
    assert_false(rig_flush(r));
    assert_int_equal(r->first_error, STORE_EIO);
    assert_int_equal(store_fault_fired(STORE_FAULT_FSYNC), fired + 1);
    /* A failed sync is final: no flush, no append, even with the fault gone. */
    assert_int_equal(store_flush(r->s), STORE_EIO);
    assert_false(rig_append(r, 0));
    size_t files_after = count_segment_files(r);
    assert_true(files_after == files || files_after == files + 1);
    rig_crash(r);
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, r->n), acked);
    /* If the new file was left behind it held no entry: adopted and removed at open. */
    assert_int_equal(r->rep.adopted_files, files_after - files);
    assert_int_equal(r->rep.removed_segments, files_after - files);
    assert_int_equal(count_segment_files(r), files);
    assert_int_equal(r->rep.entries_live, acked);
}

/* Fills two segments of lane 0, completes all but the last entry of the first (flushed). Returns
 * the tag of that last entry: tombstoning it deletes the first segment's file. */
static size_t rig_prepare_drained_segment(rig_t *r, uint64_t *out_segment)
{
    rig_fill_segment(r, 0, SMALL_SEGMENT);
    size_t first_segment_items = r->n;
    for (int i = 0; i < 3; i++)
        assert_true(rig_append(r, 0));
    assert_int_not_equal(r->items[r->n - 1].ref.queue, r->items[0].ref.queue);
    assert_true(rig_append(r, 2));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, first_segment_items));
    for (size_t i = 0; i + 1 < first_segment_items; i++)
        assert_true(rig_tombstone(r, i));
    assert_true(rig_flush(r));
    *out_segment = r->items[0].ref.queue;
    assert_true(seg_exists(r, *out_segment));
    return first_segment_items - 1;
}

static void test_crash_during_whole_file_deletion_unlink_adopts_and_removes_file(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    uint64_t seg;
    size_t last = rig_prepare_drained_segment(r, &seg);
    /* The flush removes the index row, then the unlink fails: what a crash between the two
     * leaves. */
    unsigned long fired = store_fault_fired(STORE_FAULT_UNLINK);
    store_fault_arm(STORE_FAULT_UNLINK, 1);
    assert_true(rig_tombstone(r, last));
    assert_false(rig_flush(r));
    assert_int_equal(r->first_error, STORE_EIO);
    assert_int_equal(store_fault_fired(STORE_FAULT_UNLINK), fired + 1);
    assert_true(seg_exists(r, seg));
    assert_int_equal(store_flush(r->s), STORE_EIO);
    rig_crash(r);
    rig_reopen(r);
    /* Recovery adopts the file the index no longer knows, finds it all tombstoned, deletes it. */
    assert_int_equal(r->rep.adopted_files, 1);
    assert_int_equal(r->rep.removed_segments, 1);
    assert_int_equal(r->rep.missing_files, 0);
    assert_false(seg_exists(r, seg));
    for (size_t i = 0; i <= last; i++)
        assert_true(r->items[i].gone);
    assert_int_equal(rig_count_back(r, 0, r->n), r->n - (last + 1));
}

/* Power level (the process level syncs no directory): the flush that completes the segment
 * unlinks its file after the index commit; the next flush syncs the directory first, and that
 * sync fails. */
static void test_crash_during_whole_file_deletion_directory_fsync(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_POWER);
    uint64_t seg;
    size_t last = rig_prepare_drained_segment(r, &seg);
    assert_true(rig_tombstone(r, last));
    assert_true(rig_flush(r));
    size_t before = r->n;
    assert_true(rig_append(r, 2));
    unsigned long fired = store_fault_fired(STORE_FAULT_FSYNC);
    store_fault_arm(STORE_FAULT_FSYNC, 1);
    assert_false(rig_flush(r));
    assert_int_equal(r->first_error, STORE_EIO);
    assert_int_equal(store_fault_fired(STORE_FAULT_FSYNC), fired + 1);
    assert_int_equal(store_flush(r->s), STORE_EIO);
    rig_crash(r);
    rig_reopen(r);
    assert_false(seg_exists(r, seg));
    assert_int_equal(r->rep.missing_files, 0);
    assert_int_equal(r->rep.adopted_files, 0);
    for (size_t i = 0; i <= last; i++)
        assert_true(r->items[i].gone);
    assert_int_equal(rig_count_back(r, 0, before), before - (last + 1));
    /* The failed sync came before any entry of that flush was written. */
    assert_int_equal(rig_count_back(r, before, r->n), 0);
}

/* Lanes and shapes are not files: 2 models x 8 shapes x 16 lanes take one segment file per
 * model, and each lane comes back whole and in order from the shared files, its front's arrival
 * known. */
static void test_many_lanes_and_shapes_share_one_file_per_model(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    enum { MODELS = 2, SHAPES = 8, LANES = 16, PER = 3 };
    static const char *const models[MODELS] = {"llama", "qwen"};
    store_queue_t *q[MODELS][SHAPES][LANES];
    for (int m = 0; m < MODELS; m++) {
        for (int sh = 0; sh < SHAPES; sh++) {
            for (int l = 0; l < LANES; l++) {
                store_key_t k = {models[m], 0x1000u + (uint64_t)sh, (uint32_t)l};
                assert_int_equal(store_queue_open(r->s, &k, &q[m][sh][l]), STORE_OK);
            }
        }
    }
    /* Round robin over every lane, PER times: entries of all lanes interleave in the files. */
    for (int k = 0; k < PER; k++) {
        for (int m = 0; m < MODELS; m++) {
            for (int sh = 0; sh < SHAPES; sh++) {
                for (int l = 0; l < LANES; l++) {
                    uint64_t tag = (((uint64_t)k * MODELS + m) * SHAPES + sh) * LANES + l;
                    uint8_t id[8];
                    tag_id(tag, id);
                    store_item_t it = {.id = id,
                                       .id_len = 8,
                                       .tokens = (uint32_t)(1 + l),
                                       .arrival_ns = tag,
                                       .prefix_tokens = (uint32_t)sh,
                                       .max_wait_ms = (uint32_t)tag};
                    assert_int_equal(store_append(r->s, q[m][sh][l], &it, NULL), STORE_OK);
                }
            }
        }
        assert_true(rig_flush(r));
    }
    assert_int_equal(count_segment_files(r), MODELS);
    store_close(r->s);
    r->s = NULL;
    memset(&r->rep, 0, sizeof(r->rep));
    assert_int_equal(store_open_disk(&r->cfg, &r->rep, &r->s), STORE_OK);
    assert_int_equal(r->rep.segments, MODELS);
    assert_int_equal(r->rep.entries_live, MODELS * SHAPES * LANES * PER);
    size_t queues = 0;
    store_queue_t *it = NULL;
    store_key_t key;
    while (store_queue_next(r->s, it, &it, &key, NULL)) {
        int m = strcmp(key.model, "llama") == 0 ? 0 : 1;
        int sh = (int)(key.signature - 0x1000u);
        assert_true(sh >= 0 && sh < SHAPES && key.lane < LANES);
        store_view_t v[PER + 1];
        size_t n = 0;
        assert_int_equal(store_peek(r->s, it, v, PER + 1, &n), STORE_OK);
        assert_int_equal(n, PER);
        uint64_t oldest = UINT64_MAX;
        assert_true(store_queue_oldest(r->s, it, &oldest));
        assert_int_equal(oldest, v[0].arrival_ns);
        for (size_t k = 0; k < n; k++) {
            uint64_t tag = (((uint64_t)k * MODELS + m) * SHAPES + sh) * LANES + key.lane;
            assert_int_equal(v[k].arrival_ns, tag);
            assert_int_equal(v[k].signature, key.signature);
            assert_int_equal(v[k].tokens, 1 + key.lane);
            assert_int_equal(v[k].prefix_tokens, (uint32_t)sh);
            assert_int_equal(v[k].max_wait_ms, (uint32_t)tag);
        }
        queues++;
    }
    assert_int_equal(queues, MODELS * SHAPES * LANES);
}

/* ---- the error state ------------------------------------------------------------------------ */

static void test_error_state_refuses_everything_and_never_retries_fsync(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_POWER);
    for (int i = 0; i < 3; i++)
        assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 2));
    for (int i = 0; i < 2; i++)
        assert_true(rig_append(r, 0));
    unsigned long fired = store_fault_fired(STORE_FAULT_FSYNC);
    store_fault_arm(STORE_FAULT_FSYNC, 1);
    assert_int_equal(store_flush(r->s), STORE_EIO);
    assert_int_equal(store_fault_fired(STORE_FAULT_FSYNC), fired + 1);
    assert_true(rig_logged(r, STORE_LOG_ERROR, "fdatasync", NULL));

    /* Nothing that would acknowledge anything succeeds any more. */
    uint8_t byte = 1;
    store_item_t item = {.id = &byte, .id_len = 1, .tokens = 1};
    store_ref_t ref = {7, 7};
    assert_int_equal(store_append(r->s, r->q[0], &item, &ref), STORE_EIO);
    assert_int_equal(ref.queue, 7);
    assert_int_equal(store_flush(r->s), STORE_EIO);
    int done = -1;
    assert_int_equal(store_tombstone(r->s, r->items[0].ref, &done), STORE_EIO);
    assert_int_equal(done, -1);
    assert_int_equal(store_return(r->s, &r->items[1].ref, 1), STORE_EIO);
    store_view_t v;
    size_t n = 99;
    assert_int_equal(store_peek(r->s, r->q[0], &v, 1, &n), STORE_EIO);
    assert_int_equal(store_commit(r->s, r->q[0], &r->items[2].ref, 1), STORE_EIO);
    assert_int_equal(store_queue_target_set(r->s, r->q[0], 5), STORE_EIO);
    assert_int_equal(store_current_shape_set(r->s, "llama", 5), STORE_EIO);
    store_key_t k = {"other", 1, 0};
    store_queue_t *q = NULL;
    assert_int_equal(store_queue_open(r->s, &k, &q), STORE_EIO);
    assert_null(q);

    /* The failed sync is never retried: with the fault armed again, no sync is even tried. */
    store_fault_arm(STORE_FAULT_FSYNC, 1);
    assert_int_equal(store_flush(r->s), STORE_EIO);
    assert_int_equal(store_fault_fired(STORE_FAULT_FSYNC), fired + 1);
    store_fault_disarm_all();
    assert_int_equal(store_flush(r->s), STORE_EIO);

    rig_crash(r);
    rig_reopen(r);
    /* The 3 acknowledged items (2 of them were pending) are back. */
    assert_int_equal(rig_count_back(r, 0, 3), 3);
}

/* ---- fault sweep ------------------------------------------------------------------------------
 */

/*
 * The scenario of the sweep. Every step stops the scenario at the first failure. Three lanes,
 * 1 KiB segments (11 entries each), so lanes roll over and a drained segment is deleted.
 */
static int sweep_scenario(rig_t *r)
{
    /* 24 items per lane: three segments each. */
    for (int i = 0; i < 24; i++) {
        for (int l = 0; l < NL; l++) {
            if (!rig_append(r, l))
                return 0;
        }
    }
    if (!rig_flush(r))
        return 0;
    /* Commit 12 per lane, complete 6 of them (flushed), then the rest of the first segment. */
    size_t tags[NL][MAX_ITEMS];
    for (int l = 0; l < NL; l++) {
        rig_lane_items(r, l, tags[l]);
        if (!rig_commit(r, l, 12))
            return 0;
    }
    for (int l = 0; l < NL; l++) {
        for (int i = 0; i < 6; i++) {
            if (!rig_tombstone(r, tags[l][i]))
                return 0;
        }
    }
    if (!rig_flush(r) || !rig_ok(r, store_queue_target_set(r->s, r->q[0], 400)) ||
        !rig_ok(r, store_current_shape_set(r->s, "llama", 0xA1A1)))
        return 0;
    for (int l = 0; l < NL; l++) {
        for (int i = 6; i < 11; i++) { /* the last one drains the first segment: file deleted */
            if (!rig_tombstone(r, tags[l][i]))
                return 0;
        }
    }
    for (int l = 0; l < NL; l++) {
        if (!rig_return(r, tags[l][11]))
            return 0;
    }
    if (!rig_flush(r))
        return 0;
    /* 12 more per lane (roll-overs), commit 4, complete 2, flush. */
    for (int i = 0; i < 12; i++) {
        for (int l = 0; l < NL; l++) {
            if (!rig_append(r, l))
                return 0;
        }
    }
    if (!rig_flush(r))
        return 0;
    for (int l = 0; l < NL; l++) {
        size_t lane_tags[MAX_ITEMS];
        rig_lane_items(r, l, lane_tags);
        if (!rig_commit(r, l, 4) || !rig_tombstone(r, lane_tags[0]) ||
            !rig_tombstone(r, lane_tags[1]))
            return 0;
    }
    return rig_flush(r);
}

/* After a recovery the store works: one more round of appends, commits and completions. */
static void sweep_after_recovery(rig_t *r)
{
    for (int l = 0; l < NL; l++) {
        assert_true(rig_append(r, l));
        assert_true(rig_append(r, l));
    }
    assert_true(rig_flush(r));
    for (int l = 0; l < NL; l++) {
        size_t lane_tags[MAX_ITEMS];
        size_t n = rig_lane_items(r, l, lane_tags);
        assert_true(n >= 2);
        assert_true(rig_commit(r, l, 1));
        assert_true(rig_tombstone(r, lane_tags[0]));
    }
    assert_true(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    assert_int_equal(r->rep.torn_tails, 0);
    assert_int_equal(r->rep.corrupt_regions, 0);
    assert_int_equal(r->rep.missing_files, 0);
}

/*
 * SQLite's do_faultsim_test: fail the 1st, 2nd, 3rd, ... operation of one kind, each time on a
 * fresh store, until the scenario runs to its end without reaching the armed operation. Every
 * run is reopened (faults disarmed) and checked. Returns how many runs had the fault fire.
 */
static size_t fault_sweep_of(void **state, store_fault_op_t op, store_durability_t durability,
                             int (*scenario)(rig_t *r))
{
    size_t fired_runs = 0;
    for (unsigned long k = 1;; k++) {
        rig_t *r = rig_new(state, SMALL_SEGMENT, durability);
        unsigned long before = store_fault_fired(op);
        store_fault_arm(op, k);
        int completed = scenario(r);
        int fired = store_fault_fired(op) != before;
        store_fault_disarm_all();
        if (!fired) {
            /* Nothing left to fail: the scenario ran to its end. */
            if (!completed)
                fail_msg("fault kind %d, n = %lu: the scenario failed (%s) without the fault",
                         (int)op, k, store_status_str(r->first_error));
            rig_reopen(r);
            rig_free(r);
            *state = NULL;
            break;
        }
        fired_runs++;
        /* A failure is never swallowed, and the store acknowledges nothing after it. */
        if (completed)
            fail_msg("fault kind %d, n = %lu fired but the scenario reported success", (int)op, k);
        assert_int_equal(r->first_error, STORE_EIO);
        assert_int_equal(store_flush(r->s), STORE_EIO);
        uint8_t byte = 1;
        store_item_t item = {.id = &byte, .id_len = 1, .tokens = 1};
        assert_int_equal(store_append(r->s, r->q[0], &item, NULL), STORE_EIO);
        rig_crash(r);
        rig_reopen(r);
        sweep_after_recovery(r);
        rig_free(r);
        *state = NULL;
    }
    if (getenv("STORE_SWEEP_STATS") != NULL)
        print_message("fault kind %d, %s: the fault fired in %zu runs\n", (int)op,
                      durability == STORE_DURABLE_POWER ? "power" : "process", fired_runs);
    return fired_runs;
}

static size_t fault_sweep(void **state, store_fault_op_t op, store_durability_t durability)
{
    return fault_sweep_of(state, op, durability, sweep_scenario);
}

static void test_fault_sweep_write(void **state)
{
    /* 108 appends, 12 segment headers, 39 tombstones, 60 delivery counts: a fault fires per
     * entry and per state word even where one write carries many (disk_flush.c invariant 5). */
    assert_true(fault_sweep(state, STORE_FAULT_WRITE, STORE_DURABLE_PROCESS) >= 120);
}

/* The sweeps again with a turn's entries written ahead of its flush every few entries
 * (disk_flush.c invariant 8): a fault at a write ahead fails the store as one at the flush
 * does, nothing acknowledged is lost, and nothing written ahead counts before its flush. */
static void test_fault_sweep_write_ahead_of_the_flush(void **state)
{
    rig_spill_bytes = 300; /* about three entries */
    assert_true(fault_sweep(state, STORE_FAULT_WRITE, STORE_DURABLE_PROCESS) >= 120);
}

static void test_fault_sweep_fsync_power_durability_written_ahead(void **state)
{
    rig_spill_bytes = 300;
    assert_true(fault_sweep(state, STORE_FAULT_FSYNC, STORE_DURABLE_POWER) >= 30);
}

static void test_fault_sweep_fsync(void **state)
{
    /* The process level syncs nothing, not even a directory: a crash of the process loses no
     * byte the kernel holds, and its index commits without a sync too. */
    assert_int_equal(fault_sweep(state, STORE_FAULT_FSYNC, STORE_DURABLE_PROCESS), 0);
}

static void test_fault_sweep_fsync_power_durability(void **state)
{
    /* Directory syncs for 12 segment creations and 3 deletions (one per entry made durable),
     * plus the fdatasync of every touched segment at each flush. */
    assert_true(fault_sweep(state, STORE_FAULT_FSYNC, STORE_DURABLE_POWER) >= 30);
}

static void test_fault_sweep_unlink(void **state)
{
    /* One drained segment per lane. */
    assert_int_equal(fault_sweep(state, STORE_FAULT_UNLINK, STORE_DURABLE_PROCESS), 3);
}

static void test_fault_sweep_mdb_put(void **state)
{
    /* Segment rows, the lane target, the current shape and the meta row of five flushes. */
    assert_true(fault_sweep(state, STORE_FAULT_MDB_PUT, STORE_DURABLE_PROCESS) >= 20);
}

static void test_fault_sweep_rename(void **state)
{
    /* A running store never renames (only recovery does: see the tests below). */
    assert_int_equal(fault_sweep(state, STORE_FAULT_RENAME, STORE_DURABLE_PROCESS), 0);
}

/* ---- damage found at open -------------------------------------------------------------------- */

/* Three lanes, small segments, some items completed, some pending, all flushed. */
static void rig_populate(rig_t *r)
{
    for (int i = 0; i < 16; i++) {
        for (int l = 0; l < NL; l++)
            assert_true(rig_append(r, l));
    }
    assert_true(rig_flush(r));
    size_t tags[MAX_ITEMS];
    for (int l = 0; l < NL; l++) {
        rig_lane_items(r, l, tags);
        assert_true(rig_commit(r, l, 5));
        assert_true(rig_tombstone(r, tags[1]));
        assert_true(rig_tombstone(r, tags[3]));
    }
    assert_true(rig_flush(r));
}

static void test_index_directory_deleted_is_rebuilt_from_segments(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_populate(r);
    size_t files = count_segment_files(r);
    assert_true(files >= 6);
    rig_crash(r);
    char path[128];
    snprintf(path, sizeof(path), "%s/index", r->dir);
    fs_remove_tree(path);
    assert_false(path_exists(path));
    rig_reopen(r);
    assert_int_equal(r->rep.index_rebuilt, 1);
    assert_int_equal(r->rep.adopted_files, files);
    assert_int_equal(r->rep.segments, files);
    assert_int_equal(rig_count_back(r, 0, r->n), r->n - 2 * NL);
    assert_true(rig_logged(r, STORE_LOG_WARN, "index", "missing", NULL));
    /* Rebuilt: the next open uses it. */
    rig_reopen(r);
    assert_int_equal(r->rep.index_rebuilt, 0);
    assert_int_equal(r->rep.adopted_files, 0);
    assert_int_equal(rig_count_back(r, 0, r->n), r->n - 2 * NL);
}

static void test_index_overwritten_with_garbage_is_set_aside_and_rebuilt(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_populate(r);
    size_t files = count_segment_files(r);
    rig_crash(r);
    char path[128];
    snprintf(path, sizeof(path), "%s/index/data.mdb", r->dir);
    size_t len;
    free(read_file(path, &len));
    assert_true(len > 0);
    scribble(path, 0, len);
    rig_reopen(r);
    assert_int_equal(r->rep.index_rebuilt, 1);
    assert_int_equal(count_entries(r, ".", "index.damaged-", 1), 1);
    assert_int_equal(r->rep.adopted_files, files);
    assert_int_equal(rig_count_back(r, 0, r->n), r->n - 2 * NL);
    assert_true(rig_logged(r, STORE_LOG_WARN, "index.damaged-", NULL));
    rig_reopen(r);
    assert_int_equal(r->rep.index_rebuilt, 0);
    assert_int_equal(count_entries(r, ".", "index.damaged-", 1), 1);
}

static void test_rename_fault_setting_damaged_index_aside_fails_open_cleanly(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_populate(r);
    rig_crash(r);
    char path[128];
    snprintf(path, sizeof(path), "%s/index/data.mdb", r->dir);
    scribble(path, 0, 8192);
    unsigned long fired = store_fault_fired(STORE_FAULT_RENAME);
    store_fault_arm(STORE_FAULT_RENAME, 1);
    store_t *s = (store_t *)(uintptr_t)0x1234;
    store_status_t st = store_open_disk(&r->cfg, NULL, &s);
    store_fault_disarm_all();
    assert_int_equal(st, STORE_EINDEX);
    assert_ptr_equal(s, (store_t *)(uintptr_t)0x1234);
    assert_int_equal(store_fault_fired(STORE_FAULT_RENAME), fired + 1);
    assert_int_equal(count_entries(r, ".", "index.damaged-", 1), 0);
    /* Nothing was lost: the next open sets it aside and rebuilds. */
    rig_reopen(r);
    assert_int_equal(r->rep.index_rebuilt, 1);
    assert_int_equal(rig_count_back(r, 0, r->n), r->n - 2 * NL);
}

static void test_missing_segment_file_is_reported_exactly(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_populate(r);
    /* Lane 0's first segment: items 0, 3, 6, ... with tags 3 and 9 (lane items 1, 3) completed,
     * the other three committed ones pending. */
    uint64_t seg = r->items[0].ref.queue;
    uint64_t live = 0;
    for (size_t i = 0; i < r->n; i++) {
        litem_t *it = &r->items[i];
        if (it->ref.queue == seg && it->appended && !it->completed) {
            live++;
            it->gone = 1; /* lost with the file, the test expects them gone */
            it->appended = 0;
        }
    }
    assert_true(live >= 5);
    rig_crash(r);
    char path[128];
    seg_path(r, seg, path, sizeof(path));
    assert_int_equal(unlink(path), 0);
    rig_reopen(r);
    assert_int_equal(r->rep.missing_files, 1);
    assert_int_equal(r->rep.missing_live_entries, live);
    assert_int_equal(r->rep.quarantined_files, 0);
    char hex[17];
    snprintf(hex, sizeof(hex), "%016" PRIx64, seg);
    assert_true(rig_logged(r, STORE_LOG_ERROR, hex, "gone", "lost", NULL));
    /* Reported once: the row is dropped. */
    rig_reopen(r);
    assert_int_equal(r->rep.missing_files, 0);
    assert_int_equal(r->rep.missing_live_entries, 0);
}

static void test_segment_with_garbage_header_is_quarantined(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_populate(r);
    uint64_t seg = r->items[1].ref.queue; /* lane 1's first segment */
    assert_int_equal(r->items[1].lane, 1);
    for (size_t i = 0; i < r->n; i++) {
        if (r->items[i].ref.queue == seg && r->items[i].appended) {
            r->items[i].gone = 1;
            r->items[i].appended = 0;
        }
    }
    rig_crash(r);
    char path[128], moved[160];
    seg_path(r, seg, path, sizeof(path));
    scribble(path, 0, 64);
    size_t len;
    uint8_t *before = read_file(path, &len);
    snprintf(moved, sizeof(moved), "%s/quarantine/%016" PRIx64 ".seg", r->dir, seg);
    rig_reopen(r);
    assert_int_equal(r->rep.quarantined_files, 1);
    assert_false(path_exists(path));
    assert_true(path_exists(moved));
    /* Moved aside, never changed. */
    size_t len_after;
    uint8_t *after = read_file(moved, &len_after);
    assert_int_equal(len_after, len);
    assert_memory_equal(after, before, len);
    free(before);
    free(after);
    assert_true(rig_logged(r, STORE_LOG_ERROR, "quarantine", NULL));
    rig_reopen(r);
    assert_int_equal(r->rep.quarantined_files, 0);
    /* ... and every later start says the file is still set aside */
    assert_true(rig_logged(r, STORE_LOG_WARN, "quarantine holds 1 file an earlier start", NULL));
}

/* A FIFO, or a link, named as a segment or a journal file is never opened: a FIFO's open blocks
 * until a writer comes, and a start hung there, deaf to SIGTERM. The segment-named one is set
 * aside as a damaged segment is, the journal-named one is left and said; every item is back. */
static void test_files_that_are_not_regular_are_never_opened(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_populate(r);
    rig_crash(r);
    char fifo[160], link[160], jfifo[160], moved[200];
    snprintf(fifo, sizeof(fifo), "%s/segments/%016x.seg", r->dir, 0x7ffff0u);
    snprintf(link, sizeof(link), "%s/segments/%016x.seg", r->dir, 0x7ffff1u);
    snprintf(jfifo, sizeof(jfifo), "%s/journal/%016x.jnl", r->dir, 0x7ffff2u);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(symlink("/etc/hostname", link), 0);
    assert_int_equal(mkfifo(jfifo, 0644), 0);
    alarm(20); /* a blocking open fails the test instead of hanging it */
    rig_reopen(r);
    alarm(0);
    assert_int_equal(r->rep.quarantined_files, 2);
    snprintf(moved, sizeof(moved), "%s/quarantine/%016x.seg", r->dir, 0x7ffff0u);
    assert_true(path_exists(moved));
    assert_false(path_exists(fifo));
    assert_true(path_exists(jfifo));
    assert_true(rig_logged(r, STORE_LOG_WARN, "segments/", "not a regular file", NULL));
    assert_true(rig_logged(r, STORE_LOG_WARN, "journal/", "not a regular file", NULL));
}

/* ---- what the index keeps ------------------------------------------------------------------ */

static uint32_t target_of(store_t *s, int lane, int *found)
{
    store_queue_t *q = NULL;
    store_key_t key;
    uint32_t target = 0;
    *found = 0;
    while (store_queue_next(s, q, &q, &key, &target)) {
        if (strcmp(key.model, lane_model[lane]) == 0 && key.signature == lane_sig[lane] &&
            key.lane == lane_no[lane]) {
            *found = 1;
            return target;
        }
    }
    return 0;
}

static void test_lane_targets_survive_reopen(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    static const uint32_t targets[NL] = {1000, 2000, 3000};
    for (int l = 0; l < NL; l++) {
        assert_true(rig_append(r, l));
        assert_int_equal(store_queue_target_set(r->s, r->q[l], targets[l]), STORE_OK);
    }
    assert_true(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    for (int l = 0; l < NL; l++) {
        int found = 0;
        assert_int_equal(target_of(r->s, l, &found), targets[l]);
        assert_true(found);
    }
    /* A change is written at the next flush. */
    assert_int_equal(store_queue_target_set(r->s, r->q[1], 2500), STORE_OK);
    assert_true(rig_flush(r));
    rig_reopen(r);
    int found = 0;
    assert_int_equal(target_of(r->s, 1, &found), 2500);
    assert_int_equal(target_of(r->s, 0, &found), 1000);
}

/* store.h: the disk store keeps a lane's target "so the lane comes back with the same target
 * after a restart", whether or not it holds items at the time. */
static void test_lane_target_of_empty_lane_survives_reopen(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    assert_int_equal(store_queue_target_set(r->s, r->q[2], 777), STORE_OK);
    assert_true(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    int found = 0;
    uint32_t target = target_of(r->s, 2, &found);
    assert_true(found);
    assert_int_equal(target, 777);
}

/* A lane released and opened again with the same key, with a new target, before one flush. */
static void test_lane_target_set_after_release_and_reopen_survives_reopen(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    assert_true(rig_append(r, 0));
    assert_int_equal(store_queue_target_set(r->s, r->q[0], 500), STORE_OK);
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 1));
    assert_true(rig_tombstone(r, 0));
    assert_int_equal(store_queue_release(r->s, r->q[0]), STORE_OK);
    store_key_t k = {lane_model[0], lane_sig[0], lane_no[0]};
    assert_int_equal(store_queue_open(r->s, &k, &r->q[0]), STORE_OK);
    assert_true(rig_append(r, 0));
    assert_int_equal(store_queue_target_set(r->s, r->q[0], 700), STORE_OK);
    assert_true(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    int found = 0;
    uint32_t target = target_of(r->s, 0, &found);
    assert_true(found);
    assert_int_equal(target, 700);
}

/* A released lane's row goes at the next flush, whether a flush wrote it or the open read it;
 * a lane released before its row was written leaves none (the store deletes only rows it
 * knows). After the reopen rig_open_queues opens every lane again: a lane without a row is
 * there with target 0. */
static void test_released_lanes_leave_no_row(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    assert_int_equal(store_queue_target_set(r->s, r->q[0], 500), STORE_OK);
    assert_true(rig_flush(r)); /* lane 0's row written */
    assert_int_equal(store_queue_target_set(r->s, r->q[1], 600), STORE_OK); /* not yet */
    assert_int_equal(store_queue_target_set(r->s, r->q[2], 700), STORE_OK);
    assert_int_equal(store_queue_release(r->s, r->q[0]), STORE_OK);
    assert_int_equal(store_queue_release(r->s, r->q[1]), STORE_OK);
    r->q[0] = r->q[1] = NULL;
    assert_true(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    int found = 0;
    assert_int_equal(target_of(r->s, 0, &found), 0);
    assert_int_equal(target_of(r->s, 1, &found), 0);
    assert_int_equal(target_of(r->s, 2, &found), 700);
    assert_int_equal(store_queue_release(r->s, r->q[2]), STORE_OK); /* a row the open read */
    r->q[2] = NULL;
    assert_true(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    assert_int_equal(target_of(r->s, 2, &found), 0);
}

static void test_current_shape_survives_reopen(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    assert_true(rig_append(r, 0));
    assert_int_equal(store_current_shape_set(r->s, "llama", 0xA1A1), STORE_OK);
    assert_int_equal(store_current_shape_set(r->s, "qwen", 0), STORE_OK);
    assert_int_equal(store_current_shape_set(r->s, "no-queues", 0xFEEDFACECAFEBEEFull), STORE_OK);
    assert_true(rig_flush(r));
    rig_crash(r);
    rig_reopen(r);
    int has = -1;
    uint64_t sig = 1;
    assert_int_equal(store_current_shape_get(r->s, "llama", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0xA1A1);
    assert_int_equal(store_current_shape_get(r->s, "qwen", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0);
    assert_int_equal(store_current_shape_get(r->s, "no-queues", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0xFEEDFACECAFEBEEFull);
    assert_int_equal(store_current_shape_get(r->s, "never", &has, &sig), STORE_OK);
    assert_int_equal(has, 0);
    /* A change, flushed, replaces it. */
    assert_int_equal(store_current_shape_set(r->s, "llama", 0xC3C3), STORE_OK);
    assert_true(rig_flush(r));
    rig_reopen(r);
    assert_int_equal(store_current_shape_get(r->s, "llama", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0xC3C3);
}

static void test_fully_tombstoned_sealed_segment_is_deleted_as_file(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_fill_segment(r, 0, SMALL_SEGMENT);
    size_t first = r->n;
    rig_fill_segment(r, 0, SMALL_SEGMENT);
    size_t second = r->n;
    assert_true(rig_append(r, 0)); /* a third segment: the second is sealed */
    assert_true(rig_flush(r));
    uint64_t seg1 = r->items[0].ref.queue, seg2 = r->items[first].ref.queue,
             seg3 = r->items[second].ref.queue;
    assert_int_not_equal(seg1, seg2);
    assert_int_not_equal(seg2, seg3);
    assert_int_equal(count_segment_files(r), 3);
    /* Complete the first segment but its last entry: the file stays. */
    assert_true(rig_commit(r, 0, 0));
    for (size_t i = 0; i + 1 < first; i++)
        assert_true(rig_tombstone(r, i));
    assert_true(rig_flush(r));
    assert_true(seg_exists(r, seg1));
    /* The last one: the sealed file goes with the flush (row, then file). */
    assert_true(rig_tombstone(r, first - 1));
    assert_true(rig_flush(r));
    assert_false(seg_exists(r, seg1));
    assert_int_equal(count_segment_files(r), 2);
    /* The open (unsealed) segment drained: kept while it takes appends. */
    assert_true(rig_tombstone(r, second));
    assert_true(rig_flush(r));
    assert_true(seg_exists(r, seg3));
    rig_reopen(r);
    /* At reopen it is sealed, found drained, and removed. */
    assert_int_equal(r->rep.removed_segments, 1);
    assert_false(seg_exists(r, seg3));
    assert_true(seg_exists(r, seg2));
    assert_int_equal(count_segment_files(r), 1);
    /* The remaining items (the second segment, returned to the queue by the reopen). */
    assert_int_equal(r->rep.entries_live, second - first);
    assert_true(rig_commit(r, 0, 0));
    for (size_t i = first; i < second; i++)
        assert_true(rig_tombstone(r, i));
    assert_true(seg_exists(r, seg2));
    assert_true(rig_flush(r));
    assert_false(seg_exists(r, seg2));
    assert_int_equal(count_segment_files(r), 0);
    assert_true(rig_flush(r));
    rig_reopen(r);
    assert_int_equal(r->rep.entries_live, 0);
    assert_int_equal(r->rep.segments, 0);
}

/* ---- the state journal ------------------------------------------------------------------- */

/*
 * At the power level: the flush appends the tombstones to the journal and syncs it, then the
 * index commit fails (a crash between the journal and the index). The tombstones win at the
 * reopen, the deleted count is repaired, the delivery counts of the commit are back.
 */
static void test_crash_between_journal_append_and_index_commit_at_power_level(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_POWER);
    for (int i = 0; i < 6; i++)
        assert_true(rig_append(r, i % 2));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 3));
    assert_true(rig_commit(r, 1, 1));
    assert_true(rig_tombstone(r, 0));
    assert_true(rig_tombstone(r, 4));
    store_fault_arm(STORE_FAULT_MDB_PUT, 1);
    assert_false(rig_flush(r));
    rig_crash(r);
    assert_int_equal(count_journal_files(r), 1);
    rig_reopen(r);
    assert_true(r->items[0].gone);
    assert_true(r->items[4].gone);
    assert_int_equal(r->items[2].deliveries, 1);
    assert_int_equal(r->items[1].deliveries, 1);
    assert_int_equal(r->items[3].deliveries, 0);
    assert_int_equal(rig_count_back(r, 0, r->n), 4);
    assert_int_equal(r->rep.entries_tombstoned, 2);
    assert_int_equal(r->rep.deleted_count_repairs, 1);
    assert_int_equal(r->rep.journal_files, 1);
    assert_int_equal(r->rep.journal_records, 6); /* 4 delivery counts, 2 tombstones */
    assert_int_equal(r->rep.journal_damaged_records + r->rep.journal_stale_records +
                         r->rep.journal_unmatched_records,
                     0);
    /* The same journal read again changes nothing. */
    rig_reopen(r);
    assert_int_equal(r->rep.deleted_count_repairs, 0);
    assert_int_equal(r->rep.entries_tombstoned, 2);
    assert_int_equal(r->rep.journal_records, 6);
}

/*
 * Journal records of a segment deleted since (all its entries completed) are stale: counted,
 * never applied. A journal file no live segment has a record in is retired at the open and
 * deleted by a later flush; while the store runs, files go the same way as segments drain, so
 * the journal holds what the live segments need and no more.
 */
static void test_journal_records_of_deleted_segments_are_stale_and_files_retired(void **state)
{
    rig_journal_bytes = 64 + 24 * 8; /* 8 records a file */
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_fill_segment(r, 0, SMALL_SEGMENT);
    size_t first = r->n;
    rig_fill_segment(r, 0, SMALL_SEGMENT);
    size_t second = r->n;
    assert_true(rig_append(r, 0)); /* a third segment: the second is sealed */
    assert_true(rig_flush(r));
    uint64_t seg1 = r->items[0].ref.queue, seg2 = r->items[first].ref.queue;
    assert_true(first >= 8);
    /* Everything delivered; the first segment completed (deleted), the second but its first
     * entry (a long wait). */
    assert_true(rig_commit(r, 0, 0));
    for (size_t i = 0; i < second + 1; i++) {
        if (i != first)
            assert_true(rig_tombstone(r, i));
    }
    assert_true(rig_flush(r));
    assert_false(seg_exists(r, seg1));
    assert_true(seg_exists(r, seg2));
    size_t files = count_journal_files(r);
    assert_true(files >= 3);
    rig_reopen(r);
    assert_int_equal(r->rep.entries_live, 1);
    assert_false(r->items[first].gone);
    assert_int_equal(r->items[first].deliveries, 1);
    /* seg1's records: those in files kept for seg2's records are read and found stale; the
     * files holding only seg1's records are retired. */
    assert_true(r->rep.journal_stale_records >= 1);
    assert_true(r->rep.journal_retired_files >= 1);
    assert_int_equal(r->rep.journal_files, files);
    assert_int_equal(r->rep.journal_damaged_records + r->rep.journal_unmatched_records, 0);
    /* The retired files go at the first flushes, with nothing else to do (an idle daemon). */
    assert_true(rig_flush(r));
    assert_true(rig_flush(r));
    assert_int_equal(count_journal_files(r), files - r->rep.journal_retired_files);
    assert_true(rig_append(r, 1));
    assert_true(rig_flush(r));
    assert_int_equal(count_journal_files(r), files - r->rep.journal_retired_files);
    /* Drained: the journal shrinks to the files a live segment still needs (the one item of
     * lane 1) and the current one. */
    assert_true(rig_commit(r, 0, 0));
    assert_true(rig_tombstone(r, first));
    assert_true(rig_flush(r));
    assert_false(seg_exists(r, seg2));
    assert_true(rig_flush(r)); /* nothing dirty: nothing done */
    assert_true(rig_append(r, 1));
    assert_true(rig_flush(r));
    assert_true(count_journal_files(r) <= 2);
    rig_reopen(r);
    assert_int_equal(r->rep.entries_live, 2);
    assert_int_equal(r->rep.journal_damaged_records + r->rep.journal_unmatched_records, 0);
}

/* A model that stopped appending, its items all completed, keeps no segment file once its
 * current segment was idle for idle_seal_ms; its next item starts a new one. */
static void test_an_idle_drained_current_segment_is_deleted(void **state)
{
    /* Long enough that a loaded (sanitizer) run does not pass it between the two flushes. */
    rig_idle_seal_ms = 400;
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    assert_true(rig_append(r, 2));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 2, 0));
    assert_true(rig_tombstone(r, 0));
    assert_true(rig_flush(r));
    uint64_t seg = r->items[0].ref.queue;
    assert_true(seg_exists(r, seg)); /* drained, but not idle yet */
    struct timespec ts = {0, 500 * 1000000L};
    nanosleep(&ts, NULL);
    assert_true(rig_flush(r));
    assert_false(seg_exists(r, seg));
    assert_int_equal(count_segment_files(r), 0);
    assert_true(rig_append(r, 2));
    assert_true(rig_flush(r));
    assert_int_equal(count_segment_files(r), 1);
    rig_reopen(r);
    assert_int_equal(r->rep.entries_live, 1);
    assert_int_equal(r->rep.journal_damaged_records + r->rep.journal_unmatched_records, 0);
}

/* A store remembers its last 4,096 deleted segments (disk_seg.c invariant 4), not every one of a
 * run: a late completion of a ref in a recently deleted segment reads as completed, one from
 * further back as never committed, and a model that drains and rolls over its segment again and
 * again (here 4,200 times, one item a segment) holds no memory for each. */
static void test_deleted_segments_are_remembered_to_a_bound(void **state)
{
    rig_t *r = rig_new(state, 1, STORE_DURABLE_PROCESS); /* one entry a segment */
    store_ref_t first = {0, 0}, recent = {0, 0};
    enum { ROUNDS = 4200 };
    for (int i = 0; i < ROUNDS; i++) {
        char id[16];
        int len = snprintf(id, sizeof(id), "d%d", i);
        store_item_t it = {.id = (const uint8_t *)id, .id_len = (size_t)len, .tokens = 1};
        store_ref_t ref;
        assert_int_equal(store_append(r->s, r->q[0], &it, &ref), STORE_OK);
        assert_int_equal(store_flush(r->s), STORE_OK);
        assert_int_equal(store_commit(r->s, r->q[0], &ref, 1), STORE_OK);
        int done = -1;
        assert_int_equal(store_tombstone(r->s, ref, &done), STORE_OK);
        assert_int_equal(done, 1);
        assert_int_equal(store_flush(r->s), STORE_OK);
        if (i == 0)
            first = ref;
        if (i == ROUNDS - 100)
            recent = ref;
    }
    int done = -1;
    assert_int_equal(store_tombstone(r->s, recent, &done), STORE_OK);
    assert_int_equal(done, 0);
    done = -1;
    assert_int_equal(store_tombstone(r->s, first, &done), STORE_ENOTPENDING);
    assert_int_equal(done, -1);
    assert_true(count_segment_files(r) <= 2);
}

/* A model appending slowly (one item waiting at a time, its segment far from the size cap)
 * while another fills journal files: the slow model's segment is sealed at each journal file
 * that fills while it holds records in an older one, so the journal stays a few files instead
 * of one more per file filled. */
static void test_a_slow_models_segment_holds_journal_files_only_while_its_items_wait(void **state)
{
    rig_journal_bytes = 64 + 24 * 8; /* 8 records a file */
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    size_t most = 0;
    for (int round = 0; round < 24; round++) {
        size_t slow = r->n;
        assert_true(rig_append(r, 2));
        assert_true(rig_flush(r));
        assert_true(rig_commit(r, 2, 0));
        size_t busy = r->n;
        for (int i = 0; i < 4; i++)
            assert_true(rig_append(r, 0));
        assert_true(rig_flush(r));
        assert_true(rig_commit(r, 0, 0));
        for (size_t t = busy; t < r->n; t++)
            assert_true(rig_tombstone(r, t));
        assert_true(rig_flush(r));
        assert_true(rig_tombstone(r, slow));
        assert_true(rig_flush(r));
        size_t files = count_journal_files(r);
        most = files > most ? files : most;
    }
    assert_true(most <= 4);
    rig_reopen(r);
    assert_int_equal(r->rep.entries_live, 0);
    assert_int_equal(r->rep.journal_damaged_records + r->rep.journal_unmatched_records, 0);
}

/*
 * A sealed segment that waits (lane 0's first: one item pending, one returned, the rest
 * completed) while another model settles item after item. Without restating, the segment would
 * pin every journal file written since its first record: one more per four rounds here, 15 by
 * the end. Restated into the current file (disk_restate.c), it needs none of the older ones.
 * Returns 0 at the first failure (the fault sweep's scenario); the most journal files seen after
 * a round into *out_most.
 */
enum { RESTATE_ROUNDS = 60 };
static int restate_scenario_rounds(rig_t *r, int rounds, size_t *out_most);
static int restate_scenario_run(rig_t *r, int rounds, size_t *out_most)
{
    size_t first = 0;
    while (first == 0 || r->items[r->n - 1].ref.queue == r->items[0].ref.queue) {
        if (!rig_append(r, 0))
            return 0;
        first = r->n;
    }
    first = r->n - 1; /* the last one started the second segment: the first is sealed */
    if (!rig_flush(r) || !rig_commit(r, 0, first))
        return 0;
    for (size_t i = 2; i < first; i++) {
        if (!rig_tombstone(r, i))
            return 0;
    }
    return rig_return(r, 1) && rig_flush(r) && restate_scenario_rounds(r, rounds, out_most);
}

/* Rounds of the other model: 4 items appended, delivered and completed each. */
static int restate_scenario_rounds(rig_t *r, int rounds, size_t *out_most)
{
    size_t most = 0;
    for (int round = 0; round < rounds; round++) {
        size_t busy = r->n;
        for (int i = 0; i < 4; i++) {
            if (!rig_append(r, 2))
                return 0;
        }
        if (!rig_flush(r) || !rig_commit(r, 2, 0))
            return 0;
        for (size_t t = busy; t < r->n; t++) {
            if (!rig_tombstone(r, t))
                return 0;
        }
        if (!rig_flush(r))
            return 0;
        size_t files = count_journal_files(r);
        most = files > most ? files : most;
    }
    if (out_most != NULL)
        *out_most = most;
    return 1;
}

static int restate_scenario(rig_t *r)
{
    return restate_scenario_run(r, 20, NULL) &&
           rig_logged(r, STORE_LOG_INFO, "journal records restated", NULL);
}

static void test_a_waiting_segment_keeps_the_journal_bounded(void **state)
{
    rig_journal_bytes = 64 + 24 * 32; /* 32 records a file */
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    size_t most = 0;
    assert_true(restate_scenario_run(r, RESTATE_ROUNDS, &most));
    /* DISK_RESTATE_FILES older files, the current one, one doomed and not yet unlinked. */
    if (most > 4 + 2)
        fail_msg("the journal grew to %zu files while one segment waited", most);
    assert_true(rig_logged(r, STORE_LOG_INFO, "journal records restated", NULL));
    /* What store_usage_get says is what the directory holds. */
    store_usage_t u;
    store_usage_get(r->s, &u);
    assert_true(u.journal_restated >= 1);
    assert_int_equal(u.journal_files, count_journal_files(r));
    assert_int_equal(u.journal_bytes, u.journal_files * rig_journal_bytes);
    assert_int_equal(u.segment_files, count_segment_files(r));
    assert_true(u.segment_bytes > 0 && u.segment_bytes <= u.segment_files * SMALL_SEGMENT);
    uint64_t seg = r->items[0].ref.queue;
    assert_true(seg_exists(r, seg));
    /* A restart finds every state: items 0 (pending) and 1 (returned) back with one delivery
     * each, the completed ones of their segment not back (rig_reopen checks every item). */
    rig_reopen(r);
    assert_int_equal(r->rep.journal_damaged_records + r->rep.journal_unmatched_records, 0);
    assert_true(r->rep.journal_files <= 4 + 2);
    store_usage_get(r->s, &u); /* the files found at the open, sized by the open */
    assert_int_equal(u.journal_files, count_journal_files(r));
    assert_int_equal(u.journal_bytes, u.journal_files * rig_journal_bytes);
    assert_int_equal(u.journal_restated, 0);
    assert_int_equal(r->items[0].deliveries, 1);
    assert_int_equal(r->items[1].deliveries, 1);
    /* Both settled: the segment goes, and with it what the journal kept for it. */
    assert_true(rig_commit(r, 0, 2));
    assert_true(rig_tombstone(r, 0));
    assert_true(rig_tombstone(r, 1));
    assert_true(rig_flush(r));
    assert_false(seg_exists(r, seg));
    assert_true(rig_append(r, 2));
    assert_true(rig_flush(r));
    assert_true(rig_flush(r));
    assert_true(count_journal_files(r) <= 2);
    rig_reopen(r);
    assert_int_equal(r->rep.journal_damaged_records + r->rep.journal_unmatched_records, 0);
}

/* A waiting segment with an entry that no longer verifies is not restated (disk_restate.c
 * invariant 3): it says so, keeps its records where they are, and the journal grows as it did
 * before restating existed; nothing completed comes back and nothing waiting is lost. */
static void test_a_waiting_segment_that_does_not_verify_keeps_its_records(void **state)
{
    rig_journal_bytes = 64 + 24 * 32;
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    assert_true(restate_scenario_run(r, 1, NULL));
    char path[128];
    seg_path(r, r->items[3].ref.queue, path, sizeof(path));
    scribble(path, (off_t)r->items[3].ref.offset + 60, 4); /* a completed entry's id */
    size_t most = 0;
    assert_true(restate_scenario_rounds(r, RESTATE_ROUNDS, &most));
    assert_true(rig_logged(r, STORE_LOG_WARN, "were not restated", "does not verify", NULL));
    assert_false(rig_logged(r, STORE_LOG_INFO, "journal records restated", NULL));
    assert_true(most > 4 + 2);
    rig_reopen(r);
    assert_int_equal(r->rep.corrupt_regions, 1);
    assert_int_equal(r->items[0].deliveries, 1);
    assert_int_equal(r->items[1].deliveries, 1);
}

/* A flush whose journal write is refused memory (plain I/O: the pwrite buffer) leaves the store
 * usable; when it carried a restatement, the segment still needs its older files (disk_restate.c
 * invariant 2): a later flush may not delete them. Every flush here is tried first with the
 * buffer's allocation failing, then again. */
/* A flush tried first with the pwrite buffer's allocation failing, then again; 1 when the first
 * try was refused memory. */
static int rig_flush_refused_first(rig_t *r)
{
    store_fault_arm(STORE_FAULT_ALLOC, 1);
    store_status_t st = store_flush(r->s);
    store_fault_disarm_all();
    assert_true(st == STORE_OK || st == STORE_ENOMEM);
    assert_true(rig_flush(r));
    return st == STORE_ENOMEM;
}

static void test_a_restatement_refused_memory_changes_nothing(void **state)
{
    rig_journal_bytes = 64 + 24 * 32;
    rig_t *r = rig_new_plain(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    assert_true(restate_scenario_run(r, 0, NULL));
    int refused = 0;
    for (int round = 0; round < RESTATE_ROUNDS; round++) {
        size_t busy = r->n;
        for (int i = 0; i < 4; i++)
            assert_true(rig_append(r, 2));
        refused += rig_flush_refused_first(r);
        assert_true(rig_commit(r, 2, 0));
        for (size_t t = busy; t < r->n; t++)
            assert_true(rig_tombstone(r, t));
        refused += rig_flush_refused_first(r);
    }
    store_usage_t u;
    store_usage_get(r->s, &u);
    assert_true(refused > 0);
    assert_true(u.journal_restated >= 1);
    assert_true(count_journal_files(r) <= 4 + 2);
    rig_crash(r);
    rig_reopen(r); /* every state: none of the waiting segment's completed items back */
    assert_int_equal(r->items[0].deliveries, 1);
    assert_int_equal(r->items[1].deliveries, 1);
}

/* A segment sealed in the turn of the flush that would restate it (two journal files filled
 * between two flushes, so the slow model's current segment is sealed with an append not yet
 * written) is restated once that append is readable, not given up as damaged. */
static void test_a_segment_sealed_with_unflushed_appends_is_restated_later(void **state)
{
    rig_journal_bytes = 64 + 24 * 8; /* 8 records a file */
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    assert_true(rig_append(r, 0));
    assert_true(rig_append(r, 0));
    size_t other = r->n;
    for (int i = 0; i < 9 + 14; i++)
        assert_true(rig_append(r, 2));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 1)); /* the slow model's first count, in the first file */
    assert_true(rig_commit(r, 2, 9));
    for (size_t t = other; t < other + 9; t++)
        assert_true(rig_tombstone(r, t));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 2, 14)); /* two more files fill between two flushes */
    assert_true(rig_append(r, 0));     /* the slow segment takes an append in the same turn */
    assert_true(rig_flush(r));
    size_t most = 0;
    assert_true(restate_scenario_rounds(r, RESTATE_ROUNDS, &most));
    assert_false(rig_logged(r, STORE_LOG_WARN, "were not restated", NULL));
    store_usage_t u;
    store_usage_get(r->s, &u);
    assert_true(u.journal_restated >= 1);
    /* Three segments wait here (the 14 items committed and never completed hold two of the
     * other model's): 21 entries, so restating waits until the older files hold 4 x 21 records,
     * 11 files of 8. Never restated, the journal gains a file a round (60 here). */
    if (most > 20)
        fail_msg("the journal grew to %zu files while three segments waited", most);
    rig_reopen(r);
    assert_int_equal(r->items[0].deliveries, 1);
}

/* The restatement's records and the files it frees, failing each write and each sync in turn. */
static void test_fault_sweep_restate_write(void **state)
{
    rig_journal_bytes = 64 + 24 * 32;
    assert_true(fault_sweep_of(state, STORE_FAULT_WRITE, STORE_DURABLE_PROCESS, restate_scenario) >=
                200);
}

static void test_fault_sweep_restate_fsync_power(void **state)
{
    rig_journal_bytes = 64 + 24 * 32;
    assert_true(fault_sweep_of(state, STORE_FAULT_FSYNC, STORE_DURABLE_POWER, restate_scenario) >=
                20);
}

/* Reads a whole file into a fresh buffer (freed by the caller). */
static uint8_t *slurp(const char *path, size_t *out_len)
{
    return read_file(path, out_len);
}

/*
 * A settled item costs its segment nothing: delivery counts and tombstones go to the journal,
 * never into the entry, so at either level a segment file is written once, by its appends, and
 * its bytes never change after (at the power level no flush writes back a page of the log for
 * a settled item).
 */
static void check_segment_never_rewritten(void **state, store_durability_t durability)
{
    rig_t *r = rig_new(state, 0, durability);
    for (int i = 0; i < 40; i++)
        assert_true(rig_append(r, i % 3));
    assert_true(rig_flush(r));
    char path[128];
    seg_path(r, r->items[0].ref.queue, path, sizeof(path));
    size_t len0, len1;
    uint8_t *before = slurp(path, &len0);
    for (int l = 0; l < NL; l++)
        assert_true(rig_commit(r, l, 5));
    for (size_t i = 0; i < 30; i += 2) {
        if (r->items[i].pending)
            assert_true(rig_tombstone(r, i));
    }
    assert_true(rig_flush(r));
    for (size_t i = 0; i < r->n; i++) {
        if (r->items[i].pending)
            assert_true(rig_return(r, i));
    }
    for (int l = 0; l < NL; l++)
        assert_true(rig_commit(r, l, 2));
    assert_true(rig_flush(r));
    uint8_t *after = slurp(path, &len1);
    assert_int_equal(len1, len0);
    assert_memory_equal(after, before, len0);
    free(before);
    free(after);
    rig_reopen(r);
}

static void test_settling_items_never_rewrites_a_segment_process_level(void **state)
{
    check_segment_never_rewritten(state, STORE_DURABLE_PROCESS);
}

static void test_settling_items_never_rewrites_a_segment_power_level(void **state)
{
    check_segment_never_rewritten(state, STORE_DURABLE_POWER);
}

/* Deletes every file of the journal directory, as an operator might under the running store. */
static void rig_unlink_journal_files(const rig_t *r)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/journal", r->dir);
    DIR *dir = opendir(path);
    assert_non_null(dir);
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        if (de->d_name[0] != '.') {
            char file[400];
            snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
            assert_int_equal(unlink(file), 0);
        }
    }
    closedir(dir);
}

/* A start continues the newest journal file (disk_journal.c invariant 7): restarts that each
 * count deliveries, at both levels and with plain I/O, add no file, and every count comes back
 * (rig_reopen checks them); a file full of records is followed by a new one. */
static void starts_continue_case(void **state, int plain, store_durability_t durability)
{
    rig_journal_bytes = 64 + 24 * 16; /* 16 records a file */
    rig_t *r = plain ? rig_new_plain(state, 0, durability) : rig_new(state, 0, durability);
    for (int i = 0; i < 8; i++)
        assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    for (int k = 0; k < 5; k++) {
        assert_true(rig_commit(r, 0, 2)); /* two records, then a crash */
        rig_reopen(r);
        assert_int_equal(count_journal_files(r), 1);
        assert_int_equal(rig_count_back(r, 0, r->n), 8);
    }
    assert_true(rig_commit(r, 0, 8)); /* 18 records in all: the second file */
    rig_reopen(r);
    assert_int_equal(count_journal_files(r), 2);
    assert_int_equal(rig_count_back(r, 0, r->n), 8);
}

static void test_starts_continue_the_journal_file(void **state)
{
    starts_continue_case(state, 0, STORE_DURABLE_PROCESS);
}

static void test_starts_continue_the_journal_file_power_plain(void **state)
{
    starts_continue_case(state, 1, STORE_DURABLE_POWER);
}

/* A journal file deleted under the running store fails the next flush that writes to it: its
 * records would go to a file no restart reads. */
static void test_journal_file_deleted_while_running_fails_the_next_flush(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 4; i++)
        assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 2));
    assert_int_equal(count_journal_files(r), 1);
    rig_unlink_journal_files(r);
    assert_true(rig_tombstone(r, 0));
    assert_false(rig_flush(r));
    assert_true(rig_logged(r, STORE_LOG_ERROR, "journal file", "deleted or replaced", NULL));
    assert_int_equal(store_flush(r->s), STORE_EIO);
    /* What it cost: the items come back with the counts the lost file held (none). */
    r->items[0].deliveries = r->items[1].deliveries = 0;
    r->items[0].tomb_tried = 1;
    rig_reopen(r);
    assert_int_equal(rig_count_back(r, 0, r->n), 4);
}

/* Without inotify (plain I/O) the flush asks the file system itself, and a journal file the
 * flush's records filled and rotated away (its descriptor closed) is asked by name: deleted, it
 * fails the flush as the current file does. */
static void test_rotated_journal_file_deleted_fails_the_flush_without_inotify(void **state)
{
    rig_journal_bytes = 64 + 24 * 8; /* 8 records a file */
    rig_t *r = rig_new_plain(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 12; i++)
        assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 2));
    assert_int_equal(count_journal_files(r), 1);
    rig_unlink_journal_files(r);
    assert_true(rig_commit(r, 0, 10)); /* fills the deleted file, then a new one */
    assert_int_equal(count_journal_files(r), 1);
    assert_false(rig_flush(r));
    assert_true(rig_logged(r, STORE_LOG_ERROR, "journal file", "deleted or replaced", NULL));
}

/* A journal file created and never given its header (a crash between the two) is a leftover,
 * not damage: reported at info, no corrupt region, every item as it was. */
static void test_journal_file_without_header_is_a_crash_leftover(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    for (int i = 0; i < 4; i++)
        assert_true(rig_append(r, 0));
    assert_true(rig_flush(r));
    assert_true(rig_commit(r, 0, 2));
    assert_true(rig_tombstone(r, 0));
    assert_true(rig_flush(r));
    rig_crash(r);
    char path[512];
    snprintf(path, sizeof(path), "%s/journal/%016x.jnl", r->dir, 0x7fffu);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 64 + 24 * 8), 0); /* allocated, all zero */
    close(fd);
    rig_reopen(r);
    assert_int_equal(r->rep.corrupt_regions, 0);
    assert_true(rig_logged(r, STORE_LOG_INFO, "journal file", "has no header yet", NULL));
    assert_false(rig_logged(r, STORE_LOG_ERROR, "journal file", NULL));
    assert_int_equal(rig_count_back(r, 0, r->n), 3);
}

/* ---- recovery's scans on several threads ----------------------------------------------------- */

/* What one open of a directory recovered: its report (elapsed time zeroed), the log lines per
 * level, and every lane's items in queue order as (tag, deliveries). */
typedef struct {
    store_recovery_t rep;
    size_t lines[3];
    int order[NL]; /* the lanes in store_queue_next's order */
    size_t n_order;
    size_t n[NL];
    size_t tag[NL][MAX_ITEMS];
    uint32_t deliveries[NL][MAX_ITEMS];
} recovered_t;

static void open_recovered(rig_t *r, const char *dir, unsigned threads, recovered_t *out)
{
    store_disk_config_t cfg = r->cfg;
    cfg.dir = dir;
    cfg.recovery_threads = threads;
    memset(out, 0, sizeof(*out));
    r->n_logs = 0;
    store_t *s = NULL;
    assert_int_equal(store_open_disk(&cfg, &out->rep, &s), STORE_OK);
    out->rep.elapsed_ns = 0;
    for (size_t i = 0; i < r->n_logs; i++) {
        assert_true(r->log_level[i] >= 0 && r->log_level[i] < 3);
        out->lines[r->log_level[i]]++;
    }
    store_view_t *views = malloc(MAX_ITEMS * sizeof(*views));
    assert_non_null(views);
    store_queue_t *q = NULL;
    store_key_t key;
    while (store_queue_next(s, q, &q, &key, NULL)) {
        int lane = -1;
        for (int l = 0; l < NL; l++) {
            if (strcmp(key.model, lane_model[l]) == 0 && key.signature == lane_sig[l] &&
                key.lane == lane_no[l])
                lane = l;
        }
        assert_true(lane >= 0);
        assert_true(out->n_order < NL);
        out->order[out->n_order++] = lane;
        size_t n = 0;
        assert_int_equal(store_peek(s, q, views, MAX_ITEMS, &n), STORE_OK);
        out->n[lane] = n;
        for (size_t i = 0; i < n; i++) {
            for (size_t b = 0; b < 8; b++)
                out->tag[lane][i] |= (size_t)views[i].id_view[b] << (8 * b);
            out->deliveries[lane][i] = views[i].deliveries;
        }
    }
    free(views);
    store_close(s);
}

/* The same damaged directory (two models, several segment files each, delivery counts and
 * tombstones in the journal, a scribbled stretch in every segment file, an unflushed tail)
 * recovers to the same queues in the same order, the same report and as many log lines of each
 * level on one thread as on two or more (recovery.c invariant 6). */
static void test_recovery_threads_agree_with_one(void **state)
{
    rig_t *r = rig_new(state, SMALL_SEGMENT, STORE_DURABLE_PROCESS);
    rig_populate(r);
    rig_populate(r); /* a second round: more items, commits and tombstones, in later files */
    assert_true(rig_append(r, 0)); /* never flushed */
    rig_crash(r);
    char seg_dir[128];
    snprintf(seg_dir, sizeof(seg_dir), "%s/segments", r->dir);
    DIR *dir = opendir(seg_dir);
    assert_non_null(dir);
    size_t scribbled = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        char path[512];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s", seg_dir, de->d_name);
        if (de->d_name[0] == '.' || stat(path, &sb) != 0 || sb.st_size < 512)
            continue;
        scribble(path, sb.st_size / 2, 24);
        scribbled++;
    }
    closedir(dir);
    assert_true(scribbled >= 4);

    recovered_t *one = calloc(1, sizeof(*one)), *other = calloc(1, sizeof(*other));
    assert_non_null(one);
    assert_non_null(other);
    static const unsigned threads[] = {1, 2, 8};
    char copy[3][160];
    for (size_t t = 0; t < 3; t++) {
        snprintf(copy[t], sizeof(copy[t]), "%s-copy%zu", r->dir, t);
        assert_int_equal(fs_copy_tree(r->dir, copy[t]), 0);
    }
    open_recovered(r, copy[0], threads[0], one);
    assert_true(one->rep.corrupt_regions >= 4);
    assert_true(one->rep.journal_records > 0);
    assert_true(one->rep.segments >= 4);
    assert_true(one->n[0] > 0 && one->n[2] > 0);
    for (size_t t = 1; t < 3; t++) {
        open_recovered(r, copy[t], threads[t], other);
        assert_memory_equal(&one->rep, &other->rep, sizeof(one->rep));
        assert_memory_equal(one->lines, other->lines, sizeof(one->lines));
        assert_int_equal(one->n_order, other->n_order); /* the queues in the same order */
        assert_memory_equal(one->order, other->order, sizeof(one->order));
        for (int l = 0; l < NL; l++) {
            assert_int_equal(one->n[l], other->n[l]);
            assert_memory_equal(one->tag[l], other->tag[l], one->n[l] * sizeof(size_t));
            assert_memory_equal(one->deliveries[l], other->deliveries[l],
                                one->n[l] * sizeof(uint32_t));
        }
    }
    for (size_t t = 0; t < 3; t++)
        assert_int_equal(fs_remove_tree(copy[t]), 0);
    free(one);
    free(other);
}

/* The queues come out of store_queue_next in one order whatever the recovery threads: two
 * models of many lanes each scanned at once create their queues interleaved, and the store
 * relists them as one thread creates them (recovery.c invariant 6). */
static void test_recovery_threads_keep_queue_order(void **state)
{
    rig_t *r = rig_new(state, 0, STORE_DURABLE_PROCESS);
    enum { MODELS = 2, LANES = 300, FILL = 60 };
    static const char *const models[MODELS] = {"first", "second"};
    store_queue_t *q[MODELS][LANES];
    for (int m = 0; m < MODELS; m++) {
        for (int l = 0; l < LANES; l++) {
            store_key_t k = {models[m], 0x7000u + (uint64_t)(l % 7), (uint32_t)l};
            assert_int_equal(store_queue_open(r->s, &k, &q[m][l]), STORE_OK);
        }
    }
    /* Lane l first appears after l x FILL items of lane 0: each scan creates its queues all
     * along its file, so the two scans' creations overlap in time. */
    size_t tag = 0;
    for (int l = 0; l < LANES; l++) {
        for (int m = 0; m < MODELS; m++) {
            for (int f = 0; f <= FILL; f++) {
                uint8_t id[8];
                tag_id(tag++, id);
                store_item_t it = {.id = id, .id_len = 8, .tokens = 1, .arrival_ns = 1};
                assert_int_equal(store_append(r->s, q[m][f == FILL ? l : 0], &it, NULL), STORE_OK);
            }
        }
        assert_true(rig_flush(r));
    }
    rig_crash(r);
    char copy[3][160];
    uint32_t order[3][MODELS * LANES];
    for (int t = 0; t < 3; t++) {
        snprintf(copy[t], sizeof(copy[t]), "%s-order%d", r->dir, t);
        assert_int_equal(fs_copy_tree(r->dir, copy[t]), 0);
        store_disk_config_t cfg = r->cfg;
        cfg.dir = copy[t];
        cfg.recovery_threads = t == 0 ? 1 : 2;
        store_t *s = NULL;
        assert_int_equal(store_open_disk(&cfg, NULL, &s), STORE_OK);
        size_t n = 0;
        store_key_t key;
        for (store_queue_t *it = NULL; store_queue_next(s, it, &it, &key, NULL);) {
            assert_true(n < MODELS * LANES);
            order[t][n++] = (uint32_t)(strcmp(key.model, models[0]) == 0 ? 0 : 1) << 16 | key.lane;
        }
        assert_int_equal(n, MODELS * LANES);
        store_close(s);
        assert_int_equal(fs_remove_tree(copy[t]), 0);
    }
    assert_memory_equal(order[0], order[1], sizeof(order[0]));
    assert_memory_equal(order[0], order[2], sizeof(order[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_journal_file_without_header_is_a_crash_leftover,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_rotated_journal_file_deleted_fails_the_flush_without_inotify,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_crash_after_append_before_flush_keeps_every_flushed_item,
                                  rig_teardown),
        cmocka_unit_test_teardown(
            test_crash_after_flush_writes_before_index_cuts_tails_and_adopts_new_file,
            rig_teardown),
        cmocka_unit_test_teardown(
            test_crash_after_flush_before_index_update_cuts_only_unacknowledged, rig_teardown),
        cmocka_unit_test_teardown(test_crash_between_commit_steps_requeues_committed_items,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_commit_refused_for_memory_counts_no_delivery, rig_teardown),
        cmocka_unit_test_teardown(test_lost_journal_tombstones_are_reported, rig_teardown),
        cmocka_unit_test_teardown(
            test_crash_between_tombstone_and_deleted_count_keeps_item_completed, rig_teardown),
        cmocka_unit_test_teardown(test_crash_during_rollover_header_write, rig_teardown),
        cmocka_unit_test_teardown(test_crash_during_rollover_directory_fsync, rig_teardown),
        cmocka_unit_test_teardown(
            test_crash_during_whole_file_deletion_unlink_adopts_and_removes_file, rig_teardown),
        cmocka_unit_test_teardown(test_crash_during_whole_file_deletion_directory_fsync,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_many_lanes_and_shapes_share_one_file_per_model,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_error_state_refuses_everything_and_never_retries_fsync,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_write, rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_write_ahead_of_the_flush, rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_fsync_power_durability_written_ahead,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_fsync, rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_fsync_power_durability, rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_unlink, rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_mdb_put, rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_rename, rig_teardown),
        cmocka_unit_test_teardown(test_index_directory_deleted_is_rebuilt_from_segments,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_index_overwritten_with_garbage_is_set_aside_and_rebuilt,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_rename_fault_setting_damaged_index_aside_fails_open_cleanly,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_missing_segment_file_is_reported_exactly, rig_teardown),
        cmocka_unit_test_teardown(test_files_that_are_not_regular_are_never_opened, rig_teardown),
        cmocka_unit_test_teardown(test_segment_with_garbage_header_is_quarantined, rig_teardown),
        cmocka_unit_test_teardown(test_lane_targets_survive_reopen, rig_teardown),
        cmocka_unit_test_teardown(test_lane_target_of_empty_lane_survives_reopen, rig_teardown),
        cmocka_unit_test_teardown(test_released_lanes_leave_no_row, rig_teardown),
        cmocka_unit_test_teardown(test_lane_target_set_after_release_and_reopen_survives_reopen,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_current_shape_survives_reopen, rig_teardown),
        cmocka_unit_test_teardown(test_fully_tombstoned_sealed_segment_is_deleted_as_file,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_crash_between_journal_append_and_index_commit_at_power_level,
                                  rig_teardown),
        cmocka_unit_test_teardown(
            test_journal_records_of_deleted_segments_are_stale_and_files_retired, rig_teardown),
        cmocka_unit_test_teardown(test_an_idle_drained_current_segment_is_deleted, rig_teardown),
        cmocka_unit_test_teardown(test_deleted_segments_are_remembered_to_a_bound, rig_teardown),
        cmocka_unit_test_teardown(
            test_a_slow_models_segment_holds_journal_files_only_while_its_items_wait, rig_teardown),
        cmocka_unit_test_teardown(test_a_waiting_segment_keeps_the_journal_bounded, rig_teardown),
        cmocka_unit_test_teardown(test_a_waiting_segment_that_does_not_verify_keeps_its_records,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_a_restatement_refused_memory_changes_nothing, rig_teardown),
        cmocka_unit_test_teardown(test_a_segment_sealed_with_unflushed_appends_is_restated_later,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_restate_write, rig_teardown),
        cmocka_unit_test_teardown(test_fault_sweep_restate_fsync_power, rig_teardown),
        cmocka_unit_test_teardown(test_settling_items_never_rewrites_a_segment_process_level,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_settling_items_never_rewrites_a_segment_power_level,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_starts_continue_the_journal_file, rig_teardown),
        cmocka_unit_test_teardown(test_starts_continue_the_journal_file_power_plain, rig_teardown),
        cmocka_unit_test_teardown(test_journal_file_deleted_while_running_fails_the_next_flush,
                                  rig_teardown),
        cmocka_unit_test_teardown(test_recovery_threads_agree_with_one, rig_teardown),
        cmocka_unit_test_teardown(test_recovery_threads_keep_queue_order, rig_teardown),
    };
    return cmocka_run_group_tests_name("disk store crash points and recovery", tests, NULL, NULL);
}
