/* test_outbox_columns25.c — the columns a log sink's waiting groups were
 * committed with (meta "ol:" tag layout, OUTBOX-11 in outbox.c, 0.37): a
 * state whose waiting groups have no such record (written before 0.37,
 * crafted here by deleting it) refuses the sink on other columns with
 * OUTBOX-8's message, and delivers them once declared as it was; the
 * records of layouts no group waits in any more go (at the next group's
 * mark, at a declaration, at drop_outbox). The lines of
 * spec/outbox_columns_edges25_spec.lua are the rest. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "outbox.h"
#include "key.h"
#include "ndjson.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "runnel.h"

static const char *const k_key[] = { "k" };

static rn_pipeline *open_at(const char *dir)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  return p;
}

static const rn_column_def kg[] = { { "k", "int", 0, NULL, 0, NULL }, { "g", "int", 1, NULL, 0, NULL } };
static const rn_column_def kgh[] = { { "k", "int", 0, NULL, 0, NULL }, { "g", "int", 1, NULL, 0, NULL },
                                     { "h", "string", 1, NULL, 0, NULL } };

static rn_rel *last_t;   /* the t open_t declared */

/* t with cols (n of them) and its NDJSON sink on log; *rc: the sink's. */
static rn_pipeline *open_t(const char *dir, const rn_column_def *cols, int n, const char *log, int *rc)
{
  rn_pipeline *p = open_at(dir);
  last_t = NULL;
  CHECK(p && rn_declare_table(p, "t", cols, n, k_key, 1, &last_t) == 0);
  *rc = rn_ndjson_sink_path(p, last_t, log, "verb", NULL);
  return p;
}

static void append(const char *path, const char *text)
{
  FILE *f = fopen(path, "a");
  CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static char *slurp(const char *path)
{
  static char buf[4096];
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = '\0';
  return buf;
}

/* The "ol:" records of the sink on log (deleted too when drop). */
static int layout_records(const char *dir, const char *log, bool drop)
{
  char real[PATH_MAX], name[PATH_MAX + 16], prefix[64];
  CHECK(realpath(log, real) != NULL);
  snprintf(name, sizeof name, RN_SINK_NDJSON "%s", real);
  int plen = snprintf(prefix, sizeof prefix, RN_META_DURABLE_LAYOUT "%016llx",
                      (unsigned long long)rn_hash64(name, strlen(name)));
  MDB_txn *txn;
  MDB_dbi meta;
  MDB_cursor *cur;
  MDB_env *env = raw_open(dir, &txn, &meta);
  CHECK(mdb_cursor_open(txn, meta, &cur) == 0);
  MDB_val k = { (size_t)plen, prefix }, v;
  int n = 0;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
       rc == 0 && k.mv_size >= (size_t)plen && memcmp(k.mv_data, prefix, (size_t)plen) == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    n++;
    if (drop) CHECK(mdb_cursor_del(cur, 0) == 0);
  }
  mdb_cursor_close(cur);
  raw_close(env, txn);
  return n;
}

/* Session 1: group 1 written, groups 2 and 3 wait behind a foreign
 * incomplete line, mended after close. */
