/*
 * disk_map.c - the shared mappings of segment files: a peek hands out views into them, and a
 * state word (a delivery count, a tombstone) is one 4-byte store into them, so neither costs a
 * system call; and the bound on the mapped bytes the process keeps resident.
 *
 * Owns every segment's mapping (dseg_t.map) and the count of mapped bytes touched.
 *
 * Invariants:
 *   1. Only bytes below a segment's size are ever touched through its mapping: they were
 *      written with pwrite() (the flush, or a header at creation), so each page is in the file
 *      and has its blocks, and no access can fault past the end of the file (SIGBUS) unless
 *      someone else truncates a live segment under the store (as for the LMDB index's map).
 *   2. A state word is stored as one aligned 32-bit store: a crash of the process leaves the old
 *      word or the new one, never a mix, and the page cache holds it at once, so it survives a
 *      crash of the process from the moment the store returns. At the power level the flush's
 *      fdatasync of the segment writes it back with the segment's other dirty pages.
 *   3. A mapping lives as long as its segment (until its deletion or the store's close), not as
 *      long as the segment's descriptor, so a view handed out by a peek stays valid when the
 *      descriptor cache closes descriptors.
 *   4. A fault armed on writes (store_fault_hit) fails a mapped state word as it fails a pwrite:
 *      the word is not stored and the store is failed.
 *
 * Rejected: mapping for appends (writing entries through the mapping into space fallocate
 * extended): a file's size would run ahead of its entries, recovery would have to tell reserved
 * zeros from a torn tail, and every new page costs a write fault where one pwritev per flush
 * writes the turn's entries of a model at once. A user-space cache of recent entries for peeks:
 * the mapping reads the page cache the appends just filled, without a copy, and a cache would
 * still leave the state words to system calls. pread() of each run of a lane's entries (store
 * format 1): a model's log interleaves its lanes, so a batch's entries are rarely adjacent.
 */
#define _GNU_SOURCE
#include "store/disk/disk_int.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Maps seg whole (its size cap, or its size if larger): once, at first use. */
static int disk_map_open(disk_t *d, dseg_t *seg)
{
    if (d->cfg.io == STORE_IO_PLAIN || seg->map_failed || d->mapped >= DISK_MAP_MAX)
        return 0;
    int fd;
    if (disk_fd_get(d, seg, &fd) != STORE_OK)
        return 0;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t len = d->cfg.segment_max_bytes;
    if (len < seg->reserved)
        len = seg->reserved;
    if (len < seg->size)
        len = seg->size;
    len = (len + page - 1) / page * page;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        seg->map_failed = 1;
        disk_log(d, STORE_LOG_INFO,
                 "cannot map segment %016llx (%s): it is read and written with system calls",
                 (unsigned long long)seg->id, strerror(errno));
        return 0;
    }
    seg->map = p;
    seg->map_len = len;
    d->mapped++;
    return 1;
}

const uint8_t *disk_map_view(disk_t *d, dseg_t *seg, uint64_t off, uint64_t len)
{
    if (seg->map == NULL && !disk_map_open(d, seg))
        return NULL;
    if (off + len > seg->map_len || off + len > seg->size) /* invariant 1 */
        return NULL;
    d->touched += len;
    return seg->map + off;
}

int disk_map_word(disk_t *d, dseg_t *seg, uint64_t off, uint32_t word, const char *what)
{
    if (seg->map == NULL && !disk_map_open(d, seg))
        return d->failed ? -1 : 0;
    if (off % 4 != 0 || off + 4 > seg->map_len || off + 4 > seg->size)
        return 0;
    if (store_fault_hit(STORE_FAULT_WRITE)) { /* invariant 4 */
        disk_fail(d, what, EIO);
        return -1;
    }
    uint32_t le;
    store_put32((uint8_t *)&le, word);
    __atomic_store_n((uint32_t *)(void *)(seg->map + off), le, __ATOMIC_RELAXED); /* invariant 2 */
    d->touched += 4;
    return 1;
}

void disk_map_drop(disk_t *d, dseg_t *seg)
{
    if (seg->map == NULL)
        return;
    munmap(seg->map, seg->map_len);
    seg->map = NULL;
    seg->map_len = 0;
    d->mapped--;
}

void disk_map_trim(disk_t *d)
{
    if (d->touched <= d->cfg.resident_bytes)
        return;
    for (size_t i = 0; i < d->segments.cap; i++) {
        dseg_t *seg = d->segments.slots[i].value;
        if (seg != NULL && seg->map != NULL)
            (void)madvise(seg->map, seg->map_len, MADV_DONTNEED); /* shared: nothing is lost */
    }
    d->touched = 0;
}
