/*
 * report.c - lanesched-bench's sim output: the table with its notes and checks, and the JSON
 * results. The SVG chart is report_svg.c's, drawn from the same figures (report_int.h).
 *
 * Owns: every figure's definition as printed (each computed here from sim_result_t counters, in
 * one place, so the table, the JSON and the chart cannot disagree).
 *
 * Definitions (the first four decide):
 *   gpu s          the workers' busy time for the trace, as their service model charges it
 *                  (gpu.c: fixed cost per batch + cost per padded token), summed over workers
 *   vs best        gpu s over the better of pow2 and range64 in the same run
 *   items/b        items per batch
 *   wait           arrival -> dispatch, simulated time, over every item: p50, p99, max
 *   waste %        (padded - real) / padded tokens, over every batch of the run
 *   hit %          batches whose shape was in the worker's LRU cache / batches
 *   queues         lanes in use (rolling lanes: lanes_in_use summed over shapes) or baseline
 *                  queues in use, sampled every simulated second: peak, mean, and the peak of
 *                  any one shape
 *   reuses/s new/s items into an existing lane (queue) / lanes (queues) opened, per second of
 *                  the trace's arrival window
 *   reuse:new      items into an existing lane / lanes opened, over the second half of the
 *                  arrival window (after warm-up): the article's 36,000 : 1
 *   batches/s      batches per second of simulated GPU busy time (all workers)
 *   tokens         submitted, completed by a worker, and their difference (must be 0)
 *
 * Invariants:
 *   1. Output is a pure function of the report: no clock, no locale-dependent formatting beyond
 *      the C locale's (the bench never calls setlocale), so two runs diff cleanly.
 */
#include "report_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Figures.                                                                                    */

double report_pct(uint64_t num, uint64_t den)
{
    return den ? 100.0 * (double)num / (double)den : 0.0;
}

double report_waste_pct(const sim_result_t *r)
{
    return report_pct(r->padded_tokens - r->real_tokens, r->padded_tokens);
}

double report_hit_pct(const sim_result_t *r)
{
    return report_pct(r->hits, r->batches);
}

double report_per_s(uint64_t n, double seconds)
{
    return seconds > 0.0 ? (double)n / seconds : 0.0;
}

double report_batches_per_gpu_s(const sim_result_t *r)
{
    return r->busy_ns ? (double)r->batches * 1e9 / (double)r->busy_ns : 0.0;
}

int64_t report_token_diff(const sim_result_t *r)
{
    return (int64_t)(r->tokens_in - r->tokens_done);
}

const sim_result_t *report_find(const report_t *rep, sim_policy_t p)
{
    for (size_t i = 0; i < rep->n_results; i++) {
        if (rep->results[i].policy == p)
            return &rep->results[i];
    }
    return NULL;
}

/* A duration for people: 850us, 12.3ms, 4.56s, 312s. */
void report_dur(char *buf, size_t len, uint64_t ns)
{
    double s = (double)ns / 1e9;
    if (ns < 1000000)
        snprintf(buf, len, "%.0fus", (double)ns / 1e3);
    else if (s < 1.0)
        snprintf(buf, len, "%.1fms", s * 1e3);
    else if (s < 100.0)
        snprintf(buf, len, "%.2fs", s);
    else
        snprintf(buf, len, "%.0fs", s);
}

double report_window_waste(const sim_result_t *r, double from_s, double to_s)
{
    uint64_t padded = 0, real = 0;
    for (size_t i = 0; i < r->n_series; i++) {
        const sim_sample_t *x = &r->series[i];
        if (x->t_s > from_s && x->t_s <= to_s) { /* a sample closes the window before it */
            padded += x->padded;
            real += x->real;
        }
    }
    return padded ? report_pct(padded - real, padded) : -1.0;
}

uint64_t report_total_tokens(const report_t *rep)
{
    uint64_t t = 0;
    for (size_t i = 0; i < rep->n_items; i++)
        t += rep->items[i].tokens;
    return t;
}

/* Offered load of one model (all models: UINT32_MAX): the workers' time its items ask for, each
 * costed by gpu_item_ns (a full batch of its own length), over its workers' time across the
 * arrival window, in percent. A floor: padding and partial batches add to it. */
