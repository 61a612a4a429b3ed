/*
 * test_hold.c - the `lanes` policy's load-gated hold (hold.c): an under-filled batch waits for
 * company only while its model's offered load is high or after a burst, never past the hold,
 * and never when it is full, when the hold is off, or under the article's policy. The same load
 * doubles the merge credit where the hold is whole (extend.c invariant 7).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scheduler/core/sched.h"
#include "tests/unit/sched_test_int.h"

typedef sched_fx_t fixture_t;

/* Each test's one worker of model "m": 5 ms per batch, 10 us per padded token, a cache of 1. */
static const sched_worker_config_t WORKER = {5000, 10000, 1};

/* burst: the config's hold_burst (0 = the default, < 0 = no burst regime). */
static fixture_t *fixture(sched_policy_t policy, uint64_t hold_ns, double gate, double burst)
{
    sched_config_t cfg = {.policy = policy,
                          .hold_ns = hold_ns,
                          .hold_load = gate,
                          .hold_ramp = gate,
                          .hold_burst = burst};
    return sched_fx_create(cfg, &WORKER);
}

static void fixture_free(fixture_t *f)
{
    sched_fx_free(f);
}

static void submit(fixture_t *f, uint32_t tokens)
{
    char id[24];
    int len = snprintf(id, sizeof(id), "i%u", f->next_id++);
    sched_item_t it = {
        M(f->sched, "m"), 1, tokens, (const uint8_t *)id, (size_t)len, NULL, 0, 0, 0};
    assert_int_equal(sched_submit(f->sched, &it, NULL), SCHED_OK);
}

/* Fills, and when a batch comes out commits and completes it; its item count, or 0 (held or
 * empty). */
static size_t drain_one(fixture_t *f)
{
    sched_consumer_t c = {M(f->sched, "m"), {32, 16384, 0}, f->worker};
    sched_batch_t b;
    sched_status_t st = sched_fill(f->sched, &c, &b);
    if (st == SCHED_EEMPTY)
        return 0;
    assert_int_equal(st, SCHED_OK);
    size_t n = b.n;
    uint64_t id = b.batch_id;
    assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
    assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
    return n;
}

/* 250 items of 500 tokens a second for 10 s, no batch taken: 1.29 times the worker's time,
 * each item costed in a full batch (5 ms of tokens + 5 ms / 32 of the batch). */
#define HEAVY_ITEMS 2498
static void offer_heavy(fixture_t *f)
{
    for (int i = 0; i < HEAVY_ITEMS; i++) {
        f->now += 4 * MS;
        submit(f, 500);
    }
}

/* The batches drain_one takes, their items in all, until it takes none. */
static size_t drain_all(fixture_t *f)
{
    size_t got, total = 0;
    while ((got = drain_one(f)) != 0)
        total += got;
    return total;
}

/* offer_heavy, then drained: full batches go at once, the last two items (fixed cost a third
 * of their batch) wait. */
static void load_heavy(fixture_t *f)
{
    offer_heavy(f);
    assert_int_equal(drain_all(f), HEAVY_ITEMS - HEAVY_ITEMS % 32);
    assert_int_equal(sched_counters(f->sched)->holds, 1);
    f->now += SEC; /* past any hold */
    assert_int_equal(drain_one(f), HEAVY_ITEMS % 32);
}

/* Three seconds at 1.29 of the worker's time (250 items of 500 tokens a second), drained as they
 * go and again 2 s later: the peak second the burst regime remembers (hold.c invariant 4). */
static void burst_then_drain(fixture_t *f)
{
    for (int i = 0; i < 750; i++) {
        f->now += 4 * MS;
        submit(f, 500);
    }
    while (drain_one(f) != 0)
        ;
    f->now += 2 * SEC;
    while (drain_one(f) != 0)
        ;
}

/* A single item under the default gate at a high load: held until its wait reaches the hold,
 * sched_retry_ns says when, and then it goes out alone. */
