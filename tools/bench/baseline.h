/*
 * baseline.h - private to tools/bench: the JetStream baseline (baseline.c), called by main.c
 * (`lanesched-bench baseline`) and live.c (`live --baseline`).
 */
#ifndef LANESCHED_BENCH_BASELINE_H
#define LANESCHED_BENCH_BASELINE_H

#include "net.h"

/* One run of the trace t through a JetStream work-queue stream on url with o's workers, into
 * *res (res->ran false and res->error set when it could not be set up). */
void base_run(const net_opts_t *o, const net_trace_t *t, const char *url,
              net_result_t *res /* out */);

/* The mode (argv[0] is "baseline"): the trace through JetStream alone. Exit status as
 * net_session_report says (0, 1, 2, 130). */
int base_main(int argc, char **argv);

#endif
