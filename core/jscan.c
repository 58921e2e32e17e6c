/* jscan.c — a one-pass JSON reader into msgpack objects (jscan.h).
 *
 * Why not jansson on the hot path: jansson builds a tree of malloc'd
 * nodes and a hash table per object, and json.c then copied that tree
 * into msgpack objects: about 23,000 instructions for an 86-byte fkjoin
 * line (callgrind; cJSON 8,400, json-c 14,900, yajl 15,900 only to build
 * and free their trees: scripts/bench/json_parsers.c). This reader walks
 * the text once, bump-allocates from the caller's zone and points strings
 * without escapes into the text: about 2,300.
 *
 * What it accepts is exactly what jansson accepts (RFC 8259: no trailing
 * commas, no leading zeros, strict UTF-8, surrogates only in pairs), with
 * jansson's flags as json.c used them: any value at the top (DECODE_ANY),
 * \u0000 inside strings but not keys (ALLOW_NUL), a key twice in an object
 * refused (REJECT_DUPLICATES); and json.c's own limit: no value nested
 * more than RN_JSCAN_MAX_DEPTH deep. Integers within int64 are ints, other
 * numbers (a fraction or an exponent) float64, read in the C locale.
 *
 * Containers: the elements of the containers being read wait on one stack
 * (a map's as key, value, key, value…); when a container closes, its
 * elements move to one zone array and leave the stack. */
#include "jscan.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "bytes.h"

enum { INLINE_ITEMS = 64, LINEAR_DUP_CHECK = 16 };

typedef struct scan {
  const unsigned char *at, *end; /* the unread text */
  msgpack_zone *z;
  msgpack_object *items;         /* the open containers' elements */
  size_t top, cap;               /* items in use, items allocated */
  msgpack_object inline_items[INLINE_ITEMS]; /* items until they outgrow it */
} scan;

_Static_assert(sizeof(msgpack_object_kv) == 2 * sizeof(msgpack_object), "a kv is a key object then a value object");

/* 1 for the bytes that end the plain run of a string: '"', '\\', control
 * characters and every byte of a multi-byte UTF-8 character. */
static const unsigned char string_special[256] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

static int container(scan *sc, msgpack_object *out, int depth, bool is_object);

static void skip_spaces(scan *sc)
{
  while (sc->at < sc->end && (*sc->at == ' ' || *sc->at == '\n' || *sc->at == '\r' || *sc->at == '\t')) sc->at++;
}

/* Inline, the common case: no space between tokens. */
static inline void skip_space(scan *sc)
{
  if (sc->at < sc->end && *sc->at <= ' ') skip_spaces(sc);
}

static bool is_digit(unsigned c) { return c - '0' < 10; }

/* The length of the well-formed UTF-8 character at p (its first byte is
 * 0x80 or above) before end, or 0: no overlong forms, no surrogates,
 * nothing above U+10FFFF. */
static size_t utf8_char(const unsigned char *p, const unsigned char *end)
{
  unsigned c = p[0];
  size_t n = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
  if (n == 0 || (size_t)(end - p) < n) return 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
      (c == 0xF4 && p[1] >= 0x90))
    return 0;
  return n;
}

/* The code unit of the 4 hex digits at p (p..p+4 inside the text), or -1. */
static long hex4(const unsigned char *p)
{
  long v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = p[i], lower = c | 0x20;
    unsigned d = is_digit(c) ? c - '0' : lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : 16;
    if (d > 15) return -1;
    v = v << 4 | (long)d;
  }
  return v;
}

static size_t put_utf8(unsigned char *o, unsigned long cp)
{
  if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
  if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | cp >> 12);
    o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | cp >> 18);
  o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes one escape at *pp (just after its backslash, before q) into o;
 * moves *pp past it. Returns the bytes written, or 0 if it is not a valid
 * escape (or \u0000 in a key). */
static size_t unescape(const unsigned char **pp, const unsigned char *q, unsigned char *o, bool key)
{
  const unsigned char *p = *pp;
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *hit = p < q && *p ? strchr(from, *p) : NULL;
  if (hit) { *o = (unsigned char)to[hit - from]; *pp = p + 1; return 1; }
  if (p >= q || *p != 'u' || q - p < 5) return 0;
  long cp = hex4(p + 1);
  p += 5;
  if (cp >= 0xDC00 && cp <= 0xDFFF) return 0; /* a low surrogate alone */
  if (cp >= 0xD800 && cp <= 0xDBFF) {          /* a high one: its low one must follow */
    long low = q - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2) : -1;
    if (low < 0xDC00 || low > 0xDFFF) return 0;
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    p += 6;
  }
  if (cp < 0 || (cp == 0 && key)) return 0; /* jansson refuses NUL bytes in keys */
  *pp = p;
  return put_utf8(o, (unsigned long)cp);
}

