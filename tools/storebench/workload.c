/*
 * workload.c - the benchmark's items: --models models of --shapes shapes of --lanes lanes each
 * (one model, one shape, 4 lanes unless asked), a 16-byte id, a payload sliced from a seeded
 * random pool and a token count, item i a pure function of (SEED, i) so a run can be
 * regenerated; and the entry size, asked of the store.
 *
 * Invariants:
 *   1. The same (seed, i, payload size, models, shapes, lanes) gives the same item on every host
 *      (splitmix64, common/rng.h), so the store and the baseline write the same bytes.
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

void gen_init(gen_t *g, size_t payload_len, unsigned models, unsigned shapes, unsigned lanes)
{
    g->payload_len = payload_len;
    g->models = models;
    g->shapes = shapes;
    g->lanes = lanes;
    g->queues = (uint64_t)models * shapes * lanes;
    g->shape_cdf = sb_malloc(shapes * sizeof(*g->shape_cdf));
    double sum = 0;
    for (unsigned k = 0; k < shapes; k++) {
        sum += 1.0 / (double)(k + 1);
        g->shape_cdf[k] = sum;
    }
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
    free(g->shape_cdf);
}

/* The first shape whose running weight passes u (in [0, 1)) of the total. */
static unsigned gen_shape(const gen_t *g, double u)
{
    double want = u * g->shape_cdf[g->shapes - 1];
    unsigned lo = 0, hi = g->shapes - 1;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (g->shape_cdf[mid] > want)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void gen_item(const gen_t *g, uint64_t i, store_item_t *it, uint8_t *id, uint32_t *queue)
{
    uint64_t st = SEED ^ (i * 0xd1b54a32d192ed03ull);
    uint64_t a = rng_splitmix64(&st), b = rng_splitmix64(&st), c = rng_splitmix64(&st);
    memcpy(id, &a, 8);
    memcpy(id + 8, &b, 8);
    if (g->models == 1 && g->shapes == 1) {
        *queue = (uint32_t)(c % g->lanes);
    } else {
        uint64_t d = rng_splitmix64(&st);
        unsigned model = (unsigned)(d % g->models);
        unsigned shape = gen_shape(g, (double)(d >> 11) * 0x1.0p-53);
        unsigned lane = (unsigned)(c % g->lanes);
        *queue = (uint32_t)(((uint64_t)model * g->shapes + shape) * g->lanes + lane);
    }
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
    w->queue = sb_malloc(n * sizeof(*w->queue));
    w->ids = sb_malloc(n * ID_LEN);
    for (size_t i = 0; i < n; i++)
        gen_item(g, i, &w->items[i], w->ids + i * ID_LEN, &w->queue[i]);
}

void workload_fini(workload_t *w)
{
    free(w->items);
    free(w->queue);
    free(w->ids);
}

uint64_t gen_entry_size(const char *run_dir, const gen_t *g)
{
    char dir[4096];
    sb_pathf(dir, sizeof(dir), "%s/probe", run_dir);
    store_t *s = sb_store_open(dir, STORE_DURABLE_PROCESS, NULL);
    store_queue_t *q;
    sb_queues_open(s, 1, 1, 1, &q);
    store_item_t it;
    uint8_t id[ID_LEN];
    uint32_t queue;
    gen_item(g, 0, &it, id, &queue);
    sb_check(store_append(s, q, &it, NULL), "store_append (probe)");
    uint64_t size = store_unflushed_bytes(s);
    store_close(s);
    files_remove(dir);
    if (size < ID_LEN + g->payload_len)
        sb_die("probe", "store_unflushed_bytes after one append is smaller than the item");
    return size;
}
