/*
 * dedupe.c - the window of recently accepted item ids, so that a producer retrying a submit
 * after a timeout (with the same ids) gets "duplicate" and the item is stored once.
 *
 * Layout: a ring of 12-byte keys in arrival order, over it an open-addressing index of 4-byte
 * ring positions kept at most half full, and beside it the runs: (expiry, count) for each run
 * of consecutive records accepted with the same expiry. Every item of one Submit is accepted
 * at the same instant, so a run is a Submit's items and costs under a byte per id at 64 items a
 * Submit: 20.3 bytes per id at a full ring of 2^20 with 64-item runs.
 *
 *   record  +--------+--------+--------+
 *           |  w[0]  |  w[1]  |  w[2]  |   w[0..1] = low 64 bits of XXH3_128bits(id, seed),
 *           +--------+--------+--------+   w[2] = low 32 bits of its high 64
 *   run     | expires_ns (u64) | n (u64) |  n records from the oldest on leave at expires_ns
 *
 * Invariants:
 *   1. An id is found iff it was accepted less than window_ns ago and not evicted (runs expire
 *      oldest first and their records with them, so expiry costs O(1) per record).
 *   2. Ids are keyed by 96 bits of their XXH3 128-bit hash: a false "duplicate" would lose an
 *      item, so the key must be collision-free in practice: ~2^-96 per pair, ~1e-11 over a year
 *      of 100k submits/s checked against a million ids. It is computed once per item.
 *   3. The index holds one slot per distinct live key, pointing at its newest acceptance; an
 *      older record of the same key leaves the ring without touching the index.
 *   4. At most max_ids records (when set): adding past it forgets the oldest first, counted
 *      in evictions, so the window's memory is bounded whatever the rate of submits.
 *   5. Rebuilt at start from the items the store still holds (the owner adds them), so a retry
 *      after a restart is still recognised while its first copy is queued.
 *   6. The runs' counts sum to len, no run is empty, and their expiries never decrease.
 *   7. The rings give memory back after a peak (a quarter used), never below their minimum nor,
 *      while a reservation lasts (dedupe_reserve, until dedupe_reserve_end or the next run to
 *      expire), below the room it made.
 *   8. The hash is seeded with the process's secret (common/hashseed.h): ids are the client's,
 *      and unseeded ones can be searched offline for a shared home slot in a few million hashes.
 *      The keys are never stored (invariant 5 rebuilds them), so a new seed per process is free.
 *   9. A key is the model's and the id's: the id is hashed under a seed drawn from the model's
 *      name, so one model's ids never make another's duplicate. A retry goes to the model it
 *      was sent to, and a producer whose permission names one model cannot shadow the ids of
 *      another.
 *
 * Rejected: keeping the ids themselves (up to 64 bytes each); keys of the id alone (a producer
 * allowed one model could make another model's ids duplicate); a Bloom filter (false positives
 * would drop items); an expiry in every record (24-byte records, 32 bytes per id); one expiry
 * per fixed block of records (a record would leave early, or late, by the block's span);
 * refusing new items when the window is full (a bounded window must not stop intake; a retry
 * that old is rare and is stored twice, never lost).
 */
#include "scheduler/daemon/dedupe.h"

#include "common/hashseed.h"
#include "common/invariant.h"
#include "common/mem.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* The ring's first size and the size it never shrinks below: 16 KiB with its index, nothing
 * beside the rest of the daemon, and a window that empties between bursts is not reallocated
 * at every one. The runs' ring starts and stays at DEDUPE_RUNS_MIN or above for the same
 * reason. */
#define DEDUPE_RING_MIN 1024u
#define DEDUPE_RUNS_MIN 64u

uint64_t dedupe_seed(const char *model)
{
    return XXH3_64bits_withSeed(model, strlen(model), hashseed_get().a); /* invariants 8, 9 */
}

dedupe_key_t dedupe_key(uint64_t seed, const uint8_t *id, size_t len)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(id, len, seed);
    return (dedupe_key_t){h.low64, (uint32_t)h.high64}; /* invariant 2 */
}

