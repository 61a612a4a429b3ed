/*
 * test_daemon.c - the daemon's owner loop without NATS: events posted with daemon_post, one
 * daemon_turn at a time, a fake clock, the memory store, and a fake publish function that
 * records every message (and can refuse them). The integration suite runs the same rules over
 * a real nats-server (tests/integration/test_daemon.c); this file reaches what timing over a
 * network cannot: an exact clock, a refused publish, a stalled loop, the fill's time budget.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec/codec.h"
#include "scheduler/daemon/daemon.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

typedef struct {
    char subject[400];
    char reply[400]; /* "" for none */
    uint8_t *data;
    size_t len;
} sent_t;

typedef struct {
    uint64_t now;
    uint64_t step; /* added at every clock read: time that passes while the owner works */
    sent_t sent[4096];
    size_t n_sent;
    int refuse; /* publishes refused from now on */
    daemon_t *d;
} fx_t;

/* The public ids of the secrets reg handed out (the stats and metrics show only those), the
 * latest PUBLIC_IDS of every test of the file. */
#define PUBLIC_IDS 64
static char public_ids[PUBLIC_IDS][2][33];
static size_t n_public_ids, next_public_id;

static void public_id_note(const char *secret, const char *public_id)
{
    size_t k = next_public_id++ % PUBLIC_IDS;
    n_public_ids += n_public_ids < PUBLIC_IDS;
    snprintf(public_ids[k][0], 33, "%s", secret);
    snprintf(public_ids[k][1], 33, "%s", public_id);
}

static const char *public_id_of(const char *secret)
{
    for (size_t i = 0; i < n_public_ids; i++) {
        if (strcmp(public_ids[i][0], secret) == 0)
            return public_ids[i][1];
    }
    return secret;
}

static uint64_t fx_clock(void *ctx)
{
    fx_t *f = ctx;
    f->now += f->step;
    return f->now;
}

static int fx_publish(void *ctx, const char *subject, const char *reply, const void *data,
                      size_t len)
{
    fx_t *f = ctx;
    if (f->refuse)
        return -1;
    assert_true(f->n_sent < sizeof(f->sent) / sizeof(f->sent[0]));
    sent_t *s = &f->sent[f->n_sent++];
    snprintf(s->subject, sizeof(s->subject), "%s", subject);
    snprintf(s->reply, sizeof(s->reply), "%s", reply != NULL ? reply : "");
    s->data = malloc(len ? len : 1);
    assert_non_null(s->data);
    memcpy(s->data, data, len);
    s->len = len;
    return 0;
}

static void fx_forget(fx_t *f)
{
    for (size_t i = 0; i < f->n_sent; i++)
        free(f->sent[i].data);
    f->n_sent = 0;
}

static int setup_full(void **state, uint32_t max_deliveries, const char *policy,
                      uint32_t starvation_ms, const char *models, int leases)
{
    fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->now = 1000 * MS;
    daemon_config_t cfg = {.prefix = "lanes",
                           .store_memory = 1,
                           .heartbeat_ms = 1000,
                           .dead_after_ms = 5000,
                           .ack_wait_ms = 8000,
                           .max_deliveries = max_deliveries,
                           .max_payload = 1 << 20,
                           .dedupe_window_ms = 60000,
                           .starvation_ms = starvation_ms,
                           .policy = policy,
                           .clock = fx_clock,
                           .clock_ctx = f,
                           .models = models,
                           .leases = leases};
    assert_int_equal(daemon_create(&cfg, &f->d), DAEMON_OK);
    daemon_publish_set(f->d, fx_publish, f);
    *state = f;
    return 0;
}

static int setup_with(void **state, uint32_t max_deliveries)
{
    return setup_full(state, max_deliveries, NULL, 0, NULL, 0);
}

static int setup_leases(void **state)
{
    return setup_full(state, 5, NULL, 0, "llama", 1);
}

static int setup(void **state)
{
    return setup_with(state, 5);
}

static int setup_seed(void **state)
{
    return setup_full(state, 5, "lanes-seed", DAEMON_STARVATION_DEFAULT, NULL, 0);
}

static int setup_lanes(void **state)
{
    return setup_full(state, 5, "lanes", DAEMON_STARVATION_DEFAULT, NULL, 0);
}

static int setup_dead_letter(void **state)
{
    return setup_with(state, 2);
}

static int teardown(void **state)
{
    fx_t *f = *state;
    daemon_destroy(f->d);
    fx_forget(f);
    free(f);
    return 0;
}

static void turn(fx_t *f)
{
    int stopped = -1;
    assert_int_equal(daemon_turn(f->d, 0, &stopped), DAEMON_OK);
    assert_int_equal(stopped, 0);
}

/* Lets ms pass the way a running daemon sees it: a turn every 100 ms (a longer gap would read as a
 * stalled owner, which restarts liveness). */
static void advance(fx_t *f, uint64_t ms)
{
    for (uint64_t t = 0; t < ms; t += 100) {
        f->now += (ms - t < 100 ? ms - t : 100) * MS;
        turn(f);
    }
}

/* advance(), with a heartbeat from consumer id every second to keep it alive. */
static void advance_alive(fx_t *f, const char *id, uint64_t ms)
{
    for (uint64_t t = 0; t < ms; t += 1000) {
        assert_int_equal(daemon_post(f->d, EV_HEARTBEAT, id, NULL, NULL, 0), 0);
        advance(f, ms - t < 1000 ? ms - t : 1000);
    }
}

/* The last message published on subject, or NULL. */
static const sent_t *last_on(const fx_t *f, const char *subject)
{
    for (size_t i = f->n_sent; i-- > 0;) {
        if (strcmp(f->sent[i].subject, subject) == 0)
            return &f->sent[i];
    }
    return NULL;
}

static size_t count_on(const fx_t *f, const char *subject)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_sent; i++)
        n += strcmp(f->sent[i].subject, subject) == 0;
    return n;
}

/* Posts a Submit of items "<prefix><i>" (i in [first, first + n)) of one shape. */
static void submit(fx_t *f, const char *model, uint64_t sig, uint32_t tokens, const char *prefix,
                   int first, int n, const char *reply)
{
    codec_work_item_t items[64];
    char ids[64][32];
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) {
        int len = snprintf(ids[i], sizeof(ids[i]), "%s%d", prefix, first + i);
        items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], (size_t)len},
                                       .model = model,
                                       .has_signature = true,
                                       .signature = sig,
                                       .tokens = tokens,
                                       .payload = {(const uint8_t *)"pay", 3},
                                       .reply_to = "answers.here"};
    }
    codec_submit_t s = {items, (size_t)n};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, model, reply, buf, len), 0);
    free(buf);
}

static codec_submit_reply_t *submit_reply(const fx_t *f, const char *reply)
{
    const sent_t *s = last_on(f, reply);
    assert_non_null(s);
    codec_submit_reply_t *r = NULL;
    assert_int_equal(codec_decode_submit_reply(s->data, s->len, &r), CODEC_OK);
    return r;
}

/* Registers a consumer with Register's optional fields (0: absent); returns its id. */
static void reg_full(fx_t *f, const char *model, uint32_t bs, uint32_t tokens, const char *name,
                     uint32_t fixed_us, uint32_t token_ns, uint32_t cache, char id[33])
{
    codec_register_t r = {model, bs, tokens, 0, name, fixed_us, token_ns, cache, 0, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(&r, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_REGISTER, NULL, "reg.reply", buf, len), 0);
    free(buf);
    turn(f);
    const sent_t *s = last_on(f, "reg.reply");
    assert_non_null(s);
    codec_registered_t *out = NULL;
    assert_int_equal(codec_decode_registered(s->data, s->len, &out), CODEC_OK);
    assert_string_equal(out->error, "");
    assert_int_equal(strlen(out->consumer_id), 32);
    /* the subjects carry the secret, which is not the public id */
    assert_int_equal(strncmp(out->pull_subject, "lanes.pull.", 11), 0);
    snprintf(id, 33, "%s", out->pull_subject + 11);
    assert_int_equal(strlen(id), 32);
    assert_string_not_equal(id, out->consumer_id);
    public_id_note(id, out->consumer_id);
    char want[80];
    snprintf(want, sizeof(want), "lanes.ack.%s", id);
    assert_string_equal(out->ack_subject, want);
    assert_int_equal(out->dead_after_ms, 5000);
    codec_registered_destroy(out);
}

