/*
 * fuzz_store.c - the base store, its copies and the recovery walk of fuzz.h.
 *
 * Invariants the walk checks (aborting the run, which libFuzzer reports as a crash):
 *   1. What recovery hands out is within the store's contract: ids of at most 64 bytes, tokens
 *      above 0, every item of a queue with the queue's signature.
 *   2. Recovery is stable: after a walk that completes some items and flushes, a second open
 *      finds exactly the items the first left (its count minus the completed ones), and its
 *      report's live count agrees with its queues.
 *   3. Damage never keeps the store from opening: a damaged index is rebuilt from the segments,
 *      a damaged segment costs its damaged entries or is quarantined (docs/store.md). A
 *      store that cannot open after a flipped bit cannot start the daemon, permanently. The
 *      one refusal allowed is another store format (STORE_EFORMAT): it takes a header or row
 *      whose CRC verifies, which is what another lanesched writes, never what a flipped bit
 *      leaves.
 *
 * Rejected: damaging the index's data.mdb at page level (fuzz_index.c damages rows through
 * LMDB instead): LMDB trusts its own pages, and a crash inside liblmdb is not this project's.
 */
#include "tests/fuzz/fuzz.h"

#include "store/store.h"
#include "support/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A small index map: the base store needs a few pages, and every open reserves the whole map
 * in the file (index_preallocate), which a run pays for. */
#define FUZZ_INDEX_MAP (128u << 10)

uint32_t fuzz_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The store's log: silent, unless FUZZ_VERBOSE is set (reproducing a crash). */
static void fuzz_quiet(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (getenv("FUZZ_VERBOSE") != NULL)
        fprintf(stderr, "store[%d]: %s\n", level, msg);
}

static store_disk_config_t fuzz_config(const char *dir)
{
    /* STORE_IO_PLAIN: setting up and tearing down an io_uring ring waits for the kernel at every
     * open, which dominated a run (figures: docs/bench.md, "Figures behind other constants");
     * the rings only carry the power level's syncs, which recovery does not exercise. */
    /* Journal files of 16 records: the base store's journal spans several. */
    return (store_disk_config_t){.dir = dir,
                                 .segment_max_bytes = 1536,
                                 .index_map_bytes = FUZZ_INDEX_MAP,
                                 .io = STORE_IO_PLAIN,
                                 .log = fuzz_quiet,
                                 .journal_max_bytes = 64 + 24 * 16};
}

static char fuzz_root_path[256];

static void fuzz_root_remove(void)
{
    fs_remove_tree(fuzz_root_path);
}

/* This process's scratch directory, on tmpfs when there is one; removed at exit. */
static const char *fuzz_root(void)
{
    if (fuzz_root_path[0] == '\0') {
        struct stat sb;
        const char *base = stat("/dev/shm", &sb) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_root_path, sizeof(fuzz_root_path), "%s/lanes-fuzz-%d", base, (int)getpid());
        mkdir(fuzz_root_path, 0755);
        atexit(fuzz_root_remove);
    }
    return fuzz_root_path;
}

static void fuzz_die(const char *what)
{
    fprintf(stderr, "fuzz: %s\n", what);
    abort();
}

/* The base store, made once. */
static void fuzz_base_make(const char *dir)
{
    store_disk_config_t cfg = fuzz_config(dir);
    store_t *s = NULL;
    if (store_open_disk(&cfg, NULL, &s) != STORE_OK)
        fuzz_die("cannot make the base store");
    static const struct {
        const char *model;
        uint64_t sig;
        uint32_t lane;
    } keys[3] = {{"llama", 0xA1A1, 0}, {"llama", 0xA1A1, 1}, {"qwen.v2", 0xB2B2, 0}};
    store_queue_t *q[3];
    for (int k = 0; k < 3; k++) {
        store_key_t key = {keys[k].model, keys[k].sig, keys[k].lane};
        if (store_queue_open(s, &key, &q[k]) != STORE_OK)
            fuzz_die("base queue");
    }
    store_ref_t refs[64];
    for (int i = 0; i < 60; i++) {
        char id[32], payload[48];
        int idlen = snprintf(id, sizeof(id), "item-%02d", i);
        int plen = snprintf(payload, sizeof(payload), "payload of item %d %.*s", i, i % 17,
                            "xxxxxxxxxxxxxxxxx");
        store_item_t it = {.id = (const uint8_t *)id,
                           .id_len = (size_t)idlen,
                           .payload = (const uint8_t *)payload,
                           .payload_len = (size_t)plen,
                           .tokens = (uint32_t)(10 + i),
                           .arrival_ns = (uint64_t)i * 1000,
                           .prefix_tokens = (uint32_t)(i % 5),
                           .max_wait_ms = (uint32_t)(i % 7 == 0 ? 0 : 100 * i)};
        if (store_append(s, q[i % 3], &it, &refs[i]) != STORE_OK)
            fuzz_die("base append");
        if (i == 44 && store_flush(s) != STORE_OK) /* the last 15 are never flushed */
            fuzz_die("base flush");
    }
    /* Deliver a few of every lane (flushed, so readable), complete some: records in the
     * journal, one flush of tombstones, then more that are never flushed. */
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 3; k++) {
            store_view_t views[8];
            size_t n = 0;
            if (store_peek(s, q[k], views, 4, &n) != STORE_OK)
                fuzz_die("base peek");
            store_ref_t taken[8];
            for (size_t i = 0; i < n; i++)
                taken[i] = views[i].ref;
            if (n != 0 && store_commit(s, q[k], taken, n) != STORE_OK)
                fuzz_die("base commit");
            for (size_t i = 0; i < n; i += 2) {
                if (store_tombstone(s, taken[i], NULL) != STORE_OK)
                    fuzz_die("base tombstone");
            }
        }
        if (round == 0 && store_flush(s) != STORE_OK)
            fuzz_die("base flush of tombstones");
    }
    store_close(s); /* not flushed after the last appends and tombstones: a crash */
}

