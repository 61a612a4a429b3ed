/*
 * spawn.c - starting, waiting for and stopping the child processes of the integration tests
 * and of lanesched-bench: nats-server, lanesched, consumer processes, helpers such as rm and
 * mount.
 *
 * Invariants:
 *  1. Everything a child needs (argv, opened files) is prepared before fork(); between fork and
 *     exec the child calls only async-signal-safe functions, as POSIX requires of a child of a
 *     multithreaded process.
 *  2. A child never outlives the process that started it: PR_SET_PDEATHSIG SIGKILL, and a child
 *     whose parent died before the prctl exits at once (126).
 *  3. Every wait is bounded by its caller's timeout; a pid is reaped exactly once, and the
 *     caller's pid variable is 0 from then on.
 *
 * Rejected alternatives:
 *  - posix_spawn: it cannot set PR_SET_PDEATHSIG, the guarantee of invariant 2.
 *  - execvp in the child: PATH lookup after fork is not async-signal-safe, and a missing
 *    program then looks like a server that did not start; the parent looks it up instead.
 *  - Aborting inside the helpers (the harness's old H_REQUIRE): the bench must clean up and exit
 *    with its own status, so the helpers return a status and the caller decides.
 */
#include "support/spawn.h"

#include "common/clock.h"
#include "support/port.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPAWN_POLL_MS       10u   /* every wait polls at this period */
#define SPAWN_NATS_GRACE_MS 1000u /* a server that did not come up: SIGTERM, then SIGKILL */
#define SPAWN_DEFAULT_PATH  "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

STATUS_STR(spawn_status_str, spawn_status_t, SPAWN_STATUS_MAP, "unknown spawn status")

static void spawn_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

spawn_status_t spawn_program_find(const char *name, char *out, size_t len)
{
    if (strchr(name, '/') != NULL) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? SPAWN_OK : SPAWN_ENOT_FOUND;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = SPAWN_DEFAULT_PATH;
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        if (n > 0 && snprintf(out, len, "%.*s/%s", (int)n, path, name) < (int)len &&
            access(out, X_OK) == 0)
            return SPAWN_OK;
        path += n;
        if (*path == ':')
            path++;
    }
    return SPAWN_ENOT_FOUND;
}

void spawn_opts_init(spawn_opts_t *opts)
{
    *opts = (spawn_opts_t){.log_path = NULL, .stdin_fd = -1, .stdout_fd = -1};
}

