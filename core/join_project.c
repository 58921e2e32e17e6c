/* join_project.c — a join's result as a projection of its default layout
 * (left columns then right columns), built straight from the two rows'
 * bytes: a joiner given as column references, and a select that follows
 * a join, done by the join while the select is its only reader (join.h). */
#include "join_int.h"

#include "derive.h"

#include <stdlib.h>
#include <string.h>

rn_join_proj *rn_join_proj_new(const int *slots, int n, int left_ncols)
{
  rn_join_proj *pr = malloc(sizeof *pr + sizeof *pr->slots * (size_t)(n ? n : 1));
  if (!pr) return NULL;
  pr->n = n;
  pr->left_ncols = left_ncols;
  pr->lupto = pr->rupto = 0;
  for (int i = 0; i < n; i++) {
    pr->slots[i] = slots[i];
    if (slots[i] < left_ncols && slots[i] + 1 > pr->lupto) pr->lupto = slots[i] + 1;
    if (slots[i] >= left_ncols && slots[i] - left_ncols + 1 > pr->rupto) pr->rupto = slots[i] - left_ncols + 1;
  }
  return pr;
}

static size_t header_size(uint32_t n) { return n < 16 ? 1 : n < 65536 ? 3 : 5; }

static char *put_header(char *w, uint32_t n)
{
  if (n < 16) { *w++ = (char)(0x90 | n); return w; }
  if (n < 65536) { *w++ = (char)0xdc; *w++ = (char)(n >> 8); *w++ = (char)n; return w; }
  *w++ = (char)0xdd;
  for (int i = 0; i < 4; i++) *w++ = (char)(n >> (24 - 8 * i));
  return w;
}

static int undecodable(rn_join *j)
{
  return rn_err_set(err_of(j), RN_ESTORE, "%s: a row could not be decoded", j->out->name);
}

/* Projection pr of the result of l and r (l present), into scratch: each
 * column's bytes found first, then copied under a new array header. */
static int project_sides(rn_join *j, const rn_join_proj *pr, const side *l, const side *r, side *res)
{
  static const char nil = (char)0xc0;
  size_t ls[pr->lupto + 1], rs[pr->rupto + 1];
  if (rn_row_spans(l->row, l->len, j->left->schema->ncols, pr->lupto, ls)) return undecodable(j);
  if (r->row && rn_row_spans(r->row, r->len, j->right->schema->ncols, pr->rupto, rs)) return undecodable(j);
  const char *at[pr->n];
  size_t len[pr->n], size = header_size((uint32_t)pr->n);
  for (int i = 0; i < pr->n; i++) {
    int s = pr->slots[i];
    if (s < pr->left_ncols) at[i] = l->row + ls[s], len[i] = ls[s + 1] - ls[s];
    else if (!r->row) at[i] = &nil, len[i] = 1;
    else s -= pr->left_ncols, at[i] = r->row + rs[s], len[i] = rs[s + 1] - rs[s];
    size += len[i];
  }
  char *out = rn_zone_malloc_no_align(zone_of(j), size), *w = out;
  if (!out) return nomem(j);
  w = put_header(w, (uint32_t)pr->n);
  for (int i = 0; i < pr->n; i++) {
    memcpy(w, at[i], len[i]);
    w += len[i];
  }
  *res = (side){ .row = out, .len = size };
  return 0;
}

/* Projection pr of a whole default-layout row (an outer join's
 * right-only result, built first by rn_join_concat). */
static int project_whole(rn_join *j, const rn_join_proj *pr, const side *whole, side *res)
{
  int ncols = j->left->schema->ncols + j->right->schema->ncols, upto = 0;
  for (int i = 0; i < pr->n; i++) if (pr->slots[i] + 1 > upto) upto = pr->slots[i] + 1;
  size_t st[upto + 1];
  if (rn_row_spans(whole->row, whole->len, ncols, upto, st)) return undecodable(j);
  size_t size = header_size((uint32_t)pr->n);
  for (int i = 0; i < pr->n; i++) size += st[pr->slots[i] + 1] - st[pr->slots[i]];
  char *out = rn_zone_malloc_no_align(zone_of(j), size), *w = out;
  if (!out) return nomem(j);
  w = put_header(w, (uint32_t)pr->n);
  for (int i = 0; i < pr->n; i++) {
    size_t from = st[pr->slots[i]], len = st[pr->slots[i] + 1] - from;
    memcpy(w, whole->row + from, len);
    w += len;
  }
  *res = (side){ .row = out, .len = size };
  return 0;
}

