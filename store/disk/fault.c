/*
 * fault.c - test-only fault injection for the disk store, in the manner of SQLite's fault
 * simulation: arm an operation kind with N, and the Nth call of that kind from then on fails
 * with EIO (or MDB_PANIC for LMDB puts) instead of running. Every crash point of the store is
 * reachable from a unit test this way; a fault sweep re-runs a case failing the 1st, 2nd, ...
 * call until the case completes without reaching the armed call.
 *
 * Invariants:
 *   1. Disarmed (the default, and always in the daemon), each wrapper costs one predictable
 *      branch and calls straight through.
 *   2. A fault fires once; after it the kind is disarmed, so recovery code runs for real.
 *
 * Rejected: link-time interposition of write()/fsync(). It would also fail nats.c's and LMDB's
 * own calls and cannot tell one store operation from another.
 */
#include "store/disk/bytes_int.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

static unsigned long fault_countdown[STORE_FAULT_COUNT];
static unsigned long fault_fired[STORE_FAULT_COUNT];

void store_fault_arm(store_fault_op_t op, unsigned long nth)
{
    if (op < STORE_FAULT_COUNT)
        fault_countdown[op] = nth;
}

void store_fault_disarm_all(void)
{
    for (int i = 0; i < STORE_FAULT_COUNT; i++)
        fault_countdown[i] = 0;
}

unsigned long store_fault_fired(store_fault_op_t op)
{
    return op < STORE_FAULT_COUNT ? fault_fired[op] : 0;
}

int store_fault_armed(void)
{
    for (int i = 0; i < STORE_FAULT_COUNT; i++) {
        if (fault_countdown[i] != 0)
            return 1;
    }
    return 0;
}

int store_fault_hit(store_fault_op_t op)
{
    if (fault_countdown[op] == 0)
        return 0;
    if (--fault_countdown[op] != 0)
        return 0;
    fault_fired[op]++;
    return 1;
}

ssize_t store_fault_pwrite(int fd, const void *buf, size_t len, off_t off)
{
    if (store_fault_hit(STORE_FAULT_WRITE)) {
        errno = EIO;
        return -1;
    }
    return pwrite(fd, buf, len, off);
}

int store_fault_fsync(int fd, int data_only)
{
    if (store_fault_hit(STORE_FAULT_FSYNC)) {
        errno = EIO;
        return -1;
    }
    return data_only ? fdatasync(fd) : fsync(fd);
}

int store_fault_renameat(int dirfd, const char *from, const char *to)
{
    if (store_fault_hit(STORE_FAULT_RENAME)) {
        errno = EIO;
        return -1;
    }
    return renameat(dirfd, from, dirfd, to);
}

int store_fault_unlinkat(int dirfd, const char *name)
{
    if (store_fault_hit(STORE_FAULT_UNLINK)) {
        errno = EIO;
        return -1;
    }
    return unlinkat(dirfd, name, 0);
}
