/*
 * disk_flush.c - the readable boundary of the disk backend: store_flush writes the turn's
 * gathered appends and tombstones, makes them durable at the configured level, records the
 * new boundaries in the index, and only then moves them.
 *
 * One flush, in order:
 *   1. power level, when segment files were created or unlinked since the last sync: the
 *      segments directory is synced (disk_seg.c's invariant 2), before any entry is written;
 *      then the journal files doomed by an earlier flush are unlinked (disk_journal.c's
 *      invariant 4);
 *   2. every segment that took appends (one per model): one pwritev of its appended entries
 *      (those not written ahead already, invariant 8);
 *      the turn's tombstones, of every segment, and the records of a segment restated
 *      (disk_restate.c), appended to the state journal as records (disk_journal.c: through its
 *      mapping, no system call); at the power level then, in waves
 *      of at most half the descriptor cache, the fdatasync of every segment of the wave, all in
 *      flight at once (disk_io.c), the journal's with the last wave, or one syncfs;
 *   3. the check that no segment or journal file written to was deleted or replaced meanwhile
 *      (disk_watch.c);
 *   4. one LMDB transaction: segment rows, doomed segments' rows deleted, released lanes,
 *      lane targets, current shapes, the next segment id;
 *   5. the boundaries move; doomed segments' files are unlinked; sealed segments give back the
 *      space reserved past their end; the mappings' resident pages are trimmed to their bound;
 *      journal files no live segment needs any more are doomed.
 *
 * Invariants:
 *   1. Readers never see bytes past a segment's readable boundary, and the boundary advances
 *      only here: after the data is written (and synced at the power level) and after the index
 *      transaction that records it has committed.
 *   2. Every index change of a flush goes into one LMDB transaction; released lanes are deleted
 *      before the puts, so a lane reopened under the same key since is kept.
 *   3. A flush with nothing dirty walks no queue and opens no transaction (an idle turn); a
 *      flush walks only the segments and queues the turn touched (the dirty lists), never all
 *      of them. Delivery counts stored since the last flush are synced (power level) by the
 *      next flush that has anything else to do.
 *   4. A segment whose file was deleted or replaced under the store is never written as if it
 *      were still there: the flush that finds it fails the store, naming the file.
 *   5. A fault armed on writes fires per entry and per tombstone (store_fault_hit), as when each
 *      was its own pwrite: an entry run cut by one is written up to the entry before it, the
 *      short write a real failure leaves; the store then fails.
 *   6. A segment file is written only by appends: nothing of a segment is rewritten, so at the
 *      power level a flush writes back the log's new tail and the journal's, never a page of
 *      the log per settled item.
 *   7. The arena a turn's appends are gathered in outlives the turn: one past DISK_ARENA_KEEP
 *      goes once no flush, idle ones included, used more than a quarter of it for
 *      DISK_ARENA_IDLE_NS, so a daemon under load does not fault it in again and one that went
 *      idle holds it for a second or two.
 *   8. A turn whose arena would pass DISK_SPILL_BYTES has its gathered entry runs written then
 *      (disk_flush_spill, the same per-entry faults as invariant 5), and the arena starts again:
 *      its bytes are copied to the page cache while still in the cache. Only the writing moves;
 *      the syncs, the index and the boundaries wait for the flush (invariant 1), and entries
 *      written ahead of a crash are what a crash between a flush's writes and its index commit
 *      leaves.
 *
 * Rejected: syncing each segment as it is written (appends between two flushes share one sync
 * per touched segment: group commit); writing each append as it is made (a system call per
 * item, which is what limited the power level); syncfs as the default (one call, but it waits
 * for every dirty page of every process on the file system: measured faster only with many
 * touched segments and a quiet disk, see lanesched-storebench); tombstones stored in place in
 * their entries (format 2: a page written back per settled item at the power level,
 * docs/store.md).
 */
#define _GNU_SOURCE
#include "store/disk/disk_int.h"

#include "common/clock.h"
#include "common/invariant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static store_status_t disk_ops_reserve(disk_t *d, size_t n)
{
    if (n <= d->cap_ops)
        return STORE_OK;
    size_t cap = d->cap_ops ? d->cap_ops : 64;
    while (cap < n)
        cap *= 2;
    disk_io_op_t *ops = realloc(d->ops, cap * sizeof(*ops));
    if (ops == NULL)
        return STORE_ENOMEM;
    d->ops = ops;
    d->cap_ops = cap;
    return STORE_OK;
}

/* Bytes of the first k entries of a run (the short write of invariant 5). */
static uint32_t disk_run_prefix(const disk_t *d, const dwrite_t *w, uint32_t k)
{
    uint32_t at = 0;
    for (uint32_t i = 0; i < k; i++)
        at += seg_entry_length(d->arena + w->at + at);
    return at;
}

