/*
 * microbench.c - lanesched-microbench: the cost of the scheduling core, in process, on one core.
 *
 * What it measures, on a pre-generated population that looks like production traffic (64
 * shapes of one model, shape popularity Zipf-like with s = 1.1, prompt lengths from a mixture of
 * three log-normals clamped to [1, 32768], all drawn from the benchmark's own seeded PRNG):
 *
 *   a) lane assignment: lanes_assign + lanes_accept for every item, one lanes_t per shape with
 *      the daemon's LANES_MAX budget. Nothing drains, so lanes fill toward the cap the way they
 *      do under sustained load: WARM_PASSES fresh streams of the same size and distribution
 *      (other seeds) are assigned untimed first, then the measured stream is timed on the lanes
 *      they left. Lanes per shape at the end, and the opens and force-fits of the timed pass
 *      alone, are printed.
 *   b) baseline: a plain FIFO push then pop of the same items (a ring of {tokens, shape}). It is
 *      the cheapest thing any queueing system does per item anyway; (a) divided by it says what
 *      choosing a lane costs in units of "moving an item through a queue", which stays
 *      meaningful across machines where raw nanoseconds do not.
 *   c) the full in-memory path: sched_submit of every item (shape table, lane choice, memory
 *      store append), then sched_fill + sched_commit + sched_complete(all) for one consumer
 *      until drained. Reports submit and drain rates, padding waste, shape switches, and checks
 *      tokens_received == tokens_completed (exit 1 if not).
 *
 * Each timed section runs --reps times (default 3) on fresh state; the best run is reported, as
 * it is the one least disturbed by the rest of the machine. Generation, setup and teardown are
 * outside the timed regions.
 *
 * What it does not measure: NATS, protobuf encode/decode, signature hashing, the disk store,
 * fsync, several threads or consumers, the maintenance tick (it never runs here, so no lane is
 * quiesced), the age bound, memory per item, or queue wait. lanesched-bench measures the
 * system end to end; this tool only says whether the core can keep up with it.
 */
#include "common/clock.h"
#include "common/rng.h"
#include "common/usage.h"
#include "common/version.h"
#include "scheduler/core/sched.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_SHAPES          64u
#define ZIPF_S            1.1
#define MAX_TOKENS        32768u
#define DEFAULT_ITEMS     2000000ull
#define DEFAULT_SEED      42ull
#define DEFAULT_REPS      3u
#define TARGET_ASSIGN_RPS 10e6
#define RING_CAP          4096u /* power of two */
#define WARM_PASSES       4u    /* untimed fresh streams assigned before (a) is timed */
#define MODEL             "bench-model"

#if defined(__GNUC__)
#define MB_NOINLINE __attribute__((noinline))
#else
#define MB_NOINLINE
#endif

/* ------------------------------------------------------------------------------------------ */
/* The population.                                                                             */

typedef struct {
    uint32_t tokens;
    uint32_t shape;
} item_t;

typedef struct {
    double weight, mu, sigma;
} lognormal_t;

static const lognormal_t LENGTH_MIX[] = {
    {0.60, 5.703782474656201, 0.5}, /* ln 300: short chat turns */
    {0.30, 7.090076835776092, 0.6}, /* ln 1200: documents, RAG */
    {0.10, 8.006367567650246, 0.4}, /* ln 3000: long context */
};

static uint32_t draw_tokens(rng_t *r)
{
    double u = rng_uniform(r), acc = 0.0;
    size_t k = 0, n = sizeof(LENGTH_MIX) / sizeof(LENGTH_MIX[0]);
    for (k = 0; k + 1 < n; k++) {
        acc += LENGTH_MIX[k].weight;
        if (u < acc)
            break;
    }
    double len = exp(LENGTH_MIX[k].mu + LENGTH_MIX[k].sigma * rng_normal(r));
    if (len < 1.0)
        return 1;
    if (len > (double)MAX_TOKENS)
        return MAX_TOKENS;
    return (uint32_t)llround(len);
}

