/*
 * extend.c - cost-aware packing (the `lanes` policy): a batch taken from one lane grows with the
 * items of whole neighbouring lanes of the same shape while each merge saves the worker time.
 *
 * The rule (packer_merge_saving): merging a lane's items, whose own batch would pad to pad_c,
 * into the batch saves that separate batch's fixed cost and costs the padding the merged batch
 * adds over the two apart. It is applied greedily: each round looks at the nearest lane holding
 * items below the batch (shorter items: they pad up to the batch) and above it (longer: the
 * batch pads up to them), takes the one whose merge saves more, and stops when neither saves
 * anything or the contract is full. The shape never changes (the lanes are the shape's own), and
 * pad_to stays the longest item taken, rounded up to PACKER_PAD_MULTIPLE.
 *
 * Invariants:
 *   1. A lane is merged whole (every readable item) or not at all (but see 5): a part would not
 *      save the lane's batch, only shrink it. Its items keep their order, after the items taken
 *      before.
 *   2. The merged batch is within the contract (count, padded budget) and every merge had a
 *      positive saving at the worker's cost; the batch never contains a dead letter.
 *   3. No view of the batch is transient once the next lane is peeked: a backend may reuse its
 *      read buffer from one peek to the next (the disk store without a mapping does, and marks
 *      such views transient), and the batch must outlive the peeks that built it. Once a view of
 *      the batch is transient, every view of it is copied into the scheduler's arena, and so is
 *      every lane taken after. Views that outlive the peeks (the memory store's, the disk
 *      store's mappings) are not copied: with large payloads the copy was a visible share of the
 *      daemon's time (docs/throughput.md, "Other mixes").
 *   4. Under a wait budget (budget.c) a lane left out waits for company of its own until it is
 *      due, so a merge is credited with the lane's items' share of the fixed cost of a full batch
 *      of their own (n_add / the items of their pad the contract fits), or EXTEND_DUE_CREDIT of
 *      the fixed cost times the share of its due age its oldest item waited if more, instead of
 *      merge_credit; a batch that misses the worker's cache adds its prefix to every credit.
 *   5. Filling to the contract under a wait budget (budget.c invariant 6, EXTEND_FULL_CREDIT),
 *      the last lane may be taken in part: its front, as many items as the contract still fits.
 *      The batch then goes full, which the budget would otherwise wait for; the rest of the lane
 *      keeps its order, and the rejection of parts below is about saving a batch, which a full
 *      one does not need. Each lane is credited as in 4 (its items' share of a full batch, or
 *      its due credit), times EXTEND_FULL_CREDIT: a lane of one young item left out waits for
 *      company of its own, so merging it saves a share of a batch, not a batch.
 *   6. A neighbouring lane is judged from its tokens and delivery counts (store_peek_tokens,
 *      which the disk store answers from memory); its entries are read only once it is taken.
 *      Most lanes looked at are not taken, and reading an entry is a cache miss or more.
 *   7. Without a budget the credit is merge_credit, and merge_credit_loaded while the model's
 *      offered load (hold.c invariant 1, measured from arrivals) is where the hold is whole:
 *      the queue sets the wait then, and a batch saved is worker time every queued item gets
 *      back.
 *
 * The scan is bounded: below the batch a lane is looked at only while one item of it would pad
 * by less than the fixed cost (farther lanes are shorter still); above, the side closes at the
 * first lane whose merge does not pay (farther lanes are longer still). Empty lanes are skipped.
 *
 * Rejected:
 *   - Merging parts of lanes to fill the budget exactly: the part left behind still needs its
 *     own batch, so the fixed cost is not saved, and the lane's order would be split.
 *   - A global optimum (a knapsack over every lane of the shape): the greedy nearest-first rule
 *     is what the saving formula prices exactly, and the sweep shows the gain is in the first
 *     few neighbours.
 *   - Crediting a lane by its chance of seeing no arrival soon (an EWMA of its arrival gaps):
 *     steady lands on the same waste/GPU front as the plain credit. A credit rising with the
 *     load towards the whole fixed cost, or a higher credit at every load: padding spends what
 *     the batches saved, less capacity at the SLO, more waste at moderate load
 *     (`lanesched-bench sweep --preset steady`; docs/policy.md, "Choosing the constants").
 */
#include "scheduler/core/sched_int.h"

