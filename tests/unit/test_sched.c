/*
 * test_sched.c - shape table, sticky selection, the shape guard and the life of a batch over
 * the memory store; and a seeded property test over random item streams.
 *
 * Longer than the house rule's ~600 lines: one cmocka file per module, and the property test
 * with its model of the expected state is half of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "support/fs.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/invariant.h"
#include "scheduler/core/sched.h"
#include "tests/unit/sched_test_int.h"

/* Shapes of the model named `name`: 0 for a model the scheduler does not know. */
static size_t shape_count(sched_t *s, const char *name)
{
    sched_model_t *m = sched_model_find(s, name);
    return m != NULL ? sched_shape_count(s, m) : 0;
}

typedef struct {
    uint64_t now;
} fake_clock_t;

typedef struct {
    fake_clock_t clock;
    store_t *store;
    sched_t *sched;
    uint32_t next_id;
} fixture_t;

static int setup_with_lanes(void **state, uint32_t max_lanes)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(store_open_memory(&f->store), STORE_OK);
    sched_config_t cfg = {
        .max_lanes = max_lanes, .clock = sched_test_now, .clock_ctx = &f->clock.now};
    assert_int_equal(sched_create(&cfg, f->store, &f->sched), SCHED_OK);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with_lanes(state, 0);
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sched_destroy(f->sched);
    store_close(f->store);
    free(f);
    return 0;
}

/* Submits an item with a fresh id "i<N>"; returns its placement. */
static sched_placement_t submit(fixture_t *f, const char *model, uint64_t sig, uint32_t tokens)
{
    char id[32];
    int len = snprintf(id, sizeof(id), "i%u", f->next_id++);
    sched_item_t it = {
        M(f->sched, model), sig, tokens, (const uint8_t *)id, (size_t)len, NULL, 0, 0, 0};
    sched_placement_t p;
    assert_int_equal(sched_submit(f->sched, &it, &p), SCHED_OK);
    return p;
}

static sched_consumer_t consumer(fixture_t *f, const char *model, uint32_t bs, uint32_t tokens)
{
    return (sched_consumer_t){M(f->sched, model), {bs, tokens, 0}, NULL};
}

/* Fills and commits one batch; returns it (views valid until the next sched call). */
static sched_batch_t take(fixture_t *f, const sched_consumer_t *c)
{
    sched_batch_t b;
    assert_int_equal(sched_fill(f->sched, c, &b), SCHED_OK);
    assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
    return b;
}

static int id_is(const store_view_t *v, const char *id)
{
    return v->id_len == strlen(id) && memcmp(v->id_view, id, v->id_len) == 0;
}

static void test_items_of_different_shapes_never_share_a_lane_queue(void **state)
{
    fixture_t *f = *state;
    submit(f, "m", 1, 100);
    submit(f, "m", 2, 100);
    submit(f, "other", 1, 100);
    assert_non_null(sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 1));
    assert_non_null(sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 2));
    assert_non_null(sched_lanes_view(f->sched, sched_model_find(f->sched, "other"), 1));
    assert_null(sched_lanes_view(f->sched, sched_model_find(f->sched, "other"), 2));
    sched_consumer_t c = consumer(f, "m", 64, 100000);
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.n, 1); /* lengths equal, but shapes differ: one item per batch */
    assert_int_equal(sched_counters(f->sched)->lanes_opened, 3);
}

static void test_sticky_selection_stays_on_current_shape(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 4; i++)
        submit(f, "m", 0xA, 100);
    for (int i = 0; i < 2; i++)
        submit(f, "m", 0xB, 100);
    sched_consumer_t c = consumer(f, "m", 1, 100000);
    assert_true(take(f, &c).signature == 0xA); /* A has the most tokens */
    /* B now has far more tokens than A, but A still has work: stay on A */
    for (int i = 0; i < 20; i++)
        submit(f, "m", 0xB, 100);
    for (int i = 0; i < 3; i++)
        assert_true(take(f, &c).signature == 0xA);
    assert_int_equal(sched_counters(f->sched)->shape_switches, 0);
    uint64_t cur = 0;
    assert_true(sched_current_shape(f->sched, sched_model_find(f->sched, "m"), &cur));
    assert_true(cur == 0xA);
    int has = 0;
    uint64_t stored = 0;
    assert_int_equal(store_current_shape_get(f->store, "m", &has, &stored), STORE_OK);
    assert_true(has && stored == 0xA);
}

static void test_switches_to_shape_with_most_tokens_when_current_is_dry(void **state)
{
    fixture_t *f = *state;
    submit(f, "m", 0xA, 500);
    submit(f, "m", 0xB, 100);
    submit(f, "m", 0xC, 100);
    submit(f, "m", 0xC, 100);
    submit(f, "m", 0xC, 100);
    sched_consumer_t c = consumer(f, "m", 1, 100000);
    assert_true(take(f, &c).signature == 0xA); /* 500 > 300 > 100 */
    assert_true(take(f, &c).signature == 0xC); /* A dry: C has 300, B 100 */
    assert_int_equal(sched_counters(f->sched)->shape_switches, 1);
    int has = 0;
    uint64_t stored = 0;
    store_current_shape_get(f->store, "m", &has, &stored);
    assert_true(stored == 0xC);
}

static void test_tries_lanes_in_descending_queued_tokens(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 3; i++)
        submit(f, "m", 1, 100); /* lane 0: 300 tokens */
    sched_placement_t p = submit(f, "m", 1, 1000);
    assert_int_equal(p.lane, 1); /* lane 1: 1000 tokens */
    sched_consumer_t c = consumer(f, "m", 64, 100000);
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.lane, 1);
    b = take(f, &c);
    assert_int_equal(b.lane, 0);
    assert_int_equal(b.n, 3);
}

static void test_overflow_stays_at_front_in_arrival_order(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 10; i++)
        submit(f, "m", 1, 100);
    sched_consumer_t c = consumer(f, "m", 4, 100000);
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.n, 4);
    assert_true(id_is(&b.items_view[0], "i0") && id_is(&b.items_view[3], "i3"));
    /* another consumer of the same model sees the overflow next, in order */
    sched_consumer_t c2 = consumer(f, "m", 8, 100000);
    b = take(f, &c2);
    assert_int_equal(b.n, 6);
    for (int i = 0; i < 6; i++) {
        char id[8];
        snprintf(id, sizeof(id), "i%d", 4 + i);
        assert_true(id_is(&b.items_view[i], id));
    }
}

