/*
 * pull.c - pulls and batches: lc_pull_send publishes a Pull with the consumer's inbox as its reply
 * subject and records its credits; lc_batch_next waits on the inbox for the next Batch, pulling
 * first when nothing is outstanding, and keeps the pull queue in step with what arrives.
 *
 * Owns: the pull queue's entries (struct lc_consumer's pulls, caller's thread only).
 *
 * Invariants:
 *  1. The pull queue holds the outstanding pulls in send order, each with its remaining credits
 *     (the daemon serves a consumer's pulls in order): an OK batch spends one credit of the head,
 *     which leaves at zero; an EXPIRED batch closes the head; unknown_consumer closes them all;
 *     a pull silent one grace second past its expiry is forgotten.
 *  2. Pull is built by codec_encode_pull and every Batch read by codec_decode_batch.
 *  3. A delivered OK batch enters the in-progress set before it reaches the caller, so the next
 *     heartbeat names it; if it cannot enter (out of memory), it is not delivered.
 *  4. *out is written only on LC_OK, with a status OK batch.
 *  5. With config.prefetch, the credits outstanding are topped up to prefetch whenever half or
 *     more were used, in one Pull: the daemon always holds credits to pack the next batches
 *     into while the caller serves this one, at one Pull per prefetch / 2 batches.
 *  6. While asynchronous acks are outstanding, the wait for a batch is cut in LC_ACK_POLL_MS
 *     slices and their replies are read between them: an AckReply reaches ack_done (and the
 *     in-progress set) within a slice, not at the end of the wait for the next batch.
 *
 * Rejected alternatives:
 *  - natsConnection_Request for pulls: one Pull has several answers and Request keeps the first
 *    only. One inbox per consumer subscribed once carries every pull's batches (the contract
 *    allows several outstanding pulls on one reply subject), with no subscribe churn per pull.
 *  - An asynchronous subscription with a callback delivering batches: the caller would need a
 *    queue and a thread handoff of its own; a synchronous subscription is that queue already.
 *  - Prefetch by one Pull per batch: a Pull message and a pull record in the daemon per batch
 *    for nothing; topping up at half keeps as many credits outstanding with fewer messages.
 *  - Checking the packing promises here: a consumer that cares verifies them itself, as
 *    lanesched-consume does; the library delivers what the daemon sent.
 */
#include "clients/c/client_int.h"

#include "common/clock.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The daemon's default for Pull.expires_ms == 0 (subjects.md, the pull section). */
#define LC_PULL_EXPIRES_MS 30000u
/* After a pull's expiry, how long its EXPIRED answer may take to arrive: the daemon's timers run
 * at least every 100 ms and a turn's fill lasts at most 100 ms, so 1 s is a wide margin. */
#define LC_PULL_GRACE_MS 1000
/* Invariant 6's slice: an AckReply waits at most this long for its callback, and a consumer with
 * acks in flight wakes at most this often while it waits for work. */
#define LC_ACK_POLL_MS 2

void lc_pulls_forget(lc_consumer_t *c, size_t n)
{
    if (n > c->n_pulls)
        n = c->n_pulls;
    if (n < c->n_pulls)
        memmove(c->pulls, c->pulls + n, (c->n_pulls - n) * sizeof(*c->pulls));
    c->n_pulls -= n;
}

lc_status_t lc_pull_send(lc_consumer_t *consumer, uint32_t max_batches, uint32_t expires_ms)
{
    lc_status_t status = LC_OK;
    uint8_t *buf = NULL;
    size_t len = 0;

    if (consumer == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "pull: not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    if (c->n_pulls == c->cap_pulls) {
        size_t cap = c->cap_pulls == 0 ? 4 : c->cap_pulls * 2;
        lc_pull_t *pulls = realloc(c->pulls, cap * sizeof(*pulls));
        if (pulls == NULL) {
            lc_errf(c->err, "pull: out of memory");
            status = LC_ENOMEM;
            goto out;
        }
        c->pulls = pulls;
        c->cap_pulls = cap;
    }
    codec_pull_t pull = {.max_batches = max_batches, .expires_ms = expires_ms};
    codec_status_t cs = codec_encode_pull(&pull, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, NULL, "pull: encode", cs);
        goto out;
    }
    natsStatus s =
        natsConnection_PublishRequest(c->client->nc, c->reg.pull_subject, c->inbox, buf, (int)len);
    if (s != NATS_OK) {
        status = lc_nats_fail(c->err, c->reg.pull_subject, s);
        goto out;
    }
    uint64_t expires = expires_ms > 0 ? expires_ms : LC_PULL_EXPIRES_MS;
    c->pulls[c->n_pulls++] =
        (lc_pull_t){.credits = max_batches > 0 ? max_batches : 1,
                    .lost_after_ns = clock_mono_ns() + (expires + LC_PULL_GRACE_MS) * 1000000ull};
    pthread_mutex_lock(&c->mu);
    c->stats.pulls_sent++;
    pthread_mutex_unlock(&c->mu);
out:
    free(buf);
    return status;
}

