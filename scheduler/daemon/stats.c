/*
 * stats.c - the lanes.stats JSON document, written through jansson.
 *
 * Invariants:
 *   1. The keys of subjects.md's stats table are stable: counters.{items_received,
 *      tokens_received, items_routed, tokens_routed, items_completed, tokens_completed,
 *      items_returned, duplicates, rejected, lanes_opened, lane_reuses, lanes_quiesced,
 *      force_fits, shape_switches, padded_tokens, real_tokens, dead_lettered}, models[],
 *      consumers[], version, protocol_version, instance_id. New keys may be added, none
 *      renamed.
 *   2. The document is valid JSON whatever bytes a client put in a model or consumer name:
 *      strings that are not valid UTF-8 are written with each bad byte as U+FFFD.
 *   3. counters.rejected has one key per reason seen so far, the reason's code word from
 *      CODEC_STATUS_MAP: the counters, the keys and the wire words are one list.
 *
 * Rejected: a hand-written writer (its first version): it escaped one vsnprintf per character
 * and wrote invalid JSON for invalid UTF-8.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/version.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Models listed at most (their shapes with them); the rest are left out of the document. */
#define STATS_MODELS_MAX 256

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when it is not one. */
static size_t stats_utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80                    ? 1
                 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    }
    uint32_t cp = len == 1   ? s[0]
                  : len == 2 ? (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f)
                  : len == 3
                      ? (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f)
                      : (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
                            (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
    int overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        return 0;
    return len;
}

/* A JSON string of s (borrowed); invalid UTF-8 bytes become U+FFFD (invariant 2). */
static json_t *stats_str(const char *s)
{
    size_t n = strlen(s);
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n && stats_utf8_len(u + i, n - i) != 0)
        i += stats_utf8_len(u + i, n - i);
    if (i == n)
        return json_stringn(s, n);
    char *clean = malloc(n * 3 + 1); /* each bad byte grows to 3 */
    if (clean == NULL)
        return NULL;
    size_t w = 0;
    for (i = 0; i < n;) {
        size_t len = stats_utf8_len(u + i, n - i);
        if (len == 0) {
            memcpy(clean + w, "\xef\xbf\xbd", 3);
            w += 3;
            i++;
        } else {
            memcpy(clean + w, s + i, len);
            w += len;
            i += len;
        }
    }
    json_t *j = json_stringn(clean, w);
    free(clean);
    return j;
}

static json_t *stats_u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *stats_sig(uint64_t sig)
{
    char hex[19];
    snprintf(hex, sizeof(hex), "0x%016" PRIx64, sig);
    return json_string(hex);
}

static json_t *stats_counters(struct daemon *d)
{
    const sched_counters_t *k = sched_counters(d->sched);
    const daemon_counters_t *dc = &d->counters;
    json_t *rejected = json_object();
    for (int i = 0; i < CODEC_STATUS_COUNT; i++) {
        if (dc->rejected[i] != 0)
            json_object_set_new(rejected, codec_status_reason((codec_status_t)i),
                                stats_u64(dc->rejected[i]));
    }
    return json_pack(
        "{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,"
        "s:o,s:o,s:o,s:o,s:o,s:o}",
        "items_received", stats_u64(k->items_received), "tokens_received",
        stats_u64(k->tokens_received), "items_routed", stats_u64(k->items_routed), "tokens_routed",
        stats_u64(k->tokens_routed), "items_completed", stats_u64(k->items_completed),
        "tokens_completed", stats_u64(k->tokens_completed), "items_returned",
        stats_u64(k->items_returned), "duplicates", stats_u64(dc->duplicates), "rejected", rejected,
        "lanes_opened", stats_u64(k->lanes_opened), "lane_reuses", stats_u64(k->lane_reuses),
        "lanes_quiesced", stats_u64(k->lanes_quiesced), "force_fits", stats_u64(k->force_fits),
        "shape_switches", stats_u64(k->shape_switches), "starvation_preemptions",
        stats_u64(k->starvation_preemptions), "padded_tokens", stats_u64(k->padded_tokens),
        "real_tokens", stats_u64(k->real_tokens), "dead_lettered", stats_u64(dc->dead_lettered),
        "pending_items", stats_u64(store_pending_count(d->store)), "unknown_consumer",
        stats_u64(dc->unknown_consumer), "unknown_batch", stats_u64(dc->unknown_batch),
        "batches_expired_ack_deadline", stats_u64(dc->batches_expired_ack_deadline),
        "consumers_declared_dead", stats_u64(dc->consumers_declared_dead), "publish_failures",
        stats_u64(dc->publish_failures), "disconnects", stats_u64(dc->disconnects),
        "dropped_messages", stats_u64(__atomic_load_n(&dc->dropped_messages, __ATOMIC_RELAXED)),
        "uptime_ms", stats_u64((daemon_now(d) - d->started_ns) / 1000000));
}

