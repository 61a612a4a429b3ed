/*
 * recovery.c - rebuilds the disk store at open from the LMDB index and the segment files.
 *
 * Owns the decisions about damage. What it does with each kind, and why:
 *
 *   another store format          refused before anything is changed (STORE_EFORMAT): a segment
 *     (a segment header of another  file of format 1 (one file per lane) read as format 2 would
 *     version, or index rows of     be quarantined, its items lost. The log line names the
 *     store format 1)               directory and what to do (drain it with the version that
 *                                  wrote it, or move it aside). A directory with no segment
 *                                  file and no segment row left (drained) is taken over: its lane
 *                                  targets and current shapes read the same in both formats.
 *   index missing or unreadable    set aside as index.damaged-<ns>, rebuilt from the segments:
 *                                  they are the source of truth; the index is a cache of them.
 *   index that cannot be opened    an operator's error (permissions, a read-only or full file
 *     for any other reason         system, the open-file limit): the open fails with a message
 *                                  that says so and the index is left as it is, never set
 *                                  aside: adopting every segment would re-deliver everything.
 *   index empty over segments      warned about (truncated, replaced or lost) and rebuilt.
 *   index row failing its checksum scanned as if adopted (recovery_scan.c's invariant 9),
 *     or disagreeing with its file reported; the next flush writes a checked row.
 *   file the index does not know   adopted: scanned with no durable boundary (all valid entries
 *                                  kept). It is what a crash between creating a segment and its
 *                                  first index commit leaves, or a deletion cut short.
 *   index row without a file       the row is removed and the loss is reported as an error with
 *                                  the live entries the row claimed (or, for a row that fails its
 *                                  checksum, that their number is unknown): nothing can bring
 *                                  them back.
 *   unreadable segment header      the file is moved to quarantine/ and reported; never deleted.
 *                                  Every later start says how many files quarantine/ still holds
 *                                  (a warning), so the loss is not said once and then forgotten.
 *   bytes past the durable boundary  cut (a torn tail): they were never acknowledged. Only a
 *                                  checked row's boundary is used, and not where the row's own
 *                                  entry count says valid entries past it are durable.
 *   a bad entry below the boundary   skipped alone: the scan resynchronises at the next aligned
 *                                  offset that holds a valid entry, so one bad record never costs
 *                                  the acknowledged records after it (JetStream's file store lost
 *                                  data exactly that way). The segment is reported.
 *   a bad entry, no boundary known   if no valid entry follows it is a torn tail and cut; else
 *                                  skipped as above.
 *   damaged state word, entry intact treated as live: a redelivery, never a misread.
 *   deleted count disagreeing        repaired from the tombstones the scan counted.
 *
 * Invariants:
 *   1. Nothing below a segment's durable boundary is ever truncated.
 *   2. No entry whose CRC fails is queued.
 *   3. Every recovered segment is sealed: appends after a restart start new segments, so a
 *      recovered file is only ever read and tombstoned.
 *   4. Every dropped byte is counted in the report and logged with the line that found it.
 *   5. Each model's segments are scanned in sequence order and each entry goes to the lane its
 *      own (CRC-checked) signature and lane name, so every lane's queue comes out in arrival
 *      order without a sort.
 *   6. A model's files are scanned by one thread. Scans of different models may run at once
 *      and share only the queue map (queues created under a mutex) and the log (a line at a
 *      time); every segment is attached before any scan, on the opening thread. What the open
 *      returns does not depend on the threads: the same queues, items, report and queue order
 *      (relisted after the scans); only the log lines of different models interleave
 *      differently, and when a scan fails the others still finish their files (each failure is
 *      logged; the open fails either way, and what a scan cut was never acknowledged).
 *
 * Calls only the layer below the backend (disk_int.h: queues, segments, the flush, the log),
 * never the backend's operations, so the dependency runs one way: disk.c -> recovery.c.
 *
 * Rejected: trusting the index's entry counts and skipping the scan. The scan walks entry
 * headers and checks every entry's CRC (so it reads every byte once, through a read-only
 * mapping); it is the only way to honour "tombstones win" after a crash between a tombstone and
 * its count, and to keep a damaged entry from ever being handed out. Splitting one model's files
 * between threads: its lanes span its files, so each lane's two halves would have to be merged
 * in sequence order afterwards, and a file split at an offset needs an entry boundary that only
 * the scan from the file's start can be sure of.
 */
#include "store/disk/recovery_int.h"
#include "store/disk/recovery_scan_int.h"

