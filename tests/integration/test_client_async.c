/*
 * test_client_async.c - the C client's ways of filling the pipe, end to end against a real
 * nats-server and the real daemon (harness.h): asynchronous submits with a window and a callback
 * each (lc_submit_async*), consumer prefetch (several pulls outstanding) and acks that need not
 * wait (lc_ack_async_*).
 *
 *   test_client_async_nats CASE PATH_TO_LANESCHED [PATH_TO_NATS_SERVER]
 *   test_client_async_nats list
 *
 *   submit_async   one callback per Submit with its tag and one verdict per item, never more than
 *                  the window outstanding, DUPLICATE for the same ids again, every item out once.
 *   submit_retry   the daemon stopped (SIGSTOP) under a window of Submits: they are resent with the
 *                  same bytes and, once it runs again, every item is stored and delivered once.
 *   submit_giveup  no daemon: the callbacks say LC_ETIMEOUT / LC_ENORESPONDERS after the retries;
 *                  a full window refuses the next Submit after stall_ms with no callback for it;
 *                  lc_client_close gives the outstanding ones their callback.
 *   prefetch       the credits are topped up to prefetch at half (fewer Pulls than batches), every
 *                  item comes out once, and an idle consumer's pulls expire as LC_EEMPTY.
 *   ack_async      every batch acked without waiting: one callback each with its count, the
 *                  in-progress set emptied by the replies, an unknown batch reported as such, Bye
 *                  after waiting for the acks (nothing returned), every item completed once.
 *   ack_giveup     the daemon stopped: an async ack is given up after its retries, its batch
 *                  leaves the in-progress set and the failure is counted.
 *   tools          lanesched-produce --async (twice: the second all duplicates) and
 *                  lanesched-consume --prefetch --ack-async move every item once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/c/lanes_client.h"
#include "tests/integration/harness.h"

#define MODEL  "m"
#define SIG    0x91f47f2f45b64efdull
#define ID_MAX 32

/* ---- helpers ------------------------------------------------------------------------------- */

static lc_client_t *client_open(void)
{
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    cc.servers = h_url();
    cc.prefix = H_PREFIX;
    cc.connect_timeout_ms = 2000;
    char err[256];
    lc_client_t *cl = NULL;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &cl);
    H_REQUIRE(st == LC_OK, "lc_client_open: %s (%s)", lc_status_str(st), err);
    return cl;
}

typedef struct {
    size_t calls, ok, accepted, duplicates, rejected, failed, retried;
    lc_status_t last_status;
    char last_error[256];
    unsigned char seen[1024]; /* callbacks per tag */
} done_t;

static void on_done(void *closure, const lc_submit_done_t *d)
{
    done_t *k = closure;
    k->calls++;
    H_REQUIRE(d->tag < sizeof(k->seen), "tag %" PRIu64 " out of range", d->tag);
    k->seen[d->tag]++;
    k->last_status = d->status;
    snprintf(k->last_error, sizeof(k->last_error), "%s", d->error);
    k->retried += d->summary.attempts > 1;
    if (d->status != LC_OK) {
        H_REQUIRE(d->results == NULL, "results given with status %s", lc_status_str(d->status));
        k->failed++;
        return;
    }
    H_REQUIRE(d->results != NULL && d->error[0] == '\0', "LC_OK without results or with '%s'",
              d->error);
    k->ok++;
    k->accepted += d->summary.accepted;
    k->duplicates += d->summary.duplicates;
    k->rejected += d->summary.rejected;
    for (size_t i = 0; i < d->n; i++)
        H_REQUIRE(d->results[i].status != CODEC_ITEM_REJECTED, "item rejected: %s",
                  d->results[i].reason);
}

static void async_open(lc_client_t *cl, done_t *k, uint32_t window, int64_t timeout_ms,
                       uint32_t retries, int64_t stall_ms)
{
    lc_submit_async_config_t ac;
    lc_submit_async_config_init(&ac);
    ac.window = window;
    ac.timeout_ms = timeout_ms;
    ac.retries = retries;
    ac.stall_ms = stall_ms;
    ac.done = on_done;
    ac.closure = k;
    lc_status_t st = lc_submit_async_open(cl, &ac);
    H_REQUIRE(st == LC_OK, "lc_submit_async_open: %s (%s)", lc_status_str(st),
              lc_client_error_get(cl));
    H_REQUIRE(lc_submit_async_open(cl, &ac) == LC_EINVAL, "a second open was accepted");
}

