/*
 * dedupe.h - the window of recently accepted item ids that makes a retried submit safe.
 *
 * Ownership: the window is caller memory (dedupe_init/fini) and owns its two arrays; ids
 * passed in are borrowed for the call (only their 128-bit hashes are kept).
 */
#ifndef LANESCHED_DAEMON_DEDUPE_H
#define LANESCHED_DAEMON_DEDUPE_H

#include "common/map.h"
#include "scheduler/daemon/daemon.h"

/* One accepted id, in arrival order: its two hashes and when it leaves the window. 24 bytes. */
typedef struct {
    map_key_t key;
    uint64_t expires_ns;
} dedupe_rec_t;

typedef struct {
    dedupe_rec_t *ring; /* owned; cap records, the live ones at head .. head + len (mod cap) */
    size_t head, len, cap;
    /* Open addressing over the ring: slot = ring position + 1 of the newest acceptance of a
     * key, 0 = empty; linear probing, at most half full. */
    struct {
        uint32_t *slots; /* owned */
        size_t cap, len;
    } seen;
    uint64_t window_ns;
    size_t max_ids;     /* 0 = no bound */
    uint64_t evictions; /* ids forgotten before their window ended, to stay within max_ids */
} dedupe_t;

void dedupe_init(dedupe_t *d, uint64_t window_ns);
void dedupe_fini(dedupe_t *d);
/* Bounds the ids held (0 = no bound, the default): past it, adding forgets the oldest. */
void dedupe_limit_set(dedupe_t *d, size_t max_ids);
/* 1 if the id was accepted within the window. */
int dedupe_contains(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns);
daemon_status_t dedupe_add(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns);
/* Bytes the window holds allocated (its ring and its index). */
size_t dedupe_bytes(const dedupe_t *d);

#endif
