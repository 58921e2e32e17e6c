/* longkey.c — stored forms of keys longer than an LMDB key (longkey.h). */
#include "longkey.h"

#include <string.h>

#include "key.h"
#include "wb.h"

void rn_longkey_form(const char *key, size_t klen, char *out)
{
  memcpy(out, key, RN_LONGKEY_INLINE < klen ? RN_LONGKEY_INLINE : klen);
  if (klen < RN_LONGKEY_INLINE) memset(out + klen, 0, RN_LONGKEY_INLINE - klen); /* owners hash only longer keys */
  rn_be64_put(out + RN_LONGKEY_INLINE, rn_hash64(key, klen));
  out[RN_LONGKEY_INLINE + 8] = 0;
}

/* Walks at most RN_LONGKEY_PROBES entries: bounded. */
int rn_longkey_find(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const char *key, size_t klen, rn_longkey_whole_fn whole,
                    void *ctx, char *out, MDB_val *v)
{
  rn_longkey_form(key, klen, out);
  MDB_val k = { RN_LONGKEY_STORED, out };
  for (int probe = 0; probe < RN_LONGKEY_PROBES; probe++) {
    out[RN_LONGKEY_INLINE + 8] = (char)probe;
    int rc = s ? rn_wb_get(s, txn, dbi, &k, v) : mdb_get(txn, dbi, &k, v);
    if (rc) return rc; /* MDB_NOTFOUND: out is the first free probe */
    const char *stored;
    size_t len;
    if (whole(ctx, v, &stored, &len) && len == klen && memcmp(stored, key, klen) == 0) return 0; /* LONGKEY-2 */
  }
  return RN_LONGKEY_FULL;
}

/* Walks the entries of one hash: at most RN_LONGKEY_PROBES. */
int rn_longkey_seek(MDB_txn *txn, MDB_dbi dbi, const char *key, size_t klen, rn_longkey_whole_fn whole, void *ctx,
                    char *out, MDB_val *v)
{
  rn_longkey_form(key, klen, out);
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, dbi, &cur);
  if (rc) return rc;
  unsigned char used[RN_LONGKEY_PROBES / 8] = { 0 };
  MDB_val k = { RN_LONGKEY_STORED, out }, d;
  for (rc = mdb_cursor_get(cur, &k, &d, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &d, MDB_NEXT)) {
    if (k.mv_size != RN_LONGKEY_STORED || memcmp(k.mv_data, out, RN_LONGKEY_STORED - 1) != 0) break;
    unsigned char probe = ((const unsigned char *)k.mv_data)[RN_LONGKEY_STORED - 1];
    used[probe / 8] |= (unsigned char)(1u << (probe % 8));
    const char *stored;
    size_t len;
    if (whole(ctx, &d, &stored, &len) && len == klen && memcmp(stored, key, klen) == 0) { /* LONGKEY-2 */
      out[RN_LONGKEY_STORED - 1] = (char)probe;
      *v = d;
      mdb_cursor_close(cur);
      return 0;
    }
  }
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) return rc;
  for (int probe = 0; probe < RN_LONGKEY_PROBES; probe++)
    if (!(used[probe / 8] & (1u << (probe % 8)))) {
      out[RN_LONGKEY_STORED - 1] = (char)probe;
      return MDB_NOTFOUND;
    }
  return RN_LONGKEY_FULL;
}