/* Items "<prefix>-<first + i>" for i < n, model NULL (the client fills it in). */
static void items_make(codec_work_item_t *items, char (*ids)[ID_MAX], size_t first, size_t n,
                       const char *prefix)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], ID_MAX, "%s-%zu", prefix, first + i);
        items[i] = h_item(ids[i], NULL, SIG, 10, "p", 1);
    }
}

static lc_consumer_t *consumer_open(lc_client_t *cl, uint32_t bs, uint32_t prefetch,
                                    lc_ack_done_fn ack_done, void *closure, int64_t timeout_ms,
                                    uint32_t retries)
{
    lc_consumer_config_t k;
    lc_consumer_config_init(&k);
    k.model = MODEL;
    k.max_batch_size = bs;
    k.max_batch_tokens = 100000;
    k.request_timeout_ms = timeout_ms;
    k.request_retries = retries;
    k.prefetch = prefetch;
    k.prefetch_expires_ms = 1000;
    k.ack_window = 2;
    k.ack_done = ack_done;
    k.ack_closure = closure;
    lc_consumer_t *c = NULL;
    lc_status_t st = lc_consumer_open(cl, &k, &c);
    H_REQUIRE(st == LC_OK, "lc_consumer_open: %s (%s)", lc_status_str(st), lc_client_error_get(cl));
    return c;
}

/* Reads batches (acking each with a request) until n items came out, each of "<prefix>-<i>"
 * exactly once; then requires an empty queue. */
static void drain_once(lc_consumer_t *c, const char *prefix, size_t n)
{
    unsigned char *seen = calloc(n, 1);
    H_REQUIRE(seen != NULL, "out of memory");
    uint64_t until = h_now_ms() + 20000;
    for (size_t got = 0; got < n;) {
        codec_batch_t *b = NULL;
        lc_status_t st = lc_batch_next(c, 500, &b);
        H_REQUIRE(h_now_ms() < until, "only %zu of %zu items came out", got, n);
        if (st == LC_EEMPTY || st == LC_ETIMEOUT)
            continue;
        H_REQUIRE(st == LC_OK, "lc_batch_next: %s (%s)", lc_status_str(st),
                  lc_consumer_error_get(c));
        for (size_t i = 0; i < b->n_items; i++) {
            size_t plen = strlen(prefix), j = 0;
            const codec_bytes_t *id = &b->items[i].id;
            H_REQUIRE(id->len > plen + 1 && memcmp(id->ptr, prefix, plen) == 0,
                      "a foreign id came out: %.*s", (int)id->len, (const char *)id->ptr);
            for (size_t k = plen + 1; k < id->len; k++)
                j = j * 10 + (size_t)(id->ptr[k] - '0');
            H_REQUIRE(j < n && seen[j]++ == 0, "%.*s came out twice", (int)id->len,
                      (const char *)id->ptr);
            got++;
        }
        lc_ack_reply_t r;
        H_REQUIRE(lc_ack_all_send(c, b->batch_id, 3000, &r) == LC_OK && r.acked == b->n_items,
                  "ack: %s", lc_consumer_error_get(c));
        codec_batch_destroy(b);
    }
    free(seen);
    codec_batch_t *b = NULL;
    lc_status_t st = lc_batch_next(c, 500, &b);
    H_REQUIRE(st == LC_EEMPTY || st == LC_ETIMEOUT, "more came out after the drain: %s",
              lc_status_str(st));
}

/* ---- submit_async ------------------------------------------------------------------------- */

