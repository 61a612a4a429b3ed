/*
 * test_codec.c - one test per codec rule.
 *
 * Signature vectors are literals computed once outside this code (a pure-Python XXH64 written
 * from the xxHash spec, cross-checked with `xxhsum -H64`), so these tests are not circular.
 * Wire-byte tests hand-write protobuf encodings so that renumbering a field in lanes.proto, or
 * changing its wire type, fails here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"

#define SIG_EMPTY    0xef46db3751d8e999ULL
#define H_ASSISTANT  0xe4a58ad40a48973bULL /* "You are a helpful assistant." */
#define H_FRENCH     0x6fd2a283f58d194eULL /* "Answer in French." */
#define H_TOOLS      0x425afd5d136c7e5eULL /* "Tools: search, calculator." */
#define SIG_ONE      0x91f47f2f45b64efdULL /* [assistant] */
#define SIG_THREE    0xa340b41b91cca53dULL /* [assistant, french, tools] */
#define SIG_REVERSED 0xaf6225c57a35ec89ULL /* [tools, french, assistant] */
#define SIG_1_TO_5   0xbc50ebd6bc8fa148ULL /* hashes 1, 2, 3, 4, 5: 40 bytes, past one stripe */
/* subjects.md's "five" vector: a component and a signature input of 32 bytes and more, XXH64's
 * other path (libxxhash and the Node client's BigInt XXH64 agree on them) */
#define LONG_COMPONENT                                                                          \
    "Context: the user is a customer of an online bookshop and asks about orders, deliveries, " \
    "returns and refunds."
#define H_LONG   0x5e1f688af88d97abULL
#define H_BRIEF  0x52a4b236d9228cc6ULL /* "Be brief." */
#define SIG_FIVE 0x6a17c9adc0a244e4ULL /* [assistant, french, tools, long, brief] */

static const char *const COMPONENTS[3] = {"You are a helpful assistant.", "Answer in French.",
                                          "Tools: search, calculator."};
static const uint64_t THREE[3] = {H_ASSISTANT, H_FRENCH, H_TOOLS};

static codec_bytes_t bytes_of(const char *s)
{
    codec_bytes_t b = {(const uint8_t *)s, strlen(s)};
    return b;
}

static void assert_bytes_equal(codec_bytes_t got, codec_bytes_t want)
{
    assert_int_equal(got.len, want.len);
    if (want.len)
        assert_memory_equal(got.ptr, want.ptr, want.len);
}

/* ---- signatures --------------------------------------------------------------------------- */

static void test_signature_of_empty_vector(void **state)
{
    (void)state;
    assert_int_equal(codec_signature(NULL, 0), SIG_EMPTY);
    assert_int_equal(codec_hash_component("", 0), SIG_EMPTY);
}

static void test_component_hashes_match_vectors(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(codec_hash_component(COMPONENTS[i], strlen(COMPONENTS[i])), THREE[i]);
}

static void test_signature_of_one_component(void **state)
{
    uint64_t h = codec_hash_component(COMPONENTS[0], strlen(COMPONENTS[0]));
    (void)state;
    assert_int_equal(codec_signature(&h, 1), SIG_ONE);
}

static void test_signature_of_three_components(void **state)
{
    (void)state;
    assert_int_equal(codec_signature(THREE, 3), SIG_THREE);
}

static void test_signature_of_five_components_with_a_long_one(void **state)
{
    (void)state;
    assert_int_equal(codec_hash_component(LONG_COMPONENT, strlen(LONG_COMPONENT)), H_LONG);
    assert_int_equal(codec_hash_component("Be brief.", 9), H_BRIEF);
    const uint64_t five[5] = {H_ASSISTANT, H_FRENCH, H_TOOLS, H_LONG, H_BRIEF};
    assert_int_equal(codec_signature(five, 5), SIG_FIVE);
}

static void test_signature_depends_on_order(void **state)
{
    const uint64_t reversed[3] = {H_TOOLS, H_FRENCH, H_ASSISTANT};
    (void)state;
    assert_int_equal(codec_signature(reversed, 3), SIG_REVERSED);
    assert_true(codec_signature(reversed, 3) != codec_signature(THREE, 3));
}

