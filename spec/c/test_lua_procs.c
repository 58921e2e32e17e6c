/* test_lua_procs.c — Lua handles across threads and processes.
 * One lua_State driven from two threads (a host that moves its Lua state
 * between worker threads, one at a time): a state a pipeline of the
 * process writes is read only in that pipeline's thread (runnel.h),
 * whichever way the read comes: runnel.attach, an attach's get and rows,
 * a lookup whose source is an attach. A forked child's use of the
 * pipelines and attaches it inherited is refused; closing and collecting
 * them is harmless to the parent (store.h, rn_store_forked). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

void rn_lua_preload(lua_State *L); /* lembed.c: the embedded modules, for require */

#define REFUSED "written by this process in another thread"

/* Declared in the main thread, through a host pipeline (p, a temporary
 * state): prices opened by Lua (so runnel.attach finds it among the
 * Lua state's own pipelines), an attach of it, and a lookup reading it. */
static const char *const DECLARE =
  "runnel = require('runnel')\n"
  "prices = runnel.open(dir)\n"
  "local t = prices:table('prices', { {'sku','string'}, {'price','float'}, key = 'sku' })\n"
  "t:insert{ sku = 'a', price = 1.5 }\n"
  "att = runnel.attach(dir, 'prices')\n"
  "assert(att:get{ sku = 'a' }.price == 1.5)\n"
  "local lk = p:lookup('lk', { {'sku','string'}, {'price','float'}, key = 'sku',\n"
  "                            source = runnel.attach(dir, 'prices') })\n"
  "orders = p:stream('orders', { {'sku','string'} })\n"
  "seen = {}\n"
  "orders:join(lk, { on = 'sku' }):sink(function(verb, row) seen[#seen + 1] = row.price end)\n";

typedef struct run_in_thread {
  rn_pipeline *p;
  lua_State *L;
  const char *chunk;
  int rc;
  char msg[512];
} run_in_thread;

static void *run_chunk(void *arg)
{
  run_in_thread *r = arg;
  r->rc = rn_run_lua_string(r->p, r->L, r->chunk, "=other thread");
  snprintf(r->msg, sizeof r->msg, "%s", rn_errmsg(r->p));
  return NULL;
}

/* Runs chunk on p in a new thread, waits for it; its message in r->msg. */
static int in_another_thread(run_in_thread *r, const char *chunk)
{
  r->chunk = chunk;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, run_chunk, r) == 0);
  pthread_join(th, NULL);
  return r->rc;
}

static void test_reads_from_another_thread_are_refused(void)
{
  char dir[] = "/tmp/rn_lua_threads_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_pushstring(L, dir);
  lua_setglobal(L, "dir");
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_run_lua_string(p, L, DECLARE, "=declare") == 0);
  run_in_thread r = { .p = p, .L = L };
  /* the lookup's fetch: the group fails, naming why */
  CHECK(in_another_thread(&r, "orders:insert{ sku = 'a' }") == RN_ECALLBACK);
  CHECK(strstr(r.msg, REFUSED) != NULL);
  CHECK(in_another_thread(&r, "att:get{ sku = 'a' }") == RN_ECALLBACK);
  CHECK(strstr(r.msg, REFUSED) != NULL);
  CHECK(in_another_thread(&r, "for _ in att:rows() do end") == RN_ECALLBACK);
  CHECK(strstr(r.msg, REFUSED) != NULL);
  CHECK(in_another_thread(&r, "runnel.attach(dir, 'prices')") == RN_ECALLBACK);
  CHECK(strstr(r.msg, REFUSED) != NULL);
  /* the pipeline's own thread reads as before */
  CHECK(rn_run_lua_string(p, L, "orders:insert{ sku = 'a' } assert(seen[1] == 1.5 and #seen == 1)\n"
                                "assert(att:get{ sku = 'a' }.price == 1.5)", "=main") == 0);
  if (rn_errmsg(p)[0]) fprintf(stderr, "%s\n", rn_errmsg(p));
  CHECK(rn_run_lua_string(p, L, "att:close() prices:close()", "=close") == 0);
  CHECK(rn_pipeline_close(p) == 0);
  lua_close(L);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* Runs chunk in L; 0 when it raised an error holding want (NULL: when
 * it ran without one), else a step number. */
