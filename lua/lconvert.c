/* lconvert.c — Lua values to slot values and stored rows back to Lua.
 * The binding only shapes values (which table is a list, which a map); the
 * core checks them against the schema and names the column in errors. */
#include <string.h>

#include "lbind.h"
#include "evolve.h"
#include "json.h"
#include "row.h"
#include "suggest.h"

const char rn_lua_null_tag = 0;

static int foreign(msgpack_object *out, const char *type_name)
{
  out->type = MSGPACK_OBJECT_EXT;
  out->via.ext.type = RN_EXT_FOREIGN;
  out->via.ext.ptr = type_name;
  out->via.ext.size = (uint32_t)strlen(type_name);
  return 0;
}

/* top: the name of the row's column the value is inside of (NULL: none). */
static int too_deep(lpipe *lp, const char *top)
{
  return rn_err_set(&lp->p->err, RN_EINVAL, "column \"%s\": value nested more than 64 deep", top ? top : "?");
}

/* rn_lua_tovalue inside the value of the row's column named top. */
static int tovalue(lpipe *lp, lua_State *L, int idx, const rn_column *col, const char *top,
                   msgpack_object *out, int depth);

static int table_as_array(lpipe *lp, lua_State *L, int idx, lua_Unsigned n, const char *top, msgpack_object *out,
                          int depth)
{
  msgpack_object *items = rn_zone_malloc(&lp->p->scratch, sizeof *items * (n ? n : 1));
  if (!items) return rn_err_set(&lp->p->err, RN_ENOMEM, "out of memory");
  for (lua_Unsigned i = 0; i < n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i + 1);
    int rc = tovalue(lp, L, -1, NULL, top, &items[i], depth + 1);
    lua_pop(L, 1);
    if (rc) return rc;
  }
  out->type = MSGPACK_OBJECT_ARRAY;
  out->via.array.size = (uint32_t)n;
  out->via.array.ptr = items;
  return 0;
}

/* fields: for a struct, the nested schema whose columns shape the values. */
static int table_as_map(lpipe *lp, lua_State *L, int idx, size_t n, const rn_schema *fields, const char *top,
                        msgpack_object *out, int depth)
{
  msgpack_object_kv *kv = rn_zone_malloc(&lp->p->scratch, sizeof *kv * (n ? n : 1));
  if (!kv) return rn_err_set(&lp->p->err, RN_ENOMEM, "out of memory");
  size_t i = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const rn_column *fc = NULL;
    if (fields && lua_type(L, -2) == LUA_TSTRING) {
      size_t len;
      const char *name = lua_tolstring(L, -2, &len);
      int slot = rn_schema_slot(fields, name, len);
      if (slot >= 0) fc = &fields->cols[slot];
    }
    int rc = tovalue(lp, L, -2, NULL, top, &kv[i].key, depth + 1);
    if (!rc) rc = tovalue(lp, L, -1, fc, top, &kv[i].val, depth + 1);
    lua_pop(L, 1);
    if (rc) { lua_pop(L, 1); return rc; }
    i++;
  }
  out->type = MSGPACK_OBJECT_MAP;
  out->via.map.size = (uint32_t)i;
  out->via.map.ptr = kv;
  return 0;
}

static int table_value(lpipe *lp, lua_State *L, int idx, const rn_column *col, const char *top,
                       msgpack_object *out, int depth)
{
  if (depth > 64) return too_deep(lp, top);
  luaL_checkstack(L, 4, "nested value");
  lua_Unsigned len = lua_rawlen(L, idx);
  size_t count = 0;
  bool sequence = true; /* every key an integer in 1..len */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    count++;
    lua_Integer k = lua_isinteger(L, -2) ? lua_tointeger(L, -2) : 0;
    sequence &= k >= 1 && (lua_Unsigned)k <= len;
    lua_pop(L, 1);
  }
  sequence &= count == len;
  rn_type t = col ? col->type : RN_T_ANY;
  if (t == RN_T_STRUCT && sequence && count > 0) /* its keys 1, 2 … would each be "unknown field 1" */
    return rn_err_set(&lp->p->err, RN_EINVAL, "column \"%s\": expected struct, got a list (a struct is a table of "
                      "its fields by name)", col->name);
  if (t == RN_T_STRUCT) return table_as_map(lp, L, idx, count, col->fields, top, out, depth);
  if (t == RN_T_LIST && !sequence) /* storing its sequence part would lose the rest silently */
    return rn_err_set(&lp->p->err, RN_EINVAL, "column \"%s\": expected list, got a table with non-sequence keys",
                      col->name);
  if (t == RN_T_LIST || (t != RN_T_MAP && sequence)) /* empty is a list unless declared map */
    return table_as_array(lp, L, idx, len, top, out, depth);
  return table_as_map(lp, L, idx, count, NULL, top, out, depth);
}

