/*
 * serving.c - which models this instance serves now: every model, the --models list, or (with
 * leases) the models of the list whose lease it holds, until the deadline of its last
 * acknowledged renewal.
 *
 * Invariants:
 *   1. With leases, a model is served strictly before its deadline, read from the owner's own
 *      clock at each decision: when the lease thread stalls or NATS is gone, serving still ends
 *      on time, before the lease can expire anywhere else (fencing; lease.c invariant 1).
 *   2. Every rule that depends on ownership asks serving_model: intake (refuses with
 *      not_owner), register (silent for a model not served, so the owner answers), dispatch
 *      (no batch of a model not served).
 *   3. Losing a model's lease keeps its consumers and their in-flight batches: their acks still
 *      complete items of this instance's store; only new work stops.
 *
 * Rejected: returning the in-flight batches at once when a lease is lost. The items live in
 * this instance's store, which no other instance reads while it runs; their consumers may still
 * finish and ack them, which is less work redone than a return.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/clock.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

daemon_status_t serving_create(struct daemon *d)
{
    if (d->cfg.models == NULL)
        return d->cfg.leases ? DAEMON_EINVAL : DAEMON_OK;
    char *list = strdup(d->cfg.models);
    if (list == NULL)
        return DAEMON_ENOMEM;
    daemon_status_t st = DAEMON_OK;
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m != NULL && st == DAEMON_OK;
         m = strtok_r(NULL, ",", &save)) {
        serving_model_t *grown = realloc(d->serving, (d->n_serving + 1) * sizeof(*grown));
        if (grown == NULL || (grown[d->n_serving].model = strdup(m)) == NULL) {
            if (grown != NULL)
                d->serving = grown;
            st = DAEMON_ENOMEM;
            break;
        }
        d->serving = grown;
        grown[d->n_serving].until_ns = 0;
        grown[d->n_serving].announced = 0;
        d->n_serving++;
    }
    free(list);
    return st;
}

void serving_destroy(struct daemon *d)
{
    for (size_t i = 0; i < d->n_serving; i++)
        free(d->serving[i].model);
    free(d->serving);
}

static serving_model_t *serving_find(const struct daemon *d, const char *model)
{
    for (size_t i = 0; i < d->n_serving; i++) {
        if (strcmp(d->serving[i].model, model) == 0)
            return &d->serving[i];
    }
    return NULL;
}

int serving_model(const struct daemon *d, const char *model)
{
    if (d->cfg.models == NULL)
        return 1;
    const serving_model_t *s = serving_find(d, model);
    if (s == NULL)
        return 0;
    return !d->cfg.leases || daemon_now(d) < s->until_ns; /* invariant 1 */
}

int serving_configured(const struct daemon *d, const char *model)
{
    return d->cfg.models == NULL || serving_find(d, model) != NULL;
}

/* Logs a change of serving since the last one logged (a lapse is found by the tick). */
static void serving_announce(struct daemon *d, serving_model_t *s)
{
    int is = daemon_now(d) < s->until_ns;
    if (is == s->announced)
        return;
    s->announced = is;
    log_write(is ? LOG_INFO : LOG_WARN, "model %s: %s", s->model,
              is ? "lease held, serving" : "lease not held, not serving");
}

void serving_tick(struct daemon *d)
{
    for (size_t i = 0; d->cfg.leases && i < d->n_serving; i++)
        serving_announce(d, &d->serving[i]);
}

void serving_lease_note(struct daemon *d, const ev_t *ev)
{
    serving_model_t *s = serving_find(d, ev->token);
    uint64_t until = 0;
    if (s == NULL || !d->cfg.leases || ev->len != sizeof(until))
        return;
    memcpy(&until, ev->data, sizeof(until));
    s->until_ns = until;
    serving_announce(d, s);
    int is = daemon_now(d) < until;
    if (is) {
        /* in wall time for the record of who served when (a test reads it at debug level) */
        uint64_t wall = clock_wall_ns() + (until - daemon_now(d));
        log_write(LOG_DEBUG, "lease of model %s: serving until %" PRIu64 " ms (unix)", s->model,
                  wall / 1000000);
    }
}

size_t serving_count(const struct daemon *d)
{
    return d->n_serving;
}

const char *serving_at(const struct daemon *d, size_t i, int *out_serving, uint64_t *out_left_ns)
{
    const serving_model_t *s = &d->serving[i];
    uint64_t now = daemon_now(d);
    *out_serving = !d->cfg.leases || now < s->until_ns;
    *out_left_ns = d->cfg.leases && now < s->until_ns ? s->until_ns - now : 0;
    return s->model;
}
