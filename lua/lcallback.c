/* lcallback.c — Lua functions as core callbacks: filter predicates, map
 * functions, sinks and a join's mapper, selector and joiner. Each runs as a
 * protected body (rn_lua_protect) on the thread that called into runnel: a
 * Lua error — from the function, or from what it returned (a metamethod
 * that raises) — becomes RN_ECALLBACK with the Lua message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive.h"
#include "join.h"
#include "key.h"
#include "lbind.h"
#include "outbox.h"
#include "row.h"

/* What a mapper's or joiner's bytecode tells of the Rows lent to it
 * (lua/runnel/lent.lua): it keeps none while each upvalue up[i] still
 * holds the helper fn[i] it held when the join was declared; n < 0: it
 * may keep them, and each call gets new Rows. */
enum { LENT_GUARDS = 4 };
typedef struct lent_guard {
  int n;
  int up[LENT_GUARDS];    /* 1-based upvalue indexes */
  const void *fn[LENT_GUARDS];
  int ref;                /* registry ref of lent.lua's list: keeps each fn from being collected and its address reused */
} lent_guard;

typedef struct lcb {
  lpipe *lp;
  char *name;             /* the relation the callback serves (for messages); set
                             before any call, since a join calls while it is declared */
  rn_rel *left, *right;   /* a join's inputs */
  int refs[6];            /* registry refs: fn | insert, update, delete, commit, all, rollback */
  lrow *rows[2];          /* the lrows lent to a mapper or joiner (left, right), or NULL */
  int row_refs[2];        /* registry refs keeping them: a Row of each, reused (may_keep) */
  lent_guard lent[2];     /* the mapper's, the joiner's */
  uint64_t mapper_read;   /* the left columns the last mapper call read */
  rn_rel *self;           /* a filter's function (new or old): the filter, once declared (watch_gone) */
} lcb;

enum { CB_FN, CB_INSERT = 0, CB_UPDATE, CB_DELETE, CB_COMMIT, CB_ALL, CB_ROLLBACK, CB_NREFS };
enum { CB_MAPPER = 0, CB_SELECTOR = 1, CB_JOINER = 2 };

/* One call of a callback: the callback and the core's arguments. */
/* What a row's gone_index reads for: the filter or map and its table,
 * until the call it was made for returns (d NULL after: a row its
 * function kept reads as any other). */
typedef struct gone_watch {
  rn_rel *d;
  const rn_rel *t;
} gone_watch;

typedef struct lcall {
  lcb *cb;
  rn_rel *in, *out;       /* where rows come from, where results go */
  const char *row, *row2; /* the rows given (row2: a joiner's right row) */
  size_t len, len2;
  const rn_change *change;
  const rn_sink_info *info;
  uint64_t seq;
  const msgpack_object *lkey, *rkey; /* a selector's keys */
  int nl, nr;
  msgpack_object *key;    /* a mapper's output key */
  int nkey;
  int *flag;              /* filter: pass; map, joiner: has_row; mapper: has_key */
  gone_watch *watch;      /* filter, map: the row's watch (watch_gone), cleared after the call */
  int watch_ref;          /* a registry ref keeping it until then (unwatch) */
  msgpack_sbuffer *result;
  lrow *lent[2];          /* Rows lent for this call: taken back when it returns */
} lcall;

static void free_cb(void *ctx)
{
  lcb *cb = ctx;
  for (int i = 0; i < CB_NREFS; i++) luaL_unref(cb->lp->L, LUA_REGISTRYINDEX, cb->refs[i]);
  for (int i = 0; i < 2; i++) luaL_unref(cb->lp->L, LUA_REGISTRYINDEX, cb->row_refs[i]);
  for (int i = 0; i < 2; i++) luaL_unref(cb->lp->L, LUA_REGISTRYINDEX, cb->lent[i].ref);
  free(cb->name);
  free(cb);
}

static lcb *new_cb(lua_State *L, lpipe *lp, const char *name)
{
  lcb *cb = malloc(sizeof *cb);
  char *copy = cb ? strdup(name) : NULL;
  if (!copy) { free(cb); rn_lua_error(L, "out of memory"); }
  cb->lp = lp;
  cb->name = copy;
  cb->left = cb->right = NULL;
  for (int i = 0; i < CB_NREFS; i++) cb->refs[i] = LUA_NOREF;
  cb->rows[0] = cb->rows[1] = NULL;
  cb->row_refs[0] = cb->row_refs[1] = LUA_NOREF;
  for (int i = 0; i < 2; i++) cb->lent[i] = (lent_guard){ .n = -1, .ref = LUA_NOREF };
  cb->mapper_read = ~0ULL;
  cb->self = NULL;
  return cb;
}

/* Callers check the type first: nothing may raise once a context is allocated. */
static int ref_function(lua_State *L, int idx)
{
  if (lua_isnoneornil(L, idx)) return LUA_NOREF;
  lua_pushvalue(L, idx);
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* A row's __index while a filter's or map's sinks are told at its
 * declaration, over a table that moved its columns in this run (upvalue:
 * its gone_watch): a name its table had before, read (derive.h,
 * rn_derive_read_gone). */
static int gone_index(lua_State *L)
{
  gone_watch *w = lua_touserdata(L, lua_upvalueindex(1));
  size_t len;
  const char *name = w->d && lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &len) : NULL;
  int slot = name ? rn_derive_read_gone(w->d, w->t, name, len) : -1;
  if (slot < 0) return 0;
  lua_pushstring(L, w->t->schema->cols[slot].name);
  lua_rawget(L, 1);
  return 1;
}

/* The row on top of the stack, given to filter or map out's function over
 * in: at out's declaration over a table whose columns moved, the names it
 * had are watched (gone_index) until the caller clears c's watch
 * (unwatch). The registry keeps the watch until then: once the function
 * has returned or raised, nothing else may hold the row, and a collection
 * (an error object's __tostring, say) would free the watch before it is
 * cleared. */
static void watch_gone(lua_State *L, rn_rel *in, rn_rel *out, lcall *c)
{
  if (!(out->told_rows || out->as_told || out->rebuild_tells) || !lua_istable(L, -1)) return;
  const rn_rel *t = rn_columns_moved(in);
  if (!t) return;
  lua_createtable(L, 0, 1);
  gone_watch *w = lua_newuserdatauv(L, sizeof *w, 0);
  w->d = out, w->t = t;
  lua_pushvalue(L, -1);
  c->watch_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  c->watch = w; /* from here unwatch clears it, whatever raises */
  lua_pushcclosure(L, gone_index, 1);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
}

/* After the call: a row the function kept reads as any other. */
static void unwatch(lua_State *L, lcall *c)
{
  if (!c->watch) return;
  c->watch->d = NULL;
  luaL_unref(L, LUA_REGISTRYINDEX, c->watch_ref);
}

static int filter_body(lua_State *L, void *ud, rn_err *e)
{
  (void)e;
  lcall *c = ud;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->cb->refs[CB_FN]);
  rn_lua_pushrow(c->cb->lp, L, c->in, c->row, c->len);
  if (c->cb->self) watch_gone(L, c->in, c->cb->self, c);
  lua_call(L, 1, 1);
  *c->flag = lua_toboolean(L, -1);
  return 0;
}

