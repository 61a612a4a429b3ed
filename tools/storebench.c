/*
 * storebench.c - lanesched-storebench: the disk store's write, completion, recovery and memory
 * costs, each beside a baseline measured in the same run on the same file system.
 *
 * What it measures (one model, one shape, --lanes lanes, items spread over them by a seeded
 * PRNG; every item has a 16-byte id, a --payload byte payload and a token count):
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
 *
 * Baselines, and why: a figure for a store means little on its own (it moves with the disk, the
 * file system and the machine); the same bytes written the plainest way, in the same run and
 * the same directory, give a ratio that travels.
 *   1) pwrite() of entry-sized buffers (the entry size is asked of the store itself, with
 *      store_unflushed_bytes after one append, so it cannot drift from the format) holding the
 *      same id and payload, back to back in one file, with fdatasync() at the same flush points
 *      at the power level and nothing at the process level. It is the floor for "hand these
 *      bytes to the kernel" and for "make them durable with one sync per producer batch". The
 *      store writes one file per lane and at the power level syncs every touched segment plus
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
 * What it does not measure: peek and commit (reads), returns, the scheduler, NATS, several
 * threads, producers or consumers, latency distributions (throughput only), segment roll-over
 * and whole-file deletion (the defaults stay under the 64 MiB segment cap), more lanes than the
 * store's 256-file descriptor cache, full disks, faults and damaged stores, memory held by
 * pending (committed, not completed) items, or peak memory during open. Recovery runs on a warm
 * page cache unless --cold asks to sync and drop the store's pages first (best effort: a VM's
 * host may still cache them).
 */
#define _XOPEN_SOURCE 700 /* sync() */

#include "common/clock.h"
#include "common/rng.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_ITEMS            200000ull
#define DEFAULT_POWER_ITEMS      20000ull
#define DEFAULT_PAYLOAD          256ull
#define DEFAULT_FLUSH_EVERY      64ull
#define DEFAULT_LANES            4ull
#define DEFAULT_REPS             3ull
#define DEFAULT_RECOVERY_ENTRIES 1000000ull
#define DEFAULT_RECOVERY_PAYLOAD 32ull
#define DEFAULT_DIR              "/tmp"
#define SEED                     42ull
#define ID_LEN                   16u
#define MAX_TOKENS               4096u
#define TARGET_BYTES_PER_ITEM    64.0
#define PEEK_CHUNK               256u
#define READ_CHUNK               (1u << 20)
#define MODEL                    "bench-model"
#define SIGNATURE                0x5eedc0ffee15600dull
#define PROG                     "lanesched-storebench"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define HAVE_MALLINFO2 1
#else
#define HAVE_MALLINFO2 0
#endif

typedef struct {
    uint64_t items, power_items, payload, flush_every, lanes, reps;
    uint64_t recovery_entries, recovery_payload;
    const char *dir;
    int keep, json, cold, in_process;
} opts_t;

/* ------------------------------------------------------------------------------------------ */
/* Small helpers.                                                                              */

static void die(const char *what, const char *why)
{
    fprintf(stderr, PROG ": %s: %s\n", what, why);
    exit(2);
}

static void check(store_status_t st, const char *what)
{
    if (st != STORE_OK)
        die(what, store_status_str(st));
}

/* snprintf into a path buffer; a path that does not fit is fatal, never truncated. */
static void pathf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void pathf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size)
        die("path", "too long");
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        die("malloc", "out of memory");
    return p;
}

static double per_sec(uint64_t n, uint64_t ns)
{
    return ns ? (double)n * 1e9 / (double)ns : 0.0;
}

static double ratio(uint64_t num_ns, uint64_t den_ns)
{
    return den_ns ? (double)num_ns / (double)den_ns : 0.0;
}

/* Heap in use, all of it malloc'd (the benchmark is single-threaded: one arena). */
static int heap_in_use(uint64_t *out)
{
#if HAVE_MALLINFO2
    struct mallinfo2 mi = mallinfo2();
    *out = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
    return 1;
#else
    *out = 0;
    return 0;
#endif
}

/* Store log lines: warnings and errors go to stderr and are counted; info is dropped (recovery
 * logs one line per open). */
static unsigned long store_warnings;

static void bench_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level < STORE_LOG_WARN)
        return;
    store_warnings++;
    fprintf(stderr, PROG ": store %s: %s\n", level == STORE_LOG_ERROR ? "error" : "warning", msg);
}

static store_t *open_store(const char *dir, store_durability_t dur, store_recovery_t *rep)
{
    store_disk_config_t cfg = {.dir = dir, .durability = dur, .log = bench_log};
    store_t *s = NULL;
    check(store_open_disk(&cfg, rep, &s), "store_open_disk");
    return s;
}

