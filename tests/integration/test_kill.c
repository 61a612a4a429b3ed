/*
 * test_kill.c - the disk store under SIGKILL: a writer process (kill_writer) appends, flushes,
 * completes and acknowledges through a log; this test kills it at random moments, reopens the
 * store itself (recovery) and checks the log's promises, then restarts the writer on the same
 * directory.
 *
 *   test_kill PATH_TO_KILL_WRITER
 *
 * The log (see kill_writer.c) holds "A id" once the append's flush returned OK (acknowledged),
 * "T id" before the item's tombstone is written, "C id" once the flush after the tombstone
 * returned OK (completed). After every kill, with the store reopened in this process:
 *
 *   - every acknowledged item with no "T" line is handed out, exactly once, byte-identical;
 *   - no completed item is handed out;
 *   - no id is handed out twice; every item handed out is one the writer appended, intact;
 *   - acknowledged items with a "T" line but no "C" line may or may not be there (the tombstone
 *     is written by the next flush; only that flush makes it a promise); items never
 *     acknowledged may or may not be there;
 *   - the recovery report agrees with what is handed out, and a kill damaged nothing below a
 *     durable boundary: no corrupt region, no damaged state word, no missing file, no index
 *     rebuild; a quarantined file can only be a segment whose header was never fully written;
 *   - no segment file is larger than the 8 KiB cap (KILL_SEG_CAP).
 *
 * Phase 1: 24 kills at STORE_DURABLE_PROCESS; phase 2: 6 kills at STORE_DURABLE_POWER, each on
 * its own directory; a phase that has not yet seen a roll-over (phase 1) or a whole-file deletion
 * adds rounds that let the writer run longer, so a loaded machine still covers them. Kills land
 * 5..60 ms (power: 20..200 ms) after the writer started (every third round, so some land inside
 * the writer's own recovery) or after it reported the store open. Seeded: LANES_TEST_SEED
 * overrides; the seed is printed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/rng.h"
#include "store/store.h"
#include "tests/integration/kill_item.h"
#include "support/fs.h"

#define MAX_IDS (1u << 20)
/* Rounds a phase may add, each letting the writer run longer, until it saw what it is for. */
#define KILL_EXTRA_ROUNDS 24u

/* ---- plumbing ------------------------------------------------------------------------------ */

static char round_name[128];
static pid_t writer_pid;   /* the live writer, killed if this test gives up */
static char kept_dir[512]; /* the directory of the phase, kept on failure for inspection */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test_kill: FAIL (%s): ", round_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (writer_pid > 0) {
        kill(writer_pid, SIGKILL);
        waitpid(writer_pid, NULL, 0);
    }
    if (kept_dir[0] != '\0')
        fprintf(stderr, "test_kill: store and log kept in %s\n", kept_dir);
    exit(1);
}

#define REQUIRE(cond, ...)     \
    do {                       \
        if (!(cond))           \
            fail(__VA_ARGS__); \
    } while (0)

static uint64_t rng_state;

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void quiet_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (getenv("LANES_TEST_VERBOSE") != NULL)
        fprintf(stderr, "test_kill: [store %d] %s\n", level, msg);
}

/* ---- what the log says --------------------------------------------------------------------- */

enum { F_ACKED = 1, F_TOMB_INTENT = 2, F_COMPLETED = 4, F_SEEN = 8, F_GONE = 16 };

typedef struct {
    const char *writer;
    char base[512], dir[600], log[600];
    int durability;
    uint8_t *flags; /* per id */
    uint64_t next_id;
    /* Segment files seen at the previous check, to count whole-file deletions. */
    uint64_t *segs;
    size_t n_segs;
    /* Totals for the closing line and the coverage checks. */
    uint64_t acked, completed, rollovers, deletions, removed_at_open, torn_tails, adopted,
        quarantined, unacked_present, intent_present, intent_gone, kills_before_ready;
    uint64_t max_seg_size;
    unsigned kills;
    size_t log_read; /* bytes of the log already parsed */
} run_t;

