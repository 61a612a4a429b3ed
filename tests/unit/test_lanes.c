/*
 * test_lanes.c - the rolling-lane rules, one test per rule, at their boundaries.
 *
 * Every constant of the lane policy (2,048 lanes, 1% -> 10% threshold, 16-token floor,
 * 128-token cap, quiesce below 4 queued items after 5 s, or under the `lanes` policy's rule
 * with none queued) has a test here that fails if it changes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/invariant.h"
#include "scheduler/core/lanes.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEC 1000000000ull

static lanes_t *new_lanes(void)
{
    lanes_t *l = NULL;
    assert_int_equal(lanes_create(LANES_MAX, NULL, NULL, &l), SCHED_OK);
    return l;
}

/* Assigns and accepts one item; returns the choice. */
static lanes_choice_t put(lanes_t *l, uint32_t tokens, uint64_t now)
{
    lanes_choice_t c;
    assert_int_equal(lanes_assign(l, tokens, &c), SCHED_OK);
    lanes_accept(l, &c, now);
    return c;
}

static uint32_t target_of(const lanes_t *l, uint32_t lane)
{
    lanes_lane_t info;
    assert_int_equal(lanes_get(l, lane, &info), SCHED_OK);
    return info.target;
}

/* Opens `count` lanes far above everything else: targets start, start+200, ... (each step
 * wastes 200 > 128 tokens against its neighbour, so each item opens a lane). */
static void open_far_lanes(lanes_t *l, uint32_t count, uint32_t start)
{
    for (uint32_t i = 0; i < count; i++)
        assert_true(put(l, start + i * 200, 0).open);
}

static void test_constants_are_the_policy(void **state)
{
    (void)state;
    assert_int_equal(LANES_MAX, 2048);
    assert_int_equal(LANES_THRESHOLD_MIN_PCT, 1);
    assert_int_equal(LANES_THRESHOLD_MAX_PCT, 10);
    assert_int_equal(LANES_FLOOR_TOKENS, 16);
    assert_int_equal(LANES_CAP_TOKENS, 128);
    assert_int_equal(LANES_QUIESCE_ITEMS, 4);
    assert_true(LANES_QUIESCE_IDLE_NS == 5 * SEC);
    assert_true(LANES_TICK_NS == 1 * SEC);
}

static void test_first_item_opens_a_lane_at_its_length(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    lanes_choice_t c = put(l, 321, 0);
    assert_true(c.open);
    assert_int_equal(c.lane, 0);
    assert_int_equal(target_of(l, 0), 321);
    assert_int_equal(lanes_in_use(l), 1);
    assert_int_equal(lanes_counters(l)->opened, 1);
    lanes_destroy(l);
}

static void test_threshold_is_one_percent_at_zero_lanes(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    uint64_t num, den;
    lanes_threshold(l, 0, &num, &den);
    assert_true(num * 100 == den * 1);
    lanes_destroy(l);
}

static void test_threshold_is_five_and_a_half_percent_at_1024_lanes(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    uint64_t num, den;
    lanes_threshold(l, 1024, &num, &den);
    assert_true(num * 1000 == den * 55);
    lanes_destroy(l);
}

static void test_threshold_at_2047_lanes_is_just_under_ten_percent(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    uint64_t num, den;
    lanes_threshold(l, 2047, &num, &den);
    /* 1% + 9% * 2047/2048 = (2048 + 9 * 2047) / 204800 */
    assert_true(num * 204800 == den * (2048 + 9 * 2047));
    lanes_threshold(l, 2048, &num, &den);
    assert_true(num * 10 == den * 1);
    lanes_destroy(l);
}

static void test_threshold_near_one_percent_with_one_lane(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 2000, 0);
    /* waste 20 of 2000 = 1.00% is not over 1% + 9%/2048: joins */
    assert_false(put(l, 1980, 0).open);
    /* waste 21 of 2000 = 1.05%: over the threshold and >= 16 tokens: opens */
    assert_true(put(l, 1979, 0).open);
    lanes_destroy(l);
}

