/*
 * harness_nats.c - the NATS + codec helpers of the daemon integration tests: connections,
 * subjects and requests, the producer side (test shapes, work items, Submit) and the consumer
 * side (Register, Pull, Batch, Ack, Heartbeat, bye), all with nats.c and the codec directly,
 * never the C client library. See harness.h.
 */
#include "tests/integration/harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- NATS ------------------------------------------------------------------------------------ */

natsConnection *h_connect(void)
{
    natsOptions *opts = NULL;
    natsConnection *nc = NULL;
    H_REQUIRE(natsOptions_Create(&opts) == NATS_OK, "natsOptions_Create");
    natsOptions_SetURL(opts, h_url());
    natsOptions_SetTimeout(opts, 2000);
    natsOptions_SetAllowReconnect(opts, true);
    natsOptions_SetMaxReconnect(opts, 1000000);
    natsOptions_SetReconnectWait(opts, 100);
    natsStatus s = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
    H_REQUIRE(s == NATS_OK, "connect to %s: %s", h_url(), natsStatus_GetText(s));
    return nc;
}

void h_disconnect(natsConnection *nc)
{
    if (nc == NULL)
        return;
    natsConnection_Close(nc);
    natsConnection_Destroy(nc);
}

void h_subject(char *buf, size_t cap, const char *a, const char *b)
{
    if (b != NULL)
        snprintf(buf, cap, "%s.%s.%s", H_PREFIX, a, b);
    else
        snprintf(buf, cap, "%s.%s", H_PREFIX, a);
}

natsStatus h_request(natsConnection *nc, const char *subject, const void *data, size_t len,
                     int64_t timeout_ms, natsMsg **out)
{
    *out = NULL;
    return natsConnection_Request(out, nc, subject, data, (int)len,
                                  timeout_ms > 0 ? timeout_ms : 1);
}

/* ---- producer side --------------------------------------------------------------------------- */

void h_shape_components(unsigned k, uint64_t out[2])
{
    char a[96], b[96];
    snprintf(a, sizeof(a), "You are test assistant number %u. Answer briefly.", k);
    snprintf(b, sizeof(b), "Few-shot block %u: Q: 2+2? A: 4.", k);
    out[0] = codec_hash_component(a, strlen(a));
    out[1] = codec_hash_component(b, strlen(b));
}

uint64_t h_shape(unsigned k)
{
    uint64_t h[2];
    h_shape_components(k, h);
    return codec_signature(h, 2);
}

codec_work_item_t h_item(const char *id, const char *model, uint64_t signature, uint32_t tokens,
                         const void *payload, size_t payload_len)
{
    codec_work_item_t it;
    memset(&it, 0, sizeof(it));
    it.id.ptr = (const uint8_t *)id;
    it.id.len = strlen(id);
    it.model = model;
    it.has_signature = signature != 0;
    it.signature = signature;
    it.tokens = tokens;
    it.payload.ptr = payload_len > 0 ? payload : NULL;
    it.payload.len = payload_len;
    return it;
}

natsStatus h_submit(natsConnection *nc, const char *subject_model, const codec_work_item_t *items,
                    size_t n, int64_t timeout_ms, codec_submit_reply_t **out)
{
    *out = NULL;
    codec_submit_t msg = {items, n};
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_status_t cs = codec_encode_submit(&msg, &buf, &len);
    H_REQUIRE(cs == CODEC_OK, "encode Submit: %s", codec_status_str(cs));
    char subject[256];
    h_subject(subject, sizeof(subject), "submit", subject_model);
    natsMsg *reply = NULL;
    natsStatus s = h_request(nc, subject, buf, len, timeout_ms, &reply);
    free(buf);
    if (s != NATS_OK)
        return s;
    cs = codec_decode_submit_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply),
                                   out);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply on %s is not a SubmitReply: %s", subject,
              codec_status_str(cs));
    return NATS_OK;
}

