/*
 * pool.c - kept freed objects of one size.
 *
 * Invariants:
 *   1. n_kept <= keep, and kept[0 .. n_kept) are the kept objects: the memory kept is bounded
 *      whatever the peak of objects out was.
 *   2. Every object is one malloc block of pool->size bytes, kept or out, so free() is always
 *      a correct way to dispose of one.
 *   3. A get reads no kept object's memory: the last one kept is the one handed out (the
 *      warmest), and the caller's first write brings it into the cache.
 *
 * Rejected: a free list linked through the objects (its pop reads the object it hands out for
 * the next link: a cache miss per get, the largest cost of the disk store's commit in `perf
 * annotate`); slabs of many objects per block (a slab is freed only when all its objects are
 * back, so one long-held object pins the rest, and invariant 2 is lost); a pool without a
 * bound (after a burst, the peak stays allocated for the process's life).
 */
#include "common/pool.h"

#include "common/invariant.h"

#include <stdlib.h>

void pool_init(pool_t *pool, size_t size, size_t keep)
{
    *pool = (pool_t){.size = size != 0 ? size : 1, .keep = keep};
}

void *pool_get(pool_t *pool)
{
    if (pool->n_kept == 0)
        return malloc(pool->size);
    void *obj = pool->kept[--pool->n_kept];
    INVARIANT_CHECK(pool_check(pool));
    return obj;
}

void pool_put(pool_t *pool, void *obj)
{
    if (obj == NULL)
        return;
    if (pool->kept == NULL && pool->keep != 0)
        pool->kept = malloc(pool->keep * sizeof(*pool->kept));
    if (pool->kept == NULL || pool->n_kept >= pool->keep) {
        free(obj);
        return;
    }
    pool->kept[pool->n_kept++] = obj;
    INVARIANT_CHECK(pool_check(pool));
}

int pool_check(const pool_t *pool)
{
    INVARIANT_HOLDS(pool->n_kept <= pool->keep, "the pool keeps %zu objects, at most %zu",
                    pool->n_kept, pool->keep);
    INVARIANT_HOLDS(pool->n_kept == 0 || pool->kept != NULL, "%zu objects kept without an array",
                    pool->n_kept);
    return 1;
}

void pool_fini(pool_t *pool)
{
    for (size_t i = 0; i < pool->n_kept; i++)
        free(pool->kept[i]);
    free(pool->kept);
    pool->kept = NULL;
    pool->n_kept = 0;
}
