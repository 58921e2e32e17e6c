/* ndjson.c — NDJSON in and out.
 *
 * Out: a sink writes one JSON object per change, external names as keys
 * (in schema order), the verb in a named field first; a DELETE carries the
 * key columns (a keyless relation's: every column). Strings are escaped by
 * jansson; numbers are written in their shortest form that reads back the
 * same (1.5, not 1.5000000000000000); bytes are base64 strings; structs
 * and maps are objects, lists arrays. A group's lines are written at its
 * commit and flushed.
 *
 * In: rn_run_ndjson reads lines {"rel": …, "op": "insert"|"update"|
 * "upsert"|"delete", "row": {…}} and applies them in groups of `batch`.
 * Errors name the input and the line. With skip, a bad line is written to
 * the rejects file (`name:line: reason<TAB>line`) and the rest of its group
 * still applies: a line refused before it wrote anything leaves the group
 * open; one that failed later rolls it back, and the group's other lines
 * are applied again without it. */
#include "ndjson.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "row.h"

/* ---- writing ---- */

static void put(msgpack_sbuffer *b, const char *s, size_t n) { rn_buf_write(b, s, n); }
static void puts_(msgpack_sbuffer *b, const char *s) { put(b, s, strlen(s)); }

static void json_str(msgpack_sbuffer *b, const char *s, size_t n)
{
  json_t *j = json_stringn_nocheck(s, n);
  size_t len = j ? json_dumpb(j, NULL, 0, JSON_ENCODE_ANY) : 0;
  char *tmp = len ? malloc(len) : NULL;
  if (tmp && json_dumpb(j, tmp, len, JSON_ENCODE_ANY) == len) put(b, tmp, len);
  else puts_(b, "null");
  free(tmp);
  json_decref(j);
}

/* The shortest %g that reads back as the same double. */
static void json_number(msgpack_sbuffer *b, double d)
{
  if (!isfinite(d)) { puts_(b, "null"); return; } /* JSON has no NaN or infinity */
  char tmp[32];
  if (d == floor(d) && fabs(d) < 1e15) { /* whole numbers as 30.0, not 3e+01 */
    snprintf(tmp, sizeof tmp, "%.1f", d);
    puts_(b, tmp);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  puts_(b, tmp);
  if (!strpbrk(tmp, ".eEn")) puts_(b, ".0"); /* a float stays a float */
}

static void base64(msgpack_sbuffer *b, const unsigned char *s, size_t n)
{
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  put(b, "\"", 1);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
    char q[4] = { digits[v >> 18 & 63], digits[v >> 12 & 63], i + 1 < n ? digits[v >> 6 & 63] : '=',
                  i + 2 < n ? digits[v & 63] : '=' };
    put(b, q, 4);
  }
  put(b, "\"", 1);
}


static void json_struct(msgpack_sbuffer *b, const msgpack_object *v, const rn_schema *fields);

static void json_struct(msgpack_sbuffer *b, const msgpack_object *v, const rn_schema *fields)
{
  put(b, "{", 1);
  for (int i = 0; i < fields->ncols; i++) {
    if (i) put(b, ",", 1);
    json_str(b, fields->cols[i].name, fields->cols[i].name_len);
    put(b, ":", 1);
    if ((uint32_t)i < v->via.array.size) rn_json_value(b, &v->via.array.ptr[i], &fields->cols[i]);
    else puts_(b, "null");
  }
  put(b, "}", 1);
}

