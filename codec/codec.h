/*
 * codec.h - lanesched's wire contract in plain C.
 *
 * Everything the rest of the daemon (and the C clients) know about lanes.proto goes through this
 * header: shape signatures, decode + validation, encode. No protobuf-c type appears here; the
 * generated code is private to codec/.
 *
 * Ownership, in one place (each pointer below repeats which rule applies):
 *
 *  - decoded messages: codec_decode_<msg>() returns a struct the caller owns and must release with
 *    codec_<msg>_destroy() (never free()). Every pointer inside it - strings, bytes, arrays - is
 *    BORROWED: a view into the decoded message, valid until that destroy call and no longer, like
 *    the data returned by LMDB's mdb_get(). Copy what must outlive it. The input buffer is not
 *    referenced after decode returns; the caller may free or reuse it at once.
 *  - decoded strings are NUL-terminated and never NULL (an absent string is ""). A string that
 *    carries an embedded NUL on the wire is seen up to that NUL.
 *  - decoded bytes have ptr == NULL exactly when len == 0.
 *  - messages given to encode are BORROWED for the duration of the call only. A NULL string means
 *    absent (same as ""); bytes/arrays may be NULL only with a zero length.
 *  - encode output (*out_buf) is RETURNED TO THE CALLER, malloc'd, to be released with free(); it
 *    is non-NULL on CODEC_OK even when *out_len is 0.
 *  - on any status other than CODEC_OK, *out (decode) and *out_buf / *out_len (encode) are left
 *    untouched.
 *
 * Proto3 has no presence for scalars: zero means absent. Consequently a shape signature of 0 cannot
 * be sent (it reads as "no signature"); the empty component vector is still a valid shape when
 * sent as its signature, XXH64 of zero bytes = 0xef46db3751d8e999.
 */
#ifndef LANESCHED_CODEC_H
#define LANESCHED_CODEC_H

#include "common/limits.h"
#include "common/status.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The start of a P.metrics reply that carries no figures, only why (subjects.md): a Prometheus
 * comment, so the reply still parses as an exposition. */
#define CODEC_METRICS_REFUSED_PREFIX "# lanesched refused: "

/* ---- status ------------------------------------------------------------------------------- */

/*
 * X(NAME, "code_word", "human text"): every reason a message or an item can be refused for, and
 * so the one list of code words. The code word is stable: it goes into ItemResult.reason, the
 * error words of replies, the stats' rejected-by-reason keys and the daemon's counters (indexed
 * by this enum), so never rename one; add new entries at the end. The validation reasons are
 * given by the decoders and the checks of codec/validate.c; duplicate, store_full, store_error,
 * not_owner, too_many_consumers, too_many_pulls, too_many_models, too_many_shapes, queue_full and
 * reply_too_large by the daemon from its own state (CODEC_DUPLICATE is a result, not a
 * rejection).
 */