/* The string from start (after its quote) holding an escape: decoded into
 * the zone. Its escapes never decode to more bytes than they take. */
static int escaped_string(scan *sc, const unsigned char *start, msgpack_object *out, bool key)
{
  const unsigned char *q = start;
  while (q < sc->end && *q != '"') q += *q == '\\' && sc->end - q > 1 ? 2 : 1;
  if (q >= sc->end) return RN_JSCAN_REFUSED;
  unsigned char *buf = rn_zone_malloc_no_align(sc->z, (size_t)(q - start)), *o = buf;
  if (!buf) return RN_JSCAN_NOMEM;
  for (const unsigned char *p = start; p < q;) {
    unsigned c = *p;
    size_t n;
    if (c == '\\') {
      p++;
      if (!(n = unescape(&p, q, o, key))) return RN_JSCAN_REFUSED;
      o += n;
      continue;
    }
    if (c < 0x20) return RN_JSCAN_REFUSED;
    n = c < 0x80 ? 1 : utf8_char(p, q);
    if (n == 0) return RN_JSCAN_REFUSED;
    memcpy(o, p, n);
    o += n;
    p += n;
  }
  sc->at = q + 1;
  out->type = MSGPACK_OBJECT_STR;
  out->via.str.ptr = (const char *)buf;
  out->via.str.size = (uint32_t)(o - buf);
  return 0;
}

/* The bytes of the 8 at p that string_special marks, as their high bits
 * (a false mark only ever follows a true one: the lowest is exact). */
static inline uint64_t specials8(const unsigned char *p)
{
  const uint64_t ones = 0x0101010101010101u, highs = ones << 7;
  uint64_t w, quote, bslash;
  memcpy(&w, p, 8);
  quote = w ^ (ones * '"');
  bslash = w ^ (ones * '\\');
  return (((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) | (w - ones * 0x20) | w) & highs;
}

/* The first byte from p that string_special marks, or end. */
static inline const unsigned char *plain_run(const unsigned char *p, const unsigned char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; end - p >= 8; p += 8) {
    uint64_t m = specials8(p);
    if (m) return p + (__builtin_ctzll(m) >> 3); /* the lowest byte is the first */
  }
#endif
  while (p < end && !string_special[*p]) p++;
  return p;
}

/* A string at sc->at (its opening quote). Without escapes it stays in the
 * text. */
static inline __attribute__((always_inline)) int string(scan *sc, msgpack_object *out, bool key)
{
  const unsigned char *start = ++sc->at, *p = start, *end = sc->end;
  for (;;) {
    p = plain_run(p, end);
    if (p >= end || *p < 0x20) return RN_JSCAN_REFUSED;
    if (*p == '"') break;
    if (*p == '\\') return escaped_string(sc, start, out, key);
    size_t n = utf8_char(p, end);
    if (n == 0) return RN_JSCAN_REFUSED;
    p += n;
  }
  sc->at = p + 1; /* no string is longer than UINT32_MAX: rn_jscan checked the text's length */
  out->type = MSGPACK_OBJECT_STR;
  out->via.str.ptr = (const char *)start;
  out->via.str.size = (uint32_t)(p - start);
  return 0;
}

/* The C locale, for reading "1.5" the same whatever locale the host set. */
static locale_t c_locale;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

/* Reads text[0..n) (a number as the grammar allows it) with strtoll or
 * strtod; false where jansson refuses: an integer outside int64, a real
 * that overflows. */
static bool read_number(const char *text, size_t n, bool real, msgpack_object *out, bool *nomem)
{
  char small[64], *buf = n < sizeof small ? small : malloc(n + 1);
  if (!buf) { *nomem = true; return false; }
  memcpy(buf, text, n);
  buf[n] = '\0';
  bool ok = true;
  errno = 0;
  if (!real) {
    long long i = strtoll(buf, NULL, 10);
    ok = errno != ERANGE;
    if (i >= 0) { out->type = MSGPACK_OBJECT_POSITIVE_INTEGER; out->via.u64 = (uint64_t)i; }
    else { out->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; out->via.i64 = i; }
  } else {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_c_locale);
    double d = c_locale ? strtod_l(buf, NULL, c_locale) : strtod(buf, NULL);
    ok = !((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE);
    out->type = MSGPACK_OBJECT_FLOAT64;
    out->via.f64 = d;
  }
  if (buf != small) free(buf);
  return ok;
}

