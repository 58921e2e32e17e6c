/* wb.c — the write-back layer (wb.h).
 *
 * Per layered database: the entries in a skip list (key order, for the
 * commit's sorted puts and for merged iteration) and a hash table of the same
 * nodes (a read or write of a known key costs one probe, no comparison walk).
 * Nodes, keys and values live in an arena freed at the commit or abort
 * (wb.h (2)), so no entry is freed on its own:
 *
 *     node: |val ptr|u32 klen|u32 vlen|u32 vcap|u32 hash|u8 dirty|u8 tomb|u8 level|u8 linked|next[level]|key|
 *
 * dirty: written in this transaction and not yet in LMDB; tomb: the key is
 * absent (deleted, or read and not found). A value is rewritten in place when
 * the new one fits (as LMDB rewrites a value of the same size). */
#include "wb.h"

#include "bytes.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WB_LEVELS 16            /* skip list levels: 4^16 entries before it degrades */
#define WB_CHUNK ((size_t)64 << 10)

typedef struct wb_node {
  char *val;                    /* the value (vlen bytes, room for vcap) */
  uint32_t klen, vlen, vcap;
  uint32_t hash;                /* of the key, low bits (hash table probes) */
  uint8_t dirty;                /* written, not yet in LMDB */
  uint8_t tomb;                 /* the key is absent */
  uint8_t level;                /* pointers in next */
  uint8_t linked;               /* in the skip list */
  struct wb_node *next[];       /* then the key */
} wb_node;

/* A hash table slot: the node and its key's hash, so a probe that meets
 * another key compares the hash here and leaves the node (elsewhere in
 * the arena, cold after a host's idle time) unread. */
typedef struct wb_slot {
  wb_node *node;                /* NULL: empty */
  uint32_t hash;
} wb_slot;

typedef struct wb_db {
  wb_node *head;                /* skip list sentinel, WB_LEVELS pointers */
  wb_slot *slots;               /* open-addressing hash table of the nodes */
  size_t cap, used;             /* slots, nodes in them */
  size_t added;                 /* nodes inserted since the last commit (rn_wb_committed grows ahead) */
  wb_node **dirty;              /* the nodes with dirty set, in the order written */
  size_t ndirty, dcap;
  bool ordered;                 /* iterated once: written entries join the skip list */
  uint32_t past_tries, past_found; /* past_last's asks and its answers "absent" (whether it pays) */
  uint32_t past_skipped;        /* misses it was not asked about */
  MDB_cursor *last_cur;         /* past_last's, in the open write transaction (LMDB frees it at its end) */
} wb_db;

typedef struct wb_chunk {
  struct wb_chunk *next;
  size_t size, used;
  char data[];
} wb_chunk;

struct rn_wb {
  wb_db **dbs;                  /* by MDB_dbi; NULL: never touched */
  size_t ndbs;
  wb_chunk *chunks;             /* the arena, newest first */
  size_t bytes;                 /* arena chunks and hash tables */
  uint64_t rng;                 /* skip list levels */
};

static char *node_key(wb_node *n) { return (char *)&n->next[n->level]; }

static MDB_val key_of(wb_node *n) { return (MDB_val){ n->klen, node_key(n) }; }

/* ---- the arena ---- */

