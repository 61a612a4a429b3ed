/*
 * service.c - lanesched as a NATS service (the micro-service protocol of nats ADR-32): the
 * replies to $SRV.PING, $SRV.INFO and $SRV.STATS, and the per-endpoint request and error counts
 * that STATS reports.
 *
 * The front subscribes $SRV.<verb>, $SRV.<verb>.lanesched and $SRV.<verb>.lanesched.<id> for
 * each verb with no queue group, so every instance answers a request-many (the name and id
 * filters are the subscriptions themselves); the owner answers here, from its own counters.
 *
 * Invariants:
 *   1. Every reply carries type (io.nats.micro.v1.<verb>_response), name "lanesched", the
 *      instance id, the release version (SemVer) and metadata with the protocol version.
 *   2. The endpoints are the request/reply subjects of subjects.md (submit, one per model with
 *      --models, register twice: P.register and P.register.>, pull, ack, stats, metrics), fixed
 *      at create: INFO and STATS list the same ones in the same order.
 *   3. A request counts once, for the endpoint of its subject, when the owner handles it; its
 *      processing time is the owner's time on it. An error is a reply that refused something
 *      (a whole message, or any item of a Submit); last_error is its code word and text.
 *
 * Rejected: answering $SRV in the front's callback threads. The counts and times live on the
 * owner, and a reply from elsewhere would need a lock on them.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/log.h"
#include "common/version.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SERVICE_NAME        "lanesched"
#define SERVICE_DESCRIPTION "batch scheduler for LLM-serving GPUs (subjects.md is the contract)"

static daemon_status_t service_add(struct daemon *d, const char *name, const char *subject,
                                   ev_kind_t kind)
{
    service_endpoint_t *grown = realloc(d->service.eps, (d->service.n + 1) * sizeof(*grown));
    if (grown == NULL)
        return DAEMON_ENOMEM;
    d->service.eps = grown;
    service_endpoint_t *e = &grown[d->service.n++];
    memset(e, 0, sizeof(*e));
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->subject, sizeof(e->subject), "%s", subject);
    e->kind = kind;
    return DAEMON_OK;
}

daemon_status_t service_init(struct daemon *d)
{
    const char *p = d->cfg.prefix;
    char subject[sizeof(((service_endpoint_t *)0)->subject)];
    daemon_status_t st = DAEMON_OK;
    if (d->cfg.models == NULL) {
        snprintf(subject, sizeof(subject), "%s.submit.>", p);
        st = service_add(d, "submit", subject, EV_SUBMIT);
    }
    for (const char *m = d->cfg.models; m != NULL && st == DAEMON_OK;) {
        const char *comma = strchr(m, ',');
        int len = comma != NULL ? (int)(comma - m) : (int)strlen(m);
        snprintf(subject, sizeof(subject), "%s.submit.%.*s", p, len, m);
        st = service_add(d, "submit", subject, EV_SUBMIT);
        m = comma != NULL ? comma + 1 : NULL;
    }
    static const struct {
        const char *name, *suffix;
        ev_kind_t kind;
    } rest[] = {{"register", "register", EV_REGISTER}, {"register", "register.>", EV_REGISTER},
                {"pull", "pull.*", EV_PULL},           {"ack", "ack.*", EV_ACK},
                {"stats", "stats", EV_STATS},          {"metrics", "metrics", EV_METRICS}};
    for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]) && st == DAEMON_OK; i++) {
        snprintf(subject, sizeof(subject), "%s.%s", p, rest[i].suffix);
        st = service_add(d, rest[i].name, subject, rest[i].kind);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(d->service.started, sizeof(d->service.started), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts.tv_nsec / 1000000);
    return st;
}

void service_fini(struct daemon *d)
{
    free(d->service.eps);
    d->service.eps = NULL;
    d->service.n = 0;
}

/* The endpoint a message of this kind (for submits, of this model; for registers, of the subject
 * form the token shows) belongs to; NULL for kinds that are not endpoints (heartbeats, byes,
 * internal events). */
