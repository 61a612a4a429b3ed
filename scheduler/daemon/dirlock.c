/*
 * dirlock.c - one daemon per data directory: an exclusive flock on <data-dir>/lanesched.lock,
 * held for the daemon's life, with the holder written in the file for the next one to name.
 *
 * Invariants:
 *   1. The lock is taken before the store opens, so a second daemon never recovers (and then
 *      serves) the first one's pending items: it stops with a message naming the holder.
 *   2. The lock goes with the process: the kernel drops a flock when its descriptor closes, also
 *      on SIGKILL, so a crash never leaves a stale lock to clean by hand.
 *
 * Rejected: a pid file checked with kill(pid, 0) (a recycled pid, or another host on a shared
 * volume, reads as alive or dead wrongly, and two starting daemons race between check and
 * write); fcntl record locks (dropped when any descriptor of the file in the process closes).
 * The file is never removed: removing it would let a third daemon lock a new inode while the
 * second still holds the old one.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DIRLOCK_NAME "lanesched.lock"

/* What the holder wrote, without its newline, into buf ("unknown" when unreadable). */
static void dirlock_holder(int fd, char *buf, size_t cap)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    if (n <= 0) {
        snprintf(buf, cap, "holder unknown");
        return;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

static void dirlock_write(int fd)
{
    char host[256] = "?", line[512], when[32];
    gethostname(host, sizeof(host) - 1);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n =
        snprintf(line, sizeof(line), "pid %ld on host %s since %s\n", (long)getpid(), host, when);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n)
        log_write(LOG_WARN, "data directory lock: cannot record this process as its holder: %s",
                  strerror(errno));
}

/* How often a standby tries a held lock again, and how often it says it still waits. */
#define DIRLOCK_RETRY_MS  250u
#define DIRLOCK_LOG_EVERY 40u

daemon_status_t dirlock_acquire(const char *dir, int *out_fd)
{
    return dirlock_acquire_wait(dir, NULL, NULL, out_fd);
}

daemon_status_t dirlock_acquire_wait(const char *dir, int (*wait)(void *ctx, uint32_t ms),
                                     void *ctx, int *out_fd)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, DIRLOCK_NAME) >= (int)sizeof(path))
        return DAEMON_EINVAL;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        log_write(LOG_ERROR, "cannot create the data directory %s: %s", dir, strerror(errno));
        return DAEMON_ESTORE;
    }
    /* The lock file is written (its holder line): never through a link someone left there, and
     * never anything but a regular file. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int err = fd < 0 ? errno : EINVAL;
        log_write(LOG_ERROR, "cannot open the data directory lock %s: %s", path,
                  err == ELOOP    ? "it is a symbolic link (remove it)"
                  : err == EINVAL ? "it is not a regular file (remove it)"
                                  : strerror(err));
        if (fd >= 0)
            close(fd);
        return DAEMON_ESTORE;
    }
    for (unsigned tries = 0; wait != NULL && flock(fd, LOCK_EX | LOCK_NB) != 0; tries++) {
        if (errno != EWOULDBLOCK)
            break; /* reported below */
        if (tries % DIRLOCK_LOG_EVERY == 0) {
            char holder[256];
            dirlock_holder(fd, holder, sizeof(holder));
            log_write(LOG_INFO, "the data directory %s is in use (%s): waiting for it (standby)",
                      dir, holder);
        }
        if (wait(ctx, DIRLOCK_RETRY_MS)) {
            close(fd);
            return DAEMON_ESTOPPED;
        }
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char holder[256];
        dirlock_holder(fd, holder, sizeof(holder));
        close(fd);
        if (err == EWOULDBLOCK) {
            log_write(LOG_ERROR,
                      "the data directory %s is in use by another lanesched (%s, lock file %s): "
                      "stop that one first, or give this one another --data-dir",
                      dir, holder, path);
            return DAEMON_ELOCKED;
        }
        log_write(LOG_ERROR, "cannot lock %s: %s", path, strerror(err));
        return DAEMON_ESTORE;
    }
    dirlock_write(fd);
    *out_fd = fd;
    return DAEMON_OK;
}

void dirlock_release(int fd)
{
    if (fd >= 0)
        close(fd); /* invariant 2: the lock goes with the descriptor */
}
