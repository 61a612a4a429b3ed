/*
 * disk_restate.c - keeps the state journal bounded while items wait. A journal file goes only
 * when no live segment has a record in it or in an older file (disk_journal.c invariant 4), so a
 * sealed segment with one waiting item (a model whose workers are gone, an item its lane holds)
 * kept every file written since its first record, and those fill with every other model's
 * records: 48 bytes per item settled anywhere, for as long as the item waits (a day by default,
 * --queue-max-age-ms; docs/store.md). Restating writes the states of such a segment's entries
 * again, one record each, into the current file; its older records are then redundant and the
 * files holding them go.
 *
 * Invariants:
 *   1. A restated record is the state the store holds for its entry now: TOMB when neither
 *      queued nor pending (every live entry is one or the other), "DLV" + n for a pending or
 *      returned entry delivered n times, none for one never delivered. Memory is never below a
 *      record already written (a commit writes its count before it returns, a tombstone is
 *      written at the flush after it is gathered), except by one for an entry returned unseen
 *      (store_return_unseen: its last commit reached no worker), and recovery gives an entry the
 *      highest of its records, so the new records make the segment's older ones redundant, in
 *      any order and whatever part of either survives a crash: a count comes back at its true
 *      value or one above, never below.
 *   2. The segment's jnl_min moves (to the file that was current when its records were staged,
 *      at or below every file they land in) only once the flush's journal write and, at the
 *      power level, its sync succeeded (disk_restate_commit); a write refused memory, which
 *      leaves the store usable, drops the records and changes nothing (disk_restate_abort). The
 *      older files are then doomed by the flush's retire and unlinked by a later flush
 *      (disk_journal.c invariant 4): no state is ever recorded only in a deleted file.
 *   3. A segment is restated only when all its entries are readable (none appended since the
 *      last flush), every one reads and verifies, they are as many as it counts, and the
 *      completed ones as many as its deleted count. One with an entry that does not verify or
 *      counts that differ keeps its records where they are and is not tried again (the journal
 *      stays larger, nothing is lost); a read that failed (a descriptor, memory) ends the round
 *      and the next filled journal file starts another.
 *   4. Restating starts after a journal file filled, when at least DISK_RESTATE_FILES older
 *      files are kept and those it can free hold DISK_RESTATE_GAIN times the records it would
 *      write. It restates the sealed segments with records in a file older than both the last
 *      DISK_RESTATE_RECENT before the current one and every segment that cannot be restated,
 *      one a flush (a segment's entries bound a turn's stall), until none is left. Its records
 *      may fill the current file and go on in a new one while the current file has the
 *      configured size; once a disk too full for one made files shrink, a segment is restated
 *      only into the current file's free slots, so restating asks such a disk for no file.
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
#include <stdlib.h>

/* Invariant 4: the id below which segments are to be restated, or 0 when restating is not
 * due: the files it can free against the records restating their segments would write. */
static uint64_t disk_restate_due(const disk_t *d)
{
    if (!d->jnl_live || d->n_jnls < 1 + DISK_RESTATE_FILES)
        return 0;
    uint64_t below = d->jnls[d->n_jnls - 1 - DISK_RESTATE_RECENT].id, older = 0, freed = 0;
    uint64_t entries = 0;
    for (size_t m = 0; m < d->n_models; m++) { /* a segment not restated holds its files */
        for (size_t i = 0; i < d->models[m].n_segs; i++) {
            const dseg_t *seg = d->models[m].segs[i];
            if (seg->restate_failed && seg->jnl_min < below)
                below = seg->jnl_min;
        }
    }
    for (size_t i = 0; i + 1 < d->n_jnls; i++) {
        older += !d->jnls[i].doomed;
        freed += !d->jnls[i].doomed && d->jnls[i].id < below;
    }
    for (size_t m = 0; m < d->n_models; m++) {
        for (size_t i = 0; i < d->models[m].n_segs; i++) {
            const dseg_t *seg = d->models[m].segs[i];
            if (seg->jnl_min < below)
                entries += seg->entries;
        }
    }
    uint64_t slots = (d->jnl_size - JNL_HEADER) / JNL_RECORD;
    int due = older >= DISK_RESTATE_FILES && entries > 0 &&
              freed * slots >= (uint64_t)DISK_RESTATE_GAIN * entries;
    return due ? below : 0;
}

/* Invariant 4: the first segment to restate that fits the journal now into *out (NULL: wait);
 * 0 when no segment is left to restate. */
