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
 * The instruction's result feeds its next use three cycles later, so one stream of it runs at a
 * third of the rate the core can issue it. Inputs of CRC32C_LANES x CRC32C_BLOCK bytes or more
 * are therefore checksummed as three independent streams over consecutive blocks, combined by
 * the linearity of the CRC: the state after a block followed by k zero bytes is a linear map of
 * the state, kept as four 256-entry tables per shift (crc32c_shift).
 *
 * Invariants:
 *   1. store_crc32c(seed, a || b) == store_crc32c(store_crc32c(seed, a), b), so an entry is
 *      checksummed in pieces without copying it together.
 *   2. store_crc32c(0, m) is the standard CRC-32C of m (iSCSI, RFC 3720 B.4), on either path:
 *      the SSE4.2 instruction and the table (store_crc32c_table, which tests run on any CPU)
 *      give the same value, at every length and on both sides of the three-stream threshold.
 *   3. The tables are built once, by whichever thread checksums first (pthread_once): recovery
 *      reads files on several threads.
 *
 * Rejected: PCLMULQDQ folding, several times faster on long inputs but an entry is a few hundred
 * bytes, where three streams already take most of the gain, and its constants are another
 * format to get right.
 */
#include "store/disk/bytes_int.h"

#include <pthread.h>
#include <string.h>

/* Bytes of each of the three streams per round: a round is 24 instructions and two table
 * shifts, so blocks much shorter pay the shifts too often and much longer ones leave more of an
 * entry of a few hundred bytes to one stream (32, 64 and 128 timed on cached entry-sized
 * buffers; docs/store.md, "CRC-32C"). */
#define CRC32C_BLOCK 64u
#define CRC32C_LANES 3u

static uint32_t crc32c_table[256];
/* crc32c_shift[s][k][b]: the state byte b at position k becomes after (s + 1) x CRC32C_BLOCK
 * zero bytes. */
static uint32_t crc32c_shift[2][4][256];
static int crc32c_hw = 0; /* 0 table, 1 SSE4.2 */
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

/* The raw state after n zero bytes, bytewise (the tables' construction only). */
static uint32_t crc32c_zeros(uint32_t c, size_t n)
{
    while (n-- > 0)
        c = crc32c_table[c & 0xFF] ^ (c >> 8);
    return c;
}

static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
    for (size_t s = 0; s < 2; s++) {
        for (uint32_t k = 0; k < 4; k++) {
            for (uint32_t b = 0; b < 256; b++)
                crc32c_shift[s][k][b] = crc32c_zeros(b << (8 * k), (s + 1) * CRC32C_BLOCK);
        }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    crc32c_hw = 0;
#endif
}

/* The state c after (s + 1) x CRC32C_BLOCK zero bytes. */
static uint32_t crc32c_shifted(uint32_t c, size_t s)
{
    return crc32c_shift[s][0][c & 0xFF] ^ crc32c_shift[s][1][(c >> 8) & 0xFF] ^
           crc32c_shift[s][2][(c >> 16) & 0xFF] ^ crc32c_shift[s][3][c >> 24];
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                               size_t n)
{
    uint64_t c = crc;
    while (n >= CRC32C_LANES * CRC32C_BLOCK) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < CRC32C_BLOCK; i += 8) {
            uint64_t v0, v1, v2;
            memcpy(&v0, p + i, 8);
            memcpy(&v1, p + CRC32C_BLOCK + i, 8);
            memcpy(&v2, p + 2 * CRC32C_BLOCK + i, 8);
            c = __builtin_ia32_crc32di(c, v0);
            c1 = __builtin_ia32_crc32di(c1, v1);
            c2 = __builtin_ia32_crc32di(c2, v2);
        }
        c = crc32c_shifted((uint32_t)c, 1) ^ crc32c_shifted((uint32_t)c1, 0) ^ (uint32_t)c2;
        p += CRC32C_LANES * CRC32C_BLOCK;
        n -= CRC32C_LANES * CRC32C_BLOCK;
    }
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
    pthread_once(&crc32c_once, crc32c_init);
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
    pthread_once(&crc32c_once, crc32c_init);
    return ~crc32c_bytes(~crc, data, len);
}
