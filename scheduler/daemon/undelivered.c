/*
 * undelivered.c - a Batch that no one received: its pull's inbox had no subscriber when it was
 * published (a worker that crashed, or closed its inbox, with pulls still open). NATS drops such
 * a message silently, so the batch stayed in flight until its holder was declared dead
 * (--dead-after-ms) and every later batch went the same way, one per open credit. Each Batch
 * therefore goes out with a reply subject of the daemon's, and the server answers a publish that
 * reached no subscriber with a no-responders status on it (the transport posts EV_UNDELIVERED):
 * the batch comes back at once and the pulls of that inbox are dropped.
 *
 * The reply subject: "<base>.<consumer secret>.<batch id>.<inbox tag>" (base: a subject of this
 * daemon instance's, daemon_undelivered_set; the tag: consumers_inbox_tag of the pull's reply).
 *
 * Invariants:
 *   1. Only the consumer that holds the batch, named by its secret, is affected: the secret is
 *      in no subject another account receives (consumers.c invariant 1), so a status that does
 *      not name the holder's secret and one of its batches in flight changes nothing and is
 *      counted (undelivered_unmatched). The holder itself can only give back what it could nak.
 *   2. The batch is returned whole, as a nak of every item would (its delivery stays counted:
 *      it was committed), through the one settle path (inflight.c).
 *   3. Every open pull of the consumer on the same inbox is dropped unanswered: each would take
 *      one more batch and one more delivery for nothing. Its other pulls stay. The consumer
 *      stays registered: its heartbeats, not its inbox, say whether it lives.
 *
 * Rejected: declaring the consumer dead at the first status (a worker may pull on several
 * inboxes, and one it closed says nothing of the others); a request with a timeout per Batch
 * (a timer and a reply subscription per batch, where the server's status is free).
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int undelivered_reply(const struct daemon *d, const consumer_t *c, uint64_t batch_id, char *out,
                      size_t cap)
{
    const char *pull = consumers_pull_reply(c);
    if (d->undelivered_base == NULL || pull == NULL)
        return 0;
    int n = snprintf(out, cap, "%s.%s.%" PRIu64 ".%08" PRIx32, d->undelivered_base,
                     consumers_secret(c), batch_id, consumers_inbox_tag(pull));
    return n > 0 && (size_t)n < cap;
}

/* Splits "<secret>.<batch id>.<tag>" (token borrowed) into its three parts; 0 when it is not
 * that. */
static int undelivered_parse(const char *token, char *secret, size_t cap, uint64_t *batch_id,
                             uint32_t *tag)
{
    const char *dot = strchr(token, '.');
    if (dot == NULL || (size_t)(dot - token) >= cap || dot == token)
        return 0;
    memcpy(secret, token, (size_t)(dot - token));
    secret[dot - token] = '\0';
    char *end = NULL;
    unsigned long long id = strtoull(dot + 1, &end, 10);
    if (end == dot + 1 || *end != '.')
        return 0;
    const char *t = end + 1;
    unsigned long tg = strtoul(t, &end, 16);
    if (end == t || *end != '\0' || end - t != 8)
        return 0;
    *batch_id = (uint64_t)id;
    *tag = (uint32_t)tg;
    return 1;
}

void undelivered_batch(struct daemon *d, const ev_t *ev)
{
    char secret[CONSUMERS_ID_LEN + 1];
    uint64_t batch_id = 0;
    uint32_t tag = 0;
    consumer_t *c = NULL;
    sched_batch_info_t in;
    if (ev->token == NULL ||
        !undelivered_parse(ev->token, secret, sizeof(secret), &batch_id, &tag) ||
        (c = consumers_find(d->consumers, secret)) == NULL || consumers_dead(c) ||
        !sched_batch_info(d->sched, batch_id, &in) || in.worker != consumers_worker(c)) {
        d->counters.undelivered_unmatched++; /* invariant 1 */
        return;
    }
    if (inflight_settle(d, consumers_model_rec(c), batch_id, INFLIGHT_RETURN, NULL, 0, NULL) !=
        SCHED_OK)
        return; /* an orphan, retried every tick (inflight.c invariant 2) */
    d->counters.batches_undelivered++;
    size_t dropped = consumers_pull_drop_inbox(c, tag); /* invariant 3 */
    if (log_budget_allow(&d->consumer_lines, LOG_INFO, daemon_now(d), "consumers"))
        log_write(LOG_INFO,
                  "consumer %s (%s): no one subscribes to its pull inbox: batch %" PRIu64
                  " (%" PRIu32 " items) returned at once, %zu pulls on that inbox dropped",
                  consumers_id(c), consumers_name(c), batch_id, in.positions, dropped);
}
