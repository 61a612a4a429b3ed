/*
 * requests.c - the consumer-facing subjects: register, pull, ack, heartbeat, bye, stats, and
 * the loss of the daemon's own connection.
 *
 * Invariants:
 *   1. Any message naming a live consumer refreshes its liveness (consumers_touch), whatever
 *      its body and whether or not it decodes.
 *   2. An ack changes state only for a batch that the acking consumer holds in flight, and only
 *      when every position it names exists; otherwise it changes nothing and says why.
 *   3. AckReply and bye replies are deferred to the turn's flush (the tombstones are durable
 *      first); Registered and Batch status messages change nothing durable and go at once.
 *   4. With --models, ids this instance never issued get no answer at all: the instance that
 *      issued them answers.
 *   6. A consumer is found by the secret its subjects carry (consumers.c invariant 1), never
 *      by its public id: Registered names the subjects with the secret, on the registering
 *      client's reply subject only; every log line, stats and metrics show the public id.
 *   7. Every error a reply carries is "code_word: text for people".
 *   8. A pull waits at most --limit-pull-expires-ms and asks for at most
 *      REQUESTS_PULL_CREDITS_MAX batches: longer or larger ones are cut to those, not refused
 *      (the consumer pulls again, as after any expiry).
 *   5. Every count a consumer controls is capped (limits.c): its name and contract at
 *      register, consumers registered, open pulls per consumer and each one's subject (kept
 *      while the pull is open: a reply_to's cap), positions per ack, ids per heartbeat; past a
 *      cap the message changes nothing and gets the cap's own word. (A pull's
 *      credits are a counter: batches in flight per consumer are what dispatch bounds.)
 *   9. Every refused Register counts under its word in counters.rejected, and a Pull, Ack or
 *      Heartbeat of a live consumer that does not decode under `malformed`, as a refused Submit
 *      does (intake.c invariant 4).
 *
 * Rejected: answering unknown ids with --models set. Every instance would then answer every
 * other instance's consumers with "unknown_consumer" and they would re-register in a loop.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"
#include "common/version.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUESTS_PULL_EXPIRES_DEFAULT_MS 30000u
/* Batches one pull may ask for (invariant 8): far above what a consumer holds at once
 * (--limit-inflight), and a bound on the answers one request gets. */
#define REQUESTS_PULL_CREDITS_MAX 65536u

/* With --models, another instance may own this consumer id: a pull, ack or bye of an id never
 * seen gets no reply and is not counted, since its owner answers it. A heartbeat has no reply
 * to withhold and is counted in unknown_consumer whatever its owner (subjects.md, P.hb). */
static int requests_not_mine(struct daemon *d, const char *id)
{
    return d->cfg.models != NULL && consumers_find(d->consumers, id) == NULL;
}

/* A live consumer known by id, refreshed; NULL (and counted) otherwise. */
static consumer_t *requests_consumer(struct daemon *d, const char *id)
{
    consumer_t *c = consumers_touch(d->consumers, id, daemon_now(d));
    if (c == NULL)
        d->counters.unknown_consumer++;
    return c;
}

static void requests_defer_ack_reply(replies_t *deferred, const ev_t *ev,
                                     const codec_ack_reply_t *out)
{
    if (ev->reply == NULL)
        return;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_ack_reply(out, &buf, &len) == CODEC_OK)
        replies_add(deferred, ev->reply, buf, len);
}

