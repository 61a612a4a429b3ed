/*
 * disk_fd.c - the cache of open segment file descriptors: at most DISK_FD_CACHE, the least
 * recently used closed first, reopened on demand.
 *
 * Owns every segment's descriptor (dseg_t.fd) and the LRU list through the segments.
 *
 * Invariants:
 *   1. A segment is on the LRU list exactly when its fd is open, and open_fds is the list's
 *      length, never above DISK_FD_CACHE.
 *   2. At the power-loss level a descriptor written since its last sync is synced before it is
 *      closed, so no writeback error can be missed by a later descriptor of the same file.
 *
 * Rejected: one descriptor per segment for the store's life. Thousands of lanes, each with a
 * segment, would run into RLIMIT_NOFILE; the daemon also needs descriptors for NATS.
 */
#include "store/disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

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

void disk_fd_close(disk_t *d, dseg_t *seg)
{
    if (seg->fd < 0)
        return;
    disk_lru_unlink(d, seg);
    close(seg->fd);
    seg->fd = -1;
    d->open_fds--;
}

store_status_t disk_fd_make_room(disk_t *d)
{
    while (d->open_fds >= DISK_FD_CACHE && d->lru_tail != NULL) {
        dseg_t *victim = d->lru_tail;
        if (victim->needs_sync && d->cfg.durability == STORE_DURABLE_POWER) {
            if (store_fault_fsync(victim->fd, 1) != 0)
                return disk_fail(d, "fdatasync of a segment", errno);
            victim->needs_sync = 0;
        }
        disk_fd_close(d, victim);
    }
    return STORE_OK;
}

void disk_fd_attach(disk_t *d, dseg_t *seg, int fd)
{
    seg->fd = fd;
    d->open_fds++;
    disk_lru_push_front(d, seg);
}

store_status_t disk_fd_get(disk_t *d, dseg_t *seg, int *out_fd)
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
