/*
 * disk_restate.c - keeps the state journal bounded while items wait. A journal file goes only
 * when no live segment has a record in it or in an older file (disk_journal.c invariant 4), so a
 * sealed segment with one waiting item (a model whose workers are gone, an item its lane holds)
 * kept every file written since its first record, and those fill with every other model's
 * records: 48 bytes per item settled anywhere, for as long as the item waits (a day by default,
 * --queue-max-age-ms; docs/store.md). Restating writes the states of
 * such a segment's entries again, one record each, into the current file; its older records are
 * then redundant and the files holding them go.
 *
 * Invariants:
 *   1. A restated record is the state the store holds for its entry now: TOMB when neither
 *      queued nor pending (every live entry is one or the other), "DLV" + n for a pending or
 *      returned entry delivered n times, none for one never delivered. Memory is never below a
 *      record already written (a commit writes its count before it returns, a tombstone is
 *      written at the flush after it is gathered), and recovery gives an entry the highest of
 *      its records, so the new records make the segment's older ones redundant, in any order and
 *      whatever part of either survives a crash.
 *   2. The records are staged before the flush's journal write, so they are written (and synced
 *      at the power level) before its index commit; only then does the segment's jnl_min move
 *      to the file they landed in, and the older files are doomed by the flush's retire and
 *      unlinked by a later one (disk_journal.c invariant 4). No state is ever recorded only in a
 *      deleted file.
 *   3. A segment is restated only when every entry from its header to its end reads and
 *      verifies, they are as many as it counts, and the completed ones are as many as its
 *      deleted count. One that fails keeps its records where they are and is not tried again:
 *      the journal stays larger, nothing is lost.
 *   4. Restating starts after a journal file filled, when at least DISK_RESTATE_FILES older
 *      files are kept and those it would free hold DISK_RESTATE_GAIN times the records it would
 *      write. It restates the sealed segments with records in a file older than the last
 *      DISK_RESTATE_RECENT before the current one, one a flush (a segment's entries bound a
 *      turn's stall), until none is left. A segment is
 *      restated when its records fit in the current file's free slots (or could never fit one
 *      file): restating never makes the store create a journal file it would not have.
 *
 * Rejected: moving the waiting items into the model's current segment (compaction): an item's
 * place is its lane's order and its ref, which the worker holding its batch names, and a crash
 * between the copy and the old entry's tombstone delivers it twice. One record saying "every
 * entry of segment S not named after this is completed": the journal's order would then matter,
 * where today recovery reads records in any order and a record read twice changes nothing.
 * Restating the unsealed current segment: a flush seals one that holds records in an older file
 * once a journal file fills (disk_seg.c invariant 8), so it is restated one flush later.
 */
#include "store/disk/disk_int.h"

#include "common/clock.h"
#include "common/invariant.h"

#include <inttypes.h>

/* Invariant 4: the id below which segments are to be restated, or 0 when restating is not
 * due: the older files against the records restating their segments would write. */
static uint64_t disk_restate_due(const disk_t *d)
{
    if (!d->jnl_live || d->n_jnls < 1 + DISK_RESTATE_FILES)
        return 0;
    uint64_t below = d->jnls[d->n_jnls - 1 - DISK_RESTATE_RECENT].id, older = 0, freed = 0;
    uint64_t entries = 0;
    for (size_t i = 0; i + 1 < d->n_jnls; i++) {
        older += !d->jnls[i].doomed;
        freed += !d->jnls[i].doomed && d->jnls[i].id < below;
    }
    for (size_t m = 0; m < d->n_models; m++) {
        for (size_t i = 0; i < d->models[m].n_segs; i++) {
            const dseg_t *seg = d->models[m].segs[i];
            if (seg->jnl_min < below && !seg->restate_failed)
                entries += seg->entries;
        }
    }
    uint64_t slots = (d->jnl_size - JNL_HEADER) / JNL_RECORD;
    int due = older >= DISK_RESTATE_FILES && entries > 0 &&
              freed * slots >= (uint64_t)DISK_RESTATE_GAIN * entries;
    return due ? below : 0;
}

