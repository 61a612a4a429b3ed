/*
 * stats.c - the lanes.stats JSON document, written through jansson. The summary and the pages
 * share one writer per object, so the key list stays in one file.
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
 *   4. Bounded: the summary lists at most STATS_SUMMARY_MAX models (each with its current shape
 *      and its STATS_SUMMARY_SHAPES shapes with most queued tokens) and consumers, saying in
 *      "truncated" that it left some out; everything else is read in pages ("detail" in the
 *      request body, subjects.md). A document longer than the server carries (reply_max)
 *      shrinks its lists by half until it fits. Building it walks every shape once, with O(1)
 *      work for each shape not listed.
 *   5. A summary never waits behind a flood: asked for while the owner is in a turn, it is set
 *      aside by daemon_post or daemon_post_msg and answered as soon as the owner finishes the
 *      message it is handling, or the item of a Submit (built then, so it is as fresh as one
 *      queued), not after the turn's backlog.
 *      Asked for between turns, and for every page, it waits in the queue like any message.
 *
 * Rejected: a hand-written writer: it escaped one vsnprintf per character
 * and wrote invalid JSON for invalid UTF-8. Building the document on another thread: it reads
 * the scheduler and the registry, which only the owner may; bounded, it costs the owner
 * well under a millisecond at the limits' defaults. Answering from a copy built earlier: its
 * figures would lag a request sent right after a reply, which clients read as lost counts.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/utf8.h"
#include "common/version.h"

#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The summary (a request without a detail): at most this many models and consumers, and
 * shapes per model, so a flood of names or shapes cannot make it grow (about 300 KB at most
 * with every name at its limit; a reply that would not fit the server shrinks anyway). */
#define STATS_SUMMARY_MAX    64u
#define STATS_SUMMARY_SHAPES 16u
/* Summaries asked for during one turn and answered between its events (invariant 5); past this
 * many, requests wait in the queue like any other message. */
#define STATS_WAITING_MAX 1024u
/* A detail page: at most this many models or consumers, or shapes of one model. */
#define STATS_PAGE_MAX        256u
#define STATS_PAGE_SHAPES_MAX 1024u

/* A JSON string of s (borrowed); invalid UTF-8 bytes become U+FFFD (invariant 2). */
static json_t *stats_str(const char *s)
{
    size_t n = strlen(s);
    if (utf8_valid(s, n))
        return json_stringn(s, n);
    char *clean = malloc(UTF8_ESCAPED_MAX(n));
    if (clean == NULL)
        return NULL;
    size_t w = utf8_escape(s, n, UTF8_REPLACE, clean, UTF8_ESCAPED_MAX(n));
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
    uint64_t queued_items = 0, queued_tokens = 0, flying_items = 0, flying_tokens = 0;
    uint64_t restored_items = 0, restored_tokens = 0;
    sched_queued(d->sched, &queued_items, &queued_tokens);
    sched_inflight(d->sched, &flying_items, &flying_tokens);
    sched_restored(d->sched, &restored_items, &restored_tokens);
    json_t *counters = json_pack(
        "{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,"
        "s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
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
        "expired", stats_u64(dc->expired), "items_queued", stats_u64(queued_items), "tokens_queued",
        stats_u64(queued_tokens), "pending_items", stats_u64(store_pending_count(d->store)),
        "unknown_consumer", stats_u64(dc->unknown_consumer), "unknown_batch",
        stats_u64(dc->unknown_batch), "batches_expired_ack_deadline",
        stats_u64(dc->batches_expired_ack_deadline), "consumers_declared_dead",
        stats_u64(dc->consumers_declared_dead), "publish_failures", stats_u64(dc->publish_failures),
        "commit_failures", stats_u64(dc->commit_failures), "disconnects",
        stats_u64(dc->disconnects), "dropped_messages",
        stats_u64(__atomic_load_n(&dc->dropped_messages, __ATOMIC_RELAXED)), "uptime_ms",
        stats_u64((daemon_now(d) - d->started_ns) / 1000000));
    if (counters != NULL) { /* the balance across a restart (sched.h, sched_restored) */
        json_object_set_new(counters, "items_restored", stats_u64(restored_items));
        json_object_set_new(counters, "tokens_restored", stats_u64(restored_tokens));
        json_object_set_new(counters, "tokens_in_flight", stats_u64(flying_tokens));
        json_object_set_new(counters, "batches_undelivered", stats_u64(dc->batches_undelivered));
        json_object_set_new(counters, "undelivered_unmatched",
                            stats_u64(dc->undelivered_unmatched));
        size_t backlog_submits = 0, backlog_other = 0;
        evqueue_backlog_get(&d->events, &backlog_submits, &backlog_other);
        json_object_set_new(counters, "backlog_submit_bytes", stats_u64(backlog_submits));
        json_object_set_new(counters, "backlog_other_bytes", stats_u64(backlog_other));
    }
    return counters;
}

