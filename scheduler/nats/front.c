/*
 * front.c - the NATS front: with main.c, the only daemon code that talks to nats.c.
 *
 * Owns the connection, the subscriptions and the writer thread (invariant 13). Every callback
 * hands the message to the owner thread (invariant 6) and returns; it never touches scheduling
 * state.
 *
 * Invariants:
 *   1. No silent drops: every subscription's pending limits are lifted (core NATS would
 *      otherwise drop a burst past 65,536 messages per subscription with only a slow-consumer
 *      error), and if the library still reports a slow consumer, the drop count is read,
 *      logged and counted. The bound on what waits is the owner's queue's, in bytes per class
 *      (evqueue.c invariant 5); a message it refuses is counted and logged once a tick.
 *   2. A disconnect of the daemon's own connection is an event for the owner, which treats
 *      every consumer it served as disconnected (their batches return to the queue).
 *   3. The owner's publishes go straight to natsConnection_Publish, which is thread-safe; a
 *      return of 0 means the connection took the message (the commit rule hangs on it).
 *   4. At start, a server that does not answer yet is waited for (compose and Kubernetes start
 *      NATS and lanesched together): tries FRONT_RETRY_FIRST_MS apart, doubling to
 *      FRONT_RETRY_MAX_MS, one log line each, until --connect-wait-ms or a stop signal. The
 *      budget is wall time from the first try: each try's own connect timeout and each pause
 *      are cut to what is left of it, so the start gives up within a few milliseconds of the
 *      budget whether the server refuses, is not there, or accepts and never answers. Any
 *      other failure (bad credentials, TLS) ends the start at once.
 *   5. $SRV.<verb>, $SRV.<verb>.lanesched and $SRV.<verb>.lanesched.<id> are subscribed with no
 *      queue group, so every instance answers a service client's request-many.
 *   6. A message reaches the owner as nats.c delivered it (daemon_post_msg): no copy, no
 *      allocation of ours; the owner destroys it after the burst it came in.
 *   7. Every subscription is served by nats.c's global delivery pool of one thread: one thread
 *      instead of one per subscription, the messages of all subjects in the order they arrived,
 *      and one hand-over path to the owner.
 *   8. No nats.c message outlives the library: the subscriptions are drained (every message
 *      nats.c holds for them delivered); once front_destroy begins, a callback destroys what it
 *      gets instead of posting it; front_destroy waits until every subscription's completion
 *      callback ran (its closing message destroyed by the delivery thread: destroyed during
 *      nats_CloseAndWait instead, it would reach the library's collector thread after it
 *      stopped, and leak) and no callback runs, and the messages still queued for the owner are
 *      released (daemon_events_drop), all before nats_CloseAndWait.
 *   9. A submit subscription is destroyed only once nats.c's read loop cannot hold it: after a
 *      flush that followed its UNSUB (the read loop handles the PONG after every message it
 *      looked up before), or after the connection closed. nats.c 3.4's read loop looks a
 *      message's subscription up and locks it after, so one destroyed in between is used after
 *      it was freed (nats.c issue #637, fixed in 3.6). Until then it waits in f->retired.
 *  10. The connection's state is known without asking nats.c from another thread: an atomic
 *      flag set by the connect and the reconnected callback, cleared by the disconnected one,
 *      with the reconnects and the time spent disconnected; each reconnect logs "NATS
 *      reconnected after N ms" (the outage as the daemon saw it).
 *  11. "<inbox prefix>.<instance id>.>" is subscribed for the no-responders statuses of Batches
 *      (undelivered.c): the server sends one to the publisher's own subscription when a Batch
 *      reached no subscriber, and only those reach the owner; any other message there (a
 *      client publishing on it) is destroyed unread. A server that refuses the subscription is
 *      said so in the log at the start, and Batches then ask for no status.
 *  12. A connection nats.c closes for good while the daemon serves (not by front_destroy) stops
 *      the daemon with exit status 1 (front_lost): a process that stayed up deaf would hold its
 *      models, its lock and its leases while serving no one.
 *  13. What the owner published leaves when it goes idle (turn.c invariant 8), unless --send
 *      flusher: its idle call wakes the writer thread, which flushes the connection (a PING
 *      written with everything buffered; the writer, not the owner, waits for the PONG). nats.c's
 *      flusher thread waits 1 ms before each write it does: left to it, a worker that pulls after
 *      each batch waits that long for every Batch (docs/bench.md, "The demo"). While events keep
 *      coming the owner does not go idle, and the flusher gathers the writes. One flush at a
 *      time: idle calls during one ask for one more.
 *
 * Rejected: nats.c's micro-service module (not in nats.c 3.4), and queue-group subscriptions
 * (one daemon instance owns each model's scheduling state; several instances split models
 * with --models instead). For the message path, measured with `lanesched-bench throughput`
 * (tools/bench/throughput.c; figures in docs/throughput.md):
 *   - A delivery thread per subscription (nats.c's default): seven
 *     threads and more, each woken per message, and subjects reordered against each other.
 *   - Synchronous subscriptions drained by the owner: nats.c cannot wait on several at once, so
 *     the owner would poll them in turn or sleep on one while another fills; one wildcard
 *     subscription ("<prefix>.>") would take every instance's submits with --models.
 *   - Copying each message into an event (four allocations and a copy of
 *     the payload per message, then natsMsg_Destroy, which wakes nats.c's garbage collector
 *     thread per message).
 *   - natsOptions_SetSendAsap instead of invariant 13: a socket write per reply and Batch, by the
 *     owner, which cost throughput and CPU per item at saturation, where invariant 13 seldom
 *     flushes (docs/throughput.md, "Writing at once").
 *   - natsOptions_SetIOBufSize of 1 MiB instead of 32 KiB: a batch publish no longer fills the
 *     write buffer (the owner then writes to the socket itself) and a Submit fits one read, but
 *     neither the throughput nor the daemon's CPU per item moved (docs/owner-thread.md).
 */