static void test_batch_respects_padded_token_budget(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 10; i++)
        submit(f, "m", 1, 100);
    sched_consumer_t c = consumer(f, "m", 64, 312);
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.pad_to, 104);
    assert_true(b.padded_tokens == 312);
    assert_true(sched_counters(f->sched)->padded_tokens == 312);
    assert_true(sched_counters(f->sched)->real_tokens == 300);
}

static void test_uncommitted_fill_leaves_items_queued(void **state)
{
    fixture_t *f = *state;
    submit(f, "m", 1, 100);
    submit(f, "m", 1, 100);
    sched_consumer_t c = consumer(f, "m", 64, 100000);
    sched_batch_t b1, b2;
    assert_int_equal(sched_fill(f->sched, &c, &b1), SCHED_OK);
    uint64_t first_id = b1.batch_id;
    assert_int_equal(sched_fill(f->sched, &c, &b2), SCHED_OK);
    assert_int_equal(b2.n, 2);
    assert_true(b2.batch_id > first_id); /* ids are never reused */
    assert_true(sched_counters(f->sched)->items_routed == 0);
    assert_true(store_pending_count(f->store) == 0);
}

static void test_commit_of_stale_fill_is_refused(void **state)
{
    fixture_t *f = *state;
    submit(f, "m", 1, 100);
    sched_consumer_t c = consumer(f, "m", 64, 100000);
    sched_batch_t b;
    assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_OK);
    submit(f, "m", 1, 100); /* mutates: the fill's views may be stale */
    assert_int_equal(sched_commit(f->sched, &b), SCHED_EUNKNOWN);
    assert_true(store_pending_count(f->store) == 0);
}

static void test_fill_on_model_without_work_is_empty(void **state)
{
    fixture_t *f = *state;
    sched_consumer_t c = consumer(f, "nobody", 64, 100000);
    sched_batch_t b;
    assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_EEMPTY);
    submit(f, "m", 1, 100);
    c = consumer(f, "m", 64, 100000);
    take(f, &c);
    assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_EEMPTY);
}

static void test_complete_twice_is_harmless_and_counted_once(void **state)
{
    fixture_t *f = *state;
    submit(f, "m", 1, 100);
    submit(f, "m", 1, 95);
    sched_consumer_t c = consumer(f, "m", 64, 100000);
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.n, 2);
    uint32_t pos0 = 0;
    sched_settled_t done = {.positions = 99};
    assert_int_equal(sched_complete(f->sched, b.batch_id, &pos0, 1, &done), SCHED_OK);
    assert_int_equal(done.positions, 1);
    assert_true(done.items == 1 && done.tokens == 100 && !done.closed);
    assert_true(done.bytes == 2); /* the id "i0", no payload */
    assert_int_equal(sched_complete(f->sched, b.batch_id, &pos0, 1, &done), SCHED_OK);
    assert_int_equal(done.positions, 0);
    assert_true(done.items == 0 && done.bytes == 0);
    assert_true(sched_counters(f->sched)->items_completed == 1);
    assert_true(sched_counters(f->sched)->tokens_completed == 100);
    assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, &done), SCHED_OK);
    assert_int_equal(done.positions, 1);
    assert_true(done.closed && done.tokens == 95);
    /* the batch is settled: a repeated ack names an unknown batch and changes nothing */
    assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, &done), SCHED_EUNKNOWN);
    assert_true(sched_counters(f->sched)->tokens_completed == 195);
}

static void test_ack_for_unknown_batch_or_position_changes_nothing(void **state)
{
    fixture_t *f = *state;
    submit(f, "m", 1, 100);
    sched_consumer_t c = consumer(f, "m", 64, 100000);
    sched_batch_t b = take(f, &c);
    uint32_t bad[] = {0, 7};
    assert_int_equal(sched_complete(f->sched, b.batch_id + 1000, NULL, 0, NULL), SCHED_EUNKNOWN);
    assert_int_equal(sched_complete(f->sched, b.batch_id, bad, 2, NULL), SCHED_EUNKNOWN);
    assert_int_equal(sched_return(f->sched, b.batch_id, bad, 2, NULL), SCHED_EUNKNOWN);
    assert_true(sched_counters(f->sched)->items_completed == 0);
    assert_true(store_pending_count(f->store) == 1);
}

static void test_returned_items_go_back_to_front_in_order(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 6; i++)
        submit(f, "m", 1, 100);
    sched_consumer_t c = consumer(f, "m", 3, 100000);
    sched_batch_t a = take(f, &c);
    uint64_t a_id = a.batch_id;
    sched_batch_t b = take(f, &c);
    uint64_t b_id = b.batch_id;
    sched_settled_t returned = {0};
    assert_int_equal(sched_return(f->sched, b_id, NULL, 0, &returned), SCHED_OK);
    assert_int_equal(returned.positions, 3);
    assert_true(returned.closed && returned.items == 0);
    assert_int_equal(sched_return(f->sched, a_id, NULL, 0, &returned), SCHED_OK);
    submit(f, "m", 1, 100); /* i6 arrives after the returns */
    c = consumer(f, "m", 64, 100000);
    sched_batch_t all = take(f, &c);
    assert_int_equal(all.n, 7);
    for (int i = 0; i < 7; i++) {
        char id[8];
        snprintf(id, sizeof(id), "i%d", i);
        assert_true(id_is(&all.items_view[i], id));
        assert_int_equal(all.items_view[i].deliveries, i < 6 ? 1 : 0);
    }
    assert_true(sched_counters(f->sched)->items_returned == 6);
    assert_true(sched_counters(f->sched)->items_routed == 13);
}

static void test_quiesced_lane_is_released_after_drain(void **state)
{
    fixture_t *f = *state;
    f->clock.now = 1 * SEC;
    submit(f, "m", 1, 100);
    sched_consumer_t c = consumer(f, "m", 64, 100000);
    sched_batch_t b = take(f, &c); /* in flight: nothing of the lane queues */
    assert_int_equal(b.n, 1);
    f->clock.now = 6 * SEC;
    sched_tick(f->sched);
    assert_true(sched_counters(f->sched)->lanes_quiesced == 1);
    const lanes_t *l = sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 1);
    assert_int_equal(lanes_in_use(l), 1); /* the quiescing lane waits for its item's ack */
    assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
    assert_int_equal(lanes_in_use(l), 0);
    /* its id comes back from the free list with a fresh queue */
    sched_placement_t p = submit(f, "m", 1, 4000);
    assert_true(p.opened);
    assert_int_equal(p.lane, 0);
    b = take(f, &c);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.items_view[0].tokens, 4000);
}

