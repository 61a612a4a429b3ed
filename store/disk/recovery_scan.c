/*
 * recovery_scan.c - recovery's scan of one segment file: every entry header and CRC from the
 * file's header to its end, what is queued again and in which lane (the entry's own signature
 * and lane, under its CRC), what is cut and what is reported (the decisions about damage are
 * listed in recovery.c).
 *
 * Invariants (numbered on from recovery.c's):
 *   7. No count read from the index sizes an allocation: a flipped bit in a row never makes
 *      recovery ask for memory that cannot exist, whatever its checksum says.
 *   8. The durable boundary is used only from a row that can be trusted (recovery.c); when
 *      such a row counts more entries below its boundary than the scan finds there and valid
 *      entries follow it, those entries are kept up to the count and reported: the boundary,
 *      not the data, is what is wrong.
 *   9. Without a usable row (unknown file, or a row that fails its checksum or disagrees with
 *      the header) every entry whose CRC verifies is kept: such entries may never have been
 *      acknowledged (a redelivery at worst), but a row that cannot be checked must not make
 *      recovery drop what may have been.
 *  10. A usable row that counts more entries than the scan read is said in items, not only in
 *      bytes: the entries the damage or the cut took, the most items that can be lost with them
 *      (the journal cannot tell which of them were completed once their entries are gone).
 *
 * Rejected: trusting the row's counts over the scan (a damaged count would drop or invent
 * items); cutting at the row's boundary whatever its checksum (what dropped nine accepted items
 * when a boundary was lowered); pushing each entry onto its lane's queue as it is found
 * whatever the number of lanes: with thousands of lanes each push misses the cache twice (the
 * queue, the end of its array) and that was most of recovery's time (docs/store.md); it is
 * kept for the few-lanes case, where it is cheapest (rec_lanes_t).
 */
#define _GNU_SOURCE /* MAP_POPULATE */
#include "store/disk/recovery_scan_int.h"

#include "common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Finds the next valid entry at an aligned offset in [from, end); returns end if none. */
static uint64_t rec_resync(uint32_t seed, const uint8_t *map, uint64_t from, uint64_t end)
{
    seg_entry_t e;
    for (uint64_t off = from; off + SEG_ENTRY_HEADER <= end; off += SEG_ALIGN) {
        if (seg_entry_check(seed, map + off, end - off, &e))
            return off;
    }
    return end;
}

