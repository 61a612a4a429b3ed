/*
 * test_daemon_limits.c - the daemon's bounds on what one client controls: every
 * length and count a client sets is capped with its own reason word, the stats document stays
 * bounded whatever clients register or submit, replies always fit, per-model queues refuse
 * with queue_full, and a stop overtakes a backlog. Same fixture idea as test_daemon.c
 * (daemon_fx.h: fake clock, fake publish, memory store). A little over the house rule's ~600
 * lines: one case per finding of that issue, each with its own fixture and its own reason word.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/daemon_fx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static codec_item_result_t submit_one(fx_t *f, const codec_work_item_t *it, const char *subject)
{
    static char reason[64];
    codec_submit_t s = {it, 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, subject, "one.reply", buf, len), 0);
    free(buf);
    fx_turn(f);
    codec_submit_reply_t *r = fx_submit_reply(f, "one.reply");
    assert_int_equal(r->n_results, 1);
    codec_item_result_t out = r->results[0];
    snprintf(reason, sizeof(reason), "%s", out.reason);
    out.reason = reason;
    out.id = (codec_bytes_t){NULL, 0};
    out.error = "";
    codec_submit_reply_destroy(r);
    return out;
}

/* A 100 KB consumer name is refused with its own word (it used to be accepted, and
 * made every stats request slow); so is a 1 MB model. */
static void test_a_long_name_or_model_is_refused_at_register(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, 'n', (1 << 20) - 1);
    big[(1 << 20) - 1] = '\0';
    char id[33];
    big[100 * 1024] = '\0';
    assert_true(strncmp(fx_register(f, "llama", 8, 4096, big, id), "name_too_long:", 14) == 0);
    big[100 * 1024] = 'n';
    assert_true(strncmp(fx_register(f, big, 8, 4096, "gpu", id), "model_too_long:", 15) == 0);
    big[DAEMON_LIMIT_NAME_BYTES] = '\0'; /* exactly at the limit: accepted */
    assert_string_equal(fx_register(f, "llama", 8, 4096, big, id), "");
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_rejected(doc, "name_too_long"), 1);
    json_decref(doc);
    free(big);
    fx_destroy(f);
}

/* Registrations past the limit are refused while every consumer is alive; the stats
 * summary lists a bounded number of them, and pages give every one. */
static void test_consumers_past_the_limit_and_stats_pages(void **state)
{
    (void)state;
    enum { LIMIT = 300 };
    daemon_limits_t lim = {.consumers = LIMIT};
    fx_t *f = fx_create(&lim, 0);
    char name[DAEMON_LIMIT_NAME_BYTES + 1], id[33];
    for (int i = 0; i < LIMIT; i++) {
        memset(name, 'a' + i % 26, DAEMON_LIMIT_NAME_BYTES);
        name[DAEMON_LIMIT_NAME_BYTES] = '\0';
        assert_string_equal(fx_register(f, "llama", 8, 4096, name, id), "");
    }
    assert_true(
        strncmp(fx_register(f, "llama", 8, 4096, "one-more", id), "too_many_consumers:", 19) == 0);
    size_t len = 0;
    double t0 = wall_ms();
    json_t *doc = fx_stats(f, NULL, &len);
    double took = wall_ms() - t0;
    print_message("stats summary with %d consumers: %zu bytes in %.2f ms\n", LIMIT, len, took);
    assert_true(len < 300 * 1024);
    assert_true(took < 1000.0);
    assert_int_equal(json_array_size(json_object_get(doc, "consumers")), 64);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(doc, "totals"), "consumers")), LIMIT);
    assert_true(json_is_true(json_object_get(doc, "truncated")));
    assert_int_equal(fx_rejected(doc, "too_many_consumers"), 1);
    json_decref(doc);
    /* pages of 128 give all of them, each once */
    size_t seen = 0;
    for (size_t offset = 0;;) {
        char body[128];
        snprintf(body, sizeof(body), "{\"detail\":\"consumers\",\"offset\":%zu,\"limit\":128}",
                 offset);
        doc = fx_stats(f, body, &len);
        json_t *page = json_object_get(doc, "page");
        assert_int_equal(json_integer_value(json_object_get(page, "total")), LIMIT);
        seen += json_array_size(json_object_get(doc, "consumers"));
        json_t *next = json_object_get(page, "next");
        if (json_is_null(next)) {
            json_decref(doc);
            break;
        }
        offset = (size_t)json_integer_value(next);
        json_decref(doc);
    }
    assert_int_equal(seen, LIMIT);
    /* once they are dead, a new consumer takes the place of the one silent longest */
    for (int t = 0; t < 60; t++) {
        f->now += 100 * FX_MS;
        fx_turn(f);
    }
    assert_string_equal(fx_register(f, "llama", 8, 4096, "fresh", id), "");
    fx_destroy(f);
}

/* Posts one item per shape, shapes first .. first + n - 1. */
static void submit_shapes(fx_t *f, const char *model, uint64_t first, int n, const char *reply)
{
    for (int i = 0; i < n; i++) {
        char idbuf[32];
        int idlen = snprintf(idbuf, sizeof(idbuf), "%s-s%llu", model,
                             (unsigned long long)(first + (uint64_t)i));
        codec_work_item_t it = {.id = {(const uint8_t *)idbuf, (size_t)idlen},
                                .model = model,
                                .has_signature = true,
                                .signature = first + (uint64_t)i,
                                .tokens = 10};
        codec_submit_t s = {&it, 1};
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
        assert_int_equal(daemon_post(f->d, EV_SUBMIT, model, reply, buf, len), 0);
        free(buf);
        if (i % 512 == 511)
            fx_turn(f);
    }
    fx_turn(f);
}

/* A producer that hashes whole prompts makes a shape per item. Past
 * --limit-shapes-per-model the model's new shapes are refused; stats stays small and fast, and
 * pages of one model's shapes list every one. */
