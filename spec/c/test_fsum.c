/* test_fsum.c — the exact float sum (fsum.h) against exact references:
 * integer sums of values on a grid, the two-sum rule (a double sum of two
 * doubles is their exact sum rounded once), x / n, the adversarial cases of
 * issue 10, and random insert/delete sequences that must leave the very
 * state a fresh sum of the survivors has. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fsum.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_u64(void) /* xorshift64*: reproducible across runs */
{
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ULL;
}

/* Any finite double, exponents spread over the whole range. */
static double any_finite(void)
{
  for (;;) {
    uint64_t bits = next_u64();
    double d;
    memcpy(&d, &bits, sizeof d);
    if (isfinite(d)) return d;
  }
}

/* Values of every kind, often clustered so that cancellation happens. */
static double any_value(void)
{
  static const double special[] = { 1e308, -1e308, DBL_MAX, -DBL_MAX, 1e16, 1.0, -1.0, 0.5,
                                    4.9406564584124654e-324, -0.0, 0.0, 2.2250738585072014e-308 };
  switch (next_u64() % 8) {
  case 0: return INFINITY;
  case 1: return -INFINITY;
  case 2: return NAN;
  case 3: case 4: return special[next_u64() % (sizeof special / sizeof *special)];
  case 5: return any_finite();
  default: return ldexp((double)(int64_t)(next_u64() >> 11) , (int)(next_u64() % 200) - 100);
  }
}

static double sum_of(const double *xs, int n)
{
  rn_fsum s;
  rn_fsum_init(&s);
  for (int i = 0; i < n; i++) rn_fsum_add(&s, xs[i], +1);
  return rn_fsum_value(&s);
}

static bool same(double x, double y) /* NaN is NaN, and -0 is not 0 */
{
  return (isnan(x) && isnan(y)) || (x == y && signbit(x) == signbit(y));
}

static void test_issue_examples(void)
{
  CHECK(same(sum_of((double[]){ 1.0, INFINITY }, 2), INFINITY));
  rn_fsum s;
  rn_fsum_init(&s);
  rn_fsum_add(&s, 1.0, +1);
  rn_fsum_add(&s, INFINITY, +1);
  rn_fsum_add(&s, INFINITY, -1);
  CHECK(same(rn_fsum_value(&s), 1.0));         /* not NaN for ever */
  rn_fsum_init(&s);
  rn_fsum_add(&s, 1e308, +1);
  rn_fsum_add(&s, 1e308, +1);
  CHECK(same(rn_fsum_div(&s, 2), 1e308));      /* the avg does not overflow */
  rn_fsum_add(&s, 1.0, +1);
  CHECK(same(rn_fsum_value(&s), INFINITY));
  rn_fsum_add(&s, 1e308, -1);
  rn_fsum_add(&s, 1e308, -1);
  CHECK(same(rn_fsum_value(&s), 1.0));         /* not inf */
  rn_fsum_init(&s);
  rn_fsum_add(&s, 1e16, +1);
  rn_fsum_add(&s, 1.0, +1);
  rn_fsum_add(&s, 1e16, -1);
  CHECK(same(rn_fsum_value(&s), 1.0));         /* not 0 */
}

static void test_non_finite_rules(void)
{
  CHECK(isnan(sum_of((double[]){ INFINITY, -INFINITY }, 2)));
  CHECK(isnan(sum_of((double[]){ 1.0, NAN }, 2)));
  CHECK(same(sum_of((double[]){ -INFINITY, 5.0, -INFINITY }, 3), -INFINITY));
  CHECK(same(sum_of((double[]){ -DBL_MAX, -DBL_MAX }, 2), -INFINITY));
  CHECK(same(sum_of(NULL, 0), 0.0));
  CHECK(same(sum_of((double[]){ -0.0 }, 1), 0.0));   /* an exact 0 is +0 */
  rn_fsum s;
  rn_fsum_init(&s);
  rn_fsum_add(&s, -INFINITY, +1);
  CHECK(same(rn_fsum_div(&s, 7), -INFINITY));
}

