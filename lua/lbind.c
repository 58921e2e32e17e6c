/* lbind.c — what every file of the binding shares (lbind.h): where an
 * error points, raising, checking and pushing pipelines and relations,
 * the per-relation names, running Lua under protection from the core, and
 * the end of a declaration. It calls no other file of the binding. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lbind.h"
#include "evolve_reads.h"

/* ---- errors at the user's line ---- */

void rn_lua_where(lua_State *L)
{
  lua_getfield(L, LUA_REGISTRYINDEX, RN_DSL_SOURCE); /* { [chunk name] = true } */
  bool dsl = lua_istable(L, -1);
  lua_Debug ar;
  int level = 1;
  for (; lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar) && dsl; level++) {
    bool ours = lua_getfield(L, -1, ar.source) != LUA_TNIL;
    lua_pop(L, 1);
    if (!ours) break;
  }
  lua_pop(L, 1);
  if (lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
  else
    lua_pushliteral(L, ""); /* called from C (pcall, a host), as luaL_where says */
}

/* Replaces the string at the top with a copy whose control bytes are
 * escaped as core messages have them (rn_err_escape): a declared name
 * holding a newline prints "\n", as one the input gave does. */
static void escape_top(lua_State *L)
{
  size_t len;
  const char *s = lua_tolstring(L, -1, &len);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (size_t i = 0; i < len; i++) {
    char esc[7];
    size_t n = rn_err_escape((unsigned char)s[i], esc);
    if (n) luaL_addlstring(&b, esc, n);
    else luaL_addchar(&b, s[i]);
  }
  luaL_pushresult(&b);
  lua_remove(L, -2);
}

int rn_lua_error(lua_State *L, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  rn_lua_where(L);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  escape_top(L);
  lua_concat(L, 2);
  return lua_error(L);
}

int rn_lua_error_as_is(lua_State *L, const char *msg)
{
  rn_lua_where(L);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

/* A string C takes whole: not empty, no NUL (C would cut it there). word:
 * "name" or "path", as the messages say it; the_word: it as an empty one
 * is said ("a name", "the path"). */
static const char *check_text(lua_State *L, int idx, const char *what, const char *word, const char *the_word)
{
  size_t len;
  const char *name = luaL_checklstring(L, idx, &len);
  if (len == 0) rn_lua_error(L, "%s: %s must not be empty", what, the_word);
  if (memchr(name, '\0', len)) {
    luaL_Buffer b; /* the name with its NUL bytes shown as \0 */
    luaL_buffinit(L, &b);
    for (size_t i = 0; i < len; i++) {
      if (name[i]) luaL_addchar(&b, name[i]);
      else luaL_addstring(&b, "\\0");
    }
    luaL_pushresult(&b);
    rn_lua_error(L, "%s: the %s \"%s\" holds a NUL byte (%ss hold none)", what, word, lua_tostring(L, -1), word);
  }
  return name;
}

const char *rn_lua_checkname(lua_State *L, int idx, const char *what) { return check_text(L, idx, what, "name", "a name"); }
const char *rn_lua_checkpath(lua_State *L, int idx, const char *what) { return check_text(L, idx, what, "path", "the path"); }

int rn_lua_raise(lua_State *L, lpipe *lp)
{
  return rn_lua_error_as_is(L, lp->p ? rn_errmsg(lp->p) : "runnel: the pipeline is closed");
}

int rn_lua_fail(lua_State *L, lpipe *lp)
{
  rn_group_fail(lp->p, lp->p->err.code ? lp->p->err.code : RN_EINVAL, lp->p->err.msg);
  return rn_lua_raise(L, lp);
}

/* ---- pipelines and relations ---- */

void rn_lua_not_in_finalizer(lua_State *L)
{
  if (lua_gc(L, LUA_GCISRUNNING) < 0)
    rn_lua_error(L, "runnel: not from a finalizer (__gc): it may run in the middle of a runnel call");
}

/* A pipeline a forked child inherited is not the child's to use (store.h,
 * rn_store_forked); closing or collecting it is harmless. */
static void not_forked(lua_State *L, lpipe *lp)
{
  rn_err e = { .code = RN_OK };
  if (rn_store_forked(&lp->p->store, &e)) rn_lua_error(L, "runnel: %s", e.msg);
}

/* The userdata of metatable tname at idx; a method called with another
 * self (t.insert{…} for t:insert{…}) is told so, as runnel.lua tells it. */
static void *check_self(lua_State *L, int idx, const char *tname, const char *what)
{
  void *u = luaL_testudata(L, idx, tname);
  if (u || idx != 1) return u ? u : luaL_checkudata(L, idx, tname);
  lua_Debug ar;
  const char *name = lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) ? ar.name : NULL;
  if (!name || strcmp(name, "?") == 0) /* called through an expression (t[m]{…}): no name to give */
    rn_lua_error(L, "expects a %s as self (call its methods as x:method(…)), got %s", what, luaL_typename(L, idx));
  rn_lua_error(L, "%s: expects a %s as self (call it as x:%s(…)), got %s", name, what, name, luaL_typename(L, idx));
  return NULL;
}

