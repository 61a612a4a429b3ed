/*
 * select.c - which shape a model's next batch comes from: sticky draining, the age bound, and
 * cache affinity.
 *
 * Invariants:
 *   1. While the model's current shape has dispatchable tokens, every batch of the model comes
 *      from it, for every consumer of the model: that is what keeps all their prefix caches warm
 *      on the same prefix.
 *   2. Only when the current shape is dry does the model switch, to the shape with the most
 *      dispatchable tokens (ties: the shape seen first), and the switch is written to the
 *      store's current-shape field and counted (not when the fill's batch is held, hold.c:
 *      the switch stays, so the next fill weighs the other shapes, but counts no preemption).
 *   3. With the starvation bound (the age bound), a shape whose oldest item has waited past the
 *      bound preempts the current shape at the next batch boundary; among several, the one
 *      with the oldest item goes first.
 *   4. With the bound on, within the chosen shape the lane holding its oldest item goes first
 *      once that item has waited past the bound (select_lane_starved); otherwise lanes go in
 *      descending queued tokens. Without it, a lane holding one short item waits as long as
 *      the shape's bigger lanes keep filling, so a shape-level bound alone bounds nothing
 *      for that item (and a preempting shape would be served at its fullest lane, not at the
 *      item that made it preempt).
 *   5. Cache affinity (SCHED_POLICY_LANES, a consumer with a worker): 1-3 hold while the model's
 *      active shapes fit the worker's cache and either are all warm in it (no switch costs a
 *      miss) or are no more than the model's workers (following one shape together keeps the
 *      batches full and warms every worker on each shape once). When they do not, every worker
 *      following one shape would cycle each worker through shapes it does not hold and miss at
 *      each switch: with large caches and many shapes each seen a few times (a conversation's
 *      turns), a shape is warm only where it was served. So each worker keeps to the shapes it
 *      has warm, in this order:
 *        a. its warm shape whose oldest item waited longest past the bound;
 *        b. unless a shape it does not have warm waited past SELECT_COLD_NS (and, if (a) found
 *           one, SELECT_STEAL_FACTOR times as long): that one, a miss the bound forces; under a
 *           wait budget the cold bound is the due age where that is longer, and never more than
 *           SELECT_COLD_BUDGET_SHARE of the budget;
 *        c. its own last shape while it has work; then its warm shape with the most tokens;
 *        d. a shape no worker has warm, then any shape, with the most tokens; but only if its
 *           queue fills a batch (the consumer's max_batch_tokens): a smaller cold queue waits
 *           for (b) while the worker's warm shapes may still get work (sched_retry_ns says
 *           when), since a miss spent on a few items is spent again when they are gone. Without
 *           a budget that is while the model's next arrival is expected before the cold bound
 *           (budget.c invariant 8 on the model's arrivals): once they stop, waiting brings
 *           neither warm work nor company, only the wait (a burst's last items, a queue drained
 *           after its producers stopped). Under a budget, while the shape's own gap, measured
 *           over at least two gaps, is shorter than the due age (budget_company).
 *      So each shape stays in the caches of the workers that serve it, and the misses left are
 *      those K - workers x C forces within the cold bound, plus cold starts.
 *   6. Choosing costs O(log shapes) (heap.c) plus O(cache) for a worker's warm shapes, never a
 *      scan of the model's shapes.
 *
 * Rejected:
 *   - Round-robin or oldest-first across shapes. Each switch flushes the engine's prefix cache;
 *     draining one shape at a time pays that cost once per shape instead of once per batch.
 *   - A bound on shapes only: a preempting shape is served at its fullest lane, and a short item
 *     alone in a lane of the current shape waits as long as bigger lanes keep filling, many
 *     times the bound (`lanesched-bench sim --preset steady`, lanes-starve; docs/policy.md).
 *   - Static shape-to-worker assignment (hashing shapes onto workers): popularity is skewed, so
 *     the worker owning the hottest shape falls behind while the others idle.
 *   - Taking any cold shape as soon as a worker's warm shapes are dry: with more shapes than
 *     caches every worker then misses at most switches (docs/policy.md, "Choosing the
 *     constants").
 */
#include "scheduler/core/sched_int.h"

/* Cache affinity: a shape the worker does not have warm preempts its warm ones once its oldest
 * item waited this long. A switch to it costs a prefix-cache miss, while one among the worker's
 * warm shapes costs nothing and happens at the age bound itself. The longest bound with churn's
 * p99 under the bucket schemes' (a longer one buys hit rate with tail): `lanesched-bench sim
 * --preset bursty|churn` with the bound varied (docs/policy.md, "Choosing the constants"). */
