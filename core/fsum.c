/* fsum.c — the exact float sum drawn in fsum.h. */
#include "fsum.h"

#include <math.h>
#include <string.h>

#define N RN_FSUM_LIMBS

typedef unsigned __int128 u128;

void rn_fsum_init(rn_fsum *s)
{
  memset(s, 0, sizeof *s);
}

/* limb[idx] += lo, limb[idx + 1] += hi, carrying on while a limb wraps. */
static void add_at(uint64_t *limb, int idx, uint64_t lo, uint64_t hi)
{
  u128 acc = (u128)limb[idx] + lo;
  limb[idx] = (uint64_t)acc;
  acc = (u128)limb[idx + 1] + hi + (uint64_t)(acc >> 64);
  limb[idx + 1] = (uint64_t)acc;
  bool carry = (acc >> 64) != 0;
  for (int j = idx + 2; carry && j < N; j++) carry = ++limb[j] == 0;
}

/* limb[idx] -= lo, limb[idx + 1] -= hi, borrowing on while a limb wraps. */
static void sub_at(uint64_t *limb, int idx, uint64_t lo, uint64_t hi)
{
  bool borrow = limb[idx] < lo;
  limb[idx] -= lo;
  uint64_t before = limb[idx + 1];
  limb[idx + 1] = before - hi - borrow;
  borrow = before < hi || (before == hi && borrow);
  for (int j = idx + 2; borrow && j < N; j++) borrow = limb[j]-- == 0;
}

/* Adds (or, negative, subtracts) m × 2^shift units. */
static void add_shifted(rn_fsum *s, uint64_t m, int shift, bool negative)
{
  int idx = shift / 64, off = shift % 64;
  uint64_t lo = m << off, hi = off ? m >> (64 - off) : 0;
  if (negative) sub_at(s->limb, idx, lo, hi);
  else add_at(s->limb, idx, lo, hi);
}

void rn_fsum_add(rn_fsum *s, double x, int sign)
{
  if (isnan(x)) { s->nan += sign; return; }
  if (isinf(x)) { if (x > 0) s->pinf += sign; else s->ninf += sign; return; }
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  int e = (int)((bits >> 52) & 0x7ff);
  uint64_t m = bits & ((1ULL << 52) - 1);
  if (e) m |= 1ULL << 52;          /* a normal x is m × 2^(e - 1075) = m × 2^(e - 1) units */
  if (!m) return;                  /* ±0 */
  add_shifted(s, m, e ? e - 1 : 0, ((bits >> 63) != 0) != (sign < 0));
}

void rn_fsum_add_int(rn_fsum *s, int64_t x, int sign)
{
  uint64_t m = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
  if (m) add_shifted(s, m, 1074, (x < 0) != (sign < 0)); /* 1 is 2^1074 units */
}

/* A non-finite result, or 0 when the finite sum decides. */
static bool non_finite(const rn_fsum *s, double *out)
{
  if (s->nan > 0 || (s->pinf > 0 && s->ninf > 0)) *out = NAN;
  else if (s->pinf > 0) *out = INFINITY;
  else if (s->ninf > 0) *out = -INFINITY;
  else return false;
  return true;
}

/* The sum's magnitude, limb by limb, without copying it: |sum| of a
 * negative sum is ~sum + 1, which is 0 below its lowest non-zero limb lo,
 * -limb at lo and ~limb above. */
typedef struct magnitude {
  const rn_fsum *s;
  bool neg;               /* the sum is negative */
  int lo;                 /* its lowest non-zero limb (N: the sum is 0) */
  int top;                /* the magnitude's highest non-zero limb (-1: 0) */
} magnitude;

static uint64_t mag_limb(const magnitude *m, int i)
{
  if (i < m->lo) return 0;
  if (!m->neg) return m->s->limb[i];
  return i == m->lo ? 0 - m->s->limb[i] : ~m->s->limb[i];
}

static magnitude magnitude_of(const rn_fsum *s)
{
  magnitude m = { s, (s->limb[N - 1] >> 63) != 0, 0, N - 1 };
  uint64_t ext = m.neg ? ~0ULL : 0;  /* limbs above the top: |sum|'s limb there is 0 */
  while (m.lo < N && !s->limb[m.lo]) m.lo++;
  while (m.top > m.lo && s->limb[m.top] == ext) m.top--;
  if (m.lo == N) m.top = -1;         /* 0 (a negative sum has a limb that is not) */
  return m;
}

static int top_bit(const uint64_t *m, int n)
{
  for (int i = n - 1; i >= 0; i--)
    if (m[i]) return i * 64 + 63 - __builtin_clzll(m[i]);
  return -1;
}

/* cnt (<= 64) bits of m from bit pos up. */
static uint64_t bits_at(const uint64_t *m, int n, int pos, int cnt)
{
  int idx = pos / 64, off = pos % 64;
  uint64_t v = m[idx] >> off;
  if (off && idx + 1 < n) v |= m[idx + 1] << (64 - off);
  return cnt >= 64 ? v : v & ((1ULL << cnt) - 1);
}

/* Whether any bit of m below pos is set; looks from pos down, where a sum
 * of ordinary values has its bits. */
static bool any_below(const uint64_t *m, int pos)
{
  if (pos % 64 && (m[pos / 64] & ((1ULL << (pos % 64)) - 1))) return true;
  for (int i = pos / 64 - 1; i >= 0; i--)
    if (m[i]) return true;
  return false;
}

/* Rounds the magnitude m (n limbs, bit 0 weighing 2^lsb_exp, plus sticky:
 * something below bit 0) to a double, ties to even. Bits below 2^-1074
 * (bit -1074 - lsb_exp) are never kept: subnormals round there. */
