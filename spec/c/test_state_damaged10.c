/* test_state_damaged10.c — more meta records read back from a damaged
 * state (test_state_damaged9.c's sequel): each damaged record is refused
 * naming the state and what it belongs to, or, where going on is safe,
 * gone on from the safe way with a note saying so; never read as a
 * default that could give wrong results unsaid. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damaged_fixture.h"
#include "distinct.h"
#include "evolve_reads.h"
#include "jetstream.h"
#include "pipeline.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "runnel.h"
#include "scan.h"
#include "sqlite.h"
#include "store.h"
#include "store_sink.h"
#include "verify.h"

/* ---- meta records rewritten through LMDB (raw_meta_fixture.h) ---- */

/* ---- "rd:": the relations a relation's functions read ---- */

/* A state where u's functions were seen to read t: "rd:u" holds "t\0". */
static void make_reads_state(const char *dir)
{
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *t = NULL, *u = NULL;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == 0);
  CHECK(rn_reads_note(p, "u", t) == 0);
  CHECK(insert_int(p, t, "k", 1) == 0); /* the group writes it */
  rn_pipeline_close(p);
}

/* A cut list dropped its last name unsaid (a name without its \0 ended
 * it): a change of that relation no longer rebuilt the one reading it,
 * whose rows stayed wrong. An empty name (a \0 flipped in) or an empty
 * list, never written, is damage too. */
static void test_damaged_reads_are_refused(void)
{
  static const struct { const char *v; size_t len; } bad[] = { { "t", 1 }, { "\0", 1 }, { "t\0\0", 3 }, { "", 0 } };
  char dir[] = "/tmp/runnel_damaged10_XXXXXX", want[600];
  CHECK(mkdtemp(dir) != NULL);
  make_reads_state(dir);
  size_t len;
  char *kept = raw_get(dir, "rd:u", &len);
  CHECK(kept && len == 23 && memcmp(kept, "t", 2) == 0 && memcmp(kept + 2, "\xff" "nl1", 4) == 0); /* and its check
                                                                                                 * (evolve_reads.h) */
  free(kept);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    raw_put(dir, "rd:u", bad[i].v, bad[i].len);
    rn_pipeline *p = open_at(dir);
    if (!p) continue;
    rn_rel *t = NULL, *u = NULL;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == RN_ESTORE);
    snprintf(want, sizeof want, "state damaged: %s: the list of the relations that relation \"u\"'s functions read "
             "is malformed (%zu bytes): a change of one of them might not rebuild it; drop it to build it anew "
             "(p:drop(\"u\") or runnel drop %s u)", dir, bad[i].len, dir);
    CHECK(strcmp(rn_errmsg(p), want) == 0);
    if (check_failed_now) fprintf(stderr, "case %zu: %s\n", i, rn_errmsg(p));
    CHECK(rn_drop(p, "u") == 0); /* as the message says: u is built anew */
    CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == 0);
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

/* ---- "Ss:": the last group a permanent store saw ---- */

/* A store's mark of another size, or past the last group: it was read as
 * "not in step" and the store written again (the safe answer), unsaid.
 * Now a note says so; the store holds its relation's rows. */
static void test_damaged_store_mark_is_noted(void)
{
  static const struct { const char *v; size_t len; const char *says; } bad[] = {
    { "\1\0\0", 3, "is 3 bytes, not 8" },
    { "\x09\0\0\0\0\0\0\0", 8, "(9) is past the state's (1)" },
  };
  char dir[] = "/tmp/runnel_damaged10_XXXXXX", notes[8192], want[600];
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_store_sink(p, t, "kept") == 0);
  CHECK(insert_int(p, t, "k", 1) == 0);
  rn_pipeline_close(p);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    raw_put(dir, "Ss:kept", bad[i].v, bad[i].len);
    if (!(p = open_at(dir))) continue;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    take_notes(p, notes);
    CHECK(rn_store_sink(p, t, "kept") == 0);
    take_notes(p, notes);
    snprintf(want, sizeof want, "state damaged: %s: store \"kept\": its last group %s: written again from its "
             "relation\n", dir, bad[i].says);
    CHECK(strcmp(notes, want) == 0);
    if (check_failed_now) fprintf(stderr, "case %zu: notes: %s", i, notes);
    rn_pipeline_close(p);
    CHECK(raw_entries(dir, "st:kept") == 1);
    size_t len;
    char *mark = raw_get(dir, "Ss:kept", &len); /* written again */
    CHECK(mark && len == 8 && memcmp(mark, "\1\0\0\0\0\0\0\0", 8) == 0);
    free(mark);
  }
  cleanup(dir);
}

