/*
 * workload.c - lanesched-bench's workloads: a seeded generator and its named presets. Trace
 * files, the workload written down, are workload_trace.c's.
 *
 * Owns: the PRNG, the per-shape length mixtures and the arrival process.
 *
 * The generated workload:
 *   - `models` models, each with `shapes_per_model` shapes, plus one new shape per replaced
 *     shape under churn (see 4). Items pick a model with a weight inverse to that model's mean
 *     length, so every model offers the same token rate (invariant 5).
 *   - Shape popularity within a model is Zipf-like: the shape of rank k (1-based) has weight
 *     k^-zipf_s. Ranks are a seeded permutation of the shape indices, so index 0 is not always
 *     the most popular one.
 *   - Each shape has its own length distribution, a mixture of log-normals drawn from the seed:
 *     short (one component, median 40-400 tokens), medium (median 300-1,200 plus a 30% tail at
 *     2-4x), or long-tailed (medians 200-800 and 1,000-3,000 plus a 15-40% component at
 *     15-40% of max_tokens, wide). long_share of the shapes are long-tailed, the rest split
 *     evenly between short and medium. Lengths are clamped to [1, max_tokens].
 *   - With prefix_max > 0 each shape has a prefix of prefix_min..prefix_max tokens (log-uniform,
 *     from a stream of its own, so the items are the same with and without prefixes); every
 *     item of the shape carries it.
 *   - Arrivals are Poisson at `rate` items/s (all models). With burst_factor > 1, random windows
 *     (2-6 s long, gaps of mean 10 s) run at rate * burst_factor. Thinning keeps it one stream.
 *
 * Presets are written as offered load, not items/s: the time sim's default workers (2 per
 * model) need for the items, each costed in a full batch of its own length with the batch's
 * fixed cost shared (gpu_item_ns). The rate is derived from the seed's length mixtures
 * (wl_rate_for_load), so every seed offers the same load. steady: Poisson at 70%, 2 shapes per
 * model. bursty: x4 inside bursts, 70% on average. churn: 70%, 12 shapes per model, half of them
 * replaced mid-trace, 90 s. sustained (the article's case): 110% for 300 s, 4 shapes per model,
 * every shape long-tailed with lengths to 32,768, so a backlog stands, lanes never go idle and
 * every shape walks toward its budget.
 *
 * Invariants:
 *   1. The same config (seed included) always gives the same trace with the same libm (exp,
 *      log, cos, pow): nothing depends on time, addresses or iteration order of a hash.
 *   2. Items are in nondecreasing arrival order; tokens are in [1, max_tokens]; a shape index
 *      always carries the same signature and model (wl_trace_read checks all three).
 *   3. Each shape's parameters come from its own PRNG stream (seed, shape index), so changing
 *      the rate or the duration changes when items arrive, not what each shape looks like.
 *   4. Churn: round(churn * shapes_per_model) shapes of each model go quiet at a random time in
 *      the middle 70% of the trace, each replaced at that moment by a new shape with the same
 *      popularity, so the offered load stays level while the shape population turns over.
 *   5. Each model's mean length is estimated from WL_MEAN_DRAWS draws of its shapes (Zipf
 *      weights, lifetimes ignored) on a stream of its own; model weights are the inverses,
 *      normalised. So every model offers the same token rate, as an operator would provision
 *      by tokens. Offered load (wl_load) also counts each batch's fixed cost, heavier per
 *      token for short items, so per-model loads differ by a few points (sim prints them in
 *      its header; docs/bench.md); and with churn, whose estimate ignores lifetimes, the
 *      realised load lands a few points under the preset's.
 *
 * Rejected:
 *   - Models chosen uniformly: per-shape length mixtures then make one model's token load
 *     twice another's, and every preset turns into an overload test of the heavier model.
 *   - One length distribution for every shape (microbench does that): lanes per shape then all
 *     look alike, and the point of per-shape lanes is that shapes differ.
 *   - Pure Zipf over lengths or uniform lengths: prompt lengths are skewed and multi-modal
 *     (chat turns, documents, long context); a log-normal mixture is the usual fit.
 *   - Load as real tokens over padded-token throughput: it left out
 *     the per-batch fixed cost, which dominates short shapes, so "85%" was past capacity and
 *     steady's queue grew for the whole run.
 */
