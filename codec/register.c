/*
 * register.c - the consumer's registration: Register (checked by codec_register_check) and the
 * daemon's answer, Registered.
 *
 * Invariants: codec_int.h's.
 */
#include "codec/codec_int.h"

/* ---- Register ----------------------------------------------------------------------------- */

struct register_box {
    codec_register_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_register(const void *buf, size_t len, codec_register_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct register_box *box = NULL;
    const Lanes__V1__Register *r;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__register__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__Register *)msg;
    codec_register_t view = {
        .model = codec_str_view(r->model),
        .max_batch_size = r->max_batch_size,
        .max_batch_tokens = r->max_batch_tokens,
        .max_input_tokens = r->max_input_tokens,
        .name = codec_str_view(r->name),
        .batch_fixed_us = r->batch_fixed_us,
        .token_ns = r->token_ns,
        .cache_shapes = r->cache_shapes,
    };
    if ((st = codec_register_check(&view)) != CODEC_OK)
        goto out;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub = view;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_register_destroy(codec_register_t *pub)
{
    struct register_box *box = (struct register_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
}

codec_status_t codec_encode_register(const codec_register_t *msg, uint8_t **out_buf,
                                     size_t *out_len)
{
    Lanes__V1__Register r = LANES__V1__REGISTER__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    r.model = codec_str_in(msg->model);
    r.max_batch_size = msg->max_batch_size;
    r.max_batch_tokens = msg->max_batch_tokens;
    r.max_input_tokens = msg->max_input_tokens;
    r.name = codec_str_in(msg->name);
    r.batch_fixed_us = msg->batch_fixed_us;
    r.token_ns = msg->token_ns;
    r.cache_shapes = msg->cache_shapes;
    return codec_pb_pack(&r.base, out_buf, out_len);
}

/* ---- Registered --------------------------------------------------------------------------- */

struct registered_box {
    codec_registered_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_registered(const void *buf, size_t len, codec_registered_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct registered_box *box = NULL;
    const Lanes__V1__Registered *r;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__registered__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__Registered *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.consumer_id = codec_str_view(r->consumer_id);
    box->pub.pull_subject = codec_str_view(r->pull_subject);
    box->pub.ack_subject = codec_str_view(r->ack_subject);
    box->pub.heartbeat_subject = codec_str_view(r->heartbeat_subject);
    box->pub.bye_subject = codec_str_view(r->bye_subject);
    box->pub.heartbeat_ms = r->heartbeat_ms;
    box->pub.dead_after_ms = r->dead_after_ms;
    box->pub.ack_wait_ms = r->ack_wait_ms;
    box->pub.error = codec_str_view(r->error);
    box->pub.protocol_version = r->protocol_version;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_registered_destroy(codec_registered_t *pub)
{
    struct registered_box *box = (struct registered_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
}

codec_status_t codec_encode_registered(const codec_registered_t *msg, uint8_t **out_buf,
                                       size_t *out_len)
{
    Lanes__V1__Registered r = LANES__V1__REGISTERED__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    r.consumer_id = codec_str_in(msg->consumer_id);
    r.pull_subject = codec_str_in(msg->pull_subject);
    r.ack_subject = codec_str_in(msg->ack_subject);
    r.heartbeat_subject = codec_str_in(msg->heartbeat_subject);
    r.bye_subject = codec_str_in(msg->bye_subject);
    r.heartbeat_ms = msg->heartbeat_ms;
    r.dead_after_ms = msg->dead_after_ms;
    r.ack_wait_ms = msg->ack_wait_ms;
    r.error = codec_str_in(msg->error);
    r.protocol_version = msg->protocol_version;
    return codec_pb_pack(&r.base, out_buf, out_len);
}
