/*
 * turn.c - one turn of the owner loop, its timers, and daemon_run.
 *
 * One turn:
 *   1. take the queued events (all, or as many bytes as evqueue.c's invariant 5 allows) and
 *      handle them (submits append, acks tombstone, pulls queue) for at most
 *      TURN_EVENTS_BUDGET_NS; the rest go back to the front of the queue;
 *   2. one store_flush for all of them (group commit: every submit and ack of the turn shares
 *      one sync at the power-loss level), then the SubmitReply/AckReply of each;
 *   3. timers: the lanes' tick, dead consumers, ack deadlines, expired pulls;
 *   4. fill outstanding pulls (dispatch.c, bounded in time), then back to 1.
 *
 * Invariants:
 *   1. A SubmitReply or AckReply is published only after the flush that made its items or
 *      tombstones durable returned OK. A failed flush puts the store in its error state; the
 *      owner then answers nothing more of the turn and stops (a restart recovers; nothing is
 *      acknowledged falsely).
 *   2. Every in-flight batch has a deadline; a consumer that is dead, says bye, or loses its
 *      connection has its batches returned to the front of their lanes.
 *   3. The wait for events never outlasts the next timer, nor the fill budget, nor the time
 *      the scheduler named for a pull it held back, so timers, new work and held pulls are
 *      serviced on time.
 *   4. A stop is honoured after the event being handled: the events behind it are dropped
 *      unanswered (nothing of them was stored or acknowledged; producers retry against the next
 *      start), so SIGTERM never waits behind a backlog.
 *   5. From taking its events to the end of the turn the owner is busy, and between events it
 *      answers the stats summaries asked for meanwhile (stats.c's invariant 5).
 *   6. A stall of this loop (the daemon stopped, swapped, starved of CPU) is judged right after
 *      the events are taken, before any is handled: acks and heartbeats sent during it may still
 *      be on their way, so past TURN_STALL_MIN_NS and half the shorter of ack wait and dead-after
 *      the ack deadlines of live consumers' batches move by the stall, and past half dead-after
 *      their liveness restarts; an extension the burst then brings is counted from now, not
 *      added to the stall.
 *   7. A turn handles events for at most TURN_EVENTS_BUDGET_NS (at least one event), so a
 *      backlog of costly messages (a flood of Submits of thousands of rejected items each)
 *      cannot hold the timers, the fill and the lease notes for seconds.
 *   8. Before it waits for events with none queued, the owner calls the transport's idle
 *      function if it published since the last call: what the turn published leaves at once
 *      (a worker waiting on its pull gets its Batch) instead of at the transport's timer, and
 *      while events keep coming the transport goes on gathering writes.
 *
 * Rejected: a timer thread. Timers change scheduling state, and only the owner may.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <inttypes.h>

/* Dead consumers' ids are kept this many dead-after periods, so late acks read as stale. */
#define DAEMON_DEAD_KEEP_PERIODS 10u
/* The longest the owner sleeps without looking at its timers (the fill budget's order). */
#define DAEMON_WAIT_MAX_NS 100000000ull
/* The shortest gap between turns taken for a stall (invariant 6): four of the longest sleeps,
 * so a short ack wait does not turn the loop's ordinary gaps into stalls. */
#define TURN_STALL_MIN_NS (4 * DAEMON_WAIT_MAX_NS)
/* Invariant 7: the fill's budget (dispatch.c), so timers run at least every few tenths of a
 * second under any backlog; an ordinary turn takes a few milliseconds. */
#define TURN_EVENTS_BUDGET_NS 100000000ull

/* Invariant 6. */
static void turn_stall_check(struct daemon *d, uint64_t now)
{
    if (d->last_timers_ns == 0 || now <= d->last_timers_ns)
        return;
    uint64_t gap = now - d->last_timers_ns;
    uint64_t dead_after = daemon_ms_ns(d->cfg.dead_after_ms);
    uint64_t ack_wait = daemon_ms_ns(d->cfg.ack_wait_ms);
    uint64_t bound = (ack_wait < dead_after ? ack_wait : dead_after) / 2;
    if (gap <= bound || gap <= TURN_STALL_MIN_NS)
        return;
    int liveness = gap > dead_after / 2;
    log_write(LOG_WARN, "the owner loop stalled for %" PRIu64 " ms: ack deadlines move as much%s",
              gap / 1000000, liveness ? ", consumer liveness restarts" : "");
    consumers_deadlines_shift(d->consumers, gap);
    if (liveness)
        consumers_stall_reset(d->consumers, now);
}

