/*
 * heap.c - a model's shapes in indexed binary heaps (a pure data structure: it reads each shape's
 * keys and calls nothing else), so choosing the next shape costs
 * O(log shapes) instead of a scan of every shape (a producer that hashes whole prompts makes a
 * shape per item: with 20,000 shapes the scan made every batch cost 20,000 steps).
 *
 * Three heaps per model (sched_int.h's HEAP_*):
 *   HEAP_TOKENS  shapes holding queued tokens, most first (ties: seen first): the sticky rule's
 *                switch target and cache affinity's last resort;
 *   HEAP_COLD    the same for the shapes no worker has warm: where a worker goes for new work;
 *   HEAP_OLDEST  shapes holding queued items, by a lower bound of their oldest item's arrival
 *                (ties: seen first): the age bound.
 *
 * Invariants:
 *   1. A shape is in HEAP_TOKENS iff it holds queued tokens, in HEAP_COLD iff also its warm
 *      count is 0, in HEAP_OLDEST iff it holds queued items; shape->heap_pos[h] is its index in
 *      heap h, or HEAP_ABSENT.
 *   2. Each heap is ordered by its key at every step (the keys are read from the shape, so every
 *      change of a shape's queued tokens, warm count or oldest bound is followed by heap_fix).
 *   3. The heaps read their keys from the shapes and nothing else: HEAP_OLDEST's key is whatever
 *      bound the shape holds (shapes.c keeps it a lower bound and makes it exact on demand).
 *
 * Rejected: a sorted list per model (O(shapes) per update) and a single heap with filtering
 * (the shapes warm elsewhere can be as many as workers x cache, each skipped per batch).
 */
#include "scheduler/core/sched_int.h"

#include "common/invariant.h"

#include <stdlib.h>

/* 1 when a goes before b in heap h. */
static int heap_before(int h, const sched_shape_t *a, const sched_shape_t *b)
{
    if (h == HEAP_OLDEST) {
        if (a->oldest_ns != b->oldest_ns)
            return a->oldest_ns < b->oldest_ns;
    } else {
        uint64_t ta = lanes_queued_tokens(a->lanes), tb = lanes_queued_tokens(b->lanes);
        if (ta != tb)
            return ta > tb;
    }
    return a->seq < b->seq;
}

static void heap_set(shape_heap_t *hp, int h, size_t i, sched_shape_t *shape)
{
    hp->a[i] = shape;
    shape->heap_pos[h] = i;
}

static void heap_up(shape_heap_t *hp, int h, size_t i)
{
    sched_shape_t *x = hp->a[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_before(h, x, hp->a[parent]))
            break;
        heap_set(hp, h, i, hp->a[parent]);
        i = parent;
    }
    heap_set(hp, h, i, x);
}

static void heap_down(shape_heap_t *hp, int h, size_t i)
{
    sched_shape_t *x = hp->a[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= hp->n)
            break;
        if (child + 1 < hp->n && heap_before(h, hp->a[child + 1], hp->a[child]))
            child++;
        if (!heap_before(h, hp->a[child], x))
            break;
        heap_set(hp, h, i, hp->a[child]);
        i = child;
    }
    heap_set(hp, h, i, x);
}

sched_status_t heap_reserve(sched_model_t *m)
{
    size_t need = m->n_shapes + 1;
    for (int h = 0; h < HEAP_COUNT; h++) {
        shape_heap_t *hp = &m->heaps[h];
        if (need <= hp->cap)
            continue;
        size_t cap = hp->cap ? hp->cap * 2 : 8;
        while (cap < need)
            cap *= 2;
        sched_shape_t **a = realloc(hp->a, cap * sizeof(*a));
        if (a == NULL)
            return SCHED_ENOMEM;
        hp->a = a;
        hp->cap = cap;
    }
    return SCHED_OK;
}

void heap_free(sched_model_t *m)
{
    for (int h = 0; h < HEAP_COUNT; h++)
        free(m->heaps[h].a);
}

static void heap_insert(shape_heap_t *hp, int h, sched_shape_t *shape)
{
    heap_set(hp, h, hp->n++, shape);
    heap_up(hp, h, hp->n - 1);
}

static void heap_remove(shape_heap_t *hp, int h, sched_shape_t *shape)
{
    size_t i = shape->heap_pos[h];
    shape->heap_pos[h] = HEAP_ABSENT;
    sched_shape_t *last = hp->a[--hp->n];
    if (i == hp->n)
        return;
    heap_set(hp, h, i, last);
    heap_up(hp, h, i);
    heap_down(hp, h, last->heap_pos[h]);
}

