/*
 * bytes_int.h - private to store/disk/: the bytes under the disk backend's formats: little-endian
 * fields, CRC-32C (crc32c.c), the fault hooks every I/O call of the backend goes through
 * (fault.c) and the corruption breakpoint. The store's unit tests include it too (test_crc32c.c).
 */
#ifndef LANESCHED_STORE_DISK_BYTES_INT_H
#define LANESCHED_STORE_DISK_BYTES_INT_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* crc32c.c: CRC-32C continuing from `crc` (0 to start: the standard CRC-32C). `data` borrowed. */
uint32_t store_crc32c(uint32_t crc, const void *data, size_t len);
/* The same value by the byte-wise table whatever the CPU has, so tests cover both paths. */
uint32_t store_crc32c_table(uint32_t crc, const void *data, size_t len);

/* fault.c: the store's I/O goes through these so tests can fail the Nth call of a kind.
 * Pointers borrowed for the call, as by the system calls they wrap. */
int store_fault_hit(store_fault_op_t op);
/* Whether any fault is armed: the countdowns are process-wide and unsynchronised, so work that
 * would run on several threads runs on one while a test counts calls. */
int store_fault_armed(void);
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
