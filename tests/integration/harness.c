/*
 * harness.c - child processes (nats-server, lanesched, consumer processes), temp dirs, cleanup,
 * and the NATS + codec helpers of the daemon integration tests. See harness.h.
 *
 * Starting, waiting for and stopping children is tests/support/test_spawn.c's, shared with
 * lanesched-bench; this file turns its statuses into test failures (H_REQUIRE). lanes.stats is
 * parsed with jansson.
 */
#include "tests/integration/harness.h"

#include "common/clock.h"
#include "common/rng.h"
#include "tests/support/test_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
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

/* ---- cleanup: async-signal-safe (test_spawn_kill, test_spawn_run_quiet only) ---------------- */

static void cleanup_all(void)
{
    if (g_cleaned)
        return;
    g_cleaned = 1;
    test_spawn_kill(&g_daemon_pid);
    for (int i = 0; i < MAX_CHILDREN; i++)
        test_spawn_kill(&g_children[i]);
    test_spawn_kill(&g_nats_pid);
    for (int i = g_n_mounts - 1; i >= 0; i--) {
        char *argv[] = {"/bin/umount", "-l", g_mounts[i], NULL};
        test_spawn_run_quiet(argv);
    }
    if (g_tmp[0] != '\0' && !g_keep) {
        char *argv[] = {"/bin/rm", "-rf", g_tmp, NULL};
        test_spawn_run_quiet(argv);
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

static void print_file_tail(const char *what, const char *path, int max_lines)
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
    print_file_tail("lanesched log", g_log, 400);
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
        if (dpid > 0 && test_spawn_exited(&g_daemon_pid, &status)) {
            fprintf(stderr, "test_daemon[%s]: lanesched (pid %d) had EXITED by itself: %s %d\n",
                    g_name, (int)dpid, WIFEXITED(status) ? "exit code" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        } else if (dpid > 0) {
            fprintf(stderr, "test_daemon[%s]: lanesched (pid %d) is still running\n", g_name,
                    (int)dpid);
        }
        if (g_nats_pid > 0 && test_spawn_exited(&g_nats_pid, NULL)) {
            print_file_tail("nats-server log (it exited)", g_nats_log, 50);
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
    if (test_spawn_program_find(argv[0], bin, sizeof(bin)) != TEST_SPAWN_OK)
        return -1;
    args[n++] = bin;
    for (; argv[n] != NULL; n++) {
        if (n >= MAX_ARGS)
            return -1;
        args[n] = (char *)argv[n];
    }
    args[n] = NULL;
    fflush(NULL);
    return test_spawn_run_quiet(args);
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

/* test_spawn_start with stdout/stderr appended to log (NULL: inherit), stdin from in_fd (-1:
 * /dev/null), stdout to out_fd (-1: the log); *pid is set as soon as the child exists. The test
 * fails when it cannot be started. */
static void spawn(volatile pid_t *pid, char *const argv[], const char *log, int in_fd, int out_fd)
{
    test_spawn_opts_t opts;
    test_spawn_opts_init(&opts);
    opts.log_path = log;
    opts.stdin_fd = in_fd;
    opts.stdout_fd = out_fd;
    test_spawn_status_t st = test_spawn_start(argv, &opts, pid);
    H_REQUIRE(st == TEST_SPAWN_OK, "start %s: %s: %s", argv[0], test_spawn_status_str(st),
              strerror(errno));
}

/* ---- nats-server ----------------------------------------------------------------------------- */

void h_nats_start(bool jetstream)
{
    H_REQUIRE(g_nats_pid == 0, "nats-server already running");
    char bin[1024], store[800];
    H_REQUIRE(test_spawn_program_find(g_nats_bin, bin, sizeof(bin)) == TEST_SPAWN_OK,
              "nats-server (%s): not found or not executable", g_nats_bin);
    snprintf(store, sizeof(store), "%s/jetstream", g_tmp);
    test_spawn_nats_t nats = {
        .bin = bin, .log_path = g_nats_log, .store_dir = jetstream ? store : NULL};
    test_spawn_status_t st = test_spawn_nats_start(&nats, &g_nats_pid, &g_port);
    if (st != TEST_SPAWN_OK) {
        print_file_tail("nats-server log", g_nats_log, 50);
        H_REQUIRE(0, "nats-server (%s) did not start listening on 127.0.0.1: %s", g_nats_bin,
                  test_spawn_status_str(st));
    }
    snprintf(g_url, sizeof(g_url), "nats://127.0.0.1:%d", g_port);
    h_log("nats-server pid %d on %s%s", (int)g_nats_pid, g_url, jetstream ? " (JetStream)" : "");
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
    spawn(&g_daemon_pid, argv, g_log, -1, -1);
    int status = 0;
    test_spawn_status_t st = test_spawn_ready_wait(&g_daemon_pid, g_log, (long)from,
                                                   "lanesched: ready", 20000, NULL, &status);
    H_REQUIRE(st != TEST_SPAWN_EEXITED, "lanesched exited before it was ready (%s %d): %s",
              WIFEXITED(status) ? "exit code" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), cmd);
    H_REQUIRE(st == TEST_SPAWN_OK, "lanesched not ready after 20 s: %s", cmd);
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
    test_spawn_opts_t opts;
    test_spawn_opts_init(&opts);
    opts.stdout_fd = 2;
    volatile pid_t g = 0;
    if (test_spawn_start(argv, &opts, &g) != TEST_SPAWN_OK)
        return;
    if (!test_spawn_wait(g, 20000, NULL))
        test_spawn_kill(&g);
}

int h_daemon_stop(void)
{
    pid_t pid = g_daemon_pid;
    H_REQUIRE(pid > 0, "the daemon is not running");
    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    int status = 0;
    if (!test_spawn_wait(pid, 15000, &status)) {
        h_log("lanesched did not exit within 15 s of SIGTERM: its threads, then SIGKILL");
        dump_stacks(pid);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        g_daemon_pid = 0;
        return -1;
    }
    g_daemon_pid = 0;
    if (WIFEXITED(status)) {
        h_log("lanesched stopped by SIGTERM, exit code %d", WEXITSTATUS(status));
        return WEXITSTATUS(status);
    }
    h_log("lanesched died of signal %d after SIGTERM", WTERMSIG(status));
    return -1;
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

/* ---- NATS ------------------------------------------------------------------------------------ */

natsConnection *h_connect(void)
{
    natsOptions *opts = NULL;
    natsConnection *nc = NULL;
    H_REQUIRE(natsOptions_Create(&opts) == NATS_OK, "natsOptions_Create");
    natsOptions_SetURL(opts, g_url);
    natsOptions_SetTimeout(opts, 2000);
    natsOptions_SetAllowReconnect(opts, true);
    natsOptions_SetMaxReconnect(opts, 1000000);
    natsOptions_SetReconnectWait(opts, 100);
    natsStatus s = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
    H_REQUIRE(s == NATS_OK, "connect to %s: %s", g_url, natsStatus_GetText(s));
    return nc;
}

void h_disconnect(natsConnection *nc)
{
    if (nc == NULL)
        return;
    natsConnection_Close(nc);
    natsConnection_Destroy(nc);
}

void h_subject(char *buf, size_t cap, const char *a, const char *b)
{
    if (b != NULL)
        snprintf(buf, cap, "%s.%s.%s", H_PREFIX, a, b);
    else
        snprintf(buf, cap, "%s.%s", H_PREFIX, a);
}

natsStatus h_request(natsConnection *nc, const char *subject, const void *data, size_t len,
                     int64_t timeout_ms, natsMsg **out)
{
    *out = NULL;
    return natsConnection_Request(out, nc, subject, data, (int)len,
                                  timeout_ms > 0 ? timeout_ms : 1);
}

/* ---- producer side --------------------------------------------------------------------------- */

void h_shape_components(unsigned k, uint64_t out[2])
{
    char a[96], b[96];
    snprintf(a, sizeof(a), "You are test assistant number %u. Answer briefly.", k);
    snprintf(b, sizeof(b), "Few-shot block %u: Q: 2+2? A: 4.", k);
    out[0] = codec_hash_component(a, strlen(a));
    out[1] = codec_hash_component(b, strlen(b));
}

uint64_t h_shape(unsigned k)
{
    uint64_t h[2];
    h_shape_components(k, h);
    return codec_signature(h, 2);
}

codec_work_item_t h_item(const char *id, const char *model, uint64_t signature, uint32_t tokens,
                         const void *payload, size_t payload_len)
{
    codec_work_item_t it;
    memset(&it, 0, sizeof(it));
    it.id.ptr = (const uint8_t *)id;
    it.id.len = strlen(id);
    it.model = model;
    it.has_signature = signature != 0;
    it.signature = signature;
    it.tokens = tokens;
    it.payload.ptr = payload_len > 0 ? payload : NULL;
    it.payload.len = payload_len;
    return it;
}

natsStatus h_submit(natsConnection *nc, const char *subject_model, const codec_work_item_t *items,
                    size_t n, int64_t timeout_ms, codec_submit_reply_t **out)
{
    *out = NULL;
    codec_submit_t msg = {items, n};
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_status_t cs = codec_encode_submit(&msg, &buf, &len);
    H_REQUIRE(cs == CODEC_OK, "encode Submit: %s", codec_status_str(cs));
    char subject[256];
    h_subject(subject, sizeof(subject), "submit", subject_model);
    natsMsg *reply = NULL;
    natsStatus s = h_request(nc, subject, buf, len, timeout_ms, &reply);
    free(buf);
    if (s != NATS_OK)
        return s;
    cs = codec_decode_submit_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply),
                                   out);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply on %s is not a SubmitReply: %s", subject,
              codec_status_str(cs));
    return NATS_OK;
}

void h_submit_accepted(natsConnection *nc, const char *subject_model,
                       const codec_work_item_t *items, size_t n)
{
    codec_submit_reply_t *r = NULL;
    natsStatus s = h_submit(nc, subject_model, items, n, 5000, &r);
    H_REQUIRE(s == NATS_OK, "Submit of %zu items: %s", n, natsStatus_GetText(s));
    H_REQUIRE(r->error[0] == '\0', "Submit refused whole: %s", r->error);
    H_REQUIRE(r->n_results == n, "SubmitReply has %zu results for %zu items", r->n_results, n);
    for (size_t i = 0; i < n; i++) {
        const codec_item_result_t *res = &r->results[i];
        H_REQUIRE(res->id.len == items[i].id.len &&
                      memcmp(res->id.ptr, items[i].id.ptr, res->id.len) == 0,
                  "result %zu is for another id (%.*s)", i, (int)res->id.len,
                  (const char *)res->id.ptr);
        H_REQUIRE(res->status == CODEC_ITEM_ACCEPTED,
                  "item %.*s: status %d, reason '%s', error '%s' (expected ACCEPTED)",
                  (int)items[i].id.len, (const char *)items[i].id.ptr, (int)res->status,
                  res->reason, res->error);
    }
    codec_submit_reply_destroy(r);
}

/* ---- consumer side --------------------------------------------------------------------------- */

natsStatus h_register_raw(natsConnection *nc, const codec_register_t *reg, int64_t timeout_ms,
                          codec_registered_t **out)
{
    *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    codec_status_t cs = codec_encode_register(reg, &buf, &len);
    H_REQUIRE(cs == CODEC_OK, "encode Register: %s", codec_status_str(cs));
    char subject[128];
    h_subject(subject, sizeof(subject), "register", NULL);
    natsMsg *reply = NULL;
    natsStatus s = h_request(nc, subject, buf, len, timeout_ms, &reply);
    free(buf);
    if (s != NATS_OK)
        return s;
    cs = codec_decode_registered(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), out);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply on %s is not a Registered: %s", subject,
              codec_status_str(cs));
    return NATS_OK;
}