static void test_under_filled_batch_waits_at_high_load(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, SCHED_HOLD_DEFAULT_NS, 0, -1);
    load_heavy(f);
    uint64_t holds = sched_counters(f->sched)->holds;
    submit(f, 500);
    uint64_t arrived = f->now;
    assert_int_equal(drain_one(f), 0);
    assert_int_equal(sched_retry_ns(f->sched), arrived + SCHED_HOLD_DEFAULT_NS);
    assert_int_equal(sched_counters(f->sched)->holds, holds + 1);
    f->now = arrived + SCHED_HOLD_DEFAULT_NS - 1;
    submit(f, 504); /* company: the batch is still under-filled and its oldest item decides */
    assert_int_equal(drain_one(f), 0);
    assert_int_equal(sched_retry_ns(f->sched), arrived + SCHED_HOLD_DEFAULT_NS);
    f->now = arrived + SCHED_HOLD_DEFAULT_NS;
    assert_int_equal(drain_one(f), 2);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* One item claiming 4,294,967,287 tokens on a model at half a percent of its worker's time: it
 * counts as the longest input the worker declared (16,384 tokens, max_input_tokens 0), so the
 * next item goes at once instead of waiting the hold (hold.c invariant 5). */
static void test_a_huge_token_claim_does_not_hold_the_model(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, SCHED_HOLD_DEFAULT_NS, 0, 0);
    for (int i = 0; i < 10; i++) {
        f->now += SEC;
        submit(f, 500);
        assert_int_equal(drain_one(f), 1);
    }
    f->now += SEC;
    submit(f, UINT32_MAX - 8);
    assert_int_equal(drain_one(f), 1); /* alone, over the contract's tokens */
    for (int i = 0; i < 5; i++) {
        f->now += 100 * MS;
        submit(f, 500);
        assert_int_equal(drain_one(f), 1);
    }
    assert_int_equal(sched_counters(f->sched)->holds, 0);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* The same claim before the model's first fill (a new model, a daemon just started): capped when
 * the first contract comes, so the items after it go at once too. */
static void test_a_huge_token_claim_before_the_first_fill_is_capped_then(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, SCHED_HOLD_DEFAULT_NS, 0, 0);
    f->now += SEC;
    submit(f, UINT32_MAX - 8);
    for (int i = 0; i < 10; i++) {
        f->now += 100 * MS;
        submit(f, 500);
        while (drain_one(f) != 0)
            ;
    }
    assert_int_equal(sched_counters(f->sched)->holds, 0);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* One item a second is half a percent of the worker's time: nothing is ever held. */
static void test_low_load_never_holds(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, SCHED_HOLD_DEFAULT_NS, 0, 0);
    for (int i = 0; i < 20; i++) {
        f->now += SEC;
        submit(f, 500);
        assert_int_equal(drain_one(f), 1);
    }
    assert_int_equal(sched_counters(f->sched)->holds, 0);
    fixture_free(f);
}

/* Whatever the load: a batch full to the contract's items goes at once; with the hold off, or
 * under the article's policy, an under-filled one does too. */
static void test_full_batches_and_hold_off_never_wait(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        fixture_t *f = variant == 0   ? fixture(SCHED_POLICY_LANES, 100 * MS, 1e-6, 0)
                       : variant == 1 ? fixture(SCHED_POLICY_LANES, 0, 1e-6, 0)
                                      : fixture(SCHED_POLICY_SEED, 100 * MS, 1e-6, 0);
        for (int i = 0; i < 32; i++)
            submit(f, 16);
        assert_int_equal(drain_one(f), 32);
        submit(f, 16);
        assert_int_equal(drain_one(f), variant == 0 ? 0 : 1);
        assert_int_equal(sched_counters(f->sched)->holds, variant == 0 ? 1 : 0);
        fixture_free(f);
    }
}

