/* test_notes.c — a C host reads the pipeline's notes (runnel.h:
 * rn_open_opts.notes, rn_take_notes): the groups a durable subscriber
 * missed while undeclared, a schema change applied, told once, from the
 * first declaration on; a failed declaration tells nothing; the callback
 * may not close or declare. Embeds Lua: a script's notes reach the host. */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
static const rn_column_def cols2[] = { { "id", "int", 0, NULL, 0, NULL }, { "level", "int", 1, NULL, 0, NULL } };
static const rn_column_def bad[] = { { "id", "string", 0, NULL, 0, NULL } };
static const char *const key[] = { "id" };

typedef struct heard {
  int n;
  char line[8][1024];
  rn_pipeline *p;          /* set: the callback tries what it may not do */
  int close_rc, declare_rc, take_rc;
} heard;

static void on_note(void *ctx, const char *line)
{
  heard *h = ctx;
  if (h->n < 8) snprintf(h->line[h->n], sizeof h->line[0], "%s", line);
  h->n++;
  if (h->p) {
    rn_rel *r;
    h->close_rc = rn_pipeline_close(h->p);
    h->declare_rc = rn_declare_table(h->p, "other", cols, 1, key, 1, &r);
    h->take_rc = rn_take_notes(h->p, on_note, NULL);
  }
}

static int on_event(void *ctx, const rn_event *ev)
{
  (void)ev;
  ++*(int *)ctx;
  return 0;
}

static rn_pipeline *open_at(const char *dir, heard *h)
{
  rn_open_opts o = { 0 };
  o.path = dir;
  if (h) o.notes = on_note, o.notes_ctx = h;
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  return p;
}

static void rm_dir(const char *dir)
{
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* Opens 1 and 2 of the missed-groups story: "audit" takes group 1, then
 * groups 2 and 3 commit while it is not declared. */
static void miss_two_groups(const char *dir)
{
  rn_rel *t;
  int got = 0;
  rn_pipeline *p = open_at(dir, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &got) == 0);
  CHECK(insert_id(p, t, 1) == 0);
  CHECK(got == 1);
  CHECK(rn_pipeline_close(p) == 0);
  p = open_at(dir, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(insert_id(p, t, 2) == 0);
  CHECK(insert_id(p, t, 3) == 0);
  CHECK(rn_seq(p) == 3);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_missed_groups_told_at_open(void)
{
  char dir[] = "/tmp/runnel-notes-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  miss_two_groups(dir);
  heard h = { 0 };
  rn_rel *t;
  int got = 0;
  rn_pipeline *p = open_at(dir, &h);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(h.n == 0);                               /* the same declaration: nothing to say */
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &got) == 0);
  CHECK(h.n == 1);                               /* told before rn_subscribe_durable returned */
  CHECK(strstr(h.line[0], "t: durable subscriber audit missed the changes of t in groups 2 to 3: ") == h.line[0]);
  CHECK(strstr(h.line[0], "goes on from group 4") != NULL);
  CHECK(got == 0);                               /* the outbox kept nothing for it */
  CHECK(rn_take_notes(p, on_note, &h) == 0);     /* told already: nothing waits */
  CHECK(h.n == 1);
  CHECK(insert_id(p, t, 4) == 0);
  CHECK(got == 1);
  CHECK(h.n == 1);                               /* told once */
  CHECK(rn_pipeline_close(p) == 0);
  rm_dir(dir);
}

static void test_missed_groups_taken(void)
{
  char dir[] = "/tmp/runnel-notes-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  miss_two_groups(dir);
  rn_rel *t;
  int got = 0;
  rn_pipeline *p = open_at(dir, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(rn_subscribe_durable(p, t, "audit", on_event, &got) == 0);
  heard h = { 0 };
  CHECK(rn_take_notes(p, on_note, &h) == 1);
  CHECK(h.n == 1 && strstr(h.line[0], "missed the changes of t in groups 2 to 3") != NULL);
  CHECK(rn_take_notes(p, on_note, &h) == 0);     /* taken: not again */
  CHECK(h.n == 1);
  CHECK(rn_take_notes(p, NULL, &h) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "callback") != NULL);
  CHECK(rn_take_notes(NULL, on_note, &h) == RN_EINVAL);
  CHECK(rn_pipeline_close(p) == 0);
  rm_dir(dir);
}

