/*
 * test_codec_wire.c - the messages written and read by hand (codec/wire.c: Submit in submit.c,
 * SubmitReply in submit_reply.c, Batch in batch.c) against protobuf-c, the reference they
 * replaced: the same messages decode to the same values, the same bytes are refused, and each is
 * written byte for byte as protobuf-c packs it.
 *
 * The three messages share the generators, the comparisons with protobuf-c and the mutation
 * loop. Generated messages (every field, empty fields, hashes packed and one by one, fields
 * repeated, unknown fields of every wire type), each protobuf-c rule written out as a case, then
 * thousands of mutations (bytes flipped, cut, inserted) of generated messages, each decoded by
 * both.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/codec.h"
#include "lanes.pb-c.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- wire writing, for the cases protobuf-c's packer never produces ------------------------ */

typedef struct {
    uint8_t b[4096];
    size_t n;
} msg_t;

static void put(msg_t *m, const void *p, size_t n)
{
    assert_true(m->n + n <= sizeof(m->b));
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void put_varint(msg_t *m, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        put(m, &c, 1);
    } while (v);
}

static void put_tag(msg_t *m, uint32_t field, unsigned type)
{
    put_varint(m, (uint64_t)field << 3 | type);
}

static void put_bytes(msg_t *m, uint32_t field, const void *p, size_t n)
{
    put_tag(m, field, 2);
    put_varint(m, n);
    put(m, p, n);
}

static void put_fixed64(msg_t *m, uint32_t field, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put_tag(m, field, 1);
    put(m, b, 8);
}

/* Wraps an item's bytes as field 1 of a Submit. */
static void put_item(msg_t *submit, const msg_t *item)
{
    put_bytes(submit, 1, item->b, item->n);
}

/* ---- the comparison ------------------------------------------------------------------------ */

/* Decodes with both; fails unless they agree. Returns 1 when both accepted. */
static int both(const uint8_t *buf, size_t len)
{
    Lanes__V1__Submit *ref = (Lanes__V1__Submit *)protobuf_c_message_unpack(
        &lanes__v1__submit__descriptor, NULL, len, len ? buf : (const uint8_t *)"");
    codec_submit_t *got = NULL;
    codec_status_t st = codec_decode_submit(buf, len, NULL, &got);
    if (ref == NULL) {
        assert_int_equal(st, CODEC_EMALFORMED);
        assert_null(got);
        return 0;
    }
    assert_int_equal(st, CODEC_OK);
    assert_int_equal(got->n_items, ref->n_items);
    for (size_t i = 0; i < ref->n_items; i++) {
        const Lanes__V1__WorkItem *w = ref->items[i];
        const codec_work_item_t *it = &got->items[i];
        assert_int_equal(it->id.len, w->id.len);
        assert_true(it->id.len == 0 ? it->id.ptr == NULL
                                    : memcmp(it->id.ptr, w->id.data, w->id.len) == 0);
        assert_int_equal(it->payload.len, w->payload.len);
        assert_true(it->payload.len == 0
                        ? it->payload.ptr == NULL
                        : memcmp(it->payload.ptr, w->payload.data, w->payload.len) == 0);
        assert_string_equal(it->model, w->model ? w->model : "");
        assert_string_equal(it->reply_to, w->reply_to ? w->reply_to : "");
        assert_int_equal(it->n_component_hashes, w->n_component_hashes);
        for (size_t k = 0; k < w->n_component_hashes; k++)
            assert_true(it->component_hashes[k] == w->component_hashes[k]);
        assert_true(it->signature == w->signature);
        assert_true(it->has_signature == (w->signature != 0));
        assert_int_equal(it->tokens, w->tokens);
        assert_true(it->created_unix_ns == w->created_unix_ns);
        assert_int_equal(it->prefix_tokens, w->prefix_tokens);
        assert_int_equal(it->max_wait_ms, w->max_wait_ms);
    }
    codec_submit_destroy(got);
    protobuf_c_message_free_unpacked(&ref->base, NULL);
    return 1;
}

static int both_msg(const msg_t *m)
{
    return both(m->b, m->n);
}

