/*
 * net.c - one run of the trace through one NATS system (lanesched in live.c, JetStream in
 * baseline.c): the per-item times both fill in, the producers' pacing, the payload every item
 * carries, the simulated workers' GPU step, the progress line and process memory.
 *
 * Invariants:
 *  1. Item ids are <run tag>-<trace index>; the tag is a random nonce with the system's letter,
 *     so runs never share ids and two runs on one daemon (--url) cannot dedupe each other's items.
 *  2. A payload is run nonce + trace index + send time (net_payload_encode): a worker finds the
 *     item's slots from the payload alone, and an item of another run (left in a --url daemon)
 *     is acked and counted as foreign, never as ours.
 *  3. Wall time = trace time x --time-scale, for arrivals and service alike, so offered load
 *     over GPU capacity is the trace's at every scale; the brokers themselves are not scaled.
 *  4. A worker sleeps on an absolute clock (busy_until += service), so timer slack on one batch
 *     is paid back on the next one instead of adding up.
 *  5. A run ends by net_run_t.limit_s whatever happens: the trace, three times the GPU time of
 *     every item served alone, the drain timeout and NET_RUN_SLACK_S.
 *
 * Rejected alternatives:
 *  - A map from item id to slot at the worker: the payload carries the index (2).
 *  - Relative sleeps for service time: their slack adds up over a run (4).
 */
#include "net.h"

#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NET_PLAIN_PRINT_MS 5000u /* the progress line as plain lines, off a terminal */
#define NET_RUN_SLACK_S    60.0  /* a run's deadline beyond trace and drain (invariant 5) */

struct net_worker {
    pthread_mutex_t mu; /* guards gpu (the progress line reads its stats) */
    gpu_t *gpu;
    uint64_t busy_until_ns; /* the worker's thread only */
};

void net_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

void net_sleep_ms(uint64_t ms)
{
    net_sleep_until(clock_mono_ns() + ms * 1000000ull);
}

/* ---- memory --------------------------------------------------------------------------------- */

long net_rss_kb(int pid, bool peak)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (pid <= 0)
        return -1;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    const char *key = peak ? "VmHWM:" : "VmRSS:";
    long kb = -1;
    while (kb < 0 && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, strlen(key)) == 0)
            kb = strtol(line + strlen(key), NULL, 10);
    }
    fclose(f);
    return kb;
}

void net_rss_peak_reset(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/clear_refs", pid);
    FILE *f = pid > 0 ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fputs("5", f); /* resets VmHWM to the current RSS (Linux >= 4.0) */
        fclose(f);
    }
}

/* ---- payload (invariant 2) ------------------------------------------------------------------ */

