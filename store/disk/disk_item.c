/*
 * disk_item.c - an item's life in the disk backend: append, peek, commit, tombstone, return,
 * and the header scan at start. The store's vtable (disk.c) points here.
 *
 * Invariants:
 *   1. Peek and scan stop at the first of a queue's trailing n_unflushed records: nothing past
 *      a readable boundary is ever handed out.
 *   2. Commit checks every ref and reserves all memory before it changes anything (store.h's
 *      three steps), so a stale peek fails with no effect.
 *   3. The pending map is never persisted. After a crash every entry that was not tombstoned is
 *      live again: that is how dispatched-but-unacknowledged work comes back.
 *   4. Completing gathers the tombstone; the flush appends it to the state journal
 *      (disk_journal.c) before the index transaction that carries the segment's deleted count.
 *      A crash between the two is repaired by recovery, which counts the tombstones it applies.
 *   5. Out of space on an append is not fatal: the entry's room is reserved before anything
 *      changes (disk_seg_reserve), so a full disk gives STORE_ENOSPC for that item alone and
 *      nothing acknowledged is touched; it also rolls over a current segment whose entries
 *      were all completed, whose file then goes at the next flush (disk_seg.c invariant 7).
 *   6. A returned item goes back to its place in arrival order (disk_queue.c's invariant 1).
 *   7. Commit appends each item's delivery count to the state journal before it returns
 *      ("DLV" + count, at most 255; a tombstone later outranks it): a crash of the process
 *      after a commit keeps the count, so an item whose batch crashes the daemon reaches its
 *      delivery limit instead of looping forever. Nothing of an entry is ever rewritten.
 *   8. A peek hands out views into the segments' mappings (disk_map.c) where it can, and reads
 *      the rest into scratch with one pread per run of back-to-back entries: no system call
 *      per item either way.
 *   9. A queue holding records knows its front's arrival (dqueue_t.head_arrival_ns), and with
 *      unflushed records the first of those's: an append sets them, a commit reads the next
 *      front's from its entry (before anything changes) or takes the unflushed one's, a return
 *      to the front reads the returned entry's. One entry header per batch, not 8 bytes per
 *      queued item (disk_int.h, drec_t).
 *
 * Rejected alternatives:
 *   - A pwrite per append: a system call per item, which is what limited both levels. The
 *     bytes are gathered per segment instead and written at the flush; nothing is acknowledged
 *     before that write, so nothing acknowledged is lost if the process dies in between, and
 *     the reservation keeps ENOSPC reported against the one item that caused it.
 *   - Delivery counts in memory only: a restart reset them, and a poison batch that crashed the
 *     daemon was delivered forever. Writing them costs a 24-byte record per item stored into the
 *     journal's mapping (one write per commit without one), no sync.
 *   - Delivery counts and tombstones stored into the entries' own state words (format 2): an
 *     entry sits anywhere in its model's log, so at the power level every settled item made its
 *     own page of the log dirty and every flush's fdatasync wrote those pages back.
 *   - A pread per run of a lane's entries for every peek: a model's log interleaves its lanes,
 *     so a batch's entries are rarely adjacent and the reads would cost a system call per item.
 *   - Keeping payloads in the store's heap: the target is at most 64 bytes per queued item; the
 *     recent entries a peek wants are in the page cache the flush wrote them to.
 */
#include "store/disk/disk_item_int.h"

#include "common/invariant.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