static void test_tokens_received_equal_tokens_completed_after_drain(void **state)
{
    fixture_t *f = *state;
    uint32_t lens[] = {17, 900, 33, 120, 4000, 64, 65, 66, 1, 2048};
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
            submit(f, round % 2 ? "a" : "b", (uint64_t)(i % 3), lens[i] + (uint32_t)round);
    }
    const char *models[] = {"a", "b"};
    for (int m = 0; m < 2; m++) {
        sched_consumer_t c = consumer(f, models[m], 8, 8192);
        sched_batch_t b;
        while (sched_fill(f->sched, &c, &b) == SCHED_OK) {
            assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
            assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
        }
    }
    const sched_counters_t *k = sched_counters(f->sched);
    assert_true(k->items_received == 200);
    assert_true(k->tokens_received == k->tokens_completed);
    assert_true(k->items_completed == 200);
    assert_true(store_pending_count(f->store) == 0);
}

static void test_submit_rejects_invalid_items(void **state)
{
    fixture_t *f = *state;
    sched_item_t zero = {M(f->sched, "m"), 1, 0, (const uint8_t *)"x", 1, NULL, 0, 0, 0};
    sched_item_t nomodel = {NULL, 1, 10, (const uint8_t *)"x", 1, NULL, 0, 0, 0};
    assert_int_equal(sched_submit(f->sched, &zero, NULL), SCHED_EINVAL);
    assert_int_equal(sched_submit(f->sched, &nomodel, NULL), SCHED_EINVAL);
    assert_true(sched_counters(f->sched)->items_received == 0);
}

static void test_starvation_bound_preempts_sticky_shape_at_batch_boundary(void **state)
{
    (void)state;
    fixture_t *f;
    setup((void **)&f);
    sched_destroy(f->sched);
    sched_config_t cfg = {
        .clock = sched_test_now, .clock_ctx = &f->clock.now, .starvation_ns = 5 * SEC};
    assert_int_equal(sched_create(&cfg, f->store, &f->sched), SCHED_OK);
    for (int i = 0; i < 20; i++)
        submit(f, "m", 0xA, 100);
    submit(f, "m", 0xB, 100); /* B's only item arrives at t = 0 */
    sched_consumer_t c = consumer(f, "m", 1, 100000);
    assert_true(take(f, &c).signature == 0xA);
    f->clock.now = 5 * SEC; /* waited exactly the bound: not past it */
    assert_true(take(f, &c).signature == 0xA);
    f->clock.now = 5 * SEC + 1;
    assert_true(take(f, &c).signature == 0xB);
    assert_true(sched_counters(f->sched)->starvation_preemptions == 1);
    assert_true(take(f, &c).signature == 0xA); /* B is dry: back to A */
    teardown((void **)&f);
}

/* A sched with the starvation bound on, over the fixture's store and clock. */
static void sched_with_bound(fixture_t *f, uint64_t bound_ns)
{
    sched_destroy(f->sched);
    f->sched = NULL;
    sched_config_t cfg = {
        .clock = sched_test_now, .clock_ctx = &f->clock.now, .starvation_ns = bound_ns};
    assert_int_equal(sched_create(&cfg, f->store, &f->sched), SCHED_OK);
}

static void test_starvation_bound_serves_starved_lane_within_current_shape(void **state)
{
    fixture_t *f = *state;
    sched_with_bound(f, 5 * SEC);
    sched_placement_t small = submit(f, "m", 0xA, 16); /* alone in its lane, at t = 0 */
    f->clock.now = 1 * SEC; /* the big lane's items are younger: only `small` can starve */
    for (int i = 0; i < 20; i++)
        submit(f, "m", 0xA, 100);
    sched_placement_t big = submit(f, "m", 0xA, 100);
    assert_true(small.lane != big.lane);
    sched_consumer_t c = consumer(f, "m", 1, 100000);
    assert_int_equal(take(f, &c).lane, big.lane); /* the lane with the most tokens */
    f->clock.now = 5 * SEC;                       /* waited exactly the bound: not past it */
    assert_int_equal(take(f, &c).lane, big.lane);
    f->clock.now = 5 * SEC + 1;
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.lane, small.lane);
    assert_int_equal(b.items_view[0].tokens, 16);
    /* the starved lane is dry and the big lane's oldest waited 4 s: by tokens again */
    assert_int_equal(take(f, &c).lane, big.lane);
    assert_true(sched_counters(f->sched)->starvation_preemptions == 0); /* no shape switched */
}

static void test_starvation_preemption_serves_the_starved_item_not_the_fullest_lane(void **state)
{
    fixture_t *f = *state;
    sched_with_bound(f, 5 * SEC);
    for (int i = 0; i < 20; i++)
        submit(f, "m", 0xA, 100);
    submit(f, "m", 0xB, 16); /* B's oldest item, alone in its lane, at t = 0 */
    sched_consumer_t c = consumer(f, "m", 1, 100000);
    assert_true(take(f, &c).signature == 0xA);
    f->clock.now = 4 * SEC;
    for (int i = 0; i < 10; i++)
        submit(f, "m", 0xB, 100); /* B's fullest lane: young items */
    f->clock.now = 5 * SEC + 1;
    sched_batch_t b = take(f, &c);
    assert_true(b.signature == 0xB);
    assert_int_equal(b.items_view[0].tokens, 16);
    assert_true(sched_counters(f->sched)->starvation_preemptions == 1);
}

/* The shape's oldest item sits in a lane minted after 64 others, with younger items in every
 * other lane: the age bound still finds it (shapes_oldest reads the lanes in chunks). */
