/*
 * interop_peer.c - the interoperability matrix's C peer, on the C client (clients/c): `produce`
 * submits --count items to each of --models, `consume` takes them back and checks each one
 * (README.md beside it says what every peer does; the Python, Node and Go peers do the same).
 * Prints one JSON line: {"models": {"<model>": {"items": N, "tokens": T, "bad": B}}}.
 *
 * Invariants:
 *  1. Item i of model m: id "m-i", tokens 1 + (i * 37 + seed) % 300, shape A (even i) or B (odd),
 *     payload "m|id|tokens|letter", reply_to "interop.m.id", prefix_tokens 4, max_wait_ms 500.
 *  2. The consumer counts an item bad unless its batch's model is m, the batch's signature is the
 *     letter's shape, its payload and reply_to are exactly those of invariant 1 for its id and
 *     tokens, and its prefix_tokens came back as sent; each distinct id counts once, however often
 * it is delivered.
 *
 * Rejected: lanesched-produce / lanesched-consume (they cannot make or check per-item payloads).
 */
#include "clients/c/lanes_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INTEROP_MODELS_MAX    8
#define INTEROP_COUNT_MAX     4096
#define INTEROP_ID_MAX        256
#define INTEROP_TEXT_MAX      1024
#define INTEROP_PREFIX_TOKENS 4 /* invariant 1 */

static const char *const interop_shapes[2] = {"interop system prompt A", "interop system prompt B"};

typedef struct {
    const char *role;
    const char *server;
    char *models[INTEROP_MODELS_MAX];
    size_t n_models;
    uint32_t count;
    uint32_t seed;
    double timeout_s;
} interop_args_t;

typedef struct {
    char id[INTEROP_ID_MAX];
    char payload[INTEROP_TEXT_MAX];
    char reply[INTEROP_TEXT_MAX];
} interop_text_t;

typedef struct {
    uint64_t items, tokens, bad, rejected;
    uint8_t seen[INTEROP_COUNT_MAX];
} interop_tally_t;

static interop_tally_t interop_tally[INTEROP_MODELS_MAX];

static double interop_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int interop_args_parse(int argc, char **argv, interop_args_t *a)
{
    static char models[1024];
    memset(a, 0, sizeof(*a));
    a->count = 25;
    a->seed = 1;
    a->timeout_s = 60;
    if (argc < 2)
        return -1;
    a->role = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--server") == 0)
            a->server = argv[i + 1];
        else if (strcmp(argv[i], "--models") == 0)
            snprintf(models, sizeof(models), "%s", argv[i + 1]);
        else if (strcmp(argv[i], "--count") == 0)
            a->count = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0)
            a->seed = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--timeout-s") == 0)
            a->timeout_s = strtod(argv[i + 1], NULL);
        else
            return -1;
    }
    char *save = NULL;
    for (char *m = strtok_r(models, ",", &save); m != NULL && a->n_models < INTEROP_MODELS_MAX;
         m = strtok_r(NULL, ",", &save))
        a->models[a->n_models++] = m;
    if (a->server == NULL || a->n_models == 0 || a->count == 0 || a->count > INTEROP_COUNT_MAX)
        return -1;
    return 0;
}

static uint32_t interop_tokens(uint32_t i, uint32_t seed)
{
    return 1 + (i * 37 + seed) % 300;
}

static int interop_produce(lc_client_t *client, const interop_args_t *a)
{
    int rc = 0;
    codec_work_item_t *items = calloc(a->count, sizeof(*items));
    interop_text_t *text = calloc(a->count, sizeof(*text));
    lc_item_result_t *results = calloc(a->count, sizeof(*results));
    uint64_t sig[2];
    if (items == NULL || text == NULL || results == NULL ||
        lc_shape_sign(&interop_shapes[0], 1, &sig[0]) != LC_OK ||
        lc_shape_sign(&interop_shapes[1], 1, &sig[1]) != LC_OK) {
        rc = 1;
        goto out;
    }
    for (size_t m = 0; m < a->n_models; m++) {
        const char *model = a->models[m];
        interop_tally_t *t = &interop_tally[m];
        for (uint32_t i = 0; i < a->count; i++) { /* invariant 1 */
            uint32_t tok = interop_tokens(i, a->seed);
            char letter = (char)('A' + i % 2);
            snprintf(text[i].id, sizeof(text[i].id), "%.200s-%" PRIu32, model, i);
            snprintf(text[i].payload, sizeof(text[i].payload), "%.200s|%s|%" PRIu32 "|%c", model,
                     text[i].id, tok, letter);
            snprintf(text[i].reply, sizeof(text[i].reply), "interop.%.200s.%s", model, text[i].id);
            items[i] = (codec_work_item_t){
                .id = {(const uint8_t *)text[i].id, strlen(text[i].id)},
                .model = model,
                .has_signature = true,
                .signature = sig[i % 2],
                .tokens = tok,
                .payload = {(const uint8_t *)text[i].payload, strlen(text[i].payload)},
                .reply_to = text[i].reply,
                .prefix_tokens = INTEROP_PREFIX_TOKENS,
                .max_wait_ms = 500,
            };
            t->tokens += tok;
        }
        lc_submit_summary_t sum;
        lc_status_t st = lc_submit_request(client, model, items, a->count, 5000, 10, results, &sum);
        if (st != LC_OK) {
            fprintf(stderr, "interop_peer: submit %s: %s: %s\n", model, lc_status_str(st),
                    lc_client_error_get(client));
            rc = 1;
            goto out;
        }
        t->items = sum.accepted;
        t->rejected = sum.rejected;
    }
out:
    free(results);
    free(text);
    free(items);
    return rc;
}

