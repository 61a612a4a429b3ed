/*
 * test_map.c - unit tests for common/map: the open-addressing map shared by the store and the
 * scheduler. One test per rule of map.h / map.c; the randomized test checks the map against a
 * plain reference array with many deletes, because backward-shift deletion is the risky part.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hashseed.h"
#include "common/map.h"
#include "common/rng.h"

/* Distinct non-NULL values without allocating: addresses inside one static array. */
static char g_values[4096];

static void *val(size_t i)
{
    return &g_values[i % sizeof(g_values)];
}

static map_key_t key(uint64_t a, uint64_t b)
{
    return (map_key_t){a, b};
}

/* Counts occupied slots by scanning the slot array. */
static size_t occupied_slots(const map_t *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++)
        n += m->slots[i].value != NULL;
    return n;
}

static int is_power_of_two(size_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

/* The slot a key lands in when put alone into a fresh map of the initial capacity (16): its
 * home slot for that capacity, found by observation rather than by copying the hash. */
static size_t home_in_cap16(map_key_t k)
{
    map_t m;
    map_init(&m);
    assert_int_equal(map_put(&m, k, val(0)), MAP_OK);
    assert_int_equal(m.cap, 16);
    size_t home = m.cap;
    for (size_t i = 0; i < m.cap; i++) {
        if (m.slots[i].value != NULL)
            home = i;
    }
    map_fini(&m);
    assert_true(home < 16);
    return home;
}

/* Finds `n` keys (a = counter, b = salt) whose home slot in a 16-slot map is `home`. */
static void keys_with_home(size_t home, uint64_t salt, map_key_t *out, size_t n)
{
    size_t found = 0;
    for (uint64_t a = 1; found < n; a++) {
        assert_true(a < 1000000);
        map_key_t k = key(a, salt);
        if (home_in_cap16(k) == home)
            out[found++] = k;
    }
}

static void test_empty_map_finds_nothing(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    assert_int_equal(m.len, 0);
    assert_int_equal(m.cap, 0);
    assert_null(map_get(&m, key(1, 2)));
    void *out = val(7);
    assert_int_equal(map_del(&m, key(1, 2), &out), MAP_ENOTFOUND);
    assert_ptr_equal(out, val(7));
    map_fini(&m);
}

/* A prefetch is a hint: on an empty map, a missing key or a present one it changes nothing. */
static void test_prefetch_changes_nothing(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    map_prefetch(&m, key(1, 2));
    assert_int_equal(m.cap, 0);
    assert_int_equal(map_put(&m, key(1, 2), val(1)), MAP_OK);
    size_t cap = m.cap;
    map_prefetch(&m, key(1, 2));
    map_prefetch(&m, key(9, 9));
    assert_int_equal(m.len, 1);
    assert_int_equal(m.cap, cap);
    assert_ptr_equal(map_get(&m, key(1, 2)), val(1));
    assert_null(map_get(&m, key(9, 9)));
    map_fini(&m);
}

static void test_put_then_get_returns_value(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    assert_int_equal(map_put(&m, key(1, 2), val(1)), MAP_OK);
    assert_int_equal(map_put(&m, key(3, 4), val(2)), MAP_OK);
    assert_int_equal(m.len, 2);
    assert_ptr_equal(map_get(&m, key(1, 2)), val(1));
    assert_ptr_equal(map_get(&m, key(3, 4)), val(2));
    assert_null(map_get(&m, key(1, 4)));
    assert_null(map_get(&m, key(3, 2)));
    map_fini(&m);
}

static void test_keys_differing_in_one_half_are_distinct(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    map_key_t ks[] = {key(1, 2), key(2, 1),          key(1, 0),         key(0, 1),
                      key(0, 0), key(UINT64_MAX, 0), key(0, UINT64_MAX)};
    size_t n = sizeof(ks) / sizeof(ks[0]);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(map_put(&m, ks[i], val(i + 1)), MAP_OK);
    assert_int_equal(m.len, n);
    for (size_t i = 0; i < n; i++)
        assert_ptr_equal(map_get(&m, ks[i]), val(i + 1));
    map_fini(&m);
}

static void test_put_existing_key_is_eexist_and_keeps_value(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    assert_int_equal(map_put(&m, key(5, 6), val(1)), MAP_OK);
    assert_int_equal(map_put(&m, key(5, 6), val(2)), MAP_EEXIST);
    assert_int_equal(m.len, 1);
    assert_int_equal(occupied_slots(&m), 1);
    assert_ptr_equal(map_get(&m, key(5, 6)), val(1));
    map_fini(&m);
}

static void test_del_returns_value_and_removes_key(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    assert_int_equal(map_put(&m, key(1, 1), val(1)), MAP_OK);
    assert_int_equal(map_put(&m, key(2, 2), val(2)), MAP_OK);
    void *out = NULL;
    assert_int_equal(map_del(&m, key(1, 1), &out), MAP_OK);
    assert_ptr_equal(out, val(1));
    assert_int_equal(m.len, 1);
    assert_null(map_get(&m, key(1, 1)));
    assert_ptr_equal(map_get(&m, key(2, 2)), val(2));
    /* The key can be put again after deletion. */
    assert_int_equal(map_put(&m, key(1, 1), val(3)), MAP_OK);
    assert_ptr_equal(map_get(&m, key(1, 1)), val(3));
    map_fini(&m);
}

static void test_del_accepts_null_out_value(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    assert_int_equal(map_put(&m, key(9, 9), val(1)), MAP_OK);
    assert_int_equal(map_del(&m, key(9, 9), NULL), MAP_OK);
    assert_int_equal(m.len, 0);
    assert_null(map_get(&m, key(9, 9)));
    map_fini(&m);
}

static void test_del_missing_key_is_enotfound_and_changes_nothing(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    for (uint64_t i = 0; i < 10; i++)
        assert_int_equal(map_put(&m, key(i, i), val(i + 1)), MAP_OK);
    void *out = val(99);
    assert_int_equal(map_del(&m, key(100, 100), &out), MAP_ENOTFOUND);
    assert_ptr_equal(out, val(99));
    assert_int_equal(map_del(&m, key(3, 4), NULL), MAP_ENOTFOUND);
    assert_int_equal(m.len, 10);
    for (uint64_t i = 0; i < 10; i++)
        assert_ptr_equal(map_get(&m, key(i, i)), val(i + 1));
    /* Deleting twice: the second is ENOTFOUND. */
    assert_int_equal(map_del(&m, key(4, 4), NULL), MAP_OK);
    assert_int_equal(map_del(&m, key(4, 4), NULL), MAP_ENOTFOUND);
    assert_int_equal(m.len, 9);
    map_fini(&m);
}

static void test_growth_past_many_resizes(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    const size_t n = 200000;
    size_t resizes = 0;
    size_t last_cap = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(map_put(&m, key(i * 7919, ~(uint64_t)i), val(i)), MAP_OK);
        assert_int_equal(m.len, i + 1);
        assert_true(is_power_of_two(m.cap));
        assert_true(m.len <= m.cap / 4 * 3);
        if (m.cap != last_cap) {
            resizes++;
            last_cap = m.cap;
        }
    }
    /* 16 -> 2^19 for 200000 entries at 3/4 load: at least 15 distinct capacities. */
    assert_true(resizes >= 15);
    assert_int_equal(occupied_slots(&m), n);
    for (size_t i = 0; i < n; i++)
        assert_ptr_equal(map_get(&m, key(i * 7919, ~(uint64_t)i)), val(i));
    assert_null(map_get(&m, key(n * 7919, ~(uint64_t)n)));
    map_fini(&m);
}