/* ---- "chs": the groups the "ch:" records know ---- */

static int noop(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 0;
}

/* One session over t and u, audit subscribed to t when sub, inserting k
 * into t (0: none) and into u (0: none); its notes in notes (when given). */
static void session(const char *dir, bool sub, int64_t kt, int64_t ku, char *notes)
{
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *t = NULL, *u = NULL;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == 0);
  if (notes) take_notes(p, notes);
  if (sub) CHECK(rn_subscribe_durable(p, t, "audit", noop, NULL) == 0);
  if (kt) CHECK(insert_int(p, t, "k", kt) == 0);
  if (ku) CHECK(insert_int(p, u, "k", ku) == 0);
  if (notes) CHECK(rn_take_notes(p, gather, notes) >= 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* A damaged span was read as "not known" (the safe answer: audit is told
 * it may have missed group 2, which changed only u), unsaid; a span past
 * the last group, or backwards, was believed. Now each is the safe answer
 * with a note. */
static void test_damaged_change_span_is_noted(void)
{
  static const struct { const char *v; size_t len; const char *says; } bad[] = {
    { "\0\0\0", 3, "is 3 bytes, not 16" },
    { "\0\0\0\0\0\0\0\0\x09\0\0\0\0\0\0\0", 16, "says groups 1 to 9, the last group being 2" },
    { "\x02\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0", 16, "says groups 3 to 1, the last group being 2" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char dir[] = "/tmp/runnel_damaged10_XXXXXX", notes[8192], want[1200];
    CHECK(mkdtemp(dir) != NULL);
    session(dir, true, 1, 0, NULL);
    session(dir, false, 0, 2, NULL); /* group 2 changes u alone */
    raw_put(dir, "chs", bad[i].v, bad[i].len);
    session(dir, true, 0, 0, notes);
    snprintf(want, sizeof want, "state damaged: %s: the span of groups its change records know %s: every group up "
             "to 2 counts as changing every relation (a durable sink declared again is told it may have missed "
             "them)\nt: durable subscriber audit missed the changes of t in group 2: ", dir, bad[i].says);
    CHECK(strncmp(notes, want, strlen(want)) == 0);
    if (check_failed_now) fprintf(stderr, "case %zu: notes: %s", i, notes);
    cleanup(dir);
  }
}

/* ---- "ev": the relations changed since the last group ---- */

/* A damaged record was read as runnel 0.16's (stateful relations rebuilt),
 * unsaid, and the tables it named were no longer marked: their rows'
 * stamp ("eg:") stayed, so an attach elsewhere did not see them change. */
static void test_damaged_marks_count_every_relation(void)
{
  static const struct { const char *v; size_t len; } bad[] = { { "t", 1 }, { "\0", 1 }, { "t\0\0", 3 } };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char dir[] = "/tmp/runnel_damaged10_XXXXXX", notes[8192], want[1200];
    CHECK(mkdtemp(dir) != NULL);
    rn_pipeline *p = open_at(dir);
    rn_rel *t = NULL, *d = NULL;
    if (!p) continue;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_declare_distinct(p, "d", t, &d) == 0);
    CHECK(insert_int(p, t, "k", 1) == 0);
    rn_pipeline_close(p);
    size_t len;
    char *before = raw_get(dir, "eg:t", &len);
    CHECK(before && len == 8);
    raw_put(dir, "ev", bad[i].v, bad[i].len);
    if (!(p = open_at(dir))) continue;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_declare_distinct(p, "d", t, &d) == 0);
    take_notes(p, notes);
    snprintf(want, sizeof want, "state damaged: %s: the record of the relations changed since the last group is "
             "malformed (%zu bytes): every relation declared counts as changed (stateful ones are rebuilt from "
             "their inputs)\nd: rebuilt from its inputs\n", dir, bad[i].len);
    CHECK(strcmp(notes, want) == 0);
    if (check_failed_now) fprintf(stderr, "case %zu: notes: %s", i, notes);
    CHECK(insert_int(p, t, "k", 2) == 0);
    rn_pipeline_close(p);
    char *after = raw_get(dir, "eg:t", &len);
    CHECK(after && len == 8 && before && memcmp(before, after, 8) != 0); /* t counts as changed */
    char *ev = raw_get(dir, "ev", &len);
    CHECK(ev == NULL); /* deleted by the group */
    free(before);
    free(after);
    free(ev);
    cleanup(dir);
  }
}

