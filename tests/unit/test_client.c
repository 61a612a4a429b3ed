/*
 * test_client.c - unit tests for the C client library (clients/c/lanes_client.h), the parts that
 * need no server: the shape helpers against subjects.md's test vectors (a client and the daemon
 * must agree on every signature), the signature parser's edges, the status texts, and the
 * argument checks lc_client_open makes before it connects. Everything that talks NATS is in
 * tests/integration/test_client.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "clients/c/lanes_client.h"

static const char *const THREE[] = {"You are a helpful assistant.", "Answer in French.",
                                    "Tools: search, calculator."};
static const char *const REVERSED[] = {"Tools: search, calculator.", "Answer in French.",
                                       "You are a helpful assistant."};
/* 109 bytes: XXH64's path for inputs of 32 bytes and more, as the five components' 40 bytes */
static const char *const FIVE[] = {
    "You are a helpful assistant.", "Answer in French.", "Tools: search, calculator.",
    "Context: the user is a customer of an online bookshop and asks about orders, deliveries, "
    "returns and refunds.",
    "Be brief."};

static void test_shape_vectors(void **state)
{
    (void)state;
    uint64_t sig = 0;
    assert_int_equal(lc_shape_sign(NULL, 0, &sig), LC_OK);
    assert_true(sig == 0xef46db3751d8e999ull);

    uint64_t h[3] = {0};
    lc_shape_hash(THREE, 1, h);
    assert_true(h[0] == 0xe4a58ad40a48973bull);
    assert_int_equal(lc_shape_sign(THREE, 1, &sig), LC_OK);
    assert_true(sig == 0x91f47f2f45b64efdull);

    lc_shape_hash(THREE, 3, h);
    assert_true(h[0] == 0xe4a58ad40a48973bull);
    assert_true(h[1] == 0x6fd2a283f58d194eull);
    assert_true(h[2] == 0x425afd5d136c7e5eull);
    assert_int_equal(lc_shape_sign(THREE, 3, &sig), LC_OK);
    assert_true(sig == 0xa340b41b91cca53dull);

    assert_int_equal(lc_shape_sign(REVERSED, 3, &sig), LC_OK);
    assert_true(sig == 0xaf6225c57a35ec89ull);

    uint64_t h5[5] = {0};
    lc_shape_hash(FIVE, 5, h5);
    assert_true(h5[3] == 0x5e1f688af88d97abull);
    assert_true(h5[4] == 0x52a4b236d9228cc6ull);
    assert_int_equal(lc_shape_sign(FIVE, 5, &sig), LC_OK);
    assert_true(sig == 0x6a17c9adc0a244e4ull);
}

/* Above 16 components lc_shape_sign hashes into a heap copy; the result must not change. */
static void test_shape_sign_many_components(void **state)
{
    (void)state;
    enum { N = 40 };
    char text[N][24];
    const char *comps[N];
    uint64_t hashes[N];
    for (int i = 0; i < N; i++) {
        snprintf(text[i], sizeof(text[i]), "component %d", i);
        comps[i] = text[i];
    }
    lc_shape_hash(comps, N, hashes);
    uint64_t sig = 0;
    assert_int_equal(lc_shape_sign(comps, N, &sig), LC_OK);
    assert_true(sig == codec_signature(hashes, N));
    uint64_t sig16 = 0;
    assert_int_equal(lc_shape_sign(comps, 16, &sig16), LC_OK);
    assert_true(sig16 == codec_signature(hashes, 16));
    assert_true(sig16 != sig);
}

static void test_shape_sign_rejects_null(void **state)
{
    (void)state;
    uint64_t sig = 7;
    assert_int_equal(lc_shape_sign(NULL, 2, &sig), LC_EINVAL);
    assert_int_equal(lc_shape_sign(THREE, 3, NULL), LC_EINVAL);
    assert_true(sig == 7);
}

