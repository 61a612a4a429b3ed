/*
 * test_dedupe.c - the item-id window (scheduler/daemon/dedupe.c) that makes a retried submit safe.
 *
 * Time is passed explicitly as now_ns, so every boundary is exact: an id accepted at t with a
 * window w is found for t <= now < t + w and not from t + w on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/hashseed.h"
#include "scheduler/daemon/dedupe.h"

#include <xxhash.h>

/* The seed of the model most cases use. */
#define SEED dedupe_seed("llama")

static int has(dedupe_t *d, const char *id, uint64_t now_ns)
{
    return dedupe_contains(d, dedupe_key(SEED, (const uint8_t *)id, strlen(id)), now_ns);
}

static void add(dedupe_t *d, const char *id, uint64_t now_ns)
{
    assert_int_equal(dedupe_add(d, dedupe_key(SEED, (const uint8_t *)id, strlen(id)), now_ns),
                     DAEMON_OK);
}

static size_t fmt_id(char *buf, size_t cap, const char *prefix, uint32_t i)
{
    int n = snprintf(buf, cap, "%s-%08x", prefix, i);
    assert_true(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

static void test_found_within_window_and_not_after(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 1000);
    assert_false(has(&d, "a", 0));
    add(&d, "a", 5000);
    assert_true(has(&d, "a", 5000));
    assert_true(has(&d, "a", 5500));
    assert_true(has(&d, "a", 5999)); /* last nanosecond of the window */
    assert_false(has(&d, "b", 5999));
    assert_false(has(&d, "a", 6000)); /* accepted exactly one window ago: expired */
    assert_false(has(&d, "a", 7000));
    assert_int_equal(d.len, 0);
    dedupe_fini(&d);
}

/* Asking the cache ahead, at either level, for ids present and absent, in an empty window and
 * a full one, answers nothing differently and changes nothing (dedupe_check). */
static void test_prefetch_changes_nothing(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 1000);
    dedupe_key_t absent = dedupe_key(SEED, (const uint8_t *)"absent", 6);
    for (unsigned level = 0; level < 2; level++)
        dedupe_prefetch(&d, absent, level); /* no index yet */
    char id[32];
    for (uint32_t i = 0; i < 300; i++) {
        size_t n = fmt_id(id, sizeof(id), "p", i);
        dedupe_key_t k = dedupe_key(SEED, (const uint8_t *)id, n);
        dedupe_prefetch(&d, k, 0);
        dedupe_prefetch(&d, k, 1);
        assert_int_equal(dedupe_add(&d, k, 10), DAEMON_OK);
    }
    size_t len = d.len;
    for (uint32_t i = 0; i < 600; i++) {
        size_t n = fmt_id(id, sizeof(id), "p", i);
        dedupe_key_t k = dedupe_key(SEED, (const uint8_t *)id, n);
        for (unsigned level = 0; level < 2; level++)
            dedupe_prefetch(&d, k, level);
        assert_int_equal(dedupe_contains(&d, k, 20), i < 300);
    }
    assert_int_equal(d.len, len);
    assert_true(dedupe_check(&d));
    dedupe_fini(&d);
}

static void test_expiry_is_permanent_even_if_asked_earlier(void **state)
{
    (void)state;
    /* Expiry removes the entry; a later question with an earlier clock does not revive it (the
     * owner's clock is monotonic, this only pins that expiry is a removal, not a comparison). */
    dedupe_t d;
    dedupe_init(&d, 100);
    add(&d, "a", 0);
    assert_false(has(&d, "a", 100));
    assert_false(has(&d, "a", 50));
    dedupe_fini(&d);
}

static void test_window_zero_disables(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 0);
    add(&d, "a", 1000);
    assert_false(has(&d, "a", 1000));
    assert_false(has(&d, "a", 0));
    add(&d, "a", 1000);
    assert_false(has(&d, "a", 1000));
    assert_int_equal(d.len, 0);
    dedupe_fini(&d);
}

static void test_empty_id_is_an_id_like_any_other(void **state)
{
    (void)state;
    /* The codec rejects empty ids before they get here; the window itself does not care. */
    dedupe_t d;
    dedupe_init(&d, 100);
    assert_int_equal(dedupe_add(&d, dedupe_key(SEED, NULL, 0), 10), DAEMON_OK);
    assert_true(dedupe_contains(&d, dedupe_key(SEED, NULL, 0), 10));
    assert_false(has(&d, "x", 10));
    dedupe_fini(&d);
}

