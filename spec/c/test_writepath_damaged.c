/* test_writepath_damaged.c — 0.13: a keyed update packs its patch straight
 * from the stored row, reading only the columns it keeps, so a stored row
 * damaged only in columns the change replaces is overwritten, and a delete
 * passes the damaged row on as its old row. Whoever decodes that old row
 * (an in-group subscriber) must refuse it cleanly, naming the relation,
 * and roll the group back; nothing may read past the value. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damage.h"
#include "pipeline.h"
#include "store.h"

static rn_rel *declare(rn_pipeline *p)
{
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &p->err);
  rn_schema_add(s, "v", 1, RN_T_STRING, false, NULL, &p->err);
  rn_schema_add(s, "w", 1, RN_T_INT, false, NULL, &p->err);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "t", &p->err);
  rn_rel *t = NULL;
  CHECK(rn_declare_source(p, "t", RN_REL_TABLE, s, &t) == 0);
  return t;
}

static rn_pipeline *open_at(const char *dir, rn_rel **t)
{
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  *t = declare(p);
  return p;
}

static msgpack_object int_of(int64_t i)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)i };
  return o;
}

static msgpack_object str_of(const char *s)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_STR, .via.str = { (uint32_t)strlen(s), s } };
  return o;
}

/* A state at dir holding t's rows (1, "hello", 7) and (2, "two", 2). */
static void make_state(const char *dir)
{
  rn_rel *t;
  rn_pipeline *p = open_at(dir, &t);
  uint8_t given[3] = { 1, 1, 1 };
  msgpack_object a[3] = { int_of(1), str_of("hello"), int_of(7) };
  msgpack_object b[3] = { int_of(2), str_of("two"), int_of(2) };
  CHECK(rn_table_insert(t, a, given) == 0);
  CHECK(rn_table_insert(t, b, given) == 0);
  rn_pipeline_close(p);
}

/* Damages the row of t's first entry (id 1): its |id|flags| head kept, the n bytes of row after it. */
static void damage(const char *dir, const char *row, size_t n) { damage_first_row(dir, "t", 9, row, n); }

static void remove_dir(const char *dir)
{
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

typedef struct seen {
  int events;
  int verb;
} seen;

static int record(void *ctx, const rn_event *ev)
{
  seen *s = ctx;
  s->events++;
  s->verb = ev->verb;
  return 0;
}

/* The stored row of id into out (its msgpack bytes); 0 if absent. */
static size_t stored(rn_rel *t, int64_t id, char *out, size_t cap)
{
  msgpack_object k[3] = { int_of(id) };
  uint8_t given[3] = { 1, 0, 0 };
  int found = 0;
  uint64_t rid;
  const char *row;
  size_t len;
  CHECK(rn_table_get(t, k, given, &found, &rid, &row, &len) == 0);
  if (!found) return 0;
  CHECK(len <= cap);
  memcpy(out, row, len);
  return len;
}

static int patch(rn_rel *t, int64_t id, const char *v, int64_t w, bool give_v, bool give_w)
{
  msgpack_object vals[3] = { int_of(id), str_of(v ? v : ""), int_of(w) };
  uint8_t given[3] = { 1, give_v, give_w };
  return rn_table_update(t, vals, given);
}

static int delete_row(rn_rel *t, int64_t id)
{
  msgpack_object vals[3] = { int_of(id) };
  uint8_t given[3] = { 1, 0, 0 };
  return rn_table_delete(t, vals, given);
}

/* w's byte is 0xc1 (never valid msgpack): a patch of w alone overwrites it. */
static void test_damaged_last_column_overwritten(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  static const char bad[] = "\x93\x01\xa5hello\xc1";
  damage(dir, bad, sizeof bad - 1);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, &t);
  CHECK(patch(t, 1, NULL, 8, false, true) == 0);
  char row[64];
  size_t len = stored(t, 1, row, sizeof row);
  CHECK(len == 9 && memcmp(row, "\x93\x01\xa5hello\x08", 9) == 0);
  rn_pipeline_close(p);
  remove_dir(dir);
}

/* v is damaged and w is kept: the patch must read past v, and refuses. */
static void test_damaged_kept_column_refused(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  static const char bad[] = "\x93\x01\xc1\x07";
  damage(dir, bad, sizeof bad - 1);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, &t);
  CHECK(patch(t, 1, "x", 0, true, false) == RN_ESTORE);
  CHECK(strstr(p->err.msg, "t: a stored row could not be decoded") != NULL);
  char row[64];
  CHECK(stored(t, 1, row, sizeof row) == 4 && memcmp(row, bad, 4) == 0);
  rn_pipeline_close(p);
  remove_dir(dir);
}

/* Rows cut short or with a bad byte, replaced whole or deleted, with a
 * subscriber: its old row cannot be made from them, so the group is
 * refused and rolled back. */
static void test_damaged_old_row_to_subscriber(void)
{
  static const char *cases[] = { "\x93\x01\xa5he", "\x93\x01\xa5hello\xc1", "\x93\x01" };
  static const size_t lens[] = { 5, 8, 2 };
  for (int c = 0; c < 3; c++) {
    for (int op = 0; op < 2; op++) {
      char dir[] = "/tmp/runnel-ctest-XXXXXX";
      CHECK(mkdtemp(dir) != NULL);
      make_state(dir);
      damage(dir, cases[c], lens[c]);
      rn_rel *t;
      rn_pipeline *p = open_at(dir, &t);
      seen s = { 0, 0 };
      CHECK(rn_subscribe(p, t, record, &s) == 0);
      int rc = op == 0 ? patch(t, 1, "new", 9, true, true) : delete_row(t, 1);
      CHECK(rc == RN_ESTORE && s.events == 0);
      CHECK(strstr(p->err.msg, "t: a row could not be decoded") != NULL);
      char row[64];
      CHECK(stored(t, 1, row, sizeof row) == lens[c] && memcmp(row, cases[c], lens[c]) == 0); /* rolled back */
      CHECK(stored(t, 2, row, sizeof row) == 7 && memcmp(row, "\x93\x02\xa3two\x02", 7) == 0);
      rn_pipeline_close(p);
      remove_dir(dir);
    }
  }
}

/* Without a reader of the old row, a damaged row is deleted (a tombstone
 * keeping its id) and its key inserted again gets the id back. */
static void test_damaged_row_deleted_keeps_id(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  damage(dir, "\x93\x01\xa5he", 5);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, &t);
  CHECK(delete_row(t, 1) == 0);
  char row[64];
  CHECK(stored(t, 1, row, sizeof row) == 0);
  CHECK(t->count == 1);
  msgpack_object a[3] = { int_of(1), str_of("back"), int_of(1) };
  uint8_t given[3] = { 1, 1, 1 };
  CHECK(rn_table_insert(t, a, given) == 0);
  msgpack_object k[3] = { int_of(1) };
  uint8_t kg[3] = { 1, 0, 0 };
  int found = 0;
  uint64_t rid = 0;
  const char *r;
  size_t len;
  CHECK(rn_table_get(t, k, kg, &found, &rid, &r, &len) == 0 && found && rid == 1);
  rn_pipeline_close(p);
  remove_dir(dir);
}

int main(void)
{
  RUN(test_damaged_last_column_overwritten);
  RUN(test_damaged_kept_column_refused);
  RUN(test_damaged_old_row_to_subscriber);
  RUN(test_damaged_row_deleted_keeps_id);
  return CHECK_REPORT();
}
