/* rowsort.c — rows in key or id order (rowsort.h). */
#include "rowsort.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "key.h"
#include "row.h"

struct rn_rowsort_item {
  uint64_t id;
  size_t key_at, key_len, row_at, row_len; /* in the bytes */
  const char *key;                         /* set once every row is in */
};

static int no_memory(rn_err *e) { return rn_err_set(e, RN_ENOMEM, "out of memory"); }

int rn_rowsort_init(rn_rowsort *s, const rn_schema *schema, const char *name, rn_err *e)
{
  memset(s, 0, sizeof *s);
  s->schema = schema;
  s->name = name;
  s->e = e;
  msgpack_sbuffer_init(&s->bytes);
  return rn_zone_init(&s->zone, 1024) ? 0 : no_memory(e);
}

void rn_rowsort_free(rn_rowsort *s)
{
  free(s->items);
  s->items = NULL;
  msgpack_sbuffer_destroy(&s->bytes);
  rn_zone_destroy(&s->zone);
}

/* The key of row, appended to the bytes. */
static int key_of(rn_rowsort *s, const char *row, size_t len)
{
  const msgpack_object *vals = rn_row_unpack(row, len, s->schema->ncols, &s->zone);
  int rc = vals && rn_key_encode(s->schema, vals, &s->bytes) == 0 ? 0
         : rn_oom() ? rn_err_set(s->e, RN_ENOMEM, "out of memory") /* its zone or buffer, not the row */
                    : rn_err_set(s->e, RN_ESTORE, "%s: a row does not decode to a key", s->name);
  msgpack_zone_clear(&s->zone);
  return rc;
}

int rn_rowsort_add(void *ctx, uint64_t id, const char *row, size_t len)
{
  rn_rowsort *s = ctx;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 256;
    rn_rowsort_item *grown = realloc(s->items, cap * sizeof *grown);
    if (!grown) return no_memory(s->e);
    s->items = grown;
    s->cap = cap;
  }
  rn_rowsort_item *it = &s->items[s->n++];
  it->id = id;
  it->key_at = s->bytes.size;
  if (s->schema->nkey > 0) {
    int rc = key_of(s, row, len);
    if (rc) return rc;
  }
  it->key_len = s->bytes.size - it->key_at;
  it->row_at = s->bytes.size;
  it->row_len = len;
  rn_buf_write(&s->bytes, row, len);
  return rn_oom() ? no_memory(s->e) : 0;
}

/* LMDB's order: bytes, then the shorter first; then the id (rows without a
 * key have empty keys: id order). */
static int by_key(const void *a, const void *b)
{
  const rn_rowsort_item *x = a, *y = b;
  size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
  int c = n ? memcmp(x->key, y->key, n) : 0;
  if (c) return c;
  if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

int rn_rowsort_each(rn_rowsort *s, int (*fn)(void *ctx, uint64_t id, const char *row, size_t len), void *ctx)
{
  for (size_t i = 0; i < s->n; i++) s->items[i].key = s->bytes.data + s->items[i].key_at;
  if (s->n) qsort(s->items, s->n, sizeof *s->items, by_key);
  for (size_t i = 0; i < s->n; i++) {
    const rn_rowsort_item *it = &s->items[i];
    int rc = fn(ctx, it->id, s->bytes.data + it->row_at, it->row_len);
    if (rc) return rc;
  }
  return 0;
}