int disk_pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        size_t done = (size_t)w;
        off += done;
        while (n > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}

/* Writes every entry run of seg (back to back in the file, wherever they sit in the arena) with
 * one pwritev per IOV_MAX runs; a fault armed per entry cuts the write short (invariant 5). */
static store_status_t disk_flush_runs(disk_t *d, const dseg_t *seg, int fd)
{
    struct iovec iov[64];
    int n = 0, fault = 0, err = 0;
    uint64_t off = 0;
    for (uint32_t i = seg->w_head; i != DISK_WRITE_NONE && !fault && err == 0;
         i = d->writes[i].next) {
        const dwrite_t *w = &d->writes[i];
        if (w->items == 0)
            continue;
        uint32_t len = w->len;
        for (uint32_t k = 0; k < w->items && !fault; k++) {
            if (store_fault_hit(STORE_FAULT_WRITE)) {
                len = disk_run_prefix(d, w, k);
                fault = 1;
            }
        }
        if (n == 0)
            off = w->off;
        if (len != 0)
            iov[n++] = (struct iovec){d->arena + w->at, len};
        if (n == (int)(sizeof(iov) / sizeof(iov[0]))) {
            err = disk_pwritev_all(fd, iov, n, off);
            n = 0; /* the next run sets off again */
        }
    }
    if (err == 0 && n > 0)
        err = disk_pwritev_all(fd, iov, n, off);
    if (err != 0 || fault)
        return disk_fail(d, "writing a segment", err ? err : EIO);
    return STORE_OK;
}

/* Whether seg has gathered entry runs (not only tombstones). */
static int disk_seg_has_runs(const disk_t *d, const dseg_t *seg)
{
    for (uint32_t i = seg->w_head; i != DISK_WRITE_NONE; i = d->writes[i].next) {
        if (d->writes[i].items != 0)
            return 1;
    }
    return 0;
}

/* Writes seg's gathered entry runs (it has some) with one pwritev; it then needs its sync at
 * the power level. */
static store_status_t disk_flush_seg_runs(disk_t *d, dseg_t *seg)
{
    int fd;
    store_status_t st = disk_fd_get(d, seg, &fd);
    if (st != STORE_OK || (st = disk_flush_runs(d, seg, fd)) != STORE_OK)
        return st;
    seg->needs_sync = 1;
    return STORE_OK;
}

/* Invariant 8: every dirty segment's gathered entry runs written now; its tombstones stay
 * gathered for the flush. The segment counts as written (disk_watch.c) and, at the power
 * level, as needing its sync. */
store_status_t disk_flush_spill(disk_t *d)
{
    d->written_ahead++;
    for (dseg_t *seg = d->dirty; seg != NULL; seg = seg->dirty_next) {
        if (!disk_seg_has_runs(d, seg))
            continue;
        store_status_t st = disk_flush_seg_runs(d, seg);
        if (st != STORE_OK)
            return st;
        seg->written = 1;
        seg->spilled = seg->size;
        uint32_t head = DISK_WRITE_NONE, tail = DISK_WRITE_NONE;
        for (uint32_t i = seg->w_head, next; i != DISK_WRITE_NONE; i = next) {
            next = d->writes[i].next;
            if (d->writes[i].items != 0)
                continue; /* written: out of the chain */
            d->writes[i].next = DISK_WRITE_NONE;
            if (tail == DISK_WRITE_NONE)
                head = i;
            else
                d->writes[tail].next = i;
            tail = i;
        }
        seg->w_head = head;
        seg->w_tail = tail;
    }
    d->arena_len = 0;
    return STORE_OK;
}

/* One segment's gathered writes: its entry runs with one pwritev, its tombstones staged as
 * journal records (written for every segment at once, disk_flush_write). Either way the segment
 * counts as written: a tombstone of an entry whose file is gone is not acknowledged either
 * (invariant 4). */
static store_status_t disk_flush_seg(disk_t *d, dseg_t *seg)
{
    store_status_t st;
    seg->written = 1;
    if (disk_seg_has_runs(d, seg) && (st = disk_flush_seg_runs(d, seg)) != STORE_OK)
        return st;
    for (uint32_t i = seg->w_head; i != DISK_WRITE_NONE; i = d->writes[i].next) {
        const dwrite_t *w = &d->writes[i];
        if (w->items == 0 &&
            (st = disk_jnl_stage(d, seg, w->off, w->len, SEG_STATE_TOMB)) != STORE_OK)
            return st;
    }
    return STORE_OK;
}

/* Syncs the segments of a wave that need it (power level): all in flight at once, with the
 * journal files' syncs when `journal` (the last wave). */
