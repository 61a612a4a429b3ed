/*
 * throughput_int.h - private to tools/bench/throughput*.c: `lanesched-bench throughput`, the
 * broker saturated and nothing else.
 *
 *   throughput.c          the mode: flags, the systems in order, the client-side check, exit
 *   throughput_workload.c the items: models, Zipf shapes, lengths (realistic or uniform)
 *   throughput_lanes.c    one lanesched run: async-submit producers, prefetching consumers with
 *                         asynchronous acks (lanes_client) that check every batch
 *   throughput_js.c       one JetStream run: js_PublishAsync producers, pull + ack consumers
 *   throughput_grid.c     the JetStream driver's settings tried on a grid, the best one kept
 *   throughput_fabric.c   the fabric's ceiling: the same Submits answered by a responder that
 *                         reads nothing
 *   throughput_run.c      what every run shares: items, phases, the monitor and progress line,
 *                         /proc readings (CPU, context switches, system calls, memory)
 *   throughput_files.c    files created in a data directory (inotify)
 *   throughput_report.c   the paragraphs, the ratios and the JSON document
 *
 * Dependencies run one way: throughput.c -> throughput_grid.c -> throughput_{lanes,js,fabric}.c
 * -> throughput_run.c -> throughput_{workload,files}.c, net.h (children, temp directory, signals)
 * and live_int.h (lanes.stats).
 *
 * Ownership: everything passed in is borrowed for the call; a tp_run_t owns its arrays from
 * tp_run_init to tp_run_free.
 */
#ifndef LANESCHED_BENCH_THROUGHPUT_INT_H
#define LANESCHED_BENCH_THROUGHPUT_INT_H

#include "codec/codec.h"
#include "net.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TP_MODEL_FMT  "tp-%u"
#define TP_HEADER_LEN 24u /* nonce, item index, send time: the start of every payload */
#define TP_ID_MAX     40u /* an item id, <tag>-<index>, with its NUL */
#define TP_REPS_MAX   9u  /* --reps */
#define TP_POINTS_MAX 4u  /* --shapes A,B,C,D: shapes-per-model points of one run */
/* each rep: every point at both levels, JetStream, the fabric, the client check's three reruns;
 * then the queue probe */
#define TP_RESULTS_MAX   ((2u * TP_POINTS_MAX + 5u) * TP_REPS_MAX + 1u)
#define TP_GRID_MAX      64u   /* JetStream grid cells (--js-grid full: 3 x 4 x 2 x 2) */
#define TP_PHASE_STALL_S 30    /* a phase with no progress for this long fails */
#define TP_TOKENS_MAX    8192u /* the longest item of the log-normal mix (its tail) */

/* How item lengths are drawn (--lengths). */
typedef enum {
    TP_LEN_FIXED = 0,     /* a: tokens of every item */
    TP_LEN_UNIFORM = 1,   /* uniform in [a, b] */
    TP_LEN_LOGNORMAL = 2, /* per shape a median spread around a, items log-normal (sigma b)
                             around it, clamped to [1, max] */
} tp_len_kind_t;

typedef struct {
    tp_len_kind_t kind;
    double a, b;
    uint32_t max;
} tp_lengths_t;

/* --js-grid: how the JetStream driver's settings are chosen. */
typedef enum { TP_GRID_OFF = 0, TP_GRID_QUICK = 1, TP_GRID_FULL = 2 } tp_grid_mode_t;

