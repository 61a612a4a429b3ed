/*
 * net.h - private to tools/bench: the NATS layer shared by live mode (live.c) and the JetStream
 * baseline (baseline.c). Dependencies run one way: main.c -> live.c -> baseline.c -> net*.c ->
 * bench.h; nothing here calls live or baseline back.
 *
 *   net.c          a run of the trace through one system: per-item times, pacing, the payload,
 *                  the simulated workers' GPU step, the progress line, process memory
 *   net_env.c      the bench's children (nats-server, lanesched), its temp directory and signals
 *   net_args.c     the NATS modes' flags
 *   net_result.c   one run's figures: measured, printed and written as JSON
 *   net_session.c  what a NATS mode does around its runs: flags, trace, children, the summary
 *
 * Ownership: everything passed in is borrowed for the call; a net_run_t or net_session_t owns
 * what its init/open allocated until its free/close.
 */
#ifndef LANESCHED_BENCH_NET_H
#define LANESCHED_BENCH_NET_H

#include "bench.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_PATH_MAX         1024
#define NET_SAMPLE_MS        250u   /* lanes.stats / stream info / VmRSS sampling */
#define NET_PRINT_MS         1000u  /* the progress line on a terminal */
#define NET_READY_MS         15000u /* every worker registered */
#define NET_STOP_GRACE_MS    10000u /* SIGTERM, then SIGKILL */
#define NET_RESULTS_MAX      5u     /* per policy: process, power; JetStream */
#define NET_STATS_TIMEOUT_MS 2000   /* one lanes.stats request */

/* ---- options and trace (net_args.c, net_session.c) ---------------------------------------- */

#define NET_DURABILITY_PROCESS 1u
#define NET_DURABILITY_POWER   2u
/* lanesched's scheduling policies a live run compares (--policies). */
#define NET_POLICY_LANES 1u
#define NET_POLICY_SEED  2u

typedef struct {
    const char *preset, *trace_in, *trace_out;
    uint64_t seed;
    double duration_s; /* 0 = the preset's */
    const char *url;   /* NULL: the bench starts nats-server (and lanesched) itself */
    const char *prefix, *nats_server, *lanesched;
    unsigned durability;    /* NET_DURABILITY_* bits */
    unsigned policies;      /* NET_POLICY_* bits: one lanesched run per policy and level */
    bool declare_cost;      /* the workers send their simulated cost in Register (--cost) */
    uint32_t slo_ms;        /* lanesched's --slo-ms (0: none) */
    double vs_sim_pct;      /* live: compare each run with sim's on the trace (0: off) */
    bool baseline;          /* live: the JetStream baseline too, and the items/s ratio */
    uint32_t workers;       /* simulated workers per model */
    uint32_t batch;         /* items per Submit; JetStream publishes per wait for their acks */
    double time_scale;      /* wall time = trace time * time_scale, for arrivals and service */
    bool no_pace;           /* submit as fast as acks come, ignoring arrival times */
    double drain_timeout_s; /* after the last submit: give up after this long without progress */
    gpu_config_t gpu;
    const char *json_path;
    bool keep; /* keep the temp directory */
} net_opts_t;

/* Parses the NATS modes' flags (argv[0] is the mode's name; baseline refuses live's flags).
 * o->lanesched defaults to self_dir_bin, filled with "lanesched" beside this binary (self_len
 * bytes). 0 to run, 1 after --help (printed), -1 on a usage error (reported on stderr). */
int net_args_parse(int argc, char **argv, bool baseline, net_opts_t *o /* out */,
                   char *self_dir_bin, size_t self_len);

/* A trace ready to replay: per model, the indices of its items in arrival order. */
typedef struct {
    wl_config_t cfg;
    wl_item_t *items;
    size_t n_items;
    uint64_t tokens;
    uint32_t **by_model;
    size_t *n_by_model;
} net_trace_t;

/* ---- one run (net.c) ----------------------------------------------------------------------- */

typedef struct net_worker net_worker_t;

