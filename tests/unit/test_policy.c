/*
 * test_policy.c - the `lanes` policy's rules in the core: cost-aware merging of neighbouring
 * lanes (extend.c), cache affinity (select.c invariant 5), the shape heaps (heap.c), idle shapes
 * reclaimed, and a seeded property test of random streams under the policy with workers (the
 * scheduler's own checks after every step). The scale regressions (reclaim, O(log)
 * choice) are in test_sched.c, written against the scheduler's older interface so they build
 * and fail on the scheduler before them.
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
#include "support/fs.h"
#include "tests/unit/faulty_store_int.h"
#include "tests/unit/sched_test_int.h"

typedef sched_fx_t fixture_t;

static fixture_t *fixture(sched_policy_t policy, uint64_t bound_ns)
{
    sched_config_t cfg = {.policy = policy, .starvation_ns = bound_ns};
    return sched_fx_create(cfg, NULL);
}

static void fixture_free(fixture_t *f)
{
    sched_fx_free(f);
}

static void submit(fixture_t *f, const char *model, uint64_t sig, uint32_t tokens)
{
    char id[24];
    int len = snprintf(id, sizeof(id), "i%u", f->next_id++);
    sched_item_t it = {
        M(f->sched, model), sig, tokens, (const uint8_t *)id, (size_t)len, NULL, 0, 0, 0};
    assert_int_equal(sched_submit(f->sched, &it, NULL), SCHED_OK);
}

/* A worker of model m declaring 5 ms per batch and 10 us per padded token: with the default
 * merge credit a merge may add up to 5 ms * credit / 10 us of padding. */
static sched_worker_t *worker(fixture_t *f, const char *model, uint32_t cache)
{
    sched_worker_t *w = NULL;
    sched_worker_config_t wc = {5000, 10000, cache};
    assert_int_equal(sched_worker_create(f->sched, M(f->sched, model), &wc, &w), SCHED_OK);
    return w;
}

static uint64_t take(fixture_t *f, const sched_consumer_t *c, sched_batch_t *out)
{
    assert_int_equal(sched_fill(f->sched, c, out), SCHED_OK);
    uint64_t id = out->batch_id;
    assert_int_equal(sched_commit(f->sched, out), SCHED_OK);
    return id;
}

static uint32_t credit_tokens(void)
{
    return (uint32_t)(5e6 * SCHED_MERGE_CREDIT_DEFAULT / 1e4);
}

/* ---- cost-aware merging --------------------------------------------------------------------- */

/* Two lanes a few tokens apart: the lanes policy sends them as one batch, padded to the longest
 * item; the article's policy, or a consumer the core has no worker for, sends two. */
static void test_neighbouring_lane_merges_when_it_pays(void **state)
{
    (void)state;
    uint32_t gap = credit_tokens() / 2 > 16 ? credit_tokens() / 2 : 17; /* a lane of its own */
    for (int variant = 0; variant < 3; variant++) {
        fixture_t *f = fixture(variant == 1 ? SCHED_POLICY_SEED : SCHED_POLICY_LANES, 0);
        sched_worker_t *w = worker(f, "m", 1);
        submit(f, "m", 1, 1000);
        submit(f, "m", 1, 1000);
        submit(f, "m", 1, 1000 - gap);
        const lanes_t *l = sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 1);
        assert_int_equal(lanes_in_use(l), 2);
        sched_consumer_t c = {M(f->sched, "m"), {32, 100000, 0}, variant == 2 ? NULL : w};
        sched_batch_t b;
        take(f, &c, &b);
        if (variant == 0) {
            assert_int_equal(b.n, 3);
            assert_int_equal(b.lanes, 2);
            assert_int_equal(b.pad_to, 1000);
            assert_int_equal(sched_counters(f->sched)->merged_batches, 1);
        } else {
            assert_int_equal(b.n, 2);
            assert_int_equal(b.lanes, 1);
        }
        assert_true(sched_check(f->sched));
        fixture_free(f);
    }
}

/* A batch merged from several lanes carries each item's own id and payload whatever the store
 * peeks into (extend.c invariant 3): the memory store's items and the disk store's mappings,
 * which outlive the peeks and are not copied, and its read buffer without mappings
 * (STORE_IO_PLAIN), which the next lane's peek reuses, so that its views are copied into the
 * scheduler's arena, which moves as it grows past its first 4 KiB. */
