/* fuzz_row.c — the row walkers and decoders (core/row.c) on arbitrary bytes.
 *
 * rn_msgpack_size must agree with msgpack-c: a size it accepts is one whole
 * value msgpack_unpack reads to the same end (and only then is msgpack_unpack
 * called: the size check is what keeps a hostile count from allocating).
 * For a buffer that holds an array, rn_row_spans must find the same element
 * bounds, and the stored-row readers (rn_row_unpack, rn_row_to_map,
 * rn_row_patch) must read it without going past its end, for a schema with
 * every column type whose width matches. A row that schema accepts
 * normalizes to canonical bytes that rn_ndjson_line writes. */
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "must.h"
#include "ndjson.h"
#include "row.h"

#define MAXCOLS 64

static rn_schema *schema_of(int ncols)
{
  static const rn_type types[] = { RN_T_INT, RN_T_FLOAT, RN_T_STRING, RN_T_BOOL, RN_T_BYTES,
                                   RN_T_LIST, RN_T_MAP, RN_T_ANY, RN_T_STRUCT };
  rn_err e;
  rn_schema *s = rn_schema_new();
  MUST(s);
  for (int i = 0; i < ncols; i++) {
    char name[16];
    int n = snprintf(name, sizeof name, "c%d", i);
    rn_type t = types[i % 9];
    rn_schema *fields = NULL;
    if (t == RN_T_STRUCT) {
      fields = rn_schema_new();
      MUST(fields && rn_schema_add(fields, "x", 1, RN_T_INT, true, NULL, &e) >= 0 &&
           rn_schema_add(fields, "y", 1, RN_T_MAP, true, NULL, &e) >= 0);
    }
    MUST(rn_schema_add(s, name, (size_t)n, t, i != 0, fields, &e) >= 0); /* the key is never null */
  }
  if (ncols > 0) {
    int key = 0;
    MUST(rn_schema_set_key(s, &key, 1, "r", &e) == 0);
  }
  return s;
}

/* The elements a container header at d claims (maps: keys and values) and
 * the header's size; 0 children for a scalar. */
static uint64_t children_of(const unsigned char *d, size_t *head)
{
  uint64_t n;
  *head = 1;
  if (d[0] >= 0x80 && d[0] <= 0x8f) return 2 * (uint64_t)(d[0] & 0x0f);
  if (d[0] >= 0x90 && d[0] <= 0x9f) return d[0] & 0x0f;
  if (d[0] == 0xdc || d[0] == 0xde) { *head = 3; n = (uint64_t)d[1] << 8 | d[2]; }
  else if (d[0] == 0xdd || d[0] == 0xdf) {
    *head = 5;
    n = (uint64_t)d[1] << 24 | (uint64_t)d[2] << 16 | (uint64_t)d[3] << 8 | d[4];
  } else return 0;
  return d[0] == 0xde || d[0] == 0xdf ? 2 * n : n;
}

/* Whether the well-formed value at d nests more than limit containers. */
static bool deeper_than(const unsigned char *d, size_t len, int limit)
{
  size_t head;
  uint64_t n = children_of(d, &head);
  if (head == 1 && n == 0 && !(d[0] >= 0x80 && d[0] <= 0x9f)) return false; /* a scalar */
  if (limit == 0) return true;
  size_t off = head;
  for (uint64_t i = 0; i < n; i++) {
    if (deeper_than(d + off, len - off, limit - 1)) return true;
    off += rn_msgpack_size((const char *)d + off, len - off);
  }
  return false;
}

/* msgpack-c's reading of the value rn_msgpack_size measured as n bytes
 * (msgpack-c refuses more than 32 nested containers, as out of memory). */
static void check_size(const char *d, size_t len, size_t n)
{
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object o;
  size_t off = 0;
  int rc = msgpack_unpack(d, len, &off, &z, &o);
  if (rc == MSGPACK_UNPACK_NOMEM_ERROR && deeper_than((const unsigned char *)d, n, 32)) {
    msgpack_zone_destroy(&z);
    return;
  }
  if ((rc != MSGPACK_UNPACK_SUCCESS && rc != MSGPACK_UNPACK_EXTRA_BYTES) || off != n) {
    fprintf(stderr, "fuzz: rn_msgpack_size says %zu bytes, msgpack_unpack %d at %zu\n", n, rc, off);
    abort();
  }
  msgpack_zone_destroy(&z);
}

/* The number of elements an array header at d claims, or -1. */
static long array_count(const unsigned char *d, size_t len)
{
  if (len >= 1 && d[0] >= 0x90 && d[0] <= 0x9f) return d[0] & 0x0f;
  if (len >= 3 && d[0] == 0xdc) return (long)d[1] << 8 | d[2];
  return -1; /* 0xdd: counts past MAXCOLS anyway */
}

