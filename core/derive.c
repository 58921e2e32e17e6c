/* derive.c — filter and map (see derive.h for the rule). */
#include "derive.h"
#include "mapkey.h"
#include "ops.h"
#include "row.h"
#include "evolve.h"
#include "evolve_log.h"
#include "reader.h"
#include "scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- select: a map whose function is a projection, in C ---- */

typedef struct rn_select {
  int n;                  /* output columns */
  int upto;               /* 1 + the largest input slot: how far a row is walked */
  int slots[];            /* the input slot of each */
} rn_select;

static rn_select *new_select(const int *slots, int n);

/* A map done in C: the output row of row (a row of d->input), written
 * straight into the pipeline's scratch zone; *out = NULL for no row. */
typedef int (*project_fn)(rn_rel *d, const rn_select *s, const char *row, size_t len,
                          const char **out, size_t *out_len);

/* A filter's or map's ctx: its function, one of the three. */
typedef struct rn_derive {
  rn_filter_fn filter;    /* a filter's predicate */
  rn_map_fn map;          /* a map's function (a callback: Lua) */
  project_fn project;     /* a map in C (select): used instead of map */
  rn_select *select;      /* project's columns, owned */
  rn_select *told;        /* a select declared over other columns: the ones its sinks were told, in its input's
                             layout now once tell_columns mapped them, owned; NULL: none */
  msgpack_sbuffer outbuf; /* map: the row being built, reused per row */
  bool outbuf_busy;       /* a callback re-entered this map (a scan of itself) */
  void *ctx;              /* filter's or map's context */
  rn_free_fn free_ctx;    /* frees ctx; may be NULL */
  char gone_told[512];    /* its function, making the rows its sinks were told, read a column its table
                             dropped in this run (rn_derive_read_gone): why they cannot be told, or "" */
  char gone_now[512];     /* its function read a column its table renamed or dropped in this run: the note */
  bool keyed;             /* a keyed map that keeps its keys (mapkey.c) */
  rn_mapkey keys;         /* its keys' state, when keyed */
} rn_derive;

/* Is input column slot of row (its offsets: starts) a null? */
static bool span_is_nil(const char *row, const size_t *starts, int slot)
{
  return starts[slot + 1] - starts[slot] == 1 && (unsigned char)row[starts[slot]] == 0xc0;
}

/* The selected values' bytes, as they are, under a new array header. */
static int project(rn_rel *d, const rn_select *s, const char *row, size_t len, const char **out, size_t *out_len)
{
  size_t starts[s->upto + 1];
  if (rn_row_spans(row, len, d->input->schema->ncols, s->upto, starts) != 0)
    return rn_err_set(&d->p->err, RN_ESTORE, "%s: a row could not be decoded", d->name);
  size_t size = s->n < 16 ? 1 : s->n < 65536 ? 3 : 5;
  for (int i = 0; i < s->n; i++) size += starts[s->slots[i] + 1] - starts[s->slots[i]];
  char *o = rn_zone_malloc_no_align(&d->p->scratch, size);
  if (!o) return rn_err_set(&d->p->err, RN_ENOMEM, "out of memory");
  uint32_t n = (uint32_t)s->n;
  char *w = o;
  if (n < 16) *w++ = (char)(0x90 | n);
  else if (n < 65536) { *w++ = (char)0xdc; *w++ = (char)(n >> 8); *w++ = (char)n; }
  else { *w++ = (char)0xdd; for (int i = 0; i < 4; i++) *w++ = (char)(n >> (24 - 8 * i)); }
  for (int i = 0; i < s->n; i++) {
    size_t from = starts[s->slots[i]], span = starts[s->slots[i] + 1] - from;
    memcpy(w, row + from, span);
    w += span;
  }
  const rn_schema *os = d->schema;
  for (int k = 0; k < os->nkey && s == ((rn_derive *)d->ctx)->select; k++) { /* a nullable column as key: a left
                                                                               * join's right column, say */
    int i = os->key_slots[k];
    if (span_is_nil(row, starts, s->slots[i]))
      return rn_err_set(&d->p->err, RN_EINVAL, "%s: column \"%s\": key columns cannot be null", d->name,
                        os->cols[i].name);
  }
  *out = o;
  *out_len = size;
  return 0;
}

