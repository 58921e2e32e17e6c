/* test_recovery.c — what a state does when the world goes wrong: a second
 * writer, a full disk, a failed flush of carried groups, a tiny map. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "distinct.h"
#include "join.h"
#include "key.h"
#include "pipeline.h"
#include "row.h"
#include "store_sink.h"
#include "verify.h"

static char body[2048]; /* a row's worth of bytes, so that a few hundred rows need disk */

static rn_rel *declare_docs(rn_pipeline *p)
{
  rn_err e;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &e);
  rn_schema_add(s, "body", 4, RN_T_STRING, false, NULL, &e);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "docs", &e);
  rn_rel *r = NULL;
  CHECK(rn_declare_source(p, "docs", RN_REL_TABLE, s, &r) == 0);
  return r;
}

static int put_doc(rn_rel *r, int64_t id)
{
  msgpack_object v[2];
  v[0].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  v[0].via.u64 = (uint64_t)id;
  v[1].type = MSGPACK_OBJECT_STR;
  v[1].via.str.ptr = body;
  v[1].via.str.size = sizeof body;
  uint8_t given[2] = { 1, 1 };
  return rn_table_insert(r, v, given);
}

static off_t file_size(const char *dir)
{
  char path[256];
  struct stat st;
  snprintf(path, sizeof path, "%s/data.mdb", dir);
  return stat(path, &st) == 0 ? st.st_size : -1;
}

static void remove_state(const char *dir)
{
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* LMDB reports a short write as EIO: only the free space tells a full disk. */
static void test_write_failure_codes(void)
{
  CHECK(rn_store_write_code(ENOSPC, UINT64_MAX) == RN_EFULL);
  CHECK(rn_store_write_code(EDQUOT, UINT64_MAX) == RN_EFULL);
  CHECK(rn_store_write_code(EFBIG, UINT64_MAX) == RN_EFULL);
  CHECK(rn_store_write_code(EIO, 4096) == RN_EFULL);
  CHECK(rn_store_write_code(EIO, (uint64_t)1 << 30) == RN_EIO);
  CHECK(rn_store_write_code(MDB_MAP_FULL, 0) == 0);
}

/* p:flush() with sync = false on a disk that fills: the cause is kept, the
 * carried groups are reported lost and seq returns to LMDB's. The disk is
 * "full" by RLIMIT_FSIZE, which needs no root. */
static void test_failed_flush_keeps_cause_and_seq(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir, .nosync = 1, .carry_groups = 100000, .carry_seconds = 3600 };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *docs = declare_docs(p);
  CHECK(put_doc(docs, 1) == 0);
  CHECK(rn_flush(p) == 0 && rn_seq(p) == 1);
  struct rlimit old, small;
  CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
  small = old;
  small.rlim_cur = (rlim_t)file_size(dir) + 8192;
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  for (int i = 2; i <= 300; i++) CHECK(put_doc(docs, i) == 0);
  CHECK(rn_seq(p) == 300);
  CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
  int rc = rn_flush(p);
  CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
  signal(SIGXFSZ, was);
  CHECK(rc == RN_EFULL || rc == RN_EIO);
  char want[300];
  snprintf(want, sizeof want, "disk full or I/O error writing the state at %s (committing a group: ", dir);
  CHECK(strncmp(rn_errmsg(p), want, strlen(want)) == 0);
  CHECK(strstr(rn_errmsg(p), ") (299 groups not yet flushed to LMDB were lost)") != NULL);
  CHECK(rn_seq(p) == 1 && docs->count == 1);
  CHECK(put_doc(docs, 2) == 0 && rn_flush(p) == 0 && rn_seq(p) == 2);
  rn_pipeline_close(p);
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  CHECK(rn_seq(p) == 2);
  rn_pipeline_close(p);
  remove_state(dir);
}

