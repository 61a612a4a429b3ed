/*
 * recovery_journal.c - recovery's reading of the state journal: every journal file's records
 * checked, those naming a segment file found kept and handed to that file's scan sorted by
 * offset, so the scan merges them with the entries it walks in one pass (recovery_scan.c).
 *
 * Invariants (numbered on from recovery_scan.c's):
 *  10. A record is used only if it verifies (journal.c's invariant 1); a damaged one is counted
 *      and logged, never applied: the entry it named keeps a lower state (at worst live again, a
 *      redelivery), never another entry's.
 *  11. A record naming a segment that is not there (deleted once all its entries completed) is
 *      counted as stale and dropped: segment ids are never reused, so it cannot name anything
 *      else. Every verified record raises the id counter past its segment, so an index rebuilt
 *      from the file names alone (the meta row lost) cannot hand a deleted segment's id out again
 *      while a journal file still holds records of it.
 *  12. Every slot of every file is read, blanks (never written) skipped: a damaged stretch in
 *      the middle of a file costs its own records, not the ones after it. Stretches the file
 *      system reports as holes (space allocated and never written) are not read.
 *  13. No count read from a file sizes an allocation beyond what the files hold (the records
 *      array is sized by the space the files hold, never by a header or record field).
 *  14. The journal files are read in contiguous shares, on up to cfg.recovery_threads threads;
 *      a share touches nothing but its own records, counters and buffers, and the shares are
 *      merged in journal order (the records' order within a file's run before its sort is the
 *      serial read's).
 *
 * Rejected: a hash table of (segment, offset) looked up per entry by the scan: with hundreds of
 * thousands of records it costs a cache miss per entry; sorted runs merged with the scan cost a
 * radix sort (two passes) and a sequential walk. Stopping a file at its first blank slot: a
 * zeroed stretch (damage, or pages a power loss did not write back) would hide every record
 * after it.
 */
#define _GNU_SOURCE /* SEEK_DATA, SEEK_HOLE */
#include "store/disk/recovery_scan_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes read at once: a multiple of the record size. */
#define REC_JNL_CHUNK (JNL_RECORD * 16384u)

static int rec_id_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

store_status_t rec_journal_list(disk_t *d, rec_journal_t *j)
{
    int fd = openat(d->dir_fd, "journal", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return STORE_OK; /* store format 2, or a new directory: made once the format is known */
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (dir == NULL) {
        if (fd >= 0)
            close(fd);
        return STORE_EIO;
    }
    rewinddir(dir);
    size_t cap = 0;
    store_status_t st = STORE_OK;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        uint64_t id;
        if (de->d_name[0] == '.')
            continue;
        if (!jnl_file_parse(de->d_name, &id)) {
            disk_log(d, STORE_LOG_WARN, "ignoring %s/journal/%s: not a journal file name", d->dir,
                     de->d_name);
            continue;
        }
        if (id >= d->next_segment_id) /* ids are drawn from the segments' counter */
            d->next_segment_id = id + 1;
        int regular;
        struct stat sb;
        int jfd = rec_regular_open(dirfd(dir), de->d_name, O_RDONLY, &regular, &sb);
        if (!regular) {
            disk_log(d, STORE_LOG_WARN,
                     "ignoring %s/journal/%s: not a regular file (a link, FIFO, socket, device "
                     "or directory)",
                     d->dir, de->d_name);
            continue;
        }
        uint8_t hdr[JNL_HEADER];
        ssize_t r = jfd >= 0 ? pread(jfd, hdr, sizeof(hdr), 0) : -1;
        if (jfd >= 0)
            close(jfd);
        uint32_t version = r > 0 ? jnl_header_version(hdr, (size_t)r) : 0;
        if (version != 0 && version != JNL_VERSION && j->foreign_version == 0) {
            j->foreign_version = version;
            j->foreign_id = id;
        }
        if (j->n_ids == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *ids = realloc(j->ids, cap * sizeof(*ids));
            if (ids == NULL) {
                st = STORE_ENOMEM;
                break;
            }
            j->ids = ids;
        }
        j->ids[j->n_ids++] = id;
    }
    closedir(dir);
    if (j->n_ids > 1)
        qsort(j->ids, j->n_ids, sizeof(*j->ids), rec_id_cmp);
    return st;
}

void rec_journal_fini(rec_journal_t *j)
{
    free(j->ids);
    free(j->recs);
    memset(j, 0, sizeof(*j));
}

/* A record kept while reading: its file's index, then the scan's fields. */
typedef struct {
    uint32_t file;
    rec_jrec_t r;
} rec_jtmp_t;

typedef struct {
    uint64_t id;
    uint32_t file;
} rec_jid_t;