/* The scheduling policy's figures, added to the counters: batches and merges, the GPU busy
 * time the workers' completions measured, and the queue wait quantiles (sched_wait_quantile_ns:
 * within 12.5% above the true value). */
static void stats_policy(struct daemon *d, json_t *counters)
{
    const sched_counters_t *k = sched_counters(d->sched);
    json_object_set_new(counters, "batches", stats_u64(k->batches));
    json_object_set_new(counters, "merged_batches", stats_u64(k->merged_batches));
    json_object_set_new(counters, "fills_held", stats_u64(k->holds));
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

/* ---- which part of the document a request asks for ------------------------------------------ */

typedef enum { STATS_SUMMARY = 0, STATS_MODELS, STATS_SHAPES, STATS_CONSUMERS } stats_kind_t;

typedef struct {
    stats_kind_t kind;
    char model[LIMITS_MODEL_MAX + 1]; /* STATS_SHAPES: whose shapes */
    size_t offset, limit;
} stats_request_t;

/* The request of a body: empty, or not a JSON object with a known "detail", is the summary. */
static void stats_request_parse(const void *body, size_t len, stats_request_t *rq)
{
    *rq = (stats_request_t){.kind = STATS_SUMMARY};
    json_t *doc = len != 0 ? json_loadb(body, len, 0, NULL) : NULL;
    const char *detail = json_string_value(json_object_get(doc, "detail"));
    const char *model = json_string_value(json_object_get(doc, "model"));
    json_t *offset = json_object_get(doc, "offset"), *limit = json_object_get(doc, "limit");
    if (detail != NULL && strcmp(detail, "models") == 0)
        rq->kind = STATS_MODELS;
    else if (detail != NULL && strcmp(detail, "shapes") == 0 && model != NULL)
        rq->kind = STATS_SHAPES;
    else if (detail != NULL && strcmp(detail, "consumers") == 0)
        rq->kind = STATS_CONSUMERS;
    if (rq->kind == STATS_SHAPES)
        snprintf(rq->model, sizeof(rq->model), "%s", model);
    size_t max = rq->kind == STATS_SHAPES ? STATS_PAGE_SHAPES_MAX : STATS_PAGE_MAX;
    rq->limit = max;
    if (json_is_integer(offset) && json_integer_value(offset) > 0)
        rq->offset = (size_t)json_integer_value(offset);
    if (json_is_integer(limit) && json_integer_value(limit) > 0 &&
        (uint64_t)json_integer_value(limit) < max)
        rq->limit = (size_t)json_integer_value(limit);
    json_decref(doc);
}

/* ---- models and their shapes ----------------------------------------------------------------- */

/* One shape's object; its pending count walks the shape's lanes, so only listed shapes pay. */
static json_t *stats_shape_json(uint64_t signature, const lanes_t *lanes, int current)
{
    uint64_t queued_items = 0, pending = 0;
    lanes_lane_t lane;
    for (uint32_t id = 0; lanes_get(lanes, id, &lane) == SCHED_OK; id++) {
        queued_items += lane.queued_items;
        pending += lane.inflight_items;
    }
    return json_pack("{s:o,s:b,s:I,s:o,s:o,s:o,s:o,s:o}", "signature", stats_sig(signature),
                     "current", current, "lanes", (json_int_t)lanes_in_use(lanes), "queued_items",
                     stats_u64(queued_items), "queued_tokens",
                     stats_u64(lanes_queued_tokens(lanes)), "pending_items", stats_u64(pending),
                     "lanes_opened", stats_u64(lanes_counters(lanes)->opened), "force_fits",
                     stats_u64(lanes_counters(lanes)->force_fits));
}

/* A shape kept for a model's list: its current shape first, then the most queued tokens. */
typedef struct {
    uint64_t signature;
    const lanes_t *lanes;
    int current;
} stats_pick_t;

typedef struct {
    struct daemon *d;
    const stats_request_t *rq;
    size_t models_max, shapes_max; /* per document, per model */
    json_t *models;                /* the array being written */
    const char *model;             /* the model being visited (borrowed from the scheduler) */
    size_t model_index;            /* its position in the scheduler's order */
    int listed;                    /* it is on this page */
    size_t n_listed, n_shapes;     /* models listed; the model's shapes seen */
    uint64_t lanes_total, queued_items_total, queued_tokens_total;
    stats_pick_t picks[STATS_PAGE_SHAPES_MAX];
    size_t n_picks;
    size_t shapes_written; /* shapes of the models written: a shapes page's "returned" (the
                              visit goes on past its model, and n_picks is the last model's) */
    int truncated;
} stats_models_t;

static int stats_pick_before(const stats_pick_t *a, const stats_pick_t *b)
{
    if (a->current != b->current)
        return a->current;
    return lanes_queued_tokens(a->lanes) > lanes_queued_tokens(b->lanes);
}

/* Keeps the best shapes_max shapes of the model (insertion into a short sorted array). */
static void stats_pick(stats_models_t *m, const stats_pick_t *p)
{
    size_t at = m->n_picks;
    while (at > 0 && stats_pick_before(p, &m->picks[at - 1]))
        at--;
    if (at >= m->shapes_max)
        return;
    size_t n = m->n_picks < m->shapes_max ? m->n_picks : m->shapes_max - 1;
    memmove(m->picks + at + 1, m->picks + at, (n - at) * sizeof(*m->picks));
    m->picks[at] = *p;
    m->n_picks = n + 1;
}

/* Writes the model just visited, if it is listed. */
static void stats_model_end(stats_models_t *m)
{
    if (m->model == NULL || !m->listed)
        return;
    uint64_t cur = 0;
    const model_t *rec = models_find(m->d, m->model);
    int has = sched_current_shape(m->d->sched, sched_model_find(m->d->sched, m->model), &cur);
    uint64_t items = rec != NULL ? rec->items : 0, bytes = rec != NULL ? rec->bytes : 0;
    json_t *shapes = json_array();
    for (size_t i = 0; i < m->n_picks; i++)
        json_array_append_new(shapes, stats_shape_json(m->picks[i].signature, m->picks[i].lanes,
                                                       m->picks[i].current));
    m->truncated |= m->n_picks < m->n_shapes;
    m->shapes_written += m->n_picks;
    json_array_append_new(
        m->models,
        json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "model", stats_str(m->model),
                  "current_shape", has ? stats_sig(cur) : json_null(), "shapes", shapes,
                  "shapes_total", stats_u64(m->n_shapes), "lanes_total", stats_u64(m->lanes_total),
                  "queued_items_total", stats_u64(m->queued_items_total), "queued_tokens_total",
                  stats_u64(m->queued_tokens_total), "stored_items", stats_u64(items),
                  "stored_bytes", stats_u64(bytes)));
    m->n_listed++;
}

