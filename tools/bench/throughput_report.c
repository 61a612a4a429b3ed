/*
 * throughput_report.c - what `throughput` prints and writes: one paragraph per run, the JetStream
 * grid and its winner, the ratios lanesched / JetStream-at-its-best of the same session with the
 * throughput targets as checks (per shapes-per-model point when several ran), the client-side
 * verdict of each rerun with twice the clients, and the JSON document.
 *
 * Per system and phase: items/s, submit-to-ack latency, CPU seconds per million items, context
 * switches, read and write system calls per item (/proc/PID/io syscr + syscw) of the daemon and
 * of nats-server, and files created per second in the system's data directory (lanesched's
 * --data-dir, nats-server's JetStream storage). Per run: memory per queued item after the submit
 * phase, over the items the daemon says it holds.
 *
 * Invariants:
 *  1. Every ratio divides figures of one session (the same machine, items and moment): with
 *     --reps, the medians of runs that alternated between the systems, so a load that comes and
 *     goes on a shared machine lands on both; a phase that did not finish enters no median.
 *  2. A rerun with twice the producers and consumers that raises a figure by more than
 *     TP_CLIENT_GAIN says the figure is limited by the bench's clients, never by the broker.
 *  3. JSON keys are stable; new ones are added, none renamed.
 *  4. JetStream's end-to-end figure in a ratio is the best of its grid: the higher of the
 *     winner's main-run median and the best grid cell (throughput_grid.c invariant 2).
 *  5. The uniform workload is the best case: every line that gives its figures says so.
 */
#include "throughput_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Twice the clients may raise a figure by up to this much before the clients count as its limit:
 * run-to-run noise on a shared 2-core machine is within a few percent. */
#define TP_CLIENT_GAIN 1.10

/* The throughput targets on the realistic workload, against the best JetStream of the same run
 * (README, docs/throughput.md). */
#define TP_TARGET_E2E_PROCESS  3.0  /* x JetStream, end to end, process level */
#define TP_TARGET_E2E_POWER    1.5  /* x JetStream, end to end, power level */
#define TP_TARGET_FABRIC_SHARE 0.60 /* submit-only over the fabric's ceiling */
#define TP_TARGET_SYSCALLS     0.1  /* daemon read + write system calls per item, process */
#define TP_TARGET_CPU_S_PER_M  2.0  /* daemon CPU seconds per million items end to end */
#define TP_TARGET_FILES_PER_S  5.0  /* "at most a few per second at 64 shapes" */
#define TP_TARGET_FALL                                                                           \
    0.20                              /* the ratio may fall this much from the first to the last \
                                         shapes point (8 to 256) */
#define TP_TARGET_BYTES_PER_ITEM 64.0 /* at TP_TARGET_QUEUED queued */
#define TP_TARGET_QUEUED         1000000 /* items queued for the memory target */

static double tp_per_m(double s, uint64_t items)
{
    return items > 0 ? s * 1e6 / (double)items : 0.0;
}

static double tp_rate(const tp_phase_result_t *p, uint64_t items)
{
    return p->ran && p->elapsed_s > 0 ? (double)items / p->elapsed_s : 0.0;
}

static double tp_per_item(uint64_t v, uint64_t items)
{
    return items > 0 ? (double)v / (double)items : 0.0;
}

/* Files created per second in a phase, or -1 when they were not counted. */
static double tp_files_rate(const tp_phase_result_t *p)
{
    return p->ran && p->have_files && p->elapsed_s > 0 ? (double)p->files_created / p->elapsed_s
                                                       : -1.0;
}

static const char *tp_role_name(tp_role_t r)
{
    static const char *const names[] = {"main", "clients", "grid", "probe"};
    return (unsigned)r < 4 ? names[r] : "?";
}

/* The daemon's own figures count only from a phase in which its process was seen working: a
 * phase that carried items while the watched process spent no CPU time watched something else
 * (a --lanesched wrapper that forks the daemon instead of exec'ing it), and a 0 would pass the
 * targets. */
static bool tp_daemon_seen(const tp_phase_result_t *ph)
{
    return ph->ran && ph->daemon_cpu_s > 0;
}

/* The daemon's figure of a phase, or n/a where its process was not seen (tp_daemon_seen). */
static void tp_daemon_print(const tp_phase_result_t *ph, const char *fmt, double figure)
{
    if (tp_daemon_seen(ph))
        printf(fmt, figure);
    else
        printf("n/a");
}

