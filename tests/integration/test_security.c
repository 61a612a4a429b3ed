/*
 * test_security.c - the roles of docs/security.md on a real nats-server that runs the documented
 * authorization config, docs/security/nats-server.conf, with only its JetStream store directory
 * moved into the test's temp dir (the copy is made from the file at each run, so the test and
 * the document cannot drift). The daemon runs as the user "lanesched" with its inbox prefix and
 * the lease bucket; clients run as the config's users, each with its inbox prefix.
 *
 *   test_security CASE PATH_TO_LANESCHED PATH_TO_CONFIG
 *   test_security list
 *
 *   end_to_end          producer-a submits, gpu-0 consumes and acks everything, ops reads stats
 *                       and pings: the whole system works under the documented permissions.
 *   producer_isolation  producer-a may not subscribe to any inbox but its own, nor to the submit
 *                       subjects, nor publish on register/pull/ack/hb/bye/stats: each attempt is
 *                       a permissions violation, and while gpu-0 consumes producer-b's work,
 *                       producer-a's subscriptions receive nothing (no batch, no payload).
 *   consumer_isolation  gpu-1 may not read gpu-0's inbox, every inbox, the submit or consumer
 *                       subjects, nor submit or ask for stats; it receives none of gpu-0's batches.
 *   consumer_authority  gpu-1 is handed everything another account can read about gpu-0 (its
 *                       public id from stats and the daemon's log, its batch ids): its pulls, acks
 *                       and byes on those, and acks of gpu-0's batch ids on its own subjects, take
 *                       nothing and settle nothing; gpu-0 then acks every item itself, and every
 *                       accepted item is completed exactly once by the worker it was sent to.
 *   model_authority     gpu-mistral, whose user may register for mistral only, cannot publish a
 *                       Register for llama (lanes.register.llama, lanes.register), gets no
 *                       consumer through the C client, and its Register naming llama on
 *                       lanes.register.mistral is refused bad_model; gpu-0 takes llama's items.
 *   standby             a second lanesched on the same bucket (a data directory of its own)
 *                       waits for the lease: reading the lease's key under the documented
 *                       permissions raises no permissions violation on the server.
 *   reflection          producer-a asks for its SubmitReplies on subjects only the daemon may
 *                       publish on (the lease bucket's key, the JetStream API's stream delete,
 *                       the dead-letter subject): the daemon publishes nothing there (the
 *                       auditor sees no dead letter), keeps its lease and its bucket (producer-b
 *                       is still served), and counts each in rejected.reply_subject_refused.
 *
 * Exit 0 on success, 1 on failure (with the daemon's and the server's logs), 2 on bad usage.
 */
#include "clients/c/lanes_client.h"
#include "codec/codec.h"
#include "support/fs.h"
#include "support/spawn.h"

#include <inttypes.h>
#include <jansson.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MODEL     "llama"
#define BUCKET    "lanesched-leases"
#define N_ITEMS   120
#define PER_SUB   10
#define WAIT_MS   20000
#define VIOL_WAIT 3000

static const char *g_case = "?";
static char g_tmp[256];
static char g_url[64];
static char g_daemon_log[300], g_nats_log[300];
static char *g_daemon_bin;
static volatile pid_t g_nats_pid, g_daemon_pid;

static void sec_dump(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    fprintf(stderr, "--- %s\n", path);
    char line[1024];
    while (fgets(line, sizeof(line), f) != NULL)
        fputs(line, stderr);
    fclose(f);
}

static void sec_cleanup(void)
{
    spawn_stop(&g_daemon_pid, 5000);
    spawn_stop(&g_nats_pid, 2000);
    if (g_tmp[0] != '\0' && getenv("LANES_TEST_KEEP") == NULL)
        fs_remove_tree(g_tmp);
}

