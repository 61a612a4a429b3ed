/*
 * register.c - the consumer's registration: Register (checked by codec_register_check) and the
 * daemon's answer, Registered.
 *
 * Invariants: codec_int.h's.
 */
#include "codec/codec_int.h"

/* ---- Register ----------------------------------------------------------------------------- */

static codec_status_t register_view(const ProtobufCMessage *msg, void *pub)
{
    const Lanes__V1__Register *m = (const Lanes__V1__Register *)msg;
    *(codec_register_t *)pub = (codec_register_t){
        .model = codec_str_view(m->model),
        .max_batch_size = m->max_batch_size,
        .max_batch_tokens = m->max_batch_tokens,
        .max_input_tokens = m->max_input_tokens,
        .name = codec_str_view(m->name),
        .batch_fixed_us = m->batch_fixed_us,
        .token_ns = m->token_ns,
        .cache_shapes = m->cache_shapes,
    };
    return CODEC_OK;
}

/* Bytes of the model (1) and name (5) fields as sent (the last one wins, as protobuf-c's copy):
 * protobuf-c's string stops at a NUL byte, and the model rule and the name's cap count every
 * byte. Read after protobuf-c accepted the message, so every field is well formed. */
static void register_lens(const void *buf, size_t len, codec_register_t *reg)
{
    wire_t w = {buf, (const uint8_t *)buf + len}, f;
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        if (!wire_tag(&w, &field, &type))
            break;
        if ((field == 1 || field == 5) && type == WIRE_BYTES) {
            if (!wire_bytes(&w, &f))
                break;
            *(field == 1 ? &reg->model_len : &reg->name_len) = (size_t)(f.end - f.p);
        } else if (!wire_skip(&w, type)) {
            break;
        }
    }
}

codec_status_t codec_decode_register(const void *buf, size_t len, const char *subject_model,
                                     codec_register_t **out)
{
    void *pub = NULL;
    codec_status_t st = codec_pb_decode(&lanes__v1__register__descriptor, buf, len,
                                        sizeof(codec_register_t), register_view, &pub);
    if (st != CODEC_OK)
        return st;
    codec_register_t *reg = pub;
    register_lens(buf, len, reg);
    if ((st = codec_register_check(reg, subject_model)) != CODEC_OK) {
        codec_register_destroy(reg);
        return st;
    }
    *out = reg;
    return CODEC_OK;
}

void codec_register_destroy(codec_register_t *pub)
{
    codec_pb_destroy(pub);
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

static codec_status_t registered_view(const ProtobufCMessage *msg, void *pub)
{
    const Lanes__V1__Registered *m = (const Lanes__V1__Registered *)msg;
    *(codec_registered_t *)pub = (codec_registered_t){
        .consumer_id = codec_str_view(m->consumer_id),
        .pull_subject = codec_str_view(m->pull_subject),
        .ack_subject = codec_str_view(m->ack_subject),
        .heartbeat_subject = codec_str_view(m->heartbeat_subject),
        .bye_subject = codec_str_view(m->bye_subject),
        .heartbeat_ms = m->heartbeat_ms,
        .dead_after_ms = m->dead_after_ms,
        .ack_wait_ms = m->ack_wait_ms,
        .error = codec_str_view(m->error),
        .protocol_version = m->protocol_version,
    };
    return CODEC_OK;
}

codec_status_t codec_decode_registered(const void *buf, size_t len, codec_registered_t **out)
{
    void *pub = NULL;
    codec_status_t st = codec_pb_decode(&lanes__v1__registered__descriptor, buf, len,
                                        sizeof(codec_registered_t), registered_view, &pub);
    if (st == CODEC_OK)
        *out = pub;
    return st;
}

void codec_registered_destroy(codec_registered_t *pub)
{
    codec_pb_destroy(pub);
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
