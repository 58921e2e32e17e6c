/* test_capi_edges3.c — the C API at its edges, third round: what a key
 * map may hold besides the key, a map_size LMDB cannot map, calls in a
 * forked child that had no fork check, and integers a float column cannot
 * hold. Regressions it guards (each failed before its fix) are named on
 * their tests. */
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" },
                                      { .name = "name", .type = "string" },
                                      { .name = "f", .type = "float", .nullable = 1 } };
static const char *const key[] = { "id" };

/* A msgpack map built by the tests: pairs of a column name and a value. */
typedef struct mp {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} mp;

static void mp_map(mp *m, size_t n)
{
  msgpack_sbuffer_init(&m->sb);
  msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
  msgpack_pack_map(&m->pk, n);
}

static void mp_name(mp *m, const char *name) { msgpack_pack_str_with_body(&m->pk, name, strlen(name)); }
static void mp_int(mp *m, const char *name, int64_t v) { mp_name(m, name); msgpack_pack_int64(&m->pk, v); }
static void mp_uint(mp *m, const char *name, uint64_t v) { mp_name(m, name); msgpack_pack_uint64(&m->pk, v); }
static void mp_double(mp *m, const char *name, double v) { mp_name(m, name); msgpack_pack_double(&m->pk, v); }
static void mp_str(mp *m, const char *name, const char *v)
{
  mp_name(m, name);
  msgpack_pack_str_with_body(&m->pk, v, strlen(v));
}

static int push(rn_pipeline *p, rn_rel *t, rn_op op, mp *m)
{
  int rc = rn_push(p, t, op, m->sb.data, m->sb.size);
  msgpack_sbuffer_destroy(&m->sb);
  return rc;
}

static int get(rn_pipeline *p, rn_rel *t, mp *m, const void **row, size_t *len)
{
  int rc = rn_get(p, t, m->sb.data, m->sb.size, row, len, NULL);
  msgpack_sbuffer_destroy(&m->sb);
  return rc;
}

/* {id, name, f} into t. */
static int insert_row(rn_pipeline *p, rn_rel *t, int64_t id, const char *name, double f)
{
  mp m;
  mp_map(&m, 3);
  mp_int(&m, "id", id);
  mp_str(&m, "name", name);
  mp_double(&m, "f", f);
  return push(p, t, RN_OP_INSERT, &m);
}

/* Whether t holds a row of key id. */
static int has(rn_pipeline *p, rn_rel *t, int64_t id)
{
  mp m;
  mp_map(&m, 1);
  mp_int(&m, "id", id);
  const void *row = NULL;
  size_t len = 0;
  int rc = get(p, t, &m, &row, &len);
  return rc ? -1 : row != NULL;
}

static int errmsg_is(rn_pipeline *p, const char *want)
{
  if (strcmp(rn_errmsg(p), want) == 0) return 1;
  fprintf(stderr, "  message: %s\n  wanted:  %s\n", rn_errmsg(p), want);
  return 0;
}

static void open_table(rn_pipeline **p, rn_rel **t)
{
  CHECK(rn_pipeline_open(NULL, p, NULL, 0) == 0);
  CHECK(rn_declare_table(*p, "t", cols, 3, key, 1, t) == 0);
  CHECK(insert_row(*p, *t, 1, "ann", 1.5) == 0);
}

/* ---- 1. a key map's columns ---- */

/* A name that is no column of the relation is refused, by rn_get and by
 * rn_delete, naming the relation and the column; the delete rolls its
 * group back. */
