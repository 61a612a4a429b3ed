/*
 * lease_kv.c - one thread that keeps this instance's model leases in a JetStream key-value
 * bucket (lease_kv.h), with the decisions of scheduler/daemon/lease.c.
 *
 * Invariants:
 *   1. The timing comes from the bucket's own TTL, read back after binding, never from this
 *      instance's flag alone: instances started with different flags still agree on when a key
 *      expires, which is what fencing rests on.
 *   2. Every write is conditional: create (the key must be absent or deleted) or update on the
 *      revision held; a release is a delete marker conditional on that revision too, so an
 *      instance can never remove a lease another instance holds.
 *   3. Only "wrong last sequence" is a refusal (someone else holds the key); every other failure
 *      (timeout, JetStream unavailable, connection down) is a failed call, which never extends
 *      serving (lease.c invariant 3).
 *   4. Every change of a model's deadline, renewals included, and the first refusal after a
 *      gain reach notify, so the daemon always holds the deadline of the last acknowledged write
 *      and knows when another instance holds the lease.
 *
 * Rejected: a watch on the bucket instead of periodic creates. A key that expires through the
 * bucket's TTL produces no delete marker for watchers in nats-server 2.9, so a standby would
 * never hear of a dead holder; a create every renew period costs one request and is exact.
 */
#include "scheduler/nats/lease_kv.h"

#include "common/clock.h"
#include "common/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Longest model key: "x_" and 255 bytes in hex. */
#define LEASE_KV_KEY_MAX (2 + 2 * 255 + 1)
/* How long one bucket call may take before it counts as failed: well below the margin. */
#define LEASE_KV_CALL_MS 500
/* Creating the bucket is a cluster-wide operation (a replicated stream): a new cluster under load
 * takes seconds, and a create that timed out may still succeed; it is given this long. */
#define LEASE_KV_CREATE_MS 10000

typedef struct {
    char *model; /* owned */
    char key[LEASE_KV_KEY_MAX];
    lease_t lease;
    int elsewhere; /* the last refusal said another instance holds it; cleared when gained */
} lease_kv_model_t;

struct lease_kv {
    natsConnection *nc; /* borrowed */
    jsCtx *js;
    kvStore *kv;
    char bucket[64];
    char *instance; /* owned */
    lease_timing_t timing;
    uint64_t ttl_ms;
    lease_kv_model_t *models;
    size_t n_models;
    lease_kv_notify_fn notify;
    void *ctx;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop, started; /* under lock */
};

int lease_kv_key(const char *model, char *out, size_t len)
{
    size_t n = strlen(model);
    int plain = n > 0;
    for (size_t i = 0; i < n && plain; i++) {
        char c = model[i];
        plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '=' || c == '/' || (c == '.' && i > 0 && i + 1 < n);
    }
    if (plain && strncmp(model, "x_", 2) != 0) {
        if (n + 1 > len)
            return -1;
        memcpy(out, model, n + 1);
        return 0;
    }
    if (2 + 2 * n + 1 > len)
        return -1;
    memcpy(out, "x_", 2);
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 + 2 * i, 3, "%02x", (unsigned char)model[i]);
    return 0;
}

/* 1 when the last failure was a refusal: the key is someone else's (invariant 3). */
static int lease_kv_refused(natsStatus s)
{
    if (s != NATS_ERR)
        return 0;
    const char *text = nats_GetLastError(NULL);
    return text != NULL && strstr(text, "wrong last sequence") != NULL;
}

/* One due call for one model; 1 when its deadline changed. */
static int lease_kv_step(lease_kv_t *kv, lease_kv_model_t *m, uint64_t now)
{
    lease_act_t act = lease_due(&m->lease, now);
    if (act == LEASE_ACT_NONE)
        return 0;
    uint64_t sent = clock_mono_ns(), rev = 0;
    int len = (int)strlen(kv->instance);
    natsStatus s = act == LEASE_ACT_CREATE
                       ? kvStore_Create(&rev, kv->kv, m->key, kv->instance, len)
                       : kvStore_Update(&rev, kv->kv, m->key, kv->instance, len, m->lease.revision);
    uint64_t after = clock_mono_ns();
    int was = m->lease.state == LEASE_OWNER;
    if (s == NATS_OK) {
        m->elsewhere = 0;
        lease_won(&m->lease, &kv->timing, rev, sent, after);
        if (!was)
            log_write(LOG_INFO, "lease of model %s gained (revision %llu): serving it", m->model,
                      (unsigned long long)rev);
        return 1; /* invariant 4: a renewal moves the deadline too */
    }
    if (lease_kv_refused(s)) {
        int changed = lease_refused(&m->lease, &kv->timing, after), news = !m->elsewhere;
        m->elsewhere = 1;
        if (was)
            log_write(LOG_WARN, "lease of model %s lost to another instance: not serving it",
                      m->model);
        return changed || was || news;
    }
    int changed = lease_failed(&m->lease, &kv->timing, after);
    if (was)
        log_write(changed ? LOG_ERROR : LOG_WARN, "lease of model %s: %s %s%s", m->model,
                  act == LEASE_ACT_CREATE ? "create" : "renewal", natsStatus_GetText(s),
                  changed ? "; the lease may expire now: fenced, not serving it" : "; retrying");
    return changed;
}

