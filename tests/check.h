/*
 * check.h — the test harness every test program uses (header-only; one test program = one .c).
 *
 *   static void test_something(void) { EXPECT(x == 3, "x = %d", x); }
 *   int main(void) { RUN(test_something); return check_summary("test_foo"); }
 *
 * EXPECT records a failure (with file:line and the message) and lets the test go on; REQUIRE
 * also returns from the test function. A test case passes when it recorded no failure. SKIP
 * marks the current case skipped with a reason. check_summary prints the one summary line that
 * tests/run_tests.sh reads — "test_foo: N passed, N failed, N skipped" — and returns the exit code.
 *
 * Environment variables, set by `make sanitize` (mk/sanitize.sh): PPSCHED_TEST_QUICK=1 asks the
 * GPU tests for their reduced run (check_quick: smaller shapes, fewer cases and steps, every
 * kernel path still taken once), for tools that slow kernels 10-100x; PPSCHED_TEST_TRACE=1 prints
 * "  RUN name" to stderr as each case starts, so a run stopped from outside shows how far it got;
 * PPSCHED_TEST_LIST=1 prints "CASE name" for every case and runs none; PPSCHED_TEST_CASE=name
 * runs that case alone (the others are neither run nor counted), so a program can be split into
 * one process per case.
 */
#ifndef PP_TEST_CHECK_H
#define PP_TEST_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed_, check_failed_, check_skipped_;
static int check_case_failures_;
static int check_case_skipped_;
static const char *check_case_name_ = "";

static inline void check_fail_(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "  FAIL %s (%s:%d): %s", check_case_name_, file, line, cond);
    if (fmt && *fmt) {
        fputs(": ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    check_case_failures_++;
}

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) check_fail_(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                       \
    } while (0)

#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            check_fail_(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* |got - want| <= atol + rtol * |want| */
#define EXPECT_NEAR(got, want, atol, rtol)                                                         \
    do {                                                                                           \
        double g_ = (double)(got), w_ = (double)(want);                                            \
        if (!(fabs(g_ - w_) <= (atol) + (rtol)*fabs(w_)))                                          \
            check_fail_(__FILE__, __LINE__, #got " ~ " #want, "got %.9g, want %.9g", g_, w_);      \
    } while (0)

#define SKIP(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "  SKIP %s: ", check_case_name_);                                          \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        check_case_skipped_ = 1;                                                                   \
        return;                                                                                    \
    } while (0)

/* 1 when PPSCHED_TEST_QUICK is set to anything but "" or "0". */
static inline int check_quick(void)
{
    const char *q = getenv("PPSCHED_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

/* Skip the current case in the quick run, saying why it is left to the full one. */
#define SKIP_IF_QUICK(why)                                                                         \
    do {                                                                                           \
        if (check_quick()) SKIP("PPSCHED_TEST_QUICK: %s; the full run takes it", why);             \
    } while (0)

static inline void check_trace_(const char *name)
{
    const char *t = getenv("PPSCHED_TEST_TRACE");
    if (t && *t && strcmp(t, "0") != 0) fprintf(stderr, "  RUN %s\n", name);
}

/* 1 when case `name` is to run: PPSCHED_TEST_LIST lists it instead (and says 0), and
 * PPSCHED_TEST_CASE, when set, names the one case that runs. */
static inline int check_selected_(const char *name)
{
    const char *list = getenv("PPSCHED_TEST_LIST"), *only = getenv("PPSCHED_TEST_CASE");
    if (list && *list && strcmp(list, "0") != 0) {
        printf("CASE %s\n", name);
        return 0;
    }
    return !(only && *only && strcmp(only, name) != 0);
}

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        if (!check_selected_(#fn)) break;                                                          \
        check_case_name_ = #fn;                                                                    \
        check_trace_(#fn);                                                                         \
        check_case_failures_ = 0;                                                                  \
        check_case_skipped_ = 0;                                                                   \
        fn();                                                                                      \
        if (check_case_failures_)                                                                  \
            check_failed_++;                                                                       \
        else if (check_case_skipped_)                                                              \
            check_skipped_++;                                                                      \
        else                                                                                       \
            check_passed_++;                                                                       \
    } while (0)

static inline int check_summary(const char *prog)
{
    printf("%s: %d passed, %d failed, %d skipped\n", prog, check_passed_, check_failed_,
           check_skipped_);
    fflush(stdout);
    return check_failed_ ? 1 : 0;
}

#endif /* PP_TEST_CHECK_H */
