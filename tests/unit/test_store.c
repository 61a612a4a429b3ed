/*
 * test_store.c - unit tests for the store contract (store/store.h), run against every backend.
 *
 * One test per rule of the contract, named for the rule, then a seeded randomized test that
 * interleaves append, flush, peek, commit, tombstone, return and queue release on several queues
 * against a reference model kept here, checking after every step that every item is in exactly
 * the state the model says.
 *
 * Every test runs three times, as three cmocka groups: against the memory backend, against the
 * disk backend with the default segment size, and against the disk backend with 4 KiB segments
 * so that models' logs roll over to new segment files (and fully completed ones are deleted)
 * during the tests, and with a resident bound of one byte, so that every flush drops the
 * mappings' pages and the next peek maps them again. Each disk store lives in a fresh mkdtemp
 * directory under /tmp, removed in teardown. LANES_TEST_STORE_IO_PLAIN in the environment runs the
 * disk groups without io_uring (CTest runs both: test_store and test_store_io_plain).
 *
 * The contract makes appended items visible to peek only after store_flush (a no-op for the
 * memory store), so the tests flush after appends they then peek or commit.
 *
 * Refs are opaque: the tests compare them with the refs append handed out, never with literal
 * values. The contract only promises equality and that refs grow in append order within a queue
 * (the disk backend moves to a new, larger segment id at a roll-over, so "grow" is the order of
 * (queue, offset) pairs).
 *
 * Longer than the house rule's ~600 lines: one cmocka file per module runs every case against
 * both backends (memory and disk), which share the contract.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/fs.h"

#include "store/store.h"

/* ---- backends --------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int disk;
    uint64_t segment_max_bytes; /* disk only; 0 = the default */
    uint64_t resident_bytes;    /* disk only; 0 = the default */
} backend_t;

static const backend_t backend_memory = {"memory", 0, 0, 0};
static const backend_t backend_disk = {"disk", 1, 0, 0};
static const backend_t backend_disk_small = {"disk, 4 KiB segments, resident bound 1 byte", 1, 4096,
                                             1};

/* The backend of the group being run (set by the group setup). */
static const backend_t *g_backend = &backend_memory;

/* Data directories made by open_store in the current test, removed by its teardown. */
enum { MAX_DIRS = 16 };
static char g_dirs[MAX_DIRS][64];
static size_t g_n_dirs;

static int is_disk(void)
{
    return g_backend->disk;
}

static int remove_dirs(void **state)
{
    (void)state;
    for (size_t i = 0; i < g_n_dirs; i++)
        fs_remove_tree(g_dirs[i]);
    g_n_dirs = 0;
    return 0;
}

static int use_memory(void **state)
{
    (void)state;
    g_backend = &backend_memory;
    return 0;
}

static int use_disk(void **state)
{
    (void)state;
    g_backend = &backend_disk;
    return 0;
}

static int use_disk_small(void **state)
{
    (void)state;
    g_backend = &backend_disk_small;
    return 0;
}

/* ---- helpers ---------------------------------------------------------------------------- */

