/*
 * daemon_int.h - private to scheduler/: the daemon around the scheduling core.
 *
 *   front.c      the NATS side (the only file besides main.c that includes nats.h): turns
 *                messages into events for the owner, publishes what the owner sends.
 *   owner.c      the single owner thread: every scheduling state change happens here.
 *   consumers.c  registered consumers, their pulls and in-flight batches, liveness.
 *   dedupe.c     the item-id window that makes a retried submit safe.
 *   stats.c      the lanes.stats JSON.
 *   main.c       flags, environment, logging, signals.
 */
#ifndef LANESCHED_DAEMON_INT_H
#define LANESCHED_DAEMON_INT_H

#include "common/status.h"
#include "common/map.h"
#include "scheduler/scheduler.h"

#include <pthread.h>
#include <stdarg.h>

#define DAEMON_STATUS_MAP(X)                  \
    X(DAEMON_OK, "ok")                        \
    X(DAEMON_ENOMEM, "out of memory")         \
    X(DAEMON_EINVAL, "invalid configuration") \
    X(DAEMON_ENATS, "NATS connection failed") \
    X(DAEMON_ESTORE, "the store failed")

STATUS_ENUM(daemon_status_t, DAEMON_STATUS_MAP, DAEMON_STATUS_COUNT);

const char *daemon_status_str(daemon_status_t status);

enum { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };
void daemon_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void daemon_log_level_set(int level);

/* Longest subject prefix: every subject the daemon builds fits its buffers with a 255-byte
 * model name and a 32-character consumer id. */
#define DAEMON_PREFIX_MAX 128

/* Room a Batch needs beyond its items' payloads (ids, reply_to, field tags): --max-payload is
 * held this far below the server's max_payload so a single item can always be published. */
#define DAEMON_BATCH_OVERHEAD 8192

/* Everything the command line sets. Strings are borrowed from argv/environ for the process's
 * life. */
typedef struct {
    const char *servers; /* comma-separated URLs */
    const char *user, *password, *token, *creds_file;
    const char *tls_ca, *tls_cert, *tls_key;
    const char *prefix;
    const char *data_dir;
    int store_memory;
    int durability_power;
    const char *models; /* comma-separated, NULL = every model */
    uint32_t heartbeat_ms;
    uint32_t dead_after_ms;
    uint32_t ack_wait_ms;
    uint32_t max_deliveries;
    uint32_t max_payload;
    uint32_t dedupe_window_ms;
    uint64_t segment_max_bytes;
    uint32_t starvation_ms; /* 0 = off */
} daemon_config_t;

/* ---- events: NATS callbacks -> owner thread ------------------------------------------------ */

typedef enum {
    EV_SUBMIT,
    EV_REGISTER,
    EV_PULL,
    EV_ACK,
    EV_HEARTBEAT,
    EV_BYE,
    EV_STATS,
    EV_DISCONNECTED,
    EV_STOP,
} ev_kind_t;

/* One message handed to the owner. Every pointer is owned by the event (ev_destroy frees). */
typedef struct ev {
    ev_kind_t kind;
    char *token; /* the subject's last token: model or consumer id */
    char *reply; /* NULL when the message had no reply subject */
    uint8_t *data;
    size_t len;
    struct ev *next;
} ev_t;

/* Copies its arguments (all borrowed). NULL when out of memory. */
ev_t *ev_create(ev_kind_t kind, const char *token, const char *reply, const void *data, size_t len);
void ev_destroy(ev_t *ev);

/* ---- owner -> NATS ------------------------------------------------------------------------- */

/* Publishes data on subject; returns 0 once the connection took it. All borrowed. */
typedef int (*daemon_publish_fn)(void *ctx, const char *subject, const void *data, size_t len);

/* ---- consumers ------------------------------------------------------------------------------ */

typedef struct consumer consumer_t;

typedef struct {
    char *reply; /* owned */
    uint32_t credits;
    uint64_t expires_ns;
} pull_t;

typedef struct {
    uint64_t batch_id;
    uint64_t deadline_ns;
    uint32_t n_items; /* positions 0 .. n_items - 1 exist */
} inflight_t;

struct consumer {
    char id[33];
    char *name;  /* owned */
    char *model; /* owned */
    packer_contract_t contract;
    uint64_t last_seen_ns;
    int dead;
    pull_t *pulls; /* FIFO, owned */
    size_t n_pulls, cap_pulls;
    inflight_t *inflight; /* owned */
    size_t n_inflight, cap_inflight;
    uint64_t batches, items;
};

typedef struct {
    map_t by_id;    /* (hash of id, 0) -> consumer_t */
    map_t by_batch; /* (batch id, 0) -> consumer_t */
    consumer_t **all;
    size_t n_all, cap_all;
} consumers_t;

