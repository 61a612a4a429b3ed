/*
 * consumers.c - the registry of consumers: contract, liveness, outstanding pulls (consumers.h).
 * Owned and touched by the owner thread only.
 *
 * Invariants (consumers_check runs them in debug builds):
 *   1. A consumer has two values of 128 random bits each (getrandom): its public id, which
 *      stats, metrics and log lines show, and its secret, the token of its pull, ack, hb and
 *      bye subjects, which only its Registered reply and the reply subjects of the Batches sent
 *      to its own inbox carry (undelivered.c). Messages are found by the
 *      secret alone, so what any other account can read (the public id, a batch id) gives no
 *      authority over the consumer, and one that registers again is a new consumer.
 *   2. The batches a consumer holds are its worker's in the core (the batch's one record names
 *      its holder); an ack naming a batch whose holder is not the acking consumer's worker
 *      changes nothing.
 *   3. A dead consumer keeps its id for a while (its late acks are answered as stale), but
 *      holds no pulls, no in-flight batches and no worker in the scheduler.
 *   4. Liveness is decided here and nowhere else: every message refreshes it (consumers_touch),
 *      silence past dead_after kills (consumers_expire), a stalled owner restarts it and moves
 *      its batches' ack deadlines by the stall. A consumer whose inbox the server found without
 *      a subscriber is served nothing until its next message (consumers_inbox_silent).
 *
 * Rejected: sequential consumer ids (guessable: any client could ack or steal another's
 * batches by counting), and one id for both naming and authority (a bearer token shown in
 * stats and logs: any account that could read them could ack, pull or bye for the consumer).
 */
#include "scheduler/daemon/consumers_int.h"

#include "common/invariant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <xxhash.h>

static map_key_t consumers_key(const char *secret)
{
    size_t n = strnlen(secret, CONSUMERS_ID_LEN);
    return (map_key_t){XXH64(secret, n, 0), XXH64(secret, n, 1)};
}

/* 128 random bits as 32 lowercase hex characters into out (33 bytes). 0, or -1. */
static int consumers_random_hex(char *out)
{
    uint8_t rnd[CONSUMERS_ID_LEN / 2];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -1;
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    return 0;
}

daemon_status_t consumers_create(consumers_t **out)
{
    consumers_t *cs = calloc(1, sizeof(*cs));
    if (cs == NULL)
        return DAEMON_ENOMEM;
    map_init(&cs->by_secret);
    *out = cs;
    return DAEMON_OK;
}

static void consumer_free(consumer_t *c)
{
    for (size_t i = 0; i < c->n_pulls; i++)
        free(c->pulls[i].reply);
    free(c->pulls);
    free(c->name);
    free(c->model);
    free(c);
}

void consumers_destroy(consumers_t *cs)
{
    if (cs == NULL)
        return;
    for (size_t i = 0; i < cs->n_all; i++)
        consumer_free(cs->all[i]);
    free(cs->all);
    map_fini(&cs->by_secret);
    free(cs);
}

daemon_status_t consumers_add(consumers_t *cs, const char *model, const char *name,
                              packer_contract_t contract, uint64_t now_ns, consumer_t **out)
{
    daemon_status_t st = DAEMON_ENOMEM;
    consumer_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return st;
    if (consumers_random_hex(c->id) != 0 || consumers_random_hex(c->secret) != 0 ||
        strcmp(c->id, c->secret) == 0) { /* invariant 1 */
        st = DAEMON_EINVAL;
        goto out;
    }
    if ((c->model = strdup(model)) == NULL || (c->name = strdup(name ? name : "")) == NULL)
        goto out;
    c->contract = contract;
    c->last_seen_ns = now_ns;
    if (cs->n_all == cs->cap_all) {
        size_t cap = cs->cap_all ? cs->cap_all * 2 : 8;
        consumer_t **all = realloc(cs->all, cap * sizeof(*all));
        if (all == NULL)
            goto out;
        cs->all = all;
        cs->cap_all = cap;
    }
    if (map_put(&cs->by_secret, consumers_key(c->secret), c) != MAP_OK)
        goto out;
    cs->all[cs->n_all++] = c;
    *out = c;
    c = NULL;
    st = DAEMON_OK;
out:
    if (c != NULL)
        consumer_free(c);
    INVARIANT_CHECK(consumers_check(cs));
    return st;
}

