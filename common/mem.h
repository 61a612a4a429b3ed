/*
 * mem.h - allocation helpers shared by every folder.
 */
#ifndef LANESCHED_MEM_H
#define LANESCHED_MEM_H

#include <stddef.h>

/*
 * calloc(n, size) whose pages are written once before it returns: for a large table that is
 * probed (read) before it is filled. A fresh mapping that is read first maps the shared zero
 * page, and each first write then replaces the page and flushes the TLB of every core the
 * process runs on; written first, each page is simply allocated. Returned to the caller to free;
 * NULL on overflow or when memory is short.
 */
void *mem_calloc(size_t n, size_t size);

#endif
