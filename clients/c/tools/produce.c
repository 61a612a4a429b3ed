/*
 * produce.c - lanesched-produce: submits synthetic work items for one model and one shape, at a
 * rate, fire-and-forget or request/reply, and prints what the daemon answered.
 *
 * Owns: the item and id buffers of one Submit message (reused for every message), the payload
 * buffer, the per-reason rejection tally and the run's counters.
 *
 * Invariants:
 *  1. Item i of the run (0-based, across messages) has id <id-prefix><i>, so a rerun with the
 *     same --id-prefix resubmits the same ids (the daemon answers DUPLICATE inside its dedupe
 *     window) and a retried message (inside lc_submit_request) repeats its ids exactly.
 *  2. Pacing is absolute: the message starting at item k leaves no earlier than start + k / rate,
 *     so a slow send is caught up rather than accumulated.
 *  3. Counters describe what the daemon said, never what we hoped: in fire-and-forget mode
 *     accepted / duplicates / rejected are unknown and printed as such (n/a, JSON null).
 *  4. The first message that cannot be confirmed (timeout / no responders / NATS failure after
 *     the retries) stops the run; a message refused whole (SubmitReply.error) is counted and
 *     the run goes on.
 *  5. --async keeps up to --window Submits in flight (lc_submit_async): each message's fate is
 *     still exact (one callback each, with its first item's index as the tag), and a retry
 *     resends that message's own bytes from the library's window.
 *
 * Rejected alternatives:
 *  - Reply matching of its own for --async: the library's window (clients/c/window.c) matches
 *    every reply to its Submit and resends it, for every producer, not for this tool alone.
 *  - Random ids: a rerun could not repeat ids on purpose to test dedupe.
 *  - Random payload bytes: the payload's content means nothing to the daemon; a fixed pattern
 *    keeps runs reproducible and costs nothing per item.
 */
#include "clients/c/tools/cli.h"
#include "clients/c/lanes_client.h"
#include "codec/codec.h"
#include "common/clock.h"
#include "common/version.h"
#include "common/rng.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE  1
#define EXIT_FAILED 2

#define DEFAULT_TOKENS     128u
#define DEFAULT_COUNT      1000u
#define DEFAULT_BATCH      1u
#define DEFAULT_TIMEOUT_MS 5000u
#define DEFAULT_RETRIES    3u
#define DEFAULT_WINDOW     16u
#define MAX_BATCH          100000u
#define MAX_REASONS        32
/* --payload-bytes at most: the largest max_payload a NATS server takes (64 MiB); a larger payload
 * could only be refused, after this process built it. */
#define PRODUCE_PAYLOAD_MAX (64u << 20)

typedef struct {
    lc_client_config_t conn;
    const char *model;
    const char **components; /* borrowed from argv; n_components entries */
    size_t n_components;
    bool has_signature;
    uint64_t signature;
    bool send_hashes;
    uint64_t tokens_min, tokens_max;
    uint64_t prefix_tokens; /* WorkItem.prefix_tokens of every item (0: not sent) */
    uint64_t max_wait_ms;   /* WorkItem.max_wait_ms of every item (0: not sent) */
    const char *payload_text;
    uint64_t payload_bytes;
    bool has_payload_bytes;
    uint64_t count;
    double rate;
    uint64_t batch;
    bool request;
    bool async;      /* --async: several Submits in flight (lc_submit_async) */
    uint64_t window; /* --window: how many */
    uint64_t timeout_ms;
    uint64_t retries;
    const char *id_prefix;
    uint64_t seed;
    bool json;
} produce_opts_t;

typedef struct {
    char reason[LC_REASON_MAX];
    uint64_t count;
} reason_count_t;

typedef struct {
    uint64_t sent, tokens_sent;
    uint64_t accepted, duplicates, rejected;
    uint64_t tokens_accepted, tokens_duplicate;
    uint64_t retries;
    uint64_t failed_messages, failed_items;
    reason_count_t reasons[MAX_REASONS];
    size_t n_reasons;
} produce_counts_t;

