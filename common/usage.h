/*
 * usage.h - how every lanesched binary reports a command line it cannot take, in one wording,
 * before it connects to anything:
 *
 *   <program>: unknown flag '--frob' (see <program> --help)
 *   <program>: unknown command 'frob' (see <program> --help)
 *   <program>: --flag needs a value (see <program> --help)
 *   <program>: unexpected argument 'x' (see <program> --help)
 *
 * on stderr, and the caller exits with USAGE_EXIT (2). Arguments are borrowed.
 */
#ifndef LANESCHED_COMMON_USAGE_H
#define LANESCHED_COMMON_USAGE_H

/* The exit status of a command line that was not understood (as getopt-based tools use). */
#define USAGE_EXIT 2

void usage_unknown_flag(const char *program, const char *flag);
void usage_unknown_command(const char *program, const char *command);
void usage_missing_value(const char *program, const char *flag);
void usage_unexpected(const char *program, const char *arg);

#endif
