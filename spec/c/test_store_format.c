/* test_store_format.c — the numbers and names a state holds are a file
 * format (store.h): a state one build wrote, every build reads. These pin
 * them, so a renumbered enum or a renamed prefix fails here first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "join.h"
#include "pipeline.h"

static void test_kinds_are_pinned(void)
{
  static const struct { rn_relkind kind; int value; const char *name; } kinds[] = {
    { RN_REL_TABLE, 0, "table" }, { RN_REL_STREAM, 1, "stream" }, { RN_REL_FILTER, 2, "filter" },
    { RN_REL_MAP, 3, "map" }, { RN_REL_CDC, 4, "cdc" }, { RN_REL_JOIN, 5, "join" },
    { RN_REL_AGGREGATE, 6, "aggregate" }, { RN_REL_LOOKUP, 7, "lookup" }, { RN_REL_DISTINCT, 8, "distinct" },
    { RN_REL_TOP, 9, "top" }, { RN_REL_INDEX, 10, "index" },
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    CHECK((int)kinds[i].kind == kinds[i].value);
    CHECK(strcmp(rn_relkind_name(kinds[i].value), kinds[i].name) == 0);
  }
  CHECK(strcmp(rn_relkind_name(11), "?") == 0 && strcmp(rn_relkind_name(-1), "?") == 0);
  CHECK(RN_INSERT == 1 && RN_UPDATE == 2 && RN_DELETE == 3); /* the outbox's verbs */
}

static void test_prefixes_are_pinned(void)
{
  CHECK(strcmp(RN_DB_META, "meta") == 0 && strcmp(RN_DB_OUTBOX, "outbox") == 0);
  CHECK(strcmp(RN_META_SEQ, "seq") == 0 && strcmp(RN_META_RELATION, "r:") == 0);
  CHECK(strcmp(RN_META_COUNTERS, "n:") == 0 && strcmp(RN_META_STORE, "S:") == 0);
  CHECK(strcmp(RN_META_DURABLE, "od:") == 0 && strcmp(RN_META_DURABLE_HASHED, "od#") == 0);
  CHECK(strcmp(RN_SINK_NAMED, "sink:") == 0 && strcmp(RN_SINK_NDJSON, "ndjson:") == 0);
  CHECK(strcmp(RN_SINK_SQLITE, "sqlite:") == 0);
  CHECK(strcmp(RN_DB_ROWS, "t:") == 0 && strcmp(RN_DB_ROW_HASHES, "h:") == 0);
  CHECK(strcmp(RN_DB_JOIN_INDEX, "ji:") == 0 && strcmp(RN_DB_JOIN_RESULTS, "jr:") == 0);
  CHECK(strcmp(RN_DB_JOIN_RIGHT, "jc:") == 0 && strcmp(RN_DB_AGG_GROUPS, "ag:") == 0);
  CHECK(strcmp(RN_DB_DISTINCT_ROWS, "dr:") == 0 && strcmp(RN_DB_DISTINCT_HASHES, "dh:") == 0);
  CHECK(strcmp(RN_DB_AGG_VALUES, "am:") == 0 && strcmp(RN_DB_AGG_WINDOWS, "aw:") == 0);
  CHECK(strcmp(RN_DB_STORE, "st:") == 0);
  CHECK(strcmp(RN_DB_TOP_ROWS, "tt:") == 0 && strcmp(RN_DB_TOP_REST, "tx:") == 0);
  CHECK(strcmp(RN_DB_TOP_DECL, "tp:") == 0 && strcmp(RN_DB_INDEX, "ix:") == 0);
  CHECK(RN_PREFIX_LEN(RN_DB_JOIN_INDEX) == 3);
  CHECK(RN_JOIN_KEPT == 0x80000000u); /* "ji:" left length: the entry holds its emitted result (join.h) */
}

/* A table's catalogue entry starts with its kind, and its counters are
 * three numbers once a group has written them. */
static void test_catalogue_entry_as_drawn(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &e);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "docs", &e);
  rn_rel *r = NULL;
  CHECK(rn_declare_source(p, "docs", RN_REL_TABLE, s, &r) == 0);
  msgpack_object id = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
  uint8_t given = 1;
  CHECK(rn_table_insert(r, &id, &given) == 0);
  MDB_txn *txn;
  CHECK(mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &txn) == 0);
  MDB_val k = { 6, (void *)RN_META_RELATION "docs" }, v;
  CHECK(mdb_get(txn, p->store.meta, &k, &v) == 0);
  CHECK(v.mv_size > 2 && ((unsigned char *)v.mv_data)[0] == 0x92 && ((unsigned char *)v.mv_data)[1] == RN_REL_TABLE);
  k.mv_data = (void *)RN_META_COUNTERS "docs";
  CHECK(mdb_get(txn, p->store.meta, &k, &v) == 0 && v.mv_size == 24);
  mdb_txn_abort(txn);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_kinds_are_pinned);
  RUN(test_prefixes_are_pinned);
  RUN(test_catalogue_entry_as_drawn);
  return CHECK_REPORT();
}