static void tp_phase_print(const char *name, const tp_result_t *r, const tp_phase_result_t *p,
                           bool latency)
{
    bool lanes = strcmp(r->system, "lanesched") == 0;
    uint64_t items = r->items;
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
    printf("\n  %-12s read+write syscalls per item:", "");
    if (lanes) {
        printf(" lanesched ");
        tp_daemon_print(p, "%.3f", tp_per_item(p->daemon_syscalls, items));
        printf(",");
    }
    printf(" nats-server %.3f; files created in the %s: ", tp_per_item(p->server_syscalls, items),
           lanes ? "data directory" : "JetStream store");
    double f = tp_files_rate(p);
    if (f < 0)
        printf("n/a");
    else
        printf("%.1f/s (%" PRIu64 ")", f, p->files_created);
    if (lanes && p->batches > 0)
        printf("; %.1f items per batch", (double)items / (double)p->batches);
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
    if (s->ran)
        printf("  %-12s %10.0f items/s  (%.2f s)  submit->ack p50 %.2f ms  p99 %.2f ms  max "
               "%.2f ms\n",
               "submit only", tp_rate(s, r->items), s->elapsed_s, s->lat_p50_ms, s->lat_p99_ms,
               s->lat_max_ms);
    else
        printf("  %-12s n/a\n", "submit only");
    if (s->ran)
        printf("  submit only: CPU s per M items nats-server %.2f, bench clients and responder "
               "%.2f\n",
               tp_per_m(s->server_cpu_s, r->items), tp_per_m(s->client_cpu_s, r->items));
    printf("  items: %" PRIu64 " sent, failed %" PRIu64 ", foreign replies %" PRIu64 "  %s\n",
           r->items, r->failed, r->foreign, r->ok ? "OK" : "FAILED");
    if (r->error[0] != '\0')
        printf("  %s: %s\n", r->ok ? "note" : "error", r->error);
}

static void tp_memory_print(const tp_result_t *r, bool lanes)
{
    if (r->bytes_per_queued_item <= 0 && r->anon_bytes_per_queued_item <= 0)
        return;
    if (lanes && !tp_daemon_seen(&r->phase[TP_SUBMIT])) {
        printf("  memory: n/a (the daemon's process spent no CPU time: --lanesched forked it?)\n");
        return;
    }
    printf("  memory: %.0f bytes of %s RSS per queued item (%ld -> %ld kB peak at %" PRIu64
           " queued; payloads included), anonymous memory %.0f bytes per item (%ld -> %ld kB)\n",
           r->bytes_per_queued_item, lanes ? "lanesched" : "nats-server", r->rss_base_kb,
           r->rss_peak_kb, r->queued, r->anon_bytes_per_queued_item, r->anon_base_kb,
           r->anon_end_kb);
}

void tp_result_print(const tp_result_t *r, const tp_opts_t *o)
{
    if (strcmp(r->system, "fabric") == 0) {
        tp_fabric_print(r, o);
        return;
    }
    bool lanes = strcmp(r->system, "lanesched") == 0;
    if (r->role == TP_ROLE_PROBE) {
        printf("\n%s: %" PRIu64 " items submitted and left queued\n", r->label, r->items);
        if (!r->ran && r->error[0] != '\0') {
            printf("  FAILED: %s\n", r->error);
            return;
        }
        tp_phase_print("submit only", r, &r->phase[TP_SUBMIT], true);
        tp_memory_print(r, true);
        printf("  items: %" PRIu64 " sent, failed %" PRIu64 ", %" PRIu64
               " held by the daemon  %s\n",
               r->items, r->failed, r->queued, r->ok ? "OK" : "FAILED");
        if (r->error[0] != '\0')
            printf("  %s: %s\n", r->ok ? "note" : "error", r->error);
        return;
    }
    if (lanes)
        printf("\n%s: %" PRIu32 " producers x %" PRIu32 " Submits in flight x %" PRIu32
               " items, %" PRIu32 " consumers (batches of %" PRIu32
               ", prefetch, async acks), %" PRIu64 " items of %" PRIu32 " B per phase\n",
               r->label, r->producers, o->window, o->batch, r->consumers, o->max_batch_size,
               r->items, o->payload_bytes);
    else
        printf("\n%s: %" PRIu32 " producers x %" PRIu32 " publishes in flight, %" PRIu32
               " consumers (pull requests of %" PRIu32 ", %" PRIu32
               " messages requested, an ack each), %" PRIu64 " items of %" PRIu32 " B per phase\n",
               r->label, r->producers, r->js.pending, r->consumers, r->js.fetch, r->js.requested,
               r->items, o->payload_bytes);
    if (!r->ran && r->phase[TP_SUBMIT].ran == false && r->error[0] != '\0') {
        printf("  FAILED: %s\n", r->error);
        return;
    }
    tp_phase_print("submit only", r, &r->phase[TP_SUBMIT], true);
    tp_phase_print("drain", r, &r->phase[TP_DRAIN], false);
    tp_phase_print("end to end", r, &r->phase[TP_E2E], true);
    const tp_phase_result_t *e = &r->phase[TP_E2E];
    if (e->ran) {
        if (lanes && !tp_daemon_seen(e))
            printf("  CPU s per M items (end to end): lanesched n/a (its process spent no CPU "
                   "time: --lanesched forked it?), nats-server %.2f, bench clients %.2f\n",
                   tp_per_m(e->server_cpu_s, r->items), tp_per_m(e->client_cpu_s, r->items));
        else if (lanes)
            printf("  CPU s per M items (end to end): lanesched %.2f, nats-server %.2f, bench "
                   "clients %.2f\n",
                   tp_per_m(e->daemon_cpu_s, r->items), tp_per_m(e->server_cpu_s, r->items),
                   tp_per_m(e->client_cpu_s, r->items));
        else
            printf("  CPU s per M items (end to end): nats-server %.2f, bench clients %.2f\n",
                   tp_per_m(e->server_cpu_s, r->items), tp_per_m(e->client_cpu_s, r->items));
        double n = (double)r->items;
        if (lanes) {
            printf("  context switches per item (end to end): lanesched ");
            tp_daemon_print(e, "%.3f", (double)e->daemon_ctxsw / n);
            printf(" (");
            tp_daemon_print(e, "%.3f", (double)e->daemon_ctxsw_vol / n);
            printf(" voluntary), nats-server %.3f (%.3f)\n", (double)e->server_ctxsw / n,
                   (double)e->server_ctxsw_vol / n);
        } else
            printf("  context switches per item (end to end): nats-server %.3f (%.3f voluntary)\n",
                   (double)e->server_ctxsw / n, (double)e->server_ctxsw_vol / n);
    }
    const tp_phase_result_t *s = &r->phase[TP_SUBMIT];
    if (s->ran && lanes) {
        printf("  submit only: CPU s per M items lanesched ");
        tp_daemon_print(s, "%.2f", tp_per_m(s->daemon_cpu_s, r->items));
        printf(", nats-server %.2f, switches per item ", tp_per_m(s->server_cpu_s, r->items));
        tp_daemon_print(s, "%.3f", (double)s->daemon_ctxsw / (double)r->items);
        printf("\n");
    } else if (s->ran) {
        printf("  submit only: CPU s per M items nats-server %.2f, bench clients %.2f, switches "
               "per item %.3f\n",
               tp_per_m(s->server_cpu_s, r->items), tp_per_m(s->client_cpu_s, r->items),
               (double)s->server_ctxsw / (double)r->items);
    }
    tp_memory_print(r, lanes);
    printf("  items: %" PRIu64 " sent, lost %" PRIu64 ", duplicated %" PRIu64 ", failed %" PRIu64
           ", foreign %" PRIu64,
           2 * r->items, r->lost, r->duplicated, r->failed, r->foreign);
    if (lanes) {
        printf(", batches against the contract %" PRIu64, r->contract);
        printf(r->have_tokens ? ", token difference %" PRId64 : ", token difference n/a",
               r->token_difference);
    }
    printf("  %s\n", r->ok ? "OK" : "FAILED");
    if (r->error[0] != '\0')
        printf("  %s: %s\n", r->ok ? "note" : "error", r->error);
}

