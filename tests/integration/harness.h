/*
 * harness.h - the plumbing of lanesched's daemon integration tests (test_daemon.c).
 *
 * Like nats.c's own test suite, every test runs a real nats-server on a free loopback port and the
 * real daemon binary as child processes, and talks to the daemon over NATS with nats.c and the
 * codec (codec/codec.h), never through the C client library. One test per process:
 *
 *   h_init()                      temp dir, cleanup handlers (atexit + fatal signals)
 *   h_nats_start()                nats-server -a 127.0.0.1 -p PORT [-js -sd DIR]
 *   h_daemon_start(args)          lanesched --server URL --data-dir DIR --prefix lanes ARGS...,
 *                                 waits for "lanesched: ready" on its stderr (kept in a file)
 *   h_daemon_kill / stop / pause / resume / restart
 *
 * Every child is killed and every temp dir removed on any exit, also when the test fails or is
 * interrupted; a failure prints the daemon's log first. LANES_TEST_KEEP=1 keeps the temp dir.
 *
 * Ownership: decoded messages returned by the helpers are the caller's, released with the
 * codec's matching destroy; strings returned by h_stats() are released with free().
 */
#ifndef LANES_TEST_HARNESS_H
#define LANES_TEST_HARNESS_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "codec/codec.h"

#define H_PREFIX "lanes"

/* ---- test plumbing ----------------------------------------------------------------------- */

/* name: printed in every line; daemon_bin: the lanesched binary; nats_bin: nats-server or NULL
 * (then $LANES_NATS_SERVER, else "nats-server" from PATH). */
void h_init(const char *name, const char *daemon_bin, const char *nats_bin);

