/*
 * flood.c - lanesched-chaos --flood: the hostile-client cases, each against a fresh
 * daemon, over the wire only (so the same run tells an old binary from a new one), with lanes.stats
 * asked every 50 ms meanwhile and its latency recorded.
 *
 *   names      Registers with 1 MB models and 100 KB names
 *   consumers  5,000 registrations
 *   shapes     20,000 shapes of one model (a producer hashing whole prompts)
 *   retry      a 9,000-item submit of about 594 KB, sent again
 *   words      permanent input errors: each its own word, none store_error
 *   contract   max_batch_size = max_batch_tokens = 2^32 - 1
 *   epoch      a batch id from before a SIGKILL, acked after the restart
 *   stop       SIGTERM behind a backlog of 300 submits of 64 new shapes each
 *
 * A case passes when every message got the answer the contract gives, and stats answered every
 * time within --flood-stats-ms (default 100 ms). Invariant: the stats sampler runs on its own
 * thread and connection, so a slow daemon shows as slow stats, not as a slow sampler.
 */
#include "tools/chaos/chaos.h"

#include "codec/codec.h"
#include "common/clock.h"

#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FLOOD_STATS_EVERY_MS 50u

typedef struct {
    const char *url;
    atomic_bool run;
    atomic_bool counting; /* off while a case has the daemon down on purpose */
    double max_ms;
    double limit_ms; /* --flood-stats-ms */
    uint64_t samples, slow, failed;
    size_t max_bytes;
} flood_stats_t;

static void *flood_stats_main(void *arg)
{
    flood_stats_t *st = arg;
    natsConnection *nc = chaos_connect(st->url, "flood-stats");
    while (nc != NULL && atomic_load(&st->run)) {
        uint64_t t0 = clock_mono_ns();
        natsMsg *m = NULL;
        natsStatus s = natsConnection_Request(&m, nc, "lanes.stats", "", 0, 2000);
        double ms = (double)(clock_mono_ns() - t0) / 1e6;
        if (!atomic_load(&st->counting)) { /* the daemon is down on purpose */
            natsMsg_Destroy(m);
            chaos_sleep_ms(FLOOD_STATS_EVERY_MS);
            continue;
        }
        st->samples++;
        if (s != NATS_OK) {
            st->failed++;
        } else {
            size_t len = (size_t)natsMsg_GetDataLength(m);
            st->max_bytes = len > st->max_bytes ? len : st->max_bytes;
            st->max_ms = ms > st->max_ms ? ms : st->max_ms;
            st->slow += ms > st->limit_ms;
        }
        natsMsg_Destroy(m);
        chaos_sleep_ms(FLOOD_STATS_EVERY_MS);
    }
    natsConnection_Destroy(nc);
    return NULL;
}

typedef struct {
    chaos_opts_t o;
    chaos_procs_t procs;
    flood_stats_t *stats;
    natsConnection *nc;
    int failures;
    char work[700];
} flood_t;

static void flood_fail(flood_t *f, const char *fmt, const char *detail)
{
    fprintf(stderr, "flood:   FAIL: ");
    fprintf(stderr, fmt, detail);
    fprintf(stderr, "\n");
    f->failures++;
}

/* A request; its reply (caller destroys) or NULL on a timeout or a refused publish. */
static natsMsg *flood_request(flood_t *f, const char *subject, const uint8_t *buf, size_t len,
                              int64_t timeout_ms)
{
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(&m, f->nc, subject, buf, (int)len, timeout_ms);
    return s == NATS_OK ? m : NULL;
}