static void net_u64_put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t net_u64_get(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void net_payload_encode(const net_run_t *run, uint32_t idx, uint64_t sent_ns, uint8_t *out)
{
    net_u64_put(out, run->nonce);
    net_u64_put(out + 8, idx);
    net_u64_put(out + 16, sent_ns);
}

int net_payload_decode(const net_run_t *run, const void *data, size_t len, uint32_t *idx)
{
    const uint8_t *p = data;
    if (p == NULL || len < NET_PAYLOAD_LEN || net_u64_get(p) != run->nonce)
        return 0;
    uint64_t i = net_u64_get(p + 8);
    if (i >= run->trace->n_items)
        return 0;
    *idx = (uint32_t)i;
    return 1;
}

/* ---- producers and workers --------------------------------------------------------------------
 */

size_t net_pace_take(net_run_t *run, uint32_t model, size_t next)
{
    const net_trace_t *t = run->trace;
    const uint32_t *ix = t->by_model[model];
    size_t n = t->n_by_model[model], max = run->opts->batch;
    double scale = run->opts->time_scale;
    if (next >= n || net_stopping(run))
        return 0;
    if (run->opts->no_pace)
        return n - next < max ? n - next : max;
    for (;;) {
        uint64_t due = run->t0_ns + (uint64_t)((double)t->items[ix[next]].t_ns * scale);
        uint64_t now = clock_mono_ns();
        if (now >= due)
            break;
        if (net_stopping(run))
            return 0;
        net_sleep_until(due - now > 100000000ull ? now + 100000000ull : due);
    }
    uint64_t now = clock_mono_ns();
    size_t k = 1;
    while (k < max && next + k < n &&
           run->t0_ns + (uint64_t)((double)t->items[ix[next + k]].t_ns * scale) <= now)
        k++;
    return k;
}

int net_items_init(net_items_t *it, size_t cap)
{
    *it = (net_items_t){.idx = calloc(cap, sizeof(uint32_t)),
                        .tokens = calloc(cap, sizeof(uint32_t)),
                        .prefix = calloc(cap, sizeof(uint32_t)),
                        .sigs = calloc(cap, sizeof(uint64_t))};
    if (it->idx != NULL && it->tokens != NULL && it->prefix != NULL && it->sigs != NULL)
        return 0;
    net_items_fini(it);
    return -1;
}

void net_items_fini(net_items_t *it)
{
    free(it->idx);
    free(it->tokens);
    free(it->prefix);
    free(it->sigs);
    *it = (net_items_t){0};
}

void net_worker_serve(net_run_t *run, net_worker_t *w, const net_items_t *items, size_t off,
                      size_t n, uint32_t pad_to)
{
    const uint32_t *idx = items->idx + off, *tokens = items->tokens + off;
    uint64_t now = clock_mono_ns(), real = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t expected = 0;
        if (atomic_compare_exchange_strong(&run->served_ns[idx[i]], &expected, now))
            atomic_fetch_add(&run->served_items, 1);
        else
            atomic_fetch_add(&run->redelivered_items, 1);
        real += tokens[i];
    }
    if (n == 0)
        return;
    pthread_mutex_lock(&w->mu);
    /* a one-shape batch is served by gpu_serve_mixed exactly as by gpu_serve */
    uint64_t ns =
        gpu_serve_mixed(w->gpu, items->sigs + off, items->prefix + off, (uint32_t)n, pad_to, real);
    pthread_mutex_unlock(&w->mu);
    if (w->busy_until_ns < now)
        w->busy_until_ns = now;
    w->busy_until_ns += (uint64_t)((double)ns * run->opts->time_scale); /* invariants 3, 4 */
    net_sleep_until(w->busy_until_ns);
}

void net_worker_acked(net_run_t *run, size_t n_items)
{
    uint64_t now = clock_mono_ns(), last = atomic_load(&run->last_ack_ns);
    atomic_fetch_add(&run->acked_items, n_items);
    while (last < now && !atomic_compare_exchange_weak(&run->last_ack_ns, &last, now)) {
    }
}

void net_run_tally_get(net_run_t *run, gpu_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t k = 0; k < run->n_workers; k++) {
        net_worker_t *w = run->workers[k];
        pthread_mutex_lock(&w->mu);
        const gpu_stats_t *s = gpu_stats(w->gpu);
        out->batches += s->batches;
        out->items += s->items;
        out->padded_tokens += s->padded_tokens;
        out->real_tokens += s->real_tokens;
        out->hits += s->hits;
        out->misses += s->misses;
        out->busy_ns += s->busy_ns;
        out->prefix_tokens += s->prefix_tokens;
        out->prefix_saved_tokens += s->prefix_saved_tokens;
        pthread_mutex_unlock(&w->mu);
    }
}

/* ---- the progress line ------------------------------------------------------------------------
 */

