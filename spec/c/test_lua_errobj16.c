/* test_lua_errobj16.c — a host's script (rn_run_lua_string) that raises an
 * error object: rn_errmsg says what its __tostring gives, as lua5.4 prints
 * it. Before, it said only "error". One whose __tostring raises, or none,
 * says its type as lua5.4 does; the group the script began is rolled
 * back either way. */
#include <string.h>

#include "check.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
static const char *const key[] = { "id" };

static rn_pipeline *open_temp(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  return p;
}

static void test_tostring_told(void)
{
  rn_pipeline *p = open_temp();
  rn_rel *t;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  int rc = rn_run_lua_string(p, NULL,
                             "p:begin()\n"
                             "p:relation('t'):insert{ id = 1 }\n"
                             "error(setmetatable({}, { __tostring = function() return 'custom told' end }))\n",
                             "=host");
  CHECK(rc == RN_ECALLBACK);
  CHECK(strstr(rn_errmsg(p), "custom told") != NULL);
  CHECK(rn_run_lua_string(p, NULL, "assert(not p:in_group()); assert(p:relation('t'):count() == 0)", "=after") == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_tostring_raising(void)
{
  rn_pipeline *p = open_temp();
  int rc = rn_run_lua_string(p, NULL, "error(setmetatable({}, { __tostring = function() error('no') end }))",
                             "=host");
  CHECK(rc == RN_ECALLBACK);
  CHECK(strcmp(rn_errmsg(p), "(error object is a table value)") == 0);
  CHECK(rn_run_lua_string(p, NULL, "error()", "=host") == RN_ECALLBACK);
  CHECK(strcmp(rn_errmsg(p), "(error object is a nil value)") == 0);
  CHECK(rn_run_lua_string(p, NULL, "error(42)", "=host") == RN_ECALLBACK);
  CHECK(strcmp(rn_errmsg(p), "42") == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_tostring_told);
  RUN(test_tostring_raising);
  return CHECK_REPORT();
}
