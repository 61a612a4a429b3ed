/*
 * keyfile.c - a credentials, certificate or key file checked before nats.c reads it (keyfile.h).
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

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int keyfile_check(const char *path, char *err, size_t cap)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || access(path, R_OK) != 0) {
        snprintf(err, cap, "cannot read it: %s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, cap, "not a regular file (%s)",
                 S_ISDIR(sb.st_mode)    ? "a directory"
                 : S_ISFIFO(sb.st_mode) ? "a FIFO"
                 : S_ISSOCK(sb.st_mode) ? "a socket"
                                        : "a device");
        return -1;
    }
    if ((unsigned long long)sb.st_size > KEYFILE_MAX_BYTES) {
        snprintf(err, cap, "%lld bytes, more than a credentials or key file holds (at most %u)",
                 (long long)sb.st_size, KEYFILE_MAX_BYTES);
        return -1;
    }
    return 0;
}

int keyfile_check_list(const char *const labels[], const char *const paths[], size_t n, char *err,
                       size_t cap)
{
    for (size_t i = 0; i < n; i++) {
        char why[160];
        if (paths[i] != NULL && paths[i][0] != '\0' &&
            keyfile_check(paths[i], why, sizeof(why)) != 0) {
            snprintf(err, cap, "%s %s: %s", labels[i], paths[i], why);
            return -1;
        }
    }
    return 0;
}