#include "scheduler/nats/front.h"

#include "common/log.h"
#include "common/text.h"

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The subscriptions of one front: a submit subject per model of --models without leases (the
 * default --limit-models is 1,024), the consumer and stats subjects, $SRV's and the Batches'
 * no-responders subject. */
#define FRONT_MAX_SUBS 1100
/* First pause between connection tries at start, and its cap: a server starting beside us is
 * caught within a fraction of a second, and a long outage costs one log line per 5 s. */
#define FRONT_RETRY_FIRST_MS 250u
#define FRONT_RETRY_MAX_MS   5000u
/* One try's connect timeout (nats.c's own default), cut to what is left of --connect-wait-ms
 * (invariant 4). */
#define FRONT_CONNECT_TIMEOUT_MS 2000u
/* How long front_destroy waits for message callbacks still running (each one only queues). */
#define FRONT_CLOSE_WAIT_MS 5000
/* How long a stop waits for the subscriptions' drains while the server answers (one round
 * trip each, all at once) ... */
#define FRONT_DRAIN_MS 1000
/* ... and while it does not (disconnected, reconnecting, or going away with the daemon): no
 * drain can complete then, so the wait only lets what nats.c already holds reach the
 * callbacks, and a stop never waits out a dead server. */
#define FRONT_DRAIN_DOWN_MS 200
/* nats.c's global delivery pool (invariant 7): one thread keeps every subject's messages in
 * arrival order, and the owner, not the delivery, is where the work is. */
#define FRONT_DELIVERY_THREADS 1
/* The wait for the server's PONG after a submit subject is unsubscribed (invariant 9): short,
 * since the lease thread waits too; a slower PONG only keeps the subscription until later. */
#define FRONT_RETIRE_FLUSH_MS 1000
/* The writer's wait for the PONG of its flush (invariant 13). The write is done before the wait
 * begins, and nothing needs the PONG: a loopback or same-zone round trip is well within 5 ms, and
 * on a slower link the writer stops waiting so that the next idle call is not held behind it. */
#define FRONT_WRITE_FLUSH_MS 5

typedef struct {
    front_t *front;
    ev_kind_t kind;
    size_t token_at; /* the subject's token starts here ("lanes.ack." is 10) */
    int status_only; /* only NATS's no-responders statuses reach the owner (invariant 11) */
} front_sub_t;

/* With leases, the submit subject of each model of --models, subscribed while its lease is held. */
typedef struct {
    char *model; /* owned */
    natsSubscription *sub;
    front_sub_t ctx;
} front_submit_t;

struct front {
    daemon_t *d;
    atomic_int closing;      /* front_destroy began: callbacks destroy what they get */
    atomic_int in_callbacks; /* message callbacks running now */
    atomic_int completed;    /* subscriptions closed and done with (front_on_complete) */
    atomic_int subscribed;   /* subscriptions made with front_on_complete: completed reaches it */
    int drained;             /* front_unsubscribe ran (the stopping thread, then front_destroy) */
    natsConnection *nc;
    natsSubscription *subs[FRONT_MAX_SUBS];
    front_sub_t sub_ctx[FRONT_MAX_SUBS];
    int n_subs;
    char prefix[DAEMON_PREFIX_MAX + 1];
    pthread_mutex_t submits_lock; /* the lease thread and the signal thread both change them */
    front_submit_t **submits;     /* under submits_lock; each apart: subscriptions point at it */
    size_t n_submits;
    int stopping; /* under submits_lock: front_unsubscribe ran, nothing is subscribed again */
    natsSubscription **retired; /* under submits_lock: unsubscribed, not yet safe to destroy */
    size_t n_retired;
    /* invariant 10 */
    atomic_int connected;
    atomic_uint_fast64_t reconnects;
    atomic_uint_fast64_t errors;    /* asynchronous errors reported (front_on_error) */
    log_budget_t error_lines;       /* their log lines: nats.c's one error callback thread only */
    atomic_uint_fast64_t outage_ns; /* time disconnected, summed over the reconnects */
    atomic_uint_fast64_t down_since_ns; /* when the current outage began, 0 while connected */
    char undelivered[DAEMON_UNDELIVERED_BASE_MAX + 8]; /* its subscription's subject (inv. 11) */
    atomic_int lost; /* the connection closed for good while serving (invariant 12) */
    /* invariant 13: the writer thread */
    pthread_mutex_t write_lock;
    pthread_cond_t write_cond;
    int write_asked; /* under write_lock: the owner went idle since the last flush began */
    int write_stop;  /* under write_lock */
    int writer_started;
    pthread_t writer;
};

