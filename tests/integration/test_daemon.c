/*
 * test_daemon.c - lanesched end to end: a real nats-server on a free loopback port, the real
 * daemon binary on a real data directory, and the test talking NATS directly (nats.c + codec).
 *
 *   test_daemon_nats CASE PATH_TO_LANESCHED [PATH_TO_NATS_SERVER]
 *   test_daemon_nats list
 *
 * One scenario per process (CTest registers daemon_<case> for each):
 *
 *   round_trip                 items of 3 shapes and varied lengths in, batches out: shape-pure,
 *                              within the contract, pad_to exact; all acked; counters balance;
 *                              nothing comes back after a restart.
 *   two_consumers_same_shape   two consumers of one model drain the first shape together before
 *                              any batch of the second shape appears.
 *   consumer_sigkill           a consumer process holding a batch is SIGKILLed: after dead-after
 *                              the same items (same order, deliveries 2) reach another consumer.
 *   consumer_sigstop_stale_ack a consumer process SIGSTOPped past dead-after: its batch is acked by
 *                              another consumer; resumed, its ack is answered as stale (acked 0,
 *                              "unknown_consumer" per subjects.md, or "unknown_batch") and its pull
 *                              "unknown_consumer"; counters count every item once.
 *   daemon_sigkill_restart     lanesched SIGKILLed under a request/reply producer loop and
 *                              restarted on the same dir: every accepted item is completed exactly
 *                              once (acked-before-crash items never come back, pending ones do),
 *                              retries never create a second copy.
 *   bad_input                  garbage, each item rule, bad registrations, unknown consumer,
 *                              forged acks: error replies and counters; then a valid round trip.
 *   retried_submit_dedupe      same id twice -> DUPLICATE; retries piling up while lanesched is
 *                              SIGSTOPped -> one copy queued and delivered.
 *   ack_deadline_and_dead_letter  a heartbeating consumer that never acks: redelivery after the ack
 *                              deadline, then the dead-letter subject after --max-deliveries.
 *   enospc_self                the daemon fills a 6 MiB tmpfs itself before any consumer comes:
 *                              every accepted item is delivered and completed on the full disk,
 *                              and after the drain new items are accepted again
 *   enospc_self_restart        the same, the daemon SIGKILLed and started again on the full disk
 *                              twice: every accepted item delivered and completed once
 *   enospc                     data dir on a 4 MiB tmpfs filled up: store_full rejects, recovery
 *                              when space is freed, no accepted item lost (root only, else 77).
 *   enospc_rollover            another file fills the disk while the current segment has room
 *                              reserved: items fill it to the size cap, and once drained, new
 *                              items are accepted again within 3 s (not after the idle seal);
 *                              the log says when the refusals began and ended
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/spawn.h"
#include "tests/integration/harness.h"

#define MODEL     "m"
#define SKIP_CODE 77

/* ---- the test's own record of what it submitted --------------------------------------------- */

typedef struct {
    char id[72];
    unsigned shape_k;
    uint64_t shape;
    uint32_t tokens;
    uint32_t payload_len;
    bool with_reply_to;
    /* Written by producer threads, read by the consumer's: atomic. sent: its submit request went
     * out; accepted: ACCEPTED or DUPLICATE came back. */
    _Atomic bool sent, accepted;
    unsigned delivered; /* OK batches that carried it */
    unsigned acked;
    uint32_t last_deliveries;
} rec_t;

typedef struct {
    rec_t *recs;
    size_t n;
    const char *prefix; /* ids are "<prefix>-%05u" with the index */
    /* Submitted concurrently: index order is not arrival order, and a batch may carry an item
     * whose answer its producer has not read yet (both are on their way). */
    bool unordered;
} book_t;

static uint8_t payload_byte(size_t i, size_t j)
{
    return (uint8_t)(i * 131u + j * 7u + 1u);
}

static void book_init(book_t *bk, const char *prefix, size_t n)
{
    bk->recs = calloc(n, sizeof(rec_t));
    H_REQUIRE(bk->recs != NULL, "out of memory");
    bk->n = n;
    bk->prefix = prefix;
    bk->unordered = false;
    for (size_t i = 0; i < n; i++)
        snprintf(bk->recs[i].id, sizeof(bk->recs[i].id), "%s-%05zu", prefix, i);
}

static void book_free(book_t *bk)
{
    free(bk->recs);
    bk->recs = NULL;
}

/* The record an id stands for, or NULL if it is not one of ours. */
static rec_t *book_find(book_t *bk, const codec_bytes_t *id)
{
    size_t plen = strlen(bk->prefix);
    if (id->len != plen + 6 || memcmp(id->ptr, bk->prefix, plen) != 0 || id->ptr[plen] != '-')
        return NULL;
    size_t v = 0;
    for (size_t i = plen + 1; i < id->len; i++) {
        if (id->ptr[i] < '0' || id->ptr[i] > '9')
            return NULL;
        v = v * 10 + (size_t)(id->ptr[i] - '0');
    }
    return v < bk->n ? &bk->recs[v] : NULL;
}

static size_t rec_index(const book_t *bk, const rec_t *r)
{
    return (size_t)(r - bk->recs);
}

/* Fills items[0..count) for records [first, first + count); payload bytes go to pbuf (count *
 * 1100 bytes). Shape k is sent as component hashes (k % 3 == 0), signature only (1), or both (2).
 */
static void book_items(book_t *bk, size_t first, size_t count, codec_work_item_t *items,
                       uint8_t *pbuf, uint64_t (*comps)[2], char (*reply)[80])
{
    for (size_t c = 0; c < count; c++) {
        rec_t *r = &bk->recs[first + c];
        uint8_t *p = pbuf + c * 1100;
        H_REQUIRE(r->payload_len <= 1100, "payload too long for the test buffer");
        for (size_t j = 0; j < r->payload_len; j++)
            p[j] = payload_byte(first + c, j);
        items[c] = h_item(r->id, MODEL, r->shape, r->tokens, p, r->payload_len);
        if (comps != NULL && r->shape_k % 3 != 1) {
            items[c].component_hashes = comps[r->shape_k];
            items[c].n_component_hashes = 2;
            items[c].has_signature = r->shape_k % 3 == 2;
        }
        if (reply != NULL && r->with_reply_to) {
            snprintf(reply[c], sizeof(reply[c]), "reply.%s", r->id);
            items[c].reply_to = reply[c];
        }
    }
}

/* Submits records [first, first + count) request/reply, all must be ACCEPTED. */
static void book_submit(natsConnection *nc, book_t *bk, size_t first, size_t count,
                        uint64_t (*comps)[2])
{
    codec_work_item_t *items = calloc(count, sizeof(*items));
    uint8_t *pbuf = malloc(count * 1100);
    char(*reply)[80] = calloc(count, sizeof(*reply));
    H_REQUIRE(items != NULL && pbuf != NULL && reply != NULL, "out of memory");
    book_items(bk, first, count, items, pbuf, comps, reply);
    h_submit_accepted(nc, MODEL, items, count);
    for (size_t c = 0; c < count; c++)
        bk->recs[first + c].accepted = true;
    free(items);
    free(pbuf);
    free(reply);
}

static uint32_t pad8(uint32_t t)
{
    return (t + 7u) / 8u * 8u;
}

/*
 * Checks one OK batch against the book and the consumer's contract: model, shape purity (every
 * item is of Batch.signature's shape per the book), arrival order, limits, pad_to, item bytes.
 * Counts the deliveries into the book. expect_deliveries 0 = do not check.
 */
static void check_batch(book_t *bk, const codec_batch_t *b, uint32_t max_batch_size,
                        uint32_t max_batch_tokens, uint32_t expect_deliveries)
{
    H_REQUIRE(b->status == CODEC_BATCH_OK, "batch status %d, error '%s'", (int)b->status, b->error);
    H_REQUIRE(b->n_items >= 1, "an OK batch with no items (batch %" PRIu64 ")", b->batch_id);
    H_REQUIRE(strcmp(b->model, MODEL) == 0, "batch model '%s'", b->model);
    H_REQUIRE(b->batch_id != 0, "batch id 0");
    uint32_t longest = 0;
    size_t prev = 0;
    for (size_t i = 0; i < b->n_items; i++) {
        const codec_batch_item_t *it = &b->items[i];
        rec_t *r = book_find(bk, &it->id);
        H_REQUIRE(r != NULL, "batch %" PRIu64 " carries an id that was never submitted: '%.*s'",
                  b->batch_id, (int)it->id.len, (const char *)it->id.ptr);
        size_t idx = rec_index(bk, r);
        H_REQUIRE(r->accepted || (bk->unordered && r->sent),
                  "batch carries %s, whose submit was not accepted", r->id);
        H_REQUIRE(r->shape == b->signature,
                  "SHAPE MIX: batch %" PRIu64 " has signature 0x%016" PRIx64 " but item %s is of "
                  "shape 0x%016" PRIx64,
                  b->batch_id, b->signature, r->id, r->shape);
        H_REQUIRE(i == 0 || idx > prev || bk->unordered,
                  "batch %" PRIu64 " is not in arrival order: %s after index %zu", b->batch_id,
                  r->id, prev);
        prev = idx;
        H_REQUIRE(it->tokens == r->tokens, "%s: tokens %u, submitted %u", r->id, it->tokens,
                  r->tokens);
        H_REQUIRE(it->payload.len == r->payload_len, "%s: payload %zu bytes, submitted %u", r->id,
                  it->payload.len, r->payload_len);
        for (size_t j = 0; j < it->payload.len; j++)
            H_REQUIRE(it->payload.ptr[j] == payload_byte(idx, j), "%s: payload byte %zu differs",
                      r->id, j);
        if (r->with_reply_to) {
            char want[80];
            snprintf(want, sizeof(want), "reply.%s", r->id);
            H_REQUIRE(strcmp(it->reply_to, want) == 0, "%s: reply_to '%s', submitted '%s'", r->id,
                      it->reply_to, want);
        }
        if (expect_deliveries != 0)
            H_REQUIRE(it->deliveries == expect_deliveries, "%s: deliveries %u, expected %u", r->id,
                      it->deliveries, expect_deliveries);
        r->delivered++;
        r->last_deliveries = it->deliveries;
        if (it->tokens > longest)
            longest = it->tokens;
    }
    H_REQUIRE(b->pad_to == pad8(longest),
              "batch %" PRIu64 ": pad_to %u, longest item %u tokens (expected %u)", b->batch_id,
              b->pad_to, longest, pad8(longest));
    H_REQUIRE(b->n_items <= max_batch_size, "batch %" PRIu64 " has %zu items, max_batch_size %u",
              b->batch_id, b->n_items, max_batch_size);
    H_REQUIRE(b->n_items == 1 || (uint64_t)b->n_items * b->pad_to <= max_batch_tokens,
              "batch %" PRIu64 ": %zu items x pad_to %u = %" PRIu64 " > max_batch_tokens %u",
              b->batch_id, b->n_items, b->pad_to, (uint64_t)b->n_items * b->pad_to,
              max_batch_tokens);
}

