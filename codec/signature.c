/*
 * signature.c - shape signatures: the one definition of "same cacheable prefix".
 *
 * Owns: codec_hash_component() and codec_signature(). Every producer, in every language, must
 * compute the same 64 bits for the same ordered components, so this file is a transcription of
 * subjects.md and nothing more; the test vectors there are asserted in tests/unit/test_codec.c.
 *
 * Invariants:
 *  1. h_i = XXH64(component bytes, seed 0); the signature is XXH64 over the h_i, in order, each
 *     as 8 little-endian bytes, seed 0. Component order is part of the shape.
 *  2. The byte stream hashed is identical on big- and little-endian hosts: each h_i is serialized
 *     with shifts, never by copying the in-memory uint64_t.
 *  3. Neither function allocates or fails: the streaming state lives on the stack, so the
 *     signature of any number of hashes costs no memory and needs no error path.
 *  4. Length is never part of the signature (the key everywhere is (model, signature)).
 *
 * Rejected alternatives:
 *  - XXH3 (faster): producers are written in Go, JS, Python, Rust, Java; every one of them has a
 *    portable, long-stable XXH64, not all have XXH3. Interop beats a few nanoseconds per item.
 *  - Hashing the raw uint64_t array: host-endian, so a big-endian producer would get other shapes.
 *  - Serializing all hashes into a malloc'd buffer for one XXH64() call: adds an allocation and a
 *    failure path to a function that otherwise cannot fail. XXH64_createState() has the same
 *    problem. The stack state needs XXH_STATIC_LINKING_ONLY, whose layout is tied to the header
 *    version; the Debian header and library come from one source package at one version, and the
 *    unit test's literal vectors would catch a mismatch.
 *  - A local XXH64 implementation: one more thing to get subtly wrong; libxxhash is the reference.
 */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "codec/codec.h"

uint64_t codec_hash_component(const void *bytes, size_t len)
{
    static const unsigned char empty[1];
    return XXH64(bytes ? bytes : empty, len, 0);
}

uint64_t codec_signature(const uint64_t *hashes, size_t n)
{
    XXH64_state_t state;
    (void)XXH64_reset(&state, 0);
    for (size_t i = 0; i < n; i++) {
        unsigned char le[8];
        for (unsigned b = 0; b < 8; b++)
            le[b] = (unsigned char)(hashes[i] >> (8 * b));
        (void)XXH64_update(&state, le, sizeof le);
    }
    return XXH64_digest(&state);
}
