/*
 * consume.c - lanesched-consume: a simulated GPU worker. Registers its four integers, pulls
 * batches, "computes" for a time proportional to the padded tokens, acks, and verifies that
 * every batch keeps the packing promises of subjects.md. Heartbeats come from the library's
 * thread, so a long simulated step never gets the worker declared dead.
 *
 * Owns: the run's counters and violation tally, the consumer (and through it its heartbeat
 * thread), the client.
 *
 * Invariants:
 *  1. Every delivered batch is verified before anything else is done with it; a violation is
 *     counted by kind, printed once per batch, and makes the exit status 3.
 *  2. Test hooks are decided by the batch's 1-based sequence number s: --nak-every N naks the
 *     whole batch when s % N == 0; otherwise --no-ack-every N leaves it unacked when s % N == 0
 *     and drops it from the in-progress set, so heartbeats stop naming it and the daemon's ack
 *     deadline returns it. Every other batch is acked with `all`.
 *  3. Shape hit rate = batches whose signature equals this consumer's previous batch's /
 *     (batches - 1): the design's definition, per consumer. Cache hit rate = batches whose
 *     signature is among the last --cache-shapes shapes this consumer served (1 when not given)
 *     / batches: lanesched-bench's definition (tools/bench/gpu.c), so a live run and a simulated
 *     one count hits alike.
 *  4. The worker leaves with Bye unless --no-bye, whatever ended the run (duration, idleness,
 *     --exit-after-batches, a signal).
 *  5. The simulated work of a batch is --work-us-per-batch + --work-us-per-token x (padded
 *     tokens + --prefix-tokens when the batch missed the cache): the bench's service model, the
 *     prefix computed once per batch on a miss. work_s sums it as charged, not as slept, so a
 *     late wake-up on a loaded machine does not count as GPU time.
 *  6. next_batch_us_p50 is the median time from a batch's ack (sent or left, invariant 2) to the
 *     next batch's arrival: the worker's turnaround where work was queued, plus the wait for
 *     work where none was. The simulated workers have none (lanesched-bench sim).
 *
 * Rejected alternatives:
 *  - Acking positions one by one: `all` is one message and the daemon's fast path; position
 *    acks are exercised by the library's own callers when they need them.
 *  - Busy-waiting to simulate GPU time: it would burn the CPU the daemon under test needs;
 *    nanosleep has the same effect on the protocol.
 *  - Exiting at the first violation: a run that keeps going reports how often and how badly
 *    the promise is broken, which is what a daemon developer needs.
 */
#include "clients/c/tools/cli.h"
#include "clients/c/lanes_client.h"
#include "common/clock.h"
#include "common/version.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_USAGE     1
#define EXIT_FAILED    2
#define EXIT_VIOLATION 3

#define DEFAULT_MAX_BATCH_SIZE   32u
#define DEFAULT_MAX_BATCH_TOKENS 8192u
#define DEFAULT_PULL_WAIT_MS     1000u
#define DEFAULT_ACK_TIMEOUT_MS   5000u
#define PAD_MULTIPLE             8u /* pad_to is the longest item rounded up to this */
/* The cache this tool models holds at most this many shapes (the daemon's own cap). */
#define CONSUME_LRU_MAX 256u
/* Invariant 6: the gaps' histogram, 10 us wide up to 20 ms, then one bucket for the rest (a
 * median there reads 20,005 us). */
#define CONSUME_GAP_BUCKET_US 10u
#define CONSUME_GAP_BUCKETS   2001u

/* X(name, text): the packing promises a batch can break. */
#define VIOLATION_MAP(X)                                                    \
    X(EMPTY, "empty", "status OK batch with no items")                      \
    X(WRONG_MODEL, "wrong_model", "batch model is not this consumer's")     \
    X(TOKENS_OVER_PAD, "tokens_over_pad", "an item's tokens exceed pad_to") \
    X(PAD_NOT_TIGHT, "pad_not_tight",                                       \
      "pad_to is not the longest item rounded up to a multiple of 8")       \
    X(OVER_BUDGET, "over_budget", "len(items) * pad_to > max_batch_tokens") \
    X(OVER_SIZE, "over_size", "len(items) > max_batch_size")

