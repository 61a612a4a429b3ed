/*
 * cluster.h - a cluster of three nats-servers with JetStream on loopback ports, for the
 * tests that run on more than one server (not product code). Each node can be
 * killed and started again on the same ports and the same JetStream store.
 *
 * Ownership: a cluster_t is caller memory; the strings passed in are copied.
 */
#ifndef LANESCHED_SUPPORT_CLUSTER_H
#define LANESCHED_SUPPORT_CLUSTER_H

#include "support/spawn.h"

#define CLUSTER_NODES 3
/* How long a node gets to accept client connections. */
#define CLUSTER_START_MS 10000u

typedef struct {
    char bin[512];
    char dir[400]; /* node<i>.conf, node<i>.log, js<i>/ */
    int client_port[CLUSTER_NODES];
    int route_port[CLUSTER_NODES];
    volatile pid_t pid[CLUSTER_NODES];
} cluster_t;

/* Writes the three configurations into dir (which must exist) and starts every node; OK once
 * each accepts client and route connections (JetStream may still be electing its leader:
 * callers retry their first JetStream call). A node that exits while starting (a port taken
 * meanwhile) starts the cluster again on new ports (cluster.c invariant 3). On failure every
 * node started is stopped. */
spawn_status_t cluster_start(cluster_t *c /* out */, const char *nats_bin, const char *dir);
/* (Re)starts node i on its ports and store. */
spawn_status_t cluster_node_start(cluster_t *c, int i);
/* SIGKILLs node i (nothing if it is not running). */
void cluster_node_kill(cluster_t *c, int i);
/* Stops every node. */
void cluster_stop(cluster_t *c);
/* "nats://127.0.0.1:<port>" of node i; with i < 0, every node's, comma-separated. */
void cluster_url(const cluster_t *c, int i, char *out, size_t len);

#endif
