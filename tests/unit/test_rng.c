/*
 * test_rng.c - unit tests for common/rng: the seeded generator and the weighted index draw that
 * the micro-benchmark and lanesched-bench's workloads share. Reproducibility from a seed is the
 * contract the benchmarks' figures rest on; rng_cdf_draw's edges (zero weights, one entry, an
 * unnormalised cdf) are where a search goes wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/rng.h"

static void test_same_seed_same_sequence(void **state)
{
    (void)state;
    rng_t a, b, c;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    rng_seed(&c, 43);
    int differs = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = rng_next(&a);
        assert_true(x == rng_next(&b));
        differs |= x != rng_next(&c);
    }
    assert_true(differs);
}

static void test_uniform_is_in_unit_interval(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 7);
    for (int i = 0; i < 100000; i++) {
        double u = rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
    }
}

static void test_cdf_draw_single_entry(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 1);
    const double cdf[] = {3.5};
    for (int i = 0; i < 100; i++)
        assert_int_equal(rng_cdf_draw(&r, cdf, 1), 0);
}

/* Weights 0, 1, 0, 3, 0 (unnormalised running sums): zero-weight entries are never drawn and
 * the others come out in proportion, 1:3 within a few standard deviations. */
static void test_cdf_draw_follows_weights_and_skips_zero_weights(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 2);
    const double cdf[] = {0.0, 1.0, 1.0, 4.0, 4.0};
    unsigned counts[5] = {0};
    const unsigned n = 200000;
    for (unsigned i = 0; i < n; i++) {
        uint32_t k = rng_cdf_draw(&r, cdf, 5);
        assert_true(k < 5);
        counts[k]++;
    }
    assert_int_equal(counts[0], 0);
    assert_int_equal(counts[2], 0);
    assert_int_equal(counts[4], 0);
    /* expected 50,000 and 150,000; sd ~194 */
    assert_in_range(counts[1], 49000, 51000);
    assert_in_range(counts[3], 149000, 151000);
}

/* The draw is the first k with cdf[k] > u * cdf[n-1]: checked against a linear scan on the
 * same uniforms. */
static void test_cdf_draw_matches_linear_scan(void **state)
{
    (void)state;
    const double cdf[] = {0.5, 0.75, 2.0, 2.0, 2.5, 7.0, 7.25};
    rng_t r, shadow;
    rng_seed(&r, 3);
    rng_seed(&shadow, 3);
    for (int i = 0; i < 20000; i++) {
        double u = rng_uniform(&shadow) * cdf[6];
        uint32_t want = 0;
        while (want + 1 < 7 && cdf[want] <= u)
            want++;
        assert_int_equal(rng_cdf_draw(&r, cdf, 7), want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_uniform_is_in_unit_interval),
        cmocka_unit_test(test_cdf_draw_single_entry),
        cmocka_unit_test(test_cdf_draw_follows_weights_and_skips_zero_weights),
        cmocka_unit_test(test_cdf_draw_matches_linear_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