/* Forgets the pulls silent past their expiry + grace; returns how many. */
static uint64_t lc_pulls_expire(lc_consumer_t *c, uint64_t now_ns)
{
    size_t kept = 0;
    uint64_t lost = 0;
    for (size_t i = 0; i < c->n_pulls; i++) {
        if (c->pulls[i].lost_after_ns <= now_ns)
            lost++;
        else
            c->pulls[kept++] = c->pulls[i];
    }
    c->n_pulls = kept;
    return lost;
}

lc_status_t lc_batch_next(lc_consumer_t *consumer, int64_t timeout_ms, codec_batch_t **out)
{
    lc_status_t status = LC_OK;
    natsMsg *msg = NULL;
    codec_batch_t *batch = NULL;

    if (consumer == NULL || out == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "batch: %s", out == NULL ? "NULL out" : "not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    if (timeout_ms < 0)
        timeout_ms = 0;
    int64_t wait_ms = timeout_ms;
    lc_ack_async_poll(c);
    if (c->config.prefetch > 0) {
        uint64_t credits = 0;
        for (size_t i = 0; i < c->n_pulls; i++)
            credits += c->pulls[i].credits;
        if (credits * 2 <= c->config.prefetch) { /* invariant 5 */
            status = lc_pull_send(c, c->config.prefetch - (uint32_t)credits,
                                  c->config.prefetch_expires_ms);
            if (status != LC_OK)
                goto out;
        }
    } else if (c->n_pulls == 0) {
        uint32_t expires = timeout_ms < 1                     ? 1u
                           : timeout_ms > (int64_t)UINT32_MAX ? UINT32_MAX
                                                              : (uint32_t)timeout_ms;
        status = lc_pull_send(c, c->config.pull_max_batches, expires);
        if (status != LC_OK)
            goto out;
        wait_ms += LC_PULL_GRACE_MS;
    }
    uint64_t deadline = clock_mono_ns() + (uint64_t)wait_ms * 1000000ull;

    for (;;) {
        uint64_t now = clock_mono_ns();
        int64_t left_ms = now >= deadline ? 0 : (int64_t)((deadline - now + 999999) / 1000000);
        /* invariant 6: while acks are in flight, wait in slices and read their replies */
        bool acks = c->acks != NULL && lc_window_pending(c->acks) > 0;
        int64_t slice = acks && left_ms > LC_ACK_POLL_MS ? LC_ACK_POLL_MS : left_ms;
        natsStatus s = natsSubscription_NextMsg(&msg, c->sub, slice);
        if (s == NATS_TIMEOUT && slice < left_ms) {
            lc_ack_async_poll(c);
            continue;
        }
        if (s == NATS_TIMEOUT) {
            uint64_t lost = lc_pulls_expire(c, clock_mono_ns());
            if (lost > 0) {
                pthread_mutex_lock(&c->mu);
                c->stats.pulls_lost += lost;
                pthread_mutex_unlock(&c->mu);
            }
            lc_errf(c->err, "no batch within %lld ms", (long long)wait_ms);
            status = LC_ETIMEOUT;
            goto out;
        }
        if (s == NATS_NO_RESPONDERS) {
            lc_pulls_forget(c, 1);
            status = lc_nats_fail(c->err, c->reg.pull_subject, s);
            goto out;
        }
        if (s != NATS_OK) {
            status = lc_nats_fail(c->err, "consumer inbox", s);
            goto out;
        }
        codec_status_t cs =
            codec_decode_batch(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &batch);
        natsMsg_Destroy(msg);
        msg = NULL;
        if (cs != CODEC_OK) {
            status = lc_codec_fail(c->err, NULL, "batch", cs);
            goto out;
        }
        break;
    }

    switch (batch->status) {
    case CODEC_BATCH_OK:
        if (c->n_pulls > 0 && --c->pulls[0].credits == 0)
            lc_pulls_forget(c, 1);
        pthread_mutex_lock(&c->mu);
        status = lc_inprogress_put(c, batch->batch_id,
                                   batch->n_items > UINT32_MAX ? 0 : (uint32_t)batch->n_items);
        if (status == LC_OK)
            c->stats.batches++;
        pthread_mutex_unlock(&c->mu);
        if (status != LC_OK) {
            lc_errf(c->err, "batch %llu: out of memory", (unsigned long long)batch->batch_id);
            goto out;
        }
        *out = batch;
        batch = NULL;
        break;
    case CODEC_BATCH_EXPIRED:
        lc_pulls_forget(c, 1);
        pthread_mutex_lock(&c->mu);
        c->stats.expired++;
        pthread_mutex_unlock(&c->mu);
        lc_errf(c->err, "pull expired without work");
        status = LC_EEMPTY;
        break;
    case CODEC_BATCH_ERROR:
        if (lc_code_is(batch->error, "unknown_consumer")) {
            lc_pulls_forget(c, c->n_pulls);
            lc_errf(c->err, "%s: unknown_consumer", c->reg.pull_subject);
            status = LC_EUNKNOWN_CONSUMER;
        } else {
            lc_pulls_forget(c, 1);
            lc_errf(c->err, "%s: batch error: %s", c->reg.pull_subject, batch->error);
            status = LC_EREFUSED;
        }
        break;
    default:
        lc_errf(c->err, "batch %llu: unknown status %d", (unsigned long long)batch->batch_id,
                (int)batch->status);
        status = LC_EPROTO;
        break;
    }
out:
    codec_batch_destroy(batch);
    natsMsg_Destroy(msg);
    return status;
}
