/*
 * status.h - the scheduling core's one status enum (sched_status_t), shared by its three layers
 * (lanes.h, packer.h, sched.h).
 */
#ifndef LANESCHED_SCHED_STATUS_H
#define LANESCHED_SCHED_STATUS_H

#include "common/status.h"

#define SCHED_STATUS_MAP(X)                                                 \
    X(SCHED_OK, "ok")                                                       \
    X(SCHED_ENOMEM, "out of memory")                                        \
    X(SCHED_EINVAL, "invalid argument")                                     \
    X(SCHED_EEMPTY, "no dispatchable work for this model")                  \
    X(SCHED_EUNKNOWN, "unknown or settled batch, or position out of range") \
    X(SCHED_ESTORE, "the store failed; see the store status")

STATUS_ENUM(sched_status_t, SCHED_STATUS_MAP, SCHED_STATUS_COUNT);

/* Returns a static string; never NULL. */
const char *sched_status_str(sched_status_t status);

#endif
