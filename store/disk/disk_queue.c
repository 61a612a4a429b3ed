/*
 * disk_queue.c - the disk backend's models and lane queues: the in-memory records of every
 * queued item (where its entry is, its tokens and deliveries), never the payload.
 *
 * Owns the interned model names, every dqueue_t and its record array; the segments a model
 * lists are owned by disk_t.segments (disk_seg.c).
 *
 * Invariants:
 *   1. A lane's items live in its model's segments in arrival order: the queue array is sorted
 *      by (segment sequence, offset), returned items included (disk_queue_lower_bound finds the
 *      place of one coming back).
 *   2. queued_items is the array's length and queued_tokens the sum of its records' tokens.
 *   3. The array's slack stays under a quarter of a record per item past its first size
 *      (growth by a quarter, not double): 16 + 4 = 20 bytes per queued item at worst. The first
 *      size is DISK_QUEUE_FIRST records: most lanes of a workload of many shapes hold a few.
 *      It grows with realloc: an array past the daemon's fixed mmap threshold (main.c) is
 *      usually its own mapping, which grows in place (mremap), leaves no hole behind and has its
 *      slack's pages untouched, so not resident.
 *   4. A queue with unflushed records or a target not yet written is on disk_t.flush_queues,
 *      once, so a flush visits the queues it changed and never walks them all.
 *
 * Rejected: a ring buffer per queue. Returned items go back into the middle-or-front in order,
 * which a ring makes awkward; an array with a movable head gives O(1) pop-front, amortised
 * O(1) push-back and a plain memmove for the rare return.
 */
#include "store/disk/disk_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int disk_model_find(const disk_t *d, const char *model, uint32_t *out_idx)
{
    for (size_t i = 0; i < d->n_models; i++) {
        if (strcmp(d->models[i].name, model) == 0) {
            *out_idx = (uint32_t)i;
            return 1;
        }
    }
    return 0;
}

store_status_t disk_model_intern(disk_t *d, const char *model, uint32_t *out_idx)
{
    if (disk_model_find(d, model, out_idx))
        return STORE_OK;
    if (strlen(model) > SEG_MODEL_MAX)
        return STORE_EINVAL;
    dmodel_t *models = realloc(d->models, (d->n_models + 1) * sizeof(*models));
    if (models == NULL)
        return STORE_ENOMEM;
    d->models = models;
    char *name = strdup(model);
    if (name == NULL)
        return STORE_ENOMEM;
    models[d->n_models] = (dmodel_t){.name = name};
    *out_idx = (uint32_t)d->n_models++;
    return STORE_OK;
}

store_status_t disk_queue_get(disk_t *d, const char *model, uint64_t signature, uint32_t lane,
                              dqueue_t **out)
{
    uint32_t idx;
    store_status_t st = disk_model_intern(d, model, &idx);
    if (st != STORE_OK)
        return st;
    return disk_queue_get_idx(d, idx, signature, lane, out);
}

store_status_t disk_queue_get_idx(disk_t *d, uint32_t idx, uint64_t signature, uint32_t lane,
                                  dqueue_t **out)
{
    map_key_t k = {signature, (uint64_t)idx << 32 | lane};
    dqueue_t *q = map_get(&d->queues, k);
    if (q != NULL) {
        *out = q;
        return STORE_OK;
    }
    if (map_reserve(&d->queues, 1) != MAP_OK || (q = calloc(1, sizeof(*q))) == NULL)
        return STORE_ENOMEM;
    q->base.id = idx; /* queues are named by their keys; the id field is not a ref namespace */
    q->model = d->models[idx].name;
    q->model_idx = idx;
    q->signature = signature;
    q->lane = lane;
    map_put(&d->queues, k, q);
    q->all_next = d->all;
    if (d->all != NULL)
        d->all->all_prev = q;
    d->all = q;
    *out = q;
    return STORE_OK;
}

/* A queue's first array, in records: with thousands of lanes most hold a handful of items,
 * and a larger first array was measured as a few bytes per queued item of empty slots
 * (`lanesched-bench throughput --queue-probe 1000000`, docs/throughput.md). */
#define DISK_QUEUE_FIRST 4u

