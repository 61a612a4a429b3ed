/*
 * report_sweep.c - lanesched-bench sweep's output: the table (p99 wait and GPU seconds per
 * policy and load), the capacities at the SLO, the claims' checks, the JSON and the chart (p99
 * wait against offered load, one line per policy, log scale, the SLO drawn across).
 *
 * The checks, each on the same trace per load for every policy:
 *   - p99 wait of lanes at most the better of pow2 and range64 at every load (on steady,
 *     bursty and traces that are not a preset; printed without a verdict on the others);
 *   - capacity at the SLO of lanes at least 1.1 x the best of pow2 and range64 and 2 x fifo's
 *     (on steady and traces that are not a preset). A capacity known only as "at least" or "at
 *     most" is compared on the side that is sure: the claim holds when lanes' lowest possible
 *     value reaches the ratio of the other's highest, fails when lanes' highest cannot reach
 *     the other's lowest, and is "not decided" otherwise (a failure under --claims: wider
 *     --loads decide it).
 *
 * Invariants: report.c's 1 (output is a pure function of the sweep).
 */
#include "report_int.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define SWEEP_CAP_RATIO_BUCKETS 1.1
#define SWEEP_CAP_RATIO_FIFO    2.0

static const char *const sweep_colors[SIM_POLICY_COUNT] = {
    "#999999", "#d95f02", "#1b9e77", "#e7298a", "#7570b3", "#66a61e", "#222222",
};

/* The preset claims apply to steady and bursty (p99) and steady (capacity), and to any trace
 * that is not a preset. */
static int sweep_claims_p99(const sweep_t *sw)
{
    const char *p = sw->wl.preset;
    return strcmp(p, "steady") == 0 || strcmp(p, "bursty") == 0 ||
           (strcmp(p, "churn") != 0 && strcmp(p, "sustained") != 0);
}

static int sweep_claims_capacity(const sweep_t *sw)
{
    const char *p = sw->wl.preset;
    return strcmp(p, "steady") == 0 ||
           (strcmp(p, "bursty") != 0 && strcmp(p, "churn") != 0 && strcmp(p, "sustained") != 0);
}

static int sweep_has(const sweep_t *sw, sim_policy_t p)
{
    return sw->args->policies[p] && sw->args->n_loads != 0 && sw->cells[0][p].ran;
}

/* "95.3%", ">=110%" or "<=40%". */
static void sweep_capacity_str(const sweep_t *sw, sim_policy_t p, char *buf, size_t len)
{
    double cap;
    int k = sweep_capacity(sw, p, &cap);
    snprintf(buf, len, "%s%.1f%%", k == 0 ? ">=" : k < 0 ? "<=" : "", cap);
}

static void sweep_header_print(FILE *f, const sweep_t *sw)
{
    const wl_config_t *wl = &sw->wl;
    const sweep_args_t *a = sw->args;
    fprintf(f,
            "lanesched-bench sweep: preset %s, seed %" PRIu64 ", %" PRIu32 " models x %" PRIu32
            " shapes, %.0f s of arrivals; %zu loads %.0f%%..%.0f%%; SLO p99 wait <= %.0f ms\n",
            wl->preset, wl->seed, wl->models, wl->shapes_per_model, wl->duration_s, a->n_loads,
            a->loads[0], a->loads[a->n_loads - 1], (double)a->slo_ns / 1e6);
    fprintf(f,
            "workers: %" PRIu32 " per model; contract %" PRIu32 " items / %" PRIu32
            " padded tokens; service %.3g ms + %.4g us per padded token; cache of %" PRIu32
            " shapes\n\n",
            a->sim->workers_per_model, a->sim->gpu.max_batch_size, a->sim->gpu.max_batch_tokens,
            (double)a->sim->gpu.batch_fixed_ns / 1e6, a->sim->gpu.ns_per_padded_token / 1e3,
            a->sim->gpu.cache_shapes);
}

