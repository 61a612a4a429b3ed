/*
 * workload_trace.c - trace files: a workload written down, so sim, live and baseline can replay
 * the same items (--trace-out, --trace-in) and other tools (public traces converted,
 * tools/bench/traces_unlike.py, scripts/demo.sh) can write traces of their own.
 *
 * Format, v2 (written): a header line "lanesched-bench-trace v2 key=value ..." with the
 * generator's config (unknown keys ignored), comment lines starting with '#', then one line per
 * item: t_ns model shape signature(hex) tokens prefix_tokens. v1 (read): the same header with
 * "v1" and lines without prefix_tokens (read as 0). Blank lines and a CR before the newline are
 * ignored.
 *
 * Invariants:
 *   1. Writing then reading gives the same items, and the config's numbers exactly (%.17g
 *      round-trips a double): sim's --check asserts it.
 *   2. wl_trace_read accepts only what the generator could have made (workload.c invariant 2):
 *      nondecreasing times, tokens > 0, a nonzero signature, models within the header's count
 *      (or, without one, fewer than WL_MODELS_MAX), and one signature and model per shape
 *      index, times within 30 days and token counts within a million. Anything else is refused
 *      with the file's name, the line number and what is wrong, never read past: a replay of a
 *      converted public trace must not quietly drop items.
 *   3. The header's numbers are the generator's, kept as written (invariant 1); what the claims
 *      read of the workload's shape they count in the items (report_shapes_per_model).
 *
 * Rejected alternatives:
 *   - A binary trace format: text is diffable and other tools can write it; the parse cost is
 *     nothing next to a simulation.
 *   - Writing v1 unless a prefix is set: one format out keeps every reader's path the same; v1
 *     stays readable, since public traces converted before v2 exist.
 */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define WL_TRACE_MAGIC   "lanesched-bench-trace"
#define WL_TRACE_VERSION 2
#define WL_LINE_MAX      4096
/* Times are nanoseconds from the trace's start, and the sim keeps a sample per simulated second:
 * a time past 30 days is a converter's mistake (Unix epoch times kept: 1.7e18 ns), refused by
 * line instead of simulated for hours. */
#define WL_TRACE_T_MAX_NS (30ull * 86400ull * 1000000000ull)
/* A prompt or prefix over a million tokens is no engine's: refused by line (the bucket
 * schemes' packing walks the tokens' range). */
#define WL_TRACE_TOKENS_MAX (1u << 20)
/* A header's items= hint larger than this is not trusted to size the first allocation. */
#define WL_TRACE_HINT_MAX (1u << 22)

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
            " max_tokens=%" PRIu32 " long_share=%.17g prefix_min=%" PRIu32 " prefix_max=%" PRIu32
            " items=%zu\n",
            WL_TRACE_MAGIC, WL_TRACE_VERSION, cfg->preset[0] ? cfg->preset : "-", cfg->seed,
            cfg->models, cfg->shapes_per_model, cfg->zipf_s, cfg->duration_s, cfg->rate,
            cfg->burst_factor, cfg->churn, cfg->max_tokens, cfg->long_share, cfg->prefix_min,
            cfg->prefix_max, n);
    fprintf(f, "# t_ns model shape signature tokens prefix_tokens\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%" PRIu64 " %" PRIu32 " %" PRIu32 " %016" PRIx64 " %" PRIu32 " %" PRIu32 "\n",
                items[i].t_ns, items[i].model, items[i].shape, items[i].signature, items[i].tokens,
                items[i].prefix_tokens);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}