double report_offered_load(const report_t *rep, uint32_t model)
{
    const sim_config_t *sc = rep->sim;
    double secs = rep->n_items ? (double)rep->items[rep->n_items - 1].t_ns / 1e9 : 0.0;
    if (secs <= 0.0)
        return 0.0;
    double ns = 0.0;
    uint32_t models = 0;
    for (size_t i = 0; i < rep->n_items; i++) {
        if (model == UINT32_MAX || rep->items[i].model == model)
            ns += gpu_item_ns(&sc->gpu, rep->items[i].tokens);
        if (rep->items[i].model + 1 > models)
            models = rep->items[i].model + 1;
    }
    double workers = (double)sc->workers_per_model * (model == UINT32_MAX ? models : 1);
    return 100.0 * ns / 1e9 / secs / workers;
}

/* ------------------------------------------------------------------------------------------ */
/* Table.                                                                                      */

static void report_header_print(FILE *f, const report_t *rep)
{
    const wl_config_t *wl = rep->wl;
    const sim_config_t *sc = rep->sim;
    uint32_t max_len = 0;
    size_t over = 0; /* items above the contract's max input */
    for (size_t i = 0; i < rep->n_items; i++) {
        max_len = rep->items[i].tokens > max_len ? rep->items[i].tokens : max_len;
        over += rep->items[i].tokens > sc->gpu.max_input_tokens;
    }
    uint64_t tokens = report_total_tokens(rep);
    fprintf(f,
            "lanesched-bench sim: preset %s, seed %" PRIu64 ", %" PRIu32 " models x %" PRIu32
            " shapes (Zipf s=%.2g",
            wl->preset, wl->seed, wl->models, wl->shapes_per_model, wl->zipf_s);
    if (wl->churn > 0)
        fprintf(f, ", churn %.0f%%", 100.0 * wl->churn);
    if (wl->burst_factor > 1)
        fprintf(f, ", bursts x%.3g", wl->burst_factor);
    fprintf(f,
            "), %zu items, %" PRIu64 " tokens (mean %.0f, max %" PRIu32 "), %.0f s of arrivals\n",
            rep->n_items, tokens, rep->n_items ? (double)tokens / (double)rep->n_items : 0.0,
            max_len, wl->duration_s);
    fprintf(f,
            "workers: %" PRIu32 " per model; contract %" PRIu32 " items / %" PRIu32
            " padded tokens / %" PRIu32 " max input; service %.3g ms + %.4g us per padded token;"
            " prefix cache: LRU of %" PRIu32 " shapes\n",
            sc->workers_per_model, sc->gpu.max_batch_size, sc->gpu.max_batch_tokens,
            sc->gpu.max_input_tokens, (double)sc->gpu.batch_fixed_ns / 1e6,
            sc->gpu.ns_per_padded_token / 1e3, sc->gpu.cache_shapes);
    if (over != 0)
        fprintf(f,
                "note: %zu items above the max input of %" PRIu32
                " tokens: the sim serves them, lanesched rejects each (input_too_long) and a "
                "live run counts it failed; cut them with the converters' --max-tokens\n",
                over, sc->gpu.max_input_tokens);
    fprintf(f, "offered load: %.0f%% of the workers' time (per model:",
            report_offered_load(rep, UINT32_MAX));
    for (uint32_t m = 0; m < wl->models; m++)
        fprintf(f, "%s %.0f%%", m ? "," : "", report_offered_load(rep, m));
    fprintf(f, "; each item costed in a full batch of its own length, fixed cost included: a "
               "floor, padding and partial batches add to it)\n");
    uint32_t pmin = UINT32_MAX, pmax = 0;
    for (size_t i = 0; i < rep->n_items; i++) {
        uint32_t p = rep->items[i].prefix_tokens;
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
    }
    if (pmax > 0)
        fprintf(f,
                "prefixes priced: %" PRIu32 "-%" PRIu32 " tokens per shape, computed once per "
                "batch when the worker's cache does not hold its shape (not in the offered load)\n",
                pmin, pmax);
    if (sc->slo_ns != 0) {
        char b[16];
        report_dur(b, sizeof(b), sc->slo_ns);
        fprintf(f,
                "wait budget: p99 <= %s. lanes waits for company within it; pow2 and range64 run "
                "with a queue delay (Triton's max_queue_delay) tuned to it, the grid's delay "
                "with the least GPU time within it (notes)\n",
                b);
    }
    fprintf(f, "\n");
}

