/*
 * report_json.c - the sim run as JSON (--json): every figure of every policy, the time series,
 * the workload and the workers. The keys policies[].policy, gpu_busy_ns, wait_p99_ns,
 * padding_waste_pct, shape_hit_rate_pct and batches are stable (other tools read them); keys
 * are added, never renamed.
 */
#include "report_int.h"

#include <inttypes.h>
#include <math.h>

void report_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* JSON has no NaN or infinity. */
void report_json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fprintf(f, "null");
}

static void report_json_result(FILE *f, const report_t *rep, const sim_result_t *r)
{
    fprintf(f, "    {\"policy\": ");
    report_json_str(f, sim_policy_name(r->policy));
    fprintf(f, ", \"ok\": %s, \"delay_ns\": %" PRIu64 ", \"budget_met\": %s, \"error\": ",
            r->ok ? "true" : "false", r->delay_ns,
            rep->sim->slo_ns == 0                ? "null"
            : r->wait_p99_ns <= rep->sim->slo_ns ? "true"
                                                 : "false");
    report_json_str(f, r->error);
    fprintf(f, ",\n     \"padding_waste_pct\": ");
    report_json_num(f, report_waste_pct(r));
    fprintf(f, ", \"shape_hit_rate_pct\": ");
    report_json_num(f, report_hit_pct(r));
    fprintf(f,
            ", \"batches\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
            ", \"cold_misses\": %" PRIu64 ", \"padded_tokens\": %" PRIu64
            ", \"real_tokens\": %" PRIu64 ",\n     \"queues_peak\": %" PRIu32 ", \"queues_mean\": ",
            r->batches, r->hits, r->misses, r->cold_misses, r->padded_tokens, r->real_tokens,
            r->queues_peak);
    report_json_num(f, r->queues_mean);
    fprintf(f,
            ", \"queues_peak_one_shape\": %" PRIu32 ", \"opened\": %" PRIu64
            ", \"reuses\": %" PRIu64 ", \"opened_per_s\": ",
            r->queues_max_peak, r->opened, r->reuses);
    report_json_num(f, report_per_s(r->opened, r->arrival_s));
    fprintf(f, ", \"reuses_per_s\": ");
    report_json_num(f, report_per_s(r->reuses, r->arrival_s));
    fprintf(f,
            ",\n     \"force_fits\": %" PRIu64 ", \"quiesced\": %" PRIu64
            ", \"shape_switches\": %" PRIu64 ", \"starvation_preemptions\": %" PRIu64
            ", \"holds\": %" PRIu64 ", \"shapes\": %" PRIu32 ", \"shapes_at_lane_budget\": %" PRIu32
            ",\n     \"wait_p50_ns\": %" PRIu64 ", \"wait_p99_ns\": %" PRIu64
            ", \"wait_max_ns\": %" PRIu64 ", \"wait_mean_ns\": ",
            r->force_fits, r->quiesced, r->shape_switches, r->preemptions, r->holds, r->shapes,
            r->shapes_full, r->wait_p50_ns, r->wait_p99_ns, r->wait_max_ns);
    report_json_num(f, r->wait_mean_ns);
    fprintf(f, ", \"batches_per_gpu_s\": ");
    report_json_num(f, report_batches_per_gpu_s(r));
    fprintf(f, ", \"items_per_batch\": ");
    report_json_num(f, report_items_per_batch(r));
    fprintf(f, ", \"gpu_busy_s\": ");
    report_json_num(f, (double)r->busy_ns / 1e9);
    fprintf(f,
            ", \"prefix_tokens\": %" PRIu64 ", \"prefix_saved_tokens\": %" PRIu64
            ", \"cache_saved_gpu_s\": ",
            r->prefix_tokens, r->prefix_saved_tokens);
    report_json_num(f, report_cache_saved_ns(rep, r) / 1e9);
    uint64_t reuses = 0, opened = 0;
    double ratio = report_reuse_ratio(r, &reuses, &opened);
    fprintf(f,
            ",\n     \"second_half_reuses\": %" PRIu64 ", \"second_half_opened\": %" PRIu64
            ", \"second_half_reuses_per_new\": ",
            reuses, opened);
    report_json_num(f, ratio >= 0.0 ? ratio : NAN);
    fprintf(f,
            ", \"merged_batches\": %" PRIu64 ", \"merged_lanes\": %" PRIu64
            ", \"cost_known\": %s, \"cost_estimated\": %s, \"cost_fixed_ns\": ",
            r->merged_batches, r->merged_lanes, r->cost_known ? "true" : "false",
            r->cost_estimated ? "true" : "false");
    report_json_num(f, r->cost_fixed_ns);
    fprintf(f, ", \"cost_token_ns\": ");
    report_json_num(f, r->cost_token_ns);
    fprintf(f,
            ", \"gpu_busy_ns\": %" PRIu64 ", \"arrival_s\": %.6g, \"end_ns\": %" PRIu64
            ",\n     \"items_in\": %" PRIu64 ", \"items_done\": %" PRIu64
            ", \"tokens_in\": %" PRIu64 ", \"tokens_done\": %" PRIu64
            ", \"tokens_difference\": %" PRId64 ", \"wall_s\": %.3f,\n",
            r->busy_ns, r->arrival_s, r->end_ns, r->items_in, r->items_done, r->tokens_in,
            r->tokens_done, report_token_diff(r), r->wall_s);
    fprintf(f, "     \"series\": {\"t_s\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%.6g", i ? "," : "", r->series[i].t_s);
    fprintf(f, "], \"queues\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu32, i ? "," : "", r->series[i].queues);
    fprintf(f, "], \"queues_one_shape\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu32, i ? "," : "", r->series[i].queues_max);
    fprintf(f, "], \"queued_items\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu32, i ? "," : "", r->series[i].queued_items);
    fprintf(f, "], \"padded\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].padded);
    fprintf(f, "], \"real\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].real);
    fprintf(f, "], \"batches\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].batches);
    fprintf(f, "], \"hits\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].hits);
    fprintf(f, "], \"opened\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].opened);
    fprintf(f, "], \"reuses\": [");
    for (size_t i = 0; i < r->n_series; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", r->series[i].reuses);
    fprintf(f, "]}}");
}

static void report_json_lanes(FILE *f, const char *key, const sim_result_t *r)
{
    fprintf(f, "    \"%s\": [", key);
    for (size_t i = 0; r != NULL && i < r->n_series; i++)
        fprintf(f, "%s[%.6g,%" PRIu32 "]", i ? "," : "", r->series[i].t_s, r->series[i].queues);
    fprintf(f, "]");
}

int report_json_write(const char *path, const report_t *rep)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    const wl_config_t *wl = rep->wl;
    const sim_config_t *sc = rep->sim;
    fprintf(f, "{\n  \"mode\": \"sim\",\n  \"command\": ");
    report_json_str(f, rep->command ? rep->command : "");
    fprintf(f, ",\n  \"workload\": {\"preset\": ");
    report_json_str(f, wl->preset);
    fprintf(f,
            ", \"seed\": %" PRIu64 ", \"models\": %" PRIu32 ", \"shapes_per_model\": %" PRIu32
            ", \"zipf_s\": %.6g, \"duration_s\": %.6g, \"rate\": %.6g, \"burst_factor\": %.6g"
            ", \"churn\": %.6g, \"max_tokens\": %" PRIu32 ", \"long_share\": %.6g"
            ", \"items\": %zu, \"tokens\": %" PRIu64 ", \"offered_load_pct\": %.4g",
            wl->seed, wl->models, wl->shapes_per_model, wl->zipf_s, wl->duration_s, wl->rate,
            wl->burst_factor, wl->churn, wl->max_tokens, wl->long_share, rep->n_items,
            report_total_tokens(rep), report_offered_load(rep, UINT32_MAX));
    fprintf(f, ", \"offered_load_pct_per_model\": [");
    for (uint32_t m = 0; m < wl->models; m++)
        fprintf(f, "%s%.4g", m ? "," : "", report_offered_load(rep, m));
    fprintf(f, "]},\n");
    fprintf(f,
            "  \"workers\": {\"per_model\": %" PRIu32 ", \"max_batch_size\": %" PRIu32
            ", \"max_batch_tokens\": %" PRIu32 ", \"max_input_tokens\": %" PRIu32
            ", \"batch_fixed_ns\": %" PRIu64 ", \"ns_per_padded_token\": %.6g"
            ", \"cache_shapes\": %" PRIu32 "},\n",
            sc->workers_per_model, sc->gpu.max_batch_size, sc->gpu.max_batch_tokens,
            sc->gpu.max_input_tokens, sc->gpu.batch_fixed_ns, sc->gpu.ns_per_padded_token,
            sc->gpu.cache_shapes);
    double credit, loaded;
    sched_merge_credit_resolve(sc->merge_credit, sc->merge_credit_loaded, &credit, &loaded);
    fprintf(
        f,
        "  \"starvation_ns\": %" PRIu64 ",\n  \"age_bound_ns\": %" PRIu64
        ",\n  \"merge_credit\": %.6g,\n  \"merge_credit_loaded\": %.6g,\n  \"hold_ns\": %" PRIu64
        ",\n  \"hold_burst\": %.6g,\n  \"cost_declared\": %s,\n  \"sample_ns\": %" PRIu64
        ",\n  \"slo_ns\": %" PRIu64 ",\n  \"policies\": [\n",
        sc->starvation_ns, sc->age_bound_ns, credit, loaded, sc->hold_ns,
        sched_hold_burst_resolve(sc->hold_burst), sc->declare_cost ? "true" : "false",
        sc->sample_ns, sc->slo_ns);
    for (size_t i = 0; i < rep->n_results; i++) {
        report_json_result(f, rep, &rep->results[i]);
        fprintf(f, "%s\n", i + 1 < rep->n_results ? "," : "");
    }
    fprintf(f, "  ],\n  \"lanes_in_use_over_time\": {\n");
    report_json_lanes(f, "lanes_128", report_find(rep, SIM_LANES_128));
    fprintf(f, ",\n");
    report_json_lanes(f, "lanes_2048", report_find(rep, SIM_LANES_SEED));
    fprintf(f, ",\n");
    report_json_lanes(f, "lanes", report_find(rep, SIM_LANES));
    fprintf(f, "\n  }\n}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -1;
    return 0;
}
