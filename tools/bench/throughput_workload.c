/*
 * throughput_workload.c - the items `throughput` moves. The realistic workload (the default) is
 * the traffic lanesched exists for: several models, many prompt shapes per model with Zipf
 * popularity, lengths spread over two orders of magnitude. The uniform workload is the best case
 * and is labelled so wherever it appears: one shape per model and one length, so every item of a
 * model lands in one lane and shape awareness costs nothing.
 *
 * An item is a pure function of (seed, items per phase, index):
 *   model   Submit chunks of `batch` items, counted from the start of their phase, go round the
 *           models (chunk k -> model k % models): every Submit has one model, every model gets
 *           the same share.
 *   shape   drawn with weight (rank + 1)^-zipf_s over the model's shapes; its signature is a
 *           hash of (seed, model, shape), never 0.
 *   tokens  fixed, uniform in [a, b], or log-normal: each shape has its own median, a times
 *           e^(0.5 z) (shapes differ, as prompts of a system prompt plus a user turn do), and
 *           the items of a shape are log-normal around it with sigma b, clamped to [1, max].
 *           The default lognormal:300:0.9:8192 has a median near 300 tokens, 1% of items past
 *           3,000 and a tail reaching 8,192.
 *
 * Invariants:
 *  1. The same seed, point and items per phase give the same items on every host with the same
 *     libm (exp, log, cos, pow); lanesched, JetStream and the fabric of a run get the same ones,
 *     and a consumer recomputes an item's shape and tokens from its index to check its batch.
 *  2. tokens in [1, lengths.max]; lengths.max is what max_batch_tokens is sized from by
 *     default.
 *
 * Rejected alternatives:
 *  - workload.c's traces (arrival times, length mixtures per preset): throughput saturates, it
 *    has no arrival times, and an item must be recomputable from its index alone (invariant 1)
 *    without holding a trace of millions of items.
 *  - One length distribution shared by every shape: lanes of every shape then look alike.
 */
#include "throughput_int.h"

#include "common/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TPW_SHAPE_SPREAD 0.5 /* sigma of a shape's median around the mix's median */
/* the daemon's default --limit-batch-tokens: a larger Register is refused */
#define TPW_BATCH_TOKENS_LIMIT 4194304u

static uint64_t tpw_mix(uint64_t a, uint64_t b)
{
    uint64_t st = a ^ (b * 0x9e3779b97f4a7c15ull);
    return rng_splitmix64(&st);
}

static uint32_t tpw_clamp(double v, uint32_t lo, uint32_t hi)
{
    if (!(v >= lo)) /* NaN too */
        return lo;
    return v > hi ? hi : (uint32_t)(v + 0.5);
}

int tp_workload_init(tp_workload_t *w, const tp_opts_t *o, uint32_t shapes)
{
    memset(w, 0, sizeof(*w));
    w->seed = o->seed;
    w->models = o->models;
    w->shapes = shapes;
    w->batch = o->batch;
    w->lengths = o->lengths;
    w->uniform = o->uniform;
    size_t n = (size_t)w->models * shapes;
    w->cdf = calloc(shapes, sizeof(*w->cdf));
    w->signature = calloc(n, sizeof(*w->signature));
    w->median = calloc(n, sizeof(*w->median));
    w->names = calloc(w->models, sizeof(*w->names));
    if (w->cdf == NULL || w->signature == NULL || w->median == NULL || w->names == NULL) {
        tp_workload_free(w);
        return -1;
    }
    double sum = 0;
    for (uint32_t k = 0; k < shapes; k++) {
        sum += pow((double)(k + 1), -o->zipf_s);
        w->cdf[k] = sum;
    }
    for (uint32_t m = 0; m < w->models; m++) {
        snprintf(w->names[m], sizeof(w->names[m]), TP_MODEL_FMT, m);
        for (uint32_t k = 0; k < shapes; k++) {
            size_t at = (size_t)m * shapes + k;
            uint64_t key = ((uint64_t)m << 32) | k;
            /* the uniform workload keeps the signature it always had: one per model */
            w->signature[at] = w->uniform ? 0x5eed0000ull + m + 1 : tpw_mix(w->seed, key) | 1;
            rng_t r;
            rng_seed(&r, tpw_mix(w->seed ^ 0x5ba9e5ull, key));
            w->median[at] = w->lengths.a * exp(TPW_SHAPE_SPREAD * rng_normal(&r));
        }
    }
    return 0;
}

void tp_workload_free(tp_workload_t *w)
{
    free(w->cdf);
    free(w->signature);
    free(w->median);
    free(w->names);
    memset(w, 0, sizeof(*w));
}

