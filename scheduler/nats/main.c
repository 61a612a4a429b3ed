/*
 * main.c - the lanesched daemon: flags and their environment variables, signals.
 *
 * Invariants:
 *   1. Every flag has an environment variable LANESCHED_<FLAG> (upper case, '-' as '_'); a flag
 *      on the command line wins over the environment, which wins over the default.
 *   2. SIGTERM and SIGINT stop taking work (unsubscribe), let the owner finish its turn and
 *      flush, then close the store: pending items come back on the next start.
 *   3. Signals are taken by one thread with sigwait, never by a handler, so stopping uses the
 *      same event queue as everything else.
 */
#include "scheduler/nats/front.h"

#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <getopt.h>
#include <nats/nats.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    const char *arg; /* NULL: a switch */
    const char *def;
    const char *help;
} flag_t;

static const flag_t flags[] = {
    {"server", "URL[,URL...]", "nats://127.0.0.1:4222", "NATS server URLs"},
    {"user", "NAME", NULL, "NATS user name"},
    {"password", "SECRET", NULL, "NATS password"},
    {"token", "TOKEN", NULL, "NATS authentication token"},
    {"creds", "FILE", NULL, "NATS credentials file (user JWT and seed)"},
    {"tls-ca", "FILE", NULL, "CA certificates to trust (enables TLS)"},
    {"tls-cert", "FILE", NULL, "client certificate chain (enables TLS)"},
    {"tls-key", "FILE", NULL, "client private key"},
    {"prefix", "PREFIX", "lanes", "subject prefix"},
    {"data-dir", "DIR", "./lanesched-data", "data directory of the disk store"},
    {"store", "disk|memory", "disk", "where items live; memory loses them at exit"},
    {"durability", "process|power", "process",
     "what an acknowledged submit survives: a crash of the process, or a power loss "
     "(group-committed fdatasync)"},
    {"models", "M1,M2,...", NULL, "models this instance owns (default: every model)"},
    {"heartbeat-ms", "MS", "2000", "how often consumers are told to heartbeat"},
    {"dead-after-ms", "MS", "10000", "a consumer silent this long is dead; its batches return"},
    {"ack-wait-ms", "MS", "30000", "a batch not acked this long returns to the queue"},
    {"max-deliveries", "N", "5", "an item delivered N times goes to <prefix>.dead.<model>"},
    {"max-payload", "BYTES", "1048576", "largest item payload accepted"},
    {"dedupe-window-ms", "MS", "120000", "a resubmitted item id within this window is a duplicate"},
    {"segment-max-bytes", "BYTES", "67108864", "a segment rolls over at this size"},
    {"starvation-ms", "MS", "0",
     "an item that waited this long goes next: its shape preempts the sticky shape at the next "
     "batch and its lane goes first (0 = off)"},
    {"limit-name-bytes", "BYTES", "256", "longest Register.name accepted (name_too_long)"},
    {"limit-items", "N", "10000", "most items in one Submit (too_many_items)"},
    {"limit-reply-to-bytes", "BYTES", "1024", "longest WorkItem.reply_to (reply_to_too_long)"},
    {"limit-consumers", "N", "1024", "consumers registered at once (too_many_consumers)"},
    {"limit-pulls", "N", "64", "open pulls per consumer (too_many_pulls)"},
    {"limit-inflight", "N", "1024",
     "batches in flight per consumer (no more are sent until one is settled); also the longest "
     "Heartbeat list (too_many_ids)"},
    {"limit-batch-size", "N", "4096",
     "largest Register.max_batch_size (batch_size_too_large); also the longest Ack list "
     "(too_many_positions)"},
    {"limit-batch-tokens", "N", "4194304",
     "largest Register.max_batch_tokens (batch_tokens_too_large)"},
    {"limit-models", "N", "1024", "models with shapes (too_many_models)"},
    {"limit-shapes", "N", "16384", "shapes of every model together (too_many_shapes)"},
    {"limit-shapes-per-model", "N", "4096", "shapes of one model (too_many_shapes)"},
    {"limit-new-shapes", "N", "64", "new shapes one Submit may create (too_many_shapes)"},
    {"queue-max-items", "N", "10000000",
     "items stored per model, queued or in flight (queue_full)"},
    {"queue-max-bytes", "BYTES", "8589934592",
     "bytes stored per model: ids, payloads, reply subjects (queue_full)"},
    {"dedupe-max-ids", "N", "4194304",
     "ids the dedupe window holds; past it the oldest are forgotten early"},
    {"log-level", "debug|info|warn|error", "info", "lowest level logged to stderr"},
    {"help", NULL, NULL, "this text"},
};
#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: lanesched [flags]\n\nEvery flag can also be set with the environment "
                 "variable LANESCHED_<FLAG>, e.g. LANESCHED_SERVER.\n\n");
    for (size_t i = 0; i < N_FLAGS; i++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", flags[i].name, flags[i].arg ? " " : "",
                 flags[i].arg ? flags[i].arg : "");
        fprintf(out, "  %-34s %s", left, flags[i].help);
        if (flags[i].def != NULL)
            fprintf(out, " (default %s)", flags[i].def);
        fprintf(out, "\n");
    }
}

