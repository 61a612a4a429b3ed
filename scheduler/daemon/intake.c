/*
 * intake.c - submits: decode and validate, check the caps, dedupe, check the model's limits,
 * frame, store, answer.
 *
 * Invariants:
 *   1. Every item gets exactly one result, in the order of the Submit: its validation reason
 *      (codec_item_check, permanent), model_not_allowed (--allow-models), not_owner (with
 *      leases, a model this instance does not hold now), DUPLICATE, a refusal from the
 *      daemon's state (input_too_long, too_many_models, too_many_shapes, queue_full), a store
 *      refusal (store_full, store_error), or ACCEPTED. One bad item never affects the others.
 *   7. An item longer than the max_input_tokens of every live consumer of its model is
 *      input_too_long, not accepted: no worker registered now can run it (a model with no
 *      consumer accepts any length: its workers are not known yet).
 *   2. An item is ACCEPTED only after sched_submit stored it; its id enters the dedupe window
 *      then and not before, so a refused item can be retried with the same id.
 *   3. The SubmitReply is deferred to the turn's flush (replies.c): ACCEPTED is never said of
 *      an item the store has not made durable.
 *   4. Every rejection is counted under its reason (daemon_counters_t.rejected).
 *   8. A full disk is said in the log once when it starts refusing items (store_full) and once
 *      when it takes one again, with how many it refused: the counter alone left an operator
 *      without a line to find when it began.
 *   5. The reply fits what the server carries: ACCEPTED and DUPLICATE results carry their word
 *      and no text; a message whose reply could be larger even so (every id at its length,
 *      every result at the longest word) is refused whole as reply_too_large before anything
 *      is stored; a reply whose refusal texts would push it over is sent without them.
 *   6. A stats summary asked for meanwhile waits for at most one item, not for the message:
 *      the owner answers those between items (stats.c's invariant 5).
 *
 * Rejected: checking item rules here as well as in the codec. The codec's validation is the one
 * home of every rule a producer can break; what is checked here is the daemon's own state (the
 * window, the shapes and models it holds, the models' queues).
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Items whose dedupe index slots are asked for ahead of their own check: the window's index is
 * larger than the caches, so each check waited for its own miss (`perf annotate` of the daemon
 * under `lanesched-bench throughput`, docs/owner-thread.md); the restart's scan asks as many
 * ahead (daemon.c) for the same reason. Half as far ahead, the record a taken slot names is
 * asked for (its key is compared): the slot is cached by then. */
#define INTAKE_DEDUPE_AHEAD 16u

/* The reason a store failure gives the producer: a full disk is told apart (retry later) from
 * everything else, out of memory included (subjects.md: an operator has to look). */
static codec_status_t intake_store_reason(const struct daemon *d, sched_status_t st)
{
    if (st == SCHED_ESTORE && sched_store_status(d->sched) == STORE_ENOSPC)
        return CODEC_ESTORE_FULL;
    return CODEC_ESTORE_ERROR;
}

/* Counts a Submit refused whole, or with any item rejected, as an error of its endpoint. */
static void intake_error_note(struct daemon *d, const ev_t *ev, const codec_submit_reply_t *rep)
{
    char text[160];
    if (rep->error != NULL) {
        service_error(d, EV_SUBMIT, ev->token, rep->error);
        return;
    }
    for (size_t i = 0; i < rep->n_results; i++) {
        const codec_item_result_t *r = &rep->results[i];
        if (r->status == CODEC_ITEM_REJECTED) {
            snprintf(text, sizeof(text), "%s: %s", r->reason, r->error);
            service_error(d, EV_SUBMIT, ev->token, text);
            return;
        }
    }
}

/* The model's limits on what it holds (invariant 1): a new model past --limit-models (a model
 * holding no items and with no live consumer, while those holding items without one fill it), a
 * new shape past --limit-shapes or --limit-new-shapes of this message (*new_shapes counts them), a
 * full queue. m is the record of the model `name` (NULL: none yet). CODEC_OK when the item may be
 * stored. */
