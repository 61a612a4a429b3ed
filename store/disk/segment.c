/*
 * segment.c - encoding and checking of the segment file format (byte diagram: segment_int.h).
 *
 * Owns nothing but the format: no file descriptors, no policy. disk_seg.c and disk_item.c write
 * what this encodes; recovery.c trusts only what seg_entry_check accepts.
 *
 * Invariants:
 *   1. Every entry is 8-byte aligned and its length is a multiple of 8, so a resynchronising
 *      scan after damage only has to try aligned offsets.
 *   2. An entry is accepted only if its length is sane (header + id + payload, padded, within the
 *      bytes available) and its CRC over segment id, header fields and bytes verifies.
 *   3. The state word is outside the CRC (see the diagram): a state word rewritten in place (format
 *      2) never invalidates, and one damaged can only read as a lower state.
 *
 *   4. Every field the format does not use yet (reserved words, flags) is written zero and read
 *      as damage when it is not, so a later version can give it a meaning without an older
 *      reader mistaking it for something it knows.
 *
 * Rejected: a length-prefixed record stream without per-entry CRC (one flipped length bit
 * would desynchronise everything after it, which is what lost data mid-stream in JetStream's
 * file store); a CRC covering the state word (a tombstone would then have to rewrite the CRC,
 * an 8-byte non-atomic update); the routing keys once per file (one file per lane, store format
 * 1): lanes and shapes are many, and a file per lane made the file system's inode work, not the
 * bytes, the cost of the data path.
 */
#include "store/disk/segment_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seg_align(uint64_t n)
{
    return (n + SEG_ALIGN - 1) / SEG_ALIGN * SEG_ALIGN;
}

uint32_t seg_header_size(size_t model_len)
{
    return (uint32_t)seg_align(SEG_HEADER_FIXED + model_len);
}

void seg_header_encode(const seg_header_t *h, uint8_t *buf)
{
    size_t model_len = strlen(h->model);
    uint32_t size = seg_header_size(model_len);
    memset(buf, 0, size);
    memcpy(buf, SEG_MAGIC, sizeof(SEG_MAGIC));
    store_put32(buf + 8, SEG_VERSION);
    store_put32(buf + 12, size);
    store_put64(buf + 16, h->segment_id);
    store_put32(buf + 36, (uint32_t)model_len);
    store_put64(buf + 40, h->sequence);
    store_put64(buf + 48, h->created_ns);
    memcpy(buf + SEG_HEADER_FIXED, h->model, model_len);
    store_put32(buf + 56, store_crc32c(0, buf, size));
}

store_status_t seg_header_decode(const uint8_t *buf, size_t len, seg_header_t *out)
{
    if (len < SEG_HEADER_FIXED || memcmp(buf, SEG_MAGIC, sizeof(SEG_MAGIC)) != 0 ||
        (store_get32(buf + 8) != SEG_VERSION && store_get32(buf + 8) != SEG_VERSION_LOG))
        return STORE_ECORRUPT;
    uint32_t size = store_get32(buf + 12);
    uint32_t model_len = store_get32(buf + 36);
    if (model_len == 0 || model_len > SEG_MODEL_MAX || size != seg_header_size(model_len) ||
        size > len)
        return STORE_ECORRUPT;
    uint8_t copy[SEG_HEADER_FIXED + SEG_MODEL_MAX + SEG_ALIGN];
    memcpy(copy, buf, size);
    store_put32(copy + 56, 0);
    if (store_crc32c(0, copy, size) != store_get32(buf + 56))
        return STORE_ECORRUPT;
    if (memchr(buf + SEG_HEADER_FIXED, '\0', model_len) != NULL || store_get64(buf + 24) != 0 ||
        store_get32(buf + 32) != 0 || store_get32(buf + 60) != 0)
        return STORE_ECORRUPT;
    for (uint32_t i = SEG_HEADER_FIXED + model_len; i < size; i++) {
        if (buf[i] != 0)
            return STORE_ECORRUPT;
    }
    seg_header_t h = {
        .segment_id = store_get64(buf + 16),
        .sequence = store_get64(buf + 40),
        .created_ns = store_get64(buf + 48),
        .header_len = size,
    };
    memcpy(h.model, buf + SEG_HEADER_FIXED, model_len);
    h.model[model_len] = '\0';
    *out = h;
    return STORE_OK;
}

uint32_t seg_header_version(const uint8_t *buf, size_t len)
{
    if (len < SEG_HEADER_FIXED || memcmp(buf, SEG_MAGIC, sizeof(SEG_MAGIC)) != 0)
        return 0;
    uint32_t size = store_get32(buf + 12);
    if (size < SEG_HEADER_FIXED || size > len ||
        size > SEG_HEADER_FIXED + SEG_MODEL_MAX + SEG_ALIGN)
        return 0;
    /* Every version so far checks its header the same way: the CRC of the whole header with the
     * CRC field zeroed. A header whose version bits flipped fails it: damage, not a format. */
    uint8_t copy[SEG_HEADER_FIXED + SEG_MODEL_MAX + SEG_ALIGN];
    memcpy(copy, buf, size);
    store_put32(copy + 56, 0);
    return store_crc32c(0, copy, size) == store_get32(buf + 56) ? store_get32(buf + 8) : 0;
}

