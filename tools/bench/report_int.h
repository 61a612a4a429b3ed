/*
 * report_int.h - private to report.c and report_svg.c: the figures both print, defined once.
 */
#ifndef LANESCHED_BENCH_REPORT_INT_H
#define LANESCHED_BENCH_REPORT_INT_H

#include "bench.h"

/* (padded - real) / padded and hits / batches, in percent (0 without batches). */
double report_waste_pct(const sim_result_t *r);
double report_hit_pct(const sim_result_t *r);
/* The result of policy p in the report, or NULL. */
const sim_result_t *report_find(const report_t *rep, sim_policy_t p);
/* Waste of the batches dispatched in [from_s, to_s) of the series; -1 when there were none. */
double report_window_waste(const sim_result_t *r, double from_s, double to_s);

#endif