store_status_t disk_append(store_t *store, store_queue_t *queue, const store_item_t *item,
                           store_ref_t *out_ref)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    if (item->id_len > SEG_ID_MAX || item->payload_len > (1u << 30))
        return STORE_EINVAL;
    uint64_t size = seg_entry_size(item->id_len, item->payload_len);
    dseg_t *seg;
    store_status_t st;
    if ((st = disk_queue_reserve(q, 1)) != STORE_OK ||
        (st = disk_seg_pick(d, q->model_idx, size, &seg)) != STORE_OK)
        return st;
    if ((st = disk_seg_reserve(d, seg, size)) != STORE_OK) {
        /* disk_seg.c invariant 7: a drained current segment holds its space until it rolls
         * over; sealed now, it is deleted at the next flush, and a later item fits. */
        if (st == STORE_ENOSPC && !seg->sealed && seg->entries != 0 && disk_seg_drained(seg)) {
            store_status_t del = disk_seg_seal(d, seg);
            if (del != STORE_OK)
                return del;
        }
        return st;
    }
    if (d->reserve_unsupported) {
        /* No fallocate: written at once, so a full disk still refuses this item alone. */
        int fd;
        if ((st = disk_scratch_reserve(d, size)) != STORE_OK ||
            (st = disk_fd_get(d, seg, &fd)) != STORE_OK)
            return st;
        seg_entry_encode(seg->id, item, q->signature, q->lane, d->scratch);
        ssize_t w = store_fault_pwrite(fd, d->scratch, size, (off_t)seg->size);
        if (w != (ssize_t)size) {
            int err = w < 0 ? errno : ENOSPC;
            if (err != ENOSPC)
                return disk_fail(d, "appending to a segment", err);
            if (ftruncate(fd, (off_t)seg->size) != 0)
                return disk_fail(d, "cutting back a partial append", errno);
            return STORE_ENOSPC;
        }
    } else {
        uint8_t *buf;
        if ((st = disk_seg_gather_entry(d, seg, (uint32_t)size, &buf)) != STORE_OK)
            return st;
        seg_entry_encode(seg->id, item, q->signature, q->lane, buf);
    }
    drec_t rec = {(uint32_t)seg->size, (uint32_t)size, item->tokens, drec_slot_dlv(seg->slot, 0)};
    disk_queue_push(q, &rec, item->arrival_ns);
    if (q->n_unflushed++ == 0)
        q->unflushed_arrival_ns = item->arrival_ns;
    disk_queue_mark_flush(d, q);
    seg->size += size;
    seg->entries++;
    seg->tokens += item->tokens;
    seg->needs_sync |= d->reserve_unsupported; /* gathered bytes: the flush sets it */
    disk_seg_mark_dirty(d, seg);
    d->unflushed_bytes += size;
    INVARIANT_CHECK(disk_seg_check(d, seg) && disk_queue_touched_check(d, q));
    if (out_ref != NULL)
        *out_ref = (store_ref_t){seg->id, rec.offset};
    return STORE_OK;
}

/* The first len bytes of rec's entry into buf, with a system call: where a segment has no
 * mapping. */
static store_status_t disk_rec_pread(disk_t *d, const drec_t *rec, uint8_t *buf, size_t len)
{
    int fd;
    store_status_t st = disk_fd_get(d, disk_rec_seg(d, rec), &fd);
    if (st != STORE_OK)
        return st;
    ssize_t r = pread(fd, buf, len, rec->offset);
    if (r != (ssize_t)len)
        return disk_fail(d, "reading a segment", r < 0 ? errno : EIO);
    return STORE_OK;
}

store_status_t disk_rec_arrival(disk_t *d, const drec_t *rec, uint64_t *out_ns)
{
    const uint8_t *e = disk_map_view(d, disk_rec_seg(d, rec), rec->offset, SEG_ENTRY_HEADER);
    uint8_t hdr[SEG_ENTRY_HEADER];
    if (e == NULL) {
        if (d->failed)
            return STORE_EIO;
        store_status_t st = disk_rec_pread(d, rec, hdr, sizeof(hdr));
        if (st != STORE_OK)
            return st;
        e = hdr;
    }
    *out_ns = seg_entry_arrival(e);
    return STORE_OK;
}

