/* cdc.c — change-data-capture images, built per group (see cdc.h). */
#include "cdc.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "row.h"

#define LOG_META_COLS 4 /* cdc$seq, cdc$batch_seq_no, cdc$operation, cdc$id */

/* cdc$operation values: part of the images' format (stores keep them). */
enum { OP_PRE = 0, OP_UPDATE = 1, OP_INSERT = 2, OP_DELETE = 3, OP_POST = 9 };

static int add(rn_schema *s, const char *name, rn_type t, bool nullable, rn_schema *fields, rn_err *e)
{
  return rn_schema_add(s, name, strlen(name), t, nullable, fields, e) < 0 ? e->code : 0;
}

static int log_schema(rn_schema *s, const rn_schema *in, rn_err *e)
{
  static const char *const meta[LOG_META_COLS] = { "cdc$seq", "cdc$batch_seq_no", "cdc$operation", "cdc$id" };
  for (int i = 0; i < LOG_META_COLS; i++)
    if (add(s, meta[i], RN_T_INT, false, NULL, e)) return e->code;
  if (rn_schema_copy_columns(s, in, false, e)) return e->code;
  for (int i = 0; i < in->ncols; i++) s->cols[LOG_META_COLS + i].nullable = !in->cols[i].is_key || in->nkey == 0;
  for (int i = 0; i < in->ncols; i++) {
    const rn_column *c = &in->cols[i];
    if (c->is_key || !c->nullable) continue;
    size_t n = strlen(c->name) + 13;
    char *name = malloc(n);
    if (!name) return rn_err_set(e, RN_ENOMEM, "out of memory");
    snprintf(name, n, "cdc$deleted_%s", c->name);
    int rc = add(s, name, RN_T_BOOL, true, NULL, e);
    free(name);
    if (rc) return rc;
  }
  return 0;
}

static int debezium_schema(rn_schema *s, const rn_schema *in, rn_err *e)
{
  rn_schema *before = rn_schema_new(), *after = rn_schema_new(), *source = rn_schema_new();
  if (!before || !after || !source ||
      rn_schema_copy_columns(before, in, false, e) || rn_schema_copy_columns(after, in, false, e) ||
      add(source, "relation", RN_T_STRING, false, NULL, e) || add(source, "seq", RN_T_INT, false, NULL, e) ||
      add(source, "id", RN_T_INT, false, NULL, e)) {
    rn_schema_free(before);
    rn_schema_free(after);
    rn_schema_free(source);
    return e->code ? e->code : rn_err_set(e, RN_ENOMEM, "out of memory");
  }
  if (add(s, "op", RN_T_STRING, false, NULL, e)) goto fail;
  if (add(s, "before", RN_T_STRUCT, true, before, e)) { before = NULL; goto fail; }
  before = NULL;
  if (add(s, "after", RN_T_STRUCT, true, after, e)) { after = NULL; goto fail; }
  after = NULL;
  return add(s, "source", RN_T_STRUCT, false, source, e);
fail:
  rn_schema_free(before);
  rn_schema_free(after);
  rn_schema_free(source);
  return e->code;
}

static int flink_schema(rn_schema *s, const rn_schema *in, rn_err *e)
{
  if (add(s, "rowkind", RN_T_STRING, false, NULL, e)) return e->code;
  return rn_schema_copy_columns(s, in, false, e);
}

/* The name of a column the format adds that a column of in already has,
 * or NULL: the log's meta columns and cdc$deleted_ flags, flink's rowkind
 * (debezium nests in's columns, so nothing clashes). */
static const char *clashing(const rn_schema *in, rn_cdc_format format)
{
  static const char *const meta[LOG_META_COLS] = { "cdc$seq", "cdc$batch_seq_no", "cdc$operation", "cdc$id" };
  static const char prefix[] = "cdc$deleted_";
  for (int i = 0; i < in->ncols; i++) {
    const char *c = in->cols[i].name;
    if (format == RN_CDC_FLINK && strcmp(c, "rowkind") == 0) return c;
    if (format != RN_CDC_LOG) continue;
    for (int m = 0; m < LOG_META_COLS; m++)
      if (strcmp(c, meta[m]) == 0) return c;
    if (strncmp(c, prefix, sizeof prefix - 1) != 0) continue;
    int flagged = rn_schema_slot(in, c + sizeof prefix - 1, strlen(c + sizeof prefix - 1));
    if (flagged >= 0 && !in->cols[flagged].is_key && in->cols[flagged].nullable) return c;
  }
  return NULL;
}