typedef struct {
    uint64_t items;              /* per phase */
    uint32_t batch;              /* items per Submit */
    uint32_t payload_bytes;      /* >= TP_HEADER_LEN */
    uint32_t tokens;             /* per item under --lengths fixed (the uniform workload's) */
    uint32_t models;             /* Submit chunks go round the models */
    uint32_t producers;          /* threads, one connection each */
    uint32_t window;             /* Submits in flight per producer */
    uint32_t consumers;          /* threads, one connection each */
    uint32_t prefetch;           /* batches requested ahead per consumer */
    uint32_t max_batch_size;     /* the consumers' contract; JetStream fetches this many */
    uint32_t max_batch_tokens;   /* the consumers' contract; 0: max_batch_size x the longest item */
    uint32_t cache_lo, cache_hi; /* Register.cache_shapes of consumer k: lo + k % (hi - lo + 1);
                                    0: not declared */
    uint32_t ack_window;         /* asynchronous acks in flight per consumer */
    bool uniform;                /* --workload uniform: one shape per model, fixed length (the best
                                    case: every item of a model lands in one lane) */
    uint32_t shapes[TP_POINTS_MAX]; /* shapes per model, one lanesched point each */
    uint32_t n_shapes;
    double zipf_s; /* shape popularity: the shape of rank k weighs k^-zipf_s */
    tp_lengths_t lengths;
    uint64_t seed;
    unsigned durability; /* NET_DURABILITY_* bits */
    const char *store;   /* lanesched --store: "disk" or "memory" */
    bool jetstream;      /* run the JetStream work queue too */
    bool fabric;         /* run the fabric's ceiling too */
    bool client_check;   /* rerun with twice the clients */
    tp_grid_mode_t js_grid;
    uint64_t js_grid_items; /* items of a grid cell's end-to-end trial; 0 = items */
    uint64_t queue_probe;   /* items queued by the memory probe; 0 = no probe */
    uint32_t reps;          /* every run this many times, the systems alternating */
    double phase_timeout_s; /* a phase ends (failed) after this long */
    const char *json_path;
    net_opts_t net; /* what net_env.c reads: nats_server, lanesched, prefix, keep */
} tp_opts_t;

/* The items of one shapes point (throughput_workload.c): a pure function of (seed, index), so
 * every system and rep moves the same items. */
typedef struct {
    uint64_t seed;
    uint32_t models, shapes, batch;
    tp_lengths_t lengths;
    bool uniform;
    double *cdf;         /* shapes entries: running Zipf weights */
    uint64_t *signature; /* models x shapes */
    double *median;      /* models x shapes: each shape's median length (log-normal) */
    char (*names)[16];   /* models: "tp-<m>" */
} tp_workload_t;

/* One item as the workload makes it. */
typedef struct {
    uint32_t model, shape, tokens;
    uint64_t signature;
} tp_item_t;

/* Allocates the tables of a point with `shapes` shapes per model. 0, or -1 out of memory. */
int tp_workload_init(tp_workload_t *w /* out */, const tp_opts_t *o, uint32_t shapes);
void tp_workload_free(tp_workload_t *w);
/* Item idx of a run with `items` per phase (idx < 2 x items). Submit chunks of w->batch items,
 * counted from the start of their phase, go round the models, so a Submit has one model. */
void tp_workload_item(const tp_workload_t *w, uint64_t items, uint64_t idx,
                      tp_item_t *out /* out */);
uint32_t tp_workload_model(const tp_workload_t *w, uint64_t items, uint64_t idx);
/* "realistic, 2 models x 64 shapes (Zipf 1), lengths lognormal:300:0.9 (max 8192)" or the
 * uniform workload's "uniform (best case: ...)" into out. */
void tp_workload_describe(const tp_workload_t *w, const tp_opts_t *o, char *out, size_t len);
/* The consumers' Register.max_batch_tokens: o->max_batch_tokens, or (0) max_batch_size items of
 * the longest length the workload gives, padded (at most the daemon's default limit). */
uint32_t tp_max_batch_tokens(const tp_opts_t *o);
/* "64 shapes/model" or "uniform, best case": what a run's label says of its items. */
void tp_workload_short(const tp_workload_t *w, char *out, size_t len);
/* The lengths' spec as --lengths takes it. */
void tp_lengths_format(const tp_lengths_t *l, char *out, size_t len);
/* Parses --lengths: fixed:N, uniform:LO:HI, lognormal[:MEDIAN[:SIGMA[:MAX]]]. false on error. */
bool tp_lengths_parse(const char *text, tp_lengths_t *out /* out */);

/* Files and directories created under a directory tree while it is watched
 * (throughput_files.c). */
