/*
 * net_session.c - what `live` and `baseline` do around their runs: parse the flags, load the
 * trace (generated from a preset or read from a file, indexed per model), start the children,
 * print the header; after the runs, the items/s ratios, the verdict line, the JSON file, and the
 * cleanup. The modes themselves (live.c, baseline.c) only run systems and add their results.
 *
 * Invariants:
 *  1. Every run of a session replays the same trace with the same options, so their figures and
 *     the items/s ratio compare like with like.
 *  2. Exit status: 0 every run drained with a token difference of 0; 1 a run lost tokens, did
 *     not drain or failed items; 2 usage or setup error; 130 interrupted by a signal.
 *  3. Whatever part of the setup succeeded is undone by net_session_close, on every path.
 */
#include "net.h"

#include <inttypes.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- trace ----------------------------------------------------------------------------------- */

static void net_trace_free(net_trace_t *t)
{
    if (t->by_model != NULL)
        for (uint32_t m = 0; m < t->cfg.models; m++)
            free(t->by_model[m]);
    free(t->by_model);
    free(t->n_by_model);
    free(t->items);
    memset(t, 0, sizeof(*t));
}

static int net_trace_load(const net_opts_t *o, net_trace_t *t, char *err, size_t errlen)
{
    int rc = -1;
    memset(t, 0, sizeof(*t));
    if (o->trace_in != NULL) {
        char why[400] = "";
        if (wl_trace_read(o->trace_in, &t->cfg, &t->items, &t->n_items, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "--trace-in %s", why);
            goto out;
        }
    } else {
        if (wl_preset(o->preset, o->seed, &t->cfg) != 0) {
            snprintf(err, errlen, "unknown preset \"%s\" (steady, bursty, churn, sustained)",
                     o->preset);
            goto out;
        }
        if (o->duration_s > 0)
            t->cfg.duration_s = o->duration_s;
        if (wl_generate(&t->cfg, &t->items, &t->n_items) != 0) {
            snprintf(err, errlen, "cannot generate the \"%s\" trace", o->preset);
            goto out;
        }
    }
    if (t->n_items == 0) {
        snprintf(err, errlen, "the trace has no items");
        goto out;
    }
    if (o->trace_out != NULL && wl_trace_write(o->trace_out, &t->cfg, t->items, t->n_items) != 0) {
        snprintf(err, errlen, "%s: cannot write the trace", o->trace_out);
        goto out;
    }
    for (size_t i = 0; i < t->n_items; i++)
        t->tokens += t->items[i].tokens;
    snprintf(err, errlen, "out of memory");
    t->by_model = calloc(t->cfg.models, sizeof(*t->by_model));
    t->n_by_model = calloc(t->cfg.models, sizeof(*t->n_by_model));
    if (t->by_model == NULL || t->n_by_model == NULL)
        goto out;
    for (size_t i = 0; i < t->n_items; i++) /* model < cfg.models: wl_generate, wl_trace_read */
        t->n_by_model[t->items[i].model]++;
    for (uint32_t m = 0; m < t->cfg.models; m++) {
        if ((t->by_model[m] = malloc((t->n_by_model[m] + 1) * sizeof(uint32_t))) == NULL)
            goto out;
        t->n_by_model[m] = 0;
    }
    for (size_t i = 0; i < t->n_items; i++) {
        uint32_t m = t->items[i].model;
        t->by_model[m][t->n_by_model[m]++] = (uint32_t)i;
    }
    err[0] = '\0';
    rc = 0;
out:
    if (rc != 0)
        net_trace_free(t);
    return rc;
}

/* ---- the session ------------------------------------------------------------------------------
 */

