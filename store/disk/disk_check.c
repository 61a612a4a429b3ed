/*
 * disk_check.c - the disk backend's structural rules as executable checks (common/invariant.h).
 * Each returns 1 when its rules hold, else reports the first broken one and returns 0. They
 * only read; the operations call them through INVARIANT_CHECK (Debug builds), tests directly.
 *
 * The rules, numbered as the reports cite them:
 *   1. Segment: header_len <= readable <= size < 4 GiB (offsets are 32-bit); flushed counts
 *      <= counts; deleted <= flushed entries (only readable entries are ever completed); the
 *      segment is the one d->segments holds under its id and the one its slot names, its model
 *      exists, and its id is below next_segment_id; a mapping covers at least its size.
 *   2. Queue counters: head + len <= cap; n_unflushed <= len; queued_items == len; queued_tokens
 *      >= len (every item has at least one token) and equals the sum over the records; a queue
 *      with unflushed records is on the flush list.
 *   3. Queue records: each in a live segment of the queue's model, aligned, past the header,
 *      inside the written bytes; ascending (sequence, offset); the first len - n_unflushed end
 *      at or below their segment's readable boundary (what peek may hand out), the rest start
 *      at or past it and sit in a dirty segment. A readable front's arrival is the one its
 *      entry holds.
 *   4. Pending map: every entry is keyed by its own (segment, offset), in a live segment of its
 *      queue's model, below its readable boundary, and not also queued; the queues'
 *      pending_items add up to its size.
 *   5. Lists: the queue list and map agree; every live segment is listed by exactly its model,
 *      in ascending sequence, and only a model's last segment is unsealed; the descriptor list
 *      holds exactly the segments with an open fd, open_fds of them, at most fd_cache_max; the
 *      mapped count is the segments with a mapping; the dirty list holds exactly the dirty
 *      segments, doomed ones included (and only those of the doomed: they are in no map and no
 *      model's list); the flush list holds exactly the queues marked on it; with nothing dirty
 *      nothing is unflushed, and nothing is gathered.
 *   6. Gathered writes: each segment's chain is in bounds, its entry runs start at or past the
 *      readable boundary and end at size, its tombstones sit on readable entries.
 *   7. Journal: its files are in ascending id order, below next_segment_id, and the current one
 *      (if any) has a descriptor, its write position on a record boundary within the file; no
 *      record is staged between calls.
 *
 * Cost: rules 1-2 and rule 3's front are O(1) and run after every operation on a queue or
 * segment; the rest of rule 3 is O(queue) and runs when the touched queue's length is a power of
 * two (amortised O(1) over a run of appends), after every return (which already moves O(queue)
 * records) and at open; rules 4-5 are O(store) and run at open and in tests.
 *
 * Rejected: checking the whole store after every operation. The Debug test suite appends
 * hundreds of thousands of items; O(store) per append would make it quadratic.
 */
#include "store/disk/disk_int.h"

#include "common/invariant.h"

#include <fcntl.h>
#include <inttypes.h>
#include <unistd.h>

int disk_seg_check(const disk_t *d, const dseg_t *seg)
{
    INVARIANT_HOLDS(seg->model_idx < d->n_models, "segment %" PRIu64 " has no model", seg->id);
    INVARIANT_HOLDS(seg->header_len >= SEG_HEADER_FIXED && seg->header_len <= seg->readable &&
                        seg->readable <= seg->size && seg->size <= UINT32_MAX,
                    "segment %" PRIu64 ": header %" PRIu32 ", readable %" PRIu64 ", size %" PRIu64,
                    seg->id, seg->header_len, seg->readable, seg->size);
    INVARIANT_HOLDS(seg->flushed_entries <= seg->entries && seg->flushed_tokens <= seg->tokens &&
                        seg->deleted <= seg->flushed_entries,
                    "segment %" PRIu64 ": entries %" PRIu64 " (flushed %" PRIu64
                    "), deleted %" PRIu64 ", tokens %" PRIu64 " (flushed %" PRIu64 ")",
                    seg->id, seg->entries, seg->flushed_entries, seg->deleted, seg->tokens,
                    seg->flushed_tokens);
    INVARIANT_HOLDS(map_get(&d->segments, (map_key_t){seg->id, 0}) == seg &&
                        seg->id < d->next_segment_id && seg->slot < d->n_slots &&
                        d->slots[seg->slot] == seg,
                    "segment %" PRIu64 " is not the live segment of its id and slot (next id "
                    "%" PRIu64 ")",
                    seg->id, d->next_segment_id);
    INVARIANT_HOLDS(seg->fd >= -1 && (seg->map == NULL || seg->map_len >= seg->size),
                    "segment %" PRIu64 ": fd %d, mapped %" PRIu64 " of %" PRIu64, seg->id, seg->fd,
                    seg->map_len, seg->size);
    return 1;
}

