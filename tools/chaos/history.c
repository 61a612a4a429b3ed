/*
 * history.c - what the campaign sent, had acknowledged and saw delivered, and the checker over
 * it (Jepsen's total-queue): lost = acknowledged and never delivered; duplicated = delivered
 * more than once; unexpected = delivered but never sent; recovered = sent without an
 * acknowledgement (a reply lost to a crash) and delivered anyway.
 *
 * Invariants:
 *   1. An item's state only moves forward: unsent -> sent -> acknowledged (or refused); the
 *      producer thread that owns the item is the only writer of its state.
 *   2. A payload is a function of its id, so a consumer tells a corrupted delivery from a good
 *      one without asking anybody.
 *
 * Rejected: a log of events checked afterwards (Jepsen's way): the campaign checks one property
 * per item, and counters per item cost 3 bytes instead of a log line per delivery.
 */
#include "tools/chaos/chaos.h"

#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int chaos_history_init(chaos_history_t *h, uint32_t producers, uint32_t cap)
{
    memset(h, 0, sizeof(*h));
    h->producers = producers;
    h->cap = cap;
    h->state = calloc((size_t)producers * cap, sizeof(*h->state));
    h->delivered = calloc((size_t)producers * cap, sizeof(*h->delivered));
    return h->state != NULL && h->delivered != NULL ? 0 : -1;
}

void chaos_history_fini(chaos_history_t *h)
{
    free((void *)h->state);
    free((void *)h->delivered);
}

size_t chaos_item_id(uint32_t p, uint32_t s, char *buf)
{
    return (size_t)snprintf(buf, 32, "p%u-%u", p, s);
}

size_t chaos_item_payload(const char *id, size_t id_len, char *buf)
{
    uint64_t h = XXH64(id, id_len, 42);
    size_t n = (size_t)snprintf(buf, 40, "%.*s#%016llx", (int)id_len, id, (unsigned long long)h);
    size_t pad = h % 301; /* invariant 2: length and bytes both follow from the id */
    for (size_t i = 0; i < pad; i++)
        buf[n + i] = (char)('a' + (h >> (i % 58)) % 26);
    return n + pad;
}

/* Parses "p<p>-<s>" into the item's index; -1 when it is not one of ours. */
static long chaos_item_index(const chaos_history_t *h, const uint8_t *id, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf) || id[0] != 'p')
        return -1;
    memcpy(buf, id, len);
    buf[len] = '\0';
    unsigned p, s;
    char tail;
    if (sscanf(buf, "p%u-%u%c", &p, &s, &tail) != 2 || p >= h->producers || s >= h->cap)
        return -1;
    return (long)p * h->cap + s;
}

void chaos_history_delivered(chaos_history_t *h, const uint8_t *id, size_t id_len,
                             const uint8_t *payload, size_t payload_len)
{
    long i = chaos_item_index(h, id, id_len);
    if (i < 0 || atomic_load(&h->state[i]) == CHAOS_UNSENT) {
        atomic_fetch_add(&h->unexpected, 1);
        fprintf(stderr, "chaos: UNEXPECTED delivery of '%.*s'\n", (int)id_len, (const char *)id);
        return;
    }
    char want[400];
    size_t n = chaos_item_payload((const char *)id, id_len, want);
    if (n != payload_len || memcmp(want, payload, n) != 0) {
        atomic_fetch_add(&h->corrupt, 1);
        fprintf(stderr, "chaos: CORRUPT payload of '%.*s' (%zu bytes, want %zu)\n", (int)id_len,
                (const char *)id, payload_len, n);
        return;
    }
    uint16_t seen = atomic_load(&h->delivered[i]);
    while (seen != UINT16_MAX && !atomic_compare_exchange_weak(&h->delivered[i], &seen, seen + 1))
        ;
}

bool chaos_history_all_delivered(chaos_history_t *h)
{
    size_t n = (size_t)h->producers * h->cap;
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&h->state[i]) == CHAOS_ACKED && atomic_load(&h->delivered[i]) == 0)
            return false;
    }
    return true;
}

void chaos_history_verdict(chaos_history_t *h, chaos_verdict_t *out)
{
    chaos_verdict_t v = {0};
    size_t n = (size_t)h->producers * h->cap;
    for (size_t i = 0; i < n; i++) {
        uint8_t st = atomic_load(&h->state[i]);
        uint16_t d = atomic_load(&h->delivered[i]);
        v.deliveries += d;
        v.sent += st != CHAOS_UNSENT;
        v.acked += st == CHAOS_ACKED;
        v.refused += st == CHAOS_REFUSED;
        v.acked += st == CHAOS_STORED;
        v.lost += st == CHAOS_ACKED && d == 0;
        v.undrained += st == CHAOS_STORED && d == 0;
        v.duplicated += d > 1;
        v.recovered += st == CHAOS_SENT && d > 0;
    }
    v.unexpected = atomic_load(&h->unexpected);
    v.corrupt = atomic_load(&h->corrupt);
    *out = v;
}

void chaos_history_lost_write(chaos_history_t *h, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    for (uint32_t p = 0; p < h->producers; p++) {
        for (uint32_t s = 0; s < h->cap; s++) {
            size_t i = (size_t)p * h->cap + s;
            if (atomic_load(&h->state[i]) == CHAOS_ACKED && atomic_load(&h->delivered[i]) == 0)
                fprintf(f, "p%u-%u\n", p, s);
        }
    }
    fclose(f);
}

typedef struct {
    chaos_history_t *h;
    long found;
} chaos_scan_t;

static void chaos_scan_item(void *ctx, const store_view_t *v)
{
    chaos_scan_t *sc = ctx;
    long i = chaos_item_index(sc->h, v->id_view, v->id_len);
    uint8_t acked = CHAOS_ACKED;
    if (i >= 0 && atomic_load(&sc->h->delivered[i]) == 0 &&
        atomic_compare_exchange_strong(&sc->h->state[i], &acked, CHAOS_STORED))
        sc->found++;
}

static void chaos_store_quiet(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level == STORE_LOG_ERROR)
        fprintf(stderr, "chaos: store: %s\n", msg);
}

long chaos_history_store_check(chaos_history_t *h, const char *data_dir)
{
    store_disk_config_t cfg = {.dir = data_dir, .log = chaos_store_quiet};
    store_t *s = NULL;
    if (store_open_disk(&cfg, NULL, &s) != STORE_OK)
        return -1;
    chaos_scan_t sc = {h, 0};
    store_queue_t *q = NULL;
    while (store_queue_next(s, q, &q, NULL, NULL))
        store_queue_scan(s, q, chaos_scan_item, &sc);
    store_close(s); /* nothing flushed: the directory is as the daemon left it */
    return sc.found;
}
