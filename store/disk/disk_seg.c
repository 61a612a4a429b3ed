/*
 * disk_seg.c - one segment file of a model's log: its creation, the space reserved ahead of its
 * appends, the writes gathered for it until the next flush, its place in its model's list and
 * its slot, which segment an append goes to, and its whole-file deletion.
 *
 * A model's items of every shape and lane go to one log: a sequence of segment files, the last
 * of which takes the appends. How many files exist, are created or are synced depends on the
 * bytes appended and the number of models, never on the number of lanes or shapes.
 *
 * Owns every dseg_t (through disk_t.segments, then the dirty list once doomed), the segments/
 * directory's entries, the slot table (disk_t.slots) and the turn's gathered writes
 * (disk_t.arena, disk_t.writes); the format of what is written is segment.c's, the writing
 * disk_flush.c's.
 *
 * Invariants:
 *   1. Only a model's last segment is unsealed; an append never starts a segment unless the last
 *      one is sealed or would pass segment_max_bytes (a segment holding only its header takes
 *      any entry, so an entry larger than the cap still has a home).
 *   2. A new segment's file exists, with its header written, before it is listed; at the
 *      power-loss level the flush syncs the directory before the index commit that names it:
 *      the index never names a segment whose file a crash could lose. (At the process level no
 *      directory is synced: a crash of the process loses no directory entry, and the index
 *      itself commits without a sync there.)
 *   3. A sealed segment whose entries are all tombstoned is doomed: out of its queue and the
 *      segment map at once, its row deleted in the next flush's transaction, its file unlinked
 *      after that commit. A crash in between leaves a file the index does not know, which
 *      recovery adopts, finds fully tombstoned and deletes.
 *   4. Segment ids are never reused (next_segment_id only grows and is in the index's meta
 *      row); a segment deleted this run is remembered with its final size (disk_t.deleted), so a
 *      late completion of one of its refs reads as completed: the last DISK_DELETED_KEEP of them,
 *      each until at least the flush that unlinks it. The last id is never drawn
 *      (disk_seg_id_draw): its name is reserved and the counter past it would wrap.
 *   5. seg->size never passes seg->reserved while the file system supports fallocate: the room
 *      of every gathered append is reserved before the append says OK, so writing it at the
 *      flush cannot run out of space, and a full disk refuses the one item that did not fit.
 *   6. A live or doomed segment holds a slot, and slots[slot] names it; a slot is handed out
 *      again only after its segment is freed, when no record names it any more (every entry
 *      was completed).
 *   7. Appends and new segments leave DISK_FREE_KEEP of the file system free (checked at each
 *      reservation step and segment creation, and per item where fallocate is missing): a disk
 *      the store filled itself still has room for a journal file that records the deliveries
 *      and tombstones of the items it holds. A current segment whose every entry was completed
 *      is rolled over when an append of its model finds no room (disk_item.c), or no room for
 *      the segment after it at the size cap (disk_seg_pick), so draining the model's queue
 *      gives the space back at once.
 *   8. A model's current segment is sealed at a flush when every entry in it is completed and no
 *      flush wrote to it for idle_seal_ms (deleted with it: a model that stopped appending holds
 *      no file, descriptor or journal), and when a journal file filled while it held records in
 *      an older one (so a slow model's segment, which takes months to reach the size cap, holds
 *      journal files only while its items wait). Busy models roll over at the size cap first.
 *
 * Rejected: compacting the live entries out of mostly tombstoned segments. It writes durable
 * bytes a second time, and a moved entry would no longer sit in arrival order in its log; the
 * scheduler's age bound serves every lane within a bounded wait, so a segment drains and is
 * deleted whole. A log per shape (files shape-pure): a flush then writes, and the kernel then
 * updates the inode of, one file per shape touched, which measured an order of magnitude more
 * kernel time per item than one file per model at 128 shapes (docs/store.md). Reserving with
 * ftruncate (a sparse file): it allocates nothing, so a full disk would surface at the flush,
 * after the appends said OK; fallocate's FALLOC_FL_KEEP_SIZE reserves blocks and leaves the
 * size alone, so recovery still reads exactly the bytes that were written.
 */
