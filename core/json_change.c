/* json_change.c — changes read from JSON text (an NDJSON input line, a
 * JetStream message): what JSON numbers cannot say exactly is said here,
 * naming the relation and the column (the caller adds file and line).
 *
 * JSON integers become ints, other numbers doubles (json.h), and an int
 * column takes a whole double (3.0 is 3; 3.5 is refused: row.c). Beyond
 * ±2^53 a double cannot hold every integer: 9007199254740993.0 reads as
 * 9007199254740992, so a number with a fraction part or an exponent that
 * large is refused for an int column (or an int field of a struct, at any
 * depth) rather than stored as another integer, saying how it was written
 * (row.c refuses any whole float beyond ±2^53 for an int, a Lua or msgpack
 * one too). A number no int64 or double holds (99999999999999999999, 1e400)
 * makes the parser refuse the line, saying only where in it: the line is
 * read again with that number as a marker string to find its column. A
 * value the parser cannot read at all (bytes that are not UTF-8, a lone
 * surrogate, NaN) is found the same way: the token where it stopped is set
 * aside as a marker and the line read again (rn_json_change_unread). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "ndjson.h"
#include "pipeline.h"
#include "schema.h"

static const char marker[] = "\\u0000runnel number\\u0000";      /* as JSON text */
static const char marker_value[] = "\0runnel number";            /* as read (with its last NUL) */
#define MARKER_LEN (sizeof marker_value)

/* A value jansson could not read set aside (rn_json_change_unread): a
 * marker that may be a key too (jansson refuses a NUL in one). */
static const char unread_marker[] = "\\u0001runnel value\\u0001";
static const char unread_value[] = "\1runnel value\1";

typedef struct mark {
  const char *value; /* as read */
  size_t len;
} mark;

static const mark number_mark = { marker_value, MARKER_LEN }, unread_mark = { unread_value, sizeof unread_value - 1 };

static bool is_marker(const msgpack_object *v, const mark *m)
{
  return v->type == MSGPACK_OBJECT_STR && v->via.str.size == m->len && memcmp(v->via.str.ptr, m->value, m->len) == 0;
}

/* Whether v is the marker or holds it (a value, or a key of a map in it). */
static bool holds_marker(const msgpack_object *v, const mark *m)
{
  if (is_marker(v, m)) return true;
  if (v->type == MSGPACK_OBJECT_ARRAY)
    for (uint32_t i = 0; i < v->via.array.size; i++)
      if (holds_marker(&v->via.array.ptr[i], m)) return true;
  if (v->type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < v->via.map.size; i++)
      if (is_marker(&v->via.map.ptr[i].key, m) || holds_marker(&v->via.map.ptr[i].val, m)) return true;
  return false;
}

/* The column of row whose value holds the marker: its key and value, or
 * NULL. */
static const msgpack_object_kv *marked_column(const msgpack_object *row, const mark *m)
{
  if (!row || row->type != MSGPACK_OBJECT_MAP) return NULL;
  for (uint32_t i = 0; i < row->via.map.size; i++)
    if (row->via.map.ptr[i].key.type == MSGPACK_OBJECT_STR && holds_marker(&row->via.map.ptr[i].val, m))
      return &row->via.map.ptr[i];
  return NULL;
}

/* The entries of a struct's value v: a map of field names, or an array
 * in slot order. */
typedef struct struct_entries {
  const rn_schema *fields;
  const msgpack_object *v;
  bool in_order;
  uint32_t n;
} struct_entries;

static struct_entries entries_of(const rn_schema *fields, const msgpack_object *v)
{
  bool in_order = v->type == MSGPACK_OBJECT_ARRAY && v->via.array.size == (uint32_t)fields->ncols;
  uint32_t n = in_order ? v->via.array.size : v->type == MSGPACK_OBJECT_MAP ? v->via.map.size : 0;
  return (struct_entries){ fields, v, in_order, n };
}

static const msgpack_object *entry_value(const struct_entries *e, uint32_t i)
{
  return e->in_order ? &e->v->via.array.ptr[i] : &e->v->via.map.ptr[i].val;
}

