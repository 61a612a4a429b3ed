/*
 * daemon_int.h - private to scheduler/daemon/: the owner's state and the nouns of its loop.
 *
 *   daemon.c     create/destroy, the clock, publishing, the public setters
 *   evqueue.c    messages handed from transport threads to the owner
 *   turn.c       one turn of the owner loop, its timers, daemon_run
 *   intake.c     submits: validate, dedupe, store, answer
 *   frame.c      how a stored payload carries the producer's reply_to
 *   requests.c   consumer requests: register, pull, ack, heartbeat, bye, stats, disconnect
 *   dispatch.c   filling pulls, dead letters
 *   inflight.c   the one settle path of a batch in flight: ack, nak, deadline, death, bye
 *   models.c     the one record of each model: core handle, queue totals, series, serving
 *   replies.c    replies held until the turn's flush
 *   consumers.c  the consumer registry and liveness (consumers.h)
 *   dedupe.c     the id window (dedupe.h)
 *   limits.c     the limits in force and the caps the codec checks
 *   stats.c      the lanes.stats document
 *   service.c    $SRV.PING/INFO/STATS (the NATS micro-service protocol) and endpoint counts
 *   metrics.c    the Prometheus figures and their text
 *   dirlock.c    the exclusive lock on the data directory
 *
 * Everything here runs on the owner thread, except evqueue_post, evqueue_post_msg,
 * evqueue_release, evqueue_stop and stats_waiting_add (any thread) and the dropped-message
 * counter (atomic).
 */
#ifndef LANESCHED_DAEMON_INT_H
#define LANESCHED_DAEMON_INT_H

#include "codec/codec.h"
#include "scheduler/core/sched.h"
#include "scheduler/daemon/consumers.h"
#include "scheduler/daemon/daemon.h"

#include "common/log.h"
#include "scheduler/daemon/dedupe.h"
#include "common/map.h"

#include <pthread.h>

/* ---- events (evqueue.c) -------------------------------------------------------------------- */

/* One message handed to the owner. Its pointers are views into handle's storage, valid until the
 * owner releases it after the burst (evqueue.c invariant 2). */
typedef struct {
    ev_kind_t kind;
    const char *token; /* the subject's last token(s): model or consumer id; "" when none */
    const char *reply; /* NULL when the message had no reply subject */
    const uint8_t *data;
    size_t len;
    void *handle; /* the transport's message (released through the release function) or, when
                     copied, the one allocation holding token, reply and data (freed) */
    bool copied;
    size_t cost; /* bytes it holds against the backlog's bound (evqueue.c invariant 5) */
} ev_t;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    ev_t *in; /* under lock: posted, not yet taken */
    size_t n_in, cap_in;
    ev_t *own; /* under lock: posted events that overtake the rest (invariant 6) */
    size_t n_own, cap_own;
    ev_t *out; /* owner only: the burst being handled */
    size_t n_out, cap_out;
    bool sleeping;  /* under lock: the owner waits on cond */
    int stop;       /* atomic: a stop was posted */
    size_t held[2]; /* under lock: bytes posted and not taken, Submits [0] and the rest [1] */
    size_t bound;   /* the most each of held[] may reach (0: none); set before the first post */
    daemon_release_fn release;
    void *release_ctx;
} evqueue_t;

void evqueue_init(evqueue_t *q);
/* Releases the events still queued or in hand (invariant 2). */
void evqueue_fini(evqueue_t *q);
void evqueue_release_set(evqueue_t *q, daemon_release_fn release, void *ctx);
/* Copies the message into one allocation at the back of the queue. Thread-safe. 0, or -1 when
 * out of memory or past the bound (invariant 5; nothing queued). */
int evqueue_post(evqueue_t *q, ev_kind_t kind, const char *token, const char *reply,
                 const void *data, size_t len);
/* Queues views into msg (taken). Thread-safe. 0, or -1 when out of memory or past the bound:
 * msg was released. */