int rn_derive_row(rn_rel *d, const char *row, size_t len, const char **out, size_t *out_len)
{
  rn_pipeline *p = d->p;
  *out = NULL;
  *out_len = 0;
  if (!row) return 0;
  rn_derive *f = d->ctx;
  if (f->filter) {
    int pass = 0;
    int rc = f->filter(f->ctx, d->input, row, len, &pass, &p->err);
    if (rc) return rc;
    if (pass) { *out = row; *out_len = len; }
    return 0;
  }
  if (f->project) return f->project(d, d->as_told && f->told ? f->told : f->select, row, len, out, out_len);
  msgpack_sbuffer local, *result = f->outbuf_busy ? &local : &f->outbuf;
  if (f->outbuf_busy) msgpack_sbuffer_init(&local);
  msgpack_sbuffer_clear(result);
  f->outbuf_busy = true;
  int has_row = 0;
  int rc = f->map(f->ctx, d->input, d, row, len, result, &has_row, &p->err);
  if (rc == 0 && has_row) {
    *out = rn_scratch_copy(p, result->data, result->size);
    *out_len = result->size;
    if (!*out) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  if (result == &local) msgpack_sbuffer_destroy(&local);
  else f->outbuf_busy = false;
  return rc;
}

/* Do rows a and b of d hold different keys? Rows are normalized: equal
 * values are equal bytes. A row that cannot be walked counts as moved. */
bool rn_key_moved(const rn_rel *d, const char *a, size_t alen, const char *b, size_t blen)
{
  const rn_schema *s = d->schema;
  if (!s || !s->nkey) return false;
  size_t as[s->ncols + 1], bs[s->ncols + 1];
  if (rn_row_spans(a, alen, s->ncols, s->ncols, as) || rn_row_spans(b, blen, s->ncols, s->ncols, bs)) return true;
  for (int k = 0; k < s->nkey; k++) {
    int i = s->key_slots[k];
    size_t n = as[i + 1] - as[i];
    if (n != bs[i + 1] - bs[i] || memcmp(a + as[i], b + bs[i], n) != 0) return true;
  }
  return false;
}

int rn_derive_apply(rn_rel *d, rn_rel *from, const rn_change *c)
{
  (void)from;
  rn_change out = { .id = c->id };
  int rc = rn_derive_row(d, c->old, c->old_len, &out.old, &out.old_len);
  if (rc) return rc;
  rc = rn_derive_row(d, c->row, c->row_len, &out.row, &out.row_len);
  if (rc) return rc;
  if (out.old && out.row && out.old_len == out.row_len && memcmp(out.old, out.row, out.row_len) == 0) return 0;
  rn_derive *f = d->ctx;
  if (f->keyed && (out.old || out.row) &&
      (rc = rn_mapkey_change(&f->keys, d, c->id, out.old, out.old_len, out.row, out.row_len, c->row, c->row_len)))
    return rc;
  if (out.old && out.row) {
    if (d->schema->nkey && !f->filter &&
        rn_key_moved(d, out.old, out.old_len, out.row, out.row_len)) { /* a key never changes (DESIGN 4) */
      rn_change gone = { .verb = RN_DELETE, .id = c->id, .old = out.old, .old_len = out.old_len };
      if ((rc = rn_emit(d, &gone))) return rc;
      out.old = NULL;
      out.old_len = 0;
      out.verb = RN_INSERT;
      return rn_emit(d, &out);
    }
    out.verb = RN_UPDATE;
  } else if (out.old) {
    out.verb = RN_DELETE;
  } else if (out.row) {
    out.verb = RN_INSERT;
  } else {
    return 0;
  }
  return rn_emit(d, &out);
}

typedef struct derived_scan {
  rn_rel *d;
  rn_scan_fn fn;
  void *ctx;
} derived_scan;

static int derive_one(void *ctx, uint64_t id, const char *row, size_t len)
{
  derived_scan *s = ctx;
  const char *out;
  size_t out_len;
  int rc = rn_derive_row(s->d, row, len, &out, &out_len);
  return rc || !out ? rc : s->fn(s->ctx, id, out, out_len);
}

/* A filter's or map's rows: its input's, rerun through its function. */
static int derive_scan(rn_rel *d, rn_scan_fn fn, void *ctx)
{
  derived_scan s = { d, fn, ctx };
  return rn_rel_scan(d->input, derive_one, &s);
}

static void free_derive(void *ctx)
{
  rn_derive *f = ctx;
  if (f->free_ctx) f->free_ctx(f->ctx);
  rn_mapkey_destroy(&f->keys);
  msgpack_sbuffer_destroy(&f->outbuf);
  free(f->select);
  free(f->told);
  free(f);
}

const rn_rel_ops rn_filter_ops = { .name = "filter", .apply = rn_derive_apply, .scan = derive_scan, .free = free_derive };
/* The group ends: a keyed map's unsettled claims fail it (mapkey.h). */
static int map_seal(rn_rel *d, uint64_t seq)
{
  (void)seq;
  rn_derive *f = d->ctx;
  return f->keyed ? rn_mapkey_seal(&f->keys, d) : 0;
}

const rn_rel_ops rn_map_ops = { .name = "map", .apply = rn_derive_apply, .scan = derive_scan, .seal = map_seal,
                                .free = free_derive };

/* Does map f over in, of schema s, keep its keys (mapkey.c)? A keyed map
 * of a table-like input does, unless it is a select keyed by its input's
 * key columns, which are unique already. */
static bool keeps_keys(const rn_derive *f, const rn_rel *in, const rn_schema *s)
{
  if (!s || !s->nkey || !in->tablelike) return false;
  if (!f->select || s->nkey != in->schema->nkey) return true;
  for (int k = 0; k < s->nkey; k++) {
    bool of_input_key = false;
    for (int j = 0; j < in->schema->nkey; j++)
      of_input_key |= f->select->slots[s->key_slots[k]] == in->schema->key_slots[j];
    if (!of_input_key) return true;
  }
  return false;
}

bool rn_derive_keeps_keys(const void *ctx)
{
  return ((const rn_derive *)ctx)->keyed;
}

static int untold(rn_rel *d, const char *why);
static bool added_under(const rn_rel *d);
static bool dropped_under(const rn_rel *d);
static const char *unknown_under(const rn_rel *d, char *buf, size_t len);

/* A keyed map rebuilt (its input changed, or it missed groups): around
 * its keys' rebuild, its rows as its sinks were told (its function over
 * its input's rows as their sinks were told: a rebuilt input's changes do
 * not pass through it, relation.c's rn_emit) and now, kept for its sinks
 * (evolve_log.h). Not when its own function changed (rn_derive_tell_old
 * tells that, with what changed under it), nor when its state is new. */
static int rebuild_keys(rn_rel *d, MDB_txn *txn, bool created)
{
  rn_pipeline *p = d->p;
  rn_mapkey *keys = &((rn_derive *)d->ctx)->keys;
  bool tells = !created && d->rebuild_tells && !rn_code_untold(p, txn, d->name);
  char why[1536] = "";
  if (tells && unknown_under(d, why, sizeof why)) tells = false; /* its rows as told cannot be made */
  int rc = tells ? rn_rebuild_before(d) : 0;
  msgpack_zone_clear(&p->scratch);
  if (rc && rc != RN_ESTORE && rc != RN_EFULL && rc != RN_ENOMEM) { /* its function failed on a row as told */
    snprintf(why, sizeof why, "its function failed on a row its sinks were told of: %s", p->err.msg);
    rc = rn_rebuild_untold(d);
    tells = false;
  } else if (!rc && tells && ((rn_derive *)d->ctx)->gone_told[0]) { /* it read a column its table dropped */
    snprintf(why, sizeof why, "%s", ((rn_derive *)d->ctx)->gone_told);
    rc = rn_rebuild_untold(d);
    tells = false;
  }
  if (!rc) rc = rn_mapkey_open(keys, d, txn, true);
  if (!rc && tells) rc = rn_rebuild_after(d);
  msgpack_zone_clear(&p->scratch);
  if (rc || !why[0]) return rc;
  if (d->told_unknown) return 0;
  d->told_unknown = true;
  return rn_evolve_note(p, "%s: its sinks were not told what its rebuild changed (%s)", d->name, why);
}

/* The state of a keyed map (rn_open_derived_state's setup): a select's
 * record, as a map's without keys has it made (relation.c), and its keys. */
static int setup_keys(void *ctx, bool created, bool rebuild_it)
{
  rn_rel *d = ctx;
  MDB_txn *txn = d->p->store.wtxn;
  int rc = rn_select_decl_record(d, txn);
  if (rc) return rc;
  if (rebuild_it || d->evolved || added_under(d) || dropped_under(d)) /* its rows may have changed (evolve.h; a table under it moved
                                                   * columns its function reads) */
    return rebuild_keys(d, txn, created);
  return rn_mapkey_open(&((rn_derive *)d->ctx)->keys, d, txn, false);
}

/* ---- a map declared again with other columns, its function as it was ----
 * Its rows as its sinks were told are its function over its input's rows
 * as told, made in the columns it had (rn_rebuild_capture_told), told
 * against its rows now at the start of the next group, as a rebuild's
 * changes are (evolve_log.h). So too one without a key whose columns
 * stayed, over a table that gained columns (added_under). Not when its function changed too ("fo:"
 * kept: rn_derive_tell_old tells both), nor for a select (its rows are its
 * input's values in other columns), nor over a relation whose sinks were
 * not told (rn_derive_told_unknown said so). */

/* Whether the table under map d (through filters and maps) gained,
 * renamed, dropped or moved columns in this run: what d's function makes
 * of them is no change of the table's rows, which a note gives, but of
 * d's (evolve_log.c, scan_as_told; rn_derive_read_gone). A keyed map is
 * rebuilt over it and tells it so. */
static bool added_under(const rn_rel *d)
{
  if (d->kind != RN_REL_MAP || d->decl_new || !d->tablelike) return false;
  const rn_rel *at = d->input;
  while (at->input && (at->kind == RN_REL_FILTER || at->kind == RN_REL_MAP)) at = at->input;
  return at->nadded > 0 || at->now_slots;
}

/* Whether the table under d (through filters and maps) keeps the rows a
 * table of its name had when p:drop removed it (drop.c), d declared
 * before: what d's sinks were told was made from them, and what left is
 * told as a rebuild's changes are (evolve_log.c, scan_as_told), as the
 * joins, aggregates, tops and indexes over it tell theirs. */
static bool dropped_under(const rn_rel *d)
{
  if (d->decl_new || !d->tablelike) return false;
  const rn_rel *at = d->input;
  while (at->input && (at->kind == RN_REL_FILTER || at->kind == RN_REL_MAP)) at = at->input;
  return at->kind == RN_REL_TABLE && at->dropped_open;
}

/* Whether filter d, declared as it was, is over a table (through filters)
 * that moved columns in this run: its function may read one by a name
 * the table had (rn_derive_read_gone). Not for a column the table gained:
 * its rows carry it, which is no change of them (a note gives it). */
static bool renamed_under(const rn_rel *d)
{
  return d->kind == RN_REL_FILTER && !d->decl_new && d->tablelike && rn_columns_moved(d->input);
}

const rn_rel *rn_columns_moved(const rn_rel *in)
{
  while (in->kind == RN_REL_FILTER && in->input) in = in->input;
  return in->now_slots ? in : NULL;
}

int rn_derive_read_gone(rn_rel *d, const rn_rel *t, const char *name, size_t len)
{
  rn_derive *f = d->ctx;
  for (int i = 0; i < t->nstored; i++) {
    if (strlen(t->stored_names[i]) != len || memcmp(t->stored_names[i], name, len) != 0) continue;
    int now = t->now_slots[i];
    if ((d->told_rows || d->as_told) && now >= 0) return now; /* as its sinks were told it */
    if (d->told_rows || d->as_told) {
      if (!f->gone_told[0])
        snprintf(f->gone_told, sizeof f->gone_told, "the rows its sinks were told were made from column \"%.*s\", "
                 "which \"%s\" dropped: its values are gone", (int)len, name, t->name);
    } else if (!f->gone_now[0]) {
      snprintf(f->gone_now, sizeof f->gone_now, "%s: its function reads column \"%.*s\", which \"%s\" %s%s%s: it "
               "is nil there now", d->name, (int)len, name, t->name, now >= 0 ? "renamed to \"" : "dropped",
               now >= 0 ? t->schema->cols[now].name : "", now >= 0 ? "\"" : "");
    }
    return -1;
  }
  return -1;
}

/* The note rn_derive_read_gone left for d, given once. */
static int gone_note(rn_rel *d)
{
  rn_derive *f = d->ctx;
  if (!f || !f->gone_now[0]) return 0;
  int rc = rn_evolve_note(d->p, "%s", f->gone_now);
  f->gone_now[0] = 0;
  return rc;
}

/* Runs once(d, ctx) in a write transaction of its own, committed when
 * it returns 0, again (up to 16 times) after growing the map when LMDB
 * filled it. Each try starts from d as it was: the told rows it kept
 * (rebuilt_open, rebuilt_pending) and told_unknown are put back, and what
 * a try compared (rebuild_fill, untold_why) is freed after it. once runs
 * in RN_APPLYING: callbacks may read, not change tables. */
static int in_own_txn(rn_rel *d, int (*once)(rn_rel *d, void *ctx), void *ctx)
{
  rn_pipeline *p = d->p;
  bool open = d->rebuilt_open, pending = d->rebuilt_pending, unknown = d->told_unknown;
  for (int tries = 0;; tries++) {
    d->told_unknown = unknown;
    ((rn_derive *)d->ctx)->gone_told[0] = 0;
    int rc = rn_store_begin(&p->store, &p->err);
    if (!rc) {
      p->group_serial++;
      p->state = RN_APPLYING;
      rc = once(d, ctx);
      p->state = RN_IDLE;
      if (!rc) rc = rn_store_commit(&p->store, &p->err);
      else rn_store_abort(&p->store);
    }
    free(d->rebuild_fill), free(d->untold_why); /* compared, or not to be */
    d->rebuild_fill = NULL, d->untold_why = NULL, d->nfill = 0, d->rebuild_captured = false;
    if (!rc) return 0;
    d->rebuilt_open = open, d->rebuilt_pending = pending; /* nothing of it was kept */
    if (p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL || tries >= 16) return rc;
    if ((rc = rn_store_grow(&p->store, &p->err))) return rc;
  }
}

/* The relation whose columns select d's input has: through filters. */
static const rn_rel *columns_of(const rn_rel *d)
{
  const rn_rel *at = d->input;
  while (at->kind == RN_REL_FILTER && at->input) at = at->input;
  return at;
}

/* Can select d's old columns be found in its input now? Not when they are
 * a derived relation's whose declaration changed: its rebuild tells what
 * it changed, in its new columns, through d's new ones, as before 0.23. */
static bool told_findable(const rn_rel *d)
{
  const rn_rel *at = columns_of(d);
  return at->kind == RN_REL_TABLE || !at->decl_changed;
}

/* Select d's old columns (f->told, its input's stored slots) as its
 * input holds them now: through filters to the relation whose columns
 * they are, following what a table's declaration moved in this run
 * (now_slots); and the columns its sinks were told (told_schema, d's own
 * when only the slots changed). A why, into why, when they cannot be
 * made; an error code. */
static int told_where(rn_rel *d, rn_select *told, char *why, size_t whylen)
{
  rn_pipeline *p = d->p;
  const rn_rel *at = columns_of(d);
  if (!d->told_schema) { /* its columns stayed: only the input columns they come from changed */
    rn_schema *s = rn_schema_new();
    if (!s || rn_schema_copy_columns(s, d->schema, false, &p->err) ||
        (d->schema->nkey && rn_schema_set_key(s, d->schema->key_slots, d->schema->nkey, d->name, &p->err))) {
      rn_schema_free(s);
      return p->err.code ? p->err.code : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    }
    d->told_schema = s;
  }
  if (told->n != d->told_schema->ncols) {
    snprintf(why, whylen, "its declaration record does not match the columns it had");
    return 0;
  }
  told->upto = 0;
  for (int i = 0; i < told->n; i++) {
    int slot = told->slots[i];
    const rn_column *was = &d->told_schema->cols[i];
    if (at->now_slots) slot = slot < at->nstored ? at->now_slots[slot] : -1;
    if (slot < 0 || slot >= d->input->schema->ncols) {
      snprintf(why, whylen, "the column its column \"%s\" came from was dropped from \"%s\"", was->name, at->name);
      return 0;
    }
    const rn_column *now = &d->input->schema->cols[slot];
    if (now->type != was->type) {
      snprintf(why, whylen, "column \"%s\": its sinks were told it as %s, \"%s\" now holds %s", was->name,
               rn_type_name(was->type), d->input->name, rn_type_name(now->type));
      return 0;
    }
    told->slots[i] = slot;
    if (slot + 1 > told->upto) told->upto = slot + 1;
  }
  return 0;
}

/* In tell_columns's transaction; *why: its sinks cannot be told. */
static int tell_columns_in(rn_rel *d, char *why, size_t whylen, bool *later)
{
  rn_pipeline *p = d->p;
  rn_derive *f = d->ctx;
  /* its function changed: rn_derive_tell_old, next, tells with told_schema, or notes it cannot; told rows of
   * an earlier layout go (it makes them again, or tells nothing) */
  bool layout = d->told_schema && d->rebuilt_open; /* told rows kept in the columns before */
  if (rn_code_untold(p, p->store.wtxn, d->name) || rn_code_changed_since_open(p, d->name)) {
    *later = true;
    return layout ? rn_rebuild_untold(d) : 0;
  }
  if ((!f->map && !f->filter && !(f->told && told_findable(d)) && !dropped_under(d)) || d->told_unknown || unknown_under(d, why, whylen)) { /* nothing told: told rows
                                                                                     * of an earlier layout go
                                                                                     * too */
    why[0] = 0;
    return layout ? rn_rebuild_untold(d) : 0;
  }
  if (f->told) { /* a select: its old columns, where its input holds them now */
    rn_select *told = new_select(f->told->slots, f->told->n); /* mapped afresh at each try */
    if (!told) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    int rc = told_where(d, told, why, whylen);
    if (rc || why[0]) {
      free(told);
      return rc ? rc : layout ? rn_rebuild_untold(d) : 0;
    }
    rn_select *stored = f->told;
    f->told = told;
    d->rebuild_tells = true;
    rc = rn_rebuild_capture_told(d);
    if (!rc && d->rebuild_captured) rc = rn_rebuild_after(d);
    else if (!rc && d->untold_why) snprintf(why, whylen, "%s", d->untold_why);
    d->rebuild_tells = false;
    f->told = stored;
    free(told);
    msgpack_zone_clear(&p->scratch);
    return rc;
  }
  d->rebuild_tells = true;
  int rc = d->told_schema ? rn_rebuild_capture_told(d) : rn_rebuild_before(d); /* its columns as they were */
  msgpack_zone_clear(&p->scratch);
  if (rc && rc != RN_ESTORE && rc != RN_EFULL && rc != RN_ENOMEM && rc != RN_EIO) { /* its function failed */
    snprintf(why, whylen, "its function failed on a row its sinks were told of: %s", p->err.msg);
    rc = rn_rebuild_untold(d);
  } else if (!rc && f->gone_told[0]) { /* it read a column its table dropped */
    snprintf(why, whylen, "%s", f->gone_told);
    rc = rn_rebuild_untold(d);
  } else if (!rc && (d->rebuild_captured || !d->told_schema)) {
    rc = rn_rebuild_after(d);
  } else if (!rc && d->untold_why) { /* its old rows do not fit its new columns */
    snprintf(why, whylen, "%s", d->untold_why);
  }
  d->rebuild_tells = false;
  msgpack_zone_clear(&p->scratch);
  return rc;
}

/* tell_columns's try: tell_columns_in with what a try finds reset. */
typedef struct columns_try {
  char why[1536]; /* its sinks cannot be told: why */
  bool later;     /* its function changed: rn_derive_tell_old tells */
} columns_try;

static int columns_once(rn_rel *d, void *ctx)
{
  columns_try *t = ctx;
  t->why[0] = 0, t->later = false;
  return tell_columns_in(d, t->why, sizeof t->why, &t->later);
}

static int tell_columns(rn_rel *d)
{
  rn_pipeline *p = d->p;
  rn_derive *f = d->ctx;
  columns_try t = { .why = "" };
  int rc = in_own_txn(d, columns_once, &t);
  free(f->told); /* told, or not to be */
  f->told = NULL;
  if (!t.later) rn_schema_free(d->told_schema), d->told_schema = NULL;
  if (rc || !t.why[0]) return rc;
  d->told_unknown = true; /* what is over it cannot be told either (rn_told_unknown_under) */
  return rn_evolve_note(p, "%s: its sinks were not told what its rebuild changed (%s)", d->name, t.why);
}

/* A filter's rows now, against the told rows its earlier rebuild left
 * waiting (evolve_log.h: rn_rebuild_now), in a transaction of its own;
 * its function changed in this run: rn_derive_tell_old, next, makes its
 * rows as told with the old one. Its function failing on a row its sinks
 * were told of (one its input's rebuild took away), or reading a column
 * its table dropped: why, for the note; nothing is told. */
typedef struct now_try {
  char why[1536];
} now_try;

static int now_once(rn_rel *d, void *ctx)
{
  now_try *t = ctx;
  rn_pipeline *p = d->p;
  rn_derive *f = d->ctx;
  t->why[0] = 0;
  bool changed = rn_code_untold(p, p->store.wtxn, d->name) || rn_code_changed_since_open(p, d->name);
  bool before_failed;
  int rc = rn_rebuild_now(d, changed, &before_failed);
  msgpack_zone_clear(&p->scratch);
  if (before_failed && rc != RN_ESTORE && rc != RN_EFULL && rc != RN_ENOMEM && rc != RN_EIO) { /* its function
                                                                                          * failed on a row as told */
    snprintf(t->why, sizeof t->why, "its function failed on a row its sinks were told of: %s", p->err.msg);
    rc = rn_rebuild_untold(d);
  } else if (!changed && !rc && f->gone_told[0]) {
    snprintf(t->why, sizeof t->why, "%s", f->gone_told);
    rc = rn_rebuild_untold(d);
  }
  return rc;
}

static int rebuild_now(rn_rel *d)
{
  now_try t = { .why = "" };
  int rc = in_own_txn(d, now_once, &t);
  if (rc || !t.why[0] || d->told_unknown) return rc;
  d->told_unknown = true; /* what is over it cannot be told either */
  return rn_evolve_note(d->p, "%s: its sinks were not told what its rebuild changed (%s)", d->name, t.why);
}

/* Declares filter or map of in whose ctx is f (NULL: out of memory, and
 * ctx, free_ctx and sel are released); takes ownership of schema. */
static int declare(rn_pipeline *p, const char *name, rn_relkind kind, rn_rel *in, rn_schema *schema,
                   rn_derive *f, rn_rel **out)
{
  if (!f) {
    rn_schema_free(schema);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  msgpack_sbuffer_init(&f->outbuf);
  rn_mapkey_init(&f->keys);
  f->keyed = kind == RN_REL_MAP && keeps_keys(f, in, schema);
  int rc = rn_declare_derived(p, name, kind, in, schema, f, out);
  if (rc) return rc;
  rn_rel *r = *out;
  if (f->keyed) {
    r->persistent = r->stateful = true; /* MAPKEY-2: rebuilt when it missed a group */
    rc = rn_open_derived_state(p, r, setup_keys, r);
  }
  if (!rc && kind == RN_REL_FILTER && r->rebuilt_pending) rc = rebuild_now(r); /* its input's rows
                                                                                              * may have changed */
  if (!rc) rc = rn_derive_told_unknown(r); /* over a relation whose sinks were not told */
  if (!rc && (r->told_schema || f->told || (!f->keyed && (added_under(r) || renamed_under(r) || dropped_under(r))))) rc = tell_columns(r); /* other columns, or a
                                                                                       * table under it gained
                                                                                       * some: its function
                                                                                       * as it was */
  if (!rc) rc = gone_note(r);
  if (rc) {
    in->noutputs--; /* rn_declare_derived made r its last output */
    rn_rel_discard_last(p);
    *out = NULL;
  }
  return rc;
}

static rn_derive *new_derive(void *ctx, rn_free_fn free_ctx)
{
  rn_derive *f = calloc(1, sizeof *f);
  if (!f && free_ctx) free_ctx(ctx);
  if (f) { f->ctx = ctx; f->free_ctx = free_ctx; }
  return f;
}

int rn_declare_filter(rn_pipeline *p, const char *name, rn_rel *in, rn_filter_fn filter, void *ctx,
                      rn_free_fn free_ctx, rn_rel **out)
{
  rn_derive *f = new_derive(ctx, free_ctx);
  if (f) f->filter = filter;
  return declare(p, name, RN_REL_FILTER, in, NULL, f, out);
}

int rn_declare_map(rn_pipeline *p, const char *name, rn_rel *in, rn_schema *schema, rn_map_fn map,
                   void *ctx, rn_free_fn free_ctx, rn_rel **out)
{
  rn_derive *f = new_derive(ctx, free_ctx);
  if (f) f->map = map;
  return declare(p, name, RN_REL_MAP, in, schema, f, out);
}

const int *rn_select_slots(const rn_rel *d, int *n)
{
  if (d->ops->apply != rn_derive_apply) return NULL;
  const rn_derive *f = d->ctx;
  if (!f || !f->project) return NULL;
  *n = f->select->n;
  return f->select->slots;
}

rn_schema *rn_select_schema(rn_pipeline *p, const char *name, const rn_schema *in, const int *slots,
                            const char *const *names, int n, const int *key, int nkey)
{
  rn_schema *s = rn_schema_new();
  if (!s) { rn_err_set(&p->err, RN_ENOMEM, "out of memory"); return NULL; }
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    const rn_column *c = &in->cols[slots[i]];
    rn_schema *fields = NULL;
    if (c->fields && (!(fields = rn_schema_new()) || rn_schema_copy_columns(fields, c->fields, false, &p->err))) {
      rn_schema_free(fields);
      rc = p->err.code ? p->err.code : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
      break;
    }
    if (rn_schema_add(s, names[i], strlen(names[i]), c->type, c->nullable, fields, &p->err) < 0) {
      rn_err_prefix(&p->err, name);
      rc = p->err.code;
    }
  }
  /* The key: as given, else the input's key when every key column is kept. */
  int derived[in->nkey ? in->nkey : 1];
  if (!rc && !key && in->nkey) {
    nkey = in->nkey;
    for (int k = 0; k < nkey; k++) {
      derived[k] = -1;
      for (int i = 0; i < n; i++) if (slots[i] == in->key_slots[k]) derived[k] = i;
      if (derived[k] < 0) nkey = 0;
    }
    key = derived;
  }
  if (!rc && key && nkey) {
    for (int k = 0; k < nkey; k++) s->cols[key[k]].nullable = false;
    rc = rn_schema_set_key(s, key, nkey, name, &p->err);
  }
  if (rc) {
    rn_schema_free(s);
    return NULL;
  }
  return s;
}

/* A select's columns: input slots slots[0..n) (NULL: out of memory). */
static rn_select *new_select(const int *slots, int n)
{
  rn_select *sel = malloc(sizeof *sel + sizeof *sel->slots * (size_t)n);
  if (!sel) return NULL;
  sel->n = n;
  sel->upto = 0;
  for (int i = 0; i < n; i++) if (slots[i] + 1 > sel->upto) sel->upto = slots[i] + 1;
  memcpy(sel->slots, slots, sizeof *slots * (size_t)n);
  return sel;
}

int rn_select_told(rn_rel *d, const int *stored, int n)
{
  rn_derive *f = d->ctx;
  if (!f || !f->project || !d->tablelike) return 0; /* a stream's select: no rows to tell */
  free(f->told);
  if (!(f->told = new_select(stored, n))) return rn_err_set(&d->p->err, RN_ENOMEM, "out of memory");
  return 0;
}

int rn_declare_select(rn_pipeline *p, const char *name, rn_rel *in, const int *slots,
                      const char *const *names, int n, const int *key, int nkey, rn_rel **out)
{
  if (rn_check_not_lookup(p, name, "select", in)) return p->err.code; /* not "map", as it is declared */
  rn_schema *s = rn_select_schema(p, name, in->schema, slots, names, n, key, nkey);
  if (!s) return p->err.code;
  rn_select *sel = new_select(slots, n);
  if (!sel) {
    rn_schema_free(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  rn_derive *f = new_derive(NULL, NULL);
  if (f) { f->project = project; f->select = sel; }
  else free(sel);
  return declare(p, name, RN_REL_MAP, in, s, f, out);
}

/* ---- a filter's or map's function changed: what its sinks are told ---- */

static int untold(rn_rel *d, const char *why)
{
  if (d->told_unknown) return 0; /* a note said so already */
  d->told_unknown = true; /* what is over it cannot be told either (rn_told_unknown_under) */
  return rn_evolve_note(d->p, "%s: its sinks were not told what its new function changed (%s)", d->name, why);
}

/* d's rows as its sinks were told cannot be made: what under stands on
 * was not told (why, into buf), or NULL. */
static const char *unknown_under(const rn_rel *d, char *buf, size_t len)
{
  const rn_rel *under = d->tablelike && !d->decl_new ? rn_told_unknown_under(d) : NULL;
  if (!under) return NULL;
  snprintf(buf, len, "what \"%s\" under it gave before is not known: its sinks were not told either", under->name);
  return buf;
}

int rn_derive_told_unknown(rn_rel *d)
{
  char buf[RN_NAME_MAX + 128];
  if (d->told_unknown || !unknown_under(d, buf, sizeof buf)) return 0;
  d->told_unknown = true;
  return rn_evolve_note(d->p, "%s: its sinks were not told what changed under it (%s)", d->name, buf);
}

/* In the transaction of rn_derive_tell_old: d's rows by its old function,
 * then by its new one, kept for its sinks; *failed: the old one failed
 * (its error, cleared, is in why). */
static int tell_old_in(rn_rel *d, rn_filter_fn ofilter, rn_map_fn omap, void *octx, char *why, size_t whylen)
{
  rn_pipeline *p = d->p;
  rn_derive *f = d->ctx;
  rn_filter_fn nf = f->filter;
  rn_map_fn nm = f->map;
  void *nctx = f->ctx;
  f->filter = nf ? ofilter : NULL;
  f->map = nm ? omap : NULL;
  f->ctx = octx;
  d->rebuild_tells = true;
  int rc = 0;
  if (d->decl_changed && d->kind == RN_REL_MAP && d->rebuilt_open && /* told rows of an earlier layout: made again */
      (rc = mdb_drop(p->store.wtxn, d->rebuilt_dbi, 0)))
    rc = rn_store_fail(&p->err, rc, d->name);
  bool unknown = d->told_unknown;
  if (!rc) rc = d->told_schema ? rn_rebuild_capture_told(d) : rn_rebuild_before(d); /* its columns changed too:
                                                                                     * made in the ones it had */
  d->told_unknown = unknown; /* untold() says so, when so */
  f->filter = nf, f->map = nm, f->ctx = nctx;
  msgpack_zone_clear(&p->scratch);
  if (rc && rc != RN_ESTORE && rc != RN_EFULL && rc != RN_ENOMEM && rc != RN_EIO) { /* the old function failed */
    snprintf(why, whylen, "its old function failed: %s", p->err.msg);
    rc = rn_rebuild_untold(d);
  } else if (!rc && f->gone_told[0]) { /* it read a column its table dropped */
    snprintf(why, whylen, "%s", f->gone_told);
    rc = rn_rebuild_untold(d);
  } else if (!rc && d->told_schema && !d->rebuild_captured) { /* its old rows do not fit its new columns */
    snprintf(why, whylen, "%s", d->untold_why ? d->untold_why : "its old rows could not be made");
    free(d->untold_why);
    d->untold_why = NULL;
  } else if (!rc) {
    rc = rn_rebuild_after(d); /* the new function failing fails the declaration (its error names d) */
  }
  d->rebuild_tells = false;
  msgpack_zone_clear(&p->scratch);
  if (!rc) rc = rn_code_told(p, p->store.wtxn, d->name);
  return rc;
}

/* rn_derive_tell_old's try: what the old function gives, against the new
 * one; why: a note to add after it. */
typedef struct old_try {
  rn_filter_fn filter;
  rn_map_fn map;
  void *ctx;
  char why[1536];
} old_try;

static int old_once(rn_rel *d, void *ctx)
{
  old_try *t = ctx;
  t->why[0] = 0;
  if (d->tablelike && !d->decl_new && (t->filter || t->map)) /* a map whose columns changed too: its old
                                                               * function's rows are given in the new columns
                                                               * by name (the binding's) */
    return tell_old_in(d, t->filter, t->map, t->ctx, t->why, sizeof t->why);
  /* a stream's events, or a relation the state never held (its first declaration failed after its function
   * was kept): nothing to tell; or rn_derive_untold */
  return rn_code_told(d->p, d->p->store.wtxn, d->name);
}

static int tell_old(rn_rel *d, rn_code_kind told, rn_filter_fn ofilter, rn_map_fn omap, void *octx)
{
  if (told == RN_CODE_NONE || (told != RN_CODE_KEPT && d->decl_new)) return 0; /* new: its sinks saw nothing */
  if (told == RN_CODE_UNKEPT && d->tablelike)
    return untold(d, "its old function held a table, a function or userdata: it cannot be run again");
  if (told == RN_CODE_ABSENT && d->tablelike)
    return untold(d, "the state holds no copy of its old function: runnel 0.18 or older wrote it");
  if (told != RN_CODE_KEPT) return 0;
  char under[RN_NAME_MAX + 128];
  bool below = unknown_under(d, under, sizeof under) != NULL;
  old_try t = { .filter = below ? NULL : ofilter, .map = below ? NULL : omap, .ctx = octx }; /* below: its old
                                                                                               * rows cannot be
                                                                                               * made */
  int rc = in_own_txn(d, old_once, &t);
  if (rc) return rc;
  return t.why[0] ? untold(d, t.why) : below ? untold(d, under) : 0;
}

int rn_derive_tell_old(rn_rel *d, rn_code_kind told, rn_filter_fn ofilter, rn_map_fn omap, void *octx)
{
  int rc = tell_old(d, told, ofilter, omap, octx);
  if (!rc) rc = gone_note(d);
  free(d->rebuild_fill), free(d->untold_why); /* compared, or not to be */
  d->rebuild_fill = NULL, d->untold_why = NULL, d->nfill = 0, d->rebuild_captured = false;
  rn_schema_free(d->told_schema); /* kept for it by tell_columns */
  d->told_schema = NULL;
  return rc;
}

int rn_derive_untold(rn_rel *d, const char *why)
{
  int rc = rn_derive_tell_old(d, RN_CODE_KEPT, NULL, NULL, NULL);
  return rc || !d->tablelike || d->decl_new ? rc : untold(d, why);
}
