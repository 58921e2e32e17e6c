/* lembed.c — Lua inside a host: rn_run_lua and the embedded modules.
 *
 * A host's pipeline is wrapped in a borrowed runnel.Pipeline: Lua may use it
 * but not close it. The wrapper is anchored in the registry until the host
 * closes the pipeline; then rn_pipeline_close calls back (on_close), the
 * wrapper lets go, and a lua_State runnel created itself is closed. */
#include <lauxlib.h>
#include <lualib.h>
#include <string.h>

#include "lbind.h"
#include "notes.h"

typedef struct { const char *name, *chunk; const char *src; size_t len; } rn_embedded_module;
extern const rn_embedded_module rn_embedded[];

static int embedded_loader(lua_State *L)
{
  const rn_embedded_module *m = lua_touserdata(L, lua_upvalueindex(1));
  if (luaL_loadbuffer(L, m->src, m->len, m->chunk) != LUA_OK) return lua_error(L);
  lua_pushstring(L, m->name);
  lua_call(L, 1, 1);
  return 1;
}

int luaopen_runnel_core(lua_State *L);

void rn_lua_preload(lua_State *L)
{
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_runnel_core);
  lua_setfield(L, -2, "runnel.core");
  for (const rn_embedded_module *m = rn_embedded; m->name; m++) {
    lua_pushlightuserdata(L, (void *)m);
    lua_pushcclosure(L, embedded_loader, 1);
    lua_setfield(L, -2, m->name);
  }
  lua_pop(L, 1);
}

typedef struct host_link {
  int anchor;             /* registry ref of the wrapper */
  lua_State *owned;       /* a state runnel created, closed with the pipeline */
} host_link;

/* rn_pipeline_close's last call: the pipeline is gone. */
static void host_closed(void *ctx)
{
  lpipe *lp = ctx;
  lua_State *L = lp->L, *owned = lp->host->owned;
  int anchor = lp->host->anchor;
  rn_lua_detach(lp);
  lp->host = NULL;
  if (owned) lua_close(owned);
  else luaL_unref(L, LUA_REGISTRYINDEX, anchor);
}

/* Pushes the borrowed wrapper of p in L, creating it the first time. */
static int push_wrapper(rn_pipeline *p, lua_State *L, bool owned)
{
  lpipe *lp = p->binding;
  if (lp && lp->host) {
    if (lp->L != L && !owned)
      return rn_err_set(&p->err, RN_EMISUSE, "rn_run_lua: this pipeline already runs Lua in another lua_State");
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->host->anchor);
    return 0;
  }
  if (lp) return rn_err_set(&p->err, RN_EMISUSE, "rn_run_lua: this pipeline belongs to a Lua script");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runnel");
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    rn_err_set_with(&p->err, RN_ECALLBACK, lua_tostring(L, -1), "loading runnel: ");
    lua_pop(L, 1);
    return p->err.code;
  }
  lp = lua_newuserdatauv(L, sizeof *lp + sizeof(host_link), 1);
  memset(lp, 0, sizeof *lp);
  if (!msgpack_zone_init(&lp->zone, 4096)) { /* before the metatable: nothing to close */
    lua_pop(L, 1);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  luaL_setmetatable(L, RN_PIPELINE_MT);
  lp->p = p;
  lp->L = L;
  lp->borrowed = true;
  lp->clock_ref = LUA_NOREF;
  lp->host = (host_link *)(lp + 1);
  lp->host->owned = owned ? L : NULL;
  lua_pushvalue(L, -1);
  lp->host->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
  p->binding = lp;
  p->on_close = host_closed;
  return 0;
}

typedef struct prepare_call {
  rn_pipeline *p;
  bool owned;             /* L is runnel's */
  bool fresh;             /* … and new: its libraries are not open yet */
  int rc;                 /* push_wrapper's */
} prepare_call;

/* Opens a new state's libraries, preloads the embedded modules and pushes
 * the pipeline's wrapper, also as the global p. Under lua_pcall: each step
 * allocates, and an allocation failing outside it would abort the host. */
static int prepare_body(lua_State *L)
{
  prepare_call *c = lua_touserdata(L, 1);
  lua_pop(L, 1);
  if (c->fresh) luaL_openlibs(L);
  rn_lua_preload(L);
  if ((c->rc = push_wrapper(c->p, L, c->owned))) return 0;
  lua_pushvalue(L, -1);
  lua_setglobal(L, "p");
  return 1;
}