/* Reads the log's new complete lines; cuts a torn last line (the next writer appends after). */
static void read_log(run_t *r)
{
    int fd = open(r->log, O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return;
    REQUIRE(fd >= 0, "open %s: %s", r->log, strerror(errno));
    struct stat sb;
    REQUIRE(fstat(fd, &sb) == 0, "fstat log");
    size_t len = (size_t)sb.st_size;
    REQUIRE(len >= r->log_read, "the log shrank");
    char *buf = malloc(len - r->log_read + 1);
    REQUIRE(buf != NULL, "out of memory");
    REQUIRE(pread(fd, buf, len - r->log_read, (off_t)r->log_read) == (ssize_t)(len - r->log_read),
            "reading the log");
    size_t n = len - r->log_read, end = n;
    while (end > 0 && buf[end - 1] != '\n')
        end--;
    if (end < n)
        REQUIRE(ftruncate(fd, (off_t)(r->log_read + end)) == 0, "cutting a torn log line");
    close(fd);
    for (size_t at = 0; at < end;) {
        size_t eol = at;
        while (buf[eol] != '\n')
            eol++;
        buf[eol] = '\0';
        char kind = buf[at];
        char *p = buf + at + 1;
        uint64_t a = strtoull(p, &p, 10);
        REQUIRE(a < MAX_IDS || kind == 'R', "log line '%s': id out of range", buf + at);
        switch (kind) {
        case 'A':
            REQUIRE(!(r->flags[a] & F_ACKED), "id %" PRIu64 " acknowledged twice", a);
            r->flags[a] |= F_ACKED;
            r->acked++;
            break;
        case 'T':
            r->flags[a] |= F_TOMB_INTENT;
            break;
        case 'C':
            REQUIRE(r->flags[a] & F_TOMB_INTENT, "id %" PRIu64 " completed without intent", a);
            r->flags[a] |= F_COMPLETED;
            r->completed++;
            break;
        case 'R':
            r->rollovers++;
            break;
        default:
            fail("unparsable log line '%s'", buf + at);
        }
        if (a + 1 > r->next_id && kind != 'R')
            r->next_id = a + 1;
        at = eol + 1;
    }
    r->log_read += end;
    free(buf);
}

/* ---- the check after each kill ---------------------------------------------------------- */

static uint64_t header_size(void)
{
    return (64 + strlen(KILL_MODEL) + 7) / 8 * 8;
}

static void check_files(run_t *r, uint64_t quarantined_now)
{
    char path[800];
    snprintf(path, sizeof(path), "%s/segments", r->dir);
    DIR *d = opendir(path);
    REQUIRE(d != NULL, "opendir %s", path);
    uint64_t *now = NULL;
    size_t n_now = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.')
            continue;
        char *end = NULL;
        uint64_t id = strtoull(de->d_name, &end, 16);
        REQUIRE(end == de->d_name + 16 && strcmp(end, ".seg") == 0, "stray file segments/%s",
                de->d_name);
        char file[1200];
        snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
        struct stat sb;
        REQUIRE(stat(file, &sb) == 0, "stat %s", file);
        /* The size cap: a segment rolls over before an entry would cross it. */
        REQUIRE((uint64_t)sb.st_size <= KILL_SEG_CAP, "segment %s is %lld bytes, cap %u",
                de->d_name, (long long)sb.st_size, KILL_SEG_CAP);
        if ((uint64_t)sb.st_size > r->max_seg_size)
            r->max_seg_size = (uint64_t)sb.st_size;
        now = realloc(now, (n_now + 1) * sizeof(*now));
        REQUIRE(now != NULL, "out of memory");
        now[n_now++] = id;
    }
    closedir(d);
    for (size_t i = 0; i < r->n_segs; i++) {
        int still = 0;
        for (size_t j = 0; j < n_now; j++)
            still |= now[j] == r->segs[i];
        r->deletions += !still;
    }
    free(r->segs);
    r->segs = now;
    r->n_segs = n_now;

    /* Quarantined files: only segments whose header never made it to the file. */
    snprintf(path, sizeof(path), "%s/quarantine", r->dir);
    d = opendir(path);
    uint64_t n_q = 0;
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.')
            continue;
        char file[1200];
        snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
        struct stat sb;
        REQUIRE(stat(file, &sb) == 0, "stat %s", file);
        REQUIRE((uint64_t)sb.st_size < header_size(),
                "quarantined %s has %lld bytes: a whole header was damaged by a kill", de->d_name,
                (long long)sb.st_size);
        n_q++;
    }
    if (d != NULL)
        closedir(d);
    REQUIRE(n_q == r->quarantined + quarantined_now,
            "quarantine holds %" PRIu64 " files, reports said %" PRIu64, n_q,
            r->quarantined + quarantined_now);
}

