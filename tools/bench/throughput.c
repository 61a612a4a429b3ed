/*
 * throughput.c - lanesched-bench throughput: the broker saturated and nothing else. Producers keep
 * a window of Submits in flight, consumers keep credits outstanding and ack without waiting,
 * workers serve instantly; lanesched at each durability level, then a JetStream work-queue stream
 * with file storage on the same nats-server driven at its best (the settings of a grid's best
 * cell, throughput_grid.c), on the same number of items of the same size in the same session.
 * The items are the realistic workload by default (throughput_workload.c: models, Zipf shapes,
 * log-normal lengths), or the uniform one, the best case, with --workload uniform; --shapes
 * A,B,C runs lanesched at each number of shapes per model. Each run has three phases: submit
 * only, drain, end to end. Then the fabric's ceiling: the submit-only phase answered by a
 * responder that reads nothing, what nats-server and the clients alone carry. Then, unless
 * --no-client-check, the lanesched process-level run again with twice the producers and
 * consumers (JetStream's too when there is no grid): a figure that rises says the bench's
 * clients were its limit (throughput_report.c says so). Last, with --queue-probe N, lanesched's
 * memory with N items queued.
 *
 * Owns: the flags, the order of the runs, their results, the exit status.
 *
 * Invariants:
 *  1. Every run starts on a fresh daemon (net_daemon_start: a new data directory) or a fresh
 *     stream, so no run inherits another's queue, index or page cache of its items.
 *  2. Exit status: 0 when every run ran and every item travelled once (token difference 0, no
 *     batch broke its contract); 1 when an item was lost, duplicated or failed, tokens differ, a
 *     batch broke the contract or a run did not finish; 2 on usage or setup errors; 130 after a
 *     signal. A grid cell that fails is reported and cannot win, but does not fail the bench: it
 *     measures a JetStream setting, not lanesched.
 *  3. Every value is range-checked before anything starts.
 *  4. JetStream and the fabric are shape-blind (a JetStream message carries the payload alone),
 *     so they run once per rep on the first point's items, and every point's ratios divide by
 *     the same JetStream figures.
 *
 * Rejected alternatives:
 *  - Reusing live mode with --no-pace and zero service time (the previous "bare broker" figure):
 *    its clients wait for every SubmitReply and every AckReply, so it measured the clients.
 *  - A fixed duration instead of a fixed item count: a count lets every item be checked for loss
 *    and duplication, and both systems move exactly the same items.
 */
#include "throughput.h"

#include "clients/c/lanes_client.h"
#include "throughput_int.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The realistic workload's defaults: the traffic the throughput targets name (at least 2 models,
 * 64 shapes per model with Zipf popularity, caches of 2-4 shapes) with a contract a GPU worker
 * of a few hundred tokens per prompt would declare (64 items, 32,768 padded tokens: a batch of
 * the median length fills the item count, the 8,192-token tail goes four at a time). */
#define TP_REALISTIC_MODELS       2u
#define TP_REALISTIC_SHAPES       64u
#define TP_REALISTIC_CACHE_LO     2u
#define TP_REALISTIC_CACHE_HI     4u
#define TP_REALISTIC_BATCH_TOKENS 32768u
/* Items a producer keeps in flight unless --window is given: the window in Submits is this over
 * --batch (32 Submits of 64 items). A fixed count of Submits would leave a producer of one-item
 * Submits 32 items in flight, bound by round trips, while JetStream's grid gives its publishers
 * 512-4,096 (`throughput --batch 1 --window 32|512|2048`, docs/throughput.md, "One-item
 * Submits"). */
#define TP_ITEMS_IN_FLIGHT 2048u
/* The daemon's default --limit-shapes-per-model and --limit-shapes: more would be refused. */
#define TP_SHAPES_MAX       4096u
#define TP_SHAPES_TOTAL_MAX 16384u