static void sec_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void sec_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_security[%s]: FAIL %s:%d: ", g_case, file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    sec_dump(g_daemon_log);
    sec_dump(g_nats_log);
    exit(1);
}
#define REQUIRE(cond, ...)                             \
    do {                                               \
        if (!(cond))                                   \
            sec_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

static void sec_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sec_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("test_security[%s]: ", g_case);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* The password the documented config gives each user. */
static const char *sec_password(const char *user)
{
    static char pw[64];
    if (strcmp(user, "lanesched") == 0)
        return "daemon-secret-change-me";
    snprintf(pw, sizeof(pw), "%s-change-me", user);
    return pw;
}

/* ---- setup --------------------------------------------------------------------------------- */

/* The documented config with its store_dir moved into the temp dir. */
static void sec_config_copy(const char *doc, const char *out)
{
    FILE *in = fopen(doc, "r"), *o = fopen(out, "w");
    REQUIRE(in != NULL && o != NULL, "cannot copy %s to %s", doc, out);
    char line[1024];
    int moved = 0;
    while (fgets(line, sizeof(line), in) != NULL) {
        if (strstr(line, "store_dir:") != NULL) {
            fprintf(o, "  store_dir: \"%s/js\"\n", g_tmp);
            moved++;
        } else {
            fputs(line, o);
        }
    }
    fclose(in);
    fclose(o);
    REQUIRE(moved == 1, "%s: expected one store_dir line, found %d", doc, moved);
}

/* Starts lanesched as the documented daemon user on `data`, its log in `log`. */
static void sec_daemon_start(const char *daemon_bin, const char *data, const char *log,
                             volatile pid_t *pid)
{
    char *argv[] = {(char *)daemon_bin,
                    "--server",
                    g_url,
                    "--user",
                    "lanesched",
                    "--password",
                    (char *)sec_password("lanesched"),
                    "--inbox-prefix",
                    "_INBOX.lanesched",
                    "--data-dir",
                    (char *)data,
                    "--models",
                    MODEL,
                    "--lease-bucket",
                    BUCKET,
                    "--lease-replicas",
                    "1",
                    "--ack-wait-ms",
                    "3000",
                    NULL};
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.log_path = log;
    REQUIRE(spawn_start(argv, &opts, pid) == SPAWN_OK, "start lanesched on %s", data);
}

static void sec_start(const char *daemon_bin, const char *doc_config)
{
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/lanes-test-security.XXXXXX");
    REQUIRE(mkdtemp(g_tmp) != NULL, "mkdtemp");
    atexit(sec_cleanup);
    char conf[300], nats_bin[256], data[300];
    snprintf(conf, sizeof(conf), "%s/nats-server.conf", g_tmp);
    snprintf(g_nats_log, sizeof(g_nats_log), "%s/nats.log", g_tmp);
    snprintf(g_daemon_log, sizeof(g_daemon_log), "%s/lanesched.log", g_tmp);
    snprintf(data, sizeof(data), "%s/data", g_tmp);
    sec_config_copy(doc_config, conf);
    REQUIRE(spawn_program_find("nats-server", nats_bin, sizeof(nats_bin)) == SPAWN_OK,
            "nats-server not found");
    spawn_nats_t ns = {.bin = nats_bin, .log_path = g_nats_log, .config = conf};
    int port = 0;
    spawn_status_t st = spawn_nats_start(&ns, &g_nats_pid, &port);
    REQUIRE(st == SPAWN_OK, "nats-server with %s: %s", conf, spawn_status_str(st));
    snprintf(g_url, sizeof(g_url), "nats://127.0.0.1:%d", port);
    sec_daemon_start(daemon_bin, data, g_daemon_log, &g_daemon_pid);
    st = spawn_ready_wait(&g_daemon_pid, g_daemon_log, 0, "lease held, serving", WAIT_MS, NULL,
                          NULL);
    REQUIRE(st == SPAWN_OK, "lanesched did not serve %s: %s", MODEL, spawn_status_str(st));
    sec_log("nats-server on %s with the documented config; lanesched serving %s", g_url, MODEL);
}

/* ---- clients ------------------------------------------------------------------------------- */

static lc_client_t *sec_client(const char *user)
{
    char inbox[64], err[256] = "";
    snprintf(inbox, sizeof(inbox), "_INBOX.%s", user);
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    cc.servers = g_url;
    cc.user = user;
    cc.password = sec_password(user);
    cc.inbox_prefix = inbox;
    lc_client_t *c = NULL;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &c);
    REQUIRE(st == LC_OK, "%s: connect: %s", user, err);
    return c;
}

/* A raw connection that counts the permission violations the server reports. */
typedef struct {
    natsConnection *nc;
    atomic_int violations;
    pthread_mutex_t mu;
    char last[512];
    natsSubscription *subs[16]; /* destroyed by raw_close once the connection is closed */
    int n_subs;
} raw_t;

static void raw_on_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    (void)sub;
    raw_t *r = closure;
    if (err != NATS_NOT_PERMITTED)
        return;
    const char *text = NULL;
    natsConnection_GetLastError(nc, &text);
    pthread_mutex_lock(&r->mu);
    snprintf(r->last, sizeof(r->last), "%s", text != NULL ? text : "");
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_add(&r->violations, 1);
}

