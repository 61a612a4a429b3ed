/*
 * storebench.h - private to tools/storebench: the pieces of lanesched-storebench its files
 * share. What the benchmark measures, against which baselines and why, is in main.c.
 *
 *   main.c      the command line and the run: header, phases in order, the text or JSON output
 *   writes.c    1) appends and 2) tombstones, store and pwrite() baseline, best of the reps
 *   recovery.c  3) recovery and 4) memory: the timed opens (each in a fresh process) and the
 *               pread() baseline
 *   memory.c    5) resident memory per queued item while appending, in a fresh process
 *   workload.c  the seeded item generator and the entry size asked of the store
 *   files.c     the post-order directory walk: removal, sizes, cache eviction, the read baseline
 *   report.c    the per-level and per-open lines, text and JSON, and the rate arithmetic
 *   support.c   fatal errors, paths, allocation, heap in use, opening the store and its lanes
 *
 * Ownership: every pointer passed in is borrowed for the call; what a function returns through
 * a pointer it allocated (sb_malloc, sb_store_open, the arrays of gen_t and workload_t) is the
 * caller's, freed with free(), store_close, gen_fini or workload_fini. Every failure of a
 * system or store call is fatal (sb_die: a message on stderr, exit status 2).
 */
#ifndef LANESCHED_STOREBENCH_H
#define LANESCHED_STOREBENCH_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

#define SEED           42ull
#define ID_LEN         16u
#define MAX_TOKENS     4096u
#define PEEK_CHUNK     256u
#define READ_CHUNK     (1u << 20)
#define MODEL          "bench-model"
#define SIGNATURE      0x5eedc0ffee15600dull
#define SIGNATURE_STEP 0x9e3779b97f4a7c15ull
#define PROG           "lanesched-storebench"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define HAVE_MALLINFO2 1
#else
#define HAVE_MALLINFO2 0
#endif

typedef struct {
    uint64_t items, power_items, payload, flush_every, lanes, reps;
    uint64_t models, shapes; /* lanes is per shape: models * shapes * lanes queues */
    uint64_t recovery_entries, recovery_payload, memory_items;
    uint64_t recovery_threads; /* store_disk_config_t.recovery_threads (0: the store default) */
    uint64_t path_items, path_depth, path_batch; /* phase 6 */
    const char *dir;
    int keep, json, cold, in_process;
    unsigned phases; /* --phases, a bit per phase (main.c) */
} opts_t;

/* ---- support.c ------------------------------------------------------------------------ */

/* Prints "lanesched-storebench: what: why" on stderr and exits with status 2. */
_Noreturn void sb_die(const char *what, const char *why);
/* The I/O paths every store the benchmark opens uses (--io, --sync; children get the flags). */
extern store_io_t sb_io;
extern store_sync_t sb_sync;
/* Runs this program again (args: argv0, a --*-child flag, its arguments, NULL) and reads what
 * it prints into out (cap bytes, NUL-terminated); a child that fails is fatal. */
void sb_child_run(const char *argv0, const char *const *args, char *out, size_t cap);
/* sb_die with the status's text unless st is STORE_OK. */
void sb_check(store_status_t st, const char *what);
/* snprintf into a path buffer; a path that does not fit is fatal, never truncated. */
void sb_pathf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* malloc that cannot fail (n = 0 allocates one byte); returned to the caller to free. */
void *sb_malloc(size_t n);
/* Heap in use (mallinfo2: uordblks + hblkhd); 0 and *out = 0 where glibc lacks mallinfo2. */
int sb_heap_in_use(uint64_t *out /* out */);
/* The store's log: warnings and errors to stderr, counted in sb_store_warnings; info dropped. */
extern unsigned long sb_store_warnings;
void sb_store_log(void *ctx, int level, const char *msg);
/* A disk store in dir (created if missing) at durability dur; *rep (may be NULL) gets the
 * recovery report. Returned to the caller to store_close. */
