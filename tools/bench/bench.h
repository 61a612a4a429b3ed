/*
 * bench.h - private to tools/bench: the pieces of lanesched-bench shared by its modes.
 *
 *   workload.c        seeded workload generator (models, Zipf-popular shapes, log-normal length
 *                     mixtures, arrival processes) with named presets
 *   workload_trace.c  trace files: a workload written down, replayed by every mode
 *   gpu.c             a simulated GPU worker: a four-integer contract, service time that grows
 *                     with padded tokens, and an LRU prefix cache of the last C shapes it served
 *   sim.c             sim mode: one trace through several policies in simulated time (with
 *                     sim_queue.c, sim_state.c; sim_int.h)
 *   sweep.c           sweep mode: every policy at a range of loads, capacity at an SLO
 *   report.c          the sim tables (report_claims.c the checks, report_json.c the JSON,
 *                     report_svg.c the chart, report_sweep.c the sweep's; report_int.h)
 *   args.c            sim's and sweep's flags and the workload they name (args_int.h)
 *   main.c            the command line; sim's and sweep's drivers
 *
 * The NATS modes have headers of their own: live.h (live.c), baseline.h (baseline.c) and the
 * layer both share, net.h (net*.c). This header and the files above never include them.
 *
 * Ownership: arrays returned through out pointers are malloc'd and returned to the caller,
 * freed with free(); everything passed in is borrowed for the call.
 */
#ifndef LANESCHED_BENCH_H
#define LANESCHED_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A simulated GPU worker's contract and service-time model (gpu.c); workloads write their
 * offered load against it. */
typedef struct {
    uint32_t max_batch_size;
    uint32_t max_batch_tokens;
    uint32_t max_input_tokens;
    uint64_t batch_fixed_ns;    /* per-batch cost */
    double ns_per_padded_token; /* service time grows with padded tokens */
    uint32_t cache_shapes;      /* LRU prefix cache of the last C shapes served (default 2) */
} gpu_config_t;

/* ---- workloads -------------------------------------------------------------------------- */

typedef struct {
    uint64_t t_ns;      /* arrival time since the start of the trace */
    uint64_t signature; /* the shape (XXH64 signature of its components) */
    uint32_t model;     /* index; the model's name is wl_model_name(model) */
    uint32_t shape;     /* index of the shape within the whole workload */
    uint32_t tokens;    /* > 0 */
    /* Tokens of the shape's cacheable prefix (WorkItem.prefix_tokens; 0 = none): a worker
     * holding the shape skips them, one that does not computes them once per batch (gpu.c). */
    uint32_t prefix_tokens;
} wl_item_t;

typedef struct {
    char preset[32];
    uint64_t seed;
    uint32_t models;
    uint32_t shapes_per_model;
    double zipf_s;       /* shape popularity exponent */
    double duration_s;   /* simulated seconds of arrivals */
    double rate;         /* mean items per second, all models */
    double burst_factor; /* bursty: rate multiplier during bursts (1 = none) */
    double churn;        /* churn: fraction of shapes replaced over the trace (0 = none) */
    uint32_t max_tokens; /* lengths are clamped to [1, max_tokens] */
    /* Added for sim: the fraction of shapes whose lengths are long-tailed and widely spread
     * (the rest are short or medium); 0 = the default mix (25%). */
    double long_share;
    /* Each shape's prefix length, drawn log-uniformly from [prefix_min, prefix_max] on the
     * shape's own stream (0, 0 = no prefixes: every item's prefix_tokens is 0). */
    uint32_t prefix_min, prefix_max;
} wl_config_t;

/* The presets' prefix lengths with prefixes priced (sim --prefixes): a system prompt of a few
 * hundred tokens to a few thousand of instructions, examples or documents. */
#define WL_PREFIX_MIN_DEFAULT 256u
#define WL_PREFIX_MAX_DEFAULT 4096u

/* Models a workload may have: wl_model_name() has a name for each. */
#define WL_MODELS_MAX 64u
/* Shapes per model a workload may have, churned shapes included. */
#define WL_SHAPES_MAX 4096u

/* Fills cfg with a named preset: "steady", "bursty", "churn", "sustained". -1 if unknown. */
int wl_preset(const char *name, uint64_t seed, wl_config_t *cfg /* out */);

/* Offered load: the workers' time the workload asks for per second of arrivals, each item
 * costed by gpu_item_ns (a full batch of its own length: a floor on the real cost), over
 * `workers` workers of `gpu` for all models together; 1.0 = every worker busy all the time
 * even at full batches. Time-averaged (bursts included). wl_rate_for_load sets cfg->rate so
 * that the load is `load`; the presets set their rate this way. 0 on success. */
