/*
 * msg.c - plain NATS messages on the client's connection: lc_msg_publish, lc_msg_request,
 * lc_msg_inbox_make and the synchronous subscriptions lc_sub_*. What a program around lanesched
 * needs beside the contract's own messages (a worker publishing a result on an item's reply_to,
 * a producer listening for results, a P.stats request), for bindings whose language has no NATS
 * client of its own.
 *
 * Owns: per subscription, the nats.c subscription; every message body and subject handed out is
 * a malloc'd copy the caller releases with lc_free.
 *
 * Invariants:
 *  1. Nothing returned points into a natsMsg: each message is copied and destroyed here, so a
 *     binding never holds nats.c memory.
 *  2. A subscription keeps every message until read (no pending limit): a result is never
 *     dropped because its reader was slow.
 *  3. A subscription is destroyed in the order of lc_sub_destroy (nats.c issue #637).
 *  4. lc_msg_publish refuses a subject with a space or a control character
 *     (codec_subject_bytes_ok).
 *
 * Rejected alternatives:
 *  - Handing natsMsg pointers to the caller: a binding would then need nats.c's API as well.
 *  - Asynchronous subscriptions with callbacks: a callback on nats.c's thread into an interpreter
 *    needs its lock; a blocking next() called from the binding's own thread does not.
 */
#include "clients/c/client_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct lc_sub {
    lc_client_t *client; /* borrowed */
    natsSubscription *sub;
};

/* Copies of a message's subject and body (invariant 1); false when out of memory. */
static bool lc_msg_copy(natsMsg *msg, char **out_subject, uint8_t **out_data, size_t *out_len)
{
    size_t len = (size_t)natsMsg_GetDataLength(msg);
    uint8_t *data = malloc(len > 0 ? len : 1);
    char *subject = out_subject != NULL ? strdup(natsMsg_GetSubject(msg)) : NULL;
    if (data == NULL || (out_subject != NULL && subject == NULL)) {
        free(data);
        free(subject);
        return false;
    }
    if (len > 0)
        memcpy(data, natsMsg_GetData(msg), len);
    if (out_subject != NULL)
        *out_subject = subject;
    *out_data = data;
    *out_len = len;
    return true;
}

lc_status_t lc_msg_publish(lc_client_t *client, const char *subject, const void *data, size_t len)
{
    if (client == NULL || subject == NULL || (data == NULL && len > 0) || len > INT_MAX)
        return LC_EINVAL;
    /* nats.c sends a subject as it is: a worker publishing on an item's reply_to would otherwise
     * register or pull for whoever wrote it */
    if (subject[0] == '\0' || !codec_subject_bytes_ok(subject, strlen(subject))) {
        lc_errf(client->err, "bad_subject: a subject is not empty and holds no space or control "
                             "character; not published");
        return LC_EINVAL;
    }
    natsStatus s = natsConnection_Publish(client->nc, subject, data, (int)len);
    if (s != NATS_OK)
        return lc_nats_fail(client->err, subject, s);
    return LC_OK;
}

lc_status_t lc_msg_request(lc_client_t *client, const char *subject, const void *data, size_t len,
                           int64_t timeout_ms, uint8_t **out_data, size_t *out_len)
{
    lc_status_t status = LC_OK;
    natsMsg *msg = NULL;
    if (client == NULL || subject == NULL || (data == NULL && len > 0) || timeout_ms <= 0 ||
        out_data == NULL || out_len == NULL) {
        if (client != NULL)
            lc_errf(client->err, "request: bad argument");
        return LC_EINVAL;
    }
    status = lc_request_do(client->nc, subject, data, len, timeout_ms, 0, client->err, NULL, &msg);
    if (status != LC_OK)
        goto out;
    if (!lc_msg_copy(msg, NULL, out_data, out_len)) {
        lc_errf(client->err, "%s: out of memory", subject);
        status = LC_ENOMEM;
    }
out:
    natsMsg_Destroy(msg);
    return status;
}

lc_status_t lc_msg_inbox_make(lc_client_t *client, char **out)
{
    if (client == NULL || out == NULL)
        return LC_EINVAL;
    natsStatus s = lc_inbox_make(client->inbox_prefix, out);
    if (s != NATS_OK)
        return lc_nats_fail(client->err, "inbox", s);
    return LC_OK;
}

lc_status_t lc_sub_open(lc_client_t *client, const char *subject, lc_sub_t **out)
{
    if (client == NULL || subject == NULL || out == NULL)
        return LC_EINVAL;
    lc_sub_t *sub = calloc(1, sizeof(*sub));
    if (sub == NULL) {
        lc_errf(client->err, "subscribe: out of memory");
        return LC_ENOMEM;
    }
    sub->client = client;
    natsStatus s = natsConnection_SubscribeSync(&sub->sub, client->nc, subject);
    if (s == NATS_OK) /* invariant 2 */
        s = natsSubscription_SetPendingLimits(sub->sub, -1, -1);
    if (s != NATS_OK) {
        lc_status_t status = lc_nats_fail(client->err, subject, s);
        lc_sub_close(sub);
        return status;
    }
    *out = sub;
    return LC_OK;
}

lc_status_t lc_sub_next(lc_sub_t *sub, int64_t timeout_ms, char **out_subject, uint8_t **out_data,
                        size_t *out_len)
{
    if (sub == NULL || out_subject == NULL || out_data == NULL || out_len == NULL)
        return LC_EINVAL;
    natsMsg *msg = NULL;
    natsStatus s = natsSubscription_NextMsg(&msg, sub->sub, timeout_ms > 0 ? timeout_ms : 0);
    if (s == NATS_TIMEOUT)
        return LC_ETIMEOUT;
    if (s != NATS_OK)
        return lc_nats_fail(sub->client->err, "subscription", s);
    lc_status_t status = LC_OK;
    if (!lc_msg_copy(msg, out_subject, out_data, out_len)) {
        lc_errf(sub->client->err, "subscription: out of memory");
        status = LC_ENOMEM;
    }
    natsMsg_Destroy(msg);
    return status;
}

void lc_sub_close(lc_sub_t *sub)
{
    if (sub == NULL)
        return;
    lc_sub_destroy(sub->client->nc, sub->sub); /* invariant 3 */
    free(sub);
}
