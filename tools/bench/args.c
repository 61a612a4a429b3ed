/*
 * args.c - lanesched-bench's sim and sweep flags: the usage text, parsing with every flag's
 * range check, and the workload they name (a preset with its overrides, or a trace file).
 *
 * Invariants (main.c's 2): flags never change the workload behind the user's back: --duration
 * and --rate override the preset and are printed in the header; with --trace-in the trace is
 * replayed as written (--duration may only cut it shorter); a preset whose workload a flag
 * changed is named <preset>+, so its claims are not the preset's.
 *
 * Rejected: getopt_long. It is a GNU extension, and the flag set is small; the same explicit
 * loop as tools/microbench.c keeps every flag's parsing and range check in one place.
 */
#include "args_int.h"

#include "common/usage.h"

#include "scheduler/core/sched.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ARGS_DEFAULT_SEED   42ull
#define ARGS_DEFAULT_PRESET "steady"

void args_usage(FILE *f)
{
    sim_config_t d;
    sim_config_default(&d);
    fprintf(
        f,
        "usage: lanesched-bench sim [flags]        policies side by side, in simulated time\n"
        "       lanesched-bench sweep [flags]      every policy at a range of loads: p99 "
        "wait,\n"
        "                                          GPU seconds, capacity at an SLO\n"
        "       lanesched-bench live [flags]       the trace over NATS against lanesched\n"
        "       lanesched-bench baseline [flags]   the same items through JetStream\n"
        "       lanesched-bench throughput [flags] the broker saturated on the realistic\n"
        "                                          workload (many shapes, spread lengths),\n"
        "                                          beside JetStream at its best (see\n"
        "                                          throughput --help)\n"
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
        "  --prefixes          each shape gets a prefix of %u-%u tokens (log-uniform, drawn\n"
        "                      from the seed; the items are the same): a worker pays it once\n"
        "                      per batch when its cache does not hold the shape\n"
        "  --prefix-tokens MIN,MAX   the same with that range\n"
        "  --workers N         simulated GPU workers per model (default %" PRIu32 ")\n"
        "  --cache-shapes C    each worker's prefix cache: LRU of C shapes (default %" PRIu32 ")\n"
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
        "  --merge-credit-loaded X  the same while a model's offered load is where the hold\n"
        "                      is whole (--hold-load + --hold-ramp; default %g x --merge-credit)\n"
        "  --hold-ms X         lanes: while a model's offered load is at least --hold-load\n"
        "                      (default %g) of its workers' time, rising to the whole hold\n"
        "                      over --hold-ramp more (default %g), a batch whose fixed cost is\n"
        "                      at least --hold-share (default %g) of its GPU time waits for\n"
        "                      company until its oldest item waited X ms (default %g; 0 = off)\n"
        "  --hold-burst F      lanes: after a second whose arrivals asked for more than the\n"
        "                      workers' time (remembered about a minute), the hold is F times\n"
        "                      as long at any load (default %g; off = the gate and ramp only)\n"
        "  --cost declared|estimate  lanes: the workers declare their cost in Register, or "
        "the\n"
        "                      scheduler estimates it from their batches' times (default "
        "declared)\n"
        "  --slo-ms N          a wait budget, the p99 queue wait accepted: lanes waits for\n"
        "                      company within it; pow2 and range64 run with the queue delay\n"
        "                      of a grid (0-100%% of N) that spends the least GPU time within it\n"
        "  --queue-delay-ms D  pow2 and range64: a bucket goes when full or its oldest item\n"
        "                      waited D (Triton's max_queue_delay; default 0, or tuned by "
        "--slo-ms)\n"
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
        "  --claims            exit 1 when any of the printed checks (the claims of\n"
        "                      docs/bench.md) says NO (CI runs it on every preset at full length)\n"
        "  --unmet KEYS        with --claims: the checks named (comma list of the keys the\n"
        "                      checks print in brackets) are known to fail: a NO is printed and\n"
        "                      not counted, a yes is counted as a failure (drop it from KEYS)\n"
        "\n"
        "sweep flags: sim's (not --rate, --load, --check), and\n"
        "  --loads LIST        offered loads in percent, ascending (default 40,50,...,110);\n"
        "                      with --trace-in the trace's arrival times are stretched to "
        "each\n"
        "  --slo-ms N          the SLO of capacity: p99 wait at most N ms (default %u); given,\n"
        "                      also sim's wait budget at every load\n"
        "  --json FILE, --svg FILE   the sweep as JSON; the chart (p99 wait against load)\n",
        ARGS_DEFAULT_PRESET, ARGS_DEFAULT_SEED, WL_PREFIX_MIN_DEFAULT, WL_PREFIX_MAX_DEFAULT,
        d.workers_per_model, d.gpu.cache_shapes, d.gpu.max_batch_size, d.gpu.max_batch_tokens,
        d.gpu.max_input_tokens, d.gpu.batch_fixed_ns / 1000, d.gpu.ns_per_padded_token,
        d.starvation_ns / 1000000, (double)d.age_bound_ns / 1e6, SCHED_MERGE_CREDIT_DEFAULT,
        SCHED_MERGE_CREDIT_LOADED, SCHED_HOLD_LOAD_DEFAULT, SCHED_HOLD_RAMP_DEFAULT,
        SCHED_HOLD_SHARE_DEFAULT, (double)d.hold_ns / 1e6, SCHED_HOLD_BURST_DEFAULT,
        ARGS_SWEEP_SLO_MS);
}

