/*
 * test_store_check.c - the store's executable invariants (store/disk/disk_check.c,
 * store/memory_check.c): each check holds on a store the public calls built, and returns 0
 * once a test breaks the rule it guards on purpose, then 1 again when the test puts it back
 * (so a check that always failed, or never did, is caught). The structures are reached through
 * the private headers; each break is undone before the store is closed.
 *
 * The checks report the broken rule on stderr before they return 0: the report lines in this
 * test's output are expected.
 *
 * One rule no public call shows is checked here through the same headers: how long the disk
 * store keeps the arena a turn's appends are gathered in (DISK_ARENA_IDLE_NS).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/fs.h"

#include "common/invariant.h"
#include "store/disk/disk_int.h"
#include "store/memory_int.h"

enum { N_ITEMS = 6 };

typedef struct {
    char dir[64];
    store_t *s;
    store_queue_t *q;
    store_ref_t refs[N_ITEMS];
} rig_t;

/* A store holding N_ITEMS items in one lane, all flushed; items 0 and 1 committed (pending).
 * disk: 0 memory, else a disk store whose segments roll over after `disk` bytes. */
static void rig_open(rig_t *r, uint64_t disk)
{
    memset(r, 0, sizeof(*r));
    if (disk) {
        snprintf(r->dir, sizeof(r->dir), "/tmp/lanes-test-check-XXXXXX");
        assert_non_null(mkdtemp(r->dir));
        store_disk_config_t cfg = {.dir = r->dir, .segment_max_bytes = disk};
        assert_int_equal(store_open_disk(&cfg, NULL, &r->s), STORE_OK);
    } else {
        assert_int_equal(store_open_memory(&r->s), STORE_OK);
    }
    store_key_t key = {"llama", 0xA1A1, 0};
    assert_int_equal(store_queue_open(r->s, &key, &r->q), STORE_OK);
    for (int i = 0; i < N_ITEMS; i++) {
        uint8_t id[8], payload[24];
        memset(id, 'a' + i, sizeof(id));
        memset(payload, i, sizeof(payload));
        store_item_t it = {.id = id,
                           .id_len = sizeof(id),
                           .payload = payload,
                           .payload_len = sizeof(payload),
                           .tokens = (uint32_t)(10 + i),
                           .arrival_ns = 1000 + (uint64_t)i};
        assert_int_equal(store_append(r->s, r->q, &it, &r->refs[i]), STORE_OK);
    }
    assert_int_equal(store_flush(r->s), STORE_OK);
    assert_int_equal(store_commit(r->s, r->q, r->refs, 2), STORE_OK);
}

static void rig_close(rig_t *r)
{
    store_close(r->s);
    if (r->dir[0] != '\0')
        assert_int_equal(fs_remove_tree(r->dir), 0);
}

/* ---- disk ------------------------------------------------------------------------------- */

static void test_disk_checks_hold_through_every_operation(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;
    assert_int_equal(disk_check(d), 1);
    assert_int_equal(q->len, N_ITEMS - 2);
    assert_int_equal(d->pending.len, 2);
    /* One more append stays unflushed: the records past the boundary are checked as such. */
    store_item_t it = {.id = (const uint8_t *)"z", .id_len = 1, .tokens = 7, .arrival_ns = 9999};
    assert_int_equal(store_append(r.s, r.q, &it, NULL), STORE_OK);
    assert_int_equal(q->n_unflushed, 1);
    assert_int_equal(disk_check(d), 1);
    assert_int_equal(store_return(r.s, &r.refs[1], 1), STORE_OK);
    assert_int_equal(disk_check(d), 1);
    int completed = 0;
    assert_int_equal(store_tombstone(r.s, r.refs[0], &completed), STORE_OK);
    assert_int_equal(completed, 1);
    assert_int_equal(store_flush(r.s), STORE_OK);
    assert_int_equal(disk_check(d), 1);
    assert_int_equal(disk_queue_check(d, q), 1);
    assert_int_equal(disk_seg_check(d, d->models[q->model_idx].segs[0]), 1);
    rig_close(&r);
}

