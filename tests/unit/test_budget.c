/*
 * test_budget.c - the wait budget (budget.c): under sched_config_t.slo_ns a batch waits for
 * company until its first item is due (0.7 of the budget at first, an item's max_wait_ms scaling
 * it down) while company is expected, a full batch goes at once, a model without a budget keeps the
 * hold's rules, the due age shrinks when due items go late, a batch that misses the cache drains
 * its shape, a held fill is not redone before enough arrivals, the prefix a batch pays is what
 * the core's model of the worker's cache says, and a batch waits only while company saves more
 * than it may pad.
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

/* One worker of model "m" (5 ms per batch, 10 us per padded token, a cache of `cache` shapes);
 * every model's budget slo_ns, no hold of the load-gated kind (hold_ns 0). */
static fixture_t *fixture(uint64_t slo_ns, uint32_t cache)
{
    sched_config_t cfg = {.policy = SCHED_POLICY_LANES, .starvation_ns = 20 * MS, .slo_ns = slo_ns};
    sched_worker_config_t wc = {5000, 10000, cache};
    return sched_fx_create(cfg, &wc);
}

static void fixture_free(fixture_t *f)
{
    sched_fx_free(f);
}

static void submit_to(fixture_t *f, const char *model, uint64_t sig, uint32_t tokens,
                      uint32_t prefix, uint32_t max_wait_ms)
{
    char id[24];
    int len = snprintf(id, sizeof(id), "i%u", f->next_id++);
    sched_item_t it = {M(f->sched, model), sig,  tokens, (const uint8_t *)id,
                       (size_t)len,        NULL, 0,      prefix,
                       max_wait_ms};
    assert_int_equal(sched_submit(f->sched, &it, NULL), SCHED_OK);
}

static void submit(fixture_t *f, uint32_t tokens)
{
    submit_to(f, "m", 1, tokens, 0, 0);
}

/* Fills for `worker` of `model`; a batch that comes out is committed and completed and *out (may
 * be NULL) gets it. Its item count, or 0 (held or empty). */
static size_t drain_as(fixture_t *f, const char *model, sched_worker_t *worker, sched_batch_t *out)
{
    sched_consumer_t c = {M(f->sched, model), {32, 16384, 0}, worker};
    sched_batch_t b;
    sched_status_t st = sched_fill(f->sched, &c, &b);
    if (st == SCHED_EEMPTY)
        return 0;
    assert_int_equal(st, SCHED_OK);
    if (out != NULL)
        *out = b;
    size_t n = b.n;
    uint64_t id = b.batch_id;
    assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
    assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
    return n;
}

static size_t drain_one(fixture_t *f)
{
    return drain_as(f, "m", f->worker, NULL);
}

/* A few items wait for company until the first is due, 0.7 of the budget after it arrived, while
 * their shape's arrivals keep coming; then they go together. An item of a shape seen once waits
 * for nobody, and a shape gone quiet (silent for longer than the time left) stops waiting
 * (budget.c invariant 8); sched_retry_ns says when the silence would reach the time left. */
static void test_under_filled_batch_waits_until_due(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    submit(f, 500);
    assert_int_equal(drain_one(f), 1); /* a shape seen once expects no company */
    f->now += 200 * MS;
    uint64_t first = f->now, due = first + 3500 * MS;
    submit(f, 500); /* the shape's arrivals come 200 ms apart: company is expected */
    assert_int_equal(drain_one(f), 0);
    assert_int_equal(sched_retry_ns(f->sched), first + 1750 * MS + 1);
    for (int i = 0; i < 16; i++) { /* every 200 ms, up to 3.2 s after the first */
        f->now += 200 * MS;
        submit(f, 500);
        assert_int_equal(drain_one(f), 0);
    }
    f->now += 150 * MS; /* 150 ms of silence, 150 ms left: still waiting */
    assert_int_equal(drain_one(f), 0);
    f->now = due;
    assert_int_equal(drain_one(f), 17);
    assert_true(sched_counters(f->sched)->holds >= 17);

    /* arrivals 200 ms apart, then none: it goes once the silence reaches the time left */
    f->now += SEC;
    first = f->now;
    submit(f, 500);
    f->now += 200 * MS;
    submit(f, 500);
    assert_int_equal(drain_one(f), 0);
    uint64_t quiet = f->now + (first + 3500 * MS - f->now) / 2 + 1;
    assert_int_equal(sched_retry_ns(f->sched), quiet);
    f->now = quiet - 1;
    assert_int_equal(drain_one(f), 0);
    f->now = quiet;
    assert_int_equal(drain_one(f), 2);
    fixture_free(f);
}