/* A Register; its error word ("" when registered), copied into word. */
static void flood_register(flood_t *f, const char *model, uint32_t bs, uint32_t bt,
                           const char *name, char *word, size_t wlen, char *id)
{
    codec_register_t r = {model, bs, bt, 0, name, 0, 0, 0, 0, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    snprintf(word, wlen, "no_reply");
    if (codec_encode_register(&r, &buf, &len) != CODEC_OK)
        return;
    natsMsg *m = flood_request(f, "lanes.register", buf, len, 5000);
    free(buf);
    codec_registered_t *out = NULL;
    if (m != NULL && codec_decode_registered(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                                             &out) == CODEC_OK) {
        size_t n = strcspn(out->error, ":");
        snprintf(word, wlen, "%.*s", (int)n, out->error);
        if (id != NULL) /* the token of its subjects (the registration's secret) */
            snprintf(id, 33, "%s",
                     strrchr(out->pull_subject, '.') != NULL ? strrchr(out->pull_subject, '.') + 1
                                                             : "");
        codec_registered_destroy(out);
    }
    natsMsg_Destroy(m);
}

/* A Submit of items as a request; the reply (caller destroys) or NULL. */
static codec_submit_reply_t *flood_submit(flood_t *f, const char *subject_model,
                                          const codec_work_item_t *items, size_t n, size_t *out_len)
{
    codec_submit_t s = {items, n};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (codec_encode_submit(&s, &buf, &len) != CODEC_OK)
        return NULL;
    char subject[400];
    snprintf(subject, sizeof(subject), "lanes.submit.%s", subject_model);
    natsMsg *m = flood_request(f, subject, buf, len, 10000);
    free(buf);
    codec_submit_reply_t *r = NULL;
    if (m != NULL) {
        if (out_len != NULL)
            *out_len = (size_t)natsMsg_GetDataLength(m);
        if (codec_decode_submit_reply(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &r) !=
            CODEC_OK)
            r = NULL;
    }
    natsMsg_Destroy(m);
    return r;
}

/* ---- the cases ---------------------------------------------------------------------------------
 */

static void flood_names(flood_t *f)
{
    char *big = malloc(1000001), word[64], id[33];
    memset(big, 'm', 1000000);
    big[1000000] = '\0';
    for (int i = 0; i < 4; i++) {
        flood_register(f, big, 8, 4096, "gpu", word, sizeof(word), id);
        if (strcmp(word, "model_too_long") != 0)
            flood_fail(f, "a 1 MB model got '%s', not model_too_long", word);
    }
    big[100 * 1024] = '\0';
    memset(big, 'n', 100 * 1024);
    for (int i = 0; i < 4; i++) {
        flood_register(f, "llama", 8, 4096, big, word, sizeof(word), id);
        if (strcmp(word, "name_too_long") != 0)
            flood_fail(f, "a 100 KB name got '%s', not name_too_long", word);
    }
    free(big);
}

static void flood_consumers(flood_t *f)
{
    char name[256], word[64], id[33];
    memset(name, 'c', 255);
    name[255] = '\0';
    uint64_t ok = 0, refused = 0, other = 0;
    for (int i = 0; i < 5000; i++) {
        flood_register(f, "llama", 8, 4096, name, word, sizeof(word), id);
        ok += word[0] == '\0';
        refused += strcmp(word, "too_many_consumers") == 0;
        other += word[0] != '\0' && strcmp(word, "too_many_consumers") != 0;
    }
    fprintf(stderr,
            "flood:   5,000 registrations: %" PRIu64 " registered, %" PRIu64
            " too_many_consumers, %" PRIu64 " other\n",
            ok, refused, other);
    if (other != 0 || refused == 0)
        flood_fail(f, "%s", "registrations past the limit were not refused as too_many_consumers");
}

static void flood_shapes(flood_t *f)
{
    enum { N = 20000, PER = 500 };
    codec_work_item_t items[PER];
    char ids[PER][24];
    uint64_t ok = 0, refused = 0, other = 0, unanswered = 0;
    for (int first = 0; first < N; first += PER) {
        for (int i = 0; i < PER; i++) {
            int n = snprintf(ids[i], sizeof(ids[i]), "shape-%d", first + i);
            items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], (size_t)n},
                                           .model = "llama",
                                           .has_signature = true,
                                           .signature = 0x5000000ull + (uint64_t)(first + i),
                                           .tokens = 64};
        }
        codec_submit_reply_t *r = flood_submit(f, "llama", items, PER, NULL);
        if (r == NULL) {
            unanswered += PER;
            continue;
        }
        for (size_t i = 0; i < r->n_results; i++) {
            ok += strcmp(r->results[i].reason, "ok") == 0;
            refused += strcmp(r->results[i].reason, "too_many_shapes") == 0;
            other += strcmp(r->results[i].reason, "ok") != 0 &&
                     strcmp(r->results[i].reason, "too_many_shapes") != 0;
        }
        codec_submit_reply_destroy(r);
    }
    fprintf(stderr,
            "flood:   20,000 shapes: %" PRIu64 " accepted, %" PRIu64 " too_many_shapes, %" PRIu64
            " other, %" PRIu64 " unanswered\n",
            ok, refused, other, unanswered);
    if (refused == 0 || other != 0 || unanswered != 0)
        flood_fail(f, "%s", "shapes past the limit were not refused as too_many_shapes");
}

