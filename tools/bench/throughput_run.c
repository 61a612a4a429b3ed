/*
 * throughput_run.c - what a lanesched run and a JetStream run of `throughput` share: the items
 * (ids, payloads, who sends which), the count of each item's consumption, the submit latencies,
 * the watch over one phase with its progress line, and the /proc readings of a process: CPU
 * seconds and context switches summed over its threads, read and write system calls, and the
 * files its data directory gained.
 *
 * Invariants:
 *  1. Every run has 2 x items items, the submit phase's first and the end-to-end phase's after;
 *     item i has id <tag>-<i> and a payload that starts with (nonce, i, send time), so a consumer
 *     finds its slot from the payload alone and an item of another run is counted as foreign.
 *     Its model, shape and tokens are the workload's for i (throughput_workload.c).
 *  2. Each item's consumptions are counted: 0 after the run is a lost item, 2 or more a
 *     duplicate delivery; both fail the run, as a failed item or a broken batch does.
 *  3. A phase's figures are taken between two readings of the same processes, at its start and
 *     when its last item was confirmed (or consumed); CPU and switches of every thread, read from
 *     /proc/<pid>/stat and /proc/<pid>/task/<tid>/status, read and write system calls of the
 *     whole process from /proc/<pid>/io (syscr + syscw), files created from the run's watch.
 *  4. A phase always ends: done, no progress for TP_PHASE_STALL_S, --phase-timeout, a signal.
 *  5. A producer's share is whole Submit chunks, so each of its Submits has one model.
 *
 * Rejected alternatives:
 *  - getrusage for the daemon: it covers children, not another process; /proc covers any pid.
 *  - The main thread's /proc/<pid>/status alone: it counts only that thread's switches, and the
 *    switches that matter are the callback, reader and flusher threads'.
 */
#include "throughput_int.h"

#include "common/clock.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TP_SAMPLE_MS 100u

static uint64_t tp_u64_get(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void tp_u64_put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int tp_run_init(tp_run_t *run, const tp_opts_t *o, const tp_workload_t *wl, uint64_t items,
                char kind)
{
    memset(run, 0, sizeof(*run));
    run->o = o;
    run->wl = wl;
    run->items = items;
    run->n = 2 * items;
    run->nonce = clock_mono_ns() ^ ((uint64_t)getpid() << 40) ^ ((uint64_t)(unsigned char)kind);
    snprintf(run->tag, sizeof(run->tag), "%c%08" PRIx32, kind, (uint32_t)(run->nonce >> 7));
    run->consumed = calloc(run->n, sizeof(*run->consumed));
    /* one latency per message: a Submit (lanesched) or an item (JetStream) */
    run->cap_lat = items + 1;
    run->lat_ns = calloc(run->cap_lat, sizeof(*run->lat_ns));
    atomic_flag_clear(&run->error_set);
    if (run->consumed == NULL || run->lat_ns == NULL) {
        tp_run_free(run);
        return -1;
    }
    return 0;
}

void tp_run_free(tp_run_t *run)
{
    free((void *)run->consumed);
    free(run->lat_ns);
    run->consumed = NULL;
    run->lat_ns = NULL;
}

void tp_run_error(tp_run_t *run, const char *fmt, ...)
{
    if (atomic_flag_test_and_set(&run->error_set))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run->error, sizeof(run->error), fmt, ap);
    va_end(ap);
}

void tp_payload_fill(const tp_run_t *run, uint8_t *out)
{
    static const char filler[] = "lanesched throughput payload ";
    for (size_t i = TP_HEADER_LEN; i < run->o->payload_bytes; i++)
        out[i] = (uint8_t)filler[i % (sizeof(filler) - 1)];
}

void tp_payload_make(const tp_run_t *run, uint64_t idx, uint64_t sent_ns, uint8_t *out)
{
    tp_u64_put(out, run->nonce);
    tp_u64_put(out + 8, idx);
    tp_u64_put(out + 16, sent_ns);
}

void tp_items_make(const tp_run_t *run, uint64_t first, size_t n, uint64_t sent_ns,
                   codec_work_item_t *items, char (*ids)[TP_ID_MAX], uint8_t *payloads)
{
    const tp_opts_t *o = run->o;
    for (size_t j = 0; j < n; j++) {
        uint8_t *pl = payloads + j * o->payload_bytes;
        int len = snprintf(ids[j], TP_ID_MAX, "%s-%" PRIu64, run->tag, first + j);
        tp_item_t it;
        tp_workload_item(run->wl, run->items, first + j, &it);
        tp_payload_make(run, first + j, sent_ns, pl);
        items[j] = (codec_work_item_t){.id = {(const uint8_t *)ids[j], (size_t)len},
                                       .model = run->wl->names[it.model],
                                       .has_signature = true,
                                       .signature = it.signature,
                                       .tokens = it.tokens,
                                       .payload = {pl, o->payload_bytes}};
    }
}