uint32_t tp_workload_model(const tp_workload_t *w, uint64_t items, uint64_t idx)
{
    uint64_t rel = idx >= items ? idx - items : idx;
    return (uint32_t)((rel / w->batch) % w->models);
}

void tp_workload_item(const tp_workload_t *w, uint64_t items, uint64_t idx, tp_item_t *out)
{
    rng_t r;
    rng_seed(&r, tpw_mix(w->seed, idx + 1));
    out->model = tp_workload_model(w, items, idx);
    out->shape = w->shapes > 1 ? rng_cdf_draw(&r, w->cdf, w->shapes) : 0;
    size_t at = (size_t)out->model * w->shapes + out->shape;
    out->signature = w->signature[at];
    const tp_lengths_t *l = &w->lengths;
    switch (l->kind) {
    case TP_LEN_FIXED:
        out->tokens = (uint32_t)l->a;
        break;
    case TP_LEN_UNIFORM:
        out->tokens = (uint32_t)l->a + (uint32_t)(rng_next(&r) % ((uint64_t)(l->b - l->a) + 1));
        break;
    case TP_LEN_LOGNORMAL:
        out->tokens = tpw_clamp(w->median[at] * exp(l->b * rng_normal(&r)), 1, l->max);
        break;
    }
}

uint32_t tp_max_batch_tokens(const tp_opts_t *o)
{
    if (o->max_batch_tokens > 0)
        return o->max_batch_tokens;
    uint64_t t = (uint64_t)o->max_batch_size * ((o->lengths.max + 7u) / 8u * 8u);
    return t > TPW_BATCH_TOKENS_LIMIT ? TPW_BATCH_TOKENS_LIMIT : (uint32_t)t;
}

void tp_lengths_format(const tp_lengths_t *l, char *out, size_t len)
{
    switch (l->kind) {
    case TP_LEN_FIXED:
        snprintf(out, len, "fixed:%.0f", l->a);
        break;
    case TP_LEN_UNIFORM:
        snprintf(out, len, "uniform:%.0f:%.0f", l->a, l->b);
        break;
    case TP_LEN_LOGNORMAL:
        snprintf(out, len, "lognormal:%g:%g:%u", l->a, l->b, l->max);
        break;
    }
}

bool tp_lengths_parse(const char *text, tp_lengths_t *out)
{
    tp_lengths_t l = {.kind = TP_LEN_LOGNORMAL, .a = 300, .b = 0.9, .max = TP_TOKENS_MAX};
    char tail;
    double a = 0, b = 0, max = 0;
    int n;
    if (strncmp(text, "fixed:", 6) == 0) {
        if (sscanf(text + 6, "%lf%c", &a, &tail) != 1 || a < 1 || a > 1u << 20 || a != floor(a))
            return false;
        l = (tp_lengths_t){.kind = TP_LEN_FIXED, .a = a, .b = a, .max = (uint32_t)a};
    } else if (strncmp(text, "uniform:", 8) == 0) {
        if (sscanf(text + 8, "%lf:%lf%c", &a, &b, &tail) != 2 || a < 1 || b < a || b > 1u << 20 ||
            a != floor(a) || b != floor(b))
            return false;
        l = (tp_lengths_t){.kind = TP_LEN_UNIFORM, .a = a, .b = b, .max = (uint32_t)b};
    } else if (strcmp(text, "lognormal") == 0) {
        /* the defaults above */
    } else if (strncmp(text, "lognormal:", 10) == 0) {
        n = sscanf(text + 10, "%lf:%lf:%lf%c", &a, &b, &max, &tail);
        if (n < 1 || n > 3 || a < 1 || a > 1u << 20)
            return false;
        l.a = a;
        if (n >= 2) {
            if (b < 0 || b > 4)
                return false;
            l.b = b;
        }
        if (n == 3) {
            if (max < a || max > 1u << 20 || max != floor(max))
                return false;
            l.max = (uint32_t)max;
        }
    } else {
        return false;
    }
    *out = l;
    return true;
}

void tp_workload_short(const tp_workload_t *w, char *out, size_t len)
{
    if (w->uniform)
        snprintf(out, len, "uniform, best case");
    else
        snprintf(out, len, "%u shapes/model", w->shapes);
}

void tp_workload_describe(const tp_workload_t *w, const tp_opts_t *o, char *out, size_t len)
{
    char lengths[64];
    tp_lengths_format(&w->lengths, lengths, sizeof(lengths));
    if (w->uniform)
        snprintf(out, len,
                 "uniform (BEST CASE: %u model(s) x 1 shape, lengths %s: every item of a model "
                 "in one lane)",
                 w->models, lengths);
    else
        snprintf(out, len, "realistic, %u models x %u shapes (Zipf %g), lengths %s", w->models,
                 w->shapes, o->zipf_s, lengths);
}
