/*
 * cluster.c - three clustered nats-servers with JetStream on loopback (cluster.h).
 *
 * Invariants:
 *   1. Every node's configuration names all three routes, so any node can be killed and
 *      started again and rejoins the others on the same ports.
 *   2. Ports are picked once, before any node starts, and kept for the cluster's life: a
 *      restarted node is found where its clients and peers expect it.
 *   3. A node counts as started once both its client and its route port accept connections. A
 *      picked port can still be taken by another test between the pick and the bind (port.c
 *      invariant 2); a node that then exits ("address already in use" on its route port, after
 *      its client port listened) makes cluster_start stop every node and start again on new
 *      ports and empty stores, up to CLUSTER_START_TRIES times.
 *
 * Rejected: the -routes command-line flags. A configuration file also carries the server name
 * and the JetStream store, which a restarted node needs to recover its replicas.
 */
#include "support/cluster.h"

#include "common/clock.h"
#include "support/fs.h"
#include "support/port.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Invariant 3: a collision is rare (two random picks among some 20,000 ports); three tries make
 * a failed start a real failure. */
#define CLUSTER_START_TRIES 3

static spawn_status_t cluster_config(const cluster_t *c, int i)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/node%d.conf", c->dir, i);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return SPAWN_ESYS;
    fprintf(f,
            "server_name: n%d\nlisten: 127.0.0.1:%d\njetstream { store_dir: \"%s/js%d\" }\n"
            "cluster {\n  name: lanes_test\n  listen: 127.0.0.1:%d\n  routes: [\n",
            i, c->client_port[i], c->dir, i, c->route_port[i]);
    for (int j = 0; j < CLUSTER_NODES; j++)
        fprintf(f, "    nats-route://127.0.0.1:%d\n", c->route_port[j]);
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0 ? SPAWN_OK : SPAWN_ESYS;
}

spawn_status_t cluster_node_start(cluster_t *c, int i)
{
    char conf[512], log[512];
    snprintf(conf, sizeof(conf), "%s/node%d.conf", c->dir, i);
    snprintf(log, sizeof(log), "%s/node%d.log", c->dir, i);
    char *argv[] = {c->bin, "-c", conf, NULL};
    spawn_opts_t opts;
    spawn_opts_init(&opts);
    opts.log_path = log;
    spawn_status_t st = spawn_start(argv, &opts, &c->pid[i]);
    if (st != SPAWN_OK)
        return st;
    uint64_t end = clock_mono_ns() + CLUSTER_START_MS * 1000000ull;
    while (!port_probe(c->client_port[i]) || !port_probe(c->route_port[i])) { /* invariant 3 */
        if (spawn_exited(&c->pid[i], NULL))
            return SPAWN_EEXITED;
        if (clock_mono_ns() >= end)
            return SPAWN_ETIMEOUT;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return SPAWN_OK;
}

spawn_status_t cluster_start(cluster_t *c, const char *nats_bin, const char *dir)
{
    spawn_status_t st = SPAWN_EEXITED;
    for (int t = 0; t < CLUSTER_START_TRIES && st == SPAWN_EEXITED; t++) { /* invariant 3 */
        memset(c, 0, sizeof(*c));
        snprintf(c->bin, sizeof(c->bin), "%s", nats_bin);
        snprintf(c->dir, sizeof(c->dir), "%s", dir);
        for (int i = 0; i < CLUSTER_NODES; i++) { /* invariant 2 */
            char js[512];
            snprintf(js, sizeof(js), "%s/js%d", dir, i);
            (void)fs_remove_tree(js);
            if ((c->client_port[i] = port_pick()) <= 0 || (c->route_port[i] = port_pick()) <= 0)
                return SPAWN_ESYS;
        }
        st = SPAWN_OK;
        for (int i = 0; i < CLUSTER_NODES && st == SPAWN_OK; i++)
            st = cluster_config(c, i);
        for (int i = 0; i < CLUSTER_NODES && st == SPAWN_OK; i++)
            st = cluster_node_start(c, i);
        if (st != SPAWN_OK)
            cluster_stop(c);
    }
    return st;
}

void cluster_node_kill(cluster_t *c, int i)
{
    spawn_kill(&c->pid[i]);
}

void cluster_stop(cluster_t *c)
{
    for (int i = 0; i < CLUSTER_NODES; i++)
        spawn_stop(&c->pid[i], 2000);
}

void cluster_url(const cluster_t *c, int i, char *out, size_t len)
{
    size_t w = 0;
    out[0] = '\0';
    for (int j = 0; j < CLUSTER_NODES; j++) {
        if (i >= 0 && j != i)
            continue;
        int n =
            snprintf(out + w, len - w, "%snats://127.0.0.1:%d", w ? "," : "", c->client_port[j]);
        if (n < 0 || (size_t)n >= len - w)
            return;
        w += (size_t)n;
    }
}
