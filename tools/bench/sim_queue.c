/*
 * sim_queue.c - the baseline policies' queues in sim mode (FIFO, POW2, RANGE64; sim.c describes
 * the policies): a queue per model (FIFO) or per length bucket of a shape, which queue serves
 * next, and the batch packed from its head.
 *
 * Invariants:
 *   1. A queue's items are in arrival order (idx[head .. len)); its queued_tokens and its
 *      group's queued_items / queued_tokens always equal the sums over those items.
 *   2. A queue is in use while it holds items or received one within LANES_QUIESCE_IDLE_NS (the
 *      lanes' quiesce idle time), so "queues in use" and "new queues per second" compare with
 *      lanes; an arrival into a queue not in use counts as a queue opened, otherwise as a reuse.
 *   3. Choosing the next queue: FIFO serves the model's one queue; POW2 and RANGE64 stay on the
 *      model's current shape while it has queued items, else take the shape with the most queued
 *      tokens (the scheduler's sticky-shape rule), then its bucket with the most queued tokens.
 *   4. With a queue delay (sim_config_t.bucket_delay_ns: Triton's max_queue_delay), POW2 and
 *      RANGE64 send a bucket only when it is ready: it holds a full batch (the contract's items,
 *      or real tokens already at the padded budget) or its oldest item waited the delay. The
 *      choice is 3's among the ready buckets; when none is, the model's workers wait for the
 *      first to become ready (or for an arrival). Delay 0 is 3 exactly.
 *
 * Rejected: a second packer for the baselines: every policy packs with packer_fill, so the
 * policies differ only in how they group items and which group they serve.
 */
#include "sim_int.h"

#include <stdlib.h>
#include <string.h>

static int sim_queue_push(sim_queue_t *q, uint32_t idx, uint32_t tokens, uint64_t now)
{
    if (q->len == q->cap) {
        if (q->head >= q->cap / 4 && q->head > 0) { /* compact */
            memmove(q->idx, q->idx + q->head, (q->len - q->head) * sizeof(*q->idx));
            q->len -= q->head;
            q->head = 0;
        } else {
            size_t cap = q->cap ? q->cap * 2 : 64;
            uint32_t *g = realloc(q->idx, cap * sizeof(*g));
            if (g == NULL)
                return -1;
            q->idx = g;
            q->cap = cap;
        }
    }
    q->idx[q->len++] = idx;
    q->queued_tokens += tokens;
    q->last_arrival_ns = now;
    q->ever = 1;
    return 0;
}

int sim_queue_in_use(const sim_queue_t *q, uint64_t now)
{
    return q->len > q->head || (q->ever && now - q->last_arrival_ns < LANES_QUIESCE_IDLE_NS);
}

static uint32_t sim_bucket(const sim_t *s, uint32_t tokens)
{
    switch (s->policy) {
    case SIM_POW2: {
        uint32_t k = 0;
        while (k < 32 && (1ull << k) < tokens)
            k++;
        return k;
    }
    case SIM_RANGE64:
        return (tokens - 1) / SIM_RANGE;
    default:
        return 0;
    }
}

int sim_base_submit(sim_t *s, uint32_t i)
{
    const wl_item_t *it = &s->items[i];
    sim_group_t *g = &s->groups[s->policy == SIM_FIFO ? it->model : it->shape];
    if (g->buckets == NULL && (g->buckets = calloc(s->n_buckets, sizeof(*g->buckets))) == NULL)
        return -1;
    sim_queue_t *q = &g->buckets[sim_bucket(s, it->tokens)];
    if (sim_queue_in_use(q, s->now))
        s->r->reuses++;
    else
        s->r->opened++;
    if (sim_queue_push(q, i, it->tokens, s->now) != 0)
        return -1;
    g->queued_items++;
    g->queued_tokens += it->tokens;
    return 0;
}

/* Invariant 4: the bucket may go now (full, or its oldest item waited the delay); else 0 and
 * *wake lowered to when its oldest item will have waited the delay. */
static int sim_bucket_ready(const sim_t *s, const sim_queue_t *q, uint64_t *wake)
{
    if (q->len == q->head)
        return 0;
    uint64_t due = s->items[q->idx[q->head]].t_ns + s->delay_ns;
    if (due <= s->now || q->len - q->head >= s->batch_cap ||
        q->queued_tokens >= s->contract.max_batch_tokens)
        return 1;
    if (due < *wake)
        *wake = due;
    return 0;
}

/* The fullest ready bucket of group g, or NULL. */
static sim_queue_t *sim_group_ready(const sim_t *s, sim_group_t *g, uint64_t *wake)
{
    sim_queue_t *q = NULL;
    for (uint32_t b = 0; g->queued_items != 0 && b < s->n_buckets; b++) {
        if (sim_bucket_ready(s, &g->buckets[b], wake) &&
            (q == NULL || g->buckets[b].queued_tokens > q->queued_tokens))
            q = &g->buckets[b];
    }
    return q;
}