typedef struct tp_files tp_files_t;
/* Watches dir and every directory created under it (inotify); NULL when it cannot (no count). */
tp_files_t *tp_files_open(const char *dir);
/* Entries created since open; *overflowed (may be NULL) true once events were lost. */
uint64_t tp_files_created(tp_files_t *f, bool *overflowed /* out, may be NULL */);
void tp_files_close(tp_files_t *f); /* NULL-safe */

/* The JetStream driver's settings: one grid cell. */
typedef struct {
    uint32_t producers, consumers;
    uint32_t fetch;     /* messages per pull request */
    uint32_t requested; /* messages a consumer keeps requested (topped up at half) */
    uint32_t pending;   /* publishes in flight per producer (js_PublishAsync MaxPending) */
} tp_js_cfg_t;

/* Figures of one phase (submit-only, drain, or end to end). */
typedef struct {
    bool ran;
    double elapsed_s, items_per_s;
    double acks_sent_s; /* JetStream: until the last ack was sent (elapsed_s: until applied) */
    double lat_p50_ms, lat_p99_ms, lat_max_ms; /* submit -> its ack (SubmitReply / PubAck) */
    double daemon_cpu_s, server_cpu_s, client_cpu_s;
    uint64_t daemon_ctxsw, server_ctxsw;         /* voluntary and involuntary */
    uint64_t daemon_ctxsw_vol, server_ctxsw_vol; /* voluntary: waits, what the design controls */
    uint64_t daemon_syscalls, server_syscalls;   /* /proc/PID/io syscr + syscw */
    uint64_t files_created; /* entries created in the system's data directory */
    bool have_files;        /* files_created was counted (the watch worked, nothing lost) */
    uint64_t batches;       /* lanesched: Batches the consumers took (a shape's items each) */
} tp_phase_result_t;

enum { TP_SUBMIT = 0, TP_DRAIN = 1, TP_E2E = 2, TP_PHASES = 3 };

/* What a result is for: a main run (enters the ratios), a rerun with twice the clients, a
 * JetStream grid cell (the end-to-end phase alone on fewer items), the memory probe. */
typedef enum {
    TP_ROLE_MAIN = 0,
    TP_ROLE_CLIENTS = 1,
    TP_ROLE_GRID = 2,
    TP_ROLE_PROBE = 3
} tp_role_t;

typedef struct {
    char system[16];     /* "lanesched", "jetstream" or "fabric" */
    char durability[16]; /* process, power, file */
    char store[16];      /* disk, memory (lanesched), file (JetStream) */
    char label[96];
    tp_role_t role;
    uint32_t shapes; /* shapes per model of the items (every system gets the same items) */
    uint32_t producers, consumers;
    tp_js_cfg_t js; /* JetStream: the driver's settings */
    bool ran, ok;
    char error[256];
    tp_phase_result_t phase[TP_PHASES];
    uint64_t items;                    /* per phase: 2 x items travelled in all */
    uint64_t lost, duplicated;         /* items never consumed; consumed more than once */
    uint64_t failed, foreign;          /* items never confirmed stored; items of another run */
    uint64_t contract;                 /* items or batches that broke the workload or contract */
    int64_t token_difference;          /* lanes.stats received - completed (lanesched) */
    bool have_tokens;                  /* token_difference was read */
    long rss_base_kb, rss_peak_kb;     /* of the daemon (lanesched) or nats-server (JetStream) */
    long anon_base_kb, anon_end_kb;    /* RssAnon at the start and the end of the submit phase */
    uint64_t queued;                   /* items the system held after the submit phase */
    double bytes_per_queued_item;      /* (peak - base) / queued */
    double anon_bytes_per_queued_item; /* (anon end - anon base) / queued */
} tp_result_t;

/* ---- one run (throughput_run.c) ------------------------------------------------------------ */

