/*
 * log.c - the shared logger (log.h).
 *
 * Invariants:
 *   1. A line is formatted and redacted before the lock is taken and written under it, so
 *      concurrent lines never interleave, and a slow format never blocks another thread's line.
 *   2. A message longer than LOG_LINE_MAX is cut, never split over two lines.
 *   3. No sink ever sees a credential of a URL or a registered secret (log_redact runs on every
 *      line, whatever the sink and the format).
 *   4. A line is one line whatever the message holds (common/utf8.c): in the text format and
 *      for a sink, every control byte (newline, ESC, any C0 or C1 control, DEL) and backslash
 *      is written as an escape and a byte that is not UTF-8 as \xNN, so a client's name can
 *      neither forge a line nor drive the terminal; in the JSON format the line is valid JSON
 *      with every control escaped and bad bytes as U+FFFD.
 *
 * Rejected: syslog (containers collect stderr), a logger per module (one level and one sink per
 * process is what an operator sets), redacting only the lines known to print a URL (every
 * nats.c error text may quote one, and a future line would forget), and escaping at the call
 * sites that print client strings (one forgotten %s is a forged line).
 */
#include "common/log.h"

#include "common/utf8.h"

#include <pthread.h>
#include <inttypes.h>
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

static void log_emit(int level, const char *msg, int bare)
{
    char clean[LOG_LINE_MAX], shown[UTF8_ESCAPED_MAX(LOG_LINE_MAX)];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    int format = __atomic_load_n(&log_format, __ATOMIC_RELAXED);
    pthread_mutex_lock(&log_lock);
    int json = log_sink == NULL && format == LOG_FORMAT_JSON;
    log_redact_locked(msg, clean, sizeof(clean)); /* invariant 3 */
    utf8_escape(clean, strlen(clean), json ? UTF8_JSON : UTF8_TEXT, shown, sizeof(shown));
    if (log_sink != NULL) { /* invariant 4 */
        log_sink(log_sink_ctx, level, shown);
    } else if (json) {
        fprintf(stderr, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", when,
                log_level_name(level), shown);
    } else if (bare) {
        fprintf(stderr, "%s\n", shown);
    } else {
        fprintf(stderr, "%s %-5s %s\n", when, log_level_name(level), shown);
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

static void log_budget_report(log_budget_t *b, const char *what)
{
    log_write(LOG_WARN, "%" PRIu64 " lines (%s) left out of the log: over %u a second", b->dropped,
              what, LOG_BUDGET_LINES);
    b->dropped = 0;
}

void log_budget_flush(log_budget_t *b, uint64_t now_ns, const char *what)
{
    if (b->dropped != 0 && now_ns / 1000000000ull != b->second)
        log_budget_report(b, what);
}

int log_budget_allow(log_budget_t *b, int level, uint64_t now_ns, const char *what)
{
    if (level < __atomic_load_n(&log_level, __ATOMIC_RELAXED))
        return 0;
    uint64_t second = now_ns / 1000000000ull;
    if (second != b->second) {
        b->second = second;
        b->lines = 0;
    }
    if (b->lines >= LOG_BUDGET_LINES) {
        b->dropped++;
        return 0;
    }
    b->lines++;
    if (b->dropped != 0)
        log_budget_report(b, what);
    return 1;
}