/* One run of the trace through one system. Per-item times are monotonic ns, 0 = not yet. */
typedef struct {
    const net_opts_t *opts;
    const net_trace_t *trace;
    const char *url;
    char tag[24];           /* unique per run; item ids are <tag>-<trace index> */
    uint64_t nonce;         /* in every payload: items of another run are recognised */
    uint64_t t0_ns;         /* item i is due at t0_ns + items[i].t_ns * time_scale */
    double limit_s;         /* the run ends by t0_ns + limit_s whatever happens */
    net_worker_t **workers; /* opts->workers per model; worker k serves model k / opts->workers */
    size_t n_workers;
    _Atomic uint64_t *sent_ns;   /* producer, just before the submit (also in the payload) */
    _Atomic uint64_t *acked_ns;  /* producer: the system confirmed the item stored */
    _Atomic uint64_t *served_ns; /* worker: began serving it (first delivery) */
    _Atomic uint64_t accepted_items, accepted_tokens, duplicates, failed_items;
    _Atomic uint64_t served_items, redelivered_items, foreign_items, acked_items, last_ack_ns;
    _Atomic uint64_t worker_errors;
    _Atomic uint64_t wire_mismatches; /* items delivered with a field other than submitted */
    _Atomic uint32_t producers_done, workers_ready, workers_failed;
    atomic_bool stop;
    /* filled by the system's run: */
    bool drained;
    uint64_t peak_queued;          /* most items the system held (queued or in flight) */
    long rss_base_kb, rss_peak_kb; /* of the server process measured; -1 = unknown */
    uint64_t progress_ns;          /* the progress line's last print */
    bool progress_open;
    char error[256];
} net_run_t;

/* kind: a letter naming the system in the tag ('p' process, 'w' power, 'x' existing, 'j'
 * JetStream). 0, or -1 out of memory. The run borrows o and t until net_run_free. */
int net_run_init(net_run_t *run /* out */, const net_opts_t *o, const net_trace_t *t,
                 const char *url, char kind);
void net_run_free(net_run_t *run);

/* Absolute-clock sleeps (CLOCK_MONOTONIC), resumed after a signal. */
void net_sleep_until(uint64_t t_ns);
void net_sleep_ms(uint64_t ms);
/* Producer pacing: waits until item by_model[model][next] is due and returns how many items from
 * next on are due (at most opts->batch), or 0 once stopping. */
size_t net_pace_take(net_run_t *run, uint32_t model, size_t next);
/* Payload of every item: nonce, trace index and send time (24 bytes, little-endian); decode gives
 * 0 for another run's item or a bad payload, else 1 with *idx < n_items. */
#define NET_PAYLOAD_LEN 24u
void net_payload_encode(const net_run_t *run, uint32_t idx, uint64_t sent_ns, uint8_t *out);
int net_payload_decode(const net_run_t *run, const void *data, size_t len, uint32_t *idx);
/* A batch's items as a worker serves them: trace index, shape, tokens and prefix tokens of each,
 * parallel arrays of the cap given to net_items_init (owned; the worker's thread only). */
typedef struct {
    uint32_t *idx, *tokens, *prefix;
    uint64_t *sigs;
} net_items_t;
/* 0, or -1 when out of memory (nothing is left allocated). */
int net_items_init(net_items_t *it, size_t cap);
void net_items_fini(net_items_t *it);
/* Serves items [off, off + n) of `items` (borrowed) as one batch on worker w: first-service
 * times, the GPU model (gpu_serve_mixed when the shapes differ; a miss pays the items' prefix),
 * then sleeps the service time * time_scale on an absolute clock. */
void net_worker_serve(net_run_t *run, net_worker_t *w, const net_items_t *items, size_t off,
                      size_t n, uint32_t pad_to);
/* After a batch's ack: acked items and the time of the last ack. */
void net_worker_acked(net_run_t *run, size_t n_items);
/* The workers' GPU counters, summed. */
void net_run_tally_get(net_run_t *run, gpu_stats_t *out);
/* The progress line (in place on a terminal, every 5 s otherwise); hit_pct < 0 or lanes < 0 =
 * n/a. net_progress_end ends an in-place line. */
void net_progress_show(net_run_t *run, const char *label, double items_per_s, double queued,
                       double lanes, double waste_pct, double hit_pct);
void net_progress_end(net_run_t *run);
/* VmRSS (or VmHWM) of a process in kB, -1 if unknown; net_rss_peak_reset restarts VmHWM. */
long net_rss_kb(int pid, bool peak);
void net_rss_peak_reset(int pid);

/* ---- children, temp directory, signals (net_env.c) ----------------------------------------- */

/* Installs the signal handlers, makes the temp directory and starts nats-server with JetStream
 * (unless o->url). 0, or -1 with err set; net_env_close undoes whatever part succeeded. */
int net_env_open(const net_opts_t *o, char *err, size_t errlen);
void net_env_close(void);
/* A signal asked the bench to stop, or the run's stop flag is set (run may be NULL). */
bool net_stopping(const net_run_t *run);
/* The NATS URL: o->url or the server the bench started. Static storage. */
const char *net_url(void);
/* The nats-server the bench started, 0 with --url. */
int net_server_pid(void);
/* lanesched --durability level --policy policy with a fresh data directory; waits for
 * "lanesched: ready".
 * 0, or -1 with err set. */