static void open_queues(store_t *s, unsigned lanes, store_queue_t **qs)
{
    for (unsigned l = 0; l < lanes; l++) {
        store_key_t key = {.model = MODEL, .signature = SIGNATURE, .lane = l};
        check(store_queue_open(s, &key, &qs[l]), "store_queue_open");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Files: a post-order walk serves removal, eviction and size sums.                           */

typedef int (*walk_fn)(const char *path, int is_dir, void *ctx);

static int walk(const char *path, walk_fn fn, void *ctx)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return -1;
    if (!S_ISDIR(sb.st_mode))
        return fn(path, 0, ctx);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -1;
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(dir)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char sub[4096];
        if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub)) {
            rc = -1;
            break;
        }
        rc = walk(sub, fn, ctx);
    }
    closedir(dir);
    return rc == 0 ? fn(path, 1, ctx) : rc;
}

static int rm_one(const char *path, int is_dir, void *ctx)
{
    (void)ctx;
    return is_dir ? rmdir(path) : unlink(path);
}

static void rm_tree(const char *path)
{
    if (walk(path, rm_one, NULL) != 0 && errno != ENOENT)
        fprintf(stderr, PROG ": cannot remove %s: %s\n", path, strerror(errno));
}

static int size_one(const char *path, int is_dir, void *ctx)
{
    struct stat sb;
    if (!is_dir && stat(path, &sb) == 0)
        *(uint64_t *)ctx += (uint64_t)sb.st_size;
    return 0;
}

static uint64_t tree_bytes(const char *path)
{
    uint64_t total = 0;
    walk(path, size_one, &total);
    return total;
}

/* Writes a file's dirty pages back and asks the kernel to drop its cached pages. */
static int evict_one(const char *path, int is_dir, void *ctx)
{
    (void)ctx;
    if (is_dir)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return 0;
}

static void evict_tree(const char *path)
{
    walk(path, evict_one, NULL);
}

/* Baseline for recovery: pread of every file in the directory, READ_CHUNK at a time. */
typedef struct {
    uint8_t *buf;
    uint64_t bytes;
} read_ctx_t;

