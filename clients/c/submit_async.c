/*
 * submit_async.c - asynchronous submits: lc_submit_async publishes a Submit into the client's
 * request window (window.c) and returns; each SubmitReply is read back into per-item verdicts and
 * handed to the caller's `done` callback with the caller's tag.
 *
 * Owns: the client's window and the results scratch array the callback borrows (client_int.h, 5).
 *
 * Invariants:
 *  1. Every lc_submit_async that returned LC_OK reaches `done` exactly once: with the reply's
 *     verdicts, with the reason its reply did not read (LC_ECODEC, LC_EREFUSED, LC_EPROTO), or
 *     given up (LC_ETIMEOUT, LC_ENORESPONDERS; also at lc_client_close).
 *  2. Results are checked as lc_submit_request checks them (one per item, every status known)
 *     before `done` sees them; nothing half-read is reported as LC_OK.
 *  3. A Submit is encoded once (lc_submit_encode, shared with submit.c) and every resend repeats
 *     its bytes (window.c invariant 3): a retry is safe under the daemon's dedupe.
 *
 * Rejected alternatives:
 *  - Copying the items to re-encode a retry: the encoded bytes are all a resend needs.
 *  - Counting accepted items in the library: the callback sees every verdict and the caller
 *    counts what it cares about.
 */
#include "clients/c/client_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LC_ASYNC_WINDOW     64u
#define LC_ASYNC_TIMEOUT_MS 5000

struct lc_submit_async {
    lc_submit_async_config_t config;
    lc_window_t *window;
    lc_item_result_t *results; /* scratch for done, grown as needed (under the window's mu) */
    size_t cap_results;
};

void lc_submit_async_config_init(lc_submit_async_config_t *config)
{
    memset(config, 0, sizeof(*config));
}

/* Reads a SubmitReply for n items into a->results; the status and, on failure, the text. */
static lc_status_t lc_async_read(lc_submit_async_t *a, natsMsg *msg, size_t n,
                                 lc_submit_summary_t *sum, char *err)
{
    codec_submit_reply_t *reply = NULL;
    lc_status_t status = LC_OK;
    codec_status_t cs =
        codec_decode_submit_reply(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(err, NULL, "SubmitReply", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(err, "refused: %s", reply->error);
        status = LC_EREFUSED;
        goto out;
    }
    if (reply->n_results != n) {
        lc_errf(err, "%zu results for %zu items", reply->n_results, n);
        status = LC_EPROTO;
        goto out;
    }
    if (n > a->cap_results) {
        lc_item_result_t *r = realloc(a->results, n * sizeof(*r));
        if (r == NULL) {
            lc_errf(err, "SubmitReply: out of memory");
            status = LC_ENOMEM;
            goto out;
        }
        a->results = r;
        a->cap_results = n;
    }
    for (size_t i = 0; i < n; i++) {
        const codec_item_result_t *r = &reply->results[i];
        if (r->status == CODEC_ITEM_ACCEPTED)
            sum->accepted++;
        else if (r->status == CODEC_ITEM_DUPLICATE)
            sum->duplicates++;
        else if (r->status == CODEC_ITEM_REJECTED)
            sum->rejected++;
        else {
            lc_errf(err, "item %zu has unknown status %d", i, (int)r->status);
            status = LC_EPROTO;
            goto out;
        }
        a->results[i].status = r->status;
        snprintf(a->results[i].reason, sizeof(a->results[i].reason), "%s", r->reason);
    }
out:
    codec_submit_reply_destroy(reply);
    return status;
}

static void lc_async_settle(void *ctx, const lc_window_done_t *w)
{
    lc_submit_async_t *a = ctx;
    char err[LC_ERR_MAX] = "";
    lc_submit_done_t done = {.tag = w->tag,
                             .status = w->status,
                             .n = (size_t)w->aux,
                             .summary = {.attempts = w->attempts},
                             .error = err,
                             .latency_ns = w->latency_ns};
    if (w->status == LC_OK) {
        done.status = lc_async_read(a, w->msg, done.n, &done.summary, err);
        if (done.status == LC_OK)
            done.results = a->results;
        else
            done.summary = (lc_submit_summary_t){.attempts = w->attempts};
    } else if (w->closed) {
        lc_errf(err, "the client closed before the SubmitReply came (the items may be stored)");
    } else {
        lc_errf(err, "no SubmitReply after %u attempts%s", w->attempts,
                w->status == LC_ENORESPONDERS ? ": no daemon listens" : "");
    }
    a->config.done(a->config.closure, &done);
}

lc_status_t lc_submit_async_open(lc_client_t *client, const lc_submit_async_config_t *config)
{
    if (client == NULL || config == NULL || config->done == NULL || client->async != NULL) {
        if (client != NULL)
            lc_errf(client->err, "submit async: %s",
                    client->async != NULL ? "already open" : "needs a done callback");
        return LC_EINVAL;
    }
    lc_submit_async_t *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        lc_errf(client->err, "submit async: out of memory");
        return LC_ENOMEM;
    }
    a->config = *config;
    if (a->config.window == 0)
        a->config.window = LC_ASYNC_WINDOW;
    if (a->config.timeout_ms <= 0)
        a->config.timeout_ms = LC_ASYNC_TIMEOUT_MS;
    if (a->config.stall_ms <= 0)
        a->config.stall_ms = a->config.timeout_ms * (int64_t)(1 + a->config.retries);
    lc_status_t st =
        lc_window_open(client->nc, client->inbox_prefix, a->config.window, a->config.timeout_ms,
                       a->config.retries, lc_async_settle, a, client->err, &a->window);
    if (st != LC_OK) {
        free(a);
        return st;
    }
    client->async = a;
    return LC_OK;
}

