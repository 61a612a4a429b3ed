/*
 * budget.c - the wait budget (sched_config_t.slo_ns, sched_slo_set, WorkItem.max_wait_ms): the
 * p99 queue wait the user accepts, and how the `lanes` policy spends it on company for its
 * batches instead of the hold's hand-set constants (hold.c).
 *
 * Under a budget B a batch's items are due at arrival + D, where D is the model's due age (each
 * item's own max_wait_ms, when set, scales D down in proportion). A batch goes when it is full
 * to the contract or its first item is due; otherwise it waits for company, and the worker asks
 * again at that due time (sched_retry_ns). The due age is also the model's age bound: a shape or
 * lane holding a due item goes first (select.c). So the budget, not a load gate, decides how long
 * company is awaited, at every load.
 *
 * Invariants:
 *   1. Without a budget nothing here runs but the arrival gaps of shapes and models and the test
 *      of invariant 8 (budget_company_before), which select.c's cold wait asks of the model's:
 *      the hold and the age bound are hold.c's and sched_config_t's.
 *   2. D never exceeds the budget, and an item with max_wait_ms waits for company at most its
 *      share of it (max_wait_ms x D / B): a budget caps the hold, never raises it.
 *   3. Never held: a dead letter, a batch full to the contract's items, or one that no further
 *      item of its pad fits (padded tokens + pad_to over max_batch_tokens).
 *   4. A due batch that misses the worker's cache makes every item of its shape queued then due:
 *      the worker that paid the prefix drains the shape while it holds it, instead of leaving
 *      the rest to be due later and paid for again after an eviction.
 *   5. D follows how late due items go: every tick it is BUDGET_AIM of the budget minus the 99th
 *      percentile of their lateness (wait minus due age, decayed over BUDGET_TAU_NS), between
 *      BUDGET_DUE_MIN and BUDGET_DUE_SHARE of the budget, so the queue behind due batches is
 *      left its room.
 *   6. A batch is first extended with the neighbouring lanes that fill it to the contract
 *      (extend.c invariant 5); when that fills it, it goes, as a bucket scheme's full bucket
 *      goes before its delay. Otherwise it is packed again with the budget's own credit
 *      (extend.c invariant 4) and waits for company.
 *   7. A fill that was held is not done again until its retry time, until max_batch_size /
 *      BUDGET_RECHECK_SHARE items arrived for the model, or for another contract (or, where the
 *      worker chooses its own shapes, another worker): what the workers of a model hold waiting
 *      for company cannot become due before the retry, and a batch only becomes full with
 *      arrivals, so a few arrivals more delay a full batch by their gaps, never past its due.
 *   8. A batch waits for company only while its shape's expected gap, its mean arrival gap or,
 *      when longer, its silence since its last arrival, is shorter than the time left until the
 *      batch is due: a shape seen once (a producer hashing whole prompts) or gone quiet gets no
 *      company by waiting, so its batch goes at once. Items arriving at one instant (a queue
 *      filled at once, a trace's shared time stamp) are one arrival: their zero gaps say nothing
 *      of when the next comes. Such a shape's items are
 *      also bounded by the configured age bound, not the due age: a batch that will not wait for
 *      company goes in the order of its age, as without a budget. Where the wait has no silence
 *      to end it (a cold shape's queue waiting for a worker, select.c invariant 5; the age bound),
 *      a shape expects company only after BUDGET_GAP_SAMPLES gaps: a single gap is no evidence
 *      that its arrivals go on (a conversation's second turn).
 *   9. A batch waits for company at most until its oldest item's budget, less the time the
 *      model's workers need for everything it queues (its queued items and tokens at the
 *      worker's cost, over its workers): the queue behind a due batch is what it measures, not
 *      only the share BUDGET_DUE_SHARE leaves it, so a queue that arrived at once is served from
 *      the start instead of becoming due together.
 *  10. A batch waits for company only while what company saves is more than what it may pad: an
 *      item that joins saves at most a batch's fixed cost, and the prefix when the batch misses
 *      the worker's cache, and may pad by BUDGET_PAD_TOKENS at the worker's token cost. A worker
 *      with no fixed cost and the prefix warm gains nothing by waiting; company only pads its
 *      batches, and the budget's wait is all the tail sees. Such a batch drains its shape on a
 *      miss as any batch that goes does (invariant 4). A worker whose cost is not known yet waits
 *      by invariants 8 and 9 alone.
 *
 * Rejected (each measured with `lanesched-bench sim|sweep --prefixes --slo-ms N`; docs/policy.md,
 * "The wait budget"): a due age from lateness alone with no cap (the p99 rose past the budget for
 * no GPU time); restoring the due age when lateness says no due age meets the budget, and
 * shortening it at high load (shorter waits shrink the batches and the queue grows); serving late
 * items fullest first (the tail of every preset went far past the budget); the plain age bound
 * for every shape (more GPU time on steady and at the article's scale); filling to the contract
 * at the whole fixed cost, or at a credit that rose with lateness (padding, and merges and
 * lateness feeding each other); dropping the budget while due items go later than a whole budget
 * (GPU time on bursty and sustained went over the tuned buckets').
 */