/* A number at sc->at: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static inline __attribute__((always_inline)) int number(scan *sc, msgpack_object *out)
{
  const unsigned char *p = sc->at, *end = sc->end, *start = p;
  bool negative = p < end && *p == '-', real = false;
  p += negative;
  const unsigned char *digits = p;
  uint64_t u = 0; /* the digits' value, used when there are at most 18 (it may wrap beyond) */
  if (p < end && *p == '0') p++;
  else while (p < end && is_digit(*p)) u = u * 10 + (uint64_t)(*p++ - '0');
  if (p == digits || (*digits == '0' && p < end && is_digit(*p))) return RN_JSCAN_REFUSED;
  size_t ndigits = (size_t)(p - digits);
  if (p < end && *p == '.') {
    if (++p >= end || !is_digit(*p)) return RN_JSCAN_REFUSED;
    while (p < end && is_digit(*p)) p++;
    real = true;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || !is_digit(*p)) return RN_JSCAN_REFUSED;
    while (p < end && is_digit(*p)) p++;
    real = true;
  }
  sc->at = p;
  if (!real && ndigits <= 18) { /* fits in int64 whatever the digits: no strtoll */
    if (negative && u) { out->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; out->via.i64 = -(int64_t)u; }
    else { out->type = MSGPACK_OBJECT_POSITIVE_INTEGER; out->via.u64 = u; }
    return 0;
  }
  bool nomem = false;
  if (read_number((const char *)start, (size_t)(p - start), real, out, &nomem)) return 0;
  if (nomem) rn_oom_note();
  return nomem ? RN_JSCAN_NOMEM : RN_JSCAN_REFUSED;
}

static int literal(scan *sc, const char *word, size_t n, msgpack_object *out, msgpack_object_type type, bool b)
{
  if ((size_t)(sc->end - sc->at) < n || memcmp(sc->at, word, n) != 0) return RN_JSCAN_REFUSED;
  sc->at += n;
  out->type = type;
  out->via.boolean = b;
  return 0;
}

/* Room for k more items on the stack. */
static int reserve(scan *sc, size_t k)
{
  if (sc->top + k <= sc->cap) return 0;
  size_t cap = sc->cap * 2;
  msgpack_object *grown = sc->items == sc->inline_items ? malloc(cap * sizeof *grown)
                                                        : realloc(sc->items, cap * sizeof *grown);
  if (!grown) { rn_oom_note(); return RN_JSCAN_NOMEM; }
  if (sc->items == sc->inline_items) memcpy(grown, sc->inline_items, sizeof sc->inline_items);
  sc->items = grown;
  sc->cap = cap;
  return 0;
}

/* Moves the stack's items from base up into a zone array of them. */
static msgpack_object *pop_items(scan *sc, size_t base)
{
  size_t n = sc->top - base;
  msgpack_object *a = rn_zone_malloc(sc->z, sizeof *a * (n ? n : 1));
  if (a && n) memcpy(a, sc->items + base, sizeof *a * n);
  sc->top = base;
  return a;
}

/* Keys are short: compared here, not by memcmp's call. */
static bool same_key(const msgpack_object *a, const msgpack_object *b)
{
  return a->via.str.size == b->via.str.size && rn_same_bytes(a->via.str.ptr, b->via.str.ptr, a->via.str.size);
}

static int key_order(const void *x, const void *y)
{
  const msgpack_object *a = *(const msgpack_object *const *)x, *b = *(const msgpack_object *const *)y;
  if (a->via.str.size != b->via.str.size) return a->via.str.size < b->via.str.size ? -1 : 1;
  return memcmp(a->via.str.ptr, b->via.str.ptr, a->via.str.size);
}

/* Whether a large object's n keys (every other item from keys) hold one
 * twice: sorted, so a big object costs n log n, not n². -1: no memory. */
static int has_duplicate(const msgpack_object *keys, size_t n)
{
  const msgpack_object **sorted = malloc(n * sizeof *sorted);
  if (!sorted) { rn_oom_note(); return -1; }
  for (size_t i = 0; i < n; i++) sorted[i] = &keys[2 * i];
  qsort(sorted, n, sizeof *sorted, key_order);
  int dup = 0;
  for (size_t i = 1; i < n && !dup; i++) dup = same_key(sorted[i - 1], sorted[i]);
  free(sorted);
  return dup;
}

/* Whether sc->at, after any space, is at c (most often there is none). */
static inline bool at_char(scan *sc, unsigned char c)
{
  if (sc->at < sc->end && *sc->at == c) return true;
  skip_space(sc);
  return sc->at < sc->end && *sc->at == c;
}

/* A key's bit in an object's filter of the keys read: only a key whose bit
 * is set already (same length, first and last bytes alike) is compared. */
static inline uint64_t key_bit(const msgpack_object *k)
{
  uint32_t n = k->via.str.size;
  const unsigned char *s = (const unsigned char *)k->via.str.ptr;
  unsigned h = n ? n + s[0] * 3u + s[n - 1] : 0;
  return (uint64_t)1 << (h & 63);
}