/* One writer per state, through the C API: another process and this one. */
static void test_second_writer_refused(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p, *q = NULL;
  char err[RN_ERRMSG_MAX], want[300];
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  fflush(NULL);
  pid_t child = fork();
  if (child == 0) { /* another process: refused, naming this one */
    snprintf(want, sizeof want, "state %s is open for writing by process %ld", dir, (long)getppid());
    int rc = rn_pipeline_open(&opts, &q, err, sizeof err);
    _exit(rc == RN_EMISUSE && strcmp(err, want) == 0 ? 0 : 1);
  }
  int status = -1;
  CHECK(child > 0 && waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(rn_pipeline_open(&opts, &q, err, sizeof err) == RN_EMISUSE && q == NULL);
  snprintf(want, sizeof want, "state %s is already open for writing in this process "
           "(close it first; runnel.attach reads it)", dir);
  CHECK(strcmp(err, want) == 0);
  rn_pipeline_close(p);
  CHECK(rn_pipeline_open(&opts, &q, err, sizeof err) == 0);
  rn_pipeline_close(q);
  remove_state(dir);
}

/* A map smaller than LMDB's first transactions used to fail them with
 * MDB_MAP_FULL at open; it starts at a sane minimum and grows. */
static void test_tiny_map_size(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir, .map_size = 4096 };
  rn_pipeline *p;
  char err[RN_ERRMSG_MAX] = "";
  CHECK(rn_pipeline_open(&opts, &p, err, sizeof err) == 0);
  if (!p) { fprintf(stderr, "open: %s\n", err); remove_state(dir); return; }
  rn_rel *docs = declare_docs(p);
  CHECK(rn_begin(p) == 0);
  for (int i = 1; i <= 2000; i++) CHECK(put_doc(docs, i) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(docs->count == 2000);
  rn_pipeline_close(p);
  remove_state(dir);
}

/* Writes key = val into database db ("meta", or NULL: the main one) of
 * dir's environment with LMDB alone, as damage or another program would. */
static void raw_put_key(const char *dir, const char *db, const void *key, size_t klen, const void *val, size_t len);

static void raw_put(const char *dir, const char *db, const char *key, const void *val, size_t len)
{
  raw_put_key(dir, db, key, strlen(key), val, len);
}

static void raw_put_key(const char *dir, const char *db, const void *key, size_t klen, const void *val, size_t len)
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 16);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, db, 0, &dbi) == 0);
  MDB_val k = { klen, (void *)key }, v = { len, (void *)val };
  CHECK(mdb_put(txn, dbi, &k, &v, 0) == 0);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

static int no_relation(void *ctx, const rn_inspect_relation *r)
{
  (void)ctx; (void)r;
  return 0;
}

/* Opening the state (declaring docs) and inspecting it both fail with want. */
static void check_refused(const char *dir, const char *want)
{
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p = NULL;
  char err[RN_ERRMSG_MAX] = "";
  rn_inspect_state st;
  int rc = rn_pipeline_open(&opts, &p, err, sizeof err);
  if (rc == 0) {
    rn_rel *r = NULL;
    rn_schema *s = rn_schema_new();
    rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &p->err);
    rn_schema_add(s, "body", 4, RN_T_STRING, false, NULL, &p->err);
    int key = 0;
    rn_schema_set_key(s, &key, 1, "docs", &p->err);
    rc = rn_declare_source(p, "docs", RN_REL_TABLE, s, &r);
    snprintf(err, sizeof err, "%s", rn_errmsg(p));
    rn_pipeline_close(p);
  }
  CHECK(rc != 0);
  CHECK(strcmp(err, want) == 0);
  if (strcmp(err, want) != 0) fprintf(stderr, "open: got  %s\n      want %s\n", err, want);
  err[0] = '\0';
  CHECK(rn_inspect(dir, no_relation, NULL, &st, err, sizeof err) != 0);
  CHECK(strcmp(err, want) == 0);
  if (strcmp(err, want) != 0) fprintf(stderr, "inspect: got  %s\n         want %s\n", err, want);
}

static void make_docs_state(const char *dir)
{
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *docs = declare_docs(p);
  for (int i = 1; i <= 3; i++) CHECK(put_doc(docs, i) == 0);
  rn_pipeline_close(p);
}

