/*
 * live.c - lanesched-bench live: one trace replayed over NATS against lanesched by producer
 * threads and simulated GPU workers, at one or both durability levels, and with --baseline the
 * same trace through JetStream (baseline.c) in the same run, for the end-to-end items/s ratio.
 * It also holds what `baseline` shares with `live` (bench.h, "the shared NATS run").
 *
 * Owns: the NATS modes' flags; the bench's children (nats-server with JetStream and its own
 * storage directory, then one lanesched per durability level with a fresh data directory) and
 * the temp directory holding their files; the replay (one producer thread per model, Submit
 * requests paced by the trace); the workers (one thread each, its own connection, lc_consumer
 * and gpu_t); lanes.stats and VmRSS sampling, the progress line, the results and the JSON file.
 *
 * Invariants:
 *  1. Item ids are <run tag>-<trace index>; each is submitted once (the library retries with the
 *     same bytes), and runs never share ids, so two runs on one daemon (--url) cannot dedupe
 *     each other's items.
 *  2. A payload is run nonce + trace index + send time (net_payload_encode): a worker finds the
 *     item's slots from the payload alone, and an item of another run (left in a --url daemon)
 *     is acked and counted as foreign, never as ours.
 *  3. wait = the moment a worker starts serving the item - the moment its producer got the ack
 *     that stored it (clamped at 0: a worker may start before the producer reads the reply);
 *     "from submit" starts at the send time the payload carries. First delivery only.
 *  4. Token difference = tokens_received - tokens_completed between lanes.stats taken before the
 *     load and after the drain (deltas, so --url works on a daemon that ran before). Nonzero, a
 *     run that did not drain, or an item no system stored makes the exit status 1.
 *  5. Every wait is bounded: submits (2 s x 10 retries; a producer stops after two failed
 *     requests in a row), pulls (250 ms), acks (5 s x 2),
 *     startup (10 s nats-server, 20 s lanesched, 15 s worker registration), the drain (ends
 *     after --drain-timeout without a completion) and the whole run (net_run_t.limit_s: the
 *     trace, three times the GPU time of every item served alone, the drain timeout, 60 s).
 *  6. Children run in a process group of their own (a terminal's ^C reaches the bench alone,
 *     which stops them in order), die with the bench (PR_SET_PDEATHSIG, so they are forked by
 *     the main thread only) and get SIGTERM, then SIGKILL after 10 s. The first SIGINT/SIGTERM/
 *     SIGHUP stops the run gracefully; a second one kills the children and removes the temp
 *     directory from the handler (fork + exec of rm only) and ends the process.
 *  7. Wall time = trace time x --time-scale, for arrivals and service alike, so offered load
 *     over GPU capacity is the trace's at every scale; the brokers themselves are not scaled.
 *  8. A worker sleeps on an absolute clock (busy_until += service), so timer slack on one batch
 *     is paid back on the next one instead of adding up.
 *
 * Rejected alternatives:
 *  - WorkItem.created_unix_ns for the wait: the daemon ignores it and never delivers it.
 *  - A map from item id to slot at the worker: the payload carries the index (2).
 *  - One shared NATS connection: a connection per producer and per worker is what separate
 *    processes would have, and no thread's traffic queues behind another's.
 *  - Pull-then-wait workers: the contract asks to keep credits outstanding, so each worker sends
 *    its next one-batch pull as soon as a batch arrives (the batch after it is packed while this
 *    one is served); JetStream's Fetch loop is the baseline's equivalent.
 *  - Fire-and-forget acks: the AckReply says the tombstones are durable, so the worker waits for
 *    it as lanesched-consume does (JetStream's natsMsg_Ack does not wait; the output says so).
 *  - A JSON library for lanes.stats: a string-aware span scanner over "counters" and "models"
 *    (tools/ctl.c reads counters by key the same way).
 *  - Scripts around the bench to start the servers: the bench owns its children, so a SIGINT
 *    cleans up exactly what it started, and each durability level gets a fresh data directory.
 */
#include "bench.h"

#include "clients/c/lanes_client.h"
#include "common/clock.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NET_PATH_MAX             1024
#define NET_SAMPLE_MS            250u   /* lanes.stats / stream info / VmRSS sampling */
#define NET_PRINT_MS             1000u  /* the progress line on a terminal */
#define NET_PLAIN_PRINT_MS       5000u  /* ... and as plain lines otherwise */
#define NET_NATS_START_MS        10000u /* nats-server accepting connections */
#define NET_DAEMON_START_MS      20000u /* lanesched printing "lanesched: ready" */
#define NET_READY_MS             15000u /* every worker registered */
#define NET_STOP_GRACE_MS        10000u /* SIGTERM, then SIGKILL */
#define NET_RUN_SLACK_S          60.0   /* a run's deadline beyond trace and drain */
#define NET_SMALL_QUEUE          1000u  /* fewer held items: the memory figure is noise */
#define LIVE_PULL_WAIT_MS        250
#define LIVE_PREFETCH_EXPIRES_MS 1000u
#define LIVE_SUBMIT_TIMEOUT_MS   2000
#define LIVE_SUBMIT_RETRIES      10u
#define LIVE_SUBMIT_GIVE_UP      2u /* consecutive failed requests that end a producer */
#define LIVE_ACK_TIMEOUT_MS      5000
#define LIVE_STATS_TIMEOUT_MS    2000

/* ---- process-wide state (read by the signal handler: plain arrays, no allocation) ------------ */

enum { NET_CHILD_NATS = 0, NET_CHILD_DAEMON = 1, NET_CHILDREN = 2 };

static volatile pid_t g_child[NET_CHILDREN];
static volatile sig_atomic_t g_signals;
static char g_tmp[NET_PATH_MAX];
static bool g_keep;
static char g_url[64];

static void net_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void net_sleep_ms(uint64_t ms)
{
    net_sleep_until(clock_mono_ns() + ms * 1000000ull);
}

bool net_stopping(const net_run_t *run)
{
    return g_signals > 0 || (run != NULL && atomic_load(&run->stop));
}

int net_server_pid(void)
{
    return (int)g_child[NET_CHILD_NATS];
}

/* ---- cleanup, also from the signal handler (invariant 6) ------------------------------------ */

static void net_cleanup_hard(void)
{
    for (int i = NET_CHILDREN - 1; i >= 0; i--) {
        pid_t pid = g_child[i];
        if (pid <= 0)
            continue;
        g_child[i] = 0;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    if (g_tmp[0] != '\0' && !g_keep) {
        pid_t pid = fork();
        if (pid == 0) {
            char *argv[] = {"/bin/rm", "-rf", g_tmp, NULL};
            execv(argv[0], argv);
            _exit(127);
        }
        if (pid > 0)
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
            }
        g_tmp[0] = '\0';
    }
}

static void net_signal_on(int sig)
{
    g_signals++;
    if (g_signals == 1) {
        static const char msg[] = "\nlanesched-bench: stopping (signal again to abort)\n";
        ssize_t ignored = write(2, msg, sizeof(msg) - 1);
        (void)ignored;
        return;
    }
    static const char msg[] = "\nlanesched-bench: aborted; children killed\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    net_cleanup_hard();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void net_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = net_signal_on;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void net_tree_remove(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char child[NET_PATH_MAX];
        if (snprintf(child, sizeof(child), "%s/%s", path, e->d_name) >= (int)sizeof(child))
            continue;
        struct stat sb;
        if (lstat(child, &sb) == 0 && S_ISDIR(sb.st_mode))
            net_tree_remove(child);
        else
            unlink(child);
    }
    closedir(d);
    rmdir(path);
}

/* ---- children ----------------------------------------------------------------------------- */

/* A program name with a '/' is taken as it is; otherwise it is looked up on PATH. */
static bool net_program_find(const char *name, char *out, size_t len)
{
    if (strchr(name, '/') != NULL) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        if (n > 0 && snprintf(out, len, "%.*s/%s", (int)n, path, name) < (int)len &&
            access(out, X_OK) == 0)
            return true;
        path += n;
        if (*path == ':')
            path++;
    }
    return false;
}

/* fork + execv with stdout/stderr to log_path; main thread only (invariant 6). */
static pid_t net_child_spawn(char *const argv[], const char *log_path)
{
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = -1;
    if (log_fd < 0 || null_fd < 0)
        goto out;
    pid_t parent = getpid();
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        signal(SIGPIPE, SIG_DFL);
        dup2(null_fd, 0);
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
out:
    if (log_fd >= 0)
        close(log_fd);
    if (null_fd >= 0)
        close(null_fd);
    return pid;
}

/* SIGTERM, up to grace_ms, then SIGKILL; reaps. */
static void net_child_stop(int slot, uint64_t grace_ms)
{
    pid_t pid = g_child[slot];
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    uint64_t end = clock_mono_ns() + grace_ms * 1000000ull;
    pid_t w = 0;
    while ((w = waitpid(pid, NULL, WNOHANG)) == 0 && clock_mono_ns() < end)
        net_sleep_ms(10);
    if (w != pid) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    g_child[slot] = 0;
}

/* Whether the child exited (then it is reaped and forgotten). */
static bool net_child_exited(int slot, int *status)
{
    pid_t pid = g_child[slot];
    if (pid <= 0)
        return true;
    if (waitpid(pid, status, WNOHANG) != pid)
        return false;
    g_child[slot] = 0;
    return true;
}

static void net_file_tail_print(const char *what, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char buf[4096];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    size_t got = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[got] = '\0';
    fprintf(stderr, "---- %s (%s) ----\n%s%s---- end ----\n", what, path, buf,
            got > 0 && buf[got - 1] != '\n' ? "\n" : "");
}

