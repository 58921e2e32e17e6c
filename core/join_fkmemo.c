/* join_fkmemo.c — the mapper's keys by the bytes it read (join_fkmemo.h). */
#include "join_fkmemo.h"

#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "row.h"

#define SLOT_BYTES 52
#define SLOT_BITS 14
_Static_assert(RN_FKMEMO_SLOTS == 1 << SLOT_BITS, "RN_FKMEMO_SLOTS is 2^SLOT_BITS");

/* One remembered call: what it read, and the key it gave. */
typedef struct slot {
  uint64_t mask;          /* the columns it read */
  uint8_t used, null;
  uint8_t cols_len;       /* bytes[0..cols_len): the read columns' encodings, in slot order */
  uint8_t key_len;        /* then the key's encoding */
  char bytes[SLOT_BYTES];
} slot;

/* A mapper whose read bytes rarely repeat (a key read from a unique column
 * of a big table) would pay a probe and a store for every call: after a
 * window of WINDOW probes with fewer than WINDOW / 16 hits, the memo rests
 * (neither probed nor filled) for REST calls, then tries again. */
#define WINDOW 4096
#define REST (16 * WINDOW)

struct rn_fkmemo {
  uint64_t masks[RN_FKMEMO_MASKS]; /* the masks of recent calls, most recent first */
  int nmasks;
  uint32_t probes, hits;  /* in the current window */
  uint32_t resting;       /* calls left to rest */
  slot slots[RN_FKMEMO_SLOTS];
};

/* Counts a probe (hit or not); false while resting. */
static bool awake(rn_fkmemo *m)
{
  if (m->resting) { m->resting--; return false; }
  if (++m->probes < WINDOW) return true;
  if (m->hits < WINDOW / 16) m->resting = REST;
  m->probes = m->hits = 0;
  return true;
}

/* 1 + the last slot mask names (bit 63: every slot from 63 on). */
static int upto_of(uint64_t mask, int ncols)
{
  if (mask >> 63) return ncols;
  int upto = mask ? 64 - __builtin_clzll(mask) : 0;
  return upto < ncols ? upto : ncols;
}

/* Appends the encoding of column c to buf (n bytes used of cap); false
 * when it does not fit. */
static bool append_col(const char *row, const size_t *starts, int c, char *buf, size_t cap, size_t *n)
{
  size_t w = starts[c + 1] - starts[c];
  if (w > cap - *n) return false;
  memcpy(buf + *n, row + starts[c], w);
  *n += w;
  return true;
}

/* The encodings of the columns of mask below upto, concatenated into buf
 * (at most cap bytes); -1 when they do not fit. Each is one whole msgpack
 * value, so equal concatenations under one mask are equal columns. */
static int read_bytes(const char *row, const size_t *starts, int upto, uint64_t mask, char *buf, size_t cap)
{
  size_t n = 0;
  for (uint64_t low = mask & ~(1ULL << 63); low; low &= low - 1) { /* slots 0..62: a bit each */
    int c = __builtin_ctzll(low);
    if (c >= upto) break;
    if (!append_col(row, starts, c, buf, cap, &n)) return -1;
  }
  if (mask >> 63) /* bit 63: every slot from 63 on */
    for (int c = 63; c < upto; c++) if (!append_col(row, starts, c, buf, cap, &n)) return -1;
  return (int)n;
}

static slot *slot_of(rn_fkmemo *m, uint64_t mask, const char *bytes, size_t n)
{
  uint64_t h = (rn_hash64(bytes, n) ^ (mask * 0x9E3779B97F4A7C15ULL)) * 0x9E3779B97F4A7C15ULL;
  return &m->slots[h >> (64 - SLOT_BITS)];
}

bool rn_fkmemo_find(rn_fkmemo *m, const char *row, size_t len, int ncols, uint64_t *mask, rn_fkmemo_key *key)
{
  if (!m || !awake(m) || !m->nmasks) return false;
  int upto = 0;
  for (int i = 0; i < m->nmasks; i++) {
    int u = upto_of(m->masks[i], ncols);
    if (u > upto) upto = u;
  }
  size_t starts[upto + 1];
  if (upto && rn_row_spans(row, len, ncols, upto, starts) != 0) return false;
  char buf[SLOT_BYTES];
  for (int i = 0; i < m->nmasks; i++) {
    uint64_t mk = m->masks[i];
    int n = read_bytes(row, starts, upto_of(mk, ncols), mk, buf, sizeof buf);
    if (n < 0) continue;
    const slot *s = slot_of(m, mk, buf, (size_t)n);
    if (!s->used || s->mask != mk || s->cols_len != n || memcmp(s->bytes, buf, (size_t)n) != 0) continue;
    m->hits++;
    *mask = mk;
    *key = (rn_fkmemo_key){ .null = s->null, .enc = s->bytes + n, .len = s->key_len };
    return true;
  }
  return false;
}

/* mask becomes the first one probed. */
static void note_mask(rn_fkmemo *m, uint64_t mask)
{
  int at = 0;
  while (at < m->nmasks && m->masks[at] != mask) at++;
  if (at == m->nmasks && m->nmasks < RN_FKMEMO_MASKS) m->nmasks++;
  if (at == RN_FKMEMO_MASKS) at--; /* the least recent goes */
  memmove(m->masks + 1, m->masks, (size_t)at * sizeof *m->masks);
  m->masks[0] = mask;
}

void rn_fkmemo_store(rn_fkmemo **m, const char *row, size_t len, int ncols, uint64_t mask, const rn_fkmemo_key *key)
{
  size_t key_len = key->null ? 0 : key->len;
  if (key_len > SLOT_BYTES || (*m && (*m)->resting)) return;
  int upto = upto_of(mask, ncols);
  size_t starts[upto + 1];
  if (upto && rn_row_spans(row, len, ncols, upto, starts) != 0) return;
  char buf[SLOT_BYTES];
  int n = read_bytes(row, starts, upto, mask, buf, SLOT_BYTES - key_len);
  if (n < 0) return;
  if (!*m && !(*m = calloc(1, sizeof **m))) return;
  note_mask(*m, mask);
  slot *s = slot_of(*m, mask, buf, (size_t)n);
  s->used = 1;
  s->mask = mask;
  s->null = key->null;
  s->cols_len = (uint8_t)n;
  s->key_len = (uint8_t)key_len;
  memcpy(s->bytes, buf, (size_t)n);
  if (key_len) memcpy(s->bytes + n, key->enc, key_len);
}

void rn_fkmemo_free(rn_fkmemo *m)
{
  free(m);
}
