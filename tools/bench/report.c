/*
 * report.c - lanesched-bench's sim output: the table with its notes and checks, and the JSON
 * results. The SVG chart is report_svg.c's, drawn from the same figures (report_int.h).
 *
 * Owns: every figure's definition as printed (each computed here from sim_result_t counters, in
 * one place, so the table, the JSON and the chart cannot disagree).
 *
 * Definitions:
 *   waste %        (padded - real) / padded tokens, over every batch of the run
 *   hit %          batches whose shape was in the worker's LRU cache / batches
 *   queues         lanes in use (rolling lanes: lanes_in_use summed over shapes) or baseline
 *                  queues in use, sampled every simulated second: peak, mean, and the peak of
 *                  any one shape
 *   reuses/s new/s items into an existing lane (queue) / lanes (queues) opened, per second of
 *                  the trace's arrival window
 *   wait           arrival -> dispatch, simulated time, over every item
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

static double report_per_s(uint64_t n, double seconds)
{
    return seconds > 0.0 ? (double)n / seconds : 0.0;
}

static double report_batches_per_gpu_s(const sim_result_t *r)
{
    return r->busy_ns ? (double)r->batches * 1e9 / (double)r->busy_ns : 0.0;
}

static int64_t report_token_diff(const sim_result_t *r)
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
static void report_dur(char *buf, size_t len, uint64_t ns)
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

static uint64_t report_total_tokens(const report_t *rep)
{
    uint64_t t = 0;
    for (size_t i = 0; i < rep->n_items; i++)
        t += rep->items[i].tokens;
    return t;
}

/* Offered load of one model (all models: UINT32_MAX): the workers' time its items ask for, each
 * costed by gpu_item_ns (a full batch of its own length), over its workers' time across the
 * arrival window, in percent. A floor: padding and partial batches add to it. */
static double report_offered_load(const report_t *rep, uint32_t model)
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
    for (size_t i = 0; i < rep->n_items; i++)
        max_len = rep->items[i].tokens > max_len ? rep->items[i].tokens : max_len;
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
    fprintf(f, "offered load: %.0f%% of the workers' time (per model:",
            report_offered_load(rep, UINT32_MAX));
    for (uint32_t m = 0; m < wl->models; m++)
        fprintf(f, "%s %.0f%%", m ? "," : "", report_offered_load(rep, m));
    fprintf(f, "; each item costed in a full batch of its own length, fixed cost included: a "
               "floor, padding and partial batches add to it)\n\n");
}

