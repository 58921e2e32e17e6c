/* read_api.c — reading tables from a C host: rn_get and row cursors
 * (runnel.h), rows handed out as msgpack maps keyed by external names. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "row.h"

struct rn_cursor {
  rn_pipeline *p;
  rn_rel *rel;
  rn_table_cursor *rows;  /* the table's cursor (table.c) */
  msgpack_sbuffer map;    /* the current row as a map */
  msgpack_zone zone;      /* decoding it */
};

/* Checks shared by the reads: a table of p. */
static int check_read(rn_pipeline *p, rn_rel *rel, const char *what)
{
  rn_err_clear(&p->err);
  if (!rel) return rn_err_set(&p->err, RN_EINVAL, "%s: the relation is NULL (did rn_relation find it?)", what);
  if (rel->p != p) return rn_err_set(&p->err, RN_EINVAL, "%s: %s: the relation belongs to another pipeline",
                                     rel->name, what);
  if (rel->kind != RN_REL_TABLE)
    return rn_err_set(&p->err, RN_EINVAL, "%s: %s: only tables hold rows to read (a %s's rows reach C through "
                      "rn_subscribe)", rel->name, what, rn_relkind_name(rel->kind));
  return 0;
}

/* The map rn_get hands out lives in p->valbuf until the next call. */
RN_API int rn_get(rn_pipeline *p, rn_rel *rel, const void *key, size_t key_len, const void **row, size_t *row_len,
                  uint64_t *id)
{
  if (!p) return RN_EINVAL;
  int rc = check_read(p, rel, "rn_get");
  if (rc) return rc;
  if (!key || !row || !row_len) return rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: key, row and row_len are required",
                                                  rel->name);
  *row = NULL;
  *row_len = 0;
  msgpack_object m;
  size_t off = 0;
  if (rn_msgpack_size(key, key_len) != key_len ||
      rn_unpack(key, key_len, &off, &p->scratch, &m) != MSGPACK_UNPACK_SUCCESS)
    rc = rn_err_set(&p->err, RN_EINVAL, "%s: rn_get: the key is not one msgpack value", rel->name);
  msgpack_object *vals = NULL;
  uint8_t *given = NULL;
  if (!rc) rc = rn_map_slots(p, rel, &m, &vals, &given);
  int found = 0;
  uint64_t rid = 0;
  const char *data = NULL;
  size_t len = 0;
  if (!rc) rc = rn_table_get(rel, vals, given, &found, &rid, &data, &len);
  msgpack_sbuffer_clear(&p->valbuf);
  if (!rc && found && rn_row_to_map(rel->schema, data, len, &p->scratch, &p->valbuf))
    rc = rn_err_set(&p->err, RN_ESTORE, "%s: rn_get: a stored row could not be decoded", rel->name);
  if (p->state == RN_IDLE || p->state == RN_OPEN) msgpack_zone_clear(&p->scratch);
  if (!rc && rn_oom()) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc || !found) return rc;
  *row = p->valbuf.data;
  *row_len = p->valbuf.size;
  if (id) *id = rid;
  return 0;
}

RN_API int rn_cursor_open(rn_pipeline *p, rn_rel *rel, rn_cursor **out)
{
  if (!p) return RN_EINVAL;
  int rc = check_read(p, rel, "rn_cursor_open");
  if (rc) return rc;
  if (!out) return rn_err_set(&p->err, RN_EINVAL, "%s: rn_cursor_open: out is NULL", rel->name);
  *out = NULL;
  rn_cursor *c = calloc(1, sizeof *c);
  if (!c || !rn_zone_init(&c->zone, 1024)) {
    free(c);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  c->p = p;
  c->rel = rel;
  msgpack_sbuffer_init(&c->map);
  if ((rc = rn_table_cursor_open(rel, &c->rows))) {
    rn_cursor_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

RN_API int rn_cursor_next(rn_cursor *c, const void **row, size_t *row_len, uint64_t *id, int *done)
{
  if (!c || !row || !row_len || !id || !done) return RN_EINVAL;
  rn_err_clear(&c->p->err);
  *row = NULL;
  *row_len = 0;
  const char *data;
  size_t len;
  int rc = rn_table_cursor_next(c->rows, id, &data, &len, done);
  if (rc || *done) return rc;
  msgpack_sbuffer_clear(&c->map);
  rc = rn_row_to_map(c->rel->schema, data, len, &c->zone, &c->map);
  msgpack_zone_clear(&c->zone);
  if (rc) return rn_err_set(&c->p->err, RN_ESTORE, "%s: a stored row could not be decoded", c->rel->name);
  if (rn_oom()) return rn_err_set(&c->p->err, RN_ENOMEM, "out of memory");
  *row = c->map.data;
  *row_len = c->map.size;
  return 0;
}

RN_API void rn_cursor_close(rn_cursor *c)
{
  if (!c) return;
  rn_table_cursor_close(c->rows);
  msgpack_sbuffer_destroy(&c->map);
  rn_zone_destroy(&c->zone);
  free(c);
}
