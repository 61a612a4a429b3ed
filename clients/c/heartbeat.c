/*
 * heartbeat.c - a consumer's heartbeat thread: every heartbeat_ms it publishes a Heartbeat on the
 * registration's heartbeat subject naming the in-progress set, which keeps the consumer alive and
 * extends the named batches' ack deadlines while the caller's thread works.
 *
 * Owns: the thread (started by lc_heartbeat_start, joined by lc_heartbeat_stop) and, inside it, a
 * copy of the id list and of the subject for each beat.
 *
 * Invariants:
 *  1. The thread is joined (hb_stop under mu, signal, join) before Bye and before the consumer is
 *     freed; it never outlives the consumer's NATS objects (client_int.h, 4).
 *  2. It holds mu only to copy the ids and the subject and to count; the encode and the publish
 *     run without it (client_int.h, 3).
 *  3. A failed beat is counted in heartbeats_failed and the thread goes on: the next beat may
 *     succeed, and only the caller may decide to stop.
 *  4. The interval is read under mu at every beat, so a re-registration's new heartbeat_ms
 *     applies from the next beat on.
 *
 * Rejected alternatives:
 *  - Heartbeats sent from lc_batch_next / lc_ack_send in the caller's thread: a long GPU step
 *    would starve them and get a healthy consumer declared dead (subjects.md's consumer life
 *    cycle asks for a thread of its own for this reason).
 *  - Sleeping with nanosleep: Bye and close would wait up to a whole interval; a condition
 *    variable on the monotonic clock stops the thread at once and ignores wall-clock jumps.
 *  - One heartbeat thread per client for all its consumers: consumers register and leave on
 *    their own, each with its own interval; a per-consumer thread needs no registry.
 */
#include "clients/c/client_int.h"

#include "common/clock.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *lc_heartbeat_main(void *arg)
{
    lc_consumer_t *c = arg;
    uint64_t *ids = NULL;
    size_t cap = 0;
    char *subject = NULL;

    pthread_mutex_lock(&c->mu);
    while (!c->hb_stop) {
        uint64_t due = clock_mono_ns() + (uint64_t)c->hb_interval_ms * 1000000ull;
        struct timespec deadline = {.tv_sec = (time_t)(due / 1000000000ull),
                                    .tv_nsec = (long)(due % 1000000000ull)};
        int rc = 0; /* 0 = signalled or spurious: wait on; ETIMEDOUT (or an error): beat */
        while (!c->hb_stop && rc == 0)
            rc = pthread_cond_timedwait(&c->cond, &c->mu, &deadline);
        if (c->hb_stop)
            break;

        bool ok = true;
        size_t n = c->n_ip;
        if (n > cap) {
            uint64_t *grown = realloc(ids, n * sizeof(*ids));
            if (grown != NULL) {
                ids = grown;
                cap = n;
            } else {
                ok = false;
            }
        }
        for (size_t i = 0; ok && i < n; i++)
            ids[i] = c->ip[i].batch_id;
        free(subject);
        subject = strdup(c->reg.heartbeat_subject);
        ok = ok && subject != NULL;
        pthread_mutex_unlock(&c->mu);

        uint8_t *buf = NULL;
        size_t len = 0;
        if (ok) {
            codec_heartbeat_t hb = {.in_progress = n > 0 ? ids : NULL, .n_in_progress = n};
            ok = codec_encode_heartbeat(&hb, &buf, &len) == CODEC_OK && len <= INT_MAX &&
                 natsConnection_Publish(c->client->nc, subject, buf, (int)len) == NATS_OK;
        }
        free(buf);

        pthread_mutex_lock(&c->mu);
        if (ok)
            c->stats.heartbeats_sent++;
        else
            c->stats.heartbeats_failed++;
    }
    pthread_mutex_unlock(&c->mu);
    free(ids);
    free(subject);
    return NULL;
}

lc_status_t lc_heartbeat_start(lc_consumer_t *c, char *err)
{
    if (c->hb_running || c->config.no_heartbeat)
        return LC_OK;
    pthread_mutex_lock(&c->mu);
    c->hb_stop = false;
    pthread_mutex_unlock(&c->mu);
    int rc = pthread_create(&c->hb_thread, NULL, lc_heartbeat_main, c);
    if (rc != 0) {
        lc_errf(err, "heartbeat thread: %s", strerror(rc));
        return LC_ETHREAD;
    }
    c->hb_running = true;
    return LC_OK;
}

void lc_heartbeat_stop(lc_consumer_t *c)
{
    if (!c->hb_running)
        return;
    pthread_mutex_lock(&c->mu);
    c->hb_stop = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->hb_thread, NULL);
    c->hb_running = false;
}