void rec_lanes_fini(rec_lanes_t *l)
{
    free(l->slots);
    free(l->lanes);
    free(l->touched);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static uint64_t rec_lane_hash(uint32_t model_idx, uint64_t signature, uint32_t lane)
{
    uint64_t h = signature ^ ((uint64_t)model_idx << 32 | lane) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ h >> 33;
}

/* Doubles the slot table (at half full), rehashing what it holds. Probed as it fills: its pages
 * are written first (mem_calloc), or every first insert into a page would flush the other
 * recovery thread's TLB. */
static store_status_t rec_lanes_grow(rec_lanes_t *l)
{
    size_t cap = l->cap ? l->cap * 2 : 1024;
    rec_lane_slot_t *slots = mem_calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return STORE_ENOMEM;
    for (size_t i = 0; i < l->cap; i++) {
        const rec_lane_slot_t *o = &l->slots[i];
        if (o->idx == 0)
            continue;
        size_t at = rec_lane_hash(o->model_idx, o->signature, o->lane) & (cap - 1);
        while (slots[at].idx != 0)
            at = (at + 1) & (cap - 1);
        slots[at] = *o;
    }
    free(l->slots);
    l->slots = slots;
    l->cap = cap;
    return STORE_OK;
}

/* The slot of a lane (hash h): the one holding it, or the empty one where it would go. */
static size_t rec_lane_slot(const rec_lanes_t *l, uint64_t h, uint32_t model_idx,
                            uint64_t signature, uint32_t lane)
{
    size_t at = h & (l->cap - 1);
    for (;; at = (at + 1) & (l->cap - 1)) {
        const rec_lane_slot_t *s = &l->slots[at];
        if (s->idx == 0 ||
            (s->signature == signature && s->lane == lane && s->model_idx == model_idx))
            return at;
    }
}

/* The front cache's slot of a lane: a mix cheaper than rec_lane_hash. */
static rec_lane_slot_t *rec_lane_front(rec_lanes_t *l, uint32_t model_idx, uint64_t signature,
                                       uint32_t lane)
{
    return &l->front[(signature ^ signature >> 29 ^ lane ^ (uint64_t)model_idx << 3) &
                     (REC_FRONT - 1)];
}

/* The number of an entry's lane: found, or a new one for the queue (created empty if new). */
static store_status_t rec_lane_find(disk_t *d, rec_lanes_t *l, uint32_t model_idx,
                                    uint64_t signature, uint32_t lane, uint32_t *out)
{
    rec_lane_slot_t *front = rec_lane_front(l, model_idx, signature, lane);
    if (front->idx != 0 && front->signature == signature && front->lane == lane &&
        front->model_idx == model_idx) {
        *out = front->idx - 1;
        return STORE_OK;
    }
    if (l->cap == 0 && rec_lanes_grow(l) != STORE_OK)
        return STORE_ENOMEM;
    uint64_t h = rec_lane_hash(model_idx, signature, lane);
    size_t at = rec_lane_slot(l, h, model_idx, signature, lane);
    if (l->slots[at].idx != 0) {
        *out = l->slots[at].idx - 1;
        *front = l->slots[at];
        return STORE_OK;
    }
    if (l->n_lanes == l->cap_lanes) {
        size_t cap = l->cap_lanes ? l->cap_lanes * 2 : 256;
        rec_lane_t *lanes = realloc(l->lanes, cap * sizeof(*lanes));
        uint32_t *touched = lanes == NULL ? NULL : realloc(l->touched, cap * sizeof(*touched));
        if (lanes != NULL)
            l->lanes = lanes;
        if (touched == NULL)
            return STORE_ENOMEM;
        l->touched = touched;
        l->cap_lanes = cap;
    }
    dqueue_t *q;
    if (l->mu != NULL)
        pthread_mutex_lock(l->mu);
    store_status_t st = disk_queue_get_idx(d, model_idx, signature, lane, &q);
    if (l->mu != NULL)
        pthread_mutex_unlock(l->mu);
    if (st != STORE_OK)
        return st;
    if ((l->n_lanes + 1) * 2 > l->cap) {
        if (rec_lanes_grow(l) != STORE_OK)
            return STORE_ENOMEM;
        at = h & (l->cap - 1);
        while (l->slots[at].idx != 0)
            at = (at + 1) & (l->cap - 1);
    }
    uint32_t idx = (uint32_t)l->n_lanes++;
    l->lanes[idx] = (rec_lane_t){.q = q};
    l->slots[at] = (rec_lane_slot_t){signature, lane, model_idx, idx + 1};
    *front = l->slots[at];
    *out = idx;
    return STORE_OK;
}

/* Queues the noted entries: each touched lane's array grown once, then the records written in
 * file order (a lane's arrival order). */
static store_status_t rec_queue_noted(rec_lanes_t *l)
{
    store_status_t st = STORE_OK;
    for (size_t i = 0; i < l->n_touched && st == STORE_OK; i++) {
        rec_lane_t *lane = &l->lanes[l->touched[i]];
        dqueue_t *q = lane->q;
        if ((st = disk_queue_reserve(q, lane->n)) == STORE_OK)
            lane->dest = q->recs + q->head + q->len;
    }
    if (st == STORE_OK) {
        for (size_t i = 0; i < l->n_items; i++) {
            if (i + 8 < l->n_items)
                __builtin_prefetch(&l->lanes[l->items[i + 8].lane], 1);
            *l->lanes[l->items[i].lane].dest++ = l->items[i].rec;
        }
    }
    for (size_t i = 0; i < l->n_touched; i++) {
        rec_lane_t *lane = &l->lanes[l->touched[i]];
        if (st == STORE_OK) {
            lane->q->len += lane->n;
            lane->q->base.queued_items += lane->n;
            lane->q->base.queued_tokens += lane->tokens;
        }
        lane->n = 0;
        lane->tokens = 0;
    }
    l->n_touched = 0;
    l->n_items = 0;
    return st;
}

/* Resolves the pending entries' lanes and notes them: every slot was prefetched when its entry
 * was taken, and every lane is prefetched before it is updated. */
static store_status_t rec_resolve(disk_t *d, rec_lanes_t *l)
{
    uint32_t idx[REC_PENDING];
    store_status_t st = STORE_OK;
    for (size_t i = 0; i < l->n_pending; i++) {
        const rec_pending_t *p = &l->pending[i];
        if ((st = rec_lane_find(d, l, p->model_idx, p->signature, p->lane, &idx[i])) != STORE_OK)
            return st;
        __builtin_prefetch(&l->lanes[idx[i]], 1);
    }
    if (l->items == NULL && (l->items = malloc(REC_NOTED_MAX * sizeof(*l->items))) == NULL)
        return STORE_ENOMEM;
    for (size_t i = 0; i < l->n_pending; i++) {
        if (l->n_items == REC_NOTED_MAX && (st = rec_queue_noted(l)) != STORE_OK)
            return st;
        rec_lane_t *lane = &l->lanes[idx[i]];
        if (lane->n == 0 && lane->q->len == 0) /* its queue's front (disk_item.c invariant 9) */
            lane->q->head_arrival_ns = l->pending[i].arrival_ns;
        if (lane->n++ == 0)
            l->touched[l->n_touched++] = idx[i];
        lane->tokens += l->pending[i].rec.tokens;
        if (l->pending[i].rec.tokens > lane->max_tokens)
            lane->max_tokens = l->pending[i].rec.tokens;
        l->items[l->n_items++] = (rec_item_t){idx[i], l->pending[i].rec};
    }
    l->n_pending = 0;
    return STORE_OK;
}

/* The journal's rank for the entry of `len` bytes at `off`: the highest of the records naming
 * it (0: none). The file's records are sorted by offset and the scan calls this in ascending
 * offsets, so *cur only moves forward; records it passes name no entry found. */
static int rec_jnl_rank(const rec_file_t *f, size_t *cur, uint64_t off, uint32_t len,
                        store_recovery_t *rep)
{
    int rank = 0;
    for (; *cur < f->n_jrecs && f->jrecs[*cur].offset <= off; (*cur)++) {
        const rec_jrec_t *r = &f->jrecs[*cur];
        if (r->offset == off && r->length == len) {
            rep->journal_records++;
            rank = (int)r->rank > rank ? (int)r->rank : rank;
        } else {
            rep->journal_unmatched_records++;
        }
    }
    return rank;
}

/* One valid entry at `off`: counted, and noted for its lane unless tombstoned. Its state is the
 * highest rank of its own state word and the journal's records of it (journal_int.h). */
static store_status_t rec_take(disk_t *d, rec_lanes_t *l, dseg_t *seg, const char *name,
                               uint64_t off, const seg_entry_t *e, const rec_file_t *f,
                               size_t *jcur, uint64_t *tombs, store_recovery_t *rep)
{
    seg->entries++;
    seg->tokens += e->tokens;
    int rank = seg_state_rank(e->state);
    if (rank < 0) {
        rep->damaged_state_words++;
        disk_corrupt(d, STORE_CORRUPT_BKPT,
                     "segment %s offset %" PRIu64
                     ": state word damaged, entry intact: read as live (the journal's records of "
                     "it still apply)",
                     name, off);
        rank = 0;
    }
    int jrank = f->n_jrecs != 0 ? rec_jnl_rank(f, jcur, off, e->length, rep) : 0;
    if (jrank > rank)
        rank = jrank;
    if (rank == SEG_RANK_TOMB) {
        (*tombs)++;
        return STORE_OK;
    }
    int deliveries = rank;
    drec_t rec = {(uint32_t)off, e->length, e->tokens,
                  drec_slot_dlv(seg->slot, (uint32_t)deliveries)};
    rep->entries_live++;
    rep->tokens_live += e->tokens;
    if (l->n_lanes <= REC_DIRECT_LANES && l->n_pending == 0 && l->n_items == 0) {
        /* Few lanes so far: their queues' ends stay in the cache, a push is cheapest. */
        uint32_t idx;
        store_status_t st = rec_lane_find(d, l, seg->model_idx, e->signature, e->lane, &idx);
        if (st != STORE_OK)
            return st;
        rec_lane_t *lane = &l->lanes[idx];
        if (rec.tokens > lane->max_tokens)
            lane->max_tokens = rec.tokens;
        if (l->n_lanes <= REC_DIRECT_LANES)
            return disk_queue_push(lane->q, &rec, e->arrival_ns);
        /* The lane that made them many: noted, as every entry from here on. */
        l->pending[l->n_pending++] =
            (rec_pending_t){e->signature, e->lane, seg->model_idx, rec, e->arrival_ns};
        return rec_resolve(d, l);
    }
    if (l->cap != 0)
        __builtin_prefetch(
            &l->slots[rec_lane_hash(seg->model_idx, e->signature, e->lane) & (l->cap - 1)]);
    l->pending[l->n_pending++] =
        (rec_pending_t){e->signature, e->lane, seg->model_idx, rec, e->arrival_ns};
    return l->n_pending == REC_PENDING ? rec_resolve(d, l) : STORE_OK;
}

/*
 * While the lanes are few (entries pushed at once): each lane's array is grown once for the
 * entries the file holds for it, counted from the entry headers in [from, end) before the scan.
 * A hint only: no CRC is checked but for an entry of a lane not met yet (so a damaged entry
 * never makes a lane), the count stops at the first entry whose length cannot be, and the
 * reservation is bounded by what the file can hold (invariant 7).
 */
static store_status_t rec_presize(disk_t *d, rec_lanes_t *l, const dseg_t *seg, const uint8_t *map,
                                  uint64_t from, uint64_t end)
{
    if (l->n_lanes > REC_DIRECT_LANES)
        return STORE_OK;
    uint32_t seed = seg_crc_seed(seg->id);
    store_status_t st = STORE_OK;
    for (uint64_t off = from; off + SEG_ENTRY_HEADER <= end && st == STORE_OK;) {
        const uint8_t *e = map + off;
        uint32_t len = seg_entry_length(e);
        if (len < SEG_ENTRY_HEADER || len % SEG_ALIGN != 0 || len > end - off)
            break;
        off += len;
        if (store_get32(e) == SEG_STATE_TOMB)
            continue;
        uint64_t sig = seg_entry_signature(e);
        uint32_t lane = seg_entry_lane(e), idx;
        const rec_lane_slot_t *front = rec_lane_front(l, seg->model_idx, sig, lane);
        size_t at = 0;
        if (front->idx != 0 && front->signature == sig && front->lane == lane &&
            front->model_idx == seg->model_idx) {
            idx = front->idx - 1;
        } else if (l->cap != 0 &&
                   l->slots[at = rec_lane_slot(l, rec_lane_hash(seg->model_idx, sig, lane),
                                               seg->model_idx, sig, lane)]
                           .idx != 0) {
            idx = l->slots[at].idx - 1;
        } else {
            /* A lane not met yet: made only from an entry whose CRC verifies. */
            seg_entry_t ent;
            if (!seg_entry_check(seed, e, len, &ent))
                break;
            if ((st = rec_lane_find(d, l, seg->model_idx, sig, lane, &idx)) != STORE_OK ||
                l->n_lanes > REC_DIRECT_LANES)
                break;
        }
        l->lanes[idx].n++;
    }
    for (size_t i = 0; i < l->n_lanes; i++) {
        if (l->lanes[i].n != 0 && st == STORE_OK)
            st = disk_queue_reserve(l->lanes[i].q, l->lanes[i].n);
        l->lanes[i].n = 0;
    }
    return st;
}

store_status_t rec_attach(disk_t *d, rec_file_t *f)
{
    /* Room for its deletion (disk_seg_delete) reserved with it. */
    dseg_t *seg = calloc(1, sizeof(*seg));
    if (seg == NULL || map_reserve(&d->deleted, 1) != MAP_OK) {
        free(seg);
        return STORE_ENOMEM;
    }
    seg->fd = -1;
    seg->w_head = seg->w_tail = DISK_WRITE_NONE;
    seg->ino = f->ino;
    seg->id = f->id;
    seg->seq = f->header.sequence;
    seg->model_idx = f->model_idx;
    seg->created_ns = f->header.created_ns;
    seg->header_len = f->header.header_len;
    seg->sealed = 1;
    seg->slot = UINT32_MAX;
    seg->jnl_min = f->jnl_min;
    store_status_t st = disk_seg_attach(d, seg);
    if (st != STORE_OK) {
        free(seg);
        return st;
    }
    f->seg = seg;
    return STORE_OK;
}

store_status_t rec_scan(disk_t *d, rec_lanes_t *lanes, rec_file_t *f, store_recovery_t *rep)
{
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(f->id, name);
    store_status_t st = STORE_OK;
    uint8_t *map = MAP_FAILED;
    dseg_t *attached = f->seg;
    int regular;
    struct stat sb;
    int fd = rec_regular_open(d->seg_dir_fd, name, O_RDWR, &regular, &sb);
    if (fd < 0) {
        disk_log(d, STORE_LOG_ERROR, "segment file %s/segments/%s: cannot open it for writing: %s",
                 d->dir, name, regular ? strerror(errno) : "no longer a regular file");
        return STORE_EIO;
    }
    uint64_t size = f->file_size;
    if (size > 0)
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (size > 0 && map == MAP_FAILED) {
        disk_log(d, STORE_LOG_ERROR, "segment file %s/segments/%s: cannot map it: %s", d->dir, name,
                 strerror(errno));
        st = STORE_EIO;
        goto out;
    }

    /* The durable boundary: what the index recorded; unknown for an adopted file. */
    int bounded = f->row != NULL;
    uint64_t durable = bounded ? f->row->readable : size;
    uint64_t missing = 0; /* bytes the index says are durable but the file no longer has */
    if (bounded && durable > size) {
        disk_corrupt(d, STORE_CORRUPT_BKPT,
                     "segment %s is %" PRIu64 " bytes, shorter than its durable boundary %" PRIu64,
                     name, size, durable);
        missing = durable - size;
        durable = size;
    }
    if (durable < attached->header_len)
        durable = attached->header_len;
    uint64_t keep = durable; /* the file is cut back to here */
    uint64_t tombs = 0;
    size_t jcur = 0;
    uint64_t unmatched = rep->journal_unmatched_records;
    seg_entry_t e;
    uint32_t seed = seg_crc_seed(f->id);
    if ((st = rec_presize(d, lanes, attached, map, attached->header_len, durable)) != STORE_OK)
        goto out;
    for (uint64_t off = attached->header_len; off < durable;) {
        if (seg_entry_check(seed, map + off, durable - off, &e)) {
            if ((st = rec_take(d, lanes, attached, name, off, &e, f, &jcur, &tombs, rep)) !=
                STORE_OK)
                goto out;
            off += e.length;
            continue;
        }
        uint64_t next = rec_resync(seed, map, off + SEG_ALIGN, durable);
        if (next == durable && !bounded) {
            rep->torn_tails++;
            rep->torn_bytes += size - off;
            disk_log(d, STORE_LOG_WARN,
                     "segment %s: torn tail of %" PRIu64 " bytes at offset %" PRIu64 " cut", name,
                     size - off, off);
            keep = off;
            break;
        }
        /* A damaged stretch running into missing bytes is one region with them. */
        if (next == durable && missing != 0) {
            rep->corrupt_bytes += missing;
            missing = 0;
        }
        rep->corrupt_regions++;
        rep->corrupt_bytes += next - off;
        disk_corrupt(d, STORE_CORRUPT_BKPT,
                     "segment %s: %" PRIu64 " damaged bytes at offset %" PRIu64 " skipped", name,
                     next - off, off);
        off = next;
    }
    if (missing != 0) {
        rep->corrupt_regions++;
        rep->corrupt_bytes += missing;
    }
    /* Invariant 8: the row counts more entries below its boundary than the scan found there,
     * and valid entries follow it: the boundary is wrong, the count and the CRCs win. */
    if (bounded && attached->entries < f->row->entries && keep == durable && durable < size) {
        uint64_t kept = 0, off = durable;
        while (attached->entries < f->row->entries &&
               seg_entry_check(seed, map + off, size - off, &e)) {
            if ((st = rec_take(d, lanes, attached, name, off, &e, f, &jcur, &tombs, rep)) !=
                STORE_OK)
                goto out;
            off += e.length;
            kept++;
        }
        if (kept != 0) {
            rep->boundary_entries_kept += kept;
            disk_log(d, STORE_LOG_WARN,
                     "segment %s: the index counts %" PRIu64 " entries below its boundary %" PRIu64
                     " but %" PRIu64 " are there; %" PRIu64 " valid entries past the boundary "
                     "kept (a boundary that disagrees with its count loses to the scan)",
                     name, f->row->entries, durable, attached->entries - kept, kept);
            durable = keep = off;
        }
    }
    if (bounded && size > durable) {
        rep->torn_tails++;
        rep->torn_bytes += size - durable;
        disk_log(d, STORE_LOG_WARN,
                 "segment %s: %" PRIu64 " bytes past the durable boundary %" PRIu64
                 " cut (never acknowledged: the boundary's index row verifies)",
                 name, size - durable, durable);
    }
    if (keep < size) {
        if (ftruncate(fd, (off_t)keep) != 0 || store_fault_fsync(fd, 1) != 0) {
            st = STORE_EIO;
            goto out;
        }
    }
    if (bounded && f->row->entries > attached->entries) /* invariant 10 */
        disk_log(d, STORE_LOG_ERROR,
                 "segment %s: %" PRIu64 " of the %" PRIu64 " entries the index counts in it "
                 "could not be read (damaged or cut): those of them still queued are lost, up "
                 "to %" PRIu64 " items (completed ones are not)",
                 name, f->row->entries - attached->entries, f->row->entries,
                 f->row->entries - attached->entries);
    if (jcur < f->n_jrecs)
        rep->journal_unmatched_records += f->n_jrecs - jcur;
    if (rep->journal_unmatched_records != unmatched)
        disk_log(d, STORE_LOG_WARN,
                 "segment %s: %" PRIu64 " journal records name no entry found in it (their "
                 "entries were damaged or cut): not applied",
                 name, rep->journal_unmatched_records - unmatched);
    if ((st = rec_resolve(d, lanes)) != STORE_OK || (st = rec_queue_noted(lanes)) != STORE_OK)
        goto out;
    attached->size = attached->readable = attached->reserved = keep;
    attached->flushed_entries = attached->entries;
    attached->flushed_tokens = attached->tokens;
    attached->deleted = tombs;
    rep->entries_tombstoned += tombs;
    if (bounded && f->row->deleted > tombs) { /* the index saw tombstones the journal lost */
        rep->deleted_count_repairs++;
        rep->tombstones_missing += f->row->deleted - tombs;
        disk_log(d, STORE_LOG_WARN,
                 "segment %s: the index counts %" PRIu64
                 " completed entries, the scan finds %" PRIu64 " tombstoned: up to %" PRIu64
                 " completed items come back and are delivered "
                 "again (tombstones lost with journal records, or with damaged entries; or an OS "
                 "crash at the process level wrote the index before the journal)",
                 name, f->row->deleted, tombs, f->row->deleted - tombs);
    } else if (bounded && f->row->deleted != tombs) { /* a crash before the index commit */
        rep->deleted_count_repairs++;
        disk_log(d, STORE_LOG_INFO,
                 "segment %s: deleted count %" PRIu64 " repaired to %" PRIu64 " from tombstones",
                 name, f->row->deleted, tombs);
    }
    if (!bounded && !f->row_rejected) {
        rep->adopted_files++;
        disk_log(d, STORE_LOG_INFO, "segment %s was not in the index: adopted", name);
    }
    rep->segments++;
out:
    if (map != MAP_FAILED)
        munmap(map, size);
    close(fd);
    return st;
}