static void test_signature_hashes_little_endian_bytes(void **state)
{
    const uint64_t h = 0x0102030405060708ULL;
    const uint8_t le[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
    (void)state;
    assert_int_equal(codec_signature(&h, 1), codec_hash_component(le, sizeof le));
}

static void test_signature_of_more_than_one_stripe(void **state)
{
    const uint64_t hashes[5] = {1, 2, 3, 4, 5};
    (void)state;
    assert_int_equal(codec_signature(hashes, 5), SIG_1_TO_5);
}

/* ---- status table ------------------------------------------------------------------------- */

static void test_status_strings_are_non_null_and_distinct(void **state)
{
    (void)state;
    for (int i = 0; i < CODEC_STATUS_COUNT; i++) {
        const char *reason = codec_status_reason((codec_status_t)i);
        const char *text = codec_status_str((codec_status_t)i);
        assert_non_null(reason);
        assert_non_null(text);
        assert_true(reason[0] != '\0' && text[0] != '\0');
        for (const char *c = reason; *c; c++)
            assert_true((*c >= 'a' && *c <= 'z') || *c == '_');
        for (int j = 0; j < i; j++) {
            assert_string_not_equal(reason, codec_status_reason((codec_status_t)j));
            assert_string_not_equal(text, codec_status_str((codec_status_t)j));
        }
    }
}

static void test_unknown_status_has_fixed_strings(void **state)
{
    (void)state;
    assert_string_equal(codec_status_str((codec_status_t)CODEC_STATUS_COUNT), "unknown status");
    assert_string_equal(codec_status_str((codec_status_t)-1), "unknown status");
    assert_string_equal(codec_status_reason((codec_status_t)CODEC_STATUS_COUNT), "unknown_status");
}

static void test_reason_words_are_the_contract(void **state)
{
    (void)state;
    assert_int_equal(CODEC_OK, 0);
    assert_string_equal(codec_status_reason(CODEC_OK), "ok");
    assert_string_equal(codec_status_reason(CODEC_EMALFORMED), "malformed");
    assert_string_equal(codec_status_reason(CODEC_ENOMEM), "no_memory");
    assert_string_equal(codec_status_reason(CODEC_EBAD_MODEL), "bad_model");
    assert_string_equal(codec_status_reason(CODEC_EZERO_TOKENS), "zero_tokens");
    assert_string_equal(codec_status_reason(CODEC_EBAD_ID), "bad_id");
    assert_string_equal(codec_status_reason(CODEC_EID_TOO_LONG), "id_too_long");
    assert_string_equal(codec_status_reason(CODEC_EPAYLOAD_TOO_LARGE), "payload_too_large");
    assert_string_equal(codec_status_reason(CODEC_ESIGNATURE_MISMATCH), "signature_mismatch");
    assert_string_equal(codec_status_reason(CODEC_ENO_SHAPE), "no_shape");
    assert_string_equal(codec_status_reason(CODEC_EMODEL_TOO_LONG), "model_too_long");
    assert_string_equal(codec_status_reason(CODEC_EBAD_MODEL_NAME), "bad_model_name");
    assert_string_equal(codec_status_reason(CODEC_ETOKENS_TOO_LARGE), "tokens_too_large");
    assert_string_equal(codec_status_reason(CODEC_DUPLICATE), "duplicate");
    assert_string_equal(codec_status_reason(CODEC_ESTORE_FULL), "store_full");
    assert_string_equal(codec_status_reason(CODEC_ESTORE_ERROR), "store_error");
}

/* ---- Submit validation -------------------------------------------------------------------- */

static const codec_limits_t LIMITS = {"llama", 16, 0, NULL};

static codec_work_item_t good_item(void)
{
    codec_work_item_t it = {
        .id = bytes_of("item-1"),
        .model = "llama",
        .component_hashes = THREE,
        .n_component_hashes = 3,
        .tokens = 10,
        .payload = bytes_of("hello"),
        .reply_to = "_INBOX.abc",
        .created_unix_ns = 1700000000000000000ULL,
    };
    return it;
}

/* Encodes a Submit of n items and decodes it under limits. */
static codec_submit_t *submit_roundtrip(const codec_work_item_t *items, size_t n,
                                        const codec_limits_t *limits)
{
    codec_submit_t in = {items, n};
    codec_submit_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;

    assert_int_equal(codec_encode_submit(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_submit(buf, len, limits, &out), CODEC_OK);
    free(buf);
    assert_non_null(out);
    assert_int_equal(out->n_items, n);
    return out;
}

static codec_status_t item_status(const codec_work_item_t *it, const codec_limits_t *limits)
{
    codec_submit_t *s = submit_roundtrip(it, 1, limits);
    codec_status_t st = s->items[0].status;
    codec_submit_destroy(s);
    return st;
}

static void test_accepts_hashes_only_and_resolves_shape(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t *s = submit_roundtrip(&it, 1, &LIMITS);
    (void)state;
    assert_int_equal(s->items[0].status, CODEC_OK);
    assert_false(s->items[0].has_signature);
    assert_int_equal(s->items[0].shape, SIG_THREE);
    codec_submit_destroy(s);
}

static void test_accepts_signature_only(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t *s;
    (void)state;
    it.component_hashes = NULL;
    it.n_component_hashes = 0;
    it.has_signature = true;
    it.signature = SIG_REVERSED;
    s = submit_roundtrip(&it, 1, &LIMITS);
    assert_int_equal(s->items[0].status, CODEC_OK);
    assert_int_equal(s->items[0].shape, SIG_REVERSED);
    codec_submit_destroy(s);
}

static void test_accepts_empty_vector_signature_as_shape(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t *s;
    (void)state;
    it.component_hashes = NULL;
    it.n_component_hashes = 0;
    it.has_signature = true;
    it.signature = SIG_EMPTY;
    s = submit_roundtrip(&it, 1, &LIMITS);
    assert_int_equal(s->items[0].status, CODEC_OK);
    assert_int_equal(s->items[0].shape, SIG_EMPTY);
    codec_submit_destroy(s);
}

static void test_accepts_matching_signature_and_hashes(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t *s;
    (void)state;
    it.has_signature = true;
    it.signature = SIG_THREE;
    s = submit_roundtrip(&it, 1, &LIMITS);
    assert_int_equal(s->items[0].status, CODEC_OK);
    assert_int_equal(s->items[0].shape, SIG_THREE);
    codec_submit_destroy(s);
}

static void test_rejects_signature_disagreeing_with_hashes(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t *s;
    (void)state;
    it.has_signature = true;
    it.signature = SIG_REVERSED;
    s = submit_roundtrip(&it, 1, &LIMITS);
    assert_int_equal(s->items[0].status, CODEC_ESIGNATURE_MISMATCH);
    assert_int_equal(s->items[0].shape, 0);
    codec_submit_destroy(s);
}

static void test_rejects_item_without_shape(void **state)
{
    codec_work_item_t it = good_item();
    (void)state;
    it.component_hashes = NULL;
    it.n_component_hashes = 0;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_ENO_SHAPE);
}

static void test_rejects_zero_tokens(void **state)
{
    codec_work_item_t it = good_item();
    (void)state;
    it.tokens = 0;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EZERO_TOKENS);
}

static void test_rejects_empty_id(void **state)
{
    codec_work_item_t it = good_item();
    (void)state;
    it.id.ptr = NULL;
    it.id.len = 0;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EBAD_ID);
}

static void test_rejects_id_over_64_bytes(void **state)
{
    uint8_t id[LIMITS_ID_MAX + 1];
    codec_work_item_t it = good_item();
    (void)state;
    memset(id, 'x', sizeof id);
    it.id.ptr = id;
    it.id.len = sizeof id;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EID_TOO_LONG);
}

static void test_accepts_id_of_exactly_64_bytes(void **state)
{
    uint8_t id[LIMITS_ID_MAX];
    codec_work_item_t it = good_item();
    (void)state;
    assert_int_equal(LIMITS_ID_MAX, 64);
    memset(id, 'x', sizeof id);
    it.id.ptr = id;
    it.id.len = sizeof id;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_OK);
}

static void test_rejects_wrong_model(void **state)
{
    codec_work_item_t it = good_item();
    (void)state;
    it.model = "mistral";
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EBAD_MODEL);
}

static void test_rejects_empty_model_even_without_limits(void **state)
{
    codec_work_item_t it = good_item();
    (void)state;
    it.model = "";
    assert_int_equal(item_status(&it, NULL), CODEC_EBAD_MODEL);
}

static void test_accepts_any_model_when_limit_model_is_null(void **state)
{
    const codec_limits_t any = {NULL, 0, 0, NULL};
    codec_work_item_t it = good_item();
    (void)state;
    it.model = "mistral";
    assert_int_equal(item_status(&it, &any), CODEC_OK);
    assert_int_equal(item_status(&it, NULL), CODEC_OK);
}

static void test_rejects_oversized_payload(void **state)
{
    uint8_t payload[17] = {0};
    codec_work_item_t it = good_item();
    (void)state;
    it.payload.ptr = payload;
    it.payload.len = LIMITS.max_payload + 1;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EPAYLOAD_TOO_LARGE);
}

static void test_accepts_payload_at_the_limit(void **state)
{
    uint8_t payload[16] = {0};
    codec_work_item_t it = good_item();
    (void)state;
    it.payload.ptr = payload;
    it.payload.len = LIMITS.max_payload;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_OK);
}

static void test_zero_max_payload_is_unlimited(void **state)
{
    static uint8_t payload[1 << 16];
    const codec_limits_t unlimited = {"llama", 0, 0, NULL};
    codec_work_item_t it = good_item();
    (void)state;
    it.payload.ptr = payload;
    it.payload.len = sizeof payload;
    assert_int_equal(item_status(&it, &unlimited), CODEC_OK);
}

static void test_first_broken_rule_wins(void **state)
{
    codec_work_item_t it = good_item();
    (void)state;
    it.id.len = 0;
    it.id.ptr = NULL;
    it.model = "mistral";
    it.tokens = 0;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EBAD_ID);
    it.id = bytes_of("x");
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EBAD_MODEL);
    it.model = "llama";
    assert_int_equal(item_status(&it, &LIMITS), CODEC_EZERO_TOKENS);
}