int evqueue_post_msg(evqueue_t *q, ev_kind_t kind, const char *token, const char *reply,
                     const void *data, size_t len, void *msg);
/* Releases a transport message that is not queued (a stats request set aside, stats.c) through
 * the release function. Thread-safe. */
void evqueue_release(const evqueue_t *q, void *msg);
/* Bounds the clients' messages waiting for the owner: bytes each class may hold, and per take
 * (invariant 5). Before the first post. */
void evqueue_bound_set(evqueue_t *q, size_t bytes);
/* Bytes of the clients' messages posted and not yet taken, Submits and the rest (what the
 * bound counts, invariant 5). Thread-safe. */
void evqueue_backlog_get(evqueue_t *q, size_t *out_submits /* out */, size_t *out_other /* out */);
/* A stop (invariant 4). Thread-safe. */
void evqueue_stop(evqueue_t *q);
int evqueue_stopping(const evqueue_t *q);
/* Releases the previous burst, then takes the queued events, oldest first, as an array of
 * *out_n events owned by the queue (valid until the next take or evqueue_done): every one, or
 * under a bound as many as its bytes allow, at least one (invariant 5); waits up to wait_ns for
 * the first when none is queued and no stop was posted. */
ev_t *evqueue_take(evqueue_t *q, uint64_t wait_ns, size_t *out_n /* out */);
/* Gives the events of the burst in hand from index handled on back to the front of the queue,
 * in order (a turn out of time, turn.c). 0, or -1 when memory is short (nothing changed). */
int evqueue_untake(evqueue_t *q, size_t handled);
/* Releases the burst in hand (all its messages together). */
void evqueue_done(evqueue_t *q);
/* True when no event is queued. Thread-safe (an event may be posted right after). */
bool evqueue_empty(evqueue_t *q);

/* ---- replies held until the turn's flush (replies.c) ---------------------------------------- */

typedef struct reply reply_t;
typedef struct {
    reply_t *head, *tail;
} replies_t;

/* Queues buf (taken) for subject (copied). Out of memory: logged, buf freed, reply lost. */
void replies_add(replies_t *r, const char *subject, uint8_t *buf, size_t len);
/* Publishes every queued reply in order, then frees them. */
void replies_send(struct daemon *d, replies_t *r);
/* Frees every queued reply unsent (a failed flush acknowledges nothing). */
void replies_free(replies_t *r);

/* ---- payload framing (frame.c) -------------------------------------------------------------- */

/* The stored form of an item's reply_to, payload and producer creation time (0 = none), written
 * into *scratch (grown to fit, *cap its size; the caller owns and frees it) and returned; NULL
 * when out of memory. reply_to and payload are borrowed. */
uint8_t *frame_encode(const char *reply_to, codec_bytes_t payload, uint64_t created_unix_ns,
                      uint8_t **scratch /* in, out */, size_t *cap /* in, out */,
                      size_t *out_len /* out */);
/* Splits a stored payload (a view) into views of its reply_to and payload, and its creation time
 * (0 when it had none). A payload that is not framed (never written by frame_encode) is all
 * payload, with an empty reply_to. */
void frame_decode(const uint8_t *stored_view, size_t len, codec_bytes_t *out_reply_to /* out */,
                  codec_bytes_t *out_payload /* out */, uint64_t *out_created_unix_ns /* out */);

/* ---- limits (limits.c) ---------------------------------------------------------------------- */

/* Fills every 0 field of l with its DAEMON_LIMIT_ default. */
void limits_resolve(daemon_limits_t *l);
/* The message caps of resolved limits, for the codec's checks. */
codec_caps_t limits_caps(const daemon_limits_t *l);

/* ---- Prometheus series of one model (metrics.c) ---------------------------------------------- */

#define METRICS_BUCKETS_MAX 17

