/*
 * main.c - the lanesched daemon: flags and their environment variables, signals.
 *
 * Invariants:
 *   1. Every flag has an environment variable LANESCHED_<FLAG> (upper case, '-' as '_'); a flag
 *      on the command line wins over the environment, which wins over the default. A refusal
 *      of a value at start names where it came from: the variable when the environment gave it,
 *      else the flag, so the operator is pointed at the place to fix.
 *   2. SIGTERM and SIGINT stop taking work (unsubscribe), let the owner finish its turn and
 *      flush, then close the store: pending items come back on the next start.
 *   3. Signals are taken by one thread with sigwait, never by a handler, so stopping uses the
 *      same event queue as everything else. Before that thread exists (waiting for NATS at
 *      start) the wait between tries is a sigtimedwait, so a stop signal ends the start.
 *   4. The --password and --token values are registered with the logger before anything is
 *      logged, so no line ever shows them.
 *   5. The server list is checked (common/url.h) before anything waits or connects: a URL
 *      nats.c would take and then mishandle stops the start with exit status 2. So is every
 *      other value that can be checked without the store or the server (the prefixes, the
 *      model lists, the metrics address, the data directory, the segment size, the lease
 *      flags): a typo costs no recovery and no connection.
 *   6. SIGHUP, SIGUSR1 and SIGUSR2 are taken by the same thread and logged as ignored: nothing
 *      is reloaded, and a log rotation's HUP must not end the process as their default would.
 *   7. glibc's mmap threshold is fixed at MAIN_MMAP_THRESHOLD, and its trim threshold at
 *      MAIN_TRIM_THRESHOLD, before anything is allocated. The default raises both to the
 *      largest block freed so far (the dedupe window's tens of MB at a deep queue), and the heap
 *      then holds every later large free; fixed, a large queue's array is a mapping of its own
 *      (store/disk/disk_queue.c invariant 3), and a heap keeps at most MAIN_TRIM_THRESHOLD of
 *      free top, which the churn of messages between nats.c's threads and the owner reuses.
 *   8. A SIGBUS (a mapped segment or journal file cut short under the running daemon) writes
 *      one line saying so before the process ends of it as before: the default action left no
 *      line at all, and the next start's recovery report is where the damage is counted.
 */
#include "common/http/http.h"
#include "scheduler/nats/front.h"
#include "scheduler/nats/lease_kv.h"

#include "common/keyfile.h"
#include "common/log.h"
#include "common/text.h"
#include "common/url.h"
#include "common/usage.h"
#include "common/version.h"