#include "bench.h"

#include "common/rng.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WL_PI              3.14159265358979323846
#define WL_MIX_MAX         3u
#define WL_BURST_GAP_S     10.0 /* mean gap between bursts */
#define WL_BURST_MIN_S     2.0
#define WL_BURST_MAX_S     6.0
#define WL_LONG_SHARE_DFLT 0.25
#define WL_MEAN_DRAWS      20000u /* per model, for the model weights (invariant 5) */

/* ------------------------------------------------------------------------------------------ */
/* PRNG: common/rng.h.                                                                         */

static double wl_rng_range(rng_t *r, double lo, double hi)
{
    return lo + (hi - lo) * rng_uniform(r);
}

/* Exponential with the given rate (> 0). */
static double wl_rng_exp(rng_t *r, double rate)
{
    return -log(1.0 - rng_uniform(r)) / rate;
}

/* ------------------------------------------------------------------------------------------ */
/* Shapes.                                                                                     */

typedef struct {
    uint32_t n;
    double weight[WL_MIX_MAX], mu[WL_MIX_MAX], sigma[WL_MIX_MAX];
} wl_mix_t;

typedef struct {
    uint64_t signature;
    uint32_t model;
    double weight;         /* Zipf weight */
    double start_s, end_s; /* active in [start_s, end_s) */
    wl_mix_t mix;
    uint32_t prefix_tokens; /* 0 without prefixes */
} wl_shape_t;

static void wl_mix_add(wl_mix_t *m, double weight, double median, double sigma)
{
    m->weight[m->n] = weight;
    m->mu[m->n] = log(median);
    m->sigma[m->n] = sigma;
    m->n++;
}

/* A shape's length mixture, from its own stream (invariant 3). */
static void wl_mix_draw(rng_t *r, double long_share, uint32_t max_tokens, wl_mix_t *out)
{
    *out = (wl_mix_t){0};
    double kind = rng_uniform(r);
    double short_cut = (1.0 - long_share) / 2.0;
    if (kind < short_cut) { /* short: chat turns, classification */
        wl_mix_add(out, 1.0, wl_rng_range(r, 40, 400), wl_rng_range(r, 0.3, 0.6));
    } else if (kind < 1.0 - long_share) { /* medium: documents, RAG */
        double med = wl_rng_range(r, 300, 1200);
        wl_mix_add(out, 0.7, med, wl_rng_range(r, 0.3, 0.6));
        wl_mix_add(out, 0.3, med * wl_rng_range(r, 2.0, 4.0), 0.4);
    } else { /* long-tailed: widely spread, up to max_tokens */
        double tail = wl_rng_range(r, 0.15, 0.40);
        wl_mix_add(out, 0.55 - tail / 2, wl_rng_range(r, 200, 800), 0.5);
        wl_mix_add(out, 0.45 - tail / 2, wl_rng_range(r, 1000, 3000), 0.5);
        wl_mix_add(out, tail, wl_rng_range(r, 0.15, 0.40) * max_tokens, wl_rng_range(r, 0.5, 0.8));
    }
}

static uint32_t wl_mix_sample(rng_t *r, const wl_mix_t *m, uint32_t max_tokens)
{
    double u = rng_uniform(r), acc = 0.0;
    uint32_t k = 0;
    for (k = 0; k + 1 < m->n; k++) {
        acc += m->weight[k];
        if (u < acc)
            break;
    }
    double len = exp(m->mu[k] + m->sigma[k] * rng_normal(r));
    if (!(len >= 1.0))
        return 1;
    if (len > (double)max_tokens)
        return max_tokens;
    return (uint32_t)llround(len);
}

/* ------------------------------------------------------------------------------------------ */
/* Presets.                                                                                    */

