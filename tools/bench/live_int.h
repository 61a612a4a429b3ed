/*
 * live_int.h - private to live.c and live_stats.c (and read by throughput_lanes.c for the token
 * balance): lanes.stats as the live runs read it.
 */
#ifndef LANESCHED_BENCH_LIVE_INT_H
#define LANESCHED_BENCH_LIVE_INT_H

#include "net.h"

#include <nats/nats.h>

/* Requests <prefix>.stats on nc (borrowed) and parses the reply into *out. 0, or -1 when there is
 * no reply within NET_STATS_TIMEOUT_MS or it does not parse (*out untouched). */
int live_stats_fetch(natsConnection *nc, const char *prefix, net_stats_t *out /* out */);
/* lanes.stats as text (len bytes, no NUL needed): 0, or -1 when it is not JSON or a counter is
 * missing (*out untouched). */
int live_stats_parse(const char *json, size_t len, net_stats_t *out /* out */);
/* d = after - before for the counters; the "now" figures (lanes, queued, in flight) are after's. */
void live_stats_delta(const net_stats_t *before, const net_stats_t *after,
                      net_stats_t *d /* out */);

#endif
