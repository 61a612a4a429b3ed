/*
 * disk_map.c - the shared mappings of segment files: a peek hands out views into them, without a
 * system call or a copy; and the bound on the mapped bytes the process keeps resident.
 *
 * Owns every segment's mapping (dseg_t.map) and the ring of chunks populated (disk_t.resident).
 *
 * Invariants:
 *   1. Only bytes below a segment's size are ever touched through its mapping: they were
 *      written with pwrite() (the flush, or a header at creation), so each page is in the file
 *      and has its blocks, and no access can fault past the end of the file (SIGBUS) unless
 *      someone else truncates a live segment under the store (as for the LMDB index's map).
 *   2. Mappings are read-only: nothing is ever stored into a segment through one (states go to
 *      the journal, disk_journal.c), so a mapping never dirties a page of the log, and a page
 *      the flush's sync made clean stays clean.
 *   3. A mapping lives as long as its segment (until its deletion or the store's close), not as
 *      long as the segment's descriptor, so a view handed out by a peek stays valid when the
 *      descriptor cache closes descriptors.
 *   4. Bytes are populated before they are first read, a chunk at a time (MADV_POPULATE_READ:
 *      one system call per 64 pages instead of a fault per 16), each chunk once while it stays
 *      resident (the segment's bitmap dseg_t.populated).
 *   5. At most resident_bytes of chunks stay populated after a flush: the chunks populated
 *      longest ago are dropped first (disk_t.resident, in the order they were populated). A
 *      queue is served from its front, so the oldest chunks are the ones whose entries were
 *      dispatched and completed; dropping everything at once made every trim populate again the
 *      entries still queued.
 *
 * Rejected: mapping for appends (writing entries through the mapping into space fallocate
 * extended): a file's size would run ahead of its entries, recovery would have to tell reserved
 * zeros from a torn tail, and every new page costs a write fault where one pwritev per flush
 * writes the turn's entries of a model at once. Populating writable (MADV_POPULATE_WRITE, when
 * state words were stored in place): it marks every page of the chunk dirty, so at the power
 * level each flush's fdatasync wrote back whole chunks the turn had only read (measured at over
 * 100 KiB written per item, docs/store.md). A user-space cache of recent entries for peeks: the
 * mapping reads the page cache the appends just filled, without a copy. pread() of each run of
 * a lane's entries (store format 1): a model's log interleaves its lanes, so a batch's entries
 * are rarely adjacent.
 */
#define _GNU_SOURCE
#include "store/disk/disk_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Bytes populated at once (invariant 4): one system call per 64 pages touched, spread over the
 * few hundred entries they hold, and at most 256 KiB populated that nothing reads. */
#define DISK_MAP_CHUNK (256u << 10)

/* Maps seg whole (its size cap, or its size if larger): once, at first use. */
static int disk_map_open(disk_t *d, dseg_t *seg)
{
    if (d->cfg.io == STORE_IO_PLAIN || seg->map_failed || d->mapped >= DISK_MAP_MAX)
        return 0;
    int fd;
    if (disk_fd_get(d, seg, &fd) != STORE_OK)
        return 0;
    uint64_t len = d->cfg.segment_max_bytes;
    if (len < seg->reserved)
        len = seg->reserved;
    if (len < seg->size)
        len = seg->size;
    len = (len + DISK_MAP_CHUNK - 1) / DISK_MAP_CHUNK * DISK_MAP_CHUNK;
    size_t words = (size_t)((len / DISK_MAP_CHUNK + 63) / 64);
    uint64_t *populated = calloc(words, sizeof(*populated));
    void *p = populated == NULL ? MAP_FAILED : mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        free(populated);
        seg->map_failed = 1;
        disk_log(d, STORE_LOG_INFO,
                 "cannot map segment %016llx (%s): it is read and written with system calls",
                 (unsigned long long)seg->id, strerror(errno));
        return 0;
    }
    seg->map = p;
    seg->map_len = len;
    seg->populated = populated;
    d->mapped++;
    return 1;
}

/* Remembers that chunk c of seg is resident, in the order chunks became so (invariant 5). */
static store_status_t disk_map_ring_push(disk_t *d, const dseg_t *seg, uint64_t c)
{
    if (d->n_resident == d->cap_resident) {
        size_t cap = d->cap_resident ? d->cap_resident * 2 : 64;
        dresident_t *ring = malloc(cap * sizeof(*ring));
        if (ring == NULL)
            return STORE_ENOMEM;
        for (size_t i = 0; i < d->n_resident; i++)
            ring[i] = d->resident[(d->resident_head + i) % d->cap_resident];
        free(d->resident);
        d->resident = ring;
        d->cap_resident = cap;
        d->resident_head = 0;
    }
    d->resident[(d->resident_head + d->n_resident++) % d->cap_resident] =
        (dresident_t){seg->id, seg->slot, (uint32_t)c};
    return STORE_OK;
}

