/*
 * port.c - free loopback ports and whether a server listens on one.
 *
 * Invariants:
 *   1. Loopback only (INADDR_LOOPBACK), so a test never opens a port to the network.
 *   2. A port is picked below the kernel's ephemeral range (ip_local_port_range), at random,
 *      and bound once to see that it is free: the kernel never hands such a port to an
 *      outgoing connection, so it stays free between the pick and the server's bind unless
 *      another test picks the same number. A port from the ephemeral range (bind to port 0)
 *      was taken by a connection in that gap, and a nats-server of a cluster then failed to
 *      start ("address already in use").
 * Rejected: fixed port numbers (two test runs on one machine collide) and letting the server
 * pick its own port (nats-server would have to report it back through its log).
 */
#include "support/port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The lowest port picked: above the well-known and registered ports most services use. */
#define PORT_PICK_FLOOR 10000

static void port_addr(struct sockaddr_in *a, int port)
{
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons((uint16_t)port);
}

/* The first port of the kernel's ephemeral range (32768 when it cannot be read). */
static int port_ephemeral_low(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

/* Whether port can be bound on loopback now (bound and closed at once). */
static bool port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a;
    port_addr(&a, port);
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok && !port_probe(port);
}

int port_pick(void)
{
    int lo = port_ephemeral_low();
    if (lo > PORT_PICK_FLOOR + 1000) { /* invariant 2 */
        static unsigned seed;
        if (seed == 0)
            seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
        for (int tries = 0; tries < 200; tries++) {
            int port = PORT_PICK_FLOOR + (int)(rand_r(&seed) % (unsigned)(lo - PORT_PICK_FLOOR));
            if (port_free(port))
                return port;
        }
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* the ephemeral range, at worst */
    int port = -1;
    struct sockaddr_in a;
    port_addr(&a, 0);
    socklen_t len = sizeof(a);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

bool port_probe(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in a;
    port_addr(&a, port);
    bool up = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return up;
}