static uint64_t front_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void front_on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    front_sub_t *s = closure;
    front_t *f = s->front;
    atomic_fetch_add(&f->in_callbacks, 1);
    if (atomic_load(&f->closing) ||                         /* invariant 8 */
        (s->status_only && !natsMsg_IsNoResponders(msg))) { /* invariant 11 */
        natsMsg_Destroy(msg);
    } else {
        const char *subject = natsMsg_GetSubject(msg);
        const char *token = strlen(subject) > s->token_at ? subject + s->token_at : "";
        /* invariant 6: the owner reads the message where nats.c put it and releases it */
        /* a drop (out of memory, the backlog's bound) is counted, and logged by the owner */
        (void)daemon_post_msg(f->d, s->kind, token, natsMsg_GetReply(msg), natsMsg_GetData(msg),
                              (size_t)natsMsg_GetDataLength(msg), msg);
    }
    atomic_fetch_sub(&f->in_callbacks, 1);
}

/* nats.c calls this once a closed subscription's last callback returned and its closing
 * message was destroyed (invariant 8). */
static void front_on_complete(void *closure)
{
    front_t *f = closure;
    atomic_fetch_add(&f->completed, 1);
}

static void front_release(void *ctx, void *msg)
{
    (void)ctx;
    natsMsg_Destroy(msg);
}

static void front_on_disconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    front_t *f = closure;
    atomic_store(&f->connected, 0); /* invariant 10 */
    uint_fast64_t zero = 0;
    atomic_compare_exchange_strong(&f->down_since_ns, &zero, front_now_ns());
    if (daemon_post(f->d, EV_DISCONNECTED, NULL, NULL, NULL, 0) != 0)
        log_write(LOG_ERROR, "out of memory: the disconnect could not reach the owner");
}

/* Invariant 12: nats.c closes a connection for good after an error it does not retry (the
 * server's -ERR for a protocol line over its max_control_line, for one); a close the front did
 * not ask for stops the daemon, which then exits 1. */
static void front_on_closed(natsConnection *nc, void *closure)
{
    front_t *f = closure;
    if (atomic_load(&f->closing))
        return; /* front_destroy's own close */
    atomic_store(&f->lost, 1);
    atomic_store(&f->connected, 0);
    const char *text = NULL;
    natsConnection_GetLastError(nc, &text);
    log_write(LOG_ERROR,
              "the NATS connection was closed for good (%s): stopping, exit status 1, for a "
              "supervisor to start lanesched again",
              text != NULL && text[0] != '\0' ? text : "no error given");
    if (daemon_post(f->d, EV_STOP, NULL, NULL, NULL, 0) != 0)
        log_write(LOG_ERROR, "out of memory: cannot stop; kill the process");
}

int front_lost(front_t *f)
{
    return atomic_load(&f->lost);
}

static void front_on_reconnected(natsConnection *nc, void *closure)
{
    front_t *f = closure;
    uint64_t since = atomic_exchange(&f->down_since_ns, 0);
    uint64_t outage = since != 0 ? front_now_ns() - since : 0;
    atomic_fetch_add(&f->outage_ns, outage);
    atomic_fetch_add(&f->reconnects, 1);
    atomic_store(&f->connected, 1);
    char url[256] = "";
    natsConnection_GetConnectedUrl(nc, url, sizeof(url));
    log_write(LOG_INFO, "NATS reconnected after %llu ms (to %s)",
              (unsigned long long)(outage / 1000000), url);
}

void front_nats_state(front_t *f, front_nats_state_t *out)
{
    uint64_t since = atomic_load(&f->down_since_ns);
    *out = (front_nats_state_t){
        .connected = atomic_load(&f->connected),
        .reconnects = atomic_load(&f->reconnects),
        .errors = atomic_load(&f->errors),
        .outage_ns = atomic_load(&f->outage_ns) + (since != 0 ? front_now_ns() - since : 0),
    };
}

static void front_on_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    front_t *f = closure;
    int64_t dropped = 0;
    if (sub != NULL)
        natsSubscription_GetDropped(sub, &dropped);
    atomic_fetch_add(&f->errors, 1);
    /* A client causes these at will (a reply subject the server refuses the daemon, for one):
     * counted always, logged within a budget. */
    /* the server's text names the subject a permission refused (P.register.> when the
     * daemon's user is configured for an older release) */
    const char *text = NULL;
    if (err == NATS_NOT_PERMITTED)
        natsConnection_GetLastError(nc, &text);
    if (log_budget_allow(&f->error_lines, LOG_ERROR, front_now_ns(), "NATS errors"))
        log_write(LOG_ERROR,
                  "NATS error: %s%s%s (%lld messages dropped on this subscription so far)",
                  natsStatus_GetText(err), text != NULL ? ": " : "", text != NULL ? text : "",
                  (long long)dropped);
    if (err == NATS_SLOW_CONSUMER) /* one message dropped per slow-consumer report */
        daemon_dropped_note(f->d);
}