/* The scheduling policy's figures, added to the counters: batches and merges, the GPU busy
 * time the workers' completions measured, and the queue wait quantiles (sched_wait_quantile_ns:
 * within 12.5% above the true value). */
static void stats_policy(struct daemon *d, json_t *counters)
{
    const sched_counters_t *k = sched_counters(d->sched);
    json_object_set_new(counters, "batches", stats_u64(k->batches));
    json_object_set_new(counters, "merged_batches", stats_u64(k->merged_batches));
    json_object_set_new(counters, "merged_lanes", stats_u64(k->merged_lanes));
    json_object_set_new(counters, "shapes_reclaimed", stats_u64(k->shapes_reclaimed));
    json_object_set_new(counters, "gpu_busy_ns", stats_u64(k->service_ns));
    json_object_set_new(counters, "gpu_busy_batches", stats_u64(k->service_batches));
    json_object_set_new(counters, "wait_p50_ns", stats_u64(sched_wait_quantile_ns(d->sched, 0.5)));
    json_object_set_new(counters, "wait_p99_ns", stats_u64(sched_wait_quantile_ns(d->sched, 0.99)));
    json_object_set_new(counters, "wait_max_ns", stats_u64(sched_wait_quantile_ns(d->sched, 1.0)));
}

/* What the scheduler keeps of a consumer: its cost (declared or estimated) and its cache. */
static void stats_worker(json_t *o, const consumer_t *c)
{
    const sched_worker_t *w = consumers_worker(c);
    if (w == NULL)
        return;
    sched_worker_info_t wi;
    sched_worker_info(w, &wi);
    json_object_set_new(o, "cost_estimated", json_boolean(wi.estimated));
    json_object_set_new(o, "cost_samples", stats_u64(wi.samples));
    json_object_set_new(o, "cost_fixed_us",
                        wi.known ? json_real(wi.cost.fixed_ns / 1e3) : json_null());
    json_object_set_new(o, "cost_token_ns", wi.known ? json_real(wi.cost.token_ns) : json_null());
    json_object_set_new(o, "cache_shapes", stats_u64(wi.cache_shapes));
    json_object_set_new(o, "warm_shapes", stats_u64(wi.warm_shapes));
}

typedef struct {
    const sched_t *sched;
    json_t *models;    /* the array being written */
    json_t *shapes;    /* shapes[] of the model being written (borrowed from it) */
    const char *model; /* that model, borrowed from the scheduler */
    size_t n_models;
} stats_models_t;

