/*
 * test_client.c - the C client library (clients/c/lanes_client.h) end to end: a real nats-server
 * on a free loopback port and the real lanesched binary, started through harness.h, and every
 * call made through lc_* (the harness's raw NATS helpers only where the library has no call).
 *
 *   test_client_nats CASE PATH_TO_LANESCHED [PATH_TO_NATS_SERVER]
 *   test_client_nats list
 *
 * One scenario per process (CTest registers client_<case> for each):
 *
 *   connect_fail    a port nobody listens on: LC_ECONNECT, a "connect: ..." text, *out untouched.
 *   no_daemon       nats-server without lanesched: submit request and consumer open answer
 *                   LC_ENORESPONDERS after their retries and leave their outs untouched.
 *   submit_request  ACCEPTED ("ok"), DUPLICATE on resubmit, REJECTED with each validation code
 *                   word, signatures and hashes from lc_shape_*; only accepted items come out.
 *   submit_send     fire-and-forget submits + lc_client_flush: every item comes out exactly once.
 *   consume_ack     Registered fields; in-progress extension; partial ack/nak and its repeat;
 *                   ack all; unknown_batch; whole-batch nak; fire-and-forget ack; EXPIRED; a
 *                   two-credit pull; the pull and batch counters.
 *   in_progress     the hand-managed set; a batch named by heartbeats outlives ack_wait; a batch
 *                   removed from the set is redelivered and its old id is unknown_batch.
 *   heartbeat       past dead_after, a consumer with the heartbeat thread keeps its batch, one
 *                   without is declared dead and its batch goes to the other.
 *   bye             Bye returns the batch at once (not after dead_after); the consumer is then
 *                   unregistered until lc_consumer_register; a fire-and-forget Bye kills the id.
 *   daemon_restart  after a restart pull and ack say LC_EUNKNOWN_CONSUMER; lc_consumer_register
 *                   gives a new id, clears the in-progress set, the unacked item comes back and
 *                   the heartbeat thread keeps the new id alive.
 *   sub_flood       5,000 subscriptions, each dropped by lc_sub_destroy (what lc_consumer_close
 *                   and lc_window_close call) while a second connection floods its subject: with
 *                   Unsubscribe + Destroy alone, nats.c 3.4's read loop uses a freed subscription
 *                   (issue #637) within a few hundred to a few thousand rounds.
 *   send_prompt     a worker acking and pulling after each one-item batch: the median time to
 *                   its next batch is shorter by more than 0.3 ms than with either
 *                   the daemon (--send flusher) or the client (nats_flusher) leaving its writes
 *                   to nats.c's flusher thread.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clients/c/client_int.h"
#include "clients/c/lanes_client.h"
#include "tests/integration/harness.h"

#define MODEL  "m"
#define ID_MAX 32
#define MAX_N  16

/* subjects.md's "one" test vector: the shape of every item unless a case says otherwise. */
static const char *const ONE[] = {"You are a helpful assistant."};
#define SIG_ONE 0x91f47f2f45b64efdull

static char g_sentinel; /* what an untouched out pointer still points at */

/* ---- helpers ------------------------------------------------------------------------------- */

static lc_client_t *client_open_with(bool nats_flusher)
{
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    cc.nats_flusher = nats_flusher;
    cc.servers = h_url();
    cc.prefix = H_PREFIX;
    cc.connect_timeout_ms = 2000;
    char err[256];
    lc_client_t *cl = NULL;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &cl);
    H_REQUIRE(st == LC_OK && cl != NULL, "lc_client_open: %s (%s)", lc_status_str(st), err);
    return cl;
}

static lc_client_t *client_open(void)
{
    return client_open_with(false);
}

/* hb_ms: config.heartbeat_ms (0 = the daemon's); no_hb: no heartbeat thread. */
static lc_consumer_t *consumer_open(lc_client_t *cl, uint32_t bs, uint32_t hb_ms, bool no_hb)
{
    lc_consumer_config_t k;
    lc_consumer_config_init(&k);
    k.model = MODEL;
    k.max_batch_size = bs;
    k.max_batch_tokens = 4096;
    k.name = "test-client";
    k.request_timeout_ms = 3000;
    k.heartbeat_ms = hb_ms;
    k.no_heartbeat = no_hb;
    lc_consumer_t *c = NULL;
    lc_status_t st = lc_consumer_open(cl, &k, &c);
    H_REQUIRE(st == LC_OK && c != NULL, "lc_consumer_open: %s (%s)", lc_status_str(st),
              lc_client_error_get(cl));
    return c;
}

static lc_consumer_stats_t stats_of(lc_consumer_t *c)
{
    lc_consumer_stats_t s;
    lc_consumer_stats_get(c, &s);
    return s;
}

static bool bytes_eq(const codec_bytes_t *a, const void *b, size_t len)
{
    return a->len == len && memcmp(a->ptr, b, len) == 0;
}

static bool id_eq(const codec_bytes_t *id, const char *s)
{
    return bytes_eq(id, s, strlen(s));
}

/* items[i]: id "<prefix>-<i>" (in ids[i]), model NULL (the client fills it in), signature sig,
 * tokens 10 * (i + 1), no payload. */
static void items_make(codec_work_item_t *items, char (*ids)[ID_MAX], size_t n, const char *prefix,
                       uint64_t sig)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], ID_MAX, "%s-%zu", prefix, i);
        items[i] = h_item(ids[i], NULL, sig, (uint32_t)(10 * (i + 1)), NULL, 0);
    }
}

