/*
 * memory.c - phase 5) memory while appending: a fresh process opens an empty store, appends
 * --memory-items items over the workload's lanes (store_flush every --flush-every, as a producer's
 * Submit messages would) and reports how much its resident memory grew, per queued item: the
 * figure a daemon's operator sees, where phase 4) counts only the heap that recovery allocates.
 *
 * Invariants:
 *   1. The appends run in a fresh process (this program re-executed with --memory-child), so
 *      nothing the benchmark allocated before counts, and the process's whole growth is the
 *      store's: the items are generated one at a time, never held.
 *   2. Both resident figures are read from /proc/self/status at the same two moments: VmRSS
 *      (everything resident, the LMDB map's touched pages and the program's own included) and
 *      RssAnon (anonymous memory: the heap and large allocations, what the store keeps per
 *      item); the heap in use (mallinfo2) is printed beside them.
 *
 * Rejected: measuring the parent's growth over the earlier phases (their workloads and freed
 * arrays stay in malloc's arenas and would be counted or hidden by chance).
 */
#include "tools/storebench/storebench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* VmRSS and RssAnon of this process, in bytes; 0 when /proc does not say. */
static void memory_rss(uint64_t *out_rss, uint64_t *out_anon)
{
    static const char *const keys[] = {"VmRSS:", "RssAnon:"};
    uint64_t kb[2];
    sb_proc_fields("/proc/self/status", keys, 2, kb);
    *out_rss = kb[0] * 1024;
    *out_anon = kb[1] * 1024;
}

int memory_child_run(const char *dir, uint64_t items, uint64_t payload, uint64_t models,
                     uint64_t shapes, uint64_t lanes, uint64_t flush_every)
{
    gen_t g;
    gen_init(&g, (size_t)payload, (unsigned)models, (unsigned)shapes, (unsigned)lanes);
    store_t *s = sb_store_open(dir, STORE_DURABLE_PROCESS, NULL);
    store_queue_t **qs = sb_malloc(g.queues * sizeof(*qs));
    sb_queues_open(s, g.models, g.shapes, g.lanes, qs);
    memory_t m = {.items = items};
    memory_rss(&m.rss_before, &m.anon_before);
    sb_heap_in_use(&m.heap_before);
    for (uint64_t i = 0; i < items; i++) {
        store_item_t it;
        uint8_t id[ID_LEN];
        uint32_t queue;
        gen_item(&g, i, &it, id, &queue);
        store_status_t st = store_append(s, qs[queue], &it, NULL);
        if (st != STORE_OK)
            sb_die("store_append (memory)", store_status_str(st));
        if ((i + 1) % flush_every == 0 && (st = store_flush(s)) != STORE_OK)
            sb_die("store_flush (memory)", store_status_str(st));
    }
    sb_check(store_flush(s), "store_flush (memory)");
    memory_rss(&m.rss_after, &m.anon_after);
    sb_heap_in_use(&m.heap_after);
    for (uint64_t l = 0; l < g.queues; l++) {
        uint64_t n;
        store_queue_count(qs[l], &n, NULL);
        m.queued += n;
    }
    store_close(s);
    free(qs);
    gen_fini(&g);
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
           " %" PRIu64 "\n",
           m.queued, m.rss_before, m.rss_after, m.anon_before, m.anon_after, m.heap_before,
           m.heap_after, (uint64_t)sb_store_warnings);
    return fflush(stdout) == 0 ? 0 : 2;
}

void memory_bench(const opts_t *o, const char *argv0, const char *run_dir, memory_t *m)
{
    char dir[4096], n[32], pay[32], models[32], shapes[32], lanes[32], every[32];
    sb_pathf(dir, sizeof(dir), "%s/memory", run_dir);
    snprintf(n, sizeof(n), "%" PRIu64, o->memory_items);
    snprintf(pay, sizeof(pay), "%" PRIu64, o->recovery_payload);
    snprintf(models, sizeof(models), "%" PRIu64, o->models);
    snprintf(shapes, sizeof(shapes), "%" PRIu64, o->shapes);
    snprintf(lanes, sizeof(lanes), "%" PRIu64, o->lanes);
    snprintf(every, sizeof(every), "%" PRIu64, o->flush_every);
    const char *args[] = {argv0, "--memory-child", dir, n, pay, models, shapes, lanes, every, NULL};
    char out[512];
    sb_child_run(argv0, args, out, sizeof(out));
    uint64_t warnings = 0;
    *m = (memory_t){.items = o->memory_items};
    if (sscanf(out,
               "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
               " %" SCNu64,
               &m->queued, &m->rss_before, &m->rss_after, &m->anon_before, &m->anon_after,
               &m->heap_before, &m->heap_after, &warnings) != 8)
        sb_die("memory child", "unreadable result");
    sb_store_warnings += (unsigned long)warnings;
    if (m->queued != m->items)
        sb_die("memory", "the store does not hold every appended item");
    if (!o->keep)
        files_remove(dir);
}
