/*
 * keyfile.c - the credentials, certificate and key files checked before nats.c reads them, and
 * the certificate and key paired (keyfile.h).
 *
 * Invariants:
 *   1. Nothing is opened: a FIFO's open would block until a writer came, which is the fault
 *      guarded against; stat() and access() decide.
 *
 * Rejected: reading the file here and handing nats.c the bytes
 * (natsOptions_SetUserCredentialsCallbacks): one more code path per file kind, for what a size
 * and type check already bounds.
 */
#include "common/keyfile.h"

#include "common/text.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

STATUS_STR(keyfile_status_str, keyfile_status_t, KEYFILE_STATUS_MAP, "unknown keyfile status")

keyfile_status_t keyfile_check(const char *path, char *err, size_t cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || access(path, R_OK) != 0) {
        snprintf(err, cap, "%s: %s", keyfile_status_str(KEYFILE_EUNREADABLE), strerror(errno));
        return KEYFILE_EUNREADABLE;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, cap, "%s (%s)", keyfile_status_str(KEYFILE_ENOTREGULAR),
                 S_ISDIR(sb.st_mode)    ? "a directory"
                 : S_ISFIFO(sb.st_mode) ? "a FIFO"
                 : S_ISSOCK(sb.st_mode) ? "a socket"
                                        : "a device");
        return KEYFILE_ENOTREGULAR;
    }
    if ((unsigned long long)sb.st_size > KEYFILE_MAX_BYTES) {
        snprintf(err, cap, "%lld bytes, %s (at most %u)", (long long)sb.st_size,
                 keyfile_status_str(KEYFILE_ETOOBIG), KEYFILE_MAX_BYTES);
        return KEYFILE_ETOOBIG;
    }
    return KEYFILE_OK;
}

keyfile_status_t keyfile_check_list(const char *const labels[], const char *const paths[], size_t n,
                                    char *err, size_t cap)
{
    for (size_t i = 0; i < n; i++) {
        char why[160];
        keyfile_status_t st =
            text_given(paths[i]) ? keyfile_check(paths[i], why, sizeof(why)) : KEYFILE_OK;
        if (st != KEYFILE_OK) {
            snprintf(err, cap, "%s %s: %s", labels[i], paths[i], why);
            return st;
        }
    }
    return KEYFILE_OK;
}

keyfile_status_t keyfile_check_pair(const char *cert_label, const char *cert, const char *key_label,
                                    const char *key, char *err, size_t cap)
{
    if (text_given(cert) == text_given(key))
        return KEYFILE_OK;
    keyfile_status_t st = text_given(cert) ? KEYFILE_ECERT_ALONE : KEYFILE_EKEY_ALONE;
    snprintf(err, cap, "%s without %s: %s", st == KEYFILE_ECERT_ALONE ? cert_label : key_label,
             st == KEYFILE_ECERT_ALONE ? key_label : cert_label, keyfile_status_str(st));
    return st;
}

keyfile_status_t keyfile_conn_check(const char *const labels[KEYFILE_CONN_FILES],
                                    const char *const paths[KEYFILE_CONN_FILES], char *err,
                                    size_t cap)
{
    keyfile_status_t st =
        keyfile_check_pair(labels[KEYFILE_TLS_CERT], paths[KEYFILE_TLS_CERT],
                           labels[KEYFILE_TLS_KEY], paths[KEYFILE_TLS_KEY], err, cap);
    return st != KEYFILE_OK ? st : keyfile_check_list(labels, paths, KEYFILE_CONN_FILES, err, cap);
}
