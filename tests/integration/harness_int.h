/*
 * harness_int.h - private to the harness files (harness.c, harness_nats.c, harness_stats.c,
 * harness_child.c): what harness.c shares with the others beyond harness.h.
 */
#ifndef LANES_TEST_HARNESS_INT_H
#define LANES_TEST_HARNESS_INT_H

#include <sys/types.h>

/* spawn_start with stdout/stderr appended to log (NULL: inherit), stdin from in_fd (-1:
 * /dev/null), stdout to out_fd (-1: the log); *pid is set as soon as the child exists. The test
 * fails when it cannot be started. */
void h_spawn(volatile pid_t *pid, char *const argv[], const char *log, int in_fd, int out_fd);
/* The last max_lines lines of a file on stderr, framed with `what`. */
void h_file_tail_print(const char *what, const char *path, int max_lines);
/* Children killed at exit besides nats-server and the daemon (at most 8; the test fails beyond). */
void h_child_track(pid_t pid);
void h_child_untrack(pid_t pid);
/* This test binary's path (/proc/self/exe). */
const char *h_self(void);
/* In a re-executed child: the name its log lines carry and the NATS URL h_connect uses. */
void h_identity_set(const char *name, const char *url);

#endif
