/*
 * pb.c - the protobuf-c calls of the codec: unpack, pack, free, with an allocator that tells
 * out-of-memory from malformed input.
 *
 * Invariants:
 *   1. Unpack failures are told apart: the allocator records exhaustion, so protobuf-c's single
 *      NULL result becomes CODEC_ENOMEM or CODEC_EMALFORMED.
 *   2. No protobuf-c type leaves codec/ (codec_int.h is private).
 *
 * Rejected: hand-written varint encoding. protobuf-c's pack is the reference and handles packed
 * repeated fields, unknown-field preservation and proto3 zero elision as the decoder does.
 */
#include "codec/codec_int.h"

#include <stdbool.h>
#include <stddef.h>

static void *pb_alloc(void *exhausted, size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p && exhausted)
        *(bool *)exhausted = true;
    return p;
}

static void pb_release(void *unused, void *p)
{
    (void)unused;
    free(p);
}

static ProtobufCAllocator release_allocator = {pb_alloc, pb_release, NULL};

codec_status_t codec_pb_unpack(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len,
                               ProtobufCMessage **msg)
{
    static const uint8_t empty[1];
    bool exhausted = false;
    ProtobufCAllocator allocator = {pb_alloc, pb_release, &exhausted};

    if (!buf && len)
        return CODEC_EINVAL;
    *msg = protobuf_c_message_unpack(desc, &allocator, len, buf ? buf : empty);
    if (!*msg)
        return exhausted ? CODEC_ENOMEM : CODEC_EMALFORMED;
    return CODEC_OK;
}

void codec_pb_free(ProtobufCMessage *msg)
{
    if (msg)
        protobuf_c_message_free_unpacked(msg, &release_allocator);
}

/* A message decoded through protobuf-c: the unpacked message, then the public struct whose views
 * point into it (codec_int.h invariant 1). */
struct codec_pb_box {
    ProtobufCMessage *msg;
    max_align_t pub[];
};

codec_status_t codec_pb_decode(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len,
                               size_t pub_size, codec_pb_view_fn view, void **out_pub)
{
    ProtobufCMessage *msg = NULL;
    struct codec_pb_box *box = NULL;
    codec_status_t st = CODEC_EINVAL;

    if (!out_pub)
        goto out;
    if ((st = codec_pb_unpack(desc, buf, len, &msg)) != CODEC_OK)
        goto out;
    if (!(box = malloc(sizeof(*box) + pub_size))) {
        st = CODEC_ENOMEM;
        goto out;
    }
    if ((st = view(msg, box->pub)) != CODEC_OK)
        goto out;
    box->msg = msg;
    msg = NULL;
    *out_pub = box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_pb_destroy(void *pub)
{
    if (!pub)
        return;
    struct codec_pb_box *box =
        (struct codec_pb_box *)((char *)pub - offsetof(struct codec_pb_box, pub));
    codec_pb_free(box->msg);
    free(box);
}

codec_status_t codec_pb_pack(const ProtobufCMessage *msg, uint8_t **out_buf, size_t *out_len)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);

    if (!buf)
        return CODEC_ENOMEM;
    protobuf_c_message_pack(msg, buf);
    *out_buf = buf;
    *out_len = len;
    return CODEC_OK;
}