uint64_t tp_confirmed_count(tp_run_t *run)
{
    return atomic_load(&run->confirmed) + atomic_load(&run->failed);
}

int tp_payload_read(tp_run_t *run, const void *data, size_t len, uint64_t *idx)
{
    const uint8_t *p = data;
    if (p == NULL || len < TP_HEADER_LEN || tp_u64_get(p) != run->nonce ||
        tp_u64_get(p + 8) >= run->n) {
        atomic_fetch_add(&run->foreign, 1);
        return 0;
    }
    *idx = tp_u64_get(p + 8);
    return 1;
}

void tp_consumed_note(tp_run_t *run, uint64_t idx)
{
    if (atomic_fetch_add(&run->consumed[idx], 1) == 0)
        atomic_fetch_add(&run->consumed_items, 1);
    else
        atomic_fetch_add(&run->redelivered, 1);
    atomic_store(&run->last_consume_ns, clock_mono_ns());
}

void tp_acked_note(tp_run_t *run, uint64_t n)
{
    atomic_fetch_add(&run->acked_items, n);
    atomic_store(&run->last_ack_ns, clock_mono_ns());
}

void tp_confirmed_note(tp_run_t *run, uint64_t items, uint64_t lat_ns)
{
    uint64_t k = atomic_fetch_add(&run->n_lat, 1);
    if (k < run->cap_lat)
        run->lat_ns[k] = lat_ns;
    atomic_fetch_add(&run->confirmed, items);
    atomic_store(&run->last_confirm_ns, clock_mono_ns());
}

void tp_share(const tp_run_t *run, uint32_t phase, uint32_t p, uint32_t producers, uint64_t *first,
              uint64_t *end)
{
    uint64_t n = run->items, base = phase == TP_E2E ? n : 0, b = run->o->batch;
    uint64_t chunks = (n + b - 1) / b; /* invariant 5 */
    uint64_t c0 = chunks * p / producers, c1 = chunks * (p + 1) / producers;
    *first = base + c0 * b;
    *end = base + (c1 * b < n ? c1 * b : n);
    if (*first > *end)
        *first = *end;
}

/* ---- /proc (invariant 3) --------------------------------------------------------------------- */

static uint64_t tp_status_field(const char *path, const char *key)
{
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(key);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, n) == 0)
            v += strtoull(line + n, NULL, 10);
    }
    fclose(f);
    return v;
}

void tp_proc_read(int pid, tp_proc_t *out)
{
    char path[96], buf[1024];
    memset(out, 0, sizeof(*out));
    int self = pid == 0;
    if (self)
        pid = (int)getpid();
    if (pid < 0)
        return;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    size_t got = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[got] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces: fields count from its end */
    unsigned long long utime = 0, stime = 0;
    if (p != NULL &&
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2)
        out->cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *dir = opendir(path);
    if (dir == NULL)
        return;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char status[128];
        snprintf(status, sizeof(status), "/proc/%d/task/%.20s/status", pid, e->d_name);
        uint64_t vol = tp_status_field(status, "voluntary_ctxt_switches:");
        out->ctxsw_vol += vol;
        out->ctxsw += vol + tp_status_field(status, "nonvoluntary_ctxt_switches:");
    }
    closedir(dir);
    snprintf(path, sizeof(path), "/proc/%d/io", pid);
    out->syscalls = tp_status_field(path, "syscr:") + tp_status_field(path, "syscw:");
}

long tp_anon_kb(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    return pid > 0 ? (long)tp_status_field(path, "RssAnon:") : -1;
}

/* ---- a phase (invariant 4) ------------------------------------------------------------------- */

static void tp_progress(const char *label, const char *phase, double t, double rate, uint64_t done,
                        uint64_t target, bool end)
{
    static uint64_t last_plain_ns;
    bool tty = isatty(STDOUT_FILENO);
    uint64_t now = clock_mono_ns();
    if (!tty && !end && now - last_plain_ns < 5000000000ull)
        return;
    last_plain_ns = now;
    printf("%s[%s] %-8s %6.1fs  %9.0f items/s  %" PRIu64 "/%" PRIu64 "%s", tty ? "\r\033[K" : "",
           label, phase, t, rate, done, target, tty && !end ? "" : "\n");
    fflush(stdout);
}

