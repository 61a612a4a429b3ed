/*
 * limits.h - the hard limits of the wire contract, defined once for every layer.
 *
 * The codec refuses anything beyond them with its own reason code (codec/validate.c), so the
 * layers below rely on them without checking again: the segment format sizes its fields by
 * them and recovery uses them to tell a damaged entry from a real one; the scheduling core's
 * padding arithmetic stays within 32 bits because of LIMITS_TOKENS_MAX.
 */
#ifndef LANESCHED_COMMON_LIMITS_H
#define LANESCHED_COMMON_LIMITS_H

#include <stdint.h>

/* Item ids: 1..64 bytes. 64 holds a UUID in text (36) or a 256-bit hash in hex with room to
 * spare, and keeps a segment entry's header small. */
#define LIMITS_ID_MAX 64u
/* Model names: 1..255 bytes, one NATS subject's worth of tokens after P.submit. */
#define LIMITS_MODEL_MAX 255u
/* Longest item: a batch's pad_to is the longest item rounded up to 8 tokens, and must still fit
 * in the wire's uint32 pad_to. */
#define LIMITS_TOKENS_MAX (UINT32_MAX - 8u)

#endif