static raw_t *raw_open(const char *user)
{
    raw_t *r = calloc(1, sizeof(*r));
    REQUIRE(r != NULL, "oom");
    pthread_mutex_init(&r->mu, NULL);
    natsOptions *o = NULL;
    char inbox[64];
    snprintf(inbox, sizeof(inbox), "_INBOX.%s", user);
    REQUIRE(natsOptions_Create(&o) == NATS_OK && natsOptions_SetURL(o, g_url) == NATS_OK &&
                natsOptions_SetUserInfo(o, user, sec_password(user)) == NATS_OK &&
                natsOptions_SetCustomInboxPrefix(o, inbox) == NATS_OK &&
                natsOptions_SetErrorHandler(o, raw_on_error, r) == NATS_OK,
            "options");
    natsStatus s = natsConnection_Connect(&r->nc, o);
    natsOptions_Destroy(o);
    REQUIRE(s == NATS_OK, "%s: connect: %s", user, natsStatus_GetText(s));
    return r;
}

static void raw_close(raw_t *r)
{
    for (int i = 0; i < r->n_subs; i++) /* UNSUB, the PONG, then the free (nats.c #637) */
        natsSubscription_Unsubscribe(r->subs[i]);
    natsConnection_FlushTimeout(r->nc, 2000);
    for (int i = 0; i < r->n_subs; i++)
        natsSubscription_Destroy(r->subs[i]);
    natsConnection_Close(r->nc);
    natsConnection_Destroy(r->nc);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Waits until the server reported `want` violations in all (each one checked for its subject). */
static void raw_violations_wait(raw_t *r, int want, const char *what)
{
    uint64_t end = now_ms() + VIOL_WAIT;
    while (atomic_load(&r->violations) < want && now_ms() < end)
        sleep_ms(10);
    pthread_mutex_lock(&r->mu);
    REQUIRE(atomic_load(&r->violations) >= want, "%s: no permissions violation (last error '%s')",
            what, r->last);
    REQUIRE(strstr(r->last, "Permissions Violation") != NULL, "%s: last error '%s'", what, r->last);
    pthread_mutex_unlock(&r->mu);
}

/* Subscribes (asynchronously counted) and requires the server to refuse it. */
static natsSubscription *raw_sub_refused(raw_t *r, const char *subject)
{
    int before = atomic_load(&r->violations);
    natsSubscription *sub = NULL;
    REQUIRE(r->n_subs < 16 && natsConnection_SubscribeSync(&sub, r->nc, subject) == NATS_OK,
            "subscribe %s", subject);
    r->subs[r->n_subs++] = sub;
    natsConnection_Flush(r->nc);
    char what[160];
    snprintf(what, sizeof(what), "subscribe %s", subject);
    raw_violations_wait(r, before + 1, what);
    return sub;
}

static void raw_pub_refused(raw_t *r, const char *subject, const void *data, size_t len)
{
    int before = atomic_load(&r->violations);
    REQUIRE(natsConnection_Publish(r->nc, subject, data, (int)len) == NATS_OK, "publish %s",
            subject);
    natsConnection_Flush(r->nc);
    char what[160];
    snprintf(what, sizeof(what), "publish %s", subject);
    raw_violations_wait(r, before + 1, what);
}

/* Messages waiting on a synchronous subscription (none may reach a refused one). */
static int raw_received(natsSubscription *sub)
{
    int n = 0;
    natsMsg *m = NULL;
    while (natsSubscription_NextMsg(&m, sub, 1) == NATS_OK) {
        natsMsg_Destroy(m);
        n++;
    }
    return n;
}

/* lanes.stats as the operator: a JSON document (json_decref). */
static json_t *sec_stats(void)
{
    raw_t *ops = raw_open("ops");
    natsMsg *m = NULL;
    natsStatus s = natsConnection_RequestString(&m, ops->nc, "lanes.stats", "", 5000);
    REQUIRE(s == NATS_OK, "ops: lanes.stats: %s", natsStatus_GetText(s));
    json_error_t e;
    json_t *doc = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, &e);
    REQUIRE(doc != NULL, "stats: %s", e.text);
    natsMsg_Destroy(m);
    raw_close(ops);
    return doc;
}

static uint64_t sec_counter(json_t *doc, const char *key)
{
    json_t *v = json_object_get(json_object_get(doc, "counters"), key);
    REQUIRE(json_is_integer(v), "stats has no counter %s", key);
    return (uint64_t)json_integer_value(v);
}

/* ---- the legitimate flows ------------------------------------------------------------------ */

static const char *const SHAPE[] = {"You are a helpful assistant."};