static int parse_u32(const char *name, const char *v, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || end == v || x > UINT32_MAX) {
        fprintf(stderr, "lanesched: --%s: '%s' is not a number up to %u\n", name, v, UINT32_MAX);
        return -1;
    }
    *out = (uint32_t)x;
    return 0;
}

static int parse_u64(const char *name, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || end == v || v[0] == '-') {
        fprintf(stderr, "lanesched: --%s: '%s' is not a number\n", name, v);
        return -1;
    }
    *out = (uint64_t)x;
    return 0;
}

static const char *flag_value(const char **values, const char *name)
{
    for (size_t i = 0; i < N_FLAGS; i++) {
        if (strcmp(flags[i].name, name) == 0)
            return values[i];
    }
    return NULL;
}

/* The limits (daemon_limits_t): each a count of at least 1. */
static int config_limits(const char **v, daemon_limits_t *l)
{
    static const struct {
        const char *flag;
        size_t offset;
    } u32[] =
        {
            {"limit-name-bytes", offsetof(daemon_limits_t, name_bytes)},
            {"limit-items", offsetof(daemon_limits_t, items)},
            {"limit-reply-to-bytes", offsetof(daemon_limits_t, reply_to_bytes)},
            {"limit-consumers", offsetof(daemon_limits_t, consumers)},
            {"limit-pulls", offsetof(daemon_limits_t, pulls)},
            {"limit-inflight", offsetof(daemon_limits_t, inflight)},
            {"limit-batch-size", offsetof(daemon_limits_t, batch_size)},
            {"limit-batch-tokens", offsetof(daemon_limits_t, batch_tokens)},
            {"limit-models", offsetof(daemon_limits_t, models)},
            {"limit-shapes", offsetof(daemon_limits_t, shapes)},
            {"limit-shapes-per-model", offsetof(daemon_limits_t, shapes_per_model)},
            {"limit-new-shapes", offsetof(daemon_limits_t, new_shapes)},
        },
      u64[] = {
          {"queue-max-items", offsetof(daemon_limits_t, queue_items)},
          {"queue-max-bytes", offsetof(daemon_limits_t, queue_bytes)},
          {"dedupe-max-ids", offsetof(daemon_limits_t, dedupe_ids)},
      };
    for (size_t i = 0; i < sizeof(u32) / sizeof(u32[0]); i++) {
        uint32_t x;
        if (parse_u32(u32[i].flag, flag_value(v, u32[i].flag), &x) != 0 || x == 0)
            goto bad;
        memcpy((char *)l + u32[i].offset, &x, sizeof(x));
    }
    for (size_t i = 0; i < sizeof(u64) / sizeof(u64[0]); i++) {
        uint64_t x;
        if (parse_u64(u64[i].flag, flag_value(v, u64[i].flag), &x) != 0 || x == 0)
            goto bad;
        memcpy((char *)l + u64[i].offset, &x, sizeof(x));
    }
    if (l->reply_to_bytes > DAEMON_BATCH_OVERHEAD / 2) {
        fprintf(stderr,
                "lanesched: --limit-reply-to-bytes is at most %d: an item's id and "
                "reply subject must fit the room a batch keeps for them\n",
                DAEMON_BATCH_OVERHEAD / 2);
        return -1;
    }
    return 0;
bad:
    fprintf(stderr, "lanesched: every --limit-*, --queue-max-* and --dedupe-max-ids value must "
                    "be at least 1\n");
    return -1;
}

