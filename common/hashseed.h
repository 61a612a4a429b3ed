/*
 * hashseed.h - the process's secret seed of its hash tables (map.c, the daemon's dedupe window),
 * drawn once from getrandom. Clients choose the keys those tables are indexed by (shape
 * signatures, item ids); with an unseeded hash they could compute keys that share one home slot
 * and turn every lookup of a linear-probing table into a scan of the owner thread's time.
 */
#ifndef LANESCHED_HASHSEED_H
#define LANESCHED_HASHSEED_H

#include <stdint.h>

typedef struct {
    uint64_t a;
    uint64_t b;
} hashseed_t;

/* The seed, the same for the life of the process (thread-safe; drawn on the first call). Never
 * stored: nothing on disk depends on it, so every process may have its own. */
hashseed_t hashseed_get(void);

#endif