#define CODEC_STATUS_MAP(X)                                                                        \
    X(CODEC_OK, "ok", "ok")                                                                        \
    X(CODEC_EMALFORMED, "malformed", "message is not a decodable protobuf")                        \
    X(CODEC_ENOMEM, "no_memory", "out of memory")                                                  \
    X(CODEC_EINVAL, "bad_argument", "invalid argument to the codec")                               \
    X(CODEC_EBAD_MODEL, "bad_model", "model is empty or not the one this subject serves")          \
    X(CODEC_EZERO_TOKENS, "zero_tokens", "tokens must be greater than zero")                       \
    X(CODEC_EBAD_ID, "bad_id", "id is empty")                                                      \
    X(CODEC_EID_TOO_LONG, "id_too_long", "id is longer than 64 bytes")                             \
    X(CODEC_EPAYLOAD_TOO_LARGE, "payload_too_large",                                               \
      "payload is larger than the configured maximum")                                             \
    X(CODEC_ESIGNATURE_MISMATCH, "signature_mismatch",                                             \
      "signature does not match the signature of the component hashes")                            \
    X(CODEC_ENO_SHAPE, "no_shape", "neither component hashes nor a signature were given")          \
    X(CODEC_EZERO_BATCH_SIZE, "zero_batch_size", "max_batch_size must be greater than zero")       \
    X(CODEC_EZERO_BATCH_TOKENS, "zero_batch_tokens", "max_batch_tokens must be greater than zero") \
    X(CODEC_EMODEL_TOO_LONG, "model_too_long", "model is longer than 255 bytes")                   \
    X(CODEC_EBAD_MODEL_NAME, "bad_model_name",                                                     \
      "model contains '*', '>', a space or control character, or an empty token, or is not UTF-8") \
    X(CODEC_ETOKENS_TOO_LARGE, "tokens_too_large", "tokens is above 4294967287")                   \
    X(CODEC_DUPLICATE, "duplicate", "an item with this id was accepted within the dedupe window")  \
    X(CODEC_ESTORE_FULL, "store_full", "the data directory is full: retry later")                  \
    X(CODEC_ESTORE_ERROR, "store_error", "the store failed: retry later; an operator has to look") \
    X(CODEC_ENOT_OWNER, "not_owner", "this instance does not hold the model's lease now: retry")   \
    X(CODEC_ENAME_TOO_LONG, "name_too_long", "name is longer than the configured maximum")         \
    X(CODEC_EBATCH_SIZE_TOO_LARGE, "batch_size_too_large",                                         \
      "max_batch_size is above the configured maximum")                                            \
    X(CODEC_EBATCH_TOKENS_TOO_LARGE, "batch_tokens_too_large",                                     \
      "max_batch_tokens is above the configured maximum")                                          \
    X(CODEC_ETOO_MANY_ITEMS, "too_many_items",                                                     \
      "the message holds more items than the configured maximum: send fewer")                      \
    X(CODEC_EREPLY_TO_TOO_LONG, "reply_to_too_long",                                               \
      "reply_to is longer than the configured maximum")                                            \
    X(CODEC_ETOO_MANY_POSITIONS, "too_many_positions",                                             \
      "an ack or nak list is longer than the configured maximum")                                  \
    X(CODEC_ETOO_MANY_IDS, "too_many_ids",                                                         \
      "in_progress lists more batch ids than the configured maximum")                              \
    X(CODEC_ETOO_MANY_CONSUMERS, "too_many_consumers",                                             \
      "the daemon holds the configured maximum of consumers: retry later")                         \
    X(CODEC_ETOO_MANY_PULLS, "too_many_pulls",                                                     \
      "this consumer holds the configured maximum of open pulls")                                  \
    X(CODEC_ETOO_MANY_MODELS, "too_many_models",                                                   \
      "the daemon holds the configured maximum of models: retry later")                            \
    X(CODEC_ETOO_MANY_SHAPES, "too_many_shapes",                                                   \
      "the model, or the daemon, holds the configured maximum of shapes: retry later")             \
    X(CODEC_EQUEUE_FULL, "queue_full",                                                             \
      "the model's queue holds the configured maximum of items or bytes: retry later")             \
    X(CODEC_EREPLY_TOO_LARGE, "reply_too_large",                                                   \
      "the reply would be larger than the server carries: nothing was stored; send fewer items")   \
    X(CODEC_EMODEL_NOT_ALLOWED, "model_not_allowed",                                               \
      "the model is not in the daemon's --allow-models list")                                      \
    X(CODEC_EINPUT_TOO_LONG, "input_too_long",                                                     \
      "tokens is above every registered consumer's max_input_tokens: no worker can run it")        \
    X(CODEC_EREPLY_SUBJECT_REFUSED, "reply_subject_refused",                                       \
      "the reply subject is one lanesched never answers on: a '$' subject, or under its own "      \
      "subject prefix or inbox")                                                                   \
    X(CODEC_EBAD_REPLY_TO, "bad_reply_to",                                                         \
      "reply_to holds a space or a control character or is not UTF-8")                             \
    X(CODEC_EPULL_SUBJECT_TOO_LONG, "pull_subject_too_long",                                       \
      "the pull's reply subject is longer than the configured maximum of a reply_to")

/* CODEC_STATUS_COUNT is the number of codec_status_t values; they are 0 .. COUNT - 1. */
STATUS_ENUM(codec_status_t, CODEC_STATUS_MAP, CODEC_STATUS_COUNT);

/* Human text. Static storage (never free). Unknown values give "unknown status". */
const char *codec_status_str(codec_status_t status);
/* Stable lowercase code word. Static storage (never free). Unknown values give "unknown_status". */
const char *codec_status_reason(codec_status_t status);

