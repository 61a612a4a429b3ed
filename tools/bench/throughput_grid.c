/*
 * throughput_grid.c - JetStream driven at its best: before the main runs, `throughput` tries the
 * JetStream driver's settings on a small grid and keeps the one with the highest end-to-end
 * figure, so lanesched is compared with the best driver found on this machine and this
 * nats-server in the same session, not with one guess.
 *
 * The axes: producers 1, 2, 4; consumers 1, 2, 4, 8 (a consumer serves several models when there
 * are fewer consumers than models); messages per pull request (fetch) 64, 256; the window, which
 * is both the publishes in flight per producer (js_PublishAsync MaxPending) and the messages a
 * consumer keeps requested, 512 or 4,096.
 *   --js-grid full   every combination: 3 x 4 x 2 x 2 = 48 cells
 *   --js-grid quick  (the default) producers x consumers at fetch 256, window 4,096 (12 cells),
 *                    then the three other fetch/window pairs at the best producers x consumers
 *                    (15 cells)
 *   --js-grid off    the flags' settings alone (--producers, --consumers, --max-batch-size,
 *                    --prefetch, --window)
 * Each cell is a fresh stream running the end-to-end phase alone (producers and consumers at
 * once) on the first --js-grid-items items of the run's workload (default 50,000; never more
 * than --items), the same items, payloads and models as every other run.
 *
 * Invariants:
 *  1. A cell that lost, duplicated or failed an item, or did not finish, cannot win.
 *  2. The winner is the cell with the highest end-to-end items/s; ties go to the earlier cell.
 *     The main runs (three phases on --items, every rep) use the winner's settings, and the
 *     ratios divide by the higher of the winner's main-run median and the best cell's own figure
 *     (throughput_report.c), so the grid can only make JetStream look better.
 *
 * Rejected alternatives:
 *  - The whole grid at full length in every rep: 48 cells of 400,000 items would take most of
 *    an hour on this machine; the cells rank settings, the main runs measure the winner.
 *  - A search that stops at the first cell slower than its neighbour: the figure is noisy on a
 *    shared machine and the grid is small enough to try whole.
 */
#include "throughput_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const uint32_t tpg_producers[] = {1, 2, 4};
static const uint32_t tpg_consumers[] = {1, 2, 4, 8};
/* fetch, window: the quick grid's first stage runs the first pair */
static const uint32_t tpg_pairs[][2] = {{256, 4096}, {64, 4096}, {256, 512}, {64, 512}};
#define TPG_N(a) (sizeof(a) / sizeof((a)[0]))

void tp_js_cfg_default(const tp_opts_t *o, tp_js_cfg_t *out)
{
    *out = (tp_js_cfg_t){.producers = o->producers,
                         .consumers = o->consumers,
                         .fetch = o->max_batch_size,
                         .requested = o->prefetch * o->max_batch_size,
                         .pending = o->window * o->batch};
}

void tp_js_cfg_format(const tp_js_cfg_t *c, char *out, size_t len)
{
    snprintf(out, len, "%ux%u fetch %u, %u requested, %u pending", c->producers, c->consumers,
             c->fetch, c->requested, c->pending);
}

static double tpg_rate(const tp_result_t *r)
{
    const tp_phase_result_t *e = &r->phase[TP_E2E];
    return r->ok && e->ran && e->elapsed_s > 0 ? (double)r->items / e->elapsed_s : 0.0;
}

/* One cell: run, print its line, keep it. */
static void tpg_cell(const tp_opts_t *o, const tp_workload_t *wl, uint64_t items,
                     const tp_js_cfg_t *c, tp_result_t *cells, size_t *n)
{
    if (*n >= TP_GRID_MAX || net_stopping(NULL))
        return;
    tp_result_t *r = &cells[(*n)++];
    char what[96];
    tp_js_run(o, wl, c, TP_ROLE_GRID, items, r);
    tp_js_cfg_format(c, what, sizeof(what));
    const tp_phase_result_t *e = &r->phase[TP_E2E];
    if (r->ok)
        printf("  grid %-44s %9.0f items/s end to end (%.2f s)  nats-server %.2f CPU s per M\n",
               what, tpg_rate(r), e->elapsed_s,
               e->server_cpu_s * 1e6 / (double)(r->items > 0 ? r->items : 1));
    else
        printf("  grid %-44s FAILED: %s\n", what, r->error[0] ? r->error : "lost or failed items");
    fflush(stdout);
}

/* The best cell of cells[from, n) (invariant 2), or -1. */
static long tpg_best(const tp_result_t *cells, size_t from, size_t n)
{
    long best = -1;
    for (size_t i = from; i < n; i++)
        if (tpg_rate(&cells[i]) > 0 && (best < 0 || tpg_rate(&cells[i]) > tpg_rate(&cells[best])))
            best = (long)i;
    return best;
}

void tp_grid_run(const tp_opts_t *o, const tp_workload_t *wl, tp_result_t *cells, size_t *n,
                 tp_js_cfg_t *winner)
{
    *n = 0;
    tp_js_cfg_default(o, winner);
    if (o->js_grid == TP_GRID_OFF)
        return;
    uint64_t items =
        o->js_grid_items == 0 || o->js_grid_items > o->items ? o->items : o->js_grid_items;
    printf("\nJetStream grid (%s): each cell a fresh stream, the end-to-end phase alone on the "
           "first %" PRIu64 " items\n",
           o->js_grid == TP_GRID_FULL ? "full" : "quick", items);
    size_t pairs = o->js_grid == TP_GRID_FULL ? TPG_N(tpg_pairs) : 1;
    for (size_t k = 0; k < pairs; k++)
        for (size_t p = 0; p < TPG_N(tpg_producers); p++)
            for (size_t c = 0; c < TPG_N(tpg_consumers); c++) {
                tp_js_cfg_t cfg = {.producers = tpg_producers[p],
                                   .consumers = tpg_consumers[c],
                                   .fetch = tpg_pairs[k][0],
                                   .requested = tpg_pairs[k][1],
                                   .pending = tpg_pairs[k][1]};
                tpg_cell(o, wl, items, &cfg, cells, n);
            }
    long best = tpg_best(cells, 0, *n);
    if (o->js_grid == TP_GRID_QUICK && best >= 0) {
        tp_js_cfg_t at = cells[best].js;
        for (size_t k = 1; k < TPG_N(tpg_pairs); k++) {
            tp_js_cfg_t cfg = at;
            cfg.fetch = tpg_pairs[k][0];
            cfg.requested = cfg.pending = tpg_pairs[k][1];
            tpg_cell(o, wl, items, &cfg, cells, n);
        }
        best = tpg_best(cells, 0, *n);
    }
    if (best >= 0)
        *winner = cells[best].js;
}
