/*
 * disk_watch.c - the watch on the segments and journal directories: which segment or journal
 * files were deleted or replaced under the running store, so that no flush acknowledges into a
 * file that is gone.
 *
 * One inotify instance watching <data dir>/segments and <data dir>/journal (deletions, renames
 * away and onto a name, the directories themselves going): each flush reads what happened since
 * the last one, after its writes and before its index commit, in one read() that normally
 * returns nothing. Where inotify is not available (no instance left: fs.inotify.max_user_instances;
 * or STORE_IO_PLAIN), or its queue overflowed, the flush asks fstat() of every segment and
 * journal file it wrote instead (st_nlink 0: unlinked, or renamed over), and fstatat() by name
 * of a journal file it filled and closed.
 *
 * Invariants:
 *   1. A segment whose name was deleted, renamed away or renamed over since the store created or
 *      recovered it is marked gone at the next flush's check, and the flush fails the store
 *      naming the file (disk_flush.c's invariant 4).
 *   2. The store's own unlinks (doomed segments, disk_t.deleted; doomed journal files, dropped
 *      from disk_t.jnls first) are not mistaken for an operator's: an event names a file, and
 *      only names of live segments and kept journal files count.
 *   3. The same holds for a journal file written to since the last check: its records would go
 *      to a file no restart reads, so the flush fails the store.
 *
 * Rejected: fstat() of every written segment at every flush as the only check (a system call
 * per touched segment per turn, on top of its writes); a path lookup (statx) per segment (the
 * same count, and slower).
 */
#include "store/disk/disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

void disk_watch_open(disk_t *d)
{
    if (d->cfg.io == STORE_IO_PLAIN)
        return; /* plain system calls only: fstat at each flush */
    d->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (d->watch_fd < 0) {
        disk_log(d, STORE_LOG_INFO,
                 "no inotify instance (%s): each flush checks its segment files with fstat",
                 strerror(errno));
        return;
    }
    disk_watch_add(d, "segments");
}

void disk_watch_add(disk_t *d, const char *sub)
{
    if (d->watch_fd < 0)
        return;
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", d->dir, sub);
    if (inotify_add_watch(d->watch_fd, path,
                          IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
                              IN_ONLYDIR) < 0) {
        disk_log(d, STORE_LOG_INFO, "cannot watch %s (%s): each flush checks with fstat", path,
                 strerror(errno));
        close(d->watch_fd);
        d->watch_fd = -1;
    }
}

void disk_watch_close(disk_t *d)
{
    if (d->watch_fd >= 0)
        close(d->watch_fd);
    d->watch_fd = -1;
}

/* One event: a live segment's or kept journal file's name changed, or a directory itself went. */
static void disk_watch_event(disk_t *d, const struct inotify_event *ev, int *check_all)
{
    if (ev->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
        *check_all = 1; /* events lost, or the directory is gone: ask every file */
        return;
    }
    uint64_t id;
    if (ev->len == 0)
        return;
    if (jnl_file_parse(ev->name, &id)) {
        djnl_t *j = disk_jnl_find(d, id);
        if (j != NULL)
            j->gone = 1; /* invariant 2 */
        return;
    }
    if (!seg_file_parse(ev->name, &id))
        return;
    dseg_t *seg = map_get(&d->segments, (map_key_t){id, 0});
    if (seg != NULL)
        seg->gone = 1; /* invariant 2: only live segments' names count */
}

/* fstat of one segment's descriptor: unlinked or renamed over shows as no link left. */
static void disk_watch_stat(dseg_t *seg)
{
    struct stat sb;
    if (seg->fd >= 0 && fstat(seg->fd, &sb) == 0 &&
        (sb.st_nlink == 0 || (uint64_t)sb.st_ino != seg->ino))
        seg->gone = 1;
    /* A closed descriptor is checked when it is opened again (disk_fd.c). */
}

store_status_t disk_watch_check(disk_t *d)
{
    int check_all = d->watch_fd < 0;
    if (d->watch_fd >= 0) {
        _Alignas(struct inotify_event) char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)];
        for (;;) {
            ssize_t n = read(d->watch_fd, buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break; /* EAGAIN: nothing more */
            for (ssize_t at = 0; at < n;) {
                const struct inotify_event *ev = (const struct inotify_event *)(buf + at);
                disk_watch_event(d, ev, &check_all);
                at += (ssize_t)(sizeof(*ev) + ev->len);
            }
        }
    }
    for (dseg_t *seg = d->dirty; seg != NULL; seg = seg->dirty_next) {
        if (seg->doomed || !seg->written)
            continue;
        if (check_all)
            disk_watch_stat(seg);
        if (!seg->gone)
            continue;
        char name[SEG_FILE_NAME_SIZE];
        seg_file_name(seg->id, name);
        disk_log(d, STORE_LOG_ERROR,
                 "segment file %s/segments/%s was deleted or replaced while the store was "
                 "running: nothing more is written to it or acknowledged; the items it held are "
                 "lost (the next open reports them)",
                 d->dir, name);
        return disk_fail(d, "checking a segment file", ENOENT);
    }
    for (size_t i = 0; i < d->n_jnls; i++) { /* invariant 3 */
        djnl_t *j = &d->jnls[i];
        if (!j->written)
            continue;
        j->written = 0;
        char name[JNL_FILE_NAME_SIZE];
        jnl_file_name(j->id, name);
        if (check_all) { /* a file rotated away has its descriptor closed: asked by name */
            struct stat sb;
            int rc = j->fd >= 0 ? fstat(j->fd, &sb) : fstatat(d->jnl_dir_fd, name, &sb, 0);
            if ((rc != 0 && errno == ENOENT) ||
                (rc == 0 && (sb.st_nlink == 0 || (uint64_t)sb.st_ino != j->ino)))
                j->gone = 1;
        }
        if (!j->gone)
            continue;
        disk_log(d, STORE_LOG_ERROR,
                 "journal file %s/journal/%s was deleted or replaced while the store was "
                 "running: nothing more is acknowledged; the items it completed since it was "
                 "created will be delivered again after a restart",
                 d->dir, name);
        return disk_fail(d, "checking a journal file", ENOENT);
    }
    return STORE_OK;
}
