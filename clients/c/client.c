/*
 * client.c - lanesched's C client library (lanes_client.h): subjects, request/reply timing and
 * retries, pull credit bookkeeping and the consumer's heartbeat thread, on top of nats.c and the
 * wire codec.
 *
 * Owns: per client, the NATS connection and a copy of the prefix; per consumer, copies of its
 * configuration strings, its inbox and the synchronous subscription on it, the strings of the
 * current registration, the queue of outstanding pulls, the in-progress set and the heartbeat
 * thread with its mutex and condition variable. Borrows: the client (from each consumer).
 *
 * Invariants:
 *  1. Every wire message is built by codec_encode_* and read by codec_decode_*; nothing here
 *     knows a field number.
 *  2. A request is encoded once; every retry sends those same bytes, so a retried Submit names
 *     the same item ids (the daemon's dedupe stores each once) and a retried Ack is the same
 *     idempotent Ack.
 *  3. Results reach the caller's out pointers only on LC_OK (the in-progress update after
 *     LC_EUNKNOWN_BATCH is the consumer's state, not a result); each function releases what it
 *     allocated through its single `out:` label.
 *  4. consumer->mu guards exactly: the registration strings the heartbeat thread reads and the
 *     heartbeat interval, the in-progress set, hb_stop and the statistics. No NATS call is made
 *     while it is held, so a slow publish never blocks lc_inprogress_* callers.
 *  5. The pull queue holds the outstanding pulls in send order, each with its remaining credits
 *     (the daemon serves a consumer's pulls in order): an OK batch spends one credit of the head,
 *     which leaves at zero; an EXPIRED batch closes the head; unknown_consumer closes them all;
 *     a pull silent one grace second past its expiry is forgotten.
 *  6. Each id appears at most once in the in-progress set; it names the batch until every
 *     position is settled, `all` is sent, the daemon says unknown_batch, or the caller removes it.
 *  7. The heartbeat thread is the only thread besides the caller's that touches a consumer; it is
 *     joined (hb_stop under mu, signal, join) before Bye and before the consumer is freed.
 *  8. Status names and texts come from the one LC_STATUS_MAP.
 *
 * Rejected alternatives:
 *  - natsConnection_Request for pulls: one Pull has several answers and Request keeps the first
 *    only. One inbox per consumer subscribed once carries every pull's batches (the contract
 *    allows several outstanding pulls on one reply subject), with no subscribe churn per pull.
 *  - An asynchronous subscription with a callback delivering batches: the caller would need a
 *    queue and a thread handoff of its own; a synchronous subscription is that queue already.
 *  - Heartbeats sent from lc_batch_next / lc_ack_send in the caller's thread: a long GPU step
 *    would starve them and get a healthy consumer declared dead, the failure the design
 *    document's article describes. A thread of our own sleeps on a condition variable (monotonic
 *    clock) so Bye and close stop it at once rather than after a sleep.
 *  - Re-registering automatically on unknown_consumer: it would hide that the consumer's
 *    in-flight batches went back to the queue; the caller decides (lanesched-consume does).
 *  - Sending a Bye from lc_consumer_close: a caller that wants to look like a crash could not.
 *  - A hash map for the in-progress set: it holds a handful of ids (one per outstanding batch);
 *    a linear scan is smaller and as fast.
 *  - Re-encoding a Submit on retry with a fresh created_unix_ns: a different message for the same
 *    item, and an encode per attempt for nothing.
 */
#include "clients/c/lanes_client.h"

#include "common/clock.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#define LC_ERR_MAX            256
#define LC_REQUEST_TIMEOUT_MS 5000
#define LC_HEARTBEAT_MS       2000u  /* the contract's default when Registered says 0 */
#define LC_PULL_EXPIRES_MS    30000u /* the daemon's default for Pull.expires_ms == 0 */
#define LC_PULL_GRACE_MS      1000   /* after a pull's expiry, how long its EXPIRED may take */
#define LC_BACKOFF_BASE_MS    100
#define LC_BACKOFF_MAX_MS     2000
#define LC_FLUSH_ON_CLOSE_MS  1000

struct lc_client {
    natsConnection *nc;
    char *prefix;
    char err[LC_ERR_MAX];
};

typedef struct {
    uint32_t credits;       /* OK batches still owed by the daemon */
    uint64_t lost_after_ns; /* monotonic: expiry + grace; silent past it = forgotten */
} lc_pull_t;

typedef struct {
    uint64_t batch_id;
    uint32_t n_items; /* 0 = added by hand: only all / unknown_batch / remove clear it */
    uint32_t settled; /* distinct positions acked or nak'd */
    uint8_t *bits;    /* owned; n_items bits, NULL when n_items == 0 */
} lc_inprogress_t;

struct lc_consumer {
    lc_client_t *client;         /* borrowed */
    lc_consumer_config_t config; /* model and name point at the copies below */
    char *model;                 /* owned copy */
    char *name;                  /* owned copy */
    natsInbox *inbox;            /* owned */
    natsSubscription *sub;       /* owned */
    bool registered;
    lc_registered_t reg;  /* strings point at reg_strings; swapped under mu */
    char *reg_strings[5]; /* owned: id, pull, ack, heartbeat, bye */
    lc_pull_t *pulls;     /* owned; caller's thread only */
    size_t n_pulls, cap_pulls;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool sync_ready; /* mu and cond initialised */
    pthread_t hb_thread;
    bool hb_running;         /* caller's thread only */
    bool hb_stop;            /* under mu */
    uint32_t hb_interval_ms; /* under mu */
    lc_inprogress_t *ip;     /* under mu */
    size_t n_ip, cap_ip;
    lc_consumer_stats_t stats; /* under mu */
    char err[LC_ERR_MAX];
};

/* ---- status and small helpers ------------------------------------------------------------- */

STATUS_STR(lc_status_str, lc_status_t, LC_STATUS_MAP, "unknown client status")

/* Whether an error string carries this code word: "code" or "code: text" (subjects.md: clients
 * decide on the word up to the first ':'). */
static int lc_code_is(const char *error, const char *code)
{
    size_t n = strlen(code);
    return error != NULL && strncmp(error, code, n) == 0 && (error[n] == '\0' || error[n] == ':');
}

