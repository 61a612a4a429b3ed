/*
 * lease.h - exclusive ownership of a model through a lease in a key-value bucket of the fabric:
 * the decisions, with no NATS in them (scheduler/nats/lease_kv.c makes the calls).
 *
 * One lease per model. An instance serves a model only while it holds the model's lease: it
 * created the key (only one creator can win: create fails when the key exists), and it renews it
 * by compare-and-set on the revision it holds before the bucket's TTL lets the key expire. An
 * instance that cannot renew stops serving at its own deadline, which falls before the key can
 * expire in the bucket (fencing), so two instances never both believe they own a model.
 *
 * Ownership: a lease_t is caller memory; nothing here allocates.
 */
#ifndef LANESCHED_DAEMON_LEASE_H
#define LANESCHED_DAEMON_LEASE_H

#include <stdint.h>

/* Timing of every lease of an instance (nanoseconds, monotonic). */
typedef struct {
    uint64_t ttl_ns;     /* the bucket's TTL: a key not written for this long is gone */
    uint64_t renew_ns;   /* how often the holder renews (a third of the TTL by default) */
    uint64_t margin_ns;  /* the holder stops serving this long before the key could expire */
    uint64_t standby_ns; /* how often a standby tries to take a held key (a tenth of the TTL) */
} lease_timing_t;

typedef enum {
    LEASE_STANDBY = 0, /* not held: try to create the key every renew period */
    LEASE_OWNER,       /* held: serve until valid_until_ns, renew every renew period */
} lease_state_t;

/* What the caller does next with the bucket. */
typedef enum {
    LEASE_ACT_NONE = 0,
    LEASE_ACT_CREATE, /* create the key (fails when someone holds it) */
    LEASE_ACT_UPDATE, /* compare-and-set the key on `revision` */
} lease_act_t;

typedef struct {
    lease_state_t state;
    uint64_t revision;       /* of our last write, while OWNER */
    uint64_t valid_until_ns; /* OWNER: serve strictly before this; 0 otherwise */
    uint64_t next_ns;        /* when the next bucket call is due */
    uint64_t gained, lost;   /* transitions, for stats */
} lease_t;

/* The shortest TTL accepted: the margin and the renew period must both stay above the time a
 * bucket write takes on a loaded cluster (tens of ms). */
#define LEASE_TTL_MIN_MS 300u

/* 0 and the defaults filled in for a TTL (renew a third of it, margin a fifth, at least 100 ms
 * and less than the renew period, standby tries every tenth, at least 100 ms); -1 when ttl_ms
 * is too short to be safe (< LEASE_TTL_MIN_MS). */
int lease_timing_init(lease_timing_t *t /* out */, uint32_t ttl_ms);

/* A lease not held, due for its first try at now_ns. */
void lease_init(lease_t *l /* out */, uint64_t now_ns);

/* What is due at now_ns (NONE before next_ns). */
lease_act_t lease_due(const lease_t *l, uint64_t now_ns);

/*
 * The outcome of the call lease_due asked for, sent at sent_ns (read from the clock before the
 * request left: the bucket's TTL counts from when it received the write, which is later, so the
 * holder's deadline sent_ns + ttl - margin falls before any expiry):
 *   lease_won     the create or the update succeeded with this new revision;
 *   lease_refused the key is someone else's: a create found it held, or an update found another
 *                 revision (we lost it; stop serving at once);
 *   lease_failed  no answer (timeout, connection down): keep the deadline, retry soon.
 * Each returns 1 when serving changed (gained or lost), else 0.
 */
int lease_won(lease_t *l, const lease_timing_t *t, uint64_t revision, uint64_t sent_ns,
              uint64_t now_ns);
int lease_refused(lease_t *l, const lease_timing_t *t, uint64_t now_ns);
int lease_failed(lease_t *l, const lease_timing_t *t, uint64_t now_ns);

/* 1 while the lease lets this instance serve at now_ns: OWNER and before valid_until_ns. */
int lease_serving(const lease_t *l, uint64_t now_ns);

#endif