#define SELECT_COLD_NS 1000000000ull
/* ... and before the worker's own aged shape once it waited this many times as long, so under
 * overload no shape falls further behind the others than that. */
#define SELECT_STEAL_FACTOR 2u
/* ... and, under a wait budget B, past this share of B at the latest: the cold shape's items then
 * still find a worker within the budget (one finishing its batch, the queue behind it). The
 * largest share tried (0.95, 0.9, 0.8, 0.7) with lanes' p99 within a 1 s budget wherever a tuned
 * bucket scheme's is, at 20-50% load on bursty and churn, without costing the hit-rate claim on
 * churn (`lanesched-bench sweep --preset bursty|churn [--prefixes] --slo-ms 1000 --loads
 * 20,30,40,50 --seed S` and `sim --preset churn --prefixes --slo-ms 1000 --claims`, seven seeds;
 * docs/policy.md, "The wait budget"). A budget above SELECT_COLD_NS / share changes nothing. */
#define SELECT_COLD_BUDGET_SHARE 0.9

static uint64_t select_now(const struct sched *s)
{
    return s->fill_now_ns; /* every caller is inside sched_fill */
}

/* With the starvation bound on: the other shape whose oldest item waited past the bound
 * longest, or NULL. */
static sched_shape_t *select_starved(struct sched *s, sched_model_t *model, sched_shape_t *cur)
{
    sched_shape_t *best = shapes_oldest_except(s, model, &cur, 1);
    uint64_t now = select_now(s);
    if (best == NULL || now <= best->oldest_ns ||
        now - best->oldest_ns <= budget_shape_bound(s, best))
        return NULL;
    return best;
}

/* Invariants 1-3: the model's one current shape. */
static sched_status_t select_sticky(struct sched *s, sched_model_t *model, sched_shape_t **out)
{
    sched_shape_t *cur = model->current;
    sched_shape_t *best = budget_age_bound(s, model) != 0 ? select_starved(s, model, cur) : NULL;
    if (best != NULL)
        s->counters.starvation_preemptions++;
    else if (cur != NULL && lanes_queued_tokens(cur->lanes) > 0) {
        *out = cur;
        return SCHED_OK;
    }
    if (best == NULL)
        best = heap_top(model, HEAP_TOKENS);
    if (best == NULL)
        return SCHED_EEMPTY;
    if ((s->store_status = store_current_shape_set(s->store, model->name, best->signature)) !=
        STORE_OK)
        return SCHED_ESTORE;
    if (cur != NULL)
        s->counters.shape_switches++;
    model->current = best;
    *out = best;
    return SCHED_OK;
}

/* Invariant 5 (a, b): the aged shape the worker serves first, or NULL. */
static sched_shape_t *select_affine_aged(struct sched *s, sched_model_t *model,
                                         const struct sched_worker *w, uint64_t now)
{
    sched_shape_t *warm = NULL;
    uint64_t warm_t = 0, bound = budget_age_bound(s, model);
    for (uint32_t i = 0; i < w->n_warm; i++) {
        sched_shape_t *sh = w->warm[i];
        /* The bound is a lower bound of the oldest arrival: when even it is young, so is the
         * shape, and the store need not be read. */
        uint64_t b = budget_shape_bound(s, sh);
        if (lanes_queued_items(sh->lanes) == 0 || now <= sh->oldest_ns || now - sh->oldest_ns <= b)
            continue;
        uint64_t t = shapes_oldest_exact(s, model, sh);
        if (now > t && now - t > b && (warm == NULL || t < warm_t)) {
            warm = sh;
            warm_t = t;
        }
    }
    sched_shape_t *cold = shapes_oldest_except(s, model, w->warm, w->n_warm);
    /* under a budget a cold shape waits as long as a warm one may: until it is due, and never
     * for most of the budget */
    uint64_t cold_ns =
        model->slo_ns != 0 && bound > SELECT_COLD_NS && cold != NULL && budget_company(s, cold)
            ? bound
            : SELECT_COLD_NS;
    uint64_t cold_cap = (uint64_t)(SELECT_COLD_BUDGET_SHARE * (double)model->slo_ns);
    if (model->slo_ns != 0 && cold_cap < cold_ns)
        cold_ns = cold_cap;
    if (cold != NULL && now > cold->oldest_ns && now - cold->oldest_ns > cold_ns &&
        (warm == NULL || now - cold->oldest_ns > SELECT_STEAL_FACTOR * (now - warm_t)))
        return cold;
    if (cold != NULL && now <= cold->oldest_ns + cold_ns)
        s->retry_ns = cold->oldest_ns + cold_ns + 1; /* when (b) would take it */
    return warm;
}

