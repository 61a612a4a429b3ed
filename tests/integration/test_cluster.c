/*
 * test_cluster.c - lanesched on a real NATS cluster: three nats-servers clustered on loopback
 * ports with JetStream (the lease bucket replicated 3), producers connected to node 0, consumers
 * to node 1, lanesched instances to node 2, every client and instance reconnecting to the
 * others when its node goes. One scenario per process:
 *
 *   test_cluster CASE PATH_TO_LANESCHED [PATH_TO_NATS_SERVER]
 *
 *   failover   two instances configured for one model on one data directory (the volume the
 *              standby re-attaches): exactly one serves; SIGKILL it; the other takes over within
 *              lease expiry plus recovery, and every acknowledged item is delivered (none lost;
 *              duplicates only as at-least-once allows).
 *   cycles     LANES_CLUSTER_CYCLES (default 50) kill/restart cycles of whichever instance
 *              serves, under load: the record of which instance dispatched each batch, and of
 *              every lease deadline each promised itself, shows no two instances serving the
 *              model at the same time; nothing acknowledged is lost.
 *   node_kill  SIGKILL of the instances' nats-server under load, restarted later: clients and
 *              instances reconnect to the other nodes, nothing acknowledged is lost.
 *   split      instances A and B own disjoint models (each its own data directory); producers
 *              of both models on two nodes; each instance serves only its own.
 *   partition  A (node 2, its own volume) serves; node 2 is SIGSTOPped, so A is cut off from the
 *              fabric but alive: A fences itself before its lease can expire, B (node 0, its own
 *              volume) takes over new work; node 2 resumes and A stays a standby; then B is
 *              killed and A serves again, delivering the work that waited on its volume.
 *
 * The total-queue check (Jepsen's terms): an item is acknowledged when a SubmitReply said
 * ACCEPTED or DUPLICATE; lost = acknowledged and never delivered; duplicated = delivered more
 * than once (allowed: at-least-once); unexpected = delivered but never acknowledged (allowed: a
 * reply lost in a crash). An item whose ack got no answer (the instance died) is either
 * completed (the ack was applied before the crash) or delivered again by the next owner; both
 * are correct, so a missing ack answer alone is not a loss.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "clients/c/lanes_client.h"
#include "common/clock.h"
#include "support/cluster.h"
#include "support/fs.h"
#include "support/port.h"
#include "support/spawn.h"

#define MAX_ITEMS     200000
#define ITEMS_PER_MSG 16
#define TOKENS        96
#define LEASE_TTL_MS  1500
#define DRAIN_MS      90000
#define MAX_INSTANCES 2
#define MAX_CONSUMERS 4
/* A new cluster elects its JetStream leaders and creates the bucket first: slow on a busy host. */
#define FIRST_SERVE_MS 90000
#define MAX_PRODUCERS  2

/* ---- plumbing ------------------------------------------------------------------------------ */

static char g_case[32];
static char g_dir[256];
static char g_daemon[512];
static cluster_t g_cluster;
static uint64_t g_t0;

typedef struct {
    char name[8];
    char log[400];
    char data_dir[400];
    const char *models;
    int node; /* the nats-server it connects to first */
    int metrics_port;
    volatile pid_t pid;
} instance_t;

static instance_t g_inst[MAX_INSTANCES];

static void cleanup(void)
{
    for (int i = 0; i < MAX_INSTANCES; i++)
        spawn_kill(&g_inst[i].pid);
    for (int i = 0; i < CLUSTER_NODES; i++)
        spawn_kill(&g_cluster.pid[i]);
}

static void tail_print(const char *path, int lines)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "tail -n %d '%s' 2>/dev/null", lines, path);
    fflush(NULL);
    if (system(cmd) == -1)
        fprintf(stderr, "(cannot show %s)\n", path);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_cluster[%s]: FAIL: ", g_case);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    for (int i = 0; i < MAX_INSTANCES; i++) {
        if (g_inst[i].log[0] != '\0') {
            fprintf(stderr, "--- instance %s log (last lines)\n", g_inst[i].name);
            tail_print(g_inst[i].log, 25);
        }
    }
    cleanup();
    fprintf(stderr, "test_cluster[%s]: files kept in %s\n", g_case, g_dir);
    _exit(1);
}

