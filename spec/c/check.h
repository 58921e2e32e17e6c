/* check.h — the C tests' harness: TEST functions run by RUN, CHECK marks
 * the running test failed (and says where), the last line is
 * "N passed, N failed" as make test counts it. */
#ifndef RN_CHECK_H
#define RN_CHECK_H

#include <stdio.h>

static int check_failed_now;  /* the running test has failed */
static int check_passed, check_failed;

#define CHECK(cond) do { \
    if (!(cond)) { \
      if (!check_failed_now) fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      check_failed_now = 1; \
    } \
  } while (0)

#define RUN(test) do { \
    check_failed_now = 0; \
    test(); \
    if (check_failed_now) { check_failed++; fprintf(stderr, "FAIL %s\n", #test); } \
    else check_passed++; \
  } while (0)

#define CHECK_REPORT() (printf("%d passed, %d failed\n", check_passed, check_failed), check_failed != 0)

#endif