static void check_store(run_t *r)
{
    read_log(r);
    store_disk_config_t cfg = {
        .dir = r->dir,
        .segment_max_bytes = KILL_SEG_CAP,
        .durability = r->durability ? STORE_DURABLE_POWER : STORE_DURABLE_PROCESS,
        .index_map_bytes = 64u << 20,
        .log = quiet_log,
    };
    store_recovery_t rep;
    memset(&rep, 0xA5, sizeof(rep));
    store_t *s = NULL;
    store_status_t st = store_open_disk(&cfg, &rep, &s);
    REQUIRE(st == STORE_OK, "store_open_disk: %s", store_status_str(st));

    static kitem_t it;
    uint64_t present = 0, tokens = 0;
    for (uint64_t id = 0; id < MAX_IDS; id++)
        r->flags[id] &= (uint8_t)~F_SEEN;
    store_queue_t *q = NULL;
    store_key_t key;
    size_t n_queues = 0;
    while (store_queue_next(s, q, &q, &key, NULL)) {
        n_queues++;
        REQUIRE(strcmp(key.model, KILL_MODEL) == 0 && key.signature == KILL_SIGNATURE &&
                    key.lane < 2,
                "unexpected lane queue (%s, %" PRIx64 ", %u)", key.model, key.signature, key.lane);
        uint64_t n = 0, q_tokens = 0, sum = 0;
        store_queue_count(q, &n, &q_tokens);
        store_view_t *views = calloc(n + 1, sizeof(*views));
        REQUIRE(views != NULL, "out of memory");
        size_t got = 0;
        REQUIRE(store_peek(s, q, views, n + 1, &got) == STORE_OK, "store_peek");
        REQUIRE(got == n, "peek gave %zu of %" PRIu64 " queued", got, n);
        for (size_t v = 0; v < got; v++) {
            const store_view_t *w = &views[v];
            REQUIRE(w->id_len == 8, "an item with a %zu-byte id", w->id_len);
            uint64_t id = 0;
            for (int b = 0; b < 8; b++)
                id |= (uint64_t)w->id_view[b] << (8 * b);
            REQUIRE(id < MAX_IDS, "id %" PRIu64 " out of range", id);
            item_make(id, &it);
            REQUIRE(it.lane == key.lane && w->signature == KILL_SIGNATURE,
                    "id %" PRIu64 " in lane %u", id, key.lane);
            REQUIRE(w->payload_len == it.payload_len && w->tokens == it.tokens &&
                        w->arrival_ns == it.arrival_ns &&
                        memcmp(w->payload_view, it.payload, it.payload_len) == 0,
                    "id %" PRIu64 " handed out with damaged bytes", id);
            REQUIRE(!(r->flags[id] & F_SEEN), "id %" PRIu64 " handed out twice", id);
            REQUIRE(!(r->flags[id] & F_COMPLETED), "completed id %" PRIu64 " came back", id);
            REQUIRE(!(r->flags[id] & F_GONE),
                    "id %" PRIu64 " came back after an earlier open found it tombstoned", id);
            r->flags[id] |= F_SEEN;
            if (!(r->flags[id] & F_ACKED))
                r->unacked_present++;
            if ((r->flags[id] & F_TOMB_INTENT))
                r->intent_present++;
            if (id + 1 > r->next_id)
                r->next_id = id + 1; /* survived unacknowledged: its id is taken */
            present++;
            sum += w->tokens;
        }
        REQUIRE(sum == q_tokens, "lane %u: queued tokens %" PRIu64 ", items sum to %" PRIu64,
                key.lane, q_tokens, sum);
        tokens += sum;
        free(views);
    }
    for (uint64_t id = 0; id < r->next_id; id++) {
        uint8_t fl = r->flags[id];
        if ((fl & F_ACKED) && !(fl & F_TOMB_INTENT))
            REQUIRE(fl & F_SEEN, "acknowledged, not completed id %" PRIu64 " is lost", id);
        /* Its tombstone reached the file before the kill: gone for good (the id is below
         * next_id, so it is never appended again). */
        if ((fl & F_TOMB_INTENT) && !(fl & (F_COMPLETED | F_SEEN | F_GONE))) {
            r->flags[id] |= F_GONE;
            r->intent_gone++;
        }
    }
    /* The report agrees with what was handed out, and a kill damaged nothing durable. */
    REQUIRE(rep.entries_live == present, "report.entries_live %" PRIu64 ", handed out %" PRIu64,
            rep.entries_live, present);
    REQUIRE(rep.tokens_live == tokens, "report.tokens_live %" PRIu64 ", handed out %" PRIu64,
            rep.tokens_live, tokens);
    REQUIRE(rep.corrupt_regions == 0 && rep.corrupt_bytes == 0,
            "a kill left %" PRIu64 " corrupt regions (%" PRIu64 " bytes) below the boundary",
            rep.corrupt_regions, rep.corrupt_bytes);
    REQUIRE(rep.damaged_state_words == 0, "%" PRIu64 " damaged state words",
            rep.damaged_state_words);
    REQUIRE(rep.missing_files == 0 && rep.missing_live_entries == 0,
            "%" PRIu64 " indexed segments without a file", rep.missing_files);
    REQUIRE(rep.index_rebuilt == 0, "the index was rebuilt");
    REQUIRE(rep.tombstones_missing == 0, "%" PRIu64 " tombstones missing after a kill",
            rep.tombstones_missing);
    REQUIRE(rep.quarantined_files <= 1, "%" PRIu64 " files quarantined", rep.quarantined_files);
    REQUIRE(store_pending_count(s) == 0, "pending items after open");
    REQUIRE(n_queues <= 2, "%zu lane queues", n_queues);
    store_close(s);
    r->removed_at_open += rep.removed_segments;
    r->torn_tails += rep.torn_tails;
    r->adopted += rep.adopted_files;
    check_files(r, rep.quarantined_files);
    r->quarantined += rep.quarantined_files;
}