typedef enum {
#define VIOLATION_ENUM(name, word, text) V_##name,
    VIOLATION_MAP(VIOLATION_ENUM)
#undef VIOLATION_ENUM
        V_COUNT
} violation_t;

static const char *const violation_words[V_COUNT] = {
#define VIOLATION_WORD(name, word, text) [V_##name] = word,
    VIOLATION_MAP(VIOLATION_WORD)
#undef VIOLATION_WORD
};

typedef struct {
    lc_client_config_t conn;
    lc_consumer_config_t consumer;
    double work_us_per_token;
    uint64_t work_us_per_batch;
    uint64_t prefix_tokens; /* --prefix-tokens: computed on a cache miss (invariant 5) */
    bool declare_cost;      /* --declare-cost: the two above go in Register */
    uint64_t duration_s;
    uint64_t until_idle_ms;
    uint64_t nak_every;
    uint64_t no_ack_every;
    uint64_t exit_after_batches;
    uint64_t pull_wait_ms;
    uint64_t ack_timeout_ms;
    bool ack_async; /* --ack-async: acks in flight, each AckReply read later (lc_ack_async_*) */
    bool no_bye;
    bool json;
    bool verbose;
} consume_opts_t;

typedef struct {
    uint64_t batches, items, real_tokens, padded_tokens;
    uint64_t same_shape; /* batches on the previous batch's signature */
    uint64_t shape_switches;
    uint64_t acks, naks, unacked;
    uint64_t acked_items, returned_items, ack_unknown, ack_errors;
    uint64_t redelivered_items; /* items with deliveries > 1 */
    uint64_t expired, idle_timeouts, no_responders, errors, reregistrations;
    uint64_t violations[V_COUNT];
    uint64_t violating_batches;
    bool have_prev;
    uint64_t prev_signature;
    uint64_t cache_hits, prefix_computed; /* invariants 3 and 5 */
    double work_us;                       /* simulated work, as charged */
    uint64_t lru[CONSUME_LRU_MAX];        /* the last shapes served, most recent first */
    uint32_t n_lru;
    uint64_t done_ns; /* when the last batch was acked (invariant 6); 0 before the first */
    uint64_t n_gaps;
    uint32_t gaps[CONSUME_GAP_BUCKETS];
} consume_counts_t;

static void consume_help(FILE *f)
{
    fputs("Usage: lanesched-consume --model M [options]\n"
          "A simulated GPU worker: pulls batches from lanesched, sleeps in proportion to the\n"
          "padded tokens, acks, verifies every batch, and prints a summary.\n\n",
          f);
    cli_conn_help(f);
    fputs(
        "Contract (Register):\n"
        "  --model M               model (required)\n"
        "  --max-batch-size N      items per batch (default 32)\n"
        "  --max-batch-tokens N    padded tokens per batch (default 8192)\n"
        "  --max-input-tokens N    longest input, 0 = unlimited (default 0)\n"
        "  --name S                name shown in the daemon's stats (default consume-<pid>)\n"
        "  --cache-shapes N        prompt shapes the engine's prefix cache holds (default: not\n"
        "                          sent, which the daemon reads as 1)\n"
        "  --declare-cost          send the simulated cost (the two --work flags) in Register;\n"
        "                          without it the daemon estimates it from the batch times\n"
        "Work:\n"
        "  --work-us-per-token F   simulated time per padded token (len(items) * pad_to)\n"
        "  --work-us-per-batch N   simulated time per batch on top (default 0)\n"
        "  --prefix-tokens N       the shapes' prefix: computed (at --work-us-per-token) once per\n"
        "                          batch whose shape is not among the last --cache-shapes shapes\n"
        "                          served (default 0)\n"
        "  --pull-batches N        batches asked per Pull (default 1)\n"
        "  --pull-wait-ms N        how long one Pull waits for work (default 1000)\n"
        "  --ack-timeout-ms N      wait for AckReply; 0 = acks without reply (default 5000)\n"
        "  --prefetch N            keep N batches requested ahead (several pulls outstanding)\n"
        "  --ack-async             do not wait for each AckReply: acks stay in flight and\n"
        "                          are counted as their replies come (timeout: --ack-timeout-ms)\n"
        "  --ack-window N          acks in flight with --ack-async (default 64)\n"
        "  --heartbeat-ms N        override the daemon's heartbeat interval\n"
        "Stopping (default: until SIGINT/SIGTERM):\n"
        "  --duration-s N          stop after N seconds\n"
        "  --until-idle-ms N       stop after N ms without a batch\n"
        "  --exit-after-batches N  stop after N batches\n"
        "Test hooks:\n"
        "  --nak-every N           nak the whole batch every Nth batch\n"
        "  --no-ack-every N        never ack every Nth batch (nor heartbeat it): redelivery\n"
        "  --no-bye                leave without Bye (looks like a crash)\n"
        "  --no-heartbeat          no heartbeat thread (the daemon will declare us dead)\n"
        "Output:\n"
        "  --json                  one JSON line instead of the text summary\n"
        "  --verbose               one line per batch on stderr\n"
        "  --help                  this text\n"
        "  --version               the version and the protocol version\n"
        "Exit status: 0 done, 1 usage, 2 connection or protocol failure, 3 a batch broke\n"
        "its packing promise (tokens <= pad_to, len * pad_to <= max-batch-tokens unless a\n"
        "single item, len <= max-batch-size, pad_to tight, right model, non-empty).\n",
        f);
}