/* The items of one run: 2 x items (phase TP_SUBMIT's, then TP_E2E's), each consumed once. */
typedef struct {
    const tp_opts_t *o;
    const tp_workload_t *wl;
    uint64_t items; /* per phase: o->items, or a grid cell's trial */
    bool e2e_only;  /* a grid cell: the end-to-end phase alone */
    uint64_t nonce;
    char tag[24];              /* item ids are <tag>-<index> */
    uint64_t n;                /* 2 x items */
    _Atomic uint8_t *consumed; /* per item: times a consumer got it */
    _Atomic uint64_t confirmed, failed, duplicates, consumed_items, redelivered, foreign;
    _Atomic uint64_t contract; /* items or batches that broke the workload or the contract */
    _Atomic uint64_t batches;  /* lanesched: Batches taken by the consumers */
    _Atomic uint64_t last_confirm_ns, last_consume_ns;
    _Atomic uint64_t acked_items, last_ack_ns; /* consumers' acks confirmed (or flushed) */
    _Atomic uint64_t acks_sent_ns;             /* JetStream: when the phase's last ack was sent */
    uint64_t *lat_ns; /* per Submit / message confirmed, in the current phase */
    _Atomic uint64_t n_lat;
    uint64_t cap_lat;
    atomic_bool stop;             /* every thread ends */
    _Atomic uint32_t go;          /* producer phases released: 1 submit-only, 2 end to end */
    atomic_bool consume;          /* consumers may start pulling */
    _Atomic uint32_t ready, gone; /* threads connected / finished (barriers) */
    void *system;                 /* the run's system-specific state (throughput_js.c: jsCtx) */
    tp_files_t *files;            /* the system's data directory watched; NULL: not counted */
    char error[256];              /* the first thread error */
    atomic_flag error_set;
} tp_run_t;

/* kind: the system's letter in the tag; items: per phase. 0, or -1 out of memory. */
int tp_run_init(tp_run_t *run /* out */, const tp_opts_t *o, const tp_workload_t *wl,
                uint64_t items, char kind);