int rn_declare_cdc(rn_pipeline *p, const char *name, rn_rel *in, const rn_cdc_opts *opts, rn_rel **out)
{
  const char *clash = clashing(in->schema, opts->format);
  if (clash)
    return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" of %s has the name of a column the %s format adds: "
                      "rename it, or choose another format", name, clash, in->name,
                      opts->format == RN_CDC_LOG ? "log" : "flink");
  rn_schema *s = rn_schema_new();
  rn_cdc_opts *ctx = malloc(sizeof *ctx);
  if (!s || !ctx) {
    rn_schema_free(s);
    free(ctx);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  *ctx = *opts;
  int rc = opts->format == RN_CDC_LOG ? log_schema(s, in->schema, &p->err)
         : opts->format == RN_CDC_DEBEZIUM ? debezium_schema(s, in->schema, &p->err)
         : flink_schema(s, in->schema, &p->err);
  if (rc) {
    rn_err_prefix(&p->err, name);
    rn_schema_free(s);
    free(ctx);
    return rc;
  }
  return rn_declare_cdc_rel(p, name, in, s, ctx, out);
}

/* ---- building one group's events ---- */

typedef struct builder {
  rn_rel *cdc;            /* the cdc relation */
  const rn_schema *in;    /* its input's columns */
  uint64_t seq;
  uint64_t batch;         /* cdc$batch_seq_no of the next log row */
  msgpack_sbuffer buf;
  msgpack_packer pk;
  size_t *at;             /* two rows' value offsets (rn_row_spans), 2 * (in->ncols + 1) */
  int *flagged;           /* the input's columns with a cdc$deleted_ flag, in order */
  int nflagged;
} builder;

static int emit(builder *b)
{
  rn_pipeline *p = b->cdc->p;
  /* Relations after the log may hold the row past this change; its own
   * log (the only reader without them) keeps a copy of its own. */
  const char *row = b->cdc->noutputs ? rn_scratch_copy(p, b->buf.data, b->buf.size) : b->buf.data;
  if (!row) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  rn_change c = { RN_INSERT, b->cdc->next_id++, row, b->buf.size, NULL, 0 };
  b->cdc->count++; /* the ids given (store.h) */
  msgpack_sbuffer_clear(&b->buf);
  return rn_emit(b->cdc, &c);
}

/* A stored row's values stay the bytes they are stored as: the images copy
 * them (rows are canonical msgpack, so equal values are equal bytes and a
 * copy is what packing the decoded value would write). Fills at with
 * row's value offsets (in->ncols + 1). */
static int spans(builder *b, const char *row, size_t len, size_t *at)
{
  if (row && !rn_row_spans(row, len, b->in->ncols, b->in->ncols, at)) return 0;
  return rn_err_set(&b->cdc->p->err, RN_ESTORE, "%s: a row could not be decoded", b->cdc->name);
}

static inline bool same_value(const char *r1, const size_t *a1, const char *r2, const size_t *a2, int i)
{
  size_t n = a1[i + 1] - a1[i];
  return n == a2[i + 1] - a2[i] && memcmp(r1 + a1[i], r2 + a2[i], n) == 0;
}

static void copy_value(builder *b, const char *row, const size_t *at, int i)
{
  rn_buf_write(&b->buf, row + at[i], at[i + 1] - at[i]);
}

/* One log row: meta columns, then each column of row (spans at) where
 * take[i] (else null; all of them for take NULL; none for row NULL), then
 * the deleted flags. Written in place: msgpack_pack_* would write the
 * same bytes, one call each. */
static int log_row(builder *b, int op, uint64_t id, const char *row, const size_t *at,
                   const uint8_t *take, const uint8_t *deleted)
{
  int n = b->in->ncols;
  size_t values = row ? at[n] - at[0] : 0;
  if (rn_sbuf_reserve(&b->buf, 5 + 4 * 9 + values + 2 * (size_t)n + 16))
    return rn_err_set(&b->cdc->p->err, RN_ENOMEM, "out of memory");
  char *w = rn_put_array_header(b->buf.data + b->buf.size, (uint32_t)b->cdc->schema->ncols);
  w = rn_put_uint(w, b->seq);
  w = rn_put_uint(w, b->batch++);
  w = rn_put_uint(w, (uint64_t)op);
  w = rn_put_uint(w, id);
  const char *end = row + (row ? at[n] : 0);
  for (int i = 0; i < n; i++) {
    if (row && (!take || take[i])) w = rn_put_run(w, row + at[i], at[i + 1] - at[i], (size_t)(end - row - at[i]));
    else *w++ = (char)0xc0; /* nil */
  }
  for (int k = 0; k < b->nflagged; k++)
    *w++ = (char)(deleted && deleted[b->flagged[k]] ? 0xc3 : 0xc0); /* true, nil */
  b->buf.size = (size_t)(w - b->buf.data);
  return emit(b);
}