#define _GNU_SOURCE
#include "store/disk/disk_int.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

store_status_t disk_fsync_dir(disk_t *d, unsigned changes)
{
    for (unsigned i = 1; i < changes; i++) {
        if (store_fault_hit(STORE_FAULT_FSYNC))
            return disk_fail(d, "fsync of the segments directory", EIO);
    }
    if (store_fault_fsync(d->seg_dir_fd, 0) != 0)
        return disk_fail(d, "fsync of the segments directory", errno);
    return STORE_OK;
}

/* A slot for seg (invariant 6). */
static store_status_t disk_slot_take(disk_t *d, dseg_t *seg)
{
    if (d->n_free_slots > 0) {
        seg->slot = d->free_slots[--d->n_free_slots];
    } else {
        if (d->n_slots == d->cap_slots) {
            uint32_t cap = d->cap_slots ? d->cap_slots * 2 : 64;
            if (cap > DISK_SLOT_MAX + 1u)
                cap = DISK_SLOT_MAX + 1u;
            if (d->n_slots == cap)
                return STORE_ENOMEM; /* 2^24 live segments: nothing that large can exist */
            dseg_t **slots = realloc(d->slots, cap * sizeof(*slots));
            if (slots == NULL)
                return STORE_ENOMEM;
            d->slots = slots;
            /* Room to give every slot back without an allocation that could fail. */
            uint32_t *free_slots = realloc(d->free_slots, cap * sizeof(*free_slots));
            if (free_slots == NULL)
                return STORE_ENOMEM;
            d->free_slots = free_slots;
            d->cap_slots = cap;
        }
        seg->slot = d->n_slots++;
    }
    d->slots[seg->slot] = seg;
    return STORE_OK;
}

store_status_t disk_seg_attach(disk_t *d, dseg_t *seg)
{
    dmodel_t *m = &d->models[seg->model_idx];
    if (m->n_segs == m->cap_segs) {
        size_t cap = m->cap_segs ? m->cap_segs * 2 : 4;
        dseg_t **segs = realloc(m->segs, cap * sizeof(*segs));
        if (segs == NULL)
            return STORE_ENOMEM;
        m->segs = segs;
        m->cap_segs = cap;
    }
    if (map_reserve(&d->segments, 1) != MAP_OK)
        return STORE_ENOMEM;
    store_status_t st = disk_slot_take(d, seg);
    if (st != STORE_OK)
        return st;
    map_put(&d->segments, (map_key_t){seg->id, 0}, seg);
    size_t at = m->n_segs; /* in sequence order (recovery attaches in that order too) */
    while (at > 0 && m->segs[at - 1]->seq > seg->seq)
        at--;
    memmove(m->segs + at + 1, m->segs + at, (m->n_segs - at) * sizeof(*m->segs));
    m->segs[at] = seg;
    m->n_segs++;
    if (seg->seq >= m->next_seq)
        m->next_seq = seg->seq + 1;
    return STORE_OK;
}