/* ---- the SQLite sink reads the id of the state that wrote its table ---- */

/* The original's id cut: its first 20 digits were taken as its id, not
 * this copy's, and the copy took the table the original still writes. */
static void test_sqlite_owner_id_damaged_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged10_XXXXXX", one[64], copy[64], db[64], cmd[256], want[1200];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(one, sizeof one, "%s/one", dir);
  snprintf(copy, sizeof copy, "%s/copy", dir);
  snprintf(db, sizeof db, "%s/out.db", dir);
  rn_pipeline *p = open_at(one);
  rn_rel *t = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_sqlite_sink(p, t, db, "t", 0) == 0);
  CHECK(insert_int(p, t, "k", 1) == 0);
  rn_pipeline_close(p);
  snprintf(cmd, sizeof cmd, "cp -r %s %s", one, copy);
  CHECK(system(cmd) == 0);
  raw_put(one, "sid", "0123456789abcdef0123", 20);
  if ((p = open_at(copy))) {
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_sqlite_sink(p, t, db, "t", 0) == RN_ESTORE);
    snprintf(want, sizeof want, "t: sqlite table \"t\" in %s is written by the runnel state at %s, whose id is "
             "damaged (not 32 hex digits: 20 bytes): whether the state at %s is its copy cannot be told, and one "
             "state writes a table: name another table, or remove the state at %s", db, one, copy, one);
    CHECK(strcmp(rn_errmsg(p), want) == 0);
    if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

/* ---- a top's damaged state names the state and the top ---- */

static int count_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  (void)row;
  (void)len;
  ++*(int *)ctx;
  return 0;
}

/* It said "state damaged: tp: …", without the state's path, where the
 * others say "state damaged: <path>: join \"tj\": …". */
static void test_top_damage_names_state_and_top(void)
{
  char dir[] = "/tmp/runnel_damaged10_XXXXXX", want[600];
  CHECK(mkdtemp(dir) != NULL);
  static const rn_order_def order[] = { { "k", 0 } };
  rn_top_def def = { 2, NULL, 0, order, 1, NULL };
  for (int round = 0; round < 2; round++) {
    rn_pipeline *p = open_at(dir);
    if (!p) continue;
    rn_rel *t = NULL, *tp = NULL;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_top_declare(p, "tp", t, &def, &tp) == 0);
    if (!round) {
      CHECK(insert_int(p, t, "k", 1) == 0);
    } else {
      int n = 0;
      CHECK(tp && rn_rel_scan(tp, count_row, &n) == RN_ESTORE);
      snprintf(want, sizeof want, "state damaged: %s: top \"tp\": a row of its top does not decode", dir);
      CHECK(strcmp(rn_errmsg(p), want) == 0);
      if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
    }
    rn_pipeline_close(p);
    if (round) continue;
    MDB_txn *txn;
    MDB_dbi rows;
    MDB_env *env = raw_open(dir, &txn, &rows);
    CHECK(mdb_dbi_open(txn, "tt:tp", 0, &rows) == 0);
    CHECK(mdb_set_compare(txn, rows, rn_store_key_cmp) == 0);
    MDB_cursor *cur;
    MDB_val k, v = { 3, (void *)"\1\0\0" };
    CHECK(mdb_cursor_open(txn, rows, &cur) == 0);
    CHECK(mdb_cursor_get(cur, &k, &(MDB_val){ 0, NULL }, MDB_FIRST) == 0);
    CHECK(mdb_cursor_put(cur, &k, &v, MDB_CURRENT) == 0);
    mdb_cursor_close(cur);
    raw_close(env, txn);
  }
  cleanup(dir);
}