const char *wl_model_name(uint32_t model)
{
    static const char *const names[WL_MODELS_MAX] = {
        "model-0",  "model-1",  "model-2",  "model-3",  "model-4",  "model-5",  "model-6",
        "model-7",  "model-8",  "model-9",  "model-10", "model-11", "model-12", "model-13",
        "model-14", "model-15", "model-16", "model-17", "model-18", "model-19", "model-20",
        "model-21", "model-22", "model-23", "model-24", "model-25", "model-26", "model-27",
        "model-28", "model-29", "model-30", "model-31", "model-32", "model-33", "model-34",
        "model-35", "model-36", "model-37", "model-38", "model-39", "model-40", "model-41",
        "model-42", "model-43", "model-44", "model-45", "model-46", "model-47", "model-48",
        "model-49", "model-50", "model-51", "model-52", "model-53", "model-54", "model-55",
        "model-56", "model-57", "model-58", "model-59", "model-60", "model-61", "model-62",
        "model-63",
    };
    return model < WL_MODELS_MAX ? names[model] : "model-invalid";
}

static int wl_config_valid(const wl_config_t *c)
{
    return c->models >= 1 && c->models <= WL_MODELS_MAX && c->shapes_per_model >= 1 &&
           c->shapes_per_model <= WL_SHAPES_MAX / 2 && c->zipf_s >= 0.0 && c->zipf_s <= 10.0 &&
           c->duration_s > 0.0 && c->duration_s <= 1e6 && c->rate > 0.0 &&
           c->rate * c->duration_s * (c->burst_factor > 1 ? c->burst_factor : 1) <= 2e9 &&
           c->burst_factor >= 1.0 && c->burst_factor <= 1000.0 && c->churn >= 0.0 &&
           c->churn <= 1.0 && c->max_tokens >= 1 && c->long_share >= 0.0 && c->long_share <= 1.0 &&
           c->prefix_min <= c->prefix_max;
}

/* ------------------------------------------------------------------------------------------ */
/* Generation.                                                                                 */

typedef struct {
    double start, end;
} wl_window_t;

/* Burst windows over the trace, from their own stream. */
static int wl_bursts(const wl_config_t *c, wl_window_t **out, size_t *out_n)
{
    *out = NULL;
    *out_n = 0;
    if (c->burst_factor <= 1.0)
        return 0;
    rng_t r;
    rng_seed(&r, c->seed ^ 0xb0b57ull);
    size_t n = 0, cap = 0;
    wl_window_t *w = NULL;
    for (double t = wl_rng_exp(&r, 1.0 / WL_BURST_GAP_S); t < c->duration_s;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            wl_window_t *g = realloc(w, cap * sizeof(*g));
            if (g == NULL) {
                free(w);
                return -1;
            }
            w = g;
        }
        double len = wl_rng_range(&r, WL_BURST_MIN_S, WL_BURST_MAX_S);
        w[n++] = (wl_window_t){t, t + len};
        t += len + wl_rng_exp(&r, 1.0 / WL_BURST_GAP_S);
    }
    *out = w;
    *out_n = n;
    return 0;
}

static double wl_rate_at(const wl_config_t *c, const wl_window_t *w, size_t n, size_t *cursor,
                         double t)
{
    while (*cursor < n && w[*cursor].end <= t)
        (*cursor)++;
    if (*cursor < n && w[*cursor].start <= t)
        return c->rate * c->burst_factor;
    return c->rate;
}