/* ---- shape signatures --------------------------------------------------------------------- */

/* h_i = XXH64(bytes, seed 0). bytes: borrowed; may be NULL when len == 0. */
uint64_t codec_hash_component(const void *bytes, size_t len);

/*
 * XXH64(h_0 || ... || h_{n-1}, seed 0), each h_i written as 8 little-endian bytes whatever the
 * host. Order matters. n == 0 gives 0xef46db3751d8e999. hashes: borrowed; may be NULL when n == 0.
 */
uint64_t codec_signature(const uint64_t *hashes, size_t n);

/* ---- plain messages ----------------------------------------------------------------------- */

typedef struct {
    const uint8_t *ptr; /* borrowed (see the ownership note at the top) */
    size_t len;
} codec_bytes_t;

/* Numeric values are the wire contract (lanes.proto ItemStatus). */
typedef enum {
    CODEC_ITEM_ACCEPTED = 0,
    CODEC_ITEM_DUPLICATE = 1,
    CODEC_ITEM_REJECTED = 2,
} codec_item_status_t;

/*
 * Numeric values are the wire contract (lanes.proto BatchStatus). A newer peer may send a value
 * not listed here; decode passes it through unchanged, so treat unknown values as an error.
 */
typedef enum {
    CODEC_BATCH_OK = 0,
    CODEC_BATCH_EXPIRED = 1,
    CODEC_BATCH_ERROR = 2,
} codec_batch_status_t;

/* WorkItem. */
typedef struct {
    codec_bytes_t id;                 /* borrowed */
    const char *model;                /* borrowed */
    const uint64_t *component_hashes; /* borrowed; n_component_hashes entries */
    size_t n_component_hashes;
    bool has_signature; /* decode: signature != 0; encode: send signature */
    uint64_t signature; /* encode fails with CODEC_EINVAL if has_signature and 0 */
    uint32_t tokens;
    codec_bytes_t payload; /* borrowed */
    const char *reply_to;  /* borrowed */
    uint64_t created_unix_ns;
    uint32_t prefix_tokens; /* tokens of the prefix the signature covers; 0 = unknown */
    uint32_t max_wait_ms;   /* this item's own wait budget; 0 = its model's */
    /* Decode output, ignored by encode: */
    codec_status_t status; /* this item's validation result */
    uint64_t shape;        /* resolved signature when status == CODEC_OK, else 0 */
    /* Bytes of model and reply_to as sent (decode output; codec_item_check and the encoder read
     * them): a field holding a NUL byte is longer than its string. 0: the string's strlen. */
    size_t model_len, reply_to_len;
} codec_work_item_t;

/* Submit. */
typedef struct {
    const codec_work_item_t *items; /* borrowed; n_items entries, in wire order */
    size_t n_items;
} codec_submit_t;

/* ItemResult. */
typedef struct {
    codec_bytes_t id; /* borrowed */
    codec_item_status_t status;
    const char *reason; /* borrowed; a codec_status_reason() word or a caller's own */
    const char *error;  /* borrowed; text for people */
} codec_item_result_t;

/* SubmitReply. */
typedef struct {
    const codec_item_result_t *results; /* borrowed; n_results entries, same order as the items */
    size_t n_results;
    const char *error; /* borrowed; set when the whole Submit was refused */
} codec_submit_reply_t;

/* Register. max_input_tokens 0 = unlimited. The last three are optional (0 = absent): the
 * worker's cost per batch (microseconds) and per padded token (nanoseconds), and the shapes its
 * prefix cache holds. */
typedef struct {
    const char *model; /* borrowed */
    uint32_t max_batch_size;
    uint32_t max_batch_tokens;
    uint32_t max_input_tokens;
    const char *name; /* borrowed */
    uint32_t batch_fixed_us;
    uint32_t token_ns;
    uint32_t cache_shapes;
    size_t model_len; /* bytes of model as sent (decode output), as codec_work_item_t's */
    size_t name_len;  /* bytes of name as sent (decode output; 0: strlen): the cap counts them,
                       * the daemon keeps name up to its first NUL */
} codec_register_t;