static void test_disk_check_catches_counters_off_their_records(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;

    q->base.queued_tokens++;
    assert_int_equal(disk_queue_counts_check(q), 1); /* O(1) cannot see a sum */
    assert_int_equal(disk_queue_check(d, q), 0);
    assert_int_equal(disk_check(d), 0);
    q->base.queued_tokens--;

    q->base.queued_items++;
    assert_int_equal(disk_queue_counts_check(q), 0);
    q->base.queued_items--;

    q->base.pending_items++;
    assert_int_equal(disk_queue_check(d, q), 1);
    assert_int_equal(disk_check(d), 0); /* the pending map holds one fewer */
    q->base.pending_items--;

    assert_int_equal(disk_check(d), 1);
    rig_close(&r);
}

static void test_disk_check_catches_records_out_of_order(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;
    drec_t *a = &q->recs[q->head], *b = &q->recs[q->head + 1];
    drec_t tmp = *a;
    *a = *b;
    *b = tmp;
    assert_int_equal(disk_queue_counts_check(q), 1);
    assert_int_equal(disk_queue_check(d, q), 0);
    tmp = *a;
    *a = *b;
    *b = tmp;
    assert_int_equal(disk_queue_check(d, q), 1);
    rig_close(&r);
}

static void test_disk_check_catches_a_broken_readable_boundary(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;
    dseg_t *seg = d->models[q->model_idx].segs[0];
    uint64_t readable = seg->readable;

    /* Past the written bytes. */
    seg->readable = seg->size + SEG_ALIGN;
    assert_int_equal(disk_seg_check(d, seg), 0);
    /* Back to the header while records are readable: peek would hand out unflushed bytes. */
    seg->readable = seg->header_len;
    assert_int_equal(disk_seg_check(d, seg), 1);
    assert_int_equal(disk_queue_check(d, q), 0);
    seg->readable = readable;

    /* More unflushed records than records: the cursor past what is readable. */
    q->n_unflushed = q->len + 1;
    assert_int_equal(disk_queue_counts_check(q), 0);
    q->n_unflushed = 0;

    assert_int_equal(disk_check(d), 1);
    rig_close(&r);
}

static void test_disk_check_catches_an_unflushed_record_counted_readable(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;
    store_item_t it = {.id = (const uint8_t *)"z", .id_len = 1, .tokens = 7, .arrival_ns = 9999};
    assert_int_equal(store_append(r.s, r.q, &it, NULL), STORE_OK);
    assert_int_equal(q->n_unflushed, 1);
    q->n_unflushed = 0;
    assert_int_equal(disk_queue_counts_check(q), 1);
    assert_int_equal(disk_queue_check(d, q), 0);
    q->n_unflushed = 1;
    assert_int_equal(disk_queue_check(d, q), 1);
    rig_close(&r);
}

static void test_disk_check_catches_a_pending_entry_also_queued(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;
    /* A copy of the queue's first record, put in the pending map as well. */
    dpend_t *copy = malloc(sizeof(*copy));
    assert_non_null(copy);
    copy->rec = q->recs[q->head];
    copy->rec.slot_dlv = drec_slot_dlv(drec_slot(&copy->rec), 1);
    copy->q = q;
    map_key_t k = disk_ref_key(disk_rec_seg(d, &copy->rec)->id, copy->rec.offset);
    assert_int_equal(map_put(&d->pending, k, copy), MAP_OK);
    q->base.pending_items++;
    assert_int_equal(disk_queue_check(d, q), 1);
    assert_int_equal(disk_check(d), 0);
    q->base.pending_items--;
    assert_int_equal(map_del(&d->pending, k, NULL), MAP_OK);
    free(copy);
    assert_int_equal(disk_check(d), 1);
    rig_close(&r);
}

static void test_disk_check_catches_lists_off_their_counts(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;

    d->open_fds++;
    assert_int_equal(disk_check(d), 0);
    d->open_fds--;

    /* Dirty but not on the dirty list: its row would miss the next flush. */
    dseg_t *seg = d->models[q->model_idx].segs[0];
    assert_null(d->dirty);
    seg->dirty = 1;
    assert_int_equal(disk_check(d), 0);
    seg->dirty = 0;

    /* On the flush list's count but not on the list: its target would never be written. */
    assert_null(d->flush_queues);
    q->on_flush = 1;
    assert_int_equal(disk_check(d), 0);
    q->on_flush = 0;

    /* A segment that claims a mapping the count does not know. */
    d->mapped++;
    assert_int_equal(disk_check(d), 0);
    d->mapped--;

    assert_int_equal(disk_check(d), 1);
    rig_close(&r);
}

