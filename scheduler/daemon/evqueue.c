/*
 * evqueue.c - the hand-over of messages from transport threads (NATS callbacks) to the owner:
 * two arrays of events swapped under one lock, so a burst crosses in one lock round trip and
 * neither side allocates once the arrays have grown to the load.
 *
 * Invariants:
 *   1. Events leave in the order they were posted (but for invariant 6's, which lead); the owner
 *      takes all of them at once (the two arrays trade places), so one lock round trip serves a
 *      whole burst.
 *   2. A transport message is handed over as it is (daemon_post_msg): the event's pointers are
 *      views into it and the owner releases it, through the release function, once the burst was
 *      handled; a copied event (daemon_post) owns one allocation holding token, reply and data.
 *      Every posted message is released exactly once, also when it cannot be queued, when it is
 *      not queued at all (a stats summary set aside, evqueue_release) and when the queue is
 *      finalised with events still in it.
 *   3. A post wakes the owner only when it sleeps on the condition variable: under load the
 *      owner is busy, finds the next burst at its next take, and nobody makes a system call.
 *   4. A stop is a flag, not an event in line: evqueue_stopping is true from the moment it was
 *      posted, so the owner sees it after the event in hand however many wait behind it.
 *   5. Under a bound, clients' messages waiting for the owner hold at most that many bytes per
 *      class (Submits; every other client message), and a post past it is refused (the caller
 *      counts the drop), so a flood costs the daemon bounded memory, and a flood of Submits
 *      never drops the acks and heartbeats of workers (nor a flood of heartbeats the Submits).
 *      A take hands the owner at most EVQUEUE_TURN_BYTES (or the bound when smaller) at a time,
 *      at least one event: a turn's replies wait for its flush, so what a turn takes bounds
 *      them too. The daemon's own events (a disconnect, a lease, a metrics snapshot) are never
 *      refused.
 *   6. A lease note and a metrics snapshot overtake the clients' backlog: they wait apart
 *      (q->own, in the order posted) and lead the next take. A renewal waiting behind a flood
 *      of Submits let the owner's deadline pass while the bucket held the lease (the owner
 *      fenced itself for a second, docs/security.md), and a scrape would wait as long. A
 *      disconnect keeps its place: the acks that came before it still settle first.
 *
 * Rejected alternatives:
 *   - A lock around the scheduler shared by the callback threads: every callback would contend on
 *     it, and the one place that may run long (a fill) would block acks and heartbeats; a queue
 *     with one owner makes the fill's yield a property of one loop.
 *   - A linked list of malloc'd events with copies of subject, reply and data: four allocations
 *     and a copy of every payload per message, freed one by one.
 *   - A lock-free ring: the lock is taken once per message by one transport thread (the front
 *     uses nats.c's global delivery thread) and once per turn by the owner; it is not contended.
 *   - nats.c's pending limits as the bound: the owner takes messages out of nats.c's queue at
 *     once, so they never fill, and they count messages per subscription, not bytes per class.
 *   - Releasing each message right after it was handled: nats.c hands every destroyed message
 *     to its garbage-collector thread and wakes it when it sleeps; releasing a burst together
 *     wakes it once per turn instead of once per message.
 */
#include "scheduler/daemon/daemon_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Arrays grown past this many events by one burst are given back after it: a rare flood does
 * not keep megabytes, and the usual burst never reallocates. */
#define EVQUEUE_KEEP 4096u
/* Invariant 5: the most bytes of clients' messages one take hands the owner. A turn's replies
 * wait for its flush, and a Submit of empty items is answered with about 12 times its bytes, so
 * this bounds them near 100 MB; at the throughput bench's rates a turn takes well under it
 * (`lanesched-bench throughput`, docs/throughput.md), so it only cuts a backlog. */
#define EVQUEUE_TURN_BYTES (8u << 20)
/* What a message costs besides its data and reply subject: the transport's message and the
 * event, so a flood of empty messages is bounded too. */
#define EVQUEUE_MSG_OVERHEAD 256u

void evqueue_init(evqueue_t *q)
{
    memset(q, 0, sizeof(*q));
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
}

void evqueue_release_set(evqueue_t *q, daemon_release_fn release, void *ctx)
{
    q->release = release;
    q->release_ctx = ctx;
}

static void ev_release(const evqueue_t *q, ev_t *ev)
{
    if (ev->copied)
        free(ev->handle);
    else if (ev->handle != NULL && q->release != NULL)
        q->release(q->release_ctx, ev->handle);
    ev->handle = NULL;
}

