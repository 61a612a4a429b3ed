/*
 * packer.c - packs items from the front of one lane to a consumer's four-integer contract.
 *
 * Invariants:
 *   1. Items are taken in arrival order from the front; the rest (the overflow) stays where it
 *      is, in order, so the next consumer sees it first.
 *   2. pad_to is the longest taken item rounded up to PACKER_PAD_MULTIPLE, and
 *      count * pad_to <= max_batch_tokens, unless the first item alone exceeds the budget:
 *      a batch always holds at least one item, or such an item could never leave.
 *   3. count <= max_batch_size.
 *
 * The budget is in padded tokens because padded tokens are what reach the GPU. pad_to is the
 * batch's own longest item, not the queue's longest as in the article: every item in a lane is
 * within the lane's waste bound of the others, and the batch's maximum is never above the
 * queue's, so the same budget check holds with less padding.
 *
 * Cost-aware merging (packer_merge_saving, the `lanes` policy's extension across neighbouring
 * lanes): a worker pays fixed_ns per batch plus token_ns per padded token. Taking a group of
 * n_add items (whose own batch would pad to pad_add) into a batch of n items padded to pad saves
 * the group's separate batch and adds the padding of the merged batch over the two apart:
 *   saving = fixed_ns - token_ns * ((n + n_add) * max(pad, pad_add) - n * pad - n_add * pad_add)
 * A merge pays when the saving is positive. The function is pure so the rule is tested alone.
 *
 * Rejected: filtering on max_input_tokens. It strands items no consumer takes and forces linear
 * scans; oversized items go out and the worker answers them with an empty completion.
 */
#include "scheduler/core/packer.h"

uint64_t packer_pad(uint64_t tokens)
{
    return (tokens + PACKER_PAD_MULTIPLE - 1) / PACKER_PAD_MULTIPLE * PACKER_PAD_MULTIPLE;
}

sched_status_t packer_fill(const packer_contract_t *contract, const uint32_t *tokens, size_t n,
                           packer_result_t *out)
{
    if (contract == NULL || tokens == NULL || n == 0 || out == NULL ||
        contract->max_batch_size == 0 || contract->max_batch_tokens == 0)
        return SCHED_EINVAL;
    uint64_t longest = tokens[0];
    uint64_t real = tokens[0];
    size_t count = 1;
    while (count < n && count < contract->max_batch_size) {
        uint64_t next_longest = tokens[count] > longest ? tokens[count] : longest;
        if ((count + 1) * packer_pad(next_longest) > contract->max_batch_tokens)
            break;
        longest = next_longest;
        real += tokens[count];
        count++;
    }
    uint64_t pad_to = packer_pad(longest);
    *out = (packer_result_t){
        .count = count,
        .pad_to = (uint32_t)(pad_to > UINT32_MAX ? UINT32_MAX : pad_to),
        .padded_tokens = count * pad_to,
        .real_tokens = real,
        .over_budget = pad_to > contract->max_batch_tokens,
    };
    return SCHED_OK;
}

uint32_t packer_contract_runs(const packer_contract_t *contract)
{
    return contract->max_input_tokens > contract->max_batch_tokens ? contract->max_input_tokens
                                                                   : contract->max_batch_tokens;
}

uint32_t packer_prefix_price(const packer_contract_t *contract, uint32_t prefix)
{
    uint32_t runs = packer_contract_runs(contract);
    return prefix < runs ? prefix : runs;
}

double packer_merge_saving(const packer_cost_t *cost, uint64_t n, uint32_t pad, uint64_t n_add,
                           uint32_t pad_add)
{
    uint64_t merged_pad = pad > pad_add ? pad : pad_add;
    double added =
        (double)((n + n_add) * merged_pad) - (double)(n * pad) - (double)(n_add * pad_add);
    return cost->fixed_ns - cost->token_ns * added;
}
