/*
 * dispatch.c - filling consumers' pulls with batches, and dead letters.
 *
 * Invariants:
 *   1. A batch is committed only after the publish call for it returned OK; a batch that could
 *      not be published leaves its items queued (sched_fill only peeks).
 *   2. Every committed batch is in flight under its consumer's worker with an ack deadline (the
 *      core's one record of it, sched.c invariant 10).
 *   3. A fill never runs longer than DAEMON_FILL_BUDGET_NS before events are serviced again.
 *   4. Consumers with open pulls are served round-robin, one batch each per round, starting one
 *      further each fill, so no consumer of a busy model starves another.
 *   5. A pull the scheduler holds back (cache affinity: a worker waits for its warm shapes
 *      before missing on a small cold queue) is filled again by the time the scheduler names
 *      (sched_retry_ns): the turn's wait ends by then (turn.c invariant 3).
 *   6. A consumer holding --limit-inflight batches gets no more until it settles one
 *      (JetStream's max_ack_pending): its records, and the work a heartbeat or ack of it costs,
 *      stay bounded whatever credits it asked for.
 *   7. A dead letter is completed through the settle path (inflight.c) like an acked batch.
 *   8. An item queued longer than its model's age limit (JetStream's max_age) is dead-lettered
 *      with the error "expired: ..." and counted (counters.expired, the model's series), by the
 *      instance serving the model, at most DISPATCH_EXPIRE_BUDGET per tick: a model's slot and
 *      its shapes' slots come back once its items are gone (models.c invariant 5).
 *   9. A Batch goes out with a reply subject of the daemon's (undelivered_reply), so that NATS
 *      says at once when no one subscribes to the pull's inbox (undelivered.c); a consumer told
 *      so is served nothing until its next message.
 *  10. A commit that fails after its batch or dead letter went out (out of memory, no room for
 *      the journal's delivery counts) leaves the items queued (what a merged batch's commit
 *      could not put back is returned by the orphans' retry, inflight.c invariant 2, or by a
 *      restart when even the retry's slot was refused): the batch is void (its ack answers
 * unknown_batch), the pull that took it is used, and nothing is dispatched or dead-lettered for
 * DISPATCH_COMMIT_PAUSE_NS, so a cause that lasts costs one void batch a pause, not one per pull
 * and turn.
 *
 * Rejected: publishing a batch after committing it. A failed publish would strand the items as
 * pending for a consumer that never saw them, until its ack deadline.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The article's failure: a 3,099-batch fill blocked the loop for 17 s and healthy workers were
 * declared dead. A fill yields after this long so heartbeats and acks are serviced. */
#define DAEMON_FILL_BUDGET_NS 100000000ull
/* Expired items dead-lettered per tick (invariant 8): each is a publish and a tombstone, so a
 * backlog of a million expired items goes in a few minutes without holding a turn for long. */
#define DISPATCH_EXPIRE_BUDGET 10000u
/* The encoding buffers are kept from batch to batch up to this size each (a malloc and free of
 * a batch-sized block per batch fragmented the heap); a larger batch's are given back. */
#define DISPATCH_SCRATCH_KEEP (1u << 20)
/* Invariant 10: long enough that a lasting failure (a full disk) sends workers a void batch
 * about once a second, short enough that a passing one (memory) delays the queue by little. */
#define DISPATCH_COMMIT_PAUSE_NS 1000000000ull

void dispatch_status(struct daemon *d, const char *subject, codec_batch_status_t status,
                     const char *error)
{
    codec_batch_t b = {.model = "", .status = status, .error = error};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_batch(&b, &buf, &len) == CODEC_OK)
        daemon_publish(d, subject, buf, len);
}

/* Grows *p to hold n objects of size bytes (*cap counts objects); 0 when memory is short. */
static int dispatch_grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap && *p != NULL)
        return 1;
    void *grown = realloc(*p, (n ? n : 1) * size);
    if (grown == NULL)
        return 0;
    *p = grown;
    *cap = n ? n : 1;
    return 1;
}

void dispatch_scratch_fini(dispatch_scratch_t *enc)
{
    free(enc->items);
    free(enc->replies);
    free(enc->buf);
    *enc = (dispatch_scratch_t){0};
}

/* Encodes a filled batch into d->enc.buf (a view valid until the next encode: *out_buf);
 * this_delivery is 1 for a delivery (the count includes it), 0 for a dead letter. 0 on
 * success. */
