/*
 * main.c - lanesched-storebench: the disk store's write, completion, recovery and memory
 * costs, each beside a baseline measured in the same run on the same file system.
 *
 * What it measures (--models models of --shapes shapes of --lanes lanes each, one model, one
 * shape and 4 lanes unless asked; items spread over them by a seeded PRNG: a model uniformly,
 * a shape of it by Zipf popularity, a lane of it uniformly; every item has a 16-byte id, a
 * --payload byte payload and a token count):
 *
 *   1) appends: store_append of N items with store_flush every F appends (F = a producer's
 *      Submit message), at both durability levels (STORE_DURABLE_PROCESS: N = --items;
 *      STORE_DURABLE_POWER: N = --power-items). Items/s, MB/s of entry bytes, store/baseline.
 *   2) tombstones: the same store, every item committed (untimed), then store_tombstone of each
 *      in append order with store_flush every F. Tombstones/s, store/baseline.
 *   3) recovery: a store of --recovery-entries entries (payload --recovery-payload, process
 *      level) is built, closed, and store_open_disk is timed: entries/s from store_recovery_t
 *      ((entries_live + entries_tombstoned) / elapsed_ns) and the wall time of the call; then
 *      again after the oldest third of every lane has been tombstoned. Each timed open runs in
 *      a fresh process (the benchmark re-executes itself with --recovery-child), as a restart
 *      does: repeated opens inside one process reuse heap pages malloc has already faulted in,
 *      which hides part of the cost (--in-process shows the difference).
 *   4) memory: heap in use (glibc mallinfo2: uordblks + hblkhd) just before and just after that
 *      open, in that process, divided by the items it queued (the largest of the runs).
 *      Target: at most 64 bytes per queued item; the payloads stay in the segment files.
 *   5) memory while appending: a fresh process appends --memory-items items (default
 *      1,000,000) to an empty store and reports its resident memory's growth (VmRSS and
 *      RssAnon from /proc/self/status) per queued item: the same target, as an operator
 *      measures it.
 *   6) the data path (datapath.c): the store driven in turns as the daemon's owner loop drives
 *      it (append a Submit, dispatch as many items in batches, complete the previous turn's,
 *      one flush), at both levels, in a fresh process: items/s, CPU time and read + write
 *      system calls per item (/proc/self/io), segment files created per second. --phases runs
 *      a subset of 1-6.
 *
 * Baselines, and why: a figure for a store means little on its own (it moves with the disk, the
 * file system and the machine); the same bytes written the plainest way, in the same run and
 * the same directory, give a ratio that travels.
 *   1) pwrite() of entry-sized buffers (the entry size is asked of the store itself, with
 *      store_unflushed_bytes after one append, so it cannot drift from the format) holding the
 *      same id and payload, back to back in one file, with fdatasync() at the same flush points
 *      at the power level and nothing at the process level. It is the floor for "hand these
 *      bytes to the kernel" and for "make them durable with one sync per producer batch". The
 *      store writes one log per model and at the power level syncs every touched segment plus
 *      the LMDB index (a data and a meta-page sync), where the baseline syncs one file: at that
 *      level the ratio is mostly that sync count, a cost of the layout rather than of the
 *      write path.
 *   2) a 4-byte pwrite() at each entry's offset in the baseline file, in the same order, with
 *      fdatasync() at the flush points at the power level.
 *   3) pread() of every segment byte once, 1 MiB at a time: the recovery scan checks the CRC of
 *      every entry, so it touches every byte; the ratio says how close it runs to reading them.
 *   4) the target (64 bytes) and the bytes the segment files hold.
 *
 * Every throughput figure (1-3) is the best of --reps runs, the run least disturbed by the rest
 * of the machine: 1-2 on a fresh store and a fresh file each run, 3 reopening the same store.
 * Store and baseline alternate which goes first; sync() runs between timed phases so one phase's
 * writeback does not land in the next one's timing. Store open/close, item generation, commit and
 * file removal are untimed. Segment files are created (one warm-up append per lane) before timing
 * starts.
 *
 * What it does not measure: returns, the scheduler, NATS, several threads, producers or
 * consumers, latency distributions (throughput only), full disks, faults and damaged stores,
 * memory held by pending (committed, not completed) items, or peak memory during open. Recovery
 * runs on a warm page cache unless --cold asks to sync and drop the store's pages first (best
 * effort: a VM's host may still cache them).
 *
 * This file is the command line and the order of the run; each phase, the workload, the files
 * and the output lines have their own file (storebench.h lists them).
 */