/* Registers a consumer; returns its id (static storage of the fixture's last Registered). */
static void reg(fx_t *f, const char *model, uint32_t bs, uint32_t tokens, const char *name,
                char id[33])
{
    reg_full(f, model, bs, tokens, name, 0, 0, 0, id);
}

static void pull(fx_t *f, const char *id, uint32_t batches, uint32_t expires_ms, const char *inbox)
{
    codec_pull_t p = {batches, expires_ms};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_pull(&p, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_PULL, id, inbox, buf, len), 0);
    free(buf);
}

static codec_batch_t *batch_on(const fx_t *f, const char *inbox)
{
    const sent_t *s = last_on(f, inbox);
    assert_non_null(s);
    codec_batch_t *b = NULL;
    assert_int_equal(codec_decode_batch(s->data, s->len, &b), CODEC_OK);
    return b;
}

static codec_ack_reply_t *ack(fx_t *f, const char *id, uint64_t batch_id, const uint32_t *pos,
                              size_t n, bool all)
{
    codec_ack_t a = {.batch_id = batch_id, .all = all, .ack = pos, .n_ack = n};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_ack(&a, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_ACK, id, "ack.reply", buf, len), 0);
    free(buf);
    turn(f);
    const sent_t *s = last_on(f, "ack.reply");
    assert_non_null(s);
    codec_ack_reply_t *r = NULL;
    assert_int_equal(codec_decode_ack_reply(s->data, s->len, &r), CODEC_OK);
    return r;
}

/* The stats document, parsed; the caller json_decref()s it. */
static json_t *stats(fx_t *f)
{
    assert_int_equal(daemon_post(f->d, EV_STATS, NULL, "stats.reply", NULL, 0), 0);
    turn(f);
    const sent_t *s = last_on(f, "stats.reply");
    assert_non_null(s);
    json_error_t err;
    json_t *doc = json_loadb((const char *)s->data, s->len, 0, &err);
    if (doc == NULL)
        fail_msg("stats is not JSON: %s at %d", err.text, err.position);
    return doc;
}

static json_int_t counter(json_t *doc, const char *key)
{
    json_t *v = json_object_get(json_object_get(doc, "counters"), key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

/* One counter of a stats document asked for now. */
static json_int_t counter_now(fx_t *f, const char *key)
{
    json_t *doc = stats(f);
    json_int_t v = counter(doc, key);
    json_decref(doc);
    return v;
}

/* One item of model llama (prefix names it) submitted and pulled on "inbox" by consumer id: the
 * batch id it went out in. */
static uint64_t dispatch_one(fx_t *f, const char *id, const char *prefix)
{
    submit(f, "llama", 42, 100, prefix, 0, 1, NULL);
    pull(f, id, 1, 60000, "inbox");
    turn(f);
    codec_batch_t *b = batch_on(f, "inbox");
    assert_int_equal(b->n_items, 1);
    uint64_t batch_id = b->batch_id;
    codec_batch_destroy(b);
    return batch_id;
}

/* Posts Ack{batch_id, in_progress} from consumer id without a reply subject; the next turn
 * handles it. */
static void post_in_progress(fx_t *f, const char *id, uint64_t batch_id)
{
    codec_ack_t ip = {.batch_id = batch_id, .in_progress = true};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_ack(&ip, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_ACK, id, NULL, buf, len), 0);
    free(buf);
}

/* ---- submits -------------------------------------------------------------------------------- */

static void test_submit_is_answered_after_the_flush_with_one_result_per_item(void **state)
{
    fx_t *f = *state;
    submit(f, "llama", 0x91f47f2f45b64efd, 100, "a", 0, 3, "sub.reply");
    assert_int_equal(count_on(f, "sub.reply"), 0); /* nothing before the turn */
    turn(f);
    assert_int_equal(count_on(f, "sub.reply"), 1);
    codec_submit_reply_t *r = submit_reply(f, "sub.reply");
    assert_int_equal(r->n_results, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(r->results[i].status, CODEC_ITEM_ACCEPTED);
        assert_string_equal(r->results[i].reason, "ok");
    }
    codec_submit_reply_destroy(r);
    submit(f, "llama", 0x91f47f2f45b64efd, 100, "a", 2, 2, "sub.reply"); /* a2 again, a3 new */
    turn(f);
    r = submit_reply(f, "sub.reply");
    assert_int_equal(r->results[0].status, CODEC_ITEM_DUPLICATE);
    assert_string_equal(r->results[0].reason, "duplicate");
    assert_int_equal(r->results[1].status, CODEC_ITEM_ACCEPTED);
    codec_submit_reply_destroy(r);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "items_received"), 4);
    assert_int_equal(counter(doc, "tokens_received"), 400);
    assert_int_equal(counter(doc, "duplicates"), 1);
    json_decref(doc);
}

/* Every rule an item can break is answered with its own word and counted under that word. */
static void test_rejections_carry_their_reason_and_are_counted_by_it(void **state)
{
    fx_t *f = *state;
    char long_model[300];
    memset(long_model, 'm', sizeof(long_model) - 1);
    long_model[sizeof(long_model) - 1] = '\0';
    struct {
        const char *model;
        uint32_t tokens;
        const char *want;
    } cases[] = {
        {"llama", 0, "zero_tokens"},
        {"llama", 4294967288u, "tokens_too_large"},
        {"other", 10, "bad_model"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        codec_work_item_t it = {.id = {(const uint8_t *)"x", 1},
                                .model = cases[i].model,
                                .has_signature = true,
                                .signature = 7,
                                .tokens = cases[i].tokens};
        codec_submit_t s = {&it, 1};
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
        assert_int_equal(daemon_post(f->d, EV_SUBMIT, "llama", "r", buf, len), 0);
        free(buf);
        turn(f);
        codec_submit_reply_t *r = submit_reply(f, "r");
        assert_int_equal(r->results[0].status, CODEC_ITEM_REJECTED);
        assert_string_equal(r->results[0].reason, cases[i].want);
        codec_submit_reply_destroy(r);
    }
    /* a model over 255 bytes on its own subject */
    codec_work_item_t it = {.id = {(const uint8_t *)"y", 1},
                            .model = long_model,
                            .has_signature = true,
                            .signature = 7,
                            .tokens = 5};
    codec_submit_t s = {&it, 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, long_model, "r", buf, len), 0);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, "llama", "r2", "\xff\xff\xff", 3), 0);
    free(buf);
    turn(f);
    codec_submit_reply_t *r = submit_reply(f, "r");
    assert_string_equal(r->results[0].reason, "model_too_long");
    codec_submit_reply_destroy(r);
    r = submit_reply(f, "r2");
    assert_int_equal(r->n_results, 0);
    assert_true(strncmp(r->error, "malformed", 9) == 0);
    codec_submit_reply_destroy(r);
    json_t *doc = stats(f);
    json_t *rej = json_object_get(json_object_get(doc, "counters"), "rejected");
    assert_int_equal(json_integer_value(json_object_get(rej, "zero_tokens")), 1);
    assert_int_equal(json_integer_value(json_object_get(rej, "tokens_too_large")), 1);
    assert_int_equal(json_integer_value(json_object_get(rej, "bad_model")), 1);
    assert_int_equal(json_integer_value(json_object_get(rej, "model_too_long")), 1);
    assert_int_equal(json_integer_value(json_object_get(rej, "malformed")), 1);
    assert_int_equal(json_object_size(rej), 5);
    assert_int_equal(counter(doc, "items_received"), 0);
    json_decref(doc);
}

