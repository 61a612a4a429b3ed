/*
 * watch.c - lanesched-ctl watch [SUBJECT]: subscribes to <prefix>.> (or SUBJECT) and, unless
 * --no-replies, to _INBOX.>, and prints every lanesched message as one JSON line:
 *
 *   {"time":"...Z","subject":"lanes.submit.llama","reply":"_INBOX.x.1","kind":"submit",
 *    "message":{"items":[{"id":"req-1","model":"llama","signature":"0x91f4...","tokens":120,
 *    "payload_bytes":5,"payload":"hello","reply_to":"results.1","created_unix_ns":...,
 *    "prefix_tokens":300,"max_wait_ms":2000}]}}  (the last three only when set)
 *
 * The kind comes from the subject (submit, register, pull, ack, heartbeat, bye, stats, metrics,
 * dead_letter, service); a reply's kind from the request it answers (submit_reply, registered,
 * batch, ack_reply, stats_reply, metrics_reply, service_reply), remembered by its reply subject.
 *
 * Invariants:
 *   1. One line per message, valid JSON whatever the bytes: ids and payloads that are UTF-8
 *      text are strings, others are written as hex ("0x..."); payloads are cut at
 *      WATCH_PAYLOAD_MAX bytes (payload_bytes keeps the size).
 *   2. A request is seen before its reply: the connection delivers every subscription's
 *      messages on one thread, in the order the server sent them (ctl_connect's one_thread).
 *   3. Reads only; it never answers or publishes anything.
 *
 * Rejected: printing protobuf text format (not one line, and no JSON tool reads it), and
 * decoding inbox messages by trying each message type (protobuf bytes decode as several).
 */
#include "tools/ctl/ctl.h"

#include "codec/codec.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Payload bytes shown per item: enough to recognise a prompt, short enough for a terminal. */
#define WATCH_PAYLOAD_MAX 96
/* Reply subjects remembered; the oldest is forgotten first (a pull's inbox is refreshed by each
 * pull naming it, so a live consumer's batches keep their kind). */
#define WATCH_REPLIES_MAX 4096

typedef struct {
    char *subject; /* owned */
    const char *kind;
    int once; /* forgotten after the first reply (every kind but batches) */
} watch_reply_t;

typedef struct {
    const char *prefix;
    size_t plen;
    watch_reply_t replies[WATCH_REPLIES_MAX];
    size_t next;
    pthread_mutex_t lock;
} watch_t;

static volatile sig_atomic_t watch_stop;

static void watch_on_signal(int sig)
{
    (void)sig;
    watch_stop = 1;
}

/* ---- JSON values ------------------------------------------------------------------------ */

