/*
 * throughput_report.c - what `throughput` prints and writes: one paragraph per run, the ratios
 * lanesched / JetStream of the same session with the targets as checks, the client-side
 * verdict of each rerun with twice the clients, and the JSON document.
 *
 * Invariants:
 *  1. Every ratio divides figures of one session (the same machine, items and moment): with
 *     --reps, the medians of runs that alternated between the systems, so a load that comes and
 *     goes on a shared machine lands on both; a phase that did not finish enters no median.
 *  2. A rerun with twice the producers and consumers that raises a figure by more than
 *     TP_CLIENT_GAIN says the figure is limited by the bench's clients, never by the broker.
 *  3. JSON keys are stable; new ones are added, none renamed.
 */
#include "throughput_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Twice the clients may raise a figure by up to this much before the clients count as its limit:
 * run-to-run noise on a shared 2-core machine is within a few percent. */
#define TP_CLIENT_GAIN 1.10

static double tp_per_m(double s, uint64_t items)
{
    return items > 0 ? s * 1e6 / (double)items : 0.0;
}

static double tp_rate(const tp_phase_result_t *p, uint64_t items)
{
    return p->ran && p->elapsed_s > 0 ? (double)items / p->elapsed_s : 0.0;
}

static void tp_phase_print(const char *name, const tp_phase_result_t *p, uint64_t items,
                           bool latency)
{
    if (!p->ran) {
        printf("  %-12s n/a\n", name);
        return;
    }
    printf("  %-12s %10.0f items/s  (%.2f s)", name, tp_rate(p, items), p->elapsed_s);
    if (p->acks_sent_s > 0)
        printf("  acks sent by %.2f s: %.0f items/s counted that way", p->acks_sent_s,
               (double)items / p->acks_sent_s);
    if (latency)
        printf("  submit->ack p50 %.2f ms  p99 %.2f ms  max %.2f ms", p->lat_p50_ms, p->lat_p99_ms,
               p->lat_max_ms);
    printf("\n");
}

/* The fabric's ceiling: one phase, no broker. */
static void tp_fabric_print(const tp_result_t *r, const tp_opts_t *o)
{
    printf("\n%s: %" PRIu32 " producers x %" PRIu32 " Submits in flight x %" PRIu32
           " items of %" PRIu32 " B, %" PRIu64
           " items, answered by a responder that reads nothing (no broker)\n",
           r->label, r->producers, o->window, o->batch, o->payload_bytes, r->items);
    if (!r->ran && r->error[0] != '\0') {
        printf("  FAILED: %s\n", r->error);
        return;
    }
    const tp_phase_result_t *s = &r->phase[TP_SUBMIT];
    tp_phase_print("submit only", s, r->items, true);
    if (s->ran)
        printf("  submit only: CPU s per M items nats-server %.2f, bench clients and responder "
               "%.2f\n",
               tp_per_m(s->server_cpu_s, r->items), tp_per_m(s->client_cpu_s, r->items));
    printf("  items: %" PRIu64 " sent, failed %" PRIu64 ", foreign replies %" PRIu64 "  %s\n",
           r->items, r->failed, r->foreign, r->ok ? "OK" : "FAILED");
    if (r->error[0] != '\0')
        printf("  %s: %s\n", r->ok ? "note" : "error", r->error);
}