void requests_register(struct daemon *d, const ev_t *ev)
{
    d->counters.registers++;
    codec_register_t *reg = NULL;
    codec_registered_t out = {0};
    char err[160], subjects[4][DAEMON_PREFIX_MAX + CONSUMERS_ID_LEN + 8];
    consumer_t *c = NULL;
    codec_status_t cst = codec_decode_register(ev->data, ev->len, ev->token, &reg);
    if (cst == CODEC_OK && !models_serving(d, models_find(d, reg->model))) {
        codec_register_destroy(reg); /* invariant 4: the instance that owns the model answers */
        return;
    }
    if (cst == CODEC_OK) { /* invariant 5 */
        cst = codec_register_caps_check(reg, &d->caps);
        if (cst == CODEC_OK && consumers_count(d->consumers) >= d->cfg.limits.consumers &&
            !consumers_forget_dead(d->consumers))
            cst = CODEC_ETOO_MANY_CONSUMERS; /* every one of them alive */
        if (cst == CODEC_OK && !models_allowed(d, reg->model))
            cst = CODEC_EMODEL_NOT_ALLOWED; /* never too_many_models: models.c invariant 5 */
    }
    if (cst != CODEC_OK) { /* invariant 9 */
        d->counters.rejected[cst]++;
        snprintf(err, sizeof(err), "%s: %s", codec_status_reason(cst), codec_status_str(cst));
        out.error = err;
    } else {
        packer_contract_t k = {reg->max_batch_size, reg->max_batch_tokens, reg->max_input_tokens};
        sched_worker_config_t wc = {reg->batch_fixed_us, reg->token_ns, reg->cache_shapes};
        sched_worker_t *w = NULL;
        model_t *m = models_get(d, reg->model);
        if (m == NULL || sched_worker_create(d->sched, m->core, &wc, &w) != SCHED_OK ||
            consumers_add(d->consumers, reg->model, reg->name, k, daemon_now(d), &c) != DAEMON_OK) {
            sched_worker_destroy(d->sched, w);
            out.error = "no_memory: the daemon could not register the consumer";
        } else {
            consumers_worker_set(c, w);
            consumers_model_set(c, m);
            models_consumer_note(d, m, +1);
            const char *p = d->cfg.prefix, *id = consumers_id(c), *secret = consumers_secret(c);
            static const char *const verbs[4] = {"pull", "ack", "hb", "bye"};
            for (int i = 0; i < 4; i++) /* invariant 6 */
                snprintf(subjects[i], sizeof(subjects[i]), "%s.%s.%s", p, verbs[i], secret);
            out = (codec_registered_t){
                id,          subjects[0],         subjects[1],          subjects[2],
                subjects[3], d->cfg.heartbeat_ms, d->cfg.dead_after_ms, d->cfg.ack_wait_ms,
                "",          VERSION_PROTOCOL};
            if (log_budget_allow(&d->consumer_lines, LOG_INFO, daemon_now(d), "consumers"))
                log_write(
                    LOG_INFO,
                    "consumer %s (%s) registered for model %s: batch %" PRIu32 " items, %" PRIu32
                    " padded tokens, input %" PRIu32 "; cost %s; cache of %" PRIu32 " shapes",
                    id, consumers_name(c), consumers_model(c), k.max_batch_size, k.max_batch_tokens,
                    k.max_input_tokens,
                    wc.batch_fixed_us || wc.token_ns ? "declared" : "estimated from its batches",
                    wc.cache_shapes ? wc.cache_shapes : 1);
        }
    }
    out.protocol_version = VERSION_PROTOCOL;
    if (out.error != NULL && out.error[0] != '\0')
        service_error(d, EV_REGISTER, ev->token, out.error);
    if (ev->reply != NULL) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (codec_encode_registered(&out, &buf, &len) == CODEC_OK)
            daemon_publish(d, ev->reply, buf, len);
    }
    codec_register_destroy(reg);
}

static void requests_pull_error(struct daemon *d, const ev_t *ev, const char *error)
{
    service_error(d, EV_PULL, NULL, error);
    dispatch_status(d, ev->reply, CODEC_BATCH_ERROR, error);
}

