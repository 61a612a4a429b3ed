/*
 * harness.c - the plumbing of the daemon integration tests: child processes (nats-server,
 * lanesched, consumer processes), temp dirs, cleanup on every exit, failures. See harness.h.
 *
 * Starting, waiting for and stopping children is support/spawn.c's, shared with
 * lanesched-bench; this file turns its statuses into test failures (H_REQUIRE). The rest of the
 * harness: harness_nats.c (NATS, producer and consumer helpers), harness_stats.c (lanes.stats,
 * parsed with jansson), harness_child.c (a consumer in another process).
 */
#include "tests/integration/harness.h"

#include "tests/integration/harness_int.h"

#include "common/clock.h"
#include "common/rng.h"
#include "support/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- global state (read by the signal handler: plain arrays, no allocation) ---------------- */

#define MAX_CHILDREN 8
#define MAX_MOUNTS   4
#define MAX_ARGS     64

static char g_name[64] = "?";
static char g_daemon_bin[1024];
static char g_nats_bin[1024];
static char g_self[1024];
static char g_tmp[512];
static char g_data[768];
static char g_log[768];
static char g_nats_log[768];
static char g_url[64];
static int g_port;
static volatile pid_t g_nats_pid;
static volatile pid_t g_daemon_pid;
static volatile pid_t g_children[MAX_CHILDREN];
static char g_mounts[MAX_MOUNTS][768];
static volatile int g_n_mounts;
static char *g_extra[MAX_ARGS];
static int g_n_extra;
static uint64_t g_t0;
static uint64_t g_rng;
static int g_keep;
static int g_initialised;
static volatile sig_atomic_t g_cleaned;
static atomic_int g_failing;

uint64_t h_now_ms(void)
{
    return clock_mono_ns() / 1000000u;
}

void h_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

uint64_t h_rand(void)
{
    return rng_splitmix64(&g_rng);
}

bool h_err_is(const char *err, const char *code)
{
    size_t n = strlen(code);
    return err != NULL && strncmp(err, code, n) == 0 && (err[n] == '\0' || err[n] == ':');
}

void h_log(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    uint64_t t = h_now_ms() - g_t0;
    printf("test_daemon[%s] +%" PRIu64 ".%03" PRIu64 "s: %s\n", g_name, t / 1000, t % 1000, msg);
    fflush(stdout);
}

/* ---- cleanup: async-signal-safe (spawn_kill, spawn_run_quiet only) ---------------- */

static void cleanup_all(void)
{
    if (g_cleaned)
        return;
    g_cleaned = 1;
    spawn_kill(&g_daemon_pid);
    for (int i = 0; i < MAX_CHILDREN; i++)
        spawn_kill(&g_children[i]);
    spawn_kill(&g_nats_pid);
    for (int i = g_n_mounts - 1; i >= 0; i--) {
        char *argv[] = {"/bin/umount", "-l", g_mounts[i], NULL};
        spawn_run_quiet(argv);
    }
    if (g_tmp[0] != '\0' && !g_keep) {
        char *argv[] = {"/bin/rm", "-rf", g_tmp, NULL};
        spawn_run_quiet(argv);
    }
}

static void on_fatal_signal(int sig)
{
    static const char msg[] = "test_daemon: interrupted by a signal; cleaning up\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    cleanup_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void at_exit(void)
{
    cleanup_all();
}

void h_init(const char *name, const char *daemon_bin, const char *nats_bin)
{
    g_t0 = h_now_ms();
    snprintf(g_name, sizeof(g_name), "%s", name);
    snprintf(g_daemon_bin, sizeof(g_daemon_bin), "%s", daemon_bin != NULL ? daemon_bin : "");
    const char *env_nats = getenv("LANES_NATS_SERVER");
    snprintf(g_nats_bin, sizeof(g_nats_bin), "%s",
             nats_bin != NULL && nats_bin[0]   ? nats_bin
             : env_nats != NULL && env_nats[0] ? env_nats
                                               : "nats-server");
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof(g_self) - 1);
    if (n > 0)
        g_self[n] = '\0';
    const char *keep = getenv("LANES_TEST_KEEP");
    g_keep = keep != NULL && keep[0] == '1';
    const char *seed = getenv("LANES_TEST_SEED");
    g_rng = seed != NULL && seed[0] ? strtoull(seed, NULL, 0) : 0x1A2E5ull;

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    atexit(at_exit);

    const char *tmp = getenv("TMPDIR");
    snprintf(g_tmp, sizeof(g_tmp), "%s/lanes-daemon-%s-XXXXXX",
             tmp != NULL && tmp[0] ? tmp : "/tmp", name);
    if (mkdtemp(g_tmp) == NULL) {
        fprintf(stderr, "test_daemon: mkdtemp %s: %s\n", g_tmp, strerror(errno));
        g_tmp[0] = '\0';
        exit(1);
    }
    snprintf(g_data, sizeof(g_data), "%s/data", g_tmp);
    snprintf(g_log, sizeof(g_log), "%s/lanesched.log", g_tmp);
    snprintf(g_nats_log, sizeof(g_nats_log), "%s/nats-server.log", g_tmp);
    g_initialised = 1;
    h_log("temp dir %s, seed 0x%" PRIx64, g_tmp, g_rng);
}

