/*
 * datapath.c - phase 6) the data path: the store driven as the daemon's owner loop drives it,
 * in turns, over the whole workload (models x shapes x lanes), with the kernel work counted.
 *
 * One turn: append --flush-every items (a producer's Submit); dispatch batches of up to
 * --path-batch items (store_peek, store_commit) from the lanes holding readable items, taken in
 * turn, until as many items left as arrived (once the backlog has reached --path-depth; the
 * last turns drain it); complete (store_tombstone) every item the previous turn dispatched;
 * one store_flush. Before the timed turns the backlog is filled to --path-depth, untimed, so
 * the timed turns are the steady state: items wait behind about --path-depth others, as in a
 * queue that keeps up.
 *
 * Printed per level, over the timed turns (the backlog then drains untimed): items/s, CPU time
 * per item (user + system of the process: getrusage), read and write system calls per item
 * (/proc/self/io syscr + syscw: what the daemon's figure counts), segment and journal files
 * created (per second too; both take ids from one counter, handed out in order, so the highest
 * segment id appended to says how many, give or take the journal file created last) and
 * segment files left once everything is completed, the file pages the process has mapped and
 * resident at the end of the timed turns (RssFile: the store's mappings, bounded by its
 * resident_bytes), and the bytes written to storage per item (/proc/self/io write_bytes: every
 * page the turns dirtied, the entries' and the journal's; what a power-level flush writes back,
 * against the entry's own size).

 *
 * Invariants:
 *   1. It runs in a fresh process (this program re-executed with --datapath-child), so the
 *      counters hold the store's work and this loop's only.
 *   2. The run checks itself: every item dispatched once and completed, nothing pending or
 *      queued at the end.
 *
 * Rejected: choosing lanes by queued tokens as the scheduler does. It needs the scheduler; taking
 * the lanes with readable items in turn reads every lane as often, which is the harder case for
 * a store whose lanes share files.
 */
#include "tools/storebench/storebench.h"

#include "common/clock.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    store_t *s;
    store_queue_t **qs;
    uint64_t *readable; /* per queue: flushed, not yet dispatched (the loop's own count) */
    uint32_t *ring;     /* queues with readable items, in turn */
    uint64_t ring_head, ring_len, ring_cap;
    uint8_t *in_ring;
    store_ref_t *acks, *acks_next; /* dispatched in the previous turn, and in this one */
    size_t n_acks, n_acks_next, cap_acks;
    store_view_t *views;
    store_ref_t *refs;
    uint64_t max_segment;
    uint64_t batches;
} path_t;

static void ring_push(path_t *p, uint32_t q)
{
    if (p->in_ring[q])
        return;
    p->ring[(p->ring_head + p->ring_len++) % p->ring_cap] = q;
    p->in_ring[q] = 1;
}

static uint32_t ring_pop(path_t *p)
{
    uint32_t q = p->ring[p->ring_head];
    p->ring_head = (p->ring_head + 1) % p->ring_cap;
    p->ring_len--;
    p->in_ring[q] = 0;
    return q;
}

/* Dispatches batches until `want` items went out or nothing is readable. */
static uint64_t path_dispatch(path_t *p, uint64_t want, size_t batch)
{
    uint64_t done = 0;
    while (done < want && p->ring_len > 0) {
        uint32_t q = ring_pop(p);
        size_t got = 0;
        sb_check(store_peek(p->s, p->qs[q], p->views, batch, &got), "store_peek (data path)");
        if (got == 0 || got > p->readable[q])
            sb_die("data path", "a peek disagrees with the items flushed to its lane");
        for (size_t i = 0; i < got; i++)
            p->refs[i] = p->views[i].ref;
        sb_check(store_commit(p->s, p->qs[q], p->refs, got), "store_commit (data path)");
        memcpy(p->acks_next + p->n_acks_next, p->refs, got * sizeof(*p->refs));
        p->n_acks_next += got;
        p->readable[q] -= got;
        if (p->readable[q] != 0)
            ring_push(p, q);
        done += got;
        p->batches++;
    }
    return done;
}

/* Appends items [from, to) of the workload. */
static void path_append(path_t *p, const workload_t *w, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        store_ref_t ref;
        sb_check(store_append(p->s, p->qs[w->queue[i]], &w->items[i], &ref),
                 "store_append (data path)");
        if (ref.queue > p->max_segment)
            p->max_segment = ref.queue;
    }
}

/* After the flush: the turn's appends are readable. */
static void path_flushed(path_t *p, const workload_t *w, size_t from, size_t to)
{
    sb_check(store_flush(p->s), "store_flush (data path)");
    for (size_t i = from; i < to; i++) {
        p->readable[w->queue[i]]++;
        ring_push(p, w->queue[i]);
    }
}

static void path_complete(path_t *p)
{
    for (size_t i = 0; i < p->n_acks; i++) {
        int completed = 0;
        sb_check(store_tombstone(p->s, p->acks[i], &completed), "store_tombstone (data path)");
        if (!completed)
            sb_die("data path", "an item was completed twice");
    }
    store_ref_t *t = p->acks;
    p->acks = p->acks_next;
    p->acks_next = t;
    p->n_acks = p->n_acks_next;
    p->n_acks_next = 0;
}