int net_daemon_start(const net_opts_t *o, const char *level, const char *policy, char *err,
                     size_t errlen);
/* The data directory of the last lanesched started, "" before; nats-server's JetStream storage
 * directory, "" with --url. Static storage. */
const char *net_daemon_data_dir(void);
const char *net_server_store_dir(void);
/* The lanesched the bench started (0: none); whether it exited (then it is reaped, pid 0). */
int net_daemon_pid(void);
bool net_daemon_exited(void);
/* SIGTERM, NET_STOP_GRACE_MS, SIGKILL. */
void net_daemon_stop(void);
/* The tail of lanesched's log for that run ("<level>-<policy>"), on stderr. */
void net_daemon_log_print(const char *run);

/* ---- results (net_result.c) ----------------------------------------------------------------- */

/* lanes.stats figures (live_stats.c reads them): counters, then sums over every shape of every
 * model. */
typedef struct {
    uint64_t items_received, tokens_received, items_routed, tokens_routed, items_completed,
        tokens_completed, items_returned, duplicates, rejected, padded_tokens, real_tokens,
        lanes_opened, lane_reuses, shape_switches, dead_lettered, pending_items, publish_failures,
        dropped_messages, batches_expired_ack_deadline, consumers_declared_dead;
    uint64_t lanes, queued_items, inflight_items; /* now, not counters */
    uint64_t stored_items; /* now: items held, queued or in flight, every model (not truncated:
                              the per-shape sums above cover the shapes listed) */
} net_stats_t;

typedef struct {
    char system[16];
    char durability[16];
    char policy[16]; /* lanesched's --policy; "" for JetStream */
    bool ran;
    char error[256];
    uint64_t accepted, accepted_tokens, duplicates, failed, served, redelivered, foreign;
    uint64_t worker_errors;
    uint64_t wire_mismatches; /* fails the run (net_result_ok) */
    double elapsed_s, items_per_s;
    double wait_p50_ms, wait_p99_ms, wait_max_ms; /* submit ack -> service start */
    double sub_p50_ms, sub_p99_ms, sub_max_ms;    /* submit -> service start */
    gpu_stats_t tally;
    double waste_pct, hit_pct;
    bool drained;
    bool have_stats;
    net_stats_t delta; /* counters: after - before; lanes/queued: after */
    int64_t token_difference;
    double daemon_waste_pct;
    uint64_t peak_queued;
    long rss_base_kb, rss_peak_kb;
    double bytes_per_item; /* < 0: n/a */
} net_result_t;

/* Everything the workers and producers of run measured, into r. 0, or -1 out of memory. */
int net_result_fill(net_run_t *run, net_result_t *r /* in, out */);
/* The result's paragraph on stdout. */
void net_result_print(const net_result_t *r, const net_trace_t *t, const net_opts_t *o);
/* Ran, drained, nothing failed; lanesched runs also a token difference of 0. */
bool net_result_ok(const net_result_t *r);
/* The runs' JSON document at path. 0, or -1 when it cannot be written. */
int net_result_json_write(const char *path, const char *command, const net_opts_t *o,
                          const net_trace_t *t, const char *url, const net_result_t *rs, size_t n,
                          bool ok);

/* ---- a NATS mode's session (net_session.c) --------------------------------------------------- */

typedef struct {
    net_opts_t opts;
    net_trace_t trace;
    net_result_t results[NET_RESULTS_MAX];
    size_t n_results;
    int rc;        /* the exit status so far (2 until the runs are summed up) */
    char err[512]; /* a setup error, printed by net_session_close */
    char lanesched_bin[NET_PATH_MAX + 16];
    char command[2048];
    bool env; /* net_env_open was called */
} net_session_t;

/* Parses the flags, loads (and with --trace-out writes) the trace, starts the children and prints
 * the header. True: the runs go ahead. False: nothing to run, s->rc is the exit status (0 after
 * --help, 2 on a usage or setup error). net_session_close in both cases. */
bool net_session_open(net_session_t *s /* out */, int argc, char **argv, bool baseline);
/* Prints r's paragraph and keeps it for the summary (at most NET_RESULTS_MAX). */
void net_session_result_add(net_session_t *s, const net_result_t *r);
/* After the runs: the items/s ratios, the verdict line and the JSON file; s->rc becomes 0 (every
 * run ok), 1 (a run lost tokens, did not drain or failed items) or 130 (interrupted). */
void net_session_report(net_session_t *s);
/* Prints s->err if set, stops the children, removes the temp directory, frees the trace.
 * Returns s->rc. */
int net_session_close(net_session_t *s);

#endif
