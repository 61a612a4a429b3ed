/*
 * fill.c - the next batch for a consumer: the shape (select.c), the lane (the age bound, then
 * descending queued tokens), one lane packed to the contract (packer.c), then under the
 * `lanes` policy whole neighbouring lanes merged where it pays (extend.c), the batch id and the
 * shape guard.
 *
 * Invariants: sched.c's 2, 5 and 7 (fill only peeks at the items; every batch passes the guard
 * and is within the contract). The one write a fill makes is the store's next epoch, once per
 * 2^32 batch ids (sched.c invariant 4), which touches no item. A batch's prefix (the longest
 * prefix_tokens of its items) is priced at most at what its contract says the worker runs
 * (packer_prefix_price): it is the producer's claim, and it sizes what a miss costs, the
 * credit of merges under a budget and the sample the worker's cost estimate learns from.
 *
 * Rejected: peeking a lane's whole queue. The packer chooses from tokens and delivery counts
 * alone (store_peek_tokens, no entry read), in a window that grows (below); only the items it
 * takes are then peeked whole. Peeking the window whole read every entry in it, where a lane of
 * long items fills a batch with a few (4 items of 8,192 tokens fill a 32,768-token contract).
 */
#include "scheduler/core/sched_int.h"

#include "common/invariant.h"

#include <stdlib.h>

/* Scratch kept across ticks, in entries: a batch of one huge contract grows it to that
 * contract's cap, and the next tick gives the rest back. */
#define FILL_SCRATCH_KEEP (4u * SCHED_PEEK_FIRST)

sched_status_t fill_scratch_reserve(fill_scratch_t *f, size_t n)
{
    if (n <= f->cap)
        return SCHED_OK;
    store_view_t *views = realloc(f->views, n * sizeof(*views));
    if (views == NULL)
        return SCHED_ENOMEM;
    f->views = views;
    uint32_t *tokens = realloc(f->tokens, n * sizeof(*tokens));
    if (tokens == NULL)
        return SCHED_ENOMEM;
    f->tokens = tokens;
    uint32_t *deliveries = realloc(f->deliveries, n * sizeof(*deliveries));
    if (deliveries == NULL)
        return SCHED_ENOMEM;
    f->deliveries = deliveries;
    uint32_t *lane_of = realloc(f->lane_of, n * sizeof(*lane_of));
    if (lane_of == NULL)
        return SCHED_ENOMEM;
    f->lane_of = lane_of;
    f->cap = n;
    return SCHED_OK;
}

void fill_scratch_free(fill_scratch_t *f)
{
    free(f->views);
    free(f->tokens);
    free(f->deliveries);
    free(f->lane_of);
    free(f->arena); /* a merged batch's copies */
    *f = (fill_scratch_t){0};
}

void fill_scratch_trim(fill_scratch_t *f)
{
    if (f->cap > FILL_SCRATCH_KEEP)
        fill_scratch_free(f);
}

/*
 * Packs a batch from one lane into s->filled. SCHED_EEMPTY when the lane has nothing readable
 * (appended but not yet flushed). cap bounds the items a batch can hold.
 */
