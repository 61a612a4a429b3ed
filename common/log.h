/*
 * log.h - the process's one logger, shared by the daemon, the store's log callback and the NATS
 * front, so no library needs the executable to define it.
 *
 * A line is a level and a message. By default lines at or above the level go to stderr as
 * "<UTC time> <level> <message>"; a program or a test may install its own sink instead (the
 * daemon's unit tests capture lines that way). Thread-safe: one line is written whole.
 */
#ifndef LANESCHED_COMMON_LOG_H
#define LANESCHED_COMMON_LOG_H

enum { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/* Receives each line at or above the level. `line` is borrowed for the call. */
typedef void (*log_sink_fn)(void *ctx, int level, const char *line);

/* Lines below `level` are dropped. Default LOG_INFO. */
void log_level_set(int level);
/* "debug", "info", "warn" or "error" -> *out_level; -1 (untouched) for anything else. */
int log_level_parse(const char *name, int *out_level /* out */);
/* The name of a level ("info"); "?" for an unknown one. Static storage. */
const char *log_level_name(int level);
/* Replaces the sink (NULL restores stderr). ctx is borrowed until the next call. */
void log_sink_set(log_sink_fn sink, void *ctx);

void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