/* Returns 0 to run, 1 after --help, -1 on a usage error. */
static int consume_args_parse(int argc, char **argv, consume_opts_t *o)
{
    uint64_t u = 0;

    cli_conn_defaults(&o->conn);
    lc_consumer_config_init(&o->consumer);
    o->consumer.max_batch_size = DEFAULT_MAX_BATCH_SIZE;
    o->consumer.max_batch_tokens = DEFAULT_MAX_BATCH_TOKENS;
    o->pull_wait_ms = DEFAULT_PULL_WAIT_MS;
    o->ack_timeout_ms = DEFAULT_ACK_TIMEOUT_MS;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int rc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            consume_help(stdout);
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            version_print(stdout, cli_program);
            return 1;
        }
        if ((rc = cli_conn_flag(argc, argv, &i, &o->conn)) != 0) {
            if (rc < 0)
                return -1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--verbose") == 0) {
            o->verbose = true;
        } else if (strcmp(a, "--ack-async") == 0) {
            o->ack_async = true;
        } else if (strcmp(a, "--no-bye") == 0) {
            o->no_bye = true;
        } else if (strcmp(a, "--no-heartbeat") == 0) {
            o->consumer.no_heartbeat = true;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--model", &v)) != 0) {
            if (rc < 0)
                return -1;
            o->consumer.model = v;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--name", &v)) != 0) {
            if (rc < 0)
                return -1;
            o->consumer.name = v;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--max-batch-size", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--max-batch-size", v, 1, UINT32_MAX, &u))
                return -1;
            o->consumer.max_batch_size = (uint32_t)u;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--max-batch-tokens", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--max-batch-tokens", v, 1, UINT32_MAX, &u))
                return -1;
            o->consumer.max_batch_tokens = (uint32_t)u;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--max-input-tokens", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--max-input-tokens", v, 0, UINT32_MAX, &u))
                return -1;
            o->consumer.max_input_tokens = (uint32_t)u;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--pull-batches", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--pull-batches", v, 1, UINT32_MAX, &u))
                return -1;
            o->consumer.pull_max_batches = (uint32_t)u;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--prefetch", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--prefetch", v, 1, 65536, &u))
                return -1;
            o->consumer.prefetch = (uint32_t)u;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--ack-window", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--ack-window", v, 1, 65536, &u))
                return -1;
            o->consumer.ack_window = (uint32_t)u;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--heartbeat-ms", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--heartbeat-ms", v, 1, UINT32_MAX, &u))
                return -1;
            o->consumer.heartbeat_ms = (uint32_t)u;
        } else if (strcmp(a, "--declare-cost") == 0) {
            o->declare_cost = true;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--cache-shapes", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--cache-shapes", v, 1, UINT32_MAX, &u))
                return -1;
            o->consumer.cache_shapes = (uint32_t)u;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--work-us-per-token", &v)) != 0) {
            if (rc < 0 || !cli_double_parse("--work-us-per-token", v, &o->work_us_per_token))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--work-us-per-batch", &v)) != 0) {
            if (rc < 0 ||
                !cli_u64_parse("--work-us-per-batch", v, 0, 3600000000ull, &o->work_us_per_batch))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--prefix-tokens", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--prefix-tokens", v, 0, UINT32_MAX, &o->prefix_tokens))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--duration-s", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--duration-s", v, 1, 100000000ull, &o->duration_s))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--until-idle-ms", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--until-idle-ms", v, 1, INT32_MAX, &o->until_idle_ms))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--exit-after-batches", &v)) != 0) {
            if (rc < 0 ||
                !cli_u64_parse("--exit-after-batches", v, 1, UINT64_MAX, &o->exit_after_batches))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--nak-every", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--nak-every", v, 1, UINT64_MAX, &o->nak_every))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--no-ack-every", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--no-ack-every", v, 1, UINT64_MAX, &o->no_ack_every))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--pull-wait-ms", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--pull-wait-ms", v, 1, INT32_MAX, &o->pull_wait_ms))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--ack-timeout-ms", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--ack-timeout-ms", v, 0, INT32_MAX, &o->ack_timeout_ms))
                return -1;
        } else {
            cli_unknown(a);
            return -1;
        }
    }
    if (o->consumer.model == NULL || o->consumer.model[0] == '\0') {
        fprintf(stderr, "--model is required (see --help)\n");
        return -1;
    }
    if (o->ack_async && o->ack_timeout_ms == 0) {
        fprintf(stderr, "--ack-async needs an --ack-timeout-ms above 0 (its replies are read)\n");
        return -1;
    }
    if (o->declare_cost) {
        o->consumer.batch_fixed_us =
            o->work_us_per_batch > UINT32_MAX ? UINT32_MAX : (uint32_t)o->work_us_per_batch;
        double ns = o->work_us_per_token * 1000.0;
        o->consumer.token_ns = ns >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)(ns + 0.5);
    }
    return 0;
}

