/*
 * ack.c - settling work: Ack, AckReply and Heartbeat.
 *
 * Invariants (besides codec_int.h's):
 *   1. Ack positions are not checked here: which positions exist is the scheduler's business.
 */
#include "codec/codec_int.h"

/* ---- Ack ---------------------------------------------------------------------------------- */

static codec_status_t ack_view(const ProtobufCMessage *msg, void *pub)
{
    const Lanes__V1__Ack *m = (const Lanes__V1__Ack *)msg;
    *(codec_ack_t *)pub = (codec_ack_t){
        .batch_id = m->batch_id,
        .all = m->all != 0,
        .ack = m->n_ack ? m->ack : NULL,
        .n_ack = m->n_ack,
        .nak = m->n_nak ? m->nak : NULL,
        .n_nak = m->n_nak,
        .in_progress = m->in_progress != 0,
    };
    return CODEC_OK;
}

codec_status_t codec_decode_ack(const void *buf, size_t len, codec_ack_t **out)
{
    void *pub = NULL;
    codec_status_t st =
        codec_pb_decode(&lanes__v1__ack__descriptor, buf, len, sizeof(codec_ack_t), ack_view, &pub);
    if (st == CODEC_OK)
        *out = pub;
    return st;
}

void codec_ack_destroy(codec_ack_t *pub)
{
    codec_pb_destroy(pub);
}

codec_status_t codec_encode_ack(const codec_ack_t *msg, uint8_t **out_buf, size_t *out_len)
{
    Lanes__V1__Ack a = LANES__V1__ACK__INIT;

    if (!msg || !out_buf || !out_len || (msg->n_ack && !msg->ack) || (msg->n_nak && !msg->nak))
        return CODEC_EINVAL;
    a.batch_id = msg->batch_id;
    a.all = msg->all;
    a.n_ack = msg->n_ack;
    a.ack = (uint32_t *)msg->ack;
    a.n_nak = msg->n_nak;
    a.nak = (uint32_t *)msg->nak;
    a.in_progress = msg->in_progress;
    return codec_pb_pack(&a.base, out_buf, out_len);
}

/* ---- AckReply ----------------------------------------------------------------------------- */

static codec_status_t ack_reply_view(const ProtobufCMessage *msg, void *pub)
{
    const Lanes__V1__AckReply *m = (const Lanes__V1__AckReply *)msg;
    *(codec_ack_reply_t *)pub = (codec_ack_reply_t){
        .acked = m->acked,
        .returned = m->returned,
        .unknown = m->unknown,
        .error = codec_str_view(m->error),
    };
    return CODEC_OK;
}

codec_status_t codec_decode_ack_reply(const void *buf, size_t len, codec_ack_reply_t **out)
{
    void *pub = NULL;
    codec_status_t st = codec_pb_decode(&lanes__v1__ack_reply__descriptor, buf, len,
                                        sizeof(codec_ack_reply_t), ack_reply_view, &pub);
    if (st == CODEC_OK)
        *out = pub;
    return st;
}

void codec_ack_reply_destroy(codec_ack_reply_t *pub)
{
    codec_pb_destroy(pub);
}

codec_status_t codec_encode_ack_reply(const codec_ack_reply_t *msg, uint8_t **out_buf,
                                      size_t *out_len)
{
    Lanes__V1__AckReply r = LANES__V1__ACK_REPLY__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    r.acked = msg->acked;
    r.returned = msg->returned;
    r.unknown = msg->unknown;
    r.error = codec_str_in(msg->error);
    return codec_pb_pack(&r.base, out_buf, out_len);
}

/* ---- Heartbeat ---------------------------------------------------------------------------- */

static codec_status_t heartbeat_view(const ProtobufCMessage *msg, void *pub)
{
    const Lanes__V1__Heartbeat *m = (const Lanes__V1__Heartbeat *)msg;
    *(codec_heartbeat_t *)pub = (codec_heartbeat_t){
        .in_progress = m->n_in_progress ? m->in_progress : NULL,
        .n_in_progress = m->n_in_progress,
    };
    return CODEC_OK;
}

codec_status_t codec_decode_heartbeat(const void *buf, size_t len, codec_heartbeat_t **out)
{
    void *pub = NULL;
    codec_status_t st = codec_pb_decode(&lanes__v1__heartbeat__descriptor, buf, len,
                                        sizeof(codec_heartbeat_t), heartbeat_view, &pub);
    if (st == CODEC_OK)
        *out = pub;
    return st;
}

void codec_heartbeat_destroy(codec_heartbeat_t *pub)
{
    codec_pb_destroy(pub);
}

codec_status_t codec_encode_heartbeat(const codec_heartbeat_t *msg, uint8_t **out_buf,
                                      size_t *out_len)
{
    Lanes__V1__Heartbeat h = LANES__V1__HEARTBEAT__INIT;

    if (!msg || !out_buf || !out_len || (msg->n_in_progress && !msg->in_progress))
        return CODEC_EINVAL;
    h.n_in_progress = msg->n_in_progress;
    h.in_progress = (uint64_t *)msg->in_progress;
    return codec_pb_pack(&h.base, out_buf, out_len);
}
