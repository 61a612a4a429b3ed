/*
 * log.c - the shared logger (log.h).
 *
 * Invariants:
 *   1. A line is formatted before the lock is taken and written under it, so concurrent lines
 *      never interleave, and a slow format never blocks another thread's line.
 *   2. A message longer than LOG_LINE_MAX is cut, never split over two lines.
 *
 * Rejected: syslog (containers collect stderr) and a logger per module (one level and one sink
 * per process is what an operator sets).
 */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Longest message kept: a log line names a few ids and subjects, never a payload. */
#define LOG_LINE_MAX 1024

static const char *const log_names[] = {"debug", "info", "warn", "error"};
static int log_level = LOG_INFO;
static log_sink_fn log_sink;
static void *log_sink_ctx;
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

void log_sink_set(log_sink_fn sink, void *ctx)
{
    pthread_mutex_lock(&log_lock);
    log_sink = sink;
    log_sink_ctx = ctx;
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
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    pthread_mutex_lock(&log_lock);
    if (log_sink != NULL)
        log_sink(log_sink_ctx, level, msg);
    else
        fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                log_level_name(level), msg);
    pthread_mutex_unlock(&log_lock);
}