/* Entry i's field slot; -1: no such field (row.c says why). */
static int entry_slot(const struct_entries *e, uint32_t i)
{
  if (e->in_order) return (int)i;
  const msgpack_object *k = &e->v->via.map.ptr[i].key;
  return k->type == MSGPACK_OBJECT_STR ? rn_schema_slot(e->fields, k->via.str.ptr, k->via.str.size) : -1;
}

/* The struct field of column c whose value, in v (a map of field names,
 * or an array in slot order), holds marker m: its name appended to path
 * (` field "x"`, as row.c words it) at *len, and so on inward; the
 * innermost column or field reached. */
static const rn_column *marked_field(const rn_column *c, const msgpack_object *v, const mark *m, char *path,
                                     size_t cap, size_t *len, int depth)
{
  if (c->type != RN_T_STRUCT || !c->fields || depth > 64) return c;
  struct_entries e = entries_of(c->fields, v);
  for (uint32_t i = 0; i < e.n; i++) {
    const msgpack_object *fv = entry_value(&e, i);
    if (!holds_marker(fv, m)) continue;
    int slot = entry_slot(&e, i);
    if (slot < 0) return c;
    int w = snprintf(path + *len, cap - *len, " field \"%s\"", c->fields->cols[slot].name);
    if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
    return marked_field(&c->fields->cols[slot], fv, m, path, cap, len, depth + 1);
  }
  return c;
}

/* Says that number (n bytes) in column kv of r is out of range, naming the
 * struct field it is in. */
static void number_error(rn_pipeline *p, const rn_rel *r, const msgpack_object_kv *kv, const char *number, size_t n)
{
  const msgpack_object *key = &kv->key, *v = &kv->val;
  char quoted[256], column[768];
  int slot = rn_schema_slot(r->schema, key->via.str.ptr, key->via.str.size);
  bool real = memchr(number, '.', n) || memchr(number, 'e', n) || memchr(number, 'E', n);
  int shown = n > 64 ? 64 : (int)n;
  const char *more = n > 64 ? "…" : "";
  size_t len = (size_t)snprintf(column, sizeof column, "column %s",
                                rn_json_quote(quoted, sizeof quoted, key->via.str.ptr, key->via.str.size));
  const rn_column *c = slot >= 0 ? marked_field(&r->schema->cols[slot], v, &number_mark, column, sizeof column, &len, 0)
                                 : NULL;
  if (real)
    rn_err_set(&p->err, RN_EINVAL, "%s: %s: the number %.*s%s is beyond a float's range (about ±1.8e308)",
               r->name, column, shown, number, more);
  else if (c && c->type == RN_T_FLOAT)
    rn_err_set(&p->err, RN_EINVAL, "%s: %s: the integer %.*s%s is beyond int64, which a JSON integer must fit "
               "in: for a float %s write it with a fraction part or an exponent (%.*s%s.0)",
               r->name, column, shown, number, more, c == &r->schema->cols[slot] ? "column" : "field", shown, number,
               more);
  else
    rn_err_set(&p->err, RN_EINVAL, "%s: %s: the integer %.*s%s is beyond int64 (-9223372036854775808 to "
               "9223372036854775807)", r->name, column, shown, number, more);
}

/* Replaces the next number out of range in text[0..*len) by 0 (a text
 * shorter by n - 1 bytes); false if none is left. */
static bool zero_next_overflow(char *text, size_t *len)
{
  size_t at, n;
  if (!rn_json_overflow_at(text, *len, &at, &n)) return false;
  text[at] = '0';
  memmove(text + at + 1, text + at + n, *len - at - n);
  *len -= n - 1;
  return true;
}