static void leave_waiting(const char *dir, const char *log)
{
  int rc;
  rn_pipeline *p = open_t(dir, kg, 2, log, &rc);
  CHECK(rc == 0);
  rn_rel *t = last_t;
  CHECK(insert_int(p, t, "k", 1) == 0);
  append(log, "{\"other\":1");
  CHECK(insert_int(p, t, "k", 2) == 0);
  CHECK(insert_int(p, t, "k", 3) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  append(log, "}\n");
  CHECK(layout_records(dir, log, false) == 1);    /* written at declaration */
}

#define OLD "{\"verb\":\"INSERT\",\"k\":1,\"g\":null}\n{\"other\":1}\n{\"verb\":\"INSERT\",\"k\":2,\"g\":null}\n" \
            "{\"verb\":\"INSERT\",\"k\":3,\"g\":null}\n"

static void test_a_state_without_the_record_refuses_as_before(void)
{
  char dir[] = "/tmp/runnel_columns25_XXXXXX", log[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  leave_waiting(dir, log);
  CHECK(layout_records(dir, log, true) == 1);     /* as a state before 0.37 */
  int rc;
  rn_pipeline *p = open_t(dir, kgh, 3, log, &rc);
  CHECK(rc == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), ": group 2 waits for it, recorded for another relation or another declaration of t; "
               "its rows would be read wrong: declare the sink as it was to deliver the waiting groups, or give it "
               "a new name") != NULL);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(strcmp(slurp(log), "{\"verb\":\"INSERT\",\"k\":1,\"g\":null}\n{\"other\":1}\n") == 0);
  p = open_t(dir, kg, 2, log, &rc);               /* as it was: delivered once */
  CHECK(rc == 0);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(strcmp(slurp(log), OLD) == 0);
  cleanup(dir);
}

static void test_records_go_when_no_group_waits_in_them(void)
{
  char dir[] = "/tmp/runnel_columns25_XXXXXX", log[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  leave_waiting(dir, log);
  int rc;
  rn_pipeline *p = open_t(dir, kgh, 3, log, &rc); /* delivered in their columns */
  CHECK(rc == 0);
  CHECK(strcmp(slurp(log), OLD) == 0);
  CHECK(layout_records(dir, log, false) == 2);    /* the old one until a mark covers its groups */
  CHECK(insert_int(p, last_t, "k", 4) == 0);           /* its group's transaction records the mark */
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(layout_records(dir, log, false) == 1);
  CHECK(strcmp(slurp(log), OLD "{\"verb\":\"INSERT\",\"k\":4,\"g\":null,\"h\":null}\n") == 0);
  cleanup(dir);
}

static void test_drop_outbox_drops_the_records(void)
{
  char dir[] = "/tmp/runnel_columns25_XXXXXX", log[64], real[PATH_MAX], key[PATH_MAX + 16];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  leave_waiting(dir, log);
  CHECK(realpath(log, real) != NULL);
  snprintf(key, sizeof key, RN_SINK_NDJSON "%s", real);
  rn_pipeline *p = open_at(dir);
  CHECK(rn_outbox_drop(p, key) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(layout_records(dir, log, false) == 0);
  cleanup(dir);
}

static void test_a_declaration_drops_the_records_nothing_waits_in(void)
{
  char dir[] = "/tmp/runnel_columns25_XXXXXX", log[64];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  leave_waiting(dir, log);
  int rc;
  rn_pipeline *p = open_t(dir, kgh, 3, log, &rc);
  CHECK(rc == 0);
  CHECK(rn_pipeline_close(p) == 0);                /* no group since: the mark at close covers them */
  CHECK(layout_records(dir, log, false) == 1);
  char real[PATH_MAX], name[PATH_MAX + 16], key[64];
  CHECK(realpath(log, real) != NULL);
  snprintf(name, sizeof name, RN_SINK_NDJSON "%s", real);
  snprintf(key, sizeof key, RN_META_DURABLE_LAYOUT "%016llx%016llx", (unsigned long long)rn_hash64(name, strlen(name)),
           1ULL);
  raw_put(dir, key, "\x92\xa1t\x92\x90\x90", 6); /* one an older build left: nothing waits in it */
  CHECK(layout_records(dir, log, false) == 2);
  p = open_t(dir, kgh, 3, log, &rc);
  CHECK(rc == 0);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(layout_records(dir, log, false) == 1);
  CHECK(strcmp(slurp(log), OLD) == 0);
  cleanup(dir);
}

int main(void)
{
  RUN(test_a_state_without_the_record_refuses_as_before);
  RUN(test_records_go_when_no_group_waits_in_them);
  RUN(test_a_declaration_drops_the_records_nothing_waits_in);
  RUN(test_drop_outbox_drops_the_records);
  return CHECK_REPORT();
}