static void copy_subject(char *dst, size_t cap, const char *got, const char *kind, const char *id)
{
    char want[256];
    h_subject(want, sizeof(want), kind, id);
    H_REQUIRE(strcmp(got, want) == 0, "Registered %s subject '%s', expected '%s'", kind, got, want);
    snprintf(dst, cap, "%s", got);
}

void h_consumer_register(h_consumer_t *c, natsConnection *nc, const char *model,
                         uint32_t max_batch_size, uint32_t max_batch_tokens,
                         uint32_t max_input_tokens, const char *name)
{
    memset(c, 0, sizeof(*c));
    c->nc = nc;
    snprintf(c->name, sizeof(c->name), "%s", name);
    codec_register_t reg = {model, max_batch_size, max_batch_tokens, max_input_tokens, name};
    codec_registered_t *r = NULL;
    natsStatus s = h_register_raw(nc, &reg, 5000, &r);
    H_REQUIRE(s == NATS_OK, "Register %s: %s", name, natsStatus_GetText(s));
    H_REQUIRE(r->error[0] == '\0', "Register %s refused: %s", name, r->error);
    size_t idlen = strlen(r->consumer_id);
    bool hex = idlen == 32;
    for (size_t i = 0; hex && i < idlen; i++)
        hex = (r->consumer_id[i] >= '0' && r->consumer_id[i] <= '9') ||
              (r->consumer_id[i] >= 'a' && r->consumer_id[i] <= 'f');
    H_REQUIRE(hex, "consumer id '%s' is not 32 lowercase hex characters", r->consumer_id);
    snprintf(c->id, sizeof(c->id), "%s", r->consumer_id);
    copy_subject(c->pull_subject, sizeof(c->pull_subject), r->pull_subject, "pull", c->id);
    copy_subject(c->ack_subject, sizeof(c->ack_subject), r->ack_subject, "ack", c->id);
    copy_subject(c->hb_subject, sizeof(c->hb_subject), r->heartbeat_subject, "hb", c->id);
    copy_subject(c->bye_subject, sizeof(c->bye_subject), r->bye_subject, "bye", c->id);
    c->heartbeat_ms = r->heartbeat_ms;
    c->dead_after_ms = r->dead_after_ms;
    c->ack_wait_ms = r->ack_wait_ms;
    codec_registered_destroy(r);
    H_REQUIRE(c->heartbeat_ms > 0 && c->dead_after_ms > 0 && c->ack_wait_ms > 0,
              "Registered without timings (hb %u, dead-after %u, ack-wait %u)", c->heartbeat_ms,
              c->dead_after_ms, c->ack_wait_ms);
    natsInbox *inbox = NULL;
    H_REQUIRE(natsInbox_Create(&inbox) == NATS_OK, "natsInbox_Create");
    snprintf(c->inbox, sizeof(c->inbox), "%s", inbox);
    natsInbox_Destroy(inbox);
    s = natsConnection_SubscribeSync(&c->sub, nc, c->inbox);
    H_REQUIRE(s == NATS_OK, "subscribe %s: %s", c->inbox, natsStatus_GetText(s));
    natsSubscription_SetPendingLimits(c->sub, 1000000, 1 << 30);
    H_REQUIRE(natsConnection_Flush(nc) == NATS_OK, "flush");
}

