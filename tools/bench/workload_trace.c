/*
 * workload_trace.c - trace files: a workload written down, so sim, live and baseline can replay
 * the same items (--trace-out, --trace-in) and other tools can write traces of their own.
 *
 * Format: a header line "lanesched-bench-trace v1 key=value ..." with the generator's config
 * (unknown keys ignored), a comment line, then one line per item: t_ns model shape signature
 * (hex) tokens.
 *
 * Invariants:
 *   1. Writing then reading gives the same items, and the config's numbers exactly (%.17g
 *      round-trips a double): sim's --check asserts it.
 *   2. wl_trace_read accepts only what the generator could have made (workload.c invariant 2):
 *      nondecreasing times, tokens > 0, a nonzero signature, models within the header's count,
 *      and one signature and model per shape index.
 *
 * Rejected alternatives:
 *   - A binary trace format: text is diffable and other tools can write it; the parse cost is
 *     nothing next to a simulation.
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define WL_TRACE_MAGIC   "lanesched-bench-trace"
#define WL_TRACE_VERSION 1
#define WL_LINE_MAX      1024

int wl_trace_write(const char *path, const wl_config_t *cfg, const wl_item_t *items, size_t n)
{
    if (path == NULL || cfg == NULL || (items == NULL && n != 0))
        return -1;
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f,
            "%s v%d preset=%s seed=%" PRIu64 " models=%" PRIu32 " shapes_per_model=%" PRIu32
            " zipf_s=%.17g duration_s=%.17g rate=%.17g burst_factor=%.17g churn=%.17g"
            " max_tokens=%" PRIu32 " long_share=%.17g items=%zu\n",
            WL_TRACE_MAGIC, WL_TRACE_VERSION, cfg->preset[0] ? cfg->preset : "-", cfg->seed,
            cfg->models, cfg->shapes_per_model, cfg->zipf_s, cfg->duration_s, cfg->rate,
            cfg->burst_factor, cfg->churn, cfg->max_tokens, cfg->long_share, n);
    fprintf(f, "# t_ns model shape signature tokens\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%" PRIu64 " %" PRIu32 " %" PRIu32 " %016" PRIx64 " %" PRIu32 "\n",
                items[i].t_ns, items[i].model, items[i].shape, items[i].signature, items[i].tokens);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}

/* Parses "key=value" words of the header into cfg; unknown keys are ignored. */
static int wl_header_parse(char *line, wl_config_t *c, size_t *out_items)
{
    char *save = NULL;
    char *w = strtok_r(line, " \t\r\n", &save);
    if (w == NULL || strcmp(w, WL_TRACE_MAGIC) != 0)
        return -1;
    w = strtok_r(NULL, " \t\r\n", &save);
    if (w == NULL || strcmp(w, "v1") != 0)
        return -1;
    *out_items = 0;
    while ((w = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
        char *eq = strchr(w, '=');
        if (eq == NULL)
            return -1;
        *eq = '\0';
        const char *k = w, *v = eq + 1;
        char *end = NULL;
        errno = 0;
        if (strcmp(k, "preset") == 0) {
            snprintf(c->preset, sizeof(c->preset), "%s", v);
            continue;
        }
        double d = strtod(v, &end);
        if (errno != 0 || end == v || *end != '\0')
            return -1;
        if (strcmp(k, "seed") == 0)
            c->seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "models") == 0)
            c->models = (uint32_t)d;
        else if (strcmp(k, "shapes_per_model") == 0)
            c->shapes_per_model = (uint32_t)d;
        else if (strcmp(k, "zipf_s") == 0)
            c->zipf_s = d;
        else if (strcmp(k, "duration_s") == 0)
            c->duration_s = d;
        else if (strcmp(k, "rate") == 0)
            c->rate = d;
        else if (strcmp(k, "burst_factor") == 0)
            c->burst_factor = d;
        else if (strcmp(k, "churn") == 0)
            c->churn = d;
        else if (strcmp(k, "max_tokens") == 0)
            c->max_tokens = (uint32_t)d;
        else if (strcmp(k, "long_share") == 0)
            c->long_share = d;
        else if (strcmp(k, "items") == 0)
            *out_items = (size_t)d;
    }
    return 0;
}

int wl_trace_read(const char *path, wl_config_t *cfg, wl_item_t **out, size_t *out_n)
{
    if (path == NULL || cfg == NULL || out == NULL || out_n == NULL)
        return -1;
    int rc = -1;
    wl_config_t c = {0};
    wl_item_t *items = NULL;
    uint64_t *shape_sig = NULL; /* per shape index: signature (0 = unseen) */
    uint32_t *shape_model = NULL;
    size_t n = 0, cap = 0, hinted = 0, n_shapes = (size_t)WL_MODELS_MAX * WL_SHAPES_MAX;
    char line[WL_LINE_MAX];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    if (fgets(line, sizeof(line), f) == NULL || wl_header_parse(line, &c, &hinted) != 0)
        goto out;
    if (c.models < 1 || c.models > WL_MODELS_MAX)
        goto out;
    shape_sig = calloc(n_shapes, sizeof(*shape_sig));
    shape_model = calloc(n_shapes, sizeof(*shape_model));
    if (shape_sig == NULL || shape_model == NULL)
        goto out;
    uint64_t last_t = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        uint64_t t, sig;
        uint32_t model, shape, tokens;
        char tail;
        if (sscanf(line, "%" SCNu64 " %" SCNu32 " %" SCNu32 " %" SCNx64 " %" SCNu32 " %c", &t,
                   &model, &shape, &sig, &tokens, &tail) != 5)
            goto out;
        /* invariant 2 */
        if (t < last_t || model >= c.models || shape >= n_shapes || tokens == 0 || sig == 0)
            goto out;
        if (shape_sig[shape] == 0) {
            shape_sig[shape] = sig;
            shape_model[shape] = model;
        } else if (shape_sig[shape] != sig || shape_model[shape] != model) {
            goto out;
        }
        last_t = t;
        if (n == cap) {
            cap = cap ? cap * 2 : (hinted ? hinted : 4096);
            wl_item_t *g = realloc(items, cap * sizeof(*g));
            if (g == NULL)
                goto out;
            items = g;
        }
        items[n++] = (wl_item_t){t, sig, model, shape, tokens};
    }
    if (ferror(f))
        goto out;
    *cfg = c;
    *out = items;
    *out_n = n;
    items = NULL;
    rc = 0;
out:
    free(items);
    free(shape_sig);
    free(shape_model);
    fclose(f);
    return rc;
}