static json_t *watch_hex(const uint8_t *p, size_t n)
{
    char *s = malloc(2 * n + 3);
    if (s == NULL)
        return json_null();
    strcpy(s, "0x");
    for (size_t i = 0; i < n; i++)
        sprintf(s + 2 + 2 * i, "%02x", p[i]);
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* Bytes as a string when they are UTF-8 text without NUL, else hex (invariant 1). */
static json_t *watch_bytes(const uint8_t *p, size_t n)
{
    json_t *j = NULL;
    if (n != 0 && memchr(p, 0, n) == NULL)
        j = json_stringn((const char *)p, n); /* NULL when not UTF-8 */
    return j != NULL ? j : n == 0 ? json_string("") : watch_hex(p, n);
}

static json_t *watch_sig(uint64_t sig)
{
    char hex[19];
    snprintf(hex, sizeof(hex), "0x%016" PRIx64, sig);
    return json_string(hex);
}

/* payload_bytes and the first WATCH_PAYLOAD_MAX bytes of it (text, or hex when they are not). */
static void watch_payload(json_t *obj, codec_bytes_t payload)
{
    size_t shown = payload.len < WATCH_PAYLOAD_MAX ? payload.len : WATCH_PAYLOAD_MAX;
    json_object_set_new(obj, "payload_bytes", json_integer((json_int_t)payload.len));
    json_object_set_new(obj, "payload", watch_bytes(payload.ptr, shown));
}

/* ---- messages ------------------------------------------------------------------------------ */

static json_t *watch_submit(const void *data, size_t len, const char **err)
{
    codec_submit_t *s = NULL;
    codec_status_t st = codec_decode_submit(data, len, NULL, &s);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    json_t *items = json_array();
    for (size_t i = 0; i < s->n_items; i++) {
        const codec_work_item_t *it = &s->items[i];
        json_t *o = json_pack("{s:o,s:s,s:I}", "id", watch_bytes(it->id.ptr, it->id.len), "model",
                              it->model, "tokens", (json_int_t)it->tokens);
        if (it->has_signature)
            json_object_set_new(o, "signature", watch_sig(it->signature));
        if (it->n_component_hashes != 0) {
            json_t *h = json_array();
            for (size_t k = 0; k < it->n_component_hashes; k++)
                json_array_append_new(h, watch_sig(it->component_hashes[k]));
            json_object_set_new(o, "component_hashes", h);
        }
        watch_payload(o, it->payload);
        if (it->reply_to[0] != '\0')
            json_object_set_new(o, "reply_to", json_string(it->reply_to));
        if (it->created_unix_ns != 0)
            json_object_set_new(o, "created_unix_ns",
                                json_integer((json_int_t)it->created_unix_ns));
        if (it->prefix_tokens != 0)
            json_object_set_new(o, "prefix_tokens", json_integer((json_int_t)it->prefix_tokens));
        if (it->max_wait_ms != 0)
            json_object_set_new(o, "max_wait_ms", json_integer((json_int_t)it->max_wait_ms));
        if (it->status != CODEC_OK) /* what the daemon will answer */
            json_object_set_new(o, "invalid", json_string(codec_status_reason(it->status)));
        json_array_append_new(items, o);
    }
    codec_submit_destroy(s);
    return json_pack("{s:o}", "items", items);
}

static json_t *watch_submit_reply(const void *data, size_t len, const char **err)
{
    codec_submit_reply_t *r = NULL;
    codec_status_t st = codec_decode_submit_reply(data, len, &r);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    static const char *const names[] = {"ACCEPTED", "DUPLICATE", "REJECTED"};
    json_t *results = json_array();
    for (size_t i = 0; i < r->n_results; i++) {
        const codec_item_result_t *x = &r->results[i];
        json_t *o = json_pack("{s:o,s:s,s:s}", "id", watch_bytes(x->id.ptr, x->id.len), "status",
                              x->status <= 2 ? names[x->status] : "?", "reason", x->reason);
        if (x->error[0] != '\0')
            json_object_set_new(o, "error", json_string(x->error));
        json_array_append_new(results, o);
    }
    json_t *doc = json_pack("{s:o}", "results", results);
    if (r->error[0] != '\0')
        json_object_set_new(doc, "error", json_string(r->error));
    codec_submit_reply_destroy(r);
    return doc;
}

static json_t *watch_register(const void *data, size_t len, const char **err)
{
    codec_register_t *r = NULL;
    codec_status_t st = codec_decode_register(data, len, NULL, &r);
    if (st != CODEC_OK) { /* the daemon refuses it with this word */
        *err = codec_status_reason(st);
        return NULL;
    }
    json_t *doc = json_pack("{s:s,s:I,s:I,s:I,s:s}", "model", r->model, "max_batch_size",
                            (json_int_t)r->max_batch_size, "max_batch_tokens",
                            (json_int_t)r->max_batch_tokens, "max_input_tokens",
                            (json_int_t)r->max_input_tokens, "name", r->name);
    codec_register_destroy(r);
    return doc;
}

static json_t *watch_registered(const void *data, size_t len, const char **err)
{
    codec_registered_t *r = NULL;
    codec_status_t st = codec_decode_registered(data, len, &r);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    json_t *doc = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "consumer_id", r->consumer_id, "pull_subject",
        r->pull_subject, "ack_subject", r->ack_subject, "heartbeat_subject", r->heartbeat_subject,
        "bye_subject", r->bye_subject, "heartbeat_ms", (json_int_t)r->heartbeat_ms, "dead_after_ms",
        (json_int_t)r->dead_after_ms, "ack_wait_ms", (json_int_t)r->ack_wait_ms, "protocol_version",
        (json_int_t)r->protocol_version);
    if (r->error[0] != '\0')
        json_object_set_new(doc, "error", json_string(r->error));
    codec_registered_destroy(r);
    return doc;
}

