/*
 * net_args.c - the flags of `lanesched-bench live` and `lanesched-bench baseline`, and their
 * --help. Both modes share one parser so a flag means the same in each; the live-only flags
 * (--lanesched, --prefix, --durability, --baseline) are refused by baseline rather than ignored.
 *
 * Invariant: every value is range-checked here (a bad one is a usage error, exit status 2), so
 * the runs never see an out-of-range option.
 */
#include "net.h"

#include "clients/c/lanes_client.h"
#include "common/usage.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void net_help(FILE *f, bool baseline)
{
    fprintf(f,
            "Usage: lanesched-bench %s [flags]\n"
            "%s\n\n",
            baseline ? "baseline" : "live",
            baseline ? "The trace through a JetStream work-queue stream (file storage, a pull "
                       "consumer per model,\nan ack per message) with simulated GPU workers, "
                       "against a nats-server the bench starts."
                     : "The trace over NATS against lanesched (started by the bench, or --url) "
                       "with simulated\nGPU workers, at both durability levels; --baseline adds "
                       "JetStream and the items/s ratio.");
    fputs("Trace:\n"
          "  --preset NAME          steady, bursty, churn or sustained (default steady)\n"
          "  --seed N               generator seed (default 1)\n"
          "  --duration S           seconds of arrivals (default: the preset's)\n"
          "  --trace-in FILE        replay a trace file instead of generating one\n"
          "  --trace-out FILE       write the trace replayed\n"
          "System:\n"
          "  --url URL              use this nats-server instead of starting one\n"
          "  --nats-server PATH     nats-server binary (default: nats-server on PATH)\n",
          f);
    if (!baseline)
        fputs("  --lanesched PATH       lanesched binary (default: next to this binary)\n"
              "  --prefix P             lanesched's subject prefix (default lanes)\n"
              "  --durability L         process, power or both: one run each (default both;\n"
              "                         with --url the running daemon's, one run)\n"
              "  --baseline             also run the JetStream baseline on the same trace and\n"
              "                         print the end-to-end items/s ratio lanesched / JetStream\n"
              "  --policies LIST        lanesched's --policy per run: lanes, lanes-seed or both\n"
              "                         (default lanes,lanes-seed; with --url the running one's)\n"
              "  --cost declared|estimate  the workers send their cost in Register, or leave it\n"
              "                         to the daemon's estimate (default declared)\n"
              "  --slo-ms N             lanesched's wait budget (its --slo-ms): the p99 queue\n"
              "                         wait accepted (default none)\n"
              "  --vs-sim PCT           replay the trace through sim's policy of each run too\n"
              "                         (the same workers, cost, cache and budget) and fail\n"
              "                         when GPU time, waste or hit rate differ by more than\n"
              "                         PCT percent of the larger (waste and hit rate: and by\n"
              "                         more than half a point)\n",
              f);
    fputs("Load:\n"
          "  --workers N            simulated GPU workers per model (default 2)\n"
          "  --batch N              items per Submit message (JetStream: async publishes per\n"
          "                         wait for their acks) (default 16)\n"
          "  --time-scale F         wall time = trace time x F, arrivals and service (default 1)\n"
          "  --no-pace              submit as fast as acks come back, ignoring arrival times\n"
          "  --drain-timeout S      after the last submit, give up once nothing completed for\n"
          "                         S s (default 60)\n"
          "Workers (defaults: gpu.c's):\n"
          "  --max-batch-size N     --max-batch-tokens N     --max-input-tokens N\n"
          "  --batch-fixed-us N     per-batch service time\n"
          "  --ns-per-token F       service time per padded token\n"
          "  --cache-shapes N       prefix cache: LRU of the last N shapes served\n"
          "Output:\n"
          "  --json FILE            results as JSON\n"
          "  --keep                 keep the temp directory (logs, data)\n"
          "Exit status: 0 all drained with a token difference of 0; 1 tokens lost, not drained\n"
          "or items failed; 2 usage or setup error.\n",
          f);
}

/* "--flag value" or "--flag=value": 1 and *v set, 0 another flag, -1 value missing. */
static int net_flag(int argc, char **argv, int *i, const char *name, const char **v)
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
        fprintf(stderr, "lanesched-bench: %s needs a value\n", name);
        return -1;
    }
    *v = argv[++*i];
    return 1;
}

