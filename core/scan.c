/* scan.c — current rows of any table-like relation (scan.h), through its
 * operator (ops.h). */
#include "scan.h"

int rn_rel_scan(rn_rel *rel, rn_scan_fn fn, void *ctx)
{
  if (rel->tablelike && rel->ops->scan) return rel->ops->scan(rel, fn, ctx);
  return rn_err_set(&rel->p->err, RN_EINVAL, "%s: a stream holds no rows to read", rel->name);
}
