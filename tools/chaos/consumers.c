/*
 * consumers.c - a consumer thread: registers, pulls, checks every delivered item against the
 * history, and acks - or, on --chaos-pct of the batches, naks them, drops them (no ack: the ack
 * deadline returns them) or crashes (closes its connection without a bye and registers again).
 *
 * Invariants:
 *   1. Every item of every OK batch is recorded as delivered before anything is done with it,
 *      so an ack lost to a crash afterwards can only add a redelivery, never hide a delivery.
 *   2. unknown_consumer (the daemon restarted, or declared this consumer dead) makes the thread
 *      register again, as subjects.md's life cycle says.
 *   3. The connection closes before its inbox subscription is destroyed (chaos_disconnect).
 */
#include "tools/chaos/chaos.h"

#include "codec/codec.h"
#include "common/rng.h"

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Credits kept outstanding and the wait of a pull: short, so a consumer notices a restarted
 * daemon (unknown_consumer) within a second or two. */
#define CHAOS_PULL_BATCHES    4u
#define CHAOS_PULL_EXPIRES_MS 1000u

static int chaos_register(chaos_t *c, natsConnection *nc, const char *model, char *id)
{
    codec_register_t reg = {model, 64, 65536, 0, "chaos", 0, 0, 0, 0, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_register(&reg, &buf, &len) != CODEC_OK)
        abort();
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, nc, "lanes.register", buf, (int)len, 2000);
    free(buf);
    if (s != NATS_OK)
        return -1;
    codec_registered_t *r = NULL;
    int rc = -1;
    if (codec_decode_registered(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &r) ==
            CODEC_OK &&
        r->error[0] == '\0' && strrchr(r->pull_subject, '.') != NULL &&
        strlen(strrchr(r->pull_subject, '.') + 1) == 32) {
        /* the token of the subjects Registered names (the registration's secret) */
        memcpy(id, strrchr(r->pull_subject, '.') + 1, 33);
        atomic_fetch_add(&c->registers, 1);
        rc = 0;
    }
    codec_registered_destroy(r);
    natsMsg_Destroy(m);
    return rc;
}

/* Acks the batch: all, or nak all. A lost reply changes nothing here (invariant 1). */
static void chaos_settle(chaos_t *c, natsConnection *nc, const char *id, const codec_batch_t *b,
                         int nak)
{
    uint32_t pos[64];
    codec_ack_t ack = {.batch_id = b->batch_id, .all = !nak};
    if (nak) {
        size_t n = b->n_items < 64 ? b->n_items : 64;
        for (size_t i = 0; i < n; i++)
            pos[i] = (uint32_t)i;
        ack.nak = pos;
        ack.n_nak = n;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_ack(&ack, &buf, &len) != CODEC_OK)
        abort();
    char subject[96];
    snprintf(subject, sizeof(subject), "lanes.ack.%s", id);
    natsMsg *m = NULL;
    if (natsConnection_Request(&m, nc, subject, buf, (int)len, 2000) == NATS_OK)
        atomic_fetch_add(&c->acks, 1);
    else
        atomic_fetch_add(&c->ack_timeouts, 1);
    natsMsg_Destroy(m);
    free(buf);
}

void *chaos_consumer_main(void *arg)
{
    chaos_thread_arg_t *a = arg;
    chaos_t *c = a->c;
    uint32_t j = a->index;
    free(a);
    char name[32];
    snprintf(name, sizeof(name), "chaos-consumer-%u", j);
    uint64_t rnd = c->o.seed ^ (0xc2b2ae3d27d4eb4full * (j + 1));
    const char *model = j % 2 == 0 ? "chaos-a" : "chaos-b";
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    char inbox[64], id[33] = "";
    while (atomic_load(&c->running)) {
        if (nc == NULL) {
            if ((nc = chaos_connect(c->procs.url, name)) == NULL) {
                chaos_sleep_ms(200);
                continue;
            }
            snprintf(inbox, sizeof(inbox), "_INBOX.chaos.%u.%llu", j,
                     (unsigned long long)rng_splitmix64(&rnd));
            if (natsConnection_SubscribeSync(&sub, nc, inbox) != NATS_OK) {
                natsConnection_Destroy(nc);
                nc = NULL;
                continue;
            }
            id[0] = '\0';
        }
        if (id[0] == '\0' && chaos_register(c, nc, model, id) != 0) {
            chaos_sleep_ms(200);
            continue;
        }
        codec_pull_t pull = {CHAOS_PULL_BATCHES, CHAOS_PULL_EXPIRES_MS};
        uint8_t *buf = NULL;
        size_t len = 0;
        if (codec_encode_pull(&pull, &buf, &len) != CODEC_OK)
            abort();
        char subject[96];
        snprintf(subject, sizeof(subject), "lanes.pull.%s", id);
        natsConnection_PublishRequest(nc, subject, inbox, buf, (int)len);
        free(buf);
        int crashed = 0;
        for (uint32_t got = 0; got < CHAOS_PULL_BATCHES && !crashed;) {
            natsMsg *m = NULL;
            if (natsSubscription_NextMsg(&m, sub, CHAOS_PULL_EXPIRES_MS + 1500) != NATS_OK)
                break; /* the daemon is down or the pull was dropped: pull again */
            codec_batch_t *b = NULL;
            if (codec_decode_batch(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &b) !=
                CODEC_OK) {
                natsMsg_Destroy(m);
                continue;
            }
            natsMsg_Destroy(m);
            if (b->status == CODEC_BATCH_EXPIRED) {
                codec_batch_destroy(b);
                break;
            }
            if (b->status != CODEC_BATCH_OK) {
                if (strncmp(b->error, "unknown_consumer", 16) == 0)
                    id[0] = '\0'; /* invariant 2 */
                codec_batch_destroy(b);
                break;
            }
            for (size_t i = 0; i < b->n_items; i++) /* invariant 1 */
                chaos_history_delivered(&c->hist, b->items[i].id.ptr, b->items[i].id.len,
                                        b->items[i].payload.ptr, b->items[i].payload.len);
            atomic_fetch_add(&c->batches, 1);
            got++;
            uint64_t r = rng_splitmix64(&rnd);
            if (r % 100 < c->o.chaos_pct) {
                switch ((r >> 8) % 3) {
                case 0:
                    chaos_settle(c, nc, id, b, 1);
                    atomic_fetch_add(&c->naks, 1);
                    break;
                case 1:
                    atomic_fetch_add(&c->drops, 1); /* never acked: its deadline returns it */
                    break;
                default:
                    atomic_fetch_add(&c->crashes, 1);
                    crashed = 1;
                    break;
                }
            } else {
                chaos_settle(c, nc, id, b, 0);
            }
            codec_batch_destroy(b);
        }
        if (crashed) { /* no bye: the daemon finds out by silence */
            chaos_disconnect(nc, sub);
            sub = NULL;
            nc = NULL;
        }
    }
    chaos_disconnect(nc, sub);
    return NULL;
}