static codec_status_t intake_room(const struct daemon *d, const char *name, const model_t *m,
                                  uint64_t shape, uint64_t bytes, uint32_t *new_shapes)
{
    /* a model without a record may still hold shapes (its items gone, its lanes draining) */
    const sched_model_t *core = m != NULL ? m->core : sched_model_find(d->sched, name);
    if (models_admit(d, m) != CODEC_OK)
        return CODEC_ETOO_MANY_MODELS; /* models.c invariant 5 */
    if (sched_lanes_view(d->sched, core, shape) == NULL) {
        if ((core != NULL && sched_shape_count(d->sched, core) >= d->cfg.limits.shapes_per_model) ||
            *new_shapes >= d->cfg.limits.new_shapes ||
            sched_shape_count(d->sched, NULL) >= d->cfg.limits.shapes)
            return CODEC_ETOO_MANY_SHAPES;
        codec_status_t st = models_room(d, m, bytes);
        *new_shapes += st == CODEC_OK;
        return st;
    }
    return models_room(d, m, bytes);
}

/* One item that passed validation: the window, the limits, the store. *m is the model's record,
 * made when its first item is accepted (so refusals make none). */
static void intake_item(struct daemon *d, const ev_t *ev, model_t **m, const codec_work_item_t *it,
                        dedupe_key_t key, uint64_t now, uint32_t *new_shapes,
                        codec_item_result_t *r)
{
    if (dedupe_contains(&d->dedupe, key, now)) {
        r->status = CODEC_ITEM_DUPLICATE;
        r->reason = codec_status_reason(CODEC_DUPLICATE); /* invariant 5: no text */
        d->counters.duplicates++;
        return;
    }
    if (*m != NULL && (*m)->consumers != 0 && it->tokens > (*m)->input_max) { /* invariant 7 */
        r->status = CODEC_ITEM_REJECTED;
        r->reason = codec_status_reason(CODEC_EINPUT_TOO_LONG);
        r->error = codec_status_str(CODEC_EINPUT_TOO_LONG);
        d->counters.rejected[CODEC_EINPUT_TOO_LONG]++;
        return;
    }
    size_t flen = 0;
    uint8_t *framed = frame_encode(it->reply_to, it->payload, it->created_unix_ns,
                                   &d->frame_scratch, &d->frame_cap, &flen);
    codec_status_t why =
        framed != NULL ? intake_room(d, ev->token, *m, it->shape, it->id.len + flen, new_shapes)
                       : CODEC_ESTORE_ERROR; /* out of memory: an operator has to look */
    if (why == CODEC_OK && *m == NULL && (*m = models_get(d, ev->token)) == NULL)
        why = CODEC_ESTORE_ERROR; /* out of memory: an operator has to look */
    if (why == CODEC_OK) {
        sched_item_t si = {(*m)->core, it->shape, it->tokens,        it->id.ptr,     it->id.len,
                           framed,     flen,      it->prefix_tokens, it->max_wait_ms};
        sched_status_t sst = sched_submit(d->sched, &si, NULL);
        why = sst == SCHED_OK ? CODEC_OK : intake_store_reason(d, sst);
    }
    if (why != CODEC_OK) {
        r->status = CODEC_ITEM_REJECTED;
        r->reason = codec_status_reason(why);
        r->error = codec_status_str(why);
        d->counters.rejected[why]++;
        if (why == CODEC_ESTORE_FULL && d->full_refused++ == 0) /* invariant 8 */
            log_write(LOG_WARN,
                      "the data directory is full: items are refused with store_full until "
                      "completed items free space or an operator does (counted in "
                      "rejected.store_full)");
        return;
    }
    if (d->full_refused != 0) {
        log_write(LOG_INFO,
                  "the data directory takes items again, after %" PRIu64 " refused with store_full",
                  d->full_refused);
        d->full_refused = 0;
    }
    r->status = CODEC_ITEM_ACCEPTED;
    metrics_received(d->metrics, *m, 1, it->tokens);
    models_stored(d, *m, it->id.len + flen);
    if (dedupe_add(&d->dedupe, key, now) != DAEMON_OK)
        log_write(LOG_WARN, "dedupe window full: out of memory");
}

/* Encodes the reply and queues it for after the flush; without the refusal texts when they
 * would make it larger than the server carries (invariant 5). */
