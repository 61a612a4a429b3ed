/*
 * spawn.h - child processes for the integration tests and lanesched-bench (support, not
 * product code; the bench links it to start the same servers): fork + exec with the output in a
 * log file, bounded waits for readiness and for exit, and a nats-server on a free loopback port.
 *
 * Every call that can fail returns a spawn_status_t and leaves the decision to the caller:
 * the test harness fails the test, the bench prints the reason and exits with its setup status.
 * Programs are found on PATH by spawn_program_find before the fork, never by execvp in the
 * child, so a missing program is reported as such and the child only calls execv.
 *
 * Signals: spawn_kill and spawn_run_quiet use only async-signal-safe calls (fork,
 * open, dup2, execv, kill, waitpid, _exit), so a signal handler may call them to clean up; the
 * other calls may not be used from a handler.
 *
 * Ownership: every pointer argument is borrowed for the call. A pid goes out through a
 * `volatile pid_t *` that is written as soon as the child exists, so a signal handler reading the
 * same variable can kill it, and is set to 0 when this module reaps the child.
 */
#ifndef LANESCHED_SUPPORT_SPAWN_H
#define LANESCHED_SUPPORT_SPAWN_H

#include "common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPAWN_STATUS_MAP(X)                                    \
    X(SPAWN_OK, "ok")                                          \
    X(SPAWN_ESYS, "a system call failed (errno says which)")   \
    X(SPAWN_ENOT_FOUND, "program not found or not executable") \
    X(SPAWN_EEXITED, "the child exited before it was ready")   \
    X(SPAWN_ETIMEOUT, "the child was not ready in time")       \
    X(SPAWN_ECANCELLED, "the caller cancelled the wait")
STATUS_ENUM(spawn_status_t, SPAWN_STATUS_MAP, SPAWN_STATUS_COUNT);
const char *spawn_status_str(spawn_status_t status);

/* Polled by the waits below; true ends the wait with SPAWN_ECANCELLED (NULL: never). */
typedef bool (*spawn_cancel_fn)(void);

/* A program name with a '/' is taken as it is; otherwise it is looked up on $PATH (unset:
 * /usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin). OK: the executable's path in out (len bytes);
 * ENOT_FOUND when there is none (out then holds the last candidate tried). */
spawn_status_t spawn_program_find(const char *name, char *out, size_t len);

typedef struct {
    const char *log_path; /* stdout and stderr appended to this file; NULL: inherited */
    int stdin_fd;         /* the child's stdin; -1: /dev/null */
    int stdout_fd;        /* the child's stdout; -1: the log (inherited without one) */
    bool own_group;       /* setpgid(0, 0): a terminal's ^C reaches the parent alone */
} spawn_opts_t;

/* The defaults: no log, stdin from /dev/null, stdout to the log, the parent's process group. */
void spawn_opts_init(spawn_opts_t *opts /* out */);

/* fork + execv(argv[0], argv); argv[0] must be a path (spawn_program_find). The child gets
 * PR_SET_PDEATHSIG SIGKILL, which fires when the forking THREAD ends: call this from the thread
 * that outlives the child (the main thread). An exec failure shows as "exec failed" in the log
 * and exit code 127. OK: *pid set; ESYS: no child. */
spawn_status_t spawn_start(char *const argv[], const spawn_opts_t *opts,
                           volatile pid_t *pid /* out */);

/* Waits at most timeout_ms for pid to exit. True when it was reaped (*status its wait status;
 * status may be NULL), false when it is still running. */
bool spawn_wait(pid_t pid, uint64_t timeout_ms, int *status /* out */);

/* Whether *pid has exited: reaped, *status set (may be NULL) and *pid = 0. True as well when
 * *pid <= 0 (there is no child). Does not wait. */
bool spawn_exited(volatile pid_t *pid, int *status /* out */);

/* SIGTERM, at most grace_ms for the exit, then SIGKILL; reaped and *pid = 0. Nothing when
 * *pid <= 0. */
void spawn_stop(volatile pid_t *pid, uint64_t grace_ms);

/* SIGKILL, reaped, *pid = 0; nothing when *pid <= 0. Async-signal-safe. */
void spawn_kill(volatile pid_t *pid);

/* Runs argv (argv[0] a path) to its end with stdout and stderr to /dev/null. Its exit code, or
 * -1 when it could not be started or died of a signal. Async-signal-safe. */
int spawn_run_quiet(char *const argv[]);

/* Waits until a line of log_path after byte `from` (the log's size before the child started)
 * contains `needle`, for at most timeout_ms, polling every 10 ms. OK; EEXITED when *pid exited
 * first (reaped, *pid = 0, *status its wait status; status may be NULL); ETIMEOUT; ECANCELLED. */
spawn_status_t spawn_ready_wait(volatile pid_t *pid, const char *log_path, long from,
                                const char *needle, uint64_t timeout_ms, spawn_cancel_fn cancelled,
                                int *status /* out */);

/* How many lines of the log at path (borrowed) contain needle (borrowed); -1 when it cannot be
 * opened. */
long spawn_log_count(const char *path, const char *needle);

/* How long one nats-server gets to accept connections, and how many ports are tried. */
#define SPAWN_NATS_START_MS 10000u
#define SPAWN_NATS_ATTEMPTS 4

typedef struct {
    const char *bin;           /* a path (spawn_program_find) */
    const char *log_path;      /* the server's stdout and stderr */
    const char *store_dir;     /* JetStream on with its storage here; NULL: JetStream off */
    const char *config;        /* nats-server -c FILE (its port and host overridden); NULL */
    bool own_group;            /* as spawn_opts_t.own_group */
    spawn_cancel_fn cancelled; /* polled while waiting; NULL: never */
} spawn_nats_t;

/* nats-server -a 127.0.0.1 -p PORT [-c FILE] [-js -sd DIR] on a port from port_pick, accepting
 * connections within SPAWN_NATS_START_MS. A server that exits or does not listen in time
 * (another process took the port meanwhile) is stopped and a new port tried, up to
 * SPAWN_NATS_ATTEMPTS servers. OK: *pid and *port set; otherwise *pid is 0 and
 * the status says why the last attempt failed (ESYS, EEXITED, ETIMEOUT, ECANCELLED). */
spawn_status_t spawn_nats_start(const spawn_nats_t *nats, volatile pid_t *pid /* out */,
                                int *port /* out */);

#endif
