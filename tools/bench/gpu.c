/*
 * gpu.c - a simulated GPU worker for lanesched-bench: the four-integer contract, a service time
 * that grows with padded tokens, and a prefix-cache model.
 *
 * Owns: the worker's LRU of shapes and its counters. It does not pick or pack batches; the
 * policy under test does, and hands the worker what it packed.
 *
 * Model:
 *   service time = batch_fixed_ns + ns_per_padded_token * (n_items * pad_to + prefix)
 *   prefix       = on a miss, the batch's shape's prefix_tokens (computed once, the batch's
 *                  items share it); on a hit 0, and the prefix counts as saved. A batch of
 *                  several shapes (FIFO) is never a hit and pays the prefix of each of them.
 *   item cost    = what one item costs in a full batch of its own length (gpu_item_ns): the
 *                  workloads write their offered load with it, so a load of 100% means the
 *                  workers are saturated even at full batches and zero padding.
 *   cache        = the last cache_shapes distinct shapes this worker served, most recent first.
 *                  A batch is a hit when its shape is in the cache before it is served; then
 *                  its shape becomes the most recent, evicting the least recent if full.
 *
 * Invariants:
 *   1. hits + misses = batches; padded_tokens >= real_tokens, both summed over every batch.
 *   2. The cache holds at most cache_shapes distinct shapes (0: no cache, every batch misses).
 *   3. The service time depends on the batch, the config and, through its prefix, on the cache
 *      only: a trace without prefix lengths (every prefix_tokens 0) costs exactly the batch's
 *      fixed and per-token parts, whatever the cache holds, and prefix_tokens +
 *      prefix_saved_tokens sums each batch's prefix once.
 *
 * Rejected:
 *   - A fixed price per miss: what a miss costs is recomputing the shape's prefix, which grows
 *     with its length (WorkItem.prefix_tokens carries it); a constant would price a 200-token
 *     system prompt like a 4,000-token document.
 *   - Charging each item of a missed batch its prefix: the items of one shape share it, and an
 *     engine computes a shared prefix once per batch.
 *   - Hit = "same shape as the previous batch" (an LRU of 1): engines keep more than one prefix;
 *     a small C is closer, and C=1 is one flag away (--cache-shapes 1).
 */
#include "bench.h"

#include "scheduler/core/sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GPU_CACHE_MAX 1024u

struct gpu {
    gpu_config_t cfg;
    gpu_stats_t stats;
    uint32_t n_cached;
    uint64_t cache[]; /* most recent first; cfg.cache_shapes entries */
};

void gpu_config_default(gpu_config_t *cfg)
{
    /* ~100k padded tokens/s of prefill per worker plus 5 ms per batch: the order of a 7B
     * model on one modern GPU. Only ratios between policies matter; these set the time scale
     * the presets' rates are written against. */
    *cfg = (gpu_config_t){
        .max_batch_size = 32,
        .max_batch_tokens = 16384,
        .max_input_tokens = 32768,
        .batch_fixed_ns = 5000000,
        .ns_per_padded_token = 10000.0,
        .cache_shapes = 2,
    };
}

int gpu_create(const gpu_config_t *cfg, gpu_t **out)
{
    if (cfg == NULL || out == NULL || cfg->max_batch_size == 0 || cfg->max_batch_tokens == 0 ||
        cfg->cache_shapes > GPU_CACHE_MAX || !(cfg->ns_per_padded_token >= 0.0))
        return -1;
    gpu_t *g = calloc(1, sizeof(*g) + (size_t)cfg->cache_shapes * sizeof(g->cache[0]));
    if (g == NULL)
        return -1;
    g->cfg = *cfg;
    *out = g;
    return 0;
}

void gpu_destroy(gpu_t *gpu)
{
    free(gpu);
}

/* Index of the shape in the cache, or -1. */
static long gpu_cache_find(const gpu_t *g, uint64_t signature)
{
    for (uint32_t i = 0; i < g->n_cached; i++) {
        if (g->cache[i] == signature)
            return (long)i;
    }
    return -1;
}

