/*
 * lanes_client.h - the C client of lanesched: producers submit work items, consumers register,
 * pull batches, ack them and keep themselves alive, all over NATS (subjects.md is the contract).
 *
 * Every wire message is built and read by codec/codec.h; this layer adds the subjects, the
 * request/reply timing, retries, the pull credit bookkeeping and the heartbeat thread.
 *
 *   function prefix            what                                            file
 *   lc_client_*                one NATS connection and the subject prefix      connection.c
 *   lc_shape_*                 shape signatures from component strings         shape.c
 *   lc_submit_*                producer: Submit fire-and-forget or request     submit.c
 *   lc_submit_async*           producer: Submits in flight, a callback each    submit_async.c
 *   lc_consumer_*, lc_bye_send consumer: Register (again), statistics, leave   consumer.c
 *   lc_pull_send, lc_batch_next pulls and the batches they bring               pull.c
 *   lc_ack_*                   settling batches                                ack.c
 *   lc_ack_async_*             acks in flight, a callback each                 ack_async.c
 *   lc_inprogress_*            the batch ids heartbeats name                   inprogress.c
 *   (no API of its own)        the consumer's heartbeat thread                 heartbeat.c
 *   (no API of its own)        requests in flight under a window, resent       window.c
 *   lc_msg_*, lc_sub_*         plain NATS messages: publish, request, subscribe  msg.c
 *   lc_abi_size, lc_free       for bindings in other languages (ctypes, cffi)  abi.c
 * Private structs and helpers shared by those files: client_int.h.
 *
 * Ownership rules used below (each pointer states which applies):
 *   borrowed  the callee only reads or fills it during the call (arguments, out buffers), or the
 *             caller only reads it for as long as stated (results); nobody frees it through this
 *             API.
 *   returned  handed to the caller, who releases it with the function named next to it.
 *   taken     never used: this API takes ownership of nothing the caller allocated.
 * Handles: an lc_client_t * or lc_consumer_t * is borrowed by every call it is passed to, except
 * lc_client_close / lc_consumer_close, which release what lc_client_open / lc_consumer_open
 * returned (the handle is invalid afterwards).
 *
 * Results go through pointers marked out; on any status other than LC_OK they are left untouched.
 *
 * Threads: an lc_client_t may be shared by several threads for lc_submit_*, but its error text
 * (lc_client_error_get) then describes whichever call failed last. An lc_consumer_t is driven by
 * one thread at a time, except lc_inprogress_add / lc_inprogress_remove / lc_consumer_stats_get,
 * which any thread may call at any time; the consumer's own heartbeat thread runs beside it.
 * Each consumer borrows its client: close every consumer before the client.
 */
#ifndef LANESCHED_LANES_CLIENT_H
#define LANESCHED_LANES_CLIENT_H

#include "common/status.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"

/* ---- status ------------------------------------------------------------------------------- */

#define LC_STATUS_MAP(X)                                                                           \
    X(LC_OK, "ok")                                                                                 \
    X(LC_EINVAL, "invalid argument")                                                               \
    X(LC_ENOMEM, "out of memory")                                                                  \
    X(LC_ECONNECT, "cannot connect to the NATS server")                                            \
    X(LC_ENATS, "NATS operation failed")                                                           \
    X(LC_ETIMEOUT, "no reply within the timeout")                                                  \
    X(LC_ENORESPONDERS, "no lanesched daemon listens on the subject")                              \
    X(LC_ETOOBIG, "message is larger than the server's max_payload")                               \
    X(LC_ECODEC, "message could not be encoded or decoded")                                        \
    X(LC_EPROTO, "reply does not match the contract (wrong count, missing subject, bad status)")   \
    X(LC_EREFUSED, "the daemon refused the request; see the error text")                           \
    X(LC_EEMPTY, "the pull ended without work (Batch status EXPIRED)")                             \
    X(LC_EUNKNOWN_CONSUMER, "the daemon does not know this consumer; lc_consumer_register again")  \
    X(LC_EUNKNOWN_BATCH, "the batch is not this consumer's in-flight batch (settled or returned)") \
    X(LC_ETHREAD, "cannot start the heartbeat thread")

