/*
 * submit_reply.c - the producer's answer: SubmitReply (with an ItemResult per item), written by the
 * daemon for every Submit and read by every producer, both by hand (wire.c). Split from submit.c,
 * the rest of its message family, for length.
 *
 * Invariants (besides codec_int.h's):
 *   1. Written byte for byte as protobuf-c packs it (wire.c invariant 3); read exactly as
 * protobuf-c unpacks it, in two passes as Submit is (submit.c): check and count, then one
 * allocation holding the box, the results and an arena their views point into.
 *   2. A status outside codec_item_status_t passes through decode unchanged (the client refuses
 *      it as a protocol error).
 *
 * Rejected: protobuf-c for this message: four allocations per item result on
 * every producer's reply, and a descriptor walk per result on the daemon's.
 */
#include "codec/codec_int.h"

#include <string.h>

struct submit_reply_box {
    codec_submit_reply_t pub;
    codec_item_result_t results[];
};

typedef struct {
    size_t results, bytes; /* bytes: of ids and strings, a NUL per string */
} reply_count_t;

/* A string or bytes field: counted (arena NULL) or copied (a NUL after a string). */
static int reply_field(wire_t *w, unsigned type, reply_count_t *c, uint8_t **arena, int string,
                       const uint8_t **out, size_t *out_len)
{
    wire_t f;
    if (type != WIRE_BYTES || !wire_bytes(w, &f))
        return 0;
    size_t n = (size_t)(f.end - f.p);
    if (arena == NULL) {
        c->bytes += n + (string ? 1 : 0);
        return 1;
    }
    uint8_t *at = *arena;
    if (n != 0)
        memcpy(at, f.p, n);
    if (string)
        at[n] = '\0';
    *arena += n + (string ? 1 : 0);
    *out = string || n != 0 ? at : NULL;
    *out_len = n;
    return 1;
}

/* One ItemResult: counted (arena NULL) or filled. 1, or 0 when malformed. */
static int reply_result_read(wire_t w, reply_count_t *c, uint8_t **arena, codec_item_result_t *r)
{
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        uint64_t v;
        const uint8_t *p = NULL;
        size_t n = 0;
        if (!wire_tag(&w, &field, &type))
            return 0;
        switch (field) {
        case 1: /* id */
            if (!reply_field(&w, type, c, arena, 0, &p, &n))
                return 0;
            if (arena != NULL)
                r->id = (codec_bytes_t){p, n};
            break;
        case 2: /* status, an enum: its low 32 bits as a signed value (invariant 2) */
            if (type != WIRE_VARINT || !wire_varint(&w, &v))
                return 0;
            if (arena != NULL)
                r->status = (codec_item_status_t)(int32_t)(uint32_t)v;
            break;
        case 3: /* reason */
        case 4: /* error */
            if (!reply_field(&w, type, c, arena, 1, &p, &n))
                return 0;
            if (arena != NULL)
                *(field == 3 ? &r->reason : &r->error) = (const char *)p;
            break;
        default:
            if (!wire_skip(&w, type))
                return 0;
        }
    }
    return 1;
}

static int reply_read(wire_t w, reply_count_t *c, uint8_t **arena, struct submit_reply_box *box)
{
    size_t n = 0;
    while (w.p < w.end) {
        uint32_t field;
        unsigned type;
        const uint8_t *p = NULL;
        size_t len = 0;
        wire_t f;
        if (!wire_tag(&w, &field, &type))
            return 0;
        if (field == 1) {
            if (type != WIRE_BYTES || !wire_bytes(&w, &f))
                return 0;
            if (arena != NULL)
                box->results[n] = (codec_item_result_t){.reason = "", .error = ""};
            if (!reply_result_read(f, c, arena, arena != NULL ? &box->results[n] : NULL))
                return 0;
            n++;
        } else if (field == 2) {
            if (!reply_field(&w, type, c, arena, 1, &p, &len))
                return 0;
            if (arena != NULL)
                box->pub.error = (const char *)p;
        } else if (!wire_skip(&w, type)) {
            return 0;
        }
    }
    if (arena == NULL)
        c->results = n;
    return 1;
}