static bool net_u64_parse(const char *flag, const char *text, uint64_t min, uint64_t max,
                          uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max) {
        fprintf(stderr,
                "lanesched-bench: %s: \"%s\" is not a whole number in [%" PRIu64 ", %" PRIu64 "]\n",
                flag, text, min, max);
        return false;
    }
    *out = v;
    return true;
}

static bool net_double_parse(const char *flag, const char *text, double min, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < min) {
        fprintf(stderr, "lanesched-bench: %s: \"%s\" is not a number >= %g\n", flag, text, min);
        return false;
    }
    *out = v;
    return true;
}

int net_args_parse(int argc, char **argv, bool baseline, net_opts_t *o, char *self_dir_bin,
                   size_t self_len)
{
    static const char *const live_only[] = {"--lanesched", "--prefix", "--durability", "--baseline",
                                            "--policies",  "--cost",   "--slo-ms",     "--vs-sim"};
    memset(o, 0, sizeof(*o));
    o->preset = "steady";
    o->seed = 1;
    o->prefix = LC_DEFAULT_PREFIX;
    o->nats_server = "nats-server";
    o->durability = NET_DURABILITY_PROCESS | NET_DURABILITY_POWER;
    o->policies = NET_POLICY_LANES | NET_POLICY_SEED;
    o->declare_cost = true;
    o->workers = 2;
    o->batch = 16;
    o->time_scale = 1.0;
    o->drain_timeout_s = 60.0;
    gpu_config_default(&o->gpu);
    char self[NET_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL)
        slash[1] = '\0';
    snprintf(self_dir_bin, self_len, "%slanesched", slash != NULL ? self : "");
    o->lanesched = self_dir_bin;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        uint64_t u = 0;
        int r = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            net_help(stdout, baseline);
            return 1;
        }
        for (size_t k = 0; baseline && k < sizeof(live_only) / sizeof(live_only[0]); k++) {
            size_t len = strlen(live_only[k]);
            if (strncmp(a, live_only[k], len) == 0 && (a[len] == '\0' || a[len] == '=')) {
                fprintf(stderr, "lanesched-bench baseline: %s is a live flag\n", live_only[k]);
                return -1;
            }
        }