STATUS_ENUM(lc_status_t, LC_STATUS_MAP, LC_STATUS_COUNT);

/* Static storage, never NULL (unknown values give "unknown client status"). */
const char *lc_status_str(lc_status_t status);

/* ---- client ------------------------------------------------------------------------------- */

#define LC_DEFAULT_SERVER "nats://127.0.0.1:4222"
#define LC_DEFAULT_PREFIX "lanes"

/*
 * How to reach NATS. Every string is borrowed for the lc_client_open call only (the client copies
 * what it keeps); NULL or "" means unset. Authentication options combine as nats.c allows; user
 * and password may also be written into the URLs (nats://user:pass@host:4222).
 */
typedef struct {
    const char *servers;        /* comma-separated URLs; NULL = LC_DEFAULT_SERVER */
    const char *prefix;         /* subject prefix; NULL = LC_DEFAULT_PREFIX */
    const char *name;           /* connection name shown by the server; NULL = none */
    const char *user;           /* with password: user/password authentication */
    const char *password;       /* borrowed */
    const char *token;          /* token authentication */
    const char *creds_file;     /* NATS .creds file (user JWT + NKey seed) */
    const char *tls_ca_file;    /* PEM CA bundle to verify the server; implies TLS */
    const char *tls_cert_file;  /* PEM client certificate chain; needs tls_key_file; implies TLS */
    const char *tls_key_file;   /* PEM client private key; needs tls_cert_file */
    bool tls;                   /* require TLS even with nats:// URLs and no files */
    int64_t connect_timeout_ms; /* 0 = nats.c's default (2 s) */
    const char *inbox_prefix;   /* replies and batches arrive on "<inbox_prefix>.<unique>"; NULL =
                                   nats.c's "_INBOX" (an operator may give each user a private
                                   one, e.g. "_INBOX.alice", allowed by the server's permissions) */
    bool nats_flusher;          /* false (default): each message is written to the socket when it
                                   is sent, as nats.go and nats.js send; true: nats.c's flusher
                                   thread gathers them, holding each up to 1 ms (fewer writes for a
                                   producer of many small Submits; a worker that pulls one batch at
                                   a time idles that long per pull) */
} lc_client_config_t;

typedef struct lc_client lc_client_t;

/* Zeroes *config (borrowed): every field then means its default. */
void lc_client_config_init(lc_client_config_t *config /* out */);

/* Connects. config: borrowed (see lc_client_config_t). *out is returned to the caller, released
 * with lc_client_close. On failure no client exists to hold the reason, so it is written to errbuf
 * (borrowed, errlen bytes, NUL-terminated) when errbuf is not NULL; errbuf is not touched on
 * LC_OK. */
lc_status_t lc_client_open(const lc_client_config_t *config, char *errbuf /* out, may be NULL */,
                           size_t errlen, lc_client_t **out /* out */);

/* Flushes what was published (at most 1 s), closes and frees: client is released (returned by
 * lc_client_open; every consumer on it must be closed first). Asynchronous submits still
 * outstanding get their callback first, with LC_ETIMEOUT (their items may be stored: call
 * lc_submit_async_complete before to know). NULL-safe. */
void lc_client_close(lc_client_t *client);

/* Waits until the server has processed everything published so far. */
lc_status_t lc_client_flush(lc_client_t *client, int64_t timeout_ms);

/* Text of the last failure on this client (including lc_consumer_open's), "" if none. Borrowed:
 * valid until the next call on the client. Never NULL. */
const char *lc_client_error_get(const lc_client_t *client);

/* The prefix in use. Borrowed: valid until lc_client_close. */
const char *lc_client_prefix_get(const lc_client_t *client);

