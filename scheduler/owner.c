/*
 * owner.c - the single owner thread: all scheduling state changes here, one event at a time.
 *
 * Owns the store, the scheduler, the consumer registry, the dedupe window and the counters.
 * NATS callbacks (front.c) only copy messages into events; the owner publishes through the
 * publish function it was given and never includes nats.h.
 *
 * One turn of the loop:
 *   1. take every queued event and handle it (submits append, acks tombstone, pulls queue);
 *   2. one store_flush for all of them (group commit: every submit and ack of the turn shares
 *      one sync at the power-loss level), then the SubmitReply/AckReply of each;
 *   3. timers: the lanes' tick, dead consumers, ack deadlines, expired pulls;
 *   4. fill outstanding pulls, for at most DAEMON_FILL_BUDGET_NS, then back to 1.
 *
 * Invariants:
 *   1. A SubmitReply or AckReply is published only after the flush that made its items or
 *      tombstones durable returned OK. A failed flush puts the store in its error state; the
 *      owner then answers with an error and stops (a restart recovers; nothing is acked falsely).
 *   2. A batch is committed only after the publish call for it returned OK; a batch that could
 *      not be published leaves its items queued.
 *   3. Every in-flight batch has a deadline; a consumer that is dead, says bye, or loses its
 *      connection has its batches returned to the front of their lanes.
 *   4. Filling never runs longer than DAEMON_FILL_BUDGET_NS before events are serviced again.
 *   5. The payload kept in the store is the producer's reply_to and payload, framed as
 *      u32 LE reply_to length | reply_to | payload, so a batch carries both back unchanged.
 *
 * Rejected: a lock around the scheduler shared by NATS callback threads. Every callback would
 * contend on it, and the one place that may run long (a fill) would block acks and heartbeats;
 * an event queue with one owner makes the 100 ms yield a property of one loop.
 */
#include "scheduler/daemon_int.h"

#include "codec/codec.h"
#include "common/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The article's failure: a 3,099-batch fill blocked the loop for 17 s and healthy workers were
 * declared dead. A fill yields after this long so heartbeats and acks are serviced. */
#define DAEMON_FILL_BUDGET_NS 100000000ull
/* Dead consumers' ids are kept this many dead-after periods, so late acks read as stale. */
#define DAEMON_DEAD_KEEP_PERIODS       10u
#define DAEMON_PULL_EXPIRES_DEFAULT_MS 30000u

STATUS_STR(daemon_status_str, daemon_status_t, DAEMON_STATUS_MAP, "unknown daemon status")

static uint64_t owner_clock(void *ctx)
{
    (void)ctx;
    return clock_mono_ns();
}

static void owner_store_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    daemon_log(level == STORE_LOG_ERROR  ? LOG_ERROR
               : level == STORE_LOG_WARN ? LOG_WARN
                                         : LOG_INFO,
               "store: %s", msg);
}

static uint64_t ms_ns(uint32_t ms)
{
    return (uint64_t)ms * 1000000ull;
}

/* ---- events --------------------------------------------------------------------------------- */

ev_t *ev_create(ev_kind_t kind, const char *token, const char *reply, const void *data, size_t len)
{
    ev_t *ev = calloc(1, sizeof(*ev));
    if (ev == NULL)
        return NULL;
    ev->kind = kind;
    if ((token != NULL && (ev->token = strdup(token)) == NULL) ||
        (reply != NULL && (ev->reply = strdup(reply)) == NULL) ||
        (len != 0 && (ev->data = malloc(len)) == NULL)) {
        ev_destroy(ev);
        return NULL;
    }
    if (len != 0)
        memcpy(ev->data, data, len);
    ev->len = len;
    return ev;
}

void ev_destroy(ev_t *ev)
{
    if (ev == NULL)
        return;
    free(ev->token);
    free(ev->reply);
    free(ev->data);
    free(ev);
}

