/* test_capi_edges19.c — the C API's handles over a lifetime a host gives
 * them: a cursor kept across a growth of the map, a rollback subscriber
 * removed, empty paths, and the messages of misuse. Uses runnel.h only. */
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

/* { id, name } into t by op; its own group outside rn_begin. */
static int push_row(rn_pipeline *p, rn_rel *t, rn_op op, int64_t id, const char *name)
{
  mp m;
  mp_begin(&m, 2);
  mp_str(&m, "id");
  msgpack_pack_int64(&m.pk, id);
  mp_str(&m, "name");
  mp_str(&m, name);
  int rc = rn_push(p, t, op, m.sb.data, m.sb.size);
  msgpack_sbuffer_destroy(&m.sb);
  return rc;
}

static void rm_rf(const char *dir)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

static const rn_column_def id_name[] = { { .name = "id", .type = "int" }, { .name = "name", .type = "string" } };
static const char *const key_id[] = { "id" };

/* Rows of about 1 KiB, enough of them to double a 1 MiB map several times. */
static int fill(rn_pipeline *p, rn_rel *t, int64_t from, int n)
{
  char name[1000];
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  int rc = rn_begin(p);
  for (int64_t i = from; !rc && i < from + n; i++) rc = push_row(p, t, RN_OP_INSERT, i, name);
  return rc ? rc : rn_commit(p);
}

/* ---- a cursor kept across a growth of the map ---- */

/* A table cursor opened between groups reads its own LMDB read
 * transaction; a group that grew the map remapped it under the cursor,
 * whose next step read unmapped memory (SIGSEGV). The step is refused,
 * saying to open the cursor again; the new one reads every row. */
static void test_cursor_across_growth(int in_group_growth)
{
  rn_open_opts o = { .map_size = 1 << 20 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(fill(p, t, 1, 20) == 0);
  rn_cursor *c = NULL;
  CHECK(rn_cursor_open(p, t, &c) == 0);
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done && id == 1);
  if (in_group_growth) CHECK(fill(p, t, 100, 8000) == 0); /* the map fills inside the group */
  else
    for (int i = 0; i < 40; i++) CHECK(fill(p, t, 100 + i * 200, 200) == 0); /* grown as groups begin */
  int rc = rn_cursor_next(c, &row, &len, &id, &done);
  CHECK(rc == RN_EMISUSE);
  if (!strstr(rn_errmsg(p), "players: rn_cursor_next: the cursor was opened before the state grew"))
    fprintf(stderr, "  got: %s\n", rn_errmsg(p));
  CHECK(strstr(rn_errmsg(p), "players: rn_cursor_next: the cursor was opened before the state grew") ==
        rn_errmsg(p));
  CHECK(strstr(rn_errmsg(p), "open it again") != NULL);
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == RN_EMISUSE); /* and stays refused */
  rn_cursor_close(c);
  CHECK(rn_cursor_open(p, t, &c) == 0);
  int n = 0;
  while (rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done) n++;
  CHECK(done && n == 8020);
  rn_cursor_close(c);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_cursor_across_growth_between_groups(void) { test_cursor_across_growth(0); }
static void test_cursor_across_growth_inside_a_group(void) { test_cursor_across_growth(1); }

/* ---- rn_unsubscribe ---- */

static int count_event(void *ctx, const rn_event *ev)
{
  (void)ev;
  ++*(int *)ctx;
  return 0;
}

static void note_rollback(void *ctx, uint64_t seq)
{
  (void)ctx;
  (void)seq;
}

static int refuse_event(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 1;
}

/* From a rollback notice rn_unsubscribe is refused; it said "not inside a
 * group", though no group was open: the notice is a callback. */
static rn_pipeline *unsubscribing;
static rn_rel *unsubscribing_from;
static char unsubscribe_said[256];

static void unsubscribe_itself(void *ctx, uint64_t seq)
{
  (void)seq;
  if (rn_unsubscribe(unsubscribing, unsubscribing_from, count_event, ctx) == RN_EMISUSE)
    snprintf(unsubscribe_said, sizeof unsubscribe_said, "%s", rn_errmsg(unsubscribing));
}

/* A rollback subscriber keeps the carried groups it saw (sync off: they
 * may yet be lost and must be told); rn_unsubscribe freed the subscriber
 * but not that list (a leak valgrind and ASan report). Its later groups
 * reach it no more, and a carried group committed after it left is fine. */
