/*
 * net_env.c - what the NATS modes start and must clean up: nats-server with JetStream and its
 * own storage directory, one lanesched per durability level with a fresh data directory, the temp
 * directory holding their files and logs, and the signal handlers that stop all of it.
 *
 * Starting, waiting for and stopping the children is support/spawn.c's (shared with
 * the integration tests); this file owns which children exist and when they go.
 *
 * Invariants:
 *  1. Children run in a process group of their own (a terminal's ^C reaches the bench alone,
 *     which stops them in order), die with the bench (PR_SET_PDEATHSIG, so they are forked by
 *     the main thread only) and get SIGTERM, then SIGKILL after NET_STOP_GRACE_MS.
 *  2. The first SIGINT/SIGTERM/SIGHUP stops the run gracefully (net_stopping); a second one
 *     kills the children and removes the temp directory from the handler (spawn_kill and
 *     spawn_run_quiet of rm only: async-signal-safe) and ends the process.
 *  3. Startup waits are bounded: nats-server SPAWN_NATS_START_MS per port tried, lanesched
 *     NET_DAEMON_START_MS.
 *
 * Rejected alternatives:
 *  - Scripts around the bench to start the servers: the bench owns its children, so a SIGINT
 *    cleans up exactly what it started, and each durability level gets a fresh data directory.
 */
#include "net.h"

#include "support/fs.h"
#include "support/spawn.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NET_DAEMON_START_MS 20000u /* lanesched printing "lanesched: ready" */
#define NET_FAILED_STOP_MS  1000u  /* a lanesched that did not get ready: SIGTERM, then SIGKILL */

/* ---- process-wide state (read by the signal handler: plain arrays, no allocation) ------------ */

enum { NET_CHILD_NATS = 0, NET_CHILD_DAEMON = 1, NET_CHILDREN = 2 };

static volatile pid_t g_child[NET_CHILDREN];
static volatile sig_atomic_t g_signals;
static char g_tmp[NET_PATH_MAX];
static bool g_keep;
static char g_url[64];
static char g_data[NET_PATH_MAX + 32];  /* the last lanesched's data directory */
static char g_store[NET_PATH_MAX + 16]; /* nats-server's JetStream storage */

bool net_stopping(const net_run_t *run)
{
    return g_signals > 0 || (run != NULL && atomic_load(&run->stop));
}

static bool net_signalled(void)
{
    return net_stopping(NULL);
}

const char *net_url(void)
{
    return g_url;
}

int net_server_pid(void)
{
    return (int)g_child[NET_CHILD_NATS];
}

const char *net_daemon_data_dir(void)
{
    return g_data;
}

const char *net_server_store_dir(void)
{
    return g_store;
}

int net_daemon_pid(void)
{
    return (int)g_child[NET_CHILD_DAEMON];
}

bool net_daemon_exited(void)
{
    return spawn_exited(&g_child[NET_CHILD_DAEMON], NULL);
}

void net_daemon_stop(void)
{
    spawn_stop(&g_child[NET_CHILD_DAEMON], NET_STOP_GRACE_MS);
}

/* ---- cleanup, also from the signal handler (invariant 2) ------------------------------------ */

