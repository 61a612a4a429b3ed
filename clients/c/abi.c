/*
 * abi.c - what a binding in another language needs to use this library safely: the sizes of the
 * public structs it mirrors (lc_abi_size) and a free() of the library's own (lc_free).
 *
 * Owns nothing.
 *
 * Invariants:
 *  1. Every struct a binding may mirror is listed by its C name; an unknown name gives 0, which
 *     never equals a mirrored size, so a binding refuses to run rather than guess.
 *
 * Rejected alternatives:
 *  - A version number for the layouts: it depends on someone remembering to bump it; sizes are
 *    checked by the compiler each build (they do not catch a reordering of same-sized fields,
 *    which the binding's tests do: they round-trip every field through the daemon).
 */
#include "clients/c/lanes_client.h"

#include <stdlib.h>
#include <string.h>

#define LC_ABI_TYPES(X)     \
    X(lc_client_config_t)   \
    X(lc_consumer_config_t) \
    X(lc_registered_t)      \
    X(lc_consumer_stats_t)  \
    X(lc_item_result_t)     \
    X(lc_submit_summary_t)  \
    X(lc_ack_reply_t)       \
    X(codec_work_item_t)    \
    X(codec_batch_t)        \
    X(codec_batch_item_t)   \
    X(codec_ack_t)          \
    X(codec_bytes_t)

size_t lc_abi_size(const char *name)
{
    if (name == NULL)
        return 0;
#define LC_ABI_ONE(type)          \
    if (strcmp(name, #type) == 0) \
        return sizeof(type);
    LC_ABI_TYPES(LC_ABI_ONE)
#undef LC_ABI_ONE
    return 0;
}

void lc_free(void *p)
{
    free(p);
}