static void test_merged_batch_keeps_every_payload(void **state)
{
    (void)state;
    enum { LANES = 2, PER_LANE = 2, PAYLOAD = 1500 };
    for (int variant = 0; variant < 3; variant++) {
        char dir[] = "/tmp/lanesched-policy-XXXXXX";
        fixture_t *f = fixture(SCHED_POLICY_LANES, 0);
        if (variant != 0) { /* the same fixture over a disk store */
            sched_destroy(f->sched);
            store_close(f->store);
            assert_non_null(mkdtemp(dir));
            store_disk_config_t dc = {.dir = dir,
                                      .io = variant == 1 ? STORE_IO_AUTO : STORE_IO_PLAIN};
            assert_int_equal(store_open_disk(&dc, NULL, &f->store), STORE_OK);
            sched_config_t cfg = {
                .clock = sched_test_now, .clock_ctx = &f->now, .policy = SCHED_POLICY_LANES};
            assert_int_equal(sched_create(&cfg, f->store, &f->sched), SCHED_OK);
        }
        sched_worker_t *w = worker(f, "m", 1);
        static uint8_t payload[LANES * PER_LANE][PAYLOAD];
        uint32_t gap = credit_tokens() / 8 > 16 ? credit_tokens() / 8 : 17; /* lanes of their own */
        for (int i = 0; i < LANES * PER_LANE; i++) {
            char id[24];
            int len = snprintf(id, sizeof(id), "item-%d", i);
            memset(payload[i], 'a' + i, PAYLOAD);
            sched_item_t it = {M(f->sched, "m"),
                               1,
                               1000 - (uint32_t)(i / PER_LANE) * gap,
                               (const uint8_t *)id,
                               (size_t)len,
                               payload[i],
                               PAYLOAD,
                               0,
                               0};
            assert_int_equal(sched_submit(f->sched, &it, NULL), SCHED_OK);
        }
        assert_int_equal(store_flush(f->store), STORE_OK);
        const lanes_t *l = sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 1);
        assert_int_equal(lanes_in_use(l), LANES);
        sched_consumer_t c = {M(f->sched, "m"), {64, 1000000, 0}, w};
        sched_batch_t b;
        assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_OK); /* views valid until commit */
        assert_int_equal(b.n, LANES * PER_LANE);
        assert_int_equal(b.lanes, LANES);
        uint64_t copied = sched_counters(f->sched)->fill_copied_bytes;
        if (variant == 2)
            assert_true(copied >= (uint64_t)LANES * PER_LANE * PAYLOAD);
        else
            assert_int_equal(copied, 0);
        int seen[LANES * PER_LANE] = {0};
        for (size_t k = 0; k < b.n; k++) {
            const store_view_t *v = &b.items_view[k];
            int i = -1;
            char id[24];
            assert_true(v->id_len < sizeof(id));
            memcpy(id, v->id_view, v->id_len);
            id[v->id_len] = '\0';
            assert_int_equal(sscanf(id, "item-%d", &i), 1);
            assert_true(i >= 0 && i < LANES * PER_LANE && !seen[i]);
            seen[i] = 1;
            assert_int_equal(v->payload_len, PAYLOAD);
            assert_memory_equal(v->payload_view, payload[i], PAYLOAD);
        }
        assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
        fixture_free(f);
        if (variant != 0)
            assert_int_equal(fs_remove_tree(dir), 0);
    }
}

static void test_lane_too_far_away_is_not_merged(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, 0);
    sched_worker_t *w = worker(f, "m", 1);
    submit(f, "m", 1, 1000);
    submit(f, "m", 1, 1000 - 2 * credit_tokens() - 8); /* pads by more than the credit */
    sched_consumer_t c = {M(f->sched, "m"), {32, 100000, 0}, w};
    sched_batch_t b;
    take(f, &c, &b);
    assert_int_equal(b.n, 1);
    assert_int_equal(sched_counters(f->sched)->merged_batches, 0);
    fixture_free(f);
}