static void test_starvation_bound_finds_the_oldest_lane_among_many(void **state)
{
    fixture_t *f = *state;
    sched_with_bound(f, 5 * SEC);
    enum { N = 80 };
    uint32_t tokens[N];
    for (int k = 0; k < N; k++) /* each 200 below the last: past LANES_CAP_TOKENS, a new lane */
        tokens[k] = 20000 - 200 * (uint32_t)k;
    uint32_t lanes_seen[N];
    for (int k = 0; k < N; k++) /* t = 0: one item in each of N lanes */
        lanes_seen[k] = submit(f, "m", 0xA, tokens[k]).lane;
    for (int k = 1; k < N; k++)
        assert_true(lanes_seen[k] != lanes_seen[k - 1]);
    f->clock.now = 1 * SEC;
    sched_placement_t oldest = submit(f, "m", 0xA, 16);
    assert_true(oldest.lane >= 64);
    sched_consumer_t c = consumer(f, "m", 1, 1u << 20);
    for (int k = 0; k < N; k++) /* by tokens: every longer item first, none past the bound */
        assert_int_not_equal(take(f, &c).lane, oldest.lane);
    f->clock.now = 2 * SEC;
    for (int k = 0; k < N; k++) /* younger items behind it, in the other lanes */
        submit(f, "m", 0xA, tokens[k]);
    f->clock.now = 6 * SEC + 1;
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.lane, oldest.lane);
    assert_int_equal(b.items_view[0].tokens, 16);
}

static void test_without_starvation_bound_small_lane_waits_for_bigger_lanes(void **state)
{
    fixture_t *f = *state;
    sched_placement_t small = submit(f, "m", 0xA, 16);
    for (int i = 0; i < 5; i++)
        submit(f, "m", 0xA, 100);
    sched_consumer_t c = consumer(f, "m", 1, 100000);
    f->clock.now = 3600 * SEC;
    for (int i = 0; i < 5; i++)
        assert_int_not_equal(take(f, &c).lane, small.lane);
    assert_int_equal(take(f, &c).lane, small.lane);
}

static void test_without_starvation_bound_sticky_shape_is_never_preempted(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 5; i++)
        submit(f, "m", 0xA, 100);
    submit(f, "m", 0xB, 100);
    sched_consumer_t c = consumer(f, "m", 1, 100000);
    f->clock.now = 3600 * SEC;
    for (int i = 0; i < 5; i++)
        assert_true(take(f, &c).signature == 0xA);
    assert_true(take(f, &c).signature == 0xB);
    assert_true(sched_counters(f->sched)->starvation_preemptions == 0);
}

/* ---- restart over the disk store ----------------------------------------------------------- */

/* A sched with a fake clock over the disk store in dir (a fresh one, or the one a restart finds);
 * *rep gets the open's recovery report when rep is not NULL. */
static void disk_fixture_open(fixture_t *f, const char *dir, store_recovery_t *rep)
{
    store_disk_config_t dc = {.dir = dir};
    sched_config_t cfg = {.clock = sched_test_now, .clock_ctx = &f->clock.now};
    assert_int_equal(store_open_disk(&dc, rep, &f->store), STORE_OK);
    assert_int_equal(sched_create(&cfg, f->store, &f->sched), SCHED_OK);
}

static void disk_fixture_close(fixture_t *f)
{
    sched_destroy(f->sched);
    store_close(f->store);
    f->sched = NULL;
    f->store = NULL;
}

/* A lane's target is not written to the store (sched.c): after a restart it is the longest item
 * the lane still holds, not the longer one it opened with. */