/* The server's max_payload (the largest message it carries), learnt at connect. */
int64_t lc_client_max_payload_get(const lc_client_t *client);

/* ---- shapes ------------------------------------------------------------------------------- */

/* out_hashes[i] = codec_hash_component(components[i]) (the strlen bytes, no terminator).
 * components: borrowed, n non-NULL strings; out_hashes: borrowed, n entries, filled. */
void lc_shape_hash(const char *const *components, size_t n, uint64_t *out_hashes /* out */);

/* The shape signature of the components, in order (0xef46db3751d8e999 for n == 0).
 * components: borrowed, n non-NULL strings (may be NULL when n == 0). LC_ENOMEM only above 16
 * components (a heap copy of the hashes). */
lc_status_t lc_shape_sign(const char *const *components, size_t n, uint64_t *out /* out */);

/* Parses "0x" followed by 1..16 hex digits, or 1..16 bare hex digits. LC_EINVAL for anything else
 * and for 0 (which cannot be sent). text: borrowed. */
lc_status_t lc_shape_parse(const char *text, uint64_t *out /* out */);

/* ---- submit (producer) -------------------------------------------------------------------- */

/* Room for the longest reason code word, with its terminator; longer words are truncated. */
#define LC_REASON_MAX 32

/* The verdict on one submitted item, copied out of the reply. */
typedef struct {
    codec_item_status_t status;
    char reason[LC_REASON_MAX]; /* ItemResult.reason: "ok", "duplicate", "zero_tokens", ... */
} lc_item_result_t;

typedef struct {
    uint32_t accepted;
    uint32_t duplicates; /* after a retry, also items the lost first attempt had stored */
    uint32_t rejected;
    uint32_t attempts; /* requests sent: 1 + retries used */
} lc_submit_summary_t;

/*
 * Both submit calls publish one Submit message on <prefix>.submit.<model>. items: borrowed, n >= 1
 * codec_work_item_t (see codec.h: all their pointers are borrowed too). An item whose model is
 * NULL or "" is sent with `model`; an item whose created_unix_ns is 0 is sent with the current
 * time. Nothing else is checked: a test producer may send items the daemon will reject. model:
 * borrowed, non-empty, no spaces and no '*' or '>' (it becomes a subject token).
 */

/* Fire-and-forget: no reply subject, no answer. LC_OK means handed to the connection, not
 * stored; lc_client_flush waits for the server to have it. */
lc_status_t lc_submit_send(lc_client_t *client, const char *model, const codec_work_item_t *items,
                           size_t n);

/*
 * Request/reply: waits up to timeout_ms (> 0) for the SubmitReply, which the daemon sends once the
 * accepted items are durable. On a timeout or when no daemon responds, sends the very same bytes
 * again (same item ids: the daemon's dedupe stores an item once, a repeat reads DUPLICATE) up to
 * `retries` more times, pausing min(timeout_ms, 100 ms << attempt, 2 s) after a no-responders
 * answer. Per-item rejections are results, not failures: LC_OK with status REJECTED. Whole-message
 * refusal (SubmitReply.error, e.g. "malformed: ...") is LC_EREFUSED with the text on the client.
 * results: borrowed, n entries, filled in item order (may be NULL); summary: borrowed (may be
 * NULL).
 */
lc_status_t lc_submit_request(lc_client_t *client, const char *model,
                              const codec_work_item_t *items, size_t n, int64_t timeout_ms,
                              uint32_t retries, lc_item_result_t *results /* out, may be NULL */,
                              lc_submit_summary_t *summary /* out, may be NULL */);

/* ---- asynchronous submit (producer) --------------------------------------------------------
 *
 * Several Submits in flight at once, each answered through a callback: what js_PublishAsync and
 * js_PublishAsyncComplete do for JetStream. lc_submit_async publishes and returns as soon as the
 * window has room; the SubmitReply (sent once the accepted items are durable) reaches `done`.
 * Replies and timeouts are handled inside lc_submit_async, lc_submit_async_poll and
 * lc_submit_async_complete, on the calling thread, like librdkafka's delivery reports: no thread
 * of the library runs the callback.
 */