/* Marks in mod the columns a change modifies: all for insert and delete,
 * those whose value differs for update (its rows' spans ov and nv). */
static void mark_modified(builder *b, const rn_change *c, const size_t *ov, const size_t *nv, uint8_t *mod)
{
  int n = b->in->ncols;
  if (c->verb != RN_UPDATE) { memset(mod, 1, (size_t)n); return; }
  for (int i = 0; i < n; i++)
    if (!same_value(c->old, ov, c->row, nv, i)) mod[i] = 1;
}

/* Whether update c moves its row to another key (its rows' spans ov and
 * nv): DESIGN §4, the key of a row never changes, so the images show it as
 * the delete of the old key and the insert of the new one, never as an
 * update a consumer keyed by the key would apply to a row it lacks. A
 * keyed map passes such a change on under one id. */
static bool key_moved(const builder *b, const rn_change *c, const size_t *ov, const size_t *nv)
{
  for (int i = 0; c->verb == RN_UPDATE && i < b->in->ncols; i++)
    if (b->in->cols[i].is_key && !same_value(c->old, ov, c->row, nv, i)) return true;
  return false;
}

/* key_moved for a change whose rows' spans are not known yet (debezium,
 * flink): they are walked into b->at. */
static int key_moved_walk(builder *b, const rn_change *c, bool *moved)
{
  *moved = false;
  if (c->verb != RN_UPDATE || b->in->nkey == 0) return 0;
  size_t *ov = b->at, *nv = b->at + b->in->ncols + 1;
  if (spans(b, c->old, c->old_len, ov) || spans(b, c->row, c->row_len, nv)) return b->cdc->p->err.code;
  *moved = key_moved(b, c, ov, nv);
  return 0;
}

/* One update's log row: the key and the columns it changed; a nullable
 * column it set to null is flagged deleted. */
static int log_update(builder *b, const rn_change *c, const size_t *ov, const size_t *nv, const uint8_t *key)
{
  int n = b->in->ncols;
  uint8_t set[n ? n : 1], deleted[n ? n : 1];
  for (int k = 0; k < n; k++) {
    set[k] = key[k] || !same_value(c->old, ov, c->row, nv, k);
    deleted[k] = set[k] && !key[k] && (unsigned char)c->row[nv[k]] == 0xc0; /* msgpack nil */
  }
  return log_row(b, OP_UPDATE, c->id, c->row, nv, set, deleted);
}

/* The value offsets of every stored row in the log, each walked once:
 * item i's old at spans + 2i * (ncols + 1), its row just after. NULL
 * (the error set) when out of memory or a row cannot be decoded. */
/* The value offsets of a group log's rows (each change's old and new row).
 * A log whose offsets fit in LOG_SPANS_KEPT bytes has every row walked once
 * and kept; a bigger one walks a row again at each use, into one of two
 * scratch rows (old, new), so that its memory stays that of two rows. */
#define LOG_SPANS_KEPT ((size_t)8 << 20)

typedef struct log_spans {
  size_t na;              /* offsets per row: ncols + 1 */
  size_t *kept;           /* 2 * na per change, or NULL */
  size_t scratch[];       /* 2 * na when nothing is kept */
} log_spans;

static log_spans *log_spans_new(builder *b, const rn_log *log)
{
  size_t na = (size_t)b->in->ncols + 1;
  bool keep = log->n <= LOG_SPANS_KEPT / (2 * na * sizeof(size_t));
  log_spans *s = malloc(sizeof *s + (keep ? 0 : 2 * na * sizeof(size_t)));
  if (s) s->na = na;
  if (s) s->kept = keep ? malloc((log->n ? log->n : 1) * 2 * na * sizeof(size_t)) : NULL;
  if (!s || (keep && !s->kept)) {
    free(s);
    rn_err_set(&b->cdc->p->err, RN_ENOMEM, "out of memory");
    return NULL;
  }
  for (size_t i = 0; keep && i < log->n; i++) {
    const rn_change *c = &log->items[i];
    if ((c->old && spans(b, c->old, c->old_len, s->kept + 2 * i * na)) ||
        (c->row && spans(b, c->row, c->row_len, s->kept + (2 * i + 1) * na))) {
      free(s->kept);
      free(s);
      return NULL;
    }
  }
  return s;
}

static void log_spans_free(log_spans *s)
{
  if (s) free(s->kept);
  free(s);
}

