/*
 * producers.c - a producer thread: Submits of --batch items as requests, each item retried with
 * the same id until the daemon acknowledges it (ACCEPTED or DUPLICATE), as subjects.md tells a
 * producer to: "resend the same items with the SAME ids".
 *
 * Invariants:
 *   1. An item is marked acknowledged only from a SubmitReply result naming it: ACCEPTED or
 *      DUPLICATE (both mean stored). A missing reply (timeout, no responders, a dropped
 *      connection) leaves it sent, and it is sent again.
 *   2. Refusals of the daemon's state (store_full, store_error, queue_full, too_many_shapes,
 *      too_many_models) are retried too; any other refusal is a permanent answer to an item the
 *      campaign made valid, so it is counted as refused and reported.
 *   3. Once production stops, a batch still unacknowledged is retried for at most
 *      CHAOS_GIVEUP_MS more (not at all once the campaign has failed); what is left then stays
 *      "sent" (neither lost nor acknowledged).
 */
#include "tools/chaos/chaos.h"

#include "codec/codec.h"
#include "common/rng.h"

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* subjects.md: a producer retries "for at most 60 s" and waits about 2 s for each reply. */
#define CHAOS_GIVEUP_MS  60000u
#define CHAOS_REQUEST_MS 2000

static int chaos_transient(const char *reason)
{
    static const char *const words[] = {"store_full", "store_error", "queue_full",
                                        "too_many_shapes", "too_many_models"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcmp(reason, words[i]) == 0)
            return 1;
    return 0;
}

/* One request for the items of the batch still unacknowledged; how many are left. */
static uint32_t chaos_submit_once(chaos_t *c, natsConnection *nc, uint32_t p, const char *model,
                                  uint32_t first, uint32_t n)
{
    codec_work_item_t items[256];
    char ids[256][32], payloads[256][400];
    uint32_t seqs[256], k = 0;
    for (uint32_t s = first; s < first + n; s++) {
        size_t i = (size_t)p * c->hist.cap + s;
        if (atomic_load(&c->hist.state[i]) != CHAOS_SENT)
            continue;
        size_t id_len = chaos_item_id(p, s, ids[k]);
        size_t pay_len = chaos_item_payload(ids[k], id_len, payloads[k]);
        items[k] = (codec_work_item_t){.id = {(const uint8_t *)ids[k], id_len},
                                       .model = model,
                                       .has_signature = true,
                                       .signature = 0x1000 + s % 3,
                                       .tokens = 10 + (uint32_t)(s * 7919u % 2000u),
                                       .payload = {(const uint8_t *)payloads[k], pay_len},
                                       .reply_to = "chaos.results"};
        seqs[k++] = s;
    }
    if (k == 0)
        return 0;
    codec_submit_t sub = {items, k};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_submit(&sub, &buf, &len) != CODEC_OK)
        abort();
    char subject[128];
    snprintf(subject, sizeof(subject), "lanes.submit.%s", model);
    natsMsg *reply = NULL;
    atomic_fetch_add(&c->submits, 1);
    natsStatus s = natsConnection_Request(&reply, nc, subject, buf, (int)len, CHAOS_REQUEST_MS);
    free(buf);
    if (s != NATS_OK) {
        atomic_fetch_add(&c->submit_timeouts, 1);
        return k;
    }
    codec_submit_reply_t *r = NULL;
    uint32_t left = k;
    if (codec_decode_submit_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply),
                                  &r) == CODEC_OK &&
        r->error[0] == '\0' && r->n_results == k) {
        for (uint32_t i = 0; i < k; i++) {
            const codec_item_result_t *res = &r->results[i];
            size_t at = (size_t)p * c->hist.cap + seqs[i];
            if (res->status == CODEC_ITEM_ACCEPTED || res->status == CODEC_ITEM_DUPLICATE) {
                atomic_store(&c->hist.state[at], CHAOS_ACKED); /* invariant 1 */
                left--;
            } else if (!chaos_transient(res->reason)) {
                fprintf(stderr, "chaos: item %s REFUSED: %s\n", ids[i], res->reason);
                atomic_store(&c->hist.state[at], CHAOS_REFUSED);
                left--;
            }
        }
    } else {
        fprintf(stderr, "chaos: a SubmitReply that does not answer the submit (%s)\n",
                r != NULL ? r->error : "undecodable");
    }
    codec_submit_reply_destroy(r);
    natsMsg_Destroy(reply);
    return left;
}

void *chaos_producer_main(void *arg)
{
    chaos_thread_arg_t *a = arg;
    chaos_t *c = a->c;
    uint32_t p = a->index;
    free(a);
    char name[32];
    snprintf(name, sizeof(name), "chaos-producer-%u", p);
    natsConnection *nc = chaos_connect(c->procs.url, name);
    if (nc == NULL)
        return NULL;
    uint64_t rnd = c->o.seed ^ (0x9e3779b97f4a7c15ull * (p + 1));
    const char *model = p % 2 == 0 ? "chaos-a" : "chaos-b";
    double per_item_ms = c->o.rate ? 1000.0 * c->o.producers / c->o.rate : 0.0;
    uint64_t start = chaos_now_ms();
    uint32_t batch = c->o.batch < 256 ? c->o.batch : 256;
    for (uint32_t seq = 0; atomic_load(&c->producing) && seq < c->hist.cap;) {
        uint32_t n = c->hist.cap - seq < batch ? c->hist.cap - seq : batch;
        for (uint32_t s = seq; s < seq + n; s++)
            atomic_store(&c->hist.state[(size_t)p * c->hist.cap + s], CHAOS_SENT);
        uint64_t stopped_at = 0;
        while (chaos_submit_once(c, nc, p, model, seq, n) != 0) {
            if (!atomic_load(&c->producing)) {
                if (stopped_at == 0)
                    stopped_at = chaos_now_ms();
                if (chaos_now_ms() - stopped_at > CHAOS_GIVEUP_MS || /* invariant 3 */
                    atomic_load(&c->given_up))
                    break;
            }
            chaos_sleep_ms(50 + rng_splitmix64(&rnd) % 150);
        }
        seq += n;
        if (per_item_ms > 0) { /* pace: seq items by now */
            uint64_t due = start + (uint64_t)(seq * per_item_ms);
            uint64_t now = chaos_now_ms();
            if (due > now)
                chaos_sleep_ms(due - now);
        }
    }
    natsConnection_Destroy(nc);
    return NULL;
}
