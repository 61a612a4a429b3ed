/*
 * disk_seg.c - one segment file of the disk backend: its creation, its place in its lane's
 * list, which segment an append goes to, and its whole-file deletion.
 *
 * Owns every dseg_t (through disk_t.segments) and the segments/ directory's entries; the
 * format of what is written is segment.c's.
 *
 * Invariants:
 *   1. Only a lane's last segment is unsealed; an append never starts a segment unless the last
 *      one is sealed or would pass segment_max_bytes (a segment holding only its header takes
 *      any entry, so an entry larger than the cap still has a home).
 *   2. A new segment's file exists, with its header written and the directory synced, before it
 *      is listed: the index never names a segment whose file a crash could lose.
 *   3. A sealed segment whose entries are all tombstoned is deleted whole: index row first,
 *      then the file, then the directory is synced. A crash in between leaves a file the index
 *      does not know, which recovery adopts, finds fully tombstoned and deletes.
 *   4. Segment ids are never reused (next_segment_id only grows and is in the index's meta
 *      row); a segment deleted this run is remembered with its final size (disk_t.deleted), so a
 *      late completion of one of its refs reads as completed.
 *
 * Rejected: compacting the live entries out of mostly tombstoned segments. It writes durable
 * bytes a second time; a lane's old segments drain as the lane is served, so deleting whole
 * files (the design's rule) reclaims the space without a rewrite.
 */
#include "store/disk_int.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

store_status_t disk_fsync_dir(disk_t *d)
{
    if (store_fault_fsync(d->seg_dir_fd, 0) != 0)
        return disk_fail(d, "fsync of the segments directory", errno);
    return STORE_OK;
}

store_status_t disk_seg_attach(disk_t *d, dqueue_t *q, dseg_t *seg)
{
    if (q->n_segs == q->cap_segs) {
        size_t cap = q->cap_segs ? q->cap_segs * 2 : 4;
        dseg_t **segs = realloc(q->segs, cap * sizeof(*segs));
        if (segs == NULL)
            return STORE_ENOMEM;
        q->segs = segs;
        q->cap_segs = cap;
    }
    if (map_put(&d->segments, (map_key_t){seg->id, 0}, seg) != MAP_OK)
        return STORE_ENOMEM;
    q->segs[q->n_segs++] = seg;
    seg->q = q;
    if (seg->seq >= q->next_seq)
        q->next_seq = seg->seq + 1;
    return STORE_OK;
}

void disk_seg_free(disk_t *d, dseg_t *seg)
{
    disk_fd_close(d, seg);
    free(seg);
}

void disk_seg_mark_dirty(disk_t *d, dseg_t *seg)
{
    if (seg->dirty)
        return;
    seg->dirty = 1;
    seg->dirty_next = d->dirty;
    d->dirty = seg;
}

index_segment_row_t disk_seg_row(const dseg_t *seg)
{
    index_segment_row_t row = {
        .segment_id = seg->id,
        .sequence = seg->seq,
        .signature = seg->q->signature,
        .created_ns = seg->created_ns,
        .entries = seg->flushed_entries,
        .tokens = seg->flushed_tokens,
        .readable = seg->readable,
        .deleted = seg->deleted,
        .lane = seg->q->lane,
        .sealed = seg->sealed,
    };
    snprintf(row.model, sizeof(row.model), "%s", seg->q->model);
    return row;
}

/* Drops the segment from its queue's list. */
static void disk_seg_detach(dseg_t *seg)
{
    dqueue_t *q = seg->q;
    for (size_t i = 0; i < q->n_segs; i++) {
        if (q->segs[i] == seg) {
            memmove(q->segs + i, q->segs + i + 1, (q->n_segs - i - 1) * sizeof(*q->segs));
            q->n_segs--;
            break;
        }
    }
}

