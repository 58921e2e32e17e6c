/* test_ndjson_file26.c — the file an NDJSON path sink's mark position is
 * in, recorded beside the mark (meta "of:", since 0.38): its device and
 * inode with the mark's delivered and position, written with the mark and
 * dropped with it; a record that does not read is taken as none (the
 * renamed file is then looked for by name, as before 0.38) and runnel
 * verify calls it damaged; one of another mark (a runnel before 0.38 moved
 * the mark and left it) or without its mark (one before 0.38 dropped the
 * sink's groups) is not taken, and verify notes it. runnel verify reads a log sink's column records ("ol:", 0.37)
 * too. The crash is a child that _exits without closing. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ndjson_stream_fixture.h"
#include "raw_meta_fixture.h"
#include "ndjson.h"
#include "outbox.h"
#include "runnel.h"
#include "verify.h"

/* Each test's state: dir made from its mkdtemp template, log (log_n
 * bytes) its out.ndjson; a child writes groups 1..3 to dir's sink on log
 * and exits without closing: group 3's mark is not recorded. key: its
 * "of:" record's key. */
static void crash_after_three(char *dir, char *log, size_t log_n, char *key, size_t n)
{
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, log_n, "%s/out.ndjson", dir);
  crash_after_three_groups(dir, log, NULL);
  char real[PATH_MAX];
  CHECK(realpath(log, real) != NULL);
  snprintf(key, n, RN_META_DURABLE_FILE RN_SINK_NDJSON "%s", real);
}

/* log renamed to moved, then group 4 written by a new pipeline on the
 * sink at log. */