#define REQUIRE(cond, ...)     \
    do {                       \
        if (!(cond))           \
            fail(__VA_ARGS__); \
    } while (0)

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("test_cluster[%s] +%.3fs: ", g_case, (double)(clock_mono_ns() - g_t0) / 1e9);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t now_ms(void)
{
    return clock_mono_ns() / 1000000;
}

/* ---- instances ----------------------------------------------------------------------------- */

static void instance_start(int i)
{
    instance_t *in = &g_inst[i];
    char url[64], bucket[64];
    cluster_url(&g_cluster, in->node, url, sizeof(url));
    snprintf(bucket, sizeof(bucket), "leases_%s", g_case);
    char ttl[16], listen[32];
    snprintf(ttl, sizeof(ttl), "%d", LEASE_TTL_MS);
    if (in->metrics_port == 0)
        in->metrics_port = port_pick();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", in->metrics_port);
    char *argv[] = {g_daemon,
                    "--server",
                    url,
                    "--data-dir",
                    in->data_dir,
                    "--models",
                    (char *)in->models,
                    "--lease-bucket",
                    bucket,
                    "--lease-ttl-ms",
                    ttl,
                    "--log-level",
                    "debug",
                    "--heartbeat-ms",
                    "500",
                    "--dead-after-ms",
                    "3000",
                    "--ack-wait-ms",
                    "5000",
                    "--metrics-listen",
                    listen,
                    NULL};
    FILE *log = fopen(in->log, "a"); /* where this life's lines start (instance_serves) */
    REQUIRE(log != NULL, "cannot write %s", in->log);
    fprintf(log, "test_cluster: instance %s started\n", in->name);
    fclose(log);
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.log_path = in->log;
    REQUIRE(spawn_start(argv, &opts, &in->pid) == SPAWN_OK, "cannot start %s", in->name);
}

/* 1 when the instance's last serving transition of this life, in its own log, says it serves
 * `model`. */
static int instance_serves(const char *instance_log, const char *model)
{
    FILE *f = fopen(instance_log, "r");
    if (f == NULL)
        return 0;
    char line[1024], on[300], off[300];
    snprintf(on, sizeof(on), "model %s: lease held, serving", model);
    snprintf(off, sizeof(off), "model %s: lease not held, not serving", model);
    int serving = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, on) != NULL)
            serving = 1;
        else if (strstr(line, off) != NULL || strstr(line, "test_cluster: instance") != NULL)
            serving = 0; /* a restart starts not serving */
    }
    fclose(f);
    return serving;
}

/* Which instance serves model (its index), waiting up to wait_ms; -1 if none. */
static int serving_wait(const char *model, int exclude, uint64_t wait_ms)
{
    uint64_t end = now_ms() + wait_ms;
    for (;;) {
        for (int i = 0; i < MAX_INSTANCES; i++) {
            if (i != exclude && g_inst[i].pid > 0 && g_inst[i].log[0] &&
                instance_serves(g_inst[i].log, model))
                return i;
        }
        if (now_ms() >= end)
            return -1;
        sleep_ms(20);
    }
}

/* The items the instance holds (queued + in flight, every model), from its /metrics; -1 when it
 * does not answer. */
static long instance_backlog(const instance_t *in)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)in->metrics_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    static char buf[1 << 20];
    size_t n = 0;
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
        close(fd);
        return -1;
    }
    for (ssize_t r; n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0;)
        n += (size_t)r;
    close(fd);
    buf[n] = '\0';
    if (strstr(buf, " 200 ") == NULL)
        return -1;
    long total = 0;
    for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (strncmp(line, "lanesched_queued_items", 22) != 0 &&
            strncmp(line, "lanesched_inflight_items", 24) != 0)
            continue;
        const char *v = strrchr(line, ' ');
        total += v != NULL ? (long)strtod(v + 1, NULL) : 0;
    }
    return total;
}

/* Waits until the instance holds nothing (its volume drained), at most wait_ms. */
static void instance_drain_wait(const instance_t *in, uint64_t wait_ms)
{
    uint64_t end = now_ms() + wait_ms;
    long left = -1;
    while ((left = instance_backlog(in)) != 0 && now_ms() < end)
        sleep_ms(100);
    REQUIRE(left == 0, "instance %s still holds %ld items", in->name, left);
}