static double round_magnitude(const uint64_t *m, int n, int lsb_exp, bool sticky, bool neg)
{
  int top = top_bit(m, n), least = -1074 - lsb_exp;
  if (top < 0) return sticky && neg ? -0.0 : 0.0;
  int keep = top - 52 > least ? top - 52 : least;   /* the lowest bit kept */
  if (keep < 0) keep = 0;                           /* nothing below bit 0: exact */
  uint64_t mant = top >= keep ? bits_at(m, n, keep, top - keep + 1) : 0;
  bool half = keep >= 1 && bits_at(m, n, keep - 1, 1);
  sticky = sticky || (keep >= 1 && any_below(m, keep - 1));
  if (half && (sticky || (mant & 1))) mant++;       /* 2^53 at most: still exact */
  double r = ldexp((double)mant, keep + lsb_exp);   /* exact, or inf past DBL_MAX */
  return neg ? -r : r;
}

/* A window of at most three limbs from the top of |sum| holds 128 bits
 * below its top bit: enough to round; the limbs below only make it sticky. */
double rn_fsum_value(const rn_fsum *s)
{
  double r;
  if (non_finite(s, &r)) return r;
  magnitude m = magnitude_of(s);
  if (m.top < 0) return 0.0;
  int low = m.top - 2 > m.lo ? m.top - 2 : m.lo;
  uint64_t w[3];
  for (int i = low; i <= m.top; i++) w[i - low] = mag_limb(&m, i);
  return round_magnitude(w, m.top - low + 1, -1074 + 64 * low, low > m.lo, m.neg);
}

/* One limb of a long division by n: (*rem, limb) / n, the remainder left in *rem. */
static uint64_t div_limb(u128 *rem, uint64_t limb, uint64_t n)
{
  if (n <= UINT32_MAX) { /* two word divisions, not a 128-bit one: rem < n < 2^32 */
    uint64_t hi = ((uint64_t)*rem << 32) | (limb >> 32);
    uint64_t lo = ((hi % n) << 32) | (limb & 0xffffffffu);
    *rem = lo % n;
    return (hi / n) << 32 | (lo / n);
  }
  u128 cur = (*rem << 64) | limb;
  uint64_t q = (uint64_t)(cur / n);
  *rem = cur - (u128)q * n;
  return q;
}

double rn_fsum_div(const rn_fsum *s, uint64_t n)
{
  double r;
  if (non_finite(s, &r)) return r;
  magnitude m = magnitude_of(s);
  if (m.top < 0) return 0.0;
  /* The quotient, from the top down, of |sum| with one more zero limb
   * below 2^-1074 (so that a subnormal quotient rounds right): dividend
   * limb i is magnitude limb i - 1. Three limbs from the first non-zero
   * one are kept (w, highest first); the rest only make it sticky. */
  uint64_t w[3] = { 0 };
  int got = 0, i = m.top + 1;
  u128 rem = 0;
  for (; i >= 0 && got < 3; i--) {
    uint64_t q = div_limb(&rem, i ? mag_limb(&m, i - 1) : 0, n);
    if (got || q) w[got++] = q;
  }
  bool sticky = rem != 0 || i >= m.lo + 1;  /* dividend limbs left that are not 0 */
  if (!got) return sticky && m.neg ? -0.0 : 0.0;
  uint64_t le[3];
  for (int j = 0; j < got; j++) le[j] = w[got - 1 - j];
  return round_magnitude(le, got, -1074 - 64 + 64 * (i + 1), sticky, m.neg);
}

static void put_le64(char *out, uint64_t u)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(out, &u, 8);
#else
  for (int i = 0; i < 8; i++) out[i] = (char)(u >> (8 * i));
#endif
}

static uint64_t get_le64(const char *in)
{
  uint64_t u = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(&u, in, 8);
#else
  for (int i = 7; i >= 0; i--) u = (u << 8) | (unsigned char)in[i];
#endif
  return u;
}

/* The limb above x when x is the top one: its sign, repeated. */
static uint64_t sign_of(uint64_t x)
{
  return (x >> 63) ? ~0ULL : 0;
}

size_t rn_fsum_encode(const rn_fsum *s, char *out)
{
  int lo = 0, hi = N - 1;
  while (lo < N && !s->limb[lo]) lo++;
  while (hi > lo && s->limb[hi] == sign_of(s->limb[hi - 1])) hi--;
  int n = lo < N ? hi - lo + 1 : 0;
  out[0] = (char)(n ? lo : 0);
  out[1] = (char)n;
  size_t len = 2;
  for (int i = 0; i < n; i++, len += 8) put_le64(out + len, s->limb[lo + i]);
  if (s->pinf || s->ninf || s->nan) {
    put_le64(out + len, (uint64_t)s->pinf);
    put_le64(out + len + 8, (uint64_t)s->ninf);
    put_le64(out + len + 16, (uint64_t)s->nan);
    len += 24;
  }
  return len;
}

int rn_fsum_decode(rn_fsum *s, const char *in, size_t len)
{
  if (len < 2) return -1;
  int lo = (unsigned char)in[0], n = (unsigned char)in[1];
  size_t limbs_end = 2 + 8 * (size_t)n;
  if (lo + n > N || (len != limbs_end && len != limbs_end + 24)) return -1;
  rn_fsum_init(s);
  for (int i = 0; i < n; i++) s->limb[lo + i] = get_le64(in + 2 + 8 * i);
  for (int i = lo + n; n && i < N; i++) s->limb[i] = sign_of(s->limb[lo + n - 1]);
  if (len > limbs_end) {
    s->pinf = (int64_t)get_le64(in + limbs_end);
    s->ninf = (int64_t)get_le64(in + limbs_end + 8);
    s->nan = (int64_t)get_le64(in + limbs_end + 16);
  }
  return 0;
}
