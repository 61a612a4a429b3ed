/*
 * sweep.c - lanesched-bench sweep: one trace shape at a range of offered loads, every policy at
 * every load, in simulated time (sim_run), and each policy's capacity at an SLO: the highest
 * load at which its p99 wait stays within --slo-ms.
 *
 * Owns: the loop over loads and policies, the cells it keeps of each run, the capacity rule.
 * The table, JSON, chart and checks are report_sweep.c's.
 *
 * Capacity. Loads go up; the first load whose p99 wait exceeds the SLO ends the search, and the
 * capacity is where the line between it and the load before crosses the SLO (linear in both).
 * A policy within the SLO at every load has at least the highest load; one over it at the first
 * has at most the first (both are printed as such, and a check uses the side that is sure).
 *
 * Invariants:
 *   1. At each load every policy replays the same trace (sim.c's invariant: all policies on the
 *      same items); loads differ only in arrival times (a preset drawn at another rate with the
 *      same seed, so the same shapes and lengths; a trace file stretched in time).
 *   2. A run that breaks an invariant or loses a token makes the exit status 1, whatever the
 *      checks say.
 *   3. Under a wait budget (--slo-ms given: sim_config_t.slo_ns), lanes runs with it and pow2 and
 *      range64 with their queue delay tuned to it at each load (tune.c); without one every
 *      policy runs as sim does, and --slo-ms's default is only capacity's SLO.
 *
 * Rejected: interpolating the p99 on a log scale. The sweep's steps are coarse either way, and a
 * linear crossing is what a reader checks against the table by hand.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int sweep_capacity(const sweep_t *sw, sim_policy_t p, double *out)
{
    const sweep_args_t *a = sw->args;
    double prev_load = 0.0, prev_p99 = 0.0;
    for (size_t i = 0; i < a->n_loads; i++) {
        const sweep_cell_t *c = &sw->cells[i][p];
        double p99 = (double)c->wait_p99_ns;
        if (p99 <= (double)a->slo_ns) {
            prev_load = a->loads[i];
            prev_p99 = p99;
            continue;
        }
        if (i == 0) {
            *out = a->loads[0];
            return -1;
        }
        double span = p99 - prev_p99;
        double frac = span > 0.0 ? ((double)a->slo_ns - prev_p99) / span : 0.0;
        *out = prev_load + frac * (a->loads[i] - prev_load);
        return 1;
    }
    *out = a->loads[a->n_loads - 1];
    return 0;
}

static void sweep_cell_fill(sweep_cell_t *c, const sim_result_t *r, double offered_pct)
{
    *c = (sweep_cell_t){
        .ran = 1,
        .ok = r->ok,
        .busy_ns = r->busy_ns,
        .batches = r->batches,
        .wait_p50_ns = r->wait_p50_ns,
        .wait_p99_ns = r->wait_p99_ns,
        .wait_max_ns = r->wait_max_ns,
        .waste_pct = report_pct(r->padded_tokens - r->real_tokens, r->padded_tokens),
        .hit_pct = report_pct(r->hits, r->batches),
        .items_per_batch = r->batches ? (double)r->items_served / (double)r->batches : 0.0,
        .offered_pct = offered_pct,
        .token_diff = (int64_t)(r->tokens_in - r->tokens_done),
        .delay_ns = r->delay_ns,
    };
}

double sweep_offered(const sim_config_t *sc, const wl_item_t *items, size_t n)
{
    double secs = n ? (double)items[n - 1].t_ns / 1e9 : 0.0, ns = 0.0;
    uint32_t models = 0;
    for (size_t i = 0; i < n; i++) {
        ns += gpu_item_ns(&sc->gpu, items[i].tokens);
        models = items[i].model + 1 > models ? items[i].model + 1 : models;
    }
    if (secs <= 0.0 || models == 0)
        return 0.0;
    return 100.0 * ns / 1e9 / secs / ((double)sc->workers_per_model * models);
}

int sweep_run(const sweep_args_t *a)
{
    if (a->n_loads == 0 || a->n_loads > SWEEP_LOADS_MAX)
        return 2;
    sweep_t *sw = calloc(1, sizeof(*sw));
    if (sw == NULL)
        return 2;
    sw->args = a;
    int rc = 0;
    for (size_t i = 0; i < a->n_loads; i++) {
        wl_config_t wl;
        wl_item_t *items = NULL;
        size_t n = 0;
        if (a->trace_at(a->ctx, a->loads[i], &wl, &items, &n) != 0) {
            free(items);
            rc = 2;
            goto out;
        }
        if (i == 0)
            sw->wl = wl;
        double offered = sweep_offered(a->sim, items, n);
        for (int p = 0; p < SIM_POLICY_COUNT; p++) {
            if (!a->policies[p])
                continue;
            sim_result_t r;
            if (sim_run_tuned(a->sim, items, n, (sim_policy_t)p, a->tune, &r) != 0) {
                fprintf(stderr, "lanesched-bench: %s at %.0f%%: %s\n",
                        sim_policy_name((sim_policy_t)p), a->loads[i], r.error);
                sim_result_free(&r);
                free(items);
                rc = 2;
                goto out;
            }
            sweep_cell_fill(&sw->cells[i][p], &r, offered);
            sw->wall_s += r.wall_s;
            if (!r.ok || r.tokens_in != r.tokens_done) { /* invariant 2 */
                fprintf(stderr, "lanesched-bench: %s at %.0f%%: %s\n",
                        sim_policy_name((sim_policy_t)p), a->loads[i],
                        r.ok ? "tokens in and completed differ" : r.error);
                rc = 1;
            }
            sim_result_free(&r);
        }
        free(items);
    }
    int failed = report_sweep_print(stdout, sw);
    if (a->json != NULL && report_sweep_json_write(a->json, sw) != 0) {
        fprintf(stderr, "lanesched-bench: %s: cannot write JSON\n", a->json);
        rc = 2;
        goto out;
    }
    if (a->svg != NULL && report_sweep_svg_write(a->svg, sw) != 0) {
        fprintf(stderr, "lanesched-bench: %s: cannot write SVG\n", a->svg);
        rc = 2;
        goto out;
    }
    if (a->claims && a->unmet != NULL)
        printf("claims: known unmet, printed and not counted: %s\n", a->unmet);
    if (a->claims && failed > 0) {
        printf("claims: %d check(s) failed\n", failed);
        if (rc == 0)
            rc = 1;
    }
out:
    free(sw);
    return rc;
}