#include <errno.h>
#include <pthread.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <nats/nats.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    {"inbox-prefix", "PREFIX", NULL,
     "the daemon's own reply inbox prefix, e.g. _INBOX.lanesched (the lease bucket's JetStream "
     "replies come there; default nats.c's _INBOX)"},
    {"data-dir", "DIR", "./lanesched-data", "data directory of the disk store"},
    {"store", "disk|memory", "disk", "where items live; memory loses them at exit"},
    {"durability", "process|power", "process",
     "what an acknowledged submit survives: a crash of the process, or a power loss "
     "(group-committed fdatasync)"},
    {"power-sync", "files|fs", "files",
     "how --durability power syncs a turn: every touched segment file, all at once, or one "
     "syncfs (cheaper with many lanes on a volume of its own)"},
    {"send", "prompt|flusher", "prompt",
     "how replies and batches leave: prompt writes what was published whenever the daemon has "
     "nothing else to do, so a waiting worker gets its batch at once, and under load leaves the "
     "writes to nats.c's flusher thread; flusher always does, which holds each up to 1 ms to "
     "write many at once"},
    {"models", "M1,M2,...", NULL, "models this instance owns (default: every model)"},
    {"lease-bucket", "NAME", NULL,
     "exclusive ownership (off by default): serve each model of --models only while holding its "
     "lease in this JetStream key-value bucket; standbys take over when a lease lapses"},
    {"lease-ttl-ms", "MS", "10000",
     "when the bucket is created: a lease not renewed for this long lapses, at least 300 (an "
     "existing bucket keeps its own)"},
    {"lease-replicas", "N", "3",
     "when the bucket is created: its replicas, 1 to 5 (1 on a single server)"},
    {"heartbeat-ms", "MS", "2000", "how often consumers are told to heartbeat"},
    {"dead-after-ms", "MS", "10000", "a consumer silent this long is dead; its batches return"},
    {"ack-wait-ms", "MS", "30000", "a batch not acked this long returns to the queue"},
    {"max-deliveries", "N", "5",
     "an item delivered N times goes to <prefix>.dead.<model> (0: never)"},
    {"max-payload", "BYTES", "1048576",
     "largest item payload accepted (0: what the server carries beside a batch)"},
    {"dedupe-window-ms", "MS", "120000", "a resubmitted item id within this window is a duplicate"},
    {"segment-max-bytes", "BYTES", "67108864",
     "a segment rolls over at this size (65536 to 2147483648)"},
    {"journal-file-bytes", "BYTES", "8388608",
     "each state journal file's size (4096 to 2147483648): smaller files are given back sooner "
     "after the items holding them settle, larger ones are created less often"},
    {"store-resident-mb", "MB", "1024",
     "the disk store's segment pages kept mapped in the process (the page cache holds them "
     "either way); below the stretch of log a drain reads, pages are mapped again per item"},
    {"recovery-threads", "N", "2",
     "threads scanning the disk store at start, one model's files on one thread (1 = the main "
     "thread alone)"},
    {"starvation-ms", "MS", NULL,
     "the age bound: an item that waited this long goes next, its shape preempting at the next "
     "batch and its lane first (0 = off; default 20 under --policy lanes, 0 under lanes-seed)"},
    {"hold-ms", "MS", NULL,
     "the hold of --policy lanes: while a model's offered load is high, an under-filled batch "
     "waits for company until its oldest item waited this long, twice as long for about "
     "60 s x ln P after a burst of P times the workers' time (0 = off; default 350)"},
    {"slo-ms", "MS|MODEL=MS[,...]", NULL,
     "the wait budget: the p99 queue wait accepted, for every model (MS) and per model "
     "(MODEL=MS), e.g. 5000,chat=1000. Under it --policy lanes waits for company only as long as "
     "the budget allows and --hold-ms and --starvation-ms do not apply (default none)"},
    {"policy", "lanes|lanes-seed", "lanes",
     "lanes: cost-aware packing across neighbouring lanes, cache affinity, the age bound; "
     "lanes-seed: the article's policy (one lane per batch, every worker on one shape)"},
    {"limit-name-bytes", "BYTES", "256", "longest Register.name accepted (name_too_long)"},
    {"limit-items", "N", "10000", "most items in one Submit (too_many_items)"},
    {"limit-reply-to-bytes", "BYTES", "1024",
     "longest WorkItem.reply_to (reply_to_too_long) and Pull reply subject "
     "(pull_subject_too_long)"},
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
    {"limit-models", "N", "1024",
     "models holding items with no live consumer; a model a consumer registered for is never "
     "refused as new (too_many_models)"},
    {"limit-shapes", "N", "16384", "shapes of every model together (too_many_shapes)"},
    {"limit-shapes-per-model", "N", "4096", "shapes of one model (too_many_shapes)"},
    {"limit-new-shapes", "N", "64", "new shapes one Submit may create (too_many_shapes)"},
    {"limit-backlog-bytes", "BYTES", "67108864",
     "bytes of Submits, and of every other client message, waiting for the daemon; past it a "
     "message is dropped (counters.dropped_messages) and its client's timeout takes over"},
    {"queue-max-items", "N", "10000000",
     "items stored per model, queued or in flight (queue_full)"},
    {"queue-max-bytes", "BYTES", "8589934592",
     "bytes stored per model: ids, payloads, reply subjects (queue_full)"},
    {"dedupe-max-ids", "N", "4194304",
     "ids the dedupe window holds; past it the oldest are forgotten early"},
    {"queue-max-age-ms", "MS[,MODEL=MS...]", "86400000",
     "how long an item may stay queued, for every model and per model: past it, it goes to "
     "<prefix>.dead.<model> with reason expired (JetStream's max_age)"},
    {"limit-pull-expires-ms", "MS", "300000", "a Pull's expires_ms is cut to this"},
    {"allow-models", "M1,M2,P*,...", NULL,
     "the only models accepted (a name ending in * is a prefix); others get model_not_allowed "
     "(default any)"},
    {"log-level", "debug|info|warn|error", "info", "lowest level logged to stderr"},
    {"log-format", "text|json", "text", "stderr lines as text, or one JSON object per line"},
    {"connect-wait-ms", "MS", "0",
     "how long to keep trying to reach NATS at start, a log line each try (0 = forever)"},
    {"metrics-listen", "ADDR:PORT", NULL,
     "serve Prometheus metrics over HTTP at /metrics, e.g. 127.0.0.1:9471 (default off)"},
    {"version", NULL, NULL, "print the version and the protocol version, and exit"},
    {"help", NULL, NULL, "this text"},
};
#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

/* "LANESCHED_" and the longest flag name, with room. */
#define MAIN_LABEL_MAX 64

/* The flags' values and where each came from (invariant 1). */
typedef struct {
    const char *value[N_FLAGS];
    char label[N_FLAGS][MAIN_LABEL_MAX]; /* "--hold-ms", or "LANESCHED_HOLD_MS" from the env */
} main_flags_t;

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

/* label: the flag or variable the value came from (invariant 1), as every parse_* takes it. */
static int parse_u32(const char *label, const char *v, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    /* strtoull takes "-1" as 2^64 - 1 and "-18446744073709551615" as 1: no sign is a number here */
    if (errno != 0 || *end != '\0' || end == v || x > UINT32_MAX || strchr(v, '-') != NULL) {
        fprintf(stderr, "lanesched: %s: '%s' is not a number up to %u\n", label, v, UINT32_MAX);
        return -1;
    }
    *out = (uint32_t)x;
    return 0;
}

/* --slo-ms: "MS" for every model and "MODEL=MS" per model, comma separated (a model named twice:
 * the last). The entries' names point into a copy of v; the copy and the array are the
 * process's, so both outlive the daemon. */
static int parse_slo(const char *label, const char *v, daemon_config_t *cfg)
{
    if (v == NULL || v[0] == '\0')
        return 0;
    size_t n = 1;
    for (const char *p = v; *p != '\0'; p++)
        n += *p == ',';
    static daemon_slo_t *slos;
    static char *copy;
    free(slos);
    free(copy);
    slos = calloc(n, sizeof(*slos));
    copy = strdup(v);
    if (slos == NULL || copy == NULL) {
        fprintf(stderr, "lanesched: out of memory\n");
        return -1;
    }
    size_t k = 0;
    char *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(w, '='), *end = NULL;
        if (eq != NULL)
            *eq = '\0';
        const char *num = eq != NULL ? eq + 1 : w;
        errno = 0;
        unsigned long long ms = strtoull(num, &end, 10);
        if ((eq != NULL && w[0] == '\0') || errno != 0 || end == num || *end != '\0' ||
            strchr(num, '-') != NULL || ms == 0 || ms > UINT32_MAX) {
            fprintf(stderr,
                    "lanesched: %s: want MS or MODEL=MS (MS > 0), comma separated; got '%s'\n",
                    label, v);
            return -1;
        }
        if (eq == NULL)
            cfg->slo_ms = (uint32_t)ms;
        else
            slos[k++] = (daemon_slo_t){w, (uint32_t)ms};
    }
    cfg->slos = slos;
    cfg->n_slos = k;
    return 0;
}

