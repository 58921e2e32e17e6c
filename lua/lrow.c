/* lrow.c — the runnel.Row userdata: a stored row handed to a mapper or a
 * joiner without building a table. It decodes a column when it is read and
 * notes which columns were read (the join then skips a mapper whose columns
 * kept their bytes). The callback's context keeps the decoding state (an
 * lrow) and points it at the next call's row; each call gets a new small
 * lease of it (the Row Lua sees), so that once the call has returned,
 * reading a Row kept from it is an error (copy what you keep), even while
 * a later call reads another row. It is read-only.
 *
 *     row.name, row["@ID"]   the column's value; nil for null or no such column
 *     pairs(row)             name, value for each non-null column, in column order
 *     row.x = 1              error: rows given to callbacks are read-only */
#include <string.h>

#include "lbind.h"
#include "row.h"

#define RN_ROW_MT "runnel.Row"

/* One slot's bit in a read mask; slots from 63 on share bit 63. */
static uint64_t slot_bit(int slot) { return 1ULL << (slot < 63 ? slot : 63); }

/* A Row as Lua holds it: the lrow, kept alive by uservalue 1, and the
 * lrow's gen when it was made. */
typedef struct lease {
  lrow *r;
  uint64_t gen;
} lease;

static bool lease_valid(const lease *l) { return l->gen == l->r->gen && l->r->row; }

static lrow *torow(lua_State *L)
{
  const lease *l = lua_touserdata(L, 1); /* __metatable hides the metatable: only Rows reach here */
  if (!lease_valid(l)) luaL_error(L, "a row given to a callback can be read only during that call (copy what you keep)");
  return l->r;
}

/* The slot of the column named by the string at idx, or -1. */
static int slot_of(lua_State *L, lrow *r, int idx)
{
  if (lua_type(L, idx) != LUA_TSTRING) return -1;
  const lrelinfo *ri = r->rel->udata;
  const void *k = lua_topointer(L, idx);
  for (int i = 0; i < ri->ncols; i++) if (ri->keys[i] == k) return i; /* the very name string */
  lua_rawgeti(L, LUA_REGISTRYINDEX, ri->slots_ref);
  lua_pushvalue(L, idx);
  lua_rawget(L, -2);
  int slot = (int)lua_tointeger(L, -1) - 1;
  lua_pop(L, 2);
  return slot;
}

static uint64_t be(const unsigned char *p, int n)
{
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

/* Pushes the scalar encoded at p (n bytes: the whole value) as rn_lua_pushvalue
 * would, without decoding it into an object first; false for anything else
 * (lists, maps, structs, ints above INT64_MAX). */
static bool push_scalar(lua_State *L, const unsigned char *p, size_t n)
{
  unsigned char h = p[0];
  if (h <= 0x7f) { lua_pushinteger(L, h); return true; }
  if (h >= 0xe0) { lua_pushinteger(L, (int8_t)h); return true; }
  if ((h & 0xe0) == 0xa0) { lua_pushlstring(L, (const char *)p + 1, n - 1); return true; }
  switch (h) {
  case 0xc0: lua_pushnil(L); return true;
  case 0xc2: case 0xc3: lua_pushboolean(L, h == 0xc3); return true;
  case 0xcc: case 0xcd: case 0xce: lua_pushinteger(L, (lua_Integer)be(p + 1, (int)n - 1)); return true;
  case 0xcf: {
    uint64_t u = be(p + 1, 8);
    if (u > (uint64_t)INT64_MAX) return false;
    lua_pushinteger(L, (lua_Integer)u);
    return true;
  }
  case 0xd0: lua_pushinteger(L, (int8_t)p[1]); return true;
  case 0xd1: lua_pushinteger(L, (int16_t)be(p + 1, 2)); return true;
  case 0xd2: lua_pushinteger(L, (int32_t)be(p + 1, 4)); return true;
  case 0xd3: lua_pushinteger(L, (lua_Integer)be(p + 1, 8)); return true;
  case 0xcb: {
    uint64_t u = be(p + 1, 8);
    double d;
    memcpy(&d, &u, 8);
    lua_pushnumber(L, d);
    return true;
  }
  case 0xd9: case 0xc4: lua_pushlstring(L, (const char *)p + 2, n - 2); return true;
  case 0xda: case 0xc5: lua_pushlstring(L, (const char *)p + 3, n - 3); return true;
  case 0xdb: case 0xc6: lua_pushlstring(L, (const char *)p + 5, n - 5); return true;
  default: return false;
  }
}

/* Pushes the value of slot (nil for null); marks it read. */
static void push_slot(lua_State *L, lrow *r, int slot)
{
  r->read |= slot_bit(slot);
  if (!r->spans_ok) {
    if (rn_row_spans(r->row, r->len, r->ncols, r->ncols, r->spans) != 0)
      luaL_error(L, "%s: a stored row could not be decoded", r->rel->name);
    r->spans_ok = true;
  }
  const char *at = r->row + r->spans[slot];
  if (push_scalar(L, (const unsigned char *)at, r->spans[slot + 1] - r->spans[slot])) return;
  rn_lua_not_in_finalizer(L); /* the zone may hold a row being made (rn_lua_pushrow) */
  msgpack_object v;
  size_t off = 0;
  if (rn_unpack(r->row + r->spans[slot], r->spans[slot + 1] - r->spans[slot], &off, &r->lp->zone, &v) !=
      MSGPACK_UNPACK_SUCCESS) {
    msgpack_zone_clear(&r->lp->zone);
    luaL_error(L, "%s: a stored row could not be decoded", r->rel->name);
  }
  if (v.type == MSGPACK_OBJECT_NIL) lua_pushnil(L);
  else rn_lua_pushvalue(L, &v, &r->rel->schema->cols[slot]);
  msgpack_zone_clear(&r->lp->zone);
}

static int row_index(lua_State *L)
{
  lrow *r = torow(L);
  const void *key = lua_topointer(L, 2); /* the name string object itself, when it is one (short strings
                                            are interned): one API call, no type check or table lookup */
  for (int i = 0; i < r->ncols; i++)
    if (r->names[i] == key) { push_slot(L, r, i); return 1; }
  int slot = slot_of(L, r, 2);
  if (slot < 0) lua_pushnil(L);
  else push_slot(L, r, slot);
  return 1;
}

static int row_newindex(lua_State *L)
{
  lrow *r = torow(L);
  return luaL_error(L, "%s: rows given to callbacks are read-only (build a table for the row you return)",
                    r->rel->name);
}

/* next(row, name) for pairs: the next non-null column after name. */
static int row_next(lua_State *L)
{
  lrow *r = torow(L);
  int slot = lua_isnil(L, 2) ? -1 : slot_of(L, r, 2);
  if (!lua_isnil(L, 2) && slot < 0) return luaL_error(L, "%s: invalid key to 'next'", r->rel->name);
  const lrelinfo *ri = r->rel->udata;
  for (slot++; slot < r->ncols; slot++) {
    push_slot(L, r, slot);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); continue; }
    lua_rawgeti(L, LUA_REGISTRYINDEX, ri->names_ref);
    lua_rawgeti(L, -1, slot + 1);
    lua_replace(L, -2);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushnil(L);
  return 1;
}

