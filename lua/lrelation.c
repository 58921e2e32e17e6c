/* lrelation.c — the runnel.Relation userdata: changes, reads, iteration. */
#include <stdio.h>
#include <string.h>

#include "lbind.h"
#include "scan.h"
#include "row.h"

/* Every change method: convert (failures roll the group back), apply, raise. */
typedef int (*change_fn)(rn_rel *, msgpack_object *, uint8_t *);

/* A change inside p:batch(fn) that finds no group open: an error fn caught
 * rolled the batch's group back. Made, it would be a group of its own,
 * committed although the batch raises (DESIGN 5: the batch's changes are
 * one group). */
static int batch_lost(lua_State *L, lrel *r, const char *method)
{
  return rn_lua_error(L, "%s: %s: the group of p:batch(fn) was rolled back by an error fn caught; let that error "
                      "raise out of fn (this change would be committed on its own)", r->rel->name, method);
}

static bool batch_gone(const lrel *r) { return r->lp->batches && r->rel->p->state == RN_IDLE; }

static int apply_change(lua_State *L, lrel *r, change_fn fn, bool key_only, const char *method)
{
  if (batch_gone(r)) return batch_lost(L, r, method);
  msgpack_object *vals;
  uint8_t *given;
  int rc = key_only ? rn_lua_tokey(r->lp, L, 2, r->rel, &vals, &given)
                    : rn_lua_torow(r->lp, L, 2, r->rel, &vals, &given);
  if (rc) return rn_lua_fail(L, r->lp);
  if (fn(r->rel, vals, given)) return rn_lua_raise(L, r->lp);
  return 0;
}

/* The relation at 1, as rn_lua_checkrel gives it, for the per-change
 * methods: their upvalue 1 is the Relation metatable, so the common case
 * costs one comparison instead of a registry lookup by name. */
static lrel *self_rel(lua_State *L)
{
  lrel *r = lua_touserdata(L, 1);
  if (r && lua_getmetatable(L, 1)) {
    int same = lua_rawequal(L, -1, lua_upvalueindex(1));
    lua_pop(L, 1);
    if (same && r->lp->p && lua_gc(L, LUA_GCISRUNNING) >= 0) { /* rn_lua_not_in_finalizer */
      r->lp->L = L;
      return r;
    }
  }
  return rn_lua_checkrel(L, 1); /* raises with the usual message */
}

/* Each method checks its relation once. */
static int l_insert(lua_State *L) { return apply_change(L, self_rel(L), rn_table_insert, false, "insert"); }
static int l_upsert(lua_State *L) { return apply_change(L, self_rel(L), rn_table_upsert, false, "upsert"); }

static int l_delete(lua_State *L)
{
  lrel *r = self_rel(L);
  return apply_change(L, r, rn_table_delete, r->rel->schema->nkey > 0, "delete");
}

/* update(patch) for keyed tables; update(old_row, new_row) for keyless. */
static int l_update(lua_State *L)
{
  lrel *r = self_rel(L);
  if (lua_isnoneornil(L, 3)) return apply_change(L, r, rn_table_update, false, "update");
  if (batch_gone(r)) return batch_lost(L, r, "update");
  msgpack_object *old, *vals;
  uint8_t *old_given, *given;
  if (rn_lua_torow(r->lp, L, 2, r->rel, &old, &old_given) ||
      rn_lua_torow(r->lp, L, 3, r->rel, &vals, &given))
    return rn_lua_fail(L, r->lp);
  if (rn_table_replace(r->rel, old, old_given, vals, given)) return rn_lua_raise(L, r->lp);
  return 0;
}

/* The message of e, which names from ("from: …"), naming to instead. */
static void rename_error(rn_err *e, const char *from, const char *to)
{
  size_t n = strlen(from);
  if (strncmp(e->msg, from, n) || strncmp(e->msg + n, ": ", 2)) return;
  char rest[sizeof e->msg];
  snprintf(rest, sizeof rest, "%s", e->msg + n);
  snprintf(e->msg, sizeof e->msg, "%s%s", to, rest);
}

/* read_key for a derived relation (scan.h: rn_rel_get): its key, or a top's
 * or an index's input's, read as a table reads its own; errors name it and
 * the method (what: "get" or "id_of"). */
static int read_derived_key(lua_State *L, lrel *r, const char *what, uint64_t *id, const char **row, size_t *len)
{
  rn_pipeline *p = r->rel->p;
  rn_rel *kr = rn_rel_key_source(r->rel);
  if (!kr) return rn_lua_error(L, "%s: %s needs a relation with a key", r->rel->name, what);
  msgpack_object *vals;
  uint8_t *given;
  int found = 0;
  if (rn_lua_tokey(r->lp, L, 2, kr, &vals, &given)) {
    rename_error(&p->err, kr->name, r->rel->name);
    return rn_lua_raise(L, r->lp);
  }
  msgpack_sbuffer_clear(&p->rowbuf);
  if (rn_rel_get(r->rel, vals, given, &p->rowbuf, id, &found)) return rn_lua_raise(L, r->lp);
  *row = p->rowbuf.data;
  *len = p->rowbuf.size;
  return found;
}