/* A random Submit through the codec's own encoder (protobuf-c's packer). */
static uint8_t *random_submit(size_t *len)
{
    size_t n = rnd() % 6;
    codec_work_item_t items[6];
    char ids[6][80], models[6][40], replies[6][40];
    uint8_t payloads[6][300];
    uint64_t hashes[6][4];
    for (size_t i = 0; i < n; i++) {
        size_t idl = rnd() % 70, pl = rnd() % 300, nh = rnd() % 4;
        for (size_t k = 0; k < idl; k++)
            ids[i][k] = (char)('a' + rnd() % 26);
        for (size_t k = 0; k < pl; k++)
            payloads[i][k] = (uint8_t)rnd();
        for (size_t k = 0; k < nh; k++)
            hashes[i][k] = rnd();
        int named = rnd() % 4 != 0, replied = rnd() % 2 != 0;
        unsigned model_no = (unsigned)(rnd() % 9), reply_no = (unsigned)(rnd() % 999);
        models[i][0] = replies[i][0] = '\0';
        if (named)
            snprintf(models[i], sizeof(models[i]), "model-%u", model_no);
        if (replied)
            snprintf(replies[i], sizeof(replies[i]), "_INBOX.%u", reply_no);
        uint64_t sig = rnd() % 3 ? rnd() | 1 : 0;
        items[i] = (codec_work_item_t){.id = {idl ? (const uint8_t *)ids[i] : NULL, idl},
                                       .model = models[i],
                                       .component_hashes = nh ? hashes[i] : NULL,
                                       .n_component_hashes = nh,
                                       .has_signature = sig != 0,
                                       .signature = sig,
                                       .tokens = (uint32_t)(rnd() % 3 ? rnd() : 0),
                                       .payload = {pl ? payloads[i] : NULL, pl},
                                       .reply_to = replies[i],
                                       .created_unix_ns = rnd() % 2 ? rnd() : 0,
                                       .prefix_tokens = (uint32_t)(rnd() % 2 ? rnd() : 0),
                                       .max_wait_ms = (uint32_t)(rnd() % 2 ? rnd() : 0)};
    }
    codec_submit_t s = {items, n};
    uint8_t *buf = NULL;
    assert_int_equal(codec_encode_submit(&s, &buf, len), CODEC_OK);
    return buf;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_generated_submits_decode_as_protobuf_c_does(void **state)
{
    (void)state;
    for (int k = 0; k < 2000; k++) {
        size_t len = 0;
        uint8_t *buf = random_submit(&len);
        assert_int_equal(both(buf, len), 1);
        free(buf);
    }
}

static void test_each_protobuf_c_rule(void **state)
{
    (void)state;
    msg_t m = {0}, it = {0};
    /* the empty message: no items */
    assert_int_equal(both_msg(&m), 1);
    /* tag whose first byte carries no field number (0x00..0x07), alone or continued */
    m = (msg_t){.b = {0x07}, .n = 1};
    assert_int_equal(both_msg(&m), 0);
    m = (msg_t){.b = {0x80, 0x01, 0x00}, .n = 3}; /* field 16 in two bytes, varint 0: skipped */
    assert_int_equal(both_msg(&m), 1);
    m = (msg_t){.b = {0x82, 0x80, 0x80, 0x80, 0x80, 0x00}, .n = 6}; /* tag of six bytes */
    assert_int_equal(both_msg(&m), 0);
    /* groups and the reserved wire types, as unknown fields */
    for (unsigned t = 3; t <= 7; t++) {
        m = (msg_t){0};
        put_tag(&m, 9, t);
        put(&m, "\1\0\0\0", 4); /* a whole fixed32, the only one of them that is legal */
        assert_int_equal(both_msg(&m), t == 5);
    }
    /* unknown fields of every legal type, at both levels */
    m = (msg_t){0};
    it = (msg_t){0};
    put_tag(&it, 30, 0);
    put_varint(&it, UINT64_MAX);
    put_fixed64(&it, 31, 7);
    put_bytes(&it, 32, "zz", 2);
    put_tag(&it, 33, 5);
    put(&it, "abcd", 4);
    put_bytes(&it, 1, "id", 2);
    put_item(&m, &it);
    put_tag(&m, 2, 0);
    put_varint(&m, 5);
    put_bytes(&m, 3, "x", 1);
    assert_int_equal(both_msg(&m), 1);
    /* known fields with the wrong wire type */
    static const struct {
        uint32_t field;
        unsigned type;
    } wrong[] = {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {4, 2}, {5, 2}, {5, 1}, {6, 0}, {7, 5}, {8, 1}};
    for (size_t k = 0; k < sizeof(wrong) / sizeof(wrong[0]); k++) {
        m = (msg_t){0};
        it = (msg_t){0};
        put_tag(&it, wrong[k].field, wrong[k].type);
        put(&it, "\x01\x00\x00\x00\x00\x00\x00\x00\x00", 9);
        put_item(&m, &it);
        assert_int_equal(both_msg(&m), 0);
    }
    m = (msg_t){.b = {0x08, 0x01}, .n = 2}; /* Submit.items as a varint */
    assert_int_equal(both_msg(&m), 0);
    /* hashes packed (length a multiple of 8 or not), one by one, and mixed: all appended */
    m = (msg_t){0};
    it = (msg_t){0};
    put_fixed64(&it, 3, 11);
    put_bytes(&it, 3, "\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0", 16);
    put_fixed64(&it, 3, 13);
    put_item(&m, &it);
    assert_int_equal(both_msg(&m), 1);
    m = (msg_t){0};
    it = (msg_t){0};
    put_bytes(&it, 3, "\x01\0\0\0\0\0\0\0\x02", 9);
    put_item(&m, &it);
    assert_int_equal(both_msg(&m), 0);
    /* scalars, strings and bytes given twice: the last wins; items given twice: two items */
    m = (msg_t){0};
    it = (msg_t){0};
    put_bytes(&it, 1, "first", 5);
    put_bytes(&it, 1, "second", 6);
    put_bytes(&it, 2, "m1", 2);
    put_bytes(&it, 2, "m2", 2);
    put_tag(&it, 5, 0);
    put_varint(&it, 3);
    put_tag(&it, 5, 0);
    put_varint(&it, 0x1ffffffffull); /* a uint32 keeps its low 32 bits */
    put_fixed64(&it, 4, 5);
    put_fixed64(&it, 4, 0);
    put_item(&m, &it);
    put_item(&m, &it);
    assert_int_equal(both_msg(&m), 1);
    /* a string with a NUL inside, an empty string and empty bytes */
    m = (msg_t){0};
    it = (msg_t){0};
    put_bytes(&it, 2, "ab\0cd", 5);
    put_bytes(&it, 7, "", 0);
    put_bytes(&it, 6, "", 0);
    put_item(&m, &it);
    assert_int_equal(both_msg(&m), 1);
    /* varints: ten bytes are the most, an eleventh byte is malformed, a cut one too */
    m = (msg_t){0};
    it = (msg_t){0};
    put_tag(&it, 8, 0);
    put(&it, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10);
    put_item(&m, &it);
    assert_int_equal(both_msg(&m), 1);
    m = (msg_t){0};
    it = (msg_t){0};
    put_tag(&it, 8, 0);
    put(&it, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    put_item(&m, &it);
    assert_int_equal(both_msg(&m), 0);
    /* lengths: past the end, of more than five bytes, above 2^31 - 1, of exactly five bytes */
    m = (msg_t){.b = {0x0a, 0x05, 0x00}, .n = 3};
    assert_int_equal(both_msg(&m), 0);
    m = (msg_t){.b = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, .n = 7};
    assert_int_equal(both_msg(&m), 0);
    m = (msg_t){.b = {0x0a, 0x81, 0x80, 0x80, 0x80, 0x10}, .n = 6}; /* 2^32 + 1 */
    assert_int_equal(both_msg(&m), 0);
    m = (msg_t){.b = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x00}, .n = 6}; /* 0 in five bytes */
    assert_int_equal(both_msg(&m), 1);
    /* fixed widths cut short */
    m = (msg_t){0};
    it = (msg_t){0};
    put_tag(&it, 4, 1);
    put(&it, "\x01\x02\x03", 3);
    put_item(&m, &it);
    assert_int_equal(both_msg(&m), 0);
}

static void test_mutated_submits_are_refused_or_read_alike(void **state)
{
    (void)state;
    int accepted = 0, refused = 0;
    for (int k = 0; k < 20000; k++) {
        size_t len = 0;
        uint8_t *buf = random_submit(&len);
        uint8_t m[4200];
        size_t n = len < sizeof(m) - 8 ? len : sizeof(m) - 8;
        memcpy(m, buf, n);
        free(buf);
        for (int edits = 1 + (int)(rnd() % 3); edits > 0 && n > 0; edits--) {
            size_t at = rnd() % n;
            switch (rnd() % 4) {
            case 0:
                m[at] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 1:
                m[at] = (uint8_t)rnd();
                break;
            case 2:
                n = at; /* cut */
                break;
            default:
                memmove(m + at + 1, m + at, n - at); /* insert a byte */
                m[at] = (uint8_t)rnd();
                n++;
            }
        }
        if (both(m, n))
            accepted++;
        else
            refused++;
    }
    /* both outcomes were exercised, each thousands of times */
    assert_true(accepted > 1000);
    assert_true(refused > 1000);
}

static void test_items_keep_their_own_hashes_and_statuses(void **state)
{
    (void)state;
    uint64_t h[2] = {1, 2};
    codec_work_item_t items[3] = {
        {.id = {(const uint8_t *)"a", 1},
         .model = "m",
         .component_hashes = h,
         .n_component_hashes = 2,
         .tokens = 5},
        {.id = {(const uint8_t *)"b", 1},
         .model = "m",
         .has_signature = true,
         .signature = 9,
         .tokens = 0},
        {.id = {(const uint8_t *)"c", 1},
         .model = "m",
         .component_hashes = h + 1,
         .n_component_hashes = 1,
         .tokens = 7},
    };
    codec_submit_t s = {items, 3};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
    codec_limits_t lim = {.model = "m"};
    codec_submit_t *got = NULL;
    assert_int_equal(codec_decode_submit(buf, len, &lim, &got), CODEC_OK);
    free(buf);
    assert_int_equal(got->n_items, 3);
    assert_int_equal(got->items[0].n_component_hashes, 2);
    assert_true(got->items[0].component_hashes[1] == 2);
    assert_int_equal(got->items[0].status, CODEC_OK);
    assert_true(got->items[0].shape == codec_signature(h, 2));
    assert_int_equal(got->items[1].status, CODEC_EZERO_TOKENS);
    assert_null(got->items[1].component_hashes);
    assert_int_equal(got->items[2].n_component_hashes, 1);
    assert_true(got->items[2].component_hashes[0] == 2);
    assert_true(got->items[2].shape == codec_signature(h + 1, 1));
    codec_submit_destroy(got);
}

/* ---- Submit written by hand, SubmitReply both ways ------------------------------------------ */

/* protobuf-c's packing of the Submit that codec_encode_submit was given (the codec's encoder is the
 * one under test): *ref_len bytes at *ref. */
static void submit_ref_pack(const codec_submit_t *s, uint8_t **ref, size_t *ref_len)
{
    Lanes__V1__WorkItem w[8], *ptrs[8];
    assert_true(s->n_items <= 8);
    for (size_t i = 0; i < s->n_items; i++) {
        const codec_work_item_t *it = &s->items[i];
        lanes__v1__work_item__init(&w[i]);
        w[i].id = (ProtobufCBinaryData){it->id.len, (uint8_t *)it->id.ptr};
        w[i].model = (char *)(it->model ? it->model : "");
        w[i].n_component_hashes = it->n_component_hashes;
        w[i].component_hashes = (uint64_t *)it->component_hashes;
        w[i].signature = it->has_signature ? it->signature : 0;
        w[i].tokens = it->tokens;
        w[i].payload = (ProtobufCBinaryData){it->payload.len, (uint8_t *)it->payload.ptr};
        w[i].reply_to = (char *)(it->reply_to ? it->reply_to : "");
        w[i].created_unix_ns = it->created_unix_ns;
        w[i].prefix_tokens = it->prefix_tokens;
        w[i].max_wait_ms = it->max_wait_ms;
        ptrs[i] = &w[i];
    }
    Lanes__V1__Submit pb = LANES__V1__SUBMIT__INIT;
    pb.n_items = s->n_items;
    pb.items = ptrs;
    *ref_len = protobuf_c_message_get_packed_size(&pb.base);
    *ref = malloc(*ref_len ? *ref_len : 1);
    assert_non_null(*ref);
    protobuf_c_message_pack(&pb.base, *ref);
}

static void test_submits_are_written_byte_for_byte_as_protobuf_c_packs_them(void **state)
{
    (void)state;
    for (int k = 0; k < 2000; k++) {
        size_t n = rnd() % 7;
        codec_work_item_t items[8];
        char ids[8][40], models[8][24];
        uint8_t payloads[8][200];
        uint64_t hashes[8][3];
        for (size_t i = 0; i < n; i++) {
            size_t idl = rnd() % 40, pl = rnd() % 200, nh = rnd() % 4;
            memset(ids[i], 'a' + (int)(rnd() % 26), sizeof(ids[i]));
            memset(payloads[i], (int)(rnd() % 256), sizeof(payloads[i]));
            for (size_t h = 0; h < 3; h++)
                hashes[i][h] = rnd();
            int named = rnd() % 3 != 0;
            unsigned model_no = (unsigned)(rnd() % 9);
            models[i][0] = '\0';
            if (named)
                snprintf(models[i], sizeof(models[i]), "m%u", model_no);
            uint64_t sig = rnd() % 3 ? rnd() | 1 : 0;
            items[i] = (codec_work_item_t){.id = {idl ? (const uint8_t *)ids[i] : NULL, idl},
                                           .model = rnd() % 5 ? models[i] : NULL,
                                           .component_hashes = nh ? hashes[i] : NULL,
                                           .n_component_hashes = nh > 3 ? 3 : nh,
                                           .has_signature = sig != 0,
                                           .signature = sig,
                                           .tokens = (uint32_t)(rnd() % 3 ? rnd() : 0),
                                           .payload = {pl ? payloads[i] : NULL, pl},
                                           .reply_to = rnd() % 2 ? "_INBOX.r" : NULL,
                                           .created_unix_ns = rnd() % 2 ? rnd() : 0,
                                           .prefix_tokens = (uint32_t)(rnd() % 2 ? rnd() : 0),
                                           .max_wait_ms = (uint32_t)(rnd() % 2 ? rnd() : 0)};
        }
        codec_submit_t sub = {items, n};
        uint8_t *buf = NULL, *ref = NULL;
        size_t len = 0, ref_len = 0;
        assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_OK);
        submit_ref_pack(&sub, &ref, &ref_len);
        assert_int_equal(len, ref_len);
        assert_memory_equal(buf, ref, len);
        free(buf);
        free(ref);
    }
    /* the encoder's argument checks */
    codec_work_item_t bad = {.has_signature = true, .signature = 0};
    codec_submit_t sub = {&bad, 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_EINVAL);
    bad = (codec_work_item_t){.n_component_hashes = 2};
    assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_EINVAL);
    bad = (codec_work_item_t){.payload = {NULL, 4}};
    assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_EINVAL);
    sub = (codec_submit_t){NULL, 1};
    assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_EINVAL);
    assert_null(buf);
}