typedef struct {
    const double *le;
    size_t n_le;
    uint64_t counts[METRICS_BUCKETS_MAX + 1]; /* per bucket, not cumulative; [n_le] is +Inf */
    uint64_t count;
    double sum;
} metrics_hist_t;

/* The counters of one model's series (or of the shared "(other)" series). */
typedef struct {
    const char *label; /* view: its model's name, or "(other)" */
    uint64_t items_received, tokens_received, items_routed, tokens_routed;
    uint64_t items_completed, tokens_completed, dead_lettered, expired;
    uint64_t batches, shape_hits, padded_tokens, real_tokens;
    uint64_t gpu_busy_ns; /* the workers' busy time on its batches (sched_settled_t.service_ns) */
    metrics_hist_t wait, created_wait, batch_items, submit_to_ack, service;
    /* Gauges, recomputed by each metrics_text. */
    uint64_t queued_items, queued_tokens, inflight_items, lanes, consumers;
    uint64_t oldest_age_ns; /* of its oldest queued item */
} metrics_series_t;

/* What metrics_batch is told a batch is. */
typedef enum { METRICS_DELIVERY, METRICS_DEAD_LETTER, METRICS_EXPIRED } metrics_batch_kind_t;

/* ---- the models (models.c) ------------------------------------------------------------------ */

/* The daemon's one record of a model: its handle in the core, what it holds against the queue
 * limits, its Prometheus series, whether this instance serves it. Owned by d->models. */
typedef struct model {
    char *name;                  /* owned */
    struct model *next_same_key; /* the next name under the same map key */
    sched_model_t *core;         /* referenced (sched_model_open) while the record lives */
    /* The queue limits (JetStream's max_msgs, max_bytes): items accepted (or recovered) and not
     * completed, and their bytes as stored (id, framed payload). */
    uint64_t items, bytes;
    uint32_t consumers; /* alive and registered for it */
    /* The longest item one of them runs (Register.max_input_tokens; UINT32_MAX when one of
     * them takes any length, 0 when it has none): an item longer is input_too_long. */
    uint32_t input_max;
    uint64_t age_ns;  /* its queue age limit (limits.queue_age_ms or its queue_age_models entry) */
    uint64_t expired; /* items dead-lettered past the age limit */
    /* Serving (--models, leases): in the list, and until when its lease is held. */
    int configured;
    uint64_t until_ns; /* monotonic; 0 = not held */
    int elsewhere;     /* another instance holds its lease (the keeper's refusal), not a lapse */
    int announced;     /* serving, as last logged */
    /* Its series: &own, or the shared "(other)" one past METRICS_MODELS_MAX (NULL until the
     * first figure). A record with a series of its own is kept (its counters are cumulative). */
    metrics_series_t *series;
    metrics_series_t own;
} model_t;

typedef struct {
    map_t by_name; /* the name's XXH64 pair -> the first model_t under it */
    /* Models holding items with no live consumer (models.c invariant 5): what --limit-models
     * bounds. */
    size_t strangers;
    model_t **all; /* owned, in order of first sight */
    size_t n, cap;
    model_t **configured; /* the --models list, in its order (views into all) */
    size_t n_configured;
} models_t;

/* Builds the table with the --models list's records (configured). */
daemon_status_t models_init(struct daemon *d);
void models_fini(struct daemon *d);
/* The record of the model named `name` (borrowed), or NULL when it has none. O(1). */
model_t *models_find(const struct daemon *d, const char *name);
/* The record, created on first sight (with its core handle). NULL when out of memory. */
model_t *models_get(struct daemon *d, const char *name);
/* Frees the records that hold nothing, serve nothing and have no series of their own (every
 * tick), so models that come and go cost nothing once gone. */
void models_tick(struct daemon *d);

/* The queue limits: CODEC_EQUEUE_FULL when one more item of `bytes` would pass a limit of m
 * (NULL: a model with nothing stored). */
