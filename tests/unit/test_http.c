/*
 * test_http.c - the /metrics HTTP server (common/http/server.c): scrapes in a burst share the
 * owner's snapshots (invariant 2), and the connections kept for 127.0.0.1 (invariant 5).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/http/http.h"

typedef struct {
    http_server_t *server;
    _Atomic unsigned refreshes;
} rig_t;

/* http_refresh_fn: the owner's part, at once (counted). */
static void rig_refresh(void *ctx)
{
    rig_t *r = ctx;
    r->refreshes++;
    static const char text[] = "lanesched_test_total 1\n";
    if (r->server != NULL)
        http_server_offer(r->server, text, sizeof(text) - 1);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A connection to 127.0.0.1:port from 127.0.0.<from>; the socket, or -1. */
static int dial(int port, int from)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET}, sa = me;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK - 1 + (uint32_t)from);
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0 ||
                    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* GET path from 127.0.0.<from> to 127.0.0.1:port; the status code, or -1. */
static int get_from(int port, const char *path, int from)
{
    int fd = dial(port, from);
    if (fd < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char req[128], resp[512];
    int n =
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    int code = -1;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (write(fd, req, (size_t)n) == n) {
        ssize_t got = read(fd, resp, sizeof(resp) - 1);
        if (got > 12) {
            resp[got] = '\0';
            code = atoi(resp + 9);
        }
    }
    close(fd);
    return code;
}

static int get(int port, const char *path)
{
    return get_from(port, path, 1);
}

typedef struct {
    int port, ok;
} getter_t;

static void *get_many(void *arg)
{
    getter_t *g = arg;
    for (int i = 0; i < 25; i++)
        g->ok += get(g->port, i % 2 ? "/metrics" : "/healthz") == 200;
    return NULL;
}

/* 8 clients, 25 scrapes each, at once: the owner is asked for a snapshot at most once per reuse
 * period of the burst, not once per scrape, and every scrape is answered 200. */
static void test_a_burst_of_scrapes_shares_snapshots(void **state)
{
    (void)state;
    rig_t r = {0};
    assert_int_equal(http_server_start("127.0.0.1:0", rig_refresh, &r, &r.server), HTTP_OK);
    int port = http_server_port(r.server);
    assert_true(port > 0);
    getter_t g[8];
    pthread_t t[8];
    uint64_t t0 = now_ms();
    for (int i = 0; i < 8; i++) {
        g[i] = (getter_t){port, 0};
        assert_int_equal(pthread_create(&t[i], NULL, get_many, &g[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        ok += g[i].ok;
    }
    uint64_t ms = now_ms() - t0;
    http_server_stop(r.server);
    assert_int_equal(ok, 200);
    /* one per 200 ms of the burst at most, and one more for its start (the test's own clock) */
    printf("200 scrapes in %llu ms: %u snapshots asked for\n", (unsigned long long)ms, r.refreshes);
    assert_true(r.refreshes <= ms / 200 + 2);
    assert_true(r.refreshes < 200);
}

/* 240 connections held open from eight other loopback addresses (30 each, under the 32 per
 * address): the next one from elsewhere is turned away, a health check from 127.0.0.1 is still
 * answered (invariant 5). */
static void test_connections_are_kept_for_the_local_health_check(void **state)
{
    (void)state;
    rig_t r = {0};
    assert_int_equal(http_server_start("127.0.0.1:0", rig_refresh, &r, &r.server), HTTP_OK);
    int port = http_server_port(r.server);
    int held[240], n = 0;
    for (int a = 2; a < 10; a++)
        for (int i = 0; i < 30; i++)
            if ((held[n] = dial(port, a)) >= 0)
                n++;
    assert_int_equal(n, 240);
    nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL); /* the server has taken them */
    assert_int_equal(get_from(port, "/healthz", 1), 200);
    assert_int_equal(get_from(port, "/healthz", 10), -1);
    for (int i = 0; i < n; i++)
        close(held[i]);
    http_server_stop(r.server);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_burst_of_scrapes_shares_snapshots),
        cmocka_unit_test(test_connections_are_kept_for_the_local_health_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