void daemon_post(daemon_t *d, ev_t *ev)
{
    pthread_mutex_lock(&d->lock);
    if (d->tail != NULL)
        d->tail->next = ev;
    else
        d->head = ev;
    d->tail = ev;
    d->queued_events++;
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

/* ---- deferred replies (published after the turn's flush) --------------------------------------
 */

typedef struct reply {
    char *subject;
    uint8_t *buf;
    size_t len;
    struct reply *next;
} reply_t;

typedef struct {
    reply_t *head, *tail;
} replies_t;

static void replies_add(replies_t *r, const char *subject, uint8_t *buf, size_t len)
{
    reply_t *x = calloc(1, sizeof(*x));
    if (x == NULL || (x->subject = strdup(subject)) == NULL) {
        free(x);
        free(buf);
        daemon_log(LOG_ERROR, "out of memory queueing a reply to %s", subject);
        return;
    }
    x->buf = buf;
    x->len = len;
    if (r->tail != NULL)
        r->tail->next = x;
    else
        r->head = x;
    r->tail = x;
}

static void replies_free(replies_t *r)
{
    for (reply_t *x = r->head, *next; x != NULL; x = next) {
        next = x->next;
        free(x->subject);
        free(x->buf);
        free(x);
    }
    r->head = r->tail = NULL;
}

static void replies_send(daemon_t *d, replies_t *r)
{
    for (const reply_t *x = r->head; x != NULL; x = x->next) {
        if (d->publish(d->publish_ctx, x->subject, x->buf, x->len) != 0)
            d->counters.publish_failures++;
    }
    replies_free(r);
}

static void owner_publish(daemon_t *d, const char *subject, uint8_t *buf, size_t len)
{
    if (buf == NULL)
        return;
    if (d->publish(d->publish_ctx, subject, buf, len) != 0)
        d->counters.publish_failures++;
    free(buf);
}

/* ---- submit --------------------------------------------------------------------------------- */

static uint8_t *owner_frame(const codec_work_item_t *it, size_t *out_len)
{
    size_t rlen = strlen(it->reply_to);
    size_t len = 4 + rlen + it->payload.len;
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return NULL;
    buf[0] = (uint8_t)rlen;
    buf[1] = (uint8_t)(rlen >> 8);
    buf[2] = (uint8_t)(rlen >> 16);
    buf[3] = (uint8_t)(rlen >> 24);
    memcpy(buf + 4, it->reply_to, rlen);
    if (it->payload.len != 0)
        memcpy(buf + 4 + rlen, it->payload.ptr, it->payload.len);
    *out_len = len;
    return buf;
}

static void owner_submit(daemon_t *d, ev_t *ev, replies_t *deferred)
{
    d->counters.submits++;
    codec_limits_t lim = {.model = ev->token, .max_payload = d->cfg.max_payload};
    codec_submit_t *sub = NULL;
    codec_status_t cst = codec_decode_submit(ev->data, ev->len, &lim, &sub);
    codec_submit_reply_t rep = {0};
    codec_item_result_t *results = NULL;
    char errbuf[160];
    if (cst != CODEC_OK) {
        d->counters.malformed++;
        d->counters.rejected[CODEC_EMALFORMED]++;
        snprintf(errbuf, sizeof(errbuf), "%s: %s", codec_status_reason(cst), codec_status_str(cst));
        rep.error = errbuf;
        goto reply;
    }
    results = calloc(sub->n_items ? sub->n_items : 1, sizeof(*results));
    if (results == NULL) {
        rep.error = "no_memory: the daemon is out of memory";
        goto reply;
    }
    uint64_t now = clock_mono_ns();
    for (size_t i = 0; i < sub->n_items; i++) {
        const codec_work_item_t *it = &sub->items[i];
        codec_item_result_t *r = &results[i];
        r->id = it->id;
        r->reason = "ok";
        r->error = "";
        if (it->status != CODEC_OK) {
            r->status = CODEC_ITEM_REJECTED;
            r->reason = codec_status_reason(it->status);
            r->error = codec_status_str(it->status);
            d->counters.rejected[it->status < 30 ? it->status : 29]++;
            continue;
        }
        if (dedupe_contains(&d->dedupe, it->id.ptr, it->id.len, now)) {
            r->status = CODEC_ITEM_DUPLICATE;
            r->reason = "duplicate";
            r->error = "an item with this id was accepted within the dedupe window";
            d->counters.duplicates++;
            continue;
        }
        size_t flen = 0;
        uint8_t *framed = owner_frame(it, &flen);
        sched_item_t si = {ev->token, it->shape, it->tokens, it->id.ptr, it->id.len, framed, flen};
        sched_status_t sst = framed ? sched_submit(d->sched, &si, NULL) : SCHED_ENOMEM;
        free(framed);
        if (sst != SCHED_OK) {
            int full = sst == SCHED_ESTORE && sched_store_status(d->sched) == STORE_ENOSPC;
            r->status = CODEC_ITEM_REJECTED;
            r->reason = full ? "store_full" : "store_error";
            r->error = full ? "the data directory is full: retry later"
                            : (sst == SCHED_ESTORE ? store_status_str(sched_store_status(d->sched))
                                                   : sched_status_str(sst));
            d->counters.rejected[full ? DAEMON_REJECT_STORE_FULL : DAEMON_REJECT_STORE_ERROR]++;
            continue;
        }
        r->status = CODEC_ITEM_ACCEPTED;
        if (dedupe_add(&d->dedupe, it->id.ptr, it->id.len, now) != DAEMON_OK)
            daemon_log(LOG_WARN, "dedupe window full: out of memory");
    }
    rep.results = results;
    rep.n_results = sub->n_items;
reply:
    if (ev->reply != NULL) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (codec_encode_submit_reply(&rep, &buf, &len) == CODEC_OK)
            replies_add(deferred, ev->reply, buf, len);
    }
    free(results);
    codec_submit_destroy(sub);
}