/* A millisecond flag whose absence means "the policy's own": *out is unset (the sentinel) when
 * the flag is absent, and the sentinel itself is refused as a value. */
static int parse_ms_or_policy(const char *label, const char *v, uint32_t unset, uint32_t *out)
{
    *out = unset;
    if (v == NULL)
        return 0;
    if (parse_u32(label, v, out))
        return -1;
    if (*out == unset) {
        fprintf(stderr, "lanesched: %s %s is out of range\n", label, v);
        return -1;
    }
    return 0;
}

static int parse_u64(const char *label, const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || end == v || strchr(v, '-') != NULL) {
        fprintf(stderr, "lanesched: %s: '%s' is not a number\n", label, v);
        return -1;
    }
    *out = (uint64_t)x;
    return 0;
}

/* The flag's index in flags[], N_FLAGS for a name that is none. */
static size_t flag_index(const char *name)
{
    size_t i = 0;
    while (i < N_FLAGS && strcmp(flags[i].name, name) != 0)
        i++;
    return i;
}

static const char *flag_value(const main_flags_t *f, const char *name)
{
    size_t i = flag_index(name);
    return i < N_FLAGS ? f->value[i] : NULL;
}

/* What a message about the flag's value calls it (invariant 1). */
static const char *flag_label(const main_flags_t *f, const char *name)
{
    size_t i = flag_index(name);
    return i < N_FLAGS ? f->label[i] : name;
}

static int flag_u32(const main_flags_t *f, const char *name, uint32_t *out)
{
    return parse_u32(flag_label(f, name), flag_value(f, name), out);
}

/* A file path flag: NULL when unset or empty, as keyfile.h reads a path, so nats.c is never
 * handed an empty one. */
static const char *flag_path(const main_flags_t *f, const char *name)
{
    const char *p = flag_value(f, name);
    return text_given(p) ? p : NULL;
}

/* The limits (daemon_limits_t): each a count of at least 1. */
static int config_limits(const main_flags_t *v, daemon_limits_t *l)
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
            {"limit-pull-expires-ms", offsetof(daemon_limits_t, pull_expires_ms)},
        },
      u64[] = {
          {"queue-max-items", offsetof(daemon_limits_t, queue_items)},
          {"queue-max-bytes", offsetof(daemon_limits_t, queue_bytes)},
          {"dedupe-max-ids", offsetof(daemon_limits_t, dedupe_ids)},
          {"limit-backlog-bytes", offsetof(daemon_limits_t, backlog_bytes)},
      };
    const char *bad = NULL;
    for (size_t i = 0; i < sizeof(u32) / sizeof(u32[0]) && bad == NULL; i++) {
        uint32_t x;
        if (flag_u32(v, u32[i].flag, &x) != 0)
            return -1;
        bad = x == 0 ? u32[i].flag : NULL;
        memcpy((char *)l + u32[i].offset, &x, sizeof(x));
    }
    for (size_t i = 0; i < sizeof(u64) / sizeof(u64[0]) && bad == NULL; i++) {
        uint64_t x;
        if (parse_u64(flag_label(v, u64[i].flag), flag_value(v, u64[i].flag), &x) != 0)
            return -1;
        bad = x == 0 ? u64[i].flag : NULL;
        memcpy((char *)l + u64[i].offset, &x, sizeof(x));
    }
    if (bad != NULL) {
        fprintf(stderr,
                "lanesched: %s must be at least 1 (every --limit-*, --queue-max-* and "
                "--dedupe-max-ids value is a bound on a count)\n",
                flag_label(v, bad));
        return -1;
    }
    if (l->reply_to_bytes > DAEMON_BATCH_OVERHEAD / 2) {
        fprintf(stderr,
                "lanesched: %s is at most %d: an item's id and reply subject must fit the room "
                "a batch keeps for them\n",
                flag_label(v, "limit-reply-to-bytes"), DAEMON_BATCH_OVERHEAD / 2);
        return -1;
    }
    return 0;
}

/* --queue-max-age-ms MS[,MODEL=MS...]: every model's limit, then per-model ones (models.c). */
static int config_queue_age(const main_flags_t *v, daemon_config_t *cfg)
{
    const char *text = flag_value(v, "queue-max-age-ms");
    char first[32];
    const char *comma = strchr(text, ',');
    size_t n = comma != NULL ? (size_t)(comma - text) : strlen(text);
    uint32_t ms = 0;
    if (n >= sizeof(first)) /* longer than any number up to 2^32: never cut to one */
        goto bad;
    snprintf(first, sizeof(first), "%.*s", (int)n, text);
    if (parse_u32(flag_label(v, "queue-max-age-ms"), first, &ms) != 0 || ms == 0)
        goto bad;
    cfg->limits.queue_age_ms = ms;
    cfg->queue_age_models = comma != NULL ? comma + 1 : NULL;
    for (const char *p = cfg->queue_age_models; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ','), *eq = strchr(p, '=');
        end = end != NULL ? end : p + strlen(p);
        char *stop = NULL;
        errno = 0;
        unsigned long long x =
            eq != NULL && eq < end && eq > p && eq[1] != '-' ? strtoull(eq + 1, &stop, 10) : 0;
        if (x == 0 || x > UINT32_MAX || errno != 0 || stop != end)
            goto bad;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
bad:
    fprintf(stderr, "lanesched: %s takes MS[,MODEL=MS...], each MS from 1 to %u, not '%s'\n",
            flag_label(v, "queue-max-age-ms"), UINT32_MAX, text);
    return -1;
}

