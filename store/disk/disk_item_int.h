/*
 * disk_item_int.h - private to store/disk/: the item operations of the disk backend (disk_item.c),
 * for the vtable in disk.c. Each is the backend's half of the store.h call of the same name,
 * called only through store.c after its argument checks; pointers and ownership as there.
 */
#ifndef LANESCHED_DISK_ITEM_INT_H
#define LANESCHED_DISK_ITEM_INT_H

#include "store/disk/disk_int.h"

store_status_t disk_append(store_t *store, store_queue_t *queue, const store_item_t *item,
                           store_ref_t *out_ref /* out, may be NULL */);
/* views: caller memory for `max` entries; what they point at is a view into d->scratch. */
store_status_t disk_peek(store_t *store, store_queue_t *queue, store_view_t *views, size_t max,
                         size_t *out_n /* out */);
/* From the records alone: no entry is read. */
store_status_t disk_peek_tokens(store_t *store, store_queue_t *queue, uint32_t *tokens,
                                uint32_t *deliveries, size_t max, size_t *out_n /* out */);
store_status_t disk_commit(store_t *store, store_queue_t *queue, const store_ref_t *refs, size_t n);
store_status_t disk_tombstone(store_t *store, store_ref_t ref, int *out_completed /* out */);
/* store_prefetch: level 0 the pending map's slot of ref, level 1 the pending record in it. */
void disk_prefetch(const store_t *store, store_ref_t ref, unsigned level);
store_status_t disk_return(store_t *store, const store_ref_t *refs, size_t n, int unseen);
/* fn gets views valid for the call only. */
store_status_t disk_queue_scan(store_t *store, store_queue_t *queue, store_scan_fn fn, void *ctx);
int disk_queue_oldest(const store_t *store, const store_queue_t *queue, uint64_t *out /* out */);
/* store_queue_prefetch: level 0 the queue's record, level 1 its front record. */
void disk_queue_prefetch(const store_t *store, const store_queue_t *queue, unsigned level);

#endif