/* Builds the shapes of every model: signatures, weights, lifetimes, length mixtures. */
static int wl_shapes_build(const wl_config_t *c, wl_shape_t **out, uint32_t *out_per_model)
{
    uint32_t spm = c->shapes_per_model;
    uint32_t repl = (uint32_t)llround(c->churn * spm);
    uint32_t per_model = spm + repl;
    double long_share = c->long_share > 0.0 ? c->long_share : WL_LONG_SHARE_DFLT;
    wl_shape_t *shapes = calloc((size_t)c->models * per_model, sizeof(*shapes));
    uint32_t *rank = malloc(spm * sizeof(*rank));
    int rc = -1;
    if (shapes == NULL || rank == NULL)
        goto out;
    for (uint32_t m = 0; m < c->models; m++) {
        rng_t r;
        rng_seed(&r, c->seed ^ (0x5a4e5ull << 20) ^ m);
        for (uint32_t k = 0; k < spm; k++)
            rank[k] = k;
        for (uint32_t k = spm; k > 1; k--) { /* Fisher-Yates */
            uint32_t j = (uint32_t)(rng_next(&r) % k);
            uint32_t t = rank[k - 1];
            rank[k - 1] = rank[j];
            rank[j] = t;
        }
        wl_shape_t *ms = shapes + (size_t)m * per_model;
        for (uint32_t k = 0; k < spm; k++) {
            ms[k].weight = pow((double)(rank[k] + 1), -c->zipf_s);
            ms[k].start_s = 0.0;
            ms[k].end_s = INFINITY;
        }
        /* Churn (invariant 4): the first `repl` shapes of a second permutation go quiet. */
        for (uint32_t k = spm; k > 1; k--) {
            uint32_t j = (uint32_t)(rng_next(&r) % k);
            uint32_t t = rank[k - 1];
            rank[k - 1] = rank[j];
            rank[j] = t;
        }
        for (uint32_t k = 0; k < repl; k++) {
            double at = c->duration_s * wl_rng_range(&r, 0.15, 0.85);
            wl_shape_t *old = &ms[rank[k]], *young = &ms[spm + k];
            old->end_s = at;
            young->weight = old->weight;
            young->start_s = at;
            young->end_s = INFINITY;
        }
        for (uint32_t k = 0; k < per_model; k++) {
            uint32_t g = m * per_model + k;
            uint64_t st = c->seed ^ (0x5eedull << 32) ^ g;
            ms[k].signature = rng_splitmix64(&st) | 1; /* never 0: 0 reads as "absent" */
            ms[k].model = m;
            rng_t sr;
            rng_seed(&sr, c->seed ^ (0x51a9e5ull << 24) ^ g);
            wl_mix_draw(&sr, long_share, c->max_tokens, &ms[k].mix);
            if (c->prefix_max > 0) { /* a stream of its own: the items stay the same */
                rng_t pr;
                rng_seed(&pr, c->seed ^ (0x9f1e5ull << 28) ^ g);
                double lo = c->prefix_min > 0 ? c->prefix_min : 1;
                ms[k].prefix_tokens =
                    (uint32_t)llround(lo * exp(rng_uniform(&pr) * log(c->prefix_max / lo)));
            }
        }
    }
    *out = shapes;
    *out_per_model = per_model;
    shapes = NULL;
    rc = 0;
out:
    free(shapes);
    free(rank);
    return rc;
}

/* A shape of model m active at t, Zipf-weighted among the active ones (rejection). */
static uint32_t wl_shape_draw(rng_t *r, const wl_shape_t *ms, const double *cdf, uint32_t n,
                              double t)
{
    for (int tries = 0; tries < 64; tries++) {
        uint32_t k = rng_cdf_draw(r, cdf, n);
        if (ms[k].start_s <= t && t < ms[k].end_s)
            return k;
    }
    /* Unlucky streak: the most popular active shape. */
    uint32_t best = 0;
    for (uint32_t k = 0; k < n; k++) {
        int active = ms[k].start_s <= t && t < ms[k].end_s;
        if (active &&
            (!(ms[best].start_s <= t && t < ms[best].end_s) || ms[k].weight > ms[best].weight))
            best = k;
    }
    return best;
}

/* Everything the generator draws from: shapes, per-model shape CDFs, model weights. */
typedef struct {
    wl_shape_t *shapes; /* models x per_model */
    uint32_t per_model;
    double *cdf;    /* per model: cumulative Zipf weights of its shapes */
    double *mcdf;   /* cumulative model weights (invariant 5) */
    double mean_ns; /* expected gpu_item_ns over the whole workload (0 without a gpu) */
} wl_pop_t;

static void wl_pop_free(wl_pop_t *p)
{
    free(p->shapes);
    free(p->cdf);
    free(p->mcdf);
    *p = (wl_pop_t){0};
}

