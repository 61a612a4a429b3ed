/*
 * files.c - the benchmark's file handling: one post-order directory walk serves removal, size
 * sums, page-cache eviction and the recovery baseline's read of every segment byte.
 *
 * Invariants:
 *   1. Symlinks are never followed (lstat): removal cannot leave the data directory.
 *   2. A directory is visited after everything in it, so removal empties it before rmdir.
 *
 * Rejected: nftw(). Its FTW_DEPTH walk would do, but the callback cannot carry a context
 * pointer, and the read baseline needs one for its buffer and byte count.
 */
#include "tools/storebench/storebench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*walk_fn)(const char *path, int is_dir, void *ctx);

static int files_walk(const char *path, walk_fn fn, void *ctx)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return -1;
    if (!S_ISDIR(sb.st_mode))
        return fn(path, 0, ctx);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return -1;
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(dir)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char sub[4096];
        if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub)) {
            rc = -1;
            break;
        }
        rc = files_walk(sub, fn, ctx);
    }
    closedir(dir);
    return rc == 0 ? fn(path, 1, ctx) : rc;
}

static int rm_one(const char *path, int is_dir, void *ctx)
{
    (void)ctx;
    return is_dir ? rmdir(path) : unlink(path);
}

void files_remove(const char *path)
{
    if (files_walk(path, rm_one, NULL) != 0 && errno != ENOENT)
        fprintf(stderr, PROG ": cannot remove %s: %s\n", path, strerror(errno));
}

static int size_one(const char *path, int is_dir, void *ctx)
{
    struct stat sb;
    if (!is_dir && stat(path, &sb) == 0)
        *(uint64_t *)ctx += (uint64_t)sb.st_size;
    return 0;
}

uint64_t files_bytes(const char *path)
{
    uint64_t total = 0;
    files_walk(path, size_one, &total);
    return total;
}

/* Writes a file's dirty pages back and asks the kernel to drop its cached pages. */
static int evict_one(const char *path, int is_dir, void *ctx)
{
    (void)ctx;
    if (is_dir)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return 0;
}

void files_evict(const char *path)
{
    files_walk(path, evict_one, NULL);
}

/* Baseline for recovery: pread of every file in the directory, READ_CHUNK at a time. */
typedef struct {
    uint8_t *buf;
    uint64_t bytes;
} read_ctx_t;

static int read_one(const char *path, int is_dir, void *ctx)
{
    read_ctx_t *c = ctx;
    if (is_dir)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    for (off_t off = 0;;) {
        ssize_t r = pread(fd, c->buf, READ_CHUNK, off);
        if (r < 0) {
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        c->bytes += (uint64_t)r;
        off += r;
    }
    close(fd);
    return 0;
}

int files_read(const char *path, uint8_t *buf, uint64_t *out_bytes)
{
    read_ctx_t c = {.buf = buf};
    int rc = files_walk(path, read_one, &c);
    *out_bytes = c.bytes;
    return rc;
}
