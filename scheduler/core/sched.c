/*
 * sched.c - the life of an item and a batch: submit -> queued in a lane -> fill (peek, pack,
 * guard) -> commit (store's three steps) -> in flight -> complete (tombstone) or return.
 *
 * Owns: the shape table (through shapes.c), the in-flight batch records, the fill scratch
 * buffers and the counters. Borrows the store.
 *
 * Invariants:
 *   1. tokens_received = tokens queued + tokens in flight + tokens_completed, at every step;
 *      an item is in exactly one of those states (the store holds it, the lanes count it).
 *   2. sched_fill (fill.c) changes nothing but the fill scratch, the model's current shape
 *      and what selection learns on the way (exact age bounds); an uncommitted batch leaves its
 *      items queued, in place.
 *   3. sched_commit accepts only the batch of the last sched_fill, and only if nothing mutated
 *      since: its views would otherwise be stale.
 *   4. Batch ids increase and are never reused, so an ack for a settled or unknown batch is
 *      recognised and changes nothing. An id is the store's epoch (store_epoch_next, a new one
 *      at every open) times 2^32 plus a count from 1, so an id from before a restart is never
 *      handed out again; a run that counts past 2^32 - 1 batches takes a new epoch. Ids stay
 *      below 2^53, exact in every JSON reader and in JavaScript numbers.
 *   5. Every batch passes the shape guard before sched_fill returns it.
 *   6. Counters: routed counts every delivery (redeliveries again); completed counts an item's
 *      first completion only.
 *   7. Every batch sched_fill returns is within the consumer's contract: 1 to max_batch_size
 *      items, pad_to the longest rounded up to PACKER_PAD_MULTIPLE, count * pad_to within
 *      max_batch_tokens unless a single item alone exceeds it.
 *   8. A batch merged from several lanes commits whole or not at all: each lane's items are the
 *      front of that lane's queue, committed lane by lane, and a lane that fails puts back the
 *      ones before it. Where the put-back fails too, those items stay in flight under the
 *      batch's id without a holder until the caller returns them: never pending in the store
 *      with no record. Completion and return count each item against its own lane.
 *   9. A batch committed to a worker makes its shape the most recent in that worker's cache
 *      model; its completion (the first ack) is one sample of the worker's cost (worker.c).
 *  10. The in-flight record is the batch's one record: its items, its holder (the worker it was
 *      committed to, which lists its batches) and its ack deadline. It goes when its last
 *      position is settled, and leaves its holder's list then; a holder destroyed first leaves
 *      it without one.
 *   Debug builds check 1 after every operation with the totals each part keeps, and the touched
 *   lane's counts against the store's; 7 for every batch filled; everything, every lane and
 *   every in-flight record recounted, at create and at every tick (sched_check).
 *
 * Rejected: committing at fill time. The consumer's channel may refuse the batch (publish
 * fails, connection drops); committing before it took the batch would strand the items as
 * pending for a consumer that never saw them.
 */
#include "scheduler/core/sched_int.h"

#include "common/invariant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

STATUS_STR(sched_status_str, sched_status_t, SCHED_STATUS_MAP, "unknown scheduler status")

const char *sched_policy_name(sched_policy_t policy)
{
    switch (policy) {
    case SCHED_POLICY_LANES:
        return "lanes";
    case SCHED_POLICY_SEED:
        return "lanes-seed";
    default:
        return NULL;
    }
}

static uint64_t sched_now(const sched_t *s)
{
    return s->clock(s->clock_ctx);
}

/*
 * Rebuilds shapes and lanes from the queues a recovered store already holds. Empty queues are
 * released (their lane ids are free); each model's current shape comes back from the store.
 */