store_t *sb_store_open(const char *dir, store_durability_t dur, store_recovery_t *rep /* out */);
/* The key of queue k of a workload of `models` models of `shapes` shapes of `lanes` lanes each
 * (k < models * shapes * lanes): model MODEL (MODEL-<m> when there are several), signature
 * SIGNATURE + shape * SIGNATURE_STEP, lane. *model gets the name (caller memory, 32 bytes). */
store_key_t sb_queue_key(unsigned models, unsigned shapes, unsigned lanes, uint64_t k,
                         char *model /* out */);
/* Opens the queues of the workload (models * shapes * lanes of them) into qs (caller memory,
 * that many entries). */
void sb_queues_open(store_t *s, unsigned models, unsigned shapes, unsigned lanes,
                    store_queue_t **qs /* out */);
/* The numbers of the lines of `path` (a /proc file of "Key: number" lines) that start with
 * keys[i] (e.g. "syscr:"), into out[i]; 0 where the file does not say. All borrowed. */
void sb_proc_fields(const char *path, const char *const *keys, size_t n, uint64_t *out /* out */);
/* Read and write system calls of this process so far (/proc/self/io syscr + syscw), and into
 * *out_write_bytes the bytes it caused to be written to storage (write_bytes: pages it dirtied,
 * written back by whoever syncs them); 0 when /proc does not say. One read of the file. */
uint64_t sb_rw_syscalls(uint64_t *out_write_bytes /* out */);
/* CPU time of this process so far (user + system), nanoseconds. */
uint64_t sb_cpu_ns(void);

/* ---- files.c -------------------------------------------------------------------------- */

/* rm -rf of path; a failure other than ENOENT is reported on stderr, not fatal. */
void files_remove(const char *path);
/* Bytes of the regular files under path. */
uint64_t files_bytes(const char *path);
/* Writes back and drops the cached pages of every file under path (best effort). */
void files_evict(const char *path);
/* Reads every file under path once, READ_CHUNK at a time into buf (READ_CHUNK bytes, caller
 * memory); *out_bytes gets the bytes read. 0, or -1 with errno set. */
int files_read(const char *path, uint8_t *buf, uint64_t *out_bytes /* out */);

/* ---- workload.c ----------------------------------------------------------------------- */

/* The workload: item i is a pure function of (seed, i), so a run can be regenerated. Its queue:
 * a model (uniform), a shape of that model (Zipf, exponent 1: a few shapes take most items, as
 * prompt templates do) and a lane of that shape (uniform). */
typedef struct {
    size_t payload_len;
    unsigned models, shapes, lanes; /* lanes per shape */
    uint64_t queues;                /* models * shapes * lanes */
    double *shape_cdf;              /* running sums of the shapes' Zipf weights */
    uint8_t *pool;                  /* random bytes payloads are sliced from */
    size_t pool_len;
    uint64_t arrival0;
} gen_t;

void gen_init(gen_t *g /* out */, size_t payload_len, unsigned models, unsigned shapes,
              unsigned lanes);
void gen_fini(gen_t *g);
/* Fills *it (id written to id[ID_LEN], payload a view into g's pool) and the item's queue
 * (an index into the sb_queues_open array). */
void gen_item(const gen_t *g, uint64_t i, store_item_t *it /* out */, uint8_t *id /* out */,
              uint32_t *queue /* out */);
/* Bytes one entry takes in a segment, asked of the store: unflushed bytes after one append in
 * a scratch store under run_dir. */
uint64_t gen_entry_size(const char *run_dir, const gen_t *g);

typedef struct {
    size_t n;
    store_item_t *items;
    uint32_t *queue;
    uint8_t *ids;
} workload_t;

/* Items 0 .. n-1 of g, generated up front so the timed loops only append. */
void workload_init(workload_t *w /* out */, const gen_t *g, size_t n);
void workload_fini(workload_t *w);

/* ---- writes.c ------------------------------------------------------------------------- */

