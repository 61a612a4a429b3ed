/*
 * throughput.c - lanesched-bench throughput: the broker saturated and nothing else. Producers keep
 * a window of Submits in flight, consumers keep credits outstanding and ack without waiting,
 * workers serve instantly; lanesched at each durability level, then a JetStream work-queue stream
 * with file storage on the same nats-server driven as a NATS expert would, on the same number of
 * items of the same size in the same session. Each run has three phases: submit only, drain, end
 * to end. Then the fabric's ceiling: the submit-only phase answered by a responder that reads
 * nothing, what nats-server and the clients alone carry. Then, unless --no-client-check, the
 * lanesched process-level run and the JetStream run again with twice the producers and consumers: a
 * figure that rises says the bench's clients were its limit (throughput_report.c says so).
 *
 * Owns: the flags, the order of the runs, their results, the exit status.
 *
 * Invariants:
 *  1. Every run starts on a fresh daemon (net_daemon_start: a new data directory) or a fresh
 *     stream, so no run inherits another's queue, index or page cache of its items.
 *  2. Exit status: 0 when every run ran and every item travelled (token difference 0); 1 when an
 *     item was lost or failed, tokens differ or a run did not finish; 2 on usage or setup errors;
 *     130 after a signal.
 *  3. Every value is range-checked before anything starts.
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

static void tp_help(FILE *f)
{
    fputs(
        "Usage: lanesched-bench throughput [flags]\n"
        "The broker saturated: lanesched (each durability level) then a JetStream work queue\n"
        "(file storage) on one nats-server, the same items, phases submit-only / drain / end to\n"
        "end, workers that serve instantly.\n\n"
        "Items:\n"
        "  --items N            items per phase (default 200000)\n"
        "  --batch N            items per Submit (default 64)\n"
        "  --payload-bytes N    payload per item, >= 24 (default 512)\n"
        "  --tokens N           tokens per item (default 100)\n"
        "  --models N           models; producers and consumers are spread over them (default 1)\n"
        "Clients:\n"
        "  --producers N        producer threads, one connection each (default 2)\n"
        "  --window N           Submits in flight per producer; JetStream: window x batch\n"
        "                       publishes (default 32)\n"
        "  --consumers N        consumer threads, one connection each (default 4)\n"
        "  --prefetch N         batches requested ahead per consumer; JetStream: N x batch\n"
        "                       messages in pull requests (default 8)\n"
        "  --max-batch-size N   the consumers' batch; JetStream fetches this many (default 64)\n"
        "  --ack-window N       asynchronous acks in flight per consumer (default 16)\n"
        "Systems:\n"
        "  --durability L       process, power or both (default both)\n"
        "  --store S            lanesched's store: disk or memory (default disk)\n"
        "  --no-jetstream       lanesched only\n"
        "  --no-fabric          skip the fabric's ceiling: the same Submits answered by a\n"
        "                       responder that reads nothing (core NATS and the clients alone)\n"
        "  --no-client-check    skip the reruns with twice the clients\n"
        "  --reps N             every run N times (at most 9), the systems alternating; the\n"
        "                       ratios and checks use the medians (default 1)\n"
        "  --phase-timeout S    a phase not done by then fails (default 300)\n"
        "  --nats-server PATH   nats-server binary (default: nats-server on PATH)\n"
        "  --lanesched PATH     lanesched binary (default: next to this binary)\n"
        "  --prefix P           lanesched's subject prefix (default lanes)\n"
        "Output:\n"
        "  --json FILE          results as JSON\n"
        "  --keep               keep the temp directory (logs, data)\n"
        "Exit status: 0 every item travelled once with a token difference of 0; 1 an item lost\n"
        "or failed, tokens differ or a run did not finish; 2 usage or setup error.\n",
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

/* 0 to run, 1 after --help, -1 on a usage error (invariant 3). */
static int tp_args_parse(int argc, char **argv, tp_opts_t *o, char *self_bin, size_t self_len)
{
    memset(o, 0, sizeof(*o));
    *o = (tp_opts_t){.items = 200000,
                     .batch = 64,
                     .payload_bytes = 512,
                     .tokens = 100,
                     .models = 1,
                     .producers = 2,
                     .window = 32,
                     .consumers = 4,
                     .prefetch = 8,
                     .max_batch_size = 64,
                     .ack_window = 16,
                     .durability = NET_DURABILITY_PROCESS | NET_DURABILITY_POWER,
                     .store = "disk",
                     .jetstream = true,
                     .fabric = true,
                     .client_check = true,
                     .reps = 1,
                     .phase_timeout_s = 300};
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
        {"--tokens", 1, 1u << 20, offsetof(tp_opts_t, tokens)},
        {"--models", 1, 64, offsetof(tp_opts_t, models)},
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
    if (strcmp(o->store, "disk") != 0 && strcmp(o->store, "memory") != 0) {
        fprintf(stderr, "lanesched-bench throughput: --store: disk or memory\n");
        return -1;
    }
    if (o->producers < o->models || o->consumers < o->models) {
        fprintf(stderr, "lanesched-bench throughput: every model needs a producer and a "
                        "consumer (--producers and --consumers >= --models)\n");
        return -1;
    }
    return 0;
}

