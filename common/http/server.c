/*
 * server.c - the /metrics HTTP server, on libmicrohttpd (Debian's libmicrohttpd-dev): a small
 * pool of internal polling threads, GET and HEAD only, text/plain in the Prometheus exposition
 * format.
 *
 * Invariants:
 *   1. The server thread touches only this file's state (the snapshot under `lock`): scheduling
 *      state is the owner's, and reaches here only as a copied text (http_server_offer).
 *   2. A scrape is answered within HTTP_FRESH_WAIT_MS: with a snapshot the owner produced at
 *      most HTTP_REUSE_MS before it or for it, or, when the owner is busy or not running yet,
 *      with the newest older one (503 until the first exists). At most one request for a
 *      snapshot is in flight, and none while the newest is younger than HTTP_REUSE_MS: however
 *      many clients scrape, the owner builds at most one text per HTTP_REUSE_MS for them: its
 *      time for NATS does not shrink with their number (docs/operations.md).
 *   3. Only GET and HEAD of /metrics, /livez, /healthz (and / pointing at them) are served;
 *      every other path is 404, every other method 405, a request announcing a body 413, and
 *      a request body is never read: the refusal goes out when the headers are in.
 *   4. /livez and /healthz answer for this process only: /livez is 200 when the owner produced
 *      a snapshot for this request or HTTP_REUSE_MS before it (its loop turns), /healthz when
 *      it did and the health
 *      callback (the NATS connection) says yes; otherwise 503 with the reason. A container's
 *      healthcheck thus fails when its own daemon is stopped, stuck or cut off, whatever other
 *      instances answer on NATS.
 *   5. HTTP_CONNECTIONS_LOCAL of the connections are kept for 127.0.0.1 and ::1: clients from
 *      other addresses holding connections open (slowloris from many addresses) cannot refuse
 *      the local health check.
 *
 * Rejected: a hand-written HTTP server (request parsing is where bugs live), serving a
 * snapshot refreshed on a timer (a scrape would read figures up to one period old, and an idle
 * daemon would build texts nobody reads), and a healthcheck over NATS ($SRV.PING answers for
 * any instance on the fabric, not for the one in this container).
 */
#include "common/http/http.h"

#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

STATUS_STR(http_status_str, http_status_t, HTTP_STATUS_MAP, "unknown http status")

/* A connection idle this long is closed. */
#define HTTP_IDLE_S 10u
/* Threads answering: a scrape or probe waits up to HTTP_FRESH_WAIT_MS for the owner, so one
 * thread would queue the probes behind it (three probes took 6 s while NATS was down). */
#define HTTP_THREADS 4u
/* Open connections in all, and from one address: a client holding connections half-open
 * (slowloris) takes its own address's share, not the healthcheck's (the Docker healthcheck
 * comes from inside the container). The total bounds the descriptors the server takes. */
#define HTTP_CONNECTIONS_MAX    256u
#define HTTP_CONNECTIONS_PER_IP 32u
/* ... of which these only for 127.0.0.1 and ::1 (invariant 5): a container's health check. */
#define HTTP_CONNECTIONS_LOCAL 16u
/* A snapshot this young answers a scrape without asking the owner again (invariant 2): a
 * scrape reads figures at most this old, and the owner builds at most five texts a second for
 * every scraper together. */
#define HTTP_REUSE_MS 200u

struct http_server {
    struct MHD_Daemon *mhd;
    http_refresh_fn refresh;
    void *ctx;
    int port;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char *text; /* under lock: the newest snapshot, NULL before the first */
    size_t len;
    uint64_t generation;   /* under lock: snapshots offered so far */
    uint64_t offered_ms;   /* under lock: when the newest was offered (monotonic) */
    uint64_t asked_ms;     /* under lock: when a snapshot was last asked for; 0: none in flight */
    _Atomic unsigned open; /* connections open (invariant 5) */
    http_health_fn health;
    void *health_ctx;
};