static int filter_cb(void *ctx, rn_rel *in, const char *row, size_t len, int *pass, rn_err *e)
{
  lcb *cb = ctx;
  if (!cb->self && rn_columns_moved(in)) cb->self = rn_find(cb->lp->p, cb->name); /* while it is declared */
  lcall c = { .cb = cb, .in = in, .row = row, .len = len, .flag = pass };
  int rc = rn_lua_protect(cb->lp, cb->lp->L, filter_body, &c, cb->name, "filter", e);
  unwatch(cb->lp->L, &c);
  return rc;
}

/* "file:line" where the function at registry ref is defined, into buf
 * (cap bytes): false, buf "?", for a C function or without stack room.
 * Leaves the stack as it was, so it may run outside protection. */
static bool fn_place(lua_State *L, int ref, char *buf, size_t cap)
{
  lua_Debug ar;
  snprintf(buf, cap, "?");
  if (!lua_checkstack(L, 1)) return false;
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  if (!lua_getinfo(L, ">S", &ar) || ar.linedefined <= 0) return false; /* ">": the function is popped */
  snprintf(buf, cap, "%s:%d", ar.short_src, ar.linedefined);
  return true;
}

/* rc, after appending to e's message where the function at registry ref
 * is defined, " (the joiner at app.lua:12)": a row or values it returned
 * were refused, and the caller's file:line alone does not find it. */
static int refused_from(lua_State *L, int ref, const char *what, rn_err *e, int rc)
{
  char place[LUA_IDSIZE + 24], said[LUA_IDSIZE + 64];
  size_t n = strlen(e->msg);
  if (rc && n + 1 < sizeof e->msg && fn_place(L, ref, place, sizeof place)) { /* a chunk's name: any bytes */
    snprintf(said, sizeof said, " (the %s at %s)", what, place);
    rn_err_escape_into(e->msg + n, sizeof e->msg - n, said, strlen(said)); /* UTF-8, as rn_err_prefix writes a path */
  }
  return rc;
}

/* A returned row's values (out's slots), checked against out's schema and
 * packed into result. */
static int pack_row(lpipe *lp, rn_rel *out, msgpack_object *vals, uint8_t *given, const char *bad_prefix,
                    msgpack_sbuffer *result, rn_err *e)
{
  rn_rowmode mode = out->told_rows || out->as_told ? RN_ROW_AS_TOLD : RN_ROW_FULL;
  int rc = rn_row_normalize(out->schema, out->name, mode, vals, given, &lp->p->scratch, e);
  if (rc) rn_err_prefix(e, bad_prefix);
  else rn_row_pack(out->schema, vals, result);
  return rc;
}

/* The row a map or joiner returned on top of the stack, checked against
 * out's schema and packed into result; nil means no row. */
static int returned_row(lpipe *lp, lua_State *L, rn_rel *out, const char *bad_prefix,
                        msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  *has_row = !lua_isnil(L, -1);
  int rc = 0;
  bool stale = false;
  lrow *lent = lua_type(L, -1) == LUA_TUSERDATA ? rn_lua_testrow(L, -1, &stale) : NULL; /* tables need no check */
  if (stale)
    return rn_err_set(e, RN_EINVAL, "%s: %s: a row given to a callback can be read only during that call (copy what "
                      "you keep)", bad_prefix, out->name);
  if (lent) { /* a row it was given, returned as it is */
    rn_lua_pushrow(lp, L, lent->rel, lent->row, lent->len);
    lua_replace(L, -2);
  }
  if (*has_row) {
    msgpack_object *vals;
    uint8_t *given;
    rc = rn_lua_torow(lp, L, -1, out, &vals, &given);
    if (rc) rn_err_prefix(e, bad_prefix);
    else rc = pack_row(lp, out, vals, given, bad_prefix, result, e);
  }
  return rc;
}

static int map_body(lua_State *L, void *ud, rn_err *e)
{
  lcall *c = ud;
  lpipe *lp = c->cb->lp;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->cb->refs[CB_FN]);
  rn_lua_pushrow(lp, L, c->in, c->row, c->len);
  watch_gone(L, c->in, c->out, c);
  lua_call(L, 1, 1);
  return refused_from(L, c->cb->refs[CB_FN], "map",
                      e, returned_row(lp, L, c->out, "map returned a bad row", c->result, c->flag, e));
}

static int map_cb(void *ctx, rn_rel *in, rn_rel *out, const char *row, size_t len,
                  msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  lcb *cb = ctx;
  lcall c = { .cb = cb, .in = in, .out = out, .row = row, .len = len, .flag = has_row, .result = result };
  int rc = rn_lua_protect(cb->lp, cb->lp->L, map_body, &c, cb->name, "map", e);
  unwatch(cb->lp->L, &c);
  return rc;
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
static int sink_body(lua_State *L, void *ud, rn_err *e)
{
  (void)e;
  lcall *c = ud;
  lcb *cb = c->cb;
  const rn_change *ch = c->change;
  int nargs;
  if (cb->refs[CB_ALL] != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cb->refs[CB_ALL]);
    lua_pushstring(L, verb_names[ch->verb]);
    rn_lua_pushrow(cb->lp, L, c->in, ch->row, ch->row_len);
    rn_lua_pushrow(cb->lp, L, c->in, ch->old, ch->old_len);
    nargs = 4;
  } else {
    int ref = cb->refs[ch->verb - 1];
    if (ref == LUA_NOREF) return 0;
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    nargs = 1; /* info */
    if (ch->verb != RN_DELETE) { rn_lua_pushrow(cb->lp, L, c->in, ch->row, ch->row_len); nargs++; }
    if (ch->verb != RN_INSERT) { rn_lua_pushrow(cb->lp, L, c->in, ch->old, ch->old_len); nargs++; }
  }
  push_info(L, c->info);
  lua_call(L, nargs, 0);
  return 0;
}

static int sink_cb(void *ctx, rn_rel *rel, const rn_change *ch, const rn_sink_info *info, rn_err *e)
{
  lcb *cb = ctx;
  if (cb->refs[CB_ALL] == LUA_NOREF && cb->refs[ch->verb - 1] == LUA_NOREF) return 0;
  lcall c = { .cb = cb, .in = rel, .change = ch, .info = info };
  return rn_lua_protect(cb->lp, cb->lp->L, sink_body, &c, rel->name, "sink", e);
}

static int sink_commit_body(lua_State *L, void *ud, rn_err *e)
{
  (void)e;
  lcall *c = ud;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->cb->refs[CB_COMMIT]);
  lua_pushinteger(L, (lua_Integer)c->seq);
  lua_call(L, 1, 0);
  return 0;
}

static int sink_commit_cb(void *ctx, uint64_t seq, rn_err *e)
{
  lcb *cb = ctx;
  if (cb->refs[CB_COMMIT] == LUA_NOREF) return 0;
  lcall c = { .cb = cb, .seq = seq };
  return rn_lua_protect(cb->lp, cb->lp->L, sink_commit_body, &c, cb->name, "sink commit", e);
}

typedef struct after_call { lcb *cb; int ref; uint64_t seq; } after_call;

static int after_body(lua_State *L, void *ud, rn_err *e)
{
  (void)e;
  after_call *c = ud;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->cb->refs[c->ref]);
  lua_pushinteger(L, (lua_Integer)c->seq);
  lua_call(L, 1, 0);
  return 0;
}

