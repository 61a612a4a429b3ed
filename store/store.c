/*
 * store.c - the store's public entry points: argument checks shared by every backend, then
 * dispatch through the backend's vtable.
 *
 * Invariants:
 *   1. A call that fails leaves every out pointer untouched (checked here before dispatch for
 *      argument errors; backends keep the same rule for their own failures).
 *   2. store_status_str is generated from STORE_STATUS_MAP, so codes and texts never drift.
 *
 * Rejected: a compile-time backend switch. The daemon picks memory or disk with a flag
 * (--store), and tests run the same cases against both, so the choice is made at open time.
 */
#include "store/store_int.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

STATUS_STR(store_status_str, store_status_t, STORE_STATUS_MAP, "unknown store status")

void store_close(store_t *store)
{
    if (store != NULL)
        store->ops->close(store);
}

store_status_t store_queue_open(store_t *store, const store_key_t *key, store_queue_t **out)
{
    if (store == NULL || key == NULL || key->model == NULL || key->model[0] == '\0' || out == NULL)
        return STORE_EINVAL;
    return store->ops->queue_open(store, key, out);
}

store_status_t store_queue_release(store_t *store, store_queue_t *queue)
{
    if (store == NULL || queue == NULL)
        return STORE_EINVAL;
    if (queue->queued_items != 0 || queue->pending_items != 0)
        return STORE_EBUSY;
    return store->ops->queue_release(store, queue);
}

store_status_t store_append(store_t *store, store_queue_t *queue, const store_item_t *item,
                            store_ref_t *out_ref)
{
    if (store == NULL || queue == NULL || item == NULL || item->tokens == 0 ||
        (item->id_len != 0 && item->id == NULL) ||
        (item->payload_len != 0 && item->payload == NULL))
        return STORE_EINVAL;
    return store->ops->append(store, queue, item, out_ref);
}

store_status_t store_peek(store_t *store, store_queue_t *queue, store_view_t *views, size_t max,
                          size_t *out_n)
{
    if (store == NULL || queue == NULL || (views == NULL && max != 0) || out_n == NULL)
        return STORE_EINVAL;
    return store->ops->peek(store, queue, views, max, out_n);
}

store_status_t store_peek_tokens(store_t *store, store_queue_t *queue, uint32_t *tokens,
                                 uint32_t *deliveries, size_t max, size_t *out_n)
{
    if (store == NULL || queue == NULL || ((tokens == NULL || deliveries == NULL) && max != 0) ||
        out_n == NULL)
        return STORE_EINVAL;
    return store->ops->peek_tokens(store, queue, tokens, deliveries, max, out_n);
}

store_status_t store_commit(store_t *store, store_queue_t *queue, const store_ref_t *refs, size_t n)
{
    if (store == NULL || queue == NULL || (refs == NULL && n != 0))
        return STORE_EINVAL;
    if (n == 0)
        return STORE_OK;
    return store->ops->commit(store, queue, refs, n);
}

void store_prefetch(const store_t *store, store_ref_t ref, unsigned level)
{
    if (store != NULL && store->ops->prefetch != NULL)
        store->ops->prefetch(store, ref, level);
}

store_status_t store_tombstone(store_t *store, store_ref_t ref, int *out_completed)
{
    if (store == NULL)
        return STORE_EINVAL;
    return store->ops->tombstone(store, ref, out_completed);
}

static store_status_t store_return_as(store_t *store, const store_ref_t *refs, size_t n, int unseen)
{
    if (store == NULL || (refs == NULL && n != 0))
        return STORE_EINVAL;
    if (n == 0)
        return STORE_OK;
    return store->ops->ret(store, refs, n, unseen);
}

store_status_t store_return(store_t *store, const store_ref_t *refs, size_t n)
{
    return store_return_as(store, refs, n, 0);
}

store_status_t store_return_unseen(store_t *store, const store_ref_t *refs, size_t n)
{
    return store_return_as(store, refs, n, 1);
}

void store_queue_count(const store_queue_t *queue, uint64_t *out_items, uint64_t *out_tokens)
{
    if (out_items != NULL)
        *out_items = queue->queued_items;
    if (out_tokens != NULL)
        *out_tokens = queue->queued_tokens;
}

uint64_t store_pending_count(const store_t *store)
{
    return store->ops->pending_count(store);
}

void store_usage_get(const store_t *store, store_usage_t *out)
{
    store->ops->usage_get(store, out);
}

store_status_t store_current_shape_set(store_t *store, const char *model, uint64_t signature)
{
    if (store == NULL || model == NULL || model[0] == '\0')
        return STORE_EINVAL;
    return store->ops->current_shape_set(store, model, signature);
}

store_status_t store_current_shape_get(store_t *store, const char *model, int *out_has,
                                       uint64_t *out_signature)
{
    if (store == NULL || model == NULL || model[0] == '\0' || out_has == NULL ||
        out_signature == NULL)
        return STORE_EINVAL;
    return store->ops->current_shape_get(store, model, out_has, out_signature);
}

store_status_t store_flush(store_t *store)
{
    if (store == NULL)
        return STORE_EINVAL;
    return store->ops->flush(store);
}

uint64_t store_unflushed_bytes(const store_t *store)
{
    return store->ops->unflushed_bytes(store);
}

store_status_t store_queue_target_set(store_t *store, store_queue_t *queue, uint32_t target)
{
    if (store == NULL || queue == NULL)
        return STORE_EINVAL;
    return store->ops->queue_target_set(store, queue, target);
}

int store_queue_next(store_t *store, store_queue_t *prev, store_queue_t **out, store_key_t *out_key,
                     uint32_t *out_target)
{
    if (store == NULL)
        return 0;
    return store->ops->queue_next(store, prev, out, out_key, out_target);
}

store_status_t store_queue_scan(store_t *store, store_queue_t *queue, store_scan_fn fn, void *ctx)
{
    if (store == NULL || queue == NULL || fn == NULL)
        return STORE_EINVAL;
    return store->ops->queue_scan(store, queue, fn, ctx);
}

void store_queue_prefetch(const store_t *store, const store_queue_t *queue, unsigned level)
{
    if (store != NULL && queue != NULL && store->ops->queue_prefetch != NULL)
        store->ops->queue_prefetch(store, queue, level);
}

int store_queue_oldest(const store_t *store, const store_queue_t *queue, uint64_t *out_arrival_ns)
{
    if (store == NULL || queue == NULL || out_arrival_ns == NULL)
        return 0;
    return store->ops->queue_oldest(store, queue, out_arrival_ns);
}

store_status_t store_epoch_next(store_t *store, uint32_t *out_epoch)
{
    if (store == NULL || out_epoch == NULL)
        return STORE_EINVAL;
    return store->ops->epoch_next(store, out_epoch);
}

uint32_t store_epoch_random(void)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 8;
    return (r & ((1u << 20) - 1u)) + 1u;
}