static bool net_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static int net_port_free(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static bool net_tcp_up(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    bool up = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return up;
}

/* nats-server with JetStream on a free loopback port, its storage in the temp directory. */
static int net_nats_start(const net_opts_t *o, char *err, size_t errlen)
{
    char bin[NET_PATH_MAX], store[NET_PATH_MAX + 16], log[NET_PATH_MAX + 32], port_text[16];
    if (!net_program_find(o->nats_server, bin, sizeof(bin))) {
        snprintf(err, errlen, "%.300s: not found or not executable (--nats-server)",
                 o->nats_server);
        return -1;
    }
    snprintf(store, sizeof(store), "%s/jetstream", g_tmp);
    snprintf(log, sizeof(log), "%s/nats-server.log", g_tmp);
    for (int attempt = 0; attempt < 4; attempt++) {
        int port = net_port_free();
        if (port <= 0)
            break;
        snprintf(port_text, sizeof(port_text), "%d", port);
        char *argv[] = {bin, "-a", "127.0.0.1", "-p", port_text, "-js", "-sd", store, NULL};
        pid_t pid = net_child_spawn(argv, log);
        if (pid < 0)
            break;
        g_child[NET_CHILD_NATS] = pid;
        uint64_t end = clock_mono_ns() + NET_NATS_START_MS * 1000000ull;
        while (clock_mono_ns() < end && !net_stopping(NULL)) {
            if (net_tcp_up(port)) {
                snprintf(g_url, sizeof(g_url), "nats://127.0.0.1:%d", port);
                return 0;
            }
            if (net_child_exited(NET_CHILD_NATS, NULL))
                break;
            net_sleep_ms(10);
        }
        net_child_stop(NET_CHILD_NATS, 1000); /* the port was taken meanwhile: another one */
    }
    net_file_tail_print("nats-server log", log);
    snprintf(err, errlen, "nats-server (%.300s) did not start listening on 127.0.0.1", bin);
    return -1;
}

static void net_daemon_log_print(const char *level)
{
    char log[NET_PATH_MAX + 48];
    snprintf(log, sizeof(log), "%s/lanesched-%s.log", g_tmp, level);
    net_file_tail_print("lanesched log", log);
}

/* lanesched --durability level with a fresh data directory; waits for "lanesched: ready". */
static int net_daemon_start(const net_opts_t *o, const char *level, char *err, size_t errlen)
{
    char bin[NET_PATH_MAX], data[NET_PATH_MAX + 32], log[NET_PATH_MAX + 48];
    if (!net_program_find(o->lanesched, bin, sizeof(bin))) {
        snprintf(err, errlen, "%.300s: not found or not executable (--lanesched)", o->lanesched);
        return -1;
    }
    snprintf(data, sizeof(data), "%s/data-%s", g_tmp, level);
    snprintf(log, sizeof(log), "%s/lanesched-%s.log", g_tmp, level);
    char *argv[] = {
        bin,        "--server",        g_url, "--data-dir", data, "--durability", (char *)level,
        "--prefix", (char *)o->prefix, NULL};
    pid_t pid = net_child_spawn(argv, log);
    if (pid < 0) {
        snprintf(err, errlen, "cannot start %.300s: %s", bin, strerror(errno));
        return -1;
    }
    g_child[NET_CHILD_DAEMON] = pid;
    uint64_t end = clock_mono_ns() + NET_DAEMON_START_MS * 1000000ull;
    while (clock_mono_ns() < end && !net_stopping(NULL)) {
        if (net_file_contains(log, "lanesched: ready"))
            return 0;
        int status = 0;
        if (net_child_exited(NET_CHILD_DAEMON, &status)) {
            net_file_tail_print("lanesched log", log);
            snprintf(err, errlen, "lanesched exited before it was ready (status %d)", status);
            return -1;
        }
        net_sleep_ms(20);
    }
    net_file_tail_print("lanesched log", log);
    snprintf(err, errlen, "lanesched was not ready within %u ms", NET_DAEMON_START_MS);
    net_child_stop(NET_CHILD_DAEMON, 1000);
    return -1;
}

static int net_env_open(const net_opts_t *o, char *err, size_t errlen)
{
    net_signals_install();
    g_keep = o->keep;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_tmp, sizeof(g_tmp), "%s/lanesched-bench-XXXXXX",
             tmp != NULL && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(g_tmp) == NULL) {
        snprintf(err, errlen, "mkdtemp %.300s: %s", g_tmp, strerror(errno));
        g_tmp[0] = '\0';
        return -1;
    }
    if (o->url != NULL) {
        snprintf(g_url, sizeof(g_url), "%s", o->url);
        return 0;
    }
    return net_nats_start(o, err, errlen);
}

static void net_env_close(void)
{
    net_child_stop(NET_CHILD_DAEMON, NET_STOP_GRACE_MS);
    net_child_stop(NET_CHILD_NATS, NET_STOP_GRACE_MS);
    if (g_tmp[0] != '\0') {
        if (g_keep)
            fprintf(stderr, "lanesched-bench: kept %s\n", g_tmp);
        else
            net_tree_remove(g_tmp);
        g_tmp[0] = '\0';
    }
}

/* ---- memory --------------------------------------------------------------------------------- */

long net_rss_kb(int pid, bool peak)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (pid <= 0)
        return -1;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    const char *key = peak ? "VmHWM:" : "VmRSS:";
    long kb = -1;
    while (kb < 0 && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, strlen(key)) == 0)
            kb = strtol(line + strlen(key), NULL, 10);
    }
    fclose(f);
    return kb;
}

void net_rss_peak_reset(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/clear_refs", pid);
    FILE *f = pid > 0 ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fputs("5", f); /* resets VmHWM to the current RSS (Linux >= 4.0) */
        fclose(f);
    }
}

/* ---- trace ----------------------------------------------------------------------------------- */

static void net_trace_free(net_trace_t *t)
{
    if (t->by_model != NULL)
        for (uint32_t m = 0; m < t->cfg.models; m++)
            free(t->by_model[m]);
    free(t->by_model);
    free(t->n_by_model);
    free(t->items);
    memset(t, 0, sizeof(*t));
}

static int net_trace_load(const net_opts_t *o, net_trace_t *t, char *err, size_t errlen)
{
    int rc = -1;
    memset(t, 0, sizeof(*t));
    if (o->trace_in != NULL) {
        if (wl_trace_read(o->trace_in, &t->cfg, &t->items, &t->n_items) != 0) {
            snprintf(err, errlen, "%s: cannot read the trace", o->trace_in);
            goto out;
        }
    } else {
        if (wl_preset(o->preset, o->seed, &t->cfg) != 0) {
            snprintf(err, errlen, "unknown preset \"%s\" (steady, bursty, churn, sustained)",
                     o->preset);
            goto out;
        }
        if (o->duration_s > 0)
            t->cfg.duration_s = o->duration_s;
        if (wl_generate(&t->cfg, &t->items, &t->n_items) != 0) {
            snprintf(err, errlen, "cannot generate the \"%s\" trace", o->preset);
            goto out;
        }
    }
    if (t->n_items == 0) {
        snprintf(err, errlen, "the trace has no items");
        goto out;
    }
    if (o->trace_out != NULL && wl_trace_write(o->trace_out, &t->cfg, t->items, t->n_items) != 0) {
        snprintf(err, errlen, "%s: cannot write the trace", o->trace_out);
        goto out;
    }
    for (size_t i = 0; i < t->n_items; i++)
        t->tokens += t->items[i].tokens;
    snprintf(err, errlen, "out of memory");
    t->by_model = calloc(t->cfg.models, sizeof(*t->by_model));
    t->n_by_model = calloc(t->cfg.models, sizeof(*t->n_by_model));
    if (t->by_model == NULL || t->n_by_model == NULL)
        goto out;
    for (size_t i = 0; i < t->n_items; i++) /* model < cfg.models: wl_generate, wl_trace_read */
        t->n_by_model[t->items[i].model]++;
    for (uint32_t m = 0; m < t->cfg.models; m++) {
        if ((t->by_model[m] = malloc((t->n_by_model[m] + 1) * sizeof(uint32_t))) == NULL)
            goto out;
        t->n_by_model[m] = 0;
    }
    for (size_t i = 0; i < t->n_items; i++) {
        uint32_t m = t->items[i].model;
        t->by_model[m][t->n_by_model[m]++] = (uint32_t)i;
    }
    err[0] = '\0';
    rc = 0;
out:
    if (rc != 0)
        net_trace_free(t);
    return rc;
}

/* ---- the run's shared pieces ----------------------------------------------------------------- */

struct net_worker {
    pthread_mutex_t mu; /* guards gpu (the progress line reads its stats) */
    gpu_t *gpu;
    uint64_t busy_until_ns; /* the worker's thread only */
};

static void net_u64_put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t net_u64_get(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void net_payload_encode(const net_run_t *run, uint32_t idx, uint64_t sent_ns, uint8_t *out)
{
    net_u64_put(out, run->nonce);
    net_u64_put(out + 8, idx);
    net_u64_put(out + 16, sent_ns);
}

int net_payload_decode(const net_run_t *run, const void *data, size_t len, uint32_t *idx)
{
    const uint8_t *p = data;
    if (p == NULL || len < NET_PAYLOAD_LEN || net_u64_get(p) != run->nonce)
        return 0;
    uint64_t i = net_u64_get(p + 8);
    if (i >= run->trace->n_items)
        return 0;
    *idx = (uint32_t)i;
    return 1;
}

size_t net_pace_take(net_run_t *run, uint32_t model, size_t next)
{
    const net_trace_t *t = run->trace;
    const uint32_t *ix = t->by_model[model];
    size_t n = t->n_by_model[model], max = run->opts->batch;
    double scale = run->opts->time_scale;
    if (next >= n || net_stopping(run))
        return 0;
    if (run->opts->no_pace)
        return n - next < max ? n - next : max;
    for (;;) {
        uint64_t due = run->t0_ns + (uint64_t)((double)t->items[ix[next]].t_ns * scale);
        uint64_t now = clock_mono_ns();
        if (now >= due)
            break;
        if (net_stopping(run))
            return 0;
        net_sleep_until(due - now > 100000000ull ? now + 100000000ull : due);
    }
    uint64_t now = clock_mono_ns();
    size_t k = 1;
    while (k < max && next + k < n &&
           run->t0_ns + (uint64_t)((double)t->items[ix[next + k]].t_ns * scale) <= now)
        k++;
    return k;
}

void net_worker_serve(net_run_t *run, net_worker_t *w, const uint32_t *idx, const uint64_t *sigs,
                      const uint32_t *tokens, size_t n, uint32_t pad_to)
{
    uint64_t now = clock_mono_ns(), real = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t expected = 0;
        if (atomic_compare_exchange_strong(&run->served_ns[idx[i]], &expected, now))
            atomic_fetch_add(&run->served_items, 1);
        else
            atomic_fetch_add(&run->redelivered_items, 1);
        real += tokens[i];
    }
    if (n == 0)
        return;
    pthread_mutex_lock(&w->mu);
    /* a one-shape batch is served by gpu_serve_mixed exactly as by gpu_serve */
    uint64_t ns = gpu_serve_mixed(w->gpu, sigs, (uint32_t)n, pad_to, real);
    pthread_mutex_unlock(&w->mu);
    if (w->busy_until_ns < now)
        w->busy_until_ns = now;
    w->busy_until_ns += (uint64_t)((double)ns * run->opts->time_scale);
    net_sleep_until(w->busy_until_ns);
}

