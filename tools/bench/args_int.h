/*
 * args_int.h - private to main.c and args.c: sim's and sweep's parsed flags.
 *
 * Ownership: args_sim_t borrows argv's strings; trace (sweep with --trace-in) is owned by it and
 * freed by its user with free().
 */
#ifndef LANESCHED_BENCH_ARGS_INT_H
#define LANESCHED_BENCH_ARGS_INT_H

#include "bench.h"

#include <stdio.h>

/* The sweep's default loads: 40% to 110% in steps of 10, and its SLO. */
#define ARGS_SWEEP_LOAD_FIRST 40.0
#define ARGS_SWEEP_LOAD_LAST  110.0
#define ARGS_SWEEP_LOAD_STEP  10.0
#define ARGS_SWEEP_SLO_MS     5000u

typedef struct {
    const char *preset, *trace_in, *trace_out, *json, *svg;
    uint64_t seed;
    double duration, rate, load; /* 0 = the preset's */
    /* workload overrides; negative / 0 = the preset's */
    uint32_t models, shapes, max_tokens;
    double zipf_s, burst_factor, churn, long_share;
    uint32_t prefix_min, prefix_max; /* --prefixes / --prefix-tokens: 0, 0 = none */
    int check;
    int queue_delay_set; /* --queue-delay-ms: the bucket schemes' delay, not tuned */
    int claims;          /* --claims: a NO among the checks fails the run */
    const char *unmet;   /* --unmet KEYS: checks known to fail, printed and not counted */
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
} args_sim_t;

/* Every mode's usage text. */
void args_usage(FILE *f);
/* Parses sim's flags (sweep = 1: sweep's); 0, or -1 with the reason on stderr. Exits 0 after
 * --help. */
int args_sim_parse(int argc, char **argv, int sweep, args_sim_t *a /* out */);
/* The workload the flags name: 0, or -1 with the reason on stderr. *items returned to free(). */
int args_workload(const args_sim_t *a, wl_config_t *wl /* out */, wl_item_t **items /* out */,
                  size_t *n /* out */);

#endif