#include <stdlib.h>
#include <string.h>

/* Whether a view of views[from, to) lies in a buffer the next peek may reuse (invariant 3). */
static int extend_transient(const struct sched *s, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (s->scratch.views[i].transient)
            return 1;
    return 0;
}

/* Copies the ids and payloads of views[from, to) into the arena and points them there; rebases
 * views[0, from) (already in the arena) when it moves. */
static sched_status_t extend_copy(struct sched *s, size_t *used, size_t from, size_t to)
{
    size_t bytes = 0;
    for (size_t i = from; i < to; i++)
        bytes += s->scratch.views[i].id_len + s->scratch.views[i].payload_len;
    if (*used + bytes > s->scratch.arena_cap) {
        size_t cap = s->scratch.arena_cap ? s->scratch.arena_cap : 4096;
        while (cap < *used + bytes)
            cap *= 2;
        uint8_t *a = realloc(s->scratch.arena, cap);
        if (a == NULL)
            return SCHED_ENOMEM;
        if (a != s->scratch.arena) {
            for (size_t i = 0; i < from; i++) { /* invariant 3 */
                s->scratch.views[i].id_view = a + (s->scratch.views[i].id_view - s->scratch.arena);
                s->scratch.views[i].payload_view =
                    a + (s->scratch.views[i].payload_view - s->scratch.arena);
            }
        }
        s->scratch.arena = a;
        s->scratch.arena_cap = cap;
    }
    for (size_t i = from; i < to; i++) {
        store_view_t *v = &s->scratch.views[i];
        uint8_t *id = s->scratch.arena + *used;
        if (v->id_len != 0)
            memcpy(id, v->id_view, v->id_len);
        uint8_t *payload = id + v->id_len;
        if (v->payload_len != 0)
            memcpy(payload, v->payload_view, v->payload_len);
        v->id_view = id;
        v->payload_view = payload;
        v->transient = 0;
        *used += v->id_len + v->payload_len;
        s->counters.fill_copied_bytes += v->id_len + v->payload_len;
    }
    return SCHED_OK;
}

/* Invariant 3 for views[0, to), of which views[from, to) came since the last call: once the batch
 * is in the arena (*copied), the new views join it; else, once any view is transient, the whole
 * batch goes there. */
static sched_status_t extend_keep(struct sched *s, size_t *used, int *copied, size_t from,
                                  size_t to)
{
    if (*copied)
        return extend_copy(s, used, from, to);
    if (!extend_transient(s, 0, to))
        return SCHED_OK;
    *copied = 1;
    return extend_copy(s, used, 0, to);
}

/* Under a wait budget, a lane whose oldest item is due is credited with this share of the fixed
 * cost (and a younger lane with it times the share of its due age it waited): a lane left out
 * goes soon, but often with a neighbour of its own. The share with the least GPU time on steady,
 * bursty and churn at --slo-ms 5000 and 1000 (`lanesched-bench sim --preset P --prefixes --slo-ms
 * N`, 0.25 to 1; docs/policy.md, "The wait budget"). */
#define EXTEND_DUE_CREDIT 0.5
/* Filling a batch to the contract under a budget (budget.c invariant 6), a merge is credited
 * with this share of the fixed cost: less leaves a long queue behind due batches at high load,
 * more spends GPU time on padding at every budget (`lanesched-bench sweep --preset steady
 * --prefixes --slo-ms 5000`, `sim --preset P --prefixes --slo-ms 1000|5000`; docs/policy.md,
 * "The wait budget"). It scales each lane's own credit (invariant 5), not the whole fixed cost:
 * where a token is cheap against the fixed cost, a whole fixed cost per lane padded batches to
 * full with lanes of one or two young items, for more GPU time than the tuned buckets (`sim
 * --preset steady --slo-ms 5000 --ns-per-token 1000 --seed 42|1|7`; docs/policy.md). */
#define EXTEND_FULL_CREDIT 0.45

/* The cost a merge of n_add items padded to pad_add is judged at (into *out, returned): the
 * credited cost, and under a wait budget its fixed part scaled to the items' share of a full
 * batch of their own (invariant 4). */