void net_worker_acked(net_run_t *run, size_t n_items)
{
    uint64_t now = clock_mono_ns(), last = atomic_load(&run->last_ack_ns);
    atomic_fetch_add(&run->acked_items, n_items);
    while (last < now && !atomic_compare_exchange_weak(&run->last_ack_ns, &last, now)) {
    }
}

void net_run_tally_get(net_run_t *run, gpu_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t k = 0; k < run->n_workers; k++) {
        net_worker_t *w = run->workers[k];
        pthread_mutex_lock(&w->mu);
        const gpu_stats_t *s = gpu_stats(w->gpu);
        out->batches += s->batches;
        out->items += s->items;
        out->padded_tokens += s->padded_tokens;
        out->real_tokens += s->real_tokens;
        out->hits += s->hits;
        out->misses += s->misses;
        out->busy_ns += s->busy_ns;
        pthread_mutex_unlock(&w->mu);
    }
}

void net_progress_show(net_run_t *run, const char *label, double items_per_s, double queued,
                       double lanes, double waste_pct, double hit_pct)
{
    bool tty = isatty(STDOUT_FILENO);
    uint64_t now = clock_mono_ns();
    if (!tty && run->progress_ns != 0 && now - run->progress_ns < NET_PLAIN_PRINT_MS * 1000000ull)
        return;
    run->progress_ns = now;
    char lanes_text[24] = "-", hit_text[24] = "-";
    if (lanes >= 0)
        snprintf(lanes_text, sizeof(lanes_text), "%.0f", lanes);
    if (hit_pct >= 0)
        snprintf(hit_text, sizeof(hit_text), "%.1f%%", hit_pct);
    double t = now > run->t0_ns ? (double)(now - run->t0_ns) / 1e9 : 0.0;
    printf("%s[%s] %6.1fs  %7.0f items/s  queued %6.0f  lanes %5s  waste %5.1f%%  hit %6s%s",
           tty ? "\r\033[K" : "", label, t, items_per_s, queued, lanes_text, waste_pct, hit_text,
           tty ? "" : "\n");
    run->progress_open = tty;
    fflush(stdout);
}

void net_progress_end(net_run_t *run)
{
    if (run->progress_open)
        printf("\n");
    run->progress_open = false;
    fflush(stdout);
}

static uint64_t net_random_u64(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
        v = clock_mono_ns() ^ ((uint64_t)getpid() << 32);
    if (fd >= 0)
        close(fd);
    return v != 0 ? v : 1;
}

static void net_run_free(net_run_t *run)
{
    for (size_t k = 0; run->workers != NULL && k < run->n_workers; k++) {
        if (run->workers[k] == NULL)
            continue;
        pthread_mutex_destroy(&run->workers[k]->mu);
        gpu_destroy(run->workers[k]->gpu);
        free(run->workers[k]);
    }
    free(run->workers);
    free((void *)run->sent_ns);
    free((void *)run->acked_ns);
    free((void *)run->served_ns);
    memset(run, 0, sizeof(*run));
}

/* kind: a letter naming the system in the tag ('p' process, 'w' power, 'x' existing, 'j'). */
static int net_run_init(net_run_t *run, const net_opts_t *o, const net_trace_t *t, const char *url,
                        char kind)
{
    int rc = -1;
    memset(run, 0, sizeof(*run));
    run->opts = o;
    run->trace = t;
    run->url = url;
    run->nonce = net_random_u64();
    snprintf(run->tag, sizeof(run->tag), "%c%08" PRIx32, kind, (uint32_t)run->nonce);
    run->rss_base_kb = run->rss_peak_kb = -1;
    /* Invariant 5: the trace, then the GPU time of every item served alone (the worst case),
     * three times over, spread over the workers, then the drain timeout and some slack. */
    double serial_s = ((double)t->tokens * o->gpu.ns_per_padded_token +
                       (double)t->n_items * (double)o->gpu.batch_fixed_ns) *
                      o->time_scale / 1e9;
    run->limit_s = (o->no_pace ? 0.0 : t->cfg.duration_s * o->time_scale) +
                   3.0 * serial_s / (double)((size_t)t->cfg.models * o->workers) +
                   o->drain_timeout_s + NET_RUN_SLACK_S;
    run->sent_ns = calloc(t->n_items, sizeof(*run->sent_ns));
    run->acked_ns = calloc(t->n_items, sizeof(*run->acked_ns));
    run->served_ns = calloc(t->n_items, sizeof(*run->served_ns));
    run->n_workers = (size_t)t->cfg.models * o->workers;
    run->workers = calloc(run->n_workers, sizeof(*run->workers));
    if (run->sent_ns == NULL || run->acked_ns == NULL || run->served_ns == NULL ||
        run->workers == NULL)
        goto out;
    for (size_t k = 0; k < run->n_workers; k++) {
        net_worker_t *w = calloc(1, sizeof(*w));
        if (w == NULL)
            goto out;
        if (gpu_create(&o->gpu, &w->gpu) != 0) {
            free(w);
            goto out;
        }
        pthread_mutex_init(&w->mu, NULL);
        run->workers[k] = w;
    }
    rc = 0;
out:
    if (rc != 0)
        net_run_free(run);
    return rc;
}

/* ---- results --------------------------------------------------------------------------------- */

/* lanes.stats figures: counters, then sums over every shape of every model. */
typedef struct {
    uint64_t items_received, tokens_received, items_routed, tokens_routed, items_completed,
        tokens_completed, items_returned, duplicates, rejected, padded_tokens, real_tokens,
        lanes_opened, lane_reuses, shape_switches, dead_lettered, pending_items, publish_failures,
        dropped_messages, batches_expired_ack_deadline, consumers_declared_dead;
    uint64_t lanes, queued_items, inflight_items; /* now, not counters */
} live_stats_t;

typedef struct {
    char system[16];
    char durability[16];
    bool ran;
    char error[256];
    uint64_t accepted, accepted_tokens, duplicates, failed, served, redelivered, foreign;
    uint64_t worker_errors;
    double elapsed_s, items_per_s;
    double wait_p50_ms, wait_p99_ms, wait_max_ms; /* submit ack -> service start */
    double sub_p50_ms, sub_p99_ms, sub_max_ms;    /* submit -> service start */
    gpu_stats_t tally;
    double waste_pct, hit_pct;
    bool drained;
    bool have_stats;
    live_stats_t delta; /* counters: after - before; lanes/queued: after */
    int64_t token_difference;
    double daemon_waste_pct;
    uint64_t peak_queued;
    long rss_base_kb, rss_peak_kb;
    double bytes_per_item; /* < 0: n/a */
} net_result_t;

static int net_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank quantile of sorted v, in ms; -1 when empty. */
static double net_quantile_ms(const uint64_t *v, size_t n, double q)
{
    if (n == 0)
        return -1.0;
    size_t r = (size_t)ceil(q * (double)n);
    r = r < 1 ? 1 : r > n ? n : r;
    return (double)v[r - 1] / 1e6;
}

/* Everything the workers and producers measured (invariant 3). */
static int net_result_fill(net_run_t *run, net_result_t *r)
{
    size_t n = run->trace->n_items, na = 0, nb = 0;
    uint64_t *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));
    uint64_t first_sent = UINT64_MAX;
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t sent = atomic_load(&run->sent_ns[i]), acked = atomic_load(&run->acked_ns[i]);
        uint64_t served = atomic_load(&run->served_ns[i]);
        if (sent != 0 && sent < first_sent)
            first_sent = sent;
        if (served == 0)
            continue;
        if (acked != 0)
            a[na++] = served > acked ? served - acked : 0;
        if (sent != 0)
            b[nb++] = served > sent ? served - sent : 0;
    }
    qsort(a, na, sizeof(*a), net_u64_cmp);
    qsort(b, nb, sizeof(*b), net_u64_cmp);
    r->wait_p50_ms = net_quantile_ms(a, na, 0.50);
    r->wait_p99_ms = net_quantile_ms(a, na, 0.99);
    r->wait_max_ms = net_quantile_ms(a, na, 1.0);
    r->sub_p50_ms = net_quantile_ms(b, nb, 0.50);
    r->sub_p99_ms = net_quantile_ms(b, nb, 0.99);
    r->sub_max_ms = net_quantile_ms(b, nb, 1.0);
    free(a);
    free(b);

    r->accepted = atomic_load(&run->accepted_items);
    r->accepted_tokens = atomic_load(&run->accepted_tokens);
    r->duplicates = atomic_load(&run->duplicates);
    r->failed = atomic_load(&run->failed_items);
    r->served = atomic_load(&run->served_items);
    r->redelivered = atomic_load(&run->redelivered_items);
    r->foreign = atomic_load(&run->foreign_items);
    r->worker_errors = atomic_load(&run->worker_errors);
    uint64_t last = atomic_load(&run->last_ack_ns);
    r->elapsed_s =
        first_sent != UINT64_MAX && last > first_sent ? (double)(last - first_sent) / 1e9 : 0.0;
    r->items_per_s = r->elapsed_s > 0 ? (double)r->served / r->elapsed_s : 0.0;
    net_run_tally_get(run, &r->tally);
    r->waste_pct =
        report_pct(r->tally.padded_tokens - r->tally.real_tokens, r->tally.padded_tokens);
    r->hit_pct = r->tally.batches > 0 ? report_pct(r->tally.hits, r->tally.batches) : -1.0;
    r->drained = run->drained;
    r->peak_queued = run->peak_queued;
    r->rss_base_kb = run->rss_base_kb;
    r->rss_peak_kb = run->rss_peak_kb;
    r->bytes_per_item =
        r->rss_base_kb >= 0 && r->rss_peak_kb >= r->rss_base_kb && r->peak_queued > 0
            ? (double)(r->rss_peak_kb - r->rss_base_kb) * 1024.0 / (double)r->peak_queued
            : -1.0;
    return 0;
}