static int disk_restate_pick(const disk_t *d, dseg_t **out /* out */)
{
    uint64_t full = d->cfg.journal_max_bytes ? d->cfg.journal_max_bytes : DISK_JNL_DEFAULT_BYTES;
    uint64_t room = (d->jnl_size - d->jnl_pos) / JNL_RECORD;
    room = room > d->n_staged ? room - d->n_staged : 0;
    int left = 0;
    *out = NULL;
    for (size_t m = 0; m < d->n_models; m++) {
        for (size_t i = 0; i < d->models[m].n_segs; i++) {
            dseg_t *seg = d->models[m].segs[i];
            if (!seg->sealed || seg->restate_failed || seg->jnl_min >= d->restate_below)
                continue;
            left = 1;
            if (seg->readable == seg->size && (seg->entries <= room || d->jnl_size >= full)) {
                *out = seg;
                return 1;
            }
        }
    }
    return left;
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

/* Stages the records of every entry of seg (invariants 1 and 3); 1 when they are staged. */
static int disk_restate_stage(disk_t *d, dseg_t *seg)
{
    size_t mark = d->n_staged;
    uint64_t n = 0, tombs = 0, off = seg->header_len;
    int read = 1;
    while (off < seg->size) {
        seg_entry_t e;
        if ((read = disk_seg_entry_read(d, seg, off, &e)) != 1)
            break;
        uint32_t state = disk_restate_state(d, seg, off, &e);
        n++;
        tombs += state == SEG_STATE_TOMB;
        if (state != 0 && disk_jnl_stage(d, seg, off, e.length, state) != STORE_OK) {
            d->n_staged = mark; /* out of memory: tried again at the next flush */
            return 0;
        }
        off += e.length;
    }
    if (read == 1 && n == seg->entries && tombs == seg->deleted)
        return 1;
    d->n_staged = mark;
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    if (read < 0) { /* invariant 3: a failed read ends the round, the segment is tried again */
        d->restate_below = 0;
        disk_log(d, STORE_LOG_WARN,
                 "segment %s: its journal records were not restated (offset %" PRIu64
                 " could not be read); tried again once another journal file fills",
                 name, off);
        return 0;
    }
    /* Damage can stop the walk (read 0); counts that differ on entries that all verify are a
     * bug. */
    INVARIANT_CHECK(read == 0);
    seg->restate_failed = 1;
    disk_log(d, STORE_LOG_WARN,
             "segment %s: its journal records were not restated (%s at offset %" PRIu64 ", %" PRIu64
             " entries of %" PRIu64 ", %" PRIu64 " completed of %" PRIu64
             "); the journal files it needs stay until it drains",
             name, read == 0 ? "an entry does not verify" : "counts differ", off, n, seg->entries,
             tombs, seg->deleted);
    return 0;
}

void disk_restate_begin(disk_t *d)
{
    d->restating = NULL;
    if (d->jnl_rotated) {
        d->jnl_rotated = 0;
        if (d->restate_below == 0)
            d->restate_below = disk_restate_due(d);
    }
    if (d->restate_below == 0 || !d->jnl_live)
        return;
    dseg_t *seg;
    if (!disk_restate_pick(d, &seg)) {
        d->restate_below = 0;
        return;
    }
    size_t mark = d->n_staged;
    uint64_t t0 = clock_mono_ns();
    if (seg == NULL || !disk_restate_stage(d, seg))
        return;
    d->restating = seg;
    d->restate_from = d->jnls[d->n_jnls - 1].id;
    d->restate_records = d->n_staged - mark;
    d->restate_ns = clock_mono_ns() - t0;
}

void disk_restate_commit(disk_t *d)
{
    dseg_t *seg = d->restating;
    if (seg == NULL)
        return;
    d->restating = NULL;
    seg->jnl_min = d->restate_from; /* invariant 2 */
    d->jnl_retire = 1;
    d->restated++;
    /* A restatement's records are many more than a turn's: their buffers are not kept. */
    free(d->staged);
    free(d->jnl_buf);
    d->staged = NULL;
    d->jnl_buf = NULL;
    d->cap_staged = d->cap_jnl_buf = 0;
    char name[SEG_FILE_NAME_SIZE];
    seg_file_name(seg->id, name);
    disk_log(d, STORE_LOG_INFO,
             "segment %s: %zu journal records restated in %.1f ms (%" PRIu64 " of its %" PRIu64
             " entries wait), so older journal files can go",
             name, d->restate_records, (double)d->restate_ns / 1e6, seg->entries - seg->deleted,
             seg->entries);
}

void disk_restate_abort(disk_t *d)
{
    d->restating = NULL;
}