front_t *front_create(daemon_t *d)
{
    front_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->d = d;
    pthread_mutex_init(&f->submits_lock, NULL);
    pthread_mutex_init(&f->write_lock, NULL);
    pthread_cond_init(&f->write_cond, NULL);
    daemon_release_set(d, front_release, f);
    return f;
}

/* Invariant 13. */
static void *front_writer_main(void *arg)
{
    front_t *f = arg;
    pthread_mutex_lock(&f->write_lock);
    for (;;) {
        while (!f->write_asked && !f->write_stop)
            pthread_cond_wait(&f->write_cond, &f->write_lock);
        if (f->write_stop)
            break;
        f->write_asked = 0;
        pthread_mutex_unlock(&f->write_lock);
        natsConnection_FlushTimeout(f->nc, FRONT_WRITE_FLUSH_MS);
        pthread_mutex_lock(&f->write_lock);
    }
    pthread_mutex_unlock(&f->write_lock);
    return NULL;
}

/* The daemon's idle function (invariant 13), on the owner thread. */
static void front_idle(void *ctx)
{
    front_t *f = ctx;
    pthread_mutex_lock(&f->write_lock);
    if (!f->write_asked) {
        f->write_asked = 1;
        pthread_cond_signal(&f->write_cond);
    }
    pthread_mutex_unlock(&f->write_lock);
}

static void front_writer_stop(front_t *f)
{
    if (!f->writer_started)
        return;
    daemon_idle_set(f->d, NULL, NULL);
    pthread_mutex_lock(&f->write_lock);
    f->write_stop = 1;
    pthread_cond_signal(&f->write_cond);
    pthread_mutex_unlock(&f->write_lock);
    pthread_join(f->writer, NULL);
    f->writer_started = 0;
}

int front_publish(void *ctx, const char *subject, const char *reply, const void *data, size_t len)
{
    front_t *f = ctx;
    natsStatus s = reply != NULL
                       ? natsConnection_PublishRequest(f->nc, subject, reply, data, (int)len)
                       : natsConnection_Publish(f->nc, subject, data, (int)len);
    if (s != NATS_OK)
        log_write(LOG_WARN, "publish to %s failed: %s", subject, natsStatus_GetText(s));
    return s == NATS_OK ? 0 : -1;
}

static daemon_status_t front_subscribe_as(front_t *f, const char *subject, ev_kind_t kind,
                                          size_t token_at, int status_only)
{
    if (f->n_subs == FRONT_MAX_SUBS) {
        log_write(LOG_ERROR,
                  "cannot subscribe to %s: more than %d subscriptions (--models lists "
                  "too many models; split them between instances)",
                  subject, FRONT_MAX_SUBS);
        return DAEMON_EINVAL;
    }
    front_sub_t *ctx = &f->sub_ctx[f->n_subs];
    *ctx = (front_sub_t){f, kind, token_at, status_only};
    natsSubscription *sub = NULL;
    natsStatus s = natsConnection_Subscribe(&sub, f->nc, subject, front_on_msg, ctx);
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(sub, -1, -1); /* invariant 1 */
    if (s == NATS_OK)
        s = natsSubscription_SetOnCompleteCB(sub, front_on_complete, f); /* invariant 8 */
    if (s != NATS_OK) {
        log_write(LOG_ERROR, "cannot subscribe to %s: %s", subject, natsStatus_GetText(s));
        natsSubscription_Destroy(sub);
        return DAEMON_ENATS;
    }
    f->subs[f->n_subs++] = sub;
    atomic_fetch_add(&f->subscribed, 1);
    log_write(LOG_DEBUG, "subscribed to %s", subject);
    return DAEMON_OK;
}

static daemon_status_t front_subscribe(front_t *f, const char *subject, ev_kind_t kind,
                                       size_t token_at)
{
    return front_subscribe_as(f, subject, kind, token_at, 0);
}

/* The subject Batches ask NATS's no-responders status on (invariant 11): under the daemon's own
 * inbox prefix, one per instance. */