static void move_then_write_4(const char *dir, const char *log, const char *moved)
{
  CHECK(rename(log, moved) == 0);
  rn_rel *s = NULL;
  rn_pipeline *p = open_path_sink(dir, log, NULL, &s);
  CHECK(insert_row(p, s, 4) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

static int verify_says(const char *dir, char *out, size_t n)
{
  FILE *f = fmemopen(out, n, "w");
  int rc = rn_verify(dir, f);
  fclose(f);
  return rc;
}

static void test_the_record_is_the_files_device_and_inode(void)
{
  char dir[] = "/tmp/runnel_file26_XXXXXX", log[64], key[PATH_MAX + 16], out[4096];
  crash_after_three(dir, log, sizeof log, key, sizeof key);
  struct stat st;
  CHECK(stat(log, &st) == 0);
  char mark[PATH_MAX + 16];
  snprintf(mark, sizeof mark, "%s", key);
  mark[1] = 'd';
  size_t len, mlen;
  char *had = raw_get(dir, key, &len), *m = raw_get(dir, mark, &mlen);
  uint64_t got[4], r[3];
  CHECK(had != NULL && len == sizeof got && m != NULL && mlen == sizeof r);
  if (had && len == sizeof got && m && mlen == sizeof r) {
    memcpy(got, had, sizeof got);
    memcpy(r, m, sizeof r);
    CHECK(got[0] == (uint64_t)st.st_dev && got[1] == (uint64_t)st.st_ino);
    CHECK(got[2] == r[1] && got[3] == r[2]); /* the mark's delivered and position */
    CHECK(r[1] == 2);                        /* group 3's mark was not recorded */
  }
  free(had);
  free(m);
  CHECK(verify_says(dir, out, sizeof out) == 0);
  CHECK(strstr(out, "(0 damaged, 0 notes)") != NULL);
  cleanup(dir);
}

static void test_a_record_that_does_not_read_is_none_and_damage(void)
{
  char dir[] = "/tmp/runnel_file26_XXXXXX", log[64], moved[80], key[PATH_MAX + 16], out[4096];
  crash_after_three(dir, log, sizeof log, key, sizeof key);
  snprintf(moved, sizeof moved, "%s/out.ndjson.1", dir);
  raw_put(dir, key, "short", 5);
  CHECK(verify_says(dir, out, sizeof out) != 0);
  CHECK(strstr(out, "damaged: the file record of durable sink to ") != NULL);
  CHECK(strstr(out, "out.ndjson is not 32 bytes") != NULL);
  move_then_write_4(dir, log, moved); /* found by its name, as before 0.38 */
  CHECK(count_lines(moved) == 3);
  CHECK(count_lines(log) == 1); /* group 3 was found in out.ndjson.1 */
  size_t len;
  char *had = raw_get(dir, key, &len);
  CHECK(had != NULL && len == 32); /* written whole again with the next mark */
  free(had);
  CHECK(verify_says(dir, out, sizeof out) == 0);
  cleanup(dir);
}

static void test_a_record_without_its_mark_is_a_note_and_drop_outbox_takes_both(void)
{
  char dir[] = "/tmp/runnel_file26_XXXXXX", log[64], key[PATH_MAX + 16], mark[PATH_MAX + 16], out[4096];
  crash_after_three(dir, log, sizeof log, key, sizeof key);
  snprintf(mark, sizeof mark, "%s", key);
  mark[1] = 'd';
  size_t len;
  char *m = raw_get(dir, mark, &len);
  CHECK(m != NULL && len == 24);
  raw_del(dir, mark);
  verify_says(dir, out, sizeof out); /* damaged: group 3's entry has no sink now */
  CHECK(strstr(out, "note: the file record of durable sink to ") != NULL);
  CHECK(strstr(out, "has no mark beside it (a runnel before 0.38 moved or dropped the mark): not taken") != NULL);
  raw_put(dir, mark, m, len); /* back, then dropped with its groups */
  free(m);
  rn_pipeline *p = NULL;
  rn_open_opts o = { 0 };
  o.path = dir;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(p && rn_outbox_drop(p, mark + 3) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  char *had = raw_get(dir, key, &len);
  CHECK(had == NULL);
  free(had);
  cleanup(dir);
}

/* A runnel before 0.38 moves the mark and leaves the record: the record
 * then names another mark (here: its delivered changed) and is not taken.
 * The file renamed to a name no rotation gives is then not found (the
 * name rule of 0.37): its group is written again. */
static void test_a_record_of_another_mark_is_not_taken(void)
{
  char dir[] = "/tmp/runnel_file26_XXXXXX", log[64], moved[80], key[PATH_MAX + 16], out[4096];
  crash_after_three(dir, log, sizeof log, key, sizeof key);
  snprintf(moved, sizeof moved, "%s/out.ndjson.old", dir);
  size_t len;
  char *had = raw_get(dir, key, &len);
  CHECK(had != NULL && len == 32);
  if (had && len == 32) {
    uint64_t r[4];
    memcpy(r, had, sizeof r);
    r[2] = 1; /* the mark it went with said group 1 */
    raw_put(dir, key, r, sizeof r);
  }
  free(had);
  CHECK(verify_says(dir, out, sizeof out) == 0);
  CHECK(strstr(out, "is of another mark than its sink's") != NULL);
  move_then_write_4(dir, log, moved);
  CHECK(count_lines(moved) == 3);
  CHECK(count_lines(log) == 2); /* group 3 again, then 4: the record was not taken */
  cleanup(dir);
}

/* The first "ol:" record's key in dir into key (n bytes); false: none. */
static bool first_layout_key(const char *dir, char *key, size_t n)
{
  MDB_txn *txn;
  MDB_dbi meta;
  MDB_env *env = raw_open(dir, &txn, &meta);
  MDB_cursor *cur;
  CHECK(mdb_cursor_open(txn, meta, &cur) == 0);
  MDB_val k = { 3, (void *)RN_META_DURABLE_LAYOUT }, v;
  bool found = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) == 0 && k.mv_size < n &&
               !memcmp(k.mv_data, RN_META_DURABLE_LAYOUT, 3);
  if (found) snprintf(key, n, "%.*s", (int)k.mv_size, (const char *)k.mv_data);
  mdb_cursor_close(cur);
  raw_close(env, txn);
  return found;
}

static void test_verify_reads_the_column_records(void)
{
  char dir[] = "/tmp/runnel_file26_XXXXXX", log[64], key[PATH_MAX + 16], ol[128], out[4096];
  crash_after_three(dir, log, sizeof log, key, sizeof key);
  CHECK(first_layout_key(dir, ol, sizeof ol));
  CHECK(strlen(ol) == 35);
  raw_put(dir, ol, "\x92\x01", 2); /* [1, …] cut short */
  CHECK(verify_says(dir, out, sizeof out) != 0);
  CHECK(strstr(out, "does not read as [relation, columns]") != NULL);
  memset(ol + 3, 'e', 16); /* a tag no sink has */
  raw_put(dir, ol, "\x92\xa1s\x90", 4);
  CHECK(verify_says(dir, out, sizeof out) != 0);
  CHECK(strstr(out, "belongs to no durable sink's mark") != NULL);
  cleanup(dir);
}

int main(void)
{
  RUN(test_the_record_is_the_files_device_and_inode);
  RUN(test_a_record_that_does_not_read_is_none_and_damage);
  RUN(test_a_record_without_its_mark_is_a_note_and_drop_outbox_takes_both);
  RUN(test_a_record_of_another_mark_is_not_taken);
  RUN(test_verify_reads_the_column_records);
  return CHECK_REPORT();
}
