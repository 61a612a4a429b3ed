/*
 * daemon.h - the contract of lanesched's daemon: the single owner of the scheduler, the store,
 * the consumer registry and the dedupe window, driven by events.
 *
 * The daemon never talks NATS. Whoever does (scheduler/nats/front.c in the process, a unit test
 * in tests/unit/test_daemon.c) posts every message it receives with daemon_post and gives the
 * daemon a publish function; the owner thread (daemon_run) does everything else.
 *
 * Ownership: every pointer passed in is borrowed for the call unless a comment says it is
 * taken; daemon_create's *out is returned to the caller, freed with daemon_destroy.
 */
#ifndef LANESCHED_DAEMON_H
#define LANESCHED_DAEMON_H

#include "common/status.h"

#include <stddef.h>
#include <stdint.h>

#define DAEMON_STATUS_MAP(X)                                               \
    X(DAEMON_OK, "ok")                                                     \
    X(DAEMON_ENOMEM, "out of memory")                                      \
    X(DAEMON_EINVAL, "invalid configuration")                              \
    X(DAEMON_ENATS, "NATS connection failed")                              \
    X(DAEMON_ESTORE, "the store failed")                                   \
    X(DAEMON_ELOCKED, "the data directory is in use by another lanesched") \
    X(DAEMON_ESTOPPED, "stopped while waiting for the data directory")

STATUS_ENUM(daemon_status_t, DAEMON_STATUS_MAP, DAEMON_STATUS_COUNT);

/* Static storage; never NULL. */
const char *daemon_status_str(daemon_status_t status);

/* Longest subject prefix: every subject the daemon builds fits its buffers with a 255-byte
 * model name and a 32-character consumer id. */
#define DAEMON_PREFIX_MAX 128

/* Room a Batch needs beyond its items' payloads (ids, reply_to, field tags): --max-payload is
 * held this far below the server's max_payload so a single item can always be published. */
#define DAEMON_BATCH_OVERHEAD 8192

/* daemon_config_t.starvation_ms: the policy's own age bound (the `lanes` policy's
 * SCHED_AGE_BOUND_DEFAULT_NS; none under lanes-seed, which is the article's policy). */
#define DAEMON_STARVATION_DEFAULT UINT32_MAX
/* daemon_config_t.hold_ms: the `lanes` policy's hold (SCHED_HOLD_DEFAULT_NS). */
#define DAEMON_HOLD_DEFAULT UINT32_MAX
/* The most recovery threads the disk store takes (its STORE_RECOVERY_THREADS_MAX, checked where
 * both are seen: daemon.c). */
#define DAEMON_RECOVERY_THREADS_MAX 64u
/* The smallest segment size cap taken (daemon_config_t.segment_max_bytes). Each segment is a file
 * of its own: created with a header, listed in the index, held open and mapped while it has
 * items, and at the power level synced with its directory. Below 64 KiB, the least the disk
 * store grows a segment by (disk_seg.c), every few items make a file (one per item at 1); at
 * 64 KiB segments still roll over often, which the fault campaign relies on (tools/chaos runs
 * the daemon at exactly this). An item larger than the cap still has a home: a segment of its
 * own (disk_seg.c invariant 1). */
#define DAEMON_SEGMENT_MIN_BYTES (64u << 10)
/* The largest: the disk store refuses more (store_open_disk). */
#define DAEMON_SEGMENT_MAX_BYTES (1u << 31)
/* The longest data directory path (bytes). The directory's lock and the store's index are opened
 * by their full path under it, <dir>/index/data.mdb the longest (15 bytes more), through
 * 4096-byte buffers and the kernel's PATH_MAX of 4096 with its NUL: a longer path fails there,
 * after the lock is taken or halfway through the store's open, with no flag named. 64 bytes are
 * kept for those names. */
#define DAEMON_DATA_DIR_MAX (4096 - 64)

/*
 * The defaults of the limits on what one client controls (daemon_limits_t; a field left 0 takes
 * its default). Each keeps one message's work, and one client's memory, bounded; subjects.md
 * lists them with the reason code a client gets past each.
 */
