/*
 * models.c - the daemon's one record of each model (model_t): its handle in the core, what it
 * holds against the queue limits that refuse a submit as queue_full (JetStream's max_msgs /
 * max_bytes), its Prometheus series, and whether this instance serves it (every model, the
 * --models list, or with leases the models of the list whose lease it holds until the deadline
 * of its last acknowledged renewal).
 *
 * Invariants:
 *   1. One record per name, found by one hash lookup (the name's two XXH64 as the key, names
 *      under one key chained and compared), resolved once per message: a Submit, a Register
 *      and every batch of a consumer reach it without another lookup.
 *   2. items and bytes = the sums over the model's items accepted (or recovered at start) and
 *      not yet completed; returns, naks and redeliveries change nothing (the item is still
 *      stored). Completion is counted where every batch is settled (inflight.c).
 *   3. A record lives while it holds items, has live consumers, is in --models or has a
 *      Prometheus series of its own (those are at most METRICS_MODELS_MAX); the tick frees the
 *      others, so models that come and go cost nothing once gone. While it lives it holds a
 *      reference to its core model, so its handle stays valid.
 *   4. With leases, a model is served strictly before its deadline, read from the owner's own
 *      clock at each decision: when the lease thread stalls or NATS is gone, serving still ends
 *      on time, before the lease can expire anywhere else (fencing; lease.c invariant 1). Every
 *      rule that depends on ownership asks models_serving: intake (refuses with not_owner),
 *      register (silent for a model not served, so the owner answers), dispatch (no batch of a
 *      model not served). Losing a lease keeps the model's consumers and their batches in
 *      flight: their acks still complete items of this instance's store; only new work stops.
 *      Once another instance holds the lease (not while a renewal only failed), their pulls
 *      that expire go unanswered and their Ack{} probe ends them, which sends them to the
 *      holder (turn.c, requests.c).
 *   5. --limit-models bounds the models that hold items with no live consumer ("strangers",
 *      counted in d->models.strangers at every change of items or consumers): those are what
 *      a client can make without any worker's say. A model with a live consumer is never new
 *      (its Submits are never too_many_models), and a Register is never refused for the table
 *      (--limit-consumers bounds those models). A stranger stops being one when its items are
 *      completed or expire past its age limit (dispatch_expire), so no client holds a slot for
 *      longer than the age limit.
 *   6. input_max is the longest Register.max_input_tokens among the model's live consumers
 *      (UINT32_MAX when one of them declared none), recomputed at each register and end.
 *
 * Rejected: four registries keyed three ways (the queue totals and the series under XXH64, the
 * core's linear scan, the --models list's scan), looked up about seven times per item; counting
 * only queued items against the limits (in-flight ones are stored too, and a consumer that
 * never acks would let the store grow without bound); asking the store for sizes at completion
 * (a tombstone reads nothing back); returning in-flight batches at once when a lease is lost
 * (the items live in this instance's store, which no other instance reads while it runs).
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/clock.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static map_key_t models_key(const char *name)
{
    size_t n = strlen(name);
    return (map_key_t){XXH64(name, n, 0), XXH64(name, n, 1)};
}

model_t *models_find(const struct daemon *d, const char *name)
{
    for (model_t *m = map_get(&d->models.by_name, models_key(name)); m != NULL;
         m = m->next_same_key) {
        if (strcmp(m->name, name) == 0)
            return m;
    }
    return NULL;
}

/* Its queue age limit: its queue_age_models entry, else limits.queue_age_ms. */
static uint64_t models_age_ns(const struct daemon *d, const char *name)
{
    uint64_t ms = d->cfg.limits.queue_age_ms;
    size_t n = strlen(name);
    for (const char *p = d->cfg.queue_age_models; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ','), *eq = strchr(p, '=');
        if (end == NULL)
            end = p + strlen(p);
        if (eq != NULL && eq < end && (size_t)(eq - p) == n && strncmp(p, name, n) == 0)
            ms = strtoull(eq + 1, NULL, 10);
        p = *end == ',' ? end + 1 : end;
    }
    return ms * 1000000ull;
}

