/* api_order.c — declaring tops and indexes from C (runnel.h's
 * rn_top_declare, rn_index_declare): the public structs into top.h's and
 * index.h's declarations, NULLs and bounds checked first. */
#include "index.h"
#include "notes.h"
#include "top.h"

/* The shared checks: names, out, in of p, 1..RN_TOP_COLS order columns. */
static int check_order(rn_pipeline *p, const char *name, rn_rel *in, const rn_order_def *order, int norder,
                       rn_rel **out)
{
  if (!name) return rn_err_set(&p->err, RN_EINVAL, "declare: the relation name is NULL");
  if (!out) return rn_err_set(&p->err, RN_EINVAL, "%s: declare: out is NULL", name);
  if (!in || in->p != p) return rn_err_set(&p->err, RN_EINVAL, "%s: the input is %s", name,
                                           in ? "a relation of another pipeline" : "NULL");
  if (!order || norder < 1 || norder > RN_TOP_COLS)
    return rn_err_set(&p->err, RN_EINVAL, "%s: an order needs 1 to %d columns, got %d%s", name, RN_TOP_COLS,
                      norder, order ? "" : " (order is NULL)");
  for (int i = 0; i < norder; i++)
    if (!order[i].column) return rn_err_set(&p->err, RN_EINVAL, "%s: order column #%d: the name is NULL", name, i + 1);
  return 0;
}

RN_API int rn_top_declare(rn_pipeline *p, const char *name, rn_rel *in, const rn_top_def *def, rn_rel **out)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (!def) return rn_err_set(&p->err, RN_EINVAL, "%s: the top's definition is NULL", name ? name : "top");
  int rc = check_order(p, name, in, def->order, def->norder, out);
  if (rc) return rc;
  if (def->nby < 0 || def->nby > RN_TOP_COLS || (def->nby > 0 && !def->by))
    return rn_err_set(&p->err, RN_EINVAL, "%s: by takes 0 to %d columns, got %d%s", name, RN_TOP_COLS, def->nby,
                      def->nby > 0 && !def->by ? " (by is NULL)" : "");
  rn_top_spec spec = { .n = def->n, .nby = def->nby, .norder = def->norder, .rank = def->rank ? def->rank : "rank" };
  for (int i = 0; i < def->nby; i++) {
    if (!def->by[i]) return rn_err_set(&p->err, RN_EINVAL, "%s: by column #%d: the name is NULL", name, i + 1);
    spec.by[i] = def->by[i];
  }
  for (int i = 0; i < def->norder; i++) {
    spec.order[i] = def->order[i].column;
    spec.desc[i] = def->order[i].desc != 0;
  }
  rc = rn_declare_top(p, name, in, &spec, out);
  rn_notes_tell(p); /* it rebuilt, say */
  if (!rc) rn_err_clear(&p->err);
  return rc;
}

RN_API int rn_index_declare(rn_pipeline *p, const char *name, rn_rel *in, const rn_order_def *order, int norder,
                            rn_rel **out)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  int rc = check_order(p, name, in, order, norder, out);
  if (rc) return rc;
  const char *cols[RN_TOP_COLS];
  bool desc[RN_TOP_COLS];
  for (int i = 0; i < norder; i++) {
    cols[i] = order[i].column;
    desc[i] = order[i].desc != 0;
  }
  rc = rn_declare_index(p, name, in, norder, cols, desc, out);
  rn_notes_tell(p);
  if (!rc) rn_err_clear(&p->err);
  return rc;
}