static sched_status_t sched_restore(sched_t *s)
{
    uint64_t now = sched_now(s);
    store_queue_t *q = NULL, *next;
    store_key_t key;
    uint32_t target;
    for (int more = store_queue_next(s->store, NULL, &next, &key, &target); more;) {
        q = next;
        store_key_t k = key;
        uint32_t t = target;
        more = store_queue_next(s->store, q, &next, &key, &target);
        uint64_t items, tokens;
        store_queue_count(q, &items, &tokens);
        if (items == 0) {
            if (store_queue_release(s->store, q) != STORE_OK)
                return SCHED_ESTORE;
            continue;
        }
        sched_model_t *model;
        sched_shape_t *shape;
        sched_status_t st = model_intern(s, k.model, &model);
        if (st == SCHED_OK)
            st = shapes_intern(s, model, k.signature, &shape);
        if (st == SCHED_OK)
            st = lanes_restore(shape->lanes, k.lane, t, items, tokens, now);
        if (st != SCHED_OK)
            return st;
        lanes_user_set(shape->lanes, k.lane, q);
        shape->oldest_ns = 0; /* a lower bound until the age bound reads it (heap.c) */
        shape->oldest_stale = 1;
        shapes_queued_note(s, shape, lanes_queued_items(shape->lanes) - items,
                           lanes_queued_tokens(shape->lanes) - tokens);
        s->items_restored += items;
        s->tokens_restored += tokens;
    }
    for (size_t i = 0; i < s->n_models; i++) {
        int has = 0;
        uint64_t sig = 0;
        if (store_current_shape_get(s->store, s->models[i]->name, &has, &sig) != STORE_OK)
            return SCHED_ESTORE;
        if (has)
            s->models[i]->current = map_get(&s->shapes, (map_key_t){sig, i});
    }
    return SCHED_OK;
}

double sched_hold_burst_resolve(double configured)
{
    return configured < 0.0 ? 0.0 : configured > 0.0 ? configured : SCHED_HOLD_BURST_DEFAULT;
}

void sched_merge_credit_resolve(double credit, double loaded, double *out_credit,
                                double *out_loaded)
{
    *out_credit = credit > 0.0 ? credit : SCHED_MERGE_CREDIT_DEFAULT;
    *out_loaded = loaded > 0.0 ? loaded : fmin(1.0, SCHED_MERGE_CREDIT_LOADED * *out_credit);
}

sched_status_t sched_create(const sched_config_t *config, store_t *store, sched_t **out)
{
    if (config == NULL || config->clock == NULL || store == NULL || out == NULL ||
        config->max_lanes > LANES_MAX || (unsigned)config->policy >= SCHED_POLICY_COUNT ||
        !(config->merge_credit >= 0.0 && config->merge_credit <= 1.0) ||
        !(config->merge_credit_loaded >= 0.0 && config->merge_credit_loaded <= 1.0))
        return SCHED_EINVAL;
    sched_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return SCHED_ENOMEM;
    s->store = store;
    s->max_lanes = config->max_lanes ? config->max_lanes : LANES_MAX;
    s->clock = config->clock;
    s->clock_ctx = config->clock_ctx;
    s->max_deliveries = config->max_deliveries;
    s->starvation_ns = config->starvation_ns;
    s->policy = config->policy;
    sched_merge_credit_resolve(config->merge_credit, config->merge_credit_loaded, &s->merge_credit,
                               &s->merge_credit_loaded);
    s->hold_ns = config->policy == SCHED_POLICY_LANES ? config->hold_ns : 0;
    s->hold_load = config->hold_load > 0.0 ? config->hold_load : SCHED_HOLD_LOAD_DEFAULT;
    s->hold_share = config->hold_share > 0.0 ? config->hold_share : SCHED_HOLD_SHARE_DEFAULT;
    s->hold_ramp = config->hold_ramp > 0.0 ? config->hold_ramp : SCHED_HOLD_RAMP_DEFAULT;
    s->hold_burst = sched_hold_burst_resolve(config->hold_burst);
    s->slo_ns = config->slo_ns;
    map_init(&s->model_names);
    map_init(&s->shapes);
    map_init(&s->inflight);
    uint32_t epoch = 0;
    sched_status_t st = SCHED_ESTORE;
    if ((s->store_status = store_epoch_next(store, &epoch)) == STORE_OK) {
        s->next_batch_id = (uint64_t)epoch << SCHED_EPOCH_SHIFT | 1u; /* invariant 4 */
        st = sched_restore(s);
    }
    if (st != SCHED_OK) {
        sched_destroy(s);
        return st;
    }
    INVARIANT_CHECK(sched_check(s));
    *out = s;
    return SCHED_OK;
}