codec_status_t models_room(const struct daemon *d, const model_t *m, uint64_t bytes);
/* An item of `bytes` stored for m (accepted, or recovered at start). */
void models_stored(struct daemon *d, model_t *m, uint64_t bytes);
/* Items of m completed (acked or dead-lettered): they leave its totals. */
void models_completed(struct daemon *d, model_t *m, uint64_t items, uint64_t bytes);
/* A consumer of m registered (+1) or ended (-1): the live count and the longest input. */
void models_consumer_note(struct daemon *d, model_t *m, int delta);
/* Whether a model named `name` may be used (--allow-models). */
int models_allowed(const struct daemon *d, const char *name);
/* A new model past --limit-models: CODEC_ETOO_MANY_MODELS when m (NULL: none yet) holds no
 * items and has no live consumer and models holding items without one fill the limit. */
codec_status_t models_admit(const struct daemon *d, const model_t *m);

/* Whether this instance serves model m now (NULL: a model with no record): every model without
 * --models; with leases, strictly before the deadline of its lease, read from the owner's clock. */
int models_serving(const struct daemon *d, const model_t *m);
/* 1 while another instance holds m's lease (m may be NULL: 0): not served here, and not for a
 * moment only (a renewal that failed while nobody else holds the key is a lapse, not this). */
int models_held_elsewhere(const struct daemon *d, const model_t *m);
/* An EV_LEASE: the model's new deadline. */
void models_lease_note(struct daemon *d, const ev_t *ev);
/* Logs every model whose lease state changed since the last look (called by the timers). */
void models_serving_tick(struct daemon *d);

/* ---- stats asked for while the owner is busy (stats.c) ------------------------------------- */

/* Summaries asked for while the owner is in a turn, answered between its events (stats never
 * waits behind a backlog). */
typedef struct {
    pthread_mutex_t lock;
    char **replies; /* owned, under lock: reply subjects waiting */
    size_t n, cap;  /* under lock */
    int busy;       /* under lock: the owner is in a turn */
} stats_waiting_t;

void stats_waiting_init(stats_waiting_t *w);
void stats_waiting_fini(stats_waiting_t *w);
/* Owner: a turn begins. */
void stats_waiting_begin(struct daemon *d);
/* Any thread: sets a summary request aside when the owner is in a turn; 1 if it did (it is then
 * not queued). body (borrowed): a page request (a JSON object) is never set aside. */
int stats_waiting_add(struct daemon *d, const char *reply, const void *body, size_t len);
/* Owner, between events: answers every request set aside with one summary built now; with
 * end_of_turn, requests arriving after it are queued again. */
void stats_waiting_answer(struct daemon *d, int end_of_turn);

/* ---- the owner ------------------------------------------------------------------------------ */

typedef struct {
    uint64_t duplicates;
    uint64_t dead_lettered;
    uint64_t rejected[CODEC_STATUS_COUNT]; /* by reason; CODEC_EMALFORMED counts messages */
    uint64_t submits, registers, pulls, acks, heartbeats, byes, stats_requests;
    uint64_t unknown_consumer, unknown_batch;
    uint64_t publish_failures, disconnects;
    uint64_t commit_failures;  /* batches void: published, then their commit failed (dispatch.c) */
    uint64_t dropped_messages; /* written by transport threads: atomic access only */
    uint64_t batches_expired_ack_deadline, consumers_declared_dead;
    uint64_t expired; /* items dead-lettered past their model's age limit */
    /* undelivered.c: batches returned at once because no one subscribed to their pull's inbox,
     * and no-responders statuses that named no batch in flight of the named consumer */
    uint64_t batches_undelivered, undelivered_unmatched;
} daemon_counters_t;

/* ---- service discovery (service.c) ---------------------------------------------------------- */

typedef struct {
    char name[16];
    char subject[DAEMON_PREFIX_MAX + LIMITS_MODEL_MAX + 16];
    ev_kind_t kind;
    uint64_t requests, errors, processing_ns;
    char last_error[128];
} service_endpoint_t;

