/*
 * test_port.h - loopback TCP ports for the servers the integration tests and lanesched-bench
 * start (test support, not product code).
 */
#ifndef LANESCHED_TEST_PORT_H
#define LANESCHED_TEST_PORT_H

#include <stdbool.h>

/* A TCP port of 127.0.0.1 that was free a moment ago (bound as port 0, read back, closed), or -1
 * when no socket could be bound (errno says why). Another process may take it before the
 * caller's server binds it: callers try a new port when their server does not come up. */
int test_port_pick(void);

/* Whether something accepts TCP connections on 127.0.0.1:port right now. */
bool test_port_probe(int port);

#endif