static uint8_t *random_reply(size_t *len, uint8_t **ref, size_t *ref_len)
{
    size_t n = rnd() % 8;
    codec_item_result_t rs[8];
    Lanes__V1__ItemResult prs[8], *ptrs[8];
    char ids[8][40];
    static const char *const reasons[] = {"", "ok", "duplicate", "zero_tokens"};
    static const char *const errors[] = {"", "tokens must be greater than zero"};
    static const int statuses[] = {0, 1, 2, 9, -1};
    for (size_t i = 0; i < n; i++) {
        size_t idl = rnd() % 40;
        memset(ids[i], 'a' + (int)(rnd() % 26), sizeof(ids[i]));
        rs[i] = (codec_item_result_t){.id = {idl ? (const uint8_t *)ids[i] : NULL, idl},
                                      .status = (codec_item_status_t)statuses[rnd() % 5],
                                      .reason = reasons[rnd() % 4],
                                      .error = errors[rnd() % 2]};
        lanes__v1__item_result__init(&prs[i]);
        prs[i].id = (ProtobufCBinaryData){idl, (uint8_t *)ids[i]};
        prs[i].status = (Lanes__V1__ItemStatus)rs[i].status;
        prs[i].reason = (char *)rs[i].reason;
        prs[i].error = (char *)rs[i].error;
        ptrs[i] = &prs[i];
    }
    codec_submit_reply_t r = {rs, n, rnd() % 4 ? "" : "malformed: message is not a protobuf"};
    Lanes__V1__SubmitReply pb = LANES__V1__SUBMIT_REPLY__INIT;
    pb.n_results = n;
    pb.results = ptrs;
    pb.error = (char *)r.error;
    *ref_len = protobuf_c_message_get_packed_size(&pb.base);
    *ref = malloc(*ref_len ? *ref_len : 1);
    assert_non_null(*ref);
    protobuf_c_message_pack(&pb.base, *ref);
    uint8_t *buf = NULL;
    assert_int_equal(codec_encode_submit_reply(&r, &buf, len), CODEC_OK);
    return buf;
}

