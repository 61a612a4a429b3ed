/*
 * codec.c - the only file that knows protobuf-c: decode + validate wire messages into the plain
 * structs of codec.h, and encode those structs back to wire bytes.
 *
 * Owns: the status table, the mapping between lanes.proto messages and codec_*_t, the per-item
 * validation rules of a Submit and the field rules of a Register.
 *
 * Invariants:
 *  1. No protobuf-c type crosses codec.h. A decoded codec_*_t is the first member of a private
 *     box that also holds the unpacked protobuf-c message; destroy recovers the box from the
 *     public pointer, frees the message, then the box.
 *  2. Decoded pointers are views into the unpacked message (which owns copies of every string and
 *     bytes field), so they live exactly as long as the box and never point into the caller's
 *     input buffer.
 *  3. A decoder either returns CODEC_OK and sets *out, or returns an error and leaves *out as it
 *     was; every function releases what it allocated through a single `out:` label.
 *  4. A decodable Submit always yields CODEC_OK: validation is per item and first-failure-wins in
 *     the order documented in codec.h, so a producer learns one reason per item and the other
 *     items of the same message are unaffected.
 *  5. Zero is absence (proto3): signature 0 is "no signature", an empty hash vector is "no
 *     hashes", string "" is "no string". The encoder refuses a signature of 0 flagged as present
 *     rather than silently dropping it.
 *  6. Unpack failures are told apart: an allocator that records exhaustion turns protobuf-c's
 *     single NULL result into CODEC_ENOMEM or CODEC_EMALFORMED.
 *  7. Status names, code words and texts come from the one CODEC_STATUS_MAP, so they cannot drift.
 *
 * Rejected alternatives:
 *  - Copying strings/bytes into caller-owned memory: doubles allocations on the hot submit path
 *    for data the scheduler copies into the store once anyway; views with an explicit lifetime
 *    (as LMDB's mdb_get) are cheaper and the rule is stated once in codec.h.
 *  - Exposing protobuf-c structs: every module would then depend on generated code and on
 *    protobuf-c's ownership rules; the scheduler's algorithm files stay protobuf-free.
 *  - Rejecting a whole Submit on the first bad item: one malformed item from a batching producer
 *    would bounce hundreds of good ones; only an undecodable message is refused whole.
 *  - Hand-written varint encoding: protobuf-c's pack is the reference and handles packed repeated
 *    fields, unknown-field preservation and proto3 zero elision consistently with the decoder.
 *  - Validating on encode: a test producer must be able to send exactly what a buggy producer
 *    would, so encoders only check arguments.
 */
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "lanes.pb-c.h"

_Static_assert(CODEC_OK == 0, "CODEC_OK must be 0");
_Static_assert((int)CODEC_ITEM_ACCEPTED == (int)LANES__V1__ITEM_STATUS__ITEM_STATUS_ACCEPTED &&
                   (int)CODEC_ITEM_DUPLICATE ==
                       (int)LANES__V1__ITEM_STATUS__ITEM_STATUS_DUPLICATE &&
                   (int)CODEC_ITEM_REJECTED == (int)LANES__V1__ITEM_STATUS__ITEM_STATUS_REJECTED,
               "codec_item_status_t must equal lanes.v1.ItemStatus");
_Static_assert((int)CODEC_BATCH_OK == (int)LANES__V1__BATCH_STATUS__BATCH_STATUS_OK &&
                   (int)CODEC_BATCH_EXPIRED == (int)LANES__V1__BATCH_STATUS__BATCH_STATUS_EXPIRED &&
                   (int)CODEC_BATCH_ERROR == (int)LANES__V1__BATCH_STATUS__BATCH_STATUS_ERROR,
               "codec_batch_status_t must equal lanes.v1.BatchStatus");

/* ---- status ------------------------------------------------------------------------------- */

#define CODEC_TEXT_CASE_(name, code, text) \
    case name:                             \
        return text;