/* ---- one kill -------------------------------------------------------------------------------- */

/* One writer life, killed `delay` ms after it started (every third round) or after it reported
 * the store open; delay 0 draws 5..60 ms from the seeded generator. */
static void one_round(run_t *r, unsigned round, unsigned delay)
{
    snprintf(round_name, sizeof(round_name), "%s round %u, next id %" PRIu64,
             r->durability ? "power" : "process", round, r->next_id);
    int ready[2];
    REQUIRE(pipe(ready) == 0, "pipe");
    char start[32], dur[8], seed[32], fd[16];
    snprintf(start, sizeof(start), "%" PRIu64, r->next_id);
    snprintf(dur, sizeof(dur), "%d", r->durability);
    snprintf(seed, sizeof(seed), "%" PRIu64, rng_splitmix64(&rng_state));
    snprintf(fd, sizeof(fd), "%d", ready[1]);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(ready[0]);
        execl(r->writer, r->writer, r->dir, r->log, start, dur, seed, fd, (char *)NULL);
        _exit(127);
    }
    writer_pid = pid;
    close(ready[1]);
    /* Power level: every flush waits for the disk, so a life needs longer to do anything. */
    if (delay == 0)
        delay = r->durability ? 20 + (unsigned)(rng_splitmix64(&rng_state) % 181)
                              : 5 + (unsigned)(rng_splitmix64(&rng_state) % 56);
    int from_spawn = round % 3 == 0;
    if (!from_spawn) {
        /* Wait (at most 30 s) for the writer to have the store open. */
        struct pollfd p = {ready[0], POLLIN, 0};
        int pr = poll(&p, 1, 30000);
        char c = 0;
        if (pr != 1 || read(ready[0], &c, 1) != 1) {
            int status = 0;
            if (pr == 1 && waitpid(pid, &status, 0) == pid)
                writer_pid = 0;
            fail("the writer never opened the store (poll %d, exit status 0x%x)", pr, status);
        }
    }
    sleep_ms(delay);
    if (from_spawn) {
        struct pollfd p = {ready[0], POLLIN, 0};
        r->kills_before_ready += poll(&p, 1, 0) == 0;
    }
    REQUIRE(kill(pid, SIGKILL) == 0, "kill: %s", strerror(errno));
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    writer_pid = 0;
    close(ready[0]);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        if (WIFEXITED(status))
            fail("the writer exited by itself with code %d (see its stderr above)",
                 WEXITSTATUS(status));
        fail("the writer died of signal %d, not SIGKILL", WTERMSIG(status));
    }
    r->kills++;
    check_store(r);
}