static store_status_t disk_flush_sync(disk_t *d, dseg_t *const *wave, size_t n, int journal)
{
    size_t n_ops = 0;
    store_status_t st = disk_ops_reserve(d, n + 1 + disk_jnl_sync_max(d));
    if (st != STORE_OK)
        return st;
    if (journal && (st = disk_jnl_sync_ops(d, d->ops, &n_ops)) != STORE_OK)
        return st;
    int fault = 0;
    for (size_t i = 0; i < n; i++) {
        /* A closed descriptor was synced when the cache closed it (disk_fd.c's invariant 2);
         * the wave's own stay open: it is at most half the cache, so none of them was the
         * least recently used when another was opened. */
        if (!wave[i]->needs_sync || wave[i]->fd < 0)
            continue;
        fault |= store_fault_hit(STORE_FAULT_FSYNC);
        if (d->cfg.sync == STORE_SYNC_FILES)
            d->ops[n_ops++] = (disk_io_op_t){.kind = DISK_IO_SYNC, .fd = wave[i]->fd};
    }
    if (d->cfg.sync == STORE_SYNC_FS)
        d->ops[n_ops++] = (disk_io_op_t){.kind = DISK_IO_SYNCFS, .fd = d->seg_dir_fd};
    if (fault)
        return disk_fail(d, "fdatasync of a segment", EIO);
    disk_io_run(d->io, d->ops, n_ops);
    for (size_t i = 0; i < n_ops; i++) {
        if (d->ops[i].res != 0)
            return disk_fail(d, "fdatasync of a segment or journal file", d->ops[i].res);
    }
    for (size_t i = 0; i < n; i++)
        wave[i]->needs_sync = 0;
    return journal ? disk_jnl_synced(d) : STORE_OK;
}

/* Step 2 over the whole dirty list, in waves; the tombstones of every segment go to the journal
 * in one write, synced with the last wave. */
static store_status_t disk_flush_write(disk_t *d)
{
    size_t wave_max = disk_wave_max(d);
    int power = d->cfg.durability == STORE_DURABLE_POWER;
    size_t n = 0;
    store_status_t st;
    for (dseg_t *seg = d->dirty; seg != NULL; seg = seg->dirty_next) {
        if (seg->w_head != DISK_WRITE_NONE && (st = disk_flush_seg(d, seg)) != STORE_OK) {
            d->n_staged = 0;
            return st;
        }
        if (!power || !seg->needs_sync)
            continue;
        d->wave[n++] = seg;
        if (n == wave_max) {
            if ((st = disk_flush_sync(d, d->wave, n, 0)) != STORE_OK) {
                d->n_staged = 0;
                return st;
            }
            n = 0;
        }
    }
    disk_restate_begin(d);
    if ((st = disk_jnl_write(d, "writing a tombstone")) == STORE_OK)
        st = power ? disk_flush_sync(d, d->wave, n, 1) : disk_jnl_synced(d);
    if (st == STORE_OK)
        disk_restate_commit(d);
    else
        disk_restate_abort(d);
    return st;
}

/* Step 3. */
static store_status_t disk_flush_index(disk_t *d)
{
    index_txn_t *txn = NULL;
    index_status_t ist = index_begin(d->index, &txn);
    for (dseg_t *seg = d->dirty; seg != NULL && ist == INDEX_OK; seg = seg->dirty_next) {
        if (seg->doomed) {
            ist = index_segment_del(txn, seg->id);
            continue;
        }
        index_segment_row_t row = disk_seg_row(d, seg);
        row.readable = seg->size;
        row.entries = seg->entries;
        row.tokens = seg->tokens;
        ist = index_segment_put(txn, &row);
    }
    for (size_t i = 0; i < d->n_released && ist == INDEX_OK; i++)
        ist = index_lane_del(txn, d->released[i].model, d->released[i].signature,
                             d->released[i].lane);
    for (dqueue_t *q = d->flush_queues; q != NULL && ist == INDEX_OK; q = q->flush_next) {
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
    return STORE_OK;
}

/* A sealed segment gives back what was reserved past its end (best effort: space only). */
static void disk_flush_unreserve(dseg_t *seg)
{
    if (seg->reserved <= seg->size || seg->fd < 0)
        return;
    (void)fallocate(seg->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)seg->size,
                    (off_t)(seg->reserved - seg->size));
    seg->reserved = seg->size;
}

/* Invariant 7: the turn's arena after a flush at `now`. */
static void disk_flush_arena(disk_t *d, uint64_t now)
{
    if (d->arena_cap <= DISK_ARENA_KEEP || d->arena_len > d->arena_cap / 4)
        d->arena_busy_ns = now;
    else if (now - d->arena_busy_ns >= DISK_ARENA_IDLE_NS) {
        free(d->arena);
        d->arena = NULL;
        d->arena_cap = 0;
    }
    d->arena_len = 0;
}