/* Zipf-like over N_SHAPES ranks: P(rank k) ~ k^-s; shape index = rank - 1. */
static item_t *generate(size_t n, uint64_t seed, uint64_t *signatures)
{
    item_t *items = malloc(n * sizeof(*items));
    if (items == NULL)
        return NULL;
    double cdf[N_SHAPES], total = 0.0;
    for (uint32_t k = 0; k < N_SHAPES; k++) {
        total += pow((double)(k + 1), -ZIPF_S);
        cdf[k] = total;
    }
    for (uint32_t k = 0; k < N_SHAPES; k++)
        cdf[k] /= total;
    cdf[N_SHAPES - 1] = 1.0;
    for (uint32_t k = 0; k < N_SHAPES; k++) {
        uint64_t st = seed ^ (0x5eedull << 32) ^ k;
        signatures[k] = rng_splitmix64(&st);
    }
    rng_t r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        items[i].shape = rng_cdf_draw(&r, cdf, N_SHAPES);
        items[i].tokens = draw_tokens(&r);
    }
    return items;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double mean_tokens;
    uint32_t p50, p99, max;
    double top_shape_share;
    uint32_t shapes_seen;
} population_t;

static int describe(const item_t *items, size_t n, population_t *out)
{
    uint32_t *len = malloc(n * sizeof(*len));
    if (len == NULL)
        return -1;
    uint64_t per_shape[N_SHAPES] = {0}, sum = 0;
    for (size_t i = 0; i < n; i++) {
        len[i] = items[i].tokens;
        sum += items[i].tokens;
        per_shape[items[i].shape]++;
    }
    qsort(len, n, sizeof(*len), cmp_u32);
    *out = (population_t){
        .mean_tokens = (double)sum / (double)n,
        .p50 = len[n / 2],
        .p99 = len[(size_t)((double)(n - 1) * 0.99)],
        .max = len[n - 1],
        .top_shape_share = (double)per_shape[0] / (double)n,
    };
    for (uint32_t k = 0; k < N_SHAPES; k++)
        out->shapes_seen += per_shape[k] != 0;
    free(len);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Timing and clocks.                                                                          */

/* The scheduler's injected clock: advances 1 µs per call, deterministic across runs. */
typedef struct {
    uint64_t now;
} fake_clock_t;

static uint64_t fake_clock(void *ctx)
{
    fake_clock_t *c = ctx;
    c->now += 1000;
    return c->now;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "lanesched-microbench: %s: %s\n", what, why);
    exit(2);
}

/* ------------------------------------------------------------------------------------------ */
/* a) lane assignment alone.                                                                   */

typedef struct {
    uint64_t best_ns;
    double lanes_mean;
    uint32_t lanes_max;
    uint32_t shapes_seen;
    uint64_t opened, reuses, force_fits;
    uint64_t timed_opened, timed_force_fits;
} assign_result_t;