static int both_reply(const uint8_t *buf, size_t len)
{
    Lanes__V1__SubmitReply *ref = (Lanes__V1__SubmitReply *)protobuf_c_message_unpack(
        &lanes__v1__submit_reply__descriptor, NULL, len, len ? buf : (const uint8_t *)"");
    codec_submit_reply_t *got = NULL;
    codec_status_t st = codec_decode_submit_reply(buf, len, &got);
    if (ref == NULL) {
        assert_int_equal(st, CODEC_EMALFORMED);
        return 0;
    }
    assert_int_equal(st, CODEC_OK);
    assert_string_equal(got->error, ref->error ? ref->error : "");
    assert_int_equal(got->n_results, ref->n_results);
    for (size_t i = 0; i < ref->n_results; i++) {
        const Lanes__V1__ItemResult *w = ref->results[i];
        const codec_item_result_t *r = &got->results[i];
        assert_int_equal(r->id.len, w->id.len);
        assert_true(r->id.len == 0 ? r->id.ptr == NULL
                                   : memcmp(r->id.ptr, w->id.data, w->id.len) == 0);
        assert_int_equal((int)r->status, (int)w->status);
        assert_string_equal(r->reason, w->reason ? w->reason : "");
        assert_string_equal(r->error, w->error ? w->error : "");
    }
    codec_submit_reply_destroy(got);
    protobuf_c_message_free_unpacked(&ref->base, NULL);
    return 1;
}

