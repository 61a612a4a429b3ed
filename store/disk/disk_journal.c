/*
 * disk_journal.c - the state journal: every delivery count (store_commit) and tombstone
 * (store_tombstone, at the flush) is a 24-byte record appended to the store's current journal
 * file (format: journal_int.h), not a store into its entry, which sits anywhere in its model's
 * log. At the power level a flush then writes back the journal's last page or two
 * beside the log's new tail, not a page of the log per settled item.
 *
 * Owns <data dir>/journal/ and every djnl_t (disk_t.jnls), the current file's mapping and the
 * staged records.
 *
 * Invariants:
 *   1. A record is stored through the current file's shared mapping (or written with pwrite
 *      where there is none) before the call that staged it returns to the store's caller: a
 *      delivery count before store_commit returns, a tombstone before the flush's index commit.
 *      The page cache holds it from then on, so it survives a crash of the process; at the power
 *      level the flush syncs every file with records not yet synced in the same batch as the
 *      segments, before its index commit.
 *   2. A journal file is allocated whole when created (fallocate, zeroed), its header written,
 *      before any record goes in: a record never extends the file, and a full disk fails the
 *      creation, not a record.
 *   3. Journal ids are drawn from next_segment_id: never reused, never a segment's id, so a
 *      record can verify only in the file that wrote it.
 *   4. A file is deleted only when no live segment has records in it or in an older file (each
 *      segment remembers the oldest file holding one of its records, dseg_t.jnl_min), and only
 *      at a flush after the one that doomed it, once the segments directory is synced: a
 *      segment whose deletion a power loss undid finds its tombstones again.
 *   5. A fault armed on writes fires per record; the records before
 *      it are stored, the rest are not, and the store fails.
 *   6. A write that needs the pwrite buffer (no mapping now, or a new file that may get none)
 *      has it for every staged record before it stores any: refused for memory, it stores none,
 *      so a commit that returns ENOMEM counted no delivery (the store stays usable).
 *   7. A start continues the newest file an earlier run left, from the slot after its last
 *      written one, while it has free slots; a new file is created only when it is full, gone,
 *      doomed or damaged. Recovery reads every slot of every file and a record's rank, not its
 *      place, decides (recovery_journal.c invariant 12), so a record there counts as it would
 *      in a new file. Starts cost no journal space of their own: a store that filled its disk
 *      itself starts again on it, as often as it is restarted, and settles what it holds until
 *      the records fill that file; then a new one needs room, or the store fails.
 *
 * Rejected: a journal per model (a flush touching both models would sync two journals instead of
 * one; a model's long-waiting item holds the store's journal files either way, as it holds its
 * segment: 24 bytes per state change against the entry's own bytes). State words kept in place
 * and the pages written back (what the power level measured: a dirty page per settled item, and
 * the mapping's write-protect faults). A side file of state words per segment (one word per
 * entry): a flush would still dirty one page of it per few dozen settled items spread over the
 * segment, and a segment's files would double.
 */
#define _GNU_SOURCE
#include "store/disk/disk_int.h"

#include "common/clock.h"
#include "common/invariant.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

