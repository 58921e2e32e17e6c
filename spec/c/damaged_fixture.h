/* damaged_fixture.h — what the C tests of damaged states share
 * (test_state_damaged10.c, test_state_damaged11.c): a pipeline opened on
 * a directory, its notes gathered, a database's entries counted, and a
 * keyed table whose ids have gaps. Include it once per test, after
 * raw_meta_fixture.h and push_fixture.h. */
#ifndef DAMAGED_FIXTURE_H
#define DAMAGED_FIXTURE_H

#include <lmdb.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "runnel.h"

/* The number of entries of the named database db. */
static size_t raw_entries(const char *dir, const char *db)
{
  MDB_txn *txn;
  MDB_dbi meta, dbi;
  MDB_stat st = { 0 };
  MDB_env *env = raw_open(dir, &txn, &meta);
  CHECK(mdb_dbi_open(txn, db, 0, &dbi) == 0);
  CHECK(mdb_stat(txn, dbi, &st) == 0);
  raw_close(env, txn);
  return st.ms_entries;
}

static rn_pipeline *open_at(const char *dir)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  return p;
}

static const rn_column_def k_col[] = { { "k", "int", 0, NULL, 0, NULL } };
static const char *const k_key[] = { "k" };

/* The notes not yet told, one after another, each ending in "\n". */
static void gather(void *ctx, const char *line)
{
  size_t at = strlen(ctx);
  snprintf((char *)ctx + at, 8192 - at, "%s\n", line);
}

static void take_notes(rn_pipeline *p, char *notes)
{
  notes[0] = '\0';
  CHECK(rn_take_notes(p, gather, notes) >= 0);
}

static int delete_int(rn_pipeline *p, rn_rel *t, int64_t v)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, "k", 1);
  msgpack_pack_int64(&pk, v);
  int rc = rn_delete(p, t, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* Table t's counters "n:t" rewritten. */
static void put_counters(const char *dir, uint64_t next_id, uint64_t count, uint64_t seq)
{
  uint64_t c[3] = { next_id, count, seq };
  raw_put(dir, "n:t", c, sizeof c);
}

/* A keyed table t whose ids are not 1..n (its counters once raised, as a
 * damaged "n:" that said more than it held leaves them: harmless), with
 * keys 1 to 3 (ids 1 to 3) and key 4 deleted, its tombstone holding id
 * 10: 4 entries; its counters: next id 11, 3 rows, group 5. */
static void make_gapped_state(const char *dir)
{
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  for (int k = 1; k <= 3; k++) CHECK(insert_int(p, t, "k", k) == 0);
  rn_pipeline_close(p);
  put_counters(dir, 10, 3, 3);
  if (!(p = open_at(dir))) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(insert_int(p, t, "k", 4) == 0);
  CHECK(delete_int(p, t, 4) == 0);
  rn_pipeline_close(p);
  CHECK(raw_entries(dir, "t:t") == 4);
  size_t len;
  uint64_t c[3] = { 0 };
  char *v = raw_get(dir, "n:t", &len);
  CHECK(v && len == 24);
  if (v) memcpy(c, v, sizeof c);
  CHECK(c[0] == 11 && c[1] == 3 && c[2] == 5);
  free(v);
}

#endif
