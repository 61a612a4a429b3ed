/*
 * codec_int.h - private to codec/: the protobuf-c plumbing every message file shares.
 *
 * Invariants of every message file (submit.c, register.c, batch.c, ack.c):
 *   1. No protobuf-c type crosses codec.h. A decoded codec_*_t lives in a private box with the
 *      unpacked protobuf-c message (codec_pb_decode; the hand-read Submit, SubmitReply and
 *      Batch in one allocation with their arena); destroy recovers the box from the public
 *      pointer and frees the message with it.
 *   2. Decoded pointers are views into the unpacked message (which owns copies of every string
 *      and bytes field), or, for Submit (decoded by hand, wire.c), into the box's own arena, so
 *      they live exactly as long as the box and never point into the caller's input buffer.
 *   3. A decoder either returns CODEC_OK and sets *out, or returns an error and leaves *out as
 *      it was; every function releases what it allocated through a single `out:` label.
 *   4. Zero is absence (proto3): signature 0 is "no signature", an empty hash vector is "no
 *      hashes", string "" is "no string". The encoder refuses a signature of 0 flagged as
 *      present rather than silently dropping it.
 *
 * Rejected:
 *   - Copying strings/bytes into caller-owned memory: doubles allocations on the hot submit path
 *     for data the store copies once anyway; views with an explicit lifetime (as LMDB's
 *     mdb_get) are cheaper and the rule is stated once in codec.h.
 *   - Exposing protobuf-c structs: every module would then depend on generated code and on
 *     protobuf-c's ownership rules.
 *   - Validating on encode: a test producer must be able to send exactly what a buggy producer
 *     would, so encoders only check arguments.
 */
#ifndef LANESCHED_CODEC_INT_H
#define LANESCHED_CODEC_INT_H

#include "codec/codec.h"
#include "lanes.pb-c.h"

#include <stdlib.h>
#include <string.h>

/* Unpacks buf (borrowed) into *msg, returned to the caller to free with codec_pb_free.
 * CODEC_EMALFORMED for bytes that are not the message, CODEC_ENOMEM when allocation failed. */
codec_status_t codec_pb_unpack(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len,
                               ProtobufCMessage **msg /* out */);
/* Frees an unpacked message (taken). NULL-safe. */
void codec_pb_free(ProtobufCMessage *msg);
/* Fills the public struct *pub (pub_size bytes) with views of msg, or refuses it. */
typedef codec_status_t (*codec_pb_view_fn)(const ProtobufCMessage *msg, void *pub /* out */);
/* The one decode of the messages protobuf-c reads: unpacks buf (borrowed) as desc and boxes the
 * message with its public struct (invariant 1), which *out_pub points to, returned to the caller
 * to free with codec_pb_destroy; *out_pub untouched on failure. */
codec_status_t codec_pb_decode(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len,
                               size_t pub_size, codec_pb_view_fn view, void **out_pub /* out */);
void codec_pb_destroy(void *pub); /* NULL-safe */
/* Packs msg (borrowed) into *out_buf, returned to the caller to free(). */
codec_status_t codec_pb_pack(const ProtobufCMessage *msg, uint8_t **out_buf /* out */,
                             size_t *out_len /* out */);

/* A box: `head` bytes of fixed part followed by n elements of `elem` bytes; NULL on overflow. */
static inline void *codec_box_alloc(size_t head, size_t n, size_t elem)
{
    if (n > (SIZE_MAX - head) / elem)
        return NULL;
    return malloc(head + n * elem);
}

/* Scratch array for encoding; never NULL on success, even for n == 0. */
static inline void *codec_scratch_alloc(size_t n, size_t elem)
{
    return calloc(n ? n : 1, elem);
}

/* A view of wire bytes (borrowed from the unpacked message): ptr NULL exactly when len is 0. */
static inline codec_bytes_t codec_bytes_view(ProtobufCBinaryData b)
{
    codec_bytes_t v = {b.len ? b.data : NULL, b.len};
    return v;
}

/* A view of a wire string: never NULL. */
static inline const char *codec_str_view(const char *s)
{
    return s ? s : "";
}

/* Points a protobuf-c bytes field at b (borrowed); 0 for a NULL pointer with a length. */
static inline int codec_bytes_in(codec_bytes_t b, ProtobufCBinaryData *out /* out */)
{
    if (!b.ptr && b.len)
        return 0;
    out->len = b.len;
    out->data = (uint8_t *)b.ptr;
    return 1;
}

static inline char *codec_str_in(const char *s)
{
    return (char *)(s ? s : "");
}

/* ---- the wire format by hand (wire.c) ------------------------------------------------------ */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

/* A view of wire bytes being read: [p, end). */
typedef struct {
    const uint8_t *p, *end;
} wire_t;

/* Each returns 1 and advances w past what it read, or 0 (malformed) and leaves w as it was. */
int wire_tag(wire_t *w, uint32_t *field /* out */, unsigned *type /* out */);
int wire_varint(wire_t *w, uint64_t *v /* out */);
int wire_fixed64(wire_t *w, uint64_t *v /* out */);
/* A length-prefixed field: *field views its bytes inside w. */
int wire_bytes(wire_t *w, wire_t *field /* out */);
/* Skips one value of an unknown field of this wire type. */
int wire_skip(wire_t *w, unsigned type);
/* Writers: each writes at p (room checked by the caller) and returns the end. */
size_t wire_varint_len(uint64_t v);
uint8_t *wire_put_varint(uint8_t *p, uint64_t v);
uint8_t *wire_put_tag(uint8_t *p, uint32_t field, unsigned type);
uint8_t *wire_put_fixed64(uint8_t *p, uint64_t v); /* the 8 bytes, no tag */
uint8_t *wire_put_bytes(uint8_t *p, uint32_t field, const void *data, size_t len); /* tag too */

/* The bytes of a decoded string field (codec_work_item_t.model_len and the like): as sent, which a
 * NUL inside does not cut, or, where a caller built the struct and left the length 0, strlen. */
static inline size_t codec_str_len(const char *s, size_t sent)
{
    return sent != 0 || s == NULL ? sent : strlen(s);
}

#endif