static void test_shape_parse(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(lc_shape_parse("0xef46db3751d8e999", &v), LC_OK);
    assert_true(v == 0xef46db3751d8e999ull);
    assert_int_equal(lc_shape_parse("91F47F2F45B64EFD", &v), LC_OK);
    assert_true(v == 0x91f47f2f45b64efdull);
    assert_int_equal(lc_shape_parse("0X1", &v), LC_OK);
    assert_true(v == 1);
    assert_int_equal(lc_shape_parse("ffffffffffffffff", &v), LC_OK);
    assert_true(v == UINT64_MAX);

    static const char *const bad[] = {
        "", "0x", "0", "0x0", "00000000", "g", "0x12345678901234567", " 1", "-1", "0x1 ", "1x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 42;
        assert_int_equal(lc_shape_parse(bad[i], &v), LC_EINVAL);
        assert_true(v == 42); /* untouched on failure */
    }
    assert_int_equal(lc_shape_parse(NULL, &v), LC_EINVAL);
    assert_int_equal(lc_shape_parse("1", NULL), LC_EINVAL);
}

static void test_status_texts(void **state)
{
    (void)state;
    for (int i = 0; i < LC_STATUS_COUNT; i++) {
        const char *t = lc_status_str((lc_status_t)i);
        assert_non_null(t);
        assert_true(t[0] != '\0');
        assert_string_not_equal(t, "unknown client status");
        for (int j = 0; j < i; j++)
            assert_string_not_equal(t, lc_status_str((lc_status_t)j));
    }
    assert_string_equal(lc_status_str(LC_OK), "ok");
    assert_string_equal(lc_status_str((lc_status_t)LC_STATUS_COUNT), "unknown client status");
    assert_string_equal(lc_client_error_get(NULL), "");
    assert_string_equal(lc_consumer_error_get(NULL), "");
}

/* Refusals that come before any connection attempt: EINVAL, a text in errbuf, *out untouched. */
static void expect_open_refused(const lc_client_config_t *cc, const char *text)
{
    static char sentinel;
    lc_client_t *cl = (lc_client_t *)&sentinel;
    char err[256] = "";
    assert_int_equal(lc_client_open(cc, err, sizeof(err), &cl), LC_EINVAL);
    assert_ptr_equal(cl, (lc_client_t *)&sentinel);
    if (strstr(err, text) == NULL)
        fail_msg("errbuf '%s' does not say '%s'", err, text);
}

static void test_client_open_refuses_bad_config(void **state)
{
    (void)state;
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    cc.prefix = "a..b";
    expect_open_refused(&cc, "bad prefix");
    cc.prefix = "lanes.*";
    expect_open_refused(&cc, "bad prefix");
    cc.prefix = "lanes";
    cc.inbox_prefix = "_INBOX_alice.>";
    expect_open_refused(&cc, "bad inbox prefix");
    cc.inbox_prefix = "_INBOX_alice..x";
    expect_open_refused(&cc, "bad inbox prefix");
    cc.inbox_prefix = NULL;
    cc.tls_cert_file = "cert.pem";
    expect_open_refused(&cc, "TLS certificate without TLS key");
    cc.tls_cert_file = NULL;
    cc.tls_key_file = "key.pem"; /* the pairing (common/keyfile.h) before the file itself */
    expect_open_refused(&cc, "TLS key without TLS certificate");
    cc.tls_key_file = NULL;
    cc.servers = " , ";
    expect_open_refused(&cc, "no server URL");
    expect_open_refused(NULL, "NULL argument");

    lc_client_t *cl = NULL;
    assert_int_equal(lc_client_open(&cc, NULL, 0, &cl), LC_EINVAL); /* errbuf may be NULL */
    assert_null(cl);
}

static void test_consumer_calls_refuse_null(void **state)
{
    (void)state;
    lc_consumer_config_t k;
    lc_consumer_config_init(&k);
    lc_consumer_t *c = NULL;
    assert_int_equal(lc_consumer_open(NULL, &k, &c), LC_EINVAL);
    assert_null(c);
    assert_int_equal(lc_inprogress_add(NULL, 1), LC_EINVAL);
    assert_int_equal(lc_consumer_register(NULL), LC_EINVAL);
    assert_int_equal(lc_bye_send(NULL, 0), LC_EINVAL);
    assert_int_equal(lc_pull_send(NULL, 1, 1), LC_EINVAL);
    assert_int_equal(lc_ack_all_send(NULL, 1, 0, NULL), LC_EINVAL);
    lc_consumer_close(NULL);
    lc_client_close(NULL);
}

