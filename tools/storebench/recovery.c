/*
 * recovery.c - phases 3) recovery and 4) memory: a store of --recovery-entries entries is
 * built (untimed), closed, and store_open_disk is timed, all live and again after the oldest
 * third of every lane is tombstoned; beside it, pread() of every segment byte once. The heap in
 * use just before and after each open, in the process that opened, gives bytes per queued item.
 *
 * Invariants:
 *   1. Each timed open runs in a fresh process (this program re-executed with
 *      --recovery-child), as a restart does, unless --in-process: repeated opens inside one
 *      process reuse heap pages malloc has already faulted in, which hides part of the cost.
 *   2. Every open is checked before it counts: it queued exactly the live entries recovery
 *      reported, every completed entry stays completed, and the tombstones it finds are at most
 *      those written (a segment whose entries were all completed is deleted with its
 *      tombstones).
 *
 * Rejected: measuring heap with the process's RSS. It counts the page cache's mapped pages and
 * the LMDB map, not what the store keeps per queued item.
 */
#include "tools/storebench/storebench.h"

#include "common/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One timed open of the store in dir, as the recovery child (or --in-process) runs it. */
typedef struct {
    uint64_t live, tombstoned, segments, queued, elapsed_ns, wall_ns, heap_before, heap_after;
    uint64_t heap_ok, warnings;
} open_once_t;

#define OPEN_ONCE_FIELDS 10

static void open_once(const char *dir, unsigned threads, open_once_t *out)
{
    store_recovery_t rr;
    store_t *s = NULL;
    store_disk_config_t cfg = {.dir = dir,
                               .durability = STORE_DURABLE_PROCESS,
                               .log = sb_store_log,
                               .recovery_threads = threads};
    uint64_t h0, h1;
    int ok = sb_heap_in_use(&h0);
    uint64_t t0 = clock_mono_ns();
    store_status_t st = store_open_disk(&cfg, &rr, &s);
    uint64_t t1 = clock_mono_ns();
    ok = ok && sb_heap_in_use(&h1);
    sb_check(st, "store_open_disk (recovery)");
    uint64_t queued = 0;
    for (store_queue_t *q = NULL; store_queue_next(s, q, &q, NULL, NULL);) {
        uint64_t items;
        store_queue_count(q, &items, NULL);
        queued += items;
    }
    store_close(s);
    if (queued != rr.entries_live)
        sb_die("recovery", "queued items differ from the live entries recovery reported");
    *out = (open_once_t){
        rr.entries_live, rr.entries_tombstoned, rr.segments, queued, rr.elapsed_ns, t1 - t0, h0, h1,
        (uint64_t)ok,    sb_store_warnings};
}

int recovery_child_run(const char *dir, unsigned threads)
{
    open_once_t r;
    open_once(dir, threads, &r);
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
           " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
           r.live, r.tombstoned, r.segments, r.queued, r.elapsed_ns, r.wall_ns, r.heap_before,
           r.heap_after, r.heap_ok, r.warnings);
    return fflush(stdout) == 0 ? 0 : 2;
}

/* Runs open_once in a fresh process: this program re-executed with --recovery-child. */
static void open_in_child(const char *argv0, const char *dir, unsigned threads, open_once_t *out)
{
    char t[16];
    snprintf(t, sizeof(t), "%u", threads);
    const char *args[] = {argv0, "--recovery-child", dir, t, NULL};
    char buf[512];
    sb_child_run(argv0, args, buf, sizeof(buf));
    if (sscanf(buf,
               "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
               " %" SCNu64 " %" SCNu64 " %" SCNu64,
               &out->live, &out->tombstoned, &out->segments, &out->queued, &out->elapsed_ns,
               &out->wall_ns, &out->heap_before, &out->heap_after, &out->heap_ok,
               &out->warnings) != OPEN_ONCE_FIELDS)
        sb_die("recovery child", "unreadable result");
}

static void bench_open(const opts_t *o, const char *argv0, const char *dir, recovery_t *r)
{
    *r = (recovery_t){.elapsed_ns = UINT64_MAX,
                      .wall_ns = UINT64_MAX,
                      .one_elapsed_ns = UINT64_MAX,
                      .one_wall_ns = UINT64_MAX};
    unsigned threads = (unsigned)o->recovery_threads;
    for (uint64_t rep = 0; rep < o->reps; rep++) {
        open_once_t one, timed = {0};
        /* The one-thread baseline alternates with the timed opens, first on even repetitions:
         * the first open of a store also deletes what its builder left completed, and that
         * work must not always fall to the same side. */
        for (int k = 0; k < 2; k++) {
            int baseline = (k == 0) == (rep % 2 == 0);
            if (baseline && threads == 1)
                continue;
            if (o->cold)
                files_evict(dir);
            unsigned t = baseline ? 1 : threads;
            if (o->in_process) {
                open_once(dir, t, &one);
            } else {
                open_in_child(argv0, dir, t, &one);
                sb_store_warnings += one.warnings;
            }
            if (!baseline) {
                timed = one;
                continue;
            }
            if (one.elapsed_ns < r->one_elapsed_ns)
                r->one_elapsed_ns = one.elapsed_ns;
            if (one.wall_ns < r->one_wall_ns)
                r->one_wall_ns = one.wall_ns;
        }
        one = timed;
        if (one.elapsed_ns < r->elapsed_ns)
            r->elapsed_ns = one.elapsed_ns;
        if (one.wall_ns < r->wall_ns)
            r->wall_ns = one.wall_ns;
        r->live = one.live;
        r->tombstoned = one.tombstoned;
        r->segments = one.segments;
        r->queued = one.queued;
        r->heap_ok = one.heap_ok != 0;
        if (r->heap_ok && one.heap_after - one.heap_before > r->heap_delta) {
            r->heap_delta = one.heap_after - one.heap_before; /* the largest of the runs */
            r->heap_before = one.heap_before;
        }
    }
}