static void test_threshold_at_1024_lanes_in_use(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 1000, 0);
    open_far_lanes(l, 1023, 5000);
    assert_int_equal(lanes_in_use(l), 1024);
    /* waste 55 of 1000 = 5.5% is exactly the threshold, not over it: joins */
    lanes_choice_t c = put(l, 945, 0);
    assert_false(c.open);
    assert_int_equal(c.lane, 0);
    /* waste 56 of 1000 = 5.6%: opens */
    assert_true(put(l, 944, 0).open);
    assert_int_equal(lanes_in_use(l), 1025);
    lanes_destroy(l);
}

static void test_threshold_at_2047_lanes_in_use(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 1280, 0);
    open_far_lanes(l, 2046, 5000);
    assert_int_equal(lanes_in_use(l), 2047);
    /* waste 127 of 1280 = 9.92% < 9.9956%: joins */
    assert_false(put(l, 1153, 0).open);
    /* waste 128 of 1280 = 10% > 9.9956% (and not over the 128-token cap): opens */
    assert_true(put(l, 1152, 0).open);
    assert_int_equal(lanes_in_use(l), 2048);
    lanes_destroy(l);
}

static void test_does_not_open_lane_for_waste_of_15_tokens(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 100, 0);
    lanes_choice_t c = put(l, 85, 0); /* 15% waste, but under the 16-token floor */
    assert_false(c.open);
    assert_int_equal(c.lane, 0);
    assert_int_equal(lanes_in_use(l), 1);
    assert_int_equal(lanes_counters(l)->reuses, 1);
    lanes_destroy(l);
}

static void test_opens_lane_for_waste_of_16_tokens(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 100, 0);
    lanes_choice_t c = put(l, 84, 0);
    assert_true(c.open);
    assert_int_equal(c.lane, 1);
    assert_int_equal(target_of(l, 1), 84);
    lanes_destroy(l);
}

static void test_does_not_open_lane_for_waste_of_128_tokens_under_threshold(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 20000, 0);
    assert_false(put(l, 19872, 0).open); /* 0.64%: under the threshold, and 128 is not > 128 */
    lanes_destroy(l);
}

static void test_opens_lane_when_waste_exceeds_128_tokens(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 20000, 0);
    assert_true(put(l, 19871, 0).open); /* 0.645%: under the threshold, but 129 > 128 */
    lanes_destroy(l);
}

static void test_force_fits_at_2048_lanes(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    open_far_lanes(l, 2048, 1000);
    assert_int_equal(lanes_in_use(l), 2048);
    /* 500 tokens below the smallest lane (1000) would open a lane: the budget is spent */
    lanes_choice_t c = put(l, 500, 0);
    assert_false(c.open);
    assert_true(c.force_fit);
    assert_int_equal(c.lane, 0);
    assert_int_equal(lanes_in_use(l), 2048);
    assert_int_equal(lanes_counters(l)->force_fits, 1);
    /* force-fitting an item longer than every lane raises the top lane's target */
    c = put(l, 1000 + 2047 * 200 + 5000, 0);
    assert_true(c.force_fit);
    assert_int_equal(c.lane, 2047);
    assert_int_equal(target_of(l, 2047), 1000 + 2047 * 200 + 5000);
    lanes_destroy(l);
}

static void test_force_fit_reactivates_best_quiescing_lane_when_none_is_active(void **state)
{
    (void)state;
    lanes_t *l = NULL;
    assert_int_equal(lanes_create(2, NULL, NULL, &l), SCHED_OK);
    put(l, 100, 0);
    put(l, 1000, 0);
    /* both quiesce, each still holds an item */
    assert_int_equal(lanes_tick(l, 5 * SEC, LANES_QUIESCE_RULE_SPARSE), 2);
    assert_int_equal(lanes_sorted_count(l), 0);
    lanes_choice_t c = put(l, 900, 5 * SEC);
    assert_true(c.force_fit && c.reactivate);
    assert_int_equal(c.lane, 1); /* 100/1000 wastes less than 800/900 */
    lanes_lane_t info;
    lanes_get(l, 1, &info);
    assert_int_equal(info.state, LANE_ACTIVE);
    assert_int_equal(info.target, 1000);
    assert_int_equal(lanes_sorted_count(l), 1);
    c = put(l, 2000, 5 * SEC); /* joins the reactivated lane from below, raising it */
    assert_int_equal(c.lane, 1);
    assert_int_equal(target_of(l, 1), 2000);
    lanes_destroy(l);
}

