/*
 * journal_int.h - private to store/disk/: the state journal's file format (store format 3). This
 * header owns it.
 *
 * The journal holds the state changes of entries (a delivery count, a tombstone) as records
 * appended one after another, so that a settled item costs 24 bytes at the end of one file
 * rather than a 4-byte store into a page of its segment (which at the power level would make
 * every flush write back a page per settled item). The store has one journal at a time, a sequence
 * of files of a fixed size (allocated whole at creation, written through a shared mapping), <data
 * dir>/journal/<id as 16 hex digits>.jnl; ids are drawn from the segments' counter, so a journal id
 * is never a segment's or another journal's, ever. All integers are little-endian.
 *
 * Journal header (64 bytes):
 *
 *   0        8        12       16               24               32       36
 *   +--------+--------+--------+----------------+----------------+--------+-------------+
 *   | magic  |version |hdr_len | journal_id     | created_ns     |rec_len | reserved (0)|
 *   +--------+--------+--------+----------------+----------------+--------+-------------+
 *   56       60       64
 *   +--------+--------+
 *   | crc32c |rsvd (0)|
 *   +--------+--------+
 *
 *   magic       8 bytes "LANEJNL\0"
 *   version     u32, JNL_VERSION (3, the store format that introduced it)
 *   hdr_len     u32, JNL_HEADER (64): the first record starts here
 *   journal_id  u64, equals the file name
 *   created_ns  u64, wall clock at creation
 *   rec_len     u32, JNL_RECORD (24)
 *   crc32c      u32, CRC-32C of the 64 header bytes with this field zero
 *   reserved    zero when written, zero when read
 *
 * Record (24 bytes, at 64 + 24 k):
 *
 *   0                8        12       16       20       24
 *   +----------------+--------+--------+--------+--------+
 *   | segment_id     | offset | length | state  | crc32c |
 *   +----------------+--------+--------+--------+--------+
 *
 *   segment_id  u64, the segment of the entry
 *   offset      u32, where the entry starts in it (8-aligned, past the segment header)
 *   length      u32, the entry's length: a record applies only to an entry that starts at
 *               offset and has this length
 *   state       u32, the entry's new state word: SEG_STATE_TOMB or "DLV" + n (never LIVE)
 *   crc32c      u32, CRC-32C of journal_id (u64) || bytes 0..20. The journal id seeds it, so a
 *               record left in a file by another journal (or read from the wrong file) fails.
 *
 * A slot never written is all zero (the file is allocated zeroed): a blank, not damage. Records
 * are not ordered by anything but time, and need not be: states only move up (LIVE < DLV 1 < ...
 * < DLV 255 < TOMB, seg_state_rank), so an entry's state is the highest of its own state word and
 * every record naming it, whatever order they are read in, and reading a record twice changes
 * nothing.
 */
/* Ownership: every pointer below is borrowed for the call; buffers are caller memory of the size
 * each declaration names. Nothing here allocates. */
#ifndef LANESCHED_JOURNAL_INT_H
#define LANESCHED_JOURNAL_INT_H

#include "store/disk/segment_int.h"

#define JNL_MAGIC          "LANEJNL"
#define JNL_VERSION        3u
#define JNL_HEADER         64u
#define JNL_RECORD         24u
#define JNL_FILE_SUFFIX    ".jnl"
#define JNL_FILE_NAME_SIZE 24 /* 16 hex digits + ".jnl" + NUL, rounded up */

typedef struct {
    uint64_t journal_id;
    uint64_t created_ns;
} jnl_header_t;

typedef struct {
    uint64_t segment_id;
    uint32_t offset;
    uint32_t length;
    uint32_t state;
} jnl_record_t;

/* Encodes h into buf (JNL_HEADER bytes). */
void jnl_header_encode(const jnl_header_t *h, uint8_t *buf);

/* The version the first `len` bytes of a file claim when they start with the magic and their
 * CRC verifies, else 0 (damage, or not a journal header). */
uint32_t jnl_header_version(const uint8_t *buf, size_t len);

/* Decodes and verifies a header of JNL_VERSION: STORE_ECORRUPT if anything is wrong. */
store_status_t jnl_header_decode(const uint8_t *buf, size_t len, jnl_header_t *out /* out */);

/* The CRC state after the journal id: seeds every record's CRC of that journal. */
uint32_t jnl_crc_seed(uint64_t journal_id);

/* Encodes r into buf (JNL_RECORD bytes) under the journal's seed. */
void jnl_record_encode(uint32_t seed, const jnl_record_t *r, uint8_t *buf);

/* 1 when the JNL_RECORD bytes at buf are all zero (a slot never written). */
int jnl_record_blank(const uint8_t *buf);

/* Checks the record at buf (JNL_RECORD bytes): its CRC verifies under seed, its state is a
 * tombstone or a delivery count, its offset and length can be an entry's. 1 and *out if so, else
 * 0 (out untouched). */
int jnl_record_check(uint32_t seed, const uint8_t *buf, jnl_record_t *out /* out */);

/* File name of a journal id into buf (JNL_FILE_NAME_SIZE bytes). */
void jnl_file_name(uint64_t journal_id, char *buf);

/* Parses a journal file name; returns 1 and the id when `name` is one. */
int jnl_file_parse(const char *name, uint64_t *out_id /* out */);

#endif