int wl_rate_for_load(wl_config_t *cfg /* in, out */, const gpu_config_t *gpu, uint32_t workers,
                     double load);
int wl_load(const wl_config_t *cfg, const gpu_config_t *gpu, uint32_t workers,
            double *out /* out */);

/* The workers the presets' loads are written against: gpu_config_default, this many per
 * model. */
#define WL_PRESET_WORKERS_PER_MODEL 2u

/* Generates the trace, arrival-ordered. *out is returned to the caller (free()). 0 on success. */
int wl_generate(const wl_config_t *cfg, wl_item_t **out /* out */, size_t *out_n /* out */);

/* Trace files (workload_trace.c): a text header line with the config, then one line per item;
 * written as v2, read as v1 or v2. 0 on success; wl_trace_read says why it refused a file in err
 * ("path:line: what", err_len bytes; err may be NULL). */
int wl_trace_write(const char *path, const wl_config_t *cfg, const wl_item_t *items, size_t n);
int wl_trace_read(const char *path, wl_config_t *cfg /* out */, wl_item_t **out /* out */,
                  size_t *out_n /* out */, char *err /* out */, size_t err_len);

/* "model-<index>", in static storage. */
const char *wl_model_name(uint32_t model);

/* ---- simulated GPU workers ---------------------------------------------------------------- */

typedef struct {
    uint64_t batches, items;
    uint64_t padded_tokens, real_tokens;
    uint64_t hits, misses; /* a batch is a hit when its shape is in the worker's cache */
    uint64_t busy_ns;
    /* Prefix tokens computed on misses, and skipped on hits (what the cache saved). */
    uint64_t prefix_tokens, prefix_saved_tokens;
} gpu_stats_t;

typedef struct gpu gpu_t;

void gpu_config_default(gpu_config_t *cfg /* out */);
int gpu_create(const gpu_config_t *cfg, gpu_t **out /* out */);
void gpu_destroy(gpu_t *gpu);
/* Serves one batch of one shape whose prefix is prefix_tokens; returns its service time in ns
 * and updates the stats and the cache. */
uint64_t gpu_serve(gpu_t *gpu, uint64_t signature, uint32_t n_items, uint32_t pad_to,
                   uint64_t real_tokens, uint32_t prefix_tokens);
const gpu_stats_t *gpu_stats(const gpu_t *gpu);
/* What one item of `tokens` costs a worker when it rides in a full batch of items of its own
 * length: its padded tokens plus its share of the batch's fixed cost, in ns. Padding waste and
 * partial batches only add to it, so a load written with it is a floor on the workers'
 * utilisation, never an overestimate of their capacity. */
double gpu_item_ns(const gpu_config_t *cfg, uint32_t tokens);
/* Serves a batch whose items may carry different shapes (the FIFO policy): a hit only when
 * every item carries one shape and the worker had it cached; afterwards every distinct shape of
 * the batch is in the cache (most recent: the last to appear). A batch of one shape pays its
 * prefix (the longest of prefixes[], NULL: none) on a miss; a batch of several pays the prefix
 * of each shape it holds. Otherwise as gpu_serve. */
uint64_t gpu_serve_mixed(gpu_t *gpu, const uint64_t *signatures, const uint32_t *prefixes,
                         uint32_t n_items, uint32_t pad_to, uint64_t real_tokens);

/* ---- sim mode (sim.c) --------------------------------------------------------------------- */

typedef enum {
    SIM_FIFO = 0,     /* one queue per model, no length or shape awareness */
    SIM_POW2,         /* per shape, power-of-two length buckets */
    SIM_RANGE64,      /* per shape, fixed 64-token ranges */
    SIM_LANES_128,    /* the article's policy with its earlier 128-lane budget */
    SIM_LANES_SEED,   /* the article's policy (SCHED_POLICY_SEED), 2,048 lanes, no bound */
    SIM_LANES_STARVE, /* lanes-seed with the starvation bound on */
    SIM_LANES,        /* the daemon's default policy (SCHED_POLICY_LANES) */
    SIM_POLICY_COUNT
} sim_policy_t;

/* "fifo", "pow2", "range64", "lanes-128", "lanes-seed", "lanes-starve", "lanes"; static. */
const char *sim_policy_name(sim_policy_t policy);
/* The policy named `name` (also "lanes-2048", lanes-seed's earlier name); -1 if none. */
int sim_policy_from_name(const char *name);
/* 1 for the rolling-lane policies (the project's scheduler), 0 for the baselines. */
int sim_policy_is_lanes(sim_policy_t policy);

