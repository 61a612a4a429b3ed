/*
 * batch.c - asking for work and receiving it: Pull and Batch (with its BatchItems).
 *
 * Invariants (besides codec_int.h's):
 *   1. A Batch status outside codec_batch_status_t passes through decode unchanged, so a
 *      client can tell a newer daemon's status from OK.
 */
#include "codec/codec_int.h"

#include <string.h>

/* ---- Pull --------------------------------------------------------------------------------- */

static codec_status_t pull_view(const ProtobufCMessage *msg, void *pub)
{
    const Lanes__V1__Pull *m = (const Lanes__V1__Pull *)msg;
    *(codec_pull_t *)pub =
        (codec_pull_t){.max_batches = m->max_batches, .expires_ms = m->expires_ms};
    return CODEC_OK;
}

codec_status_t codec_decode_pull(const void *buf, size_t len, codec_pull_t **out)
{
    void *pub = NULL;
    codec_status_t st = codec_pb_decode(&lanes__v1__pull__descriptor, buf, len,
                                        sizeof(codec_pull_t), pull_view, &pub);
    if (st == CODEC_OK)
        *out = pub;
    return st;
}

void codec_pull_destroy(codec_pull_t *pub)
{
    codec_pb_destroy(pub);
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

/*
 * Both directions by hand (wire.c): a Batch carries up to max_batch_size items and their payloads,
 * written by the daemon for every delivery and read by every consumer. Decoding is two passes, as
 * for Submit (submit.c): check and count, then fill one allocation (box, items, arena).
 */

struct batch_box {
    codec_batch_t pub;
    codec_batch_item_t items[];
};

typedef struct {
    size_t items, bytes; /* bytes: of ids, payloads and strings, a NUL per string */
} batch_count_t;

static const uint8_t *batch_copy(uint8_t **arena, wire_t f, int terminate)
{
    size_t n = (size_t)(f.end - f.p);
    uint8_t *at = *arena;
    if (n != 0)
        memcpy(at, f.p, n);
    if (terminate)
        at[n++] = '\0';
    *arena += n;
    return at;
}

/* A string or bytes field: counted (arena NULL) or copied. 1, or 0 when malformed. */
static int batch_field_bytes(wire_t *w, unsigned type, batch_count_t *c, uint8_t **arena,
                             int terminate, const uint8_t **out, size_t *out_len)
{
    wire_t f;
    if (type != WIRE_BYTES || !wire_bytes(w, &f))
        return 0;
    size_t n = (size_t)(f.end - f.p);
    if (arena == NULL) {
        c->bytes += n + (terminate ? 1 : 0);
        return 1;
    }
    *out = terminate || n != 0 ? batch_copy(arena, f, terminate) : NULL;
    *out_len = n;
    return 1;
}

static int batch_field_u64(wire_t *w, unsigned type, uint64_t *v)
{
    return type == WIRE_VARINT && wire_varint(w, v);
}

/* One BatchItem: counts (arena NULL) or fills *it. 1, or 0 when malformed. */
static int batch_item_read(wire_t w, batch_count_t *c, uint8_t **arena, codec_batch_item_t *it)
{
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        uint64_t v = 0;
        const uint8_t *p = NULL;
        size_t n = 0;
        if (!wire_tag(&w, &field, &type))
            return 0;
        switch (field) {
        case 1: /* id */
        case 3: /* payload */
            if (!batch_field_bytes(&w, type, c, arena, 0, &p, &n))
                return 0;
            if (arena != NULL)
                *(field == 1 ? &it->id : &it->payload) = (codec_bytes_t){p, n};
            break;
        case 4: /* reply_to */
            if (!batch_field_bytes(&w, type, c, arena, 1, &p, &n))
                return 0;
            if (arena != NULL)
                it->reply_to = (const char *)p;
            break;
        case 2: /* tokens */
        case 5: /* deliveries */
        case 6: /* prefix_tokens */
            if (!batch_field_u64(&w, type, &v))
                return 0;
            if (arena != NULL)
                *(field == 2   ? &it->tokens
                  : field == 5 ? &it->deliveries
                               : &it->prefix_tokens) = (uint32_t)v;
            break;
        default:
            if (!wire_skip(&w, type))
                return 0;
        }
    }
    return 1;
}