static void test_submit_replies_match_protobuf_c_both_ways(void **state)
{
    (void)state;
    for (int k = 0; k < 2000; k++) {
        size_t len = 0, ref_len = 0;
        uint8_t *ref = NULL, *buf = random_reply(&len, &ref, &ref_len);
        assert_int_equal(len, ref_len);
        assert_memory_equal(buf, ref, len);
        assert_int_equal(both_reply(buf, len), 1);
        free(buf);
        free(ref);
    }
    int accepted = 0, refused = 0;
    for (int k = 0; k < 20000; k++) {
        size_t len = 0, ref_len = 0;
        uint8_t *ref = NULL, *buf = random_reply(&len, &ref, &ref_len);
        uint8_t m[1200];
        size_t n = len < sizeof(m) - 8 ? len : sizeof(m) - 8;
        memcpy(m, buf, n);
        free(buf);
        free(ref);
        for (int edits = 1 + (int)(rnd() % 3); edits > 0 && n > 0; edits--) {
            size_t at = rnd() % n;
            if (rnd() % 3 == 0)
                n = at;
            else
                m[at] ^= (uint8_t)(1u << (rnd() % 8));
        }
        if (both_reply(m, n))
            accepted++;
        else
            refused++;
    }
    assert_true(accepted > 1000);
    assert_true(refused > 1000);
}

