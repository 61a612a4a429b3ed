/*
 * submit.c - the producer's message: Submit (WorkItem), written and read by hand (wire.c); its
 * answer, SubmitReply, is in submit_reply.c.
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
 * Decoded by hand (wire.c): a first pass over the message's own fields only counts the items
 * (their bodies are skipped by length), then one pass over each item fills the box: the box,
 * its items, then an arena the views point into (invariant 2 of codec_int.h). Every copy takes
 * no more arena than its field took of the message (a hash 8 bytes of its 8 or 9, a string its
 * length and a NUL of at least 2 bytes of tag and length), so an arena of the message's length
 * holds any message: hashes fill it from the front, 8-byte aligned, bytes from the back. A field
 * that appears twice is copied twice and the last one wins, as protobuf-c does.
 */

struct submit_box {
    codec_submit_t pub;
    codec_work_item_t items[];
};

typedef struct {
    uint64_t *hashes; /* next free hash slot, growing up */
    uint8_t *bytes;   /* end of the free room, growing down towards hashes */
} submit_arena_t;

static const uint8_t *submit_copy(submit_arena_t *a, wire_t f, int terminate)
{
    size_t n = (size_t)(f.end - f.p);
    a->bytes -= n + (terminate ? 1 : 0);
    if (n != 0)
        memcpy(a->bytes, f.p, n);
    if (terminate)
        a->bytes[n] = '\0';
    return a->bytes;
}

static void submit_hash_add(submit_arena_t *a, codec_work_item_t *it, uint64_t v)
{
    *a->hashes++ = v;
    it->n_component_hashes++;
}

/* One WorkItem into *it from the arena. 1, or 0 when malformed. */
static int submit_item_read(wire_t w, submit_arena_t *a, codec_work_item_t *it)
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
            *(field == 1 ? &it->id : &it->payload) =
                (codec_bytes_t){f.p < f.end ? submit_copy(a, f, 0) : NULL, (size_t)(f.end - f.p)};
            break;
        case 2: /* model */
        case 7: /* reply_to */
            if (type != WIRE_BYTES || !wire_bytes(&w, &f))
                return 0;
            *(field == 2 ? &it->model : &it->reply_to) = (const char *)submit_copy(a, f, 1);
            *(field == 2 ? &it->model_len : &it->reply_to_len) = (size_t)(f.end - f.p);
            break;
        case 3: /* component_hashes: packed, or one per occurrence */
            if (type == WIRE_BYTES) {
                if (!wire_bytes(&w, &f) || (f.end - f.p) % 8 != 0)
                    return 0;
                while (f.p < f.end) {
                    wire_fixed64(&f, &v);
                    submit_hash_add(a, it, v);
                }
            } else if (type == WIRE_FIXED64 && wire_fixed64(&w, &v)) {
                submit_hash_add(a, it, v);
            } else {
                return 0;
            }
            break;
        case 4: /* signature */
            if (type != WIRE_FIXED64 || !wire_fixed64(&w, &v))
                return 0;
            it->signature = v;
            break;
        case 5:  /* tokens */
        case 8:  /* created_unix_ns */
        case 9:  /* prefix_tokens */
        case 10: /* max_wait_ms */
            if (type != WIRE_VARINT || !wire_varint(&w, &v))
                return 0;
            if (field == 5)
                it->tokens = (uint32_t)v;
            else if (field == 8)
                it->created_unix_ns = v;
            else if (field == 9)
                it->prefix_tokens = (uint32_t)v;
            else
                it->max_wait_ms = (uint32_t)v;
            break;
        default:
            if (!wire_skip(&w, type))
                return 0;
        }
    }
    return 1;
}

/* The Submit's own fields: *out_items, the WorkItems it holds. 1, or 0 when malformed. */
static int submit_count(wire_t w, size_t *out_items /* out */)
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
        n++;
    }
    *out_items = n;
    return 1;
}

/* Fills box->items from the message submit_count accepted. 1, or 0 when an item is malformed. */
static int submit_read(wire_t w, submit_arena_t *a, struct submit_box *box)
{
    size_t n = 0;
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        wire_t f;
        wire_tag(&w, &field, &type); /* submit_count read these: they cannot fail */
        if (field != 1) {
            wire_skip(&w, type);
            continue;
        }
        wire_bytes(&w, &f);
        codec_work_item_t *it = &box->items[n++];
        *it = (codec_work_item_t){.model = "", .reply_to = "", .component_hashes = a->hashes};
        if (!submit_item_read(f, a, it))
            return 0;
    }
    return 1;
}