static void net_cleanup_hard(void)
{
    for (int i = NET_CHILDREN - 1; i >= 0; i--)
        spawn_kill(&g_child[i]);
    if (g_tmp[0] != '\0' && !g_keep) {
        char *argv[] = {"/bin/rm", "-rf", g_tmp, NULL};
        spawn_run_quiet(argv);
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

/* ---- children ----------------------------------------------------------------------------- */

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

/* nats-server with JetStream on a free loopback port, its storage in the temp directory. */
static int net_nats_start(const net_opts_t *o, char *err, size_t errlen)
{
    char bin[NET_PATH_MAX], store[NET_PATH_MAX + 16], log[NET_PATH_MAX + 32];
    if (spawn_program_find(o->nats_server, bin, sizeof(bin)) != SPAWN_OK) {
        snprintf(err, errlen, "%.300s: not found or not executable (--nats-server)",
                 o->nats_server);
        return -1;
    }
    snprintf(store, sizeof(store), "%s/jetstream", g_tmp);
    snprintf(g_store, sizeof(g_store), "%s", store);
    snprintf(log, sizeof(log), "%s/nats-server.log", g_tmp);
    spawn_nats_t nats = {
        .bin = bin,
        .log_path = log,
        .store_dir = store,
        .own_group = true,
        .cancelled = net_signalled,
    };
    int port = 0;
    if (spawn_nats_start(&nats, &g_child[NET_CHILD_NATS], &port) == SPAWN_OK) {
        snprintf(g_url, sizeof(g_url), "nats://127.0.0.1:%d", port);
        return 0;
    }
    net_file_tail_print("nats-server log", log);
    snprintf(err, errlen, "nats-server (%.300s) did not start listening on 127.0.0.1", bin);
    return -1;
}

void net_daemon_log_print(const char *run)
{
    char log[NET_PATH_MAX + 48];
    snprintf(log, sizeof(log), "%s/lanesched-%s.log", g_tmp, run);
    net_file_tail_print("lanesched log", log);
}

int net_daemon_start(const net_opts_t *o, const char *level, const char *policy, char *err,
                     size_t errlen)
{
    char bin[NET_PATH_MAX], data[NET_PATH_MAX + 32], log[NET_PATH_MAX + 48];
    if (spawn_program_find(o->lanesched, bin, sizeof(bin)) != SPAWN_OK) {
        snprintf(err, errlen, "%.300s: not found or not executable (--lanesched)", o->lanesched);
        return -1;
    }
    snprintf(data, sizeof(data), "%s/data-%s-%s", g_tmp, level, policy);
    /* a fresh directory every start: no run recovers or counts another's files */
    fs_remove_tree(data);
    snprintf(g_data, sizeof(g_data), "%s", data);
    snprintf(log, sizeof(log), "%s/lanesched-%s-%s.log", g_tmp, level, policy);
    char slo[24];
    snprintf(slo, sizeof(slo), "%" PRIu32, o->slo_ms);
    char *argv[] = {bin,
                    "--server",
                    g_url,
                    "--data-dir",
                    data,
                    "--durability",
                    (char *)level,
                    "--prefix",
                    (char *)o->prefix,
                    "--policy",
                    (char *)policy,
                    o->slo_ms != 0 ? "--slo-ms" : NULL,
                    slo,
                    NULL};
    struct stat sb;
    long from = stat(log, &sb) == 0 ? (long)sb.st_size : 0;
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.log_path = log;
    opts.own_group = true;
    if (spawn_start(argv, &opts, &g_child[NET_CHILD_DAEMON]) != SPAWN_OK) {
        snprintf(err, errlen, "cannot start %.300s: %s", bin, strerror(errno));
        return -1;
    }
    int status = 0;
    spawn_status_t st = spawn_ready_wait(&g_child[NET_CHILD_DAEMON], log, from, "lanesched: ready",
                                         NET_DAEMON_START_MS, net_signalled, &status);
    if (st == SPAWN_OK)
        return 0;
    net_file_tail_print("lanesched log", log);
    if (st == SPAWN_EEXITED) {
        snprintf(err, errlen, "lanesched exited before it was ready (status %d)", status);
        return -1;
    }
    snprintf(err, errlen, "lanesched was not ready within %u ms", NET_DAEMON_START_MS);
    spawn_stop(&g_child[NET_CHILD_DAEMON], NET_FAILED_STOP_MS);
    return -1;
}

/* ---- the environment ------------------------------------------------------------------------ */

int net_env_open(const net_opts_t *o, char *err, size_t errlen)
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

void net_env_close(void)
{
    spawn_stop(&g_child[NET_CHILD_DAEMON], NET_STOP_GRACE_MS);
    spawn_stop(&g_child[NET_CHILD_NATS], NET_STOP_GRACE_MS);
    if (g_tmp[0] != '\0') {
        if (g_keep)
            fprintf(stderr, "lanesched-bench: kept %s\n", g_tmp);
        else
            fs_remove_tree(g_tmp);
        g_tmp[0] = '\0';
    }
}