typedef struct {
    service_endpoint_t *eps; /* owned, fixed at create */
    size_t n;
    char started[64]; /* ISO 8601 UTC */
} service_t;

/* ---- Prometheus figures (metrics.c) ---------------------------------------------------------- */

typedef struct metrics metrics_t;

/* dispatch.c's encoding buffers, reused for every batch; owned by the daemon (daemon_destroy),
 * and given back after a batch larger than DISPATCH_SCRATCH_KEEP. */
typedef struct {
    codec_batch_item_t *items; /* the batch's items for the codec */
    size_t items_cap;
    char *replies; /* the items' reply subjects, NUL-terminated one after another */
    size_t replies_cap;
    uint8_t *buf; /* the encoded Batch */
    size_t buf_cap;
} dispatch_scratch_t;

struct daemon {
    daemon_config_t cfg; /* cfg.limits resolved (limits_resolve) */
    codec_caps_t caps;   /* limits_caps(&cfg.limits) */
    models_t models;
    uint64_t reply_max; /* the server's max_payload: no reply is built larger */
    stats_waiting_t waiting;
    store_t *store;
    sched_t *sched;
    consumers_t *consumers;
    dedupe_t dedupe;
    daemon_counters_t counters;
    uint64_t full_refused;       /* items refused with store_full since the store last took one; the
                                  * refusals began with a log line (intake.c invariant 8) */
    log_budget_t consumer_lines; /* registered and left: a Register flood's lines */
    log_budget_t consumer_deaths; /* declared dead: its own, so a flood hides no death */
    daemon_publish_fn publish;
    void *publish_ctx;
    daemon_idle_fn idle; /* turn.c invariant 8 */
    void *idle_ctx;
    bool published;         /* a publish since the last idle call */
    char *undelivered_base; /* daemon_undelivered_set (owned); NULL: Batches carry no reply */
    evqueue_t events;
    uint64_t next_tick_ns;
    uint64_t last_timers_ns;     /* when the timers last ran: a stalled loop is detected */
    uint64_t turn_ns;            /* when the turn in progress began: its Submits' items are accepted
                                  * at that instant (one dedupe run for the turn's items) */
    size_t serve_cursor;         /* round-robin start among consumers */
    uint64_t retry_ns;           /* the earliest sched_retry_ns of the last fill (0: none) */
    uint64_t dispatch_resume_ns; /* no dispatch before (dispatch.c invariant 10) */
    uint64_t dropped_logged;     /* counters.dropped_messages when last logged (turn.c) */
    uint64_t *orphans;           /* batches whose return failed: retried each tick (owned) */
    size_t orphans_cap;          /* room in orphans, reserved before a return (inflight.c) */
    uint8_t *frame_scratch;      /* intake's framing buffer, reused for every item (owned) */
    dispatch_scratch_t enc;      /* dispatch's encoding buffers (owned) */
    size_t frame_cap;
    size_t n_orphans;
    uint64_t started_ns;
    char instance_id[32];
    service_t service;
    metrics_t *metrics;
    daemon_metrics_sink_fn metrics_sink;
    void *metrics_sink_ctx;
    daemon_nats_state_fn nats_state;
    void *nats_state_ctx;
    int lock_fd; /* the data directory's lock, -1 when none (memory store) */
};

/* The largest reply built until the front says what the server carries: NATS's default. */
#define DAEMON_REPLY_MAX_DEFAULT (1ull << 20)
/* The reply subject a Batch carries, at most: the base, a consumer secret and a batch id,
 * dot-separated. */
#define DAEMON_UNDELIVERED_REPLY_MAX (DAEMON_UNDELIVERED_BASE_MAX + 64u)

uint64_t daemon_now(const struct daemon *d);
uint64_t daemon_ms_ns(uint32_t ms);
/* 1 when the daemon may publish an answer on reply (borrowed; NULL: none asked), under the
 * client rule codec_reply_subject_check applied to this daemon's prefix and own inbox. */
