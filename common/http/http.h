/*
 * http.h - the daemon's HTTP endpoint for Prometheus (--metrics-listen ADDR:PORT): GET /metrics
 * serves the latest text the owner handed over; GET /livez says whether this process's owner
 * thread answers, GET /healthz whether it answers and the health callback agrees (the NATS
 * connection); nothing else of the daemon is reachable from it.
 *
 * The server never reads scheduling state. For a scrape it asks for a fresh snapshot through
 * the refresh callback (main.c posts an event to the owner), unless the newest is a fraction of a
 * second old or one was asked for already, waits a bounded time for the owner to offer one
 * (http_server_offer), and serves the newest it has.
 *
 * Ownership: http_server_start's *out is returned to the caller, released with
 * http_server_stop; ctx is borrowed and must outlive the server. Texts are copied.
 */
#ifndef LANESCHED_HTTP_H
#define LANESCHED_HTTP_H

#include "common/status.h"

#include <stddef.h>

#define HTTP_STATUS_MAP(X)                                                          \
    X(HTTP_OK, "ok")                                                                \
    X(HTTP_EADDR, "not an ADDR:PORT this host can listen on (e.g. 127.0.0.1:9471)") \
    X(HTTP_ELISTEN, "cannot listen on the address (in use, or not permitted)")      \
    X(HTTP_ENOMEM, "out of memory")

STATUS_ENUM(http_status_t, HTTP_STATUS_MAP, HTTP_STATUS_COUNT);
const char *http_status_str(http_status_t status); /* static storage */

/* The port docs/operations.md and the container image use for --metrics-listen. */
#define HTTP_METRICS_PORT 9471

/* How long a scrape waits for the owner's fresh snapshot before serving the last one. */
#define HTTP_FRESH_WAIT_MS 2000

/* Asks for a snapshot; called on a server thread, must not block. */
typedef void (*http_refresh_fn)(void *ctx);
/* /healthz's check beyond the owner's answer: 0 when healthy, else nonzero with the reason
 * written to why (cap bytes). Called on a server thread, must not block. */
typedef int (*http_health_fn)(void *ctx, char *why /* out */, size_t cap);

typedef struct http_server http_server_t;

/* HTTP_OK when listen is an address http_server_start can try to listen on (its form, and a host
 * that resolves); nothing is opened. */
http_status_t http_listen_check(const char *listen);

/* Listens on listen ("127.0.0.1:9471", "[::1]:9471", ":9471" for every address); borrowed. */
http_status_t http_server_start(const char *listen, http_refresh_fn refresh, void *ctx,
                                http_server_t **out /* out */);
/* The port it listens on (the one the system chose for port 0). */
int http_server_port(const http_server_t *s);
/* Hands over the text to serve from now on (copied). Any thread. */
void http_server_offer(http_server_t *s, const char *text, size_t len);
/* Sets /healthz's callback (NULL: the owner's answer alone); ctx borrowed until the stop. */
void http_server_health_set(http_server_t *s, http_health_fn health, void *ctx);
/* Stops listening, waits for the server's threads, frees. NULL-safe. */
void http_server_stop(http_server_t *s);

#endif
