/*
 * consumer.c - a consumer's life cycle: lc_consumer_open (inbox, Register, heartbeat thread),
 * lc_consumer_register (again, after unknown_consumer), the registration and statistics getters,
 * lc_bye_send (leave) and lc_consumer_close. Pulls and batches are in pull.c, acks in ack.c, the
 * in-progress set in inprogress.c, the heartbeat thread in heartbeat.c.
 *
 * Owns: the consumer (client_int.h, 2): its configuration copies, inbox and subscription, the
 * registration strings, the pull queue's and in-progress set's arrays, mu and cond.
 *
 * Invariants:
 *  1. Register is built by codec_encode_register, sent on P.register.<model>, and Registered read
 *     by codec_decode_registered; every Registered subject is checked before any is installed.
 *  2. A registration is installed whole or not at all: the new strings are swapped in under mu
 *     (the heartbeat thread reads them) only once every one was copied, so a failed
 *     lc_consumer_register leaves the previous registration in place.
 *  3. Installing a registration, and Bye, forget every outstanding pull and clear the in-progress
 *     set: the old id's batches are no longer ours.
 *  4. The heartbeat thread is stopped before Bye is sent and before anything is freed
 *     (heartbeat.c invariant 1).
 *  5. *out is written only on LC_OK; a half-built consumer is freed through lc_consumer_free.
 *
 * Rejected alternatives:
 *  - Re-registering automatically on unknown_consumer: it would hide that the consumer's
 *    in-flight batches went back to the queue; the caller decides (lanesched-consume does).
 *  - Sending a Bye from lc_consumer_close: a caller that wants to look like a crash could not.
 *  - One inbox per registration: the inbox belongs to the consumer, not to its id, so a
 *    re-registration needs no new subscription.
 */
#include "clients/c/client_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Register, Ack and Bye replies come within one daemon turn plus a flush; 5 s is far beyond that
 * and still short enough for a person watching a tool. */
#define LC_REQUEST_TIMEOUT_MS 5000
/* Prefetched pulls expire after this long: an idle consumer sends one Pull per 5 s, and a
 * pull lost with a daemon restart is noticed (forgotten, then replaced) within 6 s. */
#define LC_PREFETCH_EXPIRES_MS 5000u
/* The contract's default heartbeat interval, used when Registered says 0. */
#define LC_HEARTBEAT_MS 2000u

void lc_consumer_config_init(lc_consumer_config_t *config)
{
    memset(config, 0, sizeof(*config));
}

