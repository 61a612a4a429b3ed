/*
 * guard.c - the shape guard: the last check before a batch leaves.
 *
 * Invariant: no batch whose items do not all carry the model's current shape ever reaches a
 * consumer. A mismatch means the lane/store bookkeeping is broken; the process aborts rather
 * than poison a GPU's prefix cache, because a restart recovers everything (nothing is lost:
 * the batch was never committed) while a poisoned cache silently serves wrong work.
 *
 * Rejected: dropping or re-queueing the bad items and carrying on. The bug that produced the
 * batch would keep producing them; failing loudly is the only way it gets found.
 */
#include "scheduler/core/sched.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

void sched_guard_check(const sched_batch_t *batch, uint64_t current)
{
    int bad = batch->signature != current;
    for (size_t i = 0; i < batch->n && !bad; i++)
        bad = batch->items_view[i].signature != current;
    if (!bad)
        return;
    fprintf(stderr,
            "lanesched: FATAL shape guard: batch %" PRIu64 " of model %s lane %" PRIu32
            " is not pure shape 0x%016" PRIx64 " (batch signature 0x%016" PRIx64 ")\n",
            batch->batch_id, batch->model_view ? batch->model_view : "?", batch->lane, current,
            batch->signature);
    for (size_t i = 0; i < batch->n; i++) {
        fprintf(stderr, "  item %zu: signature 0x%016" PRIx64 " tokens %" PRIu32 "\n", i,
                batch->items_view[i].signature, batch->items_view[i].tokens);
    }
    abort();
}
