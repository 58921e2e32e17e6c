/* join.c — a join's declaration and rebuild, and its operator (the state
 * and invariants are in join.h; the files of the join in join_int.h). */
#include "join_int.h"

#include <stdlib.h>
#include <string.h>

#include "derive.h"
#include "evolve.h"
#include "evolve_log.h"
#include "lookup.h"
#include "scan.h"
#include "wb.h"

/* ---- declaration ---- */

static void free_join(void *ctx)
{
  rn_join *j = ctx;
  if (j->fns.free_ctx) j->fns.free_ctx(j->fns.ctx);
  msgpack_sbuffer_destroy(&j->keybuf);
  msgpack_sbuffer_destroy(&j->resultbuf);
  rn_join_longfks_free(j);
  free(j->on);
  free(j->proj);
  free(j->fuse);
  rn_fkmemo_free(j->fkmemo);
  free(j);
}

/* Left columns then right columns; a right column whose name clashes is
 * renamed "<right relation>.<column>". Right columns are nullable except in
 * an inner join, whose every result has its right row. */
static rn_schema *default_schema(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right,
                                 bool stream, bool outer, bool inner, bool keyed)
{
  rn_schema *s = rn_schema_new();
  if (!s) { rn_err_set(&p->err, RN_ENOMEM, "out of memory"); return NULL; }
  for (int pass = 0; pass < 2; pass++) {
    const rn_schema *in = pass ? right->schema : left->schema;
    for (int i = 0; i < in->ncols; i++) {
      const rn_column *c = &in->cols[i];
      char *cname = c->name;
      char *renamed = NULL;
      if (pass && rn_schema_slot(s, c->name, c->name_len) >= 0) {
        size_t n = strlen(right->name) + c->name_len + 2;
        renamed = malloc(n);
        if (!renamed) { rn_schema_free(s); rn_err_set(&p->err, RN_ENOMEM, "out of memory"); return NULL; }
        snprintf(renamed, n, "%s.%s", right->name, c->name);
        cname = renamed;
      }
      rn_schema *fields = NULL;
      if (c->fields) {
        fields = rn_schema_new();
        if (!fields || rn_schema_copy_columns(fields, c->fields, false, &p->err)) {
          rn_schema_free(fields);
          free(renamed);
          rn_schema_free(s);
          return NULL;
        }
      }
      bool nullable = c->nullable || (pass == 1 && !inner) || (outer && !c->is_key); /* inner: a right row is there */
      int slot = rn_schema_add(s, cname, strlen(cname), c->type, nullable, fields, &p->err);
      free(renamed);
      if (slot < 0) { rn_err_prefix(&p->err, name); rn_schema_free(s); return NULL; }
    }
  }
  if (!stream && keyed && left->schema->nkey) {
    if (rn_schema_set_key(s, left->schema->key_slots, left->schema->nkey, name, &p->err)) {
      rn_schema_free(s);
      return NULL;
    }
  }
  return s;
}

typedef struct reference { int slot; const char *to; } reference;

static int by_slot(const void *a, const void *b)
{
  const reference *x = a, *y = b;
  return x->slot != y->slot ? (x->slot > y->slot) - (x->slot < y->slot) : strcmp(x->to, y->to);
}

/* A joiner of column references: the projection of the default result
 * (*whole, replaced by the projected schema) it names, or NULL with the
 * error set. Columns come in the order of the columns they refer to. */
static rn_join_proj *references(rn_pipeline *p, const char *name, const rn_join_spec *spec, int left_ncols,
                                rn_schema **whole)
{
  int n = spec->nproject;
  reference refs[n];
  for (int i = 0; i < n; i++) {
    refs[i].slot = rn_schema_slot(*whole, spec->project_from[i], strlen(spec->project_from[i]));
    refs[i].to = spec->project_to[i];
    if (refs[i].slot < 0) {
      rn_err_set(&p->err, RN_EINVAL, "%s: joiner: column \"%s\" references \"%s\", which the join does not have",
                 name, refs[i].to, spec->project_from[i]);
      return NULL;
    }
  }
  qsort(refs, (size_t)n, sizeof *refs, by_slot);
  int slots[n];
  const char *names[n];
  for (int i = 0; i < n; i++) slots[i] = refs[i].slot, names[i] = refs[i].to;
  rn_schema *projected = rn_select_schema(p, name, *whole, slots, names, n, NULL, 0);
  if (!projected) return NULL;
  rn_join_proj *pr = rn_join_proj_new(slots, n, left_ncols);
  if (!pr) {
    rn_schema_free(projected);
    rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    return NULL;
  }
  rn_schema_free(*whole);
  *whole = projected;
  return pr;
}