/* Register.name bytes: a name is for people (logs, stats); a 100 KB name only costs. */
#define DAEMON_LIMIT_NAME_BYTES 256u
/* WorkItems per Submit: the reply to 10,000 items with 64-byte ids and the longest reason word
 * is about 0.9 MB, under NATS's default max_payload of 1 MB. */
#define DAEMON_LIMIT_ITEMS 10000u
/* WorkItem.reply_to bytes: a subject; with a 64-byte id it stays far inside the 8 KB a batch
 * keeps free per item (DAEMON_BATCH_OVERHEAD), so a batch of one item always fits. */
#define DAEMON_LIMIT_REPLY_TO_BYTES 1024u
/* Consumers registered (alive, and dead ones still remembered): timers walk them every turn. */
#define DAEMON_LIMIT_CONSUMERS 1024u
/* Open pulls per consumer: a client that pulls without end would queue records without end. */
#define DAEMON_LIMIT_PULLS 64u
/* Batches in flight per consumer, JetStream's max_ack_pending default (1,000) rounded to a
 * power of two; a consumer holding that many gets none until it settles one. A heartbeat lists
 * at most this many ids. */
#define DAEMON_LIMIT_INFLIGHT 1024u
/* Register.max_batch_size (an Ack lists at most this many positions): engines batch tens to a
 * few thousand sequences, and a contract of 2^32 - 1 turns each fill into a long run of failed
 * publishes (`lanesched-chaos --flood`, the 2^32 - 1 contract case). */
#define DAEMON_LIMIT_BATCH_SIZE 4096u
/* Register.max_batch_tokens: 4 Mi padded tokens, far past any engine's step. */
#define DAEMON_LIMIT_BATCH_TOKENS 4194304u
/* Models with shapes, and shapes per model: every shape costs lanes, segment files and a row in
 * stats; a producer that hashes whole prompts instead of templates makes one per item. */
#define DAEMON_LIMIT_MODELS           1024u
#define DAEMON_LIMIT_SHAPES           16384u
#define DAEMON_LIMIT_SHAPES_PER_MODEL 4096u
/* New shapes one Submit may create: each opens a lane and its store queue, so a message of
 * 10,000 new shapes would hold the owner for seconds (`lanesched-chaos --flood`, the 20,000
 * shapes case). */
#define DAEMON_LIMIT_NEW_SHAPES 64u
/* Items stored per model (queued + in flight): JetStream's max_msgs. The disk store keeps a
 * record of a few tens of bytes per item in RAM (docs/store.md), so this bounds a model's share
 * to a few hundred MB. */
#define DAEMON_LIMIT_QUEUE_ITEMS 10000000ull
/* Bytes stored per model (ids, payloads and reply subjects): JetStream's max_bytes. */
#define DAEMON_LIMIT_QUEUE_BYTES (8ull << 30)
/* Ids in the dedupe window: 4 Mi ids of about 20 bytes each (a run of ids per Submit or turn;
 * 36 at worst, every id its own run) is 80-144 MiB; past it the oldest are forgotten early
 * (counted in dedupe_evictions). */
#define DAEMON_LIMIT_DEDUPE_IDS 4194304ull
/* How long an item may stay queued (JetStream's max_age): past it, it is dead-lettered with
 * reason "expired". A day keeps work that waits for its GPUs through a night, and bounds how
 * long a client's items can hold a model's or a shape's slot when no consumer ever comes. */
#define DAEMON_LIMIT_QUEUE_AGE_MS 86400000u
/* A Pull's expires_ms (the longest wait for work): a consumer that waits longer than a few
 * minutes cannot tell a lost daemon from an idle one. */
#define DAEMON_LIMIT_PULL_EXPIRES_MS 300000u
/* Bytes of clients' messages waiting for the owner, Submits and the rest each (evqueue.c
 * invariant 5): past it a message is dropped and counted (dropped_messages), as core NATS drops
 * for a slow consumer, and its client's timeout and retry take over. 64 MiB is nats.c's own
 * default pending limit per subscription, and many times what the throughput bench's 8
 * producers keep in flight (8 x 32 Submits of 64 items of 512 bytes, about 10 MB). */
