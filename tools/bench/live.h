/*
 * live.h - private to tools/bench: `lanesched-bench live` (live.c), called by main.c.
 */
#ifndef LANESCHED_BENCH_LIVE_H
#define LANESCHED_BENCH_LIVE_H

/* The mode (argv[0] is "live"): the trace over NATS against lanesched at each durability level,
 * with --baseline JetStream too. Exit status as net_session_report says (0, 1, 2, 130). */
int live_main(int argc, char **argv);

#endif
