/*
 * harness_child.c - a consumer in another process, for the SIGKILL and SIGSTOP scenarios: the
 * parent's side (start, send a command line, read a reply line, signal, finish) and the child's
 * main, this test binary re-executed as `test_daemon __consumer ...`. See harness.h.
 */
#include "tests/integration/harness.h"

#include "tests/integration/harness_int.h"
#include "support/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a consumer in another process ----------------------------------------------------------- */

void h_child_start(h_child_t *ch, const char *model, uint32_t max_batch_size,
                   uint32_t max_batch_tokens)
{
    memset(ch, 0, sizeof(*ch));
    int in[2], out[2];
    H_REQUIRE(pipe(in) == 0 && pipe(out) == 0, "pipe: %s", strerror(errno));
    char bs[16], bt[16];
    snprintf(bs, sizeof(bs), "%u", max_batch_size);
    snprintf(bt, sizeof(bt), "%u", max_batch_tokens);
    char *argv[] = {(char *)h_self(), "__consumer", (char *)h_url(), (char *)model, bs, bt, NULL};
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    char log[800];
    snprintf(log, sizeof(log), "%s/consumer-child.log", h_tmp());
    volatile pid_t pid = 0;
    h_spawn(&pid, argv, log, in[0], out[1]);
    ch->pid = pid;
    h_child_track(ch->pid);
    close(in[0]);
    close(out[1]);
    ch->to_fd = in[1];
    ch->from_fd = out[0];
}

void h_child_send(h_child_t *ch, const char *line)
{
    size_t len = strlen(line);
    H_REQUIRE(write(ch->to_fd, line, len) == (ssize_t)len && write(ch->to_fd, "\n", 1) == 1,
              "writing to the consumer process: %s", strerror(errno));
}

bool h_child_line(h_child_t *ch, int64_t timeout_ms, char *line, size_t cap)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl = memchr(ch->buf, '\n', ch->len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - ch->buf);
            snprintf(line, cap, "%.*s", (int)n, ch->buf);
            memmove(ch->buf, nl + 1, ch->len - n - 1);
            ch->len -= n + 1;
            return true;
        }
        uint64_t now = h_now_ms();
        if (now >= deadline)
            return false;
        struct pollfd p = {ch->from_fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)(deadline - now));
        if (pr <= 0)
            continue;
        H_REQUIRE(ch->len < sizeof(ch->buf) - 1, "consumer process line too long");
        ssize_t r = read(ch->from_fd, ch->buf + ch->len, sizeof(ch->buf) - 1 - ch->len);
        if (r <= 0) {
            char log[800];
            snprintf(log, sizeof(log), "%s/consumer-child.log", h_tmp());
            h_file_tail_print("consumer process log", log, 50);
            H_REQUIRE(0, "the consumer process closed its output");
        }
        ch->len += (size_t)r;
    }
}

void h_child_signal(h_child_t *ch, int sig)
{
    H_REQUIRE(ch->pid > 0 && kill(ch->pid, sig) == 0, "kill(%d, %d): %s", (int)ch->pid, sig,
              strerror(errno));
    if (sig == SIGKILL) {
        waitpid(ch->pid, NULL, 0);
        h_child_untrack(ch->pid);
        ch->pid = 0;
    }
}

void h_child_finish(h_child_t *ch)
{
    if (ch->to_fd >= 0) {
        close(ch->to_fd);
        ch->to_fd = -1;
    }
    if (ch->pid > 0) {
        kill(ch->pid, SIGCONT);
        if (!spawn_wait(ch->pid, 5000, NULL)) {
            kill(ch->pid, SIGKILL);
            waitpid(ch->pid, NULL, 0);
        }
        h_child_untrack(ch->pid);
        ch->pid = 0;
    }
    if (ch->from_fd >= 0) {
        close(ch->from_fd);
        ch->from_fd = -1;
    }
}

/* The child process: a consumer driven by lines on stdin. */

static void child_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void child_out(const char *fmt, ...)
{
    char line[16384];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(1, line, (size_t)n);
    (void)w;
}

