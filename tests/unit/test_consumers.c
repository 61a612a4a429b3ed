/*
 * test_consumers.c - the consumer registry (scheduler/daemon/consumers.c): ids, lookup, the pull
 * FIFO and pruning of dead consumers. The batches a consumer holds are its worker's in the core
 * (test_sched.c's batch records).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/daemon/consumers_int.h"

static const packer_contract_t contract = {8, 4096, 2048};

static consumer_t *add(consumers_t *cs, const char *name, uint64_t now_ns)
{
    consumer_t *c = NULL;
    assert_int_equal(consumers_add(cs, "llama", name, contract, now_ns, &c), DAEMON_OK);
    assert_non_null(c);
    return c;
}

static int is_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    }
    return 1;
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_add_records_the_registration(void **state)
{
    (void)state;
    consumers_t *cs;
    assert_int_equal(consumers_create(&cs), DAEMON_OK);
    consumer_t *c = add(cs, "gpu-0", 1234);
    assert_string_equal(c->model, "llama");
    assert_string_equal(c->name, "gpu-0");
    assert_int_equal(c->contract.max_batch_size, 8);
    assert_int_equal(c->contract.max_batch_tokens, 4096);
    assert_int_equal(c->contract.max_input_tokens, 2048);
    assert_int_equal(c->last_seen_ns, 1234);
    assert_false(c->dead);
    assert_int_equal(c->n_pulls, 0);
    assert_int_equal(consumers_inflight_count(c), 0);
    assert_null(c->worker);
    assert_null(c->model_rec);
    assert_int_equal(cs->n_all, 1);
    assert_ptr_equal(cs->all[0], c);
    /* A NULL name reads as "" */
    consumer_t *d = NULL;
    assert_int_equal(consumers_add(cs, "llama", NULL, contract, 0, &d), DAEMON_OK);
    assert_string_equal(d->name, "");
    consumers_destroy(cs);
}

