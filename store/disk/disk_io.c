/*
 * disk_io.c - the disk backend's I/O engine: a batch of writes and syncs run together and
 * waited for together.
 *
 * Syncs are where batching pays: with io_uring (liburing) the fdatasync of every segment of a
 * batch is in flight at once (the kernel's workers run them in parallel and the file system
 * folds them into shared journal commits), one io_uring_enter for the lot, instead of one sync
 * after another. Writes are plain system calls, in order: the flush has already
 * gathered them into one write per run of entries (disk_flush.c), and buffered writes through
 * io_uring measured 2.5x slower per write than pwrite() on ext4 here (the kernel cannot do
 * them without blocking and hands each to a worker thread). Where io_uring is not available (a
 * kernel without it, kernel.io_uring_disabled, a seccomp profile that refuses it, or
 * STORE_IO_PLAIN) the syncs are plain calls too, one after another.
 *
 * Invariants:
 *   1. disk_io_run returns only when every operation of the batch has completed: no buffer or
 *      descriptor it was given is used after it returns, so the caller may close or reuse them.
 *   2. A short write is finished with more pwrite() calls; an operation reports success only
 *      when all its bytes were written.
 *   3. Nothing here retries a failed sync or decides what a failure means: res carries the
 *      errno and the caller (disk_flush.c) fails the store.
 *
 * Rejected: a thread pool of our own for parallel syncs (io_uring's workers are that pool,
 * owned by the kernel); writes through io_uring (measured above); IOSQE_IO_LINK chains of
 * writes and their sync (a failed link cancels the rest of the chain, which makes a batch's
 * results harder to read than two calls: all writes, then all syncs).
 */
#define _GNU_SOURCE
#include "store/disk/disk_int.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Submission queue entries: syncs in flight in one submission (a flush's wave is at most
 * DISK_WAVE_MAX segments; a larger batch goes in several submissions). */
#define DISK_IO_RING_ENTRIES 256u

struct disk_io {
    int have_ring;
    struct io_uring ring;
};

store_status_t disk_io_open(disk_t *d, disk_io_t **out)
{
    disk_io_t *io = calloc(1, sizeof(*io));
    if (io == NULL)
        return STORE_ENOMEM;
    if (d->cfg.io == STORE_IO_AUTO) {
        int rc = io_uring_queue_init(DISK_IO_RING_ENTRIES, &io->ring, 0);
        io->have_ring = rc == 0;
        if (!io->have_ring)
            disk_log(d, STORE_LOG_INFO,
                     "io_uring is not available (%s): segments are synced one after another",
                     strerror(-rc));
    }
    *out = io;
    return STORE_OK;
}

void disk_io_close(disk_io_t *io)
{
    if (io == NULL)
        return;
    if (io->have_ring)
        io_uring_queue_exit(&io->ring);
    free(io);
}

/* Writes what is left of a write from `done` bytes on; returns 0 or an errno. */
static int disk_io_write_rest(const disk_io_op_t *op, size_t done)
{
    const uint8_t *buf = op->buf;
    while (done < op->len) {
        ssize_t w = pwrite(op->fd, buf + done, op->len - done, (off_t)(op->off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        done += (size_t)w;
    }
    return 0;
}

static void disk_io_run_plain(disk_io_op_t *op)
{
    switch (op->kind) {
    case DISK_IO_WRITE:
        op->res = disk_io_write_rest(op, 0);
        break;
    case DISK_IO_SYNC:
        op->res = fdatasync(op->fd) == 0 ? 0 : errno;
        break;
    case DISK_IO_SYNCFS:
        op->res = syncfs(op->fd) == 0 ? 0 : errno;
        break;
    }
}

/* One submission of the syncs among ops[0 .. n), n <= DISK_IO_RING_ENTRIES; waits for every
 * completion. Other operations run as plain calls first. */
static void disk_io_run_ring(disk_io_t *io, disk_io_op_t *ops, size_t n)
{
    size_t queued = 0;
    for (size_t i = 0; i < n; i++) {
        disk_io_op_t *op = &ops[i];
        struct io_uring_sqe *sqe = op->kind == DISK_IO_SYNC ? io_uring_get_sqe(&io->ring) : NULL;
        if (sqe == NULL) { /* not a sync (or, impossibly, a full ring): the plain call */
            disk_io_run_plain(op);
            continue;
        }
        io_uring_prep_fsync(sqe, op->fd, IORING_FSYNC_DATASYNC);
        io_uring_sqe_set_data64(sqe, i);
        queued++;
    }
    size_t reaped = 0;
    int broken = 0;
    while (reaped < queued && !broken) {
        int rc = io_uring_submit_and_wait(&io->ring, (unsigned)(queued - reaped));
        broken = rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY;
        struct io_uring_cqe *cqe;
        while (reaped < queued && io_uring_peek_cqe(&io->ring, &cqe) == 0) {
            ops[io_uring_cqe_get_data64(cqe)].res = cqe->res < 0 ? -cqe->res : 0;
            io_uring_cqe_seen(&io->ring, cqe);
            reaped++;
        }
    }
    if (reaped < queued) {
        /* The ring failed: wait for what the kernel took (invariant 1), fail the rest, and go
         * on without a ring. */
        size_t taken = queued - io_uring_sq_ready(&io->ring);
        for (struct io_uring_cqe *cqe; reaped < taken && io_uring_wait_cqe(&io->ring, &cqe) == 0;
             reaped++) {
            ops[io_uring_cqe_get_data64(cqe)].res = cqe->res < 0 ? -cqe->res : 0;
            io_uring_cqe_seen(&io->ring, cqe);
        }
        io_uring_queue_exit(&io->ring);
        io->have_ring = 0;
        for (size_t i = 0; i < n; i++) {
            if (ops[i].res < 0)
                ops[i].res = EIO;
        }
    }
}

void disk_io_run(disk_io_t *io, disk_io_op_t *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ops[i].res = -1; /* not yet completed */
    size_t syncs = 0;
    for (size_t i = 0; i < n; i++)
        syncs += ops[i].kind == DISK_IO_SYNC;
    if (!io->have_ring || syncs < 2) { /* one sync gains nothing from a worker thread */
        for (size_t i = 0; i < n; i++)
            disk_io_run_plain(&ops[i]);
        return;
    }
    for (size_t at = 0; at < n; at += DISK_IO_RING_ENTRIES) {
        size_t k = n - at < DISK_IO_RING_ENTRIES ? n - at : DISK_IO_RING_ENTRIES;
        disk_io_run_ring(io, ops + at, k);
    }
}