void disk_seg_free(disk_t *d, dseg_t *seg)
{
    disk_map_drop(d, seg);
    disk_fd_close(d, seg);
    if (seg->slot < d->n_slots && d->slots[seg->slot] == seg) {
        d->slots[seg->slot] = NULL;
        d->free_slots[d->n_free_slots++] = seg->slot;
    }
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

index_segment_row_t disk_seg_row(const disk_t *d, const dseg_t *seg)
{
    index_segment_row_t row = {
        .segment_id = seg->id,
        .sequence = seg->seq,
        .created_ns = seg->created_ns,
        .entries = seg->flushed_entries,
        .tokens = seg->flushed_tokens,
        .readable = seg->readable,
        .deleted = seg->deleted,
        .sealed = seg->sealed,
    };
    snprintf(row.model, sizeof(row.model), "%s", d->models[seg->model_idx].name);
    return row;
}

/* Drops the segment from its model's list. */
static void disk_seg_detach(disk_t *d, dseg_t *seg)
{
    dmodel_t *m = &d->models[seg->model_idx];
    for (size_t i = 0; i < m->n_segs; i++) {
        if (m->segs[i] == seg) {
            memmove(m->segs + i, m->segs + i + 1, (m->n_segs - i - 1) * sizeof(*m->segs));
            m->n_segs--;
            break;
        }
    }
}

void disk_seg_forget(disk_t *d)
{
    if (d->n_deleted_ids <= DISK_DELETED_KEEP)
        return;
    size_t drop = d->n_deleted_ids - DISK_DELETED_KEEP;
    for (size_t i = 0; i < drop; i++)
        map_del(&d->deleted, (map_key_t){d->deleted_ids[i], 0}, NULL);
    memmove(d->deleted_ids, d->deleted_ids + drop, DISK_DELETED_KEEP * sizeof(*d->deleted_ids));
    d->n_deleted_ids = DISK_DELETED_KEEP;
}

/* Invariant 3: the row and the file go at the next flush (disk_flush.c). */
store_status_t disk_seg_delete(disk_t *d, dseg_t *seg)
{
    map_del(&d->segments, (map_key_t){seg->id, 0}, NULL);
    /* Room was reserved when the segment was made (disk_seg_create, recovery's scan). */
    map_put(&d->deleted, (map_key_t){seg->id, 0}, (void *)(uintptr_t)(seg->size + 1));
    if (d->n_deleted_ids == d->cap_deleted_ids) {
        size_t cap = d->cap_deleted_ids ? 2 * d->cap_deleted_ids : 64;
        uint64_t *ids = realloc(d->deleted_ids, cap * sizeof(*ids));
        if (ids != NULL) { /* else remembered for the run, as before the bound */
            d->deleted_ids = ids;
            d->cap_deleted_ids = cap;
        }
    }
    if (d->n_deleted_ids < d->cap_deleted_ids)
        d->deleted_ids[d->n_deleted_ids++] = seg->id;
    disk_seg_detach(d, seg);
    seg->doomed = 1;
    disk_seg_mark_dirty(d, seg);
    return STORE_OK;
}

store_status_t disk_seg_unlink(disk_t *d, dseg_t *seg)
{
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    disk_map_drop(d, seg);
    disk_fd_close(d, seg);
    int rc = store_fault_unlinkat(d->seg_dir_fd, name);
    int err = errno;
    disk_seg_free(d, seg); /* out of every list already: freed whatever the unlink did */
    if (rc != 0)
        return disk_fail(d, "deleting a drained segment file", err);
    d->dir_dirty++;
    return STORE_OK;
}

/* The first reservation of a segment and the largest step: a model that takes a few items
 * reserves little, a busy one reserves ahead in steps that double up to the cap, one fallocate
 * per several thousand entries. */
#define DISK_RESERVE_MIN (64u << 10)
#define DISK_RESERVE_MAX (4u << 20)
/* Invariant 7: room on the file system that appends never take, for what must still work
 * when they are refused: a journal file for the deliveries and tombstones of the items held
 * (its creation halves its size down to 4 KiB until it fits), the index's growth beyond its
 * own reservation, a new segment's header. A megabyte holds a journal of 20,000 records. */
#define DISK_FREE_KEEP (1u << 20)

/* Bytes the file system of fd has free for unprivileged use (f_bavail, below what root may
 * still write); UINT64_MAX when it cannot tell. */
static uint64_t disk_fs_avail(int fd)
{
    struct statvfs sv;
    if (fstatvfs(fd, &sv) != 0)
        return UINT64_MAX;
    return (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
}

store_status_t disk_seg_reserve(disk_t *d, dseg_t *seg, uint64_t size)
{
    uint64_t need = seg->size + size;
    if (d->reserve_unsupported) /* written at once (disk_item.c): checked per item */
        return disk_fs_avail(d->seg_dir_fd) < size + DISK_FREE_KEEP ? STORE_ENOSPC : STORE_OK;
    if (need <= seg->reserved)
        return STORE_OK;
    uint64_t step = seg->reserved - seg->header_len;
    step = step < DISK_RESERVE_MIN   ? DISK_RESERVE_MIN
           : step > DISK_RESERVE_MAX ? DISK_RESERVE_MAX
                                     : step;
    uint64_t want = need + step;
    if (want > d->cfg.segment_max_bytes)
        want = need > d->cfg.segment_max_bytes ? need : d->cfg.segment_max_bytes;
    int fd;
    store_status_t st = disk_fd_get(d, seg, &fd);
    if (st != STORE_OK)
        return st;
    uint64_t avail = disk_fs_avail(fd); /* one call per step, not per item */
    if (avail != UINT64_MAX && avail < (need - seg->reserved) + DISK_FREE_KEEP)
        return STORE_ENOSPC;
    if (avail != UINT64_MAX && avail < (want - seg->reserved) + DISK_FREE_KEEP)
        want = need; /* the step would eat into the kept room; the item itself does not */
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)seg->reserved, (off_t)(want - seg->reserved)) ==
        0) {
        seg->reserved = want;
        return STORE_OK;
    }
    int err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS) {
        d->reserve_unsupported = 1;
        disk_log(d, STORE_LOG_WARN,
                 "the file system of %s cannot reserve space (fallocate: %s): appends are "
                 "written one by one so that a full disk is still refused item by item",
                 d->dir, strerror(err));
        return STORE_OK;
    }
    if (err != ENOSPC && err != EDQUOT)
        return disk_fail(d, "reserving space in a segment", err);
    /* Nearly full: the step does not fit; the item itself may. */
    if (want > need && fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)seg->reserved,
                                 (off_t)(need - seg->reserved)) == 0) {
        seg->reserved = need;
        return STORE_OK;
    }
    return STORE_ENOSPC;
}