/* The next key of an object at sc->at; the object's first LINEAR_DUP_CHECK
 * keys are checked against each other here (seen: their key_bits), the
 * rest when it closes. */
static inline __attribute__((always_inline)) int object_key(scan *sc, size_t base, msgpack_object *key,
                                                            uint64_t *seen)
{
  if (!at_char(sc, '"')) return RN_JSCAN_REFUSED;
  int rc = string(sc, key, true);
  if (rc) return rc;
  size_t have = (sc->top - base) / 2;
  if (have < LINEAR_DUP_CHECK) {
    uint64_t bit = key_bit(key);
    if (*seen & bit)
      for (size_t i = base; i < sc->top; i += 2)
        if (same_key(&sc->items[i], key)) return RN_JSCAN_REFUSED;
    *seen |= bit;
  }
  if (!at_char(sc, ':')) return RN_JSCAN_REFUSED;
  sc->at++;
  return 0;
}

/* One value at sc->at (after any space), nested depth deep. */
static inline __attribute__((always_inline)) int value(scan *sc, msgpack_object *out, int depth)
{
  if (depth > RN_JSCAN_MAX_DEPTH) return RN_JSCAN_REFUSED;
  skip_space(sc);
  if (sc->at >= sc->end) return RN_JSCAN_REFUSED;
  switch (*sc->at) {
  case '"': return string(sc, out, false);
  case '{': return container(sc, out, depth, true);
  case '[': return container(sc, out, depth, false);
  case 't': return literal(sc, "true", 4, out, MSGPACK_OBJECT_BOOLEAN, true);
  case 'f': return literal(sc, "false", 5, out, MSGPACK_OBJECT_BOOLEAN, false);
  case 'n': return literal(sc, "null", 4, out, MSGPACK_OBJECT_NIL, false);
  default: return *sc->at == '-' || is_digit(*sc->at) ? number(sc, out) : RN_JSCAN_REFUSED;
  }
}

/* An object or array at sc->at, its elements at depth + 1. */
static int container(scan *sc, msgpack_object *out, int depth, bool is_object)
{
  unsigned char close = is_object ? '}' : ']';
  size_t base = sc->top;
  sc->at++;
  skip_space(sc);
  uint64_t seen = 0;
  if (sc->at < sc->end && *sc->at == close) sc->at++;
  else for (;;) {
    msgpack_object key, v;
    int rc = is_object ? object_key(sc, base, &key, &seen) : 0;
    if (rc) return rc;
    rc = value(sc, &v, depth + 1);
    if (!rc) rc = reserve(sc, 2);
    if (rc) return rc;
    if (is_object) sc->items[sc->top++] = key;
    sc->items[sc->top++] = v;
    if (sc->at < sc->end && *sc->at != ',' && *sc->at != close) skip_space(sc); /* most often none */
    if (sc->at < sc->end && *sc->at == ',') { sc->at++; continue; }
    if (sc->at < sc->end && *sc->at == close) { sc->at++; break; }
    return RN_JSCAN_REFUSED;
  }
  size_t n = sc->top - base;
  if (is_object && n / 2 > LINEAR_DUP_CHECK) {
    int dup = has_duplicate(sc->items + base, n / 2);
    if (dup) return dup < 0 ? RN_JSCAN_NOMEM : RN_JSCAN_REFUSED;
  }
  msgpack_object *items = pop_items(sc, base);
  if (!items) return RN_JSCAN_NOMEM;
  if (is_object) {
    out->type = MSGPACK_OBJECT_MAP;
    out->via.map.size = (uint32_t)(n / 2);
    out->via.map.ptr = (msgpack_object_kv *)(void *)items;
  } else {
    out->type = MSGPACK_OBJECT_ARRAY;
    out->via.array.size = (uint32_t)n;
    out->via.array.ptr = items;
  }
  return 0;
}

rn_jscan_rc rn_jscan(const char *text, size_t len, msgpack_object *out, msgpack_zone *z)
{
  scan sc;
  sc.at = (const unsigned char *)text;
  sc.end = sc.at + len;
  sc.z = z;
  sc.items = sc.inline_items;
  sc.top = 0;
  sc.cap = INLINE_ITEMS;
  int rc = len && len <= UINT32_MAX ? value(&sc, out, 0) : RN_JSCAN_REFUSED; /* jansson reads a longer one */
  if (!rc) {
    skip_space(&sc);
    if (sc.at != sc.end) rc = RN_JSCAN_REFUSED;
  }
  if (sc.items != sc.inline_items) free(sc.items);
  return (rn_jscan_rc)rc;
}
