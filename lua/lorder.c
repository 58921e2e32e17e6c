/* lorder.c — ordered access from Lua: p:_top, p:_index and an index's
 * reads (runnel.lua's rel:top{}, rel:index{}, idx:range{} …). */
#include <string.h>

#include "index.h"
#include "lbind.h"
#include "top.h"

/* Reads the strings of the sequence at idx into names (at most max). */
static int names_at(lua_State *L, int idx, const char **names, int max, const char *what)
{
  int n = (int)luaL_len(L, idx);
  if (n > max) return rn_lua_error(L, "%s: at most %d columns", what, max); /* at the user's line */
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    names[i] = lua_tostring(L, -1); /* the table keeps the string alive */
    lua_pop(L, 1);
    if (!names[i]) return rn_lua_error(L, "%s: column names must be strings", what);
  }
  return n;
}

/* Reads the booleans of the sequence at idx into flags (n of them). */
static void flags_at(lua_State *L, int idx, bool *flags, int n)
{
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    flags[i] = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
}

/* p:_top(in, name, n, { by… }, { order… }, { desc… }, rank) -> relation | nil, err */
int rn_lua_declare_top(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  const char *name = rn_lua_checkname(L, 3, "top");
  rn_top_spec spec = { .n = (uint64_t)luaL_checkinteger(L, 4), .rank = luaL_checkstring(L, 8) };
  luaL_checktype(L, 5, LUA_TTABLE);
  luaL_checktype(L, 6, LUA_TTABLE);
  luaL_checktype(L, 7, LUA_TTABLE);
  spec.nby = names_at(L, 5, spec.by, RN_TOP_COLS, name);
  spec.norder = names_at(L, 6, spec.order, RN_TOP_COLS, name);
  flags_at(L, 7, spec.desc, spec.norder);
  if (luaL_checkinteger(L, 4) < 1) return rn_lua_nil_error(L, "top: n must be at least 1");
  rn_rel *rel = NULL;
  int rc = rn_declare_top(lp->p, name, in->rel, &spec, &rel);
  return rn_lua_declared(L, lp, rc, rel);
}

/* p:_index(in, name, { cols… }, { desc… }) -> relation | nil, err */
int rn_lua_declare_index(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  const char *name = rn_lua_checkname(L, 3, "index");
  const char *cols[RN_TOP_COLS];
  bool desc[RN_TOP_COLS];
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 5, LUA_TTABLE);
  int n = names_at(L, 4, cols, RN_TOP_COLS, name);
  flags_at(L, 5, desc, n);
  rn_rel *rel = NULL;
  int rc = rn_declare_index(lp->p, name, in->rel, n, cols, desc, &rel);
  return rn_lua_declared(L, lp, rc, rel);
}

/* The index relation at 1, whose read (range, count, rank) is noted when
 * a relation's function makes it (rn_lua_note_read). */
static lrel *check_index(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  if (r->rel->kind != RN_REL_INDEX) rn_lua_error(L, "%s: not an index (rel:index{})", r->rel->name);
  rn_lua_note_read(L, r->lp, r->rel);
  return r;
}

void rn_lua_check_read_opts(lua_State *L, int idx, const char *who, const char *what, const char *const *allowed)
{
  if (lua_type(L, idx) != LUA_TTABLE) return;
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    bool known = false;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (int i = 0; allowed[i] && !known; i++) known = strcmp(lua_tostring(L, -1), allowed[i]) == 0;
    if (!known) {
      const char *key = luaL_tolstring(L, -1, NULL);
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int i = 0; allowed[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, allowed[i]);
      }
      luaL_pushresult(&b);
      rn_lua_error(L, "%s: %s: unknown option %s (%s)", who, what, key, lua_tostring(L, -1));
    }
  }
}

/* NaN has no place in an order: a NaN bound would compare with nothing. */
static void check_scalar(lua_State *L, int idx, const char *who, const char *what, const char *opt, int nth)
{
  int t = lua_type(L, idx);
  if (t == LUA_TNUMBER && !lua_isinteger(L, idx) && lua_tonumber(L, idx) != lua_tonumber(L, idx)) {
    if (nth) rn_lua_error(L, "%s: %s: %s value #%d is NaN", who, what, opt, nth);
    rn_lua_error(L, "%s: %s: %s is NaN", who, what, opt);
  }
  if (nth && (t == LUA_TTABLE || t == LUA_TFUNCTION || t == LUA_TTHREAD))
    rn_lua_error(L, "%s: %s: value #%d must be a scalar, got %s", who, what, nth, luaL_typename(L, idx));
  if (!nth && (t == LUA_TFUNCTION || t == LUA_TTHREAD))
    rn_lua_error(L, "%s: %s: %s must be a value or a list of values, got %s", who, what, opt, luaL_typename(L, idx));
}

void rn_lua_check_bound(lua_State *L, int idx, const char *who, const char *what, const char *opt)
{
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) {
    check_scalar(L, idx, who, what, opt, 0);
    return;
  }
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) { /* a sequence only: a map's keys would be ignored */
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n)
      rn_lua_error(L, "%s: %s: %s must be a value or a list of values, got a table with key %s", who, what, opt,
                   luaL_tolstring(L, -1, NULL));
  }
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    check_scalar(L, -1, who, what, opt, (int)i);
    lua_pop(L, 1);
  }
}

