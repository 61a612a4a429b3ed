/*
 * front.h - the NATS front of the daemon (private to scheduler/nats/).
 *
 * Ownership: front_create's result is returned to the caller, freed with front_destroy; the
 * daemon and the configuration are borrowed and must outlive the front.
 */
#ifndef LANESCHED_NATS_FRONT_H
#define LANESCHED_NATS_FRONT_H

#include "scheduler/daemon/daemon.h"

/* How to reach NATS. Strings borrowed from argv/environ for the process's life. */
typedef struct {
    const char *servers; /* comma-separated URLs */
    const char *user, *password, *token, *creds_file;
    const char *tls_ca, *tls_cert, *tls_key;
    const char *prefix;
    const char *models; /* comma-separated, NULL = every model */
} front_config_t;

typedef struct front front_t;

front_t *front_create(daemon_t *d);
/* Connects and subscribes every subject of the daemon. */
daemon_status_t front_connect(front_t *f, const front_config_t *cfg);
/* Stops taking work: unsubscribes (the owner still publishes replies). */
void front_unsubscribe(front_t *f);
/* Closes the connection, then the NATS library, waiting for its threads: no callback runs after
 * it returns, so the daemon can be destroyed next. NULL-safe. */
void front_destroy(front_t *f);
/* The largest payload a single-item Batch can carry on the connected server, lowered from
 * `configured` (0 = unlimited) when the server carries less (logged). */
uint32_t front_payload_cap(front_t *f, uint32_t configured);
/* The largest message the server carries (its max_payload), 0 before a connection. */
uint64_t front_server_max_payload(front_t *f);
/* A daemon_publish_fn: ctx is the front. */
int front_publish(void *ctx, const char *subject, const void *data, size_t len);

#endif