/* A refused Register counts under its word, and a Pull, Ack or Heartbeat that does not decode
 * under `malformed` (requests.c invariant 9): every word a client can be refused with is a
 * counter that moves. */
static void test_every_refused_register_and_undecodable_message_is_counted(void **state)
{
    fx_t *f = *state;
    char id[33];
    reg(f, "llama", 8, 4096, "a", id);
    const codec_register_t bad[] = {{"llama", 0, 4096, 0, "z", 0, 0, 0, 0, 0},
                                    {"", 8, 4096, 0, "m", 0, 0, 0, 0, 0}};
    for (size_t i = 0; i < 2; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(codec_encode_register(&bad[i], &buf, &len), CODEC_OK);
        assert_int_equal(daemon_post(f->d, EV_REGISTER, NULL, "reg.reply", buf, len), 0);
        free(buf);
    }
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    assert_int_equal(daemon_post(f->d, EV_REGISTER, NULL, "reg.reply", junk, sizeof(junk)), 0);
    assert_int_equal(daemon_post(f->d, EV_PULL, id, "inbox.a", junk, sizeof(junk)), 0);
    assert_int_equal(daemon_post(f->d, EV_ACK, id, "ack.reply", junk, sizeof(junk)), 0);
    assert_int_equal(daemon_post(f->d, EV_HEARTBEAT, id, NULL, junk, sizeof(junk)), 0);
    turn(f);
    json_t *doc = stats(f);
    json_t *rej = json_object_get(json_object_get(doc, "counters"), "rejected");
    assert_int_equal(json_integer_value(json_object_get(rej, "zero_batch_size")), 1);
    assert_int_equal(json_integer_value(json_object_get(rej, "bad_model")), 1);
    assert_int_equal(json_integer_value(json_object_get(rej, "malformed")), 4);
    assert_int_equal(json_object_size(rej), 3);
    json_decref(doc);
}

static void idle_count(void *ctx)
{
    (*(unsigned *)ctx)++;
}

/* One turn that may wait 1 us for its first event (daemon_turn's idle call needs a wait). */
static void turn_waiting(fx_t *f)
{
    int stopped = -1;
    assert_int_equal(daemon_turn(f->d, 1000, &stopped), DAEMON_OK);
    assert_int_equal(stopped, 0);
}

/* turn.c invariant 8: the idle function runs when the owner is about to wait with nothing
 * queued, once per stretch of publishing, never while events are queued or nothing went out. */
static void test_the_owner_going_idle_after_publishing_asks_for_the_writes(void **state)
{
    fx_t *f = *state;
    unsigned idles = 0;
    daemon_idle_set(f->d, idle_count, &idles);
    turn_waiting(f);
    assert_int_equal(idles, 0); /* nothing published yet */
    assert_int_equal(daemon_post(f->d, EV_STATS, NULL, "stats.reply", NULL, 0), 0);
    turn(f); /* published, but this turn did not wait */
    assert_int_equal(idles, 0);
    assert_int_equal(daemon_post(f->d, EV_STATS, NULL, "stats.reply", NULL, 0), 0);
    turn_waiting(f); /* an event is queued: the owner does not go idle */
    assert_int_equal(idles, 0);
    assert_non_null(last_on(f, "stats.reply"));
    turn_waiting(f); /* nothing queued, published before: the writes are asked for */
    assert_int_equal(idles, 1);
    turn_waiting(f); /* nothing published since */
    turn_waiting(f);
    assert_int_equal(idles, 1);
    daemon_idle_set(f->d, NULL, NULL);
}

/* A Register on P.register.<model> names that model or is refused bad_model and creates
 * nothing: the server's permission on the subject is the authority over the model. */
static void test_a_register_on_a_model_subject_names_that_model(void **state)
{
    fx_t *f = *state;
    const codec_register_t r = {"llama", 8, 4096, 0, "w", 0, 0, 0, 0, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(&r, &buf, &len), CODEC_OK);
    static const char *const subject_models[] = {"qwen", "llama"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(daemon_post(f->d, EV_REGISTER, subject_models[i], "reg.reply", buf, len),
                         0);
        turn(f);
        codec_registered_t *out = NULL;
        const sent_t *sent = last_on(f, "reg.reply");
        assert_int_equal(codec_decode_registered(sent->data, sent->len, &out), CODEC_OK);
        if (i == 0) {
            assert_true(strncmp(out->error, "bad_model: ", 11) == 0);
            assert_string_equal(out->consumer_id, "");
        } else {
            assert_string_equal(out->error, "");
            assert_int_equal(strlen(out->consumer_id), 32);
        }
        codec_registered_destroy(out);
    }
    free(buf);
    json_t *doc = stats(f);
    json_t *rej = json_object_get(json_object_get(doc, "counters"), "rejected");
    assert_int_equal(json_integer_value(json_object_get(rej, "bad_model")), 1);
    assert_int_equal(json_array_size(json_object_get(doc, "consumers")), 1);
    json_decref(doc);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static void test_a_batch_is_committed_only_after_its_publish_succeeds(void **state)
{
    fx_t *f = *state;
    char id[33];
    reg(f, "llama", 8, 4096, "gpu-0", id);
    submit(f, "llama", 42, 100, "b", 0, 4, "sub.reply");
    turn(f);
    f->refuse = 1; /* the channel refuses every batch */
    pull(f, id, 1, 10000, "inbox.1");
    turn(f);
    f->refuse = 0;
    assert_int_equal(count_on(f, "inbox.1"), 0);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "items_routed"), 0); /* nothing moved */
    assert_true(counter(doc, "publish_failures") >= 1);
    json_decref(doc);
    pull(f, id, 1, 10000, "inbox.2");
    turn(f);
    codec_batch_t *b = batch_on(f, "inbox.2");
    assert_int_equal(b->status, CODEC_BATCH_OK);
    assert_int_equal(b->n_items, 4);
    assert_int_equal(b->signature, 42);
    assert_int_equal(b->pad_to, 104);
    for (size_t i = 0; i < b->n_items; i++) {
        assert_int_equal(b->items[i].deliveries, 1);
        assert_string_equal(b->items[i].reply_to, "answers.here"); /* the frame came back */
        assert_int_equal(b->items[i].payload.len, 3);
        assert_memory_equal(b->items[i].payload.ptr, "pay", 3);
    }
    uint64_t batch_id = b->batch_id;
    codec_batch_destroy(b);
    codec_ack_reply_t *r = ack(f, id, batch_id, NULL, 0, true);
    assert_int_equal(r->acked, 4);
    assert_string_equal(r->error, "");
    codec_ack_reply_destroy(r);
    r = ack(f, id, batch_id, NULL, 0, true); /* settled: unknown now */
    assert_int_equal(r->unknown, 1);
    assert_true(strncmp(r->error, "unknown_batch", 13) == 0);
    codec_ack_reply_destroy(r);
    doc = stats(f);
    assert_int_equal(counter(doc, "tokens_completed"), counter(doc, "tokens_received"));
    json_decref(doc);
}