/* Waits for the Batch that closes a pull: it must be EXPIRED with no items. */
static void expect_expired(h_consumer_t *c, int64_t timeout_ms, const char *why)
{
    codec_batch_t *b = h_next_batch(c, timeout_ms);
    H_REQUIRE(b != NULL, "%s: no Batch within %" PRId64 " ms (expected EXPIRED)", why, timeout_ms);
    H_REQUIRE(b->status == CODEC_BATCH_EXPIRED && b->n_items == 0,
              "%s: expected an empty EXPIRED batch, got status %d with %zu items (first '%.*s', "
              "deliveries %u), error '%s'",
              why, (int)b->status, b->n_items, b->n_items ? (int)b->items[0].id.len : 0,
              b->n_items ? (const char *)b->items[0].id.ptr : "",
              b->n_items ? b->items[0].deliveries : 0, b->error);
    codec_batch_destroy(b);
}

/* Pulls until a pull of expires_ms closes (EXPIRED) having delivered nothing, so a slow
 * (sanitizer) run that needs longer than one pull for the queue still drains it; every OK batch
 * is checked against the book and acked. Returns the items received. */
static size_t drain(h_consumer_t *c, book_t *bk, uint32_t bs, uint32_t bt, uint32_t expires_ms,
                    uint32_t expect_deliveries, uint64_t *padded)
{
    size_t n = 0, at_pull = 0;
    h_pull(c, 100000, expires_ms);
    for (;;) {
        codec_batch_t *b = h_next_batch(c, (int64_t)expires_ms + 5000);
        H_REQUIRE(b != NULL, "drain: neither a Batch nor EXPIRED within %u ms", expires_ms + 5000);
        if (b->status == CODEC_BATCH_EXPIRED) {
            H_REQUIRE(b->n_items == 0, "an EXPIRED batch with %zu items", b->n_items);
            codec_batch_destroy(b);
            if (n == at_pull)
                return n;
            at_pull = n;
            h_pull(c, 100000, expires_ms);
            continue;
        }
        check_batch(bk, b, bs, bt, expect_deliveries);
        h_ack_all_ok(c, b);
        for (size_t i = 0; i < b->n_items; i++)
            book_find(bk, &b->items[i].id)->acked++;
        if (padded != NULL)
            *padded += (uint64_t)b->n_items * b->pad_to;
        n += b->n_items;
        codec_batch_destroy(b);
    }
}

/* Pulls and acks one batch at a time until at least `want` items came. */
static size_t drain_some(h_consumer_t *c, book_t *bk, uint32_t bs, uint32_t bt, size_t want)
{
    size_t n = 0;
    while (n < want) {
        h_pull(c, 1, 2000);
        codec_batch_t *b = h_next_batch(c, 7000);
        H_REQUIRE(b != NULL && b->status != CODEC_BATCH_EXPIRED,
                  "drain: %zu of %zu items, then no batch", n, want);
        check_batch(bk, b, bs, bt, 0);
        h_ack_all_ok(c, b);
        for (size_t i = 0; i < b->n_items; i++)
            book_find(bk, &b->items[i].id)->acked++;
        n += b->n_items;
        codec_batch_destroy(b);
    }
    return n;
}

static void require_empty(const char *json, const char *when)
{
    int64_t q = h_json_sum(json, "queued_items"), p = h_json_sum(json, "pending_items");
    H_REQUIRE(q == 0 && p == 0, "%s: %" PRId64 " queued and %" PRId64 " pending items remain: %s",
              when, q, p, json);
}

static void require_delivered_once(const book_t *bk, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const rec_t *r = &bk->recs[i];
        H_REQUIRE(r->delivered == (r->accepted ? 1u : 0u), "%s (%s) delivered %u times", r->id,
                  r->accepted ? "accepted" : "refused", r->delivered);
    }
}

/* n records of one shape (k) and one length: one lane, one segment being appended to. */
static void book_one_lane(book_t *bk, const char *prefix, size_t n, unsigned k,
                          uint32_t payload_len)
{
    book_init(bk, prefix, n);
    for (size_t i = 0; i < n; i++) {
        bk->recs[i].shape_k = k;
        bk->recs[i].shape = h_shape(k);
        bk->recs[i].tokens = 32;
        bk->recs[i].payload_len = payload_len;
    }
}

/* The stats' balance (subjects.md, counters.tokens_restored): what the process restored and
 * received is what it completed, holds queued and has in flight, in tokens and in items. */
static void require_balanced(natsConnection *nc, const char *when)
{
    char *st = h_stats(nc);
    int64_t in = h_counter(st, "tokens_restored") + h_counter(st, "tokens_received");
    int64_t out = h_counter(st, "tokens_completed") + h_counter(st, "tokens_queued") +
                  h_counter(st, "tokens_in_flight");
    int64_t items_in = h_counter(st, "items_restored") + h_counter(st, "items_received");
    int64_t items_out = h_counter(st, "items_completed") + h_counter(st, "items_queued") +
                        h_counter(st, "pending_items");
    H_REQUIRE(in == out && items_in == items_out,
              "%s: tokens restored + received %" PRId64
              " != completed + queued + in flight %" PRId64 "; items %" PRId64 " != %" PRId64,
              when, in, out, items_in, items_out);
    H_REQUIRE(h_counter(st, "tokens_restored") > 0, "%s: nothing restored", when);
    free(st);
}

static void finish(natsConnection *nc)
{
    h_disconnect(nc);
    h_daemon_stop_clean();
}

/* ---- 1. round trip ----------------------------------------------------------------------------
 */

#define RT_N  96
#define RT_BS 8u
#define RT_BT 2048u

static int case_round_trip(void)
{
    h_nats_start(false);
    const char *flags[] = {"--store", "disk", NULL};
    h_daemon_start(flags);
    natsConnection *nc = h_connect();

    uint64_t comps[3][2];
    for (unsigned k = 0; k < 3; k++)
        h_shape_components(k, comps[k]);
    book_t bk;
    book_init(&bk, "rt", RT_N);
    uint64_t sum = 0;
    for (size_t i = 0; i < RT_N; i++) {
        rec_t *r = &bk.recs[i];
        r->shape_k = (unsigned)(h_rand() % 3);
        r->shape = codec_signature(comps[r->shape_k], 2);
        r->tokens = 1 + (uint32_t)(h_rand() % 700);
        if (i == 17)
            r->tokens = 3000; /* over max_batch_tokens: must go out alone */
        r->payload_len = 1 + (uint32_t)(h_rand() % 300);
        r->with_reply_to = i % 2 == 1;
        sum += r->tokens;
    }
    for (size_t i = 0; i < RT_N; i += 12)
        book_submit(nc, &bk, i, 12, comps);
    h_log("%d items of 3 shapes, %" PRIu64 " tokens, all ACCEPTED", RT_N, sum);

    char *st = h_stats(nc);
    H_REQUIRE(h_counter(st, "items_received") == RT_N, "items_received %" PRId64,
              h_counter(st, "items_received"));
    H_REQUIRE(h_counter(st, "tokens_received") == (int64_t)sum,
              "tokens_received %" PRId64 ", submitted %" PRIu64, h_counter(st, "tokens_received"),
              sum);
    H_REQUIRE(h_json_sum(st, "queued_items") == RT_N, "stats show %" PRId64 " queued items: %s",
              h_json_sum(st, "queued_items"), st);
    H_REQUIRE(h_json_sum(st, "queued_tokens") == (int64_t)sum,
              "stats show %" PRId64 " queued tokens", h_json_sum(st, "queued_tokens"));
    free(st);

    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, RT_BS, RT_BT, 1024, "rt-consumer");
    uint64_t padded = 0;
    size_t got = drain(&c, &bk, RT_BS, RT_BT, 2000, 1, &padded);
    H_REQUIRE(got == RT_N, "drained %zu items of %d", got, RT_N);
    for (size_t i = 0; i < RT_N; i++)
        H_REQUIRE(bk.recs[i].delivered == 1, "%s delivered %u times", bk.recs[i].id,
                  bk.recs[i].delivered);

    st = h_stats(nc);
    h_log("stats after the drain: %.600s", st);
    H_REQUIRE(h_counter(st, "items_completed") == RT_N, "items_completed %" PRId64,
              h_counter(st, "items_completed"));
    H_REQUIRE(h_counter(st, "tokens_received") == (int64_t)sum &&
                  h_counter(st, "tokens_completed") == (int64_t)sum,
              "tokens received %" PRId64 ", completed %" PRId64 ", submitted %" PRIu64,
              h_counter(st, "tokens_received"), h_counter(st, "tokens_completed"), sum);
    H_REQUIRE(h_counter(st, "items_routed") == RT_N &&
                  h_counter(st, "tokens_routed") == (int64_t)sum,
              "routed %" PRId64 " items / %" PRId64 " tokens", h_counter(st, "items_routed"),
              h_counter(st, "tokens_routed"));
    H_REQUIRE(h_counter(st, "real_tokens") == (int64_t)sum, "real_tokens %" PRId64,
              h_counter(st, "real_tokens"));
    H_REQUIRE(h_counter(st, "padded_tokens") == (int64_t)padded,
              "padded_tokens %" PRId64 ", the batches' items x pad_to sum to %" PRIu64,
              h_counter(st, "padded_tokens"), padded);
    H_REQUIRE(h_counter(st, "duplicates") == 0 && h_counter(st, "dead_lettered") == 0 &&
                  h_counter(st, "items_returned") == 0,
              "duplicates / dead_lettered / items_returned not 0");
    require_empty(st, "after the drain");
    free(st);

    codec_ack_reply_t *bye = h_bye(&c, 3000);
    H_REQUIRE(bye != NULL, "no reply to bye");
    codec_ack_reply_destroy(bye);
    h_consumer_close(&c);

    /* Everything was acked: a restart on the same directory brings nothing back. */
    h_daemon_stop_clean();
    h_daemon_restart();
    st = h_stats(nc);
    require_empty(st, "after a restart");
    free(st);
    h_consumer_register(&c, nc, MODEL, RT_BS, RT_BT, 1024, "rt-consumer-2");
    h_pull(&c, 10, 1000);
    expect_expired(&c, 4000, "after a restart with everything acked");
    h_consumer_close(&c);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* ---- 2. two consumers on the same shape ----------------------------------------------------- */

#define TC_A 48
#define TC_B 16

