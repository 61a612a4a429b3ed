/*
 * main.c - the lanesched-bench command line: `sim`, `live` and `baseline`.
 *
 * Owns: argument parsing for sim mode, choosing the workload (a preset or a trace file), running
 * the policies in table order, the outputs (table, --json, --svg, --trace-out) and the exit
 * status. live and baseline parse their own arguments (live_main in live.c, base_main in
 * baseline.c, called with argv[0] = the mode's name); when a build lacks their file, the mode
 * says so and exits 2.
 *
 * Invariants:
 *   1. Exit status: 0 when every policy ran and every invariant held; 1 when any policy broke
 *      an invariant or its tokens in and completed differ (and, under --check, when the trace
 *      does not round-trip through a file or a rerun is not identical); 2 on usage errors or
 *      setup failures.
 *   2. Flags never change the workload behind the user's back: --duration and --rate override
 *      the preset and are printed in the header; with --trace-in the trace is replayed as
 *      written (--duration may only cut it shorter).
 *
 * Rejected: getopt_long. It is a GNU extension, and the flag set is small; the same explicit
 * loop as tools/microbench.c keeps every flag's parsing and range check in one place.
 */
#include "bench.h"

#include "scheduler/core/sched.h"

#ifdef LANESCHED_BENCH_LIVE
#include "live.h"
#endif
#ifdef LANESCHED_BENCH_BASELINE
#include "baseline.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAIN_DEFAULT_SEED   42ull
#define MAIN_DEFAULT_PRESET "steady"
#define MAIN_COMMAND_MAX    1024
/* The sweep's default loads: 40% to 110% in steps of 10 (issue 10), and its SLO. */
#define MAIN_SWEEP_LOAD_FIRST 40.0
#define MAIN_SWEEP_LOAD_LAST  110.0
#define MAIN_SWEEP_LOAD_STEP  10.0
#define MAIN_SWEEP_SLO_MS     5000u