/* ---- Batch: written and read by hand ------------------------------------------------------- */

/* A random Batch, encoded by the codec; *ref is the same message as protobuf-c would pack it. */
static uint8_t *random_batch(size_t *len, uint8_t **ref, size_t *ref_len)
{
    size_t n = rnd() % 6;
    codec_batch_item_t items[6];
    Lanes__V1__BatchItem pitems[6], *pptrs[6];
    char ids[6][70], replies[6][40];
    uint8_t payloads[6][300];
    static const char *const models[] = {"", "model-a", "x.y.z"};
    static const char *const errors[] = {"", "delivery_limit: delivered 5 times"};
    for (size_t i = 0; i < n; i++) {
        size_t idl = rnd() % 70, pl = rnd() % 300;
        for (size_t k = 0; k < idl; k++)
            ids[i][k] = (char)('a' + rnd() % 26);
        for (size_t k = 0; k < pl; k++)
            payloads[i][k] = (uint8_t)rnd();
        int replied = rnd() % 2 != 0;
        unsigned reply_no = (unsigned)(rnd() % 999);
        replies[i][0] = '\0';
        if (replied)
            snprintf(replies[i], sizeof(replies[i]), "_INBOX.%u", reply_no);
        items[i] = (codec_batch_item_t){.id = {idl ? (const uint8_t *)ids[i] : NULL, idl},
                                        .tokens = (uint32_t)(rnd() % 3 ? rnd() : 0),
                                        .payload = {pl ? payloads[i] : NULL, pl},
                                        .reply_to = replies[i],
                                        .deliveries = (uint32_t)(rnd() % 4),
                                        .prefix_tokens = (uint32_t)(rnd() % 2 ? rnd() : 0)};
        lanes__v1__batch_item__init(&pitems[i]);
        pitems[i].id = (ProtobufCBinaryData){idl, (uint8_t *)ids[i]};
        pitems[i].tokens = items[i].tokens;
        pitems[i].payload = (ProtobufCBinaryData){pl, payloads[i]};
        pitems[i].reply_to = replies[i];
        pitems[i].deliveries = items[i].deliveries;
        pitems[i].prefix_tokens = items[i].prefix_tokens;
        pptrs[i] = &pitems[i];
    }
    static const int statuses[] = {0, 1, 2, 7, -3};
    codec_batch_t b = {.batch_id = rnd() % 2 ? rnd() : 0,
                       .model = models[rnd() % 3],
                       .signature = rnd() % 2 ? rnd() : 0,
                       .lane = (uint32_t)(rnd() % 2 ? rnd() : 0),
                       .pad_to = (uint32_t)(rnd() % 2 ? rnd() : 0),
                       .items = items,
                       .n_items = n,
                       .status = (codec_batch_status_t)statuses[rnd() % 5],
                       .error = errors[rnd() % 2]};
    Lanes__V1__Batch pb = LANES__V1__BATCH__INIT;
    pb.batch_id = b.batch_id;
    pb.model = (char *)b.model;
    pb.signature = b.signature;
    pb.lane = b.lane;
    pb.pad_to = b.pad_to;
    pb.n_items = n;
    pb.items = pptrs;
    pb.status = (Lanes__V1__BatchStatus)b.status;
    pb.error = (char *)b.error;
    *ref_len = protobuf_c_message_get_packed_size(&pb.base);
    *ref = malloc(*ref_len ? *ref_len : 1);
    assert_non_null(*ref);
    protobuf_c_message_pack(&pb.base, *ref);
    uint8_t *buf = NULL;
    assert_int_equal(codec_encode_batch(&b, &buf, len), CODEC_OK);
    return buf;
}

