/*
 * undelivered.c - a Batch that no one received: its pull's inbox had no subscriber when it was
 * published (a worker that crashed, or lost its connection, with pulls still open). NATS drops
 * such a message silently, so the batch stayed in flight until its holder was declared dead
 * (--dead-after-ms) or its ack deadline passed, and every later batch for the holder's open pulls
 * went the same way. Each Batch therefore goes out with a reply subject of the daemon's, and the
 * server answers a publish that reached no subscriber with a no-responders status on it (the
 * transport posts EV_UNDELIVERED): the batch comes back at once.
 *
 * The reply subject: "<base>.<consumer secret>.<batch id>" (base: a subject of this daemon
 * instance's, daemon_undelivered_set).
 *
 * Invariants:
 *   1. Only the consumer that holds the batch, named by its secret, is affected: the secret is
 *      carried only to the consumer's own inbox (consumers.c invariant 1), so a status that does
 *      not name the holder's secret and one of its batches in flight changes nothing and is
 *      counted (undelivered_unmatched). The holder itself can only give back what it could nak.
 *   2. The batch is returned whole through the one settle path (inflight.c), each item's delivery
 *      count back down by one (store_return_unseen): no worker saw it, so it is no delivery, and
 *      a returned item cannot reach --max-deliveries by going round dead workers' open pulls.
 *   3. The consumer is then served nothing until its next message (consumers_inbox_silent): a
 *      worker gone for good gets the batches of one fill at most (the status is handled in a
 *      later turn), not one per open credit for ever, so the items do not go round its open
 *      pulls; one whose connection only blipped heartbeats within --heartbeat-ms and is served
 *      again on the pulls it still has open (a credit spent on the unseen batch stays spent). A
 *      return that fails becomes an orphan retried as a plain return (inflight.c): its count
 *      then stays one higher, never lower. It stays registered: its messages, not its inbox,
 *      say whether it lives.
 *   4. A Batch carries the reply subject only while it and the pull's reply subject together
 *      are at most UNDELIVERED_LINE_MAX bytes: the server closes a connection whose protocol
 *      line is longer than its max_control_line (4 KiB by default), and the worker's own Pull
 *      line, which the server accepted, says nothing of a Batch's line with a reply added.
 *
 * Rejected: dropping the consumer's pulls on the inbox that had no subscriber (a worker giving
 * each pull its own subject, as subjects.md allows, kept getting batches on the next one, and a
 * returned item went round its open pulls, a delivery counted each time, until --max-deliveries
 * dead-lettered it); declaring the consumer dead at the first status (a connection that blipped
 * would lose its registration); a request with a timeout per Batch (a timer per batch, where the
 * server's status is free).
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Invariant 4: the pull's reply subject and the Batch's own, at most, together. A NATS client's
 * inbox is a few dozen bytes; 1 KiB keeps the Batch's line a quarter of the server's default
 * max_control_line (a server configured below about 1.1 KiB can still refuse it: the daemon then
 * stops, front.c invariant 12). */
#define UNDELIVERED_LINE_MAX 1024u

int undelivered_reply(const struct daemon *d, const consumer_t *c, uint64_t batch_id, char *out,
                      size_t cap)
{
    const char *pull = consumers_pull_reply(c);
    if (d->undelivered_base == NULL || pull == NULL)
        return 0;
    int n =
        snprintf(out, cap, "%s.%s.%" PRIu64, d->undelivered_base, consumers_secret(c), batch_id);
    return n > 0 && (size_t)n < cap &&
           strlen(pull) + (size_t)n <= UNDELIVERED_LINE_MAX; /* invariant 4 */
}

/* Splits "<secret>.<batch id>" (token borrowed); 0 when it is not that. */
static int undelivered_parse(const char *token, char *secret, size_t cap, uint64_t *batch_id)
{
    const char *dot = strchr(token, '.');
    if (dot == NULL || dot == token || (size_t)(dot - token) >= cap)
        return 0;
    memcpy(secret, token, (size_t)(dot - token));
    secret[dot - token] = '\0';
    char *end = NULL;
    unsigned long long id = strtoull(dot + 1, &end, 10);
    if (end == dot + 1 || *end != '\0')
        return 0;
    *batch_id = (uint64_t)id;
    return 1;
}

void undelivered_batch(struct daemon *d, const ev_t *ev)
{
    char secret[CONSUMERS_ID_LEN + 1];
    uint64_t batch_id = 0;
    consumer_t *c = NULL;
    sched_batch_info_t in;
    if (ev->token == NULL || !undelivered_parse(ev->token, secret, sizeof(secret), &batch_id) ||
        (c = consumers_find(d->consumers, secret)) == NULL || consumers_dead(c) ||
        !sched_batch_info(d->sched, batch_id, &in) || in.worker != consumers_worker(c)) {
        d->counters.undelivered_unmatched++; /* invariant 1 */
        return;
    }
    consumers_inbox_silent(c); /* invariant 3 */
    if (inflight_settle(d, consumers_model_rec(c), batch_id, INFLIGHT_UNSEEN, NULL, 0, NULL) !=
        SCHED_OK)
        return; /* an orphan, retried every tick (inflight.c invariant 2) */
    d->counters.batches_undelivered++;
    if (log_budget_allow(&d->consumer_lines, LOG_INFO, daemon_now(d), "consumers"))
        log_write(LOG_INFO,
                  "consumer %s (%s): no one subscribes to its pull inbox: batch %" PRIu64
                  " (%" PRIu32 " items) returned at once; nothing more for it until it speaks",
                  consumers_id(c), consumers_name(c), batch_id, in.positions);
}
