/*
 * test_log.c - common/log.c: credentials never reach a line (URL passwords and tokens, the
 * registered secrets), the JSON format is one valid object per line whatever the message holds,
 * and the level filter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void expect_redacted(const char *in, const char *want)
{
    char out[512];
    log_redact(in, out, sizeof(out));
    assert_string_equal(out, want);
}

static void test_url_passwords_and_tokens_are_masked(void **state)
{
    (void)state;
    expect_redacted("cannot connect to NATS at nats://alice:s3cret@host:4222: No server",
                    "cannot connect to NATS at nats://alice:***@host:4222: No server");
    expect_redacted("nats://tok3n@a:1,tls://bob:pw@b:2 and nats://c:3",
                    "nats://***@a:1,tls://bob:***@b:2 and nats://c:3");
    expect_redacted("http://x/a@b is a path, not a user", "http://x/a@b is a path, not a user");
    expect_redacted("nats://[::1]:4222", "nats://[::1]:4222");
    expect_redacted("no url here: a@b", "no url here: a@b");
}

static void test_registered_secrets_are_masked_anywhere(void **state)
{
    (void)state;
    assert_int_equal(log_secret_add("hunter22"), 0);
    assert_int_equal(log_secret_add("abc"), -1); /* too short to mask safely */
    expect_redacted("token hunter22 refused (hunter22)", "token *** refused (***)");
    expect_redacted("abc stays", "abc stays");
}

static void test_a_long_message_is_cut_not_overrun(void **state)
{
    (void)state;
    char out[16];
    log_redact("nats://alice:s3cret@host:4222 and more", out, sizeof(out));
    assert_string_equal(out, "nats://alice:**");
}

typedef struct {
    int n;
    int level;
    char line[256];
} capture_t;

static void capture(void *ctx, int level, const char *line)
{
    capture_t *c = ctx;
    c->n++;
    c->level = level;
    snprintf(c->line, sizeof(c->line), "%s", line);
}

static void test_the_sink_sees_redacted_lines_at_or_above_the_level(void **state)
{
    (void)state;
    capture_t c = {0};
    log_sink_set(capture, &c);
    log_level_set(LOG_WARN);
    log_write(LOG_INFO, "dropped");
    assert_int_equal(c.n, 0);
    log_write(LOG_ERROR, "at %s", "nats://u:p4ss@h");
    assert_int_equal(c.n, 1);
    assert_int_equal(c.level, LOG_ERROR);
    assert_string_equal(c.line, "at nats://u:***@h");
    log_notice("lanesched: ready"); /* whatever the level */
    assert_int_equal(c.n, 2);
    log_sink_set(NULL, NULL);
    log_level_set(LOG_INFO);
}

/* Runs one log_write in json format with stderr redirected to a file; returns the line. */
static void json_line(const char *msg, char *out, size_t cap)
{
    char path[] = "/tmp/lanes-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(dup2(fd, 2) >= 0);
    log_format_set(LOG_FORMAT_JSON);
    log_write(LOG_WARN, "%s", msg);
    log_format_set(LOG_FORMAT_TEXT);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    assert_non_null(fgets(out, (int)cap, f));
    fclose(f);
    unlink(path);
}

static void test_json_lines_are_valid_whatever_the_message(void **state)
{
    (void)state;
    char line[8192];
    json_line("quote \" backslash \\ tab \t bad \xff utf-8 \xc3\xa9 pw nats://a:b@h", line,
              sizeof(line));
    json_error_t err;
    json_t *doc = json_loads(line, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, line);
    assert_string_equal(json_string_value(json_object_get(doc, "level")), "warn");
    assert_non_null(json_string_value(json_object_get(doc, "time")));
    assert_string_equal(json_string_value(json_object_get(doc, "msg")),
                        "quote \" backslash \\ tab \t bad \xef\xbf\xbd utf-8 \xc3\xa9 pw "
                        "nats://a:***@h");
    json_decref(doc);
    int fmt = -1;
    assert_int_equal(log_format_parse("json", &fmt), 0);
    assert_int_equal(fmt, LOG_FORMAT_JSON);
    assert_int_equal(log_format_parse("xml", &fmt), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_passwords_and_tokens_are_masked),
        cmocka_unit_test(test_registered_secrets_are_masked_anywhere),
        cmocka_unit_test(test_a_long_message_is_cut_not_overrun),
        cmocka_unit_test(test_the_sink_sees_redacted_lines_at_or_above_the_level),
        cmocka_unit_test(test_json_lines_are_valid_whatever_the_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
