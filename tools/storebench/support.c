/*
 * support.c - what every phase of lanesched-storebench uses: fatal errors, paths, allocation,
 * heap in use, and opening the disk store and its lanes with the benchmark's log.
 *
 * Invariants:
 *   1. Every failure is fatal and says what failed (exit status 2): a benchmark that carried on
 *      past a failed call would print figures for work it did not do.
 *   2. Store warnings and errors are counted, and the count is printed with the results: a run
 *      that logged any is not a clean measurement.
 *
 * Rejected: returning errors to the phases. None of them could do anything but stop.
 */
#include "tools/storebench/storebench.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

store_io_t sb_io = STORE_IO_AUTO;
store_sync_t sb_sync = STORE_SYNC_FILES;

void sb_die(const char *what, const char *why)
{
    fprintf(stderr, PROG ": %s: %s\n", what, why);
    exit(2);
}

void sb_check(store_status_t st, const char *what)
{
    if (st != STORE_OK)
        sb_die(what, store_status_str(st));
}

void sb_pathf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size)
        sb_die("path", "too long");
}

void *sb_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        sb_die("malloc", "out of memory");
    return p;
}

/* Heap in use, all of it malloc'd (the benchmark is single-threaded: one arena). */
int sb_heap_in_use(uint64_t *out)
{
#if HAVE_MALLINFO2
    struct mallinfo2 mi = mallinfo2();
    *out = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
    return 1;
#else
    *out = 0;
    return 0;
#endif
}

unsigned long sb_store_warnings;

void sb_store_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level < STORE_LOG_WARN)
        return;
    sb_store_warnings++;
    fprintf(stderr, PROG ": store %s: %s\n", level == STORE_LOG_ERROR ? "error" : "warning", msg);
}

store_t *sb_store_open(const char *dir, store_durability_t dur, store_recovery_t *rep)
{
    store_disk_config_t cfg = {
        .dir = dir, .durability = dur, .log = sb_store_log, .io = sb_io, .sync = sb_sync};
    store_t *s = NULL;
    sb_check(store_open_disk(&cfg, rep, &s), "store_open_disk");
    return s;
}

store_key_t sb_queue_key(unsigned models, unsigned shapes, unsigned lanes, uint64_t k, char *model)
{
    unsigned lane = (unsigned)(k % lanes), shape = (unsigned)(k / lanes % shapes);
    unsigned m = (unsigned)(k / lanes / shapes);
    if (models == 1)
        snprintf(model, 32, "%s", MODEL);
    else
        snprintf(model, 32, "%s-%u", MODEL, m);
    return (store_key_t){model, SIGNATURE + (uint64_t)shape * SIGNATURE_STEP, lane};
}

void sb_queues_open(store_t *s, unsigned models, unsigned shapes, unsigned lanes,
                    store_queue_t **qs)
{
    uint64_t n = (uint64_t)models * shapes * lanes;
    for (uint64_t k = 0; k < n; k++) {
        char model[32];
        store_key_t key = sb_queue_key(models, shapes, lanes, k, model);
        sb_check(store_queue_open(s, &key, &qs[k]), "store_queue_open");
    }
}

void sb_proc_fields(const char *path, const char *const *keys, size_t n, uint64_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = 0;
    FILE *f = fopen(path, "r");
    char line[256];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(keys[i]);
            if (strncmp(line, keys[i], len) == 0)
                out[i] = strtoull(line + len, NULL, 10);
        }
    }
    if (f != NULL)
        fclose(f);
}

uint64_t sb_rw_syscalls(uint64_t *out_write_bytes)
{
    static const char *const keys[] = {"syscr:", "syscw:", "write_bytes:"};
    uint64_t v[3];
    sb_proc_fields("/proc/self/io", keys, 3, v);
    *out_write_bytes = v[2];
    return v[0] + v[1];
}

uint64_t sb_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

void sb_child_run(const char *argv0, const char *const *args, char *out, size_t cap)
{
    int fds[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0)
        sb_die("pipe", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        sb_die("fork", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        if (dup2(fds[1], STDOUT_FILENO) < 0)
            _exit(127);
        close(fds[1]);
        execv("/proc/self/exe", (char *const *)args);
        execvp(argv0, (char *const *)args);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    for (ssize_t r; len + 1 < cap && (r = read(fds[0], out + len, cap - 1 - len));) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            sb_die("reading a child's result", strerror(errno));
        }
        len += (size_t)r;
    }
    out[len] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            sb_die("waitpid", strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        sb_die(args[1], "the child failed (use --in-process where this program cannot "
                        "re-execute itself)");
}
