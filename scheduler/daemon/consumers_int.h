/*
 * consumers_int.h - private to consumers.c and its unit test: the registry's structs.
 */
#ifndef LANESCHED_DAEMON_CONSUMERS_INT_H
#define LANESCHED_DAEMON_CONSUMERS_INT_H

#include "common/map.h"
#include "scheduler/daemon/consumers.h"

typedef struct {
    char *reply; /* owned */
    uint32_t credits;
    uint64_t expires_ns;
} pull_t;

struct consumer {
    char id[CONSUMERS_ID_LEN + 1];     /* public: stats, metrics, logs; no authority */
    char secret[CONSUMERS_ID_LEN + 1]; /* the token of its subjects: its authority */
    char *name;                        /* owned */
    char *model;                       /* owned */
    packer_contract_t contract;
    uint64_t last_seen_ns;
    int dead;
    int silent_inbox; /* a Batch reached no subscriber since its last message (undelivered.c) */
    pull_t *pulls;    /* FIFO, owned */
    size_t n_pulls, cap_pulls;
    uint64_t batches, items;
    uint64_t last_signature; /* of the last batch dispatched; valid when batches != 0 */
    sched_worker_t *worker;  /* borrowed from the scheduler, which owns it; NULL once dead */
    struct model *model_rec; /* borrowed: the daemon's record of its model; NULL once dead */
};

struct consumers {
    map_t by_secret; /* (XXH64 pair of the secret) -> consumer_t */
    consumer_t **all;
    size_t n_all, cap_all;
};

#endif