lpipe *rn_lua_checkpipe(lua_State *L, int idx)
{
  lpipe *lp = check_self(L, idx, RN_PIPELINE_MT, "runnel.Pipeline");
  if (!lp->p) rn_lua_error(L, "runnel: the pipeline is closed");
  rn_lua_not_in_finalizer(L);
  not_forked(L, lp);
  lp->L = L;
  return lp;
}

static void free_relinfo(void *ctx)
{
  lrelinfo *ri = ctx;
  luaL_unref(ri->lp->L, LUA_REGISTRYINDEX, ri->names_ref);
  luaL_unref(ri->lp->L, LUA_REGISTRYINDEX, ri->slots_ref);
  free(ri);
}

/* Fills ri (index 1) for the relation at index 2: its names by slot and
 * slots by name, anchored in the registry. Every step may raise. */
static int relinfo_body(lua_State *L)
{
  lrelinfo *ri = lua_touserdata(L, 1);
  const rn_schema *s = ((rn_rel *)lua_touserdata(L, 2))->schema;
  lua_createtable(L, s->ncols, 0);
  lua_createtable(L, 0, s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    lua_pushlstring(L, s->cols[i].name, s->cols[i].name_len);
    ri->keys[i] = lua_topointer(L, -1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -4, i + 1);
    lua_pushinteger(L, i + 1);
    lua_rawset(L, -3);
  }
  ri->slots_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  ri->names_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

int rn_lua_relinfo(lua_State *L, rn_rel *rel)
{
  if (rel->udata) return 0;
  size_t n = (size_t)rel->schema->ncols;
  lrelinfo *ri = malloc(sizeof *ri + (sizeof *ri->keys + sizeof *ri->after) * n + sizeof *ri->after);
  if (!ri) return rn_lua_error(L, "out of memory");
  ri->lp = rel->p->binding;
  ri->ncols = rel->schema->ncols;
  ri->after = (int *)(ri->keys + n);
  memset(ri->after, 0, sizeof *ri->after * (n + 1));
  ri->slots_ref = ri->names_ref = LUA_NOREF;
  lua_pushcfunction(L, relinfo_body);
  lua_pushlightuserdata(L, ri);
  lua_pushlightuserdata(L, rel);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) { /* out of memory: ri would leak if it raised in place */
    luaL_unref(L, LUA_REGISTRYINDEX, ri->slots_ref);
    free(ri);
    return lua_error(L);
  }
  rel->udata = ri;
  rel->udata_free = free_relinfo;
  return 0;
}

/* Relation userdata are cached per pipeline (uservalue 1 of the pipeline,
 * a weak-valued table keyed by the core pointer) so one relation is always
 * one Lua value. */
