/*
 * validate.c - every rule a producer or a consumer can break, checked in one place, each with
 * its own reason code (codec.h's CODEC_STATUS_MAP; subjects.md's "Item validation").
 *
 * Invariants:
 *   1. A rule is checked here and nowhere else: the layers below (scheduling core, store) take
 *      what passed as given, and breaking a rule reaches the producer as that rule's own word,
 *      never as a store error.
 *   2. First failure wins, in the documented order, so a producer learns one reason per item
 *      and the same item always gets the same answer (the validation reasons are permanent).
 *   3. The hard limits come from common/limits.h, shared with the segment format.
 *   4. The configured caps (codec_caps_t, codec_limits_t.max_reply_to) come after every hard
 *      rule, so a message that broke a hard rule before a cap existed gets the same word now.
 *      A cap of 0 is no cap.
 *
 * Rejected: checking the model rule against the subject only. The subject's model is what the
 * daemon interns and stores; a name with '*' or '>' could never be published as a batch or
 * dead-letter subject, so it is refused before anything is stored.
 */
#include "codec/codec_int.h"

#include "common/utf8.h"

#include <string.h>

int codec_subject_bytes_ok(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == 0x7f)
            return 0;
    }
    return 1;
}

codec_status_t codec_model_check_len(const char *model, size_t len)
{
    if (model == NULL || len == 0)
        return CODEC_EBAD_MODEL;
    if (len > LIMITS_MODEL_MAX)
        return CODEC_EMODEL_TOO_LONG;
    if (!codec_subject_bytes_ok(model, len))
        return CODEC_EBAD_MODEL_NAME;
    for (size_t i = 0; i < len; i++) {
        char c = model[i];
        int empty_token = c == '.' && (i == 0 || i + 1 == len || model[i + 1] == '.');
        if (c == '*' || c == '>' || empty_token)
            return CODEC_EBAD_MODEL_NAME;
    }
    /* proto3 strings are UTF-8: a Batch naming the model must decode in every client */
    return utf8_valid(model, len) ? CODEC_OK : CODEC_EBAD_MODEL_NAME;
}

codec_status_t codec_model_check(const char *model)
{
    return codec_model_check_len(model, model ? strnlen(model, LIMITS_MODEL_MAX + 1) : 0);
}

codec_status_t codec_item_check(const codec_work_item_t *it, const codec_limits_t *limits,
                                uint64_t *out_shape)
{
    if (it->id.len == 0)
        return CODEC_EBAD_ID;
    if (it->id.len > LIMITS_ID_MAX)
        return CODEC_EID_TOO_LONG;
    codec_status_t st = codec_model_check_len(it->model, codec_str_len(it->model, it->model_len));
    if (st != CODEC_OK)
        return st;
    if (limits && limits->model && strcmp(it->model, limits->model) != 0)
        return CODEC_EBAD_MODEL;
    if (it->tokens == 0)
        return CODEC_EZERO_TOKENS;
    if (it->tokens > LIMITS_TOKENS_MAX)
        return CODEC_ETOKENS_TOO_LARGE;
    if (limits && limits->max_payload && it->payload.len > limits->max_payload)
        return CODEC_EPAYLOAD_TOO_LARGE;
    if (it->n_component_hashes == 0 && !it->has_signature)
        return CODEC_ENO_SHAPE;
    uint64_t shape = it->n_component_hashes == 0
                         ? it->signature
                         : codec_signature(it->component_hashes, it->n_component_hashes);
    if (it->n_component_hashes != 0 && it->has_signature && shape != it->signature)
        return CODEC_ESIGNATURE_MISMATCH;
    size_t reply_len = codec_str_len(it->reply_to, it->reply_to_len);
    if (limits && limits->max_reply_to && reply_len > limits->max_reply_to)
        return CODEC_EREPLY_TO_TOO_LONG;
    /* it comes back in the BatchItem and a worker publishes on it (a Register or Pull started
     * on the worker's connection otherwise); not UTF-8, the Batch is undecodable for proto3 */
    if (reply_len != 0 &&
        (!codec_subject_bytes_ok(it->reply_to, reply_len) || !utf8_valid(it->reply_to, reply_len)))
        return CODEC_EBAD_REPLY_TO;
    *out_shape = shape;
    return CODEC_OK;
}

codec_status_t codec_register_check(const codec_register_t *reg, const char *subject_model)
{
    codec_status_t st =
        codec_model_check_len(reg->model, codec_str_len(reg->model, reg->model_len));
    if (st != CODEC_OK)
        return st;
    /* the server's permission on P.register.<model> is the authority over the model only when
     * the body cannot name another one */
    if (subject_model != NULL && subject_model[0] != '\0' && strcmp(reg->model, subject_model) != 0)
        return CODEC_EBAD_MODEL;
    if (reg->max_batch_size == 0)
        return CODEC_EZERO_BATCH_SIZE;
    if (reg->max_batch_tokens == 0)
        return CODEC_EZERO_BATCH_TOKENS;
    /* batch_fixed_us, token_ns and cache_shapes have no rule a client can break: every value is
     * a cost or a capacity the scheduler can use (it counts a cache of more than
     * SCHED_CACHE_SHAPES_MAX shapes as that many). */
    return CODEC_OK;
}

/* 1 when n is over a cap that is set. */
static int validate_over(size_t n, size_t cap)
{
    return cap != 0 && n > cap;
}

codec_status_t codec_submit_caps_check(size_t n_items, const codec_caps_t *caps)
{
    if (caps != NULL && validate_over(n_items, caps->max_items))
        return CODEC_ETOO_MANY_ITEMS;
    return CODEC_OK;
}

codec_status_t codec_register_caps_check(const codec_register_t *reg, const codec_caps_t *caps)
{
    if (caps == NULL)
        return CODEC_OK;
    if (caps->max_name != 0 && reg->name != NULL &&
        codec_str_len(reg->name, reg->name_len) > caps->max_name)
        return CODEC_ENAME_TOO_LONG;
    if (validate_over(reg->max_batch_size, caps->max_batch_size))
        return CODEC_EBATCH_SIZE_TOO_LARGE;
    if (validate_over(reg->max_batch_tokens, caps->max_batch_tokens))
        return CODEC_EBATCH_TOKENS_TOO_LARGE;
    return CODEC_OK;
}

codec_status_t codec_ack_caps_check(const codec_ack_t *ack, const codec_caps_t *caps)
{
    if (caps != NULL && (validate_over(ack->n_ack, caps->max_positions) ||
                         validate_over(ack->n_nak, caps->max_positions)))
        return CODEC_ETOO_MANY_POSITIONS;
    return CODEC_OK;
}

codec_status_t codec_heartbeat_caps_check(const codec_heartbeat_t *hb, const codec_caps_t *caps)
{
    if (caps != NULL && validate_over(hb->n_in_progress, caps->max_ids))
        return CODEC_ETOO_MANY_IDS;
    return CODEC_OK;
}

/* Whether subject is base itself or a subject under it ("base." ...). */
static int validate_under(const char *subject, const char *base)
{
    size_t n = strlen(base);
    return n != 0 && strncmp(subject, base, n) == 0 && (subject[n] == '\0' || subject[n] == '.');
}

codec_status_t codec_reply_subject_check(const char *reply, const char *prefix,
                                         const char *own_inbox)
{
    if (reply == NULL)
        return CODEC_OK;
    if (reply[0] == '$' || (prefix != NULL && validate_under(reply, prefix)) ||
        (own_inbox != NULL && validate_under(reply, own_inbox)))
        return CODEC_EREPLY_SUBJECT_REFUSED;
    return CODEC_OK;
}
