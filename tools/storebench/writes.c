/*
 * writes.c - phases 1) appends and 2) tombstones: the store at one durability level beside
 * pwrite() of the same bytes to one file (fdatasync() at the same flush points at the power
 * level), the best of --reps runs of each, store and baseline alternating which goes first.
 *
 * Invariants:
 *   1. Only the appends and the tombstones are timed: open, close, warm-up, commit and file
 *      removal are not, and sync() runs between phases so one phase's writeback does not land
 *      in the next one's timing.
 *   2. Each run checks its result before it counts: every appended item queued, every item
 *      pending before the tombstones, none after.
 *
 * Rejected: timing the commit between the phases. It is the scheduler's read path, which this
 * benchmark does not measure (main.c).
 */
#include "tools/storebench/storebench.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Commits everything queued in q (untimed setup for the tombstone phase). */
static void commit_all(store_t *s, store_queue_t *q)
{
    store_view_t views[PEEK_CHUNK];
    store_ref_t refs[PEEK_CHUNK];
    for (;;) {
        size_t got = 0;
        sb_check(store_peek(s, q, views, PEEK_CHUNK, &got), "store_peek");
        if (got == 0)
            return;
        for (size_t i = 0; i < got; i++)
            refs[i] = views[i].ref;
        sb_check(store_commit(s, q, refs, got), "store_commit");
    }
}

static phase_ns_t run_store(const opts_t *o, const workload_t *w, const gen_t *g,
                            store_durability_t dur, const char *dir)
{
    uint64_t lanes = g->queues;
    size_t n = w->n, f = (size_t)o->flush_every;
    store_t *s = sb_store_open(dir, dur, NULL);
    store_queue_t **qs = sb_malloc(lanes * sizeof(*qs));
    sb_queues_open(s, g->models, g->shapes, g->lanes, qs);
    /* Warm-up, untimed: one item per lane creates the files its appends go to. */
    store_ref_t *warm = sb_malloc(lanes * sizeof(*warm));
    for (uint64_t l = 0; l < lanes; l++) {
        store_item_t it;
        uint8_t id[ID_LEN];
        uint32_t queue;
        gen_item(g, UINT64_MAX - l, &it, id, &queue);
        sb_check(store_append(s, qs[l], &it, &warm[l]), "store_append (warm-up)");
    }
    sb_check(store_flush(s), "store_flush (warm-up)");
    store_ref_t *refs = sb_malloc(n * sizeof(*refs));
    sync();

    uint64_t t0 = clock_mono_ns();
    for (size_t i = 0; i < n; i++) {
        store_status_t st = store_append(s, qs[w->queue[i]], &w->items[i], &refs[i]);
        if (st != STORE_OK)
            sb_die("store_append", store_status_str(st));
        if ((i + 1) % f == 0 && (st = store_flush(s)) != STORE_OK)
            sb_die("store_flush", store_status_str(st));
    }
    if (n % f != 0)
        sb_check(store_flush(s), "store_flush");
    uint64_t t1 = clock_mono_ns();

    uint64_t queued = 0;
    for (uint64_t l = 0; l < lanes; l++) {
        uint64_t items;
        store_queue_count(qs[l], &items, NULL);
        queued += items;
    }
    if (queued != n + lanes)
        sb_die("appends", "the store does not hold every appended item");
    /* Untimed: commit everything, complete the warm-up items, let writeback finish. */
    for (uint64_t l = 0; l < lanes; l++)
        commit_all(s, qs[l]);
    for (uint64_t l = 0; l < lanes; l++)
        sb_check(store_tombstone(s, warm[l], NULL), "store_tombstone (warm-up)");
    sb_check(store_flush(s), "store_flush");
    if (store_pending_count(s) != n)
        sb_die("commit", "not every item is pending");
    sync();

    uint64_t t2 = clock_mono_ns();
    for (size_t i = 0; i < n; i++) {
        int completed = 0;
        store_status_t st = store_tombstone(s, refs[i], &completed);
        if (st != STORE_OK)
            sb_die("store_tombstone", store_status_str(st));
        if (!completed)
            sb_die("store_tombstone", "an item was already complete");
        if ((i + 1) % f == 0 && (st = store_flush(s)) != STORE_OK)
            sb_die("store_flush", store_status_str(st));
    }
    if (n % f != 0)
        sb_check(store_flush(s), "store_flush");
    uint64_t t3 = clock_mono_ns();

    if (store_pending_count(s) != 0)
        sb_die("tombstones", "items still pending after completing all of them");
    store_close(s);
    free(refs);
    free(warm);
    free(qs);
    sync();
    return (phase_ns_t){t1 - t0, t3 - t2};
}

