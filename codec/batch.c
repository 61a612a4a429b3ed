/*
 * batch.c - asking for work and receiving it: Pull and Batch (with its BatchItems).
 *
 * Invariants (besides codec_int.h's):
 *   1. A Batch status outside codec_batch_status_t passes through decode unchanged, so a
 *      client can tell a newer daemon's status from OK.
 */
#include "codec/codec_int.h"

/* ---- Pull --------------------------------------------------------------------------------- */

struct pull_box {
    codec_pull_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_pull(const void *buf, size_t len, codec_pull_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct pull_box *box = NULL;
    const Lanes__V1__Pull *p;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__pull__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    p = (const Lanes__V1__Pull *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.max_batches = p->max_batches;
    box->pub.expires_ms = p->expires_ms;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_pull_destroy(codec_pull_t *pub)
{
    struct pull_box *box = (struct pull_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
}

codec_status_t codec_encode_pull(const codec_pull_t *msg, uint8_t **out_buf, size_t *out_len)
{
    Lanes__V1__Pull p = LANES__V1__PULL__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    p.max_batches = msg->max_batches;
    p.expires_ms = msg->expires_ms;
    return codec_pb_pack(&p.base, out_buf, out_len);
}

/* ---- Batch -------------------------------------------------------------------------------- */

struct batch_box {
    codec_batch_t pub;
    ProtobufCMessage *msg;
    codec_batch_item_t items[];
};

codec_status_t codec_decode_batch(const void *buf, size_t len, codec_batch_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct batch_box *box = NULL;
    const Lanes__V1__Batch *b;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__batch__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    b = (const Lanes__V1__Batch *)msg;
    box = codec_box_alloc(sizeof *box, b->n_items, sizeof box->items[0]);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < b->n_items; i++) {
        const Lanes__V1__BatchItem *bi = b->items[i];
        box->items[i].id = codec_bytes_view(bi->id);
        box->items[i].tokens = bi->tokens;
        box->items[i].payload = codec_bytes_view(bi->payload);
        box->items[i].reply_to = codec_str_view(bi->reply_to);
        box->items[i].deliveries = bi->deliveries;
    }
    box->pub.batch_id = b->batch_id;
    box->pub.model = codec_str_view(b->model);
    box->pub.signature = b->signature;
    box->pub.lane = b->lane;
    box->pub.pad_to = b->pad_to;
    box->pub.items = box->items;
    box->pub.n_items = b->n_items;
    box->pub.status = (codec_batch_status_t)b->status;
    box->pub.error = codec_str_view(b->error);
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_batch_destroy(codec_batch_t *pub)
{
    struct batch_box *box = (struct batch_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
}

codec_status_t codec_encode_batch(const codec_batch_t *msg, uint8_t **out_buf, size_t *out_len)
{
    Lanes__V1__Batch b = LANES__V1__BATCH__INIT;
    Lanes__V1__BatchItem *items = NULL;
    Lanes__V1__BatchItem **ptrs = NULL;
    codec_status_t st = CODEC_EINVAL;

    if (!msg || !out_buf || !out_len || (msg->n_items && !msg->items))
        goto out;
    items = codec_scratch_alloc(msg->n_items, sizeof *items);
    ptrs = codec_scratch_alloc(msg->n_items, sizeof *ptrs);
    if (!items || !ptrs) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < msg->n_items; i++) {
        const codec_batch_item_t *in = &msg->items[i];
        Lanes__V1__BatchItem *bi = &items[i];
        lanes__v1__batch_item__init(bi);
        if (!codec_bytes_in(in->id, &bi->id) || !codec_bytes_in(in->payload, &bi->payload)) {
            st = CODEC_EINVAL;
            goto out;
        }
        bi->tokens = in->tokens;
        bi->reply_to = codec_str_in(in->reply_to);
        bi->deliveries = in->deliveries;
        ptrs[i] = bi;
    }
    b.batch_id = msg->batch_id;
    b.model = codec_str_in(msg->model);
    b.signature = msg->signature;
    b.lane = msg->lane;
    b.pad_to = msg->pad_to;
    b.n_items = msg->n_items;
    b.items = ptrs;
    b.status = (Lanes__V1__BatchStatus)msg->status;
    b.error = codec_str_in(msg->error);
    st = codec_pb_pack(&b.base, out_buf, out_len);
out:
    free(ptrs);
    free(items);
    return st;
}