int disk_queue_counts_check(const dqueue_t *q)
{
    INVARIANT_HOLDS(q->head + q->len <= q->cap && q->n_unflushed <= q->len,
                    "queue %s/%" PRIx64 "/%" PRIu32 ": head %zu, len %zu, cap %zu, unflushed %zu",
                    q->model, q->signature, q->lane, q->head, q->len, q->cap, q->n_unflushed);
    INVARIANT_HOLDS(q->base.queued_items == q->len && q->base.queued_tokens >= q->len,
                    "queue %s/%" PRIx64 "/%" PRIu32 ": queued_items %" PRIu64 ", tokens %" PRIu64
                    ", records %zu",
                    q->model, q->signature, q->lane, q->base.queued_items, q->base.queued_tokens,
                    q->len);
    INVARIANT_HOLDS(q->n_unflushed == 0 || q->on_flush,
                    "queue %s/%" PRIx64 "/%" PRIu32 ": %zu unflushed records, not on the flush "
                    "list",
                    q->model, q->signature, q->lane, q->n_unflushed);
    return 1;
}

/* Rule 3: the readable front's arrival, against its entry (read through the segment's mapping,
 * its descriptor, or a descriptor of the check's own). */
static int disk_front_check(const disk_t *d, const dqueue_t *q)
{
    const drec_t *rec = &q->recs[q->head];
    const dseg_t *seg = disk_rec_seg(d, rec);
    uint8_t hdr[SEG_ENTRY_HEADER];
    const uint8_t *e = NULL;
    if (seg->map != NULL && rec->offset + sizeof(hdr) <= seg->map_len) {
        e = seg->map + rec->offset;
    } else {
        char name[SEG_FILE_NAME_SIZE];
        seg_file_name(seg->id, name);
        int fd = seg->fd >= 0 ? seg->fd : openat(d->seg_dir_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && pread(fd, hdr, sizeof(hdr), rec->offset) == (ssize_t)sizeof(hdr))
            e = hdr;
        if (fd >= 0 && fd != seg->fd)
            close(fd);
    }
    INVARIANT_HOLDS(
        e == NULL || seg_entry_arrival(e) == q->head_arrival_ns,
        "queue %s/%" PRIx64 "/%" PRIu32 ": front's arrival %" PRIu64 ", its entry's %" PRIu64,
        q->model, q->signature, q->lane, q->head_arrival_ns, e != NULL ? seg_entry_arrival(e) : 0);
    return 1;
}

int disk_queue_check(const disk_t *d, const dqueue_t *q)
{
    if (!disk_queue_counts_check(q))
        return 0;
    uint64_t tokens = 0;
    size_t readable = q->len - q->n_unflushed;
    for (size_t i = 0; i < q->len; i++) {
        const drec_t *rec = &q->recs[q->head + i];
        uint32_t slot = drec_slot(rec);
        const dseg_t *seg = slot < d->n_slots ? d->slots[slot] : NULL;
        INVARIANT_HOLDS(seg != NULL && !seg->doomed && seg->model_idx == q->model_idx &&
                            map_get(&d->segments, (map_key_t){seg->id, 0}) == seg,
                        "queue %s/%" PRIx64 "/%" PRIu32 ": record %zu names slot %" PRIu32
                        ", not a live segment of its model",
                        q->model, q->signature, q->lane, i, slot);
        INVARIANT_HOLDS(rec->tokens > 0 && rec->offset % SEG_ALIGN == 0 &&
                            rec->offset >= seg->header_len &&
                            (uint64_t)rec->offset + rec->length <= seg->size,
                        "queue %s/%" PRIx64 "/%" PRIu32 ": record %zu at %" PRIu32 "+%" PRIu32
                        " of segment %" PRIu64 " (size %" PRIu64 "), %" PRIu32 " tokens",
                        q->model, q->signature, q->lane, i, rec->offset, rec->length, seg->id,
                        seg->size, rec->tokens);
        const drec_t *prev = i > 0 ? rec - 1 : NULL;
        const dseg_t *prev_seg = prev != NULL ? disk_rec_seg(d, prev) : NULL;
        INVARIANT_HOLDS(prev == NULL || prev_seg->seq < seg->seq ||
                            (prev_seg == seg && prev->offset < rec->offset),
                        "queue %s/%" PRIx64 "/%" PRIu32 ": record %zu is not after record %zu",
                        q->model, q->signature, q->lane, i, i - 1);
        INVARIANT_HOLDS(i < readable ? (uint64_t)rec->offset + rec->length <= seg->readable
                                     : rec->offset >= seg->readable && seg->dirty,
                        "queue %s/%" PRIx64 "/%" PRIu32 ": record %zu (%s) at %" PRIu32
                        " against readable boundary %" PRIu64 " of segment %" PRIu64,
                        q->model, q->signature, q->lane, i, i < readable ? "readable" : "unflushed",
                        rec->offset, seg->readable, seg->id);
        tokens += rec->tokens;
    }
    INVARIANT_HOLDS(tokens == q->base.queued_tokens,
                    "queue %s/%" PRIx64 "/%" PRIu32 ": queued_tokens %" PRIu64
                    ", records hold %" PRIu64,
                    q->model, q->signature, q->lane, q->base.queued_tokens, tokens);
    return readable == 0 || disk_front_check(d, q);
}