void h_consumer_close(h_consumer_t *c)
{
    h_hb_stop(c);
    if (c->sub != NULL) {
        natsSubscription_Unsubscribe(c->sub);
        natsSubscription_Destroy(c->sub);
        c->sub = NULL;
    }
}

void h_pull(h_consumer_t *c, uint32_t max_batches, uint32_t expires_ms)
{
    codec_pull_t p = {max_batches, expires_ms};
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_pull(&p, &buf, &len) == CODEC_OK, "encode Pull");
    natsStatus s = natsConnection_PublishRequest(c->nc, c->pull_subject, c->inbox, buf, (int)len);
    free(buf);
    H_REQUIRE(s == NATS_OK, "publish Pull: %s", natsStatus_GetText(s));
    natsConnection_Flush(c->nc);
}

codec_batch_t *h_sub_next_batch(natsSubscription *sub, int64_t timeout_ms, char *subject,
                                size_t cap)
{
    natsMsg *m = NULL;
    natsStatus s = natsSubscription_NextMsg(&m, sub, timeout_ms > 0 ? timeout_ms : 1);
    if (s == NATS_TIMEOUT)
        return NULL;
    H_REQUIRE(s != NATS_NO_RESPONDERS, "a Pull had no responders (is lanesched subscribed?)");
    H_REQUIRE(s == NATS_OK, "waiting for a Batch: %s", natsStatus_GetText(s));
    codec_batch_t *b = NULL;
    codec_status_t cs =
        codec_decode_batch(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &b);
    if (subject != NULL)
        snprintf(subject, cap, "%s", natsMsg_GetSubject(m));
    int len = natsMsg_GetDataLength(m);
    natsMsg_Destroy(m);
    H_REQUIRE(cs == CODEC_OK, "a %d-byte message on a pull inbox is not a Batch: %s", len,
              codec_status_str(cs));
    return b;
}