int h_child_main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: test_daemon __consumer URL MODEL MAX_BATCH_SIZE MAX_TOKENS\n");
        return 2;
    }
    h_identity_set("consumer-process", argv[2]);
    signal(SIGPIPE, SIG_IGN);
    natsConnection *nc = h_connect();
    static h_consumer_t c;
    h_consumer_register(&c, nc, argv[3], (uint32_t)strtoul(argv[4], NULL, 10),
                        (uint32_t)strtoul(argv[5], NULL, 10), 0, "child");
    child_out("REG %s", c.id);
    codec_batch_t *last = NULL;
    char in[4096];
    size_t in_len = 0;
    uint64_t last_hb = 0;
    for (;;) {
        uint64_t now = h_now_ms();
        if (now >= last_hb + c.heartbeat_ms) {
            h_heartbeat(&c, NULL, 0);
            last_hb = now;
        }
        char *nl = memchr(in, '\n', in_len);
        if (nl == NULL) {
            struct pollfd p = {0, POLLIN, 0};
            int wait = (int)(last_hb + c.heartbeat_ms - h_now_ms());
            if (poll(&p, 1, wait > 0 ? wait : 0) <= 0)
                continue;
            if (in_len >= sizeof(in) - 1)
                break;
            ssize_t r = read(0, in + in_len, sizeof(in) - 1 - in_len);
            if (r <= 0)
                break;
            in_len += (size_t)r;
            continue;
        }
        *nl = '\0';
        char cmd[4096];
        snprintf(cmd, sizeof(cmd), "%s", in);
        size_t used = (size_t)(nl - in) + 1;
        memmove(in, in + used, in_len - used);
        in_len -= used;

        unsigned n_batches = 0, expires = 0;
        if (sscanf(cmd, "pull %u %u", &n_batches, &expires) == 2) {
            h_pull(&c, n_batches, expires);
            uint64_t deadline = h_now_ms() + expires + 2000;
            codec_batch_t *b = NULL;
            while (b == NULL && h_now_ms() < deadline) {
                b = h_next_batch(&c, 50);
                if (h_now_ms() >= last_hb + c.heartbeat_ms) {
                    h_heartbeat(&c, NULL, 0);
                    last_hb = h_now_ms();
                }
            }
            if (b == NULL) {
                child_out("BATCH NONE");
                continue;
            }
            char line[16000];
            size_t at = 0;
            const char *st = b->status == CODEC_BATCH_OK        ? "OK"
                             : b->status == CODEC_BATCH_EXPIRED ? "EXPIRED"
                                                                : "ERROR";
            at += (size_t)snprintf(line + at, sizeof(line) - at, "BATCH %s %" PRIu64 " %zu", st,
                                   b->batch_id, b->n_items);
            for (size_t i = 0; i < b->n_items && at < sizeof(line) - 100; i++)
                at += (size_t)snprintf(line + at, sizeof(line) - at, " %.*s",
                                       (int)b->items[i].id.len, (const char *)b->items[i].id.ptr);
            if (b->status != CODEC_BATCH_OK && at < sizeof(line) - 100)
                snprintf(line + at, sizeof(line) - at, " %s", b->error);
            child_out("%s", line);
            if (b->status == CODEC_BATCH_OK) {
                codec_batch_destroy(last);
                last = b;
            } else {
                codec_batch_destroy(b);
            }
        } else if (strcmp(cmd, "ack") == 0) {
            codec_ack_t a;
            memset(&a, 0, sizeof(a));
            a.batch_id = last != NULL ? last->batch_id : 0;
            a.all = true;
            codec_ack_reply_t *r = h_ack(&c, &a, 3000);
            if (r == NULL) {
                child_out("ACK TIMEOUT");
            } else {
                child_out("ACK %u %u %u %s", r->acked, r->returned, r->unknown,
                          r->error[0] ? r->error : "-");
                codec_ack_reply_destroy(r);
            }
        } else {
            child_out("ERR unknown command '%s'", cmd);
        }
    }
    codec_batch_destroy(last);
    h_consumer_close(&c);
    h_disconnect(nc);
    nats_CloseAndWait(2000);
    return 0;
}
