/* cursor_fixture.h — the rows of a relation a cursor reads, counted (the
 * C tests that check a group's or a regrow's rows). */
#ifndef CURSOR_FIXTURE_H
#define CURSOR_FIXTURE_H

#include "runnel.h"

/* The rows of r a cursor reads (-1 on an error). */
static inline int count_rows(rn_pipeline *p, rn_rel *r)
{
  rn_cursor *c;
  if (rn_cursor_open(p, r, &c) != 0) return -1;
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0, n = 0;
  while (rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done) n++;
  rn_cursor_close(c);
  return done ? n : -1;
}

#endif