static void lc_errf(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, LC_ERR_MAX, fmt, ap);
    va_end(ap);
}

static lc_status_t lc_nats_status(natsStatus s)
{
    switch (s) {
    case NATS_OK:
        return LC_OK;
    case NATS_TIMEOUT:
        return LC_ETIMEOUT;
    case NATS_NO_RESPONDERS:
        return LC_ENORESPONDERS;
    case NATS_MAX_PAYLOAD:
        return LC_ETOOBIG;
    case NATS_NO_MEMORY:
        return LC_ENOMEM;
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
        return LC_EINVAL;
    default:
        return LC_ENATS;
    }
}

/* Records "what: nats text (last error)" in err and returns the mapped status. */
static lc_status_t lc_nats_fail(char *err, const char *what, natsStatus s)
{
    natsStatus last = NATS_OK;
    const char *detail = nats_GetLastError(&last);
    if (detail != NULL && detail[0] != '\0' && last == s)
        lc_errf(err, "%s: %s (%s)", what, natsStatus_GetText(s), detail);
    else
        lc_errf(err, "%s: %s", what, natsStatus_GetText(s));
    return lc_nats_status(s);
}

/* Records "[subject: ]what: codec text" in err and returns the mapped status. */
static lc_status_t lc_codec_fail(char *err, const char *subject /* may be NULL */, const char *what,
                                 codec_status_t cs)
{
    if (subject != NULL)
        lc_errf(err, "%s: %s: %s", subject, what, codec_status_str(cs));
    else
        lc_errf(err, "%s: %s", what, codec_status_str(cs));
    return cs == CODEC_ENOMEM ? LC_ENOMEM : LC_ECODEC;
}

static void lc_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* "a.b" or "a.b.c" (c may be NULL), returned to the caller (free). */
static char *lc_subject_make(const char *a, const char *b, const char *c)
{
    size_t len = strlen(a) + 1 + strlen(b) + (c != NULL ? 1 + strlen(c) : 0) + 1;
    char *subject = malloc(len);
    if (subject == NULL)
        return NULL;
    if (c != NULL)
        snprintf(subject, len, "%s.%s.%s", a, b, c);
    else
        snprintf(subject, len, "%s.%s", a, b);
    return subject;
}

/* A string that can stand in a subject: non-empty, no whitespace, no wildcard, no empty token. */
static bool lc_subject_part_ok(const char *s)
{
    if (s == NULL || s[0] == '\0' || s[0] == '.')
        return false;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '*' || *p == '>')
            return false;
        if (*p == '.' && (p[1] == '.' || p[1] == '\0'))
            return false;
    }
    return true;
}

static int64_t lc_backoff_ms(uint32_t attempt, int64_t timeout_ms)
{
    int64_t ms = LC_BACKOFF_BASE_MS << (attempt < 5 ? attempt : 5);
    if (ms > LC_BACKOFF_MAX_MS)
        ms = LC_BACKOFF_MAX_MS;
    if (ms > timeout_ms)
        ms = timeout_ms;
    return ms;
}

/*
 * Sends buf on subject as a request, up to 1 + retries times on timeout / no responders (the same
 * bytes each time: invariant 2). *out_msg is returned to the caller (natsMsg_Destroy).
 */
static lc_status_t lc_request_do(natsConnection *nc, const char *subject, const uint8_t *buf,
                                 size_t len, int64_t timeout_ms, uint32_t retries, char *err,
                                 uint32_t *out_attempts /* out, may be NULL */,
                                 natsMsg **out_msg /* out */)
{
    lc_status_t status = LC_OK;
    natsMsg *msg = NULL;
    uint32_t attempt = 0;

    if (len > INT_MAX) {
        lc_errf(err, "%s: message of %zu bytes", subject, len);
        status = LC_ETOOBIG;
        goto out;
    }
    for (;; attempt++) {
        natsStatus s = natsConnection_Request(&msg, nc, subject, buf, (int)len, timeout_ms);
        if (s == NATS_OK) {
            status = LC_OK;
            break;
        }
        status = lc_nats_fail(err, subject, s);
        if ((status != LC_ETIMEOUT && status != LC_ENORESPONDERS) || attempt >= retries)
            goto out;
        if (status == LC_ENORESPONDERS)
            lc_sleep_ms(lc_backoff_ms(attempt, timeout_ms));
    }
    if (out_attempts != NULL)
        *out_attempts = attempt + 1;
    *out_msg = msg;
    msg = NULL;
out:
    natsMsg_Destroy(msg);
    return status;
}

/* ---- client ------------------------------------------------------------------------------- */

void lc_client_config_init(lc_client_config_t *config)
{
    memset(config, 0, sizeof(*config));
}

static bool lc_set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