/* A view of the entry at e for the record rec of q. */
static store_view_t disk_view(const dseg_t *seg, const dqueue_t *q, const drec_t *rec,
                              const uint8_t *e)
{
    size_t id_len = seg_entry_id_len(e);
    return (store_view_t){
        .ref = {seg->id, rec->offset},
        .id_view = e + SEG_ENTRY_HEADER,
        .id_len = id_len,
        .payload_view = e + SEG_ENTRY_HEADER + id_len,
        .payload_len = seg_entry_payload_len(e),
        .tokens = rec->tokens,
        .deliveries = drec_deliveries(rec),
        .signature = q->signature,
        .arrival_ns = seg_entry_arrival(e),
        .prefix_tokens = seg_entry_prefix_tokens(e),
        .max_wait_ms = seg_entry_max_wait_ms(e),
    };
}

/* The peek of n records without mappings: one pread per run of back-to-back entries. */
static store_status_t disk_peek_read(disk_t *d, const dqueue_t *q, store_view_t *views, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += q->recs[q->head + i].length;
    store_status_t st = disk_scratch_reserve(d, bytes);
    if (st != STORE_OK)
        return st;
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        const drec_t *first = &q->recs[q->head + i];
        dseg_t *seg = disk_rec_seg(d, first);
        size_t j = i + 1;
        uint64_t run = first->length;
        while (j < n && drec_slot(&q->recs[q->head + j]) == drec_slot(first) &&
               q->recs[q->head + j].offset == first->offset + run)
            run += q->recs[q->head + j++].length;
        int fd;
        if ((st = disk_fd_get(d, seg, &fd)) != STORE_OK)
            return st;
        ssize_t r = pread(fd, d->scratch + at, run, first->offset);
        if (r != (ssize_t)run)
            return disk_fail(d, "reading a segment", r < 0 ? errno : EIO);
        at += run;
        i = j;
    }
    at = 0;
    for (size_t i = 0; i < n; i++) {
        const drec_t *rec = &q->recs[q->head + i];
        views[i] = disk_view(disk_rec_seg(d, rec), q, rec, d->scratch + at);
        views[i].transient = 1; /* the next peek reuses d->scratch */
        at += rec->length;
    }
    return STORE_OK;
}

/* Entries whose headers a peek asks for at once: a few more than the misses a core keeps in
 * flight. Chosen by `perf` of the daemon on the realistic workload (docs/owner-thread.md). */
#define DISK_PEEK_AHEAD 16u

store_status_t disk_peek(store_t *store, store_queue_t *queue, store_view_t *views, size_t max,
                         size_t *out_n)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    size_t readable = q->len - q->n_unflushed;
    size_t n = readable < max ? readable : max;
    size_t i = 0;
    while (i < n) { /* invariant 8: views into the mappings */
        /* The entries of a lane lie apart in its model's log: each header read is a cache (and
         * TLB) miss, so a chunk's are all asked for before the first is read. */
        const uint8_t *e[DISK_PEEK_AHEAD];
        dseg_t *seg[DISK_PEEK_AHEAD];
        size_t k = 0;
        for (; k < DISK_PEEK_AHEAD && i + k < n; k++) {
            const drec_t *rec = &q->recs[q->head + i + k];
            seg[k] = disk_rec_seg(d, rec);
            e[k] = disk_map_view(d, seg[k], rec->offset, rec->length);
            if (e[k] == NULL)
                break;
            __builtin_prefetch(e[k]);
        }
        for (size_t j = 0; j < k; j++, i++)
            views[i] = disk_view(seg[j], q, &q->recs[q->head + i], e[j]);
        if (k < DISK_PEEK_AHEAD && i < n)
            break; /* a record without a mapping: the rest are read (below) */
    }
    if (d->failed)
        return STORE_EIO;
    if (i < n) {
        store_status_t st = disk_peek_read(d, q, views, n); /* all of them: one scratch */
        if (st != STORE_OK)
            return st;
    }
    *out_n = n;
    return STORE_OK;
}