/* The outcome of one lc_submit_async, as `done` sees it. Every pointer is borrowed for the
 * callback only. */
typedef struct {
    uint64_t tag;                    /* the caller's, as given to lc_submit_async */
    lc_status_t status;              /* LC_OK: results holds one verdict per item */
    const lc_item_result_t *results; /* n entries on LC_OK, NULL otherwise */
    size_t n;                        /* items of the Submit */
    lc_submit_summary_t summary;     /* counts on LC_OK; attempts always */
    const char *error;               /* why, when status is not LC_OK; "" otherwise */
    uint64_t latency_ns;             /* first send -> reply (or -> giving up) */
} lc_submit_done_t;

/* Called once per lc_submit_async that returned LC_OK, on the thread inside lc_submit_async*,
 * never two at once. It must not call lc_submit_async* or lc_client_close on the same client.
 * closure: lc_submit_async_config_t.closure (borrowed). */
typedef void (*lc_submit_done_fn)(void *closure, const lc_submit_done_t *done);

typedef struct {
    uint32_t window;        /* Submits outstanding at most; 0 = 64 */
    int64_t timeout_ms;     /* per attempt; 0 = 5000 */
    uint32_t retries;       /* resends of the same bytes after a timeout (dedupe-safe) */
    int64_t stall_ms;       /* how long lc_submit_async waits for room; 0 = one full timeout
                               (timeout_ms x (1 + retries)) */
    lc_submit_done_fn done; /* required */
    void *closure;          /* borrowed; passed to done */
} lc_submit_async_config_t;

/* Zeroes *config (borrowed): every field then means its default (done must still be set). */
void lc_submit_async_config_init(lc_submit_async_config_t *config /* out */);

/* Sets up asynchronous submits on client: a reply inbox with its subscription and the window.
 * config: borrowed for the call (copied). Once per client; lc_client_close undoes it. */
lc_status_t lc_submit_async_open(lc_client_t *client, const lc_submit_async_config_t *config);

/*
 * Encodes items as one Submit (as lc_submit_request does), waits at most config.stall_ms for room
 * in the window while handling replies, then publishes it with its own reply subject and returns.
 * LC_OK: `done` will be called exactly once for it, with tag. Anything else: nothing was sent and
 * `done` is not called for it (LC_ETIMEOUT: the window stayed full; LC_EINVAL, LC_ENOMEM,
 * LC_ECODEC, LC_ETOOBIG, LC_ENATS as lc_submit_send). An unanswered Submit is sent again with the
 * same bytes after timeout_ms, up to `retries` times (the same item ids, so the daemon's dedupe
 * answers DUPLICATE for what a lost attempt stored), then given up with LC_ETIMEOUT, or
 * LC_ENORESPONDERS if the server said nobody listens. Any thread; calls on one client serialise.
 */
lc_status_t lc_submit_async(lc_client_t *client, const char *model, const codec_work_item_t *items,
                            size_t n, uint64_t tag);

/* Handles the replies that arrived and the timeouts that passed, without waiting. */
lc_status_t lc_submit_async_poll(lc_client_t *client);

/* Waits until no Submit is outstanding, at most timeout_ms (> 0): LC_OK, or LC_ETIMEOUT with some
 * still outstanding (their callbacks come later, or at lc_client_close). */
lc_status_t lc_submit_async_complete(lc_client_t *client, int64_t timeout_ms);

/* Submits outstanding now (sent, not yet answered or given up). */
size_t lc_submit_async_pending(lc_client_t *client);

/* ---- consumer ----------------------------------------------------------------------------- */

typedef struct {
    uint32_t acked;
    uint32_t returned;
    uint32_t unknown;
} lc_ack_reply_t;

