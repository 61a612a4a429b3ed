/*
 * cli.h - what lanesched-produce and lanesched-consume share: flag parsing ("--flag VALUE" and
 * "--flag=VALUE"), the connection flags, numbers, clocks and a stop flag set by SIGINT/SIGTERM.
 * Not part of the library: the tools' own plumbing.
 */
#ifndef LANESCHED_CLIENTS_C_TOOLS_CLI_H
#define LANESCHED_CLIENTS_C_TOOLS_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "clients/c/lanes_client.h"

/* The running tool's name ("lanesched-produce"), set by its main before parsing: command-line
 * errors name it (common/usage.h's wording). */
extern const char *cli_program;

/* Set by SIGINT / SIGTERM once cli_signals_install ran. */
extern volatile sig_atomic_t cli_stop;

/* Installs the SIGINT / SIGTERM handler (sets cli_stop) and ignores SIGPIPE. */
void cli_signals_install(void);

/*
 * When argv[*i] is `name` (then the value is argv[*i + 1]) or `name=VALUE`: sets *value (borrowed
 * from argv), advances *i past what it used and returns 1. Returns 0 when argv[*i] is another
 * flag, -1 (after a message on stderr) when the value is missing.
 */
int cli_flag_value(int argc, char **argv, int *i, const char *name, const char **value /* out */);

/*
 * The connection flags shared by both tools: --server, --prefix, --user, --password, --token,
 * --creds, --tls, --tls-ca, --tls-cert, --tls-key, --connect-timeout-ms. Same return convention
 * as cli_flag_value. Strings stored in *config are borrowed from argv. An empty --server is
 * refused (-1): the library reads an empty server list as unset and would connect to the default
 * server without a word.
 */
int cli_conn_flag(int argc, char **argv, int *i, lc_client_config_t *config /* out */);

/* Fills the defaults the environment gives, the daemon's variable names: LANESCHED_SERVER,
 * LANESCHED_PREFIX, LANESCHED_USER, LANESCHED_PASSWORD, LANESCHED_TOKEN, LANESCHED_CREDS,
 * LANESCHED_TLS_CA, LANESCHED_TLS_CERT, LANESCHED_TLS_KEY. */
void cli_conn_defaults(lc_client_config_t *config /* out */);

/* Prints the connection flags' help lines. */
void cli_conn_help(FILE *f);

/* The end of a tool's argument loop: an argument nothing took. Prints common/usage.h's
 * "unknown flag" (it starts with '-') or "unexpected argument" line. */
void cli_unknown(const char *arg);

/* Parses a whole decimal integer in [min, max]; false (after a message naming flag) otherwise. */
bool cli_u64_parse(const char *flag, const char *text, uint64_t min, uint64_t max,
                   uint64_t *out /* out */);

/* Parses 0 or a number from CLI_DOUBLE_MIN to CLI_DOUBLE_MAX (a rate, a time per token: beyond
 * them a period or a sleep overflows its nanoseconds); false (after a message naming flag)
 * otherwise. */
#define CLI_DOUBLE_MIN 1e-6
#define CLI_DOUBLE_MAX 1e9
bool cli_double_parse(const char *flag, const char *text, double *out /* out */);

/* Sleeps ns nanoseconds (resuming after signals unless cli_stop is set). */
void cli_sleep_ns(uint64_t ns);

#endif /* LANESCHED_CLIENTS_C_TOOLS_CLI_H */