static void net_ms_text(char *buf, size_t len, double ms)
{
    if (ms < 0)
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%.1f ms", ms);
}

static void net_result_print(const net_result_t *r, const net_trace_t *t, const net_opts_t *o)
{
    char p50[32], p99[32], pmax[32], s50[32], s99[32];
    bool lanes = strcmp(r->system, "lanesched") == 0;
    printf("\n== %s%s%s\n", lanes ? "lanesched, durability " : "JetStream work queue, ",
           r->durability, lanes ? "" : " storage");
    if (!r->ran) {
        printf("not run: %s\n", r->error);
        return;
    }
    printf("items            %zu in the trace: %" PRIu64 " stored (%" PRIu64
           " duplicate answers), %" PRIu64 " failed; %" PRIu64 " served, %" PRIu64
           " served again, %" PRIu64 " foreign\n",
           t->n_items, r->accepted, r->duplicates, r->failed, r->served, r->redelivered,
           r->foreign);
    if (r->have_stats) {
        const live_stats_t *d = &r->delta;
        printf("tokens           received %" PRIu64 "  routed %" PRIu64 "  completed %" PRIu64
               "  received - completed %" PRId64 "%s\n",
               d->tokens_received, d->tokens_routed, d->tokens_completed, r->token_difference,
               r->token_difference == 0 ? "" : "  <-- NONZERO");
        if (r->drained)
            printf("                 (routed - received %" PRId64 ": redeliveries; submitted by "
                   "the producers %" PRIu64 ")\n",
                   (int64_t)(d->tokens_routed - d->tokens_received), r->accepted_tokens);
    } else {
        printf("tokens           stored %" PRIu64 " (of %" PRIu64 " in the trace)\n",
               r->accepted_tokens, t->tokens);
    }
    printf("items/s          %.1f end to end (%" PRIu64 " items, %.2f s from the first submit "
           "to the last ack)%s\n",
           r->items_per_s, r->served, r->elapsed_s, r->drained ? "" : "  NOT DRAINED");
    net_ms_text(p50, sizeof(p50), r->wait_p50_ms);
    net_ms_text(p99, sizeof(p99), r->wait_p99_ms);
    net_ms_text(pmax, sizeof(pmax), r->wait_max_ms);
    net_ms_text(s50, sizeof(s50), r->sub_p50_ms);
    net_ms_text(s99, sizeof(s99), r->sub_p99_ms);
    printf("wait             p50 %s  p99 %s  max %s (submit ack -> a worker starts it); from "
           "the submit: p50 %s  p99 %s\n",
           p50, p99, pmax, s50, s99);
    printf("padding waste    %.2f%% (workers: padded %" PRIu64 ", real %" PRIu64 ")", r->waste_pct,
           r->tally.padded_tokens, r->tally.real_tokens);
    if (r->have_stats)
        printf("; daemon's count %.2f%%", r->daemon_waste_pct);
    printf("\n");
    if (r->hit_pct >= 0)
        printf("shape hit rate   %.2f%% (%" PRIu64 " of %" PRIu64
               " batches; LRU of the last %" PRIu32 " shapes per worker)\n",
               r->hit_pct, r->tally.hits, r->tally.batches, o->gpu.cache_shapes);
    printf("batches          %" PRIu64 " (%.2f items each); GPU busy %.2f s simulated\n",
           r->tally.batches,
           r->tally.batches > 0 ? (double)r->tally.items / (double)r->tally.batches : 0.0,
           (double)r->tally.busy_ns / 1e9);
    if (r->have_stats)
        printf("lanes            opened %" PRIu64 ", reuses %" PRIu64 ", shape switches %" PRIu64
               ", items returned %" PRIu64 ", dead-lettered %" PRIu64 ", rejected %" PRIu64 "\n",
               r->delta.lanes_opened, r->delta.lane_reuses, r->delta.shape_switches,
               r->delta.items_returned, r->delta.dead_lettered, r->delta.rejected);
    if (r->have_stats &&
        (r->delta.publish_failures | r->delta.dropped_messages |
         r->delta.batches_expired_ack_deadline | r->delta.consumers_declared_dead) != 0)
        printf("daemon trouble   publish failures %" PRIu64 ", dropped messages %" PRIu64
               ", batches past their ack deadline %" PRIu64 ", consumers declared dead %" PRIu64
               "\n",
               r->delta.publish_failures, r->delta.dropped_messages,
               r->delta.batches_expired_ack_deadline, r->delta.consumers_declared_dead);
    const char *who = lanes ? "daemon memory   " : "server memory   ";
    if (r->bytes_per_item >= 0)
        printf("%s peak RSS %.1f MB - before the load %.1f MB over %" PRIu64
               " items held at the peak: %.0f bytes/item%s\n",
               who, (double)r->rss_peak_kb / 1024.0, (double)r->rss_base_kb / 1024.0,
               r->peak_queued, r->bytes_per_item,
               r->peak_queued < NET_SMALL_QUEUE ? " (queue too short for a stable figure)" : "");
    else
        printf("%s n/a (%s)\n", who,
               r->rss_base_kb < 0 ? "not a process this bench started"
                                  : "no items held at any sample");
    if (r->worker_errors > 0)
        printf("worker errors    %" PRIu64 "\n", r->worker_errors);
    fflush(stdout);
}

/* ---- lanes.stats ----------------------------------------------------------------------------- */

/* p at '{' or '['; the character after its matching close, or NULL. Strings are skipped. */
static const char *live_json_skip(const char *p)
{
    int depth = 0;
    for (; *p != '\0'; p++) {
        if (*p == '"') {
            for (p++; *p != '\0' && *p != '"'; p++)
                if (*p == '\\' && p[1] != '\0')
                    p++;
            if (*p == '\0')
                return NULL;
            continue;
        }
        if (*p == '{' || *p == '[')
            depth++;
        else if ((*p == '}' || *p == ']') && --depth == 0)
            return p + 1;
    }
    return NULL;
}

/* The object or array value of "key" in [from, to): its span. */
static bool live_json_span(const char *from, const char *to, const char *key, const char **b,
                           const char **e)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(from, pat);
    if (p == NULL || p >= to)
        return false;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != '{' && *p != '[')
        return false;
    const char *end = live_json_skip(p);
    if (end == NULL || end > to)
        return false;
    *b = p;
    *e = end;
    return true;
}

/* Sum of the numbers after every "key": in [b, e); false when there is none. */
static bool live_json_sum(const char *b, const char *e, const char *key, uint64_t *out)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    size_t len = strlen(pat);
    uint64_t sum = 0;
    bool found = false;
    for (const char *p = strstr(b, pat); p != NULL && p < e; p = strstr(p + len, pat)) {
        sum += strtoull(p + len, NULL, 10);
        found = true;
    }
    *out = sum;
    return found;
}

/* The counters read from lanes.stats, by key. */
#define LIVE_COUNTERS(X)            \
    X(items_received)               \
    X(tokens_received)              \
    X(items_routed)                 \
    X(tokens_routed)                \
    X(items_completed)              \
    X(tokens_completed)             \
    X(items_returned)               \
    X(duplicates)                   \
    X(padded_tokens)                \
    X(real_tokens)                  \
    X(lanes_opened)                 \
    X(lane_reuses)                  \
    X(shape_switches)               \
    X(dead_lettered)                \
    X(pending_items)                \
    X(publish_failures)             \
    X(dropped_messages)             \
    X(batches_expired_ack_deadline) \
    X(consumers_declared_dead)