#define DAEMON_LIMIT_BACKLOG_BYTES (64ull << 20)

/* The limits in force; 0 in a field = its DAEMON_LIMIT_ default. */
typedef struct {
    uint32_t name_bytes;
    uint32_t items;
    uint32_t reply_to_bytes;
    uint32_t consumers;
    uint32_t pulls;
    uint32_t inflight;
    uint32_t batch_size;
    uint32_t batch_tokens;
    uint32_t models;
    uint32_t shapes; /* of every model together */
    uint32_t shapes_per_model;
    uint32_t new_shapes; /* per Submit */
    uint64_t queue_items;
    uint64_t queue_bytes;
    uint64_t dedupe_ids;
    uint32_t queue_age_ms;    /* every model's, unless queue_age_models names it */
    uint32_t pull_expires_ms; /* a longer Pull.expires_ms is cut to it */
    uint64_t backlog_bytes;   /* clients' messages waiting for the owner, per class */
} daemon_limits_t;

/* Monotonic nanoseconds; the daemon's only clock (tests inject their own). */
typedef uint64_t (*daemon_clock_fn)(void *ctx);

/* One model's wait budget (--slo-ms MODEL=MS). */
typedef struct {
    const char *model; /* borrowed */
    uint32_t ms;
} daemon_slo_t;

/* What the daemon is configured with. Strings are borrowed and must outlive the daemon. */
typedef struct {
    const char *prefix;
    /* The connection's own reply inbox prefix when it is private (--inbox-prefix), NULL for
     * nats.c's shared "_INBOX": no answer is published under it (codec_reply_subject_check). */
    const char *own_inbox;
    const char *data_dir;
    int store_memory;
    int durability_power;
    int power_syncfs;   /* the power level syncs with one syncfs (store.h's STORE_SYNC_FS) */
    const char *models; /* comma-separated, NULL = every model */
    uint32_t heartbeat_ms;
    uint32_t dead_after_ms;
    uint32_t ack_wait_ms;
    uint32_t max_deliveries;
    uint32_t max_payload;
    uint32_t dedupe_window_ms;
    uint64_t segment_max_bytes;
    uint64_t journal_file_bytes; /* the disk store's journal file size; 0 = its default */
    uint32_t store_resident_mb;  /* the disk store's mapped bytes kept resident; 0 = its default */
    uint32_t recovery_threads;   /* the disk store's recovery threads; 0 = its default */
    uint32_t starvation_ms; /* the age bound; 0 = off, DAEMON_STARVATION_DEFAULT = the policy's */
    uint32_t hold_ms;       /* the hold; 0 = off, DAEMON_HOLD_DEFAULT = the policy's */
    /* The scheduling policy: "lanes" (NULL: the default) or "lanes-seed" (the article's). */
    const char *policy;
    /* The wait budget (sched_config_t.slo_ns): every model's (0: none) and, overriding it, the
     * models' named in slos (borrowed, n_slos entries). */
    uint32_t slo_ms;
    const daemon_slo_t *slos;
    size_t n_slos;
    daemon_clock_fn clock; /* NULL = CLOCK_MONOTONIC */
    void *clock_ctx;       /* borrowed */
    /* Leases (scale-out): each model of `models` is served only while EV_LEASE says this
     * instance holds its lease, until the deadline it carries (lease.h). Requires models. */
    int leases;
    /* With a lock held by another process, daemon_create waits for it, calling lock_wait(ctx,
     * ms) between tries (a standby on the same volume); lock_wait returns 1 to give up
     * (DAEMON_ESTOPPED). NULL: a held lock fails at once (DAEMON_ELOCKED). */
    int (*lock_wait)(void *ctx, uint32_t ms);
    void *lock_wait_ctx; /* borrowed */
    daemon_limits_t limits;
    /* Per-model queue age limits, "model=ms,model=ms" (NULL: limits.queue_age_ms for all). */
    const char *queue_age_models;
    /* The only models accepted (comma-separated, a name ending in '*' a prefix), NULL: any:
     * a Submit's item or a Register for another model is refused model_not_allowed. */
    const char *allow_models;
} daemon_config_t;

