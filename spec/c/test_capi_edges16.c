/* test_capi_edges16.c — the C API at its edges, as a host pushing every
 * tick meets them: values a key cannot hold (NaN) refused naming the
 * relation and the key column, the group rolled back, nothing committed
 * lost; values and names a JSON sink could not write. Uses runnel.h only. */
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

/* ---- msgpack helpers ---- */

typedef struct mp {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} mp;

static void mp_begin(mp *m, size_t pairs)
{
  msgpack_sbuffer_init(&m->sb);
  msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
  msgpack_pack_map(&m->pk, pairs);
}

static void mp_str(mp *m, const char *s) { msgpack_pack_str_with_body(&m->pk, s, strlen(s)); }

/* { id, x } into t by op; its own group outside rn_begin. */
static int push_id_x(rn_pipeline *p, rn_rel *t, rn_op op, int64_t id, double x)
{
  mp m;
  mp_begin(&m, 2);
  mp_str(&m, "id");
  msgpack_pack_int64(&m.pk, id);
  mp_str(&m, "x");
  msgpack_pack_double(&m.pk, x);
  int rc = rn_push(p, t, op, m.sb.data, m.sb.size);
  msgpack_sbuffer_destroy(&m.sb);
  return rc;
}

/* rn_get of t by { id, x }: 1 found, 0 absent, -1 an error. */
static int get_id_x(rn_pipeline *p, rn_rel *t, int64_t id, double x)
{
  mp m;
  mp_begin(&m, 2);
  mp_str(&m, "id");
  msgpack_pack_int64(&m.pk, id);
  mp_str(&m, "x");
  msgpack_pack_double(&m.pk, x);
  const void *row;
  size_t len;
  int rc = rn_get(p, t, m.sb.data, m.sb.size, &row, &len, NULL);
  msgpack_sbuffer_destroy(&m.sb);
  return rc ? -1 : row != NULL;
}

static int count_rows(rn_pipeline *p, rn_rel *t)
{
  rn_cursor *c = NULL;
  if (rn_cursor_open(p, t, &c)) return -1;
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0, n = 0;
  while (rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done) n++;
  rn_cursor_close(c);
  return n;
}

static void rm_rf(const char *dir)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* ---- NaN in a key ---- */

static const rn_column_def id_x[] = { { .name = "id", .type = "int" }, { .name = "x", .type = "float" } };
static const char *const key_id_x[] = { "id", "x" };

/* A NaN for a float key column is refused, as every bad value is, naming
 * the relation and the column (the message named the relation only: with
 * a key of several columns the host could not tell which held the NaN);
 * inside a group the group is rolled back, and what was committed stays.
 * rn_get by a NaN key names the column too. */
static void test_nan_key_names_its_column(void)
{
  char dir[] = "/tmp/runnel-capi16-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = 1, .write_back = 1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "pts", id_x, 2, key_id_x, 2, &t) == 0);
  CHECK(push_id_x(p, t, RN_OP_INSERT, 1, 0.5) == 0);
  uint64_t seq = rn_seq(p);
  static const rn_op ops[] = { RN_OP_INSERT, RN_OP_UPSERT, RN_OP_UPDATE, RN_OP_DELETE };
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    CHECK(rn_begin(p) == 0);
    CHECK(push_id_x(p, t, RN_OP_INSERT, 2, 1.5) == 0);
    CHECK(push_id_x(p, t, ops[i], 3, NAN) == RN_EINVAL);
    if (!strstr(rn_errmsg(p), "pts: column \"x\": NaN cannot be part of a key"))
      fprintf(stderr, "  op %d: %s\n", (int)ops[i], rn_errmsg(p));
    CHECK(strstr(rn_errmsg(p), "pts: column \"x\": NaN cannot be part of a key") == rn_errmsg(p));
    CHECK(rn_commit(p) == RN_EMISUSE); /* rolled back: no group is open */
    CHECK(rn_seq(p) == seq && get_id_x(p, t, 2, 1.5) == 0 && count_rows(p, t) == 1);
  }
  CHECK(get_id_x(p, t, 1, NAN) == -1);
  CHECK(strstr(rn_errmsg(p), "pts: column \"x\": NaN cannot be part of a key") == rn_errmsg(p));
  CHECK(get_id_x(p, t, 1, 0.5) == 1);
  static const rn_order_def by_x[] = { { "x", 1 } };
  rn_rel *ix = NULL;
  CHECK(rn_index_declare(p, "by_x", t, by_x, 1, &ix) == 0);
  CHECK(get_id_x(p, ix, 1, NAN) == -1); /* an index is read by its input's key */
  CHECK(strstr(rn_errmsg(p), "by_x: rn_get: column \"x\": NaN is no key") == rn_errmsg(p));
  CHECK(get_id_x(p, ix, 1, 0.5) == 1);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "pts", id_x, 2, key_id_x, 2, &t) == 0);
  CHECK(rn_seq(p) == seq && count_rows(p, t) == 1 && get_id_x(p, t, 1, 0.5) == 1);
  CHECK(rn_pipeline_close(p) == 0);
  rm_rf(dir);
}