/* Reads by key; pushes nothing and returns 0 when absent. */
static int read_key(lua_State *L, lrel *r, const char *what, uint64_t *id, const char **row, size_t *len)
{
  msgpack_object *vals;
  uint8_t *given;
  int found = 0;
  if (r->rel->kind != RN_REL_TABLE) return read_derived_key(L, r, what, id, row, len);
  if (rn_lua_tokey(r->lp, L, 2, r->rel, &vals, &given) ||
      rn_table_get(r->rel, vals, given, &found, id, row, len))
    return rn_lua_raise(L, r->lp);
  return found;
}

/* get(key) -> row | nil */
static int l_get(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  rn_lua_note_read(L, r->lp, r->rel);
  uint64_t id;
  const char *row;
  size_t len;
  if (!read_key(L, r, "get", &id, &row, &len)) lua_pushnil(L);
  else rn_lua_pushrow(r->lp, L, r->rel, row, len);
  return 1;
}

/* id_of(key) -> id | nil */
static int l_id_of(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  rn_lua_note_read(L, r->lp, r->rel);
  uint64_t id;
  const char *row;
  size_t len;
  if (!read_key(L, r, "id_of", &id, &row, &len)) lua_pushnil(L);
  else lua_pushinteger(L, (lua_Integer)id);
  return 1;
}

static int l_count(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  if (r->rel->kind != RN_REL_TABLE)
    return rn_lua_error(L, "%s: count: only tables hold rows to count", r->rel->name);
  rn_lua_note_read(L, r->lp, r->rel);
  lua_pushinteger(L, (lua_Integer)r->rel->count);
  return 1;
}

static int l_name(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  lua_pushstring(L, r->rel->name);
  return 1;
}

static void push_columns(lua_State *L, const rn_schema *s)
{
  lua_createtable(L, s->ncols, 0);
  for (int i = 0; i < s->ncols; i++) {
    const rn_column *c = &s->cols[i];
    lua_createtable(L, 0, 6);
    lua_pushlstring(L, c->name, c->name_len);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, rn_type_name(c->type));
    lua_setfield(L, -2, "type");
    lua_pushboolean(L, c->nullable);
    lua_setfield(L, -2, "null");
    lua_pushboolean(L, c->is_key);
    lua_setfield(L, -2, "key");
    if (c->has_default) {
      rn_lua_pushvalue(L, &c->defval, c);
      lua_setfield(L, -2, "default");
    }
    if (c->fields) {
      push_columns(L, c->fields);
      lua_setfield(L, -2, "fields");
    }
    lua_rawseti(L, -2, i + 1);
  }
}

/* schema() -> { kind, name, columns = {…}, key = {names…} | nil, input } */
static int l_schema(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  rn_lua_note_read(L, r->lp, r->rel); /* its declaration: what evolution changes */
  const rn_schema *s = r->rel->schema;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, rn_relkind_name(r->rel->kind));
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, r->rel->name);
  lua_setfield(L, -2, "name");
  lua_pushboolean(L, r->rel->tablelike);
  lua_setfield(L, -2, "tablelike");
  push_columns(L, s);
  lua_setfield(L, -2, "columns");
  if (s->nkey) {
    lua_createtable(L, s->nkey, 0);
    for (int i = 0; i < s->nkey; i++) {
      lua_pushstring(L, s->cols[s->key_slots[i]].name);
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "key");
  }
  if (r->rel->input) {
    lua_getiuservalue(L, 1, 1);
    rn_lua_pushrel(L, -1, r->rel->input);
    lua_setfield(L, -3, "input");
    lua_pop(L, 1);
  }
  return 1;
}