static int live_stats_parse(const char *json, live_stats_t *s)
{
    const char *end = json + strlen(json), *cb, *ce, *mb, *me, *rb, *re;
    memset(s, 0, sizeof(*s));
    if (!live_json_span(json, end, "counters", &cb, &ce))
        return -1;
#define LIVE_COUNTER_READ(name)                  \
    if (!live_json_sum(cb, ce, #name, &s->name)) \
        return -1;
    LIVE_COUNTERS(LIVE_COUNTER_READ)
#undef LIVE_COUNTER_READ
    if (live_json_span(cb, ce, "rejected", &rb, &re))
        for (const char *p = strchr(rb, ':'); p != NULL && p < re; p = strchr(p + 1, ':'))
            s->rejected += strtoull(p + 1, NULL, 10);
    if (live_json_span(ce, end, "models", &mb, &me)) {
        live_json_sum(mb, me, "lanes", &s->lanes);
        live_json_sum(mb, me, "queued_items", &s->queued_items);
        live_json_sum(mb, me, "pending_items", &s->inflight_items);
    }
    return 0;
}

static int live_stats_fetch(natsConnection *nc, const char *prefix, live_stats_t *out)
{
    char subject[256];
    natsMsg *m = NULL;
    char *json = NULL;
    int rc = -1;
    snprintf(subject, sizeof(subject), "%s.stats", prefix);
    if (natsConnection_Request(&m, nc, subject, "", 0, LIVE_STATS_TIMEOUT_MS) != NATS_OK)
        goto out;
    json = strndup(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
    if (json == NULL)
        goto out;
    rc = live_stats_parse(json, out);
out:
    free(json);
    natsMsg_Destroy(m);
    return rc;
}

/* d = after - before for the counters; the "now" figures are after's. */
static void live_stats_delta(const live_stats_t *before, const live_stats_t *after, live_stats_t *d)
{
    *d = *after;
#define LIVE_COUNTER_SUB(name) d->name = after->name - before->name;
    LIVE_COUNTERS(LIVE_COUNTER_SUB)
#undef LIVE_COUNTER_SUB
    d->rejected = after->rejected - before->rejected;
}

/* ---- live: producers and workers ------------------------------------------------------------ */

typedef struct {
    net_run_t *run;
    uint32_t model;
    size_t index; /* worker index */
    pthread_t thread;
    bool started;
    char error[200];
} live_thread_t;

static void live_error_note(live_thread_t *x, const char *fmt, const char *a, const char *b)
{
    if (x->error[0] == '\0')
        snprintf(x->error, sizeof(x->error), fmt, a, b);
}

static void *live_producer_main(void *arg)
{
    live_thread_t *x = arg;
    net_run_t *run = x->run;
    const net_trace_t *t = run->trace;
    const char *model = wl_model_name(x->model);
    const uint32_t *ix = t->by_model[x->model];
    size_t n = t->n_by_model[x->model], next = 0, batch = run->opts->batch;
    lc_client_t *client = NULL;
    codec_work_item_t *wi = calloc(batch, sizeof(*wi));
    char(*ids)[40] = calloc(batch, sizeof(*ids));
    uint8_t(*payloads)[NET_PAYLOAD_LEN] = calloc(batch, sizeof(*payloads));
    lc_item_result_t *results = calloc(batch, sizeof(*results));
    uint32_t *tokens = calloc(batch, sizeof(*tokens));
    char name[64], err[256] = "";
    unsigned failures = 0;

    if (wi == NULL || ids == NULL || payloads == NULL || results == NULL || tokens == NULL) {
        live_error_note(x, "%s%s", "out of memory", "");
        goto out;
    }
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    snprintf(name, sizeof(name), "bench-%s-producer-%" PRIu32, run->tag, x->model);
    cc.servers = run->url;
    cc.prefix = run->opts->prefix;
    cc.name = name;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &client);
    if (st != LC_OK) {
        live_error_note(x, "connect: %s: %s", lc_status_str(st), err);
        goto out;
    }
    while (next < n) {
        size_t k = net_pace_take(run, x->model, next);
        if (k == 0)
            break;
        uint64_t sent = clock_mono_ns();
        for (size_t j = 0; j < k; j++) {
            uint32_t i = ix[next + j];
            const wl_item_t *it = &t->items[i];
            int len = snprintf(ids[j], sizeof(ids[j]), "%s-%" PRIu32, run->tag, i);
            net_payload_encode(run, i, sent, payloads[j]);
            /* A signature of 0 cannot be sent (proto3: absent); never seen in practice. */
            wi[j] = (codec_work_item_t){.id = {(const uint8_t *)ids[j], (size_t)len},
                                        .model = model,
                                        .has_signature = true,
                                        .signature = it->signature != 0 ? it->signature : 1,
                                        .tokens = it->tokens,
                                        .payload = {payloads[j], NET_PAYLOAD_LEN}};
            tokens[j] = it->tokens;
            atomic_store(&run->sent_ns[i], sent);
        }
        lc_submit_summary_t sum;
        st = lc_submit_request(client, model, wi, k, LIVE_SUBMIT_TIMEOUT_MS, LIVE_SUBMIT_RETRIES,
                               results, &sum);
        uint64_t acked = clock_mono_ns();
        for (size_t j = 0; j < k; j++) {
            uint32_t i = ix[next + j];
            if (st == LC_OK && results[j].status != CODEC_ITEM_REJECTED) {
                atomic_store(&run->acked_ns[i], acked);
                atomic_fetch_add(&run->accepted_items, 1);
                atomic_fetch_add(&run->accepted_tokens, tokens[j]);
                if (results[j].status == CODEC_ITEM_DUPLICATE)
                    atomic_fetch_add(&run->duplicates, 1);
            } else {
                atomic_fetch_add(&run->failed_items, 1);
                if (st == LC_OK)
                    live_error_note(x, "item rejected: %s%s", results[j].reason, "");
            }
        }
        next += k;
        if (st == LC_OK) {
            failures = 0;
            continue;
        }
        live_error_note(x, "submit: %s: %s", lc_status_str(st), lc_client_error_get(client));
        if (++failures >= LIVE_SUBMIT_GIVE_UP)
            break; /* nobody stores anything any more: the rest counts as failed */
    }
out:
    if (next < n)
        atomic_fetch_add(&run->failed_items, n - next); /* never submitted */
    atomic_fetch_add(&run->producers_done, 1);
    lc_client_close(client);
    free(wi);
    free(ids);
    free(payloads);
    free(results);
    free(tokens);
    return NULL;
}

/* Serves one batch and acks it whole. */
static void live_batch_handle(live_thread_t *x, lc_consumer_t *c, const codec_batch_t *b,
                              uint32_t *idx, uint64_t *sigs, uint32_t *tokens)
{
    net_run_t *run = x->run;
    size_t m = 0;
    for (size_t i = 0; i < b->n_items; i++) {
        if (!net_payload_decode(run, b->items[i].payload.ptr, b->items[i].payload.len, &idx[m])) {
            atomic_fetch_add(&run->foreign_items, 1);
            continue;
        }
        sigs[m] = b->signature;
        tokens[m] = b->items[i].tokens;
        m++;
    }
    net_worker_serve(run, run->workers[x->index], idx, sigs, tokens, m, b->pad_to);
    lc_ack_reply_t reply;
    lc_status_t st = lc_ack_all_send(c, b->batch_id, LIVE_ACK_TIMEOUT_MS, &reply);
    if (st == LC_OK) {
        net_worker_acked(run, m);
    } else {
        atomic_fetch_add(&run->worker_errors, 1);
        live_error_note(x, "ack: %s: %s", lc_status_str(st), lc_consumer_error_get(c));
    }
}

static void *live_worker_main(void *arg)
{
    live_thread_t *x = arg;
    net_run_t *run = x->run;
    const net_opts_t *o = run->opts;
    lc_client_t *client = NULL;
    lc_consumer_t *c = NULL;
    size_t cap = o->gpu.max_batch_size + 1;
    uint32_t *idx = calloc(cap, sizeof(*idx)), *tokens = calloc(cap, sizeof(*tokens));
    uint64_t *sigs = calloc(cap, sizeof(*sigs));
    char name[64], err[256] = "";
    bool ready = false;

    if (idx == NULL || tokens == NULL || sigs == NULL) {
        live_error_note(x, "%s%s", "out of memory", "");
        goto out;
    }
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    snprintf(name, sizeof(name), "bench-%s-worker-%zu", run->tag, x->index);
    cc.servers = run->url;
    cc.prefix = o->prefix;
    cc.name = name;
    lc_status_t st = lc_client_open(&cc, err, sizeof(err), &client);
    if (st != LC_OK) {
        live_error_note(x, "connect: %s: %s", lc_status_str(st), err);
        goto out;
    }
    lc_consumer_config_t kc;
    lc_consumer_config_init(&kc);
    kc.model = wl_model_name(x->model);
    kc.max_batch_size = o->gpu.max_batch_size;
    kc.max_batch_tokens = o->gpu.max_batch_tokens;
    kc.max_input_tokens = o->gpu.max_input_tokens;
    kc.name = name;
    kc.request_timeout_ms = LIVE_ACK_TIMEOUT_MS;
    kc.request_retries = 2;
    kc.pull_max_batches = 1;
    st = lc_consumer_open(client, &kc, &c);
    if (st != LC_OK) {
        live_error_note(x, "register: %s: %s", lc_status_str(st), lc_client_error_get(client));
        goto out;
    }
    ready = true;
    atomic_fetch_add(&run->workers_ready, 1);
    while (!net_stopping(run)) {
        codec_batch_t *b = NULL;
        st = lc_batch_next(c, LIVE_PULL_WAIT_MS, &b);
        if (st == LC_OK) {
            /* The next batch is packed while this one is served (one credit outstanding). */
            lc_pull_send(c, 1, LIVE_PREFETCH_EXPIRES_MS);
            live_batch_handle(x, c, b, idx, sigs, tokens);
            codec_batch_destroy(b);
        } else if (st == LC_EEMPTY || st == LC_ETIMEOUT) {
            continue;
        } else if (st == LC_EUNKNOWN_CONSUMER ||
                   (st == LC_EREFUSED && strstr(lc_consumer_error_get(c), "unknown_consumer"))) {
            /* The daemon's error is "unknown_consumer: ...", which lc_batch_next reports as
             * LC_EREFUSED: matched on the code word here. */
            atomic_fetch_add(&run->worker_errors, 1);
            if (lc_consumer_register(c) != LC_OK)
                net_sleep_ms(100);
        } else {
            atomic_fetch_add(&run->worker_errors, 1);
            live_error_note(x, "pull: %s: %s", lc_status_str(st), lc_consumer_error_get(c));
            net_sleep_ms(100);
        }
    }
    lc_bye_send(c, 2000);
out:
    if (!ready)
        atomic_fetch_add(&run->workers_failed, 1);
    lc_consumer_close(c);
    lc_client_close(client);
    free(idx);
    free(tokens);
    free(sigs);
    return NULL;
}

/* ---- live: one run against one daemon -------------------------------------------------------- */

static void live_threads_join(live_thread_t *xs, size_t n)
{
    for (size_t i = 0; xs != NULL && i < n; i++) {
        if (xs[i].started)
            pthread_join(xs[i].thread, NULL);
        xs[i].started = false;
    }
}

static void live_threads_error_print(const live_thread_t *xs, size_t n, const char *what)
{
    for (size_t i = 0; xs != NULL && i < n; i++)
        if (xs[i].error[0] != '\0')
            fprintf(stderr, "lanesched-bench: %s %zu: %s\n", what, i, xs[i].error);
}

/* The daemon at daemon_pid (0: unknown) serves prefix on url; level names the run. */
static int live_run(const net_opts_t *o, const net_trace_t *t, const char *url, const char *level,
                    int daemon_pid, net_result_t *res)
{
    int rc = -1;
    net_run_t run;
    natsConnection *nc = NULL;
    live_thread_t *workers = NULL, *producers = NULL;
    live_stats_t s0 = {0}, s = {0}, prev = {0};
    char label[48];
    bool have_run = false;

    memset(res, 0, sizeof(*res));
    snprintf(res->system, sizeof(res->system), "lanesched");
    snprintf(res->durability, sizeof(res->durability), "%s", level);
    snprintf(label, sizeof(label), "lanesched %s", level);
    char kind = strcmp(level, "process") == 0 ? 'p' : strcmp(level, "power") == 0 ? 'w' : 'x';
    if (net_run_init(&run, o, t, url, kind) != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    have_run = true;
    natsStatus ns = natsConnection_ConnectTo(&nc, url);
    if (ns != NATS_OK) {
        snprintf(res->error, sizeof(res->error), "connect %s: %s", url, natsStatus_GetText(ns));
        goto out;
    }
    uint64_t until = clock_mono_ns() + 5000000000ull;
    while (live_stats_fetch(nc, o->prefix, &s0) != 0) {
        if (clock_mono_ns() > until || net_stopping(&run)) {
            snprintf(res->error, sizeof(res->error), "no lanesched answers on %s.stats at %s",
                     o->prefix, url);
            goto out;
        }
        net_sleep_ms(100);
    }
    if (daemon_pid > 0) {
        net_rss_peak_reset(daemon_pid);
        run.rss_base_kb = net_rss_kb(daemon_pid, false);
        run.rss_peak_kb = run.rss_base_kb;
    }

    workers = calloc(run.n_workers, sizeof(*workers));
    producers = calloc(t->cfg.models, sizeof(*producers));
    if (workers == NULL || producers == NULL) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    for (size_t k = 0; k < run.n_workers; k++) {
        workers[k] = (live_thread_t){.run = &run, .model = (uint32_t)(k / o->workers), .index = k};
        workers[k].started =
            pthread_create(&workers[k].thread, NULL, live_worker_main, &workers[k]) == 0;
        if (!workers[k].started)
            atomic_fetch_add(&run.workers_failed, 1);
    }
    until = clock_mono_ns() + NET_READY_MS * 1000000ull;
    while (atomic_load(&run.workers_ready) + atomic_load(&run.workers_failed) < run.n_workers &&
           clock_mono_ns() < until && !net_stopping(&run))
        net_sleep_ms(10);
    if (atomic_load(&run.workers_ready) < run.n_workers) {
        atomic_store(&run.stop, true);
        live_threads_join(workers, run.n_workers);
        live_threads_error_print(workers, run.n_workers, "worker");
        snprintf(res->error, sizeof(res->error), "%u of %zu workers registered",
                 atomic_load(&run.workers_ready), run.n_workers);
        goto out;
    }

    run.t0_ns = clock_mono_ns() + 20000000ull;
    for (uint32_t m = 0; m < t->cfg.models; m++) {
        producers[m] = (live_thread_t){.run = &run, .model = m};
        producers[m].started =
            pthread_create(&producers[m].thread, NULL, live_producer_main, &producers[m]) == 0;
        if (!producers[m].started) {
            atomic_fetch_add(&run.failed_items, t->n_by_model[m]);
            atomic_fetch_add(&run.producers_done, 1);
        }
    }

    /* Invariant 5: the run ends drained, stalled past the drain timeout, at its limit or on a
     * signal. */
    uint64_t deadline = run.t0_ns + (uint64_t)(run.limit_s * 1e9), progress_at = 0;
    uint64_t next_sample = clock_mono_ns(), next_print = run.t0_ns + NET_PRINT_MS * 1000000ull;
    uint64_t print_at = run.t0_ns, completed_last = 0;
    prev = s0;
    s = s0;
    for (;;) {
        net_sleep_until(next_sample);
        uint64_t now = clock_mono_ns();
        next_sample = now + NET_SAMPLE_MS * 1000000ull;
        if (live_stats_fetch(nc, o->prefix, &s) == 0) {
            uint64_t held = s.queued_items + s.inflight_items;
            if (held > run.peak_queued)
                run.peak_queued = held;
        }
        if (daemon_pid > 0) {
            long kb = net_rss_kb(daemon_pid, false);
            if (kb > run.rss_peak_kb)
                run.rss_peak_kb = kb;
        }
        if (now >= next_print) {
            gpu_stats_t tally;
            net_run_tally_get(&run, &tally);
            double dt = (double)(now - print_at) / 1e9;
            uint64_t padded = s.padded_tokens - s0.padded_tokens,
                     real = s.real_tokens - s0.real_tokens;
            net_progress_show(
                &run, label, dt > 0 ? (double)(s.items_completed - prev.items_completed) / dt : 0,
                (double)s.queued_items, (double)s.lanes, report_pct(padded - real, padded),
                tally.batches > 0 ? report_pct(tally.hits, tally.batches) : -1.0);
            prev = s;
            print_at = now;
            next_print = now + NET_PRINT_MS * 1000000ull;
        }
        if (s.items_completed != completed_last || progress_at == 0) {
            completed_last = s.items_completed;
            progress_at = now;
        }
        if (atomic_load(&run.producers_done) == t->cfg.models) {
            if (s.queued_items == 0 && s.inflight_items == 0 &&
                s.items_received - s0.items_received >= atomic_load(&run.accepted_items) &&
                s.tokens_completed - s0.tokens_completed >=
                    s.tokens_received - s0.tokens_received) {
                run.drained = true;
                break;
            }
            if (now - progress_at > (uint64_t)(o->drain_timeout_s * 1e9)) {
                net_progress_end(&run);
                fprintf(stderr,
                        "lanesched-bench: %s: not drained; nothing completed for %.0f s after the "
                        "last submit\n",
                        label, o->drain_timeout_s);
                break;
            }
        }
        if (net_stopping(&run))
            break;
        if (daemon_pid > 0 && net_child_exited(NET_CHILD_DAEMON, NULL)) {
            net_progress_end(&run);
            fprintf(stderr, "lanesched-bench: %s: lanesched exited during the run\n", label);
            net_daemon_log_print(level);
            daemon_pid = 0;
            break;
        }
        if (now > deadline) {
            net_progress_end(&run);
            fprintf(stderr, "lanesched-bench: %s: stopped at the run's limit of %.0f s\n", label,
                    run.limit_s);
            break;
        }
    }
    net_progress_end(&run);
    atomic_store(&run.stop, true);
    live_threads_join(producers, t->cfg.models);
    live_threads_join(workers, run.n_workers);
    live_threads_error_print(producers, t->cfg.models, "producer");
    live_threads_error_print(workers, run.n_workers, "worker");

    if (live_stats_fetch(nc, o->prefix, &s) == 0) {
        res->have_stats = true;
        live_stats_delta(&s0, &s, &res->delta);
        res->token_difference =
            (int64_t)res->delta.tokens_received - (int64_t)res->delta.tokens_completed;
        res->daemon_waste_pct =
            report_pct(res->delta.padded_tokens - res->delta.real_tokens, res->delta.padded_tokens);
    }
    if (daemon_pid > 0) {
        long hwm = net_rss_kb(daemon_pid, true);
        if (hwm > run.rss_peak_kb)
            run.rss_peak_kb = hwm;
    }
    if (net_result_fill(&run, res) != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        goto out;
    }
    res->ran = true;
    rc = 0;
out:
    if (have_run) {
        atomic_store(&run.stop, true);
        live_threads_join(producers, t->cfg.models);
        live_threads_join(workers, run.n_workers);
        net_run_free(&run);
    }
    free(workers);
    free(producers);
    natsConnection_Destroy(nc);
    return rc;
}

/* ---- flags ----------------------------------------------------------------------------------- */

static void net_help(FILE *f, bool baseline)
{
    fprintf(f,
            "Usage: lanesched-bench %s [flags]\n"
            "%s\n\n",
            baseline ? "baseline" : "live",
            baseline ? "The trace through a JetStream work-queue stream (file storage, a pull "
                       "consumer per model,\nan ack per message) with simulated GPU workers, "
                       "against a nats-server the bench starts."
                     : "The trace over NATS against lanesched (started by the bench, or --url) "
                       "with simulated\nGPU workers, at both durability levels; --baseline adds "
                       "JetStream and the items/s ratio.");
    fputs("Trace:\n"
          "  --preset NAME          steady, bursty, churn or sustained (default steady)\n"
          "  --seed N               generator seed (default 1)\n"
          "  --duration S           seconds of arrivals (default: the preset's)\n"
          "  --trace-in FILE        replay a trace file instead of generating one\n"
          "  --trace-out FILE       write the trace replayed\n"
          "System:\n"
          "  --url URL              use this nats-server instead of starting one\n"
          "  --nats-server PATH     nats-server binary (default: nats-server on PATH)\n",
          f);
    if (!baseline)
        fputs("  --lanesched PATH       lanesched binary (default: next to this binary)\n"
              "  --prefix P             lanesched's subject prefix (default lanes)\n"
              "  --durability L         process, power or both: one run each (default both;\n"
              "                         with --url the running daemon's, one run)\n"
              "  --baseline             also run the JetStream baseline on the same trace and\n"
              "                         print the end-to-end items/s ratio lanesched / JetStream\n",
              f);
    fputs("Load:\n"
          "  --workers N            simulated GPU workers per model (default 2)\n"
          "  --batch N              items per Submit message (JetStream: async publishes per\n"
          "                         wait for their acks) (default 16)\n"
          "  --time-scale F         wall time = trace time x F, arrivals and service (default 1)\n"
          "  --no-pace              submit as fast as acks come back, ignoring arrival times\n"
          "  --drain-timeout S      after the last submit, give up once nothing completed for\n"
          "                         S s (default 60)\n"
          "Workers (defaults: gpu.c's):\n"
          "  --max-batch-size N     --max-batch-tokens N     --max-input-tokens N\n"
          "  --batch-fixed-us N     per-batch service time\n"
          "  --ns-per-token F       service time per padded token\n"
          "  --cache-shapes N       prefix cache: LRU of the last N shapes served\n"
          "Output:\n"
          "  --json FILE            results as JSON\n"
          "  --keep                 keep the temp directory (logs, data)\n"
          "Exit status: 0 all drained with a token difference of 0; 1 tokens lost, not drained\n"
          "or items failed; 2 usage or setup error.\n",
          f);
}

/* "--flag value" or "--flag=value": 1 and *v set, 0 another flag, -1 value missing. */
static int net_flag(int argc, char **argv, int *i, const char *name, const char **v)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *v = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "lanesched-bench: %s needs a value\n", name);
        return -1;
    }
    *v = argv[++*i];
    return 1;
}