typedef struct {
    uint32_t workers_per_model; /* simulated GPU workers per model, all with `gpu` */
    gpu_config_t gpu;
    uint64_t starvation_ns; /* SIM_LANES_STARVE's bound */
    uint64_t age_bound_ns;  /* SIM_LANES's age bound (0 = off) */
    /* SIM_LANES's workers: 1 = they declare their cost in Register (gpu's figures), 0 = they do
     * not and the scheduler estimates it from their batches' times. */
    int declare_cost;
    double merge_credit;        /* SIM_LANES's sched_config_t.merge_credit (0 = the default) */
    double merge_credit_loaded; /* ... and merge_credit_loaded (0 = the default) */
    uint64_t hold_ns;           /* SIM_LANES's hold (0 = off) */
    double hold_load, hold_share, hold_ramp; /* its gate, share and ramp (0 = the defaults) */
    double hold_burst;  /* its length in a burst regime, x hold_ns (0 = default, < 0 = none) */
    uint64_t sample_ns; /* sampling period; also the scheduler's maintenance tick */
    /* POW2 and RANGE64: Triton's max_queue_delay (sim_queue.c invariant 4); 0 = none */
    uint64_t bucket_delay_ns;
    /* The wait budget (--slo-ms; 0 = none): SIM_LANES's sched_config_t.slo_ns; POW2 and
     * RANGE64 run with the queue delay tuned to it (tune.c) unless bucket_delay_ns was set. */
    uint64_t slo_ns;
} sim_config_t;

/* One sample, taken every sample_ns of simulated time. */
typedef struct {
    double t_s;
    uint32_t queues;         /* lanes (rolling lanes) or queues (the others) in use, summed */
    uint32_t queues_max;     /* the most any one shape (FIFO: model) had */
    uint32_t queued_items;   /* waiting, not in flight */
    uint64_t padded, real;   /* tokens of the batches dispatched since the previous sample */
    uint64_t batches, hits;  /* ditto */
    uint64_t opened, reuses; /* lanes (queues) opened and items into existing ones, ditto */
} sim_sample_t;

typedef struct {
    sim_policy_t policy;
    uint64_t delay_ns;                /* the queue delay it ran with (POW2, RANGE64) */
    int tuned;                        /* the delay was chosen for a budget (tune.c) */
    int budget_met;                   /* tune.c: its p99 wait is within the budget */
    uint64_t items_in, tokens_in;     /* submitted */
    uint64_t items_done, tokens_done; /* completed by a worker */
    uint64_t batches, items_served, padded_tokens, real_tokens, hits, misses, busy_ns;
    uint64_t prefix_tokens, prefix_saved_tokens; /* computed on misses; skipped on hits */
    uint64_t
        cold_misses; /* misses on a worker's first batch of that shape: no policy avoids them */
    uint32_t queues_peak, queues_max_peak; /* sum over shapes; one shape */
    double queues_mean;
    uint64_t opened, reuses; /* lanes opened / items into an existing lane; or queue creations */
    uint64_t force_fits, quiesced, shape_switches, preemptions; /* rolling lanes only */
    uint64_t holds;                        /* lanes: fills whose batch waited for company */
    uint64_t merged_batches, merged_lanes; /* `lanes`: batches merged across lanes, lanes added */
    /* `lanes`: the cost the scheduler packed with at the end of the run (the first worker's;
     * estimated from its batches unless they declared it) */
    double cost_fixed_ns, cost_token_ns;
    int cost_known, cost_estimated;
    uint32_t shapes, shapes_full; /* shapes seen; those whose lanes in use reached the budget */
    double arrival_s;             /* the trace's duration: the denominator of the rates */
    uint64_t end_ns;              /* when the last batch completed */
    uint64_t wait_p50_ns, wait_p99_ns, wait_max_ns; /* arrival -> dispatch */
    double wait_mean_ns;
    int ok;          /* every invariant held */
    char error[200]; /* the first broken invariant */
    sim_sample_t *series;
    size_t n_series;
    double wall_s; /* real seconds the run took */
} sim_result_t;

void sim_config_default(sim_config_t *cfg /* out */);

/* Runs one policy over the trace, deterministically, in simulated time. Returns 0 when the run
 * completed (out->ok says whether every invariant held), -1 on a setup failure (out->error).
 * out->series is returned to the caller: sim_result_free. */
