/*
 * daemon.c - the daemon's life: opening the store, restoring the scheduler and the dedupe
 * window, the clock, publishing, and the entry points other threads may call.
 *
 * Invariants:
 *   1. The owner (daemon_turn) is the only thread that touches the store, the scheduler, the
 *      registry and the dedupe window; daemon_post and daemon_dropped_note are the only entry
 *      points safe from other threads.
 *   2. The dedupe window is rebuilt from every queued item at start, so a retry of an item
 *      that was queued before a restart is still recognised; so are the models' queue totals
 *      (quota.c), so the queue limits hold across restarts.
 *   3. A disk store is opened only under the data directory's exclusive lock (dirlock.c), so
 *      two daemons never serve the same items.
 *   4. EV_STOP overtakes the queue: daemon_post raises evqueue's stop flag, which the owner
 *      reads after every event (evqueue.c's invariant 4), so a stop waits for the event being
 *      handled, never for a backlog behind it. A stats summary overtakes the backlog too: while
 *      the owner is in a turn, daemon_post and daemon_post_msg set it aside (stats.c's
 *      invariant 5).
 *
 * Rejected: opening the store lazily at the first message. A damaged store must stop the
 * daemon at start, before it answers anyone.
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/clock.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

STATUS_STR(daemon_status_str, daemon_status_t, DAEMON_STATUS_MAP, "unknown daemon status")

static uint64_t daemon_clock_mono(void *ctx)
{
    (void)ctx;
    return clock_mono_ns();
}

uint64_t daemon_now(const struct daemon *d)
{
    return d->cfg.clock(d->cfg.clock_ctx);
}

uint64_t daemon_ms_ns(uint32_t ms)
{
    return (uint64_t)ms * 1000000ull;
}

void daemon_publish(struct daemon *d, const char *subject, uint8_t *buf, size_t len)
{
    if (buf == NULL)
        return;
    if (daemon_send(d, subject, NULL, buf, len) != 0)
        d->counters.publish_failures++;
    free(buf);
}

int daemon_send(struct daemon *d, const char *subject, const char *reply, const void *data,
                size_t len)
{
    if (d->publish == NULL)
        return -1;
    d->published = true;
    return d->publish(d->publish_ctx, subject, reply, data, len) == 0 ? 0 : -1;
}

daemon_status_t daemon_undelivered_set(daemon_t *d, const char *base)
{
    char *copy = NULL;
    if (base != NULL && strlen(base) > DAEMON_UNDELIVERED_BASE_MAX)
        return DAEMON_EINVAL;
    if (base != NULL && (copy = strdup(base)) == NULL)
        return DAEMON_ENOMEM;
    free(d->undelivered_base);
    d->undelivered_base = copy;
    return DAEMON_OK;
}

void daemon_publish_set(daemon_t *d, daemon_publish_fn publish, void *ctx)
{
    d->publish = publish;
    d->publish_ctx = ctx;
}

void daemon_idle_set(daemon_t *d, daemon_idle_fn idle, void *ctx)
{
    d->idle = idle;
    d->idle_ctx = ctx;
}

const char *daemon_model_name_fault(const char *name)
{
    codec_status_t st = codec_model_check(name);
    return st == CODEC_OK ? NULL : codec_status_str(st);
}

const char *daemon_instance_id(const daemon_t *d)
{
    return d->instance_id;
}

void daemon_nats_state_set(daemon_t *d, daemon_nats_state_fn fn, void *ctx)
{
    d->nats_state = fn;
    d->nats_state_ctx = ctx;
}

void daemon_metrics_sink_set(daemon_t *d, daemon_metrics_sink_fn sink, void *ctx)
{
    d->metrics_sink = sink;
    d->metrics_sink_ctx = ctx;
}

/* 22 characters of [0-9A-Za-z] (131 random bits), the length and alphabet of a NATS nuid, which
 * service clients accept as an id token. */
static daemon_status_t daemon_instance_id_make(char *out)
{
    static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    uint8_t rnd[22];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return DAEMON_ENOMEM;
    for (size_t i = 0; i < sizeof(rnd); i++)
        out[i] = digits[rnd[i] % 62]; /* the bias (256 % 62) is irrelevant for an id */
    out[sizeof(rnd)] = '\0';
    return DAEMON_OK;
}

