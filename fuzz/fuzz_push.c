/* fuzz_push.c — rn_push of arbitrary msgpack into the state of state.c.
 *
 * The input is a list of changes, each
 *
 *     |ctl|len (2 bytes, big-endian)|len bytes of msgpack|
 *
 * ctl's low 2 bits pick the op, bits 2-4 the relation (fuzz_rel_names,
 * modulo their count), bit 7 commits the group after this change. A change
 * running past the end takes what is left. Everything runs in groups; a
 * failing change must roll its group back, so the next rn_begin works. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "state.h"

static void must_begin(rn_pipeline *p)
{
  int rc = rn_begin(p);
  if (rc) { fprintf(stderr, "fuzz: begin after a rollback: %s\n", rn_errmsg(p)); abort(); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  rn_pipeline *p = fuzz_state_open();
  rn_rel *rels[FUZZ_NRELS];
  for (int i = 0; i < FUZZ_NRELS; i++) rels[i] = rn_relation(p, fuzz_rel_names[i]);
  must_begin(p);
  size_t at = 0;
  while (at < size) {
    uint8_t ctl = data[at++];
    size_t len = at + 2 <= size ? (size_t)data[at] << 8 | data[at + 1] : 0;
    at = at + 2 <= size ? at + 2 : size;
    if (len > size - at) len = size - at;
    rn_op op = (rn_op)(RN_OP_INSERT + (ctl & 3));
    int rc = rn_push(p, rels[(ctl >> 2 & 7) % FUZZ_NRELS], op, data + at, len);
    at += len;
    if (rc) {
      fuzz_check_failure(p, rc, "rn_push");
      must_begin(p);
    } else if (ctl & 0x80) {
      rc = rn_commit(p);
      if (rc) fuzz_check_failure(p, rc, "rn_commit");
      must_begin(p);
    }
  }
  int rc = rn_commit(p);
  if (rc) fuzz_check_failure(p, rc, "rn_commit");
  fuzz_state_close(p);
  return 0;
}
