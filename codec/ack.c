/*
 * ack.c - settling work: Ack, AckReply and Heartbeat.
 *
 * Invariants (besides codec_int.h's):
 *   1. Ack positions are not checked here: which positions exist is the scheduler's business.
 */
#include "codec/codec_int.h"

/* ---- Ack ---------------------------------------------------------------------------------- */

struct ack_box {
    codec_ack_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_ack(const void *buf, size_t len, codec_ack_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct ack_box *box = NULL;
    const Lanes__V1__Ack *a;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__ack__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    a = (const Lanes__V1__Ack *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.batch_id = a->batch_id;
    box->pub.all = a->all != 0;
    box->pub.ack = a->n_ack ? a->ack : NULL;
    box->pub.n_ack = a->n_ack;
    box->pub.nak = a->n_nak ? a->nak : NULL;
    box->pub.n_nak = a->n_nak;
    box->pub.in_progress = a->in_progress != 0;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_ack_destroy(codec_ack_t *pub)
{
    struct ack_box *box = (struct ack_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
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

struct ack_reply_box {
    codec_ack_reply_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_ack_reply(const void *buf, size_t len, codec_ack_reply_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct ack_reply_box *box = NULL;
    const Lanes__V1__AckReply *r;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__ack_reply__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__AckReply *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.acked = r->acked;
    box->pub.returned = r->returned;
    box->pub.unknown = r->unknown;
    box->pub.error = codec_str_view(r->error);
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_ack_reply_destroy(codec_ack_reply_t *pub)
{
    struct ack_reply_box *box = (struct ack_reply_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
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

struct heartbeat_box {
    codec_heartbeat_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_heartbeat(const void *buf, size_t len, codec_heartbeat_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct heartbeat_box *box = NULL;
    const Lanes__V1__Heartbeat *h;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__heartbeat__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    h = (const Lanes__V1__Heartbeat *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.in_progress = h->n_in_progress ? h->in_progress : NULL;
    box->pub.n_in_progress = h->n_in_progress;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_heartbeat_destroy(codec_heartbeat_t *pub)
{
    struct heartbeat_box *box = (struct heartbeat_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
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