/* Items that arrive at one instant are one arrival: a queue filled at once expects no company and
 * goes (budget.c invariant 8); before, their zero gaps held it until due. */
static void test_items_arriving_at_once_expect_no_company(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    for (int i = 0; i < 10; i++)
        submit(f, 500);
    assert_int_equal(drain_one(f), 10);
    assert_int_equal(sched_counters(f->sched)->holds, 0);
    fixture_free(f);
}

/* An item's own max_wait_ms scales its due age down with the budget's share: 1 s of a 5 s
 * budget is due after 0.7 s, and it takes the batch along; a larger max_wait_ms changes nothing. */
static void test_item_max_wait_caps_the_hold(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    uint64_t first = f->now;
    submit_to(f, "m", 1, 500, 0, 60000); /* over the budget: the model's */
    f->now += 100 * MS;
    submit_to(f, "m", 1, 500, 0, 1000); /* due at first + 800 ms */
    assert_int_equal(drain_one(f), 0);
    for (int i = 0; i < 6; i++) { /* company every 100 ms keeps it waiting, up to 700 ms */
        f->now += 100 * MS;
        submit_to(f, "m", 1, 500, 0, 0);
        assert_int_equal(drain_one(f), 0);
    }
    f->now = first + 750 * MS;
    assert_int_equal(drain_one(f), 0);
    f->now = first + 800 * MS;
    assert_int_equal(drain_one(f), 8);
    fixture_free(f);
}

/* A batch full to the contract goes at once, whatever its age. */
static void test_full_batch_goes_at_once(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    for (int i = 0; i < 32; i++)
        submit(f, 500);
    assert_int_equal(drain_one(f), 32);
    assert_int_equal(sched_counters(f->sched)->holds, 0);
    fixture_free(f);
}

/* A budget set for one model by name (before the model exists) holds that model's batches; the
 * other model, without a budget and without a hold, dispatches at once. */
static void test_budget_per_model(void **state)
{
    (void)state;
    fixture_t *f = fixture(0, 1);
    assert_int_equal(sched_slo_set(f->sched, "slow", 2 * SEC), SCHED_OK);
    assert_int_equal(sched_slo_set(f->sched, "", SEC), SCHED_EINVAL);
    sched_worker_t *w2;
    sched_worker_config_t wc = {5000, 10000, 1};
    assert_int_equal(sched_worker_create(f->sched, M(f->sched, "slow"), &wc, &w2), SCHED_OK);
    submit(f, 500);
    uint64_t first = f->now;
    submit_to(f, "slow", 7, 500, 0, 0);
    f->now += MS;
    submit_to(f, "slow", 7, 500, 0, 0); /* a second arrival: company is expected */
    assert_int_equal(drain_one(f), 1);
    assert_int_equal(drain_as(f, "slow", w2, NULL), 0);
    assert_int_equal(sched_retry_ns(f->sched), f->now + (first + 1400 * MS - f->now) / 2 + 1);
    f->now = first + 1400 * MS;
    assert_int_equal(drain_as(f, "slow", w2, NULL), 2);
    /* the budget can be changed (and taken away: 0) for a model that exists */
    assert_int_equal(sched_slo_set(f->sched, "slow", 0), SCHED_OK);
    submit_to(f, "slow", 7, 500, 0, 0);
    assert_int_equal(drain_as(f, "slow", w2, NULL), 1);
    fixture_free(f);
}