/* The first entry of the named database db removed. */
static void raw_del_first(const char *dir, const char *db)
{
  MDB_txn *txn;
  MDB_dbi meta, dbi;
  MDB_cursor *cur;
  MDB_val k, v;
  MDB_env *env = raw_open(dir, &txn, &meta);
  CHECK(mdb_dbi_open(txn, db, 0, &dbi) == 0);
  CHECK(mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0);
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST) == 0);
  CHECK(mdb_cursor_del(cur, 0) == 0);
  mdb_cursor_close(cur);
  raw_close(env, txn);
}

/* An index's and a distinct's state that lost a row's entry: they said
 * "state damaged: ix: t deleted a row it never held", without the path. */
static void test_index_and_distinct_damage_name_state_and_relation(void)
{
  static const char *const kinds[] = { "index", "distinct" };
  for (int i = 0; i < 2; i++) {
    char dir[] = "/tmp/runnel_damaged10_XXXXXX", want[600];
    CHECK(mkdtemp(dir) != NULL);
    static const rn_order_def order[] = { { "k", 0 } };
    for (int round = 0; round < 2; round++) {
      rn_pipeline *p = open_at(dir);
      if (!p) continue;
      rn_rel *t = NULL, *x = NULL;
      CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
      CHECK((i ? rn_declare_distinct(p, "x", t, &x) : rn_index_declare(p, "x", t, order, 1, &x)) == 0);
      if (!round) {
        CHECK(insert_int(p, t, "k", 1) == 0);
      } else {
        CHECK(delete_int(p, t, 1) == RN_ESTORE);
        snprintf(want, sizeof want, "state damaged: %s: %s \"x\": t deleted a row it never held", dir, kinds[i]);
        CHECK(strcmp(rn_errmsg(p), want) == 0);
        if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
      }
      rn_pipeline_close(p);
      if (!round) raw_del_first(dir, i ? "dh:x" : "ix:x");
    }
    cleanup(dir);
  }
}

/* ---- a keyed table's counters behind an id it holds ---- */

/* Its counters damaged to next id 6 (above its 4 entries, below id 10):
 * the check at open passed, keys 5 to 9 took ids 6 to 10, and key 4 put
 * back took its id 10 again: two rows under one id, unsaid. Now the open
 * finds its largest id (a walk only when its ids are not 1..n) and
 * refuses; rows and counters stay as they were. */