store_status_t disk_peek_tokens(store_t *store, store_queue_t *queue, uint32_t *tokens,
                                uint32_t *deliveries, size_t max, size_t *out_n)
{
    const disk_t *d = disk_of(store);
    const dqueue_t *q = (const dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    size_t readable = q->len - q->n_unflushed; /* as disk_peek */
    size_t n = readable < max ? readable : max;
    for (size_t i = 0; i < n; i++) {
        const drec_t *rec = &q->recs[q->head + i];
        tokens[i] = rec->tokens;
        deliveries[i] = drec_deliveries(rec);
    }
    *out_n = n;
    return STORE_OK;
}

/* Invariant 7: appends the delivery counts of the n records from the queue's front, each one
 * more than recorded, to the journal. */
static store_status_t disk_commit_counts(disk_t *d, const dqueue_t *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const drec_t *rec = &q->recs[q->head + i];
        store_status_t st = disk_jnl_stage(d, disk_rec_seg(d, rec), rec->offset, rec->length,
                                           seg_state_delivered(drec_deliveries(rec) + 1));
        if (st != STORE_OK) {
            d->n_staged = 0;
            return st;
        }
    }
    return disk_jnl_write(d, "writing a delivery count");
}

store_status_t disk_commit(store_t *store, store_queue_t *queue, const store_ref_t *refs, size_t n)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    /* Step 1: every ref is the queue's next readable record, its segment still exists. */
    if (n > q->len - q->n_unflushed)
        return STORE_ESTALE;
    for (size_t i = 0; i < n; i++) {
        const drec_t *rec = &q->recs[q->head + i];
        const dseg_t *seg = disk_rec_seg(d, rec);
        if (seg->id != refs[i].queue || rec->offset != refs[i].offset ||
            map_get(&d->segments, (map_key_t){refs[i].queue, 0}) != seg)
            return STORE_ESTALE;
    }
    dpend_t **copies = calloc(n, sizeof(*copies));
    store_status_t st = STORE_ENOMEM;
    if (copies == NULL || map_reserve(&d->pending, n) != MAP_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if ((copies[i] = pool_get(&d->pend_pool)) == NULL)
            goto out;
    }
    /* Invariant 9: the next front's arrival, from its entry or, unflushed, from the queue. */
    uint64_t next_arrival = q->unflushed_arrival_ns;
    if (n < q->len - q->n_unflushed &&
        (st = disk_rec_arrival(d, &q->recs[q->head + n], &next_arrival)) != STORE_OK)
        goto out;
    /* Invariant 7: the counts are on disk before anything changes in memory. */
    if ((st = disk_commit_counts(d, q, n)) != STORE_OK)
        goto out;
    /* Step 2: advance the cursor. */
    for (size_t i = 0; i < n; i++) {
        drec_t rec = q->recs[q->head + i];
        rec.slot_dlv = drec_slot_dlv(drec_slot(&rec), drec_deliveries(&rec) + 1);
        *copies[i] = (dpend_t){rec, q};
        q->base.queued_items--;
        q->base.queued_tokens -= rec.tokens;
    }
    q->head += n;
    q->len -= n;
    q->head_arrival_ns = next_arrival;
    if (q->len == 0)
        q->head = 0;
    /* Step 3: the pending map. */
    for (size_t i = 0; i < n; i++) {
        const drec_t *rec = &copies[i]->rec;
        map_put(&d->pending, disk_ref_key(disk_rec_seg(d, rec)->id, rec->offset), copies[i]);
        copies[i] = NULL;
        q->base.pending_items++;
    }
    INVARIANT_CHECK(disk_queue_touched_check(d, q));
    st = STORE_OK;
out:
    for (size_t i = 0; copies != NULL && i < n; i++)
        pool_put(&d->pend_pool, copies[i]);
    free(copies);
    return st;
}