int report_has_prefixes(const report_t *rep)
{
    for (size_t i = 0; i < rep->n_items; i++)
        if (rep->items[i].prefix_tokens != 0)
            return 1;
    return 0;
}

double report_cache_saved_ns(const report_t *rep, const sim_result_t *r)
{
    return rep->sim->gpu.ns_per_padded_token * (double)r->prefix_saved_tokens;
}

int report_budget_met(uint64_t p_p99, uint64_t p_busy, uint64_t r_p99, uint64_t r_busy,
                      uint64_t slo)
{
    if (p_p99 <= slo && (r_p99 > slo || p_busy <= r_busy))
        return 0;
    return r_p99 <= slo ? 1 : -1;
}

double report_items_per_batch(const sim_result_t *r)
{
    return r->batches ? (double)r->items_served / (double)r->batches : 0.0;
}

double report_best_bucket_gpu(const report_t *rep)
{
    const sim_result_t *p = report_find(rep, SIM_POW2), *r = report_find(rep, SIM_RANGE64);
    if (p == NULL || r == NULL)
        return 0.0;
    return (double)(p->busy_ns < r->busy_ns ? p->busy_ns : r->busy_ns);
}

/* The shape indices the items use: one past the largest. */
static uint32_t report_shape_span(const report_t *rep)
{
    uint32_t shapes = 0;
    for (size_t i = 0; i < rep->n_items; i++)
        shapes = rep->items[i].shape + 1 > shapes ? rep->items[i].shape + 1 : shapes;
    return shapes;
}

uint32_t report_shapes_per_model(const report_t *rep)
{
    uint32_t shapes = report_shape_span(rep), most = 0;
    uint32_t *model = malloc((shapes ? shapes : 1) * sizeof(*model));
    uint32_t per_model[WL_MODELS_MAX] = {0};
    if (model == NULL)
        return rep->wl->shapes_per_model;
    for (uint32_t k = 0; k < shapes; k++)
        model[k] = UINT32_MAX;
    for (size_t i = 0; i < rep->n_items; i++) {
        const wl_item_t *it = &rep->items[i];
        if (model[it->shape] == UINT32_MAX && it->model < WL_MODELS_MAX) {
            model[it->shape] = it->model;
            if (++per_model[it->model] > most)
                most = per_model[it->model];
        }
    }
    free(model);
    return most;
}

double report_gpu_floor(const report_t *rep)
{
    uint32_t shapes = report_shape_span(rep);
    uint64_t *n = calloc(shapes ? shapes : 1, sizeof(*n)),
             *padded = calloc(shapes ? shapes : 1, sizeof(*padded)),
             *prefix = calloc(shapes ? shapes : 1, sizeof(*prefix));
    double floor = 0.0;
    const gpu_config_t *g = &rep->sim->gpu;
    if (n == NULL || padded == NULL || prefix == NULL || g->max_batch_size == 0 ||
        g->max_batch_tokens == 0)
        goto out;
    for (size_t i = 0; i < rep->n_items; i++) {
        uint32_t k = rep->items[i].shape, p = rep->items[i].prefix_tokens;
        /* the shape's smallest prefix: its first batch pays at least that, whichever of its
         * items it holds */
        if (n[k]++ == 0 || p < prefix[k])
            prefix[k] = p;
        padded[k] += packer_pad(rep->items[i].tokens);
    }
    for (uint32_t k = 0; k < shapes; k++) {
        uint64_t by_count = (n[k] + g->max_batch_size - 1) / g->max_batch_size;
        uint64_t by_tokens = (padded[k] + g->max_batch_tokens - 1) / g->max_batch_tokens;
        /* every shape's prefix is computed at least once, by its first batch: at least its
         * smallest, where the trace gives a shape's items different prefixes */
        floor += (double)(padded[k] + prefix[k]) * g->ns_per_padded_token +
                 (double)(by_count > by_tokens ? by_count : by_tokens) * (double)g->batch_fixed_ns;
    }
out:
    free(n);
    free(padded);
    free(prefix);
    return floor;
}

double report_reuse_ratio(const sim_result_t *r, uint64_t *out_reuses, uint64_t *out_opened)
{
    uint64_t reuses = 0, opened = 0;
    for (size_t i = 0; i < r->n_series; i++) {
        const sim_sample_t *x = &r->series[i];
        if (x->t_s > r->arrival_s / 2.0 && x->t_s <= r->arrival_s + 1.0) {
            reuses += x->reuses;
            opened += x->opened;
        }
    }
    if (out_reuses != NULL)
        *out_reuses = reuses;
    if (out_opened != NULL)
        *out_opened = opened;
    return opened ? (double)reuses / (double)opened : -1.0;
}