static void *arena_alloc(rn_wb *wb, size_t n)
{
  n = (n + 7) & ~(size_t)7;
  wb_chunk *c = wb->chunks;
  if (!c || c->size - c->used < n) {
    size_t size = n > WB_CHUNK ? n : WB_CHUNK;
    c = malloc(sizeof *c + size);
    if (!c) return NULL;
    c->size = size;
    c->used = 0;
    c->next = wb->chunks;
    wb->chunks = c;
    wb->bytes += size;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

/* ---- one database's entries ----
 *
 * Every entry is in the hash table. Only a database that was iterated
 * (ordered) keeps a skip list, and only of the entries written: an entry
 * that was only read holds what LMDB holds (wb.h (1)), so merging LMDB with
 * the written ones is merging with all of them. */

static uint32_t hash_key(const void *data, size_t len)
{
  const unsigned char *p = data;
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
  for (; len >= 8; p += 8, len -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  uint64_t w = 0; /* the last 1-7 bytes, each in w (two overlapping loads, or three bytes), no memcpy call */
  if (len >= 4) {
    uint32_t a, b;
    memcpy(&a, p, 4);
    memcpy(&b, p + len - 4, 4);
    w = (uint64_t)a << 32 | b;
  } else if (len) {
    w = (uint64_t)p[0] | (uint64_t)p[len / 2] << 8 | (uint64_t)p[len - 1] << 16;
  }
  h ^= w;
  h ^= h >> 33; /* murmur3's finalizer: every key bit reaches the low bits the table uses */
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return (uint32_t)(h ^ (h >> 33));
}

static wb_db *db_new(rn_wb *wb, MDB_dbi dbi);

/* dbi's entries, made on first use; NULL when out of memory. */
static inline wb_db *db_of(rn_wb *wb, MDB_dbi dbi)
{
  return dbi < wb->ndbs && wb->dbs[dbi] ? wb->dbs[dbi] : db_new(wb, dbi);
}

static wb_db *db_new(rn_wb *wb, MDB_dbi dbi)
{
  if (dbi >= wb->ndbs) {
    size_t n = (size_t)dbi + 16;
    wb_db **dbs = realloc(wb->dbs, n * sizeof *dbs);
    if (!dbs) return NULL;
    memset(dbs + wb->ndbs, 0, (n - wb->ndbs) * sizeof *dbs);
    wb->dbs = dbs;
    wb->ndbs = n;
  }
  if (!wb->dbs[dbi]) {
    wb_db *db = calloc(1, sizeof *db);
    wb_node *head = calloc(1, sizeof *head + WB_LEVELS * sizeof head->next[0]);
    if (!db || !head) { free(db); free(head); return NULL; }
    head->level = WB_LEVELS;
    db->head = head;
    wb->dbs[dbi] = db;
  }
  return wb->dbs[dbi];
}

static wb_node *find(const wb_db *db, const MDB_val *key, uint32_t h)
{
  if (!db->cap) return NULL;
  size_t mask = db->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const wb_slot *sl = &db->slots[i];
    if (!sl->node) return NULL;
    if (sl->hash != h) continue;
    wb_node *n = sl->node;
    if (n->klen == key->mv_size && rn_same_bytes(node_key(n), key->mv_data, key->mv_size)) return n;
  }
}

static void slot_in(wb_slot *slots, size_t cap, wb_node *n)
{
  size_t i = n->hash & (cap - 1);
  while (slots[i].node) i = (i + 1) & (cap - 1);
  slots[i] = (wb_slot){ n, n->hash };
}

static int grow_slots(rn_wb *wb, wb_db *db)
{
  size_t cap = db->cap ? db->cap * 2 : 256;
  wb_slot *slots = calloc(cap, sizeof *slots);
  if (!slots) return ENOMEM;
  for (size_t i = 0; i < db->cap; i++) if (db->slots[i].node) slot_in(slots, cap, db->slots[i].node);
  free(db->slots);
  wb->bytes += (cap - db->cap) * sizeof *slots;
  db->slots = slots;
  db->cap = cap;
  return 0;
}

/* The first node whose key is >= key; preds (when not NULL) gets each
 * level's last node before it. */
static wb_node *lower_bound(wb_db *db, const MDB_val *key, wb_node **preds)
{
  wb_node *x = db->head;
  for (int lv = WB_LEVELS - 1; lv >= 0; lv--) {
    while (x->next[lv]) {
      MDB_val nk = key_of(x->next[lv]);
      if (rn_store_key_cmp(&nk, key) >= 0) break;
      x = x->next[lv];
    }
    if (preds) preds[lv] = x;
  }
  return x->next[0];
}

static uint8_t random_level(rn_wb *wb)
{
  uint64_t r = wb->rng;
  r ^= r << 13;
  r ^= r >> 7;
  r ^= r << 17;
  wb->rng = r;
  uint8_t level = 1;
  while (level < WB_LEVELS && (r & 3) == 0) { level++; r >>= 2; } /* p = 1/4 */
  return level;
}

/* A new clean tombstone for key (absent from the hash table). */
static wb_node *insert(rn_wb *wb, wb_db *db, const MDB_val *key, uint32_t h)
{
  if ((db->used + 1) * 2 > db->cap && grow_slots(wb, db)) return NULL;
  uint8_t level = random_level(wb);
  wb_node *n = arena_alloc(wb, sizeof *n + level * sizeof n->next[0] + key->mv_size);
  if (!n) return NULL;
  *n = (wb_node){ .klen = (uint32_t)key->mv_size, .hash = h, .tomb = 1, .level = level };
  memcpy(node_key(n), key->mv_data, key->mv_size);
  slot_in(db->slots, db->cap, n);
  db->used++;
  db->added++;
  return n;
}

static void link(wb_db *db, wb_node *n)
{
  wb_node *preds[WB_LEVELS];
  MDB_val key = key_of(n);
  lower_bound(db, &key, preds);
  for (int lv = 0; lv < n->level; lv++) {
    n->next[lv] = preds[lv]->next[lv];
    preds[lv]->next[lv] = n;
  }
  n->linked = 1;
}

/* Gives n room for len bytes, copying data (NULL: the caller fills them). */
static int set_value(rn_wb *wb, wb_node *n, const void *data, size_t len)
{
  if (len > n->vcap) {
    char *v = arena_alloc(wb, len);
    if (!v) return ENOMEM;
    n->val = v;
    n->vcap = (uint32_t)len;
  }
  if (data && data != n->val) memmove(n->val, data, len);
  n->vlen = (uint32_t)len;
  n->tomb = 0;
  return 0;
}

static int mark_dirty(rn_wb *wb, wb_db *db, wb_node *n)
{
  if (n->dirty) return 0;
  if (db->ndirty == db->dcap) {
    size_t cap = db->dcap ? db->dcap * 2 : 256;
    wb_node **v = realloc(db->dirty, cap * sizeof *v);
    if (!v) return ENOMEM;
    wb->bytes += (cap - db->dcap) * sizeof *v;
    db->dirty = v;
    db->dcap = cap;
  }
  db->dirty[db->ndirty++] = n;
  n->dirty = 1;
  if (db->ordered && !n->linked) link(db, n);
  return 0;
}

/* Whether key sorts after LMDB's last key of dbi (or dbi is empty), so
 * LMDB cannot hold it: a new row of increasing ids (a player joining, a
 * match recorded) is then known absent by walking the right edge of the
 * B-tree, without mdb_get's binary searches. Asked only in a database where
 * it answered "absent" at least half the time (its counts halve now and
 * then, so it follows what the database's reads become); false when it
 * does not know. */
static bool past_last(wb_db *db, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key)
{
  /* Not paying: asked once in 64 all the same, to notice when it pays again. */
  if (db->past_tries >= 16 && db->past_found * 2 < db->past_tries && (++db->past_skipped & 63)) return false;
  if (!db->last_cur && mdb_cursor_open(txn, dbi, &db->last_cur)) return db->last_cur = NULL, false;
  MDB_val lk, lv;
  int rc = mdb_cursor_get(db->last_cur, &lk, &lv, MDB_LAST); /* from the root each time: sees every write */
  bool past = rc == MDB_NOTFOUND || (rc == 0 && mdb_cmp(txn, dbi, key, &lk) > 0);
  db->past_tries++;
  db->past_found += past;
  if (db->past_tries >= 1024) { db->past_tries /= 2; db->past_found /= 2; }
  return past;
}

/* The node of key, read from LMDB into a clean one when there is none. */
static int fetch(rn_wb *wb, wb_db *db, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, wb_node **out)
{
  uint32_t h = hash_key(key->mv_data, key->mv_size);
  wb_node *n = find(db, key, h);
  if (n) { *out = n; return 0; }
  MDB_val k = *key, v;
  int rc = past_last(db, txn, dbi, key) ? MDB_NOTFOUND : mdb_get(txn, dbi, &k, &v);
  if (rc && rc != MDB_NOTFOUND) return rc;
  n = insert(wb, db, key, h);
  if (!n || (rc == 0 && set_value(wb, n, v.mv_data, v.mv_size))) return ENOMEM;
  *out = n;
  return 0;
}

/* The node of key for a write that does not read it: no LMDB search. */
static int claim(rn_wb *wb, wb_db *db, const MDB_val *key, wb_node **out)
{
  uint32_t h = hash_key(key->mv_data, key->mv_size);
  wb_node *n = find(db, key, h);
  if (!n) n = insert(wb, db, key, h);
  *out = n;
  return n ? 0 : ENOMEM;
}

static bool layered(const rn_store *s, MDB_txn *txn)
{
  return s->wb && txn && txn == s->wtxn;
}

/* A key LMDB would refuse (empty, or past its 511 bytes) goes to LMDB, so
 * it answers as it always did. */
static bool layered_key(const rn_store *s, MDB_txn *txn, const MDB_val *key)
{
  return layered(s, txn) && key->mv_size > 0 && key->mv_size <= RN_STORE_KEY_MAX;
}

/* ---- reads and writes ---- */

int rn_wb_get(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, MDB_val *val)
{
  if (!layered_key(s, txn, key)) return mdb_get(txn, dbi, (MDB_val *)key, val);
  wb_db *db = db_of(s->wb, dbi);
  wb_node *n;
  int rc = db ? fetch(s->wb, db, txn, dbi, key, &n) : ENOMEM;
  if (rc) return rc;
  if (n->tomb) return MDB_NOTFOUND;
  *val = (MDB_val){ n->vlen, n->val };
  return 0;
}

int rn_wb_put(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, MDB_val *val, unsigned flags)
{
  if (!layered_key(s, txn, key)) {
    int rc = mdb_put(txn, dbi, (MDB_val *)key, val, flags);
    if (!rc && txn == s->wtxn) rn_store_wrote(s, dbi);
    return rc;
  }
  wb_db *db = db_of(s->wb, dbi);
  if (!db) return ENOMEM;
  wb_node *n;
  int rc = flags & MDB_NOOVERWRITE ? fetch(s->wb, db, txn, dbi, key, &n) : claim(s->wb, db, key, &n);
  if (rc) return rc;
  if ((flags & MDB_NOOVERWRITE) && !n->tomb) {
    *val = (MDB_val){ n->vlen, n->val };
    return MDB_KEYEXIST;
  }
  if (set_value(s->wb, n, flags & MDB_RESERVE ? NULL : val->mv_data, val->mv_size)) return ENOMEM;
  if (flags & MDB_RESERVE) val->mv_data = n->val;
  if (!n->dirty) rn_store_wrote(s, dbi);
  return mark_dirty(s->wb, db, n);
}

int rn_wb_del(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key)
{
  if (!layered_key(s, txn, key)) {
    int rc = mdb_del(txn, dbi, (MDB_val *)key, NULL);
    if (!rc && txn == s->wtxn) rn_store_wrote(s, dbi);
    return rc == MDB_NOTFOUND ? 0 : rc;
  }
  wb_db *db = db_of(s->wb, dbi);
  if (!db) return ENOMEM;
  uint32_t h = hash_key(key->mv_data, key->mv_size);
  wb_node *n = find(db, key, h);
  if (n && n->tomb && !n->dirty) return 0; /* read absent (or its delete flushed): LMDB has nothing to delete */
  /* A key with no entry may still be in LMDB (the entries were forgotten,
   * or never read): its delete must reach LMDB, as a dirty tombstone. */
  if (!n && !(n = insert(s->wb, db, key, h))) return ENOMEM;
  n->tomb = 1;
  n->vlen = 0;
  if (!n->dirty) rn_store_wrote(s, dbi);
  return mark_dirty(s->wb, db, n);
}

/* ---- into LMDB ---- */

static int node_cmp(const void *a, const void *b)
{
  wb_node *x = *(wb_node *const *)a, *y = *(wb_node *const *)b;
  MDB_val kx = key_of(x), ky = key_of(y);
  return rn_store_key_cmp(&kx, &ky);
}

/* Writes one entry where the cursor is: appended past the last key, else
 * put (LMDB starts from the cursor's page when the key lies on it). */
static int write_node(MDB_cursor *cur, wb_node *n, MDB_val *last, bool *have_last)
{
  MDB_val k = key_of(n), v = { n->vlen, n->val }, d;
  if (n->tomb) {
    int rc = mdb_cursor_get(cur, &k, &d, MDB_SET);
    return rc == 0 ? mdb_cursor_del(cur, 0) : rc == MDB_NOTFOUND ? 0 : rc;
  }
  if (*have_last && rn_store_key_cmp(&k, last) <= 0) return mdb_cursor_put(cur, &k, &v, 0);
  *last = key_of(n);
  *have_last = true;
  return mdb_cursor_put(cur, &k, &v, MDB_APPEND);
}

/* Writes db's dirty entries in key order through one cursor. On failure
 * the ones not written stay dirty. */
static int flush_db(MDB_txn *txn, MDB_dbi dbi, wb_db *db)
{
  if (!db->ndirty) return 0;
  if (db->ordered) { /* the skip list holds them in order already */
    size_t i = 0;
    for (wb_node *n = db->head->next[0]; n; n = n->next[0]) if (n->dirty) db->dirty[i++] = n;
  } else {
    qsort(db->dirty, db->ndirty, sizeof *db->dirty, node_cmp);
  }
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, dbi, &cur);
  if (rc) return rc;
  char lastbuf[512];
  MDB_val last, d;
  rc = mdb_cursor_get(cur, &last, &d, MDB_LAST);
  bool have_last = rc == 0;
  if (have_last && last.mv_size > sizeof lastbuf) rc = MDB_BAD_VALSIZE;
  else if (have_last) last.mv_data = memcpy(lastbuf, last.mv_data, last.mv_size); /* pages move as we write */
  else if (rc == MDB_NOTFOUND) rc = 0;
  size_t i = 0;
  for (; i < db->ndirty && !rc; i++) {
    rc = write_node(cur, db->dirty[i], &last, &have_last);
    if (!rc) db->dirty[i]->dirty = 0;
  }
  mdb_cursor_close(cur);
  size_t left = 0;
  for (size_t j = 0; j < db->ndirty; j++) if (db->dirty[j]->dirty) db->dirty[left++] = db->dirty[j];
  db->ndirty = left;
  return rc;
}

/* rc of a write into s's write transaction, noted when it failed (store.h's wb_failed). */
static int noted(rn_store *s, MDB_txn *txn, int rc)
{
  if (rc && txn == s->wtxn && !s->wb_failed) s->wb_failed = rc;
  return rc;
}

int rn_wb_flush(rn_store *s)
{
  if (!s->wb || !s->wtxn) return 0;
  for (size_t i = 0; i < s->wb->ndbs; i++) {
    wb_db *db = s->wb->dbs[i];
    int rc = db ? flush_db(s->wtxn, (MDB_dbi)i, db) : 0;
    if (rc) return noted(s, s->wtxn, rc);
  }
  return 0;
}

static void forget_db(wb_db *db)
{
  memset(db->head->next, 0, WB_LEVELS * sizeof db->head->next[0]);
  if (db->cap) memset(db->slots, 0, db->cap * sizeof *db->slots);
  for (size_t i = 0; i < db->ndirty; i++) db->dirty[i]->dirty = 0;
  db->used = db->ndirty = 0;
  db->ordered = false;
}

int rn_wb_cursor_open(rn_store *s, MDB_txn *txn, MDB_dbi dbi, bool writes, MDB_cursor **cur)
{
  *cur = NULL;
  if (layered(s, txn) && dbi < s->wb->ndbs && s->wb->dbs[dbi]) {
    wb_db *db = s->wb->dbs[dbi];
    int rc = flush_db(txn, dbi, db);
    if (rc) return noted(s, txn, rc);
    if (writes) forget_db(db);
  }
  return mdb_cursor_open(txn, dbi, cur);
}

int rn_wb_sync(rn_store *s, MDB_txn *txn, MDB_dbi dbi)
{
  if (!layered(s, txn) || dbi >= s->wb->ndbs || !s->wb->dbs[dbi]) return 0;
  return noted(s, txn, flush_db(txn, dbi, s->wb->dbs[dbi]));
}

int rn_wb_drop(rn_store *s, MDB_txn *txn, MDB_dbi dbi, int del)
{
  if (layered(s, txn) && dbi < s->wb->ndbs && s->wb->dbs[dbi]) {
    wb_db *db = s->wb->dbs[dbi];
    if (db->last_cur) mdb_cursor_close(db->last_cur); /* the transaction is open: closed here */
    db->last_cur = NULL;
    forget_db(db);
  }
  return mdb_drop(txn, dbi, del);
}

/* ---- merged iteration ---- */

/* The next item of LMDB and the entries merged: the entry wins a tie, and
 * a tombstone hides its key. */
static int iter_step(rn_wb_iter *it, MDB_val *k, MDB_val *v)
{
  for (;;) {
    if (it->lrc && it->lrc != MDB_NOTFOUND) return it->lrc;
    bool lmdb = it->lrc == 0;
    if (!lmdb && !it->node) return MDB_NOTFOUND;
    MDB_val nk = it->node ? key_of(it->node) : (MDB_val){ 0, NULL };
    int c = !it->node ? -1 : !lmdb ? 1 : rn_store_key_cmp(&it->lk, &nk);
    if (c < 0) {
      *k = it->lk;
      *v = it->lv;
      it->lrc = mdb_cursor_get(it->cur, &it->lk, &it->lv, MDB_NEXT);
      return 0;
    }
    wb_node *n = it->node;
    it->node = n->next[0];
    if (c == 0) it->lrc = mdb_cursor_get(it->cur, &it->lk, &it->lv, MDB_NEXT);
    if (n->tomb) continue;
    *k = nk;
    *v = (MDB_val){ n->vlen, n->val };
    return 0;
  }
}

int rn_wb_iter_seek(rn_store *s, MDB_txn *txn, MDB_dbi dbi, rn_wb_iter *it, const MDB_val *from,
                    MDB_val *k, MDB_val *v)
{
  *it = (rn_wb_iter){ .lrc = MDB_NOTFOUND };
  wb_db *db = layered(s, txn) && dbi < s->wb->ndbs ? s->wb->dbs[dbi] : NULL;
  if (db && !db->ordered) { /* from now on written entries are kept in order */
    db->ordered = true;
    for (size_t i = 0; i < db->ndirty; i++) link(db, db->dirty[i]);
  }
  if (db) it->node = from ? lower_bound(db, from, NULL) : db->head->next[0];
  int rc = mdb_cursor_open(txn, dbi, &it->cur);
  if (rc) return rc;
  if (from) it->lk = *from;
  it->lrc = mdb_cursor_get(it->cur, &it->lk, &it->lv, from ? MDB_SET_RANGE : MDB_FIRST);
  return iter_step(it, k, v);
}

int rn_wb_iter_next(rn_wb_iter *it, MDB_val *k, MDB_val *v)
{
  return iter_step(it, k, v);
}

void rn_wb_iter_close(rn_wb_iter *it)
{
  if (it->cur) mdb_cursor_close(it->cur);
  it->cur = NULL;
}

/* ---- the layer ---- */

rn_wb *rn_wb_new(void)
{
  rn_wb *wb = calloc(1, sizeof *wb);
  if (wb) wb->rng = 0x2545f4914f6cdd1dULL;
  return wb;
}

void rn_wb_clear(rn_wb *wb)
{
  rn_wb_forget(wb);
}

void rn_wb_forget(rn_wb *wb)
{
  if (!wb) return;
  for (size_t i = 0; i < wb->ndbs; i++) {
    wb_db *db = wb->dbs[i];
    if (!db) continue;
    forget_db(db);
    db->last_cur = NULL; /* the transaction ends (or carries on: LMDB frees the cursor at its end) */
    free(db->slots); /* a large transaction's tables go back to the allocator */
    free(db->dirty);
    db->slots = NULL;
    db->dirty = NULL;
    db->cap = db->dcap = db->added = 0;
  }
  while (wb->chunks) {
    wb_chunk *c = wb->chunks;
    wb->chunks = c->next;
    free(c);
  }
  wb->bytes = 0;
}

void rn_wb_committed(rn_wb *wb)
{
  if (!wb) return;
  if (wb->bytes > RN_WB_MAX_BYTES) { rn_wb_clear(wb); return; }
  for (size_t i = 0; i < wb->ndbs; i++) {
    wb_db *db = wb->dbs[i];
    if (!db) continue;
    for (wb_node *n = db->head->next[0]; n; n = n->next[0]) n->linked = 0;
    memset(db->head->next, 0, WB_LEVELS * sizeof db->head->next[0]);
    db->ordered = false;
    db->ndirty = 0; /* flushed before the commit: none is left */
    db->last_cur = NULL; /* LMDB freed it with the transaction */
    /* The entries stay as a cache, so the table fills over the commits;
     * doubling it rehashes every entry at once (milliseconds at tens of
     * thousands), which a group that happens to cross the line would pay.
     * It grows here instead, at the commit (a host's idle time), until it
     * takes twice what this transaction added without growing. */
    size_t need = db->used + 2 * db->added + 64;
    while (need * 2 > db->cap && !grow_slots(wb, db)) {}
    db->added = 0;
  }
}

size_t rn_wb_room(const rn_store *s, MDB_dbi dbi)
{
  if (!s->wb || dbi >= s->wb->ndbs || !s->wb->dbs[dbi]) return 0;
  const wb_db *db = s->wb->dbs[dbi];
  return db->cap / 2 > db->used ? db->cap / 2 - db->used : 0;
}

void rn_wb_free(rn_wb *wb)
{
  if (!wb) return;
  rn_wb_clear(wb);
  for (size_t i = 0; i < wb->ndbs; i++) {
    if (!wb->dbs[i]) continue;
    free(wb->dbs[i]->head);
    free(wb->dbs[i]);
  }
  free(wb->dbs);
  free(wb);
}

/* 1 - e^-x for x >= 0, within 1e-5 (no libm: the C tests link without it):
 * e^-x is (e^-(x/16))^16, the inner one by its series to the fourth power. */
static double copied_share(double x)
{
  if (x > 30) return 1;
  double y = x / 16, e = 1 - y + y * y / 2 - y * y * y / 6 + y * y * y * y / 24;
  for (int i = 0; i < 4; i++) e *= e;
  return 1 - e;
}

/* A database of L leaf pages in which k keys were written at random has
 * about L(1 - e^-(k/L)) of them copied; the branch pages are counted
 * copied. The next group is taken to write as many keys as the average
 * one so far: the transaction ends before it, not after (a group of
 * random updates may copy a sixth of the pages on its own). */
bool rn_wb_dirtied_over(rn_store *s, unsigned share, unsigned groups)
{
  if (!s->wtxn || !share || !s->written) return false;
  double dirtied = 0, pages = 0, ahead = groups ? (groups + 1.0) / groups : 1.0;
  for (MDB_dbi i = 0; i < s->written_end; i++) {
    MDB_stat st;
    if (!s->written[i] || mdb_stat(s->wtxn, i, &st)) continue;
    double leaves = (double)st.ms_leaf_pages, x = leaves > 0 ? (double)s->written[i] * ahead / leaves : 0;
    dirtied += leaves * copied_share(x) + (double)st.ms_branch_pages;
    pages += leaves + (double)st.ms_branch_pages + (double)st.ms_overflow_pages;
  }
  return pages >= RN_WB_MIN_PAGES && dirtied * share > pages;
}

size_t rn_wb_bytes(const rn_store *s)
{
  return s->wb ? s->wb->bytes : 0;
}
