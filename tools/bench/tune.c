/*
 * tune.c - the bucket schemes at a wait budget: pow2 and range64 with a Triton-style maximum
 * queue delay (sim_queue.c invariant 4), the delay chosen from a grid as an operator tuning
 * Triton would: the one that spends the least GPU time while the p99 wait stays within the
 * budget.
 *
 * Invariants:
 *   1. Every delay of the grid replays the same trace; the chosen run is returned whole, its
 *      delay in sim_result_t.delay_ns, with budget_met saying whether its p99 is within it.
 *   2. When no delay keeps the p99 within the budget, the run with the shortest p99 is chosen
 *      (the scheme cannot meet the budget: its GPU time at its best effort is what `lanes` is
 *      compared against).
 *   3. Ties in GPU time go to the shorter delay.
 *
 * Rejected: a search (bisection, golden section) over the delay: p99 and GPU time are not
 * monotonic in the delay on bursty traces, and a fixed grid prints the same choice a reader can
 * rerun with --queue-delay-ms.
 */
#include "bench.h"

/* The grid, in shares of the budget. */
static const double tune_grid[] = {0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4,
                                   0.5, 0.6,  0.7,  0.8, 0.9, 1.0};
#define TUNE_GRID_N (sizeof(tune_grid) / sizeof(tune_grid[0]))

int sim_run_tuned(const sim_config_t *cfg, const wl_item_t *items, size_t n, sim_policy_t policy,
                  int tune, sim_result_t *out)
{
    uint64_t budget_ns = cfg->slo_ns;
    if (!tune || budget_ns == 0 || (policy != SIM_POW2 && policy != SIM_RANGE64))
        return sim_run(cfg, items, n, policy, out);
    sim_config_t c = *cfg;
    int have = 0;
    for (size_t g = 0; g < TUNE_GRID_N; g++) {
        c.bucket_delay_ns = (uint64_t)(tune_grid[g] * (double)budget_ns);
        sim_result_t r;
        if (sim_run(&c, items, n, policy, &r) != 0) {
            if (have)
                sim_result_free(out);
            *out = r;
            return -1;
        }
        r.budget_met = r.wait_p99_ns <= budget_ns;
        int better = !have || (r.budget_met && !out->budget_met) ||
                     (r.budget_met && out->budget_met && r.busy_ns < out->busy_ns) ||
                     (!r.budget_met && !out->budget_met && r.wait_p99_ns < out->wait_p99_ns);
        if (better) {
            if (have)
                sim_result_free(out);
            *out = r;
            have = 1;
        } else {
            sim_result_free(&r);
        }
    }
    out->tuned = 1;
    return 0;
}
