/* test_state_damaged9.c — meta records read back from a damaged state.
 *
 * A filter's or map's kept function ("fc:", "fo:"; core/evolve_code.h) is
 * Lua bytecode, which Lua does not verify: a copy that does not match its
 * check (a flipped byte, a cut, another shape, a copy runnel 0.19 wrote
 * without one) is never handed back to be run; the binding says its
 * sinks were not told. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "derive.h"
#include "distinct.h"
#include "evolve_code.h"
#include "jetstream.h"
#include "key.h"
#include "pipeline.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "scan.h"
#include "runnel.h"
#include "store.h"
#include "store_sink.h"
#include "verify.h"

/* ---- meta records rewritten through LMDB (raw_meta_fixture.h) ---- */

/* key's value with its byte at (from the end when negative) xored with x. */
static void raw_flip(const char *dir, const char *key, long at, unsigned char x)
{
  size_t len;
  char *v = raw_get(dir, key, &len);
  CHECK(v && len > 0);
  if (!v || !len) return;
  size_t i = at < 0 ? len - (size_t)-at : (size_t)at;
  v[i] = (char)(v[i] ^ x);
  raw_put(dir, key, v, len);
  free(v);
}

/* key's value cut to its first len - cut bytes. */
static void raw_cut(const char *dir, const char *key, size_t cut)
{
  size_t len;
  char *v = raw_get(dir, key, &len);
  CHECK(v && len >= cut);
  if (v && len >= cut) raw_put(dir, key, v, len - cut);
  free(v);
}

/* ---- a filter's function kept, changed, and read back ---- */

/* Stands for the binding's copy of a function (lua/runnel.lua's format:
 * |u32 n|bytecode|upvalues…|). */
static const char code_v1[] = "\x0c\0\0\0\x1bLuaT\0 v1 bytecode N";
#define CODE_V1_LEN (sizeof code_v1 - 1)

static rn_pipeline *open_at(const char *dir)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  return p;
}

static int pass_all(void *ctx, rn_rel *in, const char *row, size_t len, int *pass, rn_err *e)
{
  (void)ctx, (void)in, (void)row, (void)len, (void)e;
  *pass = 1;
  return 0;
}

static const rn_column_def f_in_col[] = { { "k", "int", 0, NULL, 0, NULL } };
static const char *const f_in_key[] = { "k" };

/* Records f's function as the fingerprint fp and code (NULL: one that
 * cannot be run again); what its sinks' rows came from, in *told. Then
 * declares f, a filter of table t, as the binding does: the record is
 * written with f's declaration (evolve_code.h). */
static int record(rn_pipeline *p, const char *fp, const char *code, size_t len, rn_code_again *told)
{
  rn_code_again again = { code ? RN_CODE_KEPT : RN_CODE_UNKEPT, (char *)code, code ? len : 0, NULL };
  rn_rel *t = NULL, *f = NULL;
  int rc = rn_declare_table(p, "t", f_in_col, 1, f_in_key, 1, &t);
  if (!rc) rc = rn_code_record_again(p, "f", fp, strlen(fp), &again, told);
  if (!rc) rc = rn_declare_filter(p, "f", t, pass_all, NULL, NULL, &f);
  return rc;
}

/* A state whose f kept code_v1. */
static void make_state(const char *dir)
{
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_code_again told;
  CHECK(record(p, "fp1", code_v1, CODE_V1_LEN, &told) == 0);
  CHECK(told.kind == RN_CODE_NONE);
  rn_pipeline_close(p);
}

/* f declared with another function over dir: what is told. */
static rn_code_again changed(const char *dir)
{
  rn_code_again told = { RN_CODE_NONE, NULL, 0, NULL };
  rn_pipeline *p = open_at(dir);
  if (!p) return told;
  CHECK(record(p, "fp2", "v2", 2, &told) == 0);
  rn_pipeline_close(p);
  return told;
}

static const char damaged[] = "the state's copy of its old function is damaged: it was not run";