static void test_keyed_counters_behind_an_id_are_refused(void)
{
  char dir[] = "/tmp/runnel_damaged10_XXXXXX", want[600];
  CHECK(mkdtemp(dir) != NULL);
  make_gapped_state(dir);
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  if (p) { /* as it is: opens, and the next key takes id 11 */
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(t && t->next_id == 11);
    rn_pipeline_close(p);
  }
  put_counters(dir, 6, 3, 5);
  if (!(p = open_at(dir))) return;
  int rc = rn_declare_table(p, "t", k_col, 1, k_key, 1, &t);
  CHECK(rc == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: relation \"t\" holds row id 10, its counters say next id 6", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  if (rc == 0) { /* what it did: a duplicate id */
    for (int k = 5; k <= 9; k++) insert_int(p, t, "k", k);
    insert_int(p, t, "k", 4);
  }
  rn_pipeline_close(p);
  CHECK(raw_entries(dir, "t:t") == 4);
  cleanup(dir);
}

/* runnel verify read live rows' ids only: a tombstone's id at or past the
 * next id (the case above) passed. */
static void test_verify_sees_a_tombstone_past_the_counters(void)
{
  char dir[] = "/tmp/runnel_damaged10_XXXXXX", text[4096];
  CHECK(mkdtemp(dir) != NULL);
  make_gapped_state(dir);
  FILE *out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) == 0);
  fclose(out);
  put_counters(dir, 6, 3, 5);
  out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) == 1);
  fclose(out);
  CHECK(strstr(text, "damaged: table \"t\": row id 10 is out of range (next id 6)\n") != NULL);
  if (check_failed_now) fprintf(stderr, "%s", text);
  cleanup(dir);
}

/* runnel verify passed each of these records damaged ("rd:", "Ss:",
 * "ch:", "chs", "ev", "sid"): a state it called whole was refused at its
 * next open, or went on the safe way with a note. */
static void test_verify_names_damaged_records(void)
{
  char dir[] = "/tmp/runnel_damaged10_XXXXXX", text[8192];
  CHECK(mkdtemp(dir) != NULL);
  make_reads_state(dir); /* "rd:u", "ch:t", "chs" */
  rn_pipeline *p = open_at(dir);
  if (p) {
    rn_rel *t = NULL;
    char id[33];
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_store_sink(p, t, "kept") == 0); /* "Ss:kept" */
    CHECK(rn_state_id(p, id) == 0);          /* "sid" */
    rn_pipeline_close(p);
  }
  FILE *out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) == 0);
  fclose(out);
  if (check_failed_now) fprintf(stderr, "%s", text);
  raw_put(dir, "rd:u", "t", 1);
  raw_put(dir, "Ss:kept", "\1\0\0", 3);
  raw_put(dir, "ch:t", "\x07\0\0\0\0\0\0\0", 8);
  raw_put(dir, "chs", "\0\0\0", 3);
  raw_put(dir, "ev", "t", 1);
  raw_put(dir, "sid", "0123456789abcdef0123", 20);
  out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) == 6);
  fclose(out);
  static const char *const lines[] = {
    "damaged: relation \"u\": the list of the relations its functions read is malformed\n",
    "damaged: store \"kept\": its last group is not 8 bytes\n",
    "damaged: relation \"t\": the record of the last group that changed it is past the last group\n",
  };
  for (int i = 0; i < 3; i++) CHECK(strstr(text, lines[i]) != NULL);
  char line[300];
  snprintf(line, sizeof line, "damaged: %s: the span of groups its change records know is not 16 bytes\n", dir);
  CHECK(strstr(text, line) != NULL);
  snprintf(line, sizeof line, "damaged: %s: the record of the relations changed since the last group is malformed\n",
           dir);
  CHECK(strstr(text, line) != NULL);
  snprintf(line, sizeof line, "damaged: %s: its id is not 32 hex digits\n", dir);
  CHECK(strstr(text, line) != NULL);
  if (check_failed_now) fprintf(stderr, "%s", text);
  cleanup(dir);
}

int main(void)
{
  RUN(test_damaged_reads_are_refused);
  RUN(test_damaged_store_mark_is_noted);
  RUN(test_damaged_change_span_is_noted);
  RUN(test_damaged_marks_count_every_relation);
  RUN(test_sqlite_owner_id_damaged_is_refused);
  RUN(test_top_damage_names_state_and_top);
  RUN(test_index_and_distinct_damage_name_state_and_relation);
  RUN(test_keyed_counters_behind_an_id_are_refused);
  RUN(test_verify_sees_a_tombstone_past_the_counters);
  RUN(test_verify_names_damaged_records);
  return CHECK_REPORT();
}