static void bench_assign(const item_t *items, item_t *const *warm, size_t n, unsigned reps,
                         assign_result_t *out)
{
    *out = (assign_result_t){.best_ns = UINT64_MAX};
    for (unsigned rep = 0; rep < reps; rep++) {
        lanes_t *lanes[N_SHAPES];
        for (uint32_t k = 0; k < N_SHAPES; k++) {
            sched_status_t st = lanes_create(LANES_MAX, NULL, NULL, &lanes[k]);
            if (st != SCHED_OK)
                die("lanes_create", sched_status_str(st));
        }
        /* Warm-up, untimed: fresh streams first, so the timed pass runs on lanes that sustained
         * load has already spread out (lanes never merge, so their number only grows until the
         * maintenance tick quiesces them, and it never runs here). */
        for (unsigned w = 0; w < WARM_PASSES; w++) {
            for (size_t i = 0; i < n; i++) {
                lanes_t *l = lanes[warm[w][i].shape];
                lanes_choice_t c;
                if (lanes_assign(l, warm[w][i].tokens, &c) != SCHED_OK)
                    die("lanes_assign", "warm-up failed");
                lanes_accept(l, &c, i);
            }
        }
        uint64_t warm_opened = 0, warm_force_fits = 0;
        for (uint32_t k = 0; k < N_SHAPES; k++) {
            warm_opened += lanes_counters(lanes[k])->opened;
            warm_force_fits += lanes_counters(lanes[k])->force_fits;
        }
        uint64_t t0 = clock_mono_ns();
        for (size_t i = 0; i < n; i++) {
            lanes_t *l = lanes[items[i].shape];
            lanes_choice_t c;
            sched_status_t st = lanes_assign(l, items[i].tokens, &c);
            if (st != SCHED_OK)
                die("lanes_assign", sched_status_str(st));
            lanes_accept(l, &c, i);
        }
        uint64_t dt = clock_mono_ns() - t0;
        if (dt < out->best_ns)
            out->best_ns = dt;
        /* Every repetition ends in the same state (same items, same order). */
        uint64_t lanes_sum = 0;
        out->lanes_max = 0;
        out->shapes_seen = 0;
        out->opened = out->reuses = out->force_fits = 0;
        for (uint32_t k = 0; k < N_SHAPES; k++) {
            const lanes_counters_t *c = lanes_counters(lanes[k]);
            uint32_t in_use = lanes_in_use(lanes[k]);
            if (c->opened + c->reuses != 0) {
                out->shapes_seen++;
                lanes_sum += in_use;
            }
            if (in_use > out->lanes_max)
                out->lanes_max = in_use;
            out->opened += c->opened;
            out->reuses += c->reuses;
            out->force_fits += c->force_fits;
            lanes_destroy(lanes[k]);
        }
        out->lanes_mean = out->shapes_seen ? (double)lanes_sum / out->shapes_seen : 0.0;
        out->timed_opened = out->opened - warm_opened;
        out->timed_force_fits = out->force_fits - warm_force_fits;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* b) baseline: FIFO push then pop. Out of line, like lanes_assign/lanes_accept, so both sides   */
/* pay a call per operation and the compiler cannot fold the ring away.                        */

typedef struct {
    item_t slot[RING_CAP];
    uint32_t head, tail; /* free-running; tail - head = occupancy */
} ring_t;

MB_NOINLINE static int ring_push(ring_t *r, item_t it)
{
    if (r->tail - r->head == RING_CAP)
        return 0;
    r->slot[r->tail++ & (RING_CAP - 1)] = it;
    return 1;
}

MB_NOINLINE static int ring_pop(ring_t *r, item_t *out)
{
    if (r->tail == r->head)
        return 0;
    *out = r->slot[r->head++ & (RING_CAP - 1)];
    return 1;
}

static volatile uint64_t sink;

static uint64_t bench_fifo(const item_t *items, size_t n, unsigned reps)
{
    static ring_t ring;
    uint64_t best = UINT64_MAX;
    for (unsigned rep = 0; rep < reps; rep++) {
        ring.head = ring.tail = 0;
        uint64_t check = 0;
        uint64_t t0 = clock_mono_ns();
        for (size_t i = 0; i < n; i += RING_CAP) {
            size_t end = n - i < RING_CAP ? n : i + RING_CAP;
            for (size_t j = i; j < end; j++)
                ring_push(&ring, items[j]);
            item_t it;
            while (ring_pop(&ring, &it))
                check += it.tokens ^ it.shape;
        }
        uint64_t dt = clock_mono_ns() - t0;
        sink = check;
        if (dt < best)
            best = dt;
    }
    return best;
}

/* ------------------------------------------------------------------------------------------ */
/* c) the full in-memory path.                                                                 */

typedef struct {
    uint64_t submit_ns, drain_ns; /* best of the repetitions, each */
    uint64_t batches;
    sched_counters_t counters;
    int tokens_ok;
} full_result_t;

static void bench_full(const item_t *items, size_t n, const uint64_t *signatures, unsigned reps,
                       full_result_t *out)
{
    *out = (full_result_t){.submit_ns = UINT64_MAX, .drain_ns = UINT64_MAX, .tokens_ok = 1};
    sched_consumer_t consumer = {
        .contract = {.max_batch_size = 64, .max_batch_tokens = 65536, .max_input_tokens = 32768},
    };
    for (unsigned rep = 0; rep < reps; rep++) {
        store_t *store;
        store_status_t sst = store_open_memory(&store);
        if (sst != STORE_OK)
            die("store_open_memory", store_status_str(sst));
        fake_clock_t clk = {0};
        sched_config_t cfg = {.max_lanes = LANES_MAX, .clock = fake_clock, .clock_ctx = &clk};
        sched_t *sched;
        sched_status_t st = sched_create(&cfg, store, &sched);
        if (st != SCHED_OK)
            die("sched_create", sched_status_str(st));
        sched_model_t *model;
        if ((st = sched_model_open(sched, MODEL, &model)) != SCHED_OK)
            die("sched_model_open", sched_status_str(st));
        consumer.model = model;

        uint64_t t0 = clock_mono_ns();
        for (size_t i = 0; i < n; i++) {
            uint64_t id = i;
            sched_item_t it = {
                .model = model,
                .signature = signatures[items[i].shape],
                .tokens = items[i].tokens,
                .id = (const uint8_t *)&id,
                .id_len = sizeof(id),
            };
            st = sched_submit(sched, &it, NULL);
            if (st != SCHED_OK)
                die("sched_submit", sched_status_str(st));
        }
        uint64_t t1 = clock_mono_ns();
        uint64_t batches = 0;
        for (;;) {
            sched_batch_t b;
            st = sched_fill(sched, &consumer, &b);
            if (st == SCHED_EEMPTY)
                break;
            if (st != SCHED_OK)
                die("sched_fill", sched_status_str(st));
            st = sched_commit(sched, &b);
            if (st != SCHED_OK)
                die("sched_commit", sched_status_str(st));
            st = sched_complete(sched, b.batch_id, NULL, 0, NULL);
            if (st != SCHED_OK)
                die("sched_complete", sched_status_str(st));
            batches++;
        }
        uint64_t t2 = clock_mono_ns();

        if (t1 - t0 < out->submit_ns)
            out->submit_ns = t1 - t0;
        if (t2 - t1 < out->drain_ns)
            out->drain_ns = t2 - t1;
        out->batches = batches;
        out->counters = *sched_counters(sched);
        if (out->counters.tokens_received != out->counters.tokens_completed ||
            out->counters.items_completed != n || store_pending_count(store) != 0)
            out->tokens_ok = 0;
        sched_model_close(sched, model);
        sched_destroy(sched);
        store_close(store);
    }
}

/* ------------------------------------------------------------------------------------------ */

static double per_sec(size_t n, uint64_t ns)
{
    return ns ? (double)n * 1e9 / (double)ns : 0.0;
}

static double per_item(size_t n, uint64_t ns)
{
    return n ? (double)ns / (double)n : 0.0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lanesched-microbench [--items N] [--seed S] [--reps R] [--json]\n"
            "  --items N  items in the population (default %llu)\n"
            "  --seed S   PRNG seed (default %llu)\n"
            "  --reps R   repetitions of each timed section, best reported (default %u)\n"
            "  --json     one JSON object on stdout instead of the table\n",
            DEFAULT_ITEMS, DEFAULT_SEED, DEFAULT_REPS);
}