/* The binding helpers: every mirrored struct has its size, anything else 0; the plain-message
 * calls refuse what they cannot use. */
static void test_abi_and_msg_calls(void **state)
{
    (void)state;
    assert_int_equal(lc_abi_size("lc_consumer_config_t"), sizeof(lc_consumer_config_t));
    assert_int_equal(lc_abi_size("codec_work_item_t"), sizeof(codec_work_item_t));
    assert_int_equal(lc_abi_size("codec_batch_t"), sizeof(codec_batch_t));
    assert_int_equal(lc_abi_size("lc_client_config_t"), sizeof(lc_client_config_t));
    assert_int_equal(lc_abi_size("no_such_type"), 0);
    assert_int_equal(lc_abi_size(NULL), 0);
    uint8_t *data = NULL;
    size_t len = 0;
    char *s = NULL;
    lc_sub_t *sub = NULL;
    assert_int_equal(lc_msg_publish(NULL, "x", NULL, 0), LC_EINVAL);
    assert_int_equal(lc_msg_request(NULL, "x", NULL, 0, 100, &data, &len), LC_EINVAL);
    assert_int_equal(lc_msg_inbox_make(NULL, &s), LC_EINVAL);
    assert_int_equal(lc_sub_open(NULL, "x", &sub), LC_EINVAL);
    assert_int_equal(lc_sub_next(NULL, 1, &s, &data, &len), LC_EINVAL);
    assert_null(data);
    assert_null(s);
    assert_null(sub);
    lc_sub_close(NULL);
    lc_free(NULL);
}

/* The asynchronous calls refuse what they cannot use, before any NATS call. */
static void test_async_calls_refuse_null_and_defaults_are_zero(void **state)
{
    (void)state;
    lc_submit_async_config_t ac;
    memset(&ac, 0xab, sizeof(ac));
    lc_submit_async_config_init(&ac);
    assert_int_equal(ac.window, 0);
    assert_int_equal(ac.timeout_ms, 0);
    assert_int_equal(ac.retries, 0);
    assert_null(ac.done);
    assert_int_equal(lc_submit_async_open(NULL, &ac), LC_EINVAL);
    codec_work_item_t it = {.id = {(const uint8_t *)"x", 1}, .tokens = 1};
    assert_int_equal(lc_submit_async(NULL, "m", &it, 1, 0), LC_EINVAL);
    assert_int_equal(lc_submit_async_poll(NULL), LC_EINVAL);
    assert_int_equal(lc_submit_async_complete(NULL, 100), LC_EINVAL);
    assert_int_equal(lc_submit_async_pending(NULL), 0);
    codec_ack_t ack = {.batch_id = 1, .all = true};
    assert_int_equal(lc_ack_async_send(NULL, &ack), LC_EINVAL);
    assert_int_equal(lc_ack_async_all_send(NULL, 1), LC_EINVAL);
    assert_int_equal(lc_ack_async_complete(NULL, 100), LC_EINVAL);
    lc_consumer_config_t k;
    memset(&k, 0xab, sizeof(k));
    lc_consumer_config_init(&k);
    assert_int_equal(k.prefetch, 0);
    assert_int_equal(k.prefetch_expires_ms, 0);
    assert_int_equal(k.ack_window, 0);
    assert_null(k.ack_done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_vectors),
        cmocka_unit_test(test_shape_sign_many_components),
        cmocka_unit_test(test_shape_sign_rejects_null),
        cmocka_unit_test(test_shape_parse),
        cmocka_unit_test(test_status_texts),
        cmocka_unit_test(test_client_open_refuses_bad_config),
        cmocka_unit_test(test_consumer_calls_refuse_null),
        cmocka_unit_test(test_abi_and_msg_calls),
        cmocka_unit_test(test_async_calls_refuse_null_and_defaults_are_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