/* Fills f from defaults, then the environment, then argv (invariant 1). */
static int parse_flags(int argc, char **argv, main_flags_t *f)
{
    for (size_t i = 0; i < N_FLAGS; i++) {
        char env[MAIN_LABEL_MAX];
        f->value[i] = flags[i].def;
        snprintf(env, sizeof(env), "LANESCHED_");
        size_t k = strlen(env);
        for (const char *c = flags[i].name; *c && k < sizeof(env) - 1; c++)
            env[k++] = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        env[k] = '\0';
        const char *e = getenv(env);
        int from_env = e != NULL && flags[i].arg != NULL;
        if (from_env)
            f->value[i] = e;
        snprintf(f->label[i], sizeof(f->label[i]), from_env ? "%s" : "--%s",
                 from_env ? env : flags[i].name);
    }
    struct option longopts[N_FLAGS + 1];
    for (size_t i = 0; i < N_FLAGS; i++)
        longopts[i] = (struct option){flags[i].name, flags[i].arg ? required_argument : no_argument,
                                      NULL, (int)i + 256};
    longopts[N_FLAGS] = (struct option){0};
    int c;
    opterr = 0; /* errors are reported by common/usage.c, in every tool's wording */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h' || (c >= 256 && strcmp(flags[c - 256].name, "help") == 0)) {
            usage(stdout);
            exit(0);
        }
        if (c >= 256 && strcmp(flags[c - 256].name, "version") == 0) {
            version_print(stdout, "lanesched");
            exit(0);
        }
        if (c == ':') {
            usage_missing_value("lanesched", argv[optind - 1]);
            return -1;
        }
        if (c < 256) {
            usage_unknown_flag("lanesched", argv[optind - 1]);
            return -1;
        }
        f->value[c - 256] = optarg;
        snprintf(f->label[c - 256], sizeof(f->label[c - 256]), "--%s", flags[c - 256].name);
    }
    if (optind < argc) {
        usage_unexpected("lanesched", argv[optind]);
        return -1;
    }
    return 0;
}

/* A subject or subject prefix clients publish under: not empty, no wildcard or white space, no
 * empty token (invariant 5; nats-server refuses such a subscription only once connected). */
static int main_subject_ok(const char *s)
{
    size_t n = strlen(s);
    return n != 0 && strpbrk(s, " \t\r\n*>") == NULL && s[0] != '.' && s[n - 1] != '.' &&
           strstr(s, "..") == NULL;
}

/* A model list flag that is set names at least one model (an empty one would mean nothing is
 * served, or nothing allowed, without a word at start). */
static int main_list_ok(const char *label, const char *list, const char *unset_means)
{
    if (list == NULL || strspn(list, ", \t") != strlen(list))
        return 1;
    fprintf(stderr, "lanesched: %s names no model; leave it out for %s\n", label, unset_means);
    return 0;
}

/* Every model --models names follows the model rule (subjects.md; codec_model_check): each
 * becomes a subscription subject, and a wildcard there ('>') would claim other instances' models
 * while a space or an empty token failed only once the store was open and NATS connected. */
static int main_models_ok(const char *label, const char *list)
{
    char *copy = list != NULL ? strdup(list) : NULL;
    if (list != NULL && copy == NULL)
        return 0;
    int ok = 1;
    char *save = NULL;
    for (char *m = copy != NULL ? strtok_r(copy, ",", &save) : NULL; m != NULL && ok;
         m = strtok_r(NULL, ",", &save)) {
        const char *fault = daemon_model_name_fault(m);
        if (fault != NULL) {
            fprintf(stderr,
                    "lanesched: %s: '%s' is not a model name (%s: one or more subject tokens "
                    "joined by '.', none empty, no '*', '>', space or control character)\n",
                    label, m, fault);
            ok = 0;
        }
    }
    free(copy);
    return ok;
}

/* The daemon's inbox prefix when it is its own: nats.c's "_INBOX" is every default client's,
 * so answers under it are never refused as the daemon's (codec_reply_subject_check). */
static const char *main_own_inbox(const char *prefix)
{
    return prefix != NULL && strcmp(prefix, "_INBOX") != 0 ? prefix : NULL;
}

/* The disk store's directory: named, and short enough for the paths built under it. */
static int config_data_dir(const main_flags_t *v, const char *dir)
{
    const char *label = flag_label(v, "data-dir");
    if (dir[0] == '\0') {
        fprintf(stderr,
                "lanesched: %s is empty: it names the disk store's directory (leave it out for "
                "%s)\n",
                label, flags[flag_index("data-dir")].def);
        return -1;
    }
    if (strlen(dir) > DAEMON_DATA_DIR_MAX) {
        fprintf(stderr,
                "lanesched: %s is %zu bytes long, more than %d: the lock and the store's files "
                "are opened by their full path under it, within the system's limit of 4096 bytes "
                "(PATH_MAX)\n",
                label, strlen(dir), DAEMON_DATA_DIR_MAX);
        return -1;
    }
    return 0;
}

/* The lease flags (read only when --lease-bucket is set, checked whether or not it is): the
 * TTL lease.c can keep safe and the replicas JetStream can keep. */