void rn_json_change_refused(rn_pipeline *p, const char *line, size_t len)
{
  size_t at, n;
  if (!rn_json_overflow_at(line, len, &at, &n)) return;
  size_t mlen = sizeof marker - 1 + 2, cap = len - n + mlen;
  char *copy = malloc(cap);
  msgpack_zone z;
  if (!copy) return;
  if (!rn_zone_init(&z, 1024)) { free(copy); return; }
  memcpy(copy, line, at);
  copy[at] = '"';
  memcpy(copy + at + 1, marker, sizeof marker - 1);
  copy[at + mlen - 1] = '"';
  memcpy(copy + at + mlen, line + at + n, len - at - n);
  msgpack_object obj;
  rn_err ignored = { .code = RN_OK };
  const msgpack_object *rel = NULL, *op = NULL, *row = NULL, *other;
  const msgpack_object_kv *kv;
  size_t clen = cap;
  bool read = false; /* numbers out of range after the first are read as 0: the first names the column */
  while (!(read = !rn_json_parse(copy, clen, &obj, &z, &ignored)) && zero_next_overflow(copy, &clen))
    msgpack_zone_clear(&z);
  if (read) rn_change_fields(&obj, &rel, &op, &row, &other);
  rn_rel *r = rel && rel->type == MSGPACK_OBJECT_STR ? rn_rel_named(p, rel->via.str.ptr, rel->via.str.size) : NULL;
  if (r && (kv = marked_column(row, &number_mark))) number_error(p, r, kv, line + at, n);
  rn_zone_destroy(&z);
  free(copy);
}

static bool structural(char c) { return c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ','; }
static bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The token of text holding byte at, into [*start, *end): a string, its
 * quotes included (to the end when it is not closed), or a bare word (NaN,
 * +1, tru); false when at is a structural character or a space. */
static bool token_around(const char *text, size_t len, size_t at, size_t *start, size_t *end)
{
  size_t i = 0;
  while (i < len && i <= at) {
    size_t b = i;
    if (text[i] == '"') {
      for (i++; i < len && text[i] != '"'; i += text[i] == '\\' ? 2 : 1) {}
      i = i < len ? i + 1 : len;
    } else if (structural(text[i]) || space(text[i])) {
      i++;
      continue;
    } else {
      while (i < len && !structural(text[i]) && !space(text[i]) && text[i] != '"') i++;
    }
    if (at < i) {
      *start = b;
      *end = i;
      return true;
    }
  }
  return false;
}

/* The key of row's column whose name is the marker, or NULL. */
static const msgpack_object *marked_name(const msgpack_object *row)
{
  if (!row || row->type != MSGPACK_OBJECT_MAP) return NULL;
  for (uint32_t i = 0; i < row->via.map.size; i++)
    if (is_marker(&row->via.map.ptr[i].key, &unread_mark)) return &row->via.map.ptr[i].key;
  return NULL;
}

void rn_json_change_unread(rn_pipeline *p, const char *line, size_t len)
{
  size_t at, start, end;
  if (!rn_json_error_at(line, len, &at) || !token_around(line, len, at ? at - 1 : 0, &start, &end)) return;
  size_t mlen = sizeof unread_marker - 1 + 2, cap = len - (end - start) + mlen;
  char *copy = malloc(cap);
  msgpack_zone z;
  if (!copy) return;
  if (!rn_zone_init(&z, 1024)) { free(copy); return; }
  memcpy(copy, line, start); /* the token set aside: the marker in its place */
  copy[start] = '"';
  memcpy(copy + start + 1, unread_marker, sizeof unread_marker - 1);
  copy[start + mlen - 1] = '"';
  memcpy(copy + start + mlen, line + end, len - end);
  msgpack_object obj;
  rn_err ignored = { .code = RN_OK };
  const msgpack_object *rel = NULL, *op = NULL, *row = NULL, *other;
  const msgpack_object_kv *kv;
  if (!rn_json_parse(copy, cap, &obj, &z, &ignored)) rn_change_fields(&obj, &rel, &op, &row, &other);
  rn_rel *r = rel && rel->type == MSGPACK_OBJECT_STR ? rn_rel_named(p, rel->via.str.ptr, rel->via.str.size) : NULL;
  char quoted[256], prefix[RN_NAME_MAX + 300];
  if (r && (kv = marked_column(row, &unread_mark))) {
    size_t n = (size_t)snprintf(prefix, sizeof prefix, "%s: column %s", r->name,
                                rn_json_quote(quoted, sizeof quoted, kv->key.via.str.ptr, kv->key.via.str.size));
    int slot = rn_schema_slot(r->schema, kv->key.via.str.ptr, kv->key.via.str.size);
    if (slot >= 0) marked_field(&r->schema->cols[slot], &kv->val, &unread_mark, prefix, sizeof prefix, &n, 0);
    rn_err_prefix(&p->err, prefix);
  } else if (r && marked_name(row)) {
    snprintf(prefix, sizeof prefix, "%s: a column name", r->name);
    rn_err_prefix(&p->err, prefix);
  }
  rn_zone_destroy(&z);
  free(copy);
}