/* The base store's files, read once: a run writes them back instead of copying the tree. */
typedef struct {
    char rel[64]; /* "segments/<name>", "journal/<name>" or "index/data.mdb" */
    uint8_t *bytes;
    size_t len;  /* bytes up to the last nonzero one: the rest is written as a hole */
    size_t size; /* the file's size */
} fuzz_file_t;

static fuzz_file_t base_files[64];
static size_t n_base_files;

static void fuzz_base_read(const char *base, const char *sub)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", base, sub);
    DIR *d = opendir(path);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "lock.mdb") == 0 || n_base_files == 64)
            continue;
        fuzz_file_t *f = &base_files[n_base_files++];
        snprintf(f->rel, sizeof(f->rel), "%s/%.40s", sub, e->d_name);
        snprintf(path, sizeof(path), "%s/%s", base, f->rel);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0 || (f->bytes = malloc((size_t)sb.st_size + 1)) == NULL ||
            read(fd, f->bytes, (size_t)sb.st_size) != sb.st_size)
            fuzz_die("cannot read the base store");
        f->size = f->len = (size_t)sb.st_size;
        while (f->len > 0 && f->bytes[f->len - 1] == 0)
            f->len--;
        close(fd);
    }
    if (d != NULL)
        closedir(d);
}

/* Removes what a run left that the base does not have: files in segments/ and journal/, and
 * every entry of the directory but segments/, journal/ and index/ (quarantine/, an index set
 * aside). */
static void fuzz_run_clean(const char *run)
{
    char path[512];
    DIR *d = opendir(run);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "segments") == 0 ||
            strcmp(e->d_name, "journal") == 0 || strcmp(e->d_name, "index") == 0)
            continue;
        snprintf(path, sizeof(path), "%.250s/%.200s", run, e->d_name);
        if (fs_remove_tree(path) != 0)
            fuzz_die("cannot clear the run directory");
    }
    if (d != NULL)
        closedir(d);
    static const char *const subs[2] = {"segments", "journal"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "%s/%s", run, subs[k]);
        mkdir(path, 0755); /* a harness may have removed it */
        d = opendir(path);
        for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.')
                continue;
            char rel[64];
            snprintf(rel, sizeof(rel), "%s/%.40s", subs[k], e->d_name);
            int known = 0;
            for (size_t i = 0; i < n_base_files && !known; i++)
                known = strcmp(base_files[i].rel, rel) == 0;
            if (!known) {
                snprintf(path, sizeof(path), "%s/%s", run, rel);
                unlink(path);
            }
        }
        if (d != NULL)
            closedir(d);
    }
}

const char *fuzz_store_fresh(void)
{
    static char run[300];
    if (run[0] == '\0') {
        char base[300];
        snprintf(base, sizeof(base), "%s/base", fuzz_root());
        snprintf(run, sizeof(run), "%s/run", fuzz_root());
        fs_remove_tree(base);
        fs_remove_tree(run);
        fuzz_base_make(base);
        fuzz_base_read(base, "segments");
        fuzz_base_read(base, "journal");
        fuzz_base_read(base, "index");
        fs_remove_tree(base);
        char path[400];
        mkdir(run, 0755);
        snprintf(path, sizeof(path), "%s/segments", run);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/journal", run);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/index", run);
        mkdir(path, 0755);
    }
    fuzz_run_clean(run);
    char path[512];
    snprintf(path, sizeof(path), "%s/index", run);
    mkdir(path, 0755); /* a harness may have removed it */
    for (size_t i = 0; i < n_base_files; i++) {
        snprintf(path, sizeof(path), "%.250s/%.64s", run, base_files[i].rel);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 ||
            write(fd, base_files[i].bytes, base_files[i].len) != (ssize_t)base_files[i].len ||
            ftruncate(fd, (off_t)base_files[i].size) != 0)
            fuzz_die("cannot write the run directory");
        close(fd);
    }
    return run;
}

