/* evolve_code.c — a derived relation's functions changed between runs
 * (evolve_code.h). */
#include "evolve_code.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve.h"
#include "evolve_reads.h"
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

/* ---- a filter's or map's function, kept to run again ("fc:", "fo:") ----
 *
 *     |"\xff" "fc1"|u64 check|code|     check: code_check(code); code empty:
 *                                       the function cannot be run again
 *
 * The code is Lua bytecode, which Lua loads without verifying it: a flipped
 * byte may crash the process or run garbage. A copy is handed back to be
 * run only when its check matches. runnel 0.19 kept |code| alone (|u32 n|
 * then a dump beginning "\x1bLua"; empty: cannot be run again): without a
 * check it cannot be told from a damaged copy, and is not run either (its
 * sinks are not told, as over a state of 0.18; the copy is kept again with
 * its check at the next declaration of an unchanged function). A copy of
 * 0.19 begins with the dump's length, |u32 n|: the marker would be one of
 * 4 GB. */
#define CODE_MARKER "\xff" "fc1"
#define CODE_HEAD (4 + 8)

/* CRC-64/XZ (ECMA-182, reflected): every burst of up to 64 flipped bits is
 * caught, and any other damage but once in 2^64. Bytewise: a function's
 * copy is a few kilobytes, checked once per declaration. */
static uint64_t code_check(const void *data, size_t len)
{
  return rn_check64(data, len); /* the check of the name lists too (evolve_reads.h) */
}

/* The record keeping again (KEPT or UNKEPT), malloc'd, in *len. */
static char *code_framed(const rn_code_again *again, size_t *len)
{
  size_t n = again->kind == RN_CODE_KEPT ? again->len : 0; /* empty: it cannot be run again */
  char *out = malloc(CODE_HEAD + n);
  if (!out) return NULL;
  uint64_t check = code_check(again->code, n);
  memcpy(out, CODE_MARKER, 4);
  memcpy(out + 4, &check, 8);
  if (n) memcpy(out + CODE_HEAD, again->code, n);
  *len = CODE_HEAD + n;
  return out;
}

/* Why a kept copy is not run (rn_code_again.why). */
static const char damaged_copy[] = "the state's copy of its old function is damaged: it was not run";
static const char unchecked_copy[] = "the state's copy of its old function has no check (runnel 0.19 wrote it): "
                                     "it was not run";

/* What record v says of a function (told: "fo:", the copy of a change not
 * yet told, which is never empty): KEPT with a malloc'd copy of its code,
 * or with why it is not run; UNKEPT. */
static int code_read(rn_pipeline *p, const MDB_val *v, bool told, rn_code_again *out)
{
  const char *at = v->mv_data;
  *out = (rn_code_again){ RN_CODE_KEPT, NULL, 0, NULL };
  if (v->mv_size == 0 && !told) {
    out->kind = RN_CODE_UNKEPT; /* runnel 0.19's: it cannot be run again */
  } else if (v->mv_size >= CODE_HEAD && memcmp(at, CODE_MARKER, 4) == 0) {
    uint64_t check;
    size_t n = v->mv_size - CODE_HEAD;
    memcpy(&check, at + 4, 8);
    if (check != code_check(at + CODE_HEAD, n) || (n == 0 && told)) out->why = damaged_copy;
    else if (n == 0) out->kind = RN_CODE_UNKEPT;
    else if (!(out->code = malloc(n))) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    else memcpy(out->code, at + CODE_HEAD, n), out->len = n;
  } else if (v->mv_size >= 8 && memcmp(at + 4, "\x1bLua", 4) == 0) {
    out->why = unchecked_copy;
  } else {
    out->why = damaged_copy; /* cut, or of no shape runnel wrote */
  }
  return 0;
}

/* In txn: meta prefix name becomes a copy of v (LMDB's bytes: a put may
 * move them). */
static int put_copy(rn_pipeline *p, MDB_txn *txn, const char *prefix, const char *name, const MDB_val *v)
{
  char *copy = malloc(v->mv_size ? v->mv_size : 1);
  if (!copy) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memcpy(copy, v->mv_data, v->mv_size);
  int rc = put_meta(p, txn, prefix, name, copy, v->mv_size);
  free(copy);
  return rc;
}

/* A filter's or map's function to run again (framed, code_framed's), in
 * txn after its fingerprint (changed: it differs from the one kept). LMDB's
 * bytes are copied before any write: a put may move them. */
static int keep_code(rn_pipeline *p, MDB_txn *txn, const char *name, const char *framed, size_t len, bool changed,
                     rn_code_again *told)
{
  MDB_val now, old;
  int rc = get_meta(p, txn, RN_META_FN_NOW, name, &now);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, name);
  bool had = rc == 0;
  rc = get_meta(p, txn, RN_META_FN_TOLD, name, &old);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, name);
  bool pending = rc == 0; /* an earlier change not yet worked out: the sinks hold that one's rows */
  rc = 0;
  if (pending) {
    rc = code_read(p, &old, true, told);
  } else if (changed && !had) {
    told->kind = RN_CODE_ABSENT;
  } else if (changed) {
    rc = code_read(p, &now, false, told);
    if (!rc && told->kind == RN_CODE_KEPT) rc = put_copy(p, txn, RN_META_FN_TOLD, name, &now); /* now pending */
  }
  if (rc) return rc;
  if ((rc = get_meta(p, txn, RN_META_FN_NOW, name, &now)) && rc != MDB_NOTFOUND) {
    rc = rn_store_fail(&p->err, rc, name);
  } else {
    bool same = rc == 0 && now.mv_size == len && memcmp(now.mv_data, framed, len) == 0;
    rc = same ? 0 : put_meta(p, txn, RN_META_FN_NOW, name, framed, len);
  }
  return rc;
}

