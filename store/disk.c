/*
 * disk.c - the disk store backend (--store disk): shape-pure segment files, an LMDB index,
 * tombstones in place, whole-file deletion. Recovery at open is in recovery.c.
 *
 * Owns: the data directory's segments/ and index/, every segment's file descriptor (through an
 * LRU cache), the queued-item records of every lane, and the pending map.
 *
 * Invariants:
 *   1. A lane's items live in its segments in arrival order: the lane's queue array is sorted by
 *      (segment sequence, offset), returned items included.
 *   2. Readers never see bytes past a segment's readable boundary: peek stops at the first of
 *      the trailing n_unflushed records, and the boundary advances only in store_flush, after the
 *      data is handed to the kernel (every append is a pwrite) or synced (power level), and after
 *      the index transaction that records it has committed.
 *   3. The pending map is never persisted. After a crash every entry that was not tombstoned is
 *      live again: that is how dispatched-but-unacknowledged work comes back.
 *   4. Completing writes the 4-byte tombstone over the entry's state word first; the segment's
 *      deleted count reaches the index at the next flush. A crash between the two is repaired by
 *      recovery's scan, which counts tombstones.
 *   5. A sealed segment whose entries are all tombstoned is deleted whole: index row first, then
 *      the file, then the directory is synced. A crash in between leaves a file the index does
 *      not know, which recovery adopts, finds fully tombstoned and deletes.
 *   6. Once an fsync, a write (other than running out of space) or an index commit fails, the
 *      store is failed: every later call that would acknowledge something returns STORE_EIO.
 *      A failed sync is never retried, because a retry that succeeds proves nothing about the
 *      pages the kernel already dropped (PostgreSQL's fsyncgate).
 *   7. Out of space on an append is not fatal: the file is cut back to where it was and the
 *      caller is told STORE_ENOSPC; nothing acknowledged is touched.
 *
 * Rejected alternatives:
 *   - A write-ahead log beside the segments: the segment is the durable copy; a WAL would write
 *     every byte twice.
 *   - Buffering appends in user space until flush: a pwrite per append costs a syscall but makes
 *     "handed to the kernel" true at once, lets ENOSPC be reported against the one item that
 *     caused it, and leaves nothing to lose if the process dies between append and flush.
 *   - mmap for reads: thousands of lanes each with a 64 MiB segment would exhaust
 *     vm.max_map_count, and a truncated file turns a read into SIGBUS; pread into a scratch
 *     buffer costs one copy of a batch.
 *   - Keeping payloads in memory: the target is at most 64 bytes per queued item.
 */
#include "store/disk_int.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static disk_t *disk_of(store_t *s)
{
    return (disk_t *)s;
}

static map_key_t disk_ref_key(uint64_t seg_id, uint64_t offset)
{
    return (map_key_t){seg_id, offset};
}

void disk_log(disk_t *d, int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (d->cfg.log != NULL)
        d->cfg.log(d->cfg.log_ctx, level, msg);
    else
        fprintf(stderr, "lanesched store %s: %s\n",
                level == STORE_LOG_ERROR  ? "error"
                : level == STORE_LOG_WARN ? "warning"
                                          : "info",
                msg);
}

void disk_corrupt(disk_t *d, const char *file, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    disk_log(d, STORE_LOG_ERROR, "corruption found at %s:%d: %s", file, line, msg);
}

/* Puts the store in its error state (invariant 6) and says why, once. */
static store_status_t disk_fail(disk_t *d, const char *what, int err)
{
    if (!d->failed)
        disk_log(d, STORE_LOG_ERROR,
                 "%s failed: %s; the store acknowledges nothing more until it is reopened", what,
                 strerror(err));
    d->failed = 1;
    return STORE_EIO;
}

store_status_t disk_fsync_dir(disk_t *d)
{
    if (store_fault_fsync(d->seg_dir_fd, 0) != 0)
        return disk_fail(d, "fsync of the segments directory", errno);
    return STORE_OK;
}

/* ---- models and queues ---------------------------------------------------------------------- */

/* Returns 1 and the model's index when `model` is interned, else 0. */
static int disk_model_find(const disk_t *d, const char *model, uint32_t *out_idx)
{
    for (size_t i = 0; i < d->n_models; i++) {
        if (strcmp(d->models[i].name, model) == 0) {
            *out_idx = (uint32_t)i;
            return 1;
        }
    }
    return 0;
}

