/*
 * pool.c - a free list of fixed-size objects.
 *
 * Invariants:
 *   1. n_free <= keep, and n_free objects are linked from free: the kept memory is bounded
 *      whatever the peak of objects out was.
 *   2. Every object is one malloc block of pool->size bytes, kept or out, so free() is always
 *      a correct way to dispose of one.
 *
 * Rejected: slabs of many objects per block (fewer mallocs still, but a slab is freed only when
 * all its objects are back, so one long-held object pins the rest, and invariant 2 is lost);
 * a pool without a bound (after a burst, the peak stays allocated for the process's life).
 */
#include "common/pool.h"

#include "common/invariant.h"

#include <stdlib.h>

void pool_init(pool_t *pool, size_t size, size_t keep)
{
    *pool = (pool_t){.size = size < sizeof(void *) ? sizeof(void *) : size, .keep = keep};
}

void *pool_get(pool_t *pool)
{
    void *obj = pool->free;
    if (obj == NULL)
        return malloc(pool->size);
    pool->free = *(void **)obj;
    pool->n_free--;
    INVARIANT_CHECK(pool_check(pool));
    return obj;
}

void pool_put(pool_t *pool, void *obj)
{
    if (obj == NULL)
        return;
    if (pool->n_free >= pool->keep) {
        free(obj);
        return;
    }
    *(void **)obj = pool->free;
    pool->free = obj;
    pool->n_free++;
    INVARIANT_CHECK(pool_check(pool));
}

int pool_check(const pool_t *pool)
{
    INVARIANT_HOLDS(pool->n_free <= pool->keep, "the pool keeps %zu objects, at most %zu",
                    pool->n_free, pool->keep);
    INVARIANT_HOLDS((pool->n_free == 0) == (pool->free == NULL), "%zu objects kept, free list %s",
                    pool->n_free, pool->free == NULL ? "empty" : "not empty");
    INVARIANT_HOLDS(pool->size >= sizeof(void *), "objects of %zu bytes", pool->size);
    return 1;
}

void pool_fini(pool_t *pool)
{
    for (void *obj = pool->free, *next; obj != NULL; obj = next) {
        next = *(void **)obj;
        free(obj);
    }
    pool->free = NULL;
    pool->n_free = 0;
}