void sched_destroy(sched_t *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->inflight.cap; i++)
        free(s->inflight.slots[i].value);
    map_fini(&s->inflight);
    worker_destroy_all(s);
    shapes_destroy_all(s);
    model_destroy_all(s);
    budget_free(s);
    fill_scratch_free(&s->scratch);
    free(s->done_arrivals);
    free(s);
}

sched_status_t sched_submit(sched_t *s, const sched_item_t *item, sched_placement_t *out)
{
    if (s == NULL || item == NULL || item->model == NULL || item->tokens == 0 ||
        item->tokens > SCHED_MAX_TOKENS)
        return SCHED_EINVAL;
    s->filled_valid = 0;
    sched_shape_t *shape = NULL;
    lanes_choice_t choice = {0};
    store_queue_t *queue = NULL, *opened = NULL;
    sched_status_t st = shapes_intern(s, item->model, item->signature, &shape);
    if (st == SCHED_OK)
        st = lanes_assign(shape->lanes, item->tokens, &choice);
    if (st != SCHED_OK)
        goto out;
    if (choice.open) {
        store_key_t key = {item->model->name, item->signature, choice.lane};
        if ((s->store_status = store_queue_open(s->store, &key, &opened)) != STORE_OK) {
            st = SCHED_ESTORE;
            goto out;
        }
        queue = opened;
    } else {
        lanes_lane_t lane;
        lanes_get(shape->lanes, choice.lane, &lane);
        queue = lane.user;
    }
    uint64_t now = sched_now(s);
    store_item_t si = {
        .id = item->id,
        .id_len = item->id_len,
        .payload = item->payload,
        .payload_len = item->payload_len,
        .tokens = item->tokens,
        .arrival_ns = now,
        .prefix_tokens = item->prefix_tokens,
        .max_wait_ms = item->max_wait_ms,
    };
    if ((s->store_status = store_append(s->store, queue, &si, NULL)) != STORE_OK) {
        st = SCHED_ESTORE;
        goto out;
    }
    uint64_t before = lanes_queued_items(shape->lanes);
    uint64_t before_tokens = lanes_queued_tokens(shape->lanes);
    lanes_accept(shape->lanes, &choice, now);
    hold_arrival_note(item->model, item->tokens, now);
    item->model->arrivals++;
    budget_arrival_note(item->model, shape, now);
    if (before == 0) {
        shape->oldest_ns = now;
        shape->oldest_stale = 0;
    }
    shapes_queued_note(s, shape, before, before_tokens);
    /* A lane's target is not written to the store: after a restart it is the longest item the
     * lane holds, which recovery computes. Writing it put an index row at every rise (one for
     * every fourth item at 256 shapes a model) and deleted it again when the lane drained: four
     * times the LMDB writes (`lanesched-bench throughput --shapes 256`). */
    if (choice.open) {
        lanes_user_set(shape->lanes, choice.lane, queue);
        s->counters.lanes_opened++;
        opened = NULL;
    } else {
        s->counters.lane_reuses++;
    }
    s->counters.force_fits += (uint64_t)choice.force_fit;
    s->counters.items_received++;
    s->counters.tokens_received += item->tokens;
    if (out != NULL)
        *out = (sched_placement_t){choice.lane, choice.open, choice.force_fit};
out:
    if (opened != NULL) /* a lane that never took its item must not leave a queue behind */
        (void)store_queue_release(s->store, opened);
    INVARIANT_CHECK(sched_check_op(s, st == SCHED_OK ? shape : NULL, choice.lane));
    return st;
}

/* Items [from, *out_end) of the filled batch are the run of one lane. */
static size_t sched_lane_run(const sched_t *s, size_t from, size_t n)
{
    size_t end = from + 1;
    while (end < n && s->scratch.lane_of[end] == s->scratch.lane_of[from])
        end++;
    return end;
}

/* The first n items of rec were committed: they leave their lanes' queues and are counted in
 * flight (invariant 1) and routed, and rec goes into the in-flight map (room reserved by the
 * commit). The whole batch of a commit, or the part a failed one could not put back. */
