/*
 * net_result.c - one NATS run's figures: measured from the per-item times and the workers' GPU
 * counters, printed as the run's paragraph, and written to the --json document.
 *
 * Invariants:
 *  1. wait = the moment a worker starts serving the item - the moment its producer got the ack
 *     that stored it (clamped at 0: a worker may start before the producer reads the reply);
 *     "from submit" starts at the send time the payload carries. First delivery only.
 *  2. Quantiles are nearest-rank over the items served; an empty set prints and writes n/a
 *     (JSON null), never 0.
 *  3. items/s = items served / (last ack - first submit), the end-to-end figure the ratio
 *     lanesched / JetStream compares.
 *
 * Rejected alternatives:
 *  - WorkItem.created_unix_ns for the wait: the daemon ignores it and never delivers it.
 */
#include "net.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NET_SMALL_QUEUE 1000u /* fewer held items: the memory figure is noise */

static int net_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank quantile of sorted v, in ms; -1 when empty. */
static double net_quantile_ms(const uint64_t *v, size_t n, double q)
{
    if (n == 0)
        return -1.0;
    size_t r = (size_t)ceil(q * (double)n);
    r = r < 1 ? 1 : r > n ? n : r;
    return (double)v[r - 1] / 1e6;
}

/* Everything the workers and producers measured (invariant 1). */
int net_result_fill(net_run_t *run, net_result_t *r)
{
    size_t n = run->trace->n_items, na = 0, nb = 0;
    uint64_t *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));
    uint64_t first_sent = UINT64_MAX;
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t sent = atomic_load(&run->sent_ns[i]), acked = atomic_load(&run->acked_ns[i]);
        uint64_t served = atomic_load(&run->served_ns[i]);
        if (sent != 0 && sent < first_sent)
            first_sent = sent;
        if (served == 0)
            continue;
        if (acked != 0)
            a[na++] = served > acked ? served - acked : 0;
        if (sent != 0)
            b[nb++] = served > sent ? served - sent : 0;
    }
    qsort(a, na, sizeof(*a), net_u64_cmp);
    qsort(b, nb, sizeof(*b), net_u64_cmp);
    r->wait_p50_ms = net_quantile_ms(a, na, 0.50);
    r->wait_p99_ms = net_quantile_ms(a, na, 0.99);
    r->wait_max_ms = net_quantile_ms(a, na, 1.0);
    r->sub_p50_ms = net_quantile_ms(b, nb, 0.50);
    r->sub_p99_ms = net_quantile_ms(b, nb, 0.99);
    r->sub_max_ms = net_quantile_ms(b, nb, 1.0);
    free(a);
    free(b);

    r->accepted = atomic_load(&run->accepted_items);
    r->accepted_tokens = atomic_load(&run->accepted_tokens);
    r->duplicates = atomic_load(&run->duplicates);
    r->failed = atomic_load(&run->failed_items);
    r->served = atomic_load(&run->served_items);
    r->redelivered = atomic_load(&run->redelivered_items);
    r->foreign = atomic_load(&run->foreign_items);
    r->worker_errors = atomic_load(&run->worker_errors);
    r->wire_mismatches = atomic_load(&run->wire_mismatches);
    uint64_t last = atomic_load(&run->last_ack_ns);
    r->elapsed_s =
        first_sent != UINT64_MAX && last > first_sent ? (double)(last - first_sent) / 1e9 : 0.0;
    r->items_per_s = r->elapsed_s > 0 ? (double)r->served / r->elapsed_s : 0.0;
    net_run_tally_get(run, &r->tally);
    r->waste_pct =
        report_pct(r->tally.padded_tokens - r->tally.real_tokens, r->tally.padded_tokens);
    r->hit_pct = r->tally.batches > 0 ? report_pct(r->tally.hits, r->tally.batches) : -1.0;
    r->drained = run->drained;
    r->peak_queued = run->peak_queued;
    r->rss_base_kb = run->rss_base_kb;
    r->rss_peak_kb = run->rss_peak_kb;
    r->bytes_per_item =
        r->rss_base_kb >= 0 && r->rss_peak_kb >= r->rss_base_kb && r->peak_queued > 0
            ? (double)(r->rss_peak_kb - r->rss_base_kb) * 1024.0 / (double)r->peak_queued
            : -1.0;
    return 0;
}

