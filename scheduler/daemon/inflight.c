/*
 * inflight.c - the one path every batch in flight leaves by: an ack's completions, a nak's
 * returns, a passed ack deadline, a consumer's death, bye or lost connection, and a dead letter.
 * The batch's one record is the core's (sched.c invariant 10: its items, its holder and its
 * deadline); what the daemon keeps of it follows here and nowhere else.
 *
 * Invariants:
 *   1. Every completion leaves the model's stored totals (models.c invariant 2) with the
 *      positions and bytes the core says it settled, and adds the first completions to the
 *      model's series; a return changes neither (the items are still stored).
 *   2. A return that fails (out of memory, the store) keeps the batch on the orphan list, its
 *      deadline cleared, retried every tick, so its items are never stranded as pending.
 *   3. A consumer's release returns every batch its worker holds, newest first, and answers or
 *      drops its pulls; afterwards it holds nothing.
 *
 * Rejected: a record of the batch per concern (the core's, one for the queue totals, one in the
 * consumer for its deadline), kept in step by hand at each call site: they drifted, and each
 * settle had to remember all three.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdlib.h>

/* Remembers a batch whose return failed (invariant 2). */
static void inflight_orphan(struct daemon *d, uint64_t batch_id)
{
    uint64_t *o = realloc(d->orphans, (d->n_orphans + 1) * sizeof(*o));
    if (o == NULL)
        return; /* its holder's death or a restart returns it */
    d->orphans = o;
    d->orphans[d->n_orphans++] = batch_id;
    (void)sched_batch_deadline_set(d->sched, batch_id, 0);
}

sched_status_t inflight_settle(struct daemon *d, model_t *m, uint64_t batch_id, inflight_how_t how,
                               const uint32_t *pos, size_t n, sched_settled_t *out)
{
    sched_settled_t done = {0};
    sched_status_t st;
    if (how == INFLIGHT_COMPLETE) {
        st = sched_complete(d->sched, batch_id, pos, n, &done);
        if (m != NULL) { /* invariant 1; also what completed before a store failure */
            models_completed(d, m, done.positions, done.bytes);
            metrics_completed(d, m, &done);
        }
    } else {
        st = how == INFLIGHT_UNSEEN ? sched_return_unseen(d->sched, batch_id, &done)
                                    : sched_return(d->sched, batch_id, pos, n, &done);
        if (st != SCHED_OK && st != SCHED_EUNKNOWN) {
            log_write(LOG_ERROR, "returning batch %" PRIu64 " failed: %s; retried every second",
                      batch_id, sched_status_str(st));
            inflight_orphan(d, batch_id);
        }
    }
    if (out != NULL)
        *out = done;
    return st;
}

void inflight_release(struct daemon *d, consumer_t *c, int close_pulls)
{
    uint64_t id;
    int more = sched_worker_batch_newest(consumers_worker(c), &id);
    while (more) {
        if (inflight_settle(d, NULL, id, INFLIGHT_RETURN, NULL, 0, NULL) == SCHED_OK)
            more = sched_worker_batch_newest(consumers_worker(c), &id);
        else /* an orphan now (or the store failed): the next one */
            more = sched_batch_older(d->sched, id, &id);
    }
    for (const char *reply; (reply = consumers_pull_reply(c)) != NULL;) {
        if (close_pulls)
            dispatch_status(d, reply, CODEC_BATCH_EXPIRED, "");
        consumers_pull_pop(c);
    }
}

void inflight_orphans_retry(struct daemon *d)
{
    size_t w = 0;
    for (size_t i = 0; i < d->n_orphans; i++) {
        sched_status_t st = sched_return(d->sched, d->orphans[i], NULL, 0, NULL);
        if (st != SCHED_OK && st != SCHED_EUNKNOWN)
            d->orphans[w++] = d->orphans[i];
    }
    d->n_orphans = w;
}