static void disk_flush_reset(disk_t *d, uint64_t now)
{
    d->n_writes = 0;
    disk_flush_arena(d, now);
}

/* Journal files a flush before this one found unneeded are unlinked, after the directory sync
 * that makes the segments' deletions durable (disk_journal.c invariant 4). */
static store_status_t disk_flush_jnl_unlink(disk_t *d)
{
    if (d->cfg.durability == STORE_DURABLE_POWER && (d->dir_dirty || d->jnl_doomed)) {
        store_status_t st = disk_fsync_dir(d, d->dir_dirty ? d->dir_dirty : 1);
        if (st != STORE_OK)
            return st;
    }
    d->dir_dirty = 0; /* the process level never syncs a directory (disk_seg.c's invariant 2) */
    return disk_jnl_unlink_doomed(d);
}

store_status_t disk_flush(disk_t *d)
{
    if (d->failed)
        return STORE_EIO;
    uint64_t now = clock_mono_ns();
    store_status_t st = disk_seg_idle_seal(d, now);
    if (st != STORE_OK)
        return st;
    if (d->dirty == NULL && !d->meta_dirty && d->n_released == 0 && !d->rows_dirty &&
        d->flush_queues == NULL) {
        /* invariant 3; journal files found unneeded (at the open, or by the last flush) still
         * go, one idle flush after the one that found them, so an idle daemon keeps none; and
         * so does a large arena the load left */
        disk_flush_arena(d, now);
        if (!d->jnl_doomed && !d->jnl_retire)
            return STORE_OK;
        if ((st = disk_flush_jnl_unlink(d)) == STORE_OK)
            disk_jnl_retire(d);
        return st;
    }
    if ((st = disk_flush_jnl_unlink(d)) != STORE_OK)
        return st;
    if ((st = disk_flush_write(d)) != STORE_OK || (st = disk_watch_check(d)) != STORE_OK ||
        (st = disk_flush_index(d)) != STORE_OK)
        return st;

    /* Committed: only now do the boundaries move (invariant 1). */
    for (dseg_t *seg = d->dirty, *next; seg != NULL; seg = next) {
        next = seg->dirty_next;
        seg->dirty = 0;
        seg->dirty_next = NULL;
        seg->written = 0;
        seg->w_head = seg->w_tail = DISK_WRITE_NONE;
        if (seg->doomed) {
            if (st == STORE_OK)
                st = disk_seg_unlink(d, seg);
            else
                disk_seg_free(d, seg);
            d->jnl_retire = 1;
            continue;
        }
        if (seg->readable != seg->size)
            seg->appended_ns = now;
        seg->readable = seg->size;
        seg->flushed_entries = seg->entries;
        seg->flushed_tokens = seg->tokens;
        if (seg->sealed)
            disk_flush_unreserve(seg);
        INVARIANT_CHECK(disk_seg_check(d, seg));
    }
    d->dirty = NULL;
    disk_flush_reset(d, now);
    for (dqueue_t *q = d->flush_queues, *next; q != NULL; q = next) {
        next = q->flush_next;
        q->n_unflushed = 0;
        q->indexed |= q->target_dirty;
        q->target_dirty = 0;
        q->on_flush = 0;
        q->flush_next = NULL;
        INVARIANT_CHECK(disk_queue_counts_check(q));
    }
    d->flush_queues = NULL;
    for (size_t i = 0; d->rows_dirty && i < d->n_models; i++)
        d->models[i].current_dirty = 0;
    d->rows_dirty = 0;
    for (size_t i = 0; i < d->n_released; i++)
        free(d->released[i].model);
    d->n_released = 0;
    d->meta_dirty = 0;
    d->unflushed_bytes = 0;
    disk_map_trim(d);
    disk_seg_forget(d);
    if (st == STORE_OK)
        disk_jnl_retire(d);
    return st;
}

void disk_flush_discard(disk_t *d)
{
    for (dqueue_t *q = d->flush_queues, *next; q != NULL; q = next) {
        next = q->flush_next;
        q->on_flush = 0;
        q->flush_next = NULL;
    }
    d->flush_queues = NULL;
    for (dseg_t *seg = d->dirty, *next; seg != NULL; seg = next) {
        next = seg->dirty_next;
        seg->dirty = 0;
        seg->dirty_next = NULL;
        seg->w_head = seg->w_tail = DISK_WRITE_NONE;
        if (seg->doomed)
            disk_seg_free(d, seg);
    }
    d->dirty = NULL;
    disk_flush_reset(d, clock_mono_ns());
}