static int case_two_consumers_same_shape(void)
{
    /* Every worker of a model on the model's one current shape is the article's rule
     * (--policy lanes-seed), and the default policy's only while the model's active shapes fit
     * each worker's cache: these consumers declare none (a cache of 1) for two shapes. */
    static const char *const seed[] = {"--policy", "lanes-seed", NULL};
    h_nats_start(false);
    h_daemon_start(seed);
    natsConnection *nc = h_connect();
    book_t bk;
    book_init(&bk, "tc", TC_A + TC_B);
    uint64_t shape_a = h_shape(10), shape_b = h_shape(11);
    for (size_t i = 0; i < TC_A + TC_B; i++) {
        rec_t *r = &bk.recs[i];
        bool a = i < TC_A;
        r->shape_k = a ? 10 : 11;
        r->shape = a ? shape_a : shape_b;
        r->tokens = a ? 60 + (uint32_t)(h_rand() % 40) : 20 + (uint32_t)(h_rand() % 20);
        r->payload_len = 8;
    }
    /* Interleave the arrivals: B's items are not simply behind A's. */
    for (size_t i = 0; i < TC_B; i++) {
        book_submit(nc, &bk, 3 * i, 3, NULL);
        book_submit(nc, &bk, TC_A + i, 1, NULL);
    }
    h_log("%d items of shape A (more tokens) and %d of shape B queued", TC_A, TC_B);

    h_consumer_t c[2];
    h_consumer_register(&c[0], nc, MODEL, 4, 4096, 0, "tc-1");
    h_consumer_register(&c[1], nc, MODEL, 4, 4096, 0, "tc-2");
    /* One subscription for both consumers' inboxes keeps the daemon's publish order. */
    natsInbox *base = NULL;
    H_REQUIRE(natsInbox_Create(&base) == NATS_OK, "inbox");
    char wildcard[160];
    snprintf(wildcard, sizeof(wildcard), "%s.*", base);
    for (int k = 0; k < 2; k++) {
        h_consumer_close(&c[k]);
        snprintf(c[k].inbox, sizeof(c[k].inbox), "%s.c%d", base, k);
    }
    natsInbox_Destroy(base);
    natsSubscription *sub = NULL;
    H_REQUIRE(natsConnection_SubscribeSync(&sub, nc, wildcard) == NATS_OK, "subscribe");
    natsConnection_Flush(nc);

    typedef struct {
        int consumer;
        bool a;
        size_t n;
    } seen_t;
    seen_t seq[TC_A + TC_B];
    size_t n_seq = 0, items = 0;
    h_pull(&c[0], 1, 3000);
    h_pull(&c[1], 1, 3000);
    uint64_t deadline = h_now_ms() + 15000;
    while (items < TC_A + TC_B) {
        H_REQUIRE(h_now_ms() < deadline, "only %zu of %d items delivered in 15 s", items,
                  TC_A + TC_B);
        char subject[200];
        codec_batch_t *b = h_sub_next_batch(sub, 5000, subject, sizeof(subject));
        H_REQUIRE(b != NULL, "no batch within 5 s (%zu items so far)", items);
        size_t sl = strlen(subject);
        int k = subject[sl - 1] - '0';
        H_REQUIRE(sl > 3 && subject[sl - 3] == '.' && subject[sl - 2] == 'c' && (k == 0 || k == 1),
                  "a batch on an unexpected subject %s", subject);
        if (b->status == CODEC_BATCH_EXPIRED) {
            codec_batch_destroy(b);
            h_pull(&c[k], 1, 3000);
            continue;
        }
        check_batch(&bk, b, 4, 4096, 1);
        H_REQUIRE(n_seq < TC_A + TC_B, "too many batches");
        seq[n_seq++] = (seen_t){k, b->signature == shape_a, b->n_items};
        items += b->n_items;
        h_ack_all_ok(&c[k], b);
        codec_batch_destroy(b);
        h_pull(&c[k], 1, 3000);
    }
    size_t a_batches[2] = {0, 0}, a_items = 0, last_a = 0, first_b = n_seq;
    char order[256];
    size_t at = 0;
    for (size_t i = 0; i < n_seq; i++) {
        at += (size_t)snprintf(order + at, sizeof(order) - at, "%s%c%d", i ? " " : "",
                               seq[i].a ? 'A' : 'B', seq[i].consumer + 1);
        if (seq[i].a) {
            a_batches[seq[i].consumer]++;
            a_items += seq[i].n;
            last_a = i;
        } else if (first_b == n_seq) {
            first_b = i;
        }
    }
    h_log("batch order (shape, consumer): %s", order);
    H_REQUIRE(seq[0].a, "the first batch is of shape B, which has fewer tokens: %s", order);
    H_REQUIRE(a_items == TC_A, "%zu items of shape A delivered", a_items);
    H_REQUIRE(last_a < first_b,
              "a batch of shape B went out before shape A was drained (not sticky): %s", order);
    H_REQUIRE(a_batches[0] >= 2 && a_batches[1] >= 2,
              "the consumers did not drain shape A together: %zu and %zu A batches: %s",
              a_batches[0], a_batches[1], order);
    for (size_t i = 0; i < TC_A + TC_B; i++)
        H_REQUIRE(bk.recs[i].delivered == 1, "%s delivered %u times", bk.recs[i].id,
                  bk.recs[i].delivered);
    char *st = h_stats(nc);
    H_REQUIRE(h_counter(st, "items_completed") == TC_A + TC_B, "items_completed %" PRId64,
              h_counter(st, "items_completed"));
    H_REQUIRE(h_counter(st, "tokens_completed") == h_counter(st, "tokens_received"),
              "tokens completed %" PRId64 " != received %" PRId64,
              h_counter(st, "tokens_completed"), h_counter(st, "tokens_received"));
    require_empty(st, "after the drain");
    free(st);
    h_sub_destroy(nc, sub);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* ---- 3 and 4. a consumer process that dies or stops ------------------------------------------ */

#define CP_N 6

static const char *const CP_FLAGS[] = {"--heartbeat-ms", "200", "--dead-after-ms", "1000", NULL};

/* Queues CP_N items of one shape and has a consumer process take them in one batch. */
static uint64_t child_takes_batch(natsConnection *nc, book_t *bk, h_child_t *ch, char *line,
                                  size_t cap)
{
    book_init(bk, "cp", CP_N);
    for (size_t i = 0; i < CP_N; i++) {
        bk->recs[i].shape_k = 3;
        bk->recs[i].shape = h_shape(3);
        bk->recs[i].tokens = 40 + (uint32_t)i * 3;
        bk->recs[i].payload_len = 32;
    }
    book_submit(nc, bk, 0, CP_N, NULL);
    h_child_start(ch, MODEL, 16, 8192);
    H_REQUIRE(h_child_line(ch, 10000, line, cap), "the consumer process did not register");
    H_REQUIRE(strncmp(line, "REG ", 4) == 0, "consumer process: '%s'", line);
    h_log("consumer process pid %d registered as %s", (int)ch->pid, line + 4);
    h_child_send(ch, "pull 1 5000");
    H_REQUIRE(h_child_line(ch, 10000, line, cap), "the consumer process got no batch");
    char want[1024];
    int at = snprintf(want, sizeof(want), "BATCH OK ");
    uint64_t bid = strtoull(line + at, NULL, 10);
    char tail[1024];
    at = snprintf(tail, sizeof(tail), " %d", CP_N);
    for (size_t i = 0; i < CP_N; i++)
        at += snprintf(tail + at, sizeof(tail) - (size_t)at, " %s", bk->recs[i].id);
    H_REQUIRE(strncmp(line, want, strlen(want)) == 0 && bid != 0 && strstr(line, tail) != NULL,
              "consumer process got '%s', expected 'BATCH OK <id>%s'", line, tail);
    h_log("consumer process holds batch %" PRIu64 " with all %d items", bid, CP_N);
    return bid;
}

/* The other consumer gets the same items, in order, with deliveries 2; acks them. */
static uint64_t other_consumer_gets_them(natsConnection *nc, book_t *bk, uint64_t since_ms,
                                         uint64_t first_bid)
{
    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 16, 8192, 0, "survivor");
    h_hb_start(&c, c.heartbeat_ms);
    h_pull(&c, 1, 8000);
    codec_batch_t *b = h_next_batch(&c, 9000);
    H_REQUIRE(b != NULL, "the items did not come back within 9 s");
    uint64_t elapsed = h_now_ms() - since_ms;
    H_REQUIRE(b->status == CODEC_BATCH_OK, "status %d error '%s'", (int)b->status, b->error);
    H_REQUIRE(b->n_items == CP_N, "the redelivered batch has %zu items, expected %d", b->n_items,
              CP_N);
    check_batch(bk, b, 16, 8192, 2);
    H_REQUIRE(b->batch_id != first_bid, "batch id %" PRIu64 " reused", b->batch_id);
    h_log("redelivered to another consumer %" PRIu64 " ms later as batch %" PRIu64 ", deliveries 2",
          elapsed, b->batch_id);
    /* Heartbeats every 200 ms, dead after 1000 ms of silence: not before ~800 ms. */
    H_REQUIRE(elapsed >= 600, "the items came back after only %" PRIu64 " ms (dead-after 1000)",
              elapsed);
    H_REQUIRE(elapsed <= 5000, "the items came back only after %" PRIu64 " ms", elapsed);
    h_ack_all_ok(&c, b);
    uint64_t bid = b->batch_id;
    codec_batch_destroy(b);
    h_consumer_close(&c);
    return bid;
}

static void check_cp_counters(natsConnection *nc, book_t *bk)
{
    int64_t sum = 0;
    for (size_t i = 0; i < CP_N; i++)
        sum += bk->recs[i].tokens;
    char *st = h_stats(nc);
    H_REQUIRE(h_counter(st, "items_received") == CP_N, "items_received %" PRId64,
              h_counter(st, "items_received"));
    H_REQUIRE(h_counter(st, "items_completed") == CP_N, "items_completed %" PRId64 " (want %d)",
              h_counter(st, "items_completed"), CP_N);
    H_REQUIRE(h_counter(st, "tokens_received") == sum && h_counter(st, "tokens_completed") == sum,
              "tokens received %" PRId64 " completed %" PRId64 " submitted %" PRId64,
              h_counter(st, "tokens_received"), h_counter(st, "tokens_completed"), sum);
    H_REQUIRE(h_counter(st, "items_routed") == 2 * CP_N &&
                  h_counter(st, "tokens_routed") == 2 * sum,
              "routed %" PRId64 " items / %" PRId64 " tokens (each item went out twice)",
              h_counter(st, "items_routed"), h_counter(st, "tokens_routed"));
    H_REQUIRE(h_counter(st, "items_returned") == CP_N, "items_returned %" PRId64 " (want %d)",
              h_counter(st, "items_returned"), CP_N);
    require_empty(st, "at the end");
    free(st);
}