void tp_grid_print(const tp_result_t *cells, size_t n, const tp_js_cfg_t *winner)
{
    char what[96];
    tp_js_cfg_format(winner, what, sizeof(what));
    if (n == 0) {
        printf("\nJetStream driver: %s (--js-grid off: the flags' settings)\n", what);
        return;
    }
    double best = 0;
    for (size_t i = 0; i < n; i++) {
        const tp_phase_result_t *e = &cells[i].phase[TP_E2E];
        if (cells[i].ok && e->ran && e->elapsed_s > 0 &&
            (double)cells[i].items / e->elapsed_s > best)
            best = (double)cells[i].items / e->elapsed_s;
    }
    printf("JetStream grid winner: %s, %.0f items/s end to end (%zu cells)\n", what, best, n);
}

/* ---- medians ------------------------------------------------------------------------------- */

/* A figure of one result's phase; < 0 when it has none. */
typedef double (*tp_metric_fn)(const tp_result_t *r, int phase);

static double tp_m_rate(const tp_result_t *r, int phase)
{
    return r->phase[phase].ran ? tp_rate(&r->phase[phase], r->items) : -1.0;
}

static double tp_m_daemon_sys(const tp_result_t *r, int phase)
{
    return tp_daemon_seen(&r->phase[phase]) ? tp_per_item(r->phase[phase].daemon_syscalls, r->items)
                                            : -1.0;
}

static double tp_m_server_sys(const tp_result_t *r, int phase)
{
    return r->phase[phase].ran ? tp_per_item(r->phase[phase].server_syscalls, r->items) : -1.0;
}

static double tp_m_daemon_cpu(const tp_result_t *r, int phase)
{
    return tp_daemon_seen(&r->phase[phase]) ? tp_per_m(r->phase[phase].daemon_cpu_s, r->items)
                                            : -1.0;
}

static double tp_m_server_cpu(const tp_result_t *r, int phase)
{
    return r->phase[phase].ran ? tp_per_m(r->phase[phase].server_cpu_s, r->items) : -1.0;
}

static double tp_m_files(const tp_result_t *r, int phase)
{
    return tp_files_rate(&r->phase[phase]);
}

static double tp_m_memory(const tp_result_t *r, int phase)
{
    if (strcmp(r->system, "lanesched") == 0 && !tp_daemon_seen(&r->phase[phase]))
        return -1.0; /* a wrapper's RSS, not the daemon's */
    return r->bytes_per_queued_item > 0 ? r->bytes_per_queued_item : -1.0;
}

static int tp_double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of a figure over the runs of system/durability in role with this many shapes per
 * model (0: any), -1 when none has it; *runs gets how many counted. */