/* fn(seq) once nothing can fail any more (a rollback notice, on_durable):
 * the group has its outcome, so an error raised is written to stderr,
 * naming the relation and the callback, and goes no further. */
static void call_after(lcb *cb, int ref, uint64_t seq, const char *rel, const char *what)
{
  rn_err e = { .code = RN_OK };
  after_call c = { cb, ref, seq };
  if (rn_lua_protect(cb->lp, cb->lp->L, after_body, &c, rel, what, &e))
    fprintf(stderr, "runnel: %s\n", e.msg);
}

/* The table form's rollback(seq): the group the sink got changes or a
 * commit of rolled back after all. Nothing can fail any more: the group
 * failed with its own error, which is kept; an error here is dropped. */
static void sink_done_cb(void *ctx, uint64_t seq, bool committed)
{
  lcb *cb = ctx;
  if (!committed && cb->refs[CB_ROLLBACK] != LUA_NOREF) call_after(cb, CB_ROLLBACK, seq, cb->name, "sink rollback");
}

/* rollback(seq) too for a carried group it was told committed that was
 * lost (sync = false, its LMDB commit failed: sink.c, SINKS-2). */
static void sink_lost_cb(void *ctx, uint64_t seq)
{
  sink_done_cb(ctx, seq, false);
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

/* Whether the callback's Row for side can be lent for a row of rel as it
 * is (no Row is made: push_lent raises nothing). */
static bool row_free(const lcb *cb, int side, const rn_rel *rel)
{
  const lrow *r = cb->rows[side];
  return r && !r->row && r->rel == rel && r->ncols == rel->schema->ncols;
}

/* Reads into g the guards lent.lua found for a function (the list at
 * idx: upvalue, helper, …; nil when it may keep its Rows), keeping the
 * list. May raise (out of memory) before g is set. */
static void read_lent_guards(lua_State *L, int idx, lent_guard *g)
{
  *g = (lent_guard){ .n = -1, .ref = LUA_NOREF };
  int n = lua_istable(L, idx) ? (int)lua_rawlen(L, idx) : -1;
  if (n < 0 || n % 2 || n / 2 > LENT_GUARDS) return;
  lent_guard read = { .n = n / 2, .ref = LUA_NOREF };
  for (int i = 0; i < read.n; i++) {
    lua_rawgeti(L, idx, 2 * i + 1);
    lua_rawgeti(L, idx, 2 * i + 2);
    read.up[i] = (int)lua_tointeger(L, -2);
    read.fn[i] = lua_topointer(L, -1);
    bool ok = read.up[i] > 0 && lua_isfunction(L, -1);
    lua_pop(L, 2);
    if (!ok) return;
  }
  lua_pushvalue(L, idx);
  read.ref = luaL_ref(L, LUA_REGISTRYINDEX);
  *g = read;
}

/* Whether the function at idx may keep a Row given in this call past it:
 * one that cannot, while its guards hold (the helpers it passes Rows to
 * are the ones lent.lua read), reuses the callback's Rows (lrow.c).
 * Pushes nothing. */
static bool may_keep(const lent_guard *g, lua_State *L, int idx)
{
  if (g->n < 0) return true;
  idx = lua_absindex(L, idx);
  for (int i = 0; i < g->n; i++) {
    if (!lua_getupvalue(L, idx, g->up[i])) return true;
    bool same = lua_topointer(L, -1) == g->fn[i];
    lua_pop(L, 1);
    if (!same) return true;
  }
  return false;
}

/* Pushes row (a row of rel) as a Row of the lrow the callback keeps for
 * side, lent for this call (nil for no row); an lrow still lent (a
 * callback reached again from inside itself, e.g. through a scan) is
 * left alone and a new one is lent. The Row is renewed for the call
 * unless leased: the function may keep it (push_lender), and lease_call
 * lends new ones. Raises nothing. */
static void push_lent(lcall *c, lua_State *L, int side, rn_rel *rel, const char *row, size_t len, bool leased)
{
  lcb *cb = c->cb;
  if (!row) { lua_pushnil(L); return; }
  lrow *r = cb->rows[side];
  if (row_free(cb, side, rel)) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cb->row_refs[side]);
  } else {
    r = rn_lua_newrow(L, cb->lp, rel);
    if (!cb->rows[side] || !cb->rows[side]->row) { /* keep it for the next calls */
      luaL_unref(L, LUA_REGISTRYINDEX, cb->row_refs[side]);
      cb->rows[side] = NULL;
      lua_pushvalue(L, -1);
      cb->row_refs[side] = luaL_ref(L, LUA_REGISTRYINDEX);
      cb->rows[side] = r;
    }
  }
  rn_lua_row_lend(r, row, len);
  c->lent[side] = r;
  if (!leased) rn_lua_row_renew(L, -1); /* else it stays stale: lease_call lends new Rows of its lrow */
}

/* lease_call(fn, Row | nil, …) -> fn(new Row | nil, …): a callback that
 * may keep its Rows called with new Rows made here, inside the protected
 * call, where allocating may raise (its own Rows were pushed without
 * raising). */
static int lease_call(lua_State *L)
{
  int n = lua_gettop(L);
  for (int i = 2; i <= n; i++) {
    if (lua_isnil(L, i)) continue;
    lua_pushvalue(L, i);
    rn_lua_lease(L);
    lua_replace(L, i);
  }
  lua_call(L, n - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* Pushes the function of the callback's mapper or joiner (fn: CB_MAPPER
 * or CB_JOINER), behind lease_call when it may keep a Row past the call;
 * returns whether it may (then push_lent its Rows leased). Raises nothing. */
static bool push_lender(lcb *cb, lua_State *L, int fn)
{
  lua_rawgeti(L, LUA_REGISTRYINDEX, cb->refs[fn]);
  bool keep = may_keep(&cb->lent[fn == CB_MAPPER ? 0 : 1], L, -1);
  if (keep) {
    lua_pushcfunction(L, lease_call);
    lua_insert(L, -2);
  }
  return keep;
}

/* After the call, whatever it did: the rows lent go back (a Row kept by
 * the callback can no longer be read). */
static void take_back(lcall *c)
{
  for (int i = 0; i < 2; i++) if (c->lent[i]) rn_lua_row_lend(c->lent[i], NULL, 0);
}

/* "file:line" where callback which (CB_MAPPER, CB_SELECTOR) is defined
 * (for messages), or "?". Under protection: it pushes onto the stack. */
static const char *callback_where(lcb *cb, lua_State *L, int which)
{
  char place[LUA_IDSIZE + 24];
  fn_place(L, cb->refs[which], place, sizeof place);
  return lua_pushstring(L, place);
}

static const char *mapper_where(lcb *cb, lua_State *L)
{
  return callback_where(cb, L, CB_MAPPER);
}

/* The slot among the key's columns (0 .. nkey - 1) that a field of a
 * returned key table names: its position (1 .. nkey) or a key column's
 * name; -1 for any other field. */
static int key_field(lua_State *L, int idx, const rn_schema *rs, int nkey)
{
  if (lua_isinteger(L, idx)) {
    lua_Integer i = lua_tointeger(L, idx);
    return i >= 1 && i <= nkey ? (int)i - 1 : -1;
  }
  if (lua_type(L, idx) != LUA_TSTRING) return -1;
  size_t len;
  const char *name = lua_tolstring(L, idx, &len);
  for (int i = 0; i < nkey; i++) {
    const char *kn = rs->cols[rs->key_slots[i]].name;
    if (strlen(kn) == len && memcmp(kn, name, len) == 0) return i;
  }
  return -1;
}

/* A key returned as a table at idx: every field names a key column of
 * the right side (by position or by name), else the key is not what the
 * mapper meant (a typo, a row of another relation) and would miss
 * silently: an error naming the field. */
static int key_table_fields(lcall *c, lua_State *L, int idx, rn_err *e)
{
  const rn_schema *rs = c->cb->right->schema;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (key_field(L, -1, rs, c->nkey) >= 0) continue;
    const char *field = lua_type(L, -1) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, -1))
                                                        : luaL_tolstring(L, -1, NULL);
    return rn_err_set(e, RN_EINVAL, "%s: mapper (%s) returned a key with field %s, which names no key column of %s",
                      c->cb->name, mapper_where(c->cb, L), field, c->cb->right->name);
  }
  for (int i = 0; i < c->nkey; i++) { /* by position and by name: one value, else which did it mean? */
    const char *kn = rs->cols[rs->key_slots[i]].name;
    lua_rawgeti(L, idx, i + 1);
    lua_pushstring(L, kn);
    lua_rawget(L, idx);
    if (lua_isnil(L, -1) || lua_isnil(L, -2) || lua_rawequal(L, -1, -2)) {
      lua_pop(L, 2);
      continue;
    }
    const char *pos = lua_type(L, -2) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, -2))
                                                     : luaL_tolstring(L, -2, NULL);
    const char *named = lua_type(L, -2) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, -2))
                                                       : luaL_tolstring(L, -2, NULL);
    return rn_err_set(e, RN_EINVAL, "%s: mapper (%s) returned a key giving column \"%s\" of %s twice, as [%d] = %s "
                      "and by name = %s", c->cb->name, mapper_where(c->cb, L), kn, c->cb->right->name, i + 1, pos,
                      named);
  }
  return 0;
}