static int fuzz_name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

size_t fuzz_store_journals(const char *dir, char paths[][512], size_t max)
{
    char jnl[256];
    snprintf(jnl, sizeof(jnl), "%s/journal", dir);
    size_t n = 0;
    DIR *d = opendir(jnl);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL && n < max;) {
        if (e->d_name[0] != '.')
            snprintf(paths[n++], 512, "%s/%s", jnl, e->d_name);
    }
    if (d != NULL)
        closedir(d);
    qsort(paths, n, sizeof(paths[0]), fuzz_name_cmp);
    return n;
}

size_t fuzz_store_files(const char *dir, char paths[][512], size_t max)
{
    char seg[256];
    snprintf(seg, sizeof(seg), "%s/segments", dir);
    size_t n = 0;
    DIR *d = opendir(seg);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL && n + 1 < max;) {
        if (e->d_name[0] != '.')
            snprintf(paths[n++], 512, "%s/%s", seg, e->d_name);
    }
    if (d != NULL)
        closedir(d);
    qsort(paths, n, sizeof(paths[0]), fuzz_name_cmp);
    snprintf(paths[n++], 512, "%s/index/data.mdb", dir);
    return n;
}

typedef struct {
    uint64_t live, tokens;
} fuzz_count_t;

/* Walks every queue: checks each item (invariant 1), completes every other one, leaves the rest
 * pending. Returns what it found and how many it completed. */
static fuzz_count_t fuzz_walk_queues(store_t *s, uint64_t *out_completed)
{
    fuzz_count_t c = {0, 0};
    uint64_t completed = 0;
    store_queue_t *q = NULL;
    store_key_t key;
    uint64_t flip = 0;
    while (store_queue_next(s, q, &q, &key, NULL)) {
        uint64_t items, tokens;
        store_queue_count(q, &items, &tokens);
        c.live += items;
        c.tokens += tokens;
        for (;;) {
            store_view_t views[16];
            size_t n = 0;
            if (store_peek(s, q, views, 16, &n) != STORE_OK || n == 0)
                break;
            store_ref_t refs[16];
            for (size_t i = 0; i < n; i++) {
                if (views[i].id_len > 64 || views[i].tokens == 0 ||
                    views[i].signature != key.signature || (views[i].id_len && !views[i].id_view))
                    fuzz_die("recovery handed out an item outside the store's contract");
                refs[i] = views[i].ref;
            }
            if (store_commit(s, q, refs, n) != STORE_OK)
                fuzz_die("commit of a fresh peek failed");
            for (size_t i = 0; i < n; i++) {
                if ((flip++ & 1) == 0 && store_tombstone(s, refs[i], NULL) == STORE_OK)
                    completed++;
            }
        }
    }
    *out_completed = completed;
    return c;
}

void fuzz_store_walk(const char *dir)
{
    store_disk_config_t cfg = fuzz_config(dir);
    store_t *s = NULL;
    store_recovery_t rep;
    store_status_t ost = store_open_disk(&cfg, &rep, &s);
    if (ost == STORE_EFORMAT)
        return; /* a row or header that verifies and names another store format: refused by
                 * design (libFuzzer forges such a row by learning its CRC from the compare) */
    if (ost != STORE_OK) { /* invariant 3 */
        fprintf(stderr, "fuzz: the damaged store does not open: %s\n", store_status_str(ost));
        fuzz_die("recovery refused a damaged store");
    }
    uint64_t completed = 0;
    fuzz_count_t first = fuzz_walk_queues(s, &completed);
    if (rep.entries_live != first.live)
        fuzz_die("the first open's report disagrees with its queues");
    store_status_t fst = store_flush(s);
    store_close(s);
    if (fst != STORE_OK)
        return;
    if (store_open_disk(&cfg, &rep, &s) != STORE_OK)
        fuzz_die("a store that opened and flushed does not open again");
    uint64_t again = 0;
    fuzz_count_t second = fuzz_walk_queues(s, &again);
    store_close(s);
    if (getenv("FUZZ_VERBOSE") != NULL)
        fprintf(stderr, "fuzz: first open %llu live, %llu completed; second open %llu\n",
                (unsigned long long)first.live, (unsigned long long)completed,
                (unsigned long long)second.live);
    if (second.live != first.live - completed || rep.entries_live != second.live) {
        fprintf(stderr,
                "fuzz: first open %llu live, %llu completed; second open %llu (report %llu)\n",
                (unsigned long long)first.live, (unsigned long long)completed,
                (unsigned long long)second.live, (unsigned long long)rep.entries_live);
        fuzz_die("recovery is not stable across a flushed reopen");
    }
}