store_status_t disk_model_intern(disk_t *d, const char *model, uint32_t *out_idx)
{
    if (disk_model_find(d, model, out_idx))
        return STORE_OK;
    if (strlen(model) > SEG_MODEL_MAX)
        return STORE_EINVAL;
    dmodel_t *models = realloc(d->models, (d->n_models + 1) * sizeof(*models));
    if (models == NULL)
        return STORE_ENOMEM;
    d->models = models;
    char *name = strdup(model);
    if (name == NULL)
        return STORE_ENOMEM;
    models[d->n_models] = (dmodel_t){.name = name};
    *out_idx = (uint32_t)d->n_models++;
    return STORE_OK;
}

store_status_t disk_queue_get(disk_t *d, const char *model, uint64_t signature, uint32_t lane,
                              dqueue_t **out)
{
    uint32_t idx;
    store_status_t st = disk_model_intern(d, model, &idx);
    if (st != STORE_OK)
        return st;
    map_key_t k = {signature, (uint64_t)idx << 32 | lane};
    dqueue_t *q = map_get(&d->queues, k);
    if (q != NULL) {
        *out = q;
        return STORE_OK;
    }
    if (map_reserve(&d->queues, 1) != MAP_OK || (q = calloc(1, sizeof(*q))) == NULL)
        return STORE_ENOMEM;
    q->base.id = idx; /* queues are named by their keys; the id field is not a ref namespace */
    q->model = d->models[idx].name;
    q->model_idx = idx;
    q->signature = signature;
    q->lane = lane;
    map_put(&d->queues, k, q);
    q->all_next = d->all;
    if (d->all != NULL)
        d->all->all_prev = q;
    d->all = q;
    *out = q;
    return STORE_OK;
}

/*
 * Makes room for `extra` records after the last. Grows by half (not double), so the array's
 * slack stays under half a record per item: 32 + 16 = 48 bytes per queued item at worst.
 */
store_status_t disk_queue_reserve(dqueue_t *q, size_t extra)
{
    if (q->head + q->len + extra <= q->cap)
        return STORE_OK;
    if (q->len + extra <= q->cap / 2) {
        memmove(q->recs, q->recs + q->head, q->len * sizeof(*q->recs));
        q->head = 0;
        return STORE_OK;
    }
    size_t cap = q->cap ? q->cap + q->cap / 2 : 16;
    if (cap < q->len + extra)
        cap = q->len + extra;
    drec_t *recs = malloc(cap * sizeof(*recs));
    if (recs == NULL)
        return STORE_ENOMEM;
    if (q->len != 0)
        memcpy(recs, q->recs + q->head, q->len * sizeof(*recs));
    free(q->recs);
    q->recs = recs;
    q->cap = cap;
    q->head = 0;
    return STORE_OK;
}

void disk_queue_trim(dqueue_t *q)
{
    if (q->head != 0) {
        memmove(q->recs, q->recs + q->head, q->len * sizeof(*q->recs));
        q->head = 0;
    }
    if (q->len == 0 || q->len == q->cap)
        return;
    drec_t *recs = realloc(q->recs, q->len * sizeof(*recs));
    if (recs != NULL) {
        q->recs = recs;
        q->cap = q->len;
    }
}

store_status_t disk_queue_push(dqueue_t *q, const drec_t *rec)
{
    if (disk_queue_reserve(q, 1) != STORE_OK)
        return STORE_ENOMEM;
    q->recs[q->head + q->len++] = *rec;
    q->base.queued_items++;
    q->base.queued_tokens += rec->tokens;
    return STORE_OK;
}

static int disk_rec_before(const drec_t *a, const dseg_t *seg, uint64_t offset)
{
    return a->seg->seq < seg->seq || (a->seg == seg && a->offset < offset);
}

