/*
 * test_service.c - what the daemon tells operators, without NATS: the $SRV replies
 * (scheduler/daemon/service.c), the Prometheus text (metrics.c), the protocol version in
 * Registered and stats, and the data directory's lock (dirlock.c). Same fixture as
 * test_daemon.c: events posted with daemon_post, one daemon_turn at a time, a fake clock and a
 * publish function that records every message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "codec/codec.h"
#include "common/version.h"
#include "scheduler/daemon/daemon.h"
#include "support/fs.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MS  1000000ull
#define SIG 0x91f47f2f45b64efdull

typedef struct {
    uint64_t now;
    char subject[64][128];
    char *data[64];
    size_t len[64];
    size_t n_sent;
    char *snapshot; /* the last text the metrics sink got */
    daemon_t *d;
} fx_t;

static uint64_t fx_clock(void *ctx)
{
    fx_t *f = ctx;
    f->now += MS; /* each read: a millisecond of the owner's work */
    return f->now;
}

static int fx_publish(void *ctx, const char *subject, const char *reply, const void *data,
                      size_t len)
{
    (void)reply;
    fx_t *f = ctx;
    size_t i = f->n_sent++ % 64;
    free(f->data[i]);
    snprintf(f->subject[i], sizeof(f->subject[i]), "%s", subject);
    f->data[i] = malloc(len + 1);
    assert_non_null(f->data[i]);
    memcpy(f->data[i], data, len);
    f->data[i][len] = '\0';
    f->len[i] = len;
    return 0;
}

static void fx_sink(void *ctx, const char *text, size_t len)
{
    fx_t *f = ctx;
    free(f->snapshot);
    f->snapshot = strndup(text, len);
}

static fx_t *fx_open(const char *models, const char *data_dir)
{
    fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->now = 1000 * MS;
    daemon_config_t cfg = {.prefix = "lanes",
                           .store_memory = data_dir == NULL,
                           .data_dir = data_dir,
                           .models = models,
                           .heartbeat_ms = 1000,
                           .dead_after_ms = 5000,
                           .ack_wait_ms = 8000,
                           .max_deliveries = 5,
                           .max_payload = 1 << 20,
                           .dedupe_window_ms = 60000,
                           .clock = fx_clock,
                           .clock_ctx = f};
    assert_int_equal(daemon_create(&cfg, &f->d), DAEMON_OK);
    daemon_publish_set(f->d, fx_publish, f);
    daemon_metrics_sink_set(f->d, fx_sink, f);
    return f;
}

static void fx_close(fx_t *f)
{
    daemon_destroy(f->d);
    for (size_t i = 0; i < 64; i++)
        free(f->data[i]);
    free(f->snapshot);
    free(f);
}

static void turn(fx_t *f)
{
    assert_int_equal(daemon_turn(f->d, 0, NULL), DAEMON_OK);
}

/* The last message published on subject (NUL-terminated), or fails. */
static const char *last_on(const fx_t *f, const char *subject, size_t *len)
{
    for (size_t k = f->n_sent; k-- > 0 && k + 64 >= f->n_sent;) {
        if (strcmp(f->subject[k % 64], subject) == 0) {
            if (len != NULL)
                *len = f->len[k % 64];
            return f->data[k % 64];
        }
    }
    fail_msg("nothing was published on %s", subject);
    return NULL;
}

static void submit(fx_t *f, const char *model, uint32_t tokens, const char *id, uint64_t created)
{
    codec_work_item_t it = {.id = {(const uint8_t *)id, strlen(id)},
                            .model = model,
                            .has_signature = true,
                            .signature = SIG,
                            .tokens = tokens,
                            .created_unix_ns = created};
    codec_submit_t s = {&it, 1};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, model, "sub.reply", buf, len), 0);
    free(buf);
}

/* A Register sent on P.register (subject_model NULL) or P.register.<subject_model>. */
static codec_registered_t *reg_on(fx_t *f, const char *subject_model, const char *model,
                                  uint32_t bs, uint32_t bt)
{
    codec_register_t r = {
        .model = model, .max_batch_size = bs, .max_batch_tokens = bt, .name = "gpu"};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(&r, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_REGISTER, subject_model, "reg.reply", buf, len), 0);
    free(buf);
    turn(f);
    size_t n = 0;
    const char *data = last_on(f, "reg.reply", &n);
    codec_registered_t *out = NULL;
    assert_int_equal(codec_decode_registered(data, n, &out), CODEC_OK);
    return out;
}

static codec_registered_t *reg(fx_t *f, const char *model, uint32_t bs, uint32_t bt)
{
    return reg_on(f, NULL, model, bs, bt);
}