static void tp_help(FILE *f)
{
    fputs(
        "Usage: lanesched-bench throughput [flags]\n"
        "The broker saturated: lanesched (each durability level) then a JetStream work queue\n"
        "(file storage) driven at its best on one nats-server, the same items, phases\n"
        "submit-only / drain / end to end, workers that serve instantly.\n\n"
        "Workload (default realistic):\n"
        "  --workload W         realistic, or uniform: one shape per model, --tokens each (the\n"
        "                       best case, labelled so in every report)\n"
        "  --shapes N[,N...]    shapes per model; a list runs lanesched at each (at most 4, e.g.\n"
        "                       8,64,256); JetStream is shape-blind and runs once (default 64)\n"
        "  --models N           models, Submit chunks go round them (default 2; uniform 1)\n"
        "  --zipf S             shape popularity: rank k weighs k^-S (default 1)\n"
        "  --lengths SPEC       item tokens: lognormal[:MEDIAN[:SIGMA[:MAX]]] (each shape its own\n"
        "                       median around MEDIAN, default lognormal:300:0.9:8192),\n"
        "                       uniform:LO:HI, fixed:N\n"
        "  --tokens N           the same as --lengths fixed:N (uniform: default 100)\n"
        "  --payload-bytes N    payload per item, >= 24 (default 512)\n"
        "  --seed N             the workload's seed (default 1)\n"
        "  --items N            items per phase (default 200000)\n"
        "  --batch N            items per Submit (default 64)\n"
        "Clients:\n"
        "  --producers N        producer threads, one connection each (default 8)\n"
        "  --window N           Submits in flight per producer (default 2048 items: 2048 /\n"
        "                       --batch, 32 at the default --batch)\n"
        "  --consumers N        consumer threads, one connection each, >= --models (default 16)\n"
        "  --prefetch N         batches requested ahead per consumer (default 8)\n"
        "  --max-batch-size N   the consumers' batch size (default 64)\n"
        "  --max-batch-tokens N the consumers' padded tokens per batch (default 32768; uniform:\n"
        "                       max-batch-size x the length rounded up to 8)\n"
        "  --cache-shapes LO[-HI]  Register.cache_shapes: a model's consumer k declares\n"
        "                       LO + k % (HI - LO + 1); 0 declares none (default 2-4; uniform 0)\n"
        "  --ack-window N       asynchronous acks in flight per consumer (default 16)\n"
        "JetStream:\n"
        "  --js-grid G          quick (default): producers 1/2/4 x consumers 1/2/4/8, then fetch\n"
        "                       64/256 x window 512/4096 at the best (15 cells); full: all 48;\n"
        "                       off: --producers, --consumers, fetch --max-batch-size,\n"
        "                       --prefetch x --max-batch-size requested, --window x --batch\n"
        "                       publishes in flight\n"
        "  --js-grid-items N    items of a grid cell, end to end only (default 50000; 0 = "
        "--items)\n"
        "Systems:\n"
        "  --durability L       process, power or both (default both)\n"
        "  --store S            lanesched's store: disk or memory (default disk)\n"
        "  --no-jetstream       lanesched only\n"
        "  --no-fabric          skip the fabric's ceiling: the same Submits answered by a\n"
        "                       responder that reads nothing (core NATS and the clients alone)\n"
        "  --no-client-check    skip the reruns with twice the clients\n"
        "  --queue-probe N      also queue N items in a lanesched (process level, first point)\n"
        "                       and report its memory per queued item (e.g. 1000000)\n"
        "  --reps N             every run N times (at most 9), the systems alternating; the\n"
        "                       ratios and checks use the medians (default 1)\n"
        "  --phase-timeout S    a phase not done by then fails (default 300)\n"
        "  --nats-server PATH   nats-server binary (default: nats-server on PATH)\n"
        "  --lanesched PATH     lanesched binary (default: next to this binary)\n"
        "  --prefix P           lanesched's subject prefix (default lanes)\n"
        "Output:\n"
        "  --json FILE          results as JSON\n"
        "  --keep               keep the temp directory (logs, data)\n"
        "Exit status: 0 every item travelled once with a token difference of 0; 1 an item lost,\n"
        "duplicated or failed, a batch against its contract, tokens differ or a run did not\n"
        "finish; 2 usage or setup error.\n",
        f);
}

static int tp_value(int argc, char **argv, int *i, const char *name, const char **v)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *v = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "lanesched-bench throughput: %s needs a value\n", name);
        return -1;
    }
    *v = argv[++*i];
    return 1;
}