static service_endpoint_t *service_endpoint(struct daemon *d, ev_kind_t kind, const char *token)
{
    service_endpoint_t *first = NULL;
    size_t plen = strlen(d->cfg.prefix) + strlen(".submit.");
    for (size_t i = 0; i < d->service.n; i++) {
        service_endpoint_t *e = &d->service.eps[i];
        if (e->kind != kind)
            continue;
        if (first == NULL)
            first = e;
        if (kind == EV_SUBMIT && d->cfg.models != NULL && token != NULL &&
            strcmp(e->subject + plen, token) == 0)
            return e;
        if (kind == EV_REGISTER && token != NULL && token[0] != '\0' &&
            e->subject[strlen(e->subject) - 1] == '>') /* P.register.<model> */
            return e;
    }
    return first;
}

void service_note(struct daemon *d, const ev_t *ev, uint64_t ns)
{
    if (ev->kind == EV_METRICS_SNAPSHOT)
        return; /* a snapshot for the HTTP server, not a request */
    service_endpoint_t *e = service_endpoint(d, ev->kind, ev->token);
    if (e == NULL)
        return;
    e->requests++;
    e->processing_ns += ns;
}

void service_error(struct daemon *d, ev_kind_t kind, const char *token, const char *error)
{
    service_endpoint_t *e = service_endpoint(d, kind, token);
    if (e == NULL)
        return;
    e->errors++;
    snprintf(e->last_error, sizeof(e->last_error), "%s", error);
}

/* The fields every reply has (invariant 1). */
static json_t *service_base(struct daemon *d, const char *type)
{
    char protocol[16];
    snprintf(protocol, sizeof(protocol), "%d", VERSION_PROTOCOL);
    return json_pack("{s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s}}", "type", type, "name", SERVICE_NAME, "id",
                     d->instance_id, "version", version_string(), "metadata", "protocol_version",
                     protocol, "prefix", d->cfg.prefix, "models",
                     d->cfg.models != NULL ? d->cfg.models : "");
}

static json_t *service_endpoints(struct daemon *d, int stats)
{
    json_t *all = json_array();
    for (size_t i = 0; all != NULL && i < d->service.n; i++) {
        const service_endpoint_t *e = &d->service.eps[i];
        json_t *one = json_pack("{s:s,s:s,s:s,s:{}}", "name", e->name, "subject", e->subject,
                                "queue_group", "", "metadata");
        if (one != NULL && stats) {
            json_object_set_new(one, "num_requests", json_integer((json_int_t)e->requests));
            json_object_set_new(one, "num_errors", json_integer((json_int_t)e->errors));
            json_object_set_new(one, "processing_time", json_integer((json_int_t)e->processing_ns));
            json_object_set_new(
                one, "average_processing_time",
                json_integer(e->requests ? (json_int_t)(e->processing_ns / e->requests) : 0));
            if (e->last_error[0] != '\0')
                json_object_set_new(one, "last_error", json_string(e->last_error));
        }
        json_array_append_new(all, one);
    }
    return all;
}

void service_reply(struct daemon *d, const ev_t *ev)
{
    if (ev->reply == NULL)
        return;
    size_t verb_len = strcspn(ev->token, ".");
    json_t *doc = NULL;
    if (verb_len == 4 && strncmp(ev->token, "PING", 4) == 0) {
        doc = service_base(d, "io.nats.micro.v1.ping_response");
    } else if (verb_len == 4 && strncmp(ev->token, "INFO", 4) == 0) {
        doc = service_base(d, "io.nats.micro.v1.info_response");
        if (doc != NULL) {
            json_object_set_new(doc, "description", json_string(SERVICE_DESCRIPTION));
            json_object_set_new(doc, "endpoints", service_endpoints(d, 0));
        }
    } else if (verb_len == 5 && strncmp(ev->token, "STATS", 5) == 0) {
        doc = service_base(d, "io.nats.micro.v1.stats_response");
        if (doc != NULL) {
            json_object_set_new(doc, "started", json_string(d->service.started));
            json_object_set_new(doc, "endpoints", service_endpoints(d, 1));
        }
    } else {
        return; /* not a verb of the protocol: nothing to say */
    }
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (text == NULL) {
        log_write(LOG_WARN, "out of memory: a $SRV.%s request was not answered", ev->token);
        return;
    }
    daemon_publish(d, ev->reply, (uint8_t *)text, strlen(text)); /* jansson's malloc: freed */
}
