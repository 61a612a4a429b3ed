/*
 * metrics.c - the daemon's Prometheus figures: per-model counters and histograms kept by the
 * owner, and the text exposition (format 0.0.4) built from them and from the scheduler's state.
 *
 * The owner notes what happens (an item accepted, a batch dispatched, positions completed, a
 * turn); metrics_text writes everything at once. The text leaves the owner as a string only:
 * published on a reply subject (P.metrics) or handed to the metrics sink (the HTTP server's
 * snapshot), so no other thread ever reads this state.
 *
 * Invariants:
 *   1. Names follow Prometheus conventions: lanesched_ prefix, counters end in _total, times are
 *      in seconds (_seconds), fractions in [0, 1] end in _ratio; a family is written once, with
 *      its HELP and TYPE, whether or not it has samples yet.
 *   2. At most METRICS_MODELS_MAX models get series of their own; later ones are added up under
 *      model="(other)", so a client inventing model names cannot grow a scrape without bound.
 *   3. Label values are valid UTF-8 with \, " and newline escaped, whatever bytes a model holds.
 *   4. Histogram buckets are cumulative and the +Inf bucket equals _count.
 *   5. Queue wait is observed once per item, at its first dispatch (deliveries 0): a redelivery
 *      is not a new wait. An item whose batch reached no worker (undelivered.c: its count taken
 *      back to 0) is observed again at its next dispatch, its wait having run on. Items
 *      recovered at start are observed from the daemon's start, for the queue wait and the
 *      submit-to-ack time alike.
 *   6. A batch's GPU busy time and service time are counted once, at its first completion (the
 *      core's one sample of it: the time from its commit, or from its worker's previous
 *      completion when that is later, to the ack); submit-to-ack once per item acked.
 *   7. The process_* series follow the Prometheus client libraries' names and units, read
 *      from /proc at each scrape; the lanesched_nats_* series come from the transport's
 *      state (daemon_nats_state_set) and are absent without it.
 *
 * Rejected: a metrics library (none in Debian for C that fits the owner model), and reading the
 * state from the HTTP thread under a lock (every hot path would pay for the scrape).
 */
#include "scheduler/daemon/daemon_int.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "common/version.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Models with series of their own: about 6.6 KB of text each, so a scrape at this bound is
 * about 1.7 MB, more than a NATS message carries by default (metrics_request). */
#define METRICS_MODELS_MAX 256
#define METRICS_OTHER      "(other)"

/* Bucket bounds. Waits: a millisecond (an idle daemon) to five minutes (an overloaded one: the
 * bench's sustained preset reaches minutes). Batch sizes: powers of two up to 1,024 items. Turns
 * and flushes: 100 us (a turn with little to do) to a second (a stalled disk). */
static const double metrics_wait_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1,     2.5,    5,     10,   30,    60,   120, 300};
static const double metrics_size_le[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
static const double metrics_turn_le[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                         0.01,   0.025,   0.05,   0.1,   0.25,   1};
#define METRICS_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct metrics {
    metrics_series_t **series; /* in order of first figure; the models' own and "(other)" */
    size_t n_series;
    metrics_series_t other; /* shared by the models past METRICS_MODELS_MAX (invariant 2) */
    int other_listed;
    metrics_hist_t turn, flush;
};

static void metrics_hist_init(metrics_hist_t *h, const double *le, size_t n_le)
{
    memset(h, 0, sizeof(*h));
    h->le = le;
    h->n_le = n_le;
}