/* mapper(row) -> the right key: a scalar for a one-column key, else a
 * table by position or by column name (read with lua_getfield: metamethods
 * run, protected), each key column given, no other field. */
static int mapper_key(lcall *c, lua_State *L, rn_err *e)
{
  lcb *cb = c->cb;
  lpipe *lp = cb->lp;
  int *has_key = c->flag, nkey = c->nkey;
  *has_key = !lua_isnil(L, -1) && lua_touserdata(L, -1) != RN_LUA_NULL;
  const rn_schema *rs = cb->right->schema;
  if (*has_key && nkey == 1 && !lua_istable(L, -1))
    return rn_lua_tovalue(lp, L, -1, &rs->cols[rs->key_slots[0]], &c->key[0], 0);
  if (*has_key && lua_istable(L, -1)) {
    int key = lua_gettop(L);
    luaL_checkstack(L, nkey + 4, "mapper key"); /* protected: a table is read under rn_lua_protect */
    int rc = key_table_fields(c, L, key, e);
    for (int i = 0; !rc && i < nkey; i++) {
      const rn_column *kc = &rs->cols[rs->key_slots[i]];
      if (lua_rawgeti(L, key, i + 1) == LUA_TNIL) { lua_pop(L, 1); lua_getfield(L, key, kc->name); }
      if (lua_isnil(L, -1)) /* runnel.null is a null key part: no match, as a scalar's */
        return rn_err_set(e, RN_EINVAL, "%s: mapper (%s) returned a key without column \"%s\" of %s", cb->name,
                          mapper_where(cb, L), kc->name, cb->right->name);
      /* the value stays on the stack: a string an __index made would
       * otherwise be collected while the next one is read */
      rc = rn_lua_tovalue(lp, L, -1, kc, &c->key[i], 0);
    }
    return rc;
  }
  if (*has_key) { /* maybe unprotected: nothing here may raise */
    char where[LUA_IDSIZE + 24], cols[RN_ERRMSG_MAX] = "";
    fn_place(L, cb->refs[CB_MAPPER], where, sizeof where);
    for (int i = 0, n = 0; i < nkey && n >= 0 && (size_t)n < sizeof cols; i++)
      n += snprintf(cols + n, sizeof cols - (size_t)n, "%s%s", i ? ", " : "", rs->cols[rs->key_slots[i]].name);
    return rn_err_set(e, RN_EINVAL, "%s: mapper (%s) returned no table: the key of %s has %d columns (%s), got %s",
                      cb->name, where, cb->right->name, nkey, cols, luaL_typename(L, -1));
  }
  return 0;
}

static int mapper_body(lua_State *L, void *ud, rn_err *e)
{
  lcall *c = ud;
  bool keep = push_lender(c->cb, L, CB_MAPPER);
  push_lent(c, L, 0, c->in, c->row, c->len, keep);
  lua_call(L, 1 + keep, 1);
  return mapper_key(c, L, e);
}

/* mapper_key under protection: the key was returned as its one argument. */
static int mapper_key_body(lua_State *L, void *ud, rn_err *e)
{
  return mapper_key(ud, L, e);
}

/* The key a mapper returned, normalized to the right key's columns here
 * rather than by the join: a value no key column takes is an error naming
 * the mapper's file:line and the right relation besides the join and the
 * column. Raises nothing (lua_getinfo copies the source into ar). */
static int mapper_key_check(lcb *cb, lua_State *L, msgpack_object *key, int nkey, msgpack_zone *z, rn_err *e)
{
  const rn_schema *rs = cb->right->schema;
  for (int i = 0; i < nkey; i++) {
    if (key[i].type == MSGPACK_OBJECT_NIL) return 0; /* a null part: no match */
    const rn_column *kc = &rs->cols[rs->key_slots[i]];
    int rc = rn_value_normalize(kc, &key[i], z, cb->name, e);
    if (!rc && key[i].type == MSGPACK_OBJECT_FLOAT64 && key[i].via.f64 != key[i].via.f64)
      rc = rn_err_set(e, RN_EINVAL, "%s: column \"%s\": NaN cannot be part of a key", cb->name, kc->name);
    if (!rc) continue;
    char where[LUA_IDSIZE + 24], rest[RN_ERRMSG_MAX];
    fn_place(L, cb->refs[CB_MAPPER], where, sizeof where);
    size_t skip = strlen(cb->name) + 2; /* the message after "<join>: " */
    snprintf(rest, sizeof rest, "%s", strncmp(e->msg, cb->name, skip - 2) == 0 && strlen(e->msg) >= skip ?
                                      e->msg + skip : e->msg);
    return rn_err_set(e, rc, "%s: mapper (%s) returned a bad key for %s: %s", cb->name, where, cb->right->name,
                      rest);
  }
  return 0;
}

/* The mapper called directly under lua_pcall (no protected C body around
 * it) when its Row is ready: a key that is not a table is read without
 * raising; a table goes to mapper_key under protection (lua_getfield runs
 * metamethods). Else, all of it under rn_lua_protect. */