typedef struct {
    uint64_t append_ns, tomb_ns;
} phase_ns_t;

typedef struct {
    const char *name;
    store_durability_t dur;
    size_t n;
    phase_ns_t store, base; /* best of the repetitions, per phase */
} level_t;

/* 1) and 2) at one durability level: lv->store and lv->base get the best of o->reps runs. */
void writes_bench(const opts_t *o, const gen_t *g, uint64_t entry_size, const char *run_dir,
                  level_t *lv /* in, out */);

/* ---- recovery.c ----------------------------------------------------------------------- */

typedef struct {
    uint64_t live, tombstoned, segments, queued;
    uint64_t elapsed_ns, wall_ns; /* best of the repetitions, each */
    /* The same opens with one recovery thread, alternating with them (UINT64_MAX: not run, as
     * when --recovery-threads is 1). */
    uint64_t one_elapsed_ns, one_wall_ns;
    uint64_t heap_before, heap_delta;
    int heap_ok;
} recovery_t;

typedef struct {
    uint64_t entries, entry_size, segment_bytes, build_ns, tombstoned;
    recovery_t all_live, third;
    uint64_t read_ns, read_bytes; /* baseline, best of the repetitions */
} recovery_bench_t;

/* 3) and 4): builds the recovery store under run_dir and times its opens, all live and after a
 * third is tombstoned. argv0 re-executes this program for the fresh-process opens. */
void recovery_bench(const opts_t *o, const char *argv0, const char *run_dir,
                    recovery_bench_t *rb /* out */);
/* --recovery-child DIR THREADS: one open in this fresh process with THREADS recovery threads,
 * the result on stdout; the exit status. */
int recovery_child_run(const char *dir, unsigned threads);

/* ---- memory.c ------------------------------------------------------------------------- */

typedef struct {
    uint64_t items, queued;
    uint64_t rss_before, rss_after, anon_before, anon_after, heap_before, heap_after;
} memory_t;

/* 5): appends --memory-items items in a fresh process; *m gets its memory before and after. */
void memory_bench(const opts_t *o, const char *argv0, const char *run_dir, memory_t *m /* out */);
/* --memory-child DIR N PAYLOAD MODELS SHAPES LANES FLUSH_EVERY: the appends in this process;
 * exit status. */
int memory_child_run(const char *dir, uint64_t items, uint64_t payload, uint64_t models,
                     uint64_t shapes, uint64_t lanes, uint64_t flush_every);

/* ---- datapath.c ----------------------------------------------------------------------- */

typedef struct {
    const char *name;
    store_durability_t dur;
    uint64_t items, turns, batches;
    uint64_t wall_ns, cpu_ns, syscalls;
    uint64_t files_created, files_at_end;
    uint64_t rss_file;    /* RssFile at the end of the timed turns */
    uint64_t write_bytes; /* storage bytes the timed turns dirtied (write_bytes) */
} datapath_t;

/* 6) the data path at one durability level, in a fresh process: *out gets its figures. */
void datapath_bench(const opts_t *o, const char *argv0, const char *run_dir, store_durability_t dur,
                    datapath_t *out /* out */);
/* --datapath-child DIR LEVEL ITEMS DEPTH BATCH PAYLOAD FLUSH MODELS SHAPES LANES: the run in
 * this process, its figures on stdout; the exit status. */
int datapath_child_run(int argc, char **argv);

/* ---- report.c ------------------------------------------------------------------------- */

double report_per_sec(uint64_t n, uint64_t ns);
double report_ratio(uint64_t num_ns, uint64_t den_ns);
void report_level_text(const level_t *lv, uint64_t entry_size);
void report_tomb_text(const level_t *lv);
void report_open_text(const char *what, const recovery_t *r, const recovery_bench_t *rb);
/* `last`: no comma after the object. */
void report_level_json(const level_t *lv, uint64_t entry_size, int last);
void report_open_json(const char *name, const recovery_t *r, const recovery_bench_t *rb);

#endif