/* ---- consumers ------------------------------------------------------------------------------ */

/* 1 if this instance serves the model (every model without --models). */
static int owner_owns(const daemon_t *d, const char *model)
{
    size_t n = strlen(model);
    for (const char *p = d->cfg.models; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t len = strchr(p, ',') ? (size_t)(strchr(p, ',') - p) : strlen(p);
        if (len == n && strncmp(p, model, n) == 0)
            return 1;
    }
    return d->cfg.models == NULL;
}

/* With --models, another instance may own this consumer id: stay silent about ids never seen. */
static int owner_not_mine(daemon_t *d, const char *id)
{
    return d->cfg.models != NULL && consumers_find(&d->consumers, id) == NULL;
}

static void owner_register(daemon_t *d, ev_t *ev)
{
    d->counters.registers++;
    codec_register_t *reg = NULL;
    codec_registered_t out = {0};
    char err[160], id_subjects[4][300];
    consumer_t *c = NULL;
    codec_status_t cst = codec_decode_register(ev->data, ev->len, &reg);
    if (cst == CODEC_OK && !owner_owns(d, reg->model)) {
        codec_register_destroy(reg); /* the instance that owns the model answers */
        return;
    }
    if (cst != CODEC_OK) {
        snprintf(err, sizeof(err), "%s: %s", codec_status_reason(cst), codec_status_str(cst));
        out.error = err;
    } else {
        packer_contract_t k = {reg->max_batch_size, reg->max_batch_tokens, reg->max_input_tokens};
        if (consumers_add(&d->consumers, reg->model, reg->name, k, clock_mono_ns(), &c) !=
            DAEMON_OK) {
            out.error = "no_memory: the daemon could not register the consumer";
        } else {
            const char *p = d->cfg.prefix;
            snprintf(id_subjects[0], sizeof(id_subjects[0]), "%s.pull.%s", p, c->id);
            snprintf(id_subjects[1], sizeof(id_subjects[1]), "%s.ack.%s", p, c->id);
            snprintf(id_subjects[2], sizeof(id_subjects[2]), "%s.hb.%s", p, c->id);
            snprintf(id_subjects[3], sizeof(id_subjects[3]), "%s.bye.%s", p, c->id);
            out = (codec_registered_t){c->id,
                                       id_subjects[0],
                                       id_subjects[1],
                                       id_subjects[2],
                                       id_subjects[3],
                                       d->cfg.heartbeat_ms,
                                       d->cfg.dead_after_ms,
                                       d->cfg.ack_wait_ms,
                                       ""};
            daemon_log(LOG_INFO,
                       "consumer %s (%s) registered for model %s: batch %" PRIu32 " items, %" PRIu32
                       " padded tokens, input %" PRIu32,
                       c->id, c->name, c->model, k.max_batch_size, k.max_batch_tokens,
                       k.max_input_tokens);
        }
    }
    if (ev->reply != NULL) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (codec_encode_registered(&out, &buf, &len) == CODEC_OK)
            owner_publish(d, ev->reply, buf, len);
    }
    codec_register_destroy(reg);
}

static void owner_batch_status(daemon_t *d, const char *subject, codec_batch_status_t status,
                               const char *error)
{
    codec_batch_t b = {.model = "", .status = status, .error = error};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_batch(&b, &buf, &len) == CODEC_OK)
        owner_publish(d, subject, buf, len);
}

/* A live consumer known by id, refreshed; NULL (and counted) otherwise. */
static consumer_t *owner_consumer(daemon_t *d, const char *id)
{
    consumer_t *c = consumers_find(&d->consumers, id);
    if (c == NULL || c->dead) {
        d->counters.unknown_consumer++;
        return NULL;
    }
    c->last_seen_ns = clock_mono_ns();
    return c;
}