/* The same under the EMPTY rule, where only lanes holding nothing queued quiesce: both lanes'
 * items are in flight, both quiesce, and at the budget the next item still finds a lane. */
static void test_force_fit_reactivates_a_quiescing_lane_under_the_empty_rule(void **state)
{
    (void)state;
    lanes_t *l = NULL;
    assert_int_equal(lanes_create(2, NULL, NULL, &l), SCHED_OK);
    put(l, 100, 0);
    put(l, 1000, 0);
    lanes_note_dispatched(l, 0, 1, 100);
    lanes_note_dispatched(l, 1, 1, 1000);
    assert_int_equal(lanes_tick(l, 5 * SEC, LANES_QUIESCE_RULE_EMPTY), 2);
    assert_int_equal(lanes_sorted_count(l), 0);
    lanes_choice_t c = put(l, 900, 5 * SEC);
    assert_true(c.force_fit && c.reactivate);
    assert_int_equal(c.lane, 1);
    lanes_lane_t info;
    lanes_get(l, 1, &info);
    assert_int_equal(info.state, LANE_ACTIVE);
    assert_int_equal(info.queued_items, 1);
    assert_int_equal(info.inflight_items, 1);
    lanes_note_completed(l, 0, 1); /* lane 0 drains and goes; lane 1 holds the new item */
    assert_int_equal(lanes_in_use(l), 1);
    lanes_destroy(l);
}

static void test_lane_target_rises_when_longer_item_joins(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 100, 0);
    lanes_choice_t c = put(l, 110, 0); /* 10 tokens over: under the floor, joins lane 0 */
    assert_false(c.open);
    assert_int_equal(c.new_target, 110);
    assert_int_equal(target_of(l, 0), 110);
    put(l, 95, 0); /* joining from below never lowers the target */
    assert_int_equal(target_of(l, 0), 110);
    lanes_destroy(l);
}

static void test_prefers_neighbour_with_smaller_waste_fraction(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 100, 0);
    put(l, 300, 0);
    /* 110: lane 300 wastes 190/300, lane 100 wastes 10/110: the lower lane wins and rises */
    lanes_choice_t c = put(l, 110, 0);
    assert_int_equal(c.lane, 0);
    assert_int_equal(target_of(l, 0), 110);
    /* 290: lane 300 wastes 10/300 = 3.3%, lane 110 wastes 180/290: the upper lane wins */
    c = put(l, 290, 0);
    assert_int_equal(c.lane, 1);
    assert_int_equal(target_of(l, 1), 300);
    lanes_destroy(l);
}

static void test_targets_stay_sorted(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    uint32_t lens[] = {500, 100, 900, 300, 120, 700, 110, 305, 1000, 50};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        put(l, lens[i], 0);
    for (uint32_t i = 1; i < lanes_sorted_count(l); i++) {
        assert_true(target_of(l, lanes_sorted_lane(l, i - 1)) <=
                    target_of(l, lanes_sorted_lane(l, i)));
    }
    lanes_destroy(l);
}

/* lanes_sorted_pos names an active lane's place in target order (what the lanes policy walks
 * out from when it merges neighbours) and nothing for a lane that takes no items. */