/* Opens an empty store of the current backend (a disk store in a fresh directory). */
static store_t *open_store(void)
{
    store_t *s = NULL;
    if (!is_disk()) {
        assert_int_equal(store_open_memory(&s), STORE_OK);
        assert_non_null(s);
        return s;
    }
    assert_true(g_n_dirs < MAX_DIRS);
    char *dir = g_dirs[g_n_dirs];
    snprintf(dir, sizeof(g_dirs[0]), "/tmp/lanes-test-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
    g_n_dirs++;
    store_disk_config_t cfg = {.dir = dir,
                               .segment_max_bytes = g_backend->segment_max_bytes,
                               .resident_bytes = g_backend->resident_bytes,
                               .io = getenv("LANES_TEST_STORE_IO_PLAIN") ? STORE_IO_PLAIN
                                                                         : STORE_IO_AUTO};
    store_recovery_t rep;
    memset(&rep, 0xA5, sizeof(rep));
    assert_int_equal(store_open_disk(&cfg, &rep, &s), STORE_OK);
    assert_non_null(s);
    /* A fresh directory: recovery found nothing and repaired nothing. */
    assert_int_equal(rep.segments, 0);
    assert_int_equal(rep.entries_live, 0);
    assert_int_equal(rep.tokens_live, 0);
    assert_int_equal(rep.torn_tails, 0);
    assert_int_equal(rep.corrupt_regions, 0);
    assert_int_equal(rep.missing_files, 0);
    assert_int_equal(rep.adopted_files, 0);
    assert_int_equal(rep.quarantined_files, 0);
    assert_int_equal(rep.index_rebuilt, 0);
    return s;
}

/* Makes every append so far visible to peek (a no-op for the memory store). */
static void flush(store_t *s)
{
    assert_int_equal(store_flush(s), STORE_OK);
    assert_int_equal(store_unflushed_bytes(s), 0);
}

static store_queue_t *open_queue(store_t *s, const char *model, uint64_t signature, uint32_t lane)
{
    store_key_t k = {.model = model, .signature = signature, .lane = lane};
    store_queue_t *q = NULL;
    assert_int_equal(store_queue_open(s, &k, &q), STORE_OK);
    assert_non_null(q);
    return q;
}

/* Deterministic id/payload bytes for an item tag, so views can be checked byte for byte. */
static size_t tag_id(uint64_t tag, uint8_t *buf)
{
    for (size_t i = 0; i < 8; i++)
        buf[i] = (uint8_t)(tag >> (8 * i));
    return 8;
}

static size_t tag_payload(uint64_t tag, uint8_t *buf)
{
    size_t n = (size_t)(tag % 23);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(tag * 31 + i);
    return n;
}

static uint64_t tag_arrival(uint64_t tag)
{
    return tag * 1000 + 7;
}

static store_ref_t append_tagged(store_t *s, store_queue_t *q, uint64_t tag, uint32_t tokens)
{
    uint8_t id[8], payload[32];
    store_item_t item = {
        .id = id,
        .id_len = tag_id(tag, id),
        .payload = payload,
        .payload_len = tag_payload(tag, payload),
        .tokens = tokens,
        .arrival_ns = tag_arrival(tag),
    };
    store_ref_t ref = {UINT64_MAX, UINT64_MAX};
    assert_int_equal(store_append(s, q, &item, &ref), STORE_OK);
    return ref;
}

static int ref_eq(store_ref_t x, store_ref_t y)
{
    return x.queue == y.queue && x.offset == y.offset;
}

/* x was appended before y in the same queue. */
static int ref_before(store_ref_t x, store_ref_t y)
{
    return x.queue < y.queue || (x.queue == y.queue && x.offset < y.offset);
}

static void assert_ref_equal(store_ref_t x, store_ref_t y)
{
    assert_int_equal(x.queue, y.queue);
    assert_int_equal(x.offset, y.offset);
}

/* Peeks the whole queue and asserts it holds exactly `want`, in that order. */
static void assert_queue_holds(store_t *s, store_queue_t *q, const store_ref_t *want, size_t n)
{
    store_view_t views[64];
    assert_true(n < 64);
    size_t got = 12345;
    assert_int_equal(store_peek(s, q, views, 64, &got), STORE_OK);
    assert_int_equal(got, n);
    for (size_t i = 0; i < n; i++)
        assert_ref_equal(views[i].ref, want[i]);
    uint64_t items = 12345;
    store_queue_count(q, &items, NULL);
    assert_int_equal(items, n);
}

static uint64_t queued_items(const store_queue_t *q)
{
    uint64_t items = 12345;
    store_queue_count(q, &items, NULL);
    return items;
}

static uint64_t queued_tokens(const store_queue_t *q)
{
    uint64_t tokens = 12345;
    store_queue_count(q, NULL, &tokens);
    return tokens;
}

/* ---- rules ------------------------------------------------------------------------------ */

static void test_open_gives_empty_store(void **state)
{
    (void)state;
    store_t *s = open_store();
    assert_int_equal(store_pending_count(s), 0);
    store_queue_t *q = open_queue(s, "m", 1, 0);
    assert_int_equal(queued_items(q), 0);
    assert_int_equal(queued_tokens(q), 0);
    store_view_t v;
    size_t n = 99;
    assert_int_equal(store_peek(s, q, &v, 1, &n), STORE_OK);
    assert_int_equal(n, 0);
    store_close(s);
}

static void test_append_refs_grow_in_append_order(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_queue_t *other = open_queue(s, "m", 1, 1);
    enum { N = 200 }; /* several 4 KiB segments' worth */
    store_ref_t r[N];
    for (size_t i = 0; i < N; i++)
        r[i] = append_tagged(s, q, i, 1);
    store_ref_t o = append_tagged(s, other, 100, 1);
    for (size_t i = 1; i < N; i++)
        assert_true(ref_before(r[i - 1], r[i]));
    /* Refs never collide across queues. */
    for (size_t i = 0; i < N; i++)
        assert_false(ref_eq(o, r[i]));
    /* A NULL out_ref is allowed. */
    uint8_t id = 1;
    store_item_t item = {.id = &id, .id_len = 1, .tokens = 3};
    assert_int_equal(store_append(s, q, &item, NULL), STORE_OK);
    assert_int_equal(queued_items(q), N + 1);
    /* The refs append handed out are the refs peek shows, in the same order. */
    flush(s);
    store_view_t v[N + 1];
    size_t n = 0;
    assert_int_equal(store_peek(s, q, v, N + 1, &n), STORE_OK);
    assert_int_equal(n, N + 1);
    for (size_t i = 0; i < N; i++)
        assert_ref_equal(v[i].ref, r[i]);
    assert_true(ref_before(r[N - 1], v[N].ref));
    /* With small segments the lane rolled over to new segment files (for the disk store a ref
     * names the segment), and the order still held across them. */
    if (g_backend->segment_max_bytes != 0)
        assert_int_not_equal(r[N - 1].queue, r[0].queue);
    store_close(s);
}

static void test_append_copies_item_bytes(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 77, 0);
    uint8_t id[4] = {'a', 'b', 'c', 'd'};
    uint8_t payload[6] = {1, 2, 3, 4, 5, 6};
    store_item_t item = {.id = id,
                         .id_len = sizeof(id),
                         .payload = payload,
                         .payload_len = sizeof(payload),
                         .tokens = 42,
                         .arrival_ns = 123456789};
    store_ref_t ref;
    assert_int_equal(store_append(s, q, &item, &ref), STORE_OK);
    /* The caller's buffers are borrowed for the call only: scribbling on them changes nothing. */
    memset(id, 0xEE, sizeof(id));
    memset(payload, 0xEE, sizeof(payload));
    /* Empty id and empty payload (with NULL pointers) are allowed. */
    store_item_t empty = {.tokens = 1, .arrival_ns = 5};
    store_ref_t ref2;
    assert_int_equal(store_append(s, q, &empty, &ref2), STORE_OK);
    flush(s);

    store_view_t v[2];
    size_t n = 0;
    assert_int_equal(store_peek(s, q, v, 2, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_ref_equal(v[0].ref, ref);
    assert_int_equal(v[0].id_len, 4);
    assert_memory_equal(v[0].id_view, "abcd", 4);
    assert_int_equal(v[0].payload_len, 6);
    const uint8_t want_payload[6] = {1, 2, 3, 4, 5, 6};
    assert_memory_equal(v[0].payload_view, want_payload, 6);
    assert_int_equal(v[0].tokens, 42);
    assert_int_equal(v[0].arrival_ns, 123456789);
    assert_int_equal(v[0].deliveries, 0);
    assert_ref_equal(v[1].ref, ref2);
    assert_int_equal(v[1].id_len, 0);
    assert_int_equal(v[1].payload_len, 0);
    assert_int_equal(v[1].tokens, 1);
    assert_int_equal(v[1].arrival_ns, 5);
    store_close(s);
}

/*
 * store_flush: "Appended items become visible to peek only after this returns STORE_OK",
 * and it is a no-op for the memory store (whose appends are visible at once).
 */
static void test_flush_makes_appends_visible(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_queue_t *other = open_queue(s, "m", 1, 1);
    /* Nothing appended: flushing is harmless, repeatedly. */
    flush(s);
    flush(s);
    store_ref_t r[3];
    for (size_t i = 0; i < 3; i++)
        r[i] = append_tagged(s, q, i, 5);
    store_ref_t o = append_tagged(s, other, 9, 7);
    /* Counted as queued at once, flushed or not. */
    assert_int_equal(queued_items(q), 3);
    assert_int_equal(queued_tokens(q), 15);
    store_view_t v[4];
    size_t n = 99;
    assert_int_equal(store_peek(s, q, v, 4, &n), STORE_OK);
    if (is_disk()) {
        assert_true(store_unflushed_bytes(s) > 0);
        assert_int_equal(n, 0);
        /* Not readable, so not committable either. */
        assert_int_equal(store_commit(s, q, r, 1), STORE_ESTALE);
        assert_int_equal(store_tombstone(s, r[0], NULL), STORE_ENOTPENDING);
    } else {
        assert_int_equal(store_unflushed_bytes(s), 0);
        assert_int_equal(n, 3);
    }
    flush(s);
    assert_queue_holds(s, q, r, 3);
    assert_queue_holds(s, other, &o, 1);
    /* Appends after a flush: the flushed front stays readable, the new tail is not (disk). */
    assert_int_equal(store_commit(s, q, r, 1), STORE_OK);
    store_ref_t late = append_tagged(s, q, 3, 5);
    n = 99;
    assert_int_equal(store_peek(s, q, v, 4, &n), STORE_OK);
    assert_int_equal(n, is_disk() ? 2 : 3);
    assert_ref_equal(v[0].ref, r[1]);
    assert_ref_equal(v[1].ref, r[2]);
    store_ref_t with_late[3] = {r[1], r[2], late};
    if (is_disk())
        assert_int_equal(store_commit(s, q, with_late, 3), STORE_ESTALE);
    flush(s);
    assert_queue_holds(s, q, with_late, 3);
    assert_int_equal(store_commit(s, q, with_late, 3), STORE_OK);
    assert_int_equal(store_pending_count(s), 4);
    store_close(s);
}

static void test_peek_does_not_advance(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[5];
    for (size_t i = 0; i < 5; i++)
        r[i] = append_tagged(s, q, i, 10);
    flush(s);
    for (int round = 0; round < 3; round++) {
        store_view_t v[3];
        size_t n = 0;
        assert_int_equal(store_peek(s, q, v, 3, &n), STORE_OK);
        assert_int_equal(n, 3);
        for (size_t i = 0; i < 3; i++)
            assert_ref_equal(v[i].ref, r[i]);
    }
    assert_queue_holds(s, q, r, 5);
    assert_int_equal(queued_tokens(q), 50);
    assert_int_equal(store_pending_count(s), 0);
    store_close(s);
}

static void test_peek_returns_at_most_max_items(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[4];
    for (size_t i = 0; i < 4; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    store_view_t v[8];
    size_t n = 99;
    assert_int_equal(store_peek(s, q, v, 2, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_ref_equal(v[0].ref, r[0]);
    assert_ref_equal(v[1].ref, r[1]);
    n = 99;
    assert_int_equal(store_peek(s, q, v, 8, &n), STORE_OK);
    assert_int_equal(n, 4);
    n = 99;
    assert_int_equal(store_peek(s, q, NULL, 0, &n), STORE_OK);
    assert_int_equal(n, 0);
    store_close(s);
}

static void test_commit_moves_items_to_pending(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[5];
    for (size_t i = 0; i < 5; i++)
        r[i] = append_tagged(s, q, i, (uint32_t)(i + 1));
    flush(s);
    assert_int_equal(store_commit(s, q, r, 3), STORE_OK);
    assert_int_equal(store_pending_count(s), 3);
    assert_queue_holds(s, q, r + 3, 2);
    assert_int_equal(queued_tokens(q), 4 + 5);
    /* Committed items are pending: each can be tombstoned once with completed = 1. */
    for (size_t i = 0; i < 3; i++) {
        int done = -1;
        assert_int_equal(store_tombstone(s, r[i], &done), STORE_OK);
        assert_int_equal(done, 1);
    }
    assert_int_equal(store_pending_count(s), 0);
    assert_queue_holds(s, q, r + 3, 2);
    store_close(s);
}

static void test_commit_of_zero_refs_changes_nothing(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r = append_tagged(s, q, 0, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, &r, 0), STORE_OK);
    assert_int_equal(store_commit(s, q, NULL, 0), STORE_OK);
    assert_queue_holds(s, q, &r, 1);
    assert_int_equal(store_pending_count(s), 0);
    store_close(s);
}

static void test_commit_rejects_stale_refs_and_changes_nothing(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_queue_t *other = open_queue(s, "m", 1, 1);
    store_ref_t r[4];
    for (size_t i = 0; i < 4; i++)
        r[i] = append_tagged(s, q, i, 10);
    store_ref_t o = append_tagged(s, other, 9, 10);
    flush(s);

    /* Not the front: skips the first item. */
    assert_int_equal(store_commit(s, q, r + 1, 2), STORE_ESTALE);
    /* Front items, wrong order. */
    store_ref_t swapped[2] = {r[1], r[0]};
    assert_int_equal(store_commit(s, q, swapped, 2), STORE_ESTALE);
    /* Right prefix, wrong last ref: the first two must not be taken either. */
    store_ref_t bad_tail[3] = {r[0], r[1], r[3]};
    assert_int_equal(store_commit(s, q, bad_tail, 3), STORE_ESTALE);
    /* More refs than the queue holds. */
    store_ref_t too_many[5] = {r[0], r[1], r[2], r[3], {r[3].queue, r[3].offset + 1}};
    assert_int_equal(store_commit(s, q, too_many, 5), STORE_ESTALE);
    /* A ref of another queue, and refs of this queue committed against another queue. */
    assert_int_equal(store_commit(s, q, &o, 1), STORE_ESTALE);
    assert_int_equal(store_commit(s, other, r, 1), STORE_ESTALE);
    /* Same offset, wrong queue id. */
    store_ref_t wrong_queue = {r[0].queue + 1000, r[0].offset};
    assert_int_equal(store_commit(s, q, &wrong_queue, 1), STORE_ESTALE);

    assert_queue_holds(s, q, r, 4);
    assert_queue_holds(s, other, &o, 1);
    assert_int_equal(queued_tokens(q), 40);
    assert_int_equal(store_pending_count(s), 0);
    store_view_t v;
    size_t n = 0;
    assert_int_equal(store_peek(s, q, &v, 1, &n), STORE_OK);
    assert_int_equal(v.deliveries, 0);

    /* A peek that went stale because someone else committed first. */
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    assert_int_equal(store_commit(s, q, r, 2), STORE_ESTALE);
    assert_queue_holds(s, q, r + 2, 2);
    assert_int_equal(store_pending_count(s), 2);
    store_close(s);
}

static void test_tombstone_completes_pending_item(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r = append_tagged(s, q, 0, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, &r, 1), STORE_OK);
    /* the hints change nothing, for a pending ref and for one never handed out */
    store_prefetch(s, r, 0);
    store_prefetch(s, r, 1);
    store_prefetch(s, (store_ref_t){r.queue + 99, r.offset + 8}, 1);
    store_prefetch(NULL, r, 0);
    assert_int_equal(store_pending_count(s), 1);
    int done = -1;
    assert_int_equal(store_tombstone(s, r, &done), STORE_OK);
    assert_int_equal(done, 1);
    assert_int_equal(store_pending_count(s), 0);
    assert_int_equal(queued_items(q), 0);
    /* A completed item never comes back: it cannot be returned. */
    assert_int_equal(store_return(s, &r, 1), STORE_ENOTPENDING);
    assert_int_equal(queued_items(q), 0);
    /* out_completed may be NULL. */
    store_ref_t r2 = append_tagged(s, q, 1, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, &r2, 1), STORE_OK);
    assert_int_equal(store_tombstone(s, r2, NULL), STORE_OK);
    assert_int_equal(store_pending_count(s), 0);
    store_close(s);
}

static void test_tombstone_twice_is_harmless_and_counted_once(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[3];
    for (size_t i = 0; i < 3; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    int completions = 0;
    for (int k = 0; k < 3; k++) {
        int done = -1;
        assert_int_equal(store_tombstone(s, r[0], &done), STORE_OK);
        assert_true(done == 0 || done == 1);
        completions += done;
    }
    assert_int_equal(completions, 1);
    assert_int_equal(store_pending_count(s), 1);
    /* The other pending item is untouched, and the queued one still queued. */
    int done = -1;
    assert_int_equal(store_tombstone(s, r[1], &done), STORE_OK);
    assert_int_equal(done, 1);
    assert_queue_holds(s, q, r + 2, 1);
    store_close(s);
}

static void test_tombstone_of_queued_item_is_not_pending(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[3];
    for (size_t i = 0; i < 3; i++)
        r[i] = append_tagged(s, q, i, 2);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 1), STORE_OK);
    int done = -1;
    assert_int_equal(store_tombstone(s, r[1], &done), STORE_ENOTPENDING);
    assert_int_equal(done, -1);
    assert_int_equal(store_tombstone(s, r[2], NULL), STORE_ENOTPENDING);
    assert_queue_holds(s, q, r + 1, 2);
    assert_int_equal(queued_tokens(q), 4);
    assert_int_equal(store_pending_count(s), 1);
    store_close(s);
}

static void test_tombstone_of_returned_item_is_not_pending(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[2];
    for (size_t i = 0; i < 2; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    assert_int_equal(store_return(s, r, 1), STORE_OK);
    int done = -1;
    assert_int_equal(store_tombstone(s, r[0], &done), STORE_ENOTPENDING);
    assert_int_equal(done, -1);
    assert_int_equal(store_pending_count(s), 1);
    assert_queue_holds(s, q, r, 1);
    store_close(s);
}

static void test_tombstone_of_unknown_ref_is_not_pending(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r = append_tagged(s, q, 0, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, &r, 1), STORE_OK);
    int done = -1;
    /* A queue id never handed out. */
    store_ref_t no_queue = {UINT64_MAX, 0};
    assert_int_equal(store_tombstone(s, no_queue, &done), STORE_ENOTPENDING);
    store_ref_t no_queue2 = {r.queue + 1000, r.offset};
    assert_int_equal(store_tombstone(s, no_queue2, &done), STORE_ENOTPENDING);
    /* A live queue, an offset never handed out. */
    store_ref_t no_offset = {r.queue, r.offset + 1};
    assert_int_equal(store_tombstone(s, no_offset, &done), STORE_ENOTPENDING);
    store_ref_t far_offset = {r.queue, UINT64_MAX};
    assert_int_equal(store_tombstone(s, far_offset, &done), STORE_ENOTPENDING);
    assert_int_equal(done, -1);
    /* The real pending item is untouched. */
    assert_int_equal(store_pending_count(s), 1);
    assert_int_equal(store_tombstone(s, r, &done), STORE_OK);
    assert_int_equal(done, 1);
    store_close(s);
}

/* Commit batch A = items 0-2 and batch B = items 3-5, append more, return B then A. */
static void test_return_puts_items_back_in_original_order(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[8];
    for (size_t i = 0; i < 6; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 3), STORE_OK);
    assert_int_equal(store_commit(s, q, r + 3, 3), STORE_OK);
    for (size_t i = 6; i < 8; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    assert_int_equal(store_return(s, r + 3, 3), STORE_OK);
    assert_int_equal(store_return(s, r, 3), STORE_OK);
    assert_queue_holds(s, q, r, 8);
    assert_int_equal(store_pending_count(s), 0);
    assert_int_equal(queued_tokens(q), 8);

    /* Same with the queue still holding items ahead of the appends, and refs given in reverse. */
    store_queue_t *q2 = open_queue(s, "m", 1, 1);
    store_ref_t t[10];
    for (size_t i = 0; i < 10; i++)
        t[i] = append_tagged(s, q2, 100 + i, 1);
    flush(s);
    assert_int_equal(store_commit(s, q2, t, 3), STORE_OK);
    assert_int_equal(store_commit(s, q2, t + 3, 3), STORE_OK);
    store_ref_t b_rev[3] = {t[5], t[4], t[3]};
    store_ref_t a_rev[3] = {t[2], t[1], t[0]};
    assert_int_equal(store_return(s, b_rev, 3), STORE_OK);
    assert_int_equal(store_return(s, a_rev, 3), STORE_OK);
    assert_queue_holds(s, q2, t, 10);
    assert_int_equal(store_pending_count(s), 0);
    store_close(s);
}

/* store_return_unseen: the items go back as with store_return, each delivery count one lower
 * (a batch no one received is no delivery), never below 0; store_return keeps the count. */
static void test_return_unseen_takes_back_the_delivery(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[2];
    for (size_t i = 0; i < 2; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    uint32_t tokens[2], dlv[2];
    size_t n = 0;
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    assert_int_equal(store_return(s, r, 2), STORE_OK);
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    assert_int_equal(store_return_unseen(s, r, 2), STORE_OK);
    assert_int_equal(store_peek_tokens(s, q, tokens, dlv, 2, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(dlv[0], 1);
    assert_int_equal(dlv[1], 1);
    assert_queue_holds(s, q, r, 2);
    assert_int_equal(store_return_unseen(s, r, 1), STORE_ENOTPENDING); /* queued, not pending */
    assert_int_equal(store_commit(s, q, r, 1), STORE_OK);
    assert_int_equal(store_return(s, r, 1), STORE_OK);
    assert_int_equal(store_peek_tokens(s, q, tokens, dlv, 2, &n), STORE_OK);
    assert_int_equal(dlv[0], 2);
    assert_int_equal(dlv[1], 1);
    assert_int_equal(store_pending_count(s), 0);
    store_close(s);
}

static void test_return_partial_positions_keep_arrival_order(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[10];
    for (size_t i = 0; i < 10; i++)
        r[i] = append_tagged(s, q, i, (uint32_t)(i + 1));
    flush(s);
    assert_int_equal(store_commit(s, q, r, 6), STORE_OK);
    /* Return 4 then 1 (0, 2, 3, 5 stay pending): the queue reads 1, 4, 6, 7, 8, 9. */
    store_ref_t back[2] = {r[4], r[1]};
    assert_int_equal(store_return(s, back, 2), STORE_OK);
    store_ref_t want[6] = {r[1], r[4], r[6], r[7], r[8], r[9]};
    assert_queue_holds(s, q, want, 6);
    assert_int_equal(queued_tokens(q), 2 + 5 + 7 + 8 + 9 + 10);
    assert_int_equal(store_pending_count(s), 4);
    /* Now return 3 and 0: 0, 1, 3, 4, 6, ... */
    store_ref_t back2[2] = {r[3], r[0]};
    assert_int_equal(store_return(s, back2, 2), STORE_OK);
    store_ref_t want2[8] = {r[0], r[1], r[3], r[4], r[6], r[7], r[8], r[9]};
    assert_queue_holds(s, q, want2, 8);
    assert_int_equal(store_pending_count(s), 2);
    /* Items 2 and 5 are still pending and complete normally. */
    int done = -1;
    assert_int_equal(store_tombstone(s, r[2], &done), STORE_OK);
    assert_int_equal(done, 1);
    assert_int_equal(store_tombstone(s, r[5], &done), STORE_OK);
    assert_int_equal(done, 1);
    /* The returned items sit at the front again: committing them in order works. */
    assert_int_equal(store_commit(s, q, want2, 3), STORE_OK);
    assert_queue_holds(s, q, want2 + 3, 5);
    store_close(s);
}

static void test_return_is_all_or_nothing(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[5];
    for (size_t i = 0; i < 5; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 3), STORE_OK);
    int done = -1;
    assert_int_equal(store_tombstone(s, r[2], &done), STORE_OK);
    /* r[0], r[1] pending; r[2] completed; r[3], r[4] queued; one unknown ref. */
    store_ref_t with_completed[3] = {r[0], r[1], r[2]};
    assert_int_equal(store_return(s, with_completed, 3), STORE_ENOTPENDING);
    store_ref_t with_queued[2] = {r[0], r[3]};
    assert_int_equal(store_return(s, with_queued, 2), STORE_ENOTPENDING);
    store_ref_t queued_first[2] = {r[4], r[1]};
    assert_int_equal(store_return(s, queued_first, 2), STORE_ENOTPENDING);
    store_ref_t with_unknown[2] = {r[1], {UINT64_MAX, 0}};
    assert_int_equal(store_return(s, with_unknown, 2), STORE_ENOTPENDING);

    assert_queue_holds(s, q, r + 3, 2);
    assert_int_equal(store_pending_count(s), 2);
    /* Both still pending: tombstone completes each. */
    assert_int_equal(store_tombstone(s, r[0], &done), STORE_OK);
    assert_int_equal(done, 1);
    assert_int_equal(store_tombstone(s, r[1], &done), STORE_OK);
    assert_int_equal(done, 1);
    store_close(s);
}

static void test_return_with_duplicate_ref_changes_nothing(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[3];
    for (size_t i = 0; i < 3; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    store_ref_t dup[3] = {r[0], r[1], r[0]};
    assert_int_equal(store_return(s, dup, 3), STORE_EINVAL);
    assert_queue_holds(s, q, r + 2, 1);
    assert_int_equal(store_pending_count(s), 2);
    store_close(s);
}

static void test_return_to_several_queues_at_once(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *qa = open_queue(s, "m", 1, 0);
    store_queue_t *qb = open_queue(s, "n", 2, 0);
    store_ref_t a[3], b[3];
    for (size_t i = 0; i < 3; i++) {
        a[i] = append_tagged(s, qa, i, 1);
        b[i] = append_tagged(s, qb, 10 + i, 100);
    }
    flush(s);
    assert_int_equal(store_commit(s, qa, a, 2), STORE_OK);
    assert_int_equal(store_commit(s, qb, b, 3), STORE_OK);
    store_ref_t mixed[4] = {b[2], a[1], b[0], a[0]};
    assert_int_equal(store_return(s, mixed, 4), STORE_OK);
    assert_queue_holds(s, qa, a, 3);
    store_ref_t want_b[2] = {b[0], b[2]};
    assert_queue_holds(s, qb, want_b, 2);
    assert_int_equal(queued_tokens(qa), 3);
    assert_int_equal(queued_tokens(qb), 200);
    assert_int_equal(store_pending_count(s), 1);
    store_close(s);
}

static void test_deliveries_count_each_commit(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[2];
    r[0] = append_tagged(s, q, 0, 1);
    r[1] = append_tagged(s, q, 1, 1);
    flush(s);
    for (uint32_t round = 0; round < 5; round++) {
        store_view_t v[2];
        size_t n = 0;
        assert_int_equal(store_peek(s, q, v, 2, &n), STORE_OK);
        assert_int_equal(n, 2);
        assert_int_equal(v[0].deliveries, round);
        /* r[1] is committed only in odd rounds. */
        assert_int_equal(v[1].deliveries, round / 2);
        size_t k = round % 2 == 0 ? 1 : 2;
        assert_int_equal(store_commit(s, q, r, k), STORE_OK);
        assert_int_equal(store_return(s, r, k), STORE_OK);
    }
    store_view_t v[2];
    size_t n = 0;
    assert_int_equal(store_peek(s, q, v, 2, &n), STORE_OK);
    assert_int_equal(v[0].deliveries, 5);
    assert_int_equal(v[1].deliveries, 2);
    store_close(s);
}

/* store_peek_tokens gives the tokens and delivery counts store_peek gives, for the same items:
 * any max, after commits and returns, and not the appended items a peek cannot see yet. */
static void test_peek_tokens_agrees_with_peek(void **state)
{
    (void)state;
    enum { N = 9 };
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[N];
    for (uint32_t i = 0; i < N; i++)
        r[i] = append_tagged(s, q, i, 10 + i * 7);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 4), STORE_OK);
    assert_int_equal(store_return(s, r + 1, 2), STORE_OK); /* back with a delivery each */
    append_tagged(s, q, 100, 5);                           /* not flushed */
    for (size_t max = 0; max <= N + 2; max++) {
        store_view_t v[N + 2];
        uint32_t tokens[N + 2], dlv[N + 2];
        size_t n = 99, m = 99;
        assert_int_equal(store_peek(s, q, v, max, &n), STORE_OK);
        assert_int_equal(store_peek_tokens(s, q, tokens, dlv, max, &m), STORE_OK);
        assert_int_equal(m, n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(tokens[i], v[i].tokens);
            assert_int_equal(dlv[i], v[i].deliveries);
        }
    }
    uint32_t tokens[2], dlv[2];
    size_t n = 0;
    assert_int_equal(store_peek_tokens(s, q, tokens, dlv, 2, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(tokens[0], 10 + 1 * 7); /* r[1] and r[2] came back first, delivered once */
    assert_int_equal(dlv[0], 1);
    assert_int_equal(store_peek_tokens(s, q, NULL, dlv, 1, &n), STORE_EINVAL);
    store_close(s);
}

/* store_queue_oldest is the front readable item's arrival: none before anything is readable, the
 * next one's after a commit (an unflushed one's once flushed), the returned one's after a return.
 * The hints before it change nothing (store_queue_prefetch, either level). */
static void test_queue_oldest_is_the_front(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    uint64_t t = 7;
    store_queue_prefetch(s, q, 0);
    store_queue_prefetch(s, q, 1);
    assert_false(store_queue_oldest(s, q, &t));
    store_ref_t r[3];
    for (uint32_t i = 0; i < 3; i++)
        r[i] = append_tagged(s, q, i, 10);
    flush(s);
    for (unsigned level = 0; level < 2; level++)
        store_queue_prefetch(s, q, level);
    assert_true(store_queue_oldest(s, q, &t));
    assert_int_equal(t, tag_arrival(0));
    assert_int_equal(store_commit(s, q, r, 1), STORE_OK);
    assert_true(store_queue_oldest(s, q, &t));
    assert_int_equal(t, tag_arrival(1));
    assert_int_equal(store_return(s, r, 1), STORE_OK);
    store_queue_prefetch(s, q, 1);
    assert_true(store_queue_oldest(s, q, &t));
    assert_int_equal(t, tag_arrival(0));
    /* Every readable one taken: the front is an unflushed append until the flush. */
    append_tagged(s, q, 3, 10);
    append_tagged(s, q, 4, 10);
    assert_int_equal(store_commit(s, q, r, 3), STORE_OK);
    if (is_disk())
        assert_false(store_queue_oldest(s, q, &t));
    flush(s);
    assert_true(store_queue_oldest(s, q, &t));
    assert_int_equal(t, tag_arrival(3));
    /* A return in front of it, and one behind the new front. */
    assert_int_equal(store_return(s, &r[1], 1), STORE_OK);
    assert_true(store_queue_oldest(s, q, &t));
    assert_int_equal(t, tag_arrival(1));
    assert_int_equal(store_return(s, &r[2], 1), STORE_OK);
    assert_true(store_queue_oldest(s, q, &t));
    assert_int_equal(t, tag_arrival(1));
    store_queue_prefetch(NULL, q, 0);
    store_queue_prefetch(s, NULL, 1);
    store_close(s);
}

static void test_queue_count_tracks_items_and_tokens(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_queue_t *other = open_queue(s, "m", 1, 1);
    store_ref_t r[4];
    uint32_t tok[4] = {5, 70, 300, 4000000000u};
    for (size_t i = 0; i < 4; i++)
        r[i] = append_tagged(s, q, i, tok[i]);
    append_tagged(s, other, 9, 11);
    flush(s);
    uint64_t items = 0, tokens = 0;
    store_queue_count(q, &items, &tokens);
    assert_int_equal(items, 4);
    assert_int_equal(tokens, 5ULL + 70 + 300 + 4000000000ULL);
    /* Pending items are not counted as queued. */
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    store_queue_count(q, &items, &tokens);
    assert_int_equal(items, 2);
    assert_int_equal(tokens, 300ULL + 4000000000ULL);
    /* Returned items are counted again; completed ones never. */
    assert_int_equal(store_return(s, r + 1, 1), STORE_OK);
    assert_int_equal(store_tombstone(s, r[0], NULL), STORE_OK);
    store_queue_count(q, &items, &tokens);
    assert_int_equal(items, 3);
    assert_int_equal(tokens, 70ULL + 300 + 4000000000ULL);
    /* Either out pointer may be NULL. */
    store_queue_count(q, NULL, NULL);
    assert_int_equal(queued_items(other), 1);
    assert_int_equal(queued_tokens(other), 11);
    store_close(s);
}

static void test_queue_open_same_key_returns_same_queue(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "llama", 7, 3);
    /* The model string is borrowed: a different buffer with the same text names the same key. */
    char model[8];
    strcpy(model, "llama");
    assert_ptr_equal(open_queue(s, model, 7, 3), q);
    store_ref_t r = append_tagged(s, q, 0, 1);
    flush(s);
    store_queue_t *again = open_queue(s, "llama", 7, 3);
    assert_ptr_equal(again, q);
    assert_queue_holds(s, again, &r, 1);
    /* Any differing part of the key gives a different queue. */
    store_queue_t *by_sig = open_queue(s, "llama", 8, 3);
    store_queue_t *by_lane = open_queue(s, "llama", 7, 4);
    store_queue_t *by_model = open_queue(s, "mistral", 7, 3);
    assert_ptr_not_equal(by_sig, q);
    assert_ptr_not_equal(by_lane, q);
    assert_ptr_not_equal(by_model, q);
    assert_ptr_not_equal(by_sig, by_lane);
    assert_ptr_not_equal(by_sig, by_model);
    assert_ptr_not_equal(by_lane, by_model);
    assert_int_equal(queued_items(by_sig), 0);
    assert_int_equal(queued_items(by_lane), 0);
    assert_int_equal(queued_items(by_model), 0);
    store_close(s);
}

static void test_queue_release_refuses_nonempty_queue(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r = append_tagged(s, q, 0, 1);
    /* Queued item, not yet flushed, then flushed. */
    assert_int_equal(store_queue_release(s, q), STORE_EBUSY);
    flush(s);
    assert_int_equal(store_queue_release(s, q), STORE_EBUSY);
    assert_queue_holds(s, q, &r, 1);
    /* Pending item. */
    assert_int_equal(store_commit(s, q, &r, 1), STORE_OK);
    assert_int_equal(store_queue_release(s, q), STORE_EBUSY);
    assert_int_equal(store_pending_count(s), 1);
    /* The pending item still returns into the queue it came from. */
    assert_int_equal(store_return(s, &r, 1), STORE_OK);
    assert_queue_holds(s, q, &r, 1);
    assert_int_equal(store_commit(s, q, &r, 1), STORE_OK);
    assert_int_equal(store_tombstone(s, r, NULL), STORE_OK);
    /* Completed: now empty, release succeeds. */
    assert_int_equal(store_queue_release(s, q), STORE_OK);
    assert_int_equal(store_pending_count(s), 0);
    /* A fresh queue that was never used can be released too. */
    store_queue_t *fresh = open_queue(s, "m", 1, 1);
    assert_int_equal(store_queue_release(s, fresh), STORE_OK);
    store_close(s);
}

static void test_tombstone_after_queue_release_is_harmless(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[2];
    r[0] = append_tagged(s, q, 0, 1);
    r[1] = append_tagged(s, q, 1, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 2), STORE_OK);
    assert_int_equal(store_tombstone(s, r[0], NULL), STORE_OK);
    assert_int_equal(store_tombstone(s, r[1], NULL), STORE_OK);
    assert_int_equal(store_queue_release(s, q), STORE_OK);
    /* A late duplicate ack for an item of the released queue: harmless, not a completion. */
    int done = -1;
    assert_int_equal(store_tombstone(s, r[0], &done), STORE_OK);
    assert_int_equal(done, 0);
    done = -1;
    assert_int_equal(store_tombstone(s, r[1], &done), STORE_OK);
    assert_int_equal(done, 0);
    assert_int_equal(store_pending_count(s), 0);
    store_close(s);
}

static void test_queue_reopened_after_release_is_empty_and_not_aliased(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t old = append_tagged(s, q, 0, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, &old, 1), STORE_OK);
    assert_int_equal(store_tombstone(s, old, NULL), STORE_OK);
    assert_int_equal(store_queue_release(s, q), STORE_OK);

    store_queue_t *q2 = open_queue(s, "m", 1, 0);
    assert_int_equal(queued_items(q2), 0);
    assert_int_equal(queued_tokens(q2), 0);
    store_ref_t fresh = append_tagged(s, q2, 1, 1);
    /* The new item's ref is not the old one's, so a late ack of the old item touches nothing. */
    assert_false(ref_eq(fresh, old));
    flush(s);
    assert_int_equal(store_commit(s, q2, &fresh, 1), STORE_OK);
    int done = -1;
    assert_int_equal(store_tombstone(s, old, &done), STORE_OK);
    assert_int_equal(done, 0);
    assert_int_equal(store_pending_count(s), 1);
    assert_int_equal(store_tombstone(s, fresh, &done), STORE_OK);
    assert_int_equal(done, 1);
    store_close(s);
}

/*
 * store.h: "A ref that was never committed ... gives STORE_ENOTPENDING". That includes an offset
 * the released queue never handed out.
 */
static void test_tombstone_of_never_issued_offset_in_released_queue_is_not_pending(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r = append_tagged(s, q, 0, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, &r, 1), STORE_OK);
    assert_int_equal(store_tombstone(s, r, NULL), STORE_OK);
    assert_int_equal(store_queue_release(s, q), STORE_OK);
    /* Past the only item, and just after its ref (the queue held one item: no ref follows it). */
    store_ref_t never = {r.queue, r.offset + 1000};
    store_ref_t next_to = {r.queue, r.offset + 1};
    int done = -1, done_next_to = -1;
    store_status_t st = store_tombstone(s, never, &done);
    store_status_t st_next_to = store_tombstone(s, next_to, &done_next_to);
    store_close(s); /* before asserting, so a failure here reports no leak under ASan */
    assert_int_equal(st, STORE_ENOTPENDING);
    assert_int_equal(done, -1);
    assert_int_equal(st_next_to, STORE_ENOTPENDING);
    assert_int_equal(done_next_to, -1);
}