/* A malformed catalogue entry is damage, said so, never read as zeros. */
static void test_malformed_catalogue(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", want[400];
  CHECK(mkdtemp(dir) != NULL);
  make_docs_state(dir);
  raw_put(dir, "meta", "n:docs", "\x01\x02\x03\x04\x05", 5);
  snprintf(want, sizeof want, "state damaged: %s: the counters of relation \"docs\" are 5 bytes, not 24", dir);
  check_refused(dir, want);
  raw_put(dir, "meta", "r:docs", "\xc1", 1);
  snprintf(want, sizeof want, "state damaged: %s: the catalogue entry of relation \"docs\" is malformed", dir);
  check_refused(dir, want);
  raw_put(dir, "meta", "seq", "\x01\x02\x03", 3);
  snprintf(want, sizeof want, "state damaged: %s: the sequence number is 3 bytes, not 8", dir);
  check_refused(dir, want);
  remove_state(dir);
}

/* A store's description that a damaged or crafted state holds is refused
 * by runnel.attach's reader, never read past its end. */
static void test_malformed_store_description(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", want[400];
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *docs = declare_docs(p);
  CHECK(rn_store_sink(p, docs, "st") == 0);
  CHECK(put_doc(docs, 1) == 0);
  rn_pipeline_close(p);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "st", NULL, &a, &e) == 0);
  rn_attach_close(a);
  /* a key slot past the columns; a column of two fields; a key and no columns */
#define BAD(lit) { lit, sizeof lit - 1 }
  static const struct { const char *bytes; size_t len; } bad[] = {
    BAD("\x92\x91\x95\xa1k\xa3int\xc2\xc0\xc0\x91\x07"), BAD("\x92\x91\x92\xa1k\xa3int\x90"), BAD("\x92\x90\x91\x00") };
#undef BAD
  snprintf(want, sizeof want, "state damaged: %s: store \"st\" has a description that cannot be read", dir);
  for (int i = 0; i < 3; i++) {
    raw_put(dir, "meta", "S:st", bad[i].bytes, bad[i].len);
    a = NULL;
    CHECK(rn_attach(dir, "st", NULL, &a, &e) == RN_ESCHEMA && a == NULL);
    CHECK(strcmp(e.msg, want) == 0);
  }
  remove_state(dir);
}

static int refuse_event(void *ctx, const rn_event *ev)
{
  (void)ctx; (void)ev;
  return 1;
}

/* A durable sink's mark of the wrong size is damage, said so: read as
 * absent, the groups waiting for the sink would vanish. */
