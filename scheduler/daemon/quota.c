/*
 * quota.c - what each model holds in the store (items and bytes, queued or in flight), against
 * the per-model limits that refuse a submit as queue_full (JetStream's max_msgs / max_bytes).
 *
 * An item counts from its acceptance to its completion (ack or dead letter): returns, naks and
 * redeliveries change nothing. Its bytes are what the store keeps of it: id, payload and the
 * reply subject framed with it. Completion is seen per position of an in-flight batch, so each
 * batch in flight keeps the byte count of each position until it is settled or returned.
 *
 * Invariants:
 *   1. items and bytes of a model = the sums over its items accepted (or recovered at start) and
 *      not yet completed; an item is subtracted once (its position's count is zeroed then).
 *   2. A position returned to its lane (nak, deadline, death, bye, disconnect) is forgotten by
 *      the batch record without being subtracted: the item is still stored.
 *   3. A model's entry lives while it holds anything or a batch record names it; the tick frees
 *      the others, so models that come and go cost nothing once gone.
 *
 * Rejected: counting only queued items (in flight ones are stored too, and a consumer that
 * never acks would let the store grow without bound); asking the store for sizes at completion
 * (a tombstone reads nothing back, and the store knows no models' totals).
 */
#include "scheduler/daemon/daemon_int.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct quota_model {
    char *name; /* owned */
    uint64_t items, bytes;
    uint32_t batches; /* batch records naming this model */
};

typedef struct {
    quota_model_t *model;
    uint32_t n;
    uint32_t bytes[]; /* per position; 0 once completed or returned */
} quota_batch_t;

static map_key_t quota_model_key(const char *model)
{
    size_t n = strlen(model);
    return (map_key_t){XXH64(model, n, 0), XXH64(model, n, 1)};
}

void quota_init(quota_t *q, uint64_t max_items, uint64_t max_bytes)
{
    memset(q, 0, sizeof(*q));
    map_init(&q->models);
    map_init(&q->batches);
    q->max_items = max_items;
    q->max_bytes = max_bytes;
}

void quota_fini(quota_t *q)
{
    for (size_t i = 0; i < q->batches.cap; i++)
        free(q->batches.slots[i].value);
    for (size_t i = 0; i < q->models.cap; i++) {
        quota_model_t *m = q->models.slots[i].value;
        if (m != NULL) {
            free(m->name);
            free(m);
        }
    }
    map_fini(&q->batches);
    map_fini(&q->models);
}

static quota_model_t *quota_model_find(const quota_t *q, const char *model)
{
    quota_model_t *m = map_get(&q->models, quota_model_key(model));
    return m != NULL && strcmp(m->name, model) == 0 ? m : NULL;
}

void quota_usage(const quota_t *q, const char *model, uint64_t *out_items, uint64_t *out_bytes)
{
    const quota_model_t *m = quota_model_find(q, model);
    *out_items = m != NULL ? m->items : 0;
    *out_bytes = m != NULL ? m->bytes : 0;
}

codec_status_t quota_check(const quota_t *q, const char *model, uint64_t bytes)
{
    uint64_t items, held;
    quota_usage(q, model, &items, &held);
    if ((q->max_items != 0 && items + 1 > q->max_items) ||
        (q->max_bytes != 0 && held + bytes > q->max_bytes))
        return CODEC_EQUEUE_FULL;
    return CODEC_OK;
}

daemon_status_t quota_add(quota_t *q, const char *model, uint64_t bytes)
{
    quota_model_t *m = quota_model_find(q, model);
    if (m == NULL) {
        if (map_reserve(&q->models, 1) != MAP_OK || (m = calloc(1, sizeof(*m))) == NULL)
            return DAEMON_ENOMEM;
        if ((m->name = strdup(model)) == NULL) {
            free(m);
            return DAEMON_ENOMEM;
        }
        /* a 128-bit hash collision between two model names would merge their counts: the
         * put then fails and the new model is counted nowhere, which only loosens its limit */
        if (map_put(&q->models, quota_model_key(model), m) != MAP_OK) {
            free(m->name);
            free(m);
            return DAEMON_ENOMEM;
        }
    }
    m->items++;
    m->bytes += bytes;
    return DAEMON_OK;
}

void quota_complete_one(quota_t *q, const char *model, uint64_t bytes)
{
    quota_model_t *m = quota_model_find(q, model);
    if (m == NULL)
        return;
    m->items -= m->items != 0;
    m->bytes -= bytes <= m->bytes ? bytes : m->bytes;
}

daemon_status_t quota_batch_open(quota_t *q, uint64_t batch_id, const char *model,
                                 const store_view_t *items_view, size_t n)
{
    quota_model_t *m = quota_model_find(q, model);
    if (m == NULL) /* nothing of the model was counted (its first add ran out of memory) */
        return DAEMON_OK;
    quota_batch_t *b = malloc(sizeof(*b) + n * sizeof(b->bytes[0]));
    if (b == NULL || map_put(&q->batches, (map_key_t){batch_id, 0}, b) != MAP_OK) {
        free(b);
        return DAEMON_ENOMEM;
    }
    b->model = m;
    b->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        b->bytes[i] = (uint32_t)(items_view[i].id_len + items_view[i].payload_len);
    m->batches++;
    return DAEMON_OK;
}

/* Settles positions (all when pos is NULL): subtracted when completed (invariant 1), only
 * forgotten when returned (invariant 2). */
static void quota_batch_settle(quota_t *q, uint64_t batch_id, const uint32_t *pos, size_t n,
                               int completed)
{
    quota_batch_t *b = map_get(&q->batches, (map_key_t){batch_id, 0});
    if (b == NULL)
        return;
    size_t count = pos != NULL ? n : b->n;
    for (size_t i = 0; i < count; i++) {
        uint32_t p = pos != NULL ? pos[i] : (uint32_t)i;
        if (p >= b->n || b->bytes[p] == 0)
            continue;
        if (completed) {
            b->model->items -= b->model->items != 0;
            b->model->bytes -= b->bytes[p] <= b->model->bytes ? b->bytes[p] : b->model->bytes;
        }
        b->bytes[p] = 0;
    }
}

void quota_batch_completed(quota_t *q, uint64_t batch_id, const uint32_t *pos, size_t n)
{
    quota_batch_settle(q, batch_id, pos, n, 1);
}

void quota_batch_returned(quota_t *q, uint64_t batch_id, const uint32_t *pos, size_t n)
{
    quota_batch_settle(q, batch_id, pos, n, 0);
}

void quota_batch_close(quota_t *q, uint64_t batch_id)
{
    void *v = NULL;
    if (map_del(&q->batches, (map_key_t){batch_id, 0}, &v) != MAP_OK)
        return;
    quota_batch_t *b = v;
    b->model->batches--;
    free(b);
}

void quota_tick(quota_t *q)
{
    for (size_t i = 0; i < q->models.cap; i++) {
        quota_model_t *m = q->models.slots[i].value;
        if (m == NULL || m->items != 0 || m->batches != 0)
            continue;
        map_del(&q->models, q->models.slots[i].key, NULL); /* invariant 3 */
        free(m->name);
        free(m);
        i--; /* the deletion may have shifted a later entry into this slot */
    }
}
