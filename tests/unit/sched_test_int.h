/*
 * sched_test_int.h - private to the scheduler's unit tests (test_sched, test_policy, test_hold,
 * test_budget, test_worker): the time units, a fake clock, the model lookup and the fixture they
 * share.
 */
#ifndef LANESCHED_TESTS_UNIT_SCHED_TEST_INT_H
#define LANESCHED_TESTS_UNIT_SCHED_TEST_INT_H

#include <stdint.h>
#include <stdlib.h>

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

/* A scheduler over a memory store, its clock the fixture's `now` (1 s at the start), and a worker
 * of model "m" when wc is not NULL (f->worker, else NULL). Returned to the caller to free with
 * sched_fx_free. */
typedef struct {
    uint64_t now;
    store_t *store;
    sched_t *sched;
    sched_worker_t *worker;
    uint32_t next_id; /* the tests' item ids: "i<N>" */
} sched_fx_t;

static inline sched_fx_t *sched_fx_create(sched_config_t cfg, const sched_worker_config_t *wc)
{
    sched_fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->now = SEC;
    assert_int_equal(store_open_memory(&f->store), STORE_OK);
    cfg.clock = sched_test_now;
    cfg.clock_ctx = &f->now;
    assert_int_equal(sched_create(&cfg, f->store, &f->sched), SCHED_OK);
    if (wc != NULL)
        assert_int_equal(sched_worker_create(f->sched, M(f->sched, "m"), wc, &f->worker), SCHED_OK);
    return f;
}

static inline void sched_fx_free(sched_fx_t *f)
{
    sched_destroy(f->sched);
    store_close(f->store);
    free(f);
}

#endif