/* Fills values[] from defaults, then the environment, then argv. */
static int parse_flags(int argc, char **argv, const char **values)
{
    static char env_names[N_FLAGS][64];
    for (size_t i = 0; i < N_FLAGS; i++) {
        values[i] = flags[i].def;
        snprintf(env_names[i], sizeof(env_names[i]), "LANESCHED_");
        size_t k = strlen(env_names[i]);
        for (const char *c = flags[i].name; *c && k < sizeof(env_names[i]) - 1; c++)
            env_names[i][k++] = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        env_names[i][k] = '\0';
        const char *e = getenv(env_names[i]);
        if (e != NULL && flags[i].arg != NULL)
            values[i] = e;
    }
    struct option longopts[N_FLAGS + 1];
    for (size_t i = 0; i < N_FLAGS; i++)
        longopts[i] = (struct option){flags[i].name, flags[i].arg ? required_argument : no_argument,
                                      NULL, (int)i + 256};
    longopts[N_FLAGS] = (struct option){0};
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h' || (c >= 256 && strcmp(flags[c - 256].name, "help") == 0)) {
            usage(stdout);
            exit(0);
        }
        if (c < 256) {
            usage(stderr);
            return -1;
        }
        values[c - 256] = optarg;
    }
    if (optind < argc) {
        fprintf(stderr, "lanesched: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

static int config_build(const char **v, daemon_config_t *cfg, front_config_t *fc)
{
    *fc = (front_config_t){
        .servers = flag_value(v, "server"),
        .user = flag_value(v, "user"),
        .password = flag_value(v, "password"),
        .token = flag_value(v, "token"),
        .creds_file = flag_value(v, "creds"),
        .tls_ca = flag_value(v, "tls-ca"),
        .tls_cert = flag_value(v, "tls-cert"),
        .tls_key = flag_value(v, "tls-key"),
        .prefix = flag_value(v, "prefix"),
        .models = flag_value(v, "models"),
    };
    *cfg = (daemon_config_t){
        .prefix = flag_value(v, "prefix"),
        .data_dir = flag_value(v, "data-dir"),
        .models = flag_value(v, "models"),
    };
    const char *store = flag_value(v, "store"), *dur = flag_value(v, "durability");
    const char *level = flag_value(v, "log-level");
    if (strcmp(store, "disk") != 0 && strcmp(store, "memory") != 0) {
        fprintf(stderr, "lanesched: --store must be disk or memory, not '%s'\n", store);
        return -1;
    }
    cfg->store_memory = strcmp(store, "memory") == 0;
    if (strcmp(dur, "process") != 0 && strcmp(dur, "power") != 0) {
        fprintf(stderr, "lanesched: --durability must be process or power, not '%s'\n", dur);
        return -1;
    }
    cfg->durability_power = strcmp(dur, "power") == 0;
    int lv;
    if (log_level_parse(level, &lv) != 0) {
        fprintf(stderr, "lanesched: --log-level must be debug, info, warn or error\n");
        return -1;
    }
    log_level_set(lv);
    uint32_t seg_max = 0;
    if (parse_u32("heartbeat-ms", flag_value(v, "heartbeat-ms"), &cfg->heartbeat_ms) ||
        parse_u32("dead-after-ms", flag_value(v, "dead-after-ms"), &cfg->dead_after_ms) ||
        parse_u32("ack-wait-ms", flag_value(v, "ack-wait-ms"), &cfg->ack_wait_ms) ||
        parse_u32("max-deliveries", flag_value(v, "max-deliveries"), &cfg->max_deliveries) ||
        parse_u32("max-payload", flag_value(v, "max-payload"), &cfg->max_payload) ||
        parse_u32("dedupe-window-ms", flag_value(v, "dedupe-window-ms"), &cfg->dedupe_window_ms) ||
        parse_u32("segment-max-bytes", flag_value(v, "segment-max-bytes"), &seg_max) ||
        parse_u32("starvation-ms", flag_value(v, "starvation-ms"), &cfg->starvation_ms))
        return -1;
    cfg->segment_max_bytes = seg_max;
    if (config_limits(v, &cfg->limits) != 0)
        return -1;
    if (cfg->prefix[0] == '\0' || strpbrk(cfg->prefix, " *>") != NULL ||
        strlen(cfg->prefix) > DAEMON_PREFIX_MAX) {
        fprintf(stderr,
                "lanesched: --prefix must be a non-empty subject without wildcards, at most %d "
                "bytes\n",
                DAEMON_PREFIX_MAX);
        return -1;
    }
    if (cfg->dead_after_ms == 0 || cfg->ack_wait_ms == 0 || cfg->heartbeat_ms == 0) {
        fprintf(stderr, "lanesched: --heartbeat-ms, --dead-after-ms and --ack-wait-ms must be "
                        "greater than 0\n");
        return -1;
    }
    return 0;
}

typedef struct {
    daemon_t *d;
    front_t *f;
    sigset_t set;
} signal_ctx_t;

static void *signal_thread(void *arg)
{
    signal_ctx_t *sc = arg;
    int sig = 0;
    sigwait(&sc->set, &sig);
    log_write(LOG_INFO, "%s: no more work is taken; flushing and closing",
              sig == SIGTERM ? "SIGTERM" : "SIGINT");
    front_unsubscribe(sc->f);
    if (daemon_post(sc->d, EV_STOP, NULL, NULL, NULL, 0) != 0)
        log_write(LOG_ERROR, "out of memory: cannot stop; kill the process");
    return NULL;
}

int main(int argc, char **argv)
{
    const char *values[N_FLAGS];
    daemon_config_t cfg;
    front_config_t fc;
    if (parse_flags(argc, argv, values) != 0 || config_build(values, &cfg, &fc) != 0)
        return 2;

    /* Block the stop signals before any thread exists, so only the signal thread takes them. */
    signal_ctx_t sc = {0};
    sigemptyset(&sc.set);
    sigaddset(&sc.set, SIGTERM);
    sigaddset(&sc.set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
    signal(SIGPIPE, SIG_IGN);

    daemon_t *d = NULL;
    daemon_status_t st = daemon_create(&cfg, &d);
    if (st != DAEMON_OK) {
        log_write(LOG_ERROR, "cannot start: %s", daemon_status_str(st));
        return 1;
    }
    if (nats_Open(-1) != NATS_OK) {
        log_write(LOG_ERROR, "cannot initialise the NATS library");
        daemon_destroy(d);
        return 1;
    }
    front_t *f = front_create(d);
    if (f == NULL || (st = front_connect(f, &fc)) != DAEMON_OK) {
        front_destroy(f); /* closes the NATS library */
        daemon_destroy(d);
        return 1;
    }
    daemon_publish_set(d, front_publish, f);
    daemon_max_payload_set(d, front_payload_cap(f, cfg.max_payload));
    daemon_reply_max_set(d, front_server_max_payload(f));
    sc.d = d;
    sc.f = f;
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_thread, &sc) != 0) {
        log_write(LOG_ERROR, "cannot start the signal thread");
        front_destroy(f);
        daemon_destroy(d);
        return 1;
    }
    log_write(LOG_INFO, "serving %s on %s (store %s%s%s)", cfg.prefix, fc.servers,
              cfg.store_memory ? "memory" : "disk ", cfg.store_memory ? "" : cfg.data_dir,
              cfg.durability_power ? ", power-loss durability" : "");
    fprintf(stderr, "lanesched: ready\n");
    st = daemon_run(d);
    /* The signal thread uses f and d: when the owner stopped on its own (a store failure), wake
     * it and wait, so a late SIGTERM cannot reach a destroyed front. */
    pthread_kill(sig_thread, SIGTERM);
    pthread_join(sig_thread, NULL);
    front_destroy(f); /* closes the NATS library and waits for its threads */
    daemon_destroy(d);
    log_write(LOG_INFO, "stopped");
    return st == DAEMON_OK ? 0 : 1;
}