static void submit_accepted(lc_client_t *cl, const codec_work_item_t *items, size_t n)
{
    lc_item_result_t res[MAX_N];
    lc_submit_summary_t sum;
    lc_status_t st = lc_submit_request(cl, MODEL, items, n, 3000, 0, res, &sum);
    H_REQUIRE(st == LC_OK, "lc_submit_request: %s (%s)", lc_status_str(st),
              lc_client_error_get(cl));
    H_REQUIRE(sum.accepted == n, "%u of %zu accepted (first reason '%s')", sum.accepted, n,
              res[0].reason);
}

/* The next OK batch within timeout_ms; EXPIRED pulls and silent waits are retried. */
static codec_batch_t *batch_take(lc_consumer_t *c, int64_t timeout_ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        codec_batch_t *b = NULL;
        lc_status_t st = lc_batch_next(c, 500, &b);
        if (st == LC_OK)
            return b;
        H_REQUIRE(st == LC_EEMPTY || st == LC_ETIMEOUT, "lc_batch_next: %s (%s)", lc_status_str(st),
                  lc_consumer_error_get(c));
        H_REQUIRE(h_now_ms() < deadline, "no batch within %" PRId64 " ms", timeout_ms);
    }
}

static void ack_all_ok(lc_consumer_t *c, const codec_batch_t *b)
{
    lc_ack_reply_t r = {0};
    lc_status_t st = lc_ack_all_send(c, b->batch_id, 3000, &r);
    H_REQUIRE(st == LC_OK && r.acked == b->n_items, "ack all of batch %" PRIu64 ": %s, acked %u",
              b->batch_id, lc_status_str(st), r.acked);
}

static void expect_empty(lc_consumer_t *c, const char *when)
{
    codec_batch_t *b = NULL;
    lc_status_t st = lc_batch_next(c, 500, &b);
    H_REQUIRE(st == LC_EEMPTY, "%s: lc_batch_next gave %s (%s), not LC_EEMPTY", when,
              lc_status_str(st), st == LC_OK ? "a batch" : lc_consumer_error_get(c));
}

/* Pulls and acks until each of ids[0..n) has come out exactly once and nothing else did, then
 * requires an EXPIRED pull (nothing more is queued). */
static void drain_expect(lc_consumer_t *c, char (*ids)[ID_MAX], size_t n)
{
    unsigned seen[MAX_N] = {0};
    for (size_t got = 0; got < n;) {
        codec_batch_t *b = batch_take(c, 5000);
        for (size_t i = 0; i < b->n_items; i++) {
            size_t j = 0;
            while (j < n && !id_eq(&b->items[i].id, ids[j]))
                j++;
            H_REQUIRE(j < n, "an id that should not come out: '%.*s'", (int)b->items[i].id.len,
                      (const char *)b->items[i].id.ptr);
            H_REQUIRE(seen[j]++ == 0, "%s came out twice", ids[j]);
            got++;
        }
        ack_all_ok(c, b);
        codec_batch_destroy(b);
    }
    expect_empty(c, "after the drain");
}

static void daemon_up(const char *const *flags)
{
    h_nats_start(false);
    h_daemon_start(flags);
}

/* ---- connect_fail, no_daemon ---------------------------------------------------------------- */

