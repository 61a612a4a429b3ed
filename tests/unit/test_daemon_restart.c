/*
 * test_daemon_restart.c - what the daemon keeps across a restart of the same disk store:
 * batch ids are never handed out again (stale acks from before a crash settled new batches),
 * the per-model queue totals come back with the items, so the queue limits hold across
 * restarts, and the dedupe window is rebuilt per model. Same fixture as test_daemon_limits.c
 * (daemon_fx.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/daemon_fx.h"

#include <stdlib.h>
#include <string.h>

/* Registers, pulls one batch and returns its id (the items stay in flight). */
static uint64_t take_batch(fx_t *f, char *id, const char *inbox)
{
    assert_string_equal(fx_register(f, "llama", 8, 4096, "gpu", id), "");
    fx_pull(f, id, 1, 60000, inbox);
    fx_turn(f);
    codec_batch_t *b = fx_batch_on(f, inbox);
    assert_int_equal(b->status, CODEC_BATCH_OK);
    uint64_t batch_id = b->batch_id;
    assert_true(batch_id != 0);
    assert_true(batch_id < (1ull << 53)); /* exact in every JSON reader */
    codec_batch_destroy(b);
    return batch_id;
}

/* After a restart the same items come back in a batch with a new id, and an ack
 * naming the batch id from before the restart is stale (unknown_batch), never a settle. */
static void test_batch_ids_are_not_reused_across_restarts(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 1);
    fx_submit(f, "llama", 42, "r", 0, 3, 0, NULL);
    fx_turn(f);
    char id[33];
    uint64_t before[5];
    before[0] = take_batch(f, id, "inbox.0");
    for (int k = 1; k < 5; k++) { /* a crash loop: every restart hands out a batch */
        fx_restart(f);
        before[k] = take_batch(f, id, "inbox.k");
        for (int j = 0; j < k; j++)
            assert_true(before[k] != before[j]);
        codec_ack_t stale = {.batch_id = before[k - 1], .all = true};
        codec_ack_reply_t *r = fx_ack(f, id, &stale);
        assert_true(strncmp(r->error, "unknown_batch", 13) == 0);
        assert_int_equal(r->acked, 0);
        codec_ack_reply_destroy(r);
    }
    codec_ack_t ok = {.batch_id = before[4], .all = true};
    codec_ack_reply_t *r = fx_ack(f, id, &ok);
    assert_int_equal(r->acked, 3);
    codec_ack_reply_destroy(r);
    fx_destroy(f);
}

/* The status of item "<prefix>0" of a one-item Submit of model. */
static codec_item_status_t submit_one(fx_t *f, const char *model, const char *prefix)
{
    fx_submit(f, model, 42, prefix, 0, 1, 0, "dup.reply");
    fx_turn(f);
    codec_submit_reply_t *r = fx_submit_reply(f, "dup.reply");
    codec_item_status_t st = r->results[0].status;
    codec_submit_reply_destroy(r);
    return st;
}

/* The dedupe window keys on the model and the id (dedupe.c invariant 9), also as rebuilt from
 * the store at a restart: an id of one model is no duplicate of another model's. */
static void test_an_id_is_a_duplicate_within_its_model_only(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 1);
    assert_int_equal(submit_one(f, "llama", "order-"), CODEC_ITEM_ACCEPTED);
    assert_int_equal(submit_one(f, "qwen", "order-"), CODEC_ITEM_ACCEPTED);
    assert_int_equal(submit_one(f, "llama", "order-"), CODEC_ITEM_DUPLICATE);
    fx_restart(f);
    assert_int_equal(submit_one(f, "llama", "order-"), CODEC_ITEM_DUPLICATE);
    assert_int_equal(submit_one(f, "qwen", "order-"), CODEC_ITEM_DUPLICATE);
    assert_int_equal(submit_one(f, "mistral", "order-"), CODEC_ITEM_ACCEPTED);
    fx_destroy(f);
}

/* The memory store too: two daemons of one process never share a batch id. */
static void test_batch_ids_differ_between_memory_stores(void **state)
{
    (void)state;
    fx_t *a = fx_create(NULL, 0), *b = fx_create(NULL, 0);
    fx_submit(a, "llama", 42, "x", 0, 1, 0, NULL);
    fx_submit(b, "llama", 42, "x", 0, 1, 0, NULL);
    fx_turn(a);
    fx_turn(b);
    char ia[33], ib[33];
    assert_true(take_batch(a, ia, "inbox") != take_batch(b, ib, "inbox"));
    fx_destroy(a);
    fx_destroy(b);
}

/* The queue totals are rebuilt from the store: a full queue is still full after a restart, and
 * completing items after it makes room again. */
static void test_queue_limits_hold_across_a_restart(void **state)
{
    (void)state;
    daemon_limits_t lim = {.queue_items = 4};
    fx_t *f = fx_create(&lim, 1);
    fx_submit(f, "llama", 42, "q", 0, 4, 0, NULL);
    fx_turn(f);
    fx_restart(f);
    fx_submit(f, "llama", 42, "q", 4, 1, 0, "q.reply");
    fx_turn(f);
    codec_submit_reply_t *r = fx_submit_reply(f, "q.reply");
    assert_string_equal(r->results[0].reason, "queue_full");
    codec_submit_reply_destroy(r);
    char id[33];
    uint64_t batch_id = take_batch(f, id, "inbox");
    codec_ack_t all = {.batch_id = batch_id, .all = true};
    codec_ack_reply_t *ar = fx_ack(f, id, &all);
    assert_int_equal(ar->acked, 4);
    codec_ack_reply_destroy(ar);
    fx_submit(f, "llama", 42, "q", 4, 1, 0, "q.reply");
    fx_turn(f);
    r = fx_submit_reply(f, "q.reply");
    assert_string_equal(r->results[0].reason, "ok");
    codec_submit_reply_destroy(r);
    json_t *doc = fx_stats(f, NULL, NULL);
    json_t *m = json_array_get(json_object_get(doc, "models"), 0);
    assert_int_equal(json_integer_value(json_object_get(m, "stored_items")), 1);
    json_decref(doc);
    fx_destroy(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_ids_are_not_reused_across_restarts),
        cmocka_unit_test(test_batch_ids_differ_between_memory_stores),
        cmocka_unit_test(test_queue_limits_hold_across_a_restart),
        cmocka_unit_test(test_an_id_is_a_duplicate_within_its_model_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