static void test_merge_respects_the_contract(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_LANES, 0);
    sched_worker_t *w = worker(f, "m", 1);
    submit(f, "m", 1, 1000);
    submit(f, "m", 1, 1000);
    submit(f, "m", 1, 980);
    sched_consumer_t c = {M(f->sched, "m"), {2, 100000, 0}, w}; /* two items at most */
    sched_batch_t b;
    take(f, &c, &b);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.lanes, 1);
    sched_consumer_t tight = {M(f->sched, "m"), {32, 1500, 0}, w}; /* a budget below two items */
    take(f, &tight, &b);
    assert_int_equal(b.n, 1);
    assert_true(sched_batch_check(&b, &tight.contract));
    fixture_free(f);
}

/* Two items of 1,000 tokens and one of 980 (20 tokens short: a lane of its own) of one shape, and
 * a consumer with a worker: the lanes policy sends the three as one batch of two lanes. */
static fixture_t *merged_fixture(sched_consumer_t *out_c)
{
    fixture_t *f = fixture(SCHED_POLICY_LANES, 0);
    sched_worker_t *w = worker(f, "m", 1);
    submit(f, "m", 1, 1000);
    submit(f, "m", 1, 1000);
    submit(f, "m", 1, 980);
    *out_c = (sched_consumer_t){M(f->sched, "m"), {32, 100000, 0}, w};
    return f;
}

/* A merged batch's items settle against their own lanes: returned, each goes back to the front
 * of its own lane in order; completed, every lane drains. */
static void test_merged_batch_returns_to_its_own_lanes(void **state)
{
    (void)state;
    sched_consumer_t c;
    fixture_t *f = merged_fixture(&c);
    sched_batch_t b;
    uint64_t id = take(f, &c, &b);
    assert_int_equal(b.lanes, 2);
    sched_settled_t returned = {0};
    assert_int_equal(sched_return(f->sched, id, NULL, 0, &returned), SCHED_OK);
    assert_int_equal(returned.positions, 3);
    assert_true(sched_check(f->sched));
    const lanes_t *l = sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 1);
    assert_int_equal(lanes_queued_items(l), 3);
    id = take(f, &c, &b);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.items_view[0].deliveries, 1);
    assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
    assert_int_equal(lanes_queued_items(l), 0);
    assert_int_equal(sched_counters(f->sched)->tokens_completed, 2980);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* sched.c invariant 8: a merged batch whose second lane fails to commit, and whose first lane
 * then fails to go back, leaves that lane's items in flight under the batch's id with no holder
 * (not pending in the store with no record: lost until a restart), and the caller's return puts
 * them back in order. */
static void test_a_merged_batch_that_cannot_be_put_back_stays_in_flight(void **state)
{
    (void)state;
    sched_consumer_t c;
    fixture_t *f = merged_fixture(&c);
    faulty_store_install(f->store, 2, 1); /* the second lane's commit, the first's put-back */
    sched_batch_t b;
    assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_OK);
    assert_int_equal(b.lanes, 2);
    uint64_t id = b.batch_id;
    uint32_t first = 1; /* the first lane's run: its items share their length */
    while (first < b.n && b.items_view[first].tokens == b.items_view[0].tokens)
        first++;
    uint64_t first_tokens = (uint64_t)first * b.items_view[0].tokens;
    assert_int_equal(sched_commit(f->sched, &b), SCHED_ESTORE);
    assert_int_equal(faulty.commit_calls, 2);
    assert_int_equal(faulty.ret_fails, 0);
    assert_true(sched_batch_pending(f->sched, id));
    sched_batch_info_t in;
    assert_true(sched_batch_info(f->sched, id, &in));
    assert_null(in.worker); /* no worker's ack settles it */
    assert_int_equal(in.positions, first);
    assert_int_equal(in.unsettled, first);
    /* counted routed, as the store counted their delivery */
    assert_int_equal(sched_counters(f->sched)->items_routed, first);
    assert_int_equal(sched_counters(f->sched)->tokens_routed, first_tokens);
    const lanes_t *l = sched_lanes_view(f->sched, sched_model_find(f->sched, "m"), 1);
    assert_int_equal(lanes_queued_items(l), 3 - first);
    uint64_t items = 0, tokens = 0;
    sched_inflight(f->sched, &items, &tokens);
    assert_int_equal(items, first);
    assert_true(sched_check(f->sched)); /* received = queued + in flight + completed */

    sched_settled_t r = {0};
    assert_int_equal(sched_return(f->sched, id, NULL, 0, &r), SCHED_OK);
    assert_int_equal(r.positions, first);
    assert_true(r.closed);
    assert_false(sched_batch_pending(f->sched, id));
    assert_int_equal(lanes_queued_items(l), 3);
    assert_true(sched_check(f->sched));
    faulty_store_remove(f->store);
    id = take(f, &c, &b); /* the whole batch again, its lanes in their order */
    assert_int_equal(b.n, 3);
    assert_int_equal(b.lanes, 2);
    assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
    assert_int_equal(lanes_queued_items(l), 0);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* ---- cache affinity ------------------------------------------------------------------------- */