static dedupe_key_t dedupe_rec_key(const dedupe_rec_t *r)
{
    return (dedupe_key_t){(uint64_t)r->w[1] << 32 | r->w[0], r->w[2]};
}

static dedupe_rec_t dedupe_rec(dedupe_key_t k)
{
    return (dedupe_rec_t){{(uint32_t)k.a, (uint32_t)(k.a >> 32), k.b}};
}

void dedupe_init(dedupe_t *d, uint64_t window_ns)
{
    memset(d, 0, sizeof(*d));
    d->window_ns = window_ns;
}

void dedupe_fini(dedupe_t *d)
{
    free(d->ring);
    free(d->seen.slots);
    free(d->runs.a);
}

void dedupe_limit_set(dedupe_t *d, size_t max_ids)
{
    d->max_ids = max_ids;
}

size_t dedupe_bytes(const dedupe_t *d)
{
    return d->cap * sizeof(*d->ring) + d->seen.cap * sizeof(*d->seen.slots) +
           d->runs.cap * sizeof(*d->runs.a);
}

static size_t dedupe_home(const dedupe_t *d, dedupe_key_t k)
{
    return (size_t)k.a & (d->seen.cap - 1);
}

/* The index slot holding key k, or SIZE_MAX. */
static size_t dedupe_find(const dedupe_t *d, dedupe_key_t k)
{
    if (d->seen.cap == 0)
        return SIZE_MAX;
    for (size_t i = dedupe_home(d, k);; i = (i + 1) & (d->seen.cap - 1)) {
        uint32_t s = d->seen.slots[i];
        if (s == 0)
            return SIZE_MAX;
        dedupe_key_t r = dedupe_rec_key(&d->ring[s - 1]);
        if (r.a == k.a && r.b == k.b)
            return i;
    }
}

/* Points k's slot at ring position pos (invariant 3: the newest acceptance owns it). */
static void dedupe_index_put(dedupe_t *d, dedupe_key_t k, size_t pos)
{
    size_t i = dedupe_find(d, k);
    if (i == SIZE_MAX) {
        for (i = dedupe_home(d, k); d->seen.slots[i] != 0; i = (i + 1) & (d->seen.cap - 1))
            ;
        d->seen.len++;
    }
    d->seen.slots[i] = (uint32_t)pos + 1;
}

/* Empties slot i, shifting later members of its probe run back (no tombstones). */
static void dedupe_index_del(dedupe_t *d, size_t i)
{
    size_t mask = d->seen.cap - 1;
    for (size_t j = (i + 1) & mask; d->seen.slots[j] != 0; j = (j + 1) & mask) {
        size_t home = dedupe_home(d, dedupe_rec_key(&d->ring[d->seen.slots[j] - 1]));
        /* j's entry may move to i when its home is not in (i, j] cyclically */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            d->seen.slots[i] = d->seen.slots[j];
            i = j;
        }
    }
    d->seen.slots[i] = 0;
    d->seen.len--;
}

/* Copies the n live elements of a ring (cap elements of `size` bytes, the oldest at head) to
 * dst, oldest first: what both rings do when they move. */
static void dedupe_unwrap(void *dst, const void *ring, size_t size, size_t head, size_t n,
                          size_t cap)
{
    if (n == 0)
        return;
    size_t first = n < cap - head ? n : cap - head;
    memcpy(dst, (const uint8_t *)ring + head * size, first * size);
    memcpy((uint8_t *)dst + first * size, ring, (n - first) * size);
}

/* The size a ring of len live elements out of cap gives memory back to after a peak (never
 * below min), or 0 to keep it. */
static size_t dedupe_shrunk(size_t len, size_t cap, size_t min)
{
    if (cap <= min || len * 4 >= cap)
        return 0;
    return len * 2 > min ? len * 2 : min;
}

