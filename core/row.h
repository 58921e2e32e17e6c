/* row.h — checking, normalizing and encoding rows.
 *
 * A row travels as a msgpack array in slot order:
 *
 *     |array(ncols)|slot 0|slot 1|...|slot ncols-1|
 *
 * Each value is normalized against its column before it is packed, so the
 * same logical row always has the same bytes: ints are msgpack ints, floats
 * float64 (one NaN: rn_float_canon), bytes bin, strings valid UTF-8 str, map entries sorted by key,
 * struct values arrays in their fields' slot order. Equal rows are equal
 * bytes; no-op detection compares bytes, keyless matching and distinct
 * also take -0.0 as 0.0 (rn_row_same).
 *
 * Input values that runnel cannot hold at all (a Lua function, say) arrive
 * as an ext object of type RN_EXT_FOREIGN whose payload names their type, so
 * the error can say "got function". */
#ifndef RN_ROW_H
#define RN_ROW_H

#include <msgpack.h>
#include <string.h>

#include "schema.h"

#define RN_EXT_FOREIGN 127

/* Containers (lists, maps, structs) a value may nest. msgpack-c reads at
 * most 32 nested containers back; a stored row adds one (its array), and
 * rows handed to subscribers and CDC images wrap values in up to three
 * more, so a value deeper than this could be stored but not read again. */
#define RN_MAX_NESTING 24

typedef enum rn_rowmode {
  RN_ROW_FULL,   /* a whole row: missing columns take their default or null */
  RN_ROW_PATCH,  /* key plus the columns to set */
  RN_ROW_KEY,    /* the key columns; other given columns are checked, then not used */
  RN_ROW_AS_TOLD /* a row made again as its sinks were told it (evolve_log.c:
                  * an old function's, or one over rows as told, in the
                  * columns they had): as RN_ROW_FULL, but a missing column
                  * without a default is null (what made it may be gone: its
                  * input's column was dropped, or is null as told) */
} rn_rowmode;

/* Every NaN as the one quiet NaN 0x7ff8000000000000: their bits say
 * nothing (0/0 and -(0/0) differ in sign only), so a row holding NaN has
 * one encoding, and a keyless delete or a distinct finds it by its bytes. */
static inline double rn_float_canon(double d)
{
  if (d != d) {
    uint64_t bits = 0x7ff8000000000000ULL;
    memcpy(&d, &bits, sizeof d);
  }
  return d;
}

/* Rows as a keyless table and a distinct compare them: equal bytes, or
 * equal once every float -0.0 in them is read as 0.0 (they are equal in
 * Lua and SQL; a row keeps the sign it was given) and every NaN as
 * rn_float_canon's (rows stored before 0.17 kept any NaN's bits).
 * rn_row_hash is the hash that equal rows share; a state of format 0
 * (store.h's "fmt") hashed the bytes as they were (upgrade.c). */
bool rn_row_same(const char *a, size_t alen, const char *b, size_t blen);
uint64_t rn_row_hash(const char *row, size_t len);

/* Rewrites row's -0.0 as 0.0 and its NaNs as rn_float_canon's, in place:
 * the one row of its class rn_row_same finds equal, for a relation whose
 * rows stand for that class (a distinct), not for one input row. */
void rn_row_zero_signs(char *row, size_t len);

/* Normalizes vals[0..ncols) in place; given[i] says whether slot i was given
 * (absent and null differ in a patch). Nested memory comes from z. Errors name
 * rel and the column: `players: column "@NAME": expected string, got number`. */
int rn_row_normalize(const rn_schema *s, const char *rel, rn_rowmode mode,
                     msgpack_object *vals, const uint8_t *given,
                     msgpack_zone *z, rn_err *e);

/* Normalizes one value against a column (not for null: callers check). */
int rn_value_normalize(const rn_column *c, msgpack_object *v, msgpack_zone *z,
                       const char *rel, rn_err *e);

/* Appends the row's encoding to out. */
void rn_row_pack(const rn_schema *s, const msgpack_object *vals, msgpack_sbuffer *out);

