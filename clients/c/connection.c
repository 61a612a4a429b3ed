/*
 * connection.c - the client's NATS connection (lc_client_*: options, connect, flush, close) and
 * the small helpers every other file of the library uses: status names, failure texts, subject
 * building and checking, and request/reply with bounded retries.
 *
 * Owns: per client, the NATS connection and copies of the prefix and the inbox prefix
 * (client_int.h, 1).
 *
 * Invariants:
 *  1. Status names and texts come from the one LC_STATUS_MAP (lanes_client.h).
 *  2. lc_request_do sends the caller's bytes as they are on every attempt: a request is encoded
 *     once, so a retried Submit names the same item ids (the daemon's dedupe stores each once)
 *     and a retried Ack is the same idempotent Ack.
 *  3. Results reach the caller's out pointers only on LC_OK; each function releases what it
 *     allocated through its single `out:` label.
 *  4. lc_client_open writes errbuf only on failure, and leaves *out untouched then.
 *  5. Unless config->nats_flusher, every message is written to the socket when it is sent
 *     (natsOptions_SetSendAsap): nats.c's flusher thread waits 1 ms before each write it does, and
 *     a worker that pulls after each batch would idle that long for its pull, again for the
 *     daemon's answer if it waits too.
 *
 * Rejected alternatives:
 *  - A retry loop in each caller (submit, register, ack, bye): four copies of the back-off rule.
 *  - Backing off after a timeout too: the timeout itself already waited timeout_ms; only a
 *    no-responders answer, which comes back at once, needs a pause before the next attempt.
 *  - natsConnection_Flush after a pull or an ack instead of invariant 5: a PING round trip each,
 *    and nats.c has no call that writes its buffer without one.
 *  - Keeping the failure text in a thread-local: a caller asks for it on the handle it used, and
 *    the handle outlives the thread that failed.
 */
#include "clients/c/client_int.h"

#include "common/keyfile.h"
#include "common/text.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* After a no-responders answer the next attempt waits 100 ms << attempt, at most 2 s: a daemon
 * restarting on a laptop is back within a few of them, and a producer never sleeps long. */
#define LC_BACKOFF_BASE_MS 100
#define LC_BACKOFF_MAX_MS  2000

STATUS_STR(lc_status_str, lc_status_t, LC_STATUS_MAP, "unknown client status")

/* ---- failure texts ------------------------------------------------------------------------ */

int lc_code_is(const char *error, const char *code)
{
    size_t n = strlen(code);
    return error != NULL && strncmp(error, code, n) == 0 && (error[n] == '\0' || error[n] == ':');
}

void lc_errf(char *err, const char *fmt, ...)
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

lc_status_t lc_nats_fail(char *err, const char *what, natsStatus s)
{
    natsStatus last = NATS_OK;
    const char *detail = nats_GetLastError(&last);
    if (detail != NULL && detail[0] != '\0' && last == s)
        lc_errf(err, "%s: %s (%s)", what, natsStatus_GetText(s), detail);
    else
        lc_errf(err, "%s: %s", what, natsStatus_GetText(s));
    return lc_nats_status(s);
}

lc_status_t lc_codec_fail(char *err, const char *subject, const char *what, codec_status_t cs)
{
    if (subject != NULL)
        lc_errf(err, "%s: %s: %s", subject, what, codec_status_str(cs));
    else
        lc_errf(err, "%s: %s", what, codec_status_str(cs));
    return cs == CODEC_ENOMEM ? LC_ENOMEM : LC_ECODEC;
}

/* ---- subjects ----------------------------------------------------------------------------- */

char *lc_subject_make(const char *a, const char *b, const char *c)
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

bool lc_subject_part_ok(const char *s)
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

/* ---- request/reply ------------------------------------------------------------------------ */

static void lc_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
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

lc_status_t lc_request_do(natsConnection *nc, const char *subject, const uint8_t *buf, size_t len,
                          int64_t timeout_ms, uint32_t retries, char *err, uint32_t *out_attempts,
                          natsMsg **out_msg)
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

natsStatus lc_inbox_make(const char *prefix, char **out)
{
    natsInbox *inbox = NULL;
    natsStatus s = natsInbox_Create(&inbox);
    if (s != NATS_OK)
        return s;
    /* nats.c's inboxes are "_INBOX.<nuid>"; with a custom prefix the unique part goes under it,
     * as nats.c's own request inboxes do under natsOptions_SetCustomInboxPrefix. */
    const char *unique = strchr(inbox, '.');
    unique = unique != NULL ? unique + 1 : inbox;
    if (prefix == NULL)
        prefix = "_INBOX";
    size_t len = strlen(prefix) + 1 + strlen(unique) + 1;
    char *subject = malloc(len);
    if (subject != NULL)
        snprintf(subject, len, "%s.%s", prefix, unique);
    natsInbox_Destroy(inbox);
    if (subject == NULL)
        return NATS_NO_MEMORY;
    *out = subject;
    return NATS_OK;
}