#define CODEC_REASON_CASE_(name, code, text) \
    case name:                               \
        return code;
STATUS_SWITCH(codec_status_str, codec_status_t, CODEC_STATUS_MAP, CODEC_TEXT_CASE_,
              "unknown status")
STATUS_SWITCH(codec_status_reason, codec_status_t, CODEC_STATUS_MAP, CODEC_REASON_CASE_,
              "unknown_status")
#undef CODEC_TEXT_CASE_
#undef CODEC_REASON_CASE_

/* ---- protobuf-c plumbing ------------------------------------------------------------------ */

static void *pb_alloc(void *exhausted, size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p && exhausted)
        *(bool *)exhausted = true;
    return p;
}

static void pb_free(void *unused, void *p)
{
    (void)unused;
    free(p);
}

static ProtobufCAllocator release_allocator = {pb_alloc, pb_free, NULL};

static codec_status_t unpack(const ProtobufCMessageDescriptor *desc, const void *buf, size_t len,
                             ProtobufCMessage **msg)
{
    static const uint8_t empty[1];
    bool exhausted = false;
    ProtobufCAllocator allocator = {pb_alloc, pb_free, &exhausted};

    if (!buf && len)
        return CODEC_EINVAL;
    *msg = protobuf_c_message_unpack(desc, &allocator, len, buf ? buf : empty);
    if (!*msg)
        return exhausted ? CODEC_ENOMEM : CODEC_EMALFORMED;
    return CODEC_OK;
}

static void unpacked_free(ProtobufCMessage *msg)
{
    if (msg)
        protobuf_c_message_free_unpacked(msg, &release_allocator);
}

static codec_status_t pack(const ProtobufCMessage *msg, uint8_t **out_buf, size_t *out_len)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);

    if (!buf)
        return CODEC_ENOMEM;
    protobuf_c_message_pack(msg, buf);
    *out_buf = buf;
    *out_len = len;
    return CODEC_OK;
}

/* A box: `head` bytes of fixed part followed by n elements of `elem` bytes. */
static void *box_alloc(size_t head, size_t n, size_t elem)
{
    if (n > (SIZE_MAX - head) / elem)
        return NULL;
    return malloc(head + n * elem);
}

/* Scratch array for encoding; never NULL on success, even for n == 0. */
static void *scratch_alloc(size_t n, size_t elem)
{
    return calloc(n ? n : 1, elem);
}

static codec_bytes_t bytes_view(ProtobufCBinaryData b)
{
    codec_bytes_t v = {b.len ? b.data : NULL, b.len};
    return v;
}

static const char *str_view(const char *s)
{
    return s ? s : "";
}

static bool bytes_in(codec_bytes_t b, ProtobufCBinaryData *out)
{
    if (!b.ptr && b.len)
        return false;
    out->len = b.len;
    out->data = (uint8_t *)b.ptr;
    return true;
}

static char *str_in(const char *s)
{
    return (char *)(s ? s : "");
}

/* ---- Submit ------------------------------------------------------------------------------- */

struct submit_box {
    codec_submit_t pub;
    ProtobufCMessage *msg;
    codec_work_item_t items[];
};

static codec_status_t work_item_check(const codec_work_item_t *it, const codec_limits_t *limits,
                                      uint64_t *shape)
{
    if (it->id.len == 0)
        return CODEC_EBAD_ID;
    if (it->id.len > CODEC_ID_MAX)
        return CODEC_EID_TOO_LONG;
    if (it->model[0] == '\0' || (limits && limits->model && strcmp(it->model, limits->model) != 0))
        return CODEC_EBAD_MODEL;
    if (it->tokens == 0)
        return CODEC_EZERO_TOKENS;
    if (limits && limits->max_payload && it->payload.len > limits->max_payload)
        return CODEC_EPAYLOAD_TOO_LARGE;
    if (it->n_component_hashes == 0 && !it->has_signature)
        return CODEC_ENO_SHAPE;
    if (it->n_component_hashes == 0) {
        *shape = it->signature;
        return CODEC_OK;
    }
    *shape = codec_signature(it->component_hashes, it->n_component_hashes);
    if (it->has_signature && *shape != it->signature)
        return CODEC_ESIGNATURE_MISMATCH;
    return CODEC_OK;
}