const char *h_tmp(void)
{
    return g_tmp;
}

const char *h_data_dir(void)
{
    return g_data;
}

void h_set_data_dir(const char *dir)
{
    snprintf(g_data, sizeof(g_data), "%s", dir);
}

void h_file_tail_print(const char *what, const char *path, int max_lines)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "---- %s (%s): not there ----\n", what, path);
        return;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    size_t got = buf != NULL ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    if (buf == NULL)
        return;
    buf[got] = '\0';
    const char *start = buf + got;
    int lines = 0;
    while (start > buf && lines <= max_lines) {
        start--;
        if (*start == '\n')
            lines++;
    }
    if (start > buf)
        start++;
    fprintf(stderr, "---- %s (%s, %zu bytes%s) ----\n%s%s---- end of %s ----\n", what, path, got,
            start > buf ? ", tail" : "", start, got > 0 && buf[got - 1] != '\n' ? "\n" : "", what);
    free(buf);
}

void h_dump_daemon_log(void)
{
    h_file_tail_print("lanesched log", g_log, 400);
}

void h_fail(const char *file, int line, const char *fmt, ...)
{
    if (atomic_exchange(&g_failing, 1)) {
        /* Another thread is failing already: let it report. */
        for (;;)
            h_sleep_ms(1000);
    }
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (g_initialised) {
        fprintf(stderr, "test_daemon[%s]: FAIL at %s:%d: %s\n", g_name, file, line, msg);
        h_dump_daemon_log();
        pid_t dpid = g_daemon_pid;
        int status = 0;
        if (dpid > 0 && spawn_exited(&g_daemon_pid, &status)) {
            fprintf(stderr, "test_daemon[%s]: lanesched (pid %d) had EXITED by itself: %s %d\n",
                    g_name, (int)dpid, WIFEXITED(status) ? "exit code" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        } else if (dpid > 0) {
            fprintf(stderr, "test_daemon[%s]: lanesched (pid %d) is still running\n", g_name,
                    (int)dpid);
        }
        if (g_nats_pid > 0 && spawn_exited(&g_nats_pid, NULL)) {
            h_file_tail_print("nats-server log (it exited)", g_nats_log, 50);
        }
        if (g_keep)
            fprintf(stderr, "test_daemon[%s]: temp dir kept: %s\n", g_name, g_tmp);
        fprintf(stderr, "test_daemon[%s]: FAIL: %s\n", g_name, msg);
    } else {
        fprintf(stderr, "test_daemon[%s] (pid %d): FAIL at %s:%d: %s\n", g_name, (int)getpid(),
                file, line, msg);
    }
    exit(1);
}

int h_run(const char *const *argv)
{
    char bin[1024];
    char *args[MAX_ARGS + 1];
    int n = 0;
    if (spawn_program_find(argv[0], bin, sizeof(bin)) != SPAWN_OK)
        return -1;
    args[n++] = bin;
    for (; argv[n] != NULL; n++) {
        if (n >= MAX_ARGS)
            return -1;
        args[n] = (char *)argv[n];
    }
    args[n] = NULL;
    fflush(NULL);
    return spawn_run_quiet(args);
}

bool h_mount_tmpfs(const char *dir, const char *size)
{
    if (g_n_mounts >= MAX_MOUNTS)
        return false;
    mkdir(dir, 0700);
    char opt[64];
    snprintf(opt, sizeof(opt), "size=%s", size);
    const char *argv[] = {"mount", "-t", "tmpfs", "-o", opt, "tmpfs", dir, NULL};
    if (h_run(argv) != 0)
        return false;
    snprintf(g_mounts[g_n_mounts], sizeof(g_mounts[0]), "%s", dir);
    g_n_mounts++;
    return true;
}

/* ---- spawning -------------------------------------------------------------------------------- */

void h_spawn(volatile pid_t *pid, char *const argv[], const char *log, int in_fd, int out_fd)
{
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.log_path = log;
    opts.stdin_fd = in_fd;
    opts.stdout_fd = out_fd;
    spawn_status_t st = spawn_start(argv, &opts, pid);
    H_REQUIRE(st == SPAWN_OK, "start %s: %s: %s", argv[0], spawn_status_str(st), strerror(errno));
}

/* ---- nats-server ----------------------------------------------------------------------------- */

static void nats_start(bool jetstream, const char *config)
{
    H_REQUIRE(g_nats_pid == 0, "nats-server already running");
    char bin[1024], store[800];
    H_REQUIRE(spawn_program_find(g_nats_bin, bin, sizeof(bin)) == SPAWN_OK,
              "nats-server (%s): not found or not executable", g_nats_bin);
    snprintf(store, sizeof(store), "%s/jetstream", g_tmp);
    spawn_nats_t nats = {.bin = bin,
                         .log_path = g_nats_log,
                         .store_dir = jetstream ? store : NULL,
                         .config = config};
    spawn_status_t st = spawn_nats_start(&nats, &g_nats_pid, &g_port);
    if (st != SPAWN_OK) {
        h_file_tail_print("nats-server log", g_nats_log, 50);
        H_REQUIRE(0, "nats-server (%s) did not start listening on 127.0.0.1: %s", g_nats_bin,
                  spawn_status_str(st));
    }
    snprintf(g_url, sizeof(g_url), "nats://127.0.0.1:%d", g_port);
    h_log("nats-server pid %d on %s%s", (int)g_nats_pid, g_url, jetstream ? " (JetStream)" : "");
}

void h_nats_start(bool jetstream)
{
    nats_start(jetstream, NULL);
}

void h_nats_start_config(const char *config)
{
    nats_start(false, config);
}

const char *h_url(void)
{
    return g_url;
}

/* ---- the daemon ------------------------------------------------------------------------------ */

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : 0;
}