static int case_consumer_sigkill(void)
{
    h_nats_start(false);
    h_daemon_start(CP_FLAGS);
    natsConnection *nc = h_connect();
    book_t bk;
    h_child_t ch;
    char line[4096];
    uint64_t bid = child_takes_batch(nc, &bk, &ch, line, sizeof(line));
    h_child_signal(&ch, SIGKILL);
    uint64_t t_kill = h_now_ms();
    h_log("consumer process SIGKILLed while holding the batch");
    other_consumer_gets_them(nc, &bk, t_kill, bid);
    check_cp_counters(nc, &bk);
    h_child_finish(&ch);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* A worker process with four pulls open is SIGKILLed before any item exists: the server drops
 * its inbox, and the Batch sent there gets NATS's no-responders status. The items reach the
 * surviving worker within seconds, although the dead one is declared dead only after 30 s (it is
 * sent nothing more after the first status: undelivered.c). */
#define DI_N 48
static int case_dead_inbox(void)
{
    static const char *const flags[] = {"--heartbeat-ms", "1000", "--dead-after-ms", "30000", NULL};
    h_nats_start(false);
    h_daemon_start(flags);
    natsConnection *nc = h_connect();
    book_t bk;
    book_one_lane(&bk, "di", DI_N, 1, 64);
    h_child_t ch;
    char line[4096];
    h_child_start(&ch, MODEL, 16, 8192);
    H_REQUIRE(h_child_line(&ch, 10000, line, sizeof(line)),
              "the consumer process did not register");
    h_child_send(&ch, "pull 4 60000");
    uint64_t t0 = h_now_ms();
    for (;;) { /* its pull is open in the daemon */
        char *st = h_stats(nc);
        int64_t pulls = h_json_sum(st, "pulls");
        free(st);
        if (pulls == 1)
            break;
        H_REQUIRE(h_now_ms() - t0 < 5000, "the consumer process's pull never showed in the stats");
        h_sleep_ms(20);
    }
    h_child_signal(&ch, SIGKILL);
    h_log("consumer process SIGKILLed with 4 batches asked for");
    uint64_t since = h_now_ms();
    for (size_t i = 0; i < DI_N; i += 8) /* its pulls are the only ones open */
        book_submit(nc, &bk, i, 8, NULL);
    h_sleep_ms(200);
    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 16, 8192, 0, "survivor");
    h_hb_start(&c, c.heartbeat_ms / 2);
    h_pull(&c, 16, 20000);
    size_t got = 0;
    while (got < DI_N) {
        codec_batch_t *b = h_next_batch(&c, 5000);
        H_REQUIRE(b != NULL, "%zu of %d items reached the survivor after %" PRIu64 " ms", got, DI_N,
                  h_now_ms() - since);
        check_batch(&bk, b, 16, 8192, 1); /* the batch no one received was no delivery */
        got += b->n_items;
        h_ack_all_ok(&c, b);
        codec_batch_destroy(b);
    }
    uint64_t elapsed = h_now_ms() - since;
    h_log("all %d items acked by the survivor %" PRIu64 " ms after the first submit", DI_N,
          elapsed);
    H_REQUIRE(elapsed < 5000, "the items took %" PRIu64 " ms (the dead worker: 30 s)", elapsed);
    require_delivered_once(&bk, DI_N);
    char *st = h_stats(nc);
    int64_t undelivered = h_counter(st, "batches_undelivered");
    /* usually 1: the dead one is sent nothing after its first status (test_daemon's unit test
     * checks that); a submit handled before that status came may take one more of its credits */
    H_REQUIRE(undelivered >= 1 && undelivered <= 4, "batches_undelivered %" PRId64, undelivered);
    H_REQUIRE(h_counter(st, "undelivered_unmatched") == 0, "undelivered_unmatched %" PRId64,
              h_counter(st, "undelivered_unmatched"));
    H_REQUIRE(h_counter(st, "items_completed") == DI_N &&
                  h_counter(st, "consumers_declared_dead") == 0,
              "completed %" PRId64 ", declared dead %" PRId64, h_counter(st, "items_completed"),
              h_counter(st, "consumers_declared_dead"));
    require_empty(st, "at the end");
    h_log("%" PRId64 " batches came back at once", undelivered);
    free(st);
    h_hb_stop(&c);
    h_consumer_close(&c);
    h_child_finish(&ch);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* A connection nats.c closes for good stops the daemon with exit status 1 instead of leaving it
 * up and deaf (front.c invariant 12). This server carries protocol lines of at most 256 bytes:
 * a worker's Pull with a 180-byte reply subject fits, the Batch the daemon publishes on it, with
 * its no-responders reply subject (about 80 bytes more), does not, and the server closes the
 * daemon's connection ("maximum control line exceeded"), which nats.c does not reopen. */
static int case_nats_closed(void)
{
    char conf[700];
    snprintf(conf, sizeof(conf), "%s/small-lines.conf", h_tmp());
    FILE *fp = fopen(conf, "w");
    H_REQUIRE(fp != NULL, "cannot write %s", conf);
    fputs("max_control_line: 256\n", fp);
    fclose(fp);
    h_nats_start_config(conf);
    h_daemon_start(NULL);
    natsConnection *nc = h_connect();
    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 16, 8192, 0, "long-inbox");
    char inbox[181];
    memset(inbox, 'x', sizeof(inbox) - 1);
    memcpy(inbox, "_INBOX.long.", 12);
    inbox[sizeof(inbox) - 1] = '\0';
    natsSubscription *sub = NULL;
    H_REQUIRE(natsConnection_SubscribeSync(&sub, nc, inbox) == NATS_OK, "subscribe %s", inbox);
    codec_pull_t p = {1, 60000};
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_pull(&p, &buf, &len) == CODEC_OK, "encode a Pull");
    H_REQUIRE(natsConnection_PublishRequest(nc, c.pull_subject, inbox, buf, (int)len) == NATS_OK &&
                  natsConnection_Flush(nc) == NATS_OK,
              "the Pull with a %zu-byte reply subject was refused", strlen(inbox));
    free(buf);
    codec_work_item_t item = h_item("closed-0", MODEL, h_shape(1), 32, (const uint8_t *)"p", 1);
    h_submit_accepted(nc, MODEL, &item, 1);
    int rc = h_daemon_wait_exit(10000);
    H_REQUIRE(rc == 1, "the daemon's connection was closed: exit status %d (-2: still running)",
              rc);
    char log[700];
    snprintf(log, sizeof(log), "%s/lanesched.log", h_tmp());
    H_REQUIRE(spawn_log_count(log, "closed for good") == 1,
              "the daemon's log does not say its connection was closed for good");
    h_sub_destroy(nc, sub);
    h_consumer_close(&c);
    h_disconnect(nc);
    return 0;
}