static lc_status_t lc_async_get(lc_client_t *client, lc_submit_async_t **out)
{
    if (client == NULL || client->async == NULL) {
        if (client != NULL)
            lc_errf(client->err, "submit async: lc_submit_async_open first");
        return LC_EINVAL;
    }
    *out = client->async;
    return LC_OK;
}

lc_status_t lc_submit_async(lc_client_t *client, const char *model, const codec_work_item_t *items,
                            size_t n, uint64_t tag)
{
    lc_submit_async_t *a = NULL;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    lc_status_t status = lc_async_get(client, &a);
    if (status == LC_OK)
        status = lc_submit_encode(client, model, items, n, &subject, &buf, &len);
    if (status == LC_OK)
        status = lc_window_send(a->window, subject, buf, len, tag, (uint64_t)n, a->config.stall_ms,
                                client->err);
    free(subject);
    return status;
}

lc_status_t lc_submit_async_poll(lc_client_t *client)
{
    lc_submit_async_t *a = NULL;
    lc_status_t status = lc_async_get(client, &a);
    if (status == LC_OK)
        lc_window_poll(a->window, 0);
    return status;
}

lc_status_t lc_submit_async_complete(lc_client_t *client, int64_t timeout_ms)
{
    lc_submit_async_t *a = NULL;
    lc_status_t status = lc_async_get(client, &a);
    if (status == LC_OK && timeout_ms <= 0) {
        lc_errf(client->err, "submit async complete: timeout_ms must be > 0");
        status = LC_EINVAL;
    }
    if (status == LC_OK && (status = lc_window_drain(a->window, timeout_ms)) != LC_OK)
        lc_errf(client->err, "%zu submits still outstanding after %lld ms",
                lc_window_pending(a->window), (long long)timeout_ms);
    return status;
}

size_t lc_submit_async_pending(lc_client_t *client)
{
    return client != NULL && client->async != NULL ? lc_window_pending(client->async->window) : 0;
}

void lc_submit_async_close(lc_client_t *client)
{
    lc_submit_async_t *a = client->async;
    if (a == NULL)
        return;
    lc_window_close(a->window);
    free(a->results);
    free(a);
    client->async = NULL;
}