static void test_malformed_outbox_mark(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", want[400];
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *docs = declare_docs(p);
  CHECK(rn_subscribe_durable(p, docs, "refuser", refuse_event, NULL) == 0);
  CHECK(put_doc(docs, 1) == 0);
  rn_pipeline_close(p);
  raw_put(dir, "meta", "od:sink:refuser", "\1\0\0\0\0\0\0\0", 8);
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  docs = declare_docs(p);
  CHECK(rn_subscribe_durable(p, docs, "refuser", refuse_event, NULL) == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: the mark of durable subscriber refuser is 8 bytes, not 24", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  rn_pipeline_close(p);
  remove_state(dir);
}

/* Another program's LMDB environment is refused, not written into. */
static void test_foreign_environment(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", want[400];
  CHECK(mkdtemp(dir) != NULL);
  raw_put(dir, NULL, "theirs", "data", 4);
  snprintf(want, sizeof want, "%s: not a runnel state (no catalogue): another program's LMDB environment", dir);
  check_refused(dir, want);
  remove_state(dir);
}

/* A state killed before its first transaction: inspect says it is empty,
 * open makes it a state. */
static void test_empty_environment(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", want[400], err[RN_ERRMSG_MAX] = "";
  CHECK(mkdtemp(dir) != NULL);
  MDB_env *env;
  CHECK(mdb_env_create(&env) == 0);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  mdb_env_close(env);
  rn_inspect_state st;
  CHECK(rn_inspect(dir, no_relation, NULL, &st, err, sizeof err) != 0);
  snprintf(want, sizeof want, "%s: empty state (no group was ever committed)", dir);
  CHECK(strcmp(err, want) == 0);
  make_docs_state(dir);
  CHECK(rn_inspect(dir, no_relation, NULL, &st, err, sizeof err) == 0 && st.seq == 3);
  remove_state(dir);
}

/* The text rn_verify writes about dir, and its result. */
static int verify_text(const char *dir, char *text, size_t len)
{
  FILE *out = fmemopen(text, len, "w");
  int rc = rn_verify(dir, out);
  fclose(out);
  return rc;
}

/* runnel verify's walk: a whole state is whole; counters that disagree
 * with the rows, and counters of no relation, are damage. */
static void put_be64_at(char *at, uint64_t v)
{
  for (int i = 7; i >= 0; i--, v >>= 8) at[i] = (char)(v & 0xff);
}

/* The outbox: entries of a sink with no mark, entries its mark already
 * covers or past the last group, and marks of the wrong size are damage. */
static void test_verify_checks_the_outbox(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", text[4096];
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *docs = declare_docs(p);
  CHECK(rn_subscribe_durable(p, docs, "refuser", refuse_event, NULL) == 0);
  for (int i = 1; i <= 3; i++) CHECK(put_doc(docs, i) == 0);
  rn_pipeline_close(p);
  CHECK(verify_text(dir, text, sizeof text) == 0); /* three groups waiting: whole */
  char key[16];
  put_be64_at(key, rn_hash64("sink:refuser", 12));
  put_be64_at(key + 8, 9);
  raw_put_key(dir, "outbox", key, 16, "\x90", 1);
  put_be64_at(key, 12345);
  put_be64_at(key + 8, 2);
  raw_put_key(dir, "outbox", key, 16, "\x90", 1);
  CHECK(verify_text(dir, text, sizeof text) == 2);
  CHECK(strstr(text, "damaged: the outbox entry of group 9 is outside what its sink waits for\n") != NULL);
  CHECK(strstr(text, "damaged: the outbox entry of group 2 belongs to no durable sink\n") != NULL);
  raw_put(dir, "meta", "od:sink:refuser", "\1\0\0\0\0\0\0\0", 8);
  CHECK(verify_text(dir, text, sizeof text) >= 1);
  CHECK(strstr(text, "damaged: the mark of durable sink refuser is not 24 bytes\n") != NULL);
  remove_state(dir);
}

static void test_verify_finds_damage(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", text[4096], want[400];
  CHECK(mkdtemp(dir) != NULL);
  make_docs_state(dir);
  CHECK(verify_text(dir, text, sizeof text) == 0);
  /* 11 entries: meta's "fmt" (upgrade.c), "ch:docs" and "chs" (store.h), "egn" and "eg:docs"
   * (evolve.c) among them */
  snprintf(want, sizeof want, "%s: 1 relations, 2 databases, 11 entries, last group 3: whole (0 damaged, 0 notes)\n", dir);
  CHECK(strcmp(text, want) == 0);
  if (strcmp(text, want) != 0) fprintf(stderr, "verify: got  %s        want %s", text, want);
  uint64_t counters[3] = { 4, 99, 3 };
  raw_put(dir, "meta", "n:docs", counters, sizeof counters);
  raw_put(dir, "meta", "n:gone", counters, sizeof counters);
  CHECK(verify_text(dir, text, sizeof text) == 2);
  CHECK(strstr(text, "damaged: table \"docs\": 3 rows stored, 99 counted\n") != NULL);
  CHECK(strstr(text, "damaged: counters \"gone\" belong to no relation\n") != NULL);
  counters[0] = 2;
  counters[1] = 3;
  raw_put(dir, "meta", "n:docs", counters, sizeof counters);
  CHECK(verify_text(dir, text, sizeof text) == 2);
  CHECK(strstr(text, "damaged: table \"docs\": row id 2 is out of range (next id 2)\n") != NULL);
  remove_state(dir);
}

/* A join's result ids: one the counters never gave out is damage. */
static void test_verify_checks_join_ids(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", text[4096];
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *docs = declare_docs(p), *refs = NULL, *joined = NULL;
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &p->err);
  rn_schema_add(s, "doc", 3, RN_T_INT, false, NULL, &p->err);
  int key = 0, on = 1;
  rn_schema_set_key(s, &key, 1, "refs", &p->err);
  CHECK(rn_declare_source(p, "refs", RN_REL_TABLE, s, &refs) == 0);
  rn_join_spec spec = { RN_JOIN_INNER, &on, 1, NULL, NULL, NULL, 0, NULL, NULL };
  rn_join_fns fns = { 0 };
  CHECK(rn_declare_join(p, "tj", refs, docs, &spec, &fns, &joined) == 0);
  for (int i = 1; i <= 3; i++) {
    CHECK(put_doc(docs, i) == 0);
    msgpack_object v[2];
    v[0].type = v[1].type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    v[0].via.u64 = (uint64_t)i;
    v[1].via.u64 = (uint64_t)i;
    uint8_t given[2] = { 1, 1 };
    CHECK(rn_table_insert(refs, v, given) == 0);
  }
  rn_pipeline_close(p);
  CHECK(verify_text(dir, text, sizeof text) == 0);
  uint64_t bogus[2] = { 999, 0 };
  raw_put(dir, "jr:tj", "\x01made-up key", bogus, sizeof bogus);
  CHECK(verify_text(dir, text, sizeof text) == 1);
  CHECK(strstr(text, "damaged: relation \"tj\": result id 999 is out of range (next id 4)\n") != NULL);
  if (!strstr(text, "result id 999")) fprintf(stderr, "%s", text);
  remove_state(dir);
}

