/*
 * report.c - the benchmark's result lines: per durability level (appends, tombstones) and per
 * timed open (recovery), as text rows or JSON members, and the rate arithmetic they share.
 *
 * Invariants:
 *   1. Every ratio is store over baseline throughput (1.0 = as fast as the baseline), the
 *      baseline's time over the store's; a zero time gives 0, never a division by zero.
 *   2. The text rows and the JSON members print the same figures from the same fields.
 *
 * Rejected: one generic row printer. The rows differ by phase (the tombstone rows have no MB/s
 * column); a format string per row keeps each row's columns readable where it is printed.
 */
#include "tools/storebench/storebench.h"

#include <inttypes.h>
#include <stdio.h>

double report_per_sec(uint64_t n, uint64_t ns)
{
    return ns ? (double)n * 1e9 / (double)ns : 0.0;
}

double report_ratio(uint64_t num_ns, uint64_t den_ns)
{
    return den_ns ? (double)num_ns / (double)den_ns : 0.0;
}

void report_level_text(const level_t *lv, uint64_t entry_size)
{
    uint64_t bytes = lv->n * entry_size;
    printf("  %-7s store      %8zu %14.0f %10.1f %10.3f\n", lv->name, lv->n,
           report_per_sec(lv->n, lv->store.append_ns),
           report_per_sec(bytes, lv->store.append_ns) / 1e6,
           report_ratio(lv->base.append_ns, lv->store.append_ns));
    printf("  %-7s baseline   %8zu %14.0f %10.1f\n", "", lv->n,
           report_per_sec(lv->n, lv->base.append_ns),
           report_per_sec(bytes, lv->base.append_ns) / 1e6);
}

void report_tomb_text(const level_t *lv)
{
    printf("  %-7s store      %8zu %14.0f %10s %10.3f\n", lv->name, lv->n,
           report_per_sec(lv->n, lv->store.tomb_ns), "",
           report_ratio(lv->base.tomb_ns, lv->store.tomb_ns));
    printf("  %-7s baseline   %8zu %14.0f\n", "", lv->n, report_per_sec(lv->n, lv->base.tomb_ns));
}

void report_open_text(const char *what, const recovery_t *r, const recovery_bench_t *rb)
{
    uint64_t scanned = r->live + r->tombstoned;
    printf("  %-19s %9" PRIu64 " live + %8" PRIu64 " tombstoned in %" PRIu64
           " segments: %.1f ms (recovery report), %.1f ms wall\n"
           "  %-19s %.0f entries/s (report), %.0f entries/s (wall), %.1f MB/s of segment files; "
           "store/baseline %.3f\n",
           what, r->live, r->tombstoned, r->segments, (double)r->elapsed_ns / 1e6,
           (double)r->wall_ns / 1e6, "", report_per_sec(scanned, r->elapsed_ns),
           report_per_sec(scanned, r->wall_ns), report_per_sec(rb->segment_bytes, r->wall_ns) / 1e6,
           report_ratio(rb->read_ns, r->wall_ns));
    if (r->one_wall_ns != UINT64_MAX)
        printf("  %-19s one recovery thread: %.1f ms (recovery report), %.0f entries/s; "
               "these opens over one thread %.2fx\n",
               "", (double)r->one_elapsed_ns / 1e6, report_per_sec(scanned, r->one_elapsed_ns),
               report_ratio(r->one_elapsed_ns, r->elapsed_ns));
}

void report_level_json(const level_t *lv, uint64_t entry_size, int last)
{
    uint64_t bytes = lv->n * entry_size;
    printf("\"%s\":{\"items\":%zu,"
           "\"append\":{\"store_items_per_s\":%.0f,\"store_mb_per_s\":%.2f,"
           "\"baseline_items_per_s\":%.0f,\"baseline_mb_per_s\":%.2f,\"store_over_baseline\":%.4f},"
           "\"tombstone\":{\"store_per_s\":%.0f,\"baseline_per_s\":%.0f,"
           "\"store_over_baseline\":%.4f}}%s",
           lv->name, lv->n, report_per_sec(lv->n, lv->store.append_ns),
           report_per_sec(bytes, lv->store.append_ns) / 1e6,
           report_per_sec(lv->n, lv->base.append_ns),
           report_per_sec(bytes, lv->base.append_ns) / 1e6,
           report_ratio(lv->base.append_ns, lv->store.append_ns),
           report_per_sec(lv->n, lv->store.tomb_ns), report_per_sec(lv->n, lv->base.tomb_ns),
           report_ratio(lv->base.tomb_ns, lv->store.tomb_ns), last ? "" : ",");
}

void report_open_json(const char *name, const recovery_t *r, const recovery_bench_t *rb)
{
    uint64_t scanned = r->live + r->tombstoned;
    printf("\"%s\":{\"live\":%" PRIu64 ",\"tombstoned\":%" PRIu64 ",\"segments\":%" PRIu64
           ",\"elapsed_ns\":%" PRIu64 ",\"wall_ns\":%" PRIu64
           ",\"entries_per_s\":%.0f,\"entries_per_s_wall\":%.0f,"
           "\"store_over_baseline\":%.4f,\"heap_bytes_per_queued_item\":%.2f",
           name, r->live, r->tombstoned, r->segments, r->elapsed_ns, r->wall_ns,
           report_per_sec(scanned, r->elapsed_ns), report_per_sec(scanned, r->wall_ns),
           report_ratio(rb->read_ns, r->wall_ns),
           r->queued ? (double)r->heap_delta / (double)r->queued : 0.0);
    if (r->one_wall_ns != UINT64_MAX)
        printf(",\"one_thread_elapsed_ns\":%" PRIu64 ",\"one_thread_entries_per_s\":%.0f,"
               "\"over_one_thread\":%.4f",
               r->one_elapsed_ns, report_per_sec(scanned, r->one_elapsed_ns),
               report_ratio(r->one_elapsed_ns, r->elapsed_ns));
    printf("}");
}