static int case_consumer_sigstop_stale_ack(void)
{
    h_nats_start(false);
    h_daemon_start(CP_FLAGS);
    natsConnection *nc = h_connect();
    book_t bk;
    h_child_t ch;
    char line[4096];
    uint64_t bid = child_takes_batch(nc, &bk, &ch, line, sizeof(line));
    h_child_signal(&ch, SIGSTOP);
    uint64_t t_stop = h_now_ms();
    h_log("consumer process SIGSTOPped while holding the batch");
    other_consumer_gets_them(nc, &bk, t_stop, bid);
    h_child_signal(&ch, SIGCONT);
    h_log("consumer process SIGCONTinued; it acks its old batch");
    h_child_send(&ch, "ack");
    H_REQUIRE(h_child_line(&ch, 8000, line, sizeof(line)), "no ack result from the process");
    /* Stale either way, and nothing changes: subjects.md (the served contract) answers an ack
     * from a consumer declared dead with unknown_consumer; the first draft of the contract said
     * unknown_batch (its batch was returned). Both are accepted; acked must be 0. */
    H_REQUIRE(h_err_is(line, "ACK 0 0 1 unknown_consumer") ||
                  h_err_is(line, "ACK 0 0 1 unknown_batch"),
              "the late ack was answered '%s', expected 'ACK 0 0 1 unknown_consumer' or 'ACK 0 0 1 "
              "unknown_batch' (acked returned unknown error)",
              line);
    h_log("the late ack was answered as stale: %s", line);
    h_child_send(&ch, "pull 1 1000");
    H_REQUIRE(h_child_line(&ch, 8000, line, sizeof(line)), "no pull result from the process");
    H_REQUIRE(strncmp(line, "BATCH ERROR ", 12) == 0 && strstr(line, "unknown_consumer") != NULL,
              "a consumer declared dead pulled and got '%s' (expected ERROR unknown_consumer)",
              line);
    h_sleep_ms(300);
    check_cp_counters(nc, &bk);
    h_child_finish(&ch);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* ---- 5. lanesched SIGKILLed under load --------------------------------------------------------
 */

#define DK_N         2400
#define DK_PER_MSG   4
#define DK_PRODUCERS 6

/* Shared by the producer threads; each owns the id range [lo, hi). */
typedef struct {
    book_t *bk;
    atomic_size_t answered;
    atomic_uint done;
    atomic_uint failed_attempts;
    atomic_ulong answers[3];
} producers_t;

typedef struct {
    producers_t *all;
    size_t lo, hi;
    pthread_t th;
} producer_t;

static void *producer_main(void *arg)
{
    producer_t *me = arg;
    producers_t *p = me->all;
    natsConnection *nc = h_connect();
    uint64_t deadline = h_now_ms() + 40000;
    for (size_t first = me->lo; first < me->hi; first += DK_PER_MSG) {
        codec_work_item_t items[DK_PER_MSG];
        uint8_t pbuf[DK_PER_MSG * 1100];
        book_items(p->bk, first, DK_PER_MSG, items, pbuf, NULL, NULL);
        for (size_t i = 0; i < DK_PER_MSG; i++)
            p->bk->recs[first + i].sent = true;
        for (;;) {
            codec_submit_reply_t *r = NULL;
            natsStatus s = h_submit(nc, MODEL, items, DK_PER_MSG, 1000, &r);
            if (s == NATS_OK) {
                H_REQUIRE(r->error[0] == '\0' && r->n_results == DK_PER_MSG,
                          "producer: SubmitReply error '%s', %zu results", r->error, r->n_results);
                for (size_t i = 0; i < DK_PER_MSG; i++) {
                    codec_item_status_t ist = r->results[i].status;
                    H_REQUIRE(ist == CODEC_ITEM_ACCEPTED || ist == CODEC_ITEM_DUPLICATE,
                              "producer: %s status %d reason '%s' error '%s'",
                              p->bk->recs[first + i].id, (int)ist, r->results[i].reason,
                              r->results[i].error);
                    atomic_fetch_add(&p->answers[ist], 1);
                    p->bk->recs[first + i].accepted = true;
                }
                codec_submit_reply_destroy(r);
                atomic_fetch_add(&p->answered, DK_PER_MSG);
                break;
            }
            /* No answer (timeout, no responders while lanesched is down): retry the same ids. */
            H_REQUIRE(s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS, "producer: request failed: %s",
                      natsStatus_GetText(s));
            atomic_fetch_add(&p->failed_attempts, 1);
            H_REQUIRE(h_now_ms() < deadline, "producer: no answer for 40 s");
            h_sleep_ms(50);
        }
        h_sleep_ms(2);
    }
    h_disconnect(nc);
    atomic_fetch_add(&p->done, 1);
    return NULL;
}

static int case_daemon_sigkill_restart(void)
{
    h_nats_start(false);
    h_daemon_start(NULL);
    natsConnection *nc = h_connect();
    book_t bk;
    book_init(&bk, "dk", DK_N);
    bk.unordered = true;
    int64_t total_tokens = 0;
    for (size_t i = 0; i < DK_N; i++) {
        rec_t *r = &bk.recs[i];
        r->shape_k = 20 + (unsigned)((i / DK_PER_MSG) % 2);
        r->shape = h_shape(r->shape_k);
        r->tokens = 1 + (uint32_t)((i * 37) % 400);
        r->payload_len = 16 + (uint32_t)(i % 64);
        total_tokens += r->tokens;
    }
    static producers_t prod;
    static producer_t producers[DK_PRODUCERS];
    prod.bk = &bk;
    h_consumer_t c1;
    h_consumer_register(&c1, nc, MODEL, 8, 4096, 0, "before-crash");
    for (size_t k = 0; k < DK_PRODUCERS; k++) {
        producers[k] =
            (producer_t){&prod, k * DK_N / DK_PRODUCERS, (k + 1) * DK_N / DK_PRODUCERS, 0};
        H_REQUIRE(pthread_create(&producers[k].th, NULL, producer_main, &producers[k]) == 0,
                  "pthread_create");
    }
    uint64_t deadline = h_now_ms() + 15000;
    while (atomic_load(&prod.answered) < 400) {
        H_REQUIRE(h_now_ms() < deadline, "the producer got only %zu answers in 15 s",
                  atomic_load(&prod.answered));
        h_sleep_ms(5);
    }

    /* Take three batches: ack two, keep one pending across the crash. */
    static unsigned char acked_before[DK_N], pending_before[DK_N];
    h_pull(&c1, 3, 5000);
    codec_batch_t *bs[3];
    for (int k = 0; k < 3; k++) {
        bs[k] = h_next_batch(&c1, 6000);
        H_REQUIRE(bs[k] != NULL && bs[k]->status == CODEC_BATCH_OK,
                  "before the crash: batch %d missing or not OK", k);
        check_batch(&bk, bs[k], 8, 4096, 1);
    }
    size_t n_acked_before = 0, n_pending_before = 0;
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < bs[k]->n_items; i++) {
            size_t idx = rec_index(&bk, book_find(&bk, &bs[k]->items[i].id));
            if (k < 2)
                acked_before[idx] = 1, n_acked_before++;
            else
                pending_before[idx] = 1, n_pending_before++;
        }
        if (k < 2)
            h_ack_all_ok(&c1, bs[k]);
        codec_batch_destroy(bs[k]);
    }
    size_t answered_at_kill = atomic_load(&prod.answered);
    h_daemon_kill();
    h_log("killed with %zu of %d submits answered, %zu items acked, %zu pending", answered_at_kill,
          DK_N, n_acked_before, n_pending_before);
    if (atomic_load(&prod.done) > 0)
        h_log("warning: %u producers had finished before the kill", atomic_load(&prod.done));
    h_sleep_ms(300);
    h_daemon_restart();
    for (size_t k = 0; k < DK_PRODUCERS; k++)
        H_REQUIRE(pthread_join(producers[k].th, NULL) == 0, "pthread_join");
    h_log("%d producers done: answers ACCEPTED %lu, DUPLICATE %lu (the item was stored but the "
          "reply lost), %u attempts without an answer",
          DK_PRODUCERS, atomic_load(&prod.answers[0]), atomic_load(&prod.answers[1]),
          atomic_load(&prod.failed_attempts));
    H_REQUIRE(atomic_load(&prod.failed_attempts) > 0,
              "no submit went unanswered: the kill missed the load");
    require_balanced(nc, "after the restart");

    /* The old consumer is gone with the old process. */
    h_pull(&c1, 1, 1000);
    codec_batch_t *b = h_next_batch(&c1, 5000);
    H_REQUIRE(b != NULL && b->status == CODEC_BATCH_ERROR &&
                  strstr(b->error, "unknown_consumer") != NULL,
              "a pull by a consumer of the killed process: status %d error '%s'",
              b ? (int)b->status : -1, b ? b->error : "(none)");
    codec_batch_destroy(b);
    h_consumer_close(&c1);

    /* Producer retries of ids accepted before the crash (not yet acked): never a second copy. */
    unsigned retried = 0, dup = 0, acc = 0;
    for (size_t i = 0; i < DK_N && retried < 40; i += 7) {
        if (acked_before[i])
            continue;
        codec_work_item_t it[1];
        uint8_t pbuf[1100];
        book_items(&bk, i, 1, it, pbuf, NULL, NULL);
        codec_submit_reply_t *r = NULL;
        natsStatus s = h_submit(nc, MODEL, it, 1, 5000, &r);
        H_REQUIRE(s == NATS_OK, "retry of %s: %s", bk.recs[i].id, natsStatus_GetText(s));
        H_REQUIRE(r->n_results == 1 && (r->results[0].status == CODEC_ITEM_DUPLICATE ||
                                        r->results[0].status == CODEC_ITEM_ACCEPTED),
                  "retry of %s: %zu results, status %d", bk.recs[i].id, r->n_results,
                  r->n_results ? (int)r->results[0].status : -1);
        dup += r->results[0].status == CODEC_ITEM_DUPLICATE;
        acc += r->results[0].status == CODEC_ITEM_ACCEPTED;
        codec_submit_reply_destroy(r);
        retried++;
    }
    h_log("retried %u already-answered ids after the restart: %u DUPLICATE, %u ACCEPTED", retried,
          dup, acc);

    /* Drain everything after the restart. */
    h_consumer_t c2;
    h_consumer_register(&c2, nc, MODEL, 8, 4096, 0, "after-restart");
    for (size_t i = 0; i < DK_N; i++)
        bk.recs[i].delivered = 0;
    size_t got = drain(&c2, &bk, 8, 4096, 1500, 0, NULL);
    got += drain(&c2, &bk, 8, 4096, 500, 0, NULL);
    int64_t tokens_after = 0;
    size_t items_after = 0;
    for (size_t i = 0; i < DK_N; i++) {
        rec_t *r = &bk.recs[i];
        H_REQUIRE(r->accepted, "%s was never answered ACCEPTED/DUPLICATE", r->id);
        H_REQUIRE(!(acked_before[i] && r->delivered),
                  "%s was acked before the crash and delivered again after it", r->id);
        H_REQUIRE(r->delivered <= 1, "%s delivered %u times after the restart (a second copy)",
                  r->id, r->delivered);
        H_REQUIRE(acked_before[i] || r->delivered == 1,
                  "%s was accepted but never delivered after the restart%s", r->id,
                  pending_before[i] ? " (it was pending in a batch at the crash)" : "");
        if (r->delivered) {
            tokens_after += r->tokens;
            items_after++;
        }
    }
    int64_t tokens_before = 0;
    for (size_t i = 0; i < DK_N; i++)
        if (acked_before[i])
            tokens_before += bk.recs[i].tokens;
    H_REQUIRE(tokens_before + tokens_after == total_tokens,
              "tokens acked before %" PRId64 " + completed after %" PRId64 " != submitted %" PRId64,
              tokens_before, tokens_after, total_tokens);
    char *st = h_stats(nc);
    H_REQUIRE(h_counter(st, "items_completed") == (int64_t)items_after &&
                  h_counter(st, "tokens_completed") == tokens_after,
              "after the restart: completed %" PRId64 " items / %" PRId64 " tokens, the consumer "
              "acked %zu / %" PRId64,
              h_counter(st, "items_completed"), h_counter(st, "tokens_completed"), items_after,
              tokens_after);
    require_empty(st, "after the drain");
    H_REQUIRE(h_counter(st, "tokens_restored") + h_counter(st, "tokens_received") == tokens_after,
              "after the drain: restored %" PRId64 " + received %" PRId64
              " tokens, the consumer acked %" PRId64,
              h_counter(st, "tokens_restored"), h_counter(st, "tokens_received"), tokens_after);
    free(st);
    h_log("%zu items completed after the restart + %zu acked before = %d, each once", got,
          n_acked_before, DK_N);
    h_consumer_close(&c2);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* ---- 6. bad input ------------------------------------------------------------------------------
 */

static void expect_reject(const codec_submit_reply_t *r, size_t i, const char *reason)
{
    const codec_item_result_t *res = &r->results[i];
    H_REQUIRE(res->status == CODEC_ITEM_REJECTED && strcmp(res->reason, reason) == 0,
              "item %zu (%.*s): status %d reason '%s' error '%s', expected REJECTED '%s'", i,
              (int)res->id.len, (const char *)res->id.ptr, (int)res->status, res->reason,
              res->error, reason);
    H_REQUIRE(res->error[0] != '\0', "item %zu rejected for %s without an error text", i, reason);
}

static void expect_register_error(natsConnection *nc, const char *model, uint32_t bs, uint32_t bt,
                                  const char *code)
{
    codec_register_t reg = {model, bs, bt, 0, "bad", 0, 0, 0, 0, 0};
    codec_registered_t *r = NULL;
    natsStatus s = h_register_raw(nc, &reg, 3000, &r);
    H_REQUIRE(s == NATS_OK, "Register(%s, %u, %u): %s", model, bs, bt, natsStatus_GetText(s));
    H_REQUIRE(h_err_is(r->error, code) && r->consumer_id[0] == '\0',
              "Register(model '%s', %u, %u): error '%s', consumer '%s' (expected '%s...')", model,
              bs, bt, r->error, r->consumer_id, code);
    codec_registered_destroy(r);
}