static int dispatch_encode(struct daemon *d, const sched_batch_t *b, codec_batch_status_t status,
                           const char *error, uint32_t this_delivery,
                           const uint8_t **out_buf /* out */, size_t *out_len /* out */)
{
    dispatch_scratch_t *enc = &d->enc;
    size_t total = 1;
    for (size_t i = 0; i < b->n; i++)
        total += b->items_view[i].payload_len + 1;
    if (!dispatch_grow((void **)&enc->items, &enc->items_cap, b->n, sizeof(*enc->items)) ||
        !dispatch_grow((void **)&enc->replies, &enc->replies_cap, total, 1))
        return -1;
    char *r = enc->replies;
    for (size_t i = 0; i < b->n; i++) {
        const store_view_t *v = &b->items_view[i];
        codec_batch_item_t *it = &enc->items[i];
        codec_bytes_t reply_to;
        uint64_t created = 0;
        *it = (codec_batch_item_t){
            .id = {v->id_len ? v->id_view : NULL, v->id_len},
            .tokens = v->tokens,
            .deliveries = v->deliveries + this_delivery,
            .prefix_tokens = v->prefix_tokens,
        };
        frame_decode(v->payload_view, v->payload_len, &reply_to, &it->payload, &created);
        if (reply_to.len != 0)
            memcpy(r, reply_to.ptr, reply_to.len);
        r[reply_to.len] = '\0';
        it->reply_to = r;
        r += reply_to.len + 1;
    }
    codec_batch_t cb = {.batch_id = b->batch_id,
                        .model = b->model_view,
                        .signature = b->signature,
                        .lane = b->lane,
                        .pad_to = b->pad_to,
                        .items = enc->items,
                        .n_items = b->n,
                        .status = status,
                        .error = error};
    size_t len = 0;
    if (codec_encode_batch_into(&cb, &enc->buf, &enc->buf_cap, &len) != CODEC_OK)
        return -1;
    *out_buf = enc->buf;
    *out_len = len;
    return 0;
}

/* After a batch is published: buffers grown past DISPATCH_SCRATCH_KEEP go back to malloc. */
static void dispatch_scratch_trim(dispatch_scratch_t *enc)
{
    if (enc->buf_cap > DISPATCH_SCRATCH_KEEP || enc->replies_cap > DISPATCH_SCRATCH_KEEP ||
        enc->items_cap * sizeof(*enc->items) > DISPATCH_SCRATCH_KEEP)
        dispatch_scratch_fini(enc);
}

/* Invariant 10: batch_id went out but its commit failed. */
static void dispatch_commit_failed(struct daemon *d, uint64_t batch_id, sched_status_t st,
                                   const char *what, int room)
{
    d->counters.commit_failures++;
    d->dispatch_resume_ns = daemon_now(d) + DISPATCH_COMMIT_PAUSE_NS;
    log_write(LOG_ERROR,
              "committing %s (batch %" PRIu64 ") after it was published failed: %s; it is void "
              "(its items go back to their queues) and dispatch pauses for %llu ms",
              what, batch_id, sched_status_str(st),
              (unsigned long long)(DISPATCH_COMMIT_PAUSE_NS / 1000000));
    inflight_orphan_stranded(d, batch_id, room);
}

/* Publishes, commits and completes a dead letter of m (expired: past its age limit, else
 * past the delivery limit); 1 if it went out (0: retried next turn). */
static int dispatch_dead_letter(struct daemon *d, model_t *m, const sched_batch_t *b, int expired)
{
    char subject[DAEMON_PREFIX_MAX + LIMITS_MODEL_MAX + 8], error[128];
    snprintf(subject, sizeof(subject), "%s.dead.%s", d->cfg.prefix, b->model_view);
    if (expired)
        snprintf(error, sizeof(error),
                 "expired: queued longer than the model's age limit (%" PRIu64 " ms)",
                 m->age_ns / 1000000);
    else
        snprintf(error, sizeof(error), "delivery_limit: delivered %" PRIu32 " times",
                 b->items_view[0].deliveries);
    const uint8_t *buf = NULL;
    size_t len = 0;
    int rc = dispatch_encode(d, b, CODEC_BATCH_ERROR, error, 0, &buf, &len) != 0 ||
             daemon_send(d, subject, NULL, buf, len) != 0;
    dispatch_scratch_trim(&d->enc);
    if (rc) {
        d->counters.publish_failures++;
        return 0;
    }
    uint64_t id = b->batch_id;
    metrics_batch(d, m, b, 0, expired ? METRICS_EXPIRED : METRICS_DEAD_LETTER);
    int room = inflight_orphan_reserve(d);
    sched_status_t st = sched_commit(d->sched, b);
    if (st != SCHED_OK) {
        dispatch_commit_failed(d, id, st, "a dead letter", room); /* again after the pause */
        return 0;
    }
    if (inflight_settle(d, m, id, INFLIGHT_COMPLETE, NULL, 0, NULL) != SCHED_OK) {
        /* what did not complete goes back to its queue, and is dead-lettered again */
        (void)inflight_settle(d, m, id, INFLIGHT_RETURN, NULL, 0, NULL);
        return 0;
    }
    d->counters.dead_lettered++;
    if (expired) {
        d->counters.expired++;
        m->expired++;
    } else {
        log_write(LOG_WARN, "an item of model %s reached the delivery limit: sent to %s", m->name,
                  subject);
    }
    return 1;
}