static void test_shapes_past_the_limit_and_stats_pages(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    submit_shapes(f, "llama", 1, DAEMON_LIMIT_SHAPES_PER_MODEL, NULL);
    submit_shapes(f, "llama", 1000000, 1, "shape.reply");
    codec_submit_reply_t *r = fx_submit_reply(f, "shape.reply");
    assert_string_equal(r->results[0].reason, "too_many_shapes");
    codec_submit_reply_destroy(r);
    /* an existing shape still takes items */
    submit_shapes(f, "llama", 7, 1, "shape.reply");
    r = fx_submit_reply(f, "shape.reply");
    assert_string_equal(r->results[0].reason, "duplicate");
    codec_submit_reply_destroy(r);
    size_t len = 0;
    double t0 = wall_ms();
    json_t *doc = fx_stats(f, NULL, &len);
    double took = wall_ms() - t0;
    print_message("stats summary with %u shapes: %zu bytes in %.2f ms\n",
                  DAEMON_LIMIT_SHAPES_PER_MODEL, len, took);
    assert_true(len < 64 * 1024);
    assert_true(took < 1000.0);
    json_t *m = json_array_get(json_object_get(doc, "models"), 0);
    assert_int_equal(json_array_size(json_object_get(m, "shapes")), 16);
    assert_int_equal(json_integer_value(json_object_get(m, "shapes_total")),
                     DAEMON_LIMIT_SHAPES_PER_MODEL);
    assert_int_equal(json_integer_value(json_object_get(m, "queued_items_total")),
                     DAEMON_LIMIT_SHAPES_PER_MODEL);
    assert_true(json_is_true(json_object_get(doc, "truncated")));
    json_decref(doc);
    size_t seen = 0, pages = 0;
    for (size_t offset = 0;; pages++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"detail\":\"shapes\",\"model\":\"llama\",\"offset\":%zu}",
                 offset);
        doc = fx_stats(f, body, &len);
        assert_true(len <= 1024 * 1024);
        json_t *shapes =
            json_object_get(json_array_get(json_object_get(doc, "models"), 0), "shapes");
        for (size_t i = 0; i < json_array_size(shapes); i++) {
            const char *sig =
                json_string_value(json_object_get(json_array_get(shapes, i), "signature"));
            char want[19];
            snprintf(want, sizeof(want), "0x%016zx", seen + 1); /* in order of first sight */
            assert_string_equal(sig, want);
            seen++;
        }
        json_t *next = json_object_get(json_object_get(doc, "page"), "next");
        int last = json_is_null(next);
        if (!last)
            offset = (size_t)json_integer_value(next);
        json_decref(doc);
        if (last)
            break;
    }
    assert_int_equal(seen, DAEMON_LIMIT_SHAPES_PER_MODEL);
    assert_int_equal(pages, DAEMON_LIMIT_SHAPES_PER_MODEL / 1024 - 1);
    fx_destroy(f);
}

/* A page of one model's shapes while other models follow it in the scheduler's order: "returned"
 * counts the shapes listed and "next" leads to the rest, then null (subjects.md, P.stats). */
static void test_a_shapes_page_counts_its_model_among_others(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    submit_shapes(f, "llama", 1, 3, NULL);
    submit_shapes(f, "qwen", 100, 5, NULL);
    size_t len = 0, offset = 0, seen = 0, pages = 0;
    for (;;) {
        char body[128];
        snprintf(body, sizeof(body),
                 "{\"detail\":\"shapes\",\"model\":\"llama\",\"offset\":%zu,\"limit\":2}", offset);
        json_t *doc = fx_stats(f, body, &len);
        json_t *shapes =
            json_object_get(json_array_get(json_object_get(doc, "models"), 0), "shapes");
        json_t *page = json_object_get(doc, "page");
        assert_int_equal(json_integer_value(json_object_get(page, "returned")),
                         json_array_size(shapes));
        assert_int_equal(json_integer_value(json_object_get(page, "total")), 3);
        seen += json_array_size(shapes);
        pages++;
        json_t *next = json_object_get(page, "next");
        int last = json_is_null(next);
        if (!last) {
            assert_int_equal(json_integer_value(next), offset + json_array_size(shapes));
            offset = (size_t)json_integer_value(next);
        }
        json_decref(doc);
        if (last)
            break;
        assert_true(pages < 3);
    }
    assert_int_equal(seen, 3);
    assert_int_equal(pages, 2);
    fx_destroy(f);
}

/* The daemon-wide bounds on shapes and models: other models are refused once every shape or
 * model of the daemon is taken. */
static void test_models_and_shapes_of_the_daemon_are_bounded(void **state)
{
    (void)state;
    daemon_limits_t lim = {.models = 3, .shapes = 5};
    fx_t *f = fx_create(&lim, 0);
    submit_shapes(f, "a", 1, 2, NULL);
    submit_shapes(f, "b", 1, 2, NULL);
    submit_shapes(f, "c", 1, 1, "c.reply");
    codec_submit_reply_t *r = fx_submit_reply(f, "c.reply");
    assert_string_equal(r->results[0].reason, "ok");
    codec_submit_reply_destroy(r);
    submit_shapes(f, "c", 2, 1, "c.reply"); /* the sixth shape */
    r = fx_submit_reply(f, "c.reply");
    assert_string_equal(r->results[0].reason, "too_many_shapes");
    codec_submit_reply_destroy(r);
    submit_shapes(f, "d", 1, 1, "d.reply"); /* the fourth model */
    r = fx_submit_reply(f, "d.reply");
    assert_string_equal(r->results[0].reason, "too_many_models");
    codec_submit_reply_destroy(r);
    fx_destroy(f);
}

/* --limit-models bounds the models that hold items with no live consumer (models.c invariant
 * 5). A model a consumer registered for is never new: its Register and its Submits are never
 * too_many_models, however many idle strangers fill the table; and registering and leaving under
 * made-up names uses nothing up. */