static daemon_status_t front_subscribe_undelivered(front_t *f, const char *inbox_prefix)
{
    char base[DAEMON_UNDELIVERED_BASE_MAX + 1], subject[DAEMON_UNDELIVERED_BASE_MAX + 8];
    int n = snprintf(base, sizeof(base), "%s.%s", inbox_prefix != NULL ? inbox_prefix : "_INBOX",
                     daemon_instance_id(f->d));
    if (n <= 0 || (size_t)n >= sizeof(base)) {
        log_write(LOG_WARN, "--inbox-prefix too long for the batches' no-responders subject: a "
                            "worker's closed inbox is found by --dead-after-ms only");
        return DAEMON_OK;
    }
    snprintf(subject, sizeof(subject), "%s.>", base);
    daemon_status_t st = front_subscribe_as(f, subject, EV_UNDELIVERED, (size_t)n + 1, 1);
    if (st == DAEMON_OK)
        snprintf(f->undelivered, sizeof(f->undelivered), "%s", subject);
    return st == DAEMON_OK ? daemon_undelivered_set(f->d, base) : st;
}

/* After the subscriptions' flush: a server that refused the daemon the no-responders subject
 * (its permissions) would never send a status there, so Batches stop asking for one. */
static void front_undelivered_check(front_t *f)
{
    const char *text = NULL;
    if (f->undelivered[0] == '\0' ||
        natsConnection_GetLastError(f->nc, &text) != NATS_NOT_PERMITTED || text == NULL ||
        strstr(text, f->undelivered) == NULL)
        return;
    log_write(LOG_WARN,
              "the server refuses the daemon a subscription to %s (%s): a batch sent to a worker "
              "gone with pulls open waits for --dead-after-ms; allow the daemon's user to "
              "subscribe under its --inbox-prefix (docs/security.md)",
              f->undelivered, text);
    (void)daemon_undelivered_set(f->d, NULL);
}

/* Connects, waiting for a server that does not answer yet (invariant 4). */
static natsStatus front_connect_wait(front_t *f, const front_config_t *cfg, natsOptions *opts,
                                     int n_urls)
{
    uint32_t pause = FRONT_RETRY_FIRST_MS;
    uint64_t start = front_now_ns();
    int bounded = cfg->connect_wait_ms != 0;
    uint64_t deadline = start + (uint64_t)cfg->connect_wait_ms * 1000000ull;
    for (unsigned attempt = 1;; attempt++) {
        /* each server of the list is tried with the timeout: share what is left */
        uint64_t left_ms =
            bounded ? (deadline > front_now_ns() ? (deadline - front_now_ns()) / 1000000ull : 0)
                    : UINT32_MAX;
        uint64_t timeout = left_ms / (uint64_t)(n_urls > 0 ? n_urls : 1);
        timeout = timeout < FRONT_CONNECT_TIMEOUT_MS ? timeout : FRONT_CONNECT_TIMEOUT_MS;
        natsStatus s = natsOptions_SetTimeout(opts, (int64_t)(timeout > 0 ? timeout : 1));
        if (s == NATS_OK)
            s = natsConnection_Connect(&f->nc, opts);
        uint64_t now = front_now_ns();
        if (s == NATS_OK) {
            if (attempt > 1)
                log_write(LOG_INFO, "NATS reached at %s after %u tries (%llu ms)", cfg->servers,
                          attempt, (unsigned long long)((now - start) / 1000000));
            return s;
        }
        int retry = s == NATS_NO_SERVER || s == NATS_TIMEOUT || s == NATS_IO_ERROR;
        if (!retry || (bounded && now + 1000000ull > deadline)) {
            log_write(LOG_ERROR, "cannot connect to NATS at %s: %s%s", cfg->servers,
                      natsStatus_GetText(s), retry ? " (gave up: --connect-wait-ms reached)" : "");
            if (retry)
                log_write(LOG_INFO, "gave up after %u tries in %llu ms (--connect-wait-ms %u)",
                          attempt, (unsigned long long)((now - start) / 1000000),
                          cfg->connect_wait_ms);
            return s;
        }
        if (bounded && now + (uint64_t)pause * 1000000ull > deadline)
            pause = (uint32_t)((deadline - now) / 1000000ull);
        log_write(LOG_WARN, "NATS not reachable at %s (try %u): %s; next try in %.2f s",
                  cfg->servers, attempt, natsStatus_GetText(s), pause / 1000.0);
        if (cfg->pause != NULL && cfg->pause(cfg->pause_ctx, pause) != 0) {
            log_write(LOG_INFO, "stopped while waiting for NATS");
            return NATS_NOT_PERMITTED;
        }
        pause = pause * 2 < FRONT_RETRY_MAX_MS ? pause * 2 : FRONT_RETRY_MAX_MS;
    }
}

/* The $SRV subjects of the three verbs (invariant 5). */
static daemon_status_t front_subscribe_service(front_t *f)
{
    static const char *const verbs[] = {"PING", "INFO", "STATS"};
    const char *id = daemon_instance_id(f->d);
    char subject[128];
    daemon_status_t st = DAEMON_OK;
    for (size_t i = 0; i < 3 && st == DAEMON_OK; i++) {
        snprintf(subject, sizeof(subject), "$SRV.%s", verbs[i]);
        st = front_subscribe(f, subject, EV_SERVICE, 5);
        snprintf(subject, sizeof(subject), "$SRV.%s.lanesched", verbs[i]);
        if (st == DAEMON_OK)
            st = front_subscribe(f, subject, EV_SERVICE, 5);
        snprintf(subject, sizeof(subject), "$SRV.%s.lanesched.%s", verbs[i], id);
        if (st == DAEMON_OK)
            st = front_subscribe(f, subject, EV_SERVICE, 5);
    }
    return st;
}