void daemon_max_payload_set(daemon_t *d, uint32_t bytes)
{
    d->cfg.max_payload = bytes;
}

void daemon_reply_max_set(daemon_t *d, uint64_t bytes)
{
    if (bytes != 0)
        d->reply_max = bytes;
}

int daemon_reply_allowed(const daemon_t *d, const char *reply)
{
    return codec_reply_subject_check(reply, d->cfg.prefix, d->cfg.own_inbox) == CODEC_OK;
}

int daemon_post(daemon_t *d, ev_kind_t kind, const char *token, const char *reply, const void *data,
                size_t len)
{
    if (kind == EV_STOP) { /* invariant 4 */
        evqueue_stop(&d->events);
        return 0;
    }
    /* a summary set aside is answered without passing turn_handle: one whose reply subject is
     * refused goes through the queue, where it is counted */
    if (kind == EV_STATS && daemon_reply_allowed(d, reply) &&
        stats_waiting_add(d, reply, data, len))
        return 0; /* the owner is in a turn: stats.c's invariant 5 */
    if (evqueue_post(&d->events, kind, token, reply, data, len) == 0)
        return 0;
    daemon_dropped_note(d);
    return -1;
}

void daemon_release_set(daemon_t *d, daemon_release_fn release, void *ctx)
{
    evqueue_release_set(&d->events, release, ctx);
}

int daemon_post_msg(daemon_t *d, ev_kind_t kind, const char *token, const char *reply,
                    const void *data, size_t len, void *msg)
{
    if (kind == EV_STATS && daemon_reply_allowed(d, reply) &&
        stats_waiting_add(d, reply, data, len)) {
        evqueue_release(&d->events, msg); /* set aside with a copy of reply: invariant 4 */
        return 0;
    }
    if (evqueue_post_msg(&d->events, kind, token, reply, data, len, msg) == 0)
        return 0;
    daemon_dropped_note(d);
    return -1;
}

void daemon_events_drop(daemon_t *d)
{
    size_t n = 0;
    evqueue_done(&d->events);
    do { /* a take under the bound hands over part of them (evqueue.c invariant 5) */
        evqueue_take(&d->events, 0, &n);
        evqueue_done(&d->events);
    } while (n != 0);
}

void daemon_dropped_note(daemon_t *d)
{
    __atomic_add_fetch(&d->counters.dropped_messages, 1, __ATOMIC_RELAXED);
}

static void daemon_store_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    log_write(level == STORE_LOG_ERROR  ? LOG_ERROR
              : level == STORE_LOG_WARN ? LOG_WARN
                                        : LOG_INFO,
              "store: %s", msg);
}

/* Ids whose index slots the restart's scan asks for before it adds them: with hundreds of
 * thousands queued the window's index is larger than the caches and every add would wait for
 * its own miss. As many as the store's peek asks for ahead (disk_item.c), for the same reason. */
#define DAEMON_SCAN_AHEAD 16u

typedef struct {
    struct daemon *d;
    model_t *model;  /* the queue's */
    uint64_t seed;   /* its dedupe_seed */
    uint64_t now_ns; /* the scan's: every id rebuilt into the window at once (one run) */
    dedupe_key_t ahead[DAEMON_SCAN_AHEAD]; /* asked for, not added yet: oldest at next */
    size_t n_ahead, next;
} daemon_scan_t;

static void daemon_scan_item(void *ctx, const store_view_t *v)
{
    daemon_scan_t *sc = ctx;
    if (v->id_len != 0) {
        dedupe_key_t k = dedupe_key(sc->seed, v->id_view, v->id_len);
        dedupe_prefetch(&sc->d->dedupe, k, 0);
        if (sc->n_ahead < DAEMON_SCAN_AHEAD) {
            sc->ahead[sc->n_ahead++] = k;
        } else { /* in scan order: the oldest asked for goes in first */
            (void)dedupe_add(&sc->d->dedupe, sc->ahead[sc->next], sc->now_ns);
            sc->ahead[sc->next] = k;
            sc->next = (sc->next + 1) % DAEMON_SCAN_AHEAD;
        }
    }
    models_stored(sc->d, sc->model, v->id_len + v->payload_len);
}