/* Moves the live records to a ring of cap records (>= len) and rebuilds the index over it. */
static daemon_status_t dedupe_resize(dedupe_t *d, size_t cap)
{
    size_t icap = 1;
    while (icap < 2 * cap)
        icap *= 2;
    dedupe_rec_t *ring = malloc(cap * sizeof(*ring));
    uint32_t *slots = mem_calloc(icap, sizeof(*slots)); /* probed as it is filled */
    if (ring == NULL || slots == NULL) {
        free(ring);
        free(slots);
        return DAEMON_ENOMEM;
    }
    dedupe_unwrap(ring, d->ring, sizeof(*ring), d->head, d->len, d->cap);
    free(d->ring);
    free(d->seen.slots);
    d->ring = ring;
    d->cap = cap;
    d->head = 0;
    d->seen.slots = slots;
    d->seen.cap = icap;
    d->seen.len = 0;
    for (size_t i = 0; i < d->len; i++) /* oldest first, so the newest acceptance wins */
        dedupe_index_put(d, dedupe_rec_key(&ring[i]), i);
    return DAEMON_OK;
}

/* Moves the live runs to a ring of cap runs (>= runs.len). */
static daemon_status_t dedupe_runs_resize(dedupe_t *d, size_t cap)
{
    dedupe_run_t *a = malloc(cap * sizeof(*a));
    if (a == NULL)
        return DAEMON_ENOMEM;
    dedupe_unwrap(a, d->runs.a, sizeof(*a), d->runs.head, d->runs.len, d->runs.cap);
    free(d->runs.a);
    d->runs.a = a;
    d->runs.cap = cap;
    d->runs.head = 0;
    return DAEMON_OK;
}

/* The i-th live run, oldest first (i < runs.len). */
static dedupe_run_t *dedupe_run_at(const dedupe_t *d, size_t i)
{
    return &d->runs.a[(d->runs.head + i) % d->runs.cap];
}

/* Drops the oldest record and counts it out of its run; its key leaves the index if this
 * record owns it. */
static void dedupe_pop(dedupe_t *d)
{
    size_t i = dedupe_find(d, dedupe_rec_key(&d->ring[d->head]));
    if (i != SIZE_MAX && d->seen.slots[i] == d->head + 1)
        dedupe_index_del(d, i);
    d->head = (d->head + 1) % d->cap;
    d->len--;
    if (--dedupe_run_at(d, 0)->n == 0) {
        d->runs.head = (d->runs.head + 1) % d->runs.cap;
        d->runs.len--;
    }
}

static void dedupe_expire(dedupe_t *d, uint64_t now_ns)
{
    while (d->runs.len > 0 && dedupe_run_at(d, 0)->expires_ns <= now_ns) {
        for (uint64_t n = dedupe_run_at(d, 0)->n; n > 0; n--) /* the last pop drops the run */
            dedupe_pop(d);
        d->reserved = 0; /* the ids it was made for have come, or will not all be held */
    }
    /* After a peak the rings give memory back (best effort: a failed resize keeps the old). */
    size_t cap = dedupe_shrunk(d->len, d->cap,
                               d->reserved > DEDUPE_RING_MIN ? d->reserved : DEDUPE_RING_MIN);
    if (cap != 0)
        (void)dedupe_resize(d, cap);
    if ((cap = dedupe_shrunk(d->runs.len, d->runs.cap, DEDUPE_RUNS_MIN)) != 0)
        (void)dedupe_runs_resize(d, cap);
}

int dedupe_contains(dedupe_t *d, dedupe_key_t k, uint64_t now_ns)
{
    dedupe_expire(d, now_ns);
    return dedupe_find(d, k) != SIZE_MAX;
}