static json_t *watch_batch(const void *data, size_t len, const char **err)
{
    codec_batch_t *b = NULL;
    codec_status_t st = codec_decode_batch(data, len, &b);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    static const char *const names[] = {"OK", "EXPIRED", "ERROR"};
    json_t *doc = json_pack("{s:s}", "status", b->status <= 2 ? names[b->status] : "?");
    if (b->status == CODEC_BATCH_OK || b->n_items != 0) {
        uint64_t real = 0;
        json_t *items = json_array();
        for (size_t i = 0; i < b->n_items; i++) {
            const codec_batch_item_t *it = &b->items[i];
            real += it->tokens;
            json_t *o =
                json_pack("{s:o,s:I,s:I}", "id", watch_bytes(it->id.ptr, it->id.len), "tokens",
                          (json_int_t)it->tokens, "deliveries", (json_int_t)it->deliveries);
            watch_payload(o, it->payload);
            if (it->reply_to[0] != '\0')
                json_object_set_new(o, "reply_to", json_string(it->reply_to));
            json_array_append_new(items, o);
        }
        uint64_t padded = (uint64_t)b->n_items * b->pad_to;
        json_object_set_new(doc, "batch_id", json_integer((json_int_t)b->batch_id));
        json_object_set_new(doc, "model", json_string(b->model));
        json_object_set_new(doc, "signature", watch_sig(b->signature));
        json_object_set_new(doc, "lane", json_integer(b->lane));
        json_object_set_new(doc, "pad_to", json_integer(b->pad_to));
        json_object_set_new(doc, "padding_waste",
                            json_real(padded ? (double)(padded - real) / (double)padded : 0));
        json_object_set_new(doc, "items", items);
    }
    if (b->error[0] != '\0')
        json_object_set_new(doc, "error", json_string(b->error));
    codec_batch_destroy(b);
    return doc;
}

static json_t *watch_pull(const void *data, size_t len, const char **err)
{
    codec_pull_t *p = NULL;
    codec_status_t st = codec_decode_pull(data, len, &p);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    json_t *doc = json_pack("{s:I,s:I}", "max_batches", (json_int_t)p->max_batches, "expires_ms",
                            (json_int_t)p->expires_ms);
    codec_pull_destroy(p);
    return doc;
}

