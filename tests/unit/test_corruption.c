/*
 * test_corruption.c - recovery of the disk store from damaged segment files.
 *
 * Each test builds a pristine store in a fresh mkdtemp directory: 40 known items in two lanes
 * of one (model, shape), a 1 KiB segment cap so the model's log rolls over several times, a
 * 512-byte journal file cap so the state journal spans several files, some items committed and
 * tombstoned, everything flushed, the store closed. The entry boundaries of every segment file
 * are computed from the format written down in store/disk/segment_int.h (header 64 + model
 * bytes padded to 8, entry 56 + id + payload padded to 8, the entries of both lanes interleaved
 * in append order) and cross-checked against the file bytes (state words, lengths, routing
 * keys, CRC-32C computed here independently) before any damage is done; so are the journal's
 * records (store/disk/journal_int.h: a delivery count per commit, a tombstone per completion).
 *
 * Every trial copies the pristine directory, damages one copy, reopens it and checks:
 *   - store_open_disk returns STORE_OK (recovery never crashes, never refuses a damaged file);
 *   - the items handed out are exactly the expected ones, each once, byte-identical to what was
 *     appended (id, payload, tokens, arrival, ref, routing keys): never a damaged item;
 *   - every counter of the recovery report equals the value derived from the format and the
 *     damage done (the report says exactly what was dropped), the journal's included;
 *   - what happened to the files (cut, kept, quarantined, deleted).
 *
 * Seeded: LANES_TEST_SEED overrides the seed; the seed is printed so a failure can be replayed.
 * Failures name the trial (segment, offset, flipped bytes).
 *
 * Longer than the house rule's ~600 lines: one case per kind of damage, each building its own
 * store on disk, damaging it byte by byte and reading back what recovery reports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/rng.h"
#include "support/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/disk/journal_int.h"
#include "store/store.h"

/* ---- the format, as segment_int.h writes it down (restated here on purpose) -------------- */

#define FMT_HEADER_FIXED 64u
#define FMT_ENTRY_HEADER 56u
#define FMT_ENTRY_CRC    52u /* the CRC covers the entry's bytes 4 .. 52 */
#define FMT_ENTRY_PAYLEN 36u
#define FMT_ALIGN        8u
#define FMT_STATE_LIVE   0x4556494Cu /* "LIVE" */
#define FMT_STATE_TOMB   0x424D4F54u /* "TOMB" */
#define FMT_STATE_DLV    0x00564C44u /* "DLV" + the delivery count (1..255) in the high byte */
#define FMT_RANK_TOMB    256         /* states only move up: LIVE 0, DLV n, TOMB */
#define FMT_JNL_HEADER   64u
#define FMT_JNL_RECORD   24u
#define FMT_JNL_CRC      20u /* a record's CRC covers journal id (u64) || its bytes 0 .. 20 */

static uint64_t fmt_align(uint64_t n)
{
    return (n + FMT_ALIGN - 1) / FMT_ALIGN * FMT_ALIGN;
}

static uint64_t fmt_header_size(size_t model_len)
{
    return fmt_align(FMT_HEADER_FIXED + model_len);
}

static uint64_t fmt_entry_size(size_t id_len, size_t payload_len)
{
    return fmt_align(FMT_ENTRY_HEADER + id_len + payload_len);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* CRC-32C (Castagnoli), bitwise: an independent implementation of the format's checksum. */
static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n-- > 0) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

/* The entry CRC: segment id (u64 LE) || entry bytes 4..52 || id || payload. */
static uint32_t fmt_entry_crc(uint64_t segment_id, const uint8_t *entry)
{
    uint8_t sid[8];
    put64(sid, segment_id);
    size_t id_len = (size_t)entry[8] | (size_t)entry[9] << 8;
    uint32_t crc = crc32c(0, sid, 8);
    crc = crc32c(crc, entry + 4, FMT_ENTRY_CRC - 4);
    return crc32c(crc, entry + FMT_ENTRY_HEADER, id_len + get32(entry + FMT_ENTRY_PAYLEN));
}

/* A record's CRC, seeded with its journal's id. */
static uint32_t fmt_jnl_crc(uint64_t journal_id, const uint8_t *rec)
{
    uint8_t jid[8];
    put64(jid, journal_id);
    return crc32c(crc32c(0, jid, 8), rec, FMT_JNL_CRC);
}

/* ---- deterministic randomness ------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_below(uint64_t n)
{
    return rng_splitmix64(&rng_state) % n;
}

static uint64_t test_seed(void)
{
    const char *env = getenv("LANES_TEST_SEED");
    return env != NULL && env[0] != '\0' ? strtoull(env, NULL, 0) : 0x5EED0C0DEull;
}

/* ---- files ------------------------------------------------------------------------------- */

static uint8_t *read_all(const char *path, size_t *out_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    uint8_t *buf = malloc((size_t)sb.st_size + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)sb.st_size, 0), sb.st_size);
    close(fd);
    *out_len = (size_t)sb.st_size;
    return buf;
}

static void write_all(const char *path, const uint8_t *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

/* File size, or -1 if the file does not exist. */
static long long file_size(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        assert_int_equal(errno, ENOENT);
        return -1;
    }
    return (long long)sb.st_size;
}

static void make_temp_dir(char *buf, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/lanes-corruption-XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    assert_non_null(mkdtemp(buf));
}

/* ---- the pristine store ------------------------------------------------------------------ */

#define MODEL     "corrupt-model" /* 13 bytes: the header is 64 + 13 = 77, padded to 80 */
#define SIGNATURE 0x5A5AC0DEF00Dull
#define N_ITEMS   40
#define MAX_SEGS  32
#define SEG_CAP   1024u
#define JNL_CAP   512u /* 18 records a file */
#define MAX_JNLS  16
#define MAX_JRECS 64

typedef struct {
    uint8_t id[16];
    size_t id_len;
    uint8_t payload[160];
    size_t payload_len;
    uint32_t tokens;
    uint64_t arrival_ns;
    uint32_t lane;
    uint32_t prefix_tokens, max_wait_ms;
    store_ref_t ref; /* as append returned it */
    int seg;         /* index into fixture.segs */
    uint64_t size;   /* entry bytes, from the format */
    int tomb;        /* tombstoned before close: a TOMB record in the journal */
    int committed;   /* committed once: a "DLV" 1 record in the journal */
} item_t;

/* Format 3 never rewrites an entry: its state word stays LIVE; its states are journal records. */
static uint32_t item_state_word(const item_t *it)
{
    (void)it;
    return FMT_STATE_LIVE;
}

typedef struct {
    uint64_t id;
    char name[32];
    uint64_t header_len;
    uint64_t size; /* file size == durable boundary recorded by the last flush */
    int items[N_ITEMS];
    size_t n_items; /* in file order */
} seginfo_t;

/* A journal file and a record in one, as the fixture's check read them. */
typedef struct {
    uint64_t id;
    char name[32];
    uint64_t size;
} jnlinfo_t;

typedef struct {
    int jnl;      /* index into fixture.jnls */
    uint64_t pos; /* file offset of the record */
    int item;     /* the item it names */
    int rank;     /* 1 ("DLV" 1) or FMT_RANK_TOMB */
} jrecinfo_t;

typedef struct {
    char root[512]; /* the pristine data directory */
    item_t items[N_ITEMS];
    seginfo_t segs[MAX_SEGS];
    size_t n_segs;
    jnlinfo_t jnls[MAX_JNLS];
    size_t n_jnls;
    jrecinfo_t jrecs[MAX_JRECS];
    size_t n_jrecs;
} fixture_t;

/*
 * What a trial holds while it runs: a failed assertion leaves the test by longjmp, so the
 * teardown closes and removes whatever is still here (no leak, no stray directory).
 */
static store_t *trial_store;
static store_view_t *trial_views;
static char trial_dir[512];

/* Store log lines: silent unless LANES_TEST_VERBOSE is set; counted by level. */
static unsigned log_count[3];

/* The count of the last "could not be read" line (recovery_scan.c invariant 10), or 0. */
static unsigned long long log_unread;

static void test_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level >= 0 && level < 3)
        log_count[level]++;
    const char *colon = strstr(msg, ": ");
    unsigned long long n = 0, of = 0;
    if (strstr(msg, "could not be read (damaged or cut)") != NULL && colon != NULL &&
        sscanf(colon + 2, "%llu of the %llu", &n, &of) == 2)
        log_unread = n;
    if (getenv("LANES_TEST_VERBOSE") != NULL)
        fprintf(stderr, "  [store %d] %s\n", level, msg);
}

static store_disk_config_t disk_config(const char *dir)
{
    return (store_disk_config_t){
        .dir = dir,
        .segment_max_bytes = SEG_CAP,
        .durability = STORE_DURABLE_PROCESS,
        .index_map_bytes = 8u << 20,
        .log = test_log,
        .log_ctx = NULL,
        .journal_max_bytes = JNL_CAP,
    };
}

static void item_make(item_t *it, size_t i)
{
    memset(it, 0, sizeof(*it));
    it->id_len = 4 + i % 9;
    it->id[0] = 'k';
    it->id[1] = (uint8_t)('0' + i / 10);
    it->id[2] = (uint8_t)('0' + i % 10);
    for (size_t j = 3; j < it->id_len; j++)
        it->id[j] = (uint8_t)('a' + (i + j) % 26);
    it->payload_len = (i * 37) % 150;
    for (size_t j = 0; j < it->payload_len; j++)
        it->payload[j] = (uint8_t)(i * 131 + j * 7 + 3);
    it->tokens = 1 + (uint32_t)(i * 7 % 50);
    it->arrival_ns = 1700000000000000000ull + i * 1000;
    it->lane = i % 5 == 4 ? 1 : 0;
    it->prefix_tokens = (uint32_t)(i % 3 == 0 ? 0 : i * 11);
    it->max_wait_ms = (uint32_t)(i % 4 == 0 ? 0 : 250 + i);
    it->size = fmt_entry_size(it->id_len, it->payload_len);
}

