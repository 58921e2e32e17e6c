/* test_pipeline.c — a pipeline driven from C through the core: tables,
 * groups, sinks, rollback, reopen. Run under valgrind by make valgrind. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pipeline.h"
#include "row.h"

typedef struct seen {
  char verbs[64][32];     /* "INSERT 1" … */
  int n;
  uint64_t commits;
} seen;

static int record(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  (void)rel; (void)e;
  seen *s = ctx;
  static const char *const names[] = { "", "INSERT", "UPDATE", "DELETE" };
  if (s->n < 64) snprintf(s->verbs[s->n++], 32, "%s %llu #%llu", names[c->verb],
                          (unsigned long long)info->id, (unsigned long long)info->n);
  return 0;
}

static int on_commit(void *ctx, uint64_t seq, rn_err *e)
{
  (void)e;
  ((seen *)ctx)->commits = seq;
  return 0;
}

static int refuse_score_13(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  (void)ctx; (void)info;
  if (c->row && memchr(c->row, 0x0d, c->row_len)) /* msgpack fixint 13 */
    return rn_err_set(e, RN_ECALLBACK, "%s: sink: 13 is unlucky", rel->name);
  return 0;
}

static rn_rel *declare_players(rn_pipeline *p)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &e);
  rn_schema_add(s, "score", 5, RN_T_INT, false, NULL, &e);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "players", &e);
  rn_rel *r = NULL;
  CHECK(rn_declare_source(p, "players", RN_REL_TABLE, s, &r) == 0);
  return r;
}

static int put(rn_rel *r, int (*fn)(rn_rel *, msgpack_object *, uint8_t *), int64_t id, int64_t score)
{
  msgpack_object v[2];
  v[0].type = v[1].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  v[0].via.u64 = (uint64_t)id;
  v[1].via.u64 = (uint64_t)score;
  uint8_t given[2] = { 1, score >= 0 };
  return fn(r, v, given);
}

static void test_changes_groups_and_sinks(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_rel *players = declare_players(p);
  seen *s = calloc(1, sizeof *s);
  CHECK(rn_sink_add(p, players, false, record, on_commit, s, free) == 0);
  CHECK(put(players, rn_table_insert, 1, 10) == 0);          /* group 1 */
  CHECK(rn_begin(p) == 0);
  CHECK(put(players, rn_table_insert, 2, 20) == 0);
  CHECK(put(players, rn_table_update, 1, 11) == 0);
  CHECK(put(players, rn_table_update, 1, 11) == 0);           /* no-op */
  CHECK(put(players, rn_table_delete, 2, -1) == 0);
  CHECK(rn_commit(p) == 0);                                   /* group 2 */
  CHECK(s->n == 4);
  CHECK(strcmp(s->verbs[1], "INSERT 2 #1") == 0);
  CHECK(strcmp(s->verbs[2], "UPDATE 1 #2") == 0);
  CHECK(strcmp(s->verbs[3], "DELETE 2 #3") == 0);
  CHECK(s->commits == 2 && rn_seq(p) == 2);
  CHECK(put(players, rn_table_insert, 1, 5) == RN_EEXIST);
  CHECK(strcmp(rn_errmsg(p), "players: insert: a row with key (id = 1) already exists") == 0);
  CHECK(rn_commit(p) == RN_EMISUSE);
  CHECK(players->count == 1);
  rn_pipeline_close(p);
}

static void test_failing_sink_rolls_back(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_rel *players = declare_players(p);
  CHECK(rn_sink_add(p, players, false, refuse_score_13, NULL, NULL, NULL) == 0);
  CHECK(rn_begin(p) == 0);
  CHECK(put(players, rn_table_insert, 1, 1) == 0);
  CHECK(put(players, rn_table_insert, 2, 13) == 0);
  CHECK(rn_commit(p) == RN_ECALLBACK);
  CHECK(strcmp(rn_errmsg(p), "players: sink: 13 is unlucky") == 0);
  CHECK(players->count == 0 && rn_seq(p) == 0);
  CHECK(put(players, rn_table_insert, 1, 1) == 0);
  CHECK(players->next_id == 2); /* the rolled-back group used up no id */
  rn_pipeline_close(p);
}

static void test_reopen_restores_state(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir, .nosync = 1 };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *players = declare_players(p);
  for (int i = 1; i <= 100; i++) CHECK(put(players, rn_table_insert, i, i) == 0);
  CHECK(put(players, rn_table_delete, 50, -1) == 0);
  rn_pipeline_close(p);
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  players = declare_players(p);
  CHECK(players->count == 99 && rn_seq(p) == 101);
  CHECK(put(players, rn_table_insert, 50, 1) == 0);
  rn_table_cursor *c;
  CHECK(rn_table_cursor_open(players, &c) == 0);
  uint64_t id, n = 0, id_of_50 = 0;
  const char *row;
  size_t len;
  int done = 0;
  while (rn_table_cursor_next(c, &id, &row, &len, &done) == 0 && !done)
    if (++n == 50) id_of_50 = id;
  rn_table_cursor_close(c);
  CHECK(n == 100 && id_of_50 == 50); /* the re-inserted key got its id back */
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_changes_groups_and_sinks);
  RUN(test_failing_sink_rolls_back);
  RUN(test_reopen_restores_state);
  return CHECK_REPORT();
}