static void test_bad_item_does_not_reject_others(void **state)
{
    codec_work_item_t items[3] = {good_item(), good_item(), good_item()};
    codec_submit_t *s;
    (void)state;
    items[0].id = bytes_of("a");
    items[1].id = bytes_of("b");
    items[1].tokens = 0;
    items[2].id = bytes_of("c");
    s = submit_roundtrip(items, 3, &LIMITS);
    assert_int_equal(s->items[0].status, CODEC_OK);
    assert_int_equal(s->items[1].status, CODEC_EZERO_TOKENS);
    assert_int_equal(s->items[2].status, CODEC_OK);
    assert_bytes_equal(s->items[0].id, bytes_of("a"));
    assert_bytes_equal(s->items[1].id, bytes_of("b"));
    assert_bytes_equal(s->items[2].id, bytes_of("c"));
    assert_int_equal(s->items[2].shape, SIG_THREE);
    codec_submit_destroy(s);
}

static void test_empty_submit_has_no_items(void **state)
{
    codec_submit_t *s = NULL;
    (void)state;
    assert_int_equal(codec_decode_submit(NULL, 0, &LIMITS, &s), CODEC_OK);
    assert_non_null(s);
    assert_int_equal(s->n_items, 0);
    codec_submit_destroy(s);
}

static void test_malformed_buffer_is_rejected(void **state)
{
    static const uint8_t garbage[][11] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, /* endless varint */
        {0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* wire type 7 */
        {0x0a, 0x7f, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09}, /* length past end */
        {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a}, /* field number 0 */
    };
    codec_submit_t *const sentinel = (codec_submit_t *)&state;
    codec_work_item_t it = good_item();
    codec_submit_t in = {&it, 1};
    codec_submit_t *out = sentinel;
    uint8_t *buf = NULL;
    size_t len = 0;

    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        assert_int_equal(codec_decode_submit(garbage[i], sizeof garbage[i], &LIMITS, &out),
                         CODEC_EMALFORMED);
        assert_ptr_equal(out, sentinel);
    }

    /* Every strict, non-empty prefix of a one-item Submit cuts into the item. */
    assert_int_equal(codec_encode_submit(&in, &buf, &len), CODEC_OK);
    for (size_t cut = 1; cut < len; cut++) {
        assert_int_equal(codec_decode_submit(buf, cut, &LIMITS, &out), CODEC_EMALFORMED);
        assert_ptr_equal(out, sentinel);
    }
    free(buf);
}

static void test_random_bytes_never_crash_any_decoder(void **state)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    uint8_t buf[64];
    (void)state;
    for (int round = 0; round < 4000; round++) {
        size_t len = (size_t)(x % sizeof buf);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = (uint8_t)x;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        {
            codec_submit_t *m = NULL;
            codec_status_t st = codec_decode_submit(buf, len, &LIMITS, &m);
            assert_true(st == CODEC_OK || st == CODEC_EMALFORMED);
            assert_true((st == CODEC_OK) == (m != NULL));
            codec_submit_destroy(m);
        }
        {
            codec_batch_t *m = NULL;
            codec_status_t st = codec_decode_batch(buf, len, &m);
            assert_true(st == CODEC_OK || st == CODEC_EMALFORMED);
            codec_batch_destroy(m);
        }
        {
            codec_ack_t *m = NULL;
            codec_status_t st = codec_decode_ack(buf, len, &m);
            assert_true(st == CODEC_OK || st == CODEC_EMALFORMED);
            codec_ack_destroy(m);
        }
        {
            codec_register_t *m = NULL;
            codec_status_t st = codec_decode_register(buf, len, NULL, &m);
            assert_true(st != CODEC_ENOMEM && st != CODEC_EINVAL);
            codec_register_destroy(m);
        }
    }
}

static void test_decoded_views_outlive_the_input_buffer(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t in = {&it, 1};
    codec_submit_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_submit(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_submit(buf, len, &LIMITS, &out), CODEC_OK);
    memset(buf, 0, len);
    free(buf);
    assert_string_equal(out->items[0].model, "llama");
    assert_bytes_equal(out->items[0].payload, bytes_of("hello"));
    assert_int_equal(out->items[0].component_hashes[2], H_TOOLS);
    codec_submit_destroy(out);
}

/* ---- Register validation ------------------------------------------------------------------ */

static codec_status_t register_status(const codec_register_t *in)
{
    codec_register_t *const sentinel = (codec_register_t *)&in;
    codec_register_t *out = sentinel;
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_status_t st;

    assert_int_equal(codec_encode_register(in, &buf, &len), CODEC_OK);
    st = codec_decode_register(buf, len, NULL, &out);
    free(buf);
    if (st == CODEC_OK)
        codec_register_destroy(out);
    else
        assert_ptr_equal(out, sentinel);
    return st;
}

static void test_register_rejects_empty_model(void **state)
{
    const codec_register_t r = {"", 8, 4096, 0, "gpu-0", 0, 0, 0, 0, 0};
    (void)state;
    assert_int_equal(register_status(&r), CODEC_EBAD_MODEL);
}

/* On P.register.<model> the body names that model; on P.register (NULL or "") any. */
static void test_register_names_the_model_of_its_subject(void **state)
{
    const codec_register_t r = {"llama", 8, 4096, 0, "gpu-0", 0, 0, 0, 0, 0};
    (void)state;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(&r, &buf, &len), CODEC_OK);
    struct {
        const char *subject_model;
        codec_status_t want;
    } cases[] = {
        {"llama", CODEC_OK},        {NULL, CODEC_OK},           {"", CODEC_OK},
        {"qwen", CODEC_EBAD_MODEL}, {"llam", CODEC_EBAD_MODEL}, {"llama.x", CODEC_EBAD_MODEL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        codec_register_t *out = NULL;
        assert_int_equal(codec_decode_register(buf, len, cases[i].subject_model, &out),
                         cases[i].want);
        assert_true((out != NULL) == (cases[i].want == CODEC_OK));
        codec_register_destroy(out);
    }
    /* the model rules come first: a bad name is bad_model_name whatever the subject */
    const codec_register_t bad = {"a b", 8, 4096, 0, "gpu-0", 0, 0, 0, 0, 0};
    free(buf);
    assert_int_equal(codec_encode_register(&bad, &buf, &len), CODEC_OK);
    codec_register_t *out = NULL;
    assert_int_equal(codec_decode_register(buf, len, "llama", &out), CODEC_EBAD_MODEL_NAME);
    free(buf);
}

static void test_register_rejects_zero_batch_size(void **state)
{
    const codec_register_t r = {"llama", 0, 4096, 0, "gpu-0", 0, 0, 0, 0, 0};
    (void)state;
    assert_int_equal(register_status(&r), CODEC_EZERO_BATCH_SIZE);
}

static void test_register_rejects_zero_batch_tokens(void **state)
{
    const codec_register_t r = {"llama", 8, 0, 0, "gpu-0", 0, 0, 0, 0, 0};
    (void)state;
    assert_int_equal(register_status(&r), CODEC_EZERO_BATCH_TOKENS);
}

