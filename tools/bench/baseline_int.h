/*
 * baseline_int.h - private to baseline.c, baseline_producer.c and baseline_worker.c: the
 * JetStream baseline's threads and the message every item travels in.
 */
#ifndef LANESCHED_BENCH_BASELINE_INT_H
#define LANESCHED_BENCH_BASELINE_INT_H

#include "net.h"

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>

#define BASE_STREAM      "BENCH_WQ"
#define BASE_PAYLOAD_LEN (NET_PAYLOAD_LEN + 12u) /* + signature (8) + tokens (4) */

/* A producer (one per model) or a worker thread; run, subject and durable are borrowed. */
typedef struct {
    net_run_t *run;
    uint32_t model;
    size_t index; /* worker index */
    const char *subject, *durable;
    pthread_t thread;
    bool started;
    char error[200];
    atomic_uint pub_errors; /* the ack handler's (another thread) */
    char pub_error[200];    /* written by the first pub error only */
} base_thread_t;

/* Thread mains (pthread_create), arg a base_thread_t. */
void *base_producer_main(void *arg); /* baseline_producer.c */
void *base_worker_main(void *arg);   /* baseline_worker.c */

void base_sleep_ms(uint64_t ms);
/* The first error only: "what: status (JetStream error jerr): nats.c's last error". */
void base_error_note(char *buf, size_t len, const char *what, natsStatus s, jsErrCode jerr);
/* A connection to run->url named `name`. */
natsStatus base_connect(const net_run_t *run, const char *name, natsConnection **nc /* out */);
/* The item's message (invariant 2 of baseline.c): BASE_PAYLOAD_LEN bytes into out. */
void base_item_encode(const net_run_t *run, uint32_t idx, uint64_t sent_ns, uint8_t *out);
/* 1 with the item's index, signature and tokens from the message, 0 for another run's. */
int base_item_decode(const net_run_t *run, const natsMsg *msg, uint32_t *idx, uint64_t *sig,
                     uint32_t *tokens);

#endif