/* Was the readable entry at (seg, offset) completed? Not pending (the caller looked), so it is
 * completed when its tombstone is among the turn's gathered writes, or when it is a valid entry
 * that its lane does not hold: every live entry is queued or pending (recovery queues them all),
 * and a lane is released only once empty. */
static int disk_entry_completed(disk_t *d, dseg_t *seg, uint64_t offset)
{
    if (offset < seg->header_len || offset % SEG_ALIGN != 0 ||
        offset + SEG_ENTRY_HEADER > seg->readable)
        return 0;
    if (disk_seg_gathered_tomb(d, seg, offset))
        return 1;
    seg_entry_t e;
    return disk_seg_entry_read(d, seg, offset, &e) == 1 &&
           disk_queue_find(d, seg, offset, &e) == NULL;
}

void disk_prefetch(const store_t *store, store_ref_t ref, unsigned level)
{
    const disk_t *d = (const disk_t *)store;
    map_key_t key = disk_ref_key(ref.queue, ref.offset);
    if (level == 0) {
        map_prefetch(&d->pending, key);
        return;
    }
    const dpend_t *p = map_get(&d->pending, key);
    if (p != NULL)
        __builtin_prefetch(p);
}

store_status_t disk_tombstone(store_t *store, store_ref_t ref, int *out_completed)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    dpend_t *p = map_get(&d->pending, disk_ref_key(ref.queue, ref.offset));
    if (p == NULL) {
        dseg_t *seg = map_get(&d->segments, (map_key_t){ref.queue, 0});
        uintptr_t end = (uintptr_t)map_get(&d->deleted, (map_key_t){ref.queue, 0});
        /* A deleted segment's entries were all completed; an offset that cannot start an entry
         * of it (unaligned, inside the header, past the end) was never handed out. Offsets of
         * a deleted file are not kept, so an aligned offset inside one of its entries reads as
         * completed too: harmless, since completing twice changes nothing. */
        int done = seg != NULL
                       ? disk_entry_completed(d, seg, ref.offset)
                       : end != 0 && ref.offset % SEG_ALIGN == 0 &&
                             ref.offset >= SEG_HEADER_FIXED && ref.offset + SEG_ENTRY_HEADER < end;
        if (d->failed)
            return STORE_EIO;
        if (!done)
            return STORE_ENOTPENDING;
        if (out_completed != NULL)
            *out_completed = 0;
        return STORE_OK;
    }
    dseg_t *seg = disk_rec_seg(d, &p->rec);
    store_status_t st = disk_seg_gather_tomb(d, seg, p->rec.offset, p->rec.length);
    if (st != STORE_OK)
        return st; /* still pending, nothing changed */
    map_del(&d->pending, disk_ref_key(ref.queue, ref.offset), NULL);
    dqueue_t *q = p->q;
    q->base.pending_items--;
    pool_put(&d->pend_pool, p);
    seg->deleted++;
    disk_seg_mark_dirty(d, seg);
    INVARIANT_CHECK(disk_seg_check(d, seg) && disk_queue_counts_check(q));
    if (out_completed != NULL)
        *out_completed = 1;
    if (seg->sealed && seg->deleted == seg->entries)
        return disk_seg_delete(d, seg);
    return STORE_OK;
}

