/*
 * throughput_fabric.c - the fabric's own ceiling in `throughput`: the submit-only phase with the
 * same producers, windows and Submit bytes as a lanesched run, answered by a responder that reads
 * nothing and sends back a SubmitReply of the same size (every item ACCEPTED). No lanesched runs:
 * what this figure shows is what nats-server and the bench's clients alone carry on this
 * machine, the most any broker behind that subject could be measured at.
 *
 * Invariants:
 *  1. The producers do the client work of a lanesched producer: each Submit encoded by the codec
 *     from fresh ids and payloads, each reply decoded and its results counted; only the daemon's
 *     work is missing.
 *  2. An item counts as confirmed only when a reply with a result for it came back; a reply of
 *     the wrong size or a request never answered counts its items failed, so the run says FAILED.
 *  3. The responder is on its own connection in this process (its CPU counts as the clients'),
 *     on a subject no lanesched serves, and is unsubscribed and flushed before its connection
 *     closes (nats.c 3.4's read loop: subjects.md, consumer life cycle, step 6).
 *
 * Rejected alternatives:
 *  - A responder in another process: the figure would not change (the server does the same
 *    work), and the bench would need a second binary to spawn.
 *  - Replies without decoding: the ceiling would then credit the fabric with client work a real
 *    producer does.
 */
#include "throughput_int.h"

#include "codec/codec.h"
#include "common/clock.h"

#include <inttypes.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TPF_WAIT_MS 10000 /* the last replies of a producer */

typedef struct {
    uint64_t sent_ns;
    uint32_t items;
    bool busy;
} tpf_slot_t;

typedef struct {
    tp_run_t *run;
    uint32_t index, count;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tpf_slot_t *slots; /* o->window of them; a reply's subject names its slot */
    uint32_t busy;
    char inbox[64];
} tpf_producer_t;

/* The canned SubmitReplies: replies[n - 1] answers a Submit of n items. */
typedef struct {
    uint32_t batch;
    uint8_t **replies;
    size_t *lens;
} tpf_responder_t;

static void tpf_subject(const tp_run_t *run, char *out, size_t len)
{
    snprintf(out, len, "%s.fabric.%s", run->o->net.prefix, run->tag);
}

static void tpf_answer(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)sub;
    const tpf_responder_t *r = closure;
    const char *to = natsMsg_GetReply(m), *dot = to != NULL ? strrchr(to, '.') : NULL;
    unsigned long n = dot != NULL ? strtoul(dot + 1, NULL, 10) : 0;
    if (n >= 1 && n <= r->batch)
        natsConnection_Publish(nc, to, r->replies[n - 1], (int)r->lens[n - 1]);
    natsMsg_Destroy(m);
}

/* A reply on the producer's inbox: <inbox>.<slot>.<items> (the responder reads the count from
 * the reply subject, never the Submit). */
static void tpf_reply(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc;
    (void)sub;
    tpf_producer_t *x = closure;
    tp_run_t *run = x->run;
    unsigned long slot = ~0ul;
    sscanf(natsMsg_GetSubject(m) + strlen(x->inbox), ".%lu.", &slot);
    codec_submit_reply_t *rep = NULL;
    codec_status_t cs =
        codec_decode_submit_reply(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &rep);
    pthread_mutex_lock(&x->mu);
    if (slot < run->o->window && x->slots[slot].busy) {
        tpf_slot_t *s = &x->slots[slot];
        if (cs == CODEC_OK && rep->n_results == s->items)
            tp_confirmed_note(run, s->items, clock_mono_ns() - s->sent_ns);
        else {
            tp_run_error(run, "fabric: a reply of %zu results for %u items (%s)",
                         cs == CODEC_OK ? rep->n_results : 0, s->items, codec_status_str(cs));
            atomic_fetch_add(&run->failed, s->items);
        }
        s->busy = false;
        x->busy--;
        pthread_cond_signal(&x->cv);
    } else {
        atomic_fetch_add(&run->foreign, 1);
    }
    pthread_mutex_unlock(&x->mu);
    codec_submit_reply_destroy(rep);
    natsMsg_Destroy(m);
}

/* A free slot for a Submit of `items` sent now, waiting while the window is full; -1 when the
 * run stops. */