static void metrics_hist_add(metrics_hist_t *h, double v)
{
    size_t i = 0;
    while (i < h->n_le && v > h->le[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

static void metrics_series_init(metrics_series_t *s, const char *label)
{
    memset(s, 0, sizeof(*s));
    s->label = label;
    metrics_hist_init(&s->wait, metrics_wait_le, METRICS_LEN(metrics_wait_le));
    metrics_hist_init(&s->created_wait, metrics_wait_le, METRICS_LEN(metrics_wait_le));
    metrics_hist_init(&s->batch_items, metrics_size_le, METRICS_LEN(metrics_size_le));
    metrics_hist_init(&s->submit_to_ack, metrics_wait_le, METRICS_LEN(metrics_wait_le));
    metrics_hist_init(&s->service, metrics_wait_le, METRICS_LEN(metrics_wait_le));
}

daemon_status_t metrics_create(metrics_t **out)
{
    metrics_t *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->series = calloc(METRICS_MODELS_MAX, sizeof(*m->series))) == NULL) {
        free(m);
        return DAEMON_ENOMEM;
    }
    metrics_series_init(&m->other, METRICS_OTHER);
    metrics_hist_init(&m->turn, metrics_turn_le, METRICS_LEN(metrics_turn_le));
    metrics_hist_init(&m->flush, metrics_turn_le, METRICS_LEN(metrics_turn_le));
    *out = m;
    return DAEMON_OK;
}

void metrics_destroy(metrics_t *m)
{
    if (m == NULL)
        return;
    free(m->series);
    free(m);
}

metrics_series_t *metrics_series(metrics_t *mt, model_t *m)
{
    if (m->series != NULL)
        return m->series;
    /* past the bound the shared series, which a model really named METRICS_OTHER shares too
     * (one series per label value) */
    if (mt->n_series < METRICS_MODELS_MAX - 1 + (size_t)mt->other_listed &&
        strcmp(m->name, METRICS_OTHER) != 0) {
        metrics_series_init(&m->own, m->name);
        m->series = &m->own;
    } else {
        m->series = &mt->other;
        if (mt->other_listed)
            return m->series;
        mt->other_listed = 1;
    }
    mt->series[mt->n_series++] = m->series;
    return m->series;
}

void metrics_received(metrics_t *mt, model_t *m, uint64_t items, uint64_t tokens)
{
    metrics_series_t *mm = metrics_series(mt, m);
    mm->items_received += items;
    mm->tokens_received += tokens;
}

void metrics_completed(struct daemon *d, model_t *m, const sched_settled_t *done)
{
    metrics_series_t *mm = metrics_series(d->metrics, m);
    mm->items_completed += done->items;
    mm->tokens_completed += done->tokens;
    if (!done->held) /* a dead letter: nobody's ack */
        return;
    if (done->service_ns != 0) { /* the batch's first completion (invariant 6) */
        mm->gpu_busy_ns += done->service_ns;
        metrics_hist_add(&mm->service, (double)done->service_ns / 1e9);
    }
    uint64_t now = daemon_now(d);
    for (size_t i = 0; done->arrivals_view != NULL && i < done->items; i++) {
        uint64_t a = done->arrivals_view[i] > d->started_ns ? done->arrivals_view[i]
                                                            : d->started_ns; /* invariant 5 */
        if (now >= a)
            metrics_hist_add(&mm->submit_to_ack, (double)(now - a) / 1e9);
    }
}

void metrics_batch(struct daemon *d, model_t *m, const sched_batch_t *b, int hit,
                   metrics_batch_kind_t kind)
{
    metrics_series_t *mm = metrics_series(d->metrics, m);
    uint64_t now = daemon_now(d), wall = clock_wall_ns();
    if (kind == METRICS_EXPIRED) { /* never dispatched: no route, no wait */
        mm->dead_lettered += b->n;
        mm->expired += b->n;
        return;
    }
    mm->items_routed += b->n;
    mm->tokens_routed += b->real_tokens;
    for (size_t i = 0; i < b->n; i++) {
        const store_view_t *v = &b->items_view[i];
        if (v->deliveries != 0) /* invariant 5 */
            continue;
        uint64_t since = v->arrival_ns > d->started_ns ? v->arrival_ns : d->started_ns;
        if (now >= since)
            metrics_hist_add(&mm->wait, (double)(now - since) / 1e9);
        codec_bytes_t reply_to, payload;
        uint64_t created = 0;
        frame_decode(v->payload_view, v->payload_len, &reply_to, &payload, &created);
        if (created != 0 && wall >= created) /* a producer's clock ahead of ours: not a wait */
            metrics_hist_add(&mm->created_wait, (double)(wall - created) / 1e9);
    }
    if (kind == METRICS_DEAD_LETTER) {
        mm->dead_lettered += b->n;
        return;
    }
    mm->batches++;
    mm->shape_hits += hit != 0;
    mm->padded_tokens += b->padded_tokens;
    mm->real_tokens += b->real_tokens;
    metrics_hist_add(&mm->batch_items, (double)b->n);
}

void metrics_turn(metrics_t *m, uint64_t turn_ns, uint64_t flush_ns)
{
    metrics_hist_add(&m->turn, (double)turn_ns / 1e9);
    metrics_hist_add(&m->flush, (double)flush_ns / 1e9);
}

/* ---- the text --------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} metrics_buf_t;

static void metrics_printf(metrics_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void metrics_printf(metrics_buf_t *b, const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2 && !b->oom; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *grown = realloc(b->p, cap);
        if (grown == NULL) {
            b->oom = 1;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
}

/* A label value (invariant 3) into out, which holds UTF8_ESCAPED_MAX(strlen(s)) bytes. */
static void metrics_label(const char *s, char *out)
{
    size_t n = strlen(s);
    utf8_escape(s, n, UTF8_PROM, out, UTF8_ESCAPED_MAX(n));
}

static void metrics_family(metrics_buf_t *b, const char *name, const char *type, const char *help)
{
    metrics_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample per model of a u64 field (offset into metrics_series_t). */
static void metrics_per_model(metrics_buf_t *b, const metrics_t *m, char **labels, const char *name,
                              const char *type, const char *help, size_t off)
{
    metrics_family(b, name, type, help);
    for (size_t i = 0; i < m->n_series; i++)
        metrics_printf(b, "%s{model=\"%s\"} %" PRIu64 "\n", name, labels[i],
                       *(const uint64_t *)((const char *)m->series[i] + off));
}

/* One sample per model of a u64 field of nanoseconds, written in seconds. */
static void metrics_per_model_seconds(metrics_buf_t *b, const metrics_t *m, char **labels,
                                      const char *name, const char *type, const char *help,
                                      size_t off)
{
    metrics_family(b, name, type, help);
    for (size_t i = 0; i < m->n_series; i++)
        metrics_printf(b, "%s{model=\"%s\"} %.6f\n", name, labels[i],
                       (double)*(const uint64_t *)((const char *)m->series[i] + off) / 1e9);
}

static void metrics_hist_write(metrics_buf_t *b, const char *name, const char *labels,
                               const metrics_hist_t *h)
{
    uint64_t cum = 0;
    const char *sep = labels[0] != '\0' ? "," : "";
    for (size_t i = 0; i <= h->n_le; i++) {
        cum += h->counts[i];
        if (i < h->n_le)
            metrics_printf(b, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, labels, sep, h->le[i],
                           cum);
        else
            metrics_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, cum);
    }
    const char *open = labels[0] != '\0' ? "{" : "", *close = labels[0] != '\0' ? "}" : "";
    metrics_printf(b, "%s_sum%s%s%s %.9g\n%s_count%s%s%s %" PRIu64 "\n", name, open, labels, close,
                   h->sum, name, open, labels, close, h->count);
}

static void metrics_hist_per_model(metrics_buf_t *b, const metrics_t *m, char **labels,
                                   const char *name, const char *help, size_t off)
{
    metrics_family(b, name, "histogram", help);
    char lab[6 * (LIMITS_MODEL_MAX + 16) + 16];
    for (size_t i = 0; i < m->n_series; i++) {
        snprintf(lab, sizeof(lab), "model=\"%s\"", labels[i]);
        metrics_hist_write(b, name, lab,
                           (const metrics_hist_t *)((const char *)m->series[i] + off));
    }
}

static void metrics_ratio(metrics_buf_t *b, const metrics_t *m, char **labels, const char *name,
                          const char *help, int hits)
{
    metrics_family(b, name, "gauge", help);
    for (size_t i = 0; i < m->n_series; i++) {
        const metrics_series_t *mm = m->series[i];
        double r = hits ? (mm->batches ? (double)mm->shape_hits / (double)mm->batches : 0)
                        : (mm->padded_tokens ? (double)(mm->padded_tokens - mm->real_tokens) /
                                                   (double)mm->padded_tokens
                                             : 0);
        metrics_printf(b, "%s{model=\"%s\"} %.6f\n", name, labels[i], r);
    }
}

static void metrics_shape(void *ctx, const char *model, uint64_t signature, const lanes_t *lanes,
                          int current)
{
    (void)signature;
    (void)current;
    struct daemon *d = ctx;
    model_t *m = models_get(d, model);
    if (m == NULL)
        return;
    metrics_series_t *mm = metrics_series(d->metrics, m);
    mm->queued_items += lanes_queued_items(lanes);
    mm->queued_tokens += lanes_queued_tokens(lanes);
    mm->lanes += lanes_in_use(lanes);
    lanes_lane_t lane;
    for (uint32_t id = 0; lanes_get(lanes, id, &lane) == SCHED_OK; id++)
        mm->inflight_items += lane.inflight_items;
}

/* The gauges of every model, from the scheduler and the registry as they are now. */
static void metrics_gauges(struct daemon *d)
{
    metrics_t *mt = d->metrics;
    for (size_t i = 0; i < mt->n_series; i++) {
        metrics_series_t *mm = mt->series[i];
        mm->queued_items = mm->queued_tokens = mm->inflight_items = mm->lanes = mm->consumers = 0;
        mm->oldest_age_ns = 0;
    }
    sched_shapes_visit(d->sched, metrics_shape, d);
    uint64_t now = daemon_now(d), oldest = 0;
    for (size_t i = 0; i < d->models.n; i++) {
        model_t *m = d->models.all[i];
        if (m->consumers != 0)
            metrics_series(mt, m)->consumers += m->consumers;
        if (m->items != 0 && sched_model_oldest(d->sched, m->core, &oldest) && now > oldest) {
            metrics_series_t *mm = metrics_series(mt, m);
            mm->oldest_age_ns = now - oldest > mm->oldest_age_ns ? now - oldest : mm->oldest_age_ns;
        }
    }
}

#define METRICS_OFF(field) offsetof(metrics_series_t, field)

static void metrics_write_models(metrics_buf_t *b, const metrics_t *m, char **l)
{
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } u64s[] = {
        {"lanesched_items_received_total", "counter", "Items accepted by submits.",
         METRICS_OFF(items_received)},
        {"lanesched_tokens_received_total", "counter", "Tokens of the items accepted.",
         METRICS_OFF(tokens_received)},
        {"lanesched_items_routed_total", "counter",
         "Items sent in batches or as dead letters; each redelivery counts again.",
         METRICS_OFF(items_routed)},
        {"lanesched_tokens_routed_total", "counter", "Tokens of the items routed.",
         METRICS_OFF(tokens_routed)},
        {"lanesched_items_completed_total", "counter", "Items acked or dead-lettered.",
         METRICS_OFF(items_completed)},
        {"lanesched_tokens_completed_total", "counter", "Tokens of the items completed.",
         METRICS_OFF(tokens_completed)},
        {"lanesched_items_dead_lettered_total", "counter",
         "Items published on <prefix>.dead.<model>: past --max-deliveries or the age limit.",
         METRICS_OFF(dead_lettered)},
        {"lanesched_items_expired_total", "counter",
         "Items dead-lettered because they stayed queued longer than the model's age limit.",
         METRICS_OFF(expired)},
        {"lanesched_batches_total", "counter", "Batches dispatched to consumers.",
         METRICS_OFF(batches)},
        {"lanesched_batch_shape_hits_total", "counter",
         "Batches of the same shape as the consumer's previous batch.", METRICS_OFF(shape_hits)},
        {"lanesched_padded_tokens_total", "counter",
         "Sum over batches of items times pad_to (the tokens a GPU computes).",
         METRICS_OFF(padded_tokens)},
        {"lanesched_real_tokens_total", "counter", "Sum over batches of the items' tokens.",
         METRICS_OFF(real_tokens)},
        {"lanesched_queued_items", "gauge", "Items queued and dispatchable.",
         METRICS_OFF(queued_items)},
        {"lanesched_queued_tokens", "gauge", "Tokens of the queued items.",
         METRICS_OFF(queued_tokens)},
        {"lanesched_inflight_items", "gauge", "Items dispatched and not yet settled.",
         METRICS_OFF(inflight_items)},
        {"lanesched_lanes_in_use", "gauge", "Lanes in use over every shape of the model.",
         METRICS_OFF(lanes)},
        {"lanesched_consumers", "gauge", "Consumers registered and alive.", METRICS_OFF(consumers)},
    };
    for (size_t i = 0; i < METRICS_LEN(u64s); i++)
        metrics_per_model(b, m, l, u64s[i].name, u64s[i].type, u64s[i].help, u64s[i].off);
    metrics_ratio(b, m, l, "lanesched_padding_waste_ratio",
                  "Padding over padded tokens since start: (padded - real) / padded.", 0);
    metrics_ratio(b, m, l, "lanesched_shape_hit_ratio",
                  "Batches of the consumer's previous batch's shape over all batches, since start.",
                  1);
    metrics_hist_per_model(b, m, l, "lanesched_queue_wait_seconds",
                           "From submit accepted to first dispatch, per item.", METRICS_OFF(wait));
    metrics_hist_per_model(
        b, m, l, "lanesched_created_wait_seconds",
        "From the producer's created_unix_ns to first dispatch, per item that carries it.",
        METRICS_OFF(created_wait));
    metrics_hist_per_model(b, m, l, "lanesched_batch_size_items", "Items per dispatched batch.",
                           METRICS_OFF(batch_items));
    metrics_hist_per_model(b, m, l, "lanesched_submit_to_ack_seconds",
                           "From submit accepted to the ack that completed the item, per item.",
                           METRICS_OFF(submit_to_ack));
    metrics_hist_per_model(
        b, m, l, "lanesched_service_seconds",
        "A batch's time on its worker: from its dispatch (or the worker's previous completion, "
        "if later) to its first ack.",
        METRICS_OFF(service));
    metrics_per_model_seconds(b, m, l, "lanesched_gpu_busy_seconds_total", "counter",
                              "Seconds the model's workers spent on its batches (each batch's "
                              "service time, once).",
                              METRICS_OFF(gpu_busy_ns));
    metrics_per_model_seconds(b, m, l, "lanesched_oldest_queued_age_seconds", "gauge",
                              "How long the model's oldest queued item has waited (0: none).",
                              METRICS_OFF(oldest_age_ns));
}