/* ---- load: producers and consumers --------------------------------------------------------- */

typedef struct {
    atomic_uchar acked[MAX_ITEMS];      /* a SubmitReply said ACCEPTED or DUPLICATE */
    atomic_uchar completed[MAX_ITEMS];  /* delivered and its ack answered (information) */
    atomic_ushort delivered[MAX_ITEMS]; /* deliveries seen by consumers */
    atomic_uint next_id;
    atomic_int stop_producers, stop_consumers;
    atomic_ulong submits_failed, acks_failed, reregistrations;
} load_t;

static load_t g_load;

typedef struct {
    pthread_t thread;
    int node;
    const char *model;
} worker_t;

static lc_client_t *client_open(int node, const char *name)
{
    char url[64], err[256];
    cluster_url(&g_cluster, node, url, sizeof(url));
    lc_client_config_t cfg;
    lc_client_config_init(&cfg);
    cfg.servers = url;
    cfg.name = name;
    lc_client_t *c = NULL;
    lc_status_t st = lc_client_open(&cfg, err, sizeof(err), &c);
    REQUIRE(st == LC_OK, "client on node %d: %s", node, err);
    return c;
}

static void *producer_main(void *arg)
{
    worker_t *w = arg;
    lc_client_t *c = client_open(w->node, "producer");
    while (!atomic_load(&g_load.stop_producers)) {
        uint32_t first = atomic_fetch_add(&g_load.next_id, ITEMS_PER_MSG);
        if (first + ITEMS_PER_MSG > MAX_ITEMS)
            break;
        codec_work_item_t items[ITEMS_PER_MSG];
        char ids[ITEMS_PER_MSG][16];
        for (int i = 0; i < ITEMS_PER_MSG; i++) {
            int n = snprintf(ids[i], sizeof(ids[i]), "i%u", first + (unsigned)i);
            items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], (size_t)n},
                                           .has_signature = true,
                                           .signature = 0x91f47f2f45b64efdull,
                                           .tokens = TOKENS + (uint32_t)(i * 7),
                                           .payload = {(const uint8_t *)"p", 1}};
        }
        lc_item_result_t res[ITEMS_PER_MSG];
        lc_status_t st = LC_ETIMEOUT;
        /* retry the very same ids until an answer: dedupe makes it safe */
        for (int attempt = 0; attempt < 40 && st != LC_OK; attempt++) {
            st = lc_submit_request(c, w->model, items, ITEMS_PER_MSG, 1000, 2, res, NULL);
            int refused = 0;
            for (int i = 0; st == LC_OK && i < ITEMS_PER_MSG; i++)
                refused |= res[i].status == CODEC_ITEM_REJECTED;
            if (st == LC_OK && refused) /* not_owner during a takeover: retry */
                st = LC_EREFUSED;
            if (st != LC_OK)
                sleep_ms(100);
            if (atomic_load(&g_load.stop_producers) > 1)
                break;
        }
        if (st != LC_OK) {
            atomic_fetch_add(&g_load.submits_failed, 1);
            continue;
        }
        for (int i = 0; i < ITEMS_PER_MSG; i++)
            atomic_store(&g_load.acked[first + (unsigned)i], 1);
    }
    lc_client_close(c);
    return NULL;
}

static uint32_t item_index(codec_bytes_t id)
{
    char text[16];
    size_t n = id.len < sizeof(text) - 1 ? id.len : sizeof(text) - 1;
    memcpy(text, id.ptr, n);
    text[n] = '\0';
    unsigned long v = text[0] == 'i' ? strtoul(text + 1, NULL, 10) : MAX_ITEMS;
    return v < MAX_ITEMS ? (uint32_t)v : MAX_ITEMS;
}