static const packer_cost_t *extend_credit(const packer_cost_t *cost, const packer_contract_t *k,
                                          int budget, uint64_t n_add, uint32_t pad_add,
                                          double waited, packer_cost_t *out)
{
    *out = *cost;
    if (budget) {
        uint64_t full = pad_add != 0 ? k->max_batch_tokens / pad_add : k->max_batch_size;
        if (full > k->max_batch_size)
            full = k->max_batch_size;
        double share = full > n_add ? (double)n_add / (double)full : 1.0;
        waited = EXTEND_DUE_CREDIT * (waited < 1.0 ? waited : 1.0);
        if (waited > share)
            share = waited;
        out->fixed_ns *= share;
    }
    return out;
}

/* The next lane holding items from sorted index *idx in direction dir (-1, +1); 0 at the end. */
static int extend_next(const lanes_t *lanes, int64_t *idx, int dir, lanes_lane_t *out)
{
    for (; *idx >= 0 && *idx < (int64_t)lanes_sorted_count(lanes); *idx += dir) {
        if (lanes_get(lanes, lanes_sorted_lane(lanes, (uint32_t)*idx), out) == SCHED_OK &&
            out->queued_items != 0 && out->user != NULL)
            return 1;
    }
    return 0;
}

sched_status_t extend_fill(struct sched *s, const sched_consumer_t *c, const packer_cost_t *worker,
                           sched_shape_t *shape, uint64_t cap, int full)
{
    /* The fixed cost a merge is credited with (sched_config_t.merge_credit, invariant 7); under
     * a wait budget, per lane (invariant 4). */
    packer_cost_t credited = *worker;
    const sched_model_t *model = s->models[shape->model_idx];
    int budget = model->slo_ns != 0 && !full;
    int priced = model->slo_ns != 0; /* each lane credited by its share (invariants 4, 5) */
    uint64_t now = s->fill_now_ns;   /* how long a lane's front waited; load */
    credited.fixed_ns *=
        full     ? EXTEND_FULL_CREDIT
        : budget ? 1.0
        : hold_load(model, &c->contract, worker, now) >= s->hold_load + s->hold_ramp
            ? s->merge_credit_loaded
            : s->merge_credit;
    /* under a budget a batch that misses the cache also saves its prefix for every lane it takes
     * along: left out, they would make another worker (or this one, later) pay it again */
    if ((budget || full) && (c->worker == NULL || !worker_is_warm(c->worker, shape)))
        credited.fixed_ns += worker->token_ns * (double)s->filled.prefix_tokens;
    const packer_cost_t *cost = &credited;
    sched_batch_t *b = &s->filled;
    uint32_t pos;
    if (b->dead_letter || !lanes_sorted_pos(shape->lanes, b->lane, &pos))
        return SCHED_OK;
    const packer_contract_t *k = &c->contract;
    size_t n = b->n, used = 0;
    uint32_t pad = b->pad_to;
    uint64_t real = b->real_tokens;
    int copied = 0;
    int64_t idx[2] = {(int64_t)pos - 1, (int64_t)pos + 1};
    int open[2] = {1, 1};
    static const int dir[2] = {-1, +1};
    while ((open[0] || open[1]) && n < cap) {
        /* The side whose next lane, judged by its target, would save more. */
        lanes_lane_t cand[2];
        double est[2] = {0, 0};
        packer_cost_t lane_cost[2];
        for (int d = 0; d < 2; d++) {
            if (!open[d] || !extend_next(shape->lanes, &idx[d], dir[d], &cand[d])) {
                open[d] = 0;
                continue;
            }
            uint32_t pad_c = (uint32_t)packer_pad(cand[d].target);
            if (d == 0 &&
                cost->token_ns * (double)(pad > pad_c ? pad - pad_c : 0) >= cost->fixed_ns) {
                open[d] = 0; /* one item this far below already pads by a whole batch */
                continue;
            }
            est[d] = packer_merge_saving(
                extend_credit(cost, k, priced, cand[d].queued_items, pad_c, 0.0, &lane_cost[d]), n,
                pad, cand[d].queued_items, pad_c);
        }
        int d = !open[0] ? 1 : !open[1] ? 0 : est[1] > est[0];
        if (!open[d])
            break;
        /* Judge it whole (one more than fits, to see that it does not) from its tokens and
         * delivery counts alone, which the store keeps in memory: the entries themselves are
         * read (store_peek) only for a lane that is taken (invariant 6). */
        size_t room = cap - n;
        size_t want = cand[d].queued_items < room ? (size_t)cand[d].queued_items + 1 : room + 1;
        sched_status_t st = fill_scratch_reserve(&s->scratch, n + want);
        if (st != SCHED_OK)
            return st;
        uint32_t *tok = s->scratch.tokens + n, *dlv = s->scratch.deliveries + n;
        size_t got = 0;
        if ((s->store_status = store_peek_tokens(s->store, cand[d].user, tok, dlv, want, &got)) !=
            STORE_OK)
            return SCHED_ESTORE;
        if (full && got > room) { /* invariant 5: the front of the lane fills it */
            size_t g = 0;
            uint32_t lg = pad;
            while (g < room && g < got) {
                uint32_t t = (uint32_t)packer_pad(tok[g]);
                uint32_t p = t > lg ? t : lg;
                if (n + g + 1 > k->max_batch_size ||
                    (uint64_t)(n + g + 1) * p > k->max_batch_tokens)
                    break;
                lg = p;
                g++;
            }
            if (g != 0) {
                got = g;
                cand[d].queued_items = g; /* taken in part: the batch is full with it */
            }
        }
        uint64_t longest = 0, add_real = 0;
        int fits = got != 0 && got <= room && got >= cand[d].queued_items;
        for (size_t i = 0; fits && i < got; i++) {
            if (s->max_deliveries != 0 && dlv[i] >= s->max_deliveries)
                fits = 0; /* a dead letter goes out alone (invariant 2) */
            longest = tok[i] > longest ? tok[i] : longest;
            add_real += tok[i];
        }
        uint32_t pad_c = (uint32_t)packer_pad(longest);
        uint32_t pad_m = pad > pad_c ? pad : pad_c;
        fits = fits && n + got <= k->max_batch_size &&
               (uint64_t)(n + got) * pad_m <= k->max_batch_tokens;
        /* a lane whose oldest item is due goes now in any case: its own batch would be as
         * small as it is (invariant 4) */
        double waited = 0.0; /* read by the budget's credit alone */
        if (priced) {
            uint64_t due_ns = model->due_ns, first = 0;
            int any = got != 0 && store_queue_oldest(s->store, cand[d].user, &first);
            waited = !any || first <= shape->drain_ns || first + due_ns <= now ? 1.0
                     : now > first ? (double)(now - first) / (double)due_ns
                                   : 0.0;
        }
        if (!fits ||
            packer_merge_saving(extend_credit(cost, k, priced, got, pad_c, waited, &lane_cost[d]),
                                n, pad, got, pad_c) <= 0.0) {
            if (d == 1)
                open[1] = 0; /* longer lanes only cost more */
            else
                idx[0]--;
            continue;
        }
        /* Taken: its entries are read now, after any transient view of the batch moved to the
         * arena (invariant 3). */
        if ((st = extend_keep(s, &used, &copied, n, n)) != SCHED_OK)
            return st;
        size_t viewed = 0;
        if ((s->store_status = store_peek(s->store, cand[d].user, s->scratch.views + n, got,
                                          &viewed)) != STORE_OK)
            return SCHED_ESTORE;
        if (viewed != got) { /* nothing changed the queue since it was counted */
            s->store_status = STORE_ESTALE;
            return SCHED_ESTORE;
        }
        uint32_t lane_id = lanes_sorted_lane(shape->lanes, (uint32_t)idx[d]);
        if ((st = extend_keep(s, &used, &copied, n, n + got)) != SCHED_OK)
            return st;
        uint32_t add_prefix = 0; /* the lane's tokens are in place already (tok) */
        for (size_t i = 0; i < got; i++) {
            uint32_t pt = s->scratch.views[n + i].prefix_tokens;
            add_prefix = pt > add_prefix ? pt : add_prefix;
            s->scratch.lane_of[n + i] = lane_id;
        }
        n += got;
        pad = pad_m;
        real += add_real;
        add_prefix = packer_prefix_price(k, add_prefix); /* a claim (fill.c) */
        if (add_prefix > b->prefix_tokens)
            b->prefix_tokens = add_prefix;
        b->lanes++;
        idx[d] += dir[d];
    }
    b->n = n;
    b->pad_to = pad;
    b->real_tokens = real;
    b->padded_tokens = (uint64_t)n * pad;
    b->items_view = s->scratch.views;
    return SCHED_OK;
}
