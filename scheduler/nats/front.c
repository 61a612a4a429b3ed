/*
 * front.c - the NATS front: with main.c, the only daemon code that talks to nats.c.
 *
 * Owns the connection and the subscriptions. Every callback copies the message into an event
 * for the owner thread and returns; it never touches scheduling state.
 *
 * Invariants:
 *   1. No silent drops: every subscription's pending limits are lifted (core NATS would
 *      otherwise drop a burst past 65,536 messages per subscription with only a slow-consumer
 *      error), and if the library still reports a slow consumer, the drop count is read,
 *      logged and counted.
 *   2. A disconnect of the daemon's own connection is an event for the owner, which treats
 *      every consumer it served as disconnected (their batches return to the queue).
 *   3. The owner's publishes go straight to natsConnection_Publish, which is thread-safe; a
 *      return of 0 means the connection took the message (the commit rule hangs on it).
 *
 * Rejected: nats.c's micro-service module (not in nats.c 3.4), and queue-group subscriptions
 * (one daemon instance owns each model's scheduling state; several instances split models
 * with --models instead).
 */
#include "scheduler/nats/front.h"

#include "common/log.h"

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRONT_MAX_SUBS 64

typedef struct {
    front_t *front;
    ev_kind_t kind;
    size_t token_at; /* the subject's token starts here ("lanes.ack." is 10) */
} front_sub_t;

struct front {
    daemon_t *d;
    natsConnection *nc;
    natsSubscription *subs[FRONT_MAX_SUBS];
    front_sub_t sub_ctx[FRONT_MAX_SUBS];
    int n_subs;
};

static void front_on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    front_sub_t *s = closure;
    const char *subject = natsMsg_GetSubject(msg);
    const char *token = strlen(subject) > s->token_at ? subject + s->token_at : "";
    if (daemon_post(s->front->d, s->kind, token, natsMsg_GetReply(msg), natsMsg_GetData(msg),
                    (size_t)natsMsg_GetDataLength(msg)) != 0)
        log_write(LOG_ERROR, "out of memory: a message on %s was dropped", subject);
    natsMsg_Destroy(msg);
}

static void front_on_disconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    front_t *f = closure;
    if (daemon_post(f->d, EV_DISCONNECTED, NULL, NULL, NULL, 0) != 0)
        log_write(LOG_ERROR, "out of memory: the disconnect could not reach the owner");
}

static void front_on_reconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    (void)closure;
    log_write(LOG_INFO, "NATS connection restored");
}

static void front_on_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    (void)nc;
    front_t *f = closure;
    int64_t dropped = 0;
    if (sub != NULL)
        natsSubscription_GetDropped(sub, &dropped);
    log_write(LOG_ERROR, "NATS error: %s (%lld messages dropped on this subscription so far)",
              natsStatus_GetText(err), (long long)dropped);
    if (err == NATS_SLOW_CONSUMER) /* one message dropped per slow-consumer report */
        daemon_dropped_note(f->d);
}

front_t *front_create(daemon_t *d)
{
    front_t *f = calloc(1, sizeof(*f));
    if (f != NULL)
        f->d = d;
    return f;
}

int front_publish(void *ctx, const char *subject, const void *data, size_t len)
{
    front_t *f = ctx;
    natsStatus s = natsConnection_Publish(f->nc, subject, data, (int)len);
    if (s != NATS_OK)
        log_write(LOG_WARN, "publish to %s failed: %s", subject, natsStatus_GetText(s));
    return s == NATS_OK ? 0 : -1;
}

