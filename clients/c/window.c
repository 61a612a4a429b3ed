/*
 * window.c - requests in flight without waiting for each: a bounded set of outstanding requests,
 * each with its own reply subject on one inbox, resent with the same bytes when unanswered, and
 * answered through a callback. The machinery under lc_submit_async (submit_async.c) and
 * lc_ack_async_send (ack_async.c).
 *
 * Owns: the inbox string, the synchronous subscription on "<inbox>.>", the slot array and, per
 * busy slot, its subject copy and the encoded request (client_int.h, 5).
 *
 * Invariants:
 *  1. At most cap requests are outstanding; a slot is busy from lc_window_send until its reply
 *     is handled or it is given up, and the callback runs exactly once per busy period.
 *  2. A request's reply subject is "<inbox>.<slot>.<seq>", seq unique per send: an answer to an
 *     attempt of a request already settled (a retry's first copy answered late) names a seq no
 *     slot holds and is dropped, so it can never settle the slot's next occupant.
 *  3. A resend publishes the very bytes of the first attempt to the same subject with the same
 *     reply subject (connection.c invariant 2): the same item ids, the same idempotent Ack.
 *  4. Everything is under mu, callbacks included; no thread of the library runs one: replies and
 *     deadlines are handled inside lc_window_send / lc_window_poll / lc_window_drain /
 *     lc_window_close, on the caller's thread.
 *  5. The replies read in one go are destroyed together after it: nats.c hands every destroyed
 *     message to its garbage-collector thread, waking it when it sleeps, so a burst wakes it once.
 *
 * Rejected alternatives:
 *  - An asynchronous subscription with the callback on nats.c's delivery thread (what nats.c
 *    does for js_PublishAsync): a thread hand-off and wake-up per reply, and a user callback that
 *    must be thread-safe against the caller; a synchronous subscription polled by the caller
 *    costs neither, as librdkafka's delivery reports served by rd_kafka_poll show.
 *  - natsConnection_Request per message from several threads: a thread per message in flight.
 *  - A sequence number alone as the reply token: finding its slot would need a search or a map;
 *    the slot index in the subject makes it one array access.
 *  - A timer thread for the resends: deadlines are checked whenever the caller enters the
 *    window, and a caller that waits does so in lc_window_poll/drain, which wake for them.
 */
#include "clients/c/client_int.h"

#include "common/clock.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A poll never sleeps longer than this, so a deadline found late is found at most this late. */
#define LC_WINDOW_TICK_MS 50
/* Replies destroyed together (invariant 5). */
#define LC_WINDOW_DESTROY_BATCH 64

typedef struct {
    uint64_t seq; /* 0: free */
    uint64_t tag, aux;
    char *subject; /* owned */
    uint8_t *buf;  /* owned: the request, resent as is */
    size_t len;
    uint64_t first_ns, sent_ns, deadline_ns;
    uint32_t attempts;
} lc_slot_t;

struct lc_window {
    natsConnection *nc; /* borrowed */
    natsSubscription *sub;
    char *inbox;
    size_t inbox_len;
    lc_slot_t *slots;
    uint32_t cap;
    uint32_t busy;
    uint32_t hint; /* where the search for a free slot starts */
    uint64_t next_seq;
    uint64_t next_deadline_ns; /* no busy slot's deadline is earlier; UINT64_MAX when idle */
    uint64_t no_responders_ns; /* when the server last said nobody listens; 0 = never */
    int64_t timeout_ms;
    uint32_t retries;
    lc_window_fn fn;
    void *ctx;
    bool closing;
    pthread_mutex_t mu;
};

static void lc_slot_clear(lc_slot_t *s)
{
    free(s->subject);
    free(s->buf);
    memset(s, 0, sizeof(*s));
}

lc_status_t lc_window_open(natsConnection *nc, const char *inbox_prefix, uint32_t cap,
                           int64_t timeout_ms, uint32_t retries, lc_window_fn fn, void *ctx,
                           char *err, lc_window_t **out)
{
    lc_status_t status = LC_OK;
    lc_window_t *w = calloc(1, sizeof(*w));
    char subject[LC_INBOX_MAX + 8];
    if (w == NULL || (w->slots = calloc(cap, sizeof(*w->slots))) == NULL) {
        free(w);
        lc_errf(err, "window: out of memory");
        return LC_ENOMEM;
    }
    w->nc = nc;
    w->cap = cap;
    w->timeout_ms = timeout_ms;
    w->retries = retries;
    w->fn = fn;
    w->ctx = ctx;
    w->next_seq = 1;
    w->next_deadline_ns = UINT64_MAX;
    pthread_mutex_init(&w->mu, NULL);
    natsStatus s = lc_inbox_make(inbox_prefix, &w->inbox);
    if (s == NATS_OK && (w->inbox_len = strlen(w->inbox)) > LC_INBOX_MAX)
        s = NATS_INVALID_SUBJECT; /* a custom inbox prefix longer than the reply buffers */
    if (s == NATS_OK) {
        snprintf(subject, sizeof(subject), "%s.>", w->inbox);
        s = natsConnection_SubscribeSync(&w->sub, nc, subject);
    }
    if (s == NATS_OK) /* replies are never dropped by the library's pending limits */
        s = natsSubscription_SetPendingLimits(w->sub, -1, -1);
    if (s != NATS_OK) {
        status = lc_nats_fail(err, "window inbox", s);
        lc_window_close(w);
        return status;
    }
    *out = w;
    return LC_OK;
}