void requests_pull(struct daemon *d, const ev_t *ev)
{
    d->counters.pulls++;
    if (requests_not_mine(d, ev->token))
        return;
    consumer_t *c = requests_consumer(d, ev->token);
    if (ev->reply == NULL)
        return;
    if (c == NULL) {
        requests_pull_error(d, ev, "unknown_consumer: register again to get a consumer id");
        return;
    }
    codec_pull_t *p = NULL;
    if (codec_decode_pull(ev->data, ev->len, &p) != CODEC_OK) {
        d->counters.rejected[CODEC_EMALFORMED]++; /* invariant 9 */
        requests_pull_error(d, ev, "malformed: Pull did not decode");
        return;
    }
    codec_status_t cst = CODEC_OK;
    if (strlen(ev->reply) > d->cfg.limits.reply_to_bytes)
        cst = CODEC_EPULL_SUBJECT_TOO_LONG; /* every open pull keeps its subject */
    else if (consumers_pull_count(c) >= d->cfg.limits.pulls)
        cst = CODEC_ETOO_MANY_PULLS;
    if (cst != CODEC_OK) { /* invariant 5 */
        char err[160];
        snprintf(err, sizeof(err), "%s: %s", codec_status_reason(cst), codec_status_str(cst));
        d->counters.rejected[cst]++;
        codec_pull_destroy(p);
        requests_pull_error(d, ev, err);
        return;
    }
    uint32_t credits = p->max_batches ? p->max_batches : 1;
    uint32_t wait = p->expires_ms ? p->expires_ms : REQUESTS_PULL_EXPIRES_DEFAULT_MS;
    codec_pull_destroy(p);
    credits = credits < REQUESTS_PULL_CREDITS_MAX ? credits : REQUESTS_PULL_CREDITS_MAX;
    wait = wait < d->cfg.limits.pull_expires_ms ? wait : d->cfg.limits.pull_expires_ms;
    if (consumers_pull_add(c, ev->reply, credits, daemon_now(d) + daemon_ms_ns(wait)) != DAEMON_OK)
        requests_pull_error(d, ev, "no_memory: the daemon is out of memory");
}

/* Completes and returns the positions an ack names; the positions were checked. */
static void requests_settle(struct daemon *d, model_t *m, const codec_ack_t *ack,
                            codec_ack_reply_t *out)
{
    sched_settled_t done = {0};
    sched_status_t st = SCHED_OK;
    if (ack->all || ack->n_ack != 0) {
        st = inflight_settle(d, m, ack->batch_id, INFLIGHT_COMPLETE, ack->all ? NULL : ack->ack,
                             ack->all ? 0 : ack->n_ack, &done);
        out->acked += done.positions;
    }
    if (st == SCHED_OK && !ack->all && ack->n_nak != 0 && !done.closed) {
        st = inflight_settle(d, m, ack->batch_id, INFLIGHT_RETURN, ack->nak, ack->n_nak, &done);
        out->returned += done.positions;
    }
    if (st != SCHED_OK) /* positions were checked: only the store can fail here */
        out->error = "store_error: the store failed";
}

void requests_ack(struct daemon *d, const ev_t *ev, replies_t *deferred)
{
    d->counters.acks++;
    codec_ack_reply_t out = {.error = ""};
    codec_ack_t *ack = NULL;
    if (requests_not_mine(d, ev->token))
        return;
    consumer_t *c = requests_consumer(d, ev->token);
    if (c == NULL) {
        out.unknown = 1;
        out.error = "unknown_consumer: this consumer id is unknown or was declared dead";
        goto reply;
    }
    if (codec_decode_ack(ev->data, ev->len, &ack) != CODEC_OK) {
        d->counters.rejected[CODEC_EMALFORMED]++; /* invariant 9 */
        out.unknown = 1;
        out.error = "malformed: Ack did not decode";
        goto reply;
    }
    if (codec_ack_caps_check(ack, &d->caps) != CODEC_OK) { /* invariant 5 */
        d->counters.rejected[CODEC_ETOO_MANY_POSITIONS]++;
        out.unknown = 1;
        out.error = "too_many_positions: an ack or nak list is longer than a batch can be; "
                    "nothing changed";
        goto reply;
    }
    sched_batch_info_t in;
    int mine = sched_batch_info(d->sched, ack->batch_id, &in) && in.worker == consumers_worker(c);
    if (!mine && ack->batch_id == 0 && models_held_elsewhere(d, consumers_model_rec(c))) {
        /* Another instance holds its model's lease: the batches it holds here settle until then
         * (and a resent ack of a settled one is still unknown_batch), but the probe, Ack{} for
         * batch 0, ends it as a bye would, so that it registers with the holder (subjects.md,
         * "Leases"): what it held goes back to its lanes here, its pulls are closed. */
        log_write(LOG_INFO, "consumer %s (%s): model %s is served by another instance: let go",
                  consumers_id(c), consumers_name(c), consumers_model(c));
        requests_consumer_end(d, c);
        consumers_kill(c);
        d->counters.unknown_consumer++;
        out.unknown = 1;
        out.error = "unknown_consumer: another instance holds the lease of this consumer's model: "
                    "register again";
        goto reply;
    }
    if (!mine) {
        d->counters.unknown_batch++;
        out.unknown = 1;
        out.error = "unknown_batch: not an in-flight batch of this consumer (settled, returned "
                    "after its deadline, or another consumer's)";
        goto reply;
    }
    if (ack->in_progress) {
        (void)sched_batch_deadline_set(d->sched, ack->batch_id,
                                       daemon_now(d) + daemon_ms_ns(d->cfg.ack_wait_ms));
        goto reply;
    }
    uint32_t bad = 0;
    for (size_t i = 0; !ack->all && i < ack->n_ack; i++)
        bad += ack->ack[i] >= in.positions;
    for (size_t i = 0; !ack->all && i < ack->n_nak; i++)
        bad += ack->nak[i] >= in.positions;
    if (bad != 0) { /* invariant 2 */
        out.unknown = bad;
        out.error = "unknown_position: a position is outside the batch; nothing changed";
        goto reply;
    }
    requests_settle(d, consumers_model_rec(c), ack, &out);
reply:
    if (out.error[0] != '\0')
        service_error(d, EV_ACK, NULL, out.error);
    requests_defer_ack_reply(deferred, ev, &out);
    codec_ack_destroy(ack);
}