/* The hold grows with the load over the ramp. With gate 1.0 and ramp 1.0, the heavy load's
 * estimate at its end is 1.115 (10 s of a 5 s time constant: 86% of 1.29), so the last two items
 * wait 0.115 of the hold from the older one's arrival. */
static void test_hold_ramps_with_the_load(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, 1000 * MS, 1.0, -1);
    for (int i = 0; i < HEAVY_ITEMS; i++) {
        f->now += 4 * MS;
        submit(f, 500);
    }
    while (drain_one(f) != 0)
        ;
    uint64_t hold = sched_retry_ns(f->sched) - (f->now - 4 * MS);
    assert_true(hold > 100 * MS && hold < 130 * MS);
    fixture_free(f);
}

/* Three seconds at 1.29 of the worker's time, drained, then 7 s of quiet: the load is under the
 * gate (0.14), but the peak second, decayed (1.29 x e^(-7/60) = 1.15), still asked for more than
 * the worker's time, so a lone item waits twice the hold (hold.c invariant 4). A minute later
 * the regime is over (0.42) and it goes at once; with the regime off it always does. */
static void test_a_burst_holds_longer_at_any_load(void **state)
{
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        fixture_t *f = fixture(SCHED_POLICY_LANES, SCHED_HOLD_DEFAULT_NS, 0, variant ? -1 : 0);
        burst_then_drain(f);
        f->now += 5 * SEC;
        submit(f, 500);
        uint64_t arrived = f->now;
        if (variant == 0) {
            assert_int_equal(drain_one(f), 0);
            assert_int_equal(sched_retry_ns(f->sched),
                             arrived +
                                 (uint64_t)(SCHED_HOLD_BURST_DEFAULT * SCHED_HOLD_DEFAULT_NS));
            f->now = arrived + SCHED_HOLD_DEFAULT_NS; /* past the plain hold: still waiting */
            assert_int_equal(drain_one(f), 0);
            f->now = arrived + (uint64_t)(SCHED_HOLD_BURST_DEFAULT * SCHED_HOLD_DEFAULT_NS);
        }
        assert_int_equal(drain_one(f), 1);
        f->now += 60 * SEC;
        submit(f, 500);
        assert_int_equal(drain_one(f), 1);
        assert_true(sched_check(f->sched));
        fixture_free(f);
    }
}

/* A model place reused by another name (model.c invariant 3) keeps nothing of the last
 * model's arrivals: after a burst on "m", its worker gone and its lanes reclaimed, "n" takes the
 * place and its first lone item goes at once, where "m"'s remembered peak would have held it
 * twice the hold (hold.c invariant 4). */
static void test_a_reused_model_place_has_no_burst_of_the_last(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, SCHED_HOLD_DEFAULT_NS, 0, 0);
    burst_then_drain(f);
    sched_model_t *m = M(f->sched, "m");
    sched_worker_destroy(f->sched, f->worker);
    f->worker = NULL;
    sched_model_close(f->sched, m);
    f->now += 6 * SEC; /* past the lanes' idle time */
    sched_tick(f->sched);
    sched_model_t *n = M(f->sched, "n");
    assert_ptr_equal(n, m); /* m's place */
    sched_worker_t *w = NULL;
    assert_int_equal(sched_worker_create(f->sched, n, &WORKER, &w), SCHED_OK);
    sched_item_t it = {n, 1, 500, (const uint8_t *)"n0", 2, NULL, 0, 0, 0};
    assert_int_equal(sched_submit(f->sched, &it, NULL), SCHED_OK);
    sched_consumer_t c = {n, {32, 16384, 0}, w};
    sched_batch_t b;
    assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_OK);
    assert_int_equal(b.n, 1);
    assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* Two lanes whose merge pads by 48 tokens (480 us at 10 us a token): more than the merge
 * credit (7% of 5 ms, 350 us), less than the loaded credit (700 us). Merged only while the
 * model's offered load is where the hold is whole (extend.c invariant 7): after ten seconds at
 * 1.29 of the worker's time, not at rest, and not when the loaded credit is set to the plain
 * one. The hold is off, so only the credit differs. */