/* Ties to even at the top of the range, at 2^53 and among subnormals. */
static void test_rounding_boundaries(void)
{
  double ulp_max = ldexp(1, 971);              /* ulp of DBL_MAX */
  CHECK(same(sum_of((double[]){ DBL_MAX, ulp_max / 2 }, 2), INFINITY)); /* tie, odd: up */
  CHECK(same(sum_of((double[]){ DBL_MAX, ulp_max / 2, -4.9406564584124654e-324 }, 3), DBL_MAX));
  CHECK(same(sum_of((double[]){ ldexp(1, 53), 1.0 }, 2), ldexp(1, 53)));           /* tie, even: down */
  CHECK(same(sum_of((double[]){ ldexp(1, 53), 1.0, ldexp(1, -1074) }, 3), ldexp(1, 53) + 2));
  CHECK(same(sum_of((double[]){ ldexp(1, 53), 3.0 }, 2), ldexp(1, 53) + 4));       /* tie, odd: up */
  CHECK(same(sum_of((double[]){ ldexp(1, -1074), ldexp(1, -1074), ldexp(1, -1074) }, 3), ldexp(3, -1074)));
  rn_fsum s;
  rn_fsum_init(&s);
  rn_fsum_add(&s, ldexp(1, -1074), +1);
  CHECK(same(rn_fsum_div(&s, 2), 0.0));        /* half the least subnormal: tie to 0 */
  rn_fsum_add(&s, ldexp(1, -1073), +1);
  CHECK(same(rn_fsum_div(&s, 2), ldexp(2, -1074))); /* 1.5 units: to 2 */
  CHECK(same(rn_fsum_div(&s, 4), ldexp(1, -1074))); /* 0.75 units: to 1 */
  rn_fsum_add(&s, ldexp(3, -1074), -1);
  rn_fsum_add(&s, ldexp(3, -1074), -1);
  CHECK(same(rn_fsum_value(&s), -ldexp(3, -1074)));
  CHECK(same(rn_fsum_div(&s, 7), -0.0));       /* below half a unit: to -0 */
}

/* A double sum of two doubles is their exact sum rounded once (IEEE), so
 * it is the reference wherever it does not overflow. */
static void test_two_sums_match_the_hardware(void)
{
  for (int i = 0; i < 200000; i++) {
    double a = any_finite(), b = any_finite();
    if (i % 3 == 0) b = ldexp(a, -(int)(next_u64() % 60)) * ((next_u64() & 1) ? 1 : -1);
    double want = a + b;
    if (!isfinite(want)) continue;
    double got = sum_of((double[]){ a, b }, 2);
    CHECK(same(got, want + 0.0));              /* -0 + 0 sums to +0 here */
    if (!same(got, want + 0.0)) { fprintf(stderr, "%a + %a: %a, not %a\n", a, b, got, want); break; }
  }
}

/* x / n in hardware is x's exact quotient rounded once: the avg of one value. */
static void test_division_matches_the_hardware(void)
{
  for (int i = 0; i < 200000; i++) {
    double x = any_finite();
    uint64_t n = i % 2 ? 1 + next_u64() % 1000 : 1 + (next_u64() >> (next_u64() % 64));
    rn_fsum s;
    rn_fsum_init(&s);
    rn_fsum_add(&s, x, +1);
    if (n > (1ULL << 53)) n >>= 11;            /* (double)n must be n */
    double got = rn_fsum_div(&s, n), want = x / (double)n;
    CHECK(same(got, want));
    if (!same(got, want)) { fprintf(stderr, "%a / %llu: %a, not %a\n", x, (unsigned long long)n, got, want); break; }
  }
}

/* Values m × 2^k on a grid of 2^-20: their exact sum is an integer count
 * of grid steps, and (double) of a 128-bit integer rounds once. */
static void test_grid_sums_are_exact(void)
{
  for (int round = 0; round < 300; round++) {
    int n = 1 + (int)(next_u64() % 1000);
    __int128 units = 0;
    rn_fsum s;
    rn_fsum_init(&s);
    for (int i = 0; i < n; i++) {
      int64_t m = (int64_t)(next_u64() >> 14) - (1LL << 49);   /* |m| < 2^50: exact */
      int k = (int)(next_u64() % 23);                         /* 2^(k - 20) */
      units += (__int128)m * ((__int128)1 << k);
      rn_fsum_add(&s, ldexp((double)m, k - 20), +1);
    }
    double want = ldexp((double)units, -20);
    CHECK(same(rn_fsum_value(&s), want + 0.0));
  }
}