void evqueue_fini(evqueue_t *q)
{
    for (size_t i = 0; i < q->n_in; i++)
        ev_release(q, &q->in[i]);
    for (size_t i = 0; i < q->n_out; i++)
        ev_release(q, &q->out[i]);
    for (size_t i = 0; i < q->n_own; i++)
        ev_release(q, &q->own[i]);
    free(q->in);
    free(q->out);
    free(q->own);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
}

void evqueue_bound_set(evqueue_t *q, size_t bytes)
{
    q->bound = bytes;
}

/* Invariant 5: the class of a client's message, -1 for the daemon's own events. */
static int evqueue_class(ev_kind_t kind)
{
    switch (kind) {
    case EV_SUBMIT:
        return 0;
    case EV_REGISTER:
    case EV_PULL:
    case EV_ACK:
    case EV_HEARTBEAT:
    case EV_BYE:
    case EV_STATS:
    case EV_SERVICE:
    case EV_METRICS:
    case EV_UNDELIVERED:
        return 1;
    default:
        return -1;
    }
}

/* Room for need events in *arr (*cap of them now): grown to at least double, so appends one at
 * a time stay amortised. 0, or -1 when out of memory (nothing changed). */
static int evqueue_room(ev_t **arr, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t grown = *cap ? 2 * *cap : 64;
    if (grown < need)
        grown = need;
    ev_t *a = realloc(*arr, grown * sizeof(*a));
    if (a == NULL)
        return -1;
    *arr = a;
    *cap = grown;
    return 0;
}

/* Invariant 6: the events that wait apart and lead the next take. */
static int evqueue_overtakes(ev_kind_t kind)
{
    return kind == EV_LEASE || kind == EV_METRICS_SNAPSHOT;
}

/* Adds (sign > 0) or takes away the bytes of n events from what their classes hold (invariant
 * 5); under the lock. */
static void evqueue_held(evqueue_t *q, const ev_t *ev, size_t n, int sign)
{
    for (size_t i = 0; i < n; i++) {
        int cls = evqueue_class(ev[i].kind);
        if (cls >= 0)
            q->held[cls] = sign > 0 ? q->held[cls] + ev[i].cost : q->held[cls] - ev[i].cost;
    }
}

/* Appends ev under the lock (invariants 1, 3, 5); -1 when the array cannot grow or the class is
 * at its bound. */