static void test_models_of_consumers_are_never_refused_for_the_table(void **state)
{
    (void)state;
    daemon_limits_t lim = {.models = 2};
    fx_t *f = fx_create(&lim, 0);
    char a[33], c[33];
    assert_string_equal(fx_register(f, "a", 8, 4096, "gpu-a", a), "");
    submit_shapes(f, "a", 1, 1, "a.reply"); /* the consumer came first: model a is not new */
    codec_submit_reply_t *r = fx_submit_reply(f, "a.reply");
    assert_string_equal(r->results[0].reason, "ok");
    codec_submit_reply_destroy(r);
    for (int i = 0; i < 10; i++) { /* made-up models, each left at once */
        char model[16];
        snprintf(model, sizeof(model), "x%d", i);
        assert_string_equal(fx_register(f, model, 8, 4096, "gpu-x", c), "");
        assert_int_equal(daemon_post(f->d, EV_BYE, c, "bye.reply", NULL, 0), 0);
        fx_turn(f);
    }
    const char *strangers[] = {"d", "e"}; /* items and no consumer: they fill the table */
    for (int i = 0; i < 2; i++) {
        char reply[16];
        snprintf(reply, sizeof(reply), "%s.reply", strangers[i]);
        submit_shapes(f, strangers[i], 1, 1, reply);
        r = fx_submit_reply(f, reply);
        assert_string_equal(r->results[0].reason, "ok");
        codec_submit_reply_destroy(r);
    }
    submit_shapes(f, "g", 1, 1, "g.reply"); /* a third stranger */
    r = fx_submit_reply(f, "g.reply");
    assert_string_equal(r->results[0].reason, "too_many_models");
    codec_submit_reply_destroy(r);
    /* a worker for g registers: never refused for the table, and then g's items go in */
    assert_string_equal(fx_register(f, "g", 8, 4096, "gpu-g", c), "");
    submit_shapes(f, "g", 1, 1, "g.reply");
    r = fx_submit_reply(f, "g.reply");
    assert_string_equal(r->results[0].reason, "ok");
    codec_submit_reply_destroy(r);
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_rejected(doc, "too_many_models"), 1);
    json_decref(doc);
    fx_destroy(f);
}

/* Bounded work per message: one Submit creates at most --limit-new-shapes shapes (each a lane and
 * a segment file); the rest of its new shapes are refused, and go in with the next message. */
static void test_one_submit_creates_a_bounded_number_of_shapes(void **state)
{
    (void)state;
    enum { N = 100 };
    fx_t *f = fx_create(NULL, 0);
    codec_work_item_t items[N];
    char ids[N][16];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            int len = snprintf(ids[i], sizeof(ids[i]), "n%d-%d", round, i);
            items[i] = (codec_work_item_t){.id = {(const uint8_t *)ids[i], (size_t)len},
                                           .model = "llama",
                                           .has_signature = true,
                                           .signature = 100 + (uint64_t)i,
                                           .tokens = 10};
        }
        codec_submit_t s = {items, N};
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
        assert_int_equal(daemon_post(f->d, EV_SUBMIT, "llama", "n.reply", buf, len), 0);
        free(buf);
        fx_turn(f);
        codec_submit_reply_t *r = fx_submit_reply(f, "n.reply");
        for (int i = 0; i < N; i++) {
            /* round 0: the first 64 new shapes; round 1: those exist, 36 more are new */
            const char *want =
                round == 0 ? ((unsigned)i < DAEMON_LIMIT_NEW_SHAPES ? "ok" : "too_many_shapes")
                           : "ok";
            assert_string_equal(r->results[i].reason, want);
        }
        codec_submit_reply_destroy(r);
    }
    fx_destroy(f);
}

/* The retry of a 9,000-item submit with 64-byte ids is answered: DUPLICATE results
 * carry their word and no text, so the reply stays under NATS's 1 MiB. */
static void test_a_retried_large_submit_gets_a_reply_that_fits(void **state)
{
    (void)state;
    enum { N = 9000 };
    fx_t *f = fx_create(NULL, 0);
    fx_submit(f, "llama", 42, "retry-", 0, N, LIMITS_ID_MAX, "first.reply");
    fx_turn(f);
    fx_submit(f, "llama", 42, "retry-", 0, N, LIMITS_ID_MAX, "again.reply");
    fx_turn(f);
    const fx_sent_t *first = fx_last_on(f, "first.reply"), *again = fx_last_on(f, "again.reply");
    assert_non_null(first);
    assert_non_null(again);
    print_message("replies to %d items: %zu bytes (accepted), %zu bytes (duplicates)\n", N,
                  first->len, again->len);
    assert_true(first->len <= (1u << 20));
    assert_true(again->len <= (1u << 20));
    codec_submit_reply_t *r = fx_submit_reply(f, "again.reply");
    assert_int_equal(r->n_results, N);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(r->results[i].status, CODEC_ITEM_DUPLICATE);
        assert_string_equal(r->results[i].reason, "duplicate");
        assert_string_equal(r->results[i].error, "");
    }
    codec_submit_reply_destroy(r);
    r = fx_submit_reply(f, "first.reply");
    assert_string_equal(r->results[0].reason, "ok");
    assert_string_equal(r->results[0].error, "");
    codec_submit_reply_destroy(r);
    fx_destroy(f);
}

/* A submit whose reply could not fit what the server carries is refused whole before anything
 * is stored; without a reply subject nothing has to fit. */
static void test_a_reply_that_cannot_fit_is_refused_before_storing(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    daemon_reply_max_set(f->d, 16 * 1024);
    fx_submit(f, "llama", 42, "big-", 0, 1000, LIMITS_ID_MAX, "big.reply");
    fx_turn(f);
    codec_submit_reply_t *r = fx_submit_reply(f, "big.reply");
    assert_int_equal(r->n_results, 0);
    assert_true(strncmp(r->error, "reply_too_large:", 16) == 0);
    codec_submit_reply_destroy(r);
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_counter(doc, "items_received"), 0);
    assert_int_equal(fx_rejected(doc, "reply_too_large"), 1);
    json_decref(doc);
    fx_submit(f, "llama", 42, "small-", 0, 100, LIMITS_ID_MAX, "small.reply");
    fx_turn(f);
    r = fx_submit_reply(f, "small.reply");
    assert_int_equal(r->n_results, 100);
    codec_submit_reply_destroy(r);
    fx_destroy(f);
}

/* Caps on one message: items per submit; reply_to per item. Permanent input errors
 * have words of their own, never store_error. */
