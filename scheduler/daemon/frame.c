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
 * and, for an item the producer stamped with created_unix_ns (FRAME_CREATED set in the word):
 *
 *   0                  4                   12             12 + R
 *   +------------------+-------------------+--------------+-----------+
 *   | R | FRAME_CREATED| created_unix_ns   | reply_to     | payload   |
 *   | u32 LE           | u64 LE            | R bytes      | the rest  |
 *   +------------------+-------------------+--------------+-----------+
 *
 * Invariants:
 *   1. frame_decode(frame_encode(r, p, c)) gives back r, p and c byte for byte.
 *   2. A stored payload shorter than its header, or whose R runs past its end, is read as all
 *      payload with an empty reply_to: a damaged frame never reads out of bounds.
 *   3. An item without created_unix_ns is framed exactly as before the flag existed, and frames
 *      written before it read the same: R never reaches 2^31 (it is at most the payload's size).
 *
 * Rejected: a field of its own in the segment entry. The store stays ignorant of what a payload
 * means, and its format does not change for a daemon-level detail. A buffer allocated per item:
 * the store copies the frame at once, so one scratch buffer serves them all.
 */
#include "scheduler/daemon/daemon_int.h"

#include <stdlib.h>
#include <string.h>

/* The word's top bit: a u64 created_unix_ns follows it. */
#define FRAME_CREATED 0x80000000u

uint8_t *frame_encode(const char *reply_to, codec_bytes_t payload, uint64_t created_unix_ns,
                      uint8_t **scratch, size_t *cap, size_t *out_len)
{
    size_t rlen = reply_to != NULL ? strlen(reply_to) : 0;
    size_t head = created_unix_ns != 0 ? 12 : 4;
    size_t len = head + rlen + payload.len;
    if (rlen >= FRAME_CREATED)
        return NULL;
    if (len > *cap) {
        size_t want = len > 2 * *cap ? len : 2 * *cap;
        uint8_t *grown = realloc(*scratch, want);
        if (grown == NULL)
            return NULL;
        *scratch = grown;
        *cap = want;
    }
    uint8_t *buf = *scratch;
    uint32_t word = (uint32_t)rlen | (created_unix_ns != 0 ? FRAME_CREATED : 0);
    for (int i = 0; i < 4; i++)
        buf[i] = (uint8_t)(word >> (8 * i));
    for (int i = 0; head == 12 && i < 8; i++)
        buf[4 + i] = (uint8_t)(created_unix_ns >> (8 * i));
    if (rlen != 0)
        memcpy(buf + head, reply_to, rlen);
    if (payload.len != 0)
        memcpy(buf + head + rlen, payload.ptr, payload.len);
    *out_len = len;
    return buf;
}

void frame_decode(const uint8_t *p, size_t n, codec_bytes_t *out_reply_to,
                  codec_bytes_t *out_payload, uint64_t *out_created_unix_ns)
{
    uint32_t word =
        n >= 4 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
               : 0;
    size_t head = word & FRAME_CREATED ? 12 : 4;
    size_t rlen = word & ~FRAME_CREATED;
    if (n < head || rlen > n - head) {
        *out_reply_to = (codec_bytes_t){NULL, 0};
        *out_payload = (codec_bytes_t){n ? p : NULL, n};
        *out_created_unix_ns = 0;
        return;
    }
    uint64_t created = 0;
    for (int i = 0; head == 12 && i < 8; i++)
        created |= (uint64_t)p[4 + i] << (8 * i);
    *out_created_unix_ns = created;
    *out_reply_to = (codec_bytes_t){rlen ? p + head : NULL, rlen};
    size_t plen = n - head - rlen;
    *out_payload = (codec_bytes_t){plen ? p + head + rlen : NULL, plen};
}
