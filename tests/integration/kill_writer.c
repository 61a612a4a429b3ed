/*
 * kill_writer.c - the process test_kill kills: it writes to a disk store until SIGKILL.
 *
 *   kill_writer DIR LOG START_ID DURABILITY SEED READY_FD
 *
 * Opens (so: recovers) the disk store in DIR at DURABILITY (0 process, 1 power) with a 64 KiB
 * segment cap, writes one byte to READY_FD, then loops until killed:
 *
 *   1. appends 1..6 items with sequential ids from START_ID (lane = id % 2), store_flush;
 *      only after the flush returned STORE_OK: "A <id>" per item to LOG, fdatasync(LOG);
 *   2. per lane, peeks 0..5 items at the front, commits them, and for each either completes
 *      it (3/4), returns it (3/20) or leaves it pending (1/10: it comes back after the kill);
 *   3. before completing: "T <id>" to LOG, fdatasync (the tombstone reaches the file at once,
 *      so from here on the item may be gone after a crash); store_tombstone each; store_flush;
 *      only after that flush returned STORE_OK: "C <id>", fdatasync.
 *
 * LOG also gets "R <lane> <segment>" when a lane's appends move to a new segment by the size
 * cap (not the first segment of this run: recovery seals every segment it finds).
 *
 * Every item it peeks must be byte-identical to what its id says was appended (item_make in
 * kill_item.h, kept in step with test_kill.c). Any store error, or a damaged item, exits with a
 * nonzero code and a message on stderr: the parent expects death by SIGKILL and nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/rng.h"
#include "store/store.h"
#include "tests/integration/kill_item.h"

static uint64_t rng_state;

static void quiet_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (getenv("LANES_TEST_VERBOSE") != NULL)
        fprintf(stderr, "kill_writer: [store %d] %s\n", level, msg);
}

static void die(int code, const char *what, store_status_t st)
{
    fprintf(stderr, "kill_writer: %s: %s\n", what, store_status_str(st));
    exit(code);
}

static int log_fd = -1;
static char log_buf[8192];
static size_t log_len;

static void log_line(char kind, uint64_t a, uint64_t b, int two)
{
    if (log_len + 64 > sizeof(log_buf)) {
        fprintf(stderr, "kill_writer: log buffer full\n");
        exit(4);
    }
    log_len +=
        (size_t)(two ? snprintf(log_buf + log_len, 64, "%c %" PRIu64 " %" PRIu64 "\n", kind, a, b)
                     : snprintf(log_buf + log_len, 64, "%c %" PRIu64 "\n", kind, a));
}

/* Writes the buffered lines and syncs the log: from here on the parent may rely on them. */
static void log_commit(void)
{
    size_t at = 0;
    while (at < log_len) {
        ssize_t w = write(log_fd, log_buf + at, log_len - at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            perror("kill_writer: writing the log");
            exit(5);
        }
        at += (size_t)w;
    }
    if (fdatasync(log_fd) != 0) {
        perror("kill_writer: fdatasync of the log");
        exit(5);
    }
    log_len = 0;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: kill_writer DIR LOG START_ID DURABILITY SEED READY_FD\n");
        return 2;
    }
    uint64_t next_id = strtoull(argv[3], NULL, 10);
    int durability = atoi(argv[4]);
    rng_state = strtoull(argv[5], NULL, 0);
    int ready_fd = atoi(argv[6]);

    log_fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        perror("kill_writer: opening the log");
        return 3;
    }
    store_disk_config_t cfg = {
        .dir = argv[1],
        .segment_max_bytes = KILL_SEG_CAP,
        .durability = durability ? STORE_DURABLE_POWER : STORE_DURABLE_PROCESS,
        .index_map_bytes = 64u << 20,
        .log = quiet_log,
    };
    store_t *s = NULL;
    store_status_t st = store_open_disk(&cfg, NULL, &s);
    if (st != STORE_OK)
        die(3, "store_open_disk", st);
    store_queue_t *q[2];
    for (uint32_t lane = 0; lane < 2; lane++) {
        store_key_t key = {KILL_MODEL, KILL_SIGNATURE, lane};
        if ((st = store_queue_open(s, &key, &q[lane])) != STORE_OK)
            die(3, "store_queue_open", st);
    }
    if (write(ready_fd, "R", 1) != 1) {
        perror("kill_writer: ready pipe");
        return 3;
    }
    close(ready_fd);

    static kitem_t it;
    uint64_t last_seg[2] = {UINT64_MAX, UINT64_MAX};
    for (;;) {
        /* 1. Append, flush, then acknowledge. */
        uint64_t first = next_id;
        unsigned n_append = 1 + (unsigned)(rng_splitmix64(&rng_state) % 6);
        for (unsigned i = 0; i < n_append; i++) {
            uint64_t id = next_id++;
            item_make(id, &it);
            store_item_t in = {.id = it.id,
                               .id_len = 8,
                               .payload = it.payload,
                               .payload_len = it.payload_len,
                               .tokens = it.tokens,
                               .arrival_ns = it.arrival_ns};
            store_ref_t ref;
            if ((st = store_append(s, q[it.lane], &in, &ref)) != STORE_OK)
                die(10, "store_append", st);
            if (last_seg[it.lane] != UINT64_MAX && ref.queue != last_seg[it.lane])
                log_line('R', it.lane, ref.queue, 1);
            last_seg[it.lane] = ref.queue;
        }
        if ((st = store_flush(s)) != STORE_OK)
            die(11, "store_flush after appends", st);
        for (uint64_t id = first; id < next_id; id++)
            log_line('A', id, 0, 0);
        log_commit();

        /* 2. Dispatch from the front of each lane. */
        uint64_t done[16];
        size_t n_done = 0;
        for (uint32_t lane = 0; lane < 2; lane++) {
            store_view_t views[5];
            size_t got = 0;
            size_t want = (size_t)(rng_splitmix64(&rng_state) % 6);
            if (want == 0)
                continue;
            if ((st = store_peek(s, q[lane], views, want, &got)) != STORE_OK)
                die(12, "store_peek", st);
            if (got == 0)
                continue;
            store_ref_t refs[5], back[5];
            uint64_t ids[5];
            size_t n_back = 0;
            for (size_t i = 0; i < got; i++) {
                if (views[i].id_len != 8) {
                    fprintf(stderr, "kill_writer: peeked an item with a %zu-byte id\n",
                            views[i].id_len);
                    exit(20);
                }
                uint64_t id = 0;
                for (int b = 0; b < 8; b++)
                    id |= (uint64_t)views[i].id_view[b] << (8 * b);
                item_make(id, &it);
                if (views[i].payload_len != it.payload_len || views[i].tokens != it.tokens ||
                    views[i].arrival_ns != it.arrival_ns || it.lane != lane ||
                    memcmp(views[i].payload_view, it.payload, it.payload_len) != 0) {
                    fprintf(stderr, "kill_writer: peeked a damaged item, id %" PRIu64 "\n", id);
                    exit(20);
                }
                refs[i] = views[i].ref;
                ids[i] = id;
            }
            if ((st = store_commit(s, q[lane], refs, got)) != STORE_OK)
                die(13, "store_commit", st);
            store_ref_t tomb[5];
            size_t n_tomb = 0;
            for (size_t i = 0; i < got; i++) {
                unsigned r = (unsigned)(rng_splitmix64(&rng_state) % 20);
                if (r < 15) {
                    tomb[n_tomb++] = refs[i];
                    done[n_done++] = ids[i];
                    log_line('T', ids[i], 0, 0);
                } else if (r < 18) {
                    back[n_back++] = refs[i];
                }
                /* else: left pending until the process dies */
            }
            /* 3. Intent first, then the tombstones. */
            if (n_tomb != 0)
                log_commit();
            for (size_t i = 0; i < n_tomb; i++) {
                int completed = -1;
                if ((st = store_tombstone(s, tomb[i], &completed)) != STORE_OK)
                    die(14, "store_tombstone", st);
                if (completed != 1) {
                    fprintf(stderr, "kill_writer: a pending item was already complete\n");
                    exit(21);
                }
            }
            if (n_back != 0 && (st = store_return(s, back, n_back)) != STORE_OK)
                die(15, "store_return", st);
        }
        if (n_done != 0) {
            if ((st = store_flush(s)) != STORE_OK)
                die(16, "store_flush after tombstones", st);
            for (size_t i = 0; i < n_done; i++)
                log_line('C', done[i], 0, 0);
            log_commit();
        }
    }
}