/* Whether a and b describe the same columns and key (rn_schema_describe). */
static bool same_schema(const rn_schema *a, const rn_schema *b)
{
  msgpack_sbuffer x, y;
  msgpack_sbuffer_init(&x);
  msgpack_sbuffer_init(&y);
  msgpack_packer px, py;
  msgpack_packer_init(&px, &x, rn_buf_write);
  msgpack_packer_init(&py, &y, rn_buf_write);
  rn_schema_describe(a, &px);
  rn_schema_describe(b, &py);
  bool same = x.size == y.size && x.data && y.data && memcmp(x.data, y.data, x.size) == 0;
  msgpack_sbuffer_destroy(&x);
  msgpack_sbuffer_destroy(&y);
  return same;
}

/* A joiner function recognised as copying columns (spec->copies): the
 * projection doing it in C when it gives exactly the declared *schema
 * (then replaced by the projection's own), copying scalars only (the
 * joiner would hand them through Lua unchanged), in the order of the
 * default result's columns; NULL otherwise, with p->err as it was: the
 * join then calls the joiner. Only table-to-table inner and left joins. */
static rn_join_proj *copies(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right, const rn_join_spec *spec,
                            bool keyed, rn_schema **schema)
{
  if (!spec->copies || !*schema || spec->nproject || spec->kind == RN_JOIN_OUTER || !left->tablelike ||
      right->kind == RN_REL_LOOKUP)
    return NULL;
  rn_err was = p->err;
  int n = (*schema)->ncols;
  rn_schema *whole = default_schema(p, name, left, right, false, false, spec->kind == RN_JOIN_INNER, keyed);
  bool ok = whole && n > 0;
  const char *names[n > 0 ? n : 1];
  for (int i = 0; ok && i < n; i++) {
    int at = spec->copies[i];
    ok = at >= 0 && at < whole->ncols && (i == 0 || at > spec->copies[i - 1]) && rn_type_is_scalar(whole->cols[at].type);
    names[i] = (*schema)->cols[i].name;
  }
  rn_schema *projected = ok ? rn_select_schema(p, name, whole, spec->copies, names, n, NULL, 0) : NULL;
  rn_join_proj *pr = projected && same_schema(projected, *schema) ? rn_join_proj_new(spec->copies, n, left->schema->ncols)
                                                                   : NULL;
  rn_schema_free(whole);
  if (!pr) {
    rn_schema_free(projected);
    p->err = was;
    return NULL;
  }
  rn_schema_free(*schema);
  *schema = projected;
  return pr;
}

static int check_spec(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right,
                      const rn_join_spec *spec, const rn_join_fns *fns, bool *key_join)
{
  const rn_schema *ls = left->schema, *rs = right->schema;
  *key_join = false;
  if (left->p != p || right->p != p) /* rows of one would be read in the other's transactions */
    return rn_err_set(&p->err, RN_EINVAL, "%s: %s and %s belong to different pipelines", name, left->name,
                      right->name);
  if (rn_check_not_lookup(p, name, "join's left side", left)) return p->err.code;
  if (right->kind == RN_REL_LOOKUP && spec->kind == RN_JOIN_OUTER)
    return rn_err_set(&p->err, RN_EINVAL, "%s: a lookup has no rows of its own to outer-join", name);
  if (!right->tablelike && right->kind != RN_REL_LOOKUP)
    return rn_err_set(&p->err, RN_EINVAL, "%s: the right side of a join must be a table, and %s is a stream",
                      name, right->name);
  if (!rs->nkey)
    return rn_err_set(&p->err, RN_EINVAL, "%s: the right side of a join needs a key, and %s has none",
                      name, right->name);
  if (spec->on) {
    if (spec->non != rs->nkey)
      return rn_err_set(&p->err, RN_EINVAL, "%s: on names %d column%s but the key of %s has %d",
                        name, spec->non, spec->non == 1 ? "" : "s", right->name, rs->nkey);
    bool all_key = left->tablelike && ls->nkey == spec->non;
    for (int i = 0; i < spec->non; i++) {
      const rn_column *lc = &ls->cols[spec->on[i]], *rc = &rs->cols[rs->key_slots[i]];
      bool numeric = (lc->type == RN_T_INT || lc->type == RN_T_FLOAT) &&
                     (rc->type == RN_T_INT || rc->type == RN_T_FLOAT);
      if (lc->type != rc->type && !numeric && lc->type != RN_T_ANY)
        return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\" (%s) cannot match key column \"%s\" of %s (%s)",
                          name, lc->name, rn_type_name(lc->type), rc->name, right->name, rn_type_name(rc->type));
      if (all_key && spec->on[i] != ls->key_slots[i]) all_key = false;
    }
    *key_join = all_key && !fns->selector;
  }
  if (spec->kind == RN_JOIN_OUTER && !*key_join)
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: kind = \"outer\" joins two tables on both keys (on = the left key, matching the key of %s)",
                      name, right->name);
  if (!left->tablelike && fns->selector)
    return rn_err_set(&p->err, RN_EINVAL, "%s: a stream join has no result key to select", name);
  if (left->tablelike && !ls->nkey && spec->schema && spec->schema->nkey && !fns->selector)
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: %s has no key, so each of its rows has a result of its own, which no key column holds "
                      "(two rows would give one key): declare no key in columns, or give %s a key or the join a "
                      "selector", name, left->name, left->name);
  if (spec->schema && !fns->joiner && !spec->nproject) /* its rows would be left+right under those names */
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: columns are the rows a joiner returns: give a joiner, or select columns after the join",
                      name);
  return 0;
}