void rn_json_value(msgpack_sbuffer *b, const msgpack_object *v, const rn_column *c)
{
  char tmp[32];
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: puts_(b, "null"); return;
  case MSGPACK_OBJECT_BOOLEAN: puts_(b, v->via.boolean ? "true" : "false"); return;
  case MSGPACK_OBJECT_POSITIVE_INTEGER: snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v->via.u64); puts_(b, tmp); return;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: snprintf(tmp, sizeof tmp, "%lld", (long long)v->via.i64); puts_(b, tmp); return;
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: json_number(b, v->via.f64); return;
  case MSGPACK_OBJECT_STR: json_str(b, v->via.str.ptr, v->via.str.size); return;
  case MSGPACK_OBJECT_BIN: base64(b, (const unsigned char *)v->via.bin.ptr, v->via.bin.size); return;
  case MSGPACK_OBJECT_ARRAY:
    if (c && c->type == RN_T_STRUCT) { json_struct(b, v, c->fields); return; }
    put(b, "[", 1);
    for (uint32_t i = 0; i < v->via.array.size; i++) {
      if (i) put(b, ",", 1);
      rn_json_value(b, &v->via.array.ptr[i], NULL);
    }
    put(b, "]", 1);
    return;
  case MSGPACK_OBJECT_MAP:
    put(b, "{", 1);
    for (uint32_t i = 0; i < v->via.map.size; i++) {
      const msgpack_object *k = &v->via.map.ptr[i].key;
      if (i) put(b, ",", 1);
      if (k->type == MSGPACK_OBJECT_STR) {
        json_str(b, k->via.str.ptr, k->via.str.size);
      } else { /* JSON keys are strings: a number or boolean key is written as text */
        msgpack_sbuffer kb;
        msgpack_sbuffer_init(&kb);
        rn_json_value(&kb, k, NULL);
        json_str(b, kb.data, kb.size);
        msgpack_sbuffer_destroy(&kb);
      }
      put(b, ":", 1);
      rn_json_value(b, &v->via.map.ptr[i].val, NULL);
    }
    put(b, "}", 1);
    return;
  default:
    puts_(b, "null");
  }
}

int rn_ndjson_line(const rn_schema *s, const char *row, size_t len, bool key_only, const char *verb_field,
                   const char *verb, msgpack_zone *z, msgpack_sbuffer *out)
{
  const msgpack_object *v = rn_row_unpack(row, len, s->ncols, z);
  if (!v) return -1;
  put(out, "{", 1);
  bool first = true;
  if (verb_field) {
    json_str(out, verb_field, strlen(verb_field));
    put(out, ":", 1);
    json_str(out, verb, strlen(verb));
    first = false;
  }
  for (int i = 0; i < s->ncols; i++) {
    if (key_only && s->nkey && !s->cols[i].is_key) continue;
    if (!first) put(out, ",", 1);
    first = false;
    json_str(out, s->cols[i].name, s->cols[i].name_len);
    put(out, ":", 1);
    rn_json_value(out, &v[i], &s->cols[i]);
  }
  put(out, "}\n", 2);
  return 0;
}

typedef struct nsink {
  FILE *f;
  bool own;               /* close f when the sink goes */
  char *verb_field;       /* NULL: no verb in the lines */
  msgpack_sbuffer lines;  /* the group's lines, written at its commit */
  msgpack_zone zone;
  rn_free_fn release;     /* releases the caller's hold on f (a Lua file), or NULL */
  void *release_ctx;
} nsink;

static void free_nsink(void *ctx)
{
  nsink *s = ctx;
  if (s->own && s->f) fclose(s->f);
  if (s->release) s->release(s->release_ctx);
  free(s->verb_field);
  msgpack_sbuffer_destroy(&s->lines);
  msgpack_zone_destroy(&s->zone);
  free(s);
}

static const char *const verb_names[] = { "", "INSERT", "UPDATE", "DELETE" };

static int nsink_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  (void)info;
  nsink *s = ctx;
  bool del = c->verb == RN_DELETE;
  int rc = rn_ndjson_line(rel->schema, del ? c->old : c->row, del ? c->old_len : c->row_len, del,
                          s->verb_field, verb_names[c->verb], &s->zone, &s->lines);
  msgpack_zone_clear(&s->zone);
  return rc ? rn_err_set(e, RN_ESTORE, "%s: ndjson: a row could not be decoded", rel->name) : 0;
}