uint64_t codec_submit_reply_bound(const codec_submit_t *sub)
{
    static size_t longest;
    if (longest == 0) {
        for (int i = 0; i < CODEC_STATUS_COUNT; i++) {
            size_t n = strlen(codec_status_reason((codec_status_t)i));
            longest = n > longest ? n : longest;
        }
    }
    uint64_t total = 0;
    for (size_t i = 0; i < sub->n_items; i++) {
        size_t id = sub->items[i].id.len;
        size_t result = 1 + wire_varint_len(id) + id + 2 + 1 + wire_varint_len(longest) + longest;
        total += 1 + wire_varint_len(result) + result;
    }
    return total;
}

codec_status_t codec_decode_submit_reply(const void *buf, size_t len, codec_submit_reply_t **out)
{
    reply_count_t c = {0};
    if (!out || (!buf && len))
        return CODEC_EINVAL;
    wire_t w = {buf, (const uint8_t *)buf + len};
    if (!reply_read(w, &c, NULL, NULL))
        return CODEC_EMALFORMED;
    size_t results = c.results * sizeof(codec_item_result_t);
    struct submit_reply_box *box = malloc(sizeof(*box) + results + c.bytes);
    if (!box)
        return CODEC_ENOMEM;
    box->pub = (codec_submit_reply_t){.error = ""};
    uint8_t *arena = (uint8_t *)box->results + results;
    reply_read(w, &c, &arena, box); /* the same bytes read again cannot fail */
    box->pub.results = box->results;
    box->pub.n_results = c.results;
    *out = &box->pub;
    return CODEC_OK;
}

void codec_submit_reply_destroy(codec_submit_reply_t *pub)
{
    free(pub); /* the box starts with pub and holds everything in one allocation */
}

static size_t reply_str_size(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n ? 1 + wire_varint_len(n) + n : 0;
}

static size_t reply_result_size(const codec_item_result_t *r, uint64_t status)
{
    return (r->id.len ? 1 + wire_varint_len(r->id.len) + r->id.len : 0) +
           (status ? 1 + wire_varint_len(status) : 0) + reply_str_size(r->reason) +
           reply_str_size(r->error);
}

static uint8_t *reply_put_str(uint8_t *p, uint32_t field, const char *s)
{
    return s && s[0] ? wire_put_bytes(p, field, s, strlen(s)) : p;
}

codec_status_t codec_encode_submit_reply(const codec_submit_reply_t *msg, uint8_t **out_buf,
                                         size_t *out_len)
{
    if (!msg || !out_buf || !out_len || (msg->n_results && !msg->results))
        return CODEC_EINVAL;
    size_t len = reply_str_size(msg->error);
    for (size_t i = 0; i < msg->n_results; i++) {
        const codec_item_result_t *r = &msg->results[i];
        if (!r->id.ptr && r->id.len)
            return CODEC_EINVAL;
        /* an enum is an int32 on the wire: a negative one takes ten bytes */
        size_t n = reply_result_size(r, (uint64_t)(int64_t)(int32_t)r->status);
        len += 1 + wire_varint_len(n) + n;
    }
    uint8_t *buf = malloc(len ? len : 1), *p = buf;
    if (!buf)
        return CODEC_ENOMEM;
    for (size_t i = 0; i < msg->n_results; i++) {
        const codec_item_result_t *r = &msg->results[i];
        uint64_t status = (uint64_t)(int64_t)(int32_t)r->status;
        p = wire_put_varint(wire_put_tag(p, 1, WIRE_BYTES), reply_result_size(r, status));
        if (r->id.len)
            p = wire_put_bytes(p, 1, r->id.ptr, r->id.len);
        if (status)
            p = wire_put_varint(wire_put_tag(p, 2, WIRE_VARINT), status);
        p = reply_put_str(p, 3, r->reason);
        p = reply_put_str(p, 4, r->error);
    }
    p = reply_put_str(p, 2, msg->error);
    *out_buf = buf;
    *out_len = (size_t)(p - buf);
    return CODEC_OK;
}
