/*
 * disk_flush.c - the readable boundary of the disk backend: store_flush makes every append and
 * tombstone so far durable at the configured level, records the new boundaries in the index,
 * and only then moves them.
 *
 * Invariants:
 *   1. Readers never see bytes past a segment's readable boundary, and the boundary advances
 *      only here: after the data is handed to the kernel (every append is a pwrite) or synced
 *      (power level), and after the index transaction that records it has committed.
 *   2. Every index change of a flush goes into one LMDB transaction: segment rows, released
 *      lanes (deleted before the puts, so a lane reopened under the same key since is kept),
 *      lane targets, current shapes, the next segment id.
 *   3. A flush with nothing dirty walks no queue and opens no transaction (an idle turn).
 *
 * Rejected: syncing each segment as it is written. Appends between two flushes share one sync
 * per touched segment (group commit); the caller bounds the wait with store_unflushed_bytes.
 */
#include "store/disk_int.h"

#include "common/invariant.h"

#include <errno.h>
#include <stdlib.h>

store_status_t disk_flush(disk_t *d)
{
    if (d->failed)
        return STORE_EIO;
    if (d->cfg.durability == STORE_DURABLE_POWER) {
        for (dseg_t *seg = d->dirty; seg != NULL; seg = seg->dirty_next) {
            if (!seg->needs_sync || seg->fd < 0)
                continue;
            if (store_fault_fsync(seg->fd, 1) != 0)
                return disk_fail(d, "fdatasync of a segment", errno);
            seg->needs_sync = 0;
        }
    }
    if (d->dirty == NULL && !d->meta_dirty && d->n_released == 0 && !d->rows_dirty)
        return STORE_OK; /* invariant 3 */

    index_txn_t *txn = NULL;
    index_status_t ist = index_begin(d->index, &txn);
    for (dseg_t *seg = d->dirty; seg != NULL && ist == INDEX_OK; seg = seg->dirty_next) {
        index_segment_row_t row = disk_seg_row(seg);
        row.readable = seg->size;
        row.entries = seg->entries;
        row.tokens = seg->tokens;
        ist = index_segment_put(txn, &row);
    }
    /* Released lanes first: a lane opened again under the same key since then is put after. */
    for (size_t i = 0; i < d->n_released && ist == INDEX_OK; i++)
        ist = index_lane_del(txn, d->released[i].model, d->released[i].signature,
                             d->released[i].lane);
    for (dqueue_t *q = d->rows_dirty ? d->all : NULL; q != NULL && ist == INDEX_OK;
         q = q->all_next) {
        if (q->target_dirty)
            ist = index_lane_put(txn, q->model, q->signature, q->lane, q->target);
    }
    for (size_t i = 0; d->rows_dirty && i < d->n_models && ist == INDEX_OK; i++) {
        if (d->models[i].current_dirty)
            ist = index_current_put(txn, d->models[i].name, d->models[i].current);
    }
    if (ist == INDEX_OK && d->meta_dirty)
        ist = index_meta_put(txn, d->next_segment_id);
    if (ist != INDEX_OK) {
        index_abort(txn);
        return disk_fail(d, "writing the index", EIO);
    }
    if (index_commit(txn) != INDEX_OK) {
        int rc = index_error_get(d->index);
        return disk_fail(d, "committing the index", rc > 0 ? rc : EIO);
    }

    /* Committed: only now do the boundaries move (invariant 1). */
    for (dseg_t *seg = d->dirty, *next; seg != NULL; seg = next) {
        next = seg->dirty_next;
        seg->readable = seg->size;
        seg->flushed_entries = seg->entries;
        seg->flushed_tokens = seg->tokens;
        seg->q->n_unflushed = 0;
        seg->dirty = 0;
        seg->dirty_next = NULL;
        INVARIANT_CHECK(disk_seg_check(d, seg) && disk_queue_counts_check(seg->q));
    }
    d->dirty = NULL;
    for (dqueue_t *q = d->rows_dirty ? d->all : NULL; q != NULL; q = q->all_next)
        q->target_dirty = 0;
    for (size_t i = 0; d->rows_dirty && i < d->n_models; i++)
        d->models[i].current_dirty = 0;
    d->rows_dirty = 0;
    for (size_t i = 0; i < d->n_released; i++)
        free(d->released[i].model);
    d->n_released = 0;
    d->meta_dirty = 0;
    d->unflushed_bytes = 0;
    return STORE_OK;
}
