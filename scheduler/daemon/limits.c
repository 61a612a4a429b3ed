/*
 * limits.c - the limits in force on what one client controls, and the caps the codec checks
 * with them (codec/validate.c holds the rules; this file only says which numbers apply).
 *
 * Invariants:
 *   1. Every limit has a default (daemon.h's DAEMON_LIMIT_*, each with its reason): a daemon
 *      created with a zeroed daemon_limits_t is as bounded as one started from the command line.
 *   2. A heartbeat may list as many ids as a consumer may hold batches, and an ack as many
 *      positions as a batch may hold items: one number bounds each pair.
 *
 * Rejected: 0 as "unlimited". A limit nobody set would then be no limit, and every embedder
 * (the unit tests, the bench) would run without the bounds the daemon promises.
 */
#include "scheduler/daemon/daemon_int.h"

#define DAEMON_LIMIT_FILL(field, value) \
    do {                                \
        if ((field) == 0)               \
            (field) = (value);          \
    } while (0)

void limits_resolve(daemon_limits_t *l)
{
    DAEMON_LIMIT_FILL(l->name_bytes, DAEMON_LIMIT_NAME_BYTES);
    DAEMON_LIMIT_FILL(l->items, DAEMON_LIMIT_ITEMS);
    DAEMON_LIMIT_FILL(l->reply_to_bytes, DAEMON_LIMIT_REPLY_TO_BYTES);
    DAEMON_LIMIT_FILL(l->consumers, DAEMON_LIMIT_CONSUMERS);
    DAEMON_LIMIT_FILL(l->pulls, DAEMON_LIMIT_PULLS);
    DAEMON_LIMIT_FILL(l->inflight, DAEMON_LIMIT_INFLIGHT);
    DAEMON_LIMIT_FILL(l->batch_size, DAEMON_LIMIT_BATCH_SIZE);
    DAEMON_LIMIT_FILL(l->batch_tokens, DAEMON_LIMIT_BATCH_TOKENS);
    DAEMON_LIMIT_FILL(l->models, DAEMON_LIMIT_MODELS);
    DAEMON_LIMIT_FILL(l->shapes, DAEMON_LIMIT_SHAPES);
    DAEMON_LIMIT_FILL(l->shapes_per_model, DAEMON_LIMIT_SHAPES_PER_MODEL);
    DAEMON_LIMIT_FILL(l->new_shapes, DAEMON_LIMIT_NEW_SHAPES);
    DAEMON_LIMIT_FILL(l->queue_items, DAEMON_LIMIT_QUEUE_ITEMS);
    DAEMON_LIMIT_FILL(l->queue_bytes, DAEMON_LIMIT_QUEUE_BYTES);
    DAEMON_LIMIT_FILL(l->dedupe_ids, DAEMON_LIMIT_DEDUPE_IDS);
    DAEMON_LIMIT_FILL(l->queue_age_ms, DAEMON_LIMIT_QUEUE_AGE_MS);
    DAEMON_LIMIT_FILL(l->pull_expires_ms, DAEMON_LIMIT_PULL_EXPIRES_MS);
    DAEMON_LIMIT_FILL(l->backlog_bytes, DAEMON_LIMIT_BACKLOG_BYTES);
}

codec_caps_t limits_caps(const daemon_limits_t *l)
{
    return (codec_caps_t){
        .max_items = l->items,
        .max_name = l->name_bytes,
        .max_batch_size = l->batch_size,
        .max_batch_tokens = l->batch_tokens,
        .max_positions = l->batch_size, /* invariant 2 */
        .max_ids = l->inflight,
    };
}
