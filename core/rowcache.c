/* rowcache.c — keyed rows read in the write transaction (rowcache.h). */
#include "rowcache.h"

#include "bytes.h"

#include <stdlib.h>
#include <string.h>

typedef struct slot {
  uint64_t gen;           /* the cache's gen when filled (1); 0: empty */
  uint64_t id;
  MDB_dbi dbi;
  uint8_t klen;
  bool found, live;
  uint16_t row_len;
  char key[RN_ROWCACHE_KEY_MAX];
  char row[RN_ROWCACHE_ROW_MAX];
} slot;

struct rn_rowcache {
  uint64_t gen;           /* slots of another gen are stale */
  size_t committed;       /* LMDB id of the last write transaction the store committed (0: unknown) */
  uint64_t filled[RN_ROWCACHE_MAX_DBI / 64]; /* a bit per dbi a read was kept for */
  slot slots[RN_ROWCACHE_SLOTS];
};

rn_rowcache *rn_rowcache_new(void)
{
  rn_rowcache *c = calloc(1, sizeof *c);
  if (c) c->gen = 1;
  return c;
}

void rn_rowcache_began(rn_rowcache *c, size_t txnid)
{
  if (c && (!c->committed || txnid != c->committed + 1)) c->gen++;
}

void rn_rowcache_committed(rn_rowcache *c, size_t txnid)
{
  if (c) c->committed = txnid;
}

void rn_rowcache_passed(rn_rowcache *c, size_t txnid)
{
  if (c && c->committed && txnid == c->committed + 1) c->committed = txnid;
}

void rn_rowcache_aborted(rn_rowcache *c)
{
  if (!c) return;
  c->gen++;
  c->committed = 0;
}

void rn_rowcache_free(rn_rowcache *c) { free(c); }

/* A hash of the key's words, mixed so that every bit reaches the slot
 * number (an int key is a tag and 8 big-endian bytes: its varying low
 * bytes straddle the two words). */
static slot *slot_of(rn_rowcache *c, MDB_dbi dbi, const char *key, size_t klen)
{
  const uint64_t mul = 0x9E3779B97F4A7C15ull;
  uint64_t h = ((uint64_t)dbi << 8 ^ klen) * mul;
  size_t i = 0;
  for (; i + 8 <= klen; i += 8) {
    uint64_t w;
    memcpy(&w, key + i, 8);
    h = (h ^ w) * mul;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  for (; i < klen; i++) tail = tail << 8 | (unsigned char)key[i];
  h = (h ^ tail) * mul;
  h ^= h >> 29;
  h *= mul;
  return &c->slots[h >> (64 - RN_ROWCACHE_BITS)];
}

bool rn_rowcache_get(rn_rowcache *c, MDB_dbi dbi, const char *key, size_t klen, rn_cached_row *out)
{
  if (klen > RN_ROWCACHE_KEY_MAX) return false;
  const slot *s = slot_of(c, dbi, key, klen);
  if (s->gen != c->gen || s->dbi != dbi || s->klen != klen || !rn_same_bytes(s->key, key, klen)) return false;
  *out = (rn_cached_row){ s->found, s->live, s->id, s->live ? s->row : NULL, s->row_len };
  return true;
}

static void keep(slot *s, uint64_t gen, MDB_dbi dbi, const char *key, size_t klen, const rn_cached_row *now)
{
  s->gen = gen;
  s->dbi = dbi;
  s->klen = (uint8_t)klen;
  memcpy(s->key, key, klen);
  s->found = now->found;
  s->live = now->live;
  s->id = now->id;
  s->row_len = (uint16_t)(now->live ? now->row_len : 0);
  if (now->live) memcpy(s->row, now->row, now->row_len);
}

static bool fits(MDB_dbi dbi, size_t klen, const rn_cached_row *now)
{
  return dbi < RN_ROWCACHE_MAX_DBI && klen <= RN_ROWCACHE_KEY_MAX && (!now->live || now->row_len <= RN_ROWCACHE_ROW_MAX);
}

void rn_rowcache_fill(rn_rowcache *c, MDB_dbi dbi, const char *key, size_t klen, const rn_cached_row *now)
{
  if (!fits(dbi, klen, now)) return;
  c->filled[dbi / 64] |= 1ull << (dbi % 64);
  keep(slot_of(c, dbi, key, klen), c->gen, dbi, key, klen, now);
}

void rn_rowcache_wrote(rn_rowcache *c, MDB_dbi dbi, const char *key, size_t klen, const rn_cached_row *now)
{
  if (dbi >= RN_ROWCACHE_MAX_DBI || !(c->filled[dbi / 64] >> (dbi % 64) & 1) || klen > RN_ROWCACHE_KEY_MAX) return;
  slot *s = slot_of(c, dbi, key, klen);
  if (s->dbi != dbi || s->klen != klen || !rn_same_bytes(s->key, key, klen)) return;
  if (fits(dbi, klen, now)) keep(s, c->gen, dbi, key, klen, now);
  else s->gen = 0;
}