static void test_restart_lane_target_is_its_longest_held_item(void **state)
{
    (void)state;
    char dir[] = "/tmp/lanesched-sched-XXXXXX";
    assert_non_null(mkdtemp(dir));
    fixture_t f = {0};
    disk_fixture_open(&f, dir, NULL);
    sched_placement_t first = submit(&f, "m", 0xA, 104); /* opens lane 0 at 104 */
    assert_true(first.opened);
    assert_int_equal(submit(&f, "m", 0xA, 100).lane, first.lane);
    assert_int_equal(submit(&f, "m", 0xA, 102).lane, first.lane);
    assert_int_equal(store_flush(f.store), STORE_OK);
    sched_consumer_t c = consumer(&f, "m", 2, 100000);
    sched_batch_t b = take(&f, &c); /* 104 and 100 go; 102 stays */
    assert_int_equal(b.n, 2);
    assert_int_equal(sched_complete(f.sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
    assert_int_equal(store_flush(f.store), STORE_OK);
    disk_fixture_close(&f);

    disk_fixture_open(&f, dir, NULL);
    const lanes_t *l = sched_lanes_view(f.sched, sched_model_find(f.sched, "m"), 0xA);
    assert_non_null(l);
    lanes_lane_t lane;
    assert_int_equal(lanes_get(l, first.lane, &lane), SCHED_OK);
    assert_int_equal(lane.queued_items, 1);
    assert_int_equal(lane.target, 102);
    disk_fixture_close(&f);
    fs_remove_tree(dir);
}

static void test_restart_restores_lanes_targets_and_current_shape(void **state)
{
    (void)state;
    char dir[] = "/tmp/lanesched-sched-XXXXXX";
    assert_non_null(mkdtemp(dir));
    fixture_t f = {0};
    disk_fixture_open(&f, dir, NULL);
    for (int i = 0; i < 5; i++)
        submit(&f, "m", 0xA, 100 + (uint32_t)i); /* lane 0, target rises to 104 */
    submit(&f, "m", 0xA, 4000);                  /* lane 1 */
    submit(&f, "m", 0xB, 50);
    assert_int_equal(store_flush(f.store), STORE_OK);
    sched_consumer_t c = consumer(&f, "m", 2, 100000);
    sched_batch_t b = take(&f, &c); /* lane 1 (4000 tokens) first: sticky shape A */
    assert_int_equal(b.lane, 1);
    assert_int_equal(sched_complete(f.sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
    b = take(&f, &c); /* i0, i1 of lane 0: committed, never acked: come back */
    assert_int_equal(b.n, 2);
    assert_int_equal(store_flush(f.store), STORE_OK);
    disk_fixture_close(&f);

    store_recovery_t rep;
    disk_fixture_open(&f, dir, &rep);
    assert_true(rep.entries_live == 6 && rep.entries_tombstoned == 1);
    const lanes_t *l = sched_lanes_view(f.sched, sched_model_find(f.sched, "m"), 0xA);
    assert_non_null(l);
    lanes_lane_t lane;
    assert_int_equal(lanes_get(l, 0, &lane), SCHED_OK);
    assert_int_equal(lane.target, 104);
    assert_int_equal(lane.queued_items, 5);
    /* lane 1's only item completed: its segment and queue are gone, so it was not restored */
    assert_int_equal(lanes_get(l, 1, &lane), SCHED_EINVAL);
    assert_int_equal(lanes_in_use(l), 1);
    uint64_t cur = 0;
    assert_true(sched_current_shape(f.sched, sched_model_find(f.sched, "m"), &cur) && cur == 0xA);
    /* a new item reuses the free lane id 1, and the old items still come first, in order */
    sched_placement_t p = submit(&f, "m", 0xA, 9000);
    assert_true(p.opened && p.lane == 1);
    assert_int_equal(store_flush(f.store), STORE_OK);
    c = consumer(&f, "m", 8, 100000);
    b = take(&f, &c);
    assert_int_equal(b.lane, 1);
    b = take(&f, &c);
    assert_int_equal(b.n, 5);
    assert_true(id_is(&b.items_view[0], "i0") && id_is(&b.items_view[4], "i4"));
    /* The pending map is not persisted, the delivery count is (store_commit writes it). */
    assert_int_equal(b.items_view[0].deliveries, 1);
    assert_int_equal(b.items_view[2].deliveries, 0);
    disk_fixture_close(&f);
    fs_remove_tree(dir);
}

/* ---- the shape guard ---------------------------------------------------------------------- */

static sched_batch_t guard_batch(store_view_t *items, size_t n, uint64_t sig)
{
    return (sched_batch_t){
        .batch_id = 7, .model_view = "m", .signature = sig, .n = n, .items_view = items};
}

static void test_guard_passes_a_pure_batch(void **state)
{
    (void)state;
    store_view_t items[3] = {{.signature = 42}, {.signature = 42}, {.signature = 42}};
    sched_batch_t b = guard_batch(items, 3, 42);
    sched_guard_check(&b, 42); /* returning at all is the assertion */
    assert_int_equal(b.n, 3);
}

/* Runs the guard in a child so its abort is observed, not suffered. */
static int guard_dies(const sched_batch_t *b, uint64_t current)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)freopen("/dev/null", "w", stderr);
        sched_guard_check(b, current);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void test_guard_aborts_on_signature_mismatch(void **state)
{
    (void)state;
    store_view_t items[3] = {{.signature = 42}, {.signature = 43}, {.signature = 42}};
    sched_batch_t b = guard_batch(items, 3, 42);
    assert_true(guard_dies(&b, 42)); /* one foreign item */
    items[1].signature = 42;
    assert_false(guard_dies(&b, 42)); /* pure again: the child exits normally */
    assert_true(guard_dies(&b, 41));  /* pure, but not the model's current shape */
}

/* ---- property test ------------------------------------------------------------------------ */

enum { PT_QUEUED, PT_INFLIGHT, PT_DONE };

typedef struct {
    uint32_t tokens;
    uint32_t model;
    uint64_t sig;
    int state;
    int seen; /* scratch for the exactly-once check */
} pt_item_t;

typedef struct {
    uint64_t batch_id;
    uint32_t n;
    uint32_t *items; /* indexes into the item table, by position */
    uint8_t *settled;
} pt_batch_t;

static uint64_t pt_rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint32_t pt_item_index(const store_view_t *v)
{
    char buf[32];
    assert_true(v->id_len > 1 && v->id_len < sizeof(buf));
    memcpy(buf, v->id_view, v->id_len);
    buf[v->id_len] = '\0';
    return (uint32_t)strtoul(buf + 1, NULL, 10);
}

static const char *pt_models[] = {"llama", "qwen"};

/* Checks every invariant of the lanes against the item table kept by the test. */
static void pt_check(fixture_t *f, pt_item_t *items, uint32_t n_items, uint32_t max_lanes)
{
    uint64_t queued_tokens = 0, inflight_tokens = 0, done_tokens = 0;
    for (uint32_t i = 0; i < n_items; i++) {
        items[i].seen = 0;
        if (items[i].state == PT_QUEUED)
            queued_tokens += items[i].tokens;
        else if (items[i].state == PT_INFLIGHT)
            inflight_tokens += items[i].tokens;
        else
            done_tokens += items[i].tokens;
    }
    const sched_counters_t *k = sched_counters(f->sched);
    assert_true(k->tokens_received == queued_tokens + inflight_tokens + done_tokens);
    assert_true(k->tokens_completed == done_tokens);

    static store_view_t views[4096];
    uint64_t lanes_queued = 0;
    for (int m = 0; m < 2; m++) {
        for (uint64_t sig = 0; sig < 6; sig++) {
            const lanes_t *l =
                sched_lanes_view(f->sched, sched_model_find(f->sched, pt_models[m]), sig);
            if (l == NULL)
                continue;
            assert_true(lanes_in_use(l) <= max_lanes);
            for (uint32_t i = 1; i < lanes_sorted_count(l); i++) {
                lanes_lane_t a, b;
                lanes_get(l, lanes_sorted_lane(l, i - 1), &a);
                lanes_get(l, lanes_sorted_lane(l, i), &b);
                assert_true(a.target <= b.target);
            }
            lanes_queued += lanes_queued_tokens(l);
            lanes_lane_t lane;
            for (uint32_t id = 0; lanes_get(l, id, &lane) == SCHED_OK; id++) {
                if (lane.state == LANE_FREE)
                    continue;
                size_t n = 0;
                assert_int_equal(store_peek(f->store, lane.user, views, 4096, &n), STORE_OK);
                assert_int_equal(n, lane.queued_items);
                for (size_t v = 0; v < n; v++) {
                    uint32_t idx = pt_item_index(&views[v]);
                    assert_true(idx < n_items);
                    assert_int_equal(items[idx].state, PT_QUEUED);
                    assert_true(items[idx].sig == sig && items[idx].model == (uint32_t)m);
                    assert_true(views[v].tokens <= lane.target);
                    items[idx].seen++;
                }
            }
        }
    }
    assert_true(lanes_queued == queued_tokens);
    for (uint32_t i = 0; i < n_items; i++)
        assert_int_equal(items[i].seen, items[i].state == PT_QUEUED ? 1 : 0);
}

static uint32_t pt_length(uint64_t *rng)
{
    /* a spread of scales: short chat turns to long documents */
    uint32_t scale = (uint32_t[]){40, 300, 1500, 6000}[pt_rng(rng) % 4];
    return 1 + (uint32_t)(pt_rng(rng) % scale);
}

static void run_property(uint64_t seed, uint32_t max_lanes, uint32_t steps)
{
    fixture_t *f;
    setup_with_lanes((void **)&f, max_lanes);
    uint64_t rng = seed;
    uint32_t cap_items = steps + 1;
    pt_item_t *items = calloc(cap_items, sizeof(*items));
    pt_batch_t *batches = calloc(steps + 1, sizeof(*batches));
    assert_non_null(items);
    assert_non_null(batches);
    uint32_t n_items = 0, n_batches = 0;

    for (uint32_t step = 0; step < steps; step++) {
        uint64_t op = pt_rng(&rng) % 100;
        f->clock.now += pt_rng(&rng) % (SEC / 2);
        if (op < 55) {
            pt_item_t *it = &items[n_items];
            it->model = (uint32_t)(pt_rng(&rng) % 2);
            it->sig = pt_rng(&rng) % 6;
            it->tokens = pt_length(&rng);
            it->state = PT_QUEUED;
            f->next_id = n_items++;
            submit(f, pt_models[it->model], it->sig, it->tokens);
        } else if (op < 80) {
            uint32_t bs = 1 + (uint32_t)(pt_rng(&rng) % 32);
            uint32_t bt = 64 + (uint32_t)(pt_rng(&rng) % 16384);
            sched_consumer_t c = consumer(f, pt_models[pt_rng(&rng) % 2], bs, bt);
            sched_batch_t b;
            sched_status_t st = sched_fill(f->sched, &c, &b);
            if (st == SCHED_EEMPTY)
                continue;
            assert_int_equal(st, SCHED_OK);
            assert_true(b.n >= 1 && b.n <= bs);
            assert_true(b.padded_tokens <= bt || b.n == 1);
            pt_batch_t *pb = &batches[n_batches++];
            pb->batch_id = b.batch_id;
            pb->n = (uint32_t)b.n;
            pb->items = calloc(b.n, sizeof(uint32_t));
            pb->settled = calloc(b.n, 1);
            for (size_t i = 0; i < b.n; i++) {
                uint32_t idx = pt_item_index(&b.items_view[i]);
                assert_int_equal(items[idx].state, PT_QUEUED);
                assert_true(items[idx].sig == b.signature);
                assert_true(b.items_view[i].tokens <= b.pad_to);
                pb->items[i] = idx;
            }
            if (pt_rng(&rng) % 10 == 0) {
                pb->n = 0; /* the publish "failed": never committed */
                continue;
            }
            assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
            for (uint32_t i = 0; i < pb->n; i++)
                items[pb->items[i]].state = PT_INFLIGHT;
        } else if (op < 95 && n_batches > 0) {
            pt_batch_t *pb = &batches[pt_rng(&rng) % n_batches];
            if (pb->n == 0)
                continue;
            uint32_t pos = (uint32_t)(pt_rng(&rng) % pb->n);
            int ret = pt_rng(&rng) % 4 == 0;
            sched_settled_t moved = {0};
            sched_status_t st = ret ? sched_return(f->sched, pb->batch_id, &pos, 1, &moved)
                                    : sched_complete(f->sched, pb->batch_id, &pos, 1, &moved);
            int all_settled = 1;
            for (uint32_t i = 0; i < pb->n; i++)
                all_settled &= pb->settled[i];
            assert_int_equal(st, all_settled ? SCHED_EUNKNOWN : SCHED_OK);
            assert_int_equal(moved.positions, st == SCHED_OK && !pb->settled[pos] ? 1 : 0);
            if (st == SCHED_OK && !pb->settled[pos]) {
                pb->settled[pos] = 1;
                items[pb->items[pos]].state = ret ? PT_QUEUED : PT_DONE;
            }
        } else {
            sched_tick(f->sched);
        }
        pt_check(f, items, n_items, max_lanes ? max_lanes : LANES_MAX);
    }
    for (uint32_t i = 0; i < n_batches; i++) {
        free(batches[i].items);
        free(batches[i].settled);
    }
    free(batches);
    free(items);
    teardown((void **)&f);
}

static void test_property_random_streams_keep_every_invariant(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++)
        run_property(seed, 0, 1500);
}

static void test_property_holds_under_full_lane_pressure(void **state)
{
    (void)state;
    /* a budget of 4 lanes reaches force-fit within a few items per shape */
    for (uint64_t seed = 100; seed <= 105; seed++)
        run_property(seed, 4, 1500);
}

/* ---- scale -------------------------------------------------------------------------------- */

/* A producer that hashes whole prompts makes a shape per item. Once the items are done and the
 * lanes idle, the shapes and their store queues go (before: all 20,000 stayed, each with its
 * lanes and, on disk, its segment): memory is for the shapes in use. */
static void test_idle_shapes_are_reclaimed(void **state)
{
    fixture_t *f = *state;
    enum { N = 20000 };
    for (uint32_t i = 0; i < N; i++)
        submit(f, "m", 0x1000 + i, 100);
    sched_consumer_t c = consumer(f, "m", 32, 100000);
    for (uint32_t i = 0; i < N; i++) {
        sched_batch_t b = take(f, &c);
        assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
    }
    for (int t = 0; t < 7; t++) { /* past the lanes' quiesce idle time */
        f->clock.now += SEC;
        sched_tick(f->sched);
    }
    size_t shapes = 0;
    for (uint32_t i = 0; i < N; i++)
        shapes += sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 0x1000 + i) != NULL;
    assert_true(shapes <= 1); /* the model's current shape stays */
    size_t queues = 0;
    store_queue_t *q = NULL;
    while (store_queue_next(f->store, q, &q, NULL, NULL))
        queues++;
    assert_int_equal(queues, 0);
    submit(f, "m", 0x1000, 100); /* a shape seen before is simply new again */
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.signature, 0x1000);
    assert_true(sched_check(f->sched));
}

