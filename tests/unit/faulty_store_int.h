/*
 * faulty_store_int.h - private to the unit tests that make a store's commit or return fail at a
 * chosen call (test_policy, test_daemon_faults): any store's own operations, except that its
 * commit_fail_at-th commit and its next ret_fails returns answer out of memory. The disk store's
 * hooks (store.h, STORE_FAULT_*) reach neither at a chosen call.
 */
#ifndef LANESCHED_TESTS_UNIT_FAULTY_STORE_INT_H
#define LANESCHED_TESTS_UNIT_FAULTY_STORE_INT_H

#include "store/store_int.h"

typedef struct {
    int commit_calls;   /* commits seen since faulty_store_install */
    int commit_fail_at; /* this one fails (0: none) */
    int ret_fails;      /* this many returns fail, from the next on */
} faulty_store_t;

static const struct store_ops *faulty_real_ops;
static struct store_ops faulty_ops;
static faulty_store_t faulty;

static inline store_status_t faulty_commit(store_t *store, store_queue_t *q,
                                           const store_ref_t *refs, size_t n)
{
    if (++faulty.commit_calls == faulty.commit_fail_at)
        return STORE_ENOMEM;
    return faulty_real_ops->commit(store, q, refs, n);
}

static inline store_status_t faulty_ret(store_t *store, const store_ref_t *refs, size_t n,
                                        int unseen)
{
    if (faulty.ret_fails > 0) {
        faulty.ret_fails--;
        return STORE_ENOMEM;
    }
    return faulty_real_ops->ret(store, refs, n, unseen);
}

/* Puts the faults in front of store's operations (store borrowed; one store at a time). */
static inline void faulty_store_install(store_t *store, int commit_fail_at, int ret_fails)
{
    faulty_real_ops = store->ops;
    faulty_ops = *faulty_real_ops;
    faulty_ops.commit = faulty_commit;
    faulty_ops.ret = faulty_ret;
    faulty = (faulty_store_t){0, commit_fail_at, ret_fails};
    store->ops = &faulty_ops;
}

/* Gives store its own operations back, before it is closed. */
static inline void faulty_store_remove(store_t *store)
{
    store->ops = faulty_real_ops;
}

#endif