spawn_status_t spawn_start(char *const argv[], const spawn_opts_t *opts, volatile pid_t *pid)
{
    spawn_status_t st = SPAWN_ESYS;
    int log_fd = -1, null_fd = -1;
    if (opts->log_path != NULL &&
        (log_fd = open(opts->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
        goto out;
    if ((null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        goto out;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t child = fork();
    if (child < 0)
        goto out;
    if (child == 0) { /* invariant 1: async-signal-safe calls only */
        if (opts->own_group)
            setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* invariant 2 */
            _exit(126);
        signal(SIGPIPE, SIG_DFL);
        dup2(opts->stdin_fd >= 0 ? opts->stdin_fd : null_fd, 0);
        if (opts->stdout_fd >= 0)
            dup2(opts->stdout_fd, 1);
        else if (log_fd >= 0)
            dup2(log_fd, 1);
        if (log_fd >= 0)
            dup2(log_fd, 2);
        execv(argv[0], argv);
        static const char msg[] = "exec failed\n";
        ssize_t ignored = write(2, msg, sizeof(msg) - 1);
        (void)ignored;
        _exit(127);
    }
    *pid = child;
    st = SPAWN_OK;
out:
    if (log_fd >= 0)
        close(log_fd);
    if (null_fd >= 0)
        close(null_fd);
    return st;
}

bool spawn_wait(pid_t pid, uint64_t timeout_ms, int *status)
{
    uint64_t end = clock_mono_ns() + timeout_ms * 1000000ull;
    int ws = 0;
    for (;;) {
        pid_t w = waitpid(pid, &ws, WNOHANG);
        if (w == pid) {
            if (status != NULL)
                *status = ws;
            return true;
        }
        if (w < 0 && errno != EINTR)
            return false; /* not our child (any more) */
        if (clock_mono_ns() >= end)
            return false;
        spawn_sleep_ms(SPAWN_POLL_MS);
    }
}

bool spawn_exited(volatile pid_t *pid, int *status)
{
    pid_t p = *pid;
    if (p <= 0)
        return true;
    int ws = 0;
    if (waitpid(p, &ws, WNOHANG) != p)
        return false;
    *pid = 0;
    if (status != NULL)
        *status = ws;
    return true;
}

void spawn_kill(volatile pid_t *pid)
{
    pid_t p = *pid;
    if (p <= 0)
        return;
    *pid = 0;
    kill(p, SIGKILL);
    while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
    }
}

void spawn_stop(volatile pid_t *pid, uint64_t grace_ms)
{
    pid_t p = *pid;
    if (p <= 0)
        return;
    kill(p, SIGTERM);
    if (spawn_wait(p, grace_ms, NULL))
        *pid = 0;
    else
        spawn_kill(pid);
}

int spawn_run_quiet(char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Lines of path after byte `from` that contain needle, counted up to `stop`; -1 when path cannot
 * be opened. */
static long spawn_log_scan(const char *path, long from, const char *needle, long stop)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long n = 0;
    if (fseek(f, from, SEEK_SET) == 0) {
        char line[4096];
        while (n < stop && fgets(line, sizeof(line), f) != NULL)
            n += strstr(line, needle) != NULL;
    }
    fclose(f);
    return n;
}

static bool spawn_log_has(const char *path, long from, const char *needle)
{
    return spawn_log_scan(path, from, needle, 1) > 0;
}

long spawn_log_count(const char *path, const char *needle)
{
    return spawn_log_scan(path, 0, needle, LONG_MAX);
}

spawn_status_t spawn_ready_wait(volatile pid_t *pid, const char *log_path, long from,
                                const char *needle, uint64_t timeout_ms, spawn_cancel_fn cancelled,
                                int *status)
{
    uint64_t end = clock_mono_ns() + timeout_ms * 1000000ull;
    for (;;) {
        if (spawn_log_has(log_path, from, needle))
            return SPAWN_OK;
        if (spawn_exited(pid, status))
            return SPAWN_EEXITED;
        if (cancelled != NULL && cancelled())
            return SPAWN_ECANCELLED;
        if (clock_mono_ns() >= end)
            return SPAWN_ETIMEOUT;
        spawn_sleep_ms(SPAWN_POLL_MS);
    }
}

/* One server on one port: OK once it accepts connections. */
static spawn_status_t spawn_nats_try(const spawn_nats_t *nats, int port, volatile pid_t *pid)
{
    char port_text[16];
    snprintf(port_text, sizeof(port_text), "%d", port);
    char *argv[] = {
        (char *)nats->bin, "-a", "127.0.0.1", "-p", port_text, NULL, NULL, NULL, NULL, NULL, NULL};
    int n = 5;
    if (nats->config != NULL) { /* the flags above override the file's listen address */
        argv[n++] = "-c";
        argv[n++] = (char *)nats->config;
    }
    if (nats->store_dir != NULL) {
        argv[n++] = "-js";
        argv[n++] = "-sd";
        argv[n++] = (char *)nats->store_dir;
    }
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.log_path = nats->log_path;
    opts.own_group = nats->own_group;
    struct stat sb;
    long from = nats->log_path != NULL && stat(nats->log_path, &sb) == 0 ? (long)sb.st_size : 0;
    spawn_status_t st = spawn_start(argv, &opts, pid);
    if (st != SPAWN_OK)
        return st;
    uint64_t end = clock_mono_ns() + SPAWN_NATS_START_MS * 1000000ull;
    for (;;) {
        /* A connect alone could reach another server that took the port meanwhile (a test suite
         * running beside this one): ours is up when it also logged that it is ready, after the
         * bytes the log had before it started. One that lost the port exits instead. */
        if (port_probe(port) &&
            (nats->log_path == NULL || spawn_log_has(nats->log_path, from, "Server is ready")))
            return SPAWN_OK;
        if (spawn_exited(pid, NULL))
            return SPAWN_EEXITED;
        if (nats->cancelled != NULL && nats->cancelled())
            return SPAWN_ECANCELLED;
        if (clock_mono_ns() >= end)
            return SPAWN_ETIMEOUT;
        spawn_sleep_ms(SPAWN_POLL_MS);
    }
}

spawn_status_t spawn_nats_start(const spawn_nats_t *nats, volatile pid_t *pid, int *port)
{
    spawn_status_t st = SPAWN_ESYS;
    for (int attempt = 0; attempt < SPAWN_NATS_ATTEMPTS; attempt++) {
        int p = port_pick();
        if (p <= 0)
            return SPAWN_ESYS;
        st = spawn_nats_try(nats, p, pid);
        if (st == SPAWN_OK) {
            *port = p;
            return st;
        }
        spawn_stop(pid, SPAWN_NATS_GRACE_MS); /* the port was taken meanwhile */
        if (st == SPAWN_ESYS || st == SPAWN_ECANCELLED)
            break;
    }
    return st;
}