#include "tools/storebench/storebench.h"

#include "common/usage.h"
#include "common/version.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ITEMS            200000ull
#define DEFAULT_POWER_ITEMS      20000ull
#define DEFAULT_PAYLOAD          256ull
#define DEFAULT_FLUSH_EVERY      64ull
#define DEFAULT_LANES            4ull
#define DEFAULT_REPS             3ull
#define DEFAULT_RECOVERY_ENTRIES 1000000ull
#define DEFAULT_RECOVERY_PAYLOAD 32ull
#define DEFAULT_MEMORY_ITEMS     1000000ull
#define DEFAULT_MODELS           1ull
#define DEFAULT_SHAPES           1ull
#define DEFAULT_PATH_ITEMS       200000ull
#define DEFAULT_PATH_DEPTH       16384ull
#define DEFAULT_PATH_BATCH       32ull
#define MAX_QUEUES               (1ull << 20)
#define DEFAULT_DIR              "/tmp"
#define TARGET_BYTES_PER_ITEM    64.0

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]\n"
            "  --items N             items appended and tombstoned at the process level "
            "(default %llu)\n"
            "  --power-items N       the same at the power-loss level (default %llu)\n"
            "  --payload B           payload bytes per item (default %llu; ids are %u bytes)\n"
            "  --flush-every F       store_flush every F appends / tombstones (default %llu)\n"
            "  --models M            models the items are spread over (default %llu)\n"
            "  --shapes S            shapes per model, Zipf popularity (default %llu)\n"
            "  --lanes L             lanes per shape, uniform (default %llu)\n"
            "  --reps R              repetitions of each timed section, best reported "
            "(default %llu)\n"
            "  --recovery-entries N  entries in the recovery store (default %llu)\n"
            "  --recovery-payload B  payload bytes per recovery entry (default %llu)\n"
            "  --recovery-threads T  threads scanning at each recovery open (default 0: the "
            "store's, %u); each open is also timed with 1, alternating\n"
            "  --memory-items N      items appended for the resident-memory figure (default %llu)\n"
            "  --path-items N        items through the data path at the process level (the power "
            "level: at most --power-items; default %llu)\n"
            "  --path-depth D        items queued ahead of the data path's dispatch (default "
            "%llu)\n"
            "  --path-batch B        items per dispatched batch at most (default %llu)\n"
            "  --io auto|plain       io_uring where available (auto, the default) or one system "
            "call per sync\n"
            "  --sync files|fs       the power level's sync: every touched segment (files, the "
            "default) or one syncfs\n"
            "  --dir D               parent of the fresh data directory (default %s)\n"
            "  --keep                keep the data directory\n"
            "  --cold                sync and drop the recovery store's cached pages before "
            "each open\n"
            "  --in-process          time the recovery opens in this process instead of a "
            "fresh one\n"
            "  --phases LIST         phases to run, comma-separated: writes (1-2), recovery "
            "(3-4), memory (5), datapath (6) (default all)\n"
            "  --json                one JSON object on stdout instead of the table\n",
            DEFAULT_ITEMS, DEFAULT_POWER_ITEMS, DEFAULT_PAYLOAD, ID_LEN, DEFAULT_FLUSH_EVERY,
            DEFAULT_MODELS, DEFAULT_SHAPES, DEFAULT_LANES, DEFAULT_REPS, DEFAULT_RECOVERY_ENTRIES,
            DEFAULT_RECOVERY_PAYLOAD, STORE_RECOVERY_THREADS_DEFAULT, DEFAULT_MEMORY_ITEMS,
            DEFAULT_PATH_ITEMS, DEFAULT_PATH_DEPTH, DEFAULT_PATH_BATCH, DEFAULT_DIR);
}