#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    index_segment_row_t *rows;
    size_t n_rows, cap_rows;
    uint64_t format_lane_rows; /* segment rows of store format 1 */
    uint32_t index_format;     /* the index's meta "format" row, 0 when it has none */
    struct lane_row {
        char *model;
        uint64_t signature;
        uint32_t lane, target;
    } * lanes;
    size_t n_lanes, cap_lanes;
    uint64_t max_row_id; /* + 1 over the rows that verify: ids the index names are never reused,
                            even without meta. A damaged row's id is not trusted; its file, if
                            any, counts it. */
    uint64_t rejected;   /* rows of the other tables that could not be used */
    disk_t *d;
} rec_ctx_t;

static int rec_on_segment(void *ctx, const index_segment_row_t *row)
{
    rec_ctx_t *c = ctx;
    if (c->n_rows == c->cap_rows) {
        size_t cap = c->cap_rows ? c->cap_rows * 2 : 64;
        index_segment_row_t *rows = realloc(c->rows, cap * sizeof(*rows));
        if (rows == NULL)
            return 1;
        c->rows = rows;
        c->cap_rows = cap;
    }
    c->rows[c->n_rows++] = *row;
    c->format_lane_rows += row->trust == INDEX_ROW_FORMAT_LANE;
    if (row->trust != INDEX_ROW_DAMAGED && row->segment_id >= c->max_row_id)
        c->max_row_id = row->segment_id + 1;
    return 0;
}

static void rec_on_rejected(void *ctx, const char *table, const char *why)
{
    rec_ctx_t *c = ctx;
    c->rejected++;
    disk_corrupt(c->d, STORE_CORRUPT_BKPT, "index table %s: %s: dropped", table, why);
}

static int rec_on_lane(void *ctx, const char *model, uint64_t signature, uint32_t lane,
                       uint32_t target)
{
    rec_ctx_t *c = ctx;
    if (c->n_lanes == c->cap_lanes) {
        size_t cap = c->cap_lanes ? c->cap_lanes * 2 : 64;
        struct lane_row *lanes = realloc(c->lanes, cap * sizeof(*lanes));
        if (lanes == NULL)
            return 1;
        c->lanes = lanes;
        c->cap_lanes = cap;
    }
    char *m = strndup(model, SEG_MODEL_MAX);
    if (m == NULL)
        return 1;
    c->lanes[c->n_lanes++] = (struct lane_row){m, signature, lane, target};
    return 0;
}

static int rec_on_current(void *ctx, const char *model, uint64_t signature)
{
    rec_ctx_t *c = ctx;
    uint32_t idx;
    if (disk_model_intern(c->d, model, &idx) != STORE_OK)
        return 1;
    c->d->models[idx].has_current = 1;
    c->d->models[idx].current = signature;
    return 0;
}

static void rec_ctx_free(rec_ctx_t *c)
{
    free(c->rows);
    for (size_t i = 0; i < c->n_lanes; i++)
        free(c->lanes[i].model);
    free(c->lanes);
}

/* An index that cannot be opened or read for a reason other than damage (index_rc_is_damage):
 * the operator's to fix. The index is left as it is. */
static store_status_t rec_index_refused(disk_t *d, const char *path, const char *what, int rc)
{
    disk_log(d, STORE_LOG_ERROR,
             "cannot %s the index %s: %s. This is not damage, so the index is left as it is "
             "(setting it aside would rebuild it from the segments and deliver every item "
             "again): fix the cause (permissions of %s and its files, a read-only or full file "
             "system, the open-file limit) and start again",
             what, path, rc > 0 ? strerror(rc) : index_lmdb_str(rc), path);
    return STORE_EINDEX;
}

