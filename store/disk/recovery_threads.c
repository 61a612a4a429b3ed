/*
 * recovery_threads.c - how recovery spreads its work over threads: how many it may use, and
 * running a set of independent parts on them (the journal's shares, recovery_journal.c; the
 * models' scans, recovery.c).
 *
 * Invariants:
 *   1. Part 0 runs on the calling thread and every other part on a thread of its own; a part
 *      whose thread cannot be started runs on the calling thread after part 0. Every part has
 *      run when rec_parts_run returns, so the caller merges their results on one thread.
 *   2. While more than one part runs, disk_log writes one line at a time (d->log_mu), and
 *      nothing else of d is serialised here: each caller states what its parts share.
 *   3. One thread while a fault hook is armed: the hooks count calls process-wide, unlocked.
 *
 * Rejected: a pool kept for the store's life: recovery runs once per open, and a thread costs
 * tens of microseconds against an open of tens of milliseconds.
 */
#include "store/disk/recovery_scan_int.h"

unsigned rec_threads(const disk_t *d)
{
    if (store_fault_armed()) /* invariant 3 */
        return 1;
    return d->cfg.recovery_threads ? d->cfg.recovery_threads : STORE_RECOVERY_THREADS_DEFAULT;
}

void rec_parts_run(disk_t *d, void *(*fn)(void *), void *parts, size_t size, size_t n)
{
    pthread_t tids[STORE_RECOVERY_THREADS_MAX];
    int started[STORE_RECOVERY_THREADS_MAX] = {0};
    pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
    uint8_t *part = parts;
    if (n > STORE_RECOVERY_THREADS_MAX)
        n = STORE_RECOVERY_THREADS_MAX; /* never asked: n comes from rec_threads */
    if (n > 1)
        d->log_mu = &log_mu; /* invariant 2 */
    for (size_t i = 1; i < n; i++)
        started[i] = pthread_create(&tids[i], NULL, fn, part + i * size) == 0;
    if (n > 0)
        fn(part);
    for (size_t i = 1; i < n; i++) {
        if (started[i])
            pthread_join(tids[i], NULL);
        else
            fn(part + i * size); /* invariant 1: no thread to be had */
    }
    d->log_mu = NULL;
    pthread_mutex_destroy(&log_mu);
}
