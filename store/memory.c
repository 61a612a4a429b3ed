/*
 * memory.c - the in-memory store backend (--store memory): lane queues of items in RAM.
 *
 * Owns: every item appended (one allocation each: header + id + payload bytes), the lane
 * queues, the pending map and the per-model current-shape field. Nothing survives close.
 *
 * Invariants:
 *   1. Every live item is in exactly one place: the array of its queue (queued) or the pending
 *      map (pending). Completing an item frees it.
 *   2. A queue's array is sorted by offset, offsets are handed out in append order, so the
 *      array order is arrival order, returned items included.
 *   3. queued_items/queued_tokens equal the sums over the queue's array; pending_items counts
 *      the queue's entries in the pending map.
 *   4. Commit and return check everything and reserve all memory before changing anything, so a
 *      failure (stale peek, not pending, out of memory) leaves the store as it was.
 *   5. A ref whose queue id was handed out and whose offset is below the queue's next offset
 *      names an item that existed: if it is neither queued nor pending it was completed, which
 *      is how a second completion is recognised as harmless. A released queue held only
 *      completed items; its next offset is remembered (16 bytes per released queue, for the
 *      store's life) so refs below it read as completed and refs past it as never issued.
 * 1-3 are executable (memory_check.c): Debug builds check the touched queue after every
 * operation on it.
 *
 * Rejected: a ring buffer per queue. Returned items go back into the middle-or-front in offset
 * order, which a ring makes awkward; an array with a movable head gives O(1) pop-front, O(1)
 * push-back (amortised) and a plain memmove for the rare return.
 */
#include "store/memory_int.h"

#include "common/invariant.h"

#include <stdlib.h>
#include <string.h>

static mem_store_t *mem_of(store_t *store)
{
    return (mem_store_t *)store;
}

static map_key_t mem_ref_key(store_ref_t ref)
{
    return (map_key_t){ref.queue, ref.offset};
}

static store_status_t mem_model_find(mem_store_t *ms, const char *model, int create,
                                     size_t *out_idx)
{
    for (size_t i = 0; i < ms->n_models; i++) {
        if (strcmp(ms->models[i].name, model) == 0) {
            *out_idx = i;
            return STORE_OK;
        }
    }
    if (!create)
        return STORE_EINVAL;
    mem_model_t *models = realloc(ms->models, (ms->n_models + 1) * sizeof(*models));
    if (models == NULL)
        return STORE_ENOMEM;
    ms->models = models;
    char *name = strdup(model);
    if (name == NULL)
        return STORE_ENOMEM;
    models[ms->n_models] = (mem_model_t){.name = name};
    *out_idx = ms->n_models++;
    return STORE_OK;
}

static void mem_queue_free(mem_queue_t *q)
{
    for (size_t i = 0; i < q->len; i++)
        free(q->items[q->head + i]);
    free(q->items);
    free(q);
}

static void mem_close(store_t *store)
{
    mem_store_t *ms = mem_of(store);
    for (size_t i = 0; i < ms->pending.cap; i++)
        free(ms->pending.slots[i].value);
    for (size_t i = 0; i < ms->queues_by_id.cap; i++) {
        if (ms->queues_by_id.slots[i].value != NULL)
            mem_queue_free(ms->queues_by_id.slots[i].value);
    }
    map_fini(&ms->pending);
    map_fini(&ms->released);
    map_fini(&ms->queues_by_id);
    map_fini(&ms->queues_by_key);
    for (size_t i = 0; i < ms->n_models; i++)
        free(ms->models[i].name);
    free(ms->models);
    free(ms);
}