static void work_item_view(const Lanes__V1__WorkItem *w, const codec_limits_t *limits,
                           codec_work_item_t *it)
{
    uint64_t shape = 0;

    it->id = bytes_view(w->id);
    it->model = str_view(w->model);
    it->component_hashes = w->n_component_hashes ? w->component_hashes : NULL;
    it->n_component_hashes = w->n_component_hashes;
    it->has_signature = w->signature != 0;
    it->signature = w->signature;
    it->tokens = w->tokens;
    it->payload = bytes_view(w->payload);
    it->reply_to = str_view(w->reply_to);
    it->created_unix_ns = w->created_unix_ns;
    it->status = work_item_check(it, limits, &shape);
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
    st = unpack(&lanes__v1__submit__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    s = (const Lanes__V1__Submit *)msg;
    box = box_alloc(sizeof *box, s->n_items, sizeof box->items[0]);
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
    unpacked_free(msg);
    return st;
}

void codec_submit_destroy(codec_submit_t *pub)
{
    struct submit_box *box = (struct submit_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

static codec_status_t work_item_in(const codec_work_item_t *in, Lanes__V1__WorkItem *w)
{
    lanes__v1__work_item__init(w);
    if (!bytes_in(in->id, &w->id) || !bytes_in(in->payload, &w->payload))
        return CODEC_EINVAL;
    if (in->n_component_hashes && !in->component_hashes)
        return CODEC_EINVAL;
    if (in->has_signature && in->signature == 0)
        return CODEC_EINVAL;
    w->model = str_in(in->model);
    w->n_component_hashes = in->n_component_hashes;
    w->component_hashes = (uint64_t *)in->component_hashes;
    w->signature = in->has_signature ? in->signature : 0;
    w->tokens = in->tokens;
    w->reply_to = str_in(in->reply_to);
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
    items = scratch_alloc(msg->n_items, sizeof *items);
    ptrs = scratch_alloc(msg->n_items, sizeof *ptrs);
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
    st = pack(&s.base, out_buf, out_len);
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
    st = unpack(&lanes__v1__submit_reply__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__SubmitReply *)msg;
    box = box_alloc(sizeof *box, r->n_results, sizeof box->results[0]);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < r->n_results; i++) {
        const Lanes__V1__ItemResult *ir = r->results[i];
        box->results[i].id = bytes_view(ir->id);
        box->results[i].status = (codec_item_status_t)ir->status;
        box->results[i].reason = str_view(ir->reason);
        box->results[i].error = str_view(ir->error);
    }
    box->pub.results = box->results;
    box->pub.n_results = r->n_results;
    box->pub.error = str_view(r->error);
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_submit_reply_destroy(codec_submit_reply_t *pub)
{
    struct submit_reply_box *box = (struct submit_reply_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
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
    results = scratch_alloc(msg->n_results, sizeof *results);
    ptrs = scratch_alloc(msg->n_results, sizeof *ptrs);
    if (!results || !ptrs) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < msg->n_results; i++) {
        const codec_item_result_t *in = &msg->results[i];
        Lanes__V1__ItemResult *ir = &results[i];
        lanes__v1__item_result__init(ir);
        if (!bytes_in(in->id, &ir->id)) {
            st = CODEC_EINVAL;
            goto out;
        }
        ir->status = (Lanes__V1__ItemStatus)in->status;
        ir->reason = str_in(in->reason);
        ir->error = str_in(in->error);
        ptrs[i] = ir;
    }
    r.n_results = msg->n_results;
    r.results = ptrs;
    r.error = str_in(msg->error);
    st = pack(&r.base, out_buf, out_len);
out:
    free(ptrs);
    free(results);
    return st;
}

/* ---- Register ----------------------------------------------------------------------------- */

struct register_box {
    codec_register_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_register(const void *buf, size_t len, codec_register_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct register_box *box = NULL;
    const Lanes__V1__Register *r;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = unpack(&lanes__v1__register__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__Register *)msg;
    if (str_view(r->model)[0] == '\0')
        st = CODEC_EBAD_MODEL;
    else if (r->max_batch_size == 0)
        st = CODEC_EZERO_BATCH_SIZE;
    else if (r->max_batch_tokens == 0)
        st = CODEC_EZERO_BATCH_TOKENS;
    if (st != CODEC_OK)
        goto out;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.model = str_view(r->model);
    box->pub.max_batch_size = r->max_batch_size;
    box->pub.max_batch_tokens = r->max_batch_tokens;
    box->pub.max_input_tokens = r->max_input_tokens;
    box->pub.name = str_view(r->name);
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_register_destroy(codec_register_t *pub)
{
    struct register_box *box = (struct register_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

codec_status_t codec_encode_register(const codec_register_t *msg, uint8_t **out_buf,
                                     size_t *out_len)
{
    Lanes__V1__Register r = LANES__V1__REGISTER__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    r.model = str_in(msg->model);
    r.max_batch_size = msg->max_batch_size;
    r.max_batch_tokens = msg->max_batch_tokens;
    r.max_input_tokens = msg->max_input_tokens;
    r.name = str_in(msg->name);
    return pack(&r.base, out_buf, out_len);
}

/* ---- Registered --------------------------------------------------------------------------- */

struct registered_box {
    codec_registered_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_registered(const void *buf, size_t len, codec_registered_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct registered_box *box = NULL;
    const Lanes__V1__Registered *r;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = unpack(&lanes__v1__registered__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__Registered *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.consumer_id = str_view(r->consumer_id);
    box->pub.pull_subject = str_view(r->pull_subject);
    box->pub.ack_subject = str_view(r->ack_subject);
    box->pub.heartbeat_subject = str_view(r->heartbeat_subject);
    box->pub.bye_subject = str_view(r->bye_subject);
    box->pub.heartbeat_ms = r->heartbeat_ms;
    box->pub.dead_after_ms = r->dead_after_ms;
    box->pub.ack_wait_ms = r->ack_wait_ms;
    box->pub.error = str_view(r->error);
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_registered_destroy(codec_registered_t *pub)
{
    struct registered_box *box = (struct registered_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

codec_status_t codec_encode_registered(const codec_registered_t *msg, uint8_t **out_buf,
                                       size_t *out_len)
{
    Lanes__V1__Registered r = LANES__V1__REGISTERED__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    r.consumer_id = str_in(msg->consumer_id);
    r.pull_subject = str_in(msg->pull_subject);
    r.ack_subject = str_in(msg->ack_subject);
    r.heartbeat_subject = str_in(msg->heartbeat_subject);
    r.bye_subject = str_in(msg->bye_subject);
    r.heartbeat_ms = msg->heartbeat_ms;
    r.dead_after_ms = msg->dead_after_ms;
    r.ack_wait_ms = msg->ack_wait_ms;
    r.error = str_in(msg->error);
    return pack(&r.base, out_buf, out_len);
}

/* ---- Pull --------------------------------------------------------------------------------- */

struct pull_box {
    codec_pull_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_pull(const void *buf, size_t len, codec_pull_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct pull_box *box = NULL;
    const Lanes__V1__Pull *p;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = unpack(&lanes__v1__pull__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    p = (const Lanes__V1__Pull *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.max_batches = p->max_batches;
    box->pub.expires_ms = p->expires_ms;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_pull_destroy(codec_pull_t *pub)
{
    struct pull_box *box = (struct pull_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

codec_status_t codec_encode_pull(const codec_pull_t *msg, uint8_t **out_buf, size_t *out_len)
{
    Lanes__V1__Pull p = LANES__V1__PULL__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    p.max_batches = msg->max_batches;
    p.expires_ms = msg->expires_ms;
    return pack(&p.base, out_buf, out_len);
}

/* ---- Batch -------------------------------------------------------------------------------- */

struct batch_box {
    codec_batch_t pub;
    ProtobufCMessage *msg;
    codec_batch_item_t items[];
};

codec_status_t codec_decode_batch(const void *buf, size_t len, codec_batch_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct batch_box *box = NULL;
    const Lanes__V1__Batch *b;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = unpack(&lanes__v1__batch__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    b = (const Lanes__V1__Batch *)msg;
    box = box_alloc(sizeof *box, b->n_items, sizeof box->items[0]);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < b->n_items; i++) {
        const Lanes__V1__BatchItem *bi = b->items[i];
        box->items[i].id = bytes_view(bi->id);
        box->items[i].tokens = bi->tokens;
        box->items[i].payload = bytes_view(bi->payload);
        box->items[i].reply_to = str_view(bi->reply_to);
        box->items[i].deliveries = bi->deliveries;
    }
    box->pub.batch_id = b->batch_id;
    box->pub.model = str_view(b->model);
    box->pub.signature = b->signature;
    box->pub.lane = b->lane;
    box->pub.pad_to = b->pad_to;
    box->pub.items = box->items;
    box->pub.n_items = b->n_items;
    box->pub.status = (codec_batch_status_t)b->status;
    box->pub.error = str_view(b->error);
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_batch_destroy(codec_batch_t *pub)
{
    struct batch_box *box = (struct batch_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

codec_status_t codec_encode_batch(const codec_batch_t *msg, uint8_t **out_buf, size_t *out_len)
{
    Lanes__V1__Batch b = LANES__V1__BATCH__INIT;
    Lanes__V1__BatchItem *items = NULL;
    Lanes__V1__BatchItem **ptrs = NULL;
    codec_status_t st = CODEC_EINVAL;

    if (!msg || !out_buf || !out_len || (msg->n_items && !msg->items))
        goto out;
    items = scratch_alloc(msg->n_items, sizeof *items);
    ptrs = scratch_alloc(msg->n_items, sizeof *ptrs);
    if (!items || !ptrs) {
        st = CODEC_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < msg->n_items; i++) {
        const codec_batch_item_t *in = &msg->items[i];
        Lanes__V1__BatchItem *bi = &items[i];
        lanes__v1__batch_item__init(bi);
        if (!bytes_in(in->id, &bi->id) || !bytes_in(in->payload, &bi->payload)) {
            st = CODEC_EINVAL;
            goto out;
        }
        bi->tokens = in->tokens;
        bi->reply_to = str_in(in->reply_to);
        bi->deliveries = in->deliveries;
        ptrs[i] = bi;
    }
    b.batch_id = msg->batch_id;
    b.model = str_in(msg->model);
    b.signature = msg->signature;
    b.lane = msg->lane;
    b.pad_to = msg->pad_to;
    b.n_items = msg->n_items;
    b.items = ptrs;
    b.status = (Lanes__V1__BatchStatus)msg->status;
    b.error = str_in(msg->error);
    st = pack(&b.base, out_buf, out_len);
out:
    free(ptrs);
    free(items);
    return st;
}

/* ---- Ack ---------------------------------------------------------------------------------- */

struct ack_box {
    codec_ack_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_ack(const void *buf, size_t len, codec_ack_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct ack_box *box = NULL;
    const Lanes__V1__Ack *a;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = unpack(&lanes__v1__ack__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    a = (const Lanes__V1__Ack *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.batch_id = a->batch_id;
    box->pub.all = a->all != 0;
    box->pub.ack = a->n_ack ? a->ack : NULL;
    box->pub.n_ack = a->n_ack;
    box->pub.nak = a->n_nak ? a->nak : NULL;
    box->pub.n_nak = a->n_nak;
    box->pub.in_progress = a->in_progress != 0;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_ack_destroy(codec_ack_t *pub)
{
    struct ack_box *box = (struct ack_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

codec_status_t codec_encode_ack(const codec_ack_t *msg, uint8_t **out_buf, size_t *out_len)
{
    Lanes__V1__Ack a = LANES__V1__ACK__INIT;

    if (!msg || !out_buf || !out_len || (msg->n_ack && !msg->ack) || (msg->n_nak && !msg->nak))
        return CODEC_EINVAL;
    a.batch_id = msg->batch_id;
    a.all = msg->all;
    a.n_ack = msg->n_ack;
    a.ack = (uint32_t *)msg->ack;
    a.n_nak = msg->n_nak;
    a.nak = (uint32_t *)msg->nak;
    a.in_progress = msg->in_progress;
    return pack(&a.base, out_buf, out_len);
}

/* ---- AckReply ----------------------------------------------------------------------------- */

struct ack_reply_box {
    codec_ack_reply_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_ack_reply(const void *buf, size_t len, codec_ack_reply_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct ack_reply_box *box = NULL;
    const Lanes__V1__AckReply *r;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = unpack(&lanes__v1__ack_reply__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    r = (const Lanes__V1__AckReply *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.acked = r->acked;
    box->pub.returned = r->returned;
    box->pub.unknown = r->unknown;
    box->pub.error = str_view(r->error);
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_ack_reply_destroy(codec_ack_reply_t *pub)
{
    struct ack_reply_box *box = (struct ack_reply_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

codec_status_t codec_encode_ack_reply(const codec_ack_reply_t *msg, uint8_t **out_buf,
                                      size_t *out_len)
{
    Lanes__V1__AckReply r = LANES__V1__ACK_REPLY__INIT;

    if (!msg || !out_buf || !out_len)
        return CODEC_EINVAL;
    r.acked = msg->acked;
    r.returned = msg->returned;
    r.unknown = msg->unknown;
    r.error = str_in(msg->error);
    return pack(&r.base, out_buf, out_len);
}

/* ---- Heartbeat ---------------------------------------------------------------------------- */

struct heartbeat_box {
    codec_heartbeat_t pub;
    ProtobufCMessage *msg;
};

codec_status_t codec_decode_heartbeat(const void *buf, size_t len, codec_heartbeat_t **out)
{
    ProtobufCMessage *msg = NULL;
    struct heartbeat_box *box = NULL;
    const Lanes__V1__Heartbeat *h;
    codec_status_t st;

    if (!out)
        return CODEC_EINVAL;
    st = unpack(&lanes__v1__heartbeat__descriptor, buf, len, &msg);
    if (st != CODEC_OK)
        goto out;
    h = (const Lanes__V1__Heartbeat *)msg;
    box = malloc(sizeof *box);
    if (!box) {
        st = CODEC_ENOMEM;
        goto out;
    }
    box->pub.in_progress = h->n_in_progress ? h->in_progress : NULL;
    box->pub.n_in_progress = h->n_in_progress;
    box->msg = msg;
    msg = NULL;
    *out = &box->pub;
    box = NULL;
out:
    free(box);
    unpacked_free(msg);
    return st;
}

void codec_heartbeat_destroy(codec_heartbeat_t *pub)
{
    struct heartbeat_box *box = (struct heartbeat_box *)pub;

    if (!box)
        return;
    unpacked_free(box->msg);
    free(box);
}

codec_status_t codec_encode_heartbeat(const codec_heartbeat_t *msg, uint8_t **out_buf,
                                      size_t *out_len)
{
    Lanes__V1__Heartbeat h = LANES__V1__HEARTBEAT__INIT;

    if (!msg || !out_buf || !out_len || (msg->n_in_progress && !msg->in_progress))
        return CODEC_EINVAL;
    h.n_in_progress = msg->n_in_progress;
    h.in_progress = (uint64_t *)msg->in_progress;
    return pack(&h.base, out_buf, out_len);
}