/* Checks the packing promises (invariant 1); returns the number of kinds broken. */
static unsigned consume_batch_verify(const consume_opts_t *o, const codec_batch_t *b,
                                     consume_counts_t *k)
{
    bool broken[V_COUNT] = {false};
    uint32_t longest = 0;
    unsigned kinds = 0;

    if (b->n_items == 0)
        broken[V_EMPTY] = true;
    if (strcmp(b->model, o->consumer.model) != 0)
        broken[V_WRONG_MODEL] = true;
    for (size_t i = 0; i < b->n_items; i++) {
        if (b->items[i].tokens > b->pad_to)
            broken[V_TOKENS_OVER_PAD] = true;
        if (b->items[i].tokens > longest)
            longest = b->items[i].tokens;
    }
    uint64_t tight = ((uint64_t)longest + PAD_MULTIPLE - 1) / PAD_MULTIPLE * PAD_MULTIPLE;
    if (b->n_items > 0 && b->pad_to != tight)
        broken[V_PAD_NOT_TIGHT] = true;
    if (b->n_items > 1 && (uint64_t)b->n_items * b->pad_to > o->consumer.max_batch_tokens)
        broken[V_OVER_BUDGET] = true;
    if (b->n_items > o->consumer.max_batch_size)
        broken[V_OVER_SIZE] = true;

    for (int v = 0; v < V_COUNT; v++) {
        if (!broken[v])
            continue;
        k->violations[v]++;
        kinds++;
        fprintf(stderr,
                "lanesched-consume: VIOLATION %s: batch %" PRIu64 " lane %" PRIu32
                " items %zu pad_to %" PRIu32 " longest %" PRIu32 " model \"%s\"\n",
                violation_words[v], b->batch_id, b->lane, b->n_items, b->pad_to, longest, b->model);
    }
    if (kinds > 0)
        k->violating_batches++;
    return kinds;
}

static void consume_ack_note(consume_counts_t *k, lc_status_t st, const lc_ack_reply_t *reply,
                             lc_consumer_t *c, uint64_t batch_id, bool replied)
{
    if (st == LC_OK) {
        if (replied) {
            k->acked_items += reply->acked;
            k->returned_items += reply->returned;
        }
    } else if (st == LC_EUNKNOWN_BATCH) {
        k->ack_unknown++;
        fprintf(stderr, "lanesched-consume: batch %" PRIu64 " was no longer ours (%s)\n", batch_id,
                lc_consumer_error_get(c));
    } else {
        k->ack_errors++;
        fprintf(stderr, "lanesched-consume: ack batch %" PRIu64 ": %s: %s\n", batch_id,
                lc_status_str(st), lc_consumer_error_get(c));
    }
}