/* Registered. */
typedef struct {
    const char *consumer_id;       /* borrowed */
    const char *pull_subject;      /* borrowed */
    const char *ack_subject;       /* borrowed */
    const char *heartbeat_subject; /* borrowed */
    const char *bye_subject;       /* borrowed */
    uint32_t heartbeat_ms;
    uint32_t dead_after_ms;
    uint32_t ack_wait_ms;
    const char *error;         /* borrowed */
    uint32_t protocol_version; /* the daemon's VERSION_PROTOCOL (common/version.h); 0 = absent */
} codec_registered_t;

/* Pull. */
typedef struct {
    uint32_t max_batches;
    uint32_t expires_ms;
} codec_pull_t;

/* BatchItem. */
typedef struct {
    codec_bytes_t id; /* borrowed */
    uint32_t tokens;
    codec_bytes_t payload; /* borrowed */
    const char *reply_to;  /* borrowed */
    uint32_t deliveries;
    uint32_t prefix_tokens; /* WorkItem.prefix_tokens as submitted */
} codec_batch_item_t;

/* Batch. */
typedef struct {
    uint64_t batch_id;
    const char *model; /* borrowed */
    uint64_t signature;
    uint32_t lane;
    uint32_t pad_to;
    const codec_batch_item_t *items; /* borrowed; n_items entries, in batch order */
    size_t n_items;
    codec_batch_status_t status;
    const char *error; /* borrowed */
} codec_batch_t;

/* Ack. Positions index the batch's items. */
typedef struct {
    uint64_t batch_id;
    bool all;
    const uint32_t *ack; /* borrowed; n_ack entries */
    size_t n_ack;
    const uint32_t *nak; /* borrowed; n_nak entries */
    size_t n_nak;
    bool in_progress;
} codec_ack_t;

/* AckReply. */
typedef struct {
    uint32_t acked;
    uint32_t returned;
    uint32_t unknown;
    const char *error; /* borrowed */
} codec_ack_reply_t;

/* Heartbeat. */
typedef struct {
    const uint64_t *in_progress; /* borrowed; n_in_progress batch ids */
    size_t n_in_progress;
} codec_heartbeat_t;

/*
 * Caps on the counts and lengths a client controls in one message, beyond the hard limits of
 * common/limits.h: the daemon's configured limits (its --limit-* flags). 0 = no cap.
 */
typedef struct {
    size_t max_items;          /* WorkItems per Submit (ETOO_MANY_ITEMS) */
    size_t max_name;           /* bytes of Register.name (ENAME_TOO_LONG) */
    uint32_t max_batch_size;   /* Register.max_batch_size (EBATCH_SIZE_TOO_LARGE) */
    uint32_t max_batch_tokens; /* Register.max_batch_tokens (EBATCH_TOKENS_TOO_LARGE) */
    size_t max_positions;      /* entries of Ack.ack, and of Ack.nak (ETOO_MANY_POSITIONS) */
    size_t max_ids;            /* entries of Heartbeat.in_progress (ETOO_MANY_IDS) */
} codec_caps_t;

/* Per-subject limits applied to every submitted item. limits itself may be NULL (no limits). */
typedef struct {
    const char *model;   /* borrowed; NULL = any non-empty model; else each item's must equal it */
    size_t max_payload;  /* bytes; 0 = unlimited; a payload of exactly max_payload is accepted */
    size_t max_reply_to; /* bytes of reply_to; 0 = unlimited */
    const codec_caps_t *caps; /* borrowed; NULL = none: a Submit's items are counted against
                               * max_items before any is decoded (codec_submit_caps_check) */
} codec_limits_t;

/* ---- validation: every rule a producer or consumer can break, in one place ---------------- */

/*
 * The model rule of subjects.md: 1..LIMITS_MODEL_MAX bytes (EBAD_MODEL when empty,
 * EMODEL_TOO_LONG when longer), one or more subject tokens joined by '.', none empty, and no
 * '*', '>', space or control character anywhere, valid UTF-8 (EBAD_MODEL_NAME). model:
 * borrowed.
 */
codec_status_t codec_model_check(const char *model);
/* 1 when none of the len bytes of s (borrowed) is one NATS ends a subject at or a control: a
 * byte up to the space (NUL, tab, CR, LF included) or DEL. NATS clients send a subject as they
 * are given it, so such a byte would cut it or start another protocol command. The model and
 * reply_to rules and the C client's publish share it. */