/* sched_shapes_visit goes model by model, so a model's shapes arrive together. */
static void stats_shape(void *ctx, const char *model, uint64_t signature, const lanes_t *lanes,
                        int current)
{
    stats_models_t *m = ctx;
    if (m->model == NULL || strcmp(model, m->model) != 0) {
        stats_model_end(m);
        m->model_index += m->model != NULL;
        m->model = model;
        m->n_shapes = m->n_picks = 0;
        m->lanes_total = m->queued_items_total = m->queued_tokens_total = 0;
        if (m->rq->kind == STATS_SHAPES)
            m->listed = strcmp(model, m->rq->model) == 0;
        else
            m->listed = m->model_index >= m->rq->offset && m->n_listed < m->models_max;
        m->truncated |= !m->listed && m->rq->kind == STATS_SUMMARY;
    }
    size_t seen = m->n_shapes++;
    if (!m->listed)
        return;
    m->lanes_total += lanes_in_use(lanes);
    m->queued_items_total += lanes_queued_items(lanes);
    m->queued_tokens_total += lanes_queued_tokens(lanes);
    stats_pick_t p = {signature, lanes, current};
    if (m->rq->kind != STATS_SHAPES) {
        stats_pick(m, &p);
    } else if (seen >= m->rq->offset && m->n_picks < m->shapes_max) {
        m->picks[m->n_picks++] = p; /* a page of shapes: in the scheduler's order */
    }
}