static void sched_inflight_put(sched_t *s, sched_inflight_t *rec, size_t n)
{
    sched_shape_t *shape = rec->shape;
    uint64_t before = lanes_queued_items(shape->lanes);
    uint64_t before_tokens = lanes_queued_tokens(shape->lanes);
    uint64_t tokens = 0;
    for (size_t from = 0, end; from < n; from = end) {
        end = sched_lane_run(s, from, n);
        uint64_t run = 0;
        for (size_t i = from; i < end; i++)
            run += rec->items[i].tokens;
        lanes_note_dispatched(shape->lanes, s->scratch.lane_of[from], end - from, run);
        tokens += run;
    }
    shape->oldest_stale = 1; /* its oldest item may have gone: shapes.c invariant 5 */
    shapes_queued_note(s, shape, before, before_tokens);
    map_put(&s->inflight, (map_key_t){rec->batch_id, 0}, rec);
    s->inflight_items += n;
    s->inflight_tokens += tokens;
    s->counters.items_routed += n; /* every delivery the store counted */
    s->counters.tokens_routed += tokens;
}

sched_status_t sched_commit(sched_t *s, const sched_batch_t *batch)
{
    if (s == NULL || batch == NULL)
        return SCHED_EINVAL;
    if (!s->filled_valid || batch->batch_id != s->filled.batch_id)
        return SCHED_EUNKNOWN;
    const sched_batch_t *b = &s->filled;
    sched_shape_t *shape = s->filled_shape;
    sched_status_t st = SCHED_ENOMEM;
    store_ref_t *refs = malloc(b->n * sizeof(*refs));
    sched_inflight_t *rec = malloc(sizeof(*rec) + b->n * sizeof(rec->items[0]));
    if (refs == NULL || rec == NULL || map_reserve(&s->inflight, 1) != MAP_OK)
        goto out;
    *rec = (sched_inflight_t){
        .batch_id = b->batch_id,
        .shape = shape,
        .worker = s->filled_worker,
        .commit_ns = sched_now(s),
        .padded_tokens = b->padded_tokens,
        .prefix_charged = b->prefix_charged,
        .lane = b->lane,
        .n = (uint32_t)b->n,
        .unsettled = (uint32_t)b->n,
    };
    for (size_t i = 0; i < b->n; i++) {
        refs[i] = b->items_view[i].ref;
        const store_view_t *v = &b->items_view[i];
        rec->items[i] = (sched_inflight_item_t){refs[i],
                                                v->arrival_ns,
                                                v->tokens,
                                                s->scratch.lane_of[i],
                                                (uint32_t)(v->id_len + v->payload_len),
                                                0};
    }
    /* Lane by lane: each lane's items are the front of its queue. A lane whose commit fails
     * puts back the lanes committed before it, so the batch commits whole or not at all (a put
     * back item counts one delivery more, which only the rare failure can cause). */
    lanes_lane_t lane;
    for (size_t from = 0, end; from < b->n; from = end) {
        end = sched_lane_run(s, from, b->n);
        lanes_get(shape->lanes, s->scratch.lane_of[from], &lane);
        if ((s->store_status = store_commit(s->store, lane.user, refs + from, end - from)) !=
            STORE_OK) {
            if (from != 0 && store_return(s->store, refs, from) != STORE_OK) {
                /* invariant 8: no holder, so no worker's ack settles them; the caller returns
                 * them (sched_return) */
                rec->worker = NULL;
                rec->n = rec->unsettled = (uint32_t)from;
                sched_inflight_put(s, rec, from);
                s->filled_valid = 0;
                rec = NULL;
            }
            st = SCHED_ESTORE;
            goto out;
        }
    }
    sched_inflight_put(s, rec, b->n);
    sched_model_t *model = s->models[shape->model_idx];
    for (size_t i = 0; i < b->n; i++) {
        uint64_t a = b->items_view[i].arrival_ns,
                 wait = rec->commit_ns > a ? rec->commit_ns - a : 0;
        waits_note(&s->waits, wait);
        budget_note_commit(model, &b->items_view[i], wait);
    }
    if (!b->dead_letter)
        budget_note_batch(model, b);
    if (rec->worker != NULL) {
        worker_warm_touch(rec->worker, shape);
        worker_batch_link(rec->worker, rec); /* invariant 10 */
        INVARIANT_CHECK(worker_check(rec->worker));
    }
    s->counters.padded_tokens += b->padded_tokens;
    s->counters.real_tokens += b->real_tokens;
    s->counters.batches++;
    if (b->lanes > 1) {
        s->counters.merged_batches++;
        s->counters.merged_lanes += b->lanes - 1;
    }
    s->filled_valid = 0;
    rec = NULL;
    st = SCHED_OK;
out:
    free(rec);
    free(refs);
    INVARIANT_CHECK(sched_check_op_lanes(s, shape, s->scratch.lane_of, b->n));
    return st;
}