static uint64_t http_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void http_server_offer(http_server_t *s, const char *text, size_t len)
{
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return; /* the previous snapshot stays */
    memcpy(copy, text, len);
    copy[len] = '\0';
    pthread_mutex_lock(&s->lock);
    free(s->text);
    s->text = copy;
    s->len = len;
    s->generation++;
    s->offered_ms = http_now_ms();
    s->asked_ms = 0;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* A copy of the newest snapshot (s->lock held), *len its length; NULL when there is none. */
static char *http_copy_locked(const http_server_t *s, size_t *len)
{
    char *copy = s->text != NULL ? malloc(s->len + 1) : NULL;
    if (copy != NULL) {
        memcpy(copy, s->text, s->len + 1);
        *len = s->len;
    }
    return copy;
}

/* A copy of the snapshot after asking for a fresh one (invariant 2); NULL when there is none.
 * *fresh: 1 when the owner offered one after the request. */
static char *http_snapshot(http_server_t *s, size_t *len, int *fresh)
{
    uint64_t now = http_now_ms();
    pthread_mutex_lock(&s->lock);
    uint64_t before = s->generation;
    int young = s->text != NULL && now - s->offered_ms < HTTP_REUSE_MS;
    int ask = !young && (s->asked_ms == 0 || now - s->asked_ms >= HTTP_FRESH_WAIT_MS);
    if (ask)
        s->asked_ms = now != 0 ? now : 1;
    if (young) { /* invariant 2 */
        char *copy = http_copy_locked(s, len);
        pthread_mutex_unlock(&s->lock);
        *fresh = 1;
        return copy;
    }
    pthread_mutex_unlock(&s->lock);
    if (ask)
        s->refresh(s->ctx);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += HTTP_FRESH_WAIT_MS / 1000;
    until.tv_nsec += (long)(HTTP_FRESH_WAIT_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    while (s->generation == before) {
        if (pthread_cond_timedwait(&s->cond, &s->lock, &until) == ETIMEDOUT)
            break;
    }
    *fresh = s->generation != before;
    char *copy = http_copy_locked(s, len);
    pthread_mutex_unlock(&s->lock);
    return copy;
}

static enum MHD_Result http_send(struct MHD_Connection *conn, unsigned code, const char *type,
                                 char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result http_plain(struct MHD_Connection *conn, unsigned code, const char *msg)
{
    char *body = strdup(msg);
    return body != NULL ? http_send(conn, code, "text/plain; charset=utf-8", body, strlen(body))
                        : MHD_NO;
}

static enum MHD_Result http_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **req_ctx)
{
    (void)version;
    (void)upload_data;
    http_server_t *s = cls;
    static int first_call;
    if (*req_ctx == NULL) { /* the headers are in (invariant 3) */
        *req_ctx = &first_call;
        /* refused now, before any body: libmicrohttpd takes no answer while one is arriving,
         * and closes the connection after this one instead of reading the body */
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
            return http_plain(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        const char *clen =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if ((clen != NULL && strspn(clen, "0") != strlen(clen)) ||
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) !=
                NULL)
            return http_plain(conn, MHD_HTTP_CONTENT_TOO_LARGE, "a request body is not read\n");
        return MHD_YES;
    }
    *upload_data_size = 0;
    if (strcmp(url, "/") == 0)
        return http_plain(conn, MHD_HTTP_OK,
                          "lanesched: the figures are at /metrics, health at /healthz and "
                          "/livez\n");
    int live = strcmp(url, "/livez") == 0, health = strcmp(url, "/healthz") == 0;
    if (strcmp(url, "/metrics") != 0 && !live && !health)
        return http_plain(conn, MHD_HTTP_NOT_FOUND, "not found; try /metrics or /healthz\n");
    size_t len = 0;
    int fresh = 0;
    char *text = http_snapshot(s, &len, &fresh);
    if (live || health) { /* invariant 4 */
        free(text);
        char why[256] = "ok";
        if (!fresh)
            snprintf(why, sizeof(why),
                     "the daemon's owner thread did not answer within %d ms (starting, waiting "
                     "for NATS, or stuck)",
                     HTTP_FRESH_WAIT_MS);
        pthread_mutex_lock(&s->lock);
        http_health_fn check = s->health;
        void *check_ctx = s->health_ctx;
        pthread_mutex_unlock(&s->lock);
        if (fresh && health && check != NULL && check(check_ctx, why, sizeof(why)) != 0)
            fresh = 0;
        char body[300];
        snprintf(body, sizeof(body), "%s\n", why);
        return http_plain(conn, fresh ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body);
    }
    if (text == NULL)
        return http_plain(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "no figures yet: the daemon is starting (waiting for NATS?)\n");
    return http_send(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

/* Invariant 5: a connection from elsewhere than 127.0.0.1 or ::1 is refused while only the
 * local reserve is left. */
static enum MHD_Result http_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    http_server_t *s = cls;
    static const uint8_t v6_loopback[16] = {[15] = 1};
    int local = (addr->sa_family == AF_INET && addrlen >= sizeof(struct sockaddr_in) &&
                 ((const struct sockaddr_in *)addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK)) ||
                (addr->sa_family == AF_INET6 && addrlen >= sizeof(struct sockaddr_in6) &&
                 memcmp(&((const struct sockaddr_in6 *)addr)->sin6_addr, v6_loopback, 16) == 0);
    return local || atomic_load(&s->open) < HTTP_CONNECTIONS_MAX - HTTP_CONNECTIONS_LOCAL ? MHD_YES
                                                                                          : MHD_NO;
}

static void http_notify(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                        enum MHD_ConnectionNotificationCode code)
{
    (void)conn;
    (void)socket_ctx;
    http_server_t *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&s->open, 1);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        atomic_fetch_sub(&s->open, 1);
}

/* libmicrohttpd's own messages go through the process's logger (redaction, JSON lines), the
 * 1st, 2nd, 4th, 8th ... of them: each names one client's connection, so a client opening
 * and dropping connections could otherwise write the log as fast as it connects. */
static void http_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    static _Atomic uint64_t seen;
    uint64_t n = atomic_fetch_add(&seen, 1) + 1;
    if ((n & (n - 1)) != 0)
        return;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    log_write(LOG_WARN, "metrics HTTP server: %s (%" PRIu64 " messages so far)", msg, n);
}

/* "ADDR:PORT", "[V6]:PORT" or ":PORT" into a socket address. */
static http_status_t http_addr(const char *listen, struct sockaddr_storage *out, int *port)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon[1] == '\0' || (size_t)(colon - listen) >= sizeof(host))
        return HTTP_EADDR;
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p < 0 || p > 65535)
        return HTTP_EADDR;
    size_t hlen = (size_t)(colon - listen);
    memcpy(host, listen, hlen);
    host[hlen] = '\0';
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        memmove(host, host + 1, hlen - 2);
        host[hlen - 2] = '\0';
    }
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host[0] != '\0' ? host : NULL, colon + 1, &hints, &ai) != 0 || ai == NULL)
        return HTTP_EADDR;
    memset(out, 0, sizeof(*out));
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    *port = (int)p;
    return HTTP_OK;
}

