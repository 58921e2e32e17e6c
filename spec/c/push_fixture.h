/* push_fixture.h — the C tests' commonest push: a row {"id": id} into a
 * table keyed by an int "id" (its own group outside rn_begin). */
#ifndef PUSH_FIXTURE_H
#define PUSH_FIXTURE_H

#include <msgpack.h>

#include "runnel.h"

static inline int insert_id(rn_pipeline *p, rn_rel *t, int64_t id)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  int rc = rn_insert(p, t, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

#endif
