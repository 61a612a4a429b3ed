/*
 * map.h - an open-addressing hash map from a 128-bit key to a non-NULL pointer.
 *
 * Shared by the store (pending map, queue tables) and the scheduler (shape table), which both
 * key by pairs of 64-bit values and need O(1) lookups on the hot path without a dependency.
 *
 * Ownership: the map owns its slot array only. Values are borrowed pointers the map never
 * dereferences or frees. The map struct itself is caller memory (embed it), initialised with
 * map_init and released with map_fini.
 */
#ifndef LANESCHED_MAP_H
#define LANESCHED_MAP_H

#include "common/status.h"
#include <stddef.h>
#include <stdint.h>

#define MAP_STATUS_MAP(X)             \
    X(MAP_OK, "ok")                   \
    X(MAP_ENOMEM, "out of memory")    \
    X(MAP_ENOTFOUND, "key not found") \
    X(MAP_EEXIST, "key already present")

STATUS_ENUM(map_status_t, MAP_STATUS_MAP, MAP_STATUS_COUNT);

const char *map_status_str(map_status_t status);

typedef struct {
    uint64_t a;
    uint64_t b;
} map_key_t;

typedef struct {
    map_key_t key;
    void *value; /* NULL marks an empty slot */
} map_slot_t;

typedef struct {
    map_slot_t *slots;
    size_t cap; /* a power of two, or 0 before the first insert */
    size_t len;
    uint64_t seed_a, seed_b; /* the process's hash seed (hashseed.h), taken with the first slots */
} map_t;

void map_init(map_t *map);

/* The hash whose low bits are a key's home slot, under a map's seed (seed_a, seed_b). */
uint64_t map_hash_seeded(map_key_t key, uint64_t seed_a, uint64_t seed_b);
void map_fini(map_t *map);

/* Returns the value stored under key, or NULL. */
void *map_get(const map_t *map, map_key_t key);
/* Asks the cache for key's home slot ahead of a map_get, map_put or map_del of it. A hint: a
 * resize in between costs only the hint. */
void map_prefetch(const map_t *map, map_key_t key);

/* Makes room for `extra` more entries so the next `extra` puts cannot fail. */
map_status_t map_reserve(map_t *map, size_t extra);

/* Inserts key -> value (value non-NULL). MAP_EEXIST leaves the map unchanged. */
map_status_t map_put(map_t *map, map_key_t key, void *value);

/* Removes key; *out_value (may be NULL) receives the value it had. */
map_status_t map_del(map_t *map, map_key_t key, void **out_value /* out */);

#endif
