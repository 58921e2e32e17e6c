/* buf.h — out of memory in msgpack buffers, zones and unpacking.
 *
 * msgpack-c reports a failed allocation by a return value that is easy to
 * drop (a packer's -1, a NULL from a zone); dropped, it stores a truncated
 * key or row as if nothing happened. Every write and unpack in the core goes
 * through these wrappers, which note the failure in a flag of the thread
 * (core never starts threads; a group runs on one). The group machinery
 * (group.c) clears the flag when a change, a commit or a declaration begins
 * and turns whatever that step returns, success included, into RN_ENOMEM
 * and a rollback when the flag is set: one check per change, none per row. */
#ifndef RN_BUF_H
#define RN_BUF_H

#include <msgpack.h>
#include <stdbool.h>
#include <string.h>

/* Notes an allocation failure; rn_oom() is true until rn_oom_clear(). */
void rn_oom_note(void);
bool rn_oom(void);
void rn_oom_clear(void);

/* msgpack_sbuffer_write that notes a failure: the packer callback and the
 * only way the core appends to an sbuffer. */
static inline int rn_buf_write(void *sbuf, const char *data, size_t len)
{
  if (len == 0) return 0; /* msgpack would memcpy to a NULL buffer that never grew */
  int rc = msgpack_sbuffer_write(sbuf, data, len);
  if (rc) rn_oom_note();
  return rc;
}

/* msgpack_zone_malloc and _no_align that note a NULL. */
static inline void *rn_zone_malloc(msgpack_zone *z, size_t size)
{
  void *ptr = msgpack_zone_malloc(z, size);
  if (!ptr) rn_oom_note();
  return ptr;
}

static inline void *rn_zone_malloc_no_align(msgpack_zone *z, size_t size)
{
  void *ptr = msgpack_zone_malloc_no_align(z, size);
  if (!ptr) rn_oom_note();
  return ptr;
}

/* msgpack_zone_init that notes a failure and leaves a zone that
 * rn_zone_destroy (and msgpack_zone_clear's callers) can always take: a
 * failed msgpack_zone_init has no chunk list, and destroying it crashes. */
static inline bool rn_zone_init(msgpack_zone *z, size_t chunk_size)
{
  memset(z, 0, sizeof *z);
  if (msgpack_zone_init(z, chunk_size)) return true;
  memset(z, 0, sizeof *z);
  rn_oom_note();
  return false;
}

static inline void rn_zone_destroy(msgpack_zone *z)
{
  if (z->chunk_list.head) msgpack_zone_destroy(z);
}

/* msgpack_unpack that notes MSGPACK_UNPACK_NOMEM_ERROR. */
static inline msgpack_unpack_return rn_unpack(const char *data, size_t len, size_t *off, msgpack_zone *z,
                                              msgpack_object *out)
{
  msgpack_unpack_return rc = msgpack_unpack(data, len, off, z, out);
  if (rc == MSGPACK_UNPACK_NOMEM_ERROR) rn_oom_note();
  return rc;
}

#endif
