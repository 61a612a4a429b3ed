/*
 * intake.c - submits: decode and validate, dedupe, frame, store, answer.
 *
 * Invariants:
 *   1. Every item gets exactly one result, in the order of the Submit: its validation reason
 *      (codec_item_check, permanent), DUPLICATE, a store refusal (store_full, store_error), or
 *      ACCEPTED. One bad item never affects the others.
 *   2. An item is ACCEPTED only after sched_submit stored it; its id enters the dedupe window
 *      then and not before, so a refused item can be retried with the same id.
 *   3. The SubmitReply is deferred to the turn's flush (replies.c): ACCEPTED is never said of
 *      an item the store has not made durable.
 *   4. Every rejection is counted under its reason (daemon_counters_t.rejected).
 *
 * Rejected: checking limits here as well as in the codec. The codec's validation is the one
 * home of every rule a producer can break; the scheduler's own argument checks only catch bugs.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>

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

void intake_submit(struct daemon *d, const ev_t *ev, replies_t *deferred)
{
    d->counters.submits++;
    codec_limits_t lim = {.model = ev->token, .max_payload = d->cfg.max_payload};
    codec_submit_t *sub = NULL;
    codec_status_t cst = codec_decode_submit(ev->data, ev->len, &lim, &sub);
    codec_submit_reply_t rep = {0};
    codec_item_result_t *results = NULL;
    char errbuf[160];
    if (cst != CODEC_OK) {
        d->counters.rejected[cst == CODEC_ENOMEM ? CODEC_ENOMEM : CODEC_EMALFORMED]++;
        snprintf(errbuf, sizeof(errbuf), "%s: %s", codec_status_reason(cst), codec_status_str(cst));
        rep.error = errbuf;
        goto reply;
    }
    results = calloc(sub->n_items ? sub->n_items : 1, sizeof(*results));
    if (results == NULL) {
        rep.error = "no_memory: the daemon is out of memory";
        goto reply;
    }
    uint64_t now = daemon_now(d);
    int served = serving_model(d, ev->token); /* a lease lost or lapsed: refuse (fencing) */
    for (size_t i = 0; i < sub->n_items; i++) {
        const codec_work_item_t *it = &sub->items[i];
        codec_item_result_t *r = &results[i];
        *r = (codec_item_result_t){.id = it->id, .reason = "ok", .error = ""};
        codec_status_t why = it->status == CODEC_OK && !served ? CODEC_ENOT_OWNER : it->status;
        if (why == CODEC_OK && dedupe_contains(&d->dedupe, it->id.ptr, it->id.len, now)) {
            r->status = CODEC_ITEM_DUPLICATE;
            r->reason = codec_status_reason(CODEC_DUPLICATE);
            r->error = codec_status_str(CODEC_DUPLICATE);
            d->counters.duplicates++;
            continue;
        }
        if (why == CODEC_OK) {
            size_t flen = 0;
            uint8_t *framed = frame_encode(it->reply_to, it->payload, it->created_unix_ns,
                                           &d->frame_scratch, &d->frame_cap, &flen);
            sched_item_t si = {ev->token,  it->shape, it->tokens, it->id.ptr,
                               it->id.len, framed,    flen};
            sched_status_t sst = framed ? sched_submit(d->sched, &si, NULL) : SCHED_ENOMEM;
            why = sst == SCHED_OK ? CODEC_OK : intake_store_reason(d, sst);
        }
        if (why != CODEC_OK) {
            r->status = CODEC_ITEM_REJECTED;
            r->reason = codec_status_reason(why);
            r->error = codec_status_str(why);
            d->counters.rejected[why]++;
            continue;
        }
        r->status = CODEC_ITEM_ACCEPTED;
        metrics_received(d->metrics, ev->token, 1, it->tokens);
        if (dedupe_add(&d->dedupe, it->id.ptr, it->id.len, now) != DAEMON_OK)
            log_write(LOG_WARN, "dedupe window full: out of memory");
    }
    rep.results = results;
    rep.n_results = sub->n_items;
reply:
    intake_error_note(d, ev, &rep);
    if (ev->reply != NULL) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (codec_encode_submit_reply(&rep, &buf, &len) == CODEC_OK)
            replies_add(deferred, ev->reply, buf, len);
    }
    free(results);
    codec_submit_destroy(sub);
}