static double tp_median(const tp_result_t *rs, size_t n, const char *system, const char *durability,
                        tp_role_t role, uint32_t shapes, int phase, tp_metric_fn metric,
                        size_t *runs)
{
    double v[TP_RESULTS_MAX];
    size_t k = 0;
    for (size_t i = 0; i < n && k < TP_RESULTS_MAX; i++) {
        const tp_result_t *r = &rs[i];
        if (strcmp(r->system, system) != 0 || strcmp(r->durability, durability) != 0 ||
            r->role != role || (shapes != 0 && r->shapes != shapes))
            continue;
        double x = metric(r, phase);
        if (x >= 0)
            v[k++] = x;
    }
    if (runs != NULL)
        *runs = k;
    if (k == 0)
        return -1.0;
    qsort(v, k, sizeof(v[0]), tp_double_cmp);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* JetStream's figure for a phase (invariant 4); *from says where it came from. */
static double tp_js_best(const tp_result_t *rs, size_t n, const tp_result_t *cells, size_t n_cells,
                         int phase, const char **from, size_t *runs)
{
    double main = tp_median(rs, n, "jetstream", "file", TP_ROLE_MAIN, 0, phase, tp_m_rate, runs);
    double cell = -1.0;
    for (size_t i = 0; phase == TP_E2E && i < n_cells; i++) {
        double x = cells[i].ok ? tp_m_rate(&cells[i], TP_E2E) : -1.0;
        if (x > cell)
            cell = x;
    }
    *from = cell > main ? "the grid's best cell" : "the winner's main runs";
    return cell > main ? cell : main;
}

/* The fabric at its best: the higher median of its main runs and its reruns with more clients. */
static double tp_fabric_best(const tp_result_t *rs, size_t n)
{
    double a = tp_median(rs, n, "fabric", "none", TP_ROLE_MAIN, 0, TP_SUBMIT, tp_m_rate, NULL);
    double b = tp_median(rs, n, "fabric", "none", TP_ROLE_CLIENTS, 0, TP_SUBMIT, tp_m_rate, NULL);
    return a > b ? a : b;
}

/* ---- the summary --------------------------------------------------------------------------- */

/* The figures of one shapes point that the summary and the JSON give. -1: n/a. */
typedef struct {
    uint32_t shapes;
    double e2e[2], submit[2], drain[2]; /* lanesched medians: process, power */
    double ratio_e2e[2], ratio_submit[2], ratio_drain[2];
    double fabric_share;                              /* process submit-only / the fabric's best */
    double syscalls[2], server_syscalls[2];           /* per item, end to end */
    double submit_syscalls[2];                        /* per item, submit only */
    double cpu[2];                                    /* daemon CPU s per M items, end to end */
    double files[2], files_submit[2], files_drain[2]; /* per s */
    double memory[2];                                 /* RSS bytes per queued item */
} tp_point_t;

typedef struct {
    double js[TP_PHASES];
    const char *js_from;
    size_t js_runs;
    double fabric;
    tp_point_t points[TP_POINTS_MAX];
    uint32_t n_points;
} tp_summary_t;

static double tp_ratio(double a, double b)
{
    return a > 0 && b > 0 ? a / b : -1.0;
}

static void tp_summary_compute(const tp_result_t *rs, size_t n, const tp_result_t *cells,
                               size_t n_cells, const tp_opts_t *o, tp_summary_t *s)
{
    static const char *const levels[2] = {"process", "power"};
    memset(s, 0, sizeof(*s));
    const char *from = "";
    for (int ph = 0; ph < TP_PHASES; ph++) {
        size_t runs = 0;
        s->js[ph] = tp_js_best(rs, n, cells, n_cells, ph, &from, &runs);
        if (ph == TP_E2E) {
            s->js_from = from;
            s->js_runs = runs;
        }
    }
    s->fabric = tp_fabric_best(rs, n);
    s->n_points = o->n_shapes;
    for (uint32_t k = 0; k < o->n_shapes; k++) {
        tp_point_t *p = &s->points[k];
        uint32_t sh = o->shapes[k];
        p->shapes = sh;
        for (int l = 0; l < 2; l++) {
            const char *lv = levels[l];
#define TP_MED(phase, fn) tp_median(rs, n, "lanesched", lv, TP_ROLE_MAIN, sh, phase, fn, NULL)
            p->e2e[l] = TP_MED(TP_E2E, tp_m_rate);
            p->submit[l] = TP_MED(TP_SUBMIT, tp_m_rate);
            p->drain[l] = TP_MED(TP_DRAIN, tp_m_rate);
            p->syscalls[l] = TP_MED(TP_E2E, tp_m_daemon_sys);
            p->server_syscalls[l] = TP_MED(TP_E2E, tp_m_server_sys);
            p->submit_syscalls[l] = TP_MED(TP_SUBMIT, tp_m_daemon_sys);
            p->cpu[l] = TP_MED(TP_E2E, tp_m_daemon_cpu);
            p->files[l] = TP_MED(TP_E2E, tp_m_files);
            p->files_submit[l] = TP_MED(TP_SUBMIT, tp_m_files);
            p->files_drain[l] = TP_MED(TP_DRAIN, tp_m_files);
            p->memory[l] = TP_MED(TP_SUBMIT, tp_m_memory);
#undef TP_MED
            p->ratio_e2e[l] = tp_ratio(p->e2e[l], s->js[TP_E2E]);
            p->ratio_submit[l] = tp_ratio(p->submit[l], s->js[TP_SUBMIT]);
            p->ratio_drain[l] = tp_ratio(p->drain[l], s->js[TP_DRAIN]);
        }
        p->fabric_share = tp_ratio(p->submit[0], s->fabric);
    }
}

/* Every summary line of the uniform workload ends with its tag (invariant 5). */
static void tp_check_print(const char *what, double v, const char *unit, double target,
                           bool at_most, const char *target_text, const char *tag)
{
    if (v < 0) {
        printf("  %-52s n/a%s\n", what, tag);
        return;
    }
    bool yes = at_most ? v <= target : v >= target;
    printf("  %-52s %.3g%s  target %s: %s%s\n", what, v, unit, target_text, yes ? "YES" : "NO",
           tag);
}

static void tp_ratio_line(const char *what, double x, double y, double target, const char *tt,
                          const char *tag)
{
    if (x <= 0 || y <= 0) {
        printf("  %-52s n/a%s\n", what, tag);
        return;
    }
    printf("  %-52s %6.2fx  (%.0f / %.0f items/s)", what, x / y, x, y);
    if (target > 0)
        printf("  target %s: %s", tt, x / y >= target ? "YES" : "NO");
    printf("%s\n", tag);
}

static void tp_point_print(const tp_point_t *p, const tp_summary_t *s, const tp_opts_t *o,
                           bool sweep)
{
    const char *tag = o->uniform ? "  [uniform: best case]" : "";
    if (sweep)
        printf("  -- %u shapes per model\n", p->shapes);
    tp_ratio_line("end to end, process level", p->e2e[0], s->js[TP_E2E], TP_TARGET_E2E_PROCESS,
                  ">= 3x", tag);
    tp_ratio_line("end to end, power level", p->e2e[1], s->js[TP_E2E], TP_TARGET_E2E_POWER,
                  ">= 1.5x", tag);
    tp_ratio_line("submit only, process level", p->submit[0], s->js[TP_SUBMIT], 0, "", tag);
    tp_ratio_line("submit only, power level", p->submit[1], s->js[TP_SUBMIT], 0, "", tag);
    tp_ratio_line("drain, process level", p->drain[0], s->js[TP_DRAIN], 0, "", tag);
    if (p->fabric_share >= 0)
        printf("  %-52s %.0f%% of %.0f items/s  target >= 60%%: %s%s\n",
               "submit only, process: share of the fabric's ceiling", 100.0 * p->fabric_share,
               s->fabric, p->fabric_share >= TP_TARGET_FABRIC_SHARE ? "YES" : "NO", tag);
    else
        printf("  %-52s n/a%s\n", "submit only, process: share of the fabric's ceiling", tag);
    tp_check_print("lanesched read+write syscalls per item, e2e, process", p->syscalls[0], "",
                   TP_TARGET_SYSCALLS, true, "<= 0.1", tag);
    if (p->syscalls[1] >= 0)
        printf("  %-52s %.3g (submit only: process %.3g, power %.3g)%s\n",
               "lanesched read+write syscalls per item, e2e, power", p->syscalls[1],
               p->submit_syscalls[0], p->submit_syscalls[1], tag);
    tp_check_print("lanesched CPU s per M items, end to end, process", p->cpu[0], "",
                   TP_TARGET_CPU_S_PER_M, true, "<= 2", tag);
    if (p->cpu[1] >= 0)
        printf("  %-52s %.3g%s\n", "lanesched CPU s per M items, end to end, power", p->cpu[1],
               tag);
    tp_check_print("files created per s in the data dir, e2e, process", p->files[0], "/s",
                   TP_TARGET_FILES_PER_S, true, "<= 5/s (a few)", tag);
    if (p->files[1] >= 0 || p->files_submit[0] >= 0) {
        printf("  %-52s", "files created per s, other phases");
        static const char *const names[3] = {"power e2e", "process submit only", "drain"};
        double v[3] = {p->files[1], p->files_submit[0], p->files_drain[0]};
        for (int i = 0; i < 3; i++)
            if (v[i] >= 0)
                printf(" %s %.3g/s%s", names[i], v[i], i < 2 ? ";" : "");
        printf("%s\n", tag);
    }
    if (p->memory[0] > 0)
        printf("  %-52s %.0f bytes (RSS, about %" PRIu64
               " queued: --queue-probe %d for the target)%s\n",
               "lanesched memory per queued item, process", p->memory[0], o->items,
               TP_TARGET_QUEUED, tag);
}

void tp_summary_print(const tp_result_t *rs, size_t n, const tp_result_t *cells, size_t n_cells,
                      const tp_opts_t *o)
{
    tp_summary_t s;
    tp_summary_compute(rs, n, cells, n_cells, o, &s);
    char lengths[64];
    tp_lengths_format(&o->lengths, lengths, sizeof(lengths));
    if (o->uniform)
        printf("\n== lanesched / JetStream at its best, same session and items: uniform workload, "
               "the BEST CASE (one shape per model, one length: one lane per model; the targets "
               "are the realistic workload's) - %u model(s), %s, %" PRIu32 " B payloads, %" PRIu32
               "-item Submits, store %s\n",
               o->models, lengths, o->payload_bytes, o->batch, o->store);
    else
        printf("\n== lanesched / JetStream at its best, same session and items: realistic "
               "workload, %u models, Zipf %g, lengths %s, caches of %u-%u shapes, %" PRIu32
               " B payloads, %" PRIu32 "-item Submits, store %s\n",
               o->models, o->zipf_s, lengths, o->cache_lo, o->cache_hi, o->payload_bytes, o->batch,
               o->store);
    if (o->reps > 1)
        printf("  every figure the median of %u runs per system, the systems alternating\n",
               o->reps);
    if (s.js[TP_E2E] > 0)
        printf("  JetStream end to end: %.0f items/s, from %s%s\n", s.js[TP_E2E], s.js_from,
               n_cells > 0 ? " (the higher of the two)" : "");
    for (uint32_t k = 0; k < s.n_points; k++)
        tp_point_print(&s.points[k], &s, o, s.n_points > 1);
    if (s.n_points > 1) {
        printf("\n  shapes/model  e2e process (x JS)   e2e power (x JS)   submit %% fabric  "
               "syscalls/item  CPU s/M  files/s\n");
        for (uint32_t k = 0; k < s.n_points; k++) {
            const tp_point_t *p = &s.points[k];
            printf("  %12u  %9.0f (%5.2fx)   %9.0f (%5.2fx)   %14.0f%%  %13.3f  %7.2f  %7.1f\n",
                   p->shapes, p->e2e[0], p->ratio_e2e[0], p->e2e[1], p->ratio_e2e[1],
                   100.0 * p->fabric_share, p->syscalls[0], p->cpu[0], p->files[0]);
        }
        const tp_point_t *a = &s.points[0], *b = &s.points[s.n_points - 1];
        for (int l = 0; l < 2; l++) {
            if (a->ratio_e2e[l] <= 0 || b->ratio_e2e[l] <= 0)
                continue;
            double fall = 1.0 - b->ratio_e2e[l] / a->ratio_e2e[l];
            printf("  end to end %s level, %u -> %u shapes: %.2fx -> %.2fx, %s %.0f%%  target: "
                   "falls at most 20%%: %s\n",
                   l == 0 ? "process" : "power", a->shapes, b->shapes, a->ratio_e2e[l],
                   b->ratio_e2e[l], fall >= 0 ? "falls" : "rises", 100.0 * fabs(fall),
                   fall <= TP_TARGET_FALL ? "YES" : "NO");
        }
    }
    for (size_t i = 0; i < n; i++) {
        const tp_result_t *r = &rs[i];
        if (r->role != TP_ROLE_PROBE || !r->ran)
            continue;
        char what[64];
        snprintf(what, sizeof(what), "memory per queued item at %" PRIu64 " queued", r->queued);
        double bytes = tp_m_memory(r, TP_SUBMIT); /* -1: n/a */
        if (r->queued >= TP_TARGET_QUEUED)
            tp_check_print(what, bytes, " B", TP_TARGET_BYTES_PER_ITEM, true, "<= 64 B",
                           o->uniform ? "  [uniform: best case]" : "");
        else if (bytes < 0)
            printf("  %-52s n/a\n", what);
        else
            printf("  %-52s %.0f B (the target is at %d queued)\n", what, bytes, TP_TARGET_QUEUED);
        if (bytes >= 0)
            printf("  %-52s %.0f B\n", "  of it anonymous memory (not file pages)",
                   r->anon_bytes_per_queued_item);
    }
    /* invariant 2: a system's reruns with twice the clients */
    static const char *const systems[4][2] = {{"lanesched", "process"},
                                              {"lanesched", "power"},
                                              {"jetstream", "file"},
                                              {"fabric", "none"}};
    static const char *const names[TP_PHASES] = {"submit only", "drain", "end to end"};
    bool any = false;
    for (int sy = 0; sy < 4; sy++) {
        uint32_t sh = strcmp(systems[sy][0], "lanesched") == 0 ? o->shapes[0] : 0;
        for (int ph = 0; ph < TP_PHASES; ph++) {
            size_t ka = 0, kb = 0;
            double a = tp_median(rs, n, systems[sy][0], systems[sy][1], TP_ROLE_MAIN, sh, ph,
                                 tp_m_rate, &ka);
            double b = tp_median(rs, n, systems[sy][0], systems[sy][1], TP_ROLE_CLIENTS, sh, ph,
                                 tp_m_rate, &kb);
            if (a <= 0 || b <= 0)
                continue;
            if (!any)
                printf("\n== the client side (invariant 2: twice the clients must not raise a "
                       "figure)\n");
            any = true;
            printf("  %s %s %s: %.0f items/s, twice the clients %.0f (%.2fx): %s%s\n",
                   systems[sy][0], systems[sy][1], names[ph], a, b, b / a,
                   b > a * TP_CLIENT_GAIN ? "CLIENT-LIMITED: the bench's clients limit this figure"
                   : b * TP_CLIENT_GAIN < a ? "the clients are not the limit (more of them slow "
                                              "the system down)"
                                            : "the clients are not the limit",
                   o->uniform ? "  [uniform: best case]" : "");
        }
    }
}

/* ---- JSON (invariant 3) -------------------------------------------------------------------- */

static void tp_json_num(FILE *f, double v)
{
    if (v < 0 || isnan(v))
        fprintf(f, "null");
    else
        fprintf(f, "%.6g", v);
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
        "\"server_voluntary_ctxsw_per_item\": %.5f, \"acks_sent_s\": %.6f, "
        "\"daemon_syscalls_per_item\": %.5f, \"server_syscalls_per_item\": %.5f, "
        "\"files_created\": ",
        name, p->ran ? "true" : "false", p->elapsed_s, tp_rate(p, items), p->lat_p50_ms,
        p->lat_p99_ms, p->lat_max_ms, tp_per_m(p->daemon_cpu_s, items),
        tp_per_m(p->server_cpu_s, items), tp_per_m(p->client_cpu_s, items),
        items ? (double)p->daemon_ctxsw / (double)items : 0.0,
        items ? (double)p->server_ctxsw / (double)items : 0.0,
        items ? (double)p->daemon_ctxsw_vol / (double)items : 0.0,
        items ? (double)p->server_ctxsw_vol / (double)items : 0.0, p->acks_sent_s,
        tp_per_item(p->daemon_syscalls, items), tp_per_item(p->server_syscalls, items));
    if (p->have_files)
        fprintf(f, "%" PRIu64, p->files_created);
    else
        fprintf(f, "null");
    fprintf(f, ", \"files_created_per_s\": ");
    tp_json_num(f, tp_files_rate(p));
    fprintf(f, ", \"batches\": %" PRIu64 "}%s\n", p->batches, last ? "" : ",");
}

