/* damage.h — the C tests' way to damage a state on purpose: a source
 * table's first stored value, rewritten in place through LMDB. */
#ifndef RN_TEST_DAMAGE_H
#define RN_TEST_DAMAGE_H

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "store.h"

/* Replaces the value of table's first stored row, in the state at dir (no
 * process has it open), by the value's first keep bytes (keep 9: the
 * |id|flags| head, so only the row is damaged) followed by the n bytes at
 * bytes. */
static inline void damage_first_row(const char *dir, const char *table, size_t keep, const char *bytes, size_t n)
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  char dbname[128];
  snprintf(dbname, sizeof dbname, "%s%s", RN_DB_ROWS, table);
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, dbname, 0, &dbi) == 0);
  CHECK(mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0);
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  MDB_val k, v;
  CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST) == 0);
  char *value = malloc(keep + n + 1);
  CHECK(value && v.mv_size >= keep);
  memcpy(value, v.mv_data, keep);
  memcpy(value + keep, bytes, n);
  v = (MDB_val){ keep + n, value };
  CHECK(mdb_cursor_put(cur, &k, &v, MDB_CURRENT) == 0);
  free(value);
  mdb_cursor_close(cur);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

#endif