static void test_message_caps_and_permanent_errors_have_their_own_words(void **state)
{
    (void)state;
    daemon_limits_t lim = {.items = 100};
    fx_t *f = fx_create(&lim, 0);
    fx_submit(f, "llama", 42, "many-", 0, 101, 0, "many.reply");
    fx_turn(f);
    codec_submit_reply_t *r = fx_submit_reply(f, "many.reply");
    assert_int_equal(r->n_results, 0);
    assert_true(strncmp(r->error, "too_many_items:", 15) == 0);
    codec_submit_reply_destroy(r);
    char reply_to[DAEMON_LIMIT_REPLY_TO_BYTES + 2];
    memset(reply_to, 'r', sizeof(reply_to) - 1);
    reply_to[sizeof(reply_to) - 1] = '\0';
    codec_work_item_t it = {.id = {(const uint8_t *)"x", 1},
                            .model = "llama",
                            .has_signature = true,
                            .signature = 7,
                            .tokens = 5,
                            .reply_to = reply_to};
    assert_string_equal(submit_one(f, &it, "llama").reason, "reply_to_too_long");
    it.reply_to = "";
    it.tokens = 4294967288u;
    assert_string_equal(submit_one(f, &it, "llama").reason, "tokens_too_large");
    it.tokens = 5;
    static const char *const bad_names[] = {"*", ">", "a.>", "ab.*", "a..b", "a b"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        it.model = bad_names[i];
        assert_string_equal(submit_one(f, &it, bad_names[i]).reason, "bad_model_name");
    }
    char model[LIMITS_MODEL_MAX + 2];
    memset(model, 'm', sizeof(model) - 1);
    model[sizeof(model) - 1] = '\0';
    it.model = model;
    assert_string_equal(submit_one(f, &it, model).reason, "model_too_long");
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_rejected(doc, "too_many_items"), 1);
    assert_int_equal(fx_rejected(doc, "store_error"), 0);
    assert_int_equal(fx_counter(doc, "items_received"), 0);
    json_decref(doc);
    fx_destroy(f);
}

/* A contract past the caps is refused at register; at the caps it is accepted. */
static void test_contracts_past_the_caps_are_refused(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    char id[33];
    assert_true(strncmp(fx_register(f, "llama", UINT32_MAX, 4096, "x", id),
                        "batch_size_too_large:", 21) == 0);
    assert_true(strncmp(fx_register(f, "llama", 8, UINT32_MAX, "x", id),
                        "batch_tokens_too_large:", 23) == 0);
    assert_string_equal(
        fx_register(f, "llama", DAEMON_LIMIT_BATCH_SIZE, DAEMON_LIMIT_BATCH_TOKENS, "x", id), "");
    fx_destroy(f);
}

/* Open pulls, their subjects, ack lists and heartbeat lists are capped; a consumer holding
 * --limit-inflight batches gets no more until it settles one. */
static void test_pulls_lists_and_batches_in_flight_are_bounded(void **state)
{
    (void)state;
    daemon_limits_t lim = {.pulls = 2, .inflight = 2, .reply_to_bytes = 64};
    fx_t *f = fx_create(&lim, 0);
    char id[33];
    assert_string_equal(fx_register(f, "llama", 1, 4096, "gpu", id), "");
    fx_submit(f, "llama", 42, "q", 0, 5, 0, NULL);
    fx_turn(f);
    fx_pull(f, id, 10, 60000, "inbox.1");
    fx_pull(f, id, 1, 60000, "inbox.2");
    fx_pull(f, id, 1, 60000, "inbox.3"); /* the third open pull */
    fx_turn(f);
    codec_batch_t *b = fx_batch_on(f, "inbox.3");
    assert_int_equal(b->status, CODEC_BATCH_ERROR);
    assert_true(strncmp(b->error, "too_many_pulls:", 15) == 0);
    codec_batch_destroy(b);
    /* a subject longer than a reply_to may be is refused too: each open pull keeps its own */
    char long_inbox[64 + 2] = {0};
    memset(long_inbox, 'x', sizeof(long_inbox) - 1);
    fx_pull(f, id, 1, 60000, long_inbox);
    fx_turn(f);
    b = fx_batch_on(f, long_inbox);
    assert_int_equal(b->status, CODEC_BATCH_ERROR);
    assert_true(strncmp(b->error, "pull_subject_too_long:", 22) == 0);
    codec_batch_destroy(b);
    assert_int_equal(fx_count_on(f, "inbox.1"), 2); /* two in flight, then it waits */
    fx_turn(f);
    assert_int_equal(fx_count_on(f, "inbox.1"), 2);
    b = fx_batch_on(f, "inbox.1");
    uint64_t batch_id = b->batch_id;
    codec_batch_destroy(b);
    uint32_t *many = calloc(DAEMON_LIMIT_BATCH_SIZE + 1, sizeof(*many));
    assert_non_null(many);
    codec_ack_t a = {.batch_id = batch_id, .ack = many, .n_ack = DAEMON_LIMIT_BATCH_SIZE + 1};
    codec_ack_reply_t *ar = fx_ack(f, id, &a);
    assert_true(strncmp(ar->error, "too_many_positions:", 19) == 0);
    assert_int_equal(ar->acked, 0);
    codec_ack_reply_destroy(ar);
    free(many);
    uint64_t *ids = calloc(3, sizeof(*ids));
    assert_non_null(ids);
    codec_heartbeat_t hb = {ids, 3};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_heartbeat(&hb, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_HEARTBEAT, id, NULL, buf, len), 0);
    free(buf);
    free(ids);
    fx_turn(f);
    codec_ack_t all = {.batch_id = batch_id, .all = true};
    ar = fx_ack(f, id, &all); /* settles one: the third batch goes out */
    assert_int_equal(ar->acked, 1);
    codec_ack_reply_destroy(ar);
    assert_int_equal(fx_count_on(f, "inbox.1"), 3);
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_rejected(doc, "too_many_pulls"), 1);
    assert_int_equal(fx_rejected(doc, "pull_subject_too_long"), 1);
    assert_int_equal(fx_rejected(doc, "too_many_positions"), 1);
    assert_int_equal(fx_rejected(doc, "too_many_ids"), 1);
    json_decref(doc);
    fx_destroy(f);
}

/* Backpressure: a model's queue takes at most queue_items items (queued or in flight) and
 * queue_bytes bytes; past it, queue_full; completing items makes room; other models are not
 * affected. */