/* Invariant 4: the chunks holding [off, off + len) of seg (below its size) are populated. Best
 * effort: where the kernel cannot (before Linux 5.14), pages fault in as they are touched. */
static void disk_map_populate(disk_t *d, dseg_t *seg, uint64_t off, uint64_t len)
{
    if (d->populate_unsupported)
        return;
    uint64_t page = d->page_bytes;
    /* Only what the file holds: the readable boundary was written (the size also counts appends
     * not flushed yet), and the page holding it is the file's. */
    uint64_t end = (seg->readable + page - 1) / page * page;
    uint64_t tail = seg->pop_tail / DISK_MAP_CHUNK;
    if (seg->pop_tail != 0 && (tail + 1) * DISK_MAP_CHUNK <= end) {
        /* The file has grown past the chunk it ended in: that chunk is completed now and
         * marked, so it is remembered once, not again when it is next touched. */
        if (madvise(seg->map + seg->pop_tail, (tail + 1) * DISK_MAP_CHUNK - seg->pop_tail,
                    MADV_POPULATE_READ) == 0)
            seg->populated[tail / 64] |= 1ull << (tail % 64);
        seg->pop_tail = 0;
    }
    for (uint64_t c = off / DISK_MAP_CHUNK; c * DISK_MAP_CHUNK < off + len; c++) {
        uint64_t bit = 1ull << (c % 64);
        if (seg->populated[c / 64] & bit)
            continue;
        uint64_t lo = c * DISK_MAP_CHUNK,
                 hi = lo + DISK_MAP_CHUNK < end ? lo + DISK_MAP_CHUNK : end;
        if (seg->pop_tail > lo && seg->pop_tail < lo + DISK_MAP_CHUNK) {
            /* The chunk the file ends in, populated up to pop_tail: only what the file has
             * grown by since. */
            if (off + len <= seg->pop_tail)
                continue;
            lo = seg->pop_tail;
        }
        int fresh = lo == c * DISK_MAP_CHUNK; /* not a tail populated before: a new resident */
        if (fresh && disk_map_ring_push(d, seg, c) != STORE_OK)
            return; /* no room to remember it: left to fault in */
        if (lo < hi && madvise(seg->map + lo, hi - lo, MADV_POPULATE_READ) != 0) {
            if (errno == EINVAL || errno == ENOSYS) {
                d->populate_unsupported = 1;
                disk_log(d, STORE_LOG_INFO,
                         "the kernel cannot populate mappings (MADV_POPULATE_READ: %s): "
                         "pages fault in as they are touched",
                         strerror(errno));
            }
            return;
        }
        if (hi - c * DISK_MAP_CHUNK == DISK_MAP_CHUNK)
            seg->populated[c / 64] |= bit;
        else
            seg->pop_tail = hi;
    }
}

const uint8_t *disk_map_view(disk_t *d, dseg_t *seg, uint64_t off, uint64_t len)
{
    if (seg->map == NULL && !disk_map_open(d, seg))
        return NULL;
    if (off + len > seg->map_len || off + len > seg->size) /* invariant 1 */
        return NULL;
    disk_map_populate(d, seg, off, len);
    return seg->map + off;
}

void disk_map_drop(disk_t *d, dseg_t *seg)
{
    if (seg->map == NULL)
        return;
    munmap(seg->map, seg->map_len);
    free(seg->populated);
    seg->map = NULL;
    seg->populated = NULL;
    seg->map_len = 0;
    seg->pop_tail = 0;
    d->mapped--;
}

void disk_map_trim(disk_t *d)
{
    size_t keep = (size_t)(d->cfg.resident_bytes / DISK_MAP_CHUNK);
    while (d->n_resident > keep) { /* invariant 5: the chunks resident longest go first */
        dresident_t r = d->resident[d->resident_head];
        d->resident_head = (d->resident_head + 1) % d->cap_resident;
        d->n_resident--;
        dseg_t *seg = r.slot < d->n_slots ? d->slots[r.slot] : NULL;
        if (seg == NULL || seg->id != r.seg_id || seg->map == NULL)
            continue; /* deleted or unmapped since */
        uint64_t lo = (uint64_t)r.chunk * DISK_MAP_CHUNK;
        (void)madvise(seg->map + lo, DISK_MAP_CHUNK, MADV_DONTNEED); /* shared: nothing lost */
        seg->populated[r.chunk / 64] &= ~(1ull << (r.chunk % 64));
        if (seg->pop_tail > lo && seg->pop_tail <= lo + DISK_MAP_CHUNK)
            seg->pop_tail = 0;
    }
}