/* Adds name to p->code_changed (an allocation failing only forgets it:
 * its map is then told what changed as if its function had stayed). */
static void note_changed(rn_pipeline *p, const char *name)
{
  if (rn_code_changed_since_open(p, name)) return;
  size_t len = strlen(name) + 1;
  char *a = realloc(p->code_changed, p->code_changed_len + len);
  if (!a) return;
  memcpy(a + p->code_changed_len, name, len);
  p->code_changed = a;
  p->code_changed_len += len;
}

bool rn_code_changed_since_open(const rn_pipeline *p, const char *name)
{
  for (size_t off = 0; off < p->code_changed_len; off += strlen(p->code_changed + off) + 1)
    if (strcmp(p->code_changed + off, name) == 0) return true;
  return false;
}

int rn_code_record(rn_pipeline *p, const char *name, const char *fingerprint, size_t len)
{
  return rn_code_record_again(p, name, fingerprint, len, NULL, NULL);
}

/* In txn: the record of name's functions (hash; framed: a filter's or
 * map's to run again, or NULL); *told as rn_code_record_again's when not
 * NULL; *changed: the hash differs from the one kept. */
static int write_record(rn_pipeline *p, MDB_txn *txn, const char *name, uint64_t hash, const char *framed,
                        size_t framed_len, rn_code_again *told, bool *changed)
{
  int rc = put_hash(p, txn, name, hash, changed);
  if (!rc && *changed) rc = rn_evolve_code_changed(p, txn, name);
  if (!rc && framed) {
    rn_code_again ignored = { RN_CODE_NONE, NULL, 0, NULL };
    rc = keep_code(p, txn, name, framed, framed_len, *changed, told ? told : &ignored);
    free(ignored.code);
  }
  return rc;
}

void rn_code_done(rn_pipeline *p, bool ok)
{
  if (!ok && p->code_pending.name && p->code_changed_len > p->code_pending.changed_len)
    p->code_changed_len = p->code_pending.changed_len; /* noted by rn_code_apply: taken back */
  free(p->code_pending.name);
  free(p->code_pending.framed);
  p->code_pending.name = p->code_pending.framed = NULL;
}

int rn_code_apply(rn_pipeline *p, const char *name, MDB_txn *txn)
{
  if (!p->code_pending.name || strcmp(p->code_pending.name, name) != 0) return 0;
  bool changed = false;
  int rc = write_record(p, txn, name, p->code_pending.hash, p->code_pending.framed, p->code_pending.framed_len,
                        NULL, &changed);
  if (!rc && changed) note_changed(p, name);
  return rc;
}

int rn_code_record_again(rn_pipeline *p, const char *name, const char *fingerprint, size_t len,
                         const rn_code_again *again, rn_code_again *told)
{
  if (told) *told = (rn_code_again){ RN_CODE_NONE, NULL, 0, NULL };
  rn_code_done(p, true); /* an earlier record no declaration took: dropped */
  int rc = rn_check_declarable(p, name); /* also commits carried groups: a transaction of our own follows */
  if (rc) return rc;
  int notes = p->nnotes;
  size_t marks = p->evolved_len;
  bool changed = false, kept_marks = p->evolved_kept;
  uint64_t hash = rn_hash64(fingerprint, len);
  size_t framed_len = 0;
  char *framed = again && told ? code_framed(again, &framed_len) : NULL;
  char *kept = strdup(name);
  if (!kept || (again && told && !framed)) {
    free(kept), free(framed);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  /* What the record finds (told), in a transaction taken back: the
   * declaration writes it (rn_code_apply), finding the same. */
  MDB_txn *txn;
  if ((rc = rn_store_txn(p->store.env, 0, &txn))) {
    free(kept), free(framed);
    return rn_store_fail(&p->err, rc, name);
  }
  rc = write_record(p, txn, name, hash, framed, framed_len, told, &changed);
  mdb_txn_abort(txn);
  rn_evolve_forget(p, notes, marks); /* noted again by rn_code_apply */
  p->evolved_kept = kept_marks;
  if (rc) {
    if (told) free(told->code), *told = (rn_code_again){ RN_CODE_NONE, NULL, 0, NULL };
    free(kept), free(framed);
    return rc;
  }
  p->code_pending.name = kept;
  p->code_pending.hash = hash;
  p->code_pending.framed = framed;
  p->code_pending.framed_len = framed_len;
  p->code_pending.changed_len = p->code_changed_len;
  return 0;
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