http_status_t http_listen_check(const char *listen)
{
    struct sockaddr_storage sa;
    int port = 0;
    return http_addr(listen, &sa, &port);
}

http_status_t http_server_start(const char *listen, http_refresh_fn refresh, void *ctx,
                                http_server_t **out)
{
    struct sockaddr_storage sa;
    int port = 0;
    http_status_t st = http_addr(listen, &sa, &port);
    if (st != HTTP_OK)
        return st;
    http_server_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return HTTP_ENOMEM;
    s->refresh = refresh;
    s->ctx = ctx;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    /* MHD_USE_AUTO: epoll or poll, never select(), which refuses every connection once the
     * process holds FD_SETSIZE descriptors (the store holds one per model's segment) */
    unsigned flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* the logger first: libmicrohttpd warns about every option that comes before it */
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)port, http_accept, s, http_handle, s, MHD_OPTION_EXTERNAL_LOGGER, http_log,
        NULL, MHD_OPTION_NOTIFY_CONNECTION, http_notify, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, HTTP_IDLE_S,
        MHD_OPTION_THREAD_POOL_SIZE, HTTP_THREADS, MHD_OPTION_CONNECTION_LIMIT,
        HTTP_CONNECTIONS_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT, HTTP_CONNECTIONS_PER_IP,
        MHD_OPTION_END);
    if (s->mhd == NULL) {
        http_server_stop(s);
        return HTTP_ELISTEN;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info != NULL && info->port != 0 ? info->port : port;
    *out = s;
    return HTTP_OK;
}

int http_server_port(const http_server_t *s)
{
    return s->port;
}

void http_server_health_set(http_server_t *s, http_health_fn health, void *ctx)
{
    pthread_mutex_lock(&s->lock);
    s->health = health;
    s->health_ctx = ctx;
    pthread_mutex_unlock(&s->lock);
}

void http_server_stop(http_server_t *s)
{
    if (s == NULL)
        return;
    if (s->mhd != NULL)
        MHD_stop_daemon(s->mhd);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s->text);
    free(s);
}
