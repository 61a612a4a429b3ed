/*
 * main.c - lanesched-chaos: flags, the campaign plan and its loop, the drain, the report.
 *
 * A campaign: nats-server and lanesched start; producers and consumers run; then the plan's
 * faults come one after another, each after a random stretch of load, in an order shuffled by
 * --seed: --kills daemon SIGKILL + restart cycles (every --damage-every-th one damages the data
 * directory before the restart), --nats-restarts nats-server SIGKILL + restart cycles, --stops
 * daemon SIGSTOP ... SIGCONT. A daemon that exits by itself meanwhile is started again and
 * counted (procs.c invariant 3). Then production stops, the queue drains and the history is
 * checked (history.c). Exit status: 0 when nothing acknowledged was lost (never delivered, and
 * not in the store either when the drain ran out of time), nothing unexpected or corrupt was
 * delivered; 1 otherwise; 2 for a usage or setup error.
 *
 * Invariants:
 *   1. Faults run on the main thread only (it owns the child processes), one at a time.
 *   2. The daemon is down (killed) whenever files are damaged.
 *   3. The same seed gives the same plan, damage and client choices (timing still varies).
 */
#include "tools/chaos/chaos.h"

#include "common/clock.h"
#include "common/rng.h"
#include "support/fs.h"
#include "support/spawn.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

uint64_t chaos_now_ms(void)
{
    return clock_mono_ns() / 1000000ull;
}

void chaos_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

natsConnection *chaos_connect(const char *url, const char *name)
{
    natsOptions *opts = NULL;
    natsConnection *nc = NULL;
    if (natsOptions_Create(&opts) != NATS_OK)
        return NULL;
    natsOptions_SetURL(opts, url);
    natsOptions_SetName(opts, name);
    natsOptions_SetTimeout(opts, 2000);
    natsOptions_SetAllowReconnect(opts, true);
    natsOptions_SetMaxReconnect(opts, -1);
    natsOptions_SetReconnectWait(opts, 100);
    natsOptions_SetRetryOnFailedConnect(opts, true, NULL, NULL);
    if (natsConnection_Connect(&nc, opts) != NATS_OK)
        nc = NULL;
    natsOptions_Destroy(opts);
    return nc;
}

void chaos_disconnect(natsConnection *nc, natsSubscription *sub)
{
    if (nc != NULL)
        natsConnection_Close(nc);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
}

/* ---- flags ------------------------------------------------------------------------------------
 */

static void chaos_usage(FILE *f)
{
    fprintf(f,
            "usage: lanesched-chaos --lanesched PATH [flags]\n"
            "  --work DIR            data, logs and the lost-item list (default: a new /tmp dir)\n"
            "  --nats PATH           nats-server (default: on PATH)\n"
            "  --kills N             daemon SIGKILL + restart cycles (default 20)\n"
            "  --nats-restarts N     nats-server SIGKILL + restart cycles (default 2)\n"
            "  --stops N             daemon SIGSTOP/SIGCONT cycles (default 2)\n"
            "  --damage-every N      every Nth kill damages the files first (default 5, 0 off)\n"
            "  --damage LIST         tail,index-delete,index-empty,index-stale,flip (default the\n"
            "                        first three: none may cost an acknowledged item)\n"
            "  --load-ms MIN,MAX     load between two faults (default 200,1000)\n"
            "  --stop-ms MIN,MAX     length of a SIGSTOP (default 1000,3000)\n"
            "  --producers N         (default 4)   --consumers N (default 3)\n"
            "  --rate ITEMS/S        over every producer (default 4000; 0 = unpaced)\n"
            "  --batch N             items per Submit (default 50)\n"
            "  --chaos-pct P         %% of batches a consumer naks, drops or crashes on (def. 10)\n"
            "  --durability process|power (default process)\n"
            "  --segment-max-bytes N (default 65536)\n"
            "  --journal-file-bytes N  the daemon's journal files (default its own, 8 MiB;\n"
            "                        small ones make the store restate waiting segments)\n"
            "  --min-restatements N  FAIL unless the daemon restated at least N segments (a\n"
            "                        campaign meant to crash restating proves it ran; default 0)\n"
            "  --drain-s S           how long the final drain may take (default 180); what is\n"
            "                        left is looked for in the store (--require-drain: FAIL)\n"
            "  --seed N              (default 1)   --verbose\n"
            "  --flood               instead of a campaign, the hostile-client cases (flood.c)\n"
            "  --flood-stats-ms N    the longest a stats answer may take there (default 100)\n");
}

