/*
 * chaos.h - lanesched-chaos, the fault campaign runner: producers that submit with
 * request/reply and retry with the same ids, consumers that pull, ack, nak, drop and crash,
 * while the runner SIGKILLs and restarts the daemon, restarts nats-server, SIGSTOPs the daemon
 * and damages its files between runs; then it drains the queue and checks the total history
 * (Jepsen's total-queue: lost, duplicated, unexpected).
 *
 *   main.c       flags, the campaign plan and its loop, the report
 *   procs.c      nats-server and lanesched: start, SIGKILL, restart, SIGSTOP
 *   damage.c     what is done to the data directory while the daemon is down
 *   producers.c  producer threads
 *   consumers.c  consumer threads
 *   history.c    what was sent, acknowledged and delivered; the checker
 *   flood.c      --flood: the hostile-client cases, each against a fresh daemon
 *
 * Ownership: the campaign (chaos_t) owns everything; threads borrow it for their life.
 */
#ifndef LANESCHED_CHAOS_H
#define LANESCHED_CHAOS_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- options ----------------------------------------------------------------------------------
 */

typedef struct {
    const char *lanesched;  /* the daemon binary */
    const char *nats;       /* nats-server, found on PATH when NULL */
    const char *work;       /* a directory for the data, logs and history (made if missing) */
    const char *durability; /* process | power */
    uint32_t producers, consumers;
    uint32_t rate;          /* items per second over every producer; 0 = as fast as replies come */
    uint32_t batch;         /* items per Submit */
    uint32_t kills;         /* daemon SIGKILL + restart cycles */
    uint32_t nats_restarts; /* nats-server SIGKILL + restart cycles */
    uint32_t stops;         /* daemon SIGSTOP ... SIGCONT cycles */
    uint32_t damage_every;  /* every Nth kill damages the files before the restart (0 = never) */
    char damage[128];       /* comma-separated kinds (damage.c) */
    uint32_t load_min_ms, load_max_ms; /* load between two faults */
    uint32_t stop_min_ms, stop_max_ms; /* how long a SIGSTOP lasts */
    uint32_t drain_s;                  /* how long the final drain may take */
    uint32_t segment_max;              /* --segment-max-bytes of the daemon */
    uint32_t journal_bytes;            /* --journal-file-bytes of the daemon (0: its default) */
    uint32_t min_restated;             /* --min-restatements: fewer fails the campaign */
    uint32_t dead_after_ms;            /* --dead-after-ms of the daemon (0: CHAOS_DEAD_AFTER_MS) */
    uint32_t chaos_pct;                /* % of batches a consumer naks, drops or crashes on */
    uint64_t seed;
    int verbose;
    int flood;               /* --flood instead of a campaign */
    int require_drain;       /* a queue that does not drain in time fails the campaign */
    uint32_t flood_stats_ms; /* --flood: the longest a stats answer may take */
} chaos_opts_t;

/* A consumer that stops heartbeating is dead after this long: short, so the campaigns see their
 * SIGSTOPped and crashed consumers given up within a fault's length. */
#define CHAOS_DEAD_AFTER_MS 3000u
/* --flood: long enough that every consumer its consumers case registers is still alive when
 * the last registration arrives, however slowly a loaded machine answers: the case must hold
 * more consumers alive at once than the 1,024 limit (how long its 5,000 registrations took in
 * CI: docs/bench.md, "Figures behind other constants"). */
#define CHAOS_FLOOD_DEAD_AFTER_MS 120000u

/* ---- the history (history.c) ------------------------------------------------------------------
 */

/* CHAOS_STORED: acknowledged, never delivered, and found in the daemon's store after the drain
 * (queued still: not lost). */
enum { CHAOS_UNSENT = 0, CHAOS_SENT, CHAOS_ACKED, CHAOS_REFUSED, CHAOS_STORED };

/* Per item (producer p, sequence s): its state and how often it was delivered. */
typedef struct {
    uint32_t producers;
    uint32_t cap;           /* items per producer */
    _Atomic uint8_t *state; /* [p * cap + s] */
    _Atomic uint16_t *delivered;
    atomic_uint_fast64_t unexpected; /* delivered ids that were never sent */
    atomic_uint_fast64_t corrupt;    /* delivered payloads that are not what was sent */
} chaos_history_t;

typedef struct {
    uint64_t sent, acked, refused;
    uint64_t lost;       /* acknowledged, never delivered, not in the store */
    uint64_t undrained;  /* acknowledged, never delivered, still in the store */
    uint64_t duplicated; /* delivered more than once (allowed: at least once) */
    uint64_t recovered;  /* sent without an acknowledgement, delivered anyway */
    uint64_t unexpected, corrupt;
    uint64_t deliveries;
} chaos_verdict_t;

int chaos_history_init(chaos_history_t *h, uint32_t producers, uint32_t cap);
void chaos_history_fini(chaos_history_t *h);
/* The id of item (p, s) into buf (>= 32 bytes): "p<p>-<s>"; its length. */
size_t chaos_item_id(uint32_t p, uint32_t s, char *buf);
/* The payload of an item: a function of its id (so a consumer can check it) with a length from
 * 0 to 300 bytes. buf >= 400 bytes; returns its length. */