/* The process_* series (invariant 7): what every Prometheus client library exports. */
static void metrics_write_process(metrics_buf_t *b)
{
    char stat[1024] = "";
    FILE *f = fopen("/proc/self/stat", "r");
    if (f != NULL) {
        if (fgets(stat, sizeof(stat), f) == NULL)
            stat[0] = '\0';
        fclose(f);
    }
    /* the fields after the command, which may hold spaces: from the last ')' on */
    const char *p = strrchr(stat, ')');
    unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
    long long rss = 0;
    if (p != NULL &&
        sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %llu %lld",
               &utime, &stime, &start, &vsize, &rss) != 5)
        utime = stime = start = vsize = 0, rss = 0;
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long long btime = 0;
    char line[256];
    if ((f = fopen("/proc/stat", "r")) != NULL) {
        while (fgets(line, sizeof(line), f) != NULL && sscanf(line, "btime %llu", &btime) != 1)
            ;
        fclose(f);
    }
    size_t fds = 0;
    DIR *dir = opendir("/proc/self/fd");
    for (struct dirent *e; dir != NULL && (e = readdir(dir)) != NULL;)
        fds += e->d_name[0] != '.';
    if (dir != NULL) {
        closedir(dir);
        fds--; /* the directory's own descriptor */
    }
    struct rlimit rl = {0};
    getrlimit(RLIMIT_NOFILE, &rl);
    metrics_family(b, "process_cpu_seconds_total", "counter", "User and system CPU time spent.");
    /* getrusage to the microsecond: /proc's clock ticks (10 ms) read 0 for an idle daemon */
    struct rusage ru;
    double cpu = ticks > 0 ? (double)(utime + stime) / (double)ticks : 0.0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
              ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
    metrics_printf(b, "process_cpu_seconds_total %.6f\n", cpu);
    metrics_family(b, "process_resident_memory_bytes", "gauge", "Resident memory size.");
    metrics_printf(b, "process_resident_memory_bytes %lld\n", rss * (page > 0 ? page : 4096));
    metrics_family(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size.");
    metrics_printf(b, "process_virtual_memory_bytes %llu\n", vsize);
    metrics_family(b, "process_open_fds", "gauge", "Open file descriptors.");
    metrics_printf(b, "process_open_fds %zu\n", fds);
    metrics_family(b, "process_max_fds", "gauge", "The limit on open file descriptors.");
    metrics_printf(b, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    metrics_family(b, "process_start_time_seconds", "gauge",
                   "Start time of the process since the Unix epoch.");
    metrics_printf(b, "process_start_time_seconds %.2f\n",
                   (double)btime + (ticks > 0 ? (double)start / (double)ticks : 0.0));
}

/* The lanesched_nats_* series (invariant 7). */
static void metrics_write_nats(metrics_buf_t *b, struct daemon *d)
{
    if (d->nats_state == NULL)
        return;
    daemon_nats_state_t ns = {0};
    d->nats_state(d->nats_state_ctx, &ns);
    metrics_family(b, "lanesched_nats_connected", "gauge",
                   "1 while the daemon's NATS connection is up, 0 while it reconnects.");
    metrics_printf(b, "lanesched_nats_connected %d\n", ns.connected ? 1 : 0);
    metrics_family(b, "lanesched_nats_reconnects_total", "counter",
                   "Reconnects of the daemon's NATS connection (each logs its outage).");
    metrics_printf(b, "lanesched_nats_reconnects_total %" PRIu64 "\n", ns.reconnects);
    metrics_family(b, "lanesched_nats_disconnected_seconds_total", "counter",
                   "Time the daemon spent without its NATS connection, the current outage "
                   "included.");
    metrics_printf(b, "lanesched_nats_disconnected_seconds_total %.3f\n",
                   (double)ns.outage_ns / 1e9);
    metrics_family(
        b, "lanesched_nats_errors_total", "counter",
        "Asynchronous errors NATS reported: a publish the server's permissions refused "
        "(a reply subject a client named), a slow consumer (logged at most 20 a second).");
    metrics_printf(b, "lanesched_nats_errors_total %" PRIu64 "\n", ns.errors);
}

static void metrics_write_daemon(metrics_buf_t *b, struct daemon *d)
{
    const daemon_counters_t *dc = &d->counters;
    metrics_family(b, "lanesched_info", "gauge", "The daemon's version, protocol and instance.");
    metrics_printf(b, "lanesched_info{version=\"%s\",protocol_version=\"%d\",instance=\"%s\"} 1\n",
                   version_string(), VERSION_PROTOCOL, d->instance_id);
    metrics_family(b, "lanesched_uptime_seconds", "gauge", "Seconds since the daemon started.");
    metrics_printf(b, "lanesched_uptime_seconds %.3f\n",
                   (double)(daemon_now(d) - d->started_ns) / 1e9);
    metrics_family(b, "lanesched_rejected_total", "counter",
                   "Items rejected by reason code word (malformed counts whole messages).");
    for (int i = 0; i < CODEC_STATUS_COUNT; i++) {
        if (i != CODEC_OK && i != CODEC_DUPLICATE)
            metrics_printf(b, "lanesched_rejected_total{reason=\"%s\"} %" PRIu64 "\n",
                           codec_status_reason((codec_status_t)i), dc->rejected[i]);
    }
    static const struct {
        const char *name, *help;
        size_t off;
    } totals[] = {
        {"lanesched_duplicates_total", "Submitted items answered duplicate.",
         offsetof(daemon_counters_t, duplicates)},
        {"lanesched_publish_failures_total", "NATS publishes that failed.",
         offsetof(daemon_counters_t, publish_failures)},
        {"lanesched_commit_failures_total",
         "Batches void: published, then their commit failed; their items go back to their "
         "queues.",
         offsetof(daemon_counters_t, commit_failures)},
        {"lanesched_disconnects_total", "Losses of the daemon's NATS connection.",
         offsetof(daemon_counters_t, disconnects)},
        {"lanesched_batches_expired_ack_deadline_total", "Batches returned by their ack deadline.",
         offsetof(daemon_counters_t, batches_expired_ack_deadline)},
        {"lanesched_consumers_declared_dead_total", "Consumers declared dead by silence.",
         offsetof(daemon_counters_t, consumers_declared_dead)},
        {"lanesched_unknown_consumer_total",
         "Consumer messages naming no live consumer (an unknown or dead secret, a public id).",
         offsetof(daemon_counters_t, unknown_consumer)},
        {"lanesched_batches_undelivered_total",
         "Batches returned at once: NATS found no subscriber for their pull's inbox.",
         offsetof(daemon_counters_t, batches_undelivered)},
        {"lanesched_undelivered_unmatched_total",
         "No-responders statuses naming no batch in flight of the named consumer.",
         offsetof(daemon_counters_t, undelivered_unmatched)},
    };
    for (size_t i = 0; i < METRICS_LEN(totals); i++) {
        metrics_family(b, totals[i].name, "counter", totals[i].help);
        metrics_printf(b, "%s %" PRIu64 "\n", totals[i].name,
                       *(const uint64_t *)((const char *)dc + totals[i].off));
    }
    metrics_family(b, "lanesched_dropped_messages_total", "counter",
                   "Incoming messages dropped before the owner saw them.");
    metrics_printf(b, "lanesched_dropped_messages_total %" PRIu64 "\n",
                   __atomic_load_n(&dc->dropped_messages, __ATOMIC_RELAXED));
    size_t backlog_submits = 0, backlog_other = 0;
    evqueue_backlog_get(&d->events, &backlog_submits, &backlog_other);
    metrics_family(b, "lanesched_backlog_bytes", "gauge",
                   "Bytes of client messages waiting for the owner, by class; each class is "
                   "bounded by lanesched_backlog_limit_bytes, past which messages are dropped.");
    metrics_printf(b, "lanesched_backlog_bytes{class=\"submit\"} %zu\n", backlog_submits);
    metrics_printf(b, "lanesched_backlog_bytes{class=\"other\"} %zu\n", backlog_other);
    metrics_family(b, "lanesched_backlog_limit_bytes", "gauge",
                   "The bound of each class of lanesched_backlog_bytes (--limit-backlog-bytes).");
    metrics_printf(b, "lanesched_backlog_limit_bytes %zu\n", d->events.bound);
    metrics_family(b, "lanesched_owner_turn_duration_seconds", "histogram",
                   "One turn of the owner loop, its wait for events excluded.");
    metrics_hist_write(b, "lanesched_owner_turn_duration_seconds", "", &d->metrics->turn);
    metrics_family(b, "lanesched_store_flush_duration_seconds", "histogram",
                   "The store flush of each turn (the group commit).");
    metrics_hist_write(b, "lanesched_store_flush_duration_seconds", "", &d->metrics->flush);
    store_usage_t u;
    store_usage_get(d->store, &u);
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } usage[] = {
        {"lanesched_store_segment_files", "gauge", "Live segment files of the disk store.",
         offsetof(store_usage_t, segment_files)},
        {"lanesched_store_segment_bytes", "gauge", "Bytes written to the live segment files.",
         offsetof(store_usage_t, segment_bytes)},
        {"lanesched_store_journal_files", "gauge", "State journal files the disk store keeps.",
         offsetof(store_usage_t, journal_files)},
        {"lanesched_store_journal_bytes", "gauge", "Bytes of the state journal files kept.",
         offsetof(store_usage_t, journal_bytes)},
        {"lanesched_store_journal_restated_total", "counter",
         "Segments whose journal records were restated so older journal files could go.",
         offsetof(store_usage_t, journal_restated)},
        {"lanesched_store_written_ahead_total", "counter",
         "Turns whose appended entries were written ahead of their flush (past 512 KiB).",
         offsetof(store_usage_t, written_ahead)},
    };
    for (size_t i = 0; i < METRICS_LEN(usage); i++) {
        metrics_family(b, usage[i].name, usage[i].type, usage[i].help);
        metrics_printf(b, "%s %" PRIu64 "\n", usage[i].name,
                       *(const uint64_t *)((const char *)&u + usage[i].off));
    }
}

