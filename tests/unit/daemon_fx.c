/*
 * daemon_fx.c - the daemon fixture of daemon_fx.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/daemon_fx.h"

#include "support/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fx_clock(void *ctx)
{
    fx_t *f = ctx;
    f->now += f->tick_ns;
    return f->now;
}

static int fx_publish(void *ctx, const char *subject, const char *reply, const void *data,
                      size_t len)
{
    (void)reply;
    fx_t *f = ctx;
    if (f->n_sent == f->cap_sent) {
        f->cap_sent = f->cap_sent ? f->cap_sent * 2 : 256;
        f->sent = realloc(f->sent, f->cap_sent * sizeof(*f->sent));
        assert_non_null(f->sent);
    }
    fx_sent_t *s = &f->sent[f->n_sent++];
    snprintf(s->subject, sizeof(s->subject), "%s", subject);
    s->data = malloc(len ? len : 1);
    assert_non_null(s->data);
    memcpy(s->data, data, len);
    s->len = len;
    return 0;
}

static void fx_open(fx_t *f)
{
    assert_int_equal(daemon_create(&f->cfg, &f->d), DAEMON_OK);
    daemon_publish_set(f->d, fx_publish, f);
}

fx_t *fx_create(const daemon_limits_t *limits, int disk)
{
    fx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->now = 1000 * FX_MS;
    if (disk) {
        snprintf(f->dir, sizeof(f->dir), "/tmp/lanes-fx-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
    }
    f->cfg = (daemon_config_t){.prefix = "lanes",
                               .data_dir = f->dir,
                               .store_memory = !disk,
                               .heartbeat_ms = 1000,
                               .dead_after_ms = 5000,
                               .ack_wait_ms = 8000,
                               .max_deliveries = 5,
                               .max_payload = 1 << 20,
                               .dedupe_window_ms = 60000,
                               .clock = fx_clock,
                               .clock_ctx = f};
    if (limits != NULL)
        f->cfg.limits = *limits;
    fx_open(f);
    return f;
}

void fx_restart(fx_t *f)
{
    daemon_destroy(f->d);
    fx_open(f);
}

void fx_forget(fx_t *f)
{
    for (size_t i = 0; i < f->n_sent; i++)
        free(f->sent[i].data);
    f->n_sent = 0;
}

void fx_destroy(fx_t *f)
{
    daemon_destroy(f->d);
    fx_forget(f);
    free(f->sent);
    if (f->dir[0] != '\0')
        assert_int_equal(fs_remove_tree(f->dir), 0);
    free(f);
}

void fx_turn(fx_t *f)
{
    int stopped = -1;
    assert_int_equal(daemon_turn(f->d, 0, &stopped), DAEMON_OK);
    assert_int_equal(stopped, 0);
}

const fx_sent_t *fx_last_on(const fx_t *f, const char *subject)
{
    for (size_t i = f->n_sent; i-- > 0;) {
        if (strcmp(f->sent[i].subject, subject) == 0)
            return &f->sent[i];
    }
    return NULL;
}

size_t fx_count_on(const fx_t *f, const char *subject)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n_sent; i++)
        n += strcmp(f->sent[i].subject, subject) == 0;
    return n;
}

void fx_submit(fx_t *f, const char *model, uint64_t sig, const char *prefix, int first, int n,
               size_t id_len, const char *reply)
{
    codec_work_item_t *items = calloc((size_t)n + 1, sizeof(*items));
    char *ids = calloc((size_t)n + 1, 80);
    assert_true(items != NULL && ids != NULL && id_len < 80);
    for (int i = 0; i < n; i++) {
        char *id = ids + (size_t)i * 80;
        int len = snprintf(id, 80, "%s%d", prefix, first + i);
        while ((size_t)len < id_len)
            id[len++] = '.';
        items[i] = (codec_work_item_t){.id = {(const uint8_t *)id, (size_t)len},
                                       .model = model,
                                       .has_signature = true,
                                       .signature = sig,
                                       .tokens = 100,
                                       .payload = {(const uint8_t *)"pay", 3},
                                       .reply_to = "answers.here"};
    }
    codec_submit_t s = {items, (size_t)n};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_submit(&s, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_SUBMIT, model, reply, buf, len), 0);
    free(buf);
    free(items);
    free(ids);
}

codec_submit_reply_t *fx_submit_reply(const fx_t *f, const char *reply)
{
    const fx_sent_t *s = fx_last_on(f, reply);
    assert_non_null(s);
    codec_submit_reply_t *r = NULL;
    assert_int_equal(codec_decode_submit_reply(s->data, s->len, &r), CODEC_OK);
    return r;
}

const char *fx_register(fx_t *f, const char *model, uint32_t bs, uint32_t bt, const char *name,
                        char *id)
{
    codec_register_t r = {model, bs, bt, 0, name, 0, 0, 0, 0, 0};
    return fx_register_full(f, &r, id);
}

const char *fx_register_full(fx_t *f, const codec_register_t *r, char *id)
{
    static char error[256];
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_register(r, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_REGISTER, NULL, "reg.reply", buf, len), 0);
    free(buf);
    fx_turn(f);
    const fx_sent_t *s = fx_last_on(f, "reg.reply");
    assert_non_null(s);
    codec_registered_t *out = NULL;
    assert_int_equal(codec_decode_registered(s->data, s->len, &out), CODEC_OK);
    snprintf(error, sizeof(error), "%s", out->error);
    if (error[0] == '\0') { /* the token of its subjects: the secret, not the public id */
        assert_int_equal(strlen(out->consumer_id), 32);
        const char *secret = strrchr(out->pull_subject, '.') + 1;
        assert_int_equal(strlen(secret), 32);
        assert_string_not_equal(secret, out->consumer_id);
        snprintf(id, 33, "%s", secret);
    }
    codec_registered_destroy(out);
    return error;
}