static int config_leases(const main_flags_t *v, lease_kv_config_t *lc)
{
    uint32_t ttl = 0, replicas = 0;
    lease_timing_t timing; /* the lease's own rule, asked before anything opens */
    if (flag_u32(v, "lease-ttl-ms", &ttl) || flag_u32(v, "lease-replicas", &replicas))
        return -1;
    if (lease_timing_init(&timing, ttl) != 0) {
        fprintf(stderr,
                "lanesched: %s must be at least %u ms, not %" PRIu32 ": a holder renews every "
                "third of it and stops serving a fifth (at least 100 ms) before the lease can "
                "lapse, both longer than a bucket write takes\n",
                flag_label(v, "lease-ttl-ms"), LEASE_TTL_MIN_MS, ttl);
        return -1;
    }
    if (replicas < 1 || replicas > LEASE_KV_REPLICAS_MAX) {
        fprintf(stderr,
                "lanesched: %s must be 1 to %d, not %" PRIu32 ": JetStream keeps a bucket on at "
                "most %d servers (1 on a single server)\n",
                flag_label(v, "lease-replicas"), LEASE_KV_REPLICAS_MAX, replicas,
                LEASE_KV_REPLICAS_MAX);
        return -1;
    }
    *lc = (lease_kv_config_t){.bucket = flag_value(v, "lease-bucket"),
                              .replicas = (int)replicas,
                              .ttl_ms = ttl,
                              .models = flag_value(v, "models")};
    return 0;
}

/* A flag of two values: 0 for a, 1 for b, or -1 after saying on stderr what it must be. */
static int main_choice(const main_flags_t *v, const char *name, const char *a, const char *b)
{
    const char *value = flag_value(v, name);
    if (strcmp(value, a) == 0 || strcmp(value, b) == 0)
        return strcmp(value, b) == 0;
    fprintf(stderr, "lanesched: %s must be %s or %s, not '%s'\n", flag_label(v, name), a, b, value);
    return -1;
}