static int case_submit_async(void)
{
    const char *flags[] = {"--store", "memory", NULL};
    h_nats_start(false);
    h_daemon_start(flags);
    lc_client_t *cl = client_open();
    done_t k = {0};
    H_REQUIRE(lc_submit_async(cl, MODEL, NULL, 0, 0) == LC_EINVAL, "submit before open");
    async_open(cl, &k, 4, 3000, 2, 0);
    enum { MSGS = 100, PER = 8 };
    codec_work_item_t items[PER];
    char ids[PER][ID_MAX];
    for (size_t m = 0; m < MSGS; m++) {
        items_make(items, ids, m * PER, PER, "sa");
        lc_status_t st = lc_submit_async(cl, MODEL, items, PER, m);
        H_REQUIRE(st == LC_OK, "lc_submit_async %zu: %s (%s)", m, lc_status_str(st),
                  lc_client_error_get(cl));
        H_REQUIRE(lc_submit_async_pending(cl) <= 4, "%zu outstanding with a window of 4",
                  lc_submit_async_pending(cl));
    }
    H_REQUIRE(lc_submit_async(cl, MODEL, items, 0, 999) == LC_EINVAL, "an empty submit was sent");
    H_REQUIRE(lc_submit_async_complete(cl, 10000) == LC_OK, "complete: %s",
              lc_client_error_get(cl));
    H_REQUIRE(lc_submit_async_pending(cl) == 0, "outstanding after complete");
    H_REQUIRE(k.calls == MSGS && k.ok == MSGS && k.accepted == MSGS * PER,
              "%zu callbacks, %zu ok, %zu items accepted", k.calls, k.ok, k.accepted);
    for (size_t m = 0; m < MSGS; m++)
        H_REQUIRE(k.seen[m] == 1, "tag %zu called back %u times", m, k.seen[m]);
    /* the same ids again: the daemon's dedupe says DUPLICATE for each */
    for (size_t m = 0; m < 4; m++) {
        items_make(items, ids, m * PER, PER, "sa");
        H_REQUIRE(lc_submit_async(cl, MODEL, items, PER, MSGS + m) == LC_OK, "resubmit");
    }
    H_REQUIRE(lc_submit_async_complete(cl, 10000) == LC_OK, "complete again");
    H_REQUIRE(k.duplicates == 4 * PER && k.accepted == MSGS * PER,
              "%zu duplicates, %zu accepted after the resubmit", k.duplicates, k.accepted);
    lc_consumer_t *c = consumer_open(cl, 16, 0, NULL, NULL, 3000, 0);
    drain_once(c, "sa", MSGS * PER);
    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye");
    lc_consumer_close(c);
    lc_client_close(cl);
    H_REQUIRE(k.calls == MSGS + 4, "callbacks after close: %zu", k.calls);
    h_daemon_stop_clean();
    return 0;
}

/* ---- submit_retry ------------------------------------------------------------------------- */