static int case_connect_fail(void)
{
    /* A port bound but not listening: connects are refused, and nobody else can take it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    H_REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                  getsockname(fd, (struct sockaddr *)&a, &len) == 0,
              "cannot reserve a loopback port");
    char url[64];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%d", ntohs(a.sin_port));

    lc_client_config_t cc;
    lc_client_config_init(&cc);
    cc.servers = url;
    cc.connect_timeout_ms = 1000;
    char err[256] = "";
    lc_client_t *cl = (lc_client_t *)&g_sentinel;
    uint64_t t0 = h_now_ms();
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &cl);
    h_log("%s: %s, '%s' after %" PRIu64 " ms", url, lc_status_str(st), err, h_now_ms() - t0);
    H_REQUIRE(st == LC_ECONNECT, "lc_client_open to %s: %s, expected LC_ECONNECT", url,
              lc_status_str(st));
    H_REQUIRE(cl == (lc_client_t *)&g_sentinel, "*out was written on failure");
    H_REQUIRE(strncmp(err, "connect: ", 9) == 0 && strlen(err) > 9, "error text '%s'", err);
    H_REQUIRE(strcmp(lc_status_str(st), "cannot connect to the NATS server") == 0, "status text");
    close(fd);
    return 0;
}

static int case_no_daemon(void)
{
    h_nats_start(false);
    lc_client_t *cl = client_open();
    char ids[1][ID_MAX];
    codec_work_item_t items[1];
    items_make(items, ids, 1, "nd", SIG_ONE);

    lc_item_result_t res[1] = {{.status = (codec_item_status_t)7}};
    lc_submit_summary_t sum = {.attempts = 999};
    uint64_t t0 = h_now_ms();
    lc_status_t st = lc_submit_request(cl, MODEL, items, 1, 1000, 2, res, &sum);
    uint64_t took = h_now_ms() - t0;
    H_REQUIRE(st == LC_ENORESPONDERS, "submit without a daemon: %s (%s)", lc_status_str(st),
              lc_client_error_get(cl));
    H_REQUIRE(strstr(lc_client_error_get(cl), H_PREFIX ".submit." MODEL) != NULL,
              "error text does not name the subject: '%s'", lc_client_error_get(cl));
    H_REQUIRE(sum.attempts == 999 && (int)res[0].status == 7, "outs written on failure");
    /* Two retries pause 100 ms and 200 ms after their no-responders answers. */
    H_REQUIRE(took >= 290, "3 attempts took %" PRIu64 " ms: the retries did not pause", took);

    lc_consumer_config_t k;
    lc_consumer_config_init(&k);
    k.model = MODEL;
    k.max_batch_size = 1;
    k.max_batch_tokens = 100;
    k.request_timeout_ms = 1000;
    lc_consumer_t *c = (lc_consumer_t *)&g_sentinel;
    st = lc_consumer_open(cl, &k, &c);
    H_REQUIRE(st == LC_ENORESPONDERS, "consumer open without a daemon: %s", lc_status_str(st));
    H_REQUIRE(c == (lc_consumer_t *)&g_sentinel, "*out was written on failure");
    H_REQUIRE(strstr(lc_client_error_get(cl), H_PREFIX ".register." MODEL) != NULL,
              "error text '%s'", lc_client_error_get(cl));

    /* The same request once a daemon listens: the failure above was the missing daemon. */
    h_daemon_start(NULL);
    st = lc_submit_request(cl, MODEL, items, 1, 3000, 0, res, &sum);
    H_REQUIRE(st == LC_OK && sum.accepted == 1 && sum.attempts == 1, "submit with a daemon: %s",
              lc_status_str(st));
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- submit_request, submit_send ----------------------------------------------------------- */

static void expect_result(const lc_item_result_t *r, size_t i, codec_item_status_t status,
                          const char *reason)
{
    H_REQUIRE(r[i].status == status && strcmp(r[i].reason, reason) == 0,
              "item %zu: status %d reason '%s', expected %d '%s'", i, (int)r[i].status, r[i].reason,
              (int)status, reason);
}

static int case_submit_request(void)
{
    const char *flags[] = {"--store", "memory", NULL};
    daemon_up(flags);
    lc_client_t *cl = client_open();
    uint64_t sig = 0;
    H_REQUIRE(lc_shape_sign(ONE, 1, &sig) == LC_OK && sig == SIG_ONE, "lc_shape_sign 0x%" PRIx64,
              sig);

    char ids[MAX_N][ID_MAX];
    codec_work_item_t items[MAX_N];
    lc_item_result_t res[MAX_N];
    lc_submit_summary_t sum;
    items_make(items, ids, 3, "sr", sig);
    lc_status_t st = lc_submit_request(cl, MODEL, items, 3, 3000, 0, res, &sum);
    H_REQUIRE(st == LC_OK, "submit: %s (%s)", lc_status_str(st), lc_client_error_get(cl));
    H_REQUIRE(sum.accepted == 3 && sum.duplicates == 0 && sum.rejected == 0 && sum.attempts == 1,
              "summary %u/%u/%u in %u attempts", sum.accepted, sum.duplicates, sum.rejected,
              sum.attempts);
    for (size_t i = 0; i < 3; i++)
        expect_result(res, i, CODEC_ITEM_ACCEPTED, "ok");

    st = lc_submit_request(cl, MODEL, items, 3, 3000, 0, res, &sum);
    H_REQUIRE(st == LC_OK && sum.duplicates == 3 && sum.accepted == 0,
              "resubmit: %s, %u duplicates", lc_status_str(st), sum.duplicates);
    for (size_t i = 0; i < 3; i++)
        expect_result(res, i, CODEC_ITEM_DUPLICATE, "duplicate");

    /* One message, each item judged on its own. */
    static const char *const THREE[] = {"You are a helpful assistant.", "Answer in French.",
                                        "Tools: search, calculator."};
    static const char *const REVERSED[] = {"Tools: search, calculator.", "Answer in French.",
                                           "You are a helpful assistant."};
    uint64_t hashes[3], sig3 = 0, sig_rev = 0;
    lc_shape_hash(THREE, 3, hashes);
    H_REQUIRE(lc_shape_sign(THREE, 3, &sig3) == LC_OK &&
                  lc_shape_sign(REVERSED, 3, &sig_rev) == LC_OK,
              "lc_shape_sign");
    items_make(items, ids, 6, "mx", sig);
    items[1].tokens = 0;                /* zero_tokens */
    items[2].has_signature = false;     /* no_shape */
    items[3].model = "other";           /* bad_model: not the subject's */
    items[4].component_hashes = hashes; /* hashes and their signature: accepted */
    items[4].n_component_hashes = 3;
    items[4].signature = sig3;
    items[5].component_hashes = hashes; /* hashes of THREE, signature of REVERSED */
    items[5].n_component_hashes = 3;
    items[5].signature = sig_rev;
    st = lc_submit_request(cl, MODEL, items, 6, 3000, 0, res, &sum);
    H_REQUIRE(st == LC_OK && sum.accepted == 2 && sum.rejected == 4,
              "mixed submit: %s, %u accepted, %u rejected", lc_status_str(st), sum.accepted,
              sum.rejected);
    expect_result(res, 0, CODEC_ITEM_ACCEPTED, "ok");
    expect_result(res, 1, CODEC_ITEM_REJECTED, "zero_tokens");
    expect_result(res, 2, CODEC_ITEM_REJECTED, "no_shape");
    expect_result(res, 3, CODEC_ITEM_REJECTED, "bad_model");
    expect_result(res, 4, CODEC_ITEM_ACCEPTED, "ok");
    expect_result(res, 5, CODEC_ITEM_REJECTED, "signature_mismatch");

    /* Refused by the client before anything is sent. */
    H_REQUIRE(lc_submit_request(cl, "a b", items, 1, 3000, 0, NULL, NULL) == LC_EINVAL,
              "a model with a space was sent");
    H_REQUIRE(lc_submit_request(cl, MODEL, items, 1, 0, 0, NULL, NULL) == LC_EINVAL,
              "timeout 0 was accepted");

    /* Exactly the accepted items are queued: sr-0..2 once (not their duplicates), mx-0, mx-4. */
    char want[5][ID_MAX] = {"sr-0", "sr-1", "sr-2", "mx-0", "mx-4"};
    lc_consumer_t *c = consumer_open(cl, 8, 0, false);
    drain_expect(c, want, 5);
    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(c));
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

static int case_submit_send(void)
{
    const char *flags[] = {"--store", "memory", NULL};
    daemon_up(flags);
    lc_client_t *cl = client_open();
    char ids[MAX_N][ID_MAX];
    codec_work_item_t items[MAX_N];
    items_make(items, ids, MAX_N, "ff", SIG_ONE);
    for (size_t i = 0; i < MAX_N; i += 4) {
        lc_status_t st = lc_submit_send(cl, MODEL, items + i, 4);
        H_REQUIRE(st == LC_OK, "lc_submit_send: %s (%s)", lc_status_str(st),
                  lc_client_error_get(cl));
    }
    H_REQUIRE(lc_submit_send(cl, MODEL, items, 0) == LC_EINVAL, "an empty submit was sent");
    H_REQUIRE(lc_client_flush(cl, 2000) == LC_OK, "flush: %s", lc_client_error_get(cl));
    lc_consumer_t *c = consumer_open(cl, 4, 0, false);
    drain_expect(c, ids, MAX_N);
    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(c));
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- consume_ack ----------------------------------------------------------------------------- */

static codec_batch_t *batch_next_ok(lc_consumer_t *c)
{
    codec_batch_t *b = NULL;
    lc_status_t st = lc_batch_next(c, 3000, &b);
    H_REQUIRE(st == LC_OK, "lc_batch_next: %s (%s)", lc_status_str(st), lc_consumer_error_get(c));
    return b;
}

static void expect_in_progress(lc_consumer_t *c, uint64_t n, const char *when)
{
    uint64_t got = stats_of(c).in_progress;
    H_REQUIRE(got == n, "%s: %" PRIu64 " batches in progress, expected %" PRIu64, when, got, n);
}

static int case_consume_ack(void)
{
    const char *flags[] = {"--store", "memory", "--heartbeat-ms", "300", NULL};
    daemon_up(flags);
    lc_client_t *cl = client_open();
    char ids[MAX_N][ID_MAX];
    codec_work_item_t items[MAX_N];
    items_make(items, ids, 4, "ca", SIG_ONE);
    submit_accepted(cl, items, 4);
    lc_consumer_t *c = consumer_open(cl, 4, 0, false);

    const lc_registered_t *reg = lc_consumer_registered_get(c);
    char want[160];
    snprintf(want, sizeof(want), "%s.pull.", H_PREFIX); /* its secret, not the public id */
    H_REQUIRE(strlen(reg->consumer_id) == 32 &&
                  strncmp(reg->pull_subject, want, strlen(want)) == 0 &&
                  strlen(reg->pull_subject + strlen(want)) == 32 &&
                  strstr(reg->pull_subject, reg->consumer_id) == NULL,
              "consumer id '%s', pull subject '%s'", reg->consumer_id, reg->pull_subject);
    H_REQUIRE(reg->heartbeat_ms == 300 && reg->dead_after_ms == 10000 && reg->ack_wait_ms == 30000,
              "Registered times %u/%u/%u", reg->heartbeat_ms, reg->dead_after_ms, reg->ack_wait_ms);

    codec_batch_t *b = batch_next_ok(c);
    H_REQUIRE(b->n_items == 4 && b->signature == SIG_ONE && strcmp(b->model, MODEL) == 0,
              "batch of %zu items, signature 0x%" PRIx64 ", model '%s'", b->n_items, b->signature,
              b->model);
    for (size_t i = 0; i < 4; i++)
        H_REQUIRE(id_eq(&b->items[i].id, ids[i]), "position %zu is not %s", i, ids[i]);
    expect_in_progress(c, 1, "after delivery");

    lc_ack_reply_t r = {.acked = 99};
    H_REQUIRE(lc_ack_progress_send(c, b->batch_id, 3000, &r) == LC_OK && r.acked == 0 &&
                  r.returned == 0 && r.unknown == 0,
              "in_progress ack: %s, reply %u/%u/%u", lc_consumer_error_get(c), r.acked, r.returned,
              r.unknown);
    expect_in_progress(c, 1, "after the extension");

    uint32_t acks[2] = {0, 1}, naks[1] = {3};
    codec_ack_t partial = {
        .batch_id = b->batch_id, .ack = acks, .n_ack = 2, .nak = naks, .n_nak = 1};
    H_REQUIRE(lc_ack_send(c, &partial, 3000, &r) == LC_OK && r.acked == 2 && r.returned == 1,
              "partial ack: %s, acked %u returned %u", lc_consumer_error_get(c), r.acked,
              r.returned);
    expect_in_progress(c, 1, "position 2 unsettled");
    H_REQUIRE(lc_ack_send(c, &partial, 3000, &r) == LC_OK && r.acked == 0 && r.returned == 0,
              "repeated partial ack: acked %u returned %u", r.acked, r.returned);
    H_REQUIRE(lc_ack_all_send(c, b->batch_id, 3000, &r) == LC_OK && r.acked == 1,
              "ack all: acked %u", r.acked);
    expect_in_progress(c, 0, "after ack all");
    r.acked = 99;
    lc_status_t st = lc_ack_all_send(c, b->batch_id, 3000, &r);
    H_REQUIRE(st == LC_EUNKNOWN_BATCH && r.acked == 99, "settled batch acked again: %s",
              lc_status_str(st));
    H_REQUIRE(strstr(lc_consumer_error_get(c), "unknown_batch") != NULL, "error '%s'",
              lc_consumer_error_get(c));
    codec_batch_destroy(b);

    /* The nak'd item, back at the front: nak it whole, then ack it fire-and-forget. */
    b = batch_next_ok(c);
    H_REQUIRE(b->n_items == 1 && id_eq(&b->items[0].id, "ca-3") && b->items[0].deliveries == 2,
              "redelivery: %zu items, deliveries %u", b->n_items, b->items[0].deliveries);
    H_REQUIRE(lc_ack_nak_send(c, b->batch_id, 1, 3000, &r) == LC_OK && r.returned == 1,
              "nak whole batch: returned %u", r.returned);
    expect_in_progress(c, 0, "after the nak");
    codec_batch_destroy(b);
    b = batch_next_ok(c);
    H_REQUIRE(id_eq(&b->items[0].id, "ca-3") && b->items[0].deliveries == 3, "deliveries %u",
              b->items[0].deliveries);
    H_REQUIRE(lc_ack_all_send(c, b->batch_id, 0, NULL) == LC_OK, "fire-and-forget ack");
    expect_in_progress(c, 0, "after the fire-and-forget ack");
    st = lc_ack_all_send(c, b->batch_id, 3000, &r);
    H_REQUIRE(st == LC_EUNKNOWN_BATCH, "the fire-and-forget ack was not applied: %s",
              lc_status_str(st));
    codec_batch_destroy(b);
    expect_empty(c, "everything acked");
    expect_empty(c, "again: the expired pull is closed, a new one goes out");

    lc_consumer_stats_t s = stats_of(c);
    H_REQUIRE(s.batches == 3 && s.expired == 2 && s.pulls_sent == 5 && s.pulls_lost == 0 &&
                  s.registrations == 1,
              "stats: batches %" PRIu64 " expired %" PRIu64 " pulls %" PRIu64 " lost %" PRIu64,
              s.batches, s.expired, s.pulls_sent, s.pulls_lost);

    /* One Pull with two credits brings two batches (two shapes); lc_batch_next sends no pull. */
    items_make(items, ids, 2, "cr", SIG_ONE);
    items[1].signature = 0x1234;
    submit_accepted(cl, items, 2);
    H_REQUIRE(lc_pull_send(c, 2, 3000) == LC_OK, "pull: %s", lc_consumer_error_get(c));
    for (int i = 0; i < 2; i++) {
        b = batch_next_ok(c);
        ack_all_ok(c, b);
        codec_batch_destroy(b);
    }
    H_REQUIRE(stats_of(c).pulls_sent == 6, "pulls_sent %" PRIu64 " after a two-credit pull",
              stats_of(c).pulls_sent);

    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(c));
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- in_progress, heartbeat ------------------------------------------------------------------ */

static int case_in_progress(void)
{
    const char *flags[] = {"--store", "memory", "--heartbeat-ms", "100", "--ack-wait-ms",
                           "800",     NULL};
    daemon_up(flags);
    lc_client_t *cl = client_open();
    lc_consumer_t *c = consumer_open(cl, 1, 0, false);

    H_REQUIRE(lc_inprogress_add(c, 77) == LC_OK && lc_inprogress_add(c, 77) == LC_OK &&
                  lc_inprogress_add(c, 78) == LC_OK,
              "lc_inprogress_add");
    expect_in_progress(c, 2, "77 twice and 78");
    lc_inprogress_remove(c, 77);
    lc_inprogress_remove(c, 999);
    expect_in_progress(c, 1, "77 and an absent id removed");
    lc_inprogress_remove(c, 78);
    expect_in_progress(c, 0, "all removed");

    char ids[2][ID_MAX];
    codec_work_item_t items[2];
    items_make(items, ids, 2, "ip", SIG_ONE);
    submit_accepted(cl, items, 2);

    /* Named by heartbeats: still ours after 2.5 ack_wait periods. */
    codec_batch_t *b = batch_take(c, 3000);
    h_sleep_ms(2000);
    ack_all_ok(c, b);
    codec_batch_destroy(b);

    /* Removed from the set: its deadline runs out and it comes back under a new batch id. */
    b = batch_take(c, 3000);
    lc_inprogress_remove(c, b->batch_id);
    codec_batch_t *again = batch_take(c, 5000);
    H_REQUIRE(id_eq(&again->items[0].id, "ip-1") && again->items[0].deliveries == 2 &&
                  again->batch_id != b->batch_id,
              "redelivery: deliveries %u", again->items[0].deliveries);
    lc_status_t st = lc_ack_all_send(c, b->batch_id, 3000, NULL);
    H_REQUIRE(st == LC_EUNKNOWN_BATCH, "ack of the expired batch: %s", lc_status_str(st));
    ack_all_ok(c, again);
    codec_batch_destroy(b);
    codec_batch_destroy(again);

    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(c));
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

static int case_heartbeat(void)
{
    const char *flags[] = {"--store", "memory", "--heartbeat-ms", "100", "--dead-after-ms",
                           "600",     NULL};
    daemon_up(flags);
    lc_client_t *cl = client_open();
    char ids[2][ID_MAX];
    codec_work_item_t items[2];
    items_make(items, ids, 2, "hb", SIG_ONE);
    submit_accepted(cl, items, 2);
    lc_consumer_t *alive = consumer_open(cl, 1, 0, false);
    lc_consumer_t *silent = consumer_open(cl, 1, 0, true);
    codec_batch_t *ba = batch_take(alive, 3000);
    codec_batch_t *bs = batch_take(silent, 3000);

    h_sleep_ms(2000); /* over three dead_after periods without a call */
    lc_consumer_stats_t s = stats_of(alive);
    h_log("heartbeats sent %" PRIu64 ", failed %" PRIu64, s.heartbeats_sent, s.heartbeats_failed);
    H_REQUIRE(s.heartbeats_sent >= 5 && s.heartbeats_failed == 0, "heartbeats %" PRIu64 "/%" PRIu64,
              s.heartbeats_sent, s.heartbeats_failed);
    H_REQUIRE(stats_of(silent).heartbeats_sent == 0, "no_heartbeat sent heartbeats");
    ack_all_ok(alive, ba);
    lc_status_t st = lc_ack_all_send(silent, bs->batch_id, 3000, NULL);
    H_REQUIRE(st == LC_EUNKNOWN_CONSUMER, "the consumer without heartbeats: %s", lc_status_str(st));

    /* The dead consumer's batch went back and reaches the live one. */
    codec_batch_t *b = batch_take(alive, 3000);
    H_REQUIRE(bytes_eq(&b->items[0].id, bs->items[0].id.ptr, bs->items[0].id.len) &&
                  b->items[0].deliveries == 2,
              "returned item: deliveries %u", b->items[0].deliveries);
    ack_all_ok(alive, b);
    codec_batch_destroy(b);
    codec_batch_destroy(ba);
    codec_batch_destroy(bs);

    H_REQUIRE(lc_bye_send(alive, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(alive));
    lc_consumer_close(alive);
    lc_consumer_close(silent);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- bye, daemon_restart --------------------------------------------------------------------- */

/*
 * Whether raw Pulls on subject (from a connection of the harness: the library has no call for a
 * dead id) are answered unknown_consumer within 5 attempts. The daemon may take a Pull that
 * overtook the Bye on another connection first; Bye then closes it EXPIRED, hence the attempts.
 */
static bool raw_pull_unknown(const char *subject)
{
    natsConnection *nc = h_connect();
    codec_pull_t pull = {.max_batches = 1, .expires_ms = 200};
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_pull(&pull, &buf, &len) == CODEC_OK, "encode Pull");
    bool unknown = false;
    for (int attempt = 0; attempt < 5 && !unknown; attempt++) {
        natsMsg *msg = NULL;
        natsStatus s = h_request(nc, subject, buf, len, 3000, &msg);
        H_REQUIRE(s == NATS_OK, "raw pull on %s: %s", subject, natsStatus_GetText(s));
        codec_batch_t *b = NULL;
        H_REQUIRE(codec_decode_batch(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg),
                                     &b) == CODEC_OK,
                  "the reply is not a Batch");
        unknown = b->status == CODEC_BATCH_ERROR && h_err_is(b->error, "unknown_consumer");
        codec_batch_destroy(b);
        natsMsg_Destroy(msg);
    }
    free(buf);
    h_disconnect(nc);
    return unknown;
}

static int case_bye(void)
{
    const char *flags[] = {"--store", "memory", NULL}; /* dead_after 10 s: Bye must beat it */
    daemon_up(flags);
    lc_client_t *cl = client_open();
    char ids[2][ID_MAX];
    codec_work_item_t items[2];
    items_make(items, ids, 2, "by", SIG_ONE);
    submit_accepted(cl, items, 2);
    lc_consumer_t *leaving = consumer_open(cl, 2, 0, false);
    codec_batch_t *b = batch_take(leaving, 3000);
    H_REQUIRE(b->n_items == 2, "batch of %zu", b->n_items);
    char old_id[80];
    snprintf(old_id, sizeof(old_id), "%s", lc_consumer_registered_get(leaving)->consumer_id);

    uint64_t t0 = h_now_ms();
    H_REQUIRE(lc_bye_send(leaving, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(leaving));
    expect_in_progress(leaving, 0, "after bye");
    codec_batch_t *x = NULL;
    H_REQUIRE(lc_batch_next(leaving, 100, &x) == LC_EINVAL &&
                  lc_ack_all_send(leaving, b->batch_id, 3000, NULL) == LC_EINVAL,
              "a consumer that said bye can still pull or ack");

    lc_consumer_t *other = consumer_open(cl, 2, 0, false);
    codec_batch_t *back = batch_take(other, 5000);
    uint64_t took = h_now_ms() - t0;
    H_REQUIRE(back->n_items == 2 && back->items[0].deliveries == 2 && took < 5000,
              "after bye: %zu items, deliveries %u, after %" PRIu64 " ms", back->n_items,
              back->items[0].deliveries, took);
    ack_all_ok(other, back);
    codec_batch_destroy(back);
    codec_batch_destroy(b);

    H_REQUIRE(lc_consumer_register(leaving) == LC_OK, "register again: %s",
              lc_consumer_error_get(leaving));
    const lc_registered_t *reg = lc_consumer_registered_get(leaving);
    H_REQUIRE(strcmp(reg->consumer_id, old_id) != 0 && stats_of(leaving).registrations == 2,
              "re-registration kept id %s", reg->consumer_id);
    char pull_subject[160];
    snprintf(pull_subject, sizeof(pull_subject), "%s", reg->pull_subject);
    H_REQUIRE(lc_bye_send(leaving, 0) == LC_OK, "fire-and-forget bye: %s",
              lc_consumer_error_get(leaving));
    H_REQUIRE(raw_pull_unknown(pull_subject), "the id is alive after a fire-and-forget bye");

    H_REQUIRE(lc_bye_send(other, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(other));
    lc_consumer_close(leaving);
    lc_consumer_close(other);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

static int case_daemon_restart(void)
{
    const char *flags[] = {"--heartbeat-ms", "100", "--dead-after-ms", "800", NULL};
    daemon_up(flags); /* disk store: the unacked item survives the restart */
    lc_client_t *cl = client_open();
    char ids[1][ID_MAX];
    codec_work_item_t items[1];
    items_make(items, ids, 1, "dr", SIG_ONE);
    submit_accepted(cl, items, 1);
    lc_consumer_t *c = consumer_open(cl, 1, 0, false);
    codec_batch_t *b = batch_take(c, 3000);
    char old_id[80];
    snprintf(old_id, sizeof(old_id), "%s", lc_consumer_registered_get(c)->consumer_id);

    h_daemon_stop_clean();
    h_daemon_restart();
    codec_batch_t *x = NULL;
    lc_status_t st = lc_batch_next(c, 3000, &x);
    H_REQUIRE(st == LC_EUNKNOWN_CONSUMER, "pull after the restart: %s (%s)", lc_status_str(st),
              lc_consumer_error_get(c));
    st = lc_ack_all_send(c, b->batch_id, 3000, NULL);
    H_REQUIRE(st == LC_EUNKNOWN_CONSUMER, "ack after the restart: %s", lc_status_str(st));
    expect_in_progress(c, 1, "unknown_consumer keeps the set");
    codec_batch_destroy(b);

    H_REQUIRE(lc_consumer_register(c) == LC_OK, "register again: %s", lc_consumer_error_get(c));
    H_REQUIRE(strcmp(lc_consumer_registered_get(c)->consumer_id, old_id) != 0,
              "the new registration kept the old id");
    expect_in_progress(c, 0, "after re-registering");
    lc_consumer_stats_t s = stats_of(c);
    H_REQUIRE(s.registrations == 2, "registrations %" PRIu64, s.registrations);

    b = batch_take(c, 5000);
    H_REQUIRE(id_eq(&b->items[0].id, "dr-0"), "the unacked item did not come back");
    h_sleep_ms(2000); /* over two dead_after periods: the thread beats on the new subject */
    ack_all_ok(c, b);
    codec_batch_destroy(b);

    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(c));
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- sub_flood --------------------------------------------------------------------------------
 */

#define FLOOD_ROUNDS 5000

static atomic_bool g_flooding;

static void *flood_main(void *arg)
{
    natsConnection *nc = arg;
    while (atomic_load(&g_flooding)) {
        for (int i = 0; i < 100; i++)
            natsConnection_PublishString(nc, "flood", "x");
        natsConnection_FlushTimeout(nc, 1000);
    }
    return NULL;
}

static int case_sub_flood(void)
{
    h_nats_start(false);
    natsConnection *pub = h_connect(), *nc = h_connect();
    pthread_t t;
    atomic_store(&g_flooding, true);
    H_REQUIRE(pthread_create(&t, NULL, flood_main, pub) == 0, "pthread_create");
    uint32_t got = 0;
    for (uint32_t i = 0; i < FLOOD_ROUNDS; i++) {
        natsSubscription *sub = NULL;
        H_REQUIRE(natsConnection_SubscribeSync(&sub, nc, "flood") == NATS_OK, "subscribe");
        natsSubscription_SetPendingLimits(sub, -1, -1);
        natsMsg *m = NULL;
        if (natsSubscription_NextMsg(&m, sub, 1000) == NATS_OK)
            got++;
        natsMsg_Destroy(m);
        lc_sub_destroy(nc, sub);
    }
    atomic_store(&g_flooding, false);
    pthread_join(t, NULL);
    /* Every round must have had messages in flight, or it tested nothing. */
    H_REQUIRE(got == FLOOD_ROUNDS, "only %u of %u rounds saw the flood", got, FLOOD_ROUNDS);
    h_log("%u subscriptions dropped under a flood", got);
    natsConnection_Destroy(nc);
    natsConnection_Destroy(pub);
    return 0;
}

/* ---- send_prompt: messages leave when sent ----------------------------------------------------
 */

#define TURN_ROUNDS    120
#define TURN_MARGIN_US 300 /* a third of the 1 ms nats.c's flusher waits before each write */
#define TURN_ATTEMPTS  3

static uint64_t turn_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int turn_gap_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median time in us from a fire-and-forget ack to the next one-item batch, over a queue
 * filled beforehand, with the daemon's --send and the client's nats_flusher given. */
static uint64_t turnaround_median_us(const char *send, bool client_flusher)
{
    const char *flags[] = {"--store", "memory", "--send", send, NULL};
    h_daemon_start(flags);
    lc_client_t *cl = client_open_with(client_flusher);
    char ids[MAX_N][ID_MAX], prefix[16];
    codec_work_item_t items[MAX_N];
    for (unsigned k = 0; k * MAX_N < TURN_ROUNDS; k++) {
        snprintf(prefix, sizeof(prefix), "t%u", k);
        items_make(items, ids, MAX_N, prefix, SIG_ONE);
        submit_accepted(cl, items, MAX_N);
    }
    lc_consumer_t *c = consumer_open(cl, 1, 0, false);
    uint64_t gaps[TURN_ROUNDS - 1];
    codec_batch_t *b = batch_take(c, 5000);
    for (size_t i = 0; i < TURN_ROUNDS - 1; i++) {
        H_REQUIRE(b->n_items == 1, "a batch of %zu items for max_batch_size 1", b->n_items);
        H_REQUIRE(lc_ack_all_send(c, b->batch_id, 0, NULL) == LC_OK, "ack: %s",
                  lc_consumer_error_get(c));
        codec_batch_destroy(b);
        uint64_t t0 = turn_now_us();
        b = batch_take(c, 5000);
        gaps[i] = turn_now_us() - t0;
    }
    codec_batch_destroy(b);
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    qsort(gaps, TURN_ROUNDS - 1, sizeof(gaps[0]), turn_gap_cmp);
    return gaps[(TURN_ROUNDS - 1) / 2];
}

/* A worker that acks and pulls after each batch gets the next one without waiting for nats.c's
 * flusher on either side: the client writes its pull when it sends it (connection.c invariant 5)
 * and the daemon its Batch when it goes idle (front.c invariant 13). Each side left to the
 * flusher costs most of its 1 ms wait; the comparison is within one run, retried on a busy machine.
 * With LANES_TURN_TIMED=0 (the sanitizer build, where a turn's own work takes most of a
 * millisecond and overlaps the flusher's wait) every mode still runs and delivers each batch, and
 * the medians are logged, not compared.
 */
static int case_send_prompt(void)
{
    h_nats_start(false);
    const char *timed = getenv("LANES_TURN_TIMED");
    bool compare = timed == NULL || strcmp(timed, "0") != 0;
    uint64_t both = 0, daemon_flusher = 0, client_flusher = 0;
    for (int attempt = 1; attempt <= TURN_ATTEMPTS; attempt++) {
        both = turnaround_median_us("prompt", false);
        daemon_flusher = turnaround_median_us("flusher", false);
        client_flusher = turnaround_median_us("prompt", true);
        h_log("attempt %d: median ack to next batch %" PRIu64 " us, %" PRIu64
              " us with the daemon's flusher, %" PRIu64 " us with the client's%s",
              attempt, both, daemon_flusher, client_flusher, compare ? "" : " (not compared)");
        if (!compare ||
            (both + TURN_MARGIN_US < daemon_flusher && both + TURN_MARGIN_US < client_flusher))
            return 0;
    }
    h_fail(__FILE__, __LINE__,
           "sending at once saved less than %u us on a side: %" PRIu64 " us against %" PRIu64
           " (daemon's flusher) and %" PRIu64 " (client's)",
           TURN_MARGIN_US, both, daemon_flusher, client_flusher);
}

/* ---- main ------------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    int (*fn)(void);
} CASES[] = {
    {"connect_fail", case_connect_fail},     {"no_daemon", case_no_daemon},
    {"submit_request", case_submit_request}, {"submit_send", case_submit_send},
    {"consume_ack", case_consume_ack},       {"in_progress", case_in_progress},
    {"heartbeat", case_heartbeat},           {"bye", case_bye},
    {"daemon_restart", case_daemon_restart}, {"sub_flood", case_sub_flood},
    {"send_prompt", case_send_prompt},
};

int main(int argc, char **argv)
{
    size_t n_cases = sizeof(CASES) / sizeof(CASES[0]);
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < n_cases; i++)
            printf("%s\n", CASES[i].name);
        return 0;
    }
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: test_client_nats CASE PATH_TO_LANESCHED [PATH_TO_NATS_SERVER]\n"
                        "       test_client_nats list\n");
        return 2;
    }
    for (size_t i = 0; i < n_cases; i++) {
        if (strcmp(argv[1], CASES[i].name) != 0)
            continue;
        h_init(CASES[i].name, argv[2], argc == 4 ? argv[3] : NULL);
        uint64_t t0 = h_now_ms();
        int rc = CASES[i].fn();
        nats_CloseAndWait(2000);
        if (rc == 0)
            h_log("PASSED in %.1f s", (double)(h_now_ms() - t0) / 1000.0);
        return rc;
    }
    fprintf(stderr, "test_client_nats: unknown case '%s' (try 'test_client_nats list')\n", argv[1]);
    return 2;
}