/* With a queue delay: the current shape's fullest ready bucket, else the ready bucket of the
 * shape with the most queued tokens among those that have one (a switch); NULL and s->wake_ns
 * lowered to the next expiry when no bucket of the model is ready. */
static sim_queue_t *sim_base_pick_delayed(sim_t *s, uint32_t model, sim_group_t **out_group)
{
    uint64_t wake = UINT64_MAX;
    int64_t cur = s->current[model];
    sim_queue_t *q = cur >= 0 ? sim_group_ready(s, &s->groups[cur], &wake) : NULL;
    if (q == NULL) {
        int64_t best = -1;
        for (uint32_t k = 0; k < s->model_n_shapes[model]; k++) {
            uint32_t sh = s->model_shapes[model][k];
            if (sh == cur || s->groups[sh].queued_items == 0 ||
                (best >= 0 && s->groups[sh].queued_tokens <= s->groups[best].queued_tokens))
                continue;
            sim_queue_t *r = sim_group_ready(s, &s->groups[sh], &wake);
            if (r != NULL) {
                best = sh;
                q = r;
            }
        }
        if (q == NULL) {
            if (wake != UINT64_MAX && (s->wake_ns <= s->now || wake < s->wake_ns))
                s->wake_ns = wake;
            return NULL;
        }
        if (cur >= 0 && best != cur)
            s->switches++;
        s->current[model] = cur = best;
    }
    *out_group = &s->groups[cur];
    return q;
}

/* The baseline's next queue for a model, or NULL: sticky shape, then the fullest bucket. */
static sim_queue_t *sim_base_pick(sim_t *s, uint32_t model, sim_group_t **out_group)
{
    if (s->delay_ns != 0 && s->policy != SIM_FIFO)
        return sim_base_pick_delayed(s, model, out_group);
    sim_group_t *g;
    if (s->policy == SIM_FIFO) {
        g = &s->groups[model];
        if (g->queued_items == 0)
            return NULL;
        *out_group = g;
        return &g->buckets[0];
    }
    int64_t cur = s->current[model];
    if (cur < 0 || s->groups[cur].queued_items == 0) {
        int64_t best = -1;
        uint64_t best_tokens = 0;
        for (uint32_t k = 0; k < s->model_n_shapes[model]; k++) {
            uint32_t sh = s->model_shapes[model][k];
            if (s->groups[sh].queued_tokens > best_tokens) {
                best = sh;
                best_tokens = s->groups[sh].queued_tokens;
            }
        }
        if (best < 0)
            return NULL;
        if (cur >= 0 && best != cur)
            s->switches++;
        s->current[model] = cur = best;
    }
    g = &s->groups[cur];
    sim_queue_t *q = NULL;
    for (uint32_t b = 0; b < s->n_buckets; b++) {
        if (g->buckets[b].queued_tokens > 0 &&
            (q == NULL || g->buckets[b].queued_tokens > q->queued_tokens))
            q = &g->buckets[b];
    }
    *out_group = g;
    return q;
}

int sim_base_take(sim_t *s, sim_worker_t *w, packer_result_t *pr)
{
    sim_group_t *g;
    sim_queue_t *q = sim_base_pick(s, w->model, &g);
    if (q == NULL)
        return 0;
    size_t avail = q->len - q->head;
    size_t take = avail < s->batch_cap ? avail : s->batch_cap;
    for (size_t k = 0; k < take; k++)
        s->tok[k] = s->items[q->idx[q->head + k]].tokens;
    sched_status_t st = packer_fill(&s->contract, s->tok, take, pr);
    if (st != SCHED_OK || pr->count == 0 || pr->count > take) {
        sim_fail(s, "packer_fill: %s", sched_status_str(st));
        return -1;
    }
    for (size_t k = 0; k < pr->count; k++)
        w->batch[k] = q->idx[q->head + k];
    w->n_batch = (uint32_t)pr->count;
    q->head += pr->count;
    q->queued_tokens -= pr->real_tokens;
    if (q->head == q->len)
        q->head = q->len = 0;
    g->queued_items -= pr->count;
    g->queued_tokens -= pr->real_tokens;
    return 1;
}

void sim_base_count(const sim_t *s, uint32_t *sum, uint32_t *max)
{
    for (uint32_t gi = 0; gi < s->n_groups; gi++) {
        const sim_group_t *g = &s->groups[gi];
        uint32_t in_use = 0;
        for (uint32_t b = 0; g->buckets != NULL && b < s->n_buckets; b++)
            in_use += (uint32_t)sim_queue_in_use(&g->buckets[b], s->now);
        *sum += in_use;
        if (in_use > *max)
            *max = in_use;
    }
}
