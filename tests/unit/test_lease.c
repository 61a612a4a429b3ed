/*
 * test_lease.c - the lease decisions (scheduler/daemon/lease.c) on an exact clock: who serves,
 * until when, and that no sequence of answers lets a holder serve past the moment its key could
 * expire in the bucket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/rng.h"
#include "scheduler/daemon/lease.h"

#define MS 1000000ull
/* A call whose request never reached the bucket fails after this long (nats.c's wait). */
#define LEASE_TEST_TIMEOUT (500 * MS)

static lease_timing_t timing(void)
{
    lease_timing_t t;
    assert_int_equal(lease_timing_init(&t, 3000), 0);
    return t;
}

static void test_timing_defaults_and_the_shortest_ttl(void **state)
{
    (void)state;
    lease_timing_t t = timing();
    assert_int_equal(t.ttl_ns, 3000 * MS);
    assert_int_equal(t.renew_ns, 1000 * MS);
    assert_int_equal(t.margin_ns, 600 * MS);
    assert_true(t.margin_ns < t.renew_ns);
    assert_int_equal(lease_timing_init(&t, 299), -1);
    assert_int_equal(lease_timing_init(&t, 300), 0);
    assert_int_equal(t.margin_ns, 100 * MS); /* the floor */
}

static void test_a_new_lease_creates_at_once_and_serves_after_winning(void **state)
{
    (void)state;
    lease_timing_t t = timing();
    lease_t l;
    lease_init(&l, 1000 * MS);
    assert_int_equal(lease_due(&l, 999 * MS), LEASE_ACT_NONE);
    assert_int_equal(lease_due(&l, 1000 * MS), LEASE_ACT_CREATE);
    assert_false(lease_serving(&l, 1000 * MS));
    assert_int_equal(lease_won(&l, &t, 7, 1000 * MS, 1010 * MS), 1);
    assert_true(lease_serving(&l, 1010 * MS));
    assert_int_equal(l.revision, 7);
    assert_int_equal(l.valid_until_ns, 1000 * MS + 2400 * MS); /* sent + ttl - margin */
    assert_false(lease_serving(&l, 3400 * MS));
    assert_int_equal(lease_due(&l, 1999 * MS), LEASE_ACT_NONE);
    assert_int_equal(lease_due(&l, 2000 * MS), LEASE_ACT_UPDATE);
    assert_int_equal(l.gained, 1);
}

static void test_a_held_key_refuses_the_create_and_the_standby_retries(void **state)
{
    (void)state;
    lease_timing_t t = timing();
    lease_t l;
    lease_init(&l, 0);
    assert_int_equal(lease_refused(&l, &t, 5 * MS), 0);
    assert_false(lease_serving(&l, 5 * MS));
    assert_int_equal(t.standby_ns, 300 * MS);
    assert_int_equal(lease_due(&l, 5 * MS + t.standby_ns - 1), LEASE_ACT_NONE);
    assert_int_equal(lease_due(&l, 5 * MS + t.standby_ns), LEASE_ACT_CREATE);
}

static void test_a_refused_renewal_stops_serving_at_once(void **state)
{
    (void)state;
    lease_timing_t t = timing();
    lease_t l;
    lease_init(&l, 0);
    lease_won(&l, &t, 3, 0, 1 * MS);
    assert_int_equal(lease_refused(&l, &t, 1000 * MS), 1);
    assert_false(lease_serving(&l, 1000 * MS));
    assert_int_equal(l.lost, 1);
    assert_int_equal(lease_due(&l, 2000 * MS), LEASE_ACT_CREATE);
}

/* A holder cut off from the bucket keeps serving through short failures and stops at its own
 * deadline, never later, however its retries go. */
static void test_failed_renewals_fence_the_holder_at_its_deadline(void **state)
{
    (void)state;
    lease_timing_t t = timing();
    lease_t l;
    lease_init(&l, 0);
    lease_won(&l, &t, 1, 0, 0);
    uint64_t deadline = l.valid_until_ns;
    uint64_t now = 1000 * MS;
    int fenced = 0;
    while (now < 10000 * MS) {
        assert_true(lease_due(&l, now) != LEASE_ACT_NONE || now < l.next_ns);
        int changed = lease_failed(&l, &t, now);
        assert_true(l.valid_until_ns == deadline || l.valid_until_ns == 0); /* never extended */
        if (changed) {
            assert_true(now >= deadline);
            fenced = 1;
            break;
        }
        assert_true(lease_serving(&l, now) == (now < deadline));
        now = l.next_ns;
    }
    assert_true(fenced);
    assert_false(lease_serving(&l, now));
    assert_int_equal(lease_due(&l, l.next_ns), LEASE_ACT_CREATE);
}