/* The offsets of change i's old (side 0) or new (side 1) row; NULL with
 * the error set when the row cannot be decoded. A scratch row's offsets
 * last until the next call for the same side. */
static const size_t *span_at(builder *b, log_spans *s, const rn_log *log, size_t i, int side)
{
  if (s->kept) return s->kept + (2 * i + (size_t)side) * s->na;
  const rn_change *c = &log->items[i];
  const char *row = side ? c->row : c->old;
  size_t *at = s->scratch + (size_t)side * s->na;
  if (row && spans(b, row, side ? c->row_len : c->old_len, at)) return NULL;
  return at;
}

static int build_log(builder *b, const rn_log *log, const rn_cdc_opts *o)
{
  rn_pipeline *p = b->cdc->p;
  int n = b->in->ncols;
  rn_net *net = malloc(log->n * sizeof *net);
  size_t *owner = malloc(log->n * sizeof *owner);
  uint8_t *mod = calloc(log->n * (size_t)n + (size_t)n, 1); /* per entry, + one scratch row */
  size_t nnet = net && owner && mod ? rn_log_net(log, net, owner) : (size_t)-1;
  int rc = nnet == (size_t)-1 ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : 0;
  uint8_t *key = mod + log->n * (size_t)n; /* the key columns only */
  for (int i = 0; mod && i < n; i++) key[i] = b->in->cols[i].is_key;
  /* Each entry's first and last change: a row absent before the group
   * still gets a preimage, its key from the first change (an insert, even
   * one deleted again later); before is the first's old, after the last's
   * row (rn_log_net). */
  size_t *first = rc ? NULL : malloc(2 * (nnet + 1) * sizeof *first), *last = first ? first + nnet + 1 : NULL;
  if (!rc && !first) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  log_spans *sp = rc ? NULL : log_spans_new(b, log);
  if (!rc && !sp) rc = p->err.code;
  for (size_t i = 0; !rc && i < nnet; i++) first[i] = (size_t)-1;
  for (size_t i = 0; !rc && i < log->n; i++) {
    if (first[owner[i]] == (size_t)-1) first[owner[i]] = i;
    last[owner[i]] = i;
    if (o->preimage != 1) continue;
    const size_t *ov = span_at(b, sp, log, i, 0), *nv = ov ? span_at(b, sp, log, i, 1) : NULL;
    if (!nv) rc = p->err.code;
    else mark_modified(b, &log->items[i], ov, nv, mod + owner[i] * (size_t)n);
  }
  for (size_t i = 0; !rc && o->preimage && i < nnet; i++) {       /* (1) */
    uint8_t *take = mod + i * (size_t)n;
    for (int c = 0; c < n; c++) take[c] |= key[c];
    const rn_change *f = &log->items[first[i]];
    const size_t *at = span_at(b, sp, log, first[i], net[i].before ? 0 : 1);
    if (!at) rc = p->err.code;
    else if (net[i].before) rc = log_row(b, OP_PRE, net[i].id, f->old, at, o->preimage == 2 ? NULL : take, NULL);
    else rc = log_row(b, OP_PRE, net[i].id, f->row, at, key, NULL);
  }
  for (size_t i = 0; !rc && i < log->n; i++) {                     /* (2) */
    const rn_change *c = &log->items[i];
    const size_t *ov = span_at(b, sp, log, i, 0), *nv = ov ? span_at(b, sp, log, i, 1) : NULL;
    if (!nv) rc = p->err.code;
    else if (c->verb == RN_INSERT) rc = log_row(b, OP_INSERT, c->id, c->row, nv, NULL, NULL);
    else if (c->verb == RN_DELETE) rc = log_row(b, OP_DELETE, c->id, c->old, ov, key, NULL);
    else if (key_moved(b, c, ov, nv)) { /* a delete and an insert (key_moved) */
      rc = log_row(b, OP_DELETE, c->id, c->old, ov, key, NULL);
      if (!rc) rc = log_row(b, OP_INSERT, c->id, c->row, nv, NULL, NULL);
    }
    else rc = log_update(b, c, ov, nv, key);
  }
  for (size_t i = 0; !rc && o->postimage && i < nnet; i++) {     /* (3) */
    if (!net[i].after) continue;
    const size_t *at = span_at(b, sp, log, last[i], 1);
    if (!at) rc = p->err.code;
    else rc = log_row(b, OP_POST, net[i].id, net[i].after, at, NULL, NULL);
  }
  log_spans_free(sp);
  free(first);
  free(net);
  free(owner);
  free(mod);
  return rc;
}

/* |op|before|after|source| — before/after are the rows' own encodings,
 * which are exactly the struct encoding of the input's columns. */