static void sweep_table_print(FILE *f, const sweep_t *sw)
{
    const sweep_args_t *a = sw->args;
    fprintf(f, "p99 wait / GPU busy seconds, per offered load (realised load in brackets)\n");
    fprintf(f, "%-12s", "load");
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        if (sweep_has(sw, (sim_policy_t)p))
            fprintf(f, " %16s", sim_policy_name((sim_policy_t)p));
    }
    fprintf(f, "\n");
    for (size_t i = 0; i < a->n_loads; i++) {
        char load[24];
        double offered = 0.0;
        for (int p = 0; p < SIM_POLICY_COUNT; p++)
            if (sweep_has(sw, (sim_policy_t)p))
                offered = sw->cells[i][p].offered_pct;
        snprintf(load, sizeof(load), "%.0f%% (%.0f)", a->loads[i], offered);
        fprintf(f, "%-12s", load);
        for (int p = 0; p < SIM_POLICY_COUNT; p++) {
            if (!sweep_has(sw, (sim_policy_t)p))
                continue;
            const sweep_cell_t *c = &sw->cells[i][p];
            char p99[16], cell[40];
            report_dur(p99, sizeof(p99), c->wait_p99_ns);
            snprintf(cell, sizeof(cell), "%s / %.0f%s", p99, (double)c->busy_ns / 1e9,
                     c->ok && c->token_diff == 0 ? "" : "!");
            fprintf(f, " %16s", cell);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "%-12s", "capacity");
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        if (!sweep_has(sw, (sim_policy_t)p))
            continue;
        char cap[24];
        sweep_capacity_str(sw, (sim_policy_t)p, cap, sizeof(cap));
        fprintf(f, " %16s", cap);
    }
    fprintf(f, "\n  capacity = the highest offered load whose p99 wait stays within the SLO, "
               "linear between the points (>= / <=: never or always over it in the range).\n");
}

/* What a capacity is known to be: [lo, hi] (a crossing: both the value; "at least": the value
 * and infinity; "at most": 0 and the value). */
static void sweep_cap_range(const sweep_t *sw, sim_policy_t p, double *lo, double *hi)
{
    double cap;
    int k = sweep_capacity(sw, p, &cap);
    *lo = k < 0 ? 0.0 : cap;
    *hi = k == 0 ? INFINITY : cap;
}

/* lanes >= ratio x other: 1 shown, 0 shown false, -1 not decided by the loads swept. */
static int sweep_cap_claim(const sweep_t *sw, sim_policy_t other, double ratio)
{
    double llo, lhi, olo, ohi;
    sweep_cap_range(sw, SIM_LANES, &llo, &lhi);
    sweep_cap_range(sw, other, &olo, &ohi);
    if (llo >= ratio * ohi)
        return 1;
    if (lhi < ratio * olo)
        return 0;
    return -1;
}

static void sweep_cap_verdict(FILE *f, const sweep_t *sw, const char *key, int k, int *failed)
{
    const char *word = k > 0 ? "yes" : k == 0 ? "NO" : "NOT DECIDED, widen --loads";
    if (sweep_claims_capacity(sw) && k >= 0) {
        report_verdict(f, key, k > 0, sw->args->unmet, failed);
    } else if (sweep_claims_capacity(sw)) {
        *failed += 1;
        fprintf(f, " [%s]: %s\n", key, word);
    } else {
        fprintf(f, " (%s; no claim on %s)\n", word, sw->wl.preset);
    }
}