int codec_subject_bytes_ok(const char *s, size_t len);
/* The same for a model of len bytes as sent, which may hold a NUL byte (EBAD_MODEL_NAME). */
codec_status_t codec_model_check_len(const char *model, size_t len);

/*
 * The rules of one submitted item, first failure wins, in this order: id empty (EBAD_ID); id
 * over LIMITS_ID_MAX bytes (EID_TOO_LONG); the model rule (codec_model_check), or not
 * limits->model (EBAD_MODEL); tokens 0 (EZERO_TOKENS); tokens over LIMITS_TOKENS_MAX
 * (ETOKENS_TOO_LARGE); payload over limits->max_payload (EPAYLOAD_TOO_LARGE); neither component
 * hashes nor signature (ENO_SHAPE); both given and codec_signature(hashes) != signature
 * (ESIGNATURE_MISMATCH); reply_to over limits->max_reply_to (EREPLY_TO_TOO_LONG); reply_to
 * holding a NUL byte or not UTF-8 (EBAD_REPLY_TO). Lengths as item->model_len says. On CODEC_OK
 * *out_shape is the item's shape: codec_signature(hashes) when hashes are given, else the
 * signature. item and limits (may be NULL) are borrowed.
 */
codec_status_t codec_item_check(const codec_work_item_t *item, const codec_limits_t *limits,
                                uint64_t *out_shape /* out */);

/* The rules of a Register, first failure wins: the model rule (codec_model_check), a model
 * other than subject_model, the <model> of a Register sent on P.register.<model> (EBAD_MODEL;
 * NULL or "": sent on P.register), max_batch_size 0 (EZERO_BATCH_SIZE), max_batch_tokens 0
 * (EZERO_BATCH_TOKENS). All borrowed. */
codec_status_t codec_register_check(const codec_register_t *reg, const char *subject_model);

/*
 * The rule of every message's NATS reply subject (EREPLY_SUBJECT_REFUSED when broken): not a
 * '$' subject (JetStream's API, KV buckets, service discovery, the system account), not
 * `prefix` itself nor under it (the daemon's own subjects: dead letters, submits, consumers'
 * subjects), and not under `own_inbox` (NULL: none), the daemon's private inbox. The daemon
 * publishes its answer on the reply subject with its own permissions (allow_responses), so an
 * answer there would be the client's publish made with the daemon's rights. NULL reply: CODEC_OK.
 * All three are borrowed.
 */
codec_status_t codec_reply_subject_check(const char *reply, const char *prefix,
                                         const char *own_inbox);

/*
 * The caps of one message (codec_caps_t), checked by the daemon after a decode succeeded (a
 * Submit's by codec_decode_submit, on the count of its items before it decodes any, so a message
 * of a million empty items costs no decode); each returns CODEC_OK or the cap's own status. caps
 * and the message are borrowed.
 *   submit:    more than max_items items (the whole message is refused).
 *   register:  name over max_name bytes, then max_batch_size over its cap, then
 *              max_batch_tokens over its cap (after codec_register_check's rules).
 *   ack:       ack or nak with more than max_positions entries.
 *   heartbeat: in_progress with more than max_ids entries.
 */
codec_status_t codec_submit_caps_check(size_t n_items, const codec_caps_t *caps);
codec_status_t codec_register_caps_check(const codec_register_t *reg, const codec_caps_t *caps);
codec_status_t codec_ack_caps_check(const codec_ack_t *ack, const codec_caps_t *caps);
codec_status_t codec_heartbeat_caps_check(const codec_heartbeat_t *hb, const codec_caps_t *caps);

/* ---- decode ------------------------------------------------------------------------------- */

/*
 * Every decoder: buf is borrowed (may be NULL when len == 0); *out is returned to the caller, who
 * releases it with the matching destroy. Returns CODEC_EMALFORMED for bytes that are not the
 * message, CODEC_ENOMEM, CODEC_EINVAL for a NULL out, or a validation status as stated.
 */

/*
 * Returns CODEC_OK for any decodable Submit within limits->caps (else CODEC_ETOO_MANY_ITEMS,
 * nothing decoded); each item then carries its own status (codec_item_check), so one bad item
 * never rejects the others.
 */
codec_status_t codec_decode_submit(const void *buf, size_t len, const codec_limits_t *limits,
                                   codec_submit_t **out);
void codec_submit_destroy(codec_submit_t *msg); /* NULL-safe */

