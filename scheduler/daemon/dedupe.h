/*
 * dedupe.h - the window of recently accepted item ids that makes a retried submit safe.
 *
 * Ownership: the window is caller memory (dedupe_init/fini) and owns its three arrays; ids
 * passed to dedupe_key are borrowed for the call (only 96 bits of their hash are kept).
 */
#ifndef LANESCHED_DAEMON_DEDUPE_H
#define LANESCHED_DAEMON_DEDUPE_H

#include "scheduler/daemon/daemon.h"

#include <stddef.h>
#include <stdint.h>

/* An item's key: 96 bits of the XXH3 128-bit hash of its id under its model's seed (dedupe.c
 * invariants 2 and 9), computed once per item for dedupe_contains and dedupe_add. */
typedef struct {
    uint64_t a;
    uint32_t b;
} dedupe_key_t;

/* One accepted id, in arrival order: its key (w[0..1] = a, w[2] = b). 12 bytes; when it leaves
 * the window is its run's. */
typedef struct {
    uint32_t w[3];
} dedupe_rec_t;

/* A run of consecutive records accepted with the same expiry (one Submit's items share it). */
typedef struct {
    uint64_t expires_ns;
    uint64_t n;
} dedupe_run_t;

typedef struct {
    dedupe_rec_t *ring; /* owned; cap records, the live ones at head .. head + len (mod cap) */
    size_t head, len, cap;
    /* Open addressing over the ring: slot = ring position + 1 of the newest acceptance of a
     * key, 0 = empty; linear probing, at most half full. */
    struct {
        uint32_t *slots; /* owned */
        size_t cap, len;
    } seen;
    /* The records' runs, oldest first: their n sum to len. */
    struct {
        dedupe_run_t *a; /* owned; cap runs, the live ones at head .. head + len (mod cap) */
        size_t head, len, cap;
    } runs;
    uint64_t window_ns;
    size_t max_ids;     /* 0 = no bound */
    uint64_t evictions; /* ids forgotten before their window ended, to stay within max_ids */
    size_t reserved;    /* ring capacity a dedupe_reserve holds against shrinking, until
                         * dedupe_reserve_end or the window next expires a run */
} dedupe_t;

void dedupe_init(dedupe_t *d, uint64_t window_ns);
void dedupe_fini(dedupe_t *d);
/* Bounds the ids held (0 = no bound, the default): past it, adding forgets the oldest. */
void dedupe_limit_set(dedupe_t *d, size_t max_ids);
/* The seed of a model's keys (model: borrowed for the call), from the process's hash seed
 * (common/hashseed.h): computed once per Submit or stored queue. */
uint64_t dedupe_seed(const char *model);
/* The key of an id (borrowed for the call) of the model whose dedupe_seed is seed. */
dedupe_key_t dedupe_key(uint64_t seed, const uint8_t *id, size_t len);
/* 1 if the id of key k was accepted within the window. */
int dedupe_contains(dedupe_t *d, dedupe_key_t k, uint64_t now_ns);
daemon_status_t dedupe_add(dedupe_t *d, dedupe_key_t k, uint64_t now_ns);
/* Makes room for n more ids (at most max_ids in all) without a resize: a restart adds every
 * stored item's id at once, and growing by doubling would rehash the window at every power of
 * two. The room is kept (not given back as unused) until dedupe_reserve_end, or until the
 * window next expires a run. DAEMON_ENOMEM leaves the window as it was. */
daemon_status_t dedupe_reserve(dedupe_t *d, size_t n);
/* Ends a reservation: room the adds did not use is given back at the next expiry check, as after
 * any peak. */
void dedupe_reserve_end(dedupe_t *d);
/* Asks the cache ahead of dedupe_add or dedupe_contains for k's home slot in the index (level 0)
 * or, once that slot is cached, for the record it names (level 1: a taken slot's record is read
 * to compare keys). A hint: a resize in between costs only the hint. */
void dedupe_prefetch(const dedupe_t *d, dedupe_key_t k, unsigned level);
/* Bytes the window holds allocated (its ring, its index and its runs). */
size_t dedupe_bytes(const dedupe_t *d);
/* Executable invariants (common/invariant.h): 1 when every rule of dedupe.c holds. O(len). */
int dedupe_check(const dedupe_t *d);

#endif