/* ---- consumers ------------------------------------------------------------------------------- */

static json_t *stats_consumer_json(const consumers_info_t *ci, const consumer_t *c)
{
    json_t *o = json_pack("{s:s,s:o,s:o,s:I,s:I,s:I,s:b,s:o,s:I,s:I,s:o,s:o}", "id", ci->id, "name",
                          stats_str(ci->name), "model", stats_str(ci->model), "max_batch_size",
                          (json_int_t)ci->contract.max_batch_size, "max_batch_tokens",
                          (json_int_t)ci->contract.max_batch_tokens, "max_input_tokens",
                          (json_int_t)ci->contract.max_input_tokens, "alive", ci->alive, "idle_ms",
                          stats_u64(ci->idle_ns / 1000000), "inflight_batches",
                          (json_int_t)ci->inflight_batches, "pulls", (json_int_t)ci->pulls,
                          "batches", stats_u64(ci->batches), "items", stats_u64(ci->items));
    if (o != NULL)
        stats_worker(o, c);
    return o;
}

/* Consumers from `offset`, at most max: the live ones first, each group in registration order
 * (the summary), or all in registration order (a page). */
static json_t *stats_consumers(struct daemon *d, size_t offset, size_t max, int alive_first,
                               int *truncated)
{
    json_t *all = json_array();
    uint64_t now = daemon_now(d);
    size_t n = consumers_count(d->consumers), listed = 0;
    for (int pass = alive_first ? 0 : 2; pass < (alive_first ? 2 : 3) && listed < max; pass++) {
        for (size_t i = alive_first ? 0 : offset; i < n && listed < max; i++) {
            consumers_info_t ci;
            const consumer_t *c = consumers_at(d->consumers, i);
            consumers_info(c, now, &ci);
            if ((pass == 0 && !ci.alive) || (pass == 1 && ci.alive))
                continue;
            json_array_append_new(all, stats_consumer_json(&ci, c));
            listed++;
        }
        if (!alive_first)
            break;
    }
    *truncated |= listed + (alive_first ? 0 : offset) < n;
    return all;
}

/* serving[]: each model of --models, whether this instance serves it now and, with leases, how
 * long its lease still lets it. */
static json_t *stats_serving(struct daemon *d)
{
    json_t *all = json_array();
    uint64_t now = daemon_now(d);
    for (size_t i = 0; i < d->models.n_configured; i++) {
        const model_t *m = d->models.configured[i];
        int on = models_serving(d, m);
        uint64_t left = d->cfg.leases && now < m->until_ns ? m->until_ns - now : 0;
        json_t *one = json_pack("{s:o,s:b}", "model", stats_str(m->name), "serving", on);
        if (d->cfg.leases)
            json_object_set_new(one, "lease_left_ms", stats_u64(left / 1000000));
        json_array_append_new(all, one);
    }
    return all;
}

/* ---- the document ---------------------------------------------------------------------------- */