/* The kept copy is refused, never handed back to be run, saying why. */
static void check_refused(rn_code_again told, const char *why)
{
  CHECK(told.kind == RN_CODE_KEPT);
  CHECK(told.code == NULL);
  CHECK(told.why && strcmp(told.why, why) == 0);
  free(told.code);
}

static void test_intact_copy_is_handed_back(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  rn_code_again told = changed(dir);
  CHECK(told.kind == RN_CODE_KEPT && told.why == NULL);
  CHECK(told.code && told.len == CODE_V1_LEN && memcmp(told.code, code_v1, CODE_V1_LEN) == 0);
  free(told.code);
  cleanup(dir);
}

static void test_flipped_byte_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  raw_flip(dir, "fc:f", -3, 0x20); /* inside the bytecode */
  check_refused(changed(dir), damaged);
  cleanup(dir);
}

static void test_cut_copy_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  raw_cut(dir, "fc:f", 5);
  check_refused(changed(dir), damaged);
  cleanup(dir);
}

static void test_other_shape_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  raw_put(dir, "fc:f", "\x01\x02\x03", 3);
  check_refused(changed(dir), damaged);
  cleanup(dir);
}

/* The copy of a change not yet told ("fo:"), damaged: refused too. */
static void test_damaged_pending_copy_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  rn_code_again told = changed(dir); /* not told: "fo:f" holds v1's copy */
  free(told.code);
  raw_flip(dir, "fo:f", -2, 0x01);
  rn_pipeline *p = open_at(dir);
  if (p) {
    CHECK(record(p, "fp3", "v3", 2, &told) == 0);
    check_refused(told, damaged);
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

/* runnel 0.19 kept the binding's copy as it is, without a check: it cannot
 * be told from a damaged one, and is not run. */
static void test_unchecked_copy_of_019_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  raw_put(dir, "fc:f", code_v1, CODE_V1_LEN);
  check_refused(changed(dir), "the state's copy of its old function has no check (runnel 0.19 wrote it): it was not run");
  cleanup(dir);
}

/* runnel 0.19's empty copy: a function that could not be run again. */
static void test_empty_copy_of_019_is_unkept(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  raw_put(dir, "fc:f", "", 0);
  rn_code_again told = changed(dir);
  CHECK(told.kind == RN_CODE_UNKEPT && told.code == NULL);
  cleanup(dir);
}

/* An unchanged function's copy of 0.19 is kept again with its check: the
 * next change is told. */
static void test_unchecked_copy_is_checked_once_seen(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  raw_put(dir, "fc:f", code_v1, CODE_V1_LEN);
  rn_pipeline *p = open_at(dir);
  if (p) {
    rn_code_again told;
    CHECK(record(p, "fp1", code_v1, CODE_V1_LEN, &told) == 0 && told.kind == RN_CODE_NONE);
    rn_pipeline_close(p);
  }
  rn_code_again told = changed(dir);
  CHECK(told.kind == RN_CODE_KEPT && told.why == NULL);
  CHECK(told.code && told.len == CODE_V1_LEN && memcmp(told.code, code_v1, CODE_V1_LEN) == 0);
  free(told.code);
  cleanup(dir);
}

/* ---- runnel verify ---- */

static const rn_column_def k_col[] = { { "k", "int", 0, NULL, 0, NULL } };
static const char *const k_key[] = { "k" };

/* A state whose table t had one group. */
static void make_table_state(const char *dir)
{
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(t && insert_int(p, t, "k", 1) == 0);
  rn_pipeline_close(p);
}

/* The text rn_verify writes about dir, and its result. */
static int verify_text(const char *dir, char *text, size_t len)
{
  FILE *out = fmemopen(text, len, "w");
  int rc = rn_verify(dir, out);
  fclose(out);
  return rc;
}

/* A bad durable sink's mark is named by the sink as its user knows it
 * (0.19's refusals and notes do), not by its key in the state: it said
 * "the mark of durable sink od:sink:audit". */
