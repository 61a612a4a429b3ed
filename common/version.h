/*
 * version.h - the one version of lanesched, shared by every binary, and the protocol version
 * the daemon speaks.
 *
 * The release version comes from CMake's project() (the top-level CMakeLists.txt), compiled into
 * version.c alone, so changing it rebuilds one file. VERSION_PROTOCOL is the wire contract's
 * version (subjects.md + codec/lanes.proto): it is sent in Registered.protocol_version, in
 * $SRV.INFO's metadata and in the stats document, and it changes only when a client written to
 * an older subjects.md would misread the daemon (adding a field does not change it).
 */
#ifndef LANESCHED_COMMON_VERSION_H
#define LANESCHED_COMMON_VERSION_H

#include <stdio.h>

#define VERSION_PROTOCOL 1

/* "0.1.0": the release version (SemVer). Static storage. */
const char *version_string(void);

/* Prints "<program> <version> (protocol <n>)" and a newline to out: every binary's --version. */
void version_print(FILE *out, const char *program);

#endif