daemon_status_t front_connect(front_t *f, const front_config_t *cfg)
{
    daemon_status_t st = DAEMON_ENATS;
    natsOptions *opts = NULL;
    char *servers = strdup(cfg->servers);
    const char *urls[32];
    int n_urls = 0;
    natsStatus s = natsOptions_Create(&opts);
    if (servers == NULL || s != NATS_OK)
        goto out;
    for (char *save = NULL, *u = strtok_r(servers, ",", &save); u != NULL && n_urls < 32;
         u = strtok_r(NULL, ",", &save))
        urls[n_urls++] = u;
    s = natsOptions_SetServers(opts, urls, n_urls);
    if (s == NATS_OK)
        s = natsOptions_SetName(opts, "lanesched");
    if (s == NATS_OK && cfg->user != NULL)
        s = natsOptions_SetUserInfo(opts, cfg->user, cfg->password ? cfg->password : "");
    if (s == NATS_OK && cfg->token != NULL)
        s = natsOptions_SetToken(opts, cfg->token);
    if (s == NATS_OK && cfg->creds_file != NULL)
        s = natsOptions_SetUserCredentialsFromFiles(opts, cfg->creds_file, NULL);
    if (s == NATS_OK && (cfg->tls_ca != NULL || cfg->tls_cert != NULL || cfg->tls_url))
        s = natsOptions_SetSecure(opts, true);
    if (s == NATS_OK && text_given(cfg->inbox_prefix))
        s = natsOptions_SetCustomInboxPrefix(opts, cfg->inbox_prefix);
    if (s == NATS_OK && cfg->tls_ca != NULL &&
        (s = natsOptions_LoadCATrustedCertificates(opts, cfg->tls_ca)) != NATS_OK)
        log_write(LOG_ERROR, "--tls-ca %s: %s", cfg->tls_ca, nats_GetLastError(NULL));
    if (s == NATS_OK && cfg->tls_cert != NULL &&
        (s = natsOptions_LoadCertificatesChain(opts, cfg->tls_cert, cfg->tls_key)) != NATS_OK)
        log_write(LOG_ERROR, "--tls-cert %s, --tls-key %s: %s", cfg->tls_cert,
                  cfg->tls_key ? cfg->tls_key : "(none)", nats_GetLastError(NULL));
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(opts, -1); /* keep trying: consumers resume by pulling */
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(opts, 250);
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(opts, front_on_disconnected, f);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectedCB(opts, front_on_reconnected, f);
    if (s == NATS_OK)
        s = natsOptions_SetClosedCB(opts, front_on_closed, f);
    if (s == NATS_OK)
        s = natsOptions_SetErrorHandler(opts, front_on_error, f);
    if (s == NATS_OK) /* invariant 5 */
        s = nats_SetMessageDeliveryPoolSize(FRONT_DELIVERY_THREADS);
    if (s == NATS_OK)
        s = natsOptions_UseGlobalMessageDelivery(opts, true);
    if (s == NATS_OK)
        s = front_connect_wait(f, cfg, opts, n_urls);
    if (s != NATS_OK)
        goto out;
    atomic_store(&f->connected, 1); /* invariant 10 */
    char subject[512];
    const char *p = cfg->prefix;
    size_t plen = strlen(p);
    snprintf(f->prefix, sizeof(f->prefix), "%s", p);
    if (cfg->leases) {
        /* each model's submit subject comes and goes with its lease (front_submit_serve) */
    } else if (cfg->models == NULL) {
        /* '>' rather than '*': a model name may contain dots (llama-3.1); the rest of the
         * subject after "<prefix>.submit." is the model */
        snprintf(subject, sizeof(subject), "%s.submit.>", p);
        if ((st = front_subscribe(f, subject, EV_SUBMIT, plen + 8)) != DAEMON_OK)
            goto out;
    } else {
        char *models = strdup(cfg->models);
        if (models == NULL)
            goto out;
        for (char *save = NULL, *m = strtok_r(models, ",", &save); m != NULL;
             m = strtok_r(NULL, ",", &save)) {
            snprintf(subject, sizeof(subject), "%s.submit.%s", p, m);
            if ((st = front_subscribe(f, subject, EV_SUBMIT, plen + 8)) != DAEMON_OK)
                break;
        }
        free(models);
        if (st != DAEMON_OK)
            goto out;
    }
    /* the token is what follows "<prefix>.<verb>.": a consumer's secret, or the model of
     * P.register.<model> ('>' as for submits: a model may contain dots) */
    struct {
        const char *verb;
        ev_kind_t kind;
        const char *tail;
    } verbs[] = {{"register", EV_REGISTER, ""}, {"register", EV_REGISTER, ".>"},
                 {"pull", EV_PULL, ".*"},       {"ack", EV_ACK, ".*"},
                 {"hb", EV_HEARTBEAT, ".*"},    {"bye", EV_BYE, ".*"},
                 {"stats", EV_STATS, ""},       {"metrics", EV_METRICS, ""}};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        snprintf(subject, sizeof(subject), "%s.%s%s", p, verbs[i].verb, verbs[i].tail);
        if ((st = front_subscribe(f, subject, verbs[i].kind, plen + strlen(verbs[i].verb) + 2)) !=
            DAEMON_OK)
            goto out;
    }
    if ((st = front_subscribe_service(f)) != DAEMON_OK)
        goto out;
    if ((st = front_subscribe_undelivered(f, cfg->inbox_prefix)) != DAEMON_OK)
        goto out;
    s = natsConnection_Flush(f->nc);
    st = s == NATS_OK ? DAEMON_OK : DAEMON_ENATS;
    if (st == DAEMON_OK)
        front_undelivered_check(f);
    if (st == DAEMON_OK && !cfg->nats_flusher) { /* invariant 13 */
        if (pthread_create(&f->writer, NULL, front_writer_main, f) != 0) {
            log_write(LOG_ERROR, "cannot start the NATS writer thread");
            st = DAEMON_ENOMEM;
            goto out;
        }
        f->writer_started = 1;
        daemon_idle_set(f->d, front_idle, f);
    }