/* Rebuilds the window and the models' stored bytes from every item the store holds (dedupe.c
 * invariant 5): the window sized once for all of them when memory allows, then filled in scan
 * order. */
static daemon_status_t daemon_scan(daemon_t *d)
{
    store_queue_t *q = NULL;
    store_key_t key;
    size_t total = 0;
    while (store_queue_next(d->store, q, &q, NULL, NULL)) {
        uint64_t items = 0;
        store_queue_count(q, &items, NULL);
        total += (size_t)items;
    }
    if (dedupe_reserve(&d->dedupe, total) != DAEMON_OK) /* the adds grow it as they go */
        log_write(LOG_WARN, "no memory to size the dedupe window for %zu stored items at once",
                  total);
    daemon_scan_t scan = {.d = d, .now_ns = daemon_now(d)};
    for (q = NULL; store_queue_next(d->store, q, &q, &key, NULL);) { /* invariant 2 */
        if ((scan.model = models_get(d, key.model)) == NULL)
            return DAEMON_ENOMEM;
        scan.seed = dedupe_seed(key.model);
        if (store_queue_scan(d->store, q, daemon_scan_item, &scan) != STORE_OK)
            return DAEMON_ESTORE;
    }
    for (size_t i = 0; i < scan.n_ahead; i++)
        (void)dedupe_add(&d->dedupe, scan.ahead[(scan.next + i) % DAEMON_SCAN_AHEAD], scan.now_ns);
    dedupe_reserve_end(&d->dedupe); /* items without an id left room unused */
    return DAEMON_OK;
}

_Static_assert(DAEMON_RECOVERY_THREADS_MAX == STORE_RECOVERY_THREADS_MAX,
               "the daemon's bound on --recovery-threads is the store's");

static store_status_t daemon_store_open(const daemon_config_t *cfg, store_t **out)
{
    if (cfg->store_memory)
        return store_open_memory(out);
    store_disk_config_t dc = {
        .dir = cfg->data_dir,
        .segment_max_bytes = cfg->segment_max_bytes,
        .journal_max_bytes = cfg->journal_file_bytes,
        .durability = cfg->durability_power ? STORE_DURABLE_POWER : STORE_DURABLE_PROCESS,
        .log = daemon_store_log,
        .sync = cfg->power_syncfs ? STORE_SYNC_FS : STORE_SYNC_FILES,
        .resident_bytes = (uint64_t)cfg->store_resident_mb << 20,
        .recovery_threads = cfg->recovery_threads,
    };
    store_recovery_t rep;
    store_status_t st = store_open_disk(&dc, &rep, out);
    if (st == STORE_OK)
        log_write(LOG_INFO, "store %s: %" PRIu64 " items (%" PRIu64 " tokens) recovered in %.3f s",
                  cfg->data_dir, rep.entries_live, rep.tokens_live, (double)rep.elapsed_ns / 1e9);
    if (st == STORE_OK && rep.tombstones_missing != 0)
        log_write(LOG_WARN,
                  "store %s: up to %" PRIu64 " completed items came back (their tombstones lost: "
                  "see the segment warnings above); they are delivered again",
                  cfg->data_dir, rep.tombstones_missing);
    return st;
}

