/* raw_meta_fixture.h — a state's meta records read and rewritten straight
 * in LMDB while no process has the state open: for the C tests of what
 * runnel reads back from a damaged state (test_state_damaged9.c,
 * test_state_damaged10.c, test_event_ids14.c, the NDJSON file record tests).
 * Include it once per test. */
#ifndef RAW_META_FIXTURE_H
#define RAW_META_FIXTURE_H

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "store.h"

static inline void cleanup(const char *dir)
{
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

static inline MDB_env *raw_open(const char *dir, MDB_txn **txn, MDB_dbi *dbi)
{
  MDB_env *env;
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, txn) == 0);
  CHECK(mdb_dbi_open(*txn, RN_DB_META, 0, dbi) == 0);
  return env;
}

static inline void raw_close(MDB_env *env, MDB_txn *txn)
{
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

static inline void raw_put(const char *dir, const char *key, const void *val, size_t len)
{
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_env *env = raw_open(dir, &txn, &dbi);
  MDB_val k = { strlen(key), (void *)key }, v = { len, (void *)val };
  CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0);
  raw_close(env, txn);
}

/* Removes key (it must be there). */
static inline void raw_del(const char *dir, const char *key)
{
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_env *env = raw_open(dir, &txn, &dbi);
  MDB_val k = { strlen(key), (void *)key };
  CHECK(mdb_del(txn, dbi, &k, NULL) == 0);
  raw_close(env, txn);
}

/* The value of key, malloc'd, in *len (NULL: none). */
static inline char *raw_get(const char *dir, const char *key, size_t *len)
{
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_env *env = raw_open(dir, &txn, &dbi);
  MDB_val k = { strlen(key), (void *)key }, v;
  char *out = NULL;
  if (mdb_get(txn, dbi, &k, &v) == 0 && (out = malloc(v.mv_size + 1))) memcpy(out, v.mv_data, v.mv_size);
  *len = out ? v.mv_size : 0;
  raw_close(env, txn);
  return out;
}

#endif