int sim_run(const sim_config_t *cfg, const wl_item_t *items, size_t n, sim_policy_t policy,
            sim_result_t *out /* out */);
void sim_result_free(sim_result_t *result);
/* tune.c: sim_run, except that with `tune` set, a budget (cfg->slo_ns) and policy POW2 or
 * RANGE64 the queue delay is chosen from a grid of shares of the budget: the least GPU time with
 * the p99 wait within the budget, else the shortest p99 (out->delay_ns is the delay chosen). */
int sim_run_tuned(const sim_config_t *cfg, const wl_item_t *items, size_t n, sim_policy_t policy,
                  int tune, sim_result_t *out /* out */);

/* ---- sweep mode (sweep.c) ------------------------------------------------------------------ */

#define SWEEP_LOADS_MAX 64u

/* One policy at one load: the figures the sweep prints. */
typedef struct {
    int ran, ok;
    uint64_t busy_ns, batches, wait_p50_ns, wait_p99_ns, wait_max_ns;
    double waste_pct, hit_pct, items_per_batch, offered_pct;
    int64_t token_diff;
    uint64_t delay_ns; /* pow2, range64: the queue delay it ran with */
} sweep_cell_t;

typedef struct {
    /* The trace at a load (percent): a preset drawn again at that rate, or a trace file's
     * arrival times stretched. 0, or -1 with a message on stderr. *items returned to free(). */
    int (*trace_at)(void *ctx, double load_pct, wl_config_t *wl /* out */,
                    wl_item_t **items /* out */, size_t *n /* out */);
    void *ctx;
    const sim_config_t *sim;
    const int *policies; /* SIM_POLICY_COUNT flags */
    const double *loads; /* ascending, percent */
    size_t n_loads;
    uint64_t slo_ns;
    const char *json, *svg, *command;
    int claims;
    const char *unmet; /* as report_t's */
    int tune;          /* under sim->slo_ns: pow2 and range64's queue delay tuned (tune.c) */
} sweep_args_t;

typedef struct {
    wl_config_t wl; /* the trace at the first load (preset, seed, shapes) */
    const sweep_args_t *args;
    sweep_cell_t cells[SWEEP_LOADS_MAX][SIM_POLICY_COUNT];
    double wall_s;
} sweep_t;

/* Runs every selected policy at every load and prints the table, the capacities and (with
 * args->claims) the checks; writes the JSON and the chart when asked. Returns the exit status:
 * 0, 1 when a run broke an invariant or a check said NO under --claims, 2 on a setup failure. */
int sweep_run(const sweep_args_t *args);
/* The highest load at which the policy's p99 wait stays within the SLO, linear between the
 * sweep's points (sweep.c says how): 1 when it crossed the SLO inside the range, 0 when it never
 * did (*out = the highest load: at least that), -1 when it was over it at the first load (*out
 * = the first load: at most that). */
int sweep_capacity(const sweep_t *sw, sim_policy_t p, double *out /* out */);
/* The offered load of a trace in percent, as sim's header computes it (each item costed at a
 * full batch of its own length, over the trace's arrival window and sim's workers). */
double sweep_offered(const sim_config_t *sim, const wl_item_t *items, size_t n);

/* ---- report (report.c) -------------------------------------------------------------------- */

typedef struct {
    const wl_config_t *wl;
    const wl_item_t *items;
    size_t n_items;
    const sim_config_t *sim;
    const sim_result_t *results; /* one per policy run, in table order */
    size_t n_results;
    const char *command; /* the command line that made it, for the record */
    const char *unmet;   /* --unmet: keys of the checks known to fail (borrowed; NULL: none) */
} report_t;

/* Prints the table, its notes and the claims as checks; returns how many checks failed. */
int report_table_print(FILE *f, const report_t *rep);
int report_json_write(const char *path, const report_t *rep); /* 0 on success */
int report_svg_write(const char *path, const report_t *rep);  /* 0 on success */
/* The sweep's table, capacities and checks (returns how many said NO); JSON and chart. */
int report_sweep_print(FILE *f, const sweep_t *sw);
int report_sweep_json_write(const char *path, const sweep_t *sw); /* 0 on success */
int report_sweep_svg_write(const char *path, const sweep_t *sw);  /* 0 on success */
/* 100 * num / den, 0 when den is 0: every mode's waste and hit percentages. */
double report_pct(uint64_t num, uint64_t den);
/* Writes s (borrowed) as a quoted, escaped JSON string: shared by every mode's JSON output. */
void report_json_str(FILE *f, const char *s);

#endif
