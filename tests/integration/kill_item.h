/*
 * kill_item.h - the item an id stands for, shared by the SIGKILL test and its writer so that
 * both derive exactly the same bytes from an id (private to tests/integration).
 */
#ifndef LANESCHED_KILL_ITEM_H
#define LANESCHED_KILL_ITEM_H

#include <stddef.h>
#include <stdint.h>

#define KILL_MODEL     "kill-model"
#define KILL_SIGNATURE 0x4B1114B111ull
/* Small enough that a writer life of 5..60 ms rolls a segment over even on a loaded machine
 * (segments are sealed at every restart, so a roll-over needs the cap's bytes in one life);
 * an entry is at most 32 + 8 + MAX_PAYLOAD bytes, well under it. */
#define KILL_SEG_CAP (8u << 10)
#define MAX_PAYLOAD  3072u

typedef struct {
    uint8_t id[8];
    uint8_t payload[MAX_PAYLOAD];
    size_t payload_len;
    uint32_t tokens;
    uint64_t arrival_ns;
    uint32_t lane;
} kitem_t;

static inline void item_make(uint64_t n, kitem_t *it)
{
    for (int i = 0; i < 8; i++)
        it->id[i] = (uint8_t)(n >> (8 * i));
    it->payload_len = 256 + (size_t)((n * 2654435761u) % (MAX_PAYLOAD - 256));
    for (size_t j = 0; j < it->payload_len; j++)
        it->payload[j] = (uint8_t)(n * 31 + j * 17 + (j >> 8));
    it->tokens = 1 + (uint32_t)(n % 509);
    it->arrival_ns = n * 1000 + 1;
    it->lane = (uint32_t)(n % 2);
}

#endif