/* Grows by a quarter, not double (invariant 3). */
store_status_t disk_queue_reserve(dqueue_t *q, size_t extra)
{
    if (q->head + q->len + extra <= q->cap)
        return STORE_OK;
    if (q->len + extra <= q->cap / 2) {
        memmove(q->recs, q->recs + q->head, q->len * sizeof(*q->recs));
        q->head = 0;
        return STORE_OK;
    }
    if (extra > SIZE_MAX / sizeof(drec_t) - q->len)
        return STORE_ENOMEM; /* no array that large can exist */
    size_t cap = q->cap ? q->cap + (q->cap + 3) / 4 : DISK_QUEUE_FIRST;
    if (cap < q->len + extra)
        cap = q->len + extra;
    if (cap > SIZE_MAX / sizeof(drec_t))
        cap = q->len + extra;
    if (q->head != 0) {
        memmove(q->recs, q->recs + q->head, q->len * sizeof(*q->recs));
        q->head = 0;
    }
    drec_t *recs = realloc(q->recs, cap * sizeof(*recs)); /* invariant 3: in place when mapped */
    if (recs == NULL)
        return STORE_ENOMEM;
    q->recs = recs;
    q->cap = cap;
    return STORE_OK;
}

void disk_queue_trim(dqueue_t *q)
{
    if (q->head != 0) {
        memmove(q->recs, q->recs + q->head, q->len * sizeof(*q->recs));
        q->head = 0;
    }
    if (q->len == 0 || q->len == q->cap)
        return;
    drec_t *recs = realloc(q->recs, q->len * sizeof(*recs));
    if (recs != NULL) {
        q->recs = recs;
        q->cap = q->len;
    }
}

store_status_t disk_queue_push(dqueue_t *q, const drec_t *rec, uint64_t arrival_ns)
{
    if (disk_queue_reserve(q, 1) != STORE_OK)
        return STORE_ENOMEM;
    if (q->len == 0)
        q->head_arrival_ns = arrival_ns;
    q->recs[q->head + q->len++] = *rec;
    q->base.queued_items++;
    q->base.queued_tokens += rec->tokens;
    return STORE_OK;
}

void disk_queue_mark_flush(disk_t *d, dqueue_t *q)
{
    if (q->on_flush)
        return;
    q->on_flush = 1;
    q->flush_next = d->flush_queues;
    d->flush_queues = q;
}

static int disk_rec_before(const disk_t *d, const drec_t *a, const dseg_t *seg, uint64_t offset)
{
    const dseg_t *as = disk_rec_seg(d, a);
    return as->seq < seg->seq || (as == seg && a->offset < offset);
}

size_t disk_queue_lower_bound(const disk_t *d, const dqueue_t *q, const dseg_t *seg,
                              uint64_t offset)
{
    size_t lo = 0, hi = q->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (disk_rec_before(d, &q->recs[q->head + mid], seg, offset))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const drec_t *disk_queue_find(const disk_t *d, const dseg_t *seg, uint64_t offset,
                              const seg_entry_t *e)
{
    const dqueue_t *q =
        map_get(&d->queues, (map_key_t){e->signature, (uint64_t)seg->model_idx << 32 | e->lane});
    if (q == NULL)
        return NULL;
    size_t pos = disk_queue_lower_bound(d, q, seg, offset);
    const drec_t *r = pos < q->len ? &q->recs[q->head + pos] : NULL;
    return r != NULL && disk_rec_seg(d, r) == seg && r->offset == offset ? r : NULL;
}

void disk_queue_free(dqueue_t *q)
{
    free(q->recs);
    free(q);
}

void disk_queue_destroy(disk_t *d, dqueue_t *q)
{
    map_del(&d->queues, (map_key_t){q->signature, (uint64_t)q->model_idx << 32 | q->lane}, NULL);
    for (dqueue_t **p = &d->flush_queues; q->on_flush && *p != NULL; p = &(*p)->flush_next) {
        if (*p == q) { /* rare: a lane released in the turn its target changed */
            *p = q->flush_next;
            break;
        }
    }
    if (q->all_prev != NULL)
        q->all_prev->all_next = q->all_next;
    else
        d->all = q->all_next;
    if (q->all_next != NULL)
        q->all_next->all_prev = q->all_prev;
    disk_queue_free(q);
}