static void test_an_ack_naming_a_missing_position_changes_nothing(void **state)
{
    fx_t *f = *state;
    char id[33];
    reg(f, "llama", 8, 4096, "gpu-0", id);
    submit(f, "llama", 42, 100, "c", 0, 2, NULL);
    pull(f, id, 1, 10000, "inbox");
    turn(f);
    codec_batch_t *b = batch_on(f, "inbox");
    uint64_t batch_id = b->batch_id;
    codec_batch_destroy(b);
    uint32_t pos[2] = {0, 5};
    codec_ack_reply_t *r = ack(f, id, batch_id, pos, 2, false);
    assert_int_equal(r->acked, 0);
    assert_int_equal(r->unknown, 1);
    assert_true(strncmp(r->error, "unknown_position", 16) == 0);
    codec_ack_reply_destroy(r);
    r = ack(f, id, batch_id, pos, 1, false);
    assert_int_equal(r->acked, 1);
    codec_ack_reply_destroy(r);
}

/* A consumer silent past dead_after is dead: its batch returns, its pull hears EXPIRED, and the
 * item goes to another consumer with one more delivery. */
static void test_silence_past_dead_after_returns_the_batch(void **state)
{
    fx_t *f = *state;
    char a[33], b[33];
    reg(f, "llama", 8, 4096, "a", a);
    submit(f, "llama", 42, 100, "d", 0, 1, NULL);
    pull(f, a, 2, 60000, "inbox.a");
    turn(f);
    assert_int_equal(count_on(f, "inbox.a"), 1);
    advance(f, 4000);
    reg(f, "llama", 8, 4096, "b", b); /* nobody dead at 4 s */
    advance(f, 1100);                 /* a: 5.1 s silent > 5 s */
    codec_batch_t *x = batch_on(f, "inbox.a");
    assert_int_equal(x->status, CODEC_BATCH_EXPIRED); /* its open pull was closed */
    codec_batch_destroy(x);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "consumers_declared_dead"), 1);
    json_decref(doc);
    pull(f, b, 1, 10000, "inbox.b");
    turn(f);
    x = batch_on(f, "inbox.b");
    assert_int_equal(x->n_items, 1);
    assert_int_equal(x->items[0].deliveries, 2);
    codec_batch_destroy(x);
    codec_ack_reply_t *r = ack(f, a, 1, NULL, 0, true);
    assert_true(strncmp(r->error, "unknown_consumer", 16) == 0);
    codec_ack_reply_destroy(r);
}

/* A Batch asks NATS's no-responders status on "<base>.<secret>.<batch id>"; a status for it
 * returns the batch at once, and its consumer gets nothing more until its next message, its
 * pulls kept; one that names another consumer's secret, an unknown batch or nothing parseable
 * changes nothing and is counted (undelivered.c invariants 1-3). */
static void test_a_batch_no_one_received_comes_back_at_once(void **state)
{
    fx_t *f = *state;
    assert_int_equal(daemon_undelivered_set(f->d, "_INBOX.d1"), DAEMON_OK);
    char a[33], b[33];
    reg(f, "llama", 8, 4096, "a", a);
    reg(f, "llama", 8, 4096, "b", b);
    submit(f, "llama", 42, 100, "u", 0, 1, NULL);
    pull(f, a, 3, 60000, "inbox.a");
    pull(f, a, 1, 60000, "inbox.a2");
    turn(f);
    const sent_t *s = last_on(f, "inbox.a");
    assert_non_null(s);
    codec_batch_t *x = batch_on(f, "inbox.a");
    uint64_t id = x->batch_id;
    codec_batch_destroy(x);
    char want[200];
    snprintf(want, sizeof(want), "_INBOX.d1.%s.%" PRIu64, a, id);
    assert_string_equal(s->reply, want);
    char forged[6][200] = {"", "x", "x.1"};
    snprintf(forged[3], sizeof(forged[3]), "%s.%" PRIu64, b, id);        /* b does not hold it */
    snprintf(forged[4], sizeof(forged[4]), "%s.%" PRIu64, a, id + 1000); /* no such batch */
    snprintf(forged[5], sizeof(forged[5]), "%s.%" PRIu64 ".x", a, id);
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(daemon_post(f->d, EV_UNDELIVERED, forged[i], NULL, NULL, 0), 0);
        turn(f);
    }
    assert_int_equal(counter_now(f, "undelivered_unmatched"), 6);
    assert_int_equal(counter_now(f, "items_returned"), 0);
    assert_int_equal(daemon_post(f->d, EV_UNDELIVERED, want + strlen("_INBOX.d1."), NULL, NULL, 0),
                     0);
    turn(f);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "batches_undelivered"), 1);
    assert_int_equal(counter(doc, "items_returned"), 1);
    assert_int_equal(counter(doc, "consumers_declared_dead"), 0);
    json_decref(doc);
    /* a, silent, gets nothing on its open pulls: the item waits for b */
    assert_int_equal(count_on(f, "inbox.a") + count_on(f, "inbox.a2"), 1);
    pull(f, b, 1, 60000, "inbox.b");
    turn(f);
    x = batch_on(f, "inbox.b");
    assert_int_equal(x->n_items, 1);
    assert_int_equal(x->items[0].deliveries, 1); /* no one saw the first: no delivery */
    codec_ack_reply_t *r = ack(f, b, x->batch_id, NULL, 0, true);
    assert_string_equal(r->error, "");
    codec_ack_reply_destroy(r);
    codec_batch_destroy(x);
    /* a heartbeat of a's: served again, on the pull it had left open */
    assert_int_equal(daemon_post(f->d, EV_HEARTBEAT, a, NULL, NULL, 0), 0);
    submit(f, "llama", 42, 100, "u", 1, 1, NULL);
    turn(f);
    assert_int_equal(count_on(f, "inbox.a"), 2);
    /* the first status again names a batch no longer in flight */
    assert_int_equal(daemon_post(f->d, EV_UNDELIVERED, want + strlen("_INBOX.d1."), NULL, NULL, 0),
                     0);
    turn(f);
    assert_int_equal(counter_now(f, "undelivered_unmatched"), 7);
}

/* When the owner itself was stalled (the clock jumped while it did not run), liveness restarts
 * instead of declaring every consumer dead for the daemon's own pause. */
static void test_a_stalled_owner_restarts_liveness(void **state)
{
    fx_t *f = *state;
    char a[33];
    reg(f, "llama", 8, 4096, "a", a);
    turn(f);
    f->now += 20000 * MS; /* four dead-after periods without a turn */
    turn(f);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "consumers_declared_dead"), 0);
    json_decref(doc);
    advance(f, 5100); /* but real silence after that still kills */
    doc = stats(f);
    assert_int_equal(counter(doc, "consumers_declared_dead"), 1);
    json_decref(doc);
}

/* A stall of the owner moves the ack deadlines of live consumers' batches by the stall: the
 * batch dispatched 1 s before a 20 s stall is still in flight after it (its deadline was 8 s
 * after dispatch), and returns once 7 s of observed time more have passed without an ack. */
static void test_a_stalled_owner_moves_ack_deadlines(void **state)
{
    fx_t *f = *state;
    char a[33];
    reg(f, "llama", 8, 4096, "a", a);
    (void)dispatch_one(f, a, "s");
    advance_alive(f, a, 1000);
    f->now += 20000 * MS;
    assert_int_equal(daemon_post(f->d, EV_HEARTBEAT, a, NULL, NULL, 0), 0);
    turn(f);
    assert_int_equal(counter_now(f, "batches_expired_ack_deadline"), 0);
    assert_int_equal(counter_now(f, "consumers_declared_dead"), 0);
    advance_alive(f, a, 6500);
    assert_int_equal(counter_now(f, "batches_expired_ack_deadline"), 0);
    advance_alive(f, a, 600);
    assert_int_equal(counter_now(f, "batches_expired_ack_deadline"), 1);
    assert_int_equal(counter_now(f, "items_returned"), 1);
}