/* Whether v, an integer, is a double exactly, so int -> float keeps its
 * number (any other value: true). */
bool rn_int_is_float(const msgpack_object *v);

/* Decodes a row into its slot values (pointing into data, which must outlive
 * them; arrays from z). Returns the ncols values, or NULL if data is not a
 * row of ncols columns. */
const msgpack_object *rn_row_unpack(const char *data, size_t len, int ncols,
                                    msgpack_zone *z);

/* The size of the one msgpack value at data, or 0 if it is not well formed
 * within len bytes. Every element a container claims must be there, so a
 * buffer that passes cannot make a decoder allocate more than it holds. */
size_t rn_msgpack_size(const char *data, size_t len);

/* The whole size of a value its first byte alone gives (fixints, nil,
 * booleans, fixstr, fixed-width numbers), else 0. */
extern const uint8_t rn_scalar_size[256];

/* The size of the one msgpack value at v, ending by end; 0 if it is not
 * well formed there. The common scalars take a table lookup. */
static inline size_t rn_value_size(const char *v, const char *end)
{
  size_t sz = v < end ? rn_scalar_size[(unsigned char)*v] : 0;
  return sz && sz <= (size_t)(end - v) ? sz : rn_msgpack_size(v, (size_t)(end - v));
}

/* A scalar (nil, bool, int, float, str, bin) of sz bytes at p (sz >= 1,
 * the size rn_value_size gives) into o, as msgpack-c's unpacker makes it;
 * false for anything else. */
bool rn_scalar_object(const unsigned char *p, size_t sz, msgpack_object *o);

/* Decodes a map whose keys are strings and values scalars (nil, bool,
 * int, float, str, bin) into *out as msgpack_unpack would (strings and
 * bins pointing into data, the entries from z), without its general
 * machinery: a host's change. data must hold one well-formed value in len
 * bytes (rn_msgpack_size). 1: decoded; 0: not such a map (rn_unpack it);
 * -1: out of memory (noted). */
int rn_unpack_flat_map(const char *data, size_t len, msgpack_zone *z, msgpack_object *out);

/* Packs the row old with the given columns replaced by vals (normalized),
 * the others copied as they are: a patch without decoding the old row.
 * -1 if old is not an array of s's column count whose columns up to the
 * last one kept are well formed. */
int rn_row_patch(const rn_schema *s, const char *old, size_t old_len, const msgpack_object *vals,
                 const uint8_t *given, msgpack_sbuffer *out);

/* The byte offsets of a row's first `upto` values (starts[upto] = the end
 * of the last), without decoding them: for copying values between rows.
 * 0, or -1 if row is not an array of ncols values whose first upto are
 * well-formed (upto = ncols checks them all). */
int rn_row_spans(const char *row, size_t len, int ncols, int upto, size_t *starts);

/* Whether row is exactly one stored row of s: an array of its column
 * count, each value well formed and of its column's type at the top (or
 * nil: an old image may hold null where the column no longer does),
 * nothing after it. For rows read back from outside a table's own
 * database (an outbox entry) before a sink is handed them. */
bool rn_row_fits(const rn_schema *s, const char *row, size_t len);

/* Appends a stored row of s as a msgpack map keyed by external names
 * (structs as maps too; nulls as nil). -1 if row is not a row of s. */
int rn_row_to_map(const rn_schema *s, const char *row, size_t len, msgpack_zone *z, msgpack_sbuffer *out);

/* "id = 1" or "a = 1, b = \"x\"" into buf. */
void rn_key_format(const rn_schema *s, const msgpack_object *vals, char *buf, size_t len);
/* One key value as rn_key_format writes it (a float as 7.0 or 1e-07), as
 * snprintf: its length, len or more when it did not fit. */
int rn_key_value_text(char *buf, size_t len, const msgpack_object *v);
/* What Lua would call the value's type: "number", "string", "table" … */
const char *rn_value_kind(const msgpack_object *v);
/* rn_value_kind in a C host's words where it sent a container: "a list"
 * for a msgpack array, "a map" for a map (rn_value_kind says "table"). */
