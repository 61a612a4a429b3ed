/*
 * store_int.h - private to store/: the backend vtable and the fields every backend shares.
 * Never included from outside the module, except by the store's unit tests (test_crc32c.c,
 * test_store_check.c), which reach the pieces no public call shows.
 */
#ifndef LANESCHED_STORE_INT_H
#define LANESCHED_STORE_INT_H

#include "store/store.h"

#include <sys/types.h>

/* The part of a lane queue every backend keeps; backends embed it first. */
struct store_queue {
    uint64_t id;
    uint64_t queued_items;
    uint64_t queued_tokens;
    uint64_t pending_items;
};

/* A backend's half of each store.h call, reached through store.c after its argument checks;
 * pointers and ownership as the store.h call says. */
struct store_ops {
    int (*queue_oldest)(const store_t *store, const store_queue_t *queue, uint64_t *out);
    store_status_t (*queue_scan)(store_t *store, store_queue_t *queue, store_scan_fn fn, void *ctx);
    store_status_t (*flush)(store_t *store);
    uint64_t (*unflushed_bytes)(const store_t *store);
    store_status_t (*queue_target_set)(store_t *store, store_queue_t *queue, uint32_t target);
    int (*queue_next)(store_t *store, store_queue_t *prev, store_queue_t **out, store_key_t *key,
                      uint32_t *target);
    void (*close)(store_t *store);
    store_status_t (*queue_open)(store_t *store, const store_key_t *key, store_queue_t **out);
    store_status_t (*queue_release)(store_t *store, store_queue_t *queue);
    store_status_t (*append)(store_t *store, store_queue_t *queue, const store_item_t *item,
                             store_ref_t *out_ref);
    store_status_t (*peek)(store_t *store, store_queue_t *queue, store_view_t *views, size_t max,
                           size_t *out_n);
    store_status_t (*commit)(store_t *store, store_queue_t *queue, const store_ref_t *refs,
                             size_t n);
    store_status_t (*tombstone)(store_t *store, store_ref_t ref, int *out_completed);
    store_status_t (*ret)(store_t *store, const store_ref_t *refs, size_t n);
    uint64_t (*pending_count)(const store_t *store);
    store_status_t (*current_shape_set)(store_t *store, const char *model, uint64_t signature);
    store_status_t (*current_shape_get)(store_t *store, const char *model, int *out_has,
                                        uint64_t *out_signature);
    store_status_t (*epoch_next)(store_t *store, uint32_t *out_epoch);
};

/* A random epoch in 1 .. 2^20, where a store without a recorded epoch starts. */
uint32_t store_epoch_random(void);

struct store {
    const struct store_ops *ops;
};

/* crc32c.c: CRC-32C continuing from `crc` (0 to start: the standard CRC-32C). `data` borrowed. */
uint32_t store_crc32c(uint32_t crc, const void *data, size_t len);
/* The same value by the byte-wise table whatever the CPU has, so tests cover both paths. */
uint32_t store_crc32c_table(uint32_t crc, const void *data, size_t len);

/* fault.c: the store's I/O goes through these so tests can fail the Nth call of a kind.
 * Pointers borrowed for the call, as by the system calls they wrap. */
int store_fault_hit(store_fault_op_t op);
ssize_t store_fault_pwrite(int fd, const void *buf, size_t len, off_t off);
int store_fault_fsync(int fd, int data_only);
int store_fault_renameat(int dirfd, const char *from, const char *to);
int store_fault_unlinkat(int dirfd, const char *name);

/*
 * Corruption found on disk is reported with the source line that found it (SQLite's
 * CORRUPT_BKPT), so a report can be traced to the exact check that fired.
 */
#define STORE_CORRUPT_BKPT __FILE__, __LINE__

/* Little-endian field access for the on-disk formats. */
static inline uint32_t store_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t store_get64(const uint8_t *p)
{
    return (uint64_t)store_get32(p) | (uint64_t)store_get32(p + 4) << 32;
}
static inline void store_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void store_put64(uint8_t *p, uint64_t v)
{
    store_put32(p, (uint32_t)v);
    store_put32(p + 4, (uint32_t)(v >> 32));
}

#endif