static void test_reserve_makes_next_puts_not_reallocate(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    assert_int_equal(map_reserve(&m, 1000), MAP_OK);
    assert_true(m.cap / 4 * 3 >= 1000);
    const map_slot_t *slots = m.slots;
    size_t cap = m.cap;
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(map_put(&m, key(i, 42), val(i)), MAP_OK);
    assert_ptr_equal(m.slots, slots);
    assert_int_equal(m.cap, cap);
    /* Reserving nothing more than is free does not reallocate either. */
    assert_int_equal(map_reserve(&m, 0), MAP_OK);
    assert_ptr_equal(m.slots, slots);
    for (uint64_t i = 0; i < 1000; i++)
        assert_ptr_equal(map_get(&m, key(i, 42)), val(i));
    map_fini(&m);
}

static void test_fini_resets_map_for_reuse(void **state)
{
    (void)state;
    map_t m;
    map_init(&m);
    for (uint64_t i = 0; i < 100; i++)
        assert_int_equal(map_put(&m, key(i, 0), val(i)), MAP_OK);
    map_fini(&m);
    assert_null(m.slots);
    assert_int_equal(m.cap, 0);
    assert_int_equal(m.len, 0);
    assert_null(map_get(&m, key(1, 0)));
    assert_int_equal(map_put(&m, key(1, 0), val(5)), MAP_OK);
    assert_ptr_equal(map_get(&m, key(1, 0)), val(5));
    map_fini(&m);
}