void rn_lua_pushrel(lua_State *L, int pidx, rn_rel *rel)
{
  pidx = lua_absindex(L, pidx);
  if (lua_getiuservalue(L, pidx, 1) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, pidx, 1);
  }
  if (lua_rawgetp(L, -1, rel) == LUA_TUSERDATA) {
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  rn_lua_relinfo(L, rel); /* a relation declared from C meets Lua here first */
  lrel *r = lua_newuserdatauv(L, sizeof *r, 2);
  r->lp = lua_touserdata(L, pidx);
  r->rel = rel;
  luaL_setmetatable(L, RN_RELATION_MT);
  lua_pushvalue(L, pidx);
  lua_setiuservalue(L, -2, 1);
  lua_pushstring(L, rel->name); /* its name outlives the pipeline: errors after close say it */
  lua_setiuservalue(L, -2, 2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, -3, rel);
  lua_remove(L, -2);
}

lrel *rn_lua_checkrel(lua_State *L, int idx)
{
  lrel *r = check_self(L, idx, RN_RELATION_MT, "runnel.Relation");
  if (!r->lp->p) {
    lua_getiuservalue(L, idx, 2);
    rn_lua_error(L, "runnel: %s: the pipeline of this relation is closed", lua_tostring(L, -1));
  }
  rn_lua_not_in_finalizer(L);
  not_forked(L, r->lp);
  r->lp->L = L;
  return r;
}

lrel *rn_lua_checkrel_of(lua_State *L, int idx, lpipe *lp)
{
  lrel *r = rn_lua_checkrel(L, idx);
  if (r->lp != lp) rn_lua_error(L, "%s belongs to a different pipeline", r->rel->name);
  lp->L = L;
  return r;
}

int rn_lua_declared(lua_State *L, lpipe *lp, int rc, rn_rel *rel)
{
  if (rc) return rn_lua_nil_error(L, rn_errmsg(lp->p));
  rn_lua_relinfo(L, rel);
  rn_lua_pushrel(L, 1, rel);
  return 1;
}

/* ---- Lua under protection ---- */

typedef struct protected_call {
  rn_lua_body body;
  void *ud;
  rn_err *e;
  int rc;
} protected_call;


static int run_body(lua_State *L)
{
  protected_call *pc = lua_touserdata(L, 1);
  pc->rc = pc->body(L, pc->ud, pc->e);
  return 0;
}

/* Is what (rn_lua_pcall's) a derived relation's own function, whose
 * reads are its dependencies? Sinks, sources and clocks are not. */
static bool relation_fn(const char *what)
{
  switch (what[0]) { /* one comparison per call: it runs before every joiner and mapper call */
  case 'f': return strcmp(what, "filter") == 0;
  case 'm': return strcmp(what, "map") == 0 || strcmp(what, "mapper") == 0;
  case 's': return strcmp(what, "selector") == 0;
  case 'j': return strcmp(what, "joiner") == 0;
  case 'a': return strncmp(what, "aggregate ", 10) == 0;
  default: return false;
  }
}

void rn_lua_note_read(lua_State *L, lpipe *lp, const rn_rel *rel)
{
  if (!lp->fn_rel || !lp->p || (lp->noted_by == lp->fn_rel && lp->noted_of == rel)) return;
  if (rn_reads_note(lp->p, lp->fn_rel, rel)) rn_lua_raise(L, lp);
  lp->noted_by = lp->fn_rel;
  lp->noted_of = rel;
}

const char *rn_lua_errtext(lua_State *L)
{
  int t = lua_type(L, -1);
  if (t == LUA_TSTRING || t == LUA_TNUMBER) return lua_tostring(L, -1);
  /* An error object (a library's) says what went wrong through __tostring,
   * as lua5.4 prints it. It may raise or allocate: under lua_pcall, which
   * leaves one value (the text, or an error) on the stack. */
  if (!lua_checkstack(L, 3) || luaL_getmetafield(L, -1, "__tostring") == LUA_TNIL) return NULL;
  lua_pushvalue(L, -2);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) {
    lua_replace(L, -2);
    return lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  return NULL;
}

