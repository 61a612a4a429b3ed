/*
 * port.c - free loopback ports and whether a server listens on one.
 *
 * Invariant: loopback only (INADDR_LOOPBACK), so a test never opens a port to the network.
 * Rejected: fixed port numbers (two test runs on one machine collide) and letting the server
 * pick its own port (nats-server would have to report it back through its log).
 */
#include "support/port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void port_addr(struct sockaddr_in *a, int port)
{
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons((uint16_t)port);
}

int port_pick(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