int daemon_reply_allowed(const struct daemon *d, const char *reply);
/* Hands data (borrowed) to the publish function, with reply (NULL: none): 0 once the connection
 * took it, -1 when it did not or there is no publish function. Counts nothing. */
int daemon_send(struct daemon *d, const char *subject, const char *reply, const void *data,
                size_t len);
/* Publishes buf (taken) on subject now; a failure is counted. buf NULL: nothing sent. */
void daemon_publish(struct daemon *d, const char *subject, uint8_t *buf, size_t len);

/* intake.c */
void intake_submit(struct daemon *d, const ev_t *ev, replies_t *deferred);

/* requests.c: one function per consumer-facing subject. */
void requests_register(struct daemon *d, const ev_t *ev);
void requests_pull(struct daemon *d, const ev_t *ev);
void requests_ack(struct daemon *d, const ev_t *ev, replies_t *deferred);
void requests_heartbeat(struct daemon *d, const ev_t *ev);
void requests_bye(struct daemon *d, const ev_t *ev, replies_t *deferred);
void requests_stats(struct daemon *d, const ev_t *ev);
void requests_disconnected(struct daemon *d);
/* A consumer leaves (bye, or silent too long): its batches return, its pulls are told EXPIRED,
 * its worker and its place in its model's count go. The caller marks it dead. */
void requests_consumer_end(struct daemon *d, consumer_t *c);

/* undelivered.c: a Batch no one received (NATS's no-responders status for its reply subject). */
/* Writes the reply subject a Batch of c goes out with, for batch_id on c's oldest pull, into
 * out (cap bytes); 0 when Batches carry none, the pull's reply subject is too long for one, or
 * it does not fit. */
int undelivered_reply(const struct daemon *d, const consumer_t *c, uint64_t batch_id, char *out,
                      size_t cap);
/* EV_UNDELIVERED: returns the batch at once; its consumer is served nothing until it speaks. */
void undelivered_batch(struct daemon *d, const ev_t *ev);

/* dispatch.c */
/* Fills outstanding pulls round-robin for at most DAEMON_FILL_BUDGET_NS. */
void dispatch_fill(struct daemon *d);
/* Dead-letters, with reason "expired", the items of served models queued past their model's
 * age limit (each tick), at most DISPATCH_EXPIRE_BUDGET per call. */
void dispatch_expire(struct daemon *d);
/* Frees the encoding buffers (daemon_destroy). */
void dispatch_scratch_fini(dispatch_scratch_t *enc);
/* Publishes a Batch with no items and this status (EXPIRED, ERROR) on subject. */
void dispatch_status(struct daemon *d, const char *subject, codec_batch_status_t status,
                     const char *error);

/* inflight.c: the one path every batch in flight leaves by (ack, nak, deadline, death, bye,
 * disconnect, dead letter). */
/* INFLIGHT_UNSEEN: a return of a whole batch no one received (sched_return_unseen). */
typedef enum { INFLIGHT_COMPLETE, INFLIGHT_RETURN, INFLIGHT_UNSEEN } inflight_how_t;
/* Completes or returns positions (all when pos is NULL) of an in-flight batch of model m (NULL
 * only for a return), and keeps the books: m's stored totals and completed figures. *out (may
 * be NULL) as sched_complete's. A return that fails is retried every tick. */
sched_status_t inflight_settle(struct daemon *d, model_t *m, uint64_t batch_id, inflight_how_t how,
                               const uint32_t *pos, size_t n, sched_settled_t *out /* out */);
/* Returns every batch c holds and drops its pulls, telling each pull EXPIRED when close_pulls. */
void inflight_release(struct daemon *d, consumer_t *c, int close_pulls);
/* Retries the returns that failed (every tick). */
void inflight_orphans_retry(struct daemon *d);
/* Room for one more orphan, reserved before a commit; 0 when refused (out of memory). */
int inflight_orphan_reserve(struct daemon *d);
/* After a failed commit of batch_id: what the core left in flight without a holder (sched.h,
 * sched_commit) becomes an orphan when room (inflight_orphan_reserve's answer) allows. */