int report_table_print(FILE *f, const report_t *rep)
{
    int failed = 0;
    report_header_print(f, rep);
    fprintf(f, "%-13s %7s %7s %6s %8s %6s %9s %8s %8s %8s %8s %9s %12s %12s %5s\n", "policy",
            "waste%", "hit%", "q.peak", "q.mean", "q/shp", "reuses/s", "new/s", "wait.p50",
            "wait.p99", "wait.max", "batch/s", "tokens.in", "tokens.done", "diff");
    for (size_t i = 0; i < rep->n_results; i++) {
        const sim_result_t *r = &rep->results[i];
        char p50[16], p99[16], mx[16];
        report_dur(p50, sizeof(p50), r->wait_p50_ns);
        report_dur(p99, sizeof(p99), r->wait_p99_ns);
        report_dur(mx, sizeof(mx), r->wait_max_ns);
        fprintf(f,
                "%-13s %7.2f %7.2f %6" PRIu32 " %8.1f %6" PRIu32 " %9.1f %8.2f %8s %8s %8s %9.2f"
                " %12" PRIu64 " %12" PRIu64 " %5" PRId64 "%s\n",
                sim_policy_name(r->policy), report_waste_pct(r), report_hit_pct(r), r->queues_peak,
                r->queues_mean, r->queues_max_peak, report_per_s(r->reuses, r->arrival_s),
                report_per_s(r->opened, r->arrival_s), p50, p99, mx, report_batches_per_gpu_s(r),
                r->tokens_in, r->tokens_done, report_token_diff(r), r->ok ? "" : "  INVALID");
    }
    fprintf(f, "\nnotes:\n"
               "  q.* = lanes in use (rolling lanes) or queues in use (the others; a queue is in "
               "use while it holds items or had one in the last 5 s),\n"
               "        sampled every simulated second: peak and mean summed over shapes, q/shp = "
               "peak of one shape (fifo: of one model).\n"
               "  reuses/s, new/s = items into an existing lane / lanes opened (baselines: queue "
               "creations), per second of arrivals.\n"
               "  wait = arrival -> dispatch in simulated time; batch/s = batches per second of "
               "simulated GPU busy time.\n"
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
    const sim_result_t *l128 = report_find(rep, SIM_LANES_128);
    const sim_result_t *l2048 = report_find(rep, SIM_LANES_2048);
    /* Waste by quarter of the arrival window: printed here, checked in the story below. */
    int quarters = l128 != NULL && l2048 != NULL && l2048->arrival_s > 0;
    double w128[4] = {-1.0, -1.0, -1.0, -1.0};
    if (quarters) {
        fprintf(f, "  waste over the arrival window, by quarter (128 | 2048):");
        double q = l2048->arrival_s / 4.0;
        for (int k = 0; k < 4; k++) {
            w128[k] = report_window_waste(l128, k * q, (k + 1) * q);
            fprintf(f, "  %.2f%% | %.2f%%", w128[k],
                    report_window_waste(l2048, k * q, (k + 1) * q));
        }
        fprintf(f, "\n");
    }
    for (size_t i = 0; i < rep->n_results; i++) {
        if (!rep->results[i].ok)
            fprintf(f, "  INVALID %s: %s\n", sim_policy_name(rep->results[i].policy),
                    rep->results[i].error);
    }
    /* The claims, stated as checks on this run; each NO counts as a failure. */
    fprintf(f, "checks:\n");
    if (l2048 != NULL) {
        static const sim_policy_t base[] = {SIM_FIFO, SIM_POW2, SIM_RANGE64};
        for (size_t k = 0; k < sizeof(base) / sizeof(base[0]); k++) {
            const sim_result_t *b = report_find(rep, base[k]);
            if (b == NULL)
                continue;
            int ok = report_waste_pct(l2048) < report_waste_pct(b);
            failed += !ok;
            fprintf(f, "  lanes-2048 waste %.2f%% < %s %.2f%%: %s\n", report_waste_pct(l2048),
                    sim_policy_name(base[k]), report_waste_pct(b), ok ? "yes" : "NO");
        }
        /* The hit-rate claim is for workloads whose shapes per model fit a worker's cache
         * (README, "Shape hit rate and the cache"): beyond that sticky draining cannot reach
         * it with bounded waits, and the figure is printed without a verdict. Churn brings in
         * new shapes, each a cold miss, so it carries no claim either. */
        uint32_t k = rep->wl->shapes_per_model, c = rep->sim->gpu.cache_shapes;
        if (rep->wl->churn > 0.0) {
            fprintf(f,
                    "  lanes-2048 shape hit rate %.3f%%: no claim (churn brings in new shapes)\n",
                    report_hit_pct(l2048));
        } else if (k <= c) {
            int ok = report_hit_pct(l2048) >= 99.9;
            failed += !ok;
            fprintf(f,
                    "  lanes-2048 shape hit rate %.3f%% >= 99.9%% (%" PRIu32
                    " shapes per model, cache of %" PRIu32 "): %s\n",
                    report_hit_pct(l2048), k, c, ok ? "yes" : "NO");
        } else {
            fprintf(f,
                    "  lanes-2048 shape hit rate %.3f%%: no claim (%" PRIu32
                    " shapes per model over a cache of %" PRIu32 ")\n",
                    report_hit_pct(l2048), k, c);
        }
    }
    /* The article's story, claimed on sustained (built to reach the 128-lane budget) and
     * wherever the budget is reached: there 128's waste climbs from the first quarter of the
     * run to the last and stays above 2,048's. On sustained a budget never reached is a NO. */
    int story = strcmp(rep->wl->preset, "sustained") == 0;
    if (quarters && (story || l128->shapes_full > 0)) {
        double first = w128[0], last = w128[3];
        int ok = l128->shapes_full > 0 && first >= 0 && last > first &&
                 report_waste_pct(l2048) < report_waste_pct(l128);
        failed += !ok;
        fprintf(f,
                "  lanes-128 at its budget on %" PRIu32 "/%" PRIu32
                " shapes: its waste climbs %.2f%% -> %.2f%% by quarter, lanes-2048 %.2f%% < "
                "%.2f%%: %s\n",
                l128->shapes_full, l128->shapes, first, last, report_waste_pct(l2048),
                report_waste_pct(l128), ok ? "yes" : "NO");
    }
    int balanced = 1;
    for (size_t i = 0; i < rep->n_results; i++)
        balanced &= rep->results[i].ok && report_token_diff(&rep->results[i]) == 0;
    failed += !balanced;
    fprintf(f, "  every policy: tokens in = tokens completed, every invariant held: %s\n",
            balanced ? "yes" : "NO");
    return failed;
}

/* ------------------------------------------------------------------------------------------ */
/* JSON.                                                                                       */

void report_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* JSON has no NaN or infinity. */
static void report_json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fprintf(f, "null");
}