static int models_stranger(const model_t *m)
{
    return m->items != 0 && m->consumers == 0;
}

static void models_free(struct daemon *d, model_t *m)
{
    sched_model_close(d->sched, m->core);
    free(m->name);
    free(m);
}

model_t *models_get(struct daemon *d, const char *name)
{
    model_t *m = models_find(d, name);
    if (m != NULL)
        return m;
    models_t *t = &d->models;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        model_t **all = realloc(t->all, cap * sizeof(*all));
        if (all == NULL)
            return NULL;
        t->all = all;
        t->cap = cap;
    }
    if (map_reserve(&t->by_name, 1) != MAP_OK || (m = calloc(1, sizeof(*m))) == NULL)
        return NULL;
    m->age_ns = models_age_ns(d, name);
    if ((m->name = strdup(name)) == NULL ||
        sched_model_open(d->sched, name, &m->core) != SCHED_OK) {
        free(m->name);
        free(m);
        return NULL;
    }
    map_key_t key = models_key(name);
    void *head = NULL;
    map_del(&t->by_name, key, &head);
    m->next_same_key = head;
    map_put(&t->by_name, key, m);
    t->all[t->n++] = m;
    return m;
}

/* Takes m off its key and out of the table (invariant 3); its place in all[] is the caller's. */
static void models_unlink(struct daemon *d, model_t *m)
{
    map_key_t key = models_key(m->name);
    model_t *head = map_get(&d->models.by_name, key);
    if (head == m) {
        map_del(&d->models.by_name, key, NULL);
        if (m->next_same_key != NULL)
            map_put(&d->models.by_name, key, m->next_same_key);
        return;
    }
    while (head != NULL && head->next_same_key != m)
        head = head->next_same_key;
    if (head != NULL)
        head->next_same_key = m->next_same_key;
}

daemon_status_t models_init(struct daemon *d)
{
    map_init(&d->models.by_name);
    if (d->cfg.models == NULL)
        return d->cfg.leases ? DAEMON_EINVAL : DAEMON_OK;
    char *list = strdup(d->cfg.models);
    if (list == NULL)
        return DAEMON_ENOMEM;
    daemon_status_t st = DAEMON_OK;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name != NULL && st == DAEMON_OK;
         name = strtok_r(NULL, ",", &save)) {
        model_t **grown =
            realloc(d->models.configured, (d->models.n_configured + 1) * sizeof(*grown));
        model_t *m = grown != NULL ? models_get(d, name) : NULL;
        if (grown != NULL)
            d->models.configured = grown;
        if (m == NULL) {
            st = DAEMON_ENOMEM;
            break;
        }
        if (!m->configured)
            d->models.configured[d->models.n_configured++] = m;
        m->configured = 1;
    }
    free(list);
    return st;
}

void models_fini(struct daemon *d)
{
    for (size_t i = 0; i < d->models.n; i++)
        models_free(d, d->models.all[i]);
    free(d->models.all);
    free(d->models.configured);
    map_fini(&d->models.by_name);
}

void models_tick(struct daemon *d)
{
    models_t *t = &d->models;
    size_t w = 0;
    for (size_t i = 0; i < t->n; i++) {
        model_t *m = t->all[i];
        if (m->items != 0 || m->consumers != 0 || m->configured || m->series == &m->own) {
            t->all[w++] = m;
            continue;
        }
        models_unlink(d, m); /* invariant 3 */
        models_free(d, m);
    }
    t->n = w;
}

codec_status_t models_room(const struct daemon *d, const model_t *m, uint64_t bytes)
{
    uint64_t items = m != NULL ? m->items : 0, held = m != NULL ? m->bytes : 0;
    const daemon_limits_t *l = &d->cfg.limits;
    if ((l->queue_items != 0 && items + 1 > l->queue_items) ||
        (l->queue_bytes != 0 && held + bytes > l->queue_bytes))
        return CODEC_EQUEUE_FULL;
    return CODEC_OK;
}

