/*
 * disk_log.c - the disk backend's log lines, its corruption reports and its error state.
 *
 * Invariants:
 *   1. Once an fsync, a write (other than running out of space) or an index commit fails, the
 *      store is failed (disk_fail): every later call that would acknowledge something returns
 *      STORE_EIO. A failed sync is never retried, because a retry that succeeds proves nothing
 *      about the pages the kernel already dropped (PostgreSQL's fsyncgate).
 *   2. The failure is logged once, with what failed and why; corruption is logged with the
 *      source line of the check that found it.
 *
 * Rejected: returning the error and letting the caller decide whether to go on. Every caller
 * would have to know which failures leave the files and the index disagreeing; one sticky flag
 * makes "nothing more is acknowledged" true by construction.
 */
#include "store/disk/disk_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void disk_log(disk_t *d, int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (d->log_mu != NULL)
        pthread_mutex_lock(d->log_mu);
    if (d->cfg.log != NULL)
        d->cfg.log(d->cfg.log_ctx, level, msg);
    else
        fprintf(stderr, "lanesched store %s: %s\n",
                level == STORE_LOG_ERROR  ? "error"
                : level == STORE_LOG_WARN ? "warning"
                                          : "info",
                msg);
    if (d->log_mu != NULL)
        pthread_mutex_unlock(d->log_mu);
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

store_status_t disk_fail(disk_t *d, const char *what, int err)
{
    if (!d->failed)
        disk_log(d, STORE_LOG_ERROR,
                 "%s failed: %s; the store acknowledges nothing more until it is reopened", what,
                 strerror(err));
    d->failed = 1;
    return STORE_EIO;
}