static void flood_retry(flood_t *f)
{
    enum { N = 9000 };
    codec_work_item_t *items = calloc(N, sizeof(*items));
    char(*ids)[65] = calloc(N, 65);
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], 65, "retry-%058d", i);
        items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], 64},
                                       .model = "llama",
                                       .has_signature = true,
                                       .signature = 42,
                                       .tokens = 100};
    }
    codec_submit_t s = {items, N};
    uint8_t *buf = NULL;
    size_t len = 0, reply_len = 0;
    codec_encode_submit(&s, &buf, &len);
    free(buf);
    for (int round = 0; round < 2; round++) {
        codec_submit_reply_t *r = flood_submit(f, "llama", items, N, &reply_len);
        const char *want = round == 0 ? "ok" : "duplicate";
        if (r == NULL) {
            flood_fail(f, "the %s of the 9,000-item submit got no reply",
                       round == 0 ? "first send" : "retry");
            continue;
        }
        size_t good = 0;
        for (size_t i = 0; i < r->n_results; i++)
            good += strcmp(r->results[i].reason, want) == 0;
        fprintf(stderr, "flood:   9,000 items (%zu bytes), %s: reply %zu bytes, %zu of %zu '%s'\n",
                len, round == 0 ? "first" : "retry", reply_len, good, r->n_results, want);
        if (good != N)
            flood_fail(f, "the 9,000-item %s was not answered item by item", want);
        codec_submit_reply_destroy(r);
    }
    free(items);
    free(ids);
}

static void flood_words(flood_t *f)
{
    static const struct {
        const char *model, *subject;
        uint32_t tokens;
        const char *want;
    } cases[] = {
        {"llama", "llama", 4294967288u, "tokens_too_large"},
        {"llama", "llama", 4294967295u, "tokens_too_large"},
        {"*", "x", 5, "bad_model_name"},
        {">", "x", 5, "bad_model_name"},
        {"a.>", "x", 5, "bad_model_name"},
        {"ab.*", "x", 5, "bad_model_name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        codec_work_item_t it = {.id = {(const uint8_t *)"w", 1},
                                .model = cases[i].model,
                                .has_signature = true,
                                .signature = 7,
                                .tokens = cases[i].tokens};
        codec_submit_reply_t *r = flood_submit(f, cases[i].subject, &it, 1, NULL);
        const char *got = r != NULL && r->n_results == 1 ? r->results[0].reason : "no reply";
        if (strcmp(got, cases[i].want) != 0)
            flood_fail(f, "a permanent input error got '%s'", got);
        codec_submit_reply_destroy(r);
    }
    char model[257], word[64], id[33];
    memset(model, 'm', 256);
    model[256] = '\0';
    codec_work_item_t it = {.id = {(const uint8_t *)"w2", 2},
                            .model = model,
                            .has_signature = true,
                            .signature = 7,
                            .tokens = 5};
    codec_submit_reply_t *r = flood_submit(f, model, &it, 1, NULL);
    const char *got = r != NULL && r->n_results == 1 ? r->results[0].reason : "no reply";
    if (strcmp(got, "model_too_long") != 0)
        flood_fail(f, "a 256-byte model got '%s'", got);
    codec_submit_reply_destroy(r);
    flood_register(f, model, 8, 4096, "x", word, sizeof(word), id);
    if (strcmp(word, "model_too_long") != 0)
        flood_fail(f, "a Register with a 256-byte model got '%s'", word);
}

