/*
 * client_int.h - private to clients/c/: the structs behind lanes_client.h's two handles and the
 * helpers the library's files share. Not installed, not included by the tools.
 *
 * Who owns what (the invariants numbered here are cited by the .c files):
 *  1. struct lc_client: the NATS connection and a copy of the prefix (connection.c creates and
 *     frees them).
 *  2. struct lc_consumer: copies of its configuration strings, its inbox and the synchronous
 *     subscription on it, the strings of the current registration, the queue of outstanding
 *     pulls, the in-progress set and the heartbeat thread with its mutex and condition variable
 *     (consumer.c creates and frees them). It borrows its client.
 *  3. consumer->mu guards exactly: the registration strings the heartbeat thread reads and the
 *     heartbeat interval, the in-progress set, hb_stop and the statistics. No NATS call is made
 *     while it is held, so a slow publish never blocks lc_inprogress_* callers.
 *  4. The heartbeat thread is the only thread besides the caller's that touches a consumer.
 *  5. A request window (window.c) owns its inbox, its subscription and each outstanding
 *     request's bytes; the client owns the asynchronous submits' window (submit_async.c), the
 *     consumer its asynchronous acks' window (ack_async.c). Each window has its own mutex and
 *     runs its callbacks under it, on the thread that entered it.
 */
#ifndef LANESCHED_CLIENTS_C_CLIENT_INT_H
#define LANESCHED_CLIENTS_C_CLIENT_INT_H

#include "clients/c/lanes_client.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

/* Room for one failure text; longer texts are truncated. */
#define LC_ERR_MAX 256
/* How long lc_client_close and a fire-and-forget Bye wait for the server to have what was
 * published: long enough for a loopback or LAN round trip, short enough not to hang a shutdown. */
#define LC_FLUSH_ON_CLOSE_MS 1000
/* lc_sub_destroy's wait for the PONG after an UNSUB: a loopback server answers in well under a
 * millisecond, and a consumer's close should not hang on a stalled one. */
#define LC_UNSUB_FLUSH_MS 1000

/* The longest inbox a request window accepts ("_INBOX." and a 22-character NUID is 29). */
#define LC_INBOX_MAX 128

typedef struct lc_window lc_window_t;
typedef struct lc_submit_async lc_submit_async_t;

struct lc_client {
    natsConnection *nc;
    char *prefix;
    char *inbox_prefix;       /* owned; NULL = nats.c's "_INBOX" */
    lc_submit_async_t *async; /* owned; NULL until lc_submit_async_open */
    char err[LC_ERR_MAX];
};

typedef struct {
    uint32_t credits;       /* OK batches still owed by the daemon */
    uint64_t lost_after_ns; /* monotonic: expiry + grace; silent past it = forgotten */
} lc_pull_t;

typedef struct {
    uint64_t batch_id;
    uint32_t n_items; /* 0 = added by hand: only all / unknown_batch / remove clear it */
    uint32_t settled; /* distinct positions acked or nak'd */
    uint8_t *bits;    /* owned; n_items bits, NULL when n_items == 0 */
} lc_inprogress_t;

struct lc_consumer {
    lc_client_t *client;         /* borrowed */
    lc_consumer_config_t config; /* model and name point at the copies below */
    char *model;                 /* owned copy */
    char *name;                  /* owned copy */
    char *inbox;                 /* owned (lc_inbox_make) */
    natsSubscription *sub;       /* owned */
    bool registered;
    lc_registered_t reg;  /* strings point at reg_strings; swapped under mu */
    char *reg_strings[5]; /* owned: id, pull, ack, heartbeat, bye */
    lc_pull_t *pulls;     /* owned; caller's thread only */
    size_t n_pulls, cap_pulls;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool sync_ready; /* mu and cond initialised */
    pthread_t hb_thread;
    bool hb_running;         /* caller's thread only */
    bool hb_stop;            /* under mu */
    uint32_t hb_interval_ms; /* under mu */
    lc_inprogress_t *ip;     /* under mu */
    size_t n_ip, cap_ip;
    lc_consumer_stats_t stats; /* under mu */
    lc_window_t *acks;         /* owned; asynchronous acks, NULL until the first (ack_async.c) */
    char err[LC_ERR_MAX];
};

/* ---- connection.c: failure texts, subjects, request/reply --------------------------------- */

/* Whether an error string carries this code word: "code" or "code: text" (subjects.md: clients
 * decide on the word up to the first ':'). error may be NULL. */
int lc_code_is(const char *error, const char *code);

