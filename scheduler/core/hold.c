/*
 * hold.c - the load-gated hold of the `lanes` policy: while a model's offered load is high, an
 * under-filled batch waits a little for company instead of going out at once.
 *
 * Why: with work-conserving dispatch (a free worker takes the best batch there is) GPU time is
 * almost flat in how items are grouped, since a cheaper batch leaves its worker free sooner and
 * the next one is then smaller (docs/policy.md, "What GPU time costs"). Only items that wait for
 * company make batches fuller at the same padding. At low load that wait is the whole of an item's
 * wait and the tails pay it; at high load items wait in the queue anyway, and a fuller batch is GPU
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
 *      contract's items or half its tokens, and any batch while the load is under the gate
 *      outside a burst regime.
 *   4. Burst regime: the peak of the arrivals' item rate over HOLD_BURST_TAU_NS, decayed with
 *      HOLD_PEAK_TAU_NS and costed as the arrivals are (the load per item), is at least the
 *      workers' whole time. The hold is then hold_burst x the hold whatever the load now: the
 *      queue a burst builds sets the tail, and the quiet between bursts is where batches are
 *      smallest. A burst of peak load P keeps the regime about HOLD_PEAK_TAU_NS x ln P.
 *   5. An arrival counts in the load with at most the tokens a worker of its model declared it
 *      runs: the longer of max_input_tokens (0: unlimited) and max_batch_tokens, the most over
 *      the contracts that filled for the model within the last one or two HOLD_CAP_WINDOW_NS
 *      (tokens_cap: a contract raises it at once; at the end of a window it falls to the most
 *      of that window's contracts). Arrivals before the first such contract are capped when it
 *      comes: their token sum at most their count times the cap. A producer's `tokens` is a
 *      claim: uncapped, one item claiming 2^32 tokens made a shared model look overloaded for
 *      minutes, and every other producer's batches were held. A contract is a claim too: a
 *      worker gone no longer lifts the cap a window after its last fill.
 *
 * Rejected (each measured with `lanesched-bench sim|sweep`; docs/policy.md, "What GPU time
 * costs"): an ungated hold (at low load its wait is the whole tail); gates on the workers' busy
 * fraction or on the queue's age, which the hold itself moves; for bursts, a lower gate (steady's
 * p99 goes over the buckets' at low loads), a long memory for the gate's own load (the gate then
 * trails every change of traffic), reading the gate's load over the time arrivals were seen
 * (over the buckets' p99 on some seeds), and bursts of tokens rather than items (long-tailed
 * lengths then read as bursts, for a longer tail and no GPU time). Holding only while the lanes
 * near the batch promise company within the hold (their arrival gaps): at every threshold tried
 * it spent more GPU time for a longer tail than the plain hold.
 */
#include "scheduler/core/sched_int.h"

#include <math.h>

/* Burst detection: a second of arrivals is what a burst is made of (the bench's bursty preset
 * and production traces burst over seconds); the peak is remembered for a minute, the spacing
 * of bursts that leave queues behind them. */
#define HOLD_BURST_TAU_NS 1e9
#define HOLD_PEAK_TAU_NS  60e9
/* At least the workers' whole time: an arrival rate a queue can only absorb by growing. */
#define HOLD_BURST_LOAD 1.0

/* How long a contract's declared input keeps the cap up after the last fill it asked for
 * (invariant 5): a worker pulls within seconds while it lives, and a minute is the regime's
 * memory (HOLD_PEAK_TAU_NS) too. */
#define HOLD_CAP_WINDOW_NS 60000000000ull

/* The load estimate's memory: long enough that a burst of a second does not open the gate,
 * short enough to follow a change of traffic within a few seconds. */
#define HOLD_TAU_NS 5e9

static double hold_decay_since(uint64_t then, uint64_t now, double tau)
{
    return now > then ? exp(-(double)(now - then) / tau) : 1.0;
}

void hold_model_init(sched_model_t *m)
{
    m->load_items = m->load_tokens = m->burst_items = m->peak_rate = 0.0;
    m->load_t_ns = m->load_t0_ns = m->burst_t_ns = m->peak_t_ns = 0;
    m->tokens_cap = m->tokens_cap_next = 0;
    m->cap_t_ns = 0;
}