static void owner_pull(daemon_t *d, ev_t *ev)
{
    d->counters.pulls++;
    if (owner_not_mine(d, ev->token))
        return;
    consumer_t *c = owner_consumer(d, ev->token);
    if (ev->reply == NULL)
        return;
    if (c == NULL) {
        owner_batch_status(d, ev->reply, CODEC_BATCH_ERROR,
                           "unknown_consumer: register again to get a consumer id");
        return;
    }
    codec_pull_t *p = NULL;
    if (codec_decode_pull(ev->data, ev->len, &p) != CODEC_OK) {
        owner_batch_status(d, ev->reply, CODEC_BATCH_ERROR, "malformed: Pull did not decode");
        return;
    }
    uint32_t credits = p->max_batches ? p->max_batches : 1;
    uint32_t wait = p->expires_ms ? p->expires_ms : DAEMON_PULL_EXPIRES_DEFAULT_MS;
    codec_pull_destroy(p);
    if (consumers_pull_add(c, ev->reply, credits, clock_mono_ns() + ms_ns(wait)) != DAEMON_OK)
        owner_batch_status(d, ev->reply, CODEC_BATCH_ERROR, "no_memory");
}

/* Returns an in-flight batch's unsettled items to their lanes and forgets it. A return that
 * fails (out of memory) keeps the batch on the orphan list, retried by every timer pass, so its
 * items are never stranded as pending. */
static void owner_return_batch(daemon_t *d, consumer_t *c, uint64_t batch_id)
{
    uint32_t returned = 0;
    sched_status_t st = sched_return(d->sched, batch_id, NULL, 0, &returned);
    if (st != SCHED_OK && st != SCHED_EUNKNOWN) {
        daemon_log(LOG_ERROR, "returning batch %" PRIu64 " failed: %s; retried every second",
                   batch_id, sched_status_str(st));
        uint64_t *o = realloc(d->orphans, (d->n_orphans + 1) * sizeof(*o));
        if (o != NULL) {
            d->orphans = o;
            d->orphans[d->n_orphans++] = batch_id;
        }
    }
    consumers_inflight_del(&d->consumers, c, batch_id);
}

static void owner_orphans_retry(daemon_t *d)
{
    size_t w = 0;
    for (size_t i = 0; i < d->n_orphans; i++) {
        sched_status_t st = sched_return(d->sched, d->orphans[i], NULL, 0, NULL);
        if (st != SCHED_OK && st != SCHED_EUNKNOWN)
            d->orphans[w++] = d->orphans[i];
    }
    d->n_orphans = w;
}

static void owner_consumer_release(daemon_t *d, consumer_t *c, int close_pulls)
{
    while (c->n_inflight > 0)
        owner_return_batch(d, c, c->inflight[c->n_inflight - 1].batch_id);
    while (c->n_pulls > 0) {
        if (close_pulls)
            owner_batch_status(d, c->pulls[0].reply, CODEC_BATCH_EXPIRED, "");
        consumers_pull_pop(c);
    }
}

static void owner_ack(daemon_t *d, ev_t *ev, replies_t *deferred)
{
    d->counters.acks++;
    codec_ack_reply_t out = {.error = ""};
    codec_ack_t *ack = NULL;
    if (owner_not_mine(d, ev->token))
        return;
    consumer_t *c = owner_consumer(d, ev->token);
    if (c == NULL) {
        out.unknown = 1;
        out.error = "unknown_consumer: this consumer id is unknown or was declared dead";
        goto reply;
    }
    if (codec_decode_ack(ev->data, ev->len, &ack) != CODEC_OK) {
        out.unknown = 1;
        out.error = "malformed: Ack did not decode";
        goto reply;
    }
    inflight_t *in = consumers_inflight_find(c, ack->batch_id);
    if (in == NULL || consumers_batch_owner(&d->consumers, ack->batch_id) != c) {
        d->counters.unknown_batch++;
        out.unknown = 1;
        out.error = "unknown_batch: not an in-flight batch of this consumer (settled, returned "
                    "after its deadline, or another consumer's)";
        goto reply;
    }
    if (ack->in_progress) {
        in->deadline_ns = clock_mono_ns() + ms_ns(d->cfg.ack_wait_ms);
        goto reply;
    }
    uint32_t bad = 0;
    for (size_t i = 0; !ack->all && i < ack->n_ack; i++)
        bad += ack->ack[i] >= in->n_items;
    for (size_t i = 0; !ack->all && i < ack->n_nak; i++)
        bad += ack->nak[i] >= in->n_items;
    if (bad != 0) {
        out.unknown = bad;
        out.error = "unknown_position: a position is outside the batch; nothing changed";
        goto reply;
    }
    uint32_t n = 0;
    sched_status_t st = SCHED_OK;
    if (ack->all) {
        st = sched_complete(d->sched, ack->batch_id, NULL, 0, &n);
        out.acked += n;
    } else {
        if (ack->n_ack != 0) {
            st = sched_complete(d->sched, ack->batch_id, ack->ack, ack->n_ack, &n);
            out.acked += n;
        }
        if (st == SCHED_OK && ack->n_nak != 0 && sched_batch_pending(d->sched, ack->batch_id)) {
            n = 0;
            st = sched_return(d->sched, ack->batch_id, ack->nak, ack->n_nak, &n);
            out.returned += n;
        }
    }
    if (st != SCHED_OK) /* positions were checked above: only the store can fail here */
        out.error = "store_error: the store failed";
    if (!sched_batch_pending(d->sched, ack->batch_id))
        consumers_inflight_del(&d->consumers, c, ack->batch_id);
reply:
    if (ev->reply != NULL) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (codec_encode_ack_reply(&out, &buf, &len) == CODEC_OK)
            replies_add(deferred, ev->reply, buf, len);
    }
    codec_ack_destroy(ack);
}