void tp_run_free(tp_run_t *run);
/* The first error of any thread (printf-like); later ones are dropped. */
void tp_run_error(tp_run_t *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The filler after the header of a payload buffer (o->payload_bytes at out), written once. */
void tp_payload_fill(const tp_run_t *run, uint8_t *out);
/* The header of item idx into a filled payload buffer: the whole payload is then item idx's. */
void tp_payload_make(const tp_run_t *run, uint64_t idx, uint64_t sent_ns, uint8_t *out);
/* The items [first, first + n) of one Submit (at most o->batch, one Submit chunk: one model):
 * ids <tag>-<index> written into ids, each payload of the filled buffer payloads stamped with
 * sent_ns, the workload's model, signature and tokens. Views into ids, payloads and the run's
 * workload, which outlive the items. */
void tp_items_make(const tp_run_t *run, uint64_t first, size_t n, uint64_t sent_ns,
                   codec_work_item_t *items /* out */, char (*ids)[TP_ID_MAX] /* out */,
                   uint8_t *payloads /* out */);
/* Items of the submit phase settled so far: confirmed or failed (a tp_count_fn). */
uint64_t tp_confirmed_count(tp_run_t *run);
/* 1 with the index of one of this run's items, 0 for anything else (counted foreign). */
int tp_payload_read(tp_run_t *run, const void *data, size_t len, uint64_t *idx /* out */);
/* A consumer got item idx: counted once, again as redelivered. */
void tp_consumed_note(tp_run_t *run, uint64_t idx);
/* A consumer's ack of n items was confirmed (lanesched: AckReply; JetStream: flushed). */
void tp_acked_note(tp_run_t *run, uint64_t n);
/* A Submit / message was confirmed after lat_ns. */
void tp_confirmed_note(tp_run_t *run, uint64_t items, uint64_t lat_ns);
/* The items producer p of the phase sends: [*first, *end), whole Submit chunks. */
void tp_share(const tp_run_t *run, uint32_t phase, uint32_t p, uint32_t producers,
              uint64_t *first /* out */, uint64_t *end /* out */);

/* /proc readings of one process: CPU seconds (all threads), context switches (all threads), read
 * and write system calls (/proc/PID/io syscr + syscw, the whole process). */
typedef struct {
    double cpu_s;
    uint64_t ctxsw, ctxsw_vol; /* all switches; the voluntary ones (the thread waited) */
    uint64_t syscalls;
} tp_proc_t;
void tp_proc_read(int pid, tp_proc_t *out /* out */); /* pid 0 = this process; zeros if gone */
/* RssAnon of a process in kB, -1 if unknown. */
long tp_anon_kb(int pid);

/* Measures one phase: readings of the daemon and server at start, waits until done() (or the
 * stall or phase timeout, a signal, run->stop) while printing the progress line, readings at the
 * end. count(): items done so far in the phase; t0_ns is the phase's start. True when done. */
typedef uint64_t (*tp_count_fn)(tp_run_t *run);
bool tp_phase_watch(tp_run_t *run, const char *label, const char *phase_name, uint64_t target,
                    tp_count_fn count, int daemon_pid, uint64_t t0_ns, tp_phase_result_t *r);
/* Fills r's latency percentiles from run->lat_ns[0 .. n_lat) and empties it. */
void tp_latency_take(tp_run_t *run, tp_phase_result_t *r);
/* Lost / duplicated / failed / foreign / contract counts from the run into res. */
void tp_run_tally(tp_run_t *run, tp_result_t *res);
/* ok: ran, nothing lost, duplicated, failed or broken, tokens balanced where they are read. */
bool tp_result_clean(const tp_result_t *res);

/* ---- the systems ------------------------------------------------------------------------------
 */

/* One lanesched run at level ("process" / "power") with this many clients; the daemon is started
 * and stopped here. With items_probe > 0, the memory probe instead: that many items submitted,
 * the queue measured, nothing consumed. res filled; false on a setup failure (res->error). */
bool tp_lanes_run(const tp_opts_t *o, const tp_workload_t *wl, const char *level,
                  uint32_t producers, uint32_t consumers, tp_role_t role, uint64_t items_probe,
                  tp_result_t *res /* out */);
/* One JetStream run on the bench's nats-server with the driver's settings cfg: the three phases
 * on o->items (role main or clients), or the end-to-end phase alone on `items` (role grid). */
bool tp_js_run(const tp_opts_t *o, const tp_workload_t *wl, const tp_js_cfg_t *cfg, tp_role_t role,
               uint64_t items, tp_result_t *res /* out */);
/* The fabric's ceiling (throughput_fabric.c): the submit-only phase against a responder that
 * answers without reading, no lanesched. */
bool tp_fabric_run(const tp_opts_t *o, const tp_workload_t *wl, uint32_t producers, tp_role_t role,
                   tp_result_t *res /* out */);

/* ---- the JetStream grid (throughput_grid.c) -------------------------------------------------- */

/* The driver's settings from the flags (--js-grid off). */
void tp_js_cfg_default(const tp_opts_t *o, tp_js_cfg_t *out /* out */);
/* "2x4 fetch 64, 512 requested, 2048 pending" */
void tp_js_cfg_format(const tp_js_cfg_t *c, char *out, size_t len);
/* Runs the grid's cells (o->js_grid) as trials into cells (TP_GRID_MAX), *n of them, and the best
 * end-to-end cell's settings into *winner (the flags' settings when none ran). */
void tp_grid_run(const tp_opts_t *o, const tp_workload_t *wl, tp_result_t *cells /* out */,
                 size_t *n /* out */, tp_js_cfg_t *winner /* out */);

/* ---- output (throughput_report.c) --------------------------------------------------------- */

void tp_result_print(const tp_result_t *r, const tp_opts_t *o);
/* The grid's table and winner. */
void tp_grid_print(const tp_result_t *cells, size_t n, const tp_js_cfg_t *winner);
/* The ratios lanesched / JetStream and the targets' checks; the client-side verdicts. */
void tp_summary_print(const tp_result_t *rs, size_t n, const tp_result_t *cells, size_t n_cells,
                      const tp_opts_t *o);
int tp_json_write(const char *path, const char *command, const tp_opts_t *o, const tp_result_t *rs,
                  size_t n, const tp_result_t *cells, size_t n_cells, const tp_js_cfg_t *winner,
                  bool ok);

#endif
