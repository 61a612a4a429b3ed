/*
 * dedupe.c - the window of recently accepted item ids, so that a producer retrying a submit
 * after a timeout (with the same ids) gets "duplicate" and the item is stored once.
 *
 * Layout: a ring of 24-byte records in arrival order (two hashes, expiry) and, over it, an
 * open-addressing index of 4-byte ring positions kept at most half full: 32 bytes per id at a
 * full ring (a map of 24-byte slots beside a ring takes about 96).
 *
 * Invariants:
 *   1. An id is found iff it was accepted less than window_ns ago and not evicted (entries
 *      expire in arrival order from the ring, so expiry costs O(1) per entry).
 *   2. Ids are keyed by two independent 64-bit XXH64 hashes (seeds 0 and 1): a false
 *      "duplicate" would lose an item, so the key must be collision-free in practice; 128 bits
 *      make it ~2^-64 per pair even at millions of ids in a window.
 *   3. The index holds one slot per distinct live key, pointing at its newest acceptance; an
 *      older record of the same key leaves the ring without touching the index.
 *   4. At most max_ids records (when set): adding past it forgets the oldest first, counted
 *      in evictions, so the window's memory is bounded whatever the rate of submits.
 *   5. Rebuilt at start from the items the store still holds (the owner adds them), so a retry
 *      after a restart is still recognised while its first copy is queued.
 *
 * Rejected: keeping the ids themselves (up to 64 bytes each); a Bloom filter (false positives
 * would drop items); refusing new items when the window is full (a bounded window must not
 * stop intake; a retry that old is rare and is stored twice, never lost).
 */
#include "scheduler/daemon/dedupe.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The ring's first size and the size it never shrinks below: 32 KiB with its index, nothing
 * beside the rest of the daemon, and a window that empties between bursts is not reallocated
 * at every one. */
#define DEDUPE_RING_MIN 1024u

void dedupe_init(dedupe_t *d, uint64_t window_ns)
{
    memset(d, 0, sizeof(*d));
    d->window_ns = window_ns;
}

void dedupe_fini(dedupe_t *d)
{
    free(d->ring);
    free(d->seen.slots);
}

void dedupe_limit_set(dedupe_t *d, size_t max_ids)
{
    d->max_ids = max_ids;
}

size_t dedupe_bytes(const dedupe_t *d)
{
    return d->cap * sizeof(*d->ring) + d->seen.cap * sizeof(*d->seen.slots);
}

static map_key_t dedupe_key(const uint8_t *id, size_t len)
{
    return (map_key_t){XXH64(id, len, 0), XXH64(id, len, 1)};
}

static size_t dedupe_home(const dedupe_t *d, map_key_t k)
{
    return (size_t)k.a & (d->seen.cap - 1);
}

/* The index slot holding key k, or SIZE_MAX. */
static size_t dedupe_find(const dedupe_t *d, map_key_t k)
{
    if (d->seen.cap == 0)
        return SIZE_MAX;
    for (size_t i = dedupe_home(d, k);; i = (i + 1) & (d->seen.cap - 1)) {
        uint32_t s = d->seen.slots[i];
        if (s == 0)
            return SIZE_MAX;
        const dedupe_rec_t *r = &d->ring[s - 1];
        if (r->key.a == k.a && r->key.b == k.b)
            return i;
    }
}

/* Points k's slot at ring position pos (invariant 3: the newest acceptance owns it). */
static void dedupe_index_put(dedupe_t *d, map_key_t k, size_t pos)
{
    size_t i = dedupe_find(d, k);
    if (i == SIZE_MAX) {
        for (i = dedupe_home(d, k); d->seen.slots[i] != 0; i = (i + 1) & (d->seen.cap - 1))
            ;
        d->seen.len++;
    }
    d->seen.slots[i] = (uint32_t)pos + 1;
}

/* Empties slot i, shifting later members of its probe run back (no tombstones). */
static void dedupe_index_del(dedupe_t *d, size_t i)
{
    size_t mask = d->seen.cap - 1;
    for (size_t j = (i + 1) & mask; d->seen.slots[j] != 0; j = (j + 1) & mask) {
        size_t home = dedupe_home(d, d->ring[d->seen.slots[j] - 1].key);
        /* j's entry may move to i when its home is not in (i, j] cyclically */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            d->seen.slots[i] = d->seen.slots[j];
            i = j;
        }
    }
    d->seen.slots[i] = 0;
    d->seen.len--;
}

/* Moves the live records to a ring of cap records (>= len) and rebuilds the index over it. */
static daemon_status_t dedupe_resize(dedupe_t *d, size_t cap)
{
    size_t icap = 1;
    while (icap < 2 * cap)
        icap *= 2;
    dedupe_rec_t *ring = malloc(cap * sizeof(*ring));
    uint32_t *slots = calloc(icap, sizeof(*slots));
    if (ring == NULL || slots == NULL) {
        free(ring);
        free(slots);
        return DAEMON_ENOMEM;
    }
    for (size_t i = 0; i < d->len; i++)
        ring[i] = d->ring[(d->head + i) % d->cap];
    free(d->ring);
    free(d->seen.slots);
    d->ring = ring;
    d->cap = cap;
    d->head = 0;
    d->seen.slots = slots;
    d->seen.cap = icap;
    d->seen.len = 0;
    for (size_t i = 0; i < d->len; i++) /* oldest first, so the newest acceptance wins */
        dedupe_index_put(d, ring[i].key, i);
    return DAEMON_OK;
}

/* Drops the oldest record; its key leaves the index if this record owns it. */
static void dedupe_pop(dedupe_t *d)
{
    const dedupe_rec_t *r = &d->ring[d->head];
    size_t i = dedupe_find(d, r->key);
    if (i != SIZE_MAX && d->seen.slots[i] == d->head + 1)
        dedupe_index_del(d, i);
    d->head = (d->head + 1) % d->cap;
    d->len--;
}

static void dedupe_expire(dedupe_t *d, uint64_t now_ns)
{
    while (d->len > 0 && d->ring[d->head].expires_ns <= now_ns)
        dedupe_pop(d);
    /* After a peak the ring gives memory back (best effort: a failed resize keeps the old). */
    if (d->cap > DEDUPE_RING_MIN && d->len * 4 < d->cap)
        (void)dedupe_resize(d, d->len * 2 > DEDUPE_RING_MIN ? d->len * 2 : DEDUPE_RING_MIN);
}

int dedupe_contains(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns)
{
    dedupe_expire(d, now_ns);
    return dedupe_find(d, dedupe_key(id, len)) != SIZE_MAX;
}

daemon_status_t dedupe_add(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns)
{
    if (d->window_ns == 0)
        return DAEMON_OK;
    dedupe_expire(d, now_ns);
    if (d->max_ids != 0) {
        for (; d->len >= d->max_ids && d->len > 0; d->evictions++) /* invariant 4 */
            dedupe_pop(d);
    }
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : DEDUPE_RING_MIN;
        if (d->max_ids != 0 && cap > d->max_ids)
            cap = d->max_ids > d->len ? d->max_ids : d->len + 1;
        if (cap >= UINT32_MAX || dedupe_resize(d, cap) != DAEMON_OK)
            return DAEMON_ENOMEM;
    }
    map_key_t k = dedupe_key(id, len);
    uint64_t expires = now_ns + d->window_ns;
    if (expires < now_ns)
        expires = UINT64_MAX;
    size_t pos = (d->head + d->len++) % d->cap;
    d->ring[pos] = (dedupe_rec_t){k, expires};
    dedupe_index_put(d, k, pos);
    return DAEMON_OK;
}