/* An in-progress ack that waited out the stall in the queue extends its batch from the end of
 * the stall, once: the stall is judged before the burst is handled, so the shift is not added
 * on top of the extension. */
static void test_an_extension_after_a_stall_counts_from_its_end(void **state)
{
    fx_t *f = *state;
    char a[33];
    reg(f, "llama", 8, 4096, "a", a);
    uint64_t id = dispatch_one(f, a, "x");
    advance_alive(f, a, 1000);
    f->now += 20000 * MS;
    post_in_progress(f, a, id);
    turn(f); /* the deadline: 8 s from here */
    advance_alive(f, a, 7900);
    assert_int_equal(counter_now(f, "batches_expired_ack_deadline"), 0);
    advance_alive(f, a, 200);
    assert_int_equal(counter_now(f, "batches_expired_ack_deadline"), 1);
}

static void test_the_ack_deadline_returns_a_batch_and_in_progress_extends_it(void **state)
{
    fx_t *f = *state;
    char a[33];
    reg(f, "llama", 8, 4096, "a", a);
    uint64_t first = dispatch_one(f, a, "e");
    advance(f, 4000);
    post_in_progress(f, a, first);
    turn(f);
    advance_alive(f, a, 6000); /* 10 s after dispatch, 6 s after the extension: in flight */
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "batches_expired_ack_deadline"), 0);
    json_decref(doc);
    pull(f, a, 1, 60000, "inbox2");
    advance_alive(f, a, 2100); /* 8.1 s after the extension */
    doc = stats(f);
    assert_int_equal(counter(doc, "batches_expired_ack_deadline"), 1);
    assert_int_equal(counter(doc, "items_returned"), 1);
    json_decref(doc);
    codec_batch_t *b = batch_on(f, "inbox2");
    assert_int_equal(b->items[0].deliveries, 2);
    assert_true(b->batch_id > first);
    codec_batch_destroy(b);
}

static void test_an_item_past_max_deliveries_goes_to_the_dead_letter_subject(void **state)
{
    fx_t *f = *state; /* max_deliveries 2 */
    char a[33];
    reg(f, "llama", 8, 4096, "a", a);
    submit(f, "llama", 42, 100, "p", 0, 1, NULL);
    for (int i = 0; i < 2; i++) {
        pull(f, a, 1, 60000, "inbox");
        turn(f);
        codec_batch_t *b = batch_on(f, "inbox");
        assert_int_equal(b->n_items, 1);
        uint32_t pos = 0;
        codec_ack_t nak = {.batch_id = b->batch_id, .nak = &pos, .n_nak = 1};
        codec_batch_destroy(b);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(codec_encode_ack(&nak, &buf, &len), CODEC_OK);
        assert_int_equal(daemon_post(f->d, EV_ACK, a, NULL, buf, len), 0);
        free(buf);
        turn(f);
    }
    pull(f, a, 1, 60000, "inbox.last");
    turn(f);
    assert_int_equal(count_on(f, "lanes.dead.llama"), 1);
    codec_batch_t *dead = batch_on(f, "lanes.dead.llama");
    assert_int_equal(dead->status, CODEC_BATCH_ERROR);
    assert_true(strncmp(dead->error, "delivery_limit", 14) == 0);
    codec_batch_destroy(dead);
    assert_int_equal(count_on(f, "inbox.last"), 0);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "dead_lettered"), 1);
    assert_int_equal(counter(doc, "tokens_completed"), 100);
    json_decref(doc);
}

/* The fill yields after its time budget, so one turn never dispatches without end. */
static void test_a_fill_yields_after_its_time_budget(void **state)
{
    fx_t *f = *state;
    char a[33];
    reg(f, "llama", 1, 4096, "a", a); /* one item per batch */
    for (int i = 0; i < 5; i++)
        submit(f, "llama", 42, 100, "q", i * 64, 64, NULL);
    turn(f);
    pull(f, a, 1000, 600000, "inbox");
    f->step = 1 * MS; /* every clock read now costs a millisecond */
    uint64_t t0 = f->now;
    turn(f);
    uint64_t took = f->now - t0;
    size_t first = count_on(f, "inbox");
    /* The 100 ms budget cut the fill short: some batches went, not all, and the turn ended within
     * the budget plus the few reads a turn makes outside the fill (a batch costs several reads). */
    assert_true(first >= 10 && first < 320);
    assert_true(took >= 100 * MS && took <= 130 * MS);
    f->step = 0;
    turn(f);
    assert_int_equal(count_on(f, "inbox"), 320);
}

/* ---- the rest of the life of a consumer ------------------------------------------------------ */

static void test_bye_and_a_lost_connection_return_batches(void **state)
{
    fx_t *f = *state;
    char a[33], b[33];
    reg(f, "llama", 1, 4096, "a", a);
    reg(f, "llama", 1, 4096, "b", b);
    submit(f, "llama", 42, 100, "s", 0, 2, NULL);
    pull(f, a, 1, 60000, "inbox.a");
    pull(f, b, 1, 60000, "inbox.b");
    turn(f);
    assert_int_equal(count_on(f, "inbox.a") + count_on(f, "inbox.b"), 2);
    assert_int_equal(daemon_post(f->d, EV_BYE, a, "bye.reply", NULL, 0), 0);
    turn(f);
    codec_ack_reply_t *r = NULL;
    const sent_t *s = last_on(f, "bye.reply");
    assert_non_null(s);
    assert_int_equal(codec_decode_ack_reply(s->data, s->len, &r), CODEC_OK);
    assert_string_equal(r->error, "");
    codec_ack_reply_destroy(r);
    assert_int_equal(daemon_post(f->d, EV_DISCONNECTED, NULL, NULL, NULL, 0), 0);
    turn(f);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "items_returned"), 2);
    assert_int_equal(counter(doc, "disconnects"), 1);
    json_t *cs = json_object_get(doc, "consumers");
    assert_int_equal(json_array_size(cs), 2);
    json_decref(doc);
}

/* Whatever bytes a client names itself with, stats stays valid JSON (jansson parses it). */
static void test_stats_stay_valid_json_for_any_name(void **state)
{
    fx_t *f = *state;
    char id[33];
    reg(f, "llama", 8, 4096, "bad \xff\xfe utf-8 \xc3( \"quoted\" \x01", id);
    submit(f, "llama", 42, 100, "u", 0, 1, NULL);
    turn(f);
    json_t *doc = stats(f);
    json_t *c = json_array_get(json_object_get(doc, "consumers"), 0);
    const char *name = json_string_value(json_object_get(c, "name"));
    assert_non_null(name);
    assert_non_null(strstr(name, "\"quoted\""));
    assert_non_null(strstr(name, "\xef\xbf\xbd")); /* U+FFFD for each bad byte */
    json_t *m = json_array_get(json_object_get(doc, "models"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "model")), "llama");
    assert_true(json_is_null(json_object_get(m, "current_shape"))); /* nothing filled yet */
    json_t *shape = json_array_get(json_object_get(m, "shapes"), 0);
    const char *sig = json_string_value(json_object_get(shape, "signature"));
    assert_non_null(sig);
    assert_string_equal(sig, "0x000000000000002a");
    assert_int_equal(json_integer_value(json_object_get(shape, "queued_items")), 1);
    json_decref(doc);
}

static void test_stop_ends_the_turn_after_its_flush(void **state)
{
    fx_t *f = *state;
    submit(f, "llama", 42, 100, "v", 0, 1, "sub.reply");
    assert_int_equal(daemon_post(f->d, EV_STOP, NULL, NULL, NULL, 0), 0);
    int stopped = 0;
    assert_int_equal(daemon_turn(f->d, 0, &stopped), DAEMON_OK);
    assert_int_equal(stopped, 1);
    assert_int_equal(count_on(f, "sub.reply"), 1); /* the submit before it was still answered */
}

