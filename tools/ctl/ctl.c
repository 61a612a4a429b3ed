/*
 * ctl.c - lanesched-ctl: look at a running lanesched over NATS.
 *
 *   lanesched-ctl stats            the lanes.stats JSON document, as the daemon sent it
 *   lanesched-ctl figures          the figures that matter, one per line: tokens received /
 *                                  routed / completed and their difference, their balance
 *                                  with the restored, queued and in-flight ones, padding waste,
 *                                  shape switches, lanes opened and reused, GPU busy seconds
 *                                  and queue wait p50 / p99 as the daemon measured them
 *   lanesched-ctl wait-drained     waits until nothing is queued or in flight (bounded by
 *                                  --timeout-ms) and exits 0, else 1 saying what is left
 *   lanesched-ctl metrics          the Prometheus text (<prefix>.metrics), as /metrics serves it
 *   lanesched-ctl ping             every instance that answers $SRV.PING.lanesched within
 *                                  --timeout-ms, one line each; exit 1 when none does (the
 *                                  container healthcheck)
 *   lanesched-ctl watch [SUBJECT]  every lanesched message as one JSON line (watch.c)
 *
 * Flags and environment: the connection flags of every tool (clients/c/tools/cli.h: --server,
 * --prefix, --user, --password, --token, --creds, --tls*, LANESCHED_SERVER, LANESCHED_PREFIX,
 * ...), then --timeout-ms, --no-replies, --version, --help. Every command line is checked before
 * connecting, the files the flags name and --tls-cert paired with --tls-key too (conn.c); a
 * mistake is reported in common/usage.h's words or naming its flag, with exit status 2.
 *
 * Invariant: reads only; it never changes the daemon's state. The figures are read from the
 * document's "counters" object, parsed with jansson; a counter that is absent reads as -1.
 * Rejected: strstr on "\"key\":" over the raw text: it takes the
 * first match anywhere in the document and depends on the writer's spacing.
 */
#include "tools/ctl/ctl.h"

#include "clients/c/tools/cli.h"
#include "codec/codec.h"
#include "common/usage.h"
#include "common/version.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CTL_PROGRAM "lanesched-ctl"

/* The stats document parsed (json_decref), or NULL with the reason on stderr. */
static json_t *ctl_parse(const char *json)
{
    json_error_t e;
    json_t *root = json_loads(json, 0, &e);
    if (root == NULL)
        fprintf(stderr, "lanesched-ctl: the stats are not JSON (line %d: %s)\n", e.line, e.text);
    return root;
}

/* counters.<key> of the parsed document; -1 when absent or not a number. */
static double ctl_counter(const json_t *stats, const char *key)
{
    const json_t *v = json_object_get(json_object_get(stats, "counters"), key);
    return json_is_number(v) ? json_number_value(v) : -1.0;
}

/* The reply to a request on <prefix>.<verb>, NUL-terminated (free), or NULL (reason on stderr). */
static char *ctl_request(natsConnection *nc, const ctl_opts_t *o, const char *verb)
{
    char subject[256];
    snprintf(subject, sizeof(subject), "%s.%s", o->conn.prefix, verb);
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, nc, subject, "", 0, 5000);
    if (s != NATS_OK) {
        fprintf(stderr, "lanesched-ctl: no answer on %s: %s\n", subject, natsStatus_GetText(s));
        return NULL;
    }
    char *text = strndup(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
    return text;
}

static void ctl_figures(const json_t *json)
{
    double rx = ctl_counter(json, "tokens_received"), rt = ctl_counter(json, "tokens_routed");
    double done = ctl_counter(json, "tokens_completed");
    double padded = ctl_counter(json, "padded_tokens"), real = ctl_counter(json, "real_tokens");
    printf("items received          %.0f\n", ctl_counter(json, "items_received"));
    printf("items completed         %.0f\n", ctl_counter(json, "items_completed"));
    printf("tokens received         %.0f\n", rx);
    printf("tokens routed           %.0f (redeliveries count again)\n", rt);
    printf("tokens completed        %.0f\n", done);
    double restored = ctl_counter(json, "tokens_restored");
    double queued = ctl_counter(json, "tokens_queued"),
           flying = ctl_counter(json, "tokens_in_flight");
    printf("received - completed    %.0f%s\n", rx - done,
           restored > 0 ? " (tokens restored from the store at start are completed, not received)"
                        : "");
    printf("tokens balance          restored %.0f + received %.0f - completed %.0f - queued %.0f - "
           "in flight %.0f = %.0f (0: nothing lost or made up)\n",
           restored, rx, done, queued, flying, restored + rx - done - queued - flying);
    printf("queued / in flight      %.0f / %.0f items\n", ctl_counter(json, "items_queued"),
           ctl_counter(json, "pending_items"));
    printf("padding waste           %.3f%% (padded %.0f, real %.0f)\n",
           padded > 0 ? 100.0 * (padded - real) / padded : 0.0, padded, real);
    printf("shape switches          %.0f\n", ctl_counter(json, "shape_switches"));
    printf("lanes opened / reuses   %.0f / %.0f\n", ctl_counter(json, "lanes_opened"),
           ctl_counter(json, "lane_reuses"));
    printf("items returned          %.0f\n", ctl_counter(json, "items_returned"));
    printf("duplicates              %.0f\n", ctl_counter(json, "duplicates"));
    printf("dead-lettered           %.0f\n", ctl_counter(json, "dead_lettered"));
    printf("GPU busy seconds        %.3f (%.0f batches, dispatch to ack as the daemon measured)\n",
           ctl_counter(json, "gpu_busy_ns") / 1e9, ctl_counter(json, "gpu_busy_batches"));
    printf("queue wait p50 / p99    %.1f / %.1f ms (max %.1f)\n",
           ctl_counter(json, "wait_p50_ns") / 1e6, ctl_counter(json, "wait_p99_ns") / 1e6,
           ctl_counter(json, "wait_max_ns") / 1e6);
    printf("batches / merged        %.0f / %.0f (across neighbouring lanes)\n",
           ctl_counter(json, "batches"), ctl_counter(json, "merged_batches"));
}

