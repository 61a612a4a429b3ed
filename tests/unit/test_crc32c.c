/*
 * test_crc32c.c - known answers for store/disk/crc32c.c, the checksum of every segment entry and
 * header. A CRC that is merely self-consistent would still read every file it wrote; only
 * published values show it is CRC-32C (Castagnoli), the one other tools can verify.
 *
 * The API continues from a previous value: store_crc32c(0, m) is the standard CRC-32C of m
 * (initial value and final xor 0xFFFFFFFF, reflected polynomial 0x82F63B78), and
 * store_crc32c(store_crc32c(0, a), b) == store_crc32c(0, a || b). The segment code seeds an
 * entry's CRC with the CRC of its segment id, which is that chaining. Every case runs on both
 * paths: store_crc32c (the SSE4.2 instruction where the CPU has it) and store_crc32c_table
 * (the byte-wise table the other CPUs use).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "store/disk/bytes_int.h"

typedef uint32_t (*crc_fn)(uint32_t crc, const void *data, size_t len);

static const crc_fn paths[] = {store_crc32c, store_crc32c_table};
enum { N_PATHS = sizeof(paths) / sizeof(paths[0]) };

/* RFC 3720 (iSCSI) appendix B.4, "CRC Examples", and the customary check value. */
static void test_published_vectors(void **state)
{
    (void)state;
    uint8_t zeros[32], ones[32], inc[32], dec[32];
    memset(zeros, 0x00, sizeof(zeros));
    memset(ones, 0xFF, sizeof(ones));
    for (int i = 0; i < 32; i++) {
        inc[i] = (uint8_t)i;
        dec[i] = (uint8_t)(31 - i);
    }
    for (int p = 0; p < N_PATHS; p++) {
        assert_int_equal(paths[p](0, zeros, 32), 0x8A9136AAu);
        assert_int_equal(paths[p](0, ones, 32), 0x62A8AB43u);
        assert_int_equal(paths[p](0, inc, 32), 0x46DD794Eu);
        assert_int_equal(paths[p](0, dec, 32), 0x113FDB5Cu);
        assert_int_equal(paths[p](0, "123456789", 9), 0xE3069283u);
        assert_int_equal(paths[p](0, "", 0), 0u);
    }
}

/*
 * Values computed independently with a bit-at-a-time Python implementation of the definition
 * (reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF; it gives the five published
 * values above), for inputs long and odd enough to cross the 8-byte steps of the SSE4.2 loop:
 *   pattern[i] = (i * 7 + 3) & 0xFF, i < 1000            -> 0xDD2EDFF7
 *   the segment id 1 as a little-endian u64 (a seed)     -> 0xC514CFAD
 */
static void test_long_input_and_segment_seed(void **state)
{
    (void)state;
    uint8_t pattern[1000];
    for (size_t i = 0; i < sizeof(pattern); i++)
        pattern[i] = (uint8_t)((i * 7 + 3) & 0xFF);
    uint8_t id1[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    for (int p = 0; p < N_PATHS; p++) {
        assert_int_equal(paths[p](0, pattern, sizeof(pattern)), 0xDD2EDFF7u);
        assert_int_equal(paths[p](0, id1, sizeof(id1)), 0xC514CFADu);
    }
}

/* Invariant 1 of crc32c.c: continuing from a previous value is checksumming the concatenation,
 * at every split point and every alignment of the start, on both paths. */
static void test_chaining_equals_concatenation(void **state)
{
    (void)state;
    uint8_t buf[64 + 8];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 31 + 5);
    for (size_t align = 0; align < 8; align++) {
        const uint8_t *m = buf + align;
        uint32_t whole = store_crc32c(0, m, 64);
        assert_int_equal(store_crc32c_table(0, m, 64), whole);
        for (size_t cut = 0; cut <= 64; cut++) {
            for (int p = 0; p < N_PATHS; p++)
                assert_int_equal(paths[p](paths[p](0, m, cut), m + cut, 64 - cut), whole);
        }
    }
    /* A seed changes the value: the segment id is bound into every entry's CRC. */
    assert_int_not_equal(store_crc32c(store_crc32c(0, "\1", 1), "123456789", 9), 0xE3069283u);
}

/* Invariant 2 of crc32c.c at every length from 0 past several three-stream rounds (64-byte
 * blocks, 192 bytes a round), every alignment of the start and a nonzero seed: the hardware
 * path's interleaved streams and their combination give the table's value. */
static void test_every_length_across_the_stream_rounds(void **state)
{
    (void)state;
    static uint8_t buf[1200 + 8];
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t align = 0; align < 8; align++) {
        for (size_t len = 0; len <= 1200; len++) {
            const uint8_t *m = buf + align;
            assert_int_equal(store_crc32c(0, m, len), store_crc32c_table(0, m, len));
            assert_int_equal(store_crc32c(0xC514CFADu, m, len),
                             store_crc32c_table(0xC514CFADu, m, len));
        }
    }
    /* Split across a round: the state carried in is the first stream's. */
    uint32_t whole = store_crc32c_table(0, buf, 1000);
    for (size_t cut = 0; cut <= 1000; cut += 37)
        assert_int_equal(store_crc32c(store_crc32c(0, buf, cut), buf + cut, 1000 - cut), whole);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_vectors),
        cmocka_unit_test(test_long_input_and_segment_seed),
        cmocka_unit_test(test_chaining_equals_concatenation),
        cmocka_unit_test(test_every_length_across_the_stream_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
