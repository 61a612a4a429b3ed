/*
 * waits.c - how long items wait, arrival to dispatch: a histogram of every committed item's
 * wait, so the daemon can say its p50 and p99 (lanes.stats, lanesched-ctl figures) without
 * keeping a sample per item.
 *
 * Buckets: WAITS_SUB per power of two of nanoseconds (a wait of w lands in the bucket of its
 * top WAITS_SUB_BITS + 1 bits), so a quantile is read to within 1 / WAITS_SUB of itself
 * (12.5%), from 1 ns to 2^WAITS_EXP_MAX ns (~18 minutes; longer waits count in the last bucket,
 * and the maximum is kept exactly).
 *
 * Invariants:
 *   1. The buckets' counts sum to n; max is the largest wait noted.
 *   2. A quantile is the upper edge of the bucket holding it (never below the true value, at
 *      most 12.5% above it), and never above max.
 *
 * Rejected: a reservoir of samples (memory per sample and a sort per read) and a fixed linear
 * histogram (waits span microseconds to minutes).
 */
#include "scheduler/core/sched_int.h"

static uint32_t waits_bucket(uint64_t w)
{
    if (w < WAITS_SUB)
        return (uint32_t)w;
    uint32_t e = 63 - (uint32_t)__builtin_clzll(w); /* w in [2^e, 2^(e+1)) */
    uint32_t sub = (uint32_t)(w >> (e - WAITS_SUB_BITS)) & (WAITS_SUB - 1);
    uint32_t b = (e - WAITS_SUB_BITS + 1) * WAITS_SUB + sub;
    return b < WAITS_BUCKETS ? b : WAITS_BUCKETS - 1;
}

/* The largest wait that lands in bucket b. */
static uint64_t waits_upper(uint32_t b)
{
    if (b < WAITS_SUB)
        return b;
    uint32_t e = b / WAITS_SUB + WAITS_SUB_BITS - 1, sub = b % WAITS_SUB;
    return ((uint64_t)(WAITS_SUB + sub + 1) << (e - WAITS_SUB_BITS)) - 1;
}

void waits_note(waits_t *w, uint64_t wait_ns)
{
    w->count[waits_bucket(wait_ns)]++;
    w->n++;
    if (wait_ns > w->max)
        w->max = wait_ns;
}

uint64_t sched_wait_quantile_ns(const sched_t *s, double q)
{
    const waits_t *w = &s->waits;
    if (w->n == 0)
        return 0;
    if (q >= 1.0)
        return w->max;
    uint64_t rank = (uint64_t)(q * (double)(w->n - 1)) + 1, seen = 0;
    for (uint32_t b = 0; b < WAITS_BUCKETS; b++) {
        seen += w->count[b];
        if (seen >= rank) {
            uint64_t up = waits_upper(b);
            return up < w->max ? up : w->max;
        }
    }
    return w->max;
}