bool tp_phase_watch(tp_run_t *run, const char *label, const char *phase_name, uint64_t target,
                    tp_count_fn count, int daemon_pid, uint64_t t0_ns, tp_phase_result_t *r)
{
    tp_proc_t d0, s0, c0, d1, s1, c1;
    tp_proc_read(daemon_pid > 0 ? daemon_pid : -1, &d0);
    tp_proc_read(net_server_pid() > 0 ? net_server_pid() : -1, &s0);
    tp_proc_read(0, &c0);
    bool lost0 = true, lost1 = true;
    uint64_t f0 = tp_files_created(run->files, &lost0);
    uint64_t b0 = atomic_load(&run->batches);
    uint64_t last = count(run), last_change = t0_ns, prev = last, prev_ns = t0_ns;
    uint64_t limit = t0_ns + (uint64_t)(run->o->phase_timeout_s * 1e9);
    bool done = false;
    for (;;) {
        net_sleep_ms(TP_SAMPLE_MS);
        uint64_t now = clock_mono_ns(), c = count(run);
        if (c >= target) {
            done = true;
            break;
        }
        if (c != last) {
            last = c;
            last_change = now;
        }
        if (now - prev_ns >= 1000000000ull) {
            tp_progress(label, phase_name, (double)(now - t0_ns) / 1e9,
                        (double)(c - prev) * 1e9 / (double)(now - prev_ns), c, target, false);
            prev = c;
            prev_ns = now;
        }
        if (now - last_change > (uint64_t)TP_PHASE_STALL_S * 1000000000ull) {
            tp_run_error(run, "%s: no progress for %d s at %" PRIu64 " of %" PRIu64, phase_name,
                         TP_PHASE_STALL_S, c, target);
            break;
        }
        if (now > limit) {
            tp_run_error(run,
                         "%s: not done after --phase-timeout %.0f s (%" PRIu64 " of %" PRIu64 ")",
                         phase_name, run->o->phase_timeout_s, c, target);
            break;
        }
        if (net_stopping(NULL) || atomic_load(&run->stop) ||
            (daemon_pid > 0 && net_daemon_exited())) {
            tp_run_error(run, "%s: interrupted%s", phase_name,
                         daemon_pid > 0 && net_daemon_exited() ? " (lanesched exited)" : "");
            break;
        }
    }
    tp_proc_read(daemon_pid > 0 ? daemon_pid : -1, &d1);
    tp_proc_read(net_server_pid() > 0 ? net_server_pid() : -1, &s1);
    tp_proc_read(0, &c1);
    uint64_t f1 = tp_files_created(run->files, &lost1);
    r->ran = done;
    r->have_files = !lost0 && !lost1;
    r->files_created = f1 - f0;
    r->batches = atomic_load(&run->batches) - b0;
    r->daemon_syscalls = d1.syscalls - d0.syscalls;
    r->server_syscalls = s1.syscalls - s0.syscalls;
    r->daemon_cpu_s = d1.cpu_s - d0.cpu_s;
    r->server_cpu_s = s1.cpu_s - s0.cpu_s;
    r->client_cpu_s = c1.cpu_s - c0.cpu_s;
    r->daemon_ctxsw = d1.ctxsw - d0.ctxsw;
    r->server_ctxsw = s1.ctxsw - s0.ctxsw;
    r->daemon_ctxsw_vol = d1.ctxsw_vol - d0.ctxsw_vol;
    r->server_ctxsw_vol = s1.ctxsw_vol - s0.ctxsw_vol;
    return done;
}

static int tp_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void tp_latency_take(tp_run_t *run, tp_phase_result_t *r)
{
    uint64_t n = atomic_load(&run->n_lat);
    if (n > run->cap_lat)
        n = run->cap_lat;
    if (n > 0) {
        qsort(run->lat_ns, n, sizeof(*run->lat_ns), tp_u64_cmp);
        r->lat_p50_ms = (double)run->lat_ns[(n - 1) / 2] / 1e6;
        r->lat_p99_ms = (double)run->lat_ns[(n - 1) * 99 / 100] / 1e6;
        r->lat_max_ms = (double)run->lat_ns[n - 1] / 1e6;
    }
    atomic_store(&run->n_lat, 0);
}

void tp_run_tally(tp_run_t *run, tp_result_t *res)
{
    res->lost = res->duplicated = 0;
    /* a grid cell sends the end-to-end phase's items alone */
    for (uint64_t i = run->e2e_only ? run->items : 0; i < run->n; i++) {
        uint8_t k = atomic_load(&run->consumed[i]);
        res->lost += k == 0;
        res->duplicated += k > 1;
    }
    res->failed = atomic_load(&run->failed);
    res->foreign = atomic_load(&run->foreign);
    res->contract = atomic_load(&run->contract);
}

bool tp_result_clean(const tp_result_t *res)
{
    bool lanes = strcmp(res->system, "lanesched") == 0;
    return res->ran && res->lost == 0 && res->duplicated == 0 && res->failed == 0 &&
           res->contract == 0 && (!lanes || (res->have_tokens && res->token_difference == 0));
}
