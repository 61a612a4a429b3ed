/*
 * workload.c - the benchmark's items: one model, one shape, --lanes lanes, a 16-byte id, a
 * payload sliced from a seeded random pool and a token count, item i a pure function of
 * (SEED, i) so a run can be regenerated; and the entry size, asked of the store.
 *
 * Invariants:
 *   1. The same (seed, i, payload size, lanes) gives the same item on every host (splitmix64,
 *      common/rng.h), so the store and the baseline write the same bytes.
 *   2. The entry size comes from the store (store_unflushed_bytes after one append), never from
 *      a copy of the segment format that could drift from it.
 *
 * Rejected: generating items inside the timed loops. The generator's cost would count against
 * the store and the baseline alike and blur the ratio.
 */
#include "tools/storebench/storebench.h"

#include "common/clock.h"
#include "common/rng.h"

#include <stdlib.h>
#include <string.h>

void gen_init(gen_t *g, size_t payload_len, unsigned lanes)
{
    g->payload_len = payload_len;
    g->lanes = lanes;
    g->pool_len = payload_len * 2 > 65536 ? payload_len * 2 : 65536;
    g->pool = sb_malloc(g->pool_len);
    uint64_t st = SEED;
    for (size_t i = 0; i < g->pool_len; i++)
        g->pool[i] = (uint8_t)rng_splitmix64(&st);
    g->arrival0 = clock_wall_ns();
}

void gen_fini(gen_t *g)
{
    free(g->pool);
}

void gen_item(const gen_t *g, uint64_t i, store_item_t *it, uint8_t *id, uint32_t *lane)
{
    uint64_t st = SEED ^ (i * 0xd1b54a32d192ed03ull);
    uint64_t a = rng_splitmix64(&st), b = rng_splitmix64(&st), c = rng_splitmix64(&st);
    memcpy(id, &a, 8);
    memcpy(id + 8, &b, 8);
    *lane = (uint32_t)(c % g->lanes);
    *it = (store_item_t){
        .id = id,
        .id_len = ID_LEN,
        .payload = g->pool + (size_t)((c >> 16) % (g->pool_len - g->payload_len + 1)),
        .payload_len = g->payload_len,
        .tokens = 1 + (uint32_t)((c >> 40) % MAX_TOKENS),
        .arrival_ns = g->arrival0 + i * 1000,
    };
}

void workload_init(workload_t *w, const gen_t *g, size_t n)
{
    w->n = n;
    w->items = sb_malloc(n * sizeof(*w->items));
    w->lane = sb_malloc(n * sizeof(*w->lane));
    w->ids = sb_malloc(n * ID_LEN);
    for (size_t i = 0; i < n; i++)
        gen_item(g, i, &w->items[i], w->ids + i * ID_LEN, &w->lane[i]);
}

void workload_fini(workload_t *w)
{
    free(w->items);
    free(w->lane);
    free(w->ids);
}

uint64_t gen_entry_size(const char *run_dir, const gen_t *g)
{
    char dir[4096];
    sb_pathf(dir, sizeof(dir), "%s/probe", run_dir);
    store_t *s = sb_store_open(dir, STORE_DURABLE_PROCESS, NULL);
    store_queue_t *q;
    sb_queues_open(s, 1, &q);
    store_item_t it;
    uint8_t id[ID_LEN];
    uint32_t lane;
    gen_item(g, 0, &it, id, &lane);
    sb_check(store_append(s, q, &it, NULL), "store_append (probe)");
    uint64_t size = store_unflushed_bytes(s);
    store_close(s);
    files_remove(dir);
    if (size < ID_LEN + g->payload_len)
        sb_die("probe", "store_unflushed_bytes after one append is smaller than the item");
    return size;
}
