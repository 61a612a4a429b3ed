/*
 * mem.c - allocation helpers.
 *
 * Invariants:
 *   1. mem_calloc's memory reads as zero, as calloc's does: the writes store zeros.
 *
 * Rejected: malloc followed by memset (compilers fold the pair back into calloc, which skips the
 * writes on fresh pages); MAP_POPULATE on an mmap of our own (bypasses malloc for every caller).
 */
#include "common/mem.h"

#include <stdlib.h>

/* The smallest page size Linux uses on the architectures built for: a byte written per such
 * stride, and the last byte, touch every page the block spans whatever the real size. */
#define MEM_PAGE 4096u

void *mem_calloc(size_t n, size_t size)
{
    volatile unsigned char *p = calloc(n, size);
    if (p == NULL)
        return NULL;
    size_t bytes = n * size; /* calloc refused an overflowing product */
    for (size_t i = 0; i < bytes; i += MEM_PAGE)
        p[i] = 0;
    if (bytes != 0)
        p[bytes - 1] = 0; /* the block need not start on a page: its last page */
    return (void *)p;
}