codec_status_t codec_decode_submit(const void *buf, size_t len, const codec_limits_t *limits,
                                   codec_submit_t **out)
{
    size_t n_items = 0;
    if (!out || (!buf && len))
        return CODEC_EINVAL;
    wire_t w = {buf, (const uint8_t *)buf + len};
    if (!submit_count(w, &n_items))
        return CODEC_EMALFORMED;
    codec_status_t st = codec_submit_caps_check(n_items, limits != NULL ? limits->caps : NULL);
    if (st != CODEC_OK)
        return st;
    /* the arena: the message's length, rounded up to whole hashes */
    size_t items = n_items * sizeof(codec_work_item_t), arena = (len + 7) & ~(size_t)7;
    struct submit_box *box = malloc(sizeof(*box) + items + arena);
    if (!box)
        return CODEC_ENOMEM;
    uint8_t *base = (uint8_t *)box->items + items;
    submit_arena_t a = {(uint64_t *)base, base + arena};
    if (!submit_read(w, &a, box)) {
        free(box);
        return CODEC_EMALFORMED;
    }
    for (size_t i = 0; i < n_items; i++) {
        codec_work_item_t *it = &box->items[i];
        uint64_t shape = 0;
        if (it->n_component_hashes == 0)
            it->component_hashes = NULL;
        it->has_signature = it->signature != 0;
        it->status = codec_item_check(it, limits, &shape);
        it->shape = it->status == CODEC_OK ? shape : 0;
    }
    box->pub.items = box->items;
    box->pub.n_items = n_items;
    *out = &box->pub;
    return CODEC_OK;
}

void codec_submit_destroy(codec_submit_t *pub)
{
    free(pub); /* the box starts with pub and holds everything in one allocation */
}

/* The encoded size of the fields of one WorkItem (wire.c invariant 3). */
static size_t submit_item_size(const codec_work_item_t *it)
{
    size_t n = 0, h = it->n_component_hashes * 8;
    size_t model = codec_str_len(it->model, it->model_len),
           reply = codec_str_len(it->reply_to, it->reply_to_len);
    n += it->id.len ? 1 + wire_varint_len(it->id.len) + it->id.len : 0;
    n += model ? 1 + wire_varint_len(model) + model : 0;
    n += h ? 1 + wire_varint_len(h) + h : 0;
    n += it->has_signature ? 9 : 0;
    n += it->tokens ? 1 + wire_varint_len(it->tokens) : 0;
    n += it->payload.len ? 1 + wire_varint_len(it->payload.len) + it->payload.len : 0;
    n += reply ? 1 + wire_varint_len(reply) + reply : 0;
    n += it->created_unix_ns ? 1 + wire_varint_len(it->created_unix_ns) : 0;
    n += it->prefix_tokens ? 1 + wire_varint_len(it->prefix_tokens) : 0;
    n += it->max_wait_ms ? 1 + wire_varint_len(it->max_wait_ms) : 0;
    return n;
}

static uint8_t *submit_item_put(uint8_t *p, const codec_work_item_t *it)
{
    if (it->id.len)
        p = wire_put_bytes(p, 1, it->id.ptr, it->id.len);
    /* at their length as sent: encode(decode(x)) keeps a NUL-bearing string and its verdict */
    size_t model = codec_str_len(it->model, it->model_len),
           reply = codec_str_len(it->reply_to, it->reply_to_len);
    if (model != 0)
        p = wire_put_bytes(p, 2, it->model, model);
    if (it->n_component_hashes) { /* proto3 packs a repeated scalar */
        p = wire_put_varint(wire_put_tag(p, 3, WIRE_BYTES), it->n_component_hashes * 8);
        for (size_t k = 0; k < it->n_component_hashes; k++)
            p = wire_put_fixed64(p, it->component_hashes[k]);
    }
    if (it->has_signature)
        p = wire_put_fixed64(wire_put_tag(p, 4, WIRE_FIXED64), it->signature);
    if (it->tokens)
        p = wire_put_varint(wire_put_tag(p, 5, WIRE_VARINT), it->tokens);
    if (it->payload.len)
        p = wire_put_bytes(p, 6, it->payload.ptr, it->payload.len);
    if (reply != 0)
        p = wire_put_bytes(p, 7, it->reply_to, reply);
    if (it->created_unix_ns)
        p = wire_put_varint(wire_put_tag(p, 8, WIRE_VARINT), it->created_unix_ns);
    if (it->prefix_tokens)
        p = wire_put_varint(wire_put_tag(p, 9, WIRE_VARINT), it->prefix_tokens);
    if (it->max_wait_ms)
        p = wire_put_varint(wire_put_tag(p, 10, WIRE_VARINT), it->max_wait_ms);
    return p;
}

codec_status_t codec_encode_submit(const codec_submit_t *msg, uint8_t **out_buf, size_t *out_len)
{
    if (!msg || !out_buf || !out_len || (msg->n_items && !msg->items))
        return CODEC_EINVAL;
    size_t len = 0;
    for (size_t i = 0; i < msg->n_items; i++) {
        const codec_work_item_t *it = &msg->items[i];
        if ((!it->id.ptr && it->id.len) || (!it->payload.ptr && it->payload.len) ||
            (it->n_component_hashes && !it->component_hashes) ||
            (it->has_signature && it->signature == 0))
            return CODEC_EINVAL;
        size_t n = submit_item_size(it);
        len += 1 + wire_varint_len(n) + n;
    }
    uint8_t *buf = malloc(len ? len : 1), *p = buf;
    if (!buf)
        return CODEC_ENOMEM;
    for (size_t i = 0; i < msg->n_items; i++) {
        p = wire_put_varint(wire_put_tag(p, 1, WIRE_BYTES), submit_item_size(&msg->items[i]));
        p = submit_item_put(p, &msg->items[i]);
    }
    *out_buf = buf;
    *out_len = (size_t)(p - buf);
    return CODEC_OK;
}