/* Opens the index, setting a damaged one aside and starting afresh (the scan rebuilds it). */
static store_status_t rec_open_index(disk_t *d, rec_ctx_t *c, int has_segments,
                                     store_recovery_t *rep)
{
    int nosync = d->cfg.durability == STORE_DURABLE_PROCESS;
    struct stat sb;
    int existed = fstatat(d->dir_fd, "index", &sb, 0) == 0;
    char path[4096];
    snprintf(path, sizeof(path), "%s/index", d->dir);
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = 0;
        index_status_t ist = index_open(path, d->cfg.index_map_bytes, nosync, &d->index, &rc);
        if (ist == INDEX_ENOMEM)
            return STORE_ENOMEM;
        if (ist == INDEX_OK) {
            index_visitor_t vis = {
                rec_on_segment, rec_on_lane, rec_on_current, rec_on_rejected, c, 0, 0, 0};
            ist = index_load(d->index, &vis);
            if (ist == INDEX_OK) {
                /* The largest of the meta row, the rows and the files listed (ids are never
                 * reused). */
                if (vis.next_segment_id > d->next_segment_id)
                    d->next_segment_id = vis.next_segment_id;
                if (c->max_row_id > d->next_segment_id)
                    d->next_segment_id = c->max_row_id;
                rep->rows_rejected += c->rejected;
                c->index_format = vis.format;
                if (vis.format > INDEX_FORMAT || c->format_lane_rows != 0)
                    return STORE_EFORMAT; /* said by the caller, before anything is changed */
                /* A store's first flush writes the meta row: none means this index never was
                 * the store's, whatever the directory says (missing, truncated, replaced). */
                if (!vis.has_meta && has_segments) {
                    rep->index_rebuilt = 1;
                    disk_log(d, STORE_LOG_WARN,
                             "index %s %s, but segment files exist: rebuilding it from them "
                             "(every valid entry comes back; was the index truncated, replaced "
                             "or deleted?)",
                             path, existed ? "is empty" : "was missing");
                }
                return STORE_OK;
            }
            if (ist == INDEX_ENOMEM)
                return STORE_ENOMEM;
            if (ist == INDEX_ELMDB)
                return rec_index_refused(d, path, "read", index_error_get(d->index));
            index_close(d->index);
            d->index = NULL;
            rec_ctx_free(c);
            memset(c, 0, sizeof(*c));
            c->d = d;
            disk_corrupt(d, STORE_CORRUPT_BKPT, "index %s has damaged pages", path);
        } else if (!index_rc_is_damage(rc)) {
            return rec_index_refused(d, path, "open", rc);
        } else {
            disk_log(d, STORE_LOG_ERROR, "cannot open index %s: %s", path, index_lmdb_str(rc));
        }
        if (attempt == 1)
            break;
        char aside[64];
        snprintf(aside, sizeof(aside), "index.damaged-%" PRIu64, clock_mono_ns());
        if (store_fault_renameat(d->dir_fd, "index", aside) != 0) {
            disk_log(d, STORE_LOG_ERROR, "cannot set the damaged index aside: %s", strerror(errno));
            return STORE_EINDEX;
        }
        disk_log(d, STORE_LOG_WARN, "damaged index moved to %s/%s; rebuilding from the segments",
                 d->dir, aside);
        rep->index_rebuilt = 1;
        existed = 1;
    }
    return STORE_EINDEX;
}