static void test_verify_names_sinks_as_users_know_them(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", text[4096];
  CHECK(mkdtemp(dir) != NULL);
  make_table_state(dir);
  uint64_t past[3] = { 9, 0, 0 };
  raw_put(dir, "od:sink:audit", "\1\0\0\0\0\0\0\0", 8);
  raw_put(dir, "od:ndjson:/tmp/out.ndjson", past, sizeof past);
  raw_put(dir, "od:sqlite:/tmp/out.db\x1forders", past, sizeof past);
  CHECK(verify_text(dir, text, sizeof text) == 3);
  CHECK(strstr(text, "damaged: the mark of durable sink audit is not 24 bytes\n") != NULL);
  CHECK(strstr(text, "damaged: the mark of durable sink to /tmp/out.ndjson is past the last group\n") != NULL);
  CHECK(strstr(text, "damaged: the mark of durable sink to table \"orders\" in /tmp/out.db is past the last group\n")
        != NULL);
  if (check_failed_now) fprintf(stderr, "%s", text);
  cleanup(dir);
}

/* ---- records of other kinds, damaged: refused naming them ---- */

/* A JetStream source's position of another size: it was read as 0, and
 * the source applied its stream again from the start. */
static void test_damaged_js_position_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", want[300];
  CHECK(mkdtemp(dir) != NULL);
  make_table_state(dir);
  raw_put(dir, "jp:orders\x1forders.new", "\7\0\0", 3);
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  if (p) {
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    uint64_t seq = 99;
    CHECK(rn_js_position(p, "orders", "orders.new", &seq) == RN_ESTORE);
    snprintf(want, sizeof want,
             "state damaged: %s: the position of JetStream stream orders subject orders.new is 3 bytes, not 8", dir);
    CHECK(strcmp(rn_errmsg(p), want) == 0);
    CHECK(rn_js_position(p, "orders", "orders.new", &seq) == RN_ESTORE); /* not remembered as 0 */
    CHECK(rn_js_position(p, "orders", "other", &seq) == 0 && seq == 0);
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

/* The state's id cut or not hex: JetStream's message ids (and NDJSON's,
 * SQLite's rows) were made of what was left. */
static void test_damaged_state_id_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", want[300], id[33];
  CHECK(mkdtemp(dir) != NULL);
  make_table_state(dir);
  rn_pipeline *p = open_at(dir);
  if (p) {
    CHECK(rn_state_id(p, id) == 0 && strlen(id) == 32);
    rn_pipeline_close(p);
  }
  const char *bad[] = { "0123456789abcdef0123", "0123456789abcdef0123456789abcdeX" };
  for (int i = 0; i < 2; i++) {
    raw_put(dir, "sid", bad[i], strlen(bad[i]));
    if (!(p = open_at(dir))) continue;
    CHECK(rn_state_id(p, id) == RN_ESTORE);
    snprintf(want, sizeof want, "state damaged: %s: its id is not 32 hex digits (%zu bytes)", dir, strlen(bad[i]));
    CHECK(strcmp(rn_errmsg(p), want) == 0);
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

static int noop(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 0;
}

static void on_missed(void *ctx, const char *line)
{
  if (strstr(line, " missed ")) snprintf(ctx, 2048, "%s", line);
}

/* One session over t, subscribed as "audit" when sub, inserting k (0:
 * none); the note of what audit missed in missed (when given). */
static void session(const char *dir, bool sub, int64_t k, char *missed)
{
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *t = NULL;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  if (sub) CHECK(rn_subscribe_durable(p, t, "audit", noop, NULL) == 0);
  if (k) CHECK(insert_int(p, t, "k", k) == 0);
  if (missed) CHECK(rn_take_notes(p, on_missed, missed) >= 0);
  CHECK(rn_pipeline_close(p) == 0);
}

/* The last group that changed a relation ("ch:"), of another size: it was
 * read as "never", and a durable sink declared again missed the changes
 * committed without it, unsaid. Now they may have changed it: said. */
static void test_damaged_last_change_counts_as_changed(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", missed[2048] = "";
  CHECK(mkdtemp(dir) != NULL);
  session(dir, true, 1, NULL);
  session(dir, false, 2, NULL);
  raw_put(dir, "ch:t", "\2\0\0", 3);
  session(dir, true, 0, missed);
  CHECK(strncmp(missed, "t: durable subscriber audit missed the changes of t in group 2: ", 64) == 0);
  if (check_failed_now) fprintf(stderr, "missed: %s\n", missed);
  cleanup(dir);
}

/* The last "eg:" stamp given ("egn"), of another size: counting began
 * again from 1, and a relation's new stamp could be the one it had, so an
 * attach in another state did not see that its rows changed wholesale. */
static void test_damaged_stamp_count_stays_unique(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_table_state(dir);
  size_t len;
  char *before = raw_get(dir, "eg:t", &len);
  CHECK(before && len == 8);
  raw_put(dir, "egn", "\1\0\0", 3);
  rn_pipeline *p = open_at(dir);
  if (p) {
    static const rn_column_def wider[] = { { "k", "int", 0, NULL, 0, NULL }, { "x", "int", 1, NULL, 0, NULL } };
    rn_rel *t = NULL;
    CHECK(rn_declare_table(p, "t", wider, 2, k_key, 1, &t) == 0); /* its rows rewritten: a new stamp */
    rn_pipeline_close(p);
  }
  char *after = raw_get(dir, "eg:t", &len);
  CHECK(after && len == 8 && before && memcmp(before, after, 8) != 0);
  uint64_t b = 0, a = 0;
  if (before) memcpy(&b, before, 8);
  if (after) memcpy(&a, after, 8);
  CHECK(a > b);
  free(before);
  free(after);
  cleanup(dir);
}

static int counted(void *ctx, const rn_event *ev)
{
  (void)ev;
  ++*(int *)ctx;
  return 0;
}

/* A durable sink's mark past the last group: it was taken as delivered up
 * to there, and the groups committed next never reached the sink. */
static void test_mark_past_last_group_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", want[400];
  CHECK(mkdtemp(dir) != NULL);
  session(dir, true, 1, NULL);
  uint64_t marks[][3] = { { 1, 5, 0 }, { 7, 1, 0 } }; /* delivered past seen; seen past the last group */
  for (int i = 0; i < 2; i++) {
    raw_put(dir, "od:sink:audit", marks[i], sizeof marks[i]);
    rn_pipeline *p = open_at(dir);
    if (!p) continue;
    rn_rel *t = NULL;
    int n = 0;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_subscribe_durable(p, t, "audit", counted, &n) == RN_ESTORE);
    snprintf(want, sizeof want, "state damaged: %s: the mark of durable subscriber audit is past the last group "
             "(seen %d, delivered %d, last group 1)", dir, (int)marks[i][0], (int)marks[i][1]);
    CHECK(strcmp(rn_errmsg(p), want) == 0);
    if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

static void put_be64_at(char *at, uint64_t v)
{
  for (int i = 7; i >= 0; i--, v >>= 8) at[i] = (char)(v & 0xff);
}

static int refuse(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 1;
}

typedef struct seen_events {
  int n, rowless;         /* events; INSERT or UPDATE without a row, or UPDATE or DELETE without the old one */
} seen_events;

static int look(void *ctx, const rn_event *ev)
{
  seen_events *s = ctx;
  s->n++;
  if ((ev->verb != RN_VERB_DELETE && !ev->row) || (ev->verb != RN_VERB_INSERT && !ev->old)) s->rowless++;
  return 0;
}

/* An outbox entry whose change lacks the row its verb has: it reached a C
 * subscriber as an INSERT with a NULL row (runnel.h: NULL only for a
 * DELETE), which a host reads through. */
static void test_outbox_change_without_its_row_is_refused(void)
{
  static const char *const changes[] = { "\x94\x01\x01\xc0\xc0", "\x94\x02\x01\xc0\xc0", "\x94\x03\x01\xc0\xc0" };
  for (int i = 0; i < 3; i++) {
    char dir[] = "/tmp/runnel_damaged9_XXXXXX", want[300];
    CHECK(mkdtemp(dir) != NULL);
    rn_pipeline *p = open_at(dir);
    rn_rel *t = NULL;
    if (!p) continue;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_subscribe_durable(p, t, "audit", refuse, NULL) == 0);
    CHECK(insert_int(p, t, "k", 1) == 0); /* refused: group 1 waits */
    rn_pipeline_close(p);
    MDB_txn *txn;
    MDB_dbi meta, outbox;
    MDB_env *env = raw_open(dir, &txn, &meta);
    CHECK(mdb_dbi_open(txn, RN_DB_OUTBOX, 0, &outbox) == 0);
    char key[16], entry[64];
    put_be64_at(key, rn_hash64("sink:audit", 10));
    put_be64_at(key + 8, 1);
    MDB_val k = { 16, key }, v;
    CHECK(mdb_get(txn, outbox, &k, &v) == 0 && v.mv_size > 10);
    entry[0] = '\x92';
    memcpy(entry + 1, (const char *)v.mv_data + 1, 9); /* its layout (core/outbox.c (8)), then the change */
    memcpy(entry + 10, changes[i], 5);
    v = (MDB_val){ 15, entry };
    CHECK(mdb_put(txn, outbox, &k, &v, 0) == 0);
    raw_close(env, txn);
    if (!(p = open_at(dir))) continue;
    seen_events seen = { 0, 0 };
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_subscribe_durable(p, t, "audit", look, &seen) == 0);
    CHECK(rn_deliver(p) == RN_ESTORE);
    snprintf(want, sizeof want, "t: outbox: group 1 is damaged");
    CHECK(strcmp(rn_errmsg(p), want) == 0);
    CHECK(seen.n == 0 && seen.rowless == 0);
    if (check_failed_now) fprintf(stderr, "change %d: %d events, %d rowless: %s\n", i, seen.n, seen.rowless, rn_errmsg(p));
    rn_pipeline_close(p);
    cleanup(dir);
  }
}

