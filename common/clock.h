/*
 * clock.h - nanosecond readings of the system clocks, for the daemon, the store, the clients,
 * the tools and the tests alike.
 *
 * CLOCK_MONOTONIC for intervals, deadlines and ages: it never jumps. CLOCK_REALTIME only for
 * timestamps that leave the process (arrival times written into segments and sent on the wire,
 * log lines), where another process or a later run must read them.
 */
#ifndef LANESCHED_CLOCK_H
#define LANESCHED_CLOCK_H

#include <stdint.h>

uint64_t clock_mono_ns(void);
uint64_t clock_wall_ns(void);

#endif
