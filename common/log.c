/*
 * log.c - the shared logger (log.h).
 *
 * Invariants:
 *   1. A line is formatted and redacted before the lock is taken and written under it, so
 *      concurrent lines never interleave, and a slow format never blocks another thread's line.
 *   2. A message longer than LOG_LINE_MAX is cut, never split over two lines.
 *   3. No sink ever sees a credential of a URL or a registered secret (log_redact runs on every
 *      line, whatever the sink and the format).
 *   4. A JSON line is valid JSON whatever the message holds: quotes, backslashes and control
 *      characters are escaped, bytes that are not UTF-8 become U+FFFD.
 *
 * Rejected: syslog (containers collect stderr), a logger per module (one level and one sink per
 * process is what an operator sets), and redacting only the lines known to print a URL (every
 * nats.c error text may quote one, and a future line would forget).
 */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Longest message kept: a log line names a few ids and subjects, never a payload. */
#define LOG_LINE_MAX 1024
#define LOG_MASK     "***"

static const char *const log_names[] = {"debug", "info", "warn", "error"};
static int log_level = LOG_INFO;
static int log_format = LOG_FORMAT_TEXT;
static log_sink_fn log_sink;
static void *log_sink_ctx;
static char *log_secrets[LOG_SECRETS_MAX];
static int log_n_secrets;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_level_set(int level)
{
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int log_level_parse(const char *name, int *out_level)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, log_names[i]) == 0) {
            *out_level = i;
            return 0;
        }
    }
    return -1;
}

const char *log_level_name(int level)
{
    return level >= 0 && level < 4 ? log_names[level] : "?";
}

void log_format_set(int format)
{
    __atomic_store_n(&log_format, format, __ATOMIC_RELAXED);
}

int log_format_parse(const char *name, int *out_format)
{
    if (strcmp(name, "text") == 0 || strcmp(name, "json") == 0) {
        *out_format = name[0] == 'j' ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT;
        return 0;
    }
    return -1;
}

void log_sink_set(log_sink_fn sink, void *ctx)
{
    pthread_mutex_lock(&log_lock);
    log_sink = sink;
    log_sink_ctx = ctx;
    pthread_mutex_unlock(&log_lock);
}

int log_secret_add(const char *secret)
{
    if (secret == NULL || strlen(secret) < LOG_SECRET_MIN)
        return -1;
    char *copy = strdup(secret);
    int rc = -1;
    pthread_mutex_lock(&log_lock);
    if (copy != NULL && log_n_secrets < LOG_SECRETS_MAX) {
        log_secrets[log_n_secrets++] = copy;
        copy = NULL;
        rc = 0;
    }
    pthread_mutex_unlock(&log_lock);
    free(copy);
    return rc;
}

/* Appends n bytes of s to out (cap) at *w, cutting at the end (invariant 2). */
static void log_put(char *out, size_t cap, size_t *w, const char *s, size_t n)
{
    size_t room = cap - 1 - *w;
    n = n < room ? n : room;
    memcpy(out + *w, s, n);
    *w += n;
}

/* The length of the registered secret that starts at p, 0 when none does. Under log_lock. */
static size_t log_secret_at(const char *p)
{
    for (int i = 0; i < log_n_secrets; i++) {
        size_t n = strlen(log_secrets[i]);
        if (strncmp(p, log_secrets[i], n) == 0)
            return n;
    }
    return 0;
}

/* At a "://" at p: the length of the userinfo up to its '@' (0 when the URL has none). */
static size_t log_userinfo_len(const char *p)
{
    size_t n = 0;
    while (p[n] != '\0' && strchr("@/ \t,;\"'<>()[]{}", p[n]) == NULL)
        n++;
    return p[n] == '@' ? n : 0;
}

static void log_redact_locked(const char *msg, char *out, size_t cap)
{
    size_t w = 0;
    for (const char *p = msg; *p != '\0' && w < cap - 1;) {
        size_t n = log_secret_at(p);
        if (n != 0) {
            log_put(out, cap, &w, LOG_MASK, strlen(LOG_MASK));
            p += n;
            continue;
        }
        if (strncmp(p, "://", 3) == 0 && (n = log_userinfo_len(p + 3)) != 0) {
            const char *colon = memchr(p + 3, ':', n);
            log_put(out, cap, &w, p, 3);
            if (colon != NULL) /* user:password -> user:*** */
                log_put(out, cap, &w, p + 3, (size_t)(colon - (p + 3)) + 1);
            log_put(out, cap, &w, LOG_MASK, strlen(LOG_MASK));
            p += 3 + n; /* the '@' is copied next */
            continue;
        }
        log_put(out, cap, &w, p, 1);
        p++;
    }
    out[w] = '\0';
}

void log_redact(const char *msg, char *out, size_t cap)
{
    if (cap == 0)
        return;
    pthread_mutex_lock(&log_lock);
    log_redact_locked(msg, out, cap);
    pthread_mutex_unlock(&log_lock);
}

/* Length of the valid UTF-8 sequence at s, 0 when it is not one (overlong forms, surrogates and
 * values past U+10FFFF included). */
static size_t log_utf8_len(const unsigned char *s)
{
    size_t len = s[0] < 0x80                    ? 1
                 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                : 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    }
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return len;
}

/* msg as the body of a JSON string (invariant 4). out holds at least 6 * strlen(msg) + 1. */
static void log_json_escape(const char *msg, char *out)
{
    char *w = out;
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0';) {
        size_t n = log_utf8_len(p);
        if (n == 0) {
            w += sprintf(w, "\\ufffd");
            p++;
        } else if (*p == '"' || *p == '\\') {
            *w++ = '\\';
            *w++ = (char)*p++;
        } else if (*p < 0x20) {
            w += sprintf(w, "\\u%04x", *p++);
        } else {
            memcpy(w, p, n);
            w += n;
            p += n;
        }
    }
    *w = '\0';
}

static void log_emit(int level, const char *msg, int bare)
{
    char clean[LOG_LINE_MAX], json[LOG_LINE_MAX * 6 + 1];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    int format = __atomic_load_n(&log_format, __ATOMIC_RELAXED);
    pthread_mutex_lock(&log_lock);
    log_redact_locked(msg, clean, sizeof(clean)); /* invariant 3 */
    if (log_sink != NULL) {
        log_sink(log_sink_ctx, level, clean);
    } else if (format == LOG_FORMAT_JSON) {
        log_json_escape(clean, json);
        fprintf(stderr, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", when,
                log_level_name(level), json);
    } else if (bare) {
        fprintf(stderr, "%s\n", clean);
    } else {
        fprintf(stderr, "%s %-5s %s\n", when, log_level_name(level), clean);
    }
    pthread_mutex_unlock(&log_lock);
}

void log_write(int level, const char *fmt, ...)
{
    if (level < __atomic_load_n(&log_level, __ATOMIC_RELAXED))
        return;
    char msg[LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_emit(level, msg, 0);
}

void log_notice(const char *msg)
{
    log_emit(LOG_INFO, msg, 1);
}