void h_submit_accepted(natsConnection *nc, const char *subject_model,
                       const codec_work_item_t *items, size_t n)
{
    codec_submit_reply_t *r = NULL;
    natsStatus s = h_submit(nc, subject_model, items, n, 5000, &r);
    H_REQUIRE(s == NATS_OK, "Submit of %zu items: %s", n, natsStatus_GetText(s));
    H_REQUIRE(r->error[0] == '\0', "Submit refused whole: %s", r->error);
    H_REQUIRE(r->n_results == n, "SubmitReply has %zu results for %zu items", r->n_results, n);
    for (size_t i = 0; i < n; i++) {
        const codec_item_result_t *res = &r->results[i];
        H_REQUIRE(res->id.len == items[i].id.len &&
                      memcmp(res->id.ptr, items[i].id.ptr, res->id.len) == 0,
                  "result %zu is for another id (%.*s)", i, (int)res->id.len,
                  (const char *)res->id.ptr);
        H_REQUIRE(res->status == CODEC_ITEM_ACCEPTED,
                  "item %.*s: status %d, reason '%s', error '%s' (expected ACCEPTED)",
                  (int)items[i].id.len, (const char *)items[i].id.ptr, (int)res->status,
                  res->reason, res->error);
    }
    codec_submit_reply_destroy(r);
}

/* ---- consumer side --------------------------------------------------------------------------- */

natsStatus h_register_raw(natsConnection *nc, const codec_register_t *reg, int64_t timeout_ms,
                          codec_registered_t **out)
{
    *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_status_t cs = codec_encode_register(reg, &buf, &len);
    H_REQUIRE(cs == CODEC_OK, "encode Register: %s", codec_status_str(cs));
    char subject[128];
    h_subject(subject, sizeof(subject), "register", NULL);
    natsMsg *reply = NULL;
    natsStatus s = h_request(nc, subject, buf, len, timeout_ms, &reply);
    free(buf);
    if (s != NATS_OK)
        return s;
    cs = codec_decode_registered(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), out);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply on %s is not a Registered: %s", subject,
              codec_status_str(cs));
    return NATS_OK;
}

/* A Registered subject: "<prefix>.<kind>.<secret>", the same 32-character secret in all four,
 * never the public id (a bearer token anyone reading stats could use). */
static void copy_subject(char *dst, size_t cap, const char *got, const char *kind, const char *id,
                         char *secret)
{
    char want[256];
    h_subject(want, sizeof(want), kind, "");
    size_t n = strlen(want);
    H_REQUIRE(strncmp(got, want, n) == 0 && strlen(got + n) == 32,
              "Registered %s subject '%s', expected '%s<secret>'", kind, got, want);
    H_REQUIRE(strcmp(got + n, id) != 0, "the %s subject '%s' carries the public id", kind, got);
    if (secret[0] == '\0')
        snprintf(secret, 33, "%s", got + n);
    H_REQUIRE(strcmp(got + n, secret) == 0, "the %s subject '%s' has another secret", kind, got);
    snprintf(dst, cap, "%s", got);
}