/* No field rules. */
/* The largest SubmitReply the items of sub can get when no result carries a refusal text: each
 * ItemResult at its id's length, a status and the longest reason word. A daemon refuses a
 * Submit whose bound passes what the server carries before storing anything. */
uint64_t codec_submit_reply_bound(const codec_submit_t *sub);
codec_status_t codec_decode_submit_reply(const void *buf, size_t len, codec_submit_reply_t **out);
void codec_submit_reply_destroy(codec_submit_reply_t *msg); /* NULL-safe */

/* Fails with the first rule of codec_register_check the message breaks; subject_model as
 * there (borrowed). */
codec_status_t codec_decode_register(const void *buf, size_t len, const char *subject_model,
                                     codec_register_t **out);
void codec_register_destroy(codec_register_t *msg); /* NULL-safe */

/* No field rules. */
codec_status_t codec_decode_registered(const void *buf, size_t len, codec_registered_t **out);
void codec_registered_destroy(codec_registered_t *msg); /* NULL-safe */

/* No field rules. */
codec_status_t codec_decode_pull(const void *buf, size_t len, codec_pull_t **out);
void codec_pull_destroy(codec_pull_t *msg); /* NULL-safe */

/* No field rules; status values outside codec_batch_status_t pass through. */
codec_status_t codec_decode_batch(const void *buf, size_t len, codec_batch_t **out);
void codec_batch_destroy(codec_batch_t *msg); /* NULL-safe */

/* No field rules: which positions exist is the scheduler's business. */
codec_status_t codec_decode_ack(const void *buf, size_t len, codec_ack_t **out);
void codec_ack_destroy(codec_ack_t *msg); /* NULL-safe */

/* No field rules. */
codec_status_t codec_decode_ack_reply(const void *buf, size_t len, codec_ack_reply_t **out);
void codec_ack_reply_destroy(codec_ack_reply_t *msg); /* NULL-safe */

/* No field rules. */
codec_status_t codec_decode_heartbeat(const void *buf, size_t len, codec_heartbeat_t **out);
void codec_heartbeat_destroy(codec_heartbeat_t *msg); /* NULL-safe */

/* ---- encode ------------------------------------------------------------------------------- */

/*
 * Every encoder: msg is borrowed for the call; *out_buf is returned to the caller (free()).
 * Returns CODEC_EINVAL for NULL arguments, a NULL array or bytes pointer with a non-zero length,
 * or a WorkItem with has_signature set and signature 0; CODEC_ENOMEM. Encoders do not validate
 * content (a producer may deliberately send an item the daemon will reject).
 */
codec_status_t codec_encode_submit(const codec_submit_t *msg, uint8_t **out_buf, size_t *out_len);
codec_status_t codec_encode_submit_reply(const codec_submit_reply_t *msg, uint8_t **out_buf,
                                         size_t *out_len);
codec_status_t codec_encode_register(const codec_register_t *msg, uint8_t **out_buf,
                                     size_t *out_len);
codec_status_t codec_encode_registered(const codec_registered_t *msg, uint8_t **out_buf,
                                       size_t *out_len);
codec_status_t codec_encode_pull(const codec_pull_t *msg, uint8_t **out_buf, size_t *out_len);
codec_status_t codec_encode_batch(const codec_batch_t *msg, uint8_t **out_buf, size_t *out_len);
/* As codec_encode_batch, into a buffer the caller keeps from one batch to the next: *buf (owned
 * by the caller, NULL with *cap 0 at first) is grown with realloc when the message needs more
 * than *cap bytes, else written over. On failure *out_len is untouched and *buf, *cap still
 * describe a valid buffer for the caller to free. */
codec_status_t codec_encode_batch_into(const codec_batch_t *msg, uint8_t **buf /* in, out */,
                                       size_t *cap /* in, out */, size_t *out_len /* out */);
codec_status_t codec_encode_ack(const codec_ack_t *msg, uint8_t **out_buf, size_t *out_len);
codec_status_t codec_encode_ack_reply(const codec_ack_reply_t *msg, uint8_t **out_buf,
                                      size_t *out_len);
codec_status_t codec_encode_heartbeat(const codec_heartbeat_t *msg, uint8_t **out_buf,
                                      size_t *out_len);

#endif /* LANESCHED_CODEC_H */