static void stats_extras(struct daemon *d, json_t *doc, json_t *counters)
{
    size_t alive = 0, n = consumers_count(d->consumers);
    for (size_t i = 0; i < n; i++)
        alive += !consumers_dead(consumers_at(d->consumers, i));
    json_object_set_new(counters, "dedupe_ids", stats_u64(d->dedupe.len));
    json_object_set_new(counters, "dedupe_bytes", stats_u64(dedupe_bytes(&d->dedupe)));
    json_object_set_new(counters, "dedupe_evictions", stats_u64(d->dedupe.evictions));
    json_object_set_new(doc, "totals",
                        json_pack("{s:o,s:o,s:o,s:o}", "models",
                                  stats_u64(sched_model_count(d->sched)), "shapes",
                                  stats_u64(sched_shape_count(d->sched, NULL)), "consumers",
                                  stats_u64(n), "consumers_alive", stats_u64(alive)));
    const daemon_limits_t *l = &d->cfg.limits;
    static const struct {
        const char *key;
        size_t offset;
        int wide;
    } limits[] = {
        {"name_bytes", offsetof(daemon_limits_t, name_bytes), 0},
        {"items_per_submit", offsetof(daemon_limits_t, items), 0},
        {"reply_to_bytes", offsetof(daemon_limits_t, reply_to_bytes), 0},
        {"consumers", offsetof(daemon_limits_t, consumers), 0},
        {"pulls_per_consumer", offsetof(daemon_limits_t, pulls), 0},
        {"inflight_batches", offsetof(daemon_limits_t, inflight), 0},
        {"batch_size", offsetof(daemon_limits_t, batch_size), 0},
        {"batch_tokens", offsetof(daemon_limits_t, batch_tokens), 0},
        {"models", offsetof(daemon_limits_t, models), 0},
        {"shapes", offsetof(daemon_limits_t, shapes), 0},
        {"shapes_per_model", offsetof(daemon_limits_t, shapes_per_model), 0},
        {"new_shapes_per_submit", offsetof(daemon_limits_t, new_shapes), 0},
        {"queue_items", offsetof(daemon_limits_t, queue_items), 1},
        {"queue_bytes", offsetof(daemon_limits_t, queue_bytes), 1},
        {"dedupe_ids", offsetof(daemon_limits_t, dedupe_ids), 1},
    };
    json_t *lim = json_object();
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        const char *p = (const char *)l + limits[i].offset;
        uint64_t v = 0;
        if (limits[i].wide) {
            memcpy(&v, p, sizeof(uint64_t));
        } else {
            uint32_t v32;
            memcpy(&v32, p, sizeof(v32));
            v = v32;
        }
        json_object_set_new(lim, limits[i].key, stats_u64(v));
    }
    json_object_set_new(doc, "limits", lim);
}

/* The document for rq with lists of at most `max` entries (and shapes_max per model). */
static char *stats_build(struct daemon *d, const stats_request_t *rq, size_t max, size_t shapes_max)
{
    int summary = rq->kind == STATS_SUMMARY, truncated = 0;
    stats_models_t m = {.d = d, .rq = rq, .models_max = max, .shapes_max = shapes_max};
    m.models = json_array();
    if (m.models != NULL && rq->kind != STATS_CONSUMERS) {
        sched_shapes_visit(d->sched, stats_shape, &m);
        stats_model_end(&m);
    }
    json_t *consumers = summary || rq->kind == STATS_CONSUMERS
                            ? stats_consumers(d, summary ? 0 : rq->offset, max, summary, &truncated)
                            : json_array();
    json_t *counters = stats_counters(d);
    if (counters != NULL)
        stats_policy(d, counters);
    json_t *doc = json_pack("{s:o,s:o,s:o}", "counters", counters, "models", m.models, "consumers",
                            consumers);
    if (doc == NULL)
        return NULL;
    stats_extras(d, doc, counters);
    store_usage_t u;
    store_usage_get(d->store, &u);
    json_object_set_new(
        doc, "store",
        json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "segment_files", stats_u64(u.segment_files),
                  "segment_bytes", stats_u64(u.segment_bytes), "journal_files",
                  stats_u64(u.journal_files), "journal_bytes", stats_u64(u.journal_bytes),
                  "journal_restated", stats_u64(u.journal_restated), "written_ahead",
                  stats_u64(u.written_ahead)));
    /* who answered: the same as $SRV.INFO says */
    json_object_set_new(doc, "version", json_string(version_string()));
    json_object_set_new(doc, "protocol_version", json_integer(VERSION_PROTOCOL));
    json_object_set_new(doc, "instance_id", json_string(d->instance_id));
    if (d->models.n_configured != 0) /* --models, and with leases who holds what */
        json_object_set_new(doc, "serving", stats_serving(d));
    if (summary) {
        json_object_set_new(doc, "truncated", json_boolean(truncated || m.truncated));
    } else {
        static const char *const names[] = {"", "models", "shapes", "consumers"};
        size_t total =
            rq->kind == STATS_MODELS ? sched_model_count(d->sched)
            : rq->kind == STATS_SHAPES
                ? (sched_model_find(d->sched, rq->model) != NULL
                       ? sched_shape_count(d->sched, sched_model_find(d->sched, rq->model))
                       : 0)
                : consumers_count(d->consumers);
        size_t returned = rq->kind == STATS_MODELS   ? m.n_listed
                          : rq->kind == STATS_SHAPES ? m.shapes_written
                                                     : json_array_size(consumers);
        size_t next = rq->offset + returned;
        json_object_set_new(doc, "page",
                            json_pack("{s:s,s:o,s:o,s:o,s:o}", "detail", names[rq->kind], "offset",
                                      stats_u64(rq->offset), "returned", stats_u64(returned),
                                      "total", stats_u64(total), "next",
                                      next < total ? stats_u64(next) : json_null()));
        if (rq->kind == STATS_SHAPES)
            json_object_set_new(doc, "model", stats_str(rq->model));
    }
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

