/* evolve_code.c — a derived relation's functions changed between runs
 * (evolve_code.h). */
#include "evolve_code.h"

#include <stdio.h>
#include <string.h>

#include "evolve.h"
#include "key.h"

/* In txn: "fn:" name becomes hash; *changed when it held another. */
static int put_hash(rn_pipeline *p, MDB_txn *txn, const char *name, uint64_t hash, bool *changed)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_CODE, name), key }, v;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  *changed = rc == 0 && (v.mv_size != sizeof hash || memcmp(v.mv_data, &hash, sizeof hash) != 0);
  if (rc == 0 && !*changed) return 0;
  v = (MDB_val){ sizeof hash, &hash };
  if (rc == 0 || rc == MDB_NOTFOUND) rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, name) : 0;
}

int rn_code_record(rn_pipeline *p, const char *name, const char *fingerprint, size_t len)
{
  int rc = rn_check_declarable(p, name); /* also commits carried groups: a transaction of our own follows */
  if (rc) return rc;
  int notes = p->nnotes;
  size_t marks = p->evolved_len;
  bool changed = false;
  MDB_txn *txn;
  if ((rc = rn_store_txn(p->store.env, 0, &txn))) return rn_store_fail(&p->err, rc, name);
  rc = put_hash(p, txn, name, rn_hash64(fingerprint, len), &changed);
  if (!rc && changed) rc = rn_evolve_code_changed(p, txn, name);
  if (rc) {
    mdb_txn_abort(txn);
  } else if ((rc = mdb_txn_commit(txn))) {
    rc = rn_store_write_fail(&p->store, &p->err, rc, name);
  }
  if (rc) rn_evolve_forget(p, notes, marks);
  return rc;
}