static int ctl_stats_cmd(natsConnection *nc, const ctl_opts_t *o, int figures)
{
    char *json = ctl_request(nc, o, "stats");
    int rc = 1;
    if (json != NULL && !figures) {
        printf("%s\n", json); /* as the daemon sent it */
        rc = 0;
    } else if (json != NULL) {
        json_t *stats = ctl_parse(json);
        if (stats != NULL) {
            ctl_figures(stats);
            json_decref(stats);
            rc = 0;
        }
    }
    free(json);
    return rc;
}

/* Drained: nothing queued and nothing in flight, which also holds after a restart that
 * recovered items (they count as completed, never as received); a daemon without the
 * items_queued counter is drained when the tokens it received were all completed. */
static int ctl_drained(const json_t *stats, char *why, size_t cap)
{
    double queued = ctl_counter(stats, "items_queued"),
           inflight = ctl_counter(stats, "pending_items");
    double rx = ctl_counter(stats, "tokens_received"),
           done = ctl_counter(stats, "tokens_completed");
    if (queued < 0)
        snprintf(why, cap, "tokens received %.0f, completed %.0f", rx, done);
    else
        snprintf(why, cap, "%.0f items queued, %.0f in flight", queued, inflight);
    return queued < 0 ? rx == done : queued == 0 && inflight == 0;
}

static int ctl_wait_drained(natsConnection *nc, const ctl_opts_t *o)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char why[128] = "no stats answer";
    for (;;) {
        char *json = ctl_request(nc, o, "stats");
        json_t *stats = json != NULL ? ctl_parse(json) : NULL;
        int drained = stats != NULL && ctl_drained(stats, why, sizeof(why));
        json_decref(stats);
        free(json);
        if (drained)
            return 0;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > o->timeout_ms) {
            fprintf(stderr, "lanesched-ctl: not drained after %ld ms: %s\n", o->timeout_ms, why);
            return 1;
        }
        nats_Sleep(100);
    }
}

static int ctl_metrics(natsConnection *nc, const ctl_opts_t *o)
{
    char *text = ctl_request(nc, o, "metrics");
    if (text == NULL)
        return 1;
    size_t refused = strlen(CODEC_METRICS_REFUSED_PREFIX);
    int ok = strncmp(text, CODEC_METRICS_REFUSED_PREFIX, refused) != 0;
    if (ok)
        fputs(text, stdout);
    else
        fprintf(stderr, "lanesched-ctl: the daemon sent no metrics: %s", text + refused);
    free(text);
    return ok ? 0 : 1;
}

/* Every $SRV.PING.lanesched answer within the timeout: "id version rtt" per line. */
static int ctl_ping(natsConnection *nc, const ctl_opts_t *o)
{
    natsInbox *nuid = NULL;
    char inbox[320]; /* an inbox prefix (a subject) and a NUID */
    natsSubscription *sub = NULL;
    int found = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (natsInbox_Create(&nuid) == NATS_OK) /* "_INBOX.<nuid>", under --inbox-prefix if set */
        snprintf(inbox, sizeof(inbox), "%s.%s",
                 o->conn.inbox_prefix != NULL ? o->conn.inbox_prefix : "_INBOX",
                 strchr(nuid, '.') != NULL ? strchr(nuid, '.') + 1 : nuid);
    if (nuid == NULL || natsConnection_SubscribeSync(&sub, nc, (const char *)inbox) != NATS_OK ||
        natsConnection_PublishRequest(nc, "$SRV.PING.lanesched", (const char *)inbox, "", 0) !=
            NATS_OK) {
        fprintf(stderr, "lanesched-ctl: cannot send $SRV.PING.lanesched\n");
        goto out;
    }
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        int64_t ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        natsMsg *m = NULL;
        if (ms >= o->timeout_ms || natsSubscription_NextMsg(&m, sub, o->timeout_ms - ms) != NATS_OK)
            break;
        json_t *doc = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
        const char *id = json_string_value(json_object_get(doc, "id"));
        const char *version = json_string_value(json_object_get(doc, "version"));
        const char *proto = json_string_value(
            json_object_get(json_object_get(doc, "metadata"), "protocol_version"));
        if (id != NULL) {
            printf("lanesched %s version %s protocol %s rtt %" PRId64 " ms\n", id,
                   version ? version : "?", proto ? proto : "?", ms);
            found++;
        }
        json_decref(doc);
        natsMsg_Destroy(m);
    }
    if (found == 0)
        fprintf(stderr, "lanesched-ctl: no lanesched answered $SRV.PING.lanesched within %ld ms\n",
                o->timeout_ms);