static int sweep_checks_print(FILE *f, const sweep_t *sw)
{
    int failed = 0;
    const sweep_args_t *a = sw->args;
    if (!sweep_has(sw, SIM_LANES))
        return 0;
    fprintf(f, "checks:\n");
    if (sweep_has(sw, SIM_POW2) && sweep_has(sw, SIM_RANGE64) && a->sim->slo_ns != 0) {
        /* under a budget: lanes within it wherever a tuned bucket scheme is */
        for (size_t i = 0; i < a->n_loads; i++) {
            const sweep_cell_t *l = &sw->cells[i][SIM_LANES], *p = &sw->cells[i][SIM_POW2],
                               *r = &sw->cells[i][SIM_RANGE64];
            uint64_t slo = a->sim->slo_ns;
            int m = report_budget_met(p->wait_p99_ns, p->busy_ns, r->wait_p99_ns, r->busy_ns, slo);
            const sweep_cell_t *met = m == 0 ? p : m == 1 ? r : NULL;
            uint64_t best = p->busy_ns < r->busy_ns ? p->busy_ns : r->busy_ns;
            char lp[16], bp[16];
            report_dur(lp, sizeof(lp), l->wait_p99_ns);
            report_dur(bp, sizeof(bp), slo);
            fprintf(f, "  %.0f%%: lanes p99 wait %s, GPU %.3f x the better tuned bucket scheme",
                    a->loads[i], lp, best ? (double)l->busy_ns / (double)best : 0.0);
            if (met != NULL) {
                fprintf(f, "; within the budget %s as %s is", bp,
                        sim_policy_name(met == p ? SIM_POW2 : SIM_RANGE64));
                report_verdict(f, "slo-p99", l->wait_p99_ns <= slo, a->unmet, &failed);
            } else {
                fprintf(f, " (no tuned bucket scheme within the budget %s)\n", bp);
            }
        }
    } else if (sweep_has(sw, SIM_POW2) && sweep_has(sw, SIM_RANGE64)) {
        int verdict = sweep_claims_p99(sw);
        for (size_t i = 0; i < a->n_loads; i++) {
            const sweep_cell_t *l = &sw->cells[i][SIM_LANES], *p = &sw->cells[i][SIM_POW2],
                               *r = &sw->cells[i][SIM_RANGE64];
            uint64_t best = p->wait_p99_ns < r->wait_p99_ns ? p->wait_p99_ns : r->wait_p99_ns;
            char lp[16], bp[16];
            report_dur(lp, sizeof(lp), l->wait_p99_ns);
            report_dur(bp, sizeof(bp), best);
            int ok = l->wait_p99_ns <= best;
            fprintf(f, "  %.0f%%: lanes p99 wait %s <= %s (the better of pow2 and range64)",
                    a->loads[i], lp, bp);
            if (verdict) {
                report_verdict(f, "p99", ok, a->unmet, &failed);
            } else {
                fprintf(f, " (%s; no claim on %s)\n", ok ? "holds" : "does not hold",
                        sw->wl.preset);
            }
        }
        double plo, phi, rlo, rhi;
        sweep_cap_range(sw, SIM_POW2, &plo, &phi);
        sweep_cap_range(sw, SIM_RANGE64, &rlo, &rhi);
        sim_policy_t best = plo > rlo || (plo == rlo && phi > rhi) ? SIM_POW2 : SIM_RANGE64;
        char lc[24], bc[24];
        sweep_capacity_str(sw, SIM_LANES, lc, sizeof(lc));
        sweep_capacity_str(sw, best, bc, sizeof(bc));
        /* against the better of the two: both must be exceeded */
        int kp = sweep_cap_claim(sw, SIM_POW2, SWEEP_CAP_RATIO_BUCKETS);
        int kr = sweep_cap_claim(sw, SIM_RANGE64, SWEEP_CAP_RATIO_BUCKETS);
        int k = kp == 0 || kr == 0 ? 0 : kp < 0 || kr < 0 ? -1 : 1;
        fprintf(f, "  capacity at the SLO: lanes %s >= %.2f x %s (%s, the best bucket scheme)", lc,
                SWEEP_CAP_RATIO_BUCKETS, bc, sim_policy_name(best));
        sweep_cap_verdict(f, sw, "capacity", k, &failed);
    }
    if (sweep_has(sw, SIM_FIFO)) {
        char lc[24], fc[24];
        sweep_capacity_str(sw, SIM_LANES, lc, sizeof(lc));
        sweep_capacity_str(sw, SIM_FIFO, fc, sizeof(fc));
        fprintf(f, "  capacity at the SLO: lanes %s >= %.0f x fifo %s", lc, SWEEP_CAP_RATIO_FIFO,
                fc);
        sweep_cap_verdict(f, sw, "capacity-fifo",
                          sweep_cap_claim(sw, SIM_FIFO, SWEEP_CAP_RATIO_FIFO), &failed);
    }
    int balanced = 1;
    for (size_t i = 0; i < a->n_loads; i++)
        for (int p = 0; p < SIM_POLICY_COUNT; p++)
            if (sw->cells[i][p].ran)
                balanced &= sw->cells[i][p].ok && sw->cells[i][p].token_diff == 0;
    fprintf(f, "  every policy at every load: tokens in = tokens completed, every invariant held");
    report_verdict(f, "balanced", balanced, a->unmet, &failed);
    return failed;
}