/* Looks up an in-flight batch and checks the positions, changing nothing. */
static sched_status_t sched_inflight_find(sched_t *s, uint64_t batch_id, const uint32_t *positions,
                                          size_t n, sched_inflight_t **out)
{
    sched_inflight_t *rec = map_get(&s->inflight, (map_key_t){batch_id, 0});
    if (rec == NULL)
        return SCHED_EUNKNOWN;
    for (size_t i = 0; positions != NULL && i < n; i++) {
        if (positions[i] >= rec->n)
            return SCHED_EUNKNOWN;
    }
    *out = rec;
    return SCHED_OK;
}

/* Frees the record once nothing of it is in flight (invariant 10); 1 if it did. */
static int sched_inflight_settle(sched_t *s, sched_inflight_t *rec)
{
    if (rec->unsettled != 0)
        return 0;
    if (rec->worker != NULL)
        worker_batch_unlink(rec->worker, rec);
    map_del(&s->inflight, (map_key_t){rec->batch_id, 0}, NULL);
    free(rec);
    return 1;
}

/* Items of a batch being settled whose store records are asked for ahead (store_prefetch):
 * the first half of the distance for where a record is, the second for the record itself. Each
 * completion otherwise waited for two cache misses in turn (`perf annotate` of the daemon under
 * `lanesched-bench throughput`, docs/owner-thread.md). */
#define SCHED_SETTLE_AHEAD 16u

/* The j-th item to settle (positions as sched_complete's). */
static sched_inflight_item_t *sched_settle_item(sched_inflight_t *rec, const uint32_t *positions,
                                                size_t j)
{
    return &rec->items[positions != NULL ? positions[j] : j];
}

sched_status_t sched_complete(sched_t *s, uint64_t batch_id, const uint32_t *positions, size_t n,
                              sched_settled_t *out)
{
    if (s == NULL)
        return SCHED_EINVAL;
    s->filled_valid = 0;
    sched_inflight_t *rec;
    sched_status_t st = sched_inflight_find(s, batch_id, positions, n, &rec);
    if (st != SCHED_OK)
        return st;
    size_t count = positions != NULL ? n : rec->n;
    sched_settled_t done = {.commit_ns = rec->commit_ns, .held = rec->worker != NULL};
    if (count > s->done_cap) {
        uint64_t *grown = realloc(s->done_arrivals, count * sizeof(*grown));
        if (grown != NULL) {
            s->done_arrivals = grown;
            s->done_cap = count;
        }
    }
    const sched_shape_t *shape = rec->shape;
    uint32_t lane = rec->lane;
    const size_t half = SCHED_SETTLE_AHEAD / 2;
    for (size_t j = 0; j < count && j < SCHED_SETTLE_AHEAD; j++) /* the pipeline's first stages */
        store_prefetch(s->store, sched_settle_item(rec, positions, j)->ref, 0);
    for (size_t j = 0; j < count && j < half; j++)
        store_prefetch(s->store, sched_settle_item(rec, positions, j)->ref, 1);
    for (size_t i = 0; i < count && st == SCHED_OK; i++) {
        sched_inflight_item_t *it = sched_settle_item(rec, positions, i);
        if (i + SCHED_SETTLE_AHEAD < count)
            store_prefetch(s->store, sched_settle_item(rec, positions, i + SCHED_SETTLE_AHEAD)->ref,
                           0);
        if (i + half < count)
            store_prefetch(s->store, sched_settle_item(rec, positions, i + half)->ref, 1);
        if (it->settled)
            continue;
        int completed = 0;
        if ((s->store_status = store_tombstone(s->store, it->ref, &completed)) != STORE_OK) {
            st = SCHED_ESTORE;
            break;
        }
        it->settled = 1;
        rec->unsettled--;
        s->inflight_items--;
        s->inflight_tokens -= it->tokens;
        done.positions++;
        done.bytes += it->bytes;
        if (completed) {
            s->counters.items_completed++;
            s->counters.tokens_completed += it->tokens;
            if (done.items < s->done_cap)
                s->done_arrivals[done.items] = it->arrival_ns;
            done.items++;
            done.tokens += it->tokens;
        }
        lanes_note_completed(rec->shape->lanes, it->lane, 1);
    }
    if (done.positions != 0 && rec->worker != NULL && !rec->sampled) {
        /* The worker's estimate: the batch started when it was committed or when the worker's
         * previous batch completed, whichever is later (worker.c). */
        uint64_t now = sched_now(s);
        uint64_t start =
            rec->commit_ns > rec->worker->last_done_ns ? rec->commit_ns : rec->worker->last_done_ns;
        if (now > start) {
            sched_worker_sample(rec->worker, rec->padded_tokens + rec->prefix_charged, now - start);
            s->counters.service_ns += now - start;
            s->counters.service_batches++;
            done.service_ns = now - start;
        }
        rec->worker->last_done_ns = now;
        rec->sampled = 1;
    }
    done.closed = sched_inflight_settle(s, rec);
    done.arrivals_view = done.items != 0 && done.items <= s->done_cap ? s->done_arrivals : NULL;
    if (out != NULL) /* also on ESTORE: those positions are completed and stay so */
        *out = done;
    INVARIANT_CHECK(sched_check_op(s, shape, lane));
    return st;
}