void lc_sub_destroy(natsConnection *nc, natsSubscription *sub)
{
    if (sub == NULL)
        return;
    natsSubscription_Unsubscribe(sub);
    natsConnection_FlushTimeout(nc, LC_UNSUB_FLUSH_MS);
    natsSubscription_Destroy(sub);
}

void lc_client_config_init(lc_client_config_t *config)
{
    memset(config, 0, sizeof(*config));
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
    const char *prefix = text_given(config->prefix) ? config->prefix : LC_DEFAULT_PREFIX;
    if (!lc_subject_part_ok(prefix)) {
        lc_errf(err, "bad prefix \"%s\": it must be a valid subject without wildcards", prefix);
        status = LC_EINVAL;
        goto out;
    }
    if (text_given(config->inbox_prefix) && !lc_subject_part_ok(config->inbox_prefix)) {
        lc_errf(err, "bad inbox prefix \"%s\": it must be a valid subject without wildcards",
                config->inbox_prefix);
        status = LC_EINVAL;
        goto out;
    }
    static const char *const labels[] = {"credentials file", "TLS CA file", "TLS certificate",
                                         "TLS key"};
    const char *const paths[] = {config->creds_file, config->tls_ca_file, config->tls_cert_file,
                                 config->tls_key_file};
    char bad[320];
    if (keyfile_conn_check(labels, paths, bad, sizeof(bad)) != KEYFILE_OK) { /* before nats.c */
        lc_errf(err, "%s", bad);
        status = LC_EINVAL;
        goto out;
    }
    client = calloc(1, sizeof(*client));
    urls = strdup(text_given(config->servers) ? config->servers : LC_DEFAULT_SERVER);
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
    if (text_given(config->name) && (s = natsOptions_SetName(opts, config->name)) != NATS_OK)
        goto nats_fail;
    what = "user/password";
    if ((text_given(config->user) || text_given(config->password)) &&
        (s = natsOptions_SetUserInfo(opts, config->user, config->password)) != NATS_OK)
        goto nats_fail;
    what = "token";
    if (text_given(config->token) && (s = natsOptions_SetToken(opts, config->token)) != NATS_OK)
        goto nats_fail;
    what = "credentials file";
    if (text_given(config->creds_file) &&
        (s = natsOptions_SetUserCredentialsFromFiles(opts, config->creds_file, NULL)) != NATS_OK)
        goto nats_fail;
    what = "TLS";
    if ((config->tls || text_given(config->tls_ca_file) || text_given(config->tls_cert_file)) &&
        (s = natsOptions_SetSecure(opts, true)) != NATS_OK)
        goto nats_fail;
    what = "TLS CA file";
    if (text_given(config->tls_ca_file) &&
        (s = natsOptions_LoadCATrustedCertificates(opts, config->tls_ca_file)) != NATS_OK)
        goto nats_fail;
    what = "TLS certificate/key";
    if (text_given(config->tls_cert_file) &&
        (s = natsOptions_LoadCertificatesChain(opts, config->tls_cert_file,
                                               config->tls_key_file)) != NATS_OK)
        goto nats_fail;
    what = "send at once";
    if (!config->nats_flusher /* invariant 5 */ &&
        (s = natsOptions_SetSendAsap(opts, true)) != NATS_OK)
        goto nats_fail;
    what = "connect timeout";
    if (config->connect_timeout_ms > 0 &&
        (s = natsOptions_SetTimeout(opts, config->connect_timeout_ms)) != NATS_OK)
        goto nats_fail;
    what = "inbox prefix";
    if (text_given(config->inbox_prefix)) {
        if ((s = natsOptions_SetCustomInboxPrefix(opts, config->inbox_prefix)) != NATS_OK)
            goto nats_fail;
        if ((client->inbox_prefix = strdup(config->inbox_prefix)) == NULL) {
            s = NATS_NO_MEMORY;
            goto nats_fail;
        }
    }
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
        free(client->inbox_prefix);
        free(client->prefix);
        free(client);
    }
    return status;
}

void lc_client_close(lc_client_t *client)
{
    if (client == NULL)
        return;
    lc_submit_async_close(client);
    natsConnection_FlushTimeout(client->nc, LC_FLUSH_ON_CLOSE_MS);
    natsConnection_Close(client->nc);
    natsConnection_Destroy(client->nc);
    free(client->inbox_prefix);
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

int64_t lc_client_max_payload_get(const lc_client_t *client)
{
    return natsConnection_GetMaxPayload(client->nc);
}