/* Three shapes, two workers caching `cache` shapes each: each worker stays on the shape it has
 * warm even when another holds more work, where the article's rule sends both to one shape. */
static void workers_keep_to_their_warm_shapes(uint32_t cache)
{
    fixture_t *f = fixture(SCHED_POLICY_LANES, 20 * MS);
    sched_worker_t *w1 = worker(f, "m", cache), *w2 = worker(f, "m", cache);
    sched_consumer_t c1 = {M(f->sched, "m"), {1, 100000, 0}, w1},
                     c2 = {M(f->sched, "m"), {1, 100000, 0}, w2};
    for (int i = 0; i < 3; i++) {
        submit(f, "m", 0xA, 5000);
        submit(f, "m", 0xB, 4000);
        submit(f, "m", 0xC, 3000);
    }
    sched_batch_t b;
    take(f, &c1, &b);
    uint64_t s1 = b.signature;
    take(f, &c2, &b);
    uint64_t s2 = b.signature;
    assert_true(s1 != s2); /* the second took a shape nobody had warm */
    for (int i = 0; i < 4; i++)
        submit(f, "m", 0xC, 8000); /* C now holds the most tokens */
    take(f, &c1, &b);
    assert_true(b.signature == s1);
    take(f, &c2, &b);
    assert_true(b.signature == s2);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* Caches of one shape: the three shapes outnumber them. */
static void test_workers_keep_to_their_warm_shapes(void **state)
{
    (void)state;
    workers_keep_to_their_warm_shapes(1);
}

/* Caches that hold every shape: a shape is still warm only where it was served. With more
 * active shapes than workers, each worker keeps to what it has warm instead of all following the
 * shape with the most tokens, which would cost the other a miss at each switch. */
static void test_large_caches_keep_workers_on_their_warm_shapes(void **state)
{
    (void)state;
    workers_keep_to_their_warm_shapes(4);
}

/* A fixture and its consumer *c, whose worker caches one shape: shapes A, B, C of 100 tokens at
 * one instant, then A alone every 100 ms until 500 ms later, each taken at once (warm on A): the
 * model's mean gap is 100 ms. At 501 ms A is dry and B and C are cold and smaller than a batch:
 * the fill waits. */
static fixture_t *cold_fixture(sched_consumer_t *c)
{
    fixture_t *f = fixture(SCHED_POLICY_LANES, 20 * MS);
    *c = (sched_consumer_t){M(f->sched, "m"), {8, 16384, 0}, worker(f, "m", 1)};
    submit(f, "m", 0xA, 100);
    submit(f, "m", 0xB, 100);
    submit(f, "m", 0xC, 100);
    sched_batch_t b;
    take(f, c, &b); /* warm on A (the tie goes to the shape seen first) */
    assert_int_equal(b.signature, 0xA);
    for (int k = 1; k <= 5; k++) {
        f->now = SEC + (uint64_t)k * 100 * MS;
        submit(f, "m", 0xA, 100);
        take(f, c, &b);
        assert_int_equal(b.signature, 0xA);
    }
    f->now = SEC + 501 * MS;
    assert_int_equal(sched_fill(f->sched, c, &b), SCHED_EEMPTY); /* B and C: cold and small */
    return f;
}

/* A worker whose warm shapes are dry does not miss on a cold queue smaller than a batch while
 * the model's arrivals go on: it waits (sched_retry_ns says until when) and takes it when its
 * oldest item reaches the cold bound, or within one mean gap of it, once the next arrival is
 * expected past the bound. A queue that fills a batch is taken at once. */
static void test_worker_waits_for_warm_work_before_a_small_cold_queue(void **state)
{
    (void)state;
    sched_consumer_t c;
    fixture_t *f = cold_fixture(&c);
    sched_batch_t b;
    assert_true(sched_retry_ns(f->sched) <= SEC + SEC + 1);
    for (int k = 6; k <= 9; k++) { /* A keeps coming, and the worker keeps to it */
        f->now = SEC + (uint64_t)k * 100 * MS;
        submit(f, "m", 0xA, 100);
        take(f, &c, &b);
        assert_int_equal(b.signature, 0xA);
        f->now += MS;
        if (k < 9) { /* the next arrival expected by the cold bound, 1 s after B's */
            assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_EEMPTY);
            assert_true(sched_retry_ns(f->sched) <= SEC + SEC + 1);
        }
    }
    take(f, &c, &b); /* at 901 ms the next arrival is expected at 1,001 ms, past the bound */
    assert_int_equal(b.signature, 0xB);
    fixture_free(f);

    /* a cold queue that fills the budget goes at once */
    f = fixture(SCHED_POLICY_LANES, 20 * MS);
    c.worker = worker(f, "m", 1);
    c.model = M(f->sched, "m");
    submit(f, "m", 0xA, 100);
    submit(f, "m", 0xB, 100);
    take(f, &c, &b);
    for (int i = 0; i < 3; i++)
        submit(f, "m", 0xD, 8000);
    f->now += MS;
    take(f, &c, &b);
    assert_int_equal(b.signature, 0xD);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* The same cold queue once the model's arrivals stop: waiting brings neither company nor warm
 * work, so it goes when the silence reaches the time left to the cold bound, not at the bound.
 * The worker is asked again then: halfway from the last arrival to the bound. */
static void test_a_small_cold_queue_goes_once_the_model_is_quiet(void **state)
{
    (void)state;
    sched_consumer_t c;
    fixture_t *f = cold_fixture(&c);
    sched_batch_t b;
    uint64_t quiet = SEC + 500 * MS + (SEC - 500 * MS) / 2 + 1;
    assert_int_equal(sched_retry_ns(f->sched), quiet);
    f->now = quiet - 1; /* silence 250 ms: an arrival is still expected by the bound */
    assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_EEMPTY);
    f->now = quiet;
    take(f, &c, &b);
    assert_int_equal(b.signature, 0xB);
    assert_true(sched_check(f->sched));
    fixture_free(f);
}

