/*
 * text.h - what the project calls a given string: not NULL and not empty. A flag, an
 * environment variable or a client's config field left empty means "not given" everywhere (the
 * daemon's flags, the C client's config, lanesched-ctl's), so an empty path, URL or name is
 * never handed to nats.c or opened.
 *
 * Ownership: s is borrowed for the call.
 */
#ifndef LANESCHED_COMMON_TEXT_H
#define LANESCHED_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

static inline bool text_given(const char *s)
{
    return s != NULL && s[0] != '\0';
}

#endif