void heap_fix(sched_model_t *m, sched_shape_t *shape)
{
    int want[HEAP_COUNT];
    want[HEAP_TOKENS] = lanes_queued_tokens(shape->lanes) != 0;
    want[HEAP_COLD] = want[HEAP_TOKENS] && shape->warm == 0;
    want[HEAP_OLDEST] = lanes_queued_items(shape->lanes) != 0;
    for (int h = 0; h < HEAP_COUNT; h++) {
        shape_heap_t *hp = &m->heaps[h];
        int in = shape->heap_pos[h] != HEAP_ABSENT;
        if (want[h] && !in) {
            heap_insert(hp, h, shape);
        } else if (!want[h] && in) {
            heap_remove(hp, h, shape);
        } else if (in) {
            heap_up(hp, h, shape->heap_pos[h]);
            heap_down(hp, h, shape->heap_pos[h]);
        }
    }
}

void heap_drop(sched_model_t *m, sched_shape_t *shape)
{
    for (int h = 0; h < HEAP_COUNT; h++) {
        if (shape->heap_pos[h] != HEAP_ABSENT)
            heap_remove(&m->heaps[h], h, shape);
    }
}

sched_shape_t *heap_top(const sched_model_t *m, int h)
{
    return m->heaps[h].n != 0 ? m->heaps[h].a[0] : NULL;
}

void heap_top_resift(sched_model_t *m, int h)
{
    if (m->heaps[h].n != 0)
        heap_down(&m->heaps[h], h, 0);
}

void heap_remove_one(sched_model_t *m, int h, sched_shape_t *shape)
{
    if (shape->heap_pos[h] != HEAP_ABSENT)
        heap_remove(&m->heaps[h], h, shape);
}

void heap_insert_one(sched_model_t *m, int h, sched_shape_t *shape)
{
    heap_insert(&m->heaps[h], h, shape);
}

int heap_check_shape(const sched_model_t *m, const sched_shape_t *shape)
{
    int want[HEAP_COUNT];
    want[HEAP_TOKENS] = lanes_queued_tokens(shape->lanes) != 0;
    want[HEAP_COLD] = want[HEAP_TOKENS] && shape->warm == 0;
    want[HEAP_OLDEST] = lanes_queued_items(shape->lanes) != 0;
    for (int h = 0; h < HEAP_COUNT; h++) {
        const shape_heap_t *hp = &m->heaps[h];
        size_t i = shape->heap_pos[h];
        INVARIANT_HOLDS(want[h] == (i != HEAP_ABSENT), "shape %016llx: in heap %d %d, should be %d",
                        (unsigned long long)shape->signature, h, i != HEAP_ABSENT, want[h]);
        if (i == HEAP_ABSENT)
            continue;
        INVARIANT_HOLDS(i < hp->n && hp->a[i] == shape,
                        "shape %016llx not at its place %zu in heap %d",
                        (unsigned long long)shape->signature, i, h);
        INVARIANT_HOLDS(i == 0 || !heap_before(h, shape, hp->a[(i - 1) / 2]),
                        "shape %016llx before its parent in heap %d",
                        (unsigned long long)shape->signature, h);
        for (size_t c = 2 * i + 1; c <= 2 * i + 2 && c < hp->n; c++)
            INVARIANT_HOLDS(!heap_before(h, hp->a[c], shape),
                            "a child of shape %016llx before it in heap %d",
                            (unsigned long long)shape->signature, h);
    }
    return 1;
}

int heap_check(const sched_model_t *m)
{
    for (int h = 0; h < HEAP_COUNT; h++) {
        const shape_heap_t *hp = &m->heaps[h];
        for (size_t i = 0; i < hp->n; i++) {
            INVARIANT_HOLDS(hp->a[i]->heap_pos[h] == i, "model %s heap %d: shape at %zu says %zu",
                            m->name, h, i, hp->a[i]->heap_pos[h]);
            INVARIANT_HOLDS(i == 0 || !heap_before(h, hp->a[i], hp->a[(i - 1) / 2]),
                            "model %s heap %d out of order at %zu", m->name, h, i);
        }
        size_t members = 0;
        for (size_t j = 0; j < m->n_shapes; j++) {
            const sched_shape_t *sh = m->shapes[j];
            int want = h == HEAP_TOKENS ? lanes_queued_tokens(sh->lanes) != 0
                       : h == HEAP_COLD ? lanes_queued_tokens(sh->lanes) != 0 && sh->warm == 0
                                        : lanes_queued_items(sh->lanes) != 0;
            INVARIANT_HOLDS(want == (sh->heap_pos[h] != HEAP_ABSENT),
                            "model %s heap %d: shape %016llx membership %d, wanted %d", m->name, h,
                            (unsigned long long)sh->signature, sh->heap_pos[h] != HEAP_ABSENT,
                            want);
            members += want;
        }
        INVARIANT_HOLDS(members == hp->n, "model %s heap %d holds %zu, %zu qualify", m->name, h,
                        hp->n, members);
    }
    return 1;
}