static int tpf_slot_take(tpf_producer_t *x, uint32_t items)
{
    const tp_opts_t *o = x->run->o;
    pthread_mutex_lock(&x->mu);
    while (x->busy >= o->window && !atomic_load(&x->run->stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    }
    int got = -1;
    for (uint32_t k = 0; x->busy < o->window && k < o->window; k++)
        if (!x->slots[k].busy) {
            x->slots[k] = (tpf_slot_t){clock_mono_ns(), items, true};
            x->busy++;
            got = (int)k;
            break;
        }
    pthread_mutex_unlock(&x->mu);
    return got;
}

static bool tpf_produce(tpf_producer_t *x, natsConnection *nc, const char *subject, uint64_t first,
                        uint64_t end, codec_work_item_t *items, char (*ids)[TP_ID_MAX],
                        uint8_t *payloads)
{
    tp_run_t *run = x->run;
    const tp_opts_t *o = run->o;
    for (uint64_t i = first; i < end && !atomic_load(&run->stop);) {
        size_t n = end - i < o->batch ? (size_t)(end - i) : o->batch;
        int slot = tpf_slot_take(x, (uint32_t)n);
        if (slot < 0)
            return false;
        tp_items_make(run, i, n, clock_mono_ns(), items, ids, payloads);
        codec_submit_t sub = {items, n};
        uint8_t *buf = NULL;
        size_t len = 0;
        char reply[96];
        snprintf(reply, sizeof(reply), "%s.%d.%zu", x->inbox, slot, n);
        natsStatus s = codec_encode_submit(&sub, &buf, &len) == CODEC_OK
                           ? natsConnection_PublishRequest(nc, subject, reply, buf, (int)len)
                           : NATS_NO_MEMORY;
        free(buf);
        if (s != NATS_OK) {
            tp_run_error(run, "fabric producer %u: %s", x->index, natsStatus_GetText(s));
            atomic_fetch_add(&run->failed, end - i);
            return false;
        }
        i += n;
    }
    natsConnection_Flush(nc);
    uint64_t until = clock_mono_ns() + TPF_WAIT_MS * 1000000ull;
    pthread_mutex_lock(&x->mu);
    while (x->busy > 0 && clock_mono_ns() < until && !atomic_load(&run->stop)) {
        pthread_mutex_unlock(&x->mu);
        net_sleep_ms(1);
        pthread_mutex_lock(&x->mu);
    }
    bool done = x->busy == 0;
    pthread_mutex_unlock(&x->mu);
    if (!done)
        tp_run_error(run, "fabric producer %u: replies missing after %d ms", x->index, TPF_WAIT_MS);
    return done;
}

static void *tpf_producer_main(void *arg)
{
    tpf_producer_t *x = arg;
    tp_run_t *run = x->run;
    const tp_opts_t *o = run->o;
    char subject[96], wild[80];
    codec_work_item_t *items = calloc(o->batch, sizeof(*items));
    char(*ids)[TP_ID_MAX] = calloc(o->batch, sizeof(*ids));
    uint8_t *payloads = malloc((size_t)o->batch * o->payload_bytes);
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    bool ready = false;
    tpf_subject(run, subject, sizeof(subject));
    if (items == NULL || ids == NULL || payloads == NULL) {
        tp_run_error(run, "fabric producer %u: out of memory", x->index);
        goto out;
    }
    for (uint32_t j = 0; j < o->batch; j++)
        tp_payload_fill(run, payloads + (size_t)j * o->payload_bytes);
    natsStatus s = natsConnection_ConnectTo(&nc, net_url());
    snprintf(x->inbox, sizeof(x->inbox), "_INBOX.fabric.%s.%u", run->tag, x->index);
    snprintf(wild, sizeof(wild), "%s.*.*", x->inbox);
    if (s == NATS_OK)
        s = natsConnection_Subscribe(&sub, nc, wild, tpf_reply, x);
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(sub, -1, -1);
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    if (s != NATS_OK) {
        tp_run_error(run, "fabric producer %u: connect: %s", x->index, natsStatus_GetText(s));
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->ready, 1);
    while (atomic_load(&run->go) < 1 && !atomic_load(&run->stop))
        net_sleep_ms(1);
    uint64_t first, end;
    tp_share(run, TP_SUBMIT, x->index, x->count, &first, &end);
    tpf_produce(x, nc, subject, first, end, items, ids, payloads);
    atomic_fetch_add(&run->gone, 1);
out:
    if (!ready)
        atomic_fetch_add(&run->ready, 1); /* counted, so the start barrier does not wait */
    natsConnection_Close(nc);             /* joins the read loop before the inbox goes */
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
    free(items);
    free(ids);
    free(payloads);
    return NULL;
}

/* The canned replies: n ACCEPTED results, ids as long as the run's (invariant 1). */
static int tpf_replies_make(const tp_run_t *run, tpf_responder_t *r)
{
    const tp_opts_t *o = run->o;
    codec_item_result_t *res = calloc(o->batch, sizeof(*res));
    char id[TP_ID_MAX];
    int len = snprintf(id, sizeof(id), "%s-%" PRIu64, run->tag, run->n / 2);
    r->batch = o->batch;
    r->replies = calloc(o->batch, sizeof(*r->replies));
    r->lens = calloc(o->batch, sizeof(*r->lens));
    int rc = res != NULL && r->replies != NULL && r->lens != NULL ? 0 : -1;
    for (uint32_t j = 0; rc == 0 && j < o->batch; j++)
        res[j] = (codec_item_result_t){.id = {(const uint8_t *)id, (size_t)len},
                                       .status = CODEC_ITEM_ACCEPTED,
                                       .reason = "",
                                       .error = ""};
    for (uint32_t n = 1; rc == 0 && n <= o->batch; n++) {
        codec_submit_reply_t rep = {res, n, ""};
        if (codec_encode_submit_reply(&rep, &r->replies[n - 1], &r->lens[n - 1]) != CODEC_OK)
            rc = -1;
    }
    free(res);
    return rc;
}

static void tpf_replies_free(tpf_responder_t *r)
{
    for (uint32_t n = 0; r->replies != NULL && n < r->batch; n++)
        free(r->replies[n]);
    free(r->replies);
    free(r->lens);
}

bool tp_fabric_run(const tp_opts_t *o, const tp_workload_t *wl, uint32_t producers, tp_role_t role,
                   tp_result_t *res)
{
    bool ok = false, have_run = false;
    tp_run_t run;
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    tpf_responder_t resp = {0};
    char subject[96];
    tpf_producer_t *prod = calloc(producers, sizeof(*prod));
    memset(res, 0, sizeof(*res));
    snprintf(res->system, sizeof(res->system), "fabric");
    snprintf(res->durability, sizeof(res->durability), "none");
    snprintf(res->store, sizeof(res->store), "none");
    snprintf(res->label, sizeof(res->label), "fabric ceiling %ux0%s", producers,
             wl->uniform ? ", uniform, best case" : "");
    res->role = role;
    res->shapes = wl->shapes;
    res->producers = producers;
    res->items = o->items;
    if (prod == NULL || tp_run_init(&run, o, wl, o->items, 'f') != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    have_run = true;
    tpf_subject(&run, subject, sizeof(subject));
    if (tpf_replies_make(&run, &resp) != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    natsStatus s = natsConnection_ConnectTo(&nc, net_url());
    if (s == NATS_OK)
        s = natsConnection_Subscribe(&sub, nc, subject, tpf_answer, &resp);
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(sub, -1, -1);
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    if (s != NATS_OK) {
        snprintf(res->error, sizeof(res->error), "responder: %s", natsStatus_GetText(s));
        goto out;
    }
    bool threads = true;
    for (uint32_t i = 0; threads && i < producers; i++) {
        prod[i].run = &run;
        prod[i].index = i;
        prod[i].count = producers;
        prod[i].slots = calloc(o->window, sizeof(*prod[i].slots));
        pthread_mutex_init(&prod[i].mu, NULL);
        pthread_cond_init(&prod[i].cv, NULL);
        threads = prod[i].slots != NULL &&
                  (prod[i].started =
                       pthread_create(&prod[i].thread, NULL, tpf_producer_main, &prod[i]) == 0);
    }
    uint64_t until = clock_mono_ns() + NET_READY_MS * 1000000ull;
    while (threads && atomic_load(&run.ready) < producers && clock_mono_ns() < until &&
           !net_stopping(NULL))
        net_sleep_ms(5);
    if (!threads || atomic_load(&run.ready) < producers || run.error[0] != '\0') {
        snprintf(res->error, sizeof(res->error), "clients not ready: %.200s",
                 run.error[0] ? run.error : "timeout");
        goto out;
    }
    uint64_t t0 = clock_mono_ns();
    atomic_store(&run.go, 1);
    tp_phase_result_t *ph = &res->phase[TP_SUBMIT];
    res->ran = tp_phase_watch(&run, res->label, "submit", o->items, tp_confirmed_count, 0, t0, ph);
    ph->elapsed_s = (double)(atomic_load(&run.last_confirm_ns) - t0) / 1e9;
    tp_latency_take(&run, ph);
    ok = true;
out:
    if (have_run) {
        atomic_store(&run.stop, true);
        for (uint32_t i = 0; prod != NULL && i < producers; i++)
            if (prod[i].started)
                pthread_join(prod[i].thread, NULL);
        res->failed = atomic_load(&run.failed) +
                      (o->items - atomic_load(&run.confirmed) - atomic_load(&run.failed));
        res->foreign = atomic_load(&run.foreign);
        if (run.error[0] != '\0' && res->error[0] == '\0')
            snprintf(res->error, sizeof(res->error), "%s", run.error);
        tp_run_free(&run);
    }
    if (sub != NULL) {
        natsSubscription_Unsubscribe(sub);
        natsConnection_Flush(nc); /* invariant 3 */
    }
    natsConnection_Close(nc);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
    for (uint32_t i = 0; prod != NULL && i < producers; i++) {
        if (prod[i].run != NULL) {
            pthread_mutex_destroy(&prod[i].mu);
            pthread_cond_destroy(&prod[i].cv);
        }
        free(prod[i].slots);
    }
    free(prod);
    tpf_replies_free(&resp);
    res->ok = ok && res->ran && res->failed == 0;
    return ok;
}