/*
 * Two instances against a model of the bucket (one key, a revision, an expiry measured by the
 * bucket's own clock from when it received each write), in a discrete-event simulation with
 * random request and answer delays, requests that never arrive and answers that are lost: at no
 * event do both serve, and whoever serves holds the key in the bucket.
 */
typedef struct {
    int busy;
    lease_act_t act;
    uint64_t sent, arrive, answer;
    int dropped, lost, ok;
    uint64_t rev;
} call_t;

static void check_safe(const lease_t *l, uint64_t rev, int holder, uint64_t expires, uint64_t now,
                       int *served)
{
    assert_false(lease_serving(&l[0], now) && lease_serving(&l[1], now));
    for (int i = 0; i < 2; i++) {
        if (lease_serving(&l[i], now)) {
            assert_true(rev != 0 && holder == i && now < expires);
            (*served)++;
        }
    }
}

static void test_two_instances_never_serve_at_once(void **state)
{
    (void)state;
    lease_timing_t t = timing();
    for (uint64_t seed = 1; seed <= 20; seed++) {
        rng_t rng;
        rng_seed(&rng, seed);
        lease_t l[2];
        lease_init(&l[0], 0);
        lease_init(&l[1], 7 * MS);
        call_t c[2] = {{0}};
        uint64_t rev = 0, expires = 0, next_rev = 1;
        int holder = -1, served = 0;
        for (int step = 0; step < 20000; step++) {
            /* the next event: an instance's due call, a request arriving, an answer arriving */
            uint64_t when = UINT64_MAX;
            int who = -1, what = 0;
            for (int i = 0; i < 2; i++) {
                uint64_t e = !c[i].busy                  ? l[i].next_ns
                             : c[i].arrive != UINT64_MAX ? c[i].arrive
                                                         : c[i].answer;
                int kind = !c[i].busy ? 0 : c[i].arrive != UINT64_MAX ? 1 : 2;
                if (e < when) {
                    when = e;
                    who = i;
                    what = kind;
                }
            }
            uint64_t now = when;
            if (rev != 0 && now >= expires)
                rev = 0; /* the bucket forgets an unrenewed key */
            check_safe(l, rev, holder, expires, now, &served);
            call_t *k = &c[who];
            if (what == 0) { /* send */
                lease_act_t act = lease_due(&l[who], now);
                assert_true(act != LEASE_ACT_NONE);
                *k = (call_t){.busy = 1, .act = act, .sent = now};
                k->dropped = rng_next(&rng) % 10 == 0;
                k->lost = rng_next(&rng) % 8 == 0;
                k->arrive = now + rng_next(&rng) % (400 * MS);
                k->answer = k->arrive + rng_next(&rng) % (900 * MS); /* beyond the margin */
                if (k->dropped) {
                    k->arrive = UINT64_MAX;
                    k->answer = now + LEASE_TEST_TIMEOUT;
                }
            } else if (what == 1) { /* the bucket receives it */
                k->ok = k->act == LEASE_ACT_CREATE ? rev == 0 : rev != 0 && rev == l[who].revision;
                if (k->ok) {
                    rev = k->rev = next_rev++;
                    holder = who;
                    expires = now + t.ttl_ns;
                }
                k->arrive = UINT64_MAX;
            } else { /* the answer, or a timeout */
                if (k->dropped || k->lost)
                    lease_failed(&l[who], &t, now);
                else if (k->ok)
                    lease_won(&l[who], &t, k->rev, k->sent, now);
                else
                    lease_refused(&l[who], &t, now);
                k->busy = 0;
                if (l[who].next_ns < now)
                    l[who].next_ns = now;
            }
            check_safe(l, rev, holder, expires, now, &served);
        }
        assert_true(served > 0); /* the model was served at all */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timing_defaults_and_the_shortest_ttl),
        cmocka_unit_test(test_a_new_lease_creates_at_once_and_serves_after_winning),
        cmocka_unit_test(test_a_held_key_refuses_the_create_and_the_standby_retries),
        cmocka_unit_test(test_a_refused_renewal_stops_serving_at_once),
        cmocka_unit_test(test_failed_renewals_fence_the_holder_at_its_deadline),
        cmocka_unit_test(test_two_instances_never_serve_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
