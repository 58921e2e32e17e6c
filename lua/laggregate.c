/* laggregate.c — p:_aggregate and user aggregates (runnel.agg{ init, add,
 * remove, result }) as core callbacks. States travel as msgpack values: a
 * state must be something a row could hold (numbers, strings, tables …). */
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "lbind.h"
#include "row.h"

enum { F_INIT, F_ADD, F_REMOVE, F_RESULT, F_N };

typedef struct laggs {
  lpipe *lp;
  char *name;             /* the aggregate's name (for messages; set before any call) */
  int n;                  /* aggregates */
  int (*refs)[F_N];       /* per aggregate: registry refs (LUA_NOREF: none) */
  char **names;           /* per aggregate: its column's name (for messages) */
} laggs;

static void free_laggs(void *ctx)
{
  laggs *g = ctx;
  for (int i = 0; i < g->n; i++)
    for (int f = 0; f < F_N; f++) luaL_unref(g->lp->L, LUA_REGISTRYINDEX, g->refs[i][f]);
  free(g->refs);
  for (int i = 0; g->names && i < g->n; i++) free(g->names[i]);
  free(g->names);
  free(g->name);
  free(g);
}

/* Pushes a msgpack value; a top-level nil is Lua's nil (not runnel.null). */
static void push_state(lua_State *L, const char *data, size_t len, msgpack_zone *z)
{
  msgpack_object o;
  size_t off = 0;
  if (rn_unpack(data, len, &off, z, &o) != MSGPACK_UNPACK_SUCCESS || o.type == MSGPACK_OBJECT_NIL)
    lua_pushnil(L);
  else
    rn_lua_pushvalue(L, &o, NULL);
  msgpack_zone_clear(z);
}

/* Packs the value on top of L (then pops it) as a state or result; one
 * it cannot keep is refused as "<relation>: <what>: column "<aggregate>"…". */
static int pack_top(laggs *g, lua_State *L, const char *what, int agg, msgpack_sbuffer *out, rn_err *e)
{
  msgpack_object v;
  rn_column any = { .name = g->names[agg], .type = RN_T_ANY };
  int rc = rn_lua_tovalue(g->lp, L, -1, &any, &v, 0);
  if (rc) { /* its message (in the pipeline's error) names the column only */
    if (e != &g->lp->p->err) *e = g->lp->p->err;
    rn_err_prefix(e, what);
  }
  if (!rc && v.type != MSGPACK_OBJECT_NIL) rc = rn_value_normalize(&any, &v, &g->lp->p->scratch, what, e);
  lua_pop(L, 1);
  if (rc) return rc;
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, rn_buf_write);
  msgpack_pack_object(&pk, v);
  return 0;
}

/* One call of a user aggregate function. */
typedef struct aggcall {
  laggs *g;
  int agg, fn;            /* which aggregate, which of its functions (F_…) */
  const char *what;
  const char *state;      /* the state given (NULL: none, for init) */
  size_t slen;
  rn_rel *in;             /* add, remove: the row given */
  const char *row;
  size_t rlen;
  msgpack_sbuffer *out;
} aggcall;

/* fn([state [, row]]) packed into out, protected (rn_lua_protect). */
static int agg_body(lua_State *L, void *ud, rn_err *e)
{
  aggcall *c = ud;
  laggs *g = c->g;
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->refs[c->agg][c->fn]);
  int nargs = 0;
  if (c->fn != F_INIT) { push_state(L, c->state, c->slen, &g->lp->zone); nargs++; }
  if (c->row) { rn_lua_pushrow(g->lp, L, c->in, c->row, c->rlen); nargs++; }
  lua_call(L, nargs, 1);
  char what[512]; /* the value's refusal: "<relation>: aggregate "<name>": <fn>" */
  snprintf(what, sizeof what, "%s: aggregate \"%s\": %s", g->name, g->names[c->agg], c->what);
  return pack_top(g, L, what, c->agg, c->out, e);
}

/* Errors name the aggregate and the function: "<relation>: aggregate
 * "<name>": add: …". */
static int call(aggcall *c, rn_err *e)
{
  lpipe *lp = c->g->lp;
  char what[320];
  snprintf(what, sizeof what, "aggregate \"%s\": %s", c->g->names[c->agg], c->what);
  return rn_lua_protect(lp, lp->L, agg_body, c, c->g->name, what, e);
}

static int init_cb(void *ctx, int agg, msgpack_sbuffer *state, rn_err *e)
{
  laggs *g = ctx;
  if (g->refs[agg][F_INIT] == LUA_NOREF) { rn_buf_write(state, "\xc0", 1); return 0; }
  aggcall c = { .g = g, .agg = agg, .fn = F_INIT, .what = "init", .out = state };
  return call(&c, e);
}

static int step_cb(void *ctx, int agg, bool add, const char *state, size_t slen, rn_rel *in,
                   const char *row, size_t rlen, msgpack_sbuffer *out, rn_err *e)
{
  aggcall c = { .g = ctx, .agg = agg, .fn = add ? F_ADD : F_REMOVE, .what = add ? "add" : "remove",
                .state = state, .slen = slen, .in = in, .row = row, .rlen = rlen, .out = out };
  return call(&c, e);
}

static int result_cb(void *ctx, int agg, const char *state, size_t slen, msgpack_sbuffer *out, rn_err *e)
{
  laggs *g = ctx;
  if (g->refs[agg][F_RESULT] == LUA_NOREF) { rn_buf_write(out, state, slen); return 0; }
  aggcall c = { .g = g, .agg = agg, .fn = F_RESULT, .what = "result", .state = state, .slen = slen,
                .out = out };
  return call(&c, e);
}

static bool can_remove_cb(void *ctx, int agg)
{
  return ((laggs *)ctx)->refs[agg][F_REMOVE] != LUA_NOREF;
}