static void test_sorted_pos_is_the_place_in_target_order(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    uint32_t lens[] = {500, 100, 900};
    uint32_t lane[3];
    for (int i = 0; i < 3; i++)
        lane[i] = put(l, lens[i], 0).lane;
    uint32_t pos = 99;
    assert_true(lanes_sorted_pos(l, lane[1], &pos) && pos == 0);
    assert_true(lanes_sorted_pos(l, lane[0], &pos) && pos == 1);
    assert_true(lanes_sorted_pos(l, lane[2], &pos) && pos == 2);
    for (uint32_t i = 0; i < lanes_sorted_count(l); i++)
        assert_true(lanes_sorted_pos(l, lanes_sorted_lane(l, i), &pos) && pos == i);
    /* all three quiesce: no longer in the order */
    lanes_tick(l, 6 * SEC, LANES_QUIESCE_RULE_SPARSE);
    pos = 99;
    assert_false(lanes_sorted_pos(l, lane[0], &pos));
    assert_int_equal(pos, 99);
    assert_false(lanes_sorted_pos(l, 1000, &pos));
    lanes_destroy(l);
}

static void test_does_not_quiesce_at_4_99_seconds(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    for (int i = 0; i < 3; i++)
        put(l, 100, 10 * SEC);
    assert_int_equal(lanes_tick(l, 10 * SEC + 4990000000ull, LANES_QUIESCE_RULE_SPARSE), 0);
    lanes_lane_t info;
    lanes_get(l, 0, &info);
    assert_int_equal(info.state, LANE_ACTIVE);
    lanes_destroy(l);
}

static void test_quiesces_lane_with_3_items_after_5_seconds(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    for (int i = 0; i < 3; i++)
        put(l, 100, 10 * SEC);
    assert_int_equal(lanes_tick(l, 15 * SEC, LANES_QUIESCE_RULE_SPARSE), 1);
    lanes_lane_t info;
    lanes_get(l, 0, &info);
    assert_int_equal(info.state, LANE_QUIESCING);
    assert_int_equal(info.queued_items, 3);
    assert_int_equal(lanes_in_use(l), 1);
    assert_int_equal(lanes_sorted_count(l), 0);
    assert_int_equal(lanes_counters(l)->quiesced, 1);
    /* a quiescing lane takes no new items: the same length opens another lane */
    lanes_choice_t c = put(l, 100, 15 * SEC);
    assert_true(c.open);
    assert_int_equal(c.lane, 1);
    lanes_destroy(l);
}

static void test_does_not_quiesce_lane_with_4_items(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    for (int i = 0; i < 4; i++)
        put(l, 100, 10 * SEC);
    assert_int_equal(lanes_tick(l, 15 * SEC, LANES_QUIESCE_RULE_SPARSE), 0);
    lanes_lane_t info;
    lanes_get(l, 0, &info);
    assert_int_equal(info.state, LANE_ACTIVE);
    lanes_destroy(l);
}

/* The EMPTY rule (the lanes policy): a lane whose items queue is kept however long it saw no
 * arrival, and takes the next item of its length; with nothing queued (its items in flight) it
 * quiesces at 5 s as the article's lanes do. */
static void test_empty_rule_keeps_a_lane_whose_items_queue(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 100, 10 * SEC);
    assert_int_equal(lanes_tick(l, 40 * SEC, LANES_QUIESCE_RULE_EMPTY), 0);
    lanes_choice_t c = put(l, 100, 40 * SEC);
    assert_false(c.open);
    assert_int_equal(c.lane, 0);
    lanes_note_dispatched(l, 0, 2, 200);
    assert_int_equal(lanes_tick(l, 44 * SEC + 999999999ull, LANES_QUIESCE_RULE_EMPTY), 0);
    assert_int_equal(lanes_tick(l, 45 * SEC, LANES_QUIESCE_RULE_EMPTY), 1);
    lanes_lane_t info;
    lanes_get(l, 0, &info);
    assert_int_equal(info.state, LANE_QUIESCING);
    assert_int_equal(info.inflight_items, 2);
    lanes_destroy(l);
}