/* The Batch: counts (arena NULL) or fills box. 1, or 0 when malformed. */
static int batch_read(wire_t w, batch_count_t *c, uint8_t **arena, struct batch_box *box)
{
    size_t n = 0;
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        uint64_t v = 0;
        const uint8_t *p = NULL;
        size_t len = 0;
        wire_t f;
        if (!wire_tag(&w, &field, &type))
            return 0;
        switch (field) {
        case 1: /* batch_id */
        case 4: /* lane */
        case 5: /* pad_to */
        case 7: /* status */
            if (!batch_field_u64(&w, type, &v))
                return 0;
            if (arena == NULL)
                break;
            if (field == 1)
                box->pub.batch_id = v;
            else if (field == 4)
                box->pub.lane = (uint32_t)v;
            else if (field == 5)
                box->pub.pad_to = (uint32_t)v;
            else /* an enum: its low 32 bits as a signed value, passed through (invariant 1) */
                box->pub.status = (codec_batch_status_t)(int32_t)(uint32_t)v;
            break;
        case 2: /* model */
        case 8: /* error */
            if (!batch_field_bytes(&w, type, c, arena, 1, &p, &len))
                return 0;
            if (arena != NULL)
                *(field == 2 ? &box->pub.model : &box->pub.error) = (const char *)p;
            break;
        case 3: /* signature */
            if (type != WIRE_FIXED64 || !wire_fixed64(&w, &v))
                return 0;
            if (arena != NULL)
                box->pub.signature = v;
            break;
        case 6: /* items */
            if (type != WIRE_BYTES || !wire_bytes(&w, &f))
                return 0;
            if (arena != NULL)
                box->items[n] = (codec_batch_item_t){.reply_to = ""};
            if (!batch_item_read(f, c, arena, arena != NULL ? &box->items[n] : NULL))
                return 0;
            n++;
            break;
        default:
            if (!wire_skip(&w, type))
                return 0;
        }
    }
    if (arena == NULL)
        c->items = n;
    return 1;
}

codec_status_t codec_decode_batch(const void *buf, size_t len, codec_batch_t **out)
{
    batch_count_t c = {0};
    if (!out || (!buf && len))
        return CODEC_EINVAL;
    wire_t w = {buf, (const uint8_t *)buf + len};
    if (!batch_read(w, &c, NULL, NULL))
        return CODEC_EMALFORMED;
    size_t items = c.items * sizeof(codec_batch_item_t);
    struct batch_box *box = malloc(sizeof(*box) + items + c.bytes);
    if (!box)
        return CODEC_ENOMEM;
    box->pub = (codec_batch_t){.model = "", .error = ""};
    uint8_t *arena = (uint8_t *)box->items + items;
    batch_read(w, &c, &arena, box); /* the same bytes read again cannot fail */
    box->pub.items = box->items;
    box->pub.n_items = c.items;
    *out = &box->pub;
    return CODEC_OK;
}

void codec_batch_destroy(codec_batch_t *pub)
{
    free(pub); /* the box starts with pub and holds everything in one allocation */
}

/* The encoded size of a uint32/uint64 field (0 when proto3 leaves it out). */
static size_t batch_varint_size(uint64_t v)
{
    return v != 0 ? 1 + wire_varint_len(v) : 0;
}

static size_t batch_bytes_size(size_t n)
{
    return n != 0 ? 1 + wire_varint_len(n) + n : 0;
}

static size_t batch_item_size(const codec_batch_item_t *it)
{
    return batch_bytes_size(it->id.len) + batch_varint_size(it->tokens) +
           batch_bytes_size(it->payload.len) +
           batch_bytes_size(it->reply_to ? strlen(it->reply_to) : 0) +
           batch_varint_size(it->deliveries) + batch_varint_size(it->prefix_tokens);
}