static void turn_consumer_dead(void *ctx, consumer_t *c, uint64_t silent_ns)
{
    struct daemon *d = ctx;
    if (log_budget_allow(&d->consumer_deaths, LOG_WARN, daemon_now(d), "consumers dead"))
        log_write(
            LOG_WARN, "consumer %s (%s) silent for %" PRIu64 " ms: dead; %zu batches returned",
            consumers_id(c), consumers_name(c), silent_ns / 1000000, consumers_inflight_count(c));
    requests_consumer_end(d, c);
    d->counters.consumers_declared_dead++;
}

static void turn_ack_expired(void *ctx, consumer_t *c, uint64_t batch_id)
{
    struct daemon *d = ctx;
    log_write(LOG_INFO, "batch %" PRIu64 " of %s passed its ack deadline: returned", batch_id,
              consumers_id(c));
    d->counters.batches_expired_ack_deadline++;
    (void)inflight_settle(d, NULL, batch_id, INFLIGHT_RETURN, NULL, 0, NULL);
}

/* A pull of a consumer whose model's lease another instance holds ends unanswered: no answer
 * past its expiry is what tells the consumer to register again, and the holder then answers
 * (subjects.md, "Leases"). A lease that only lapsed (a renewal failed) answers as usual. Its
 * batches in flight stay acknowledgeable here (models.c invariant 4). */
static void turn_pull_expired(void *ctx, consumer_t *c, const char *reply)
{
    struct daemon *d = ctx;
    if (models_held_elsewhere(d, consumers_model_rec(c)))
        return;
    dispatch_status(ctx, reply, CODEC_BATCH_EXPIRED, "");
}

/* Messages dropped since the last tick, one line a tick (a flood would log a line a message). */
static void turn_drops_log(struct daemon *d)
{
    uint64_t dropped = __atomic_load_n(&d->counters.dropped_messages, __ATOMIC_RELAXED);
    if (dropped == d->dropped_logged)
        return;
    log_write(LOG_WARN,
              "%" PRIu64 " incoming messages dropped since the last report (%" PRIu64
              " in all): the backlog waiting for the daemon at --limit-backlog-bytes (%" PRIu64
              "), memory short, or NATS's slow-consumer limit; their clients' timeouts and "
              "retries take over",
              dropped - d->dropped_logged, dropped, d->cfg.limits.backlog_bytes);
    d->dropped_logged = dropped;
}

static void turn_timers(struct daemon *d)
{
    uint64_t now = daemon_now(d);
    uint64_t dead_after = daemon_ms_ns(d->cfg.dead_after_ms);
    d->last_timers_ns = now;
    models_serving_tick(d);
    if (now >= d->next_tick_ns) {
        inflight_orphans_retry(d);
        dispatch_expire(d);
        models_tick(d);
        sched_tick(d->sched);
        d->next_tick_ns = now + LANES_TICK_NS;
        consumers_prune(d->consumers, now, DAEMON_DEAD_KEEP_PERIODS * dead_after);
        log_budget_flush(&d->consumer_lines, now, "consumers");
        log_budget_flush(&d->consumer_deaths, now, "consumers dead");
        turn_drops_log(d);
    }
    consumers_timers_t t = {turn_consumer_dead, turn_ack_expired, turn_pull_expired, d};
    consumers_expire(d->consumers, now, dead_after, &t);
}

/* A client's message whose reply subject the daemon must not publish on
 * (daemon_reply_allowed): dropped whole, counted, and logged at the 1st, 2nd, 4th, 8th ...
 * refusal, so a flood of them cannot flood the log. Returns 1 when refused. */
static int turn_reply_refused(struct daemon *d, const ev_t *ev)
{
    if (ev->kind == EV_DISCONNECTED || ev->kind == EV_STOP || ev->kind == EV_LEASE ||
        ev->kind == EV_UNDELIVERED || ev->kind == EV_METRICS_SNAPSHOT ||
        daemon_reply_allowed(d, ev->reply))
        return 0;
    uint64_t n = ++d->counters.rejected[CODEC_EREPLY_SUBJECT_REFUSED];
    if ((n & (n - 1)) == 0)
        log_write(LOG_WARN,
                  "a message asked for its answer on %s: refused unanswered (%s; %" PRIu64
                  " so far, counted in rejected.reply_subject_refused)",
                  ev->reply, codec_status_str(CODEC_EREPLY_SUBJECT_REFUSED), n);
    return 1;
}