static sched_status_t fill_lane_pack(sched_t *s, const sched_consumer_t *consumer,
                                     sched_model_t *model, sched_shape_t *shape, uint32_t lane_id,
                                     uint64_t cap)
{
    lanes_lane_t lane;
    sched_status_t st = lanes_get(shape->lanes, lane_id, &lane);
    if (st != SCHED_OK)
        return st;
    size_t want = lane.queued_items < cap ? (size_t)lane.queued_items : (size_t)cap;
    /* The window grows until the packer stops short of it: a deep lane's batch of a few items
     * copies a few tokens, not the lane's. */
    size_t window = want < SCHED_PEEK_FIRST ? want : SCHED_PEEK_FIRST;
    size_t n = 0, take = 0;
    int dead = 0;
    packer_result_t pr = {0};
    for (;;) {
        if ((st = fill_scratch_reserve(&s->scratch, window)) != SCHED_OK)
            return st;
        const uint32_t *dlv = s->scratch.deliveries;
        if ((s->store_status = store_peek_tokens(s->store, lane.user, s->scratch.tokens,
                                                 s->scratch.deliveries, window, &n)) != STORE_OK)
            return SCHED_ESTORE;
        if (n == 0)
            break;
        dead = s->max_deliveries != 0 && dlv[0] >= s->max_deliveries;
        take = dead ? 1 : n;
        for (size_t i = 1; !dead && s->max_deliveries != 0 && i < take; i++) {
            if (dlv[i] >= s->max_deliveries)
                take = i; /* stop before it: it goes out alone as a dead letter next */
        }
        if ((st = packer_fill(&consumer->contract, s->scratch.tokens, take, &pr)) != SCHED_OK)
            return st;
        if (pr.count < take || take < n || n < window || window == want)
            break;
        window = window * 2 < want ? window * 2 : want;
    }
    if (n == 0)
        return SCHED_EEMPTY;
    size_t got = 0; /* the items taken, whole */
    if ((s->store_status = store_peek(s->store, lane.user, s->scratch.views, pr.count, &got)) !=
        STORE_OK)
        return SCHED_ESTORE;
    if (got != pr.count) { /* the queue changed between two calls with nothing between them */
        s->store_status = STORE_ESTALE;
        return SCHED_ESTORE;
    }
    uint32_t prefix = 0;
    for (size_t i = 0; i < pr.count; i++) {
        s->scratch.lane_of[i] = lane_id;
        if (s->scratch.views[i].prefix_tokens > prefix)
            prefix = s->scratch.views[i].prefix_tokens;
    }
    prefix = packer_prefix_price(&consumer->contract, prefix); /* a claim (above) */
    s->filled = (sched_batch_t){
        .batch_id = 0, /* given when the batch is final (sched_fill) */
        .model_view = model->name,
        .signature = shape->signature,
        .lane = lane_id,
        .lanes = 1,
        .pad_to = pr.pad_to,
        .padded_tokens = pr.padded_tokens,
        .real_tokens = pr.real_tokens,
        .prefix_tokens = prefix,
        .n = pr.count,
        .items_view = s->scratch.views,
        .dead_letter = dead,
    };
    /* The whole lane went in and there is room: neighbouring lanes may join (extend.c). */
    s->filled_extendable = pr.count == n && n == lane.queued_items;
    return SCHED_OK;
}

/* The filled batch's id (sched.c invariant 4: a new epoch once 2^32 ids are spent). */
static sched_status_t fill_batch_id(sched_t *s)
{
    if ((uint32_t)s->next_batch_id == UINT32_MAX) {
        uint32_t epoch;
        if ((s->store_status = store_epoch_next(s->store, &epoch)) != STORE_OK)
            return SCHED_ESTORE;
        s->next_batch_id = (uint64_t)epoch << SCHED_EPOCH_SHIFT | 1u;
    }
    s->filled.batch_id = s->next_batch_id++;
    return SCHED_OK;
}

/* fill_lane_pack, then the `lanes` policy's merge, the batch id, the guard. `budgeted`: the
 * model's wait budget rules this fill (fill_pick decides it once). */
static sched_status_t fill_lane(sched_t *s, const sched_consumer_t *consumer, sched_model_t *model,
                                sched_shape_t *shape, uint32_t lane_id, uint64_t cap, int budgeted,
                                sched_batch_t *out)
{
    sched_status_t st = fill_lane_pack(s, consumer, model, shape, lane_id, cap);
    if (st != SCHED_OK)
        return st;
    packer_cost_t cost;
    int costed = s->policy == SCHED_POLICY_LANES && consumer->worker != NULL &&
                 worker_cost(consumer->worker, &cost);
    if (costed && budgeted && s->filled_extendable) {
        /* budget.c invariant 6: the neighbours that fill the batch, at the whole fixed cost */
        if ((st = extend_fill(s, consumer, &cost, shape, cap, 1)) != SCHED_OK)
            return st;
        if (!budget_full(&s->filled, &consumer->contract) &&
            ((st = fill_lane_pack(s, consumer, model, shape, lane_id, cap)) != SCHED_OK ||
             (st = extend_fill(s, consumer, &cost, shape, cap, 0)) != SCHED_OK))
            return st;
    } else if (costed && s->filled_extendable &&
               (st = extend_fill(s, consumer, &cost, shape, cap, 0)) != SCHED_OK) {
        return st;
    }
    /* What the worker pays for the prefix, as the core models its cache (worker.c). */
    s->filled.prefix_charged = consumer->worker != NULL && worker_is_warm(consumer->worker, shape)
                                   ? 0
                                   : s->filled.prefix_tokens;
    uint64_t until, now = s->fill_now_ns;
    if (budgeted ? budget_hold(s, consumer, model, shape, now, &until)
                 : costed && hold_batch(s, consumer, model, &cost, now, &until)) {
        s->held = 1;
        s->retry_ns = until;
        return SCHED_EEMPTY;
    }
    if ((st = fill_batch_id(s)) != SCHED_OK)
        return st;
    sched_guard_check(&s->filled, shape->signature);
    INVARIANT_CHECK(sched_batch_check(&s->filled, &consumer->contract));
    s->filled_shape = shape;
    /* A dead letter never reaches the worker: it is no sample of its cost, nor its cache. */
    s->filled_worker = s->filled.dead_letter ? NULL : consumer->worker;
    s->filled_valid = 1;
    *out = s->filled;
    return SCHED_OK;
}