static int mapper_cb(void *ctx, rn_rel *left, const char *row, size_t len,
                     msgpack_object *out, int nkey, int *has_key, msgpack_zone *z, rn_err *e)
{
  lcb *cb = ctx;
  lua_State *L = cb->lp->L;
  lcall c = { .cb = cb, .in = left, .row = row, .len = len, .key = out, .nkey = nkey, .flag = has_key };
  cb->mapper_read = ~0ULL; /* unknown unless the call completes */
  int rc, base = lua_gettop(L);
  if (row_free(cb, 0, left) && lua_checkstack(L, 5)) {
    bool keep = push_lender(cb, L, CB_MAPPER);
    push_lent(&c, L, 0, left, row, len, keep);
    rc = rn_lua_pcall(cb->lp, L, 1 + keep, 1, cb->name, "mapper", e);
    if (!rc)
      rc = lua_type(L, -1) != LUA_TTABLE ? mapper_key(&c, L, e)
                                          : rn_lua_protect_on(cb->lp, L, 1, mapper_key_body, &c, cb->name, "mapper", e);
  } else
    rc = rn_lua_protect(cb->lp, L, mapper_body, &c, cb->name, "mapper", e);
  if (!rc && *has_key) rc = mapper_key_check(cb, L, out, nkey, z, e);
  /* Read once the key has been: a returned table's metamethods may read the row too. */
  if (!rc && c.lent[0]) cb->mapper_read = c.lent[0]->read;
  take_back(&c);
  lua_settop(L, base);
  return rc;
}

static uint64_t mapper_reads(void *ctx)
{
  return ((lcb *)ctx)->mapper_read;
}

/* The selector returned nil or a table without a list part (at the top):
 * an error naming the join, where the selector is defined and what it
 * returned ({ a = 1 }: its first field; the key is positional). */
static int selector_no_key(lcb *cb, lua_State *L, rn_err *e)
{
  const char *what = "nil";
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    if (!lua_next(L, -2)) what = "an empty table";
    else {
      lua_pop(L, 1);
      const char *field = lua_type(L, -1) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, -1))
                                                          : luaL_tolstring(L, -1, NULL);
      what = lua_pushfstring(L, "a table with field %s and no values by position", field);
    }
  }
  return rn_err_set(e, RN_EINVAL, "%s: selector (%s) returned no key: %s; a result key is a value or a list of values",
                    cb->name, callback_where(cb, L, CB_SELECTOR), what);
}

/* A selector's table (at the top) holds its key's n values by position
 * alone: a field besides them ({ 1, a = 2 }) would be dropped unread. */
static int selector_extra_field(lcb *cb, lua_State *L, int n, rn_err *e)
{
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n) continue;
    const char *field = lua_type(L, -1) == LUA_TSTRING ? lua_pushfstring(L, "\"%s\"", lua_tostring(L, -1))
                                                        : luaL_tolstring(L, -1, NULL);
    return rn_err_set(e, RN_EINVAL, "%s: selector (%s) returned a key with field %s besides its %d value%s by "
                      "position; a result key is a value or a list of values", cb->name,
                      callback_where(cb, L, CB_SELECTOR), field, n, n == 1 ? "" : "s");
  }
  return 0;
}

static int selector_body(lua_State *L, void *ud, rn_err *e)
{
  lcall *c = ud;
  lcb *cb = c->cb;
  lpipe *lp = cb->lp;
  lua_rawgeti(L, LUA_REGISTRYINDEX, cb->refs[CB_SELECTOR]);
  push_key(L, c->in->schema, c->lkey, c->nl);
  push_key(L, c->out->schema, c->rkey, c->nr);
  lua_call(L, 2, 1);
  int n = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : 1;
  if (lua_isnil(L, -1) || n == 0) return selector_no_key(cb, L, e);
  if (lua_istable(L, -1)) {
    int rc = selector_extra_field(cb, L, n, e);
    if (rc) return rc;
  }
  for (int i = 0; i < n; i++) {
    if (lua_istable(L, -1)) lua_rawgeti(L, -1, i + 1); else lua_pushvalue(L, -1);
    msgpack_object v;
    rn_column any = { .name = (char *)"selector", .type = RN_T_ANY };
    int rc = rn_lua_tovalue(lp, L, -1, NULL, &v, 0);
    /* the part's type and whether it is one, read before callback_where pushes */
    const char *part = lua_istable(L, -2) ? " key part" : " key", *type = luaL_typename(L, -1);
    if (!rc && v.type == MSGPACK_OBJECT_NIL) /* runnel.null: two left rows would share the null key */
      rc = rn_err_set(e, RN_EINVAL, "%s: selector (%s) returned a null%s (a key is never null)", cb->name,
                      callback_where(cb, L, CB_SELECTOR), part);
    if (!rc) rc = rn_value_normalize(&any, &v, &lp->p->scratch, cb->name, e);
    if (!rc && rn_key_append(c->result, &v) != 0)
      rc = rn_err_set(e, RN_EINVAL, "%s: selector (%s) returned a bad key: keys are scalars (not NaN), got %s",
                      cb->name, callback_where(cb, L, CB_SELECTOR), type);
    lua_pop(L, 1);
    if (rc) return rc;
  }
  return 0;
}

static int selector_cb(void *ctx, rn_rel *left, const msgpack_object *lkey, int nl,
                       rn_rel *right, const msgpack_object *rkey, int nr, msgpack_sbuffer *out, rn_err *e)
{
  lcb *cb = ctx;
  lcall c = { .cb = cb, .in = left, .out = right, .lkey = lkey, .nl = nl, .rkey = rkey, .nr = nr,
              .result = out };
  return rn_lua_protect(cb->lp, cb->lp->L, selector_body, &c, cb->name, "selector", e);
}

/* The values a joiner returned in the declared column order (from idx,
 * n of them; nil: not given), checked and packed into result. */
static int returned_values(lpipe *lp, lua_State *L, int idx, int n, rn_rel *out, msgpack_sbuffer *result,
                           int *has_row, rn_err *e)
{
  const rn_schema *s = out->schema;
  if (n > s->ncols)
    return rn_err_set(e, RN_EINVAL, "joiner returned %d values for the %d columns of %s", n, s->ncols, out->name);
  msgpack_object *vals = rn_zone_malloc(&lp->p->scratch, sizeof *vals * (size_t)s->ncols);
  uint8_t *given = rn_zone_malloc(&lp->p->scratch, (size_t)s->ncols);
  if (!vals || !given) return rn_err_set(e, RN_ENOMEM, "out of memory");
  int rc = 0;
  for (int i = 0; i < s->ncols && !rc; i++) {
    given[i] = i < n && !lua_isnil(L, idx + i);
    vals[i].type = MSGPACK_OBJECT_NIL;
    if (given[i] && (rc = rn_lua_tovalue(lp, L, idx + i, &s->cols[i], &vals[i], 0))) rn_err_prefix(e, out->name);
  }
  if (!rc) rc = rn_row_normalize(s, out->name, RN_ROW_FULL, vals, given, &lp->p->scratch, e);
  if (rc) {
    rn_err_prefix(e, "joiner returned bad values");
    return rc;
  }
  rn_row_pack(s, vals, result);
  *has_row = 1;
  return 0;
}