codec_batch_t *h_next_batch(h_consumer_t *c, int64_t timeout_ms)
{
    return h_sub_next_batch(c->sub, timeout_ms, NULL, 0);
}

codec_ack_reply_t *h_ack(h_consumer_t *c, const codec_ack_t *ack, int64_t timeout_ms)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_ack(ack, &buf, &len) == CODEC_OK, "encode Ack");
    natsMsg *reply = NULL;
    natsStatus s = h_request(c->nc, c->ack_subject, buf, len, timeout_ms, &reply);
    free(buf);
    if (s == NATS_TIMEOUT)
        return NULL;
    H_REQUIRE(s == NATS_OK, "Ack request on %s: %s", c->ack_subject, natsStatus_GetText(s));
    codec_ack_reply_t *r = NULL;
    codec_status_t cs =
        codec_decode_ack_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), &r);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply on %s is not an AckReply: %s", c->ack_subject,
              codec_status_str(cs));
    return r;
}

void h_ack_all_ok(h_consumer_t *c, const codec_batch_t *b)
{
    codec_ack_t a;
    memset(&a, 0, sizeof(a));
    a.batch_id = b->batch_id;
    a.all = true;
    codec_ack_reply_t *r = h_ack(c, &a, 5000);
    H_REQUIRE(r != NULL, "no AckReply for batch %" PRIu64 " within 5 s", b->batch_id);
    H_REQUIRE(r->error[0] == '\0' && r->acked == b->n_items && r->unknown == 0 && r->returned == 0,
              "ack of batch %" PRIu64 " (%zu items): AckReply{acked %u, returned %u, unknown %u, "
              "error '%s'}",
              b->batch_id, b->n_items, r->acked, r->returned, r->unknown, r->error);
    codec_ack_reply_destroy(r);
}