static sched_status_t sched_return_as(sched_t *s, uint64_t batch_id, const uint32_t *positions,
                                      size_t n, int unseen, sched_settled_t *out)
{
    if (s == NULL)
        return SCHED_EINVAL;
    s->filled_valid = 0;
    sched_inflight_t *rec;
    sched_status_t st = sched_inflight_find(s, batch_id, positions, n, &rec);
    if (st != SCHED_OK)
        return st;
    size_t count = positions != NULL ? n : rec->n;
    const sched_shape_t *shape = rec->shape;
    uint32_t lane = rec->lane;
    store_ref_t *refs = malloc(rec->n * sizeof(*refs));
    uint32_t *idx = malloc(rec->n * sizeof(*idx));
    uint32_t k = 0;
    uint64_t tokens = 0, bytes = 0;
    st = SCHED_ENOMEM;
    if (refs == NULL || idx == NULL)
        goto out;
    for (size_t i = 0; i < count; i++) {
        uint32_t p = positions != NULL ? positions[i] : (uint32_t)i;
        if (rec->items[p].settled)
            continue;
        rec->items[p].settled = 1; /* also dedupes a position named twice */
        idx[k] = p;
        refs[k++] = rec->items[p].ref;
        tokens += rec->items[p].tokens;
        bytes += rec->items[p].bytes;
    }
    if ((s->store_status = unseen ? store_return_unseen(s->store, refs, k)
                                  : store_return(s->store, refs, k)) != STORE_OK) {
        for (uint32_t i = 0; i < k; i++)
            rec->items[idx[i]].settled = 0;
        st = SCHED_ESTORE;
        goto out;
    }
    rec->unsettled -= k;
    s->inflight_items -= k;
    s->inflight_tokens -= tokens;
    uint64_t before = lanes_queued_items(rec->shape->lanes);
    uint64_t before_tokens = lanes_queued_tokens(rec->shape->lanes);
    for (uint32_t i = 0; i < k; i++) {
        const sched_inflight_item_t *it = &rec->items[idx[i]];
        lanes_note_returned(rec->shape->lanes, it->lane, 1, it->tokens);
        if (before == 0 && i == 0) { /* the returned items are all it holds: exact */
            rec->shape->oldest_ns = it->arrival_ns;
            rec->shape->oldest_stale = 0;
        } else if (it->arrival_ns < rec->shape->oldest_ns) {
            rec->shape->oldest_ns = it->arrival_ns;
        }
    }
    shapes_queued_note(s, rec->shape, before, before_tokens);
    s->counters.items_returned += k;
    s->models[rec->shape->model_idx]->arrivals += k; /* budget.c invariant 7 */
    int closed = sched_inflight_settle(s, rec);
    if (out != NULL)
        *out = (sched_settled_t){.positions = k, .bytes = bytes, .closed = closed};
    st = SCHED_OK;
out:
    free(refs);
    free(idx);
    INVARIANT_CHECK(sched_check_op(s, shape, lane));
    return st;
}