lc_status_t lc_client_open(const lc_client_config_t *config, char *errbuf, size_t errlen,
                           lc_client_t **out)
{
    lc_status_t status = LC_OK;
    natsStatus s = NATS_OK;
    natsOptions *opts = NULL;
    lc_client_t *client = NULL;
    char *urls = NULL;
    const char **list = NULL;
    int n_list = 0;
    char err[LC_ERR_MAX] = "";

    if (config == NULL || out == NULL) {
        lc_errf(err, "lc_client_open: NULL argument");
        status = LC_EINVAL;
        goto out;
    }
    const char *prefix = lc_set(config->prefix) ? config->prefix : LC_DEFAULT_PREFIX;
    if (!lc_subject_part_ok(prefix)) {
        lc_errf(err, "bad prefix \"%s\": it must be a valid subject without wildcards", prefix);
        status = LC_EINVAL;
        goto out;
    }
    if (lc_set(config->tls_cert_file) != lc_set(config->tls_key_file)) {
        lc_errf(err, "a TLS client certificate needs its key and the other way round");
        status = LC_EINVAL;
        goto out;
    }
    client = calloc(1, sizeof(*client));
    urls = strdup(lc_set(config->servers) ? config->servers : LC_DEFAULT_SERVER);
    if (client == NULL || urls == NULL || (client->prefix = strdup(prefix)) == NULL) {
        status = LC_ENOMEM;
        lc_errf(err, "out of memory");
        goto out;
    }
    list = calloc(strlen(urls) / 2 + 1, sizeof(*list)); /* at most one URL per two bytes */
    if (list == NULL) {
        status = LC_ENOMEM;
        lc_errf(err, "out of memory");
        goto out;
    }
    char *save = NULL;
    for (char *tok = strtok_r(urls, ", \t", &save); tok != NULL;
         tok = strtok_r(NULL, ", \t", &save))
        list[n_list++] = tok;
    if (n_list == 0) {
        lc_errf(err, "no server URL in \"%s\"", config->servers);
        status = LC_EINVAL;
        goto out;
    }

    const char *what = "natsOptions_Create";
    if ((s = natsOptions_Create(&opts)) != NATS_OK)
        goto nats_fail;
    what = "server list";
    if ((s = natsOptions_SetServers(opts, list, n_list)) != NATS_OK)
        goto nats_fail;
    what = "connection name";
    if (lc_set(config->name) && (s = natsOptions_SetName(opts, config->name)) != NATS_OK)
        goto nats_fail;
    what = "user/password";
    if ((lc_set(config->user) || lc_set(config->password)) &&
        (s = natsOptions_SetUserInfo(opts, config->user, config->password)) != NATS_OK)
        goto nats_fail;
    what = "token";
    if (lc_set(config->token) && (s = natsOptions_SetToken(opts, config->token)) != NATS_OK)
        goto nats_fail;
    what = "credentials file";
    if (lc_set(config->creds_file) &&
        (s = natsOptions_SetUserCredentialsFromFiles(opts, config->creds_file, NULL)) != NATS_OK)
        goto nats_fail;
    what = "TLS";
    if ((config->tls || lc_set(config->tls_ca_file) || lc_set(config->tls_cert_file)) &&
        (s = natsOptions_SetSecure(opts, true)) != NATS_OK)
        goto nats_fail;
    what = "TLS CA file";
    if (lc_set(config->tls_ca_file) &&
        (s = natsOptions_LoadCATrustedCertificates(opts, config->tls_ca_file)) != NATS_OK)
        goto nats_fail;
    what = "TLS certificate/key";
    if (lc_set(config->tls_cert_file) &&
        (s = natsOptions_LoadCertificatesChain(opts, config->tls_cert_file,
                                               config->tls_key_file)) != NATS_OK)
        goto nats_fail;
    what = "connect timeout";
    if (config->connect_timeout_ms > 0 &&
        (s = natsOptions_SetTimeout(opts, config->connect_timeout_ms)) != NATS_OK)
        goto nats_fail;
    what = "connect";
    if ((s = natsConnection_Connect(&client->nc, opts)) != NATS_OK)
        goto nats_fail;
    *out = client;
    client = NULL;
    goto out;

nats_fail:
    lc_nats_fail(err, what, s);
    status = s == NATS_NO_MEMORY ? LC_ENOMEM : LC_ECONNECT;
out:
    if (status != LC_OK && errbuf != NULL && errlen > 0)
        snprintf(errbuf, errlen, "%s", err);
    natsOptions_Destroy(opts);
    free(list);
    free(urls);
    if (client != NULL) {
        natsConnection_Destroy(client->nc);
        free(client->prefix);
        free(client);
    }
    return status;
}

void lc_client_close(lc_client_t *client)
{
    if (client == NULL)
        return;
    natsConnection_FlushTimeout(client->nc, LC_FLUSH_ON_CLOSE_MS);
    natsConnection_Close(client->nc);
    natsConnection_Destroy(client->nc);
    free(client->prefix);
    free(client);
}

lc_status_t lc_client_flush(lc_client_t *client, int64_t timeout_ms)
{
    if (client == NULL || timeout_ms <= 0)
        return LC_EINVAL;
    natsStatus s = natsConnection_FlushTimeout(client->nc, timeout_ms);
    if (s != NATS_OK)
        return lc_nats_fail(client->err, "flush", s);
    return LC_OK;
}

const char *lc_client_error_get(const lc_client_t *client)
{
    return client != NULL ? client->err : "";
}

const char *lc_client_prefix_get(const lc_client_t *client)
{
    return client->prefix;
}

/* ---- shapes ------------------------------------------------------------------------------- */

void lc_shape_hash(const char *const *components, size_t n, uint64_t *out_hashes)
{
    for (size_t i = 0; i < n; i++)
        out_hashes[i] = codec_hash_component(components[i], strlen(components[i]));
}

lc_status_t lc_shape_sign(const char *const *components, size_t n, uint64_t *out)
{
    lc_status_t status = LC_OK;
    uint64_t small[16] = {0};
    uint64_t *hashes = small;

    if ((components == NULL && n > 0) || out == NULL) {
        status = LC_EINVAL;
        goto out;
    }
    if (n > sizeof(small) / sizeof(small[0]) && (hashes = malloc(n * sizeof(*hashes))) == NULL) {
        status = LC_ENOMEM;
        goto out;
    }
    lc_shape_hash(components, n, hashes);
    *out = codec_signature(hashes, n);
out:
    if (hashes != small)
        free(hashes);
    return status;
}

lc_status_t lc_shape_parse(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    const char *p = text;
    size_t digits = 0;

    if (text == NULL || out == NULL)
        return LC_EINVAL;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    for (; *p != '\0'; p++, digits++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            return LC_EINVAL;
        if (digits == 16)
            return LC_EINVAL;
        value = value << 4 | (uint64_t)d;
    }
    if (digits == 0 || value == 0)
        return LC_EINVAL;
    *out = value;
    return LC_OK;
}

/* ---- submit ------------------------------------------------------------------------------- */

/* Encodes items as one Submit for <prefix>.submit.<model>; *out_subject and *out_buf returned
 * to the caller (free). */