static uint64_t parse_u64(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, PROG ": %s: not a number: %s\n", flag, s);
        exit(2);
    }
    return v;
}

/* --phases: a comma-separated list of writes (1-2), recovery (3-4), memory (5), datapath (6). */
enum { PH_WRITES = 1, PH_RECOVERY = 2, PH_MEMORY = 4, PH_DATAPATH = 8, PH_ALL = 15 };

static unsigned parse_phases(const char *list)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"writes", PH_WRITES},
                 {"recovery", PH_RECOVERY},
                 {"memory", PH_MEMORY},
                 {"datapath", PH_DATAPATH}};
    unsigned bits = 0;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < sizeof(names) / sizeof(names[0]) && strcmp(names[k].name, t) != 0)
            k++;
        if (k == sizeof(names) / sizeof(names[0])) {
            fprintf(stderr,
                    PROG ": --phases: unknown phase %s (writes, recovery, memory, "
                         "datapath)\n",
                    t);
            exit(2);
        }
        bits |= names[k].bit;
    }
    if (bits == 0) {
        fprintf(stderr, PROG ": --phases: no phase named\n");
        exit(2);
    }
    return bits;
}

static void parse_args(int argc, char **argv, opts_t *o)
{
    static const struct {
        const char *flag;
        size_t field;
    } numeric[] = {
        {"--items", offsetof(opts_t, items)},
        {"--power-items", offsetof(opts_t, power_items)},
        {"--payload", offsetof(opts_t, payload)},
        {"--flush-every", offsetof(opts_t, flush_every)},
        {"--lanes", offsetof(opts_t, lanes)},
        {"--models", offsetof(opts_t, models)},
        {"--shapes", offsetof(opts_t, shapes)},
        {"--path-items", offsetof(opts_t, path_items)},
        {"--path-depth", offsetof(opts_t, path_depth)},
        {"--path-batch", offsetof(opts_t, path_batch)},
        {"--reps", offsetof(opts_t, reps)},
        {"--recovery-entries", offsetof(opts_t, recovery_entries)},
        {"--recovery-payload", offsetof(opts_t, recovery_payload)},
        {"--recovery-threads", offsetof(opts_t, recovery_threads)},
        {"--memory-items", offsetof(opts_t, memory_items)},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t k, nk = sizeof(numeric) / sizeof(numeric[0]);
        for (k = 0; k < nk && strcmp(a, numeric[k].flag) != 0; k++)
            ;
        if (k < nk && i + 1 < argc) {
            *(uint64_t *)((char *)o + numeric[k].field) = parse_u64(a, argv[++i]);
        } else if (strcmp(a, "--io") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "auto") == 0 || strcmp(argv[i + 1], "plain") == 0)) {
            sb_io = strcmp(argv[++i], "plain") == 0 ? STORE_IO_PLAIN : STORE_IO_AUTO;
        } else if (strcmp(a, "--sync") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "files") == 0 || strcmp(argv[i + 1], "fs") == 0)) {
            sb_sync = strcmp(argv[++i], "fs") == 0 ? STORE_SYNC_FS : STORE_SYNC_FILES;
        } else if (strcmp(a, "--phases") == 0 && i + 1 < argc) {
            o->phases = parse_phases(argv[++i]);
        } else if (strcmp(a, "--dir") == 0 && i + 1 < argc) {
            o->dir = argv[++i];
        } else if (strcmp(a, "--keep") == 0) {
            o->keep = 1;
        } else if (strcmp(a, "--cold") == 0) {
            o->cold = 1;
        } else if (strcmp(a, "--in-process") == 0) {
            o->in_process = 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--version") == 0) {
            version_print(stdout, PROG);
            exit(0);
        } else {
            usage_unknown_flag(PROG, a);
            exit(USAGE_EXIT);
        }
    }
    if (o->items == 0 || o->items > 100000000ull || o->power_items == 0 ||
        o->power_items > 100000000ull || o->payload > (1ull << 20) || o->flush_every == 0 ||
        o->lanes == 0 || o->models == 0 || o->shapes == 0 ||
        o->models * o->shapes * o->lanes > MAX_QUEUES || o->models > 1000000 ||
        o->shapes > 1000000 || o->lanes > 1000000 || o->reps == 0 || o->reps > 100 ||
        o->recovery_entries == 0 || o->recovery_entries > 1000000000ull ||
        o->recovery_payload > (1ull << 20) || o->recovery_threads > 64 || o->memory_items == 0 ||
        o->memory_items > 1000000000ull || o->path_items == 0 || o->path_items > 100000000ull ||
        o->path_depth > 100000000ull || o->path_batch == 0 || o->path_batch > 65536) {
        fprintf(stderr,
                PROG ": need 1 <= --items, --power-items, --path-items <= 1e8, --payload and "
                     "--recovery-payload <= 1 MiB, --recovery-threads <= 64, --flush-every >= 1, "
                     "--models * --shapes * "
                     "--lanes between 1 and 2^20, 1 <= --reps <= 100, 1 <= --recovery-entries, "
                     "--memory-items <= 1e9, --path-depth <= 1e8, 1 <= --path-batch <= 65536\n");
        exit(2);
    }
}

