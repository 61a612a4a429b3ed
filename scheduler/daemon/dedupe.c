/*
 * dedupe.c - the window of recently accepted item ids, so that a producer retrying a submit
 * after a timeout (with the same ids) gets "duplicate" and the item is stored once.
 *
 * Invariants:
 *   1. An id is found iff it was accepted less than window_ns ago (entries expire in arrival
 *      order from a ring, so expiry costs O(1) per entry).
 *   2. Ids are keyed by two independent 64-bit XXH64 hashes (seeds 0 and 1): a false
 *      "duplicate" would lose an item, so the key must be collision-free in practice; 128 bits
 *      make it ~2^-64 per pair even at millions of ids in a window.
 *   3. Rebuilt at start from the items the store still holds (the owner adds them), so a retry
 *      after a restart is still recognised while its first copy is queued.
 *
 * Rejected: keeping the ids themselves (up to 64 bytes each) or a Bloom filter (false
 * positives would drop items).
 */
#include "scheduler/daemon/dedupe.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

void dedupe_init(dedupe_t *d, uint64_t window_ns)
{
    memset(d, 0, sizeof(*d));
    map_init(&d->seen);
    d->window_ns = window_ns;
}

void dedupe_fini(dedupe_t *d)
{
    map_fini(&d->seen);
    free(d->ring);
}

static map_key_t dedupe_key(const uint8_t *id, size_t len)
{
    return (map_key_t){XXH64(id, len, 0), XXH64(id, len, 1)};
}

static void dedupe_expire(dedupe_t *d, uint64_t now_ns)
{
    while (d->len > 0) {
        struct dedupe_entry *e = &d->ring[d->head];
        if (e->expires_ns > now_ns)
            break;
        void *v = map_get(&d->seen, e->key);
        /* only the newest acceptance of an id owns the map entry */
        if (v != NULL && (uint64_t)(uintptr_t)v == e->expires_ns)
            map_del(&d->seen, e->key, NULL);
        d->head = (d->head + 1) % d->cap;
        d->len--;
    }
}

int dedupe_contains(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns)
{
    dedupe_expire(d, now_ns);
    return map_get(&d->seen, dedupe_key(id, len)) != NULL;
}

daemon_status_t dedupe_add(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns)
{
    if (d->window_ns == 0)
        return DAEMON_OK;
    dedupe_expire(d, now_ns);
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        struct dedupe_entry *ring = malloc(cap * sizeof(*ring));
        if (ring == NULL)
            return DAEMON_ENOMEM;
        for (size_t i = 0; i < d->len; i++)
            ring[i] = d->ring[(d->head + i) % d->cap];
        free(d->ring);
        d->ring = ring;
        d->cap = cap;
        d->head = 0;
    }
    map_key_t k = dedupe_key(id, len);
    uint64_t expires = now_ns + d->window_ns;
    if (expires == 0)
        expires = 1;
    map_del(&d->seen, k, NULL);
    if (map_put(&d->seen, k, (void *)(uintptr_t)expires) != MAP_OK)
        return DAEMON_ENOMEM;
    d->ring[(d->head + d->len++) % d->cap] = (struct dedupe_entry){k, expires};
    return DAEMON_OK;
}