void h_consumer_register(h_consumer_t *c, natsConnection *nc, const char *model,
                         uint32_t max_batch_size, uint32_t max_batch_tokens,
                         uint32_t max_input_tokens, const char *name)
{
    memset(c, 0, sizeof(*c));
    c->nc = nc;
    snprintf(c->name, sizeof(c->name), "%s", name);
    codec_register_t reg = {
        model, max_batch_size, max_batch_tokens, max_input_tokens, name, 0, 0, 0, 0, 0};
    codec_registered_t *r = NULL;
    natsStatus s = h_register_raw(nc, &reg, 5000, &r);
    H_REQUIRE(s == NATS_OK, "Register %s: %s", name, natsStatus_GetText(s));
    H_REQUIRE(r->error[0] == '\0', "Register %s refused: %s", name, r->error);
    size_t idlen = strlen(r->consumer_id);
    bool hex = idlen == 32;
    for (size_t i = 0; hex && i < idlen; i++)
        hex = (r->consumer_id[i] >= '0' && r->consumer_id[i] <= '9') ||
              (r->consumer_id[i] >= 'a' && r->consumer_id[i] <= 'f');
    H_REQUIRE(hex, "consumer id '%s' is not 32 lowercase hex characters", r->consumer_id);
    snprintf(c->id, sizeof(c->id), "%s", r->consumer_id);
    char secret[33] = "";
    copy_subject(c->pull_subject, sizeof(c->pull_subject), r->pull_subject, "pull", c->id, secret);
    copy_subject(c->ack_subject, sizeof(c->ack_subject), r->ack_subject, "ack", c->id, secret);
    copy_subject(c->hb_subject, sizeof(c->hb_subject), r->heartbeat_subject, "hb", c->id, secret);
    copy_subject(c->bye_subject, sizeof(c->bye_subject), r->bye_subject, "bye", c->id, secret);
    c->heartbeat_ms = r->heartbeat_ms;
    c->dead_after_ms = r->dead_after_ms;
    c->ack_wait_ms = r->ack_wait_ms;
    codec_registered_destroy(r);
    H_REQUIRE(c->heartbeat_ms > 0 && c->dead_after_ms > 0 && c->ack_wait_ms > 0,
              "Registered without timings (hb %u, dead-after %u, ack-wait %u)", c->heartbeat_ms,
              c->dead_after_ms, c->ack_wait_ms);
    natsInbox *inbox = NULL;
    H_REQUIRE(natsInbox_Create(&inbox) == NATS_OK, "natsInbox_Create");
    snprintf(c->inbox, sizeof(c->inbox), "%s", inbox);
    natsInbox_Destroy(inbox);
    s = natsConnection_SubscribeSync(&c->sub, nc, c->inbox);
    H_REQUIRE(s == NATS_OK, "subscribe %s: %s", c->inbox, natsStatus_GetText(s));
    natsSubscription_SetPendingLimits(c->sub, 1000000, 1 << 30);
    H_REQUIRE(natsConnection_Flush(nc) == NATS_OK, "flush");
}

void h_sub_destroy(natsConnection *nc, natsSubscription *sub)
{
    if (sub == NULL)
        return;
    natsSubscription_Unsubscribe(sub);
    natsConnection_FlushTimeout(nc, 2000);
    natsSubscription_Destroy(sub);
}

void h_consumer_close(h_consumer_t *c)
{
    h_hb_stop(c);
    h_sub_destroy(c->nc, c->sub);
    c->sub = NULL;
}

void h_pull(h_consumer_t *c, uint32_t max_batches, uint32_t expires_ms)
{
    codec_pull_t p = {max_batches, expires_ms};
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_pull(&p, &buf, &len) == CODEC_OK, "encode Pull");
    natsStatus s = natsConnection_PublishRequest(c->nc, c->pull_subject, c->inbox, buf, (int)len);
    free(buf);
    H_REQUIRE(s == NATS_OK, "publish Pull: %s", natsStatus_GetText(s));
    natsConnection_Flush(c->nc);
}

codec_batch_t *h_sub_next_batch(natsSubscription *sub, int64_t timeout_ms, char *subject,
                                size_t cap)
{
    natsMsg *m = NULL;
    natsStatus s = natsSubscription_NextMsg(&m, sub, timeout_ms > 0 ? timeout_ms : 1);
    if (s == NATS_TIMEOUT)
        return NULL;
    H_REQUIRE(s != NATS_NO_RESPONDERS, "a Pull had no responders (is lanesched subscribed?)");
    H_REQUIRE(s == NATS_OK, "waiting for a Batch: %s", natsStatus_GetText(s));
    codec_batch_t *b = NULL;
    codec_status_t cs =
        codec_decode_batch(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &b);
    if (subject != NULL)
        snprintf(subject, cap, "%s", natsMsg_GetSubject(m));
    int len = natsMsg_GetDataLength(m);
    natsMsg_Destroy(m);
    H_REQUIRE(cs == CODEC_OK, "a %d-byte message on a pull inbox is not a Batch: %s", len,
              codec_status_str(cs));
    return b;
}