static uint8_t *batch_put_varint(uint8_t *p, uint32_t field, uint64_t v)
{
    if (v == 0)
        return p;
    return wire_put_varint(wire_put_tag(p, field, WIRE_VARINT), v);
}

static uint8_t *batch_put_bytes(uint8_t *p, uint32_t field, const void *data, size_t n)
{
    return n != 0 ? wire_put_bytes(p, field, data, n) : p;
}

static uint8_t *batch_put_str(uint8_t *p, uint32_t field, const char *s)
{
    return batch_put_bytes(p, field, s, s ? strlen(s) : 0);
}

codec_status_t codec_encode_batch_into(const codec_batch_t *msg, uint8_t **buf, size_t *cap,
                                       size_t *out_len)
{
    if (!msg || !buf || !cap || !out_len || (msg->n_items && !msg->items) || (!*buf && *cap))
        return CODEC_EINVAL;
    /* an enum is an int32 on the wire: a negative one takes ten bytes, as protobuf-c writes it */
    uint64_t status = (uint64_t)(int64_t)(int32_t)msg->status;
    size_t len = batch_varint_size(msg->batch_id) +
                 batch_bytes_size(msg->model ? strlen(msg->model) : 0) +
                 (msg->signature != 0 ? 9 : 0) + batch_varint_size(msg->lane) +
                 batch_varint_size(msg->pad_to) + batch_varint_size(status) +
                 batch_bytes_size(msg->error ? strlen(msg->error) : 0);
    for (size_t i = 0; i < msg->n_items; i++) {
        const codec_batch_item_t *it = &msg->items[i];
        if ((!it->id.ptr && it->id.len) || (!it->payload.ptr && it->payload.len))
            return CODEC_EINVAL;
        size_t n = batch_item_size(it);
        len += 1 + wire_varint_len(n) + n;
    }
    if (len > *cap || *buf == NULL) {
        uint8_t *grown = realloc(*buf, len ? len : 1);
        if (!grown)
            return CODEC_ENOMEM;
        *buf = grown;
        *cap = len ? len : 1;
    }
    uint8_t *p = *buf;
    p = batch_put_varint(p, 1, msg->batch_id);
    p = batch_put_str(p, 2, msg->model);
    if (msg->signature != 0)
        p = wire_put_fixed64(wire_put_tag(p, 3, WIRE_FIXED64), msg->signature);
    p = batch_put_varint(p, 4, msg->lane);
    p = batch_put_varint(p, 5, msg->pad_to);
    for (size_t i = 0; i < msg->n_items; i++) {
        const codec_batch_item_t *it = &msg->items[i];
        p = wire_put_varint(wire_put_tag(p, 6, WIRE_BYTES), batch_item_size(it));
        p = batch_put_bytes(p, 1, it->id.ptr, it->id.len);
        p = batch_put_varint(p, 2, it->tokens);
        p = batch_put_bytes(p, 3, it->payload.ptr, it->payload.len);
        p = batch_put_str(p, 4, it->reply_to);
        p = batch_put_varint(p, 5, it->deliveries);
        p = batch_put_varint(p, 6, it->prefix_tokens);
    }
    p = batch_put_varint(p, 7, status);
    p = batch_put_str(p, 8, msg->error);
    *out_len = (size_t)(p - *buf);
    return CODEC_OK;
}

codec_status_t codec_encode_batch(const codec_batch_t *msg, uint8_t **out_buf, size_t *out_len)
{
    uint8_t *buf = NULL;
    size_t cap = 0;
    if (!out_buf)
        return CODEC_EINVAL;
    codec_status_t st = codec_encode_batch_into(msg, &buf, &cap, out_len);
    if (st != CODEC_OK) {
        free(buf);
        return st;
    }
    *out_buf = buf;
    return CODEC_OK;
}
