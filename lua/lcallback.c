/* lcallback.c — Lua functions as core callbacks: filter predicates, map
 * functions and sinks. Each runs under lua_pcall on the thread that called
 * into runnel; a Lua error becomes RN_ECALLBACK with the Lua message. */
#include <stdlib.h>
#include <string.h>

#include "derive.h"
#include "join.h"
#include "key.h"
#include "lbind.h"
#include "row.h"

typedef struct lcb {
  lpipe *lp;
  rn_rel *rel;            /* the relation the callback serves (for messages) */
  rn_rel *left, *right;   /* a join's inputs */
  int refs[5];            /* registry refs: fn | insert, update, delete, commit */
} lcb;

enum { CB_FN, CB_INSERT = 0, CB_UPDATE, CB_DELETE, CB_COMMIT, CB_ALL };
enum { CB_MAPPER = 0, CB_SELECTOR = 1, CB_JOINER = 2 };


static void free_cb(void *ctx)
{
  lcb *cb = ctx;
  for (int i = 0; i < 5; i++) luaL_unref(cb->lp->L, LUA_REGISTRYINDEX, cb->refs[i]);
  free(cb);
}

static lcb *new_cb(lua_State *L, lpipe *lp)
{
  lcb *cb = malloc(sizeof *cb);
  if (!cb) luaL_error(L, "out of memory");
  cb->lp = lp;
  cb->rel = cb->left = cb->right = NULL;
  for (int i = 0; i < 5; i++) cb->refs[i] = LUA_NOREF;
  return cb;
}

/* Callers check the type first: nothing may raise once a context is allocated. */
static int ref_function(lua_State *L, int idx)
{
  if (lua_isnoneornil(L, idx)) return LUA_NOREF;
  lua_pushvalue(L, idx);
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* fn(row) for a filter, a map or a mapper, or fn(left, right) for a joiner
 * (in2 set), under rn_lua_pcall. */
typedef struct row_call {
  lcb *cb;
  int ref;                /* the function's registry ref */
  rn_rel *in, *in2;       /* the rows' relations; in2 NULL: one row */
  const char *row, *row2;
  size_t len, len2;
} row_call;

static int row_body(lua_State *L)
{
  const row_call *k = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, k->ref);
  rn_lua_pushrow(k->cb->lp, L, k->in, k->row, k->len);
  if (k->in2) rn_lua_pushrow(k->cb->lp, L, k->in2, k->row2, k->len2);
  lua_call(L, k->in2 ? 2 : 1, 1);
  return 1;
}

static int filter_cb(void *ctx, rn_rel *in, const char *row, size_t len, int *pass, rn_err *e)
{
  lcb *cb = ctx;
  lua_State *L = cb->lp->L;
  row_call k = { cb, cb->refs[CB_FN], in, NULL, row, NULL, len, 0 };
  if (rn_lua_pcall(cb->lp, L, row_body, &k, 1, cb->rel->name, "filter", e)) return e->code;
  *pass = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return 0;
}

/* The row a map or joiner returned on top of the stack, checked against
 * out's schema and packed into result; nil means no row. Pops it. */
static int returned_row(lpipe *lp, lua_State *L, rn_rel *out, const char *bad_prefix,
                        msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  *has_row = !lua_isnil(L, -1);
  int rc = 0;
  if (*has_row) {
    msgpack_object *vals;
    uint8_t *given;
    rc = rn_lua_torow(lp, L, -1, out, &vals, &given);
    if (!rc) rc = rn_row_normalize(out->schema, out->name, RN_ROW_FULL, vals, given, &lp->p->scratch, e);
    if (!rc) rn_row_pack(out->schema, vals, result);
    else rn_err_prefix(e, bad_prefix);
  }
  lua_pop(L, 1);
  return rc;
}

static int map_cb(void *ctx, rn_rel *in, rn_rel *out, const char *row, size_t len,
                  msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  lcb *cb = ctx;
  lpipe *lp = cb->lp;
  lua_State *L = lp->L;
  row_call k = { cb, cb->refs[CB_FN], in, NULL, row, NULL, len, 0 };
  if (rn_lua_pcall(lp, L, row_body, &k, 1, cb->rel->name, "map", e)) return e->code;
  return returned_row(lp, L, out, "map returned a bad row", result, has_row, e);
}