void h_heartbeat(h_consumer_t *c, const uint64_t *in_progress, size_t n)
{
    codec_heartbeat_t hb = {in_progress, n};
    uint8_t *buf = NULL;
    size_t len = 0;
    H_REQUIRE(codec_encode_heartbeat(&hb, &buf, &len) == CODEC_OK, "encode Heartbeat");
    natsStatus s = natsConnection_Publish(c->nc, c->hb_subject, buf, (int)len);
    free(buf);
    H_REQUIRE(s == NATS_OK, "publish Heartbeat: %s", natsStatus_GetText(s));
}

static void *hb_main(void *arg)
{
    h_consumer_t *c = arg;
    uint64_t next = h_now_ms();
    while (!atomic_load(&c->hb_stop)) {
        if (h_now_ms() >= next) {
            h_heartbeat(c, NULL, 0);
            atomic_fetch_add(&c->hb_sent, 1);
            next = h_now_ms() + c->hb_period_ms;
        }
        h_sleep_ms(10);
    }
    return NULL;
}

void h_hb_start(h_consumer_t *c, unsigned period_ms)
{
    H_REQUIRE(!c->hb_running, "heartbeat thread already running");
    c->hb_period_ms = period_ms;
    atomic_store(&c->hb_stop, false);
    H_REQUIRE(pthread_create(&c->hb_thread, NULL, hb_main, c) == 0, "pthread_create");
    c->hb_running = true;
}

void h_hb_stop(h_consumer_t *c)
{
    if (!c->hb_running)
        return;
    atomic_store(&c->hb_stop, true);
    pthread_join(c->hb_thread, NULL);
    c->hb_running = false;
}

