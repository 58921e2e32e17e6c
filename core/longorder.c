/* longorder.c — order keys longer than an LMDB key (longorder.h). */
#include "longorder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "key.h"
#include "row.h"

#define STEP ((uint64_t)1 << 32) /* a label's distance from a lone neighbour: appends in order stay cheap */
#define WALK_MAX 8 /* entries of a bucket walked before it is searched by label instead (4) */

bool rn_longorder_entry(const MDB_val *k, const MDB_val *v, size_t skip, uint64_t *id, size_t *row_len)
{
  if (k->mv_size != RN_STORE_KEY_MAX || v->mv_size < skip + 9) return false;
  const char *row = (const char *)v->mv_data + skip;
  size_t len = v->mv_size - skip - 8;
  if (rn_msgpack_size(row, len) != len) return false;
  *id = rn_be64_get(row + len);
  *row_len = len;
  return true;
}

int rn_longorder_full(const rn_longorder *lo, const char *row, size_t len, msgpack_zone *z, msgpack_sbuffer *out)
{
  const msgpack_object *vals = rn_row_unpack(row, len, lo->ncols, z);
  if (!vals) return -1;
  for (int i = 0; i < lo->nby; i++)
    if (rn_order_value_append(out, &vals[lo->by[i]]) != 0) return -1;
  int bad;
  return rn_order_append(lo->order, vals, out, &bad);
}

/* One entry of a bucket. */
typedef struct bentry {
  int d;                  /* its dbi's index; -1: the row being placed */
  char *val;
  size_t vlen;
  char *full;             /* its o */
  size_t flen;
  uint64_t id, label;
} bentry;

static int cmp_full(const char *a, size_t alen, uint64_t aid, const char *b, size_t blen, uint64_t bid)
{
  int c = memcmp(a, b, alen < blen ? alen : blen);
  if (c) return c;
  if (alen != blen) return alen < blen ? -1 : 1;
  return (aid > bid) - (aid < bid);
}

static int cmp_bentry(const void *x, const void *y)
{
  const bentry *a = x, *b = y;
  return cmp_full(a->full, a->flen, a->id, b->full, b->flen, b->id);
}

typedef struct bucket {
  bentry *e;
  size_t n, cap;
} bucket;

static void bucket_free(bucket *b)
{
  for (size_t i = 0; i < b->n; i++) {
    free(b->e[i].val);
    free(b->e[i].full);
  }
  free(b->e);
}

static int keep(bucket *b, int d, const MDB_val *v, const char *full, size_t flen, uint64_t id, uint64_t label)
{
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 16;
    bentry *more = realloc(b->e, cap * sizeof *more);
    if (!more) return ENOMEM;
    b->e = more;
    b->cap = cap;
  }
  bentry *e = &b->e[b->n];
  *e = (bentry){ .d = d, .vlen = v ? v->mv_size : 0, .flen = flen, .id = id, .label = label };
  e->val = malloc(e->vlen ? e->vlen : 1);
  e->full = malloc(flen ? flen : 1);
  b->n++;
  if (!e->val || !e->full) return ENOMEM;
  if (v) memcpy(e->val, v->mv_data, v->mv_size);
  memcpy(e->full, full, flen);
  return 0;
}

/* Labels every entry of the bucket afresh, evenly, the row being placed
 * (f, id) among them; its label into *label. */
