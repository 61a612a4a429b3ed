/*
 * replies.c - SubmitReply and AckReply messages held until the turn's store flush.
 *
 * Invariants:
 *   1. A reply queued in a turn is published only after that turn's flush returned OK, in the
 *      order it was queued (turn.c's invariant 1 rests on this).
 *   2. After a failed flush every queued reply is freed unsent: nothing is acknowledged that
 *      the store did not make durable.
 *
 * Rejected: publishing each reply as it is made. The producer would be told "accepted" before
 * the item survives a crash.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"

#include <stdlib.h>
#include <string.h>

struct reply {
    char *subject;
    uint8_t *buf;
    size_t len;
    struct reply *next;
};

void replies_add(replies_t *r, const char *subject, uint8_t *buf, size_t len)
{
    reply_t *x = calloc(1, sizeof(*x));
    if (x == NULL || (x->subject = strdup(subject)) == NULL) {
        free(x);
        free(buf);
        log_write(LOG_ERROR, "out of memory queueing a reply to %s", subject);
        return;
    }
    x->buf = buf;
    x->len = len;
    if (r->tail != NULL)
        r->tail->next = x;
    else
        r->head = x;
    r->tail = x;
}

void replies_free(replies_t *r)
{
    for (reply_t *x = r->head, *next; x != NULL; x = next) {
        next = x->next;
        free(x->subject);
        free(x->buf);
        free(x);
    }
    r->head = r->tail = NULL;
}

void replies_send(struct daemon *d, replies_t *r)
{
    for (const reply_t *x = r->head; x != NULL; x = x->next) {
        if (daemon_send(d, x->subject, NULL, x->buf, x->len) != 0)
            d->counters.publish_failures++;
    }
    replies_free(r);
}
