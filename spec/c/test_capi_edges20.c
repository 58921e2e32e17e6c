/* test_capi_edges20.c — call sequences a game-server host makes through
 * runnel.h: an rn_inspect whose callback grows the map, calls from inside
 * a subscriber, a group never ended before close, a failed group among
 * carried ones, two writers at once, a reader process beside a growing
 * writer, and fork() with a pipeline open. Uses runnel.h only. Each child
 * process is reaped; each reports by its exit status. */
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

/* ---- helpers ---- */

static const rn_column_def id_name[] = { { .name = "id", .type = "int" }, { .name = "name", .type = "string" } };
static const char *const key_id[] = { "id" };

/* { id, name } into t by op; its own group outside rn_begin. */
static int push_row(rn_pipeline *p, rn_rel *t, rn_op op, int64_t id, const char *name)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, op == RN_OP_DELETE ? 1 : 2);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  if (op != RN_OP_DELETE) {
    msgpack_pack_str_with_body(&pk, "name", 4);
    msgpack_pack_str_with_body(&pk, name, strlen(name));
  }
  int rc = rn_push(p, t, op, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* n rows of about 1 KiB from id from, in one group: enough of them double a 1 MiB map. */
static int fill(rn_pipeline *p, rn_rel *t, int64_t from, int n)
{
  char name[1000];
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  int rc = rn_begin(p);
  for (int64_t i = from; !rc && i < from + n; i++) rc = push_row(p, t, RN_OP_INSERT, i, name);
  return rc ? rc : rn_commit(p);
}

static int64_t count_rows(rn_pipeline *p, rn_rel *t)
{
  rn_cursor *c = NULL;
  if (rn_cursor_open(p, t, &c) != 0) return -1;
  int64_t n = 0;
  int done = 0, rc;
  const void *row;
  size_t len;
  uint64_t id;
  while ((rc = rn_cursor_next(c, &row, &len, &id, &done)) == 0 && !done) n++;
  rn_cursor_close(c);
  return rc ? -1 : n;
}

static void rm_rf(const char *dir)
{
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

static uint64_t map_of(const char *dir)
{
  rn_inspect_state st;
  char err[512] = "";
  return rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == 0 ? st.map_size : 0;
}

/* ---- 1. rn_inspect whose callback grows the writer's map ---- */

typedef struct growing {
  rn_pipeline *p;
  rn_rel *t;
  int calls, bad, nested;
  int64_t next;
  uint64_t seq_before;
} growing;

/* On each relation: its row count is the snapshot's (the table players
 * holds 20 rows then, the others 1), however much the callback wrote
 * since; the first call writes 4 MiB through the pipeline, doubling the
 * map several times, and the second inspects again from inside. */
static int grow_while_inspected(void *ctx, const rn_inspect_relation *rel)
{
  growing *g = ctx;
  g->calls++;
  if (strcmp(rel->name, "players") == 0 ? rel->rows != 20 : rel->rows != 1) g->bad++;
  for (int i = 0; g->calls == 1 && i < 8; i++, g->next += 500)
    if (fill(g->p, g->t, g->next, 500) != 0) g->bad++, fprintf(stderr, "  fill: %s\n", rn_errmsg(g->p));
  if (g->calls == 2) {
    rn_inspect_state st;
    char err[512] = "";
    if (rn_inspect(rn_relation_name(g->t) ? getenv("RN_EDGES20_DIR") : NULL, NULL, NULL, &st, err, sizeof err) != 0 ||
        st.seq != rn_seq(g->p))
      g->bad++, fprintf(stderr, "  nested inspect: %s\n", err);
    g->nested = 1;
  }
  return 0;
}

static void inspect_grows(int mode)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  setenv("RN_EDGES20_DIR", dir, 1);
  rn_open_opts o = { .path = dir, .map_size = 1 << 20, .nosync = mode & 1, .write_back = mode & 2 ? 1 : -1,
                     .writemap = (mode & 4) != 0 };
  growing g = { .next = 1000 };
  CHECK(rn_pipeline_open(&o, &g.p, NULL, 0) == 0);
  CHECK(rn_declare_table(g.p, "players", id_name, 2, key_id, 1, &g.t) == 0);
  const char *others[] = { "a", "b", "c" };
  for (int i = 0; i < 3; i++) {
    rn_rel *x;
    CHECK(rn_declare_table(g.p, others[i], id_name, 2, key_id, 1, &x) == 0);
    CHECK(push_row(g.p, x, RN_OP_INSERT, 1, "one") == 0);
  }
  CHECK(fill(g.p, g.t, 1, 20) == 0);
  CHECK(rn_flush(g.p) == 0);
  uint64_t map0 = map_of(dir);
  g.seq_before = rn_seq(g.p);
  rn_inspect_state st;
  char err[512] = "";
  int rc = rn_inspect(dir, grow_while_inspected, &g, &st, err, sizeof err);
  if (rc || g.bad) fprintf(stderr, "  mode %d: rc %d (%s), %d bad\n", mode, rc, err, g.bad);
  CHECK(rc == 0 && g.bad == 0 && g.calls == 4 && g.nested && st.seq == g.seq_before && st.relations == 4);
  CHECK(rn_seq(g.p) == g.seq_before + 8);
  CHECK(count_rows(g.p, g.t) == 20 + 8 * 500);
  CHECK(rn_flush(g.p) == 0 && map_of(dir) > map0); /* it did grow */
  CHECK(rn_pipeline_close(g.p) == 0);
  CHECK(rn_pipeline_open(&o, &g.p, NULL, 0) == 0); /* and the state reads back whole */
  CHECK(rn_declare_table(g.p, "players", id_name, 2, key_id, 1, &g.t) == 0);
  CHECK(count_rows(g.p, g.t) == 20 + 8 * 500 && rn_seq(g.p) == g.seq_before + 8);
  CHECK(rn_pipeline_close(g.p) == 0);
  unsetenv("RN_EDGES20_DIR");
  rm_rf(dir);
}

static void test_inspect_callback_grows_the_map(void) { inspect_grows(0); }
static void test_inspect_callback_grows_the_map_nosync(void) { inspect_grows(1); }
static void test_inspect_callback_grows_the_map_write_back(void) { inspect_grows(3); }
static void test_inspect_callback_grows_the_map_writemap(void) { inspect_grows(5); }

/* ---- fork() with a pipeline open ---- */

/* Forks a child that waits until the parent writes to (or closes) the
 * returned pipe, then exits without a call into runnel: a worker a game
 * server forks (a snapshot writer, a helper) keeps what it inherited. */
static pid_t idle_child(int *release)
{
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    char c;
    ssize_t n = read(fds[0], &c, 1);
    _exit(n < 0 ? 1 : 0);
  }
  close(fds[0]);
  *release = fds[1];
  return pid;
}