int disk_queue_touched_check(const disk_t *d, const dqueue_t *q)
{
    if (!disk_queue_counts_check(q))
        return 0;
    INVARIANT_HOLDS(q->base.pending_items <= d->pending.len,
                    "queue %s/%" PRIx64 "/%" PRIu32 ": %" PRIu64 " pending, the map holds %zu",
                    q->model, q->signature, q->lane, q->base.pending_items, d->pending.len);
    if (q->len > q->n_unflushed && !disk_front_check(d, q))
        return 0;
    return (q->len & (q->len - 1)) != 0 || disk_queue_check(d, q);
}

static int disk_pending_check(const disk_t *d)
{
    uint64_t counted = 0;
    for (const dqueue_t *q = d->all; q != NULL; q = q->all_next)
        counted += q->base.pending_items;
    INVARIANT_HOLDS(counted == d->pending.len, "queues count %" PRIu64 " pending, the map %zu",
                    counted, d->pending.len);
    for (size_t i = 0; i < d->pending.cap; i++) {
        const map_slot_t *slot = &d->pending.slots[i];
        const dpend_t *p = slot->value;
        if (p == NULL)
            continue;
        const drec_t *rec = &p->rec;
        uint32_t s = drec_slot(rec);
        const dseg_t *seg = s < d->n_slots ? d->slots[s] : NULL;
        INVARIANT_HOLDS(seg != NULL && slot->key.a == seg->id && slot->key.b == rec->offset &&
                            map_get(&d->segments, (map_key_t){seg->id, 0}) == seg &&
                            seg->model_idx == p->q->model_idx,
                        "pending entry (%" PRIu64 ", %" PRIu64 ") names slot %" PRIu32
                        " offset %" PRIu32,
                        slot->key.a, slot->key.b, s, rec->offset);
        INVARIANT_HOLDS(
            (uint64_t)rec->offset + rec->length <= seg->readable && drec_deliveries(rec) > 0,
            "pending entry %" PRIu64 "/%" PRIu32 ": readable %" PRIu64 ", deliveries %" PRIu32,
            seg->id, rec->offset, seg->readable, drec_deliveries(rec));
        const dqueue_t *q = p->q;
        size_t pos = disk_queue_lower_bound(d, q, seg, rec->offset);
        INVARIANT_HOLDS(pos == q->len || disk_rec_seg(d, &q->recs[q->head + pos]) != seg ||
                            q->recs[q->head + pos].offset != rec->offset,
                        "pending entry %" PRIu64 "/%" PRIu32 " is also queued", seg->id,
                        rec->offset);
    }
    return 1;
}