/* The due age of a held batch whose first item arrived at t and whose shape last arrived 1 ms
 * before now: sched_retry_ns is when the silence would reach the time left, half way there. */
static uint64_t due_of(const fixture_t *f, uint64_t t)
{
    uint64_t last = f->now - MS;
    return last + 2 * (sched_retry_ns(f->sched) - 1 - last) - t;
}

/* A budget changed for a model applies at its next fill: what its fills held under the old one
 * is not remembered (the same reset gives a reused model place a clean slate, model.c
 * invariant 3). */
static void test_a_changed_budget_applies_at_the_next_fill(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    submit(f, 500);
    f->now += 10 * MS;
    submit(f, 500); /* company expected: held, asked again 1.75 s on */
    assert_int_equal(drain_one(f), 0);
    f->now += 400 * MS; /* due under a 500 ms budget (at 350 ms) */
    assert_int_equal(sched_slo_set(f->sched, "m", 500 * MS), SCHED_OK);
    assert_int_equal(drain_one(f), 2);
    fixture_free(f);
}

/* When due items go late, the due age shrinks (down to half the budget), so the next item waits
 * less for company; with nothing late it stays at 0.7 of the budget. */
static void test_due_age_shrinks_when_items_go_late(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    /* one item, taken 2 s after it was due: a lateness of 0.4 budgets */
    submit(f, 500);
    f->now += 6 * SEC;
    assert_int_equal(drain_one(f), 1);
    sched_tick(f->sched);
    f->now += MS; /* after the drain the miss began */
    uint64_t t = f->now;
    for (int i = 0; i < 10; i++) { /* ten 1 ms apart: the shape's mean gap falls under 2 s */
        submit(f, 500);
        f->now += MS;
    }
    assert_int_equal(drain_one(f), 0);
    uint64_t due = due_of(f, t);
    assert_true(due < 3500 * MS);
    assert_true(due >= 2500 * MS);
    fixture_free(f);

    f = fixture(5 * SEC, 1);
    submit(f, 500);
    f->now += 3500 * MS;
    assert_int_equal(drain_one(f), 1); /* on time */
    sched_tick(f->sched);
    f->now += MS;
    t = f->now;
    for (int i = 0; i < 10; i++) {
        submit(f, 500);
        f->now += MS;
    }
    assert_int_equal(drain_one(f), 0);
    assert_int_equal(due_of(f, t), 3500 * MS);
    fixture_free(f);
}

/* A fill that was held is not redone before a quarter batch of arrivals (or its retry): a batch
 * that became full with fewer arrivals waits for them, never past its due. */
static void test_held_fill_waits_for_arrivals(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    for (int i = 0; i < 31; i++) {
        submit(f, 500);
        f->now += 1000;
    }
    assert_int_equal(drain_one(f), 0); /* 31 of 32: held */
    submit(f, 500);                    /* full now, but one arrival is not enough to look */
    assert_int_equal(drain_one(f), 0);
    for (int i = 0; i < 7; i++) {
        f->now += 1000;
        submit(f, 500);
    }
    assert_int_equal(drain_one(f), 32); /* 8 arrivals: looked again, full */
    fixture_free(f);
}

/* A batch says its shape's prefix and what the worker pays for it as the core models its cache:
 * the prefix on the first batch of the shape, nothing on the next; and under a budget a batch
 * that missed the cache makes the rest of its shape's queue due (the shape drains). */
static void test_prefix_charged_on_a_miss_and_the_shape_drains(void **state)
{
    (void)state;
    fixture_t *f = fixture(5 * SEC, 1);
    submit_to(f, "m", 1, 500, 700, 0);
    f->now += 3500 * MS + MS;
    submit_to(f, "m", 1, 3000, 700, 0); /* another lane, young */
    sched_batch_t b;
    assert_int_equal(drain_as(f, "m", f->worker, &b), 1); /* due; too long to merge */
    assert_int_equal(b.prefix_tokens, 700);
    assert_int_equal(b.prefix_charged, 700);
    /* it missed the cache: the young lane queued with it is due now, while the shape is warm */
    assert_int_equal(drain_as(f, "m", f->worker, &b), 1);
    assert_int_equal(b.pad_to, 3000);
    assert_int_equal(b.prefix_charged, 0);
    f->now += MS;
    submit_to(f, "m", 1, 500, 700, 0);
    f->now += 3500 * MS + MS;
    assert_int_equal(drain_as(f, "m", f->worker, &b), 1);
    assert_int_equal(b.prefix_tokens, 700);
    assert_int_equal(b.prefix_charged, 0); /* warm */
    fixture_free(f);
}