static int chaos_range(const char *v, uint32_t *lo, uint32_t *hi)
{
    unsigned a, b;
    if (sscanf(v, "%u,%u", &a, &b) != 2 || a > b)
        return -1;
    *lo = a;
    *hi = b;
    return 0;
}

static int chaos_flags(int argc, char **argv, chaos_opts_t *o)
{
    *o = (chaos_opts_t){.durability = "process",
                        .producers = 4,
                        .consumers = 3,
                        .rate = 4000,
                        .batch = 50,
                        .kills = 20,
                        .nats_restarts = 2,
                        .stops = 2,
                        .damage_every = 5,
                        .load_min_ms = 200,
                        .load_max_ms = 1000,
                        .stop_min_ms = 1000,
                        .stop_max_ms = 3000,
                        .drain_s = 180,
                        .segment_max = 65536,
                        .chaos_pct = 10,
                        .flood_stats_ms = 100,
                        .seed = 1};
    snprintf(o->damage, sizeof(o->damage), "tail,index-delete,index-empty");
    static const struct option longopts[] = {{"lanesched", required_argument, NULL, 'L'},
                                             {"work", required_argument, NULL, 'w'},
                                             {"nats", required_argument, NULL, 'n'},
                                             {"kills", required_argument, NULL, 'k'},
                                             {"nats-restarts", required_argument, NULL, 'r'},
                                             {"stops", required_argument, NULL, 's'},
                                             {"damage-every", required_argument, NULL, 'e'},
                                             {"damage", required_argument, NULL, 'd'},
                                             {"load-ms", required_argument, NULL, 'l'},
                                             {"stop-ms", required_argument, NULL, 'S'},
                                             {"producers", required_argument, NULL, 'p'},
                                             {"consumers", required_argument, NULL, 'c'},
                                             {"rate", required_argument, NULL, 'R'},
                                             {"batch", required_argument, NULL, 'b'},
                                             {"chaos-pct", required_argument, NULL, 'C'},
                                             {"durability", required_argument, NULL, 'D'},
                                             {"segment-max-bytes", required_argument, NULL, 'M'},
                                             {"journal-file-bytes", required_argument, NULL, 'J'},
                                             {"min-restatements", required_argument, NULL, 'm'},
                                             {"drain-s", required_argument, NULL, 'T'},
                                             {"seed", required_argument, NULL, 'x'},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"flood", no_argument, NULL, 'F'},
                                             {"require-drain", no_argument, NULL, 'Q'},
                                             {"flood-stats-ms", required_argument, NULL, 'P'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", longopts, NULL)) != -1;) {
        uint32_t u = optarg != NULL ? (uint32_t)strtoul(optarg, NULL, 10) : 0;
        switch (ch) {
        case 'L':
            o->lanesched = optarg;
            break;
        case 'w':
            o->work = optarg;
            break;
        case 'n':
            o->nats = optarg;
            break;
        case 'k':
            o->kills = u;
            break;
        case 'r':
            o->nats_restarts = u;
            break;
        case 's':
            o->stops = u;
            break;
        case 'e':
            o->damage_every = u;
            break;
        case 'd':
            snprintf(o->damage, sizeof(o->damage), "%s", optarg);
            break;
        case 'l':
            if (chaos_range(optarg, &o->load_min_ms, &o->load_max_ms))
                return -1;
            break;
        case 'S':
            if (chaos_range(optarg, &o->stop_min_ms, &o->stop_max_ms))
                return -1;
            break;
        case 'p':
            o->producers = u;
            break;
        case 'c':
            o->consumers = u;
            break;
        case 'R':
            o->rate = u;
            break;
        case 'b':
            o->batch = u;
            break;
        case 'C':
            o->chaos_pct = u;
            break;
        case 'D':
            o->durability = optarg;
            break;
        case 'M':
            o->segment_max = u;
            break;
        case 'J':
            o->journal_bytes = u;
            break;
        case 'm':
            o->min_restated = u;
            break;
        case 'T':
            o->drain_s = u;
            break;
        case 'x':
            o->seed = strtoull(optarg, NULL, 10);
            break;
        case 'F':
            o->flood = 1;
            break;
        case 'Q':
            o->require_drain = 1;
            break;
        case 'P':
            o->flood_stats_ms = u;
            break;
        case 'v':
            o->verbose = 1;
            break;
        case 'h':
            chaos_usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    if (o->lanesched == NULL || o->producers == 0 || o->consumers == 0 || o->batch == 0 ||
        chaos_damage_parse(o->damage) != 0 ||
        (strcmp(o->durability, "process") != 0 && strcmp(o->durability, "power") != 0))
        return -1;
    return 0;
}

/* ---- the daemon's own figures ------------------------------------------------------------------
 */

/* Items the daemon holds, queued and in flight (summed over the shapes it lists: the campaign's
 * few shapes are always listed); -1 when stats do not answer. */
static int64_t chaos_daemon_held(const char *url)
{
    natsConnection *nc = chaos_connect(url, "chaos-stats");
    natsMsg *m = NULL;
    int64_t held = -1;
    if (nc != NULL && natsConnection_Request(&m, nc, "lanes.stats", "", 0, 2000) == NATS_OK) {
        json_t *doc = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
        json_t *models = json_object_get(doc, "models"), *mo, *sh;
        size_t i, k;
        held =
            json_integer_value(json_object_get(json_object_get(doc, "counters"), "pending_items"));
        json_array_foreach(models, i, mo)
        {
            json_array_foreach(json_object_get(mo, "shapes"), k, sh) held +=
                json_integer_value(json_object_get(sh, "queued_items"));
        }
        json_decref(doc);
    }
    natsMsg_Destroy(m);
    natsConnection_Destroy(nc);
    return held;
}

/* ---- the campaign ------------------------------------------------------------------------------
 */

enum { EV_KILL = 0, EV_NATS, EV_STOP };

static volatile sig_atomic_t chaos_interrupted;

static void chaos_on_signal(int sig)
{
    (void)sig;
    chaos_interrupted = 1;
}

static void chaos_threads_start(chaos_t *c, void *(*fn)(void *), uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        chaos_thread_arg_t *a = malloc(sizeof(*a));
        if (a == NULL)
            abort();
        *a = (chaos_thread_arg_t){c, i};
        if (pthread_create(&c->threads[c->n_threads++], NULL, fn, a) != 0)
            abort();
    }
}

/* One fault of the plan (invariants 1 and 2). 0, or -1 when the daemon cannot come back. */
static int chaos_fault(chaos_t *c, int kind, uint64_t *rnd, uint32_t *kills_done,
                       chaos_damage_t *damage)
{
    const chaos_opts_t *o = &c->o;
    if (kind == EV_KILL) {
        uint64_t t0 = chaos_now_ms();
        chaos_procs_daemon_kill(&c->procs);
        (*kills_done)++;
        if (strstr(o->damage, "index-stale") != NULL && *kills_done % 7 == 1)
            chaos_damage_snapshot(c->procs.data_dir, o->work);
        if (o->damage_every != 0 && *kills_done % o->damage_every == 0)
            chaos_damage_do(c->procs.data_dir, o->work, o->damage, rng_splitmix64(rnd), damage);
        if (chaos_procs_daemon_start(&c->procs, o) != 0)
            return -1;
        double ms = (double)(chaos_now_ms() - t0);
        c->procs.daemon_restarts++;
        c->procs.restart_ms_sum += ms;
        c->procs.restart_ms_max = ms > c->procs.restart_ms_max ? ms : c->procs.restart_ms_max;
    } else if (kind == EV_NATS) {
        chaos_procs_nats_kill(&c->procs);
        chaos_sleep_ms(100 + rng_splitmix64(rnd) % 400);
        if (chaos_procs_nats_start(&c->procs, o) != 0)
            return -1;
        c->procs.nats_restart_count++;
    } else {
        uint32_t span = o->stop_max_ms - o->stop_min_ms + 1;
        chaos_procs_daemon_stop_for(&c->procs, o->stop_min_ms + rng_splitmix64(rnd) % span);
    }
    return 0;
}

static int chaos_run(chaos_t *c)
{
    const chaos_opts_t *o = &c->o;
    uint64_t rnd = o->seed;
    uint32_t n_events = o->kills + o->nats_restarts + o->stops, kills_done = 0;
    int *plan = calloc(n_events + 1, sizeof(*plan));
    if (plan == NULL)
        return 2;
    for (uint32_t i = 0; i < n_events; i++)
        plan[i] = i < o->kills ? EV_KILL : i < o->kills + o->nats_restarts ? EV_NATS : EV_STOP;
    for (uint32_t i = n_events; i > 1; i--) { /* invariant 3: Fisher-Yates from the seed */
        uint32_t j = (uint32_t)(rng_splitmix64(&rnd) % i);
        int t = plan[i - 1];
        plan[i - 1] = plan[j];
        plan[j] = t;
    }
    if (chaos_procs_nats_start(&c->procs, o) != 0 || chaos_procs_daemon_start(&c->procs, o) != 0) {
        free(plan);
        return 2;
    }
    atomic_store(&c->producing, true);
    atomic_store(&c->running, true);
    c->threads = calloc(o->producers + o->consumers, sizeof(*c->threads));
    chaos_threads_start(c, chaos_consumer_main, o->consumers);
    size_t first_producer = c->n_threads;
    chaos_threads_start(c, chaos_producer_main, o->producers);
    chaos_damage_t damage = {0};
    uint64_t t_start = chaos_now_ms();
    int failed = 0;
    for (uint32_t i = 0; i < n_events && !chaos_interrupted && !failed; i++) {
        uint32_t span = o->load_max_ms - o->load_min_ms + 1;
        chaos_sleep_ms(o->load_min_ms + rng_splitmix64(&rnd) % span);
        failed = chaos_procs_daemon_check(&c->procs, o) != 0 ||
                 chaos_fault(c, plan[i], &rnd, &kills_done, &damage) != 0;
        if (o->verbose || (i + 1) % 50 == 0 || i + 1 == n_events) {
            chaos_verdict_t v;
            chaos_history_verdict(&c->hist, &v);
            fprintf(stderr,
                    "chaos: cycle %u/%u (%s) at %.0f s: %" PRIu64 " acknowledged, %" PRIu64
                    " delivered\n",
                    i + 1, n_events,
                    plan[i] == EV_KILL   ? "kill"
                    : plan[i] == EV_NATS ? "nats"
                                         : "stop",
                    (double)(chaos_now_ms() - t_start) / 1000.0, v.acked, v.deliveries);
        }
    }
    free(plan);
    atomic_store(&c->given_up, failed != 0);
    atomic_store(&c->producing, false);
    for (size_t i = first_producer; i < c->n_threads; i++)
        pthread_join(c->threads[i], NULL);
    fprintf(stderr, "chaos: production stopped after %.0f s; draining\n",
            (double)(chaos_now_ms() - t_start) / 1000.0);
    int drained = 0;
    for (uint64_t t0 = chaos_now_ms(); !failed && chaos_now_ms() - t0 < o->drain_s * 1000ull;) {
        if ((failed = chaos_procs_daemon_check(&c->procs, o) != 0))
            break;
        if (chaos_history_all_delivered(&c->hist) && chaos_daemon_held(c->procs.url) == 0) {
            drained = 1;
            break;
        }
        chaos_sleep_ms(500);
    }
    atomic_store(&c->running, false);
    for (size_t i = 0; i < first_producer; i++)
        pthread_join(c->threads[i], NULL);
    int term = failed ? -1 : chaos_procs_daemon_term(&c->procs);
    long restated = spawn_log_count(c->procs.daemon_log, "journal records restated");
    chaos_procs_cleanup(&c->procs);
    long stored = 0;
    if (!drained) /* what did not drain may still be queued: look in the store itself */
        stored = chaos_history_store_check(&c->hist, c->procs.data_dir);

    chaos_verdict_t v;
    chaos_history_verdict(&c->hist, &v);
    char lost_path[700];
    snprintf(lost_path, sizeof(lost_path), "%s/lost.txt", o->work);
    if (v.lost != 0)
        chaos_history_lost_write(&c->hist, lost_path);
    printf("lanesched-chaos: %u kills (%" PRIu64 " restarts, mean %.0f ms, max %.0f ms to ready), "
           "%" PRIu64 " exits by itself (started again), "
           "%" PRIu64 " nats-server restarts, %" PRIu64 " stops; damage: %" PRIu64
           " tails, %" PRIu64 " index deletes, %" PRIu64 " index empties, %" PRIu64
           " stale indexes, %" PRIu64 " bit flips\n",
           kills_done, c->procs.daemon_restarts,
           c->procs.daemon_restarts ? c->procs.restart_ms_sum / (double)c->procs.daemon_restarts
                                    : 0.0,
           c->procs.restart_ms_max, c->procs.daemon_self_exits, c->procs.nats_restart_count,
           c->procs.stops_done, damage.tails, damage.index_deletes, damage.index_empties,
           damage.index_stales, damage.flips);
    printf("lanesched-chaos: items sent %" PRIu64 ", acknowledged %" PRIu64 ", refused %" PRIu64
           "; deliveries %" PRIu64 "; consumers: %" PRIu64 " batches, %" PRIu64 " naks, %" PRIu64
           " drops, %" PRIu64 " crashes, %" PRIu64 " registrations; submits %" PRIu64 " (%" PRIu64
           " without reply)\n",
           v.sent, v.acked, v.refused, v.deliveries, (uint64_t)atomic_load(&c->batches),
           (uint64_t)atomic_load(&c->naks), (uint64_t)atomic_load(&c->drops),
           (uint64_t)atomic_load(&c->crashes), (uint64_t)atomic_load(&c->registers),
           (uint64_t)atomic_load(&c->submits), (uint64_t)atomic_load(&c->submit_timeouts));
    printf("lanesched-chaos: journal restatements %ld (the daemon's log, every run)\n", restated);
    printf("lanesched-chaos: lost %" PRIu64 ", duplicated %" PRIu64 ", unexpected %" PRIu64
           ", corrupt %" PRIu64 ", recovered %" PRIu64 "; drained %s; daemon exit %d%s\n",
           v.lost, v.duplicated, v.unexpected, v.corrupt, v.recovered, drained ? "yes" : "NO", term,
           v.lost ? " (lost ids in lost.txt)" : "");
    if (!drained)
        printf("lanesched-chaos: not drained in %u s: %" PRIu64
               " acknowledged items never delivered are still in the store (not lost)%s\n",
               o->drain_s, v.undrained, stored < 0 ? "; the store did not open" : "");
    if (restated < (long)o->min_restated)
        printf("lanesched-chaos: %ld journal restatements, --min-restatements asked for %u\n",
               restated, o->min_restated);
    int ok = !failed && v.lost == 0 && v.unexpected == 0 && v.corrupt == 0 && v.refused == 0 &&
             (drained || (stored >= 0 && !o->require_drain)) && restated >= (long)o->min_restated;
    printf("lanesched-chaos: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    chaos_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return 2;
    if (chaos_flags(argc, argv, &c->o) != 0) {
        chaos_usage(stderr);
        return 2;
    }
    char work[300];
    if (c->o.work == NULL) {
        snprintf(work, sizeof(work), "/tmp/lanes-chaos-XXXXXX");
        if (mkdtemp(work) == NULL)
            return 2;
        c->o.work = work;
    } else if (mkdir(c->o.work, 0755) != 0 && errno != EEXIST) {
        perror(c->o.work);
        return 2;
    }
    /* enough ids for the run at the paced rate, and a floor for short runs */
    uint64_t seconds = (uint64_t)(c->o.kills + c->o.nats_restarts + c->o.stops) *
                           (c->o.load_max_ms + 3000) / 1000 +
                       60;
    uint64_t cap = c->o.rate ? seconds * c->o.rate / c->o.producers + 10000 : 4000000;
    if (cap > 50000000)
        cap = 50000000;
    if (chaos_history_init(&c->hist, c->o.producers, (uint32_t)cap) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, chaos_on_signal);
    signal(SIGTERM, chaos_on_signal);
    if (nats_Open(-1) != NATS_OK)
        return 2;
    fprintf(stderr, "chaos: work directory %s, seed %" PRIu64 "\n", c->o.work, c->o.seed);
    int rc = c->o.flood ? chaos_flood(&c->o) : chaos_run(c);
    if (rc == 0 && c->o.work == work) /* a passing run in a directory of its own leaves nothing */
        fs_remove_tree(work);
    nats_Close();
    chaos_history_fini(&c->hist);
    free(c->threads);
    free(c);
    return rc;
}
