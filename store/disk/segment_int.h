/*
 * segment_int.h - private to store/disk/: the segment file format (store format 3; the entries are
 * those of format 2, whose files are read as they are). This header owns it.
 *
 * A segment is one file of a model's append log: it holds the entries of every shape and lane
 * of one model, in the order they were appended, and is named by its segment id:
 * <data dir>/segments/<id as 16 hex digits>.seg. The model lives once, in the header; each
 * entry carries its own shape signature and lane. All integers are little-endian. Every entry
 * starts on an 8-byte boundary.
 *
 * Segment header (64 bytes + the model name padded to 8):
 *
 *   0        8        12       16               24               32       36       40
 *   +--------+--------+--------+----------------+----------------+--------+--------+
 *   | magic  |version |hdr_len | segment_id     | reserved (0)   |rsvd (0)|model_ln|
 *   +--------+--------+--------+----------------+----------------+--------+--------+
 *   40               48               56       60       64
 *   +----------------+----------------+--------+--------+---------------------------+
 *   | sequence       | created_ns     | crc32c |reserved| model bytes, 0-padded to 8|
 *   +----------------+----------------+--------+--------+---------------------------+
 *
 *   magic       8 bytes "LANESEG\0"
 *   version     u32, SEG_VERSION (3). Version 2 files (the same layout; their state words may have
 *               been rewritten in place) are read as they are and never written again. Version
 *               1 (one file per lane, the routing keys in the header, 32-byte entries) is
 *               recognised only to be refused (recovery.c).
 *   hdr_len     u32, bytes: 64 + model_len rounded up to 8; the first entry starts here
 *   segment_id  u64, unique in the data directory, never reused; equals the file name
 *   model_len   u32, bytes of model name, 1..SEG_MODEL_MAX
 *   sequence    u64, 0, 1, 2, ... per model: the order of the model's segments
 *   created_ns  u64, wall clock at creation, nanoseconds since the Unix epoch
 *   crc32c      u32, CRC-32C of the whole header (hdr_len bytes) with this field zero
 *   reserved    zero when written, zero when read (anything else: the header is damaged)
 *
 * Entry (56 bytes + id + payload, padded to 8):
 *
 *   0        4        8    10   12       16               24               32       36
 *   +--------+--------+----+----+--------+----------------+----------------+--------+--------+
 *   | state  | length |idln|flag| tokens | arrival_ns     | signature      | lane   |pay_len |
 *   +--------+--------+----+----+--------+----------------+----------------+--------+--------+
 *   40       44       48       52       56
 *   +--------+--------+--------+--------+------------------------------------------------
 *   | prefix |max_wait|reserved| crc32c | id, payload, zero padding to 8
 *   +--------+--------+--------+--------+------------------------------------------------
 *
 *   state       u32, SEG_STATE_LIVE, SEG_STATE_TOMB, or "DLV" + n (bytes 'D' 'L' 'V' n, n in
 *               1..255): committed n times (the delivery count, saturating; see
 *               seg_state_delivered). Format 3 writes LIVE and never rewrites it: the entry's
 *               later states are records of the state journal (journal_int.h), and its state
 *               is the highest of this word and those records (seg_state_rank). Format 2
 *               rewrote it in place, as one aligned 4-byte store; such words are honoured.
 *   length      u32, bytes of the whole entry including padding; the next entry starts here
 *   id_len      u16, bytes of item id, 0..64
 *   flags       u16, 0 (anything else: the entry is damaged)
 *   tokens      u32, the item's token length (> 0)
 *   arrival_ns  u64, when the store accepted it, nanoseconds
 *   signature   u64, the shape signature (XXH64) of the item: with the header's model and the
 *               lane, the queue recovery puts it in, and what the shape guard checks
 *   lane        u32, lane id within the shape
 *   pay_len     u32, bytes of payload (the item as the producer sent it)
 *   prefix      u32, the item's prefix_tokens (0 = none given)
 *   max_wait    u32, the item's max_wait_ms (0 = none)
 *   reserved    u32, 0 (anything else: the entry is damaged)
 *   crc32c      u32, CRC-32C of: segment_id (u64) || bytes 4..52 of the entry || id || payload.
 *               The state word is outside it, so a tombstone leaves the CRC valid, and a damaged
 *               state word can only make an intact entry live again (a redelivery), never make
 *               damaged bytes readable. The routing keys are inside it: a flipped bit cannot
 *               move an entry to another shape or lane. The segment id ties the entry to its
 *               file: a payload that happens to contain bytes shaped like an entry does not
 *               verify.
 */
/* Ownership: every pointer below is borrowed for the call; buffers are caller memory of the size
 * each declaration names. Nothing here allocates. */
#ifndef LANESCHED_SEGMENT_INT_H
#define LANESCHED_SEGMENT_INT_H

#include "common/limits.h"
#include "store/disk/bytes_int.h"

#define SEG_MAGIC          "LANESEG"
#define SEG_VERSION        3u
#define SEG_VERSION_LOG    2u /* the same files, states in place: read, never written */
#define SEG_VERSION_LANE   1u /* one file per lane: refused at open (recovery.c) */
#define SEG_HEADER_FIXED   64u
#define SEG_ENTRY_HEADER   56u
#define SEG_ALIGN          8u
#define SEG_MODEL_MAX      LIMITS_MODEL_MAX /* the wire's limits (common/limits.h): the codec */
#define SEG_ID_MAX         LIMITS_ID_MAX    /* refuses more, recovery reads more as damage */
#define SEG_STATE_LIVE     0x4556494Cu      /* "LIVE" */
#define SEG_STATE_TOMB     0x424D4F54u      /* "TOMB" */
#define SEG_STATE_DLV      0x00564C44u      /* "DLV", the count in the high byte */
#define SEG_DELIVERIES_MAX 255u
#define SEG_STATE_OFFSET   0u
#define SEG_FILE_SUFFIX    ".seg"
#define SEG_FILE_NAME_SIZE 24 /* 16 hex digits + ".seg" + NUL, rounded up */