/* Room for one more gathered write. */
static store_status_t disk_writes_reserve(disk_t *d)
{
    if (d->n_writes < d->cap_writes)
        return STORE_OK;
    size_t cap = d->cap_writes ? d->cap_writes * 2 : 256;
    if (cap > DISK_WRITE_NONE)
        return STORE_ENOMEM;
    dwrite_t *w = realloc(d->writes, cap * sizeof(*w));
    if (w == NULL)
        return STORE_ENOMEM;
    d->writes = w;
    d->cap_writes = cap;
    return STORE_OK;
}

static void disk_seg_chain(disk_t *d, dseg_t *seg, const dwrite_t *w)
{
    uint32_t i = (uint32_t)d->n_writes++;
    d->writes[i] = *w;
    d->writes[i].next = DISK_WRITE_NONE;
    if (seg->w_tail == DISK_WRITE_NONE)
        seg->w_head = i;
    else
        d->writes[seg->w_tail].next = i;
    seg->w_tail = i;
}

store_status_t disk_seg_gather_entry(disk_t *d, dseg_t *seg, uint32_t len, uint8_t **out_buf)
{
    if (d->arena_len != 0 && d->arena_len + len > d->cfg.spill_bytes) {
        store_status_t st = disk_flush_spill(d);
        if (st != STORE_OK)
            return st;
    }
    if (d->arena_len + len > d->arena_cap) {
        size_t cap = d->arena_cap ? d->arena_cap : 64u << 10;
        while (cap < d->arena_len + len)
            cap *= 2;
        uint8_t *a = realloc(d->arena, cap);
        if (a == NULL)
            return STORE_ENOMEM;
        d->arena = a;
        d->arena_cap = cap;
    }
    dwrite_t *tail = seg->w_tail == DISK_WRITE_NONE ? NULL : &d->writes[seg->w_tail];
    if (tail != NULL && tail->items != 0 && tail->off + tail->len == seg->size &&
        tail->at + tail->len == d->arena_len && (uint64_t)tail->len + len <= UINT32_MAX) {
        tail->len += len; /* the same run: back to back in the file and in the arena */
        tail->items++;
    } else {
        if (disk_writes_reserve(d) != STORE_OK)
            return STORE_ENOMEM;
        dwrite_t w = {.off = seg->size, .at = d->arena_len, .len = len, .items = 1};
        disk_seg_chain(d, seg, &w);
    }
    *out_buf = d->arena + d->arena_len;
    d->arena_len += len;
    return STORE_OK;
}

