/*
 * status.c - the codec's status texts and code words, from the one CODEC_STATUS_MAP, and the
 * compile-time checks that the plain enums of codec.h equal the wire's.
 *
 * Invariants:
 *   1. Names, code words and texts come from CODEC_STATUS_MAP only, so they cannot drift.
 *   2. codec_item_status_t and codec_batch_status_t have the numeric values of lanes.proto's
 *      ItemStatus and BatchStatus (checked below), so they cross the wire by value.
 */
#include "codec/codec_int.h"

_Static_assert(CODEC_OK == 0, "CODEC_OK must be 0");
_Static_assert((int)CODEC_ITEM_ACCEPTED == (int)LANES__V1__ITEM_STATUS__ITEM_STATUS_ACCEPTED &&
                   (int)CODEC_ITEM_DUPLICATE ==
                       (int)LANES__V1__ITEM_STATUS__ITEM_STATUS_DUPLICATE &&
                   (int)CODEC_ITEM_REJECTED == (int)LANES__V1__ITEM_STATUS__ITEM_STATUS_REJECTED,
               "codec_item_status_t must equal lanes.v1.ItemStatus");
_Static_assert((int)CODEC_BATCH_OK == (int)LANES__V1__BATCH_STATUS__BATCH_STATUS_OK &&
                   (int)CODEC_BATCH_EXPIRED == (int)LANES__V1__BATCH_STATUS__BATCH_STATUS_EXPIRED &&
                   (int)CODEC_BATCH_ERROR == (int)LANES__V1__BATCH_STATUS__BATCH_STATUS_ERROR,
               "codec_batch_status_t must equal lanes.v1.BatchStatus");

#define CODEC_TEXT_CASE_(name, code, text) \
    case name:                             \
        return text;
#define CODEC_REASON_CASE_(name, code, text) \
    case name:                               \
        return code;
STATUS_SWITCH(codec_status_str, codec_status_t, CODEC_STATUS_MAP, CODEC_TEXT_CASE_,
              "unknown status")
STATUS_SWITCH(codec_status_reason, codec_status_t, CODEC_STATUS_MAP, CODEC_REASON_CASE_,
              "unknown_status")
