/* test_join_read.c — a join read from outside its pipeline (join_read.c,
 * reader.h): its rows made from the state by a stand-in join; a mapper's
 * right keys taken from the index, a long one (hashed there) made again
 * from on slots, for a mapper found among the right rows; an entry of an older state
 * without its joiner's result, a state without the declaration record,
 * and a damaged record, each refused with what to do. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "join_fixture.h"
#include "join.h"
#include "pipeline.h"
#include "row.h"
#include "store.h"
#include "store_sink.h"

#define LONG_KEY 450 /* past RN_JOIN_FK_INLINE: the index files it under a hash */

/* The right key of a player: its "team" column. */
static int mapper(void *ctx, rn_rel *left, const char *row, size_t len, msgpack_object *out, int nkey, int *has_key,
                  msgpack_zone *z, rn_err *e)
{
  (void)ctx; (void)nkey; (void)e;
  const msgpack_object *v = rn_row_unpack(row, len, left->schema->ncols, z);
  out[0] = v[1];
  *has_key = 1;
  return 0;
}

static rn_rel *table(rn_pipeline *p, const char *name, const char *col, rn_type key_type, rn_type type)
{
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, key_type, false, NULL, &p->err);
  rn_schema_add(s, col, strlen(col), type, false, NULL, &p->err);
  int key = 0;
  rn_schema_set_key(s, &key, 1, name, &p->err);
  rn_rel *r = NULL;
  CHECK(rn_declare_source(p, name, RN_REL_TABLE, s, &r) == 0);
  return r;
}

static rn_rel *join(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right, bool kept, bool mapped)
{
  rn_schema *s = NULL;
  if (kept) {
    s = rn_schema_new();
    rn_schema_add(s, "pid", 3, RN_T_INT, false, NULL, &p->err);
    rn_schema_add(s, "tname", 5, RN_T_STRING, true, NULL, &p->err);
    int key = 0;
    rn_schema_set_key(s, &key, 1, name, &p->err);
  }
  int on = 1;
  rn_join_spec spec = { RN_JOIN_LEFT, mapped ? NULL : &on, mapped ? 0 : 1, s, NULL, NULL, 0, NULL, NULL };
  rn_join_fns fns = { .joiner = kept ? pid_tname_joiner : NULL, .mapper = mapped ? mapper : NULL };
  rn_rel *j = NULL;
  CHECK(rn_declare_join(p, name, left, right, &spec, &fns, &j) == 0);
  return j;
}

static int put(rn_rel *r, const msgpack_object *id, const msgpack_object *col)
{
  msgpack_object v[2] = { *id, *col };
  uint8_t given[2] = { 1, 1 };
  return rn_table_insert(r, v, given);
}

static msgpack_object int_of(int64_t i)
{
  return (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)i };
}

static msgpack_object str_of(const char *s)
{
  return (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { (uint32_t)strlen(s), s } };
}

typedef struct seen {
  int rows;
  char text[1024];        /* "id:name," per row: its id, its second column when a string (else "-") */
} seen;

static int see(void *ctx, uint64_t id, const char *row, size_t len)
{
  seen *s = ctx;
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  msgpack_object whole;
  size_t off = 0;
  CHECK(rn_unpack(row, len, &off, &z, &whole) == MSGPACK_UNPACK_SUCCESS && whole.type == MSGPACK_OBJECT_ARRAY &&
        whole.via.array.size >= 2);
  const msgpack_object *v = whole.via.array.ptr;
  size_t at = strlen(s->text);
  if (v[1].type == MSGPACK_OBJECT_STR)
    snprintf(s->text + at, sizeof s->text - at, "%llu:%.*s,", (unsigned long long)id,
             v[1].via.str.size > 8 ? 8 : (int)v[1].via.str.size, v[1].via.str.ptr);
  else snprintf(s->text + at, sizeof s->text - at, "%llu:-,", (unsigned long long)id);
  msgpack_zone_destroy(&z);
  s->rows++;
  return 0;
}

/* Reads relation name of the state at dir: 0 and what it saw, or the error. */
static int read_rel(const char *dir, const char *name, seen *s, rn_err *e)
{
  memset(s, 0, sizeof *s);
  rn_err_clear(e);
  rn_attached *a = NULL;
  int rc = rn_attach(dir, name, NULL, &a, e);
  if (!rc) rc = rn_attach_each(a, see, s, e);
  rn_attach_close(a);
  return rc;
}

/* Runs fn on the state's environment in a write transaction. */
static void edit(const char *dir, void (*fn)(MDB_txn *txn, MDB_dbi meta))
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi meta;
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, RN_DB_META, 0, &meta) == 0);
  fn(txn, meta);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