/* ---- waits ---------------------------------------------------------------------------------- */

/* Items committed after waits of 1..1000 ms: the quantiles read within 12.5% above the true
 * waits, never below, and the longest exactly. */
static void test_wait_quantiles_are_read_within_an_eighth(void **state)
{
    (void)state;
    fixture_t *f = fixture(SCHED_POLICY_SEED, 0);
    assert_int_equal(sched_wait_quantile_ns(f->sched, 0.5), 0);
    sched_consumer_t c = {M(f->sched, "m"), {1, 100000, 0}, NULL};
    for (uint32_t i = 1; i <= 1000; i++) {
        submit(f, "m", 1, 100);
        f->now += i * MS;
        sched_batch_t b;
        uint64_t id = take(f, &c, &b);
        assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
    }
    static const double qs[] = {0.5, 0.9, 0.99};
    for (size_t k = 0; k < 3; k++) {
        double truth = (1.0 + qs[k] * 999.0) * MS;
        double got = (double)sched_wait_quantile_ns(f->sched, qs[k]);
        assert_true(got >= truth && got <= truth * 1.125);
    }
    assert_int_equal(sched_wait_quantile_ns(f->sched, 1.0), 1000 * MS);
    fixture_free(f);
}

/* ---- quiescing ---------------------------------------------------------------------------- */

/* A lane with no arrival for 5 s whose item still queues (its items wait longer than that): the
 * lanes policy keeps it taking items, so the next item of its length rides in the batch its item
 * waits for; the article's rule quiesces it and the next item opens a lane of its own, a batch
 * apart. Once nothing of it queues, the lanes policy quiesces it too and its id comes back (here
 * with its shape, whose model has no worker). */
