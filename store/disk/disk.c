/*
 * disk.c - the disk store backend (--store disk): one append log of segment files per model,
 * each entry carrying its shape and lane, an LMDB index, a state journal for delivery counts and
 * tombstones, whole-file deletion. This file is the backend's face: the vtable, store_open_disk and
 * close, the lane-level calls (open, release, target, walk) and the per-model current shape. An
 * item's life is in disk_item.c, recovery at open in recovery.c, and the layer both stand on in the
 * files disk_int.h lists; the format and its reasons are in docs/store.md.
 *
 * Owns: the data directory's segments/, journal/ and index/ (through the files below it) and the
 * disk_t.
 *
 * Invariants:
 *   1. store_open_disk hands out a store only after recovery and its flush have succeeded and
 *      the whole state checks (disk_check); on any failure everything is closed, *out untouched.
 *   2. A lane queue is released only when it holds no queued and no pending item; its index
 *      row is deleted at the next flush. Its entries stay in its model's segments, all of them
 *      completed, and go with those files.
 *   3. Every call that would acknowledge something returns STORE_EIO once the store is failed
 *      (disk_log.c's invariant 1); close never flushes (store.h).
 *
 * Rejected: a write-ahead log beside the segments. The segment is the durable copy; a WAL would
 * write every byte twice. (The state journal is not one: it holds 24-byte state changes, never
 * an item's bytes.)
 */
#include "store/disk/disk_int.h"
#include "store/disk/disk_item_int.h"
#include "store/disk/recovery_int.h"

#include "common/invariant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void disk_close(store_t *store)
{
    disk_t *d = disk_of(store);
    disk_flush_discard(d); /* never flushes (store.h): a crash loses the same */
    for (size_t i = 0; i < d->pending.cap; i++)
        free(d->pending.slots[i].value);
    pool_fini(&d->pend_pool);
    for (size_t i = 0; i < d->segments.cap; i++) {
        if (d->segments.slots[i].value != NULL)
            disk_seg_free(d, d->segments.slots[i].value);
    }
    free(d->slots);
    free(d->free_slots);
    free(d->resident);
    for (dqueue_t *q = d->all, *next; q != NULL; q = next) {
        next = q->all_next;
        disk_queue_free(q);
    }
    map_fini(&d->queues);
    map_fini(&d->segments);
    map_fini(&d->deleted);
    free(d->deleted_ids);
    map_fini(&d->pending);
    for (size_t i = 0; i < d->n_models; i++) {
        free(d->models[i].name);
        free(d->models[i].segs);
    }
    free(d->models);
    for (size_t i = 0; i < d->n_released; i++)
        free(d->released[i].model);
    free(d->released);
    index_close(d->index);
    disk_jnl_close(d);
    disk_watch_close(d);
    disk_io_close(d->io);
    free(d->arena);
    free(d->writes);
    free(d->ops);
    free(d->wave);
    if (d->seg_dir_fd >= 0)
        close(d->seg_dir_fd);
    if (d->dir_fd >= 0)
        close(d->dir_fd);
    free(d->scratch);
    free(d->dir);
    free(d);
}

static store_status_t disk_queue_open(store_t *store, const store_key_t *key, store_queue_t **out)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    dqueue_t *q;
    store_status_t st = disk_queue_get(d, key->model, key->signature, key->lane, &q);
    if (st == STORE_OK)
        *out = &q->base;
    return st;
}

static store_status_t disk_queue_release(store_t *store, store_queue_t *queue)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    if (q->indexed) { /* its row goes at the next flush; a row not yet written never will be */
        dlane_key_t *rel = realloc(d->released, (d->n_released + 1) * sizeof(*rel));
        if (rel == NULL)
            return STORE_ENOMEM;
        d->released = rel;
        char *model = strdup(q->model);
        if (model == NULL)
            return STORE_ENOMEM;
        rel[d->n_released++] = (dlane_key_t){model, q->signature, q->lane};
    }
    disk_queue_destroy(d, q);
    return STORE_OK;
}

static uint64_t disk_pending_count(const store_t *store)
{
    return ((const disk_t *)store)->pending.len;
}

static void disk_usage_get(const store_t *store, store_usage_t *out)
{
    const disk_t *d = (const disk_t *)store;
    store_usage_t u = {.journal_files = d->n_jnls,
                       .journal_restated = d->restated,
                       .written_ahead = d->written_ahead};
    for (size_t m = 0; m < d->n_models; m++) {
        u.segment_files += d->models[m].n_segs;
        for (size_t i = 0; i < d->models[m].n_segs; i++)
            u.segment_bytes += d->models[m].segs[i]->size;
    }
    for (size_t i = 0; i < d->n_jnls; i++)
        u.journal_bytes += d->jnls[i].bytes;
    *out = u;
}

static store_status_t disk_store_flush(store_t *store)
{
    return disk_flush(disk_of(store));
}

static uint64_t disk_unflushed_bytes(const store_t *store)
{
    return ((const disk_t *)store)->unflushed_bytes;
}

static store_status_t disk_queue_target_set(store_t *store, store_queue_t *queue, uint32_t target)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = (dqueue_t *)queue;
    if (d->failed)
        return STORE_EIO;
    if (q->target != target) {
        q->target = target;
        q->target_dirty = 1;
        disk_queue_mark_flush(d, q);
    }
    return STORE_OK;
}