static void test_expiry_in_arrival_order(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 100);
    add(&d, "a", 0);
    add(&d, "b", 10);
    add(&d, "c", 20);
    assert_int_equal(d.len, 3);
    assert_true(has(&d, "a", 99));
    assert_false(has(&d, "a", 100));
    assert_int_equal(d.len, 2);
    assert_true(has(&d, "b", 100));
    assert_true(has(&d, "c", 100));
    assert_false(has(&d, "b", 110));
    assert_true(has(&d, "c", 110));
    assert_int_equal(d.len, 1);
    assert_false(has(&d, "c", 120));
    assert_int_equal(d.len, 0);
    /* The window keeps working after it emptied. */
    add(&d, "d", 500);
    assert_true(has(&d, "d", 599));
    assert_false(has(&d, "d", 600));
    dedupe_fini(&d);
}

static void test_add_expires_old_entries_too(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 100);
    add(&d, "a", 0);
    add(&d, "b", 10);
    add(&d, "c", 150); /* a and b are past their window: adding drops them from the ring */
    assert_int_equal(d.len, 1);
    assert_false(has(&d, "a", 150));
    assert_false(has(&d, "b", 150));
    assert_true(has(&d, "c", 150));
    dedupe_fini(&d);
}

static void test_readd_extends_window(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 100);
    add(&d, "x", 0);  /* ring entry 1: expires at 100 */
    add(&d, "y", 10); /* expires at 110 */
    add(&d, "x", 50); /* ring entry 2 for x: expires at 150 */
    assert_int_equal(d.len, 3);
    /* The older ring entry of x expires at 100: it must not delete the newer acceptance. */
    assert_true(has(&d, "x", 100));
    assert_int_equal(d.len, 2);
    assert_true(has(&d, "x", 120));
    assert_false(has(&d, "y", 120));
    assert_true(has(&d, "x", 149));
    assert_false(has(&d, "x", 150));
    assert_int_equal(d.len, 0);
    dedupe_fini(&d);
}

static void test_readd_many_times(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 100);
    for (uint64_t t = 0; t <= 1000; t += 10)
        add(&d, "x", t);
    /* Every older entry has expired by 1099; only the last acceptance (at 1000) holds x. */
    assert_true(has(&d, "x", 1099));
    assert_int_equal(d.len, 1);
    assert_false(has(&d, "x", 1100));
    dedupe_fini(&d);
}

static void test_readd_after_expiry_is_a_new_window(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 100);
    add(&d, "x", 0);
    assert_false(has(&d, "x", 200));
    add(&d, "x", 200);
    assert_true(has(&d, "x", 299));
    assert_false(has(&d, "x", 300));
    dedupe_fini(&d);
}

static void test_many_ids_ring_grows(void **state)
{
    (void)state;
    enum { N = 100000, W = 1000000 };
    char id[32];
    dedupe_t d;
    dedupe_init(&d, W);
    /* Move the ring's head off zero first, so growth has to unwrap a ring that wraps around. */
    for (uint32_t i = 0; i < 700; i++) {
        size_t n = fmt_id(id, sizeof(id), "old", i);
        assert_int_equal(dedupe_add(&d, dedupe_key(SEED, (const uint8_t *)id, n), i), DAEMON_OK);
    }
    size_t cap0 = d.cap;
    uint64_t t0 = 700 + W; /* every "old" id has expired by now */
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "new", i);
        assert_int_equal(dedupe_add(&d, dedupe_key(SEED, (const uint8_t *)id, n), t0 + i),
                         DAEMON_OK);
    }
    assert_int_equal(d.len, N);
    assert_true(d.cap >= N);
    assert_true(d.cap > cap0);
    assert_int_equal(d.runs.len, N); /* a distinct instant each: a run each */
    assert_true(dedupe_check(&d));
    uint64_t now = t0 + N - 1;
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "new", i);
        assert_true(dedupe_contains(&d, dedupe_key(SEED, (const uint8_t *)id, n), now));
    }
    for (uint32_t i = 0; i < 700; i++) {
        size_t n = fmt_id(id, sizeof(id), "old", i);
        assert_false(dedupe_contains(&d, dedupe_key(SEED, (const uint8_t *)id, n), now));
    }
    /* Half a window on from the middle: the first half has expired, in order. */
    now = t0 + N / 2 + W;
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "new", i);
        assert_int_equal(dedupe_contains(&d, dedupe_key(SEED, (const uint8_t *)id, n), now),
                         i > N / 2);
    }
    assert_int_equal(d.len, N - N / 2 - 1);
    assert_true(dedupe_check(&d));
    assert_false(has(&d, "new-00000000", t0 + N + W));
    assert_int_equal(d.len, 0);
    assert_int_equal(d.runs.len, 0);
    dedupe_fini(&d);
}

