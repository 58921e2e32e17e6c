/* small_state_fixture.h — a closed state in a new temporary directory
 * holding table "t" (id int key) with rows 1..n, for the C tests of what
 * readers (inspect, verify, attach) make of a state on disk. */
#ifndef SMALL_STATE_FIXTURE_H
#define SMALL_STATE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "pipeline.h"

/* The state's directory into dir (size bytes), named after tag. */
static inline void small_state(char *dir, size_t size, const char *tag, int n)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
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
  for (int i = 1; i <= n; i++) {
    unsigned char row[5] = { 0x81, 0xa2, 'i', 'd', (unsigned char)i }; /* {"id": i}, i < 128 */
    CHECK(rn_insert(p, t, row, sizeof row) == 0);
  }
  rn_pipeline_close(p);
}

#endif