/* Verify, simulate, settle one batch (invariants 1 and 2). */
static void consume_batch_handle(const consume_opts_t *o, lc_consumer_t *c, const codec_batch_t *b,
                                 consume_counts_t *k)
{
    uint64_t real = 0;
    for (size_t i = 0; i < b->n_items; i++) {
        real += b->items[i].tokens;
        if (b->items[i].deliveries > 1)
            k->redelivered_items++;
    }
    uint64_t padded = (uint64_t)b->n_items * b->pad_to;
    k->batches++;
    k->items += b->n_items;
    k->real_tokens += real;
    k->padded_tokens += padded;
    if (k->have_prev) {
        if (b->signature == k->prev_signature)
            k->same_shape++;
        else
            k->shape_switches++;
    }
    k->have_prev = true;
    k->prev_signature = b->signature;
    consume_batch_verify(o, b, k);
    if (o->verbose)
        fprintf(stderr,
                "batch %" PRIu64 " shape 0x%016" PRIx64 " lane %" PRIu32
                " items %zu pad_to %" PRIu32 " real %" PRIu64 " padded %" PRIu64 "\n",
                b->batch_id, b->signature, b->lane, b->n_items, b->pad_to, real, padded);

    /* invariant 3: the bench's cache, an LRU of the last cache_shapes shapes */
    uint32_t cap = o->consumer.cache_shapes == 0 ? 1 : o->consumer.cache_shapes;
    cap = cap > CONSUME_LRU_MAX ? CONSUME_LRU_MAX : cap;
    uint32_t at = 0;
    while (at < k->n_lru && k->lru[at] != b->signature)
        at++;
    bool hit = at < k->n_lru;
    if (!hit)
        at = k->n_lru < cap ? k->n_lru++ : k->n_lru - 1;
    memmove(&k->lru[1], &k->lru[0], at * sizeof(k->lru[0]));
    k->lru[0] = b->signature;
    k->cache_hits += hit;
    uint64_t prefix = hit ? 0 : o->prefix_tokens;
    k->prefix_computed += prefix;
    double work_us =
        o->work_us_per_token * (double)(padded + prefix) + (double)o->work_us_per_batch;
    k->work_us += work_us;
    if (work_us >= 1.0)
        cli_sleep_ns((uint64_t)(work_us * 1000.0));

    uint64_t seq = k->batches;
    lc_ack_reply_t reply = {0};
    int64_t timeout = (int64_t)o->ack_timeout_ms;
    lc_status_t st;
    if (o->nak_every > 0 && seq % o->nak_every == 0) {
        st = b->n_items > 0 ? lc_ack_nak_send(c, b->batch_id, (uint32_t)b->n_items, timeout, &reply)
                            : lc_ack_all_send(c, b->batch_id, timeout, &reply);
        k->naks++;
        consume_ack_note(k, st, &reply, c, b->batch_id, timeout > 0);
    } else if (o->no_ack_every > 0 && seq % o->no_ack_every == 0) {
        lc_inprogress_remove(c, b->batch_id);
        k->unacked++;
    } else if (o->ack_async) {
        st = lc_ack_async_all_send(c, b->batch_id); /* the reply: consume_ack_done */
        k->acks++;
        if (st != LC_OK)
            consume_ack_note(k, st, &reply, c, b->batch_id, false);
    } else {
        st = lc_ack_all_send(c, b->batch_id, timeout, &reply);
        k->acks++;
        consume_ack_note(k, st, &reply, c, b->batch_id, timeout > 0);
    }
}

/* --ack-async: an AckReply, or an ack given up, read inside the library's calls. */
typedef struct {
    consume_counts_t *k;
    lc_consumer_t *c;
} consume_acks_t;

static void consume_ack_done(void *closure, uint64_t batch_id, lc_status_t st,
                             const lc_ack_reply_t *reply)
{
    consume_acks_t *a = closure;
    consume_ack_note(a->k, st, reply, a->c, batch_id, st == LC_OK);
}