/* The next sealed segment with records below restate_below, or NULL when none is left. */
static dseg_t *disk_restate_pick(const disk_t *d)
{
    for (size_t m = 0; m < d->n_models; m++) {
        for (size_t i = 0; i < d->models[m].n_segs; i++) {
            dseg_t *seg = d->models[m].segs[i];
            if (seg->sealed && !seg->restate_failed && seg->jnl_min < d->restate_below)
                return seg;
        }
    }
    return NULL;
}

/* Invariant 1: the state word to record for the entry e at `off` of seg, 0 for none. */
static uint32_t disk_restate_state(const disk_t *d, const dseg_t *seg, uint64_t off,
                                   const seg_entry_t *e)
{
    const dpend_t *p = map_get(&d->pending, disk_ref_key(seg->id, off));
    if (p != NULL)
        return seg_state_delivered(drec_deliveries(&p->rec));
    const drec_t *r = disk_queue_find(d, seg, off, e);
    if (r == NULL)
        return SEG_STATE_TOMB;
    return drec_deliveries(r) != 0 ? seg_state_delivered(drec_deliveries(r)) : 0;
}

/* Stages the records of every entry of seg (invariants 1 and 3). */
static void disk_restate_seg(disk_t *d, dseg_t *seg)
{
    size_t mark = d->n_staged;
    uint64_t n = 0, tombs = 0, off = seg->header_len, t0 = clock_mono_ns();
    int read = 1;
    while (off < seg->size) {
        seg_entry_t e;
        if (!(read = disk_seg_entry_read(d, seg, off, &e)))
            break;
        uint32_t state = disk_restate_state(d, seg, off, &e);
        n++;
        tombs += state == SEG_STATE_TOMB;
        if (state != 0 && disk_jnl_stage(d, seg, off, e.length, state) != STORE_OK) {
            d->n_staged = mark; /* out of memory: tried again at the next flush */
            return;
        }
        off += e.length;
    }
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    /* Damage can stop the walk; counts that differ on entries that all verify are a bug. */
    INVARIANT_CHECK(!read || (n == seg->entries && tombs == seg->deleted));
    if (!read || n != seg->entries || tombs != seg->deleted) {
        d->n_staged = mark;
        seg->restate_failed = 1;
        disk_log(d, STORE_LOG_WARN,
                 "segment %s: its journal records were not restated (%s at offset %" PRIu64
                 ", %" PRIu64 " entries of %" PRIu64 ", %" PRIu64 " completed of %" PRIu64
                 "); the journal files it needs stay until it drains",
                 name, read ? "counts differ" : "an entry does not verify", off, n, seg->entries,
                 tombs, seg->deleted);
        return;
    }
    seg->jnl_min = UINT64_MAX; /* invariant 2: the write sets the file the records land in */
    d->jnl_retire = 1;
    d->restated++;
    disk_log(d, STORE_LOG_INFO,
             "segment %s: %zu journal records restated in %.1f ms (%" PRIu64 " of its %" PRIu64
             " entries wait), so older journal files can go",
             name, d->n_staged - mark, (double)(clock_mono_ns() - t0) / 1e6,
             seg->entries - seg->deleted, seg->entries);
}

void disk_restate_step(disk_t *d)
{
    if (d->jnl_rotated) {
        d->jnl_rotated = 0;
        if (d->restate_below == 0)
            d->restate_below = disk_restate_due(d);
    }
    if (d->restate_below == 0 || !d->jnl_live)
        return;
    dseg_t *seg = disk_restate_pick(d);
    if (seg == NULL) {
        d->restate_below = 0;
        return;
    }
    uint64_t slots = (d->jnl_size - JNL_HEADER) / JNL_RECORD;
    uint64_t room = (d->jnl_size - d->jnl_pos) / JNL_RECORD;
    room = room > d->n_staged ? room - d->n_staged : 0;
    if (seg->entries <= room || seg->entries > slots)
        disk_restate_seg(d, seg);
}