consumer_t *consumers_find(consumers_t *cs, const char *secret)
{
    if (strlen(secret) != CONSUMERS_ID_LEN)
        return NULL;
    consumer_t *c = map_get(&cs->by_secret, consumers_key(secret));
    return c != NULL && strcmp(c->secret, secret) == 0 ? c : NULL;
}

consumer_t *consumers_touch(consumers_t *cs, const char *secret, uint64_t now_ns)
{
    consumer_t *c = consumers_find(cs, secret);
    if (c == NULL || c->dead)
        return NULL;
    c->last_seen_ns = now_ns;
    c->silent_inbox = 0;
    return c;
}

size_t consumers_count(const consumers_t *cs)
{
    return cs->n_all;
}

consumer_t *consumers_at(const consumers_t *cs, size_t i)
{
    return cs->all[i];
}

const char *consumers_id(const consumer_t *c)
{
    return c->id;
}

const char *consumers_secret(const consumer_t *c)
{
    return c->secret;
}

const char *consumers_name(const consumer_t *c)
{
    return c->name;
}

const char *consumers_model(const consumer_t *c)
{
    return c->model;
}

const packer_contract_t *consumers_contract(const consumer_t *c)
{
    return &c->contract;
}

int consumers_dead(const consumer_t *c)
{
    return c->dead;
}

void consumers_kill(consumer_t *c)
{
    c->dead = 1;
}

void consumers_dispatched_note(consumer_t *c, uint64_t items)
{
    c->batches++;
    c->items += items;
}

int consumers_shape_note(consumer_t *c, uint64_t signature)
{
    int hit = c->batches != 0 && c->last_signature == signature;
    c->last_signature = signature;
    return hit;
}

void consumers_worker_set(consumer_t *c, sched_worker_t *worker)
{
    c->worker = worker;
}

sched_worker_t *consumers_worker(const consumer_t *c)
{
    return c->worker;
}

void consumers_model_set(consumer_t *c, struct model *model)
{
    c->model_rec = model;
}

struct model *consumers_model_rec(const consumer_t *c)
{
    return c->model_rec;
}

size_t consumers_inflight_count(const consumer_t *c)
{
    return sched_worker_batches(c->worker);
}

/* ---- pulls -------------------------------------------------------------------------------- */

daemon_status_t consumers_pull_add(consumer_t *c, const char *reply, uint32_t credits,
                                   uint64_t expires_ns)
{
    if (c->n_pulls == c->cap_pulls) {
        size_t cap = c->cap_pulls ? c->cap_pulls * 2 : 4;
        pull_t *pulls = realloc(c->pulls, cap * sizeof(*pulls));
        if (pulls == NULL)
            return DAEMON_ENOMEM;
        c->pulls = pulls;
        c->cap_pulls = cap;
    }
    char *r = strdup(reply);
    if (r == NULL)
        return DAEMON_ENOMEM;
    c->pulls[c->n_pulls++] = (pull_t){r, credits, expires_ns};
    return DAEMON_OK;
}

const char *consumers_pull_reply(const consumer_t *c)
{
    return c->n_pulls != 0 ? c->pulls[0].reply : NULL;
}

void consumers_pull_del(consumer_t *c, size_t index)
{
    if (index >= c->n_pulls)
        return;
    free(c->pulls[index].reply);
    memmove(c->pulls + index, c->pulls + index + 1, (c->n_pulls - index - 1) * sizeof(*c->pulls));
    c->n_pulls--;
}

void consumers_pull_pop(consumer_t *c)
{
    consumers_pull_del(c, 0);
}

void consumers_pull_use(consumer_t *c)
{
    if (c->n_pulls != 0 && --c->pulls[0].credits == 0)
        consumers_pull_pop(c);
}

size_t consumers_pull_count(const consumer_t *c)
{
    return c->n_pulls;
}

void consumers_inbox_silent(consumer_t *c)
{
    c->silent_inbox = 1;
}

int consumers_inbox_is_silent(const consumer_t *c)
{
    return c->silent_inbox;
}

/* ---- liveness and deadlines --------------------------------------------------------------- */