static void test_lane_whose_items_queue_keeps_taking_items(void **state)
{
    (void)state;
    for (int seed_policy = 0; seed_policy < 2; seed_policy++) {
        fixture_t *f = fixture(seed_policy ? SCHED_POLICY_SEED : SCHED_POLICY_LANES, 0);
        const lanes_t *l = NULL;
        submit(f, "m", 1, 1000);
        f->now = 7 * SEC;
        sched_tick(f->sched);
        assert_true(sched_counters(f->sched)->lanes_quiesced == (uint64_t)seed_policy);
        submit(f, "m", 1, 1000);
        l = sched_lanes_view(f->sched, M(f->sched, "m"), 1);
        assert_int_equal(lanes_in_use(l), 1 + seed_policy);
        sched_consumer_t c = {M(f->sched, "m"), {64, 100000, 0}, NULL};
        sched_batch_t b;
        uint64_t id = take(f, &c, &b);
        assert_int_equal(b.n, seed_policy ? 1 : 2);
        assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
        if (seed_policy) { /* the quiescing lane's item still goes, and then its id */
            id = take(f, &c, &b);
            assert_int_equal(b.n, 1);
            assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
            f->now = 12 * SEC;
            sched_tick(f->sched);
            /* released, and the shape with it: its model has no worker (shapes.c invariant 2) */
            assert_null(sched_lanes_view(f->sched, M(f->sched, "m"), 1));
        } else {
            f->now = 11 * SEC; /* empty, but 4 s since its last arrival */
            sched_tick(f->sched);
            assert_int_equal(lanes_in_use(l), 1);
            f->now = 12 * SEC;
            sched_tick(f->sched);
            assert_true(sched_counters(f->sched)->lanes_quiesced == 1);
            /* quiesced and, drained, released: the shape goes with it (no worker) */
            assert_null(sched_lanes_view(f->sched, M(f->sched, "m"), 1));
        }
        fixture_free(f);
    }
}

/* ---- property: random streams under the policy ---------------------------------------------- */

static uint64_t pt_rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    uint64_t id;
    uint32_t n;
} pt_batch_t;

/* Submits, fills by workers of random caches (and consumers without one), commits most,
 * completes or returns them at random, ticks: the scheduler's own checks (sched_check after
 * every step, sched_batch_check on every batch) and its conservation must hold throughout, and
 * everything must drain at the end. */
static void run_property(uint64_t seed, uint32_t steps)
{
    fixture_t *f = fixture(SCHED_POLICY_LANES, 50 * MS);
    uint64_t rng = seed;
    static const char *models[] = {"a", "b"};
    sched_worker_t *ws[4];
    for (int i = 0; i < 4; i++)
        ws[i] = worker(f, models[i % 2], 1 + (uint32_t)(pt_rng(&rng) % 3));
    pt_batch_t *open = calloc(steps + 1, sizeof(*open));
    assert_non_null(open);
    size_t n_open = 0;
    for (uint32_t step = 0; step < steps; step++) {
        f->now += pt_rng(&rng) % (100 * MS);
        uint64_t op = pt_rng(&rng) % 100;
        if (op < 50) {
            uint32_t scale = (uint32_t[]){40, 300, 1500, 6000}[pt_rng(&rng) % 4];
            submit(f, models[pt_rng(&rng) % 2], 1 + pt_rng(&rng) % 7,
                   1 + (uint32_t)(pt_rng(&rng) % scale));
        } else if (op < 80) {
            int k = (int)(pt_rng(&rng) % 5);
            sched_consumer_t c = {
                M(f->sched, models[k % 2]),
                {1 + (uint32_t)(pt_rng(&rng) % 32), 64 + (uint32_t)(pt_rng(&rng) % 16384), 0},
                k < 4 ? ws[k] : NULL};
            sched_batch_t b;
            sched_status_t st = sched_fill(f->sched, &c, &b);
            if (st == SCHED_EEMPTY)
                continue;
            assert_int_equal(st, SCHED_OK);
            assert_true(sched_batch_check(&b, &c.contract));
            if (pt_rng(&rng) % 10 == 0)
                continue; /* the publish "failed": never committed */
            open[n_open++] = (pt_batch_t){b.batch_id, (uint32_t)b.n};
            assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
        } else if (op < 95 && n_open > 0) {
            size_t i = pt_rng(&rng) % n_open;
            sched_status_t st = pt_rng(&rng) % 4 == 0
                                    ? sched_return(f->sched, open[i].id, NULL, 0, NULL)
                                    : sched_complete(f->sched, open[i].id, NULL, 0, NULL);
            assert_int_equal(st, SCHED_OK);
            open[i] = open[--n_open];
        } else if (op < 97) {
            int k = (int)(pt_rng(&rng) % 4); /* a worker leaves, another comes */
            sched_worker_destroy(f->sched, ws[k]);
            ws[k] = worker(f, models[k % 2], 1 + (uint32_t)(pt_rng(&rng) % 3));
        } else {
            sched_tick(f->sched);
        }
        assert_true(sched_check(f->sched));
    }
    for (size_t i = 0; i < n_open; i++)
        assert_int_equal(sched_complete(f->sched, open[i].id, NULL, 0, NULL), SCHED_OK);
    for (int m = 0; m < 2; m++) { /* drain: every worker may hold back from cold shapes */
        sched_consumer_t c = {M(f->sched, models[m]), {32, 1u << 20, 0}, NULL};
        sched_batch_t b;
        while (sched_fill(f->sched, &c, &b) == SCHED_OK) {
            uint64_t id = b.batch_id;
            assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
            assert_int_equal(sched_complete(f->sched, id, NULL, 0, NULL), SCHED_OK);
        }
    }
    const sched_counters_t *k = sched_counters(f->sched);
    assert_true(k->tokens_received == k->tokens_completed);
    assert_true(sched_check(f->sched));
    free(open);
    fixture_free(f);
}