static void append_item(store_t *s, store_queue_t *q, item_t *it)
{
    store_item_t in = {
        .id = it->id,
        .id_len = it->id_len,
        .payload = it->payload,
        .payload_len = it->payload_len,
        .tokens = it->tokens,
        .arrival_ns = it->arrival_ns,
        .prefix_tokens = it->prefix_tokens,
        .max_wait_ms = it->max_wait_ms,
    };
    assert_int_equal(store_append(s, q, &in, &it->ref), STORE_OK);
}

static int item_by_id(const fixture_t *f, const uint8_t *id, size_t id_len)
{
    for (int i = 0; i < N_ITEMS; i++) {
        if (f->items[i].id_len == id_len && memcmp(f->items[i].id, id, id_len) == 0)
            return i;
    }
    return -1;
}

/* Peeks `n` from the front of q, commits them and tombstones those with tomb_mask(index). */
static void complete_front(fixture_t *f, store_t *s, store_queue_t *q, size_t n,
                           int (*tomb_pick)(int))
{
    store_view_t views[N_ITEMS];
    size_t got = 0;
    assert_int_equal(store_peek(s, q, views, n, &got), STORE_OK);
    assert_int_equal(got, n);
    store_ref_t refs[N_ITEMS];
    for (size_t i = 0; i < n; i++)
        refs[i] = views[i].ref;
    assert_int_equal(store_commit(s, q, refs, n), STORE_OK);
    for (size_t i = 0; i < n; i++) {
        int k = -1;
        for (int j = 0; j < N_ITEMS; j++) {
            if (f->items[j].ref.queue == refs[i].queue && f->items[j].ref.offset == refs[i].offset)
                k = j;
        }
        assert_true(k >= 0);
        f->items[k].committed = 1;
        if (tomb_pick(k)) {
            int done = -1;
            assert_int_equal(store_tombstone(s, refs[i], &done), STORE_OK);
            assert_int_equal(done, 1);
            f->items[k].tomb = 1;
        }
        /* The others stay pending: at close they are dropped from memory and stay live on disk. */
    }
}

static int pick_every_third(int k)
{
    return k % 3 == 0;
}

static int pick_odd(int k)
{
    return k % 2 == 1;
}

static int pick_all(int k)
{
    (void)k;
    return 1;
}

static void seg_path(const char *dir, const seginfo_t *sg, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/segments/%s", dir, sg->name);
}

static int jnl_name_cmp(const void *a, const void *b)
{
    return strcmp(((const jnlinfo_t *)a)->name, ((const jnlinfo_t *)b)->name);
}

/* The journal item i's records say: the highest rank of its records not in `damaged` (indexed
 * like f->jrecs; NULL: none damaged). */
static int item_jrank(const fixture_t *f, int i, const int *damaged)
{
    int rank = 0;
    for (size_t r = 0; r < f->n_jrecs; r++) {
        if (f->jrecs[r].item == i && (damaged == NULL || !damaged[r]) && f->jrecs[r].rank > rank)
            rank = f->jrecs[r].rank;
    }
    return rank;
}

/* Checks the journal files against journal_int.h, byte for byte, and fills f->jnls and f->jrecs:
 * every record verifies, names an item's entry by (segment, offset, length), and the records are
 * exactly a "DLV" 1 per committed item and a TOMB per tombstoned one; the rest of each file is
 * zero. */
static void fixture_check_journal(fixture_t *f)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/journal", f->root);
    DIR *d = opendir(path);
    assert_non_null(d);
    f->n_jnls = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.')
            continue;
        assert_true(f->n_jnls < MAX_JNLS);
        jnlinfo_t *j = &f->jnls[f->n_jnls++];
        assert_int_equal(strlen(de->d_name), 20);
        assert_string_equal(de->d_name + 16, ".jnl");
        snprintf(j->name, sizeof(j->name), "%.24s", de->d_name);
        j->id = strtoull(de->d_name, NULL, 16);
    }
    closedir(d);
    qsort(f->jnls, f->n_jnls, sizeof(f->jnls[0]), jnl_name_cmp);
    f->n_jrecs = 0;
    int dlv[N_ITEMS] = {0}, tomb[N_ITEMS] = {0};
    for (size_t k = 0; k < f->n_jnls; k++) {
        jnlinfo_t *j = &f->jnls[k];
        snprintf(path, sizeof(path), "%s/journal/%s", f->root, j->name);
        size_t len;
        uint8_t *b = read_all(path, &len);
        j->size = len;
        assert_int_equal(len, JNL_CAP - (JNL_CAP - FMT_JNL_HEADER) % FMT_JNL_RECORD);
        assert_memory_equal(b, "LANEJNL\0", 8);
        assert_int_equal(get32(b + 8), 3);
        assert_int_equal(get32(b + 12), FMT_JNL_HEADER);
        assert_int_equal(get64(b + 16), j->id);
        assert_int_equal(get32(b + 32), FMT_JNL_RECORD);
        for (size_t z = 36; z < 56; z++)
            assert_int_equal(b[z], 0);
        assert_int_equal(get32(b + 60), 0);
        uint8_t hdr[FMT_JNL_HEADER];
        memcpy(hdr, b, sizeof(hdr));
        put32(hdr + 56, 0);
        assert_int_equal(crc32c(0, hdr, sizeof(hdr)), get32(b + 56));
        int blank_seen = 0;
        for (uint64_t pos = FMT_JNL_HEADER; pos + FMT_JNL_RECORD <= len; pos += FMT_JNL_RECORD) {
            const uint8_t *r = b + pos;
            int blank = 1;
            for (size_t z = 0; z < FMT_JNL_RECORD; z++)
                blank &= r[z] == 0;
            if (blank) {
                blank_seen = 1;
                continue;
            }
            assert_false(blank_seen); /* records are appended back to back */
            assert_int_equal(fmt_jnl_crc(j->id, r), get32(r + FMT_JNL_CRC));
            int item = -1;
            for (int i = 0; i < N_ITEMS; i++) {
                if (f->items[i].ref.queue == get64(r) && f->items[i].ref.offset == get32(r + 8))
                    item = i;
            }
            assert_true(item >= 0);
            assert_int_equal(get32(r + 12), f->items[item].size);
            uint32_t state = get32(r + 16);
            int rank = state == FMT_STATE_TOMB ? FMT_RANK_TOMB : 1;
            if (rank == 1)
                assert_int_equal(state, FMT_STATE_DLV | 1u << 24);
            (rank == 1 ? dlv : tomb)[item]++;
            assert_true(f->n_jrecs < MAX_JRECS);
            f->jrecs[f->n_jrecs++] = (jrecinfo_t){(int)k, pos, item, rank};
        }
        free(b);
    }
    for (int i = 0; i < N_ITEMS; i++) {
        assert_int_equal(dlv[i], f->items[i].committed);
        assert_int_equal(tomb[i], f->items[i].tomb);
    }
}

/* Checks the files against the format, byte for byte, and fills f->segs. */
static void fixture_check_format(fixture_t *f)
{
    /* Segments, from the refs append handed out, in order of first use. */
    f->n_segs = 0;
    for (int i = 0; i < N_ITEMS; i++) {
        size_t k = 0;
        while (k < f->n_segs && f->segs[k].id != f->items[i].ref.queue)
            k++;
        if (k == f->n_segs) {
            assert_true(f->n_segs < MAX_SEGS);
            seginfo_t *sg = &f->segs[f->n_segs++];
            memset(sg, 0, sizeof(*sg));
            sg->id = f->items[i].ref.queue;
            sg->header_len = fmt_header_size(strlen(MODEL));
            snprintf(sg->name, sizeof(sg->name), "%016" PRIx64 ".seg", sg->id);
        }
        f->items[i].seg = (int)k;
        f->segs[k].items[f->segs[k].n_items++] = i;
    }
    /* The directory holds exactly these files. */
    char path[1024];
    snprintf(path, sizeof(path), "%s/segments", f->root);
    DIR *d = opendir(path);
    assert_non_null(d);
    size_t files = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.')
            continue;
        int known = 0;
        for (size_t k = 0; k < f->n_segs; k++)
            known |= strcmp(de->d_name, f->segs[k].name) == 0;
        if (!known)
            fail_msg("unexpected file segments/%s", de->d_name);
        files++;
    }
    closedir(d);
    assert_int_equal(files, f->n_segs);

    for (size_t k = 0; k < f->n_segs; k++) {
        seginfo_t *sg = &f->segs[k];
        seg_path(f->root, sg, path, sizeof(path));
        size_t len;
        uint8_t *b = read_all(path, &len);
        /* Header. */
        assert_memory_equal(b, "LANESEG\0", 8);
        assert_int_equal(get32(b + 8), 3);
        assert_int_equal(get32(b + 12), sg->header_len);
        assert_int_equal(get64(b + 16), sg->id);
        assert_int_equal(get64(b + 24), 0); /* reserved */
        assert_int_equal(get32(b + 32), 0);
        assert_int_equal(get32(b + 36), strlen(MODEL));
        assert_int_equal(get64(b + 40), k); /* the model's segments, in order */
        assert_int_equal(get32(b + 60), 0);
        assert_memory_equal(b + 64, MODEL, strlen(MODEL));
        for (uint64_t pad = 64 + strlen(MODEL); pad < sg->header_len; pad++)
            assert_int_equal(b[pad], 0);
        uint8_t hdr[256];
        memcpy(hdr, b, sg->header_len);
        put32(hdr + 56, 0);
        assert_int_equal(crc32c(0, hdr, sg->header_len), get32(b + 56));
        /* Entries: back to back from the header on, in append order. */
        uint64_t off = sg->header_len;
        for (size_t j = 0; j < sg->n_items; j++) {
            const item_t *it = &f->items[sg->items[j]];
            assert_int_equal(it->ref.offset, off);
            const uint8_t *e = b + off;
            assert_true(off + it->size <= len);
            assert_int_equal(get32(e), item_state_word(it));
            assert_int_equal(get32(e + 4), it->size);
            assert_int_equal((size_t)e[8] | (size_t)e[9] << 8, it->id_len);
            assert_int_equal(e[10] | e[11], 0);
            assert_int_equal(get32(e + 12), it->tokens);
            assert_int_equal(get64(e + 16), it->arrival_ns);
            assert_int_equal(get64(e + 24), SIGNATURE);
            assert_int_equal(get32(e + 32), it->lane);
            assert_int_equal(get32(e + FMT_ENTRY_PAYLEN), it->payload_len);
            assert_int_equal(get32(e + 40), it->prefix_tokens);
            assert_int_equal(get32(e + 44), it->max_wait_ms);
            assert_int_equal(get32(e + 48), 0);
            assert_int_equal(fmt_entry_crc(sg->id, e), get32(e + FMT_ENTRY_CRC));
            assert_memory_equal(e + FMT_ENTRY_HEADER, it->id, it->id_len);
            if (it->payload_len != 0)
                assert_memory_equal(e + FMT_ENTRY_HEADER + it->id_len, it->payload,
                                    it->payload_len);
            for (uint64_t pad = FMT_ENTRY_HEADER + it->id_len + it->payload_len; pad < it->size;
                 pad++)
                assert_int_equal(e[pad], 0);
            off += it->size;
        }
        assert_int_equal(len, off);
        sg->size = off;
        free(b);
    }
    fixture_check_journal(f);
}