static void main_usage(FILE *f)
{
    sim_config_t d;
    sim_config_default(&d);
    fprintf(f,
            "usage: lanesched-bench sim [flags]        policies side by side, in simulated time\n"
            "       lanesched-bench sweep [flags]      every policy at a range of loads: p99 "
            "wait,\n"
            "                                          GPU seconds, capacity at an SLO\n"
            "       lanesched-bench live [flags]       the trace over NATS against lanesched\n"
            "       lanesched-bench baseline [flags]   the same items through JetStream\n"
            "\n"
            "sim flags:\n"
            "  --preset NAME       steady | bursty | churn | sustained (default %s)\n"
            "  --seed N            workload seed (default %llu)\n"
            "  --duration S        seconds of arrivals (default: the preset's; with --trace-in, "
            "cuts the trace)\n"
            "  --rate R            mean items per second, all models (default: the preset's)\n"
            "  --load PCT          instead of --rate: the workers' time the items ask for, in\n"
            "                      percent, each item costed in a full batch of its own length\n"
            "                      (fixed cost included; a floor), time-averaged\n"
            "  --models N, --shapes N, --max-tokens N, --zipf S, --burst-factor F, --churn C,\n"
            "  --long-share X      override the preset's models, shapes per model, length cap,\n"
            "                      popularity exponent, burst factor, churn fraction, share of\n"
            "                      long-tailed shapes (all printed in the header)\n"
            "  --workers N         simulated GPU workers per model (default %" PRIu32 ")\n"
            "  --cache-shapes C    each worker's prefix cache: LRU of C shapes (default %" PRIu32
            ")\n"
            "  --batch-size N      contract: max items per batch (default %" PRIu32 ")\n"
            "  --batch-tokens N    contract: max padded tokens per batch (default %" PRIu32 ")\n"
            "  --max-input N       contract: max input length, not a filter (default %" PRIu32 ")\n"
            "  --batch-us N        service time: fixed cost per batch, microseconds (default "
            "%" PRIu64 ")\n"
            "  --ns-per-token X    service time: nanoseconds per padded token (default %g)\n"
            "  --starvation-ms N   the starvation bound of lanes-starve (default %" PRIu64 ")\n"
            "  --age-bound-ms X    the age bound of lanes, the default policy (default %g; 0 = "
            "off)\n"
            "  --merge-credit X    lanes: share of a batch's fixed cost a merge is credited with "
            "(default %g)\n"
            "  --cost declared|estimate  lanes: the workers declare their cost in Register, or "
            "the\n"
            "                      scheduler estimates it from their batches' times (default "
            "declared)\n"
            "  --policies LIST     comma-separated subset of fifo,pow2,range64,lanes-128,"
            "lanes-seed,lanes-starve,lanes\n"
            "                      (default: all; lanes-2048 names lanes-seed)\n"
            "  --trace-in FILE     replay a trace file instead of generating one\n"
            "  --trace-out FILE    write the trace that was run\n"
            "  --json FILE         write every figure and the time series as JSON\n"
            "  --svg FILE          write the chart (waste and hit rate per policy; lanes and "
            "waste over time)\n"
            "  --check             also check that the trace round-trips through a file and that "
            "a rerun of\n"
            "                      lanes-seed and lanes is identical; exit 1 on any failure (CI)\n"
            "  --claims            exit 1 when any of the printed checks (the issue's claims)\n"
            "                      says NO (CI runs it on every preset at full length)\n"
            "\n"
            "sweep flags: sim's (not --rate, --load, --check), and\n"
            "  --loads LIST        offered loads in percent, ascending (default 40,50,...,110);\n"
            "                      with --trace-in the trace's arrival times are stretched to "
            "each\n"
            "  --slo-ms N          the SLO of capacity: p99 wait at most N ms (default %u)\n"
            "  --json FILE, --svg FILE   the sweep as JSON; the chart (p99 wait against load)\n",
            MAIN_DEFAULT_PRESET, MAIN_DEFAULT_SEED, d.workers_per_model, d.gpu.cache_shapes,
            d.gpu.max_batch_size, d.gpu.max_batch_tokens, d.gpu.max_input_tokens,
            d.gpu.batch_fixed_ns / 1000, d.gpu.ns_per_padded_token, d.starvation_ns / 1000000,
            (double)d.age_bound_ns / 1e6, SCHED_MERGE_CREDIT_DEFAULT, MAIN_SWEEP_SLO_MS);
}