static void tp_json_cfg(FILE *f, const tp_js_cfg_t *c)
{
    fprintf(f,
            "{\"producers\": %" PRIu32 ", \"consumers\": %" PRIu32 ", \"fetch\": %" PRIu32
            ", \"requested\": %" PRIu32 ", \"pending\": %" PRIu32 "}",
            c->producers, c->consumers, c->fetch, c->requested, c->pending);
}

static void tp_json_result(FILE *f, const tp_result_t *r, const tp_opts_t *o, bool last)
{
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
    fprintf(f, ", \"rss_base_kb\": %ld, \"rss_peak_kb\": %ld, \"bytes_per_queued_item\": %.1f,",
            r->rss_base_kb, r->rss_peak_kb, r->bytes_per_queued_item);
    fprintf(f, "\n     \"label\": ");
    report_json_str(f, r->label);
    fprintf(f,
            ", \"role\": \"%s\", \"workload\": \"%s\", \"best_case\": %s, "
            "\"shapes_per_model\": %" PRIu32 ", \"contract_violations\": %" PRIu64
            ", \"queued_items\": %" PRIu64 ", \"anon_base_kb\": %ld, \"anon_end_kb\": %ld, "
            "\"anon_bytes_per_queued_item\": %.1f",
            tp_role_name(r->role), o->uniform ? "uniform" : "realistic",
            o->uniform ? "true" : "false", r->shapes, r->contract, r->queued, r->anon_base_kb,
            r->anon_end_kb, r->anon_bytes_per_queued_item);
    if (strcmp(r->system, "jetstream") == 0) {
        fprintf(f, ", \"jetstream_config\": ");
        tp_json_cfg(f, &r->js);
    }
    fprintf(f, ",\n     \"phases\": {\n");
    tp_json_phase(f, "submit_only", &r->phase[TP_SUBMIT], r->items, false);
    tp_json_phase(f, "drain", &r->phase[TP_DRAIN], r->items, false);
    tp_json_phase(f, "end_to_end", &r->phase[TP_E2E], r->items, true);
    fprintf(f, "     }}%s\n", last ? "" : ",");
}

