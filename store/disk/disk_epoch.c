/*
 * disk_epoch.c - the disk store's epoch (store_epoch_next): opens of the data directory,
 * counted in the LMDB index.
 *
 * Invariants:
 *   1. An epoch is returned only after the index transaction that records it committed, so a
 *      crash right after cannot hand the same epoch out again at the next open.
 *   2. A store in its error state hands out nothing (its index may not be writable).
 *
 * Rejected: a file of its own beside the index (one more thing to sync and to damage), and
 * the segment sequence numbers (they restart with a rebuilt index too, and move with traffic).
 */
#include "store/disk/disk_int.h"

store_status_t disk_epoch_next(store_t *store, uint32_t *out_epoch)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    index_status_t st = index_epoch_next(d->index, out_epoch);
    if (st != INDEX_OK) {
        disk_log(d, STORE_LOG_ERROR, "cannot record the store's epoch in the index: %s",
                 index_status_str(st));
        return st == INDEX_ENOMEM ? STORE_ENOMEM : STORE_EINDEX;
    }
    return STORE_OK;
}