static void test_a_full_queue_refuses_with_queue_full(void **state)
{
    (void)state;
    daemon_limits_t lim = {.queue_items = 5};
    fx_t *f = fx_create(&lim, 0);
    fx_submit(f, "llama", 42, "a", 0, 7, 0, "q.reply");
    fx_turn(f);
    codec_submit_reply_t *r = fx_submit_reply(f, "q.reply");
    for (size_t i = 0; i < 7; i++)
        assert_string_equal(r->results[i].reason, i < 5 ? "ok" : "queue_full");
    assert_string_equal(r->results[6].error, codec_status_str(CODEC_EQUEUE_FULL));
    codec_submit_reply_destroy(r);
    fx_submit(f, "mistral", 42, "b", 0, 5, 0, "m.reply");
    fx_turn(f);
    r = fx_submit_reply(f, "m.reply");
    assert_string_equal(r->results[4].reason, "ok");
    codec_submit_reply_destroy(r);
    char id[33];
    assert_string_equal(fx_register(f, "llama", 2, 4096, "gpu", id), "");
    fx_pull(f, id, 1, 60000, "inbox");
    fx_turn(f);
    codec_batch_t *b = fx_batch_on(f, "inbox");
    assert_int_equal(b->n_items, 2);
    codec_ack_t nak = {.batch_id = b->batch_id,
                       .ack = (const uint32_t[]){0},
                       .n_ack = 1,
                       .nak = (const uint32_t[]){1},
                       .n_nak = 1};
    codec_batch_destroy(b);
    codec_ack_reply_t *ar = fx_ack(f, id, &nak); /* one completed, one back in the queue */
    assert_int_equal(ar->acked, 1);
    assert_int_equal(ar->returned, 1);
    codec_ack_reply_destroy(ar);
    fx_submit(f, "llama", 42, "a", 5, 2, 0, "q.reply"); /* room for one */
    fx_turn(f);
    r = fx_submit_reply(f, "q.reply");
    assert_string_equal(r->results[0].reason, "ok");
    assert_string_equal(r->results[1].reason, "queue_full");
    codec_submit_reply_destroy(r);
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_rejected(doc, "queue_full"), 3);
    json_t *models = json_object_get(doc, "models");
    for (size_t i = 0; i < json_array_size(models); i++) {
        json_t *m = json_array_get(models, i);
        assert_int_equal(json_integer_value(json_object_get(m, "stored_items")), 5);
        assert_true(json_integer_value(json_object_get(m, "stored_bytes")) > 5 * 3);
    }
    json_decref(doc);
    fx_destroy(f);
    /* and in bytes: each item here is a 2-byte id, a 3-byte payload and a 16-byte frame */
    lim = (daemon_limits_t){.queue_bytes = 3 * 21};
    f = fx_create(&lim, 0);
    fx_submit(f, "llama", 42, "c", 0, 4, 2, "q.reply");
    fx_turn(f);
    r = fx_submit_reply(f, "q.reply");
    assert_string_equal(r->results[2].reason, "ok");
    assert_string_equal(r->results[3].reason, "queue_full");
    codec_submit_reply_destroy(r);
    fx_destroy(f);
}

/* A SIGTERM behind a backlog must not wait for it: a stop posted behind a backlog is honoured after
 * the event being handled; the rest are dropped unanswered. */
static void test_a_stop_overtakes_a_backlog(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    for (int i = 0; i < 2000; i++)
        fx_submit(f, "llama", 42, "s", i, 1, 0, "s.reply");
    assert_int_equal(daemon_post(f->d, EV_STOP, NULL, NULL, NULL, 0), 0);
    int stopped = 0;
    assert_int_equal(daemon_turn(f->d, 0, &stopped), DAEMON_OK);
    assert_int_equal(stopped, 1);
    assert_true(fx_count_on(f, "s.reply") <= 1);
    fx_destroy(f);
}

typedef struct {
    fx_t *f;
    atomic_bool run;
} asker_t;

/* Another thread asking for stats all along, as operators and dashboards do. */
static void *ask_stats(void *arg)
{
    asker_t *a = arg;
    while (atomic_load(&a->run)) {
        daemon_post(a->f->d, EV_STATS, NULL, "stats.reply", NULL, 0);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Stats must not wait behind every queued event. A summary asked for while the owner works
 * through a backlog is answered between two of its events: its counters show the backlog half
 * done (queued behind the backlog, every answer would count all of it). */
static void test_stats_are_answered_ahead_of_a_backlog(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    for (int i = 0; i < 20000; i++)
        fx_submit(f, "llama", 42, "b", i, 1, 0, "b.reply");
    asker_t a = {.f = f};
    atomic_store(&a.run, true);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ask_stats, &a), 0);
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
    fx_turn(f);
    atomic_store(&a.run, false);
    pthread_join(t, NULL);
    size_t mid_backlog = 0, answers = 0;
    for (size_t i = 0; i < f->n_sent; i++) {
        if (strcmp(f->sent[i].subject, "stats.reply") != 0)
            continue;
        json_t *doc = json_loadb((const char *)f->sent[i].data, f->sent[i].len, 0, NULL);
        assert_non_null(doc);
        mid_backlog += fx_counter(doc, "items_received") < 20000;
        answers++;
        json_decref(doc);
    }
    print_message("%zu stats answers during the turn, %zu of them mid-backlog\n", answers,
                  mid_backlog);
    assert_int_equal(fx_count_on(f, "b.reply"), 20000);
    assert_true(mid_backlog > 0);
    fx_destroy(f);
}

/* Advances the fake clock by ms in ticks of 500 ms, a turn each (the 1 s tick runs the age
 * limit, the lanes' quiesce rule and the reclaim of idle shapes). */
static void age(fx_t *f, uint64_t ms)
{
    for (uint64_t t = 0; t < ms; t += 500) {
        f->now += 500 * FX_MS;
        fx_turn(f);
    }
}

/* The model-table flood: one-item Submits to new models with no consumer fill --limit-models;
 * the next new model is refused, but not for good: past the age limit the items are
 * dead-lettered with reason expired (counted) and the table's places come back. */