bool net_session_open(net_session_t *s, int argc, char **argv, bool baseline)
{
    memset(s, 0, sizeof(*s));
    s->rc = 2;
    int parsed =
        net_args_parse(argc, argv, baseline, &s->opts, s->lanesched_bin, sizeof(s->lanesched_bin));
    if (parsed != 0) {
        s->rc = parsed > 0 ? 0 : 2;
        return false;
    }
    size_t at = (size_t)snprintf(s->command, sizeof(s->command), "lanesched-bench");
    for (int i = 0; i < argc && at < sizeof(s->command); i++)
        at += (size_t)snprintf(s->command + at, sizeof(s->command) - at, " %s", argv[i]);
    if (net_trace_load(&s->opts, &s->trace, s->err, sizeof(s->err)) != 0)
        return false;
    s->env = true; /* net_env_close undoes whatever part of net_env_open succeeded */
    if (net_env_open(&s->opts, s->err, sizeof(s->err)) != 0)
        return false;

    const net_opts_t *o = &s->opts;
    const net_trace_t *t = &s->trace;
    printf("%s\n", s->command);
    printf("trace: %s, seed %" PRIu64 ", %.1f s at %.1f items/s: %zu items, %" PRIu64
           " tokens, %" PRIu32 " models\n",
           t->cfg.preset, t->cfg.seed, t->cfg.duration_s, t->cfg.rate, t->n_items, t->tokens,
           t->cfg.models);
    printf("nats: %s%s; %" PRIu32 " workers per model (max_batch_size %" PRIu32
           ", max_batch_tokens %" PRIu32 ", %.0f ns per padded token + %.1f ms per batch, LRU "
           "of %" PRIu32 " shapes); %s, time scale %g, %" PRIu32 " items per submit\n",
           net_url(), o->url != NULL ? " (given)" : " (started by the bench, JetStream on)",
           o->workers, o->gpu.max_batch_size, o->gpu.max_batch_tokens, o->gpu.ns_per_padded_token,
           (double)o->gpu.batch_fixed_ns / 1e6, o->gpu.cache_shapes,
           o->no_pace ? "unpaced" : "paced by the trace", o->time_scale, o->batch);
    fflush(stdout);
    return true;
}

void net_session_result_add(net_session_t *s, const net_result_t *r)
{
    net_result_print(r, &s->trace, &s->opts);
    if (s->n_results < NET_RESULTS_MAX)
        s->results[s->n_results++] = *r;
}

void net_session_report(net_session_t *s)
{
    const net_result_t *res = s->results;
    size_t n_res = s->n_results;
    bool ok = n_res > 0;
    for (size_t i = 0; i < n_res; i++)
        ok &= net_result_ok(&res[i]);
    const net_result_t *js = NULL;
    for (size_t i = 0; i < n_res; i++)
        if (strcmp(res[i].system, "jetstream") == 0 && res[i].ran && res[i].items_per_s > 0)
            js = &res[i];
    /* The figures that decide, run by run: the simulated workers' GPU busy time and
     * the queue wait, then what the GPU saw (items per batch, waste, hit rate). */
    printf("\n== the figures that decide, per run (same trace, same simulated workers)\n");
    printf("%-28s %9s %8s %10s %10s %10s %8s %7s\n", "run", "gpu.s", "items/b", "wait.p50",
           "wait.p99", "wait.max", "waste%", "hit%");
    for (size_t i = 0; i < n_res; i++) {
        const net_result_t *r = &res[i];
        if (!r->ran)
            continue;
        char name[64];
        snprintf(name, sizeof(name), "%s %s%s%s",
                 strcmp(r->system, "jetstream") == 0 ? "jetstream" : "lanesched", r->durability,
                 r->policy[0] ? " " : "", r->policy);
        printf("%-28s %9.2f %8.2f %8.1fms %8.1fms %8.1fms %8.2f %7.2f\n", name,
               (double)r->tally.busy_ns / 1e9,
               r->tally.batches ? (double)r->tally.items / (double)r->tally.batches : 0.0,
               r->wait_p50_ms, r->wait_p99_ms, r->wait_max_ms, r->waste_pct, r->hit_pct);
    }
    if (js != NULL && n_res > 1) {
        printf("\n== end-to-end items/s, lanesched / JetStream (same trace, same workers; "
               "JetStream acks are fire-and-forget)\n");
        for (size_t i = 0; i < n_res; i++)
            if (strcmp(res[i].system, "lanesched") == 0 && res[i].ran)
                printf("%-9s %-11s %10.1f / %.1f = %.3f\n", res[i].durability, res[i].policy,
                       res[i].items_per_s, js->items_per_s, res[i].items_per_s / js->items_per_s);
    }
    printf("\n%s\n", net_stopping(NULL) ? "interrupted: the figures above are partial"
                     : ok
                         ? "ok: every run drained, token difference 0"
                         : "FAILED: a run lost tokens, did not drain, failed items or did not run");
    fflush(stdout);
    if (s->opts.json_path != NULL &&
        net_result_json_write(s->opts.json_path, s->command, &s->opts, &s->trace, net_url(), res,
                              n_res, ok) != 0)
        fprintf(stderr, "lanesched-bench: cannot write %s\n", s->opts.json_path);
    s->rc = net_stopping(NULL) ? 130 : ok ? 0 : 1;
}

int net_session_close(net_session_t *s)
{
    if (s->err[0] != '\0')
        fprintf(stderr, "lanesched-bench: %s\n", s->err); /* rc is still 2 */
    if (s->env) {
        net_env_close();
        nats_CloseAndWait(2000);
    }
    net_trace_free(&s->trace);
    return s->rc;
}
