/*
 * memory_check.c - the memory backend's structural rules as executable checks
 * (common/invariant.h). Each returns 1 when its rules hold, else reports the first broken one
 * and returns 0. They only read; memory.c calls them through INVARIANT_CHECK (Debug builds),
 * tests directly.
 *
 * The rules, numbered as the reports cite them:
 *   1. Queue counters: head + len <= cap; queued_items == len; queued_tokens >= len (every item
 *      has at least one token) and equals the sum over the items.
 *   2. Queue items: each names this queue (pointer and ref), has at least one token, an offset
 *      below next_offset, and the offsets ascend (arrival order, returned items included).
 *   3. Pending map: every entry is keyed by its own ref, belongs to a live queue, has been
 *      delivered at least once and is not also queued; the queues' pending_items add up to its
 *      size (memory.c's invariant 1).
 *   4. Queue maps: both hold the same queues, each under its own key and id, below
 *      next_queue_id, with a known model, and no live id is also released.
 *
 * Cost: rule 1 is O(1) and runs after every operation on a queue; rule 2 is O(queue) and runs
 * when the touched queue's length is a power of two (amortised O(1) over a run of appends) and
 * after every return; rules 3-4 are O(store), for tests.
 *
 * Rejected: the whole store after every operation, which would make the scheduler's Debug
 * tests quadratic in the items they queue.
 */
#include "store/memory_int.h"

#include "common/invariant.h"

#include <inttypes.h>

int mem_queue_counts_check(const mem_queue_t *q)
{
    INVARIANT_HOLDS(q->head + q->len <= q->cap, "queue %" PRIu64 ": head %zu, len %zu, cap %zu",
                    q->base.id, q->head, q->len, q->cap);
    INVARIANT_HOLDS(q->base.queued_items == q->len && q->base.queued_tokens >= q->len,
                    "queue %" PRIu64 ": queued_items %" PRIu64 ", tokens %" PRIu64 ", items %zu",
                    q->base.id, q->base.queued_items, q->base.queued_tokens, q->len);
    return 1;
}

int mem_queue_check(const mem_store_t *ms, const mem_queue_t *q)
{
    if (!mem_queue_counts_check(q))
        return 0;
    INVARIANT_HOLDS(map_get(&ms->queues_by_id, (map_key_t){q->base.id, 0}) == q,
                    "queue %" PRIu64 " is not the live queue of its id", q->base.id);
    uint64_t tokens = 0;
    for (size_t i = 0; i < q->len; i++) {
        const mem_item_t *it = q->items[q->head + i];
        INVARIANT_HOLDS(it->queue == q && it->ref.queue == q->base.id && it->tokens > 0 &&
                            it->ref.offset < q->next_offset,
                        "queue %" PRIu64 ": item %zu (ref %" PRIu64 "/%" PRIu64 ", %" PRIu32
                        " tokens, next offset %" PRIu64 ")",
                        q->base.id, i, it->ref.queue, it->ref.offset, it->tokens, q->next_offset);
        INVARIANT_HOLDS(i == 0 || q->items[q->head + i - 1]->ref.offset < it->ref.offset,
                        "queue %" PRIu64 ": item %zu (offset %" PRIu64 ") is not after item %zu",
                        q->base.id, i, it->ref.offset, i - 1);
        tokens += it->tokens;
    }
    INVARIANT_HOLDS(tokens == q->base.queued_tokens,
                    "queue %" PRIu64 ": queued_tokens %" PRIu64 ", items hold %" PRIu64, q->base.id,
                    q->base.queued_tokens, tokens);
    return 1;
}

int mem_queue_touched_check(const mem_store_t *ms, const mem_queue_t *q)
{
    if (!mem_queue_counts_check(q))
        return 0;
    INVARIANT_HOLDS(q->base.pending_items <= ms->pending.len,
                    "queue %" PRIu64 ": %" PRIu64 " pending, the map holds %zu", q->base.id,
                    q->base.pending_items, ms->pending.len);
    return (q->len & (q->len - 1)) != 0 || mem_queue_check(ms, q);
}

/* Index of the first queued item of q whose offset is >= offset. A copy of memory.c's search
 * (it relies on rule 2, checked first), so the checks call nothing in the file they check. */
static size_t mem_check_lower_bound(const mem_queue_t *q, uint64_t offset)
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

int mem_check(const mem_store_t *ms)
{
    uint64_t pending = 0;
    INVARIANT_HOLDS(ms->queues_by_id.len == ms->queues_by_key.len, "%zu queues by id, %zu by key",
                    ms->queues_by_id.len, ms->queues_by_key.len);
    for (size_t i = 0; i < ms->queues_by_id.cap; i++) {
        const mem_queue_t *q = ms->queues_by_id.slots[i].value;
        if (q == NULL)
            continue;
        map_key_t k = {q->signature, (uint64_t)q->model_idx << 32 | q->lane};
        INVARIANT_HOLDS(ms->queues_by_id.slots[i].key.a == q->base.id &&
                            q->base.id < ms->next_queue_id && q->model_idx < ms->n_models &&
                            map_get(&ms->queues_by_key, k) == q &&
                            map_get(&ms->released, (map_key_t){q->base.id, 0}) == NULL,
                        "queue %" PRIu64 " is not where the maps say (next id %" PRIu64 ")",
                        q->base.id, ms->next_queue_id);
        if (!mem_queue_check(ms, q))
            return 0;
        pending += q->base.pending_items;
    }
    INVARIANT_HOLDS(pending == ms->pending.len, "queues count %" PRIu64 " pending, the map %zu",
                    pending, ms->pending.len);
    for (size_t i = 0; i < ms->pending.cap; i++) {
        const map_slot_t *slot = &ms->pending.slots[i];
        const mem_item_t *it = slot->value;
        if (it == NULL)
            continue;
        const mem_queue_t *q = it->queue;
        INVARIANT_HOLDS(slot->key.a == it->ref.queue && slot->key.b == it->ref.offset &&
                            map_get(&ms->queues_by_id, (map_key_t){it->ref.queue, 0}) == q &&
                            it->deliveries > 0,
                        "pending entry (%" PRIu64 ", %" PRIu64 "): ref %" PRIu64 "/%" PRIu64
                        ", %" PRIu32 " deliveries",
                        slot->key.a, slot->key.b, it->ref.queue, it->ref.offset, it->deliveries);
        size_t pos = mem_check_lower_bound(q, it->ref.offset);
        INVARIANT_HOLDS(pos == q->len || q->items[q->head + pos]->ref.offset != it->ref.offset,
                        "pending entry %" PRIu64 "/%" PRIu64 " is also queued", it->ref.queue,
                        it->ref.offset);
    }
    return 1;
}