static void flood_contract(flood_t *f)
{
    char word[64], id[33];
    flood_register(f, "llama", UINT32_MAX, UINT32_MAX, "greedy", word, sizeof(word), id);
    if (strcmp(word, "batch_size_too_large") != 0)
        flood_fail(f, "a contract of 2^32 - 1 items and tokens got '%s'",
                   word[0] ? word : "registered");
}

/* The Batch of one pull on consumer id (caller destroys), or NULL. */
static codec_batch_t *flood_pull_one(flood_t *f, const char *id)
{
    natsSubscription *sub = NULL;
    char inbox[64], subject[96];
    snprintf(inbox, sizeof(inbox), "_INBOX.flood.%d", (int)getpid());
    snprintf(subject, sizeof(subject), "lanes.pull.%s", id);
    codec_pull_t p = {1, 3000};
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_encode_pull(&p, &buf, &len);
    natsConnection_SubscribeSync(&sub, f->nc, inbox);
    natsConnection_PublishRequest(f->nc, subject, inbox, buf, (int)len);
    free(buf);
    natsMsg *m = NULL;
    codec_batch_t *b = NULL;
    if (natsSubscription_NextMsg(&m, sub, 5000) == NATS_OK &&
        codec_decode_batch(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &b) != CODEC_OK)
        b = NULL;
    natsMsg_Destroy(m);
    natsSubscription_Unsubscribe(
        sub); /* then the PONG, then the free (chaos.h, chaos_disconnect) */
    natsConnection_FlushTimeout(f->nc, 1000);
    natsSubscription_Destroy(sub);
    return b;
}

static int flood_daemon_up(flood_t *f);

static void flood_epoch(flood_t *f)
{
    codec_work_item_t it = {.id = {(const uint8_t *)"e", 1},
                            .model = "llama",
                            .has_signature = true,
                            .signature = 42,
                            .tokens = 10};
    codec_submit_reply_destroy(flood_submit(f, "llama", &it, 1, NULL));
    char word[64], id[33];
    flood_register(f, "llama", 8, 4096, "before", word, sizeof(word), id);
    codec_batch_t *b = flood_pull_one(f, id);
    uint64_t before = b != NULL ? b->batch_id : 0;
    codec_batch_destroy(b);
    atomic_store(&f->stats->counting, false);
    chaos_procs_daemon_kill(&f->procs);
    int up = flood_daemon_up(f);
    chaos_sleep_ms(2 * FLOOD_STATS_EVERY_MS); /* a sample sent to the dead daemon times out */
    atomic_store(&f->stats->counting, true);
    if (before == 0 || up != 0) {
        flood_fail(f, "%s", "no batch before the restart, or no restart");
        return;
    }
    flood_register(f, "llama", 8, 4096, "after", word, sizeof(word), id);
    b = flood_pull_one(f, id);
    uint64_t after = b != NULL ? b->batch_id : 0;
    codec_batch_destroy(b);
    codec_ack_t ack = {.batch_id = before, .all = true};
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_encode_ack(&ack, &buf, &len);
    char subject[96];
    snprintf(subject, sizeof(subject), "lanes.ack.%s", id);
    natsMsg *m = flood_request(f, subject, buf, len, 3000);
    free(buf);
    codec_ack_reply_t *r = NULL;
    if (m != NULL)
        codec_decode_ack_reply(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &r);
    fprintf(stderr,
            "flood:   batch id before the kill %" PRIu64 ", after %" PRIu64
            "; the stale ack: acked %u, error '%s'\n",
            before, after, r ? r->acked : 0, r ? r->error : "no reply");
    if (r == NULL || r->acked != 0 || strncmp(r->error, "unknown_batch", 13) != 0)
        flood_fail(f, "%s", "an ack from before the restart settled a batch after it");
    codec_ack_reply_destroy(r);
    natsMsg_Destroy(m);
}

