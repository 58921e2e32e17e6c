/* scan.c — current rows of any table-like relation (scan.h). */
#include "scan.h"

#include "aggregate.h"
#include "derive.h"

static int scan_source(rn_rel *t, rn_scan_fn fn, void *ctx)
{
  rn_cursor *c;
  int rc = rn_cursor_open(t, &c);
  if (rc) return rc;
  uint64_t id;
  const char *row;
  size_t len;
  int done = 0;
  while (!rc && !(rc = rn_cursor_next(c, &id, &row, &len, &done)) && !done) rc = fn(ctx, id, row, len);
  rn_cursor_close(c);
  return rc;
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

int rn_rel_scan(rn_rel *rel, rn_scan_fn fn, void *ctx)
{
  switch (rel->kind) {
  case RN_REL_TABLE:
    return scan_source(rel, fn, ctx);
  case RN_REL_FILTER: case RN_REL_MAP: {
    if (!rel->tablelike) break;
    derived_scan s = { rel, fn, ctx };
    return rn_rel_scan(rel->input, derive_one, &s);
  }
  case RN_REL_JOIN:
    if (!rel->tablelike) break;
    return rn_join_scan(rel, fn, ctx);
  case RN_REL_AGGREGATE:
    return rn_aggregate_scan(rel, fn, ctx);
  default:
    break;
  }
  return rn_err_set(&rel->p->err, RN_EINVAL, "%s: a stream holds no rows to read", rel->name);
}