void tp_result_print(const tp_result_t *r, const tp_opts_t *o)
{
    if (strcmp(r->system, "fabric") == 0) {
        tp_fabric_print(r, o);
        return;
    }
    bool lanes = strcmp(r->system, "lanesched") == 0;
    printf("\n%s: %" PRIu32 " producers x %" PRIu32 " Submits in flight x %" PRIu32
           " items, %" PRIu32 " consumers (batches of %" PRIu32 ", %s), %" PRIu64
           " items of %" PRIu32 " B per phase\n",
           r->label, r->producers, o->window, o->batch, r->consumers, o->max_batch_size,
           lanes ? "prefetch, async acks" : "pulls in flight, an ack each", r->items,
           o->payload_bytes);
    if (!r->ran && r->phase[TP_SUBMIT].ran == false && r->error[0] != '\0') {
        printf("  FAILED: %s\n", r->error);
        return;
    }
    tp_phase_print("submit only", &r->phase[TP_SUBMIT], r->items, true);
    tp_phase_print("drain", &r->phase[TP_DRAIN], r->items, false);
    tp_phase_print("end to end", &r->phase[TP_E2E], r->items, true);
    const tp_phase_result_t *e = &r->phase[TP_E2E];
    if (e->ran) {
        if (lanes)
            printf("  CPU s per M items (end to end): lanesched %.2f, nats-server %.2f, bench "
                   "clients %.2f\n",
                   tp_per_m(e->daemon_cpu_s, r->items), tp_per_m(e->server_cpu_s, r->items),
                   tp_per_m(e->client_cpu_s, r->items));
        else
            printf("  CPU s per M items (end to end): nats-server %.2f, bench clients %.2f\n",
                   tp_per_m(e->server_cpu_s, r->items), tp_per_m(e->client_cpu_s, r->items));
        double n = (double)r->items;
        if (lanes)
            printf("  context switches per item (end to end): lanesched %.3f (%.3f voluntary), "
                   "nats-server %.3f (%.3f)\n",
                   (double)e->daemon_ctxsw / n, (double)e->daemon_ctxsw_vol / n,
                   (double)e->server_ctxsw / n, (double)e->server_ctxsw_vol / n);
        else
            printf("  context switches per item (end to end): nats-server %.3f (%.3f voluntary)\n",
                   (double)e->server_ctxsw / n, (double)e->server_ctxsw_vol / n);
    }
    const tp_phase_result_t *s = &r->phase[TP_SUBMIT];
    if (s->ran)
        printf("  submit only: CPU s per M items %s %.2f%s%.2f, switches per item %.3f\n",
               lanes ? "lanesched" : "nats-server",
               tp_per_m(lanes ? s->daemon_cpu_s : s->server_cpu_s, r->items),
               lanes ? ", nats-server " : ", bench clients ",
               tp_per_m(lanes ? s->server_cpu_s : s->client_cpu_s, r->items),
               (double)(lanes ? s->daemon_ctxsw : s->server_ctxsw) / (double)r->items);
    if (r->bytes_per_queued_item > 0)
        printf("  memory: %.0f bytes of %s RSS per queued item (%ld -> %ld kB at %" PRIu64
               " queued; payloads included)\n",
               r->bytes_per_queued_item, lanes ? "lanesched" : "nats-server", r->rss_base_kb,
               r->rss_peak_kb, r->items);
    printf("  items: %" PRIu64 " sent, lost %" PRIu64 ", duplicated %" PRIu64 ", failed %" PRIu64
           ", foreign %" PRIu64,
           2 * r->items, r->lost, r->duplicated, r->failed, r->foreign);
    if (lanes)
        printf(r->have_tokens ? ", token difference %" PRId64 : ", token difference n/a",
               r->token_difference);
    printf("  %s\n", r->ok ? "OK" : "FAILED");
    if (r->error[0] != '\0')
        printf("  %s: %s\n", r->ok ? "note" : "error", r->error);
}

/* The main client count of a system's runs (the fewest), 0 when it has none. */
static uint32_t tp_main_clients(const tp_result_t *rs, size_t n, const char *system,
                                const char *durability)
{
    uint32_t best = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = rs[i].producers + rs[i].consumers;
        if (strcmp(rs[i].system, system) == 0 && strcmp(rs[i].durability, durability) == 0 &&
            (best == 0 || c < best))
            best = c;
    }
    return best;
}

static int tp_double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median rate of a phase over the runs of system/durability with this many clients (the
 * runs that finished it), 0 when none did; *runs gets how many counted. */