static void test_int_sums(void)
{
  rn_fsum s;
  rn_fsum_init(&s);
  __int128 total = 0;
  for (int i = 0; i < 10000; i++) {
    int64_t x = (int64_t)next_u64();
    if (i % 7 == 0) x = i % 2 ? INT64_MIN : INT64_MAX;
    rn_fsum_add_int(&s, x, +1);
    total += x;
  }
  CHECK(same(rn_fsum_value(&s), (double)total));
  rn_fsum_init(&s);
  rn_fsum_add_int(&s, INT64_MAX, +1);
  rn_fsum_add_int(&s, INT64_MAX, +1);
  rn_fsum_add_int(&s, 2, +1);
  CHECK(same(rn_fsum_div(&s, 2), ldexp(1, 63)));  /* exact (2^64) / 2, not overflowed */
  rn_fsum_add_int(&s, INT64_MAX, -1);
  rn_fsum_add_int(&s, INT64_MAX, -1);
  CHECK(same(rn_fsum_value(&s), 2.0));
}

static void check_round_trip(const rn_fsum *s)
{
  char buf[RN_FSUM_MAX_ENCODED];
  size_t len = rn_fsum_encode(s, buf);
  rn_fsum back;
  CHECK(rn_fsum_decode(&back, buf, len) == 0);
  CHECK(memcmp(&back, s, sizeof back) == 0);
}

/* Random inserts and deletes: the state left is the one summing the
 * survivors freshly gives, limb for limb, and it survives its stored form. */
static void test_random_retraction(void)
{
  enum { MAXV = 64 };
  for (int round = 0; round < 2000; round++) {
    double present[MAXV];
    int n = 0;
    rn_fsum s;
    rn_fsum_init(&s);
    int steps = 1 + (int)(next_u64() % 200);
    for (int i = 0; i < steps; i++) {
      if (n < MAXV && (n == 0 || next_u64() % 3)) {
        present[n] = any_value();
        rn_fsum_add(&s, present[n++], +1);
      } else {
        int at = (int)(next_u64() % (uint64_t)n);
        rn_fsum_add(&s, present[at], -1);
        present[at] = present[--n];
      }
      if (i % 17 == 0) check_round_trip(&s);
    }
    rn_fsum fresh;
    rn_fsum_init(&fresh);
    for (int i = n - 1; i >= 0; i--) rn_fsum_add(&fresh, present[i], +1);
    CHECK(memcmp(&fresh, &s, sizeof s) == 0);
    CHECK(same(rn_fsum_value(&fresh), rn_fsum_value(&s)));
    check_round_trip(&s);
    if (check_failed_now) break;
  }
}

static void test_stored_form(void)
{
  rn_fsum s;
  char buf[RN_FSUM_MAX_ENCODED];
  rn_fsum_init(&s);
  CHECK(rn_fsum_encode(&s, buf) == 2);           /* zero */
  rn_fsum_add(&s, 1.5, +1);
  CHECK(rn_fsum_encode(&s, buf) == 2 + 8);       /* one limb */
  rn_fsum_add(&s, 3.0, -1);
  CHECK(rn_fsum_encode(&s, buf) == 2 + 8);       /* -1.5: one limb, sign above it */
  check_round_trip(&s);
  rn_fsum_add(&s, NAN, +1);
  CHECK(rn_fsum_encode(&s, buf) == 2 + 8 + 24);
  check_round_trip(&s);
  CHECK(rn_fsum_decode(&s, buf, 1) == -1);
  CHECK(rn_fsum_decode(&s, "\x20\x20", 2) == -1); /* limbs past the end */
  CHECK(rn_fsum_decode(&s, "\x00\x01xxxx", 6) == -1);
}

int main(void)
{
  RUN(test_issue_examples);
  RUN(test_non_finite_rules);
  RUN(test_rounding_boundaries);
  RUN(test_two_sums_match_the_hardware);
  RUN(test_division_matches_the_hardware);
  RUN(test_grid_sums_are_exact);
  RUN(test_int_sums);
  RUN(test_random_retraction);
  RUN(test_stored_form);
  return CHECK_REPORT();
}
