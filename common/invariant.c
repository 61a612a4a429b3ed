/*
 * invariant.c - reporting for the executable invariants of invariant.h.
 *
 * Invariants:
 *   1. A report goes to stderr in one fprintf, so lines of concurrent reports do not interleave
 *      mid-line; the process aborts only through invariant_broken, after the report.
 *
 * Rejected: assert(). It names the call but not the rule that broke inside it, nor its values.
 */
#include "common/invariant.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void invariant_report(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:%d: invariant broken: %s (%s)\n", file, line, cond, detail);
}

void invariant_broken(const char *call, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s failed: aborting\n", file, line, call);
    abort();
}
