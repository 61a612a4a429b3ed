/*
 * test_url.c - common/url.c: the server lists nats.c 3.4 handles as written pass, every other
 * one is refused with its own reason and never with its password; tls:// is reported.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/url.h"

#include <string.h>

static void expect_ok(const char *list, int want_flags)
{
    char err[256] = "";
    int flags = -1;
    if (url_list_check(list, err, sizeof(err), &flags) != 0)
        fail_msg("'%s' refused: %s", list, err);
    assert_int_equal(flags, want_flags);
}

static void expect_bad(const char *list, const char *why)
{
    char err[256] = "";
    int flags = 77;
    assert_int_equal(url_list_check(list, err, sizeof(err), &flags), -1);
    assert_int_equal(flags, 77); /* untouched */
    if (strstr(err, why) == NULL)
        fail_msg("'%s': '%s' does not say '%s'", list, err, why);
}

static void test_urls_nats_c_handles_pass(void **state)
{
    (void)state;
    expect_ok("nats://127.0.0.1:4222", 0);
    expect_ok("NATS://nats.example:4222", 0);
    expect_ok("127.0.0.1:4222", 0);
    expect_ok("localhost", 0);
    expect_ok("nats://nats", 0);
    expect_ok("nats://alice:s3cret@host-1.example:4222/", 0);
    expect_ok("nats://[::1]:4222", 0);
    expect_ok("nats://[fe80::1%eth0]", 0);
    expect_ok("tls://nats.example:4443", URL_TLS);
    expect_ok("nats://a:1, tls://b:2 ,c:3", URL_TLS);
}

static void test_everything_else_is_refused_with_its_reason(void **state)
{
    (void)state;
    expect_bad("htp://host:4222", "unknown scheme 'htp'");
    expect_bad("http://host:4222", "unknown scheme 'http'");
    expect_bad("not a url", "a space or a control character");
    expect_bad("ws://host:8080", "WebSocket is not supported");
    expect_bad("wss://host:443", "WebSocket is not supported");
    expect_bad("nats://host:abc", "the port is not a number");
    expect_bad("nats://host:99999", "the port is not a number");
    expect_bad("nats://host:0", "the port is not a number");
    expect_bad("nats://host:", "the port is empty");
    expect_bad("nats://:4222", "no host");
    expect_bad("nats://ho$t:4222", "not a DNS name");
    expect_bad("nats://host:4222/path", "no path");
    expect_bad("nats://a:1,,nats://b:2", "empty URL");
    expect_bad("", "no NATS server URL");
    expect_bad("nats://a:1,htp://b:2", "'htp://b:2'");
}

static void test_errors_never_show_a_password(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(url_list_check("htp://alice:hunter22@host:4222", err, sizeof(err), NULL), -1);
    assert_null(strstr(err, "hunter22"));
    assert_non_null(strstr(err, "htp://***@host:4222"));
    assert_int_equal(url_list_check("nats://t0ken-99@h:x", err, sizeof(err), NULL), -1);
    assert_null(strstr(err, "t0ken-99"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls_nats_c_handles_pass),
        cmocka_unit_test(test_everything_else_is_refused_with_its_reason),
        cmocka_unit_test(test_errors_never_show_a_password),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