static void produce_help(FILE *f)
{
    fputs("Usage: lanesched-produce --model M [options]\n"
          "Submits synthetic work items to lanesched and prints a summary line.\n\n",
          f);
    cli_conn_help(f);
    fputs(
        "Items:\n"
        "  --model M               model (required); items go to <prefix>.submit.<M>\n"
        "  --component TEXT        a cacheable prompt component, repeatable, in order; the\n"
        "                          shape is the signature of the components\n"
        "  --signature HEX         the shape signature itself (instead of --component)\n"
        "                          (neither: the empty shape 0xef46db3751d8e999)\n"
        "  --send-hashes           also send the component hashes (the daemon checks them)\n"
        "  --tokens N              tokens per item (default 128)\n"
        "  --tokens-min A --tokens-max B  tokens uniform in [A, B] instead\n"
        "  --seed N                seed of the token spread (default 1)\n"
        "  --prefix-tokens N       tokens of the shape's cacheable prefix (WorkItem field 9)\n"
        "  --max-wait-ms N         each item's own wait budget (WorkItem field 10)\n"
        "  --payload TEXT          payload of every item (default empty)\n"
        "  --payload-bytes N       payload of N filler bytes instead\n"
        "  --id-prefix S           item ids are S0, S1, ... (default p<pid>-<time>-)\n"
        "Sending:\n"
        "  --count N               items to send (default 1000)\n"
        "  --rate N                items per second, 0 = as fast as possible (default 0)\n"
        "  --batch N               items per Submit message (default 1)\n"
        "  --request               wait for each SubmitReply (default: fire-and-forget)\n"
        "  --async                 keep --window Submits in flight, each SubmitReply read as it\n"
        "                          comes (counts as --request's)\n"
        "  --window N              Submits in flight with --async (default 16)\n"
        "  --timeout-ms N          reply timeout with --request / --async (default 5000)\n"
        "  --retries N             resends of an unanswered message, same ids (default 3)\n"
        "Output:\n"
        "  --json                  one JSON line instead of the text summary\n"
        "  --help                  this text\n"
        "  --version               the version and the protocol version\n"
        "Exit status: 0 done, 1 usage, 2 connection failure, or a message unconfirmed or refused\n"
        "whole (the run stops at the first unconfirmed one).\n",
        f);
}

static bool produce_signature_set(produce_opts_t *o, const char *text)
{
    if (lc_shape_parse(text, &o->signature) != LC_OK) {
        fprintf(stderr, "--signature: \"%s\" is not a non-zero 64-bit hex number\n", text);
        return false;
    }
    o->has_signature = true;
    return true;
}