void consumers_expire(consumers_t *cs, uint64_t now_ns, uint64_t dead_after_ns,
                      const consumers_timers_t *t)
{
    for (size_t i = 0; i < cs->n_all; i++) {
        consumer_t *c = cs->all[i];
        if (c->dead)
            continue;
        if (now_ns - c->last_seen_ns > dead_after_ns) {
            t->dead(t->ctx, c, now_ns - c->last_seen_ns);
            c->dead = 1;
            continue;
        }
        /* each expired batch leaves the worker's list when returned; the count bounds the loop
         * should a return fail and leave one there */
        uint64_t batch_id;
        for (size_t k = sched_worker_batches(c->worker);
             k-- > 0 && sched_worker_batch_expired(c->worker, now_ns, &batch_id);)
            t->ack_expired(t->ctx, c, batch_id);
        for (size_t j = 0; j < c->n_pulls;) {
            if (c->pulls[j].expires_ns <= now_ns) {
                t->pull_expired(t->ctx, c, c->pulls[j].reply);
                consumers_pull_del(c, j);
            } else {
                j++;
            }
        }
    }
    INVARIANT_CHECK(consumers_check(cs));
}

void consumers_stall_reset(consumers_t *cs, uint64_t now_ns)
{
    for (size_t i = 0; i < cs->n_all; i++) {
        if (!cs->all[i]->dead)
            cs->all[i]->last_seen_ns = now_ns;
    }
}

void consumers_deadlines_shift(consumers_t *cs, uint64_t by_ns)
{
    for (size_t i = 0; i < cs->n_all; i++) {
        if (!cs->all[i]->dead)
            sched_worker_deadlines_shift(cs->all[i]->worker, by_ns);
    }
}

uint64_t consumers_next_deadline(const consumers_t *cs, uint64_t dead_after_ns, uint64_t bound)
{
    uint64_t wake = bound;
    for (size_t i = 0; i < cs->n_all; i++) {
        const consumer_t *c = cs->all[i];
        if (c->dead)
            continue;
        uint64_t dead_at = c->last_seen_ns + dead_after_ns + 1;
        wake = dead_at < wake ? dead_at : wake;
        wake = sched_worker_deadline_next(c->worker, wake);
        for (size_t j = 0; j < c->n_pulls; j++)
            wake = c->pulls[j].expires_ns < wake ? c->pulls[j].expires_ns : wake;
    }
    return wake;
}

void consumers_prune(consumers_t *cs, uint64_t now_ns, uint64_t keep_ns)
{
    size_t w = 0;
    for (size_t i = 0; i < cs->n_all; i++) {
        consumer_t *c = cs->all[i];
        if (c->dead && now_ns - c->last_seen_ns > keep_ns) {
            map_del(&cs->by_secret, consumers_key(c->secret), NULL);
            consumer_free(c);
            continue;
        }
        cs->all[w++] = c;
    }
    cs->n_all = w;
}

int consumers_forget_dead(consumers_t *cs)
{
    size_t oldest = SIZE_MAX;
    for (size_t i = 0; i < cs->n_all; i++) {
        const consumer_t *c = cs->all[i];
        if (c->dead && (oldest == SIZE_MAX || c->last_seen_ns < cs->all[oldest]->last_seen_ns))
            oldest = i;
    }
    if (oldest == SIZE_MAX)
        return 0;
    consumer_t *c = cs->all[oldest];
    map_del(&cs->by_secret, consumers_key(c->secret), NULL);
    consumer_free(c);
    memmove(cs->all + oldest, cs->all + oldest + 1, (cs->n_all - oldest - 1) * sizeof(*cs->all));
    cs->n_all--;
    return 1;
}

void consumers_info(const consumer_t *c, uint64_t now_ns, consumers_info_t *out)
{
    *out = (consumers_info_t){
        .id = c->id,
        .name = c->name,
        .model = c->model,
        .contract = c->contract,
        .alive = !c->dead,
        .idle_ns = now_ns - c->last_seen_ns,
        .inflight_batches = sched_worker_batches(c->worker),
        .pulls = c->n_pulls,
        .batches = c->batches,
        .items = c->items,
    };
}

int consumers_check(const consumers_t *cs)
{
    for (size_t i = 0; i < cs->n_all; i++) {
        const consumer_t *c = cs->all[i];
        INVARIANT_HOLDS(!c->dead || (c->n_pulls == 0 && c->worker == NULL && c->model_rec == NULL),
                        "dead consumer %s holds %zu pulls, a worker or a model", c->id, c->n_pulls);
        INVARIANT_HOLDS(map_get(&cs->by_secret, consumers_key(c->secret)) == c,
                        "consumer %s is not found by its id", c->id);
    }
    return 1;
}