static void intake_reply(struct daemon *d, const ev_t *ev, codec_submit_reply_t *rep,
                         codec_item_result_t *results, replies_t *deferred)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_submit_reply(rep, &buf, &len) != CODEC_OK)
        return;
    if (len > d->reply_max && results != NULL) {
        free(buf);
        buf = NULL;
        for (size_t i = 0; i < rep->n_results; i++)
            results[i].error = "";
        if (codec_encode_submit_reply(rep, &buf, &len) != CODEC_OK)
            return;
    }
    replies_add(deferred, ev->reply, buf, len);
}

void intake_submit(struct daemon *d, const ev_t *ev, replies_t *deferred)
{
    d->counters.submits++;
    codec_limits_t lim = {.model = ev->token,
                          .max_payload = d->cfg.max_payload,
                          .max_reply_to = d->cfg.limits.reply_to_bytes,
                          .caps = &d->caps};
    codec_submit_t *sub = NULL;
    codec_status_t cst = codec_decode_submit(ev->data, ev->len, &lim, &sub);
    codec_submit_reply_t rep = {0};
    codec_item_result_t *results = NULL;
    char errbuf[160];
    if (cst == CODEC_OK && ev->reply != NULL && codec_submit_reply_bound(sub) > d->reply_max)
        cst = CODEC_EREPLY_TOO_LARGE; /* invariant 5: nothing stored */
    if (cst != CODEC_OK)              /* a decode's other failures (EINVAL) are the message's */
        d->counters.rejected[cst == CODEC_EINVAL ? CODEC_EMALFORMED : cst]++;
    if (cst != CODEC_OK) {
        snprintf(errbuf, sizeof(errbuf), "%s: %s", codec_status_reason(cst), codec_status_str(cst));
        rep.error = errbuf;
        goto reply;
    }
    /* the results, then the items' dedupe keys (one allocation) */
    results = calloc(sub->n_items ? sub->n_items : 1, sizeof(*results) + sizeof(dedupe_key_t));
    if (results == NULL) {
        rep.error = "no_memory: the daemon is out of memory";
        goto reply;
    }
    dedupe_key_t *keys = (dedupe_key_t *)(results + (sub->n_items ? sub->n_items : 1));
    uint64_t seed = dedupe_seed(ev->token); /* every accepted item is of the subject's model */
    for (size_t i = 0; i < sub->n_items; i++) {
        keys[i] = dedupe_key(seed, sub->items[i].id.ptr, sub->items[i].id.len);
        if (i < INTAKE_DEDUPE_AHEAD)
            dedupe_prefetch(&d->dedupe, keys[i], 0);
    }
    uint64_t now = d->turn_ns;              /* the turn's instant: one dedupe run for its items */
    model_t *m = models_find(d, ev->token); /* the one lookup of the message's model */
    int served = models_serving(d, m);      /* a lease lost or lapsed: refuse (fencing) */
    int allowed = models_allowed(d, ev->token);
    uint32_t new_shapes = 0;
    for (size_t i = 0; i < sub->n_items; i++) {
        const codec_work_item_t *it = &sub->items[i];
        codec_item_result_t *r = &results[i];
        *r = (codec_item_result_t){.id = it->id, .reason = "ok", .error = ""};
        if (i + INTAKE_DEDUPE_AHEAD < sub->n_items)
            dedupe_prefetch(&d->dedupe, keys[i + INTAKE_DEDUPE_AHEAD], 0);
        if (i + INTAKE_DEDUPE_AHEAD / 2 < sub->n_items)
            dedupe_prefetch(&d->dedupe, keys[i + INTAKE_DEDUPE_AHEAD / 2], 1);
        stats_waiting_answer(d, 0); /* between two items the state is whole (invariant 6) */
        codec_status_t why = it->status != CODEC_OK ? it->status
                             : !allowed             ? CODEC_EMODEL_NOT_ALLOWED
                             : !served              ? CODEC_ENOT_OWNER
                                                    : CODEC_OK;
        if (why == CODEC_OK) {
            intake_item(d, ev, &m, it, keys[i], now, &new_shapes, r);
            continue;
        }
        r->status = CODEC_ITEM_REJECTED;
        r->reason = codec_status_reason(why);
        r->error = codec_status_str(why);
        d->counters.rejected[why]++;
    }
    rep.results = results;
    rep.n_results = sub->n_items;
reply:
    intake_error_note(d, ev, &rep);
    if (ev->reply != NULL)
        intake_reply(d, ev, &rep, results, deferred);
    free(results);
    codec_submit_destroy(sub);
}
