/*
 * frame.c - how the store carries an item's reply_to next to its payload, written and read in
 * this one place.
 *
 * Layout of a stored payload:
 *
 *   0         4                   4 + R
 *   +---------+-------------------+----------------------+
 *   | R       | reply_to          | payload              |
 *   | u32 LE  | R bytes, no NUL   | the rest             |
 *   +---------+-------------------+----------------------+
 *
 * Invariants:
 *   1. frame_decode(frame_encode(r, p)) gives back r and p byte for byte.
 *   2. A stored payload shorter than 4 bytes, or whose R runs past its end, is read as all
 *      payload with an empty reply_to: a damaged frame never reads out of bounds.
 *
 * Rejected: a field of its own in the segment entry. The store stays ignorant of what a payload
 * means, and its format does not change for a daemon-level detail. A buffer allocated per item
 * (the first version): the store copies the frame at once, so one scratch buffer serves them all.
 */
#include "scheduler/daemon/daemon_int.h"

#include <stdlib.h>
#include <string.h>

uint8_t *frame_encode(const char *reply_to, codec_bytes_t payload, uint8_t **scratch, size_t *cap,
                      size_t *out_len)
{
    size_t rlen = reply_to != NULL ? strlen(reply_to) : 0;
    size_t len = 4 + rlen + payload.len;
    if (len > *cap) {
        size_t want = len > 2 * *cap ? len : 2 * *cap;
        uint8_t *grown = realloc(*scratch, want);
        if (grown == NULL)
            return NULL;
        *scratch = grown;
        *cap = want;
    }
    uint8_t *buf = *scratch;
    buf[0] = (uint8_t)rlen;
    buf[1] = (uint8_t)(rlen >> 8);
    buf[2] = (uint8_t)(rlen >> 16);
    buf[3] = (uint8_t)(rlen >> 24);
    if (rlen != 0)
        memcpy(buf + 4, reply_to, rlen);
    if (payload.len != 0)
        memcpy(buf + 4 + rlen, payload.ptr, payload.len);
    *out_len = len;
    return buf;
}

void frame_decode(const uint8_t *p, size_t n, codec_bytes_t *out_reply_to,
                  codec_bytes_t *out_payload)
{
    size_t rlen =
        n >= 4 ? (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24 : 0;
    if (n < 4 || rlen > n - 4) {
        *out_reply_to = (codec_bytes_t){NULL, 0};
        *out_payload = (codec_bytes_t){n ? p : NULL, n};
        return;
    }
    *out_reply_to = (codec_bytes_t){rlen ? p + 4 : NULL, rlen};
    size_t plen = n - 4 - rlen;
    *out_payload = (codec_bytes_t){plen ? p + 4 + rlen : NULL, plen};
}