static int nsink_commit(void *ctx, uint64_t seq, rn_err *e)
{
  (void)seq;
  nsink *s = ctx;
  size_t n = s->lines.size;
  bool ok = n == 0 || (fwrite(s->lines.data, 1, n, s->f) == n && fflush(s->f) == 0);
  msgpack_sbuffer_clear(&s->lines);
  return ok ? 0 : rn_err_set(e, RN_EIO, "ndjson: writing: %s", strerror(errno));
}

int rn_ndjson_sink(rn_pipeline *p, rn_rel *rel, FILE *f, bool own, const char *verb_field,
                   rn_free_fn release, void *release_ctx)
{
  nsink *s = calloc(1, sizeof *s);
  if (!s || !msgpack_zone_init(&s->zone, 4096)) {
    free(s);
    if (own) fclose(f);
    if (release) release(release_ctx);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  s->f = f;
  s->own = own;
  s->release = release;
  s->release_ctx = release_ctx;
  msgpack_sbuffer_init(&s->lines);
  if (verb_field && !(s->verb_field = strdup(verb_field))) {
    free_nsink(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  return rn_sink_add(p, rel, false, nsink_change, nsink_commit, s, free_nsink);
}

/* ---- reading ---- */

static const msgpack_object *field(const msgpack_object *obj, const char *name)
{
  size_t n = strlen(name);
  for (uint32_t i = 0; i < obj->via.map.size; i++) {
    const msgpack_object *k = &obj->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, name, n) == 0)
      return &obj->via.map.ptr[i].val;
  }
  return NULL;
}

/* Applies one input line. Returns 0 or an RN_E… code (p->err says why). */
static int apply_line(rn_pipeline *p, const char *line, size_t len)
{
  msgpack_object obj;
  rn_err_clear(&p->err);
  if (rn_json_parse(line, len, &obj, &p->scratch, &p->err)) return rn_group_fail(p, RN_EINVAL, p->err.msg);
  const msgpack_object *rel = obj.type == MSGPACK_OBJECT_MAP ? field(&obj, "rel") : NULL;
  const msgpack_object *op = obj.type == MSGPACK_OBJECT_MAP ? field(&obj, "op") : NULL;
  const msgpack_object *row = obj.type == MSGPACK_OBJECT_MAP ? field(&obj, "row") : NULL;
  if (!rel || rel->type != MSGPACK_OBJECT_STR || !op || op->type != MSGPACK_OBJECT_STR || !row) {
    rn_err_set(&p->err, RN_EINVAL, "expected {\"rel\": name, \"op\": \"insert\"|\"update\"|\"upsert\"|\"delete\", \"row\": {…}}");
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  char name[512];
  snprintf(name, sizeof name, "%.*s", (int)rel->via.str.size, rel->via.str.ptr);
  rn_rel *r = rn_find(p, name);
  if (!r) {
    rn_err_set(&p->err, RN_EINVAL, "unknown relation \"%s\"", name);
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  static const char *const ops[] = { "insert", "update", "upsert", "delete" };
  rn_op o = 0;
  for (int i = 0; i < 4; i++)
    if (op->via.str.size == strlen(ops[i]) && memcmp(op->via.str.ptr, ops[i], op->via.str.size) == 0) o = (rn_op)(i + 1);
  if (!o) {
    rn_err_set(&p->err, RN_EINVAL, "%s: unknown op \"%.*s\" (insert, update, upsert, delete)", name,
               (int)op->via.str.size, op->via.str.ptr);
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  return rn_push_object(p, r, o, row);
}

typedef struct pending {  /* the open group's good lines, for a re-run in skip mode */
  char **lines;
  size_t *lens;
  size_t n, cap;
} pending;

static int keep_line(pending *g, const char *line, size_t len)
{
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 64;
    char **lines = realloc(g->lines, cap * sizeof *lines);
    if (lines) g->lines = lines;
    size_t *lens = lines ? realloc(g->lens, cap * sizeof *lens) : NULL;
    if (lens) g->lens = lens;
    if (!lines || !lens) return RN_ENOMEM;
    g->cap = cap;
  }
  if (!(g->lines[g->n] = malloc(len ? len : 1))) return RN_ENOMEM;
  memcpy(g->lines[g->n], line, len);
  g->lens[g->n++] = len;
  return 0;
}

static void drop_lines(pending *g)
{
  for (size_t i = 0; i < g->n; i++) free(g->lines[i]);
  g->n = 0;
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reject(const rn_run_opts *o, uint64_t line_no, const char *why, const char *line, size_t len)
{
  if (!o->rejects) return;
  fprintf(o->rejects, "%s:%llu: %s\t", o->name, (unsigned long long)line_no, why);
  fwrite(line, 1, len, o->rejects); /* the line as it came, NUL bytes too */
  fputc('\n', o->rejects);
  fflush(o->rejects);
}

int rn_run_ndjson(rn_pipeline *p, FILE *in, const rn_run_opts *o, rn_run_stats *st)
{
  memset(st, 0, sizeof *st);
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "run: not inside a group");
  size_t batch = o->batch ? o->batch : 1000;
  char *line = NULL;
  size_t cap = 0, in_group = 0;
  ssize_t got;
  pending kept = { NULL, NULL, 0, 0 };
  int rc = 0;
  double started = now(), shown = started;
  bool progress = o->progress && isatty(STDERR_FILENO);
  p->tolerate_bad_input = o->skip;
  while (!rc && (got = getline(&line, &cap, in)) >= 0) {
    st->lines++;
    size_t len = (size_t)got;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    if (len == 0) continue; /* blank lines are not changes */
    if (!in_group && (rc = rn_begin(p))) break;
    in_group++;
    int arc = apply_line(p, line, len);
    if (arc && !o->skip) {
      char why[RN_ERRMSG_MAX];
      snprintf(why, sizeof why, "%s", p->err.msg);
      rc = rn_err_set(&p->err, arc, "%s:%llu: %s", o->name, (unsigned long long)st->lines, why);
      in_group = 0; /* the core rolled the group back */
      break;
    }
    if (arc) {
      st->rejected++;
      reject(o, st->lines, p->err.msg, line, len);
      if (p->state == RN_IDLE) { /* it failed after writing: the group is gone; apply its good lines again */
        in_group = 0;
        if ((rc = rn_begin(p))) break;
        in_group = kept.n + 1; /* a rejected line still counts toward its group's N lines */
        for (size_t i = 0; i < kept.n && !rc; i++) {
          int rrc = apply_line(p, kept.lines[i], kept.lens[i]);
          if (rrc) rc = rn_err_set(&p->err, rrc, "%s: re-applying a group after line %llu failed: %s", o->name,
                                   (unsigned long long)st->lines, p->err.msg);
        }
        if (rc) break;
      }
    } else {
      st->applied++;
      if (o->skip && (rc = keep_line(&kept, line, len))) { rn_err_set(&p->err, rc, "out of memory"); break; }
    }
    if (in_group >= batch) {
      if ((rc = rn_commit(p))) break;
      st->groups++;
      in_group = 0;
      drop_lines(&kept);
    }
    if (progress && st->lines % 4096 == 0 && now() - shown >= 1) {
      shown = now();
      fprintf(stderr, "\r%s: %llu lines, %.0f changes/s   ", o->name, (unsigned long long)st->lines,
              st->applied / (shown - started));
    }
  }
  if (!rc && ferror(in)) rc = rn_err_set(&p->err, RN_EIO, "%s: reading: %s", o->name, strerror(errno));
  if (rc && p->state == RN_OPEN) rn_rollback(p);
  if (!rc && p->state == RN_OPEN) {
    if (!(rc = rn_commit(p))) st->groups++;
  }
  p->tolerate_bad_input = false;
  if (progress) fprintf(stderr, "\r%s: %llu lines, %llu applied, %llu rejected\n", o->name,
                        (unsigned long long)st->lines, (unsigned long long)st->applied,
                        (unsigned long long)st->rejected);
  drop_lines(&kept);
  free(kept.lines);
  free(kept.lens);
  free(line);
  return rc;
}
