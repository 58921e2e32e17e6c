/* evolve_code.c — a derived relation's functions changed between runs
 * (evolve_code.h). */
#include "evolve_code.h"

#include <stdio.h>
#include <stdlib.h>
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

/* In txn: meta prefix name into *v (MDB_NOTFOUND: none). */
static int get_meta(rn_pipeline *p, MDB_txn *txn, const char *prefix, const char *name, MDB_val *v)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", prefix, name), key };
  return mdb_get(txn, p->store.meta, &k, v);
}

static int put_meta(rn_pipeline *p, MDB_txn *txn, const char *prefix, const char *name, const void *data, size_t len)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", prefix, name), key }, v = { len, (void *)data };
  int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, name) : 0;
}

/* A filter's or map's function to run again (again), in txn after its
 * fingerprint (changed: it differs from the one kept). LMDB's bytes are
 * copied before any write: a put may move them. */
static int keep_code(rn_pipeline *p, MDB_txn *txn, const char *name, const rn_code_again *again, bool changed,
                     rn_code_again *told)
{
  MDB_val now, old;
  int rc = get_meta(p, txn, RN_META_FN_NOW, name, &now);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, name);
  bool had = rc == 0;
  size_t len = again->kind == RN_CODE_KEPT ? again->len : 0; /* empty: it cannot be run again */
  bool same = had && now.mv_size == len && (len == 0 || memcmp(now.mv_data, again->code, len) == 0);
  rc = get_meta(p, txn, RN_META_FN_TOLD, name, &old);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, name);
  bool pending = rc == 0; /* an earlier change not yet worked out: the sinks hold that one's rows */
  if (changed && !pending) {
    told->kind = !had ? RN_CODE_ABSENT : now.mv_size == 0 ? RN_CODE_UNKEPT : RN_CODE_KEPT;
    if (told->kind == RN_CODE_KEPT) old = now, pending = true;
  }
  if (pending) {
    told->kind = RN_CODE_KEPT;
    if (!(told->code = malloc(old.mv_size ? old.mv_size : 1))) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    memcpy(told->code, old.mv_data, old.mv_size);
    told->len = old.mv_size;
    if (changed && (rc = put_meta(p, txn, RN_META_FN_TOLD, name, told->code, told->len))) return rc;
  }
  return same ? 0 : put_meta(p, txn, RN_META_FN_NOW, name, len ? again->code : "", len);
}

int rn_code_record(rn_pipeline *p, const char *name, const char *fingerprint, size_t len)
{
  return rn_code_record_again(p, name, fingerprint, len, NULL, NULL);
}

int rn_code_record_again(rn_pipeline *p, const char *name, const char *fingerprint, size_t len,
                         const rn_code_again *again, rn_code_again *told)
{
  if (told) *told = (rn_code_again){ RN_CODE_NONE, NULL, 0 };
  int rc = rn_check_declarable(p, name); /* also commits carried groups: a transaction of our own follows */
  if (rc) return rc;
  int notes = p->nnotes;
  size_t marks = p->evolved_len;
  bool changed = false;
  MDB_txn *txn;
  if ((rc = rn_store_txn(p->store.env, 0, &txn))) return rn_store_fail(&p->err, rc, name);
  rc = put_hash(p, txn, name, rn_hash64(fingerprint, len), &changed);
  if (!rc && changed) rc = rn_evolve_code_changed(p, txn, name);
  if (!rc && again && told) rc = keep_code(p, txn, name, again, changed, told);
  if (rc) {
    mdb_txn_abort(txn);
  } else if ((rc = mdb_txn_commit(txn))) {
    rc = rn_store_write_fail(&p->store, &p->err, rc, name);
  }
  if (rc) {
    rn_evolve_forget(p, notes, marks);
    if (told) free(told->code), *told = (rn_code_again){ RN_CODE_NONE, NULL, 0 };
  }
  return rc;
}

int rn_code_told(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_FN_TOLD, name), key };
  int rc = mdb_del(txn, p->store.meta, &k, NULL);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(&p->err, rc, name);
}

bool rn_code_untold(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  MDB_val v;
  return get_meta(p, txn, RN_META_FN_TOLD, name, &v) == 0;
}