static void integer_value(lua_Integer i, msgpack_object *out)
{
  if (i >= 0) { out->type = MSGPACK_OBJECT_POSITIVE_INTEGER; out->via.u64 = (uint64_t)i; }
  else { out->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; out->via.i64 = i; }
}

/* The scalar at idx (of type t) into out; false for tables and foreign
 * values. One API call per value: rows are made of scalars. */
static bool scalar_value(lua_State *L, int idx, int t, msgpack_object *out)
{
  switch (t) {
  case LUA_TNIL:
    out->type = MSGPACK_OBJECT_NIL;
    return true;
  case LUA_TBOOLEAN:
    out->type = MSGPACK_OBJECT_BOOLEAN;
    out->via.boolean = lua_toboolean(L, idx);
    return true;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) /* 1.0 is a float: it stays one */
      integer_value(lua_tointeger(L, idx), out);
    else {
      out->type = MSGPACK_OBJECT_FLOAT64;
      out->via.f64 = lua_tonumber(L, idx);
    }
    return true;
  case LUA_TSTRING: {
    size_t len;
    out->via.str.ptr = lua_tolstring(L, idx, &len);
    out->via.str.size = (uint32_t)len;
    out->type = MSGPACK_OBJECT_STR;
    return true;
  }
  default:
    return false;
  }
}

int rn_lua_tovalue(lpipe *lp, lua_State *L, int idx, const rn_column *col,
                   msgpack_object *out, int depth)
{
  return tovalue(lp, L, idx, col, col ? col->name : NULL, out, depth);
}

static int tovalue(lpipe *lp, lua_State *L, int idx, const rn_column *col, const char *top,
                   msgpack_object *out, int depth)
{
  idx = lua_absindex(L, idx);
  int t = lua_type(L, idx);
  if (scalar_value(L, idx, t, out)) return 0;
  switch (t) {
  case LUA_TLIGHTUSERDATA:
    if (lua_touserdata(L, idx) == RN_LUA_NULL) { out->type = MSGPACK_OBJECT_NIL; return 0; }
    return foreign(out, "userdata");
  case LUA_TTABLE:
    return table_value(lp, L, idx, col, top, out, depth);
  default:
    return foreign(out, lua_typename(L, t));
  }
}

/* vals and given in one piece of the scratch zone (given after vals). */
static int alloc_row(lpipe *lp, rn_rel *rel, msgpack_object **vals, uint8_t **given)
{
  size_t n = (size_t)rel->schema->ncols;
  *vals = rn_zone_malloc(&lp->p->scratch, (sizeof **vals + 1) * (n ? n : 1));
  if (!*vals) return rn_err_set(&lp->p->err, RN_ENOMEM, "out of memory");
  *given = (uint8_t *)(*vals + n);
  memset(*given, 0, n);
  return 0;
}

/* The value on top into out when it is a scalar; false otherwise. Integers,
 * the commonest values, are asked for first: two API calls, not three. */
static bool top_scalar(lua_State *L, msgpack_object *out)
{
  if (lua_isinteger(L, -1)) {
    integer_value(lua_tointeger(L, -1), out);
    return true;
  }
  return scalar_value(L, -1, lua_type(L, -1), out);
}

/* The slot of the column whose name string is the object key (lua_topointer
 * of a row key), or -1; slot guess is tried first. */
static int slot_of_key(const lrelinfo *ri, const void *key, int guess)
{
  if (guess < ri->ncols && ri->keys[guess] == key) return guess;
  for (int i = 0; i < ri->ncols; i++)
    if (ri->keys[i] == key) return i;
  return -1;
}

