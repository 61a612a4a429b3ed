/*
 * usage.c - the command-line error lines of usage.h, one format for every binary.
 *
 * Rejected: each tool wording its own ("unknown flag", "unknown argument", a usage dump): a
 * script calling several tools could not tell a typo from a failure the same way for all.
 */
#include "common/usage.h"

#include <stdio.h>

static void usage_line(const char *program, const char *what, const char *arg, const char *tail)
{
    fprintf(stderr, "%s: %s '%s'%s (see %s --help)\n", program, what, arg, tail, program);
}

void usage_unknown_flag(const char *program, const char *flag)
{
    usage_line(program, "unknown flag", flag, "");
}

void usage_unknown_command(const char *program, const char *command)
{
    usage_line(program, "unknown command", command, "");
}

void usage_missing_value(const char *program, const char *flag)
{
    fprintf(stderr, "%s: %s needs a value (see %s --help)\n", program, flag, program);
}

void usage_unexpected(const char *program, const char *arg)
{
    usage_line(program, "unexpected argument", arg, "");
}