sched_status_t sched_return(sched_t *s, uint64_t batch_id, const uint32_t *positions, size_t n,
                            sched_settled_t *out)
{
    return sched_return_as(s, batch_id, positions, n, 0, out);
}

sched_status_t sched_return_unseen(sched_t *s, uint64_t batch_id, sched_settled_t *out)
{
    return sched_return_as(s, batch_id, NULL, 0, 1, out);
}

int sched_batch_pending(const sched_t *s, uint64_t batch_id)
{
    return map_get(&s->inflight, (map_key_t){batch_id, 0}) != NULL;
}

int sched_batch_info(const sched_t *s, uint64_t batch_id, sched_batch_info_t *out)
{
    const sched_inflight_t *rec = map_get(&s->inflight, (map_key_t){batch_id, 0});
    if (rec == NULL)
        return 0;
    *out = (sched_batch_info_t){rec->worker, rec->n, rec->unsettled, rec->deadline_ns};
    return 1;
}

int sched_batch_older(const sched_t *s, uint64_t batch_id, uint64_t *out_id)
{
    const sched_inflight_t *rec = map_get(&s->inflight, (map_key_t){batch_id, 0});
    if (rec == NULL || rec->worker_next == NULL)
        return 0;
    *out_id = rec->worker_next->batch_id;
    return 1;
}

sched_status_t sched_batch_deadline_set(sched_t *s, uint64_t batch_id, uint64_t deadline_ns)
{
    sched_inflight_t *rec = map_get(&s->inflight, (map_key_t){batch_id, 0});
    if (rec == NULL)
        return SCHED_EUNKNOWN;
    rec->deadline_ns = deadline_ns;
    return SCHED_OK;
}

void sched_tick(sched_t *s)
{
    s->filled_valid = 0;
    fill_scratch_trim(&s->scratch);
    shapes_tick(s, sched_now(s));
    budget_tick(s, sched_now(s));
    INVARIANT_CHECK(sched_check(s));
}

const sched_counters_t *sched_counters(const sched_t *s)
{
    return &s->counters;
}

store_status_t sched_store_status(const sched_t *s)
{
    return s->store_status;
}

uint64_t sched_retry_ns(const sched_t *s)
{
    return s->retry_ns;
}

void sched_queued(const sched_t *s, uint64_t *out_items, uint64_t *out_tokens)
{
    *out_items = s->queued_items;
    *out_tokens = s->queued_tokens;
}

void sched_inflight(const sched_t *s, uint64_t *out_items, uint64_t *out_tokens)
{
    *out_items = s->inflight_items;
    *out_tokens = s->inflight_tokens;
}

void sched_restored(const sched_t *s, uint64_t *out_items, uint64_t *out_tokens)
{
    *out_items = s->items_restored;
    *out_tokens = s->tokens_restored;
}

const lanes_t *sched_lanes_view(const sched_t *s, const sched_model_t *model, uint64_t signature)
{
    if (model == NULL)
        return NULL;
    const sched_shape_t *shape = map_get(&s->shapes, (map_key_t){signature, model->index});
    return shape != NULL ? shape->lanes : NULL;
}

size_t sched_scratch_entries(const sched_t *s)
{
    return s->scratch.cap;
}

size_t sched_shape_count(const sched_t *s, const sched_model_t *model)
{
    return model == NULL ? s->shapes.len : model->n_shapes;
}

void sched_shapes_visit(const sched_t *s, sched_shape_visit_fn fn, void *ctx)
{
    for (size_t i = 0; i < s->n_models; i++) {
        const sched_model_t *m = s->models[i];
        for (size_t j = 0; j < m->n_shapes; j++)
            fn(ctx, m->name, m->shapes[j]->signature, m->shapes[j]->lanes,
               m->shapes[j] == m->current);
    }
}

int sched_current_shape(const sched_t *s, const sched_model_t *model, uint64_t *out_sig)
{
    (void)s;
    if (model == NULL || model->current == NULL)
        return 0;
    *out_sig = model->current->signature;
    return 1;
}
