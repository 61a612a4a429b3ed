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

/*
 * Decoded by hand (wire.c) in two passes over the same bytes: the first checks the message and
 * counts what the box needs (items, hashes, bytes of ids, payloads and strings), the second fills
 * one allocation: the box, its items, then an arena the views point into (invariant 2 of
 * codec_int.h). A field that appears twice is counted twice and the last one wins, as protobuf-c
 * does.
 */

struct submit_box {
    codec_submit_t pub;
    codec_work_item_t items[];
};

typedef struct {
    size_t items, hashes, bytes; /* bytes: of ids, payloads and strings, a NUL per string */
} submit_count_t;

typedef struct {
    uint64_t *hashes; /* next free hash slot */
    uint8_t *bytes;   /* next free arena byte */
} submit_arena_t;

static const uint8_t *submit_copy(submit_arena_t *a, wire_t f, int terminate)
{
    size_t n = (size_t)(f.end - f.p);
    uint8_t *at = a->bytes;
    if (n != 0)
        memcpy(at, f.p, n);
    if (terminate)
        at[n++] = '\0';
    a->bytes += n;
    return at;
}

static void submit_hash_add(submit_count_t *c, submit_arena_t *a, codec_work_item_t *it, uint64_t v)
{
    if (a == NULL) {
        c->hashes++;
        return;
    }
    *a->hashes++ = v;
    it->n_component_hashes++;
}

/* One WorkItem: counts into c (a == NULL) or fills *it from the arena. 1, or 0 when malformed. */
static int submit_item_read(wire_t w, submit_count_t *c, submit_arena_t *a, codec_work_item_t *it)
{
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        uint64_t v;
        wire_t f;
        if (!wire_tag(&w, &field, &type))
            return 0;
        switch (field) {
        case 1: /* id */
        case 6: /* payload */
            if (type != WIRE_BYTES || !wire_bytes(&w, &f))
                return 0;
            if (a == NULL) {
                c->bytes += (size_t)(f.end - f.p);
            } else {
                codec_bytes_t b = {f.p < f.end ? submit_copy(a, f, 0) : NULL,
                                   (size_t)(f.end - f.p)};
                *(field == 1 ? &it->id : &it->payload) = b;
            }
            break;
        case 2: /* model */
        case 7: /* reply_to */
            if (type != WIRE_BYTES || !wire_bytes(&w, &f))
                return 0;
            if (a == NULL)
                c->bytes += (size_t)(f.end - f.p) + 1;
            else
                *(field == 2 ? &it->model : &it->reply_to) = (const char *)submit_copy(a, f, 1);
            break;
        case 3: /* component_hashes: packed, or one per occurrence */
            if (type == WIRE_BYTES) {
                if (!wire_bytes(&w, &f) || (f.end - f.p) % 8 != 0)
                    return 0;
                while (f.p < f.end) {
                    wire_fixed64(&f, &v);
                    submit_hash_add(c, a, it, v);
                }
            } else if (type == WIRE_FIXED64 && wire_fixed64(&w, &v)) {
                submit_hash_add(c, a, it, v);
            } else {
                return 0;
            }
            break;
        case 4: /* signature */
            if (type != WIRE_FIXED64 || !wire_fixed64(&w, &v))
                return 0;
            if (a != NULL)
                it->signature = v;
            break;
        case 5: /* tokens */
        case 8: /* created_unix_ns */
            if (type != WIRE_VARINT || !wire_varint(&w, &v))
                return 0;
            if (a != NULL && field == 5)
                it->tokens = (uint32_t)v;
            else if (a != NULL)
                it->created_unix_ns = v;
            break;
        default:
            if (!wire_skip(&w, type))
                return 0;
        }
    }
    return 1;
}

/* The Submit: counts (a == NULL) or fills box->items. 1, or 0 when malformed. */
static int submit_read(wire_t w, submit_count_t *c, submit_arena_t *a, struct submit_box *box)
{
    size_t n = 0;
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        wire_t f;
        if (!wire_tag(&w, &field, &type))
            return 0;
        if (field != 1) {
            if (!wire_skip(&w, type))
                return 0;
            continue;
        }
        if (type != WIRE_BYTES || !wire_bytes(&w, &f))
            return 0;
        codec_work_item_t *it = a != NULL ? &box->items[n] : NULL;
        if (it != NULL)
            *it = (codec_work_item_t){
                .model = "", .reply_to = "", .component_hashes = c->hashes ? a->hashes : NULL};
        if (!submit_item_read(f, c, a, it))
            return 0;
        n++;
    }
    if (a == NULL)
        c->items = n;
    return 1;
}

codec_status_t codec_decode_submit(const void *buf, size_t len, const codec_limits_t *limits,
                                   codec_submit_t **out)
{
    submit_count_t c = {0};
    if (!out || (!buf && len))
        return CODEC_EINVAL;
    wire_t w = {buf, (const uint8_t *)buf + len};
    if (!submit_read(w, &c, NULL, NULL))
        return CODEC_EMALFORMED;
    size_t items = c.items * sizeof(codec_work_item_t), hashes = c.hashes * sizeof(uint64_t);
    struct submit_box *box = malloc(sizeof(*box) + items + hashes + c.bytes);
    if (!box)
        return CODEC_ENOMEM;
    submit_arena_t a = {(uint64_t *)((uint8_t *)box->items + items),
                        (uint8_t *)box->items + items + hashes};
    submit_read(w, &c, &a, box); /* the same bytes read again cannot fail */
    for (size_t i = 0; i < c.items; i++) {
        codec_work_item_t *it = &box->items[i];
        uint64_t shape = 0;
        if (it->n_component_hashes == 0)
            it->component_hashes = NULL;
        it->has_signature = it->signature != 0;
        it->status = codec_item_check(it, limits, &shape);
        it->shape = it->status == CODEC_OK ? shape : 0;
    }
    box->pub.items = box->items;
    box->pub.n_items = c.items;
    *out = &box->pub;
    return CODEC_OK;
}

void codec_submit_destroy(codec_submit_t *pub)
{
    free(pub); /* the box starts with pub and holds everything in one allocation */
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
