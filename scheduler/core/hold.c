/*
 * hold.c - the load-gated hold of the `lanes` policy: while a model's offered load is high, an
 * under-filled batch waits a little for company instead of going out at once.
 *
 * Why: with work-conserving dispatch (a free worker takes the best batch there is) GPU time is
 * almost flat in how items are grouped, since a cheaper batch leaves its worker free sooner and
 * the next one is then smaller (README, "What GPU time costs"). Only items that wait for company
 * make batches fuller at the same padding. At low load that wait is the whole of an item's wait
 * and the tails pay it; at high load items wait in the queue anyway, and a fuller batch is GPU
 * time every other item gets back.
 *
 * Invariants:
 *   1. The offered load of a model is measured from its arrivals alone (exponentially decayed
 *      sums of items and tokens, time constant HOLD_TAU_NS), each item costed as in a full
 *      batch of its own length with the consumer's cost, over the model's workers: what the
 *      policy does cannot move it (a busy fraction would fall as holds make batches cheaper).
 *   2. A batch is held only while its oldest item has waited less than the hold, so no item is
 *      held longer than that; the fill reports the time the hold ends (sched_retry_ns).
 *   3. Never held: a dead letter, a batch without a known worker cost, a batch full to the
 *      contract's items or half its tokens, and any batch while the load is under the gate.
 *
 * Rejected (README, "What GPU time costs"): an ungated hold (steady at 40%: p99 0.5 s against
 * the buckets' 51 ms); gates on the workers' busy fraction or on the queue's age, which the
 * hold itself moves.
 */
#include "scheduler/core/sched_int.h"

#include <math.h>

/* The load estimate's memory: long enough that a burst of a second does not open the gate,
 * short enough to follow a change of traffic within a few seconds. */
#define HOLD_TAU_NS 5e9

static double hold_decay(const sched_model_t *m, uint64_t now)
{
    return now > m->load_t_ns ? exp(-(double)(now - m->load_t_ns) / HOLD_TAU_NS) : 1.0;
}

void hold_arrival_note(sched_model_t *m, uint32_t tokens, uint64_t now)
{
    double d = hold_decay(m, now);
    m->load_items = m->load_items * d + 1.0;
    m->load_tokens = m->load_tokens * d + (double)tokens;
    if (now > m->load_t_ns)
        m->load_t_ns = now;
}

double hold_load(const sched_model_t *m, const packer_contract_t *k, const packer_cost_t *cost,
                 uint64_t now)
{
    if (m->n_workers == 0 || m->load_items <= 0.0)
        return 0.0;
    double d = hold_decay(m, now);
    double items = m->load_items * d, tokens = m->load_tokens * d;
    double mean = m->load_tokens / m->load_items; /* the decay cancels */
    double full = mean > 0 ? (double)k->max_batch_tokens / mean : 1.0;
    if (full > (double)k->max_batch_size)
        full = (double)k->max_batch_size;
    if (full < 1.0)
        full = 1.0;
    double work_ns = cost->token_ns * tokens + cost->fixed_ns * items / full; /* over HOLD_TAU */
    return work_ns / (HOLD_TAU_NS * (double)m->n_workers);
}

int hold_batch(struct sched *s, const sched_consumer_t *c, sched_model_t *m,
               const packer_cost_t *cost, uint64_t now, uint64_t *out_until)
{
    const sched_batch_t *b = &s->filled;
    const packer_contract_t *k = &c->contract;
    if (s->hold_ns == 0 || b->dead_letter || b->n >= k->max_batch_size ||
        2 * b->padded_tokens >= k->max_batch_tokens)
        return 0;
    double batch_ns = cost->fixed_ns + cost->token_ns * (double)b->padded_tokens;
    if (batch_ns <= 0 || cost->fixed_ns < s->hold_share * batch_ns)
        return 0;
    uint64_t oldest = UINT64_MAX;
    for (size_t i = 0; i < b->n; i++)
        if (b->items_view[i].arrival_ns < oldest)
            oldest = b->items_view[i].arrival_ns;
    if (oldest == UINT64_MAX || now >= oldest + s->hold_ns)
        return 0;
    double ramp = (hold_load(m, k, cost, now) - s->hold_load) / s->hold_ramp;
    if (ramp <= 0.0)
        return 0;
    uint64_t hold = ramp >= 1.0 ? s->hold_ns : (uint64_t)(ramp * (double)s->hold_ns);
    if (now >= oldest + hold)
        return 0;
    *out_until = oldest + hold;
    return 1;
}
