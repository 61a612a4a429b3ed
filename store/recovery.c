/*
 * recovery.c - rebuilds the disk store at open from the LMDB index and the segment files.
 *
 * Owns the decisions about damage. What it does with each kind, and why:
 *
 *   index missing or unreadable    set aside as index.damaged-<ns>, rebuilt from the segments:
 *                                  they are the source of truth; the index is a cache of them.
 *   file the index does not know   adopted: scanned with no durable boundary (all valid entries
 *                                  kept). It is what a crash between creating a segment and its
 *                                  first index commit leaves, or a deletion cut short.
 *   index row without a file       the row is removed and the loss is reported as an error with
 *                                  the live entries the row claimed: nothing can bring them back.
 *   unreadable segment header      the file is moved to quarantine/ and reported; never deleted.
 *   bytes past the durable boundary  cut (a torn tail): they were never acknowledged.
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
 *
 * Calls only the layer below the backend (disk_int.h: queues, segments, the flush, the log),
 * never the backend's operations, so the dependency runs one way: disk.c -> recovery.c.
 *
 * Rejected: trusting the index's entry counts and skipping the scan. The scan walks entry
 * headers and checks every entry's CRC (so it reads every byte once, through a read-only
 * mapping); it is the only way to honour "tombstones win" after a crash between a tombstone and
 * its count, and to keep a damaged entry from ever being handed out.
 */
#include "store/recovery_int.h"

#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    index_segment_row_t *rows;
    size_t n_rows, cap_rows;
    struct lane_row {
        char *model;
        uint64_t signature;
        uint32_t lane, target;
    } * lanes;
    size_t n_lanes, cap_lanes;
    disk_t *d;
} rec_ctx_t;

/* A segment file found on disk, before it is scanned. */
typedef struct {
    uint64_t id;
    seg_header_t header;
    const index_segment_row_t *row; /* NULL: the index does not know it */
    uint64_t file_size;
    uint64_t ino;
} rec_file_t;

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
    return 0;
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