/* ---- leases ------------------------------------------------------------------------------- */

/* The lease keeper's word: held until until_ns (0: not held); elsewhere: another instance
 * holds it (a refusal), else a lapse. */
static void lease_note(fx_t *f, const char *model, uint64_t until_ns, int elsewhere)
{
    daemon_lease_note_t note = {until_ns, (uint64_t)elsewhere};
    assert_int_equal(daemon_post(f->d, EV_LEASE, model, NULL, &note, sizeof(note)), 0);
}

static void lease(fx_t *f, const char *model, uint64_t until_ns)
{
    lease_note(f, model, until_ns, 0);
}

/* With leases a model is served only before the deadline of its last renewal, checked on the
 * owner's clock: submits are refused with not_owner outside it, registers go unanswered, and no
 * batch leaves once it passed, whatever the lease thread does meanwhile (fencing). */
static void test_a_model_is_served_only_within_its_lease(void **state)
{
    fx_t *f = *state;
    submit(f, "llama", 42, 100, "l", 0, 2, "r0");
    turn(f);
    codec_submit_reply_t *r = submit_reply(f, "r0");
    assert_int_equal(r->results[0].status, CODEC_ITEM_REJECTED);
    assert_string_equal(r->results[0].reason, "not_owner");
    codec_submit_reply_destroy(r);
    codec_register_t reg0 = {
        .model = "llama", .max_batch_size = 8, .max_batch_tokens = 4096, .name = "gpu"};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(&reg0, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_REGISTER, NULL, "reg.none", buf, len), 0);
    free(buf);
    turn(f);
    assert_int_equal(count_on(f, "reg.none"), 0); /* the holder answers, not us */

    lease(f, "llama", f->now + 2000 * MS);
    submit(f, "llama", 42, 100, "l", 0, 4, "r1");
    turn(f);
    r = submit_reply(f, "r1");
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(r->results[i].status, CODEC_ITEM_ACCEPTED); /* not_owner stored nothing */
    codec_submit_reply_destroy(r);
    char id[33];
    reg(f, "llama", 1, 4096, "gpu", id);
    pull(f, id, 2, 60000, "inbox"); /* two of the four items */
    turn(f);
    assert_int_equal(count_on(f, "inbox"), 2);
    advance_alive(f, id, 2100); /* past the deadline: the lease thread said nothing more */
    pull(f, id, 10, 60000, "inbox");
    advance_alive(f, id, 500);
    assert_int_equal(count_on(f, "inbox"), 2); /* fenced: the two queued items stay */
    submit(f, "llama", 42, 100, "m", 0, 1, "r2");
    turn(f);
    r = submit_reply(f, "r2");
    assert_string_equal(r->results[0].reason, "not_owner");
    codec_submit_reply_destroy(r);
    json_t *doc = stats(f);
    json_t *srv = json_array_get(json_object_get(doc, "serving"), 0);
    assert_string_equal(json_string_value(json_object_get(srv, "model")), "llama");
    assert_true(json_is_false(json_object_get(srv, "serving")));
    json_decref(doc);

    lease(f, "llama", f->now + 2000 * MS); /* renewed again: serving resumes */
    advance_alive(f, id, 300);
    assert_int_equal(count_on(f, "inbox"), 4);
    doc = stats(f);
    srv = json_array_get(json_object_get(doc, "serving"), 0);
    assert_true(json_is_true(json_object_get(srv, "serving")));
    assert_true(json_integer_value(json_object_get(srv, "lease_left_ms")) > 0);
    json_decref(doc);
}

/* A lease note overtakes the clients' backlog (evqueue.c invariant 6): a renewal posted after a
 * Submit is applied before it, so a flood queued ahead of a renewal cannot let the owner's
 * deadline pass while the bucket holds the lease. */
static void test_a_lease_note_overtakes_the_backlog(void **state)
{
    fx_t *f = *state;
    submit(f, "llama", 42, 100, "l", 0, 1, "r0"); /* queued first, the lease not held yet */
    lease(f, "llama", f->now + 2000 * MS);
    turn(f);
    codec_submit_reply_t *r = submit_reply(f, "r0");
    assert_int_equal(r->results[0].status, CODEC_ITEM_ACCEPTED);
    codec_submit_reply_destroy(r);
    json_t *doc = stats(f);
    json_t *srv = json_array_get(json_object_get(doc, "serving"), 0);
    assert_true(json_is_true(json_object_get(srv, "serving")));
    json_decref(doc);
}

/* A lease note that a turn out of time gave back still comes before a note posted after it
 * (evqueue.c invariant 6): the owner keeps the lease keeper's last word, here "held", not the
 * older "held elsewhere". */
static void test_a_lease_note_given_back_keeps_its_place(void **state)
{
    fx_t *f = *state;
    lease(f, "llama", f->now + 2000 * MS);
    lease_note(f, "llama", 0, 1); /* then refused: another instance holds it */
    f->step = 60 * MS;            /* the turn's 100 ms run out after the first note */
    turn(f);
    f->step = 0;
    lease(f, "llama", f->now + 20000 * MS); /* gained again: the newest word */
    turn(f);
    json_t *doc = stats(f);
    json_t *srv = json_array_get(json_object_get(doc, "serving"), 0);
    assert_string_equal(json_string_value(json_object_get(srv, "model")), "llama");
    assert_true(json_is_true(json_object_get(srv, "serving")));
    json_decref(doc);
}

/* Another instance holds the model's lease: a pull of this instance's consumer that expires
 * goes unanswered (no EXPIRED) and its Ack{} probe ends it with unknown_consumer, the consumer's
 * cues to register with the holder; a batch it holds settles here until then, and what it still
 * held goes back to its lane. A lease that only lapsed (a renewal failed, nobody else holds it)
 * answers as usual. */
static void test_a_consumer_of_a_lease_held_elsewhere_is_sent_to_the_holder(void **state)
{
    fx_t *f = *state;
    lease(f, "llama", f->now + 60000 * MS);
    char id[33];
    reg(f, "llama", 1, 4096, "gpu", id);
    submit(f, "llama", 42, 100, "l", 0, 2, "r0");
    pull(f, id, 2, 1000, "held");
    advance_alive(f, id, 300);
    assert_int_equal(count_on(f, "held"), 2);
    uint64_t first = 0;
    for (size_t i = 0; i < f->n_sent && first == 0; i++) {
        if (strcmp(f->sent[i].subject, "held") != 0)
            continue;
        codec_batch_t *b = NULL;
        assert_int_equal(codec_decode_batch(f->sent[i].data, f->sent[i].len, &b), CODEC_OK);
        first = b->batch_id;
        codec_batch_destroy(b);
    }
    lease(f, "llama", f->now + 100 * MS); /* a lapse: renewals fail, nobody else holds it */
    advance_alive(f, id, 300);
    pull(f, id, 1, 500, "lapsed");
    advance_alive(f, id, 800);
    assert_int_equal(count_on(f, "lapsed"), 1); /* EXPIRED, as ever */
    codec_ack_reply_t *r = ack(f, id, 0, NULL, 0, false);
    assert_int_equal(strncmp(r->error, "unknown_batch: ", 15), 0); /* known and alive */
    codec_ack_reply_destroy(r);
    lease_note(f, "llama", 0, 1); /* refused: another instance holds it now */
    pull(f, id, 1, 500, "fenced");
    advance_alive(f, id, 2000);
    assert_int_equal(count_on(f, "fenced"), 0);
    r = ack(f, id, first, NULL, 0, true); /* what it holds still settles here */
    assert_int_equal(r->acked, 1);
    assert_string_equal(r->error, "");
    codec_ack_reply_destroy(r);
    r = ack(f, id, first, NULL, 0, true); /* a resent ack: settled, not "register again" */
    assert_int_equal(strncmp(r->error, "unknown_batch: ", 15), 0);
    codec_ack_reply_destroy(r);
    r = ack(f, id, 0, NULL, 0, false); /* the probe: let go */
    assert_int_equal(strncmp(r->error, "unknown_consumer: ", 18), 0);
    codec_ack_reply_destroy(r);
    lease(f, "llama", f->now + 60000 * MS); /* gained again */
    r = ack(f, id, 0, NULL, 0, false);      /* the old id stays gone */
    assert_int_equal(strncmp(r->error, "unknown_consumer: ", 18), 0);
    codec_ack_reply_destroy(r);
    char id2[33];
    reg(f, "llama", 1, 4096, "gpu", id2);
    pull(f, id2, 1, 1000, "again"); /* the second item, returned when the first consumer went */
    advance_alive(f, id2, 300);
    codec_batch_t *b = batch_on(f, "again");
    assert_int_equal(b->n_items, 1);
    assert_int_equal(b->items[0].deliveries, 2);
    codec_batch_destroy(b);
}