static int case_bad_input(void)
{
    h_nats_start(false);
    const char *flags[] = {"--max-payload", "1024", NULL};
    h_daemon_start(flags);
    natsConnection *nc = h_connect();

    /* Garbage: a field tag whose varint never ends. */
    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    codec_submit_t *dummy = NULL;
    H_REQUIRE(codec_decode_submit(garbage, sizeof(garbage), NULL, &dummy) == CODEC_EMALFORMED,
              "the test's garbage decodes");
    natsMsg *m = NULL;
    natsStatus s = h_request(nc, H_PREFIX ".submit." MODEL, garbage, sizeof(garbage), 3000, &m);
    H_REQUIRE(s == NATS_OK, "garbage submit: %s", natsStatus_GetText(s));
    codec_submit_reply_t *r = NULL;
    H_REQUIRE(codec_decode_submit_reply(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &r) ==
                  CODEC_OK,
              "the answer to garbage is not a SubmitReply");
    natsMsg_Destroy(m);
    H_REQUIRE(h_err_is(r->error, "malformed") && r->n_results == 0,
              "garbage: SubmitReply error '%s' with %zu results (expected 'malformed...')",
              r->error, r->n_results);
    codec_submit_reply_destroy(r);

    /* One message, every item rule. */
    uint64_t hashes[2];
    h_shape_components(30, hashes);
    uint64_t shape = h_shape(30);
    static uint8_t big[1025], exact[1024], small[10];
    memset(big, 'b', sizeof(big));
    memset(exact, 'e', sizeof(exact));
    memset(small, 's', sizeof(small));
    char long_id[66];
    memset(long_id, 'x', 65);
    long_id[65] = '\0';
    codec_work_item_t items[9];
    items[0] = h_item("bad-ok-1", MODEL, shape, 10, small, sizeof(small));
    items[1] = h_item("bad-model", "other", shape, 10, small, sizeof(small));
    items[2] = h_item("bad-zero", MODEL, shape, 0, small, sizeof(small));
    items[3] = h_item("bad-big", MODEL, shape, 10, big, sizeof(big));
    items[4] = h_item("bad-ok-2", MODEL, shape, 20, exact, sizeof(exact));
    items[5] = h_item("bad-noshape", MODEL, 0, 10, small, sizeof(small));
    items[6] = h_item("bad-mismatch", MODEL, shape ^ 1, 10, small, sizeof(small));
    items[6].component_hashes = hashes;
    items[6].n_component_hashes = 2;
    items[7] = h_item("", MODEL, shape, 10, small, sizeof(small));
    items[8] = h_item(long_id, MODEL, shape, 10, small, sizeof(small));
    s = h_submit(nc, MODEL, items, 9, 3000, &r);
    H_REQUIRE(s == NATS_OK, "mixed submit: %s", natsStatus_GetText(s));
    H_REQUIRE(r->error[0] == '\0' && r->n_results == 9,
              "mixed submit: error '%s', %zu results for 9 items", r->error, r->n_results);
    H_REQUIRE(r->results[0].status == CODEC_ITEM_ACCEPTED, "bad-ok-1: status %d reason '%s'",
              (int)r->results[0].status, r->results[0].reason);
    expect_reject(r, 1, "bad_model");
    expect_reject(r, 2, "zero_tokens");
    expect_reject(r, 3, "payload_too_large");
    H_REQUIRE(r->results[4].status == CODEC_ITEM_ACCEPTED,
              "a payload of exactly --max-payload: status %d reason '%s'",
              (int)r->results[4].status, r->results[4].reason);
    expect_reject(r, 5, "no_shape");
    expect_reject(r, 6, "signature_mismatch");
    expect_reject(r, 7, "bad_id");
    expect_reject(r, 8, "id_too_long");
    codec_submit_reply_destroy(r);

    /* A valid item on the subject of another model. */
    codec_work_item_t wrong = h_item("bad-subject", MODEL, shape, 10, small, sizeof(small));
    s = h_submit(nc, "other", &wrong, 1, 3000, &r);
    H_REQUIRE(s == NATS_OK, "submit on %s.submit.other: %s", H_PREFIX, natsStatus_GetText(s));
    H_REQUIRE(r->n_results == 1, "%zu results", r->n_results);
    expect_reject(r, 0, "bad_model");
    codec_submit_reply_destroy(r);

    char *st = h_stats(nc);
    h_log("stats after the rejects: %.700s", st);
    static const struct {
        const char *reason;
        int64_t n;
    } want[] = {
        {"malformed", 1}, {"bad_model", 2},          {"zero_tokens", 1}, {"payload_too_large", 1},
        {"no_shape", 1},  {"signature_mismatch", 1}, {"bad_id", 1},      {"id_too_long", 1}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        H_REQUIRE(h_rejected(st, want[i].reason) == want[i].n,
                  "counters.rejected.%s = %" PRId64 ", expected %" PRId64, want[i].reason,
                  h_rejected(st, want[i].reason), want[i].n);
    H_REQUIRE(h_counter(st, "items_received") == 2 && h_counter(st, "tokens_received") == 30,
              "items_received %" PRId64 " tokens_received %" PRId64 " (expected 2 and 30)",
              h_counter(st, "items_received"), h_counter(st, "tokens_received"));
    free(st);

    /* Bad registrations. */
    expect_register_error(nc, "", 4, 100, "bad_model");
    expect_register_error(nc, MODEL, 0, 100, "zero_batch_size");
    expect_register_error(nc, MODEL, 4, 0, "zero_batch_tokens");
    s = h_request(nc, H_PREFIX ".register", garbage, sizeof(garbage), 3000, &m);
    H_REQUIRE(s == NATS_OK, "garbage Register: %s", natsStatus_GetText(s));
    codec_registered_t *reg = NULL;
    H_REQUIRE(codec_decode_registered(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &reg) ==
                      CODEC_OK &&
                  h_err_is(reg->error, "malformed") && reg->consumer_id[0] == '\0',
              "garbage Register: answered error '%s'", reg ? reg->error : "(undecodable)");
    codec_registered_destroy(reg);
    natsMsg_Destroy(m);

    /* A consumer nobody registered. */
    h_consumer_t ghost;
    memset(&ghost, 0, sizeof(ghost));
    ghost.nc = nc;
    snprintf(ghost.id, sizeof(ghost.id), "00000000000000000000000000000000");
    h_subject(ghost.pull_subject, sizeof(ghost.pull_subject), "pull", ghost.id);
    h_subject(ghost.ack_subject, sizeof(ghost.ack_subject), "ack", ghost.id);
    snprintf(ghost.inbox, sizeof(ghost.inbox), "_GHOST.%d", (int)getpid());
    H_REQUIRE(natsConnection_SubscribeSync(&ghost.sub, nc, ghost.inbox) == NATS_OK, "subscribe");
    h_pull(&ghost, 1, 1000);
    codec_batch_t *b = h_next_batch(&ghost, 4000);
    H_REQUIRE(b != NULL, "no answer to a pull by an unknown consumer");
    H_REQUIRE(b->status == CODEC_BATCH_ERROR && strstr(b->error, "unknown_consumer") != NULL &&
                  b->n_items == 0,
              "unknown consumer pull: status %d error '%s' items %zu", (int)b->status, b->error,
              b->n_items);
    codec_batch_destroy(b);
    codec_ack_t forged;
    memset(&forged, 0, sizeof(forged));
    forged.batch_id = h_rand() | 1;
    forged.all = true;
    codec_ack_reply_t *ar = h_ack(&ghost, &forged, 3000);
    H_REQUIRE(ar != NULL && ar->error[0] != '\0' && ar->acked == 0,
              "an ack by an unknown consumer: %s", ar ? ar->error : "no reply");
    codec_ack_reply_destroy(ar);
    h_consumer_close(&ghost);

    /* A forged batch id from a real consumer. */
    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 8, 8192, 0, "bad-input");
    ar = h_ack(&c, &forged, 3000);
    H_REQUIRE(ar != NULL, "no reply to a forged ack");
    H_REQUIRE(h_err_is(ar->error, "unknown_batch") && ar->unknown == 1 && ar->acked == 0 &&
                  ar->returned == 0,
              "forged ack: AckReply{acked %u, returned %u, unknown %u, error '%s'}", ar->acked,
              ar->returned, ar->unknown, ar->error);
    codec_ack_reply_destroy(ar);

    /* Still serving: the two valid items go out and complete. */
    h_pull(&c, 10, 1500);
    size_t got = 0;
    for (;;) {
        b = h_next_batch(&c, 5000);
        H_REQUIRE(b != NULL, "no batch after the bad input");
        if (b->status == CODEC_BATCH_EXPIRED) {
            codec_batch_destroy(b);
            break;
        }
        H_REQUIRE(b->status == CODEC_BATCH_OK, "batch status %d error '%s'", (int)b->status,
                  b->error);
        for (size_t i = 0; i < b->n_items; i++) {
            const codec_batch_item_t *it = &b->items[i];
            bool ok1 = it->id.len == 8 && memcmp(it->id.ptr, "bad-ok-1", 8) == 0;
            bool ok2 = it->id.len == 8 && memcmp(it->id.ptr, "bad-ok-2", 8) == 0;
            H_REQUIRE(ok1 || ok2, "a rejected item was queued: '%.*s'", (int)it->id.len,
                      (const char *)it->id.ptr);
            H_REQUIRE(it->payload.len == (ok1 ? sizeof(small) : sizeof(exact)),
                      "payload length %zu", it->payload.len);
        }
        got += b->n_items;
        h_ack_all_ok(&c, b);
        codec_batch_destroy(b);
    }
    H_REQUIRE(got == 2, "%zu valid items delivered, expected 2", got);
    st = h_stats(nc);
    H_REQUIRE(h_counter(st, "items_completed") == 2 && h_counter(st, "tokens_completed") == 30,
              "completed %" PRId64 " items / %" PRId64 " tokens", h_counter(st, "items_completed"),
              h_counter(st, "tokens_completed"));
    require_empty(st, "at the end");
    free(st);
    h_consumer_close(&c);
    finish(nc);
    return 0;
}

/* ---- 7. retried submits --------------------------------------------------------------------- */

static codec_item_status_t submit_one(natsConnection *nc, const codec_work_item_t *it,
                                      int64_t timeout_ms, natsStatus *st)
{
    codec_submit_reply_t *r = NULL;
    *st = h_submit(nc, MODEL, it, 1, timeout_ms, &r);
    if (*st != NATS_OK)
        return (codec_item_status_t)-1;
    H_REQUIRE(r->n_results == 1, "%zu results (error '%s')", r->n_results, r->error);
    codec_item_status_t s = r->results[0].status;
    H_REQUIRE(s != CODEC_ITEM_REJECTED, "REJECTED: %s / %s", r->results[0].reason,
              r->results[0].error);
    codec_submit_reply_destroy(r);
    return s;
}

static int case_retried_submit_dedupe(void)
{
    h_nats_start(false);
    h_daemon_start(NULL);
    natsConnection *nc = h_connect();
    uint64_t shape = h_shape(40);
    codec_work_item_t a = h_item("dd-a", MODEL, shape, 100, "A", 1);
    codec_work_item_t b = h_item("dd-b", MODEL, shape, 50, "B", 1);
    natsStatus s;
    H_REQUIRE(submit_one(nc, &a, 3000, &s) == CODEC_ITEM_ACCEPTED, "first submit of dd-a: %s",
              natsStatus_GetText(s));
    H_REQUIRE(submit_one(nc, &a, 3000, &s) == CODEC_ITEM_DUPLICATE,
              "second submit of dd-a is not DUPLICATE (%s)", natsStatus_GetText(s));

    /* The producer's timeout (500 ms) passes three times while lanesched is stopped. */
    h_daemon_pause();
    for (int attempt = 0; attempt < 4; attempt++) {
        codec_item_status_t is = submit_one(nc, &b, 500, &s);
        H_REQUIRE(s == NATS_TIMEOUT, "attempt %d while lanesched is stopped: %s (status %d)",
                  attempt, natsStatus_GetText(s), (int)is);
    }
    h_log("4 attempts of dd-b timed out while lanesched was stopped");
    h_daemon_resume();
    h_sleep_ms(500);
    H_REQUIRE(submit_one(nc, &b, 3000, &s) == CODEC_ITEM_DUPLICATE,
              "the retry after SIGCONT is not DUPLICATE (%s)", natsStatus_GetText(s));

    char *st = h_stats(nc);
    H_REQUIRE(h_counter(st, "items_received") == 2 && h_counter(st, "tokens_received") == 150,
              "items_received %" PRId64 " tokens_received %" PRId64 " (expected 2, 150)",
              h_counter(st, "items_received"), h_counter(st, "tokens_received"));
    H_REQUIRE(h_counter(st, "duplicates") == 5,
              "duplicates %" PRId64 ", expected 5 (1 for dd-a, 3 queued retries and 1 late retry "
              "of dd-b)",
              h_counter(st, "duplicates"));
    H_REQUIRE(h_json_sum(st, "queued_items") == 2, "%" PRId64 " items queued, expected 2",
              h_json_sum(st, "queued_items"));
    free(st);

    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 16, 8192, 0, "dedupe");
    h_pull(&c, 10, 1500);
    int n_a = 0, n_b = 0;
    for (;;) {
        codec_batch_t *bt = h_next_batch(&c, 5000);
        H_REQUIRE(bt != NULL, "no batch");
        if (bt->status == CODEC_BATCH_EXPIRED) {
            codec_batch_destroy(bt);
            break;
        }
        H_REQUIRE(bt->status == CODEC_BATCH_OK, "status %d error '%s'", (int)bt->status, bt->error);
        for (size_t i = 0; i < bt->n_items; i++) {
            const codec_bytes_t *id = &bt->items[i].id;
            n_a += id->len == 4 && memcmp(id->ptr, "dd-a", 4) == 0;
            n_b += id->len == 4 && memcmp(id->ptr, "dd-b", 4) == 0;
        }
        h_ack_all_ok(&c, bt);
        codec_batch_destroy(bt);
    }
    H_REQUIRE(n_a == 1 && n_b == 1, "delivered dd-a %d times and dd-b %d times (expected once)",
              n_a, n_b);
    st = h_stats(nc);
    H_REQUIRE(h_counter(st, "items_completed") == 2 && h_counter(st, "tokens_completed") == 150,
              "completed %" PRId64 " items / %" PRId64 " tokens", h_counter(st, "items_completed"),
              h_counter(st, "tokens_completed"));
    require_empty(st, "at the end");
    free(st);
    h_consumer_close(&c);
    finish(nc);
    return 0;
}

/* ---- 8. ack deadline and dead letter ----------------------------------------------------------
 */

