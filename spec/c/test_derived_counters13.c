/* test_derived_counters13.c — a join's or an aggregate's counters ("n:"
 * name, store.h) damaged behind the ids it keeps: its next id at or below
 * an id its "jr:" (a join's result keys) or "ag:" (an aggregate's groups)
 * holds. The open took them, and the next new result key or group got an
 * id another holds: two rows under one id (make fuzz, the meta target,
 * found it for a join: fuzz/regressions/meta). Now the declaration is
 * refused naming the state, the relation and both ids, as a table's is
 * (relation.c, rn_state_check_ids), and nothing is changed. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "check.h"
#include "join_fixture.h"
#include "join.h"
#include "pipeline.h"
#include "raw_meta_fixture.h"
#include "scan.h"
#include "store.h"

#include "join_kept_fixture.h"

/* The fixture's declare_state, then per_team: a count of players by team. */
static int declare_both(const char *dir, rn_pipeline **out, rn_rel **agg)
{
  int rc = declare_state(dir, out);
  if (rc) return rc;
  int by = 1;
  rn_agg_spec n = { "n", RN_AGG_COUNT, -1 };
  rn_window w = { .kind = RN_WINDOW_NONE };
  rn_agg_fns fns = { 0 };
  return rn_declare_aggregate(*out, "per_team", players, &by, 1, &w, &n, 1, &fns, agg);
}

/* A state whose join tj holds results 1 to 3 (players 10, 11, 12) and
 * whose per_team holds groups 1 to 3 (teams 1, 2, 3), the counters of
 * name then rewritten to next id next_id, from group seq on. */
static void make_state(const char *dir, const char *name, uint64_t next_id, uint64_t seq)
{
  rn_pipeline *p;
  rn_rel *agg;
  CHECK(declare_both(dir, &p, &agg) == 0);
  CHECK(put(teams, 1, "a", 0, false) == 0);
  for (int id = 10; id <= 12; id++) CHECK(put(players, id, NULL, id - 9, false) == 0);
  CHECK(rn_seq(p) == 4);
  rn_pipeline_close(p);
  uint64_t c[3] = { next_id, 3, seq };
  char key[32];
  snprintf(key, sizeof key, "n:%s", name);
  raw_put(dir, key, c, sizeof c);
}

static void check_refused(const char *name, uint64_t next_id, uint64_t seq)
{
  char dir[] = "/tmp/runnel_derivedcount13_XXXXXX", want[300], key[32];
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, name, next_id, seq);
  rn_pipeline *p;
  rn_rel *agg = NULL;
  CHECK(declare_both(dir, &p, &agg) == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: relation \"%s\" holds row id 3, its counters say next id %llu",
           dir, name, (unsigned long long)next_id);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  rn_pipeline_close(p);
  size_t len;
  uint64_t c[3] = { 0 };
  snprintf(key, sizeof key, "n:%s", name);
  char *v = raw_get(dir, key, &len); /* the counters as they were */
  CHECK(v && len == 24);
  if (v) memcpy(c, v, sizeof c);
  CHECK(c[0] == next_id && c[1] == 3 && c[2] == seq);
  free(v);
  cleanup(dir);
}

/* Current as of the state's last group: not rebuilt, its ids kept. */
static void test_counters_behind_its_ids_are_refused(void)
{
  check_refused("tj", 2, 4);
  check_refused("per_team", 2, 4);
}

/* Past the state's last group (stale: rebuilt, its ids kept), and a next
 * id of 0, which none ever has: the fuzzer's input. */
static void test_stale_counters_at_zero_are_refused(void)
{
  check_refused("tj", 0, 576);
  check_refused("per_team", 0, 576);
}

/* Counters at or past their ids open as before, and new results take ids
 * after every one the join holds. */
static void test_counters_past_its_ids_open(void)
{
  char dir[] = "/tmp/runnel_derivedcount13_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir, "tj", 9, 4);
  rn_pipeline *p;
  rn_rel *agg = NULL;
  CHECK(declare_both(dir, &p, &agg) == 0);
  CHECK(put(players, 13, NULL, 4, false) == 0);
  uint64_t id = 0;
  int found = 0;
  msgpack_object k = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 13 };
  uint8_t given[2] = { 1, 0 };
  msgpack_object vals[2] = { k };
  msgpack_sbuffer out;
  msgpack_sbuffer_init(&out);
  CHECK(joined && rn_rel_get(joined, vals, given, &out, &id, &found) == 0);
  CHECK(found && id == 9);
  vals[0].via.u64 = 4; /* team 4's group: per_team's counters were not touched */
  CHECK(agg && rn_rel_get(agg, vals, given, &out, &id, &found) == 0);
  CHECK(found && id == 4);
  msgpack_sbuffer_destroy(&out);
  rn_pipeline_close(p);
  cleanup(dir);
}

int main(void)
{
  (void)rewrite_entries; /* the fixture's: no entry is rewritten here, */
  (void)open_state;      /* and no sink is needed */
  RUN(test_counters_behind_its_ids_are_refused);
  RUN(test_stale_counters_at_zero_are_refused);
  RUN(test_counters_past_its_ids_open);
  return CHECK_REPORT();
}
