/*
 * version.c - the release version, compiled from the LANESCHED_VERSION definition that
 * common/CMakeLists.txt gives this file alone (CMake's project version).
 *
 * Rejected: a configured header included everywhere. Every file including it would rebuild at
 * each version bump, and a stale generated header in a build tree could disagree with the tree.
 */
#include "common/version.h"

#ifndef LANESCHED_VERSION
#error "LANESCHED_VERSION must be defined by the build (common/CMakeLists.txt)"
#endif

const char *version_string(void)
{
    return LANESCHED_VERSION;
}

void version_print(FILE *out, const char *program)
{
    fprintf(out, "%s %s (protocol %d)\n", program, LANESCHED_VERSION, VERSION_PROTOCOL);
}