/* Index of the first queued record not before (seg, offset). */
static size_t disk_queue_lower_bound(const dqueue_t *q, const dseg_t *seg, uint64_t offset)
{
    size_t lo = 0, hi = q->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (disk_rec_before(&q->recs[q->head + mid], seg, offset))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void disk_queue_free(dqueue_t *q)
{
    free(q->segs);
    free(q->recs);
    free(q);
}

/* ---- segments ------------------------------------------------------------------------------- */

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

static void disk_lru_unlink(disk_t *d, dseg_t *seg)
{
    if (seg->lru_prev != NULL)
        seg->lru_prev->lru_next = seg->lru_next;
    else if (d->lru_head == seg)
        d->lru_head = seg->lru_next;
    if (seg->lru_next != NULL)
        seg->lru_next->lru_prev = seg->lru_prev;
    else if (d->lru_tail == seg)
        d->lru_tail = seg->lru_prev;
    seg->lru_prev = seg->lru_next = NULL;
}

static void disk_seg_close_fd(disk_t *d, dseg_t *seg)
{
    if (seg->fd < 0)
        return;
    disk_lru_unlink(d, seg);
    close(seg->fd);
    seg->fd = -1;
    d->open_fds--;
}

void disk_seg_free(disk_t *d, dseg_t *seg)
{
    disk_seg_close_fd(d, seg);
    free(seg);
}

static void disk_lru_push_front(disk_t *d, dseg_t *seg)
{
    seg->lru_prev = NULL;
    seg->lru_next = d->lru_head;
    if (d->lru_head != NULL)
        d->lru_head->lru_prev = seg;
    d->lru_head = seg;
    if (d->lru_tail == NULL)
        d->lru_tail = seg;
}

/* Closes least recently used descriptors until one more fits the cache (DISK_FD_CACHE). */
static store_status_t disk_fd_make_room(disk_t *d)
{
    while (d->open_fds >= DISK_FD_CACHE && d->lru_tail != NULL) {
        dseg_t *victim = d->lru_tail;
        if (victim->needs_sync && d->cfg.durability == STORE_DURABLE_POWER) {
            if (store_fault_fsync(victim->fd, 1) != 0)
                return disk_fail(d, "fdatasync of a segment", errno);
            victim->needs_sync = 0;
        }
        disk_seg_close_fd(d, victim);
    }
    return STORE_OK;
}

/* Hands an open descriptor to the cache (after disk_fd_make_room). */
static void disk_fd_attach(disk_t *d, dseg_t *seg, int fd)
{
    seg->fd = fd;
    d->open_fds++;
    disk_lru_push_front(d, seg);
}

/* The segment's file descriptor, opened on demand through the LRU cache. */
static store_status_t disk_seg_fd(disk_t *d, dseg_t *seg, int *out_fd)
{
    if (seg->fd >= 0) {
        if (d->lru_head != seg) {
            disk_lru_unlink(d, seg);
            disk_lru_push_front(d, seg);
        }
        *out_fd = seg->fd;
        return STORE_OK;
    }
    store_status_t st = disk_fd_make_room(d);
    if (st != STORE_OK)
        return st;
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    int fd = openat(d->seg_dir_fd, name, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return disk_fail(d, "opening a segment file", errno);
    disk_fd_attach(d, seg, fd);
    *out_fd = fd;
    return STORE_OK;
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

/* Deletes a sealed, fully tombstoned segment (invariant 5). */
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
    disk_seg_close_fd(d, seg);
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

/* Starts a new segment for q (sealing the current one): create, header, directory sync. */
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

/* The segment the next entry of `size` bytes goes to, rolling over at the size cap. */
static store_status_t disk_seg_for_append(disk_t *d, dqueue_t *q, uint64_t size, dseg_t **out)
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

/* ---- the store operations ------------------------------------------------------------------- */

static void disk_close(store_t *store)
{
    disk_t *d = disk_of(store);
    for (size_t i = 0; i < d->pending.cap; i++)
        free(d->pending.slots[i].value);
    for (size_t i = 0; i < d->segments.cap; i++) {
        if (d->segments.slots[i].value != NULL)
            disk_seg_free(d, d->segments.slots[i].value);
    }
    for (dqueue_t *q = d->all, *next; q != NULL; q = next) {
        next = q->all_next;
        disk_queue_free(q);
    }
    map_fini(&d->queues);
    map_fini(&d->segments);
    map_fini(&d->deleted);
    map_fini(&d->pending);
    for (size_t i = 0; i < d->n_models; i++)
        free(d->models[i].name);
    free(d->models);
    for (size_t i = 0; i < d->n_released; i++)
        free(d->released[i].model);
    free(d->released);
    index_close(d->index);
    if (d->seg_dir_fd >= 0)
        close(d->seg_dir_fd);
    if (d->dir_fd >= 0)
        close(d->dir_fd);
    free(d->scratch);
    free(d->dir);
    free(d);
}

static store_status_t disk_queue_open(store_t *store, const store_key_t *key, store_queue_t **out)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    dqueue_t *q;
    store_status_t st = disk_queue_get(d, key->model, key->signature, key->lane, &q);
    if (st == STORE_OK)
        *out = &q->base;
    return st;
}

static store_status_t disk_queue_release(store_t *store, store_queue_t *queue)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    for (size_t i = 0; i < q->n_segs; i++) {
        if (q->segs[i]->deleted != q->segs[i]->entries)
            return STORE_EBUSY;
    }
    dlane_key_t *rel = realloc(d->released, (d->n_released + 1) * sizeof(*rel));
    if (rel == NULL)
        return STORE_ENOMEM;
    d->released = rel;
    char *model = strdup(q->model);
    if (model == NULL)
        return STORE_ENOMEM;
    while (q->n_segs > 0) {
        dseg_t *seg = q->segs[q->n_segs - 1];
        seg->sealed = 1;
        store_status_t st = disk_seg_delete(d, seg);
        if (st != STORE_OK) {
            free(model);
            return st;
        }
    }
    rel[d->n_released++] = (dlane_key_t){model, q->signature, q->lane};
    map_del(&d->queues, (map_key_t){q->signature, (uint64_t)q->model_idx << 32 | q->lane}, NULL);
    if (q->all_prev != NULL)
        q->all_prev->all_next = q->all_next;
    else
        d->all = q->all_next;
    if (q->all_next != NULL)
        q->all_next->all_prev = q->all_prev;
    disk_queue_free(q);
    return STORE_OK;
}

static store_status_t disk_scratch(disk_t *d, size_t need)
{
    if (need <= d->scratch_cap)
        return STORE_OK;
    size_t cap = d->scratch_cap ? d->scratch_cap : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(d->scratch, cap);
    if (p == NULL)
        return STORE_ENOMEM;
    d->scratch = p;
    d->scratch_cap = cap;
    return STORE_OK;
}

static store_status_t disk_append(store_t *store, store_queue_t *queue, const store_item_t *item,
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
    int fd;
    if ((st = disk_queue_reserve(q, 1)) != STORE_OK || (st = disk_scratch(d, size)) != STORE_OK ||
        (st = disk_seg_for_append(d, q, size, &seg)) != STORE_OK ||
        (st = disk_seg_fd(d, seg, &fd)) != STORE_OK)
        return st;
    seg_entry_encode(seg->id, item, item->arrival_ns, d->scratch);
    ssize_t w = store_fault_pwrite(fd, d->scratch, size, (off_t)seg->size);
    if (w != (ssize_t)size) {
        int err = w < 0 ? errno : ENOSPC;
        if (err != ENOSPC)
            return disk_fail(d, "appending to a segment", err);
        if (ftruncate(fd, (off_t)seg->size) != 0)
            return disk_fail(d, "cutting back a partial append", errno);
        return STORE_ENOSPC;
    }
    drec_t rec = {seg, item->arrival_ns, (uint32_t)seg->size, (uint32_t)size, item->tokens, 0};
    disk_queue_push(q, &rec);
    q->n_unflushed++;
    seg->size += size;
    seg->entries++;
    seg->tokens += item->tokens;
    seg->needs_sync = 1;
    disk_seg_mark_dirty(d, seg);
    d->unflushed_bytes += size;
    if (out_ref != NULL)
        *out_ref = (store_ref_t){seg->id, rec.offset};
    return STORE_OK;
}

static store_status_t disk_peek(store_t *store, store_queue_t *queue, store_view_t *views,
                                size_t max, size_t *out_n)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    size_t readable = q->len - q->n_unflushed;
    size_t n = readable < max ? readable : max;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += q->recs[q->head + i].length;
    store_status_t st = disk_scratch(d, bytes);
    if (st != STORE_OK)
        return st;
    /* One pread per run of records that sit back to back in the same segment. */
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        const drec_t *first = &q->recs[q->head + i];
        size_t j = i + 1;
        uint64_t run = first->length;
        while (j < n && q->recs[q->head + j].seg == first->seg &&
               q->recs[q->head + j].offset == first->offset + run)
            run += q->recs[q->head + j++].length;
        int fd;
        if ((st = disk_seg_fd(d, first->seg, &fd)) != STORE_OK)
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
        const uint8_t *e = d->scratch + at;
        size_t id_len = seg_entry_id_len(e);
        views[i] = (store_view_t){
            .ref = {rec->seg->id, rec->offset},
            .id_view = e + SEG_ENTRY_HEADER,
            .id_len = id_len,
            .payload_view = e + SEG_ENTRY_HEADER + id_len,
            .payload_len = seg_entry_payload_len(e),
            .tokens = rec->tokens,
            .deliveries = rec->deliveries,
            .signature = q->signature,
            .arrival_ns = rec->arrival_ns,
        };
        at += rec->length;
    }
    *out_n = n;
    return STORE_OK;
}