static json_t *watch_positions(const uint32_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *watch_ack(const void *data, size_t len, const char **err)
{
    codec_ack_t *a = NULL;
    codec_status_t st = codec_decode_ack(data, len, &a);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    json_t *doc = json_pack("{s:I,s:b,s:o,s:o,s:b}", "batch_id", (json_int_t)a->batch_id, "all",
                            a->all, "ack", watch_positions(a->ack, a->n_ack), "nak",
                            watch_positions(a->nak, a->n_nak), "in_progress", a->in_progress);
    codec_ack_destroy(a);
    return doc;
}

static json_t *watch_ack_reply(const void *data, size_t len, const char **err)
{
    codec_ack_reply_t *r = NULL;
    codec_status_t st = codec_decode_ack_reply(data, len, &r);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    json_t *doc = json_pack("{s:I,s:I,s:I}", "acked", (json_int_t)r->acked, "returned",
                            (json_int_t)r->returned, "unknown", (json_int_t)r->unknown);
    if (r->error[0] != '\0')
        json_object_set_new(doc, "error", json_string(r->error));
    codec_ack_reply_destroy(r);
    return doc;
}

static json_t *watch_heartbeat(const void *data, size_t len, const char **err)
{
    codec_heartbeat_t *h = NULL;
    codec_status_t st = codec_decode_heartbeat(data, len, &h);
    if (st != CODEC_OK) {
        *err = codec_status_reason(st);
        return NULL;
    }
    json_t *ids = json_array();
    for (size_t i = 0; i < h->n_in_progress; i++)
        json_array_append_new(ids, json_integer((json_int_t)h->in_progress[i]));
    codec_heartbeat_destroy(h);
    return json_pack("{s:o}", "in_progress", ids);
}

/* A JSON document as it is, or its text when it is not JSON. */
static json_t *watch_json(const void *data, size_t len, const char **err)
{
    (void)err;
    json_t *doc = len != 0 ? json_loadb(data, len, 0, NULL) : NULL;
    return doc != NULL ? doc : watch_bytes(data, len);
}

/* Prometheus text: its size only (it is long and already text). */
static json_t *watch_text(const void *data, size_t len, const char **err)
{
    (void)data;
    (void)err;
    return json_pack("{s:I}", "bytes", (json_int_t)len);
}

/* Anything that is not read (bye bodies, stats requests): its size. */
static json_t *watch_size(const void *data, size_t len, const char **err)
{
    return watch_text(data, len, err);
}

typedef json_t *(*watch_decode_fn)(const void *data, size_t len, const char **err);

static const struct {
    const char *kind;
    watch_decode_fn decode;
} watch_kinds[] = {
    {"submit", watch_submit},
    {"submit_reply", watch_submit_reply},
    {"register", watch_register},
    {"registered", watch_registered},
    {"pull", watch_pull},
    {"batch", watch_batch},
    {"ack", watch_ack},
    {"ack_reply", watch_ack_reply},
    {"heartbeat", watch_heartbeat},
    {"bye", watch_size},
    {"stats", watch_size},
    {"stats_reply", watch_json},
    {"metrics", watch_size},
    {"metrics_reply", watch_text},
    {"dead_letter", watch_batch},
    {"service", watch_size},
    {"service_reply", watch_json},
    {"other", watch_size},
};

/* ---- subjects ------------------------------------------------------------------------------ */

/* The kind of a message on subject and the kind of its reply (NULL: none expected). */
static const char *watch_kind_of(const watch_t *w, const char *subject, const char **reply_kind,
                                 int *once)
{
    static const struct {
        const char *verb, *kind, *reply;
        int once;
    } verbs[] = {{"submit.", "submit", "submit_reply", 1},
                 {"register.", "register", "registered", 1},
                 {"register", "register", "registered", 1},
                 {"pull.", "pull", "batch", 0},
                 {"ack.", "ack", "ack_reply", 1},
                 {"hb.", "heartbeat", NULL, 1},
                 {"bye.", "bye", "ack_reply", 1},
                 {"stats", "stats", "stats_reply", 1},
                 {"metrics", "metrics", "metrics_reply", 1},
                 {"dead.", "dead_letter", NULL, 1}};
    *reply_kind = NULL;
    *once = 1;
    if (strncmp(subject, "$SRV.", 5) == 0) { /* every instance answers: many replies */
        *reply_kind = "service_reply";
        *once = 0;
        return "service";
    }
    if (strncmp(subject, w->prefix, w->plen) != 0 || subject[w->plen] != '.')
        return NULL;
    const char *rest = subject + w->plen + 1;
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        size_t n = strlen(verbs[i].verb);
        if (strncmp(rest, verbs[i].verb, n) == 0 &&
            (verbs[i].verb[n - 1] == '.' || rest[n] == '\0')) {
            *reply_kind = verbs[i].reply;
            *once = verbs[i].once;
            return verbs[i].kind;
        }
    }
    return "other";
}

static void watch_remember(watch_t *w, const char *reply, const char *kind, int once)
{
    for (size_t i = 0; i < WATCH_REPLIES_MAX; i++) {
        if (w->replies[i].subject != NULL && strcmp(w->replies[i].subject, reply) == 0) {
            w->replies[i].kind = kind;
            w->replies[i].once = once;
            return;
        }
    }
    watch_reply_t *r = &w->replies[w->next];
    w->next = (w->next + 1) % WATCH_REPLIES_MAX;
    free(r->subject);
    *r = (watch_reply_t){strdup(reply), kind, once};
}

/* The kind of a reply seen on subject, forgetting a one-shot one; NULL when unknown. */
static const char *watch_recall(watch_t *w, const char *subject)
{
    for (size_t i = 0; i < WATCH_REPLIES_MAX; i++) {
        watch_reply_t *r = &w->replies[i];
        if (r->subject != NULL && strcmp(r->subject, subject) == 0) {
            const char *kind = r->kind;
            if (r->once) {
                free(r->subject);
                r->subject = NULL;
            }
            return kind;
        }
    }
    return NULL;
}