void inflight_orphan_stranded(struct daemon *d, uint64_t batch_id, int room);

/* stats.c: the lanes.stats document for a request body (borrowed; empty or not a JSON object:
 * the summary), returned to the caller to free; NULL when out of memory. Its lists shrink until
 * it fits d->reply_max; one still longer at a single entry per list (a max_payload below the
 * counters' size) is returned as it is, and its failed publish is counted. */
char *stats_json(struct daemon *d, const void *body, size_t body_len, size_t *out_len /* out */);

/* service.c */
/* Builds the endpoint list from the configuration and notes the start time. */
daemon_status_t service_init(struct daemon *d);
void service_fini(struct daemon *d);
/* Counts a handled message for its endpoint: one request, ns of the owner's time. */
void service_note(struct daemon *d, const ev_t *ev, uint64_t ns);
/* Counts a refusal sent on the endpoint of kind (and token's model, for submits); error is the
 * reply's "code_word: text" (borrowed). */
void service_error(struct daemon *d, ev_kind_t kind, const char *token, const char *error);
/* Answers an EV_SERVICE ($SRV.PING / INFO / STATS). */
void service_reply(struct daemon *d, const ev_t *ev);

/* metrics.c */
daemon_status_t metrics_create(metrics_t **out /* out */);
void metrics_destroy(metrics_t *m); /* NULL-safe */
/* The series of model m, given on its first figure: its own, or past METRICS_MODELS_MAX the
 * shared "(other)" one (metrics.c invariant 2). */
metrics_series_t *metrics_series(metrics_t *mt, model_t *m);
/* Items accepted for m. */
void metrics_received(metrics_t *mt, model_t *m, uint64_t items, uint64_t tokens);
/* Positions of a batch of m completed (acked, or a dead letter): the items and tokens first
 * completed, the worker's busy time and service time, and each acked item's submit-to-ack time
 * (done borrowed, as sched_complete gave it). */
void metrics_completed(struct daemon *d, model_t *m, const sched_settled_t *done);
/* A batch of m that NATS took (before its commit, while its views are valid): for a delivery
 * its routed items, the queue waits of first deliveries, its size, padding and shape hit; for
 * a dead letter its routed item; for an expired item the count of expired. */
void metrics_batch(struct daemon *d, model_t *m, const sched_batch_t *b, int hit,
                   metrics_batch_kind_t kind);
/* One owner turn: its duration without the wait for events, and its store flush's. */
void metrics_turn(metrics_t *m, uint64_t turn_ns, uint64_t flush_ns);
/* The Prometheus text exposition, returned to the caller to free; NULL when out of memory. */
char *metrics_text(struct daemon *d, size_t *out_len /* out */);
/* Answers an EV_METRICS on its reply subject (none: nothing), or an EV_METRICS_SNAPSHOT to the
 * sink (none set: nothing). */
void metrics_request(struct daemon *d, const ev_t *ev);

/* dirlock.c */
/* Creates dir if missing and takes its exclusive lock (held until dirlock_release). A lock held
 * by another process: DAEMON_ELOCKED, logged with the holder's pid, host and start. */
daemon_status_t dirlock_acquire(const char *dir, int *out_fd /* out */);
/* The same, but a lock held by another process is waited for: wait(ctx, ms) between tries,
 * DAEMON_ESTOPPED when it returns 1. wait NULL: as dirlock_acquire. */
daemon_status_t dirlock_acquire_wait(const char *dir, int (*wait)(void *ctx, uint32_t ms),
                                     void *ctx, int *out_fd /* out */);
void dirlock_release(int fd); /* -1 is a no-op */

#endif