static store_status_t disk_commit(store_t *store, store_queue_t *queue, const store_ref_t *refs,
                                  size_t n)
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
        if (rec->seg->id != refs[i].queue || rec->offset != refs[i].offset ||
            map_get(&d->segments, (map_key_t){refs[i].queue, 0}) != rec->seg)
            return STORE_ESTALE;
    }
    drec_t **copies = calloc(n, sizeof(*copies));
    store_status_t st = STORE_ENOMEM;
    if (copies == NULL || map_reserve(&d->pending, n) != MAP_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if ((copies[i] = malloc(sizeof(drec_t))) == NULL)
            goto out;
    }
    /* Step 2: advance the cursor. */
    for (size_t i = 0; i < n; i++) {
        *copies[i] = q->recs[q->head + i];
        copies[i]->deliveries++;
        q->base.queued_items--;
        q->base.queued_tokens -= copies[i]->tokens;
    }
    q->head += n;
    q->len -= n;
    if (q->len == 0)
        q->head = 0;
    /* Step 3: the pending map. */
    for (size_t i = 0; i < n; i++) {
        map_put(&d->pending, disk_ref_key(copies[i]->seg->id, copies[i]->offset), copies[i]);
        copies[i] = NULL;
        q->base.pending_items++;
    }
    st = STORE_OK;