/* printf into err (LC_ERR_MAX bytes, the client's or the consumer's text). */
void lc_errf(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records "what: nats text (last error)" in err and returns the mapped status. */
lc_status_t lc_nats_fail(char *err, const char *what, natsStatus s);

/* Records "[subject: ]what: codec text" in err and returns the mapped status. */
lc_status_t lc_codec_fail(char *err, const char *subject /* may be NULL */, const char *what,
                          codec_status_t cs);

/* "a.b" or "a.b.c" (c may be NULL); a, b, c borrowed; returned to the caller (free), NULL when
 * out of memory. */
char *lc_subject_make(const char *a, const char *b, const char *c);

/* A string that can stand in a subject: non-empty, no whitespace, no wildcard, no empty token. */
bool lc_subject_part_ok(const char *s);

/*
 * Sends buf (borrowed, len bytes) on subject as a request, up to 1 + retries times on timeout /
 * no responders, the same bytes each time (connection.c invariant 2). *out_msg is returned to the
 * caller (natsMsg_Destroy).
 */
lc_status_t lc_request_do(natsConnection *nc, const char *subject, const uint8_t *buf, size_t len,
                          int64_t timeout_ms, uint32_t retries, char *err,
                          uint32_t *out_attempts /* out, may be NULL */,
                          natsMsg **out_msg /* out */);

/* A fresh inbox "<prefix>.<unique>" (prefix NULL: "_INBOX"), returned to the caller (free). */
natsStatus lc_inbox_make(const char *prefix, char **out /* out */);

/* Unsubscribes sub (taken; NULL is a no-op) on nc (borrowed), waits up to LC_UNSUB_FLUSH_MS
 * for the server's PONG, then destroys sub. nats.c 3.4's read loop looks a message's
 * subscription up and locks it after, so a subscription destroyed in between is used after it
 * was freed (nats.c issue #637, fixed in 3.6); it handles the PONG only after every message it
 * looked up before. A PONG later than that leaves the race as open as nats.c has it. */
void lc_sub_destroy(natsConnection *nc, natsSubscription *sub);

/* ---- window.c: requests in flight, answered through a callback --------------------------- */

/* What a window's callback learns about one request; pointers borrowed for the callback. */
typedef struct {
    uint64_t tag, aux;  /* as given to lc_window_send */
    const uint8_t *buf; /* the request's bytes */
    size_t len;
    uint32_t attempts;   /* sends so far */
    uint64_t latency_ns; /* first send -> now */
    natsMsg *msg;        /* the reply on LC_OK (destroyed after the callback), else NULL */
    lc_status_t status;  /* LC_OK, LC_ETIMEOUT or LC_ENORESPONDERS (given up) */
    bool closed;         /* given up by lc_window_close */
} lc_window_done_t;

typedef void (*lc_window_fn)(void *ctx, const lc_window_done_t *done);

/* A window of cap requests on nc (borrowed), replies on an inbox under inbox_prefix (borrowed,
 * NULL = "_INBOX"), each resent after timeout_ms up to retries times;
 * fn(ctx) settles each. *out returned to the caller (lc_window_close). Failure text in err. */
lc_status_t lc_window_open(natsConnection *nc, const char *inbox_prefix, uint32_t cap,
                           int64_t timeout_ms, uint32_t retries, lc_window_fn fn, void *ctx,
                           char *err, lc_window_t **out /* out */);
/* Publishes buf (taken, len bytes) on subject (borrowed) with a reply subject of the window,
 * waiting at most stall_ms for a free slot. LC_OK: fn will settle it once; otherwise nothing
 * went out and fn is not called. Failure text in err. */
lc_status_t lc_window_send(lc_window_t *w, const char *subject, uint8_t *buf, size_t len,
                           uint64_t tag, uint64_t aux, int64_t stall_ms, char *err);
/* Handles replies (waiting up to wait_ms for the first) and passed deadlines. */
void lc_window_poll(lc_window_t *w, int64_t wait_ms);
/* Until nothing is outstanding, at most timeout_ms: LC_OK or LC_ETIMEOUT. */
lc_status_t lc_window_drain(lc_window_t *w, int64_t timeout_ms);
size_t lc_window_pending(lc_window_t *w);
/* Settles what arrived, gives up the rest (closed), frees. NULL-safe. */
void lc_window_close(lc_window_t *w);

/* ---- submit.c, submit_async.c, ack_async.c -------------------------------------------------- */

/* Encodes items as one Submit for <prefix>.submit.<model>; *out_subject and *out_buf returned
 * to the caller (free). Failure text on the client. */
lc_status_t lc_submit_encode(lc_client_t *client, const char *model, const codec_work_item_t *items,
                             size_t n, char **out_subject /* out */, uint8_t **out_buf /* out */,
                             size_t *out_len /* out */);
/* Gives up every outstanding asynchronous submit and frees the window (lc_client_close). */
void lc_submit_async_close(lc_client_t *client);
/* With wait, waits (bounded by the consumer's request timeout and retries) for the outstanding
 * asynchronous acks (lc_bye_send); then settles what arrived, gives up the rest and frees their
 * window (also lc_consumer_close, without wait). */
void lc_ack_async_close(lc_consumer_t *c, bool wait);
/* Handles the asynchronous acks' replies and deadlines without waiting (lc_batch_next). */
void lc_ack_async_poll(lc_consumer_t *c);

/* ---- inprogress.c: the in-progress set (callers hold mu unless stated) -------------------- */

/* Adds batch_id (n_items positions, 0 = unknown) unless present. LC_ENOMEM leaves it unchanged. */
lc_status_t lc_inprogress_put(lc_consumer_t *c, uint64_t batch_id, uint32_t n_items);

/* Empties the set. */
void lc_inprogress_clear(lc_consumer_t *c);

/* The update after an Ack went out (ack borrowed): the id leaves once `all` was sent, every
 * position is settled or the daemon said unknown_batch (`unknown`). Takes mu itself. */
void lc_inprogress_settle(lc_consumer_t *c, const codec_ack_t *ack, bool unknown);

/* ---- pull.c: the outstanding pulls (caller's thread only) --------------------------------- */

/* Drops the n oldest outstanding pulls (all of them when n >= n_pulls). */
void lc_pulls_forget(lc_consumer_t *c, size_t n);

/* ---- heartbeat.c: the heartbeat thread (caller's thread only) ----------------------------- */

/* Starts the thread unless it runs or config.no_heartbeat; failure text in err. */
lc_status_t lc_heartbeat_start(lc_consumer_t *c, char *err);

/* Stops and joins the thread; no-op when it does not run. */
void lc_heartbeat_stop(lc_consumer_t *c);

#endif /* LANESCHED_CLIENTS_C_CLIENT_INT_H */