void hold_contract_note(sched_model_t *m, const packer_contract_t *k, uint64_t now)
{
    uint32_t runs = packer_contract_runs(k);
    if (now >= m->cap_t_ns + HOLD_CAP_WINDOW_NS) { /* invariant 5: the last window's contracts */
        m->tokens_cap = m->tokens_cap_next;        /* 0 after a window without fills: capped anew */
        m->tokens_cap_next = 0;
        m->cap_t_ns = now;
    }
    if (runs > m->tokens_cap_next)
        m->tokens_cap_next = runs;
    if (runs <= m->tokens_cap)
        return;
    if (m->tokens_cap == 0 && m->load_tokens > m->load_items * (double)runs)
        m->load_tokens = m->load_items * (double)runs; /* invariant 5: the arrivals before it */
    m->tokens_cap = runs;
}

void hold_arrival_note(sched_model_t *m, uint32_t tokens, uint64_t now)
{
    if (m->tokens_cap != 0 && tokens > m->tokens_cap) /* invariant 5 */
        tokens = m->tokens_cap;
    double d = hold_decay_since(m->load_t_ns, now, HOLD_TAU_NS);
    m->load_items = m->load_items * d + 1.0;
    m->load_tokens = m->load_tokens * d + (double)tokens;
    if (m->load_t0_ns == 0)
        m->load_t0_ns = now ? now : 1;
    if (now > m->load_t_ns)
        m->load_t_ns = now;
    m->burst_items = m->burst_items * hold_decay_since(m->burst_t_ns, now, HOLD_BURST_TAU_NS) + 1.0;
    if (now > m->burst_t_ns)
        m->burst_t_ns = now;
    if (now < m->load_t0_ns + (uint64_t)HOLD_BURST_TAU_NS)
        return; /* the short sum does not cover a whole second yet */
    double rate = m->burst_items / (HOLD_BURST_TAU_NS / 1e9);
    m->peak_rate *= hold_decay_since(m->peak_t_ns, now, HOLD_PEAK_TAU_NS);
    if (now > m->peak_t_ns)
        m->peak_t_ns = now;
    if (rate > m->peak_rate)
        m->peak_rate = rate;
}

double hold_load(const sched_model_t *m, const packer_contract_t *k, const packer_cost_t *cost,
                 uint64_t now)
{
    if (m->n_workers == 0 || m->load_items <= 0.0)
        return 0.0;
    double d = hold_decay_since(m->load_t_ns, now, HOLD_TAU_NS);
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

/* Invariant 4: the peak rate in items per ns, times the workers' time per item the load
 * charges (load x HOLD_TAU_NS / items). */
static int hold_in_burst(const sched_model_t *m, double load, uint64_t now)
{
    double items = m->load_items * hold_decay_since(m->load_t_ns, now, HOLD_TAU_NS);
    if (items <= 0.0)
        return 0;
    double peak = m->peak_rate * hold_decay_since(m->peak_t_ns, now, HOLD_PEAK_TAU_NS) / 1e9;
    return load * HOLD_TAU_NS / items * peak >= HOLD_BURST_LOAD;
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
    uint64_t longest =
        s->hold_burst > 1.0 ? (uint64_t)(s->hold_burst * (double)s->hold_ns) : s->hold_ns;
    if (oldest == UINT64_MAX || now >= oldest + longest)
        return 0;
    double load = hold_load(m, k, cost, now);
    double ramp = (load - s->hold_load) / s->hold_ramp;
    uint64_t hold;
    if (s->hold_burst > 0.0 && hold_in_burst(m, load, now))
        hold = (uint64_t)(s->hold_burst * (double)s->hold_ns);
    else if (ramp <= 0.0)
        return 0;
    else
        hold = ramp >= 1.0 ? s->hold_ns : (uint64_t)(ramp * (double)s->hold_ns);
    if (now >= oldest + hold)
        return 0;
    *out_until = oldest + hold;
    return 1;
}