/* Rule 6 for one segment. */
static int disk_gathered_check(const disk_t *d, const dseg_t *seg)
{
    INVARIANT_HOLDS(seg->spilled <= seg->size,
                    "segment %" PRIu64 ": spilled to %" PRIu64 ", size %" PRIu64, seg->id,
                    seg->spilled, seg->size);
    uint64_t run_end = seg->spilled > seg->readable ? seg->spilled : seg->readable;
    size_t walked = 0;
    for (uint32_t i = seg->w_head; i != DISK_WRITE_NONE; i = d->writes[i].next) {
        INVARIANT_HOLDS(i < d->n_writes && walked++ < d->n_writes,
                        "segment %" PRIu64 ": gathered write %" PRIu32 " of %zu", seg->id, i,
                        d->n_writes);
        const dwrite_t *w = &d->writes[i];
        if (w->items != 0) {
            INVARIANT_HOLDS(w->off == run_end && w->at + w->len <= d->arena_len,
                            "segment %" PRIu64 ": entry run at %" PRIu64 " (expected %" PRIu64
                            "), arena %zu+%" PRIu32 " of %zu",
                            seg->id, w->off, run_end, w->at, w->len, d->arena_len);
            run_end += w->len;
        } else {
            INVARIANT_HOLDS(w->len >= SEG_ENTRY_HEADER && w->off >= seg->header_len &&
                                w->off + w->len <= seg->readable,
                            "segment %" PRIu64 ": tombstone at %" PRIu64 " (readable %" PRIu64 ")",
                            seg->id, w->off, seg->readable);
        }
    }
    INVARIANT_HOLDS(run_end == seg->size || d->reserve_unsupported,
                    "segment %" PRIu64 ": gathered runs end at %" PRIu64 ", size %" PRIu64, seg->id,
                    run_end, seg->size);
    return 1;
}

/* Rule 5 for the models' segment lists. */
static int disk_models_check(const disk_t *d, size_t *out_listed)
{
    size_t listed = 0;
    for (size_t m = 0; m < d->n_models; m++) {
        const dmodel_t *model = &d->models[m];
        for (size_t i = 0; i < model->n_segs; i++) {
            const dseg_t *seg = model->segs[i];
            if (!disk_seg_check(d, seg))
                return 0;
            INVARIANT_HOLDS(seg->model_idx == m && seg->seq < model->next_seq &&
                                (i == 0 || model->segs[i - 1]->seq < seg->seq) &&
                                (i + 1 == model->n_segs || seg->sealed),
                            "model %s: segment %zu (id %" PRIu64 ", sequence %" PRIu64
                            ") out of place",
                            model->name, i, seg->id, seg->seq);
            listed++;
        }
    }
    *out_listed = listed;
    return 1;
}