static void test_register_accepts_zero_max_input_as_unlimited(void **state)
{
    const codec_register_t r = {"llama", 8, 4096, 0, NULL, 0, 0, 0, 0, 0};
    (void)state;
    assert_int_equal(register_status(&r), CODEC_OK);
}

/* A Register for "x" (batch 8, tokens 10) whose name field is the len bytes at name. */
static size_t register_with_name(uint8_t *buf, const uint8_t *name, size_t len)
{
    size_t n = 0;
    const uint8_t head[] = {0x0a, 1, 'x', 0x10, 8, 0x18, 10, 0x2a};
    memcpy(buf, head, sizeof(head));
    n = sizeof(head);
    buf[n++] = (uint8_t)(len | 0x80); /* len < 16384: two varint bytes */
    buf[n++] = (uint8_t)(len >> 7);
    memcpy(buf + n, name, len);
    return n + len;
}

/* The name's cap counts every byte sent: protobuf-c's string stops at a NUL, the cap does not. */
static void test_register_name_cap_counts_bytes_past_a_nul(void **state)
{
    (void)state;
    const codec_caps_t caps = {.max_name = 256};
    uint8_t name[300], buf[320];
    struct {
        size_t len;
        uint8_t fill, first;
        codec_status_t want;
    } cases[] = {{300, 0, 0, CODEC_ENAME_TOO_LONG},
                 {300, 'b', 'a', CODEC_ENAME_TOO_LONG}, /* "a", NUL, then 298 'b' */
                 {256, 0, 0, CODEC_OK},
                 {256, 'b', 'a', CODEC_OK}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(name, cases[i].fill, sizeof(name));
        name[0] = cases[i].first;
        name[1] = 0;
        codec_register_t *r = NULL;
        assert_int_equal(
            codec_decode_register(buf, register_with_name(buf, name, cases[i].len), NULL, &r),
            CODEC_OK);
        assert_int_equal(r->name_len, cases[i].len);
        assert_int_equal(codec_register_caps_check(r, &caps), cases[i].want);
        codec_register_destroy(r);
    }
}

/* subjects.md's model rule: dotted names are fine; wildcards, blanks and empty tokens are not. */
static void test_model_rule_accepts_dotted_names_and_refuses_wildcards(void **state)
{
    (void)state;
    const char *good[] = {"llama", "llama-3.1", "meta.llama-3.1-8b", "a.b.c", "x_y:z", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_int_equal(codec_model_check(good[i]), CODEC_OK);
    const char *bad[] = {"*",    ">",  "a.>", "ab.*", "a*b",   "a>b",   "a b",  "a\tb",
                         "a..b", ".a", "a.",  ".",    "a\x01", "a\x7f", "tab\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (codec_model_check(bad[i]) != CODEC_EBAD_MODEL_NAME)
            fail_msg("model '%s' was not refused as bad_model_name", bad[i]);
    }
    assert_int_equal(codec_model_check(""), CODEC_EBAD_MODEL);
    assert_int_equal(codec_model_check(NULL), CODEC_EBAD_MODEL);
}

static void test_reply_subjects_of_the_daemon_and_of_dollar_subjects_are_refused(void **state)
{
    (void)state;
    const char *good[] = {"_INBOX.abc.1", "_INBOX.gpu-0.pull.7", "answers.here", "lanesx.a", "lane",
                          "x.lanes.dead", "_INBOX.lanesched2.a", "_INBOX.lanes"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (codec_reply_subject_check(good[i], "lanes", "_INBOX.lanesched") != CODEC_OK)
            fail_msg("reply subject '%s' was refused", good[i]);
    }
    const char *bad[] = {"$KV.lanesched-leases.llama",
                         "$JS.API.STREAM.DELETE.KV_x",
                         "$SRV.PING",
                         "$SYS.REQ.SERVER.PING",
                         "lanes",
                         "lanes.dead.llama",
                         "lanes.submit.a",
                         "lanes.pull.0123",
                         "_INBOX.lanesched",
                         "_INBOX.lanesched.abc.1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (codec_reply_subject_check(bad[i], "lanes", "_INBOX.lanesched") !=
            CODEC_EREPLY_SUBJECT_REFUSED)
            fail_msg("reply subject '%s' was not refused", bad[i]);
    }
    assert_int_equal(codec_reply_subject_check(NULL, "lanes", NULL), CODEC_OK);
    /* without a private inbox only '$' subjects and the prefix are refused */
    assert_int_equal(codec_reply_subject_check("_INBOX.lanesched.1", "lanes", NULL), CODEC_OK);
    assert_int_equal(codec_reply_subject_check("$KV.b.k", NULL, NULL),
                     CODEC_EREPLY_SUBJECT_REFUSED);
    assert_string_equal(codec_status_reason(CODEC_EREPLY_SUBJECT_REFUSED), "reply_subject_refused");
}

static void test_model_of_255_bytes_is_accepted_and_256_refused(void **state)
{
    (void)state;
    char model[LIMITS_MODEL_MAX + 2];
    memset(model, 'm', sizeof(model));
    model[LIMITS_MODEL_MAX] = '\0';
    assert_int_equal(LIMITS_MODEL_MAX, 255);
    assert_int_equal(codec_model_check(model), CODEC_OK);
    model[LIMITS_MODEL_MAX] = 'm';
    model[LIMITS_MODEL_MAX + 1] = '\0';
    assert_int_equal(codec_model_check(model), CODEC_EMODEL_TOO_LONG);
    codec_work_item_t it = good_item();
    it.model = model;
    const codec_limits_t any = {NULL, 0, 0, NULL};
    assert_int_equal(item_status(&it, &any), CODEC_EMODEL_TOO_LONG);
    const codec_register_t r = {model, 8, 4096, 0, "gpu-0", 0, 0, 0, 0, 0};
    assert_int_equal(register_status(&r), CODEC_EMODEL_TOO_LONG);
    const codec_register_t w = {"ab.*", 8, 4096, 0, "gpu-0", 0, 0, 0, 0, 0};
    assert_int_equal(register_status(&w), CODEC_EBAD_MODEL_NAME);
}

static void test_tokens_up_to_the_limit_are_accepted(void **state)
{
    (void)state;
    codec_work_item_t it = good_item();
    it.tokens = LIMITS_TOKENS_MAX;
    assert_int_equal(LIMITS_TOKENS_MAX, 4294967287u);
    assert_int_equal(item_status(&it, &LIMITS), CODEC_OK);
    it.tokens = LIMITS_TOKENS_MAX + 1;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_ETOKENS_TOO_LARGE);
    it.tokens = UINT32_MAX;
    assert_int_equal(item_status(&it, &LIMITS), CODEC_ETOKENS_TOO_LARGE);
}

/* ---- encode arguments --------------------------------------------------------------------- */

static void test_encode_refuses_present_zero_signature(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t in = {&it, 1};
    uint8_t *buf = (uint8_t *)&state;
    size_t len = 12345;
    (void)state;
    it.has_signature = true;
    it.signature = 0;
    assert_int_equal(codec_encode_submit(&in, &buf, &len), CODEC_EINVAL);
    assert_ptr_equal(buf, (uint8_t *)&state);
    assert_int_equal(len, 12345);
}