static void daemon_spawn(void)
{
    H_REQUIRE(g_daemon_pid == 0, "the daemon is already running");
    H_REQUIRE(g_url[0] != '\0', "start nats-server first");
    char *argv[MAX_ARGS + 16];
    int n = 0;
    argv[n++] = g_daemon_bin;
    argv[n++] = "--server";
    argv[n++] = g_url;
    argv[n++] = "--data-dir";
    argv[n++] = g_data;
    argv[n++] = "--prefix";
    argv[n++] = H_PREFIX;
    for (int i = 0; i < g_n_extra; i++)
        argv[n++] = g_extra[i];
    argv[n] = NULL;
    char cmd[4096];
    size_t at = 0;
    for (int i = 0; i < n && at < sizeof(cmd) - 1; i++)
        at += (size_t)snprintf(cmd + at, sizeof(cmd) - at, "%s%s", i ? " " : "", argv[i]);
    FILE *lf = fopen(g_log, "a");
    if (lf != NULL) {
        fprintf(lf, "==== test harness: starting %s ====\n", cmd);
        fclose(lf);
    }
    off_t from = file_size(g_log);
    uint64_t t = h_now_ms();
    h_spawn(&g_daemon_pid, argv, g_log, -1, -1);
    int status = 0;
    spawn_status_t st = spawn_ready_wait(&g_daemon_pid, g_log, (long)from, "lanesched: ready",
                                         20000, NULL, &status);
    H_REQUIRE(st != SPAWN_EEXITED, "lanesched exited before it was ready (%s %d): %s",
              WIFEXITED(status) ? "exit code" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), cmd);
    H_REQUIRE(st == SPAWN_OK, "lanesched not ready after 20 s: %s", cmd);
    h_log("lanesched pid %d ready after %" PRIu64 " ms", (int)g_daemon_pid, h_now_ms() - t);
}

