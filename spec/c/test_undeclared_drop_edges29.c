/* test_undeclared_drop_edges29.c — rn_undeclared's callback may drop the
 * relations it is not told of yet. The walk reads the catalogue before the
 * first call; until 0.41 it then told of every name it had read, so a
 * callback that dropped "b" when told of "a" was told of "b" after the
 * state no longer held it (and a host's rn_drop of it failed with
 * RN_ENOTFOUND). Uses runnel.h only. */
#include <stdio.h>
#include <string.h>

#include "host_fixture.h"

typedef struct seen {
  rn_pipeline *p;
  char names[256];
  int drop_rc;
} seen;

/* Told of "a": drops "b" and "c" as a host clearing old relations would. */
static int drop_later(void *ctx, const char *name, const char *kind)
{
  seen *s = ctx;
  (void)kind;
  strcat(s->names, name);
  strcat(s->names, " ");
  if (strcmp(name, "a") == 0) s->drop_rc = rn_drop(s->p, "b") | rn_drop(s->p, "c");
  return 0;
}

static int just_list(void *ctx, const char *name, const char *kind)
{
  seen *s = ctx;
  (void)kind;
  strcat(s->names, name);
  strcat(s->names, " ");
  return 0;
}

static void test_a_relation_dropped_by_the_callback_is_not_told_of(void)
{
  static const rn_column_def cols[] = { { .name = "id", .type = "int" } };
  static const char *const key[] = { "id" };
  host h;
  host_open(&h, cols, 1, -1);
  const char *names[] = { "a", "b", "c", "d" };
  rn_rel *r;
  for (int i = 0; i < 4; i++) CHECK(rn_declare_table(h.p, names[i], cols, 1, key, 1, &r) == 0);
  CHECK(rn_pipeline_close(h.p) == 0);
  char err[512] = "";
  CHECK(rn_pipeline_open(&h.opts, &h.p, err, sizeof err) == 0);
  CHECK(rn_declare_table(h.p, "t", cols, 1, key, 1, &h.t) == 0);

  seen s = { .p = h.p };
  CHECK(rn_undeclared(h.p, drop_later, &s) == 0);
  if (strcmp(s.names, "a d ")) fprintf(stderr, "  told of: %s\n", s.names);
  CHECK(strcmp(s.names, "a d ") == 0);
  CHECK(s.drop_rc == 0);

  seen after = { .p = h.p };
  CHECK(rn_undeclared(h.p, just_list, &after) == 0);
  CHECK(strcmp(after.names, "a d ") == 0);
  host_close(&h);
}

int main(void)
{
  RUN(test_a_relation_dropped_by_the_callback_is_not_told_of);
  return CHECK_REPORT();
}