/* The outcome of one lc_ack_async_send, on the consumer's driving thread (inside lc_batch_next,
 * lc_ack_async_send, lc_ack_async_complete, lc_bye_send or lc_consumer_close). status as
 * lc_ack_send's, or LC_ETIMEOUT / LC_ENORESPONDERS once the retries are spent; reply (borrowed
 * for the call) only on LC_OK. It must not call lc_ack_async_* itself. */
typedef void (*lc_ack_done_fn)(void *closure, uint64_t batch_id, lc_status_t status,
                               const lc_ack_reply_t *reply);

/* Strings borrowed for lc_consumer_open only (the consumer copies them). */
typedef struct {
    const char *model; /* required */
    uint32_t max_batch_size;
    uint32_t max_batch_tokens;
    uint32_t max_input_tokens;    /* 0 = unlimited */
    const char *name;             /* for people (stats); NULL = "" */
    int64_t request_timeout_ms;   /* Register, Ack and Bye replies; 0 = 5000 */
    uint32_t request_retries;     /* more attempts on timeout / no responders (Ack is idempotent;
                                     a repeated Register may leave an unused consumer id that the
                                     daemon declares dead after dead_after_ms) */
    uint32_t pull_max_batches;    /* credits of the Pull that lc_batch_next sends; 0 = 1 */
    uint32_t heartbeat_ms;        /* 0 = Registered.heartbeat_ms (2000 if the daemon says 0) */
    bool no_heartbeat;            /* test hook: no heartbeat thread */
    uint32_t prefetch;            /* batches lc_batch_next keeps requested ahead: it tops the
                                     outstanding credits up to this whenever half are used, so
                                     the daemon packs the next batches while this one is served;
                                     0 = pull only when nothing is outstanding (pull_max_batches) */
    uint32_t prefetch_expires_ms; /* expiry of those pulls; 0 = 5000 */
    uint32_t ack_window;          /* asynchronous acks outstanding at most; 0 = 64 */
    lc_ack_done_fn ack_done;      /* each asynchronous ack's outcome; NULL = counted only */
    void *ack_closure;            /* borrowed; passed to ack_done */
    /* Optional, sent in Register (subjects.md): what a batch costs this worker, microseconds per
     * batch and nanoseconds per padded token (both 0: the daemon estimates them from the
     * worker's batch times), and the prompt shapes its prefix cache holds (0: 1). */
    uint32_t batch_fixed_us;
    uint32_t token_ns;
    uint32_t cache_shapes;
} lc_consumer_config_t;

/* What the daemon answered to Register. Every string is borrowed from the consumer: valid until
 * the next lc_consumer_register or lc_consumer_close. */
typedef struct {
    const char *consumer_id;
    const char *pull_subject;
    const char *ack_subject;
    const char *heartbeat_subject;
    const char *bye_subject;
    uint32_t heartbeat_ms;
    uint32_t dead_after_ms;
    uint32_t ack_wait_ms;
} lc_registered_t;

/* Counters, copied out. */
typedef struct {
    uint64_t registrations;     /* successful Register replies (1 + re-registrations) */
    uint64_t pulls_sent;        /* Pull messages published */
    uint64_t batches;           /* status OK batches delivered */
    uint64_t expired;           /* pulls that ended with an EXPIRED batch */
    uint64_t pulls_lost;        /* pulls forgotten: no batch nor EXPIRED well past their expiry */
    uint64_t heartbeats_sent;   /* by the heartbeat thread */
    uint64_t heartbeats_failed; /* encode or publish failures (the thread keeps going) */
    uint64_t in_progress;       /* batch ids currently named by heartbeats */
    uint64_t acks_async;        /* asynchronous acks sent (lc_ack_async_send) */
    uint64_t acks_async_failed; /* of those, answered with an error or given up */
} lc_consumer_stats_t;