static int chunk_says(lua_State *L, const char *chunk, const char *want, int step)
{
  int rc = luaL_dostring(L, chunk);
  const char *msg = rc ? lua_tostring(L, -1) : NULL;
  if (msg) fprintf(stderr, "child: %s\n", msg);
  if (want ? !(msg && strstr(msg, want)) : rc != 0) return step;
  lua_settop(L, 0);
  return 0;
}

/* The child: uses refused, closes and collection harmless. */
static int lua_child(lua_State *L)
{
  int rc = chunk_says(L, "prices:relation('prices'):insert{ sku = 'b', price = 2 }", "before a fork", 1);
  if (!rc) rc = chunk_says(L, "t:get{ sku = 'a' }", "before a fork", 2);
  if (!rc) rc = chunk_says(L, "prices:begin()", "before a fork", 3);
  if (!rc) rc = chunk_says(L, "att:get{ sku = 'a' }", "before a fork; attach it again", 4);
  if (!rc) rc = chunk_says(L, "local a = runnel.attach(dir, 'prices') assert(a:get{ sku = 'a' }.price == 1.5) a:close()",
                           NULL, 5); /* its own, beside the parent's writer */
  if (!rc) rc = chunk_says(L, "prices:close() tmp = nil t = nil att = nil collectgarbage()", NULL, 6);
  return rc;
}

/* A forked child with a Lua state holding a pipeline (a carried group in
 * it), a temporary one and an attach: the parent's state, temporary
 * directory and locks stay as they were. */
static void test_forked_child(void)
{
  char dir[] = "/tmp/rn_lua_procs_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  rn_lua_preload(L);
  lua_pushstring(L, dir);
  lua_setglobal(L, "dir");
  CHECK(luaL_dostring(L,
    "runnel = require('runnel')\n"
    "prices = runnel.open{ path = dir, sync = false }\n"
    "t = prices:table('prices', { {'sku','string'}, {'price','float'}, key = 'sku' })\n"
    "t:insert{ sku = 'a', price = 1.5 } prices:flush() t:insert{ sku = 'c', price = 3 }\n"
    "tmp = runnel.open() tmp_path = tostring(tmp):match('%((.-),')\n"
    "tmp:table('x', { {'k','int'}, key = 'k' }):insert{ k = 1 }\n"
    "att = runnel.attach(dir, 'prices')") == LUA_OK);
  lua_getglobal(L, "tmp_path");
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  /* the child's result comes through a pipe, not its exit status: it
   * leaves the parent's transactions and its Lua state unfreed on purpose,
   * which valgrind (make valgrind) counts as leaks in the child's status */
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    unsigned char step = (unsigned char)lua_child(L);
    _exit(write(fds[1], &step, 1) == 1 ? 0 : 1);
  }
  close(fds[1]);
  unsigned char step = 0xff;
  CHECK(read(fds[0], &step, 1) == 1 && step == 0);
  close(fds[0]);
  waitpid(pid, NULL, 0);
  struct stat st;
  CHECK(stat(tmp, &st) == 0);
  CHECK(luaL_dostring(L, "t:insert{ sku = 'd', price = 4 } prices:flush()\n"
                         "assert(att:count() == 3 and t:count() == 3 and tmp:relation('x'):count() == 1)\n"
                         "att:close() prices:close() tmp:close()") == LUA_OK);
  if (lua_gettop(L)) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  CHECK(stat(tmp, &st) != 0);
  lua_close(L);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_reads_from_another_thread_are_refused);
  RUN(test_forked_child);
  return CHECK_REPORT();
}
