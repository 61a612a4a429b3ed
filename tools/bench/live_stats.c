/*
 * live_stats.c - the daemon's lanes.stats document as live mode reads it: the counters the token
 * balance and the run's paragraph need, the rejections summed over reasons, and the lanes,
 * queued and in-flight items summed over every shape of every model. Parsed with jansson.
 *
 * Invariants:
 *  1. Every counter of LIVE_COUNTERS must be in "counters", or the document does not count
 *     (-1): a missing key never reads as 0, which would pass the token balance by accident.
 *  2. Values are read as the daemon wrote them (unsigned 64-bit); a delta is after - before, so
 *     --url works on a daemon that ran before.
 *
 * Rejected alternatives:
 *  - The string scanner this file replaced (strstr on "\"key\":" inside a span): it depended on
 *    the writer's exact spacing and key order; jansson reads any valid document.
 */
#include "live_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The counters read from lanes.stats, by key. */
#define LIVE_COUNTERS(X)            \
    X(items_received)               \
    X(tokens_received)              \
    X(items_routed)                 \
    X(tokens_routed)                \
    X(items_completed)              \
    X(tokens_completed)             \
    X(items_returned)               \
    X(duplicates)                   \
    X(padded_tokens)                \
    X(real_tokens)                  \
    X(lanes_opened)                 \
    X(lane_reuses)                  \
    X(shape_switches)               \
    X(dead_lettered)                \
    X(pending_items)                \
    X(publish_failures)             \
    X(dropped_messages)             \
    X(batches_expired_ack_deadline) \
    X(consumers_declared_dead)

/* A counter's value: integers as written (two's complement for a negative one), reals
 * truncated, anything else 0. */
static uint64_t live_json_u64(const json_t *v)
{
    if (json_is_integer(v))
        return (uint64_t)json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) >= 0)
        return (uint64_t)json_real_value(v);
    return 0;
}

/* The sum of the values of every member named key at any depth of v. */
static uint64_t live_json_sum(const json_t *v, const char *key)
{
    uint64_t sum = 0;
    if (json_is_object(v)) {
        const char *name;
        const json_t *member;
        json_object_foreach((json_t *)v, name, member)
        {
            if (strcmp(name, key) == 0)
                sum += live_json_u64(member);
            sum += live_json_sum(member, key);
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *item;
        json_array_foreach(v, i, item) sum += live_json_sum(item, key);
    }
    return sum;
}

int live_stats_parse(const char *json, size_t len, net_stats_t *out)
{
    int rc = -1;
    net_stats_t s;
    memset(&s, 0, sizeof(s));
    json_error_t e;
    json_t *root = json_loadb(json, len, 0, &e);
    const json_t *counters = json_object_get(root, "counters"), *v;
    if (!json_is_object(counters))
        goto out;
#define LIVE_COUNTER_READ(name)                         \
    if ((v = json_object_get(counters, #name)) == NULL) \
        goto out;                                       \
    s.name = live_json_u64(v);
    LIVE_COUNTERS(LIVE_COUNTER_READ)
#undef LIVE_COUNTER_READ
    const json_t *rejected = json_object_get(counters, "rejected");
    if (json_is_object(rejected)) {
        const char *reason;
        const json_t *n;
        json_object_foreach((json_t *)rejected, reason, n) s.rejected += live_json_u64(n);
    }
    const json_t *models = json_object_get(root, "models");
    s.lanes = live_json_sum(models, "lanes");
    s.queued_items = live_json_sum(models, "queued_items");
    s.inflight_items = live_json_sum(models, "pending_items");
    s.stored_items = live_json_sum(models, "stored_items");
    *out = s;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int live_stats_fetch(natsConnection *nc, const char *prefix, net_stats_t *out)
{
    char subject[256];
    natsMsg *m = NULL;
    int rc = -1;
    snprintf(subject, sizeof(subject), "%s.stats", prefix);
    if (natsConnection_Request(&m, nc, subject, "", 0, NET_STATS_TIMEOUT_MS) != NATS_OK)
        goto out;
    rc = live_stats_parse(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), out);
out:
    natsMsg_Destroy(m);
    return rc;
}

void live_stats_delta(const net_stats_t *before, const net_stats_t *after, net_stats_t *d)
{
    *d = *after;
#define LIVE_COUNTER_SUB(name) d->name = after->name - before->name;
    LIVE_COUNTERS(LIVE_COUNTER_SUB)
#undef LIVE_COUNTER_SUB
    d->rejected = after->rejected - before->rejected;
}