void consumers_init(consumers_t *cs);
void consumers_fini(consumers_t *cs);
/* Registers a consumer with a fresh random id. *out is owned by the registry. */
daemon_status_t consumers_add(consumers_t *cs, const char *model, const char *name,
                              packer_contract_t contract, uint64_t now_ns,
                              consumer_t **out /* out */);
/* The consumer with this id (dead ones included), or NULL. */
consumer_t *consumers_find(consumers_t *cs, const char *id);
/* The consumer holding this in-flight batch, or NULL. */
consumer_t *consumers_batch_owner(consumers_t *cs, uint64_t batch_id);
daemon_status_t consumers_pull_add(consumer_t *c, const char *reply, uint32_t credits,
                                   uint64_t expires_ns);
void consumers_pull_pop(consumer_t *c);
/* Drops the pull at index (none if past the end); the others keep their order. */
void consumers_pull_del(consumer_t *c, size_t index);
daemon_status_t consumers_inflight_add(consumers_t *cs, consumer_t *c, uint64_t batch_id,
                                       uint64_t deadline_ns, uint32_t n_items);
/* Forgets an in-flight batch (settled or returned). */
void consumers_inflight_del(consumers_t *cs, consumer_t *c, uint64_t batch_id);
inflight_t *consumers_inflight_find(consumer_t *c, uint64_t batch_id);
/* Drops consumers that have been dead for longer than keep_ns (their ids then read as
 * unknown rather than stale). */
void consumers_prune(consumers_t *cs, uint64_t now_ns, uint64_t keep_ns);

/* ---- dedupe --------------------------------------------------------------------------------- */

typedef struct {
    map_t seen; /* (XXH64 of id, XXH64 seeded) -> expiry, as a pointer */
    struct dedupe_entry {
        map_key_t key;
        uint64_t expires_ns;
    } * ring;
    size_t head, len, cap;
    uint64_t window_ns;
} dedupe_t;

void dedupe_init(dedupe_t *d, uint64_t window_ns);
void dedupe_fini(dedupe_t *d);
/* 1 if the id was accepted within the window. */
int dedupe_contains(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns);
daemon_status_t dedupe_add(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns);

/* ---- the owner ------------------------------------------------------------------------------ */

typedef struct {
    uint64_t duplicates;
    uint64_t dead_lettered;
    uint64_t rejected[32]; /* by codec status; [31] = store_full, [30] = store_error */
    uint64_t malformed;
    uint64_t submits, registers, pulls, acks, heartbeats, byes, stats_requests;
    uint64_t unknown_consumer, unknown_batch;
    uint64_t publish_failures, disconnects;
    uint64_t dropped_messages; /* written by NATS threads: atomic access only */
    uint64_t batches_expired_ack_deadline, consumers_declared_dead;
} daemon_counters_t;

#define DAEMON_REJECT_STORE_FULL  31
#define DAEMON_REJECT_STORE_ERROR 30

typedef struct daemon {
    daemon_config_t cfg;
    store_t *store;
    sched_t *sched;
    consumers_t consumers;
    dedupe_t dedupe;
    daemon_counters_t counters;
    daemon_publish_fn publish;
    void *publish_ctx;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    ev_t *head, *tail;
    size_t queued_events;
    uint64_t next_tick_ns;
    uint64_t last_timers_ns; /* when the timers last ran: a stalled loop is detected */
    size_t serve_cursor;     /* round-robin start among consumers */
    uint64_t *orphans;       /* batches whose return failed: retried each tick (owned) */
    size_t n_orphans;
    uint64_t started_ns;
} daemon_t;

daemon_status_t daemon_create(const daemon_config_t *cfg, daemon_t **out /* out */);
void daemon_destroy(daemon_t *d);
/* Hands an event to the owner (taken). Thread-safe. */
void daemon_post(daemon_t *d, ev_t *ev);
/* The owner loop: runs until an EV_STOP event, then flushes. */
daemon_status_t daemon_run(daemon_t *d);

/* front.c: the NATS side. front_connect subscribes; front_publish is a daemon_publish_fn. */
typedef struct front front_t;
front_t *front_create(daemon_t *d);
daemon_status_t front_connect(front_t *f, const daemon_config_t *cfg);
/* Stops taking work: unsubscribes (the owner still publishes replies). */
void front_unsubscribe(front_t *f);
/* Closes the connection, then the NATS library, waiting for its threads: no callback runs
 * after it returns, so the daemon can be destroyed next. */
void front_destroy(front_t *f);
/* Lowers cfg->max_payload to what the connected server can carry in one Batch (logged). */
void front_payload_cap(front_t *f, daemon_config_t *cfg);
int front_publish(void *ctx, const char *subject, const void *data, size_t len);

/* stats.c: the lanes.stats document, malloc'd, returned to the caller to free. */
char *stats_json(daemon_t *d, size_t *out_len /* out */);

#endif