static void test_current_shape_roundtrip(void **state)
{
    (void)state;
    store_t *s = open_store();
    int has = -1;
    uint64_t sig = 0;
    /* Absent model: has = 0. */
    assert_int_equal(store_current_shape_get(s, "llama", &has, &sig), STORE_OK);
    assert_int_equal(has, 0);
    /* A model known only through a queue has no current shape either. */
    open_queue(s, "qwen", 5, 0);
    has = -1;
    assert_int_equal(store_current_shape_get(s, "qwen", &has, &sig), STORE_OK);
    assert_int_equal(has, 0);

    assert_int_equal(store_current_shape_set(s, "llama", 0xABCDEF0123456789ULL), STORE_OK);
    assert_int_equal(store_current_shape_get(s, "llama", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0xABCDEF0123456789ULL);
    /* Overwrite, and zero is a valid signature. */
    assert_int_equal(store_current_shape_set(s, "llama", 0), STORE_OK);
    sig = 99;
    assert_int_equal(store_current_shape_get(s, "llama", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0);
    /* Per model: another model is independent. */
    assert_int_equal(store_current_shape_set(s, "qwen", 17), STORE_OK);
    assert_int_equal(store_current_shape_get(s, "qwen", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 17);
    assert_int_equal(store_current_shape_get(s, "llama", &has, &sig), STORE_OK);
    assert_int_equal(has, 1);
    assert_int_equal(sig, 0);
    /* The model string is borrowed: a different buffer with the same text is the same model. */
    char name[8];
    strcpy(name, "qwen");
    assert_int_equal(store_current_shape_get(s, name, &has, &sig), STORE_OK);
    assert_int_equal(sig, 17);
    assert_int_equal(store_current_shape_get(s, "llama2", &has, &sig), STORE_OK);
    assert_int_equal(has, 0);
    store_close(s);
}

static void test_views_carry_signature_of_queue(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *qa = open_queue(s, "m", 0x1111, 0);
    store_queue_t *qb = open_queue(s, "m", 0x2222, 0);
    store_queue_t *qc = open_queue(s, "m", 0x1111, 1);
    append_tagged(s, qa, 0, 1);
    append_tagged(s, qb, 1, 1);
    append_tagged(s, qc, 2, 1);
    append_tagged(s, qa, 3, 1);
    flush(s);
    store_view_t v[2];
    size_t n = 0;
    assert_int_equal(store_peek(s, qa, v, 2, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].signature, 0x1111);
    assert_int_equal(v[1].signature, 0x1111);
    assert_int_equal(store_peek(s, qb, v, 2, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].signature, 0x2222);
    assert_int_equal(store_peek(s, qc, v, 2, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].signature, 0x1111);
    store_close(s);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    assert_int_equal(store_open_memory(NULL), STORE_EINVAL);
    store_close(NULL); /* NULL-safe */
    assert_int_equal(store_flush(NULL), STORE_EINVAL);

    /* store_open_disk checks its arguments before touching the file system. */
    static const char never[] = "/tmp/lanes-test-store-never-created";
    store_t *sentinel = (store_t *)(uintptr_t)0x4321;
    store_t *out_s = sentinel;
    store_disk_config_t cfg = {.dir = never};
    store_disk_config_t no_dir = {.dir = NULL};
    store_disk_config_t empty_dir = {.dir = ""};
    store_disk_config_t huge_segments = {.dir = never, .segment_max_bytes = (1ull << 31) + 1};
    store_disk_config_t many_threads = {.dir = never,
                                        .recovery_threads = STORE_RECOVERY_THREADS_MAX + 1};
    assert_int_equal(store_open_disk(&many_threads, NULL, &out_s), STORE_EINVAL);
    assert_int_equal(store_open_disk(NULL, NULL, &out_s), STORE_EINVAL);
    assert_int_equal(store_open_disk(&no_dir, NULL, &out_s), STORE_EINVAL);
    assert_int_equal(store_open_disk(&empty_dir, NULL, &out_s), STORE_EINVAL);
    assert_int_equal(store_open_disk(&huge_segments, NULL, &out_s), STORE_EINVAL);
    assert_int_equal(store_open_disk(&cfg, NULL, NULL), STORE_EINVAL);
    assert_ptr_equal(out_s, sentinel);
    struct stat sb;
    assert_int_not_equal(stat(never, &sb), 0);

    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_queue_t *out = NULL;
    store_key_t key = {.model = "m", .signature = 1};
    store_key_t null_model = {.model = NULL, .signature = 1};
    store_key_t empty_model = {.model = "", .signature = 1};
    assert_int_equal(store_queue_open(NULL, &key, &out), STORE_EINVAL);
    assert_int_equal(store_queue_open(s, NULL, &out), STORE_EINVAL);
    assert_int_equal(store_queue_open(s, &null_model, &out), STORE_EINVAL);
    assert_int_equal(store_queue_open(s, &empty_model, &out), STORE_EINVAL);
    assert_int_equal(store_queue_open(s, &key, NULL), STORE_EINVAL);

    assert_int_equal(store_queue_release(NULL, q), STORE_EINVAL);
    assert_int_equal(store_queue_release(s, NULL), STORE_EINVAL);

    uint8_t byte = 7;
    store_item_t good = {.id = &byte, .id_len = 1, .payload = &byte, .payload_len = 1, .tokens = 1};
    store_item_t zero_tokens = good;
    zero_tokens.tokens = 0;
    store_item_t null_id = good;
    null_id.id = NULL;
    store_item_t null_payload = good;
    null_payload.payload = NULL;
    store_ref_t ref;
    assert_int_equal(store_append(NULL, q, &good, &ref), STORE_EINVAL);
    assert_int_equal(store_append(s, NULL, &good, &ref), STORE_EINVAL);
    assert_int_equal(store_append(s, q, NULL, &ref), STORE_EINVAL);
    assert_int_equal(store_append(s, q, &zero_tokens, &ref), STORE_EINVAL);
    assert_int_equal(store_append(s, q, &null_id, &ref), STORE_EINVAL);
    assert_int_equal(store_append(s, q, &null_payload, &ref), STORE_EINVAL);

    store_view_t v;
    size_t n;
    assert_int_equal(store_peek(NULL, q, &v, 1, &n), STORE_EINVAL);
    assert_int_equal(store_peek(s, NULL, &v, 1, &n), STORE_EINVAL);
    assert_int_equal(store_peek(s, q, NULL, 1, &n), STORE_EINVAL);
    assert_int_equal(store_peek(s, q, &v, 1, NULL), STORE_EINVAL);

    store_ref_t r = {0, 0};
    assert_int_equal(store_commit(NULL, q, &r, 1), STORE_EINVAL);
    assert_int_equal(store_commit(s, NULL, &r, 1), STORE_EINVAL);
    assert_int_equal(store_commit(s, q, NULL, 1), STORE_EINVAL);

    int done;
    assert_int_equal(store_tombstone(NULL, r, &done), STORE_EINVAL);

    assert_int_equal(store_return(NULL, &r, 1), STORE_EINVAL);
    assert_int_equal(store_return(s, NULL, 1), STORE_EINVAL);

    assert_int_equal(store_queue_target_set(NULL, q, 1), STORE_EINVAL);
    assert_int_equal(store_queue_target_set(s, NULL, 1), STORE_EINVAL);
    assert_int_equal(store_queue_next(NULL, NULL, NULL, NULL, NULL), 0);

    assert_int_equal(store_current_shape_set(NULL, "m", 1), STORE_EINVAL);
    assert_int_equal(store_current_shape_set(s, NULL, 1), STORE_EINVAL);
    assert_int_equal(store_current_shape_set(s, "", 1), STORE_EINVAL);
    int has;
    uint64_t sig;
    assert_int_equal(store_current_shape_get(NULL, "m", &has, &sig), STORE_EINVAL);
    assert_int_equal(store_current_shape_get(s, NULL, &has, &sig), STORE_EINVAL);
    assert_int_equal(store_current_shape_get(s, "m", NULL, &sig), STORE_EINVAL);
    assert_int_equal(store_current_shape_get(s, "m", &has, NULL), STORE_EINVAL);

    /* None of the rejected calls changed anything. */
    assert_int_equal(queued_items(q), 0);
    assert_int_equal(queued_tokens(q), 0);
    assert_int_equal(store_pending_count(s), 0);
    assert_int_equal(store_current_shape_get(s, "m", &has, &sig), STORE_OK);
    assert_int_equal(has, 0);
    store_close(s);
}

static void test_failed_calls_leave_out_pointers_untouched(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_queue_t *sentinel_q = (store_queue_t *)(uintptr_t)0x1234;
    store_queue_t *out_q = sentinel_q;
    store_key_t empty_model = {.model = "", .signature = 1};
    assert_int_equal(store_queue_open(s, &empty_model, &out_q), STORE_EINVAL);
    assert_ptr_equal(out_q, sentinel_q);

    store_item_t zero_tokens = {.tokens = 0};
    store_ref_t ref = {0xAAAA, 0xBBBB};
    assert_int_equal(store_append(s, q, &zero_tokens, &ref), STORE_EINVAL);
    assert_int_equal(ref.queue, 0xAAAA);
    assert_int_equal(ref.offset, 0xBBBB);

    size_t n = 0xCCCC;
    assert_int_equal(store_peek(s, q, NULL, 3, &n), STORE_EINVAL);
    assert_int_equal(n, 0xCCCC);

    int done = 0x5A5A;
    store_ref_t unknown = {UINT64_MAX, 3};
    assert_int_equal(store_tombstone(s, unknown, &done), STORE_ENOTPENDING);
    assert_int_equal(done, 0x5A5A);
    assert_int_equal(store_tombstone(NULL, unknown, &done), STORE_EINVAL);
    assert_int_equal(done, 0x5A5A);

    int has = 0x77;
    uint64_t sig = 0x88;
    assert_int_equal(store_current_shape_get(s, NULL, &has, &sig), STORE_EINVAL);
    assert_int_equal(has, 0x77);
    assert_int_equal(sig, 0x88);
    store_close(s);
}

static void test_fifo_order_survives_growth_and_compaction(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    enum { N = 3000 };
    store_ref_t *r = malloc(N * sizeof(*r));
    assert_non_null(r);
    size_t appended = 0, committed = 0;
    uint64_t tokens = 0;
    /* Append 5, commit 3 (and complete them) repeatedly, so the array grows, the head walks and
     * the queue compacts; then drain. The front is always the oldest uncommitted item. */
    while (appended < N) {
        for (int i = 0; i < 5 && appended < N; i++) {
            r[appended] = append_tagged(s, q, appended, (uint32_t)(appended % 7 + 1));
            tokens += appended % 7 + 1;
            appended++;
        }
        flush(s);
        size_t k = appended - committed < 3 ? appended - committed : 3;
        store_view_t v[3];
        size_t n = 0;
        assert_int_equal(store_peek(s, q, v, 3, &n), STORE_OK);
        assert_int_equal(n, k);
        for (size_t i = 0; i < k; i++) {
            assert_ref_equal(v[i].ref, r[committed + i]);
            assert_int_equal(v[i].arrival_ns, tag_arrival(committed + i));
        }
        assert_int_equal(store_commit(s, q, r + committed, k), STORE_OK);
        for (size_t i = 0; i < k; i++) {
            tokens -= (committed + i) % 7 + 1;
            assert_int_equal(store_tombstone(s, r[committed + i], NULL), STORE_OK);
        }
        committed += k;
        assert_int_equal(queued_items(q), appended - committed);
        assert_int_equal(queued_tokens(q), tokens);
    }
    size_t drained = 0;
    while (committed < N) {
        assert_int_equal(store_commit(s, q, r + committed, 1), STORE_OK);
        committed++;
        drained++;
    }
    assert_true(drained > 1000);
    assert_int_equal(queued_items(q), 0);
    assert_int_equal(queued_tokens(q), 0);
    assert_int_equal(store_pending_count(s), drained);
    free(r);
    store_close(s);
}

static void test_close_frees_queued_and_pending_items(void **state)
{
    (void)state;
    /* Run under AddressSanitizer, a leak here fails the test binary. */
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 1, 0);
    store_ref_t r[6];
    for (size_t i = 0; i < 6; i++)
        r[i] = append_tagged(s, q, i, 1);
    flush(s);
    assert_int_equal(store_commit(s, q, r, 4), STORE_OK);
    assert_int_equal(store_tombstone(s, r[0], NULL), STORE_OK);
    assert_int_equal(store_current_shape_set(s, "m", 3), STORE_OK);
    assert_int_equal(store_pending_count(s), 3);
    assert_int_equal(queued_items(q), 2);
    store_close(s);
}

/* prefix_tokens and max_wait_ms: kept with the item, handed back by every peek and scan, and
 * after a commit and a return; 0 stays 0 (none). */
typedef struct {
    size_t n;
    uint32_t prefix[8], max_wait[8];
} scan_fields_t;

static void scan_fields(void *ctx, const store_view_t *v)
{
    scan_fields_t *sf = ctx;
    if (sf->n < 8) {
        sf->prefix[sf->n] = v->prefix_tokens;
        sf->max_wait[sf->n++] = v->max_wait_ms;
    }
}

static void test_item_fields_come_back_with_every_peek(void **state)
{
    (void)state;
    store_t *s = open_store();
    store_queue_t *q = open_queue(s, "m", 9, 0);
    static const uint32_t prefix[4] = {0, 17, 4096, UINT32_MAX};
    static const uint32_t max_wait[4] = {250, 0, UINT32_MAX, 1};
    store_ref_t refs[4];
    for (int i = 0; i < 4; i++) {
        uint8_t id[1] = {(uint8_t)i};
        store_item_t it = {.id = id,
                           .id_len = 1,
                           .tokens = 5,
                           .arrival_ns = 10,
                           .prefix_tokens = prefix[i],
                           .max_wait_ms = max_wait[i]};
        assert_int_equal(store_append(s, q, &it, &refs[i]), STORE_OK);
    }
    flush(s);
    store_view_t v[4];
    size_t n = 0;
    assert_int_equal(store_peek(s, q, v, 4, &n), STORE_OK);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(v[i].prefix_tokens, prefix[i]);
        assert_int_equal(v[i].max_wait_ms, max_wait[i]);
    }
    scan_fields_t sf = {0};
    assert_int_equal(store_queue_scan(s, q, scan_fields, &sf), STORE_OK);
    assert_int_equal(sf.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sf.prefix[i], prefix[i]);
        assert_int_equal(sf.max_wait[i], max_wait[i]);
    }
    assert_int_equal(store_commit(s, q, refs, 2), STORE_OK);
    assert_int_equal(store_return(s, refs, 2), STORE_OK);
    assert_int_equal(store_peek(s, q, v, 4, &n), STORE_OK);
    assert_int_equal(n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(v[i].prefix_tokens, prefix[i]);
        assert_int_equal(v[i].max_wait_ms, max_wait[i]);
        assert_int_equal(v[i].deliveries, i < 2 ? 1 : 0);
    }
    store_close(s);
}