static int case_ack_deadline_and_dead_letter(void)
{
    h_nats_start(false);
    const char *flags[] = {
        "--ack-wait-ms", "500", "--max-deliveries", "2", "--heartbeat-ms", "200", "--dead-after-ms",
        "1000",          NULL};
    h_daemon_start(flags);
    natsConnection *nc = h_connect();
    natsSubscription *dead = NULL;
    H_REQUIRE(natsConnection_SubscribeSync(&dead, nc, H_PREFIX ".dead." MODEL) == NATS_OK,
              "subscribe dead");
    natsConnection_Flush(nc);
    codec_work_item_t it = h_item("dl-poison", MODEL, h_shape(50), 33, "poison", 6);
    h_submit_accepted(nc, MODEL, &it, 1);

    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 4, 4096, 0, "never-acks");
    H_REQUIRE(c.ack_wait_ms == 500 && c.heartbeat_ms == 200 && c.dead_after_ms == 1000,
              "Registered timings ack-wait %u heartbeat %u dead-after %u", c.ack_wait_ms,
              c.heartbeat_ms, c.dead_after_ms);
    h_hb_start(&c, c.heartbeat_ms);

    /* The deadline runs from the daemon's dispatch, which lies between the pull and its receipt:
     * the lower bound is checked from the pull (a late receipt cannot fail it), the upper from
     * the receipt. */
    uint64_t t0 = h_now_ms();
    h_pull(&c, 1, 5000);
    codec_batch_t *b1 = h_next_batch(&c, 6000);
    uint64_t t1 = h_now_ms();
    H_REQUIRE(b1 != NULL && b1->status == CODEC_BATCH_OK && b1->n_items == 1 &&
                  b1->items[0].deliveries == 1,
              "first delivery: %s", b1 ? b1->error : "none");
    h_pull(&c, 1, 5000);
    codec_batch_t *b2 = h_next_batch(&c, 6000);
    uint64_t t2 = h_now_ms();
    H_REQUIRE(b2 != NULL && b2->status == CODEC_BATCH_OK, "no second delivery after the deadline");
    H_REQUIRE(b2->n_items == 1 && b2->items[0].id.len == 9 &&
                  memcmp(b2->items[0].id.ptr, "dl-poison", 9) == 0 && b2->items[0].deliveries == 2,
              "second delivery: %zu items, deliveries %u", b2->n_items,
              b2->n_items ? b2->items[0].deliveries : 0);
    H_REQUIRE(b2->batch_id != b1->batch_id, "batch id reused");
    h_log("redelivered %" PRIu64 " ms after the first delivery (ack wait 500 ms)", t2 - t1);
    H_REQUIRE(t2 - t0 >= 450,
              "redelivered %" PRIu64 " ms after the pull, before the 500 ms ack deadline", t2 - t0);
    H_REQUIRE(t2 - t1 <= 3000, "redelivered only after %" PRIu64 " ms", t2 - t1);

    codec_ack_t late;
    memset(&late, 0, sizeof(late));
    late.batch_id = b1->batch_id;
    late.all = true;
    codec_ack_reply_t *ar = h_ack(&c, &late, 3000);
    H_REQUIRE(ar != NULL && h_err_is(ar->error, "unknown_batch") && ar->unknown == 1 &&
                  ar->acked == 0,
              "ack of the expired first batch: %s", ar ? ar->error : "no reply");
    codec_ack_reply_destroy(ar);

    /* Past the second deadline the item is dead-lettered, not delivered a third time. */
    h_pull(&c, 1, 3000);
    expect_expired(&c, 5000, "after the delivery limit");
    codec_batch_t *d = h_sub_next_batch(dead, 3000, NULL, 0);
    H_REQUIRE(d != NULL, "nothing on %s.dead.%s", H_PREFIX, MODEL);
    H_REQUIRE(d->status == CODEC_BATCH_ERROR && h_err_is(d->error, "delivery_limit") &&
                  d->n_items == 1 && d->items[0].id.len == 9 &&
                  memcmp(d->items[0].id.ptr, "dl-poison", 9) == 0 && d->items[0].tokens == 33,
              "dead letter: status %d error '%s' items %zu", (int)d->status, d->error, d->n_items);
    h_log("dead letter: '%s', item deliveries %u", d->error, d->items[0].deliveries);
    const char *times = strstr(d->error, "delivered ");
    H_REQUIRE(times != NULL && strtoul(times + 10, NULL, 10) == 2,
              "dead letter error '%s': expected 'delivered 2 times' (--max-deliveries 2)",
              d->error);
    codec_batch_destroy(d);
    d = h_sub_next_batch(dead, 500, NULL, 0);
    H_REQUIRE(d == NULL, "a second dead letter");

    late.batch_id = b2->batch_id;
    ar = h_ack(&c, &late, 3000);
    H_REQUIRE(ar != NULL && h_err_is(ar->error, "unknown_batch") && ar->acked == 0,
              "ack of the dead-lettered batch: %s", ar ? ar->error : "no reply");
    codec_ack_reply_destroy(ar);
    codec_batch_destroy(b1);
    codec_batch_destroy(b2);

    char *st = h_stats(nc);
    H_REQUIRE(h_counter(st, "dead_lettered") == 1, "dead_lettered %" PRId64,
              h_counter(st, "dead_lettered"));
    /* subjects.md: a dead-lettered item is completed (tombstoned) and counted as completed. */
    H_REQUIRE(h_counter(st, "items_completed") == 1 && h_counter(st, "tokens_completed") == 33 &&
                  h_counter(st, "tokens_received") == 33,
              "items_completed %" PRId64 ", tokens completed %" PRId64 " / received %" PRId64
              " (expected 1, 33, 33)",
              h_counter(st, "items_completed"), h_counter(st, "tokens_completed"),
              h_counter(st, "tokens_received"));
    H_REQUIRE(h_counter(st, "items_returned") == 2 &&
                  h_counter(st, "batches_expired_ack_deadline") == 2,
              "items_returned %" PRId64 ", batches_expired_ack_deadline %" PRId64
              " (two deadlines passed)",
              h_counter(st, "items_returned"), h_counter(st, "batches_expired_ack_deadline"));
    H_REQUIRE(h_counter(st, "consumers_declared_dead") == 0,
              "the heartbeating consumer was declared dead");
    h_log("items_routed %" PRId64 " (2 deliveries%s)", h_counter(st, "items_routed"),
          h_counter(st, "items_routed") == 3 ? " + the dead letter" : "");
    require_empty(st, "after the dead letter");
    free(st);
    /* The heartbeating consumer is still alive: another pull simply expires. */
    h_pull(&c, 1, 500);
    expect_expired(&c, 3000, "a live consumer with nothing to do");
    h_consumer_close(&c);
    h_sub_destroy(nc, dead);
    finish(nc);
    return 0;
}

/* ---- 9. ENOSPC ----------------------------------------------------------------------------------
 */

/* A nats-server and a daemon whose data directory is on a fresh tmpfs of `size` mounted at
 * mnt (under the test's temp dir); false (the case is skipped) without root or tmpfs. */
static bool tmpfs_daemon_start_args(const char *size, char *mnt, size_t cap,
                                    const char *const *extra)
{
    char data[800];
    snprintf(mnt, cap, "%s/tmpfs", h_tmp());
    if (geteuid() != 0 || !h_mount_tmpfs(mnt, size)) {
        printf("SKIPPED: needs root/tmpfs\n");
        return false;
    }
    snprintf(data, sizeof(data), "%s/data", mnt);
    h_set_data_dir(data);
    h_nats_start(false);
    h_daemon_start(extra);
    return true;
}

static bool tmpfs_daemon_start(const char *size, char *mnt, size_t cap)
{
    return tmpfs_daemon_start_args(size, mnt, cap, NULL);
}

/* Fills the file system of path with the file path: writes until it is refused. */
static void fill_fs(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    H_REQUIRE(fd >= 0, "open %s: %s", path, strerror(errno));
    static char chunk[65536];
    memset(chunk, 'f', sizeof(chunk));
    size_t filled = 0;
    for (size_t sz = sizeof(chunk); sz >= 512; sz /= 2) {
        for (;;) {
            ssize_t w = write(fd, chunk, sz);
            if (w <= 0)
                break;
            filled += (size_t)w;
        }
    }
    close(fd);
    h_log("tmpfs filled with %zu bytes", filled);
}

/* How many of records [from, to) were answered ACCEPTED. */
static size_t book_accepted(const book_t *bk, size_t from, size_t to)
{
    size_t n = 0;
    for (size_t i = from; i < to; i++)
        n += bk->recs[i].accepted;
    return n;
}

/* Of the first n records, each accepted one was delivered exactly once, no refused one ever. */
#define EN_N 600

static int case_enospc(void)
{
    char mnt[700], filler[800];
    if (!tmpfs_daemon_start("4m", mnt, sizeof(mnt)))
        return SKIP_CODE;
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    natsConnection *nc = h_connect();
    book_t bk;
    book_one_lane(&bk, "en", EN_N, 60, 200);
    size_t next = 0;
    book_submit(nc, &bk, next, 20, NULL);
    next += 20;

    fill_fs(filler);

    /* Submits are refused with store_full. A little room may remain in the last page of an open
     * segment, so a few may still be accepted (they must then survive like any other). */
    size_t full_seen = 0, accepted_full = 0;
    while (full_seen < 5) {
        H_REQUIRE(next < EN_N - 100, "%zu submits on a full disk and no store_full", next);
        codec_work_item_t it[1];
        uint8_t pbuf[1100];
        book_items(&bk, next, 1, it, pbuf, NULL, NULL);
        codec_submit_reply_t *r = NULL;
        natsStatus s = h_submit(nc, MODEL, it, 1, 5000, &r);
        H_REQUIRE(s == NATS_OK, "submit on a full disk: %s", natsStatus_GetText(s));
        H_REQUIRE(r->n_results == 1, "%zu results, error '%s'", r->n_results, r->error);
        const codec_item_result_t *res = &r->results[0];
        if (res->status == CODEC_ITEM_ACCEPTED) {
            bk.recs[next].accepted = true;
            accepted_full++;
        } else {
            H_REQUIRE(res->status == CODEC_ITEM_REJECTED && strcmp(res->reason, "store_full") == 0,
                      "on a full disk: status %d reason '%s' error '%s' (expected REJECTED "
                      "store_full)",
                      (int)res->status, res->reason, res->error);
            H_REQUIRE(res->error[0] != '\0', "store_full without an error text");
            if (full_seen == 0)
                h_log("store_full: '%s'", res->error);
            full_seen++;
        }
        codec_submit_reply_destroy(r);
        next++;
    }
    h_log("%zu items accepted into remaining space, %zu store_full rejects", accepted_full,
          full_seen);
    char *st = h_stats(nc);
    H_REQUIRE(h_rejected(st, "store_full") == (int64_t)full_seen,
              "counters.rejected.store_full = %" PRId64 ", %zu seen", h_rejected(st, "store_full"),
              full_seen);
    free(st);

    /* Free the space: submits are accepted again. */
    H_REQUIRE(unlink(filler) == 0, "unlink filler: %s", strerror(errno));
    uint64_t deadline = h_now_ms() + 5000;
    for (;;) {
        codec_work_item_t it[1];
        uint8_t pbuf[1100];
        book_items(&bk, next, 1, it, pbuf, NULL, NULL);
        codec_submit_reply_t *r = NULL;
        natsStatus s = h_submit(nc, MODEL, it, 1, 5000, &r);
        H_REQUIRE(s == NATS_OK && r->n_results == 1, "submit after freeing space: %s",
                  natsStatus_GetText(s));
        codec_item_status_t is = r->results[0].status;
        H_REQUIRE(is == CODEC_ITEM_ACCEPTED || strcmp(r->results[0].reason, "store_full") == 0,
                  "after freeing space: status %d reason '%s'", (int)is, r->results[0].reason);
        codec_submit_reply_destroy(r);
        next++;
        if (is == CODEC_ITEM_ACCEPTED) {
            bk.recs[next - 1].accepted = true;
            break;
        }
        H_REQUIRE(h_now_ms() < deadline, "still store_full 5 s after space was freed");
        h_sleep_ms(100);
    }
    book_submit(nc, &bk, next, 20, NULL);
    next += 20;
    size_t accepted = book_accepted(&bk, 0, next);
    h_log("submits accepted again after freeing space; %zu items accepted in all", accepted);

    /* Nothing accepted is lost, also across a restart; nothing refused was stored. */
    h_daemon_stop_clean();
    h_daemon_restart();
    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 32, 65536, 0, "enospc");
    size_t got = drain(&c, &bk, 32, 65536, 1500, 0, NULL);
    require_delivered_once(&bk, next);
    H_REQUIRE(got == accepted, "drained %zu items, %zu were accepted", got, accepted);
    h_consumer_close(&c);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* Submits records one at a time from `from` until `want` store_full refusals; returns the next
 * record (every ACCEPTED one is marked in the book). */