/* Sends Register and installs the answer; failure text in err, registration unchanged. */
static lc_status_t lc_register_do(lc_consumer_t *c, char *err)
{
    lc_status_t status = LC_OK;
    lc_client_t *client = c->client;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    natsMsg *msg = NULL;
    codec_registered_t *reply = NULL;
    char *strings[5] = {NULL, NULL, NULL, NULL, NULL};

    /* P.register.<model>: an operator's permission on it is the authority over the model */
    subject = lc_subject_make(client->prefix, "register", c->model);
    if (subject == NULL) {
        lc_errf(err, "register: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    codec_register_t reg = {.model = c->model,
                            .max_batch_size = c->config.max_batch_size,
                            .max_batch_tokens = c->config.max_batch_tokens,
                            .max_input_tokens = c->config.max_input_tokens,
                            .name = c->name,
                            .batch_fixed_us = c->config.batch_fixed_us,
                            .token_ns = c->config.token_ns,
                            .cache_shapes = c->config.cache_shapes};
    codec_status_t cs = codec_encode_register(&reg, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(err, NULL, "register: encode", cs);
        goto out;
    }
    status = lc_request_do(client->nc, subject, buf, len, c->config.request_timeout_ms,
                           c->config.request_retries, err, NULL, &msg);
    if (status != LC_OK)
        goto out;
    cs = codec_decode_registered(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(err, NULL, "register: Registered", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(err, "register refused: %s", reply->error);
        status = LC_EREFUSED;
        goto out;
    }
    const char *fields[5] = {reply->consumer_id, reply->pull_subject, reply->ack_subject,
                             reply->heartbeat_subject, reply->bye_subject};
    static const char *const names[5] = {"consumer_id", "pull_subject", "ack_subject",
                                         "heartbeat_subject", "bye_subject"};
    for (int i = 0; i < 5; i++) {
        if (!lc_subject_part_ok(fields[i])) {
            lc_errf(err, "register: Registered.%s is \"%s\"", names[i], fields[i]);
            status = LC_EPROTO;
            goto out;
        }
        if ((strings[i] = strdup(fields[i])) == NULL) {
            lc_errf(err, "register: out of memory");
            status = LC_ENOMEM;
            goto out;
        }
    }

    /* Install (cannot fail from here): swap the strings under mu, the heartbeat thread reads
     * them; the old registration's pulls and batches are no longer ours. */
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < 5; i++) {
        char *old = c->reg_strings[i];
        c->reg_strings[i] = strings[i];
        strings[i] = old; /* freed at out */
    }
    c->reg = (lc_registered_t){.consumer_id = c->reg_strings[0],
                               .pull_subject = c->reg_strings[1],
                               .ack_subject = c->reg_strings[2],
                               .heartbeat_subject = c->reg_strings[3],
                               .bye_subject = c->reg_strings[4],
                               .heartbeat_ms = reply->heartbeat_ms,
                               .dead_after_ms = reply->dead_after_ms,
                               .ack_wait_ms = reply->ack_wait_ms};
    c->hb_interval_ms = c->config.heartbeat_ms > 0 ? c->config.heartbeat_ms
                        : reply->heartbeat_ms > 0  ? reply->heartbeat_ms
                                                   : LC_HEARTBEAT_MS;
    lc_inprogress_clear(c);
    c->stats.registrations++;
    pthread_mutex_unlock(&c->mu);
    c->registered = true;
    lc_pulls_forget(c, c->n_pulls);
out:
    for (int i = 0; i < 5; i++)
        free(strings[i]);
    codec_registered_destroy(reply);
    natsMsg_Destroy(msg);
    free(buf);
    free(subject);
    return status;
}

static void lc_consumer_free(lc_consumer_t *c)
{
    if (c == NULL)
        return;
    lc_heartbeat_stop(c);
    lc_ack_async_close(c, false);
    lc_sub_destroy(c->client->nc, c->sub);
    free(c->inbox);
    if (c->sync_ready) {
        lc_inprogress_clear(c);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
    }
    for (int i = 0; i < 5; i++)
        free(c->reg_strings[i]);
    free(c->ip);
    free(c->pulls);
    free(c->model);
    free(c->name);
    free(c);
}

lc_status_t lc_consumer_open(lc_client_t *client, const lc_consumer_config_t *config,
                             lc_consumer_t **out)
{
    lc_status_t status = LC_OK;
    lc_consumer_t *c = NULL;
    pthread_condattr_t attr;
    bool attr_ready = false;

    if (client == NULL || config == NULL || out == NULL) {
        if (client != NULL)
            lc_errf(client->err, "lc_consumer_open: NULL argument");
        status = LC_EINVAL;
        goto out;
    }
    if (!lc_subject_part_ok(config->model) || config->max_batch_size == 0 ||
        config->max_batch_tokens == 0) {
        lc_errf(client->err, "consumer: needs a model (no spaces or wildcards), "
                             "max_batch_size > 0 and max_batch_tokens > 0");
        status = LC_EINVAL;
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        lc_errf(client->err, "consumer: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    c->client = client;
    c->config = *config;
    c->model = strdup(config->model);
    c->name = strdup(config->name != NULL ? config->name : "");
    if (c->model == NULL || c->name == NULL) {
        lc_errf(client->err, "consumer: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    c->config.model = c->model;
    c->config.name = c->name;
    if (c->config.request_timeout_ms <= 0)
        c->config.request_timeout_ms = LC_REQUEST_TIMEOUT_MS;
    if (c->config.pull_max_batches == 0)
        c->config.pull_max_batches = 1;
    if (c->config.prefetch_expires_ms == 0)
        c->config.prefetch_expires_ms = LC_PREFETCH_EXPIRES_MS;

    if (pthread_condattr_init(&attr) != 0) {
        lc_errf(client->err, "consumer: pthread_condattr_init failed");
        status = LC_ETHREAD;
        goto out;
    }
    attr_ready = true;
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_mutex_init(&c->mu, NULL) != 0) {
        lc_errf(client->err, "consumer: mutex / clock setup failed");
        status = LC_ETHREAD;
        goto out;
    }
    if (pthread_cond_init(&c->cond, &attr) != 0) {
        pthread_mutex_destroy(&c->mu);
        lc_errf(client->err, "consumer: pthread_cond_init failed");
        status = LC_ETHREAD;
        goto out;
    }
    c->sync_ready = true;

    natsStatus s = lc_inbox_make(client->inbox_prefix, &c->inbox);
    if (s == NATS_OK)
        s = natsConnection_SubscribeSync(&c->sub, client->nc, c->inbox);
    if (s != NATS_OK) {
        status = lc_nats_fail(client->err, "consumer inbox", s);
        goto out;
    }
    status = lc_register_do(c, client->err);
    if (status != LC_OK)
        goto out;
    status = lc_heartbeat_start(c, client->err);
    if (status != LC_OK)
        goto out;
    *out = c;
    c = NULL;
out:
    if (attr_ready)
        pthread_condattr_destroy(&attr);
    lc_consumer_free(c);
    return status;
}

lc_status_t lc_consumer_register(lc_consumer_t *consumer)
{
    if (consumer == NULL)
        return LC_EINVAL;
    lc_status_t status = lc_register_do(consumer, consumer->err);
    if (status == LC_OK)
        status = lc_heartbeat_start(consumer, consumer->err);
    return status;
}

const lc_registered_t *lc_consumer_registered_get(const lc_consumer_t *consumer)
{
    return &consumer->reg;
}

const char *lc_consumer_error_get(const lc_consumer_t *consumer)
{
    return consumer != NULL ? consumer->err : "";
}

void lc_consumer_stats_get(lc_consumer_t *consumer, lc_consumer_stats_t *out)
{
    if (consumer == NULL || out == NULL)
        return;
    pthread_mutex_lock(&consumer->mu);
    *out = consumer->stats;
    out->in_progress = consumer->n_ip;
    pthread_mutex_unlock(&consumer->mu);
}

lc_status_t lc_bye_send(lc_consumer_t *consumer, int64_t timeout_ms)
{
    lc_status_t status = LC_OK;
    natsMsg *msg = NULL;
    codec_ack_reply_t *reply = NULL;

    if (consumer == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "bye: not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    natsConnection *nc = c->client->nc;
    lc_ack_async_close(c, true); /* ack_async.c invariant 3 */
    lc_heartbeat_stop(c);
    c->registered = false;
    pthread_mutex_lock(&c->mu);
    lc_inprogress_clear(c);
    pthread_mutex_unlock(&c->mu);
    lc_pulls_forget(c, c->n_pulls);
    if (timeout_ms <= 0) {
        natsStatus s = natsConnection_Publish(nc, c->reg.bye_subject, NULL, 0);
        if (s == NATS_OK)
            s = natsConnection_FlushTimeout(nc, LC_FLUSH_ON_CLOSE_MS);
        if (s != NATS_OK)
            status = lc_nats_fail(c->err, c->reg.bye_subject, s);
        goto out;
    }
    status = lc_request_do(nc, c->reg.bye_subject, NULL, 0, timeout_ms, c->config.request_retries,
                           c->err, NULL, &msg);
    if (status != LC_OK)
        goto out;
    codec_status_t cs =
        codec_decode_ack_reply(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, c->reg.bye_subject, "AckReply", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(c->err, "%s: %s", c->reg.bye_subject, reply->error);
        status = LC_EREFUSED;
    }
out:
    codec_ack_reply_destroy(reply);
    natsMsg_Destroy(msg);
    return status;
}

void lc_consumer_close(lc_consumer_t *consumer)
{
    lc_consumer_free(consumer);
}