static void test_property_random_streams_under_the_lanes_policy(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++)
        run_property(seed, 2000);
}

/* An item's prefix_tokens is its producer's claim: a batch prices its prefix at most at the
 * longest input its contract says the worker runs (16,384 here), in one lane and merged with
 * another, while each item still carries its claim as submitted (fill.c). */
static void test_a_prefix_claim_is_priced_at_what_the_worker_runs(void **state)
{
    (void)state;
    uint32_t gap = credit_tokens() / 2 > 16 ? credit_tokens() / 2 : 17; /* a lane of its own */
    for (int variant = 0; variant < 2; variant++) {
        fixture_t *f = fixture(SCHED_POLICY_LANES, 0);
        sched_worker_t *w = worker(f, "m", 1);
        sched_item_t it = {M(f->sched, "m"), 1, 1000, (const uint8_t *)"claim", 5, NULL, 0,
                           UINT32_MAX,       0};
        assert_int_equal(sched_submit(f->sched, &it, NULL), SCHED_OK);
        if (variant == 1) { /* an honest lane first, the claim merged into it */
            sched_item_t honest = {
                M(f->sched, "m"), 1, 1000 - gap, (const uint8_t *)"honest", 6, NULL, 0, 300, 0};
            assert_int_equal(sched_submit(f->sched, &honest, NULL), SCHED_OK);
        }
        sched_consumer_t c = {M(f->sched, "m"), {32, 16384, 0}, w};
        sched_batch_t b;
        assert_int_equal(sched_fill(f->sched, &c, &b), SCHED_OK); /* views valid until commit */
        assert_int_equal(b.lanes, variant == 1 ? 2 : 1);
        assert_int_equal(b.prefix_tokens, 16384);
        assert_int_equal(b.prefix_charged, 16384); /* a cold worker pays it */
        int carried = 0;
        for (size_t i = 0; i < b.n; i++)
            carried += b.items_view[i].prefix_tokens == UINT32_MAX;
        assert_int_equal(carried, 1);
        assert_int_equal(sched_commit(f->sched, &b), SCHED_OK);
        assert_true(sched_check(f->sched));
        fixture_free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_neighbouring_lane_merges_when_it_pays),
        cmocka_unit_test(test_merged_batch_keeps_every_payload),
        cmocka_unit_test(test_lane_too_far_away_is_not_merged),
        cmocka_unit_test(test_a_prefix_claim_is_priced_at_what_the_worker_runs),
        cmocka_unit_test(test_merge_respects_the_contract),
        cmocka_unit_test(test_merged_batch_returns_to_its_own_lanes),
        cmocka_unit_test(test_a_merged_batch_that_cannot_be_put_back_stays_in_flight),
        cmocka_unit_test(test_workers_keep_to_their_warm_shapes),
        cmocka_unit_test(test_large_caches_keep_workers_on_their_warm_shapes),
        cmocka_unit_test(test_worker_waits_for_warm_work_before_a_small_cold_queue),
        cmocka_unit_test(test_a_small_cold_queue_goes_once_the_model_is_quiet),
        cmocka_unit_test(test_wait_quantiles_are_read_within_an_eighth),
        cmocka_unit_test(test_lane_whose_items_queue_keeps_taking_items),
        cmocka_unit_test(test_property_random_streams_under_the_lanes_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