static void test_no_collisions_in_1m_ids(void **state)
{
    (void)state;
    enum { N = 1000000 };
    char id[32];
    dedupe_t d;
    dedupe_init(&d, UINT64_MAX / 4);
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "item", i);
        /* A collision with an earlier id would read as a duplicate here and lose an item. */
        assert_false(dedupe_contains(&d, dedupe_key(SEED, (const uint8_t *)id, n), 1));
        assert_int_equal(dedupe_add(&d, dedupe_key(SEED, (const uint8_t *)id, n), 1), DAEMON_OK);
    }
    /* Every id holds its own key: none replaced another's map entry. */
    assert_int_equal(d.len, N);
    assert_int_equal(d.seen.len, N);
    /* A million ids never accepted are not found either. */
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "other", i);
        assert_false(dedupe_contains(&d, dedupe_key(SEED, (const uint8_t *)id, n), 2));
    }
    /* Near-identical binary ids (one byte or one length apart) are distinct too. */
    uint8_t a[64] = {0}, b[64] = {0};
    b[63] = 1;
    assert_int_equal(dedupe_add(&d, dedupe_key(SEED, a, sizeof(a)), 3), DAEMON_OK);
    assert_false(dedupe_contains(&d, dedupe_key(SEED, b, sizeof(b)), 3));
    assert_false(dedupe_contains(&d, dedupe_key(SEED, a, sizeof(a) - 1), 3));
    assert_true(dedupe_contains(&d, dedupe_key(SEED, a, sizeof(a)), 3));
    dedupe_fini(&d);
}

/* Ids accepted at one instant (a Submit's items) share one run and leave together, at exactly
 * their window's end; a later instant starts the next run. */
static void test_a_submits_ids_share_a_run_and_expire_exactly(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 100);
    add(&d, "a", 10);
    add(&d, "b", 10);
    add(&d, "c", 10);
    add(&d, "d", 20);
    assert_int_equal(d.len, 4);
    assert_int_equal(d.runs.len, 2);
    assert_true(dedupe_check(&d));
    assert_true(has(&d, "a", 109));
    assert_true(has(&d, "c", 109));
    assert_false(has(&d, "a", 110));
    assert_false(has(&d, "b", 110));
    assert_false(has(&d, "c", 110));
    assert_true(has(&d, "d", 110));
    assert_int_equal(d.len, 1);
    assert_int_equal(d.runs.len, 1);
    assert_true(dedupe_check(&d));
    assert_true(has(&d, "d", 119));
    assert_false(has(&d, "d", 120));
    assert_int_equal(d.runs.len, 0);
    assert_true(dedupe_check(&d));
    dedupe_fini(&d);
}

/* The window holds at most max_ids ids: past it the oldest are forgotten first, counted, and
 * taken out of their runs one by one. */
static void test_a_bounded_window_forgets_the_oldest(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 1000);
    dedupe_limit_set(&d, 3);
    add(&d, "a", 0);
    add(&d, "b", 0);
    add(&d, "c", 1);
    add(&d, "d", 1); /* a goes; b alone in the first run */
    assert_int_equal(d.runs.len, 2);
    assert_int_equal(d.runs.a[d.runs.head].n, 1);
    assert_true(dedupe_check(&d));
    add(&d, "e", 2); /* b goes, and its run with it */
    assert_int_equal(d.len, 3);
    assert_int_equal(d.runs.len, 2);
    assert_int_equal(d.evictions, 2);
    assert_true(dedupe_check(&d));
    assert_false(has(&d, "a", 5));
    assert_false(has(&d, "b", 5));
    assert_true(has(&d, "c", 5));
    assert_true(has(&d, "e", 5));
    add(&d, "c", 6); /* a re-add is one more record: the oldest (c's first) goes */
    assert_true(has(&d, "c", 6));
    assert_true(has(&d, "d", 6));
    assert_int_equal(d.len, 3);
    assert_false(has(&d, "d", 1001)); /* d leaves at its run's end; e and c's re-add stay */
    assert_true(has(&d, "e", 1001));
    assert_true(has(&d, "c", 1001));
    assert_int_equal(d.len, 2);
    assert_true(dedupe_check(&d));
    dedupe_fini(&d);
}