static int args_u64(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
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

static int args_double(const char *flag, const char *s, double lo, double hi, double *out)
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

static int args_u32(const char *flag, const char *s, uint64_t lo, uint64_t hi, uint32_t *out)
{
    uint64_t v;
    if (args_u64(flag, s, lo, hi, &v) != 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Parses "MIN,MAX" (1 <= MIN <= MAX) into the two. */
static int args_range(const char *flag, const char *s, uint32_t *lo, uint32_t *hi)
{
    char buf[64];
    const char *comma = strchr(s, ',');
    if (comma == NULL || (size_t)(comma - s) >= sizeof(buf)) {
        fprintf(stderr, "lanesched-bench: %s: want MIN,MAX, got %s\n", flag, s);
        return -1;
    }
    memcpy(buf, s, (size_t)(comma - s));
    buf[comma - s] = '\0';
    if (args_u32(flag, buf, 1, 1u << 24, lo) != 0 ||
        args_u32(flag, comma + 1, *lo, 1u << 24, hi) != 0)
        return -1;
    return 0;
}

/* Parses --policies into a selection mask. */
static int args_policies(const char *list, int *sel)
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

/* Parses "40,50,60" into ascending loads. */
static int args_loads(const char *list, double *loads, size_t *n)
{
    char buf[512];
    if (strlen(list) >= sizeof(buf))
        return -1;
    memcpy(buf, list, strlen(list) + 1);
    *n = 0;
    char *save = NULL;
    for (char *w = strtok_r(buf, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        double v;
        if (*n == SWEEP_LOADS_MAX || args_double("--loads", w, 1.0, 100000.0, &v) != 0 ||
            (*n > 0 && v <= loads[*n - 1])) {
            fprintf(stderr, "lanesched-bench: --loads: up to %u ascending percentages\n",
                    SWEEP_LOADS_MAX);
            return -1;
        }
        loads[(*n)++] = v;
    }
    if (*n == 0)
        fprintf(stderr, "lanesched-bench: --loads names no load (e.g. --loads 40,60,80)\n");
    return *n > 0 ? 0 : -1;
}

int args_sim_parse(int argc, char **argv, int sweep, args_sim_t *a)
{
    *a = (args_sim_t){
        .preset = ARGS_DEFAULT_PRESET,
        .seed = ARGS_DEFAULT_SEED,
        .zipf_s = -1,
        .burst_factor = -1,
        .churn = -1,
        .long_share = -1,
        .sweep = sweep,
        .slo_ns = ARGS_SWEEP_SLO_MS * 1000000ull,
    };
    for (double l = ARGS_SWEEP_LOAD_FIRST; l <= ARGS_SWEEP_LOAD_LAST + 1e-9;
         l += ARGS_SWEEP_LOAD_STEP)
        a->loads[a->n_loads++] = l;
    sim_config_default(&a->sim);
    for (int p = 0; p < SIM_POLICY_COUNT; p++)
        a->policies[p] = 1;
    int preset_set = 0, seed_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            args_usage(stdout);
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
        if (strcmp(f, "--prefixes") == 0) {
            a->prefix_min = WL_PREFIX_MIN_DEFAULT;
            a->prefix_max = WL_PREFIX_MAX_DEFAULT;
            continue;
        }
        if (i + 1 >= argc) {
            usage_missing_value("lanesched-bench", f);
            return -1;
        }
        const char *v = argv[++i];
        uint64_t u = 0;
        int rc = 0;
        if (strcmp(f, "--preset") == 0) {
            a->preset = v;
            preset_set = 1;
        } else if (strcmp(f, "--seed") == 0) {
            rc = args_u64(f, v, 0, UINT64_MAX, &a->seed);
            seed_set = 1;
        } else if (strcmp(f, "--duration") == 0) {
            rc = args_double(f, v, 0.001, 1e6, &a->duration);
        } else if (strcmp(f, "--rate") == 0) {
            rc = args_double(f, v, 0.001, 1e8, &a->rate);
        } else if (strcmp(f, "--load") == 0) {
            rc = args_double(f, v, 0.1, 100000.0, &a->load);
        } else if (strcmp(f, "--models") == 0) {
            rc = args_u32(f, v, 1, WL_MODELS_MAX, &a->models);
        } else if (strcmp(f, "--shapes") == 0) {
            rc = args_u32(f, v, 1, 2048, &a->shapes);
        } else if (strcmp(f, "--max-tokens") == 0) {
            rc = args_u32(f, v, 1, 1u << 24, &a->max_tokens);
        } else if (strcmp(f, "--zipf") == 0) {
            rc = args_double(f, v, 0.0, 10.0, &a->zipf_s);
        } else if (strcmp(f, "--burst-factor") == 0) {
            rc = args_double(f, v, 1.0, 1000.0, &a->burst_factor);
        } else if (strcmp(f, "--churn") == 0) {
            rc = args_double(f, v, 0.0, 1.0, &a->churn);
        } else if (strcmp(f, "--long-share") == 0) {
            rc = args_double(f, v, 0.0, 1.0, &a->long_share);
        } else if (strcmp(f, "--workers") == 0) {
            rc = args_u32(f, v, 1, 1024, &a->sim.workers_per_model);
        } else if (strcmp(f, "--cache-shapes") == 0) {
            rc = args_u32(f, v, 0, 1024, &a->sim.gpu.cache_shapes);
        } else if (strcmp(f, "--batch-size") == 0) {
            rc = args_u32(f, v, 1, 1u << 20, &a->sim.gpu.max_batch_size);
        } else if (strcmp(f, "--batch-tokens") == 0) {
            rc = args_u32(f, v, 1, UINT32_MAX, &a->sim.gpu.max_batch_tokens);
        } else if (strcmp(f, "--max-input") == 0) {
            rc = args_u32(f, v, 0, UINT32_MAX, &a->sim.gpu.max_input_tokens);
        } else if (strcmp(f, "--batch-us") == 0) {
            rc = args_u64(f, v, 0, 3600ull * 1000000, &u);
            a->sim.gpu.batch_fixed_ns = u * 1000;
        } else if (strcmp(f, "--ns-per-token") == 0) {
            rc = args_double(f, v, 0.0, 1e9, &a->sim.gpu.ns_per_padded_token);
        } else if (strcmp(f, "--starvation-ms") == 0) {
            rc = args_u64(f, v, 1, 3600ull * 1000, &u);
            a->sim.starvation_ns = u * 1000000;
        } else if (strcmp(f, "--merge-credit") == 0) {
            rc = args_double(f, v, 0.000001, 1.0, &a->sim.merge_credit);
        } else if (strcmp(f, "--merge-credit-loaded") == 0) {
            rc = args_double(f, v, 0.000001, 1.0, &a->sim.merge_credit_loaded);
        } else if (strcmp(f, "--cost") == 0) {
            if (strcmp(v, "declared") == 0 || strcmp(v, "estimate") == 0) {
                a->sim.declare_cost = strcmp(v, "declared") == 0;
            } else {
                fprintf(stderr, "lanesched-bench: --cost: declared or estimate, got %s\n", v);
                rc = -1;
            }
        } else if (strcmp(f, "--hold-ms") == 0) {
            double ms;
            rc = args_double(f, v, 0.0, 3600.0 * 1000, &ms);
            a->sim.hold_ns = (uint64_t)llround(ms * 1e6);
        } else if (strcmp(f, "--hold-load") == 0) {
            rc = args_double(f, v, 0.000001, 100.0, &a->sim.hold_load);
        } else if (strcmp(f, "--hold-ramp") == 0) {
            rc = args_double(f, v, 0.000001, 100.0, &a->sim.hold_ramp);
        } else if (strcmp(f, "--hold-share") == 0) {
            rc = args_double(f, v, 0.000001, 1.0, &a->sim.hold_share);
        } else if (strcmp(f, "--hold-burst") == 0) {
            if (strcmp(v, "off") == 0)
                a->sim.hold_burst = -1.0;
            else
                rc = args_double(f, v, 0.000001, 100.0, &a->sim.hold_burst);
        } else if (strcmp(f, "--queue-delay-ms") == 0) {
            double ms;
            rc = args_double(f, v, 0.0, 3600.0 * 1000, &ms);
            a->sim.bucket_delay_ns = (uint64_t)llround(ms * 1e6);
            a->queue_delay_set = 1;
        } else if (strcmp(f, "--age-bound-ms") == 0) {
            double ms;
            rc = args_double(f, v, 0.0, 3600.0 * 1000, &ms);
            a->sim.age_bound_ns = (uint64_t)llround(ms * 1e6);
        } else if (sweep && strcmp(f, "--loads") == 0) {
            rc = args_loads(v, a->loads, &a->n_loads);
        } else if (strcmp(f, "--slo-ms") == 0) {
            rc = args_u64(f, v, 1, 3600ull * 1000 * 24, &u);
            a->slo_ns = a->sim.slo_ns = u * 1000000;
        } else if (strcmp(f, "--prefix-tokens") == 0) {
            rc = args_range("--prefix-tokens", v, &a->prefix_min, &a->prefix_max);
        } else if (strcmp(f, "--policies") == 0) {
            rc = args_policies(v, a->policies);
        } else if (strcmp(f, "--trace-in") == 0) {
            a->trace_in = v;
        } else if (strcmp(f, "--trace-out") == 0) {
            a->trace_out = v;
        } else if (strcmp(f, "--json") == 0) {
            a->json = v;
        } else if (strcmp(f, "--unmet") == 0) {
            a->unmet = v;
        } else if (strcmp(f, "--svg") == 0) {
            a->svg = v;
        } else {
            usage_unknown_flag("lanesched-bench", f);
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
                    a->zipf_s >= 0 || a->burst_factor >= 0 || a->churn >= 0 || a->long_share >= 0 ||
                    a->prefix_max > 0;
    if (a->trace_in != NULL && (preset_set || seed_set || overrides)) {
        fprintf(stderr, "lanesched-bench: --trace-in replays a trace as written, its prefixes "
                        "from its prefix_tokens column; --preset, --seed, --prefixes and the "
                        "workload overrides do not apply\n");
        return -1;
    }
    return 0;
}

/* The workload: a preset (with overrides) or a trace file. */
int args_workload(const args_sim_t *a, wl_config_t *wl, wl_item_t **items, size_t *n)
{
    if (a->trace_in != NULL) {
        char err[512] = "";
        if (wl_trace_read(a->trace_in, wl, items, n, err, sizeof(err)) != 0) {
            fprintf(stderr, "lanesched-bench: --trace-in %s\n", err);
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
    wl->prefix_min = a->prefix_min; /* the same items either way (workload.c) */
    wl->prefix_max = a->prefix_max;
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