out:
    natsOptions_Destroy(opts);
    free(servers);
    return st;
}

daemon_status_t front_payload_cap(front_t *f, uint32_t configured, uint32_t *out_cap /* out */)
{
    int64_t server = natsConnection_GetMaxPayload(f->nc);
    if (server <= 0) { /* not told: nothing to lower against */
        *out_cap = configured;
        return DAEMON_OK;
    }
    if (server <= DAEMON_BATCH_OVERHEAD) {
        log_write(LOG_ERROR,
                  "the NATS server carries at most %lld bytes per message: a batch keeps %d "
                  "bytes beside its items' payloads, so lanesched needs a server max_payload "
                  "above %d (nats-server's default is 1 MB)",
                  (long long)server, DAEMON_BATCH_OVERHEAD, DAEMON_BATCH_OVERHEAD);
        return DAEMON_EINVAL;
    }
    uint64_t cap = (uint64_t)server - DAEMON_BATCH_OVERHEAD;
    if (configured != 0 && configured <= cap) {
        *out_cap = configured;
        return DAEMON_OK;
    }
    log_write(LOG_INFO,
              "--max-payload lowered to %llu bytes: the server carries at most %lld bytes "
              "per message, and a batch of one item must fit",
              (unsigned long long)cap, (long long)server);
    *out_cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
    return DAEMON_OK;
}

natsConnection *front_connection(front_t *f)
{
    return f->nc;
}

/* Under submits_lock, after a flush or the close (invariant 9). */
static void front_retired_destroy(front_t *f)
{
    for (size_t i = 0; i < f->n_retired; i++)
        natsSubscription_Destroy(f->retired[i]);
    f->n_retired = 0;
}

/* Under submits_lock: unsubscribes sub (taken) and keeps it until a flush (invariant 9). */
static void front_retire(front_t *f, natsSubscription *sub)
{
    natsSubscription_Unsubscribe(sub);
    natsSubscription **grown = realloc(f->retired, (f->n_retired + 1) * sizeof(*grown));
    if (grown == NULL) { /* the unsafe order, narrowed by a flush, rather than a leak */
        natsConnection_FlushTimeout(f->nc, FRONT_RETIRE_FLUSH_MS);
        natsSubscription_Destroy(sub);
        return;
    }
    f->retired = grown;
    f->retired[f->n_retired++] = sub;
}