/* Returns 0 to run, 1 after --help, -1 on a usage error. */
static int produce_args_parse(int argc, char **argv, produce_opts_t *o)
{
    uint64_t tokens = DEFAULT_TOKENS;
    bool has_min = false, has_max = false;

    cli_conn_defaults(&o->conn);
    o->count = DEFAULT_COUNT;
    o->batch = DEFAULT_BATCH;
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    o->retries = DEFAULT_RETRIES;
    o->window = DEFAULT_WINDOW;
    o->seed = 1;
    o->components = calloc((size_t)argc, sizeof(*o->components));
    if (o->components == NULL) {
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int rc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            produce_help(stdout);
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
        if (strcmp(a, "--request") == 0) {
            o->request = true;
        } else if (strcmp(a, "--async") == 0) {
            o->async = true;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--send-hashes") == 0) {
            o->send_hashes = true;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--model", &v)) != 0) {
            if (rc < 0)
                return -1;
            o->model = v;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--component", &v)) != 0) {
            if (rc < 0)
                return -1;
            o->components[o->n_components++] = v;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--signature", &v)) != 0) {
            if (rc < 0 || !produce_signature_set(o, v))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--tokens-min", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--tokens-min", v, 0, UINT32_MAX, &o->tokens_min))
                return -1;
            has_min = true;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--tokens-max", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--tokens-max", v, 0, UINT32_MAX, &o->tokens_max))
                return -1;
            has_max = true;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--tokens", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--tokens", v, 0, UINT32_MAX, &tokens))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--prefix-tokens", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--prefix-tokens", v, 0, UINT32_MAX, &o->prefix_tokens))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--max-wait-ms", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--max-wait-ms", v, 0, UINT32_MAX, &o->max_wait_ms))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--seed", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--seed", v, 0, UINT64_MAX, &o->seed))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--payload-bytes", &v)) != 0) {
            if (rc < 0 ||
                !cli_u64_parse("--payload-bytes", v, 0, PRODUCE_PAYLOAD_MAX, &o->payload_bytes))
                return -1;
            o->has_payload_bytes = true;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--payload", &v)) != 0) {
            if (rc < 0)
                return -1;
            o->payload_text = v;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--count", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--count", v, 0, UINT64_MAX / 2, &o->count))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--rate", &v)) != 0) {
            if (rc < 0 || !cli_double_parse("--rate", v, &o->rate))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--batch", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--batch", v, 1, MAX_BATCH, &o->batch))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--window", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--window", v, 1, 65536, &o->window))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--timeout-ms", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--timeout-ms", v, 1, INT32_MAX, &o->timeout_ms))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--retries", &v)) != 0) {
            if (rc < 0 || !cli_u64_parse("--retries", v, 0, UINT32_MAX, &o->retries))
                return -1;
        } else if ((rc = cli_flag_value(argc, argv, &i, "--id-prefix", &v)) != 0) {
            if (rc < 0)
                return -1;
            o->id_prefix = v;
        } else {
            cli_unknown(a);
            return -1;
        }
    }
    if (o->async && o->request) {
        fprintf(stderr, "--async and --request exclude each other\n");
        return -1;
    }
    o->request |= o->async; /* the same counts, replies read asynchronously */
    if (o->model == NULL || o->model[0] == '\0') {
        fprintf(stderr, "--model is required (see --help)\n");
        return -1;
    }
    if (o->has_signature && o->n_components > 0) {
        fprintf(stderr, "--signature and --component exclude each other\n");
        return -1;
    }
    if (o->send_hashes && o->has_signature) {
        fprintf(stderr, "--send-hashes needs --component\n");
        return -1;
    }
    if (o->payload_text != NULL && o->has_payload_bytes) {
        fprintf(stderr, "--payload and --payload-bytes exclude each other\n");
        return -1;
    }
    if (has_min != has_max) {
        fprintf(stderr, "--tokens-min and --tokens-max go together\n");
        return -1;
    }
    if (has_min) {
        if (o->tokens_min > o->tokens_max) {
            fprintf(stderr, "--tokens-min is above --tokens-max\n");
            return -1;
        }
    } else {
        o->tokens_min = o->tokens_max = tokens;
    }
    return 0;
}

static void produce_reason_count(produce_counts_t *k, const char *reason)
{
    const char *r = reason[0] != '\0' ? reason : "(none)";
    for (size_t i = 0; i < k->n_reasons; i++) {
        if (strcmp(k->reasons[i].reason, r) == 0) {
            k->reasons[i].count++;
            return;
        }
    }
    size_t i = k->n_reasons < MAX_REASONS ? k->n_reasons++ : MAX_REASONS - 1;
    if (i == MAX_REASONS - 1 && k->reasons[i].count > 0)
        r = "(other)";
    snprintf(k->reasons[i].reason, sizeof(k->reasons[i].reason), "%s", r);
    k->reasons[i].count++;
}

static const char *produce_mode(const produce_opts_t *o)
{
    return o->async ? "async" : o->request ? "request" : "fire-and-forget";
}

/* One reply's verdicts into the counts; tokens[j] is item j's. */
static void produce_results_count(produce_counts_t *k, const lc_item_result_t *results, size_t n,
                                  const uint32_t *tokens, uint32_t attempts)
{
    k->retries += attempts - 1;
    for (size_t j = 0; j < n; j++) {
        if (results[j].status == CODEC_ITEM_ACCEPTED) {
            k->accepted++;
            k->tokens_accepted += tokens[j];
        } else if (results[j].status == CODEC_ITEM_DUPLICATE) {
            k->duplicates++;
            k->tokens_duplicate += tokens[j];
        } else {
            k->rejected++;
            produce_reason_count(k, results[j].reason);
        }
    }
}