static bool net_u64_parse(const char *flag, const char *text, uint64_t min, uint64_t max,
                          uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max) {
        fprintf(stderr,
                "lanesched-bench: %s: \"%s\" is not a whole number in [%" PRIu64 ", %" PRIu64 "]\n",
                flag, text, min, max);
        return false;
    }
    *out = v;
    return true;
}

static bool net_double_parse(const char *flag, const char *text, double min, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < min) {
        fprintf(stderr, "lanesched-bench: %s: \"%s\" is not a number >= %g\n", flag, text, min);
        return false;
    }
    *out = v;
    return true;
}

/* 0 to run, 1 after --help, -1 on a usage error. */
static int net_args_parse(int argc, char **argv, bool baseline, net_opts_t *o, char *self_dir_bin,
                          size_t self_len)
{
    static const char *const live_only[] = {"--lanesched", "--prefix", "--durability",
                                            "--baseline"};
    memset(o, 0, sizeof(*o));
    o->preset = "steady";
    o->seed = 1;
    o->prefix = LC_DEFAULT_PREFIX;
    o->nats_server = "nats-server";
    o->durability = NET_DURABILITY_PROCESS | NET_DURABILITY_POWER;
    o->workers = 2;
    o->batch = 16;
    o->time_scale = 1.0;
    o->drain_timeout_s = 60.0;
    gpu_config_default(&o->gpu);
    char self[NET_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL)
        slash[1] = '\0';
    snprintf(self_dir_bin, self_len, "%slanesched", slash != NULL ? self : "");
    o->lanesched = self_dir_bin;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        uint64_t u = 0;
        int r = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            net_help(stdout, baseline);
            return 1;
        }
        for (size_t k = 0; baseline && k < sizeof(live_only) / sizeof(live_only[0]); k++) {
            size_t len = strlen(live_only[k]);
            if (strncmp(a, live_only[k], len) == 0 && (a[len] == '\0' || a[len] == '=')) {
                fprintf(stderr, "lanesched-bench baseline: %s is a live flag\n", live_only[k]);
                return -1;
            }
        }
