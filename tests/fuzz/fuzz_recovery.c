/*
 * fuzz_recovery.c - libFuzzer harness: segment recovery. Each run copies the base store
 * (fuzz_store.c), damages its segment files as the input says, deletes or empties the index
 * when asked, and recovers through store_open_disk (fuzz_store_walk's checks).
 *
 * Input: byte 0 = flags (bit 0: delete the index; bit 1: empty data.mdb to 0 bytes; bit 2: the
 * operations damage the state journal's files instead of the segments), then operations of 5
 * bytes, [op][arg u32 LE]: file = arg % (files + 1) (the last one: a new segment or journal
 * file), offset = (arg / files) % (its size + 1); op & 3: 0 xor the byte there with (op | 1),
 * 1 truncate there, 2 write the next 4 input bytes there, 3 append the next op >> 2 input bytes
 * at the end.
 */
#include "tests/fuzz/fuzz.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void recovery_apply(const char *path, const uint8_t *op, const uint8_t **p,
                           const uint8_t *end)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0)
            close(fd);
        return;
    }
    uint64_t size = (uint64_t)sb.st_size;
    uint32_t arg = fuzz_get32(op + 1);
    off_t at = (off_t)(arg % (size + 1));
    switch (op[0] & 3) {
    case 0: {
        uint8_t b = 0;
        if (pread(fd, &b, 1, at) == 1) {
            b ^= op[0] | 1;
            (void)!pwrite(fd, &b, 1, at);
        }
        break;
    }
    case 1:
        (void)!ftruncate(fd, at);
        break;
    case 2:
        if (end - *p >= 4) {
            (void)!pwrite(fd, *p, 4, at);
            *p += 4;
        }
        break;
    default: {
        size_t n = op[0] >> 2;
        n = n < (size_t)(end - *p) ? n : (size_t)(end - *p);
        (void)!pwrite(fd, *p, n, (off_t)size);
        *p += n;
        break;
    }
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_store_fresh();
    char files[64][512];
    const uint8_t *p = data, *end = data + size;
    uint8_t flags = size != 0 ? *p++ : 0;
    size_t n;
    if (flags & 4) {
        n = fuzz_store_journals(dir, files, 63);
        snprintf(files[n], sizeof(files[n]), "%s/journal/00000000000000fe.jnl", dir);
    } else {
        n = fuzz_store_files(dir, files, 63) - 1; /* segments only: the index is not damaged */
        snprintf(files[n], sizeof(files[n]), "%s/segments/00000000000000ff.seg", dir);
    }
    while (end - p >= 5) {
        const uint8_t *op = p;
        p += 5;
        uint32_t arg = fuzz_get32(op + 1);
        recovery_apply(files[arg % (n + 1)], op, &p, end);
    }
    char path[600];
    if (flags & 1) {
        snprintf(path, sizeof(path), "%s/index/data.mdb", dir);
        unlink(path);
    } else if (flags & 2) {
        snprintf(path, sizeof(path), "%s/index/data.mdb", dir);
        (void)!truncate(path, 0);
    }
    fuzz_store_walk(dir);
    return 0;
}
