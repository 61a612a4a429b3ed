/*
 * fuzz_codec.c - libFuzzer harness: the wire codec. Every input is decoded as each message the
 * daemon or a client reads; what decodes is checked by every rule of validate.c, encoded again,
 * and the encoding must decode to the same fields (a decoder and its encoder agree).
 *
 * Invariants checked (abort on a breach):
 *   1. No decoder reads out of bounds or leaks (the sanitizers), whatever the bytes.
 *   2. A decoded Submit's items carry the status codec_item_check gives them, and a shape only
 *      when that status is ok.
 *   3. encode(decode(x)) decodes again, to equal ids, counts and scalars.
 */
#include "tests/fuzz/fuzz.h"

#include "codec/codec.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_REQUIRE(cond) \
    do {                   \
        if (!(cond))       \
            abort();       \
    } while (0)

static void codec_submit_round_trip(const uint8_t *data, size_t size)
{
    static const codec_caps_t caps = {.max_items = 8,
                                      .max_name = 16,
                                      .max_batch_size = 4,
                                      .max_batch_tokens = 64,
                                      .max_positions = 4,
                                      .max_ids = 4};
    static const codec_limits_t lim = {"llama", 64, 32, NULL}, capped = {"llama", 64, 32, &caps};
    codec_submit_t *sub = NULL, *sub_capped = NULL;
    if (codec_decode_submit(data, size, &lim, &sub) != CODEC_OK)
        return;
    /* the caps refuse before decoding exactly the messages the count puts over them */
    codec_status_t cst = codec_decode_submit(data, size, &capped, &sub_capped);
    FUZZ_REQUIRE(cst == codec_submit_caps_check(sub->n_items, &caps));
    FUZZ_REQUIRE(cst != CODEC_OK || sub_capped->n_items == sub->n_items);
    codec_submit_destroy(sub_capped);
    for (size_t i = 0; i < sub->n_items; i++) {
        uint64_t shape = 0;
        codec_status_t st = codec_item_check(&sub->items[i], &lim, &shape);
        FUZZ_REQUIRE(st == sub->items[i].status); /* invariant 2 */
        FUZZ_REQUIRE(st == CODEC_OK ? sub->items[i].shape == shape : sub->items[i].shape == 0);
        (void)codec_model_check(sub->items[i].model);
    }
    codec_work_item_t *items = calloc(sub->n_items + 1, sizeof(*items));
    FUZZ_REQUIRE(items != NULL);
    for (size_t i = 0; i < sub->n_items; i++) {
        items[i] = sub->items[i];
        items[i].has_signature = items[i].signature != 0;
    }
    codec_submit_t again = {items, sub->n_items};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_submit(&again, &buf, &len) == CODEC_OK) {
        codec_submit_t *back = NULL;
        FUZZ_REQUIRE(codec_decode_submit(buf, len, &lim, &back) == CODEC_OK); /* invariant 3 */
        FUZZ_REQUIRE(back->n_items == sub->n_items);
        for (size_t i = 0; i < back->n_items; i++) {
            FUZZ_REQUIRE(back->items[i].id.len == sub->items[i].id.len);
            FUZZ_REQUIRE(back->items[i].tokens == sub->items[i].tokens);
            FUZZ_REQUIRE(back->items[i].status == sub->items[i].status);
            FUZZ_REQUIRE(strcmp(back->items[i].model, sub->items[i].model) == 0);
        }
        codec_submit_destroy(back);
    }
    free(buf);
    free(items);
    codec_submit_destroy(sub);
}

static void codec_others(const uint8_t *data, size_t size)
{
    static const codec_caps_t caps = {.max_items = 8,
                                      .max_name = 16,
                                      .max_batch_size = 4,
                                      .max_batch_tokens = 64,
                                      .max_positions = 4,
                                      .max_ids = 4};
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_register_t *reg = NULL;
    if (codec_decode_register(data, size, NULL, &reg) == CODEC_OK) {
        FUZZ_REQUIRE(codec_register_check(reg, NULL) == CODEC_OK);
        FUZZ_REQUIRE(codec_register_check(reg, reg->model) == CODEC_OK); /* its own subject */
        (void)codec_register_caps_check(reg, &caps);
        if (codec_encode_register(reg, &buf, &len) == CODEC_OK) {
            codec_register_t *back = NULL;
            FUZZ_REQUIRE(codec_decode_register(buf, len, NULL, &back) == CODEC_OK);
            FUZZ_REQUIRE(back->max_batch_size == reg->max_batch_size &&
                         strcmp(back->model, reg->model) == 0);
            codec_register_destroy(back);
        }
        free(buf);
        buf = NULL;
        codec_register_destroy(reg);
    }
    codec_ack_t *ack = NULL;
    if (codec_decode_ack(data, size, &ack) == CODEC_OK) {
        (void)codec_ack_caps_check(ack, &caps);
        if (codec_encode_ack(ack, &buf, &len) == CODEC_OK) {
            codec_ack_t *back = NULL;
            FUZZ_REQUIRE(codec_decode_ack(buf, len, &back) == CODEC_OK);
            FUZZ_REQUIRE(back->batch_id == ack->batch_id && back->n_ack == ack->n_ack &&
                         back->n_nak == ack->n_nak && back->all == ack->all);
            codec_ack_destroy(back);
        }
        free(buf);
        buf = NULL;
        codec_ack_destroy(ack);
    }
    codec_heartbeat_t *hb = NULL;
    if (codec_decode_heartbeat(data, size, &hb) == CODEC_OK) {
        (void)codec_heartbeat_caps_check(hb, &caps);
        codec_heartbeat_destroy(hb);
    }
    codec_pull_t *pull = NULL;
    if (codec_decode_pull(data, size, &pull) == CODEC_OK)
        codec_pull_destroy(pull);
    codec_batch_t *b = NULL;
    if (codec_decode_batch(data, size, &b) == CODEC_OK) {
        if (codec_encode_batch(b, &buf, &len) == CODEC_OK) {
            codec_batch_t *back = NULL;
            FUZZ_REQUIRE(codec_decode_batch(buf, len, &back) == CODEC_OK);
            FUZZ_REQUIRE(back->n_items == b->n_items && back->batch_id == b->batch_id);
            codec_batch_destroy(back);
        }
        free(buf);
        buf = NULL;
        codec_batch_destroy(b);
    }
    codec_submit_reply_t *sr = NULL;
    if (codec_decode_submit_reply(data, size, &sr) == CODEC_OK)
        codec_submit_reply_destroy(sr);
    codec_registered_t *rd = NULL;
    if (codec_decode_registered(data, size, &rd) == CODEC_OK)
        codec_registered_destroy(rd);
    codec_ack_reply_t *ar = NULL;
    if (codec_decode_ack_reply(data, size, &ar) == CODEC_OK)
        codec_ack_reply_destroy(ar);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    codec_submit_round_trip(data, size);
    codec_others(data, size);
    if (size != 0 && size < 300) { /* the model rule on raw bytes, NUL-terminated */
        char model[300];
        memcpy(model, data, size);
        model[size] = '\0';
        (void)codec_model_check(model);
    }
    return 0;
}
