/*
 * throughput_int.h - private to tools/bench/throughput*.c: `lanesched-bench throughput`, the
 * broker saturated and nothing else.
 *
 *   throughput.c         the mode: flags, the systems in order, the client-side check, exit
 *   throughput_lanes.c   one lanesched run: async-submit producers, prefetching consumers with
 *                        asynchronous acks (lanes_client)
 *   throughput_js.c      one JetStream run: js_PublishAsync producers, Fetch + ack consumers
 *   throughput_fabric.c  the fabric's ceiling: the same Submits answered by a responder that
 *                        reads nothing
 *   throughput_run.c     what both kinds of run share: items, phases, the monitor and progress
 *                        line, /proc readings (CPU, context switches, memory), percentiles
 *   throughput_report.c  the paragraphs, the ratios and the JSON document
 *
 * Dependencies run one way: throughput.c -> throughput_{lanes,js,fabric}.c -> throughput_run.c ->
 * net.h (children, temp directory, signals) and live_int.h (lanes.stats).
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
/* each rep: process, power, JetStream, the fabric, and the client check's three reruns */
#define TP_RESULTS_MAX   (7u * TP_REPS_MAX)
#define TP_PHASE_STALL_S 30 /* a phase with no progress for this long fails */

typedef struct {
    uint64_t items;          /* per phase */
    uint32_t batch;          /* items per Submit */
    uint32_t payload_bytes;  /* >= TP_HEADER_LEN */
    uint32_t tokens;         /* per item */
    uint32_t models;         /* producers and consumers are spread over them */
    uint32_t producers;      /* threads, one connection each */
    uint32_t window;         /* Submits in flight per producer */
    uint32_t consumers;      /* threads, one connection each */
    uint32_t prefetch;       /* batches requested ahead per consumer */
    uint32_t max_batch_size; /* the consumers' contract; JetStream fetches this many */
    uint32_t ack_window;     /* asynchronous acks in flight per consumer */
    unsigned durability;     /* NET_DURABILITY_* bits */
    const char *store;       /* lanesched --store: "disk" or "memory" */
    bool jetstream;          /* run the JetStream work queue too */
    bool fabric;             /* run the fabric's ceiling too */
    bool client_check;       /* rerun with twice the clients */
    uint32_t reps;           /* every run this many times, the systems alternating */
    double phase_timeout_s;  /* a phase ends (failed) after this long */
    const char *json_path;
    net_opts_t net; /* what net_env.c reads: nats_server, lanesched, prefix, keep */
} tp_opts_t;

/* Figures of one phase (submit-only, drain, or end to end). */
typedef struct {
    bool ran;
    double elapsed_s, items_per_s;
    double acks_sent_s; /* JetStream: until the last ack was sent (elapsed_s: until applied) */
    double lat_p50_ms, lat_p99_ms, lat_max_ms; /* submit -> its ack (SubmitReply / PubAck) */
    double daemon_cpu_s, server_cpu_s, client_cpu_s;
    uint64_t daemon_ctxsw, server_ctxsw;         /* voluntary and involuntary */
    uint64_t daemon_ctxsw_vol, server_ctxsw_vol; /* voluntary: waits, what the design controls */
} tp_phase_result_t;

enum { TP_SUBMIT = 0, TP_DRAIN = 1, TP_E2E = 2, TP_PHASES = 3 };

typedef struct {
    char system[16];     /* "lanesched", "jetstream" or "fabric" */
    char durability[16]; /* process, power, file */
    char store[16];      /* disk, memory (lanesched), file (JetStream) */
    char label[48];
    uint32_t producers, consumers;
    bool ran, ok;
    char error[256];
    tp_phase_result_t phase[TP_PHASES];
    uint64_t items;                /* per phase: 2 x items travelled in all */
    uint64_t lost, duplicated;     /* items never consumed; consumed more than once */
    uint64_t failed, foreign;      /* items never confirmed stored; items of another run */
    int64_t token_difference;      /* lanes.stats received - completed (lanesched) */
    bool have_tokens;              /* token_difference was read */
    long rss_base_kb, rss_peak_kb; /* of the daemon (lanesched) or nats-server (JetStream) */
    double bytes_per_queued_item;  /* (peak - base) / items queued after the submit phase */
} tp_result_t;

/* ---- one run (throughput_run.c) ------------------------------------------------------------ */