/* The batch of one shape: the lane holding its oldest item once that item is past the age bound
 * (select.c invariant 4), else its lanes by descending queued tokens. Under a budget a held lane
 * leaves the fullest lane its turn (it may be full); s->held and the earlier retry when neither
 * goes. */
static sched_status_t fill_shape(sched_t *s, const sched_consumer_t *consumer, sched_model_t *model,
                                 sched_shape_t *shape, uint64_t cap, int budget, sched_batch_t *out)
{
    uint32_t lane_id = 0, prev = 0;
    sched_status_t st;
    if (select_lane_starved(s, shape, &lane_id)) {
        uint32_t starved = lane_id;
        st = fill_lane(s, consumer, model, shape, lane_id, cap, budget, out);
        if (st != SCHED_EEMPTY || (s->held && !budget))
            return st;
        if (s->held) {
            uint64_t retry = s->retry_ns;
            if (lanes_next_by_tokens(shape->lanes, NULL, &lane_id) && lane_id != starved) {
                s->held = 0;
                st = fill_lane(s, consumer, model, shape, lane_id, cap, budget, out);
                if (st != SCHED_EEMPTY && !s->held)
                    return st;
                if (s->held && s->retry_ns < retry)
                    retry = s->retry_ns;
            }
            s->held = 1;
            s->retry_ns = retry;
            return SCHED_EEMPTY;
        }
    }
    for (int more = lanes_next_by_tokens(shape->lanes, NULL, &lane_id); more;
         prev = lane_id, more = lanes_next_by_tokens(shape->lanes, &prev, &lane_id)) {
        st = fill_lane(s, consumer, model, shape, lane_id, cap, budget, out);
        if (budget && s->held) {
            /* the lane of the shape's oldest item is due first, maybe before the fullest */
            uint64_t aged = shapes_oldest_exact(s, model, shape) + budget_age_bound(s, model) + 1;
            if (aged < s->retry_ns && aged > s->fill_now_ns)
                s->retry_ns = aged;
        }
        if (st != SCHED_EEMPTY || s->held)
            return st;
    }
    return SCHED_EEMPTY;
}

