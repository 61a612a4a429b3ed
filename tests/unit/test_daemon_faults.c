/*
 * test_daemon_faults.c - the dispatch path when the store cannot record a delivery after the
 * batch went out (dispatch.c invariant 10): the batch is void, its items stay queued and go
 * again after the pause, the pull that took it is used, and a dead letter is published once per
 * attempt, not once per turn. The store's fault hook (STORE_FAULT_ALLOC: the journal's record
 * buffer) makes the first commit fail without failing the store (disk store); a merged batch
 * whose later lane fails and whose put-back fails too takes faulty_store_int.h's hook over the
 * memory store. Fixture: daemon_fx.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "scheduler/daemon/daemon_int.h"
#include "tests/unit/faulty_store_int.h"
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

/* n items "<prefix><i>" of tokens each, one shape. */
static void submit_tokens(fx_t *f, uint32_t tokens, const char *prefix, int n)
{
    codec_work_item_t items[4];
    char ids[4][16];
    for (int i = 0; i < n; i++) {
        int len = snprintf(ids[i], sizeof(ids[i]), "%s%d", prefix, i);
        items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], (size_t)len},
                                       .model = "m",
                                       .has_signature = true,
                                       .signature = 0x91f47f2f45b64efd,
                                       .tokens = tokens,
                                       .payload = {(const uint8_t *)"pay", 3}};
    }
    codec_submit_t sub = {items, (size_t)n};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, "m", NULL, buf, len), 0);
    free(buf);
}

/* A merged batch (two lanes 20 tokens apart, a consumer that declared its cost) whose second
 * lane fails to commit after the publish, and whose first lane then fails to go back: the
 * first lane's items are not left pending with no record (sched.c invariant 8) but returned by
 * the orphans' retry at the next tick (inflight.c invariant 2), and all three go again after
 * the pause and complete. */
static void test_a_merged_batch_that_cannot_be_put_back_is_returned_by_the_retry(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    codec_register_t reg = {"m", 8, 8192, 0, "w", 5000, 10000, 1, 0, 0}; /* a declared cost */
    char id[33];
    assert_string_equal(fx_register_full(f, &reg, id), "");
    submit_tokens(f, 1000, "a", 2);
    submit_tokens(f, 980, "b", 1);
    fx_turn(f);

    faulty_store_install(f->d->store, 2, 1); /* the second lane's commit, the first's put-back */
    fx_pull(f, id, 1, 60000, "inbox.1");
    fx_turn(f);
    assert_int_equal(faulty.commit_calls, 2);
    assert_int_equal(faulty.ret_fails, 0);
    codec_batch_t *b = fx_batch_on(f, "inbox.1");
    assert_int_equal(b->n_items, 3); /* merged, and void */
    uint64_t void_id = b->batch_id;
    codec_batch_destroy(b);
    assert_int_equal(counter_now(f, "commit_failures"), 1);
    assert_int_equal(counter_now(f, "items_queued"), 1);
    assert_int_equal(counter_now(f, "pending_items"), 2); /* held by the orphan, no worker's */
    codec_ack_t a = {.batch_id = void_id, .all = true};
    codec_ack_reply_t *r = fx_ack(f, id, &a);
    assert_int_equal(r->acked, 0);
    assert_int_equal(r->unknown, 1);
    codec_ack_reply_destroy(r);

    f->now += PAUSE_PAST; /* past the tick and the pause: the retry returns them */
    fx_pull(f, id, 1, 60000, "inbox.2");
    fx_turn(f);
    b = fx_batch_on(f, "inbox.2");
    assert_int_equal(b->n_items, 3);
    uint64_t again = b->batch_id;
    codec_batch_destroy(b);
    assert_int_equal(counter_now(f, "pending_items"), 3);
    a.batch_id = again;
    r = fx_ack(f, id, &a);
    assert_int_equal(r->acked, 3);
    codec_ack_reply_destroy(r);
    assert_int_equal(counter_now(f, "items_completed"), 3);
    assert_int_equal(counter_now(f, "items_queued"), 0);
    assert_int_equal(counter_now(f, "pending_items"), 0);
    faulty_store_remove(f->d->store);
    fx_destroy(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_batch_whose_commit_fails_is_void_and_goes_again),
        cmocka_unit_test(test_a_dead_letter_whose_commit_fails_goes_once_per_attempt),
        cmocka_unit_test(test_a_merged_batch_that_cannot_be_put_back_is_returned_by_the_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