daemon_status_t dedupe_add(dedupe_t *d, dedupe_key_t k, uint64_t now_ns)
{
    if (d->window_ns == 0)
        return DAEMON_OK;
    dedupe_expire(d, now_ns);
    if (d->max_ids != 0) {
        for (; d->len >= d->max_ids && d->len > 0; d->evictions++) /* invariant 4 */
            dedupe_pop(d);
    }
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : DEDUPE_RING_MIN;
        if (d->max_ids != 0 && cap > d->max_ids)
            cap = d->max_ids > d->len ? d->max_ids : d->len + 1;
        if (cap >= UINT32_MAX || dedupe_resize(d, cap) != DAEMON_OK)
            return DAEMON_ENOMEM;
    }
    uint64_t expires = now_ns + d->window_ns;
    if (expires < now_ns)
        expires = UINT64_MAX;
    dedupe_run_t *last = d->runs.len == 0 ? NULL : dedupe_run_at(d, d->runs.len - 1);
    if (last == NULL || last->expires_ns != expires) {
        if (d->runs.len == d->runs.cap &&
            dedupe_runs_resize(d, d->runs.cap ? d->runs.cap * 2 : DEDUPE_RUNS_MIN) != DAEMON_OK)
            return DAEMON_ENOMEM;
        last = dedupe_run_at(d, d->runs.len++);
        *last = (dedupe_run_t){expires, 0};
    }
    last->n++;
    size_t pos = (d->head + d->len++) % d->cap;
    d->ring[pos] = dedupe_rec(k);
    dedupe_index_put(d, k, pos);
    return DAEMON_OK;
}

daemon_status_t dedupe_reserve(dedupe_t *d, size_t n)
{
    if (d->window_ns == 0)
        return DAEMON_OK;
    size_t need = n > SIZE_MAX - d->len ? SIZE_MAX : d->len + n;
    if (d->max_ids != 0 && need > d->max_ids)
        need = d->max_ids > d->len ? d->max_ids : d->len;
    if (need <= d->cap)
        return DAEMON_OK;
    if (need >= UINT32_MAX)
        return DAEMON_ENOMEM;
    daemon_status_t st = dedupe_resize(d, need);
    if (st == DAEMON_OK)
        d->reserved = need;
    return st;
}

void dedupe_reserve_end(dedupe_t *d)
{
    d->reserved = 0;
}

void dedupe_prefetch(const dedupe_t *d, dedupe_key_t k, unsigned level)
{
    if (d->seen.cap == 0)
        return;
    const uint32_t *slot = &d->seen.slots[dedupe_home(d, k)];
    if (level == 0)
        __builtin_prefetch(slot);
    else if (*slot != 0)
        __builtin_prefetch(&d->ring[*slot - 1]);
}

int dedupe_check(const dedupe_t *d)
{
    uint64_t sum = 0, prev = 0;
    INVARIANT_HOLDS(d->runs.len <= d->runs.cap && d->len <= d->cap, "rings past their capacity");
    for (size_t i = 0; i < d->runs.len; i++) {
        const dedupe_run_t *r = dedupe_run_at(d, i);
        INVARIANT_HOLDS(r->n > 0, "run %zu of %zu is empty", i, d->runs.len);
        INVARIANT_HOLDS(r->expires_ns >= prev, "run %zu expires before the run ahead of it", i);
        prev = r->expires_ns;
        sum += r->n;
    }
    INVARIANT_HOLDS(sum == d->len, "runs count %llu records, the ring holds %zu",
                    (unsigned long long)sum, d->len);
    INVARIANT_HOLDS(d->seen.len <= d->len && (d->len == 0 || d->seen.len > 0),
                    "index holds %zu keys for %zu records", d->seen.len, d->len);
    for (size_t i = 0; i < d->len; i++) { /* every live key's slot points at a live record */
        size_t pos = (d->head + i) % d->cap;
        size_t slot = dedupe_find(d, dedupe_rec_key(&d->ring[pos]));
        INVARIANT_HOLDS(slot != SIZE_MAX, "record %zu is not in the index", i);
        size_t at = d->seen.slots[slot] - 1;
        INVARIANT_HOLDS((at + d->cap - d->head) % d->cap < d->len,
                        "record %zu's slot points outside the live ring", i);
    }
    return 1;
}