/* gpu: when not NULL, also the expected cost per item (mean_ns) from the same draws. */
static int wl_pop_build(const wl_config_t *cfg, const gpu_config_t *gpu, wl_pop_t *p)
{
    *p = (wl_pop_t){0};
    if (wl_shapes_build(cfg, &p->shapes, &p->per_model) != 0)
        return -1;
    uint32_t pm = p->per_model;
    p->cdf = malloc((size_t)cfg->models * pm * sizeof(*p->cdf));
    p->mcdf = malloc(cfg->models * sizeof(*p->mcdf));
    if (p->cdf == NULL || p->mcdf == NULL) {
        wl_pop_free(p);
        return -1;
    }
    for (uint32_t m = 0; m < cfg->models; m++) {
        double acc = 0.0;
        for (uint32_t k = 0; k < pm; k++) {
            acc += p->shapes[m * pm + k].weight;
            p->cdf[m * pm + k] = acc;
        }
    }
    /* Each model's mean length from its own stream; weights are the inverses (invariant 5), so
     * a model's share of the items is (1 / mean_m) / sum(1 / mean_k), and the expected cost per
     * item is the shares' weighted sum of each model's mean cost. */
    double macc = 0.0, ns_acc = 0.0;
    for (uint32_t m = 0; m < cfg->models; m++) {
        rng_t mr;
        rng_seed(&mr, cfg->seed ^ (0x3ea9ull << 40) ^ m);
        const wl_shape_t *ms = p->shapes + (size_t)m * pm;
        const double *mc = p->cdf + (size_t)m * pm;
        double sum = 0.0, ns = 0.0;
        for (uint32_t d = 0; d < WL_MEAN_DRAWS; d++) {
            uint32_t k = rng_cdf_draw(&mr, mc, pm);
            uint32_t len = wl_mix_sample(&mr, &ms[k].mix, cfg->max_tokens);
            sum += len;
            if (gpu != NULL)
                ns += gpu_item_ns(gpu, len);
        }
        macc += (double)WL_MEAN_DRAWS / sum;
        ns_acc += ns / sum; /* mean_ns_m / mean_m */
        p->mcdf[m] = macc;
    }
    p->mean_ns = ns_acc / macc;
    return 0;
}

int wl_generate(const wl_config_t *cfg, wl_item_t **out, size_t *out_n)
{
    if (cfg == NULL || out == NULL || out_n == NULL || !wl_config_valid(cfg))
        return -1;
    int rc = -1;
    wl_pop_t pop = {0};
    wl_window_t *bursts = NULL;
    wl_item_t *items = NULL;
    size_t n = 0, cap = 0, n_bursts = 0, cursor = 0;
    if (wl_pop_build(cfg, NULL, &pop) != 0 || wl_bursts(cfg, &bursts, &n_bursts) != 0)
        goto out;
    uint32_t pm = pop.per_model;
    rng_t r;
    rng_seed(&r, cfg->seed);
    double rmax = cfg->rate * (cfg->burst_factor > 1.0 ? cfg->burst_factor : 1.0);
    for (double t = wl_rng_exp(&r, rmax); t < cfg->duration_s; t += wl_rng_exp(&r, rmax)) {
        double rate = wl_rate_at(cfg, bursts, n_bursts, &cursor, t);
        if (rng_uniform(&r) * rmax >= rate) /* thinning */
            continue;
        uint32_t m = rng_cdf_draw(&r, pop.mcdf, cfg->models);
        const wl_shape_t *ms = pop.shapes + (size_t)m * pm;
        uint32_t k = wl_shape_draw(&r, ms, pop.cdf + (size_t)m * pm, pm, t);
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            wl_item_t *g = realloc(items, cap * sizeof(*g));
            if (g == NULL)
                goto out;
            items = g;
        }
        items[n++] = (wl_item_t){
            .t_ns = (uint64_t)llround(t * 1e9),
            .signature = ms[k].signature,
            .model = m,
            .shape = m * pm + k,
            .tokens = wl_mix_sample(&r, &ms[k].mix, cfg->max_tokens),
            .prefix_tokens = ms[k].prefix_tokens,
        };
    }
    *out = items;
    *out_n = n;
    items = NULL;
    rc = 0;
out:
    free(items);
    free(bursts);
    wl_pop_free(&pop);
    return rc;
}

/* Expected fraction of the time inside a burst window: mean length over mean period. */
#define WL_BURST_SHARE                           \
    (((WL_BURST_MIN_S + WL_BURST_MAX_S) / 2.0) / \
     ((WL_BURST_MIN_S + WL_BURST_MAX_S) / 2.0 + WL_BURST_GAP_S))

/* Expected worker time per second of arrivals at cfg->rate, over all models, in ns/s. */
static int wl_demand(const wl_config_t *cfg, const gpu_config_t *gpu, double *out)
{
    if (cfg == NULL || gpu == NULL || !wl_config_valid(cfg))
        return -1;
    wl_pop_t p;
    if (wl_pop_build(cfg, gpu, &p) != 0)
        return -1;
    *out = cfg->rate * p.mean_ns * (1.0 + (cfg->burst_factor - 1.0) * WL_BURST_SHARE);
    wl_pop_free(&p);
    return 0;
}