int tp_main(int argc, char **argv)
{
    tp_opts_t o;
    char self_bin[NET_PATH_MAX + 16], command[2048], err[512] = "";
    tp_result_t results[TP_RESULTS_MAX];
    size_t n = 0;
    int parsed = tp_args_parse(argc, argv, &o, self_bin, sizeof(self_bin));
    if (parsed != 0)
        return parsed > 0 ? 0 : 2;
    size_t at = (size_t)snprintf(command, sizeof(command), "lanesched-bench");
    for (int i = 0; i < argc && at < sizeof(command); i++)
        at += (size_t)snprintf(command + at, sizeof(command) - at, " %s", argv[i]);
    if (net_env_open(&o.net, err, sizeof(err)) != 0) {
        fprintf(stderr, "lanesched-bench throughput: %s\n", err);
        net_env_close();
        return 2;
    }
    printf("%s\nnats: %s (started by the bench, JetStream on); %" PRIu64
           " items per phase, %" PRIu32 " B payloads, %" PRIu32 " tokens, %" PRIu32 " model(s)\n",
           command, net_url(), o.items, o.payload_bytes, o.tokens, o.models);
    fflush(stdout);
    static const char *const levels[2] = {"process", "power"};
    bool setup_failed = false;
    for (uint32_t rep = 0; rep < o.reps && !net_stopping(NULL); rep++) {
        if (o.reps > 1)
            printf("\n---- run %u of %u\n", rep + 1, o.reps);
        for (int l = 0; l < 2 && !net_stopping(NULL); l++) {
            if (!(o.durability & (1u << l)))
                continue;
            setup_failed |= !tp_lanes_run(&o, levels[l], o.producers, o.consumers, &results[n]);
            tp_result_print(&results[n++], &o);
        }
        if (o.jetstream && !net_stopping(NULL)) {
            setup_failed |= !tp_js_run(&o, o.producers, o.consumers, &results[n]);
            tp_result_print(&results[n++], &o);
        }
        if (o.fabric && !net_stopping(NULL)) {
            setup_failed |= !tp_fabric_run(&o, o.producers, &results[n]);
            tp_result_print(&results[n++], &o);
        }
        if (o.client_check && !net_stopping(NULL)) {
            const char *level = o.durability & NET_DURABILITY_PROCESS ? "process" : "power";
            setup_failed |= !tp_lanes_run(&o, level, 2 * o.producers, 2 * o.consumers, &results[n]);
            tp_result_print(&results[n++], &o);
            if (o.jetstream && !net_stopping(NULL)) {
                setup_failed |= !tp_js_run(&o, 2 * o.producers, 2 * o.consumers, &results[n]);
                tp_result_print(&results[n++], &o);
            }
            if (o.fabric && !net_stopping(NULL)) {
                setup_failed |= !tp_fabric_run(&o, 2 * o.producers, &results[n]);
                tp_result_print(&results[n++], &o);
            }
        }
    }
    tp_summary_print(results, n, &o);
    bool ok = !setup_failed;
    for (size_t i = 0; i < n; i++)
        ok &= results[i].ok;
    int rc = net_stopping(NULL) ? 130 : setup_failed ? 2 : ok ? 0 : 1;
    printf("\n%s\n", rc == 0 ? "OK: every item travelled once, token difference 0"
                             : "FAILED: see the runs above");
    if (o.json_path != NULL && tp_json_write(o.json_path, command, &o, results, n, ok) != 0) {
        fprintf(stderr, "lanesched-bench throughput: cannot write %s\n", o.json_path);
        rc = rc == 0 ? 2 : rc;
    }
    net_env_close();
    return rc;
}