/* A column added: the note comes from the first declaration, told once;
 * a refused declaration says nothing. */
static void test_schema_change_told(void)
{
  char dir[] = "/tmp/runnel-notes-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(insert_id(p, t, 1) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  heard h = { 0 };
  p = open_at(dir, &h);
  CHECK(rn_declare_table(p, "t", bad, 1, key, 1, &t) == RN_ESCHEMA);
  CHECK(h.n == 0);
  CHECK(rn_declare_table(p, "t", cols2, 2, key, 1, &t) == 0);
  CHECK(h.n == 1);
  CHECK(strstr(h.line[0], "t: ") == h.line[0]);
  CHECK(strstr(h.line[0], "added \"level\"") != NULL);
  CHECK(rn_take_notes(p, on_note, &h) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  /* without a callback the note waits for rn_take_notes */
  p = open_at(dir, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  heard w = { 0 };
  CHECK(rn_take_notes(p, on_note, &w) == 1);
  CHECK(w.n == 1 && strstr(w.line[0], "dropped \"level\"") != NULL);
  CHECK(rn_pipeline_close(p) == 0);
  rm_dir(dir);
}

/* The callback reads as a callback: no close, no declaration. */
static void test_callback_limits(void)
{
  char dir[] = "/tmp/runnel-notes-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  heard h = { 0 };
  p = open_at(dir, &h);
  h.p = p;
  CHECK(rn_declare_table(p, "t", cols2, 2, key, 1, &t) == 0);
  CHECK(h.n == 1);
  CHECK(h.close_rc == RN_EMISUSE);
  CHECK(h.declare_rc == RN_EMISUSE);
  CHECK(h.take_rc == RN_EMISUSE);
  CHECK(rn_relation(p, "other") == NULL);
  CHECK(insert_id(p, t, 1) == 0);                /* p works on */
  CHECK(rn_pipeline_close(p) == 0);
  rm_dir(dir);
}

/* A Lua script run on a host's pipeline: its notes reach the host's
 * callback as each declaration returns, not stderr. */
static int in_script;
static void on_note_lua(void *ctx, const char *line)
{
  heard *h = ctx;
  in_script = 1;
  on_note(h, line);
}

static void test_lua_script_notes(void)
{
  char dir[] = "/tmp/runnel-notes-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_rel *t;
  rn_pipeline *p = open_at(dir, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  heard h = { 0 };
  rn_open_opts o = { 0 };
  o.path = dir;
  o.notes = on_note_lua, o.notes_ctx = &h;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_run_lua_string(p, NULL,
                          "p:table('t', { {'id', 'int'}, {'level', 'int', null = true}, key = 'id' })\n"
                          "assert(#p:changes() == 1)\n", "=notes") == 0);
  CHECK(h.n == 1 && strstr(h.line[0], "added \"level\"") != NULL);
  CHECK(rn_take_notes(p, on_note, &h) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  rm_dir(dir);
}

/* A forked child may not take its parent's notes (as every call on it). */
static void test_forked_child(void)
{
  rn_rel *t;
  rn_pipeline *p = open_at(NULL, NULL);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    heard h = { 0 };
    int rc = rn_take_notes(p, on_note, &h);
    _exit(rc == RN_EMISUSE && strstr(rn_errmsg(p), "fork") && h.n == 0 ? 0 : 1);
  }
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_missed_groups_told_at_open);
  RUN(test_missed_groups_taken);
  RUN(test_schema_change_told);
  RUN(test_callback_limits);
  RUN(test_lua_script_notes);
  RUN(test_forked_child);
  return CHECK_REPORT();
}