/* Invariant 2: one batch of model m checked and tallied. */
static void interop_batch_check(const interop_args_t *a, size_t m, const codec_batch_t *b,
                                const uint64_t sig[2])
{
    const char *model = a->models[m];
    interop_tally_t *t = &interop_tally[m];
    char letter = b->signature == sig[0] ? 'A' : b->signature == sig[1] ? 'B' : '?';
    for (size_t k = 0; k < b->n_items; k++) {
        const codec_batch_item_t *it = &b->items[k];
        char id[INTEROP_ID_MAX], want[INTEROP_TEXT_MAX], reply[INTEROP_TEXT_MAX];
        snprintf(id, sizeof(id), "%.*s", (int)(it->id.len < 200 ? it->id.len : 200),
                 (const char *)it->id.ptr);
        snprintf(want, sizeof(want), "%.200s|%s|%" PRIu32 "|%c", model, id, it->tokens, letter);
        snprintf(reply, sizeof(reply), "interop.%.200s.%s", model, id);
        bool ok = strcmp(b->model, model) == 0 && letter != '?' &&
                  it->payload.len == strlen(want) &&
                  memcmp(it->payload.ptr, want, it->payload.len) == 0 &&
                  strcmp(it->reply_to, reply) == 0 && it->prefix_tokens == INTEROP_PREFIX_TOKENS;
        if (!ok)
            t->bad++;
        size_t prefix = strlen(model) + 1;
        unsigned long i = strtoul(id + (strlen(id) > prefix ? prefix : 0), NULL, 10);
        if (i < a->count && !t->seen[i]) {
            t->seen[i] = 1;
            t->items++;
            t->tokens += it->tokens;
        }
    }
}

static int interop_consume(lc_client_t *client, const interop_args_t *a)
{
    int rc = 0;
    lc_consumer_t *cons[INTEROP_MODELS_MAX] = {NULL};
    uint64_t sig[2];
    if (lc_shape_sign(&interop_shapes[0], 1, &sig[0]) != LC_OK ||
        lc_shape_sign(&interop_shapes[1], 1, &sig[1]) != LC_OK)
        return 1;
    for (size_t m = 0; m < a->n_models; m++) {
        lc_consumer_config_t k;
        lc_consumer_config_init(&k);
        k.model = a->models[m];
        k.max_batch_size = 8;
        k.max_batch_tokens = 4096;
        k.name = "c-interop";
        k.prefetch = 2;
        k.request_retries = 3;
        lc_status_t st = lc_consumer_open(client, &k, &cons[m]);
        if (st != LC_OK) {
            fprintf(stderr, "interop_peer: consumer %s: %s: %s\n", a->models[m], lc_status_str(st),
                    lc_client_error_get(client));
            rc = 1;
            goto out;
        }
    }
    double end = interop_now() + a->timeout_s;
    for (bool more = true; more && interop_now() < end;) {
        more = false;
        for (size_t m = 0; m < a->n_models; m++) {
            if (interop_tally[m].items >= a->count)
                continue;
            more = true;
            codec_batch_t *b = NULL;
            lc_status_t st = lc_batch_next(cons[m], 20, &b);
            if (st == LC_OK) {
                interop_batch_check(a, m, b, sig);
                if (lc_ack_all_send(cons[m], b->batch_id, 5000, NULL) != LC_OK)
                    interop_tally[m].bad++;
                codec_batch_destroy(b);
            } else if (st == LC_EUNKNOWN_CONSUMER) {
                lc_consumer_register(cons[m]);
            }
        }
    }
out:
    for (size_t m = 0; m < a->n_models; m++) {
        if (cons[m] != NULL)
            lc_bye_send(cons[m], 2000);
        lc_consumer_close(cons[m]);
    }
    return rc;
}

int main(int argc, char **argv)
{
    interop_args_t a;
    if (interop_args_parse(argc, argv, &a) != 0 ||
        (strcmp(a.role, "produce") != 0 && strcmp(a.role, "consume") != 0)) {
        fprintf(stderr, "usage: interop_peer produce|consume --server URL --models m1,m2 "
                        "[--count N] [--seed S] [--timeout-s T]\n");
        return 2;
    }
    lc_client_config_t cc;
    lc_client_config_init(&cc);
    cc.servers = a.server;
    char err[256];
    lc_client_t *client = NULL;
    if (lc_client_open(&cc, err, sizeof(err), &client) != LC_OK) {
        fprintf(stderr, "interop_peer: %s\n", err);
        return 1;
    }
    int rc =
        strcmp(a.role, "produce") == 0 ? interop_produce(client, &a) : interop_consume(client, &a);
    lc_client_close(client);
    printf("{\"models\": {");
    for (size_t m = 0; m < a.n_models; m++)
        printf("%s\"%s\": {\"items\": %" PRIu64 ", \"tokens\": %" PRIu64 ", \"bad\": %" PRIu64
               ", \"rejected\": %" PRIu64 "}",
               m ? ", " : "", a.models[m], interop_tally[m].items, interop_tally[m].tokens,
               interop_tally[m].bad, interop_tally[m].rejected);
    printf("}}\n");
    return rc;
}