static void test_a_loaded_model_merges_a_farther_lane(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        sched_config_t cfg = {.policy = SCHED_POLICY_LANES,
                              .merge_credit_loaded = variant == 2 ? SCHED_MERGE_CREDIT_DEFAULT : 0};
        fixture_t *f = sched_fx_create(cfg, &WORKER);
        if (variant != 1) { /* loaded, and drained: the hold is off, nothing waits */
            offer_heavy(f);
            assert_int_equal(drain_all(f), HEAVY_ITEMS);
        }
        const lanes_t *l = sched_lanes_view(f->sched, M(f->sched, "m"), 1);
        uint32_t before = l != NULL ? lanes_in_use(l) : 0;
        submit(f, 1000);
        submit(f, 952);
        l = sched_lanes_view(f->sched, M(f->sched, "m"), 1);
        assert_int_equal(lanes_in_use(l), before + 2);
        sched_consumer_t c = {M(f->sched, "m"), {32, 16384, 0}, f->worker};
        sched_batch_t b;
        assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_OK);
        assert_int_equal(b.n, variant == 0 ? 2 : 1);
        assert_int_equal(b.lanes, variant == 0 ? 2 : 1);
        assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
        assert_true(sched_check(f->sched));
        fixture_free(f);
    }
}

/* A contract is a claim too (hold.c invariant 5): a consumer that declared max_input_tokens
 * 2^32 - 1 lifts the cap while it fills, so the huge claim holds the model's next items; a
 * window after its last fill only the other worker's contract counts, and they go at once. */
static void test_a_gone_workers_contract_stops_lifting_the_cap(void **state)
{
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        fixture_t *f = fixture(SCHED_POLICY_LANES, SCHED_HOLD_DEFAULT_NS, 0, 0);
        sched_consumer_t liar = {M(f->sched, "m"), {32, 16384, UINT32_MAX}, f->worker};
        sched_batch_t b;
        if (variant == 0) /* at the start, then gone */
            assert_int_equal(sched_fill(f->sched, &liar, &b), SCHED_EEMPTY);
        for (int i = 0; i < 130; i++) { /* two windows of an honest worker's fills */
            f->now += SEC;
            submit(f, 500);
            assert_int_equal(drain_one(f), 1);
        }
        if (variant == 1) /* still there */
            assert_int_equal(sched_fill(f->sched, &liar, &b), SCHED_EEMPTY);
        f->now += SEC;
        submit(f, UINT32_MAX - 8);
        assert_int_equal(drain_one(f), 1);
        uint64_t held = 0;
        for (int i = 0; i < 5; i++) {
            f->now += 100 * MS;
            submit(f, 500);
            if (drain_one(f) == 0)
                held++;
            f->now += SEC; /* past any hold */
            while (drain_one(f) != 0)
                ;
        }
        if (variant == 0)
            assert_int_equal(held, 0);
        else
            assert_int_equal(held, 5);
        assert_true(sched_check(f->sched));
        fixture_free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_under_filled_batch_waits_at_high_load),
        cmocka_unit_test(test_low_load_never_holds),
        cmocka_unit_test(test_a_huge_token_claim_does_not_hold_the_model),
        cmocka_unit_test(test_a_huge_token_claim_before_the_first_fill_is_capped_then),
        cmocka_unit_test(test_full_batches_and_hold_off_never_wait),
        cmocka_unit_test(test_hold_ramps_with_the_load),
        cmocka_unit_test(test_a_burst_holds_longer_at_any_load),
        cmocka_unit_test(test_a_reused_model_place_has_no_burst_of_the_last),
        cmocka_unit_test(test_a_loaded_model_merges_a_farther_lane),
        cmocka_unit_test(test_a_gone_workers_contract_stops_lifting_the_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