uint64_t seg_entry_size(size_t id_len, size_t payload_len)
{
    return seg_align(SEG_ENTRY_HEADER + (uint64_t)id_len + payload_len);
}

uint32_t seg_crc_seed(uint64_t segment_id)
{
    uint8_t sid[8];
    store_put64(sid, segment_id);
    return store_crc32c(0, sid, sizeof(sid));
}

/* Where the entry's CRC sits, and the header bytes it covers: 4 .. SEG_ENTRY_CRC. */
#define SEG_ENTRY_CRC 52u

/* The entry's CRC: header bytes 4..52, then id and payload, back to back after the header. */
static uint32_t seg_entry_crc(uint32_t seed, const uint8_t *entry, size_t body_len)
{
    uint32_t crc = store_crc32c(seed, entry + 4, SEG_ENTRY_CRC - 4);
    return store_crc32c(crc, entry + SEG_ENTRY_HEADER, body_len);
}

void seg_entry_encode(uint64_t segment_id, const store_item_t *item, uint64_t signature,
                      uint32_t lane, uint8_t *buf)
{
    uint64_t size = seg_entry_size(item->id_len, item->payload_len);
    memset(buf, 0, SEG_ENTRY_HEADER);
    store_put32(buf + 0, SEG_STATE_LIVE);
    store_put32(buf + 4, (uint32_t)size);
    buf[8] = (uint8_t)item->id_len;
    buf[9] = (uint8_t)(item->id_len >> 8);
    store_put32(buf + 12, item->tokens);
    store_put64(buf + 16, item->arrival_ns);
    store_put64(buf + 24, signature);
    store_put32(buf + 32, lane);
    store_put32(buf + 36, (uint32_t)item->payload_len);
    store_put32(buf + 40, item->prefix_tokens);
    store_put32(buf + 44, item->max_wait_ms);
    uint8_t *p = buf + SEG_ENTRY_HEADER;
    if (item->id_len != 0)
        memcpy(p, item->id, item->id_len);
    if (item->payload_len != 0)
        memcpy(p + item->id_len, item->payload, item->payload_len);
    uint64_t used = SEG_ENTRY_HEADER + item->id_len + item->payload_len;
    memset(buf + used, 0, size - used);
    store_put32(buf + SEG_ENTRY_CRC,
                seg_entry_crc(seg_crc_seed(segment_id), buf, item->id_len + item->payload_len));
}

int seg_entry_check(uint32_t seed, const uint8_t *buf, uint64_t avail, seg_entry_t *out)
{
    if (avail < SEG_ENTRY_HEADER)
        return 0;
    uint32_t length = seg_entry_length(buf);
    uint32_t id_len = seg_entry_id_len(buf);
    uint32_t payload_len = seg_entry_payload_len(buf);
    uint32_t tokens = store_get32(buf + 12);
    if (id_len > SEG_ID_MAX || tokens == 0 || length > avail ||
        length != seg_entry_size(id_len, payload_len) || buf[10] != 0 || buf[11] != 0 ||
        store_get32(buf + 48) != 0)
        return 0;
    if (seg_entry_crc(seed, buf, (size_t)id_len + payload_len) != store_get32(buf + SEG_ENTRY_CRC))
        return 0;
    *out = (seg_entry_t){
        .state = store_get32(buf),
        .length = length,
        .id_len = id_len,
        .tokens = tokens,
        .arrival_ns = store_get64(buf + 16),
        .signature = seg_entry_signature(buf),
        .lane = seg_entry_lane(buf),
        .payload_len = payload_len,
        .prefix_tokens = seg_entry_prefix_tokens(buf),
        .max_wait_ms = seg_entry_max_wait_ms(buf),
    };
    return 1;
}

void seg_file_name(uint64_t segment_id, char *buf)
{
    snprintf(buf, SEG_FILE_NAME_SIZE, "%016" PRIx64 SEG_FILE_SUFFIX, segment_id);
}

int seg_id_name_parse(const char *name, const char *suffix, uint64_t *out_id)
{
    if (strlen(name) != 16 + strlen(suffix) || strcmp(name + 16, suffix) != 0 ||
        strncmp(name, "ffffffffffffffff", 16) == 0) /* the counter past it would wrap */
        return 0;
    uint64_t id = 0;
    for (int i = 0; i < 16; i++) {
        char c = name[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return 0;
        id = id << 4 | (uint64_t)v;
    }
    *out_id = id;
    return 1;
}

int seg_file_parse(const char *name, uint64_t *out_id)
{
    return seg_id_name_parse(name, SEG_FILE_SUFFIX, out_id);
}