static bool tp_u64(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max) {
        fprintf(stderr,
                "lanesched-bench throughput: %s: \"%s\" is not a whole number in [%" PRIu64
                ", %" PRIu64 "]\n",
                flag, text, min, max);
        return false;
    }
    *out = v;
    return true;
}

static bool tp_u32(const char *flag, const char *text, uint64_t min, uint64_t max, uint32_t *out)
{
    uint64_t v;
    if (!tp_u64(flag, text, min, max, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool tp_list_parse(const char *text, tp_opts_t *o)
{
    const char *p = text;
    o->n_shapes = 0;
    for (;;) {
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (errno != 0 || end == p || *p == '-' || v < 1 || v > TP_SHAPES_MAX ||
            o->n_shapes == TP_POINTS_MAX || (*end != ',' && *end != '\0'))
            return false;
        o->shapes[o->n_shapes++] = (uint32_t)v;
        if (*end == '\0')
            return true;
        p = end + 1;
    }
}

static bool tp_cache_parse(const char *text, tp_opts_t *o)
{
    unsigned lo = 0, hi = 0;
    char tail;
    int n = sscanf(text, "%u-%u%c", &lo, &hi, &tail);
    if (n == 1 && strchr(text, '-') == NULL)
        hi = lo;
    else if (n != 2)
        return false;
    if (text[0] == '-' || hi < lo || hi > 1024 || (lo == 0 && hi != 0))
        return false;
    o->cache_lo = lo;
    o->cache_hi = hi;
    return true;
}

/* 0 to run, 1 after --help, -1 on a usage error (invariant 3). */
static int tp_args_parse(int argc, char **argv, tp_opts_t *o, char *self_bin, size_t self_len)
{
    memset(o, 0, sizeof(*o));
    *o = (tp_opts_t){.items = 200000,
                     .batch = 64,
                     .payload_bytes = 512,
                     .tokens = 100,
                     /* The clients lanesched is driven with: the fewest whose double no longer
                      * raises the end-to-end figure on the realistic workload (the client check;
                      * `throughput --reps 3 --producers P --consumers C`, docs/throughput.md), as
                      * JetStream's grid finds its own best. */
                     .producers = 8,
                     .window = 0, /* --window, or TP_ITEMS_IN_FLIGHT / --batch */
                     .consumers = 16,
                     .prefetch = 8,
                     .max_batch_size = 64,
                     .ack_window = 16,
                     .zipf_s = 1.0,
                     .seed = 1,
                     .durability = NET_DURABILITY_PROCESS | NET_DURABILITY_POWER,
                     .store = "disk",
                     .jetstream = true,
                     .fabric = true,
                     .client_check = true,
                     .js_grid = TP_GRID_QUICK,
                     .js_grid_items = 50000,
                     .reps = 1,
                     .phase_timeout_s = 300};
    /* set by a flag, or the workload's default once every flag is read */
    bool set_models = false, set_shapes = false, set_lengths = false, set_tokens = false;
    bool set_cache = false, set_zipf = false, set_mbt = false;
    o->net.prefix = LC_DEFAULT_PREFIX;
    o->net.nats_server = "nats-server";
    char self[NET_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL)
        slash[1] = '\0';
    snprintf(self_bin, self_len, "%slanesched", slash != NULL ? self : "");
    o->net.lanesched = self_bin;
    static const struct {
        const char *name;
        uint64_t lo, hi;
        size_t at;
    } u32s[] = {
        {"--batch", 1, 10000, offsetof(tp_opts_t, batch)},
        {"--payload-bytes", TP_HEADER_LEN, 1u << 20, offsetof(tp_opts_t, payload_bytes)},
        {"--producers", 1, 256, offsetof(tp_opts_t, producers)},
        {"--window", 1, 4096, offsetof(tp_opts_t, window)},
        {"--consumers", 1, 256, offsetof(tp_opts_t, consumers)},
        {"--prefetch", 1, 1024, offsetof(tp_opts_t, prefetch)},
        {"--max-batch-size", 1, 100000, offsetof(tp_opts_t, max_batch_size)},
        {"--ack-window", 1, 4096, offsetof(tp_opts_t, ack_window)},
        {"--reps", 1, TP_REPS_MAX, offsetof(tp_opts_t, reps)},
    };
    static const struct {
        const char *name;
        size_t at;
    } strs[] = {
        {"--json", offsetof(tp_opts_t, json_path)},
        {"--nats-server", offsetof(tp_opts_t, net) + offsetof(net_opts_t, nats_server)},
        {"--lanesched", offsetof(tp_opts_t, net) + offsetof(net_opts_t, lanesched)},
        {"--prefix", offsetof(tp_opts_t, net) + offsetof(net_opts_t, prefix)},
        {"--store", offsetof(tp_opts_t, store)},
    };
    const char *workload = "realistic";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        uint64_t u = 0;
        int r = 0;
        bool known = false;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tp_help(stdout);
            return 1;
        }
        if (strcmp(a, "--no-jetstream") == 0 || strcmp(a, "--no-client-check") == 0 ||
            strcmp(a, "--no-fabric") == 0 || strcmp(a, "--keep") == 0) {
            o->jetstream &= strcmp(a, "--no-jetstream") != 0;
            o->fabric &= strcmp(a, "--no-fabric") != 0;
            o->client_check &= strcmp(a, "--no-client-check") != 0;
            o->net.keep |= strcmp(a, "--keep") == 0;
            continue;
        }
        for (size_t k = 0; !known && k < sizeof(u32s) / sizeof(u32s[0]); k++) {
            if ((r = tp_value(argc, argv, &i, u32s[k].name, &v)) == 0)
                continue;
            if (r < 0 || !tp_u32(u32s[k].name, v, u32s[k].lo, u32s[k].hi,
                                 (uint32_t *)((char *)o + u32s[k].at)))
                return -1;
            known = true;
        }
        for (size_t k = 0; !known && k < sizeof(strs) / sizeof(strs[0]); k++) {
            if ((r = tp_value(argc, argv, &i, strs[k].name, &v)) == 0)
                continue;
            if (r < 0)
                return -1;
            *(const char **)((char *)o + strs[k].at) = v;
            known = true;
        }
        if (known)
            continue;
        if ((r = tp_value(argc, argv, &i, "--items", &v)) != 0) {
            if (r < 0 || !tp_u64(a, v, 1, 100000000, &o->items))
                return -1;
        } else if ((r = tp_value(argc, argv, &i, "--tokens", &v)) != 0) {
            if (r < 0 || !tp_u32(a, v, 1, 1u << 20, &o->tokens))
                return -1;
            set_tokens = true;
        } else if ((r = tp_value(argc, argv, &i, "--models", &v)) != 0) {
            if (r < 0 || !tp_u32(a, v, 1, 64, &o->models))
                return -1;
            set_models = true;
        } else if ((r = tp_value(argc, argv, &i, "--max-batch-tokens", &v)) != 0) {
            if (r < 0 || !tp_u32(a, v, 8, 4194304, &o->max_batch_tokens))
                return -1;
            set_mbt = true;
        } else if ((r = tp_value(argc, argv, &i, "--seed", &v)) != 0) {
            if (r < 0 || !tp_u64(a, v, 0, UINT64_MAX, &o->seed))
                return -1;
        } else if ((r = tp_value(argc, argv, &i, "--js-grid-items", &v)) != 0) {
            if (r < 0 || !tp_u64(a, v, 0, 100000000, &o->js_grid_items))
                return -1;
        } else if ((r = tp_value(argc, argv, &i, "--queue-probe", &v)) != 0) {
            if (r < 0 || !tp_u64(a, v, 0, 100000000, &o->queue_probe))
                return -1;
        } else if ((r = tp_value(argc, argv, &i, "--shapes", &v)) != 0) {
            if (r < 0)
                return -1;
            if (!tp_list_parse(v, o)) {
                fprintf(stderr,
                        "lanesched-bench throughput: --shapes: up to %u numbers in [1, %u], "
                        "comma-separated\n",
                        TP_POINTS_MAX, TP_SHAPES_MAX);
                return -1;
            }
            set_shapes = true;
        } else if ((r = tp_value(argc, argv, &i, "--zipf", &v)) != 0) {
            char *end = NULL;
            if (r < 0)
                return -1;
            o->zipf_s = strtod(v, &end);
            if (end == v || *end != '\0' || !(o->zipf_s >= 0 && o->zipf_s <= 10)) {
                fprintf(stderr, "lanesched-bench throughput: --zipf: a number in [0, 10]\n");
                return -1;
            }
            set_zipf = true;
        } else if ((r = tp_value(argc, argv, &i, "--lengths", &v)) != 0) {
            if (r < 0)
                return -1;
            if (!tp_lengths_parse(v, &o->lengths)) {
                fprintf(stderr, "lanesched-bench throughput: --lengths: fixed:N, uniform:LO:HI or "
                                "lognormal[:MEDIAN[:SIGMA[:MAX]]] (see --help)\n");
                return -1;
            }
            set_lengths = true;
        } else if ((r = tp_value(argc, argv, &i, "--cache-shapes", &v)) != 0) {
            if (r < 0)
                return -1;
            if (!tp_cache_parse(v, o)) {
                fprintf(stderr, "lanesched-bench throughput: --cache-shapes: N or LO-HI in [0, "
                                "1024] (0: not declared)\n");
                return -1;
            }
            set_cache = true;
        } else if ((r = tp_value(argc, argv, &i, "--workload", &v)) != 0) {
            if (r < 0)
                return -1;
            if (strcmp(v, "realistic") != 0 && strcmp(v, "uniform") != 0) {
                fprintf(stderr, "lanesched-bench throughput: --workload: realistic or uniform\n");
                return -1;
            }
            workload = v;
        } else if ((r = tp_value(argc, argv, &i, "--js-grid", &v)) != 0) {
            if (r < 0)
                return -1;
            o->js_grid = strcmp(v, "off") == 0     ? TP_GRID_OFF
                         : strcmp(v, "quick") == 0 ? TP_GRID_QUICK
                         : strcmp(v, "full") == 0  ? TP_GRID_FULL
                                                   : (tp_grid_mode_t)-1;
            if ((int)o->js_grid < 0) {
                fprintf(stderr, "lanesched-bench throughput: --js-grid: quick, full or off\n");
                return -1;
            }
        } else if ((r = tp_value(argc, argv, &i, "--phase-timeout", &v)) != 0) {
            if (r < 0 || !tp_u64(a, v, 1, 86400, &u))
                return -1;
            o->phase_timeout_s = (double)u;
        } else if ((r = tp_value(argc, argv, &i, "--durability", &v)) != 0) {
            if (r < 0)
                return -1;
            o->durability = strcmp(v, "process") == 0 ? NET_DURABILITY_PROCESS
                            : strcmp(v, "power") == 0 ? NET_DURABILITY_POWER
                            : strcmp(v, "both") == 0 ? NET_DURABILITY_PROCESS | NET_DURABILITY_POWER
                                                     : 0;
            if (o->durability == 0) {
                fprintf(stderr, "lanesched-bench throughput: --durability: process, power or "
                                "both\n");
                return -1;
            }
        } else {
            fprintf(stderr, "lanesched-bench throughput: unknown flag %s (see --help)\n", a);
            return -1;
        }
    }
    o->uniform = strcmp(workload, "uniform") == 0;
    if (o->uniform && (set_shapes || set_lengths || set_cache || set_zipf)) {
        fprintf(stderr, "lanesched-bench throughput: --workload uniform is one shape per model "
                        "and one length (--tokens): --shapes, --lengths, --zipf and "
                        "--cache-shapes are the realistic workload's\n");
        return -1;
    }
    if (set_tokens && set_lengths) {
        fprintf(stderr, "lanesched-bench throughput: --tokens N is --lengths fixed:N: one of "
                        "them\n");
        return -1;
    }
    if (o->window == 0) {
        uint32_t w = (TP_ITEMS_IN_FLIGHT + o->batch - 1) / o->batch; /* at least 1 */
        o->window = w > 4096 ? 4096 : w;
    }
    if (!set_models)
        o->models = o->uniform ? 1 : TP_REALISTIC_MODELS;
    if (!set_shapes) {
        o->n_shapes = 1;
        o->shapes[0] = o->uniform ? 1 : TP_REALISTIC_SHAPES;
    }
    if (o->uniform || set_tokens)
        o->lengths =
            (tp_lengths_t){.kind = TP_LEN_FIXED, .a = o->tokens, .b = o->tokens, .max = o->tokens};
    else if (!set_lengths)
        tp_lengths_parse("lognormal", &o->lengths);
    if (!set_cache && !o->uniform) {
        o->cache_lo = TP_REALISTIC_CACHE_LO;
        o->cache_hi = TP_REALISTIC_CACHE_HI;
    }
    if (!set_mbt && !o->uniform)
        o->max_batch_tokens = TP_REALISTIC_BATCH_TOKENS;
    if (strcmp(o->store, "disk") != 0 && strcmp(o->store, "memory") != 0) {
        fprintf(stderr, "lanesched-bench throughput: --store: disk or memory\n");
        return -1;
    }
    if (o->consumers < o->models) {
        fprintf(stderr, "lanesched-bench throughput: every model needs a consumer (--consumers "
                        ">= --models)\n");
        return -1;
    }
    for (uint32_t k = 0; k < o->n_shapes; k++)
        if ((uint64_t)o->models * o->shapes[k] > TP_SHAPES_TOTAL_MAX) {
            fprintf(stderr,
                    "lanesched-bench throughput: %u models x %u shapes is over the daemon's "
                    "--limit-shapes %u\n",
                    o->models, o->shapes[k], TP_SHAPES_TOTAL_MAX);
            return -1;
        }
    return 0;
}

/* One rep: every point's lanesched runs, JetStream at the grid's winner, the fabric, the client
 * check (invariant 4: JetStream and the fabric on the first point's items). */
static bool tp_rep_run(const tp_opts_t *o, const tp_workload_t *wls, const tp_js_cfg_t *winner,
                       tp_result_t *results, size_t *n)
{
    static const char *const levels[2] = {"process", "power"};
    bool setup_failed = false;
    for (uint32_t k = 0; k < o->n_shapes && !net_stopping(NULL); k++)
        for (int l = 0; l < 2 && !net_stopping(NULL); l++) {
            if (!(o->durability & (1u << l)))
                continue;
            setup_failed |= !tp_lanes_run(o, &wls[k], levels[l], o->producers, o->consumers,
                                          TP_ROLE_MAIN, 0, &results[*n]);
            tp_result_print(&results[(*n)++], o);
        }
    if (o->jetstream && !net_stopping(NULL)) {
        setup_failed |= !tp_js_run(o, &wls[0], winner, TP_ROLE_MAIN, o->items, &results[*n]);
        tp_result_print(&results[(*n)++], o);
    }
    if (o->fabric && !net_stopping(NULL)) {
        setup_failed |= !tp_fabric_run(o, &wls[0], o->producers, TP_ROLE_MAIN, &results[*n]);
        tp_result_print(&results[(*n)++], o);
    }
    if (o->client_check && !net_stopping(NULL)) {
        const char *level = o->durability & NET_DURABILITY_PROCESS ? "process" : "power";
        setup_failed |= !tp_lanes_run(o, &wls[0], level, 2 * o->producers, 2 * o->consumers,
                                      TP_ROLE_CLIENTS, 0, &results[*n]);
        tp_result_print(&results[(*n)++], o);
        if (o->jetstream && o->js_grid == TP_GRID_OFF && !net_stopping(NULL)) {
            tp_js_cfg_t twice = *winner;
            twice.producers *= 2;
            twice.consumers *= 2;
            setup_failed |= !tp_js_run(o, &wls[0], &twice, TP_ROLE_CLIENTS, o->items, &results[*n]);
            tp_result_print(&results[(*n)++], o);
        }
        if (o->fabric && !net_stopping(NULL)) {
            setup_failed |=
                !tp_fabric_run(o, &wls[0], 2 * o->producers, TP_ROLE_CLIENTS, &results[*n]);
            tp_result_print(&results[(*n)++], o);
        }
    }
    return !setup_failed;
}

int tp_main(int argc, char **argv)
{
    tp_opts_t o;
    char self_bin[NET_PATH_MAX + 16], command[2048], err[512] = "", what[256], lengths[64];
    tp_workload_t wls[TP_POINTS_MAX];
    size_t n = 0, n_cells = 0, n_wls = 0;
    tp_js_cfg_t winner;
    int rc = 2;
    bool env = false;
    int parsed = tp_args_parse(argc, argv, &o, self_bin, sizeof(self_bin));
    if (parsed != 0)
        return parsed > 0 ? 0 : 2;
    tp_result_t *results = calloc(TP_RESULTS_MAX, sizeof(*results));
    tp_result_t *cells = calloc(TP_GRID_MAX, sizeof(*cells));
    if (results == NULL || cells == NULL) {
        fprintf(stderr, "lanesched-bench throughput: out of memory\n");
        goto out;
    }
    for (; n_wls < o.n_shapes; n_wls++)
        if (tp_workload_init(&wls[n_wls], &o, o.shapes[n_wls]) != 0) {
            fprintf(stderr, "lanesched-bench throughput: out of memory\n");
            goto out;
        }
    tp_js_cfg_default(&o, &winner);
    size_t at = (size_t)snprintf(command, sizeof(command), "lanesched-bench");
    for (int i = 0; i < argc && at < sizeof(command); i++)
        at += (size_t)snprintf(command + at, sizeof(command) - at, " %s", argv[i]);
    env = true;
    if (net_env_open(&o.net, err, sizeof(err)) != 0) {
        fprintf(stderr, "lanesched-bench throughput: %s\n", err);
        goto out;
    }
    tp_workload_describe(&wls[0], &o, what, sizeof(what));
    tp_lengths_format(&o.lengths, lengths, sizeof(lengths));
    printf("%s\nnats: %s (started by the bench, JetStream on); %" PRIu64
           " items per phase, %" PRIu32 " B payloads\nworkload: %s",
           command, net_url(), o.items, o.payload_bytes, what);
    if (o.n_shapes > 1) {
        printf("; lanesched at");
        for (uint32_t k = 0; k < o.n_shapes; k++)
            printf("%s %u", k ? "," : "", o.shapes[k]);
        printf(" shapes per model");
    }
    printf("\nconsumers' contract: %" PRIu32 " items, %" PRIu32 " padded tokens per batch",
           o.max_batch_size, tp_max_batch_tokens(&o));
    if (o.cache_lo > 0)
        printf(", prefix caches of %u-%u shapes (Register.cache_shapes)", o.cache_lo, o.cache_hi);
    printf("\n");
    fflush(stdout);
    bool setup_ok = true;
    for (uint32_t rep = 0; rep < o.reps && !net_stopping(NULL); rep++) {
        if (rep == 0 && o.jetstream) {
            tp_grid_run(&o, &wls[0], cells, &n_cells, &winner);
            tp_grid_print(cells, n_cells, &winner);
        }
        if (o.reps > 1)
            printf("\n---- run %u of %u\n", rep + 1, o.reps);
        setup_ok &= tp_rep_run(&o, wls, &winner, results, &n);
    }
    if (o.queue_probe > 0 && !net_stopping(NULL)) {
        const char *level = o.durability & NET_DURABILITY_PROCESS ? "process" : "power";
        setup_ok &= tp_lanes_run(&o, &wls[0], level, o.producers, 0, TP_ROLE_PROBE, o.queue_probe,
                                 &results[n]);
        tp_result_print(&results[n++], &o);
    }
    tp_summary_print(results, n, cells, n_cells, &o);
    bool ok = setup_ok;
    for (size_t i = 0; i < n; i++)
        ok &= results[i].ok;
    rc = net_stopping(NULL) ? 130 : !setup_ok ? 2 : ok ? 0 : 1;
    printf("\n%s\n", rc == 0 ? "OK: every item travelled once, token difference 0"
                             : "FAILED: see the runs above");
    if (o.json_path != NULL &&
        tp_json_write(o.json_path, command, &o, results, n, cells, n_cells, &winner, ok) != 0) {
        fprintf(stderr, "lanesched-bench throughput: cannot write %s\n", o.json_path);
        rc = rc == 0 ? 2 : rc;
    }
out:
    if (env)
        net_env_close();
    for (size_t k = 0; k < n_wls; k++)
        tp_workload_free(&wls[k]);
    free(results);
    free(cells);
    return rc;
}
