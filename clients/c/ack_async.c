/*
 * ack_async.c - acks that need not wait: lc_ack_async_send publishes an Ack into the consumer's
 * request window (window.c) and returns; each AckReply is read on the consumer's own thread the
 * next time it enters the library, settles the in-progress set and reaches config.ack_done.
 *
 * Owns: the consumer's acks window, opened at the first asynchronous ack (client_int.h, 5).
 *
 * Invariants:
 *  1. An AckReply updates the in-progress set exactly as lc_ack_send's does (the positions are
 *     read back from the Ack's own bytes, kept by the window for resends); an Ack given up takes
 *     its batch out of the set, so the daemon's deadline returns it instead of heartbeats keeping
 *     it forever: at least once, never lost.
 *  2. The window's callbacks run on the consumer's driving thread (window.c invariant 4), so
 *     they may touch the consumer's caller-thread state (the statistics are taken under mu).
 *  3. Before Bye the outstanding acks are waited for (bounded): a Bye overtaking them would
 *     return batches that were in fact done.
 *
 * Rejected alternatives:
 *  - Fire-and-forget acks (lc_ack_send with timeout 0): nothing tells the consumer that the
 *    tombstones are durable or that an ack named an unknown batch.
 *  - Replies on the batches' inbox: lc_batch_next would have to tell AckReplies from Batches;
 *    the window's inbox of its own keeps both streams apart.
 */
#include "clients/c/client_int.h"

#include <stdlib.h>

#define LC_ACK_WINDOW 64u

static void lc_ack_async_settle(void *ctx, const lc_window_done_t *w)
{
    lc_consumer_t *c = ctx;
    lc_status_t status = w->status;
    lc_ack_reply_t out = {0};
    codec_ack_t *ack = NULL;
    codec_ack_reply_t *reply = NULL;
    uint64_t batch_id = w->aux;
    if (codec_decode_ack(w->buf, w->len, &ack) != CODEC_OK)
        ack = NULL; /* our own bytes: only out of memory can fail, settled as unknown below */
    if (status == LC_OK) {
        codec_status_t cs = codec_decode_ack_reply(natsMsg_GetData(w->msg),
                                                   (size_t)natsMsg_GetDataLength(w->msg), &reply);
        if (cs != CODEC_OK) {
            status = lc_codec_fail(c->err, c->reg.ack_subject, "AckReply", cs);
        } else if (reply->error[0] != '\0') {
            lc_errf(c->err, "%s: batch %llu: %s", c->reg.ack_subject, (unsigned long long)batch_id,
                    reply->error);
            status = lc_code_is(reply->error, "unknown_batch")      ? LC_EUNKNOWN_BATCH
                     : lc_code_is(reply->error, "unknown_consumer") ? LC_EUNKNOWN_CONSUMER
                                                                    : LC_EREFUSED;
        } else {
            out = (lc_ack_reply_t){reply->acked, reply->returned, reply->unknown};
        }
    } else {
        lc_errf(c->err, "%s: batch %llu: no AckReply after %u attempts", c->reg.ack_subject,
                (unsigned long long)batch_id, w->attempts);
    }
    if (status == LC_OK && ack != NULL)
        lc_inprogress_settle(c, ack, false);
    else if (status == LC_EUNKNOWN_BATCH && ack != NULL)
        lc_inprogress_settle(c, ack, true);
    else if (status != LC_OK)
        lc_inprogress_remove(c, batch_id); /* invariant 1 */
    if (status != LC_OK) {
        pthread_mutex_lock(&c->mu);
        c->stats.acks_async_failed++;
        pthread_mutex_unlock(&c->mu);
    }
    if (c->config.ack_done != NULL)
        c->config.ack_done(c->config.ack_closure, batch_id, status, status == LC_OK ? &out : NULL);
    codec_ack_reply_destroy(reply);
    codec_ack_destroy(ack);
}

lc_status_t lc_ack_async_send(lc_consumer_t *consumer, const codec_ack_t *ack)
{
    lc_status_t status = LC_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (consumer == NULL || ack == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "ack: %s", ack == NULL ? "NULL ack" : "not registered");
        return LC_EINVAL;
    }
    lc_consumer_t *c = consumer;
    const lc_consumer_config_t *k = &c->config;
    if (c->acks == NULL) {
        status = lc_window_open(
            c->client->nc, c->client->inbox_prefix, k->ack_window ? k->ack_window : LC_ACK_WINDOW,
            k->request_timeout_ms, k->request_retries, lc_ack_async_settle, c, c->err, &c->acks);
        if (status != LC_OK)
            return status;
    }
    codec_status_t cs = codec_encode_ack(ack, &buf, &len);
    if (cs != CODEC_OK)
        return lc_codec_fail(c->err, NULL, "ack: encode", cs);
    status = lc_window_send(c->acks, c->reg.ack_subject, buf, len, 0, ack->batch_id,
                            k->request_timeout_ms * (int64_t)(1 + k->request_retries), c->err);
    if (status == LC_OK) {
        pthread_mutex_lock(&c->mu);
        c->stats.acks_async++;
        pthread_mutex_unlock(&c->mu);
    }
    return status;
}

lc_status_t lc_ack_async_all_send(lc_consumer_t *consumer, uint64_t batch_id)
{
    codec_ack_t ack = {.batch_id = batch_id, .all = true};
    return lc_ack_async_send(consumer, &ack);
}

lc_status_t lc_ack_async_complete(lc_consumer_t *consumer, int64_t timeout_ms)
{
    if (consumer == NULL)
        return LC_EINVAL;
    if (consumer->acks == NULL)
        return LC_OK;
    lc_status_t status = lc_window_drain(consumer->acks, timeout_ms > 0 ? timeout_ms : 1);
    if (status != LC_OK)
        lc_errf(consumer->err, "%zu acks still outstanding after %lld ms",
                lc_window_pending(consumer->acks), (long long)timeout_ms);
    return status;
}

void lc_ack_async_poll(lc_consumer_t *c)
{
    if (c->acks != NULL)
        lc_window_poll(c->acks, 0);
}

void lc_ack_async_close(lc_consumer_t *c, bool wait)
{
    if (c->acks == NULL)
        return;
    const lc_consumer_config_t *k = &c->config;
    if (wait)
        lc_window_drain(c->acks, k->request_timeout_ms * (int64_t)(1 + k->request_retries));
    lc_window_close(c->acks);
    c->acks = NULL;
}