static int run(rn_pipeline *p, lua_State *L, const char *path, const char *chunk, const char *name)
{
  rn_err_clear(&p->err);
  if (p->state == RN_APPLYING || p->state == RN_COMMITTING)
    return rn_err_set(&p->err, RN_EMISUSE, "rn_run_lua: not from inside a callback");
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "rn_run_lua: not inside a group");
  bool owned = !L, fresh = false;
  if (owned) {
    lpipe *lp = p->binding;
    if (lp && lp->host && !lp->host->owned) /* the host's own state: runnel's could not reach its relations */
      return rn_err_set(&p->err, RN_EMISUSE, "rn_run_lua: this pipeline already runs Lua in another lua_State");
    if (lp && lp->host && lp->host->owned) L = lp->host->owned; /* a second script: the same state */
    else if (!(L = luaL_newstate())) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    else fresh = true;
  }
  int top = lua_gettop(L);
  prepare_call c = { p, owned, fresh, 0 };
  lua_pushcfunction(L, prepare_body);
  lua_pushlightuserdata(L, &c);
  int st = lua_pcall(L, 1, 1, 0);
  int rc = st == LUA_OK ? c.rc
         : rn_err_set_with(&p->err, st == LUA_ERRMEM ? RN_ENOMEM : RN_ECALLBACK,
                           lua_tostring(L, -1) ? lua_tostring(L, -1) : "error", "rn_run_lua: ");
  if (rc) {
    lua_settop(L, top);
    if (owned && !(p->binding && ((lpipe *)p->binding)->host)) lua_close(L);
    return rc;
  }
  st = path ? luaL_loadfile(L, path) : luaL_loadbuffer(L, chunk, strlen(chunk), name);
  if (st != LUA_OK) {
    rc = rn_err_set(&p->err, st == LUA_ERRFILE ? RN_EIO : st == LUA_ERRMEM ? RN_ENOMEM : RN_ECALLBACK, "%s",
                    lua_tostring(L, -1)); /* luaL_loadfile's message: a path or a chunk's line, one line */
  } else {
    lua_insert(L, -2); /* the chunk, then the pipeline as its argument */
    ((lpipe *)p->binding)->L = L;
    if ((st = lua_pcall(L, 1, 0, 0)) != LUA_OK) {
      const char *msg = rn_lua_errtext(L); /* an error object's __tostring: lua5.4 prints it too */
      int code = st == LUA_ERRMEM ? RN_ENOMEM : RN_ECALLBACK;
      rc = msg ? rn_err_keep(&p->err, code, msg)
               : rn_err_set(&p->err, code, "(error object is a %s value)", luaL_typename(L, -1));
      /* A group it began (none was open before it ran) goes with it: the
       * host's next rn_commit must not commit what a failed script left. */
      if (p->state == RN_OPEN) {
        rn_err saved = p->err;
        rn_rollback(p);
        p->err = saved;
      }
    }
    /* The host's next push runs Lua callbacks on lp->L: the script may have
     * left it at a coroutine, since ended and freed, or suspended. */
    ((lpipe *)p->binding)->L = L;
  }
  lua_settop(L, top);
  return rc;
}

RN_API int rn_run_lua(rn_pipeline *p, lua_State *L, const char *path)
{
  if (!p) return RN_EINVAL;
  if (!path) return rn_err_set(&p->err, RN_EINVAL, "rn_run_lua: the path is NULL");
  if (!*path) return rn_err_set(&p->err, RN_EINVAL, "rn_run_lua: the path is empty");
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */

  int rc = run(p, L, path, NULL, NULL);
  if (!rc) rn_err_clear(&p->err); /* calls the script caught are not its message */
  rn_notes_tell(p); /* those of its declarations the binding did not tell yet */
  return rc;
}

RN_API int rn_run_lua_string(rn_pipeline *p, lua_State *L, const char *chunk, const char *name)
{
  if (!p) return RN_EINVAL;
  if (!chunk) return rn_err_set(&p->err, RN_EINVAL, "rn_run_lua_string: the chunk is NULL");
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */

  int rc = run(p, L, NULL, chunk, name ? name : "=chunk");
  if (!rc) rn_err_clear(&p->err); /* calls the script caught are not its message */
  rn_notes_tell(p); /* those of its declarations the binding did not tell yet */
  return rc;
}