codec_ack_reply_t *h_bye(h_consumer_t *c, int64_t timeout_ms)
{
    natsMsg *reply = NULL;
    natsStatus s = h_request(c->nc, c->bye_subject, NULL, 0, timeout_ms, &reply);
    if (s != NATS_OK)
        return NULL;
    codec_ack_reply_t *r = NULL;
    codec_status_t cs =
        codec_decode_ack_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), &r);
    natsMsg_Destroy(reply);
    H_REQUIRE(cs == CODEC_OK, "the reply to bye is not an AckReply");
    return r;
}

/* ---- lanes.stats ----------------------------------------------------------------------------- */

char *h_stats(natsConnection *nc)
{
    char subject[64];
    h_subject(subject, sizeof(subject), "stats", NULL);
    natsMsg *m = NULL;
    natsStatus s = h_request(nc, subject, "", 0, 5000, &m);
    H_REQUIRE(s == NATS_OK, "request %s: %s", subject, natsStatus_GetText(s));
    int len = natsMsg_GetDataLength(m);
    char *out = malloc((size_t)len + 1);
    H_REQUIRE(out != NULL, "out of memory");
    memcpy(out, natsMsg_GetData(m), (size_t)len);
    out[len] = '\0';
    natsMsg_Destroy(m);
    H_REQUIRE(len > 0 && out[0] == '{', "stats reply is not a JSON object: '%.200s'", out);
    return out;
}

/* The stats document as a JSON object (json_decref); the test fails when it is not one. */
static json_t *stats_parse(const char *json)
{
    json_error_t e;
    json_t *root = json_loads(json, 0, &e);
    H_REQUIRE(root != NULL, "stats are not JSON (line %d: %s): %.200s", e.line, e.text, json);
    if (!json_is_object(root)) {
        json_decref(root);
        H_REQUIRE(0, "stats are not a JSON object: %.200s", json);
    }
    return root;
}

static bool json_int64_get(const json_t *v, int64_t *out)
{
    if (json_is_integer(v))
        *out = (int64_t)json_integer_value(v);
    else if (json_is_real(v))
        *out = (int64_t)json_real_value(v);
    else
        return false;
    return true;
}

bool h_json_path(const char *json, const char *path, int64_t *out)
{
    json_t *root = stats_parse(json);
    const json_t *v = root;
    char key[128];
    const char *k = path;
    bool found = false;
    for (;;) {
        const char *dot = strchr(k, '.');
        size_t n = dot != NULL ? (size_t)(dot - k) : strlen(k);
        if (n >= sizeof(key) || !json_is_object(v))
            break;
        memcpy(key, k, n);
        key[n] = '\0';
        if ((v = json_object_get(v, key)) == NULL)
            break;
        if (dot == NULL) {
            found = json_int64_get(v, out);
            break;
        }
        k = dot + 1;
    }
    json_decref(root);
    return found;
}

int64_t h_counter(const char *json, const char *name)
{
    char path[160];
    snprintf(path, sizeof(path), "counters.%s", name);
    int64_t v = 0;
    H_REQUIRE(h_json_path(json, path, &v), "stats have no numeric %s: %s", path, json);
    return v;
}

int64_t h_rejected(const char *json, const char *reason)
{
    char path[160];
    snprintf(path, sizeof(path), "counters.rejected.%s", reason);
    int64_t v = 0;
    return h_json_path(json, path, &v) ? v : 0;
}

/* Every member named key at any depth of v: their count, and the sum of the numeric ones. */
static void json_key_visit(const json_t *v, const char *key, int64_t *sum, size_t *count)
{
    if (json_is_object(v)) {
        const char *name;
        const json_t *member;
        json_object_foreach((json_t *)v, name, member)
        {
            int64_t n = 0;
            if (strcmp(name, key) == 0) {
                (*count)++;
                if (json_int64_get(member, &n))
                    *sum += n;
            }
            json_key_visit(member, key, sum, count);
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *item;
        json_array_foreach(v, i, item) json_key_visit(item, key, sum, count);
    }
}

int64_t h_json_sum(const char *json, const char *key)
{
    json_t *root = stats_parse(json);
    int64_t sum = 0;
    size_t count = 0;
    json_key_visit(root, key, &sum, &count);
    json_decref(root);
    return sum;
}

size_t h_json_count(const char *json, const char *key)
{
    json_t *root = stats_parse(json);
    int64_t sum = 0;
    size_t count = 0;
    json_key_visit(root, key, &sum, &count);
    json_decref(root);
    return count;
}

/* ---- a consumer in another process ----------------------------------------------------------- */

static void track_child(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == 0) {
            g_children[i] = pid;
            return;
        }
    H_REQUIRE(0, "too many child processes");
}