void requests_heartbeat(struct daemon *d, const ev_t *ev)
{
    d->counters.heartbeats++;
    consumer_t *c = requests_consumer(d, ev->token);
    codec_heartbeat_t *hb = NULL;
    if (c == NULL)
        return;
    if (codec_decode_heartbeat(ev->data, ev->len, &hb) != CODEC_OK) {
        d->counters.rejected[CODEC_EMALFORMED]++; /* invariant 9 */
        return;
    }
    if (codec_heartbeat_caps_check(hb, &d->caps) != CODEC_OK) { /* invariant 5: liveness only */
        d->counters.rejected[CODEC_ETOO_MANY_IDS]++;
        codec_heartbeat_destroy(hb);
        return;
    }
    uint64_t deadline = daemon_now(d) + daemon_ms_ns(d->cfg.ack_wait_ms);
    for (size_t i = 0; i < hb->n_in_progress; i++) {
        sched_batch_info_t in;
        if (sched_batch_info(d->sched, hb->in_progress[i], &in) && in.worker == consumers_worker(c))
            (void)sched_batch_deadline_set(d->sched, hb->in_progress[i], deadline);
    }
    codec_heartbeat_destroy(hb);
}

void requests_bye(struct daemon *d, const ev_t *ev, replies_t *deferred)
{
    d->counters.byes++;
    if (requests_not_mine(d, ev->token))
        return;
    consumer_t *c = requests_consumer(d, ev->token);
    if (c != NULL) {
        requests_consumer_end(d, c);
        consumers_kill(c);
        if (log_budget_allow(&d->consumer_lines, LOG_INFO, daemon_now(d), "consumers"))
            log_write(LOG_INFO, "consumer %s (%s) left", consumers_id(c), consumers_name(c));
    }
    codec_ack_reply_t out = {
        .error = c != NULL ? ""
                           : "unknown_consumer: this consumer id is unknown or was declared dead; "
                             "register again"};
    requests_defer_ack_reply(deferred, ev, &out);
}

void requests_stats(struct daemon *d, const ev_t *ev)
{
    d->counters.stats_requests++;
    if (ev->reply == NULL)
        return;
    size_t len = 0;
    char *json = stats_json(d, ev->data, ev->len, &len);
    daemon_publish(d, ev->reply, (uint8_t *)json, len);
}

void requests_consumer_end(struct daemon *d, consumer_t *c)
{
    inflight_release(d, c, 1);
    sched_worker_destroy(d->sched, consumers_worker(c));
    consumers_worker_set(c, NULL);
    model_t *m = consumers_model_rec(c);
    consumers_model_set(c, NULL);
    if (m != NULL)
        models_consumer_note(d, m, -1); /* after: c no longer counts in its input_max */
}

void requests_disconnected(struct daemon *d)
{
    d->counters.disconnects++;
    for (size_t i = 0; i < consumers_count(d->consumers); i++)
        inflight_release(d, consumers_at(d->consumers, i), 0);
    log_write(LOG_WARN, "NATS connection lost: in-flight batches returned, pulls dropped; "
                        "consumers resume by pulling");
}