static int row_pairs(lua_State *L)
{
  lrow *r = torow(L);
  r->read = ~0ULL; /* every column is seen */
  lua_pushcfunction(L, row_next);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

static int row_tostring(lua_State *L)
{
  const lease *l = lua_touserdata(L, 1);
  lua_pushfstring(L, lease_valid(l) ? "row of %s" : "row of %s (its call has returned)", l->r->rel_name);
  return 1;
}

/* Pushes a new Row of r (at idx), valid for r's current lending. */
static void push_lease(lua_State *L, int idx, lrow *r)
{
  idx = lua_absindex(L, idx);
  lease *l = lua_newuserdatauv(L, sizeof *l, 1);
  l->r = r;
  l->gen = r->gen;
  luaL_setmetatable(L, RN_ROW_MT); /* made with the first lrow (rn_lua_newrow) */
  lua_pushvalue(L, idx);
  lua_setiuservalue(L, -2, 1); /* keeps the lrow alive: a kept Row may outlive the callback */
}

lrow *rn_lua_newrow(lua_State *L, lpipe *lp, rn_rel *rel)
{
  rn_lua_relinfo(L, rel);
  int ncols = rel->schema->ncols;
  size_t name_len = strlen(rel->name);
  lrow *r = lua_newuserdatauv(L, sizeof *r + (sizeof r->spans[0] + sizeof *r->names) * (size_t)(ncols + 1) +
                                   name_len + 1, 0);
  r->names = (const void **)(r->spans + ncols + 1);
  r->rel_name = memcpy(r->names + ncols + 1, rel->name, name_len + 1);
  /* the relinfo's name objects, copied: a Row may outlive rel (and them,
   * though it reads them only while lent, while rel lives) */
  memcpy(r->names, ((const lrelinfo *)rel->udata)->keys, sizeof *r->names * (size_t)ncols);
  r->lp = lp;
  r->rel = rel;
  r->row = NULL;
  r->len = 0;
  r->gen = 0;
  r->read = 0;
  r->ncols = ncols;
  r->spans_ok = false;
  if (luaL_newmetatable(L, RN_ROW_MT)) {
    static const luaL_Reg mt[] = {
      { "__index", row_index }, { "__newindex", row_newindex }, { "__pairs", row_pairs },
      { "__tostring", row_tostring }, { NULL, NULL }
    };
    luaL_setfuncs(L, mt, 0);
    lua_pushliteral(L, RN_ROW_MT);
    lua_setfield(L, -2, "__metatable");
  }
  lua_pop(L, 1); /* the lrow itself has none: only its Rows are rows */
  push_lease(L, -1, r);
  lua_remove(L, -2);
  return r;
}

void rn_lua_row_lend(lrow *r, const char *row, size_t len)
{
  r->row = row;
  r->len = len;
  r->gen++;
  r->read = 0;
  r->spans_ok = false;
}

void rn_lua_row_renew(lua_State *L, int idx)
{
  lease *l = lua_touserdata(L, idx);
  l->gen = l->r->gen;
}

void rn_lua_lease(lua_State *L)
{
  const lease *kept = lua_touserdata(L, -1);
  lease *l = lua_newuserdatauv(L, sizeof *l, 1);
  l->r = kept->r;
  l->gen = kept->r->gen;
  lua_getmetatable(L, -2);
  lua_setmetatable(L, -2);
  lua_rotate(L, -2, 1);
  lua_setiuservalue(L, -2, 1); /* the Row it came from keeps the lrow alive */
}

/* A Row at idx (or NULL): rows returned by callbacks are read from it. */
lrow *rn_lua_testrow(lua_State *L, int idx, bool *stale)
{
  const lease *l = luaL_testudata(L, idx, RN_ROW_MT);
  *stale = l && !lease_valid(l);
  return l && !*stale ? l->r : NULL;
}