/* Submits n items "<tag>-<i>" as user, every one ACCEPTED. */
static void sec_submit(lc_client_t *c, const char *tag, unsigned n)
{
    uint64_t sig = 0;
    REQUIRE(lc_shape_sign(SHAPE, 1, &sig) == LC_OK, "sign");
    for (unsigned i = 0; i < n; i += PER_SUB) {
        codec_work_item_t items[PER_SUB];
        char ids[PER_SUB][32];
        unsigned k = n - i < PER_SUB ? n - i : PER_SUB;
        for (unsigned j = 0; j < k; j++) {
            snprintf(ids[j], sizeof(ids[j]), "%s-%u", tag, i + j);
            items[j] = (codec_work_item_t){
                .id = {(const uint8_t *)ids[j], strlen(ids[j])},
                .model = MODEL,
                .has_signature = true,
                .signature = sig,
                .tokens = 20 + (i + j) % 50,
                .payload = {(const uint8_t *)ids[j], strlen(ids[j])},
            };
        }
        lc_submit_summary_t sum = {0};
        lc_item_result_t res[PER_SUB];
        lc_status_t st = lc_submit_request(c, MODEL, items, k, 5000, 2, res, &sum);
        REQUIRE(st == LC_OK && sum.accepted == k, "submit %s: %s %s (accepted %u of %u: %s)", tag,
                lc_status_str(st), lc_client_error_get(c), sum.accepted, k,
                st == LC_OK ? res[0].reason : "");
    }
}

static lc_consumer_t *sec_consumer(lc_client_t *c, const char *name)
{
    lc_consumer_config_t k;
    lc_consumer_config_init(&k);
    k.model = MODEL;
    k.max_batch_size = 8;
    k.max_batch_tokens = 4096;
    k.name = name;
    lc_consumer_t *con = NULL;
    lc_status_t st = lc_consumer_open(c, &k, &con);
    REQUIRE(st == LC_OK, "%s: register: %s", name, lc_client_error_get(c));
    return con;
}

/* Records a batch's items in seen[] (ids "<tag>-<n>", n < total), each at most once. */
static void sec_seen(const codec_batch_t *b, unsigned char *seen, unsigned total)
{
    for (size_t i = 0; i < b->n_items; i++) {
        const char *dash = memchr(b->items[i].id.ptr, '-', b->items[i].id.len);
        REQUIRE(dash != NULL, "item id");
        unsigned idx = (unsigned)strtoul(dash + 1, NULL, 10);
        REQUIRE(idx < total && !seen[idx], "item %u twice or unknown", idx);
        seen[idx] = 1;
    }
}

/* Takes and acks batches until `want` more items were acked, each recorded in seen[]. */
static void sec_drain(lc_consumer_t *con, unsigned want, unsigned total, unsigned char *seen)
{
    uint64_t end = now_ms() + WAIT_MS;
    for (unsigned got = 0; got < want;) {
        REQUIRE(now_ms() < end, "only %u of %u items came", got, want);
        codec_batch_t *b = NULL;
        lc_status_t st = lc_batch_next(con, 1000, &b);
        if (st == LC_EEMPTY || st == LC_ETIMEOUT)
            continue;
        REQUIRE(st == LC_OK, "batch: %s", lc_consumer_error_get(con));
        sec_seen(b, seen, total);
        lc_ack_reply_t r = {0};
        st = lc_ack_all_send(con, b->batch_id, 5000, &r);
        REQUIRE(st == LC_OK && r.acked == b->n_items, "ack %" PRIu64 ": %s (acked %u of %zu)",
                b->batch_id, lc_consumer_error_get(con), r.acked, b->n_items);
        got += (unsigned)b->n_items;
        codec_batch_destroy(b);
    }
}

/* ---- cases --------------------------------------------------------------------------------- */

/* producer-a submits N_ITEMS items "<tag>-<n>" and gpu-0 registers (on lanes.register.llama)
 * and takes every one; the three are returned to the caller to close. */
static void sec_work(const char *tag, lc_client_t **prod, lc_client_t **gpu, lc_consumer_t **con)
{
    *prod = sec_client("producer-a");
    *gpu = sec_client("gpu-0");
    sec_submit(*prod, tag, N_ITEMS);
    *con = sec_consumer(*gpu, "gpu-0");
    unsigned char seen[N_ITEMS] = {0};
    sec_drain(*con, N_ITEMS, N_ITEMS, seen);
}

static int case_end_to_end(void)
{
    lc_client_t *prod = NULL, *gpu = NULL;
    lc_consumer_t *con = NULL;
    sec_work("e2e", &prod, &gpu, &con);
    json_t *doc = sec_stats();
    REQUIRE(sec_counter(doc, "items_received") == N_ITEMS &&
                sec_counter(doc, "items_completed") == N_ITEMS,
            "stats: received %" PRIu64 ", completed %" PRIu64, sec_counter(doc, "items_received"),
            sec_counter(doc, "items_completed"));
    json_decref(doc);
    raw_t *ops = raw_open("ops");
    natsMsg *m = NULL;
    REQUIRE(natsConnection_RequestString(&m, ops->nc, "$SRV.PING.lanesched", "", 3000) == NATS_OK,
            "ops: $SRV.PING.lanesched");
    natsMsg_Destroy(m);
    raw_close(ops);
    lc_bye_send(con, 3000);
    lc_consumer_close(con);
    lc_client_close(gpu);
    lc_client_close(prod);
    sec_log("%d items submitted by producer-a, completed by gpu-0; stats and ping as ops", N_ITEMS);
    return 0;
}