static void *consumer_main(void *arg)
{
    worker_t *w = arg;
    lc_client_t *c = client_open(w->node, "consumer");
    lc_consumer_config_t cc;
    lc_consumer_config_init(&cc);
    cc.model = w->model;
    cc.max_batch_size = 8;
    cc.max_batch_tokens = 8192;
    cc.request_timeout_ms = 1000;
    cc.request_retries = 1;
    lc_consumer_t *con = NULL;
    while (con == NULL && !atomic_load(&g_load.stop_consumers)) {
        if (lc_consumer_open(c, &cc, &con) != LC_OK) {
            con = NULL;
            sleep_ms(200);
        }
    }
    uint64_t lost_seen = 0;
    while (con != NULL && !atomic_load(&g_load.stop_consumers)) {
        codec_batch_t *b = NULL;
        lc_status_t st = lc_batch_next(con, 1000, &b);
        lc_consumer_stats_t cs;
        lc_consumer_stats_get(con, &cs);
        /* The instance that issued our id is gone when the pull gets no answer at all (a
         * standby stays silent about ids it never issued) or the daemon says so: register
         * again, the owner of the model answers. */
        if (st == LC_EUNKNOWN_CONSUMER || st == LC_ENORESPONDERS ||
            (st == LC_ETIMEOUT && cs.pulls_lost > lost_seen)) {
            lost_seen = cs.pulls_lost;
            lc_status_t rs = lc_consumer_register(con);
            if (getenv("LANES_CLUSTER_VERBOSE") != NULL)
                say("consumer of %s: %s, registering again: %s (%s)", w->model, lc_status_str(st),
                    lc_status_str(rs),
                    rs == LC_OK ? lc_consumer_registered_get(con)->consumer_id
                                : lc_client_error_get(c));
            if (rs == LC_OK)
                atomic_fetch_add(&g_load.reregistrations, 1);
            else
                sleep_ms(100);
            continue;
        }
        if (st != LC_OK)
            continue;
        for (size_t i = 0; i < b->n_items; i++) {
            uint32_t k = item_index(b->items[i].id);
            REQUIRE(k < MAX_ITEMS, "an item that no producer made");
            atomic_fetch_add(&g_load.delivered[k], 1);
        }
        lc_ack_reply_t r;
        if (lc_ack_all_send(con, b->batch_id, 2000, &r) == LC_OK) {
            for (size_t i = 0; i < b->n_items; i++)
                atomic_store(&g_load.completed[item_index(b->items[i].id)], 1);
        } else {
            atomic_fetch_add(&g_load.acks_failed, 1); /* redelivered by the new owner */
        }
        codec_batch_destroy(b);
    }
    lc_consumer_close(con);
    lc_client_close(c);
    return NULL;
}

static worker_t g_producers[MAX_PRODUCERS], g_consumers[MAX_CONSUMERS];
static int g_n_producers, g_n_consumers;

static void load_start(const char *const *models, int n_models)
{
    memset(&g_load, 0, sizeof(g_load));
    g_n_producers = g_n_consumers = 0;
    for (int m = 0; m < n_models; m++) {
        worker_t *p = &g_producers[g_n_producers++];
        *p = (worker_t){.node = m % 2, .model = models[m]}; /* producers on nodes 0 (and 1) */
        REQUIRE(pthread_create(&p->thread, NULL, producer_main, p) == 0, "producer thread");
        for (int k = 0; k < 2; k++) {
            worker_t *c = &g_consumers[g_n_consumers++];
            *c = (worker_t){.node = 1, .model = models[m]}; /* consumers on node 1 */
            REQUIRE(pthread_create(&c->thread, NULL, consumer_main, c) == 0, "consumer thread");
        }
    }
}

static uint32_t load_acked(void)
{
    uint32_t n = 0, top = atomic_load(&g_load.next_id);
    for (uint32_t i = 0; i < top && i < MAX_ITEMS; i++)
        n += atomic_load(&g_load.acked[i]);
    return n;
}

/* Stops the producers, waits until every acknowledged item is delivered (or DRAIN_MS), stops the
 * consumers, and checks the total queue. */