/* The left column a mapper recognised as returning one (spec->mapper_column)
 * gives, read from the row, exactly the key the mapper gives when the
 * right key is one column of that column's scalar type: the value goes
 * into Lua and back unchanged, and the same normalizing encodes it. -1
 * otherwise: the mapper is called. */
static int mapper_column(const rn_rel *left, const rn_rel *right, const rn_join_spec *spec, const rn_join_fns *fns)
{
  const rn_schema *ls = left->schema, *rs = right->schema;
  if (!spec->mapper_column || !fns->mapper || spec->on || rs->nkey != 1) return -1;
  int slot = *spec->mapper_column;
  if (slot < 0 || slot >= ls->ncols) return -1;
  rn_type t = ls->cols[slot].type;
  return t == rs->cols[rs->key_slots[0]].type && rn_type_is_scalar(t) ? slot : -1;
}

/* Builds the join's state from its inputs' current contents: at the first
 * declaration over existing rows, or when the state missed groups. */
typedef struct boot { rn_join *j; } boot;

static int boot_right(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  rn_join *j = ((boot *)ctx)->j;
  rn_change c = { RN_INSERT, id, row, len, NULL, 0 };
  side n = { .row = row, .len = len };
  fk kn, none = { .null = true };
  int rc = rn_join_right_key(j, &n, &kn);
  return rc ? rc : rn_join_right_copy(j, &none, &kn, &c);
}

static int boot_left(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_join *j = ((boot *)ctx)->j;
  side lb = { 0 }, la = { .row = row, .len = len };
  rn_rel *out = j->out; /* declared just now: nothing listens to it yet */
  int rc = rn_join_left_step(j, id, &lb, &la, NULL);
  out->emitted[0] = out->emitted[1] = out->emitted[2] = 0;
  return rc;
}

static int rebuild(rn_join *j)
{
  MDB_txn *txn = txn_of(j);
  rn_store *s = &j->out->p->store;
  bool by_fn = j->fk_of_index;
  j->fk_of_index = true; /* the right key each left row was filed under, not what the mapper says now */
  j->longfk_unread = false;
  int rc = j->stream ? 0 : rn_rebuild_before(j->out); /* its rows as its sinks were told */
  if (rc == RN_EINVAL && j->longfk_unread) { /* a mapper's long key, filed under its first bytes and a hash */
    rn_err_clear(err_of(j));
    rc = rn_join_longfks_build(j); /* the whole keys, from the right rows (what an entry told stays) */
    if (!rc) rc = rn_rebuild_before(j->out);
    rn_join_longfks_free(j);
  }
  j->fk_of_index = by_fn;
  if (rc) return rc;
  rc = j->stream ? 0 : rn_wb_drop(s, txn, j->index_dbi, 0);
  if (!rc && !j->right_native && !j->lookup) rc = rn_wb_drop(s, txn, j->right_dbi, 0);
  if (rc) return rn_store_fail(err_of(j), rc, j->out->name);
  boot b = { j };
  if (!j->right_native && !j->lookup && (rc = rn_rel_scan(j->right, boot_right, &b))) return rc;
  if (j->stream) return 0;
  rc = rn_rel_scan(j->left, boot_left, &b);
  return rc ? rc : rn_rebuild_after(j->out); /* what changed, for its sinks (evolve_log.h) */
}