static void wl_trace_err(char *err, size_t len, const char *path, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void wl_trace_err(char *err, size_t len, const char *path, size_t line, const char *fmt, ...)
{
    if (err == NULL || len == 0)
        return;
    int k = line ? snprintf(err, len, "%s:%zu: ", path, line) : snprintf(err, len, "%s: ", path);
    if (k < 0 || (size_t)k >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, len - (size_t)k, fmt, ap);
    va_end(ap);
}

/* A header number as a u32 field, 0 when it is out of range. */
static uint32_t wl_u32(double d)
{
    return d >= 0 && d <= UINT32_MAX ? (uint32_t)d : 0;
}

/* Parses "key=value" words of the header into cfg (unknown keys are ignored) and its version
 * into *out_version. 0, or -1 with *what saying why. */
static int wl_header_parse(char *line, wl_config_t *c, size_t *out_items, int *out_version,
                           const char **what)
{
    char *save = NULL;
    char *w = strtok_r(line, " \t\r\n", &save);
    *what = "not a lanesched-bench trace (the first line must start with \"" WL_TRACE_MAGIC
            " v1\" or \"v2\")";
    if (w == NULL || strcmp(w, WL_TRACE_MAGIC) != 0)
        return -1;
    w = strtok_r(NULL, " \t\r\n", &save);
    if (w == NULL || (strcmp(w, "v1") != 0 && strcmp(w, "v2") != 0)) {
        *what = "unknown trace version (this reader knows v1 and v2)";
        return -1;
    }
    *out_version = w[1] - '0';
    *out_items = 0;
    while ((w = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
        char *eq = strchr(w, '=');
        *what = "a header word is not key=value";
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
        *what = "a header value is not a number";
        if (errno != 0 || end == v || *end != '\0')
            return -1;
        *what = "a header value is out of range";
        if (strcmp(k, "seed") == 0)
            c->seed = strtoull(v, NULL, 10);
        else if (strcmp(k, "models") == 0) {
            if (!(d >= 0 && d <= WL_MODELS_MAX))
                return -1;
            c->models = (uint32_t)d;
        } else if (strcmp(k, "shapes_per_model") == 0)
            c->shapes_per_model = wl_u32(d);
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
            c->max_tokens = wl_u32(d);
        else if (strcmp(k, "long_share") == 0)
            c->long_share = d;
        else if (strcmp(k, "prefix_min") == 0)
            c->prefix_min = wl_u32(d);
        else if (strcmp(k, "prefix_max") == 0)
            c->prefix_max = wl_u32(d);
        else if (strcmp(k, "items") == 0)
            *out_items = d >= 0 && d < 1e9 ? (size_t)d : 0; /* a hint for the allocation */
    }
    return 0;
}

/* One item line into *out (fields separated by blanks; v1: 5 fields, v2: 6). 0, or -1 with
 * *what saying why. */
static int wl_line_parse(char *line, int version, wl_item_t *out, const char **what)
{
    char *save = NULL, *f[7];
    int k = 0;
    for (char *w = strtok_r(line, " \t\r\n", &save); w != NULL;
         w = strtok_r(NULL, " \t\r\n", &save))
        f[k < 7 ? k++ : 6] = w;
    int want = version == 1 ? 5 : 6;
    *what = version == 1 ? "want 5 fields: t_ns model shape signature tokens"
                         : "want 6 fields: t_ns model shape signature tokens prefix_tokens";
    if (k != want)
        return -1;
    uint64_t v[6];
    for (int i = 0; i < want; i++) {
        char *end = NULL;
        errno = 0;
        if (f[i][0] == '-' || f[i][0] == '+') {
            *what = "a negative or signed number";
            return -1;
        }
        v[i] = strtoull(f[i], &end, i == 3 ? 16 : 10);
        if (errno != 0 || end == f[i] || *end != '\0') {
            static const char *const bad[] = {
                "t_ns is not a whole number",   "model is not a whole number",
                "shape is not a whole number",  "signature is not a hex number",
                "tokens is not a whole number", "prefix_tokens is not a whole number"};
            *what = bad[i];
            return -1;
        }
    }
    if (v[1] > UINT32_MAX || v[2] > UINT32_MAX || v[4] > UINT32_MAX ||
        (want == 6 && v[5] > UINT32_MAX)) {
        *what = "model, shape, tokens and prefix_tokens must fit 32 bits";
        return -1;
    }
    *out = (wl_item_t){.t_ns = v[0],
                       .model = (uint32_t)v[1],
                       .shape = (uint32_t)v[2],
                       .signature = v[3],
                       .tokens = (uint32_t)v[4],
                       .prefix_tokens = want == 6 ? (uint32_t)v[5] : 0};
    return 0;
}

int wl_trace_read(const char *path, wl_config_t *cfg, wl_item_t **out, size_t *out_n, char *err,
                  size_t err_len)
{
    if (path == NULL || cfg == NULL || out == NULL || out_n == NULL)
        return -1;
    int rc = -1, version = 0;
    wl_config_t c = {0};
    wl_item_t *items = NULL;
    uint64_t *shape_sig = NULL; /* per shape index: signature (0 = unseen) */
    uint32_t *shape_model = NULL;
    size_t n = 0, cap = 0, hinted = 0, n_shapes = (size_t)WL_MODELS_MAX * WL_SHAPES_MAX;
    size_t lineno = 1;
    uint32_t models = 0;
    const char *what = NULL;
    char line[WL_LINE_MAX];
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        wl_trace_err(err, err_len, path, 0, "%s", strerror(errno));
        return -1;
    }
    if (fgets(line, sizeof(line), f) == NULL) {
        wl_trace_err(err, err_len, path, 0, "empty file");
        goto out;
    }
    if (wl_header_parse(line, &c, &hinted, &version, &what) != 0) {
        wl_trace_err(err, err_len, path, 1, "%s", what);
        goto out;
    }
    shape_sig = calloc(n_shapes, sizeof(*shape_sig));
    shape_model = calloc(n_shapes, sizeof(*shape_model));
    if (shape_sig == NULL || shape_model == NULL) {
        wl_trace_err(err, err_len, path, 0, "out of memory");
        goto out;
    }
    uint64_t last_t = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        size_t len = strlen(line);
        if (len + 1 == sizeof(line) && line[len - 1] != '\n') {
            wl_trace_err(err, err_len, path, lineno, "line longer than %d bytes", WL_LINE_MAX - 2);
            goto out;
        }
        size_t lead = strspn(line, " \t");
        if (line[lead] == '#' || line[lead] == '\n' || line[lead] == '\r' || line[lead] == '\0')
            continue;
        wl_item_t it;
        if (wl_line_parse(line, version, &it, &what) != 0) {
            wl_trace_err(err, err_len, path, lineno, "%s", what);
            goto out;
        }
        /* invariant 2 */
        const char *bad =
            it.t_ns < last_t ? "t_ns goes backwards"
            : it.t_ns > WL_TRACE_T_MAX_NS
                ? "t_ns past 30 days: times are nanoseconds from the trace's start (subtract the "
                  "first time from Unix epoch times)"
            : it.tokens > WL_TRACE_TOKENS_MAX || it.prefix_tokens > WL_TRACE_TOKENS_MAX
                ? "tokens or prefix_tokens over 1,048,576"
            : c.models != 0 && it.model >= c.models ? "model beyond the header's models"
            : it.model >= WL_MODELS_MAX             ? "model index too large"
            : it.shape >= n_shapes                  ? "shape index too large"
            : it.tokens == 0                        ? "tokens is 0"
            : it.signature == 0                     ? "signature is 0"
                                                    : NULL;
        if (bad == NULL && shape_sig[it.shape] == 0) {
            shape_sig[it.shape] = it.signature;
            shape_model[it.shape] = it.model;
        } else if (bad == NULL &&
                   (shape_sig[it.shape] != it.signature || shape_model[it.shape] != it.model)) {
            bad = "a shape index seen before with another signature or model";
        }
        if (bad != NULL) {
            wl_trace_err(err, err_len, path, lineno, "%s", bad);
            goto out;
        }
        last_t = it.t_ns;
        if (it.model + 1 > models)
            models = it.model + 1;
        if (n == cap) {
            cap = cap ? cap * 2 : (hinted && hinted <= WL_TRACE_HINT_MAX ? hinted : 4096);
            wl_item_t *g = realloc(items, cap * sizeof(*g));
            if (g == NULL) {
                wl_trace_err(err, err_len, path, lineno, "out of memory");
                goto out;
            }
            items = g;
        }
        items[n++] = it;
    }
    if (ferror(f)) {
        wl_trace_err(err, err_len, path, lineno, "read error");
        goto out;
    }
    if (c.models == 0) /* a converted trace may not say: the items do */
        c.models = models ? models : 1;
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
