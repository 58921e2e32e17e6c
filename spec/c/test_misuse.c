/* test_misuse.c — every public C function called the way a careless host
 * would: NULL pointers, calls out of order, arguments out of range, names
 * too long for LMDB. Each call gives the error runnel.h documents, nothing
 * crashes, and what was committed before is still there after a reopen.
 * Uses only runnel.h (and msgpack-c to build changes). Run under valgrind
 * and ASan by make valgrind and make asan. */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL }, { "name", "string", 1, NULL, 0, NULL } };
static const char *const key[] = { "id" };

/* {"id": id} or {"id": id, "name": name} as msgpack, in a buffer of the caller's. */
static size_t change(char *buf, size_t cap, int64_t id, const char *name)
{
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, name ? 2 : 1);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  if (name) {
    msgpack_pack_str_with_body(&pk, "name", 4);
    msgpack_pack_str_with_body(&pk, name, strlen(name));
  }
  size_t n = sb.size <= cap ? sb.size : 0;
  memcpy(buf, sb.data, n);
  msgpack_sbuffer_destroy(&sb);
  return n;
}

static int insert(rn_pipeline *p, rn_rel *r, int64_t id)
{
  char buf[64];
  size_t n = change(buf, sizeof buf, id, "x");
  return rn_insert(p, r, buf, n);
}

static int count_events(void *ctx, const rn_event *ev)
{
  (void)ev;
  ++*(int *)ctx;
  return 0;
}

static char dir[] = "/tmp/runnel-misuse-XXXXXX";

static rn_pipeline *open_dir(void)
{
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  return p;
}

static rn_rel *players(rn_pipeline *p)
{
  rn_rel *r = NULL;
  CHECK(rn_declare_table(p, "players", cols, 2, key, 1, &r) == 0);
  return r;
}

static void test_null_pipeline(void)
{
  char buf[64];
  size_t n = change(buf, sizeof buf, 1, NULL);
  CHECK(rn_errmsg(NULL) != NULL && rn_errmsg(NULL)[0] != '\0');
  CHECK(rn_begin(NULL) == RN_EINVAL);
  CHECK(rn_commit(NULL) == RN_EINVAL);
  CHECK(rn_rollback(NULL) == RN_EINVAL);
  CHECK(rn_flush(NULL) == RN_EINVAL);
  CHECK(rn_seq(NULL) == 0);
  rn_rel *r = NULL;
  CHECK(rn_declare_table(NULL, "t", cols, 2, key, 1, &r) == RN_EINVAL);
  CHECK(rn_declare_stream(NULL, "s", cols, 2, &r) == RN_EINVAL);
  CHECK(rn_relation(NULL, "t") == NULL);
  CHECK(rn_relation_name(NULL) == NULL);
  CHECK(rn_push(NULL, NULL, RN_OP_INSERT, buf, n) == RN_EINVAL);
  CHECK(rn_insert(NULL, NULL, buf, n) == RN_EINVAL);
  CHECK(rn_update(NULL, NULL, buf, n) == RN_EINVAL);
  CHECK(rn_upsert(NULL, NULL, buf, n) == RN_EINVAL);
  CHECK(rn_delete(NULL, NULL, buf, n) == RN_EINVAL);
  int seen = 0;
  CHECK(rn_subscribe(NULL, NULL, count_events, &seen) == RN_EINVAL);
  CHECK(rn_subscribe_rollback(NULL, NULL, count_events, NULL, &seen) == RN_EINVAL);
  CHECK(rn_on_durable(NULL, NULL, NULL) == RN_EINVAL);
  rn_pipeline_close(NULL);
  char oerr[128] = "";
  CHECK(rn_pipeline_open(NULL, NULL, oerr, sizeof oerr) == RN_EINVAL && strstr(oerr, "out"));
  CHECK(rn_pipeline_open(NULL, NULL, NULL, 0) == RN_EINVAL);
  rn_inspect_state st;
  char err[128] = "";
  CHECK(rn_inspect(NULL, NULL, NULL, &st, err, sizeof err) == RN_EINVAL && strstr(err, "path"));
  CHECK(rn_inspect(dir, NULL, NULL, NULL, err, sizeof err) == RN_EINVAL && strstr(err, "out"));
  CHECK(rn_inspect(NULL, NULL, NULL, NULL, NULL, 0) == RN_EINVAL);
}