static void tp_json_pair(FILE *f, const char *key, const double v[2], bool comma)
{
    fprintf(f, "\"%s\": {\"process\": ", key);
    tp_json_num(f, v[0]);
    fprintf(f, ", \"power\": ");
    tp_json_num(f, v[1]);
    fprintf(f, "}%s", comma ? ", " : "");
}

static void tp_json_summary(FILE *f, const tp_summary_t *s)
{
    fprintf(f, "  \"summary\": {\"jetstream_best_items_per_s\": {\"submit_only\": ");
    tp_json_num(f, s->js[TP_SUBMIT]);
    fprintf(f, ", \"drain\": ");
    tp_json_num(f, s->js[TP_DRAIN]);
    fprintf(f, ", \"end_to_end\": ");
    tp_json_num(f, s->js[TP_E2E]);
    fprintf(f, "}, \"jetstream_end_to_end_from\": ");
    report_json_str(f, s->js_from != NULL ? s->js_from : "");
    fprintf(f, ", \"fabric_ceiling_items_per_s\": ");
    tp_json_num(f, s->fabric);
    fprintf(f, ",\n    \"points\": [\n");
    for (uint32_t k = 0; k < s->n_points; k++) {
        const tp_point_t *p = &s->points[k];
        fprintf(f, "      {\"shapes_per_model\": %" PRIu32 ", ", p->shapes);
        tp_json_pair(f, "end_to_end_items_per_s", p->e2e, true);
        tp_json_pair(f, "end_to_end_ratio", p->ratio_e2e, true);
        tp_json_pair(f, "submit_only_ratio", p->ratio_submit, true);
        tp_json_pair(f, "drain_ratio", p->ratio_drain, true);
        fprintf(f, "\"submit_only_share_of_fabric\": ");
        tp_json_num(f, p->fabric_share);
        fprintf(f, ",\n       ");
        tp_json_pair(f, "daemon_syscalls_per_item_end_to_end", p->syscalls, true);
        tp_json_pair(f, "daemon_syscalls_per_item_submit_only", p->submit_syscalls, true);
        tp_json_pair(f, "server_syscalls_per_item_end_to_end", p->server_syscalls, true);
        fprintf(f, "\n       ");
        tp_json_pair(f, "daemon_cpu_s_per_m_items_end_to_end", p->cpu, true);
        tp_json_pair(f, "files_created_per_s_end_to_end", p->files, true);
        tp_json_pair(f, "files_created_per_s_submit_only", p->files_submit, true);
        tp_json_pair(f, "files_created_per_s_drain", p->files_drain, true);
        tp_json_pair(f, "bytes_per_queued_item", p->memory, false);
        fprintf(f, "}%s\n", k + 1 < s->n_points ? "," : "");
    }
    fprintf(f, "    ]},\n");
}

