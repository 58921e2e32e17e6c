/* test_host_close_edges28.c — p:close() in a script a host runs on its
 * own pipeline (rn_run_lua_string). The pipeline is the host's, so
 * p:close() outside callbacks lets go of it and leaves it open; from
 * inside a callback it is refused as any pipeline's is ("close: not from
 * inside a callback", README). Until 0.40 it did nothing there: the sink
 * went on as if it had closed the pipeline. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "runnel.h"

static void test_close_from_a_sink_of_a_host_pipeline_is_refused(void)
{
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  int rc = rn_run_lua_string(p, L,
                             "t = p:table('t', { {'id','int'}, key = 'id' })\n"
                             "t:sink(function() local ok, err = pcall(p.close, p); closed = { ok, err } end)\n"
                             "t:insert{ id = 1 }\n"
                             "assert(closed[1] == false, 'p:close() from a sink was not refused')\n"
                             "assert(tostring(closed[2]):find('close: not from inside a callback', 1, true), closed[2])\n"
                             "t:insert{ id = 2 }\n"
                             "p:close()\n", /* outside callbacks: lets go, the host's pipeline stays open */
                             "=host");
  if (rc) fprintf(stderr, "  %s\n", rn_errmsg(p));
  CHECK(rc == 0);
  CHECK(rn_run_lua_string(p, L, "assert(t:count() == 2)", "=after") == 0);
  CHECK(rn_pipeline_close(p) == 0);
  lua_close(L);
}

int main(void)
{
  RUN(test_close_from_a_sink_of_a_host_pipeline_is_refused);
  return CHECK_REPORT();
}