static void xpwrite(int fd, const void *buf, size_t len, uint64_t off)
{
    if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
        sb_die("baseline pwrite", errno ? strerror(errno) : "short write");
}

static void xfdatasync(int fd)
{
    if (fdatasync(fd) != 0)
        sb_die("baseline fdatasync", strerror(errno));
}

static phase_ns_t run_baseline(const opts_t *o, const workload_t *w, uint64_t entry_size,
                               store_durability_t dur, const char *path)
{
    size_t n = w->n, f = (size_t)o->flush_every;
    int power = dur == STORE_DURABLE_POWER;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        sb_die(path, strerror(errno));
    uint8_t *buf = calloc(1, entry_size);
    if (buf == NULL)
        sb_die("calloc", "out of memory");
    sync();

    /* The entry's 32-byte header stays zero; the id and payload are copied in, as any writer
     * framing a record must. */
    uint64_t t0 = clock_mono_ns();
    for (size_t i = 0; i < n; i++) {
        const store_item_t *it = &w->items[i];
        memcpy(buf + 32, it->id, it->id_len);
        memcpy(buf + 32 + it->id_len, it->payload, it->payload_len);
        xpwrite(fd, buf, entry_size, i * entry_size);
        if (power && (i + 1) % f == 0)
            xfdatasync(fd);
    }
    if (power && n % f != 0)
        xfdatasync(fd);
    uint64_t t1 = clock_mono_ns();
    sync();

    static const uint8_t tomb[4] = {'T', 'O', 'M', 'B'};
    uint64_t t2 = clock_mono_ns();
    for (size_t i = 0; i < n; i++) {
        xpwrite(fd, tomb, sizeof(tomb), i * entry_size);
        if (power && (i + 1) % f == 0)
            xfdatasync(fd);
    }
    if (power && n % f != 0)
        xfdatasync(fd);
    uint64_t t3 = clock_mono_ns();

    close(fd);
    free(buf);
    sync();
    return (phase_ns_t){t1 - t0, t3 - t2};
}

void writes_bench(const opts_t *o, const gen_t *g, uint64_t entry_size, const char *run_dir,
                  level_t *lv)
{
    workload_t w;
    workload_init(&w, g, lv->n);
    lv->store = lv->base = (phase_ns_t){UINT64_MAX, UINT64_MAX};
    for (uint64_t rep = 0; rep < o->reps; rep++) {
        char sdir[4096], bpath[4096];
        sb_pathf(sdir, sizeof(sdir), "%s/store-%s-%" PRIu64, run_dir, lv->name, rep);
        sb_pathf(bpath, sizeof(bpath), "%s/baseline-%s-%" PRIu64 ".dat", run_dir, lv->name, rep);
        phase_ns_t s, b;
        if (rep % 2 == 0) {
            s = run_store(o, &w, g, lv->dur, sdir);
            b = run_baseline(o, &w, entry_size, lv->dur, bpath);
        } else {
            b = run_baseline(o, &w, entry_size, lv->dur, bpath);
            s = run_store(o, &w, g, lv->dur, sdir);
        }
        if (!o->keep) {
            files_remove(sdir);
            files_remove(bpath);
        }
        if (s.append_ns < lv->store.append_ns)
            lv->store.append_ns = s.append_ns;
        if (s.tomb_ns < lv->store.tomb_ns)
            lv->store.tomb_ns = s.tomb_ns;
        if (b.append_ns < lv->base.append_ns)
            lv->base.append_ns = b.append_ns;
        if (b.tomb_ns < lv->base.tomb_ns)
            lv->base.tomb_ns = b.tomb_ns;
    }
    workload_fini(&w);
}
