/*
 * report_svg.c - the chart of a sim run, drawn by the bench itself: padding waste and shape hit
 * rate per policy, lanes in use over time and padding waste over time (128 vs 2,048 lanes).
 *
 * Owns: the chart's layout. Every figure comes from report.c's definitions (report_int.h).
 *
 * Invariants:
 *   1. Output is a pure function of the report (report.c invariant 1).
 *   2. The SVG is self-contained: no scripts, fonts or external references; it renders the same
 *      in a browser, rsvg or ImageMagick.
 *
 * Rejected: gnuplot or a Python plotting step: the chart must come from the bench binary with
 * nothing else installed.
 */
#include "report_int.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define REPORT_WASTE_BINS 60u /* points of the waste-over-time line */

#define SVG_WASTE "#d95f02"
#define SVG_HIT   "#1b9e77"
#define SVG_L128  "#e7298a"
#define SVG_L2048 "#4c56b8"

/* A step of 1, 2 or 5 x 10^k giving about `ticks` ticks up to max. */
static double svg_nice_step(double max, int ticks)
{
    if (!(max > 0.0))
        return 1.0;
    double raw = max / ticks, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

void svg_text(FILE *f, double x, double y, const char *anchor, double size, const char *weight,
              const char *fill, const char *text)
{
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%.0f\" "
            "font-weight=\"%s\" fill=\"%s\" " SVG_FONT ">",
            x, y, anchor, size, weight, fill);
    for (const char *p = text; *p; p++) {
        if (*p == '<')
            fputs("&lt;", f);
        else if (*p == '>')
            fputs("&gt;", f);
        else if (*p == '&')
            fputs("&amp;", f);
        else
            fputc(*p, f);
    }
    fputs("</text>\n", f);
}

/* A y axis with gridlines from 0 to ymax (step ystep) over [top, top+h], labels with unit. */
static void svg_y_axis(FILE *f, double left, double top, double w, double h, double ymax,
                       double ystep, const char *unit, const char *label)
{
    char buf[64];
    for (double v = 0.0; v <= ymax + ystep * 1e-9; v += ystep) {
        double y = top + h - h * v / ymax;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" SVG_GRID
                "\" stroke-width=\"1\"/>\n",
                left, y, left + w, y);
        snprintf(buf, sizeof(buf), "%g%s", v, unit);
        svg_text(f, left - 8, y + 4, "end", 12, "normal", SVG_AXIS, buf);
    }
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" SVG_AXIS
            "\" stroke-width=\"1.5\"/>\n",
            left, top, left, top + h);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" SVG_AXIS
            "\" stroke-width=\"1.5\"/>\n",
            left, top + h, left + w, top + h);
    fprintf(f,
            "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\" "
            "font-size=\"13\" fill=\"" SVG_AXIS "\" " SVG_FONT ">%s</text>\n",
            left - 58, top + h / 2, label);
}

static void svg_x_axis_time(FILE *f, double left, double top, double w, double h, double xmax)
{
    char buf[32];
    double step = svg_nice_step(xmax, 8);
    for (double v = 0.0; v <= xmax + step * 1e-9; v += step) {
        double x = left + w * v / xmax;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" SVG_AXIS
                "\" stroke-width=\"1\"/>\n",
                x, top + h, x, top + h + 5);
        snprintf(buf, sizeof(buf), "%g", v);
        svg_text(f, x, top + h + 19, "middle", 12, "normal", SVG_AXIS, buf);
    }
    svg_text(f, left + w / 2, top + h + 38, "middle", 13, "normal", SVG_AXIS, "simulated time (s)");
}

void svg_legend_item(FILE *f, double x, double y, const char *color, int line, const char *text)
{
    if (line)
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n",
                x, y - 4, x + 22, y - 4, color);
    else
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", x,
                y - 12, color);
    svg_text(f, x + (line ? 28 : 20), y, "start", 13, "normal", "#222222", text);
}