/* A reservation sizes the window once for what comes (a restart's every stored id): the adds
 * that follow never resize it, a prefetch changes nothing, and the bound and impossible sizes
 * are refused or clamped without touching what the window holds. */
static void test_reserve_sizes_once_and_keeps_what_is_held(void **state)
{
    (void)state;
    enum { N = 5000 };
    char id[32];
    dedupe_t d;
    dedupe_init(&d, 1000);
    add(&d, "before", 0);
    assert_int_equal(dedupe_reserve(&d, N), DAEMON_OK);
    size_t cap = d.cap;
    assert_true(cap >= N + 1);
    const dedupe_rec_t *ring = d.ring;
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "r", i);
        dedupe_key_t k = dedupe_key(SEED, (const uint8_t *)id, n);
        dedupe_prefetch(&d, k, 0);
        assert_int_equal(dedupe_add(&d, k, 1), DAEMON_OK);
    }
    assert_int_equal(d.cap, cap);
    assert_ptr_equal(d.ring, ring);
    assert_true(has(&d, "before", 2));
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "r", i);
        assert_true(dedupe_contains(&d, dedupe_key(SEED, (const uint8_t *)id, n), 2));
    }
    assert_true(dedupe_check(&d));
    assert_int_equal(dedupe_reserve(&d, 10), DAEMON_OK); /* past the reservation: grows */
    assert_true(d.cap >= d.len + 10);
    assert_true(has(&d, "r-00000000", 2));
    size_t len = d.len;
    assert_int_equal(dedupe_reserve(&d, SIZE_MAX), DAEMON_ENOMEM);
    assert_int_equal(d.len, len);
    assert_true(has(&d, "before", 3));
    assert_false(has(&d, "r-00000000", 1001)); /* everything expires: the room is given back */
    assert_int_equal(d.len, 0);
    assert_true(d.cap < cap);
    assert_int_equal(d.reserved, 0);
    dedupe_fini(&d);

    dedupe_init(&d, 1000); /* a reservation ended unused is given back at the next check */
    assert_int_equal(dedupe_reserve(&d, 4 * N), DAEMON_OK);
    add(&d, "one", 0);
    assert_true(has(&d, "one", 1));
    assert_true(d.cap >= 4 * N);
    dedupe_reserve_end(&d);
    assert_true(has(&d, "one", 2));
    assert_true(d.cap < 4 * N);
    assert_true(dedupe_check(&d));
    dedupe_fini(&d);

    dedupe_init(&d, 1000);
    dedupe_limit_set(&d, 100);
    assert_int_equal(dedupe_reserve(&d, SIZE_MAX), DAEMON_OK); /* clamped to the bound */
    assert_int_equal(d.cap, 100);
    dedupe_fini(&d);

    dedupe_init(&d, 0); /* no window: nothing to size */
    assert_int_equal(dedupe_reserve(&d, N), DAEMON_OK);
    assert_int_equal(d.cap, 0);
    dedupe_fini(&d);
}

/* Memory per remembered id at a full window of 2^20 ids accepted in 64-id Submits (one run
 * each): 12-byte records, a half-full index of 4-byte slots and a 16-byte run per 64 ids, 20.3
 * bytes (an expiry in every record took 32, a map of 24-byte slots beside a ring about 96); and
 * it is given back once the ids expire. */
