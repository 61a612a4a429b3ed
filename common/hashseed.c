/*
 * hashseed.c - one random seed per process for the hash tables a client can aim keys at.
 *
 * Invariants:
 *   1. Drawn once (pthread_once) and never changed: a table's slots were placed with it.
 *   2. Unpredictable where the kernel gives randomness (getrandom); a kernel without it gets the
 *      clock, the pid and an address mixed (splitmix64): different per process, guessable at
 *      most, which is still no worse than no seed.
 *
 * Rejected: a seed per table (one draw per table on the hot paths that create them); a seed in
 * the data directory (a seed that outlives the process is one an attacker can learn once).
 */
#include "common/hashseed.h"

#include "common/rng.h"

#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t hashseed_once = PTHREAD_ONCE_INIT;
static hashseed_t hashseed_value;

static void hashseed_draw(void)
{
    hashseed_t s;
    if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s)) { /* invariant 2 */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 48 ^
                     (uint64_t)(uintptr_t)&s;
        s.a = rng_splitmix64(&x);
        s.b = rng_splitmix64(&x);
    }
    hashseed_value = s;
}

hashseed_t hashseed_get(void)
{
    pthread_once(&hashseed_once, hashseed_draw);
    return hashseed_value;
}