/* The warm shape of w with the most queued tokens (ties: seen first), or NULL. */
static sched_shape_t *select_warm_most(const struct sched_worker *w)
{
    sched_shape_t *best = NULL;
    for (uint32_t i = 0; i < w->n_warm; i++) {
        sched_shape_t *sh = w->warm[i];
        uint64_t t = lanes_queued_tokens(sh->lanes);
        uint64_t bt = best != NULL ? lanes_queued_tokens(best->lanes) : 0;
        if (t != 0 && (best == NULL || t > bt || (t == bt && sh->seq < best->seq)))
            best = sh;
    }
    return best;
}

/* Invariant 5 (d): whether a cold shape's queue that fills no batch waits; if so s->retry_ns
 * is at the latest when to ask again. */
static int select_cold_company(struct sched *s, const sched_model_t *model, sched_shape_t *sh,
                               uint64_t now)
{
    if (model->slo_ns != 0)
        return budget_company(s, sh);
    uint64_t ask = 0;
    if (!budget_company_before(&model->gaps, now, sh->oldest_ns + SELECT_COLD_NS, &ask))
        return 0;
    if (s->retry_ns == 0 || ask < s->retry_ns)
        s->retry_ns = ask;
    return 1;
}

/* Invariant 5: the worker's own shapes. */
static sched_status_t select_affine(struct sched *s, sched_model_t *model,
                                    const sched_consumer_t *c, sched_shape_t **out)
{
    struct sched_worker *w = c->worker;
    sched_shape_t *cur = w->n_warm != 0 ? w->warm[0] : NULL, *best = NULL;
    uint64_t now = select_now(s);
    uint64_t bound = budget_age_bound(s, model);
    if (bound != 0 && (best = select_affine_aged(s, model, w, now)) != NULL && best != cur)
        s->counters.starvation_preemptions++;
    if (best == NULL && cur != NULL && lanes_queued_tokens(cur->lanes) > 0)
        best = cur;
    if (best == NULL)
        best = select_warm_most(w);
    if (best == NULL) { /* (d) */
        best = heap_top(model, HEAP_COLD);
        if (best == NULL)
            best = heap_top(model, HEAP_TOKENS);
        if (best != NULL && w->n_warm != 0 && bound != 0 &&
            lanes_queued_tokens(best->lanes) < c->contract.max_batch_tokens &&
            select_cold_company(s, model, best, now))
            return SCHED_EEMPTY; /* s->retry_ns: when (b) or company may take it */
    }
    if (best == NULL)
        return SCHED_EEMPTY;
    if (cur != NULL && best != cur)
        s->counters.shape_switches++;
    s->retry_ns = 0;
    *out = best;
    return SCHED_OK;
}

int select_affine_mode(const sched_model_t *model, const struct sched_worker *w)
{
    if (model->n_active > w->cache)
        return 1;
    if (model->n_active <= model->n_workers)
        return 0;
    uint32_t warm_active = 0; /* invariant 6: O(cache) */
    for (uint32_t i = 0; i < w->n_warm; i++)
        warm_active += lanes_queued_items(w->warm[i]->lanes) != 0;
    return warm_active < model->n_active;
}

sched_status_t select_shape(struct sched *s, sched_model_t *model, const sched_consumer_t *c,
                            sched_shape_t **out)
{
    struct sched_worker *w = c->worker;
    if (s->policy == SCHED_POLICY_SEED || w == NULL || !select_affine_mode(model, w))
        return select_sticky(s, model, out);
    return select_affine(s, model, c, out);
}

int select_lane_starved(struct sched *s, const sched_shape_t *shape, uint32_t *out_lane)
{
    uint64_t t = 0;
    uint32_t lane = 0;
    uint64_t age = budget_shape_bound(s, shape);
    if (age == 0)
        return 0;
    uint64_t now = select_now(s);
    /* The shape's bound is a lower bound of its oldest item: young, and no lane can be aged. */
    if (now <= shape->oldest_ns || now - shape->oldest_ns <= age)
        return 0;
    if (!shapes_oldest(s, shape, &t, &lane) || now <= t || now - t <= age)
        return 0;
    *out_lane = lane;
    return 1;
}