static int main_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr,
                "lanesched-bench: %s: want an integer in [%" PRIu64 ", %" PRIu64 "], got %s\n",
                flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int main_double(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
        fprintf(stderr, "lanesched-bench: %s: want a number in [%g, %g], got %s\n", flag, lo, hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

static int main_u32(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint32_t *out)
{
    uint64_t v;
    if (main_u64(flag, s, lo, hi, &v) != 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Parses --policies into a selection mask. */
static int main_policies(const char *list, int *sel)
{
    char buf[256];
    if (strlen(list) >= sizeof(buf))
        return -1;
    memcpy(buf, list, strlen(list) + 1);
    for (int p = 0; p < SIM_POLICY_COUNT; p++)
        sel[p] = 0;
    char *save = NULL;
    for (char *w = strtok_r(buf, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        int p = sim_policy_from_name(w);
        if (p >= 0)
            sel[p] = 1;
        else {
            fprintf(stderr, "lanesched-bench: --policies: unknown policy %s\n", w);
            return -1;
        }
    }
    return 0;
}

typedef struct {
    const char *preset, *trace_in, *trace_out, *json, *svg;
    uint64_t seed;
    double duration, rate, load; /* 0 = the preset's */
    /* workload overrides; negative / 0 = the preset's */
    uint32_t models, shapes, max_tokens;
    double zipf_s, burst_factor, churn, long_share;
    int check;
    int claims; /* --claims: a NO among the checks fails the run */
    int policies[SIM_POLICY_COUNT];
    sim_config_t sim;
    /* sweep mode */
    int sweep;
    double loads[SWEEP_LOADS_MAX];
    size_t n_loads;
    uint64_t slo_ns;
    wl_item_t *trace; /* the --trace-in trace, read once (sweep) */
    size_t trace_n;
    wl_config_t trace_wl;
    double trace_load; /* its offered load, percent */
} main_sim_args_t;

/* Parses "40,50,60" into ascending loads. */
static int main_loads(const char *list, double *loads, size_t *n)
{
    char buf[512];
    if (strlen(list) >= sizeof(buf))
        return -1;
    memcpy(buf, list, strlen(list) + 1);
    *n = 0;
    char *save = NULL;
    for (char *w = strtok_r(buf, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        double v;
        if (*n == SWEEP_LOADS_MAX || main_double("--loads", w, 1.0, 100000.0, &v) != 0 ||
            (*n > 0 && v <= loads[*n - 1])) {
            fprintf(stderr, "lanesched-bench: --loads: up to %u ascending percentages\n",
                    SWEEP_LOADS_MAX);
            return -1;
        }
        loads[(*n)++] = v;
    }
    return *n > 0 ? 0 : -1;
}

static int main_sim_parse(int argc, char **argv, int sweep, main_sim_args_t *a)
{
    *a = (main_sim_args_t){
        .preset = MAIN_DEFAULT_PRESET,
        .seed = MAIN_DEFAULT_SEED,
        .zipf_s = -1,
        .burst_factor = -1,
        .churn = -1,
        .long_share = -1,
        .sweep = sweep,
        .slo_ns = MAIN_SWEEP_SLO_MS * 1000000ull,
    };
    for (double l = MAIN_SWEEP_LOAD_FIRST; l <= MAIN_SWEEP_LOAD_LAST + 1e-9;
         l += MAIN_SWEEP_LOAD_STEP)
        a->loads[a->n_loads++] = l;
    sim_config_default(&a->sim);
    for (int p = 0; p < SIM_POLICY_COUNT; p++)
        a->policies[p] = 1;
    int preset_set = 0, seed_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            main_usage(stdout);
            exit(0);
        }
        if (strcmp(f, "--check") == 0) {
            a->check = 1;
            continue;
        }
        if (strcmp(f, "--claims") == 0) {
            a->claims = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "lanesched-bench: %s: unknown flag or missing value\n", f);
            return -1;
        }
        const char *v = argv[++i];
        uint64_t u;
        int rc = 0;
        if (strcmp(f, "--preset") == 0) {
            a->preset = v;
            preset_set = 1;
        } else if (strcmp(f, "--seed") == 0) {
            rc = main_u64(f, v, 0, UINT64_MAX, &a->seed);
            seed_set = 1;
        } else if (strcmp(f, "--duration") == 0) {
            rc = main_double(f, v, 0.001, 1e6, &a->duration);
        } else if (strcmp(f, "--rate") == 0) {
            rc = main_double(f, v, 0.001, 1e8, &a->rate);
        } else if (strcmp(f, "--load") == 0) {
            rc = main_double(f, v, 0.1, 100000.0, &a->load);
        } else if (strcmp(f, "--models") == 0) {
            rc = main_u32(f, v, 1, WL_MODELS_MAX, &a->models);
        } else if (strcmp(f, "--shapes") == 0) {
            rc = main_u32(f, v, 1, 2048, &a->shapes);
        } else if (strcmp(f, "--max-tokens") == 0) {
            rc = main_u32(f, v, 1, 1u << 24, &a->max_tokens);
        } else if (strcmp(f, "--zipf") == 0) {
            rc = main_double(f, v, 0.0, 10.0, &a->zipf_s);
        } else if (strcmp(f, "--burst-factor") == 0) {
            rc = main_double(f, v, 1.0, 1000.0, &a->burst_factor);
        } else if (strcmp(f, "--churn") == 0) {
            rc = main_double(f, v, 0.0, 1.0, &a->churn);
        } else if (strcmp(f, "--long-share") == 0) {
            rc = main_double(f, v, 0.0, 1.0, &a->long_share);
        } else if (strcmp(f, "--workers") == 0) {
            rc = main_u32(f, v, 1, 1024, &a->sim.workers_per_model);
        } else if (strcmp(f, "--cache-shapes") == 0) {
            rc = main_u32(f, v, 0, 1024, &a->sim.gpu.cache_shapes);
        } else if (strcmp(f, "--batch-size") == 0) {
            rc = main_u32(f, v, 1, 1u << 20, &a->sim.gpu.max_batch_size);
        } else if (strcmp(f, "--batch-tokens") == 0) {
            rc = main_u32(f, v, 1, UINT32_MAX, &a->sim.gpu.max_batch_tokens);
        } else if (strcmp(f, "--max-input") == 0) {
            rc = main_u32(f, v, 0, UINT32_MAX, &a->sim.gpu.max_input_tokens);
        } else if (strcmp(f, "--batch-us") == 0) {
            rc = main_u64(f, v, 0, 3600ull * 1000000, &u);
            a->sim.gpu.batch_fixed_ns = u * 1000;
        } else if (strcmp(f, "--ns-per-token") == 0) {
            rc = main_double(f, v, 0.0, 1e9, &a->sim.gpu.ns_per_padded_token);
        } else if (strcmp(f, "--starvation-ms") == 0) {
            rc = main_u64(f, v, 1, 3600ull * 1000, &u);
            a->sim.starvation_ns = u * 1000000;
        } else if (strcmp(f, "--merge-credit") == 0) {
            rc = main_double(f, v, 0.000001, 1.0, &a->sim.merge_credit);
        } else if (strcmp(f, "--cost") == 0) {
            if (strcmp(v, "declared") == 0 || strcmp(v, "estimate") == 0) {
                a->sim.declare_cost = strcmp(v, "declared") == 0;
            } else {
                fprintf(stderr, "lanesched-bench: --cost: declared or estimate, got %s\n", v);
                rc = -1;
            }
        } else if (strcmp(f, "--age-bound-ms") == 0) {
            double ms;
            rc = main_double(f, v, 0.0, 3600.0 * 1000, &ms);
            a->sim.age_bound_ns = (uint64_t)llround(ms * 1e6);
        } else if (sweep && strcmp(f, "--loads") == 0) {
            rc = main_loads(v, a->loads, &a->n_loads);
        } else if (sweep && strcmp(f, "--slo-ms") == 0) {
            rc = main_u64(f, v, 1, 3600ull * 1000 * 24, &u);
            a->slo_ns = u * 1000000;
        } else if (strcmp(f, "--policies") == 0) {
            rc = main_policies(v, a->policies);
        } else if (strcmp(f, "--trace-in") == 0) {
            a->trace_in = v;
        } else if (strcmp(f, "--trace-out") == 0) {
            a->trace_out = v;
        } else if (strcmp(f, "--json") == 0) {
            a->json = v;
        } else if (strcmp(f, "--svg") == 0) {
            a->svg = v;
        } else {
            fprintf(stderr, "lanesched-bench: unknown flag %s\n", f);
            return -1;
        }
        if (rc != 0)
            return -1;
    }
    if (a->rate > 0 && a->load > 0) {
        fprintf(stderr, "lanesched-bench: --rate and --load both set the arrival rate\n");
        return -1;
    }
    if (sweep && (a->rate > 0 || a->load > 0 || a->check)) {
        fprintf(stderr, "lanesched-bench: sweep sets the load itself (--loads); --rate, --load "
                        "and --check are sim's\n");
        return -1;
    }
    int overrides = a->rate > 0 || a->load > 0 || a->models || a->shapes || a->max_tokens ||
                    a->zipf_s >= 0 || a->burst_factor >= 0 || a->churn >= 0 || a->long_share >= 0;
    if (a->trace_in != NULL && (preset_set || seed_set || overrides)) {
        fprintf(stderr, "lanesched-bench: --trace-in replays a trace as written; --preset, "
                        "--seed and the workload overrides do not apply\n");
        return -1;
    }
    return 0;
}

/* The workload: a preset (with overrides) or a trace file. */
static int main_workload(const main_sim_args_t *a, wl_config_t *wl, wl_item_t **items, size_t *n)
{
    if (a->trace_in != NULL) {
        if (wl_trace_read(a->trace_in, wl, items, n) != 0) {
            fprintf(stderr, "lanesched-bench: %s: not a readable trace file\n", a->trace_in);
            return -1;
        }
        if (a->duration > 0) { /* cut it shorter */
            size_t k = 0;
            while (k < *n && (double)(*items)[k].t_ns < a->duration * 1e9)
                k++;
            *n = k;
            if (a->duration < wl->duration_s)
                wl->duration_s = a->duration;
        }
        return 0;
    }
    if (wl_preset(a->preset, a->seed, wl) != 0) {
        fprintf(stderr, "lanesched-bench: unknown preset %s (steady, bursty, churn, sustained)\n",
                a->preset);
        return -1;
    }
    /* Overrides keep the preset's offered load against the preset's workers (sim's defaults),
     * unless the rate itself is set (--rate, --load): a different length mix or model count is
     * then compared at the same load, not at the same item rate, and --workers, --batch-us or
     * --ns-per-token change the workers, not the traffic. */
    gpu_config_t ref_gpu;
    gpu_config_default(&ref_gpu);
    double preset_load = 0.0;
    int keep_load = a->rate <= 0 && a->load <= 0;
    if (keep_load &&
        wl_load(wl, &ref_gpu, WL_PRESET_WORKERS_PER_MODEL * wl->models, &preset_load) != 0) {
        fprintf(stderr, "lanesched-bench: cannot derive the preset's load\n");
        return -1;
    }
    if (a->duration > 0)
        wl->duration_s = a->duration;
    if (a->rate > 0)
        wl->rate = a->rate;
    if (a->models)
        wl->models = a->models;
    if (a->shapes)
        wl->shapes_per_model = a->shapes;
    if (a->max_tokens)
        wl->max_tokens = a->max_tokens;
    if (a->zipf_s >= 0)
        wl->zipf_s = a->zipf_s;
    if (a->burst_factor >= 0)
        wl->burst_factor = a->burst_factor;
    if (a->churn >= 0)
        wl->churn = a->churn;
    if (a->long_share >= 0)
        wl->long_share = a->long_share;
    if (keep_load && wl_rate_for_load(wl, &ref_gpu, WL_PRESET_WORKERS_PER_MODEL * wl->models,
                                      preset_load) != 0) {
        fprintf(stderr, "lanesched-bench: the overrides give an invalid workload\n");
        return -1;
    }
    if (a->load > 0 && /* after the overrides: the cost per item depends on them */
        wl_rate_for_load(wl, &a->sim.gpu, a->sim.workers_per_model * wl->models, a->load / 100.0) !=
            0) {
        fprintf(stderr, "lanesched-bench: --load: cannot derive a rate (a zero-cost worker?)\n");
        return -1;
    }
    /* A preset with its workload changed is not the preset any more: its claims (steady's
     * waste, each preset's hit rate) are the preset's, so the run is named <preset>+. */
    int changed = a->models || a->shapes || a->max_tokens || a->zipf_s >= 0 ||
                  a->burst_factor >= 0 || a->churn >= 0 || a->long_share >= 0;
    if (changed && strlen(wl->preset) + 1 < sizeof(wl->preset))
        strcat(wl->preset, "+");
    if (wl_generate(wl, items, n) != 0) {
        fprintf(stderr, "lanesched-bench: cannot generate the workload (config out of range or "
                        "out of memory)\n");
        return -1;
    }
    return 0;
}

/* --check: the trace survives a file round trip exactly. 0 when it does. */
static int main_check_trace(const wl_config_t *wl, const wl_item_t *items, size_t n)
{
    char path[] = "/tmp/lanesched-bench-trace-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    wl_config_t back;
    wl_item_t *again = NULL;
    size_t m = 0;
    int rc = -1;
    if (wl_trace_write(path, wl, items, n) != 0 || wl_trace_read(path, &back, &again, &m) != 0)
        goto out;
    if (m != n || back.seed != wl->seed || back.models != wl->models)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (again[i].t_ns != items[i].t_ns || again[i].signature != items[i].signature ||
            again[i].model != items[i].model || again[i].shape != items[i].shape ||
            again[i].tokens != items[i].tokens)
            goto out;
    }
    rc = 0;
out:
    free(again);
    unlink(path);
    return rc;
}

/* --check: a second run of the same policy gives the same figures (determinism). */
static int main_check_rerun(const sim_config_t *sc, const wl_item_t *items, size_t n,
                            const sim_result_t *first)
{
    sim_result_t r;
    if (sim_run(sc, items, n, first->policy, &r) != 0) {
        sim_result_free(&r);
        return -1;
    }
    int same = r.ok == first->ok && r.batches == first->batches &&
               r.padded_tokens == first->padded_tokens && r.hits == first->hits &&
               r.wait_p99_ns == first->wait_p99_ns && r.end_ns == first->end_ns &&
               r.n_series == first->n_series && r.opened == first->opened &&
               r.queues_peak == first->queues_peak;
    for (size_t i = 0; same && i < r.n_series; i++)
        same = r.series[i].queues == first->series[i].queues &&
               r.series[i].padded == first->series[i].padded;
    sim_result_free(&r);
    return same ? 0 : -1;
}

static int main_sim(int argc, char **argv)
{
    main_sim_args_t a;
    if (main_sim_parse(argc, argv, 0, &a) != 0) {
        main_usage(stderr);
        return 2;
    }
    int rc = 2;
    wl_config_t wl;
    wl_item_t *items = NULL;
    size_t n = 0, n_results = 0;
    sim_result_t results[SIM_POLICY_COUNT];
    char command[MAIN_COMMAND_MAX];
    size_t used = (size_t)snprintf(command, sizeof(command), "lanesched-bench");
    for (int i = 0; i < argc && used < sizeof(command); i++)
        used += (size_t)snprintf(command + used, sizeof(command) - used, " %s", argv[i]);

    if (main_workload(&a, &wl, &items, &n) != 0)
        goto out;
    if (n == 0) {
        fprintf(stderr, "lanesched-bench: the workload has no items\n");
        goto out;
    }
    if (a.trace_out != NULL && wl_trace_write(a.trace_out, &wl, items, n) != 0) {
        fprintf(stderr, "lanesched-bench: %s: cannot write the trace\n", a.trace_out);
        goto out;
    }
    double wall = 0.0;
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        if (!a.policies[p])
            continue;
        sim_result_t *r = &results[n_results];
        if (sim_run(&a.sim, items, n, (sim_policy_t)p, r) != 0) {
            fprintf(stderr, "lanesched-bench: %s: %s\n", sim_policy_name((sim_policy_t)p),
                    r->error);
            sim_result_free(r);
            goto out;
        }
        n_results++;
        wall += r->wall_s;
    }
    report_t rep = {
        .wl = &wl,
        .items = items,
        .n_items = n,
        .sim = &a.sim,
        .results = results,
        .n_results = n_results,
        .command = command,
    };
    int claims_failed = report_table_print(stdout, &rep);
    printf("(%.1f s of wall time for %zu policies)\n", wall, n_results);
    if (a.json != NULL && report_json_write(a.json, &rep) != 0) {
        fprintf(stderr, "lanesched-bench: %s: cannot write JSON\n", a.json);
        goto out;
    }
    if (a.svg != NULL && report_svg_write(a.svg, &rep) != 0) {
        fprintf(stderr, "lanesched-bench: %s: cannot write SVG\n", a.svg);
        goto out;
    }
    rc = 0;
    for (size_t i = 0; i < n_results; i++) {
        const sim_result_t *r = &results[i];
        if (!r->ok || r->tokens_in != r->tokens_done)
            rc = 1;
    }
    if (a.claims && claims_failed > 0) {
        printf("claims: %d check(s) said NO\n", claims_failed);
        rc = 1;
    }
    if (a.check) {
        if (main_check_trace(&wl, items, n) != 0) {
            printf("check: the trace does NOT round-trip through a file\n");
            rc = 1;
        } else {
            printf("check: the trace round-trips through a file\n");
        }
        for (size_t i = 0; i < n_results; i++) {
            if (results[i].policy != SIM_LANES_SEED && results[i].policy != SIM_LANES)
                continue;
            int same = main_check_rerun(&a.sim, items, n, &results[i]) == 0;
            printf("check: a rerun of %s is %s\n", sim_policy_name(results[i].policy),
                   same ? "identical" : "NOT identical");
            if (!same)
                rc = 1;
        }
        printf("check: %s\n", rc == 0 ? "passed" : "FAILED");
    }
out:
    for (size_t i = 0; i < n_results; i++)
        sim_result_free(&results[i]);
    free(items);
    return rc;
}

/* sweep_args_t.trace_at: the workload at one load. */
static int main_trace_at(void *ctx, double load_pct, wl_config_t *wl, wl_item_t **items, size_t *n)
{
    main_sim_args_t *a = ctx;
    if (a->trace_in == NULL) {
        main_sim_args_t at = *a;
        at.load = load_pct;
        return main_workload(&at, wl, items, n);
    }
    if (a->trace == NULL) {
        if (main_workload(a, &a->trace_wl, &a->trace, &a->trace_n) != 0)
            return -1;
        a->trace_load = sweep_offered(&a->sim, a->trace, a->trace_n);
        if (!(a->trace_load > 0.0)) {
            fprintf(stderr, "lanesched-bench: %s: the trace offers no load to scale\n",
                    a->trace_in);
            return -1;
        }
    }
    /* The same items, arrival times stretched so the trace offers load_pct. */
    double stretch = a->trace_load / load_pct;
    *items = malloc((a->trace_n + 1) * sizeof(**items));
    if (*items == NULL)
        return -1;
    for (size_t i = 0; i < a->trace_n; i++) {
        (*items)[i] = a->trace[i];
        (*items)[i].t_ns = (uint64_t)llround((double)a->trace[i].t_ns * stretch);
    }
    *n = a->trace_n;
    *wl = a->trace_wl;
    wl->duration_s *= stretch;
    return 0;
}

static int main_sweep(int argc, char **argv)
{
    main_sim_args_t a;
    if (main_sim_parse(argc, argv, 1, &a) != 0) {
        main_usage(stderr);
        return 2;
    }
    char command[MAIN_COMMAND_MAX];
    size_t used = (size_t)snprintf(command, sizeof(command), "lanesched-bench");
    for (int i = 0; i < argc && used < sizeof(command); i++)
        used += (size_t)snprintf(command + used, sizeof(command) - used, " %s", argv[i]);
    sweep_args_t sa = {
        .trace_at = main_trace_at,
        .ctx = &a,
        .sim = &a.sim,
        .policies = a.policies,
        .loads = a.loads,
        .n_loads = a.n_loads,
        .slo_ns = a.slo_ns,
        .json = a.json,
        .svg = a.svg,
        .command = command,
        .claims = a.claims,
    };
    int rc = sweep_run(&sa);
    free(a.trace);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        main_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *mode = argv[1];
    if (strcmp(mode, "sim") == 0)
        return main_sim(argc - 1, argv + 1);
    if (strcmp(mode, "sweep") == 0)
        return main_sweep(argc - 1, argv + 1);
    if (strcmp(mode, "live") == 0) {
#ifdef LANESCHED_BENCH_LIVE
        return live_main(argc - 1, argv + 1);
#else
        fprintf(stderr, "lanesched-bench: live mode not built (tools/bench/live.c is missing)\n");
        return 2;
#endif
    }
    if (strcmp(mode, "baseline") == 0) {
#ifdef LANESCHED_BENCH_BASELINE
        return base_main(argc - 1, argv + 1);
#else
        fprintf(stderr,
                "lanesched-bench: baseline mode not built (tools/bench/baseline.c is missing)\n");
        return 2;
#endif
    }
    fprintf(stderr, "lanesched-bench: unknown mode %s\n", mode);
    main_usage(stderr);
    return 2;
}