static json_t *service(fx_t *f, const char *token)
{
    assert_int_equal(daemon_post(f->d, EV_SERVICE, token, "srv.reply", NULL, 0), 0);
    turn(f);
    json_error_t err;
    json_t *doc = json_loads(last_on(f, "srv.reply", NULL), 0, &err);
    if (doc == NULL)
        fail_msg("$SRV.%s reply is not JSON: %s", token, err.text);
    return doc;
}

/* The value of the sample `series` (name{labels} exactly) in a Prometheus text; fails if absent. */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p != NULL && *p != '\0';
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    }
    fail_msg("no sample %s", series);
    return -1;
}

/* ---- $SRV ------------------------------------------------------------------------------------ */

static void test_ping_info_and_stats_carry_the_standard_fields(void **state)
{
    (void)state;
    fx_t *f = fx_open(NULL, NULL);
    const char *id = daemon_instance_id(f->d);
    assert_int_equal(strlen(id), 22);
    static const char *const tokens[][2] = {{"PING", "io.nats.micro.v1.ping_response"},
                                            {"INFO.lanesched", "io.nats.micro.v1.info_response"},
                                            {"STATS", "io.nats.micro.v1.stats_response"}};
    for (size_t i = 0; i < 3; i++) {
        json_t *doc = service(f, tokens[i][0]);
        assert_string_equal(json_string_value(json_object_get(doc, "type")), tokens[i][1]);
        assert_string_equal(json_string_value(json_object_get(doc, "name")), "lanesched");
        assert_string_equal(json_string_value(json_object_get(doc, "id")), id);
        assert_string_equal(json_string_value(json_object_get(doc, "version")), version_string());
        json_t *meta = json_object_get(doc, "metadata");
        assert_string_equal(json_string_value(json_object_get(meta, "protocol_version")), "1");
        json_decref(doc);
    }
    json_t *info = service(f, "INFO");
    json_t *eps = json_object_get(info, "endpoints");
    static const char *const want[][2] = {
        {"submit", "lanes.submit.>"},     {"register", "lanes.register"},
        {"register", "lanes.register.>"}, {"pull", "lanes.pull.*"},
        {"ack", "lanes.ack.*"},           {"stats", "lanes.stats"},
        {"metrics", "lanes.metrics"}};
    assert_int_equal(json_array_size(eps), 7);
    for (size_t i = 0; i < 7; i++) {
        json_t *e = json_array_get(eps, i);
        assert_string_equal(json_string_value(json_object_get(e, "name")), want[i][0]);
        assert_string_equal(json_string_value(json_object_get(e, "subject")), want[i][1]);
    }
    json_decref(info);
    fx_close(f);
}

static void test_stats_count_requests_and_errors_per_endpoint(void **state)
{
    (void)state;
    fx_t *f = fx_open("llama,qwen", NULL);
    submit(f, "llama", 10, "a", 0);
    submit(f, "llama", 0, "b", 0); /* zero_tokens: an error of the llama endpoint */
    submit(f, "qwen", 10, "c", 0);
    codec_registered_t *r = reg(f, "llama", 0, 100); /* zero_batch_size */
    assert_true(strncmp(r->error, "zero_batch_size", 15) == 0);
    codec_registered_destroy(r);
    r = reg_on(f, "qwen", "llama", 8, 100); /* bad_model: not the subject's */
    assert_true(strncmp(r->error, "bad_model", 9) == 0);
    codec_registered_destroy(r);
    r = reg_on(f, "llama", "llama", 8, 100);
    assert_string_equal(r->error, "");
    codec_registered_destroy(r);
    turn(f);
    json_t *doc = service(f, "STATS.lanesched");
    assert_non_null(json_object_get(doc, "started"));
    json_t *eps = json_object_get(doc, "endpoints");
    struct {
        const char *subject;
        json_int_t requests, errors;
        const char *last_error_word;
    } want[] = {{"lanes.submit.llama", 2, 1, "zero_tokens"},
                {"lanes.submit.qwen", 1, 0, NULL},
                {"lanes.register", 1, 1, "zero_batch_size"},
                {"lanes.register.>", 2, 1, "bad_model"},
                {"lanes.pull.*", 0, 0, NULL}};
    for (size_t i = 0; i < 5; i++) {
        json_t *e = json_array_get(eps, i);
        assert_string_equal(json_string_value(json_object_get(e, "subject")), want[i].subject);
        assert_int_equal(json_integer_value(json_object_get(e, "num_requests")), want[i].requests);
        assert_int_equal(json_integer_value(json_object_get(e, "num_errors")), want[i].errors);
        const char *last = json_string_value(json_object_get(e, "last_error"));
        if (want[i].last_error_word == NULL)
            assert_null(last);
        else
            assert_true(strncmp(last, want[i].last_error_word, strlen(want[i].last_error_word)) ==
                        0);
        assert_true(json_integer_value(json_object_get(e, "processing_time")) >=
                    want[i].requests * (json_int_t)MS);
    }
    json_decref(doc);
    fx_close(f);
}