static int fixture_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    make_temp_dir(f->root, sizeof(f->root));
    for (size_t i = 0; i < N_ITEMS; i++)
        item_make(&f->items[i], i);

    store_disk_config_t cfg = disk_config(f->root);
    store_t *s = NULL;
    store_recovery_t rep;
    assert_int_equal(store_open_disk(&cfg, &rep, &s), STORE_OK);
    store_queue_t *q[2];
    for (uint32_t lane = 0; lane < 2; lane++) {
        store_key_t key = {MODEL, SIGNATURE, lane};
        assert_int_equal(store_queue_open(s, &key, &q[lane]), STORE_OK);
    }
    for (size_t i = 0; i < 20; i++)
        append_item(s, q[f->items[i].lane], &f->items[i]);
    assert_int_equal(store_flush(s), STORE_OK);
    complete_front(f, s, q[0], 8, pick_every_third); /* items 0,3,6 of 0..9 (lane 0) */
    complete_front(f, s, q[1], 2, pick_all);         /* items 4, 9 */
    assert_int_equal(store_flush(s), STORE_OK);
    for (size_t i = 20; i < N_ITEMS; i++)
        append_item(s, q[f->items[i].lane], &f->items[i]);
    assert_int_equal(store_flush(s), STORE_OK);
    complete_front(f, s, q[0], 10, pick_odd);
    complete_front(f, s, q[1], 2, pick_every_third);
    assert_int_equal(store_flush(s), STORE_OK);
    store_close(s);

    fixture_check_format(f);
    /* The fixture is what the tests need: several segments, both lanes in some, tombstones. */
    assert_true(f->n_segs >= 4);
    size_t mixed = 0;
    for (size_t k = 0; k < f->n_segs; k++) {
        int lanes = 0;
        for (size_t j = 0; j < f->segs[k].n_items; j++)
            lanes |= 1 << f->items[f->segs[k].items[j]].lane;
        mixed += lanes == 3;
    }
    assert_true(mixed >= 2);
    size_t tombs = 0;
    for (int i = 0; i < N_ITEMS; i++)
        tombs += (size_t)f->items[i].tomb;
    assert_true(tombs >= 6 && tombs <= 14);
    /* The journal spans several files and names entries of several segments. */
    assert_true(f->n_jnls >= 2);
    size_t named = 0;
    for (size_t k = 0; k < f->n_segs; k++) {
        int has = 0;
        for (size_t r = 0; r < f->n_jrecs; r++)
            has |= f->items[f->jrecs[r].item].seg == (int)k;
        named += (size_t)has;
    }
    assert_true(named >= 3);
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    fixture_t *f = *state;
    free(trial_views);
    trial_views = NULL;
    store_close(trial_store);
    trial_store = NULL;
    if (trial_dir[0] != '\0')
        assert_int_equal(fs_remove_tree(trial_dir), 0);
    trial_dir[0] = '\0';
    assert_int_equal(fs_remove_tree(f->root), 0);
    free(f);
    return 0;
}

/* ---- expectations ------------------------------------------------------------------------- */

/* What became of a journal record in a trial. */
enum { JREC_INTACT, JREC_DAMAGED, JREC_GONE };

typedef struct {
    int present[N_ITEMS];         /* 1: handed out exactly once; 0: never handed out */
    uint32_t deliveries[N_ITEMS]; /* what a handed-out item's view says */
    store_recovery_t rep;         /* every counter but elapsed_ns and the journal's */
    /* What the journal's counters follow from (expect_journal, at the open): */
    int listed[MAX_SEGS];       /* the segment's file is recovered (not quarantined) */
    int removed[MAX_SEGS];      /* ... and deleted at the open: nothing live in it */
    int repaired[MAX_SEGS];     /* its deleted count is repaired */
    uint64_t missing[MAX_SEGS]; /* ... downwards: tombstones the index counted, not found */
    int found[N_ITEMS];         /* the item's entry verifies */
    int jrec[MAX_JRECS];        /* JREC_* of each of f->jrecs */
    int jnl_header_damaged;     /* a journal file's header fails its checks (logged) */
    uint64_t jrec_copies;       /* intact copies of records written into blank slots by a trial */
} expect_t;

/* What a state word means, as segment_int.h writes it down: 1 and the delivery count for LIVE
 * (0) and "DLV" + n (n >= 1); 0 for TOMB; -1 for anything else (damaged: live, 0 deliveries). */
static int state_word_live(uint32_t word, uint32_t *out_deliveries)
{
    *out_deliveries = 0;
    if (word == FMT_STATE_TOMB)
        return 0;
    if (word == FMT_STATE_LIVE)
        return 1;
    if ((word & 0x00FFFFFFu) == FMT_STATE_DLV && (word >> 24) != 0) {
        *out_deliveries = word >> 24;
        return 1;
    }
    return -1;
}

static char trial[512]; /* names the trial in failure messages */

/* Every u64 counter of the report (elapsed_ns aside), by name. */
static const struct {
    const char *name;
    size_t offset;
} report_fields[] = {
    {"segments", offsetof(store_recovery_t, segments)},
    {"entries_live", offsetof(store_recovery_t, entries_live)},
    {"entries_tombstoned", offsetof(store_recovery_t, entries_tombstoned)},
    {"tokens_live", offsetof(store_recovery_t, tokens_live)},
    {"torn_tails", offsetof(store_recovery_t, torn_tails)},
    {"torn_bytes", offsetof(store_recovery_t, torn_bytes)},
    {"corrupt_regions", offsetof(store_recovery_t, corrupt_regions)},
    {"corrupt_bytes", offsetof(store_recovery_t, corrupt_bytes)},
    {"damaged_state_words", offsetof(store_recovery_t, damaged_state_words)},
    {"deleted_count_repairs", offsetof(store_recovery_t, deleted_count_repairs)},
    {"missing_files", offsetof(store_recovery_t, missing_files)},
    {"missing_live_entries", offsetof(store_recovery_t, missing_live_entries)},
    {"adopted_files", offsetof(store_recovery_t, adopted_files)},
    {"quarantined_files", offsetof(store_recovery_t, quarantined_files)},
    {"removed_segments", offsetof(store_recovery_t, removed_segments)},
    {"journal_files", offsetof(store_recovery_t, journal_files)},
    {"journal_records", offsetof(store_recovery_t, journal_records)},
    {"journal_damaged_records", offsetof(store_recovery_t, journal_damaged_records)},
    {"journal_stale_records", offsetof(store_recovery_t, journal_stale_records)},
    {"journal_unmatched_records", offsetof(store_recovery_t, journal_unmatched_records)},
    {"journal_retired_files", offsetof(store_recovery_t, journal_retired_files)},
    {"tombstones_missing", offsetof(store_recovery_t, tombstones_missing)},
};

static void assert_report(const store_recovery_t *got, const store_recovery_t *want)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof(report_fields) / sizeof(report_fields[0]); i++) {
        uint64_t g, w;
        memcpy(&g, (const char *)got + report_fields[i].offset, sizeof(g));
        memcpy(&w, (const char *)want + report_fields[i].offset, sizeof(w));
        if (g != w) {
            print_error("%s: report.%s = %" PRIu64 ", want %" PRIu64 "\n", trial,
                        report_fields[i].name, g, w);
            bad = 1;
        }
    }
    if (got->index_rebuilt != want->index_rebuilt) {
        print_error("%s: report.index_rebuilt = %d, want %d\n", trial, got->index_rebuilt,
                    want->index_rebuilt);
        bad = 1;
    }
    if (bad)
        fail_msg("%s: recovery report differs from the damage done", trial);
}

/* The counters of a store whose segments are intact and whose journal records are as jrec says
 * (NULL: all intact): an item's state is the highest of its intact records. */
