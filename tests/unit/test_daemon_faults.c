/*
 * test_daemon_faults.c - the dispatch path when the store cannot record a delivery after the
 * batch went out (dispatch.c invariant 10): the batch is void, its items stay queued and go
 * again after the pause, the pull that took it is used, and a dead letter is published once per
 * attempt, not once per turn. The store's fault hook (STORE_FAULT_ALLOC: the journal's record
 * buffer) makes the first commit fail without failing the store. Fixture: daemon_fx.h, disk
 * store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store/store.h"
#include "tests/unit/daemon_fx.h"

#include <stdlib.h>
#include <string.h>

/* The pause after a failed commit (dispatch.c DISPATCH_COMMIT_PAUSE_NS), and a little more. */
#define PAUSE_PAST (1100 * FX_MS)

static json_int_t counter_now(fx_t *f, const char *key)
{
    json_t *doc = fx_stats(f, NULL, NULL);
    json_int_t v = fx_counter(doc, key);
    json_decref(doc);
    return v;
}

/* The only batch on inbox: its status, items and first item's delivery count; its id. */
static uint64_t batch_seen(fx_t *f, const char *inbox, uint32_t *out_deliveries)
{
    assert_int_equal(fx_count_on(f, inbox), 1);
    codec_batch_t *b = fx_batch_on(f, inbox);
    assert_int_equal(b->status, CODEC_BATCH_OK);
    assert_int_equal(b->n_items, 1);
    *out_deliveries = b->items[0].deliveries;
    uint64_t id = b->batch_id;
    codec_batch_destroy(b);
    return id;
}

static void test_a_batch_whose_commit_fails_is_void_and_goes_again(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 1);
    char id[33];
    assert_string_equal(fx_register(f, "m", 8, 4096, "w", id), "");
    fx_submit(f, "m", 0x1234, "a", 0, 1, 0, "sub.reply");
    fx_turn(f);
    unsigned long fired = store_fault_fired(STORE_FAULT_ALLOC); /* counts for the process */
    store_fault_arm(STORE_FAULT_ALLOC, 1);
    fx_pull(f, id, 1, 60000, "inbox.1");
    fx_turn(f);
    assert_int_equal(store_fault_fired(STORE_FAULT_ALLOC), fired + 1);
    store_fault_disarm_all();
    /* one message for the one pull: the void batch used it */
    uint32_t dlv = 0;
    uint64_t void_id = batch_seen(f, "inbox.1", &dlv);
    assert_int_equal(dlv, 1);
    assert_int_equal(counter_now(f, "commit_failures"), 1);
    assert_int_equal(counter_now(f, "items_queued"), 1);
    assert_int_equal(counter_now(f, "pending_items"), 0);
    assert_true(counter_now(f, "uptime_ms") >= 0); /* the key after it in the document */
    codec_ack_t a = {.batch_id = void_id, .all = true};
    codec_ack_reply_t *r = fx_ack(f, id, &a);
    assert_int_equal(r->acked, 0);
    assert_int_equal(r->unknown, 1);
    codec_ack_reply_destroy(r);
    /* nothing goes during the pause, the item goes after it, its first recorded delivery */
    fx_pull(f, id, 1, 60000, "inbox.2");
    fx_turn(f);
    assert_int_equal(fx_count_on(f, "inbox.2"), 0);
    f->now += PAUSE_PAST;
    fx_turn(f);
    uint64_t again = batch_seen(f, "inbox.2", &dlv);
    assert_int_equal(fx_count_on(f, "inbox.1"), 1); /* its pull had one credit */
    assert_true(again != void_id);
    assert_int_equal(dlv, 1);
    a.batch_id = again;
    r = fx_ack(f, id, &a);
    assert_int_equal(r->acked, 1);
    codec_ack_reply_destroy(r);
    assert_int_equal(counter_now(f, "items_completed"), 1);
    assert_int_equal(counter_now(f, "items_queued"), 0);
    fx_destroy(f);
}

static void test_a_dead_letter_whose_commit_fails_goes_once_per_attempt(void **state)
{
    (void)state;
    daemon_limits_t lim = {0};
    lim.queue_age_ms = 1000;
    fx_t *f = fx_create(&lim, 1);
    fx_submit(f, "m", 0x1234, "a", 0, 1, 0, "sub.reply");
    fx_turn(f);
    f->now += 3000 * FX_MS;
    unsigned long fired = store_fault_fired(STORE_FAULT_ALLOC);
    store_fault_arm(STORE_FAULT_ALLOC, 1);
    fx_turn(f);
    assert_int_equal(store_fault_fired(STORE_FAULT_ALLOC), fired + 1);
    store_fault_disarm_all();
    assert_int_equal(fx_count_on(f, "lanes.dead.m"), 1);
    assert_int_equal(counter_now(f, "commit_failures"), 1);
    assert_int_equal(counter_now(f, "dead_lettered"), 0);
    assert_int_equal(counter_now(f, "items_queued"), 1);
    f->now += PAUSE_PAST;
    fx_turn(f);
    assert_int_equal(fx_count_on(f, "lanes.dead.m"), 2);
    assert_int_equal(counter_now(f, "dead_lettered"), 1);
    assert_int_equal(counter_now(f, "expired"), 1);
    assert_int_equal(counter_now(f, "items_queued"), 0);
    fx_destroy(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_batch_whose_commit_fails_is_void_and_goes_again),
        cmocka_unit_test(test_a_dead_letter_whose_commit_fails_goes_once_per_attempt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