static int case_producer_isolation(void)
{
    raw_t *spy = raw_open("producer-a");
    static const char *const subs[] = {"_INBOX.>",
                                       "_INBOX.gpu-0.>",
                                       "_INBOX.producer-b.>",
                                       "lanes.submit.>",
                                       "lanes.pull.*",
                                       "lanes.>",
                                       ">"};
    natsSubscription *held[sizeof(subs) / sizeof(subs[0])];
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        held[i] = raw_sub_refused(spy, subs[i]);
    static const char *const pubs[] = {"lanes.register", "lanes.pull.x", "lanes.ack.x",
                                       "lanes.hb.x",     "lanes.bye.x",  "lanes.stats",
                                       "lanes.metrics",  "$SRV.PING",    "lanes.dead.llama"};
    for (size_t i = 0; i < sizeof(pubs) / sizeof(pubs[0]); i++)
        raw_pub_refused(spy, pubs[i], "x", 1);
    /* the work of another producer flows to gpu-0 while the refused subscriptions sit there */
    lc_client_t *prod = sec_client("producer-b"), *gpu = sec_client("gpu-0");
    sec_submit(prod, "b", N_ITEMS);
    lc_consumer_t *con = sec_consumer(gpu, "gpu-0");
    unsigned char seen[N_ITEMS] = {0};
    sec_drain(con, N_ITEMS, N_ITEMS, seen);
    int leaked = 0;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        leaked += raw_received(held[i]);
    REQUIRE(leaked == 0, "producer-a received %d messages", leaked);
    json_t *doc = sec_stats();
    REQUIRE(sec_counter(doc, "unknown_consumer") == 0, "the daemon saw a forged consumer message");
    json_decref(doc);
    lc_consumer_close(con);
    lc_client_close(gpu);
    lc_client_close(prod);
    int v = atomic_load(&spy->violations);
    raw_close(spy);
    sec_log("%d refused subscriptions and publishes; 0 of the %d items' messages reached "
            "producer-a",
            v, N_ITEMS);
    return 0;
}

static int case_consumer_isolation(void)
{
    raw_t *spy = raw_open("gpu-1");
    static const char *const subs[] = {
        "_INBOX.gpu-0.>", "_INBOX.>", "_INBOX.producer-a.>", "lanes.submit.>", "lanes.pull.*",
        "lanes.ack.*",    ">"};
    natsSubscription *held[sizeof(subs) / sizeof(subs[0])];
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        held[i] = raw_sub_refused(spy, subs[i]);
    static const char *const pubs[] = {"lanes.submit.llama", "lanes.stats", "lanes.metrics",
                                       "$SRV.INFO", "_INBOX.gpu-0.x"};
    for (size_t i = 0; i < sizeof(pubs) / sizeof(pubs[0]); i++)
        raw_pub_refused(spy, pubs[i], "x", 1);
    lc_client_t *prod = sec_client("producer-a"), *gpu = sec_client("gpu-0");
    sec_submit(prod, "c", N_ITEMS);
    lc_consumer_t *con = sec_consumer(gpu, "gpu-0");
    unsigned char seen[N_ITEMS] = {0};
    sec_drain(con, N_ITEMS, N_ITEMS, seen);
    int leaked = 0;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        leaked += raw_received(held[i]);
    REQUIRE(leaked == 0, "gpu-1 received %d messages", leaked);
    lc_consumer_close(con);
    lc_client_close(gpu);
    lc_client_close(prod);
    int v = atomic_load(&spy->violations);
    raw_close(spy);
    sec_log("%d refused subscriptions and publishes; gpu-1 received none of gpu-0's batches", v);
    return 0;
}