/* The figures that decide, one row per policy. */
static void report_main_print(FILE *f, const report_t *rep)
{
    double best = report_best_bucket_gpu(rep);
    fprintf(f, "%-13s %9s %7s %7s %9s %9s %9s %7s %7s %8s %5s\n", "policy", "gpu.s", "vs.best",
            "items/b", "wait.p50", "wait.p99", "wait.max", "waste%", "hit%", "batches", "diff");
    for (size_t i = 0; i < rep->n_results; i++) {
        const sim_result_t *r = &rep->results[i];
        char p50[16], p99[16], mx[16], vs[16] = "-";
        report_dur(p50, sizeof(p50), r->wait_p50_ns);
        report_dur(p99, sizeof(p99), r->wait_p99_ns);
        report_dur(mx, sizeof(mx), r->wait_max_ns);
        if (best > 0.0)
            snprintf(vs, sizeof(vs), "%.3f", (double)r->busy_ns / best);
        fprintf(f, "%-13s %9.1f %7s %7.2f %9s %9s %9s %7.2f %7.2f %8" PRIu64 " %5" PRId64 "%s\n",
                sim_policy_name(r->policy), (double)r->busy_ns / 1e9, vs, report_items_per_batch(r),
                p50, p99, mx, report_waste_pct(r), report_hit_pct(r), r->batches,
                report_token_diff(r), r->ok ? "" : "  INVALID");
    }
}

/* Lanes and queues, one row per policy. */
static void report_queues_print(FILE *f, const report_t *rep)
{
    fprintf(f, "\n%-13s %6s %8s %6s %9s %8s %11s %9s %12s %12s\n", "policy", "q.peak", "q.mean",
            "q/shp", "reuses/s", "new/s", "reuse:new", "batch/s", "tokens.in", "tokens.done");
    for (size_t i = 0; i < rep->n_results; i++) {
        const sim_result_t *r = &rep->results[i];
        char ratio[24] = "-";
        double x = report_reuse_ratio(r, NULL, NULL);
        if (x >= 0.0)
            snprintf(ratio, sizeof(ratio), "%.0f:1", x);
        fprintf(f,
                "%-13s %6" PRIu32 " %8.1f %6" PRIu32 " %9.1f %8.2f %11s %9.2f %12" PRIu64
                " %12" PRIu64 "\n",
                sim_policy_name(r->policy), r->queues_peak, r->queues_mean, r->queues_max_peak,
                report_per_s(r->reuses, r->arrival_s), report_per_s(r->opened, r->arrival_s), ratio,
                report_batches_per_gpu_s(r), r->tokens_in, r->tokens_done);
    }
}