/* Seconds per batch to drain n one-item shapes (fill, commit, complete each). */
static double drain_per_batch(uint32_t n)
{
    fixture_t *f;
    setup((void **)&f);
    for (uint32_t i = 0; i < n; i++)
        submit(f, "m", 0x10000 + i, 100 + i % 64);
    sched_consumer_t c = consumer(f, "m", 32, 100000);
    struct timespec t0, t1; /* this thread's CPU time: other processes' turns do not count */
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (uint32_t i = 0; i < n; i++) {
        sched_batch_t b = take(f, &c);
        assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    teardown((void **)&f);
    return ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9) / n;
}

/* Every batch drains its shape, so every fill chooses a shape anew. A scan of every shape costs
 * in proportion to the shapes (ten times the shapes, over ten times the time per batch); the
 * heaps cost the log's growth and cache effects, a small factor (the measured ratios:
 * docs/bench.md, "Figures behind other constants"). The bound (6x) sits between the two by a
 * factor of about 3 each way; CPU time, and the best of five runs of each size, keep a busy
 * machine from deciding. */
static void test_choosing_a_shape_does_not_scan_every_shape(void **state)
{
    (void)state;
    enum { SMALL = 2000, LARGE = 20000 };
    double small = 1e9, large = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double s = drain_per_batch(SMALL), l = drain_per_batch(LARGE);
        small = s < small ? s : small;
        large = l < large ? l : large;
    }
    print_message("per batch: %.2f us with %d shapes, %.2f us with %d (%.1fx)\n", small * 1e6,
                  SMALL, large * 1e6, LARGE, large / small);
    assert_true(large / small < 6.0);
}

