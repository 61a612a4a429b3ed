/*
 * log.h - the process's one logger, shared by the daemon, the store's log callback and the NATS
 * front, so no library needs the executable to define it.
 *
 * A line is a level and a message. By default lines at or above the level go to stderr, as
 * "<UTC time> <level> <message>" (text) or as one JSON object per line (json: {"time", "level",
 * "msg"}); a program or a test may install its own sink instead (the daemon's unit tests capture
 * lines that way). Thread-safe: one line is written whole.
 *
 * A message is one line whatever it quotes: control bytes (newline, ESC, every C0 and C1
 * control, DEL) and backslashes are escaped (common/utf8.h, UTF8_TEXT for the text format and
 * for a sink, UTF8_JSON inside the JSON format), so a client-chosen name can neither forge a
 * line nor send a terminal escape.
 *
 * Credentials never reach a line: before any sink sees a message, the password of every URL
 * written as scheme://user:password@host becomes "***" (user kept), a URL's token
 * (scheme://token@host) becomes "***", and so does every string registered with log_secret_add
 * (the --password and --token values).
 */
#ifndef LANESCHED_COMMON_LOG_H
#define LANESCHED_COMMON_LOG_H

#include <stddef.h>
#include <stdint.h>

enum { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };
enum { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON = 1 };

/* Receives each line at or above the level (already redacted and escaped as in the text format).
 * `line` is borrowed for the call. */
typedef void (*log_sink_fn)(void *ctx, int level, const char *line);

/* Lines below `level` are dropped. Default LOG_INFO. */
void log_level_set(int level);
/* "debug", "info", "warn" or "error" -> *out_level; -1 (untouched) for anything else. */
int log_level_parse(const char *name, int *out_level /* out */);
/* The name of a level ("info"); "?" for an unknown one. Static storage. */
const char *log_level_name(int level);
/* How the stderr sink writes a line. Default LOG_FORMAT_TEXT. */
void log_format_set(int format);
/* "text" or "json" -> *out_format; -1 (untouched) for anything else. */
int log_format_parse(const char *name, int *out_format /* out */);
/* Replaces the sink (NULL restores stderr). ctx is borrowed until the next call. */
void log_sink_set(log_sink_fn sink, void *ctx);
/* Registers a secret (copied) to be written as "***" wherever it appears; strings shorter than
 * LOG_SECRET_MIN are ignored (they would blank ordinary words), at most LOG_SECRETS_MAX are kept.
 * 0, or -1 when it was not kept. */
#define LOG_SECRET_MIN  4
#define LOG_SECRETS_MAX 8
int log_secret_add(const char *secret);

void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* log_write whatever the level: for lines a supervisor waits for ("lanesched: ready"). In the
 * text format the message goes to stderr alone on its line, without time or level. */
void log_notice(const char *msg);

/*
 * A budget for one kind of line that a client can cause at will (a consumer registered, left or
 * declared dead): at most LOG_BUDGET_LINES a second are written; the rest are counted, and the
 * next line allowed first says how many were left out. Zero-initialised before use; one thread.
 */
#define LOG_BUDGET_LINES 20u
typedef struct {
    uint64_t second;  /* the second (now_ns / 1e9) whose lines are counted */
    uint32_t lines;   /* lines allowed in it */
    uint64_t dropped; /* lines left out since the last one allowed */
} log_budget_t;
/* 1 when a line of this kind at `level` may be written at now_ns (monotonic); what names the kind
 * in the line that reports the lines left out. A line the level drops uses no budget (0). */
int log_budget_allow(log_budget_t *b, int level, uint64_t now_ns, const char *what);
/* Writes the count of lines left out once their second is over, if no line allowed since did:
 * for a timer, so a flood's last second is reported too. */
void log_budget_flush(log_budget_t *b, uint64_t now_ns, const char *what);

/* The redaction of every line, exposed for tests: writes msg with its credentials replaced into
 * out (cap bytes, always NUL-terminated, cut when too long). */
void log_redact(const char *msg, char *out /* out */, size_t cap);

#endif