void models_stored(struct daemon *d, model_t *m, uint64_t bytes)
{
    int was = models_stranger(m);
    m->items++;
    m->bytes += bytes;
    d->models.strangers += (size_t)models_stranger(m) - (size_t)was; /* invariant 5 */
}

void models_completed(struct daemon *d, model_t *m, uint64_t items, uint64_t bytes)
{
    int was = models_stranger(m);
    m->items -= items <= m->items ? items : m->items;
    m->bytes -= bytes <= m->bytes ? bytes : m->bytes;
    d->models.strangers += (size_t)models_stranger(m) - (size_t)was;
}

void models_consumer_note(struct daemon *d, model_t *m, int delta)
{
    int was = models_stranger(m);
    m->consumers = delta > 0 ? m->consumers + 1 : m->consumers != 0 ? m->consumers - 1 : 0;
    d->models.strangers += (size_t)models_stranger(m) - (size_t)was;
    m->input_max = 0; /* invariant 6 */
    for (size_t i = 0; i < consumers_count(d->consumers); i++) {
        consumer_t *c = consumers_at(d->consumers, i);
        if (consumers_dead(c) || consumers_model_rec(c) != m)
            continue;
        uint32_t in = consumers_contract(c)->max_input_tokens;
        in = in != 0 ? in : UINT32_MAX;
        m->input_max = in > m->input_max ? in : m->input_max;
    }
}

int models_allowed(const struct daemon *d, const char *name)
{
    const char *p = d->cfg.allow_models;
    if (p == NULL)
        return 1;
    size_t n = strlen(name);
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len != 0 && p[len - 1] == '*' ? n >= len - 1 && strncmp(p, name, len - 1) == 0
                                          : len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (end != NULL);
    }
    return 0;
}

codec_status_t models_admit(const struct daemon *d, const model_t *m)
{
    if (m != NULL && (m->items != 0 || m->consumers != 0))
        return CODEC_OK; /* invariant 5: not new */
    return d->models.strangers >= d->cfg.limits.models ? CODEC_ETOO_MANY_MODELS : CODEC_OK;
}

int models_serving(const struct daemon *d, const model_t *m)
{
    if (d->cfg.models == NULL)
        return 1;
    if (m == NULL || !m->configured)
        return 0;
    return !d->cfg.leases || daemon_now(d) < m->until_ns; /* invariant 4 */
}

/* Logs a change of serving since the last one logged (a lapse is found by the tick). */
static void models_announce(struct daemon *d, model_t *m)
{
    int is = daemon_now(d) < m->until_ns;
    if (is == m->announced)
        return;
    m->announced = is;
    log_write(is ? LOG_INFO : LOG_WARN, "model %s: %s", m->name,
              is ? "lease held, serving" : "lease not held, not serving");
}

void models_serving_tick(struct daemon *d)
{
    for (size_t i = 0; d->cfg.leases && i < d->models.n_configured; i++)
        models_announce(d, d->models.configured[i]);
}

int models_held_elsewhere(const struct daemon *d, const model_t *m)
{
    return m != NULL && m->elsewhere && !models_serving(d, m);
}

void models_lease_note(struct daemon *d, const ev_t *ev)
{
    model_t *m = models_find(d, ev->token);
    daemon_lease_note_t note;
    if (m == NULL || !m->configured || !d->cfg.leases || ev->len != sizeof(note))
        return;
    memcpy(&note, ev->data, sizeof(note));
    m->until_ns = note.until_ns;
    m->elsewhere = note.elsewhere != 0;
    models_announce(d, m);
    uint64_t now = daemon_now(d);
    if (now < m->until_ns) {
        /* in wall time for the record of who served when (a test reads it at debug level) */
        uint64_t wall = clock_wall_ns() + (m->until_ns - now);
        log_write(LOG_DEBUG, "lease of model %s: serving until %" PRIu64 " ms (unix)", m->name,
                  wall / 1000000);
    }
}