static void *lease_kv_main(void *arg)
{
    lease_kv_t *kv = arg;
    pthread_mutex_lock(&kv->lock);
    while (!kv->stop) {
        pthread_mutex_unlock(&kv->lock);
        uint64_t now = clock_mono_ns(), next = now + kv->timing.renew_ns;
        for (size_t i = 0; i < kv->n_models; i++) {
            lease_kv_model_t *m = &kv->models[i];
            if (lease_kv_step(kv, m, now))
                kv->notify(kv->ctx, m->model,
                           lease_serving(&m->lease, clock_mono_ns()) ? m->lease.valid_until_ns : 0,
                           m->elsewhere);
            next = m->lease.next_ns < next ? m->lease.next_ns : next;
            now = clock_mono_ns();
        }
        pthread_mutex_lock(&kv->lock);
        if (kv->stop)
            break;
        uint64_t wait = next > clock_mono_ns() ? next - clock_mono_ns() : 0;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + wait;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&kv->cond, &kv->lock, &ts);
    }
    pthread_mutex_unlock(&kv->lock);
    return NULL;
}

/* Binds the bucket, creating it when missing; retries while JetStream is not ready. */
static natsStatus lease_kv_bind(lease_kv_t *kv, const lease_kv_config_t *cfg)
{
    natsStatus s;
    int replicas = cfg->replicas > 0 ? cfg->replicas : 1;
    for (uint32_t attempt = 1;; attempt++) {
        s = js_KeyValue(&kv->kv, kv->js, cfg->bucket);
        if (s == NATS_NOT_FOUND) {
            kvConfig c;
            kvConfig_Init(&c);
            c.Bucket = cfg->bucket;
            c.Replicas = replicas;
            c.TTL = (int64_t)cfg->ttl_ms * 1000000;
            c.History = 1;
            jsCtx *admin = NULL;
            jsOptions jo;
            jsOptions_Init(&jo);
            jo.Wait = LEASE_KV_CREATE_MS;
            kvStore *created = NULL;
            s = natsConnection_JetStream(&admin, kv->nc, &jo);
            if (s == NATS_OK)
                s = js_CreateKeyValue(&created, admin, &c);
            kvStore_Destroy(created); /* bound again below, on the fast context */
            jsCtx_Destroy(admin);
            if (s == NATS_OK)
                s = js_KeyValue(&kv->kv, kv->js, cfg->bucket);
            const char *why = nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "";
            if (s != NATS_OK && strstr(why, "already in use") != NULL)
                continue; /* another instance created it first: bind to it */
            if (s != NATS_OK && replicas > 1 && strstr(why, "non-clustered") != NULL) {
                log_write(LOG_WARN,
                          "a single NATS server: the lease bucket %s gets 1 replica, "
                          "not %d",
                          cfg->bucket, replicas);
                replicas = 1;
                continue;
            }
        }
        if (s == NATS_OK)
            break;
        if (attempt % 8 == 1)
            log_write(LOG_WARN, "lease bucket %s not ready (%s, attempt %u): retrying", cfg->bucket,
                      natsStatus_GetText(s), attempt);
        if (cfg->pause != NULL ? cfg->pause(cfg->pause_ctx, 250)
                               : nanosleep(&(struct timespec){0, 250000000}, NULL) != 0)
            break;
    }
    if (s != NATS_OK) {
        log_write(LOG_ERROR, "cannot bind the lease bucket %s: %s %s", cfg->bucket,
                  natsStatus_GetText(s), nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
        return s;
    }
    kvStatus *st = NULL;
    if ((s = kvStore_Status(&st, kv->kv)) != NATS_OK)
        return s;
    int64_t ttl_ns = kvStatus_TTL(st);
    kvStatus_Destroy(st);
    kv->ttl_ms = ttl_ns > 0 ? (uint64_t)ttl_ns / 1000000 : 0;
    if (kv->ttl_ms > UINT32_MAX || lease_timing_init(&kv->timing, (uint32_t)kv->ttl_ms) != 0) {
        log_write(LOG_ERROR,
                  "the lease bucket %s has a TTL of %llu ms: leases need a TTL of at least %u ms "
                  "(an existing bucket keeps its TTL; delete it to change it)",
                  cfg->bucket, (unsigned long long)kv->ttl_ms, LEASE_TTL_MIN_MS);
        return NATS_INVALID_ARG;
    }
    if (kv->ttl_ms != cfg->ttl_ms)
        log_write(LOG_WARN, "lease bucket %s exists with a TTL of %llu ms, not %u: using %llu",
                  cfg->bucket, (unsigned long long)kv->ttl_ms, cfg->ttl_ms,
                  (unsigned long long)kv->ttl_ms); /* invariant 1 */
    return NATS_OK;
}

natsStatus lease_kv_create(natsConnection *nc, const lease_kv_config_t *cfg,
                           lease_kv_notify_fn notify, void *ctx, lease_kv_t **out)
{
    natsStatus s = NATS_NO_MEMORY;
    lease_kv_t *kv = calloc(1, sizeof(*kv));
    char *models = cfg->models != NULL ? strdup(cfg->models) : NULL;
    if (kv == NULL)
        goto out;
    pthread_mutex_init(&kv->lock, NULL);
    pthread_cond_init(&kv->cond, NULL);
    if (models == NULL || (kv->instance = strdup(cfg->instance)) == NULL)
        goto out;
    kv->nc = nc;
    kv->notify = notify;
    kv->ctx = ctx;
    snprintf(kv->bucket, sizeof(kv->bucket), "%s", cfg->bucket);
    for (char *save = NULL, *m = strtok_r(models, ",", &save); m != NULL;
         m = strtok_r(NULL, ",", &save)) {
        lease_kv_model_t *grown = realloc(kv->models, (kv->n_models + 1) * sizeof(*grown));
        if (grown == NULL)
            goto out;
        kv->models = grown;
        lease_kv_model_t *lm = &kv->models[kv->n_models];
        memset(lm, 0, sizeof(*lm));
        if ((lm->model = strdup(m)) == NULL)
            goto out;
        kv->n_models++;
        if (lease_kv_key(m, lm->key, sizeof(lm->key)) != 0) {
            s = NATS_INVALID_ARG;
            goto out;
        }
        lease_init(&lm->lease, clock_mono_ns());
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = LEASE_KV_CALL_MS;
    if ((s = natsConnection_JetStream(&kv->js, nc, &jo)) != NATS_OK ||
        (s = lease_kv_bind(kv, cfg)) != NATS_OK)
        goto out;
    if (pthread_create(&kv->thread, NULL, lease_kv_main, kv) != 0) {
        s = NATS_SYS_ERROR;
        goto out;
    }
    kv->started = 1;
    log_write(LOG_INFO, "leases in bucket %s (TTL %llu ms, renewed every %llu ms) for %zu models",
              kv->bucket, (unsigned long long)kv->ttl_ms,
              (unsigned long long)(kv->timing.renew_ns / 1000000), kv->n_models);
    *out = kv;
    kv = NULL;
out:
    free(models);
    lease_kv_destroy(kv);
    return s;
}

/* A delete marker conditional on the revision we hold (invariant 2). */
static void lease_kv_release(lease_kv_t *kv, lease_kv_model_t *m)
{
    char subject[64 + LEASE_KV_KEY_MAX + 8], rev[24];
    snprintf(subject, sizeof(subject), "$KV.%s.%s", kv->bucket, m->key);
    snprintf(rev, sizeof(rev), "%llu", (unsigned long long)m->lease.revision);
    natsMsg *msg = NULL;
    if (natsMsg_Create(&msg, subject, NULL, NULL, 0) != NATS_OK)
        return;
    natsMsgHeader_Set(msg, "KV-Operation", "DEL");
    natsMsgHeader_Set(msg, "Nats-Expected-Last-Subject-Sequence", rev);
    jsPubAck *ack = NULL;
    natsStatus s = js_PublishMsg(&ack, kv->js, msg, NULL, NULL);
    log_write(s == NATS_OK ? LOG_INFO : LOG_WARN, "lease of model %s released: %s", m->model,
              s == NATS_OK ? "a standby may take it now" : natsStatus_GetText(s));
    jsPubAck_Destroy(ack);
    natsMsg_Destroy(msg);
}

void lease_kv_destroy(lease_kv_t *kv)
{
    if (kv == NULL)
        return;
    if (kv->started) {
        pthread_mutex_lock(&kv->lock);
        kv->stop = 1;
        pthread_cond_signal(&kv->cond);
        pthread_mutex_unlock(&kv->lock);
        pthread_join(kv->thread, NULL);
        for (size_t i = 0; i < kv->n_models; i++) {
            if (kv->models[i].lease.state == LEASE_OWNER)
                lease_kv_release(kv, &kv->models[i]);
        }
    }
    for (size_t i = 0; i < kv->n_models; i++)
        free(kv->models[i].model);
    free(kv->models);
    kvStore_Destroy(kv->kv);
    jsCtx_Destroy(kv->js);
    pthread_cond_destroy(&kv->cond);
    pthread_mutex_destroy(&kv->lock);
    free(kv->instance);
    free(kv);
}