/* Invariant 3. */
store_status_t disk_seg_delete(disk_t *d, dseg_t *seg)
{
    index_txn_t *txn = NULL;
    if (index_begin(d->index, &txn) != INDEX_OK || index_segment_del(txn, seg->id) != INDEX_OK) {
        index_abort(txn);
        return disk_fail(d, "removing a segment's index row", EIO);
    }
    if (index_commit(txn) != INDEX_OK)
        return disk_fail(d, "committing a segment's index removal", EIO);
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    disk_fd_close(d, seg);
    if (store_fault_unlinkat(d->seg_dir_fd, name) != 0)
        return disk_fail(d, "deleting a drained segment file", errno);
    store_status_t st = disk_fsync_dir(d);
    if (st != STORE_OK)
        return st;
    /* The removed row must not come back with the next flush. */
    for (dseg_t **p = &d->dirty; *p != NULL; p = &(*p)->dirty_next) {
        if (*p == seg) {
            *p = seg->dirty_next;
            break;
        }
    }
    map_del(&d->segments, (map_key_t){seg->id, 0}, NULL);
    map_put(&d->deleted, (map_key_t){seg->id, 0}, (void *)(uintptr_t)(seg->size + 1));
    disk_seg_detach(seg);
    disk_seg_free(d, seg);
    return STORE_OK;
}

/* Starts a new segment for q: create, header, directory sync (invariant 2). */
static store_status_t disk_seg_create(disk_t *d, dqueue_t *q, dseg_t **out)
{
    store_status_t st = STORE_ENOMEM;
    dseg_t *seg = calloc(1, sizeof(*seg));
    uint8_t *hdr = NULL;
    int fd = -1;
    if (seg == NULL || map_reserve(&d->deleted, 1) != MAP_OK)
        goto out;
    if ((st = disk_fd_make_room(d)) != STORE_OK)
        goto out;
    st = STORE_ENOMEM;
    seg->fd = -1;
    seg->id = d->next_segment_id;
    seg->seq = q->next_seq;
    seg->created_ns = clock_wall_ns();
    seg_header_t h = {.segment_id = seg->id,
                      .signature = q->signature,
                      .sequence = seg->seq,
                      .created_ns = seg->created_ns,
                      .lane = q->lane};
    snprintf(h.model, sizeof(h.model), "%s", q->model);
    seg->header_len = seg_header_size(strlen(q->model));
    if ((hdr = malloc(seg->header_len)) == NULL)
        goto out;
    seg_header_encode(&h, hdr);
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    fd = openat(d->seg_dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = errno == ENOSPC ? STORE_ENOSPC : disk_fail(d, "creating a segment file", errno);
        goto out;
    }
    ssize_t w = store_fault_pwrite(fd, hdr, seg->header_len, 0);
    if (w != (ssize_t)seg->header_len) {
        int err = w < 0 ? errno : ENOSPC;
        close(fd);
        fd = -1;
        unlinkat(d->seg_dir_fd, name, 0);
        st = err == ENOSPC ? STORE_ENOSPC : disk_fail(d, "writing a segment header", err);
        goto out;
    }
    if ((st = disk_fsync_dir(d)) != STORE_OK)
        goto out;
    if ((st = disk_seg_attach(d, q, seg)) != STORE_OK)
        goto out;
    d->next_segment_id++;
    d->meta_dirty = 1;
    seg->size = seg->readable = seg->header_len;
    seg->needs_sync = 1;
    disk_fd_attach(d, seg, fd);
    fd = -1;
    disk_seg_mark_dirty(d, seg);
    *out = seg;
    seg = NULL;
    st = STORE_OK;
out:
    if (fd >= 0)
        close(fd);
    free(hdr);
    free(seg);
    return st;
}

/* Invariant 1: rolls over at the size cap, sealing the last segment. */
store_status_t disk_seg_pick(disk_t *d, dqueue_t *q, uint64_t size, dseg_t **out)
{
    dseg_t *last = q->n_segs ? q->segs[q->n_segs - 1] : NULL;
    if (last != NULL && !last->sealed &&
        (last->size == last->header_len || last->size + size <= d->cfg.segment_max_bytes)) {
        *out = last;
        return STORE_OK;
    }
    store_status_t st = disk_seg_create(d, q, out);
    if (st != STORE_OK)
        return st;
    if (last != NULL && !last->sealed) {
        last->sealed = 1;
        disk_seg_mark_dirty(d, last);
        if (last->deleted == last->entries && last->size == last->readable)
            return disk_seg_delete(d, last);
    }
    return STORE_OK;
}