out:
    /* UNSUB, then the PONG, then the free: nats.c 3.4's read loop may still hold a late
     * answer's subscription until it reads the PONG (nats.c issue #637, fixed in 3.6). */
    if (sub != NULL) {
        natsSubscription_Unsubscribe(sub);
        natsConnection_FlushTimeout(nc, 1000);
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(nuid);
    return found > 0 ? 0 : 1;
}

static void usage(FILE *f)
{
    fputs("usage: lanesched-ctl [flags] COMMAND\n"
          "Commands:\n"
          "  stats                   the lanes.stats JSON document\n"
          "  figures                 tokens received / routed / completed, waste, switches\n"
          "  wait-drained            wait until nothing is queued or in flight (exit 1 on\n"
          "                          timeout, saying what is left)\n"
          "  metrics                 the Prometheus text, as --metrics-listen serves it\n"
          "  ping                    every instance answering $SRV.PING.lanesched (exit 1: none)\n"
          "  watch [SUBJECT]         every lanesched message as one JSON line (default\n"
          "                          SUBJECT <prefix>.>, with $SRV.> and replies on _INBOX.>)\n",
          f);
    cli_conn_help(f);
    fputs("Other flags:\n"
          "  --timeout-ms N          how long wait-drained and ping wait (default 30000 / 1000)\n"
          "  --no-replies            watch: do not follow replies on _INBOX.>\n"
          "  --version               the version and the protocol version\n"
          "  --help                  this text\n",
          f);
}

int main(int argc, char **argv)
{
    cli_program = CTL_PROGRAM;
    ctl_opts_t o = {.timeout_ms = -1, .replies = true};
    cli_conn_defaults(&o.conn);
    const char *cmd = NULL, *arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int rc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0) {
            version_print(stdout, CTL_PROGRAM);
            return 0;
        }
        if ((rc = cli_conn_flag(argc, argv, &i, &o.conn)) != 0) {
            if (rc < 0)
                return USAGE_EXIT;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--timeout-ms", &v)) != 0) {
            uint64_t ms = 0;
            if (rc < 0 || !cli_u64_parse("--timeout-ms", v, 0, INT32_MAX, &ms))
                return USAGE_EXIT;
            o.timeout_ms = (long)ms;
        } else if (strcmp(a, "--no-replies") == 0) {
            o.replies = false;
        } else if (a[0] == '-') {
            usage_unknown_flag(CTL_PROGRAM, a);
            return USAGE_EXIT;
        } else if (cmd == NULL) {
            cmd = a;
        } else if (arg == NULL && strcmp(cmd, "watch") == 0) {
            arg = a;
        } else {
            usage_unexpected(CTL_PROGRAM, a);
            return USAGE_EXIT;
        }
    }
    static const char *const commands[] = {"stats",   "figures", "wait-drained",
                                           "metrics", "ping",    "watch"};
    int known = 0;
    for (size_t k = 0; cmd != NULL && k < sizeof(commands) / sizeof(commands[0]); k++)
        known |= strcmp(cmd, commands[k]) == 0;
    if (cmd == NULL) {
        usage(stderr);
        return USAGE_EXIT;
    }
    if (!known) { /* before connecting */
        usage_unknown_command(CTL_PROGRAM, cmd);
        return USAGE_EXIT;
    }
    if (ctl_conn_check(&o) != 0) /* before connecting */
        return USAGE_EXIT;
    if (o.timeout_ms < 0)
        o.timeout_ms = strcmp(cmd, "ping") == 0 ? 1000 : 30000;
    natsConnection *nc = NULL;
    if (ctl_connect(&o, strcmp(cmd, "watch") == 0, &nc) != 0)
        return 1;
    int rc = 1;
    if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "figures") == 0)
        rc = ctl_stats_cmd(nc, &o, cmd[0] == 'f');
    else if (strcmp(cmd, "wait-drained") == 0)
        rc = ctl_wait_drained(nc, &o);
    else if (strcmp(cmd, "metrics") == 0)
        rc = ctl_metrics(nc, &o);
    else if (strcmp(cmd, "ping") == 0)
        rc = ctl_ping(nc, &o);
    else
        rc = ctl_watch(nc, &o, arg);
    natsConnection_Destroy(nc);
    nats_Close();
    return rc;
}
