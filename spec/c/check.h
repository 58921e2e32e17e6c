/* check.h — the C tests' harness: TEST functions run by RUN, CHECK marks
 * the running test failed (and says where), the last line is
 * "N passed, N failed" as make test counts it. */
#ifndef RN_CHECK_H
#define RN_CHECK_H

#include <stdint.h>
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

/* A number in [0, n) from a xorshift generator: randomized tests draw the
 * same cases on every run. */
static uint64_t check_rng = 88172645463325252ULL;
static inline uint64_t check_random(uint64_t n)
{
  check_rng ^= check_rng << 13;
  check_rng ^= check_rng >> 7;
  check_rng ^= check_rng << 17;
  return check_rng % n;
}

#define CHECK_REPORT() (printf("%d passed, %d failed\n", check_passed, check_failed), check_failed != 0)

#endif