char *stats_json(struct daemon *d, const void *body, size_t body_len, size_t *out_len)
{
    stats_request_t rq;
    stats_request_parse(body, body_len, &rq);
    size_t max = rq.kind == STATS_SUMMARY ? STATS_SUMMARY_MAX : rq.limit;
    size_t shapes_max = rq.kind == STATS_SHAPES    ? rq.limit
                        : rq.kind == STATS_SUMMARY ? STATS_SUMMARY_SHAPES
                                                   : STATS_SUMMARY_SHAPES;
    /* invariant 4: a page that would not fit shrinks by half until it does */
    for (;;) {
        char *text = stats_build(d, &rq, max, shapes_max);
        if (text == NULL)
            return NULL;
        size_t len = strlen(text);
        if (len <= d->reply_max || (max <= 1 && shapes_max <= 1)) {
            *out_len = len;
            return text;
        }
        free(text);
        max = max > 1 ? max / 2 : 1;
        shapes_max = shapes_max > 1 ? shapes_max / 2 : 1;
    }
}

/* ---- summaries asked for while the owner is busy -------------------------------------------- */

void stats_waiting_init(stats_waiting_t *w)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->lock, NULL);
}

static void stats_replies_free(char **replies, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(replies[i]);
    free(replies);
}

void stats_waiting_fini(stats_waiting_t *w)
{
    stats_replies_free(w->replies, w->n);
    pthread_mutex_destroy(&w->lock);
}

void stats_waiting_begin(struct daemon *d)
{
    pthread_mutex_lock(&d->waiting.lock);
    d->waiting.busy = 1;
    pthread_mutex_unlock(&d->waiting.lock);
}

int stats_waiting_add(struct daemon *d, const char *reply, const void *body, size_t len)
{
    const char *b = body;
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
        i++;
    if (reply == NULL || (i < len && b[i] == '{')) /* a page waits its turn in the queue */
        return 0;
    stats_waiting_t *w = &d->waiting;
    int taken = 0;
    pthread_mutex_lock(&w->lock);
    if (w->busy && w->n < STATS_WAITING_MAX) {
        if (w->n == w->cap) {
            size_t cap = w->cap ? w->cap * 2 : 16;
            char **r = realloc(w->replies, cap * sizeof(*r));
            if (r != NULL) {
                w->replies = r;
                w->cap = cap;
            }
        }
        if (w->n < w->cap && (w->replies[w->n] = strdup(reply)) != NULL) {
            w->n++;
            taken = 1;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return taken;
}

void stats_waiting_answer(struct daemon *d, int end_of_turn)
{
    stats_waiting_t *w = &d->waiting;
    pthread_mutex_lock(&w->lock);
    char **replies = w->replies;
    size_t n = w->n;
    if (n != 0) {
        w->replies = NULL;
        w->n = w->cap = 0;
    }
    if (end_of_turn)
        w->busy = 0; /* from now on a request is queued: the owner's next turn answers it */
    pthread_mutex_unlock(&w->lock);
    if (n == 0)
        return;
    size_t len = 0;
    uint64_t t0 = daemon_now(d);
    char *text = stats_json(d, NULL, 0, &len);
    for (size_t i = 0; text != NULL && i < n; i++) {
        if (daemon_send(d, replies[i], NULL, text, len) != 0)
            d->counters.publish_failures++;
    }
    d->counters.stats_requests += n;
    /* each is a request of the stats endpoint ($SRV.STATS, service.c invariant 3), the one
     * document's time shared among them */
    uint64_t ns = daemon_now(d) - t0;
    for (size_t i = 0; i < n; i++) {
        ev_t ev = {.kind = EV_STATS};
        service_note(d, &ev, ns / n);
    }
    free(text);
    stats_replies_free(replies, n);
}