typedef struct {
    int calls;
    uint32_t lane;
    void *user;
} release_log_t;

static void record_release(void *ctx, uint32_t lane, void *user)
{
    release_log_t *log = ctx;
    log->calls++;
    log->lane = lane;
    log->user = user;
}

static void test_quiescing_lane_is_released_when_drained(void **state)
{
    (void)state;
    release_log_t log = {0};
    lanes_t *l = NULL;
    assert_int_equal(lanes_create(LANES_MAX, record_release, &log, &l), SCHED_OK);
    int marker;
    put(l, 100, 0);
    put(l, 100, 0);
    lanes_user_set(l, 0, &marker);
    lanes_tick(l, 5 * SEC, LANES_QUIESCE_RULE_SPARSE);
    lanes_note_dispatched(l, 0, 2, 200);
    lanes_note_completed(l, 0, 1);
    assert_int_equal(log.calls, 0); /* one item still in flight */
    lanes_note_completed(l, 0, 1);
    assert_int_equal(log.calls, 1);
    assert_int_equal(log.lane, 0);
    assert_ptr_equal(log.user, &marker);
    assert_int_equal(lanes_in_use(l), 0);
    lanes_destroy(l);
}

static void test_released_lane_id_is_reused_from_free_list(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    /* lane 0 (100) and lane 2 (5000) stay busy; lane 1 (1000) holds one item */
    for (int i = 0; i < 4; i++)
        put(l, 100, 0);
    put(l, 1000, 0);
    for (int i = 0; i < 4; i++)
        put(l, 5000, 0);
    lanes_note_dispatched(l, 1, 1, 1000);
    lanes_note_completed(l, 1, 1);
    /* lane 1, empty, quiesces and is released */
    assert_int_equal(lanes_tick(l, 5 * SEC, LANES_QUIESCE_RULE_SPARSE), 1);
    assert_int_equal(lanes_in_use(l), 2);
    lanes_choice_t c = put(l, 2500, 5 * SEC);
    assert_true(c.open);
    assert_int_equal(c.lane, 1);
    assert_int_equal(target_of(l, 1), 2500);
    assert_int_equal(lanes_in_use(l), 3);
    lanes_destroy(l);
}

static void test_returned_items_count_as_queued_again(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    put(l, 100, 0);
    put(l, 100, 0);
    lanes_note_dispatched(l, 0, 2, 200);
    assert_true(lanes_queued_tokens(l) == 0);
    lanes_note_returned(l, 0, 2, 200);
    lanes_lane_t info;
    lanes_get(l, 0, &info);
    assert_int_equal(info.queued_items, 2);
    assert_int_equal(info.inflight_items, 0);
    assert_true(lanes_queued_tokens(l) == 200);
    lanes_destroy(l);
}

static void test_lanes_walk_in_descending_queued_tokens(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    for (int i = 0; i < 3; i++)
        put(l, 100, 0); /* lane 0: 300 tokens */
    put(l, 1000, 0);    /* lane 1: 1000 tokens */
    put(l, 5000, 0);    /* lane 2: 5000 tokens */
    put(l, 300, 0);     /* lane 3: 300 tokens, ties with lane 0 */
    uint32_t order[4], lane, prev;
    int n = 0;
    for (int more = lanes_next_by_tokens(l, NULL, &lane); more && n < 5;
         prev = lane, more = lanes_next_by_tokens(l, &prev, &lane))
        order[n++] = lane;
    assert_int_equal(n, 4);
    assert_int_equal(order[0], 2);
    assert_int_equal(order[1], 1);
    assert_int_equal(order[2], 0);
    assert_int_equal(order[3], 3);
    lanes_destroy(l);
}

static void test_rejects_zero_tokens(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    lanes_choice_t c;
    assert_int_equal(lanes_assign(l, 0, &c), SCHED_EINVAL);
    assert_int_equal(lanes_create(0, NULL, NULL, &l), SCHED_EINVAL);
    lanes_destroy(l);
}

