/*
 * consumers.c - the registry of consumers: contract, liveness, outstanding pulls, in-flight
 * batches. Owned and touched by the owner thread only.
 *
 * Invariants:
 *   1. A consumer id is 128 random bits (getrandom), so ids cannot be guessed and a consumer
 *      that registers again after being declared dead is a new consumer with a new id.
 *   2. Every in-flight batch belongs to exactly one consumer, found through by_batch; an ack
 *      naming a batch that is not the acking consumer's in-flight batch changes nothing.
 *   3. A dead consumer keeps its id for a while (its late acks are answered as stale), but
 *      holds no pulls and no in-flight batches.
 *
 * Rejected: sequential consumer ids (guessable: any client could ack or steal another's
 * batches by counting).
 */
#include "scheduler/daemon_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <xxhash.h>

static map_key_t consumers_id_key(const char *id)
{
    size_t n = strnlen(id, 32);
    return (map_key_t){XXH64(id, n, 0), XXH64(id, n, 1)};
}

void consumers_init(consumers_t *cs)
{
    memset(cs, 0, sizeof(*cs));
    map_init(&cs->by_id);
    map_init(&cs->by_batch);
}

static void consumer_free(consumer_t *c)
{
    for (size_t i = 0; i < c->n_pulls; i++)
        free(c->pulls[i].reply);
    free(c->pulls);
    free(c->inflight);
    free(c->name);
    free(c->model);
    free(c);
}

void consumers_fini(consumers_t *cs)
{
    for (size_t i = 0; i < cs->n_all; i++)
        consumer_free(cs->all[i]);
    free(cs->all);
    map_fini(&cs->by_id);
    map_fini(&cs->by_batch);
}

daemon_status_t consumers_add(consumers_t *cs, const char *model, const char *name,
                              packer_contract_t contract, uint64_t now_ns, consumer_t **out)
{
    daemon_status_t st = DAEMON_ENOMEM;
    consumer_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return st;
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        st = DAEMON_EINVAL;
        goto out;
    }
    for (int i = 0; i < 16; i++)
        snprintf(c->id + 2 * i, 3, "%02x", rnd[i]);
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
    if (map_put(&cs->by_id, consumers_id_key(c->id), c) != MAP_OK)
        goto out;
    cs->all[cs->n_all++] = c;
    *out = c;
    c = NULL;
    st = DAEMON_OK;
out:
    if (c != NULL)
        consumer_free(c);
    return st;
}

consumer_t *consumers_find(consumers_t *cs, const char *id)
{
    if (strlen(id) != 32)
        return NULL;
    consumer_t *c = map_get(&cs->by_id, consumers_id_key(id));
    return c != NULL && strcmp(c->id, id) == 0 ? c : NULL;
}

consumer_t *consumers_batch_owner(consumers_t *cs, uint64_t batch_id)
{
    return map_get(&cs->by_batch, (map_key_t){batch_id, 0});
}

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

daemon_status_t consumers_inflight_add(consumers_t *cs, consumer_t *c, uint64_t batch_id,
                                       uint64_t deadline_ns, uint32_t n_items)
{
    if (c->n_inflight == c->cap_inflight) {
        size_t cap = c->cap_inflight ? c->cap_inflight * 2 : 4;
        inflight_t *in = realloc(c->inflight, cap * sizeof(*in));
        if (in == NULL)
            return DAEMON_ENOMEM;
        c->inflight = in;
        c->cap_inflight = cap;
    }
    if (map_put(&cs->by_batch, (map_key_t){batch_id, 0}, c) != MAP_OK)
        return DAEMON_ENOMEM;
    c->inflight[c->n_inflight++] = (inflight_t){batch_id, deadline_ns, n_items};
    return DAEMON_OK;
}

inflight_t *consumers_inflight_find(consumer_t *c, uint64_t batch_id)
{
    for (size_t i = 0; i < c->n_inflight; i++) {
        if (c->inflight[i].batch_id == batch_id)
            return &c->inflight[i];
    }
    return NULL;
}

void consumers_inflight_del(consumers_t *cs, consumer_t *c, uint64_t batch_id)
{
    inflight_t *in = consumers_inflight_find(c, batch_id);
    if (in == NULL)
        return;
    *in = c->inflight[--c->n_inflight];
    map_del(&cs->by_batch, (map_key_t){batch_id, 0}, NULL);
}

void consumers_prune(consumers_t *cs, uint64_t now_ns, uint64_t keep_ns)
{
    size_t w = 0;
    for (size_t i = 0; i < cs->n_all; i++) {
        consumer_t *c = cs->all[i];
        if (c->dead && now_ns - c->last_seen_ns > keep_ns) {
            map_del(&cs->by_id, consumers_id_key(c->id), NULL);
            consumer_free(c);
            continue;
        }
        cs->all[w++] = c;
    }
    cs->n_all = w;
}