store_status_t disk_seg_gather_tomb(disk_t *d, dseg_t *seg, uint64_t off, uint32_t len)
{
    if (disk_writes_reserve(d) != STORE_OK)
        return STORE_ENOMEM;
    dwrite_t w = {.off = off, .len = len};
    disk_seg_chain(d, seg, &w);
    return STORE_OK;
}

int disk_seg_gathered_tomb(const disk_t *d, const dseg_t *seg, uint64_t off)
{
    for (uint32_t i = seg->w_head; i != DISK_WRITE_NONE; i = d->writes[i].next) {
        const dwrite_t *w = &d->writes[i];
        if (w->items == 0 && w->off == off)
            return 1;
    }
    return 0;
}

store_status_t disk_scratch_reserve(disk_t *d, size_t need)
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

int disk_seg_entry_read(disk_t *d, dseg_t *seg, uint64_t off, seg_entry_t *out)
{
    if (off < seg->header_len || off % SEG_ALIGN != 0 || off + SEG_ENTRY_HEADER > seg->readable)
        return 0;
    uint32_t length;
    const uint8_t *view = disk_map_view(d, seg, off, SEG_ENTRY_HEADER);
    if (view != NULL) {
        length = seg_entry_length(view);
        if (length < SEG_ENTRY_HEADER || off + length > seg->readable)
            return 0;
        if ((view = disk_map_view(d, seg, off, length)) == NULL)
            return -1;
    } else {
        uint8_t hdr[SEG_ENTRY_HEADER];
        int fd;
        if (disk_fd_get(d, seg, &fd) != STORE_OK ||
            pread(fd, hdr, sizeof(hdr), (off_t)off) != (ssize_t)sizeof(hdr))
            return -1;
        length = seg_entry_length(hdr);
        if (length < SEG_ENTRY_HEADER || off + length > seg->readable)
            return 0;
        if (disk_scratch_reserve(d, length) != STORE_OK ||
            pread(fd, d->scratch, length, (off_t)off) != (ssize_t)length)
            return -1;
        view = d->scratch;
    }
    return seg_entry_check(seg_crc_seed(seg->id), view, length, out);
}

store_status_t disk_seg_id_draw(disk_t *d, uint64_t *out_id)
{
    if (d->next_segment_id == UINT64_MAX)
        return disk_fail(d,
                         "drawing a segment id (the index or a file named an id next to 2^64, "
                         "so the ids are exhausted)",
                         EOVERFLOW);
    *out_id = d->next_segment_id;
    return STORE_OK;
}

