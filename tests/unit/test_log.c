/*
 * test_log.c - common/log.c: credentials never reach a line (URL passwords and tokens, the
 * registered secrets), the JSON format is one valid object per line whatever the message holds,
 * a client-chosen name can neither forge a line nor send a terminal escape (text, JSON, sink),
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

/* A budget writes LOG_BUDGET_LINES lines a second; the next second's first line allowed is
 * preceded by one line counting those left out, and a quiet second starts afresh. */
static void test_a_budget_bounds_lines_per_second_and_counts_the_rest(void **state)
{
    (void)state;
    capture_t c = {0};
    log_sink_set(capture, &c);
    log_budget_t b = {0};
    uint64_t t = 5000000000ull;
    unsigned allowed = 0;
    for (unsigned i = 0; i < LOG_BUDGET_LINES + 7; i++)
        allowed += (unsigned)log_budget_allow(&b, LOG_INFO, t + i * 1000ull, "consumers");
    assert_int_equal(allowed, LOG_BUDGET_LINES);
    assert_int_equal(c.n, 0); /* the budget writes nothing of its own while it allows */
    assert_true(log_budget_allow(&b, LOG_INFO, t + 1000000000ull, "consumers"));
    assert_int_equal(c.n, 1);
    assert_int_equal(c.level, LOG_WARN);
    assert_non_null(strstr(c.line, "7 lines (consumers) left out"));
    assert_true(log_budget_allow(&b, LOG_INFO, t + 3000000000ull, "consumers"));
    assert_int_equal(c.n, 1); /* nothing was left out since */
    /* a flood's last second is told by the timer's flush, once its second is over */
    for (unsigned i = 0; i < LOG_BUDGET_LINES + 3; i++)
        (void)log_budget_allow(&b, LOG_INFO, t + 5000000000ull + i, "consumers");
    log_budget_flush(&b, t + 5000000100ull, "consumers");
    assert_int_equal(c.n, 1); /* its second is not over */
    log_budget_flush(&b, t + 6000000000ull, "consumers");
    assert_int_equal(c.n, 2);
    assert_non_null(strstr(c.line, "3 lines (consumers) left out"));
    /* lines the level drops use no budget */
    log_budget_t quiet = {0};
    log_level_set(LOG_WARN);
    for (unsigned i = 0; i < 2 * LOG_BUDGET_LINES; i++)
        assert_false(log_budget_allow(&quiet, LOG_INFO, t, "consumers"));
    assert_int_equal(quiet.dropped, 0);
    assert_true(log_budget_allow(&quiet, LOG_WARN, t, "consumers"));
    log_level_set(LOG_INFO);
    log_sink_set(NULL, NULL);
}

/* Runs one log_write in `format` with stderr redirected to a file; returns the whole output. */
static void stderr_text(int format, const char *msg, char *out, size_t cap)
{
    char path[] = "/tmp/lanes-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(dup2(fd, 2) >= 0);
    log_format_set(format);
    log_write(LOG_WARN, "%s", msg);
    log_format_set(LOG_FORMAT_TEXT);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
    unlink(path);
}

static void json_line(const char *msg, char *out, size_t cap)
{
    stderr_text(LOG_FORMAT_JSON, msg, out, cap);
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

/* A consumer's Register.name as the daemon logs it: a newline followed by a forged line, an ESC
 * sequence that clears the screen, a C1 CSI, DEL and a bidi override. */
#define HOSTILE_NAME                                                                       \
    "gpu\n2026-01-01T00:00:00.000Z error forged line\r\x1b[2J\x1b]0;pwned\x07 c1 \xc2\x9b" \
    "31m "                                                                                 \
    "del \x7f bidi \xe2\x80\xae back\\slash caf\xc3\xa9 bad \xff"

static void test_text_lines_escape_every_control_byte(void **state)
{
    (void)state;
    char out[8192];
    stderr_text(LOG_FORMAT_TEXT, "consumer 1 (" HOSTILE_NAME ") registered", out, sizeof(out));
    /* one line: the only newline is the terminator */
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    for (const unsigned char *p = (const unsigned char *)out; p < (const unsigned char *)nl; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fail_msg("raw control byte 0x%02x in the text line: %s", *p, out);
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            fail_msg("raw C1 control in the text line: %s", out);
        if (p[0] == 0xe2 && p[1] == 0x80 && p[2] == 0xae)
            fail_msg("raw bidi override in the text line: %s", out);
    }
    assert_non_null(strstr(out, "consumer 1 (gpu\\n2026-01-01T00:00:00.000Z error forged line\\r"
                                "\\x1b[2J\\x1b]0;pwned\\x07 c1 \\u009b31m del \\x7f bidi "
                                "\\u202e back\\\\slash caf\xc3\xa9 bad \\xff) registered\n"));
}

static void test_json_lines_escape_every_control(void **state)
{
    (void)state;
    char line[8192];
    json_line(HOSTILE_NAME, line, sizeof(line));
    assert_non_null(strchr(line, '\n'));
    assert_int_equal(strchr(line, '\n')[1], '\0');
    json_error_t err;
    json_t *doc = json_loads(line, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, line);
    json_decref(doc);
    /* escaped in the line itself, not only valid JSON: a reader that prints the raw line (tail,
     * a terminal) sees no control either */
    assert_non_null(strstr(line, "\\u001b[2J"));
    assert_non_null(strstr(line, "\\u009b31m"));
    assert_non_null(strstr(line, "\\u007f"));
    assert_non_null(strstr(line, "\\u202e"));
    assert_null(strstr(line, "\xc2\x9b"));
    assert_null(strstr(line, "\x7f"));
}

static void test_the_sink_sees_escaped_lines(void **state)
{
    (void)state;
    capture_t c = {0};
    log_sink_set(capture, &c);
    log_write(LOG_ERROR, "name %s", "a\nb\x1b");
    log_sink_set(NULL, NULL);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.line, "name a\\nb\\x1b");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_passwords_and_tokens_are_masked),
        cmocka_unit_test(test_registered_secrets_are_masked_anywhere),
        cmocka_unit_test(test_a_long_message_is_cut_not_overrun),
        cmocka_unit_test(test_the_sink_sees_redacted_lines_at_or_above_the_level),
        cmocka_unit_test(test_a_budget_bounds_lines_per_second_and_counts_the_rest),
        cmocka_unit_test(test_json_lines_are_valid_whatever_the_message),
        cmocka_unit_test(test_text_lines_escape_every_control_byte),
        cmocka_unit_test(test_json_lines_escape_every_control),
        cmocka_unit_test(test_the_sink_sees_escaped_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