static int case_model_authority(void)
{
    /* gpu-mistral may register for mistral only: every way to llama's work is refused */
    raw_t *atk = raw_open("gpu-mistral");
    raw_pub_refused(atk, "lanes.register.llama", "x", 1);
    raw_pub_refused(atk, "lanes.register", "x", 1);
    raw_pub_refused(atk, "lanes.register.llama.x", "x", 1);
    lc_client_t *atk_client = sec_client("gpu-mistral");
    lc_consumer_config_t k;
    lc_consumer_config_init(&k);
    k.model = MODEL;
    k.max_batch_size = 8;
    k.max_batch_tokens = 4096;
    k.request_timeout_ms = 1000;
    lc_consumer_t *con = NULL;
    lc_status_t st = lc_consumer_open(atk_client, &k, &con);
    REQUIRE(st != LC_OK, "gpu-mistral registered for %s", MODEL);
    /* on the subject it may use, a Register naming llama is refused bad_model */
    codec_register_t reg = {.model = MODEL, .max_batch_size = 8, .max_batch_tokens = 4096};
    uint8_t *buf = NULL;
    size_t len = 0;
    REQUIRE(codec_encode_register(&reg, &buf, &len) == CODEC_OK, "encode register");
    natsMsg *m = NULL;
    natsStatus ns =
        natsConnection_Request(&m, atk->nc, "lanes.register.mistral", buf, (int)len, 5000);
    free(buf);
    REQUIRE(ns == NATS_OK, "no answer to a Register for %s on lanes.register.mistral: %s", MODEL,
            natsStatus_GetText(ns));
    codec_registered_t *out = NULL;
    REQUIRE(codec_decode_registered(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &out) ==
                CODEC_OK,
            "registered reply");
    natsMsg_Destroy(m);
    REQUIRE(strncmp(out->error, "bad_model: ", 11) == 0 && out->consumer_id[0] == '\0',
            "a Register for %s on lanes.register.mistral: error '%s', id '%s'", MODEL, out->error,
            out->consumer_id);
    codec_registered_destroy(out);
    /* llama's own worker registers on lanes.register.llama and takes everything */
    lc_client_t *prod = NULL, *gpu = NULL;
    lc_consumer_t *own = NULL;
    sec_work("m", &prod, &gpu, &own);
    json_t *doc = sec_stats();
    json_t *list = json_object_get(doc, "consumers");
    REQUIRE(json_array_size(list) == 1, "%zu consumers registered, 1 expected",
            json_array_size(list));
    json_t *bad =
        json_object_get(json_object_get(json_object_get(doc, "counters"), "rejected"), "bad_model");
    REQUIRE(json_integer_value(bad) == 1, "rejected.bad_model is %lld",
            (long long)json_integer_value(bad));
    json_decref(doc);
    lc_consumer_close(own);
    lc_client_close(gpu);
    lc_client_close(prod);
    lc_client_close(atk_client);
    int v = atomic_load(&atk->violations);
    raw_close(atk);
    sec_log("%d refused registers of gpu-mistral; its Register naming %s on its own subject was "
            "refused bad_model; gpu-0 took all %d items",
            v, MODEL, N_ITEMS);
    return 0;
}

/* Sends an Ack as a request on subject; the decoded reply (codec_ack_reply_destroy), or NULL
 * when nobody answered. */
static codec_ack_reply_t *raw_ack(raw_t *r, const char *subject, uint64_t batch_id)
{
    codec_ack_t ack = {.batch_id = batch_id, .all = true};
    uint8_t *buf = NULL;
    size_t len = 0;
    REQUIRE(codec_encode_ack(&ack, &buf, &len) == CODEC_OK, "encode ack");
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, r->nc, subject, buf, (int)len, 2000);
    free(buf);
    if (s != NATS_OK)
        return NULL;
    codec_ack_reply_t *rep = NULL;
    REQUIRE(codec_decode_ack_reply((const uint8_t *)natsMsg_GetData(m),
                                   (size_t)natsMsg_GetDataLength(m), &rep) == CODEC_OK,
            "ack reply");
    natsMsg_Destroy(m);
    return rep;
}