static void test_unsubscribe_of_a_rollback_subscriber_frees_its_groups(void)
{
  rn_open_opts o = { .nosync = 1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  int seen = 0;
  CHECK(rn_subscribe_rollback(p, t, count_event, note_rollback, &seen) == 0);
  for (int i = 1; i <= 3; i++) CHECK(push_row(p, t, RN_OP_INSERT, i, "ann") == 0); /* carried groups it saw */
  CHECK(seen == 3);
  CHECK(rn_unsubscribe(p, t, count_event, &seen) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 4, "bob") == 0);
  CHECK(seen == 3);
  CHECK(rn_flush(p) == 0);
  CHECK(rn_unsubscribe(p, t, count_event, &seen) == RN_ENOTFOUND);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_unsubscribe_from_a_rollback_notice_says_callback(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  unsubscribing = p;
  unsubscribing_from = t;
  int seen = 0;
  CHECK(rn_subscribe_rollback(p, t, count_event, unsubscribe_itself, &seen) == 0);
  CHECK(rn_subscribe(p, t, refuse_event, NULL) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 5, "cy") == RN_ECALLBACK); /* its on_rollback tries to unsubscribe */
  CHECK(strcmp(unsubscribe_said, "players: rn_unsubscribe: not inside a group or a callback") == 0);
  CHECK(rn_unsubscribe(p, t, count_event, &seen) == 0); /* after the call that ran it */
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- empty paths ---- */

/* "" is no directory: open made nothing, but said "cannot create state
 * directory : No such file or directory"; inspect and copy said ": not a
 * runnel state" (and LMDB would read "/data.mdb"). Each is refused as a
 * bad argument, saying the path is empty, and nothing is made. */
static void test_empty_paths_are_refused(void)
{
  char dir[] = "/tmp/runnel-capi19-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char cwd[4096];
  CHECK(getcwd(cwd, sizeof cwd) != NULL);
  CHECK(chdir(dir) == 0); /* whatever is made, it is made here */
  char err[512] = "";
  rn_open_opts o = { .path = "" };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == RN_EINVAL && p == NULL);
  CHECK(strcmp(err, "open: the path is empty (a NULL path opens a temporary state)") == 0);
  rn_inspect_state st;
  err[0] = '\0';
  CHECK(rn_inspect("", NULL, NULL, &st, err, sizeof err) == RN_EINVAL);
  CHECK(strcmp(err, "rn_inspect: the path is empty") == 0);
  o.path = "st";
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  err[0] = '\0';
  CHECK(rn_state_copy("", "copy", err, sizeof err) == RN_EINVAL);
  CHECK(strcmp(err, "rn_state_copy: the path is empty") == 0);
  err[0] = '\0';
  CHECK(rn_state_copy("st", "", err, sizeof err) == RN_EINVAL);
  CHECK(strcmp(err, "rn_state_copy: the destination (dest) is empty") == 0);
  CHECK(access("copy", F_OK) != 0);
  CHECK(chdir(cwd) == 0);
  rm_rf(dir);
}

/* ---- messages ---- */

/* { id: 1, col: [1, 2] } when as_map is 0, { id: 1, col: { "a": 1 } } else. */
static int push_container(rn_pipeline *p, rn_rel *t, const char *col, int as_map)
{
  mp m;
  mp_begin(&m, 2);
  mp_str(&m, "id");
  msgpack_pack_int64(&m.pk, 1);
  mp_str(&m, col);
  if (as_map) {
    msgpack_pack_map(&m.pk, 1);
    mp_str(&m, "a");
    msgpack_pack_int64(&m.pk, 1);
  } else {
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_int64(&m.pk, 1);
    msgpack_pack_int64(&m.pk, 2);
  }
  int rc = rn_insert(p, t, m.sb.data, m.sb.size);
  msgpack_sbuffer_destroy(&m.sb);
  return rc;
}

static int refused_with(rn_pipeline *p, int rc, const char *want)
{
  if (rc == RN_EINVAL && strcmp(rn_errmsg(p), want) == 0) return 1;
  fprintf(stderr, "  want: %s\n  got:  %d %s\n", want, rc, rn_errmsg(p));
  return 0;
}

/* A msgpack array for a map column said "expected map, got table" (and a
 * map for a list column "expected list, got table"): a C host sends no
 * tables. The kinds are named as the host sent them. */
static void test_a_list_for_a_map_says_so(void)
{
  static const rn_column_def cols[] = {
    { .name = "id", .type = "int" }, { .name = "m", .type = "map", .nullable = 1 },
    { .name = "l", .type = "list", .nullable = 1 },
  };
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "bag", cols, 3, key_id, 1, &t) == 0);
  CHECK(refused_with(p, push_container(p, t, "m", 0), "bag: column \"m\": expected map, got a list"));
  CHECK(refused_with(p, push_container(p, t, "l", 1), "bag: column \"l\": expected list, got a map"));
  CHECK(push_container(p, t, "m", 1) == 0);
  static const char list[] = "\x92\x01\x02"; /* [1, 2] for a change, or a key */
  CHECK(refused_with(p, rn_insert(p, t, list, 3), "bag: a change is a msgpack map keyed by column names, got a list"));
  const void *row;
  size_t len;
  CHECK(refused_with(p, rn_get(p, t, list, 3, &row, &len, NULL),
                     "bag: rn_get: the key is a msgpack map of the key columns by name (as {\"id\": …}), got a list"));
  CHECK(rn_pipeline_close(p) == 0);
}

