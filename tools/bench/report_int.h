/*
 * report_int.h - private to the report files (report.c the figures and the tables,
 * report_claims.c the checks, report_json.c the JSON, report_svg.c the sim chart,
 * report_sweep.c the sweep's table, JSON and chart): every figure defined once.
 */
#ifndef LANESCHED_BENCH_REPORT_INT_H
#define LANESCHED_BENCH_REPORT_INT_H

#include "bench.h"

#include "scheduler/core/sched.h"

/* (padded - real) / padded and hits / batches, in percent (0 without batches). */
double report_waste_pct(const sim_result_t *r);
double report_hit_pct(const sim_result_t *r);
/* The result of policy p in the report, or NULL. */
const sim_result_t *report_find(const report_t *rep, sim_policy_t p);
/* Waste of the batches dispatched in [from_s, to_s) of the series; -1 when there were none. */
double report_window_waste(const sim_result_t *r, double from_s, double to_s);
double report_items_per_batch(const sim_result_t *r);
/* GPU busy ns of the better of pow2 and range64 in the report; 0 when either is missing. */
double report_best_bucket_gpu(const report_t *rep);
/* Reuses per lane opened over the second half of the arrival window (-1: nothing opened);
 * the two counts through the out pointers (may be NULL). */
double report_reuse_ratio(const sim_result_t *r, uint64_t *out_reuses /* out */,
                          uint64_t *out_opened /* out */);
/* The GPU time no policy can go below on this trace, in ns: every shape's items in batches of
 * one shape, each padded only to the 8-token multiple and as full as the contract allows (the
 * fewest batches its item count and padded tokens need); 0 when it cannot be computed. */
double report_gpu_floor(const report_t *rep);
/* The most shapes one model has among the items (not the generator's number: a converted trace's
 * header may not say, or say wrong). */
uint32_t report_shapes_per_model(const report_t *rep);
/* Whether any item of the trace carries a prefix; the GPU ns the prefix cache saved r (the
 * prefixes its hits skipped, at the workers' per-token cost). */
int report_has_prefixes(const report_t *rep);
double report_cache_saved_ns(const report_t *rep, const sim_result_t *r);
/* Of pow2 (0) and range64 (1), given their p99 waits and GPU times, the one within the budget at
 * the least GPU time; -1 when neither is within it. */
int report_budget_met(uint64_t p_p99, uint64_t p_busy, uint64_t r_p99, uint64_t r_busy,
                      uint64_t slo);
/* The best hit rate any policy reaches with r's waits on this trace (report_claims.c). */
double report_hit_bound(const report_t *rep, const sim_result_t *r);
/* Offered load in percent of one model (all: UINT32_MAX), as the header prints it. */
double report_offered_load(const report_t *rep, uint32_t model);
uint64_t report_total_tokens(const report_t *rep);
double report_per_s(uint64_t n, double seconds);
double report_batches_per_gpu_s(const sim_result_t *r);
int64_t report_token_diff(const sim_result_t *r);
/* 850us, 12.3ms, 4.56s, 312s. */
void report_dur(char *buf, size_t len, uint64_t ns);
/* The verdict of the check `key` after its figures: ": yes" or ": NO", counted into *failed;
 * for a key named in the comma list unmet (--unmet; NULL: none) a NO is printed as known and
 * not counted, and a yes is counted: a claim that came true leaves the list. Returns ok. */
int report_verdict(FILE *f, const char *key, int ok, const char *unmet, int *failed);
/* Prints the checks; returns how many said NO. */
int report_claims_print(FILE *f, const report_t *rep);
/* A JSON number (null for NaN and infinities). */
void report_json_num(FILE *f, double v);

/* The charts' common parts (report_svg.c). */
#define SVG_W     980.0
#define SVG_LEFT  80.0
#define SVG_RIGHT 40.0
#define SVG_FONT  "font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\""
#define SVG_GRID  "#dddddd"
#define SVG_AXIS  "#444444"
/* text (borrowed) escaped for XML. */
void svg_text(FILE *f, double x, double y, const char *anchor, double size, const char *weight,
              const char *fill, const char *text);
/* A legend entry: a line (line = 1) or a square in color, then text. */
void svg_legend_item(FILE *f, double x, double y, const char *color, int line, const char *text);

#endif
