/* ace0ea3 made rn_attach check the state's format (rn_upgrade_readable,
 * upgrade.c). Its check returned e->code, so it took an error the caller's
 * rn_err still held from an earlier call for its own: an attach of a
 * whole state after any failed call with the same rn_err failed with that
 * old error (test_envs_edges's and test_fork's attaches after a refused
 * one failed so). The check's result is now its own, whatever e held. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "pipeline.h"
#include "store_sink.h"

static void make_state(char *dir, size_t size)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, size, "%s/att29RD-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p = NULL;
  char err[256] = "";
  CHECK(rn_pipeline_open(&opts, &p, err, sizeof err) == 0);
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &p->err);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "t", &p->err);
  rn_rel *t;
  CHECK(rn_declare_source(p, "t", RN_REL_TABLE, s, &t) == 0);
  unsigned char row[5] = { 0x81, 0xa2, 'i', 'd', 7 }; /* {"id": 7} */
  CHECK(rn_insert(p, t, row, sizeof row) == 0);
  rn_pipeline_close(p);
}

static void test_attach_after_an_earlier_error(void)
{
  char dir[300], cmd[320];
  make_state(dir, sizeof dir);
  rn_err e;
  rn_err_clear(&e);
  rn_err_set(&e, RN_EIO, "an earlier call's failure");
  rn_attached *a = NULL;
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0 && a);
  if (a) rn_attach_close(a);
  a = NULL;
  rn_err_set(&e, RN_EIO, "an earlier call's failure");
  CHECK(rn_attach(dir, "nope", NULL, &a, &e) == RN_ENOTFOUND && !a);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_attach_after_an_earlier_error);
  return CHECK_REPORT();
}