/* Whether the number v, for an int column or field, is a whole double
 * beyond ±2^53 (a fraction part or an exponent made it one: the integer
 * written may not be the one read); row.c takes or refuses the others. */
static bool inexact_int(const msgpack_object *v)
{
  if (v->type != MSGPACK_OBJECT_FLOAT64) return false;
  double d = v->via.f64;
  return d == floor(d) && fabs(d) >= 9007199254740992.0;
}

/* The path to a value being checked: its column, then the struct fields
 * inside it, spelled only when a refusal needs it (a change's columns are
 * walked for every line p:run applies). */
typedef struct int_path {
  const struct int_path *up; /* NULL: name is the column's */
  const char *name;
} int_path;

static size_t spell_path(const int_path *at, char *buf, size_t cap)
{
  size_t n = at->up ? spell_path(at->up, buf, cap) : 0;
  int w = snprintf(buf + n, cap - n, at->up ? " field \"%s\"" : "column \"%s\"", at->name);
  return w < 0 ? n : n + (size_t)w < cap ? n + (size_t)w : cap - 1;
}

/* Whether v can hold an inexact int: a float, or a struct's map or array. */
static bool may_hold_float(const msgpack_object *v)
{
  return v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_MAP || v->type == MSGPACK_OBJECT_ARRAY;
}

/* Refuses an inexact int (above) in v, the value of column or field c
 * (at: its path, as row.c words it), or in the fields of a struct, given
 * as a map of field names or an array in slot order. */
static int check_ints(rn_pipeline *p, const rn_rel *r, const rn_column *c, const msgpack_object *v, const int_path *at)
{
  if (c->type == RN_T_INT && inexact_int(v)) {
    char path[512];
    spell_path(at, path, sizeof path);
    rn_err_set(&p->err, RN_EINVAL, "%s: %s: expected int, got a number with a fraction part or an exponent that "
               "reads as %.17g: beyond ±2^53 such a number is not exact (9007199254740993.0 reads as "
               "9007199254740992 too): write the integer without them", r->name, path, v->via.f64);
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  if (c->type != RN_T_STRUCT) return 0;
  struct_entries e = entries_of(c->fields, v);
  for (uint32_t i = 0; i < e.n; i++) {
    const msgpack_object *fv = entry_value(&e, i);
    if (!may_hold_float(fv)) continue;
    int slot = entry_slot(&e, i);
    if (slot < 0) continue; /* row.c says why */
    int_path inner = { at, c->fields->cols[slot].name };
    int rc = check_ints(p, r, &c->fields->cols[slot], fv, &inner);
    if (rc) return rc;
  }
  return 0;
}

int rn_apply_json_change(rn_pipeline *p, const msgpack_object *rel, const msgpack_object *op,
                         const msgpack_object *row, const msgpack_object *other)
{
  rn_rel *r = rel && rel->type == MSGPACK_OBJECT_STR ? rn_rel_named(p, rel->via.str.ptr, rel->via.str.size) : NULL;
  for (uint32_t i = 0; r && row && row->type == MSGPACK_OBJECT_MAP && i < row->via.map.size; i++) {
    const msgpack_object *k = &row->via.map.ptr[i].key, *v = &row->via.map.ptr[i].val;
    if (!may_hold_float(v)) continue; /* ints, strings, null: nothing to refuse here */
    int slot = k->type == MSGPACK_OBJECT_STR ? rn_schema_slot(r->schema, k->via.str.ptr, k->via.str.size) : -1;
    if (slot < 0) continue;
    int_path at = { NULL, r->schema->cols[slot].name };
    int rc = check_ints(p, r, &r->schema->cols[slot], v, &at);
    if (rc) return rc;
  }
  return rn_apply_change_to(p, r, rel, op, row, other);
}
