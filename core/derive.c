/* derive.c — filter and map (see derive.h for the rule). */
#include "derive.h"
#include "join.h"

#include <string.h>

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
  msgpack_sbuffer result;
  msgpack_sbuffer_init(&result);
  int has_row = 0;
  int rc = d->map(d->ctx, d->input, d, row, len, &result, &has_row, &p->err);
  if (rc == 0 && has_row) {
    *out = rn_scratch_copy(p, result.data, result.size);
    *out_len = result.size;
    if (!*out) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  msgpack_sbuffer_destroy(&result);
  return rc;
}

int rn_derive_apply(rn_rel *d, rn_rel *from, const rn_change *c)
{
  if (d->kind == RN_REL_JOIN) return rn_join_apply(d, from, c);
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