/* The text or JSON lines of 3)-4). */
static void print_recovery(const opts_t *o, const recovery_bench_t *rb)
{
    const recovery_t *m = &rb->all_live;
    double per_item = m->queued ? (double)m->heap_delta / (double)m->queued : 0.0;
    double per_item_third =
        rb->third.queued ? (double)rb->third.heap_delta / (double)rb->third.queued : 0.0;
    int mem_ok = m->heap_ok && per_item <= TARGET_BYTES_PER_ITEM;
    uint64_t payload_bytes = rb->entries * o->recovery_payload;
    if (o->json) {
        printf("\"recovery\":{\"entries\":%" PRIu64 ",\"entry_bytes\":%" PRIu64
               ",\"payload_bytes\":%" PRIu64 ",\"segment_file_bytes\":%" PRIu64
               ",\"cold\":%s,\"baseline_read_ns\":%" PRIu64 ",\"baseline_read_bytes\":%" PRIu64 ",",
               rb->entries, rb->entry_size, o->recovery_payload, rb->segment_bytes,
               o->cold ? "true" : "false", rb->read_ns, rb->read_bytes);
        report_open_json("all_live", &rb->all_live, rb);
        printf(",");
        report_open_json("third_tombstoned", &rb->third, rb);
        printf("},\"memory\":{\"measured\":%s,\"heap_before_bytes\":%" PRIu64
               ",\"heap_delta_bytes\":%" PRIu64 ",\"queued_items\":%" PRIu64
               ",\"bytes_per_queued_item\":%.2f,\"target_bytes_per_item\":%.0f,"
               "\"target_met\":%s},",
               m->heap_ok ? "true" : "false", m->heap_before, m->heap_delta, m->queued, per_item,
               TARGET_BYTES_PER_ITEM, mem_ok ? "true" : "false");
        return;
    }
    printf("3) recovery: store_open_disk on %" PRIu64 " entries of %" PRIu64 " B (payload %" PRIu64
           " B), %" PRIu64 " lanes, process level, %s page cache; built in %.1f s (untimed)\n",
           rb->entries, rb->entry_size, o->recovery_payload, o->models * o->shapes * o->lanes,
           o->cold ? "dropped" : "warm", (double)rb->build_ns / 1e9);
    report_open_text("all live", &rb->all_live, rb);
    report_open_text("a third tombstoned", &rb->third, rb);
    printf("  %-19s pread of %.1f MB of segment files: %.1f ms, %.1f MB/s\n", "baseline",
           (double)rb->read_bytes / 1e6, (double)rb->read_ns / 1e6,
           report_per_sec(rb->read_bytes, rb->read_ns) / 1e6);
    if (m->heap_ok) {
        printf("4) memory: heap in use (mallinfo2 uordblks+hblkhd) %.1f MB before the open, "
               "+%.1f MB after it, for %" PRIu64 " queued items: %.1f B per queued item "
               "(target <= %.0f: %s)\n"
               "  a third tombstoned: +%.1f MB for %" PRIu64 " queued items: %.1f B per "
               "queued item\n"
               "  payloads stay on disk: %.1f MB of payload (%.1f MB of segment files) "
               "against %.1f MB of heap (%.1f%% of the file bytes)\n",
               (double)m->heap_before / 1e6, (double)m->heap_delta / 1e6, m->queued, per_item,
               TARGET_BYTES_PER_ITEM, mem_ok ? "MET" : "NOT MET",
               (double)rb->third.heap_delta / 1e6, rb->third.queued, per_item_third,
               (double)payload_bytes / 1e6, (double)rb->segment_bytes / 1e6,
               (double)m->heap_delta / 1e6,
               rb->segment_bytes ? 100.0 * (double)m->heap_delta / (double)rb->segment_bytes : 0.0);
    } else {
        printf("4) memory: not measured (needs glibc >= 2.33 for mallinfo2)\n");
    }
}

