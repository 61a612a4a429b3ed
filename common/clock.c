/*
 * clock.c - the two clock readings of clock.h.
 */
#include "common/clock.h"

#include <time.h>

static uint64_t clock_read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t clock_mono_ns(void)
{
    return clock_read_ns(CLOCK_MONOTONIC);
}

uint64_t clock_wall_ns(void)
{
    return clock_read_ns(CLOCK_REALTIME);
}
