/* ace0ea3 made rn_attach check the state's format (rn_upgrade_readable,
 * upgrade.c). Its check returned e->code, so it took an error the caller's
 * rn_err still held from an earlier call for its own: an attach of a
 * whole state after any failed call with the same rn_err failed with that
 * old error (test_envs_edges's and test_fork's attaches after a refused
 * one failed so). The check's result is now its own, whatever e held. */
#include <stdio.h>
#include <stdlib.h>

#include "small_state_fixture.h"
#include "store_sink.h"

static void test_attach_after_an_earlier_error(void)
{
  char dir[300], cmd[320];
  small_state(dir, sizeof dir, "att29RD", 1);
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