static int evqueue_push(evqueue_t *q, ev_t *ev)
{
    int cls = evqueue_class(ev->kind);
    ev->cost =
        cls < 0 ? 0 : ev->len + (ev->reply != NULL ? strlen(ev->reply) : 0) + EVQUEUE_MSG_OVERHEAD;
    pthread_mutex_lock(&q->lock);
    if (cls >= 0 && q->bound != 0 && q->held[cls] + ev->cost > q->bound) {
        pthread_mutex_unlock(&q->lock);
        return -1;
    }
    int own = evqueue_overtakes(ev->kind);
    ev_t **arr = own ? &q->own : &q->in;
    size_t *n = own ? &q->n_own : &q->n_in, *cap = own ? &q->cap_own : &q->cap_in;
    if (evqueue_room(arr, cap, *n + 1) != 0) {
        pthread_mutex_unlock(&q->lock);
        return -1;
    }
    (*arr)[(*n)++] = *ev;
    evqueue_held(q, ev, 1, 1);
    if (q->sleeping)
        pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

int evqueue_post_msg(evqueue_t *q, ev_kind_t kind, const char *token, const char *reply,
                     const void *data, size_t len, void *msg)
{
    ev_t ev = {.kind = kind,
               .token = token != NULL ? token : "",
               .reply = reply,
               .data = data,
               .len = len,
               .handle = msg};
    if (evqueue_push(q, &ev) == 0)
        return 0;
    ev_release(q, &ev);
    return -1;
}

int evqueue_post(evqueue_t *q, ev_kind_t kind, const char *token, const char *reply,
                 const void *data, size_t len)
{
    size_t tlen = token != NULL ? strlen(token) : 0, rlen = reply != NULL ? strlen(reply) : 0;
    char *block = malloc(tlen + 1 + rlen + 1 + len + 1);
    if (block == NULL)
        return -1;
    char *t = block, *r = block + tlen + 1;
    uint8_t *b = (uint8_t *)r + rlen + 1;
    memcpy(t, token != NULL ? token : "", tlen + 1);
    if (reply != NULL)
        memcpy(r, reply, rlen + 1);
    if (len != 0)
        memcpy(b, data, len);
    ev_t ev = {.kind = kind,
               .token = t,
               .reply = reply != NULL ? r : NULL,
               .data = len != 0 ? b : NULL,
               .len = len,
               .handle = block,
               .copied = true};
    if (evqueue_push(q, &ev) == 0)
        return 0;
    free(block);
    return -1;
}

void evqueue_release(const evqueue_t *q, void *msg)
{
    if (msg != NULL && q->release != NULL)
        q->release(q->release_ctx, msg); /* invariant 2: never queued, released here */
}

void evqueue_stop(evqueue_t *q)
{
    pthread_mutex_lock(&q->lock);
    __atomic_store_n(&q->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

void evqueue_backlog_get(evqueue_t *q, size_t *out_submits, size_t *out_other)
{
    pthread_mutex_lock(&q->lock);
    *out_submits = q->held[0];
    *out_other = q->held[1];
    pthread_mutex_unlock(&q->lock);
}

int evqueue_stopping(const evqueue_t *q)
{
    return __atomic_load_n(&q->stop, __ATOMIC_ACQUIRE);
}

/* Invariant 5: how many events of the burst in hand one take hands over. */
static size_t evqueue_take_count(const evqueue_t *q)
{
    if (q->bound == 0)
        return q->n_out;
    size_t budget = q->bound < EVQUEUE_TURN_BYTES ? q->bound : EVQUEUE_TURN_BYTES, bytes = 0, n = 0;
    while (n < q->n_out && (n == 0 || bytes + q->out[n].cost <= budget))
        bytes += q->out[n++].cost;
    return n;
}

ev_t *evqueue_take(evqueue_t *q, uint64_t wait_ns, size_t *out_n)
{
    evqueue_done(q);
    pthread_mutex_lock(&q->lock);
    if (q->n_in == 0 && q->n_own == 0 && wait_ns > 0 && !evqueue_stopping(q)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + wait_ns;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        q->sleeping = true;
        pthread_cond_timedwait(&q->cond, &q->lock, &ts);
        q->sleeping = false;
    }
    ev_t *burst = q->in;
    size_t n = q->n_in, cap = q->cap_in;
    evqueue_held(q, burst, n, -1);
    q->in = q->out;
    q->cap_in = q->cap_out;
    q->n_in = 0;
    /* invariant 6: the events waiting apart lead the burst (out of memory: a later one) */
    if (q->n_own != 0 && evqueue_room(&burst, &cap, n + q->n_own) == 0) {
        memmove(burst + q->n_own, burst, n * sizeof(*burst));
        memcpy(burst, q->own, q->n_own * sizeof(*burst));
        n += q->n_own;
        q->n_own = 0;
    }
    pthread_mutex_unlock(&q->lock);
    q->out = burst;
    q->cap_out = cap;
    q->n_out = n;
    /* invariant 5: past the take's bytes the rest goes back first in line (out of memory: all
     * of them now rather than none) */
    size_t keep = evqueue_take_count(q);
    if (keep < n && evqueue_untake(q, keep) == 0)
        n = keep;
    *out_n = n;
    return burst;
}

bool evqueue_empty(evqueue_t *q)
{
    pthread_mutex_lock(&q->lock);
    bool empty = q->n_in == 0 && q->n_own == 0;
    pthread_mutex_unlock(&q->lock);
    return empty;
}

int evqueue_untake(evqueue_t *q, size_t handled)
{
    if (handled >= q->n_out)
        return 0;
    size_t rest = q->n_out - handled, own = 0;
    for (size_t i = handled; i < q->n_out; i++)
        own += (size_t)evqueue_overtakes(q->out[i].kind);
    pthread_mutex_lock(&q->lock);
    /* invariant 6: an overtaking event goes back before those posted since, not behind them */
    size_t need_in = q->n_in + rest - own, need_own = q->n_own + own;
    if (evqueue_room(&q->in, &q->cap_in, need_in) != 0 ||
        evqueue_room(&q->own, &q->cap_own, need_own) != 0) {
        pthread_mutex_unlock(&q->lock);
        return -1;
    }
    if (q->n_in != 0 && rest != own)
        memmove(q->in + (rest - own), q->in, q->n_in * sizeof(*q->in));
    if (q->n_own != 0 && own != 0)
        memmove(q->own + own, q->own, q->n_own * sizeof(*q->own));
    for (size_t i = handled, c = 0, o = 0; i < q->n_out; i++) {
        if (evqueue_overtakes(q->out[i].kind))
            q->own[o++] = q->out[i];
        else
            q->in[c++] = q->out[i];
    }
    evqueue_held(q, q->in, rest - own, 1);
    q->n_in = need_in;
    q->n_own = need_own;
    pthread_mutex_unlock(&q->lock);
    q->n_out = handled;
    return 0;
}

void evqueue_done(evqueue_t *q)
{
    for (size_t i = 0; i < q->n_out; i++)
        ev_release(q, &q->out[i]);
    q->n_out = 0;
    if (q->cap_out > EVQUEUE_KEEP) {
        free(q->out);
        q->out = NULL;
        q->cap_out = 0;
    }
}