/* What a joiner returned: the n values from idx (none: no result). */
static int joiner_results(lcall *c, lua_State *L, int idx, int n, rn_err *e)
{
  lpipe *lp = c->cb->lp;
  if (n == 0) { *c->flag = 0; return 0; }
  int t = lua_type(L, idx);
  bool stale;
  int rc = n == 1 && (t == LUA_TNIL || t == LUA_TTABLE || rn_lua_testrow(L, idx, &stale) || stale)
             ? returned_row(lp, L, c->out, "joiner returned a bad row", c->result, c->flag, e)
             : returned_values(lp, L, idx, n, c->out, c->result, c->flag, e);
  return refused_from(L, c->cb->refs[CB_JOINER], "joiner", e, rc);
}

/* joiner(left, right) -> a row table, nil (no result), or the values of
 * the result's columns in their declared order. */
static int joiner_body(lua_State *L, void *ud, rn_err *e)
{
  lcall *c = ud;
  lcb *cb = c->cb;
  int base = lua_gettop(L);
  bool keep = push_lender(cb, L, CB_JOINER);
  push_lent(c, L, 0, cb->left, c->row, c->len, keep);
  push_lent(c, L, 1, cb->right, c->row2, c->len2, keep);
  lua_call(L, 2 + keep, LUA_MULTRET);
  return joiner_results(c, L, base + 1, lua_gettop(L) - base, e);
}

/* joiner_results under protection: the results are its arguments. */
static int joiner_results_body(lua_State *L, void *ud, rn_err *e)
{
  return joiner_results(ud, L, 2, lua_gettop(L) - 1, e);
}

/* The name objects of out's columns (its relinfo's keys), or NULL: none
 * yet (a join being declared has no relinfo). */
static const void *const *out_names(rn_rel *out)
{
  const lrelinfo *ri = out->udata;
  return ri ? ri->keys : NULL;
}

/* The table at idx as out's slot values, read without raising: false when
 * a key is not one of out's column name strings (the very object: short
 * strings are interned) or a value is not a scalar (rn_lua_torow reads it
 * then, and words the error). */
static bool scalar_row(lcall *c, lua_State *L, int idx, msgpack_object **vals, uint8_t **given)
{
  lpipe *lp = c->cb->lp;
  const void *const *names = out_names(c->out);
  int ncols = c->out->schema->ncols;
  *vals = names ? rn_zone_malloc(&lp->p->scratch, (sizeof **vals + 1) * (size_t)ncols) : NULL;
  if (!*vals) return false;
  *given = (uint8_t *)(*vals + ncols);
  memset(*given, 0, (size_t)ncols);
  int next = 0; /* where the name search starts: keys often come in column order */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const void *key = lua_topointer(L, -2);
    int slot = -1;
    for (int n = 0, i = next; n < ncols; n++, i = i + 1 < ncols ? i + 1 : 0)
      if (names[i] == key) { slot = i; break; }
    if (slot < 0 || !rn_lua_toscalar(L, -1, lua_type(L, -1), &(*vals)[slot])) {
      lua_pop(L, 2);
      return false;
    }
    (*given)[slot] = 1;
    next = slot + 1 < ncols ? slot + 1 : 0;
    lua_pop(L, 1);
  }
  return true;
}

/* What a joiner returned (n values from idx) handled without raising when
 * it is nothing, nil, a table of scalars or values none of which is a
 * table or full userdata: true with *rc set, else false (joiner_results
 * must read it under protection). */
static bool joiner_results_quick(lcall *c, lua_State *L, int idx, int n, rn_err *e, int *rc)
{
  lpipe *lp = c->cb->lp;
  *rc = 0;
  if (n == 0 || (n == 1 && lua_isnil(L, idx))) { *c->flag = 0; return true; }
  if (n == 1 && lua_type(L, idx) == LUA_TTABLE) {
    msgpack_object *vals;
    uint8_t *given;
    if (!scalar_row(c, L, idx, &vals, &given)) return false;
    *c->flag = 1;
    *rc = refused_from(L, c->cb->refs[CB_JOINER], "joiner", e,
                       pack_row(lp, c->out, vals, given, "joiner returned a bad row", c->result, e));
    return true;
  }
  for (int i = 0; i < n; i++) {
    int t = lua_type(L, idx + i);
    if (t == LUA_TTABLE || t == LUA_TUSERDATA) return false;
  }
  *rc = refused_from(L, c->cb->refs[CB_JOINER], "joiner", e,
                     returned_values(lp, L, idx, n, c->out, c->result, c->flag, e));
  return true;
}

/* The joiner called directly under lua_pcall (no protected C body around
 * it) when its Rows are ready, what it returned read without raising when
 * it can be (joiner_results_quick), else under protection; when a Row is
 * still lent (a joiner reached from inside itself), all of it under
 * rn_lua_protect. */
static int joiner_cb(void *ctx, rn_rel *join, const char *left_row, size_t llen,
                     const char *right_row, size_t rlen, msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  lcb *cb = ctx;
  lua_State *L = cb->lp->L;
  lcall c = { .cb = cb, .out = join, .row = left_row, .len = llen, .row2 = right_row, .len2 = rlen,
              .result = result, .flag = has_row };
  int rc, base = lua_gettop(L);
  if ((!left_row || row_free(cb, 0, cb->left)) && (!right_row || row_free(cb, 1, cb->right)) &&
      lua_checkstack(L, 9)) {
    bool keep = push_lender(cb, L, CB_JOINER);
    push_lent(&c, L, 0, cb->left, left_row, llen, keep);
    push_lent(&c, L, 1, cb->right, right_row, rlen, keep);
    rc = rn_lua_pcall(cb->lp, L, 2 + keep, LUA_MULTRET, join->name, "joiner", e);
    int n = lua_gettop(L) - base;
    if (!rc && !joiner_results_quick(&c, L, base + 1, n, e, &rc))
      rc = rn_lua_protect_on(cb->lp, L, n, joiner_results_body, &c, join->name, "joiner", e);
  } else
    rc = rn_lua_protect(cb->lp, L, joiner_body, &c, join->name, "joiner", e);
  take_back(&c);
  lua_settop(L, base);
  return rc;
}

/* The references of a joiner given as a table (p:_join's from and to
 * lists at idx, idx + 1) into spec; the strings stay on the stack. */
static void joiner_references(lua_State *L, int idx, rn_join_spec *spec, const char **from, const char **to)
{
  spec->nproject = (int)lua_rawlen(L, idx);
  for (int i = 0; i < spec->nproject; i++) {
    lua_rawgeti(L, idx, i + 1);
    from[i] = lua_tostring(L, -1); /* kept alive by the list */
    lua_rawgeti(L, idx + 1, i + 1);
    to[i] = lua_tostring(L, -1);
    lua_pop(L, 2);
    if (!from[i] || !to[i]) rn_lua_error(L, "join: a joiner of column references maps names to names");
  }
  spec->project_from = from;
  spec->project_to = to;
}

/* The slot in the default result (left columns, then right ones) of the
 * column a recognised joiner copies (an entry of runnel/joiner.lua's list
 * at the stack's top: side 0 or 1, col); -1 when it names none. */
static int copied_slot(lua_State *L, const rn_schema *left, const rn_schema *right)
{
  lua_getfield(L, -1, "side");
  lua_getfield(L, -2, "col");
  int side = (int)lua_tointeger(L, -2), slot = -1;
  size_t len;
  const char *col = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  if (col && side == 0) slot = rn_schema_slot(left, col, len);
  else if (col && side == 1 && (slot = rn_schema_slot(right, col, len)) >= 0) slot += left->ncols;
  lua_pop(L, 2);
  return slot;
}

