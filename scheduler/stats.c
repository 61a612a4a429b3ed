/*
 * stats.c - the lanes.stats JSON document.
 *
 * Invariants:
 *   1. The keys of DESIGN.md's Stats section are stable: counters.{items_received,
 *      tokens_received, items_routed, tokens_routed, items_completed, tokens_completed,
 *      items_returned, duplicates, rejected, lanes_opened, lane_reuses, lanes_quiesced,
 *      force_fits, shape_switches, padded_tokens, real_tokens, dead_lettered}, models[],
 *      consumers[]. New keys may be added, none renamed.
 *   2. Strings that come from clients (model, consumer name) are escaped.
 *
 * Rejected: a JSON library dependency for one document that only ever writes.
 */
#include "scheduler/daemon_int.h"

#include "codec/codec.h"
#include "common/clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} jbuf_t;

static void jb_add(jbuf_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void jb_add(jbuf_t *j, const char *fmt, ...)
{
    if (j->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            j->oom = 1;
            return;
        }
        if ((size_t)n < j->cap - j->len) {
            j->len += (size_t)n;
            return;
        }
        size_t cap = j->cap * 2 + (size_t)n;
        char *b = realloc(j->buf, cap);
        if (b == NULL) {
            j->oom = 1;
            return;
        }
        j->buf = b;
        j->cap = cap;
    }
}

static void jb_str(jbuf_t *j, const char *s)
{
    jb_add(j, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            jb_add(j, "\\%c", ch);
        else if (ch < 0x20)
            jb_add(j, "\\u%04x", ch);
        else
            jb_add(j, "%c", ch);
    }
    jb_add(j, "\"");
}

typedef struct {
    jbuf_t *j;
    const char *model; /* the model whose shapes are being written */
    int first_shape;
} shape_ctx_t;

static void stats_shape(void *ctx, const char *model, uint64_t signature, const lanes_t *lanes,
                        int current)
{
    shape_ctx_t *sc = ctx;
    if (strcmp(model, sc->model) != 0)
        return;
    uint64_t queued_items = 0, pending = 0;
    lanes_lane_t lane;
    for (uint32_t id = 0; lanes_get(lanes, id, &lane) == SCHED_OK; id++) {
        queued_items += lane.queued_items;
        pending += lane.inflight_items;
    }
    jb_add(sc->j,
           "%s{\"signature\":\"0x%016" PRIx64 "\",\"current\":%s,\"lanes\":%" PRIu32
           ",\"queued_items\":%" PRIu64 ",\"queued_tokens\":%" PRIu64 ",\"pending_items\":%" PRIu64
           ",\"lanes_opened\":%" PRIu64 ",\"force_fits\":%" PRIu64 "}",
           sc->first_shape ? "" : ",", signature, current ? "true" : "false", lanes_in_use(lanes),
           queued_items, lanes_queued_tokens(lanes), pending, lanes_counters(lanes)->opened,
           lanes_counters(lanes)->force_fits);
    sc->first_shape = 0;
}

typedef struct {
    const char *names[256];
    size_t n;
} models_ctx_t;

static void stats_collect_model(void *ctx, const char *model, uint64_t signature,
                                const lanes_t *lanes, int current)
{
    (void)signature;
    (void)lanes;
    (void)current;
    models_ctx_t *m = ctx;
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->names[i], model) == 0)
            return;
    }
    if (m->n < sizeof(m->names) / sizeof(m->names[0]))
        m->names[m->n++] = model;
}

