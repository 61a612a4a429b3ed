/*
 * keyfile.h - the check of a credentials, certificate or key file a flag names, before nats.c
 * reads it: nats.c 3.4 reads such a file whole with no bound and no timeout, so a FIFO named
 * there would block a start forever (deaf to SIGTERM, past --connect-wait-ms) and a device such
 * as /dev/zero grow the process without bound.
 *
 * Ownership: every pointer is borrowed for the call.
 */
#ifndef LANESCHED_COMMON_KEYFILE_H
#define LANESCHED_COMMON_KEYFILE_H

#include <stddef.h>

/* A NATS credentials file is about 1 KB and a PEM bundle tens of KB: 1 MiB bounds both with room.
 */
#define KEYFILE_MAX_BYTES (1u << 20)

/* 0 when `path` is a regular file (symbolic links followed) of at most KEYFILE_MAX_BYTES that
 * this process can read; -1 with err (cap bytes) saying what it is instead. */
int keyfile_check(const char *path, char *err /* out */, size_t cap);

/* keyfile_check of each of the n files whose paths[i] is set (not NULL, not empty), labels[i]
 * naming it: 0 when all pass; -1 at the first that fails, with err "LABEL PATH: why". */
int keyfile_check_list(const char *const labels[], const char *const paths[], size_t n,
                       char *err /* out */, size_t cap);

#endif