void dispatch_expire(struct daemon *d)
{
    uint64_t now = daemon_now(d);
    uint32_t done = 0;
    if (now < d->dispatch_resume_ns) /* invariant 10 */
        return;
    for (size_t i = 0; i < d->models.n && done < DISPATCH_EXPIRE_BUDGET; i++) {
        model_t *m = d->models.all[i];
        if (m->items == 0 || now < m->age_ns || !models_serving(d, m))
            continue;
        uint64_t before = m->expired;
        sched_batch_t b;
        while (done < DISPATCH_EXPIRE_BUDGET &&
               sched_fill_expired(d->sched, m->core, now - m->age_ns, &b) == SCHED_OK &&
               dispatch_dead_letter(d, m, &b, 1))
            done++;
        if (m->expired != before) /* one line per model and tick, not per item */
            log_write(LOG_WARN,
                      "%" PRIu64 " items of model %s expired (queued longer than %" PRIu64
                      " ms): sent to %s.dead.%s",
                      m->expired - before, m->name, m->age_ns / 1000000, d->cfg.prefix, m->name);
    }
}

/* One batch for the consumer's oldest pull; 1 if anything moved. */
static int dispatch_one(struct daemon *d, consumer_t *c, uint64_t now)
{
    const char *reply = consumers_pull_reply(c);
    model_t *m = consumers_model_rec(c);
    sched_consumer_t sc = {m->core, *consumers_contract(c), consumers_worker(c)};
    sched_batch_t b;
again:;
    sched_status_t st = sched_fill(d->sched, &sc, &b);
    if (st == SCHED_EEMPTY) {
        uint64_t retry = sched_retry_ns(d->sched);
        if (retry != 0 && (d->retry_ns == 0 || retry < d->retry_ns))
            d->retry_ns = retry; /* invariant 5 */
        return 0;
    }
    if (st != SCHED_OK) {
        log_write(LOG_ERROR, "filling a batch for %s failed: %s", consumers_id(c),
                  sched_status_str(st));
        return 0;
    }
    if (b.dead_letter)
        return dispatch_dead_letter(d, m, &b, 0);
    const uint8_t *buf = NULL;
    size_t len = 0;
    if (dispatch_encode(d, &b, CODEC_BATCH_OK, "", 1, &buf, &len) != 0) {
        log_write(LOG_ERROR, "encoding a batch failed: out of memory");
        return 0;
    }
    char nr[DAEMON_UNDELIVERED_REPLY_MAX];
    int asks = undelivered_reply(d, c, b.batch_id, nr, sizeof(nr)); /* invariant 9 */
    int rc = daemon_send(d, reply, asks ? nr : NULL, buf, len);
    dispatch_scratch_trim(&d->enc);
    if (rc != 0) {
        /* invariant 1: not committed, the items stay queued */
        d->counters.publish_failures++;
        if (b.n > 1) { /* e.g. over the server's max_payload: try fewer items */
            sc.contract.max_batch_size = (uint32_t)(b.n / 2);
            goto again;
        }
        dispatch_status(d, reply, CODEC_BATCH_ERROR,
                        "publish_failed: the batch could not be published");
        consumers_pull_pop(c);
        return 1;
    }
    uint64_t batch_id = b.batch_id;
    size_t n = b.n;
    /* the metrics before the commit, while the batch's views are valid (a failed commit is
     * logged below) */
    metrics_batch(d, m, &b, consumers_shape_note(c, b.signature), METRICS_DELIVERY);
    int room = inflight_orphan_reserve(d);
    if ((st = sched_commit(d->sched, &b)) != SCHED_OK) {
        dispatch_commit_failed(d, batch_id, st, "a batch", room);
        consumers_pull_use(c); /* the void batch answered it */
        return 0;
    }
    (void)sched_batch_deadline_set(d->sched, batch_id,
                                   now + daemon_ms_ns(d->cfg.ack_wait_ms)); /* invariant 2 */
    consumers_dispatched_note(c, n);
    log_write(LOG_DEBUG, "dispatched batch %" PRIu64 " of model %s (%zu items) to %s", batch_id,
              consumers_model(c), n, consumers_id(c));
    consumers_pull_use(c);
    return 1;
}

void dispatch_fill(struct daemon *d)
{
    uint64_t start = daemon_now(d);
    d->retry_ns = 0;
    for (int progress = 1; progress;) {
        progress = 0;
        size_t n = consumers_count(d->consumers);
        for (size_t k = 0; k < n; k++) {
            consumer_t *c = consumers_at(d->consumers, (d->serve_cursor + k) % n);
            if (consumers_dead(c) || consumers_pull_reply(c) == NULL ||
                consumers_inbox_is_silent(c) || /* invariant 9 */
                !models_serving(d, consumers_model_rec(c)) ||
                consumers_inflight_count(c) >= d->cfg.limits.inflight) /* invariant 6 */
                continue;
            uint64_t now = daemon_now(d);
            if (now - start > DAEMON_FILL_BUDGET_NS)
                return;                        /* invariant 3 */
            if (now < d->dispatch_resume_ns) { /* invariant 10: the turn wakes when it ends */
                d->retry_ns = d->dispatch_resume_ns;
                return;
            }
            progress |= dispatch_one(d, c, now);
        }
        if (n != 0)
            d->serve_cursor = (d->serve_cursor + 1) % n;
    }
}