/* A state of keyless "tags" (1, 1, 2) and its distinct "dt": two rows, the
 * first with two copies. */
static void make_distinct_state(const char *dir)
{
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "tag", 2, RN_T_INT, false, NULL, &p->err);
  rn_rel *tags = NULL, *dt = NULL;
  CHECK(rn_declare_source(p, "tags", RN_REL_TABLE, s, &tags) == 0);
  CHECK(rn_declare_distinct(p, "dt", tags, &dt) == 0);
  int64_t put[3] = { 1, 1, 2 };
  for (int i = 0; i < 3; i++) {
    msgpack_object v = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)put[i] };
    uint8_t given[1] = { 1 };
    CHECK(rn_table_insert(tags, &v, given) == 0);
  }
  rn_pipeline_close(p);
}

/* A distinct's rows against its counters and hash index: a count that
 * disagrees, an id never given out, a row in no index, a row with no copy
 * are damage (DISTINCT-1, DISTINCT-2). */
static void test_verify_checks_distinct(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", text[4096];
  CHECK(mkdtemp(dir) != NULL);
  make_distinct_state(dir);
  CHECK(verify_text(dir, text, sizeof text) == 0);
  uint64_t counters[3] = { 3, 5, 3 };
  raw_put(dir, "meta", "n:dt", counters, sizeof counters);
  CHECK(verify_text(dir, text, sizeof text) == 1);
  CHECK(strstr(text, "damaged: distinct \"dt\": 2 rows stored, 5 counted\n") != NULL);
  if (!strstr(text, "5 counted")) fprintf(stderr, "%s", text);
  counters[1] = 2;
  raw_put(dir, "meta", "n:dt", counters, sizeof counters);
  CHECK(verify_text(dir, text, sizeof text) == 0);
  char id[8], row[10] = { 0 };
  put_be64_at(id, 7);                       /* |copies 0|row|, id 7 past next id 3, in no index */
  memcpy(row + 8, "\x91\x07", 2);
  raw_put_key(dir, "dr:dt", id, 8, row, sizeof row);
  CHECK(verify_text(dir, text, sizeof text) == 4);
  CHECK(strstr(text, "damaged: relation \"dt\": row id 7 is out of range (next id 3)\n") != NULL);
  CHECK(strstr(text, "damaged: distinct \"dt\": 3 rows stored, 2 counted\n") != NULL);
  CHECK(strstr(text, "damaged: distinct \"dt\": 1 rows hold no copy\n") != NULL);
  CHECK(strstr(text, "damaged: distinct \"dt\": 3 rows, 2 in its hash index, not the same ids\n") != NULL);
  if (!strstr(text, "row id 7")) fprintf(stderr, "%s", text);
  remove_state(dir);
}

int main(void)
{
  memset(body, 'x', sizeof body);
  RUN(test_write_failure_codes);
  RUN(test_failed_flush_keeps_cause_and_seq);
  RUN(test_second_writer_refused);
  RUN(test_tiny_map_size);
  RUN(test_malformed_catalogue);
  RUN(test_malformed_store_description);
  RUN(test_malformed_outbox_mark);
  RUN(test_foreign_environment);
  RUN(test_empty_environment);
  RUN(test_verify_finds_damage);
  RUN(test_verify_checks_the_outbox);
  RUN(test_verify_checks_join_ids);
  RUN(test_verify_checks_distinct);
  return CHECK_REPORT();
}