int rn_lua_torow(lpipe *lp, lua_State *L, int idx, rn_rel *rel,
                 msgpack_object **vals, uint8_t **given)
{
  rn_pipeline *p = lp->p;
  if (idx < 0) idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx))
    return rn_err_set(&p->err, RN_EINVAL, "%s: a row is a table keyed by column names, got %s",
                      rel->name, luaL_typename(L, idx));
  int rc = alloc_row(lp, rel, vals, given);
  if (rc) return rc;
  int top = lua_gettop(L);
  luaL_checkstack(L, 6, "row");
  rn_lua_relinfo(L, rel); /* a relation being declared (a join built from existing rows) has none yet */
  const lrelinfo *ri = rel->udata;
  int slots = 0; /* the name -> slot table, pushed when first needed */
  int prev = -1; /* the slot of the key before: ri->after[prev + 1] guesses this one's */
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    /* a key spelled like a column name is that name's very string (short strings are interned) */
    int slot = slot_of_key(ri, lua_topointer(L, -2), ri->after[prev + 1]);
    if (slot < 0) { /* a long name, or not a name */
      if (!slots) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, ri->slots_ref);
        lua_insert(L, -3); /* below the key and value: lua_next needs them on top */
        slots = lua_absindex(L, -3);
      }
      lua_pushvalue(L, -2);
      lua_rawget(L, slots);
      slot = (int)lua_tointeger(L, -1) - 1;
      lua_pop(L, 1);
    }
    if (slot < 0 && rel->as_told && lua_type(L, -2) == LUA_TSTRING) { /* in the columns its sinks were told
                                                                         * (evolve_log.c): under the name it
                                                                         * was renamed from, else left out */
      const char *from = rn_evolve_renamed_from(p, rel->name, lua_tostring(L, -2));
      if (from) slot = rn_schema_slot(rel->schema, from, strlen(from));
      if (slot < 0) {
        lua_pop(L, 1);
        continue;
      }
    }
    if (slot < 0) {
      if (lua_type(L, -2) == LUA_TSTRING) {
        size_t len;
        const char *name = lua_tolstring(L, -2, &len);
        char quoted[256]; /* the name with its NUL, control and stray bytes escaped, as core/api.c says it */
        rc = rn_err_set(&p->err, RN_EINVAL, "%s: unknown column %s", rel->name,
                        rn_json_quote(quoted, sizeof quoted, name, len));
        rn_suggest_append_column(p->err.msg, sizeof p->err.msg, rel->schema, name, len);
      } else
        rc = rn_err_set(&p->err, RN_EINVAL, "%s: column names are strings, got %s", rel->name,
                        luaL_typename(L, -2));
      break;
    }
    if (!top_scalar(L, &(*vals)[slot]) &&
        (rc = rn_lua_tovalue(lp, L, -1, &rel->schema->cols[slot], &(*vals)[slot], 0))) {
      rn_err_prefix(&p->err, rel->name);
      break;
    }
    (*given)[slot] = 1;
    ri->after[prev + 1] = slot;
    prev = slot;
    lua_pop(L, 1);
  }
  if (rc || slots) lua_settop(L, top); /* else lua_next has left it there */
  return rc;
}

int rn_lua_tokey(lpipe *lp, lua_State *L, int idx, rn_rel *rel,
                 msgpack_object **vals, uint8_t **given)
{
  if (lua_istable(L, idx)) return rn_lua_torow(lp, L, idx, rel, vals, given);
  const rn_schema *s = rel->schema;
  if (s->nkey != 1)
    return rn_err_set(&lp->p->err, RN_EINVAL, "%s: a key is a table of its key columns%s, got %s",
                      rel->name, s->nkey ? "" : " (this table has no key: give the whole row)",
                      luaL_typename(L, idx));
  int rc = alloc_row(lp, rel, vals, given);
  if (rc) return rc;
  int slot = s->key_slots[0];
  (*given)[slot] = 1;
  return rn_lua_tovalue(lp, L, idx, &s->cols[slot], &(*vals)[slot], 0);
}

void rn_lua_pushvalue(lua_State *L, const msgpack_object *o, const rn_column *col)
{
  luaL_checkstack(L, 4, "value");
  switch (o->type) {
  case MSGPACK_OBJECT_NIL: lua_pushlightuserdata(L, RN_LUA_NULL); return;
  case MSGPACK_OBJECT_BOOLEAN: lua_pushboolean(L, o->via.boolean); return;
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    if (o->via.u64 > (uint64_t)INT64_MAX) lua_pushnumber(L, (lua_Number)o->via.u64);
    else lua_pushinteger(L, (lua_Integer)o->via.u64);
    return;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: lua_pushinteger(L, (lua_Integer)o->via.i64); return;
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: lua_pushnumber(L, o->via.f64); return;
  case MSGPACK_OBJECT_STR: case MSGPACK_OBJECT_BIN:
    lua_pushlstring(L, o->via.str.ptr, o->via.str.size);
    return;
  case MSGPACK_OBJECT_ARRAY:
    if (col && col->type == RN_T_STRUCT) {
      const rn_schema *f = col->fields;
      lua_createtable(L, 0, f->ncols);
      for (uint32_t i = 0; i < o->via.array.size && i < (uint32_t)f->ncols; i++) {
        if (o->via.array.ptr[i].type == MSGPACK_OBJECT_NIL) continue;
        rn_lua_pushvalue(L, &o->via.array.ptr[i], &f->cols[i]);
        lua_setfield(L, -2, f->cols[i].name);
      }
      return;
    }
    lua_createtable(L, (int)o->via.array.size, 0);
    for (uint32_t i = 0; i < o->via.array.size; i++) {
      rn_lua_pushvalue(L, &o->via.array.ptr[i], NULL);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return;
  case MSGPACK_OBJECT_MAP:
    lua_createtable(L, 0, (int)o->via.map.size);
    for (uint32_t i = 0; i < o->via.map.size; i++) {
      if (o->via.map.ptr[i].key.type == MSGPACK_OBJECT_NIL) continue;
      rn_lua_pushvalue(L, &o->via.map.ptr[i].key, NULL);
      rn_lua_pushvalue(L, &o->via.map.ptr[i].val, NULL);
      lua_rawset(L, -3);
    }
    return;
  default:
    lua_pushnil(L);
    return;
  }
}

void rn_lua_pushrow(lpipe *lp, lua_State *L, rn_rel *rel, const char *data, size_t len)
{
  if (!data) { lua_pushnil(L); return; }
  const rn_schema *s = rel->schema;
  const msgpack_object *vals = rn_row_unpack(data, len, s->ncols, &lp->zone);
  if (!vals) { msgpack_zone_clear(&lp->zone); lua_pushnil(L); return; }
  luaL_checkstack(L, 6, "row");
  rn_lua_relinfo(L, rel);
  lua_createtable(L, 0, s->ncols);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ((lrelinfo *)rel->udata)->names_ref);
  for (int i = 0; i < s->ncols; i++) {
    if (vals[i].type == MSGPACK_OBJECT_NIL) continue;
    lua_rawgeti(L, -1, i + 1);
    rn_lua_pushvalue(L, &vals[i], &s->cols[i]);
    lua_rawset(L, -4);
  }
  lua_pop(L, 1);
  msgpack_zone_clear(&lp->zone);
}