out:
    for (size_t i = 0; copies != NULL && i < n; i++)
        free(copies[i]);
    free(copies);
    return st;
}

/* Is the readable entry at (seg, offset) a tombstone? Reads and verifies it. */
static int disk_entry_is_tombstone(disk_t *d, dseg_t *seg, uint64_t offset)
{
    int fd;
    uint8_t hdr[SEG_ENTRY_HEADER];
    if (offset < seg->header_len || offset % SEG_ALIGN != 0 ||
        offset + SEG_ENTRY_HEADER > seg->readable || disk_seg_fd(d, seg, &fd) != STORE_OK ||
        pread(fd, hdr, sizeof(hdr), (off_t)offset) != (ssize_t)sizeof(hdr))
        return 0;
    uint32_t length = seg_entry_length(hdr);
    if (length < SEG_ENTRY_HEADER || offset + length > seg->readable ||
        disk_scratch(d, length) != STORE_OK ||
        pread(fd, d->scratch, length, (off_t)offset) != (ssize_t)length)
        return 0;
    seg_entry_t e;
    return seg_entry_check(seg_crc_seed(seg->id), d->scratch, length, &e) &&
           e.state == SEG_STATE_TOMB;
}

static store_status_t disk_tombstone(store_t *store, store_ref_t ref, int *out_completed)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    drec_t *rec = NULL;
    if (map_del(&d->pending, disk_ref_key(ref.queue, ref.offset), (void **)&rec) != MAP_OK) {
        dseg_t *seg = map_get(&d->segments, (map_key_t){ref.queue, 0});
        uintptr_t end = (uintptr_t)map_get(&d->deleted, (map_key_t){ref.queue, 0});
        /* A deleted segment's entries were all completed; an offset that cannot start an entry
         * of it (unaligned, inside the header, past the end) was never handed out. Offsets of
         * a deleted file are not kept, so an aligned offset inside one of its entries reads as
         * completed too: harmless, since completing twice changes nothing. */
        int done = seg != NULL
                       ? disk_entry_is_tombstone(d, seg, ref.offset)
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
    dseg_t *seg = rec->seg;
    int fd;
    uint8_t tomb[4];
    store_put32(tomb, SEG_STATE_TOMB);
    store_status_t st = disk_seg_fd(d, seg, &fd);
    if (st == STORE_OK &&
        store_fault_pwrite(fd, tomb, sizeof(tomb), (off_t)rec->offset + SEG_STATE_OFFSET) != 4)
        st = disk_fail(d, "writing a tombstone", errno ? errno : EIO);
    if (st != STORE_OK) {
        /* still pending: the store is failed, so nothing acknowledges it */
        map_put(&d->pending, disk_ref_key(ref.queue, ref.offset), rec);
        return st;
    }
    seg->q->base.pending_items--;
    free(rec);
    seg->deleted++;
    seg->needs_sync = 1;
    disk_seg_mark_dirty(d, seg);
    if (out_completed != NULL)
        *out_completed = 1;
    if (seg->sealed && seg->deleted == seg->entries)
        return disk_seg_delete(d, seg);
    return STORE_OK;
}