static int disk_queue_next(store_t *store, store_queue_t *prev, store_queue_t **out,
                           store_key_t *out_key, uint32_t *out_target)
{
    disk_t *d = disk_of(store);
    dqueue_t *q = prev == NULL ? d->all : ((dqueue_t *)prev)->all_next;
    if (q == NULL)
        return 0;
    if (out != NULL)
        *out = &q->base;
    if (out_key != NULL)
        *out_key = (store_key_t){q->model, q->signature, q->lane};
    if (out_target != NULL)
        *out_target = q->target;
    return 1;
}

static store_status_t disk_current_shape_set(store_t *store, const char *model, uint64_t signature)
{
    disk_t *d = disk_of(store);
    if (d->failed)
        return STORE_EIO;
    uint32_t idx;
    store_status_t st = disk_model_intern(d, model, &idx);
    if (st != STORE_OK)
        return st;
    dmodel_t *m = &d->models[idx];
    if (!m->has_current || m->current != signature) {
        m->has_current = 1;
        m->current = signature;
        m->current_dirty = 1;
        d->rows_dirty = 1;
    }
    return STORE_OK;
}

static store_status_t disk_current_shape_get(store_t *store, const char *model, int *out_has,
                                             uint64_t *out_signature)
{
    disk_t *d = disk_of(store);
    uint32_t idx;
    if (!disk_model_find(d, model, &idx) || !d->models[idx].has_current) {
        *out_has = 0;
        return STORE_OK;
    }
    *out_has = 1;
    *out_signature = d->models[idx].current;
    return STORE_OK;
}

static const struct store_ops disk_ops = {
    .queue_oldest = disk_queue_oldest,
    .queue_prefetch = disk_queue_prefetch,
    .queue_scan = disk_queue_scan,
    .flush = disk_store_flush,
    .unflushed_bytes = disk_unflushed_bytes,
    .queue_target_set = disk_queue_target_set,
    .queue_next = disk_queue_next,
    .close = disk_close,
    .queue_open = disk_queue_open,
    .queue_release = disk_queue_release,
    .append = disk_append,
    .peek = disk_peek,
    .peek_tokens = disk_peek_tokens,
    .commit = disk_commit,
    .tombstone = disk_tombstone,
    .prefetch = disk_prefetch,
    .ret = disk_return,
    .pending_count = disk_pending_count,
    .usage_get = disk_usage_get,
    .current_shape_set = disk_current_shape_set,
    .current_shape_get = disk_current_shape_get,
    .epoch_next = disk_epoch_next,
};

store_status_t store_open_disk(const store_disk_config_t *cfg, store_recovery_t *out_report,
                               store_t **out)
{
    if (cfg == NULL || cfg->dir == NULL || cfg->dir[0] == '\0' || out == NULL ||
        cfg->segment_max_bytes > (1ull << 31) || cfg->journal_max_bytes > (1ull << 31) ||
        cfg->recovery_threads > STORE_RECOVERY_THREADS_MAX ||
        (cfg->io != STORE_IO_AUTO && cfg->io != STORE_IO_PLAIN) ||
        (cfg->sync != STORE_SYNC_FILES && cfg->sync != STORE_SYNC_FS))
        return STORE_EINVAL;
    store_status_t st = STORE_ENOMEM;
    disk_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return st;
    d->base.ops = &disk_ops;
    d->cfg = *cfg;
    d->cfg.dir = NULL;
    if (d->cfg.segment_max_bytes == 0)
        d->cfg.segment_max_bytes = STORE_SEGMENT_MAX_DEFAULT;
    if (d->cfg.index_map_bytes == 0)
        d->cfg.index_map_bytes = 1ull << 30;
    if (d->cfg.resident_bytes == 0)
        d->cfg.resident_bytes = STORE_RESIDENT_DEFAULT;
    if (d->cfg.spill_bytes == 0)
        d->cfg.spill_bytes = DISK_SPILL_BYTES;
    d->dir_fd = d->seg_dir_fd = d->watch_fd = d->jnl_dir_fd = -1;
    disk_fd_limit_init(d);
    map_init(&d->queues);
    map_init(&d->segments);
    map_init(&d->deleted);
    map_init(&d->pending);
    pool_init(&d->pend_pool, sizeof(dpend_t), DISK_PEND_KEEP);
    long page = sysconf(_SC_PAGESIZE); /* once: disk_map_view runs for every entry peeked */
    d->page_bytes = page > 0 ? (uint64_t)page : 4096u;
    store_recovery_t report = {0};
    if ((d->dir = strdup(cfg->dir)) == NULL ||
        (d->wave = malloc(disk_wave_max(d) * sizeof(*d->wave))) == NULL ||
        (st = disk_io_open(d, &d->io)) != STORE_OK)
        goto out;
    st = STORE_ENOMEM;
    if (mkdir(d->dir, 0755) != 0 && errno != EEXIST) {
        disk_log(d, STORE_LOG_ERROR, "cannot create data directory %s: %s", d->dir,
                 strerror(errno));
        st = STORE_EIO;
        goto out;
    }
    d->dir_fd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dir_fd < 0 || (mkdirat(d->dir_fd, "segments", 0755) != 0 && errno != EEXIST) ||
        (d->seg_dir_fd = openat(d->dir_fd, "segments", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        disk_log(d, STORE_LOG_ERROR, "cannot open data directory %s: %s", d->dir, strerror(errno));
        st = STORE_EIO;
        goto out;
    }
    disk_watch_open(d); /* before recovery: nothing that happens after it is missed */
    if ((st = disk_recover(d, &report)) != STORE_OK)
        goto out;
    INVARIANT_CHECK(disk_check(d));
    if (out_report != NULL)
        *out_report = report;
    *out = &d->base;
    d = NULL;
out:
    if (d != NULL)
        disk_close(&d->base);
    return st;
}