/* ---- schemas ---- */

/* A column spec is { name = s, type = s, null = b, default = v|nil,
 * has_default = b, fields = {specs…}|nil }, already checked by runnel.lua. */
static int add_column(lpipe *lp, lua_State *L, rn_schema *s, int spec, const char *rel, rn_err *e)
{
  lua_getfield(L, spec, "name");
  size_t nlen;
  const char *name = lua_tolstring(L, -1, &nlen);
  lua_getfield(L, spec, "type");
  rn_type type = RN_T_ANY;
  rn_type_parse(lua_tostring(L, -1), &type);
  lua_getfield(L, spec, "null");
  bool nullable = lua_toboolean(L, -1);
  lua_getfield(L, spec, "fields");
  rn_schema *fields = NULL;
  if (lua_istable(L, -1)) {
    fields = rn_lua_toschema(lp, L, lua_gettop(L), 0, rel, e);
    if (!fields) { lua_pop(L, 4); return e->code; }
  }
  int slot = rn_schema_add(s, name, nlen, type, nullable, fields, e);
  lua_pop(L, 4);
  if (slot < 0) {
    rn_err_prefix(e, rel);
    return e->code;
  }
  lua_getfield(L, spec, "has_default");
  bool has_default = lua_toboolean(L, -1);
  lua_getfield(L, spec, "default");
  int rc = 0;
  if (has_default) {
    msgpack_object v;
    rc = rn_lua_tovalue(lp, L, -1, &s->cols[slot], &v, 0);
    if (rc) *e = lp->p->err;
    else rc = rn_schema_set_default(s, slot, &v, rel, e);
  }
  lua_pop(L, 2);
  return rc;
}

rn_schema *rn_lua_toschema(lpipe *lp, lua_State *L, int cols_idx, int key_idx,
                           const char *rel, rn_err *e)
{
  rn_schema *s = rn_schema_new();
  if (!s) { rn_err_set(e, RN_ENOMEM, "out of memory"); return NULL; }
  lua_Integer n = (lua_Integer)lua_rawlen(L, cols_idx);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, cols_idx, i);
    int rc = add_column(lp, L, s, lua_gettop(L), rel, e);
    lua_pop(L, 1);
    if (rc) {
      rn_schema_free(s);
      return NULL;
    }
  }
  if (key_idx) {
    int nkey = (int)lua_rawlen(L, key_idx);
    int slots[nkey ? nkey : 1];
    for (int i = 0; i < nkey; i++) {
      lua_rawgeti(L, key_idx, i + 1);
      size_t len;
      const char *name = lua_tolstring(L, -1, &len);
      slots[i] = rn_schema_slot(s, name, len);
      if (slots[i] < 0) {
        rn_err_set(e, RN_EINVAL, "%s: key column \"%s\" is not a declared column", rel, name);
        rn_suggest_append_column(e->msg, sizeof e->msg, s, name, len);
      }
      lua_pop(L, 1);
      if (slots[i] < 0) { rn_schema_free(s); return NULL; }
    }
    if (rn_schema_set_key(s, slots, nkey, rel, e)) { rn_schema_free(s); return NULL; }
  }
  return s;
}

bool rn_lua_toscalar(lua_State *L, int idx, int type, msgpack_object *out)
{
  return scalar_value(L, idx, type, out);
}
