/*
 * submit.c - the producer's two calls: lc_submit_send (fire-and-forget) and lc_submit_request
 * (request/reply with bounded retries), both one Submit message on <prefix>.submit.<model>.
 *
 * Owns nothing beyond one call: the encoded message and its subject live for the call only.
 *
 * Invariants:
 *  1. The Submit is built by codec_encode_submit and the reply read by codec_decode_submit_reply;
 *     nothing here knows a field number.
 *  2. A message is encoded once and every retry sends those bytes (connection.c invariant 2):
 *     the same item ids, so the daemon's dedupe answers DUPLICATE for what a lost attempt stored.
 *  3. Results and summary are written only on LC_OK and only after the whole reply checked out
 *     (one result per item, every status known); a per-item rejection is a result, not a failure.
 *  4. The caller's items are never modified: defaults (model, created_unix_ns) go into a copy.
 *
 * Rejected alternatives:
 *  - Re-encoding a Submit on retry with a fresh created_unix_ns: a different message for the same
 *    item, and an encode per attempt for nothing.
 *  - Checking the items here (tokens, id length, shape): the daemon's validation is the one home
 *    of those rules, and a test producer must be able to send what the daemon will reject.
 */
#include "clients/c/client_int.h"

#include "common/clock.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lc_status_t lc_submit_encode(lc_client_t *client, const char *model, const codec_work_item_t *items,
                             size_t n, char **out_subject, uint8_t **out_buf, size_t *out_len)
{
    lc_status_t status = LC_OK;
    codec_work_item_t *copy = NULL;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;

    if (client == NULL || items == NULL || n == 0 || !lc_subject_part_ok(model)) {
        if (client != NULL)
            lc_errf(client->err, "submit: %s", items == NULL || n == 0 ? "no items" : "bad model");
        status = LC_EINVAL;
        goto out;
    }
    copy = malloc(n * sizeof(*copy));
    subject = lc_subject_make(client->prefix, "submit", model);
    if (copy == NULL || subject == NULL) {
        lc_errf(client->err, "submit: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    uint64_t now = clock_wall_ns();
    for (size_t i = 0; i < n; i++) {
        copy[i] = items[i];
        if (copy[i].model == NULL || copy[i].model[0] == '\0') {
            copy[i].model = model;
            copy[i].model_len = 0; /* the subject's model, whole */
        }
        if (copy[i].created_unix_ns == 0)
            copy[i].created_unix_ns = now;
    }
    codec_submit_t msg = {.items = copy, .n_items = n};
    codec_status_t cs = codec_encode_submit(&msg, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(client->err, NULL, "submit: encode", cs);
        goto out;
    }
    *out_subject = subject;
    *out_buf = buf;
    *out_len = len;
    subject = NULL;
    buf = NULL;
out:
    free(copy);
    free(subject);
    free(buf);
    return status;
}

lc_status_t lc_submit_send(lc_client_t *client, const char *model, const codec_work_item_t *items,
                           size_t n)
{
    lc_status_t status = LC_OK;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;

    status = lc_submit_encode(client, model, items, n, &subject, &buf, &len);
    if (status != LC_OK)
        goto out;
    if (len > INT_MAX) {
        lc_errf(client->err, "%s: message of %zu bytes", subject, len);
        status = LC_ETOOBIG;
        goto out;
    }
    natsStatus s = natsConnection_Publish(client->nc, subject, buf, (int)len);
    if (s != NATS_OK)
        status = lc_nats_fail(client->err, subject, s);
out:
    free(subject);
    free(buf);
    return status;
}

lc_status_t lc_submit_request(lc_client_t *client, const char *model,
                              const codec_work_item_t *items, size_t n, int64_t timeout_ms,
                              uint32_t retries, lc_item_result_t *results,
                              lc_submit_summary_t *summary)
{
    lc_status_t status = LC_OK;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    natsMsg *msg = NULL;
    codec_submit_reply_t *reply = NULL;
    lc_submit_summary_t sum = {0};

    if (timeout_ms <= 0) {
        if (client != NULL)
            lc_errf(client->err, "submit: timeout_ms must be > 0");
        status = LC_EINVAL;
        goto out;
    }
    status = lc_submit_encode(client, model, items, n, &subject, &buf, &len);
    if (status != LC_OK)
        goto out;
    status = lc_request_do(client->nc, subject, buf, len, timeout_ms, retries, client->err,
                           &sum.attempts, &msg);
    if (status != LC_OK)
        goto out;
    codec_status_t cs =
        codec_decode_submit_reply(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(client->err, subject, "SubmitReply", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(client->err, "%s: refused: %s", subject, reply->error);
        status = LC_EREFUSED;
        goto out;
    }
    if (reply->n_results != n) {
        lc_errf(client->err, "%s: %zu results for %zu items", subject, reply->n_results, n);
        status = LC_EPROTO;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const codec_item_result_t *r = &reply->results[i];
        if (r->status == CODEC_ITEM_ACCEPTED)
            sum.accepted++;
        else if (r->status == CODEC_ITEM_DUPLICATE)
            sum.duplicates++;
        else if (r->status == CODEC_ITEM_REJECTED)
            sum.rejected++;
        else {
            lc_errf(client->err, "%s: item %zu has unknown status %d", subject, i, (int)r->status);
            status = LC_EPROTO;
            goto out;
        }
    }
    if (results != NULL) {
        for (size_t i = 0; i < n; i++) {
            results[i].status = reply->results[i].status;
            snprintf(results[i].reason, sizeof(results[i].reason), "%s", reply->results[i].reason);
        }
    }
    if (summary != NULL)
        *summary = sum;
out:
    codec_submit_reply_destroy(reply);
    natsMsg_Destroy(msg);
    free(subject);
    free(buf);
    return status;
}