/* ---- the protocol version ------------------------------------------------------------------ */

static void test_registered_and_stats_carry_the_protocol_version(void **state)
{
    (void)state;
    fx_t *f = fx_open(NULL, NULL);
    codec_registered_t *r = reg(f, "llama", 8, 4096);
    assert_string_equal(r->error, "");
    assert_int_equal(r->protocol_version, VERSION_PROTOCOL);
    codec_registered_destroy(r);
    assert_int_equal(daemon_post(f->d, EV_STATS, NULL, "stats.reply", NULL, 0), 0);
    turn(f);
    json_t *doc = json_loads(last_on(f, "stats.reply", NULL), 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "protocol_version")), 1);
    assert_string_equal(json_string_value(json_object_get(doc, "version")), version_string());
    assert_string_equal(json_string_value(json_object_get(doc, "instance_id")),
                        daemon_instance_id(f->d));
    json_decref(doc);
    fx_close(f);
}

/* ---- metrics ----------------------------------------------------------------------------------
 */

static void test_metrics_count_per_model_and_time_the_wait(void **state)
{
    (void)state;
    fx_t *f = fx_open(NULL, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wall = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    submit(f, "llama", 100, "a", wall - 3000 * MS); /* created 3 s ago */
    submit(f, "llama", 96, "b", 0);
    submit(f, "we\"ird\\", 5, "c", 0);
    turn(f);
    f->now += 400 * MS; /* the items wait 0.4 s before a consumer pulls */
    codec_registered_t *r = reg(f, "llama", 8, 4096);
    codec_pull_t p = {1, 1000};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_pull(&p, &buf, &len), CODEC_OK);
    assert_int_equal(
        daemon_post(f->d, EV_PULL, strrchr(r->pull_subject, '.') + 1, "inbox", buf, len), 0);
    free(buf);
    turn(f);
    codec_registered_destroy(r);
    assert_int_equal(daemon_post(f->d, EV_METRICS, NULL, "m.reply", NULL, 0), 0);
    turn(f);
    const char *t = last_on(f, "m.reply", NULL);
    assert_int_equal(sample(t, "lanesched_items_received_total{model=\"llama\"}"), 2);
    assert_int_equal(sample(t, "lanesched_tokens_received_total{model=\"llama\"}"), 196);
    assert_int_equal(sample(t, "lanesched_items_routed_total{model=\"llama\"}"), 2);
    assert_int_equal(sample(t, "lanesched_batches_total{model=\"llama\"}"), 1);
    assert_int_equal(sample(t, "lanesched_consumers{model=\"llama\"}"), 1);
    assert_int_equal(sample(t, "lanesched_inflight_items{model=\"llama\"}"), 2);
    assert_int_equal(sample(t, "lanesched_queued_items{model=\"we\\\"ird\\\\\"}"), 1);
    assert_int_equal(sample(t, "lanesched_rejected_total{reason=\"zero_tokens\"}"), 0);
    /* two items of one lane padded to 104: (208 - 196) / 208 */
    assert_true(sample(t, "lanesched_padding_waste_ratio{model=\"llama\"}") > 0.05769 &&
                sample(t, "lanesched_padding_waste_ratio{model=\"llama\"}") < 0.05770);
    /* both waited at least 0.4 s and well under 1 s on the fake clock */
    assert_int_equal(sample(t, "lanesched_queue_wait_seconds_bucket{model=\"llama\",le=\"0.25\"}"),
                     0);
    assert_int_equal(sample(t, "lanesched_queue_wait_seconds_bucket{model=\"llama\",le=\"0.5\"}"),
                     2);
    assert_int_equal(sample(t, "lanesched_queue_wait_seconds_count{model=\"llama\"}"), 2);
    /* only "a" carried created_unix_ns: about 3 s */
    assert_int_equal(sample(t, "lanesched_created_wait_seconds_count{model=\"llama\"}"), 1);
    assert_int_equal(sample(t, "lanesched_created_wait_seconds_bucket{model=\"llama\",le=\"2.5\"}"),
                     0);
    assert_int_equal(sample(t, "lanesched_created_wait_seconds_bucket{model=\"llama\",le=\"5\"}"),
                     1);
    assert_int_equal(sample(t, "lanesched_batch_size_items_bucket{model=\"llama\",le=\"2\"}"), 1);
    assert_int_equal(sample(t, "lanesched_batch_size_items_bucket{model=\"llama\",le=\"+Inf\"}"),
                     1);
    assert_int_equal(sample(t, "lanesched_owner_turn_duration_seconds_count"),
                     3); /* before this one */
    fx_close(f);
}