static size_t fill_until_full(natsConnection *nc, book_t *bk, size_t from, size_t want)
{
    size_t next = from, full = 0;
    while (full < want) {
        H_REQUIRE(next < bk->n, "%zu items submitted and no store_full", next);
        codec_work_item_t it[1];
        uint8_t pbuf[1100];
        book_items(bk, next, 1, it, pbuf, NULL, NULL);
        codec_submit_reply_t *r = NULL;
        natsStatus s = h_submit(nc, MODEL, it, 1, 5000, &r);
        H_REQUIRE(s == NATS_OK && r->n_results == 1, "submit: %s", natsStatus_GetText(s));
        if (r->results[0].status == CODEC_ITEM_ACCEPTED)
            bk->recs[next].accepted = true;
        else
            full += strcmp(r->results[0].reason, "store_full") == 0;
        H_REQUIRE(r->results[0].status == CODEC_ITEM_ACCEPTED ||
                      strcmp(r->results[0].reason, "store_full") == 0,
                  "status %d reason '%s'", (int)r->results[0].status, r->results[0].reason);
        codec_submit_reply_destroy(r);
        next++;
    }
    return next;
}

/* After a drain: submits from `next` until the disk takes items again and is full again (the
 * drained segment's file goes at a refusal); returns the next record, *out_again the new items
 * accepted. Fails after 10 s of store_full. */
static size_t refill_after_drain(natsConnection *nc, book_t *bk, size_t next, size_t *out_again,
                                 uint64_t within_ms)
{
    uint64_t deadline = h_now_ms() + within_ms;
    size_t again = 0;
    while (again == 0) {
        H_REQUIRE(h_now_ms() < deadline,
                  "still store_full %" PRIu64 " ms after the queue was drained", within_ms);
        size_t from = next;
        next = fill_until_full(nc, bk, next, 1);
        again = book_accepted(bk, from, next);
        if (again == 0)
            h_sleep_ms(200);
    }
    h_log("after the drain, %zu new items accepted before the disk was full again", again);
    *out_again = again;
    return next;
}

/* A consumer named `name` (batches of 32 items, 65,536 tokens) registers, takes batches until
 * none comes for 1.5 s, and goes: the items it took. */
static size_t drain_once(natsConnection *nc, book_t *bk, const char *name)
{
    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 32, 65536, 0, name);
    size_t got = drain(&c, bk, 32, 65536, 1500, 1, NULL);
    h_consumer_close(&c);
    return got;
}

/* The daemon fills its data directory itself, before any consumer came: every item it took is
 * still delivered and completed on the full disk (the journal that records deliveries and
 * tombstones fits in the room appends leave), the daemon keeps running, and once the queue is
 * drained the space comes back for new items. */
#define ES_N 12000
static int case_enospc_self(void)
{
    char mnt[700];
    if (!tmpfs_daemon_start("6m", mnt, sizeof(mnt)))
        return SKIP_CODE;
    natsConnection *nc = h_connect();
    book_t bk;
    book_one_lane(&bk, "es", ES_N, 61, 1000);
    size_t next = fill_until_full(nc, &bk, 0, 3);
    size_t accepted = book_accepted(&bk, 0, next);
    H_REQUIRE(accepted > 100, "only %zu items fitted", accepted);
    h_log("%zu items accepted until the disk was full", accepted);
    /* Gone while the disk fills again (a consumer silent past --dead-after-ms would be). */
    size_t got = drain_once(nc, &bk, "enospc-self");
    H_REQUIRE(h_daemon_running(), "the daemon stopped while its items were consumed");
    H_REQUIRE(got == accepted, "drained %zu items on the full disk, %zu were accepted", got,
              accepted);
    /* Drained: the current segment rolls over at the next refusal and its file goes. */
    size_t again = 0;
    next = refill_after_drain(nc, &bk, next, &again, 10000);
    got = drain_once(nc, &bk, "enospc-self-2");
    H_REQUIRE(got == again, "drained %zu of the %zu new items", got, again);
    require_delivered_once(&bk, next);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* 1 when the daemon's log holds needle. */
static bool daemon_log_has(const char *needle)
{
    char path[800];
    snprintf(path, sizeof(path), "%s/lanesched.log", h_tmp());
    FILE *f = fopen(path, "r");
    H_REQUIRE(f != NULL, "open %s: %s", path, strerror(errno));
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* Another file fills the disk while the model's current segment still has reserved room (the
 * disk store reserves ahead of its appends): items fill that room up to the size cap, where the
 * next segment finds no space. Once they are drained, the segment at the cap is sealed at the
 * next refusal and its file goes at the flush (disk_seg.c invariant 7): items are accepted again
 * within 3 s, where they waited for the 10 s idle seal before. */
#define ER_N 8000
static int case_enospc_rollover(void)
{
    char mnt[700], filler[800];
    static const char *const args[] = {"--segment-max-bytes", "4194304", NULL};
    if (!tmpfs_daemon_start_args("16m", mnt, sizeof(mnt), args))
        return SKIP_CODE;
    snprintf(filler, sizeof(filler), "%s/filler", mnt);
    natsConnection *nc = h_connect();
    book_t bk;
    book_one_lane(&bk, "eo", ER_N, 63, 1000);
    /* A first item delivered and acked: the journal file exists before the disk is full. */
    book_submit(nc, &bk, 0, 1, NULL);
    H_REQUIRE(drain_once(nc, &bk, "enospc-rollover") == 1, "the first item");
    size_t next = 1;
    for (; next < 2601; next += 50) /* past half the cap: the segment is reserved to the cap */
        book_submit(nc, &bk, next, 50, NULL);
    fill_fs(filler);
    next = fill_until_full(nc, &bk, next, 3);
    size_t accepted = book_accepted(&bk, 0, next);
    h_log("%zu items accepted in all when the disk refused", accepted);
    size_t got = drain_once(nc, &bk, "enospc-rollover-1");
    H_REQUIRE(got + 1 == accepted, "drained %zu items on the full disk, %zu were accepted", got,
              accepted - 1);
    size_t again = 0;
    next = refill_after_drain(nc, &bk, next, &again, 3000);
    H_REQUIRE(daemon_log_has("the data directory is full: items are refused with store_full") &&
                  daemon_log_has("the data directory takes items again, after"),
              "no log line when the disk began or stopped refusing items");
    got = drain_once(nc, &bk, "enospc-rollover-2");
    H_REQUIRE(got == again, "drained %zu of the %zu new items", got, again);
    require_delivered_once(&bk, next);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* The daemon fills its data directory itself and is killed there, twice: each start on the
 * full disk still delivers and completes every item the disk holds (the journal that records
 * them finds room), and once the queue is drained new items are accepted again. */
static int case_enospc_self_restart(void)
{
    char mnt[700];
    if (!tmpfs_daemon_start("6m", mnt, sizeof(mnt)))
        return SKIP_CODE;
    natsConnection *nc = h_connect();
    book_t bk;
    book_one_lane(&bk, "esr", ES_N, 62, 1000);
    size_t next = fill_until_full(nc, &bk, 0, 3);
    size_t accepted = book_accepted(&bk, 0, next);
    H_REQUIRE(accepted > 100, "only %zu items fitted", accepted);
    h_log("%zu items accepted until the disk was full; SIGKILL and restart", accepted);
    h_daemon_kill();
    h_daemon_restart();
    h_consumer_t c;
    h_consumer_register(&c, nc, MODEL, 32, 65536, 0, "enospc-restart");
    /* Half of them, then another kill and start on the still full disk. */
    size_t got = drain_some(&c, &bk, 32, 65536, accepted / 2);
    H_REQUIRE(h_daemon_running(), "the daemon stopped at its first deliveries after a restart");
    h_consumer_close(&c);
    h_daemon_kill();
    h_daemon_restart();
    got += drain_once(nc, &bk, "enospc-restart-2");
    H_REQUIRE(h_daemon_running(), "the daemon stopped at its first deliveries after a restart");
    H_REQUIRE(got == accepted, "drained %zu items after the restarts, %zu were accepted", got,
              accepted);
    require_delivered_once(&bk, next);
    size_t again = 0;
    refill_after_drain(nc, &bk, next, &again, 10000);
    book_free(&bk);
    finish(nc);
    return 0;
}

/* ---- main -------------------------------------------------------------------------------------
 */

static const struct {
    const char *name;
    int (*fn)(void);
} CASES[] = {
    {"round_trip", case_round_trip},
    {"two_consumers_same_shape", case_two_consumers_same_shape},
    {"consumer_sigkill", case_consumer_sigkill},
    {"dead_inbox", case_dead_inbox},
    {"nats_closed", case_nats_closed},
    {"enospc_self_restart", case_enospc_self_restart},
    {"consumer_sigstop_stale_ack", case_consumer_sigstop_stale_ack},
    {"daemon_sigkill_restart", case_daemon_sigkill_restart},
    {"bad_input", case_bad_input},
    {"retried_submit_dedupe", case_retried_submit_dedupe},
    {"ack_deadline_and_dead_letter", case_ack_deadline_and_dead_letter},
    {"enospc", case_enospc},
    {"enospc_self", case_enospc_self},
    {"enospc_rollover", case_enospc_rollover},
};

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "__consumer") == 0)
        return h_child_main(argc, argv);
    size_t n_cases = sizeof(CASES) / sizeof(CASES[0]);
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < n_cases; i++)
            printf("%s\n", CASES[i].name);
        return 0;
    }
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: test_daemon CASE PATH_TO_LANESCHED [PATH_TO_NATS_SERVER]\n"
                        "       test_daemon list\n");
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
    fprintf(stderr, "test_daemon: unknown case '%s' (try 'test_daemon list')\n", argv[1]);
    return 2;
}