static void flood_stop(flood_t *f)
{
    enum { N = 300, PER = 64 };
    codec_work_item_t items[PER];
    char ids[PER][24];
    for (int m = 0; m < N; m++) { /* fire and forget, each message 64 new shapes: seconds of work */
        for (int i = 0; i < PER; i++) {
            int n = snprintf(ids[i], sizeof(ids[i]), "stop-%d-%d", m, i);
            items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], (size_t)n},
                                           .model = "llama",
                                           .has_signature = true,
                                           .signature = 0x7000000ull + (uint64_t)(m * PER + i),
                                           .tokens = 10};
        }
        codec_submit_t s = {items, PER};
        uint8_t *buf = NULL;
        size_t len = 0;
        codec_encode_submit(&s, &buf, &len);
        natsConnection_Publish(f->nc, "lanes.submit.llama", buf, (int)len);
        free(buf);
    }
    natsConnection_Flush(f->nc);
    chaos_sleep_ms(300); /* into the daemon's queue */
    atomic_store(&f->stats->counting, false);
    uint64_t t0 = chaos_now_ms();
    int code = chaos_procs_daemon_term(&f->procs);
    uint64_t ms = chaos_now_ms() - t0;
    fprintf(stderr,
            "flood:   SIGTERM behind %d submits of %d new shapes: exit %d after %" PRIu64 " ms\n",
            N, PER, code, ms);
    if (code != 0 || ms > 2000)
        flood_fail(f, "%s", "the stop waited behind the backlog (more than 2 s)");
}

/* ---- the runner -------------------------------------------------------------------------------
 */

static int flood_daemon_up(flood_t *f)
{
    return chaos_procs_daemon_start(&f->procs, &f->o);
}

int chaos_flood(const chaos_opts_t *o)
{
    static const struct {
        const char *name;
        void (*fn)(flood_t *);
    } cases[] = {{"names", flood_names},   {"consumers", flood_consumers},
                 {"shapes", flood_shapes}, {"retry", flood_retry},
                 {"words", flood_words},   {"contract", flood_contract},
                 {"epoch", flood_epoch},   {"stop", flood_stop}};
    int failed_cases = 0;
    flood_t f = {.o = *o};
    f.o.dead_after_ms = CHAOS_FLOOD_DEAD_AFTER_MS;
    if (chaos_procs_nats_start(&f.procs, &f.o) != 0)
        return 2;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(f.work, sizeof(f.work), "%s/flood-%s", o->work, cases[i].name);
        mkdir(f.work, 0755);
        f.o.work = f.work;
        f.failures = 0;
        if (flood_daemon_up(&f) != 0 || (f.nc = chaos_connect(f.procs.url, "flood")) == NULL)
            return 2;
        flood_stats_t st = {.url = f.procs.url, .limit_ms = o->flood_stats_ms};
        atomic_store(&st.run, true);
        atomic_store(&st.counting, true);
        f.stats = &st;
        pthread_t t;
        pthread_create(&t, NULL, flood_stats_main, &st);
        fprintf(stderr, "flood: %s\n", cases[i].name);
        uint64_t t0 = chaos_now_ms();
        cases[i].fn(&f);
        uint64_t ms = chaos_now_ms() - t0;
        chaos_sleep_ms(200);
        atomic_store(&st.run, false);
        pthread_join(t, NULL);
        natsConnection_Destroy(f.nc);
        if (f.procs.daemon_pid > 0 && chaos_procs_daemon_term(&f.procs) != 0)
            flood_fail(&f, "%s", "the daemon did not stop cleanly");
        if (st.failed != 0 || st.slow != 0)
            flood_fail(&f, "%s", "stats did not always answer in time");
        printf("flood %-9s %s: %" PRIu64 " ms; stats %" PRIu64 " answered, %" PRIu64
               " unanswered, %" PRIu64 " over 100 ms, max %.1f ms, largest %zu bytes\n",
               cases[i].name, f.failures ? "FAIL" : "PASS", ms, st.samples - st.failed, st.failed,
               st.slow, st.max_ms, st.max_bytes);
        failed_cases += f.failures != 0;
    }
    chaos_procs_cleanup(&f.procs);
    printf("lanesched-chaos --flood: %s (%d of %zu cases failed)\n", failed_cases ? "FAIL" : "PASS",
           failed_cases, sizeof(cases) / sizeof(cases[0]));
    return failed_cases ? 1 : 0;
}
