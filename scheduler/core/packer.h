/*
 * packer.h - the four-integer contract: how many items from the front of one lane fit a
 * consumer's batch, and what merging neighbouring lanes saves at a worker's cost (packer.c).
 * The second layer of the scheduling core; usable alone.
 */
#ifndef LANESCHED_PACKER_H
#define LANESCHED_PACKER_H

#include "scheduler/core/status.h"

#include <stddef.h>
#include <stdint.h>

/* pad_to is a multiple of this: engines pad to it anyway, so rounding costs nothing real. */
#define PACKER_PAD_MULTIPLE 8u

typedef struct {
    uint32_t max_batch_size;   /* items, > 0 */
    uint32_t max_batch_tokens; /* padded tokens per batch, > 0 */
    uint32_t max_input_tokens; /* not a filter: oversized items still go out (0 = none) */
} packer_contract_t;

typedef struct {
    size_t count;           /* items taken from the front, >= 1 when n >= 1 */
    uint32_t pad_to;        /* the batch's longest item rounded up to PACKER_PAD_MULTIPLE */
    uint64_t padded_tokens; /* count * pad_to */
    uint64_t real_tokens;
    int over_budget; /* one item alone exceeds max_batch_tokens; it goes out by itself */
} packer_result_t;

/* Packs from the front of `tokens` (arrival order, n >= 1). */
sched_status_t packer_fill(const packer_contract_t *contract, const uint32_t *tokens, size_t n,
                           packer_result_t *out /* out */);

/* What a worker pays for a batch: fixed_ns plus token_ns per padded token. */
typedef struct {
    double fixed_ns;
    double token_ns;
} packer_cost_t;

/* GPU time (ns) saved by taking a group of n_add items, whose own batch would pad to pad_add,
 * into a batch of n items padded to pad: the group's fixed cost minus the padding the merge
 * adds (packer.c). Positive: the merge pays. */
double packer_merge_saving(const packer_cost_t *cost, uint64_t n, uint32_t pad, uint64_t n_add,
                           uint32_t pad_add);

/* The longest input a contract says its worker runs: the longer of max_input_tokens (0: none
 * declared) and max_batch_tokens. What a client claims past it (an item's tokens, its prefix)
 * is work no worker of that contract does, and is priced at this at most. */
uint32_t packer_contract_runs(const packer_contract_t *contract);

/* The prefix a batch is priced with: its items' longest prefix_tokens, at most what the
 * contract's worker runs (packer_contract_runs). */
uint32_t packer_prefix_price(const packer_contract_t *contract, uint32_t prefix);

/* Round `tokens` up to PACKER_PAD_MULTIPLE. */
uint64_t packer_pad(uint64_t tokens);

#endif