static void test_a_model_flood_gives_its_places_back(void **state)
{
    (void)state;
    daemon_limits_t lim = {.models = 4, .queue_age_ms = 2000};
    fx_t *f = fx_create(&lim, 0);
    for (int i = 0; i < 4; i++) {
        char model[16];
        snprintf(model, sizeof(model), "flood%d", i);
        submit_shapes(f, model, 1, 1, "flood.reply");
        codec_submit_reply_t *r = fx_submit_reply(f, "flood.reply");
        assert_string_equal(r->results[0].reason, "ok");
        codec_submit_reply_destroy(r);
    }
    submit_shapes(f, "late", 1, 1, "late.reply");
    codec_submit_reply_t *r = fx_submit_reply(f, "late.reply");
    assert_string_equal(r->results[0].reason, "too_many_models");
    codec_submit_reply_destroy(r);
    age(f, 3000);
    const fx_sent_t *dead = fx_last_on(f, "lanes.dead.flood3");
    assert_non_null(dead);
    codec_batch_t *b = NULL;
    assert_int_equal(codec_decode_batch(dead->data, dead->len, &b), CODEC_OK);
    assert_int_equal(b->status, CODEC_BATCH_ERROR);
    assert_int_equal(strncmp(b->error, "expired:", 8), 0);
    assert_int_equal(b->n_items, 1);
    codec_batch_destroy(b);
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_counter(doc, "expired"), 4);
    assert_int_equal(fx_counter(doc, "dead_lettered"), 4);
    assert_int_equal(fx_counter(doc, "items_completed"), 4);
    json_decref(doc);
    submit_shapes(f, "late", 1, 1, "late.reply");
    r = fx_submit_reply(f, "late.reply");
    assert_string_equal(r->results[0].reason, "ok");
    codec_submit_reply_destroy(r);
    fx_destroy(f);
}

/* The shape-table flood: new shapes fill --limit-shapes; another model's new shape is refused,
 * and accepted again once the flood's items expired and their shapes were reclaimed. */
static void test_a_shape_flood_gives_its_places_back(void **state)
{
    (void)state;
    daemon_limits_t lim = {.shapes = 16, .queue_age_ms = 2000};
    fx_t *f = fx_create(&lim, 0);
    submit_shapes(f, "flood", 1, 16, NULL);
    submit_shapes(f, "other", 100, 1, "other.reply");
    codec_submit_reply_t *r = fx_submit_reply(f, "other.reply");
    assert_string_equal(r->results[0].reason, "too_many_shapes");
    codec_submit_reply_destroy(r);
    age(f, 3000); /* the items expire */
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_counter(doc, "expired"), 16);
    json_decref(doc);
    age(f, 8000); /* their lanes quiesce and drain, the idle shapes are reclaimed */
    submit_shapes(f, "other", 100, 1, "other.reply");
    r = fx_submit_reply(f, "other.reply");
    assert_string_equal(r->results[0].reason, "ok");
    codec_submit_reply_destroy(r);
    fx_destroy(f);
}

/* A consumer's items do not expire while it works on them, and a model's own age limit
 * (queue_age_models) applies to it alone. */
static void test_the_age_limit_is_per_model_and_spares_batches_in_flight(void **state)
{
    (void)state;
    daemon_limits_t lim = {.queue_age_ms = 60000};
    fx_t *f = fx_create(&lim, 0);
    f->cfg.queue_age_models = "short=2000";
    fx_restart(f);
    submit_shapes(f, "short", 1, 2, NULL);
    submit_shapes(f, "long", 1, 1, NULL);
    char id[33];
    assert_string_equal(fx_register(f, "short", 1, 4096, "gpu", id), "");
    fx_pull(f, id, 1, 30000, "inbox");
    fx_turn(f);
    codec_batch_t *b = fx_batch_on(f, "inbox");
    assert_int_equal(b->n_items, 1);
    codec_batch_destroy(b);
    age(f, 3000); /* past short's limit: its queued item expires, the one in flight stays */
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_counter(doc, "expired"), 1);
    json_decref(doc);
    assert_int_equal(fx_count_on(f, "lanes.dead.long"), 0);
    fx_destroy(f);
}

/* Registers with a max_input_tokens; "" or the error (static storage). */
static const char *register_input(fx_t *f, const char *model, uint32_t max_input, char *id)
{
    static char error[256];
    codec_register_t rg = {model, 8, 1u << 20, max_input, "gpu", 0, 0, 0, 0, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(&rg, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_REGISTER, NULL, "reg.reply", buf, len), 0);
    free(buf);
    fx_turn(f);
    const fx_sent_t *s = fx_last_on(f, "reg.reply");
    codec_registered_t *out = NULL;
    assert_int_equal(codec_decode_registered(s->data, s->len, &out), CODEC_OK);
    snprintf(error, sizeof(error), "%s", out->error);
    if (error[0] == '\0')
        snprintf(id, 33, "%s", strrchr(out->pull_subject, '.') + 1);
    codec_registered_destroy(out);
    return error;
}

/* One item of `tokens` for model; its reason word. */
static const char *submit_tokens(fx_t *f, const char *model, const char *id, uint32_t tokens)
{
    static char reason[64];
    codec_work_item_t it = {.id = {(const uint8_t *)id, strlen(id)},
                            .model = model,
                            .has_signature = true,
                            .signature = 7,
                            .tokens = tokens};
    codec_submit_t sub = {&it, 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&sub, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, model, "t.reply", buf, len), 0);
    free(buf);
    fx_turn(f);
    codec_submit_reply_t *r = fx_submit_reply(f, "t.reply");
    snprintf(reason, sizeof(reason), "%s", r->results[0].reason);
    codec_submit_reply_destroy(r);
    return reason;
}

/* An item longer than every live consumer's max_input_tokens is answered input_too_long, not a
 * silent ok; a consumer that takes longer inputs (or any length) lets it in; a model with no
 * consumer accepts any length (its workers are not known yet). */