static int case_consumer_authority(void)
{
    lc_client_t *prod = sec_client("producer-a"), *gpu = sec_client("gpu-0");
    sec_submit(prod, "v", N_ITEMS);
    lc_consumer_t *victim = sec_consumer(gpu, "gpu-0");
    /* What another account can read: the public id in stats (as ops) and in the daemon's log. */
    json_t *doc = sec_stats();
    json_t *list = json_object_get(doc, "consumers");
    REQUIRE(json_array_size(list) == 1, "one consumer in stats");
    char public_id[128];
    snprintf(public_id, sizeof(public_id), "%s",
             json_string_value(json_object_get(json_array_get(list, 0), "id")));
    json_decref(doc);
    /* The victim takes batches and holds them. */
    unsigned char seen[N_ITEMS] = {0};
    uint64_t held_ids[8];
    size_t n_held = 0, n_held_items = 0;
    REQUIRE(lc_pull_send(victim, 4, 5000) == LC_OK, "pull");
    for (uint64_t end = now_ms() + WAIT_MS; n_held < 4 && now_ms() < end;) {
        codec_batch_t *b = NULL;
        if (lc_batch_next(victim, 1000, &b) == LC_OK) {
            sec_seen(b, seen, N_ITEMS);
            held_ids[n_held++] = b->batch_id;
            n_held_items += b->n_items;
            codec_batch_destroy(b);
        }
    }
    REQUIRE(n_held == 4, "the victim holds %zu batches", n_held);
    /* The attacker: a registration of its own, and the victim's public id on the shared
     * subjects, with every batch id the victim holds. */
    lc_client_t *atk_client = sec_client("gpu-1");
    lc_consumer_t *atk = sec_consumer(atk_client, "gpu-1");
    const lc_registered_t *atk_reg = lc_consumer_registered_get(atk);
    raw_t *r = raw_open("gpu-1");
    char subject[256];
    uint32_t settled = 0;
    for (size_t i = 0; i < n_held; i++) {
        snprintf(subject, sizeof(subject), "lanes.ack.%s", public_id);
        codec_ack_reply_t *rep = raw_ack(r, subject, held_ids[i]);
        if (rep != NULL) {
            settled += rep->acked + rep->returned;
            codec_ack_reply_destroy(rep);
        }
        rep = raw_ack(r, atk_reg->ack_subject, held_ids[i]); /* on its own subject */
        REQUIRE(rep != NULL, "no reply to an ack on the attacker's own subject");
        settled += rep->acked + rep->returned;
        REQUIRE(rep->error != NULL && strncmp(rep->error, "unknown_batch", 13) == 0,
                "the victim's batch acked on the attacker's subject: '%s'",
                rep->error ? rep->error : "");
        codec_ack_reply_destroy(rep);
    }
    REQUIRE(settled == 0, "the attacker settled %u items of the victim", settled);
    /* a pull on the public id brings no work; a heartbeat and a bye on it change nothing */
    codec_pull_t pull = {.max_batches = 4, .expires_ms = 500};
    uint8_t *buf = NULL;
    size_t len = 0;
    REQUIRE(codec_encode_pull(&pull, &buf, &len) == CODEC_OK, "encode pull");
    snprintf(subject, sizeof(subject), "lanes.pull.%s", public_id);
    natsMsg *m = NULL;
    if (natsConnection_Request(&m, r->nc, subject, buf, (int)len, 1500) == NATS_OK) {
        codec_batch_t *b = NULL;
        REQUIRE(codec_decode_batch(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &b) ==
                        CODEC_OK &&
                    b->n_items == 0,
                "a pull on the victim's public id brought %zu items", b != NULL ? b->n_items : 0);
        codec_batch_destroy(b);
        natsMsg_Destroy(m);
    }
    free(buf);
    snprintf(subject, sizeof(subject), "lanes.hb.%s", public_id);
    natsConnection_PublishString(r->nc, subject, "");
    snprintf(subject, sizeof(subject), "lanes.bye.%s", public_id);
    if (natsConnection_RequestString(&m, r->nc, subject, "", 1500) == NATS_OK)
        natsMsg_Destroy(m);
    /* the victim still holds its batches and acks them: nothing was lost to the attempts */
    uint32_t acked = 0;
    for (size_t i = 0; i < n_held; i++) {
        lc_ack_reply_t rep = {0};
        lc_status_t st = lc_ack_all_send(victim, held_ids[i], 5000, &rep);
        REQUIRE(st == LC_OK, "the victim's ack of batch %" PRIu64 ": %s", held_ids[i],
                lc_consumer_error_get(victim));
        acked += rep.acked;
    }
    REQUIRE(acked == n_held_items, "the victim acked %u of its %zu items", acked, n_held_items);
    lc_bye_send(atk, 3000); /* the rest goes to the victim */
    lc_consumer_close(atk);
    sec_drain(victim, N_ITEMS - (unsigned)n_held_items, N_ITEMS, seen);
    json_t *after = sec_stats();
    uint64_t completed = sec_counter(after, "items_completed");
    json_decref(after);
    REQUIRE(completed == N_ITEMS, "completed %" PRIu64 " of %d", completed, N_ITEMS);
    lc_consumer_close(victim);
    lc_client_close(atk_client);
    raw_close(r);
    lc_client_close(gpu);
    lc_client_close(prod);
    sec_log("the public id %s and %zu batch ids gave gpu-1 nothing: 0 items settled; gpu-0 "
            "acked all %d, each once",
            public_id, n_held, N_ITEMS);
    return 0;
}

/* How many lines of the log at `path` hold `text`. */
static int sec_logged(const char *path, const char *text)
{
    long n = spawn_log_count(path, text);
    REQUIRE(n >= 0, "open %s", path);
    return (int)n;
}