static store_status_t disk_return(store_t *store, const store_ref_t *refs, size_t n)
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
        drec_t *rec = map_get(&d->pending, disk_ref_key(refs[i].queue, refs[i].offset));
        if (disk_queue_reserve(rec->seg->q, n) != STORE_OK)
            return STORE_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        drec_t *rec = NULL;
        map_del(&d->pending, disk_ref_key(refs[i].queue, refs[i].offset), (void **)&rec);
        dqueue_t *q = rec->seg->q;
        size_t pos = disk_queue_lower_bound(q, rec->seg, rec->offset);
        if (pos == 0 && q->head > 0)
            q->head--;
        else
            memmove(q->recs + q->head + pos + 1, q->recs + q->head + pos,
                    (q->len - pos) * sizeof(*q->recs));
        q->recs[q->head + pos] = *rec;
        q->len++;
        q->base.queued_items++;
        q->base.queued_tokens += rec->tokens;
        q->base.pending_items--;
        free(rec);
    }
    return STORE_OK;
}

static uint64_t disk_pending_count(const store_t *store)
{
    return ((const disk_t *)store)->pending.len;
}

static store_status_t disk_flush(store_t *store)
{
    disk_t *d = disk_of(store);
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
        return STORE_OK; /* an idle turn walks no queue */

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

    /* Committed: only now do the boundaries move (invariant 2). */
    for (dseg_t *seg = d->dirty, *next; seg != NULL; seg = next) {
        next = seg->dirty_next;
        seg->readable = seg->size;
        seg->flushed_entries = seg->entries;
        seg->flushed_tokens = seg->tokens;
        seg->q->n_unflushed = 0;
        seg->dirty = 0;
        seg->dirty_next = NULL;
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

static uint64_t disk_unflushed_bytes(const store_t *store)
{
    return ((const disk_t *)store)->unflushed_bytes;
}

static store_status_t disk_queue_target_set(store_t *store, store_queue_t *queue, uint32_t target)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    if (q->target != target) {
        q->target = target;
        q->target_dirty = 1;
        d->rows_dirty = 1;
    }
    return STORE_OK;
}

static int disk_queue_next(store_t *store, store_queue_t *prev, store_queue_t **out,
                           store_key_t *out_key, uint32_t *out_target)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = prev == NULL ? d->all : ((dqueue_t *)prev)->all_next;
    if (q == NULL)
        return 0;
    if (out != NULL)
        *out = &q->base;
    if (out_key != NULL)
        *out_key = (store_key_t){q->model, q->signature, q->lane};
    if (out_target != NULL)
        *out_target = q->target;
    return 1;
}

static store_status_t disk_current_shape_set(store_t *store, const char *model, uint64_t signature)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    uint32_t idx;
    store_status_t st = disk_model_intern(d, model, &idx);
    if (st != STORE_OK)
        return st;
    dmodel_t *m = &d->models[idx];
    if (!m->has_current || m->current != signature) {
        m->has_current = 1;
        m->current = signature;
        m->current_dirty = 1;
        d->rows_dirty = 1;
    }
    return STORE_OK;
}

static store_status_t disk_current_shape_get(store_t *store, const char *model, int *out_has,
                                             uint64_t *out_signature)
{
    disk_t *d = disk_of(store);
    uint32_t idx;
    if (!disk_model_find(d, model, &idx) || !d->models[idx].has_current) {
        *out_has = 0;
        return STORE_OK;
    }
    *out_has = 1;
    *out_signature = d->models[idx].current;
    return STORE_OK;
}