store_status_t disk_return(store_t *store, const store_ref_t *refs, size_t n, int unseen)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    for (size_t i = 0; i < n; i++) {
        if (map_get(&d->pending, disk_ref_key(refs[i].queue, refs[i].offset)) == NULL)
            return STORE_ENOTPENDING;
        for (size_t j = 0; j < i; j++) {
            if (refs[j].queue == refs[i].queue && refs[j].offset == refs[i].offset)
                return STORE_EINVAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        dpend_t *p = map_get(&d->pending, disk_ref_key(refs[i].queue, refs[i].offset));
        if (disk_queue_reserve(p->q, n) != STORE_OK)
            return STORE_ENOMEM;
    }
    store_status_t st = STORE_OK;
    for (size_t i = 0; i < n; i++) {
        dpend_t *p = NULL;
        map_del(&d->pending, disk_ref_key(refs[i].queue, refs[i].offset), (void **)&p);
        dqueue_t *q = p->q;
        size_t pos = disk_queue_lower_bound(d, q, disk_rec_seg(d, &p->rec), p->rec.offset);
        if (pos == 0 && q->head > 0)
            q->head--;
        else
            memmove(q->recs + q->head + pos + 1, q->recs + q->head + pos,
                    (q->len - pos) * sizeof(*q->recs));
        /* Invariant 9: a new front's arrival from its entry. A failed read fails the store,
         * which then serves nothing; the records still all go back. */
        if (pos == 0 && st == STORE_OK)
            st = disk_rec_arrival(d, &p->rec, &q->head_arrival_ns);
        uint32_t dlv = drec_deliveries(&p->rec);
        if (unseen && dlv > 0 && dlv < SEG_DELIVERIES_MAX) /* store_return_unseen: memory only */
            p->rec.slot_dlv = drec_slot_dlv(drec_slot(&p->rec), dlv - 1);
        q->recs[q->head + pos] = p->rec;
        q->len++;
        q->base.queued_items++;
        q->base.queued_tokens += p->rec.tokens;
        q->base.pending_items--;
        pool_put(&d->pend_pool, p);
        /* Whole: a return is rare and already moves O(queue) records. (Not once the store
         * failed: the front's arrival is then unknown, and nothing is served.) */
        INVARIANT_CHECK(st != STORE_OK || disk_queue_check(d, q));
    }
    return st;
}

store_status_t disk_queue_scan(store_t *store, store_queue_t *queue, store_scan_fn fn, void *ctx)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    uint8_t hdr[SEG_ENTRY_HEADER + SEG_ID_MAX];
    size_t n = q->len - q->n_unflushed;
    const uint8_t *ahead[DISK_PEEK_AHEAD]; /* as disk_peek: a chunk's headers asked for first */
    for (size_t i = 0; i < n; i++) {
        const drec_t *rec = &q->recs[q->head + i];
        dseg_t *seg = disk_rec_seg(d, rec);
        size_t want = rec->length < sizeof(hdr) ? rec->length : sizeof(hdr);
        if (i % DISK_PEEK_AHEAD == 0) {
            for (size_t k = 0; k < DISK_PEEK_AHEAD && i + k < n; k++) {
                const drec_t *r = &q->recs[q->head + i + k];
                size_t w = r->length < sizeof(hdr) ? r->length : sizeof(hdr);
                if ((ahead[k] = disk_map_view(d, disk_rec_seg(d, r), r->offset, w)) != NULL) {
                    __builtin_prefetch(ahead[k]);
                    __builtin_prefetch(ahead[k] + w - 1); /* the id may start a second line */
                }
            }
        }
        const uint8_t *e = ahead[i % DISK_PEEK_AHEAD];
        if (e == NULL) {
            store_status_t st = disk_rec_pread(d, rec, hdr, want);
            if (st != STORE_OK)
                return st;
            e = hdr;
        }
        store_view_t v = disk_view(seg, q, rec, e);
        v.payload_view = NULL;
        if (v.id_len > SEG_ID_MAX) {
            v.id_len = 0;
            v.id_view = NULL;
        }
        fn(ctx, &v);
    }
    return STORE_OK;
}

void disk_queue_prefetch(const store_t *store, const store_queue_t *queue, unsigned level)
{
    (void)store;
    if (level == 0) /* level 1: nothing, the queue keeps its front's arrival */
        __builtin_prefetch(queue);
}

int disk_queue_oldest(const store_t *store, const store_queue_t *queue, uint64_t *out)
{
    (void)store;
    const dqueue_t *q = (const dqueue_t *)queue;
    if (q->len == q->n_unflushed)
        return 0;
    *out = q->head_arrival_ns;
    return 1;
}