static void test_bad_declarations(void)
{
  rn_pipeline *p = open_dir();
  rn_rel *r = NULL;
  const char *const nokey[] = { "nope" };
  const char *const nullkey[] = { NULL };
  rn_column_def noname[] = { { NULL, "int", 0, NULL, 0, NULL } }, notype[] = { { "id", NULL, 0, NULL, 0, NULL } };
  CHECK(rn_declare_table(p, NULL, cols, 2, key, 1, &r) == RN_EINVAL && strstr(rn_errmsg(p), "name is NULL"));
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, NULL) == RN_EINVAL && strstr(rn_errmsg(p), "out is NULL"));
  CHECK(rn_declare_table(p, "t", NULL, 2, key, 1, &r) == RN_EINVAL && strstr(rn_errmsg(p), "cols is NULL"));
  CHECK(rn_declare_table(p, "t", cols, 0, NULL, 0, &r) == RN_EINVAL && strstr(rn_errmsg(p), "at least one column"));
  CHECK(rn_declare_table(p, "t", cols, -3, key, 1, &r) == RN_EINVAL && strstr(rn_errmsg(p), "ncols is -3"));
  CHECK(rn_declare_table(p, "t", cols, 2, key, -1, &r) == RN_EINVAL && strstr(rn_errmsg(p), "nkey is -1"));
  CHECK(rn_declare_table(p, "t", cols, 2, key, 3, &r) == RN_EINVAL && strstr(rn_errmsg(p), "nkey is 3"));
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1000000000, &r) == RN_EINVAL);
  CHECK(rn_declare_table(p, "t", cols, 2, NULL, 1, &r) == RN_EINVAL && strstr(rn_errmsg(p), "key is NULL"));
  CHECK(rn_declare_table(p, "t", cols, 2, nokey, 1, &r) == RN_EINVAL &&
        strcmp(rn_errmsg(p), "t: key column \"nope\" is not a declared column") == 0);
  CHECK(rn_declare_table(p, "t", cols, 2, nullkey, 1, &r) == RN_EINVAL);
  CHECK(rn_declare_table(p, "t", noname, 1, NULL, 0, &r) == RN_EINVAL && strstr(rn_errmsg(p), "#1: the name is NULL"));
  CHECK(rn_declare_table(p, "t", notype, 1, NULL, 0, &r) == RN_EINVAL && strstr(rn_errmsg(p), "unknown type (null)"));
  CHECK(rn_declare_table(p, "", cols, 2, key, 1, &r) == RN_EINVAL);
  CHECK(rn_declare_stream(p, NULL, cols, 2, &r) == RN_EINVAL);
  CHECK(rn_declare_stream(p, "s", NULL, 0, &r) == RN_EINVAL);
  CHECK(rn_declare_stream(p, "s", cols, 2, NULL) == RN_EINVAL);
  CHECK(r == NULL);
  CHECK(rn_relation(p, "t") == NULL && rn_relation(p, "s") == NULL && rn_relation(p, NULL) == NULL);
  rn_rel *t = players(p); /* the pipeline is still fine */
  CHECK(insert(p, t, 1) == 0);
  CHECK(strcmp(rn_relation_name(t), "players") == 0);
  rn_pipeline_close(p);
}