/* Opens the join's databases and, when its state is new or stale,
 * rebuilds it (rn_open_derived_state). */
static int setup_state(void *ctx, bool created, bool rebuild_it)
{
  rn_join *j = ctx;
  rn_pipeline *p = j->out->p;
  const char *name = j->out->name;
  int rc = 0;
  if (!j->stream) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_JOIN_INDEX, name, 0, &j->index_dbi);
  if (!rc && !j->stream) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_JOIN_RESULTS, name, 0, &j->result_dbi);
  if (!rc && !j->stream) /* every result key ever made keeps its id in "jr:", a rebuild included */
    rc = rn_state_check_ids(p, j->out, p->store.wtxn, j->result_dbi, 0, NULL);
  if (!rc && !j->right_native && !j->lookup) rc = rn_state_dbi(p, p->store.wtxn, RN_DB_JOIN_RIGHT, name, 0, &j->right_dbi);
  (void)created; /* a new join is built like a stale one: from its inputs */
  bool changed = false; /* another declaration with the same columns (another `on` column) */
  if (!rc) rc = rn_join_decl_record(j->out, p->store.wtxn, &changed); /* also for readers in other processes */
  if (!rc && changed && !created && j->out->stateful && !(rc = rn_evolve_decl_changed(p, j->out))) rebuild_it = true;
  if (!rc && rebuild_it && j->out->stateful) rc = rebuild(j);
  return rc;
}

int rn_declare_join(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right,
                    const rn_join_spec *spec, const rn_join_fns *fns, rn_rel **out)
{
  rn_schema *schema = spec->schema;
  bool key_join = false;
  int rc = rn_check_declarable(p, name);
  if (!rc) rc = check_spec(p, name, left, right, spec, fns, &key_join);
  rn_join *j = rc ? NULL : calloc(1, sizeof *j);
  if (!rc && !j) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc && spec->on && !(j->on = malloc(sizeof *j->on * (size_t)spec->non)))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  bool stream = !left->tablelike;
  if (!rc && !schema &&
      !(schema = default_schema(p, name, left, right, stream, spec->kind == RN_JOIN_OUTER,
                                 spec->kind == RN_JOIN_INNER, !fns->selector)))
    rc = p->err.code;
  if (!rc && spec->nproject && !(j->proj = references(p, name, spec, left->schema->ncols, &schema))) rc = p->err.code;
  rn_join_fns f = *fns;
  if (!rc && fns->joiner && (j->proj = copies(p, name, left, right, spec, !fns->selector, &schema))) f.joiner = NULL;
  if (rc) {
    if (j) free(j->proj);
    if (j) free(j->on);
    free(j);
    if (fns->free_ctx) fns->free_ctx(fns->ctx);
    rn_schema_free(schema);
    return rc;
  }
  j->kind = spec->kind;
  j->stream = stream;
  j->key_join = key_join;
  j->non = spec->on ? spec->non : 0;
  if (spec->on) memcpy(j->on, spec->on, sizeof *j->on * (size_t)spec->non);
  j->mapper_column = mapper_column(left, right, spec, fns);
  for (int i = 0; i < j->non; i++) if (j->on[i] + 1 > j->on_upto) j->on_upto = j->on[i] + 1;
  j->fns = f;
  j->left = left;
  j->right = right;
  msgpack_sbuffer_init(&j->keybuf);
  msgpack_sbuffer_init(&j->resultbuf);
  j->right_native = right->kind == RN_REL_TABLE;
  j->lookup = right->kind == RN_REL_LOOKUP;
  j->keeps_results = j->lookup || f.joiner;
  rn_rel *r = rn_rel_new(p, name, RN_REL_JOIN, schema);
  if (!r) {
    free_join(j);
    rn_schema_free(schema);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  j->out = r;
  r->ctx = j;
  r->input = left;
  r->right = right; /* an evolved right side rebuilds it too (rn_evolve_opened) */
  r->tablelike = !stream;
  r->persistent = true;
  r->stateful = !stream || (!j->right_native && !j->lookup);

  rc = rn_open_derived_state(p, r, setup_state, j);
  if (!rc) rc = rn_push_ptr((void ***)&left->outputs, &left->noutputs, &left->outcap, r);
  if (!rc && right != left && rn_push_ptr((void ***)&right->outputs, &right->noutputs, &right->outcap, r))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc) {
    if (left->noutputs && left->outputs[left->noutputs - 1] == r) left->noutputs--;
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

const rn_rel_ops rn_join_ops = { .name = "join", .apply = rn_join_apply, .scan = rn_join_scan, .free = free_join };