static void turn_handle(struct daemon *d, const ev_t *ev, replies_t *deferred, int *stop)
{
    uint64_t t0 = daemon_now(d);
    if (turn_reply_refused(d, ev))
        return;
    switch (ev->kind) {
    case EV_SUBMIT:
        intake_submit(d, ev, deferred);
        break;
    case EV_REGISTER:
        requests_register(d, ev);
        break;
    case EV_PULL:
        requests_pull(d, ev);
        break;
    case EV_ACK:
        requests_ack(d, ev, deferred);
        break;
    case EV_HEARTBEAT:
        requests_heartbeat(d, ev);
        break;
    case EV_BYE:
        requests_bye(d, ev, deferred);
        break;
    case EV_STATS:
        requests_stats(d, ev);
        break;
    case EV_DISCONNECTED:
        requests_disconnected(d);
        break;
    case EV_STOP:
        *stop = 1;
        break;
    case EV_SERVICE:
        service_reply(d, ev);
        break;
    case EV_METRICS:
    case EV_METRICS_SNAPSHOT:
        metrics_request(d, ev);
        break;
    case EV_LEASE:
        models_lease_note(d, ev);
        break;
    case EV_UNDELIVERED:
        undelivered_batch(d, ev);
        break;
    }
    service_note(d, ev, daemon_now(d) - t0);
}

daemon_status_t daemon_turn(daemon_t *d, uint64_t wait_ns, int *out_stopped)
{
    if (d->next_tick_ns == 0)
        d->next_tick_ns = daemon_now(d) + LANES_TICK_NS;
    uint64_t now = daemon_now(d);
    uint64_t wake =
        consumers_next_deadline(d->consumers, daemon_ms_ns(d->cfg.dead_after_ms), d->next_tick_ns);
    if (d->retry_ns != 0 && d->retry_ns < wake)
        wake = d->retry_ns; /* a consumer held back from a cold shape (dispatch.c) */
    uint64_t wait = wake > now ? wake - now : 0; /* invariant 3 */
    wait = wait < DAEMON_WAIT_MAX_NS ? wait : DAEMON_WAIT_MAX_NS;
    wait = wait < wait_ns ? wait : wait_ns;
    if (d->published && d->idle != NULL && wait > 0 && evqueue_empty(&d->events)) {
        d->published = false; /* invariant 8 */
        d->idle(d->idle_ctx);
    }
    replies_t deferred = {0};
    int stop = 0;
    size_t n = 0;
    ev_t *burst = evqueue_take(&d->events, wait, &n);
    turn_stall_check(d, daemon_now(d)); /* invariant 6 */
    stats_waiting_begin(d);             /* invariant 5 */
    uint64_t turn_start = daemon_now(d);
    d->turn_ns = turn_start;
    for (size_t i = 0; i < n && !stop; i++) {
        if (i != 0 && daemon_now(d) - turn_start > TURN_EVENTS_BUDGET_NS &&
            evqueue_untake(&d->events, i) == 0)
            break; /* invariant 7 */
        turn_handle(d, &burst[i], &deferred, &stop);
        stop |= evqueue_stopping(&d->events); /* invariant 4: the rest is dropped */
        stats_waiting_answer(d, 0);
    }
    stop |= evqueue_stopping(&d->events);
    evqueue_done(&d->events); /* the burst's messages together (evqueue.c) */
    uint64_t flush_start = daemon_now(d);
    store_status_t fst = store_flush(d->store);
    uint64_t flush_ns = daemon_now(d) - flush_start;
    if (fst != STORE_OK) {
        /* invariant 1: nothing of this turn is acknowledged */
        log_write(LOG_ERROR, "flushing the store failed (%s): stopping; restart to recover",
                  store_status_str(fst));
        replies_free(&deferred);
        stats_waiting_answer(d, 1); /* the summaries set aside are not left waiting */
        return DAEMON_ESTORE;
    }
    replies_send(d, &deferred);
    if (out_stopped != NULL)
        *out_stopped = stop;
    if (!stop) {
        turn_timers(d);
        dispatch_fill(d);
        metrics_turn(d->metrics, daemon_now(d) - turn_start, flush_ns);
    }
    stats_waiting_answer(d, 1);
    return DAEMON_OK;
}

daemon_status_t daemon_run(daemon_t *d)
{
    d->next_tick_ns = daemon_now(d) + LANES_TICK_NS;
    for (int stop = 0;;) {
        daemon_status_t st = daemon_turn(d, UINT64_MAX, &stop);
        if (st != DAEMON_OK || stop)
            return st;
    }
}
