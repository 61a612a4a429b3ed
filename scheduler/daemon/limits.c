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

#define LIMITS_DEFAULT(field, value) \
    do {                             \
        if ((field) == 0)            \
            (field) = (value);       \
    } while (0)

void limits_resolve(daemon_limits_t *l)
{
    LIMITS_DEFAULT(l->name_bytes, DAEMON_LIMIT_NAME_BYTES);
    LIMITS_DEFAULT(l->items, DAEMON_LIMIT_ITEMS);
    LIMITS_DEFAULT(l->reply_to_bytes, DAEMON_LIMIT_REPLY_TO_BYTES);
    LIMITS_DEFAULT(l->consumers, DAEMON_LIMIT_CONSUMERS);
    LIMITS_DEFAULT(l->pulls, DAEMON_LIMIT_PULLS);
    LIMITS_DEFAULT(l->inflight, DAEMON_LIMIT_INFLIGHT);
    LIMITS_DEFAULT(l->batch_size, DAEMON_LIMIT_BATCH_SIZE);
    LIMITS_DEFAULT(l->batch_tokens, DAEMON_LIMIT_BATCH_TOKENS);
    LIMITS_DEFAULT(l->models, DAEMON_LIMIT_MODELS);
    LIMITS_DEFAULT(l->shapes, DAEMON_LIMIT_SHAPES);
    LIMITS_DEFAULT(l->shapes_per_model, DAEMON_LIMIT_SHAPES_PER_MODEL);
    LIMITS_DEFAULT(l->new_shapes, DAEMON_LIMIT_NEW_SHAPES);
    LIMITS_DEFAULT(l->queue_items, DAEMON_LIMIT_QUEUE_ITEMS);
    LIMITS_DEFAULT(l->queue_bytes, DAEMON_LIMIT_QUEUE_BYTES);
    LIMITS_DEFAULT(l->dedupe_ids, DAEMON_LIMIT_DEDUPE_IDS);
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