static void print_memory(const opts_t *o, const memory_t *mm)
{
    double rss_per = mm->rss_after > mm->rss_before
                         ? (double)(mm->rss_after - mm->rss_before) / (double)mm->queued
                         : 0.0;
    double anon_per = mm->anon_after > mm->anon_before
                          ? (double)(mm->anon_after - mm->anon_before) / (double)mm->queued
                          : 0.0;
    double heap_per = mm->heap_after > mm->heap_before
                          ? (double)(mm->heap_after - mm->heap_before) / (double)mm->queued
                          : 0.0;
    int rss_ok = mm->rss_after != 0 && rss_per <= TARGET_BYTES_PER_ITEM;
    if (o->json) {
        printf("\"memory_appending\":{\"queued_items\":%" PRIu64 ",\"rss_growth_bytes\":%" PRIu64
               ",\"rss_bytes_per_queued_item\":%.2f,\"anon_bytes_per_queued_item\":%.2f,"
               "\"heap_bytes_per_queued_item\":%.2f,\"target_met\":%s},",
               mm->queued, mm->rss_after > mm->rss_before ? mm->rss_after - mm->rss_before : 0,
               rss_per, anon_per, heap_per, rss_ok ? "true" : "false");
        return;
    }
    printf("5) memory while appending %" PRIu64 " items of %" PRIu64 " B payload over %" PRIu64
           " lanes (flush every %" PRIu64 ", a fresh process): resident +%.1f MB = %.1f B per "
           "queued item (target <= %.0f: %s); anonymous +%.1f MB = %.1f B; heap +%.1f MB = "
           "%.1f B\n",
           mm->queued, o->recovery_payload, o->models * o->shapes * o->lanes, o->flush_every,
           (double)(mm->rss_after - mm->rss_before) / 1e6, rss_per, TARGET_BYTES_PER_ITEM,
           rss_ok ? "MET" : "NOT MET", (double)(mm->anon_after - mm->anon_before) / 1e6, anon_per,
           (double)(mm->heap_after - mm->heap_before) / 1e6, heap_per);
}

static void print_datapath(const opts_t *o, const datapath_t *dp, int first)
{
    double secs = (double)dp->wall_ns / 1e9;
    if (o->json) {
        printf("%s\"%s\":{\"items\":%" PRIu64 ",\"turns\":%" PRIu64 ",\"batches\":%" PRIu64
               ",\"items_per_s\":%.0f,\"cpu_us_per_item\":%.3f,\"rw_syscalls\":%" PRIu64
               ",\"rw_syscalls_per_item\":%.4f,\"files_created\":%" PRIu64
               ",\"files_created_per_s\":%.2f,\"files_at_end\":%" PRIu64
               ",\"rss_file_bytes\":%" PRIu64 ",\"write_bytes_per_item\":%.1f}",
               first ? "" : ",", dp->name, dp->items, dp->turns, dp->batches,
               report_per_sec(dp->items, dp->wall_ns), (double)dp->cpu_ns / 1e3 / (double)dp->items,
               dp->syscalls, (double)dp->syscalls / (double)dp->items, dp->files_created,
               secs > 0 ? (double)dp->files_created / secs : 0.0, dp->files_at_end, dp->rss_file,
               (double)dp->write_bytes / (double)dp->items);
        return;
    }
    printf("  %-7s %9" PRIu64 " %7" PRIu64 " %8" PRIu64 " %10.0f %9.2f %10.4f %9" PRIu64
           " %8.2f %8" PRIu64 " %8.1f %9.0f\n",
           dp->name, dp->items, dp->turns, dp->batches, report_per_sec(dp->items, dp->wall_ns),
           (double)dp->cpu_ns / 1e3 / (double)dp->items, (double)dp->syscalls / (double)dp->items,
           dp->files_created, secs > 0 ? (double)dp->files_created / secs : 0.0, dp->files_at_end,
           (double)dp->rss_file / 1e6, (double)dp->write_bytes / (double)dp->items);
}