/* An order or a group column that is no scalar was named "a any", "a
 * list": its type is said as declared. */
static void test_a_top_over_a_column_of_type_any_says_its_type(void)
{
  static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "tag", .type = "any" } };
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL, *top = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "items", cols, 2, key_id, 1, &t) == 0);
  static const rn_order_def by_tag[] = { { "tag", 0 } };
  static const char *const by[] = { "tag" };
  static const rn_order_def by_id[] = { { "id", 0 } };
  rn_top_def d = { .n = 3, .order = by_tag, .norder = 1 };
  CHECK(refused_with(p, rn_top_declare(p, "best", t, &d, &top),
                     "best: column \"tag\" has type any: only scalar columns have an order"));
  d = (rn_top_def){ .n = 3, .by = by, .nby = 1, .order = by_id, .norder = 1 };
  CHECK(refused_with(p, rn_top_declare(p, "best", t, &d, &top),
                     "best: column \"tag\" has type any: only scalar columns group a top"));
  CHECK(rn_pipeline_close(p) == 0);
}

/* A top whose rank column is named "" is refused at its declaration,
 * naming the top, rather than declared with a column no row can name. */
static void test_a_top_with_an_empty_rank_name_is_refused(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL, *top = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  static const rn_order_def by_name[] = { { "name", 0 } };
  rn_top_def d = { .n = 3, .order = by_name, .norder = 1, .rank = "" };
  CHECK(refused_with(p, rn_top_declare(p, "best", t, &d, &top),
                     "best: the rank column's name is empty (the default is \"rank\")"));
  CHECK(top == NULL && rn_relation(p, "best") == NULL);
  d.rank = "place";
  CHECK(rn_top_declare(p, "best", t, &d, &top) == 0 && top != NULL);
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- LMDB's reader slots ---- */

/* Every cursor opened between groups holds an LMDB read transaction, one
 * of LMDB's reader slots (126): one too many said only "MDB_READERS_FULL:
 * Environment maxreaders limit reached". The message says what holds
 * them and what to do; closing them frees the slots. */
static void test_readers_full_says_what_to_close(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 1, "ann") == 0);
  enum { MAX = 300 };
  static rn_cursor *open[MAX];
  int n = 0, rc = 0;
  while (n < MAX && (rc = rn_cursor_open(p, t, &open[n])) == 0) n++;
  CHECK(n < MAX && rc == RN_ESTORE);
  if (!strstr(rn_errmsg(p), "too many reads open at once")) fprintf(stderr, "  got: %s\n", rn_errmsg(p));
  CHECK(strstr(rn_errmsg(p), "players: MDB_READERS_FULL") == rn_errmsg(p));
  CHECK(strstr(rn_errmsg(p), "too many reads open at once") != NULL);
  CHECK(strstr(rn_errmsg(p), "close the cursors, rows() iterations and attachments") != NULL);
  while (n > 0) rn_cursor_close(open[--n]);
  CHECK(rn_cursor_open(p, t, &open[0]) == 0);
  rn_cursor_close(open[0]);
  CHECK(rn_pipeline_close(p) == 0);
}

/* rn_open_opts.max_readers (round 20): a state made with more reader
 * slots holds more reads open at once; too many is refused at open. */
static void test_max_readers_gives_more_slots(void)
{
  char dir[] = "/tmp/runnel_readers20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { 0 };
  o.path = dir;
  o.max_readers = RN_MAX_READERS + 1;
  rn_pipeline *p = NULL;
  char why[512] = "";
  CHECK(rn_pipeline_open(&o, &p, why, sizeof why) == RN_EINVAL && p == NULL);
  CHECK(strstr(why, "open: max_readers 65537 is too many: at most 65536") == why);
  o.max_readers = 400;
  CHECK(rn_pipeline_open(&o, &p, why, sizeof why) == 0);
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 1, "ann") == 0);
  enum { MANY = 300 };
  static rn_cursor *open[MANY];
  int n = 0, rc = 0;
  while (n < MANY && (rc = rn_cursor_open(p, t, &open[n])) == 0) n++;
  if (n < MANY) fprintf(stderr, "  %d cursors: %s\n", n, rn_errmsg(p));
  CHECK(n == MANY);
  while (n > 0) rn_cursor_close(open[--n]);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_cursor_across_growth_between_groups);
  RUN(test_cursor_across_growth_inside_a_group);
  RUN(test_unsubscribe_of_a_rollback_subscriber_frees_its_groups);
  RUN(test_unsubscribe_from_a_rollback_notice_says_callback);
  RUN(test_empty_paths_are_refused);
  RUN(test_a_list_for_a_map_says_so);
  RUN(test_a_top_over_a_column_of_type_any_says_its_type);
  RUN(test_a_top_with_an_empty_rank_name_is_refused);
  RUN(test_readers_full_says_what_to_close);
  RUN(test_max_readers_gives_more_slots);
  return CHECK_REPORT();
}