static int l_pipeline(lua_State *L)
{
  rn_lua_checkrel(L, 1);
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static int l_tostring(lua_State *L)
{
  lrel *r = luaL_checkudata(L, 1, RN_RELATION_MT);
  if (!r->lp->p) {
    lua_getiuservalue(L, 1, 2);
    lua_pushfstring(L, "runnel.Relation %s (closed)", lua_tostring(L, -1));
  }
  else lua_pushfstring(L, "runnel.Relation %s (%s)", r->rel->name, rn_relkind_name(r->rel->kind));
  return 1;
}

/* ---- rows(): for row, id in t:rows() do … end ---- */

typedef struct lrows {
  rn_table_cursor *cur;         /* NULL once closed */
  lpipe *lp;
  rn_rel *rel;
} lrows;

static int rows_close(lua_State *L)
{
  lrows *it = luaL_checkudata(L, 1, RN_ROWS_MT);
  rn_table_cursor_close(it->cur);
  it->cur = NULL;
  return 0;
}

static int rows_next(lua_State *L)
{
  lrows *it = luaL_checkudata(L, 1, RN_ROWS_MT);
  if (!it->cur || !it->lp->p) return 0;
  rn_lua_not_in_finalizer(L);
  uint64_t id;
  const char *row;
  size_t len;
  int done;
  it->lp->L = L;
  if (rn_table_cursor_next(it->cur, &id, &row, &len, &done)) {
    rn_table_cursor_close(it->cur);
    it->cur = NULL;
    return rn_lua_raise(L, it->lp);
  }
  if (done) {
    rn_table_cursor_close(it->cur);
    it->cur = NULL;
    return 0;
  }
  rn_lua_pushrow(it->lp, L, it->rel, row, len);
  lua_pushinteger(L, (lua_Integer)id);
  return 2;
}

static int l_rows(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  rn_lua_note_read(L, r->lp, r->rel);
  lua_pushcfunction(L, rows_next);
  lrows *it = lua_newuserdatauv(L, sizeof *it, 1);
  it->cur = NULL;
  it->lp = r->lp;
  it->rel = r->rel;
  luaL_setmetatable(L, RN_ROWS_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* keeps the relation and its pipeline alive */
  if (rn_table_cursor_open(r->rel, &it->cur)) return rn_lua_raise(L, r->lp);
  lua_pushnil(L);
  lua_pushvalue(L, -2); /* to-be-closed: break ends the read transaction */
  return 4;
}

/* ---- scan(fn): fn(row, id) for every current row, any table-like relation ---- */

typedef struct lscan {
  lua_State *L;
  lrel *r;
} lscan;

static int scan_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  lscan *s = ctx;
  lua_State *L = s->L;
  lua_pushvalue(L, 2);
  rn_lua_pushrow(s->r->lp, L, s->r->rel, row, len);
  lua_pushinteger(L, (lua_Integer)id);
  s->r->lp->depth++;
  int st = lua_pcall(L, 2, 0, 0);
  const char *msg = st == LUA_OK ? NULL : rn_lua_errtext(L);
  s->r->lp->depth--;
  s->r->lp->L = L;
  if (st == LUA_OK) return 0;
  rn_err_keep(&s->r->lp->p->err, RN_ECALLBACK, msg ? msg : "error in scan");
  lua_pop(L, 1);
  return RN_ECALLBACK;
}

/* fn(row, id) for each row, as scan (a core scan of scan.h) gives them. */
static int scan_with(lua_State *L, int (*scan)(rn_rel *, rn_scan_fn, void *))
{
  lrel *r = rn_lua_checkrel(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  rn_lua_note_read(L, r->lp, r->rel);
  lscan s = { L, r };
  if (scan(r->rel, scan_row, &s)) return rn_lua_raise(L, r->lp);
  return 0;
}

static int l_scan(lua_State *L) { return scan_with(L, rn_rel_scan); }

/* _scan_ordered(fn): in the order rows() gives (scan.h: rn_rel_scan_ordered) */
static int l_scan_ordered(lua_State *L) { return scan_with(L, rn_rel_scan_ordered); }

/* changes() -> { inserts, updates, deletes } emitted since the pipeline opened */
static int l_changes(lua_State *L)
{
  lrel *r = rn_lua_checkrel(L, 1);
  rn_lua_note_read(L, r->lp, r->rel); /* a rebuild's changes count too */
  lua_createtable(L, 0, 3);
  static const char *const names[] = { "inserts", "updates", "deletes" };
  for (int i = 0; i < 3; i++) {
    lua_pushinteger(L, (lua_Integer)r->rel->emitted[i]);
    lua_setfield(L, -2, names[i]);
  }
  return 1;
}

static const luaL_Reg relation_methods[] = {
  { "scan", l_scan }, { "_scan_ordered", l_scan_ordered }, { "changes", l_changes },
  { "late", rn_lua_aggregate_late },
  { "insert", l_insert }, { "update", l_update }, { "upsert", l_upsert },
  { "delete", l_delete }, { "get", l_get }, { "id_of", l_id_of },
  { "count", l_count }, { "rows", l_rows }, { "name", l_name },
  { "schema", l_schema }, { "pipeline", l_pipeline },
  { "_range", rn_lua_index_range }, { "_count", rn_lua_index_count }, /* lorder.c */
  { "_rank", rn_lua_index_rank }, { "_ordered_count", rn_lua_ordered_count },
  { NULL, NULL }
};

void rn_lua_relation_open(lua_State *L)
{
  luaL_newmetatable(L, RN_RELATION_MT);
  luaL_newlibtable(L, relation_methods);
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, relation_methods, 1); /* upvalue 1: the metatable (self_rel) */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newmetatable(L, RN_ROWS_MT);
  lua_pushcfunction(L, rows_close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, rows_close);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}