/* sched_shapes_visit goes model by model, so a model's shapes arrive together. */
static void stats_shape(void *ctx, const char *model, uint64_t signature, const lanes_t *lanes,
                        int current)
{
    stats_models_t *m = ctx;
    if (m->model == NULL || strcmp(model, m->model) != 0) {
        if (m->n_models == STATS_MODELS_MAX) {
            m->shapes = NULL;
            return;
        }
        uint64_t cur = 0;
        int has = sched_current_shape(m->sched, model, &cur);
        m->shapes = json_array();
        json_array_append_new(m->models,
                              json_pack("{s:o,s:o,s:o}", "model", stats_str(model), "current_shape",
                                        has ? stats_sig(cur) : json_null(), "shapes", m->shapes));
        m->model = model;
        m->n_models++;
    }
    if (m->shapes == NULL)
        return;
    uint64_t queued_items = 0, pending = 0;
    lanes_lane_t lane;
    for (uint32_t id = 0; lanes_get(lanes, id, &lane) == SCHED_OK; id++) {
        queued_items += lane.queued_items;
        pending += lane.inflight_items;
    }
    json_array_append_new(
        m->shapes,
        json_pack("{s:o,s:b,s:I,s:o,s:o,s:o,s:o,s:o}", "signature", stats_sig(signature), "current",
                  current, "lanes", (json_int_t)lanes_in_use(lanes), "queued_items",
                  stats_u64(queued_items), "queued_tokens", stats_u64(lanes_queued_tokens(lanes)),
                  "pending_items", stats_u64(pending), "lanes_opened",
                  stats_u64(lanes_counters(lanes)->opened), "force_fits",
                  stats_u64(lanes_counters(lanes)->force_fits)));
}

static json_t *stats_consumers(struct daemon *d)
{
    json_t *all = json_array();
    uint64_t now = daemon_now(d);
    for (size_t i = 0; i < consumers_count(d->consumers); i++) {
        consumers_info_t ci;
        consumers_info(consumers_at(d->consumers, i), now, &ci);
        json_array_append_new(
            all, json_pack("{s:s,s:o,s:o,s:I,s:I,s:I,s:b,s:o,s:I,s:I,s:o,s:o}", "id", ci.id, "name",
                           stats_str(ci.name), "model", stats_str(ci.model), "max_batch_size",
                           (json_int_t)ci.contract.max_batch_size, "max_batch_tokens",
                           (json_int_t)ci.contract.max_batch_tokens, "max_input_tokens",
                           (json_int_t)ci.contract.max_input_tokens, "alive", ci.alive, "idle_ms",
                           stats_u64(ci.idle_ns / 1000000), "inflight_batches",
                           (json_int_t)ci.inflight_batches, "pulls", (json_int_t)ci.pulls,
                           "batches", stats_u64(ci.batches), "items", stats_u64(ci.items)));
        stats_worker(json_array_get(all, json_array_size(all) - 1), consumers_at(d->consumers, i));
    }
    return all;
}

/* serving[]: each model of --models, whether this instance serves it now and, with leases, how
 * long its lease still lets it. */
static json_t *stats_serving(struct daemon *d)
{
    json_t *all = json_array();
    for (size_t i = 0; i < serving_count(d); i++) {
        int on = 0;
        uint64_t left = 0;
        const char *model = serving_at(d, i, &on, &left);
        json_t *one = json_pack("{s:o,s:b}", "model", stats_str(model), "serving", on);
        if (d->cfg.leases)
            json_object_set_new(one, "lease_left_ms", stats_u64(left / 1000000));
        json_array_append_new(all, one);
    }
    return all;
}

char *stats_json(struct daemon *d, size_t *out_len)
{
    stats_models_t m = {.sched = d->sched, .models = json_array()};
    if (m.models != NULL)
        sched_shapes_visit(d->sched, stats_shape, &m);
    json_t *counters = stats_counters(d);
    if (counters != NULL)
        stats_policy(d, counters);
    json_t *doc = json_pack("{s:o,s:o,s:o}", "counters", counters, "models", m.models, "consumers",
                            stats_consumers(d));
    if (doc != NULL) { /* who answered: the same as $SRV.INFO says */
        json_object_set_new(doc, "version", json_string(version_string()));
        json_object_set_new(doc, "protocol_version", json_integer(VERSION_PROTOCOL));
        json_object_set_new(doc, "instance_id", json_string(d->instance_id));
        if (serving_count(d) != 0) /* --models, and with leases who holds what */
            json_object_set_new(doc, "serving", stats_serving(d));
    }
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (text != NULL)
        *out_len = strlen(text);
    return text;
}