typedef struct {
    uint64_t segment_id;
    uint64_t sequence;
    uint64_t created_ns;
    uint32_t header_len;
    char model[SEG_MODEL_MAX + 1];
} seg_header_t;

typedef struct {
    uint32_t state;
    uint32_t length;
    uint32_t id_len;
    uint32_t tokens;
    uint64_t arrival_ns;
    uint64_t signature;
    uint32_t lane;
    uint32_t payload_len;
    uint32_t prefix_tokens;
    uint32_t max_wait_ms;
} seg_entry_t;

/* Fields read straight from the bytes of an entry (offsets: the diagram above). Unchecked: only
 * seg_entry_check says whether they can be trusted. */
static inline uint32_t seg_entry_length(const uint8_t *e)
{
    return store_get32(e + 4);
}
static inline uint32_t seg_entry_id_len(const uint8_t *e)
{
    return (uint32_t)e[8] | (uint32_t)e[9] << 8;
}
static inline uint64_t seg_entry_arrival(const uint8_t *e)
{
    return store_get64(e + 16);
}
static inline uint64_t seg_entry_signature(const uint8_t *e)
{
    return store_get64(e + 24);
}
static inline uint32_t seg_entry_lane(const uint8_t *e)
{
    return store_get32(e + 32);
}
static inline uint32_t seg_entry_payload_len(const uint8_t *e)
{
    return store_get32(e + 36);
}
static inline uint32_t seg_entry_prefix_tokens(const uint8_t *e)
{
    return store_get32(e + 40);
}
static inline uint32_t seg_entry_max_wait_ms(const uint8_t *e)
{
    return store_get32(e + 44);
}

/* The state word of an entry committed `deliveries` times (>= 1; saturates at 255). */
static inline uint32_t seg_state_delivered(uint32_t deliveries)
{
    uint32_t n = deliveries < SEG_DELIVERIES_MAX ? deliveries : SEG_DELIVERIES_MAX;
    return SEG_STATE_DLV | n << 24;
}

/* The delivery count a state word records: 0 for LIVE, n for "DLV" + n; -1 for any other
 * word (TOMB included). */
static inline int seg_state_deliveries(uint32_t state)
{
    if (state == SEG_STATE_LIVE)
        return 0;
    if ((state & 0x00FFFFFFu) == SEG_STATE_DLV && (state >> 24) != 0)
        return (int)(state >> 24);
    return -1;
}

/* The order states move in, never back: 0 for LIVE, n for "DLV" + n, SEG_RANK_TOMB for TOMB;
 * -1 for any other word (damage). An entry's state is the highest rank of its own word and the
 * journal's records of it. */
#define SEG_RANK_TOMB 256
static inline int seg_state_rank(uint32_t state)
{
    return state == SEG_STATE_TOMB ? SEG_RANK_TOMB : seg_state_deliveries(state);
}

/* Bytes of a header for a model name of model_len bytes. */
uint32_t seg_header_size(size_t model_len);

/* Encodes h (model NUL-terminated) into buf, which has seg_header_size() bytes. */
void seg_header_encode(const seg_header_t *h, uint8_t *buf);

/* Decodes and verifies a header from the first `len` bytes of a file. STORE_ECORRUPT if the
 * magic, version (SEG_VERSION or SEG_VERSION_LOG), lengths, reserved fields or CRC are wrong. */
store_status_t seg_header_decode(const uint8_t *buf, size_t len, seg_header_t *out /* out */);

/* The version a file's first `len` bytes claim when they start with the magic and a header
 * whose CRC verifies (computed the same way in every version), else 0: recovery tells a file of
 * another format (refused) from a damaged one (quarantined) with it. */
uint32_t seg_header_version(const uint8_t *buf, size_t len);

/* Bytes of an entry with id_len and payload_len, including padding. */
uint64_t seg_entry_size(size_t id_len, size_t payload_len);

/* Encodes a live entry of `item`, routed to (signature, lane), into buf (seg_entry_size()
 * bytes, padding zeroed). */
void seg_entry_encode(uint64_t segment_id, const store_item_t *item, uint64_t signature,
                      uint32_t lane, uint8_t *buf);

/* The CRC state after the segment id: computed once per segment, it seeds every entry's CRC. */
uint32_t seg_crc_seed(uint64_t segment_id);

/*
 * Checks the entry at buf, with `avail` bytes readable from buf: the length is sane and within
 * avail and the CRC (seeded with seg_crc_seed of its segment) verifies. Returns 1 and fills
 * *out if so, else 0 (out untouched). The state word is not judged here.
 */
int seg_entry_check(uint32_t seed, const uint8_t *buf, uint64_t avail, seg_entry_t *out /* out */);

/* File name of a segment id into buf (SEG_FILE_NAME_SIZE bytes). */
void seg_file_name(uint64_t segment_id, char *buf);

/* Parses a segment file name; returns 1 and the id when `name` is one. */
int seg_file_parse(const char *name, uint64_t *out_id /* out */);

/* Parses a name of 16 lowercase hex digits followed by `suffix` (the form of segment and journal
 * file names); returns 1 and the id when `name` has it, else 0 (out untouched). The id 2^64 - 1
 * is not a name the store writes (the id counter would wrap past it). Both borrowed. */
int seg_id_name_parse(const char *name, const char *suffix, uint64_t *out_id /* out */);

#endif