void h_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define H_REQUIRE(cond, ...)                         \
    do {                                             \
        if (!(cond))                                 \
            h_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/* True when err is the code word `code`, alone or followed by ':' and a text for people
 * ("unknown_batch" and "unknown_batch: not in flight" both match "unknown_batch"). */
bool h_err_is(const char *err, const char *code);

/* A progress line on stdout: "test_daemon[NAME] +1.234s: ...". */
void h_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

uint64_t h_now_ms(void);
void h_sleep_ms(unsigned ms);
/* Deterministic pseudo-random numbers (splitmix64); seeded by h_init (LANES_TEST_SEED). */
uint64_t h_rand(void);

/* The test's temp dir (removed at exit) and the daemon's data dir (default TMP/data). */
const char *h_tmp(void);
const char *h_data_dir(void);
/* Must be called before the first h_daemon_start. The directory is created if missing. */
void h_set_data_dir(const char *dir);

/* Runs argv (argv[0] looked up in PATH) with stdout/stderr to /dev/null; returns the exit code,
 * or -1 if it could not run or was killed by a signal. */
int h_run(const char *const *argv);

/* Mounts a tmpfs of `size` (e.g. "2m") on dir (created); false if that is not possible. The
 * mount is undone at exit. */
bool h_mount_tmpfs(const char *dir, const char *size);

/* ---- nats-server ------------------------------------------------------------------------- */

void h_nats_start(bool jetstream);
/* The same with nats-server -c config (its host and port overridden), JetStream off. */
void h_nats_start_config(const char *config);
const char *h_url(void); /* nats://127.0.0.1:PORT */

/* ---- the daemon -------------------------------------------------------------------------- */

/* extra: NULL-terminated flags after the standard ones (may be NULL). Remembered for restarts.
 * Waits (at most 20 s) for "lanesched: ready" on the daemon's stderr. */
void h_daemon_start(const char *const *extra);
/* Starts the daemon again with the same flags on the same data dir (it must not be running). */
void h_daemon_restart(void);
/* SIGTERM, waits at most 15 s, then SIGKILL. Returns the exit code (0..255), or -1 when it had to
 * be killed or died of a signal. */
int h_daemon_stop(void);
/* Waits at most ms for the daemon to exit by itself: its exit code (0..255), -1 when it died of a
 * signal, -2 when it still runs. */
int h_daemon_wait_exit(unsigned ms);
/* SIGTERM and requires a clean exit (code 0). */
void h_daemon_stop_clean(void);
void h_daemon_kill(void);   /* SIGKILL, reaped */
void h_daemon_pause(void);  /* SIGSTOP */
void h_daemon_resume(void); /* SIGCONT */
bool h_daemon_running(void);
/* Prints the daemon's log (all of it, at most the last 400 lines) to stderr. */
void h_dump_daemon_log(void);

/* ---- NATS -------------------------------------------------------------------------------- */

/* A connection to the test's nats-server (2 s connect timeout, reconnects forever). */
natsConnection *h_connect(void);
void h_disconnect(natsConnection *nc);

/* "lanes.<a>" / "lanes.<a>.<b>" into a static-free caller buffer. */
void h_subject(char *buf, size_t cap, const char *a, const char *b);

/* ---- producer side ----------------------------------------------------------------------- */

/* The signature of test shape k (two components derived from k). */
uint64_t h_shape(unsigned k);
/* The two component hashes of test shape k (out[2]); h_shape(k) == codec_signature(out, 2). */
void h_shape_components(unsigned k, uint64_t out[2]);

/* A WorkItem borrowing id (a NUL-terminated string), model and payload. */
codec_work_item_t h_item(const char *id, const char *model, uint64_t signature, uint32_t tokens,
                         const void *payload, size_t payload_len);

/* Request/reply Submit on lanes.submit.<subject_model>. NATS_OK: *out is the decoded reply (the
 * test fails if it does not decode). Other statuses (NATS_TIMEOUT, NATS_NO_RESPONDERS, ...) are
 * returned for the caller to handle; *out is then NULL. */
natsStatus h_submit(natsConnection *nc, const char *subject_model, const codec_work_item_t *items,
                    size_t n, int64_t timeout_ms, codec_submit_reply_t **out);
/* h_submit that must succeed with every item ACCEPTED (5 s timeout). */
void h_submit_accepted(natsConnection *nc, const char *subject_model,
                       const codec_work_item_t *items, size_t n);
/* Raw request; NATS_OK: *out is the reply (natsMsg_Destroy). */
natsStatus h_request(natsConnection *nc, const char *subject, const void *data, size_t len,
                     int64_t timeout_ms, natsMsg **out);

/* ---- consumer side ----------------------------------------------------------------------- */

typedef struct {
    natsConnection *nc; /* borrowed */
    char name[64];
    char id[80];
    char pull_subject[160];
    char ack_subject[160];
    char hb_subject[160];
    char bye_subject[160];
    uint32_t heartbeat_ms, dead_after_ms, ack_wait_ms;
    char inbox[128];       /* reply subject of this consumer's pulls */
    natsSubscription *sub; /* sync subscription on inbox */
    pthread_t hb_thread;
    bool hb_running;
    atomic_bool hb_stop;
    atomic_uint_fast64_t hb_sent;
    unsigned hb_period_ms;
} h_consumer_t;

/* Raw Register request; NATS_OK: *out is the decoded Registered (test fails if undecodable). */
natsStatus h_register_raw(natsConnection *nc, const codec_register_t *reg, int64_t timeout_ms,
                          codec_registered_t **out);
/* Registers (the test fails on an error reply), checks the Registered subjects, subscribes an
 * inbox for its batches. */
void h_consumer_register(h_consumer_t *c, natsConnection *nc, const char *model,
                         uint32_t max_batch_size, uint32_t max_batch_tokens,
                         uint32_t max_input_tokens, const char *name);
/* Stops the heartbeat thread and drops the inbox subscription. Sends nothing (no bye). */
void h_consumer_close(h_consumer_t *c);
/* Unsubscribes sub (taken; NULL is a no-op) on nc (borrowed), waits for the PONG, destroys it:
 * nats.c 3.4's read loop may still hold the subscription of a message it read before the UNSUB
 * (nats.c issue #637, fixed in 3.6; a SEGV in natsConn_processMsg). */
void h_sub_destroy(natsConnection *nc, natsSubscription *sub);

/* Publishes a Pull with the consumer's inbox as reply subject. */
void h_pull(h_consumer_t *c, uint32_t max_batches, uint32_t expires_ms);
/* The next Batch on the consumer's inbox, NULL after timeout_ms without one. */
codec_batch_t *h_next_batch(h_consumer_t *c, int64_t timeout_ms);
/* Same on any subscription; subject (may be NULL) receives the message's subject. */
codec_batch_t *h_sub_next_batch(natsSubscription *sub, int64_t timeout_ms, char *subject,
                                size_t cap);

/* Request/reply Ack; NULL on timeout. */
codec_ack_reply_t *h_ack(h_consumer_t *c, const codec_ack_t *ack, int64_t timeout_ms);
/* Acks the whole batch and requires AckReply{acked == n_items, no error}. */
void h_ack_all_ok(h_consumer_t *c, const codec_batch_t *b);
/* Heartbeat naming in_progress batch ids (n may be 0). */
void h_heartbeat(h_consumer_t *c, const uint64_t *in_progress, size_t n);
/* A thread sending an empty Heartbeat every period_ms. */
void h_hb_start(h_consumer_t *c, unsigned period_ms);
void h_hb_stop(h_consumer_t *c);
/* Request/reply bye; the reply (NULL on timeout) is returned. */
codec_ack_reply_t *h_bye(h_consumer_t *c, int64_t timeout_ms);

/* ---- lanes.stats --------------------------------------------------------------------------- */

/* The readers below parse the document with jansson each time; the test fails when it is not a
 * JSON object. */

/* The stats JSON (malloc'd, NUL-terminated); the test fails if there is no reply. */
char *h_stats(natsConnection *nc);
/* The number at a dotted path of object keys ("counters.rejected.malformed"): each key is looked
 * up inside the value of the previous one. False when a key is missing or not a number. */
bool h_json_path(const char *json, const char *path, int64_t *out);
/* counters.<name>; the test fails when it is missing. */
int64_t h_counter(const char *json, const char *name);
/* counters.rejected.<reason>, 0 when absent. */
int64_t h_rejected(const char *json, const char *reason);
/* The sum of every numeric "key": value anywhere in the document (e.g. all queued_items). */
int64_t h_json_sum(const char *json, const char *key);
/* The number of occurrences of "key": anywhere in the document. */
size_t h_json_count(const char *json, const char *key);

/* ---- a consumer in another process (for SIGKILL / SIGSTOP) --------------------------------- */

/*
 * The child is this test binary re-executed as `test_daemon __consumer URL MODEL BS BT`; it
 * registers, prints "REG <consumer_id>", heartbeats every heartbeat_ms while idle, and obeys
 * one-line commands on stdin:
 *   "pull N EXPIRES_MS" -> "BATCH <status> <batch_id> <n> <id>..." (status OK/EXPIRED/ERROR;
 *                          for ERROR the error text follows) or "BATCH NONE" after a timeout
 *   "ack"               -> acks the last batch whole: "ACK <acked> <returned> <unknown> <error|->"
 *                          or "ACK TIMEOUT"
 * and exits on EOF.
 */
typedef struct {
    pid_t pid;
    int to_fd;
    int from_fd;
    char buf[16384];
    size_t len;
} h_child_t;

void h_child_start(h_child_t *ch, const char *model, uint32_t max_batch_size,
                   uint32_t max_batch_tokens);
void h_child_send(h_child_t *ch, const char *line);
/* The next line (without '\n') into line; false after timeout_ms without a whole line. */
bool h_child_line(h_child_t *ch, int64_t timeout_ms, char *line, size_t cap);
void h_child_signal(h_child_t *ch, int sig); /* SIGKILL also reaps it */
/* Closes its stdin and waits (bounded) for it to exit, killing it if needed. */
void h_child_finish(h_child_t *ch);
/* The child's main (argv as given to main, argv[1] == "__consumer"). */
int h_child_main(int argc, char **argv);

#endif /* LANES_TEST_HARNESS_H */