static int config_build(const main_flags_t *v, daemon_config_t *cfg, front_config_t *fc,
                        lease_kv_config_t *lc)
{
    *fc = (front_config_t){
        .servers = flag_value(v, "server"),
        .inbox_prefix = flag_value(v, "inbox-prefix"),
        .user = flag_value(v, "user"),
        .password = flag_value(v, "password"),
        .token = flag_value(v, "token"),
        .creds_file = flag_path(v, "creds"),
        .tls_ca = flag_path(v, "tls-ca"),
        .tls_cert = flag_path(v, "tls-cert"),
        .tls_key = flag_path(v, "tls-key"),
        .prefix = flag_value(v, "prefix"),
        .models = flag_value(v, "models"),
    };
    *cfg = (daemon_config_t){
        .prefix = flag_value(v, "prefix"),
        .own_inbox = main_own_inbox(flag_value(v, "inbox-prefix")),
        .data_dir = flag_value(v, "data-dir"),
        .models = flag_value(v, "models"),
    };
    const char *level = flag_value(v, "log-level"), *format = flag_value(v, "log-format");
    log_secret_add(fc->password); /* invariant 4 */
    log_secret_add(fc->token);
    char url_err[512];
    int url_flags = 0;
    if (url_list_check(fc->servers, url_err, sizeof(url_err), &url_flags) != 0) { /* invariant 5 */
        fprintf(stderr, "lanesched: %s: %s\n", flag_label(v, "server"), url_err);
        return -1;
    }
    fc->tls_url = (url_flags & URL_TLS) != 0;
    const char *const labels[] = {flag_label(v, "creds"), flag_label(v, "tls-ca"),
                                  flag_label(v, "tls-cert"), flag_label(v, "tls-key")};
    const char *const paths[] = {fc->creds_file, fc->tls_ca, fc->tls_cert, fc->tls_key};
    char bad[320];
    if (keyfile_conn_check(labels, paths, bad, sizeof(bad)) != KEYFILE_OK) { /* invariant 5 */
        fprintf(stderr, "lanesched: %s\n", bad);
        return -1;
    }
    if (fc->inbox_prefix != NULL && !main_subject_ok(fc->inbox_prefix)) {
        fprintf(stderr,
                "lanesched: %s must be a subject without wildcards, e.g. _INBOX.lanesched\n",
                flag_label(v, "inbox-prefix"));
        return -1;
    }
    int lf;
    if (log_format_parse(format, &lf) != 0) {
        fprintf(stderr, "lanesched: %s must be text or json, not '%s'\n",
                flag_label(v, "log-format"), format);
        return -1;
    }
    log_format_set(lf);
    if ((cfg->store_memory = main_choice(v, "store", "disk", "memory")) < 0)
        return -1;
    if (config_data_dir(v, cfg->data_dir) != 0)
        return -1;
    if ((cfg->durability_power = main_choice(v, "durability", "process", "power")) < 0)
        return -1;
    if (cfg->store_memory && cfg->durability_power) {
        fprintf(stderr,
                "lanesched: %s power needs the disk store: %s memory keeps nothing across a "
                "crash\n",
                flag_label(v, "durability"), flag_label(v, "store"));
        return -1;
    }
    if ((cfg->power_syncfs = main_choice(v, "power-sync", "files", "fs")) < 0 ||
        (fc->nats_flusher = main_choice(v, "send", "prompt", "flusher")) < 0)
        return -1;
    int lv;
    if (log_level_parse(level, &lv) != 0) {
        fprintf(stderr, "lanesched: %s must be debug, info, warn or error\n",
                flag_label(v, "log-level"));
        return -1;
    }
    log_level_set(lv);
    uint32_t seg_max = 0, jnl_bytes = 0;
    if (flag_u32(v, "heartbeat-ms", &cfg->heartbeat_ms) ||
        flag_u32(v, "dead-after-ms", &cfg->dead_after_ms) ||
        flag_u32(v, "ack-wait-ms", &cfg->ack_wait_ms) ||
        flag_u32(v, "max-deliveries", &cfg->max_deliveries) ||
        flag_u32(v, "max-payload", &cfg->max_payload) ||
        flag_u32(v, "dedupe-window-ms", &cfg->dedupe_window_ms) ||
        flag_u32(v, "segment-max-bytes", &seg_max) ||
        flag_u32(v, "journal-file-bytes", &jnl_bytes) ||
        flag_u32(v, "store-resident-mb", &cfg->store_resident_mb) ||
        flag_u32(v, "recovery-threads", &cfg->recovery_threads) ||
        flag_u32(v, "connect-wait-ms", &fc->connect_wait_ms))
        return -1;
    if (cfg->recovery_threads == 0 || cfg->recovery_threads > DAEMON_RECOVERY_THREADS_MAX) {
        fprintf(stderr, "lanesched: %s must be 1 to %u, not %" PRIu32 "\n",
                flag_label(v, "recovery-threads"), DAEMON_RECOVERY_THREADS_MAX,
                cfg->recovery_threads);
        return -1;
    }
    cfg->policy = flag_value(v, "policy");
    if (strcmp(cfg->policy, "lanes") != 0 && strcmp(cfg->policy, "lanes-seed") != 0) {
        fprintf(stderr, "lanesched: %s must be lanes or lanes-seed, not '%s'\n",
                flag_label(v, "policy"), cfg->policy);
        return -1;
    }
    if (parse_ms_or_policy(flag_label(v, "starvation-ms"), flag_value(v, "starvation-ms"),
                           DAEMON_STARVATION_DEFAULT, &cfg->starvation_ms) ||
        parse_ms_or_policy(flag_label(v, "hold-ms"), flag_value(v, "hold-ms"), DAEMON_HOLD_DEFAULT,
                           &cfg->hold_ms) ||
        parse_slo(flag_label(v, "slo-ms"), flag_value(v, "slo-ms"), cfg))
        return -1;
    if (seg_max < DAEMON_SEGMENT_MIN_BYTES || seg_max > DAEMON_SEGMENT_MAX_BYTES) {
        fprintf(stderr,
                "lanesched: %s must be %u to %u, not %" PRIu32 ": each segment is a file of its "
                "own, and below 64 KiB every few items would make one\n",
                flag_label(v, "segment-max-bytes"), DAEMON_SEGMENT_MIN_BYTES,
                DAEMON_SEGMENT_MAX_BYTES, seg_max);
        return -1;
    }
    cfg->segment_max_bytes = seg_max;
    if (jnl_bytes < 4096u || jnl_bytes > (1u << 31)) {
        fprintf(stderr, "lanesched: %s must be 4096 to 2147483648, not %" PRIu32 "\n",
                flag_label(v, "journal-file-bytes"), jnl_bytes);
        return -1;
    }
    cfg->journal_file_bytes = jnl_bytes;
    if (config_limits(v, &cfg->limits) != 0 || config_queue_age(v, cfg) != 0)
        return -1;
    cfg->allow_models = flag_value(v, "allow-models");
    if (!main_list_ok(flag_label(v, "models"), cfg->models, "every model") ||
        !main_models_ok(flag_label(v, "models"), cfg->models) ||
        !main_list_ok(flag_label(v, "allow-models"), cfg->allow_models, "any model"))
        return -1;
    if (!main_subject_ok(cfg->prefix) || strlen(cfg->prefix) > DAEMON_PREFIX_MAX) {
        fprintf(stderr,
                "lanesched: %s must be a subject without wildcards, spaces or empty tokens "
                "(e.g. lanes), at most %d bytes\n",
                flag_label(v, "prefix"), DAEMON_PREFIX_MAX);
        return -1;
    }
    const char *listen = flag_value(v, "metrics-listen");
    if (text_given(listen) && http_listen_check(listen) != HTTP_OK) {
        fprintf(stderr, "lanesched: %s %s: %s\n", flag_label(v, "metrics-listen"), listen,
                http_status_str(HTTP_EADDR));
        return -1;
    }
    if (config_leases(v, lc) != 0)
        return -1;
    const char *bucket = flag_value(v, "lease-bucket");
    if (text_given(bucket)) {
        if (cfg->models == NULL || cfg->store_memory) {
            fprintf(stderr,
                    "lanesched: %s needs --models (the models this instance may serve) and the "
                    "disk store\n",
                    flag_label(v, "lease-bucket"));
            return -1;
        }
        cfg->leases = fc->leases = 1;
    }
    if (cfg->dead_after_ms == 0 || cfg->ack_wait_ms == 0 || cfg->heartbeat_ms == 0) {
        fprintf(stderr, "lanesched: %s, %s and %s must be greater than 0\n",
                flag_label(v, "heartbeat-ms"), flag_label(v, "dead-after-ms"),
                flag_label(v, "ack-wait-ms"));
        return -1;
    }
    if (cfg->dead_after_ms <= cfg->heartbeat_ms) {
        fprintf(stderr,
                "lanesched: %s (%u) must be longer than %s (%u): a consumer heartbeating on time "
                "would be declared dead between two heartbeats\n",
                flag_label(v, "dead-after-ms"), cfg->dead_after_ms, flag_label(v, "heartbeat-ms"),
                cfg->heartbeat_ms);
        return -1;
    }
    return 0;
}

typedef struct {
    daemon_t *d;
    front_t *f;
    sigset_t set;
    int stopped;         /* a stop signal came before the signal thread existed */
    atomic_int released; /* the owner stopped on its own and woke the signal thread to end it */
} signal_ctx_t;