/* The result of l and r (either may be absent; make_result has checked
 * that there is one) as projection pr of the default layout. */
int rn_join_project(rn_join *j, const rn_join_proj *pr, side *l, side *r, const fk *f, side *res)
{
  if (l->row) return project_sides(j, pr, l, r, res);
  side whole;
  int rc = rn_join_concat(j, l, r, f, &whole);
  return rc ? rc : project_whole(j, pr, &whole, res);
}

/* A select reading a join (and nothing else: no sink, no cdc, no other
 * relation) needs no row of the join: the join builds the select's row
 * from the left and right rows and emits it on the select, counting its
 * own change as it would have emitted it (rel:changes() stays exact).
 * A join whose joiner is a projection (j->proj) and that nothing reads is
 * fused with itself the same way: its rows are neither made nor walked,
 * only its changes counted, exactly as rn_join_emit_result would (an
 * UPDATE whose projected bytes stayed is none).
 * Checked per change, so a reader added later ends it. */
void rn_join_fuse_begin(rn_join *j)
{
  rn_rel *out = j->out;
  j->projecting = false;
  if (j->stream || j->kind == RN_JOIN_OUTER || j->fns.joiner || j->lookup || out->listeners) return;
  int n = 0;
  const int *slots;
  rn_rel *fused;
  if (j->proj) { /* a joiner of column references that nothing reads: its own rows are only counted */
    if (out->noutputs != 0) return;
    slots = j->proj->slots, n = j->proj->n, fused = out;
  } else {
    if (out->noutputs != 1 || !(slots = rn_select_slots(out->outputs[0], &n))) return;
    /* a select keyed by other columns than the join's key checks and moves
     * its keys (mapkey.h) in rn_derive_apply: it reads the join's rows */
    if (rn_derive_keeps_keys(out->outputs[0]->ctx)) return;
    fused = out->outputs[0];
  }
  if (!j->fuse || j->fuse->n != n || memcmp(j->fuse->slots, slots, sizeof *slots * (size_t)n) != 0) {
    free(j->fuse);
    j->fuse = rn_join_proj_new(slots, n, j->left->schema->ncols);
    if (!j->fuse) return; /* unfused is slower, not wrong */
  }
  j->fused = fused;
  j->projecting = true;
}

static bool same_bytes(const side *a, const side *b)
{
  if (a->row == b->row) return a->len == b->len; /* the row a change keeps (or both absent) */
  if (!a->row || !b->row) return false;
  return a->len == b->len && memcmp(a->row, b->row, a->len) == 0;
}

/* The join's own rows of a and b are equal: they are made of the same
 * left and right bytes (its row is their encodings side by side). */
static bool same_made(const side *a, const side *b)
{
  return same_bytes(a->made_of[0], b->made_of[0]) && same_bytes(a->made_of[1], b->made_of[1]);
}

/* Counts the join's own change, as rn_emit counts; a join fused with
 * itself (a projection nothing reads) counts it in emit_select. */
static void count(rn_join *j, rn_verb verb)
{
  if (j->fused != j->out && !j->out->p->replaying) j->out->emitted[verb - 1]++;
}

/* Where each of a fused result's columns lies: the bytes of each column. */
typedef struct placed {
  const char **at;
  size_t *len;
  size_t size;            /* of the whole row, header included */
} placed;

/* The offsets of the columns of a fused result's left (which 0) or right
 * (1) row, walked when first needed and kept on that row's side (a row a
 * change keeps, as the right row of a left update or the left row of a
 * fan-out, is walked once); NULL for an absent row. */
static int spans_of(rn_join *j, const side *res, int which, const size_t **starts)
{
  side *row = res->made_of[which];
  *starts = NULL;
  if (!row->row) return 0;
  int rc = rn_join_spans(j, which ? j->right : j->left, row, which ? j->fuse->rupto : j->fuse->lupto, starts);
  return rc == 1 ? undecodable(j) : rc;
}

/* The bytes of a fused result's column s of the default layout; sp: its
 * rows' offsets (spans_of). */
static inline const char *column_at(const rn_join_proj *pr, const side *res, const size_t *const sp[2], int s,
                                    size_t *len)
{
  static const char nil = (char)0xc0;
  const side *l = res->made_of[0], *r = res->made_of[1];
  if (s < pr->left_ncols) { *len = sp[0][s + 1] - sp[0][s]; return l->row + sp[0][s]; }
  if (!r->row) { *len = 1; return &nil; }
  s -= pr->left_ncols;
  *len = sp[1][s + 1] - sp[1][s];
  return r->row + sp[1][s];
}

