/*
 * url.h - the check of a NATS server list before anything connects: every program of the
 * project that takes --server refuses a list nats.c would take and then mishandle.
 *
 * nats.c 3.4 (natsUrl_Create) reads any "scheme://" as it reads "nats://" and any other string
 * as a host: `htp://host:4222` connects without TLS as if it were right, `not a url` is looked
 * up as a host name and retried forever as unreachable, `ws://` and `wss://` speak the NATS
 * protocol to a WebSocket port (nats.c has no WebSocket transport). So the list is checked
 * here, with one error text per fault:
 *
 *   URL    = [SCHEME "://"] [USER [":" PASSWORD] "@"] HOST [":" PORT] ["/"]
 *   SCHEME = "nats" | "tls"   (any case; "tls" asks for TLS, as in every NATS client)
 *   HOST   = a DNS name or IPv4 address (letters, digits, '-', '.', '_'), or "[" IPv6 "]"
 *   PORT   = 1..65535 (default 4222)
 *
 * Ownership: every pointer is borrowed for the call.
 */
#ifndef LANESCHED_COMMON_URL_H
#define LANESCHED_COMMON_URL_H

#include <stddef.h>

/* The most URLs one list may hold (the daemon's and the tools' option arrays). */
#define URL_LIST_MAX 32

/* Flags of a checked list. */
enum { URL_TLS = 1 }; /* some URL says tls:// */

/* Checks a comma-separated list (spaces around a comma are allowed). 0 when every URL is one
 * nats.c handles as written, with *out_flags set (may be NULL); -1 with err (cap bytes) naming
 * the first bad URL and why, without its password, and *out_flags untouched. */
int url_list_check(const char *list, char *err /* out */, size_t cap, int *out_flags /* out */);

#endif