/* Normalizes a row of s and packs it into out; -1 if s refuses it. */
static int normalize_packed(const rn_schema *s, const char *d, size_t len, msgpack_zone *z,
                            msgpack_sbuffer *out)
{
  const msgpack_object *v = rn_row_unpack(d, len, s->ncols, z);
  MUST(v);
  msgpack_object vals[MAXCOLS];
  uint8_t given[MAXCOLS];
  memcpy(vals, v, sizeof *vals * (size_t)s->ncols);
  memset(given, 1, sizeof given);
  rn_err e = { .code = RN_OK };
  if (rn_row_normalize(s, "r", RN_ROW_FULL, vals, given, z, &e)) {
    MUST(e.code == RN_EINVAL && e.msg[0]);
    return -1;
  }
  rn_row_pack(s, vals, out);
  return 0;
}

/* A row the schema accepts is stored as canonical bytes: normalizing them
 * again changes nothing, and the writers read them (stored rows are always
 * normalized, so only these reach rn_ndjson_line). */
static void check_normalized(const rn_schema *s, const char *d, size_t len, msgpack_zone *z)
{
  msgpack_sbuffer once, twice, line;
  msgpack_sbuffer_init(&once);
  msgpack_sbuffer_init(&twice);
  msgpack_sbuffer_init(&line);
  if (normalize_packed(s, d, len, z, &once) == 0) {
    MUST(rn_msgpack_size(once.data, once.size) == once.size);
    MUST(normalize_packed(s, once.data, once.size, z, &twice) == 0);
    MUST(once.size == twice.size && memcmp(once.data, twice.data, once.size) == 0);
    MUST(rn_ndjson_line(s, once.data, once.size, false, "verb", "INSERT", NULL, NULL, z, &line) == 0);
    MUST(s->ncols == 0 || rn_ndjson_line(s, once.data, once.size, true, NULL, NULL, NULL, NULL, z, &line) == 0);
  }
  msgpack_sbuffer_destroy(&once);
  msgpack_sbuffer_destroy(&twice);
  msgpack_sbuffer_destroy(&line);
}

static void check_row(const char *d, size_t len, int ncols)
{
  size_t starts[MAXCOLS + 1];
  if (rn_row_spans(d, len, ncols, ncols, starts) != 0) {
    fprintf(stderr, "fuzz: rn_row_spans refuses an array rn_msgpack_size accepts\n");
    abort();
  }
  for (int i = 0; i < ncols; i++)
    MUST(rn_msgpack_size(d + starts[i], len - starts[i]) == starts[i + 1] - starts[i]);
  rn_schema *s = schema_of(ncols);
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_sbuffer out;
  msgpack_sbuffer_init(&out);
  MUST(rn_row_unpack(d, len, ncols, &z));
  MUST(rn_row_to_map(s, d, len, &z, &out) == 0);
  /* A patch giving every other column keeps the rest's bytes. */
  msgpack_object vals[MAXCOLS];
  uint8_t given[MAXCOLS];
  for (int i = 0; i < ncols; i++) {
    given[i] = i % 2;
    vals[i].type = MSGPACK_OBJECT_NIL;
  }
  msgpack_sbuffer_clear(&out);
  MUST(rn_row_patch(s, d, len, vals, given, &out) == 0);
  size_t pstarts[MAXCOLS + 1];
  MUST(rn_row_spans(out.data, out.size, ncols, ncols, pstarts) == 0);
  for (int i = 0; i < ncols; i += 2)
    MUST(pstarts[i + 1] - pstarts[i] == starts[i + 1] - starts[i] &&
         memcmp(out.data + pstarts[i], d + starts[i], starts[i + 1] - starts[i]) == 0);
  check_normalized(s, d, len, &z);
  msgpack_sbuffer_destroy(&out);
  msgpack_zone_destroy(&z);
  rn_schema_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *d = (const char *)data;
  size_t n = rn_msgpack_size(d, size);
  size_t starts[MAXCOLS + 1];
  long count = array_count(data, size);
  if (n == 0) {
    /* A row that is not one whole value has no spans either. */
    if (count >= 0 && count <= MAXCOLS && rn_row_spans(d, size, (int)count, (int)count, starts) == 0)
      abort();
    return 0;
  }
  check_size(d, size, n);
  if (deeper_than(data, n, 32)) return 0;
  if (count >= 0 && count <= MAXCOLS) check_row(d, n, (int)count);
  return 0;
}