static int rec_jid_cmp(const void *a, const void *b)
{
    const rec_jid_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* One thread's share of the journal files (invariant 14): what it found, merged by
 * rec_journal_load once every share is read. */
typedef struct {
    disk_t *d;
    rec_jtmp_t *recs; /* owned */
    size_t n, cap;
    const rec_jid_t *ids; /* borrowed: the segment files by id */
    size_t n_ids;
    size_t last;              /* the last id found: records of one segment come in runs */
    const uint64_t *jids;     /* borrowed: the journal files, ascending */
    size_t from, to;          /* this share: jids[from .. to) */
    uint64_t *jnl_min;        /* owned: per segment file, the oldest journal file naming it */
    uint64_t next_segment_id; /* past every segment id a verified record named */
    store_recovery_t rep;     /* the journal's counters of this share */
    uint8_t *buf;             /* owned: REC_JNL_CHUNK bytes */
    store_status_t st;
} rec_jread_t;

/* The file index of a segment id, or -1. */
static int64_t rec_jfile(rec_jread_t *rd, uint64_t id)
{
    if (rd->last < rd->n_ids && rd->ids[rd->last].id == id)
        return rd->ids[rd->last].file;
    size_t lo = 0, hi = rd->n_ids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rd->ids[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == rd->n_ids || rd->ids[lo].id != id)
        return -1;
    rd->last = lo;
    return rd->ids[lo].file;
}

/* Reads one journal file's records (invariants 10-12). */
static store_status_t rec_journal_file(rec_jread_t *rd, uint64_t id)
{
    disk_t *d = rd->d;
    uint8_t *buf = rd->buf;
    store_recovery_t *rep = &rd->rep;
    char name[JNL_FILE_NAME_SIZE];
    jnl_file_name(id, name);
    int regular;
    struct stat sb;
    int fd = rec_regular_open(d->jnl_dir_fd, name, O_RDONLY, &regular, &sb);
    if (fd < 0) {
        disk_log(d, STORE_LOG_ERROR, "journal file %s/journal/%s: cannot open it: %s", d->dir, name,
                 regular ? strerror(errno) : "no longer a regular file");
        return STORE_EIO;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    uint8_t hdr[JNL_HEADER];
    jnl_header_t h;
    ssize_t got = size < 0 ? -1 : pread(fd, hdr, sizeof(hdr), 0);
    int blank = got >= 0;
    for (ssize_t i = 0; i < got && blank; i++)
        blank = hdr[i] == 0;
    if (blank) /* created, then a crash before its header: nothing was ever acknowledged into it */
        disk_log(d, STORE_LOG_INFO,
                 "journal file %s/journal/%s has no header yet (its creation was cut short); its "
                 "records, if any, are read under the file name's id",
                 d->dir, name);
    else if (got != (ssize_t)sizeof(hdr) || jnl_header_decode(hdr, sizeof(hdr), &h) != STORE_OK ||
             h.journal_id != id)
        disk_corrupt(d, STORE_CORRUPT_BKPT,
                     "journal file %s: header fails its checks; its records are read under the "
                     "file name's id (each verifies on its own)",
                     name);
    uint32_t seed = jnl_crc_seed(id);
    uint64_t damaged = 0, first_damaged = 0, stale = 0;
    uint64_t end = size < 0 ? 0 : (uint64_t)size;
    end = end < JNL_HEADER ? JNL_HEADER : JNL_HEADER + (end - JNL_HEADER) / JNL_RECORD * JNL_RECORD;
    store_status_t st = STORE_OK;
    /* Room for every slot the file has, at once (invariant 13): growing by doubling copies the
     * records again and, with another share reading beside it, each move of a large array
     * flushes that thread's TLB. Pages never written are never touched. Best effort: refused
     * (a large journal under strict overcommit), the array grows with the records found. */
    uint64_t held = (uint64_t)sb.st_blocks * 512u; /* holes left out */
    uint64_t bytes = end < held ? end : held;
    size_t slots = bytes > JNL_HEADER ? (size_t)((bytes - JNL_HEADER) / JNL_RECORD) : 0;
    if (rd->cap - rd->n < slots) {
        rec_jtmp_t *a = realloc(rd->recs, (rd->n + slots) * sizeof(*a));
        if (a != NULL) {
            rd->recs = a;
            rd->cap = rd->n + slots;
        }
    }
    for (uint64_t pos = JNL_HEADER; pos < end && st == STORE_OK;) {
        /* Invariant 12: space never written is skipped where the file system says so. */
        off_t data = lseek(fd, (off_t)pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break;
        if (data > (off_t)pos)
            pos = JNL_HEADER + ((uint64_t)data - JNL_HEADER) / JNL_RECORD * JNL_RECORD;
        off_t hole = data < 0 ? (off_t)end : lseek(fd, (off_t)pos, SEEK_HOLE);
        uint64_t stop = hole < 0 || (uint64_t)hole > end ? end : (uint64_t)hole;
        if (stop <= pos)
            stop = pos + JNL_RECORD; /* a hole inside a record: read it whole */
        uint64_t want = stop - pos < REC_JNL_CHUNK ? stop - pos : REC_JNL_CHUNK;
        want = (want + JNL_RECORD - 1) / JNL_RECORD * JNL_RECORD;
        if (pos + want > end)
            want = end - pos;
        ssize_t r = pread(fd, buf, (size_t)want, (off_t)pos);
        if (r <= 0) {
            if (r < 0)
                disk_log(d, STORE_LOG_ERROR,
                         "journal file %s/journal/%s: reading at %" PRIu64 ": %s", d->dir, name,
                         pos, strerror(errno));
            st = r == 0 ? STORE_OK : STORE_EIO;
            break;
        }
        size_t n = (size_t)r / JNL_RECORD;
        for (size_t i = 0; i < n; i++) {
            const uint8_t *b = buf + i * JNL_RECORD;
            jnl_record_t rec;
            if (jnl_record_blank(b))
                continue;
            if (!jnl_record_check(seed, b, &rec)) {
                if (damaged++ == 0)
                    first_damaged = pos + i * JNL_RECORD;
                continue;
            }
            if (rec.segment_id >= rd->next_segment_id) /* invariant 11 */
                rd->next_segment_id = rec.segment_id + 1;
            int64_t file = rec_jfile(rd, rec.segment_id);
            if (file < 0) {
                stale++;
                continue;
            }
            if (rd->n == rd->cap) { /* invariant 13 */
                size_t cap = rd->cap ? rd->cap * 2 : 4096;
                rec_jtmp_t *a = realloc(rd->recs, cap * sizeof(*a));
                if (a == NULL) {
                    st = STORE_ENOMEM;
                    break;
                }
                rd->recs = a;
                rd->cap = cap;
            }
            rd->recs[rd->n++] = (rec_jtmp_t){
                (uint32_t)file, {rec.offset, rec.length, (uint32_t)seg_state_rank(rec.state)}};
            if (rd->jnl_min[file] > id)
                rd->jnl_min[file] = id;
        }
        if (n == 0)
            break;
        pos += n * JNL_RECORD;
    }
    close(fd);
    rep->journal_files++;
    rep->journal_damaged_records += damaged;
    rep->journal_stale_records += stale;
    if (damaged != 0)
        disk_corrupt(d, STORE_CORRUPT_BKPT,
                     "journal file %s: %" PRIu64 " damaged records skipped (the first at offset "
                     "%" PRIu64 "): the entries they named keep a lower state, a redelivery at "
                     "worst",
                     name, damaged, first_damaged);
    return st;
}

/* Sorts a[0 .. n) by offset, stably: passes of eight bits over offset / 8 (offsets are
 * 8-aligned and below 2^32), as many as the largest offset needs (three for a 64 MiB segment),
 * through tmp (n elements) and count (REC_JNL_BUCKETS + 1 counters); insertion for short runs,
 * nothing for a sorted one. Eight bits, not fifteen in two passes: a pass scatters to as many
 * places at once as it has buckets, and 32,768 of them missed the cache on nearly every record
 * (`perf annotate` of the open, lanesched-storebench --phases recovery --lanes 200). */
#define REC_JNL_BUCKETS 256u

static void rec_jrecs_sort(rec_jrec_t *a, rec_jrec_t *tmp, uint32_t *count, size_t n)
{
    if (n < 64) {
        for (size_t i = 1; i < n; i++) {
            rec_jrec_t x = a[i];
            size_t k = i;
            for (; k > 0 && a[k - 1].offset > x.offset; k--)
                a[k] = a[k - 1];
            a[k] = x;
        }
        return;
    }
    int sorted = 1;
    uint32_t bits = 0;
    for (size_t i = 0; i < n; i++) {
        sorted &= i == 0 || a[i - 1].offset <= a[i].offset;
        bits |= a[i].offset;
    }
    if (sorted)
        return;
    rec_jrec_t *src = a, *dst = tmp;
    for (unsigned shift = 3; shift < 32 && bits >> shift != 0; shift += 8) {
        memset(count, 0, (REC_JNL_BUCKETS + 1) * sizeof(*count));
        for (size_t i = 0; i < n; i++)
            count[((src[i].offset >> shift) & (REC_JNL_BUCKETS - 1)) + 1]++;
        for (size_t b = 1; b <= REC_JNL_BUCKETS; b++)
            count[b] += count[b - 1];
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].offset >> shift) & (REC_JNL_BUCKETS - 1)]++] = src[i];
        rec_jrec_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof(*a));
}