char *metrics_text(struct daemon *d, size_t *out_len)
{
    metrics_t *m = d->metrics;
    metrics_gauges(d);
    metrics_buf_t b = {.p = malloc(65536), .cap = 65536};
    char **labels = calloc(m->n_series + 1, sizeof(*labels));
    b.oom = b.p == NULL || labels == NULL;
    for (size_t i = 0; !b.oom && i < m->n_series; i++) {
        labels[i] = malloc(UTF8_ESCAPED_MAX(strlen(m->series[i]->label)));
        if (labels[i] == NULL)
            b.oom = 1;
        else
            metrics_label(m->series[i]->label, labels[i]);
    }
    if (!b.oom) {
        metrics_write_daemon(&b, d);
        metrics_write_nats(&b, d);
        metrics_write_process(&b);
        metrics_write_models(&b, m, labels);
    }
    for (size_t i = 0; labels != NULL && i < m->n_series; i++)
        free(labels[i]);
    free(labels);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *out_len = b.len;
    return b.p;
}

void metrics_request(struct daemon *d, const ev_t *ev)
{
    if (ev->kind == EV_METRICS_SNAPSHOT ? d->metrics_sink == NULL : ev->reply == NULL)
        return; /* no sink; a client's request with nowhere to answer */
    size_t len = 0;
    char *text = metrics_text(d, &len);
    if (text == NULL) {
        log_write(LOG_WARN, "out of memory: the metrics were not written");
        if (ev->reply != NULL)
            service_error(d, EV_METRICS, NULL, "no_memory: the metrics could not be written");
        return;
    }
    if (ev->reply != NULL && len > d->reply_max) {
        /* what the server cannot carry is refused with a text that says so: a comment, so the
         * reply still parses as an (empty) exposition */
        char note[256];
        int n =
            snprintf(note, sizeof(note),
                     CODEC_METRICS_REFUSED_PREFIX "the text is %zu bytes, over the %" PRIu64
                                                  " this NATS server carries: read /metrics over "
                                                  "HTTP (--metrics-listen)\n",
                     len, d->reply_max);
        free(text);
        service_error(d, EV_METRICS, NULL, "too_large: the metrics text is over max_payload");
        text = strdup(note);
        len = text != NULL && n > 0 ? (size_t)n : 0;
    }
    if (ev->reply != NULL) {
        daemon_publish(d, ev->reply, (uint8_t *)text, len);
        return;
    }
    d->metrics_sink(d->metrics_sink_ctx, text, len);
    free(text);
}
