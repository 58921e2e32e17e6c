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
                    char *out, MDB_val *v)
{
  rn_longkey_form(key, klen, out);
  MDB_val k = { RN_LONGKEY_STORED, out };
  for (int probe = 0; probe < RN_LONGKEY_PROBES; probe++) {
    out[RN_LONGKEY_INLINE + 8] = (char)probe;
    int rc = s ? rn_wb_get(s, txn, dbi, &k, v) : mdb_get(txn, dbi, &k, v);
    if (rc) return rc; /* MDB_NOTFOUND: out is the first free probe */
    const char *stored;
    size_t len;
    if (whole(v, &stored, &len) && len == klen && memcmp(stored, key, klen) == 0) return 0; /* LONGKEY-2 */
  }
  return RN_LONGKEY_FULL;
}