/* One bar chart of a figure per policy, on a zero-based axis (never truncated). */
static void svg_bar_panel(FILE *f, const report_t *rep, double left, double top, double w, double h,
                          int hit, const char *title, const char *color)
{
    double ymax = 100.0, ystep = 20.0;
    if (!hit) {
        double mx = 0.0;
        for (size_t i = 0; i < rep->n_results; i++)
            mx = fmax(mx, report_waste_pct(&rep->results[i]));
        ystep = svg_nice_step(mx * 1.15 > 0.5 ? mx * 1.15 : 0.5, 5);
        ymax = ceil((mx * 1.15 > 0.5 ? mx * 1.15 : 0.5) / ystep) * ystep;
    }
    svg_text(f, left, top - 24, "start", 15, "bold", "#111111", title);
    svg_y_axis(f, left, top, w, h, ymax, ystep, "%", hit ? "shape hit rate" : "padding waste");
    size_t n = rep->n_results ? rep->n_results : 1;
    double group = w / (double)n, bar = group * 0.62;
    char buf[48];
    for (size_t i = 0; i < rep->n_results; i++) {
        const sim_result_t *r = &rep->results[i];
        double v = hit ? report_hit_pct(r) : report_waste_pct(r);
        double gx = left + group * (double)i + group * 0.5;
        double bh = h * fmin(fmax(v, 0.0), ymax) / ymax;
        if (bh < 1.5 && v > 0)
            bh = 1.5; /* visible even when tiny: the label carries the value */
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
                gx - bar / 2, top + h - bh, bar, bh, color);
        snprintf(buf, sizeof(buf), hit ? "%.1f" : (v < 10 ? "%.2f" : "%.1f"), v);
        svg_text(f, gx, top + h - bh - 5, "middle", 12, "bold", color, buf);
        fprintf(f,
                "<text transform=\"translate(%.1f,%.1f) rotate(-30)\" text-anchor=\"end\" "
                "font-size=\"12\" font-weight=\"bold\" fill=\"#222222\" " SVG_FONT ">%s</text>\n",
                gx + 4, top + h + 16, sim_policy_name(r->policy));
    }
}

/* Panel 1: waste % and hit % per policy, side by side. */
static void svg_bars(FILE *f, const report_t *rep, double top, double h)
{
    double gap = 90.0, w = (SVG_W - SVG_LEFT - SVG_RIGHT - gap) / 2.0;
    svg_bar_panel(f, rep, SVG_LEFT, top, w, h, 0, "Padding waste % per policy (lower is better)",
                  SVG_WASTE);
    svg_bar_panel(f, rep, SVG_LEFT + w + gap, top, w, h, 1,
                  "Shape hit rate % per policy (higher is better)", SVG_HIT);
}

/* Panel 2: lanes in use (summed over shapes) over time, 128 vs 2,048. */
static void svg_lanes(FILE *f, const report_t *rep, double top, double h)
{
    double left = SVG_LEFT, w = SVG_W - SVG_LEFT - SVG_RIGHT;
    const sim_result_t *rs[2] = {report_find(rep, SIM_LANES_128), report_find(rep, SIM_LANES_SEED)};
    const char *colors[2] = {SVG_L128, SVG_L2048};
    double xmax = 1.0, ymax = 1.0;
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; rs[k] != NULL && i < rs[k]->n_series; i++) {
            xmax = fmax(xmax, rs[k]->series[i].t_s);
            ymax = fmax(ymax, rs[k]->series[i].queues);
        }
    }
    /* The 128 budget summed over the shapes seen, when it is in range. */
    double budget = 0.0;
    if (rs[0] != NULL && rep->wl != NULL) {
        uint32_t shapes = 0, seen_max = 0;
        for (size_t i = 0; i < rep->n_items; i++)
            seen_max = rep->items[i].shape > seen_max ? rep->items[i].shape : seen_max;
        shapes = rep->n_items ? seen_max + 1 : 0;
        budget = 128.0 * shapes;
        if (budget > ymax * 1.6)
            budget = 0.0;
        else
            ymax = fmax(ymax, budget);
    }
    double ystep = svg_nice_step(ymax * 1.05, 6);
    ymax = ceil(ymax * 1.05 / ystep) * ystep;
    svg_text(f, left, top - 30, "start", 16, "bold", "#111111",
             "Lanes in use over time, all shapes (128-lane vs 2,048-lane budget per shape)");
    svg_y_axis(f, left, top, w, h, ymax, ystep, "", "lanes in use");
    svg_x_axis_time(f, left, top, w, h, xmax);
    if (budget > 0.0) {
        double y = top + h - h * budget / ymax;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" SVG_L128
                "\" stroke-width=\"1\" stroke-dasharray=\"6,4\"/>\n",
                left, y, left + w, y);
        char buf[96];
        snprintf(buf, sizeof(buf), "lanes-128 budget: 128 x %.0f shapes", budget / 128);
        svg_text(f, left + w * 0.5, y - 6, "middle", 12, "bold", SVG_L128, buf);
    }
    for (int k = 0; k < 2; k++) {
        if (rs[k] == NULL || rs[k]->n_series == 0)
            continue;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" points=\"",
                colors[k]);
        fprintf(f, "%.1f,%.1f", left, top + h);
        for (size_t i = 0; i < rs[k]->n_series; i++)
            fprintf(f, " %.1f,%.1f", left + w * rs[k]->series[i].t_s / xmax,
                    top + h - h * rs[k]->series[i].queues / ymax);
        fprintf(f, "\"/>\n");
    }
    if (rep->wl != NULL) {
        double xa = left + w * fmin(rep->wl->duration_s, xmax) / xmax;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\" "
                "stroke-width=\"1\" stroke-dasharray=\"3,3\"/>\n",
                xa, top, xa, top + h);
        svg_text(f, xa - 4, top + 14, "end", 12, "normal", "#666666", "arrivals end");
    }
    svg_legend_item(f, left + 16, top + 20, SVG_L128, 1, "lanes-128");
    svg_legend_item(f, left + 16, top + 40, SVG_L2048, 1, "lanes-2048");
}

