/*
 * port.h - loopback TCP ports for the servers the integration tests and lanesched-bench
 * start (support for the tests, the bench and the chaos runner; not product code).
 */
#ifndef LANESCHED_SUPPORT_PORT_H
#define LANESCHED_SUPPORT_PORT_H

#include <stdbool.h>

/* A TCP port of 127.0.0.1 that was free a moment ago, below the kernel's ephemeral range so
 * that no outgoing connection takes it meanwhile (port.c invariant 2), or -1 when no socket
 * could be bound (errno says why). Another test may still pick the same number: callers try a
 * new port when their server does not come up. */
int port_pick(void);

/* Whether something accepts TCP connections on 127.0.0.1:port right now. */
bool port_probe(int port);

#endif