static double tp_median(const tp_result_t *rs, size_t n, const char *system, const char *durability,
                        uint32_t clients, int phase, size_t *runs)
{
    double v[TP_RESULTS_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const tp_result_t *r = &rs[i];
        if (strcmp(r->system, system) == 0 && strcmp(r->durability, durability) == 0 &&
            r->producers + r->consumers == clients && r->phase[phase].ran)
            v[k++] = tp_rate(&r->phase[phase], r->items);
    }
    *runs = k;
    if (k == 0)
        return 0.0;
    qsort(v, k, sizeof(v[0]), tp_double_cmp);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

static void tp_ratio_print(const char *what, const tp_result_t *rs, size_t n, const char *level,
                           int phase, double target)
{
    size_t ka = 0, kb = 0;
    double x = tp_median(rs, n, "lanesched", level, tp_main_clients(rs, n, "lanesched", level),
                         phase, &ka);
    double y = tp_median(rs, n, "jetstream", "file", tp_main_clients(rs, n, "jetstream", "file"),
                         phase, &kb);
    if (x <= 0 || y <= 0) {
        printf("  %-44s n/a\n", what);
        return;
    }
    printf("  %-44s %6.2fx  (%.0f / %.0f items/s", what, x / y, x, y);
    if (ka > 1 || kb > 1)
        printf(", medians of %zu / %zu runs", ka, kb);
    printf(")");
    if (target > 0)
        printf("  target >= %gx: %s", target, x / y >= target ? "YES" : "NO");
    printf("\n");
}

void tp_summary_print(const tp_result_t *rs, size_t n, const tp_opts_t *o)
{
    printf("\n== lanesched / JetStream, same session and items (store %s, %" PRIu32 " B payloads, "
           "%" PRIu32 "-item Submits)\n",
           o->store, o->payload_bytes, o->batch);
    tp_ratio_print("end to end, process level", rs, n, "process", TP_E2E, 3.0);
    tp_ratio_print("end to end, power level", rs, n, "power", TP_E2E, 1.0);
    tp_ratio_print("submit only, process level", rs, n, "process", TP_SUBMIT, 0);
    tp_ratio_print("submit only, power level", rs, n, "power", TP_SUBMIT, 0);
    tp_ratio_print("drain, process level", rs, n, "process", TP_DRAIN, 0);
    size_t k = 0, kf = 0;
    double r = tp_median(rs, n, "lanesched", "process",
                         tp_main_clients(rs, n, "lanesched", "process"), TP_SUBMIT, &k);
    /* the fabric at its best: the median of whichever client count carried more */
    double fab = 0;
    for (size_t i = 0; i < n; i++) {
        size_t kk = 0;
        double f = strcmp(rs[i].system, "fabric") == 0
                       ? tp_median(rs, n, "fabric", "none", rs[i].producers, TP_SUBMIT, &kk)
                       : 0;
        if (f > fab) {
            fab = f;
            kf = kk;
        }
    }
    if (fab > 0) {
        printf("  %-44s %.0f items/s (the same clients, a responder that reads nothing",
               "fabric "
               "ceiling, submit only",
               fab);
        if (kf > 1)
            printf(", median of %zu runs", kf);
        printf(")\n");
        if (r > 0)
            printf("  %-44s %.0f%% of the fabric's ceiling\n", "lanesched submit only, process",
                   100.0 * r / fab);
    }
    if (k > 0)
        printf("  %-44s %.0f items/s  target >= 1,000,000 with 64-item Submits: %s\n",
               "submit only, process level", r,
               o->batch != 64 ? "n/a (not 64 items)"
               : r >= 1e6     ? "YES"
               : fab > 0 && fab < 1e6
                   ? "NO, and out of reach on this machine: the fabric alone carries less"
                   : "NO");
    /* invariant 2: a system's runs with more clients than its main ones */
    static const char *const systems[4][2] = {{"lanesched", "process"},
                                              {"lanesched", "power"},
                                              {"jetstream", "file"},
                                              {"fabric", "none"}};
    static const char *const names[TP_PHASES] = {"submit only", "drain", "end to end"};
    bool any = false;
    for (int sy = 0; sy < 4; sy++) {
        uint32_t base = tp_main_clients(rs, n, systems[sy][0], systems[sy][1]);
        for (size_t i = 0; base != 0 && i < n; i++) {
            const tp_result_t *x = &rs[i];
            uint32_t c = x->producers + x->consumers;
            bool first = true; /* each client count once */
            for (size_t j = 0; j < i; j++)
                first &= !(strcmp(rs[j].system, x->system) == 0 &&
                           strcmp(rs[j].durability, x->durability) == 0 &&
                           rs[j].producers + rs[j].consumers == c);
            if (strcmp(x->system, systems[sy][0]) != 0 ||
                strcmp(x->durability, systems[sy][1]) != 0 || c == base || !first)
                continue;
            if (!any)
                printf("\n== the client side (invariant 2: more clients must not raise a "
                       "figure)\n");
            any = true;
            for (int ph = 0; ph < TP_PHASES; ph++) {
                size_t ka = 0, kb = 0;
                double a = tp_median(rs, n, x->system, x->durability, base, ph, &ka);
                double b = tp_median(rs, n, x->system, x->durability, c, ph, &kb);
                if (a <= 0 || b <= 0)
                    continue;
                printf("  %s %s %s: %u clients %.0f items/s, %u clients %.0f (%.2fx): %s\n",
                       x->system, x->durability, names[ph], base, a, c, b, b / a,
                       b > a * TP_CLIENT_GAIN
                           ? "CLIENT-LIMITED: the bench's clients limit this figure"
                           : "the clients are not the limit");
            }
        }
    }
}

static void tp_json_phase(FILE *f, const char *name, const tp_phase_result_t *p, uint64_t items,
                          bool last)
{
    fprintf(
        f,
        "      \"%s\": {\"ran\": %s, \"elapsed_s\": %.6f, \"items_per_s\": %.1f, "
        "\"submit_ack_p50_ms\": %.3f, \"submit_ack_p99_ms\": %.3f, \"submit_ack_max_ms\": %.3f, "
        "\"daemon_cpu_s_per_m_items\": %.4f, \"server_cpu_s_per_m_items\": %.4f, "
        "\"client_cpu_s_per_m_items\": %.4f, \"daemon_ctxsw_per_item\": %.5f, "
        "\"server_ctxsw_per_item\": %.5f, \"daemon_voluntary_ctxsw_per_item\": %.5f, "
        "\"server_voluntary_ctxsw_per_item\": %.5f, \"acks_sent_s\": %.6f}%s\n",
        name, p->ran ? "true" : "false", p->elapsed_s, tp_rate(p, items), p->lat_p50_ms,
        p->lat_p99_ms, p->lat_max_ms, tp_per_m(p->daemon_cpu_s, items),
        tp_per_m(p->server_cpu_s, items), tp_per_m(p->client_cpu_s, items),
        items ? (double)p->daemon_ctxsw / (double)items : 0.0,
        items ? (double)p->server_ctxsw / (double)items : 0.0,
        items ? (double)p->daemon_ctxsw_vol / (double)items : 0.0,
        items ? (double)p->server_ctxsw_vol / (double)items : 0.0, p->acks_sent_s, last ? "" : ",");
}

int tp_json_write(const char *path, const char *command, const tp_opts_t *o, const tp_result_t *rs,
                  size_t n, bool ok)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "{\n  \"mode\": \"throughput\",\n  \"command\": ");
    report_json_str(f, command);
    fprintf(f,
            ",\n  \"config\": {\"items_per_phase\": %" PRIu64 ", \"batch\": %" PRIu32
            ", \"payload_bytes\": %" PRIu32 ", \"tokens\": %" PRIu32 ", \"models\": %" PRIu32
            ", \"window\": %" PRIu32 ", \"prefetch\": %" PRIu32 ", \"max_batch_size\": %" PRIu32
            ", \"ack_window\": %" PRIu32 ", \"store\": ",
            o->items, o->batch, o->payload_bytes, o->tokens, o->models, o->window, o->prefetch,
            o->max_batch_size, o->ack_window);
    report_json_str(f, o->store);
    fprintf(f, "},\n  \"ok\": %s,\n  \"results\": [\n", ok ? "true" : "false");
    for (size_t i = 0; i < n; i++) {
        const tp_result_t *r = &rs[i];
        fprintf(f,
                "    {\"system\": \"%s\", \"durability\": \"%s\", \"store\": \"%s\", "
                "\"producers\": %" PRIu32 ", \"consumers\": %" PRIu32 ", \"ran\": %s, "
                "\"ok\": %s, \"error\": ",
                r->system, r->durability, r->store, r->producers, r->consumers,
                r->ran ? "true" : "false", r->ok ? "true" : "false");
        report_json_str(f, r->error);
        fprintf(f,
                ",\n     \"items_per_phase\": %" PRIu64 ", \"lost\": %" PRIu64
                ", \"duplicated\": %" PRIu64 ", \"failed\": %" PRIu64 ", \"foreign\": %" PRIu64
                ", \"token_difference\": ",
                r->items, r->lost, r->duplicated, r->failed, r->foreign);
        if (r->have_tokens)
            fprintf(f, "%" PRId64, r->token_difference);
        else
            fprintf(f, "null");
        fprintf(f,
                ", \"rss_base_kb\": %ld, \"rss_peak_kb\": %ld, \"bytes_per_queued_item\": %.1f,"
                "\n     \"phases\": {\n",
                r->rss_base_kb, r->rss_peak_kb, r->bytes_per_queued_item);
        tp_json_phase(f, "submit_only", &r->phase[TP_SUBMIT], r->items, false);
        tp_json_phase(f, "drain", &r->phase[TP_DRAIN], r->items, false);
        tp_json_phase(f, "end_to_end", &r->phase[TP_E2E], r->items, true);
        fprintf(f, "     }}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}