/*
 * A run of keys sharing home 14 wraps past the end of the 16-slot table (slots 14, 15, 0, 1),
 * with a key whose home is 0 sitting behind them. Deleting from the front of the run must shift
 * the wrapped entries back without moving the home-0 key before its home.
 */
static void test_delete_in_cluster_wrapping_past_end_keeps_keys_reachable(void **state)
{
    (void)state;
    map_key_t h14[3], h0[2], h15[1];
    keys_with_home(14, 1, h14, 3);
    keys_with_home(0, 2, h0, 2);
    keys_with_home(15, 3, h15, 1);
    map_key_t all[6] = {h14[0], h14[1], h14[2], h0[0], h15[0], h0[1]};
    for (size_t victim = 0; victim < 6; victim++) {
        map_t m;
        map_init(&m);
        for (size_t i = 0; i < 6; i++)
            assert_int_equal(map_put(&m, all[i], val(i + 1)), MAP_OK);
        assert_int_equal(m.cap, 16);
        void *out = NULL;
        assert_int_equal(map_del(&m, all[victim], &out), MAP_OK);
        assert_ptr_equal(out, val(victim + 1));
        assert_int_equal(m.len, 5);
        assert_int_equal(occupied_slots(&m), 5);
        for (size_t i = 0; i < 6; i++) {
            if (i == victim)
                assert_null(map_get(&m, all[i]));
            else
                assert_ptr_equal(map_get(&m, all[i]), val(i + 1));
        }
        /* Delete the rest one by one, checking the survivors every time. */
        for (size_t d = 0; d < 6; d++) {
            if (d == victim)
                continue;
            assert_int_equal(map_del(&m, all[d], NULL), MAP_OK);
            for (size_t i = d + 1; i < 6; i++) {
                if (i != victim)
                    assert_ptr_equal(map_get(&m, all[i]), val(i + 1));
            }
        }
        assert_int_equal(m.len, 0);
        assert_int_equal(occupied_slots(&m), 0);
        map_fini(&m);
    }
}

/*
 * Backward shift must not move an entry before its home: keys A, B (home 3), C (home 5) and
 * D (home 4) sit in 3, 4, 5, 6. Deleting A moves B to 3, leaves C in 5 and moves D into 4.
 */
static void test_delete_does_not_move_entry_before_its_home(void **state)
{
    (void)state;
    map_key_t h3[2], h5[1], h4[1];
    keys_with_home(3, 11, h3, 2);
    keys_with_home(5, 12, h5, 1);
    keys_with_home(4, 13, h4, 1);
    map_t m;
    map_init(&m);
    assert_int_equal(map_put(&m, h3[0], val(1)), MAP_OK);
    assert_int_equal(map_put(&m, h3[1], val(2)), MAP_OK);
    assert_int_equal(map_put(&m, h5[0], val(3)), MAP_OK);
    assert_int_equal(map_put(&m, h4[0], val(4)), MAP_OK);
    assert_ptr_equal(m.slots[3].value, val(1));
    assert_ptr_equal(m.slots[4].value, val(2));
    assert_ptr_equal(m.slots[5].value, val(3));
    assert_ptr_equal(m.slots[6].value, val(4));
    assert_int_equal(map_del(&m, h3[0], NULL), MAP_OK);
    assert_ptr_equal(m.slots[3].value, val(2));
    assert_ptr_equal(m.slots[4].value, val(4));
    assert_ptr_equal(m.slots[5].value, val(3));
    assert_null(m.slots[6].value);
    assert_ptr_equal(map_get(&m, h3[1]), val(2));
    assert_ptr_equal(map_get(&m, h5[0]), val(3));
    assert_ptr_equal(map_get(&m, h4[0]), val(4));
    map_fini(&m);
}