static int place(rn_join *j, const side *res, placed *out)
{
  const rn_join_proj *pr = j->fuse;
  const size_t *sp[2];
  int rc = spans_of(j, res, 0, &sp[0]);
  if (!rc) rc = spans_of(j, res, 1, &sp[1]);
  if (rc) return rc;
  out->size = header_size((uint32_t)pr->n);
  for (int i = 0; i < pr->n; i++) {
    out->at[i] = column_at(pr, res, sp, pr->slots[i], &out->len[i]);
    out->size += out->len[i];
  }
  return 0;
}

/* The select's row, into scratch (only when something reads it). */
static int placed_row(rn_join *j, int n, const placed *pl, side *row)
{
  char *out = rn_zone_malloc_no_align(zone_of(j), pl->size), *w = out;
  if (!out) return nomem(j);
  w = put_header(w, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    memcpy(w, pl->at[i], pl->len[i]);
    w += pl->len[i];
  }
  *row = (side){ .row = out, .len = pl->size };
  return 0;
}

/* One change of the select: emitted when anything reads it (a sink, a
 * cdc, a relation), else only counted, as rn_emit counts (its rows would
 * go nowhere, so they are not made, nor their rows walked). */
static int emit_select(rn_join *j, rn_verb verb, uint64_t id, const side *old, const side *now)
{
  rn_rel *s = j->fused;
  if (!s->listeners && !s->noutputs) {
    if (!s->p->replaying) s->emitted[verb - 1]++;
    return 0;
  }
  int n = j->fuse->n;
  const char *at[2][n];
  size_t len[2][n];
  placed po = { at[0], len[0], 0 }, pn = { at[1], len[1], 0 };
  side o = { 0 }, r = { 0 };
  int rc = 0;
  if (old && !(rc = place(j, old, &po))) rc = placed_row(j, n, &po, &o);
  if (!rc && now && !(rc = place(j, now, &pn))) rc = placed_row(j, n, &pn, &r);
  rn_change c = { verb, id, r.row, r.len, o.row, o.len };
  return rc ? rc : rn_emit(s, &c);
}

/* Do two fused results hold the same selected bytes (*same)? A side both
 * are made of (the same row) is neither compared nor walked. */
static int same_selected(rn_join *j, const side *a, const side *b, bool *same)
{
  const rn_join_proj *pr = j->fuse;
  bool same_l = a->made_of[0]->row == b->made_of[0]->row;
  bool same_r = a->made_of[1]->row == b->made_of[1]->row;
  const size_t *as[2] = { NULL, NULL }, *bs[2] = { NULL, NULL };
  int rc = 0;
  if (!same_l && !(rc = spans_of(j, a, 0, &as[0]))) rc = spans_of(j, b, 0, &bs[0]);
  if (!rc && !same_r && !(rc = spans_of(j, a, 1, &as[1]))) rc = spans_of(j, b, 1, &bs[1]);
  if (rc) return rc;
  *same = true;
  for (int i = 0; i < pr->n && *same; i++) {
    int s = pr->slots[i];
    if (s < pr->left_ncols ? same_l : same_r) continue;
    size_t na, nb;
    const char *x = column_at(pr, a, as, s, &na), *y = column_at(pr, b, bs, s, &nb);
    *same = na == nb && memcmp(x, y, na) == 0;
  }
  return 0;
}

/* The join's change from old to now (JOIN-2), and the select's as
 * derive.h judges it: an UPDATE whose selected columns stayed is dropped.
 * Rows are walked only for what is compared or emitted. */
int rn_join_emit_fused(rn_join *j, uint64_t old_id, const side *old, uint64_t new_id, const side *now)
{
  int rc = 0;
  if (old->row && now->row && old_id == new_id) {
    if (same_made(old, now)) return 0;
    count(j, RN_UPDATE);
    bool same = false;
    rc = same_selected(j, old, now, &same);
    return rc || same ? rc : emit_select(j, RN_UPDATE, new_id, old, now);
  }
  if (old->row) {
    count(j, RN_DELETE);
    if ((rc = emit_select(j, RN_DELETE, old_id, old, NULL))) return rc;
  }
  if (now->row) {
    count(j, RN_INSERT);
    rc = emit_select(j, RN_INSERT, new_id, NULL, now);
  }
  return rc;
}