lua_Integer rn_lua_read_count_opt(lua_State *L, int idx, const char *who, const char *what, const char *opt)
{
  if (lua_isnoneornil(L, idx)) return 0;
  lua_Integer v = 0;
  int ok = 0;
  if (lua_type(L, idx) == LUA_TNUMBER) v = lua_tointegerx(L, idx, &ok); /* 2.0 is 2; 2.5 and "2" are not */
  if (!ok) {
    if (lua_type(L, idx) == LUA_TSTRING)
      rn_lua_error(L, "%s: %s: %s must be an integer, got string \"%s\"", who, what, opt, lua_tostring(L, idx));
    if (lua_type(L, idx) == LUA_TNUMBER && lua_tonumber(L, idx) != lua_tonumber(L, idx)) /* tostring: "-nan" on x86 */
      rn_lua_error(L, "%s: %s: %s must be an integer, got nan", who, what, opt);
    rn_lua_error(L, "%s: %s: %s must be an integer, got %s", who, what, opt, luaL_tolstring(L, idx, NULL));
  }
  if (v < 0) rn_lua_error(L, "%s: %s: %s must not be negative, got %I", who, what, opt, v);
  return v;
}

/* The bound at idx (nil, a value, or a sequence of values for the first
 * order columns) into vals. */
static int bound_at(lua_State *L, lrel *r, int idx, msgpack_object *vals, rn_index_bound *b)
{
  const rn_order *o = rn_index_order(r->rel);
  b->vals = vals;
  b->n = 0;
  if (lua_isnil(L, idx)) return 0;
  bool seq = lua_type(L, idx) == LUA_TTABLE;
  int n = seq ? (int)luaL_len(L, idx) : 1;
  if (n > o->n) return rn_lua_error(L, "%s: a bound of %d values for an order of %d columns", r->rel->name, n, o->n);
  for (int i = 0; i < n; i++) {
    if (seq) lua_rawgeti(L, idx, i + 1); /* the bound table keeps strings alive */
    else lua_pushvalue(L, idx);
    int rc = rn_lua_tovalue(r->lp, L, -1, &r->rel->schema->cols[o->slots[i]], &vals[i], 0);
    lua_pop(L, 1);
    if (rc) return rn_lua_raise(L, r->lp);
  }
  b->n = n;
  return 0;
}

typedef struct collect {
  lua_State *L;
  lrel *r;
  lua_Integer n;
} collect;

static int collect_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  collect *c = ctx;
  rn_lua_pushrow(c->r->lp, c->L, c->r->rel, row, len);
  lua_rawseti(c->L, -2, ++c->n);
  return 0;
}

/* idx:_range(from, to, offset, limit) -> { row… } in index order */
int rn_lua_index_range(lua_State *L)
{
  lrel *r = check_index(L);
  msgpack_object from_vals[RN_TOP_COLS], to_vals[RN_TOP_COLS];
  rn_index_bound from, to;
  rn_lua_check_bound(L, 2, r->rel->name, "range", "from");
  rn_lua_check_bound(L, 3, r->rel->name, "range", "to");
  lua_Integer offset = rn_lua_read_count_opt(L, 4, r->rel->name, "range", "offset");
  lua_Integer limit = rn_lua_read_count_opt(L, 5, r->rel->name, "range", "limit");
  bound_at(L, r, 2, from_vals, &from);
  bound_at(L, r, 3, to_vals, &to);
  lua_newtable(L);
  /* limit = 0: no row (the core's 0 is no limit), its bounds still checked
   * by the core: a walk of one row, counted only */
  bool none = limit == 0 && !lua_isnoneornil(L, 5);
  collect c = { L, r, 0 };
  if (rn_index_range(r->rel, &from, &to, (uint64_t)offset, none ? 1 : (uint64_t)limit, none ? NULL : collect_row, &c))
    return rn_lua_raise(L, r->lp);
  return 1;
}

/* idx:_count(from, to) -> the rows between */
int rn_lua_index_count(lua_State *L)
{
  lrel *r = check_index(L);
  msgpack_object from_vals[RN_TOP_COLS], to_vals[RN_TOP_COLS];
  rn_index_bound from, to;
  rn_lua_check_bound(L, 2, r->rel->name, "count", "from");
  rn_lua_check_bound(L, 3, r->rel->name, "count", "to");
  bound_at(L, r, 2, from_vals, &from);
  bound_at(L, r, 3, to_vals, &to);
  uint64_t n;
  if (rn_index_count(r->rel, &from, &to, &n)) return rn_lua_raise(L, r->lp);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

/* idx:_rank(at) -> 1 + the rows strictly before at */
int rn_lua_index_rank(lua_State *L)
{
  lrel *r = check_index(L);
  msgpack_object vals[RN_TOP_COLS];
  rn_index_bound at;
  if (lua_isnoneornil(L, 2)) rn_lua_error(L, "%s: rank: expects a value or a list of values, got nil", r->rel->name);
  rn_lua_check_bound(L, 2, r->rel->name, "rank", "values");
  bound_at(L, r, 2, vals, &at);
  uint64_t rank;
  if (rn_index_rank(r->rel, &at, &rank)) return rn_lua_raise(L, r->lp);
  lua_pushinteger(L, (lua_Integer)rank);
  return 1;
}

/* rel:_ordered_count() -> the rows of a top or an index */
int rn_lua_ordered_count(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  if (r->rel->kind != RN_REL_INDEX && r->rel->kind != RN_REL_TOP)
    return rn_lua_error(L, "%s: count: only tables hold rows to count", r->rel->name);
  rn_lua_note_read(L, r->lp, r->rel);
  lua_pushinteger(L, (lua_Integer)r->rel->count);
  return 1;
}
