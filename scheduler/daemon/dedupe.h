/*
 * dedupe.h - the window of recently accepted item ids that makes a retried submit safe.
 *
 * Ownership: the window is caller memory (dedupe_init/fini); ids passed in are borrowed for the
 * call (only their hashes are kept).
 */
#ifndef LANESCHED_DAEMON_DEDUPE_H
#define LANESCHED_DAEMON_DEDUPE_H

#include "common/map.h"
#include "scheduler/daemon/daemon.h"

typedef struct {
    map_t seen; /* (XXH64 of id, XXH64 seeded) -> expiry, as a pointer */
    struct dedupe_entry {
        map_key_t key;
        uint64_t expires_ns;
    } * ring;
    size_t head, len, cap;
    uint64_t window_ns;
} dedupe_t;

void dedupe_init(dedupe_t *d, uint64_t window_ns);
void dedupe_fini(dedupe_t *d);
/* 1 if the id was accepted within the window. */
int dedupe_contains(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns);
daemon_status_t dedupe_add(dedupe_t *d, const uint8_t *id, size_t len, uint64_t now_ns);

#endif
