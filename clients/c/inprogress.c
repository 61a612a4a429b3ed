/*
 * inprogress.c - a consumer's in-progress set: the batch ids its heartbeats name, so that the
 * daemon extends their ack deadlines while the caller works. lc_batch_next adds each delivered
 * batch, lc_ack_send settles it, a (re-)registration or Bye clears it, and lc_inprogress_add /
 * lc_inprogress_remove let any thread manage it by hand.
 *
 * Owns: the set's array and each entry's position bitmap (struct lc_consumer's ip, under mu).
 *
 * Invariants:
 *  1. Each id appears at most once; it names the batch until every position is settled, `all`
 *     is sent, the daemon says unknown_batch, or the caller removes it.
 *  2. An entry added by hand (n_items 0) has no bitmap: positions cannot settle it, only `all`,
 *     unknown_batch or lc_inprogress_remove.
 *  3. The set is read and written under consumer->mu (client_int.h, 3), or after the heartbeat
 *     thread was joined; the static helpers expect the caller to hold mu, the public calls and
 *     lc_inprogress_settle take it.
 *
 * Rejected alternatives:
 *  - A hash map for the set: it holds a handful of ids (one per outstanding batch); a linear scan
 *    is smaller and as fast.
 *  - Counting settled positions without a bitmap: a position acked twice, or named in both ack
 *    and nak, would count twice and drop the id while a position is still unsettled.
 */
#include "clients/c/client_int.h"

#include <stdlib.h>

static lc_inprogress_t *lc_inprogress_find(lc_consumer_t *c, uint64_t batch_id)
{
    for (size_t i = 0; i < c->n_ip; i++)
        if (c->ip[i].batch_id == batch_id)
            return &c->ip[i];
    return NULL;
}

static void lc_inprogress_drop(lc_consumer_t *c, lc_inprogress_t *entry)
{
    free(entry->bits);
    *entry = c->ip[--c->n_ip];
}

void lc_inprogress_clear(lc_consumer_t *c)
{
    while (c->n_ip > 0)
        lc_inprogress_drop(c, &c->ip[c->n_ip - 1]);
}

lc_status_t lc_inprogress_put(lc_consumer_t *c, uint64_t batch_id, uint32_t n_items)
{
    uint8_t *bits = NULL;
    if (lc_inprogress_find(c, batch_id) != NULL)
        return LC_OK;
    if (c->n_ip == c->cap_ip) {
        size_t cap = c->cap_ip == 0 ? 8 : c->cap_ip * 2;
        lc_inprogress_t *ip = realloc(c->ip, cap * sizeof(*ip));
        if (ip == NULL)
            return LC_ENOMEM;
        c->ip = ip;
        c->cap_ip = cap;
    }
    if (n_items > 0 && (bits = calloc((n_items + 7) / 8, 1)) == NULL)
        return LC_ENOMEM;
    c->ip[c->n_ip++] = (lc_inprogress_t){.batch_id = batch_id, .n_items = n_items, .bits = bits};
    return LC_OK;
}

static void lc_inprogress_mark(lc_inprogress_t *entry, const uint32_t *positions, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t p = positions[i];
        if (p < entry->n_items && !(entry->bits[p / 8] & (1u << (p % 8)))) {
            entry->bits[p / 8] |= (uint8_t)(1u << (p % 8));
            entry->settled++;
        }
    }
}

void lc_inprogress_settle(lc_consumer_t *c, const codec_ack_t *ack, bool unknown)
{
    pthread_mutex_lock(&c->mu);
    lc_inprogress_t *entry = lc_inprogress_find(c, ack->batch_id);
    if (entry != NULL) {
        if (ack->all || unknown) {
            lc_inprogress_drop(c, entry);
        } else {
            lc_inprogress_mark(entry, ack->ack, ack->n_ack);
            lc_inprogress_mark(entry, ack->nak, ack->n_nak);
            if (entry->n_items > 0 && entry->settled == entry->n_items)
                lc_inprogress_drop(c, entry);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

lc_status_t lc_inprogress_add(lc_consumer_t *consumer, uint64_t batch_id)
{
    if (consumer == NULL)
        return LC_EINVAL;
    pthread_mutex_lock(&consumer->mu);
    lc_status_t status = lc_inprogress_put(consumer, batch_id, 0);
    pthread_mutex_unlock(&consumer->mu);
    return status;
}

void lc_inprogress_remove(lc_consumer_t *consumer, uint64_t batch_id)
{
    if (consumer == NULL)
        return;
    pthread_mutex_lock(&consumer->mu);
    lc_inprogress_t *entry = lc_inprogress_find(consumer, batch_id);
    if (entry != NULL)
        lc_inprogress_drop(consumer, entry);
    pthread_mutex_unlock(&consumer->mu);
}