int report_sweep_print(FILE *f, const sweep_t *sw)
{
    sweep_header_print(f, sw);
    sweep_table_print(f, sw);
    int failed = sweep_checks_print(f, sw);
    fprintf(f, "(%.1f s of wall time)\n", sw->wall_s);
    return failed;
}

int report_sweep_json_write(const char *path, const sweep_t *sw)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    const sweep_args_t *a = sw->args;
    fprintf(f, "{\n  \"mode\": \"sweep\",\n  \"command\": ");
    report_json_str(f, a->command ? a->command : "");
    fprintf(f, ",\n  \"workload\": {\"preset\": ");
    report_json_str(f, sw->wl.preset);
    fprintf(f,
            ", \"seed\": %" PRIu64 ", \"models\": %" PRIu32 ", \"shapes_per_model\": %" PRIu32
            ", \"duration_s\": %.6g},\n  \"slo_ns\": %" PRIu64 ",\n  \"loads_pct\": [",
            sw->wl.seed, sw->wl.models, sw->wl.shapes_per_model, sw->wl.duration_s, a->slo_ns);
    for (size_t i = 0; i < a->n_loads; i++)
        fprintf(f, "%s%.6g", i ? "," : "", a->loads[i]);
    fprintf(f, "],\n  \"policies\": [\n");
    int first = 1;
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        if (!sweep_has(sw, (sim_policy_t)p))
            continue;
        double cap;
        int k = sweep_capacity(sw, (sim_policy_t)p, &cap);
        fprintf(f, "%s    {\"policy\": ", first ? "" : ",\n");
        first = 0;
        report_json_str(f, sim_policy_name((sim_policy_t)p));
        fprintf(f, ", \"capacity_pct\": ");
        report_json_num(f, cap);
        fprintf(f, ", \"capacity_bound\": \"%s\",\n     \"points\": [",
                k == 0  ? "at_least"
                : k < 0 ? "at_most"
                        : "crossing");
        for (size_t i = 0; i < a->n_loads; i++) {
            const sweep_cell_t *c = &sw->cells[i][p];
            fprintf(f,
                    "%s\n       {\"load_pct\": %.6g, \"offered_load_pct\": %.6g, \"ok\": %s"
                    ", \"gpu_busy_ns\": %" PRIu64 ", \"wait_p50_ns\": %" PRIu64
                    ", \"wait_p99_ns\": %" PRIu64 ", \"wait_max_ns\": %" PRIu64
                    ", \"batches\": %" PRIu64 ", \"items_per_batch\": %.6g"
                    ", \"padding_waste_pct\": %.6g, \"shape_hit_rate_pct\": %.6g"
                    ", \"tokens_difference\": %" PRId64 "}",
                    i ? "," : "", a->loads[i], c->offered_pct, c->ok ? "true" : "false", c->busy_ns,
                    c->wait_p50_ns, c->wait_p99_ns, c->wait_max_ns, c->batches, c->items_per_batch,
                    c->waste_pct, c->hit_pct, c->token_diff);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ]\n}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}

/* y of a wait on the chart's log axis between lo_s and hi_s. */
static double sweep_y(double s, double lo_s, double hi_s, double top, double h)
{
    if (s < lo_s)
        s = lo_s;
    if (s > hi_s)
        s = hi_s;
    return top + h - h * (log10(s) - log10(lo_s)) / (log10(hi_s) - log10(lo_s));
}

