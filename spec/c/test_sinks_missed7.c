/* test_sinks_missed7.c — the note a durable C subscriber gets when it is
 * subscribed again after groups committed without it (OUTBOX-5 in
 * core/outbox.c): it names the subscriber as the host named it and the
 * relation it reads, and counts only the groups that may have changed that
 * relation ("ch:" and "chs" in core/store.h). */
#include <lmdb.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL } };
static const char *const key[] = { "k" };

typedef struct notes {
  char lines[4][2048];
  int n;
} notes;

static void on_note(void *ctx, const char *line)
{
  notes *ns = ctx;
  if (strstr(line, " missed ") && ns->n < 4) snprintf(ns->lines[ns->n++], sizeof ns->lines[0], "%s", line);
}

static int noop(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 0;
}

static int insert(rn_pipeline *p, rn_rel *t, int64_t k)
{
  return insert_int(p, t, "k", k);
}

/* One session: orders and other declared, subscribed as "audit" when sub,
 * then an insert into orders for each of ks, into other for each of os. */
static void session(const char *dir, bool sub, const int *ks, int nk, const int *os, int no, notes *ns)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  if (!p) return;
  rn_rel *orders = NULL, *other = NULL;
  CHECK(rn_declare_table(p, "orders", cols, 1, key, 1, &orders) == 0);
  CHECK(rn_declare_table(p, "other", cols, 1, key, 1, &other) == 0);
  if (sub) CHECK(rn_subscribe_durable(p, orders, "audit", noop, NULL) == 0);
  for (int i = 0; i < nk; i++) CHECK(insert(p, orders, ks[i]) == 0);
  for (int i = 0; i < no; i++) CHECK(insert(p, other, os[i]) == 0);
  if (ns) CHECK(rn_take_notes(p, on_note, ns) >= 0);
  CHECK(rn_pipeline_close(p) == 0);
}

static void cleanup(const char *dir)
{
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* Before: "orders: durable sink sink:audit missed groups 2 to 2: …", the
 * subscriber named by its key in the state. */
static void test_names_the_subscriber(void)
{
  char dir[] = "/tmp/runnel_missed7_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  static const int one[] = { 1 }, two[] = { 2 };
  session(dir, true, one, 1, NULL, 0, NULL);
  session(dir, false, two, 1, NULL, 0, NULL);
  notes ns = { .n = 0 };
  session(dir, true, NULL, 0, NULL, 0, &ns);
  CHECK(ns.n == 1);
  CHECK(strcmp(ns.lines[0], "orders: durable subscriber audit missed the changes of orders in group 2: they were "
                            "committed while it was not declared, and the outbox keeps a group only for the durable "
                            "sinks declared when it commits; it goes on from group 3") == 0);
  cleanup(dir);
}

/* Before: noted "groups 2 to 3" though neither changed orders. */
static void test_no_note_when_its_relation_did_not_change(void)
{
  char dir[] = "/tmp/runnel_missed7_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  static const int one[] = { 1 }, others[] = { 1, 2 };
  session(dir, true, one, 1, NULL, 0, NULL);
  session(dir, false, NULL, 0, others, 2, NULL);
  notes ns = { .n = 0 };
  session(dir, true, NULL, 0, NULL, 0, &ns);
  CHECK(ns.n == 0);
  cleanup(dir);
}

/* Rewrites meta "chs" to |from|upto|, as a state whose last groups an
 * older build committed (it writes no "ch:" records) looks. */
static void set_span(const char *dir, uint64_t from, uint64_t upto)
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi meta;
  CHECK(mdb_env_create(&env) == 0);
  CHECK(mdb_env_set_maxdbs(env, 64) == 0);
  CHECK(mdb_env_open(env, dir, 0, 0664) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, "meta", 0, &meta) == 0);
  uint64_t span[2] = { from, upto };
  MDB_val k = { 3, (void *)"chs" }, v = { sizeof span, span };
  CHECK(mdb_put(txn, meta, &k, &v, 0) == 0);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

/* Groups the "ch:" records do not know of (an older build committed
 * them) may have changed orders: they are noted. */
static void test_groups_not_known_are_noted(void)
{
  char dir[] = "/tmp/runnel_missed7_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  static const int one[] = { 1 }, others[] = { 1, 2 };
  session(dir, true, one, 1, NULL, 0, NULL);
  session(dir, false, NULL, 0, others, 2, NULL);
  set_span(dir, 0, 1); /* groups 2 and 3: not known */
  notes ns = { .n = 0 };
  session(dir, true, NULL, 0, NULL, 0, &ns);
  CHECK(ns.n == 1);
  CHECK(ns.n && strstr(ns.lines[0], "orders: durable subscriber audit missed the changes of orders in groups 2 to 3: "));
  cleanup(dir);
}

int main(void)
{
  RUN(test_names_the_subscriber);
  RUN(test_no_note_when_its_relation_did_not_change);
  RUN(test_groups_not_known_are_noted);
  return CHECK_REPORT();
}