/* The kinds of message the daemon handles; the front maps each subscription to one. */
typedef enum {
    EV_SUBMIT,       /* token: the model */
    EV_REGISTER,     /* token: the model of P.register.<model>, "" on P.register */
    EV_PULL,         /* token: the consumer id */
    EV_ACK,          /* token: the consumer id */
    EV_HEARTBEAT,    /* token: the consumer id */
    EV_BYE,          /* token: the consumer id */
    EV_STATS,        /* no token */
    EV_DISCONNECTED, /* the daemon's own connection dropped; nothing else set */
    EV_STOP,         /* finish the turn, flush, return from daemon_run */
    EV_SERVICE,      /* token: the $SRV subject after "$SRV." (PING, INFO.lanesched, ...) */
    EV_METRICS,      /* no token: a client's request for the metrics text, answered on its
                        reply subject (none: nothing to do) */
    EV_LEASE,        /* token: a model; data: a daemon_lease_note_t */
    EV_UNDELIVERED,  /* token: what follows "<base>." in a Batch's reply subject (undelivered.c):
                        the server found no subscriber for the Batch (NATS's no-responders) */
    EV_METRICS_SNAPSHOT, /* nothing set: the daemon's own ask for a snapshot for the metrics
                            sink (daemon_metrics_sink_set) */
} ev_kind_t;

/* EV_LEASE's data: the lease keeper's word on one model. */
typedef struct {
    uint64_t until_ns;  /* serve strictly before this (monotonic ns); 0 = not held */
    uint64_t elsewhere; /* 1: the bucket refused this instance: another instance holds it */
} daemon_lease_note_t;

/* Publishes data on subject with the reply subject reply (NULL: none); returns 0 once the
 * connection took it. All borrowed. Called on the owner thread only. */
typedef int (*daemon_publish_fn)(void *ctx, const char *subject, const char *reply,
                                 const void *data, size_t len);

typedef struct daemon daemon_t;

/* Opens the store (recovering a disk store), restores the scheduler and rebuilds the dedupe
 * window from the queued items. */
daemon_status_t daemon_create(const daemon_config_t *cfg, daemon_t **out /* out */);
/* Frees everything; items in flight stay pending in the store (they come back at the next
 * open). NULL-safe. No other thread may still post. */
void daemon_destroy(daemon_t *d);

/* Sets the publish function before daemon_run (ctx borrowed). Without one, nothing goes out. */
void daemon_publish_set(daemon_t *d, daemon_publish_fn publish, void *ctx);
/* Called on the owner thread when it is about to wait for events with none queued, having
 * published since the last call (turn.c invariant 8): the transport writes what it still holds
 * buffered. */
typedef void (*daemon_idle_fn)(void *ctx);
/* Sets the idle function before daemon_run (ctx borrowed). Without one, none is called. */
void daemon_idle_set(daemon_t *d, daemon_idle_fn idle, void *ctx);
/* The longest base daemon_undelivered_set takes. */
#define DAEMON_UNDELIVERED_BASE_MAX 160u
/* Sets, before daemon_run, the subject under which Batches ask for NATS's no-responders status:
 * each Batch goes out with the reply subject "<base>.<consumer secret>.<batch id>",
 * and the transport posts EV_UNDELIVERED with the part after "<base>." when the server says no
 * one subscribes to the Batch's subject (undelivered.c). base is copied; without it (or NULL)
 * Batches carry no reply subject. DAEMON_EINVAL past 160 bytes, DAEMON_ENOMEM, or DAEMON_OK. */
daemon_status_t daemon_undelivered_set(daemon_t *d, const char *base);
/* Lowers the largest payload accepted (the front learns the server's max_payload). */
void daemon_max_payload_set(daemon_t *d, uint32_t bytes);
/* The largest message the server carries (its max_payload): no reply is built larger (a submit
 * whose reply could be larger is refused before anything is stored; stats pages shrink to it).
 * Until set: 1 MiB, NATS's default. */