static store_status_t mem_queue_open(store_t *store, const store_key_t *key, store_queue_t **out)
{
    mem_store_t *ms = mem_of(store);
    size_t idx;
    store_status_t st = mem_model_find(ms, key->model, 1, &idx);
    if (st != STORE_OK)
        return st;
    map_key_t k = {key->signature, (uint64_t)idx << 32 | key->lane};
    mem_queue_t *q = map_get(&ms->queues_by_key, k);
    if (q != NULL) {
        *out = &q->base;
        return STORE_OK;
    }
    /* the released-map slot is reserved now, so that releasing the queue cannot fail */
    if (map_reserve(&ms->queues_by_key, 1) != MAP_OK ||
        map_reserve(&ms->queues_by_id, 1) != MAP_OK ||
        map_reserve(&ms->released, ms->queues_by_id.len + 1) != MAP_OK)
        return STORE_ENOMEM;
    q = calloc(1, sizeof(*q));
    if (q == NULL)
        return STORE_ENOMEM;
    q->base.id = ms->next_queue_id++;
    q->signature = key->signature;
    q->model_idx = (uint32_t)idx;
    q->lane = key->lane;
    map_put(&ms->queues_by_key, k, q);
    map_put(&ms->queues_by_id, (map_key_t){q->base.id, 0}, q);
    *out = &q->base;
    return STORE_OK;
}

static store_status_t mem_queue_release(store_t *store, store_queue_t *queue)
{
    mem_store_t *ms = mem_of(store);
    mem_queue_t *q = (mem_queue_t *)queue;
    if (map_put(&ms->released, (map_key_t){q->base.id, 0},
                (void *)(uintptr_t)(q->next_offset + 1)) != MAP_OK)
        return STORE_ENOMEM;
    map_del(&ms->queues_by_key, (map_key_t){q->signature, (uint64_t)q->model_idx << 32 | q->lane},
            NULL);
    map_del(&ms->queues_by_id, (map_key_t){q->base.id, 0}, NULL);
    mem_queue_free(q);
    return STORE_OK;
}

/* Makes room for `extra` more items after q's last one. Compacts only when that frees at
 * least half the array, so each item is moved O(1) times amortised. */
static store_status_t mem_queue_reserve(mem_queue_t *q, size_t extra)
{
    if (q->head + q->len + extra <= q->cap)
        return STORE_OK;
    if (q->len + extra <= q->cap / 2) {
        memmove(q->items, q->items + q->head, q->len * sizeof(*q->items));
        q->head = 0;
        return STORE_OK;
    }
    size_t cap = q->cap ? q->cap * 2 : 16;
    while (cap < q->len + extra)
        cap *= 2;
    mem_item_t **items = malloc(cap * sizeof(*items));
    if (items == NULL)
        return STORE_ENOMEM;
    if (q->len != 0)
        memcpy(items, q->items + q->head, q->len * sizeof(*items));
    free(q->items);
    q->items = items;
    q->cap = cap;
    q->head = 0;
    return STORE_OK;
}

static store_status_t mem_append(store_t *store, store_queue_t *queue, const store_item_t *item,
                                 store_ref_t *out_ref)
{
    (void)store; /* read only by the invariant check */
    mem_queue_t *q = (mem_queue_t *)queue;
    if (item->id_len > UINT32_MAX || item->payload_len > UINT32_MAX)
        return STORE_EINVAL;
    if (mem_queue_reserve(q, 1) != STORE_OK)
        return STORE_ENOMEM;
    mem_item_t *it = malloc(sizeof(*it) + item->id_len + item->payload_len);
    if (it == NULL)
        return STORE_ENOMEM;
    it->ref = (store_ref_t){q->base.id, q->next_offset++};
    it->queue = q;
    it->arrival_ns = item->arrival_ns;
    it->tokens = item->tokens;
    it->prefix_tokens = item->prefix_tokens;
    it->max_wait_ms = item->max_wait_ms;
    it->deliveries = 0;
    it->prefix_tokens = item->prefix_tokens;
    it->max_wait_ms = item->max_wait_ms;
    it->id_len = (uint32_t)item->id_len;
    it->payload_len = (uint32_t)item->payload_len;
    if (item->id_len != 0)
        memcpy(it->bytes, item->id, item->id_len);
    if (item->payload_len != 0)
        memcpy(it->bytes + item->id_len, item->payload, item->payload_len);
    q->items[q->head + q->len++] = it;
    q->base.queued_items++;
    q->base.queued_tokens += item->tokens;
    INVARIANT_CHECK(mem_queue_touched_check(mem_of(store), q));
    if (out_ref != NULL)
        *out_ref = it->ref;
    return STORE_OK;
}

