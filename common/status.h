/*
 * status.h - one generator for every module's status enum and its _str() function.
 *
 * A module lists its statuses once, as an X-macro of X(FULL_NAME, "text", ...), the way libuv
 * lists UV_ERRNO_MAP; the enum and the text function both come from that one list, so codes and
 * texts cannot drift and `grep STORE_ENOSPC` finds the line that defines it:
 *
 *   #define STORE_STATUS_MAP(X) X(STORE_OK, "ok") X(STORE_ENOMEM, "out of memory") ...
 *   STATUS_ENUM(store_status_t, STORE_STATUS_MAP, STORE_STATUS_COUNT);            (header)
 *   const char *store_status_str(store_status_t status);                          (header)
 *   STATUS_STR(store_status_str, store_status_t, STORE_STATUS_MAP, "unknown ...") (one .c)
 *
 * Arguments after the text belong to the module (the codec's stable reason code words); it reads
 * them with STATUS_SWITCH and a case macro of its own. The returned strings are static.
 */
#ifndef LANESCHED_COMMON_STATUS_H
#define LANESCHED_COMMON_STATUS_H

#define STATUS_HEAD_(x, ...)    x
#define STATUS_ITEM_(name, ...) name,
#define STATUS_TEXT_CASE_(name, ...) \
    case name:                       \
        return STATUS_HEAD_(__VA_ARGS__, ~);

/* typedef enum { every name of MAP in order, then `count` } type. */
#define STATUS_ENUM(type, MAP, count) typedef enum { MAP(STATUS_ITEM_) count } type

/* const char *fn(type status): CASE(name, ...) per entry of MAP, `unknown` for other values. */
#define STATUS_SWITCH(fn, type, MAP, CASE, unknown) \
    const char *fn(type status)                     \
    {                                               \
        switch (status) {                           \
            MAP(CASE)                               \
        default:                                    \
            break;                                  \
        }                                           \
        return unknown;                             \
    }

/* const char *fn(type status): the text of each entry of MAP, `unknown` for other values. */
#define STATUS_STR(fn, type, MAP, unknown) STATUS_SWITCH(fn, type, MAP, STATUS_TEXT_CASE_, unknown)

#endif
