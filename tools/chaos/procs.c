/*
 * procs.c - the campaign's two servers: nats-server on a fixed loopback port (so a restarted
 * server is where every client reconnects to) and lanesched on a disk store in the work
 * directory; SIGKILL, restart, SIGSTOP ... SIGCONT.
 *
 * Invariants:
 *   1. Every child is started from the main thread (support/spawn.h: its parent-death
 *      signal is tied to the forking thread), and reaped by this file.
 *   2. A restarted daemon counts as up only once it logged "lanesched: ready" after the restart,
 *      so the time to recover is measured from the kill to that line.
 *   3. A daemon that ends by itself is noticed before every fault and throughout the drain. An
 *      exit status (a store that failed, on a full disk say, stops the daemon by design) is
 *      reported, counted and the daemon started again, as a supervisor would; a death by a
 *      signal the campaign did not send is a crash, and the campaign fails.
 */
#include "tools/chaos/chaos.h"

#include "support/port.h"
#include "support/spawn.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* How long a restarted server may take to listen, a restarted daemon to be ready. */
#define CHAOS_NATS_START_MS   10000u
#define CHAOS_DAEMON_READY_MS 120000u

static long chaos_file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

int chaos_procs_nats_start(chaos_procs_t *p, const chaos_opts_t *o)
{
    if (p->nats_bin[0] == '\0' &&
        spawn_program_find(o->nats != NULL ? o->nats : "nats-server", p->nats_bin,
                           sizeof(p->nats_bin)) != SPAWN_OK) {
        fprintf(stderr, "chaos: nats-server not found\n");
        return -1;
    }
    snprintf(p->nats_log, sizeof(p->nats_log), "%s/nats-server.log", o->work);
    for (int attempt = 0; attempt < 50; attempt++) {
        if (p->port == 0)
            p->port = port_pick();
        char port[16];
        snprintf(port, sizeof(port), "%d", p->port);
        char *argv[] = {p->nats_bin, "-a", "127.0.0.1", "-p", port, NULL};
        spawn_opts_t opts;
        spawn_opts_init(&opts);
        opts.log_path = p->nats_log;
        if (spawn_start(argv, &opts, &p->nats_pid) != SPAWN_OK)
            return -1;
        for (uint64_t t0 = chaos_now_ms(); chaos_now_ms() - t0 < CHAOS_NATS_START_MS;) {
            if (spawn_exited(&p->nats_pid, NULL))
                break;
            if (port_probe(p->port)) {
                snprintf(p->url, sizeof(p->url), "nats://127.0.0.1:%d", p->port);
                return 0;
            }
            chaos_sleep_ms(10);
        }
        spawn_kill(&p->nats_pid);
        chaos_sleep_ms(100); /* the old socket may linger a moment: try the same port again */
    }
    fprintf(stderr, "chaos: nats-server does not listen on port %d\n", p->port);
    return -1;
}

int chaos_procs_daemon_start(chaos_procs_t *p, const chaos_opts_t *o)
{
    snprintf(p->daemon_log, sizeof(p->daemon_log), "%s/lanesched.log", o->work);
    snprintf(p->data_dir, sizeof(p->data_dir), "%s/data", o->work);
    char seg[32], dead[32], jnl[32];
    snprintf(seg, sizeof(seg), "%u", o->segment_max);
    snprintf(jnl, sizeof(jnl), "%u", o->journal_bytes);
    snprintf(dead, sizeof(dead), "%u", o->dead_after_ms ? o->dead_after_ms : CHAOS_DEAD_AFTER_MS);
    char *argv[] = {(char *)o->lanesched, "--server", p->url, "--data-dir", p->data_dir,
                    "--durability", (char *)o->durability, "--segment-max-bytes", seg,
                    "--max-deliveries", "0", "--heartbeat-ms", "500", "--dead-after-ms", dead,
                    "--ack-wait-ms", "4000", "--log-level",
                    "info", /* restatements are counted from their lines */
                    /* the daemon's own journal file size unless one is asked for */
                    o->journal_bytes ? "--journal-file-bytes" : NULL, jnl, NULL};
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.log_path = p->daemon_log;
    long from = chaos_file_size(p->daemon_log);
    if (spawn_start(argv, &opts, &p->daemon_pid) != SPAWN_OK)
        return -1;
    int status = 0;
    spawn_status_t st = spawn_ready_wait(&p->daemon_pid, p->daemon_log, from, "lanesched: ready",
                                         CHAOS_DAEMON_READY_MS, NULL, &status);
    if (st != SPAWN_OK) {
        fprintf(stderr, "chaos: lanesched did not start (%s, wait status %d); see %s\n",
                spawn_status_str(st), status, p->daemon_log);
        return -1;
    }
    return 0;
}

void chaos_procs_daemon_kill(chaos_procs_t *p)
{
    spawn_kill(&p->daemon_pid);
}

void chaos_procs_nats_kill(chaos_procs_t *p)
{
    spawn_kill(&p->nats_pid);
}

void chaos_procs_daemon_stop_for(chaos_procs_t *p, uint32_t ms)
{
    if (p->daemon_pid <= 0)
        return;
    kill(p->daemon_pid, SIGSTOP);
    chaos_sleep_ms(ms);
    kill(p->daemon_pid, SIGCONT);
    p->stops_done++;
}

int chaos_procs_daemon_term(chaos_procs_t *p)
{
    if (p->daemon_pid <= 0)
        return -1;
    kill(p->daemon_pid, SIGTERM);
    int status = 0;
    if (!spawn_wait(p->daemon_pid, 30000, &status)) {
        spawn_kill(&p->daemon_pid);
        return -1;
    }
    p->daemon_pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int chaos_procs_daemon_check(chaos_procs_t *p, const chaos_opts_t *o)
{
    int status = 0;
    if (p->daemon_pid <= 0 || !spawn_exited(&p->daemon_pid, &status))
        return 0;
    if (!WIFEXITED(status)) {
        fprintf(stderr, "chaos: lanesched died by itself (signal %d); see %s\n",
                WIFSIGNALED(status) ? WTERMSIG(status) : -1, p->daemon_log);
        return -1;
    }
    p->daemon_self_exits++;
    fprintf(stderr,
            "chaos: lanesched exited by itself with status %d (see %s); starting it again\n",
            WEXITSTATUS(status), p->daemon_log);
    return chaos_procs_daemon_start(p, o);
}

void chaos_procs_cleanup(chaos_procs_t *p)
{
    spawn_kill(&p->daemon_pid);
    spawn_kill(&p->nats_pid);
}