/* What a joiner recognised as copying columns copies (p:_join's copies
 * list at idx, from runnel/joiner.lua: a table's fields by name, or values
 * in column order), as default-result slots in the order of schema's
 * columns; false unless it gives each of them exactly once. */
static bool joiner_copies(lua_State *L, int idx, const rn_schema *schema, const rn_schema *left,
                          const rn_schema *right, int *slots)
{
  int n = (int)lua_rawlen(L, idx);
  if (n != schema->ncols) return false;
  for (int i = 0; i < n; i++) slots[i] = -1;
  bool ok = true;
  for (int i = 0; ok && i < n; i++) {
    if (lua_rawgeti(L, idx, i + 1) != LUA_TTABLE) { /* not joiner.lua's list: nothing may raise here */
      lua_pop(L, 1);
      return false;
    }
    size_t len;
    lua_getfield(L, -1, "out");
    const char *out = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    int at = out ? rn_schema_slot(schema, out, len) : i;
    lua_pop(L, 1);
    ok = at >= 0 && slots[at] < 0 && (slots[at] = copied_slot(L, left, right)) >= 0;
    lua_pop(L, 1);
  }
  return ok;
}

/* p:_join(left, right, name, kind, on|nil, mapper, selector, joiner, cols|nil, key|nil,
 *         from|nil, to|nil, copies|nil, mapper_column|nil) -> relation | nil, err
 * mapper_column: the left column a mapper was recognised as returning
 * (runnel/joiner.lua); the core decides whether reading it is the same. */
