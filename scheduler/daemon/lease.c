/*
 * lease.c - the lease decisions of lease.h: when to create, when to renew, until when to serve.
 *
 * Invariants:
 *   1. valid_until_ns is only ever set from the send time of a write the bucket acknowledged,
 *      plus ttl - margin: the key cannot expire in the bucket before it (the bucket counts from
 *      when it received the write), so an instance serves only while no other can hold the key.
 *   2. A refused update ends serving at once: another instance holds a newer revision.
 *   3. A failed call (no answer) never extends the deadline; the holder retries at a fraction
 *      of the renew period, so a short outage costs nothing and a long one fences the holder.
 *
 * Rejected: a lock service of our own, or timestamps in the value compared across hosts. The
 * bucket's compare-and-set and TTL already give one winner and an expiry measured by one clock
 * (the server's); each instance then needs only its own monotonic clock.
 */
#include "scheduler/daemon/lease.h"

#include <string.h>

/* A failed call is retried this many times per renew period, so a holder that lost its
 * connection for a moment renews well before its margin runs out. */
#define LEASE_RETRIES_PER_PERIOD 4u

int lease_timing_init(lease_timing_t *t, uint32_t ttl_ms)
{
    if (ttl_ms < LEASE_TTL_MIN_MS)
        return -1;
    uint64_t ttl = (uint64_t)ttl_ms * 1000000ull;
    uint64_t margin = ttl / 5 > 100000000ull ? ttl / 5 : 100000000ull;
    uint64_t standby = ttl / 10 > 100000000ull ? ttl / 10 : 100000000ull;
    *t = (lease_timing_t){
        .ttl_ns = ttl, .renew_ns = ttl / 3, .margin_ns = margin, .standby_ns = standby};
    return 0;
}

void lease_init(lease_t *l, uint64_t now_ns)
{
    memset(l, 0, sizeof(*l));
    l->next_ns = now_ns;
}

lease_act_t lease_due(const lease_t *l, uint64_t now_ns)
{
    if (now_ns < l->next_ns)
        return LEASE_ACT_NONE;
    return l->state == LEASE_OWNER ? LEASE_ACT_UPDATE : LEASE_ACT_CREATE;
}

int lease_serving(const lease_t *l, uint64_t now_ns)
{
    return l->state == LEASE_OWNER && now_ns < l->valid_until_ns;
}

int lease_won(lease_t *l, const lease_timing_t *t, uint64_t revision, uint64_t sent_ns,
              uint64_t now_ns)
{
    int was = lease_serving(l, now_ns);
    l->state = LEASE_OWNER;
    l->revision = revision;
    l->valid_until_ns = sent_ns + t->ttl_ns - t->margin_ns; /* invariant 1 */
    l->next_ns = sent_ns + t->renew_ns;
    int is = lease_serving(l, now_ns);
    l->gained += !was && is;
    return was != is;
}

int lease_refused(lease_t *l, const lease_timing_t *t, uint64_t now_ns)
{
    int was = lease_serving(l, now_ns);
    l->lost += l->state == LEASE_OWNER;
    l->state = LEASE_STANDBY; /* invariant 2 */
    l->revision = 0;
    l->valid_until_ns = 0;
    l->next_ns = now_ns + t->standby_ns; /* a takeover waits at most this past the expiry */
    return was;
}

int lease_failed(lease_t *l, const lease_timing_t *t, uint64_t now_ns)
{
    int was = l->state == LEASE_OWNER; /* serving as far as the caller last heard */
    l->next_ns = now_ns + t->renew_ns / LEASE_RETRIES_PER_PERIOD; /* invariant 3 */
    if (l->state == LEASE_OWNER && now_ns >= l->valid_until_ns) {
        l->state = LEASE_STANDBY; /* fenced: the key may now expire and be taken */
        l->revision = 0;
        l->valid_until_ns = 0;
        l->lost++;
        return was;
    }
    return 0;
}