static const char *const verb_names[] = { "", "INSERT", "UPDATE", "DELETE" };

static void push_info(lua_State *L, const rn_sink_info *info)
{
  lua_createtable(L, 0, 3);
  rn_lua_setint(L, "id", (lua_Integer)info->id);
  rn_lua_setint(L, "seq", (lua_Integer)info->seq);
  rn_lua_setint(L, "n", (lua_Integer)info->n);
}

/* fn(verb, row, old, info), or the table form's insert(row, info),
 * update(row, old, info), delete(old, info). */
typedef struct sink_call { lcb *cb; rn_rel *rel; const rn_change *c; const rn_sink_info *info; } sink_call;

static int sink_body(lua_State *L)
{
  const sink_call *k = lua_touserdata(L, 1);
  lcb *cb = k->cb;
  const rn_change *c = k->c;
  int nargs;
  if (cb->refs[CB_ALL] != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cb->refs[CB_ALL]);
    lua_pushstring(L, verb_names[c->verb]);
    rn_lua_pushrow(cb->lp, L, k->rel, c->row, c->row_len);
    rn_lua_pushrow(cb->lp, L, k->rel, c->old, c->old_len);
    nargs = 4;
  } else {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cb->refs[c->verb - 1]);
    nargs = 1; /* info */
    if (c->verb != RN_DELETE) { rn_lua_pushrow(cb->lp, L, k->rel, c->row, c->row_len); nargs++; }
    if (c->verb != RN_INSERT) { rn_lua_pushrow(cb->lp, L, k->rel, c->old, c->old_len); nargs++; }
  }
  push_info(L, k->info);
  lua_call(L, nargs, 0);
  return 0;
}

static int sink_cb(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  lcb *cb = ctx;
  if (cb->refs[CB_ALL] == LUA_NOREF && cb->refs[c->verb - 1] == LUA_NOREF) return 0;
  sink_call k = { cb, rel, c, info };
  return rn_lua_pcall(cb->lp, cb->lp->L, sink_body, &k, 0, rel->name, "sink", e);
}

typedef struct commit_call { lcb *cb; uint64_t seq; } commit_call;

static int sink_commit_body(lua_State *L)
{
  const commit_call *k = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, k->cb->refs[CB_COMMIT]);
  lua_pushinteger(L, (lua_Integer)k->seq);
  lua_call(L, 1, 0);
  return 0;
}

static int sink_commit_cb(void *ctx, uint64_t seq, rn_err *e)
{
  lcb *cb = ctx;
  if (cb->refs[CB_COMMIT] == LUA_NOREF) return 0;
  commit_call k = { cb, seq };
  return rn_lua_pcall(cb->lp, cb->lp->L, sink_commit_body, &k, 0, cb->rel->name, "sink commit", e);
}

/* A key as Lua sees it: a scalar for a one-column key, else a table by
 * column names; nil for no key. */
static void push_key(lua_State *L, const rn_schema *s, const msgpack_object *vals, int n)
{
  if (n == 0) { lua_pushnil(L); return; }
  if (s->nkey == 1) { rn_lua_pushvalue(L, &vals[0], &s->cols[s->key_slots[0]]); return; }
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    const rn_column *c = &s->cols[s->key_slots[i]];
    rn_lua_pushvalue(L, &vals[i], c);
    lua_setfield(L, -2, c->name);
  }
}