#define NET_VALUE(name) ((r = net_flag(argc, argv, &i, name, &v)) != 0)
        if (strcmp(a, "--no-pace") == 0) {
            o->no_pace = true;
        } else if (strcmp(a, "--baseline") == 0) {
            o->baseline = true;
        } else if (strcmp(a, "--keep") == 0) {
            o->keep = true;
        } else if (NET_VALUE("--preset")) {
            o->preset = v;
        } else if (NET_VALUE("--seed")) {
            if (r < 0 || !net_u64_parse(a, v, 0, UINT64_MAX, &o->seed))
                return -1;
        } else if (NET_VALUE("--duration")) {
            if (r < 0 || !net_double_parse("--duration", v, 0.001, &o->duration_s))
                return -1;
        } else if (NET_VALUE("--trace-in")) {
            o->trace_in = v;
        } else if (NET_VALUE("--trace-out")) {
            o->trace_out = v;
        } else if (NET_VALUE("--url")) {
            o->url = v;
        } else if (NET_VALUE("--nats-server")) {
            o->nats_server = v;
        } else if (NET_VALUE("--lanesched")) {
            o->lanesched = v;
        } else if (NET_VALUE("--prefix")) {
            o->prefix = v;
        } else if (NET_VALUE("--durability")) {
            if (r < 0)
                return -1;
            o->durability = strcmp(v, "process") == 0 ? NET_DURABILITY_PROCESS
                            : strcmp(v, "power") == 0 ? NET_DURABILITY_POWER
                            : strcmp(v, "both") == 0 ? NET_DURABILITY_PROCESS | NET_DURABILITY_POWER
                                                     : 0;
            if (o->durability == 0) {
                fprintf(stderr, "lanesched-bench: --durability: process, power or both\n");
                return -1;
            }
        } else if (NET_VALUE("--policies")) {
            if (r < 0)
                return -1;
            o->policies = 0;
            char buf[64];
            snprintf(buf, sizeof(buf), "%s", v);
            char *save = NULL;
            for (char *w = strtok_r(buf, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
                unsigned bit = strcmp(w, "lanes") == 0        ? NET_POLICY_LANES
                               : strcmp(w, "lanes-seed") == 0 ? NET_POLICY_SEED
                                                              : 0;
                if (bit == 0) {
                    fprintf(stderr, "lanesched-bench: --policies: lanes, lanes-seed\n");
                    return -1;
                }
                o->policies |= bit;
            }
        } else if (NET_VALUE("--cost")) {
            if (r < 0)
                return -1;
            if (strcmp(v, "declared") != 0 && strcmp(v, "estimate") != 0) {
                fprintf(stderr, "lanesched-bench: --cost: declared or estimate\n");
                return -1;
            }
            o->declare_cost = strcmp(v, "declared") == 0;
        } else if (NET_VALUE("--vs-sim")) {
            if (r < 0 || !net_double_parse("--vs-sim", v, 0.001, &o->vs_sim_pct))
                return -1;
        } else if (NET_VALUE("--slo-ms")) {
            if (r < 0 || !net_u64_parse("--slo-ms", v, 1, UINT32_MAX, &u))
                return -1;
            o->slo_ms = (uint32_t)u;
        } else if (NET_VALUE("--workers")) {
            if (r < 0 || !net_u64_parse("--workers", v, 1, 256, &u))
                return -1;
            o->workers = (uint32_t)u;
        } else if (NET_VALUE("--batch")) {
            if (r < 0 || !net_u64_parse("--batch", v, 1, 4096, &u))
                return -1;
            o->batch = (uint32_t)u;
        } else if (NET_VALUE("--time-scale")) {
            if (r < 0 || !net_double_parse("--time-scale", v, 0.0, &o->time_scale))
                return -1;
        } else if (NET_VALUE("--drain-timeout")) {
            if (r < 0 || !net_double_parse("--drain-timeout", v, 0.0, &o->drain_timeout_s))
                return -1;
        } else if (NET_VALUE("--max-batch-size")) {
            if (r < 0 || !net_u64_parse("--max-batch-size", v, 1, 65536, &u))
                return -1;
            o->gpu.max_batch_size = (uint32_t)u;
        } else if (NET_VALUE("--max-batch-tokens")) {
            if (r < 0 || !net_u64_parse("--max-batch-tokens", v, 1, UINT32_MAX, &u))
                return -1;
            o->gpu.max_batch_tokens = (uint32_t)u;
        } else if (NET_VALUE("--max-input-tokens")) {
            if (r < 0 || !net_u64_parse("--max-input-tokens", v, 0, UINT32_MAX, &u))
                return -1;
            o->gpu.max_input_tokens = (uint32_t)u;
        } else if (NET_VALUE("--batch-fixed-us")) {
            if (r < 0 || !net_u64_parse("--batch-fixed-us", v, 0, 3600000000ull, &u))
                return -1;
            o->gpu.batch_fixed_ns = u * 1000u;
        } else if (NET_VALUE("--ns-per-token")) {
            if (r < 0 || !net_double_parse("--ns-per-token", v, 0.0, &o->gpu.ns_per_padded_token))
                return -1;
        } else if (NET_VALUE("--cache-shapes")) {
            if (r < 0 || !net_u64_parse("--cache-shapes", v, 0, 1024, &u))
                return -1;
            o->gpu.cache_shapes = (uint32_t)u;
        } else if (NET_VALUE("--json")) {
            o->json_path = v;
        } else {
            if (r < 0)
                return -1;
            usage_unknown_flag("lanesched-bench", a);
            return -1;
        }
        if (r < 0)
            return -1;
#undef NET_VALUE
    }
    if (o->vs_sim_pct > 0 && (o->time_scale != 1.0 || o->no_pace || o->url != NULL)) {
        /* the sim runs on the trace's clock, and the daemon's hold and budget on the wall's */
        fprintf(stderr, "lanesched-bench: --vs-sim needs --time-scale 1, pacing and a daemon the "
                        "bench starts\n");
        return -1;
    }
    return 0;
}
