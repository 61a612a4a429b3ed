/*
 * evqueue.c - the hand-over of messages from transport threads (NATS callbacks) to the owner:
 * two arrays of events swapped under one lock, so a burst crosses in one lock round trip and
 * neither side allocates once the arrays have grown to the load.
 *
 * Invariants:
 *   1. Events leave in the order they were posted; the owner takes all of them at once (the two
 *      arrays trade places), so one lock round trip serves a whole burst.
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
 *
 * Rejected alternatives:
 *   - A lock around the scheduler shared by the callback threads: every callback would contend on
 *     it, and the one place that may run long (a fill) would block acks and heartbeats; a queue
 *     with one owner makes the fill's yield a property of one loop.
 *   - A linked list of malloc'd events with copies of subject, reply and data: four allocations
 *     and a copy of every payload per message, freed one by one.
 *   - A lock-free ring: the lock is taken once per message by one transport thread (the front
 *     uses nats.c's global delivery thread) and once per turn by the owner; it is not contended,
 *     and a ring would need a bound that a burst could overrun.
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
    free(q->in);
    free(q->out);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
}

/* Appends ev under the lock (invariants 1, 3); -1 when the array cannot grow. */
static int evqueue_push(evqueue_t *q, const ev_t *ev)
{
    pthread_mutex_lock(&q->lock);
    if (q->n_in == q->cap_in) {
        size_t cap = q->cap_in ? 2 * q->cap_in : 64;
        ev_t *in = realloc(q->in, cap * sizeof(*in));
        if (in == NULL) {
            pthread_mutex_unlock(&q->lock);
            return -1;
        }
        q->in = in;
        q->cap_in = cap;
    }
    q->in[q->n_in++] = *ev;
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

int evqueue_stopping(const evqueue_t *q)
{
    return __atomic_load_n(&q->stop, __ATOMIC_ACQUIRE);
}

ev_t *evqueue_take(evqueue_t *q, uint64_t wait_ns, size_t *out_n)
{
    evqueue_done(q);
    pthread_mutex_lock(&q->lock);
    if (q->n_in == 0 && wait_ns > 0 && !evqueue_stopping(q)) {
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
    q->in = q->out;
    q->cap_in = q->cap_out;
    q->n_in = 0;
    pthread_mutex_unlock(&q->lock);
    q->out = burst;
    q->cap_out = cap;
    q->n_out = n;
    *out_n = n;
    return burst;
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