static int mapper_cb(void *ctx, rn_rel *left, const char *row, size_t len,
                     msgpack_object *out, int nkey, int *has_key, msgpack_zone *z, rn_err *e)
{
  (void)z;
  lcb *cb = ctx;
  lpipe *lp = cb->lp;
  lua_State *L = lp->L;
  row_call k = { cb, cb->refs[CB_MAPPER], left, NULL, row, NULL, len, 0 };
  if (rn_lua_pcall(lp, L, row_body, &k, 1, cb->rel->name, "mapper", e)) return e->code;
  *has_key = !lua_isnil(L, -1) && lua_touserdata(L, -1) != RN_LUA_NULL;
  int rc = 0;
  const rn_schema *rs = cb->right->schema;
  if (*has_key && nkey == 1 && !lua_istable(L, -1)) {
    rc = rn_lua_tovalue(lp, L, -1, &rs->cols[rs->key_slots[0]], &out[0], 0);
  } else if (*has_key && lua_istable(L, -1)) {
    for (int i = 0; i < nkey && !rc; i++) {
      const rn_column *kc = &rs->cols[rs->key_slots[i]];
      if (lua_rawgeti(L, -1, i + 1) == LUA_TNIL) { lua_pop(L, 1); lua_getfield(L, -1, kc->name); }
      rc = rn_lua_tovalue(lp, L, -1, kc, &out[i], 0);
      lua_pop(L, 1);
    }
  } else if (*has_key) {
    rc = rn_err_set(e, RN_EINVAL, "%s: mapper: the key of %s has %d columns: return a table, got %s",
                    cb->rel->name, cb->right->name, nkey, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return rc;
}

/* selector(left key, right key) under rn_lua_pcall. */
typedef struct keys_call {
  lcb *cb;
  const rn_schema *ls; const msgpack_object *lkey; int nl;
  const rn_schema *rs; const msgpack_object *rkey; int nr;
} keys_call;

static int keys_body(lua_State *L)
{
  const keys_call *k = lua_touserdata(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, k->cb->refs[CB_SELECTOR]);
  push_key(L, k->ls, k->lkey, k->nl);
  push_key(L, k->rs, k->rkey, k->nr);
  lua_call(L, 2, 1);
  return 1;
}

static int selector_cb(void *ctx, rn_rel *left, const msgpack_object *lkey, int nl,
                       rn_rel *right, const msgpack_object *rkey, int nr, msgpack_sbuffer *out, rn_err *e)
{
  lcb *cb = ctx;
  lpipe *lp = cb->lp;
  lua_State *L = lp->L;
  keys_call k = { cb, left->schema, lkey, nl, right->schema, rkey, nr };
  if (rn_lua_pcall(lp, L, keys_body, &k, 1, cb->rel->name, "selector", e)) return e->code;
  int n = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : 1, rc = 0;
  if (lua_isnil(L, -1) || n == 0)
    rc = rn_err_set(e, RN_EINVAL, "%s: selector: returned no key", cb->rel->name);
  for (int i = 0; i < n && !rc; i++) {
    if (lua_istable(L, -1)) lua_rawgeti(L, -1, i + 1); else lua_pushvalue(L, -1);
    msgpack_object v;
    rn_column any = { .name = (char *)"selector", .type = RN_T_ANY };
    rc = rn_lua_tovalue(lp, L, -1, NULL, &v, 0);
    if (!rc) rc = rn_value_normalize(&any, &v, &lp->p->scratch, cb->rel->name, e);
    if (!rc && rn_key_append(out, &v) != 0)
      rc = rn_err_set(e, RN_EINVAL, "%s: selector: keys are scalars (not NaN), got %s", cb->rel->name,
                      luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return rc;
}

static int joiner_cb(void *ctx, rn_rel *join, const char *lrow, size_t llen,
                     const char *rrow, size_t rlen, msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  lcb *cb = ctx;
  lpipe *lp = cb->lp;
  lua_State *L = lp->L;
  row_call k = { cb, cb->refs[CB_JOINER], cb->left, cb->right, lrow, rrow, llen, rlen };
  if (rn_lua_pcall(lp, L, row_body, &k, 1, join->name, "joiner", e)) return e->code;
  return returned_row(lp, L, join, "joiner returned a bad row", result, has_row, e);
}

/* p:_join(left, right, name, kind, on|nil, mapper, selector, joiner, cols|nil, key|nil)
 *   -> relation | nil, err */
int rn_lua_declare_join(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *left = rn_lua_checkrel(L, 2), *right = rn_lua_checkrel(L, 3);
  const char *name = luaL_checkstring(L, 4);
  static const char *const kinds[] = { "inner", "left", "outer", NULL };
  rn_join_spec spec = { (rn_join_kind)luaL_checkoption(L, 5, "inner", kinds), NULL, 0, NULL };
  for (int i = 7; i <= 9; i++)
    if (!lua_isnoneornil(L, i)) luaL_checktype(L, i, LUA_TFUNCTION);
  int on[64];
  if (lua_istable(L, 6)) {
    spec.non = (int)lua_rawlen(L, 6);
    if (spec.non > 64) return luaL_error(L, "%s: on names more than 64 columns", name);
    for (int i = 0; i < spec.non; i++) {
      lua_rawgeti(L, 6, i + 1);
      size_t len;
      const char *col = lua_tolstring(L, -1, &len);
      on[i] = col ? rn_schema_slot(left->rel->schema, col, len) : -1;
      if (on[i] < 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: on: %s has no column \"%s\"", name, left->rel->name, col ? col : "?");
        return 2;
      }
      lua_pop(L, 1);
    }
    spec.on = on;
  }
  rn_err e = { .code = RN_OK };
  if (lua_istable(L, 10) && !(spec.schema = rn_lua_toschema(lp, L, 10, lua_istable(L, 11) ? 11 : 0, name, &e)))
    return rn_lua_nil_error(L, e.msg);
  rn_join_fns fns = { NULL, NULL, NULL, NULL, NULL };
  if (!lua_isnoneornil(L, 7) || !lua_isnoneornil(L, 8) || !lua_isnoneornil(L, 9)) {
    lcb *cb = new_cb(L, lp);
    cb->left = left->rel;
    cb->right = right->rel;
    cb->refs[CB_MAPPER] = ref_function(L, 7);
    cb->refs[CB_SELECTOR] = ref_function(L, 8);
    cb->refs[CB_JOINER] = ref_function(L, 9);
    fns.mapper = cb->refs[CB_MAPPER] != LUA_NOREF ? mapper_cb : NULL;
    fns.selector = cb->refs[CB_SELECTOR] != LUA_NOREF ? selector_cb : NULL;
    fns.joiner = cb->refs[CB_JOINER] != LUA_NOREF ? joiner_cb : NULL;
    fns.ctx = cb;
    fns.free_ctx = free_cb;
  }
  rn_rel *rel = NULL;
  int rc = rn_declare_join(lp->p, name, left->rel, right->rel, &spec, &fns, &rel);
  if (!rc && fns.ctx) ((lcb *)fns.ctx)->rel = rel;
  return rn_lua_declared(L, lp, rc, rel);
}

int rn_lua_declared(lua_State *L, lpipe *lp, int rc, rn_rel *rel)
{
  if (rc) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  rn_lua_relinfo(L, rel);
  rn_lua_pushrel(L, 1, rel);
  return 1;
}

/* p:_filter(in, name, fn) -> relation | nil, err */
int rn_lua_declare_filter(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel(L, 2);
  const char *name = luaL_checkstring(L, 3);
  luaL_checktype(L, 4, LUA_TFUNCTION);
  lcb *cb = new_cb(L, lp);
  cb->refs[CB_FN] = ref_function(L, 4);
  rn_rel *rel = NULL;
  int rc = rn_declare_derived(lp->p, name, RN_REL_FILTER, in->rel, NULL, cb, free_cb, &rel);
  if (!rc) { rel->filter = filter_cb; cb->rel = rel; }
  return rn_lua_declared(L, lp, rc, rel);
}

/* p:_map(in, name, fn, cols, key|nil) -> relation | nil, err */
int rn_lua_declare_map(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel(L, 2);
  const char *name = luaL_checkstring(L, 3);
  luaL_checktype(L, 4, LUA_TFUNCTION);
  luaL_checktype(L, 5, LUA_TTABLE);
  int fn = ref_function(L, 4); /* may raise: nothing is allocated yet, the registry holds it */
  lcb *cb = new_cb(L, lp);
  cb->refs[CB_FN] = fn;
  rn_err e = { .code = RN_OK };
  rn_schema *s = rn_lua_toschema(lp, L, 5, lua_istable(L, 6) ? 6 : 0, name, &e);
  if (!s) { free_cb(cb); return rn_lua_nil_error(L, e.msg); }
  rn_rel *rel = NULL;
  int rc = rn_declare_derived(lp->p, name, RN_REL_MAP, in->rel, s, cb, free_cb, &rel);
  if (!rc) { rel->map = map_cb; cb->rel = rel; }
  return rn_lua_declared(L, lp, rc, rel);
}

/* p:_sink(rel, fn|nil, insert, update, delete, commit, consolidate) -> true | nil, err */
int rn_lua_add_sink(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *r = rn_lua_checkrel(L, 2);
  for (int i = 3; i <= 7; i++)
    if (!lua_isnoneornil(L, i)) luaL_checktype(L, i, LUA_TFUNCTION);
  lcb *cb = new_cb(L, lp);
  cb->rel = r->rel;
  cb->refs[CB_ALL] = ref_function(L, 3);
  cb->refs[CB_INSERT] = ref_function(L, 4);
  cb->refs[CB_UPDATE] = ref_function(L, 5);
  cb->refs[CB_DELETE] = ref_function(L, 6);
  cb->refs[CB_COMMIT] = ref_function(L, 7);
  if (rn_sink_add(lp->p, r->rel, lua_toboolean(L, 8), sink_cb, sink_commit_cb, cb, free_cb))
    return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushboolean(L, 1);
  return 1;
}

/* p:_select(in, name, {input names}, {output names}, {key output names}|nil)
 *   -> relation | nil, err */
int rn_lua_declare_select(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel(L, 2);
  const char *name = luaL_checkstring(L, 3);
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 5, LUA_TTABLE);
  int n = (int)lua_rawlen(L, 4);
  if (n == 0 || n > 1024 || (int)lua_rawlen(L, 5) != n) return luaL_error(L, "%s: select needs 1 to 1024 columns", name);
  int slots[n], key[n], nkey = 0;
  const char *names[n];
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 4, i + 1);
    size_t len;
    const char *col = lua_tolstring(L, -1, &len);
    slots[i] = col ? rn_schema_slot(in->rel->schema, col, len) : -1;
    lua_pop(L, 1);
    if (slots[i] < 0) {
      lua_pushnil(L);
      lua_pushfstring(L, "%s: select: %s has no column \"%s\"", name, in->rel->name, col ? col : "?");
      return 2;
    }
    lua_rawgeti(L, 5, i + 1);
    names[i] = lua_tostring(L, -1); /* kept alive by the table at 5 */
    lua_pop(L, 1);
  }
  if (lua_istable(L, 6)) {
    nkey = (int)lua_rawlen(L, 6);
    for (int k = 0; k < nkey && k < n; k++) {
      lua_rawgeti(L, 6, k + 1);
      const char *kn = lua_tostring(L, -1);
      key[k] = -1;
      for (int i = 0; i < n && kn; i++) if (strcmp(names[i], kn) == 0) key[k] = i;
      lua_pop(L, 1);
      if (key[k] < 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: key column \"%s\" is not a selected column", name, kn ? kn : "?");
        return 2;
      }
    }
  }
  rn_rel *rel = NULL;
  int rc = rn_declare_select(lp->p, name, in->rel, slots, names, n, nkey ? key : NULL, nkey, &rel);
  return rn_lua_declared(L, lp, rc, rel);
}

int rn_lua_call(lpipe *lp, lua_State *L, int nargs, int nresults, const char *rel, const char *what, rn_err *e)
{
  int st = lua_pcall(L, nargs, nresults, 0);
  lp->L = L; /* the thread that called into runnel */
  if (st == LUA_OK) return 0;
  const char *msg = lua_tostring(L, -1);
  if (!msg) msg = luaL_typename(L, -1);
  if (e->code != RN_OK && strstr(msg, e->msg)) /* a runnel error raised inside: keep its code */
    rn_err_set(e, e->code, "%s: %s: %s", rel, what, msg);
  else
    rn_err_set(e, st == LUA_ERRMEM ? RN_ENOMEM : RN_ECALLBACK, "%s: %s: %s", rel, what, msg);
  lua_pop(L, 1);
  return e->code;
}

int rn_lua_pcall(lpipe *lp, lua_State *L, lua_CFunction body, void *ud, int nresults, const char *rel,
                 const char *what, rn_err *e)
{
  lua_pushcfunction(L, body); /* a light C function and a light userdata: nothing to allocate */
  lua_pushlightuserdata(L, ud);
  return rn_lua_call(lp, L, 1, nresults, rel, what, e);
}