int tp_json_write(const char *path, const char *command, const tp_opts_t *o, const tp_result_t *rs,
                  size_t n, const tp_result_t *cells, size_t n_cells, const tp_js_cfg_t *winner,
                  bool ok)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    char lengths[64];
    tp_lengths_format(&o->lengths, lengths, sizeof(lengths));
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
    fprintf(f, ",\n             \"workload\": \"%s\", \"best_case\": %s, \"shapes_per_model\": [",
            o->uniform ? "uniform" : "realistic", o->uniform ? "true" : "false");
    for (uint32_t k = 0; k < o->n_shapes; k++)
        fprintf(f, "%s%" PRIu32, k ? ", " : "", o->shapes[k]);
    fprintf(f,
            "], \"zipf_s\": %.6g, \"lengths\": \"%s\", \"max_batch_tokens\": %" PRIu32
            ", \"cache_shapes\": [%" PRIu32 ", %" PRIu32 "], \"seed\": %" PRIu64
            ", \"producers\": %" PRIu32 ", \"consumers\": %" PRIu32
            ", \"js_grid\": \"%s\", \"js_grid_items\": %" PRIu64 ", \"queue_probe\": %" PRIu64
            ", \"reps\": %" PRIu32 "},\n",
            o->zipf_s, lengths, tp_max_batch_tokens(o), o->cache_lo, o->cache_hi, o->seed,
            o->producers, o->consumers,
            o->js_grid == TP_GRID_OFF     ? "off"
            : o->js_grid == TP_GRID_QUICK ? "quick"
                                          : "full",
            o->js_grid_items, o->queue_probe, o->reps);
    fprintf(f, "  \"ok\": %s,\n  \"js_grid\": {\"winner\": ", ok ? "true" : "false");
    tp_json_cfg(f, winner);
    fprintf(f, ", \"cells\": [\n");
    for (size_t i = 0; i < n_cells; i++) {
        const tp_result_t *c = &cells[i];
        fprintf(f, "    {\"config\": ");
        tp_json_cfg(f, &c->js);
        fprintf(f, ", \"ok\": %s, \"items\": %" PRIu64 ", \"end_to_end_items_per_s\": ",
                c->ok ? "true" : "false", c->items);
        tp_json_num(f, c->ok ? tp_m_rate(c, TP_E2E) : -1.0);
        fprintf(f, ", \"server_cpu_s_per_m_items\": ");
        tp_json_num(f, tp_m_server_cpu(c, TP_E2E));
        fprintf(f, ", \"server_syscalls_per_item\": ");
        tp_json_num(f, tp_m_server_sys(c, TP_E2E));
        fprintf(f, ", \"error\": ");
        report_json_str(f, c->error);
        fprintf(f, "}%s\n", i + 1 < n_cells ? "," : "");
    }
    fprintf(f, "  ]},\n");
    tp_summary_t s;
    tp_summary_compute(rs, n, cells, n_cells, o, &s);
    tp_json_summary(f, &s);
    fprintf(f, "  \"results\": [\n");
    for (size_t i = 0; i < n; i++)
        tp_json_result(f, &rs[i], o, i + 1 == n);
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}