/* front_config_t.pause before the signal thread exists: 1 when a stop signal came. */
static int main_pause(void *ctx, uint32_t ms)
{
    signal_ctx_t *sc = ctx;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    int sig = sigtimedwait(&sc->set, NULL, &ts);
    sc->stopped = sig == SIGTERM || sig == SIGINT;
    return sc->stopped;
}

/* http_refresh_fn: asks the owner for a snapshot (any thread). */
static void main_metrics_refresh(void *ctx)
{
    daemon_post(ctx, EV_METRICS_SNAPSHOT, NULL, NULL, NULL, 0);
}

/* http_health_fn: /healthz also needs the NATS connection (ctx: the front, NULL before it
 * exists). */
static int main_health(void *ctx, char *why, size_t cap)
{
    front_t *f = __atomic_load_n((front_t **)ctx, __ATOMIC_ACQUIRE);
    front_nats_state_t ns = {0};
    if (f != NULL)
        front_nats_state(f, &ns);
    if (ns.connected)
        return 0;
    snprintf(why, cap, "not connected to NATS (%s)",
             f == NULL ? "not yet connected" : "reconnecting");
    return 1;
}

/* daemon_nats_state_fn: the front's connection state for the metrics (ctx: the front). */
static void main_nats_state(void *ctx, daemon_nats_state_t *out)
{
    front_nats_state_t ns;
    front_nats_state(ctx, &ns);
    *out = (daemon_nats_state_t){ns.connected, ns.reconnects, ns.outage_ns, ns.errors};
}

/* daemon_metrics_sink_fn: the owner's snapshot to the HTTP server. */
static void main_metrics_offer(void *ctx, const char *text, size_t len)
{
    http_server_offer(ctx, text, len);
}

typedef struct {
    daemon_t *d;
    front_t *f;
} lease_glue_t;

/* lease_kv_notify_fn: a gained lease reaches the owner before the model's submits are
 * subscribed, a lost one is unsubscribed before the owner hears, so no submit meets an owner
 * that is not told yet. */
static void main_lease_notify(void *ctx, const char *model, uint64_t valid_until_ns, int elsewhere)
{
    lease_glue_t *g = ctx;
    daemon_lease_note_t note = {valid_until_ns, elsewhere != 0};
    if (valid_until_ns == 0)
        front_submit_serve(g->f, model, 0);
    if (daemon_post(g->d, EV_LEASE, model, NULL, &note, sizeof(note)) != 0)
        log_write(LOG_ERROR, "out of memory: the lease of %s could not reach the owner", model);
    if (valid_until_ns != 0)
        front_submit_serve(g->f, model, 1);
}

/* Starts the lease keeper when --lease-bucket is set (lc: the flags' part, config_leases);
 * 0, or -1 (logged). */
static int main_leases_start(const lease_kv_config_t *lc, const daemon_config_t *cfg,
                             lease_glue_t *g, signal_ctx_t *sc, lease_kv_t **out)
{
    *out = NULL;
    if (!cfg->leases)
        return 0;
    lease_kv_config_t run = *lc;
    run.instance = daemon_instance_id(g->d);
    run.pause = main_pause;
    run.pause_ctx = sc;
    natsStatus s = lease_kv_create(front_connection(g->f), &run, main_lease_notify, g, out);
    return s == NATS_OK ? 0 : -1;
}

static void *signal_thread(void *arg)
{
    signal_ctx_t *sc = arg;
    int sig = 0;
    for (;;) {
        sigwait(&sc->set, &sig);
        if (atomic_load(&sc->released))
            return NULL;
        if (sig == SIGTERM || sig == SIGINT)
            break;
        log_write(LOG_INFO, "%s ignored: lanesched reloads nothing (SIGTERM stops it)",
                  sig == SIGHUP    ? "SIGHUP"
                  : sig == SIGUSR1 ? "SIGUSR1"
                                   : "SIGUSR2"); /* inv. 6 */
    }
    log_write(LOG_INFO, "%s: no more work is taken; flushing and closing",
              sig == SIGTERM ? "SIGTERM" : "SIGINT");
    front_unsubscribe(sc->f);
    if (daemon_post(sc->d, EV_STOP, NULL, NULL, NULL, 0) != 0)
        log_write(LOG_ERROR, "out of memory: cannot stop; kill the process");
    return NULL;
}

static void main_on_sigbus(int sig)
{
    static const char msg[] =
        "lanesched: SIGBUS: a mapped file was cut short under the running daemon (a segment, "
        "journal or index file truncated?) or could not be read; stopping; the next start "
        "recovers what is intact\n";
    ssize_t n = write(2, msg, sizeof(msg) - 1); /* async-signal-safe; nothing else to do if not */
    (void)n;
    signal(sig, SIG_DFL); /* invariant 8: then end of it, as the default would have */
    raise(sig);
}

/* Allocations from this size up are mappings (invariant 7): at or above the largest message
 * and batch (1 MiB), so no per-message buffer becomes a mapping of its own. 128 KiB and 1 MiB
 * gave the same memory with `lanesched-bench throughput --durability process --no-jetstream
 * --no-fabric --no-client-check --items 20000 --queue-probe 1000000`, and glibc's dynamic
 * default more (docs/throughput.md, "Memory per queued item"). */
#define MAIN_MMAP_THRESHOLD (1024 * 1024)

/* The free top a heap keeps (invariant 7). Fixing the mmap threshold leaves it at glibc's
 * 128 KiB: the arena of nats.c's reader, whose messages the owner frees a turn later, was then
 * given back and faulted in again at every turn (madvise, a TLB shootdown of the other core, a
 * zeroed page per 4 KiB). By the daemon's minor faults under `lanesched-bench throughput
 * --durability process --no-jetstream --no-fabric --no-client-check --reps 1 --items 600000`,
 * 8 MiB is the smallest power of two that ended most of it (4 MiB did part); it costs the queue
 * probe above about 1 byte per queued item, and 16 MiB, which also keeps a burst of Submits in
 * flight, twice that for under 1% of the CPU (docs/throughput.md, "The heap's free top"). */
