/*
 * test_pool.c - unit tests for common/pool: objects come back for reuse, last kept first, the
 * objects kept never pass their bound whatever the peak was, and the check reports a broken pool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/pool.h"

static void test_put_then_get_reuses(void **state)
{
    (void)state;
    pool_t pool;
    pool_init(&pool, 40, 8);
    void *a = pool_get(&pool), *b = pool_get(&pool);
    assert_non_null(a);
    assert_non_null(b);
    memset(a, 0xab, 40); /* the whole size is the caller's */
    memset(b, 0xcd, 40);
    pool_put(&pool, a);
    pool_put(&pool, b);
    assert_int_equal(pool.n_kept, 2);
    assert_ptr_equal(pool_get(&pool), b); /* last in, first out: the warmest block */
    assert_ptr_equal(pool_get(&pool), a);
    assert_int_equal(pool.n_kept, 0);
    assert_true(pool_check(&pool));
    pool_put(&pool, a);
    free(b); /* invariant 2: an object out is a plain malloc block */
    pool_put(&pool, NULL);
    assert_int_equal(pool.n_kept, 1);
    pool_fini(&pool);
    assert_int_equal(pool.n_kept, 0);
    assert_null(pool.kept);
}

static void test_keep_bounds_the_free_list(void **state)
{
    (void)state;
    enum { PEAK = 100, KEEP = 5 };
    pool_t pool;
    void *out[PEAK];
    pool_init(&pool, 16, KEEP);
    for (int i = 0; i < PEAK; i++)
        assert_non_null(out[i] = pool_get(&pool));
    for (int i = 0; i < PEAK; i++) {
        pool_put(&pool, out[i]);
        assert_true(pool.n_kept <= KEEP);
        assert_true(pool_check(&pool));
    }
    assert_int_equal(pool.n_kept, KEEP);
    pool_fini(&pool); /* under ASan: the other 95 went back to malloc, nothing leaks */
}

static void test_a_pool_that_keeps_nothing_frees_every_put(void **state)
{
    (void)state;
    pool_t pool;
    pool_init(&pool, 8, 0);
    void *a = pool_get(&pool);
    assert_non_null(a);
    pool_put(&pool, a); /* freed at once: ASan reports a leak otherwise */
    assert_int_equal(pool.n_kept, 0);
    assert_null(pool.kept);
    pool_fini(&pool);
}

static void test_check_reports_a_broken_pool(void **state)
{
    (void)state;
    pool_t pool;
    pool_init(&pool, 16, 2);
    assert_true(pool_check(&pool));
    pool.n_kept = 3; /* more than keep, and counted without an array */
    assert_false(pool_check(&pool));
    pool.n_kept = 1;
    assert_false(pool_check(&pool)); /* one counted, no array to hold it */
    pool.n_kept = 0;
    assert_true(pool_check(&pool));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_then_get_reuses),
        cmocka_unit_test(test_keep_bounds_the_free_list),
        cmocka_unit_test(test_a_pool_that_keeps_nothing_frees_every_put),
        cmocka_unit_test(test_check_reports_a_broken_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
