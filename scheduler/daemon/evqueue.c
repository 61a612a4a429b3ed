/*
 * evqueue.c - the hand-over of messages from transport threads (NATS callbacks) to the owner.
 *
 * Invariants:
 *   1. Events leave in the order they were posted; the owner takes all of them at once, so one
 *      lock round trip serves a whole burst.
 *   2. An event owns copies of everything it carries: the transport may free its message as
 *      soon as evqueue_post returns.
 *
 * Rejected: a lock around the scheduler shared by the callback threads. Every callback would
 * contend on it, and the one place that may run long (a fill) would block acks and heartbeats;
 * a queue with one owner makes the fill's yield a property of one loop.
 */
#include "scheduler/daemon/daemon_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void ev_destroy(ev_t *ev)
{
    if (ev == NULL)
        return;
    free(ev->token);
    free(ev->reply);
    free(ev->data);
    free(ev);
}

static ev_t *ev_create(ev_kind_t kind, const char *token, const char *reply, const void *data,
                       size_t len)
{
    ev_t *ev = calloc(1, sizeof(*ev));
    if (ev == NULL)
        return NULL;
    ev->kind = kind;
    if ((ev->token = strdup(token != NULL ? token : "")) == NULL ||
        (reply != NULL && (ev->reply = strdup(reply)) == NULL) ||
        (len != 0 && (ev->data = malloc(len)) == NULL)) {
        ev_destroy(ev);
        return NULL;
    }
    if (len != 0)
        memcpy(ev->data, data, len);
    ev->len = len;
    return ev;
}

void evqueue_init(evqueue_t *q)
{
    memset(q, 0, sizeof(*q));
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
}

void evqueue_fini(evqueue_t *q)
{
    for (ev_t *ev = q->head, *next; ev != NULL; ev = next) {
        next = ev->next;
        ev_destroy(ev);
    }
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
}

int evqueue_post(evqueue_t *q, ev_kind_t kind, const char *token, const char *reply,
                 const void *data, size_t len)
{
    ev_t *ev = ev_create(kind, token, reply, data, len);
    if (ev == NULL)
        return -1;
    pthread_mutex_lock(&q->lock);
    if (q->tail != NULL)
        q->tail->next = ev;
    else
        q->head = ev;
    q->tail = ev;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

ev_t *evqueue_take(evqueue_t *q, uint64_t wait_ns)
{
    pthread_mutex_lock(&q->lock);
    if (q->head == NULL && wait_ns > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + wait_ns;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&q->cond, &q->lock, &ts);
    }
    ev_t *list = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return list;
}