int report_sweep_svg_write(const char *path, const sweep_t *sw)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    const sweep_args_t *a = sw->args;
    double left = SVG_LEFT, top = 70.0, w = SVG_W - SVG_LEFT - SVG_RIGHT - 230.0, h = 380.0;
    double x0 = a->loads[0], x1 = a->loads[a->n_loads - 1];
    if (x1 <= x0)
        x1 = x0 + 1.0;
    /* The y range: decades around every p99 wait and the SLO. */
    double lo = (double)a->slo_ns / 1e9, hi = lo;
    for (size_t i = 0; i < a->n_loads; i++)
        for (int p = 0; p < SIM_POLICY_COUNT; p++)
            if (sweep_has(sw, (sim_policy_t)p) && sw->cells[i][p].wait_p99_ns > 0) {
                double v = (double)sw->cells[i][p].wait_p99_ns / 1e9;
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
    lo = pow(10.0, floor(log10(lo)));
    hi = pow(10.0, ceil(log10(hi)));
    if (hi <= lo)
        hi = lo * 10.0;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            SVG_W, top + h + 80, SVG_W, top + h + 80);
    char title[200];
    snprintf(title, sizeof(title), "p99 queue wait against offered load: preset %s, seed %" PRIu64,
             sw->wl.preset, sw->wl.seed);
    svg_text(f, SVG_W / 2, 28, "middle", 17, "bold", "#222222", title);
    svg_text(f, SVG_W / 2, 50, "middle", 12, "normal", SVG_AXIS,
             "lanesched-bench sweep; each policy on the same trace at each load; log scale");
    char buf[32];
    for (double v = lo; v <= hi * 1.0001; v *= 10.0) {
        double y = sweep_y(v, lo, hi, top, h);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" SVG_GRID "\"/>\n",
                left, y, left + w, y);
        report_dur(buf, sizeof(buf), (uint64_t)llround(v * 1e9));
        svg_text(f, left - 8, y + 4, "end", 12, "normal", SVG_AXIS, buf);
    }
    for (size_t i = 0; i < a->n_loads; i++) {
        double x = left + w * (a->loads[i] - x0) / (x1 - x0);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" SVG_GRID "\"/>\n",
                x, top, x, top + h);
        snprintf(buf, sizeof(buf), "%.0f%%", a->loads[i]);
        svg_text(f, x, top + h + 19, "middle", 12, "normal", SVG_AXIS, buf);
    }
    svg_text(f, left + w / 2, top + h + 42, "middle", 13, "normal", SVG_AXIS,
             "offered load (the workers' time the items ask for at full batches)");
    fprintf(f,
            "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\" "
            "font-size=\"13\" fill=\"" SVG_AXIS "\" " SVG_FONT ">p99 wait</text>\n",
            left - 62, top + h / 2);
    double ys = sweep_y((double)a->slo_ns / 1e9, lo, hi, top, h);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#cc0000\" "
            "stroke-dasharray=\"6,4\" stroke-width=\"1.5\"/>\n",
            left, ys, left + w, ys);
    snprintf(title, sizeof(title), "SLO %.0f ms", (double)a->slo_ns / 1e6);
    svg_text(f, left + 6, ys - 6, "start", 12, "normal", "#cc0000", title);
    double ly = top + 10;
    for (int p = 0; p < SIM_POLICY_COUNT; p++) {
        if (!sweep_has(sw, (sim_policy_t)p))
            continue;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"",
                sweep_colors[p], p == SIM_LANES ? "3" : "2");
        for (size_t i = 0; i < a->n_loads; i++) {
            double x = left + w * (a->loads[i] - x0) / (x1 - x0);
            double y = sweep_y((double)sw->cells[i][p].wait_p99_ns / 1e9, lo, hi, top, h);
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", x, y);
        }
        fprintf(f, "\"/>\n");
        for (size_t i = 0; i < a->n_loads; i++) {
            double x = left + w * (a->loads[i] - x0) / (x1 - x0);
            double y = sweep_y((double)sw->cells[i][p].wait_p99_ns / 1e9, lo, hi, top, h);
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x, y,
                    sweep_colors[p]);
        }
        char cap[24], label[64];
        sweep_capacity_str(sw, (sim_policy_t)p, cap, sizeof(cap));
        snprintf(label, sizeof(label), "%s (cap. %s)", sim_policy_name((sim_policy_t)p), cap);
        svg_legend_item(f, left + w + 16, ly, sweep_colors[p], 1, label);
        ly += 22;
    }
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}
