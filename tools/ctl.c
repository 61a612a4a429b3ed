/*
 * ctl.c - lanesched-ctl: ask a running lanesched for its figures.
 *
 *   lanesched-ctl stats            the lanes.stats JSON document, as the daemon sent it
 *   lanesched-ctl figures          the figures that matter, one per line: tokens received /
 *                                  routed / completed and their difference, padding waste,
 *                                  shape switches, lanes opened and reused, GPU busy seconds
 *                                  and queue wait p50 / p99 as the daemon measured them
 *   lanesched-ctl wait-drained     waits until tokens completed == tokens received (bounded by
 *                                  --timeout-ms) and exits 0, else 1
 *
 * Invariant: reads only; it never changes the daemon's state. The figures are read from the
 * document's "counters" object, parsed with jansson; a counter that is absent reads as -1.
 * Rejected: strstr on "\"key\":" over the raw text (this file's first version): it takes the
 * first match anywhere in the document and depends on the writer's spacing.
 */
#include <inttypes.h>
#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *server;
    const char *prefix;
    long timeout_ms;
} ctl_opts_t;

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

static char *ctl_stats(natsConnection *nc, const ctl_opts_t *o)
{
    char subject[256];
    snprintf(subject, sizeof(subject), "%s.stats", o->prefix);
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, nc, subject, "", 0, 5000);
    if (s != NATS_OK) {
        fprintf(stderr, "lanesched-ctl: no answer on %s: %s\n", subject, natsStatus_GetText(s));
        return NULL;
    }
    char *json = strndup(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
    return json;
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
    printf("received - completed    %.0f\n", rx - done);
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

static void usage(FILE *f)
{
    fprintf(f, "usage: lanesched-ctl [--server URL] [--prefix P] [--timeout-ms N] "
               "stats|figures|wait-drained\n"
               "  --server      NATS URL (default $LANESCHED_SERVER or nats://127.0.0.1:4222)\n"
               "  --prefix      subject prefix (default lanes)\n"
               "  --timeout-ms  how long wait-drained waits (default 30000)\n");
}

int main(int argc, char **argv)
{
    const char *env = getenv("LANESCHED_SERVER");
    ctl_opts_t o = {env ? env : "nats://127.0.0.1:4222", "lanes", 30000};
    const char *cmd = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--server") == 0 && i + 1 < argc)
            o.server = argv[++i];
        else if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc)
            o.prefix = argv[++i];
        else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc)
            o.timeout_ms = atol(argv[++i]);
        else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (cmd == NULL && argv[i][0] != '-')
            cmd = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (cmd == NULL) {
        usage(stderr);
        return 2;
    }
    natsConnection *nc = NULL;
    if (natsConnection_ConnectTo(&nc, o.server) != NATS_OK) {
        fprintf(stderr, "lanesched-ctl: cannot connect to %s\n", o.server);
        return 1;
    }
    int rc = 1;
    if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "figures") == 0) {
        char *json = ctl_stats(nc, &o);
        if (json != NULL && cmd[0] == 's') {
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
    } else if (strcmp(cmd, "wait-drained") == 0) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            char *json = ctl_stats(nc, &o);
            json_t *stats = json != NULL ? ctl_parse(json) : NULL;
            int drained = stats != NULL && ctl_counter(stats, "tokens_received") ==
                                               ctl_counter(stats, "tokens_completed");
            json_decref(stats);
            free(json);
            if (drained) {
                rc = 0;
                break;
            }
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > o.timeout_ms)
                break;
            nats_Sleep(100);
        }
    } else {
        usage(stderr);
        rc = 2;
    }
    natsConnection_Destroy(nc);
    nats_Close();
    return rc;
}
