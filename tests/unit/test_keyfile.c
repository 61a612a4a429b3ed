/*
 * test_keyfile.c - common/keyfile.c: a file a flag names passes only when it is a readable
 * regular file of at most KEYFILE_MAX_BYTES, each refusal with its status and its reason, a FIFO
 * never opened; a list names the first failure by its label; a TLS client certificate and its
 * key pass only together, an empty path counting as unset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/keyfile.h"
#include "support/fs.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char dir[64];
    char file[96]; /* a small regular file */
    char fifo[96]; /* a FIFO no one writes */
    char big[96];  /* one byte past KEYFILE_MAX_BYTES (sparse) */
    char absent[96];
} rig_t;

static int rig_setup(void **state)
{
    rig_t *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    snprintf(r->dir, sizeof(r->dir), "/tmp/lanes-test-keyfile.XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    snprintf(r->file, sizeof(r->file), "%s/client.pem", r->dir);
    snprintf(r->fifo, sizeof(r->fifo), "%s/fifo", r->dir);
    snprintf(r->big, sizeof(r->big), "%s/big.pem", r->dir);
    snprintf(r->absent, sizeof(r->absent), "%s/absent.pem", r->dir);
    int fd = open(r->file, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "-----BEGIN-----\n", 16), 16);
    close(fd);
    fd = open(r->big, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)KEYFILE_MAX_BYTES + 1), 0);
    close(fd);
    assert_int_equal(mkfifo(r->fifo, 0600), 0);
    *state = r;
    return 0;
}

static int rig_teardown(void **state)
{
    rig_t *r = *state;
    assert_int_equal(fs_remove_tree(r->dir), 0);
    free(r);
    return 0;
}

static void expect_file(const char *path, keyfile_status_t want, const char *says)
{
    char err[256] = "";
    keyfile_status_t st = keyfile_check(path, err, sizeof(err));
    if (st != want)
        fail_msg("%s: %s, not %s (%s)", path, keyfile_status_str(st), keyfile_status_str(want),
                 err);
    if (says != NULL && strstr(err, says) == NULL)
        fail_msg("%s: '%s' does not say '%s'", path, err, says);
}

static void test_each_kind_of_file(void **state)
{
    rig_t *r = *state;
    expect_file(r->file, KEYFILE_OK, NULL);
    expect_file(r->absent, KEYFILE_EUNREADABLE, "cannot read it: No such file");
    expect_file(r->dir, KEYFILE_ENOTREGULAR, "not a regular file (a directory)");
    expect_file(r->fifo, KEYFILE_ENOTREGULAR, "not a regular file (a FIFO)"); /* not opened */
    expect_file("/dev/zero", KEYFILE_ENOTREGULAR, "not a regular file (a device)");
    expect_file(r->big, KEYFILE_ETOOBIG, "1048577 bytes, more than a credentials or key file");
}

static void test_a_list_names_its_first_failure(void **state)
{
    rig_t *r = *state;
    static const char *const labels[] = {"--creds", "--tls-ca", "--tls-cert", "--tls-key"};
    char err[320] = "";
    const char *const fine[] = {NULL, "", r->file, r->file}; /* unset and empty are skipped */
    assert_int_equal(keyfile_check_list(labels, fine, 4, err, sizeof(err)), KEYFILE_OK);
    const char *const bad[] = {r->file, r->fifo, r->big, NULL};
    assert_int_equal(keyfile_check_list(labels, bad, 4, err, sizeof(err)), KEYFILE_ENOTREGULAR);
    char want[200];
    snprintf(want, sizeof(want), "--tls-ca %s: not a regular file (a FIFO)", r->fifo);
    assert_string_equal(err, want);
}

/* A connection's files: the pairing first (it names both), then each file. */
static void test_a_connection_checks_the_pair_then_each_file(void **state)
{
    rig_t *r = *state;
    static const char *const labels[KEYFILE_CONN_FILES] = {"--creds", "--tls-ca", "--tls-cert",
                                                           "--tls-key"};
    char err[320] = "";
    const char *const fine[KEYFILE_CONN_FILES] = {r->file, NULL, r->file, r->file};
    assert_int_equal(keyfile_conn_check(labels, fine, err, sizeof(err)), KEYFILE_OK);
    const char *const alone[KEYFILE_CONN_FILES] = {r->fifo, NULL, NULL, r->file};
    assert_int_equal(keyfile_conn_check(labels, alone, err, sizeof(err)), KEYFILE_EKEY_ALONE);
    assert_non_null(strstr(err, "--tls-key without --tls-cert"));
    const char *const fifo[KEYFILE_CONN_FILES] = {r->fifo, NULL, r->file, r->file};
    assert_int_equal(keyfile_conn_check(labels, fifo, err, sizeof(err)), KEYFILE_ENOTREGULAR);
    assert_non_null(strstr(err, "--creds"));
}

static void expect_pair(const char *cert, const char *key, keyfile_status_t want, const char *text)
{
    char err[256] = "untouched";
    keyfile_status_t st =
        keyfile_check_pair("--tls-cert", cert, "LANESCHED_TLS_KEY", key, err, sizeof(err));
    assert_int_equal(st, want);
    assert_string_equal(err, text);
}

static void test_a_certificate_and_its_key_go_together(void **state)
{
    rig_t *r = *state;
    expect_pair(NULL, NULL, KEYFILE_OK, "untouched");
    expect_pair("", "", KEYFILE_OK, "untouched");
    expect_pair(r->file, r->file, KEYFILE_OK, "untouched");
    expect_pair(r->file, NULL, KEYFILE_ECERT_ALONE,
                "--tls-cert without LANESCHED_TLS_KEY: a client certificate is used only with "
                "its private key; give both or neither");
    expect_pair(r->file, "", KEYFILE_ECERT_ALONE,
                "--tls-cert without LANESCHED_TLS_KEY: a client certificate is used only with "
                "its private key; give both or neither");
    expect_pair(NULL, r->file, KEYFILE_EKEY_ALONE,
                "LANESCHED_TLS_KEY without --tls-cert: a client key is used only with its "
                "certificate chain; give both or neither");
    expect_pair("", r->absent, KEYFILE_EKEY_ALONE, /* the pairing, not the file, is checked */
                "LANESCHED_TLS_KEY without --tls-cert: a client key is used only with its "
                "certificate chain; give both or neither");
}

static void test_every_status_has_its_text(void **state)
{
    (void)state;
    assert_string_equal(keyfile_status_str(KEYFILE_OK), "ok");
    for (int s = 1; s < KEYFILE_STATUS_COUNT; s++) {
        const char *text = keyfile_status_str((keyfile_status_t)s);
        assert_true(strlen(text) > 0);
        assert_string_not_equal(text, "unknown keyfile status");
    }
    assert_string_equal(keyfile_status_str(KEYFILE_STATUS_COUNT), "unknown keyfile status");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_kind_of_file, rig_setup, rig_teardown),
        cmocka_unit_test_setup_teardown(test_a_list_names_its_first_failure, rig_setup,
                                        rig_teardown),
        cmocka_unit_test_setup_teardown(test_a_certificate_and_its_key_go_together, rig_setup,
                                        rig_teardown),
        cmocka_unit_test_setup_teardown(test_a_connection_checks_the_pair_then_each_file, rig_setup,
                                        rig_teardown),
        cmocka_unit_test(test_every_status_has_its_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