#define NET_VALUE(name) ((r = net_flag(argc, argv, &i, name, &v)) != 0)
        if (strcmp(a, "--no-pace") == 0) {
            o->no_pace = true;
        } else if (strcmp(a, "--baseline") == 0) {
            o->baseline = true;
        } else if (strcmp(a, "--keep") == 0) {
            o->keep = true;
        } else if (NET_VALUE("--preset")) {
            o->preset = v;
        } else if (NET_VALUE("--seed")) {
            if (r < 0 || !net_u64_parse(a, v, 0, UINT64_MAX, &o->seed))
                return -1;
        } else if (NET_VALUE("--duration")) {
            if (r < 0 || !net_double_parse("--duration", v, 0.001, &o->duration_s))
                return -1;
        } else if (NET_VALUE("--trace-in")) {
            o->trace_in = v;
        } else if (NET_VALUE("--trace-out")) {
            o->trace_out = v;
        } else if (NET_VALUE("--url")) {
            o->url = v;
        } else if (NET_VALUE("--nats-server")) {
            o->nats_server = v;
        } else if (NET_VALUE("--lanesched")) {
            o->lanesched = v;
        } else if (NET_VALUE("--prefix")) {
            o->prefix = v;
        } else if (NET_VALUE("--durability")) {
            if (r < 0)
                return -1;
            o->durability = strcmp(v, "process") == 0 ? NET_DURABILITY_PROCESS
                            : strcmp(v, "power") == 0 ? NET_DURABILITY_POWER
                            : strcmp(v, "both") == 0 ? NET_DURABILITY_PROCESS | NET_DURABILITY_POWER
                                                     : 0;
            if (o->durability == 0) {
                fprintf(stderr, "lanesched-bench: --durability: process, power or both\n");
                return -1;
            }
        } else if (NET_VALUE("--workers")) {
            if (r < 0 || !net_u64_parse("--workers", v, 1, 256, &u))
                return -1;
            o->workers = (uint32_t)u;
        } else if (NET_VALUE("--batch")) {
            if (r < 0 || !net_u64_parse("--batch", v, 1, 4096, &u))
                return -1;
            o->batch = (uint32_t)u;
        } else if (NET_VALUE("--time-scale")) {
            if (r < 0 || !net_double_parse("--time-scale", v, 0.0, &o->time_scale))
                return -1;
        } else if (NET_VALUE("--drain-timeout")) {
            if (r < 0 || !net_double_parse("--drain-timeout", v, 0.0, &o->drain_timeout_s))
                return -1;
        } else if (NET_VALUE("--max-batch-size")) {
            if (r < 0 || !net_u64_parse("--max-batch-size", v, 1, 65536, &u))
                return -1;
            o->gpu.max_batch_size = (uint32_t)u;
        } else if (NET_VALUE("--max-batch-tokens")) {
            if (r < 0 || !net_u64_parse("--max-batch-tokens", v, 1, UINT32_MAX, &u))
                return -1;
            o->gpu.max_batch_tokens = (uint32_t)u;
        } else if (NET_VALUE("--max-input-tokens")) {
            if (r < 0 || !net_u64_parse("--max-input-tokens", v, 0, UINT32_MAX, &u))
                return -1;
            o->gpu.max_input_tokens = (uint32_t)u;
        } else if (NET_VALUE("--batch-fixed-us")) {
            if (r < 0 || !net_u64_parse("--batch-fixed-us", v, 0, 3600000000ull, &u))
                return -1;
            o->gpu.batch_fixed_ns = u * 1000u;
        } else if (NET_VALUE("--ns-per-token")) {
            if (r < 0 || !net_double_parse("--ns-per-token", v, 0.0, &o->gpu.ns_per_padded_token))
                return -1;
        } else if (NET_VALUE("--cache-shapes")) {
            if (r < 0 || !net_u64_parse("--cache-shapes", v, 0, 1024, &u))
                return -1;
            o->gpu.cache_shapes = (uint32_t)u;
        } else if (NET_VALUE("--json")) {
            o->json_path = v;
        } else {
            if (r < 0)
                return -1;
            fprintf(stderr, "lanesched-bench: unknown argument \"%s\" (see --help)\n", a);
            return -1;
        }
        if (r < 0)
            return -1;
#undef NET_VALUE
    }
    return 0;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void net_json_num(FILE *f, const char *key, double v, bool na_when_negative)
{
    if (na_when_negative && v < 0)
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%.3f", key, v);
}

static void net_json_result(FILE *f, const net_result_t *r)
{
    fputs("{\"system\":", f);
    report_json_str(f, r->system);
    fputs(",\"durability\":", f);
    report_json_str(f, r->durability);
    fprintf(f, ",\"ran\":%s", r->ran ? "true" : "false");
    if (!r->ran) {
        fputs(",\"error\":", f);
        report_json_str(f, r->error);
        fputs("}", f);
        return;
    }
    fprintf(f,
            ",\"drained\":%s,\"items_stored\":%" PRIu64 ",\"tokens_stored\":%" PRIu64
            ",\"duplicates\":%" PRIu64 ",\"items_failed\":%" PRIu64 ",\"items_served\":%" PRIu64
            ",\"items_served_again\":%" PRIu64 ",\"foreign_items\":%" PRIu64
            ",\"worker_errors\":%" PRIu64,
            r->drained ? "true" : "false", r->accepted, r->accepted_tokens, r->duplicates,
            r->failed, r->served, r->redelivered, r->foreign, r->worker_errors);
    net_json_num(f, "elapsed_s", r->elapsed_s, false);
    net_json_num(f, "items_per_s", r->items_per_s, false);
    net_json_num(f, "wait_p50_ms", r->wait_p50_ms, true);
    net_json_num(f, "wait_p99_ms", r->wait_p99_ms, true);
    net_json_num(f, "wait_max_ms", r->wait_max_ms, true);
    net_json_num(f, "wait_from_submit_p50_ms", r->sub_p50_ms, true);
    net_json_num(f, "wait_from_submit_p99_ms", r->sub_p99_ms, true);
    net_json_num(f, "padding_waste_pct", r->waste_pct, false);
    net_json_num(f, "shape_hit_rate_pct", r->hit_pct, true);
    fprintf(f,
            ",\"batches\":%" PRIu64 ",\"padded_tokens\":%" PRIu64 ",\"real_tokens\":%" PRIu64
            ",\"hits\":%" PRIu64 ",\"gpu_busy_s\":%.3f,\"peak_held_items\":%" PRIu64,
            r->tally.batches, r->tally.padded_tokens, r->tally.real_tokens, r->tally.hits,
            (double)r->tally.busy_ns / 1e9, r->peak_queued);
    if (r->rss_base_kb >= 0)
        fprintf(f, ",\"rss_base_kb\":%ld,\"rss_peak_kb\":%ld", r->rss_base_kb, r->rss_peak_kb);
    net_json_num(f, "bytes_per_held_item", r->bytes_per_item, true);
    if (r->have_stats) {
        const live_stats_t *d = &r->delta;
        fprintf(f,
                ",\"tokens_received\":%" PRIu64 ",\"tokens_routed\":%" PRIu64
                ",\"tokens_completed\":%" PRIu64 ",\"token_difference\":%" PRId64
                ",\"items_received\":%" PRIu64 ",\"items_completed\":%" PRIu64
                ",\"items_returned\":%" PRIu64 ",\"lanes_opened\":%" PRIu64
                ",\"lane_reuses\":%" PRIu64 ",\"shape_switches\":%" PRIu64
                ",\"dead_lettered\":%" PRIu64 ",\"rejected\":%" PRIu64
                ",\"publish_failures\":%" PRIu64 ",\"dropped_messages\":%" PRIu64,
                d->tokens_received, d->tokens_routed, d->tokens_completed, r->token_difference,
                d->items_received, d->items_completed, d->items_returned, d->lanes_opened,
                d->lane_reuses, d->shape_switches, d->dead_lettered, d->rejected,
                d->publish_failures, d->dropped_messages);
        net_json_num(f, "daemon_padding_waste_pct", r->daemon_waste_pct, false);
    }
    fputs("}", f);
}