/* The items of one run: 2 x items (phase TP_SUBMIT's, then TP_E2E's), each consumed once. */
typedef struct {
    const tp_opts_t *o;
    uint64_t nonce;
    char tag[24];              /* item ids are <tag>-<index> */
    uint64_t n;                /* 2 x o->items */
    _Atomic uint8_t *consumed; /* per item: times a consumer got it */
    _Atomic uint64_t confirmed, failed, duplicates, consumed_items, redelivered, foreign;
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
    char error[256];              /* the first thread error */
    atomic_flag error_set;
} tp_run_t;

/* kind: the system's letter in the tag. 0, or -1 out of memory. */
int tp_run_init(tp_run_t *run /* out */, const tp_opts_t *o, char kind);
void tp_run_free(tp_run_t *run);
/* The first error of any thread (printf-like); later ones are dropped. */
void tp_run_error(tp_run_t *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The filler after the header of a payload buffer (o->payload_bytes at out), written once. */
void tp_payload_fill(const tp_run_t *run, uint8_t *out);
/* The header of item idx into a filled payload buffer: the whole payload is then item idx's. */
void tp_payload_make(const tp_run_t *run, uint64_t idx, uint64_t sent_ns, uint8_t *out);
/* The items [first, first + n) of one Submit from producer p (at most o->batch): ids
 * <tag>-<index> written into ids, each payload of the filled buffer payloads stamped with sent_ns,
 * the model and the producer's signature. Views into ids and payloads, which the caller owns. */
void tp_items_make(const tp_run_t *run, uint32_t p, const char *model, uint64_t first, size_t n,
                   uint64_t sent_ns, codec_work_item_t *items /* out */,
                   char (*ids)[TP_ID_MAX] /* out */, uint8_t *payloads /* out */);
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
/* The items producer p of the phase sends: [*first, *end). */
void tp_share(const tp_run_t *run, uint32_t phase, uint32_t p, uint32_t producers,
              uint64_t *first /* out */, uint64_t *end /* out */);

/* /proc readings of one process: CPU seconds (all threads), context switches (all threads). */
typedef struct {
    double cpu_s;
    uint64_t ctxsw, ctxsw_vol; /* all switches; the voluntary ones (the thread waited) */
} tp_proc_t;
void tp_proc_read(int pid, tp_proc_t *out /* out */); /* pid 0 = this process; zeros if gone */

/* Measures one phase: readings of the daemon and server at start, waits until done() (or the
 * stall or phase timeout, a signal, run->stop) while printing the progress line, readings at the
 * end. count(): items done so far in the phase; t0_ns is the phase's start. True when done. */
typedef uint64_t (*tp_count_fn)(tp_run_t *run);
bool tp_phase_watch(tp_run_t *run, const char *label, const char *phase_name, uint64_t target,
                    tp_count_fn count, int daemon_pid, uint64_t t0_ns, tp_phase_result_t *r);
/* Fills r's latency percentiles from run->lat_ns[0 .. n_lat) and empties it. */
void tp_latency_take(tp_run_t *run, tp_phase_result_t *r);
/* Lost / duplicated / failed / foreign counts from the run into res. */
void tp_run_tally(tp_run_t *run, tp_result_t *res);

/* ---- the systems ------------------------------------------------------------------------------
 */

/* One lanesched run at level ("process" / "power") with this many clients; the daemon is started
 * and stopped here. res filled; false on a setup failure (res->error). */
bool tp_lanes_run(const tp_opts_t *o, const char *level, uint32_t producers, uint32_t consumers,
                  tp_result_t *res /* out */);
/* One JetStream run on the bench's nats-server. */
bool tp_js_run(const tp_opts_t *o, uint32_t producers, uint32_t consumers,
               tp_result_t *res /* out */);
/* The fabric's ceiling (throughput_fabric.c): the submit-only phase against a responder that
 * answers without reading, no lanesched. */
bool tp_fabric_run(const tp_opts_t *o, uint32_t producers, tp_result_t *res /* out */);

/* ---- output (throughput_report.c) --------------------------------------------------------- */

void tp_result_print(const tp_result_t *r, const tp_opts_t *o);
/* The ratios lanesched / JetStream and the targets' checks; the client-side verdicts. */
void tp_summary_print(const tp_result_t *rs, size_t n, const tp_opts_t *o);
int tp_json_write(const char *path, const char *command, const tp_opts_t *o, const tp_result_t *rs,
                  size_t n, bool ok);

#endif