int wl_rate_for_load(wl_config_t *cfg, const gpu_config_t *gpu, uint32_t workers, double load)
{
    if (cfg == NULL || workers == 0 || !(load > 0.0))
        return -1;
    double rate = cfg->rate, demand = 0.0;
    cfg->rate = 1.0; /* any valid rate: the demand is proportional to it */
    if (wl_demand(cfg, gpu, &demand) != 0 || !(demand > 0.0)) {
        cfg->rate = rate;
        return -1;
    }
    cfg->rate = load * (double)workers * 1e9 / demand;
    return 0;
}

int wl_load(const wl_config_t *cfg, const gpu_config_t *gpu, uint32_t workers, double *out)
{
    double demand = 0.0;
    if (out == NULL || workers == 0 || wl_demand(cfg, gpu, &demand) != 0)
        return -1;
    *out = demand / ((double)workers * 1e9);
    return 0;
}

int wl_preset(const char *name, uint64_t seed, wl_config_t *cfg)
{
    if (name == NULL || cfg == NULL || strlen(name) >= sizeof(cfg->preset))
        return -1;
    /* Loads are written against sim's default workers (gpu_config_default,
     * WL_PRESET_WORKERS_PER_MODEL per model), each item costed at a full batch (wl_load). The
     * item rate is derived from this seed's length mixtures, so every seed offers the same
     * load. Common ground: 2 models of 8 shapes, Zipf 1.1, lengths to 8,192. */
    wl_config_t c = {
        .seed = seed,
        .models = 2,
        .shapes_per_model = 8,
        .zipf_s = 1.1,
        .duration_s = 60.0,
        .burst_factor = 1.0,
        .churn = 0.0,
        .max_tokens = 8192,
        .long_share = WL_LONG_SHARE_DFLT,
    };
    /* Time-averaged. The presets sit where lanes-2048's queue on steady stays bounded as the run
     * grows longer; at 85% it grows with the run, an overload test, not a steady state
     * (`sim --preset steady --policies lanes-seed --duration D [--load 85]`; the figures in
     * docs/bench.md, "lanesched-bench"). */
    double load = 0.70;
    if (strcmp(name, "steady") == 0) {
        /* Each model's everyday traffic: two prompt templates, both of which fit every worker's
         * prefix cache (gpu_config_default: 2 shapes). That is the regime the hit-rate claim
         * is about: sticky draining puts every worker of a model on the same shapes, so once
         * those fit the cache only cold misses remain. With K shapes per model over a cache
         * of C, sticky draining cannot reach 99.9% with bounded waits once K > C (every
         * worker cycles through all K), and no policy can once K > workers * C: each shape
         * must be served once per wait bound W, so a model takes at least K - workers * C
         * misses per W (docs/bench.md, "Shape hit rate and the cache"). */
        c.shapes_per_model = 2;
    } else if (strcmp(name, "bursty") == 0) {
        /* 38% between bursts, x4 (151%) inside them: 70% on average */
        c.burst_factor = 4.0;
    } else if (strcmp(name, "churn") == 0) {
        /* half the shapes of each model replaced mid-trace */
        c.shapes_per_model = 12;
        c.churn = 0.5;
        c.duration_s = 90.0;
    } else if (strcmp(name, "sustained") == 0) {
        /* The article's case: every shape long-tailed and wide (lengths to 32,768, thousands
         * of distinct lengths per shape), offered at 110% for five minutes, so a backlog
         * stands, lanes keep their items and never go idle, and every shape walks toward its
         * lane budget. */
        c.shapes_per_model = 4;
        c.max_tokens = 32768;
        c.long_share = 1.0;
        c.duration_s = 300.0;
        load = 1.10;
    } else {
        return -1;
    }
    memcpy(c.preset, name, strlen(name) + 1);
    gpu_config_t gpu;
    gpu_config_default(&gpu);
    if (wl_rate_for_load(&c, &gpu, WL_PRESET_WORKERS_PER_MODEL * c.models, load) != 0)
        return -1;
    *cfg = c;
    return 0;
}