static void net_ms_text(char *buf, size_t len, double ms)
{
    if (ms < 0)
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%.1f ms", ms);
}

void net_result_print(const net_result_t *r, const net_trace_t *t, const net_opts_t *o)
{
    char p50[32], p99[32], pmax[32], s50[32], s99[32];
    bool lanes = strcmp(r->system, "lanesched") == 0;
    printf("\n== %s%s%s%s\n", lanes ? "lanesched, durability " : "JetStream work queue, ",
           r->durability, lanes ? ", policy " : " storage", lanes ? r->policy : "");
    if (!r->ran) {
        printf("not run: %s\n", r->error);
        return;
    }
    printf("items            %zu in the trace: %" PRIu64 " stored (%" PRIu64
           " duplicate answers), %" PRIu64 " failed; %" PRIu64 " served, %" PRIu64
           " served again, %" PRIu64 " foreign\n",
           t->n_items, r->accepted, r->duplicates, r->failed, r->served, r->redelivered,
           r->foreign);
    if (r->have_stats) {
        const net_stats_t *d = &r->delta;
        printf("tokens           received %" PRIu64 "  routed %" PRIu64 "  completed %" PRIu64
               "  received - completed %" PRId64 "%s\n",
               d->tokens_received, d->tokens_routed, d->tokens_completed, r->token_difference,
               r->token_difference == 0 ? "" : "  <-- NONZERO");
        if (r->drained)
            printf("                 (routed - received %" PRId64 ": redeliveries; submitted by "
                   "the producers %" PRIu64 ")\n",
                   (int64_t)(d->tokens_routed - d->tokens_received), r->accepted_tokens);
    } else {
        printf("tokens           stored %" PRIu64 " (of %" PRIu64 " in the trace)\n",
               r->accepted_tokens, t->tokens);
    }
    printf("items/s          %.1f end to end (%" PRIu64 " items, %.2f s from the first submit "
           "to the last ack)%s\n",
           r->items_per_s, r->served, r->elapsed_s, r->drained ? "" : "  NOT DRAINED");
    net_ms_text(p50, sizeof(p50), r->wait_p50_ms);
    net_ms_text(p99, sizeof(p99), r->wait_p99_ms);
    net_ms_text(pmax, sizeof(pmax), r->wait_max_ms);
    net_ms_text(s50, sizeof(s50), r->sub_p50_ms);
    net_ms_text(s99, sizeof(s99), r->sub_p99_ms);
    printf("wait             p50 %s  p99 %s  max %s (submit ack -> a worker starts it); from "
           "the submit: p50 %s  p99 %s\n",
           p50, p99, pmax, s50, s99);
    printf("padding waste    %.2f%% (workers: padded %" PRIu64 ", real %" PRIu64 ")", r->waste_pct,
           r->tally.padded_tokens, r->tally.real_tokens);
    if (r->have_stats)
        printf("; daemon's count %.2f%%", r->daemon_waste_pct);
    printf("\n");
    if (r->hit_pct >= 0)
        printf("shape hit rate   %.2f%% (%" PRIu64 " of %" PRIu64
               " batches; LRU of the last %" PRIu32 " shapes per worker)\n",
               r->hit_pct, r->tally.hits, r->tally.batches, o->gpu.cache_shapes);
    printf("batches          %" PRIu64 " (%.2f items each); GPU busy %.2f s simulated\n",
           r->tally.batches,
           r->tally.batches > 0 ? (double)r->tally.items / (double)r->tally.batches : 0.0,
           (double)r->tally.busy_ns / 1e9);
    if (r->have_stats)
        printf("lanes            opened %" PRIu64 ", reuses %" PRIu64 ", shape switches %" PRIu64
               ", items returned %" PRIu64 ", dead-lettered %" PRIu64 ", rejected %" PRIu64 "\n",
               r->delta.lanes_opened, r->delta.lane_reuses, r->delta.shape_switches,
               r->delta.items_returned, r->delta.dead_lettered, r->delta.rejected);
    if (r->have_stats &&
        (r->delta.publish_failures | r->delta.dropped_messages |
         r->delta.batches_expired_ack_deadline | r->delta.consumers_declared_dead) != 0)
        printf("daemon trouble   publish failures %" PRIu64 ", dropped messages %" PRIu64
               ", batches past their ack deadline %" PRIu64 ", consumers declared dead %" PRIu64
               "\n",
               r->delta.publish_failures, r->delta.dropped_messages,
               r->delta.batches_expired_ack_deadline, r->delta.consumers_declared_dead);
    const char *who = lanes ? "daemon memory   " : "server memory   ";
    if (r->bytes_per_item >= 0)
        printf("%s peak RSS %.1f MB - before the load %.1f MB over %" PRIu64
               " items held at the peak: %.0f bytes/item%s\n",
               who, (double)r->rss_peak_kb / 1024.0, (double)r->rss_base_kb / 1024.0,
               r->peak_queued, r->bytes_per_item,
               r->peak_queued < NET_SMALL_QUEUE ? " (queue too short for a stable figure)" : "");
    else
        printf("%s n/a (%s)\n", who,
               r->rss_base_kb < 0 ? "not a process this bench started"
                                  : "no items held at any sample");
    if (r->worker_errors > 0)
        printf("worker errors    %" PRIu64 "\n", r->worker_errors);
    if (r->wire_mismatches > 0)
        printf("wire mismatches  %" PRIu64
               " items delivered with a prefix_tokens other than sent\n",
               r->wire_mismatches);
    fflush(stdout);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void net_json_num(FILE *f, const char *key, double v, bool na_when_negative)
{
    if (na_when_negative && v < 0)
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%.3f", key, v);
}

static void net_json_result(FILE *f, const net_result_t *r)
{
    fputs("{\"system\":", f);
    report_json_str(f, r->system);
    fputs(",\"durability\":", f);
    report_json_str(f, r->durability);
    fputs(",\"policy\":", f);
    report_json_str(f, r->policy);
    fprintf(f, ",\"ran\":%s", r->ran ? "true" : "false");
    if (!r->ran) {
        fputs(",\"error\":", f);
        report_json_str(f, r->error);
        fputs("}", f);
        return;
    }
    fprintf(f,
            ",\"drained\":%s,\"items_stored\":%" PRIu64 ",\"tokens_stored\":%" PRIu64
            ",\"duplicates\":%" PRIu64 ",\"items_failed\":%" PRIu64 ",\"items_served\":%" PRIu64
            ",\"items_served_again\":%" PRIu64 ",\"foreign_items\":%" PRIu64
            ",\"worker_errors\":%" PRIu64 ",\"wire_mismatches\":%" PRIu64,
            r->drained ? "true" : "false", r->accepted, r->accepted_tokens, r->duplicates,
            r->failed, r->served, r->redelivered, r->foreign, r->worker_errors, r->wire_mismatches);
    net_json_num(f, "elapsed_s", r->elapsed_s, false);
    net_json_num(f, "items_per_s", r->items_per_s, false);
    net_json_num(f, "wait_p50_ms", r->wait_p50_ms, true);
    net_json_num(f, "wait_p99_ms", r->wait_p99_ms, true);
    net_json_num(f, "wait_max_ms", r->wait_max_ms, true);
    net_json_num(f, "wait_from_submit_p50_ms", r->sub_p50_ms, true);
    net_json_num(f, "wait_from_submit_p99_ms", r->sub_p99_ms, true);
    net_json_num(f, "padding_waste_pct", r->waste_pct, false);
    net_json_num(f, "shape_hit_rate_pct", r->hit_pct, true);
    fprintf(f,
            ",\"batches\":%" PRIu64 ",\"padded_tokens\":%" PRIu64 ",\"real_tokens\":%" PRIu64
            ",\"hits\":%" PRIu64 ",\"gpu_busy_s\":%.3f,\"gpu_busy_ns\":%" PRIu64
            ",\"items_per_batch\":%.3f,\"peak_held_items\":%" PRIu64,
            r->tally.batches, r->tally.padded_tokens, r->tally.real_tokens, r->tally.hits,
            (double)r->tally.busy_ns / 1e9, r->tally.busy_ns,
            r->tally.batches ? (double)r->tally.items / (double)r->tally.batches : 0.0,
            r->peak_queued);
    if (r->rss_base_kb >= 0)
        fprintf(f, ",\"rss_base_kb\":%ld,\"rss_peak_kb\":%ld", r->rss_base_kb, r->rss_peak_kb);
    net_json_num(f, "bytes_per_held_item", r->bytes_per_item, true);
    if (r->have_stats) {
        const net_stats_t *d = &r->delta;
        fprintf(f,
                ",\"tokens_received\":%" PRIu64 ",\"tokens_routed\":%" PRIu64
                ",\"tokens_completed\":%" PRIu64 ",\"token_difference\":%" PRId64
                ",\"items_received\":%" PRIu64 ",\"items_completed\":%" PRIu64
                ",\"items_returned\":%" PRIu64 ",\"lanes_opened\":%" PRIu64
                ",\"lane_reuses\":%" PRIu64 ",\"shape_switches\":%" PRIu64
                ",\"dead_lettered\":%" PRIu64 ",\"rejected\":%" PRIu64
                ",\"publish_failures\":%" PRIu64 ",\"dropped_messages\":%" PRIu64,
                d->tokens_received, d->tokens_routed, d->tokens_completed, r->token_difference,
                d->items_received, d->items_completed, d->items_returned, d->lanes_opened,
                d->lane_reuses, d->shape_switches, d->dead_lettered, d->rejected,
                d->publish_failures, d->dropped_messages);
        net_json_num(f, "daemon_padding_waste_pct", r->daemon_waste_pct, false);
    }
    fputs("}", f);
}

int net_result_json_write(const char *path, const char *command, const net_opts_t *o,
                          const net_trace_t *t, const char *url, const net_result_t *rs, size_t n,
                          bool ok)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs("{\"command\":", f);
    report_json_str(f, command);
    fputs(",\"trace\":{\"preset\":", f);
    report_json_str(f, t->cfg.preset);
    fprintf(f,
            ",\"seed\":%" PRIu64 ",\"duration_s\":%.3f,\"rate\":%.3f,\"models\":%" PRIu32
            ",\"items\":%zu,\"tokens\":%" PRIu64 "}",
            t->cfg.seed, t->cfg.duration_s, t->cfg.rate, t->cfg.models, t->n_items, t->tokens);
    fputs(",\"config\":{\"url\":", f);
    report_json_str(f, url);
    fprintf(f,
            ",\"bench_started_servers\":%s,\"workers_per_model\":%" PRIu32 ",\"batch\":%" PRIu32
            ",\"time_scale\":%.4f,\"paced\":%s,\"max_batch_size\":%" PRIu32
            ",\"max_batch_tokens\":%" PRIu32 ",\"max_input_tokens\":%" PRIu32
            ",\"batch_fixed_ns\":%" PRIu64 ",\"ns_per_padded_token\":%.3f,\"cache_shapes\":%" PRIu32
            "}",
            o->url == NULL ? "true" : "false", o->workers, o->batch, o->time_scale,
            o->no_pace ? "false" : "true", o->gpu.max_batch_size, o->gpu.max_batch_tokens,
            o->gpu.max_input_tokens, o->gpu.batch_fixed_ns, o->gpu.ns_per_padded_token,
            o->gpu.cache_shapes);
    fputs(",\"runs\":[", f);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            fputs(",", f);
        net_json_result(f, &rs[i]);
    }
    fputs("],\"ratios\":[", f);
    const net_result_t *js = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(rs[i].system, "jetstream") == 0 && rs[i].ran && rs[i].items_per_s > 0)
            js = &rs[i];
    bool first = true;
    for (size_t i = 0; js != NULL && i < n; i++) {
        if (strcmp(rs[i].system, "lanesched") != 0 || !rs[i].ran)
            continue;
        fprintf(f,
                "%s{\"durability\":\"%s\",\"lanesched_items_per_s\":%.3f,"
                "\"jetstream_items_per_s\":%.3f,\"ratio\":%.4f}",
                first ? "" : ",", rs[i].durability, rs[i].items_per_s, js->items_per_s,
                rs[i].items_per_s / js->items_per_s);
        first = false;
    }
    fprintf(f, "],\"ok\":%s}\n", ok ? "true" : "false");
    return fclose(f) == 0 ? 0 : -1;
}

bool net_result_ok(const net_result_t *r)
{
    bool lanes = strcmp(r->system, "lanesched") == 0;
    return r->ran && r->drained && r->failed == 0 && r->wire_mismatches == 0 &&
           (!lanes || (r->have_stats && r->token_difference == 0));
}