static daemon_status_t front_subscribe(front_t *f, const char *subject, ev_kind_t kind,
                                       size_t token_at)
{
    if (f->n_subs == FRONT_MAX_SUBS)
        return DAEMON_EINVAL;
    front_sub_t *ctx = &f->sub_ctx[f->n_subs];
    *ctx = (front_sub_t){f, kind, token_at};
    natsSubscription *sub = NULL;
    natsStatus s = natsConnection_Subscribe(&sub, f->nc, subject, front_on_msg, ctx);
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(sub, -1, -1); /* invariant 1 */
    if (s != NATS_OK) {
        log_write(LOG_ERROR, "cannot subscribe to %s: %s", subject, natsStatus_GetText(s));
        natsSubscription_Destroy(sub);
        return DAEMON_ENATS;
    }
    f->subs[f->n_subs++] = sub;
    log_write(LOG_DEBUG, "subscribed to %s", subject);
    return DAEMON_OK;
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
    if (s == NATS_OK && (cfg->tls_ca != NULL || cfg->tls_cert != NULL))
        s = natsOptions_SetSecure(opts, true);
    if (s == NATS_OK && cfg->tls_ca != NULL)
        s = natsOptions_LoadCATrustedCertificates(opts, cfg->tls_ca);
    if (s == NATS_OK && cfg->tls_cert != NULL)
        s = natsOptions_LoadCertificatesChain(opts, cfg->tls_cert, cfg->tls_key);
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(opts, -1); /* keep trying: consumers resume by pulling */
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(opts, 250);
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(opts, front_on_disconnected, f);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectedCB(opts, front_on_reconnected, f);
    if (s == NATS_OK)
        s = natsOptions_SetErrorHandler(opts, front_on_error, f);
    if (s == NATS_OK)
        s = natsConnection_Connect(&f->nc, opts);
    if (s != NATS_OK) {
        log_write(LOG_ERROR, "cannot connect to NATS at %s: %s", cfg->servers,
                  natsStatus_GetText(s));
        goto out;
    }
    char subject[512];
    const char *p = cfg->prefix;
    size_t plen = strlen(p);
    if (cfg->models == NULL) {
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
    struct {
        const char *verb;
        ev_kind_t kind;
        int wildcard;
    } verbs[] = {{"register", EV_REGISTER, 0}, {"pull", EV_PULL, 1}, {"ack", EV_ACK, 1},
                 {"hb", EV_HEARTBEAT, 1},      {"bye", EV_BYE, 1},   {"stats", EV_STATS, 0}};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        snprintf(subject, sizeof(subject), "%s.%s%s", p, verbs[i].verb,
                 verbs[i].wildcard ? ".*" : "");
        if ((st = front_subscribe(f, subject, verbs[i].kind, plen + strlen(verbs[i].verb) + 2)) !=
            DAEMON_OK)
            goto out;
    }
    s = natsConnection_Flush(f->nc);
    st = s == NATS_OK ? DAEMON_OK : DAEMON_ENATS;
out:
    natsOptions_Destroy(opts);
    free(servers);
    return st;
}

uint32_t front_payload_cap(front_t *f, uint32_t configured)
{
    int64_t server = natsConnection_GetMaxPayload(f->nc);
    if (server <= DAEMON_BATCH_OVERHEAD)
        return configured;
    uint64_t cap = (uint64_t)server - DAEMON_BATCH_OVERHEAD;
    if (configured != 0 && configured <= cap)
        return configured;
    log_write(LOG_INFO,
              "--max-payload lowered to %llu bytes: the server carries at most %lld bytes "
              "per message, and a batch of one item must fit",
              (unsigned long long)cap, (long long)server);
    return (uint32_t)cap;
}

uint64_t front_server_max_payload(front_t *f)
{
    int64_t server = f->nc != NULL ? natsConnection_GetMaxPayload(f->nc) : 0;
    return server > 0 ? (uint64_t)server : 0;
}

void front_unsubscribe(front_t *f)
{
    for (int i = 0; i < f->n_subs; i++) {
        natsSubscription_Unsubscribe(f->subs[i]);
    }
    if (f->nc != NULL)
        natsConnection_Flush(f->nc);
}

void front_destroy(front_t *f)
{
    if (f == NULL)
        return;
    for (int i = 0; i < f->n_subs; i++)
        natsSubscription_Destroy(f->subs[i]);
    if (f->nc != NULL) {
        natsConnection_Close(f->nc);
        natsConnection_Destroy(f->nc);
    }
    /* nats.c delivers the disconnect of its own close on a callback thread later: wait for
     * every library thread to finish before the front (and then the daemon) is freed. */
    if (nats_CloseAndWait(5000) != NATS_OK)
        log_write(LOG_WARN, "the NATS library did not stop within 5 s");
    free(f);
}