void h_daemon_start(const char *const *extra)
{
    H_REQUIRE(g_daemon_bin[0] != '\0', "no daemon binary given");
    H_REQUIRE(access(g_daemon_bin, X_OK) == 0, "daemon binary %s: %s", g_daemon_bin,
              strerror(errno));
    mkdir(g_data, 0700);
    for (int i = 0; i < g_n_extra; i++)
        free(g_extra[i]);
    g_n_extra = 0;
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        H_REQUIRE(g_n_extra < MAX_ARGS, "too many daemon flags");
        g_extra[g_n_extra] = strdup(extra[i]);
        H_REQUIRE(g_extra[g_n_extra] != NULL, "out of memory");
        g_n_extra++;
    }
    daemon_spawn();
}

void h_daemon_restart(void)
{
    daemon_spawn();
}

bool h_daemon_running(void)
{
    return g_daemon_pid > 0;
}

/* Every thread's stack of a hung process on stderr, when gdb is installed (bounded: gdb is
 * killed after 20 s). */
static void dump_stacks(pid_t pid)
{
    if (access("/usr/bin/gdb", X_OK) != 0)
        return;
    char spid[16];
    snprintf(spid, sizeof(spid), "%d", (int)pid);
    char *argv[] = {"/usr/bin/gdb",        "-p", spid, "-batch", "-nx", "-ex",
                    "thread apply all bt", NULL};
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.stdout_fd = 2;
    volatile pid_t g = 0;
    if (spawn_start(argv, &opts, &g) != SPAWN_OK)
        return;
    if (!spawn_wait(g, 20000, NULL))
        spawn_kill(&g);
}

/* The daemon was reaped with status (how: what ended it, for the log line): its exit code, or -1
 * when a signal killed it. */
static int daemon_reaped(int status, const char *how)
{
    g_daemon_pid = 0;
    if (WIFEXITED(status)) {
        h_log("lanesched %s, exit code %d", how, WEXITSTATUS(status));
        return WEXITSTATUS(status);
    }
    h_log("lanesched died of signal %d (%s)", WTERMSIG(status), how);
    return -1;
}

int h_daemon_wait_exit(unsigned ms)
{
    pid_t pid = g_daemon_pid;
    H_REQUIRE(pid > 0, "the daemon is not running");
    int status = 0;
    if (!spawn_wait(pid, ms, &status))
        return -2;
    return daemon_reaped(status, "exited by itself");
}

int h_daemon_stop(void)
{
    pid_t pid = g_daemon_pid;
    H_REQUIRE(pid > 0, "the daemon is not running");
    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    int status = 0;
    if (!spawn_wait(pid, 15000, &status)) {
        h_log("lanesched did not exit within 15 s of SIGTERM: its threads, then SIGKILL");
        dump_stacks(pid);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        g_daemon_pid = 0;
        return -1;
    }
    return daemon_reaped(status, "stopped by SIGTERM");
}

void h_daemon_stop_clean(void)
{
    int rc = h_daemon_stop();
    H_REQUIRE(rc == 0, "lanesched did not exit cleanly on SIGTERM (exit code %d, -1 = signal)", rc);
}

void h_daemon_kill(void)
{
    pid_t pid = g_daemon_pid;
    H_REQUIRE(pid > 0, "the daemon is not running");
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    g_daemon_pid = 0;
    H_REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "lanesched had exited by itself before the SIGKILL (status 0x%x)", status);
    h_log("lanesched pid %d killed with SIGKILL", (int)pid);
}

void h_daemon_pause(void)
{
    H_REQUIRE(g_daemon_pid > 0 && kill(g_daemon_pid, SIGSTOP) == 0, "SIGSTOP lanesched");
    h_log("lanesched SIGSTOPped");
}

void h_daemon_resume(void)
{
    H_REQUIRE(g_daemon_pid > 0 && kill(g_daemon_pid, SIGCONT) == 0, "SIGCONT lanesched");
    h_log("lanesched SIGCONTinued");
}

/* ---- for the other harness files (harness_int.h) ----------------------------------------------
 */

void h_child_track(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == 0) {
            g_children[i] = pid;
            return;
        }
    H_REQUIRE(0, "too many child processes");
}

void h_child_untrack(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == pid)
            g_children[i] = 0;
}

const char *h_self(void)
{
    return g_self;
}

void h_identity_set(const char *name, const char *url)
{
    snprintf(g_name, sizeof(g_name), "%s", name);
    snprintf(g_url, sizeof(g_url), "%s", url);
    g_t0 = h_now_ms();
}