static void expect_clean_journal(const fixture_t *f, const int *jrec, expect_t *x)
{
    memset(x, 0, sizeof(*x));
    if (jrec != NULL)
        memcpy(x->jrec, jrec, sizeof(x->jrec));
    int damaged[MAX_JRECS];
    for (size_t r = 0; r < MAX_JRECS; r++)
        damaged[r] = x->jrec[r] != JREC_INTACT;
    for (size_t k = 0; k < f->n_segs; k++) {
        const seginfo_t *sg = &f->segs[k];
        uint64_t tombs_index = 0, tombs = 0, live = 0;
        x->listed[k] = 1;
        for (size_t j = 0; j < sg->n_items; j++) {
            int i = sg->items[j];
            int rank = item_jrank(f, i, damaged);
            x->found[i] = 1;
            x->present[i] = rank != FMT_RANK_TOMB;
            x->deliveries[i] = x->present[i] ? (uint32_t)rank : 0;
            tombs_index += (uint64_t)f->items[i].tomb;
            if (x->present[i]) {
                live++;
                x->rep.entries_live++;
                x->rep.tokens_live += f->items[i].tokens;
            } else {
                tombs++;
                x->rep.entries_tombstoned++;
            }
        }
        x->repaired[k] = tombs != tombs_index;
        x->rep.deleted_count_repairs += (uint64_t)x->repaired[k];
        x->missing[k] = tombs_index > tombs ? tombs_index - tombs : 0;
        x->rep.tombstones_missing += x->missing[k];
        x->rep.segments++;
        if (live == 0) {
            x->removed[k] = 1;
            x->rep.segments--;
            x->rep.removed_segments++;
        }
    }
}

/* The counters of an undamaged store: what every expectation starts from. */
static void expect_clean(const fixture_t *f, expect_t *x)
{
    expect_clean_journal(f, NULL, x);
}

/* The journal's counters at an open, from what x says of the segments, entries and records:
 * every record read is applied (its entry verifies), unmatched (its segment is there, its entry
 * not), stale (its segment is not there) or damaged; the files older than every remaining
 * segment's oldest record are retired. */
static void expect_journal(const fixture_t *f, expect_t *x)
{
    x->rep.journal_files = f->n_jnls;
    x->rep.journal_records = x->jrec_copies;
    uint64_t jnl_min[MAX_SEGS];
    for (size_t k = 0; k < MAX_SEGS; k++)
        jnl_min[k] = UINT64_MAX;
    for (size_t r = 0; r < f->n_jrecs; r++) {
        const jrecinfo_t *jr = &f->jrecs[r];
        size_t k = (size_t)f->items[jr->item].seg;
        if (x->jrec[r] == JREC_GONE)
            continue;
        if (x->jrec[r] == JREC_DAMAGED) {
            x->rep.journal_damaged_records++;
        } else if (!x->listed[k]) {
            x->rep.journal_stale_records++;
        } else {
            if (x->found[jr->item])
                x->rep.journal_records++;
            else
                x->rep.journal_unmatched_records++;
            if (f->jnls[jr->jnl].id < jnl_min[k])
                jnl_min[k] = f->jnls[jr->jnl].id;
        }
    }
    uint64_t oldest = UINT64_MAX;
    for (size_t k = 0; k < f->n_segs; k++) {
        if (x->listed[k] && !x->removed[k] && jnl_min[k] < oldest)
            oldest = jnl_min[k];
    }
    for (size_t j = 0; j < f->n_jnls; j++)
        x->rep.journal_retired_files += f->jnls[j].id < oldest;
}

/*
 * Per-entry fate in one segment, and the counters that follow from it:
 *   KEEP     intact; what its state word (words[j], or the item's own when words is NULL)
 *            says: live with its delivery count, tombstoned, or damaged (live, 0 deliveries:
 *            a redelivery, never tombstoned)
 *   DROP     damaged below the durable boundary: skipped, its bytes counted
 */
enum { FATE_KEEP, FATE_DROP };

/* Re-derives x's counters for segment k given each entry's fate (x starts from expect_clean). */
static void expect_segment(const fixture_t *f, size_t k, const int *fate, const uint32_t *words,
                           expect_t *x)
{
    const seginfo_t *sg = &f->segs[k];
    uint64_t tombs_before = 0, tombs_after = 0, live_after = 0;
    int in_run = 0;
    int damaged[MAX_JRECS];
    for (size_t r = 0; r < MAX_JRECS; r++)
        damaged[r] = x->jrec[r] != JREC_INTACT;
    /* Undo what expect_clean counted for this segment. */
    x->rep.deleted_count_repairs -= (uint64_t)x->repaired[k];
    x->rep.tombstones_missing -= x->missing[k];
    x->missing[k] = 0;
    if (x->removed[k]) {
        x->rep.segments++;
        x->rep.removed_segments--;
    }
    x->repaired[k] = x->removed[k] = 0;
    for (size_t j = 0; j < sg->n_items; j++) {
        int i = sg->items[j];
        const item_t *it = &f->items[i];
        tombs_before += (uint64_t)it->tomb;
        /* Undo the clean counts of this entry. */
        if (!x->present[i]) {
            x->rep.entries_tombstoned--;
        } else {
            x->rep.entries_live--;
            x->rep.tokens_live -= it->tokens;
        }
        x->present[i] = 0;
        x->found[i] = fate[j] != FATE_DROP;
        if (fate[j] == FATE_DROP) {
            if (!in_run)
                x->rep.corrupt_regions++;
            in_run = 1;
            x->rep.corrupt_bytes += it->size;
            continue;
        }
        in_run = 0;
        uint32_t deliveries;
        int live = state_word_live(words != NULL ? words[j] : item_state_word(it), &deliveries);
        if (live < 0)
            x->rep.damaged_state_words++;
        /* The journal's records outrank what the word says (states only move up). */
        int jrank = item_jrank(f, i, damaged);
        if (jrank == FMT_RANK_TOMB)
            live = 0;
        else if (live != 0 && (uint32_t)jrank > deliveries)
            deliveries = (uint32_t)jrank;
        x->deliveries[i] = live != 0 ? deliveries : 0;
        if (live == 0) {
            tombs_after++;
            x->rep.entries_tombstoned++;
        } else {
            live_after++;
            x->present[i] = 1;
            x->rep.entries_live++;
            x->rep.tokens_live += it->tokens;
        }
    }
    if (tombs_after != tombs_before) {
        x->repaired[k] = 1;
        x->rep.deleted_count_repairs++;
    }
    if (tombs_after < tombs_before) {
        x->missing[k] = tombs_before - tombs_after;
        x->rep.tombstones_missing += x->missing[k];
    }
    if (live_after == 0) {
        /* Nothing live left: the segment is deleted at open. */
        x->removed[k] = 1;
        x->rep.segments--;
        x->rep.removed_segments++;
    }
}

/* Segment k's header is unreadable: the file is quarantined, its index row has no file. */
static void expect_quarantine(const fixture_t *f, size_t k, expect_t *x)
{
    const seginfo_t *sg = &f->segs[k];
    x->rep.deleted_count_repairs -= (uint64_t)x->repaired[k];
    x->rep.tombstones_missing -= x->missing[k];
    x->missing[k] = 0;
    if (x->removed[k])
        x->rep.removed_segments--;
    else
        x->rep.segments--;
    x->repaired[k] = x->removed[k] = 0;
    x->listed[k] = 0;
    x->rep.quarantined_files++;
    x->rep.missing_files++;
    for (size_t j = 0; j < sg->n_items; j++) {
        int i = sg->items[j];
        const item_t *it = &f->items[i];
        x->found[i] = 0;
        if (!x->present[i]) {
            x->rep.entries_tombstoned--;
        } else {
            x->rep.entries_live--;
            x->rep.tokens_live -= it->tokens;
        }
        x->present[i] = 0;
        /* What the index row claimed: its deleted count is the tombstones flushed. */
        x->rep.missing_live_entries += (uint64_t)!it->tomb;
    }
}

/* ---- opening and checking ------------------------------------------------------------------ */