/* With --models, pulls, acks and byes of ids this instance never issued are left to their owner:
 * no reply, not counted. Heartbeats are never answered and are counted (subjects.md, P.hb). */
static void test_with_models_only_heartbeats_of_unknown_ids_are_counted(void **state)
{
    fx_t *f = *state;
    const char *other = "0123456789abcdef0123456789abcdef";
    json_t *doc = stats(f);
    json_int_t before = counter(doc, "unknown_consumer");
    json_decref(doc);
    pull(f, other, 1, 1000, "inbox.other");
    codec_ack_t a = {.batch_id = 1, .all = true};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_ack(&a, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_ACK, other, "ack.other", buf, len), 0);
    free(buf);
    assert_int_equal(daemon_post(f->d, EV_BYE, other, "bye.other", NULL, 0), 0);
    turn(f);
    assert_int_equal(
        count_on(f, "inbox.other") + count_on(f, "ack.other") + count_on(f, "bye.other"), 0);
    doc = stats(f);
    assert_int_equal(counter(doc, "unknown_consumer"), before);
    json_decref(doc);
    for (int i = 0; i < 3; i++)
        assert_int_equal(daemon_post(f->d, EV_HEARTBEAT, other, "hb.other", NULL, 0), 0);
    turn(f);
    assert_int_equal(count_on(f, "hb.other"), 0);
    doc = stats(f);
    assert_int_equal(counter(doc, "unknown_consumer"), before + 3);
    json_decref(doc);
}

/* A reply subject the daemon must not publish on ('$' subjects: JetStream, KV, services; its
 * own subjects): the message is dropped whole and counted, nothing is published there, and the
 * same message with an inbox is handled as usual. */
static void test_a_message_asking_for_its_answer_on_a_refused_subject_is_dropped(void **state)
{
    fx_t *f = *state;
    const char *refused[] = {"$KV.lanesched-leases.llama", "$JS.API.STREAM.DELETE.KV_leases",
                             "lanes.dead.llama"};
    for (size_t i = 0; i < 3; i++)
        submit(f, "llama", 42, 100, "r", (int)i, 1, refused[i]);
    turn(f);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(count_on(f, refused[i]), 0);
    char id[33];
    reg(f, "llama", 8, 4096, "gpu", id);
    pull(f, id, 1, 1000, "$KV.lanesched-leases.qwen");
    assert_int_equal(daemon_post(f->d, EV_STATS, NULL, "$SRV.STATS", NULL, 0), 0);
    advance(f, 1200);
    assert_int_equal(count_on(f, "$KV.lanesched-leases.qwen") + count_on(f, "$SRV.STATS"), 0);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "items_received"), 0); /* nothing of them was stored */
    json_t *rej = json_object_get(json_object_get(doc, "counters"), "rejected");
    assert_int_equal(json_integer_value(json_object_get(rej, "reply_subject_refused")), 5);
    json_decref(doc);
    submit(f, "llama", 42, 100, "r", 0, 1, "_INBOX.p.1");
    turn(f);
    codec_submit_reply_t *r = submit_reply(f, "_INBOX.p.1");
    assert_int_equal(r->results[0].status, CODEC_ITEM_ACCEPTED);
    codec_submit_reply_destroy(r);
}

/* A transport message handed over without a copy: its views are read in place and it is
 * released exactly once, after the burst it came in (evqueue.c invariant 2). */
typedef struct {
    int released;
    uint8_t *bytes; /* what the "transport" allocated: reply subject, then the Submit */
} fx_msg_t;

static void fx_release(void *ctx, void *msg)
{
    int *count = ctx;
    fx_msg_t *m = msg;
    m->released++;
    (*count)++;
    free(m->bytes);
    m->bytes = NULL;
}

static void test_a_message_handed_over_is_read_in_place_and_released_once(void **state)
{
    fx_t *f = *state;
    int released = 0;
    daemon_release_set(f->d, fx_release, &released);
    codec_work_item_t it = {.id = {(const uint8_t *)"z1", 2},
                            .model = "llama",
                            .has_signature = true,
                            .signature = 42,
                            .tokens = 10,
                            .payload = {(const uint8_t *)"pay", 3}};
    codec_submit_t sub = {&it, 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_OK);
    fx_msg_t msgs[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        msgs[i].bytes = malloc(16 + len);
        assert_non_null(msgs[i].bytes);
        snprintf((char *)msgs[i].bytes, 16, "in.place.%d", i);
        memcpy(msgs[i].bytes + 16, buf, len);
        assert_int_equal(daemon_post_msg(f->d, EV_SUBMIT, "llama", (const char *)msgs[i].bytes,
                                         msgs[i].bytes + 16, len, &msgs[i]),
                         0);
    }
    free(buf);
    assert_int_equal(released, 0); /* nothing is released before the owner handled it */
    turn(f);
    assert_int_equal(released, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(msgs[i].released, 1);
    codec_submit_reply_t *r = submit_reply(f, "in.place.0");
    assert_int_equal(r->n_results, 1);
    assert_int_equal(r->results[0].status, CODEC_ITEM_ACCEPTED);
    codec_submit_reply_destroy(r);
    r = submit_reply(f, "in.place.2");
    assert_int_equal(r->results[0].status, CODEC_ITEM_DUPLICATE); /* the same id again */
    codec_submit_reply_destroy(r);
    turn(f);
    assert_int_equal(released, 3); /* once, not again at the next turn */
    /* one never taken is released by daemon_events_drop (the front, before its library closes)
     */
    fx_msg_t late = {0};
    late.bytes = malloc(4);
    assert_non_null(late.bytes);
    assert_int_equal(daemon_post_msg(f->d, EV_HEARTBEAT, "nobody", NULL, NULL, 0, &late), 0);
    daemon_events_drop(f->d);
    assert_int_equal(late.released, 1);
    assert_int_equal(released, 4);
}

static void test_a_stop_overtakes_the_backlog(void **state)
{
    fx_t *f = *state;
    for (int i = 0; i < 200; i++) {
        char reply[32];
        snprintf(reply, sizeof(reply), "backlog.%d", i);
        submit(f, "llama", 42, 100, "b", i * 4, 4, reply);
    }
    assert_int_equal(daemon_post(f->d, EV_STOP, NULL, NULL, NULL, 0), 0);
    int stopped = 0;
    assert_int_equal(daemon_turn(f->d, 0, &stopped), DAEMON_OK);
    assert_int_equal(stopped, 1);
    assert_int_equal(count_on(f, "backlog.0"), 1); /* the message in hand is finished */
    assert_int_equal(count_on(f, "backlog.1"), 0); /* those behind it are dropped unanswered */
    assert_int_equal(count_on(f, "backlog.199"), 0);
}

/* ---- the scheduling policy ------------------------------------------------------------------
 */

/* The consumer's entry in the stats (json_decref the document); id: its secret (what reg
 * gives), shown in the stats as its public id. */
static json_t *stats_consumer(json_t *doc, const char *id)
{
    id = public_id_of(id);
    json_t *all = json_object_get(doc, "consumers"), *c;
    size_t i;
    json_array_foreach(all, i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "id")), id) == 0)
            return c;
    }
    fail_msg("consumer %s not in the stats", id);
    return NULL;
}