static void untrack_child(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == pid)
            g_children[i] = 0;
}

void h_child_start(h_child_t *ch, const char *model, uint32_t max_batch_size,
                   uint32_t max_batch_tokens)
{
    memset(ch, 0, sizeof(*ch));
    int in[2], out[2];
    H_REQUIRE(pipe(in) == 0 && pipe(out) == 0, "pipe: %s", strerror(errno));
    char bs[16], bt[16];
    snprintf(bs, sizeof(bs), "%u", max_batch_size);
    snprintf(bt, sizeof(bt), "%u", max_batch_tokens);
    char *argv[] = {g_self, "__consumer", g_url, (char *)model, bs, bt, NULL};
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    char log[800];
    snprintf(log, sizeof(log), "%s/consumer-child.log", g_tmp);
    volatile pid_t pid = 0;
    spawn(&pid, argv, log, in[0], out[1]);
    ch->pid = pid;
    track_child(ch->pid);
    close(in[0]);
    close(out[1]);
    ch->to_fd = in[1];
    ch->from_fd = out[0];
}

void h_child_send(h_child_t *ch, const char *line)
{
    size_t len = strlen(line);
    H_REQUIRE(write(ch->to_fd, line, len) == (ssize_t)len && write(ch->to_fd, "\n", 1) == 1,
              "writing to the consumer process: %s", strerror(errno));
}

bool h_child_line(h_child_t *ch, int64_t timeout_ms, char *line, size_t cap)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl = memchr(ch->buf, '\n', ch->len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - ch->buf);
            snprintf(line, cap, "%.*s", (int)n, ch->buf);
            memmove(ch->buf, nl + 1, ch->len - n - 1);
            ch->len -= n + 1;
            return true;
        }
        uint64_t now = h_now_ms();
        if (now >= deadline)
            return false;
        struct pollfd p = {ch->from_fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)(deadline - now));
        if (pr <= 0)
            continue;
        H_REQUIRE(ch->len < sizeof(ch->buf) - 1, "consumer process line too long");
        ssize_t r = read(ch->from_fd, ch->buf + ch->len, sizeof(ch->buf) - 1 - ch->len);
        if (r <= 0) {
            char log[800];
            snprintf(log, sizeof(log), "%s/consumer-child.log", g_tmp);
            print_file_tail("consumer process log", log, 50);
            H_REQUIRE(0, "the consumer process closed its output");
        }
        ch->len += (size_t)r;
    }
}

void h_child_signal(h_child_t *ch, int sig)
{
    H_REQUIRE(ch->pid > 0 && kill(ch->pid, sig) == 0, "kill(%d, %d): %s", (int)ch->pid, sig,
              strerror(errno));
    if (sig == SIGKILL) {
        waitpid(ch->pid, NULL, 0);
        untrack_child(ch->pid);
        ch->pid = 0;
    }
}

void h_child_finish(h_child_t *ch)
{
    if (ch->to_fd >= 0) {
        close(ch->to_fd);
        ch->to_fd = -1;
    }
    if (ch->pid > 0) {
        kill(ch->pid, SIGCONT);
        if (!test_spawn_wait(ch->pid, 5000, NULL)) {
            kill(ch->pid, SIGKILL);
            waitpid(ch->pid, NULL, 0);
        }
        untrack_child(ch->pid);
        ch->pid = 0;
    }
    if (ch->from_fd >= 0) {
        close(ch->from_fd);
        ch->from_fd = -1;
    }
}

/* The child process: a consumer driven by lines on stdin. */

static void child_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void child_out(const char *fmt, ...)
{
    char line[16384];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(1, line, (size_t)n);
    (void)w;
}