void net_progress_show(net_run_t *run, const char *label, double items_per_s, double queued,
                       double lanes, double waste_pct, double hit_pct)
{
    bool tty = isatty(STDOUT_FILENO);
    uint64_t now = clock_mono_ns();
    if (!tty && run->progress_ns != 0 && now - run->progress_ns < NET_PLAIN_PRINT_MS * 1000000ull)
        return;
    run->progress_ns = now;
    char lanes_text[24] = "-", hit_text[24] = "-";
    if (lanes >= 0)
        snprintf(lanes_text, sizeof(lanes_text), "%.0f", lanes);
    if (hit_pct >= 0)
        snprintf(hit_text, sizeof(hit_text), "%.1f%%", hit_pct);
    double t = now > run->t0_ns ? (double)(now - run->t0_ns) / 1e9 : 0.0;
    printf("%s[%s] %6.1fs  %7.0f items/s  queued %6.0f  lanes %5s  waste %5.1f%%  hit %6s%s",
           tty ? "\r\033[K" : "", label, t, items_per_s, queued, lanes_text, waste_pct, hit_text,
           tty ? "" : "\n");
    run->progress_open = tty;
    fflush(stdout);
}

void net_progress_end(net_run_t *run)
{
    if (run->progress_open)
        printf("\n");
    run->progress_open = false;
    fflush(stdout);
}

/* ---- the run ------------------------------------------------------------------------------------
 */

static uint64_t net_random_u64(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
        v = clock_mono_ns() ^ ((uint64_t)getpid() << 32);
    if (fd >= 0)
        close(fd);
    return v != 0 ? v : 1;
}

void net_run_free(net_run_t *run)
{
    for (size_t k = 0; run->workers != NULL && k < run->n_workers; k++) {
        if (run->workers[k] == NULL)
            continue;
        pthread_mutex_destroy(&run->workers[k]->mu);
        gpu_destroy(run->workers[k]->gpu);
        free(run->workers[k]);
    }
    free(run->workers);
    free((void *)run->sent_ns);
    free((void *)run->acked_ns);
    free((void *)run->served_ns);
    memset(run, 0, sizeof(*run));
}

int net_run_init(net_run_t *run, const net_opts_t *o, const net_trace_t *t, const char *url,
                 char kind)
{
    int rc = -1;
    memset(run, 0, sizeof(*run));
    run->opts = o;
    run->trace = t;
    run->url = url;
    run->nonce = net_random_u64();
    snprintf(run->tag, sizeof(run->tag), "%c%08" PRIx32, kind, (uint32_t)run->nonce);
    run->rss_base_kb = run->rss_peak_kb = -1;
    /* Invariant 5: the trace, then the GPU time of every item served alone (the worst case),
     * three times over, spread over the workers, then the drain timeout and some slack. */
    double serial_s = ((double)t->tokens * o->gpu.ns_per_padded_token +
                       (double)t->n_items * (double)o->gpu.batch_fixed_ns) *
                      o->time_scale / 1e9;
    run->limit_s = (o->no_pace ? 0.0 : t->cfg.duration_s * o->time_scale) +
                   3.0 * serial_s / (double)((size_t)t->cfg.models * o->workers) +
                   o->drain_timeout_s + NET_RUN_SLACK_S;
    run->sent_ns = calloc(t->n_items, sizeof(*run->sent_ns));
    run->acked_ns = calloc(t->n_items, sizeof(*run->acked_ns));
    run->served_ns = calloc(t->n_items, sizeof(*run->served_ns));
    run->n_workers = (size_t)t->cfg.models * o->workers;
    run->workers = calloc(run->n_workers, sizeof(*run->workers));
    if (run->sent_ns == NULL || run->acked_ns == NULL || run->served_ns == NULL ||
        run->workers == NULL)
        goto out;
    for (size_t k = 0; k < run->n_workers; k++) {
        net_worker_t *w = calloc(1, sizeof(*w));
        if (w == NULL)
            goto out;
        if (gpu_create(&o->gpu, &w->gpu) != 0) {
            free(w);
            goto out;
        }
        pthread_mutex_init(&w->mu, NULL);
        run->workers[k] = w;
    }
    rc = 0;
out:
    if (rc != 0)
        net_run_free(run);
    return rc;
}