static void watch_print(const char *kind, const char *subject, const char *reply, const void *data,
                        size_t len)
{
    const char *err = NULL;
    json_t *msg = NULL;
    for (size_t i = 0; i < sizeof(watch_kinds) / sizeof(watch_kinds[0]); i++) {
        if (strcmp(watch_kinds[i].kind, kind) == 0)
            msg = watch_kinds[i].decode(data, len, &err);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    json_t *line = json_pack("{s:s,s:s,s:s?,s:s}", "time", when, "subject", subject, "reply", reply,
                             "kind", kind);
    if (msg != NULL)
        json_object_set_new(line, "message", msg);
    else
        json_object_set_new(line, "undecodable", json_string(err != NULL ? err : "malformed"));
    char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text != NULL) {
        puts(text);
        fflush(stdout);
    }
    free(text);
    json_decref(line);
}

static void watch_on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc;
    (void)sub;
    watch_t *w = closure;
    const char *subject = natsMsg_GetSubject(m), *reply = natsMsg_GetReply(m);
    const void *data = natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    pthread_mutex_lock(&w->lock);
    const char *reply_kind = NULL;
    int once = 1;
    const char *kind = watch_kind_of(w, subject, &reply_kind, &once);
    if (kind != NULL && reply != NULL && reply_kind != NULL)
        watch_remember(w, reply, reply_kind, once);
    if (kind == NULL)
        kind = watch_recall(w, subject); /* a reply of a request seen before (invariant 2) */
    if (kind != NULL)
        watch_print(kind, subject, reply, data, len);
    pthread_mutex_unlock(&w->lock);
    natsMsg_Destroy(m);
}

int ctl_watch(natsConnection *nc, const ctl_opts_t *o, const char *subject)
{
    static watch_t w; /* large: kept off the stack */
    w.prefix = o->conn.prefix;
    w.plen = strlen(w.prefix);
    pthread_mutex_init(&w.lock, NULL);
    char own[300];
    snprintf(own, sizeof(own), "%s.>", w.prefix);
    const char *subjects[3] = {subject != NULL ? subject : own, o->replies ? "_INBOX.>" : NULL,
                               subject == NULL ? "$SRV.>" : NULL};
    natsSubscription *subs[3] = {NULL, NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) {
        if (subjects[i] == NULL)
            continue;
        natsStatus s = natsConnection_Subscribe(&subs[i], nc, subjects[i], watch_on_msg, &w);
        if (s == NATS_OK)
            s = natsSubscription_SetPendingLimits(subs[i], -1, -1);
        if (s != NATS_OK) {
            fprintf(stderr, "lanesched-ctl: cannot subscribe to %s: %s\n", subjects[i],
                    natsStatus_GetText(s));
            rc = 1;
        }
    }
    if (rc == 0 && natsConnection_Flush(nc) == NATS_OK)
        fprintf(stderr, "lanesched-ctl: watching %s%s%s (Ctrl-C to stop)\n", subjects[0],
                subjects[1] ? " and replies on _INBOX.>" : "", subjects[2] ? " and $SRV.>" : "");
    struct sigaction sa = {.sa_handler = watch_on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    while (rc == 0 && !watch_stop)
        nats_Sleep(100);
    /* Drained, not unsubscribed: a message the read loop took before the UNSUB is still handed
     * to watch_on_msg (which frees it) before the subscription goes; after a plain unsubscribe
     * nats.c 3.4 can leave such a message unfreed (nats.c issue #637, fixed in 3.6). */
    for (int i = 0; i < 3; i++) {
        if (subs[i] != NULL && natsSubscription_DrainTimeout(subs[i], 1000) == NATS_OK)
            natsSubscription_WaitForDrainCompletion(subs[i], 2000);
    }
    for (int i = 0; i < 3; i++)
        natsSubscription_Destroy(subs[i]);
    pthread_mutex_lock(&w.lock);
    for (size_t i = 0; i < WATCH_REPLIES_MAX; i++)
        free(w.replies[i].subject);
    pthread_mutex_unlock(&w.lock);
    return rc;
}