static void load_finish(void)
{
    atomic_store(&g_load.stop_producers, 1);
    for (int i = 0; i < g_n_producers; i++)
        pthread_join(g_producers[i].thread, NULL);
    uint32_t top = atomic_load(&g_load.next_id);
    if (top > MAX_ITEMS)
        top = MAX_ITEMS;
    uint64_t end = now_ms() + DRAIN_MS;
    uint32_t lost = 0;
    for (;;) {
        lost = 0;
        for (uint32_t i = 0; i < top; i++)
            lost += atomic_load(&g_load.acked[i]) && atomic_load(&g_load.delivered[i]) == 0;
        if (lost == 0 || now_ms() >= end)
            break;
        sleep_ms(100);
    }
    atomic_store(&g_load.stop_consumers, 1);
    for (int i = 0; i < g_n_consumers; i++)
        pthread_join(g_consumers[i].thread, NULL);
    uint32_t acked = 0, duplicated = 0, unexpected = 0, unconfirmed = 0;
    for (uint32_t i = 0; i < top; i++) {
        unsigned d = atomic_load(&g_load.delivered[i]);
        acked += atomic_load(&g_load.acked[i]);
        duplicated += d > 1;
        unexpected += d > 0 && !atomic_load(&g_load.acked[i]);
        unconfirmed += d > 0 && !atomic_load(&g_load.completed[i]);
    }
    say("total queue: %u acknowledged, %u lost, %u duplicated, %u unexpected (%u delivered with "
        "their ack unanswered); %lu submits failed, %lu acks failed, %lu re-registrations",
        acked, lost, duplicated, unexpected, unconfirmed, atomic_load(&g_load.submits_failed),
        atomic_load(&g_load.acks_failed), atomic_load(&g_load.reregistrations));
    REQUIRE(acked > 0, "nothing was acknowledged");
    REQUIRE(lost == 0, "%u acknowledged items were never delivered", lost);
}

/* ---- the record: who served when ------------------------------------------------------------ */

typedef struct {
    uint64_t from, until; /* unix ms */
} span_t;

typedef struct {
    span_t *spans;
    size_t n_spans;
    uint64_t *dispatches; /* unix ms */
    size_t n_dispatches;
} record_t;

/* Days since 1970-01-01 of a civil date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* "2026-12-01T21:22:34.650Z " -> unix ms; 0 when the line does not start with a time. */
static uint64_t line_ms(const char *line)
{
    int y, mo, d, h, mi, s, ms;
    if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &y, &mo, &d, &h, &mi, &s, &ms) != 7)
        return 0;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
    return (uint64_t)secs * 1000 + (uint64_t)ms;
}

static void record_read(const char *log, const char *model, record_t *r)
{
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(log, "r");
    REQUIRE(f != NULL, "cannot read %s", log);
    char line[2048], lease[300], disp[300], released[300];
    snprintf(lease, sizeof(lease), "lease of model %s: serving until ", model);
    snprintf(released, sizeof(released), "lease of model %s released", model);
    snprintf(disp, sizeof(disp), " of model %s (", model);
    size_t cap_s = 0, cap_d = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        uint64_t t = line_ms(line);
        const char *p = strstr(line, lease);
        if (t != 0 && p != NULL) {
            if (r->n_spans == cap_s) {
                cap_s = cap_s ? cap_s * 2 : 256;
                r->spans = realloc(r->spans, cap_s * sizeof(*r->spans));
                REQUIRE(r->spans != NULL, "out of memory");
            }
            r->spans[r->n_spans++] = (span_t){t, strtoull(p + strlen(lease), NULL, 10)};
        } else if (t != 0 && strstr(line, released) != NULL) {
            /* a clean stop: the owner loop ended before the release, so did the promise */
            for (size_t i = 0; i < r->n_spans; i++)
                r->spans[i].until = r->spans[i].until > t ? t : r->spans[i].until;
        } else if (t != 0 && strstr(line, "dispatched batch ") != NULL && strstr(line, disp)) {
            if (r->n_dispatches == cap_d) {
                cap_d = cap_d ? cap_d * 2 : 1024;
                r->dispatches = realloc(r->dispatches, cap_d * sizeof(*r->dispatches));
                REQUIRE(r->dispatches != NULL, "out of memory");
            }
            r->dispatches[r->n_dispatches++] = t;
        }
    }
    fclose(f);
}

/* No two instances' serving spans overlap, and every dispatch of one falls within one of its own
 * spans and in none of the other's. Returns the number of dispatches checked. */