/* As a state written before results were kept: no bit, no result. */
static void without_results(MDB_txn *txn, MDB_dbi meta)
{
  (void)meta;
  MDB_dbi dbi;
  MDB_cursor *cur;
  CHECK(mdb_dbi_open(txn, "ji:kept", 0, &dbi) == 0);
  CHECK(mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0);
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char buf[512], key[512];
    uint32_t llen;
    memcpy(key, k.mv_data, k.mv_size);
    k.mv_data = key;
    memcpy(&llen, (char *)v.mv_data + 8, 4);
    llen &= ~RN_JOIN_KEPT;
    memcpy(buf, v.mv_data, 12 + llen);
    memcpy(buf + 8, &llen, 4);
    v = (MDB_val){ 12 + llen, buf };
    CHECK(mdb_cursor_put(cur, &k, &v, MDB_CURRENT) == 0);
  }
  mdb_cursor_close(cur);
}

static void without_record(MDB_txn *txn, MDB_dbi meta)
{
  MDB_val k = { 7, (void *)RN_META_AGG_DECL "plain" };
  CHECK(mdb_del(txn, meta, &k, NULL) == 0);
}

static void damaged_record(MDB_txn *txn, MDB_dbi meta)
{
  MDB_val k = { 7, (void *)RN_META_AGG_DECL "plain" }, v = { 3, (void *)"\x93\x01\x02" };
  CHECK(mdb_put(txn, meta, &k, &v, 0) == 0);
}

static void remove_dir(const char *dir)
{
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static void test_kept_declared_and_refused(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *teams = table(p, "teams", "name", RN_T_INT, RN_T_STRING);
  rn_rel *players = table(p, "players", "team", RN_T_INT, RN_T_INT);
  join(p, "kept", players, teams, true, false);
  join(p, "plain", players, teams, false, false);
  join(p, "mapped", players, teams, false, true);
  msgpack_object one = int_of(1), two = int_of(2), ten = int_of(10), eleven = int_of(11), red = str_of("red");
  CHECK(put(teams, &one, &red) == 0);
  CHECK(put(players, &ten, &one) == 0);
  CHECK(put(players, &eleven, &two) == 0); /* no team 2: a left join's nils */
  rn_pipeline_close(p);

  seen s;
  rn_err e;
  CHECK(read_rel(dir, "kept", &s, &e) == 0 && strcmp(s.text, "1:red,2:-,") == 0);
  CHECK(read_rel(dir, "plain", &s, &e) == 0 && s.rows == 2);
  CHECK(read_rel(dir, "mapped", &s, &e) == 0 && s.rows == 2); /* its right keys from the index */

  edit(dir, without_results);
  CHECK(read_rel(dir, "kept", &s, &e) == RN_EINVAL);
  CHECK(strstr(e.msg, "kept: a row written by an older runnel does not hold its result, which the joiner (a Lua "
                      "function in the script) computes") != NULL);
  edit(dir, without_record);
  CHECK(read_rel(dir, "plain", &s, &e) == RN_EINVAL);
  CHECK(strstr(e.msg, "join \"plain\" was last declared by an older runnel: run its pipeline once with this one, "
                      "then read it") != NULL);
  edit(dir, damaged_record);
  CHECK(read_rel(dir, "plain", &s, &e) == RN_ESTORE);
  CHECK(strstr(e.msg, "state damaged: join \"plain\": its declaration record is malformed") != NULL);
  remove_dir(dir);
}

static void test_long_right_keys(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *right = table(p, "codes", "label", RN_T_STRING, RN_T_STRING);
  rn_rel *left = table(p, "users", "code", RN_T_INT, RN_T_STRING);
  join(p, "by_on", left, right, false, false);
  join(p, "by_mapper", left, right, false, true);
  char code[LONG_KEY + 1];
  memset(code, 'c', LONG_KEY);
  code[LONG_KEY] = '\0';
  msgpack_object key = str_of(code), label = str_of("label"), one = int_of(1);
  CHECK(put(right, &key, &label) == 0);
  CHECK(put(left, &one, &key) == 0);
  rn_pipeline_close(p);

  seen s;
  rn_err e;
  CHECK(read_rel(dir, "by_on", &s, &e) == 0 && s.rows == 1); /* made again from on */
  /* the whole key found among the right rows (before: refused, "a right key longer than 400 bytes, made by the
   * mapper (a Lua function in the script), is read only by its pipeline") */
  CHECK(read_rel(dir, "by_mapper", &s, &e) == 0 && s.rows == 1);
  remove_dir(dir);
}

int main(void)
{
  RUN(test_kept_declared_and_refused);
  RUN(test_long_right_keys);
  return CHECK_REPORT();
}