/* Register's optional fields reach the scheduler: a declared cost is used as declared, an
 * absent one is estimated (unknown until batches come back), an absent cache reads as 1. */
static void test_register_cost_and_cache_reach_the_scheduler(void **state)
{
    fx_t *f = *state;
    char declared[33], estimated[33];
    reg_full(f, "llama", 8, 4096, "gpu-0", 5000, 10000, 2, declared);
    reg(f, "llama", 8, 4096, "gpu-1", estimated);
    json_t *doc = stats(f);
    json_t *c = stats_consumer(doc, declared);
    assert_false(json_is_true(json_object_get(c, "cost_estimated")));
    assert_true(json_real_value(json_object_get(c, "cost_fixed_us")) == 5000.0);
    assert_true(json_real_value(json_object_get(c, "cost_token_ns")) == 10000.0);
    assert_int_equal(json_integer_value(json_object_get(c, "cache_shapes")), 2);
    c = stats_consumer(doc, estimated);
    assert_true(json_is_true(json_object_get(c, "cost_estimated")));
    assert_true(json_is_null(json_object_get(c, "cost_fixed_us")));
    assert_int_equal(json_integer_value(json_object_get(c, "cache_shapes")), 1);
    json_decref(doc);
}

/* Three items of one shape in two lanes 20 tokens apart. The default policy sends one batch
 * padded to the longest item to a consumer that declared its cost; the article's policy
 * (--policy lanes-seed) sends the lanes apart. */
static void merge_case(fx_t *f, size_t want_items)
{
    char id[33];
    reg_full(f, "llama", 8, 8192, "gpu-0", 5000, 10000, 1, id);
    submit(f, "llama", 0x91f47f2f45b64efd, 1000, "a", 0, 2, "sub.reply");
    submit(f, "llama", 0x91f47f2f45b64efd, 980, "b", 0, 1, "sub.reply");
    turn(f);
    pull(f, id, 1, 1000, "inbox.1");
    turn(f);
    codec_batch_t *b = batch_on(f, "inbox.1");
    assert_int_equal(b->n_items, want_items);
    assert_int_equal(b->pad_to, 1000);
    codec_batch_destroy(b);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "merged_batches"), want_items == 3 ? 1 : 0);
    json_decref(doc);
}

static void test_the_default_policy_merges_neighbouring_lanes(void **state)
{
    merge_case(*state, 3);
}

static void test_lanes_seed_sends_one_lane_per_batch(void **state)
{
    merge_case(*state, 2);
}

/* What ops shows: the GPU busy time the completions measured (dispatch to ack, the later of the
 * two starts) and the queue waits, in the stats' counters. */
static void test_gpu_time_and_waits_are_counted(void **state)
{
    fx_t *f = *state;
    char id[33];
    reg(f, "llama", 8, 8192, "gpu-0", id);
    submit(f, "llama", 0x91f47f2f45b64efd, 100, "a", 0, 2, "sub.reply");
    turn(f);
    f->now += 40 * MS; /* the items wait 40 ms for a pull */
    pull(f, id, 1, 1000, "inbox.1");
    turn(f);
    codec_batch_t *b = batch_on(f, "inbox.1");
    uint64_t batch_id = b->batch_id;
    codec_batch_destroy(b);
    f->now += 25 * MS; /* the worker takes 25 ms */
    codec_ack_reply_t *r = ack(f, id, batch_id, NULL, 0, true);
    assert_int_equal(r->acked, 2);
    codec_ack_reply_destroy(r);
    json_t *doc = stats(f);
    assert_int_equal(counter(doc, "gpu_busy_ns"), 25 * MS);
    assert_int_equal(counter(doc, "gpu_busy_batches"), 1);
    json_int_t p99 = counter(doc, "wait_p99_ns");
    assert_true(p99 >= (json_int_t)(40 * MS) && p99 <= (json_int_t)(45 * MS)); /* 12.5% */
    json_decref(doc);
}

/* A consumer that leaves takes its worker out of the scheduler (debug builds check that a dead
 * consumer holds none): its entry keeps only the registry's figures. */
static void test_a_consumer_that_leaves_leaves_no_worker(void **state)
{
    fx_t *f = *state;
    char id[33];
    reg_full(f, "llama", 8, 4096, "gpu-0", 5000, 10000, 2, id);
    assert_int_equal(daemon_post(f->d, EV_BYE, id, "bye.reply", NULL, 0), 0);
    turn(f);
    json_t *doc = stats(f);
    json_t *c = stats_consumer(doc, id);
    assert_false(json_is_true(json_object_get(c, "alive")));
    assert_null(json_object_get(c, "cost_fixed_us"));
    json_decref(doc);
}

static void test_an_unknown_policy_is_refused(void **state)
{
    (void)state;
    daemon_config_t cfg = {.prefix = "lanes",
                           .store_memory = 1,
                           .heartbeat_ms = 1000,
                           .dead_after_ms = 5000,
                           .ack_wait_ms = 8000,
                           .policy = "fifo"};
    daemon_t *d = NULL;
    assert_int_equal(daemon_create(&cfg, &d), DAEMON_EINVAL);
    assert_null(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_submit_is_answered_after_the_flush_with_one_result_per_item, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejections_carry_their_reason_and_are_counted_by_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_the_owner_going_idle_after_publishing_asks_for_the_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_batch_is_committed_only_after_its_publish_succeeds,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_ack_naming_a_missing_position_changes_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_every_refused_register_and_undecodable_message_is_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_register_on_a_model_subject_names_that_model, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_batch_no_one_received_comes_back_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_silence_past_dead_after_returns_the_batch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_stalled_owner_restarts_liveness, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stalled_owner_moves_ack_deadlines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_extension_after_a_stall_counts_from_its_end, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_the_ack_deadline_returns_a_batch_and_in_progress_extends_it, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_an_item_past_max_deliveries_goes_to_the_dead_letter_subject, setup_dead_letter,
            teardown),
        cmocka_unit_test_setup_teardown(test_a_fill_yields_after_its_time_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bye_and_a_lost_connection_return_batches, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stats_stay_valid_json_for_any_name, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_message_asking_for_its_answer_on_a_refused_subject_is_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_ends_the_turn_after_its_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_consumer_of_a_lease_held_elsewhere_is_sent_to_the_holder, setup_leases,
            teardown),
        cmocka_unit_test_setup_teardown(test_with_models_only_heartbeats_of_unknown_ids_are_counted,
                                        setup_leases, teardown),
        cmocka_unit_test_setup_teardown(test_a_model_is_served_only_within_its_lease, setup_leases,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_lease_note_overtakes_the_backlog, setup_leases,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_lease_note_given_back_keeps_its_place, setup_leases,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_message_handed_over_is_read_in_place_and_released_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stop_overtakes_the_backlog, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_cost_and_cache_reach_the_scheduler, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_the_default_policy_merges_neighbouring_lanes,
                                        setup_lanes, teardown),
        cmocka_unit_test_setup_teardown(test_lanes_seed_sends_one_lane_per_batch, setup_seed,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpu_time_and_waits_are_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_consumer_that_leaves_leaves_no_worker, setup,
                                        teardown),
        cmocka_unit_test(test_an_unknown_policy_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