static sched_status_t fill_pick(sched_t *s, const sched_consumer_t *consumer, sched_model_t *model,
                                sched_batch_t *out)
{
    sched_shape_t *shape;
    sched_status_t st = select_shape(s, model, consumer, &shape);
    if (st != SCHED_OK)
        return st;
    /* No batch can hold more items than the budget fits at the smallest pad, whatever size the
     * consumer asked for, so that bounds the peek (and the scratch a remote number can grow). */
    uint64_t cap = consumer->contract.max_batch_tokens / PACKER_PAD_MULTIPLE;
    if (cap == 0)
        cap = 1;
    if (cap > consumer->contract.max_batch_size)
        cap = consumer->contract.max_batch_size;
    const struct sched_worker *w = consumer->worker;
    int budget = budget_on(s, consumer, model);
    st = fill_shape(s, consumer, model, shape, cap, budget, out);
    if (!budget || !s->held)
        return st;
    /* Under a budget the chosen shape waits for company: another shape may have a batch that goes
     * now (select.c invariant 7): the worker's warm shapes where shapes outnumber its cache (no
     * miss), else the model's fullest and oldest shapes (all of them fit it). */
    uint64_t retry = s->retry_ns;
    int affine = select_affine_mode(model, w);
    sched_shape_t *tried[SCHED_CACHE_SHAPES_MAX + 2];
    size_t n_tried = 0, n_cand = affine ? w->n_warm : 2;
    tried[n_tried++] = shape;
    for (size_t k = 0; k < n_cand; k++) {
        sched_shape_t *alt =
            affine ? w->warm[k] : heap_top(model, k == 0 ? HEAP_TOKENS : HEAP_OLDEST);
        int seen = alt == NULL || lanes_queued_items(alt->lanes) == 0;
        for (size_t t = 0; t < n_tried && !seen; t++)
            seen = tried[t] == alt;
        if (seen)
            continue;
        tried[n_tried++] = alt;
        s->held = 0;
        st = fill_shape(s, consumer, model, alt, cap, budget, out);
        if (st != SCHED_EEMPTY && !s->held)
            return st;
        if (s->held && s->retry_ns < retry)
            retry = s->retry_ns;
    }
    s->held = 1;
    s->retry_ns = retry;
    return SCHED_EEMPTY;
}

sched_status_t sched_fill(sched_t *s, const sched_consumer_t *consumer, sched_batch_t *out)
{
    if (s == NULL || consumer == NULL || consumer->model == NULL || out == NULL ||
        consumer->contract.max_batch_size == 0 || consumer->contract.max_batch_tokens == 0)
        return SCHED_EINVAL;
    s->filled_valid = 0;
    sched_model_t *model = consumer->model;
    s->retry_ns = 0;
    s->held = 0;
    s->fill_now_ns = s->clock(s->clock_ctx);
    hold_contract_note(model, &consumer->contract, s->fill_now_ns);
    if (budget_held_again(s, consumer, model)) { /* budget.c invariant 7 */
        s->counters.holds++;
        return SCHED_EEMPTY;
    }
    uint64_t switches = s->counters.shape_switches;
    uint64_t preemptions = s->counters.starvation_preemptions;
    sched_status_t st = fill_pick(s, consumer, model, out);
    budget_held_note(s, consumer, model);
    if (s->held) { /* select.c invariant 2: counted only for a batch that goes out */
        s->counters.holds++;
        s->counters.shape_switches = switches;
        s->counters.starvation_preemptions = preemptions;
    }
    return st;
}

int sched_model_oldest(sched_t *s, sched_model_t *model, uint64_t *out_ns)
{
    sched_shape_t *top = s != NULL && model != NULL ? shapes_oldest_top(s, model) : NULL;
    if (top == NULL || lanes_queued_items(top->lanes) == 0)
        return 0;
    *out_ns = top->oldest_ns; /* exact once at the top (shapes.c invariant 5) */
    return 1;
}

sched_status_t sched_fill_expired(sched_t *s, sched_model_t *model, uint64_t cutoff_ns,
                                  sched_batch_t *out)
{
    if (s == NULL || model == NULL || out == NULL)
        return SCHED_EINVAL;
    s->filled_valid = 0;
    sched_shape_t *top = shapes_oldest_top(s, model);
    uint64_t oldest = 0;
    uint32_t lane = 0;
    if (top == NULL || top->oldest_ns > cutoff_ns || !shapes_oldest(s, top, &oldest, &lane) ||
        oldest > cutoff_ns)
        return SCHED_EEMPTY;
    /* one item, whatever its length: the contract of a batch of one */
    const sched_consumer_t one = {model, {1, UINT32_MAX, 0}, NULL};
    sched_status_t st = fill_lane_pack(s, &one, model, top, lane, 1);
    if (st == SCHED_OK)
        st = fill_batch_id(s);
    if (st != SCHED_OK)
        return st;
    s->filled.dead_letter = 1;
    sched_guard_check(&s->filled, top->signature);
    s->filled_shape = top;
    s->filled_worker = NULL;
    s->filled_valid = 1;
    *out = s->filled;
    return SCHED_OK;
}
