/* push_fixture.h — the C tests' commonest push: a row of one int column,
 * {"id": id} into a table keyed by an int "id" most often. */
#ifndef PUSH_FIXTURE_H
#define PUSH_FIXTURE_H

#include <msgpack.h>
#include <string.h>

#include "runnel.h"

/* A row {col: v} into t, one int column (its own group outside rn_begin). */
static inline int insert_int(rn_pipeline *p, rn_rel *t, const char *col, int64_t v)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, col, strlen(col));
  msgpack_pack_int64(&pk, v);
  int rc = rn_insert(p, t, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

static inline int insert_id(rn_pipeline *p, rn_rel *t, int64_t id)
{
  return insert_int(p, t, "id", id);
}

#endif
