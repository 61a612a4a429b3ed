/*
 * throughput_files.c - how many files and directories a system creates in its data directory
 * while `throughput` runs: inotify IN_CREATE on the directory and on every directory created
 * under it, counted by a thread of its own. A phase reads the count at its start and end
 * (throughput_run.c), so files created per second in steady state is that difference over the
 * phase's time.
 *
 * Invariants:
 *  1. Every entry created under the tree while it is watched is counted once, files that are
 *     deleted again included (a store that creates and deletes a segment per lane pays for both).
 *     A directory created under the tree is watched, then scanned: entries made in it before
 *     its watch existed are counted from the scan, and those made after from their events, so
 *     a race can count an entry twice, never miss one.
 *  2. A lost event (IN_Q_OVERFLOW) makes the count a lower bound: tp_files_created says so and
 *     the report prints n/a rather than a figure too low.
 *
 * Rejected alternatives:
 *  - Counting entries before and after: a segment created and deleted within the phase (every
 *    fully acked segment is) would not count.
 *  - fanotify: needs CAP_SYS_ADMIN, and inotify sees every name created under a watched
 *    directory, which is the figure.
 */
#include "throughput_int.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define TPF_POLL_MS  50
#define TPF_DIRS_MAX 65536u /* watched directories at most (a store has a handful) */

struct tp_files {
    int fd;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    _Atomic uint64_t created;
    atomic_bool overflowed;
    char **paths; /* by watch descriptor: the directory's path (the thread's alone) */
    size_t n_paths;
};

/* Watches dir and, recursively, every directory in it; each entry found counts when count. */
static void tpf_watch_tree(struct tp_files *f, const char *dir, bool count)
{
    int wd = inotify_add_watch(f->fd, dir, IN_CREATE | IN_ONLYDIR);
    if (wd < 0 || (size_t)wd >= TPF_DIRS_MAX) {
        atomic_store(&f->overflowed, true);
        return;
    }
    if ((size_t)wd >= f->n_paths) {
        size_t n = (size_t)wd * 2 + 16;
        char **p = realloc(f->paths, n * sizeof(*p));
        if (p == NULL) {
            atomic_store(&f->overflowed, true);
            return;
        }
        memset(p + f->n_paths, 0, (n - f->n_paths) * sizeof(*p));
        f->paths = p;
        f->n_paths = n;
    }
    free(f->paths[wd]);
    f->paths[wd] = strdup(dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (count)
            atomic_fetch_add(&f->created, 1);
        char sub[PATH_MAX];
        struct stat st;
        snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
            tpf_watch_tree(f, sub, count);
    }
    closedir(d);
}

static void *tpf_main(void *arg)
{
    struct tp_files *f = arg;
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, TPF_POLL_MS) <= 0)
            continue;
        ssize_t got = read(f->fd, buf, sizeof(buf));
        if (got <= 0) {
            if (got < 0 && errno != EAGAIN && errno != EINTR)
                break;
            continue;
        }
        for (char *at = buf; at < buf + got;) {
            const struct inotify_event *e = (const struct inotify_event *)at;
            at += sizeof(*e) + e->len;
            if (e->mask & IN_Q_OVERFLOW) {
                atomic_store(&f->overflowed, true);
                continue;
            }
            if (!(e->mask & IN_CREATE))
                continue;
            atomic_fetch_add(&f->created, 1);
            if ((e->mask & IN_ISDIR) && e->wd >= 0 && (size_t)e->wd < f->n_paths &&
                f->paths[e->wd] != NULL && e->len > 0) {
                char sub[PATH_MAX];
                snprintf(sub, sizeof(sub), "%s/%s", f->paths[e->wd], e->name);
                tpf_watch_tree(f, sub, true); /* invariant 1 */
            }
        }
    }
    return NULL;
}

tp_files_t *tp_files_open(const char *dir)
{
    struct tp_files *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (f->fd < 0) {
        free(f);
        return NULL;
    }
    tpf_watch_tree(f, dir, false);
    if (f->n_paths == 0 || pthread_create(&f->thread, NULL, tpf_main, f) != 0) {
        tp_files_close(f);
        return NULL;
    }
    f->started = true;
    return f;
}

uint64_t tp_files_created(tp_files_t *f, bool *overflowed)
{
    if (overflowed != NULL)
        *overflowed = f == NULL || atomic_load(&f->overflowed);
    return f != NULL ? atomic_load(&f->created) : 0;
}

void tp_files_close(tp_files_t *f)
{
    if (f == NULL)
        return;
    atomic_store(&f->stop, true);
    if (f->started)
        pthread_join(f->thread, NULL);
    close(f->fd);
    for (size_t i = 0; i < f->n_paths; i++)
        free(f->paths[i]);
    free(f->paths);
    free(f);
}