static int net_json_write(const char *path, const char *command, const net_opts_t *o,
                          const net_trace_t *t, const char *url, const net_result_t *rs, size_t n,
                          bool ok)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs("{\"command\":", f);
    report_json_str(f, command);
    fputs(",\"trace\":{\"preset\":", f);
    report_json_str(f, t->cfg.preset);
    fprintf(f,
            ",\"seed\":%" PRIu64 ",\"duration_s\":%.3f,\"rate\":%.3f,\"models\":%" PRIu32
            ",\"items\":%zu,\"tokens\":%" PRIu64 "}",
            t->cfg.seed, t->cfg.duration_s, t->cfg.rate, t->cfg.models, t->n_items, t->tokens);
    fputs(",\"config\":{\"url\":", f);
    report_json_str(f, url);
    fprintf(f,
            ",\"bench_started_servers\":%s,\"workers_per_model\":%" PRIu32 ",\"batch\":%" PRIu32
            ",\"time_scale\":%.4f,\"paced\":%s,\"max_batch_size\":%" PRIu32
            ",\"max_batch_tokens\":%" PRIu32 ",\"max_input_tokens\":%" PRIu32
            ",\"batch_fixed_ns\":%" PRIu64 ",\"ns_per_padded_token\":%.3f,\"cache_shapes\":%" PRIu32
            "}",
            o->url == NULL ? "true" : "false", o->workers, o->batch, o->time_scale,
            o->no_pace ? "false" : "true", o->gpu.max_batch_size, o->gpu.max_batch_tokens,
            o->gpu.max_input_tokens, o->gpu.batch_fixed_ns, o->gpu.ns_per_padded_token,
            o->gpu.cache_shapes);
    fputs(",\"runs\":[", f);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            fputs(",", f);
        net_json_result(f, &rs[i]);
    }
    fputs("],\"ratios\":[", f);
    const net_result_t *js = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(rs[i].system, "jetstream") == 0 && rs[i].ran && rs[i].items_per_s > 0)
            js = &rs[i];
    bool first = true;
    for (size_t i = 0; js != NULL && i < n; i++) {
        if (strcmp(rs[i].system, "lanesched") != 0 || !rs[i].ran)
            continue;
        fprintf(f,
                "%s{\"durability\":\"%s\",\"lanesched_items_per_s\":%.3f,"
                "\"jetstream_items_per_s\":%.3f,\"ratio\":%.4f}",
                first ? "" : ",", rs[i].durability, rs[i].items_per_s, js->items_per_s,
                rs[i].items_per_s / js->items_per_s);
        first = false;
    }
    fprintf(f, "],\"ok\":%s}\n", ok ? "true" : "false");
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- the modes ---------------------------------------------------------------------------------
 */

/* The baseline as a result (baseline.c runs it). */
static void net_baseline_result(const net_opts_t *o, const net_trace_t *t, const char *url,
                                net_result_t *res)
{
    net_run_t run;
    memset(res, 0, sizeof(*res));
    snprintf(res->system, sizeof(res->system), "jetstream");
    snprintf(res->durability, sizeof(res->durability), "file");
    if (net_run_init(&run, o, t, url, 'j') != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        return;
    }
    if (net_baseline_run(&run) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", run.error);
    } else if (net_result_fill(&run, res) != 0) {
        snprintf(res->error, sizeof(res->error), "out of memory");
    } else {
        res->ran = true;
    }
    net_run_free(&run);
}

static bool net_result_ok(const net_result_t *r)
{
    bool lanes = strcmp(r->system, "lanesched") == 0;
    return r->ran && r->drained && r->failed == 0 &&
           (!lanes || (r->have_stats && r->token_difference == 0));
}

int net_main(int argc, char **argv, bool baseline)
{
    int rc = 2;
    net_opts_t o;
    net_trace_t t;
    net_result_t res[3];
    size_t n_res = 0;
    char err[512] = "", lanesched_bin[NET_PATH_MAX + 16], command[2048];
    bool env = false;

    memset(&t, 0, sizeof(t));
    int parsed = net_args_parse(argc, argv, baseline, &o, lanesched_bin, sizeof(lanesched_bin));
    if (parsed != 0) {
        rc = parsed > 0 ? 0 : 2;
        goto out;
    }
    size_t at = (size_t)snprintf(command, sizeof(command), "lanesched-bench");
    for (int i = 0; i < argc && at < sizeof(command); i++)
        at += (size_t)snprintf(command + at, sizeof(command) - at, " %s", argv[i]);
    if (net_trace_load(&o, &t, err, sizeof(err)) != 0)
        goto out;
    env = true; /* net_env_close undoes whatever part of net_env_open succeeded */
    if (net_env_open(&o, err, sizeof(err)) != 0)
        goto out;

    printf("%s\n", command);
    printf("trace: %s, seed %" PRIu64 ", %.1f s at %.1f items/s: %zu items, %" PRIu64
           " tokens, %" PRIu32 " models\n",
           t.cfg.preset, t.cfg.seed, t.cfg.duration_s, t.cfg.rate, t.n_items, t.tokens,
           t.cfg.models);
    printf("nats: %s%s; %" PRIu32 " workers per model (max_batch_size %" PRIu32
           ", max_batch_tokens %" PRIu32 ", %.0f ns per padded token + %.1f ms per batch, LRU "
           "of %" PRIu32 " shapes); %s, time scale %g, %" PRIu32 " items per submit\n",
           g_url, o.url != NULL ? " (given)" : " (started by the bench, JetStream on)", o.workers,
           o.gpu.max_batch_size, o.gpu.max_batch_tokens, o.gpu.ns_per_padded_token,
           (double)o.gpu.batch_fixed_ns / 1e6, o.gpu.cache_shapes,
           o.no_pace ? "unpaced" : "paced by the trace", o.time_scale, o.batch);
    fflush(stdout);

    if (!baseline) {
        static const char *const levels[] = {"process", "power"};
        for (int l = 0; l < 2 && !net_stopping(NULL); l++) {
            if (o.url == NULL && !(o.durability & (1u << l)))
                continue;
            const char *level = o.url != NULL ? "existing" : levels[l];
            int pid = 0;
            if (o.url == NULL) {
                if (net_daemon_start(&o, level, err, sizeof(err)) != 0)
                    goto out;
                pid = (int)g_child[NET_CHILD_DAEMON];
            }
            live_run(&o, &t, g_url, level, pid, &res[n_res]);
            net_result_print(&res[n_res], &t, &o);
            n_res++;
            net_child_stop(NET_CHILD_DAEMON, NET_STOP_GRACE_MS);
            if (o.url != NULL)
                break;
        }
    }
    if ((baseline || o.baseline) && !net_stopping(NULL)) {
        net_baseline_result(&o, &t, g_url, &res[n_res]);
        net_result_print(&res[n_res], &t, &o);
        n_res++;
    }

    bool ok = n_res > 0;
    for (size_t i = 0; i < n_res; i++)
        ok &= net_result_ok(&res[i]);
    const net_result_t *js = NULL;
    for (size_t i = 0; i < n_res; i++)
        if (strcmp(res[i].system, "jetstream") == 0 && res[i].ran && res[i].items_per_s > 0)
            js = &res[i];
    if (js != NULL && n_res > 1) {
        printf("\n== end-to-end items/s, lanesched / JetStream (same trace, same workers; "
               "JetStream acks are fire-and-forget)\n");
        for (size_t i = 0; i < n_res; i++)
            if (strcmp(res[i].system, "lanesched") == 0 && res[i].ran)
                printf("%-9s %10.1f / %.1f = %.3f\n", res[i].durability, res[i].items_per_s,
                       js->items_per_s, res[i].items_per_s / js->items_per_s);
    }
    printf("\n%s\n", net_stopping(NULL) ? "interrupted: the figures above are partial"
                     : ok
                         ? "ok: every run drained, token difference 0"
                         : "FAILED: a run lost tokens, did not drain, failed items or did not run");
    fflush(stdout);
    if (o.json_path != NULL &&
        net_json_write(o.json_path, command, &o, &t, g_url, res, n_res, ok) != 0)
        fprintf(stderr, "lanesched-bench: cannot write %s\n", o.json_path);
    rc = net_stopping(NULL) ? 130 : ok ? 0 : 1;
out:
    if (err[0] != '\0')
        fprintf(stderr, "lanesched-bench: %s\n", err); /* rc is still 2 */
    if (env) {
        net_env_close();
        nats_CloseAndWait(2000);
    }
    net_trace_free(&t);
    return rc;
}

int bench_live_main(int argc, char **argv)
{
    return net_main(argc, argv, false);
}