/* Invariant 6. */
static void consume_gap_note(consume_counts_t *k, uint64_t now)
{
    if (k->done_ns == 0 || now < k->done_ns)
        return;
    uint64_t b = (now - k->done_ns) / 1000u / CONSUME_GAP_BUCKET_US;
    k->gaps[b < CONSUME_GAP_BUCKETS - 1 ? b : CONSUME_GAP_BUCKETS - 1]++;
    k->n_gaps++;
}

/* The median gap in us (a bucket's middle), -1 before a second batch. */
static double consume_gap_median_us(const consume_counts_t *k)
{
    if (k->n_gaps == 0)
        return -1.0;
    uint64_t seen = 0;
    uint32_t b = 0;
    while (b < CONSUME_GAP_BUCKETS - 1 && (seen += k->gaps[b]) * 2 < k->n_gaps)
        b++;
    return ((double)b + 0.5) * CONSUME_GAP_BUCKET_US;
}

static void consume_summary_print(const consume_opts_t *o, const consume_counts_t *k,
                                  const lc_consumer_stats_t *s, double elapsed_s)
{
    double waste = k->padded_tokens > 0 ? 100.0 * (double)(k->padded_tokens - k->real_tokens) /
                                              (double)k->padded_tokens
                                        : 0.0;
    /* Undefined before a second batch: null in JSON, n/a in text. */
    char hit_text[32] = "null";
    if (k->batches > 1)
        snprintf(hit_text, sizeof(hit_text), "%.3f",
                 100.0 * (double)k->same_shape / (double)(k->batches - 1));
    double rate = elapsed_s > 0 ? (double)k->items / elapsed_s : 0.0;
    uint64_t violations = 0;
    for (int v = 0; v < V_COUNT; v++)
        violations += k->violations[v];
    char gap_text[32] = "null"; /* undefined before a second batch, as the hit rate */
    double gap_us = consume_gap_median_us(k);
    if (gap_us >= 0)
        snprintf(gap_text, sizeof(gap_text), "%.0f", gap_us);

    if (o->json) {
        printf("{\"batches\":%" PRIu64 ",\"items\":%" PRIu64 ",\"real_tokens\":%" PRIu64
               ",\"padded_tokens\":%" PRIu64 ",\"padding_waste_pct\":%.3f,"
               "\"shape_hit_rate_pct\":%s,\"shape_switches\":%" PRIu64 ",\"acks\":%" PRIu64
               ",\"naks\":%" PRIu64 ",\"unacked\":%" PRIu64 ",\"acked_items\":%" PRIu64
               ",\"returned_items\":%" PRIu64 ",\"ack_unknown\":%" PRIu64 ",\"ack_errors\":%" PRIu64
               ",\"redelivered_items\":%" PRIu64 ",\"violations\":%" PRIu64
               ",\"violating_batches\":%" PRIu64 ",\"violations_by_kind\":{",
               k->batches, k->items, k->real_tokens, k->padded_tokens, waste, hit_text,
               k->shape_switches, k->acks, k->naks, k->unacked, k->acked_items, k->returned_items,
               k->ack_unknown, k->ack_errors, k->redelivered_items, violations,
               k->violating_batches);
        for (int v = 0; v < V_COUNT; v++)
            printf("%s\"%s\":%" PRIu64, v > 0 ? "," : "", violation_words[v], k->violations[v]);
        printf("},\"expired_pulls\":%" PRIu64 ",\"silent_pulls\":%" PRIu64
               ",\"no_responders\":%" PRIu64 ",\"reregistrations\":%" PRIu64 ",\"errors\":%" PRIu64
               ",\"heartbeats\":%" PRIu64 ",\"heartbeats_failed\":%" PRIu64
               ",\"elapsed_s\":%.3f,\"items_per_s\":%.1f,\"cache_hits\":%" PRIu64
               ",\"cache_hit_rate_pct\":%.3f,\"prefix_tokens_computed\":%" PRIu64
               ",\"work_s\":%.6f,\"next_batch_us_p50\":%s}\n",
               k->expired, k->idle_timeouts, k->no_responders, k->reregistrations, k->errors,
               s->heartbeats_sent, s->heartbeats_failed, elapsed_s, rate, k->cache_hits,
               k->batches ? 100.0 * (double)k->cache_hits / (double)k->batches : 0.0,
               k->prefix_computed, k->work_us / 1e6, gap_text);
        return;
    }
    printf("lanesched-consume: batches=%" PRIu64 " items=%" PRIu64 " real_tokens=%" PRIu64
           " padded_tokens=%" PRIu64 " padding_waste=%.2f%% shape_hit_rate=%s%s acks=%" PRIu64
           " naks=%" PRIu64 " unacked=%" PRIu64 " acked_items=%" PRIu64 " returned_items=%" PRIu64
           " ack_unknown=%" PRIu64 " ack_errors=%" PRIu64 " redelivered_items=%" PRIu64
           " violations=%" PRIu64,
           k->batches, k->items, k->real_tokens, k->padded_tokens, waste,
           k->batches > 1 ? hit_text : "n/a", k->batches > 1 ? "%" : "", k->acks, k->naks,
           k->unacked, k->acked_items, k->returned_items, k->ack_unknown, k->ack_errors,
           k->redelivered_items, violations);
    if (violations > 0) {
        printf(" (");
        bool first = true;
        for (int v = 0; v < V_COUNT; v++) {
            if (k->violations[v] == 0)
                continue;
            printf("%s%s=%" PRIu64, first ? "" : " ", violation_words[v], k->violations[v]);
            first = false;
        }
        printf(")");
    }
    printf(" expired_pulls=%" PRIu64 " silent_pulls=%" PRIu64 " no_responders=%" PRIu64
           " reregistrations=%" PRIu64 " errors=%" PRIu64 " heartbeats=%" PRIu64
           " next_batch_us_p50=%s elapsed=%.3fs rate=%.1f items/s\n",
           k->expired, k->idle_timeouts, k->no_responders, k->reregistrations, k->errors,
           s->heartbeats_sent, gap_us >= 0 ? gap_text : "n/a", elapsed_s, rate);
}

