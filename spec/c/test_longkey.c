/* test_longkey.c — hashed forms of long keys (longkey.h): hash neighbours
 * (the same first bytes and hash) take the next probe and are told apart
 * by their whole keys (LONGKEY-2); rn_longkey_seek finds a key past a
 * removed probe, which rn_longkey_find (for owners that never remove,
 * LONGKEY-1) may not; every probe taken is RN_LONGKEY_FULL. Entries are
 * written by hand: the value of each is the whole key it stands for, so a
 * neighbour needs no real hash collision. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "longkey.h"

static MDB_env *env;
static MDB_dbi dbi;

static bool whole_is_value(void *ctx, const MDB_val *v, const char **key, size_t *klen)
{
  (void)ctx;
  *key = v->mv_data;
  *klen = v->mv_size;
  return true;
}

/* Writes whole key `stands_for` at key's hashed form, probe `probe`. */
static void put_at(MDB_txn *txn, const char *key, size_t klen, int probe, const char *stands_for, size_t slen)
{
  char form[RN_LONGKEY_STORED];
  rn_longkey_form(key, klen, form);
  form[RN_LONGKEY_STORED - 1] = (char)probe;
  MDB_val k = { sizeof form, form }, v = { slen, (void *)stands_for };
  CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0);
}

static void del_at(MDB_txn *txn, const char *key, size_t klen, int probe)
{
  char form[RN_LONGKEY_STORED];
  rn_longkey_form(key, klen, form);
  form[RN_LONGKEY_STORED - 1] = (char)probe;
  MDB_val k = { sizeof form, form };
  CHECK(mdb_del(txn, dbi, &k, NULL) == 0);
}

static char x[600], y[600], z[5000];

static void test_neighbours_apart(void)
{
  MDB_txn *txn;
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, NULL, 0, &dbi) == 0);
  char out[RN_LONGKEY_STORED];
  MDB_val v;
  CHECK(rn_longkey_find(NULL, txn, dbi, x, sizeof x, whole_is_value, NULL, out, &v) == MDB_NOTFOUND);
  CHECK(out[RN_LONGKEY_STORED - 1] == 0);
  put_at(txn, x, sizeof x, 0, y, sizeof y);  /* a neighbour of x took probe 0 */
  CHECK(rn_longkey_find(NULL, txn, dbi, x, sizeof x, whole_is_value, NULL, out, &v) == MDB_NOTFOUND);
  CHECK(out[RN_LONGKEY_STORED - 1] == 1);
  CHECK(rn_longkey_seek(txn, dbi, x, sizeof x, whole_is_value, NULL, out, &v) == MDB_NOTFOUND);
  CHECK(out[RN_LONGKEY_STORED - 1] == 1);
  put_at(txn, x, sizeof x, 1, x, sizeof x);
  CHECK(rn_longkey_find(NULL, txn, dbi, x, sizeof x, whole_is_value, NULL, out, &v) == 0);
  CHECK(out[RN_LONGKEY_STORED - 1] == 1 && v.mv_size == sizeof x && memcmp(v.mv_data, x, sizeof x) == 0);
  /* the neighbour removed (a store): seek still finds x, and hands out probe 0 */
  del_at(txn, x, sizeof x, 0);
  CHECK(rn_longkey_seek(txn, dbi, x, sizeof x, whole_is_value, NULL, out, &v) == 0);
  CHECK(out[RN_LONGKEY_STORED - 1] == 1);
  CHECK(rn_longkey_seek(txn, dbi, y, sizeof y, whole_is_value, NULL, out, &v) == MDB_NOTFOUND);
  mdb_txn_abort(txn);
}

static void test_full(void)
{
  MDB_txn *txn;
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  char out[RN_LONGKEY_STORED];
  MDB_val v;
  for (int probe = 0; probe < RN_LONGKEY_PROBES; probe++) put_at(txn, z, sizeof z, probe, y, sizeof y);
  CHECK(rn_longkey_find(NULL, txn, dbi, z, sizeof z, whole_is_value, NULL, out, &v) == RN_LONGKEY_FULL);
  CHECK(rn_longkey_seek(txn, dbi, z, sizeof z, whole_is_value, NULL, out, &v) == RN_LONGKEY_FULL);
  put_at(txn, z, sizeof z, 200, z, sizeof z);
  CHECK(rn_longkey_seek(txn, dbi, z, sizeof z, whole_is_value, NULL, out, &v) == 0);
  CHECK(out[RN_LONGKEY_STORED - 1] == (char)200);
  mdb_txn_abort(txn);
}

/* Keys differing only past the first RN_LONGKEY_INLINE bytes differ in
 * their hashed forms' hash. */
static void test_forms(void)
{
  char fx[RN_LONGKEY_STORED], fy[RN_LONGKEY_STORED];
  rn_longkey_form(x, sizeof x, fx);
  rn_longkey_form(y, sizeof y, fy);
  CHECK(memcmp(fx, fy, RN_LONGKEY_INLINE) == 0);
  CHECK(memcmp(fx, fy, RN_LONGKEY_STORED) != 0);
  CHECK(memcmp(fx, x, RN_LONGKEY_INLINE) == 0);
}

int main(void)
{
  char dir[] = "/tmp/rn_longkey_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  memset(x, 'a', sizeof x);
  memset(y, 'a', sizeof y);
  y[sizeof y - 1] = 'b';
  memset(z, 'z', sizeof z);
  int rc = mdb_env_create(&env);
  if (!rc) rc = mdb_env_set_mapsize(env, 64 << 20);
  if (!rc) rc = mdb_env_open(env, dir, 0, 0600);
  if (rc) return 1;
  RUN(test_neighbours_apart);
  RUN(test_full);
  RUN(test_forms);
  mdb_env_close(env);
  char path[64];
  snprintf(path, sizeof path, "%s/data.mdb", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/lock.mdb", dir);
  unlink(path);
  rmdir(dir);
  return CHECK_REPORT();
}
