/* join_fixture.h — the joiner the join C tests share: the result (pid,
 * tname) of a player (id, team) and a team (id, tname): the player's id and
 * the team's name (nil without). Counts its calls in *(int *)ctx when the
 * join's fns.ctx is set. */
#ifndef RN_JOIN_FIXTURE_H
#define RN_JOIN_FIXTURE_H

#include "pipeline.h"
#include "row.h"

static int pid_tname_joiner(void *ctx, rn_rel *join, const char *lrow, size_t llen, const char *rrow, size_t rlen,
                            msgpack_sbuffer *result, int *has_row, rn_err *e)
{
  (void)e;
  if (ctx) ++*(int *)ctx;
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  const msgpack_object *l = rn_row_unpack(lrow, llen, 2, &z), *r = rrow ? rn_row_unpack(rrow, rlen, 2, &z) : NULL;
  msgpack_object vals[2] = { l[0], { .type = MSGPACK_OBJECT_NIL } };
  if (r) vals[1] = r[1];
  rn_row_pack(join->schema, vals, result);
  msgpack_zone_destroy(&z);
  *has_row = 1;
  return 0;
}

#endif
