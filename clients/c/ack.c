/*
 * ack.c - settling batches: lc_ack_send publishes an Ack on the registration's ack subject, as a
 * request (waiting for the AckReply, sent once the daemon's tombstones are durable) or
 * fire-and-forget, and updates the in-progress set; lc_ack_all_send, lc_ack_nak_send and
 * lc_ack_progress_send build the three common Acks.
 *
 * Owns nothing beyond one call.
 *
 * Invariants:
 *  1. Ack is built by codec_encode_ack and AckReply read by codec_decode_ack_reply; an Ack is
 *     encoded once and a retry sends the same bytes (acks are idempotent, subjects.md).
 *  2. The in-progress set is updated only after the Ack went out: after a publish, after an
 *     AckReply without error, or after unknown_batch (the batch is no longer ours). Any other
 *     refusal leaves it as it was.
 *  3. *out is written only on LC_OK and only in request mode; the in-progress update after
 *     LC_EUNKNOWN_BATCH is the consumer's state, not a result.
 *  4. The AckReply's error is decided on its code word (up to the first ':'), never on the text.
 *
 * Rejected alternatives:
 *  - Dropping an id from the in-progress set when its Ack is sent, before the reply: a refused
 *    or lost Ack would leave a batch still ours unnamed by heartbeats, and its deadline would run
 *    out while the caller retries.
 *  - A nak helper taking a position list: lc_ack_send with codec_ack_t already does that; the
 *    helper covers the one common case, the whole batch back.
 */
#include "clients/c/client_int.h"

#include <limits.h>
#include <stdlib.h>

lc_status_t lc_ack_send(lc_consumer_t *consumer, const codec_ack_t *ack, int64_t timeout_ms,
                        lc_ack_reply_t *out)
{
    lc_status_t status = LC_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    natsMsg *msg = NULL;
    codec_ack_reply_t *reply = NULL;

    if (consumer == NULL || ack == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "ack: %s", ack == NULL ? "NULL ack" : "not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    const char *subject = c->reg.ack_subject;
    codec_status_t cs = codec_encode_ack(ack, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, NULL, "ack: encode", cs);
        goto out;
    }
    if (timeout_ms <= 0) {
        natsStatus s = len > INT_MAX
                           ? NATS_MAX_PAYLOAD
                           : natsConnection_Publish(c->client->nc, subject, buf, (int)len);
        if (s != NATS_OK) {
            status = lc_nats_fail(c->err, subject, s);
            goto out;
        }
        lc_inprogress_settle(c, ack, false);
        goto out;
    }
    status = lc_request_do(c->client->nc, subject, buf, len, timeout_ms, c->config.request_retries,
                           c->err, NULL, &msg);
    if (status != LC_OK)
        goto out;
    cs = codec_decode_ack_reply(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, subject, "AckReply", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(c->err, "%s: batch %llu: %s", subject, (unsigned long long)ack->batch_id,
                reply->error);
        if (lc_code_is(reply->error, "unknown_batch")) {
            lc_inprogress_settle(c, ack, true);
            status = LC_EUNKNOWN_BATCH;
        } else if (lc_code_is(reply->error, "unknown_consumer")) {
            status = LC_EUNKNOWN_CONSUMER;
        } else {
            status = LC_EREFUSED;
        }
        goto out;
    }
    lc_inprogress_settle(c, ack, false);
    if (out != NULL)
        *out = (lc_ack_reply_t){
            .acked = reply->acked, .returned = reply->returned, .unknown = reply->unknown};
out:
    codec_ack_reply_destroy(reply);
    natsMsg_Destroy(msg);
    free(buf);
    return status;
}

lc_status_t lc_ack_all_send(lc_consumer_t *consumer, uint64_t batch_id, int64_t timeout_ms,
                            lc_ack_reply_t *out)
{
    codec_ack_t ack = {.batch_id = batch_id, .all = true};
    return lc_ack_send(consumer, &ack, timeout_ms, out);
}

lc_status_t lc_ack_nak_send(lc_consumer_t *consumer, uint64_t batch_id, uint32_t n_items,
                            int64_t timeout_ms, lc_ack_reply_t *out)
{
    lc_status_t status = LC_OK;
    uint32_t *positions = NULL;

    if (n_items == 0 || (positions = malloc(n_items * sizeof(*positions))) == NULL) {
        if (consumer != NULL)
            lc_errf(consumer->err, "nak: %s", n_items == 0 ? "no items" : "out of memory");
        status = n_items == 0 ? LC_EINVAL : LC_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < n_items; i++)
        positions[i] = i;
    codec_ack_t ack = {.batch_id = batch_id, .nak = positions, .n_nak = n_items};
    status = lc_ack_send(consumer, &ack, timeout_ms, out);
out:
    free(positions);
    return status;
}

lc_status_t lc_ack_progress_send(lc_consumer_t *consumer, uint64_t batch_id, int64_t timeout_ms,
                                 lc_ack_reply_t *out)
{
    codec_ack_t ack = {.batch_id = batch_id, .in_progress = true};
    return lc_ack_send(consumer, &ack, timeout_ms, out);
}