/* ---- executable invariants ------------------------------------------------------------------ */

/* An item put into a lane's queue behind the scheduler's back breaks conservation and the
 * lanes/store agreement: sched_check sees it, and a debug build aborts at the next operation. */
static void test_check_catches_an_item_behind_the_schedulers_back(void **state)
{
    fixture_t *f = *state;
    sched_placement_t p = submit(f, "m", 42, 100);
    assert_true(sched_check(f->sched));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)freopen("/dev/null", "w", stderr);
        store_queue_t *q = NULL;
        store_key_t key = {"m", 42, p.lane};
        store_item_t extra = {.id = (const uint8_t *)"x", .id_len = 1, .tokens = 50};
        if (store_queue_open(f->store, &key, &q) != STORE_OK ||
            store_append(f->store, q, &extra, NULL) != STORE_OK)
            _exit(4);
        int held = sched_check(f->sched);
        sched_tick(f->sched); /* debug builds abort here */
        _exit(held ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (INVARIANTS_CHECKED)
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    else
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    assert_true(sched_check(f->sched));
}

static void test_batch_check_holds_the_contract(void **state)
{
    (void)state;
    store_view_t items[3] = {{.signature = 9, .tokens = 100},
                             {.signature = 9, .tokens = 120},
                             {.signature = 9, .tokens = 90}};
    packer_contract_t k = {3, 1000, 0};
    sched_batch_t b = {.batch_id = 1,
                       .signature = 9,
                       .pad_to = 120,
                       .padded_tokens = 360,
                       .real_tokens = 310,
                       .n = 3,
                       .items_view = items};
    assert_true(sched_batch_check(&b, &k));
    k.max_batch_size = 2; /* more items than the contract allows */
    assert_false(sched_batch_check(&b, &k));
    k = (packer_contract_t){3, 359, 0}; /* more padded tokens than the budget */
    assert_false(sched_batch_check(&b, &k));
    k = (packer_contract_t){3, 1000, 0};
    b.pad_to = 128; /* not the longest item rounded up to 8 */
    b.padded_tokens = 384;
    assert_false(sched_batch_check(&b, &k));
    b.pad_to = 120;
    b.padded_tokens = 360;
    items[2].signature = 10; /* a foreign shape */
    assert_false(sched_batch_check(&b, &k));
    items[2].signature = 9;
    b.n = 1; /* one item alone may exceed the budget */
    b.pad_to = 104;
    b.padded_tokens = 104;
    b.real_tokens = 100;
    k.max_batch_tokens = 50;
    assert_true(sched_batch_check(&b, &k));
}

/* A contract at the caps grows the fill scratch to the batch's size once;
 * the next tick gives it back, and the counts stay what the scheduler reports. */
static void test_a_large_batch_s_scratch_is_released_at_the_tick(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 5000; i++)
        submit(f, "m", 0xB, 8);
    sched_consumer_t c = consumer(f, "m", 4096, 4194304);
    sched_batch_t b = take(f, &c);
    assert_int_equal(b.n, 4096);
    assert_true(sched_scratch_entries(f->sched) >= 4096);
    sched_tick(f->sched);
    assert_true(sched_scratch_entries(f->sched) <= 256);
    assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
    b = take(f, &c); /* and a later fill still works */
    assert_int_equal(b.n, 5000 - 4096);
    assert_int_equal(sched_model_count(f->sched), 1);
    assert_int_equal(shape_count(f->sched, "m"), 1);
    assert_int_equal(sched_shape_count(f->sched, NULL), 1);
    assert_int_equal(shape_count(f->sched, "other"), 0);
}

/* ---- models and batch records ------------------------------------------------------------- */

/* A name is interned once: every open and find gives the same handle; a model neither in use
 * nor referenced gives its place (and index) to the next new name, one referenced keeps it. */
static void test_models_are_interned_once_and_their_place_is_reused(void **state)
{
    fixture_t *f = *state;
    sched_model_t *a = NULL, *a2 = NULL, *b = NULL;
    assert_int_equal(sched_model_open(f->sched, "a", &a), SCHED_OK);
    assert_int_equal(sched_model_open(f->sched, "a", &a2), SCHED_OK);
    assert_ptr_equal(a, a2);
    assert_ptr_equal(sched_model_find(f->sched, "a"), a);
    assert_null(sched_model_find(f->sched, "b"));
    assert_string_equal(sched_model_name(a), "a");
    assert_false(sched_model_in_use(a));
    assert_int_equal(sched_model_count(f->sched), 0);
    sched_model_close(f->sched, a);
    assert_int_equal(sched_model_open(f->sched, "b", &b), SCHED_OK); /* "a" is still referenced */
    assert_ptr_not_equal(a, b);
    sched_model_close(f->sched, a2);
    sched_model_close(f->sched, b);
    sched_model_t *c = NULL;
    assert_int_equal(sched_model_open(f->sched, "c", &c), SCHED_OK);
    assert_ptr_equal(c, a); /* the first place free: a's */
    assert_null(sched_model_find(f->sched, "a"));
    assert_string_equal(sched_model_name(c), "c");
    submit(f, "c", 1, 10); /* in use now: shapes */
    sched_model_close(f->sched, c);
    assert_true(sched_model_in_use(c));
    assert_int_equal(sched_model_count(f->sched), 1);
    sched_model_t *d = NULL;
    assert_int_equal(sched_model_open(f->sched, "d", &d), SCHED_OK);
    assert_ptr_equal(d, b); /* b's place, not c's: c holds a shape */
    assert_int_equal(sched_model_open(f->sched, "", &d), SCHED_EINVAL);
    assert_true(sched_check(f->sched));
}