static lc_status_t lc_submit_encode(lc_client_t *client, const char *model,
                                    const codec_work_item_t *items, size_t n,
                                    char **out_subject /* out */, uint8_t **out_buf /* out */,
                                    size_t *out_len /* out */)
{
    lc_status_t status = LC_OK;
    codec_work_item_t *copy = NULL;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;

    if (client == NULL || items == NULL || n == 0 || !lc_subject_part_ok(model)) {
        if (client != NULL)
            lc_errf(client->err, "submit: %s", items == NULL || n == 0 ? "no items" : "bad model");
        status = LC_EINVAL;
        goto out;
    }
    copy = malloc(n * sizeof(*copy));
    subject = lc_subject_make(client->prefix, "submit", model);
    if (copy == NULL || subject == NULL) {
        lc_errf(client->err, "submit: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    uint64_t now = clock_wall_ns();
    for (size_t i = 0; i < n; i++) {
        copy[i] = items[i];
        if (copy[i].model == NULL || copy[i].model[0] == '\0')
            copy[i].model = model;
        if (copy[i].created_unix_ns == 0)
            copy[i].created_unix_ns = now;
    }
    codec_submit_t msg = {.items = copy, .n_items = n};
    codec_status_t cs = codec_encode_submit(&msg, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(client->err, NULL, "submit: encode", cs);
        goto out;
    }
    *out_subject = subject;
    *out_buf = buf;
    *out_len = len;
    subject = NULL;
    buf = NULL;
out:
    free(copy);
    free(subject);
    free(buf);
    return status;
}

lc_status_t lc_submit_send(lc_client_t *client, const char *model, const codec_work_item_t *items,
                           size_t n)
{
    lc_status_t status = LC_OK;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;

    status = lc_submit_encode(client, model, items, n, &subject, &buf, &len);
    if (status != LC_OK)
        goto out;
    if (len > INT_MAX) {
        lc_errf(client->err, "%s: message of %zu bytes", subject, len);
        status = LC_ETOOBIG;
        goto out;
    }
    natsStatus s = natsConnection_Publish(client->nc, subject, buf, (int)len);
    if (s != NATS_OK)
        status = lc_nats_fail(client->err, subject, s);
out:
    free(subject);
    free(buf);
    return status;
}

lc_status_t lc_submit_request(lc_client_t *client, const char *model,
                              const codec_work_item_t *items, size_t n, int64_t timeout_ms,
                              uint32_t retries, lc_item_result_t *results,
                              lc_submit_summary_t *summary)
{
    lc_status_t status = LC_OK;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    natsMsg *msg = NULL;
    codec_submit_reply_t *reply = NULL;
    lc_submit_summary_t sum = {0};

    if (timeout_ms <= 0) {
        if (client != NULL)
            lc_errf(client->err, "submit: timeout_ms must be > 0");
        status = LC_EINVAL;
        goto out;
    }
    status = lc_submit_encode(client, model, items, n, &subject, &buf, &len);
    if (status != LC_OK)
        goto out;
    status = lc_request_do(client->nc, subject, buf, len, timeout_ms, retries, client->err,
                           &sum.attempts, &msg);
    if (status != LC_OK)
        goto out;
    codec_status_t cs =
        codec_decode_submit_reply(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(client->err, subject, "SubmitReply", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(client->err, "%s: refused: %s", subject, reply->error);
        status = LC_EREFUSED;
        goto out;
    }
    if (reply->n_results != n) {
        lc_errf(client->err, "%s: %zu results for %zu items", subject, reply->n_results, n);
        status = LC_EPROTO;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const codec_item_result_t *r = &reply->results[i];
        if (r->status == CODEC_ITEM_ACCEPTED)
            sum.accepted++;
        else if (r->status == CODEC_ITEM_DUPLICATE)
            sum.duplicates++;
        else if (r->status == CODEC_ITEM_REJECTED)
            sum.rejected++;
        else {
            lc_errf(client->err, "%s: item %zu has unknown status %d", subject, i, (int)r->status);
            status = LC_EPROTO;
            goto out;
        }
    }
    if (results != NULL) {
        for (size_t i = 0; i < n; i++) {
            results[i].status = reply->results[i].status;
            snprintf(results[i].reason, sizeof(results[i].reason), "%s", reply->results[i].reason);
        }
    }
    if (summary != NULL)
        *summary = sum;
out:
    codec_submit_reply_destroy(reply);
    natsMsg_Destroy(msg);
    free(subject);
    free(buf);
    return status;
}

/* ---- consumer: in-progress set (callers hold mu unless stated) ----------------------------- */

static lc_inprogress_t *lc_inprogress_find(lc_consumer_t *c, uint64_t batch_id)
{
    for (size_t i = 0; i < c->n_ip; i++)
        if (c->ip[i].batch_id == batch_id)
            return &c->ip[i];
    return NULL;
}

static void lc_inprogress_drop(lc_consumer_t *c, lc_inprogress_t *entry)
{
    free(entry->bits);
    *entry = c->ip[--c->n_ip];
}

static void lc_inprogress_clear(lc_consumer_t *c)
{
    while (c->n_ip > 0)
        lc_inprogress_drop(c, &c->ip[c->n_ip - 1]);
}

/* Adds batch_id (n_items positions, 0 = unknown) unless present. */
static lc_status_t lc_inprogress_put(lc_consumer_t *c, uint64_t batch_id, uint32_t n_items)
{
    uint8_t *bits = NULL;
    if (lc_inprogress_find(c, batch_id) != NULL)
        return LC_OK;
    if (c->n_ip == c->cap_ip) {
        size_t cap = c->cap_ip == 0 ? 8 : c->cap_ip * 2;
        lc_inprogress_t *ip = realloc(c->ip, cap * sizeof(*ip));
        if (ip == NULL)
            return LC_ENOMEM;
        c->ip = ip;
        c->cap_ip = cap;
    }
    if (n_items > 0 && (bits = calloc((n_items + 7) / 8, 1)) == NULL)
        return LC_ENOMEM;
    c->ip[c->n_ip++] = (lc_inprogress_t){.batch_id = batch_id, .n_items = n_items, .bits = bits};
    return LC_OK;
}

static void lc_inprogress_mark(lc_inprogress_t *entry, const uint32_t *positions, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t p = positions[i];
        if (p < entry->n_items && !(entry->bits[p / 8] & (1u << (p % 8)))) {
            entry->bits[p / 8] |= (uint8_t)(1u << (p % 8));
            entry->settled++;
        }
    }
}

/* The in-progress update after an Ack went out (invariant 6). Takes mu. */
static void lc_inprogress_settle(lc_consumer_t *c, const codec_ack_t *ack, bool unknown)
{
    pthread_mutex_lock(&c->mu);
    lc_inprogress_t *entry = lc_inprogress_find(c, ack->batch_id);
    if (entry != NULL) {
        if (ack->all || unknown) {
            lc_inprogress_drop(c, entry);
        } else {
            lc_inprogress_mark(entry, ack->ack, ack->n_ack);
            lc_inprogress_mark(entry, ack->nak, ack->n_nak);
            if (entry->n_items > 0 && entry->settled == entry->n_items)
                lc_inprogress_drop(c, entry);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

lc_status_t lc_inprogress_add(lc_consumer_t *consumer, uint64_t batch_id)
{
    if (consumer == NULL)
        return LC_EINVAL;
    pthread_mutex_lock(&consumer->mu);
    lc_status_t status = lc_inprogress_put(consumer, batch_id, 0);
    pthread_mutex_unlock(&consumer->mu);
    return status;
}

void lc_inprogress_remove(lc_consumer_t *consumer, uint64_t batch_id)
{
    if (consumer == NULL)
        return;
    pthread_mutex_lock(&consumer->mu);
    lc_inprogress_t *entry = lc_inprogress_find(consumer, batch_id);
    if (entry != NULL)
        lc_inprogress_drop(consumer, entry);
    pthread_mutex_unlock(&consumer->mu);
}

/* ---- consumer: heartbeat thread ----------------------------------------------------------- */

static void *lc_heartbeat_main(void *arg)
{
    lc_consumer_t *c = arg;
    uint64_t *ids = NULL;
    size_t cap = 0;
    char *subject = NULL;

    pthread_mutex_lock(&c->mu);
    while (!c->hb_stop) {
        uint64_t due = clock_mono_ns() + (uint64_t)c->hb_interval_ms * 1000000ull;
        struct timespec deadline = {.tv_sec = (time_t)(due / 1000000000ull),
                                    .tv_nsec = (long)(due % 1000000000ull)};
        int rc = 0; /* 0 = signalled or spurious: wait on; ETIMEDOUT (or an error): beat */
        while (!c->hb_stop && rc == 0)
            rc = pthread_cond_timedwait(&c->cond, &c->mu, &deadline);
        if (c->hb_stop)
            break;

        bool ok = true;
        size_t n = c->n_ip;
        if (n > cap) {
            uint64_t *grown = realloc(ids, n * sizeof(*ids));
            if (grown != NULL) {
                ids = grown;
                cap = n;
            } else {
                ok = false;
            }
        }
        for (size_t i = 0; ok && i < n; i++)
            ids[i] = c->ip[i].batch_id;
        free(subject);
        subject = strdup(c->reg.heartbeat_subject);
        ok = ok && subject != NULL;
        pthread_mutex_unlock(&c->mu);

        uint8_t *buf = NULL;
        size_t len = 0;
        if (ok) {
            codec_heartbeat_t hb = {.in_progress = n > 0 ? ids : NULL, .n_in_progress = n};
            ok = codec_encode_heartbeat(&hb, &buf, &len) == CODEC_OK && len <= INT_MAX &&
                 natsConnection_Publish(c->client->nc, subject, buf, (int)len) == NATS_OK;
        }
        free(buf);

        pthread_mutex_lock(&c->mu);
        if (ok)
            c->stats.heartbeats_sent++;
        else
            c->stats.heartbeats_failed++;
    }
    pthread_mutex_unlock(&c->mu);
    free(ids);
    free(subject);
    return NULL;
}

static lc_status_t lc_heartbeat_start(lc_consumer_t *c, char *err)
{
    if (c->hb_running || c->config.no_heartbeat)
        return LC_OK;
    pthread_mutex_lock(&c->mu);
    c->hb_stop = false;
    pthread_mutex_unlock(&c->mu);
    int rc = pthread_create(&c->hb_thread, NULL, lc_heartbeat_main, c);
    if (rc != 0) {
        lc_errf(err, "heartbeat thread: %s", strerror(rc));
        return LC_ETHREAD;
    }
    c->hb_running = true;
    return LC_OK;
}

static void lc_heartbeat_stop(lc_consumer_t *c)
{
    if (!c->hb_running)
        return;
    pthread_mutex_lock(&c->mu);
    c->hb_stop = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->hb_thread, NULL);
    c->hb_running = false;
}

/* ---- consumer: registration --------------------------------------------------------------- */

void lc_consumer_config_init(lc_consumer_config_t *config)
{
    memset(config, 0, sizeof(*config));
}

/* Drops the n oldest outstanding pulls (all of them when n >= n_pulls). */
static void lc_pulls_forget(lc_consumer_t *c, size_t n)
{
    if (n > c->n_pulls)
        n = c->n_pulls;
    if (n < c->n_pulls)
        memmove(c->pulls, c->pulls + n, (c->n_pulls - n) * sizeof(*c->pulls));
    c->n_pulls -= n;
}

/* Sends Register and installs the answer; failure text in err, registration unchanged. */
static lc_status_t lc_register_do(lc_consumer_t *c, char *err)
{
    lc_status_t status = LC_OK;
    lc_client_t *client = c->client;
    char *subject = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    natsMsg *msg = NULL;
    codec_registered_t *reply = NULL;
    char *strings[5] = {NULL, NULL, NULL, NULL, NULL};

    subject = lc_subject_make(client->prefix, "register", NULL);
    if (subject == NULL) {
        lc_errf(err, "register: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    codec_register_t reg = {.model = c->model,
                            .max_batch_size = c->config.max_batch_size,
                            .max_batch_tokens = c->config.max_batch_tokens,
                            .max_input_tokens = c->config.max_input_tokens,
                            .name = c->name};
    codec_status_t cs = codec_encode_register(&reg, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(err, NULL, "register: encode", cs);
        goto out;
    }
    status = lc_request_do(client->nc, subject, buf, len, c->config.request_timeout_ms,
                           c->config.request_retries, err, NULL, &msg);
    if (status != LC_OK)
        goto out;
    cs = codec_decode_registered(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(err, NULL, "register: Registered", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(err, "register refused: %s", reply->error);
        status = LC_EREFUSED;
        goto out;
    }
    const char *fields[5] = {reply->consumer_id, reply->pull_subject, reply->ack_subject,
                             reply->heartbeat_subject, reply->bye_subject};
    static const char *const names[5] = {"consumer_id", "pull_subject", "ack_subject",
                                         "heartbeat_subject", "bye_subject"};
    for (int i = 0; i < 5; i++) {
        if (!lc_subject_part_ok(fields[i])) {
            lc_errf(err, "register: Registered.%s is \"%s\"", names[i], fields[i]);
            status = LC_EPROTO;
            goto out;
        }
        if ((strings[i] = strdup(fields[i])) == NULL) {
            lc_errf(err, "register: out of memory");
            status = LC_ENOMEM;
            goto out;
        }
    }

    /* Install (cannot fail from here): swap the strings under mu, the heartbeat thread reads
     * them; the old registration's pulls and batches are no longer ours. */
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < 5; i++) {
        char *old = c->reg_strings[i];
        c->reg_strings[i] = strings[i];
        strings[i] = old; /* freed at out */
    }
    c->reg = (lc_registered_t){.consumer_id = c->reg_strings[0],
                               .pull_subject = c->reg_strings[1],
                               .ack_subject = c->reg_strings[2],
                               .heartbeat_subject = c->reg_strings[3],
                               .bye_subject = c->reg_strings[4],
                               .heartbeat_ms = reply->heartbeat_ms,
                               .dead_after_ms = reply->dead_after_ms,
                               .ack_wait_ms = reply->ack_wait_ms};
    c->hb_interval_ms = c->config.heartbeat_ms > 0 ? c->config.heartbeat_ms
                        : reply->heartbeat_ms > 0  ? reply->heartbeat_ms
                                                   : LC_HEARTBEAT_MS;
    lc_inprogress_clear(c);
    c->stats.registrations++;
    pthread_mutex_unlock(&c->mu);
    c->registered = true;
    lc_pulls_forget(c, c->n_pulls);
out:
    for (int i = 0; i < 5; i++)
        free(strings[i]);
    codec_registered_destroy(reply);
    natsMsg_Destroy(msg);
    free(buf);
    free(subject);
    return status;
}

static void lc_consumer_free(lc_consumer_t *c)
{
    if (c == NULL)
        return;
    lc_heartbeat_stop(c);
    if (c->sub != NULL) {
        natsSubscription_Unsubscribe(c->sub);
        natsSubscription_Destroy(c->sub);
    }
    natsInbox_Destroy(c->inbox);
    if (c->sync_ready) {
        lc_inprogress_clear(c);
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->mu);
    }
    for (int i = 0; i < 5; i++)
        free(c->reg_strings[i]);
    free(c->ip);
    free(c->pulls);
    free(c->model);
    free(c->name);
    free(c);
}

lc_status_t lc_consumer_open(lc_client_t *client, const lc_consumer_config_t *config,
                             lc_consumer_t **out)
{
    lc_status_t status = LC_OK;
    lc_consumer_t *c = NULL;
    pthread_condattr_t attr;
    bool attr_ready = false;

    if (client == NULL || config == NULL || out == NULL) {
        if (client != NULL)
            lc_errf(client->err, "lc_consumer_open: NULL argument");
        status = LC_EINVAL;
        goto out;
    }
    if (!lc_subject_part_ok(config->model) || config->max_batch_size == 0 ||
        config->max_batch_tokens == 0) {
        lc_errf(client->err, "consumer: needs a model (no spaces or wildcards), "
                             "max_batch_size > 0 and max_batch_tokens > 0");
        status = LC_EINVAL;
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        lc_errf(client->err, "consumer: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    c->client = client;
    c->config = *config;
    c->model = strdup(config->model);
    c->name = strdup(config->name != NULL ? config->name : "");
    if (c->model == NULL || c->name == NULL) {
        lc_errf(client->err, "consumer: out of memory");
        status = LC_ENOMEM;
        goto out;
    }
    c->config.model = c->model;
    c->config.name = c->name;
    if (c->config.request_timeout_ms <= 0)
        c->config.request_timeout_ms = LC_REQUEST_TIMEOUT_MS;
    if (c->config.pull_max_batches == 0)
        c->config.pull_max_batches = 1;

    if (pthread_condattr_init(&attr) != 0) {
        lc_errf(client->err, "consumer: pthread_condattr_init failed");
        status = LC_ETHREAD;
        goto out;
    }
    attr_ready = true;
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_mutex_init(&c->mu, NULL) != 0) {
        lc_errf(client->err, "consumer: mutex / clock setup failed");
        status = LC_ETHREAD;
        goto out;
    }
    if (pthread_cond_init(&c->cond, &attr) != 0) {
        pthread_mutex_destroy(&c->mu);
        lc_errf(client->err, "consumer: pthread_cond_init failed");
        status = LC_ETHREAD;
        goto out;
    }
    c->sync_ready = true;

    natsStatus s = natsInbox_Create(&c->inbox);
    if (s == NATS_OK)
        s = natsConnection_SubscribeSync(&c->sub, client->nc, c->inbox);
    if (s != NATS_OK) {
        status = lc_nats_fail(client->err, "consumer inbox", s);
        goto out;
    }
    status = lc_register_do(c, client->err);
    if (status != LC_OK)
        goto out;
    status = lc_heartbeat_start(c, client->err);
    if (status != LC_OK)
        goto out;
    *out = c;
    c = NULL;
out:
    if (attr_ready)
        pthread_condattr_destroy(&attr);
    lc_consumer_free(c);
    return status;
}

lc_status_t lc_consumer_register(lc_consumer_t *consumer)
{
    if (consumer == NULL)
        return LC_EINVAL;
    lc_status_t status = lc_register_do(consumer, consumer->err);
    if (status == LC_OK)
        status = lc_heartbeat_start(consumer, consumer->err);
    return status;
}

const lc_registered_t *lc_consumer_registered_get(const lc_consumer_t *consumer)
{
    return &consumer->reg;
}

const char *lc_consumer_error_get(const lc_consumer_t *consumer)
{
    return consumer != NULL ? consumer->err : "";
}

void lc_consumer_stats_get(lc_consumer_t *consumer, lc_consumer_stats_t *out)
{
    if (consumer == NULL || out == NULL)
        return;
    pthread_mutex_lock(&consumer->mu);
    *out = consumer->stats;
    out->in_progress = consumer->n_ip;
    pthread_mutex_unlock(&consumer->mu);
}

lc_status_t lc_bye_send(lc_consumer_t *consumer, int64_t timeout_ms)
{
    lc_status_t status = LC_OK;
    natsMsg *msg = NULL;
    codec_ack_reply_t *reply = NULL;

    if (consumer == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "bye: not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    natsConnection *nc = c->client->nc;
    lc_heartbeat_stop(c);
    c->registered = false;
    pthread_mutex_lock(&c->mu);
    lc_inprogress_clear(c);
    pthread_mutex_unlock(&c->mu);
    lc_pulls_forget(c, c->n_pulls);
    if (timeout_ms <= 0) {
        natsStatus s = natsConnection_Publish(nc, c->reg.bye_subject, NULL, 0);
        if (s == NATS_OK)
            s = natsConnection_FlushTimeout(nc, LC_FLUSH_ON_CLOSE_MS);
        if (s != NATS_OK)
            status = lc_nats_fail(c->err, c->reg.bye_subject, s);
        goto out;
    }
    status = lc_request_do(nc, c->reg.bye_subject, NULL, 0, timeout_ms, c->config.request_retries,
                           c->err, NULL, &msg);
    if (status != LC_OK)
        goto out;
    codec_status_t cs =
        codec_decode_ack_reply(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, c->reg.bye_subject, "AckReply", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(c->err, "%s: %s", c->reg.bye_subject, reply->error);
        status = LC_EREFUSED;
    }
out:
    codec_ack_reply_destroy(reply);
    natsMsg_Destroy(msg);
    return status;
}

void lc_consumer_close(lc_consumer_t *consumer)
{
    lc_consumer_free(consumer);
}

/* ---- pull and batches --------------------------------------------------------------------- */

lc_status_t lc_pull_send(lc_consumer_t *consumer, uint32_t max_batches, uint32_t expires_ms)
{
    lc_status_t status = LC_OK;
    uint8_t *buf = NULL;
    size_t len = 0;

    if (consumer == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "pull: not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    if (c->n_pulls == c->cap_pulls) {
        size_t cap = c->cap_pulls == 0 ? 4 : c->cap_pulls * 2;
        lc_pull_t *pulls = realloc(c->pulls, cap * sizeof(*pulls));
        if (pulls == NULL) {
            lc_errf(c->err, "pull: out of memory");
            status = LC_ENOMEM;
            goto out;
        }
        c->pulls = pulls;
        c->cap_pulls = cap;
    }
    codec_pull_t pull = {.max_batches = max_batches, .expires_ms = expires_ms};
    codec_status_t cs = codec_encode_pull(&pull, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, NULL, "pull: encode", cs);
        goto out;
    }
    natsStatus s =
        natsConnection_PublishRequest(c->client->nc, c->reg.pull_subject, c->inbox, buf, (int)len);
    if (s != NATS_OK) {
        status = lc_nats_fail(c->err, c->reg.pull_subject, s);
        goto out;
    }
    uint64_t expires = expires_ms > 0 ? expires_ms : LC_PULL_EXPIRES_MS;
    c->pulls[c->n_pulls++] =
        (lc_pull_t){.credits = max_batches > 0 ? max_batches : 1,
                    .lost_after_ns = clock_mono_ns() + (expires + LC_PULL_GRACE_MS) * 1000000ull};
    pthread_mutex_lock(&c->mu);
    c->stats.pulls_sent++;
    pthread_mutex_unlock(&c->mu);
out:
    free(buf);
    return status;
}

/* Forgets the pulls silent past their expiry + grace; returns how many. */
static uint64_t lc_pulls_expire(lc_consumer_t *c, uint64_t now_ns)
{
    size_t kept = 0;
    uint64_t lost = 0;
    for (size_t i = 0; i < c->n_pulls; i++) {
        if (c->pulls[i].lost_after_ns <= now_ns)
            lost++;
        else
            c->pulls[kept++] = c->pulls[i];
    }
    c->n_pulls = kept;
    return lost;
}

lc_status_t lc_batch_next(lc_consumer_t *consumer, int64_t timeout_ms, codec_batch_t **out)
{
    lc_status_t status = LC_OK;
    natsMsg *msg = NULL;
    codec_batch_t *batch = NULL;

    if (consumer == NULL || out == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "batch: %s", out == NULL ? "NULL out" : "not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    if (timeout_ms < 0)
        timeout_ms = 0;
    int64_t wait_ms = timeout_ms;
    if (c->n_pulls == 0) {
        uint32_t expires = timeout_ms < 1                     ? 1u
                           : timeout_ms > (int64_t)UINT32_MAX ? UINT32_MAX
                                                              : (uint32_t)timeout_ms;
        status = lc_pull_send(c, c->config.pull_max_batches, expires);
        if (status != LC_OK)
            goto out;
        wait_ms += LC_PULL_GRACE_MS;
    }
    uint64_t deadline = clock_mono_ns() + (uint64_t)wait_ms * 1000000ull;

    for (;;) {
        uint64_t now = clock_mono_ns();
        int64_t left_ms = now >= deadline ? 0 : (int64_t)((deadline - now + 999999) / 1000000);
        natsStatus s = natsSubscription_NextMsg(&msg, c->sub, left_ms);
        if (s == NATS_TIMEOUT) {
            uint64_t lost = lc_pulls_expire(c, clock_mono_ns());
            if (lost > 0) {
                pthread_mutex_lock(&c->mu);
                c->stats.pulls_lost += lost;
                pthread_mutex_unlock(&c->mu);
            }
            lc_errf(c->err, "no batch within %lld ms", (long long)wait_ms);
            status = LC_ETIMEOUT;
            goto out;
        }
        if (s == NATS_NO_RESPONDERS) {
            lc_pulls_forget(c, 1);
            status = lc_nats_fail(c->err, c->reg.pull_subject, s);
            goto out;
        }
        if (s != NATS_OK) {
            status = lc_nats_fail(c->err, "consumer inbox", s);
            goto out;
        }
        codec_status_t cs =
            codec_decode_batch(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &batch);
        natsMsg_Destroy(msg);
        msg = NULL;
        if (cs != CODEC_OK) {
            status = lc_codec_fail(c->err, NULL, "batch", cs);
            goto out;
        }
        break;
    }

    switch (batch->status) {
    case CODEC_BATCH_OK:
        if (c->n_pulls > 0 && --c->pulls[0].credits == 0)
            lc_pulls_forget(c, 1);
        pthread_mutex_lock(&c->mu);
        status = lc_inprogress_put(c, batch->batch_id,
                                   batch->n_items > UINT32_MAX ? 0 : (uint32_t)batch->n_items);
        if (status == LC_OK)
            c->stats.batches++;
        pthread_mutex_unlock(&c->mu);
        if (status != LC_OK) {
            lc_errf(c->err, "batch %llu: out of memory", (unsigned long long)batch->batch_id);
            goto out;
        }
        *out = batch;
        batch = NULL;
        break;
    case CODEC_BATCH_EXPIRED:
        lc_pulls_forget(c, 1);
        pthread_mutex_lock(&c->mu);
        c->stats.expired++;
        pthread_mutex_unlock(&c->mu);
        lc_errf(c->err, "pull expired without work");
        status = LC_EEMPTY;
        break;
    case CODEC_BATCH_ERROR:
        if (lc_code_is(batch->error, "unknown_consumer")) {
            lc_pulls_forget(c, c->n_pulls);
            lc_errf(c->err, "%s: unknown_consumer", c->reg.pull_subject);
            status = LC_EUNKNOWN_CONSUMER;
        } else {
            lc_pulls_forget(c, 1);
            lc_errf(c->err, "%s: batch error: %s", c->reg.pull_subject, batch->error);
            status = LC_EREFUSED;
        }
        break;
    default:
        lc_errf(c->err, "batch %llu: unknown status %d", (unsigned long long)batch->batch_id,
                (int)batch->status);
        status = LC_EPROTO;
        break;
    }
out:
    codec_batch_destroy(batch);
    natsMsg_Destroy(msg);
    return status;
}

/* ---- acks --------------------------------------------------------------------------------- */

lc_status_t lc_ack_send(lc_consumer_t *consumer, const codec_ack_t *ack, int64_t timeout_ms,
                        lc_ack_reply_t *out)
{
    lc_status_t status = LC_OK;
    uint8_t *buf = NULL;
    size_t len = 0;
    natsMsg *msg = NULL;
    codec_ack_reply_t *reply = NULL;

    if (consumer == NULL || ack == NULL || !consumer->registered) {
        if (consumer != NULL)
            lc_errf(consumer->err, "ack: %s", ack == NULL ? "NULL ack" : "not registered");
        status = LC_EINVAL;
        goto out;
    }
    lc_consumer_t *c = consumer;
    const char *subject = c->reg.ack_subject;
    codec_status_t cs = codec_encode_ack(ack, &buf, &len);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, NULL, "ack: encode", cs);
        goto out;
    }
    if (timeout_ms <= 0) {
        natsStatus s = len > INT_MAX
                           ? NATS_MAX_PAYLOAD
                           : natsConnection_Publish(c->client->nc, subject, buf, (int)len);
        if (s != NATS_OK) {
            status = lc_nats_fail(c->err, subject, s);
            goto out;
        }
        lc_inprogress_settle(c, ack, false);
        goto out;
    }
    status = lc_request_do(c->client->nc, subject, buf, len, timeout_ms, c->config.request_retries,
                           c->err, NULL, &msg);
    if (status != LC_OK)
        goto out;
    cs = codec_decode_ack_reply(natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &reply);
    if (cs != CODEC_OK) {
        status = lc_codec_fail(c->err, subject, "AckReply", cs);
        goto out;
    }
    if (reply->error[0] != '\0') {
        lc_errf(c->err, "%s: batch %llu: %s", subject, (unsigned long long)ack->batch_id,
                reply->error);
        if (lc_code_is(reply->error, "unknown_batch")) {
            lc_inprogress_settle(c, ack, true);
            status = LC_EUNKNOWN_BATCH;
        } else if (lc_code_is(reply->error, "unknown_consumer")) {
            status = LC_EUNKNOWN_CONSUMER;
        } else {
            status = LC_EREFUSED;
        }
        goto out;
    }
    lc_inprogress_settle(c, ack, false);
    if (out != NULL)
        *out = (lc_ack_reply_t){
            .acked = reply->acked, .returned = reply->returned, .unknown = reply->unknown};
out:
    codec_ack_reply_destroy(reply);
    natsMsg_Destroy(msg);
    free(buf);
    return status;
}

lc_status_t lc_ack_all_send(lc_consumer_t *consumer, uint64_t batch_id, int64_t timeout_ms,
                            lc_ack_reply_t *out)
{
    codec_ack_t ack = {.batch_id = batch_id, .all = true};
    return lc_ack_send(consumer, &ack, timeout_ms, out);
}

lc_status_t lc_ack_nak_send(lc_consumer_t *consumer, uint64_t batch_id, uint32_t n_items,
                            int64_t timeout_ms, lc_ack_reply_t *out)
{
    lc_status_t status = LC_OK;
    uint32_t *positions = NULL;

    if (n_items == 0 || (positions = malloc(n_items * sizeof(*positions))) == NULL) {
        if (consumer != NULL)
            lc_errf(consumer->err, "nak: %s", n_items == 0 ? "no items" : "out of memory");
        status = n_items == 0 ? LC_EINVAL : LC_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < n_items; i++)
        positions[i] = i;
    codec_ack_t ack = {.batch_id = batch_id, .nak = positions, .n_nak = n_items};
    status = lc_ack_send(consumer, &ack, timeout_ms, out);
out:
    free(positions);
    return status;
}

lc_status_t lc_ack_progress_send(lc_consumer_t *consumer, uint64_t batch_id, int64_t timeout_ms,
                                 lc_ack_reply_t *out)
{
    codec_ack_t ack = {.batch_id = batch_id, .in_progress = true};
    return lc_ack_send(consumer, &ack, timeout_ms, out);
}