static size_t record_check(const char *model)
{
    record_t r[MAX_INSTANCES];
    for (int i = 0; i < MAX_INSTANCES; i++)
        record_read(g_inst[i].log, model, &r[i]);
    size_t checked = 0;
    for (int a = 0; a < MAX_INSTANCES; a++) {
        int b = 1 - a;
        for (size_t i = 0; i < r[a].n_spans; i++) {
            for (size_t j = 0; j < r[b].n_spans; j++) {
                uint64_t lo = r[a].spans[i].from > r[b].spans[j].from ? r[a].spans[i].from
                                                                      : r[b].spans[j].from;
                uint64_t hi = r[a].spans[i].until < r[b].spans[j].until ? r[a].spans[i].until
                                                                        : r[b].spans[j].until;
                REQUIRE(lo >= hi,
                        "instances %s and %s both promised themselves model %s from %" PRIu64
                        " to %" PRIu64 " ms (unix)",
                        g_inst[a].name, g_inst[b].name, model, lo, hi);
            }
        }
        for (size_t i = 0; i < r[a].n_dispatches; i++) {
            uint64_t t = r[a].dispatches[i];
            int own = 0; /* within a deadline this instance had promised itself */
            for (size_t j = 0; j < r[a].n_spans && !own; j++)
                own = t >= r[a].spans[j].from && t <= r[a].spans[j].until;
            REQUIRE(own, "%s dispatched a batch of %s at %" PRIu64 " ms (unix) outside its lease",
                    g_inst[a].name, model, t);
            for (size_t j = 0; j < r[b].n_spans; j++)
                REQUIRE(t < r[b].spans[j].from || t > r[b].spans[j].until,
                        "%s dispatched a batch of %s at %" PRIu64 " while %s served it",
                        g_inst[a].name, model, t, g_inst[b].name);
            checked++;
        }
    }
    say("record: %zu and %zu lease deadlines, %zu batches dispatched: no two instances served "
        "model %s at the same time",
        r[0].n_spans, r[1].n_spans, checked, model);
    for (int i = 0; i < MAX_INSTANCES; i++) {
        free(r[i].spans);
        free(r[i].dispatches);
    }
    return checked;
}

/* ---- scenarios ----------------------------------------------------------------------------- */

static void instances_init(const char *models_a, const char *models_b, int same_dir)
{
    for (int i = 0; i < MAX_INSTANCES; i++) {
        instance_t *in = &g_inst[i];
        snprintf(in->name, sizeof(in->name), "%c", 'A' + i);
        snprintf(in->log, sizeof(in->log), "%s/lanesched-%c.log", g_dir, 'A' + i);
        snprintf(in->data_dir, sizeof(in->data_dir), "%s/data-%c", g_dir, same_dir ? 'A' : 'A' + i);
        in->models = i == 0 ? models_a : models_b;
        in->node = 2;
    }
}

static void case_failover(void)
{
    instances_init("m", "m", 1);
    instance_start(0);
    int who = serving_wait("m", -1, FIRST_SERVE_MS);
    REQUIRE(who == 0, "A never served m");
    instance_start(1); /* waits for the data directory: a standby */
    const char *models[] = {"m"};
    load_start(models, 1);
    while (load_acked() < 2000)
        sleep_ms(20);
    REQUIRE(serving_wait("m", 0, 0) == -1, "B serves while A does");
    uint64_t killed = now_ms();
    spawn_kill(&g_inst[0].pid);
    who = serving_wait("m", 0, 30000);
    uint64_t took = now_ms() - killed;
    REQUIRE(who == 1, "B did not take over within 30 s");
    say("A SIGKILLed after %u acknowledged items: B took over in %" PRIu64
        " ms (lease TTL %d ms, plus recovery)",
        load_acked(), took, LEASE_TTL_MS);
    REQUIRE(took < 3 * LEASE_TTL_MS + 5000, "takeover took %" PRIu64 " ms", took);
    uint32_t before = load_acked();
    while (load_acked() < before + 2000)
        sleep_ms(20);
    load_finish();
    record_check("m");
}