static uint64_t parse_u64(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, "lanesched-microbench: %s: not a number: %s\n", flag, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    uint64_t n_items = DEFAULT_ITEMS, seed = DEFAULT_SEED, reps = DEFAULT_REPS;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            version_print(stdout, "lanesched-microbench");
            return 0;
        } else if ((strcmp(a, "--items") == 0 || strcmp(a, "--seed") == 0 ||
                    strcmp(a, "--reps") == 0) &&
                   i + 1 < argc) {
            uint64_t v = parse_u64(a, argv[++i]);
            if (strcmp(a, "--items") == 0)
                n_items = v;
            else if (strcmp(a, "--seed") == 0)
                seed = v;
            else
                reps = v;
        } else {
            usage_unknown_flag("lanesched-microbench", a);
            return USAGE_EXIT;
        }
    }
    if (n_items == 0 || n_items > 1000000000ull || reps == 0 || reps > 100) {
        fprintf(stderr, "lanesched-microbench: need 1 <= --items <= 1e9, 1 <= --reps <= 100\n");
        return 2;
    }
    size_t n = (size_t)n_items;

    uint64_t signatures[N_SHAPES];
    item_t *items = generate(n, seed, signatures);
    if (items == NULL)
        die("generate", "out of memory");
    population_t pop;
    if (describe(items, n, &pop) != 0)
        die("describe", "out of memory");

    if (!json) {
        printf("lanesched-microbench: the scheduling core in process, one core, best of %u runs\n"
               "population: %zu items, seed %" PRIu64 ", 1 model, %u shapes (Zipf s=%.1f; "
               "top shape %.1f%% of items, %u shapes seen)\n"
               "  lengths: 60%% LN(ln 300, 0.5) + 30%% LN(ln 1200, 0.6) + 10%% LN(ln 3000, "
               "0.4), clamped to [1, %u]: mean %.0f, p50 %u, p99 %u, max %u tokens\n"
               "lines:\n"
               "  a) lanes_assign+lanes_accept  choosing a lane for each item, one lanes_t "
               "per shape (cap %u lanes), nothing drains\n"
               "  b) baseline FIFO push+pop     the same items through a plain ring buffer: "
               "the floor any queue pays per item\n"
               "  c) sched_submit               shape lookup + lane choice + memory-store "
               "append, per item\n"
               "     fill+commit+complete       drain: one consumer (64 items, 65536 padded "
               "tokens, 32768 max input), per item\n\n",
               (unsigned)reps, n, seed, N_SHAPES, ZIPF_S, 100.0 * pop.top_shape_share,
               pop.shapes_seen, MAX_TOKENS, pop.mean_tokens, pop.p50, pop.p99, pop.max, LANES_MAX);
        fflush(stdout);
    }

    item_t *warm[WARM_PASSES];
    for (unsigned w = 0; w < WARM_PASSES; w++) {
        uint64_t unused[N_SHAPES];
        warm[w] = generate(n, seed + 1 + w, unused);
        if (warm[w] == NULL)
            die("generate", "out of memory");
        /* the same shapes as the measured stream: signatures come from the shape index */
    }
    assign_result_t ar;
    bench_assign(items, warm, n, (unsigned)reps, &ar);
    for (unsigned w = 0; w < WARM_PASSES; w++)
        free(warm[w]);
    uint64_t fifo_ns = bench_fifo(items, n, (unsigned)reps);
    full_result_t fr;
    bench_full(items, n, signatures, (unsigned)reps, &fr);

    double assign_rps = per_sec(n, ar.best_ns);
    int target_met = assign_rps >= TARGET_ASSIGN_RPS;
    double ratio = fifo_ns ? (double)ar.best_ns / (double)fifo_ns : 0.0;
    const sched_counters_t *c = &fr.counters;
    double waste_pct = c->padded_tokens ? 100.0 * (double)(c->padded_tokens - c->real_tokens) /
                                              (double)c->padded_tokens
                                        : 0.0;
    double mean_batch = fr.batches ? (double)c->items_routed / (double)fr.batches : 0.0;

    if (json) {
        printf("{\"items\":%zu,\"seed\":%" PRIu64 ",\"reps\":%u,\"shapes\":%u,"
               "\"population\":{\"mean_tokens\":%.1f,\"p50_tokens\":%u,\"p99_tokens\":%u,"
               "\"max_tokens\":%u,\"top_shape_share\":%.4f,\"shapes_seen\":%u},"
               "\"assign\":{\"items_per_s\":%.0f,\"ns_per_item\":%.2f,\"lanes_mean\":%.1f,"
               "\"lanes_max\":%u,\"lanes_opened\":%" PRIu64 ",\"lane_reuses\":%" PRIu64
               ",\"force_fits\":%" PRIu64 ",\"target_items_per_s\":%.0f,\"target_met\":%s},"
               "\"baseline_fifo\":{\"items_per_s\":%.0f,\"ns_per_item\":%.2f},"
               "\"assign_over_baseline\":%.2f,"
               "\"full\":{\"submit_items_per_s\":%.0f,\"submit_ns_per_item\":%.2f,"
               "\"drain_items_per_s\":%.0f,\"drain_ns_per_item\":%.2f,\"batches\":%" PRIu64
               ",\"mean_batch_items\":%.2f,\"padded_tokens\":%" PRIu64 ",\"real_tokens\":%" PRIu64
               ",\"padding_waste_pct\":%.3f,\"shape_switches\":%" PRIu64
               ",\"lanes_opened\":%" PRIu64 ",\"lane_reuses\":%" PRIu64 ",\"force_fits\":%" PRIu64
               ",\"tokens_received\":%" PRIu64 ",\"tokens_completed\":%" PRIu64
               ",\"tokens_balanced\":%s}}\n",
               n, seed, (unsigned)reps, N_SHAPES, pop.mean_tokens, pop.p50, pop.p99, pop.max,
               pop.top_shape_share, pop.shapes_seen, assign_rps, per_item(n, ar.best_ns),
               ar.lanes_mean, ar.lanes_max, ar.opened, ar.reuses, ar.force_fits, TARGET_ASSIGN_RPS,
               target_met ? "true" : "false", per_sec(n, fifo_ns), per_item(n, fifo_ns), ratio,
               per_sec(n, fr.submit_ns), per_item(n, fr.submit_ns), per_sec(n, fr.drain_ns),
               per_item(n, fr.drain_ns), fr.batches, mean_batch, c->padded_tokens, c->real_tokens,
               waste_pct, c->shape_switches, c->lanes_opened, c->lane_reuses, c->force_fits,
               c->tokens_received, c->tokens_completed, fr.tokens_ok ? "true" : "false");
    } else {
        printf("%-32s %14s %10s\n", "section", "items/s", "ns/item");
        printf("%-32s %14.0f %10.2f\n", "a) lanes_assign+lanes_accept", assign_rps,
               per_item(n, ar.best_ns));
        printf("%-32s %14.0f %10.2f\n", "b) baseline FIFO push+pop", per_sec(n, fifo_ns),
               per_item(n, fifo_ns));
        printf("%-32s %14.0f %10.2f\n", "c) sched_submit", per_sec(n, fr.submit_ns),
               per_item(n, fr.submit_ns));
        printf("%-32s %14.0f %10.2f\n", "   fill+commit+complete", per_sec(n, fr.drain_ns),
               per_item(n, fr.drain_ns));
        printf("\na) lanes per shape at the end: mean %.1f, max %u (cap %u) over %u shapes; "
               "opened %" PRIu64 ", reuses %" PRIu64 ", force-fits %" PRIu64
               " (warm-up included); timed pass alone: opened %" PRIu64 ", force-fits %" PRIu64
               "\n",
               ar.lanes_mean, ar.lanes_max, LANES_MAX, ar.shapes_seen, ar.opened, ar.reuses,
               ar.force_fits, ar.timed_opened, ar.timed_force_fits);
        printf("a/b) lane assignment costs %.2fx a FIFO push+pop per item\n", ratio);
        printf("a) target >= %.0f million assignments/s: %s (%.1f million/s)\n",
               TARGET_ASSIGN_RPS / 1e6, target_met ? "MET" : "NOT MET", assign_rps / 1e6);
        printf("c) %" PRIu64 " batches, mean %.1f items; padding waste %.3f%% (padded %" PRIu64
               ", real %" PRIu64 "); shape switches %" PRIu64 "; lanes opened %" PRIu64
               ", force-fits %" PRIu64 "\n",
               fr.batches, mean_batch, waste_pct, c->padded_tokens, c->real_tokens,
               c->shape_switches, c->lanes_opened, c->force_fits);
        printf("c) tokens received %" PRIu64 ", completed %" PRIu64 ": %s\n", c->tokens_received,
               c->tokens_completed, fr.tokens_ok ? "balanced" : "MISMATCH");
    }
    free(items);
    return fr.tokens_ok ? 0 : 1;
}