daemon_status_t front_submit_serve(front_t *f, const char *model, int on)
{
    daemon_status_t st = DAEMON_OK;
    pthread_mutex_lock(&f->submits_lock);
    front_submit_t *s = NULL;
    for (size_t i = 0; i < f->n_submits && s == NULL; i++)
        s = strcmp(f->submits[i]->model, model) == 0 ? f->submits[i] : NULL;
    if (s == NULL && on && !f->stopping) {
        front_submit_t **grown = realloc(f->submits, (f->n_submits + 1) * sizeof(*grown));
        if (grown != NULL)
            f->submits = grown;
        if (grown == NULL || (s = calloc(1, sizeof(*s))) == NULL ||
            (s->model = strdup(model)) == NULL) {
            free(s);
            st = DAEMON_ENOMEM;
            goto out;
        }
        f->submits[f->n_submits++] = s;
    }
    if (s == NULL || (on && (s->sub != NULL || f->stopping)) || (!on && s->sub == NULL))
        goto out;
    if (!on) {
        front_retire(f, s->sub);
        if (natsConnection_FlushTimeout(f->nc, FRONT_RETIRE_FLUSH_MS) == NATS_OK)
            front_retired_destroy(f);
        s->sub = NULL;
        log_write(LOG_DEBUG, "unsubscribed the submits of %s", model);
        goto out;
    }
    char subject[512];
    snprintf(subject, sizeof(subject), "%s.submit.%s", f->prefix, model);
    s->ctx = (front_sub_t){f, EV_SUBMIT, strlen(f->prefix) + 8, 0};
    natsStatus ns = natsConnection_Subscribe(&s->sub, f->nc, subject, front_on_msg, &s->ctx);
    if (ns == NATS_OK)
        ns = natsSubscription_SetPendingLimits(s->sub, -1, -1); /* invariant 1 */
    if (ns == NATS_OK && (ns = natsSubscription_SetOnCompleteCB(s->sub, front_on_complete, f)) ==
                             NATS_OK) /* invariant 8 */
        atomic_fetch_add(&f->subscribed, 1);
    if (ns == NATS_OK && (ns = natsConnection_Flush(f->nc)) == NATS_OK)
        front_retired_destroy(f);
    if (ns != NATS_OK) {
        log_write(LOG_ERROR, "cannot subscribe to %s: %s", subject, natsStatus_GetText(ns));
        if (s->sub != NULL)
            front_retire(f, s->sub);
        s->sub = NULL;
        st = DAEMON_ENATS;
    }
out:
    pthread_mutex_unlock(&f->submits_lock);
    return st;
}

uint64_t front_server_max_payload(front_t *f)
{
    int64_t server = f->nc != NULL ? natsConnection_GetMaxPayload(f->nc) : 0;
    return server > 0 ? (uint64_t)server : 0;
}

void front_unsubscribe(front_t *f)
{
    if (f->drained)
        return;
    /* invariant 8: drained, not only unsubscribed, so that no message is left in nats.c's
     * delivery queue for the library to drop at its close; the lease-held submit subjects too.
     * Without a server a drain cannot complete: the short wait still delivers what nats.c holds,
     * and a stop does not wait out the drain timeouts behind a dead connection. */
    int up = f->nc != NULL && natsConnection_Status(f->nc) == NATS_CONN_STATUS_CONNECTED;
    int64_t wait_ms = up ? FRONT_DRAIN_MS : FRONT_DRAIN_DOWN_MS;
    pthread_mutex_lock(&f->submits_lock);
    f->stopping = 1;
    for (size_t i = 0; i < f->n_submits; i++) {
        if (f->submits[i]->sub != NULL)
            natsSubscription_DrainTimeout(f->submits[i]->sub, wait_ms);
    }
    pthread_mutex_unlock(&f->submits_lock);
    for (int i = 0; i < f->n_subs; i++)
        natsSubscription_DrainTimeout(f->subs[i], wait_ms);
    for (int i = 0; i < f->n_subs; i++)
        natsSubscription_WaitForDrainCompletion(f->subs[i], wait_ms);
    pthread_mutex_lock(&f->submits_lock);
    for (size_t i = 0; i < f->n_submits; i++) {
        if (f->submits[i]->sub != NULL)
            natsSubscription_WaitForDrainCompletion(f->submits[i]->sub, wait_ms);
    }
    pthread_mutex_unlock(&f->submits_lock);
    f->drained = 1;
    if (up && natsConnection_Status(f->nc) == NATS_CONN_STATUS_CONNECTED)
        natsConnection_FlushTimeout(f->nc, FRONT_DRAIN_DOWN_MS);
}

void front_destroy(front_t *f)
{
    if (f == NULL)
        return;
    atomic_store(&f->closing, 1); /* invariant 8 */
    front_unsubscribe(f);
    for (int i = 0; i < f->n_subs; i++)
        natsSubscription_Destroy(f->subs[i]);
    for (size_t i = 0; i < f->n_submits; i++) {
        natsSubscription_Destroy(f->submits[i]->sub);
        free(f->submits[i]->model);
        free(f->submits[i]);
    }
    free(f->submits);
    front_writer_stop(f); /* it flushes f->nc */
    if (f->nc != NULL)
        natsConnection_Close(f->nc);
    front_retired_destroy(f); /* invariant 9: the read loop is joined */
    free(f->retired);
    natsConnection_Destroy(f->nc);
    for (int waited = 0; (atomic_load(&f->in_callbacks) != 0 ||
                          atomic_load(&f->completed) < atomic_load(&f->subscribed)) &&
                         waited < FRONT_CLOSE_WAIT_MS;
         waited++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    /* The messages the owner never took go back to nats.c while it can still free them
     * (natsMsg_Destroy hands them to its garbage collector thread). */
    daemon_events_drop(f->d);
    /* nats.c delivers the disconnect of its own close on a callback thread later: wait for
     * every library thread to finish before the front (and then the daemon) is freed. */
    if (nats_CloseAndWait(5000) != NATS_OK)
        log_write(LOG_WARN, "the NATS library did not stop within 5 s");
    pthread_mutex_destroy(&f->submits_lock);
    pthread_mutex_destroy(&f->write_lock);
    pthread_cond_destroy(&f->write_cond);
    free(f);
}