/* A shape the worker does not cache, under a 1 s budget, while its warm shape keeps filling
 * batches: the cold one preempts once its item waited 0.9 of the budget (select.c invariant 5b),
 * not at the cold bound of 1 s, which is the whole budget. Fills every 50 ms: taken at 950 ms. */
static void test_a_cold_shape_goes_within_the_budget(void **state)
{
    (void)state;
    fixture_t *f = fixture(SEC, 1);
    sched_batch_t b;
    for (int i = 0; i < 32; i++) /* a full batch: warm on shape 1 */
        submit_to(f, "m", 1, 500, 0, 0);
    assert_int_equal(drain_as(f, "m", f->worker, &b), 32);
    uint64_t t0 = f->now;
    submit_to(f, "m", 2, 500, 0, 0);
    uint64_t taken = 0;
    for (int k = 1; k <= 30 && taken == 0; k++) {
        f->now = t0 + (uint64_t)k * 50 * MS;
        for (int i = 0; i < 32; i++)
            submit_to(f, "m", 1, 500, 0, 0);
        assert_true(drain_as(f, "m", f->worker, &b) > 0);
        if (b.signature == 2)
            taken = f->now - t0;
    }
    assert_int_equal(taken, 950 * MS);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* Filling a batch to the contract under a budget credits each lane taken along with its own
 * share of a full batch (extend.c invariant 5), not a share of the whole fixed cost: where a token
 * is cheap (0.5 us against 5 ms a batch), a lane of one young item is left to wait for company
 * of its own instead of padding 31 items by 104 tokens each to make the batch full. */
static void test_a_young_lane_does_not_pad_a_batch_to_full(void **state)
{
    (void)state;
    sched_config_t cfg = {
        .policy = SCHED_POLICY_LANES, .starvation_ns = 20 * MS, .slo_ns = 5 * SEC};
    sched_worker_config_t wc = {5000, 500, 1};
    fixture_t *f = sched_fx_create(cfg, &wc);
    for (int i = 0; i < 31; i++) { /* one lane, arriving 10 ms apart: company is expected */
        f->now += 10 * MS;
        submit_to(f, "m", 1, 400, 0, 0);
    }
    f->now += 10 * MS;
    submit_to(f, "m", 1, 500, 0, 0); /* a lane of its own, young */
    sched_batch_t b;
    assert_int_equal(drain_as(f, "m", f->worker, &b), 0); /* waits for company */
    f->now += 3500 * MS; /* the first item is due: it goes, with what fits */
    assert_true(drain_as(f, "m", f->worker, &b) >= 31);
    fixture_free(f);
}

/* A batch waits for company only while company saves more than it may pad (budget.c invariant
 * 10): with no fixed cost, or 100 us (10 tokens' worth at 10 us), a warm batch goes at once,
 * though company is expected; at 500 us it waits. With no fixed cost a batch that misses the
 * worker's cache waits, for the prefix the items that join it would pay again. */
static void test_a_batch_waits_only_for_what_company_saves(void **state)
{
    (void)state;
    static const struct {
        uint32_t fixed_us;
        size_t first_fill; /* items out at the second arrival: 0 = held */
    } cases[] = {{0, 1}, {100, 1}, {500, 0}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        sched_config_t cfg = {
            .policy = SCHED_POLICY_LANES, .starvation_ns = 20 * MS, .slo_ns = 5 * SEC};
        sched_worker_config_t wc = {cases[k].fixed_us, 10000, 1};
        fixture_t *f = sched_fx_create(cfg, &wc);
        submit(f, 500);
        assert_int_equal(drain_one(f), 1); /* a shape seen once: goes, and is warm */
        f->now += 200 * MS;
        submit(f, 500); /* arrivals 200 ms apart: company is expected */
        assert_int_equal(drain_one(f), cases[k].first_fill);
        fixture_free(f);
    }
    sched_config_t cfg = {
        .policy = SCHED_POLICY_LANES, .starvation_ns = 20 * MS, .slo_ns = 5 * SEC};
    sched_worker_config_t wc = {0, 10000, 1};
    fixture_t *f = sched_fx_create(cfg, &wc);
    submit(f, 500);
    assert_int_equal(drain_one(f), 1); /* warm on shape 1 */
    submit_to(f, "m", 2, 500, 700, 0);
    f->now += 200 * MS;
    submit_to(f, "m", 2, 500, 700, 0);
    assert_int_equal(drain_one(f), 0); /* a miss: 700 prefix tokens saved per batch */
    f->now += 3500 * MS;
    assert_int_equal(drain_one(f), 2);
    fixture_free(f);
}

/* A shape the worker does not cache, seen twice: one gap is no evidence that its arrivals keep
 * coming (a conversation's next turn, say), so its queue does not wait for company as a cold shape
 * (select.c invariant 5 b, d; budget.c invariant 8); it waits only as any batch does, until its
 * silence reaches the time left, and goes then, long before its due age. Shape 3, seen once, keeps
 * more shapes queued than the worker caches. */
static void test_one_gap_is_no_evidence_of_company(void **state)
{
    (void)state;
    for (int arrivals = 2; arrivals <= 3; arrivals++) {
        fixture_t *f = fixture(5 * SEC, 1);
        submit(f, 500);
        assert_int_equal(drain_one(f), 1); /* warm on shape 1 */
        uint64_t t0 = f->now;
        for (int i = 0; i < arrivals; i++) { /* gaps of 200 ms, well under the due age */
            submit_to(f, "m", 2, 500, 0, 0);
            if (i == 0) {
                f->now += 100 * MS;
                submit_to(f, "m", 3, 500, 0, 0);
                f->now += 100 * MS;
            } else if (i + 1 < arrivals) {
                f->now += 200 * MS;
            }
        }
        assert_int_equal(drain_one(f), 0);
        uint64_t quiet = f->now + (t0 + 3500 * MS - f->now) / 2 + 1;
        f->now = quiet;
        sched_batch_t b;
        if (arrivals == 2) {
            assert_int_equal(drain_as(f, "m", f->worker, &b), 2);
            assert_int_equal(b.signature, 2);
        } else { /* two gaps: the cold queue waits for company until it is due */
            assert_int_equal(drain_one(f), 0);
            f->now = t0 + 3500 * MS + 1; /* the cold bound (b), the due age under a budget */
            assert_int_equal(drain_as(f, "m", f->worker, &b), 3);
            assert_int_equal(b.signature, 2);
        }
        assert_true(sched_check(f->sched));
        fixture_free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_under_filled_batch_waits_until_due),
        cmocka_unit_test(test_items_arriving_at_once_expect_no_company),
        cmocka_unit_test(test_a_changed_budget_applies_at_the_next_fill),
        cmocka_unit_test(test_item_max_wait_caps_the_hold),
        cmocka_unit_test(test_full_batch_goes_at_once),
        cmocka_unit_test(test_budget_per_model),
        cmocka_unit_test(test_due_age_shrinks_when_items_go_late),
        cmocka_unit_test(test_held_fill_waits_for_arrivals),
        cmocka_unit_test(test_prefix_charged_on_a_miss_and_the_shape_drains),
        cmocka_unit_test(test_a_cold_shape_goes_within_the_budget),
        cmocka_unit_test(test_a_young_lane_does_not_pad_a_batch_to_full),
        cmocka_unit_test(test_a_batch_waits_only_for_what_company_saves),
        cmocka_unit_test(test_one_gap_is_no_evidence_of_company),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