static int case_reflection(void)
{
    raw_t *audit = raw_open("auditor");
    natsSubscription *dead = NULL;
    REQUIRE(natsConnection_SubscribeSync(&dead, audit->nc, "lanes.dead.>") == NATS_OK,
            "auditor: subscribe lanes.dead.>");
    audit->subs[audit->n_subs++] = dead;
    natsConnection_Flush(audit->nc);
    raw_t *atk = raw_open("producer-a");
    static const char *const replies[] = {"$KV." BUCKET "." MODEL,
                                          "$JS.API.STREAM.DELETE.KV_" BUCKET, "lanes.dead." MODEL};
    uint64_t sig = 0;
    REQUIRE(lc_shape_sign(SHAPE, 1, &sig) == LC_OK, "sign");
    for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
        char id[32];
        snprintf(id, sizeof(id), "reflect-%zu", i);
        codec_work_item_t it = {.id = {(const uint8_t *)id, strlen(id)},
                                .model = MODEL,
                                .has_signature = true,
                                .signature = sig,
                                .tokens = 10};
        codec_submit_t sub = {&it, 1};
        uint8_t *buf = NULL;
        size_t len = 0;
        REQUIRE(codec_encode_submit(&sub, &buf, &len) == CODEC_OK, "encode submit");
        REQUIRE(natsConnection_PublishRequest(atk->nc, "lanes.submit." MODEL, replies[i], buf,
                                              (int)len) == NATS_OK,
                "publish with reply %s", replies[i]);
        free(buf);
    }
    natsConnection_Flush(atk->nc);
    REQUIRE(atomic_load(&atk->violations) == 0, "producer-a's submits were refused by the server");
    sleep_ms(2000); /* more than a lease renewal: a stolen lease would show by now */
    lc_client_t *prod = sec_client("producer-b");
    sec_submit(prod, "after", PER_SUB); /* served: the lease and its bucket are intact */
    lc_client_close(prod);
    REQUIRE(sec_logged(g_daemon_log, "lost to another instance") == 0 &&
                sec_logged(g_daemon_log, "fenced") == 0,
            "the daemon lost its lease to a reflected reply");
    int forged = raw_received(dead);
    REQUIRE(forged == 0, "the auditor saw %d messages on lanes.dead.>", forged);
    json_t *doc = sec_stats();
    json_t *rej = json_object_get(json_object_get(doc, "counters"), "rejected");
    json_int_t refused = json_integer_value(json_object_get(rej, "reply_subject_refused"));
    uint64_t received = sec_counter(doc, "items_received");
    json_decref(doc);
    REQUIRE(refused == 3, "rejected.reply_subject_refused is %lld, not 3", (long long)refused);
    REQUIRE(received == PER_SUB, "items_received %" PRIu64 ": a refused submit was stored",
            received);
    raw_close(atk);
    raw_close(audit);
    sec_log("3 submits asking for answers on $KV, $JS.API and lanes.dead: nothing published "
            "there, the lease kept, each counted");
    return 0;
}

static int case_standby(void)
{
    char data[300], log[300];
    snprintf(data, sizeof(data), "%s/data-standby", g_tmp);
    snprintf(log, sizeof(log), "%s/standby.log", g_tmp);
    static volatile pid_t standby;
    sec_daemon_start(g_daemon_bin, data, log, &standby);
    spawn_status_t st = spawn_ready_wait(&standby, log, 0, "serving lanes on", WAIT_MS, NULL, NULL);
    REQUIRE(st == SPAWN_OK, "the standby did not start: %s", spawn_status_str(st));
    sleep_ms(4000); /* several lease reads */
    int violations = sec_logged(g_nats_log, "Violation - User \"lanesched\"");
    spawn_stop(&standby, 5000);
    REQUIRE(violations == 0, "%d permissions violations of the daemon's user while standby",
            violations);
    sec_log("a standby read the lease for 4 s under the documented permissions: no violation");
    return 0;
}

static const struct {
    const char *name;
    int (*run)(void);
} cases[] = {
    {"end_to_end", case_end_to_end},
    {"producer_isolation", case_producer_isolation},
    {"consumer_isolation", case_consumer_isolation},
    {"consumer_authority", case_consumer_authority},
    {"model_authority", case_model_authority},
    {"standby", case_standby},
    {"reflection", case_reflection},
};

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            printf("%s\n", cases[i].name);
        return 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: %s CASE PATH_TO_LANESCHED PATH_TO_CONFIG | list\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            g_case = cases[i].name;
            g_daemon_bin = argv[2];
            sec_start(argv[2], argv[3]);
            int rc = cases[i].run();
            sec_log("ok");
            nats_CloseAndWait(2000);
            return rc;
        }
    }
    fprintf(stderr, "test_security: unknown case '%s'\n", argv[1]);
    return 2;
}