static void case_cycles(void)
{
    const char *env = getenv("LANES_CLUSTER_CYCLES");
    int cycles = env != NULL && env[0] ? atoi(env) : 50;
    instances_init("m", "m", 1);
    instance_start(0);
    REQUIRE(serving_wait("m", -1, FIRST_SERVE_MS) == 0, "A never served m");
    instance_start(1);
    const char *models[] = {"m"};
    load_start(models, 1);
    uint64_t worst = 0, total = 0;
    for (int k = 0; k < cycles; k++) {
        int who = serving_wait("m", -1, 30000);
        REQUIRE(who >= 0, "cycle %d: nobody serves m", k);
        uint32_t before = load_acked();
        uint64_t until = now_ms() + 3000;
        while (load_acked() < before + 100 && now_ms() < until)
            sleep_ms(10); /* some work through this holder */
        uint64_t killed = now_ms();
        spawn_kill(&g_inst[who].pid);
        int next = serving_wait("m", who, 30000);
        REQUIRE(next == 1 - who, "cycle %d: the standby did not take over", k);
        uint64_t took = now_ms() - killed;
        worst = took > worst ? took : worst;
        total += took;
        instance_start(who); /* the next standby, waiting for the directory */
    }
    say("%d kill/restart cycles: takeover mean %" PRIu64 " ms, worst %" PRIu64
        " ms (lease TTL %d ms)",
        cycles, total / (uint64_t)(cycles ? cycles : 1), worst, LEASE_TTL_MS);
    load_finish();
    REQUIRE(record_check("m") > 0, "no batch was dispatched");
}

static void case_node_kill(void)
{
    instances_init("m", "m", 1);
    instance_start(0);
    REQUIRE(serving_wait("m", -1, FIRST_SERVE_MS) == 0, "A never served m");
    instance_start(1);
    const char *models[] = {"m"};
    load_start(models, 1);
    while (load_acked() < 2000)
        sleep_ms(20);
    cluster_node_kill(&g_cluster, 2); /* the instances' node */
    say("node 2 SIGKILLed after %u acknowledged items", load_acked());
    uint32_t before = load_acked();
    uint64_t until = now_ms() + 30000;
    while (load_acked() < before + 2000 && now_ms() < until)
        sleep_ms(20);
    REQUIRE(load_acked() >= before + 2000, "no progress without node 2 (%u more acknowledged)",
            load_acked() - before);
    say("work went on without node 2: %u more acknowledged", load_acked() - before);
    REQUIRE(cluster_node_start(&g_cluster, 2) == SPAWN_OK, "node 2 did not restart");
    before = load_acked();
    while (load_acked() < before + 1000)
        sleep_ms(20);
    load_finish();
    record_check("m");
}

static void case_split(void)
{
    instances_init("m1", "m2", 0);
    instance_start(0);
    instance_start(1);
    REQUIRE(serving_wait("m1", 1, FIRST_SERVE_MS) == 0, "A never served m1");
    REQUIRE(serving_wait("m2", 0, 30000) == 1, "B never served m2");
    REQUIRE(!instance_serves(g_inst[0].log, "m2") && !instance_serves(g_inst[1].log, "m1"),
            "an instance serves a model it is not configured for");
    const char *models[] = {"m1", "m2"};
    load_start(models, 2);
    while (load_acked() < 4000)
        sleep_ms(20);
    load_finish();
    record_t a, b;
    record_read(g_inst[0].log, "m2", &a);
    record_read(g_inst[1].log, "m1", &b);
    REQUIRE(a.n_dispatches == 0 && b.n_dispatches == 0,
            "A dispatched %zu batches of m2, B %zu of m1", a.n_dispatches, b.n_dispatches);
    record_read(g_inst[0].log, "m1", &a);
    record_read(g_inst[1].log, "m2", &b);
    REQUIRE(a.n_dispatches > 0 && b.n_dispatches > 0, "A or B dispatched nothing");
    say("split: A dispatched %zu batches of m1, B %zu of m2, none of the other's", a.n_dispatches,
        b.n_dispatches);
    free(a.spans);
    free(a.dispatches);
    free(b.spans);
    free(b.dispatches);
}