static void test_budget_of_128_lanes_is_respected(void **state)
{
    (void)state;
    lanes_t *l = NULL;
    assert_int_equal(lanes_create(128, NULL, NULL, &l), SCHED_OK);
    for (uint32_t i = 0; i < 200; i++)
        assert_int_equal(put(l, 1000 + i * 200, 0).open, i < 128);
    assert_int_equal(lanes_in_use(l), 128);
    assert_int_equal(lanes_counters(l)->force_fits, 72);
    uint64_t num, den;
    lanes_threshold(l, 64, &num, &den); /* half full: 1% + 4.5% */
    assert_true(num * 1000 == den * 55);
    lanes_destroy(l);
}

/* A choice that did not come from lanes_assign can break the order of targets: lanes_check sees
 * it, and in a debug build the accept itself aborts (the check runs after every mutation). */
static void test_check_catches_targets_out_of_order(void **state)
{
    (void)state;
    lanes_t *l = new_lanes();
    assert_true(put(l, 100, 0).open);
    assert_true(put(l, 1000, 0).open);
    assert_true(lanes_check(l));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)freopen("/dev/null", "w", stderr);
        lanes_choice_t forged = {.lane = 0, .tokens = 5000, .new_target = 5000};
        lanes_accept(l, &forged, 0); /* lane 0 now above lane 1 */
        _exit(lanes_check(l) ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (INVARIANTS_CHECKED)
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    else
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    assert_true(lanes_check(l)); /* the parent's lanes were never touched */
    lanes_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constants_are_the_policy),
        cmocka_unit_test(test_first_item_opens_a_lane_at_its_length),
        cmocka_unit_test(test_threshold_is_one_percent_at_zero_lanes),
        cmocka_unit_test(test_threshold_is_five_and_a_half_percent_at_1024_lanes),
        cmocka_unit_test(test_threshold_at_2047_lanes_is_just_under_ten_percent),
        cmocka_unit_test(test_threshold_near_one_percent_with_one_lane),
        cmocka_unit_test(test_threshold_at_1024_lanes_in_use),
        cmocka_unit_test(test_threshold_at_2047_lanes_in_use),
        cmocka_unit_test(test_does_not_open_lane_for_waste_of_15_tokens),
        cmocka_unit_test(test_opens_lane_for_waste_of_16_tokens),
        cmocka_unit_test(test_does_not_open_lane_for_waste_of_128_tokens_under_threshold),
        cmocka_unit_test(test_opens_lane_when_waste_exceeds_128_tokens),
        cmocka_unit_test(test_force_fits_at_2048_lanes),
        cmocka_unit_test(test_force_fit_reactivates_best_quiescing_lane_when_none_is_active),
        cmocka_unit_test(test_lane_target_rises_when_longer_item_joins),
        cmocka_unit_test(test_prefers_neighbour_with_smaller_waste_fraction),
        cmocka_unit_test(test_targets_stay_sorted),
        cmocka_unit_test(test_sorted_pos_is_the_place_in_target_order),
        cmocka_unit_test(test_does_not_quiesce_at_4_99_seconds),
        cmocka_unit_test(test_quiesces_lane_with_3_items_after_5_seconds),
        cmocka_unit_test(test_does_not_quiesce_lane_with_4_items),
        cmocka_unit_test(test_empty_rule_keeps_a_lane_whose_items_queue),
        cmocka_unit_test(test_force_fit_reactivates_a_quiescing_lane_under_the_empty_rule),
        cmocka_unit_test(test_quiescing_lane_is_released_when_drained),
        cmocka_unit_test(test_released_lane_id_is_reused_from_free_list),
        cmocka_unit_test(test_returned_items_count_as_queued_again),
        cmocka_unit_test(test_lanes_walk_in_descending_queued_tokens),
        cmocka_unit_test(test_rejects_zero_tokens),
        cmocka_unit_test(test_budget_of_128_lanes_is_respected),
        cmocka_unit_test(test_check_catches_targets_out_of_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
