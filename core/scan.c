/* scan.c — current rows of any table-like relation (scan.h), through its
 * operator (ops.h). */
#include "scan.h"

#include "rowsort.h"

int rn_rel_scan(rn_rel *rel, rn_scan_fn fn, void *ctx)
{
  if (rel->tablelike && rel->ops->scan) return rel->ops->scan(rel, fn, ctx);
  if (rel->kind == RN_REL_LOOKUP)
    return rn_err_set(&rel->p->err, RN_EINVAL,
                      "%s: a lookup holds no rows to read: they are fetched from its source when a join asks for them",
                      rel->name);
  return rn_err_set(&rel->p->err, RN_EINVAL, "%s: a stream holds no rows to read", rel->name);
}

int rn_rel_scan_ordered(rn_rel *rel, rn_scan_fn fn, void *ctx)
{
  if (rel->kind != RN_REL_JOIN && rel->kind != RN_REL_FILTER && rel->kind != RN_REL_MAP)
    return rn_rel_scan(rel, fn, ctx);
  rn_rowsort s;
  int rc = rn_rowsort_init(&s, rel->schema, rel->name, &rel->p->err);
  if (!rc) rc = rn_rel_scan(rel, rn_rowsort_add, &s);
  if (!rc) rc = rn_rowsort_each(&s, fn, ctx);
  rn_rowsort_free(&s);
  return rc;
}