/* The files dir/quarantine holds (0 when there is none). */
static unsigned quarantine_files(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/quarantine", dir);
    DIR *d = opendir(path);
    if (d == NULL)
        return 0;
    unsigned n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/*
 * Opens dir, checks the report and every item handed out against x, closes. Returns nothing:
 * every mismatch fails the test with the trial's name.
 */
static void open_and_check(const fixture_t *f, const char *dir, const expect_t *want)
{
    expect_t full = *want;
    expect_journal(f, &full);
    const expect_t *x = &full;
    store_disk_config_t cfg = disk_config(dir);
    store_recovery_t rep;
    memset(&rep, 0xA5, sizeof(rep));
    store_t *s = NULL;
    unsigned warn0 = log_count[STORE_LOG_WARN], err0 = log_count[STORE_LOG_ERROR];
    store_status_t st = store_open_disk(&cfg, &rep, &s);
    if (st != STORE_OK)
        fail_msg("%s: store_open_disk = %s", trial, store_status_str(st));
    trial_store = s;
    assert_report(&rep, &x->rep);
    /* Every dropped byte is logged; a clean open logs no warning or error (a file an earlier
     * open set aside in quarantine/ is said again at every open). */
    int damaged = quarantine_files(dir) > x->rep.quarantined_files || x->rep.corrupt_regions ||
                  x->rep.torn_tails || x->rep.quarantined_files || x->rep.damaged_state_words ||
                  x->rep.missing_files || x->rep.journal_damaged_records ||
                  x->rep.journal_unmatched_records || x->rep.tombstones_missing ||
                  x->jnl_header_damaged;
    unsigned warned = log_count[STORE_LOG_WARN] - warn0 + log_count[STORE_LOG_ERROR] - err0;
    if (damaged && warned == 0)
        fail_msg("%s: damage found but nothing logged at warning or error level", trial);
    if (!damaged && warned != 0)
        fail_msg("%s: clean open logged %u warnings/errors", trial, warned);

    int seen[N_ITEMS] = {0};
    store_queue_t *q = NULL;
    store_key_t key;
    while (store_queue_next(s, q, &q, &key, NULL)) {
        uint64_t n = 0, tokens = 0, sum_tokens = 0;
        store_queue_count(q, &n, &tokens);
        store_view_t *views = calloc(n + 1, sizeof(*views));
        assert_non_null(views);
        trial_views = views;
        size_t got = 0;
        assert_int_equal(store_peek(s, q, views, n + 1, &got), STORE_OK);
        assert_int_equal(got, n);
        for (size_t v = 0; v < got; v++) {
            const store_view_t *w = &views[v];
            int i = item_by_id(f, w->id_view, w->id_len);
            if (i < 0)
                fail_msg("%s: handed out an item with an unknown id (%zu bytes)", trial, w->id_len);
            const item_t *it = &f->items[i];
            if (seen[i]++)
                fail_msg("%s: item %d handed out twice", trial, i);
            if (!x->present[i])
                fail_msg("%s: item %d handed out, expected gone", trial, i);
            if (strcmp(key.model, MODEL) != 0 || key.signature != SIGNATURE ||
                key.lane != it->lane || w->signature != SIGNATURE)
                fail_msg("%s: item %d in the wrong lane queue", trial, i);
            if (w->ref.queue != it->ref.queue || w->ref.offset != it->ref.offset)
                fail_msg("%s: item %d ref (%" PRIu64 ", %" PRIu64 "), appended at (%" PRIu64
                         ", %" PRIu64 ")",
                         trial, i, w->ref.queue, w->ref.offset, it->ref.queue, it->ref.offset);
            if (w->payload_len != it->payload_len || w->tokens != it->tokens ||
                w->arrival_ns != it->arrival_ns || w->deliveries != x->deliveries[i] ||
                w->prefix_tokens != it->prefix_tokens || w->max_wait_ms != it->max_wait_ms ||
                (it->payload_len != 0 &&
                 memcmp(w->payload_view, it->payload, it->payload_len) != 0))
                fail_msg("%s: item %d handed out with damaged bytes", trial, i);
            sum_tokens += w->tokens;
            /* Arrival order within the lane. */
            if (v > 0 && (views[v - 1].ref.queue > w->ref.queue ||
                          (views[v - 1].ref.queue == w->ref.queue &&
                           views[v - 1].ref.offset >= w->ref.offset)))
                fail_msg("%s: lane %u out of arrival order at item %d", trial, key.lane, i);
        }
        assert_int_equal(sum_tokens, tokens);
        free(views);
        trial_views = NULL;
    }
    for (int i = 0; i < N_ITEMS; i++) {
        if (x->present[i] && !seen[i])
            fail_msg("%s: item %d (intact, %s) not handed out", trial, i,
                     f->items[i].tomb ? "tombstoned" : "live");
    }
    assert_int_equal(store_pending_count(s), 0);
    store_close(s);
    trial_store = NULL;
}

/* A fresh copy of the pristine directory for one trial. */
static void trial_copy(const fixture_t *f, char *dir, size_t cap)
{
    make_temp_dir(dir, cap);
    assert_int_equal(rmdir(dir), 0);
    snprintf(trial_dir, sizeof(trial_dir), "%s", dir);
    assert_int_equal(fs_copy_tree(f->root, dir), 0);
}

static void trial_done(char *dir)
{
    assert_int_equal(fs_remove_tree(dir), 0);
    trial_dir[0] = '\0';
}

/* ---- the tests ----------------------------------------------------------------------------- */

static void test_pristine_store_recovers_everything(void **state)
{
    fixture_t *f = *state;
    char dir[512];
    trial_copy(f, dir, sizeof(dir));
    snprintf(trial, sizeof(trial), "pristine");
    expect_t x;
    expect_clean(f, &x);
    open_and_check(f, dir, &x);
    /* Recovery changed no file. */
    for (size_t k = 0; k < f->n_segs; k++) {
        char path[1024];
        seg_path(dir, &f->segs[k], path, sizeof(path));
        assert_int_equal(file_size(path), f->segs[k].size);
    }
    open_and_check(f, dir, &x);
    trial_done(dir);
}

/* Expectation for segment k cut to `cut` bytes (the durable boundary recorded is its size). */
static void expect_cut(const fixture_t *f, size_t k, uint64_t cut, expect_t *x)
{
    const seginfo_t *sg = &f->segs[k];
    expect_clean(f, x);
    if (cut < sg->header_len) {
        expect_quarantine(f, k, x);
        return;
    }
    /* The entries past the cut are gone: they sit at the end, back to back, so they make one
     * damaged stretch, from the end of the last intact entry to the durable boundary, counted
     * once whatever entry the cut fell in. */
    int fate[N_ITEMS];
    uint64_t intact_end = sg->header_len;
    for (size_t j = 0; j < sg->n_items; j++) {
        const item_t *it = &f->items[sg->items[j]];
        int whole = it->ref.offset + it->size <= cut;
        fate[j] = whole ? FATE_KEEP : FATE_DROP;
        if (whole)
            intact_end = it->ref.offset + it->size;
    }
    expect_segment(f, k, fate, NULL, x);
    assert_int_equal(x->rep.corrupt_regions, cut < sg->size ? 1 : 0);
    assert_int_equal(x->rep.corrupt_bytes, sg->size - intact_end);
}

static void cut_trial(const fixture_t *f, size_t k, uint64_t cut, int boundary)
{
    const seginfo_t *sg = &f->segs[k];
    char dir[512], path[1024], qpath[1024];
    trial_copy(f, dir, sizeof(dir));
    seg_path(dir, sg, path, sizeof(path));
    snprintf(qpath, sizeof(qpath), "%s/quarantine/%s", dir, sg->name);
    assert_int_equal(truncate(path, (off_t)cut), 0);
    snprintf(trial, sizeof(trial), "segment %s (%" PRIu64 " bytes) cut at %" PRIu64 "%s", sg->name,
             sg->size, cut, boundary ? " (entry boundary)" : "");
    expect_t x;
    expect_cut(f, k, cut, &x);
    log_unread = 0;
    open_and_check(f, dir, &x);
    /* The entries the cut took are said as items where the file is kept. */
    unsigned long long dropped = 0;
    for (size_t j = 0; j < sg->n_items; j++)
        dropped += f->items[sg->items[j]].ref.offset + f->items[sg->items[j]].size > cut;
    if (cut >= sg->header_len && !x.rep.removed_segments)
        assert_int_equal(log_unread, dropped);
    /* What became of the file. */
    if (cut < sg->header_len) {
        assert_int_equal(file_size(path), -1);
        assert_int_equal(file_size(qpath), (long long)cut);
    } else if (x.rep.removed_segments) {
        assert_int_equal(file_size(path), -1);
        assert_int_equal(file_size(qpath), -1);
    } else {
        /* Nothing below the (old) durable boundary is ever cut. */
        assert_int_equal(file_size(path), (long long)cut);
        assert_int_equal(file_size(qpath), -1);
    }
    /*
     * Recovery recorded what it found (the new boundary, the deleted counts, the quarantine):
     * a second open hands out the same items and drops nothing new. The one thing it reports
     * again is the partial entry a cut inside an entry left below the new boundary: damage
     * below the boundary is skipped, never cut, at every open.
     */
    expect_t again = x;
    again.rep = (store_recovery_t){0};
    again.rep.segments = x.rep.segments;
    again.rep.entries_live = x.rep.entries_live;
    again.rep.tokens_live = x.rep.tokens_live;
    again.rep.entries_tombstoned = x.rep.entries_tombstoned;
    /* A segment deleted at the first open is not there at the second: its records are stale. */
    for (size_t j = 0; j < f->n_segs; j++) {
        again.listed[j] = x.listed[j] && !x.removed[j];
        again.removed[j] = 0;
    }
    if (cut >= sg->header_len) {
        uint64_t intact_end = sg->header_len;
        for (size_t j = 0; j < sg->n_items; j++) {
            const item_t *it = &f->items[sg->items[j]];
            if (it->ref.offset + it->size > cut)
                continue;
            intact_end = it->ref.offset + it->size;
            /* A deleted segment's tombstones went with it. */
            if (it->tomb && x.rep.removed_segments)
                again.rep.entries_tombstoned--;
        }
        if (!x.rep.removed_segments && cut > intact_end) {
            again.rep.corrupt_regions = 1;
            again.rep.corrupt_bytes = cut - intact_end;
        }
    }
    snprintf(trial + strlen(trial), sizeof(trial) - strlen(trial), ", second open");
    open_and_check(f, dir, &again);
    trial_done(dir);
}

static void test_truncate_at_every_entry_boundary(void **state)
{
    fixture_t *f = *state;
    size_t trials = 0;
    for (size_t k = 0; k < f->n_segs; k++) {
        const seginfo_t *sg = &f->segs[k];
        cut_trial(f, k, sg->header_len, 1);
        for (size_t j = 0; j < sg->n_items; j++) {
            const item_t *it = &f->items[sg->items[j]];
            cut_trial(f, k, it->ref.offset + it->size, 1);
            trials++;
        }
    }
    assert_true(trials == N_ITEMS);
}

static void test_truncate_at_random_offsets(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed();
    print_message("seed 0x%" PRIx64 "\n", rng_state);
    size_t in_header = 0, mid_entry = 0;
    for (int t = 0; t < 96; t++) {
        size_t k = (size_t)rng_below(f->n_segs);
        const seginfo_t *sg = &f->segs[k];
        /* One in eight inside the header, the rest inside the entries. */
        uint64_t cut = t % 8 == 0 ? rng_below(sg->header_len)
                                  : sg->header_len + rng_below(sg->size - sg->header_len);
        int boundary = cut == sg->header_len;
        for (size_t j = 0; j < sg->n_items; j++)
            boundary |= cut == f->items[sg->items[j]].ref.offset + f->items[sg->items[j]].size;
        in_header += cut < sg->header_len;
        mid_entry += !boundary && cut >= sg->header_len;
        cut_trial(f, k, cut, boundary);
    }
    assert_true(in_header >= 12);
    assert_true(mid_entry >= 40);
}

/* Damage at positions pos[0..n) (distinct, each XORed with mask[p]) of segment k; derives the
 * whole expectation. */
static void expect_flips(const fixture_t *f, size_t k, const uint64_t *pos, const uint8_t *mask,
                         size_t n, expect_t *x)
{
    const seginfo_t *sg = &f->segs[k];
    for (size_t p = 0; p < n; p++) {
        if (pos[p] < sg->header_len) {
            expect_quarantine(f, k, x);
            return;
        }
    }
    int fate[N_ITEMS];
    uint32_t words[N_ITEMS];
    for (size_t j = 0; j < sg->n_items; j++) {
        const item_t *it = &f->items[sg->items[j]];
        uint64_t off = it->ref.offset;
        uint64_t checked_end = off + FMT_ENTRY_HEADER + it->id_len + it->payload_len;
        fate[j] = FATE_KEEP;
        words[j] = item_state_word(it);
        for (size_t p = 0; p < n; p++) {
            if (pos[p] >= off + 4 && pos[p] < checked_end)
                fate[j] = FATE_DROP; /* covered by the CRC or the length checks */
            /* The state word is outside the CRC: what it reads as after the flips decides. */
            if (pos[p] >= off && pos[p] < off + 4)
                words[j] ^= (uint32_t)mask[p] << (8 * (pos[p] - off));
        }
        /* A byte of padding (checked_end .. off + size) is covered by nothing: no effect. */
    }
    expect_segment(f, k, fate, words, x);
}

/* Flips the bytes at pos[] of segments segk[] (XOR with a nonzero value), reopens, checks. */
static void flip_trial(const fixture_t *f, const size_t *segk, const uint64_t *pos, size_t n)
{
    char dir[512], path[1024];
    trial_copy(f, dir, sizeof(dir));
    int n_trial = snprintf(trial, sizeof(trial), "flips");
    uint8_t masks[64];
    assert_true(n <= 64);
    for (size_t p = 0; p < n; p++) {
        seg_path(dir, &f->segs[segk[p]], path, sizeof(path));
        int fd = open(path, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        uint8_t b;
        assert_int_equal(pread(fd, &b, 1, (off_t)pos[p]), 1);
        uint8_t mask = (uint8_t)(1 + rng_below(255));
        masks[p] = mask;
        b ^= mask;
        assert_int_equal(pwrite(fd, &b, 1, (off_t)pos[p]), 1);
        close(fd);
        if (n_trial < (int)sizeof(trial) - 64)
            n_trial += snprintf(trial + n_trial, sizeof(trial) - (size_t)n_trial,
                                " %s@%" PRIu64 "^%02x", f->segs[segk[p]].name, pos[p], mask);
    }
    expect_t x;
    expect_clean(f, &x);
    for (size_t k = 0; k < f->n_segs; k++) {
        uint64_t mine[64];
        uint8_t mine_masks[64];
        size_t m = 0;
        for (size_t p = 0; p < n; p++) {
            if (segk[p] == k) {
                mine_masks[m] = masks[p];
                mine[m++] = pos[p];
            }
        }
        if (m != 0)
            expect_flips(f, k, mine, mine_masks, m, &x);
    }
    open_and_check(f, dir, &x);
    /* Files below the durable boundary are never cut; a damaged header moves the file aside. */
    for (size_t k = 0; k < f->n_segs; k++) {
        const seginfo_t *sg = &f->segs[k];
        char qpath[1024];
        seg_path(dir, sg, path, sizeof(path));
        snprintf(qpath, sizeof(qpath), "%s/quarantine/%s", dir, sg->name);
        int header_hit = 0, live = 0;
        for (size_t p = 0; p < n; p++)
            header_hit |= segk[p] == k && pos[p] < sg->header_len;
        for (size_t j = 0; j < sg->n_items; j++)
            live |= x.present[sg->items[j]];
        if (header_hit) {
            assert_int_equal(file_size(path), -1);
            assert_int_equal(file_size(qpath), (long long)sg->size);
        } else {
            assert_int_equal(file_size(path), live ? (long long)sg->size : -1);
            assert_int_equal(file_size(qpath), -1);
        }
    }
    trial_done(dir);
}

static void test_flip_one_byte_anywhere(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0xF11Bull;
    print_message("seed 0x%" PRIx64 "\n", rng_state);
    size_t header = 0, state_word = 0, body = 0;
    for (int t = 0; t < 320; t++) {
        size_t k = (size_t)rng_below(f->n_segs);
        const seginfo_t *sg = &f->segs[k];
        /* Uniform over the file, except that every 16th flip hits the header and every 8th a
         * state word, so both are covered whatever the seed. */
        uint64_t pos = rng_below(sg->size);
        if (t % 16 == 0)
            pos = rng_below(sg->header_len);
        else if (t % 8 == 4)
            pos = f->items[sg->items[rng_below(sg->n_items)]].ref.offset + rng_below(4);
        header += pos < sg->header_len;
        for (size_t j = 0; j < sg->n_items; j++) {
            uint64_t off = f->items[sg->items[j]].ref.offset;
            state_word += pos >= off && pos < off + 4;
            body += pos >= off + 4 && pos < off + f->items[sg->items[j]].size;
        }
        flip_trial(f, &k, &pos, 1);
    }
    assert_true(header >= 20 && state_word >= 40 && body >= 150);
}

/* The exact cases named by the contract, one at a time. */
static void test_flip_exact_cases(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0xE8AC7ull;
    int tomb_state_done = 0;
    for (int i = 0; i < N_ITEMS; i++) {
        const item_t *it = &f->items[i];
        size_t k = (size_t)it->seg;
        /* One payload byte (or the CRC when there is no payload) in entry i: that entry alone
         * is lost, one region of exactly its size. */
        uint64_t pos = it->payload_len
                           ? it->ref.offset + FMT_ENTRY_HEADER + it->id_len + it->payload_len / 2
                           : it->ref.offset + FMT_ENTRY_CRC;
        flip_trial(f, &k, &pos, 1);
        expect_t x;
        expect_clean(f, &x);
        int fate[N_ITEMS] = {0};
        for (size_t j = 0; j < f->segs[k].n_items; j++)
            fate[j] = f->segs[k].items[j] == i ? FATE_DROP : FATE_KEEP;
        expect_segment(f, k, fate, NULL, &x);
        assert_int_equal(x.rep.corrupt_regions, 1);
        assert_int_equal(x.rep.corrupt_bytes, it->size);
        /* The length field, and the id. */
        pos = it->ref.offset + 5;
        flip_trial(f, &k, &pos, 1);
        pos = it->ref.offset + FMT_ENTRY_HEADER;
        flip_trial(f, &k, &pos, 1);
        /* The routing keys: a flipped signature or lane byte loses the entry (CRC), never puts
         * it in another shape's or lane's queue (open_and_check). */
        pos = it->ref.offset + 24 + (uint64_t)(i % 8);
        flip_trial(f, &k, &pos, 1);
        pos = it->ref.offset + 32;
        flip_trial(f, &k, &pos, 1);
        /* The state word: damaged, it reads as live, and the journal's records still decide
         * (a tombstoned entry stays completed, a committed one keeps its count); a word whose
         * count byte is hit reads as that count unless the journal says more. */
        pos = it->ref.offset + (uint64_t)(i % 4);
        flip_trial(f, &k, &pos, 1);
        tomb_state_done += it->tomb;
    }
    assert_true(tomb_state_done >= 6);
}

static void test_flip_many_bytes(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0x3A7Full;
    print_message("seed 0x%" PRIx64 "\n", rng_state);
    for (int t = 0; t < 160; t++) {
        size_t n = 2 + (size_t)rng_below(7);
        size_t segk[16];
        uint64_t pos[16];
        /* Mostly inside one segment (adjacent damaged entries merge into one region), sometimes
         * spread over all of them. */
        size_t home = (size_t)rng_below(f->n_segs);
        for (size_t p = 0; p < n; p++) {
            segk[p] = t % 3 == 0 ? (size_t)rng_below(f->n_segs) : home;
            const seginfo_t *sg = &f->segs[segk[p]];
            int dup;
            do {
                /* Header hits are rare on purpose: they hide the rest of the file. */
                pos[p] = rng_below(8) == 0 ? rng_below(sg->size)
                                           : sg->header_len + rng_below(sg->size - sg->header_len);
                dup = 0;
                for (size_t o = 0; o < p; o++)
                    dup |= segk[o] == segk[p] && pos[o] == pos[p];
            } while (dup);
        }
        flip_trial(f, segk, pos, n);
    }
}

/* Appends `len` garbage bytes (random, or a well-formed entry) past the end of segment k. */
static void append_bytes(const char *path, const uint8_t *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

static void test_garbage_past_the_end_is_cut(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0x6A4Bull;
    for (int t = 0; t < 40; t++) {
        char dir[512], path[1024];
        trial_copy(f, dir, sizeof(dir));
        expect_t x;
        expect_clean(f, &x);
        /* One segment, or (every fourth trial) every segment. */
        size_t only = (size_t)rng_below(f->n_segs);
        uint64_t lens[MAX_SEGS] = {0};
        snprintf(trial, sizeof(trial), "garbage trial %d:", t);
        for (size_t k = 0; k < f->n_segs; k++) {
            if (t % 4 != 3 && k != only)
                continue;
            uint8_t junk[600];
            lens[k] = 1 + rng_below(sizeof(junk));
            for (size_t b = 0; b < lens[k]; b++)
                junk[b] = (uint8_t)rng_splitmix64(&rng_state);
            /* Sometimes a plausible torn entry: a LIVE state word and a length. */
            if (lens[k] >= 8 && t % 2 == 0) {
                put32(junk, FMT_STATE_LIVE);
                put32(junk + 4, (uint32_t)fmt_align(lens[k] + 40));
            }
            seg_path(dir, &f->segs[k], path, sizeof(path));
            append_bytes(path, junk, lens[k]);
            x.rep.torn_tails++;
            x.rep.torn_bytes += lens[k];
            snprintf(trial + strlen(trial), sizeof(trial) - strlen(trial), " %s+%" PRIu64,
                     f->segs[k].name, lens[k]);
        }
        open_and_check(f, dir, &x);
        for (size_t k = 0; k < f->n_segs; k++) {
            seg_path(dir, &f->segs[k], path, sizeof(path));
            assert_int_equal(file_size(path), (long long)f->segs[k].size);
        }
        /* Cut for good: the next open is clean. */
        expect_clean(f, &x);
        snprintf(trial + strlen(trial), sizeof(trial) - strlen(trial), ", second open");
        open_and_check(f, dir, &x);
        trial_done(dir);
    }
}

/*
 * A complete, well-formed entry past the durable boundary (appended, never flushed: never
 * acknowledged) is cut like any torn tail and never handed out, CRC and all.
 */
static void test_valid_entry_past_the_boundary_is_cut(void **state)
{
    fixture_t *f = *state;
    for (size_t k = 0; k < f->n_segs; k++) {
        const seginfo_t *sg = &f->segs[k];
        char dir[512], path[1024];
        trial_copy(f, dir, sizeof(dir));
        seg_path(dir, sg, path, sizeof(path));
        /* Entry for a copy of item 1 under a new id the test does not know. */
        uint8_t e[256] = {0};
        const char *id = "never-acked";
        size_t id_len = strlen(id), pay = 21;
        uint64_t size = fmt_entry_size(id_len, pay);
        put32(e, FMT_STATE_LIVE);
        put32(e + 4, (uint32_t)size);
        e[8] = (uint8_t)id_len;
        put32(e + 12, 9);
        put64(e + 16, 42);
        put64(e + 24, SIGNATURE);
        put32(e + FMT_ENTRY_PAYLEN, (uint32_t)pay);
        memcpy(e + FMT_ENTRY_HEADER, id, id_len);
        memset(e + FMT_ENTRY_HEADER + id_len, 0x77, pay);
        put32(e + FMT_ENTRY_CRC, fmt_entry_crc(sg->id, e));
        append_bytes(path, e, size);
        snprintf(trial, sizeof(trial), "valid entry of %" PRIu64 " bytes past the end of %s", size,
                 sg->name);
        expect_t x;
        expect_clean(f, &x);
        x.rep.torn_tails = 1;
        x.rep.torn_bytes = size;
        open_and_check(f, dir, &x); /* fails on the unknown id if it is handed out */
        assert_int_equal(file_size(path), (long long)sg->size);
        trial_done(dir);
    }
}

/*
 * A crash between creating a segment file and writing its header (before the index ever heard
 * of it) leaves a file with a short header: it is quarantined, and its segment id, which the
 * format promises is never reused, is not handed to the next segment (a reuse would also let a
 * second quarantine of that name replace the first one).
 */
static void test_torn_create_is_quarantined_and_its_id_not_reused(void **state)
{
    fixture_t *f = *state;
    uint64_t max_id = 0;
    for (size_t k = 0; k < f->n_segs; k++)
        max_id = f->segs[k].id > max_id ? f->segs[k].id : max_id;
    for (uint64_t torn = 0; torn < 64; torn += 20) {
        char dir[512], path[1024], src[1024], name[32], qpath[1024];
        trial_copy(f, dir, sizeof(dir));
        snprintf(name, sizeof(name), "%016" PRIx64 ".seg", max_id + 1);
        snprintf(path, sizeof(path), "%s/segments/%s", dir, name);
        snprintf(qpath, sizeof(qpath), "%s/quarantine/%s", dir, name);
        /* The first `torn` bytes of a real header, as a partial write leaves them. */
        seg_path(dir, &f->segs[0], src, sizeof(src));
        size_t len;
        uint8_t *hdr = read_all(src, &len);
        write_all(path, hdr, (size_t)torn);
        free(hdr);
        snprintf(trial, sizeof(trial), "torn create of %s with %" PRIu64 " header bytes", name,
                 torn);
        expect_t x;
        expect_clean(f, &x);
        x.rep.quarantined_files = 1;
        open_and_check(f, dir, &x);
        assert_int_equal(file_size(path), -1);
        assert_int_equal(file_size(qpath), (long long)torn);

        /* A new lane needs a new segment: it must get a fresh id. */
        store_disk_config_t cfg = disk_config(dir);
        store_t *s = NULL;
        assert_int_equal(store_open_disk(&cfg, NULL, &s), STORE_OK);
        trial_store = s;
        store_key_t key = {MODEL, SIGNATURE, 7};
        store_queue_t *q = NULL;
        assert_int_equal(store_queue_open(s, &key, &q), STORE_OK);
        uint8_t idb[2] = {'z', 'z'};
        store_item_t in = {.id = idb, .id_len = 2, .tokens = 3, .arrival_ns = 1};
        store_ref_t ref;
        assert_int_equal(store_append(s, q, &in, &ref), STORE_OK);
        assert_int_equal(store_flush(s), STORE_OK);
        store_close(s);
        trial_store = NULL;
        if (ref.queue <= max_id + 1)
            fail_msg("%s: new segment got id %" PRIu64 ", reusing the quarantined file's id "
                     "%" PRIu64,
                     trial, ref.queue, max_id + 1);
        /* The quarantined file is untouched. */
        assert_int_equal(file_size(qpath), (long long)torn);
        trial_done(dir);
    }
}

/* ---- the journal ---------------------------------------------------------------------------- */

static void jnl_path(const char *dir, const jnlinfo_t *j, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/journal/%s", dir, j->name);
}

/* Opens a copy whose journal was damaged as `jrec` (and the header flag) says, checks what
 * recovery hands out and reports, and that recovery changed no journal file (it never writes one;
 * files it retires are deleted by a later flush). */
static void journal_trial(const fixture_t *f, const char *dir, const int *jrec, int header_damaged)
{
    expect_t x;
    expect_clean_journal(f, jrec, &x);
    x.jnl_header_damaged = header_damaged;
    long long sizes[MAX_JNLS];
    char path[1024];
    for (size_t j = 0; j < f->n_jnls; j++) {
        jnl_path(dir, &f->jnls[j], path, sizeof(path));
        sizes[j] = file_size(path);
    }
    open_and_check(f, dir, &x);
    for (size_t j = 0; j < f->n_jnls; j++) {
        jnl_path(dir, &f->jnls[j], path, sizeof(path));
        assert_int_equal(file_size(path), sizes[j]);
    }
    /* Stable: the second open finds the same items (what the first found is what counts). */
    expect_t again = x;
    snprintf(trial + strlen(trial), sizeof(trial) - strlen(trial), ", second open");
    again.rep.deleted_count_repairs = 0;
    again.rep.tombstones_missing = 0; /* the first open recorded the counts it found */
    for (size_t k = 0; k < f->n_segs; k++) {
        again.listed[k] = x.listed[k] && !x.removed[k];
        if (x.removed[k])
            again.rep.removed_segments--;
        again.removed[k] = 0;
    }
    /* A segment deleted at the first open took its tombstoned entries with it. */
    for (int i = 0; i < N_ITEMS; i++) {
        size_t k = (size_t)f->items[i].seg;
        if (x.removed[k]) {
            again.found[i] = 0;
            again.rep.entries_tombstoned--;
        }
    }
    open_and_check(f, dir, &again);
}

/*
 * One flipped byte in a journal record: that record is skipped, counted and logged, and the entry
 * it named keeps the state its other records give it: a lost tombstone makes the item live again
 * (with the delivery count of its commit), a lost delivery count a lower count. Never another
 * entry's state, never a lost item.
 */
static void test_journal_damaged_record_costs_at_most_a_redelivery(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0x70A7ull;
    print_message("seed 0x%" PRIx64 "\n", rng_state);
    size_t tombs_hit = 0;
    for (size_t t = 0; t < f->n_jrecs + 24; t++) {
        char dir[512], path[1024];
        trial_copy(f, dir, sizeof(dir));
        int jrec[MAX_JRECS] = {0};
        /* Every record once alone, then a few at a time. */
        size_t n = t < f->n_jrecs ? 1 : 2 + (size_t)rng_below(4);
        int n_trial = snprintf(trial, sizeof(trial), "journal flips");
        for (size_t p = 0; p < n; p++) {
            size_t r = t < f->n_jrecs ? t : (size_t)rng_below(f->n_jrecs);
            const jrecinfo_t *jr = &f->jrecs[r];
            uint64_t pos = jr->pos + rng_below(FMT_JNL_RECORD);
            jnl_path(dir, &f->jnls[jr->jnl], path, sizeof(path));
            int fd = open(path, O_RDWR | O_CLOEXEC);
            assert_true(fd >= 0);
            uint8_t b;
            assert_int_equal(pread(fd, &b, 1, (off_t)pos), 1);
            uint8_t mask = (uint8_t)(1 + rng_below(255));
            b ^= mask;
            assert_int_equal(pwrite(fd, &b, 1, (off_t)pos), 1);
            close(fd);
            /* A second flip in the same record can undo the first: judged by the bytes. */
            uint8_t rec[FMT_JNL_RECORD];
            fd = open(path, O_RDONLY | O_CLOEXEC);
            assert_int_equal(pread(fd, rec, sizeof(rec), (off_t)jr->pos), (ssize_t)sizeof(rec));
            close(fd);
            jrec[r] = fmt_jnl_crc(f->jnls[jr->jnl].id, rec) == get32(rec + FMT_JNL_CRC) &&
                              get64(rec) == f->items[jr->item].ref.queue &&
                              get32(rec + 8) == f->items[jr->item].ref.offset &&
                              get32(rec + 12) == f->items[jr->item].size
                          ? JREC_INTACT
                          : JREC_DAMAGED;
            tombs_hit += jr->rank == FMT_RANK_TOMB && jrec[r] == JREC_DAMAGED;
            if (n_trial < (int)sizeof(trial) - 64)
                n_trial += snprintf(trial + n_trial, sizeof(trial) - (size_t)n_trial,
                                    " %s@%" PRIu64 "^%02x", f->jnls[jr->jnl].name, pos, mask);
        }
        journal_trial(f, dir, jrec, 0);
        trial_done(dir);
    }
    assert_true(tombs_hit >= 6);
}

/*
 * The journal's last file cut short (a torn tail) at every record boundary and inside records, or
 * its tail zeroed (pages a power loss never wrote back), or a zeroed stretch in its middle: the
 * records that are gone are simply not there (no damage is reported: they were never
 * acknowledged, or are a blank like any slot not written), the records after a zeroed stretch
 * still apply.
 */
static void test_journal_torn_tail_and_zeroed_stretch(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0x7041ull;
    const jnlinfo_t *last = &f->jnls[f->n_jnls - 1];
    size_t cuts = 0;
    for (int mode = 0; mode < 3; mode++) {
        for (size_t r0 = 0; r0 < f->n_jrecs; r0++) {
            if (f->jrecs[r0].jnl != (int)(f->n_jnls - 1) && mode != 2)
                continue;
            char dir[512], path[1024];
            trial_copy(f, dir, sizeof(dir));
            const jrecinfo_t *jr = &f->jrecs[r0];
            int jrec[MAX_JRECS] = {0};
            jnl_path(dir, &f->jnls[jr->jnl], path, sizeof(path));
            if (mode == 0) {
                /* Cut at the record's start, or inside it. */
                uint64_t cut = jr->pos + (cuts % 2 ? rng_below(FMT_JNL_RECORD) : 0);
                assert_int_equal(truncate(path, (off_t)cut), 0);
                snprintf(trial, sizeof(trial), "journal %s cut at %" PRIu64, last->name, cut);
                for (size_t r = 0; r < f->n_jrecs; r++)
                    jrec[r] =
                        f->jrecs[r].jnl == jr->jnl && f->jrecs[r].pos >= jr->pos ? JREC_GONE : 0;
            } else {
                /* Zeroed from the record on (mode 1), or that record and the next (mode 2). */
                size_t len;
                uint8_t *b = read_all(path, &len);
                uint64_t end = mode == 1 ? len : jr->pos + 2 * FMT_JNL_RECORD;
                end = end > len ? len : end;
                memset(b + jr->pos, 0, (size_t)(end - jr->pos));
                write_all(path, b, len);
                free(b);
                snprintf(trial, sizeof(trial), "journal %s zeroed %" PRIu64 "..%" PRIu64,
                         f->jnls[jr->jnl].name, jr->pos, end);
                for (size_t r = 0; r < f->n_jrecs; r++)
                    jrec[r] = f->jrecs[r].jnl == jr->jnl && f->jrecs[r].pos >= jr->pos &&
                                      f->jrecs[r].pos < end
                                  ? JREC_GONE
                                  : 0;
            }
            journal_trial(f, dir, jrec, 0);
            trial_done(dir);
            cuts++;
        }
    }
    assert_true(cuts >= f->n_jrecs);
}

/* A journal header that fails its checks is reported; its records, each checked on its own under
 * the id of the file's name, still apply. */
static void test_journal_damaged_header_keeps_its_records(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0x70A8ull;
    for (size_t j = 0; j < f->n_jnls; j++) {
        for (int t = 0; t < 8; t++) {
            char dir[512], path[1024];
            trial_copy(f, dir, sizeof(dir));
            jnl_path(dir, &f->jnls[j], path, sizeof(path));
            uint64_t pos = rng_below(FMT_JNL_HEADER);
            int fd = open(path, O_RDWR | O_CLOEXEC);
            uint8_t b;
            assert_int_equal(pread(fd, &b, 1, (off_t)pos), 1);
            b ^= (uint8_t)(1 + rng_below(255));
            assert_int_equal(pwrite(fd, &b, 1, (off_t)pos), 1);
            close(fd);
            snprintf(trial, sizeof(trial), "journal %s header byte %" PRIu64, f->jnls[j].name, pos);
            journal_trial(f, dir, NULL, 1);
            trial_done(dir);
        }
    }
}

/*
 * Replaying the journal is idempotent and order-free: every record of the last file copied again
 * into its blank slots, in reverse order, and the records of the other files shuffled within
 * their file, change no item's state (states only move up; the highest wins), only how many
 * records were read.
 */
static void test_journal_replay_twice_and_out_of_order_changes_nothing(void **state)
{
    fixture_t *f = *state;
    rng_state = test_seed() ^ 0x7E9Aull;
    char dir[512], path[1024];
    trial_copy(f, dir, sizeof(dir));
    uint64_t copies = 0;
    for (size_t j = 0; j < f->n_jnls; j++) {
        jnl_path(dir, &f->jnls[j], path, sizeof(path));
        size_t len;
        uint8_t *b = read_all(path, &len);
        size_t slots = (len - FMT_JNL_HEADER) / FMT_JNL_RECORD, used = 0;
        while (used < slots && get32(b + FMT_JNL_HEADER + used * FMT_JNL_RECORD + 16) != 0)
            used++;
        uint8_t *rec0 = b + FMT_JNL_HEADER;
        if (j + 1 == f->n_jnls) {
            for (size_t k = 0; k < used && used + k < slots; k++) {
                memcpy(rec0 + (used + k) * FMT_JNL_RECORD, rec0 + (used - 1 - k) * FMT_JNL_RECORD,
                       FMT_JNL_RECORD);
                copies++;
            }
        } else {
            for (size_t k = used; k > 1; k--) { /* Fisher-Yates over the used slots */
                size_t o = (size_t)rng_below(k);
                uint8_t tmp[FMT_JNL_RECORD];
                memcpy(tmp, rec0 + (k - 1) * FMT_JNL_RECORD, FMT_JNL_RECORD);
                memcpy(rec0 + (k - 1) * FMT_JNL_RECORD, rec0 + o * FMT_JNL_RECORD, FMT_JNL_RECORD);
                memcpy(rec0 + o * FMT_JNL_RECORD, tmp, FMT_JNL_RECORD);
            }
        }
        write_all(path, b, len);
        free(b);
    }
    assert_true(copies >= 2);
    snprintf(trial, sizeof(trial), "journal replayed: %" PRIu64 " records copied, others shuffled",
             copies);
    expect_t x;
    expect_clean(f, &x);
    x.jrec_copies = copies;
    open_and_check(f, dir, &x);
    snprintf(trial + strlen(trial), sizeof(trial) - strlen(trial), ", second open");
    open_and_check(f, dir, &x);
    trial_done(dir);
}

/* File names: 16 lowercase hex digits and the kind's suffix; anything else, and the one id the
 * counter cannot pass (2^64 - 1), is not a store file (recovery warns and leaves it alone). */
static void test_file_names_parse_only_the_store_form(void **state)
{
    (void)state;
    char name[SEG_FILE_NAME_SIZE > JNL_FILE_NAME_SIZE ? SEG_FILE_NAME_SIZE : JNL_FILE_NAME_SIZE];
    uint64_t id = 7;
    seg_file_name(0x0123456789abcdefull, name);
    assert_int_equal(seg_file_parse(name, &id), 1);
    assert_true(id == 0x0123456789abcdefull);
    assert_int_equal(jnl_file_parse(name, &id), 0);
    jnl_file_name(42, name);
    assert_int_equal(jnl_file_parse(name, &id), 1);
    assert_true(id == 42);
    assert_int_equal(seg_file_parse(name, &id), 0);
    id = 7;
    seg_file_name(UINT64_MAX, name);
    assert_int_equal(seg_file_parse(name, &id), 0);
    jnl_file_name(UINT64_MAX, name);
    assert_int_equal(jnl_file_parse(name, &id), 0);
    assert_int_equal(seg_file_parse("0123456789ABCDEF" SEG_FILE_SUFFIX, &id), 0);
    assert_int_equal(seg_file_parse("0123456789abcde" SEG_FILE_SUFFIX, &id), 0);
    assert_int_equal(seg_file_parse("0123456789abcdef", &id), 0);
    assert_true(id == 7); /* untouched on refusal */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_names_parse_only_the_store_form),
        cmocka_unit_test_setup_teardown(test_pristine_store_recovers_everything, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_at_every_entry_boundary, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_at_random_offsets, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_flip_one_byte_anywhere, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_flip_exact_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_flip_many_bytes, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_garbage_past_the_end_is_cut, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_valid_entry_past_the_boundary_is_cut, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_torn_create_is_quarantined_and_its_id_not_reused,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_journal_damaged_record_costs_at_most_a_redelivery,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_journal_torn_tail_and_zeroed_stretch, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_journal_damaged_header_keeps_its_records,
                                        fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_journal_replay_twice_and_out_of_order_changes_nothing,
                                        fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