static void case_partition(void)
{
    instances_init("m", "m", 0);
    g_inst[1].node = 0;
    instance_start(0);
    REQUIRE(serving_wait("m", -1, FIRST_SERVE_MS) == 0, "A never served m");
    instance_start(1);
    const char *models[] = {"m"};
    load_start(models, 1);
    while (load_acked() < 2000)
        sleep_ms(20);
    pid_t node2 = g_cluster.pid[2];
    uint64_t cut = now_ms();
    REQUIRE(kill(node2, SIGSTOP) == 0, "SIGSTOP node 2: %s", strerror(errno));
    int who = serving_wait("m", 0, 30000);
    REQUIRE(who == 1, "B did not take over from the cut-off A");
    say("node 2 stopped with A behind it: B serves after %" PRIu64 " ms", now_ms() - cut);
    uint32_t before = load_acked();
    uint64_t until = now_ms() + 20000;
    while (load_acked() < before + 1000 && now_ms() < until)
        sleep_ms(20);
    REQUIRE(load_acked() >= before + 1000, "no progress under B");
    REQUIRE(kill(node2, SIGCONT) == 0, "SIGCONT node 2: %s", strerror(errno));
    /* Healed: exactly one serves (B, or A again if a renewal of B's failed while the cluster
     * re-elected its leaders: either is correct, two never are). */
    sleep_ms(3 * LEASE_TTL_MS);
    int s1 = serving_wait("m", -1, 30000);
    REQUIRE(s1 >= 0, "nobody serves m after the partition healed");
    int o1 = 1 - s1;
    REQUIRE(!instance_serves(g_inst[o1].log, "m"), "both serve after the partition healed");
    say("node 2 back: %s serves, %s is a standby", g_inst[s1].name, g_inst[o1].name);
    uint64_t killed = now_ms();
    spawn_kill(&g_inst[s1].pid);
    REQUIRE(serving_wait("m", s1, 30000) == o1, "%s did not take over from the killed %s",
            g_inst[o1].name, g_inst[s1].name);
    say("%s SIGKILLed: %s serves after %" PRIu64 " ms", g_inst[s1].name, g_inst[o1].name,
        now_ms() - killed);
    /* What the operator does with the killed one's volume (docs/scale-out.md): the items it
     * accepted wait on it until an instance holding the lease opens it. The survivor drains its
     * own, the other comes back on its volume, and the survivor hands the lease over by stopping
     * cleanly (it releases its lease). */
    atomic_store(&g_load.stop_producers, 1);
    for (int i = 0; i < g_n_producers; i++)
        pthread_join(g_producers[i].thread, NULL);
    g_n_producers = 0;
    instance_drain_wait(&g_inst[o1], 60000);
    instance_start(s1);
    sleep_ms(2000); /* it recovered its volume and waits as a standby */
    spawn_stop(&g_inst[o1].pid, 10000);
    REQUIRE(serving_wait("m", o1, 30000) == s1, "%s did not take over from the stopped %s",
            g_inst[s1].name, g_inst[o1].name);
    say("%s stopped cleanly: %s serves its volume", g_inst[o1].name, g_inst[s1].name);
    load_finish();
    record_check("m");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: test_cluster failover|cycles|node_kill|split|partition PATH_TO_LANESCHED "
                "[PATH_TO_NATS_SERVER]\n");
        return 2;
    }
    g_t0 = clock_mono_ns();
    signal(SIGPIPE, SIG_IGN);
    snprintf(g_case, sizeof(g_case), "%s", argv[1]);
    snprintf(g_daemon, sizeof(g_daemon), "%s", argv[2]);
    char nats[512];
    REQUIRE(spawn_program_find(argc > 3 ? argv[3] : "nats-server", nats, sizeof(nats)) == SPAWN_OK,
            "nats-server not found");
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/lanes-cluster-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    REQUIRE(mkdtemp(g_dir) != NULL, "mkdtemp: %s", strerror(errno));
    atexit(cleanup);
    REQUIRE(cluster_start(&g_cluster, nats, g_dir) == SPAWN_OK,
            "the cluster did not start (logs in %s)", g_dir);
    say("cluster of %d nodes up (%s)", CLUSTER_NODES, g_dir);
    if (strcmp(g_case, "failover") == 0)
        case_failover();
    else if (strcmp(g_case, "cycles") == 0)
        case_cycles();
    else if (strcmp(g_case, "node_kill") == 0)
        case_node_kill();
    else if (strcmp(g_case, "split") == 0)
        case_split();
    else if (strcmp(g_case, "partition") == 0)
        case_partition();
    else
        fail("unknown case %s", g_case);
    cleanup();
    cluster_stop(&g_cluster);
    if (getenv("LANES_TEST_KEEP") == NULL)
        fs_remove_tree(g_dir);
    say("passed");
    return 0;
}