static uint64_t bench_read(const opts_t *o, const char *seg_dir, uint64_t *out_bytes)
{
    uint8_t *buf = sb_malloc(READ_CHUNK);
    uint64_t best = UINT64_MAX, bytes = 0;
    for (uint64_t rep = 0; rep < o->reps; rep++) {
        if (o->cold)
            files_evict(seg_dir);
        uint64_t t0 = clock_mono_ns();
        if (files_read(seg_dir, buf, &bytes) != 0)
            sb_die("baseline read", strerror(errno));
        uint64_t dt = clock_mono_ns() - t0;
        if (dt < best)
            best = dt;
    }
    free(buf);
    *out_bytes = bytes;
    return best;
}

void recovery_bench(const opts_t *o, const char *argv0, const char *run_dir, recovery_bench_t *rb)
{
    size_t f = (size_t)o->flush_every;
    char dir[4096], seg_dir[4200];
    sb_pathf(dir, sizeof(dir), "%s/recovery", run_dir);
    sb_pathf(seg_dir, sizeof(seg_dir), "%s/segments", dir);
    gen_t g;
    gen_init(&g, (size_t)o->recovery_payload, (unsigned)o->models, (unsigned)o->shapes,
             (unsigned)o->lanes);
    rb->entries = o->recovery_entries;
    rb->entry_size = gen_entry_size(run_dir, &g);

    /* Build, untimed as a benchmark (its time is printed for orientation only). */
    uint64_t t0 = clock_mono_ns();
    store_t *s = sb_store_open(dir, STORE_DURABLE_PROCESS, NULL);
    store_queue_t **qs = sb_malloc(g.queues * sizeof(*qs));
    sb_queues_open(s, g.models, g.shapes, g.lanes, qs);
    for (uint64_t i = 0; i < rb->entries; i++) {
        store_item_t it;
        uint8_t id[ID_LEN];
        uint32_t queue;
        gen_item(&g, i, &it, id, &queue);
        store_status_t st = store_append(s, qs[queue], &it, NULL);
        if (st != STORE_OK)
            sb_die("store_append (recovery build)", store_status_str(st));
        if ((i + 1) % f == 0 && (st = store_flush(s)) != STORE_OK)
            sb_die("store_flush (recovery build)", store_status_str(st));
    }
    sb_check(store_flush(s), "store_flush (recovery build)");
    store_close(s);
    free(qs);
    gen_fini(&g);
    rb->build_ns = clock_mono_ns() - t0;
    rb->segment_bytes = files_bytes(seg_dir);
    sync();

    bench_open(o, argv0, dir, &rb->all_live);
    if (rb->all_live.live != rb->entries)
        sb_die("recovery", "the store did not recover every entry it was given");
    rb->read_ns = bench_read(o, seg_dir, &rb->read_bytes);

    /* Complete the oldest third of every lane, untimed. */
    s = sb_store_open(dir, STORE_DURABLE_PROCESS, NULL);
    store_view_t views[PEEK_CHUNK];
    store_ref_t refs[PEEK_CHUNK];
    rb->tombstoned = 0;
    for (store_queue_t *q = NULL; store_queue_next(s, q, &q, NULL, NULL);) {
        uint64_t items;
        store_queue_count(q, &items, NULL);
        for (uint64_t want = items / 3; want > 0;) {
            size_t got = 0;
            sb_check(store_peek(s, q, views, want < PEEK_CHUNK ? (size_t)want : PEEK_CHUNK, &got),
                     "store_peek");
            if (got == 0)
                sb_die("store_peek", "a lane ran dry early");
            for (size_t i = 0; i < got; i++)
                refs[i] = views[i].ref;
            sb_check(store_commit(s, q, refs, got), "store_commit");
            for (size_t i = 0; i < got; i++)
                sb_check(store_tombstone(s, refs[i], NULL), "store_tombstone");
            want -= got;
            rb->tombstoned += got;
        }
    }
    sb_check(store_flush(s), "store_flush");
    store_close(s);
    sync();

    bench_open(o, argv0, dir, &rb->third);
    /* Segments whose every entry was completed are deleted whole, their tombstones with them. */
    if (rb->third.live != rb->entries - rb->tombstoned || rb->third.tombstoned > rb->tombstoned)
        sb_die("recovery", "live and tombstoned counts after reopening do not match");
    if (!o->keep)
        files_remove(dir);
}
