/*
 * test_utf8.c - common/utf8.c: the validator against the well-formed table (overlong forms,
 * surrogates, values past U+10FFFF, truncated sequences), each escaping mode on every kind of
 * control, and cutting at a whole escape when the buffer is short.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/utf8.h"

#include <string.h>

static size_t seq(const char *s)
{
    return utf8_seq_len(s, strlen(s));
}

static void test_well_formed_sequences_only(void **state)
{
    (void)state;
    assert_int_equal(seq("a"), 1);
    assert_int_equal(seq("\xc3\xa9"), 2);                 /* U+00E9 */
    assert_int_equal(seq("\xe2\x82\xac"), 3);             /* U+20AC */
    assert_int_equal(seq("\xf0\x9f\x98\x80"), 4);         /* U+1F600 */
    assert_int_equal(seq("\xf4\x8f\xbf\xbf"), 4);         /* U+10FFFF */
    assert_int_equal(seq("\xc0\xaf"), 0);                 /* overlong '/' */
    assert_int_equal(seq("\xc1\xbf"), 0);                 /* overlong */
    assert_int_equal(seq("\xe0\x9f\xbf"), 0);             /* overlong 3-byte */
    assert_int_equal(seq("\xf0\x8f\xbf\xbf"), 0);         /* overlong 4-byte */
    assert_int_equal(seq("\xed\xa0\x80"), 0);             /* surrogate U+D800 */
    assert_int_equal(seq("\xf4\x90\x80\x80"), 0);         /* U+110000 */
    assert_int_equal(seq("\xf5\x80\x80\x80"), 0);         /* bad lead */
    assert_int_equal(seq("\x80"), 0);                     /* lone continuation */
    assert_int_equal(utf8_seq_len("\xe2\x82\xac", 2), 0); /* truncated: never reads past n */
    assert_int_equal(utf8_seq_len("a", 0), 0);
    assert_true(utf8_valid("caf\xc3\xa9 \xe2\x82\xac", 9));
    assert_false(utf8_valid("caf\xc3", 4));
    assert_true(utf8_valid("", 0));
}

static void test_controls(void **state)
{
    (void)state;
    assert_true(utf8_is_control(0x00));
    assert_true(utf8_is_control(0x1b));
    assert_true(utf8_is_control(0x7f));
    assert_true(utf8_is_control(0x85));
    assert_true(utf8_is_control(0x9b));
    assert_true(utf8_is_control(0x2028));
    assert_true(utf8_is_control(0x202e));
    assert_true(utf8_is_control(0x2067));
    assert_false(utf8_is_control(' '));
    assert_false(utf8_is_control(0xa0));
    assert_false(utf8_is_control(0xe9));
    assert_false(utf8_is_control(0x20ac));
}

static void expect(utf8_mode_t mode, const char *in, size_t n, const char *want)
{
    char out[256];
    size_t w = utf8_escape(in, n, mode, out, sizeof(out));
    assert_string_equal(out, want);
    assert_int_equal(w, strlen(want));
    assert_true(strlen(want) + 1 <= UTF8_ESCAPED_MAX(n));
}

#define ALL                                                           \
    "a\n\r\t\x1b\x7f\xc2\x85\xe2\x80\xa8\xe2\x81\xa6\"\\\xc3\xa9\xff" \
    "z"
#define ALL_N (sizeof(ALL) - 1)

static void test_each_mode(void **state)
{
    (void)state;
    expect(UTF8_TEXT, ALL, ALL_N,
           "a\\n\\r\\t\\x1b\\x7f\\u0085\\u2028\\u2066\"\\\\\xc3\xa9\\xff"
           "z");
    expect(UTF8_JSON, ALL, ALL_N,
           "a\\n\\r\\t\\u001b\\u007f\\u0085\\u2028\\u2066\\\"\\\\\xc3\xa9\\ufffdz");
    expect(UTF8_PROM, ALL, ALL_N,
           "a\\n\r\t\x1b\x7f\xc2\x85\xe2\x80\xa8\xe2\x81\xa6\\\"\\\\\xc3\xa9\xef\xbf\xbd"
           "z");
    expect(UTF8_REPLACE, ALL, ALL_N,
           "a\n\r\t\x1b\x7f\xc2\x85\xe2\x80\xa8\xe2\x81\xa6\"\\\xc3\xa9\xef\xbf\xbd"
           "z");
    /* a NUL inside the bytes given is a control too */
    expect(UTF8_TEXT, "a\0b", 3, "a\\x00b");
    expect(UTF8_JSON, "a\0b", 3, "a\\u0000b");
}

static void test_cut_between_whole_escapes(void **state)
{
    (void)state;
    char out[6];
    /* "ab" fits, "\x1b" (4) would not: cut before it, never half of it */
    assert_int_equal(utf8_escape("ab\x1b"
                                 "c",
                                 4, UTF8_TEXT, out, sizeof(out)),
                     2);
    assert_string_equal(out, "ab");
    /* a 2-byte character is never split either */
    assert_int_equal(utf8_escape("abcd\xc3\xa9", 6, UTF8_TEXT, out, sizeof(out)), 4);
    assert_string_equal(out, "abcd");
    assert_int_equal(utf8_escape("x", 1, UTF8_TEXT, out, 0), 0);
    assert_int_equal(utf8_escape("x", 1, UTF8_TEXT, out, 1), 0);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed_sequences_only),
        cmocka_unit_test(test_controls),
        cmocka_unit_test(test_each_mode),
        cmocka_unit_test(test_cut_between_whole_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