/* ---- strings nested in any, list and map columns ---- */

static const rn_column_def loose[] = { { .name = "id", .type = "int" },
                                       { .name = "a", .type = "any", .nullable = 1 },
                                       { .name = "l", .type = "list", .nullable = 1 },
                                       { .name = "m", .type = "map", .nullable = 1 } };
static const char *const key_id[] = { "id" };

/* { id, col: v } where v is packed by how: 0 a string, 1 a list of "ok"
 * and the string, 2 a map { the string: 1 }, 3 a map { "k": [the string] }. */
static int push_loose(rn_pipeline *p, rn_rel *t, int64_t id, const char *col, int how, const char *str)
{
  mp m;
  mp_begin(&m, 2);
  mp_str(&m, "id");
  msgpack_pack_int64(&m.pk, id);
  mp_str(&m, col);
  if (how == 1) {
    msgpack_pack_array(&m.pk, 2);
    mp_str(&m, "ok");
  } else if (how == 2) {
    msgpack_pack_map(&m.pk, 1);
  } else if (how == 3) {
    msgpack_pack_map(&m.pk, 1);
    mp_str(&m, "k");
    msgpack_pack_array(&m.pk, 1);
  }
  mp_str(&m, str);
  if (how == 2) msgpack_pack_int64(&m.pk, 1);
  int rc = rn_insert(p, t, m.sb.data, m.sb.size);
  msgpack_sbuffer_destroy(&m.sb);
  return rc;
}

/* The first string or bin value found in the msgpack value at o, walking
 * arrays and maps (keys first): its type into *type, its bytes compared
 * with want. */
static bool find_string(const msgpack_object *o, const char *want, msgpack_object_type *type)
{
  if ((o->type == MSGPACK_OBJECT_STR || o->type == MSGPACK_OBJECT_BIN) && o->via.str.size == strlen(want) &&
      memcmp(o->via.str.ptr, want, o->via.str.size) == 0) {
    *type = o->type;
    return true;
  }
  if (o->type == MSGPACK_OBJECT_ARRAY)
    for (uint32_t i = 0; i < o->via.array.size; i++)
      if (find_string(&o->via.array.ptr[i], want, type)) return true;
  if (o->type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < o->via.map.size; i++)
      if (find_string(&o->via.map.ptr[i].key, want, type) || find_string(&o->via.map.ptr[i].val, want, type))
        return true;
  return false;
}

/* How the string str reads back from row id of t: 's' a string, 'b' bytes,
 * '-' not found. */
static char stored_as(rn_pipeline *p, rn_rel *t, int64_t id, const char *str)
{
  mp k;
  mp_begin(&k, 1);
  mp_str(&k, "id");
  msgpack_pack_int64(&k.pk, id);
  const void *row;
  size_t len;
  char got = '-';
  if (rn_get(p, t, k.sb.data, k.sb.size, &row, &len, NULL) == 0 && row) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    msgpack_object_type type;
    if (msgpack_unpack_next(&u, row, len, NULL) == MSGPACK_UNPACK_SUCCESS && find_string(&u.data, str, &type))
      got = type == MSGPACK_OBJECT_STR ? 's' : 'b';
    msgpack_unpacked_destroy(&u);
  }
  msgpack_sbuffer_destroy(&k.sb);
  return got;
}

/* A string column refuses bytes that are not UTF-8; nested in an any,
 * list or map column (a value or a map key) such a "string" was stored as
 * a string, and every JSON writer then failed on it: an NDJSON sink said
 * "out of memory delivering group N" and stopped there for good, the
 * groups after it waiting behind. Such a value is bytes (a string is
 * UTF-8): it is stored as bytes now (JSON writes bytes as base64; Lua
 * reads either as a string), the same bytes; UTF-8 strings stay strings. */
