/*
 * wire.c - the protobuf wire format by hand, for the messages that carry items on the hot path:
 * Submit, which the daemon reads (submit.c), and Batch, which the daemon writes and consumers read
 * (batch.c). Tags, varints, fixed-width values, length-prefixed fields, the skipping of unknown
 * ones, and their writing.
 *
 * Invariants:
 *   1. Every rule is protobuf-c 1.4's, so a message decodes here exactly when protobuf-c unpacks
 *      it, to the same values (tests/unit/test_codec_wire.c compares the two on generated and
 *      mutated messages): a tag is at most 5 bytes and its first byte carries a field number, a
 *      varint at most 10 bytes (a uint32 keeps its low 32 bits), a length at most 5 bytes, at
 *      most 2^31 - 1 and within the message, fixed widths whole; wire types 3, 4, 6 and 7 are
 * refused.
 *   2. A reader never reads past w->end; every failure leaves the reader where it was.
 *   3. A writer writes what protobuf-c's packer writes: fields in number order, proto3 defaults
 *      (0, empty) left out, varints minimal; the caller sized the buffer with wire_varint_len.
 *
 * Rejected alternatives:
 *   - protobuf_c_message_unpack for Submit: five to six allocations
 *     per item (the item, its id, model, payload, reply_to, hashes), which made the decode the
 *     largest cost of a submit in the daemon's profile; and protobuf_c_message_pack for Batch,
 *     whose descriptor walk cost more than the copies of the payloads. The messages with no
 *     per-item fields stay on protobuf-c.
 *   - A generated parser (nanopb, upb): another dependency and code generator for one message.
 */
#include "codec/codec_int.h"

#include <string.h>

int wire_tag(wire_t *w, uint32_t *field, unsigned *type)
{
    const uint8_t *p = w->p;
    size_t left = (size_t)(w->end - p), max = left > 5 ? 5 : left;
    if (left == 0 || (p[0] & 0xf8) == 0)
        return 0; /* field number 0 in the first byte (protobuf-c's rule) */
    uint32_t tag = (uint32_t)(p[0] & 0x7f) >> 3;
    unsigned shift = 4;
    size_t n = 1;
    if (p[0] & 0x80) {
        for (;; n++) {
            if (n >= max)
                return 0;
            tag |= (uint32_t)(p[n] & 0x7f) << shift;
            shift += 7;
            if (!(p[n] & 0x80))
                break;
        }
        n++;
    }
    *field = tag;
    *type = p[0] & 7;
    w->p = p + n;
    return 1;
}

int wire_varint(wire_t *w, uint64_t *v)
{
    const uint8_t *p = w->p;
    size_t left = (size_t)(w->end - p), max = left > 10 ? 10 : left;
    uint64_t x = 0;
    for (size_t i = 0; i < max; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            w->p = p + i + 1;
            return 1;
        }
    }
    return 0;
}

int wire_fixed64(wire_t *w, uint64_t *v)
{
    if (w->end - w->p < 8)
        return 0;
    uint64_t x = 0;
    for (int i = 0; i < 8; i++)
        x |= (uint64_t)w->p[i] << (8 * i);
    *v = x;
    w->p += 8;
    return 1;
}

int wire_bytes(wire_t *w, wire_t *field)
{
    const uint8_t *p = w->p;
    size_t left = (size_t)(w->end - p), max = left > 5 ? 5 : left;
    uint64_t len = 0;
    size_t n = 0;
    for (;; n++) {
        if (n >= max)
            return 0;
        len |= (uint64_t)(p[n] & 0x7f) << (7 * n);
        if (!(p[n] & 0x80))
            break;
    }
    n++;
    if (len > INT32_MAX || len > left - n) /* protobuf-c: a length above 2 GiB is refused */
        return 0;
    field->p = p + n;
    field->end = p + n + len;
    w->p = field->end;
    return 1;
}

int wire_skip(wire_t *w, unsigned type)
{
    wire_t tmp = *w, sub;
    uint64_t v;
    int ok = 0;
    switch (type) {
    case WIRE_VARINT:
        ok = wire_varint(&tmp, &v);
        break;
    case WIRE_FIXED64:
        ok = wire_fixed64(&tmp, &v);
        break;
    case WIRE_BYTES:
        ok = wire_bytes(&tmp, &sub);
        break;
    case WIRE_FIXED32:
        ok = tmp.end - tmp.p >= 4;
        tmp.p += ok ? 4 : 0;
        break;
    default: /* groups (3, 4) and 6, 7: protobuf-c refuses them */
        break;
    }
    if (ok)
        *w = tmp;
    return ok;
}

/* ---- writing --------------------------------------------------------------------------------- */

size_t wire_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

uint8_t *wire_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

uint8_t *wire_put_tag(uint8_t *p, uint32_t field, unsigned type)
{
    return wire_put_varint(p, (uint64_t)field << 3 | type);
}

uint8_t *wire_put_fixed64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

uint8_t *wire_put_bytes(uint8_t *p, uint32_t field, const void *data, size_t len)
{
    p = wire_put_tag(p, field, WIRE_BYTES);
    p = wire_put_varint(p, len);
    if (len != 0)
        memcpy(p, data, len);
    return p + len;
}