size_t chaos_item_payload(const char *id, size_t id_len, char *buf);
/* A delivery seen by a consumer: counted, or counted as unexpected or corrupt. */
void chaos_history_delivered(chaos_history_t *h, const uint8_t *id, size_t id_len,
                             const uint8_t *payload, size_t payload_len);
/* Every acknowledged item delivered at least once. */
bool chaos_history_all_delivered(chaos_history_t *h);
void chaos_history_verdict(chaos_history_t *h, chaos_verdict_t *out /* out */);
/* After the daemon stopped: marks every acknowledged item never delivered that the store in
 * data_dir still holds (CHAOS_STORED); how many. -1 when the store does not open. */
long chaos_history_store_check(chaos_history_t *h, const char *data_dir);
/* Writes every lost item's id to path (one per line). */
void chaos_history_lost_write(chaos_history_t *h, const char *path);

/* ---- processes (procs.c) ------------------------------------------------------------------------
 */

typedef struct {
    char nats_bin[512];
    int port;
    char url[64];
    volatile pid_t nats_pid, daemon_pid;
    char nats_log[600], daemon_log[600], data_dir[600];
    uint64_t daemon_restarts, nats_restart_count, stops_done;
    uint64_t daemon_self_exits; /* ended with an exit status the campaign did not ask for */
    double restart_ms_max, restart_ms_sum; /* kill to ready */
} chaos_procs_t;

int chaos_procs_nats_start(chaos_procs_t *p, const chaos_opts_t *o);
int chaos_procs_daemon_start(chaos_procs_t *p, const chaos_opts_t *o);
void chaos_procs_daemon_kill(chaos_procs_t *p);
void chaos_procs_nats_kill(chaos_procs_t *p);
void chaos_procs_daemon_stop_for(chaos_procs_t *p, uint32_t ms);
/* SIGTERM and wait (at most 30 s); the daemon's exit code, or -1. */
int chaos_procs_daemon_term(chaos_procs_t *p);
/* procs.c invariant 3: a daemon that ended by itself. 0 when it runs (or was started again after
 * an exit status), -1 when it died of a signal the campaign did not send or does not start. */
int chaos_procs_daemon_check(chaos_procs_t *p, const chaos_opts_t *o);
void chaos_procs_cleanup(chaos_procs_t *p);

/* ---- damage (damage.c) ------------------------------------------------------------------------
 */

typedef struct {
    uint64_t tails, index_deletes, index_empties, index_stales, flips;
} chaos_damage_t;

/* The kinds named in list are known (0), or -1 with the bad one on stderr. */
int chaos_damage_parse(const char *list);
/* Keeps a copy of the index for a later "index-stale" (the daemon is down). */
void chaos_damage_snapshot(const char *data_dir, const char *work);
/* Does one kind of damage from the list, picked by rnd, to the data directory (daemon down). */
void chaos_damage_do(const char *data_dir, const char *work, const char *list, uint64_t rnd,
                     chaos_damage_t *counts);

/* ---- the campaign ------------------------------------------------------------------------------
 */

typedef struct chaos {
    chaos_opts_t o;
    chaos_procs_t procs;
    chaos_history_t hist;
    atomic_bool producing; /* producers start new batches while set */
    atomic_bool running;   /* consumers run while set */
    atomic_bool given_up;  /* the campaign failed: producers stop retrying at once */
    atomic_uint_fast64_t submits, submit_timeouts, acks, ack_timeouts, registers, naks, drops,
        crashes, batches;
    pthread_t *threads;
    size_t n_threads;
} chaos_t;

/* --flood: every case of flood.c against a fresh daemon; 0 when all pass, 1, or 2 (setup). */
int chaos_flood(const chaos_opts_t *o);

void *chaos_producer_main(void *arg); /* arg: chaos_thread_arg_t, freed by the thread */
void *chaos_consumer_main(void *arg); /* arg: chaos_thread_arg_t, freed by the thread */

typedef struct {
    chaos_t *c;
    uint32_t index;
} chaos_thread_arg_t;

/* A connection to url that reconnects without end; NULL when it cannot be made. */
natsConnection *chaos_connect(const char *url, const char *name);
/* Closes nc (its read loop joined), then destroys sub and nc; both taken, either may be NULL.
 * The other order crashes nats.c 3.4 now and then: its read loop looks a message's subscription
 * up, then locks it, so a subscription destroyed in between is used after it was freed
 * (nats.c issue #637, fixed in 3.6; seen as a SEGV in natsConn_processMsg in CI). */
void chaos_disconnect(natsConnection *nc, natsSubscription *sub);
/* Milliseconds on the monotonic clock. (Randomness: common/rng.h's splitmix64, from --seed.) */
uint64_t chaos_now_ms(void);
void chaos_sleep_ms(uint64_t ms);

#endif