/* Segments of 160 bytes hold one 88-byte entry each (the header takes 72): six segments of
 * the model's log. */
static void test_disk_check_catches_segments_out_of_place(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, 160);
    disk_t *d = disk_of(r.s);
    dqueue_t *q = (dqueue_t *)r.q;
    dmodel_t *m = &d->models[q->model_idx];
    assert_int_equal(m->n_segs, N_ITEMS); /* committed is not completed: none is deleted */
    assert_int_equal(disk_check(d), 1);

    /* An unsealed segment before the last would take appends out of order. */
    m->segs[0]->sealed = 0;
    assert_int_equal(disk_check(d), 0);
    m->segs[0]->sealed = 1;

    /* Two segments swapped: sequences no longer ascend (the records' order breaks too). */
    dseg_t *tmp = m->segs[0];
    m->segs[0] = m->segs[1];
    m->segs[1] = tmp;
    assert_int_equal(disk_check(d), 0);
    m->segs[1] = m->segs[0];
    m->segs[0] = tmp;

    /* A live segment also recorded as deleted. */
    map_key_t k = {m->segs[0]->id, 0};
    assert_int_equal(map_put(&d->deleted, k, (void *)(uintptr_t)1), MAP_OK);
    assert_int_equal(disk_check(d), 0);
    assert_int_equal(map_del(&d->deleted, k, NULL), MAP_OK);

    /* A slot that names another segment than the one it was given to. */
    uint32_t slot = m->segs[0]->slot;
    d->slots[slot] = m->segs[1];
    assert_int_equal(disk_seg_check(d, m->segs[0]), 0);
    assert_int_equal(disk_check(d), 0);
    d->slots[slot] = m->segs[0];

    /* A record past its segment's end. */
    uint32_t off = q->recs[q->head].offset;
    q->recs[q->head].offset = (uint32_t)disk_rec_seg(d, &q->recs[q->head])->size;
    assert_int_equal(disk_queue_check(d, q), 0);
    q->recs[q->head].offset = off;

    assert_int_equal(disk_check(d), 1);
    rig_close(&r);
}

/* One turn: `n` items of `payload` bytes appended to the rig's lane, then flushed. */
static void arena_turn(rig_t *r, int n, size_t payload)
{
    uint8_t *buf = calloc(1, payload);
    assert_non_null(buf);
    for (int i = 0; i < n; i++) {
        store_item_t it = {.id = (const uint8_t *)"t",
                           .id_len = 1,
                           .payload = buf,
                           .payload_len = payload,
                           .tokens = 5,
                           .arrival_ns = 5000};
        assert_int_equal(store_append(r->s, r->q, &it, NULL), STORE_OK);
    }
    free(buf);
    assert_int_equal(store_flush(r->s), STORE_OK);
}

/* A large arena outlives small turns while large ones come within DISK_ARENA_IDLE_NS, and goes
 * at the first flush after that long without one, idle flushes included (disk_flush.c invariant
 * 7). The store's clock is not the test's: the last busy flush is moved back instead. */
static void test_disk_arena_is_kept_until_turns_stay_small(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, STORE_SEGMENT_MAX_DEFAULT);
    disk_t *d = disk_of(r.s);
    size_t big = DISK_ARENA_KEEP + (64u << 10); /* one entry past the keep size (a turn of */
    int n_big = 1;                              /* many smaller ones is written ahead) */
    arena_turn(&r, n_big, big);
    uint8_t *arena = d->arena;
    size_t cap = d->arena_cap;
    assert_true(cap > DISK_ARENA_KEEP);
    for (int i = 0; i < 20; i++) /* small turns soon after: kept */
        arena_turn(&r, 1, 100);
    assert_ptr_equal(d->arena, arena);
    assert_int_equal(d->arena_cap, cap);
    d->arena_busy_ns -= DISK_ARENA_IDLE_NS / 2;
    arena_turn(&r, n_big, big); /* a large turn within the time: the time starts again */
    d->arena_busy_ns -= DISK_ARENA_IDLE_NS / 2;
    arena_turn(&r, 1, 100);
    assert_ptr_equal(d->arena, arena);
    d->arena_busy_ns -= DISK_ARENA_IDLE_NS;
    arena_turn(&r, 1, 100); /* a small turn after that long gives it back */
    assert_null(d->arena);
    assert_int_equal(d->arena_cap, 0);
    arena_turn(&r, n_big, big);
    assert_true(d->arena_cap > DISK_ARENA_KEEP);
    d->arena_busy_ns -= DISK_ARENA_IDLE_NS;
    assert_int_equal(store_flush(r.s), STORE_OK); /* and so does an idle flush */
    assert_null(d->arena);
    assert_int_equal(d->arena_cap, 0);
    arena_turn(&r, 1, 100); /* a turn after grows a small one again */
    assert_true(d->arena_cap > 0 && d->arena_cap <= DISK_ARENA_KEEP);
    assert_int_equal(disk_check(d), 1);
    rig_close(&r);
}