static void test_encode_refuses_null_pointer_with_length(void **state)
{
    codec_work_item_t it = good_item();
    codec_submit_t in = {&it, 1};
    codec_heartbeat_t hb = {NULL, 2};
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    it.payload.ptr = NULL;
    it.payload.len = 3;
    assert_int_equal(codec_encode_submit(&in, &buf, &len), CODEC_EINVAL);
    assert_int_equal(codec_encode_heartbeat(&hb, &buf, &len), CODEC_EINVAL);
    assert_null(buf);
}

static void test_destroy_accepts_null(void **state)
{
    (void)state;
    codec_submit_destroy(NULL);
    codec_submit_reply_destroy(NULL);
    codec_register_destroy(NULL);
    codec_registered_destroy(NULL);
    codec_pull_destroy(NULL);
    codec_batch_destroy(NULL);
    codec_ack_destroy(NULL);
    codec_ack_reply_destroy(NULL);
    codec_heartbeat_destroy(NULL);
}

/* ---- roundtrips: every field of every message --------------------------------------------- */

static void test_roundtrip_submit(void **state)
{
    codec_work_item_t items[2] = {good_item(), good_item()};
    codec_submit_t *s;
    (void)state;
    items[1].id = bytes_of("item-2");
    items[1].component_hashes = NULL;
    items[1].n_component_hashes = 0;
    items[1].has_signature = true;
    items[1].signature = SIG_ONE;
    items[1].tokens = 4000000000u;
    items[1].payload.ptr = NULL;
    items[1].payload.len = 0;
    items[1].reply_to = NULL;
    items[1].created_unix_ns = UINT64_MAX;
    s = submit_roundtrip(items, 2, &LIMITS);
    for (int i = 0; i < 2; i++) {
        const codec_work_item_t *got = &s->items[i], *want = &items[i];
        assert_int_equal(got->status, CODEC_OK);
        assert_bytes_equal(got->id, want->id);
        assert_string_equal(got->model, want->model);
        assert_int_equal(got->n_component_hashes, want->n_component_hashes);
        for (size_t k = 0; k < want->n_component_hashes; k++)
            assert_int_equal(got->component_hashes[k], want->component_hashes[k]);
        assert_int_equal(got->has_signature, want->has_signature);
        assert_int_equal(got->signature, want->signature);
        assert_int_equal(got->tokens, want->tokens);
        assert_bytes_equal(got->payload, want->payload);
        assert_string_equal(got->reply_to, want->reply_to ? want->reply_to : "");
        assert_int_equal(got->created_unix_ns, want->created_unix_ns);
    }
    assert_null(s->items[1].payload.ptr);
    assert_int_equal(s->items[0].shape, SIG_THREE);
    assert_int_equal(s->items[1].shape, SIG_ONE);
    codec_submit_destroy(s);
}

