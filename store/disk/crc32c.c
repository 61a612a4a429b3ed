/*
 * crc32c.c - CRC-32C (Castagnoli), the checksum of every segment entry and header.
 *
 * None of the project's dependencies exports CRC-32C (xxHash is not a CRC, LMDB and protobuf-c
 * have none) and Debian's bookworm ships no C library for it, so it lives here: the SSE4.2
 * instruction when the CPU has it (checked once at run time), else a byte-wise table.
 *
 * Why CRC-32C and not XXH64, which is already linked: CRC-32C is what storage formats use
 * for torn-write detection (ext4, iSCSI, LevelDB/RocksDB), it is a hardware instruction on x86 and
 * ARMv8, and 4 bytes per entry suffice to detect, not to identify.
 *
 * Invariants:
 *   1. store_crc32c(seed, a || b) == store_crc32c(store_crc32c(seed, a), b), so an entry is
 *      checksummed in pieces without copying it together.
 *   2. store_crc32c(0, m) is the standard CRC-32C of m (iSCSI, RFC 3720 B.4), on either path:
 *      the SSE4.2 instruction and the table (store_crc32c_table, which tests run on any CPU)
 *      give the same value.
 */
#include "store/disk/bytes_int.h"

#include <string.h>

static uint32_t crc32c_table[256];
static int crc32c_hw = -1; /* -1 unknown, 0 table, 1 SSE4.2 */

static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    crc32c_hw = 0;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                               size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

static uint32_t crc32c_bytes(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len-- > 0)
        crc = crc32c_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

uint32_t store_crc32c(uint32_t crc, const void *data, size_t len)
{
    if (crc32c_hw < 0)
        crc32c_init();
    const uint8_t *p = data;
    crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc32c_hw == 1)
        return ~crc32c_sse42(crc, p, len);
#endif
    return ~crc32c_bytes(crc, p, len);
}

uint32_t store_crc32c_table(uint32_t crc, const void *data, size_t len)
{
    if (crc32c_hw < 0)
        crc32c_init();
    return ~crc32c_bytes(~crc, data, len);
}