/* A model whose items were all served and that nothing references any more is freed by the
 * tick, its last (current) shape with it, and its place goes to the next name: producers that
 * make up model names leave nothing behind once their items are done (model.c invariant 3). */
static void test_a_served_model_is_freed_once_idle(void **state)
{
    fixture_t *f = *state;
    sched_model_t *x = NULL;
    assert_int_equal(sched_model_open(f->sched, "x", &x), SCHED_OK);
    submit(f, "x", 1, 10);
    submit(f, "x", 2, 10);
    sched_consumer_t c = consumer(f, "x", 8, 100000);
    for (int i = 0; i < 2; i++) {
        sched_batch_t b = take(f, &c);
        assert_int_equal(sched_complete(f->sched, b.batch_id, NULL, 0, NULL), SCHED_OK);
    }
    sched_model_close(f->sched, x);
    f->clock.now += 6 * SEC; /* past the lanes' idle time */
    sched_tick(f->sched);
    assert_false(sched_model_in_use(x));
    assert_int_equal(sched_model_count(f->sched), 0);
    sched_model_t *y = NULL;
    assert_int_equal(sched_model_open(f->sched, "y", &y), SCHED_OK);
    assert_ptr_equal(y, x); /* x's place */
    submit(f, "y", 1, 10);  /* the place serves again */
    sched_consumer_t cy = consumer(f, "y", 8, 100000);
    assert_int_equal(take(f, &cy).n, 1);
    sched_model_close(f->sched, y);
    assert_true(sched_check(f->sched));
}

/* The batch's one record: its holder lists it, its deadline is kept, and it leaves the list
 * when its last position settles (or when its holder goes). */
static void test_a_batch_record_carries_holder_and_deadline(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 4; i++)
        submit(f, "m", 1, 100);
    sched_worker_t *w = NULL;
    sched_worker_config_t wc = {0};
    assert_int_equal(sched_worker_create(f->sched, M(f->sched, "m"), &wc, &w), SCHED_OK);
    sched_consumer_t c = consumer(f, "m", 2, 100000);
    c.worker = w;
    uint64_t a = take(f, &c).batch_id, b = take(f, &c).batch_id;
    assert_int_equal(sched_worker_batches(w), 2);
    uint64_t id = 0;
    assert_true(sched_worker_batch_newest(w, &id) && id == b);
    sched_batch_info_t info;
    assert_true(sched_batch_info(f->sched, a, &info));
    assert_true(info.worker == w && info.positions == 2 && info.unsettled == 2 &&
                info.deadline_ns == 0);
    assert_false(sched_worker_batch_expired(w, UINT64_MAX, &id)); /* no deadline set */
    assert_int_equal(sched_batch_deadline_set(f->sched, a, 500), SCHED_OK);
    assert_int_equal(sched_batch_deadline_set(f->sched, b, 300), SCHED_OK);
    assert_int_equal(sched_batch_deadline_set(f->sched, b + 99, 1), SCHED_EUNKNOWN);
    assert_true(sched_worker_deadline_next(w, UINT64_MAX) == 300);
    assert_true(sched_worker_deadline_next(w, 100) == 100);
    assert_false(sched_worker_batch_expired(w, 299, &id));
    assert_true(sched_worker_batch_expired(w, 300, &id) && id == b);
    uint32_t pos = 0;
    sched_settled_t st;
    assert_int_equal(sched_complete(f->sched, b, &pos, 1, &st), SCHED_OK);
    assert_int_equal(sched_worker_batches(w), 2); /* one position left */
    assert_int_equal(sched_return(f->sched, b, NULL, 0, &st), SCHED_OK);
    assert_true(st.closed && st.positions == 1);
    assert_int_equal(sched_worker_batches(w), 1);
    assert_false(sched_batch_info(f->sched, b, &info));
    assert_true(sched_worker_batch_newest(w, &id) && id == a);
    sched_worker_destroy(f->sched, w); /* a stays in flight, without a holder */
    assert_true(sched_batch_info(f->sched, a, &info) && info.worker == NULL);
    assert_true(sched_check(f->sched));
    assert_int_equal(sched_complete(f->sched, a, NULL, 0, &st), SCHED_OK);
    assert_true(st.closed && st.items == 2 && st.tokens == 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_items_of_different_shapes_never_share_a_lane_queue,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_sticky_selection_stays_on_current_shape, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_switches_to_shape_with_most_tokens_when_current_is_dry,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tries_lanes_in_descending_queued_tokens, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_overflow_stays_at_front_in_arrival_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_batch_respects_padded_token_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uncommitted_fill_leaves_items_queued, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_of_stale_fill_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fill_on_model_without_work_is_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_twice_is_harmless_and_counted_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ack_for_unknown_batch_or_position_changes_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_returned_items_go_back_to_front_in_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_quiesced_lane_is_released_after_drain, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tokens_received_equal_tokens_completed_after_drain,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_rejects_invalid_items, setup, teardown),
        cmocka_unit_test(test_starvation_bound_preempts_sticky_shape_at_batch_boundary),
        cmocka_unit_test_setup_teardown(
            test_starvation_bound_serves_starved_lane_within_current_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_starvation_preemption_serves_the_starved_item_not_the_fullest_lane, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_starvation_bound_finds_the_oldest_lane_among_many,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_without_starvation_bound_small_lane_waits_for_bigger_lanes, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_without_starvation_bound_sticky_shape_is_never_preempted, setup, teardown),
        cmocka_unit_test(test_restart_restores_lanes_targets_and_current_shape),
        cmocka_unit_test(test_restart_lane_target_is_its_longest_held_item),
        cmocka_unit_test(test_guard_passes_a_pure_batch),
        cmocka_unit_test(test_guard_aborts_on_signature_mismatch),
        cmocka_unit_test_setup_teardown(test_idle_shapes_are_reclaimed, setup, teardown),
        cmocka_unit_test(test_choosing_a_shape_does_not_scan_every_shape),
        cmocka_unit_test(test_property_random_streams_keep_every_invariant),
        cmocka_unit_test(test_property_holds_under_full_lane_pressure),
        cmocka_unit_test_setup_teardown(test_check_catches_an_item_behind_the_schedulers_back,
                                        setup, teardown),
        cmocka_unit_test(test_batch_check_holds_the_contract),
        cmocka_unit_test_setup_teardown(test_a_large_batch_s_scratch_is_released_at_the_tick, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_served_model_is_freed_once_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_models_are_interned_once_and_their_place_is_reused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_batch_record_carries_holder_and_deadline, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