static store_status_t mem_peek(store_t *store, store_queue_t *queue, store_view_t *views,
                               size_t max, size_t *out_n)
{
    (void)store;
    mem_queue_t *q = (mem_queue_t *)queue;
    size_t n = q->len < max ? q->len : max;
    for (size_t i = 0; i < n; i++) {
        const mem_item_t *it = q->items[q->head + i];
        views[i] = (store_view_t){
            .ref = it->ref,
            .id_view = it->bytes,
            .id_len = it->id_len,
            .payload_view = it->bytes + it->id_len,
            .payload_len = it->payload_len,
            .tokens = it->tokens,
            .deliveries = it->deliveries,
            .signature = q->signature,
            .arrival_ns = it->arrival_ns,
            .prefix_tokens = it->prefix_tokens,
            .max_wait_ms = it->max_wait_ms,
        };
    }
    *out_n = n;
    return STORE_OK;
}

static store_status_t mem_peek_tokens(store_t *store, store_queue_t *queue, uint32_t *tokens,
                                      uint32_t *deliveries, size_t max, size_t *out_n)
{
    (void)store;
    mem_queue_t *q = (mem_queue_t *)queue;
    size_t n = q->len < max ? q->len : max;
    for (size_t i = 0; i < n; i++) {
        tokens[i] = q->items[q->head + i]->tokens;
        deliveries[i] = q->items[q->head + i]->deliveries;
    }
    *out_n = n;
    return STORE_OK;
}

static store_status_t mem_commit(store_t *store, store_queue_t *queue, const store_ref_t *refs,
                                 size_t n)
{
    mem_store_t *ms = mem_of(store);
    mem_queue_t *q = (mem_queue_t *)queue;
    /* Step 1: verify the whole batch against the queue front and reserve, touching nothing. */
    if (n > q->len)
        return STORE_ESTALE;
    for (size_t i = 0; i < n; i++) {
        const store_ref_t *have = &q->items[q->head + i]->ref;
        if (have->queue != refs[i].queue || have->offset != refs[i].offset)
            return STORE_ESTALE;
    }
    if (map_reserve(&ms->pending, n) != MAP_OK)
        return STORE_ENOMEM;
    /* Step 2: advance the cursor. */
    mem_item_t **taken = q->items + q->head;
    q->head += n;
    q->len -= n;
    if (q->len == 0)
        q->head = 0;
    /* Step 3: the pending map. The slots below head stay readable until the next append. */
    for (size_t i = 0; i < n; i++) {
        mem_item_t *it = taken[i];
        it->deliveries++;
        q->base.queued_items--;
        q->base.queued_tokens -= it->tokens;
        q->base.pending_items++;
        map_put(&ms->pending, mem_ref_key(it->ref), it);
    }
    INVARIANT_CHECK(mem_queue_touched_check(ms, q));
    return STORE_OK;
}