static void test_bytes_per_id(void **state)
{
    (void)state;
    enum { N = 1 << 20, W = 1 << 20, RUN = 64 };
    char id[32];
    dedupe_t d;
    dedupe_init(&d, W);
    dedupe_limit_set(&d, N);
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "item", i);
        assert_int_equal(dedupe_add(&d, dedupe_key(SEED, (const uint8_t *)id, n), 1 + i / RUN),
                         DAEMON_OK);
    }
    assert_true(dedupe_check(&d));
    assert_int_equal(d.runs.len, N / RUN);
    double per_id = (double)dedupe_bytes(&d) / N;
    print_message("dedupe: %.1f bytes per id at %d ids\n", per_id, N);
    assert_true(per_id <= 12.0 + 8.0 + 2.0 * 16 / RUN); /* the runs' ring at most half empty */
    uint64_t last = 1 + (N - 1) / RUN;
    for (uint32_t i = 0; i < N; i++) {
        size_t n = fmt_id(id, sizeof(id), "item", i);
        assert_true(dedupe_contains(&d, dedupe_key(SEED, (const uint8_t *)id, n), last));
    }
    assert_false(has(&d, "item-x", last + W)); /* all expired */
    assert_int_equal(d.len, 0);
    assert_true(dedupe_check(&d));
    assert_true(dedupe_bytes(&d) <= 64 * 1024);
    dedupe_fini(&d);
}

/* An id's key is its hash under the process's secret seed (dedupe.c invariant 8), not the
 * unseeded hash a client could search offline for ids that share a home slot. */
static void test_the_key_is_seeded(void **state)
{
    (void)state;
    static const char id[] = "order-42";
    dedupe_key_t k = dedupe_key(SEED, (const uint8_t *)id, sizeof(id) - 1);
    uint64_t model = XXH3_64bits_withSeed("llama", 5, hashseed_get().a);
    XXH128_hash_t seeded = XXH3_128bits_withSeed(id, sizeof(id) - 1, model);
    XXH128_hash_t plain = XXH3_128bits(id, sizeof(id) - 1);
    assert_true(k.a == seeded.low64 && k.b == (uint32_t)seeded.high64);
    assert_true(k.a != plain.low64);
    dedupe_key_t again = dedupe_key(SEED, (const uint8_t *)id, sizeof(id) - 1);
    assert_true(again.a == k.a && again.b == k.b);
}

/* invariant 9: one model's ids never make another's duplicate; the seed is the model's name */
static void test_an_id_is_a_duplicate_within_its_model_only(void **state)
{
    (void)state;
    dedupe_t d;
    dedupe_init(&d, 1000);
    static const uint8_t id[] = "order-42";
    uint64_t llama = dedupe_seed("llama"), qwen = dedupe_seed("qwen");
    assert_true(llama != qwen);
    assert_true(llama == dedupe_seed("llama"));
    assert_int_equal(dedupe_add(&d, dedupe_key(llama, id, sizeof(id) - 1), 1), DAEMON_OK);
    assert_true(dedupe_contains(&d, dedupe_key(llama, id, sizeof(id) - 1), 2));
    assert_false(dedupe_contains(&d, dedupe_key(qwen, id, sizeof(id) - 1), 2));
    assert_false(dedupe_contains(&d, dedupe_key(dedupe_seed("llam"), id, sizeof(id) - 1), 2));
    dedupe_fini(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_within_window_and_not_after),
        cmocka_unit_test(test_prefetch_changes_nothing),
        cmocka_unit_test(test_expiry_is_permanent_even_if_asked_earlier),
        cmocka_unit_test(test_window_zero_disables),
        cmocka_unit_test(test_empty_id_is_an_id_like_any_other),
        cmocka_unit_test(test_expiry_in_arrival_order),
        cmocka_unit_test(test_add_expires_old_entries_too),
        cmocka_unit_test(test_readd_extends_window),
        cmocka_unit_test(test_readd_many_times),
        cmocka_unit_test(test_readd_after_expiry_is_a_new_window),
        cmocka_unit_test(test_many_ids_ring_grows),
        cmocka_unit_test(test_no_collisions_in_1m_ids),
        cmocka_unit_test(test_a_bounded_window_forgets_the_oldest),
        cmocka_unit_test(test_a_submits_ids_share_a_run_and_expire_exactly),
        cmocka_unit_test(test_bytes_per_id),
        cmocka_unit_test(test_reserve_sizes_once_and_keeps_what_is_held),
        cmocka_unit_test(test_the_key_is_seeded),
        cmocka_unit_test(test_an_id_is_a_duplicate_within_its_model_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