static void report_json_result(FILE *f, const sim_result_t *r)
{
    fprintf(f, "    {\"policy\": ");
    report_json_str(f, sim_policy_name(r->policy));
    fprintf(f, ", \"ok\": %s, \"error\": ", r->ok ? "true" : "false");
    report_json_str(f, r->error);
    fprintf(f, ",\n     \"padding_waste_pct\": ");
    report_json_num(f, report_waste_pct(r));
    fprintf(f, ", \"shape_hit_rate_pct\": ");
    report_json_num(f, report_hit_pct(r));
    fprintf(f,
            ", \"batches\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
            ", \"cold_misses\": %" PRIu64 ", \"padded_tokens\": %" PRIu64
            ", \"real_tokens\": %" PRIu64 ",\n     \"queues_peak\": %" PRIu32 ", \"queues_mean\": ",
            r->batches, r->hits, r->misses, r->cold_misses, r->padded_tokens, r->real_tokens,
            r->queues_peak);
    report_json_num(f, r->queues_mean);
    fprintf(f,
            ", \"queues_peak_one_shape\": %" PRIu32 ", \"opened\": %" PRIu64
            ", \"reuses\": %" PRIu64 ", \"opened_per_s\": ",
            r->queues_max_peak, r->opened, r->reuses);
    report_json_num(f, report_per_s(r->opened, r->arrival_s));
    fprintf(f, ", \"reuses_per_s\": ");
    report_json_num(f, report_per_s(r->reuses, r->arrival_s));
    fprintf(f,
            ",\n     \"force_fits\": %" PRIu64 ", \"quiesced\": %" PRIu64
            ", \"shape_switches\": %" PRIu64 ", \"starvation_preemptions\": %" PRIu64
            ", \"shapes\": %" PRIu32 ", \"shapes_at_lane_budget\": %" PRIu32
            ",\n     \"wait_p50_ns\": %" PRIu64 ", \"wait_p99_ns\": %" PRIu64
            ", \"wait_max_ns\": %" PRIu64 ", \"wait_mean_ns\": ",
            r->force_fits, r->quiesced, r->shape_switches, r->preemptions, r->shapes,
            r->shapes_full, r->wait_p50_ns, r->wait_p99_ns, r->wait_max_ns);
    report_json_num(f, r->wait_mean_ns);
    fprintf(f, ", \"batches_per_gpu_s\": ");
    report_json_num(f, report_batches_per_gpu_s(r));
    fprintf(f,
            ", \"gpu_busy_ns\": %" PRIu64 ", \"arrival_s\": %.6g, \"end_ns\": %" PRIu64
            ",\n     \"items_in\": %" PRIu64 ", \"items_done\": %" PRIu64
            ", \"tokens_in\": %" PRIu64 ", \"tokens_done\": %" PRIu64
            ", \"tokens_difference\": %" PRId64 ", \"wall_s\": %.3f,\n",
            r->busy_ns, r->arrival_s, r->end_ns, r->items_in, r->items_done, r->tokens_in,
            r->tokens_done, report_token_diff(r), r->wall_s);
    fprintf(f, "     \"series\": {\"t_s\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%.6g", i ? "," : "", r->series[i].t_s);
    fprintf(f, "], \"queues\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu32, i ? "," : "", r->series[i].queues);
    fprintf(f, "], \"queues_one_shape\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu32, i ? "," : "", r->series[i].queues_max);
    fprintf(f, "], \"queued_items\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu32, i ? "," : "", r->series[i].queued_items);
    fprintf(f, "], \"padded\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].padded);
    fprintf(f, "], \"real\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].real);
    fprintf(f, "], \"batches\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].batches);
    fprintf(f, "], \"hits\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].hits);
    fprintf(f, "]}}");
}

static void report_json_lanes(FILE *f, const char *key, const sim_result_t *r)
{
    fprintf(f, "    \"%s\": [", key);
    for (size_t i = 0; r != NULL && i < r->n_series; i++)
        fprintf(f, "%s[%.6g,%" PRIu32 "]", i ? "," : "", r->series[i].t_s, r->series[i].queues);
    fprintf(f, "]");
}

int report_json_write(const char *path, const report_t *rep)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    const wl_config_t *wl = rep->wl;
    const sim_config_t *sc = rep->sim;
    fprintf(f, "{\n  \"mode\": \"sim\",\n  \"command\": ");
    report_json_str(f, rep->command ? rep->command : "");
    fprintf(f, ",\n  \"workload\": {\"preset\": ");
    report_json_str(f, wl->preset);
    fprintf(f,
            ", \"seed\": %" PRIu64 ", \"models\": %" PRIu32 ", \"shapes_per_model\": %" PRIu32
            ", \"zipf_s\": %.6g, \"duration_s\": %.6g, \"rate\": %.6g, \"burst_factor\": %.6g"
            ", \"churn\": %.6g, \"max_tokens\": %" PRIu32 ", \"long_share\": %.6g"
            ", \"items\": %zu, \"tokens\": %" PRIu64 ", \"offered_load_pct\": %.4g",
            wl->seed, wl->models, wl->shapes_per_model, wl->zipf_s, wl->duration_s, wl->rate,
            wl->burst_factor, wl->churn, wl->max_tokens, wl->long_share, rep->n_items,
            report_total_tokens(rep), report_offered_load(rep, UINT32_MAX));
    fprintf(f, ", \"offered_load_pct_per_model\": [");
    for (uint32_t m = 0; m < wl->models; m++)
        fprintf(f, "%s%.4g", m ? "," : "", report_offered_load(rep, m));
    fprintf(f, "]},\n");
    fprintf(f,
            "  \"workers\": {\"per_model\": %" PRIu32 ", \"max_batch_size\": %" PRIu32
            ", \"max_batch_tokens\": %" PRIu32 ", \"max_input_tokens\": %" PRIu32
            ", \"batch_fixed_ns\": %" PRIu64 ", \"ns_per_padded_token\": %.6g"
            ", \"cache_shapes\": %" PRIu32 "},\n",
            sc->workers_per_model, sc->gpu.max_batch_size, sc->gpu.max_batch_tokens,
            sc->gpu.max_input_tokens, sc->gpu.batch_fixed_ns, sc->gpu.ns_per_padded_token,
            sc->gpu.cache_shapes);
    fprintf(f,
            "  \"starvation_ns\": %" PRIu64 ",\n  \"sample_ns\": %" PRIu64 ",\n  \"policies\": [\n",
            sc->starvation_ns, sc->sample_ns);
    for (size_t i = 0; i < rep->n_results; i++) {
        report_json_result(f, &rep->results[i]);
        fprintf(f, "%s\n", i + 1 < rep->n_results ? "," : "");
    }
    fprintf(f, "  ],\n  \"lanes_in_use_over_time\": {\n");
    report_json_lanes(f, "lanes_128", report_find(rep, SIM_LANES_128));
    fprintf(f, ",\n");
    report_json_lanes(f, "lanes_2048", report_find(rep, SIM_LANES_2048));
    fprintf(f, "\n  }\n}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}