static void test_an_item_no_consumer_can_run_is_input_too_long(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    char a[33], b[33];
    assert_string_equal(submit_tokens(f, "llama", "early", 5000), "ok");
    assert_string_equal(register_input(f, "llama", 100, a), "");
    assert_string_equal(register_input(f, "llama", 1000, b), "");
    assert_string_equal(submit_tokens(f, "llama", "short", 1000), "ok");
    assert_string_equal(submit_tokens(f, "llama", "long", 1001), "input_too_long");
    assert_int_equal(daemon_post(f->d, EV_BYE, b, "bye.reply", NULL, 0), 0);
    fx_turn(f);
    assert_string_equal(submit_tokens(f, "llama", "long2", 101), "input_too_long");
    assert_string_equal(register_input(f, "llama", 0, b), ""); /* any length */
    assert_string_equal(submit_tokens(f, "llama", "long3", 100000), "ok");
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_rejected(doc, "input_too_long"), 2);
    json_decref(doc);
    fx_destroy(f);
}

/* --allow-models: other models' items and Registers get model_not_allowed; a prefix ends in *. */
static void test_only_allowed_models_are_taken(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    f->cfg.allow_models = "llama,qwen-*";
    fx_restart(f);
    char id[33];
    assert_string_equal(submit_tokens(f, "llama", "a", 10), "ok");
    assert_string_equal(submit_tokens(f, "qwen-7b", "b", 10), "ok");
    assert_string_equal(submit_tokens(f, "mistral", "c", 10), "model_not_allowed");
    assert_string_equal(submit_tokens(f, "llama2", "d", 10), "model_not_allowed");
    assert_true(strncmp(register_input(f, "mistral", 0, id), "model_not_allowed: ", 19) == 0);
    assert_string_equal(register_input(f, "qwen-1b", 0, id), "");
    fx_destroy(f);
}

/* A pull's wait is cut to --limit-pull-expires-ms; every refusal carries its text. */
static void test_a_long_pull_is_cut_and_errors_have_text(void **state)
{
    (void)state;
    daemon_limits_t lim = {.pull_expires_ms = 1000};
    fx_t *f = fx_create(&lim, 0);
    char id[33];
    assert_string_equal(fx_register(f, "llama", 8, 4096, "gpu", id), "");
    fx_pull(f, id, 1, 4294967295u, "inbox"); /* 49.7 days asked */
    fx_turn(f);
    assert_int_equal(fx_count_on(f, "inbox"), 0);
    f->now += 1100 * FX_MS;
    fx_turn(f);
    codec_batch_t *b = fx_batch_on(f, "inbox");
    assert_int_equal(b->status, CODEC_BATCH_EXPIRED);
    codec_batch_destroy(b);
    /* a bye for an unknown id: the code word and a text */
    assert_int_equal(
        daemon_post(f->d, EV_BYE, "0123456789abcdef0123456789abcdef", "bye.reply", NULL, 0), 0);
    fx_turn(f);
    const fx_sent_t *s = fx_last_on(f, "bye.reply");
    codec_ack_reply_t *r = NULL;
    assert_int_equal(codec_decode_ack_reply(s->data, s->len, &r), CODEC_OK);
    assert_int_equal(strncmp(r->error, "unknown_consumer: ", 18), 0);
    codec_ack_reply_destroy(r);
    fx_destroy(f);
}

/* A daemon whose backlog holds 8,192 bytes per class, and junk (len bytes) filled for message
 * bodies. */
static fx_t *backlog_fx(uint8_t *junk, size_t len)
{
    daemon_limits_t lim = {.backlog_bytes = 8192};
    memset(junk, 0xff, len);
    return fx_create(&lim, 0);
}

/* What waits for the owner is bounded in bytes per class, and one turn takes at most the bound
 * (evqueue.c invariant 5): a flood costs bounded memory, is counted, and a flood of Submits
 * leaves room for the workers' messages. Each message here costs 2,000 bytes of data, its reply
 * subject and 256 bytes of overhead: three fit 8,192 bytes, four do not. */
static void test_the_backlog_is_bounded_per_class_and_per_turn(void **state)
{
    (void)state;
    uint8_t junk[2000];
    fx_t *f = backlog_fx(junk, sizeof(junk));
    char reply[16];
    int queued = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(reply, sizeof(reply), "sub.%d", i);
        queued += daemon_post(f->d, EV_SUBMIT, "m", reply, junk, sizeof(junk)) == 0;
    }
    assert_int_equal(queued, 3);
    for (int i = 0; i < 3; i++) { /* the other class still has its room */
        snprintf(reply, sizeof(reply), "p.%d", i);
        assert_int_equal(daemon_post(f->d, EV_PULL, "nobody", reply, junk, sizeof(junk)), 0);
    }
    fx_turn(f); /* the three Submits fill the turn's bytes */
    for (int i = 0; i < 3; i++) {
        snprintf(reply, sizeof(reply), "sub.%d", i);
        assert_int_equal(fx_count_on(f, reply), 1);
        snprintf(reply, sizeof(reply), "p.%d", i);
        assert_int_equal(fx_count_on(f, reply), 0);
    }
    fx_turn(f);
    for (int i = 0; i < 3; i++) {
        snprintf(reply, sizeof(reply), "p.%d", i);
        assert_int_equal(fx_count_on(f, reply), 1);
    }
    assert_int_equal(fx_count_on(f, "sub.3") + fx_count_on(f, "sub.4"), 0);
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_counter(doc, "dropped_messages"), 2);
    json_decref(doc);
    /* the room taken is given back: a Submit is queued again */
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, "m", "sub.5", junk, sizeof(junk)), 0);
    fx_destroy(f);
}

/* A client's request for the metrics (lanes.metrics) is a client message like the others,
 * bounded with them (evqueue.c invariant 5): a flood of them cannot grow the queue, while the
 * daemon's own snapshots for the HTTP server are never refused. */
static void test_metrics_requests_are_bounded_like_other_client_messages(void **state)
{
    (void)state;
    uint8_t junk[2000];
    fx_t *f = backlog_fx(junk, sizeof(junk));
    int queued = 0;
    for (int i = 0; i < 5; i++)
        queued += daemon_post(f->d, EV_METRICS, NULL, "m.reply", junk, sizeof(junk)) == 0;
    assert_int_equal(queued, 3);
    for (int i = 0; i < 5; i++)
        assert_int_equal(daemon_post(f->d, EV_METRICS_SNAPSHOT, NULL, NULL, NULL, 0), 0);
    fx_turn(f);
    assert_int_equal(fx_count_on(f, "m.reply"), 3);
    json_t *doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_counter(doc, "dropped_messages"), 2);
    json_decref(doc);
    fx_destroy(f);
}

