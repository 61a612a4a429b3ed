/*
 * invariant.h - executable invariants, in the manner of SQLite's assert_pager_state().
 *
 * A module writes each of its structural rules as a check function that returns 1 when every
 * rule holds, and reports the first broken one with INVARIANT_HOLDS (file, line and the values
 * involved) before returning 0. The check functions are compiled in every build, so unit tests
 * can break a structure on purpose and see the check fail; the calls after each operation are
 * written INVARIANT_CHECK(check(x)) and compiled out when NDEBUG is defined (Release and
 * RelWithDebInfo). The Debug builds, the sanitizer pass in CI among them, run them all.
 */
#ifndef LANESCHED_COMMON_INVARIANT_H
#define LANESCHED_COMMON_INVARIANT_H

#ifdef NDEBUG
#define INVARIANTS_CHECKED    0
#define INVARIANT_CHECK(call) ((void)(0 && (call))) /* names its operands, evaluates nothing */
#else
#define INVARIANTS_CHECKED    1
#define INVARIANT_CHECK(call) ((call) ? (void)0 : invariant_broken(#call, __FILE__, __LINE__))
#endif

/* Inside a check function: when cond is false, report the rule with printf-style detail and
 * return 0 from the check function. */
#define INVARIANT_HOLDS(cond, ...)                                    \
    do {                                                              \
        if (!(cond)) {                                                \
            invariant_report(__FILE__, __LINE__, #cond, __VA_ARGS__); \
            return 0;                                                 \
        }                                                             \
    } while (0)

/* Prints the broken rule to stderr. Every argument is borrowed for the call. */
void invariant_report(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints which check failed and aborts the process. */
_Noreturn void invariant_broken(const char *call, const char *file, int line);

#endif