/* Decodes with both; fails unless they agree. Returns 1 when both accepted. */
static int both_batch(const uint8_t *buf, size_t len)
{
    Lanes__V1__Batch *ref = (Lanes__V1__Batch *)protobuf_c_message_unpack(
        &lanes__v1__batch__descriptor, NULL, len, len ? buf : (const uint8_t *)"");
    codec_batch_t *got = NULL;
    codec_status_t st = codec_decode_batch(buf, len, &got);
    if (ref == NULL) {
        assert_int_equal(st, CODEC_EMALFORMED);
        return 0;
    }
    assert_int_equal(st, CODEC_OK);
    assert_true(got->batch_id == ref->batch_id);
    assert_string_equal(got->model, ref->model ? ref->model : "");
    assert_true(got->signature == ref->signature);
    assert_int_equal(got->lane, ref->lane);
    assert_int_equal(got->pad_to, ref->pad_to);
    assert_int_equal((int)got->status, (int)ref->status);
    assert_string_equal(got->error, ref->error ? ref->error : "");
    assert_int_equal(got->n_items, ref->n_items);
    for (size_t i = 0; i < ref->n_items; i++) {
        const Lanes__V1__BatchItem *w = ref->items[i];
        const codec_batch_item_t *it = &got->items[i];
        assert_int_equal(it->id.len, w->id.len);
        assert_true(it->id.len == 0 ? it->id.ptr == NULL
                                    : memcmp(it->id.ptr, w->id.data, w->id.len) == 0);
        assert_int_equal(it->payload.len, w->payload.len);
        assert_true(it->payload.len == 0
                        ? it->payload.ptr == NULL
                        : memcmp(it->payload.ptr, w->payload.data, w->payload.len) == 0);
        assert_int_equal(it->tokens, w->tokens);
        assert_int_equal(it->deliveries, w->deliveries);
        assert_int_equal(it->prefix_tokens, w->prefix_tokens);
        assert_string_equal(it->reply_to, w->reply_to ? w->reply_to : "");
    }
    codec_batch_destroy(got);
    protobuf_c_message_free_unpacked(&ref->base, NULL);
    return 1;
}

static void test_batches_are_written_byte_for_byte_as_protobuf_c_packs_them(void **state)
{
    (void)state;
    for (int k = 0; k < 2000; k++) {
        size_t len = 0, ref_len = 0;
        uint8_t *ref = NULL, *buf = random_batch(&len, &ref, &ref_len);
        assert_int_equal(len, ref_len);
        assert_memory_equal(buf, ref, len);
        assert_int_equal(both_batch(buf, len), 1);
        free(buf);
        free(ref);
    }
    codec_batch_t b = {.n_items = 1, .items = NULL};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_batch(&b, &buf, &len), CODEC_EINVAL);
    codec_batch_item_t bad = {.payload = {NULL, 3}};
    b.items = &bad;
    assert_int_equal(codec_encode_batch(&b, &buf, &len), CODEC_EINVAL);
}

static void test_mutated_batches_are_refused_or_read_alike(void **state)
{
    (void)state;
    int accepted = 0, refused = 0;
    for (int k = 0; k < 20000; k++) {
        size_t len = 0, ref_len = 0;
        uint8_t *ref = NULL, *buf = random_batch(&len, &ref, &ref_len);
        uint8_t m[2200];
        size_t n = len < sizeof(m) - 8 ? len : sizeof(m) - 8;
        memcpy(m, buf, n);
        free(buf);
        free(ref);
        for (int edits = 1 + (int)(rnd() % 3); edits > 0 && n > 0; edits--) {
            size_t at = rnd() % n;
            switch (rnd() % 4) {
            case 0:
                m[at] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 1:
                m[at] = (uint8_t)rnd();
                break;
            case 2:
                n = at;
                break;
            default:
                memmove(m + at + 1, m + at, n - at);
                m[at] = (uint8_t)rnd();
                n++;
            }
        }
        if (both_batch(m, n))
            accepted++;
        else
            refused++;
    }
    assert_true(accepted > 1000);
    assert_true(refused > 1000);
}

/* An item whose model or reply_to holds a NUL byte or bytes that are not UTF-8: protobuf-c
 * reads such a string cut at the NUL and unchecked, so the codec judges the bytes as sent. The
 * model is refused as bad_model_name (judged at its length as sent, so a long one is still
 * model_too_long), reply_to as bad_reply_to; the other items of the Submit are unaffected. A
 * Register's model is judged the same way. */
static void put_string_item(msg_t *m, const char *id, const char *model, size_t model_len,
                            const char *reply, size_t reply_len)
{
    msg_t it = {0};
    put_bytes(&it, 1, id, strlen(id));
    put_bytes(&it, 2, model, model_len);
    put_fixed64(&it, 4, 0x1234);
    put_tag(&it, 5, 0);
    put_varint(&it, 5);
    if (reply != NULL)
        put_bytes(&it, 7, reply, reply_len);
    put_item(m, &it);
}