static void test_key_map_with_an_unknown_column_is_refused(void)
{
  rn_pipeline *p;
  rn_rel *t;
  open_table(&p, &t);
  mp m;
  const void *row = (const void *)1;
  size_t len;
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_int(&m, "bogus", 2);
  CHECK(get(p, t, &m, &row, &len) == RN_EINVAL && row == NULL);
  CHECK(errmsg_is(p, "t: unknown column \"bogus\""));
  CHECK(rn_begin(p) == 0);
  CHECK(insert_row(p, t, 2, "bo", 2.5) == 0);
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_int(&m, "bogus", 2);
  CHECK(push(p, t, RN_OP_DELETE, &m) == RN_EINVAL);
  CHECK(errmsg_is(p, "t: unknown column \"bogus\""));
  CHECK(rn_commit(p) == RN_EMISUSE); /* the group was rolled back */
  CHECK(has(p, t, 1) == 1 && has(p, t, 2) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* A known column that is no key column may be given (a whole row is a
 * key): it is checked as an insert checks it, then not used. Regression:
 * rn_get and rn_delete skipped it unchecked, so {"id": 1, "name": 2}
 * deleted row 1 where Lua's t:delete refused the same key. */
static void test_key_map_non_key_columns_are_checked_then_not_used(void)
{
  rn_pipeline *p;
  rn_rel *t;
  open_table(&p, &t);
  mp m;
  const void *row = (const void *)1;
  size_t len;
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_int(&m, "name", 2);
  CHECK(get(p, t, &m, &row, &len) == RN_EINVAL && row == NULL);
  CHECK(errmsg_is(p, "t: column \"name\": expected string, got number"));
  CHECK(rn_begin(p) == 0);
  CHECK(insert_row(p, t, 2, "bo", 2.5) == 0);
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_int(&m, "name", 2);
  CHECK(push(p, t, RN_OP_DELETE, &m) == RN_EINVAL);
  CHECK(errmsg_is(p, "t: column \"name\": expected string, got number"));
  CHECK(rn_commit(p) == RN_EMISUSE); /* rolled back: row 2 is gone, row 1 stays */
  CHECK(has(p, t, 1) == 1 && has(p, t, 2) == 0);
  /* A null for a column that takes none, in a key map, is bad input too. */
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_name(&m, "name");
  msgpack_pack_nil(&m.pk);
  CHECK(push(p, t, RN_OP_DELETE, &m) == RN_EINVAL);
  CHECK(errmsg_is(p, "t: column \"name\": null given but the column is not nullable"));
  CHECK(has(p, t, 1) == 1);
  /* Well typed, they are not used: the key alone finds the row. */
  mp_map(&m, 3);
  mp_int(&m, "id", 1);
  mp_str(&m, "name", "someone else");
  mp_double(&m, "f", 99.0);
  CHECK(get(p, t, &m, &row, &len) == 0 && row != NULL);
  /* The row rn_get handed out is a key: rn_get and rn_delete take it whole. */
  char *whole = malloc(len);
  memcpy(whole, row, len);
  size_t whole_len = len;
  CHECK(rn_get(p, t, whole, whole_len, &row, &len, NULL) == 0 && row != NULL && len == whole_len);
  CHECK(rn_delete(p, t, whole, whole_len) == 0);
  CHECK(has(p, t, 1) == 0);
  free(whole);
  CHECK(insert_row(p, t, 3, "cy", 3.5) == 0);
  mp_map(&m, 3);
  mp_int(&m, "id", 3);
  mp_str(&m, "name", "not cy");
  mp_double(&m, "f", 0.0);
  CHECK(push(p, t, RN_OP_DELETE, &m) == 0);
  CHECK(has(p, t, 3) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* The same for a derived relation read by its input's key (a top): an
 * unknown name refused, a wrongly typed non-key column refused. */
static void test_derived_key_map_columns(void)
{
  rn_pipeline *p;
  rn_rel *t, *top;
  open_table(&p, &t);
  static const rn_order_def order[] = { { "f", 1 } };
  rn_top_def def = { .n = 3, .order = order, .norder = 1 };
  CHECK(rn_top_declare(p, "top", t, &def, &top) == 0);
  mp m;
  const void *row = (const void *)1;
  size_t len;
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_int(&m, "bogus", 2);
  CHECK(get(p, top, &m, &row, &len) == RN_EINVAL && row == NULL);
  CHECK(errmsg_is(p, "top: unknown column \"bogus\""));
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_int(&m, "name", 2);
  CHECK(get(p, top, &m, &row, &len) == RN_EINVAL && row == NULL);
  CHECK(errmsg_is(p, "top: column \"name\": expected string, got number"));
  mp_map(&m, 2);
  mp_int(&m, "id", 1);
  mp_int(&m, "rank", 7); /* a well typed non-key column: not used */
  CHECK(get(p, top, &m, &row, &len) == 0 && row != NULL);
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- 2. map_size ---- */

static int dir_exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0;
}

/* Regression: SIZE_MAX, or a size mmap refuses, failed with "<dir>:
 * Cannot allocate memory", not saying which option. Now the option and
 * its value are named; SIZE_MAX is refused before anything is made. */
static void test_map_size_too_large_is_named(void)
{
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/rn_edges3_XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  char path[96];
  snprintf(path, sizeof path, "%s/st", dir);
  char err[512] = "";
  rn_pipeline *p = NULL;
  rn_open_opts o = { .path = path, .map_size = SIZE_MAX };
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == RN_EINVAL && p == NULL);
  char want[256];
  snprintf(want, sizeof want, "open: map_size %zu is too large: at most %zu bytes (0: 64 MiB; the map grows by itself)",
           (size_t)SIZE_MAX, (size_t)SIZE_MAX / 2);
  CHECK(strcmp(err, want) == 0);
  if (strcmp(err, want)) fprintf(stderr, "  got: %s\n", err);
  CHECK(!dir_exists(path)); /* refused before the directory was made */
  for (int writemap = 0; writemap <= 1; writemap++) {
    o = (rn_open_opts){ .path = path, .map_size = (size_t)1 << 60, .writemap = writemap };
    err[0] = '\0';
    int rc = rn_pipeline_open(&o, &p, err, sizeof err);
    CHECK(rc != 0 && p == NULL);
    CHECK(strncmp(err, "open: map_size 1152921504606846976: LMDB could not map that many bytes (", 72) == 0);
    CHECK(strstr(err, "): give a smaller one (0: 64 MiB; the map grows by itself)") != NULL);
    if (!strstr(err, "map_size 1152921504606846976")) fprintf(stderr, "  got: %s\n", err);
  }
  o = (rn_open_opts){ .path = path, .map_size = (size_t)2 << 20 }; /* the same state, a sane size */
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* ---- 3. calls in a forked child ---- */

#define FORKED "before a fork; open it again in this process"

static void never(void *ctx, uint64_t seq)
{
  (void)ctx;
  (void)seq;
}

static int list_one(void *ctx, const char *name, const char *kind)
{
  (void)name;
  (void)kind;
  ++*(int *)ctx;
  return 0;
}

/* In the child: each call refused with the fork's message; the child's
 * exit status is the first that was not (0: all were). */
static int child_calls(rn_pipeline *p, rn_rel *t)
{
  int n = 0;
  if (rn_on_durable(p, never, NULL) != RN_EMISUSE || !strstr(rn_errmsg(p), FORKED)) return 1;
  if (rn_undeclared(p, list_one, &n) != RN_EMISUSE || !strstr(rn_errmsg(p), FORKED) || n) return 2;
  rn_js_sink_opts js = { .url = "nats://127.0.0.1:1", .subject = "edges3" };
  if (rn_jetstream_sink(p, t, &js) != RN_EMISUSE || !strstr(rn_errmsg(p), FORKED)) return 3;
  return rn_pipeline_close(p) == 0 ? 0 : 4;
}

/* Regression: rn_on_durable (and rn_undeclared, rn_jetstream_sink) had no
 * fork check: the child's hook was added to a pipeline whose commits it
 * can never make, rn_undeclared read the parent's LMDB environment. */
static void test_forked_child_calls_are_refused(void)
{
  rn_pipeline *p;
  rn_rel *t;
  open_table(&p, &t);
  pid_t pid = fork();
  if (pid == 0) _exit(child_calls(p, t));
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) fprintf(stderr, "  child failed at call %d\n", WEXITSTATUS(status));
  int n = 0;
  CHECK(rn_on_durable(p, never, NULL) == 0); /* the parent's calls go on */
  CHECK(rn_undeclared(p, list_one, &n) == 0 && n == 0);
  CHECK(insert_row(p, t, 2, "bo", 2.5) == 0 && has(p, t, 2) == 1);
  CHECK(rn_pipeline_close(p) == 0);
}

/* Regression: rn_deliver looked at the group state before the fork: a
 * child whose parent had a group open was told "not inside a group"
 * instead of the fork message every other call gives. */
static void test_forked_child_deliver_names_the_fork(void)
{
  rn_pipeline *p;
  rn_rel *t;
  open_table(&p, &t);
  CHECK(rn_begin(p) == 0);
  pid_t pid = fork();
  if (pid == 0) _exit(rn_deliver(p) == RN_EMISUSE && strstr(rn_errmsg(p), FORKED) ? 0 : 1);
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(rn_deliver(p) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- 5. integers for a float column ---- */

static double stored_f(rn_pipeline *p, rn_rel *t, int64_t id)
{
  mp m;
  mp_map(&m, 1);
  mp_int(&m, "id", id);
  const void *row = NULL;
  size_t len = 0;
  if (get(p, t, &m, &row, &len) || !row) return -1;
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object o;
  double f = -2;
  if (msgpack_unpack(row, len, NULL, &z, &o) == MSGPACK_UNPACK_SUCCESS)
    for (uint32_t i = 0; i < o.via.map.size; i++)
      if (o.via.map.ptr[i].key.via.str.size == 1 && o.via.map.ptr[i].key.via.str.ptr[0] == 'f')
        f = o.via.map.ptr[i].val.type == MSGPACK_OBJECT_FLOAT64 ? o.via.map.ptr[i].val.via.f64 : -3;
  msgpack_zone_destroy(&z);
  return f;
}

/* {id, name, f} with f an integer, signed or not. */
static int insert_int_f(rn_pipeline *p, rn_rel *t, int64_t id, int is_unsigned, uint64_t u, int64_t i)
{
  mp m;
  mp_map(&m, 3);
  mp_int(&m, "id", id);
  mp_str(&m, "name", "n");
  if (is_unsigned) mp_uint(&m, "f", u);
  else mp_int(&m, "f", i);
  return push(p, t, RN_OP_INSERT, &m);
}

#define BEYOND "an integer no float holds: beyond ±2^53 not every integer is a float"

/* Regression: 2^53 + 1 given as an integer to a float column was stored
 * as 2^53, silently another number. Now such an integer is refused naming
 * the relation and the column, and its group rolls back; an integer a
 * double holds exactly (within ±2^53, or 2^60, -2^63) is taken. */
static void test_float_column_refuses_an_integer_no_float_holds(void)
{
  rn_pipeline *p;
  rn_rel *t;
  open_table(&p, &t);
  CHECK(rn_begin(p) == 0);
  CHECK(insert_row(p, t, 2, "bo", 2.5) == 0);
  CHECK(insert_int_f(p, t, 3, 1, 9007199254740993ULL, 0) == RN_EINVAL);
  CHECK(errmsg_is(p, "t: column \"f\": expected float, got number 9007199254740993, " BEYOND " (this one would be "
                     "stored as 9007199254740992): give it as a float (9007199254740993.0) to store the nearest one"));
  CHECK(rn_commit(p) == RN_EMISUSE); /* the group was rolled back */
  CHECK(has(p, t, 2) == 0 && has(p, t, 3) == 0);
  CHECK(insert_int_f(p, t, 4, 0, 0, -9007199254740993LL) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "t: column \"f\": expected float, got number -9007199254740993, " BEYOND) != NULL);
  CHECK(insert_int_f(p, t, 5, 1, UINT64_MAX, 0) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "got number 18446744073709551615, " BEYOND) != NULL);
  CHECK(insert_int_f(p, t, 6, 0, 0, INT64_MAX) == RN_EINVAL);
  CHECK(has(p, t, 4) == 0 && has(p, t, 5) == 0 && has(p, t, 6) == 0);
  /* Exact ones are taken, stored as floats. */
  CHECK(insert_int_f(p, t, 7, 1, 9007199254740992ULL, 0) == 0 && stored_f(p, t, 7) == 9007199254740992.0);
  CHECK(insert_int_f(p, t, 8, 0, 0, -9007199254740992LL) == 0 && stored_f(p, t, 8) == -9007199254740992.0);
  CHECK(insert_int_f(p, t, 9, 1, 1ULL << 60, 0) == 0 && stored_f(p, t, 9) == 1152921504606846976.0);
  CHECK(insert_int_f(p, t, 10, 0, 0, INT64_MIN) == 0 && stored_f(p, t, 10) == -9223372036854775808.0);
  CHECK(insert_int_f(p, t, 11, 1, 1ULL << 63, 0) == 0 && stored_f(p, t, 11) == 9223372036854775808.0);
  CHECK(insert_int_f(p, t, 12, 0, 0, 42) == 0 && stored_f(p, t, 12) == 42.0);
  /* An update, and a float given as such (the caller's rounding), too. */
  mp m;
  mp_map(&m, 2);
  mp_int(&m, "id", 12);
  mp_uint(&m, "f", 9007199254740995ULL);
  CHECK(push(p, t, RN_OP_UPDATE, &m) == RN_EINVAL && stored_f(p, t, 12) == 42.0);
  mp_map(&m, 2);
  mp_int(&m, "id", 12);
  mp_double(&m, "f", 9007199254740993.0);
  CHECK(push(p, t, RN_OP_UPDATE, &m) == 0 && stored_f(p, t, 12) == 9007199254740992.0);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_key_map_with_an_unknown_column_is_refused);
  RUN(test_key_map_non_key_columns_are_checked_then_not_used);
  RUN(test_derived_key_map_columns);
  RUN(test_map_size_too_large_is_named);
  RUN(test_forked_child_calls_are_refused);
  RUN(test_forked_child_deliver_names_the_fork);
  RUN(test_float_column_refuses_an_integer_no_float_holds);
  return CHECK_REPORT();
}