/* Makes the shape the most recent (invariant 2). */
static void gpu_cache_touch(gpu_t *g, uint64_t signature)
{
    if (g->cfg.cache_shapes == 0)
        return;
    long at = gpu_cache_find(g, signature);
    uint32_t from;
    if (at >= 0)
        from = (uint32_t)at;
    else if (g->n_cached < g->cfg.cache_shapes)
        from = g->n_cached++;
    else
        from = g->n_cached - 1; /* evict the least recent */
    memmove(&g->cache[1], &g->cache[0], from * sizeof(g->cache[0]));
    g->cache[0] = signature;
}

/* prefix: the prefix tokens the batch computes (0 on a hit); saved: those the cache spared. */
static uint64_t gpu_account(gpu_t *g, int hit, uint32_t n_items, uint32_t pad_to,
                            uint64_t real_tokens, uint64_t prefix, uint64_t saved)
{
    uint64_t padded = (uint64_t)n_items * pad_to;
    uint64_t ns =
        g->cfg.batch_fixed_ns + (uint64_t)llround(g->cfg.ns_per_padded_token * (padded + prefix));
    g->stats.prefix_tokens += prefix;
    g->stats.prefix_saved_tokens += saved;
    g->stats.batches++;
    g->stats.items += n_items;
    g->stats.padded_tokens += padded;
    g->stats.real_tokens += real_tokens;
    if (hit)
        g->stats.hits++;
    else
        g->stats.misses++;
    g->stats.busy_ns += ns;
    return ns;
}

uint64_t gpu_serve(gpu_t *gpu, uint64_t signature, uint32_t n_items, uint32_t pad_to,
                   uint64_t real_tokens, uint32_t prefix_tokens)
{
    int hit = gpu_cache_find(gpu, signature) >= 0;
    gpu_cache_touch(gpu, signature);
    return gpu_account(gpu, hit, n_items, pad_to, real_tokens, hit ? 0 : prefix_tokens,
                       hit ? prefix_tokens : 0);
}

uint64_t gpu_serve_mixed(gpu_t *gpu, const uint64_t *signatures, const uint32_t *prefixes,
                         uint32_t n_items, uint32_t pad_to, uint64_t real_tokens)
{
    int pure = 1;
    for (uint32_t i = 0; i < n_items; i++)
        pure &= signatures[i] == signatures[0];
    int hit = n_items > 0 && pure && gpu_cache_find(gpu, signatures[0]) >= 0;
    /* A batch pays each shape's prefix once: the longest of the items of that shape. */
    uint64_t prefix = 0;
    for (uint32_t i = 0; prefixes != NULL && i < n_items; i++) {
        uint32_t first = 0, p = 0;
        while (signatures[first] != signatures[i])
            first++;
        if (first != i)
            continue; /* counted at its shape's first item */
        for (uint32_t j = i; j < n_items; j++)
            if (signatures[j] == signatures[i] && prefixes[j] > p)
                p = prefixes[j];
        prefix += p;
    }
    /* Shapes are touched as they appear, so the cache ends as if the items had been served one
     * by one: the shape of the batch's last item is the most recent. */
    for (uint32_t i = 0; i < n_items; i++) {
        if (i == 0 || signatures[i] != signatures[i - 1])
            gpu_cache_touch(gpu, signatures[i]);
    }
    return gpu_account(gpu, hit, n_items, pad_to, real_tokens, hit ? 0 : prefix, hit ? prefix : 0);
}

double gpu_item_ns(const gpu_config_t *cfg, uint32_t tokens)
{
    uint64_t pad = packer_pad(tokens);
    uint64_t fit = cfg->max_batch_tokens / pad;
    if (fit > cfg->max_batch_size)
        fit = cfg->max_batch_size;
    if (fit == 0)
        fit = 1;
    return cfg->ns_per_padded_token * (double)pad + (double)cfg->batch_fixed_ns / (double)fit;
}

const gpu_stats_t *gpu_stats(const gpu_t *gpu)
{
    return &gpu->stats;
}
