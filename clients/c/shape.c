/*
 * shape.c - shape signatures from component strings, and their text form: lc_shape_hash and
 * lc_shape_sign compute what subjects.md's "Shape signatures and test vectors" defines, through
 * the codec's codec_hash_component / codec_signature; lc_shape_parse reads a signature typed by a
 * person (lanesched-produce --signature).
 *
 * Owns nothing beyond one call.
 *
 * Invariants:
 *  1. A component is its strlen bytes, no terminator, exactly as sent to the model; order is
 *     kept (the same components in another order are another shape).
 *  2. The hashing is the codec's: this file never computes XXH64 itself, so the client and the
 *     daemon cannot disagree on a signature.
 *  3. lc_shape_parse never returns 0: proto3 reads a zero signature as "absent".
 *
 * Rejected alternatives:
 *  - Always allocating the hash array: a prompt has a handful of components, so 16 on the stack
 *    cover every real call and the heap only serves the odd long list.
 *  - strtoull for parsing: it accepts signs, spaces and overflow to ULLONG_MAX, none of which is
 *    a signature.
 */
#include "clients/c/lanes_client.h"

#include <stdlib.h>
#include <string.h>

void lc_shape_hash(const char *const *components, size_t n, uint64_t *out_hashes)
{
    for (size_t i = 0; i < n; i++)
        out_hashes[i] = codec_hash_component(components[i], strlen(components[i]));
}

lc_status_t lc_shape_sign(const char *const *components, size_t n, uint64_t *out)
{
    lc_status_t status = LC_OK;
    uint64_t small[16] = {0};
    uint64_t *hashes = small;

    if ((components == NULL && n > 0) || out == NULL) {
        status = LC_EINVAL;
        goto out;
    }
    if (n > sizeof(small) / sizeof(small[0]) && (hashes = malloc(n * sizeof(*hashes))) == NULL) {
        status = LC_ENOMEM;
        goto out;
    }
    lc_shape_hash(components, n, hashes);
    *out = codec_signature(hashes, n);
out:
    if (hashes != small)
        free(hashes);
    return status;
}

lc_status_t lc_shape_parse(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    const char *p = text;
    size_t digits = 0;

    if (text == NULL || out == NULL)
        return LC_EINVAL;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    for (; *p != '\0'; p++, digits++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            return LC_EINVAL;
        if (digits == 16)
            return LC_EINVAL;
        value = value << 4 | (uint64_t)d;
    }
    if (digits == 0 || value == 0)
        return LC_EINVAL;
    *out = value;
    return LC_OK;
}