static void report_notes_print(FILE *f, const report_t *rep)
{
    fprintf(f, "\nnotes:\n"
               "  gpu.s = the workers' busy seconds (service model: fixed cost per batch + cost "
               "per padded token); vs.best = over the better\n"
               "        of pow2 and range64; wait = arrival -> dispatch in simulated time.\n"
               "  q.* = lanes in use (rolling lanes) or queues in use (the others; a queue is in "
               "use while it holds items or had one in the last 5 s),\n"
               "        sampled every simulated second: peak and mean summed over shapes, q/shp = "
               "peak of one shape (fifo: of one model).\n"
               "  reuses/s, new/s = items into an existing lane / lanes opened (baselines: queue "
               "creations), per second of arrivals;\n"
               "        reuse:new = the same over the second half of the arrivals (the article: "
               "36,000:1). batch/s = per GPU second.\n"
               "  fifo batches mix shapes: one is a hit only if all its items share one shape "
               "the worker had cached.\n"
               "  pow2 / range64 pick the next batch with the scheduler's sticky-shape rule "
               "(stay on the model's shape while it has items,\n"
               "        else the shape with the most queued tokens), then their fullest "
               "bucket; every policy packs with packer_fill.\n");
    for (size_t i = 0; i < rep->n_results; i++) {
        const sim_result_t *r = &rep->results[i];
        if (!sim_policy_is_lanes(r->policy))
            continue;
        fprintf(f,
                "  %-12s lanes opened %" PRIu64 ", reuses %" PRIu64 ", force-fits %" PRIu64
                " (%.2f%% of items), quiesced %" PRIu64 ", shape switches %" PRIu64
                ", shapes at the lane budget %" PRIu32 "/%" PRIu32,
                sim_policy_name(r->policy), r->opened, r->reuses, r->force_fits,
                report_pct(r->force_fits, r->items_in), r->quiesced, r->shape_switches,
                r->shapes_full, r->shapes);
        if (r->policy == SIM_LANES_STARVE)
            fprintf(f, ", starvation preemptions %" PRIu64 " (bound %.0f ms)", r->preemptions,
                    (double)rep->sim->starvation_ns / 1e6);
        if (r->policy == SIM_LANES) {
            double credit, loaded;
            sched_merge_credit_resolve(rep->sim->merge_credit, rep->sim->merge_credit_loaded,
                                       &credit, &loaded);
            fprintf(f,
                    ", age-bound preemptions %" PRIu64 " (bound %.0f ms), merged batches %" PRIu64
                    " (%.1f%%, %" PRIu64 " lanes added, credit %.3g, %.3g loaded)",
                    r->preemptions, (double)rep->sim->age_bound_ns / 1e6, r->merged_batches,
                    report_pct(r->merged_batches, r->batches), r->merged_lanes, credit, loaded);
            double burst = sched_hold_burst_resolve(rep->sim->hold_burst);
            fprintf(f, ", held fills %" PRIu64 " (hold %.0f ms", r->holds,
                    (double)rep->sim->hold_ns / 1e6);
            if (burst > 0)
                fprintf(f, ", %.0f ms in a burst regime", burst * (double)rep->sim->hold_ns / 1e6);
            fprintf(f, ")");
            if (r->cost_known)
                fprintf(f, ", worker cost %s %.3g ms + %.4g us/token",
                        r->cost_estimated ? "estimated" : "declared", r->cost_fixed_ns / 1e6,
                        r->cost_token_ns / 1e3);
            else
                fprintf(f, ", worker cost not known yet (no merging)");
        }
        fprintf(f, "\n");
    }
    for (size_t i = 0; i < rep->n_results; i++) {
        const sim_result_t *r = &rep->results[i];
        if (r->delay_ns == 0 && !r->tuned)
            continue;
        char d[16];
        report_dur(d, sizeof(d), r->delay_ns);
        fprintf(f, "  %-12s queue delay %s (%s)\n", sim_policy_name(r->policy), d,
                !r->tuned       ? "--queue-delay-ms"
                : r->budget_met ? "tuned: the least GPU time with the p99 wait within the budget"
                                : "tuned: no delay of the grid keeps the p99 within the budget; "
                                  "the shortest p99's");
    }
    if (report_has_prefixes(rep)) {
        fprintf(f, "  prefix cache: GPU s the hits saved / the misses spent on prefixes:");
        for (size_t i = 0; i < rep->n_results; i++) {
            const sim_result_t *r = &rep->results[i];
            fprintf(f, "%s %s %.1f / %.1f", i ? ";" : "", sim_policy_name(r->policy),
                    report_cache_saved_ns(rep, r) / 1e9,
                    rep->sim->gpu.ns_per_padded_token * (double)r->prefix_tokens / 1e9);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "  misses (cold = a worker's first batch of a shape; the rest follow a switch that "
               "evicted the shape):");
    for (size_t i = 0; i < rep->n_results; i++) {
        const sim_result_t *r = &rep->results[i];
        fprintf(f, "%s %s %" PRIu64 " cold + %" PRIu64 " of %" PRIu64 " batches", i ? ";" : "",
                sim_policy_name(r->policy), r->cold_misses, r->misses - r->cold_misses, r->batches);
    }
    fprintf(f, "\n");
}

int report_table_print(FILE *f, const report_t *rep)
{
    report_header_print(f, rep);
    report_main_print(f, rep);
    report_queues_print(f, rep);
    report_notes_print(f, rep);
    for (size_t i = 0; i < rep->n_results; i++) {
        if (!rep->results[i].ok)
            fprintf(f, "  INVALID %s: %s\n", sim_policy_name(rep->results[i].policy),
                    rep->results[i].error);
    }
    return report_claims_print(f, rep);
}