void fx_pull(fx_t *f, const char *id, uint32_t batches, uint32_t expires_ms, const char *inbox)
{
    codec_pull_t p = {batches, expires_ms};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_pull(&p, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_PULL, id, inbox, buf, len), 0);
    free(buf);
}

codec_batch_t *fx_batch_on(const fx_t *f, const char *inbox)
{
    const fx_sent_t *s = fx_last_on(f, inbox);
    assert_non_null(s);
    codec_batch_t *b = NULL;
    assert_int_equal(codec_decode_batch(s->data, s->len, &b), CODEC_OK);
    return b;
}

codec_ack_reply_t *fx_ack(fx_t *f, const char *id, const codec_ack_t *a)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(codec_encode_ack(a, &buf, &len), CODEC_OK);
    assert_int_equal(daemon_post(f->d, EV_ACK, id, "ack.reply", buf, len), 0);
    free(buf);
    fx_turn(f);
    const fx_sent_t *s = fx_last_on(f, "ack.reply");
    assert_non_null(s);
    codec_ack_reply_t *r = NULL;
    assert_int_equal(codec_decode_ack_reply(s->data, s->len, &r), CODEC_OK);
    return r;
}

json_t *fx_stats(fx_t *f, const char *body, size_t *out_len)
{
    assert_int_equal(
        daemon_post(f->d, EV_STATS, NULL, "stats.reply", body, body != NULL ? strlen(body) : 0), 0);
    fx_turn(f);
    const fx_sent_t *s = fx_last_on(f, "stats.reply");
    assert_non_null(s);
    json_error_t err;
    json_t *doc = json_loadb((const char *)s->data, s->len, 0, &err);
    if (doc == NULL)
        fail_msg("stats is not JSON: %s at %d", err.text, err.position);
    if (out_len != NULL)
        *out_len = s->len;
    return doc;
}

json_int_t fx_counter(json_t *doc, const char *key)
{
    json_t *v = json_object_get(json_object_get(doc, "counters"), key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

json_int_t fx_rejected(json_t *doc, const char *word)
{
    json_t *rej = json_object_get(json_object_get(doc, "counters"), "rejected");
    assert_true(json_is_object(rej));
    return json_integer_value(json_object_get(rej, word));
}
