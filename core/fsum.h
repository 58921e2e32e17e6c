/* fsum.h — an exact sum of doubles that can take values out again.
 *
 * The sum and avg of a float column must follow inserts and deletes
 * exactly (AGG-1): any sequence of adds and removes leaves the sum of the
 * values present, whatever the order. A double sum cannot (1e16 + 1 - 1e16
 * is 0; inf - inf is NaN for ever), so the finite values are summed as one
 * fixed-point integer wide enough for every double, and the non-finite ones
 * are counted:
 *
 *     limb[0..RN_FSUM_LIMBS)  two's complement, little-endian 64-bit limbs;
 *                             bit 0 weighs 2^-1074 (the least subnormal),
 *                             a double's value stays below 2^1024 (bit
 *                             2098), and 63 bits above hold the carries of
 *                             2^63 values: 34 limbs.
 *     pinf, ninf, nan         how many +inf, -inf and NaN are present.
 *
 * Adding a value touches the two limbs under its 53-bit significand, and
 * carries on only while a limb wraps (at most the 34 limbs, rarely more
 * than one). The sum is rounded once, when read (rn_fsum_value): round to
 * nearest, ties to even, as a double sum of the exact reals would be.
 *
 * Stored form (rn_fsum_encode), only the limbs that are not implied:
 *
 *     |u8 lo|u8 n|n × u64 little-endian: limb[lo .. lo+n)|
 *         [|i64 pinf|i64 ninf|i64 nan| little-endian, when any is not 0]
 *
 * limbs below lo are 0; limbs above lo+n repeat the sign of the top stored
 * limb (0 or all ones). Zero is |0|0|: two bytes. */
#ifndef RN_FSUM_H
#define RN_FSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RN_FSUM_LIMBS 34
#define RN_FSUM_MAX_ENCODED (2 + 8 * RN_FSUM_LIMBS + 24)

typedef struct rn_fsum {
  uint64_t limb[RN_FSUM_LIMBS]; /* the finite values' exact sum, in units of 2^-1074 */
  int64_t pinf, ninf, nan;      /* non-finite values present, by kind */
} rn_fsum;

/* An empty sum (0). */
void rn_fsum_init(rn_fsum *s);
/* Adds x (sign > 0) or takes it out again (sign < 0). Exact for every
 * double; non-finite values are counted. */
void rn_fsum_add(rn_fsum *s, double x, int sign);
/* The same for an int64 value, exactly (int avg). */
void rn_fsum_add_int(rn_fsum *s, int64_t x, int sign);
/* The sum rounded once to the nearest double (ties to even): NaN if a NaN
 * is present or both infinities are, else the infinity present, else the
 * rounded exact sum (inf if it passes DBL_MAX by half an ulp). 0 is +0. */
double rn_fsum_value(const rn_fsum *s);
/* The sum divided by n (> 0), rounded once: round(exact sum / n), so an
 * avg of huge values does not overflow on the way. Non-finite as above. */
double rn_fsum_div(const rn_fsum *s, uint64_t n);

/* Writes the stored form into out (RN_FSUM_MAX_ENCODED bytes); returns its
 * length. */
size_t rn_fsum_encode(const rn_fsum *s, char *out);
/* Reads a stored form; -1 if it is not one. */
int rn_fsum_decode(rn_fsum *s, const char *in, size_t len);

#endif
