/*
 * submit.c - the producer's messages: Submit (WorkItem) and SubmitReply.
 *
 * Invariants (besides codec_int.h's):
 *   1. A decodable Submit always yields CODEC_OK: each item carries its own status from
 *      codec_item_check, so a producer learns one reason per item and the other items of the
 *      same message are unaffected.
 *
 * Rejected: refusing a whole Submit on the first bad item. One malformed item from a batching
 * producer would bounce hundreds of good ones; only an undecodable message is refused whole.
 */
#include "codec/codec_int.h"

#include <string.h>

/* ---- Submit ------------------------------------------------------------------------------- */

struct submit_box {
    codec_submit_t pub;
    ProtobufCMessage *msg;
    codec_work_item_t items[];
};

static void work_item_view(const Lanes__V1__WorkItem *w, const codec_limits_t *limits,
                           codec_work_item_t *it)
{
    uint64_t shape = 0;

    it->id = codec_bytes_view(w->id);
    it->model = codec_str_view(w->model);
    it->component_hashes = w->n_component_hashes ? w->component_hashes : NULL;
    it->n_component_hashes = w->n_component_hashes;
    it->has_signature = w->signature != 0;
    it->signature = w->signature;
    it->tokens = w->tokens;
    it->payload = codec_bytes_view(w->payload);
    it->reply_to = codec_str_view(w->reply_to);
    it->created_unix_ns = w->created_unix_ns;
    it->status = codec_item_check(it, limits, &shape);
    it->shape = it->status == CODEC_OK ? shape : 0;
}

codec_status_t codec_decode_submit(const void *buf, size_t len, const codec_limits_t *limits,
                                   codec_submit_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct submit_box *box = NULL;
    const Lanes__V1__Submit *s;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__submit__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    s = (const Lanes__V1__Submit *)msg;
    box = codec_box_alloc(sizeof *box, s->n_items, sizeof box->items[0]);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < s->n_items; i++)
        work_item_view(s->items[i], limits, &box->items[i]);
    box->pub.items = box->items;
    box->pub.n_items = s->n_items;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    codec_pb_free(msg);
    return st;
}

void codec_submit_destroy(codec_submit_t *pub)
{
    struct submit_box *box = (struct submit_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
}

static codec_status_t work_item_in(const codec_work_item_t *in, Lanes__V1__WorkItem *w)
{
    lanes__v1__work_item__init(w);
    if (!codec_bytes_in(in->id, &w->id) || !codec_bytes_in(in->payload, &w->payload))
        return CODEC_EINVAL;
    if (in->n_component_hashes && !in->component_hashes)
        return CODEC_EINVAL;
    if (in->has_signature && in->signature == 0)
        return CODEC_EINVAL;
    w->model = codec_str_in(in->model);
    w->n_component_hashes = in->n_component_hashes;
    w->component_hashes = (uint64_t *)in->component_hashes;
    w->signature = in->has_signature ? in->signature : 0;
    w->tokens = in->tokens;
    w->reply_to = codec_str_in(in->reply_to);
    w->created_unix_ns = in->created_unix_ns;
    return CODEC_OK;
}

codec_status_t codec_encode_submit(const codec_submit_t *msg, uint8_t **out_buf, size_t *out_len)
{
    Lanes__V1__Submit s = LANES__V1__SUBMIT__INIT;
    Lanes__V1__WorkItem *items = NULL;
    Lanes__V1__WorkItem **ptrs = NULL;
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
        st = work_item_in(&msg->items[i], &items[i]);
        if (st != CODEC_OK)
            goto out;
        ptrs[i] = &items[i];
    }
    s.n_items = msg->n_items;
    s.items = ptrs;
    st = codec_pb_pack(&s.base, out_buf, out_len);
out:
    free(ptrs);
    free(items);
    return st;
}

/* ---- SubmitReply -------------------------------------------------------------------------- */

struct submit_reply_box {
    codec_submit_reply_t pub;
    ProtobufCMessage *msg;
    codec_item_result_t results[];
};

codec_status_t codec_decode_submit_reply(const void *buf, size_t len, codec_submit_reply_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct submit_reply_box *box = NULL;
    const Lanes__V1__SubmitReply *r;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = codec_pb_unpack(&lanes__v1__submit_reply__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__SubmitReply *)msg;
    box = codec_box_alloc(sizeof *box, r->n_results, sizeof box->results[0]);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < r->n_results; i++) {
        const Lanes__V1__ItemResult *ir = r->results[i];
        box->results[i].id = codec_bytes_view(ir->id);
        box->results[i].status = (codec_item_status_t)ir->status;
        box->results[i].reason = codec_str_view(ir->reason);
        box->results[i].error = codec_str_view(ir->error);
    }
    box->pub.results = box->results;
    box->pub.n_results = r->n_results;
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

void codec_submit_reply_destroy(codec_submit_reply_t *pub)
{
    struct submit_reply_box *box = (struct submit_reply_box *)pub;

    if (!box)
        return;
    codec_pb_free(box->msg);
    free(box);
}

codec_status_t codec_encode_submit_reply(const codec_submit_reply_t *msg, uint8_t **out_buf,
                                         size_t *out_len)
{
    Lanes__V1__SubmitReply r = LANES__V1__SUBMIT_REPLY__INIT;
    Lanes__V1__ItemResult *results = NULL;
    Lanes__V1__ItemResult **ptrs = NULL;
    codec_status_t st = CODEC_EINVAL;

    if (!msg || !out_buf || !out_len || (msg->n_results && !msg->results))
        goto out;
    results = codec_scratch_alloc(msg->n_results, sizeof *results);
    ptrs = codec_scratch_alloc(msg->n_results, sizeof *ptrs);
    if (!results || !ptrs) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < msg->n_results; i++) {
        const codec_item_result_t *in = &msg->results[i];
        Lanes__V1__ItemResult *ir = &results[i];
        lanes__v1__item_result__init(ir);
        if (!codec_bytes_in(in->id, &ir->id)) {
            st = CODEC_EINVAL;
            goto out;
        }
        ir->status = (Lanes__V1__ItemStatus)in->status;
        ir->reason = codec_str_in(in->reason);
        ir->error = codec_str_in(in->error);
        ptrs[i] = ir;
    }
    r.n_results = msg->n_results;
    r.results = ptrs;
    r.error = codec_str_in(msg->error);
    st = codec_pb_pack(&r.base, out_buf, out_len);
out:
    free(ptrs);
    free(results);
    return st;
}
