/*
 * consumers.h - the registry of consumers: contract, liveness and outstanding pulls; the batches
 * a consumer holds are its worker's in the core (sched_worker_batches). Owned and touched by the
 * owner thread only.
 *
 * Ownership: the registry owns every consumer_t; a consumer pointer stays valid until
 * consumers_prune forgets it or consumers_destroy. Strings handed out are views into the
 * consumer, valid as long as it is. Strings passed in are copied.
 */
#ifndef LANESCHED_DAEMON_CONSUMERS_H
#define LANESCHED_DAEMON_CONSUMERS_H

#include "scheduler/core/sched.h"
#include "scheduler/daemon/daemon.h"

typedef struct consumers consumers_t;
typedef struct consumer consumer_t;
struct model; /* the daemon's record of a model (daemon_int.h) */

/* Length of a consumer's public id and of its secret: 32 lowercase hex characters each. */
#define CONSUMERS_ID_LEN 32

daemon_status_t consumers_create(consumers_t **out /* out */);
void consumers_destroy(consumers_t *cs); /* NULL-safe */

/* Registers a consumer with a fresh random public id and secret, alive as of now_ns. */
daemon_status_t consumers_add(consumers_t *cs, const char *model, const char *name,
                              packer_contract_t contract, uint64_t now_ns,
                              consumer_t **out /* out */);
/* The consumer whose secret (the token of its subjects) this is, dead ones included, or NULL.
 * A public id finds nothing. */
consumer_t *consumers_find(consumers_t *cs, const char *secret);
/* The live consumer with this secret, its liveness refreshed to now_ns (every message from a
 * consumer counts); NULL for an unknown or dead one. */
consumer_t *consumers_touch(consumers_t *cs, const char *secret, uint64_t now_ns);

/* Registration order; i < consumers_count. */
size_t consumers_count(const consumers_t *cs);
consumer_t *consumers_at(const consumers_t *cs, size_t i);

/* The public id (stats, metrics, logs) and the secret (the subjects' token; only for the
 * Registered reply). Views. */
const char *consumers_id(const consumer_t *c);
const char *consumers_secret(const consumer_t *c);
const char *consumers_name(const consumer_t *c);                  /* view */
const char *consumers_model(const consumer_t *c);                 /* view: its model's name */
const packer_contract_t *consumers_contract(const consumer_t *c); /* view */
int consumers_dead(const consumer_t *c);
/* Marks the consumer dead (bye, or silent too long): it must hold no pulls or batches. */
void consumers_kill(consumer_t *c);
/* Counts a batch of `items` dispatched to it (stats). */
void consumers_dispatched_note(consumer_t *c, uint64_t items);
/* Records the shape of a batch dispatched to c: 1 when it is the shape of c's previous batch
 * (a shape hit for a prefix cache of one shape), 0 for its first batch or a switch. */
int consumers_shape_note(consumer_t *c, uint64_t signature);
/* The scheduler's view of the consumer (cost, warm shapes; sched_worker_create): borrowed, the
 * scheduler owns it. The daemon sets it at registration and clears it when it destroys the
 * worker at the consumer's death. */
void consumers_worker_set(consumer_t *c, sched_worker_t *worker);
sched_worker_t *consumers_worker(const consumer_t *c);
/* The daemon's record of its model: borrowed; set at registration (the record counts the live
 * consumer and lives as long), cleared at its death. */
void consumers_model_set(consumer_t *c, struct model *model);
struct model *consumers_model_rec(const consumer_t *c);
/* Batches in flight the consumer holds (its worker's; 0 once dead). */
size_t consumers_inflight_count(const consumer_t *c);

/* ---- pulls, oldest first -------------------------------------------------------------------- */

daemon_status_t consumers_pull_add(consumer_t *c, const char *reply, uint32_t credits,
                                   uint64_t expires_ns);
/* The reply subject of the oldest open pull (a view, valid until that pull goes), or NULL. */
const char *consumers_pull_reply(const consumer_t *c);
/* One batch went out on the oldest pull: uses a credit, drops the pull at the last. */
void consumers_pull_use(consumer_t *c);
void consumers_pull_pop(consumer_t *c);
/* Drops the pull at index (none if past the end); the others keep their order. */
void consumers_pull_del(consumer_t *c, size_t index);
size_t consumers_pull_count(const consumer_t *c);
/* The server found no subscriber for a Batch sent to c (undelivered.c): c is served nothing until
 * its next message (consumers_touch clears it). */
void consumers_inbox_silent(consumer_t *c);
int consumers_inbox_is_silent(const consumer_t *c);

/* ---- liveness and deadlines ----------------------------------------------------------------- */

/* What consumers_expire found; each callback runs on the owner thread. */
typedef struct {
    /* c has been silent for silent_ns > dead_after: release its batches and pulls; the registry
     * then marks it dead. */
    void (*dead)(void *ctx, consumer_t *c, uint64_t silent_ns);
    /* A batch of c passed its ack deadline: return it (it then leaves c's worker). */
    void (*ack_expired)(void *ctx, consumer_t *c, uint64_t batch_id);
    /* A pull of c expired; the registry drops it after the call (reply is a view). */
    void (*pull_expired)(void *ctx, consumer_t *c, const char *reply);
    void *ctx;
} consumers_timers_t;

/* Runs every liveness and deadline rule at now_ns, in that order per consumer. */
void consumers_expire(consumers_t *cs, uint64_t now_ns, uint64_t dead_after_ns,
                      const consumers_timers_t *timers);
/* The loop itself was stalled: every live consumer's liveness restarts at now_ns. */
void consumers_stall_reset(consumers_t *cs, uint64_t now_ns);
/* The loop itself was stalled for by_ns: the ack deadlines of every live consumer's batches move
 * by_ns later (the acks and heartbeats that would have kept them are still on their way). */
void consumers_deadlines_shift(consumers_t *cs, uint64_t by_ns);
/* The earliest moment any rule of consumers_expire fires, or `bound` if that is earlier. */
uint64_t consumers_next_deadline(const consumers_t *cs, uint64_t dead_after_ns, uint64_t bound);
/* Forgets consumers dead for longer than keep_ns (their ids then read as unknown, not stale). */
void consumers_prune(consumers_t *cs, uint64_t now_ns, uint64_t keep_ns);
/* Forgets the dead consumer silent the longest, ahead of its time (the registry is at its
 * limit); 0 when every consumer is alive. */
int consumers_forget_dead(consumers_t *cs);

/* ---- stats ---------------------------------------------------------------------------------- */

typedef struct {
    const char *id, *name, *model; /* views */
    packer_contract_t contract;
    int alive;
    uint64_t idle_ns;
    size_t inflight_batches, pulls;
    uint64_t batches, items;
} consumers_info_t;

void consumers_info(const consumer_t *c, uint64_t now_ns, consumers_info_t *out /* out */);

/* Debug-build invariants (common/invariant.h): 1 when they hold. */
int consumers_check(const consumers_t *cs);

#endif
