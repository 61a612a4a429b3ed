/*
 * keyfile.h - the checks of the credentials, certificate and key files a flag names, before
 * nats.c reads them.
 *
 * Each file: nats.c 3.4 reads such a file whole with no bound and no timeout, so a FIFO named
 * there would block a start forever (deaf to SIGTERM, past --connect-wait-ms) and a device such
 * as /dev/zero grow the process without bound.
 *
 * The pair: a TLS client certificate chain and its private key are one identity, loaded together
 * (natsOptions_LoadCertificatesChain). Given a key alone, a caller passes nothing to nats.c and
 * connects without the identity, without a word; a certificate alone nats.c refuses as "Invalid
 * Argument", naming neither. Every program that takes them (the daemon, the C client,
 * lanesched-ctl) asks this one rule, before anything connects.
 *
 * A path is set when it is given (common/text.h: not NULL and not empty), for every function
 * here.
 *
 * Ownership: every pointer is borrowed for the call.
 */
#ifndef LANESCHED_COMMON_KEYFILE_H
#define LANESCHED_COMMON_KEYFILE_H

#include "common/status.h"

#include <stddef.h>

#define KEYFILE_STATUS_MAP(X)                                                                   \
    X(KEYFILE_OK, "ok")                                                                         \
    X(KEYFILE_EUNREADABLE, "cannot read it")                                                    \
    X(KEYFILE_ENOTREGULAR, "not a regular file")                                                \
    X(KEYFILE_ETOOBIG, "more than a credentials or key file holds")                             \
    X(KEYFILE_ECERT_ALONE, "a client certificate is used only with its private key; give both " \
                           "or neither")                                                        \
    X(KEYFILE_EKEY_ALONE, "a client key is used only with its certificate chain; give both or " \
                          "neither")

STATUS_ENUM(keyfile_status_t, KEYFILE_STATUS_MAP, KEYFILE_STATUS_COUNT);

/* Static storage; never NULL. */
const char *keyfile_status_str(keyfile_status_t status);

/* A NATS credentials file is about 1 KB and a PEM bundle tens of KB: 1 MiB bounds both with room.
 */
#define KEYFILE_MAX_BYTES (1u << 20)

/* KEYFILE_OK when `path` is a regular file (symbolic links followed) of at most
 * KEYFILE_MAX_BYTES that this process can read; else the status, with err (cap bytes) saying
 * what it is instead. */
keyfile_status_t keyfile_check(const char *path, char *err /* out */, size_t cap);

/* keyfile_check of each of the n files whose paths[i] is set, labels[i] naming it: KEYFILE_OK
 * when all pass; the status of the first that fails, with err "LABEL PATH: why". */
keyfile_status_t keyfile_check_list(const char *const labels[], const char *const paths[], size_t n,
                                    char *err /* out */, size_t cap);

/* The pairing rule above: KEYFILE_OK when the certificate and the key are both set or both
 * unset; else KEYFILE_ECERT_ALONE or KEYFILE_EKEY_ALONE, with err "LABEL without LABEL: why"
 * (the labels name the two as the caller's user knows them: flags, variables or fields). */
keyfile_status_t keyfile_check_pair(const char *cert_label, const char *cert, const char *key_label,
                                    const char *key, char *err /* out */, size_t cap);

/* The files of one NATS connection, indexing the arrays keyfile_conn_check takes. */
enum { KEYFILE_CREDS, KEYFILE_TLS_CA, KEYFILE_TLS_CERT, KEYFILE_TLS_KEY, KEYFILE_CONN_FILES };

/* What every program that connects asks before nats.c reads a file: keyfile_check_pair of the
 * certificate and key, then keyfile_check_list of all four, labels[i] naming paths[i]. */
keyfile_status_t keyfile_conn_check(const char *const labels[KEYFILE_CONN_FILES],
                                    const char *const paths[KEYFILE_CONN_FILES],
                                    char *err /* out */, size_t cap);

#endif