int rn_lua_declare_join(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *left = rn_lua_checkrel_of(L, 2, lp), *right = rn_lua_checkrel(L, 3); /* right: the core names both */
  const char *name = rn_lua_checkname(L, 4, "join");
  static const char *const kinds[] = { "inner", "left", "outer", NULL };
  rn_join_spec spec = { (rn_join_kind)luaL_checkoption(L, 5, "inner", kinds), NULL, 0, NULL, NULL, NULL, 0, NULL, NULL };
  int nrefs = lua_istable(L, 12) ? (int)lua_rawlen(L, 12) : 0;
  if (nrefs > 1024 || (nrefs && (!lua_istable(L, 13) || (int)lua_rawlen(L, 13) != nrefs)))
    return rn_lua_error(L, "%s: a joiner of column references names 1 to 1024 columns", name);
  const char *from[nrefs ? nrefs : 1], *to[nrefs ? nrefs : 1];
  if (nrefs) joiner_references(L, 12, &spec, from, to);
  for (int i = 7; i <= 9; i++)
    if (!lua_isnoneornil(L, i)) luaL_checktype(L, i, LUA_TFUNCTION);
  int on[64];
  if (lua_istable(L, 6)) {
    spec.non = (int)lua_rawlen(L, 6);
    if (spec.non > 64) return rn_lua_error(L, "%s: on names more than 64 columns", name);
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
  rn_join_fns fns = { NULL, NULL, NULL, NULL, NULL, NULL };
  lcb *cb = NULL;
  if (!lua_isnoneornil(L, 7) || !lua_isnoneornil(L, 8) || !lua_isnoneornil(L, 9)) {
    int mapper = ref_function(L, 7), selector = ref_function(L, 8), joiner = ref_function(L, 9);
    lent_guard lent[2];
    read_lent_guards(L, 16, &lent[0]);
    read_lent_guards(L, 17, &lent[1]);
    cb = new_cb(L, lp, name); /* after the refs and before the schema: whatever raises leaks nothing */
    cb->left = left->rel;
    cb->right = right->rel;
    cb->refs[CB_MAPPER] = mapper;
    cb->refs[CB_SELECTOR] = selector;
    cb->refs[CB_JOINER] = joiner;
    cb->lent[0] = lent[0];
    cb->lent[1] = lent[1];
    fns.mapper = cb->refs[CB_MAPPER] != LUA_NOREF ? mapper_cb : NULL;
    fns.mapper_reads = fns.mapper ? mapper_reads : NULL;
    fns.selector = cb->refs[CB_SELECTOR] != LUA_NOREF ? selector_cb : NULL;
    fns.joiner = cb->refs[CB_JOINER] != LUA_NOREF ? joiner_cb : NULL;
    fns.ctx = cb;
    fns.free_ctx = free_cb;
  }
  rn_err e = { .code = RN_OK };
  if (lua_istable(L, 10) && !(spec.schema = rn_lua_toschema(lp, L, 10, lua_istable(L, 11) ? 11 : 0, name, &e))) {
    if (cb) free_cb(cb);
    return rn_lua_nil_error(L, e.msg);
  }
  int copies[spec.schema ? spec.schema->ncols : 1];
  if (spec.schema && lua_istable(L, 14) &&
      joiner_copies(L, 14, spec.schema, left->rel->schema, right->rel->schema, copies))
    spec.copies = copies;
  size_t mlen;
  const char *mcol = lua_type(L, 15) == LUA_TSTRING ? lua_tolstring(L, 15, &mlen) : NULL;
  int mslot = mcol ? rn_schema_slot(left->rel->schema, mcol, mlen) : -1;
  if (mslot >= 0) spec.mapper_column = &mslot;
  rn_rel *rel = NULL;
  int rc = rn_declare_join(lp->p, name, left->rel, right->rel, &spec, &fns, &rel);
  return rn_lua_declared(L, lp, rc, rel);
}

/* A filter's or map's old function (evolve_code.h), from runnel.lua:
 * told (at idx: nil, "kept", "unkept" or "absent") and, when kept, the
 * old function made again (idx + 1), or why it could not be (a string). */
typedef struct told_arg {
  rn_code_kind kind;
  lcb *cb;                /* the old function's context */
  const char *why;        /* kept, not made again */
} told_arg;

static told_arg told_check(lua_State *L, int idx, lpipe *lp, const char *name)
{
  static const char *const kinds[] = { "none", "kept", "unkept", "absent", NULL };
  told_arg t = { RN_CODE_NONE, NULL, NULL };
  if (lua_isnoneornil(L, idx)) return t;
  t.kind = (rn_code_kind)luaL_checkoption(L, idx, NULL, kinds);
  if (t.kind != RN_CODE_KEPT) return t;
  if (lua_type(L, idx + 1) == LUA_TSTRING) { t.why = lua_tostring(L, idx + 1); return t; }
  luaL_checktype(L, idx + 1, LUA_TFUNCTION);
  int fn = ref_function(L, idx + 1);
  t.cb = new_cb(L, lp, name); /* may raise: the ref stays in the registry */
  t.cb->refs[CB_FN] = fn;
  return t;
}

/* After filter or map rel was declared (rc): its sinks told what its new
 * function changed (derive.h); failing, rel is taken back. */
static int told_tell(lua_State *L, lpipe *lp, int rc, rn_rel *rel, told_arg *t, bool map)
{
  if (!rc && t->cb && !map) t->cb->self = rel;
  if (!rc && t->kind != RN_CODE_NONE) {
    if (t->why) rc = rn_derive_untold(rel, t->why);
    else rc = rn_derive_tell_old(rel, t->kind, map ? NULL : filter_cb, map ? map_cb : NULL, t->cb);
    if (rc) {
      rel->input->noutputs--; /* rn_declare_derived made rel its last output */
      rn_rel_discard_last(lp->p);
      rel = NULL;
    }
  }
  if (t->cb) free_cb(t->cb);
  return rn_lua_declared(L, lp, rc, rel);
}

/* p:_filter(in, name, fn, told|nil, old|nil) -> relation | nil, err */
int rn_lua_declare_filter(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  const char *name = rn_lua_checkname(L, 3, "filter");
  luaL_checktype(L, 4, LUA_TFUNCTION);
  told_arg t = told_check(L, 5, lp, name);
  int fn = ref_function(L, 4); /* may raise: before the context, which would leak */
  lcb *cb = new_cb(L, lp, name);
  cb->refs[CB_FN] = fn;
  rn_rel *rel = NULL;
  int rc = rn_declare_filter(lp->p, name, in->rel, filter_cb, cb, free_cb, &rel);
  if (!rc) cb->self = rel; /* its old function, if any, runs next (told_tell) */
  return told_tell(L, lp, rc, rel, &t, false);
}

/* p:_map(in, name, fn, cols, key|nil, told|nil, old|nil) -> relation | nil, err */
int rn_lua_declare_map(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  const char *name = rn_lua_checkname(L, 3, "map");
  luaL_checktype(L, 4, LUA_TFUNCTION);
  luaL_checktype(L, 5, LUA_TTABLE);
  told_arg t = told_check(L, 7, lp, name); /* may raise: before anything is allocated */
  int fn = ref_function(L, 4); /* may raise: nothing is allocated yet, the registry holds it */
  lcb *cb = new_cb(L, lp, name); /* may raise: before the schema, which nothing would free */
  cb->refs[CB_FN] = fn;
  rn_err e = { .code = RN_OK };
  rn_schema *s = rn_lua_toschema(lp, L, 5, lua_istable(L, 6) ? 6 : 0, name, &e);
  if (!s) { free_cb(cb); if (t.cb) free_cb(t.cb); return rn_lua_nil_error(L, e.msg); }
  rn_rel *rel = NULL;
  int rc = rn_declare_map(lp->p, name, in->rel, s, map_cb, cb, free_cb, &rel);
  return told_tell(L, lp, rc, rel, &t, true);
}

/* A sink delivered after durability from the outbox, as "sink:" name in
 * the state: after a crash it gets the groups after its last recorded
 * mark again (info.seq and info.n name each change); within a process
 * a delivery that failed resumes after the last change it took (OUTBOX-9). */
static int add_durable_sink(lpipe *lp, rn_rel *rel, const char *name, bool consolidate, lcb *cb)
{
  static const rn_outbox_ops ops = { sink_cb, sink_commit_cb, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                     false, NULL }; /* rows as the relation's rows now: other columns refused */
  char *key = malloc(strlen(name) + 6), *label = key ? malloc(strlen(name) + 16) : NULL;
  if (!label) { free(key); free_cb(cb); return rn_err_set(&lp->p->err, RN_ENOMEM, "out of memory"); }
  sprintf(key, RN_SINK_NAMED "%s", name);
  sprintf(label, "durable sink %s", name); /* as the script named it, not its key in the state */
  rn_outbox_mark m;
  int rc = rn_outbox_sink_check(lp->p, rel, key); /* before the mark's read, whose flush a callback is refused */
  if (!rc) rc = rn_outbox_mark_read(lp->p, key, label, &m);
  if (rc) free_cb(cb);
  else rc = rn_outbox_sink_add(lp->p, rel, key, label, consolidate, &ops, cb, free_cb, m.found ? m.delivered : lp->p->seq,
                               m.found ? m.position : 0); /* resumes mid-group (OUTBOX-9) */
  free(key);
  free(label);
  return rc;
}

/* In-group: it may fail the group, and hears of a rollback (rollback(seq)). */
static int add_ingroup_sink(lpipe *lp, rn_rel *rel, bool consolidate, lcb *cb)
{
  bool commits = cb->refs[CB_COMMIT] != LUA_NOREF; /* else only its changes make it hear of a rollback */
  int rc = rn_sink_add(lp->p, rel, consolidate, sink_cb, commits ? sink_commit_cb : NULL, cb, free_cb);
  if (!rc) rn_sink_set_hooks(lp->p, NULL, sink_done_cb);
  if (!rc && cb->refs[CB_ROLLBACK] != LUA_NOREF) rn_sink_set_lost(lp->p, sink_lost_cb);
  return rc;
}

/* p:_sink(rel, fn|nil, insert, update, delete, commit, consolidate, rollback, durable name|nil)
 *   -> true | nil, err */
int rn_lua_add_sink(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *r = rn_lua_checkrel_of(L, 2, lp);
  for (int i = 3; i <= 9; i++)
    if (i != 8 && !lua_isnoneornil(L, i)) luaL_checktype(L, i, LUA_TFUNCTION);
  int refs[CB_NREFS]; /* taken first: a ref may raise, and the context would leak */
  refs[CB_ALL] = ref_function(L, 3);
  refs[CB_INSERT] = ref_function(L, 4);
  refs[CB_UPDATE] = ref_function(L, 5);
  refs[CB_DELETE] = ref_function(L, 6);
  refs[CB_COMMIT] = ref_function(L, 7);
  refs[CB_ROLLBACK] = ref_function(L, 9);
  lcb *cb = new_cb(L, lp, r->rel->name);
  memcpy(cb->refs, refs, sizeof refs);
  int rc = lua_isstring(L, 10) ? add_durable_sink(lp, r->rel, lua_tostring(L, 10), lua_toboolean(L, 8), cb)
                               : add_ingroup_sink(lp, r->rel, lua_toboolean(L, 8), cb);
  if (rc) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  lua_pushboolean(L, 1);
  return 1;
}

/* p:on_durable(fn): fn(seq) when the groups up to seq are on disk
 * (durable.c). It cannot fail them: they are committed; an error it raises
 * is written to stderr. */
static void durable_cb(void *ctx, uint64_t seq)
{
  call_after(ctx, CB_FN, seq, NULL, "on_durable");
}

int rn_lua_on_durable(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int fn = ref_function(L, 2); /* may raise: before the context, which would leak */
  lcb *cb = new_cb(L, lp, "on_durable");
  cb->refs[CB_FN] = fn;
  if (rn_durable_add(lp->p, durable_cb, cb, free_cb)) return rn_lua_raise(L, lp);
  lua_settop(L, 1);
  return 1;
}

/* p:_select(in, name, {input names}, {output names}, {key output names}|nil)
 *   -> relation | nil, err */
int rn_lua_declare_select(lua_State *L)
{
  lpipe *lp = rn_lua_checkpipe(L, 1);
  lrel *in = rn_lua_checkrel_of(L, 2, lp);
  const char *name = rn_lua_checkname(L, 3, "select");
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 5, LUA_TTABLE);
  int n = (int)lua_rawlen(L, 4);
  if (n == 0 || n > 1024 || (int)lua_rawlen(L, 5) != n) return rn_lua_error(L, "%s: select needs 1 to 1024 columns", name);
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