/* The slot and seq named by a reply subject; false for anything else (invariant 2). */
static bool lc_window_parse(const lc_window_t *w, const char *subject, uint32_t *slot,
                            uint64_t *seq)
{
    if (subject == NULL || strncmp(subject, w->inbox, w->inbox_len) != 0 ||
        subject[w->inbox_len] != '.')
        return false;
    const char *p = subject + w->inbox_len + 1;
    char *end = NULL;
    unsigned long long a = strtoull(p, &end, 10);
    if (end == p || *end != '.' || a >= w->cap)
        return false;
    p = end + 1;
    unsigned long long b = strtoull(p, &end, 10);
    if (end == p || *end != '\0')
        return false;
    *slot = (uint32_t)a;
    *seq = b;
    return true;
}

/* Settles slot i: the callback, then the slot is free again (invariant 1). mu held. */
static void lc_window_settle(lc_window_t *w, uint32_t i, natsMsg *msg, lc_status_t why)
{
    lc_slot_t *s = &w->slots[i];
    lc_window_done_t done = {.tag = s->tag,
                             .aux = s->aux,
                             .buf = s->buf,
                             .len = s->len,
                             .attempts = s->attempts,
                             .latency_ns = clock_mono_ns() - s->first_ns,
                             .msg = msg,
                             .status = why,
                             .closed = w->closing};
    w->fn(w->ctx, &done);
    lc_slot_clear(s);
    w->busy--;
}

static natsStatus lc_window_publish(lc_window_t *w, uint32_t i)
{
    lc_slot_t *s = &w->slots[i];
    char reply[LC_INBOX_MAX + 48];
    snprintf(reply, sizeof(reply), "%s.%" PRIu32 ".%" PRIu64, w->inbox, i, s->seq);
    s->attempts++;
    s->sent_ns = clock_mono_ns();
    s->deadline_ns = s->sent_ns + (uint64_t)w->timeout_ms * 1000000ull;
    if (s->deadline_ns < w->next_deadline_ns)
        w->next_deadline_ns = s->deadline_ns;
    return natsConnection_PublishRequest(w->nc, s->subject, reply, s->buf, (int)s->len);
}

/* Resends or gives up every slot past its deadline; recomputes next_deadline_ns. mu held. */
static void lc_window_expire(lc_window_t *w, uint64_t now)
{
    if (now < w->next_deadline_ns)
        return;
    w->next_deadline_ns = UINT64_MAX;
    for (uint32_t i = 0; i < w->cap; i++) {
        lc_slot_t *s = &w->slots[i];
        if (s->seq == 0)
            continue;
        if (s->deadline_ns > now) {
            if (s->deadline_ns < w->next_deadline_ns)
                w->next_deadline_ns = s->deadline_ns;
            continue;
        }
        if (s->attempts <= w->retries && lc_window_publish(w, i) == NATS_OK)
            continue; /* invariant 3 */
        lc_window_settle(w, i, NULL,
                         w->no_responders_ns >= s->sent_ns ? LC_ENORESPONDERS : LC_ETIMEOUT);
    }
}

/* Handles what arrived, waiting up to wait_ms for the first message; then the deadlines. mu
 * held. 0 or 1: whether anything was settled or arrived. */
static int lc_window_pump(lc_window_t *w, int64_t wait_ms)
{
    int moved = 0;
    natsMsg *done[LC_WINDOW_DESTROY_BATCH];
    size_t n_done = 0;
    for (int64_t wait = wait_ms;; wait = 0) {
        natsMsg *msg = NULL;
        natsStatus s = natsSubscription_NextMsg(&msg, w->sub, wait);
        if (s == NATS_TIMEOUT)
            break;
        if (s == NATS_NO_RESPONDERS) {
            /* nats.c drops the message: its slot is unknown, its deadline settles it */
            w->no_responders_ns = clock_mono_ns();
            moved = 1;
            continue;
        }
        if (s != NATS_OK)
            break; /* closed connection or slow consumer: the deadlines settle what is left */
        uint32_t i;
        uint64_t seq;
        if (lc_window_parse(w, natsMsg_GetSubject(msg), &i, &seq) && w->slots[i].seq == seq) {
            lc_window_settle(w, i, msg, LC_OK);
            moved = 1;
        }
        done[n_done++] = msg; /* destroyed together: invariant 5 */
        if (n_done == LC_WINDOW_DESTROY_BATCH) {
            for (size_t k = 0; k < n_done; k++)
                natsMsg_Destroy(done[k]);
            n_done = 0;
        }
    }
    for (size_t k = 0; k < n_done; k++)
        natsMsg_Destroy(done[k]);
    lc_window_expire(w, clock_mono_ns());
    return moved;
}