static void test_status_str_covers_every_status(void **state)
{
    (void)state;
    const char *seen[STORE_STATUS_COUNT];
    for (int i = 0; i < STORE_STATUS_COUNT; i++) {
        seen[i] = store_status_str((store_status_t)i);
        assert_non_null(seen[i]);
        assert_true(strlen(seen[i]) > 0);
        assert_string_not_equal(seen[i], "unknown store status");
        for (int j = 0; j < i; j++)
            assert_string_not_equal(seen[i], seen[j]);
    }
    assert_int_equal(STORE_STATUS_COUNT, 11);
    assert_string_equal(store_status_str(STORE_OK), "ok");
    assert_string_equal(store_status_str(STORE_ESTALE),
                        "commit does not match the head of the lane queue (peek is stale)");
    assert_string_equal(store_status_str(STORE_STATUS_COUNT), "unknown store status");
    assert_string_equal(store_status_str((store_status_t)-1), "unknown store status");
    assert_string_equal(store_status_str((store_status_t)12345), "unknown store status");
}

/* ---- randomized test against a reference model ------------------------------------------ */

enum { RQ = 4 };                              /* queues */
enum { ST_QUEUED, ST_PENDING, ST_COMPLETED }; /* item states in the model */

typedef struct {
    store_ref_t ref;
    uint64_t tag;
    uint32_t tokens;
    uint32_t deliveries;
    int state;
    int queue;   /* model queue index */
    int flushed; /* a flush returned since its append: peek shows it */
} ritem_t;

