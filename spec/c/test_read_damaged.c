/* test_read_damaged.c — a state whose stored rows were damaged (a value
 * cut short, a long-key length that lies) read from outside its pipeline
 * (rn_attach, the reader of a select over it): refused as a damaged state
 * naming the relation, never read past the value. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damage.h"
#include "pipeline.h"
#include "store.h"
#include "store_sink.h"

/* A state at dir with table t (id int key, v string) holding one row. */
static void make_state(const char *dir)
{
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &p->err);
  rn_schema_add(s, "v", 1, RN_T_STRING, false, NULL, &p->err);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "t", &p->err);
  rn_rel *t = NULL;
  CHECK(rn_declare_source(p, "t", RN_REL_TABLE, s, &t) == 0);
  msgpack_object v[2] = { { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 },
                          { .type = MSGPACK_OBJECT_STR, .via.str = { 5, "hello" } } };
  uint8_t given[2] = { 1, 1 };
  CHECK(rn_table_insert(t, v, given) == 0);
  rn_pipeline_close(p);
}

/* Replaces the value of t's first stored row by the n bytes of value. */
static void damage(const char *dir, const char *value, size_t n) { damage_first_row(dir, "t", 0, value, n); }

static int count_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id, (void)row, (void)len;
  ++*(int *)ctx;
  return 0;
}

/* Every read of t refused as damaged, naming it. */
static void check_refused(const char *dir)
{
  rn_err e = { 0 };
  rn_attached *a = NULL;
  CHECK(rn_attach(dir, "t", NULL, &a, &e) == 0);
  int rows = 0;
  CHECK(rn_attach_each(a, count_row, &rows, &e) == RN_ESTORE);
  CHECK(rows == 0);
  CHECK(strstr(e.msg, "state damaged: table \"t\": a stored row is cut short") != NULL);
  msgpack_sbuffer row;
  msgpack_sbuffer_init(&row);
  int found = 1;
  rn_err_clear(&e);
  CHECK(rn_attach_get(a, "\x01", 1, &row, &found, &e) == 0 || e.code == RN_ESTORE);
  msgpack_sbuffer_destroy(&row);
  rn_attach_close(a);
}

static void remove_dir(const char *dir)
{
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* |id|flags 3 (live, long key)| and nothing after: no key length. */
static void test_long_key_flag_without_length(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  static const char cut[10] = { 1, 0, 0, 0, 0, 0, 0, 0, 3, 0 };
  damage(dir, cut, sizeof cut);
  check_refused(dir);
  remove_dir(dir);
}

/* |id|flags 3|u32 key length past the value|. */
static void test_long_key_length_that_lies(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  static const char lying[16] = { 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0x40, 0x92, 1, 2 };
  damage(dir, lying, sizeof lying);
  check_refused(dir);
  remove_dir(dir);
}

int main(void)
{
  RUN(test_long_key_flag_without_length);
  RUN(test_long_key_length_that_lies);
  return CHECK_REPORT();
}