typedef struct lc_consumer lc_consumer_t;

/* Zeroes *config (borrowed); set model and the two batch limits at least. */
void lc_consumer_config_init(lc_consumer_config_t *config /* out */);

/*
 * Subscribes the consumer's inbox, sends Register on <prefix>.register.<model> (retrying as
 * configured) and starts the heartbeat thread. client: borrowed, must outlive the consumer.
 * config: borrowed for the call (copied, strings included). *out is returned to the caller,
 * released with lc_consumer_close. On failure the reason is on the client (lc_client_error_get);
 * Registered.error gives LC_EREFUSED.
 */
lc_status_t lc_consumer_open(lc_client_t *client, const lc_consumer_config_t *config,
                             lc_consumer_t **out /* out */);

/*
 * Registers again with the same configuration (after LC_EUNKNOWN_CONSUMER): new id and subjects,
 * outstanding pulls and in-progress ids forgotten (their batches are no longer ours), the
 * heartbeat thread (re)started. On failure the previous registration stays in place.
 */
lc_status_t lc_consumer_register(lc_consumer_t *consumer);

/* The current registration. Borrowed from the consumer (see lc_registered_t). Never NULL. */
const lc_registered_t *lc_consumer_registered_get(const lc_consumer_t *consumer);

/* Text of the consumer's last failure, "" if none. Borrowed: valid until the next call on the
 * consumer from its driving thread. Never NULL. */
const char *lc_consumer_error_get(const lc_consumer_t *consumer);

/* Thread-safe snapshot into *out (borrowed); in_progress counts the ids heartbeats name now. */
void lc_consumer_stats_get(lc_consumer_t *consumer, lc_consumer_stats_t *out /* out */);

/*
 * Leaves: stops the heartbeat thread, then publishes an empty body on the bye subject. With
 * timeout_ms > 0 waits for the daemon's empty AckReply (LC_EREFUSED if it carries an error); with
 * 0 publishes and flushes (at most 1 s). Afterwards only lc_consumer_register or
 * lc_consumer_close make sense.
 */
lc_status_t lc_bye_send(lc_consumer_t *consumer, int64_t timeout_ms);

/*
 * Stops the heartbeat thread, unsubscribes the inbox and frees: consumer is released (returned by
 * lc_consumer_open; the registration strings and error text die with it). Sends no Bye: call
 * lc_bye_send first to leave cleanly; without it the daemon declares the consumer dead after
 * dead_after_ms and returns its in-flight batches then (what a crash looks like). NULL-safe.
 */
void lc_consumer_close(lc_consumer_t *consumer);

/* ---- pull and batches --------------------------------------------------------------------- */

/*
 * Publishes Pull{max_batches, expires_ms} on the pull subject with the consumer's inbox as the
 * reply subject, and records its credits: the daemon answers with up to max_batches OK batches
 * and, if the wait ends first, one EXPIRED batch. Zeroes mean the daemon's defaults (1 batch,
 * 30000 ms). Only needed to keep several batches in flight; lc_batch_next pulls by itself.
 */
lc_status_t lc_pull_send(lc_consumer_t *consumer, uint32_t max_batches, uint32_t expires_ms);

/*
 * The next Batch on the consumer's inbox. When no pull is outstanding it first sends
 * Pull{config.pull_max_batches, expires_ms = timeout_ms} and then waits up to timeout_ms plus a
 * 1 s grace so the daemon's EXPIRED answer lands inside this call; otherwise it waits timeout_ms.
 *   LC_OK              *out is a status OK batch, returned to the caller: release it with
 *                      codec_batch_destroy (its pointers are borrowed from it, see codec.h). Its
 *                      id is now in progress (named by heartbeats) until acked in full, nak'd in
 *                      full, reported unknown by the daemon, or lc_inprogress_remove'd.
 *   LC_EEMPTY          a pull expired without (more) work.
 *   LC_ETIMEOUT        nothing arrived; a pull silent well past its expiry is forgotten.
 *   LC_ENORESPONDERS   nobody listens on the pull subject (the daemon is gone); pull forgotten.
 *   LC_EUNKNOWN_CONSUMER  register again (lc_consumer_register); all pulls forgotten.
 *   LC_EREFUSED        a Batch with status ERROR and another error text (consumer error text).
 *   LC_EPROTO          a batch status this client does not know.
 *   LC_ECODEC          an undecodable message on the inbox (dropped).
 * Batches are delivered as received; the client does not check the packing promises (pad_to,
 * budget, size): a consumer that cares verifies them itself, as lanesched-consume does.
 */