const char *rn_value_kind_sent(const msgpack_object *v);
bool rn_utf8_valid(const char *s, size_t len);

/* ---- writing msgpack in place: room reserved once, then plain stores ---- */

/* Room for n more bytes at the end of sb; -1 (noted) when out of memory. */
int rn_sbuf_grow(msgpack_sbuffer *sb, size_t n);
static inline int rn_sbuf_reserve(msgpack_sbuffer *sb, size_t n)
{
  return sb->alloc - sb->size >= n ? 0 : rn_sbuf_grow(sb, n);
}

/* msgpack's header of a container or string of n at w, in its shortest
 * form (fix, then m8 unless 0, m16, m32); returns the end. What
 * msgpack_pack_map/array/str write, without a write call each. */
static inline char *rn_put_header(char *w, uint32_t n, unsigned char fix, unsigned fix_max, unsigned char m8,
                                  unsigned char m16, unsigned char m32)
{
  if (n <= fix_max) *w++ = (char)(fix | n);
  else if (m8 && n <= 0xff) { *w++ = (char)m8; *w++ = (char)n; }
  else if (n <= 0xffff) { *w++ = (char)m16; *w++ = (char)(n >> 8); *w++ = (char)n; }
  else { *w++ = (char)m32; for (int k = 24; k >= 0; k -= 8) *w++ = (char)(n >> k); }
  return w;
}
#define rn_put_map_header(w, n) rn_put_header(w, n, 0x80, 15, 0, 0xde, 0xdf)
#define rn_put_array_header(w, n) rn_put_header(w, n, 0x90, 15, 0, 0xdc, 0xdd)
#define rn_put_str_header(w, n) rn_put_header(w, n, 0xa0, 31, 0xd9, 0xda, 0xdb)

/* u as msgpack_pack_uint64 writes it (at most 9 bytes); returns the end.
 * Each width written by stores of its own (no loop over the bytes). */
static inline char *rn_put_uint(char *w, uint64_t u)
{
  if (u < 0x80) { *w = (char)u; return w + 1; }
  if (u <= 0xff) { w[0] = (char)0xcc; w[1] = (char)u; return w + 2; }
  if (u <= 0xffff) { w[0] = (char)0xcd; w[1] = (char)(u >> 8); w[2] = (char)u; return w + 3; }
  if (u <= 0xffffffff) {
    w[0] = (char)0xce;
    w[1] = (char)(u >> 24); w[2] = (char)(u >> 16); w[3] = (char)(u >> 8); w[4] = (char)u;
    return w + 5;
  }
  w[0] = (char)0xcf;
  for (int k = 0; k < 8; k++) w[1 + k] = (char)(u >> (56 - 8 * k));
  return w + 9;
}

/* n bytes from src to w; the short runs of names and values as fixed-size
 * (inlined) copies that may overlap instead of a call each. */
static inline char *rn_put_bytes(char *w, const char *src, size_t n)
{
  if (n >= 8 && n <= 16) {
    memcpy(w, src, 8);
    memcpy(w + n - 8, src + n - 8, 8);
  } else if (n >= 4 && n < 8) {
    memcpy(w, src, 4);
    memcpy(w + n - 4, src + n - 4, 4);
  } else if (n > 0 && n < 4) {
    w[0] = src[0];
    w[n / 2] = src[n / 2];
    w[n - 1] = src[n - 1];
  } else if (n) {
    memcpy(w, src, n);
  }
  return w + n;
}

/* rn_put_bytes for a run at src with at least `readable` bytes there: one
 * fixed 16-byte copy for a short run. w must have 16 bytes of room past
 * the run. */
static inline char *rn_put_run(char *w, const char *src, size_t n, size_t readable)
{
  if (n > 16 || readable < 16) return rn_put_bytes(w, src, n);
  memcpy(w, src, 16);
  return w + n;
}

#endif