int main(int argc, char **argv)
{
    opts_t o = {
        .items = DEFAULT_ITEMS,
        .power_items = DEFAULT_POWER_ITEMS,
        .payload = DEFAULT_PAYLOAD,
        .flush_every = DEFAULT_FLUSH_EVERY,
        .lanes = DEFAULT_LANES,
        .reps = DEFAULT_REPS,
        .recovery_entries = DEFAULT_RECOVERY_ENTRIES,
        .recovery_payload = DEFAULT_RECOVERY_PAYLOAD,
        .memory_items = DEFAULT_MEMORY_ITEMS,
        .models = DEFAULT_MODELS,
        .shapes = DEFAULT_SHAPES,
        .path_items = DEFAULT_PATH_ITEMS,
        .path_depth = DEFAULT_PATH_DEPTH,
        .path_batch = DEFAULT_PATH_BATCH,
        .dir = DEFAULT_DIR,
        .phases = PH_ALL,
    };
    if (argc == 4 && strcmp(argv[1], "--recovery-child") == 0)
        return recovery_child_run(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
    if (argc == 9 && strcmp(argv[1], "--memory-child") == 0)
        return memory_child_run(argv[2], strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
                                strtoull(argv[5], NULL, 10), strtoull(argv[6], NULL, 10),
                                strtoull(argv[7], NULL, 10), strtoull(argv[8], NULL, 10));
    if (argc >= 2 && strcmp(argv[1], "--datapath-child") == 0)
        return datapath_child_run(argc, argv);
    parse_args(argc, argv, &o);

    char run_dir[4096];
    if (snprintf(run_dir, sizeof(run_dir), "%s/" PROG "-XXXXXX", o.dir) >= (int)sizeof(run_dir))
        sb_die("--dir", "path too long");
    if (mkdtemp(run_dir) == NULL)
        sb_die(run_dir, strerror(errno));

    gen_t g;
    gen_init(&g, (size_t)o.payload, (unsigned)o.models, (unsigned)o.shapes, (unsigned)o.lanes);
    uint64_t entry_size = gen_entry_size(run_dir, &g);
    level_t levels[2] = {
        {.name = "process", .dur = STORE_DURABLE_PROCESS, .n = (size_t)o.items},
        {.name = "power", .dur = STORE_DURABLE_POWER, .n = (size_t)o.power_items},
    };

    if (!o.json) {
        printf(PROG ": the disk store beside plain pwrite() of the same bytes, same directory, "
                    "same run\n"
                    "best of %" PRIu64 " runs for every throughput figure (fresh store and file "
                    "each run); ratios are store/baseline throughput (1.0 = as fast as the "
                    "baseline)\n"
                    "data directory: %s (%s at exit)\n"
                    "items: %" PRIu64 " model(s) x %" PRIu64 " shape(s) (Zipf) x %" PRIu64
                    " lane(s) (uniform) = %" PRIu64 " lanes; id %u B, payload %" PRIu64
                    " B = %" PRIu64 " B per entry on disk; store_flush every %" PRIu64
                    " appends or tombstones\n"
                    "baselines: 1-2) pwrite() of the entry-sized buffers back to back in one file "
                    "(tombstones: 4 bytes at each entry), fdatasync() at the flush points at the "
                    "power level only\n"
                    "           3) pread() of every segment byte once, 1 MiB at a time (%s page "
                    "cache); each timed open in %s\n"
                    "store I/O: %s, power-level sync: %s\n\n",
               o.reps, run_dir, o.keep ? "kept" : "removed", o.models, o.shapes, o.lanes, g.queues,
               ID_LEN, o.payload, entry_size, o.flush_every, o.cold ? "dropped" : "warm",
               o.in_process ? "this process" : "a fresh process",
               sb_io == STORE_IO_PLAIN ? "plain system calls" : "io_uring where available",
               sb_sync == STORE_SYNC_FS ? "one syncfs" : "fdatasync of every touched segment");
        fflush(stdout);
    } else {
        printf("{\"reps\":%" PRIu64 ",\"best_of_reps\":true,\"dir\":\"%s\",\"models\":%" PRIu64
               ",\"shapes\":%" PRIu64 ",\"lanes\":%" PRIu64
               ",\"id_bytes\":%u,\"payload_bytes\":%" PRIu64 ",\"entry_bytes\":%" PRIu64
               ",\"flush_every\":%" PRIu64 ",",
               o.reps, run_dir, o.models, o.shapes, g.queues, ID_LEN, o.payload, entry_size,
               o.flush_every);
    }
    if (o.phases & PH_WRITES) {
        if (!o.json)
            printf("1) appends    level   side         items        items/s       MB/s  "
                   "store/base\n");
        for (int k = 0; k < 2; k++) {
            writes_bench(&o, &g, entry_size, run_dir, &levels[k]);
            if (!o.json) {
                report_level_text(&levels[k], entry_size);
                fflush(stdout);
            }
        }
        if (!o.json) {
            printf("2) tombstones level   side         items   tombstones/s             "
                   "store/base\n");
            for (int k = 0; k < 2; k++)
                report_tomb_text(&levels[k]);
            fflush(stdout);
        } else {
            report_level_json(&levels[0], entry_size, 0);
            report_level_json(&levels[1], entry_size, 0);
        }
    }
    gen_fini(&g);

    if (o.phases & PH_RECOVERY) {
        recovery_bench_t rb = {0};
        recovery_bench(&o, argv[0], run_dir, &rb);
        print_recovery(&o, &rb);
        fflush(stdout);
    }
    if (o.phases & PH_MEMORY) {
        memory_t mm;
        memory_bench(&o, argv[0], run_dir, &mm);
        print_memory(&o, &mm);
        fflush(stdout);
    }
    if (o.phases & PH_DATAPATH) {
        if (!o.json)
            printf("6) data path (append a Submit, dispatch as many, complete the previous turn's, "
                   "one flush per turn; %" PRIu64 " queued ahead, batches of <= %" PRIu64
                   ", a fresh process; CPU and system calls of the whole process)\n"
                   "  level       items   turns  batches    items/s   cpu us/it  rw sys/it  "
                   "files new   new/s  at end  file MB  B written/it\n",
                   o.path_depth, o.path_batch);
        else
            printf("\"datapath\":{\"depth\":%" PRIu64 ",\"batch\":%" PRIu64 ",", o.path_depth,
                   o.path_batch);
        for (int k = 0; k < 2; k++) {
            datapath_t dp;
            datapath_bench(&o, argv[0], run_dir, k ? STORE_DURABLE_POWER : STORE_DURABLE_PROCESS,
                           &dp);
            print_datapath(&o, &dp, k == 0);
            fflush(stdout);
        }
        if (o.json)
            printf("},");
    }
    if (!o.json)
        printf("store warnings and errors logged: %lu\n", sb_store_warnings);
    else
        printf("\"io\":\"%s\",\"sync\":\"%s\",\"store_warnings\":%lu}\n",
               sb_io == STORE_IO_PLAIN ? "plain" : "auto",
               sb_sync == STORE_SYNC_FS ? "fs" : "files", sb_store_warnings);
    if (!o.keep)
        files_remove(run_dir);
    return 0;
}
