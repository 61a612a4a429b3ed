/*
 * map.c - open addressing with linear probing and backward-shift deletion.
 *
 * Invariants:
 *   1. cap is 0 or a power of two, and len <= cap * 3 / 4 after every put, so probes end.
 *   2. No tombstones: deletion shifts the following run back, so lookups never scan dead slots
 *      and a map that churns (the pending map: insert on commit, delete on ack) never degrades.
 *   3. Every key appears at most once.
 *   4. A key's home slot depends on the process's secret seed (hashseed.h): keys come from
 *      clients (a shape's signature), and an unseeded, invertible hash let one compute thousands
 *      of signatures with one home slot, every lookup then a scan. The seed goes in before a
 *      multiply of the two halves folded to 64 bits: without it a client cannot aim a key. A
 *      map takes the seed with its first slots, so a zeroed map_t is seeded too.
 *
 * Rejected: chaining (one allocation per entry on the commit path); tombstone deletion (the
 * pending map deletes as often as it inserts, so tombstones would pile up until a rehash).
 */
#include "common/map.h"

#include "common/hashseed.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>

STATUS_STR(map_status_str, map_status_t, MAP_STATUS_MAP, "unknown map status")

uint64_t map_hash_seeded(map_key_t key, uint64_t seed_a, uint64_t seed_b)
{
    unsigned __int128 m = (unsigned __int128)(key.a ^ seed_a ^ 0x9E3779B97F4A7C15ULL) *
                          (key.b ^ seed_b ^ 0x632BE59BD9B4E019ULL); /* invariant 4 */
    uint64_t h = (uint64_t)m ^ (uint64_t)(m >> 64);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 29;
    return h;
}

static uint64_t map_hash(const map_t *map, map_key_t key)
{
    return map_hash_seeded(key, map->seed_a, map->seed_b);
}

static int map_key_eq(map_key_t x, map_key_t y)
{
    return x.a == y.a && x.b == y.b;
}

void map_init(map_t *map)
{
    memset(map, 0, sizeof(*map));
}

void map_fini(map_t *map)
{
    free(map->slots);
    map_init(map);
}

static size_t map_find(const map_t *map, map_key_t key)
{
    size_t mask = map->cap - 1;
    size_t i = (size_t)map_hash(map, key) & mask;
    while (map->slots[i].value != NULL && !map_key_eq(map->slots[i].key, key))
        i = (i + 1) & mask;
    return i;
}

void *map_get(const map_t *map, map_key_t key)
{
    if (map->cap == 0)
        return NULL;
    return map->slots[map_find(map, key)].value;
}

void map_prefetch(const map_t *map, map_key_t key)
{
    if (map->cap != 0)
        __builtin_prefetch(&map->slots[(size_t)map_hash(map, key) & (map->cap - 1)]);
}

static map_status_t map_resize(map_t *map, size_t cap)
{
    map_slot_t *old = map->slots;
    size_t old_cap = map->cap;
    map_slot_t *slots = mem_calloc(cap, sizeof(*slots)); /* probed as it is filled */
    if (slots == NULL)
        return MAP_ENOMEM;
    map->slots = slots;
    map->cap = cap;
    if (old_cap == 0) { /* invariant 4: no key was placed yet */
        hashseed_t s = hashseed_get();
        map->seed_a = s.a;
        map->seed_b = s.b;
    }
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].value != NULL)
            map->slots[map_find(map, old[i].key)] = old[i];
    }
    free(old);
    return MAP_OK;
}

map_status_t map_reserve(map_t *map, size_t extra)
{
    if (extra > SIZE_MAX / 4 - map->len)
        return MAP_ENOMEM;
    size_t need = map->len + extra;
    size_t cap = map->cap ? map->cap : 16;
    while (need > cap / 4 * 3)
        cap *= 2;
    if (cap == map->cap)
        return MAP_OK;
    return map_resize(map, cap);
}

map_status_t map_put(map_t *map, map_key_t key, void *value)
{
    if (map_get(map, key) != NULL)
        return MAP_EEXIST;
    map_status_t st = map_reserve(map, 1);
    if (st != MAP_OK)
        return st;
    size_t i = map_find(map, key);
    map->slots[i].key = key;
    map->slots[i].value = value;
    map->len++;
    return MAP_OK;
}

map_status_t map_del(map_t *map, map_key_t key, void **out_value)
{
    if (map->cap == 0)
        return MAP_ENOTFOUND;
    size_t mask = map->cap - 1;
    size_t i = map_find(map, key);
    if (map->slots[i].value == NULL)
        return MAP_ENOTFOUND;
    if (out_value != NULL)
        *out_value = map->slots[i].value;
    /* Backward shift: move each later entry of the run into the hole if its home allows. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; map->slots[j].value != NULL; j = (j + 1) & mask) {
        size_t home = (size_t)map_hash(map, map->slots[j].key) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            map->slots[hole] = map->slots[j];
            hole = j;
        }
    }
    map->slots[hole].value = NULL;
    map->len--;
    return MAP_OK;
}