static store_status_t disk_queue_scan(store_t *store, store_queue_t *queue, store_scan_fn fn,
                                      void *ctx)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    uint8_t hdr[SEG_ENTRY_HEADER + SEG_ID_MAX];
    for (size_t i = 0; i < q->len - q->n_unflushed; i++) {
        const drec_t *rec = &q->recs[q->head + i];
        int fd;
        store_status_t st = disk_seg_fd(d, rec->seg, &fd);
        if (st != STORE_OK)
            return st;
        size_t want = rec->length < sizeof(hdr) ? rec->length : sizeof(hdr);
        if (pread(fd, hdr, want, rec->offset) != (ssize_t)want)
            return disk_fail(d, "reading a segment", errno ? errno : EIO);
        size_t id_len = seg_entry_id_len(hdr);
        store_view_t v = {.ref = {rec->seg->id, rec->offset},
                          .id_view = hdr + SEG_ENTRY_HEADER,
                          .id_len = id_len <= SEG_ID_MAX ? id_len : 0,
                          .tokens = rec->tokens,
                          .deliveries = rec->deliveries,
                          .signature = q->signature,
                          .arrival_ns = rec->arrival_ns};
        fn(ctx, &v);
    }
    return STORE_OK;
}

static int disk_queue_oldest(const store_t *store, const store_queue_t *queue, uint64_t *out)
{
    (void)store;
    const dqueue_t *q = (const dqueue_t *)queue;
    if (q->len == q->n_unflushed)
        return 0;
    *out = q->recs[q->head].arrival_ns;
    return 1;
}

static const struct store_ops disk_ops = {
    .queue_oldest = disk_queue_oldest,
    .queue_scan = disk_queue_scan,
    .flush = disk_flush,
    .unflushed_bytes = disk_unflushed_bytes,
    .queue_target_set = disk_queue_target_set,
    .queue_next = disk_queue_next,
    .close = disk_close,
    .queue_open = disk_queue_open,
    .queue_release = disk_queue_release,
    .append = disk_append,
    .peek = disk_peek,
    .commit = disk_commit,
    .tombstone = disk_tombstone,
    .ret = disk_return,
    .pending_count = disk_pending_count,
    .current_shape_set = disk_current_shape_set,
    .current_shape_get = disk_current_shape_get,
};

store_status_t store_open_disk(const store_disk_config_t *cfg, store_recovery_t *out_report,
                               store_t **out)
{
    if (cfg == NULL || cfg->dir == NULL || cfg->dir[0] == '\0' || out == NULL ||
        cfg->segment_max_bytes > (1ull << 31))
        return STORE_EINVAL;
    store_status_t st = STORE_ENOMEM;
    disk_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return st;
    d->base.ops = &disk_ops;
    d->cfg = *cfg;
    d->cfg.dir = NULL;
    if (d->cfg.segment_max_bytes == 0)
        d->cfg.segment_max_bytes = STORE_SEGMENT_MAX_DEFAULT;
    if (d->cfg.index_map_bytes == 0)
        d->cfg.index_map_bytes = 1ull << 30;
    d->dir_fd = d->seg_dir_fd = -1;
    map_init(&d->queues);
    map_init(&d->segments);
    map_init(&d->deleted);
    map_init(&d->pending);
    store_recovery_t report = {0};
    if ((d->dir = strdup(cfg->dir)) == NULL)
        goto out;
    if (mkdir(d->dir, 0755) != 0 && errno != EEXIST) {
        disk_log(d, STORE_LOG_ERROR, "cannot create data directory %s: %s", d->dir,
                 strerror(errno));
        st = STORE_EIO;
        goto out;
    }
    d->dir_fd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dir_fd < 0 || (mkdirat(d->dir_fd, "segments", 0755) != 0 && errno != EEXIST) ||
        (d->seg_dir_fd = openat(d->dir_fd, "segments", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        disk_log(d, STORE_LOG_ERROR, "cannot open data directory %s: %s", d->dir, strerror(errno));
        st = STORE_EIO;
        goto out;
    }
    if ((st = disk_recover(d, &report)) != STORE_OK)
        goto out;
    if (out_report != NULL)
        *out_report = report;
    *out = &d->base;
    d = NULL;
out:
    if (d != NULL)
        disk_close(&d->base);
    return st;
}