static void test_strings_in_loose_columns_not_utf8_are_bytes(void)
{
  rn_open_opts o = { .nosync = 1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "loose", loose, 4, key_id, 1, &t) == 0);
  static const struct { const char *col; int how; } cases[] = { { "a", 0 }, { "a", 1 }, { "a", 2 }, { "a", 3 },
                                                               { "l", 1 }, { "m", 2 }, { "m", 3 } };
  static const char *const bad[] = { "\xff", "caf\xc3", "\xed\xa0\x80" /* a surrogate */, "ok\xc0\xaf" };
  const char *utf8 = "Stra\xc3\x9f" "e \xe2\x82\xac";
  int64_t id = 1;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    CHECK(push_loose(p, t, id, cases[i].col, cases[i].how, utf8) == 0);
    CHECK(stored_as(p, t, id++, utf8) == 's');
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++, id++) {
      CHECK(push_loose(p, t, id, cases[i].col, cases[i].how, bad[b]) == 0);
      char got = stored_as(p, t, id, bad[b]);
      if (got != 'b') fprintf(stderr, "  %s/%d/%zu: stored as %c\n", cases[i].col, cases[i].how, b, got);
      CHECK(got == 'b');
    }
  }
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- names that are not UTF-8 ---- */

/* Names are UTF-8 (DESIGN §3): one that is not was declared, and a sink
 * writing JSON could not write the rows: an NDJSON sink of a table with
 * the column "i\xc3d" stopped at its first group ("out of memory
 * delivering group 1"), for good. Refused at the declaration now, naming
 * the relation; UTF-8 names beyond ASCII are taken. */
