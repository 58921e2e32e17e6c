/* derive.c — filter and map (see derive.h for the rule). */
#include "derive.h"
#include "ops.h"
#include "row.h"
#include "scan.h"

#include <stdlib.h>
#include <string.h>

/* ---- select: a map whose function is a projection, in C ---- */

typedef struct rn_select {
  int n;                  /* output columns */
  int upto;               /* 1 + the largest input slot: how far a row is walked */
  int slots[];            /* the input slot of each */
} rn_select;

/* The selected values' bytes, as they are, under a new array header. */
static int project(rn_rel *d, const char *row, size_t len, const char **out, size_t *out_len)
{
  const rn_select *s = d->ctx;
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
  if (d->kind == RN_REL_FILTER) {
    int pass = 0;
    int rc = d->filter(d->ctx, d->input, row, len, &pass, &p->err);
    if (rc) return rc;
    if (pass) { *out = row; *out_len = len; }
    return 0;
  }
  if (d->project) return d->project(d, row, len, out, out_len);
  msgpack_sbuffer local, *result = d->outbuf_busy ? &local : &d->outbuf;
  if (d->outbuf_busy) msgpack_sbuffer_init(&local);
  msgpack_sbuffer_clear(result);
  d->outbuf_busy = true;
  int has_row = 0;
  int rc = d->map(d->ctx, d->input, d, row, len, result, &has_row, &p->err);
  if (rc == 0 && has_row) {
    *out = rn_scratch_copy(p, result->data, result->size);
    *out_len = result->size;
    if (!*out) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  if (result == &local) msgpack_sbuffer_destroy(&local);
  else d->outbuf_busy = false;
  return rc;
}

int rn_derive_apply(rn_rel *d, rn_rel *from, const rn_change *c)
{
  (void)from;
  rn_change out = { .id = c->id };
  int rc = rn_derive_row(d, c->old, c->old_len, &out.old, &out.old_len);
  if (rc) return rc;
  rc = rn_derive_row(d, c->row, c->row_len, &out.row, &out.row_len);
  if (rc) return rc;
  if (out.old && out.row) {
    if (out.old_len == out.row_len && memcmp(out.old, out.row, out.row_len) == 0) return 0;
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

const rn_rel_ops rn_filter_ops = { .apply = rn_derive_apply, .scan = derive_scan };
const rn_rel_ops rn_map_ops = { .apply = rn_derive_apply, .scan = derive_scan };

int rn_declare_select(rn_pipeline *p, const char *name, rn_rel *in, const int *slots,
                      const char *const *names, int n, const int *key, int nkey, rn_rel **out)
{
  rn_schema *s = rn_schema_new();
  rn_select *sel = malloc(sizeof *sel + sizeof *sel->slots * (size_t)n);
  if (!s || !sel) {
    rn_schema_free(s);
    free(sel);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  sel->n = n;
  sel->upto = 0;
  for (int i = 0; i < n; i++) if (slots[i] + 1 > sel->upto) sel->upto = slots[i] + 1;
  memcpy(sel->slots, slots, sizeof *slots * (size_t)n);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    const rn_column *c = &in->schema->cols[slots[i]];
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
  int derived[in->schema->nkey ? in->schema->nkey : 1];
  if (!rc && !key && in->schema->nkey) {
    nkey = in->schema->nkey;
    for (int k = 0; k < nkey; k++) {
      derived[k] = -1;
      for (int i = 0; i < n; i++) if (slots[i] == in->schema->key_slots[k]) derived[k] = i;
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
    free(sel);
    return rc;
  }
  rc = rn_declare_derived(p, name, RN_REL_MAP, in, s, sel, free, out);
  if (!rc) (*out)->project = project;
  return rc;
}