/* How long a wait may last: until the earlier of `until` and the next deadline, at most a tick. */
static int64_t lc_window_wait_ms(const lc_window_t *w, uint64_t until)
{
    uint64_t now = clock_mono_ns(),
             stop = until < w->next_deadline_ns ? until : w->next_deadline_ns;
    int64_t ms = stop > now ? (int64_t)((stop - now + 999999) / 1000000) : 0;
    return ms < 1 ? 1 : ms > LC_WINDOW_TICK_MS ? LC_WINDOW_TICK_MS : ms;
}

lc_status_t lc_window_send(lc_window_t *w, const char *subject, uint8_t *buf, size_t len,
                           uint64_t tag, uint64_t aux, int64_t stall_ms, char *err)
{
    lc_status_t status = LC_OK;
    char *subj = NULL;
    if (len > INT_MAX) {
        lc_errf(err, "%s: message of %zu bytes", subject, len);
        free(buf);
        return LC_ETOOBIG;
    }
    pthread_mutex_lock(&w->mu);
    lc_window_pump(w, 0);
    uint64_t until = clock_mono_ns() + (uint64_t)stall_ms * 1000000ull;
    while (w->busy == w->cap) {
        if (clock_mono_ns() >= until) {
            lc_errf(err, "%s: %" PRIu32 " requests outstanding for %" PRId64 " ms", subject, w->cap,
                    stall_ms);
            status = LC_ETIMEOUT;
            goto out;
        }
        lc_window_pump(w, lc_window_wait_ms(w, until));
    }
    if ((subj = strdup(subject)) == NULL) {
        lc_errf(err, "%s: out of memory", subject);
        status = LC_ENOMEM;
        goto out;
    }
    uint32_t i = w->hint;
    while (w->slots[i].seq != 0)
        i = (i + 1) % w->cap;
    w->hint = (i + 1) % w->cap;
    lc_slot_t *s = &w->slots[i];
    *s = (lc_slot_t){.seq = w->next_seq++,
                     .tag = tag,
                     .aux = aux,
                     .subject = subj,
                     .buf = buf,
                     .len = len,
                     .first_ns = clock_mono_ns()};
    buf = NULL;
    subj = NULL;
    w->busy++;
    natsStatus ns = lc_window_publish(w, i);
    if (ns != NATS_OK) {
        status = lc_nats_fail(err, subject, ns);
        lc_slot_clear(s); /* nothing went out: no callback (lanes_client.h) */
        w->busy--;
    }
out:
    pthread_mutex_unlock(&w->mu);
    free(buf);
    free(subj);
    return status;
}

void lc_window_poll(lc_window_t *w, int64_t wait_ms)
{
    pthread_mutex_lock(&w->mu);
    lc_window_pump(w, wait_ms);
    pthread_mutex_unlock(&w->mu);
}

lc_status_t lc_window_drain(lc_window_t *w, int64_t timeout_ms)
{
    uint64_t until = clock_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
    pthread_mutex_lock(&w->mu);
    lc_window_pump(w, 0);
    while (w->busy > 0 && clock_mono_ns() < until)
        lc_window_pump(w, lc_window_wait_ms(w, until));
    lc_status_t status = w->busy == 0 ? LC_OK : LC_ETIMEOUT;
    pthread_mutex_unlock(&w->mu);
    return status;
}

size_t lc_window_pending(lc_window_t *w)
{
    pthread_mutex_lock(&w->mu);
    size_t n = w->busy;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void lc_window_close(lc_window_t *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    if (w->sub != NULL)
        lc_window_pump(w, 0); /* what already arrived is an answer, not a loss */
    w->closing = true;
    for (uint32_t i = 0; w->busy > 0 && i < w->cap; i++)
        if (w->slots[i].seq != 0)
            lc_window_settle(w, i, NULL, LC_ETIMEOUT);
    pthread_mutex_unlock(&w->mu);
    lc_sub_destroy(w->nc, w->sub);
    free(w->inbox);
    pthread_mutex_destroy(&w->mu);
    free(w->slots);
    free(w);
}