typedef struct {
    store_queue_t *q;
    const char *model;
    uint64_t signature;
    uint32_t lane;
    size_t *live; /* indices into items of queued or pending items, in append order */
    size_t n_live;
    size_t cap_live;
} rqueue_t;

typedef struct {
    uint64_t seed;
    size_t step;
    uint64_t rng;
    store_t *s;
    ritem_t *items;
    size_t n_items, cap_items;
    rqueue_t queues[RQ];
    size_t *pending; /* indices of pending items, any order */
    size_t n_pending, cap_pending;
    store_ref_t completed[256]; /* a sample of completed refs, for duplicate acks */
    size_t n_completed;
    uint64_t next_tag;
    /* How often each interesting outcome happened, so the test proves it exercised them. */
    size_t n_commit_ok, n_commit_stale, n_return_ok, n_return_refused, n_tomb_first, n_tomb_again,
        n_tomb_queued, n_release_ok, n_release_busy, n_flush, n_commit_unflushed;
} rmodel_t;

#define MODEL_CHECK(m, cond)                                                                  \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            print_error("seed %llu step %zu: %s\n", (unsigned long long)(m)->seed, (m)->step, \
                        #cond);                                                               \
            fail();                                                                           \
        }                                                                                     \
    } while (0)

static uint64_t rnd(rmodel_t *m)
{
    /* splitmix64 */
    uint64_t z = (m->rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static size_t rnd_below(rmodel_t *m, size_t n)
{
    return (size_t)(rnd(m) % n);
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *np = realloc(p, c * elem);
    assert_non_null(np);
    *cap = c;
    return np;
}

/* Queued items of model queue qi that peek shows (flushed), in order (append order = ref
 * order). Unflushed items are always the newest, so these are a prefix of the queue. */
static size_t model_queued(const rmodel_t *m, int qi, size_t *out)
{
    const rqueue_t *rq = &m->queues[qi];
    size_t n = 0;
    for (size_t i = 0; i < rq->n_live; i++) {
        const ritem_t *it = &m->items[rq->live[i]];
        if (it->state == ST_QUEUED && it->flushed)
            out[n++] = rq->live[i];
    }
    return n;
}

/* All queued items of model queue qi, flushed or not, in order. */
static size_t model_queued_all(const rmodel_t *m, int qi, size_t *out)
{
    const rqueue_t *rq = &m->queues[qi];
    size_t n = 0;
    for (size_t i = 0; i < rq->n_live; i++) {
        if (m->items[rq->live[i]].state == ST_QUEUED)
            out[n++] = rq->live[i];
    }
    return n;
}

static void model_drop_live(rmodel_t *m, size_t idx)
{
    rqueue_t *rq = &m->queues[m->items[idx].queue];
    for (size_t i = 0; i < rq->n_live; i++) {
        if (rq->live[i] == idx) {
            memmove(rq->live + i, rq->live + i + 1, (rq->n_live - i - 1) * sizeof(*rq->live));
            rq->n_live--;
            return;
        }
    }
    fail();
}

static void model_drop_pending(rmodel_t *m, size_t idx)
{
    for (size_t i = 0; i < m->n_pending; i++) {
        if (m->pending[i] == idx) {
            m->pending[i] = m->pending[--m->n_pending];
            return;
        }
    }
    fail();
}

static void model_check(rmodel_t *m, size_t *scratch, store_view_t *views, size_t max_views)
{
    uint64_t pending = 0;
    size_t unflushed = 0;
    for (int qi = 0; qi < RQ; qi++) {
        rqueue_t *rq = &m->queues[qi];
        /* Queue totals count every queued item, flushed or not. */
        size_t n_all = model_queued_all(m, qi, scratch);
        uint64_t tokens = 0;
        for (size_t i = 0; i < n_all; i++) {
            tokens += m->items[scratch[i]].tokens;
            unflushed += !m->items[scratch[i]].flushed;
        }
        for (size_t i = 0; i < rq->n_live; i++)
            pending += m->items[rq->live[i]].state == ST_PENDING;
        uint64_t got_items = 0, got_tokens = 0;
        store_queue_count(rq->q, &got_items, &got_tokens);
        MODEL_CHECK(m, got_items == n_all);
        MODEL_CHECK(m, got_tokens == tokens);
        /* Peek shows the flushed ones. */
        size_t n = model_queued(m, qi, scratch);
        MODEL_CHECK(m, n < max_views);
        size_t got = 0;
        MODEL_CHECK(m, store_peek(m->s, rq->q, views, max_views, &got) == STORE_OK);
        MODEL_CHECK(m, got == n);
        for (size_t i = 0; i < n; i++) {
            const ritem_t *it = &m->items[scratch[i]];
            const store_view_t *v = &views[i];
            uint8_t id[8], payload[32];
            size_t id_len = tag_id(it->tag, id);
            size_t payload_len = tag_payload(it->tag, payload);
            MODEL_CHECK(m, ref_eq(v->ref, it->ref));
            MODEL_CHECK(m, v->tokens == it->tokens);
            MODEL_CHECK(m, v->deliveries == it->deliveries);
            MODEL_CHECK(m, v->signature == rq->signature);
            MODEL_CHECK(m, v->arrival_ns == tag_arrival(it->tag));
            MODEL_CHECK(m, v->id_len == id_len && memcmp(v->id_view, id, id_len) == 0);
            MODEL_CHECK(
                m, v->payload_len == payload_len &&
                       (payload_len == 0 || memcmp(v->payload_view, payload, payload_len) == 0));
        }
    }
    MODEL_CHECK(m, pending == m->n_pending);
    MODEL_CHECK(m, store_pending_count(m->s) == m->n_pending);
    MODEL_CHECK(m, (store_unflushed_bytes(m->s) > 0) == (unflushed > 0));
}

static void model_append(rmodel_t *m)
{
    int qi = (int)rnd_below(m, RQ);
    rqueue_t *rq = &m->queues[qi];
    m->items = grow(m->items, &m->cap_items, m->n_items + 1, sizeof(*m->items));
    rq->live = grow(rq->live, &rq->cap_live, rq->n_live + 1, sizeof(*rq->live));
    uint64_t tag = m->next_tag++;
    uint32_t tokens = (uint32_t)(1 + rnd_below(m, 2048));
    store_ref_t ref = append_tagged(m->s, rq->q, tag, tokens);
    /* Refs grow in append order within a queue. */
    if (rq->n_live > 0) {
        const ritem_t *last = &m->items[rq->live[rq->n_live - 1]];
        MODEL_CHECK(m, ref_before(last->ref, ref));
    }
    m->items[m->n_items] = (ritem_t){.ref = ref,
                                     .tag = tag,
                                     .tokens = tokens,
                                     .deliveries = 0,
                                     .state = ST_QUEUED,
                                     .queue = qi,
                                     .flushed = !is_disk()};
    rq->live[rq->n_live++] = m->n_items++;
}

static void model_flush(rmodel_t *m)
{
    MODEL_CHECK(m, store_flush(m->s) == STORE_OK);
    for (size_t i = 0; i < m->n_items; i++)
        m->items[i].flushed = 1;
    m->n_flush++;
}

static void model_peek_prefix(rmodel_t *m, size_t *scratch, store_view_t *views)
{
    int qi = (int)rnd_below(m, RQ);
    size_t n = model_queued(m, qi, scratch);
    size_t max = rnd_below(m, 10);
    size_t got = 999;
    MODEL_CHECK(m, store_peek(m->s, m->queues[qi].q, views, max, &got) == STORE_OK);
    MODEL_CHECK(m, got == (n < max ? n : max));
    for (size_t i = 0; i < got; i++)
        MODEL_CHECK(m, ref_eq(views[i].ref, m->items[scratch[i]].ref));
}

static void model_commit(rmodel_t *m, size_t *scratch)
{
    int qi = (int)rnd_below(m, RQ);
    rqueue_t *rq = &m->queues[qi];
    size_t n = model_queued(m, qi, scratch);
    if (n == 0)
        return;
    size_t k = 1 + rnd_below(m, n < 8 ? n : 8);
    store_ref_t refs[9];
    for (size_t i = 0; i < k; i++)
        refs[i] = m->items[scratch[i]].ref;
    size_t nrefs = k;
    int stale = rnd_below(m, 4) == 0;
    if (stale) {
        switch (rnd_below(m, 4)) {
        case 0: /* one more ref than peek shows: the first unflushed item, or a made-up one */
            if (k == n) {
                size_t n_all = model_queued_all(m, qi, scratch);
                if (n_all > n) {
                    refs[k] = m->items[scratch[n]].ref;
                    m->n_commit_unflushed++;
                } else {
                    refs[k] = (store_ref_t){refs[k - 1].queue, refs[k - 1].offset + 1000000};
                }
                nrefs = k + 1;
                break;
            }
            /* fall through */
        case 1: /* a ref of a later queued item in place of one of the batch */
            if (n >= 2) {
                size_t at = rnd_below(m, k);
                size_t other = rnd_below(m, n - 1);
                if (other >= at)
                    other++;
                refs[at] = m->items[scratch[other]].ref;
                break;
            }
            /* fall through */
        case 2: /* a wrong queue id */
        {
            size_t at = rnd_below(m, k);
            refs[at].queue ^= 0x8000000000000000ULL;
            break;
        }
        default: /* a pending or completed item in place of the first */
            if (m->n_pending > 0)
                refs[0] = m->items[m->pending[rnd_below(m, m->n_pending)]].ref;
            else if (m->n_completed > 0)
                refs[0] = m->completed[rnd_below(m, m->n_completed)];
            else
                refs[0].offset += 1000000;
            break;
        }
    }
    store_status_t st = store_commit(m->s, rq->q, refs, nrefs);
    if (stale) {
        MODEL_CHECK(m, st == STORE_ESTALE);
        m->n_commit_stale++;
        return;
    }
    MODEL_CHECK(m, st == STORE_OK);
    m->n_commit_ok++;
    for (size_t i = 0; i < k; i++) {
        ritem_t *it = &m->items[scratch[i]];
        it->state = ST_PENDING;
        it->deliveries++;
        m->pending = grow(m->pending, &m->cap_pending, m->n_pending + 1, sizeof(*m->pending));
        m->pending[m->n_pending++] = scratch[i];
    }
}

static void model_remember_completed(rmodel_t *m, store_ref_t ref)
{
    if (m->n_completed < 256)
        m->completed[m->n_completed++] = ref;
    else
        m->completed[rnd_below(m, 256)] = ref;
}

static void model_tombstone(rmodel_t *m, size_t *scratch)
{
    size_t kind = rnd_below(m, 10);
    int done = -1;
    if (kind < 6 && m->n_pending > 0) {
        size_t idx = m->pending[rnd_below(m, m->n_pending)];
        ritem_t *it = &m->items[idx];
        MODEL_CHECK(m, store_tombstone(m->s, it->ref, &done) == STORE_OK);
        MODEL_CHECK(m, done == 1);
        it->state = ST_COMPLETED;
        model_drop_pending(m, idx);
        model_drop_live(m, idx);
        model_remember_completed(m, it->ref);
        m->n_tomb_first++;
    } else if (kind < 8 && m->n_completed > 0) {
        store_ref_t ref = m->completed[rnd_below(m, m->n_completed)];
        MODEL_CHECK(m, store_tombstone(m->s, ref, &done) == STORE_OK);
        MODEL_CHECK(m, done == 0);
        m->n_tomb_again++;
    } else {
        /* A queued item, flushed or not. */
        int qi = (int)rnd_below(m, RQ);
        size_t n = model_queued_all(m, qi, scratch);
        if (n == 0)
            return;
        ritem_t *it = &m->items[scratch[rnd_below(m, n)]];
        MODEL_CHECK(m, store_tombstone(m->s, it->ref, &done) == STORE_ENOTPENDING);
        MODEL_CHECK(m, done == -1);
        m->n_tomb_queued++;
    }
}

static void model_return(rmodel_t *m, size_t *scratch)
{
    if (m->n_pending == 0)
        return;
    /* A random subset of the pending items, across queues, in random order. */
    size_t want = 1 + rnd_below(m, m->n_pending < 6 ? m->n_pending : 6);
    size_t pick[7];
    size_t k = 0;
    while (k < want) {
        size_t idx = m->pending[rnd_below(m, m->n_pending)];
        int dup = 0;
        for (size_t j = 0; j < k; j++)
            dup |= pick[j] == idx;
        if (!dup)
            pick[k++] = idx;
    }
    store_ref_t refs[7];
    for (size_t i = 0; i < k; i++)
        refs[i] = m->items[pick[i]].ref;
    size_t nrefs = k;
    int refuse = rnd_below(m, 5) == 0;
    if (refuse) {
        /* One ref that is not pending, at a random position: a queued or a completed item. */
        store_ref_t bad = {UINT64_MAX - 1, 0};
        int qi = (int)rnd_below(m, RQ);
        size_t n = model_queued_all(m, qi, scratch);
        if (n > 0 && rnd_below(m, 2) == 0)
            bad = m->items[scratch[rnd_below(m, n)]].ref;
        else if (m->n_completed > 0)
            bad = m->completed[rnd_below(m, m->n_completed)];
        size_t at = rnd_below(m, k + 1);
        memmove(refs + at + 1, refs + at, (k - at) * sizeof(*refs));
        refs[at] = bad;
        nrefs = k + 1;
    }
    store_status_t st = store_return(m->s, refs, nrefs);
    if (refuse) {
        MODEL_CHECK(m, st == STORE_ENOTPENDING);
        m->n_return_refused++;
        return;
    }
    MODEL_CHECK(m, st == STORE_OK);
    m->n_return_ok++;
    for (size_t i = 0; i < k; i++) {
        m->items[pick[i]].state = ST_QUEUED;
        model_drop_pending(m, pick[i]);
    }
}

static void model_release(rmodel_t *m)
{
    int qi = (int)rnd_below(m, RQ);
    rqueue_t *rq = &m->queues[qi];
    store_status_t st = store_queue_release(m->s, rq->q);
    if (rq->n_live > 0) {
        MODEL_CHECK(m, st == STORE_EBUSY);
        m->n_release_busy++;
        return;
    }
    MODEL_CHECK(m, st == STORE_OK);
    m->n_release_ok++;
    rq->q = open_queue(m->s, rq->model, rq->signature, rq->lane);
}

/* Empties model queue qi through the store (commit everything queued, complete everything
 * pending), checking each step, so that the following release can succeed. */
static void model_drain(rmodel_t *m, int qi, size_t *scratch, store_view_t *views, size_t max)
{
    rqueue_t *rq = &m->queues[qi];
    model_flush(m);
    while (rq->n_live > 0) {
        size_t n = model_queued(m, qi, scratch);
        if (n > 0) {
            size_t k = n < 8 ? n : 8;
            store_ref_t refs[8];
            for (size_t i = 0; i < k; i++)
                refs[i] = m->items[scratch[i]].ref;
            MODEL_CHECK(m, store_commit(m->s, rq->q, refs, k) == STORE_OK);
            for (size_t i = 0; i < k; i++) {
                ritem_t *it = &m->items[scratch[i]];
                it->state = ST_PENDING;
                it->deliveries++;
                m->pending =
                    grow(m->pending, &m->cap_pending, m->n_pending + 1, sizeof(*m->pending));
                m->pending[m->n_pending++] = scratch[i];
            }
        } else {
            size_t idx = rq->live[0];
            int done = -1;
            MODEL_CHECK(m, store_tombstone(m->s, m->items[idx].ref, &done) == STORE_OK);
            MODEL_CHECK(m, done == 1);
            m->items[idx].state = ST_COMPLETED;
            model_drop_pending(m, idx);
            model_drop_live(m, idx);
            model_remember_completed(m, m->items[idx].ref);
        }
        model_check(m, scratch, views, max);
    }
}

static void run_model(uint64_t seed, size_t steps)
{
    rmodel_t *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    m->seed = seed;
    m->rng = seed;
    m->s = open_store();
    static const char *const models[RQ] = {"llama", "llama", "qwen", "llama"};
    static const uint64_t sigs[RQ] = {0xA1, 0xA1, 0xB2, 0xC3};
    static const uint32_t lanes[RQ] = {0, 1, 0, 0};
    for (int qi = 0; qi < RQ; qi++) {
        m->queues[qi].model = models[qi];
        m->queues[qi].signature = sigs[qi];
        m->queues[qi].lane = lanes[qi];
        m->queues[qi].q = open_queue(m->s, models[qi], sigs[qi], lanes[qi]);
    }
    enum { MAX_VIEWS = 4096 };
    size_t *scratch = malloc(MAX_VIEWS * sizeof(*scratch));
    store_view_t *views = malloc(MAX_VIEWS * sizeof(*views));
    assert_non_null(scratch);
    assert_non_null(views);
    size_t max_queued = 0;
    for (m->step = 0; m->step < steps; m->step++) {
        /* Alternate phases: appends outrun commits and the queues grow to hundreds of items,
         * then commits, tombstones and releases drain them. */
        int filling = (m->step / 1500) % 2 == 0;
        /* Flushes interleaved at random: until one, the disk store's new appends stay unseen. */
        if (rnd_below(m, 12) == 0)
            model_flush(m);
        size_t op = rnd_below(m, 100);
        size_t append_share = filling ? 45 : 15;
        if (op < append_share)
            model_append(m);
        else if (op < append_share + 10)
            model_peek_prefix(m, scratch, views);
        else if (op < append_share + 35)
            model_commit(m, scratch);
        else if (op < append_share + 60)
            model_tombstone(m, scratch);
        else if (op < append_share + 75)
            model_return(m, scratch);
        else if (op < append_share + 78)
            model_release(m);
        else
            model_tombstone(m, scratch);
        model_check(m, scratch, views, MAX_VIEWS);
        /* At the end of each draining phase, empty one queue and release it (it is reopened
         * with the same key: a new queue, whose refs must not alias the released one's). */
        if (m->step % 3000 == 2999) {
            int qi = (int)rnd_below(m, RQ);
            model_drain(m, qi, scratch, views, MAX_VIEWS);
            MODEL_CHECK(m, store_queue_release(m->s, m->queues[qi].q) == STORE_OK);
            m->n_release_ok++;
            m->queues[qi].q =
                open_queue(m->s, m->queues[qi].model, m->queues[qi].signature, m->queues[qi].lane);
            model_check(m, scratch, views, MAX_VIEWS);
        }
        for (int qi = 0; qi < RQ; qi++)
            max_queued = m->queues[qi].n_live > max_queued ? m->queues[qi].n_live : max_queued;
    }
    /* The run must have exercised every outcome, and grown queues past a few array doublings. */
    MODEL_CHECK(m, m->n_commit_ok > 100);
    MODEL_CHECK(m, m->n_commit_stale > 20);
    MODEL_CHECK(m, m->n_return_ok > 50);
    MODEL_CHECK(m, m->n_return_refused > 10);
    MODEL_CHECK(m, m->n_tomb_first > 100);
    MODEL_CHECK(m, m->n_tomb_again > 20);
    MODEL_CHECK(m, m->n_tomb_queued > 20);
    MODEL_CHECK(m, m->n_release_ok > 2);
    MODEL_CHECK(m, m->n_release_busy > 2);
    MODEL_CHECK(m, max_queued > 64);
    MODEL_CHECK(m, m->n_flush > 100);
    if (is_disk())
        MODEL_CHECK(m, m->n_commit_unflushed > 5);
    if (getenv("STORE_MODEL_STATS") != NULL)
        print_message("%s, seed %llu: commit ok %zu stale %zu (unflushed %zu), return ok %zu "
                      "refused %zu, tombstone first %zu again %zu queued %zu, release ok %zu busy "
                      "%zu, flush %zu, max queue %zu\n",
                      g_backend->name, (unsigned long long)seed, m->n_commit_ok, m->n_commit_stale,
                      m->n_commit_unflushed, m->n_return_ok, m->n_return_refused, m->n_tomb_first,
                      m->n_tomb_again, m->n_tomb_queued, m->n_release_ok, m->n_release_busy,
                      m->n_flush, max_queued);
    /* Close with items queued and pending: under ASan a leak fails the run. */
    store_close(m->s);
    for (int qi = 0; qi < RQ; qi++)
        free(m->queues[qi].live);
    free(m->items);
    free(m->pending);
    free(scratch);
    free(views);
    free(m);
}

static void test_randomized_against_reference_model(void **state)
{
    (void)state;
    static const uint64_t seeds[] = {1, 42, 0x5EED5EED, 20240917};
    /* Every seed against memory; the disk groups split the seeds between them (each disk run
     * costs a pwrite per append and a pread per peek), so all four run against disk once. */
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        if (!is_disk() || (i % 2 == 0) == (g_backend->segment_max_bytes == 0))
            run_model(seeds[i], 15000);
    }
}

/* Every contract test, for every backend. */
#define CONTRACT_TEST_LIST(X)                                                 \
    X(test_open_gives_empty_store)                                            \
    X(test_append_refs_grow_in_append_order)                                  \
    X(test_append_copies_item_bytes)                                          \
    X(test_flush_makes_appends_visible)                                       \
    X(test_peek_does_not_advance)                                             \
    X(test_peek_returns_at_most_max_items)                                    \
    X(test_commit_moves_items_to_pending)                                     \
    X(test_commit_of_zero_refs_changes_nothing)                               \
    X(test_commit_rejects_stale_refs_and_changes_nothing)                     \
    X(test_tombstone_completes_pending_item)                                  \
    X(test_queue_oldest_is_the_front)                                         \
    X(test_tombstone_twice_is_harmless_and_counted_once)                      \
    X(test_tombstone_of_queued_item_is_not_pending)                           \
    X(test_tombstone_of_returned_item_is_not_pending)                         \
    X(test_tombstone_of_unknown_ref_is_not_pending)                           \
    X(test_return_puts_items_back_in_original_order)                          \
    X(test_return_unseen_takes_back_the_delivery)                             \
    X(test_return_partial_positions_keep_arrival_order)                       \
    X(test_return_is_all_or_nothing)                                          \
    X(test_return_with_duplicate_ref_changes_nothing)                         \
    X(test_return_to_several_queues_at_once)                                  \
    X(test_deliveries_count_each_commit)                                      \
    X(test_peek_tokens_agrees_with_peek)                                      \
    X(test_queue_count_tracks_items_and_tokens)                               \
    X(test_queue_open_same_key_returns_same_queue)                            \
    X(test_queue_release_refuses_nonempty_queue)                              \
    X(test_tombstone_after_queue_release_is_harmless)                         \
    X(test_queue_reopened_after_release_is_empty_and_not_aliased)             \
    X(test_tombstone_of_never_issued_offset_in_released_queue_is_not_pending) \
    X(test_current_shape_roundtrip)                                           \
    X(test_views_carry_signature_of_queue)                                    \
    X(test_invalid_arguments)                                                 \
    X(test_failed_calls_leave_out_pointers_untouched)                         \
    X(test_fifo_order_survives_growth_and_compaction)                         \
    X(test_close_frees_queued_and_pending_items)                              \
    X(test_item_fields_come_back_with_every_peek)                             \
    X(test_randomized_against_reference_model)

/* Each test removes the data directories it made, pass or fail. */
#define CONTRACT_TEST(f) cmocka_unit_test_teardown(f, remove_dirs),

int main(void)
{
    const struct CMUnitTest memory_tests[] = {
        CONTRACT_TEST_LIST(CONTRACT_TEST)
        /* Memory group only: it touches no store, so one backend is enough. */
        cmocka_unit_test(test_status_str_covers_every_status),
    };
    const struct CMUnitTest disk_tests[] = {CONTRACT_TEST_LIST(CONTRACT_TEST)};
    int failed = 0;
    failed += cmocka_run_group_tests_name("store, memory backend", memory_tests, use_memory, NULL);
    failed += cmocka_run_group_tests_name("store, disk backend", disk_tests, use_disk, NULL);
    failed += cmocka_run_group_tests_name(
        "store, disk backend with 4 KiB segments and a 1-byte resident bound", disk_tests,
        use_disk_small, NULL);
    return failed;
}