static uint64_t path_count_files(const char *dir)
{
    char seg[4200];
    sb_pathf(seg, sizeof(seg), "%s/segments", dir);
    DIR *d = opendir(seg);
    uint64_t n = 0;
    if (d == NULL)
        return 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

int datapath_child_run(int argc, char **argv)
{
    if (argc != 12)
        sb_die("--datapath-child", "wrong arguments");
    const char *dir = argv[2];
    store_durability_t dur =
        strcmp(argv[3], "power") == 0 ? STORE_DURABLE_POWER : STORE_DURABLE_PROCESS;
    uint64_t v[8];
    for (int i = 0; i < 8; i++)
        v[i] = strtoull(argv[4 + i], NULL, 10);
    size_t items = (size_t)v[0], depth = (size_t)v[1], batch = (size_t)v[2], f = (size_t)v[4];
    gen_t g;
    gen_init(&g, (size_t)v[3], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7]);
    workload_t w;
    workload_init(&w, &g, items + depth);
    path_t p = {0};
    p.s = sb_store_open(dir, dur, NULL);
    p.qs = sb_malloc(g.queues * sizeof(*p.qs));
    sb_queues_open(p.s, g.models, g.shapes, g.lanes, p.qs);
    p.readable = calloc(g.queues, sizeof(*p.readable));
    p.in_ring = calloc(g.queues, 1);
    p.ring_cap = g.queues;
    p.ring = sb_malloc(g.queues * sizeof(*p.ring));
    p.cap_acks = items + depth + batch + f;
    p.acks = sb_malloc(p.cap_acks * sizeof(*p.acks));
    p.acks_next = sb_malloc(p.cap_acks * sizeof(*p.acks_next));
    p.views = sb_malloc(batch * sizeof(*p.views));
    p.refs = sb_malloc(batch * sizeof(*p.refs));
    if (p.readable == NULL || p.in_ring == NULL)
        sb_die("calloc", "out of memory");

    /* The backlog, untimed. */
    size_t at = 0;
    while (at < depth) {
        size_t to = at + f < depth ? at + f : depth;
        path_append(&p, &w, at, to);
        path_flushed(&p, &w, at, to);
        at = to;
    }
    uint64_t segment_before = p.max_segment;
    uint64_t batches_before = p.batches;
    uint64_t dispatched = 0, turns = 0, total = items + depth;
    uint64_t wb0, sys0 = sb_rw_syscalls(&wb0), cpu0 = sb_cpu_ns(), t0 = clock_mono_ns();
    while (at < total) { /* timed: as many items dispatched per turn as arrive */
        size_t to = at + f < total ? at + f : total;
        path_append(&p, &w, at, to);
        dispatched += path_dispatch(&p, (uint64_t)(to - at), batch);
        path_complete(&p);
        path_flushed(&p, &w, at, to);
        at = to;
        turns++;
    }
    uint64_t wb1, t1 = clock_mono_ns(), cpu1 = sb_cpu_ns(), sys1 = sb_rw_syscalls(&wb1);
    /* RssFile: file pages mapped and resident */
    static const char *const rss_key[] = {"RssFile:"};
    uint64_t rss_file;
    sb_proc_fields("/proc/self/status", rss_key, 1, &rss_file);
    rss_file *= 1024;
    uint64_t created = p.max_segment - segment_before;
    uint64_t batches = p.batches - batches_before;
    while (dispatched < total || p.n_acks != 0 || p.n_acks_next != 0) { /* the drain, untimed */
        dispatched += path_dispatch(&p, UINT64_MAX, batch);
        path_complete(&p);
        path_flushed(&p, &w, at, at);
    }
    if (store_pending_count(p.s) != 0)
        sb_die("data path", "items still pending at the end");
    for (uint64_t q = 0; q < g.queues; q++) {
        uint64_t n;
        store_queue_count(p.qs[q], &n, NULL);
        if (n != 0)
            sb_die("data path", "items still queued at the end");
    }
    store_close(p.s);
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
           " %" PRIu64 " %" PRIu64 " %" PRIu64 " %lu\n",
           (uint64_t)items, turns, batches, t1 - t0, cpu1 - cpu0, sys1 - sys0, created,
           path_count_files(dir), rss_file, wb1 - wb0, sb_store_warnings);
    free(p.qs);
    free(p.readable);
    free(p.in_ring);
    free(p.ring);
    free(p.acks);
    free(p.acks_next);
    free(p.views);
    free(p.refs);
    workload_fini(&w);
    gen_fini(&g);
    return fflush(stdout) == 0 ? 0 : 2;
}

void datapath_bench(const opts_t *o, const char *argv0, const char *run_dir, store_durability_t dur,
                    datapath_t *out)
{
    int power = dur == STORE_DURABLE_POWER;
    char dir[4096], a[8][32];
    sb_pathf(dir, sizeof(dir), "%s/datapath-%s", run_dir, power ? "power" : "process");
    uint64_t items = power && o->power_items < o->path_items ? o->power_items : o->path_items;
    uint64_t v[8] = {items,          o->path_depth, o->path_batch, o->payload,
                     o->flush_every, o->models,     o->shapes,     o->lanes};
    for (int i = 0; i < 8; i++)
        snprintf(a[i], sizeof(a[i]), "%" PRIu64, v[i]);
    const char *args[] = {argv0, "--datapath-child",
                          dir,   power ? "power" : "process",
                          a[0],  a[1],
                          a[2],  a[3],
                          a[4],  a[5],
                          a[6],  a[7],
                          NULL};
    char buf[512];
    sb_child_run(argv0, args, buf, sizeof(buf));
    *out = (datapath_t){.name = power ? "power" : "process", .dur = dur};
    unsigned long warnings = 0;
    if (sscanf(buf,
               "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
               " %" SCNu64 " %" SCNu64 " %" SCNu64 " %lu",
               &out->items, &out->turns, &out->batches, &out->wall_ns, &out->cpu_ns, &out->syscalls,
               &out->files_created, &out->files_at_end, &out->rss_file, &out->write_bytes,
               &warnings) != 11)
        sb_die("data path child", "unreadable result");
    sb_store_warnings += warnings;
    if (!o->keep)
        files_remove(dir);
}
