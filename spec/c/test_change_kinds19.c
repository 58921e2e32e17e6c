/* test_change_kinds19.c — a change given as msgpack (a JetStream message's
 * array of changes, rn_apply_change) whose "rel", "op" or "row" is bytes
 * or an extension value: the error says so. Before, every type JSON has no
 * name for was "a number" ("row" must be an object …, got a number), which
 * sent the user looking for a number that was never there. */
#include <string.h>

#include "check.h"
#include "ndjson.h"
#include "pipeline.h"

static msgpack_object str(const char *s)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_STR };
  o.via.str.ptr = s;
  o.via.str.size = (uint32_t)strlen(s);
  return o;
}

static msgpack_object bin(void)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_BIN };
  o.via.bin.ptr = "\1\2";
  o.via.bin.size = 2;
  return o;
}

static msgpack_object ext(void)
{
  msgpack_object o = { .type = MSGPACK_OBJECT_EXT };
  o.via.ext.type = 5;
  o.via.ext.ptr = "\1";
  o.via.ext.size = 1;
  return o;
}

/* The message applying {rel, op, row} fails with, in a group of its own. */
static const char *refused(rn_pipeline *p, msgpack_object rel, msgpack_object op, msgpack_object row)
{
  CHECK(rn_begin(p) == 0);
  CHECK(rn_apply_change(p, &rel, &op, &row, NULL) == RN_EINVAL);
  CHECK(p->state == RN_IDLE); /* the group was rolled back */
  return rn_errmsg(p);
}

static void test_bytes_and_ext_are_not_numbers(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t;
  static const rn_column_def cols[] = { { .name = "id", .type = "int" } };
  static const char *const key[] = { "id" };
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(strcmp(refused(p, str("t"), str("insert"), bin()),
               "t: \"row\" must be an object of column values, got bytes") == 0);
  CHECK(strcmp(refused(p, str("t"), str("insert"), ext()),
               "t: \"row\" must be an object of column values, got a msgpack extension value") == 0);
  CHECK(strcmp(refused(p, bin(), str("insert"), bin()),
               "\"rel\" must be a string (a relation's name), got bytes") == 0);
  CHECK(strcmp(refused(p, str("t"), ext(), bin()),
               "t: \"op\" must be a string (insert, update, upsert, delete), got a msgpack extension value") == 0);
  CHECK(rn_seq(p) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_bytes_and_ext_are_not_numbers);
  return CHECK_REPORT();
}