/* --async: the tokens of the items in flight, by item index modulo the ring (window + 1
 * messages: a message's slots are reused only once the window had room for a new one, so the
 * message that used them was answered), and the run's fate. */
typedef struct {
    produce_counts_t *k;
    uint32_t *tokens;
    size_t ring;
    uint32_t scratch_n;
    uint32_t *scratch; /* one message's tokens, gathered from the ring */
    bool failed;       /* a Submit was not confirmed: the run stops */
} produce_async_t;

static void produce_async_done(void *closure, const lc_submit_done_t *d)
{
    produce_async_t *a = closure;
    if (d->status == LC_OK) {
        for (size_t j = 0; j < d->n && j < a->scratch_n; j++)
            a->scratch[j] = a->tokens[(d->tag + j) % a->ring];
        produce_results_count(a->k, d->results, d->n, a->scratch, d->summary.attempts);
        return;
    }
    a->k->failed_messages++;
    a->k->failed_items += d->n;
    fprintf(stderr, "lanesched-produce: %s: %s\n", lc_status_str(d->status), d->error);
    if (d->status != LC_EREFUSED)
        a->failed = true;
}

static void produce_summary_print(const produce_opts_t *o, const produce_counts_t *k,
                                  double elapsed_s)
{
    double rate = elapsed_s > 0 ? (double)k->sent / elapsed_s : 0.0;
    if (o->json) {
        printf("{\"mode\":\"%s\",\"sent\":%" PRIu64 ",\"tokens_sent\":%" PRIu64, produce_mode(o),
               k->sent, k->tokens_sent);
        if (o->request) {
            printf(",\"accepted\":%" PRIu64 ",\"duplicates\":%" PRIu64 ",\"rejected\":%" PRIu64
                   ",\"rejected_by_reason\":{",
                   k->accepted, k->duplicates, k->rejected);
            for (size_t i = 0; i < k->n_reasons; i++)
                printf("%s\"%s\":%" PRIu64, i > 0 ? "," : "", k->reasons[i].reason,
                       k->reasons[i].count);
            printf("},\"tokens_accepted\":%" PRIu64 ",\"tokens_duplicate\":%" PRIu64,
                   k->tokens_accepted, k->tokens_duplicate);
        } else {
            printf(",\"accepted\":null,\"duplicates\":null,\"rejected\":null,"
                   "\"rejected_by_reason\":null,\"tokens_accepted\":null,"
                   "\"tokens_duplicate\":null");
        }
        printf(",\"retries\":%" PRIu64 ",\"failed_messages\":%" PRIu64 ",\"failed_items\":%" PRIu64
               ",\"elapsed_s\":%.3f,\"items_per_s\":%.1f}\n",
               k->retries, k->failed_messages, k->failed_items, elapsed_s, rate);
        return;
    }
    printf("lanesched-produce: mode=%s sent=%" PRIu64, produce_mode(o), k->sent);
    if (o->request) {
        printf(" accepted=%" PRIu64 " duplicates=%" PRIu64 " rejected=%" PRIu64, k->accepted,
               k->duplicates, k->rejected);
        if (k->n_reasons > 0) {
            printf(" (");
            for (size_t i = 0; i < k->n_reasons; i++)
                printf("%s%s=%" PRIu64, i > 0 ? " " : "", k->reasons[i].reason,
                       k->reasons[i].count);
            printf(")");
        }
        printf(" tokens_accepted=%" PRIu64 " tokens_duplicate=%" PRIu64, k->tokens_accepted,
               k->tokens_duplicate);
    } else {
        printf(" accepted=n/a duplicates=n/a rejected=n/a tokens_accepted=n/a");
    }
    printf(" tokens_sent=%" PRIu64 " retries=%" PRIu64 " failed_messages=%" PRIu64
           " failed_items=%" PRIu64 " elapsed=%.3fs rate=%.1f items/s\n",
           k->tokens_sent, k->retries, k->failed_messages, k->failed_items, elapsed_s, rate);
}

