/*
 * front.h - the NATS front of the daemon (private to scheduler/nats/).
 *
 * Ownership: front_create's result is returned to the caller, freed with front_destroy; the
 * daemon and the configuration are borrowed and must outlive the front.
 */
#ifndef LANESCHED_NATS_FRONT_H
#define LANESCHED_NATS_FRONT_H

#include "scheduler/daemon/daemon.h"

#include <nats/nats.h>

/* How to reach NATS. Strings borrowed from argv/environ for the process's life. */
typedef struct {
    const char *servers; /* comma-separated URLs */
    const char *user, *password, *token, *creds_file;
    const char *tls_ca, *tls_cert, *tls_key;
    const char *prefix;
    const char *inbox_prefix; /* the connection's own inbox prefix; NULL = nats.c's "_INBOX" */
    int tls_url;              /* a URL says tls:// (common/url.h): TLS is required */
    const char *models;       /* comma-separated, NULL = every model */
    int leases;               /* models' submit subjects follow their leases (front_submit_serve) */
    /* Writes are left to nats.c's flusher thread alone (--send flusher; front.c invariant 13). */
    int nats_flusher;
    /* Waiting for NATS at start: how long in total (0 = forever), and the pause between tries,
     * which returns nonzero to give up (a stop signal came). */
    uint32_t connect_wait_ms;
    int (*pause)(void *ctx, uint32_t ms);
    void *pause_ctx; /* borrowed */
} front_config_t;

typedef struct front front_t;

front_t *front_create(daemon_t *d);
/* Connects, retrying with backoff while no server answers (a log line each try, bounded by
 * connect_wait_ms), then subscribes every subject of the daemon and, unless cfg->nats_flusher,
 * starts the writer thread and sets the daemon's idle function (front.c invariant 13).
 * DAEMON_ENATS when it gave up, DAEMON_ENOMEM when the thread could not start. */
daemon_status_t front_connect(front_t *f, const front_config_t *cfg);
/* Stops taking work: drains the subscriptions (what nats.c already received still reaches the
 * owner; the owner still publishes replies). Called again by front_destroy, it does nothing. */
void front_unsubscribe(front_t *f);
/* Closes the connection, then the NATS library, waiting for its threads: no callback runs after
 * it returns, so the daemon can be destroyed next. NULL-safe. */
void front_destroy(front_t *f);
/* The largest payload a single-item Batch can carry on the connected server (*out_cap),
 * lowered from `configured` (0 = unlimited) when the server carries less (logged).
 * DAEMON_EINVAL (logged, *out_cap untouched) when the server's max_payload leaves no room
 * for a batch beside a payload: an item accepted there could never be delivered. */
daemon_status_t front_payload_cap(front_t *f, uint32_t configured, uint32_t *out_cap /* out */);
/* With leases: subscribes (on) or unsubscribes the model's submit subject. Thread-safe; after
 * front_unsubscribe nothing is subscribed again. */
daemon_status_t front_submit_serve(front_t *f, const char *model, int on);
/* The connection, borrowed, for the lease keeper (valid until front_destroy). */
natsConnection *front_connection(front_t *f);
/* The largest message the server carries (its max_payload), 0 before a connection. */
uint64_t front_server_max_payload(front_t *f);
/* The connection as the callbacks saw it (front.c, invariant 10). */
typedef struct {
    int connected;       /* 1 while connected */
    uint64_t reconnects; /* reconnects since the start */
    uint64_t outage_ns;  /* time spent disconnected since the start, the current outage too */
    uint64_t errors;     /* asynchronous errors NATS reported since the start */
} front_nats_state_t;

/* Any thread, any time between front_create and front_destroy. */
void front_nats_state(front_t *f, front_nats_state_t *out /* out */);
/* 1 when nats.c closed the connection for good while the daemon served (the daemon was told to
 * stop): the process exits 1. Any thread. */
int front_lost(front_t *f);
/* A daemon_publish_fn: ctx is the front. */
int front_publish(void *ctx, const char *subject, const char *reply, const void *data, size_t len);

#endif