/* Index of the first queued item of q whose offset is >= offset. */
static size_t mem_queue_lower_bound(const mem_queue_t *q, uint64_t offset)
{
    size_t lo = 0, hi = q->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (q->items[q->head + mid]->ref.offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static store_status_t mem_tombstone(store_t *store, store_ref_t ref, int *out_completed)
{
    mem_store_t *ms = mem_of(store);
    mem_item_t *it = NULL;
    if (map_del(&ms->pending, mem_ref_key(ref), (void **)&it) == MAP_OK) {
        it->queue->base.pending_items--;
        INVARIANT_CHECK(mem_queue_counts_check(it->queue));
        free(it);
        if (out_completed != NULL)
            *out_completed = 1;
        return STORE_OK;
    }
    /* Not pending: completed before, or never a pending item at all (invariant 5). */
    if (ref.queue >= ms->next_queue_id)
        return STORE_ENOTPENDING;
    mem_queue_t *q = map_get(&ms->queues_by_id, (map_key_t){ref.queue, 0});
    if (q != NULL) {
        if (ref.offset >= q->next_offset)
            return STORE_ENOTPENDING;
        size_t pos = mem_queue_lower_bound(q, ref.offset);
        if (pos < q->len && q->items[q->head + pos]->ref.offset == ref.offset)
            return STORE_ENOTPENDING;
    } else {
        uintptr_t end = (uintptr_t)map_get(&ms->released, (map_key_t){ref.queue, 0});
        if (ref.offset + 1 >= end)
            return STORE_ENOTPENDING;
    }
    if (out_completed != NULL)
        *out_completed = 0;
    return STORE_OK;
}

static store_status_t mem_return(store_t *store, const store_ref_t *refs, size_t n, int unseen)
{
    mem_store_t *ms = mem_of(store);
    /* Verify and reserve first (invariant 4). */
    for (size_t i = 0; i < n; i++) {
        mem_item_t *it = map_get(&ms->pending, mem_ref_key(refs[i]));
        if (it == NULL)
            return STORE_ENOTPENDING;
        for (size_t j = 0; j < i; j++) {
            if (refs[j].queue == refs[i].queue && refs[j].offset == refs[i].offset)
                return STORE_EINVAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        mem_item_t *it = map_get(&ms->pending, mem_ref_key(refs[i]));
        size_t extra = 0;
        for (size_t j = 0; j < n; j++)
            extra += refs[j].queue == refs[i].queue;
        if (mem_queue_reserve(it->queue, extra) != STORE_OK)
            return STORE_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        mem_item_t *it = NULL;
        map_del(&ms->pending, mem_ref_key(refs[i]), (void **)&it);
        mem_queue_t *q = it->queue;
        size_t pos = mem_queue_lower_bound(q, it->ref.offset);
        if (pos == 0 && q->head > 0) {
            q->head--;
        } else {
            memmove(q->items + q->head + pos + 1, q->items + q->head + pos,
                    (q->len - pos) * sizeof(*q->items));
        }
        if (unseen && it->deliveries > 0)
            it->deliveries--;
        q->items[q->head + pos] = it;
        q->len++;
        q->base.queued_items++;
        q->base.queued_tokens += it->tokens;
        q->base.pending_items--;
        /* Whole: a return is rare and already moves O(queue) items. */
        INVARIANT_CHECK(mem_queue_check(ms, q));
    }
    return STORE_OK;
}

static uint64_t mem_pending_count(const store_t *store)
{
    return ((const mem_store_t *)store)->pending.len;
}

static void mem_usage_get(const store_t *store, store_usage_t *out)
{
    (void)store;
    *out = (store_usage_t){0};
}

static store_status_t mem_current_shape_set(store_t *store, const char *model, uint64_t signature)
{
    mem_store_t *ms = mem_of(store);
    size_t idx;
    store_status_t st = mem_model_find(ms, model, 1, &idx);
    if (st != STORE_OK)
        return st;
    ms->models[idx].has_current = 1;
    ms->models[idx].current = signature;
    return STORE_OK;
}

static store_status_t mem_current_shape_get(store_t *store, const char *model, int *out_has,
                                            uint64_t *out_signature)
{
    mem_store_t *ms = mem_of(store);
    size_t idx;
    if (mem_model_find(ms, model, 0, &idx) != STORE_OK || !ms->models[idx].has_current) {
        *out_has = 0;
        return STORE_OK;
    }
    *out_has = 1;
    *out_signature = ms->models[idx].current;
    return STORE_OK;
}

static store_status_t mem_flush(store_t *store)
{
    (void)store;
    return STORE_OK;
}

static uint64_t mem_unflushed_bytes(const store_t *store)
{
    (void)store;
    return 0;
}

static store_status_t mem_queue_target_set(store_t *store, store_queue_t *queue, uint32_t target)
{
    (void)store;
    ((mem_queue_t *)queue)->target = target;
    return STORE_OK;
}

static int mem_queue_next(store_t *store, store_queue_t *prev, store_queue_t **out,
                          store_key_t *out_key, uint32_t *out_target)
{
    mem_store_t *ms = mem_of(store);
    /* Slot order of the id map: stable while no queue is opened or released in between. */
    size_t start = 0;
    if (prev != NULL) {
        for (; start < ms->queues_by_id.cap; start++) {
            if (ms->queues_by_id.slots[start].value == prev) {
                start++;
                break;
            }
        }
    }
    for (size_t i = start; i < ms->queues_by_id.cap; i++) {
        mem_queue_t *q = ms->queues_by_id.slots[i].value;
        if (q == NULL)
            continue;
        if (out != NULL)
            *out = &q->base;
        if (out_key != NULL)
            *out_key = (store_key_t){ms->models[q->model_idx].name, q->signature, q->lane};
        if (out_target != NULL)
            *out_target = q->target;
        return 1;
    }
    return 0;
}

static store_status_t mem_queue_scan(store_t *store, store_queue_t *queue, store_scan_fn fn,
                                     void *ctx)
{
    (void)store;
    mem_queue_t *q = (mem_queue_t *)queue;
    for (size_t i = 0; i < q->len; i++) {
        const mem_item_t *it = q->items[q->head + i];
        store_view_t v = {.ref = it->ref,
                          .id_view = it->bytes,
                          .id_len = it->id_len,
                          .payload_len = it->payload_len,
                          .tokens = it->tokens,
                          .deliveries = it->deliveries,
                          .signature = q->signature,
                          .arrival_ns = it->arrival_ns,
                          .prefix_tokens = it->prefix_tokens,
                          .max_wait_ms = it->max_wait_ms};
        fn(ctx, &v);
    }
    return STORE_OK;
}

static int mem_queue_oldest(const store_t *store, const store_queue_t *queue, uint64_t *out)
{
    (void)store;
    const mem_queue_t *q = (const mem_queue_t *)queue;
    if (q->len == 0)
        return 0;
    *out = q->items[q->head]->arrival_ns;
    return 1;
}

/* Every memory store of the process draws from one count: no epoch repeats within its life. */
static store_status_t mem_epoch_next(store_t *store, uint32_t *out)
{
    (void)store;
    static uint32_t last; /* 0 until the first draw */
    uint32_t seen = __atomic_load_n(&last, __ATOMIC_RELAXED), next;
    do
        next = seen == 0 ? store_epoch_random() : seen % STORE_EPOCH_MAX + 1u;
    while (!__atomic_compare_exchange_n(&last, &seen, next, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    *out = next;
    return STORE_OK;
}

static const struct store_ops mem_ops = {
    .queue_oldest = mem_queue_oldest,
    .queue_scan = mem_queue_scan,
    .flush = mem_flush,
    .unflushed_bytes = mem_unflushed_bytes,
    .queue_target_set = mem_queue_target_set,
    .queue_next = mem_queue_next,
    .close = mem_close,
    .queue_open = mem_queue_open,
    .queue_release = mem_queue_release,
    .append = mem_append,
    .peek = mem_peek,
    .peek_tokens = mem_peek_tokens,
    .commit = mem_commit,
    .tombstone = mem_tombstone,
    .ret = mem_return,
    .pending_count = mem_pending_count,
    .usage_get = mem_usage_get,
    .current_shape_set = mem_current_shape_set,
    .current_shape_get = mem_current_shape_get,
    .epoch_next = mem_epoch_next,
};

store_status_t store_open_memory(store_t **out)
{
    if (out == NULL)
        return STORE_EINVAL;
    mem_store_t *ms = calloc(1, sizeof(*ms));
    if (ms == NULL)
        return STORE_ENOMEM;
    ms->base.ops = &mem_ops;
    map_init(&ms->queues_by_key);
    map_init(&ms->queues_by_id);
    map_init(&ms->pending);
    map_init(&ms->released);
    *out = &ms->base;
    return STORE_OK;
}
