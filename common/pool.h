/*
 * pool.h - kept freed objects of one size, for a hot path that allocates and frees one small
 * object per item (the disk store's pending records).
 */
#ifndef LANESCHED_POOL_H
#define LANESCHED_POOL_H

#include <stddef.h>

typedef struct {
    void **kept;   /* owned array of keep slots (NULL until the first put); the objects owned */
    size_t n_kept; /* objects in kept[0 .. n_kept) */
    size_t keep;   /* at most this many are kept; more are given back to malloc */
    size_t size;   /* bytes of an object */
} pool_t;

/* An empty pool of objects of size bytes that keeps at most keep freed ones. */
void pool_init(pool_t *pool, size_t size, size_t keep);

/* An object of the pool's size, uninitialised: the one kept last, else a new malloc block.
 * Returned to the caller, who gives it back with pool_put or frees it with free() (every object
 * is its own malloc block). NULL when memory is short. */
void *pool_get(pool_t *pool);

/* Takes obj (NULL-safe): kept for the next pool_get, or freed when the pool holds keep (or
 * cannot allocate its array of kept objects). */
void pool_put(pool_t *pool, void *obj);

/* Invariant 1 of pool.c; O(1). 1 when it holds, else 0 with the broken rule reported
 * (common/invariant.h). */
int pool_check(const pool_t *pool);

/* Frees the kept objects and the array; objects still out stay the holders'. */
void pool_fini(pool_t *pool);

#endif