static void test_ids_are_32_hex_and_distinct(void **state)
{
    (void)state;
    enum { N = 10000 };
    consumers_t *cs;
    assert_int_equal(consumers_create(&cs), DAEMON_OK);
    const char **ids = malloc(N * sizeof(*ids));
    assert_non_null(ids);
    for (size_t i = 0; i < N; i++) {
        consumer_t *c = add(cs, "w", i);
        assert_int_equal(strlen(c->id), 32);
        assert_true(is_lower_hex(c->id, 32));
        ids[i] = c->id;
    }
    assert_int_equal(cs->n_all, N);
    qsort(ids, N, sizeof(*ids), cmp_id);
    for (size_t i = 1; i < N; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    /* Every secret finds its own consumer; no public id finds any (it gives no authority). */
    for (size_t i = 0; i < N; i++) {
        consumer_t *c = consumers_find(cs, cs->all[i]->secret);
        assert_ptr_equal(c, cs->all[i]);
        assert_true(is_lower_hex(cs->all[i]->secret, 32));
        assert_string_not_equal(cs->all[i]->secret, cs->all[i]->id);
        assert_null(consumers_find(cs, cs->all[i]->id));
        assert_null(consumers_touch(cs, cs->all[i]->id, 1));
    }
    free(ids);
    consumers_destroy(cs);
}

static void test_find_unknown_and_wrong_length(void **state)
{
    (void)state;
    consumers_t *cs;
    assert_int_equal(consumers_create(&cs), DAEMON_OK);
    assert_null(consumers_find(cs, "00000000000000000000000000000000"));
    consumer_t *c = add(cs, "gpu-0", 0);
    char id[40];
    strcpy(id, c->secret);
    assert_ptr_equal(consumers_find(cs, id), c);

    /* One character changed (in each half): unknown. */
    char other[40];
    strcpy(other, id);
    other[31] = other[31] == '0' ? '1' : '0';
    assert_null(consumers_find(cs, other));
    strcpy(other, id);
    other[0] = other[0] == 'f' ? 'e' : 'f';
    assert_null(consumers_find(cs, other));
    /* Upper case is another id. */
    strcpy(other, id);
    for (int i = 0; i < 32; i++)
        other[i] = (char)(other[i] >= 'a' ? other[i] - 32 : other[i]);
    if (strcmp(other, id) != 0)
        assert_null(consumers_find(cs, other));

    /* Wrong lengths: empty, a prefix, the id with more after it. */
    assert_null(consumers_find(cs, ""));
    strcpy(other, id);
    other[31] = '\0';
    assert_null(consumers_find(cs, other));
    strcpy(other, id);
    other[16] = '\0';
    assert_null(consumers_find(cs, other));
    strcpy(other, id);
    strcat(other, "0");
    assert_null(consumers_find(cs, other));
    strcpy(other, id);
    strcat(other, ".x");
    assert_null(consumers_find(cs, other));
    consumers_destroy(cs);
}

static void test_pulls_are_fifo(void **state)
{
    (void)state;
    consumers_t *cs;
    assert_int_equal(consumers_create(&cs), DAEMON_OK);
    consumer_t *c = add(cs, "gpu-0", 0);
    consumers_pull_pop(c); /* popping nothing is harmless */
    assert_int_equal(c->n_pulls, 0);
    char reply[32];
    for (uint32_t i = 0; i < 10; i++) { /* past the first capacity (4) */
        snprintf(reply, sizeof(reply), "_INBOX.%u", i);
        assert_int_equal(consumers_pull_add(c, reply, i + 1, 1000 + i), DAEMON_OK);
    }
    assert_int_equal(c->n_pulls, 10);
    for (uint32_t i = 0; i < 10; i++) {
        snprintf(reply, sizeof(reply), "_INBOX.%u", i);
        assert_string_equal(c->pulls[0].reply, reply);
        assert_int_equal(c->pulls[0].credits, i + 1);
        assert_int_equal(c->pulls[0].expires_ns, 1000 + i);
        if (i == 4) { /* adding while others wait keeps the order */
            assert_int_equal(consumers_pull_add(c, "_INBOX.late", 7, 9), DAEMON_OK);
        }
        consumers_pull_pop(c);
    }
    assert_int_equal(c->n_pulls, 1);
    assert_string_equal(c->pulls[0].reply, "_INBOX.late");
    assert_int_equal(c->pulls[0].credits, 7);
    consumers_pull_pop(c);
    assert_int_equal(c->n_pulls, 0);
    consumers_pull_pop(c);
    assert_int_equal(c->n_pulls, 0);
    /* The reply subject is copied: the caller's buffer may change. */
    strcpy(reply, "_INBOX.copy");
    assert_int_equal(consumers_pull_add(c, reply, 1, 1), DAEMON_OK);
    strcpy(reply, "_INBOX.changed");
    assert_string_equal(c->pulls[0].reply, "_INBOX.copy");
    consumers_destroy(cs); /* frees the pull still queued (ASan checks) */
}

static void test_pull_del_keeps_the_others_in_order(void **state)
{
    (void)state;
    consumers_t *cs;
    assert_int_equal(consumers_create(&cs), DAEMON_OK);
    consumer_t *c = add(cs, "gpu-0", 0);
    char reply[32];
    for (uint32_t i = 0; i < 5; i++) {
        snprintf(reply, sizeof(reply), "_INBOX.%u", i);
        assert_int_equal(consumers_pull_add(c, reply, i + 1, 1000 + i), DAEMON_OK);
    }
    consumers_pull_del(c, 2);
    consumers_pull_del(c, 4); /* past the end now: changes nothing */
    assert_int_equal(c->n_pulls, 4);
    const uint32_t left[] = {0, 1, 3, 4};
    for (size_t j = 0; j < 4; j++) {
        snprintf(reply, sizeof(reply), "_INBOX.%u", left[j]);
        assert_string_equal(c->pulls[j].reply, reply);
        assert_int_equal(c->pulls[j].credits, left[j] + 1);
        assert_int_equal(c->pulls[j].expires_ns, 1000 + left[j]);
    }
    consumers_pull_del(c, 3); /* the last one */
    assert_int_equal(c->n_pulls, 3);
    assert_string_equal(c->pulls[2].reply, "_INBOX.3");
    consumers_destroy(cs); /* frees the pulls still queued (ASan checks) */
}

static void test_prune_removes_only_long_dead(void **state)
{
    (void)state;
    consumers_t *cs;
    assert_int_equal(consumers_create(&cs), DAEMON_OK);
    consumer_t *old_dead = add(cs, "old-dead", 0);
    consumer_t *new_dead = add(cs, "new-dead", 900);
    consumer_t *alive_silent = add(cs, "alive-silent", 0);
    consumer_t *edge_dead = add(cs, "edge-dead", 500);
    consumer_t *old_dead2 = add(cs, "old-dead-2", 100);
    old_dead->dead = 1;
    new_dead->dead = 1;
    edge_dead->dead = 1;
    old_dead2->dead = 1;
    assert_int_equal(consumers_pull_add(old_dead, "_INBOX.x", 1, 1), DAEMON_OK);
    char gone1[33], gone2[33];
    strcpy(gone1, old_dead->secret);
    strcpy(gone2, old_dead2->secret);

    consumers_prune(cs, 1000, 500);
    assert_int_equal(cs->n_all, 3);
    /* Dead for 1000 and 900 > 500: gone, their ids now read as unknown. */
    assert_null(consumers_find(cs, gone1));
    assert_null(consumers_find(cs, gone2));
    /* Dead for 100, or exactly 500: kept. Alive however silent: never pruned. */
    assert_ptr_equal(consumers_find(cs, new_dead->secret), new_dead);
    assert_ptr_equal(consumers_find(cs, edge_dead->secret), edge_dead);
    assert_ptr_equal(consumers_find(cs, alive_silent->secret), alive_silent);
    /* The survivors keep their registration order. */
    assert_ptr_equal(cs->all[0], new_dead);
    assert_ptr_equal(cs->all[1], alive_silent);
    assert_ptr_equal(cs->all[2], edge_dead);

    /* Pruning again later takes the rest of the dead, and the registry keeps working. */
    consumers_prune(cs, 2000, 500);
    assert_int_equal(cs->n_all, 1);
    assert_ptr_equal(cs->all[0], alive_silent);
    consumer_t *fresh = add(cs, "fresh", 2000);
    assert_ptr_equal(consumers_find(cs, fresh->secret), fresh);
    assert_ptr_equal(consumers_find(cs, alive_silent->secret), alive_silent);
    assert_int_equal(cs->n_all, 2);
    consumers_destroy(cs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_records_the_registration),
        cmocka_unit_test(test_ids_are_32_hex_and_distinct),
        cmocka_unit_test(test_find_unknown_and_wrong_length),
        cmocka_unit_test(test_pulls_are_fifo),
        cmocka_unit_test(test_pull_del_keeps_the_others_in_order),
        cmocka_unit_test(test_prune_removes_only_long_dead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