static int disk_lists_check(const disk_t *d)
{
    size_t n_queues = 0, n_segs = 0, n_open = 0, n_dirty = 0, n_mapped = 0, n_flush = 0;
    int unflushed = 0;
    for (const dqueue_t *q = d->all; q != NULL; q = q->all_next) {
        map_key_t k = {q->signature, (uint64_t)q->model_idx << 32 | q->lane};
        INVARIANT_HOLDS(n_queues < d->queues.len && map_get(&d->queues, k) == q &&
                            (q->all_next == NULL || q->all_next->all_prev == q) &&
                            q->model_idx < d->n_models && q->model == d->models[q->model_idx].name,
                        "queue %s/%" PRIx64 "/%" PRIu32 " is not where the list and map say",
                        q->model, q->signature, q->lane);
        n_queues++;
        n_flush += q->on_flush != 0;
        unflushed |= q->n_unflushed != 0;
    }
    INVARIANT_HOLDS(n_queues == d->queues.len, "%zu queues listed, %zu mapped", n_queues,
                    d->queues.len);
    if (!disk_models_check(d, &n_segs))
        return 0;
    INVARIANT_HOLDS(n_segs == d->segments.len, "%zu segments listed by models, %zu mapped", n_segs,
                    d->segments.len);
    size_t walked = 0;
    for (const dqueue_t *q = d->flush_queues; q != NULL; q = q->flush_next) {
        INVARIANT_HOLDS(walked < n_flush && q->on_flush,
                        "flush list at queue %s/%" PRIx64 "/%" PRIu32 " (%zu walked, %zu marked)",
                        q->model, q->signature, q->lane, walked, n_flush);
        walked++;
    }
    INVARIANT_HOLDS(walked == n_flush, "%zu queues on the flush list, %zu marked", walked, n_flush);
    for (size_t i = 0; i < d->segments.cap; i++) {
        const dseg_t *seg = d->segments.slots[i].value;
        if (seg == NULL)
            continue;
        n_open += seg->fd >= 0;
        n_mapped += seg->map != NULL;
        n_dirty += seg->dirty != 0;
        INVARIANT_HOLDS(map_get(&d->deleted, (map_key_t){seg->id, 0}) == NULL && !seg->doomed,
                        "segment %" PRIu64 " is live and deleted", seg->id);
    }
    for (const dseg_t *seg = d->dirty; seg != NULL; seg = seg->dirty_next) {
        if (!seg->doomed)
            continue;
        int listed = 0;
        const dmodel_t *model = &d->models[seg->model_idx];
        for (size_t i = 0; i < model->n_segs; i++)
            listed |= model->segs[i] == seg;
        INVARIANT_HOLDS(!listed && map_get(&d->segments, (map_key_t){seg->id, 0}) == NULL &&
                            map_get(&d->deleted, (map_key_t){seg->id, 0}) != NULL &&
                            seg->deleted == seg->entries && d->slots[seg->slot] == seg,
                        "doomed segment %" PRIu64 " is still reachable or not drained", seg->id);
        n_open += seg->fd >= 0;
        n_mapped += seg->map != NULL;
        n_dirty++;
    }
    walked = 0;
    for (const dseg_t *seg = d->lru_head; seg != NULL; seg = seg->lru_next) {
        INVARIANT_HOLDS(
            walked < n_open && seg->fd >= 0 &&
                (seg->lru_next != NULL ? seg->lru_next->lru_prev == seg : d->lru_tail == seg),
            "descriptor list at segment %" PRIu64 " (fd %d, %zu walked, %zu open)", seg->id,
            seg->fd, walked, n_open);
        walked++;
    }
    INVARIANT_HOLDS(walked == n_open && n_open == d->open_fds && d->open_fds <= d->fd_cache_max,
                    "%zu descriptors listed, %zu open, open_fds %u", walked, n_open, d->open_fds);
    INVARIANT_HOLDS(n_mapped == d->mapped && d->mapped <= DISK_MAP_MAX,
                    "%zu segments mapped, mapped %u", n_mapped, d->mapped);
    walked = 0;
    for (const dseg_t *seg = d->dirty; seg != NULL; seg = seg->dirty_next) {
        INVARIANT_HOLDS(walked < n_dirty && seg->dirty &&
                            (seg->doomed || map_get(&d->segments, (map_key_t){seg->id, 0}) == seg),
                        "dirty list at segment %" PRIu64 " (%zu walked, %zu dirty)", seg->id,
                        walked, n_dirty);
        if (!disk_gathered_check(d, seg))
            return 0;
        walked++;
    }
    INVARIANT_HOLDS(walked == n_dirty, "%zu segments on the dirty list, %zu marked dirty", walked,
                    n_dirty);
    INVARIANT_HOLDS(d->dirty != NULL || (!unflushed && d->unflushed_bytes == 0 &&
                                         d->n_writes == 0 && d->arena_len == 0),
                    "nothing is dirty but %" PRIu64 " bytes are unflushed, %zu writes gathered",
                    d->unflushed_bytes, d->n_writes);
    return 1;
}

/* Rule 7. */
static int disk_jnl_check(const disk_t *d)
{
    for (size_t i = 0; i < d->n_jnls; i++) {
        INVARIANT_HOLDS((i == 0 || d->jnls[i - 1].id < d->jnls[i].id) &&
                            d->jnls[i].id < d->next_segment_id,
                        "journal file %zu (id %" PRIu64 ") out of order (next id %" PRIu64 ")", i,
                        d->jnls[i].id, d->next_segment_id);
    }
    INVARIANT_HOLDS(!d->jnl_live || (d->n_jnls > 0 && d->jnls[d->n_jnls - 1].fd >= 0 &&
                                     d->jnl_pos >= JNL_HEADER && d->jnl_pos <= d->jnl_size &&
                                     (d->jnl_pos - JNL_HEADER) % JNL_RECORD == 0),
                    "current journal: position %" PRIu64 " of %" PRIu64, d->jnl_pos, d->jnl_size);
    INVARIANT_HOLDS(d->n_staged == 0, "%zu journal records staged between calls", d->n_staged);
    return 1;
}

int disk_check(const disk_t *d)
{
    for (const dqueue_t *q = d->all; q != NULL; q = q->all_next) {
        if (!disk_queue_check(d, q))
            return 0;
    }
    return disk_lists_check(d) && disk_pending_check(d) && disk_jnl_check(d);
}