/* Names become LMDB keys ("r:" name) and database names ("ji:" name). */
static void test_long_names(void)
{
  rn_pipeline *p = open_dir();
  char *name = malloc(600 + 1);
  memset(name, 'n', 600);
  name[600] = '\0';
  rn_rel *r = NULL;
  CHECK(rn_declare_table(p, name, cols, 2, key, 1, &r) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "is 600 bytes; the limit is 508") != NULL);
  name[508] = '\0';
  CHECK(rn_declare_table(p, name, cols, 2, key, 1, &r) == 0); /* the limit itself works */
  CHECK(insert(p, r, 7) == 0);
  size_t huge = (size_t)16 << 20; /* no stack array is sized from a name */
  char *big = malloc(huge + 1);
  memset(big, 'b', huge);
  big[huge] = '\0';
  CHECK(rn_declare_stream(p, big, cols, 2, &r) == RN_EINVAL && strstr(rn_errmsg(p), "the limit is 508"));
  free(big);
  rn_pipeline_close(p);
  p = open_dir();
  CHECK(rn_declare_table(p, name, cols, 2, key, 1, &r) == 0);
  CHECK(insert(p, r, 7) == RN_EEXIST); /* it was stored under its whole name */
  rn_pipeline_close(p);
  free(name);
}

static void test_bad_changes(void)
{
  rn_pipeline *p = open_dir(), *other;
  rn_rel *t = players(p), *theirs = NULL;
  CHECK(rn_pipeline_open(NULL, &other, NULL, 0) == 0);
  CHECK(rn_declare_table(other, "players", cols, 2, key, 1, &theirs) == 0);
  char buf[64];
  size_t n = change(buf, sizeof buf, 50, "x");
  CHECK(rn_insert(p, rn_relation(p, "typo"), buf, n) == RN_EINVAL && strstr(rn_errmsg(p), "NULL"));
  CHECK(rn_update(p, NULL, buf, n) == RN_EINVAL);
  CHECK(rn_upsert(p, NULL, buf, n) == RN_EINVAL);
  CHECK(rn_delete(p, NULL, buf, n) == RN_EINVAL);
  CHECK(rn_push(p, t, (rn_op)0, buf, n) == RN_EINVAL && strstr(rn_errmsg(p), "unknown op 0"));
  CHECK(rn_push(p, t, (rn_op)5, buf, n) == RN_EINVAL && strstr(rn_errmsg(p), "unknown op 5"));
  CHECK(rn_push(p, t, (rn_op)-1, buf, n) == RN_EINVAL);
  CHECK(rn_insert(p, t, NULL, n) == RN_EINVAL);
  CHECK(rn_insert(p, t, buf, 0) == RN_EINVAL);
  CHECK(rn_insert(p, t, buf, n - 1) == RN_EINVAL);
  CHECK(rn_insert(p, theirs, buf, n) == RN_EINVAL && strstr(rn_errmsg(p), "another pipeline"));
  uint64_t seq0 = rn_seq(p);
  CHECK(rn_seq(other) == 0);
  /* Inside a group, each is bad input: the group is rolled back. */
  CHECK(rn_begin(p) == 0);
  CHECK(insert(p, t, 60) == 0);
  CHECK(rn_insert(p, NULL, buf, n) == RN_EINVAL);
  CHECK(rn_commit(p) == RN_EMISUSE && strcmp(rn_errmsg(p), "commit: no group is open") == 0);
  CHECK(rn_begin(p) == 0);
  CHECK(insert(p, t, 61) == 0);
  CHECK(rn_push(p, t, (rn_op)9, buf, n) == RN_EINVAL);
  CHECK(rn_commit(p) == RN_EMISUSE);
  CHECK(rn_seq(p) == seq0);
  CHECK(insert(p, t, 10) == 0);
  rn_pipeline_close(other);
  rn_pipeline_close(p);
  p = open_dir();
  t = players(p);
  CHECK(rn_seq(p) == seq0 + 1);
  CHECK(insert(p, t, 10) == RN_EEXIST);
  CHECK(insert(p, t, 60) == 0 && insert(p, t, 61) == 0 && insert(p, t, 50) == 0); /* none was stored */
  rn_pipeline_close(p);
}