/* The backlog is shown (stats counters.backlog_*_bytes, lanesched_backlog_bytes): a summary
 * taken in the same burst as three Submits, before three pulls the burst's bytes left queued,
 * sees the pulls' bytes waiting and no Submit's; once served, nothing waits. */
static void test_the_backlog_shows_in_stats_and_metrics(void **state)
{
    (void)state;
    uint8_t junk[2000];
    fx_t *f = backlog_fx(junk, sizeof(junk));
    char reply[16];
    assert_int_equal(daemon_post(f->d, EV_STATS, NULL, "stats.reply", NULL, 0), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(reply, sizeof(reply), "sub.%d", i);
        assert_int_equal(daemon_post(f->d, EV_SUBMIT, "m", reply, junk, sizeof(junk)), 0);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(reply, sizeof(reply), "p.%d", i);
        assert_int_equal(daemon_post(f->d, EV_PULL, "nobody", reply, junk, sizeof(junk)), 0);
    }
    fx_turn(f); /* the summary and the Submits fill the burst's bytes */
    const fx_sent_t *s = fx_last_on(f, "stats.reply");
    assert_non_null(s);
    json_t *doc = json_loadb((const char *)s->data, s->len, 0, NULL);
    assert_non_null(doc);
    json_int_t waiting = fx_counter(doc, "backlog_other_bytes");
    assert_int_equal(fx_counter(doc, "backlog_submit_bytes"), 0);
    assert_true(waiting >= 3 * (json_int_t)sizeof(junk) && waiting <= 8192);
    assert_int_equal(fx_count_on(f, "p.0"), 0);
    json_decref(doc);
    fx_turn(f);
    doc = fx_stats(f, NULL, NULL);
    assert_int_equal(fx_counter(doc, "backlog_other_bytes"), 0);
    assert_int_equal(fx_counter(doc, "backlog_submit_bytes"), 0);
    json_decref(doc);
    assert_int_equal(daemon_post(f->d, EV_METRICS, NULL, "m.reply", NULL, 0), 0);
    fx_turn(f);
    s = fx_last_on(f, "m.reply");
    assert_non_null(s);
    char *text = strndup((const char *)s->data, s->len);
    assert_non_null(strstr(text, "\nlanesched_backlog_bytes{class=\"submit\"} 0\n"));
    assert_non_null(strstr(text, "\nlanesched_backlog_bytes{class=\"other\"} 0\n"));
    assert_non_null(strstr(text, "\nlanesched_backlog_limit_bytes 8192\n"));
    free(text);
    fx_destroy(f);
}

/* A turn handles events for a bounded time (turn.c invariant 7): with a clock that moves 30 ms
 * at every read, a backlog of ten messages is served over several turns, each once, in order. */
static void test_a_turn_out_of_time_leaves_the_rest_queued_in_order(void **state)
{
    (void)state;
    fx_t *f = fx_create(NULL, 0);
    uint8_t junk[64];
    memset(junk, 0xff, sizeof(junk));
    char reply[16];
    for (int i = 0; i < 10; i++) {
        snprintf(reply, sizeof(reply), "p.%d", i);
        assert_int_equal(daemon_post(f->d, EV_PULL, "nobody", reply, junk, sizeof(junk)), 0);
    }
    f->tick_ns = 30 * FX_MS;
    fx_turn(f);
    size_t first = f->n_sent;
    assert_true(first >= 1 && first < 10);
    for (int turns = 1; f->n_sent < 10 && turns < 10; turns++)
        fx_turn(f);
    assert_int_equal(f->n_sent, 10);
    for (int i = 0; i < 10; i++) {
        snprintf(reply, sizeof(reply), "p.%d", i);
        assert_string_equal(f->sent[i].subject, reply);
    }
    fx_destroy(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_long_name_or_model_is_refused_at_register),
        cmocka_unit_test(test_consumers_past_the_limit_and_stats_pages),
        cmocka_unit_test(test_shapes_past_the_limit_and_stats_pages),
        cmocka_unit_test(test_a_shapes_page_counts_its_model_among_others),
        cmocka_unit_test(test_models_and_shapes_of_the_daemon_are_bounded),
        cmocka_unit_test(test_models_of_consumers_are_never_refused_for_the_table),
        cmocka_unit_test(test_one_submit_creates_a_bounded_number_of_shapes),
        cmocka_unit_test(test_a_retried_large_submit_gets_a_reply_that_fits),
        cmocka_unit_test(test_a_reply_that_cannot_fit_is_refused_before_storing),
        cmocka_unit_test(test_message_caps_and_permanent_errors_have_their_own_words),
        cmocka_unit_test(test_contracts_past_the_caps_are_refused),
        cmocka_unit_test(test_pulls_lists_and_batches_in_flight_are_bounded),
        cmocka_unit_test(test_a_full_queue_refuses_with_queue_full),
        cmocka_unit_test(test_a_stop_overtakes_a_backlog),
        cmocka_unit_test(test_stats_are_answered_ahead_of_a_backlog),
        cmocka_unit_test(test_a_model_flood_gives_its_places_back),
        cmocka_unit_test(test_a_shape_flood_gives_its_places_back),
        cmocka_unit_test(test_the_age_limit_is_per_model_and_spares_batches_in_flight),
        cmocka_unit_test(test_an_item_no_consumer_can_run_is_input_too_long),
        cmocka_unit_test(test_only_allowed_models_are_taken),
        cmocka_unit_test(test_a_long_pull_is_cut_and_errors_have_text),
        cmocka_unit_test(test_the_backlog_is_bounded_per_class_and_per_turn),
        cmocka_unit_test(test_the_backlog_shows_in_stats_and_metrics),
        cmocka_unit_test(test_metrics_requests_are_bounded_like_other_client_messages),
        cmocka_unit_test(test_a_turn_out_of_time_leaves_the_rest_queued_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