/* A permanent store's schema that cannot be read was said to be "another
 * schema", as if it had been declared with other columns. */
static void test_unreadable_store_schema_is_damage(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", want[300];
  CHECK(mkdtemp(dir) != NULL);
  for (int round = 0; round < 2; round++) {
    if (round) raw_put(dir, "S:kept", "\x92\xc1", 2);
    rn_pipeline *p = open_at(dir);
    if (!p) continue;
    rn_rel *t = NULL;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    int rc = rn_store_sink(p, t, "kept");
    if (!round) {
      CHECK(rc == 0 && insert_int(p, t, "k", 1) == 0);
    } else {
      CHECK(rc == RN_ESTORE);
      snprintf(want, sizeof want, "state damaged: %s: store \"kept\" has a description that cannot be read", dir);
      CHECK(strcmp(rn_errmsg(p), want) == 0);
      if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
    }
    rn_pipeline_close(p);
  }
  cleanup(dir);
}

/* A keyless table's counters behind its rows (a damaged "n:" record of the
 * right size): the next insert took a stored row's id and wrote over that
 * row, unsaid. The declaration now sees it (relation.c's check_counters,
 * from fuzz meta); an insert would refuse too (MDB_NOOVERWRITE). */
static void test_keyless_counters_behind_rows_are_refused(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", want[300];
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, NULL, 0, &t) == 0);
  for (int k = 1; k <= 3; k++) CHECK(insert_int(p, t, "k", k) == 0);
  rn_pipeline_close(p);
  uint64_t counters[3] = { 2, 3, 3 }; /* next id 2: rows 1 to 3 are stored */
  raw_put(dir, "n:t", counters, sizeof counters);
  if (!(p = open_at(dir))) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, NULL, 0, &t) == RN_ESTORE);
  snprintf(want, sizeof want,
           "state damaged: %s: relation \"t\" holds 3 entries, its counters say 3 rows and next id 2", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  rn_pipeline_close(p);
  size_t len = 0;
  char *row2 = NULL;
  MDB_txn *txn;
  MDB_dbi rows;
  MDB_env *env = raw_open(dir, &txn, &rows);
  CHECK(mdb_dbi_open(txn, "t:t", 0, &rows) == 0);
  MDB_val k = { 8, (void *)"\0\0\0\0\0\0\0\2" }, v;
  if (mdb_get(txn, rows, &k, &v) == 0 && (row2 = malloc(v.mv_size))) memcpy(row2, v.mv_data, len = v.mv_size);
  raw_close(env, txn);
  CHECK(row2 && len >= 1 && row2[len - 1] == 2); /* row 2 ({k: 2}) is still there */
  free(row2);
  cleanup(dir);
}