static void test_strings_with_a_nul_or_not_utf8_are_refused_per_item(void **state)
{
    (void)state;
    static char longm[300];
    memset(longm, 'a', sizeof(longm));
    longm[2] = '\0';
    msg_t m = {0};
    put_string_item(&m, "a", "m", 1, "res.1", 5);
    put_string_item(&m, "b", "m\0x", 3, NULL, 0);
    put_string_item(&m, "c", "m\xff", 2, NULL, 0);
    put_string_item(&m, "d", "m", 1, "a\0b", 3);
    put_string_item(&m, "e", "m", 1, "res.\xc3(", 6);
    put_string_item(&m, "f", longm, sizeof(longm), NULL, 0);
    put_string_item(&m, "g", "m\xc3\xa9", 3, "r\xc3\xa9s", 4); /* UTF-8 is fine */
    static const codec_status_t want[] = {CODEC_OK,
                                          CODEC_EBAD_MODEL_NAME,
                                          CODEC_EBAD_MODEL_NAME,
                                          CODEC_EBAD_REPLY_TO,
                                          CODEC_EBAD_REPLY_TO,
                                          CODEC_EMODEL_TOO_LONG,
                                          CODEC_OK};
    codec_submit_t *sub = NULL;
    assert_int_equal(codec_decode_submit(m.b, m.n, NULL, &sub), CODEC_OK);
    assert_int_equal(sub->n_items, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < sub->n_items; i++) {
        if (sub->items[i].status != want[i])
            fail_msg("item %zu: %s, expected %s", i, codec_status_reason(sub->items[i].status),
                     codec_status_reason(want[i]));
    }
    /* encoded again, the strings keep their bytes past a NUL: the same verdicts come back */
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(sub, &buf, &len), CODEC_OK);
    codec_submit_t *back = NULL;
    assert_int_equal(codec_decode_submit(buf, len, NULL, &back), CODEC_OK);
    for (size_t i = 0; i < back->n_items; i++)
        assert_int_equal(back->items[i].status, want[i]);
    codec_submit_destroy(back);
    free(buf);
    codec_submit_destroy(sub);

    static const struct {
        const char *model;
        size_t len;
        codec_status_t want;
    } regs[] = {{"nul\0x", 5, CODEC_EBAD_MODEL_NAME},
                {"m\xff", 2, CODEC_EBAD_MODEL_NAME},
                {"m\xc3\xa9", 3, CODEC_OK}};
    for (size_t k = 0; k < sizeof(regs) / sizeof(regs[0]); k++) {
        msg_t r = {0};
        put_bytes(&r, 1, regs[k].model, regs[k].len);
        put_tag(&r, 2, 0);
        put_varint(&r, 8);
        put_tag(&r, 3, 0);
        put_varint(&r, 4096);
        codec_register_t *reg = NULL;
        assert_int_equal(codec_decode_register(r.b, r.n, NULL, &reg), regs[k].want);
        assert_true((reg != NULL) == (regs[k].want == CODEC_OK));
        codec_register_destroy(reg);
    }
}

/* A reply_to a worker would publish on with a space, tab, CR, LF or another control character
 * is refused: NATS clients send the subject as it is, so "r 0\r\nPUB lanes.register ..." would
 * make the worker's connection send the producer's commands. The rest of the byte range, and
 * a subject with dots, '*', '>' or '-', stays the producer's. */
static void test_reply_to_with_whitespace_or_a_control_byte_is_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {"r 0\r\nPUB lanes.register _INBOX.x 2\r\nhi",
                                      "res ult",
                                      "res\tult",
                                      "res\rult",
                                      "res\nult",
                                      "res\x01",
                                      "res\x1f",
                                      "res\x7f",
                                      " res",
                                      "res "};
    static const char *const good[] = {"results.a-b.c_d", "res.*.>", "https://x/y?z=1",
                                       "r\xc3\xa9s"};
    msg_t m = {0};
    size_t nb = sizeof(bad) / sizeof(bad[0]), ng = sizeof(good) / sizeof(good[0]);
    for (size_t i = 0; i < nb; i++)
        put_string_item(&m, "b", "m", 1, bad[i], strlen(bad[i]));
    for (size_t i = 0; i < ng; i++)
        put_string_item(&m, "g", "m", 1, good[i], strlen(good[i]));
    codec_submit_t *sub = NULL;
    assert_int_equal(codec_decode_submit(m.b, m.n, NULL, &sub), CODEC_OK);
    assert_int_equal(sub->n_items, nb + ng);
    for (size_t i = 0; i < sub->n_items; i++) {
        codec_status_t want = i < nb ? CODEC_EBAD_REPLY_TO : CODEC_OK;
        if (sub->items[i].status != want)
            fail_msg("item %zu: %s, expected %s", i, codec_status_reason(sub->items[i].status),
                     codec_status_reason(want));
    }
    codec_submit_destroy(sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generated_submits_decode_as_protobuf_c_does),
        cmocka_unit_test(test_each_protobuf_c_rule),
        cmocka_unit_test(test_mutated_submits_are_refused_or_read_alike),
        cmocka_unit_test(test_items_keep_their_own_hashes_and_statuses),
        cmocka_unit_test(test_strings_with_a_nul_or_not_utf8_are_refused_per_item),
        cmocka_unit_test(test_reply_to_with_whitespace_or_a_control_byte_is_refused),
        cmocka_unit_test(test_submits_are_written_byte_for_byte_as_protobuf_c_packs_them),
        cmocka_unit_test(test_submit_replies_match_protobuf_c_both_ways),
        cmocka_unit_test(test_batches_are_written_byte_for_byte_as_protobuf_c_packs_them),
        cmocka_unit_test(test_mutated_batches_are_refused_or_read_alike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