/* An empty string key: msgpack-c decodes it with a NULL pointer. */
static void test_empty_string_key(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_column_def scols[] = { { "k", "string", 0, NULL, 0, NULL }, { "b", "bytes", 1, NULL, 0, NULL } };
  const char *const skey[] = { "k" };
  rn_rel *r;
  CHECK(rn_declare_table(p, "s", scols, 2, skey, 1, &r) == 0);
  const char empty[] = "\x81\xa1k\xa0";          /* {"k": ""} */
  const char empty_bin[] = "\x82\xa1k\xa0\xa1\x62\xc4\x00"; /* {"k": "", "b": bin ""} */
  CHECK(rn_insert(p, r, empty, sizeof empty - 1) == 0);
  CHECK(rn_insert(p, r, empty, sizeof empty - 1) == RN_EEXIST);
  CHECK(rn_upsert(p, r, empty_bin, sizeof empty_bin - 1) == 0);
  CHECK(rn_delete(p, r, empty, sizeof empty - 1) == 0);
  rn_pipeline_close(p);
}

static int refuse(void *ctx, const rn_event *ev)
{
  (void)ctx; (void)ev;
  return 1;
}

static void test_wrong_order(void)
{
  rn_pipeline *p = open_dir();
  rn_rel *t = players(p);
  uint64_t seq0 = rn_seq(p);
  CHECK(rn_commit(p) == RN_EMISUSE && strcmp(rn_errmsg(p), "commit: no group is open") == 0);
  CHECK(rn_rollback(p) == 0 && rn_errmsg(p)[0] == '\0');
  /* rn_begin twice: refused, and the open group stays open. */
  CHECK(rn_begin(p) == 0);
  CHECK(insert(p, t, 2) == 0);
  CHECK(rn_begin(p) == RN_EMISUSE && strcmp(rn_errmsg(p), "begin: a group is already open; it stays open") == 0);
  CHECK(insert(p, t, 3) == 0);
  rn_rel *late;
  CHECK(rn_declare_stream(p, "late", cols, 2, &late) == RN_EMISUSE);
  int seen = 0;
  CHECK(rn_subscribe(p, t, count_events, &seen) == RN_EMISUSE);
  CHECK(rn_commit(p) == 0 && rn_errmsg(p)[0] == '\0'); /* a success empties the message */
  CHECK(rn_seq(p) == seq0 + 1);
  /* Every call that succeeds after a failure leaves an empty message. */
  CHECK(rn_commit(p) == RN_EMISUSE && rn_begin(p) == 0 && rn_errmsg(p)[0] == '\0');
  CHECK(rn_begin(p) == RN_EMISUSE && rn_flush(p) == 0 && rn_errmsg(p)[0] == '\0');
  CHECK(rn_begin(p) == RN_EMISUSE && rn_rollback(p) == 0 && rn_errmsg(p)[0] == '\0');
  CHECK(rn_commit(p) == RN_EMISUSE && rn_flush(p) == 0 && rn_errmsg(p)[0] == '\0');
  CHECK(rn_commit(p) == RN_EMISUSE && insert(p, t, 4) == 0 && rn_errmsg(p)[0] == '\0');
  CHECK(rn_commit(p) == RN_EMISUSE && rn_subscribe(p, t, count_events, &seen) == 0 && rn_errmsg(p)[0] == '\0');
  CHECK(rn_subscribe(p, NULL, count_events, &seen) == RN_EINVAL && strstr(rn_errmsg(p), "relation is NULL"));
  CHECK(rn_subscribe(p, t, NULL, NULL) == RN_EINVAL && strstr(rn_errmsg(p), "needs a callback"));
  rn_pipeline *other;
  rn_rel *theirs;
  CHECK(rn_pipeline_open(NULL, &other, NULL, 0) == 0);
  CHECK(rn_declare_table(other, "players", cols, 2, key, 1, &theirs) == 0);
  CHECK(rn_subscribe(p, theirs, count_events, &seen) == RN_EINVAL && strstr(rn_errmsg(p), "another pipeline"));
  rn_pipeline_close(other);
  CHECK(rn_subscribe(p, t, refuse, NULL) == 0);
  CHECK(insert(p, t, 5) == RN_ECALLBACK);             /* its group rolled back */
  CHECK(seen == 1 && rn_seq(p) == seq0 + 2);
  rn_pipeline_close(p);
  p = open_dir();
  t = players(p);
  CHECK(rn_seq(p) == seq0 + 2);
  CHECK(insert(p, t, 2) == RN_EEXIST && insert(p, t, 3) == RN_EEXIST && insert(p, t, 4) == RN_EEXIST);
  CHECK(insert(p, t, 5) == 0);
  rn_pipeline_close(p);
}

