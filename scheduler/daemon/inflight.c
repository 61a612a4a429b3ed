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
 *   2. A whole batch's return that fails (out of memory, the store) keeps the batch on the
 *      orphan list, its deadline cleared, retried every tick, so its items are never stranded as
 *      pending; the list's slot is reserved before the return is tried, so the memory that the
 *      return lacked is not needed to remember it. A nak's return that fails leaves the batch in
 *      flight under its deadline: orphaning it would return positions the worker still holds.
 *      The same holds for the part of a merged batch that a failed commit left in flight
 *      without a holder (sched.c invariant 8): its slot is reserved before the commit.
 *   3. A consumer's release returns every batch its worker holds, newest first, each tried
 *      once, and answers or drops its pulls.
 *
 * Rejected: a record of the batch per concern (the core's, one for the queue totals, one in the
 * consumer for its deadline), kept in step by hand at each call site: they drifted, and each
 * settle had to remember all three.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdlib.h>

/* Room for one more orphan (invariant 2); 0 when even that is refused. */
int inflight_orphan_reserve(struct daemon *d)
{
    if (d->n_orphans < d->orphans_cap)
        return 1;
    size_t cap = d->orphans_cap != 0 ? 2 * d->orphans_cap : 8;
    uint64_t *o = realloc(d->orphans, cap * sizeof(*o));
    if (o == NULL)
        return 0;
    d->orphans = o;
    d->orphans_cap = cap;
    return 1;
}

/* Invariant 2: batch_id is retried every tick, in the slot inflight_orphan_reserve made. */
static void inflight_orphan_add(struct daemon *d, uint64_t batch_id)
{
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
        int whole = how == INFLIGHT_UNSEEN || pos == NULL;
        int room = whole && inflight_orphan_reserve(d);
        st = how == INFLIGHT_UNSEEN ? sched_return_unseen(d->sched, batch_id, &done)
                                    : sched_return(d->sched, batch_id, pos, n, &done);
        if (st != SCHED_OK && st != SCHED_EUNKNOWN) {
            log_write(LOG_ERROR, "returning batch %" PRIu64 " failed: %s; %s", batch_id,
                      sched_status_str(st),
                      !whole ? "it stays in flight under its deadline"
                      : room ? "retried every second"
                             : "out of memory for the retry too: a restart returns it");
            if (room)
                inflight_orphan_add(d, batch_id);
        }
    }
    if (out != NULL)
        *out = done;
    return st;
}

void inflight_orphan_stranded(struct daemon *d, uint64_t batch_id, int room)
{
    if (!sched_batch_pending(d->sched, batch_id))
        return;
    log_write(LOG_ERROR,
              "batch %" PRIu64 ": part of it stayed committed (the put-back failed too); %s",
              batch_id,
              room ? "returned by the retry every second"
                   : "out of memory for the retry too: a restart returns it");
    if (room)
        inflight_orphan_add(d, batch_id);
}

void inflight_release(struct daemon *d, consumer_t *c, int close_pulls)
{
    uint64_t id, next = 0;
    for (int more = sched_worker_batch_newest(consumers_worker(c), &id); more; id = next) {
        more = sched_batch_older(d->sched, id, &next); /* before id leaves the worker's list */
        (void)inflight_settle(d, NULL, id, INFLIGHT_RETURN, NULL, 0, NULL);
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
