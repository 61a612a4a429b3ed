/*
 * lease_kv.h - the leases of lease.h kept in a JetStream key-value bucket (private to
 * scheduler/nats/): one key per model, written by its holder, expiring after the bucket's TTL.
 *
 * Ownership: lease_kv_create's result is returned to the caller (lease_kv_destroy); the
 * connection and the configuration's strings are borrowed and must outlive it.
 */
#ifndef LANESCHED_NATS_LEASE_KV_H
#define LANESCHED_NATS_LEASE_KV_H

#include "scheduler/daemon/lease.h"

#include <nats/nats.h>
#include <stddef.h>

/* The most replicas a bucket may be created with: JetStream keeps a stream on at most 5 servers
 * and refuses a larger replica count. */
#define LEASE_KV_REPLICAS_MAX 5

typedef struct {
    const char *bucket;   /* the KV bucket, created when missing */
    int replicas;         /* when creating it (1 to LEASE_KV_REPLICAS_MAX): 3 on a cluster of 3 */
    uint32_t ttl_ms;      /* when creating it; an existing bucket's own TTL is used */
    const char *models;   /* comma-separated: the models this instance may serve */
    const char *instance; /* this instance's id, the value of every key it holds */
    /* The pause between tries while JetStream is not ready; returns nonzero to give up (a stop
     * signal came). NULL: nanosleep, and keep trying. */
    int (*pause)(void *ctx, uint32_t ms);
    void *pause_ctx; /* borrowed */
} lease_kv_config_t;

/* Told on the lease thread whenever a model's serving deadline changes: valid_until_ns > 0 while
 * this instance holds the model's lease (serve strictly before it, monotonic clock), 0 when it
 * does not; elsewhere is 1 once the bucket refused this instance because another holds the
 * lease (not when a renewal only failed), until this instance gains it again. model is borrowed
 * for the call. */
typedef void (*lease_kv_notify_fn)(void *ctx, const char *model, uint64_t valid_until_ns,
                                   int elsewhere);

typedef struct lease_kv lease_kv_t;

/* Binds or creates the bucket (retrying while JetStream is not ready, until cfg->pause gives
 * up) and starts the lease thread. NATS_OK, or the status of the last failure (logged). */
natsStatus lease_kv_create(natsConnection *nc, const lease_kv_config_t *cfg,
                           lease_kv_notify_fn notify, void *ctx, lease_kv_t **out /* out */);
/* Stops the thread; held leases are deleted so a standby takes over at once. NULL-safe. */
void lease_kv_destroy(lease_kv_t *kv);
/* The bucket key of a model: the model itself when every byte is one a key may hold
 * ([-_.=/A-Za-z0-9]), else "x_" and the model in hex. 0, or -1 when out is too small. */
int lease_kv_key(const char *model, char *out, size_t len);

#endif