/* What a subscriber's calls back into its pipeline returned. */
typedef struct reentry {
  rn_pipeline *p;
  rn_rel *t;
  int codes[8];
  int calls;
} reentry;

static int call_back_in(void *ctx, const rn_event *ev)
{
  (void)ev;
  reentry *r = ctx;
  if (r->calls++) return 0;
  rn_rel *late;
  int seen = 0;
  r->codes[0] = rn_begin(r->p);
  r->codes[1] = rn_commit(r->p);
  r->codes[2] = rn_rollback(r->p);
  r->codes[3] = rn_flush(r->p);
  r->codes[4] = insert(r->p, r->t, 1000);
  r->codes[5] = rn_declare_stream(r->p, "late", cols, 2, &late);
  r->codes[6] = rn_subscribe(r->p, r->t, count_events, &seen);
  r->codes[7] = insert(r->p, NULL, 1001);
  return 0;
}

/* A subscriber runs inside the commit: every call that would change tables,
 * groups or the graph is refused, and the group still commits. */
static void test_calls_from_inside_a_callback(void)
{
  rn_pipeline *p = open_dir();
  rn_rel *t = players(p);
  uint64_t seq0 = rn_seq(p);
  reentry r = { p, t, { 0 }, 0 };
  CHECK(rn_subscribe(p, t, call_back_in, &r) == 0);
  CHECK(insert(p, t, 20) == 0);
  CHECK(rn_errmsg(p)[0] == '\0'); /* the insert succeeded: the refusals inside it are not its message */
  CHECK(r.calls == 1);
  for (int i = 0; i < 7; i++) CHECK(r.codes[i] == RN_EMISUSE);
  CHECK(r.codes[7] == RN_EINVAL);
  CHECK(rn_seq(p) == seq0 + 1 && rn_relation(p, "late") == NULL);
  rn_pipeline_close(p);
  p = open_dir();
  t = players(p);
  CHECK(insert(p, t, 20) == RN_EEXIST && insert(p, t, 1000) == 0);
  rn_pipeline_close(p);
}

static int count_relations(void *ctx, const rn_inspect_relation *rel)
{
  (void)rel;
  ++*(int *)ctx;
  return 0;
}

/* After everything above, the state still reads. */
static void test_state_intact(void)
{
  rn_inspect_state st;
  char err[256];
  int n = 0;
  CHECK(rn_inspect(dir, count_relations, &n, &st, err, sizeof err) == 0);
  CHECK(n == 2 && st.relations == 2 && st.seq == 11); /* the groups committed above */
  CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == 0 && st.relations == 2);
}

int main(void)
{
  if (!mkdtemp(dir)) return 2;
  RUN(test_null_pipeline);
  RUN(test_bad_declarations);
  RUN(test_long_names);
  RUN(test_bad_changes);
  RUN(test_empty_string_key);
  RUN(test_wrong_order);
  RUN(test_calls_from_inside_a_callback);
  RUN(test_state_intact);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 2;
  return CHECK_REPORT();
}
