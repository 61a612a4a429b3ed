/*
 * fuzz.h - what the libFuzzer harnesses of tests/fuzz/ share: a data directory built per run
 * from a base store made once through the public store API, and the walk that opens it again
 * through store_open_disk and checks what recovery promises.
 *
 * Every harness defines LLVMFuzzerTestOneInput; with clang's -fsanitize=fuzzer it is a libFuzzer
 * target, otherwise fuzz_main.c replays files through it (the seeds under CTest).
 *
 * Ownership: paths returned are static storage of the process; everything else is borrowed.
 */
#ifndef LANESCHED_FUZZ_H
#define LANESCHED_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A fresh copy of the base store (made at the first call: two models, three lanes, some items
 * delivered and tombstoned, a state journal of several files, a sealed segment, a tail never
 * flushed) in this process's scratch directory, which is returned. */
const char *fuzz_store_fresh(void);

/* The files of the copy: segments (sorted by name), then the index's data.mdb. n <= max;
 * each path is static storage until the next call. */
size_t fuzz_store_files(const char *dir, char paths[][512], size_t max);

/* The copy's journal files, sorted by name. n <= max; static storage until the next call. */
size_t fuzz_store_journals(const char *dir, char paths[][512], size_t max);

/* Opens dir with store_open_disk, walks every queue (peeks all, completes every other item,
 * leaves the rest pending), flushes, closes, and opens again: the first open must succeed and
 * the second must find exactly what the first left (aborts otherwise). */
void fuzz_store_walk(const char *dir);

/* Little-endian u32 from p (4 bytes). */
uint32_t fuzz_get32(const uint8_t *p);

#endif