static int relabel(MDB_txn *txn, const rn_longorder *lo, const char *prefix, const char *f, size_t flen, uint64_t id,
                   uint64_t *label, msgpack_zone *z, msgpack_sbuffer *fb)
{
  bucket b = { 0 };
  char key[RN_STORE_KEY_MAX];
  memcpy(key, prefix, RN_LONGORDER_INLINE);
  int rc = 0;
  for (int d = 0; !rc && d < lo->ndbi; d++) {
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, lo->dbi[d], &cur))) break;
    MDB_val k = { RN_LONGORDER_INLINE, key }, v;
    int mrc;
    for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !rc && mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      if (k.mv_size != RN_STORE_KEY_MAX || memcmp(k.mv_data, prefix, RN_LONGORDER_INLINE) != 0) break;
      uint64_t eid;
      size_t rlen;
      if (!rn_longorder_entry(&k, &v, lo->skip[d], &eid, &rlen)) { rc = RN_LONGORDER_DAMAGED; break; }
      fb->size = 0;
      msgpack_zone_clear(z);
      if (rn_longorder_full(lo, (const char *)v.mv_data + lo->skip[d], rlen, z, fb) != 0 || rn_oom()) {
        rc = rn_oom() ? ENOMEM : RN_LONGORDER_DAMAGED;
        break;
      }
      rc = keep(&b, d, &v, fb->data, fb->size, eid, rn_be64_get((const char *)k.mv_data + RN_LONGORDER_INLINE));
    }
    mdb_cursor_close(cur);
    if (!rc && mrc != MDB_NOTFOUND && mrc != 0) rc = mrc;
  }
  if (!rc) rc = keep(&b, -1, NULL, f, flen, id, 0);
  if (!rc) qsort(b.e, b.n, sizeof *b.e, cmp_bentry);
  for (size_t i = 0; !rc && i < b.n; i++) { /* every old key out first: a new label may be an old one */
    if (b.e[i].d < 0) continue;
    rn_be64_put(key + RN_LONGORDER_INLINE, b.e[i].label);
    MDB_val k = { RN_STORE_KEY_MAX, key };
    rc = mdb_del(txn, lo->dbi[b.e[i].d], &k, NULL);
  }
  uint64_t step = UINT64_MAX / (b.n + 1);
  for (size_t i = 0; !rc && i < b.n; i++) {
    uint64_t l = step * (i + 1);
    if (b.e[i].d < 0) { *label = l; continue; }
    rn_be64_put(key + RN_LONGORDER_INLINE, l);
    MDB_val k = { RN_STORE_KEY_MAX, key }, v = { b.e[i].vlen, b.e[i].val };
    rc = mdb_put(txn, lo->dbi[b.e[i].d], &k, &v, 0);
  }
  bucket_free(&b);
  return rc;
}

int rn_longorder_search(MDB_txn *txn, const rn_longorder *lo, const char *prefix, unsigned mask,
                        rn_longorder_cmp_fn cmp, void *ctx, rn_longorder_near *out)
{
  *out = (rn_longorder_near){ .d = -1, .d_below = -1, .d_above = -1 };
  MDB_cursor *cur[2] = { NULL, NULL };
  char key[RN_STORE_KEY_MAX];
  memcpy(key, prefix, RN_LONGORDER_INLINE);
  int rc = 0;
  for (int d = 0; !rc && d < lo->ndbi; d++)
    if (mask & (1u << d)) rc = mdb_cursor_open(txn, lo->dbi[d], &cur[d]);
  uint64_t least = 0, most = UINT64_MAX; /* the labels not yet ruled out */
  while (!rc && least <= most) {
    uint64_t mid = least + (most - least) / 2;
    int best = -1;
    uint64_t label = 0;
    MDB_val bk[2], bv[2];
    for (int d = 0; !rc && d < lo->ndbi; d++) { /* the first entry at or after mid, in any dbi */
      if (!cur[d]) continue;
      rn_be64_put(key + RN_LONGORDER_INLINE, mid);
      bk[d] = (MDB_val){ RN_STORE_KEY_MAX, key };
      int mrc = mdb_cursor_get(cur[d], &bk[d], &bv[d], MDB_SET_RANGE);
      if (mrc == MDB_NOTFOUND) continue;
      if (mrc) { rc = mrc; break; }
      if (bk[d].mv_size != RN_STORE_KEY_MAX || memcmp(bk[d].mv_data, prefix, RN_LONGORDER_INLINE) != 0) continue;
      uint64_t l = rn_be64_get((const char *)bk[d].mv_data + RN_LONGORDER_INLINE);
      if (l <= most && (best < 0 || l < label)) { best = d; label = l; }
    }
    if (rc) break;
    int c = 1;
    if (best >= 0 && (rc = cmp(ctx, best, &bk[best], &bv[best], &c))) break;
    if (best >= 0 && c == 0) {
      out->found = true;
      out->label = label;
      out->d = best;
      break;
    }
    if (best >= 0 && c < 0) {
      out->has_below = true;
      out->below = label;
      out->d_below = best;
      if (label == UINT64_MAX) break;
      least = label + 1;
      continue;
    }
    if (best >= 0) { /* none between mid and it */
      out->has_above = true;
      out->above = label;
      out->d_above = best;
    }
    if (mid == 0) break;
    most = mid - 1;
  }
  for (int d = 0; d < 2; d++)
    if (cur[d]) mdb_cursor_close(cur[d]);
  return rc;
}

/* What rn_longorder_key's search compares entries with. */
typedef struct full_target {
  const rn_longorder *lo;
  const char *f;
  size_t flen;
  uint64_t id;
  msgpack_zone *z;
  msgpack_sbuffer *fb;
} full_target;