lc_status_t lc_batch_next(lc_consumer_t *consumer, int64_t timeout_ms,
                          codec_batch_t **out /* out */);

/* ---- acks, in-progress, heartbeats -------------------------------------------------------- */

/*
 * Publishes an Ack on the ack subject. ack: borrowed (see codec_ack_t). With timeout_ms > 0 it is
 * a request: waits for the AckReply (sent once tombstones are durable), retrying on timeout /
 * no responders as configured (acks are idempotent), and fills *out; AckReply.error
 * "unknown_batch" gives LC_EUNKNOWN_BATCH, "unknown_consumer" LC_EUNKNOWN_CONSUMER, anything else
 * LC_EREFUSED. With timeout_ms == 0 it is fire-and-forget and *out is not touched. After LC_OK or
 * LC_EUNKNOWN_BATCH the in-progress set is updated: the id leaves it once `all` was sent, every
 * position was acked or nak'd, or the daemon does not know the batch.
 */
lc_status_t lc_ack_send(lc_consumer_t *consumer, const codec_ack_t *ack, int64_t timeout_ms,
                        lc_ack_reply_t *out /* out, may be NULL */);

/* Ack{batch_id, all}. */
lc_status_t lc_ack_all_send(lc_consumer_t *consumer, uint64_t batch_id, int64_t timeout_ms,
                            lc_ack_reply_t *out /* out, may be NULL */);

/* Ack{batch_id, nak = 0 .. n_items - 1}: the whole batch goes back to the queue. */
lc_status_t lc_ack_nak_send(lc_consumer_t *consumer, uint64_t batch_id, uint32_t n_items,
                            int64_t timeout_ms, lc_ack_reply_t *out /* out, may be NULL */);

/* Ack{batch_id, in_progress}: extends the deadline by ack_wait_ms now, acks nothing. */
lc_status_t lc_ack_progress_send(lc_consumer_t *consumer, uint64_t batch_id, int64_t timeout_ms,
                                 lc_ack_reply_t *out /* out, may be NULL */);

/*
 * Asynchronous acks: lc_ack_async_send publishes the Ack with a reply subject of its own and
 * returns once config.ack_window has room (waiting for replies meanwhile, at most the request
 * timeout x (1 + retries): LC_ETIMEOUT, nothing sent). The AckReply (sent once the tombstones are
 * durable) is read later, on this thread, inside lc_batch_next (which, while acks are in flight,
 * reads their replies every 2 ms as it waits for a batch), lc_ack_async_send,
 * lc_ack_async_complete, lc_bye_send or lc_consumer_close, and given to config.ack_done. An Ack
 * unanswered after request_timeout_ms is resent with the same bytes (acks are idempotent) up to
 * request_retries times; given up, its batch leaves the in-progress set so that the daemon's ack
 * deadline returns it (at least once, never lost). The in-progress set is updated at the reply,
 * as lc_ack_send does. ack: borrowed for the call.
 */
lc_status_t lc_ack_async_send(lc_consumer_t *consumer, const codec_ack_t *ack);

/* Ack{batch_id, all}, asynchronously. */
lc_status_t lc_ack_async_all_send(lc_consumer_t *consumer, uint64_t batch_id);