int main(int argc, char **argv)
{
    cli_program = "lanesched-consume";
    int rc = 0;
    consume_opts_t o;
    consume_counts_t k;
    lc_client_t *client = NULL;
    lc_consumer_t *consumer = NULL;
    lc_consumer_stats_t stats;
    char name[64];
    char errbuf[256] = "";
    consume_acks_t acks = {.k = &k};

    memset(&o, 0, sizeof(o));
    memset(&k, 0, sizeof(k));
    memset(&stats, 0, sizeof(stats));
    int parsed = consume_args_parse(argc, argv, &o);
    if (parsed != 0) {
        rc = parsed > 0 ? 0 : EXIT_USAGE;
        goto out;
    }
    if (o.consumer.name == NULL) {
        snprintf(name, sizeof(name), "consume-%ld", (long)getpid());
        o.consumer.name = name;
    }
    o.consumer.request_timeout_ms = o.ack_timeout_ms > 0 ? (int64_t)o.ack_timeout_ms : 5000;
    o.consumer.request_retries = 2;
    if (o.ack_async) {
        o.consumer.ack_done = consume_ack_done;
        o.consumer.ack_closure = &acks;
    }

    cli_signals_install();
    lc_status_t st = lc_client_open(&o.conn, errbuf, sizeof(errbuf), &client);
    if (st != LC_OK) {
        fprintf(stderr, "lanesched-consume: %s: %s\n", lc_status_str(st), errbuf);
        rc = EXIT_FAILED;
        goto out;
    }
    st = lc_consumer_open(client, &o.consumer, &consumer);
    if (st != LC_OK) {
        fprintf(stderr, "lanesched-consume: register: %s: %s\n", lc_status_str(st),
                lc_client_error_get(client));
        rc = EXIT_FAILED;
        goto out;
    }
    acks.c = consumer;
    const lc_registered_t *reg = lc_consumer_registered_get(consumer);
    if (o.verbose)
        fprintf(stderr,
                "registered %s: pull %s heartbeat %" PRIu32 " ms, dead after %" PRIu32
                " ms, ack wait %" PRIu32 " ms\n",
                reg->consumer_id, reg->pull_subject, reg->heartbeat_ms, reg->dead_after_ms,
                reg->ack_wait_ms);

    uint64_t start = clock_mono_ns();
    uint64_t end = o.duration_s > 0 ? start + o.duration_s * 1000000000ull : UINT64_MAX;
    uint64_t last_work = start;
    uint64_t pulls_lost = 0; /* lost pulls already acted on */
    while (!cli_stop) {
        if (o.exit_after_batches > 0 && k.batches >= o.exit_after_batches)
            break;
        uint64_t now = clock_mono_ns();
        if (now >= end)
            break;
        uint64_t wait_ns = o.pull_wait_ms * 1000000ull;
        if (end - now < wait_ns)
            wait_ns = end - now;
        if (o.until_idle_ms > 0) {
            uint64_t idle_end = last_work + o.until_idle_ms * 1000000ull;
            if (now >= idle_end)
                break;
            if (idle_end - now < wait_ns)
                wait_ns = idle_end - now;
        }
        int64_t wait_ms = (int64_t)((wait_ns + 999999) / 1000000);

        codec_batch_t *batch = NULL;
        st = lc_batch_next(consumer, wait_ms, &batch);
        switch (st) {
        case LC_OK:
            consume_gap_note(&k, clock_mono_ns());
            consume_batch_handle(&o, consumer, batch, &k);
            codec_batch_destroy(batch);
            last_work = k.done_ns = clock_mono_ns();
            break;
        case LC_EEMPTY:
            k.expired++;
            break;
        case LC_ETIMEOUT: {
            k.idle_timeouts++;
            /* A pull that got no answer at all past its expiry: the instance that issued our id is
             * gone (another took its models over, or it restarted) and whoever serves now stays
             * silent about ids it did not issue (subjects.md, "Subjects served"): register again.
             */
            lc_consumer_stats_t now_stats;
            lc_consumer_stats_get(consumer, &now_stats);
            if (now_stats.pulls_lost <= pulls_lost)
                break;
            pulls_lost = now_stats.pulls_lost;
            k.reregistrations++;
            fprintf(stderr, "lanesched-consume: a pull went unanswered; registering again\n");
            if ((st = lc_consumer_register(consumer)) != LC_OK)
                fprintf(stderr, "lanesched-consume: register: %s: %s (retrying)\n",
                        lc_status_str(st), lc_consumer_error_get(consumer));
            break;
        }
        case LC_ENORESPONDERS:
            /* The daemon is away: wait a little, it may come back (then: unknown_consumer). */
            k.no_responders++;
            cli_sleep_ns(wait_ns < 500000000ull ? wait_ns : 500000000ull);
            break;
        case LC_EUNKNOWN_CONSUMER:
            k.reregistrations++;
            fprintf(stderr, "lanesched-consume: %s; registering again\n",
                    lc_consumer_error_get(consumer));
            st = lc_consumer_register(consumer);
            if (st != LC_OK) {
                fprintf(stderr, "lanesched-consume: register: %s: %s\n", lc_status_str(st),
                        lc_consumer_error_get(consumer));
                rc = EXIT_FAILED;
                goto done;
            }
            break;
        case LC_ECODEC:
        case LC_EREFUSED:
        case LC_EPROTO:
            k.errors++;
            fprintf(stderr, "lanesched-consume: %s: %s\n", lc_status_str(st),
                    lc_consumer_error_get(consumer));
            break;
        default:
            k.errors++;
            fprintf(stderr, "lanesched-consume: %s: %s\n", lc_status_str(st),
                    lc_consumer_error_get(consumer));
            rc = EXIT_FAILED;
            goto done;
        }
    }
done:;
    double elapsed = (double)(clock_mono_ns() - start) / 1e9;
    if (o.ack_async && lc_ack_async_complete(consumer, 3 * (int64_t)o.ack_timeout_ms) != LC_OK)
        fprintf(stderr, "lanesched-consume: %s\n", lc_consumer_error_get(consumer));
    if (!o.no_bye) {
        st = lc_bye_send(consumer, (int64_t)o.ack_timeout_ms);
        if (st != LC_OK && st != LC_EINVAL) {
            fprintf(stderr, "lanesched-consume: bye: %s: %s\n", lc_status_str(st),
                    lc_consumer_error_get(consumer));
        }
    }
    lc_consumer_stats_get(consumer, &stats);
    consume_summary_print(&o, &k, &stats, elapsed);
    if (k.violating_batches > 0)
        rc = EXIT_VIOLATION;
out:
    lc_consumer_close(consumer);
    lc_client_close(client);
    return rc;
}