static int count_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  (void)id;
  (void)row;
  (void)len;
  ++*(int *)ctx;
  return 0;
}

/* A distinct's stored row cut inside its |u64 copies| head: its length
 * was taken as 2^64 - 5, and reading it said "out of memory" (or read
 * past its end). */
static void test_cut_distinct_row_is_damage(void)
{
  char dir[] = "/tmp/runnel_damaged9_XXXXXX", want[300];
  CHECK(mkdtemp(dir) != NULL);
  for (int round = 0; round < 2; round++) {
    rn_pipeline *p = open_at(dir);
    if (!p) continue;
    rn_rel *t = NULL, *d = NULL;
    CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
    CHECK(rn_declare_distinct(p, "d", t, &d) == 0);
    if (!round) {
      CHECK(insert_int(p, t, "k", 1) == 0);
    } else {
      int n = 0;
      CHECK(d && rn_rel_scan(d, count_row, &n) == RN_ESTORE);
      snprintf(want, sizeof want, "state damaged: %s: distinct \"d\": stored row 1 is 3 bytes, shorter than its head",
               dir);
      CHECK(strcmp(rn_errmsg(p), want) == 0);
      if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
    }
    rn_pipeline_close(p);
    if (round) continue;
    MDB_txn *txn;
    MDB_dbi rows;
    MDB_env *env = raw_open(dir, &txn, &rows);
    CHECK(mdb_dbi_open(txn, "dr:d", 0, &rows) == 0);
    MDB_val k = { 8, (void *)"\0\0\0\0\0\0\0\1" }, v = { 3, (void *)"\1\0\0" };
    CHECK(mdb_put(txn, rows, &k, &v, 0) == 0);
    raw_close(env, txn);
  }
  cleanup(dir);
}

int main(void)
{
  RUN(test_intact_copy_is_handed_back);
  RUN(test_flipped_byte_is_refused);
  RUN(test_cut_copy_is_refused);
  RUN(test_other_shape_is_refused);
  RUN(test_damaged_pending_copy_is_refused);
  RUN(test_unchecked_copy_of_019_is_refused);
  RUN(test_empty_copy_of_019_is_unkept);
  RUN(test_unchecked_copy_is_checked_once_seen);
  RUN(test_verify_names_sinks_as_users_know_them);
  RUN(test_damaged_js_position_is_refused);
  RUN(test_damaged_state_id_is_refused);
  RUN(test_damaged_last_change_counts_as_changed);
  RUN(test_damaged_stamp_count_stays_unique);
  RUN(test_mark_past_last_group_is_refused);
  RUN(test_outbox_change_without_its_row_is_refused);
  RUN(test_unreadable_store_schema_is_damage);
  RUN(test_keyless_counters_behind_rows_are_refused);
  RUN(test_cut_distinct_row_is_damage);
  return CHECK_REPORT();
}