/* Waits until no asynchronous ack is outstanding, at most timeout_ms: LC_OK or LC_ETIMEOUT. */
lc_status_t lc_ack_async_complete(lc_consumer_t *consumer, int64_t timeout_ms);

/*
 * The in-progress set: the batch ids every Heartbeat names (extending their deadlines).
 * lc_batch_next adds each delivered batch; these two let a caller manage it by hand (for example
 * remove a batch it abandons so that its deadline runs out and the daemon redelivers it). Both
 * thread-safe. Adding an id already present changes nothing; removing an absent id is a no-op.
 */
lc_status_t lc_inprogress_add(lc_consumer_t *consumer, uint64_t batch_id);
void lc_inprogress_remove(lc_consumer_t *consumer, uint64_t batch_id);

/* ---- plain NATS messages (msg.c) ----------------------------------------------------------
 *
 * What a program around lanesched needs besides the contract's messages, on the same
 * connection: publishing a worker's result on an item's reply_to, a producer listening for those
 * results, requests such as P.stats. Bindings in languages without a NATS client of their own
 * (Python) use these. Every subject and data argument is borrowed for the call.
 */

/* Publishes data (len bytes; NULL when 0) on subject, no reply subject. LC_EINVAL, nothing
 * sent, for a subject that is empty or holds a space or a control character (NATS would read
 * the rest as protocol commands of this connection). */
lc_status_t lc_msg_publish(lc_client_t *client, const char *subject, const void *data, size_t len);

/* A request: waits up to timeout_ms (> 0) for one reply. *out_data (returned: lc_free; non-NULL
 * even when *out_len is 0) holds the reply's body. LC_ENORESPONDERS when nobody listens. */
lc_status_t lc_msg_request(lc_client_t *client, const char *subject, const void *data, size_t len,
                           int64_t timeout_ms, uint8_t **out_data /* out */,
                           size_t *out_len /* out */);

/* A fresh inbox subject "<inbox prefix>.<unique>" (the client's inbox_prefix, else "_INBOX"),
 * returned to the caller (lc_free). */
lc_status_t lc_msg_inbox_make(lc_client_t *client, char **out /* out */);

typedef struct lc_sub lc_sub_t;

/* A synchronous subscription on subject (wildcards allowed), its messages kept without limit
 * until read. *out returned to the caller (lc_sub_close); it borrows the client. */
lc_status_t lc_sub_open(lc_client_t *client, const char *subject, lc_sub_t **out /* out */);

/* The next message, waiting up to timeout_ms: LC_OK with *out_subject and *out_data returned to
 * the caller (lc_free each; *out_data non-NULL even when *out_len is 0), or LC_ETIMEOUT. A
 * no-responders status addressed to this subscription gives LC_ENORESPONDERS. */
lc_status_t lc_sub_next(lc_sub_t *sub, int64_t timeout_ms, char **out_subject /* out */,
                        uint8_t **out_data /* out */, size_t *out_len /* out */);

/* Unsubscribes and frees (the safe order of client_int.h's lc_sub_destroy). NULL-safe. */
void lc_sub_close(lc_sub_t *sub);

/* ---- for bindings (abi.c) ----------------------------------------------------------------- */

/* sizeof the named public struct ("lc_client_config_t", "lc_consumer_config_t",
 * "lc_registered_t", "lc_consumer_stats_t", "lc_item_result_t", "lc_submit_summary_t",
 * "lc_ack_reply_t", "codec_work_item_t", "codec_batch_t", "codec_batch_item_t", "codec_ack_t",
 * "codec_bytes_t"); 0 for any other name. A binding that mirrors the layouts compares them at
 * load time and refuses to run on a mismatch. name: borrowed. */
size_t lc_abi_size(const char *name);

/* Releases what this library returned for lc_free (a binding cannot reach the C library's free
 * reliably). NULL-safe. */
void lc_free(void *p);

#endif /* LANESCHED_LANES_CLIENT_H */