static int cmp_target(void *ctx, int d, const MDB_val *k, const MDB_val *v, int *c)
{
  full_target *t = ctx;
  uint64_t eid;
  size_t rlen;
  if (!rn_longorder_entry(k, v, t->lo->skip[d], &eid, &rlen)) return RN_LONGORDER_DAMAGED;
  t->fb->size = 0;
  msgpack_zone_clear(t->z);
  if (rn_longorder_full(t->lo, (const char *)v->mv_data + t->lo->skip[d], rlen, t->z, t->fb) != 0 || rn_oom())
    return rn_oom() ? ENOMEM : RN_LONGORDER_DAMAGED;
  *c = cmp_full(t->fb->data, t->fb->size, eid, t->f, t->flen, t->id);
  return 0;
}

int rn_longorder_key(MDB_txn *txn, const rn_longorder *lo, const char *f, size_t flen, uint64_t id, bool place,
                     char *out, bool *moved)
{
  *moved = false;
  memcpy(out, f, RN_LONGORDER_INLINE);
  memset(out + RN_LONGORDER_INLINE, 0, 8);
  msgpack_zone z;
  if (!rn_zone_init(&z, 1024)) return ENOMEM;
  msgpack_sbuffer fb;
  msgpack_sbuffer_init(&fb);
  bool has_lo = false, has_hi = false, found = false, big = false;
  uint64_t below = 0, above = 0, label = 0;
  int rc = 0, seen = 0;
  for (int d = 0; !rc && !found && !big && d < lo->ndbi; d++) {
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, lo->dbi[d], &cur))) break;
    MDB_val k = { RN_LONGORDER_INLINE, out }, v;
    int mrc;
    for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      if (k.mv_size != RN_STORE_KEY_MAX || memcmp(k.mv_data, out, RN_LONGORDER_INLINE) != 0) break;
      if (++seen > WALK_MAX) { big = true; break; }
      uint64_t eid;
      size_t rlen;
      if (!rn_longorder_entry(&k, &v, lo->skip[d], &eid, &rlen)) { rc = RN_LONGORDER_DAMAGED; break; }
      fb.size = 0;
      msgpack_zone_clear(&z);
      if (rn_longorder_full(lo, (const char *)v.mv_data + lo->skip[d], rlen, &z, &fb) != 0 || rn_oom()) {
        rc = rn_oom() ? ENOMEM : RN_LONGORDER_DAMAGED;
        break;
      }
      uint64_t l = rn_be64_get((const char *)k.mv_data + RN_LONGORDER_INLINE);
      int c = cmp_full(fb.data, fb.size, eid, f, flen, id);
      if (c == 0) { found = true; label = l; break; }
      if (c < 0 && (!has_lo || l > below)) { has_lo = true; below = l; }
      if (c > 0 && (!has_hi || l < above)) { has_hi = true; above = l; }
    }
    mdb_cursor_close(cur);
    if (!rc && mrc != MDB_NOTFOUND && mrc != 0) rc = mrc;
  }
  if (!rc && big) { /* a big bucket: its neighbours found by label (4) */
    full_target target = { lo, f, flen, id, &z, &fb };
    rn_longorder_near near;
    rc = rn_longorder_search(txn, lo, out, (1u << lo->ndbi) - 1, cmp_target, &target, &near);
    found = near.found;
    label = near.label;
    has_lo = near.has_below;
    below = near.below;
    has_hi = near.has_above;
    above = near.above;
  }
  if (!rc && !found && !place) rc = MDB_NOTFOUND;
  if (!rc && !found) {
    bool room = !(has_lo && below == UINT64_MAX) && !(has_hi && above == 0);
    uint64_t least = has_lo ? below + 1 : 0, most = has_hi ? above - 1 : UINT64_MAX;
    room = room && least <= most;
    if (!room) {
      rc = relabel(txn, lo, out, f, flen, id, &label, &z, &fb);
      *moved = true;
    } else if (!has_lo && !has_hi) label = (uint64_t)1 << 63;
    else if (!has_hi && most - least > STEP) label = least + STEP;
    else if (!has_lo && most - least > STEP) label = most - STEP;
    else label = least + (most - least) / 2;
  }
  if (!rc) rn_be64_put(out + RN_LONGORDER_INLINE, label);
  msgpack_sbuffer_destroy(&fb);
  rn_zone_destroy(&z);
  return rc;
}
