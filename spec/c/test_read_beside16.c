/* test_read_beside16.c — rn_state_copy, rn_inspect and rn_verify of a
 * state this process writes, called by the writer's thread. With sync =
 * false a committed group may still be carried in LMDB's open transaction;
 * these read what LMDB holds, so a backup taken right after rn_commit
 * missed the groups the host had been told were committed (the copy
 * opened with seq 0 and no rows), and inspect and verify named an older
 * last group. Between groups they now commit the carried groups first;
 * inside a group (or a callback) they read what LMDB holds, as before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "push_fixture.h"
#include "verify.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" } };
static const char *const key[] = { "id" };

typedef struct state {
  char dir[64];
  rn_pipeline *p;
  rn_rel *t;
} state;

/* A new state with sync = false, carried groups bounded far above the test's. */
static void open_state(state *s)
{
  snprintf(s->dir, sizeof s->dir, "/tmp/rn_beside16_XXXXXX");
  CHECK(mkdtemp(s->dir) != NULL);
  rn_open_opts opts = { .path = s->dir, .nosync = 1, .carry_groups = 100000, .carry_changes = 1000000,
                        .carry_seconds = 3600 };
  CHECK(rn_pipeline_open(&opts, &s->p, NULL, 0) == 0);
  CHECK(rn_declare_table(s->p, "t", cols, 1, key, 1, &s->t) == 0);
}

static void remove_dir(const char *dir)
{
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

static int rows_of_t(void *ctx, const rn_inspect_relation *rel)
{
  if (strcmp(rel->name, "t") == 0) *(int64_t *)ctx = rel->rows;
  return 0;
}

/* Rows of t in the state at dir (-1: none said) and its last group. */
static int64_t rows_in(const char *dir, uint64_t *seq)
{
  rn_inspect_state st;
  int64_t rows = -1;
  char err[256];
  if (rn_inspect(dir, rows_of_t, &rows, &st, err, sizeof err) != 0) return -2;
  *seq = st.seq;
  return rows;
}

static void test_copy_holds_the_carried_groups(void)
{
  state s;
  open_state(&s);
  for (int64_t i = 1; i <= 3; i++) CHECK(insert_id(s.p, s.t, i) == 0); /* three groups, all carried */
  CHECK(rn_seq(s.p) == 3);
  char dest[80];
  snprintf(dest, sizeof dest, "%s/copy", s.dir);
  char err[256] = "";
  CHECK(rn_state_copy(s.dir, dest, err, sizeof err) == 0);
  uint64_t seq = 0;
  CHECK(rows_in(dest, &seq) == 3); /* was 0 */
  CHECK(seq == 3);                 /* was 0 */
  CHECK(insert_id(s.p, s.t, 4) == 0); /* the writer goes on after the copy */
  CHECK(rn_seq(s.p) == 4);
  CHECK(rn_pipeline_close(s.p) == 0);
  remove_dir(s.dir);
}

static void test_inspect_and_verify_name_the_last_committed_group(void)
{
  state s;
  open_state(&s);
  for (int64_t i = 1; i <= 2; i++) CHECK(insert_id(s.p, s.t, i) == 0);
  rn_inspect_state st;
  char err[256] = "";
  CHECK(rn_inspect(s.dir, NULL, NULL, &st, err, sizeof err) == 0);
  CHECK(st.seq == 2); /* was 0 */
  FILE *out = tmpfile();
  CHECK(out != NULL);
  if (out) {
    CHECK(rn_verify(s.dir, out) == 0);
    char text[512] = "";
    rewind(out);
    size_t n = fread(text, 1, sizeof text - 1, out);
    text[n] = '\0';
    CHECK(strstr(text, "last group 2:") != NULL); /* was "last group 0" */
    fclose(out);
  }
  CHECK(rn_pipeline_close(s.p) == 0);
  remove_dir(s.dir);
}

/* Inside a group nothing is committed for the read: it holds what LMDB
 * holds, and the group goes on and commits whole. */
static void test_inside_a_group_reads_what_lmdb_holds(void)
{
  state s;
  open_state(&s);
  CHECK(insert_id(s.p, s.t, 1) == 0); /* carried */
  CHECK(rn_begin(s.p) == 0);
  CHECK(insert_id(s.p, s.t, 2) == 0);
  rn_inspect_state st;
  char err[256] = "";
  CHECK(rn_inspect(s.dir, NULL, NULL, &st, err, sizeof err) == 0);
  CHECK(st.seq == 0);
  CHECK(insert_id(s.p, s.t, 3) == 0);
  CHECK(rn_commit(s.p) == 0);
  CHECK(rn_seq(s.p) == 2);
  CHECK(rn_pipeline_close(s.p) == 0);
  uint64_t seq = 0;
  CHECK(rows_in(s.dir, &seq) == 3);
  CHECK(seq == 2);
  remove_dir(s.dir);
}

int main(void)
{
  RUN(test_copy_holds_the_carried_groups);
  RUN(test_inspect_and_verify_name_the_last_committed_group);
  RUN(test_inside_a_group_reads_what_lmdb_holds);
  return CHECK_REPORT();
}