int rn_lua_pcall(lpipe *lp, lua_State *L, int nargs, int nresults, const char *rel, const char *what, rn_err *e)
{
  const char *outer = lp->fn_rel;
  lp->fn_rel = rel && what && relation_fn(what) ? rel : NULL;
  lp->depth++;
  int st = lua_pcall(L, nargs, nresults, 0);
  const char *msg = st == LUA_OK ? NULL : rn_lua_errtext(L); /* a __tostring runs as the callback's part */
  lp->depth--;
  lp->fn_rel = outer;
  lp->L = L; /* the thread that called into runnel */
  if (st == LUA_OK) return 0;
  if (!msg) msg = luaL_typename(L, -1);
  int code = e->code != RN_OK && strstr(msg, e->msg) ? e->code     /* a runnel error raised inside keeps its code */
             : st == LUA_ERRMEM ? RN_ENOMEM : RN_ECALLBACK;
  rn_err_set_with(e, code, msg, "%s%s%s: ", rel ? rel : "", rel ? ": " : "", what); /* msg as the callback said it */
  lua_pop(L, 1);
  return e->code;
}

int rn_lua_protect_on(lpipe *lp, lua_State *L, int nargs, rn_lua_body body, void *ud, const char *rel,
                      const char *what, rn_err *e)
{
  protected_call pc = { body, ud, e, 0 };
  if (!lua_checkstack(L, 2)) /* the arguments may be results that filled the stack */
    return rn_err_set(e, RN_ENOMEM, "%s%s%s: out of memory (Lua stack)", rel ? rel : "", rel ? ": " : "", what);
  lua_pushcfunction(L, run_body);
  lua_pushlightuserdata(L, &pc);
  lua_rotate(L, -(nargs + 2), 2); /* below the arguments */
  int rc = rn_lua_pcall(lp, L, nargs + 1, 0, rel, what, e);
  return rc ? rc : pc.rc;
}

int rn_lua_protect(lpipe *lp, lua_State *L, rn_lua_body body, void *ud, const char *rel, const char *what,
                   rn_err *e)
{
  return rn_lua_protect_on(lp, L, 0, body, ud, rel, what, e);
}

/* ---- the collector ---- */

/* The minor multiplier: a young collection once the heap has grown by 5% of
 * itself (Lua's default 20%). A program holding 400 MB otherwise carried up
 * to 80 MB of a joiner's garbage; the collections it adds cost nothing
 * measurable (fkjoin --mapper, 121,000 changes); 2% cost about 1%. */
#define RN_GC_MINORMUL 5

void rn_lua_gc_default(lua_State *L)
{
  if (!lua_gc(L, LUA_GCISRUNNING)) return;
  int pause = lua_gc(L, LUA_GCSETPAUSE, 200), stepmul = lua_gc(L, LUA_GCSETSTEPMUL, 100); /* read them */
  lua_gc(L, LUA_GCSETPAUSE, pause);
  lua_gc(L, LUA_GCSETSTEPMUL, stepmul);
  if (pause != 200 || stepmul != 100) return; /* Lua's defaults (LUAI_GCPAUSE, LUAI_GCMUL): 200, 100 */
  if (lua_gc(L, LUA_GCGEN, 0, 0) == LUA_GCGEN) return; /* 0, 0: its own multipliers stay */
  lua_gc(L, LUA_GCGEN, RN_GC_MINORMUL, 0);
  lua_gc(L, LUA_GCSTEP, 0); /* a young collection now: switching keeps the incremental mode's wait, and
                               the first young collection would come only once the heap had doubled */
}