typedef struct {
    map_key_t key;
    void *value;
} ref_entry_t;

static long ref_find(const ref_entry_t *ref, size_t n, map_key_t k)
{
    for (size_t i = 0; i < n; i++) {
        if (ref[i].key.a == k.a && ref[i].key.b == k.b)
            return (long)i;
    }
    return -1;
}

/*
 * Random puts, gets and many deletes from a small key domain (so the map churns around a few
 * hundred entries with long probe runs), checked against a reference array. After every delete
 * every remaining key must still be found with its value; after every step len must match.
 */
static void test_randomized_against_reference_with_many_deletes(void **state)
{
    (void)state;
    static const uint64_t seeds[] = {1, 0xC0FFEE, 20240601, 0xDEADBEEFULL};
    enum { DOMAIN = 600, STEPS = 60000 };
    ref_entry_t *ref = calloc(DOMAIN, sizeof(*ref));
    assert_non_null(ref);
    for (size_t si = 0; si < sizeof(seeds) / sizeof(seeds[0]); si++) {
        uint64_t rng = seeds[si];
        size_t n = 0;
        size_t deletes = 0;
        map_t m;
        map_init(&m);
        for (size_t step = 0; step < STEPS; step++) {
            uint64_t r = rng_splitmix64(&rng);
            /* Keys collide in `a` often and differ in `b`, and vice versa. */
            uint64_t x = rng_splitmix64(&rng) % DOMAIN;
            map_key_t k = key(x / 3, x % 3 == 0 ? x : x * 1000003);
            long at = ref_find(ref, n, k);
            /* Phases: grow for a while, then delete-heavy, so the map shrinks to near empty. */
            int delete_heavy = (step / 5000) % 2 == 1;
            unsigned op = (unsigned)(r % 100);
            unsigned put_share = delete_heavy ? 25 : 60;
            if (op < put_share) {
                void *v = val((size_t)(rng_splitmix64(&rng) % sizeof(g_values)));
                map_status_t st = map_put(&m, k, v);
                if (at >= 0) {
                    if (st != MAP_EEXIST)
                        print_error("seed %llu step %zu: put of present key gave %d\n",
                                    (unsigned long long)seeds[si], step, (int)st);
                    assert_int_equal(st, MAP_EEXIST);
                    assert_ptr_equal(map_get(&m, k), ref[at].value);
                } else {
                    assert_int_equal(st, MAP_OK);
                    ref[n++] = (ref_entry_t){k, v};
                }
            } else if (op < 90) {
                void *out = NULL;
                map_status_t st = map_del(&m, k, &out);
                if (at >= 0) {
                    if (st != MAP_OK)
                        print_error("seed %llu step %zu: del of present key gave %d\n",
                                    (unsigned long long)seeds[si], step, (int)st);
                    assert_int_equal(st, MAP_OK);
                    assert_ptr_equal(out, ref[at].value);
                    ref[at] = ref[--n];
                    deletes++;
                    /* Backward shift is the risky part: every survivor must still be found. */
                    for (size_t i = 0; i < n; i++) {
                        if (map_get(&m, ref[i].key) != ref[i].value)
                            print_error("seed %llu step %zu: key (%llu,%llu) lost after delete\n",
                                        (unsigned long long)seeds[si], step,
                                        (unsigned long long)ref[i].key.a,
                                        (unsigned long long)ref[i].key.b);
                        assert_ptr_equal(map_get(&m, ref[i].key), ref[i].value);
                    }
                    assert_null(map_get(&m, k));
                } else {
                    assert_int_equal(st, MAP_ENOTFOUND);
                }
            } else {
                void *got = map_get(&m, k);
                if (at >= 0)
                    assert_ptr_equal(got, ref[at].value);
                else
                    assert_null(got);
            }
            assert_int_equal(m.len, n);
            if (step % 997 == 0)
                assert_int_equal(occupied_slots(&m), n);
        }
        assert_true(deletes > STEPS / 10);
        assert_int_equal(occupied_slots(&m), n);
        map_fini(&m);
    }
    free(ref);
}