/* Starts a new segment of the model's log: create, header, directory sync (invariant 2). */
static store_status_t disk_seg_create(disk_t *d, uint32_t model_idx, dseg_t **out)
{
    store_status_t st = STORE_ENOMEM;
    dmodel_t *m = &d->models[model_idx];
    dseg_t *seg = NULL;
    uint8_t *hdr = NULL;
    int fd = -1;
    if (disk_fs_avail(d->seg_dir_fd) < DISK_RESERVE_MIN + DISK_FREE_KEEP) { /* invariant 7 */
        st = STORE_ENOSPC;
        goto out;
    }
    if ((seg = calloc(1, sizeof(*seg))) == NULL || map_reserve(&d->deleted, 1) != MAP_OK)
        goto out;
    if ((st = disk_fd_make_room(d)) != STORE_OK)
        goto out;
    st = STORE_ENOMEM;
    seg->fd = -1;
    seg->w_head = seg->w_tail = DISK_WRITE_NONE;
    if ((st = disk_seg_id_draw(d, &seg->id)) != STORE_OK)
        goto out;
    st = STORE_ENOMEM;
    seg->seq = m->next_seq;
    seg->model_idx = model_idx;
    seg->slot = UINT32_MAX;
    seg->jnl_min = UINT64_MAX;
    seg->created_ns = clock_wall_ns();
    seg->appended_ns = clock_mono_ns();
    seg_header_t h = {.segment_id = seg->id, .sequence = seg->seq, .created_ns = seg->created_ns};
    snprintf(h.model, sizeof(h.model), "%s", m->name);
    seg->header_len = seg_header_size(strlen(m->name));
    if ((hdr = malloc(seg->header_len)) == NULL)
        goto out;
    seg_header_encode(&h, hdr);
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    fd = openat(d->seg_dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOATIME, 0644);
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
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = disk_fail(d, "reading a new segment file's inode", errno);
        goto out;
    }
    if ((st = disk_seg_attach(d, seg)) != STORE_OK)
        goto out;
    d->next_segment_id++;
    d->meta_dirty = 1;
    d->dir_dirty++;
    seg->ino = (uint64_t)sb.st_ino;
    seg->size = seg->readable = seg->reserved = seg->header_len;
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
store_status_t disk_seg_pick(disk_t *d, uint32_t model_idx, uint64_t size, dseg_t **out)
{
    dmodel_t *m = &d->models[model_idx];
    dseg_t *last = m->n_segs ? m->segs[m->n_segs - 1] : NULL;
    if (last != NULL && !last->sealed &&
        (last->size == last->header_len || last->size + size <= d->cfg.segment_max_bytes)) {
        *out = last;
        return STORE_OK;
    }
    store_status_t st = disk_seg_create(d, model_idx, out);
    if (st == STORE_ENOSPC && last != NULL && !last->sealed && last->entries != 0 &&
        disk_seg_drained(last)) {
        /* invariant 7: a drained segment at the size cap holds its space until the next one
         * exists; sealed now, its file goes at the next flush and a later item fits */
        store_status_t del = disk_seg_seal(d, last);
        return del != STORE_OK ? del : st;
    }
    if (st != STORE_OK)
        return st;
    return last != NULL && !last->sealed ? disk_seg_seal(d, last) : STORE_OK;
}

store_status_t disk_seg_idle_seal(disk_t *d, uint64_t now)
{
    uint64_t pin_below = d->jnl_pin_below;
    if (pin_below == 0 && now < d->idle_next_ns)
        return STORE_OK;
    uint64_t idle_ns =
        (d->cfg.idle_seal_ms ? d->cfg.idle_seal_ms : STORE_IDLE_SEAL_MS_DEFAULT) * 1000000ull;
    if (now >= d->idle_next_ns)
        d->idle_next_ns = now + idle_ns / 4; /* a look costs a pass over the models */
    d->jnl_pin_below = 0;
    for (size_t i = 0; i < d->n_models; i++) {
        dmodel_t *m = &d->models[i];
        dseg_t *seg = m->n_segs ? m->segs[m->n_segs - 1] : NULL;
        if (seg == NULL || seg->sealed || seg->entries == 0)
            continue;
        if ((disk_seg_drained(seg) && now - seg->appended_ns >= idle_ns) ||
            seg->jnl_min < pin_below) {
            store_status_t st = disk_seg_seal(d, seg);
            if (st != STORE_OK)
                return st;
        }
    }
    return STORE_OK;
}

/* Invariants 1 and 3: a sealed segment with nothing live left is doomed at once. */
store_status_t disk_seg_seal(disk_t *d, dseg_t *seg)
{
    seg->sealed = 1;
    disk_seg_mark_dirty(d, seg);
    if (disk_seg_drained(seg))
        return disk_seg_delete(d, seg);
    return STORE_OK;
}