int h_child_main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: test_daemon __consumer URL MODEL MAX_BATCH_SIZE MAX_TOKENS\n");
        return 2;
    }
    snprintf(g_name, sizeof(g_name), "consumer-process");
    snprintf(g_url, sizeof(g_url), "%s", argv[2]);
    g_t0 = h_now_ms();
    signal(SIGPIPE, SIG_IGN);
    natsConnection *nc = h_connect();
    static h_consumer_t c;
    h_consumer_register(&c, nc, argv[3], (uint32_t)strtoul(argv[4], NULL, 10),
                        (uint32_t)strtoul(argv[5], NULL, 10), 0, "child");
    child_out("REG %s", c.id);
    codec_batch_t *last = NULL;
    char in[4096];
    size_t in_len = 0;
    uint64_t last_hb = 0;
    for (;;) {
        uint64_t now = h_now_ms();
        if (now >= last_hb + c.heartbeat_ms) {
            h_heartbeat(&c, NULL, 0);
            last_hb = now;
        }
        char *nl = memchr(in, '\n', in_len);
        if (nl == NULL) {
            struct pollfd p = {0, POLLIN, 0};
            int wait = (int)(last_hb + c.heartbeat_ms - h_now_ms());
            if (poll(&p, 1, wait > 0 ? wait : 0) <= 0)
                continue;
            if (in_len >= sizeof(in) - 1)
                break;
            ssize_t r = read(0, in + in_len, sizeof(in) - 1 - in_len);
            if (r <= 0)
                break;
            in_len += (size_t)r;
            continue;
        }
        *nl = '\0';
        char cmd[4096];
        snprintf(cmd, sizeof(cmd), "%s", in);
        size_t used = (size_t)(nl - in) + 1;
        memmove(in, in + used, in_len - used);
        in_len -= used;

        unsigned n_batches = 0, expires = 0;
        if (sscanf(cmd, "pull %u %u", &n_batches, &expires) == 2) {
            h_pull(&c, n_batches, expires);
            uint64_t deadline = h_now_ms() + expires + 2000;
            codec_batch_t *b = NULL;
            while (b == NULL && h_now_ms() < deadline) {
                b = h_next_batch(&c, 50);
                if (h_now_ms() >= last_hb + c.heartbeat_ms) {
                    h_heartbeat(&c, NULL, 0);
                    last_hb = h_now_ms();
                }
            }
            if (b == NULL) {
                child_out("BATCH NONE");
                continue;
            }
            char line[16000];
            size_t at = 0;
            const char *st = b->status == CODEC_BATCH_OK        ? "OK"
                             : b->status == CODEC_BATCH_EXPIRED ? "EXPIRED"
                                                                : "ERROR";
            at += (size_t)snprintf(line + at, sizeof(line) - at, "BATCH %s %" PRIu64 " %zu", st,
                                   b->batch_id, b->n_items);
            for (size_t i = 0; i < b->n_items && at < sizeof(line) - 100; i++)
                at += (size_t)snprintf(line + at, sizeof(line) - at, " %.*s",
                                       (int)b->items[i].id.len, (const char *)b->items[i].id.ptr);
            if (b->status != CODEC_BATCH_OK && at < sizeof(line) - 100)
                snprintf(line + at, sizeof(line) - at, " %s", b->error);
            child_out("%s", line);
            if (b->status == CODEC_BATCH_OK) {
                codec_batch_destroy(last);
                last = b;
            } else {
                codec_batch_destroy(b);
            }
        } else if (strcmp(cmd, "ack") == 0) {
            codec_ack_t a;
            memset(&a, 0, sizeof(a));
            a.batch_id = last != NULL ? last->batch_id : 0;
            a.all = true;
            codec_ack_reply_t *r = h_ack(&c, &a, 3000);
            if (r == NULL) {
                child_out("ACK TIMEOUT");
            } else {
                child_out("ACK %u %u %u %s", r->acked, r->returned, r->unknown,
                          r->error[0] ? r->error : "-");
                codec_ack_reply_destroy(r);
            }
        } else {
            child_out("ERR unknown command '%s'", cmd);
        }
    }
    codec_batch_destroy(last);
    h_consumer_close(&c);
    h_disconnect(nc);
    nats_CloseAndWait(2000);
    return 0;
}