static int case_submit_retry(void)
{
    h_nats_start(false);
    h_daemon_start(NULL); /* the disk store: the retries meet a real flush */
    lc_client_t *cl = client_open();
    done_t k = {0};
    async_open(cl, &k, 8, 300, 20, 20000);
    enum { MSGS = 8, PER = 4 };
    codec_work_item_t items[PER];
    char ids[PER][ID_MAX];
    h_daemon_pause();
    for (size_t m = 0; m < MSGS; m++) {
        items_make(items, ids, m * PER, PER, "sr");
        H_REQUIRE(lc_submit_async(cl, MODEL, items, PER, m) == LC_OK, "submit %zu", m);
    }
    for (int i = 0; i < 10; i++) { /* 1 s: three resends of each, none answered */
        H_REQUIRE(lc_submit_async_poll(cl) == LC_OK, "poll");
        h_sleep_ms(100);
    }
    H_REQUIRE(k.calls == 0, "%zu callbacks while the daemon was stopped", k.calls);
    h_daemon_resume();
    H_REQUIRE(lc_submit_async_complete(cl, 15000) == LC_OK, "complete: %s",
              lc_client_error_get(cl));
    H_REQUIRE(k.ok == MSGS && k.retried == MSGS, "%zu ok, %zu retried of %d", k.ok, k.retried,
              MSGS);
    /* every item was stored once: accepted by one attempt, a duplicate to the others */
    H_REQUIRE(k.accepted + k.duplicates == MSGS * PER, "%zu accepted + %zu duplicates", k.accepted,
              k.duplicates);
    lc_consumer_t *c = consumer_open(cl, 32, 0, NULL, NULL, 3000, 0);
    drain_once(c, "sr", MSGS * PER);
    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye");
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- submit_giveup ------------------------------------------------------------------------ */

static int case_submit_giveup(void)
{
    h_nats_start(false);
    lc_client_t *cl = client_open();
    done_t k = {0};
    async_open(cl, &k, 1, 200, 1, 150);
    codec_work_item_t items[2];
    char ids[2][ID_MAX];
    items_make(items, ids, 0, 2, "sg");
    uint64_t t0 = h_now_ms();
    H_REQUIRE(lc_submit_async(cl, MODEL, items, 2, 0) == LC_OK, "first submit");
    /* the window of one is full: the next waits stall_ms, then is refused, unsent */
    lc_status_t st = lc_submit_async(cl, MODEL, items, 2, 1);
    H_REQUIRE(st == LC_ETIMEOUT, "a submit into a full window: %s", lc_status_str(st));
    H_REQUIRE(h_now_ms() - t0 >= 140, "the stall did not wait");
    H_REQUIRE(lc_submit_async_complete(cl, 3000) == LC_OK, "complete: %s", lc_client_error_get(cl));
    uint64_t took = h_now_ms() - t0;
    H_REQUIRE(k.calls == 1 && k.seen[0] == 1 && k.seen[1] == 0, "%zu callbacks", k.calls);
    H_REQUIRE(k.last_status == LC_ETIMEOUT || k.last_status == LC_ENORESPONDERS, "given up with %s",
              lc_status_str(k.last_status));
    H_REQUIRE(strstr(k.last_error, "2 attempts") != NULL, "error text '%s'", k.last_error);
    H_REQUIRE(took >= 390, "two attempts of 200 ms took %" PRIu64 " ms", took);
    /* one outstanding at close: its callback comes from lc_client_close */
    H_REQUIRE(lc_submit_async(cl, MODEL, items, 2, 2) == LC_OK, "third submit");
    lc_client_close(cl);
    H_REQUIRE(k.calls == 2 && k.seen[2] == 1 && k.last_status == LC_ETIMEOUT &&
                  strstr(k.last_error, "closed") != NULL,
              "close: %zu callbacks, %s, '%s'", k.calls, lc_status_str(k.last_status),
              k.last_error);
    return 0;
}

/* ---- prefetch ----------------------------------------------------------------------------- */

static int case_prefetch(void)
{
    const char *flags[] = {"--store", "memory", NULL};
    h_nats_start(false);
    h_daemon_start(flags);
    lc_client_t *cl = client_open();
    enum { N = 48 };
    codec_work_item_t items[N];
    char ids[N][ID_MAX];
    items_make(items, ids, 0, N, "pf");
    lc_item_result_t res[N];
    H_REQUIRE(lc_submit_request(cl, MODEL, items, N, 3000, 0, res, NULL) == LC_OK, "submit");
    lc_consumer_t *c = consumer_open(cl, 1, 8, NULL, NULL, 3000, 0);
    drain_once(c, "pf", N);
    lc_consumer_stats_t s;
    lc_consumer_stats_get(c, &s);
    /* one Pull per four batches (8 credits topped up at half), plus the drain's last waits */
    H_REQUIRE(s.batches == N, "%" PRIu64 " batches", s.batches);
    H_REQUIRE(s.pulls_sent <= N / 4 + 3, "%" PRIu64 " pulls for %d batches", s.pulls_sent, N);
    /* idle: the prefetched pulls expire (1 s) and say so */
    uint64_t until = h_now_ms() + 5000;
    codec_batch_t *b = NULL;
    lc_status_t st;
    while ((st = lc_batch_next(c, 300, &b)) == LC_ETIMEOUT && h_now_ms() < until) {
    }
    H_REQUIRE(st == LC_EEMPTY, "an idle prefetch gave %s", lc_status_str(st));
    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye");
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- ack_async, ack_giveup ---------------------------------------------------------------- */

typedef struct {
    size_t calls, ok, acked, unknown, failed;
    lc_status_t last;
} acks_t;

static void on_ack(void *closure, uint64_t batch_id, lc_status_t st, const lc_ack_reply_t *r)
{
    acks_t *a = closure;
    (void)batch_id;
    a->calls++;
    a->last = st;
    if (st == LC_OK) {
        H_REQUIRE(r != NULL, "LC_OK without a reply");
        a->ok++;
        a->acked += r->acked;
    } else {
        H_REQUIRE(r == NULL, "a reply with %s", lc_status_str(st));
        a->unknown += st == LC_EUNKNOWN_BATCH;
        a->failed += st != LC_EUNKNOWN_BATCH;
    }
}

static int case_ack_async(void)
{
    const char *flags[] = {"--store", "memory", NULL};
    h_nats_start(false);
    h_daemon_start(flags);
    lc_client_t *cl = client_open();
    enum { N = 40 };
    codec_work_item_t items[N];
    char ids[N][ID_MAX];
    items_make(items, ids, 0, N, "aa");
    H_REQUIRE(lc_submit_request(cl, MODEL, items, N, 3000, 0, NULL, NULL) == LC_OK, "submit");
    acks_t a = {0};
    lc_consumer_t *c = consumer_open(cl, 4, 4, on_ack, &a, 3000, 1);
    size_t got = 0, batches = 0;
    uint64_t until = h_now_ms() + 15000;
    while (got < N && h_now_ms() < until) {
        codec_batch_t *b = NULL;
        lc_status_t st = lc_batch_next(c, 500, &b);
        if (st != LC_OK)
            continue;
        got += b->n_items;
        batches++;
        H_REQUIRE(lc_ack_async_all_send(c, b->batch_id) == LC_OK, "async ack: %s",
                  lc_consumer_error_get(c));
        codec_batch_destroy(b);
    }
    H_REQUIRE(got == N, "%zu of %d items", got, N);
    H_REQUIRE(lc_ack_async_send(c, &(codec_ack_t){.batch_id = 987654321, .all = true}) == LC_OK,
              "ack of an unknown batch");
    H_REQUIRE(lc_ack_async_complete(c, 5000) == LC_OK, "complete: %s", lc_consumer_error_get(c));
    H_REQUIRE(a.calls == batches + 1 && a.ok == batches && a.acked == N && a.unknown == 1,
              "%zu callbacks, %zu ok, %zu acked, %zu unknown", a.calls, a.ok, a.acked, a.unknown);
    lc_consumer_stats_t s;
    lc_consumer_stats_get(c, &s);
    H_REQUIRE(s.in_progress == 0, "%" PRIu64 " batches still in progress", s.in_progress);
    H_REQUIRE(s.acks_async == batches + 1 && s.acks_async_failed == 1, "stats %" PRIu64 "/%" PRIu64,
              s.acks_async, s.acks_async_failed);
    /* more acks in flight, then Bye at once: Bye waits for them, nothing goes back */
    items_make(items, ids, 0, 8, "ab");
    H_REQUIRE(lc_submit_request(cl, MODEL, items, 8, 3000, 0, NULL, NULL) == LC_OK, "submit 2");
    for (got = 0; got < 8 && h_now_ms() < until;) {
        codec_batch_t *b = NULL;
        if (lc_batch_next(c, 500, &b) != LC_OK)
            continue;
        got += b->n_items;
        H_REQUIRE(lc_ack_async_all_send(c, b->batch_id) == LC_OK, "async ack 2");
        codec_batch_destroy(b);
    }
    H_REQUIRE(lc_bye_send(c, 3000) == LC_OK, "bye: %s", lc_consumer_error_get(c));
    H_REQUIRE(a.acked == N + 8, "%zu acked after bye", a.acked);
    natsConnection *nc = h_connect();
    char *doc = h_stats(nc);
    H_REQUIRE(h_counter(doc, "items_completed") == N + 8 && h_counter(doc, "items_returned") == 0,
              "completed %" PRId64 ", returned %" PRId64, h_counter(doc, "items_completed"),
              h_counter(doc, "items_returned"));
    free(doc);
    h_disconnect(nc);
    lc_consumer_close(c);
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

static int case_ack_giveup(void)
{
    const char *flags[] = {"--store", "memory", NULL};
    h_nats_start(false);
    h_daemon_start(flags);
    lc_client_t *cl = client_open();
    codec_work_item_t items[1];
    char ids[1][ID_MAX];
    items_make(items, ids, 0, 1, "ag");
    H_REQUIRE(lc_submit_request(cl, MODEL, items, 1, 3000, 0, NULL, NULL) == LC_OK, "submit");
    acks_t a = {0};
    lc_consumer_t *c = consumer_open(cl, 1, 0, on_ack, &a, 200, 1);
    codec_batch_t *b = NULL;
    H_REQUIRE(lc_batch_next(c, 3000, &b) == LC_OK, "batch: %s", lc_consumer_error_get(c));
    lc_consumer_stats_t s;
    lc_consumer_stats_get(c, &s);
    H_REQUIRE(s.in_progress == 1, "the batch is not in progress");
    h_daemon_pause();
    H_REQUIRE(lc_ack_async_all_send(c, b->batch_id) == LC_OK, "async ack");
    codec_batch_destroy(b);
    lc_status_t st = lc_ack_async_complete(c, 3000); /* two attempts of 200 ms, then given up */
    H_REQUIRE(st == LC_OK, "complete: %s", lc_status_str(st));
    H_REQUIRE(a.calls == 1 && (a.last == LC_ETIMEOUT || a.last == LC_ENORESPONDERS),
              "%zu callbacks, last %s", a.calls, lc_status_str(a.last));
    lc_consumer_stats_get(c, &s);
    H_REQUIRE(s.in_progress == 0 && s.acks_async_failed == 1,
              "in progress %" PRIu64 ", failed %" PRIu64 " after giving up", s.in_progress,
              s.acks_async_failed);
    h_daemon_resume();
    lc_consumer_close(c); /* like a crash: the daemon returns what is not acked */
    lc_client_close(cl);
    h_daemon_stop_clean();
    return 0;
}

/* ---- tools ------------------------------------------------------------------------------------
 */

static char g_bin_dir[1024]; /* where lanesched is: the tools are built beside it */

/* lanesched-produce --async and lanesched-consume --prefetch --ack-async move every item once. */
static int case_tools(void)
{
    const char *flags[] = {"--store", "memory", NULL};
    h_nats_start(false);
    h_daemon_start(flags);
    char produce[1100], consume[1100];
    snprintf(produce, sizeof(produce), "%s/lanesched-produce", g_bin_dir);
    snprintf(consume, sizeof(consume), "%s/lanesched-consume", g_bin_dir);
    const char *p_argv[] = {produce,   "--server", h_url(),       "--model", MODEL,
                            "--async", "--window", "4",           "--batch", "8",
                            "--count", "400",      "--id-prefix", "tl-",     NULL};
    H_REQUIRE(h_run(p_argv) == 0, "lanesched-produce --async failed");
    H_REQUIRE(h_run(p_argv) == 0, "lanesched-produce --async again (duplicates) failed");
    const char *c_argv[] = {
        consume,      "--server", h_url(),       "--model",      MODEL, "--max-batch-size", "16",
        "--prefetch", "4",        "--ack-async", "--ack-window", "2",   "--until-idle-ms",  "1500",
        NULL};
    H_REQUIRE(h_run(c_argv) == 0, "lanesched-consume --prefetch --ack-async failed");
    natsConnection *nc = h_connect();
    char *doc = h_stats(nc);
    H_REQUIRE(h_counter(doc, "items_received") == 400 && h_counter(doc, "duplicates") == 400 &&
                  h_counter(doc, "items_completed") == 400 && h_counter(doc, "items_returned") == 0,
              "received %" PRId64 ", duplicates %" PRId64 ", completed %" PRId64
              ", returned %" PRId64,
              h_counter(doc, "items_received"), h_counter(doc, "duplicates"),
              h_counter(doc, "items_completed"), h_counter(doc, "items_returned"));
    free(doc);
    h_disconnect(nc);
    h_daemon_stop_clean();
    return 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    int (*fn)(void);
} CASES[] = {
    {"submit_async", case_submit_async},
    {"submit_retry", case_submit_retry},
    {"submit_giveup", case_submit_giveup},
    {"prefetch", case_prefetch},
    {"ack_async", case_ack_async},
    {"ack_giveup", case_ack_giveup},
    {"tools", case_tools},
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
        fprintf(stderr, "usage: test_client_async_nats CASE PATH_TO_LANESCHED "
                        "[PATH_TO_NATS_SERVER]\n       test_client_async_nats list\n");
        return 2;
    }
    for (size_t i = 0; i < n_cases; i++) {
        if (strcmp(argv[1], CASES[i].name) != 0)
            continue;
        snprintf(g_bin_dir, sizeof(g_bin_dir), "%s", argv[2]);
        char *slash = strrchr(g_bin_dir, '/');
        if (slash != NULL)
            *slash = '\0';
        else
            snprintf(g_bin_dir, sizeof(g_bin_dir), ".");
        h_init(CASES[i].name, argv[2], argc == 4 ? argv[3] : NULL);
        uint64_t t0 = h_now_ms();
        int rc = CASES[i].fn();
        nats_CloseAndWait(2000);
        if (rc == 0)
            h_log("PASSED in %.1f s", (double)(h_now_ms() - t0) / 1000.0);
        return rc;
    }
    fprintf(stderr, "test_client_async_nats: unknown case '%s'\n", argv[1]);
    return 2;
}
