/*
 * main.c - the lanesched-bench command line: `sim`, `sweep`, `live` and `baseline`.
 *
 * Owns: the sim and sweep modes' drivers (their flags and workload are args.c's): running the
 * policies in table order, the outputs (table, --json, --svg, --trace-out), --check and the
 * exit status. live and baseline parse their own arguments (live_main in live.c, base_main in
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
 */
#include "args_int.h"
#include "common/usage.h"
#include "common/version.h"

#include "scheduler/core/sched.h"

#ifdef LANESCHED_BENCH_LIVE
#include "live.h"
#endif
#ifdef LANESCHED_BENCH_BASELINE
#include "baseline.h"
#endif
#ifdef LANESCHED_BENCH_THROUGHPUT
#include "throughput.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAIN_COMMAND_MAX 1024

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
    if (wl_trace_write(path, wl, items, n) != 0 ||
        wl_trace_read(path, &back, &again, &m, NULL, 0) != 0)
        goto out;
    if (m != n || back.seed != wl->seed || back.models != wl->models)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (again[i].t_ns != items[i].t_ns || again[i].signature != items[i].signature ||
            again[i].model != items[i].model || again[i].shape != items[i].shape ||
            again[i].tokens != items[i].tokens || again[i].prefix_tokens != items[i].prefix_tokens)
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
    args_sim_t a;
    if (args_sim_parse(argc, argv, 0, &a) != 0)
        return USAGE_EXIT; /* the parser said why, in common/usage.h's words */
    int rc = 2;
    wl_config_t wl;
    wl_item_t *items = NULL;
    size_t n = 0, n_results = 0;
    sim_result_t results[SIM_POLICY_COUNT];
    char command[MAIN_COMMAND_MAX];
    size_t used = (size_t)snprintf(command, sizeof(command), "lanesched-bench");
    for (int i = 0; i < argc && used < sizeof(command); i++)
        used += (size_t)snprintf(command + used, sizeof(command) - used, " %s", argv[i]);

    if (args_workload(&a, &wl, &items, &n) != 0)
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
        if (sim_run_tuned(&a.sim, items, n, (sim_policy_t)p, !a.queue_delay_set, r) != 0) {
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
        .unmet = a.unmet,
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
    if (a.claims && a.unmet != NULL)
        printf("claims: known unmet, printed and not counted: %s\n", a.unmet);
    if (a.claims && claims_failed > 0) {
        printf("claims: %d check(s) failed\n", claims_failed);
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
    args_sim_t *a = ctx;
    if (a->trace_in == NULL) {
        args_sim_t at = *a;
        at.load = load_pct;
        return args_workload(&at, wl, items, n);
    }
    if (a->trace == NULL) {
        if (args_workload(a, &a->trace_wl, &a->trace, &a->trace_n) != 0)
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
    args_sim_t a;
    if (args_sim_parse(argc, argv, 1, &a) != 0)
        return USAGE_EXIT;
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
        .unmet = a.unmet,
        .tune = !a.queue_delay_set,
    };
    int rc = sweep_run(&sa);
    free(a.trace);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        args_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        version_print(stdout, "lanesched-bench");
        return 0;
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
#ifdef LANESCHED_BENCH_THROUGHPUT
    if (strcmp(mode, "throughput") == 0)
        return tp_main(argc - 1, argv + 1);
#endif
    if (mode[0] == '-')
        usage_unknown_flag("lanesched-bench", mode);
    else
        usage_unknown_command("lanesched-bench", mode);
    return USAGE_EXIT;
}
