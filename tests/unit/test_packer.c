/*
 * test_packer.c - the four-integer contract, one test per rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "scheduler/core/packer.h"

static packer_result_t pack(uint32_t batch_size, uint32_t batch_tokens, const uint32_t *tokens,
                            size_t n)
{
    packer_contract_t c = {batch_size, batch_tokens, 0};
    packer_result_t r;
    assert_int_equal(packer_fill(&c, tokens, n, &r), SCHED_OK);
    return r;
}

static void test_pad_multiple_is_8(void **state)
{
    (void)state;
    assert_int_equal(PACKER_PAD_MULTIPLE, 8);
    assert_int_equal(packer_pad(1), 8);
    assert_int_equal(packer_pad(8), 8);
    assert_int_equal(packer_pad(9), 16);
    assert_int_equal(packer_pad(1000), 1000);
    assert_int_equal(packer_pad(1001), 1008);
}

static void test_pad_to_is_longest_in_batch_rounded_up_to_8(void **state)
{
    (void)state;
    uint32_t t[] = {10, 17, 12};
    packer_result_t r = pack(8, 1000, t, 3);
    assert_int_equal(r.count, 3);
    assert_int_equal(r.pad_to, 24);
    assert_int_equal(r.padded_tokens, 72);
    assert_int_equal(r.real_tokens, 39);
    assert_false(r.over_budget);
}

static void test_pad_to_ignores_longer_items_left_in_queue(void **state)
{
    (void)state;
    uint32_t t[] = {100, 100, 100, 900};
    packer_result_t r = pack(3, 100000, t, 4);
    assert_int_equal(r.count, 3);
    assert_int_equal(r.pad_to, 104); /* the queue's longest (900) is not in the batch */
}

static void test_stops_at_max_batch_size(void **state)
{
    (void)state;
    uint32_t t[] = {8, 8, 8, 8, 8};
    packer_result_t r = pack(4, 100000, t, 5);
    assert_int_equal(r.count, 4);
}

static void test_stops_at_padded_token_budget(void **state)
{
    (void)state;
    uint32_t t[] = {100, 100, 100, 100};
    assert_int_equal(pack(16, 312, t, 4).count, 3); /* 3 * 104 = 312 fits exactly */
    assert_int_equal(pack(16, 311, t, 4).count, 2);
}

static void test_longer_item_raises_pad_for_whole_batch(void **state)
{
    (void)state;
    uint32_t t[] = {8, 8, 8, 64};
    /* 3 * 8 fits; with the 64-token item the batch would pad to 4 * 64 = 256 > 200 */
    packer_result_t r = pack(16, 200, t, 4);
    assert_int_equal(r.count, 3);
    assert_int_equal(r.pad_to, 8);
    r = pack(16, 256, t, 4);
    assert_int_equal(r.count, 4);
    assert_int_equal(r.pad_to, 64);
}

static void test_single_item_over_budget_goes_alone(void **state)
{
    (void)state;
    uint32_t t[] = {5000, 10};
    packer_result_t r = pack(16, 4096, t, 2);
    assert_int_equal(r.count, 1);
    assert_int_equal(r.pad_to, 5000);
    assert_true(r.over_budget);
}

static void test_max_input_tokens_is_not_a_filter(void **state)
{
    (void)state;
    uint32_t t[] = {500, 20};
    packer_contract_t c = {4, 4096, 100};
    packer_result_t r;
    assert_int_equal(packer_fill(&c, t, 2, &r), SCHED_OK);
    assert_int_equal(r.count, 2);
    assert_int_equal(r.pad_to, 504);
}

static void test_at_least_one_item(void **state)
{
    (void)state;
    uint32_t t[] = {1};
    packer_result_t r = pack(1, 1, t, 1); /* pad 8 > budget 1: still one item */
    assert_int_equal(r.count, 1);
    assert_true(r.over_budget);
}

static void test_rejects_empty_input_and_zero_limits(void **state)
{
    (void)state;
    uint32_t t[] = {10};
    packer_result_t r = {.count = 77};
    packer_contract_t zero_size = {0, 100, 0}, zero_tokens = {4, 0, 0}, ok = {4, 100, 0};
    assert_int_equal(packer_fill(&zero_size, t, 1, &r), SCHED_EINVAL);
    assert_int_equal(packer_fill(&zero_tokens, t, 1, &r), SCHED_EINVAL);
    assert_int_equal(packer_fill(&ok, t, 0, &r), SCHED_EINVAL);
    assert_int_equal(r.count, 77); /* out untouched on failure */
}

/* The merge rule's arithmetic: the fixed cost saved against the padding added, both ways. */
static void test_merge_saving_prices_the_padding_against_the_fixed_cost(void **state)
{
    (void)state;
    packer_cost_t cost = {5000000.0, 10000.0}; /* 5 ms per batch, 10 us per padded token */
    /* 3 shorter items (pad 984) into 2 items at 1000: they pad by 16 each */
    assert_true(packer_merge_saving(&cost, 2, 1000, 3, 984) ==
                5e6 - 1e4 * (5 * 1000 - 2000 - 2952));
    /* 1 longer item (pad 1016) over 4 items at 1000: those 4 pad up by 16 each */
    assert_true(packer_merge_saving(&cost, 4, 1000, 1, 1016) ==
                5e6 - 1e4 * (5 * 1016 - 4000 - 1016));
    /* the same pad: nothing added, the whole fixed cost saved */
    assert_true(packer_merge_saving(&cost, 3, 512, 2, 512) == 5e6);
    /* far apart: the padding outweighs the batch saved */
    assert_true(packer_merge_saving(&cost, 1, 4096, 1, 1024) < 0.0);
    /* a worker with no fixed cost never gains by merging */
    packer_cost_t free_batches = {0.0, 10000.0};
    assert_true(packer_merge_saving(&free_batches, 1, 1000, 1, 992) < 0.0);
}

/* A prefix is the producer's claim: priced at what the contract's worker runs at most. */
static void test_a_prefix_is_priced_at_what_the_worker_runs(void **state)
{
    (void)state;
    packer_contract_t batch_only = {8, 4096, 0}, long_inputs = {8, 4096, 16384};
    assert_int_equal(packer_prefix_price(&batch_only, 1000), 1000);
    assert_int_equal(packer_prefix_price(&batch_only, 4096), 4096);
    assert_int_equal(packer_prefix_price(&batch_only, 100000), 4096);
    assert_int_equal(packer_prefix_price(&long_inputs, 100000), 16384);
    assert_int_equal(packer_prefix_price(&long_inputs, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_saving_prices_the_padding_against_the_fixed_cost),
        cmocka_unit_test(test_a_prefix_is_priced_at_what_the_worker_runs),
        cmocka_unit_test(test_pad_multiple_is_8),
        cmocka_unit_test(test_pad_to_is_longest_in_batch_rounded_up_to_8),
        cmocka_unit_test(test_pad_to_ignores_longer_items_left_in_queue),
        cmocka_unit_test(test_stops_at_max_batch_size),
        cmocka_unit_test(test_stops_at_padded_token_budget),
        cmocka_unit_test(test_longer_item_raises_pad_for_whole_batch),
        cmocka_unit_test(test_single_item_over_budget_goes_alone),
        cmocka_unit_test(test_max_input_tokens_is_not_a_filter),
        cmocka_unit_test(test_at_least_one_item),
        cmocka_unit_test(test_rejects_empty_input_and_zero_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