codec_batch_t *h_next_batch(h_consumer_t *c, int64_t timeout_ms)
{
    return h_sub_next_batch(c->sub, timeout_ms, NULL, 0);
}

codec_ack_reply_t *h_ack(h_consumer_t *c, const codec_ack_t *ack, int64_t timeout_ms)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_ack(ack, &buf, &len) == CODEC_OK, "encode Ack");
    natsMsg *reply = NULL;
    natsStatus s = h_request(c->nc, c->ack_subject, buf, len, timeout_ms, &reply);
    free(buf);
    if (s == NATS_TIMEOUT)
        return NULL;
    H_REQUIRE(s == NATS_OK, "Ack request on %s: %s", c->ack_subject, natsStatus_GetText(s));
    codec_ack_reply_t *r = NULL;
    codec_status_t cs =
        codec_decode_ack_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), &r);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply on %s is not an AckReply: %s", c->ack_subject,
              codec_status_str(cs));
    return r;
}

void h_ack_all_ok(h_consumer_t *c, const codec_batch_t *b)
{
    codec_ack_t a;
    memset(&a, 0, sizeof(a));
    a.batch_id = b->batch_id;
    a.all = true;
    codec_ack_reply_t *r = h_ack(c, &a, 5000);
    H_REQUIRE(r != NULL, "no AckReply for batch %" PRIu64 " within 5 s", b->batch_id);
    H_REQUIRE(r->error[0] == '\0' && r->acked == b->n_items && r->unknown == 0 && r->returned == 0,
              "ack of batch %" PRIu64 " (%zu items): AckReply{acked %u, returned %u, unknown %u, "
              "error '%s'}",
              b->batch_id, b->n_items, r->acked, r->returned, r->unknown, r->error);
    codec_ack_reply_destroy(r);
}

void h_heartbeat(h_consumer_t *c, const uint64_t *in_progress, size_t n)
{
    codec_heartbeat_t hb = {in_progress, n};
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_heartbeat(&hb, &buf, &len) == CODEC_OK, "encode Heartbeat");
    natsStatus s = natsConnection_Publish(c->nc, c->hb_subject, buf, (int)len);
    free(buf);
    H_REQUIRE(s == NATS_OK, "publish Heartbeat: %s", natsStatus_GetText(s));
}

static void *hb_main(void *arg)
{
    h_consumer_t *c = arg;
    uint64_t next = h_now_ms();
    while (!atomic_load(&c->hb_stop)) {
        if (h_now_ms() >= next) {
            h_heartbeat(c, NULL, 0);
            atomic_fetch_add(&c->hb_sent, 1);
            next = h_now_ms() + c->hb_period_ms;
        }
        h_sleep_ms(10);
    }
    return NULL;
}

void h_hb_start(h_consumer_t *c, unsigned period_ms)
{
    H_REQUIRE(!c->hb_running, "heartbeat thread already running");
    c->hb_period_ms = period_ms;
    atomic_store(&c->hb_stop, false);
    H_REQUIRE(pthread_create(&c->hb_thread, NULL, hb_main, c) == 0, "pthread_create");
    c->hb_running = true;
}

void h_hb_stop(h_consumer_t *c)
{
    if (!c->hb_running)
        return;
    atomic_store(&c->hb_stop, true);
    pthread_join(c->hb_thread, NULL);
    c->hb_running = false;
}

codec_ack_reply_t *h_bye(h_consumer_t *c, int64_t timeout_ms)
{
    natsMsg *reply = NULL;
    natsStatus s = h_request(c->nc, c->bye_subject, NULL, 0, timeout_ms, &reply);
    if (s != NATS_OK)
        return NULL;
    codec_ack_reply_t *r = NULL;
    codec_status_t cs =
        codec_decode_ack_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), &r);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply to bye is not an AckReply");
    return r;
}