#include "scheduler/core/sched_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The share of the budget an item may wait for company before it is due, at first and at most:
 * the rest is left for the queue behind a due batch (workers busy with other due work) and the
 * batch's own service. The largest that keeps lanes' p99 within the budget at every load of the
 * steady sweep where a tuned bucket scheme's is (`lanesched-bench sweep --preset steady
 * --prefixes --slo-ms 5000`, 0.7 to 0.9; docs/policy.md, "The wait budget"). */
#define BUDGET_DUE_SHARE 0.7
/* ... and at least, however late due items go: below it the batches shrink, and a lateness that
 * long comes from a queue the hold did not build (a burst, an overload). */
#define BUDGET_DUE_MIN 0.5
/* What the due age leaves for lateness: the p99 wait aimed at, as a share of the budget. */
#define BUDGET_AIM 0.95
/* Invariant 8: a shape's mean arrival gap follows its last this many gaps (an exponential
 * average): a shape that goes quiet stops holding within a few of them. */
#define BUDGET_GAP_WEIGHT 8.0
/* Invariant 8: the gaps a shape's mean must rest on before its queue waits as a cold shape and
 * its items keep the due age as their age bound. With 1, a public conversation trace whose shapes
 * are mostly seen once or twice held its cold queues to the due age and bought no company: its
 * p99 grew with the budget for the GPU time it had without one. 2 ends that, and no claim's
 * verdict moves: every preset's shapes have hundreds of arrivals (`lanesched-bench sim
 * --trace-in T --slo-ms N`, tools/bench/trace_claims.sh, every CTest claim command; docs/bench.md,
 * "Public production traces"). */
#define BUDGET_GAP_SAMPLES 2u
/* Invariant 7: a held fill is done again after a consumer's max_batch_size / this many arrivals
 * (or at its retry time): each arrival asks again for every idle worker, so at the article's
 * scale 64 held workers filled a batch 64 times per arrival (`lanesched-bench sim --preset
 * steady --models 1 --shapes 2 --workers 64 --load 70 --prefixes --slo-ms 5000`, its wall time;
 * docs/policy.md, "The wait budget"); a quarter of a batch moves no claim's figure. */
#define BUDGET_RECHECK_SHARE 4u
/* Invariant 9: the batches' size and charge follow their last this many commits: a queue's
 * make-up changes within a few batches of each worker. 8, 32 and 128 measured (`sim --preset
 * bursty|churn --prefixes --slo-ms 5000`, tests/bench/trace_budget.sh; docs/policy.md, "The
 * wait budget"): 32 spent the least GPU time, and no tail moved past its budget. */
#define BUDGET_BATCH_WEIGHT 32.0
/* Invariant 10: the padding an item that joins a batch may add. A lane takes an item whose waste
 * is under LANES_FLOOR_TOKENS whatever its length (lanes.c), so company may pad each item by that
 * much before any share of its length counts. 0 and 8 left steady over the best tuned bucket
 * scheme's GPU time at a fixed cost of 100 us, 16 did not (`lanesched-bench sim --preset
 * steady|bursty|churn [--prefixes] --batch-us 0|100|130|150|170|200|500 --slo-ms 1000|2000|5000
 * --seed 42|1|7`; docs/policy.md, "The wait budget"). It follows the lane floor on purpose: the
 * floor is the padding it prices. The claims' fixed cost, 5 ms at 10 us a token, is worth 500
 * tokens: no claim's figure moves with it. */
#define BUDGET_PAD_TOKENS LANES_FLOOR_TOKENS
/* The lateness histogram's memory: a few bursts long, so one burst moves it and a quiet minute
 * forgets it. */
#define BUDGET_TAU_NS 10e9

static int budget_gaps_known(const budget_gaps_t *g)
{
    return g->n != 0;
}

void budget_model_init(struct sched *s, sched_model_t *m)
{
    m->slo_ns = s->slo_ns;
    for (size_t i = 0; i < s->n_slos; i++)
        if (strcmp(s->slos[i].model, m->name) == 0)
            m->slo_ns = s->slos[i].slo_ns;
    m->due_ns = (uint64_t)((double)m->slo_ns * BUDGET_DUE_SHARE);
    memset(m->late, 0, sizeof(m->late));
    m->late_t_ns = 0;
    /* a place reused by another name (model.c invariant 3) keeps nothing of the last one's */
    m->batch_items = m->batch_charge = 0.0;
    memset(&m->held, 0, sizeof(m->held));
}

/* Item v's own budget (invariant 2): its max_wait_ms when shorter than the model's budget. */
static uint64_t budget_item_slo(const sched_model_t *m, const store_view_t *v)
{
    uint64_t own = (uint64_t)v->max_wait_ms * 1000000u;
    return v->max_wait_ms != 0 && own < m->slo_ns ? own : m->slo_ns;
}

/* The due age of item v (invariant 2): the model's, scaled by the item's share of the budget. */
static uint64_t budget_item_age(const sched_model_t *m, const store_view_t *v)
{
    uint64_t slo = budget_item_slo(m, v);
    if (slo == m->slo_ns)
        return m->due_ns;
    return (uint64_t)((double)m->due_ns * ((double)slo / (double)m->slo_ns));
}

void budget_note_commit(sched_model_t *m, const store_view_t *v, uint64_t wait_ns)
{
    if (m->slo_ns == 0)
        return;
    uint64_t age = budget_item_age(m, v), late = wait_ns > age ? wait_ns - age : 0;
    uint64_t b = late * BUDGET_LATE_BUCKETS / m->slo_ns;
    m->late[b < BUDGET_LATE_BUCKETS ? b : BUDGET_LATE_BUCKETS] += 1.0;
}

void budget_tick(struct sched *s, uint64_t now)
{
    for (size_t i = 0; i < s->n_models; i++) {
        sched_model_t *m = s->models[i];
        if (m->slo_ns == 0)
            continue;
        double d = m->late_t_ns != 0 && now > m->late_t_ns
                       ? exp(-(double)(now - m->late_t_ns) / BUDGET_TAU_NS)
                       : 1.0;
        m->late_t_ns = now;
        double n = 0.0;
        for (uint32_t b = 0; b <= BUDGET_LATE_BUCKETS; b++)
            n += (m->late[b] *= d);
        if (n < 1.0)
            continue; /* nothing measured lately: the due age stays */
        double seen = 0.0;
        uint32_t b = 0;
        for (; b < BUDGET_LATE_BUCKETS; b++)
            if ((seen += m->late[b]) >= 0.99 * n)
                break;
        double late99 = (double)(b + 1) / BUDGET_LATE_BUCKETS; /* in budgets, the bucket's edge */
        double due = BUDGET_AIM - late99;
        due = due < BUDGET_DUE_MIN     ? BUDGET_DUE_MIN
              : due > BUDGET_DUE_SHARE ? BUDGET_DUE_SHARE
                                       : due;
        m->due_ns = (uint64_t)(due * (double)m->slo_ns);
    }
}

sched_status_t sched_slo_set(sched_t *s, const char *model, uint64_t slo_ns)
{
    if (s == NULL || model == NULL || model[0] == '\0')
        return SCHED_EINVAL;
    size_t i = 0;
    while (i < s->n_slos && strcmp(s->slos[i].model, model) != 0)
        i++;
    if (i == s->n_slos) {
        sched_slo_t *t = realloc(s->slos, (s->n_slos + 1) * sizeof(*t));
        if (t == NULL)
            return SCHED_ENOMEM;
        s->slos = t;
        if ((s->slos[i].model = strdup(model)) == NULL)
            return SCHED_ENOMEM;
        s->n_slos++;
    }
    s->slos[i].slo_ns = slo_ns;
    sched_model_t *m = model_find(s, model);
    if (m != NULL)
        budget_model_init(s, m);
    return SCHED_OK;
}

void budget_free(struct sched *s)
{
    for (size_t i = 0; i < s->n_slos; i++)
        free(s->slos[i].model);
    free(s->slos);
    s->slos = NULL;
    s->n_slos = 0;
}

uint64_t budget_age_bound(const struct sched *s, const sched_model_t *m)
{
    return m->slo_ns != 0 && s->policy == SCHED_POLICY_LANES ? m->due_ns : s->starvation_ns;
}

int budget_company(const struct sched *s, const sched_shape_t *shape)
{
    const sched_model_t *m = s->models[shape->model_idx];
    if (m->slo_ns == 0 || s->policy != SCHED_POLICY_LANES)
        return 1;
    return shape->gaps.n >= BUDGET_GAP_SAMPLES && shape->gaps.mean_ns < (double)m->due_ns;
}

uint64_t budget_shape_bound(const struct sched *s, const sched_shape_t *shape)
{
    uint64_t due = budget_age_bound(s, s->models[shape->model_idx]);
    if (s->starvation_ns == 0 || s->starvation_ns >= due || budget_company(s, shape))
        return due;
    return s->starvation_ns; /* invariant 8: bounded as without a budget */
}

void budget_note_batch(sched_model_t *m, const sched_batch_t *b)
{
    if (m->slo_ns == 0 || b->n == 0 || b->real_tokens == 0)
        return;
    double items = (double)b->n,
           charge = (double)(b->padded_tokens + b->prefix_charged) / (double)b->real_tokens;
    if (m->batch_items == 0.0) {
        m->batch_items = items;
        m->batch_charge = charge;
        return;
    }
    m->batch_items += (items - m->batch_items) / BUDGET_BATCH_WEIGHT;
    m->batch_charge += (charge - m->batch_charge) / BUDGET_BATCH_WEIGHT;
}

/* Invariant 9: the latest time a batch whose earliest budget ends at `end` may still wait for,
 * for a consumer costing `cost`, so that the model's queue is served by then (0: none left). */
static uint64_t budget_queue_latest(const sched_model_t *m, uint64_t end,
                                    const packer_contract_t *k, const packer_cost_t *cost)
{
    double budget = (double)end;
    /* the batches as committed lately, else as few as the contract allows */
    double per_batch = m->batch_items != 0.0 ? m->batch_items : (double)k->max_batch_size;
    double charge = m->batch_charge != 0.0 ? m->batch_charge : 1.0;
    double batches = ceil((double)m->queued_items / per_batch);
    double work = (batches * cost->fixed_ns + (double)m->queued_tokens * charge * cost->token_ns) /
                  (double)(m->n_workers != 0 ? m->n_workers : 1);
    return budget > work ? (uint64_t)(budget - work) : 0;
}

/* When item v is due (invariant 2). */
static uint64_t budget_item_due(const sched_model_t *m, const store_view_t *v)
{
    return v->arrival_ns + budget_item_age(m, v);
}

/* Invariant 7: the arrivals after which a held fill is worth doing again, for a contract. */
static uint64_t budget_recheck(const packer_contract_t *k)
{
    uint64_t n = k->max_batch_size / BUDGET_RECHECK_SHARE;
    return n != 0 ? n : 1;
}

int budget_on(const struct sched *s, const sched_consumer_t *c, const sched_model_t *m)
{
    return m->slo_ns != 0 && s->policy == SCHED_POLICY_LANES && c->worker != NULL;
}

int budget_held_again(struct sched *s, const sched_consumer_t *c, const sched_model_t *m)
{
    const budget_memo_t *h = &m->held;
    if (!h->valid || !budget_on(s, c, m) || (h->worker != NULL && h->worker != c->worker) ||
        memcmp(&h->contract, &c->contract, sizeof(h->contract)) != 0 ||
        m->arrivals - h->arrivals >= budget_recheck(&c->contract) || s->fill_now_ns >= h->until_ns)
        return 0;
    s->held = 1;
    s->retry_ns = h->until_ns;
    return 1;
}

void budget_held_note(struct sched *s, const sched_consumer_t *c, sched_model_t *m)
{
    budget_memo_t *h = &m->held;
    h->valid = budget_on(s, c, m) && s->held;
    if (!h->valid)
        return;
    h->until_ns = s->retry_ns;
    h->arrivals = m->arrivals;
    h->contract = c->contract;
    /* where shapes outnumber the worker's cache each worker chooses for itself (select.c) */
    h->worker = select_affine_mode(m, c->worker) ? c->worker : NULL;
}

static void budget_gaps_note(budget_gaps_t *g, uint64_t now)
{
    if (g->last_ns != 0 && now > g->last_ns) {
        double gap = (double)(now - g->last_ns);
        g->mean_ns =
            budget_gaps_known(g) ? g->mean_ns + (gap - g->mean_ns) / BUDGET_GAP_WEIGHT : gap;
        if (g->n < UINT32_MAX)
            g->n++;
    }
    g->last_ns = now != 0 ? now : 1;
}

void budget_arrival_note(sched_model_t *m, sched_shape_t *shape, uint64_t now)
{
    budget_gaps_note(&shape->gaps, now);
    budget_gaps_note(&m->gaps, now);
}

int budget_full(const sched_batch_t *b, const packer_contract_t *k)
{
    return b->n >= k->max_batch_size || b->padded_tokens + b->pad_to > k->max_batch_tokens;
}

int budget_hold(struct sched *s, const sched_consumer_t *c, const sched_model_t *m,
                sched_shape_t *shape, uint64_t now, uint64_t *out_until)
{
    const sched_batch_t *b = &s->filled;
    if (b->dead_letter || budget_full(b, &c->contract)) /* invariant 3 */
        return 0;
    uint64_t due = UINT64_MAX, end = UINT64_MAX; /* end: when the first item's budget ends */
    for (size_t i = 0; i < b->n; i++) {
        const store_view_t *v = &b->items_view[i];
        uint64_t d = v->arrival_ns <= shape->drain_ns ? 0 /* invariant 4 */
                                                      : budget_item_due(m, v);
        uint64_t e = v->arrival_ns + budget_item_slo(m, v);
        due = d < due ? d : due;
        end = e < end ? e : end;
    }
    int miss = c->worker == NULL || !worker_is_warm(c->worker, shape);
    int alone = 0; /* invariant 10: company would save no more than it pads */
    packer_cost_t cost;
    if (c->worker != NULL && worker_cost(c->worker, &cost)) {
        double saves = cost.fixed_ns + cost.token_ns * (double)b->prefix_charged;
        alone = saves <= cost.token_ns * (double)BUDGET_PAD_TOKENS;
        uint64_t latest = alone ? due : budget_queue_latest(m, end, &c->contract, &cost);
        due = latest < due ? latest : due;
    }
    uint64_t until = due;
    if (alone || !budget_company_before(&shape->gaps, now, due, &until)) { /* invariant 8 */
        if (miss) /* invariant 4: what was queued goes with it, while the shape is warm */
            shape->drain_ns = now;
        return 0;
    }
    *out_until = until;
    return 1;
}

int budget_company_before(const budget_gaps_t *g, uint64_t now, uint64_t end, uint64_t *out_ask)
{
    /* arrivals silent for longer than their mean gap are expected no sooner than that silence
     * again */
    double silence = now > g->last_ns ? (double)(now - g->last_ns) : 0.0;
    double gap = g->mean_ns > silence ? g->mean_ns : silence;
    if (now >= end || !budget_gaps_known(g) || (double)now + gap > (double)end)
        return 0;
    /* asked again when the silence would reach the time left, if nothing arrives before */
    uint64_t quiet = g->last_ns + (end - g->last_ns) / 2 + 1;
    *out_ask = quiet > now && quiet < end ? quiet : end;
    return 1;
}