static void test_names_that_are_not_utf8_are_refused(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  rn_column_def bad_col[] = { { .name = "i\xc3" "d", .type = "int" }, { .name = "v", .type = "string" } };
  const char *const bad_key[] = { "i\xc3" "d" };
  CHECK(rn_declare_table(p, "t", bad_col, 2, bad_key, 1, &t) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "t: ") == rn_errmsg(p) && strstr(rn_errmsg(p), "not valid UTF-8"));
  CHECK(rn_declare_stream(p, "s", bad_col, 2, &t) == RN_EINVAL && strstr(rn_errmsg(p), "not valid UTF-8"));
  rn_column_def good[] = { { .name = "Stra\xc3\x9f" "e", .type = "int" }, { .name = "v", .type = "string" } };
  const char *const good_key[] = { "Stra\xc3\x9f" "e" };
  CHECK(rn_declare_table(p, "t\xff", good, 2, good_key, 1, &t) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "not valid UTF-8") != NULL);
  CHECK(rn_relation(p, "t") == NULL && rn_relation(p, "t\xff") == NULL && rn_relation(p, "s") == NULL);
  CHECK(rn_declare_table(p, "\xe2\x82\xac", good, 2, good_key, 1, &t) == 0);
  rn_order_def order[] = { { "Stra\xc3\x9f" "e", 1 } };
  rn_top_def def = { .n = 2, .order = order, .norder = 1, .rank = "r\xff" };
  rn_rel *top = NULL;
  CHECK(rn_top_declare(p, "best", t, &def, &top) == RN_EINVAL && strstr(rn_errmsg(p), "not valid UTF-8"));
  def.rank = NULL;
  CHECK(rn_top_declare(p, "best\xc0", t, &def, &top) == RN_EINVAL && strstr(rn_errmsg(p), "not valid UTF-8"));
  CHECK(rn_top_declare(p, "best", t, &def, &top) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- a durable subscriber that refuses ---- */

static int take(void *ctx, const rn_event *ev) { (void)ev; ++*(int *)ctx; return 0; }
static int refuse(void *ctx, const rn_event *ev) { (void)ev; ++*(int *)ctx; return 42; }

/* A durable subscriber's refusal, as rn_deliver (or the commit, the flush)
 * reports it, names the subscriber and where it stopped: it said
 * "t: subscriber returned 42", and with two durable subscribers on t the
 * host could not tell which one holds the groups back. */
static void test_durable_refusal_names_the_subscriber(void)
{
  rn_open_opts o = { .nosync = 1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  static const rn_column_def id_only[] = { { .name = "id", .type = "int" } };
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", id_only, 1, key_id, 1, &t) == 0);
  int took = 0, refused = 0;
  CHECK(rn_subscribe_durable(p, t, "audit", take, &took) == 0);
  CHECK(rn_subscribe_durable(p, t, "billing", refuse, &refused) == 0);
  CHECK(rn_insert(p, t, "\x81\xa2id\x01", 5) == 0 && rn_insert(p, t, "\x81\xa2id\x02", 5) == 0);
  CHECK(rn_flush(p) == 0);
  CHECK(took == 2 && refused == 1);
  CHECK(rn_deliver(p) == RN_ECALLBACK);
  if (!strstr(rn_errmsg(p), "billing")) fprintf(stderr, "  %s\n", rn_errmsg(p));
  CHECK(strstr(rn_errmsg(p), "t: durable subscriber billing: subscriber returned 42 at change 1 of group 1") == rn_errmsg(p));
  CHECK(strstr(rn_errmsg(p), "group 1") != NULL);
  CHECK(took == 2 && refused >= 2); /* tried again, taken by the other once */
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- map keys JSON would write as one ---- */

/* { id: 1, m: { k1: 1, k2: 2 } } with the two keys packed by kinds:
 * 'i' int, 's' string, 'b' bool, 'f' float; the texts give the values. */
static int push_two_keys(rn_pipeline *p, rn_rel *t, const char *col, char k1, const char *v1, char k2, const char *v2)
{
  mp m;
  mp_begin(&m, 2);
  mp_str(&m, "id");
  msgpack_pack_int64(&m.pk, 1);
  mp_str(&m, col);
  msgpack_pack_map(&m.pk, 2);
  const char kinds[2] = { k1, k2 };
  const char *vals[2] = { v1, v2 };
  for (int i = 0; i < 2; i++) {
    if (kinds[i] == 'i') msgpack_pack_int64(&m.pk, strtoll(vals[i], NULL, 10));
    else if (kinds[i] == 'f') msgpack_pack_double(&m.pk, strtod(vals[i], NULL));
    else if (kinds[i] == 'b') { if (strcmp(vals[i], "true") == 0) msgpack_pack_true(&m.pk); else msgpack_pack_false(&m.pk); }
    else mp_str(&m, vals[i]);
    msgpack_pack_int64(&m.pk, i);
  }
  int rc = rn_upsert(p, t, m.sb.data, m.sb.size);
  msgpack_sbuffer_destroy(&m.sb);
  return rc;
}

/* A map's keys are written to JSON as text (an NDJSON sink, SQLite's
 * JSON for map and any values): the keys 1 and "1" were stored as two
 * and written as {"1":…,"1":…}, a line runnel's own reader refuses
 * ("duplicate key") and other readers take one of. Refused at the change,
 * naming the column and both keys; keys whose texts differ are taken. */
static void test_map_keys_one_in_json_are_refused(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "loose", loose, 4, key_id, 1, &t) == 0);
  static const struct { char k1; const char *v1; char k2; const char *v2; } clash[] = {
    { 'i', "1", 's', "1" }, { 's', "true", 'b', "true" }, { 'f', "2.5", 's', "2.5" }, { 'f', "inf", 'f', "-inf" },
    { 's', "null", 'f', "inf" }, { 'i', "-7", 's', "-7" },
  };
  for (size_t i = 0; i < sizeof clash / sizeof *clash; i++)
    for (int col = 0; col < 2; col++) {
      const char *name = col ? "a" : "m";
      CHECK(push_two_keys(p, t, name, clash[i].k1, clash[i].v1, clash[i].k2, clash[i].v2) == RN_EINVAL);
      char want[64];
      snprintf(want, sizeof want, "loose: column \"%s\": ", name);
      if (strstr(rn_errmsg(p), want) != rn_errmsg(p) || !strstr(rn_errmsg(p), "JSON"))
        fprintf(stderr, "  %zu/%s: %s\n", i, name, rn_errmsg(p));
      CHECK(strstr(rn_errmsg(p), want) == rn_errmsg(p) && strstr(rn_errmsg(p), "JSON"));
    }
  CHECK(count_rows(p, t) == 0);
  static const struct { char k1; const char *v1; char k2; const char *v2; } fine[] = {
    { 'i', "1", 's', "2" }, { 'i', "1", 'i', "2" }, { 'f', "1.5", 's', "1.50" }, { 'b', "true", 's', "True" },
    { 'f', "2.0", 's', "2" },
  };
  for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
    int rc = push_two_keys(p, t, "m", fine[i].k1, fine[i].v1, fine[i].k2, fine[i].v2);
    if (rc) fprintf(stderr, "  fine %zu: %s\n", i, rn_errmsg(p));
    CHECK(rc == 0);
  }
  CHECK(count_rows(p, t) == 1);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_nan_key_names_its_column);
  RUN(test_strings_in_loose_columns_not_utf8_are_bytes);
  RUN(test_names_that_are_not_utf8_are_refused);
  RUN(test_durable_refusal_names_the_subscriber);
  RUN(test_map_keys_one_in_json_are_refused);
  return CHECK_REPORT();
}