static int read_one(const char *path, int is_dir, void *ctx)
{
    read_ctx_t *c = ctx;
    if (is_dir)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    for (off_t off = 0;;) {
        ssize_t r = pread(fd, c->buf, READ_CHUNK, off);
        if (r < 0) {
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        c->bytes += (uint64_t)r;
        off += r;
    }
    close(fd);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The workload: item i is a pure function of (seed, i), so a run can be regenerated.          */

typedef struct {
    size_t payload_len;
    unsigned lanes;
    uint8_t *pool; /* random bytes payloads are sliced from */
    size_t pool_len;
    uint64_t arrival0;
} gen_t;

static void gen_init(gen_t *g, size_t payload_len, unsigned lanes)
{
    g->payload_len = payload_len;
    g->lanes = lanes;
    g->pool_len = payload_len * 2 > 65536 ? payload_len * 2 : 65536;
    g->pool = xmalloc(g->pool_len);
    uint64_t st = SEED;
    for (size_t i = 0; i < g->pool_len; i++)
        g->pool[i] = (uint8_t)rng_splitmix64(&st);
    g->arrival0 = clock_wall_ns();
}

static void gen_fini(gen_t *g)
{
    free(g->pool);
}

/* Fills *it (id written to id[ID_LEN], payload a view into the pool) and the item's lane. */
static void gen_item(const gen_t *g, uint64_t i, store_item_t *it, uint8_t *id, uint32_t *lane)
{
    uint64_t st = SEED ^ (i * 0xd1b54a32d192ed03ull);
    uint64_t a = rng_splitmix64(&st), b = rng_splitmix64(&st), c = rng_splitmix64(&st);
    memcpy(id, &a, 8);
    memcpy(id + 8, &b, 8);
    *lane = (uint32_t)(c % g->lanes);
    *it = (store_item_t){
        .id = id,
        .id_len = ID_LEN,
        .payload = g->pool + (size_t)((c >> 16) % (g->pool_len - g->payload_len + 1)),
        .payload_len = g->payload_len,
        .tokens = 1 + (uint32_t)((c >> 40) % MAX_TOKENS),
        .arrival_ns = g->arrival0 + i * 1000,
    };
}

typedef struct {
    size_t n;
    store_item_t *items;
    uint32_t *lane;
    uint8_t *ids;
} workload_t;

static void workload_init(workload_t *w, const gen_t *g, size_t n)
{
    w->n = n;
    w->items = xmalloc(n * sizeof(*w->items));
    w->lane = xmalloc(n * sizeof(*w->lane));
    w->ids = xmalloc(n * ID_LEN);
    for (size_t i = 0; i < n; i++)
        gen_item(g, i, &w->items[i], w->ids + i * ID_LEN, &w->lane[i]);
}

static void workload_fini(workload_t *w)
{
    free(w->items);
    free(w->lane);
    free(w->ids);
}

/* Bytes one entry takes in a segment, asked of the store: unflushed bytes after one append. */
static uint64_t probe_entry_size(const char *run_dir, const gen_t *g)
{
    char dir[4096];
    pathf(dir, sizeof(dir), "%s/probe", run_dir);
    store_t *s = open_store(dir, STORE_DURABLE_PROCESS, NULL);
    store_queue_t *q;
    open_queues(s, 1, &q);
    store_item_t it;
    uint8_t id[ID_LEN];
    uint32_t lane;
    gen_item(g, 0, &it, id, &lane);
    check(store_append(s, q, &it, NULL), "store_append (probe)");
    uint64_t size = store_unflushed_bytes(s);
    store_close(s);
    rm_tree(dir);
    if (size < ID_LEN + g->payload_len)
        die("probe", "store_unflushed_bytes after one append is smaller than the item");
    return size;
}

/* ------------------------------------------------------------------------------------------ */
/* 1) and 2): appends then tombstones, store and baseline.                                     */

typedef struct {
    uint64_t append_ns, tomb_ns;
} phase_ns_t;

/* Commits everything queued in q (untimed setup for the tombstone phase). */
static void commit_all(store_t *s, store_queue_t *q)
{
    store_view_t views[PEEK_CHUNK];
    store_ref_t refs[PEEK_CHUNK];
    for (;;) {
        size_t got = 0;
        check(store_peek(s, q, views, PEEK_CHUNK, &got), "store_peek");
        if (got == 0)
            return;
        for (size_t i = 0; i < got; i++)
            refs[i] = views[i].ref;
        check(store_commit(s, q, refs, got), "store_commit");
    }
}

static phase_ns_t run_store(const opts_t *o, const workload_t *w, const gen_t *g,
                            store_durability_t dur, const char *dir)
{
    unsigned lanes = (unsigned)o->lanes;
    size_t n = w->n, f = (size_t)o->flush_every;
    store_t *s = open_store(dir, dur, NULL);
    store_queue_t **qs = xmalloc(lanes * sizeof(*qs));
    open_queues(s, lanes, qs);
    /* Warm-up, untimed: one item per lane creates the lane's segment file. */
    store_ref_t *warm = xmalloc(lanes * sizeof(*warm));
    for (unsigned l = 0; l < lanes; l++) {
        store_item_t it;
        uint8_t id[ID_LEN];
        uint32_t lane;
        gen_item(g, UINT64_MAX - l, &it, id, &lane);
        check(store_append(s, qs[l], &it, &warm[l]), "store_append (warm-up)");
    }
    check(store_flush(s), "store_flush (warm-up)");
    store_ref_t *refs = xmalloc(n * sizeof(*refs));
    sync();

    uint64_t t0 = clock_mono_ns();
    for (size_t i = 0; i < n; i++) {
        store_status_t st = store_append(s, qs[w->lane[i]], &w->items[i], &refs[i]);
        if (st != STORE_OK)
            die("store_append", store_status_str(st));
        if ((i + 1) % f == 0 && (st = store_flush(s)) != STORE_OK)
            die("store_flush", store_status_str(st));
    }
    if (n % f != 0)
        check(store_flush(s), "store_flush");
    uint64_t t1 = clock_mono_ns();

    uint64_t queued = 0;
    for (unsigned l = 0; l < lanes; l++) {
        uint64_t items;
        store_queue_count(qs[l], &items, NULL);
        queued += items;
    }
    if (queued != n + lanes)
        die("appends", "the store does not hold every appended item");
    /* Untimed: commit everything, complete the warm-up items, let writeback finish. */
    for (unsigned l = 0; l < lanes; l++)
        commit_all(s, qs[l]);
    for (unsigned l = 0; l < lanes; l++)
        check(store_tombstone(s, warm[l], NULL), "store_tombstone (warm-up)");
    check(store_flush(s), "store_flush");
    if (store_pending_count(s) != n)
        die("commit", "not every item is pending");
    sync();

    uint64_t t2 = clock_mono_ns();
    for (size_t i = 0; i < n; i++) {
        int completed = 0;
        store_status_t st = store_tombstone(s, refs[i], &completed);
        if (st != STORE_OK)
            die("store_tombstone", store_status_str(st));
        if (!completed)
            die("store_tombstone", "an item was already complete");
        if ((i + 1) % f == 0 && (st = store_flush(s)) != STORE_OK)
            die("store_flush", store_status_str(st));
    }
    if (n % f != 0)
        check(store_flush(s), "store_flush");
    uint64_t t3 = clock_mono_ns();

    if (store_pending_count(s) != 0)
        die("tombstones", "items still pending after completing all of them");
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
        die("baseline pwrite", errno ? strerror(errno) : "short write");
}

static void xfdatasync(int fd)
{
    if (fdatasync(fd) != 0)
        die("baseline fdatasync", strerror(errno));
}

static phase_ns_t run_baseline(const opts_t *o, const workload_t *w, uint64_t entry_size,
                               store_durability_t dur, const char *path)
{
    size_t n = w->n, f = (size_t)o->flush_every;
    int power = dur == STORE_DURABLE_POWER;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        die(path, strerror(errno));
    uint8_t *buf = calloc(1, entry_size);
    if (buf == NULL)
        die("calloc", "out of memory");
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

typedef struct {
    const char *name;
    store_durability_t dur;
    size_t n;
    phase_ns_t store, base; /* best of the repetitions, per phase */
} level_t;

static void bench_level(const opts_t *o, const gen_t *g, uint64_t entry_size, const char *run_dir,
                        level_t *lv)
{
    workload_t w;
    workload_init(&w, g, lv->n);
    lv->store = lv->base = (phase_ns_t){UINT64_MAX, UINT64_MAX};
    for (uint64_t rep = 0; rep < o->reps; rep++) {
        char sdir[4096], bpath[4096];
        pathf(sdir, sizeof(sdir), "%s/store-%s-%" PRIu64, run_dir, lv->name, rep);
        pathf(bpath, sizeof(bpath), "%s/baseline-%s-%" PRIu64 ".dat", run_dir, lv->name, rep);
        phase_ns_t s, b;
        if (rep % 2 == 0) {
            s = run_store(o, &w, g, lv->dur, sdir);
            b = run_baseline(o, &w, entry_size, lv->dur, bpath);
        } else {
            b = run_baseline(o, &w, entry_size, lv->dur, bpath);
            s = run_store(o, &w, g, lv->dur, sdir);
        }
        if (!o->keep) {
            rm_tree(sdir);
            rm_tree(bpath);
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

/* ------------------------------------------------------------------------------------------ */
/* 3) and 4): recovery and memory.                                                             */

typedef struct {
    uint64_t live, tombstoned, segments, queued;
    uint64_t elapsed_ns, wall_ns; /* best of the repetitions, each */
    uint64_t heap_before, heap_delta;
    int heap_ok;
} recovery_t;

/* One timed open of the store in dir, as the recovery child (or --in-process) runs it. */
typedef struct {
    uint64_t live, tombstoned, segments, queued, elapsed_ns, wall_ns, heap_before, heap_after;
    uint64_t heap_ok, warnings;
} open_once_t;

#define OPEN_ONCE_FIELDS 10

static void open_once(const char *dir, open_once_t *out)
{
    store_recovery_t rr;
    store_t *s = NULL;
    store_disk_config_t cfg = {.dir = dir, .durability = STORE_DURABLE_PROCESS, .log = bench_log};
    uint64_t h0, h1;
    int ok = heap_in_use(&h0);
    uint64_t t0 = clock_mono_ns();
    store_status_t st = store_open_disk(&cfg, &rr, &s);
    uint64_t t1 = clock_mono_ns();
    ok = ok && heap_in_use(&h1);
    check(st, "store_open_disk (recovery)");
    uint64_t queued = 0;
    for (store_queue_t *q = NULL; store_queue_next(s, q, &q, NULL, NULL);) {
        uint64_t items;
        store_queue_count(q, &items, NULL);
        queued += items;
    }
    store_close(s);
    if (queued != rr.entries_live)
        die("recovery", "queued items differ from the live entries recovery reported");
    *out = (open_once_t){
        rr.entries_live, rr.entries_tombstoned, rr.segments, queued, rr.elapsed_ns, t1 - t0, h0, h1,
        (uint64_t)ok,    store_warnings};
}

/* --recovery-child DIR: one open in this fresh process, the result on stdout. */
static int recovery_child(const char *dir)
{
    open_once_t r;
    open_once(dir, &r);
    printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
           " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
           r.live, r.tombstoned, r.segments, r.queued, r.elapsed_ns, r.wall_ns, r.heap_before,
           r.heap_after, r.heap_ok, r.warnings);
    return fflush(stdout) == 0 ? 0 : 2;
}

/* Runs open_once in a fresh process: this program re-executed with --recovery-child. */
static void open_in_child(const char *argv0, const char *dir, open_once_t *out)
{
    int fds[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0)
        die("pipe", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        die("fork", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        if (dup2(fds[1], STDOUT_FILENO) < 0)
            _exit(127);
        close(fds[1]);
        execl("/proc/self/exe", argv0, "--recovery-child", dir, (char *)NULL);
        execlp(argv0, argv0, "--recovery-child", dir, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[512];
    size_t len = 0;
    for (ssize_t r;
         len + 1 < sizeof(buf) && (r = read(fds[0], buf + len, sizeof(buf) - 1 - len));) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("reading the recovery child", strerror(errno));
        }
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            die("waitpid", strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("recovery child", "failed (use --in-process where this program cannot re-execute "
                              "itself)");
    if (sscanf(buf,
               "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
               " %" SCNu64 " %" SCNu64 " %" SCNu64,
               &out->live, &out->tombstoned, &out->segments, &out->queued, &out->elapsed_ns,
               &out->wall_ns, &out->heap_before, &out->heap_after, &out->heap_ok,
               &out->warnings) != OPEN_ONCE_FIELDS)
        die("recovery child", "unreadable result");
}

static void bench_open(const opts_t *o, const char *argv0, const char *dir, recovery_t *r)
{
    *r = (recovery_t){.elapsed_ns = UINT64_MAX, .wall_ns = UINT64_MAX};
    for (uint64_t rep = 0; rep < o->reps; rep++) {
        if (o->cold)
            evict_tree(dir);
        open_once_t one;
        if (o->in_process) {
            open_once(dir, &one);
        } else {
            open_in_child(argv0, dir, &one);
            store_warnings += one.warnings;
        }
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
    read_ctx_t c = {.buf = xmalloc(READ_CHUNK)};
    uint64_t best = UINT64_MAX;
    for (uint64_t rep = 0; rep < o->reps; rep++) {
        if (o->cold)
            evict_tree(seg_dir);
        c.bytes = 0;
        uint64_t t0 = clock_mono_ns();
        if (walk(seg_dir, read_one, &c) != 0)
            die("baseline read", strerror(errno));
        uint64_t dt = clock_mono_ns() - t0;
        if (dt < best)
            best = dt;
    }
    free(c.buf);
    *out_bytes = c.bytes;
    return best;
}

typedef struct {
    uint64_t entries, entry_size, segment_bytes, build_ns, tombstoned;
    recovery_t all_live, third;
    uint64_t read_ns, read_bytes; /* baseline, best of the repetitions */
} recovery_bench_t;

static void bench_recovery(const opts_t *o, const char *argv0, const char *run_dir,
                           recovery_bench_t *rb)
{
    unsigned lanes = (unsigned)o->lanes;
    size_t f = (size_t)o->flush_every;
    char dir[4096], seg_dir[4200];
    pathf(dir, sizeof(dir), "%s/recovery", run_dir);
    pathf(seg_dir, sizeof(seg_dir), "%s/segments", dir);
    gen_t g;
    gen_init(&g, (size_t)o->recovery_payload, lanes);
    rb->entries = o->recovery_entries;
    rb->entry_size = probe_entry_size(run_dir, &g);

    /* Build, untimed as a benchmark (its time is printed for orientation only). */
    uint64_t t0 = clock_mono_ns();
    store_t *s = open_store(dir, STORE_DURABLE_PROCESS, NULL);
    store_queue_t **qs = xmalloc(lanes * sizeof(*qs));
    open_queues(s, lanes, qs);
    for (uint64_t i = 0; i < rb->entries; i++) {
        store_item_t it;
        uint8_t id[ID_LEN];
        uint32_t lane;
        gen_item(&g, i, &it, id, &lane);
        store_status_t st = store_append(s, qs[lane], &it, NULL);
        if (st != STORE_OK)
            die("store_append (recovery build)", store_status_str(st));
        if ((i + 1) % f == 0 && (st = store_flush(s)) != STORE_OK)
            die("store_flush (recovery build)", store_status_str(st));
    }
    check(store_flush(s), "store_flush (recovery build)");
    store_close(s);
    free(qs);
    gen_fini(&g);
    rb->build_ns = clock_mono_ns() - t0;
    rb->segment_bytes = tree_bytes(seg_dir);
    sync();

    bench_open(o, argv0, dir, &rb->all_live);
    if (rb->all_live.live != rb->entries)
        die("recovery", "the store did not recover every entry it was given");
    rb->read_ns = bench_read(o, seg_dir, &rb->read_bytes);

    /* Complete the oldest third of every lane, untimed. */
    s = open_store(dir, STORE_DURABLE_PROCESS, NULL);
    store_view_t views[PEEK_CHUNK];
    store_ref_t refs[PEEK_CHUNK];
    rb->tombstoned = 0;
    for (store_queue_t *q = NULL; store_queue_next(s, q, &q, NULL, NULL);) {
        uint64_t items;
        store_queue_count(q, &items, NULL);
        for (uint64_t want = items / 3; want > 0;) {
            size_t got = 0;
            check(store_peek(s, q, views, want < PEEK_CHUNK ? (size_t)want : PEEK_CHUNK, &got),
                  "store_peek");
            if (got == 0)
                die("store_peek", "a lane ran dry early");
            for (size_t i = 0; i < got; i++)
                refs[i] = views[i].ref;
            check(store_commit(s, q, refs, got), "store_commit");
            for (size_t i = 0; i < got; i++)
                check(store_tombstone(s, refs[i], NULL), "store_tombstone");
            want -= got;
            rb->tombstoned += got;
        }
    }
    check(store_flush(s), "store_flush");
    store_close(s);
    sync();

    bench_open(o, argv0, dir, &rb->third);
    if (rb->third.tombstoned != rb->tombstoned ||
        rb->third.live + rb->third.tombstoned != rb->entries)
        die("recovery", "tombstone counts after reopening do not match");
    if (!o->keep)
        rm_tree(dir);
}

/* ------------------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]\n"
            "  --items N             items appended and tombstoned at the process level "
            "(default %llu)\n"
            "  --power-items N       the same at the power-loss level (default %llu)\n"
            "  --payload B           payload bytes per item (default %llu; ids are %u bytes)\n"
            "  --flush-every F       store_flush every F appends / tombstones (default %llu)\n"
            "  --lanes L             lanes the items are spread over (default %llu)\n"
            "  --reps R              repetitions of each timed section, best reported "
            "(default %llu)\n"
            "  --recovery-entries N  entries in the recovery store (default %llu)\n"
            "  --recovery-payload B  payload bytes per recovery entry (default %llu)\n"
            "  --dir D               parent of the fresh data directory (default %s)\n"
            "  --keep                keep the data directory\n"
            "  --cold                sync and drop the recovery store's cached pages before "
            "each open\n"
            "  --in-process          time the recovery opens in this process instead of a "
            "fresh one\n"
            "  --json                one JSON object on stdout instead of the table\n",
            DEFAULT_ITEMS, DEFAULT_POWER_ITEMS, DEFAULT_PAYLOAD, ID_LEN, DEFAULT_FLUSH_EVERY,
            DEFAULT_LANES, DEFAULT_REPS, DEFAULT_RECOVERY_ENTRIES, DEFAULT_RECOVERY_PAYLOAD,
            DEFAULT_DIR);
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
        {"--reps", offsetof(opts_t, reps)},
        {"--recovery-entries", offsetof(opts_t, recovery_entries)},
        {"--recovery-payload", offsetof(opts_t, recovery_payload)},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t k, nk = sizeof(numeric) / sizeof(numeric[0]);
        for (k = 0; k < nk && strcmp(a, numeric[k].flag) != 0; k++)
            ;
        if (k < nk && i + 1 < argc) {
            *(uint64_t *)((char *)o + numeric[k].field) = parse_u64(a, argv[++i]);
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
        } else {
            usage(stderr);
            exit(2);
        }
    }
    if (o->items == 0 || o->items > 100000000ull || o->power_items == 0 ||
        o->power_items > 100000000ull || o->payload > (1ull << 20) || o->flush_every == 0 ||
        o->lanes == 0 || o->lanes > 4096 || o->reps == 0 || o->reps > 100 ||
        o->recovery_entries == 0 || o->recovery_entries > 1000000000ull ||
        o->recovery_payload > (1ull << 20)) {
        fprintf(stderr,
                PROG ": need 1 <= --items, --power-items <= 1e8, --payload and "
                     "--recovery-payload <= 1 MiB, --flush-every >= 1, 1 <= --lanes <= 4096, "
                     "1 <= --reps <= 100, 1 <= --recovery-entries <= 1e9\n");
        exit(2);
    }
}

static void print_level_text(const level_t *lv, uint64_t entry_size)
{
    uint64_t bytes = lv->n * entry_size;
    printf("  %-7s store      %8zu %14.0f %10.1f %10.3f\n", lv->name, lv->n,
           per_sec(lv->n, lv->store.append_ns), per_sec(bytes, lv->store.append_ns) / 1e6,
           ratio(lv->base.append_ns, lv->store.append_ns));
    printf("  %-7s baseline   %8zu %14.0f %10.1f\n", "", lv->n, per_sec(lv->n, lv->base.append_ns),
           per_sec(bytes, lv->base.append_ns) / 1e6);
}

static void print_tomb_text(const level_t *lv)
{
    printf("  %-7s store      %8zu %14.0f %10s %10.3f\n", lv->name, lv->n,
           per_sec(lv->n, lv->store.tomb_ns), "", ratio(lv->base.tomb_ns, lv->store.tomb_ns));
    printf("  %-7s baseline   %8zu %14.0f\n", "", lv->n, per_sec(lv->n, lv->base.tomb_ns));
}

static void print_open_text(const char *what, const recovery_t *r, const recovery_bench_t *rb)
{
    uint64_t scanned = r->live + r->tombstoned;
    printf("  %-19s %9" PRIu64 " live + %8" PRIu64 " tombstoned in %" PRIu64
           " segments: %.1f ms (recovery report), %.1f ms wall\n"
           "  %-19s %.0f entries/s (report), %.0f entries/s (wall), %.1f MB/s of segment files; "
           "store/baseline %.3f\n",
           what, r->live, r->tombstoned, r->segments, (double)r->elapsed_ns / 1e6,
           (double)r->wall_ns / 1e6, "", per_sec(scanned, r->elapsed_ns),
           per_sec(scanned, r->wall_ns), per_sec(rb->segment_bytes, r->wall_ns) / 1e6,
           ratio(rb->read_ns, r->wall_ns));
}

static void print_level_json(const level_t *lv, uint64_t entry_size, int last)
{
    uint64_t bytes = lv->n * entry_size;
    printf("\"%s\":{\"items\":%zu,"
           "\"append\":{\"store_items_per_s\":%.0f,\"store_mb_per_s\":%.2f,"
           "\"baseline_items_per_s\":%.0f,\"baseline_mb_per_s\":%.2f,\"store_over_baseline\":%.4f},"
           "\"tombstone\":{\"store_per_s\":%.0f,\"baseline_per_s\":%.0f,"
           "\"store_over_baseline\":%.4f}}%s",
           lv->name, lv->n, per_sec(lv->n, lv->store.append_ns),
           per_sec(bytes, lv->store.append_ns) / 1e6, per_sec(lv->n, lv->base.append_ns),
           per_sec(bytes, lv->base.append_ns) / 1e6, ratio(lv->base.append_ns, lv->store.append_ns),
           per_sec(lv->n, lv->store.tomb_ns), per_sec(lv->n, lv->base.tomb_ns),
           ratio(lv->base.tomb_ns, lv->store.tomb_ns), last ? "" : ",");
}

static void print_open_json(const char *name, const recovery_t *r, const recovery_bench_t *rb)
{
    uint64_t scanned = r->live + r->tombstoned;
    printf("\"%s\":{\"live\":%" PRIu64 ",\"tombstoned\":%" PRIu64 ",\"segments\":%" PRIu64
           ",\"elapsed_ns\":%" PRIu64 ",\"wall_ns\":%" PRIu64
           ",\"entries_per_s\":%.0f,\"entries_per_s_wall\":%.0f,"
           "\"store_over_baseline\":%.4f,\"heap_bytes_per_queued_item\":%.2f}",
           name, r->live, r->tombstoned, r->segments, r->elapsed_ns, r->wall_ns,
           per_sec(scanned, r->elapsed_ns), per_sec(scanned, r->wall_ns),
           ratio(rb->read_ns, r->wall_ns),
           r->queued ? (double)r->heap_delta / (double)r->queued : 0.0);
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
        .dir = DEFAULT_DIR,
    };
    if (argc == 3 && strcmp(argv[1], "--recovery-child") == 0)
        return recovery_child(argv[2]);
    parse_args(argc, argv, &o);

    char run_dir[4096];
    if (snprintf(run_dir, sizeof(run_dir), "%s/" PROG "-XXXXXX", o.dir) >= (int)sizeof(run_dir))
        die("--dir", "path too long");
    if (mkdtemp(run_dir) == NULL)
        die(run_dir, strerror(errno));

    gen_t g;
    gen_init(&g, (size_t)o.payload, (unsigned)o.lanes);
    uint64_t entry_size = probe_entry_size(run_dir, &g);
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
                    "items: 1 model, 1 shape, %" PRIu64 " lanes; id %u B, payload %" PRIu64
                    " B = %" PRIu64 " B per entry on disk; store_flush every %" PRIu64
                    " appends or tombstones\n"
                    "baselines: 1-2) pwrite() of the entry-sized buffers back to back in one file "
                    "(tombstones: 4 bytes at each entry), fdatasync() at the flush points at the "
                    "power level only\n"
                    "           3) pread() of every segment byte once, 1 MiB at a time (%s page "
                    "cache); each timed open in %s\n\n",
               o.reps, run_dir, o.keep ? "kept" : "removed", o.lanes, ID_LEN, o.payload, entry_size,
               o.flush_every, o.cold ? "dropped" : "warm",
               o.in_process ? "this process" : "a fresh process");
        printf("1) appends    level   side         items        items/s       MB/s  "
               "store/base\n");
        fflush(stdout);
    }
    for (int k = 0; k < 2; k++) {
        bench_level(&o, &g, entry_size, run_dir, &levels[k]);
        if (!o.json) {
            print_level_text(&levels[k], entry_size);
            fflush(stdout);
        }
    }
    if (!o.json) {
        printf("2) tombstones level   side         items   tombstones/s             "
               "store/base\n");
        for (int k = 0; k < 2; k++)
            print_tomb_text(&levels[k]);
        fflush(stdout);
    }
    gen_fini(&g);

    recovery_bench_t rb = {0};
    bench_recovery(&o, argv[0], run_dir, &rb);
    const recovery_t *m = &rb.all_live;
    double per_item = m->queued ? (double)m->heap_delta / (double)m->queued : 0.0;
    double per_item_third =
        rb.third.queued ? (double)rb.third.heap_delta / (double)rb.third.queued : 0.0;
    int mem_ok = m->heap_ok && per_item <= TARGET_BYTES_PER_ITEM;
    uint64_t payload_bytes = rb.entries * o.recovery_payload;

    if (!o.json) {
        printf("3) recovery: store_open_disk on %" PRIu64 " entries of %" PRIu64
               " B (payload %" PRIu64 " B), %" PRIu64 " lanes, process level, %s page cache; "
               "built in %.1f s (untimed)\n",
               rb.entries, rb.entry_size, o.recovery_payload, o.lanes, o.cold ? "dropped" : "warm",
               (double)rb.build_ns / 1e9);
        print_open_text("all live", &rb.all_live, &rb);
        print_open_text("a third tombstoned", &rb.third, &rb);
        printf("  %-19s pread of %.1f MB of segment files: %.1f ms, %.1f MB/s\n", "baseline",
               (double)rb.read_bytes / 1e6, (double)rb.read_ns / 1e6,
               per_sec(rb.read_bytes, rb.read_ns) / 1e6);
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
                   (double)rb.third.heap_delta / 1e6, rb.third.queued, per_item_third,
                   (double)payload_bytes / 1e6, (double)rb.segment_bytes / 1e6,
                   (double)m->heap_delta / 1e6,
                   rb.segment_bytes ? 100.0 * (double)m->heap_delta / (double)rb.segment_bytes
                                    : 0.0);
        } else {
            printf("4) memory: not measured (needs glibc >= 2.33 for mallinfo2)\n");
        }
        printf("store warnings and errors logged: %lu\n", store_warnings);
    } else {
        printf("{\"reps\":%" PRIu64 ",\"best_of_reps\":true,\"dir\":\"%s\",\"lanes\":%" PRIu64
               ",\"id_bytes\":%u,\"payload_bytes\":%" PRIu64 ",\"entry_bytes\":%" PRIu64
               ",\"flush_every\":%" PRIu64 ",",
               o.reps, run_dir, o.lanes, ID_LEN, o.payload, entry_size, o.flush_every);
        print_level_json(&levels[0], entry_size, 0);
        print_level_json(&levels[1], entry_size, 0);
        printf("\"recovery\":{\"entries\":%" PRIu64 ",\"entry_bytes\":%" PRIu64
               ",\"payload_bytes\":%" PRIu64 ",\"segment_file_bytes\":%" PRIu64
               ",\"cold\":%s,\"baseline_read_ns\":%" PRIu64 ",\"baseline_read_bytes\":%" PRIu64 ",",
               rb.entries, rb.entry_size, o.recovery_payload, rb.segment_bytes,
               o.cold ? "true" : "false", rb.read_ns, rb.read_bytes);
        print_open_json("all_live", &rb.all_live, &rb);
        printf(",");
        print_open_json("third_tombstoned", &rb.third, &rb);
        printf("},\"memory\":{\"measured\":%s,\"heap_before_bytes\":%" PRIu64
               ",\"heap_delta_bytes\":%" PRIu64 ",\"queued_items\":%" PRIu64
               ",\"bytes_per_queued_item\":%.2f,\"target_bytes_per_item\":%.0f,"
               "\"target_met\":%s},\"store_warnings\":%lu}\n",
               m->heap_ok ? "true" : "false", m->heap_before, m->heap_delta, m->queued, per_item,
               TARGET_BYTES_PER_ITEM, mem_ok ? "true" : "false", store_warnings);
    }
    if (!o.keep)
        rm_tree(run_dir);
    return 0;
}
