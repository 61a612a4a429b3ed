/*
 * utf8.c - the UTF-8 validator and escaper (utf8.h).
 *
 * Invariants:
 *   1. utf8_seq_len accepts exactly the well-formed sequences of Unicode's table 3-7: no
 *      overlong form, no surrogate, nothing past U+10FFFF, never a read past n.
 *   2. In UTF8_TEXT and UTF8_JSON no control (utf8.h) is written raw, so one input is one
 *      line of output whatever bytes it holds; UTF8_PROM and UTF8_REPLACE write valid UTF-8.
 *   3. Output is cut only between whole escapes or characters, and always NUL-terminated.
 *
 * Rejected: dropping controls instead of escaping them (an operator reading a forged name must
 * see what was sent), and escaping every non-ASCII character (model and consumer names in
 * other scripts stay readable).
 */
#include "common/utf8.h"

#include <stdio.h>
#include <string.h>

size_t utf8_seq_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0)
        return 0;
    size_t len = u[0] < 0x80                    ? 1
                 : u[0] >= 0xc2 && u[0] <= 0xdf ? 2
                 : u[0] >= 0xe0 && u[0] <= 0xef ? 3
                 : u[0] >= 0xf0 && u[0] <= 0xf4 ? 4
                                                : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
    }
    /* invariant 1: the second byte's range for the leads that need one */
    if ((u[0] == 0xe0 && u[1] < 0xa0) || (u[0] == 0xed && u[1] >= 0xa0) ||
        (u[0] == 0xf0 && u[1] < 0x90) || (u[0] == 0xf4 && u[1] >= 0x90))
        return 0;
    return len;
}

int utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq_len(s + i, n - i);
        if (len == 0)
            return 0;
        i += len;
    }
    return 1;
}

int utf8_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The code point of a valid sequence of len bytes. */
static uint32_t utf8_decode(const unsigned char *u, size_t len)
{
    switch (len) {
    case 1:
        return u[0];
    case 2:
        return (uint32_t)(u[0] & 0x1f) << 6 | (u[1] & 0x3f);
    case 3:
        return (uint32_t)(u[0] & 0x0f) << 12 | (uint32_t)(u[1] & 0x3f) << 6 | (u[2] & 0x3f);
    default:
        return (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3f) << 12 |
               (uint32_t)(u[2] & 0x3f) << 6 | (u[3] & 0x3f);
    }
}

/* The escape of one character (or of the bad byte b when len == 0) into esc; its length, 0
 * when the character is copied as it is. */
static size_t utf8_escape_one(const unsigned char *u, size_t len, utf8_mode_t mode, char esc[8])
{
    if (len == 0) {
        if (mode == UTF8_TEXT)
            return (size_t)snprintf(esc, 8, "\\x%02x", u[0]);
        if (mode == UTF8_JSON)
            return (size_t)snprintf(esc, 8, "\\ufffd");
        memcpy(esc, "\xef\xbf\xbd", 3);
        return 3;
    }
    uint32_t cp = utf8_decode(u, len);
    if (mode == UTF8_REPLACE)
        return 0;
    if (cp == '\\' || (cp == '"' && mode != UTF8_TEXT)) {
        esc[0] = '\\';
        esc[1] = (char)cp;
        return 2;
    }
    if (cp == '\n' || (mode != UTF8_PROM && (cp == '\r' || cp == '\t'))) {
        esc[0] = '\\';
        esc[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
        return 2;
    }
    if (mode == UTF8_PROM || !utf8_is_control(cp))
        return 0;
    if (mode == UTF8_TEXT && cp < 0x80)
        return (size_t)snprintf(esc, 8, "\\x%02x", (unsigned)cp);
    return (size_t)snprintf(esc, 8, "\\u%04x", (unsigned)cp);
}

size_t utf8_escape(const char *s, size_t n, utf8_mode_t mode, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    size_t w = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq_len(s + i, n - i);
        char esc[8];
        size_t e = utf8_escape_one(u + i, len, mode, esc);
        const char *piece = e != 0 ? esc : s + i;
        size_t plen = e != 0 ? e : len;
        if (w + plen > cap - 1) /* invariant 3 */
            break;
        memcpy(out + w, piece, plen);
        w += plen;
        i += len != 0 ? len : 1;
    }
    out[w] = '\0';
    return w;
}