static void owner_heartbeat(daemon_t *d, ev_t *ev)
{
    d->counters.heartbeats++;
    if (owner_not_mine(d, ev->token))
        return;
    consumer_t *c = owner_consumer(d, ev->token);
    codec_heartbeat_t *hb = NULL;
    if (c == NULL || codec_decode_heartbeat(ev->data, ev->len, &hb) != CODEC_OK)
        return;
    uint64_t deadline = clock_mono_ns() + ms_ns(d->cfg.ack_wait_ms);
    for (size_t i = 0; i < hb->n_in_progress; i++) {
        inflight_t *in = consumers_inflight_find(c, hb->in_progress[i]);
        if (in != NULL)
            in->deadline_ns = deadline;
    }
    codec_heartbeat_destroy(hb);
}

static void owner_bye(daemon_t *d, ev_t *ev, replies_t *deferred)
{
    d->counters.byes++;
    if (owner_not_mine(d, ev->token))
        return;
    consumer_t *c = owner_consumer(d, ev->token);
    if (c != NULL) {
        owner_consumer_release(d, c, 1);
        c->dead = 1;
        daemon_log(LOG_INFO, "consumer %s (%s) left", c->id, c->name);
    }
    if (ev->reply != NULL) {
        codec_ack_reply_t out = {.error = c ? "" : "unknown_consumer"};
        uint8_t *buf = NULL;
        size_t len = 0;
        if (codec_encode_ack_reply(&out, &buf, &len) == CODEC_OK)
            replies_add(deferred, ev->reply, buf, len);
    }
}

static void owner_stats(daemon_t *d, ev_t *ev)
{
    d->counters.stats_requests++;
    if (ev->reply == NULL)
        return;
    size_t len = 0;
    char *json = stats_json(d, &len);
    owner_publish(d, ev->reply, (uint8_t *)json, len);
}

/* The connection dropped: every consumer it served counts as disconnected. */
static void owner_disconnected(daemon_t *d)
{
    d->counters.disconnects++;
    for (size_t i = 0; i < d->consumers.n_all; i++)
        owner_consumer_release(d, d->consumers.all[i], 0);
    daemon_log(LOG_WARN, "NATS connection lost: in-flight batches returned, pulls dropped; "
                         "consumers resume by pulling");
}

/* ---- filling pulls -------------------------------------------------------------------------- */

/* Unframes a stored payload (invariant 5) into reply (payload_len + 1 bytes); a malformed one
 * yields an empty reply_to. */
