/*
 * test_cluster.h - a cluster of three nats-servers with JetStream on loopback ports, for the
 * tests that run on more than one server (test support, not product code). Each node can be
 * killed and started again on the same ports and the same JetStream store.
 *
 * Ownership: a test_cluster_t is caller memory; the strings passed in are copied.
 */
#ifndef LANESCHED_TEST_CLUSTER_H
#define LANESCHED_TEST_CLUSTER_H

#include "tests/support/test_spawn.h"

#define TEST_CLUSTER_NODES 3
/* How long a node gets to accept client connections. */
#define TEST_CLUSTER_START_MS 10000u

typedef struct {
    char bin[512];
    char dir[400]; /* node<i>.conf, node<i>.log, js<i>/ */
    int client_port[TEST_CLUSTER_NODES];
    int route_port[TEST_CLUSTER_NODES];
    volatile pid_t pid[TEST_CLUSTER_NODES];
} test_cluster_t;

/* Writes the three configurations into dir (which must exist) and starts every node; OK once
 * each accepts client connections (JetStream may still be electing its leader: callers retry
 * their first JetStream call). On failure every node started is stopped. */
test_spawn_status_t test_cluster_start(test_cluster_t *c /* out */, const char *nats_bin,
                                       const char *dir);
/* (Re)starts node i on its ports and store. */
test_spawn_status_t test_cluster_node_start(test_cluster_t *c, int i);
/* SIGKILLs node i (nothing if it is not running). */
void test_cluster_node_kill(test_cluster_t *c, int i);
/* Stops every node. */
void test_cluster_stop(test_cluster_t *c);
/* "nats://127.0.0.1:<port>" of node i; with i < 0, every node's, comma-separated. */
void test_cluster_url(const test_cluster_t *c, int i, char *out, size_t len);

#endif