store_status_t disk_jnl_dir_open(disk_t *d)
{
    int made = mkdirat(d->dir_fd, "journal", 0755) == 0;
    if ((!made && errno != EEXIST) ||
        (d->jnl_dir_fd = openat(d->dir_fd, "journal", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        disk_log(d, STORE_LOG_ERROR, "cannot open the journal directory %s/journal: %s", d->dir,
                 strerror(errno));
        return STORE_EIO;
    }
    /* Power level: the directory's own name is made durable before any file in it is. */
    if (made && d->cfg.durability == STORE_DURABLE_POWER && store_fault_fsync(d->dir_fd, 0) != 0)
        return disk_fail(d, "fsync of the data directory", errno);
    disk_watch_add(d, "journal");
    return STORE_OK;
}

static store_status_t disk_jnl_push(disk_t *d, const djnl_t *j)
{
    if (d->n_jnls == d->cap_jnls) {
        size_t cap = d->cap_jnls ? d->cap_jnls * 2 : 8;
        djnl_t *a = realloc(d->jnls, cap * sizeof(*a));
        if (a == NULL)
            return STORE_ENOMEM;
        d->jnls = a;
        d->cap_jnls = cap;
    }
    size_t at = d->n_jnls;
    while (at > 0 && d->jnls[at - 1].id > j->id)
        at--;
    memmove(d->jnls + at + 1, d->jnls + at, (d->n_jnls - at) * sizeof(*d->jnls));
    d->jnls[at] = *j;
    d->n_jnls++;
    return STORE_OK;
}

store_status_t disk_jnl_adopt(disk_t *d, uint64_t id)
{
    djnl_t j = {.id = id, .fd = -1};
    char name[JNL_FILE_NAME_SIZE];
    struct stat sb;
    jnl_file_name(id, name);
    if (fstatat(d->jnl_dir_fd, name, &sb, 0) == 0)
        j.bytes = (uint64_t)sb.st_size;
    return disk_jnl_push(d, &j);
}

djnl_t *disk_jnl_find(disk_t *d, uint64_t id)
{
    size_t lo = 0, hi = d->n_jnls;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->jnls[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->n_jnls && d->jnls[lo].id == id ? &d->jnls[lo] : NULL;
}

static djnl_t *disk_jnl_cur(disk_t *d)
{
    return d->jnl_live ? &d->jnls[d->n_jnls - 1] : NULL;
}

/* The current file takes no more records: unmapped; its descriptor closed unless a sync is due. */
static void disk_jnl_seal(disk_t *d)
{
    djnl_t *cur = disk_jnl_cur(d);
    if (cur == NULL)
        return;
    if (d->jnl_map != NULL)
        munmap(d->jnl_map, d->jnl_size); /* dirty pages stay in the page cache for the sync */
    d->jnl_map = NULL;
    d->jnl_live = 0;
    d->jnl_retire = 1;
    if (cur->fd >= 0 && (!cur->needs_sync || d->cfg.durability != STORE_DURABLE_POWER)) {
        close(cur->fd);
        cur->fd = -1;
        cur->needs_sync = 0;
    }
}

/* Zeroes [from, size) with pwrite: the fallback where fallocate is not supported. */
static int disk_jnl_zero(int fd, uint64_t from, uint64_t size)
{
    static const uint8_t zeros[65536];
    while (from < size) {
        size_t n = size - from < sizeof(zeros) ? (size_t)(size - from) : sizeof(zeros);
        ssize_t w = pwrite(fd, zeros, n, (off_t)from);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        from += (uint64_t)w;
    }
    return 0;
}

/* The smallest journal file tried when the disk cannot hold a larger one. */
#define DISK_JNL_MIN_BYTES (4u << 10)

/* The bytes of a journal file of at most `want`: a header and whole records. */
static uint64_t disk_jnl_fit(uint64_t want)
{
    if (want < JNL_HEADER + JNL_RECORD)
        want = JNL_HEADER + JNL_RECORD;
    return JNL_HEADER + (want - JNL_HEADER) / JNL_RECORD * JNL_RECORD;
}

/* Invariant 7: the newest file as the current one again, at its first slot after the last
 * written one; 0 (nothing changed) when it is gone, doomed, damaged or full. */
static int disk_jnl_continue(disk_t *d)
{
    djnl_t *j = d->n_jnls > 0 ? &d->jnls[d->n_jnls - 1] : NULL;
    if (j == NULL || j->doomed || j->gone || d->jnl_live)
        return 0;
    char name[JNL_FILE_NAME_SIZE];
    jnl_file_name(j->id, name);
    int fd = openat(d->jnl_dir_fd, name, O_RDWR | O_CLOEXEC | O_NOATIME);
    struct stat sb;
    uint64_t size = 0;
    if (fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size >= JNL_HEADER + JNL_RECORD)
        size = disk_jnl_fit((uint64_t)sb.st_size);
    uint8_t *map = size > 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    if (map == MAP_FAILED)
        map = NULL;
    jnl_header_t h;
    uint64_t pos = size;
    if (map != NULL && jnl_header_decode(map, JNL_HEADER, &h) == STORE_OK &&
        h.journal_id == j->id) {
        while (pos > JNL_HEADER && jnl_record_blank(map + pos - JNL_RECORD))
            pos -= JNL_RECORD;
    }
    /* The free slots' space, as a new file's (invariant 2): a sparse or copied file refuses
     * here, not at a record stored through the mapping. Without fallocate: records by pwrite,
     * whose ENOSPC fails the store. */
    int alloc = map != NULL && pos + JNL_RECORD <= size
                    ? (fallocate(fd, 0, (off_t)pos, (off_t)(size - pos)) == 0 ? 0 : errno)
                    : ENOSPC;
    if (alloc != 0 && alloc != EOPNOTSUPP && alloc != ENOSYS) {
        if (map != NULL)
            munmap(map, size);
        if (fd >= 0)
            close(fd);
        return 0;
    }
    if (j->fd >= 0)
        close(j->fd);
    j->fd = fd;
    j->ino = (uint64_t)sb.st_ino;
    j->bytes = (uint64_t)sb.st_size;
    d->jnl_live = 1;
    d->jnl_size = size;
    d->jnl_pos = pos;
    d->jnl_seed = jnl_crc_seed(j->id);
    d->jnl_map = map;
    d->jnl_dir_dirty++; /* power level: its name is synced again, as a new file's would be */
    if (d->cfg.io == STORE_IO_PLAIN || alloc != 0) { /* as a new file: records go by pwrite */
        munmap(map, size);
        d->jnl_map = NULL;
    }
    disk_log(d, STORE_LOG_INFO,
             "journal file %s continued (%" PRIu64 " of its %" PRIu64 " slots free)", name,
             (size - pos) / JNL_RECORD, (size - JNL_HEADER) / JNL_RECORD);
    return 1;
}

/* Invariant 2: a new current file, allocated whole, its header written, mapped. A disk too full
 * for the configured size gets a file half as large, down to DISK_JNL_MIN_BYTES: a full disk
 * refuses appends (their room is reserved first), and the items it holds must still settle.
 * At a start, the newest file an earlier run left continues instead while it has room
 * (invariant 7). */
static store_status_t disk_jnl_create(disk_t *d)
{
    if (!d->jnl_live && disk_jnl_continue(d))
        return STORE_OK;
    if (d->jnl_live) { /* disk_seg.c invariant 8; disk_restate.c invariant 4 */
        d->jnl_pin_below = d->jnls[d->n_jnls - 1].id;
        d->jnl_rotated = 1;
    }
    disk_jnl_seal(d);
    uint64_t size =
        disk_jnl_fit(d->cfg.journal_max_bytes ? d->cfg.journal_max_bytes : DISK_JNL_DEFAULT_BYTES);
    djnl_t j = {.fd = -1};
    store_status_t st = disk_seg_id_draw(d, &j.id);
    if (st != STORE_OK)
        return st;
    char name[JNL_FILE_NAME_SIZE];
    jnl_file_name(j.id, name);
    int fd = openat(d->jnl_dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOATIME, 0644);
    if (fd < 0)
        return disk_fail(d, "creating a journal file", errno);
    int err = 0;
    for (;;) {
        err = fallocate(fd, 0, 0, (off_t)size) == 0 ? 0 : errno;
        if (err == EOPNOTSUPP || err == ENOSYS)
            err = disk_jnl_zero(fd, 0, size);
        if ((err != ENOSPC && err != EDQUOT) || size <= DISK_JNL_MIN_BYTES)
            break;
        size = disk_jnl_fit(size / 2 > DISK_JNL_MIN_BYTES ? size / 2 : DISK_JNL_MIN_BYTES);
        if (ftruncate(fd, 0) != 0) {
            err = errno;
            break;
        }
    }
    uint8_t hdr[JNL_HEADER];
    jnl_header_encode(&(jnl_header_t){j.id, clock_wall_ns()}, hdr);
    if (err == 0 && store_fault_pwrite(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
        err = errno ? errno : EIO;
    struct stat sb;
    if (err == 0 && fstat(fd, &sb) != 0)
        err = errno;
    if (err == 0) {
        j.ino = (uint64_t)sb.st_ino;
        j.fd = fd;
        j.bytes = size;
        if (disk_jnl_push(d, &j) != STORE_OK)
            err = ENOMEM;
    }
    if (err != 0) {
        close(fd);
        unlinkat(d->jnl_dir_fd, name, 0);
        return disk_fail(d, "creating a journal file", err);
    }
    d->next_segment_id++;
    d->meta_dirty = 1;
    d->jnl_dir_dirty++;
    d->jnl_live = 1;
    d->jnl_size = size;
    d->jnl_pos = JNL_HEADER;
    d->jnl_seed = jnl_crc_seed(j.id);
    if (d->cfg.io != STORE_IO_PLAIN) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        d->jnl_map = p == MAP_FAILED ? NULL : p; /* without one: pwrite */
    }
    return STORE_OK;
}

store_status_t disk_jnl_stage(disk_t *d, dseg_t *seg, uint64_t off, uint32_t len, uint32_t state)
{
    if (d->n_staged == d->cap_staged) {
        size_t cap = d->cap_staged ? d->cap_staged * 2 : 256;
        dstaged_t *a = realloc(d->staged, cap * sizeof(*a));
        if (a == NULL)
            return STORE_ENOMEM;
        d->staged = a;
        d->cap_staged = cap;
    }
    d->staged[d->n_staged++] = (dstaged_t){seg, {seg->id, (uint32_t)off, len, state}};
    return STORE_OK;
}

/* The pwrite path: the encoded records in jnl_buf, n of them, go at the current file's `from`. */
static int disk_jnl_pwrite(disk_t *d, uint64_t from, size_t n)
{
    struct iovec v = {d->jnl_buf, n * JNL_RECORD}; /* faults: per record, by the caller */
    return n == 0 ? 0 : disk_pwritev_all(disk_jnl_cur(d)->fd, &v, 1, from);
}

/* Invariant 6: room in jnl_buf for every staged record, when a write may need it. */
static store_status_t disk_jnl_buf_reserve(disk_t *d)
{
    size_t want = d->n_staged * JNL_RECORD;
    int rotates = !d->jnl_live || d->jnl_pos + want > d->jnl_size;
    if ((d->jnl_map != NULL && !rotates) || want <= d->cap_jnl_buf)
        return STORE_OK;
    uint8_t *b = store_fault_hit(STORE_FAULT_ALLOC) ? NULL : realloc(d->jnl_buf, want);
    if (b == NULL)
        return STORE_ENOMEM;
    d->jnl_buf = b;
    d->cap_jnl_buf = want;
    return STORE_OK;
}

store_status_t disk_jnl_write(disk_t *d, const char *what)
{
    store_status_t st = disk_jnl_buf_reserve(d);
    size_t i = 0;
    while (i < d->n_staged && st == STORE_OK) {
        if (!d->jnl_live || d->jnl_pos + JNL_RECORD > d->jnl_size) {
            if ((st = disk_jnl_create(d)) != STORE_OK)
                break;
        }
        djnl_t *cur = disk_jnl_cur(d);
        size_t room = (size_t)((d->jnl_size - d->jnl_pos) / JNL_RECORD);
        size_t n = d->n_staged - i < room ? d->n_staged - i : room;
        INVARIANT_CHECK(d->jnl_map != NULL || n * JNL_RECORD <= d->cap_jnl_buf); /* invariant 6 */
        size_t done = 0;
        int fault = 0;
        for (; done < n; done++) {
            if (store_fault_hit(STORE_FAULT_WRITE)) { /* invariant 5 */
                fault = 1;
                break;
            }
            const dstaged_t *s = &d->staged[i + done];
            uint8_t *dst = d->jnl_map != NULL ? d->jnl_map + d->jnl_pos + done * JNL_RECORD
                                              : d->jnl_buf + done * JNL_RECORD;
            jnl_record_encode(d->jnl_seed, &s->rec, dst);
            if (s->seg->jnl_min > cur->id)
                s->seg->jnl_min = cur->id;
        }
        int err = d->jnl_map == NULL && done > 0 ? disk_jnl_pwrite(d, d->jnl_pos, done) : 0;
        d->jnl_pos += done * JNL_RECORD;
        cur->needs_sync |= done > 0;
        cur->written |= done > 0;
        if (err != 0 || fault)
            st = disk_fail(d, what, err ? err : EIO);
        i += done;
    }
    d->n_staged = 0;
    return st;
}

size_t disk_jnl_sync_max(const disk_t *d)
{
    return d->n_jnls;
}

store_status_t disk_jnl_sync_ops(disk_t *d, disk_io_op_t *ops, size_t *out_n)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_jnls; i++) {
        djnl_t *j = &d->jnls[i];
        if (!j->needs_sync || j->fd < 0)
            continue;
        if (store_fault_hit(STORE_FAULT_FSYNC))
            return disk_fail(d, "fdatasync of a journal file", EIO);
        ops[n++] = (disk_io_op_t){.kind = DISK_IO_SYNC, .fd = j->fd};
    }
    *out_n = n;
    return STORE_OK;
}

store_status_t disk_jnl_synced(disk_t *d)
{
    for (size_t i = 0; i < d->n_jnls; i++) {
        djnl_t *j = &d->jnls[i];
        j->needs_sync = 0;
        if (j->fd >= 0 && !(d->jnl_live && i == d->n_jnls - 1)) {
            close(j->fd);
            j->fd = -1;
        }
    }
    if (d->jnl_dir_dirty != 0 && d->cfg.durability == STORE_DURABLE_POWER) {
        if (store_fault_fsync(d->jnl_dir_fd, 0) != 0)
            return disk_fail(d, "fsync of the journal directory", errno);
    }
    d->jnl_dir_dirty = 0;
    return STORE_OK;
}

void disk_jnl_retire(disk_t *d)
{
    if (!d->jnl_retire)
        return;
    d->jnl_retire = 0;
    uint64_t oldest = UINT64_MAX;
    for (size_t m = 0; m < d->n_models; m++) {
        for (size_t i = 0; i < d->models[m].n_segs; i++) {
            if (d->models[m].segs[i]->jnl_min < oldest)
                oldest = d->models[m].segs[i]->jnl_min;
        }
    }
    for (size_t i = 0; i < d->n_jnls; i++) {
        djnl_t *j = &d->jnls[i];
        if (j->id >= oldest || (d->jnl_live && i == d->n_jnls - 1) || j->needs_sync)
            continue;
        if (!j->doomed) {
            j->doomed = 1;
            d->jnl_doomed = 1;
        }
    }
}

store_status_t disk_jnl_unlink_doomed(disk_t *d)
{
    if (!d->jnl_doomed)
        return STORE_OK;
    d->jnl_doomed = 0;
    size_t kept = 0;
    store_status_t st = STORE_OK;
    for (size_t i = 0; i < d->n_jnls; i++) {
        djnl_t *j = &d->jnls[i];
        if (!j->doomed) {
            d->jnls[kept++] = *j;
            continue;
        }
        if (j->fd >= 0)
            close(j->fd);
        char name[JNL_FILE_NAME_SIZE];
        jnl_file_name(j->id, name);
        if (st == STORE_OK && store_fault_unlinkat(d->jnl_dir_fd, name) != 0 && errno != ENOENT)
            st = disk_fail(d, "deleting a journal file no segment needs", errno);
        d->jnl_dir_dirty++;
    }
    d->n_jnls = kept;
    return st;
}

void disk_jnl_close(disk_t *d)
{
    if (d->jnl_map != NULL)
        munmap(d->jnl_map, d->jnl_size);
    d->jnl_map = NULL;
    for (size_t i = 0; i < d->n_jnls; i++) {
        if (d->jnls[i].fd >= 0)
            close(d->jnls[i].fd);
    }
    free(d->jnls);
    free(d->staged);
    free(d->jnl_buf);
    d->jnls = NULL;
    d->staged = NULL;
    d->jnl_buf = NULL;
    d->n_jnls = d->n_staged = 0;
    d->jnl_live = 0;
    if (d->jnl_dir_fd >= 0)
        close(d->jnl_dir_fd);
    d->jnl_dir_fd = -1;
}