static void owner_unframe(const store_view_t *v, codec_batch_item_t *it, char *reply)
{
    const uint8_t *p = v->payload_view;
    size_t n = v->payload_len;
    size_t rlen =
        n >= 4 ? (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24 : 0;
    if (n < 4 || rlen > n - 4) {
        reply[0] = '\0';
        it->payload = (codec_bytes_t){n ? p : NULL, n};
        return;
    }
    memcpy(reply, p + 4, rlen);
    reply[rlen] = '\0';
    size_t plen = n - 4 - rlen;
    it->payload = (codec_bytes_t){plen ? p + 4 + rlen : NULL, plen};
}

static int owner_encode_batch(const sched_batch_t *b, codec_batch_status_t status,
                              const char *error, uint32_t this_delivery, uint8_t **buf, size_t *len)
{
    codec_batch_item_t *items = calloc(b->n, sizeof(*items));
    size_t total = 1;
    for (size_t i = 0; i < b->n; i++)
        total += b->items_view[i].payload_len + 1;
    char *replies = malloc(total), *r = replies;
    int rc = -1;
    if (items == NULL || replies == NULL)
        goto out;
    for (size_t i = 0; i < b->n; i++) {
        const store_view_t *v = &b->items_view[i];
        items[i].id = (codec_bytes_t){v->id_len ? v->id_view : NULL, v->id_len};
        items[i].tokens = v->tokens;
        items[i].deliveries = v->deliveries + this_delivery;
        owner_unframe(v, &items[i], r);
        items[i].reply_to = r;
        r += v->payload_len + 1;
    }
    codec_batch_t cb = {.batch_id = b->batch_id,
                        .model = b->model_view,
                        .signature = b->signature,
                        .lane = b->lane,
                        .pad_to = b->pad_to,
                        .items = items,
                        .n_items = b->n,
                        .status = status,
                        .error = error};
    rc = codec_encode_batch(&cb, buf, len) == CODEC_OK ? 0 : -1;
out:
    free(items);
    free(replies);
    return rc;
}

/* Publishes, commits and completes a dead letter; 1 if it went out (0: retried next turn). */
static int owner_dead_letter(daemon_t *d, const sched_batch_t *b)
{
    char subject[400], error[96];
    snprintf(subject, sizeof(subject), "%s.dead.%s", d->cfg.prefix, b->model_view);
    snprintf(error, sizeof(error), "delivery_limit: delivered %" PRIu32 " times",
             b->items_view[0].deliveries);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (owner_encode_batch(b, CODEC_BATCH_ERROR, error, 0, &buf, &len) != 0 ||
        d->publish(d->publish_ctx, subject, buf, len) != 0) {
        free(buf);
        d->counters.publish_failures++;
        return 0;
    }
    free(buf);
    uint64_t id = b->batch_id;
    if (sched_commit(d->sched, b) == SCHED_OK &&
        sched_complete(d->sched, id, NULL, 0, NULL) == SCHED_OK) {
        d->counters.dead_lettered++;
        daemon_log(LOG_WARN, "an item of model %s reached the delivery limit: sent to %s",
                   b->model_view, subject);
    }
    return 1;
}

/* One batch for the consumer's oldest pull; 1 if anything moved. */
static int owner_fill_one(daemon_t *d, consumer_t *c, uint64_t now)
{
    pull_t *pull = &c->pulls[0];
    sched_consumer_t sc = {c->model, c->contract};
    sched_batch_t b;
again:;
    sched_status_t st = sched_fill(d->sched, &sc, &b);
    if (st == SCHED_EEMPTY)
        return 0;
    if (st != SCHED_OK) {
        daemon_log(LOG_ERROR, "filling a batch for %s failed: %s", c->id, sched_status_str(st));
        return 0;
    }
    if (b.dead_letter)
        return owner_dead_letter(d, &b);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (owner_encode_batch(&b, CODEC_BATCH_OK, "", 1, &buf, &len) != 0) {
        daemon_log(LOG_ERROR, "encoding a batch failed: out of memory");
        return 0;
    }
    int rc = d->publish(d->publish_ctx, pull->reply, buf, len);
    free(buf);
    if (rc != 0) {
        /* invariant 2: not committed, the items stay queued */
        d->counters.publish_failures++;
        if (b.n > 1) { /* e.g. over the server's max_payload: try fewer items */
            sc.contract.max_batch_size = (uint32_t)(b.n / 2);
            goto again;
        }
        owner_batch_status(d, pull->reply, CODEC_BATCH_ERROR,
                           "publish_failed: the batch could not be published");
        consumers_pull_pop(c);
        return 1;
    }
    uint64_t batch_id = b.batch_id;
    size_t n = b.n;
    if ((st = sched_commit(d->sched, &b)) != SCHED_OK) {
        daemon_log(LOG_ERROR, "committing batch %" PRIu64 " failed: %s", batch_id,
                   sched_status_str(st));
        return 0;
    }
    if (consumers_inflight_add(&d->consumers, c, batch_id, now + ms_ns(d->cfg.ack_wait_ms),
                               (uint32_t)n) != DAEMON_OK) {
        daemon_log(LOG_ERROR, "out of memory tracking batch %" PRIu64 ": returned", batch_id);
        sched_return(d->sched, batch_id, NULL, 0, NULL);
        return 1;
    }
    c->batches++;
    c->items += n;
    if (--pull->credits == 0)
        consumers_pull_pop(c);
    return 1;
}

static void owner_fill(daemon_t *d)
{
    uint64_t start = clock_mono_ns();
    for (int progress = 1; progress;) {
        progress = 0;
        size_t n = d->consumers.n_all;
        for (size_t k = 0; k < n; k++) {
            consumer_t *c = d->consumers.all[(d->serve_cursor + k) % n];
            if (c->dead || c->n_pulls == 0)
                continue;
            uint64_t now = clock_mono_ns();
            if (now - start > DAEMON_FILL_BUDGET_NS)
                return; /* invariant 4 */
            progress |= owner_fill_one(d, c, now);
        }
        if (n != 0)
            d->serve_cursor = (d->serve_cursor + 1) % n;
    }
}

/* ---- timers --------------------------------------------------------------------------------- */

static void owner_timers(daemon_t *d)
{
    uint64_t now = clock_mono_ns();
    /* If this loop itself was stalled (the daemon stopped, swapped, starved of CPU) for half a
     * dead-after period, heartbeats sent meanwhile may still sit in the NATS client's queues:
     * liveness restarts now rather than declaring every consumer dead for the daemon's pause. */
    if (d->last_timers_ns != 0 && now - d->last_timers_ns > ms_ns(d->cfg.dead_after_ms) / 2) {
        daemon_log(LOG_WARN,
                   "the owner loop stalled for %" PRIu64 " ms: consumer liveness restarts",
                   (now - d->last_timers_ns) / 1000000);
        for (size_t i = 0; i < d->consumers.n_all; i++)
            d->consumers.all[i]->last_seen_ns = now;
    }
    d->last_timers_ns = now;
    if (now >= d->next_tick_ns) {
        owner_orphans_retry(d);
        sched_tick(d->sched);
        d->next_tick_ns = now + LANES_TICK_NS;
        consumers_prune(&d->consumers, now, DAEMON_DEAD_KEEP_PERIODS * ms_ns(d->cfg.dead_after_ms));
    }
    for (size_t i = 0; i < d->consumers.n_all; i++) {
        consumer_t *c = d->consumers.all[i];
        if (c->dead)
            continue;
        if (now - c->last_seen_ns > ms_ns(d->cfg.dead_after_ms)) {
            daemon_log(LOG_WARN,
                       "consumer %s (%s) silent for %" PRIu64 " ms: dead; %zu batches returned",
                       c->id, c->name, (now - c->last_seen_ns) / 1000000, c->n_inflight);
            owner_consumer_release(d, c, 1);
            c->dead = 1;
            d->counters.consumers_declared_dead++;
            continue;
        }
        for (size_t j = c->n_inflight; j-- > 0;) {
            if (c->inflight[j].deadline_ns <= now) {
                daemon_log(LOG_INFO, "batch %" PRIu64 " of %s passed its ack deadline: returned",
                           c->inflight[j].batch_id, c->id);
                d->counters.batches_expired_ack_deadline++;
                owner_return_batch(d, c, c->inflight[j].batch_id);
            }
        }
        for (size_t j = 0; j < c->n_pulls;) {
            if (c->pulls[j].expires_ns <= now) {
                owner_batch_status(d, c->pulls[j].reply, CODEC_BATCH_EXPIRED, "");
                consumers_pull_del(c, j);
            } else {
                j++;
            }
        }
    }
}

/* The earliest moment a timer needs the loop, capped so the tick stays regular. */
static uint64_t owner_next_wake(daemon_t *d)
{
    uint64_t wake = d->next_tick_ns;
    for (size_t i = 0; i < d->consumers.n_all; i++) {
        const consumer_t *c = d->consumers.all[i];
        if (c->dead)
            continue;
        uint64_t dead_at = c->last_seen_ns + ms_ns(d->cfg.dead_after_ms) + 1;
        if (dead_at < wake)
            wake = dead_at;
        for (size_t j = 0; j < c->n_inflight; j++)
            wake = c->inflight[j].deadline_ns < wake ? c->inflight[j].deadline_ns : wake;
        for (size_t j = 0; j < c->n_pulls; j++)
            wake = c->pulls[j].expires_ns < wake ? c->pulls[j].expires_ns : wake;
    }
    return wake;
}

/* ---- the loop ------------------------------------------------------------------------------- */

static void owner_scan_id(void *ctx, const store_view_t *v)
{
    daemon_t *d = ctx;
    if (v->id_len != 0)
        dedupe_add(&d->dedupe, v->id_view, v->id_len, clock_mono_ns());
}

daemon_status_t daemon_create(const daemon_config_t *cfg, daemon_t **out)
{
    daemon_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return DAEMON_ENOMEM;
    d->cfg = *cfg;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cond, NULL);
    consumers_init(&d->consumers);
    dedupe_init(&d->dedupe, ms_ns(cfg->dedupe_window_ms));
    daemon_status_t st = DAEMON_ESTORE;
    store_status_t sst;
    if (cfg->store_memory) {
        sst = store_open_memory(&d->store);
    } else {
        store_disk_config_t dc = {
            .dir = cfg->data_dir,
            .segment_max_bytes = cfg->segment_max_bytes,
            .durability = cfg->durability_power ? STORE_DURABLE_POWER : STORE_DURABLE_PROCESS,
            .log = owner_store_log,
        };
        store_recovery_t rep;
        sst = store_open_disk(&dc, &rep, &d->store);
        if (sst == STORE_OK)
            daemon_log(
                LOG_INFO, "store %s: %" PRIu64 " items (%" PRIu64 " tokens) recovered in %.3f s",
                cfg->data_dir, rep.entries_live, rep.tokens_live, (double)rep.elapsed_ns / 1e9);
    }
    if (sst != STORE_OK) {
        daemon_log(LOG_ERROR, "cannot open the store: %s", store_status_str(sst));
        goto out;
    }
    sched_config_t sc = {.clock = owner_clock,
                         .max_deliveries = cfg->max_deliveries,
                         .starvation_ns = ms_ns(cfg->starvation_ms)};
    sched_status_t schst = sched_create(&sc, d->store, &d->sched);
    if (schst != SCHED_OK) {
        daemon_log(LOG_ERROR, "cannot restore the scheduler: %s", sched_status_str(schst));
        goto out;
    }
    store_queue_t *q = NULL;
    while (store_queue_next(d->store, q, &q, NULL, NULL)) {
        if (store_queue_scan(d->store, q, owner_scan_id, d) != STORE_OK)
            goto out;
    }
    d->started_ns = clock_mono_ns();
    *out = d;
    return DAEMON_OK;
out:
    daemon_destroy(d);
    return st;
}