static void test_roundtrip_submit_reply(void **state)
{
    const codec_item_result_t results[3] = {
        {bytes_of("a"), CODEC_ITEM_ACCEPTED, "ok", ""},
        {bytes_of("b"), CODEC_ITEM_DUPLICATE, "duplicate", "already queued"},
        {bytes_of("c"), CODEC_ITEM_REJECTED, codec_status_reason(CODEC_EZERO_TOKENS),
         codec_status_str(CODEC_EZERO_TOKENS)},
    };
    const codec_submit_reply_t in = {results, 3, "partial"};
    codec_submit_reply_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_submit_reply(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_submit_reply(buf, len, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->n_results, 3);
    for (int i = 0; i < 3; i++) {
        assert_bytes_equal(out->results[i].id, results[i].id);
        assert_int_equal(out->results[i].status, results[i].status);
        assert_string_equal(out->results[i].reason, results[i].reason);
        assert_string_equal(out->results[i].error, results[i].error);
    }
    assert_string_equal(out->error, "partial");
    codec_submit_reply_destroy(out);
}

static void test_roundtrip_register(void **state)
{
    const codec_register_t in = {"llama", 32, 8192, 2048, "gpu-7", 0, 0, 0, 0, 0};
    codec_register_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_register(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_register(buf, len, NULL, &out), CODEC_OK);
    free(buf);
    assert_string_equal(out->model, "llama");
    assert_int_equal(out->max_batch_size, 32);
    assert_int_equal(out->max_batch_tokens, 8192);
    assert_int_equal(out->max_input_tokens, 2048);
    assert_string_equal(out->name, "gpu-7");
    codec_register_destroy(out);
}

/* Register's optional fields 6-8 by number, as a client in any language writes them: the cost
 * per batch (us) and per padded token (ns), and the shapes its cache holds; absent reads 0. */
static void test_register_cost_and_cache_fields(void **state)
{
    (void)state;
    static const uint8_t wire[] = {
        0x0a, 0x01, 'm',  /* 1 model "m" */
        0x10, 0x01,       /* 2 max_batch_size 1 */
        0x18, 0x08,       /* 3 max_batch_tokens 8 */
        0x30, 0x88, 0x27, /* 6 batch_fixed_us 5000 */
        0x38, 0x90, 0x4e, /* 7 token_ns 10000 */
        0x40, 0x02,       /* 8 cache_shapes 2 */
    };
    codec_register_t *out = NULL;
    assert_int_equal(codec_decode_register(wire, sizeof(wire), NULL, &out), CODEC_OK);
    assert_int_equal(out->batch_fixed_us, 5000);
    assert_int_equal(out->token_ns, 10000);
    assert_int_equal(out->cache_shapes, 2);
    codec_register_destroy(out);
    assert_int_equal(codec_decode_register(wire, 7, NULL, &out), CODEC_OK); /* fields 1-3 only */
    assert_int_equal(out->batch_fixed_us, 0);
    assert_int_equal(out->token_ns, 0);
    assert_int_equal(out->cache_shapes, 0);
    codec_register_destroy(out);
    const codec_register_t in = {"llama", 32, 8192, 2048, "gpu-7", 7000, 12000, 4, 0, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_register(buf, len, NULL, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->batch_fixed_us, 7000);
    assert_int_equal(out->token_ns, 12000);
    assert_int_equal(out->cache_shapes, 4);
    codec_register_destroy(out);
}

static void test_roundtrip_registered(void **state)
{
    const codec_registered_t in = {"c-1",
                                   "lanes.pull.c-1",
                                   "lanes.ack.c-1",
                                   "lanes.hb.c-1",
                                   "lanes.bye.c-1",
                                   1000,
                                   5000,
                                   30000,
                                   "none",
                                   1};
    codec_registered_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_registered(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_registered(buf, len, &out), CODEC_OK);
    free(buf);
    assert_string_equal(out->consumer_id, in.consumer_id);
    assert_string_equal(out->pull_subject, in.pull_subject);
    assert_string_equal(out->ack_subject, in.ack_subject);
    assert_string_equal(out->heartbeat_subject, in.heartbeat_subject);
    assert_string_equal(out->bye_subject, in.bye_subject);
    assert_int_equal(out->heartbeat_ms, in.heartbeat_ms);
    assert_int_equal(out->dead_after_ms, in.dead_after_ms);
    assert_int_equal(out->ack_wait_ms, in.ack_wait_ms);
    assert_string_equal(out->error, in.error);
    assert_int_equal(out->protocol_version, in.protocol_version);
    codec_registered_destroy(out);
}

static void test_roundtrip_pull(void **state)
{
    const codec_pull_t in = {4, 2500};
    codec_pull_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_pull(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_pull(buf, len, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->max_batches, 4);
    assert_int_equal(out->expires_ms, 2500);
    codec_pull_destroy(out);
}

static void test_roundtrip_batch(void **state)
{
    const codec_batch_item_t items[2] = {
        {bytes_of("a"), 100, bytes_of("payload-a"), "_INBOX.a", 1, 2048},
        {bytes_of("b"), 7, {NULL, 0}, "", 3, 0},
    };
    const codec_batch_t in = {UINT64_MAX - 1, "llama", SIG_THREE,         2047,          104,
                              items,          2,       CODEC_BATCH_ERROR, "store failed"};
    codec_batch_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_batch(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_batch(buf, len, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->batch_id, in.batch_id);
    assert_string_equal(out->model, in.model);
    assert_int_equal(out->signature, in.signature);
    assert_int_equal(out->lane, in.lane);
    assert_int_equal(out->pad_to, in.pad_to);
    assert_int_equal(out->n_items, 2);
    for (int i = 0; i < 2; i++) {
        assert_bytes_equal(out->items[i].id, items[i].id);
        assert_int_equal(out->items[i].tokens, items[i].tokens);
        assert_bytes_equal(out->items[i].payload, items[i].payload);
        assert_string_equal(out->items[i].reply_to, items[i].reply_to);
        assert_int_equal(out->items[i].deliveries, items[i].deliveries);
        assert_int_equal(out->items[i].prefix_tokens, items[i].prefix_tokens);
    }
    assert_int_equal(out->status, CODEC_BATCH_ERROR);
    assert_string_equal(out->error, in.error);
    codec_batch_destroy(out);
}

static void test_unknown_batch_status_passes_through(void **state)
{
    const codec_batch_t in = {.batch_id = 1, .status = (codec_batch_status_t)7};
    codec_batch_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_batch(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_batch(buf, len, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->status, 7);
    codec_batch_destroy(out);
}

static void test_roundtrip_ack(void **state)
{
    const uint32_t ack[3] = {0, 2, 5};
    const uint32_t nak[2] = {1, 300};
    const codec_ack_t in = {99, true, ack, 3, nak, 2, true};
    codec_ack_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_ack(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_ack(buf, len, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->batch_id, 99);
    assert_true(out->all);
    assert_int_equal(out->n_ack, 3);
    assert_memory_equal(out->ack, ack, sizeof ack);
    assert_int_equal(out->n_nak, 2);
    assert_memory_equal(out->nak, nak, sizeof nak);
    assert_true(out->in_progress);
    codec_ack_destroy(out);
}

static void test_roundtrip_ack_reply(void **state)
{
    const codec_ack_reply_t in = {3, 2, 1, "position 300 unknown"};
    codec_ack_reply_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_ack_reply(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_ack_reply(buf, len, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->acked, 3);
    assert_int_equal(out->returned, 2);
    assert_int_equal(out->unknown, 1);
    assert_string_equal(out->error, in.error);
    codec_ack_reply_destroy(out);
}

static void test_roundtrip_heartbeat(void **state)
{
    const uint64_t ids[3] = {1, UINT64_MAX, 42};
    const codec_heartbeat_t in = {ids, 3};
    codec_heartbeat_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_heartbeat(&in, &buf, &len), CODEC_OK);
    assert_int_equal(codec_decode_heartbeat(buf, len, &out), CODEC_OK);
    free(buf);
    assert_int_equal(out->n_in_progress, 3);
    assert_memory_equal(out->in_progress, ids, sizeof ids);
    codec_heartbeat_destroy(out);
}

static void test_empty_messages_encode_to_zero_bytes(void **state)
{
    const codec_pull_t in = {0, 0};
    codec_pull_t *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 99;
    (void)state;
    assert_int_equal(codec_encode_pull(&in, &buf, &len), CODEC_OK);
    assert_non_null(buf);
    assert_int_equal(len, 0);
    assert_int_equal(codec_decode_pull(buf, len, &out), CODEC_OK);
    assert_int_equal(out->max_batches, 0);
    free(buf);
    codec_pull_destroy(out);
}

/* ---- field numbers ------------------------------------------------------------------------ */

static void expect_wire(const uint8_t *buf, size_t len, const uint8_t *want, size_t want_len)
{
    assert_int_equal(len, want_len);
    assert_memory_equal(buf, want, want_len);
}

static void test_field_numbers_are_the_contract(void **state)
{
    /* Submit{1: WorkItem{...}} written by hand, tag by tag. */
    static const uint8_t wire[] = {
        0x0a, 0x28,                                     /* Submit.items (1, len) */
        0x0a, 0x02, 'i',  'd',                          /* 1 bytes id */
        0x12, 0x05, 'l',  'l',  'a',  'm',  'a',        /* 2 string model */
        0x1a, 0x08,                                     /* 3 packed fixed64 hashes */
        0x3b, 0x97, 0x48, 0x0a, 0xd4, 0x8a, 0xa5, 0xe4, /*   H_ASSISTANT, LE */
        0x21,                                           /* 4 fixed64 signature */
        0xfd, 0x4e, 0xb6, 0x45, 0x2f, 0x7f, 0xf4, 0x91, /*   SIG_ONE, LE */
        0x28, 0x07,                                     /* 5 varint tokens = 7 */
        0x32, 0x01, 'p',                                /* 6 bytes payload */
        0x3a, 0x01, 'r',                                /* 7 string reply_to */
        0x40, 0x2a,                                     /* 8 varint created = 42 */
    };
    codec_submit_t *s = NULL;
    const codec_work_item_t *it;
    (void)state;
    assert_int_equal(codec_decode_submit(wire, sizeof wire, &LIMITS, &s), CODEC_OK);
    assert_int_equal(s->n_items, 1);
    it = &s->items[0];
    assert_int_equal(it->status, CODEC_OK);
    assert_bytes_equal(it->id, bytes_of("id"));
    assert_string_equal(it->model, "llama");
    assert_int_equal(it->n_component_hashes, 1);
    assert_int_equal(it->component_hashes[0], H_ASSISTANT);
    assert_true(it->has_signature);
    assert_int_equal(it->signature, SIG_ONE);
    assert_int_equal(it->shape, SIG_ONE);
    assert_int_equal(it->tokens, 7);
    assert_bytes_equal(it->payload, bytes_of("p"));
    assert_string_equal(it->reply_to, "r");
    assert_int_equal(it->created_unix_ns, 42);
    codec_submit_destroy(s);
}

static void test_unpacked_hashes_are_accepted(void **state)
{
    /* Field 3 sent unpacked (tag 0x19 per element) must decode the same as packed. */
    static const uint8_t wire[] = {
        0x0a, 0x1e, 0x0a, 0x01, 'x',  0x12, 0x05, 'l',  'l',  'a',  'm',
        'a',  0x19, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x19,
        0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x28, 0x01,
    };
    const uint64_t want[2] = {1, 2};
    codec_submit_t *s = NULL;
    (void)state;
    assert_int_equal(codec_decode_submit(wire, sizeof wire, &LIMITS, &s), CODEC_OK);
    assert_int_equal(s->items[0].status, CODEC_OK);
    assert_int_equal(s->items[0].n_component_hashes, 2);
    assert_int_equal(s->items[0].shape, codec_signature(want, 2));
    codec_submit_destroy(s);
}

/* subjects.md, "Wire schema": every repeated scalar may come packed, unpacked or mixed. */
static void test_unpacked_ack_positions_and_heartbeat_ids_are_accepted(void **state)
{
    /* Ack: batch 7; ack 1 unpacked, 2 and 3 packed, 4 unpacked; nak 5 unpacked, 6 packed. */
    static const uint8_t ack_wire[] = {0x08, 0x07, 0x18, 0x01, 0x1a, 0x02, 0x02, 0x03,
                                       0x18, 0x04, 0x20, 0x05, 0x22, 0x01, 0x06};
    /* Heartbeat: 9 unpacked, 10 and 11 packed, 12 unpacked. */
    static const uint8_t hb_wire[] = {0x08, 0x09, 0x0a, 0x02, 0x0a, 0x0b, 0x08, 0x0c};
    codec_ack_t *ack = NULL;
    codec_heartbeat_t *hb = NULL;
    (void)state;
    assert_int_equal(codec_decode_ack(ack_wire, sizeof ack_wire, &ack), CODEC_OK);
    assert_int_equal(ack->batch_id, 7);
    assert_int_equal(ack->n_ack, 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(ack->ack[i], i + 1);
    assert_int_equal(ack->n_nak, 2);
    assert_int_equal(ack->nak[0], 5);
    assert_int_equal(ack->nak[1], 6);
    codec_ack_destroy(ack);
    assert_int_equal(codec_decode_heartbeat(hb_wire, sizeof hb_wire, &hb), CODEC_OK);
    assert_int_equal(hb->n_in_progress, 4);
    for (uint64_t i = 0; i < 4; i++)
        assert_int_equal(hb->in_progress[i], 9 + i);
    codec_heartbeat_destroy(hb);
}

static void test_submit_wire_bytes(void **state)
{
    const uint64_t h = 0x0102030405060708ULL;
    const codec_work_item_t it = {
        .id = bytes_of("i"),
        .model = "m",
        .component_hashes = &h,
        .n_component_hashes = 1,
        .has_signature = true,
        .signature = 0x1112131415161718ULL,
        .tokens = 5,
        .payload = bytes_of("p"),
        .reply_to = "r",
        .created_unix_ns = 6,
    };
    const codec_submit_t in = {&it, 1};
    static const uint8_t want[] = {
        0x0a, 0x23, 0x0a, 0x01, 'i',  0x12, 0x01, 'm',  0x1a, 0x08, 0x08, 0x07, 0x06,
        0x05, 0x04, 0x03, 0x02, 0x01, 0x21, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12,
        0x11, 0x28, 0x05, 0x32, 0x01, 'p',  0x3a, 0x01, 'r',  0x40, 0x06,
    };
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_submit(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_batch_wire_bytes(void **state)
{
    const codec_batch_item_t item = {bytes_of("i"), 5, bytes_of("p"), "r", 2, 300};
    const codec_batch_t in = {1,     "m", 0x0102030405060708ULL, 3,  16,
                              &item, 1,   CODEC_BATCH_ERROR,     "e"};
    static const uint8_t want[] = {
        0x08, 0x01,                                           /* 1 batch_id */
        0x12, 0x01, 'm',                                      /* 2 model */
        0x19, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* 3 fixed64 signature */
        0x20, 0x03,                                           /* 4 lane */
        0x28, 0x10,                                           /* 5 pad_to */
        0x32, 0x10,                                           /* 6 items */
        0x0a, 0x01, 'i',  0x10, 0x05, 0x1a, 0x01, 'p',  0x22,
        0x01, 'r',  0x28, 0x02, 0x30, 0xac, 0x02, /* 6 prefix_tokens 300 */
        0x38, 0x02,                               /* 7 status */
        0x42, 0x01, 'e',                          /* 8 error */
    };
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_batch(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_submit_reply_wire_bytes(void **state)
{
    const codec_item_result_t r = {bytes_of("i"), CODEC_ITEM_REJECTED, "z", "t"};
    const codec_submit_reply_t in = {&r, 1, "e"};
    static const uint8_t want[] = {
        0x0a, 0x0b, 0x0a, 0x01, 'i', 0x10, 0x02, 0x1a, 0x01, 'z', 0x22, 0x01, 't', 0x12, 0x01, 'e',
    };
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_submit_reply(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_register_wire_bytes(void **state)
{
    const codec_register_t in = {"m", 1, 2, 3, "n", 0, 0, 0, 0, 0};
    static const uint8_t want[] = {0x0a, 0x01, 'm',  0x10, 0x01, 0x18,
                                   0x02, 0x20, 0x03, 0x2a, 0x01, 'n'};
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_register(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_registered_wire_bytes(void **state)
{
    const codec_registered_t in = {"c", "p", "a", "h", "b", 6, 7, 8, "e", 9};
    static const uint8_t want[] = {0x0a, 0x01, 'c',  0x12, 0x01, 'p', 0x1a, 0x01, 'a',
                                   0x22, 0x01, 'h',  0x2a, 0x01, 'b', 0x30, 0x06, 0x38,
                                   0x07, 0x40, 0x08, 0x4a, 0x01, 'e', 0x50, 0x09};
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_registered(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_pull_wire_bytes(void **state)
{
    const codec_pull_t in = {1, 2};
    static const uint8_t want[] = {0x08, 0x01, 0x10, 0x02};
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_pull(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_ack_wire_bytes(void **state)
{
    const uint32_t ack[2] = {1, 2};
    const uint32_t nak[1] = {3};
    const codec_ack_t in = {9, true, ack, 2, nak, 1, true};
    static const uint8_t want[] = {
        0x08, 0x09,             /* 1 batch_id */
        0x10, 0x01,             /* 2 all */
        0x1a, 0x02, 0x01, 0x02, /* 3 packed ack */
        0x22, 0x01, 0x03,       /* 4 packed nak */
        0x28, 0x01,             /* 5 in_progress */
    };
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_ack(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_ack_reply_wire_bytes(void **state)
{
    const codec_ack_reply_t in = {1, 2, 3, "e"};
    static const uint8_t want[] = {0x08, 0x01, 0x10, 0x02, 0x18, 0x03, 0x22, 0x01, 'e'};
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_ack_reply(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_heartbeat_wire_bytes(void **state)
{
    const uint64_t ids[2] = {1, 300};
    const codec_heartbeat_t in = {ids, 2};
    static const uint8_t want[] = {0x0a, 0x03, 0x01, 0xac, 0x02}; /* packed varints */
    uint8_t *buf = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(codec_encode_heartbeat(&in, &buf, &len), CODEC_OK);
    expect_wire(buf, len, want, sizeof want);
    free(buf);
}

static void test_unknown_fields_are_ignored(void **state)
{
    /* Register with a future field 99 (varint): tag (99 << 3) = 0x318 -> 0x98 0x06. */
    static const uint8_t wire[] = {0x0a, 0x01, 'm', 0x10, 0x01, 0x18, 0x02, 0x98, 0x06, 0x05};
    codec_register_t *r = NULL;
    (void)state;
    assert_int_equal(codec_decode_register(wire, sizeof wire, NULL, &r), CODEC_OK);
    assert_string_equal(r->model, "m");
    assert_int_equal(r->max_batch_size, 1);
    assert_int_equal(r->max_batch_tokens, 2);
    codec_register_destroy(r);
}

/* The reply bound is exact for the largest reply (every item refused with the longest word and
 * no text) and above every other. */
static void test_submit_reply_bound_is_the_largest_reply(void **state)
{
    (void)state;
    const char *longest = "";
    for (int i = 0; i < CODEC_STATUS_COUNT; i++) {
        const char *w = codec_status_reason((codec_status_t)i);
        longest = strlen(w) > strlen(longest) ? w : longest;
    }
    enum { N = 300 };
    static char ids[N][200];
    codec_work_item_t items[N];
    codec_item_result_t results[N];
    for (size_t i = 0; i < N; i++) {
        size_t len = 1 + (i * 37) % 199;
        memset(ids[i], 'a' + (int)(i % 26), len);
        items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], len}};
        results[i] = (codec_item_result_t){
            .id = items[i].id, .status = CODEC_ITEM_REJECTED, .reason = longest, .error = ""};
    }
    codec_submit_t sub = {items, N};
    codec_submit_reply_t rep = {.results = results, .n_results = N};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit_reply(&rep, &buf, &len), CODEC_OK);
    assert_true(len == codec_submit_reply_bound(&sub));
    free(buf);
    for (size_t i = 0; i < N; i++) { /* accepted: the status and a shorter word */
        results[i].status = CODEC_ITEM_ACCEPTED;
        results[i].reason = "ok";
    }
    assert_int_equal(codec_encode_submit_reply(&rep, &buf, &len), CODEC_OK);
    assert_true(len < codec_submit_reply_bound(&sub));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signature_of_empty_vector),
        cmocka_unit_test(test_component_hashes_match_vectors),
        cmocka_unit_test(test_signature_of_one_component),
        cmocka_unit_test(test_signature_of_five_components_with_a_long_one),
        cmocka_unit_test(test_signature_of_three_components),
        cmocka_unit_test(test_signature_depends_on_order),
        cmocka_unit_test(test_signature_hashes_little_endian_bytes),
        cmocka_unit_test(test_signature_of_more_than_one_stripe),
        cmocka_unit_test(test_status_strings_are_non_null_and_distinct),
        cmocka_unit_test(test_unknown_status_has_fixed_strings),
        cmocka_unit_test(test_reason_words_are_the_contract),
        cmocka_unit_test(test_accepts_hashes_only_and_resolves_shape),
        cmocka_unit_test(test_accepts_signature_only),
        cmocka_unit_test(test_accepts_empty_vector_signature_as_shape),
        cmocka_unit_test(test_accepts_matching_signature_and_hashes),
        cmocka_unit_test(test_rejects_signature_disagreeing_with_hashes),
        cmocka_unit_test(test_rejects_item_without_shape),
        cmocka_unit_test(test_rejects_zero_tokens),
        cmocka_unit_test(test_rejects_empty_id),
        cmocka_unit_test(test_rejects_id_over_64_bytes),
        cmocka_unit_test(test_accepts_id_of_exactly_64_bytes),
        cmocka_unit_test(test_rejects_wrong_model),
        cmocka_unit_test(test_rejects_empty_model_even_without_limits),
        cmocka_unit_test(test_accepts_any_model_when_limit_model_is_null),
        cmocka_unit_test(test_rejects_oversized_payload),
        cmocka_unit_test(test_accepts_payload_at_the_limit),
        cmocka_unit_test(test_zero_max_payload_is_unlimited),
        cmocka_unit_test(test_first_broken_rule_wins),
        cmocka_unit_test(test_bad_item_does_not_reject_others),
        cmocka_unit_test(test_empty_submit_has_no_items),
        cmocka_unit_test(test_malformed_buffer_is_rejected),
        cmocka_unit_test(test_random_bytes_never_crash_any_decoder),
        cmocka_unit_test(test_decoded_views_outlive_the_input_buffer),
        cmocka_unit_test(test_register_rejects_empty_model),
        cmocka_unit_test(test_register_names_the_model_of_its_subject),
        cmocka_unit_test(test_register_rejects_zero_batch_size),
        cmocka_unit_test(test_register_rejects_zero_batch_tokens),
        cmocka_unit_test(test_register_accepts_zero_max_input_as_unlimited),
        cmocka_unit_test(test_register_name_cap_counts_bytes_past_a_nul),
        cmocka_unit_test(test_model_rule_accepts_dotted_names_and_refuses_wildcards),
        cmocka_unit_test(test_reply_subjects_of_the_daemon_and_of_dollar_subjects_are_refused),
        cmocka_unit_test(test_model_of_255_bytes_is_accepted_and_256_refused),
        cmocka_unit_test(test_tokens_up_to_the_limit_are_accepted),
        cmocka_unit_test(test_encode_refuses_present_zero_signature),
        cmocka_unit_test(test_encode_refuses_null_pointer_with_length),
        cmocka_unit_test(test_destroy_accepts_null),
        cmocka_unit_test(test_roundtrip_submit),
        cmocka_unit_test(test_roundtrip_submit_reply),
        cmocka_unit_test(test_roundtrip_register),
        cmocka_unit_test(test_register_cost_and_cache_fields),
        cmocka_unit_test(test_roundtrip_registered),
        cmocka_unit_test(test_roundtrip_pull),
        cmocka_unit_test(test_roundtrip_batch),
        cmocka_unit_test(test_unknown_batch_status_passes_through),
        cmocka_unit_test(test_roundtrip_ack),
        cmocka_unit_test(test_roundtrip_ack_reply),
        cmocka_unit_test(test_roundtrip_heartbeat),
        cmocka_unit_test(test_empty_messages_encode_to_zero_bytes),
        cmocka_unit_test(test_field_numbers_are_the_contract),
        cmocka_unit_test(test_unpacked_hashes_are_accepted),
        cmocka_unit_test(test_unpacked_ack_positions_and_heartbeat_ids_are_accepted),
        cmocka_unit_test(test_submit_wire_bytes),
        cmocka_unit_test(test_batch_wire_bytes),
        cmocka_unit_test(test_submit_reply_wire_bytes),
        cmocka_unit_test(test_register_wire_bytes),
        cmocka_unit_test(test_registered_wire_bytes),
        cmocka_unit_test(test_pull_wire_bytes),
        cmocka_unit_test(test_ack_wire_bytes),
        cmocka_unit_test(test_ack_reply_wire_bytes),
        cmocka_unit_test(test_heartbeat_wire_bytes),
        cmocka_unit_test(test_unknown_fields_are_ignored),
        cmocka_unit_test(test_submit_reply_bound_is_the_largest_reply),
    };
    return cmocka_run_group_tests_name("codec", tests, NULL, NULL);
}