static void test_status_str_covers_every_status(void **state)
{
    (void)state;
    const char *seen[MAP_STATUS_COUNT];
    for (int i = 0; i < MAP_STATUS_COUNT; i++) {
        seen[i] = map_status_str((map_status_t)i);
        assert_non_null(seen[i]);
        assert_true(strlen(seen[i]) > 0);
        assert_string_not_equal(seen[i], "unknown map status");
        for (int j = 0; j < i; j++)
            assert_string_not_equal(seen[i], seen[j]);
    }
    assert_string_equal(map_status_str(MAP_OK), "ok");
    assert_string_equal(map_status_str(MAP_EEXIST), "key already present");
    assert_string_equal(map_status_str(MAP_STATUS_COUNT), "unknown map status");
    assert_string_equal(map_status_str((map_status_t)-1), "unknown map status");
    assert_string_equal(map_status_str((map_status_t)1000), "unknown map status");
}

/* Keys a client chose to share one home slot under an unseeded hash (found by trying
 * signatures, as anyone can offline) do not share one in a map: it takes the process's secret
 * seed with its first slots (map.c invariant 4), so no lookup scans their run. */
static void test_keys_aimed_at_one_slot_spread_under_the_seed(void **state)
{
    (void)state;
    enum { AIMED = 1500, SLOT_BITS = 12 };
    static map_key_t keys[AIMED];
    size_t n = 0;
    for (uint64_t a = 1; n < AIMED; a++) {
        map_key_t k = key(a, 7);
        if ((map_hash_seeded(k, 0, 0) & ((1u << SLOT_BITS) - 1)) == 0)
            keys[n++] = k;
    }
    map_t m;
    map_init(&m);
    /* a table at a fifth of its room: seeded, the runs are a few slots long whatever the seed;
     * at three quarters (as full as the map gets) the longest of 1,500 random keys' runs can
     * pass 64 */
    assert_int_equal(map_reserve(&m, 4 * AIMED), MAP_OK);
    for (size_t i = 0; i < AIMED; i++)
        assert_int_equal(map_put(&m, keys[i], val(i)), MAP_OK);
    hashseed_t s = hashseed_get();
    assert_true(s.a != 0 || s.b != 0);
    assert_true(m.seed_a == s.a && m.seed_b == s.b);
    size_t longest = 0;
    for (size_t i = 0; i < m.cap; i++) {
        if (m.slots[i].value == NULL)
            continue;
        size_t home = (size_t)map_hash_seeded(m.slots[i].key, m.seed_a, m.seed_b) & (m.cap - 1);
        size_t dist = (i - home) & (m.cap - 1);
        longest = dist > longest ? dist : longest;
    }
    assert_true(longest < 256); /* unseeded: two runs of about 750 */
    for (size_t i = 0; i < AIMED; i++)
        assert_ptr_equal(map_get(&m, keys[i]), val(i));
    map_fini(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_map_finds_nothing),
        cmocka_unit_test(test_prefetch_changes_nothing),
        cmocka_unit_test(test_put_then_get_returns_value),
        cmocka_unit_test(test_keys_differing_in_one_half_are_distinct),
        cmocka_unit_test(test_put_existing_key_is_eexist_and_keeps_value),
        cmocka_unit_test(test_del_returns_value_and_removes_key),
        cmocka_unit_test(test_del_accepts_null_out_value),
        cmocka_unit_test(test_del_missing_key_is_enotfound_and_changes_nothing),
        cmocka_unit_test(test_growth_past_many_resizes),
        cmocka_unit_test(test_reserve_makes_next_puts_not_reallocate),
        cmocka_unit_test(test_fini_resets_map_for_reuse),
        cmocka_unit_test(test_delete_in_cluster_wrapping_past_end_keeps_keys_reachable),
        cmocka_unit_test(test_delete_does_not_move_entry_before_its_home),
        cmocka_unit_test(test_randomized_against_reference_with_many_deletes),
        cmocka_unit_test(test_status_str_covers_every_status),
        cmocka_unit_test(test_keys_aimed_at_one_slot_spread_under_the_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