static int slot_of(lua_State *L, lrel *in, int idx, const char *name, const char *what, int *slot)
{
  size_t len;
  const char *col = lua_tolstring(L, idx, &len);
  *slot = col ? rn_schema_slot(in->rel->schema, col, len) : -1;
  if (*slot >= 0) return 0;
  lua_pushfstring(L, "%s: %s: %s has no column \"%s\"", name, what, in->rel->name, col ? col : "?");
  return -1;
}

/* p:_aggregate(in, name, {by names}, window|nil, {{name, kind, col|nil, fns|nil}…})
 *   window = { kind = "tumbling"|"hopping", size, step, col, grace|nil }
 *   -> relation | nil, err */
int rn_lua_declare_aggregate(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  const char *name = rn_lua_checkname(L, 3, "aggregate");
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 6, LUA_TTABLE);
  int nby = (int)lua_rawlen(L, 4), naggs = (int)lua_rawlen(L, 6);
  if (nby > 64 || naggs > 250) return rn_lua_nil_error(L, "aggregate: at most 64 by columns and 250 aggregates");
  int by[nby ? nby : 1];
  for (int i = 0; i < nby; i++) {
    lua_rawgeti(L, 4, i + 1);
    int bad = slot_of(L, in, -1, name, "by", &by[i]);
    if (bad) return rn_lua_nil_error(L, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  rn_window w = { RN_WINDOW_NONE, 0, 0, -1, false, 0 };
  if (lua_istable(L, 5)) {
    lua_getfield(L, 5, "kind");
    w.kind = strcmp(luaL_optstring(L, -1, "tumbling"), "hopping") == 0 ? RN_WINDOW_HOPPING : RN_WINDOW_TUMBLING;
    lua_getfield(L, 5, "size");
    lua_getfield(L, 5, "step");
    w.size = lua_tonumber(L, -2);
    w.step = lua_isnil(L, -1) ? w.size : lua_tonumber(L, -1);
    lua_getfield(L, 5, "grace");
    w.has_grace = !lua_isnil(L, -1);
    w.grace = lua_tonumber(L, -1);
    lua_getfield(L, 5, "col");
    int bad = slot_of(L, in, -1, name, "window", &w.slot);
    if (bad) return rn_lua_nil_error(L, lua_tostring(L, -1));
    lua_pop(L, 5);
  }
  rn_agg_spec specs[naggs ? naggs : 1];
  static const char *const kinds[] = { "count", "count_col", "sum", "min", "max", "avg", "agg", NULL };
  bool user = false;
  for (int i = 0; i < naggs; i++) {
    lua_rawgeti(L, 6, i + 1);
    lua_getfield(L, -1, "name");
    specs[i].name = lua_tostring(L, -1); /* kept alive by the table at 6 */
    lua_getfield(L, -2, "kind");
    specs[i].kind = (rn_agg_kind)luaL_checkoption(L, -1, NULL, kinds);
    lua_getfield(L, -3, "col");
    specs[i].slot = -1;
    if (!lua_isnil(L, -1) && slot_of(L, in, -1, name, specs[i].name, &specs[i].slot))
      return rn_lua_nil_error(L, lua_tostring(L, -1));
    user |= specs[i].kind == RN_AGG_USER;
    lua_pop(L, 4);
  }
  rn_agg_fns fns = { NULL, NULL, NULL, NULL, NULL, NULL };
  if (user) {
    laggs *g = calloc(1, sizeof *g);
    int (*refs)[F_N] = g ? malloc(sizeof *refs * (size_t)naggs) : NULL;
    char **names = refs ? calloc((size_t)naggs, sizeof *names) : NULL;
    char *gname = names ? strdup(name) : NULL;
    bool named = gname != NULL;
    for (int i = 0; named && i < naggs; i++) named = (names[i] = strdup(specs[i].name ? specs[i].name : "?")) != NULL;
    if (!named) {
      for (int i = 0; names && i < naggs; i++) free(names[i]);
      free(names);
      free(gname);
      free(refs);
      free(g);
      return rn_lua_error(L, "out of memory");
    }
    g->name = gname;
    g->lp = lp;
    g->n = naggs;
    g->refs = refs;
    g->names = names;
    static const char *const fields[F_N] = { "init", "add", "remove", "result" };
    for (int i = 0; i < naggs; i++) {
      lua_rawgeti(L, 6, i + 1);
      lua_getfield(L, -1, "fns");
      for (int f = 0; f < F_N; f++) {
        refs[i][f] = LUA_NOREF;
        if (!lua_istable(L, -1)) continue;
        lua_getfield(L, -1, fields[f]);
        if (lua_isfunction(L, -1)) refs[i][f] = luaL_ref(L, LUA_REGISTRYINDEX);
        else lua_pop(L, 1);
      }
      lua_pop(L, 2);
    }
    fns = (rn_agg_fns){ init_cb, step_cb, result_cb, can_remove_cb, g, free_laggs };
  }
  rn_rel *rel = NULL;
  int rc = lua_toboolean(L, 7) /* key = …: the by columns stated as the key */
               ? rn_declare_aggregate_keyed(lp->p, name, in->rel, by, nby, &w, specs, naggs, &fns, &rel)
               : rn_declare_aggregate(lp->p, name, in->rel, by, nby, &w, specs, naggs, &fns, &rel);
  return rn_lua_declared(L, lp, rc, rel);
}

/* rel:late() -> events an aggregate dropped as late */
int rn_lua_aggregate_late(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  rn_lua_note_read(L, r->lp, r->rel);
  lua_pushinteger(L, r->rel->kind == RN_REL_AGGREGATE ? (lua_Integer)rn_aggregate_late(r->rel) : 0);
  return 1;
}