char *stats_json(daemon_t *d, size_t *out_len)
{
    jbuf_t j = {.cap = 4096};
    if ((j.buf = malloc(j.cap)) == NULL)
        return NULL;
    const sched_counters_t *k = sched_counters(d->sched);
    const daemon_counters_t *dc = &d->counters;
    jb_add(&j,
           "{\"counters\":{\"items_received\":%" PRIu64 ",\"tokens_received\":%" PRIu64
           ",\"items_routed\":%" PRIu64 ",\"tokens_routed\":%" PRIu64
           ",\"items_completed\":%" PRIu64 ",\"tokens_completed\":%" PRIu64
           ",\"items_returned\":%" PRIu64 ",\"duplicates\":%" PRIu64,
           k->items_received, k->tokens_received, k->items_routed, k->tokens_routed,
           k->items_completed, k->tokens_completed, k->items_returned, dc->duplicates);
    jb_add(&j, ",\"rejected\":{");
    int first = 1;
    for (int i = 1; i < 32; i++) {
        if (dc->rejected[i] == 0)
            continue;
        const char *reason = i == DAEMON_REJECT_STORE_FULL    ? "store_full"
                             : i == DAEMON_REJECT_STORE_ERROR ? "store_error"
                                                              : codec_status_reason(i);
        jb_add(&j, "%s\"%s\":%" PRIu64, first ? "" : ",", reason, dc->rejected[i]);
        first = 0;
    }
    jb_add(&j,
           "},\"lanes_opened\":%" PRIu64 ",\"lane_reuses\":%" PRIu64 ",\"lanes_quiesced\":%" PRIu64
           ",\"force_fits\":%" PRIu64 ",\"shape_switches\":%" PRIu64
           ",\"starvation_preemptions\":%" PRIu64 ",\"padded_tokens\":%" PRIu64
           ",\"real_tokens\":%" PRIu64 ",\"dead_lettered\":%" PRIu64 ",\"pending_items\":%" PRIu64
           ",\"unknown_consumer\":%" PRIu64 ",\"unknown_batch\":%" PRIu64
           ",\"batches_expired_ack_deadline\":%" PRIu64 ",\"consumers_declared_dead\":%" PRIu64
           ",\"publish_failures\":%" PRIu64 ",\"disconnects\":%" PRIu64
           ",\"dropped_messages\":%" PRIu64 ",\"uptime_ms\":%" PRIu64 "}",
           k->lanes_opened, k->lane_reuses, k->lanes_quiesced, k->force_fits, k->shape_switches,
           k->starvation_preemptions, k->padded_tokens, k->real_tokens, dc->dead_lettered,
           store_pending_count(d->store), dc->unknown_consumer, dc->unknown_batch,
           dc->batches_expired_ack_deadline, dc->consumers_declared_dead, dc->publish_failures,
           dc->disconnects, __atomic_load_n(&dc->dropped_messages, __ATOMIC_RELAXED),
           (clock_mono_ns() - d->started_ns) / 1000000);

    models_ctx_t mc = {0};
    sched_shapes_visit(d->sched, stats_collect_model, &mc);
    jb_add(&j, ",\"models\":[");
    for (size_t i = 0; i < mc.n; i++) {
        uint64_t cur = 0;
        int has = sched_current_shape(d->sched, mc.names[i], &cur);
        jb_add(&j, "%s{\"model\":", i ? "," : "");
        jb_str(&j, mc.names[i]);
        if (has)
            jb_add(&j, ",\"current_shape\":\"0x%016" PRIx64 "\"", cur);
        else
            jb_add(&j, ",\"current_shape\":null");
        jb_add(&j, ",\"shapes\":[");
        shape_ctx_t sc = {&j, mc.names[i], 1};
        sched_shapes_visit(d->sched, stats_shape, &sc);
        jb_add(&j, "]}");
    }
    jb_add(&j, "],\"consumers\":[");
    uint64_t now = clock_mono_ns();
    for (size_t i = 0; i < d->consumers.n_all; i++) {
        const consumer_t *c = d->consumers.all[i];
        jb_add(&j, "%s{\"id\":\"%s\",\"name\":", i ? "," : "", c->id);
        jb_str(&j, c->name);
        jb_add(&j, ",\"model\":");
        jb_str(&j, c->model);
        jb_add(&j,
               ",\"max_batch_size\":%" PRIu32 ",\"max_batch_tokens\":%" PRIu32
               ",\"max_input_tokens\":%" PRIu32 ",\"alive\":%s,\"idle_ms\":%" PRIu64
               ",\"inflight_batches\":%zu,\"pulls\":%zu,\"batches\":%" PRIu64 ",\"items\":%" PRIu64
               "}",
               c->contract.max_batch_size, c->contract.max_batch_tokens,
               c->contract.max_input_tokens, c->dead ? "false" : "true",
               (now - c->last_seen_ns) / 1000000, c->n_inflight, c->n_pulls, c->batches, c->items);
    }
    jb_add(&j, "]}");
    if (j.oom) {
        free(j.buf);
        return NULL;
    }
    *out_len = j.len;
    return j.buf;
}