static int reap(pid_t pid, int release)
{
  close(release);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A child forked while the pipeline was open, still running: the parent
 * closes the pipeline and opens the state again (a reload), which was
 * refused "already open for writing in this process": the child's copy of
 * the writer.lock descriptor kept the flock. Likewise a process started
 * after the parent closed was refused while the child lived. */
static void test_reopen_beside_a_forked_child(void)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  char err[512] = "";
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 1, "ann") == 0);
  int release = -1;
  pid_t child = idle_child(&release);
  CHECK(child > 0);
  CHECK(rn_pipeline_close(p) == 0);
  p = NULL;
  int rc = rn_pipeline_open(&o, &p, err, sizeof err);
  if (rc) fprintf(stderr, "  reopen: %s\n", err);
  CHECK(rc == 0);
  if (!rc) {
    CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
    CHECK(push_row(p, t, RN_OP_INSERT, 2, "bob") == 0 && count_rows(p, t) == 2);
    CHECK(rn_pipeline_close(p) == 0);
  }
  CHECK(reap(child, release) == 0);
  rm_rf(dir);
}

/* A child forked with the pipeline open may not write the state beside
 * its parent: its own open is refused, naming the parent. Once the parent
 * has closed, the child may open it (a hand-over), and the parent sees
 * the child's group. */
static int child_opens(const char *dir, int want_rc, uint64_t want_seq)
{
  pid_t pid = fork();
  if (pid == 0) {
    rn_open_opts o = { .path = dir };
    rn_pipeline *q = NULL;
    rn_rel *t = NULL;
    char err[512] = "";
    int rc = rn_pipeline_open(&o, &q, err, sizeof err);
    char parent[64];
    snprintf(parent, sizeof parent, "is open for writing by process %ld", (long)getppid());
    if (rc != want_rc) _exit(1);
    if (rc) _exit(strstr(err, parent) ? 0 : 2);
    if (rn_declare_table(q, "players", id_name, 2, key_id, 1, &t) != 0 || rn_seq(q) != want_seq) _exit(3);
    if (push_row(q, t, RN_OP_INSERT, 100, "child") != 0) _exit(4);
    _exit(rn_pipeline_close(q) == 0 ? 0 : 5);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_forked_child_as_a_second_writer(void)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 1, "ann") == 0);
  CHECK(child_opens(dir, RN_EMISUSE, 0) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 2, "bob") == 0 && count_rows(p, t) == 2);
  uint64_t seq = rn_seq(p);
  int release = -1;
  pid_t idle = idle_child(&release); /* holds its copies of everything, as a worker would */
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(child_opens(dir, 0, seq) == 0);
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(count_rows(p, t) == 3 && rn_seq(p) == seq + 1);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(reap(idle, release) == 0);
  rm_rf(dir);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  RUN(test_inspect_callback_grows_the_map);
  RUN(test_inspect_callback_grows_the_map_nosync);
  RUN(test_inspect_callback_grows_the_map_write_back);
  RUN(test_inspect_callback_grows_the_map_writemap);
  RUN(test_reopen_beside_a_forked_child);
  RUN(test_forked_child_as_a_second_writer);
  return CHECK_REPORT();
}
