/*
 * disk_fd.c - the cache of open segment file descriptors: at most fd_cache_max (the
 * configuration's max_open_files, else half the soft RLIMIT_NOFILE), the least recently used
 * closed first, reopened on demand.
 *
 * Owns every segment's descriptor (dseg_t.fd) and the LRU list through the segments.
 *
 * Invariants:
 *   1. A segment is on the LRU list exactly when its fd is open, and open_fds is the list's
 *      length, never above fd_cache_max.
 *   2. At the power-loss level a descriptor written since its last sync is synced before it is
 *      closed, so no writeback error can be missed by a later descriptor of the same file.
 *
 * Rejected: one descriptor per segment for the store's life. A model whose items wait long
 * keeps many segments, and the daemon also needs descriptors for NATS. A fixed cache of 256:
 * an owner turn touching more segments than that would close and reopen descriptors on every
 * pass, so the size follows the limit the process runs with.
 */
#define _GNU_SOURCE /* O_NOATIME */
#include "store/disk/disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

void disk_fd_limit_init(disk_t *d)
{
    uint64_t n = d->cfg.max_open_files;
    struct rlimit rl;
    if (n == 0)
        n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur / 2
                                                                               : DISK_FD_MAX;
    d->fd_cache_max = (unsigned)(n < DISK_FD_MIN ? DISK_FD_MIN : n > DISK_FD_MAX ? DISK_FD_MAX : n);
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
    while (d->open_fds >= d->fd_cache_max && d->lru_tail != NULL) {
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
    /* O_NOATIME: a read costs no inode update; it needs the file's owner (else EPERM). */
    int fd = openat(d->seg_dir_fd, name, O_RDWR | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM)
        fd = openat(d->seg_dir_fd, name, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        char what[96];
        snprintf(what, sizeof(what), "opening segment file %s", name);
        return disk_fail(d, what, errno);
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_ino != seg->ino) {
        close(fd);
        disk_log(d, STORE_LOG_ERROR,
                 "segment file %s/segments/%s is not the file the store wrote (replaced while "
                 "the store was running)",
                 d->dir, name);
        return disk_fail(d, "reopening a segment file", ENOENT);
    }
    disk_fd_attach(d, seg, fd);
    *out_fd = fd;
    return STORE_OK;
}