void daemon_destroy(daemon_t *d)
{
    if (d == NULL)
        return;
    for (ev_t *ev = d->head, *next; ev != NULL; ev = next) {
        next = ev->next;
        ev_destroy(ev);
    }
    free(d->orphans);
    sched_destroy(d->sched);
    store_close(d->store);
    consumers_fini(&d->consumers);
    dedupe_fini(&d->dedupe);
    pthread_cond_destroy(&d->cond);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static ev_t *owner_take(daemon_t *d)
{
    uint64_t wake = owner_next_wake(d);
    uint64_t now = clock_mono_ns();
    uint64_t wait = wake > now ? wake - now : 0;
    if (wait > DAEMON_FILL_BUDGET_NS)
        wait = DAEMON_FILL_BUDGET_NS;
    pthread_mutex_lock(&d->lock);
    if (d->head == NULL && wait > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + wait;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&d->cond, &d->lock, &ts);
    }
    ev_t *list = d->head;
    d->head = d->tail = NULL;
    d->queued_events = 0;
    pthread_mutex_unlock(&d->lock);
    return list;
}

daemon_status_t daemon_run(daemon_t *d)
{
    d->next_tick_ns = clock_mono_ns() + LANES_TICK_NS;
    daemon_status_t result = DAEMON_OK;
    int stop = 0;
    while (!stop) {
        replies_t deferred = {0};
        for (ev_t *ev = owner_take(d), *next; ev != NULL; ev = next) {
            next = ev->next;
            switch (ev->kind) {
            case EV_SUBMIT:
                owner_submit(d, ev, &deferred);
                break;
            case EV_REGISTER:
                owner_register(d, ev);
                break;
            case EV_PULL:
                owner_pull(d, ev);
                break;
            case EV_ACK:
                owner_ack(d, ev, &deferred);
                break;
            case EV_HEARTBEAT:
                owner_heartbeat(d, ev);
                break;
            case EV_BYE:
                owner_bye(d, ev, &deferred);
                break;
            case EV_STATS:
                owner_stats(d, ev);
                break;
            case EV_DISCONNECTED:
                owner_disconnected(d);
                break;
            case EV_STOP:
                stop = 1;
                break;
            }
            ev_destroy(ev);
        }
        store_status_t fst = store_flush(d->store);
        if (fst != STORE_OK) {
            /* invariant 1: nothing of this turn is acknowledged */
            daemon_log(LOG_ERROR, "flushing the store failed (%s): stopping; restart to recover",
                       store_status_str(fst));
            replies_free(&deferred);
            result = DAEMON_ESTORE;
            break;
        }
        replies_send(d, &deferred);
        if (stop)
            break;
        owner_timers(d);
        owner_fill(d);
    }
    return result;
}
