/*
 * daemon_fx.h - a daemon under test without NATS, for the daemon's limit and restart tests:
 * events posted with daemon_post, one daemon_turn at a time, a fake clock, and a fake publish
 * function that records every message. (tests/unit/test_daemon.c keeps its own copy of the
 * same idea; this one adds a disk store in a temporary directory and restarts.)
 *
 * Ownership: fx_create's fixture is freed with fx_destroy; messages it records are its own;
 * every decoded message a helper returns is the caller's (its codec destroy).
 */
#ifndef LANESCHED_TEST_DAEMON_FX_H
#define LANESCHED_TEST_DAEMON_FX_H

#include "codec/codec.h"
#include "scheduler/daemon/daemon.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define FX_MS 1000000ull

typedef struct {
    char subject[400];
    uint8_t *data;
    size_t len;
} fx_sent_t;

typedef struct {
    uint64_t now;
    uint64_t tick_ns; /* added to now at every read of the daemon's clock (0: a still clock) */
    fx_sent_t *sent;
    size_t n_sent, cap_sent;
    daemon_config_t cfg;
    char dir[256]; /* the disk store's directory, "" for the memory store */
    daemon_t *d;
} fx_t;

/* A daemon with the unit tests' timings and the given limits (NULL: all defaults); disk: a
 * disk store in a fresh temporary directory, else the memory store. */
fx_t *fx_create(const daemon_limits_t *limits, int disk);
/* Destroys the daemon and creates it again on the same store directory (a restart). */
void fx_restart(fx_t *f);
void fx_destroy(fx_t *f);
void fx_forget(fx_t *f); /* drops the recorded messages */

/* One turn; asserts it did not stop. */
void fx_turn(fx_t *f);
size_t fx_count_on(const fx_t *f, const char *subject);
const fx_sent_t *fx_last_on(const fx_t *f, const char *subject);

/* Posts a Submit of n items "<prefix><first + i>" of one shape (ids padded with '.' to id_len
 * when id_len is larger); reply may be NULL. */
void fx_submit(fx_t *f, const char *model, uint64_t sig, const char *prefix, int first, int n,
               size_t id_len, const char *reply);
codec_submit_reply_t *fx_submit_reply(const fx_t *f, const char *reply);

/* Registers; on success id (33 bytes) gets the consumer id and "" is returned, else the error
 * (static storage until the next call). */
const char *fx_register(fx_t *f, const char *model, uint32_t bs, uint32_t bt, const char *name,
                        char *id);
/* The same for a whole Register (borrowed): a declared cost, a cache, an input cap. */
const char *fx_register_full(fx_t *f, const codec_register_t *r, char *id);
void fx_pull(fx_t *f, const char *id, uint32_t batches, uint32_t expires_ms, const char *inbox);
codec_batch_t *fx_batch_on(const fx_t *f, const char *inbox);
codec_ack_reply_t *fx_ack(fx_t *f, const char *id, const codec_ack_t *a);

/* The stats document for a request body (NULL: empty), parsed; *out_len (may be NULL) gets its
 * size on the wire. */
json_t *fx_stats(fx_t *f, const char *body, size_t *out_len);
json_int_t fx_counter(json_t *doc, const char *key);
json_int_t fx_rejected(json_t *doc, const char *word);

#endif