/* A turn's entries written ahead of its flush are in the file before it and the arena starts
 * again, but the readable boundary moves only at the flush (disk_flush.c invariant 8); after it
 * and a reopen every entry is back. */
static void test_disk_entries_written_ahead_wait_for_the_flush(void **state)
{
    (void)state;
    char dir[] = "/tmp/lanes-test-spill-XXXXXX";
    assert_non_null(mkdtemp(dir));
    store_disk_config_t cfg = {.dir = dir, .spill_bytes = 300}; /* about three entries */
    store_t *s = NULL;
    store_queue_t *q = NULL;
    assert_int_equal(store_open_disk(&cfg, NULL, &s), STORE_OK);
    store_key_t key = {"llama", 0xA1A1, 0};
    assert_int_equal(store_queue_open(s, &key, &q), STORE_OK);
    disk_t *d = disk_of(s);
    uint8_t payload[40] = {7};
    store_item_t it = {.id = (const uint8_t *)"i",
                       .id_len = 1,
                       .payload = payload,
                       .payload_len = sizeof(payload),
                       .tokens = 5,
                       .arrival_ns = 1};
    for (int i = 0; i < 8; i++)
        assert_int_equal(store_append(s, q, &it, NULL), STORE_OK);
    assert_int_equal(store_flush(s), STORE_OK);
    dseg_t *seg = d->models[0].segs[d->models[0].n_segs - 1];
    uint64_t readable = seg->readable;
    size_t entry = (size_t)seg_entry_size(1, sizeof(payload));
    store_usage_t u;
    store_usage_get(s, &u);
    uint64_t ahead = u.written_ahead;
    for (int i = 0; i < 40; i++) {
        assert_int_equal(store_append(s, q, &it, NULL), STORE_OK);
        assert_true(d->arena_len <= 300 + entry);
    }
    store_usage_get(s, &u);
    assert_true(u.written_ahead >= ahead + 10); /* 40 entries of 104 bytes, 2-3 a spill */
    assert_true(seg->spilled > readable);       /* written ahead ... */
    assert_int_equal(seg->readable, readable);  /* ... and not readable */
    struct stat sb;
    assert_true(seg->fd >= 0);
    assert_int_equal(fstat(seg->fd, &sb), 0);
    assert_true((uint64_t)sb.st_size >= seg->spilled);
    assert_int_equal(disk_check(d), 1);
    assert_int_equal(store_flush(s), STORE_OK);
    assert_int_equal(seg->readable, seg->size);
    assert_int_equal(disk_check(d), 1);
    store_close(s);
    store_recovery_t rep;
    assert_int_equal(store_open_disk(&cfg, &rep, &s), STORE_OK);
    assert_int_equal(rep.entries_live, 48);
    assert_int_equal(rep.torn_tails, 0);
    store_close(s);
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* ---- memory ----------------------------------------------------------------------------- */

static void test_memory_checks_hold_through_every_operation(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, 0);
    mem_store_t *ms = (mem_store_t *)r.s;
    mem_queue_t *q = (mem_queue_t *)r.q;
    assert_int_equal(mem_check(ms), 1);
    assert_int_equal(q->len, N_ITEMS - 2);
    assert_int_equal(store_return(r.s, &r.refs[1], 1), STORE_OK);
    assert_int_equal(mem_check(ms), 1);
    assert_int_equal(store_tombstone(r.s, r.refs[0], NULL), STORE_OK);
    assert_int_equal(mem_check(ms), 1);
    assert_int_equal(mem_queue_check(ms, q), 1);
    rig_close(&r);
}