static int rec_dir_has_segments(disk_t *d)
{
    int fd = dup(d->seg_dir_fd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    int found = 0;
    if (dir == NULL) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    rewinddir(dir);
    for (struct dirent *de; !found && (de = readdir(dir)) != NULL;) {
        uint64_t id;
        found = seg_file_parse(de->d_name, &id);
    }
    closedir(dir);
    return found;
}

/* Opens the index, setting a damaged one aside and starting afresh (the scan rebuilds it). */
static store_status_t rec_open_index(disk_t *d, rec_ctx_t *c, store_recovery_t *rep)
{
    int nosync = d->cfg.durability == STORE_DURABLE_PROCESS;
    struct stat sb;
    int existed = fstatat(d->dir_fd, "index", &sb, 0) == 0;
    char path[4096];
    snprintf(path, sizeof(path), "%s/index", d->dir);
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = 0;
        index_status_t ist = index_open(path, d->cfg.index_map_bytes, nosync, &d->index, &rc);
        if (ist == INDEX_OK) {
            index_visitor_t vis = {rec_on_segment, rec_on_lane, rec_on_current, c, 0};
            ist = index_load(d->index, &vis);
            if (ist == INDEX_OK) {
                d->next_segment_id = vis.next_segment_id;
                if (!existed && rec_dir_has_segments(d)) {
                    rep->index_rebuilt = 1;
                    disk_log(d, STORE_LOG_WARN,
                             "index %s was missing: rebuilding it from the segment files", path);
                }
                return STORE_OK;
            }
            if (ist == INDEX_ENOMEM)
                return STORE_ENOMEM;
            index_close(d->index);
            d->index = NULL;
            rec_ctx_free(c);
            memset(c, 0, sizeof(*c));
            c->d = d;
            disk_corrupt(d, STORE_CORRUPT_BKPT, "index %s holds an unreadable row", path);
        } else {
            disk_log(d, STORE_LOG_ERROR, "cannot open index %s: %s", path,
                     ist == INDEX_ELMDB ? index_lmdb_str(rc) : index_status_str(ist));
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

/* Lists the segment files and reads their headers. */
static store_status_t rec_list_files(disk_t *d, const rec_ctx_t *c, store_recovery_t *rep,
                                     rec_file_t **out, size_t *out_n)
{
    int fd = dup(d->seg_dir_fd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (dir == NULL) {
        if (fd >= 0)
            close(fd);
        return STORE_EIO;
    }
    rewinddir(dir);
    rec_file_t *files = NULL;
    size_t n = 0, cap = 0;
    store_status_t st = STORE_OK;
    char(*bad)[256] = NULL;
    size_t n_bad = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
        uint64_t id;
        if (de->d_name[0] == '.')
            continue;
        if (!seg_file_parse(de->d_name, &id)) {
            disk_log(d, STORE_LOG_WARN, "ignoring %s/segments/%s: not a segment file name", d->dir,
                     de->d_name);
            continue;
        }
        int sfd = openat(d->seg_dir_fd, de->d_name, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        uint8_t hdr[SEG_HEADER_FIXED + SEG_MODEL_MAX + SEG_ALIGN];
        ssize_t r = -1;
        if (sfd >= 0 && fstat(sfd, &sb) == 0)
            r = pread(sfd, hdr, sizeof(hdr), 0);
        if (sfd >= 0)
            close(sfd);
        seg_header_t h;
        if (id >= d->next_segment_id) /* never reuse an id, not even a quarantined file's */
            d->next_segment_id = id + 1;
        if (r < 0 || seg_header_decode(hdr, (size_t)r, &h) != STORE_OK || h.segment_id != id) {
            disk_corrupt(d, STORE_CORRUPT_BKPT, "segment %s: header fails its checks", de->d_name);
            char(*nb)[256] = realloc(bad, (n_bad + 1) * sizeof(*bad));
            if (nb == NULL) {
                st = STORE_ENOMEM;
                break;
            }
            bad = nb;
            snprintf(bad[n_bad++], 256, "%s", de->d_name);
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            rec_file_t *nf = realloc(files, cap * sizeof(*files));
            if (nf == NULL) {
                st = STORE_ENOMEM;
                break;
            }
            files = nf;
        }
        files[n++] =
            (rec_file_t){id, h, rec_row_find(c, id), (uint64_t)sb.st_size, (uint64_t)sb.st_ino};
    }
    closedir(dir);
    for (size_t i = 0; i < n_bad && st == STORE_OK; i++)
        st = rec_quarantine(d, bad[i], rep);
    free(bad);
    if (st != STORE_OK) {
        free(files);
        return st;
    }
    *out = files;
    *out_n = n;
    return STORE_OK;
}

static int rec_file_cmp(const void *a, const void *b)
{
    const rec_file_t *x = a, *y = b;
    int m = strcmp(x->header.model, y->header.model);
    if (m != 0)
        return m;
    if (x->header.signature != y->header.signature)
        return x->header.signature < y->header.signature ? -1 : 1;
    if (x->header.lane != y->header.lane)
        return x->header.lane < y->header.lane ? -1 : 1;
    if (x->header.sequence != y->header.sequence)
        return x->header.sequence < y->header.sequence ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Finds the next valid entry at an aligned offset in [from, end); returns end if none. */
static uint64_t rec_resync(uint32_t seed, const uint8_t *map, uint64_t from, uint64_t end)
{
    seg_entry_t e;
    for (uint64_t off = from; off + SEG_ENTRY_HEADER <= end; off += SEG_ALIGN) {
        if (seg_entry_check(seed, map + off, end - off, &e))
            return off;
    }
    return end;
}

/* Scans one segment file, queues its live entries, repairs what it may. */
static store_status_t rec_scan(disk_t *d, rec_file_t *f, store_recovery_t *rep)
{
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(f->id, name);
    store_status_t st = STORE_OK;
    uint8_t *map = MAP_FAILED;
    dseg_t *seg = NULL;
    int fd = openat(d->seg_dir_fd, name, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return STORE_EIO;
    uint64_t size = f->file_size;
    if (size > 0)
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (size > 0 && map == MAP_FAILED) {
        st = STORE_EIO;
        goto out;
    }
    dqueue_t *q;
    if ((st = disk_queue_get(d, f->header.model, f->header.signature, f->header.lane, &q)) !=
        STORE_OK)
        goto out;
    if ((seg = calloc(1, sizeof(*seg))) == NULL) {
        st = STORE_ENOMEM;
        goto out;
    }
    seg->fd = -1;
    seg->w_head = seg->w_tail = DISK_WRITE_NONE;
    seg->ino = f->ino;
    seg->id = f->id;
    seg->seq = f->header.sequence;
    seg->created_ns = f->header.created_ns;
    seg->header_len = f->header.header_len;
    seg->sealed = 1;

    /* The durable boundary: what the index recorded; unknown for an adopted file. */
    int bounded = f->row != NULL;
    uint64_t durable = bounded ? f->row->readable : size;
    uint64_t missing = 0; /* bytes the index says are durable but the file no longer has */
    if (bounded && durable > size) {
        disk_corrupt(d, STORE_CORRUPT_BKPT,
                     "segment %s is %" PRIu64 " bytes, shorter than its durable boundary %" PRIu64,
                     name, size, durable);
        missing = durable - size;
        durable = size;
    }
    if (durable < seg->header_len)
        durable = seg->header_len;
    uint64_t keep = durable; /* the file is cut back to here */
    uint64_t tombs = 0;
    seg_entry_t e;
    uint32_t seed = seg_crc_seed(f->id);
    /* Room for every live entry the index knows of, so the queue array is sized once. */
    if (bounded && f->row->entries > f->row->deleted &&
        (st = disk_queue_reserve(q, f->row->entries - f->row->deleted)) != STORE_OK)
        goto out;
    for (uint64_t off = seg->header_len; off < durable;) {
        if (seg_entry_check(seed, map + off, durable - off, &e)) {
            seg->entries++;
            seg->tokens += e.tokens;
            int deliveries = seg_state_deliveries(e.state);
            if (e.state == SEG_STATE_TOMB) {
                tombs++;
            } else {
                if (deliveries < 0) {
                    rep->damaged_state_words++;
                    disk_corrupt(d, STORE_CORRUPT_BKPT,
                                 "segment %s offset %" PRIu64
                                 ": state word damaged, entry intact: queued again",
                                 name, off);
                    deliveries = 0;
                }
                drec_t rec = {seg,      e.arrival_ns, (uint32_t)off,
                              e.length, e.tokens,     (uint32_t)deliveries};
                if ((st = disk_queue_push(q, &rec)) != STORE_OK)
                    goto out;
                rep->entries_live++;
                rep->tokens_live += e.tokens;
            }
            off += e.length;
            continue;
        }
        uint64_t next = rec_resync(seed, map, off + SEG_ALIGN, durable);
        if (next == durable && !bounded) {
            rep->torn_tails++;
            rep->torn_bytes += size - off;
            disk_log(d, STORE_LOG_WARN,
                     "segment %s: torn tail of %" PRIu64 " bytes at offset %" PRIu64 " cut", name,
                     size - off, off);
            keep = off;
            break;
        }
        /* A damaged stretch running into missing bytes is one region with them. */
        if (next == durable && missing != 0) {
            rep->corrupt_bytes += missing;
            missing = 0;
        }
        rep->corrupt_regions++;
        rep->corrupt_bytes += next - off;
        disk_corrupt(d, STORE_CORRUPT_BKPT,
                     "segment %s: %" PRIu64 " damaged bytes at offset %" PRIu64 " skipped", name,
                     next - off, off);
        off = next;
    }
    if (missing != 0) {
        rep->corrupt_regions++;
        rep->corrupt_bytes += missing;
    }
    if (bounded && size > durable) {
        rep->torn_tails++;
        rep->torn_bytes += size - durable;
        disk_log(d, STORE_LOG_WARN,
                 "segment %s: %" PRIu64 " bytes past the durable boundary %" PRIu64
                 " (never acknowledged) cut",
                 name, size - durable, durable);
    }
    if (keep < size) {
        if (ftruncate(fd, (off_t)keep) != 0 || store_fault_fsync(fd, 1) != 0) {
            st = STORE_EIO;
            goto out;
        }
    }
    seg->size = seg->readable = seg->reserved = keep;
    seg->flushed_entries = seg->entries;
    seg->flushed_tokens = seg->tokens;
    seg->deleted = tombs;
    rep->entries_tombstoned += tombs;
    if (bounded && f->row->deleted != tombs) {
        rep->deleted_count_repairs++;
        disk_log(d, STORE_LOG_INFO,
                 "segment %s: deleted count %" PRIu64 " repaired to %" PRIu64 " from tombstones",
                 name, f->row->deleted, tombs);
    }
    if (!bounded) {
        rep->adopted_files++;
        disk_log(d, STORE_LOG_INFO, "segment %s was not in the index: adopted", name);
    }
    if (map_reserve(&d->deleted, 1) != MAP_OK) { /* room for its deletion (disk_seg_delete) */
        st = STORE_ENOMEM;
        goto out;
    }
    if ((st = disk_seg_attach(d, q, seg)) != STORE_OK)
        goto out;
    disk_seg_mark_dirty(d, seg);
    rep->segments++;
    seg = NULL;
out:
    if (map != MAP_FAILED)
        munmap(map, size);
    close(fd);
    free(seg);
    return st;
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
        if (files[i].row != NULL)
            seen[files[i].row - c->rows] = 1;
    }
    store_status_t st = STORE_OK;
    for (size_t i = 0; i < c->n_rows && st == STORE_OK; i++) {
        const index_segment_row_t *row = &c->rows[i];
        if (seen[i])
            continue;
        uint64_t live = row->entries > row->deleted ? row->entries - row->deleted : 0;
        rep->missing_files++;
        rep->missing_live_entries += live;
        disk_log(d, live ? STORE_LOG_ERROR : STORE_LOG_INFO,
                 "segment %016" PRIx64 " (model %s, lane %" PRIu32 ") is in the index but its "
                 "file is gone; %" PRIu64 " live entries in it are lost",
                 row->segment_id, row->model, row->lane, live);
        if (index_segment_del(txn, row->segment_id) != INDEX_OK)
            st = STORE_EINDEX;
    }
    free(seen);
    return st;
}

store_status_t disk_recover(disk_t *d, store_recovery_t *rep)
{
    uint64_t t0 = clock_mono_ns();
    rec_ctx_t c = {.d = d};
    rec_file_t *files = NULL;
    size_t n_files = 0;
    index_txn_t *txn = NULL;
    store_status_t st = rec_open_index(d, &c, rep);
    if (st != STORE_OK)
        goto out;
    if ((st = rec_list_files(d, &c, rep, &files, &n_files)) != STORE_OK)
        goto out;
    if (n_files > 1)
        qsort(files, n_files, sizeof(*files), rec_file_cmp);
    for (size_t i = 0; i < n_files; i++) {
        if ((st = rec_scan(d, &files[i], rep)) != STORE_OK) {
            disk_log(d, STORE_LOG_ERROR, "recovery of segment %016" PRIx64 " failed: %s",
                     files[i].id, store_status_str(st));
            goto out;
        }
    }
    if (index_begin(d->index, &txn) != INDEX_OK) {
        st = STORE_EINDEX;
        goto out;
    }
    if ((st = rec_missing(d, &c, files, n_files, txn, rep)) != STORE_OK)
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
    }
    for (dqueue_t *q = d->all; q != NULL; q = q->all_next) {
        disk_queue_trim(q);
        for (size_t i = 0; i < q->len; i++) {
            if (q->recs[q->head + i].tokens > q->target) {
                q->target = q->recs[q->head + i].tokens;
                q->target_dirty = 1;
                d->rows_dirty = 1;
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
    for (dqueue_t *q = d->all; q != NULL; q = q->all_next) {
        for (size_t i = q->n_segs; i-- > 0;) {
            dseg_t *seg = q->segs[i];
            if (seg->deleted == seg->entries) {
                seg->sealed = 1;
                if ((st = disk_seg_delete(d, seg)) != STORE_OK)
                    goto out;
                rep->removed_segments++;
                rep->segments--;
            }
        }
    }
    st = disk_flush(d);
    if (st != STORE_OK)
        goto out;
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
    free(files);
    rec_ctx_free(&c);
    return st;
}
