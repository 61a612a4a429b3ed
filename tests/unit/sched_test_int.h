/*
 * sched_test_int.h - private to the scheduler's unit tests (test_sched, test_policy, test_hold,
 * test_budget, test_worker): the time units, a fake clock and the model lookup they share.
 */
#ifndef LANESCHED_TESTS_UNIT_SCHED_TEST_INT_H
#define LANESCHED_TESTS_UNIT_SCHED_TEST_INT_H

#include <stdint.h>

#include "scheduler/core/sched.h"

#define MS  1000000ull
#define SEC 1000000000ull

/* sched_config_t.clock for a test: the time is the uint64_t that ctx (borrowed) points at, which
 * the test moves by hand. */
static inline uint64_t sched_test_now(void *ctx)
{
    return *(const uint64_t *)ctx;
}

/* The model named `name`: found, or opened (the test's reference pins it). Needs cmocka.h. */
static inline sched_model_t *M(sched_t *s, const char *name)
{
    sched_model_t *m = sched_model_find(s, name);
    if (m == NULL)
        assert_int_equal(sched_model_open(s, name, &m), SCHED_OK);
    return m;
}

#endif