daemon_status_t daemon_create(const daemon_config_t *cfg, daemon_t **out)
{
    daemon_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return DAEMON_ENOMEM;
    d->cfg = *cfg;
    d->lock_fd = -1;
    if (d->cfg.clock == NULL)
        d->cfg.clock = daemon_clock_mono;
    limits_resolve(&d->cfg.limits);
    d->caps = limits_caps(&d->cfg.limits);
    d->reply_max = DAEMON_REPLY_MAX_DEFAULT;
    stats_waiting_init(&d->waiting);
    evqueue_init(&d->events);
    evqueue_bound_set(&d->events, d->cfg.limits.backlog_bytes);
    dedupe_init(&d->dedupe, daemon_ms_ns(cfg->dedupe_window_ms));
    dedupe_limit_set(&d->dedupe, d->cfg.limits.dedupe_ids);
    daemon_status_t st = consumers_create(&d->consumers);
    if (st == DAEMON_OK)
        st = daemon_instance_id_make(d->instance_id);
    if (st == DAEMON_OK)
        st = service_init(d);
    if (st == DAEMON_OK)
        st = metrics_create(&d->metrics);
    if (st == DAEMON_OK && cfg->models == NULL && cfg->leases)
        st = DAEMON_EINVAL;                    /* leases are of the --models list */
    if (st == DAEMON_OK && !cfg->store_memory) /* before the store: invariant 3 */
        st = dirlock_acquire_wait(cfg->data_dir, cfg->lock_wait, cfg->lock_wait_ctx, &d->lock_fd);
    if (st != DAEMON_OK)
        goto out;
    st = DAEMON_ESTORE;
    store_status_t sst = daemon_store_open(cfg, &d->store);
    if (sst != STORE_OK) {
        log_write(LOG_ERROR, "cannot open the store: %s", store_status_str(sst));
        goto out;
    }
    sched_config_t sc = {.clock = d->cfg.clock,
                         .clock_ctx = d->cfg.clock_ctx,
                         .max_deliveries = cfg->max_deliveries,
                         .starvation_ns = daemon_ms_ns(cfg->starvation_ms),
                         .policy = SCHED_POLICY_LANES};
    if (cfg->policy != NULL && strcmp(cfg->policy, sched_policy_name(SCHED_POLICY_SEED)) == 0) {
        sc.policy = SCHED_POLICY_SEED;
    } else if (cfg->policy != NULL &&
               strcmp(cfg->policy, sched_policy_name(SCHED_POLICY_LANES)) != 0) {
        log_write(LOG_ERROR, "unknown policy %s (lanes, lanes-seed)", cfg->policy);
        st = DAEMON_EINVAL;
        goto out;
    }
    if (cfg->starvation_ms == DAEMON_STARVATION_DEFAULT)
        sc.starvation_ns = sc.policy == SCHED_POLICY_LANES ? SCHED_AGE_BOUND_DEFAULT_NS : 0;
    sc.hold_ns =
        cfg->hold_ms == DAEMON_HOLD_DEFAULT ? SCHED_HOLD_DEFAULT_NS : daemon_ms_ns(cfg->hold_ms);
    sc.slo_ns = daemon_ms_ns(cfg->slo_ms);
    sched_status_t schst = sched_create(&sc, d->store, &d->sched);
    for (size_t i = 0; schst == SCHED_OK && i < cfg->n_slos; i++)
        schst = sched_slo_set(d->sched, cfg->slos[i].model, daemon_ms_ns(cfg->slos[i].ms));
    if (schst != SCHED_OK) {
        log_write(LOG_ERROR, "cannot restore the scheduler: %s", sched_status_str(schst));
        goto out;
    }
    if (cfg->slo_ms != 0 || cfg->n_slos != 0)
        log_write(LOG_INFO, "wait budget %" PRIu32 " ms, %zu models with their own", cfg->slo_ms,
                  cfg->n_slos);
    log_write(LOG_INFO, "policy %s, age bound %" PRIu64 " ms, hold %" PRIu64 " ms",
              sched_policy_name(sc.policy), sc.starvation_ns / 1000000,
              sc.policy == SCHED_POLICY_LANES ? sc.hold_ns / 1000000 : 0);
    if ((st = models_init(d)) != DAEMON_OK)
        goto out;
    if ((st = daemon_scan(d)) != DAEMON_OK)
        goto out;
    d->started_ns = daemon_now(d);
    *out = d;
    return DAEMON_OK;
out:
    daemon_destroy(d);
    return st;
}

void daemon_destroy(daemon_t *d)
{
    if (d == NULL)
        return;
    evqueue_fini(&d->events);
    free(d->orphans);
    free(d->undelivered_base);
    free(d->frame_scratch);
    dispatch_scratch_fini(&d->enc);
    if (d->sched != NULL)
        models_fini(d); /* its references to the scheduler's models first */
    sched_destroy(d->sched);
    store_close(d->store);
    consumers_destroy(d->consumers);
    dedupe_fini(&d->dedupe);
    metrics_destroy(d->metrics);
    service_fini(d);
    stats_waiting_fini(&d->waiting);
    dirlock_release(d->lock_fd); /* after the store closed */
    free(d);
}
