/* wb_fixture.h — a store with the write-back layer on and one empty
 * database "rows", in a fresh directory, for the C tests of core/wb.c
 * (test_wb_room.c, test_wb_past_last.c). Include it once per test. */
#ifndef WB_FIXTURE_H
#define WB_FIXTURE_H

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "store.h"
#include "wb.h"

/* Opens s in dir (a mkdtemp template, filled in) with a write-back layer;
 * "rows", created empty, into *dbi. */
static void wb_store_open(rn_store *s, char *dir, MDB_dbi *dbi)
{
  CHECK(mkdtemp(dir) != NULL);
  memset(s, 0, sizeof *s);
  rn_err e = { 0 };
  CHECK(rn_store_open(s, dir, true, false, 0, 0, &e) == 0);
  s->wb = rn_wb_new();
  CHECK(s->wb != NULL);
  MDB_txn *txn;
  CHECK(mdb_txn_begin(s->env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, "rows", MDB_CREATE, dbi) == 0);
  CHECK(mdb_txn_commit(txn) == 0);
}

/* Closes s and removes dir. */
static void wb_store_close(rn_store *s, const char *dir)
{
  rn_store_close(s);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

#endif