int main(int argc, char **argv)
{
    cli_program = "lanesched-produce";
    int rc = 0;
    produce_opts_t o;
    produce_counts_t k;
    lc_client_t *client = NULL;
    codec_work_item_t *items = NULL;
    lc_item_result_t *results = NULL;
    uint32_t *tokens_of = NULL; /* the current message's tokens, item by item */
    char *ids = NULL;
    uint8_t *payload = NULL;
    uint64_t *hashes = NULL;
    char default_prefix[48];
    char errbuf[256] = "";
    produce_async_t async = {.k = &k};

    memset(&o, 0, sizeof(o));
    memset(&k, 0, sizeof(k));
    int parsed = produce_args_parse(argc, argv, &o);
    if (parsed != 0) {
        rc = parsed > 0 ? 0 : EXIT_USAGE;
        goto out;
    }
    if (o.id_prefix == NULL) {
        snprintf(default_prefix, sizeof(default_prefix), "p%ld-%llx-", (long)getpid(),
                 (unsigned long long)time(NULL));
        o.id_prefix = default_prefix;
    }

    /* The shape: the components' signature (and hashes), the given one, or the empty shape. */
    uint64_t signature = o.signature;
    if (!o.has_signature) {
        hashes = calloc(o.n_components + 1, sizeof(*hashes));
        if (hashes == NULL) {
            fprintf(stderr, "out of memory\n");
            rc = EXIT_FAILED;
            goto out;
        }
        lc_shape_hash(o.components, o.n_components, hashes);
        signature = codec_signature(hashes, o.n_components); /* what lc_shape_sign computes */
    }

    size_t payload_len = o.payload_text != NULL ? strlen(o.payload_text) : o.payload_bytes;
    size_t id_cap = strlen(o.id_prefix) + 21;
    items = calloc(o.batch, sizeof(*items));
    results = calloc(o.batch, sizeof(*results));
    tokens_of = calloc(o.batch, sizeof(*tokens_of));
    ids = malloc(o.batch * id_cap);
    payload = malloc(payload_len + 1);
    if (items == NULL || results == NULL || tokens_of == NULL || ids == NULL || payload == NULL) {
        fprintf(stderr, "out of memory\n");
        rc = EXIT_FAILED;
        goto out;
    }
    if (o.payload_text != NULL) {
        memcpy(payload, o.payload_text, payload_len);
    } else {
        static const char filler[] = "lanesched payload filler. ";
        for (size_t i = 0; i < payload_len; i++)
            payload[i] = (uint8_t)filler[i % (sizeof(filler) - 1)];
    }

    cli_signals_install();
    lc_status_t st = lc_client_open(&o.conn, errbuf, sizeof(errbuf), &client);
    if (st != LC_OK) {
        fprintf(stderr, "lanesched-produce: %s: %s\n", lc_status_str(st), errbuf);
        rc = EXIT_FAILED;
        goto out;
    }

    if (o.async) {
        async.ring = (size_t)(o.window + 1) * o.batch;
        async.tokens = calloc(async.ring, sizeof(*async.tokens));
        async.scratch = calloc(o.batch, sizeof(*async.scratch));
        async.scratch_n = (uint32_t)o.batch;
        lc_submit_async_config_t ac;
        lc_submit_async_config_init(&ac);
        ac.window = (uint32_t)o.window;
        ac.timeout_ms = (int64_t)o.timeout_ms;
        ac.retries = (uint32_t)o.retries;
        ac.done = produce_async_done;
        ac.closure = &async;
        st = async.tokens == NULL || async.scratch == NULL ? LC_ENOMEM
                                                           : lc_submit_async_open(client, &ac);
        if (st != LC_OK) {
            fprintf(stderr, "lanesched-produce: async: %s: %s\n", lc_status_str(st),
                    lc_client_error_get(client));
            rc = EXIT_FAILED;
            goto out;
        }
    }

    uint64_t rng = o.seed;
    uint64_t start = clock_mono_ns();
    for (uint64_t next = 0; next < o.count && !cli_stop;) {
        size_t n = (size_t)(o.count - next < o.batch ? o.count - next : o.batch);
        if (o.rate > 0) {
            uint64_t due = start + (uint64_t)((double)next / o.rate * 1e9);
            uint64_t now = clock_mono_ns();
            if (due > now)
                cli_sleep_ns(due - now);
            if (cli_stop)
                break;
        }
        uint64_t tokens_msg = 0;
        for (size_t j = 0; j < n; j++) {
            char *id = ids + j * id_cap;
            int id_len = snprintf(id, id_cap, "%s%" PRIu64, o.id_prefix, next + j);
            uint64_t span = o.tokens_max - o.tokens_min;
            uint32_t tokens =
                (uint32_t)(o.tokens_min + (span == 0 ? 0 : rng_splitmix64(&rng) % (span + 1)));
            items[j] = (codec_work_item_t){
                .id = {.ptr = (const uint8_t *)id, .len = (size_t)id_len},
                .model = o.model,
                .component_hashes = o.send_hashes && o.n_components > 0 ? hashes : NULL,
                .n_component_hashes = o.send_hashes ? o.n_components : 0,
                .has_signature = true,
                .signature = signature,
                .tokens = tokens,
                .payload = {.ptr = payload_len > 0 ? payload : NULL, .len = payload_len},
                .prefix_tokens = (uint32_t)o.prefix_tokens,
                .max_wait_ms = (uint32_t)o.max_wait_ms,
            };
            tokens_msg += tokens;
            tokens_of[j] = tokens;
            if (o.async)
                async.tokens[(next + j) % async.ring] = tokens;
        }
        if (o.async) {
            st = lc_submit_async(client, o.model, items, n, next);
        } else if (!o.request) {
            st = lc_submit_send(client, o.model, items, n);
        } else {
            lc_submit_summary_t sum;
            st = lc_submit_request(client, o.model, items, n, (int64_t)o.timeout_ms,
                                   (uint32_t)o.retries, results, &sum);
            if (st == LC_OK)
                produce_results_count(&k, results, n, tokens_of, sum.attempts);
        }
        k.sent += n;
        k.tokens_sent += tokens_msg;
        next += n;
        if (async.failed) {
            rc = EXIT_FAILED;
            break;
        }
        if (st != LC_OK) {
            k.failed_messages++;
            k.failed_items += n;
            fprintf(stderr, "lanesched-produce: %s: %s\n", lc_status_str(st),
                    lc_client_error_get(client));
            if (st != LC_EREFUSED) {
                rc = EXIT_FAILED;
                break;
            }
        }
    }
    if (o.async) {
        st = lc_submit_async_complete(client, (int64_t)(o.timeout_ms * (o.retries + 1)) + 1000);
        if (st != LC_OK) {
            fprintf(stderr, "lanesched-produce: %s\n", lc_client_error_get(client));
            rc = EXIT_FAILED;
        }
        if (async.failed)
            rc = EXIT_FAILED;
    }
    if (!o.request && rc == 0) {
        st = lc_client_flush(client, (int64_t)o.timeout_ms);
        if (st != LC_OK) {
            fprintf(stderr, "lanesched-produce: flush: %s: %s\n", lc_status_str(st),
                    lc_client_error_get(client));
            rc = EXIT_FAILED;
        }
    }
    double elapsed = (double)(clock_mono_ns() - start) / 1e9;
    produce_summary_print(&o, &k, elapsed);
    if (k.failed_messages > 0)
        rc = EXIT_FAILED;
out:
    lc_client_close(client);
    free(tokens_of);
    free(async.tokens);
    free(async.scratch);
    free(o.components);
    free(hashes);
    free(items);
    free(results);
    free(ids);
    free(payload);
    return rc;
}