static void *rec_jread_run(void *arg)
{
    rec_jread_t *rd = arg;
    rd->st = STORE_OK;
    for (size_t i = rd->from; i < rd->to && rd->st == STORE_OK; i++)
        rd->st = rec_journal_file(rd, rd->jids[i]);
    return NULL;
}

store_status_t rec_journal_load(disk_t *d, rec_journal_t *j, rec_file_t *files, size_t n,
                                store_recovery_t *rep)
{
    for (size_t i = 0; i < n; i++) {
        files[i].jrecs = NULL;
        files[i].n_jrecs = 0;
        files[i].jnl_min = UINT64_MAX;
    }
    if (j->n_ids == 0)
        return STORE_OK;
    size_t threads = rec_threads(d), n_parts = j->n_ids < threads ? j->n_ids : threads; /* >= 1 */
    store_status_t st = STORE_ENOMEM;
    rec_jread_t *parts = calloc(n_parts, sizeof(*parts));
    rec_jid_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    size_t *start = calloc(n + 1, sizeof(*start));
    uint32_t *count = malloc((REC_JNL_BUCKETS + 1) * sizeof(*count));
    rec_jrec_t *tmp = NULL;
    size_t total = 0;
    if (parts == NULL || ids == NULL || start == NULL || count == NULL)
        goto out;
    for (size_t i = 0; i < n; i++)
        ids[i] = (rec_jid_t){files[i].id, (uint32_t)i};
    qsort(ids, n, sizeof(*ids), rec_jid_cmp);
    for (size_t p = 0; p < n_parts; p++) {
        rec_jread_t *rd = &parts[p];
        *rd = (rec_jread_t){.d = d,
                            .ids = ids,
                            .n_ids = n,
                            .last = n,
                            .jids = j->ids,
                            .from = j->n_ids * p / n_parts,
                            .to = j->n_ids * (p + 1) / n_parts,
                            .next_segment_id = d->next_segment_id,
                            .buf = malloc(REC_JNL_CHUNK),
                            .jnl_min = malloc((n ? n : 1) * sizeof(uint64_t))};
        if (rd->buf == NULL || rd->jnl_min == NULL)
            goto out;
        for (size_t i = 0; i < n; i++)
            rd->jnl_min[i] = UINT64_MAX;
    }
    rec_parts_run(d, rec_jread_run, parts, sizeof(*parts), n_parts);
    st = STORE_OK;
    for (size_t p = 0; p < n_parts; p++) {
        const rec_jread_t *rd = &parts[p];
        if (rd->st != STORE_OK && st == STORE_OK)
            st = rd->st;
        if (rd->next_segment_id > d->next_segment_id)
            d->next_segment_id = rd->next_segment_id;
        rep->journal_files += rd->rep.journal_files;
        rep->journal_damaged_records += rd->rep.journal_damaged_records;
        rep->journal_stale_records += rd->rep.journal_stale_records;
        for (size_t i = 0; i < n; i++) {
            if (rd->jnl_min[i] < files[i].jnl_min)
                files[i].jnl_min = rd->jnl_min[i];
        }
        total += rd->n;
    }
    if (st != STORE_OK || total == 0) /* nothing names a segment found: no file keeps a record */
        goto out;
    st = STORE_ENOMEM;
    /* Counting sort by file, the shares in journal order, then each file's run by offset. */
    if ((j->recs = malloc(total * sizeof(*j->recs))) == NULL ||
        (tmp = malloc(total * sizeof(*tmp))) == NULL)
        goto out;
    for (size_t p = 0; p < n_parts; p++) {
        for (size_t i = 0; i < parts[p].n; i++)
            start[parts[p].recs[i].file + 1]++;
    }
    for (size_t f = 0; f < n; f++)
        start[f + 1] += start[f];
    for (size_t p = 0; p < n_parts; p++) {
        for (size_t i = 0; i < parts[p].n; i++)
            j->recs[start[parts[p].recs[i].file]++] = parts[p].recs[i].r;
    }
    for (size_t f = n; f > 0; f--) /* start[f] now ends file f: shift back to beginnings */
        start[f] = start[f - 1];
    start[0] = 0;
    for (size_t f = 0; f < n; f++) {
        files[f].jrecs = j->recs + start[f];
        files[f].n_jrecs = start[f + 1] - start[f];
        rec_jrecs_sort(j->recs + start[f], tmp, count, files[f].n_jrecs);
    }
    st = STORE_OK;
out:
    for (size_t p = 0; parts != NULL && p < n_parts; p++) {
        free(parts[p].recs);
        free(parts[p].buf);
        free(parts[p].jnl_min);
    }
    free(parts);
    free(ids);
    free(start);
    free(count);
    free(tmp);
    return st;
}