#define MAIN_TRIM_THRESHOLD (8 * 1024 * 1024)

int main(int argc, char **argv)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, MAIN_MMAP_THRESHOLD); /* invariant 7 */
    mallopt(M_TRIM_THRESHOLD, MAIN_TRIM_THRESHOLD);
#endif
    static main_flags_t values; /* static: the labels are the process's, as the values are */
    daemon_config_t cfg;
    front_config_t fc;
    lease_kv_config_t lc;
    if (parse_flags(argc, argv, &values) != 0 || config_build(&values, &cfg, &fc, &lc) != 0)
        return 2;

    /* Block the signals before any thread exists, so only the signal thread takes them. */
    signal_ctx_t sc = {0};
    sigemptyset(&sc.set);
    sigaddset(&sc.set, SIGTERM);
    sigaddset(&sc.set, SIGINT);
    sigaddset(&sc.set, SIGHUP);
    sigaddset(&sc.set, SIGUSR1);
    sigaddset(&sc.set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGBUS, main_on_sigbus);

    if (cfg.leases) { /* a standby on the same volume waits for the directory */
        cfg.lock_wait = main_pause;
        cfg.lock_wait_ctx = &sc;
    }
    daemon_t *d = NULL;
    daemon_status_t st = daemon_create(&cfg, &d);
    if (st == DAEMON_ESTOPPED)
        return 0;
    if (st != DAEMON_OK) {
        log_write(LOG_ERROR, "cannot start: %s", daemon_status_str(st));
        return 1;
    }
    http_server_t *http = NULL;
    static front_t *health_front; /* main_health's view of the front, set once it exists */
    const char *listen = flag_value(&values, "metrics-listen");
    if (text_given(listen)) {
        http_status_t hst = http_server_start(listen, main_metrics_refresh, d, &http);
        if (hst != HTTP_OK) {
            log_write(LOG_ERROR, "%s %s: %s", flag_label(&values, "metrics-listen"), listen,
                      http_status_str(hst));
            daemon_destroy(d);
            return 1;
        }
        daemon_metrics_sink_set(d, main_metrics_offer, http);
        http_server_health_set(http, main_health, &health_front);
        log_write(LOG_INFO, "Prometheus metrics on port %d (--metrics-listen %s)%s",
                  http_server_port(http), listen,
                  listen[0] == ':' ? ": every address of this host" : "");
    }
    if (nats_Open(-1) != NATS_OK) {
        log_write(LOG_ERROR, "cannot initialise the NATS library");
        http_server_stop(http);
        daemon_destroy(d);
        return 1;
    }
    fc.pause = main_pause;
    fc.pause_ctx = &sc;
    front_t *f = front_create(d);
    if (f == NULL || (st = front_connect(f, &fc)) != DAEMON_OK) {
        front_destroy(f); /* closes the NATS library */
        http_server_stop(http);
        daemon_destroy(d);
        return sc.stopped ? 0 : 1;
    }
    uint32_t payload_cap = 0;
    if (front_payload_cap(f, cfg.max_payload, &payload_cap) != DAEMON_OK) {
        front_destroy(f);
        http_server_stop(http);
        daemon_destroy(d);
        return 1;
    }
    __atomic_store_n(&health_front, f, __ATOMIC_RELEASE);
    daemon_publish_set(d, front_publish, f);
    daemon_nats_state_set(d, main_nats_state, f);
    daemon_max_payload_set(d, payload_cap);
    daemon_reply_max_set(d, front_server_max_payload(f));
    lease_glue_t glue = {d, f};
    lease_kv_t *leases = NULL;
    if (main_leases_start(&lc, &cfg, &glue, &sc, &leases) != 0) {
        http_server_stop(http); /* it reads f */
        front_destroy(f);
        daemon_destroy(d);
        return sc.stopped ? 0 : 1;
    }
    sc.d = d;
    sc.f = f;
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_thread, &sc) != 0) {
        log_write(LOG_ERROR, "cannot start the signal thread");
        lease_kv_destroy(leases);
        http_server_stop(http);
        front_destroy(f);
        daemon_destroy(d);
        return 1;
    }
    log_write(LOG_INFO, "serving %s on %s (store %s%s%s)", cfg.prefix, fc.servers,
              cfg.store_memory ? "memory" : "disk ", cfg.store_memory ? "" : cfg.data_dir,
              cfg.durability_power ? ", power-loss durability" : "");
    log_write(LOG_INFO, "version %s, protocol %d, instance %s", version_string(), VERSION_PROTOCOL,
              daemon_instance_id(d));
    log_notice("lanesched: ready");
    st = daemon_run(d);
    int lost = front_lost(f); /* front.c invariant 12 */
    /* The signal thread uses f and d: when the owner stopped on its own (a store failure), wake
     * it and wait, so a late SIGTERM cannot reach a destroyed front. */
    atomic_store(&sc.released, 1);
    pthread_kill(sig_thread, SIGTERM);
    pthread_join(sig_thread, NULL);
    lease_kv_destroy(leases); /* after the last flush: the leases are released for a standby */
    http_server_stop(http);   /* its threads post to d and read f */
    front_destroy(f);         /* closes the NATS library and waits for its threads */
    daemon_destroy(d);
    log_write(LOG_INFO, "stopped");
    return st == DAEMON_OK && !lost ? 0 : 1;
}