static const index_segment_row_t *rec_row_find(const rec_ctx_t *c, uint64_t id)
{
    size_t lo = 0, hi = c->n_rows; /* rows arrive in ascending id order (big-endian keys) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->rows[mid].segment_id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->n_rows && c->rows[lo].segment_id == id ? &c->rows[lo] : NULL;
}

/* The row of a file when it can be used: it verifies (or predates checksums) and names the
 * keys the file's header holds. Otherwise NULL, counted and said. */
static const index_segment_row_t *rec_row_usable(disk_t *d, const index_segment_row_t *row,
                                                 const seg_header_t *h, const char *name,
                                                 store_recovery_t *rep)
{
    if (row == NULL)
        return NULL;
    const char *why = NULL;
    if (row->trust == INDEX_ROW_DAMAGED)
        why = "fails its checksum or its bounds";
    else if (row->sequence != h->sequence || strcmp(row->model, h->model) != 0)
        why = "names another model or sequence than the file's header";
    else if (row->readable < h->header_len)
        why = "puts its boundary inside the file's header";
    if (why == NULL)
        return row;
    rep->rows_rejected++;
    disk_corrupt(d, STORE_CORRUPT_BKPT,
                 "index row of segment %s %s: not used; the segment scan decides (every entry "
                 "whose CRC verifies is kept, none is cut at the boundary the row claims)",
                 name, why);
    return NULL;
}

/* The files quarantine/ holds that this start did not put there: a warning at every start
 * until an operator has looked at them and removed them. */
static void rec_quarantine_note(disk_t *d, const store_recovery_t *rep)
{
    int qfd = openat(d->dir_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = qfd >= 0 ? fdopendir(qfd) : NULL;
    if (dir == NULL) {
        if (qfd >= 0)
            close(qfd);
        return;
    }
    uint64_t n = 0;
    const struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(dir);
    if (n > rep->quarantined_files)
        disk_log(d, STORE_LOG_WARN,
                 "%s/quarantine holds %" PRIu64 " file%s an earlier start set aside (segments "
                 "with an unreadable header: their items are not served); look at them, then "
                 "remove them",
                 d->dir, n - rep->quarantined_files, n - rep->quarantined_files == 1 ? "" : "s");
}

static store_status_t rec_quarantine(disk_t *d, const char *name, store_recovery_t *rep)
{
    if (mkdirat(d->dir_fd, "quarantine", 0755) != 0 && errno != EEXIST)
        return STORE_EIO;
    char to[128];
    snprintf(to, sizeof(to), "../quarantine/%s", name);
    if (store_fault_renameat(d->seg_dir_fd, name, to) != 0) {
        disk_log(d, STORE_LOG_ERROR, "cannot move %s to quarantine: %s", name, strerror(errno));
        return STORE_EIO;
    }
    rep->quarantined_files++;
    disk_log(d, STORE_LOG_ERROR, "segment file %s has an unreadable header: moved to %s/quarantine",
             name, d->dir);
    /* Both directories the rename touched are synced, so the move survives a power loss. */
    int qfd = openat(d->dir_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = qfd < 0 ? -1 : store_fault_fsync(qfd, 0);
    if (qfd >= 0)
        close(qfd);
    if (rc != 0)
        return STORE_EIO;
    return disk_fsync_dir(d, 1);
}

/* What the segments directory holds, read before anything is changed: segment files with a
 * header that verifies, those without (quarantined once the format is known to be ours), and
 * those of another store format (the directory is refused). */
typedef struct {
    rec_file_t *files;
    size_t n, cap;
    char (*bad)[SEG_FILE_NAME_SIZE];
    size_t n_bad;
    uint64_t foreign;         /* files of another format */
    uint32_t foreign_version; /* the first one's */
    char foreign_name[SEG_FILE_NAME_SIZE];
} rec_listing_t;

static void rec_listing_free(rec_listing_t *l)
{
    free(l->files);
    free(l->bad);
}

/* Only a regular file is opened: a FIFO's blocking open waits for a writer (the start would
 * hang, deaf to SIGTERM), and a link could make another file a segment. The fstatat keeps
 * devices and sockets from being opened at all; for one swapped in after it, O_NOFOLLOW refuses
 * a link, O_NONBLOCK keeps a FIFO's open from waiting, O_NOCTTY a terminal from becoming the
 * process's, and the descriptor's own fstat says what was opened. */
int rec_regular_open(int dirfd, const char *name, int flags, int *regular, struct stat *sb)
{
    struct stat st;
    *regular = 0;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return -1;
    int fd = openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        *regular = errno != ELOOP && errno != ENXIO; /* ENXIO: a socket, or a FIFO to write */
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    *regular = 1;
    *sb = st;
    return fd;
}

/* Lists the segment files and reads their headers; changes nothing. */
static store_status_t rec_list_files(disk_t *d, rec_listing_t *l)
{
    int fd = dup(d->seg_dir_fd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (dir == NULL) {
        if (fd >= 0)
            close(fd);
        return STORE_EIO;
    }
    rewinddir(dir);
    store_status_t st = STORE_OK;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        uint64_t id;
        if (de->d_name[0] == '.')
            continue;
        if (!seg_file_parse(de->d_name, &id)) {
            disk_log(d, STORE_LOG_WARN, "ignoring %s/segments/%s: not a segment file name", d->dir,
                     de->d_name);
            continue;
        }
        int regular;
        struct stat sb;
        int sfd = rec_regular_open(d->seg_dir_fd, de->d_name, O_RDONLY, &regular, &sb);
        if (regular && sfd < 0) { /* a segment it cannot read (EACCES, EMFILE): not damage */
            disk_log(d, STORE_LOG_ERROR, "segment file %s/segments/%s: cannot open it: %s", d->dir,
                     de->d_name, strerror(errno));
            st = STORE_EIO;
            break;
        }
        if (!regular) /* set aside as a damaged segment is: it has a segment's name */
            disk_log(d, STORE_LOG_WARN,
                     "%s/segments/%s is not a regular file (a link, FIFO, socket, device or "
                     "directory)",
                     d->dir, de->d_name);
        uint8_t hdr[SEG_HEADER_FIXED + SEG_MODEL_MAX + SEG_ALIGN];
        ssize_t r = sfd >= 0 ? pread(sfd, hdr, sizeof(hdr), 0) : -1;
        if (sfd >= 0)
            close(sfd);
        seg_header_t h;
        if (id >= d->next_segment_id) /* never reuse an id, not even a quarantined file's */
            d->next_segment_id = id + 1;
        uint32_t version = r > 0 ? seg_header_version(hdr, (size_t)r) : 0;
        if (version != 0 && version != SEG_VERSION && version != SEG_VERSION_LOG) {
            if (l->foreign++ == 0) {
                l->foreign_version = version;
                seg_file_name(id, l->foreign_name);
            }
            continue;
        }
        if (r < 0 || seg_header_decode(hdr, (size_t)r, &h) != STORE_OK || h.segment_id != id) {
            disk_corrupt(d, STORE_CORRUPT_BKPT, "segment %s: header fails its checks", de->d_name);
            char(*nb)[SEG_FILE_NAME_SIZE] = realloc(l->bad, (l->n_bad + 1) * sizeof(*l->bad));
            if (nb == NULL) {
                st = STORE_ENOMEM;
                break;
            }
            l->bad = nb;
            seg_file_name(id, l->bad[l->n_bad++]);
            continue;
        }
        uint32_t model_idx;
        if ((st = disk_model_intern(d, h.model, &model_idx)) != STORE_OK)
            break;
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 64;
            rec_file_t *nf = realloc(l->files, l->cap * sizeof(*l->files));
            if (nf == NULL) {
                st = STORE_ENOMEM;
                break;
            }
            l->files = nf;
        }
        l->files[l->n++] = (rec_file_t){.id = id,
                                        .header = h,
                                        .model_idx = model_idx,
                                        .file_size = (uint64_t)sb.st_size,
                                        .ino = (uint64_t)sb.st_ino};
    }
    closedir(dir);
    return st;
}

/* The refusal of a directory in another store format: one line that says what and what to do. */
static store_status_t rec_refuse_format(disk_t *d, const rec_listing_t *l, const rec_ctx_t *c,
                                        const rec_journal_t *j)
{
    if (l->foreign != 0)
        disk_log(d, STORE_LOG_ERROR,
                 "data directory %s holds %" PRIu64 " segment file(s) of store format %" PRIu32
                 " (%s/segments/%s, and others)%s; this lanesched reads store formats %u and %u "
                 "only. Nothing was changed. Drain the directory with the lanesched that wrote it "
                 "(let consumers complete every item, then stop it), or move it aside and start "
                 "with an empty --data-dir",
                 d->dir, l->foreign, l->foreign_version, d->dir, l->foreign_name,
                 l->foreign_version == SEG_VERSION_LANE ? " (one file per lane)" : "",
                 (unsigned)SEG_VERSION_LOG, (unsigned)SEG_VERSION);
    else if (j->foreign_version != 0)
        disk_log(d, STORE_LOG_ERROR,
                 "data directory %s holds a journal file of store format %" PRIu32
                 " (%s/journal/%016" PRIx64 JNL_FILE_SUFFIX "); this lanesched reads store "
                 "formats %u and %u only. Nothing was changed. Open it with the lanesched that "
                 "wrote it",
                 d->dir, j->foreign_version, d->dir, j->foreign_id, (unsigned)SEG_VERSION_LOG,
                 (unsigned)SEG_VERSION);
    else if (c->format_lane_rows != 0)
        disk_log(d, STORE_LOG_ERROR,
                 "data directory %s has an index written by another store format (%" PRIu64
                 " segment rows of format %u, one file per lane); this lanesched reads store "
                 "formats %u and %u only. Nothing was changed. Drain the directory with the "
                 "lanesched that wrote it, or move it aside and start with an empty --data-dir",
                 d->dir, c->format_lane_rows, (unsigned)SEG_VERSION_LANE, (unsigned)SEG_VERSION_LOG,
                 (unsigned)SEG_VERSION);
    else
        disk_log(d, STORE_LOG_ERROR,
                 "data directory %s was written by a newer lanesched (store format %" PRIu32
                 "); this one reads store formats %u and %u only. Nothing was changed. Open it "
                 "with the lanesched that wrote it",
                 d->dir, c->index_format, (unsigned)SEG_VERSION_LOG, (unsigned)SEG_VERSION);
    return STORE_EFORMAT;
}

static int rec_file_cmp(const void *a, const void *b)
{
    const rec_file_t *x = a, *y = b;
    if (x->model_idx != y->model_idx)
        return x->model_idx < y->model_idx ? -1 : 1;
    if (x->header.sequence != y->header.sequence)
        return x->header.sequence < y->header.sequence ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Index rows no listed file points at (rec_file_t.row): their files are gone or quarantined.
 * Reports the loss and drops the rows. */
static store_status_t rec_missing(disk_t *d, const rec_ctx_t *c, const rec_file_t *files,
                                  size_t n_files, index_txn_t *txn, store_recovery_t *rep)
{
    uint8_t *seen = calloc(c->n_rows + 1, 1);
    if (seen == NULL)
        return STORE_ENOMEM;
    for (size_t i = 0; i < n_files; i++) {
        const index_segment_row_t *row = rec_row_find(c, files[i].id);
        if (row != NULL)
            seen[row - c->rows] = 1;
    }
    store_status_t st = STORE_OK;
    for (size_t i = 0; i < c->n_rows && st == STORE_OK; i++) {
        const index_segment_row_t *row = &c->rows[i];
        if (seen[i])
            continue;
        rep->missing_files++;
        if (row->trust == INDEX_ROW_DAMAGED) {
            disk_log(d, STORE_LOG_ERROR,
                     "segment %016" PRIx64 " is in the index but its file is gone, and its row "
                     "fails its checksum: how many live entries it held is unknown; they are "
                     "lost",
                     row->segment_id);
        } else {
            uint64_t live = row->entries - row->deleted; /* bounded by the decoder */
            rep->missing_live_entries += live;
            disk_log(d, live ? STORE_LOG_ERROR : STORE_LOG_INFO,
                     "segment %016" PRIx64 " (model %s) is in the index but its file is gone; "
                     "%" PRIu64 " live entries in it are lost",
                     row->segment_id, row->model, live);
        }
        if (index_segment_del(txn, row->segment_id) != INDEX_OK)
            st = STORE_EINDEX;
    }
    free(seen);
    return st;
}

/* One thread's share of the scans: the files of the models assigned to `group`, in the
 * listing's order (each model's files in sequence order). */
typedef struct {
    disk_t *d;
    rec_file_t *files; /* borrowed: the whole listing */
    size_t n_files;
    const uint32_t *group_of; /* borrowed: the group of each model, by model_idx */
    uint32_t group;
    rec_lanes_t lanes; /* owned */
    store_recovery_t rep;
    store_status_t st;
    size_t failed; /* the file whose scan returned st */
} rec_group_t;

static void *rec_group_run(void *arg)
{
    rec_group_t *g = arg;
    g->st = STORE_OK;
    for (size_t i = 0; i < g->n_files && g->st == STORE_OK; i++) {
        if (g->group_of[g->files[i].model_idx] != g->group)
            continue;
        g->failed = i;
        g->st = rec_scan(g->d, &g->lanes, &g->files[i], &g->rep);
    }
    return NULL;
}

/* Adds what a group's scans counted (recovery_scan.c's fields of the report) to *to. */
static void rec_report_add(store_recovery_t *to, const store_recovery_t *from)
{
    to->segments += from->segments;
    to->entries_live += from->entries_live;
    to->entries_tombstoned += from->entries_tombstoned;
    to->tokens_live += from->tokens_live;
    to->torn_tails += from->torn_tails;
    to->torn_bytes += from->torn_bytes;
    to->corrupt_regions += from->corrupt_regions;
    to->corrupt_bytes += from->corrupt_bytes;
    to->damaged_state_words += from->damaged_state_words;
    to->deleted_count_repairs += from->deleted_count_repairs;
    to->adopted_files += from->adopted_files;
    to->boundary_entries_kept += from->boundary_entries_kept;
    to->journal_records += from->journal_records;
    to->journal_unmatched_records += from->journal_unmatched_records;
    to->tombstones_missing += from->tombstones_missing;
}

/* Invariant 6: the store's list of queues in the order one thread creates them (model by model,
 * each model's in its scan's order), whatever the threads' interleaving: store_queue_next hands
 * them out in that order, and the daemon registers models and shapes by it. Every queue was
 * created by a group's scan (the store has none before), so each is in one group's lanes, in
 * creation order, a group's models ascending. */
static void rec_queues_relist(disk_t *d, rec_group_t *groups, size_t n_groups)
{
    size_t listed = 0, met = 0, at[STORE_RECOVERY_THREADS_MAX] = {0};
    for (const dqueue_t *q = d->all; q != NULL; q = q->all_next)
        listed++;
    for (size_t g = 0; g < n_groups; g++)
        met += groups[g].lanes.n_lanes;
    if (listed != met)
        return; /* not every queue is a group's: nothing to reorder by */
    d->all = NULL;
    for (;;) {
        size_t best = n_groups;
        for (size_t g = 0; g < n_groups; g++) {
            if (at[g] < groups[g].lanes.n_lanes &&
                (best == n_groups || groups[g].lanes.lanes[at[g]].q->model_idx <
                                         groups[best].lanes.lanes[at[best]].q->model_idx))
                best = g;
        }
        if (best == n_groups)
            break;
        dqueue_t *q = groups[best].lanes.lanes[at[best]++].q; /* as disk_queue_get_idx links */
        q->all_prev = NULL;
        q->all_next = d->all;
        if (d->all != NULL)
            d->all->all_prev = q;
        d->all = q;
    }
}

/*
 * Scans every attached file (invariant 6): the models are dealt to up to cfg.recovery_threads
 * groups, each model to the group with the fewest file bytes so far, largest model first; group
 * 0 runs on this thread, the others on threads of their own. Queues are created under one mutex
 * and log lines written under another; everything else a scan touches belongs to its model.
 * *out_groups (returned to the caller, who finis each group's lanes and frees the array) holds
 * every group's lanes for the targets' floors, even when a scan failed.
 */
static store_status_t rec_scan_all(disk_t *d, rec_file_t *files, size_t n,
                                   rec_group_t **out_groups /* out */, size_t *out_n /* out */,
                                   store_recovery_t *rep)
{
    size_t n_models = d->n_models ? d->n_models : 1;
    unsigned want = rec_threads(d);
    uint64_t *bytes = calloc(n_models, sizeof(*bytes));
    uint32_t *group_of = calloc(n_models, sizeof(*group_of));
    uint64_t *load = calloc(want, sizeof(*load));
    rec_group_t *groups = calloc(want, sizeof(*groups));
    pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
    store_status_t st = STORE_ENOMEM;
    size_t n_groups = 0, with_files = 0;
    if (bytes == NULL || group_of == NULL || load == NULL || groups == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        with_files += bytes[files[i].model_idx] == 0;
        bytes[files[i].model_idx] += files[i].file_size + 1;
    }
    n_groups = with_files < want ? with_files : want;
    if (n_groups == 0)
        n_groups = 1;
    for (size_t dealt = 0; n_groups > 1 && dealt < with_files; dealt++) {
        size_t m = 0, g = 0;
        for (size_t k = 0; k < n_models; k++)
            m = bytes[k] > bytes[m] ? k : m;
        for (size_t k = 1; k < n_groups; k++)
            g = load[k] < load[g] ? k : g;
        group_of[m] = (uint32_t)g;
        load[g] += bytes[m];
        bytes[m] = 0;
    }
    int shared = n_groups > 1;
    for (size_t g = 0; g < n_groups; g++) {
        groups[g] = (rec_group_t){
            .d = d, .files = files, .n_files = n, .group_of = group_of, .group = (uint32_t)g};
        groups[g].lanes.mu = shared ? &queue_mu : NULL;
    }
    rec_parts_run(d, rec_group_run, groups, sizeof(*groups), n_groups);
    st = STORE_OK;
    for (size_t g = 0; g < n_groups; g++) {
        rec_report_add(rep, &groups[g].rep);
        if (groups[g].st != STORE_OK) {
            disk_log(d, STORE_LOG_ERROR, "recovery of segment %016" PRIx64 " failed: %s",
                     files[groups[g].failed].id, store_status_str(groups[g].st));
            if (st == STORE_OK)
                st = groups[g].st;
        }
    }
    if (shared)
        rec_queues_relist(d, groups, n_groups);
    for (size_t i = 0; i < n && st == STORE_OK; i++)
        disk_seg_mark_dirty(d, files[i].seg);
out:
    pthread_mutex_destroy(&queue_mu);
    free(bytes);
    free(group_of);
    free(load);
    if (groups != NULL) {
        *out_groups = groups;
        *out_n = n_groups;
    }
    return st;
}

store_status_t disk_recover(disk_t *d, store_recovery_t *rep)
{
    uint64_t t0 = clock_mono_ns();
    rec_ctx_t c = {.d = d};
    rec_listing_t l = {0};
    rec_journal_t jnl = {0};
    rec_group_t *groups = NULL;
    size_t n_groups = 0;
    index_txn_t *txn = NULL;
    store_status_t st = rec_list_files(d, &l);
    if (st == STORE_OK)
        st = rec_journal_list(d, &jnl);
    if (st != STORE_OK)
        goto out;
    if (l.foreign != 0 || jnl.foreign_version != 0) { /* before anything is changed */
        st = rec_refuse_format(d, &l, &c, &jnl);
        goto out;
    }
    if ((st = rec_open_index(d, &c, l.n + l.n_bad != 0, rep)) != STORE_OK) {
        if (st == STORE_EFORMAT)
            rec_refuse_format(d, &l, &c, &jnl);
        goto out;
    }
    if ((st = disk_jnl_dir_open(d)) != STORE_OK) /* the format is ours: made if missing */
        goto out;
    for (size_t i = 0; i < l.n; i++) {
        rec_file_t *f = &l.files[i];
        char name[SEG_FILE_NAME_SIZE];
        seg_file_name(f->id, name);
        const index_segment_row_t *row = rec_row_find(&c, f->id);
        f->row = rec_row_usable(d, row, &f->header, name, rep);
        f->row_rejected = row != NULL && f->row == NULL;
    }
    for (size_t i = 0; i < l.n_bad && st == STORE_OK; i++)
        st = rec_quarantine(d, l.bad[i], rep);
    if (st != STORE_OK)
        goto out;
    rec_quarantine_note(d, rep);
    if (l.n > 1)
        qsort(l.files, l.n, sizeof(*l.files), rec_file_cmp);
    if ((st = rec_journal_load(d, &jnl, l.files, l.n, rep)) != STORE_OK)
        goto out;
    for (size_t i = 0; i < l.n; i++) {
        if ((st = rec_attach(d, &l.files[i])) != STORE_OK) {
            disk_log(d, STORE_LOG_ERROR, "recovery of segment %016" PRIx64 " failed: %s",
                     l.files[i].id, store_status_str(st));
            goto out;
        }
    }
    if ((st = rec_scan_all(d, l.files, l.n, &groups, &n_groups, rep)) != STORE_OK)
        goto out;
    if (index_begin(d->index, &txn) != INDEX_OK) {
        st = STORE_EINDEX;
        goto out;
    }
    if ((st = rec_missing(d, &c, l.files, l.n, txn, rep)) != STORE_OK)
        goto out;
    /* Lane targets: from the index, never below an item the lane holds. */
    for (size_t i = 0; i < c.n_lanes; i++) {
        uint32_t idx;
        dqueue_t *q = NULL;
        if (disk_model_intern(d, c.lanes[i].model, &idx) == STORE_OK)
            q = map_get(&d->queues,
                        (map_key_t){c.lanes[i].signature, (uint64_t)idx << 32 | c.lanes[i].lane});
        /* A lane with a recorded target but no segment left (all its items completed, the
         * lane not yet released) comes back empty, with its target: the owner decides. */
        if (q == NULL && (st = disk_queue_get(d, c.lanes[i].model, c.lanes[i].signature,
                                              c.lanes[i].lane, &q)) != STORE_OK)
            goto out;
        q->target = c.lanes[i].target;
        q->indexed = 1;
    }
    for (dqueue_t *q = d->all; q != NULL; q = q->all_next)
        disk_queue_trim(q);
    for (size_t g = 0; g < n_groups; g++) {
        const rec_lanes_t *lanes = &groups[g].lanes;
        for (size_t i = 0; i < lanes->n_lanes; i++) {
            dqueue_t *q = lanes->lanes[i].q;
            if (lanes->lanes[i].max_tokens > q->target) {
                q->target = lanes->lanes[i].max_tokens;
                q->target_dirty = 1;
                disk_queue_mark_flush(d, q);
            }
        }
    }
    index_status_t ist = index_commit(txn);
    txn = NULL;
    if (ist != INDEX_OK) {
        st = STORE_EINDEX;
        goto out;
    }
    d->meta_dirty = 1;
    /* Segments with nothing live left are deleted now; the rest are recorded as sealed. */
    for (size_t m = 0; m < d->n_models; m++) {
        dmodel_t *model = &d->models[m];
        for (size_t i = model->n_segs; i-- > 0;) {
            dseg_t *seg = model->segs[i];
            if (seg->deleted == seg->entries) {
                seg->sealed = 1;
                if ((st = disk_seg_delete(d, seg)) != STORE_OK)
                    goto out;
                rep->removed_segments++;
                rep->segments--;
            }
        }
    }
    /* The journal files found take no more records; those no live segment needs are doomed by
     * the flush (disk_journal.c's invariant 4). */
    for (size_t i = 0; i < jnl.n_ids && st == STORE_OK; i++)
        st = disk_jnl_adopt(d, jnl.ids[i]);
    if (st != STORE_OK)
        goto out;
    d->jnl_retire = 1;
    st = disk_flush(d);
    if (st != STORE_OK)
        goto out;
    for (size_t i = 0; i < d->n_jnls; i++)
        rep->journal_retired_files += d->jnls[i].doomed != 0;
    rep->elapsed_ns = clock_mono_ns() - t0;
    if (rep->segments || rep->torn_tails || rep->corrupt_regions || rep->missing_files ||
        rep->quarantined_files)
        disk_log(d, STORE_LOG_INFO,
                 "recovered %" PRIu64 " segments: %" PRIu64 " live entries (%" PRIu64
                 " tokens), %" PRIu64 " tombstoned; %" PRIu64 " torn tails (%" PRIu64
                 " bytes), %" PRIu64 " corrupt regions (%" PRIu64 " bytes), %" PRIu64
                 " missing files, %" PRIu64 " quarantined, in %.3f s",
                 rep->segments, rep->entries_live, rep->tokens_live, rep->entries_tombstoned,
                 rep->torn_tails, rep->torn_bytes, rep->corrupt_regions, rep->corrupt_bytes,
                 rep->missing_files, rep->quarantined_files, (double)rep->elapsed_ns / 1e9);
out:
    index_abort(txn);
    rec_journal_fini(&jnl);
    for (size_t g = 0; g < n_groups; g++)
        rec_lanes_fini(&groups[g].lanes);
    free(groups);
    rec_listing_free(&l);
    rec_ctx_free(&c);
    return st;
}
