/*
 * journal.c - encoding and checking of the state journal's file format (byte diagram:
 * journal_int.h).
 *
 * Owns nothing but the format: disk_journal.c writes what this encodes, recovery_journal.c
 * trusts only what jnl_record_check accepts.
 *
 * Invariants:
 *   1. A record is accepted only if its CRC (seeded with its journal's id) verifies and its
 *      fields can describe a state change of an entry: a tombstone or a delivery count, at an
 *      8-aligned offset past a segment header, of an entry's possible length.
 *   2. An all-zero slot is never a valid record (its state word would be 0): the zeroed space of
 *      a file allocated ahead reads as blank, not as records.
 *   3. Reserved header fields are written zero and read as damage when not, as in segment.c.
 *
 * Rejected: a CRC per block of records (a flush's worth): one damaged byte would cost every
 * tombstone of the block, a redelivery each; a CRC per record costs 4 bytes and one record.
 * Records without the entry's length: the offset alone would also match a different entry
 * starting there only if segment ids were reused, which they never are, but the length is a
 * second check for the price of the padding the record would have had anyway.
 */
#include "store/disk/journal_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void jnl_header_encode(const jnl_header_t *h, uint8_t *buf)
{
    memset(buf, 0, JNL_HEADER);
    memcpy(buf, JNL_MAGIC, sizeof(JNL_MAGIC));
    store_put32(buf + 8, JNL_VERSION);
    store_put32(buf + 12, JNL_HEADER);
    store_put64(buf + 16, h->journal_id);
    store_put64(buf + 24, h->created_ns);
    store_put32(buf + 32, JNL_RECORD);
    store_put32(buf + 56, store_crc32c(0, buf, JNL_HEADER));
}

uint32_t jnl_header_version(const uint8_t *buf, size_t len)
{
    if (len < JNL_HEADER || memcmp(buf, JNL_MAGIC, sizeof(JNL_MAGIC)) != 0)
        return 0;
    uint8_t copy[JNL_HEADER];
    memcpy(copy, buf, JNL_HEADER);
    store_put32(copy + 56, 0);
    return store_crc32c(0, copy, JNL_HEADER) == store_get32(buf + 56) ? store_get32(buf + 8) : 0;
}

store_status_t jnl_header_decode(const uint8_t *buf, size_t len, jnl_header_t *out)
{
    if (jnl_header_version(buf, len) != JNL_VERSION || store_get32(buf + 12) != JNL_HEADER ||
        store_get32(buf + 32) != JNL_RECORD || store_get32(buf + 60) != 0)
        return STORE_ECORRUPT;
    for (size_t i = 36; i < 56; i++) {
        if (buf[i] != 0)
            return STORE_ECORRUPT;
    }
    out->journal_id = store_get64(buf + 16);
    out->created_ns = store_get64(buf + 24);
    return STORE_OK;
}

uint32_t jnl_crc_seed(uint64_t journal_id)
{
    uint8_t id[8];
    store_put64(id, journal_id);
    return store_crc32c(0, id, sizeof(id));
}

/* The bytes a record's CRC covers after the seed. */
#define JNL_RECORD_CRC 20u

void jnl_record_encode(uint32_t seed, const jnl_record_t *r, uint8_t *buf)
{
    store_put64(buf, r->segment_id);
    store_put32(buf + 8, r->offset);
    store_put32(buf + 12, r->length);
    store_put32(buf + 16, r->state);
    store_put32(buf + JNL_RECORD_CRC, store_crc32c(seed, buf, JNL_RECORD_CRC));
}

int jnl_record_blank(const uint8_t *buf)
{
    uint64_t a, b, c;
    memcpy(&a, buf, 8);
    memcpy(&b, buf + 8, 8);
    memcpy(&c, buf + 16, 8);
    return (a | b | c) == 0;
}

int jnl_record_check(uint32_t seed, const uint8_t *buf, jnl_record_t *out)
{
    uint32_t offset = store_get32(buf + 8), length = store_get32(buf + 12);
    uint32_t state = store_get32(buf + 16);
    if (seg_state_rank(state) < 1 || offset % SEG_ALIGN != 0 || offset < SEG_HEADER_FIXED ||
        length < SEG_ENTRY_HEADER || length % SEG_ALIGN != 0 ||
        store_crc32c(seed, buf, JNL_RECORD_CRC) != store_get32(buf + JNL_RECORD_CRC))
        return 0;
    *out = (jnl_record_t){store_get64(buf), offset, length, state};
    return 1;
}

void jnl_file_name(uint64_t journal_id, char *buf)
{
    snprintf(buf, JNL_FILE_NAME_SIZE, "%016" PRIx64 JNL_FILE_SUFFIX, journal_id);
}

int jnl_file_parse(const char *name, uint64_t *out_id)
{
    return seg_id_name_parse(name, JNL_FILE_SUFFIX, out_id);
}