static void test_a_snapshot_without_reply_goes_to_the_sink_and_counts_no_request(void **state)
{
    (void)state;
    fx_t *f = fx_open(NULL, NULL);
    /* a client's request with no reply subject is not a snapshot: nothing is built */
    assert_int_equal(daemon_post(f->d, EV_METRICS, NULL, NULL, NULL, 0), 0);
    turn(f);
    assert_null(f->snapshot);
    assert_int_equal(daemon_post(f->d, EV_METRICS_SNAPSHOT, NULL, NULL, NULL, 0), 0);
    turn(f);
    assert_non_null(f->snapshot);
    assert_non_null(strstr(f->snapshot, "# TYPE lanesched_queue_wait_seconds histogram\n"));
    json_t *doc = service(f, "STATS");
    json_t *m = json_array_get(json_object_get(doc, "endpoints"), 6);
    assert_string_equal(json_string_value(json_object_get(m, "name")), "metrics");
    assert_int_equal(json_integer_value(json_object_get(m, "num_requests")), 1); /* the client's */
    json_decref(doc);
    fx_close(f);
}

static void test_models_past_the_bound_share_one_series(void **state)
{
    (void)state;
    fx_t *f = fx_open(NULL, NULL);
    char model[32], id[32];
    for (int i = 0; i < 300; i++) {
        snprintf(model, sizeof(model), "m%d", i);
        snprintf(id, sizeof(id), "i%d", i);
        submit(f, model, 1, id, 0);
    }
    /* this clock moves a millisecond a read: the turns' time bound (turn.c invariant 7) spreads
     * the 300 Submits over several turns */
    for (int k = 0; k < 100 && f->n_sent < 300; k++)
        turn(f);
    assert_int_equal(f->n_sent, 300);
    /* 256 models' series are more than a 1 MiB message carries: refused with why */
    assert_int_equal(daemon_post(f->d, EV_METRICS, NULL, "m.reply", NULL, 0), 0);
    turn(f);
    const char *t = last_on(f, "m.reply", NULL);
    assert_int_equal(strncmp(t, CODEC_METRICS_REFUSED_PREFIX, strlen(CODEC_METRICS_REFUSED_PREFIX)),
                     0);
    assert_non_null(strstr(t, "over the 1048576 this NATS server carries"));
    daemon_reply_max_set(f->d, 64u << 20); /* a server that carries it */
    assert_int_equal(daemon_post(f->d, EV_METRICS, NULL, "m.reply", NULL, 0), 0);
    turn(f);
    t = last_on(f, "m.reply", NULL);
    assert_int_equal(sample(t, "lanesched_items_received_total{model=\"m0\"}"), 1);
    assert_int_equal(sample(t, "lanesched_items_received_total{model=\"m254\"}"), 1);
    assert_int_equal(sample(t, "lanesched_items_received_total{model=\"(other)\"}"), 45);
    assert_null(strstr(t, "{model=\"m255\"}"));
    fx_close(f);
}

/* ---- the data directory's lock ------------------------------------------------------------- */

static void test_a_second_daemon_on_the_same_data_dir_is_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/lanes-test-service-XXXXXX";
    assert_non_null(mkdtemp(dir));
    fx_t *f = fx_open(NULL, dir);
    daemon_config_t cfg = {.prefix = "lanes",
                           .data_dir = dir,
                           .heartbeat_ms = 1000,
                           .dead_after_ms = 5000,
                           .ack_wait_ms = 8000,
                           .dedupe_window_ms = 1};
    daemon_t *second = NULL;
    assert_int_equal(daemon_create(&cfg, &second), DAEMON_ELOCKED);
    assert_null(second);
    char path[128], holder[256] = "";
    snprintf(path, sizeof(path), "%s/lanesched.lock", dir);
    FILE *lf = fopen(path, "r");
    assert_non_null(lf);
    assert_non_null(fgets(holder, sizeof(holder), lf));
    fclose(lf);
    char want[32];
    snprintf(want, sizeof(want), "pid %ld on host ", (long)getpid());
    assert_true(strncmp(holder, want, strlen(want)) == 0);
    fx_close(f); /* the lock goes with the first daemon */
    assert_int_equal(daemon_create(&cfg, &second), DAEMON_OK);
    daemon_destroy(second);
    assert_int_equal(fs_remove_tree(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ping_info_and_stats_carry_the_standard_fields),
        cmocka_unit_test(test_stats_count_requests_and_errors_per_endpoint),
        cmocka_unit_test(test_registered_and_stats_carry_the_protocol_version),
        cmocka_unit_test(test_metrics_count_per_model_and_time_the_wait),
        cmocka_unit_test(test_a_snapshot_without_reply_goes_to_the_sink_and_counts_no_request),
        cmocka_unit_test(test_models_past_the_bound_share_one_series),
        cmocka_unit_test(test_a_second_daemon_on_the_same_data_dir_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
