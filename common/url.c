/*
 * url.c - the NATS server list check (url.h).
 *
 * Invariants:
 *   1. Nothing is resolved or connected: the check is about the text alone, so it runs before
 *      any wait for NATS and a typo fails the start at once instead of being retried.
 *   2. An error never quotes a password: the URL is shown with its userinfo as "***".
 *   3. Every URL the grammar of url.h accepts is one nats.c 3.4 parses to the same host and
 *      port (tests/unit/test_url.c holds the cases, test_ops.sh the daemon's exit).
 *
 * Rejected: resolving the host here (a name that resolves later, when its container starts,
 * is a legitimate start-before-NATS case), and a URL parsing library (nats.c's own parser is
 * the reference, and it is a few lines).
 */
#include "common/url.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The URL as shown in an error: userinfo replaced (invariant 2), cut to fit. */
static void url_shown(const char *u, size_t n, char *out, size_t cap)
{
    const char *at = NULL;
    for (size_t i = 0; i < n; i++)
        at = u[i] == '@' ? u + i : at;
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < n; i++) {
        if (memcmp(u + i, "://", 3) == 0) {
            sep = u + i + 3;
            break;
        }
    }
    if (at != NULL) {
        const char *start = sep != NULL && sep <= at ? sep : u;
        snprintf(out, cap, "%.*s***%.*s", (int)(start - u), u, (int)(u + n - at), at);
    } else {
        snprintf(out, cap, "%.*s", (int)n, u);
    }
}

static int url_fail(char *err, size_t cap, const char *u, size_t n, const char *why)
{
    char shown[256];
    url_shown(u, n, shown, sizeof(shown));
    snprintf(err, cap, "'%s' is not a NATS URL: %s", shown, why);
    return -1;
}

static int url_host_ok(const char *h, size_t n)
{
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        int zone = 0; /* after '%': an interface name */
        for (size_t i = 1; i + 1 < n; i++) {
            unsigned char c = (unsigned char)h[i];
            zone |= c == '%';
            if (!(zone ? isalnum(c) || c == '%' || c == '.' || c == '-' || c == '_'
                       : isxdigit(c) || c == ':' || c == '.'))
                return 0;
        }
        return n > 2;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)h[i]) && h[i] != '-' && h[i] != '.' && h[i] != '_')
            return 0;
    }
    return n > 0;
}

/* One URL, u[0..n), already trimmed. */
static int url_check_one(const char *u, size_t n, char *err, size_t cap, int *flags)
{
    const char *p = u, *end = u + n;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)u[i] <= ' ' || u[i] == 0x7f)
            return url_fail(err, cap, u, n,
                            "it contains a space or a control character; expected "
                            "nats://HOST[:PORT], tls://HOST[:PORT] or HOST:PORT");
    }
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < n && sep == NULL; i++)
        sep = memcmp(u + i, "://", 3) == 0 ? u + i : NULL;
    if (sep != NULL) {
        size_t slen = (size_t)(sep - u);
        if (slen == 4 && strncasecmp(u, "nats", 4) == 0) {
        } else if (slen == 3 && strncasecmp(u, "tls", 3) == 0) {
            *flags |= URL_TLS;
        } else if ((slen == 2 && strncasecmp(u, "ws", 2) == 0) ||
                   (slen == 3 && strncasecmp(u, "wss", 3) == 0)) {
            return url_fail(err, cap, u, n,
                            "WebSocket is not supported by the NATS C client (libnats 3.4); "
                            "use the server's client port with nats:// or tls://");
        } else {
            char scheme[32];
            snprintf(scheme, sizeof(scheme), "%.*s", (int)(slen < 24 ? slen : 24), u);
            char why[128];
            snprintf(why, sizeof(why), "unknown scheme '%s' (use nats://, tls:// or HOST:PORT)",
                     scheme);
            return url_fail(err, cap, u, n, why);
        }
        p = sep + 3;
    }
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        at = *q == '@' ? q : at;
    if (at != NULL)
        p = at + 1;
    if (end > p && end[-1] == '/')
        end--;
    for (const char *q = p; q < end; q++) {
        if (*q == '/' || *q == '?' || *q == '#')
            return url_fail(err, cap, u, n, "a NATS URL has no path or query");
    }
    const char *colon = NULL, *close = NULL;
    for (const char *q = p; q < end; q++) {
        close = *q == ']' ? q : close;
        colon = *q == ':' && (close != NULL || p[0] != '[') ? q : colon;
    }
    const char *hend = colon != NULL ? colon : end;
    if (!url_host_ok(p, (size_t)(hend - p)))
        return url_fail(err, cap, u, n,
                        hend == p ? "no host" : "the host is not a DNS name or an IP address");
    if (colon != NULL) {
        long port = 0;
        const char *q = colon + 1;
        if (q == end)
            return url_fail(err, cap, u, n, "the port is empty");
        for (; q < end; q++) {
            if (!isdigit((unsigned char)*q) || (port = port * 10 + (*q - '0')) > 65535)
                return url_fail(err, cap, u, n, "the port is not a number from 1 to 65535");
        }
        if (port == 0)
            return url_fail(err, cap, u, n, "the port is not a number from 1 to 65535");
    }
    return 0;
}

int url_list_check(const char *list, char *err, size_t cap, int *out_flags)
{
    int flags = 0, count = 0;
    if (list == NULL || list[0] == '\0') {
        snprintf(err, cap, "no NATS server URL given");
        return -1;
    }
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        const char *e = comma != NULL ? comma : p + strlen(p);
        const char *s = p;
        while (s < e && (*s == ' ' || *s == '\t'))
            s++;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e == s) {
            snprintf(err, cap,
                     "the server list has an empty URL (a doubled comma, or one at an "
                     "end)");
            return -1;
        }
        if (++count > URL_LIST_MAX) {
            snprintf(err, cap, "more than %d URLs in the server list", URL_LIST_MAX);
            return -1;
        }
        if (url_check_one(s, (size_t)(e - s), err, cap, &flags) != 0)
            return -1;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    if (out_flags != NULL)
        *out_flags = flags;
    return 0;
}