void daemon_reply_max_set(daemon_t *d, uint64_t bytes);

/* The code word of the model rule (subjects.md) that `name` (borrowed) breaks, or NULL when it
 * is a model name; a static string. What an owned-model list is checked against before
 * anything opens. */
const char *daemon_model_name_fault(const char *name);

/* The instance id (22 characters of [0-9A-Za-z], random at create) that $SRV replies carry and
 * $SRV.<verb>.lanesched.<id> addresses. Constant for the daemon's life: safe from any thread. */
const char *daemon_instance_id(const daemon_t *d);

/* The transport's connection, for the metrics (lanesched_nats_*). */
typedef struct {
    int connected;       /* 1 while connected */
    uint64_t reconnects; /* since the start */
    uint64_t outage_ns;  /* time disconnected since the start, the current outage included */
    uint64_t errors;     /* asynchronous errors NATS reported (a publish refused, ...) */
} daemon_nats_state_t;
/* Reads the connection's state; called on the owner thread, must not block. */
typedef void (*daemon_nats_state_fn)(void *ctx, daemon_nats_state_t *out /* out */);
/* Sets it before daemon_run (ctx borrowed). Without one, no lanesched_nats_* series. */
void daemon_nats_state_set(daemon_t *d, daemon_nats_state_fn fn, void *ctx);

/* Receives the Prometheus text the owner builds for an EV_METRICS_SNAPSHOT (text borrowed for
 * the call; copy it). Called on the owner thread. */
typedef void (*daemon_metrics_sink_fn)(void *ctx, const char *text, size_t len);
/* Sets the sink before daemon_run (ctx borrowed). Without one, such snapshots are dropped. */
void daemon_metrics_sink_set(daemon_t *d, daemon_metrics_sink_fn sink, void *ctx);

/* Hands a message to the owner: every argument is copied (token, reply may be NULL). Thread-safe.
 * Returns 0, or -1 when out of memory: the message is dropped and counted. EV_STOP is not queued
 * behind the messages already waiting: the owner stops after the message in hand, and the ones
 * behind it are dropped unanswered (nothing of them was stored or acknowledged). */
int daemon_post(daemon_t *d, ev_kind_t kind, const char *token, const char *reply, const void *data,
                size_t len);

/* Frees a transport message handed over with daemon_post_msg (ctx as given to
 * daemon_release_set). Called on the owner thread, or on the posting thread when the message
 * could not be queued, or by daemon_destroy for messages still queued. */
typedef void (*daemon_release_fn)(void *ctx, void *msg);
/* Sets the release function before the first daemon_post_msg (ctx borrowed). */
void daemon_release_set(daemon_t *d, daemon_release_fn release, void *ctx);
/* Hands a message to the owner without copying it: token, reply (may be NULL) and data are views
 * into msg, which is taken; the owner releases it once it handled the burst it came in. kind is
 * never EV_STOP (daemon_post). Thread-safe. Returns 0, or -1 when out of memory: msg was released,
 * the drop counted. */
int daemon_post_msg(daemon_t *d, ev_kind_t kind, const char *token, const char *reply,
                    const void *data, size_t len, void *msg);
/* Releases every message still queued, unhandled: the transport calls it after daemon_run
 * returned and no callback can post any more, while its library can still free them. */
void daemon_events_drop(daemon_t *d);
/* Counts a message the transport dropped before it reached daemon_post. Thread-safe. */
void daemon_dropped_note(daemon_t *d);

/* One turn of the owner: waits at most wait_ns for the first event, handles every queued one,
 * flushes the store, sends the replies, runs the timers and fills pulls. *out_stopped (may be
 * NULL) is set to 1 after an EV_STOP. DAEMON_ESTORE when the flush failed (nothing of the turn
 * was acknowledged). daemon_run is this in a loop; tests call it directly. */
daemon_status_t daemon_turn(daemon_t *d, uint64_t wait_ns, int *out_stopped /* out */);
/* The owner loop: turns until EV_STOP or a store failure. */
daemon_status_t daemon_run(daemon_t *d);

#endif
