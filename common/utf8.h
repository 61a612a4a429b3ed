/*
 * utf8.h - the one UTF-8 validator and escaper of the project: log lines, the stats document's
 * strings and Prometheus label values all take client bytes (a model, a consumer name) through
 * it, so a byte that a terminal, a JSON parser or a log collector would read as structure never
 * reaches them raw.
 *
 * A "control" here is every code point that moves the cursor, ends a line or changes how the
 * rest is shown: C0 (U+0000-U+001F), DEL (U+007F), C1 (U+0080-U+009F), the line and paragraph
 * separators (U+2028, U+2029) and the bidirectional overrides and isolates (U+202A-U+202E,
 * U+2066-U+2069).
 *
 * Ownership: every pointer is borrowed for the call; out is the caller's buffer.
 */
#ifndef LANESCHED_COMMON_UTF8_H
#define LANESCHED_COMMON_UTF8_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    /* A log line as text: '\' -> "\\", newline, CR and tab -> "\n", "\r", "\t", any other
     * control -> "\xNN" (C0, DEL) or "\uNNNN" (the others); a byte that is not UTF-8 ->
     * "\xNN". The line stays one line, shows every byte it was given, and reads back
     * unambiguously. */
    UTF8_TEXT,
    /* The body of a JSON string: '"' and '\' escaped, every control "\uNNNN" (newline, CR,
     * tab as "\n", "\r", "\t"), a byte that is not UTF-8 -> "\ufffd". Valid JSON whatever the
     * input, and no control reaches a reader of the decoded string unescaped either. */
    UTF8_JSON,
    /* A Prometheus label value: '\', '"' and newline escaped as the exposition format says,
     * a byte that is not UTF-8 -> U+FFFD (the format requires UTF-8). */
    UTF8_PROM,
    /* Valid UTF-8, nothing escaped: a byte that is not UTF-8 -> U+FFFD (for a library that
     * escapes on its own, such as jansson). */
    UTF8_REPLACE,
} utf8_mode_t;

/* The most bytes utf8_escape writes for n input bytes, the terminator included: "\u202e" (6)
 * for a 3-byte control is the largest growth per byte. */
#define UTF8_ESCAPED_MAX(n) ((n)*6 + 1)

/* Length of the valid UTF-8 sequence at s (n bytes readable), 0 when there is none: a bad
 * lead byte, a missing continuation, an overlong form, a surrogate, a value past U+10FFFF,
 * or n == 0. */
size_t utf8_seq_len(const char *s, size_t n);

/* 1 when s[0..n) is valid UTF-8 throughout, else 0. */
int utf8_valid(const char *s, size_t n);

/* 1 when the code point is a control in the sense above. */
int utf8_is_control(uint32_t cp);

/* Writes s[0..n) escaped for mode into out (cap bytes) and NUL-terminates it (when cap > 0).
 * When out is too small the text is cut before the first escape or character that does not
 * fit whole. Returns the bytes written, the terminator excluded. */
size_t utf8_escape(const char *s, size_t n, utf8_mode_t mode, char *out /* out */, size_t cap);

#endif
