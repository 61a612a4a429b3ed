/*
 * throughput.h - private to tools/bench: `lanesched-bench throughput` (throughput.c), called by
 * main.c.
 */
#ifndef LANESCHED_BENCH_THROUGHPUT_H
#define LANESCHED_BENCH_THROUGHPUT_H

/* The mode (argv[0] is "throughput"): lanesched at each durability level, then a JetStream work
 * queue, saturated by clients that keep the pipe full; exit status 0 (every item travelled once,
 * token difference 0), 1 (an item lost or failed, a token difference, a run that did not
 * finish), 2 (usage or setup error), 130 (interrupted). */
int tp_main(int argc, char **argv);

#endif