/* Panel 3: padding waste over time (binned), 128 vs 2,048. */
static void svg_waste(FILE *f, const report_t *rep, double top, double h)
{
    double left = SVG_LEFT, w = SVG_W - SVG_LEFT - SVG_RIGHT;
    const sim_result_t *rs[2] = {report_find(rep, SIM_LANES_128), report_find(rep, SIM_LANES_SEED)};
    const char *colors[2] = {SVG_L128, SVG_L2048};
    double xmax = 1.0;
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; rs[k] != NULL && i < rs[k]->n_series; i++)
            xmax = fmax(xmax, rs[k]->series[i].t_s);
    }
    double bin = xmax / REPORT_WASTE_BINS, ymax = 1.0;
    double pts[2][REPORT_WASTE_BINS];
    for (int k = 0; k < 2; k++) {
        for (unsigned b = 0; b < REPORT_WASTE_BINS; b++) {
            pts[k][b] = rs[k] ? report_window_waste(rs[k], b * bin, (b + 1) * bin) : -1.0;
            ymax = fmax(ymax, pts[k][b]);
        }
    }
    double ystep = svg_nice_step(ymax * 1.1, 5);
    ymax = ceil(ymax * 1.1 / ystep) * ystep;
    svg_text(f, left, top - 30, "start", 16, "bold", "#111111",
             "Padding waste of the batches dispatched, over time (128 vs 2,048 lanes)");
    svg_y_axis(f, left, top, w, h, ymax, ystep, "%", "padding waste");
    svg_x_axis_time(f, left, top, w, h, xmax);
    for (int k = 0; k < 2; k++) {
        if (rs[k] == NULL)
            continue;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.2\" points=\"",
                colors[k]);
        int first = 1;
        for (unsigned b = 0; b < REPORT_WASTE_BINS; b++) {
            if (pts[k][b] < 0)
                continue; /* no batch in the bin */
            fprintf(f, "%s%.1f,%.1f", first ? "" : " ", left + w * (b + 0.5) * bin / xmax,
                    top + h - h * pts[k][b] / ymax);
            first = 0;
        }
        fprintf(f, "\"/>\n");
    }
    svg_legend_item(f, left + 16, top + 20, SVG_L128, 1, "lanes-128");
    svg_legend_item(f, left + 16, top + 40, SVG_L2048, 1, "lanes-2048");
}

int report_svg_write(const char *path, const report_t *rep)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    const double height = 1130.0;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            SVG_W, height, SVG_W, height);
    char buf[256];
    snprintf(buf, sizeof(buf),
             "lanesched-bench sim: preset %s, seed %" PRIu64 ", %zu items, %" PRIu32
             " models, %" PRIu32 " workers/model, LRU of %" PRIu32 " shapes",
             rep->wl->preset, rep->wl->seed, rep->n_items, rep->wl->models,
             rep->sim->workers_per_model, rep->sim->gpu.cache_shapes);
    svg_text(f, 20, 28, "start", 14, "bold", "#111111", buf);
    if (rep->command != NULL) {
        snprintf(buf, sizeof(buf), "$ %s", rep->command);
        svg_text(f, 20, 48, "start", 12, "normal", "#555555", buf);
    }
    svg_bars(f, rep, 100, 250);
    svg_lanes(f, rep, 490, 260);
    svg_waste(f, rep, 850, 220);
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}