static void test_memory_check_catches_counters_off_their_items(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, 0);
    mem_store_t *ms = (mem_store_t *)r.s;
    mem_queue_t *q = (mem_queue_t *)r.q;

    q->base.queued_tokens += 3;
    assert_int_equal(mem_queue_counts_check(q), 1);
    assert_int_equal(mem_queue_check(ms, q), 0);
    q->base.queued_tokens -= 3;

    q->base.queued_items--;
    assert_int_equal(mem_queue_counts_check(q), 0);
    q->base.queued_items++;

    q->base.pending_items--;
    assert_int_equal(mem_check(ms), 0);
    q->base.pending_items++;

    assert_int_equal(mem_check(ms), 1);
    rig_close(&r);
}

static void test_memory_check_catches_items_out_of_order(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, 0);
    mem_store_t *ms = (mem_store_t *)r.s;
    mem_queue_t *q = (mem_queue_t *)r.q;
    mem_item_t **a = &q->items[q->head], **b = &q->items[q->head + 1], *tmp = *a;
    *a = *b;
    *b = tmp;
    assert_int_equal(mem_queue_check(ms, q), 0);
    tmp = *a;
    *a = *b;
    *b = tmp;
    assert_int_equal(mem_queue_check(ms, q), 1);
    rig_close(&r);
}

static void test_memory_check_catches_a_pending_item_also_queued(void **state)
{
    (void)state;
    rig_t r;
    rig_open(&r, 0);
    mem_store_t *ms = (mem_store_t *)r.s;
    mem_queue_t *q = (mem_queue_t *)r.q;
    /* The first pending item, also put back at the front of the queue array. */
    mem_item_t *it = map_get(&ms->pending, (map_key_t){r.refs[1].queue, r.refs[1].offset});
    assert_non_null(it);
    assert_true(q->head > 0);
    q->items[--q->head] = it;
    q->len++;
    q->base.queued_items++;
    q->base.queued_tokens += it->tokens;
    assert_int_equal(mem_queue_check(ms, q), 1);
    assert_int_equal(mem_check(ms), 0);
    q->head++;
    q->len--;
    q->base.queued_items--;
    q->base.queued_tokens -= it->tokens;
    assert_int_equal(mem_check(ms), 1);
    rig_close(&r);
}

/* Debug builds run the checks inside the operations: an append to a queue whose counters are
 * off aborts the process (in a child here). Release builds compile the calls out. */
static void test_debug_build_aborts_an_operation_on_a_broken_queue(void **state)
{
    (void)state;
    if (!INVARIANTS_CHECKED)
        skip();
    rig_t r;
    rig_open(&r, 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ((mem_queue_t *)r.q)->base.queued_items++;
        store_item_t it = {
            .id = (const uint8_t *)"z", .id_len = 1, .tokens = 7, .arrival_ns = 9999};
        store_append(r.s, r.q, &it, NULL);
        _exit(0); /* not reached when the check runs */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_int_equal(mem_check((mem_store_t *)r.s), 1); /* the parent's store is untouched */
    rig_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disk_checks_hold_through_every_operation),
        cmocka_unit_test(test_disk_check_catches_counters_off_their_records),
        cmocka_unit_test(test_disk_check_catches_records_out_of_order),
        cmocka_unit_test(test_disk_check_catches_a_broken_readable_boundary),
        cmocka_unit_test(test_disk_check_catches_an_unflushed_record_counted_readable),
        cmocka_unit_test(test_disk_check_catches_a_pending_entry_also_queued),
        cmocka_unit_test(test_disk_check_catches_lists_off_their_counts),
        cmocka_unit_test(test_disk_check_catches_segments_out_of_place),
        cmocka_unit_test(test_disk_arena_is_kept_until_turns_stay_small),
        cmocka_unit_test(test_disk_entries_written_ahead_wait_for_the_flush),
        cmocka_unit_test(test_memory_checks_hold_through_every_operation),
        cmocka_unit_test(test_memory_check_catches_counters_off_their_items),
        cmocka_unit_test(test_memory_check_catches_items_out_of_order),
        cmocka_unit_test(test_memory_check_catches_a_pending_item_also_queued),
        cmocka_unit_test(test_debug_build_aborts_an_operation_on_a_broken_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