static int debezium_event(builder *b, const char *op, uint64_t id, const char *before, size_t blen,
                          const char *after, size_t alen)
{
  msgpack_packer *pk = &b->pk;
  msgpack_pack_array(pk, 4);
  msgpack_pack_str_with_body(pk, op, 1);
  if (before) rn_buf_write(&b->buf, before, blen); else msgpack_pack_nil(pk);
  if (after) rn_buf_write(&b->buf, after, alen); else msgpack_pack_nil(pk);
  const char *rel = b->cdc->input->name;
  msgpack_pack_array(pk, 3);
  msgpack_pack_str_with_body(pk, rel, strlen(rel));
  msgpack_pack_uint64(pk, b->seq);
  msgpack_pack_uint64(pk, id);
  return emit(b);
}

static int build_debezium(builder *b, const rn_log *log)
{
  int rc = 0;
  for (size_t i = 0; !rc && i < log->n; i++) {
    const rn_change *c = &log->items[i];
    bool moved;
    if ((rc = key_moved_walk(b, c, &moved))) break;
    if (moved) { /* "d" then "c", as Debezium writes a primary key's change */
      rc = debezium_event(b, "d", c->id, c->old, c->old_len, NULL, 0);
      if (!rc) rc = debezium_event(b, "c", c->id, NULL, 0, c->row, c->row_len);
      continue;
    }
    const char *op = c->verb == RN_INSERT ? "c" : c->verb == RN_UPDATE ? "u" : "d";
    rc = debezium_event(b, op, c->id, c->old, c->old_len, c->row, c->row_len);
  }
  return rc;
}

static int flink_row(builder *b, const char *kind, const char *row, size_t len)
{
  if (spans(b, row, len, b->at)) return b->cdc->p->err.code;
  msgpack_pack_array(&b->pk, (size_t)b->in->ncols + 1);
  msgpack_pack_str_with_body(&b->pk, kind, 2);
  for (int i = 0; i < b->in->ncols; i++) copy_value(b, row, b->at, i);
  return emit(b);
}

static int build_flink(builder *b, const rn_log *log)
{
  int rc = 0;
  for (size_t i = 0; !rc && i < log->n; i++) {
    const rn_change *c = &log->items[i];
    if (c->verb == RN_INSERT) rc = flink_row(b, "+I", c->row, c->row_len);
    else if (c->verb == RN_DELETE) rc = flink_row(b, "-D", c->old, c->old_len);
    else {
      bool moved;
      if ((rc = key_moved_walk(b, c, &moved))) break;
      rc = flink_row(b, moved ? "-D" : "-U", c->old, c->old_len);
      if (!rc) rc = flink_row(b, moved ? "+I" : "+U", c->row, c->row_len);
    }
  }
  return rc;
}

/* The seal (ops.h): cdc's images of its input's changes in group seq. */
static int cdc_seal(rn_rel *cdc, uint64_t seq)
{
  if (cdc->input->log.n == 0) return 0;
  const rn_cdc_opts *o = cdc->ctx;
  builder b = { cdc, cdc->input->schema, seq, 0, { 0, NULL, 0 }, { NULL, NULL }, NULL, NULL, 0 };
  size_t na = (size_t)b.in->ncols + 1;
  size_t *at = malloc(2 * na * sizeof *at);
  int *flagged = malloc(na * sizeof *flagged);
  if (!at || !flagged) {
    free(at);
    free(flagged);
    return rn_err_set(&cdc->p->err, RN_ENOMEM, "out of memory");
  }
  for (int i = 0; i < b.in->ncols; i++) /* log_schema's cdc$deleted_ columns */
    if (!b.in->cols[i].is_key && b.in->cols[i].nullable) flagged[b.nflagged++] = i;
  b.at = at;
  b.flagged = flagged;
  msgpack_sbuffer_init(&b.buf);
  msgpack_packer_init(&b.pk, &b.buf, rn_buf_write);
  int rc = o->format == RN_CDC_LOG ? build_log(&b, &cdc->input->log, o)
         : o->format == RN_CDC_DEBEZIUM ? build_debezium(&b, &cdc->input->log)
         : build_flink(&b, &cdc->input->log);
  msgpack_sbuffer_destroy(&b.buf);
  free(at);
  free(flagged);
  return rc;
}

/* CDC relations are built at group end from their input's log (seal), not
 * applied change by change, and hold no rows to scan. ctx: its options. */
const rn_rel_ops rn_cdc_ops = { .name = "cdc", .apply = NULL, .scan = NULL, .seal = cdc_seal, .free = free };