static void run_phase(run_t *r, const char *writer, int durability, unsigned rounds,
                      int need_rollover)
{
    memset(r, 0, sizeof(*r));
    r->writer = writer;
    r->durability = durability;
    const char *tmp = getenv("TMPDIR");
    snprintf(r->base, sizeof(r->base), "%s/lanes-kill-XXXXXX",
             tmp != NULL && tmp[0] ? tmp : "/tmp");
    REQUIRE(mkdtemp(r->base) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(kept_dir, sizeof(kept_dir), "%s", r->base);
    snprintf(r->dir, sizeof(r->dir), "%s/store", r->base);
    snprintf(r->log, sizeof(r->log), "%s/acks.log", r->base);
    r->flags = calloc(MAX_IDS, 1);
    REQUIRE(r->flags != NULL, "out of memory");
    for (unsigned i = 0; i < rounds; i++)
        one_round(r, i, 0);
    /* A slow or loaded machine writes less in the same milliseconds: until the phase has seen
     * what it exists to see (a roll-over at the size cap, a whole-file deletion), later rounds
     * let the writer run longer, doubling every few rounds, up to KILL_EXTRA_ROUNDS. */
    unsigned done = rounds;
    for (unsigned extra = 0; extra < KILL_EXTRA_ROUNDS && (r->rollovers == 0 || r->deletions == 0);
         extra++)
        one_round(r, done++, 60u << (extra / 4 < 5 ? extra / 4 : 5));
    printf("test_kill: %s: %u kills (%" PRIu64 " before the store was open), %" PRIu64
           " acknowledged, %" PRIu64 " completed, %" PRIu64 " roll-overs, %" PRIu64
           " segment files deleted (%" PRIu64 " at open), %" PRIu64 " torn tails, %" PRIu64
           " adopted, %" PRIu64 " quarantined, largest segment %" PRIu64 " bytes; %" PRIu64
           " unacknowledged and %" PRIu64 " tombstone-in-flight items came back, %" PRIu64
           " in-flight completions took effect\n",
           durability ? "power" : "process", r->kills, r->kills_before_ready, r->acked,
           r->completed, r->rollovers, r->deletions, r->removed_at_open, r->torn_tails, r->adopted,
           r->quarantined, r->max_seg_size, r->unacked_present, r->intent_present, r->intent_gone);
    /* The run exercised what it is for. */
    snprintf(round_name, sizeof(round_name), "%s phase totals", durability ? "power" : "process");
    REQUIRE(r->kills == done, "%u kills", r->kills);
    REQUIRE(r->acked >= 2 * rounds, "only %" PRIu64 " items acknowledged", r->acked);
    REQUIRE(r->completed >= rounds / 2, "only %" PRIu64 " items completed", r->completed);
    REQUIRE(r->deletions >= 1, "no segment file was ever deleted");
    REQUIRE(!need_rollover || r->rollovers >= 1, "no segment rolled over at the size cap");
    free(r->flags);
    free(r->segs);
    REQUIRE(fs_remove_tree(r->base) == 0, "cannot remove %s", r->base);
    kept_dir[0] = '\0';
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_kill PATH_TO_KILL_WRITER\n");
        return 2;
    }
    const char *env = getenv("LANES_TEST_SEED");
    rng_state = env != NULL && env[0] ? strtoull(env, NULL, 0) : 0x4B111ull;
    printf("test_kill: seed 0x%" PRIx64 "\n", rng_state);
    signal(SIGPIPE, SIG_IGN);
    uint64_t t0 = clock_mono_ns();
    static run_t run;
    run_phase(&run, argv[1], 0, 24, 1);
    run_phase(&run, argv[1], 1, 6, 0);
    double secs = (double)(clock_mono_ns() - t0) / 1e9;
    printf("test_kill: passed in %.1f s\n", secs);
    snprintf(round_name, sizeof(round_name), "total");
    REQUIRE(secs < 120, "took %.1f s", secs);
    return 0;
}
