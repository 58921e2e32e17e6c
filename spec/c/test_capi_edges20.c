/* test_capi_edges20.c — call sequences a game-server host makes through
 * runnel.h: an rn_inspect whose callback grows the map, calls from inside
 * a subscriber, a group never ended before close, a failed group among
 * carried ones, two writers at once, a reader process beside a growing
 * writer, and fork() with a pipeline open. Uses runnel.h only. Each child
 * process is reaped; each reports by its exit status. */
#include <msgpack.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "child_fixture.h"
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

static int child_opens(const char *dir, int want_rc, uint64_t want_seq);

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

static int noop_sub(void *ctx, const rn_event *ev) { (void)ctx; (void)ev; return 0; }
static void noop_note(void *ctx, const char *line) { (void)ctx; (void)line; }
static void noop_durable(void *ctx, uint64_t seq) { (void)ctx; (void)seq; }
static int noop_undeclared(void *ctx, const char *name, const char *kind) { (void)ctx; (void)name; (void)kind; return 0; }

/* ---- rn_inspect whose callback closes the writer and opens it again ---- */

typedef struct reopening {
  rn_pipeline *p;
  const char *dir;
  int calls, bad, refused, other_refused;
} reopening;

/* On the first relation: closes the pipeline, tries to open it again (here
 * and in another process) and writes 200 groups if that worked. The
 * close used to end the read that held the walk's snapshot: the reopened
 * writer reused its pages, and the walk ended after the first relation,
 * saying the state held 1 (rn_inspect returned 0). The reopen is refused
 * until rn_inspect returns; every relation reported is the snapshot's
 * (t<i> holds i + 1 rows). */
static int reopen_while_inspected(void *ctx, const rn_inspect_relation *rel)
{
  reopening *r = ctx;
  int i = atoi(rel->name + 1);
  if (rel->rows != i + 1) r->bad++, fprintf(stderr, "  %s: %lld rows\n", rel->name, (long long)rel->rows);
  if (r->calls++ != 0) return 0;
  rn_open_opts o = { .path = r->dir };
  rn_rel *t = NULL;
  char err[512] = "";
  if (rn_pipeline_close(r->p) != 0) return r->bad++, 1;
  r->p = NULL;
  int rc = rn_pipeline_open(&o, &r->p, err, sizeof err);
  r->refused = rc == RN_EMISUSE && strstr(err, "was closed inside a call that still reads it");
  if (!r->refused) fprintf(stderr, "  reopen: %d %s\n", rc, err);
  r->other_refused = child_opens(r->dir, RN_EMISUSE, 0) == 0;
  if (rc || rn_declare_table(r->p, "t0", id_name, 2, key_id, 1, &t) != 0) return 0;
  for (int g = 0; g < 200; g++) {
    if (push_row(r->p, t, RN_OP_INSERT, 1000 + g, "churn churn churn churn churn churn") != 0) r->bad++;
    if (push_row(r->p, t, RN_OP_DELETE, 1000 + g, NULL) != 0) r->bad++;
  }
  return 0;
}

static void test_inspect_callback_reopens_the_writer(void)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  reopening r = { .dir = dir };
  rn_open_opts o = { .path = dir };
  CHECK(rn_pipeline_open(&o, &r.p, NULL, 0) == 0);
  enum { TABLES = 40 };
  for (int i = 0; i < TABLES; i++) {
    char name[16];
    rn_rel *t = NULL;
    snprintf(name, sizeof name, "t%d", i);
    CHECK(rn_declare_table(r.p, name, id_name, 2, key_id, 1, &t) == 0);
    CHECK(rn_begin(r.p) == 0);
    for (int k = 0; k <= i; k++) CHECK(push_row(r.p, t, RN_OP_INSERT, k, "row") == 0);
    CHECK(rn_commit(r.p) == 0);
  }
  rn_inspect_state st;
  char err[512] = "";
  int rc = rn_inspect(dir, reopen_while_inspected, &r, &st, err, sizeof err);
  if (rc || r.bad || r.calls != TABLES)
    fprintf(stderr, "  inspect: rc %d (%s), %d bad, %d calls, %d relations\n", rc, err, r.bad, r.calls, st.relations);
  CHECK(rc == 0 && r.bad == 0 && r.calls == TABLES && st.relations == TABLES);
  CHECK(r.refused && r.other_refused && r.p == NULL);
  CHECK(rn_pipeline_open(&o, &r.p, err, sizeof err) == 0); /* once it returned */
  rn_rel *t = NULL;
  CHECK(rn_declare_table(r.p, "t39", id_name, 2, key_id, 1, &t) == 0 && count_rows(r.p, t) == 40);
  CHECK(rn_pipeline_close(r.p) == 0);
  CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == 0 && st.relations == TABLES);
  rm_rf(dir);
}

/* ---- NULL arguments to the functions test_misuse.c does not sweep ---- */

static void test_null_arguments(void)
{
  rn_pipeline *p = NULL;
  rn_rel *t = NULL, *x = NULL;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 1, "ann") == 0);
  rn_order_def ord[] = { { "name", 0 } }, nocol[] = { { NULL, 0 } };
  rn_top_def top = { .n = 3, .order = ord, .norder = 1 };
  const char key1[] = { (char)0x81, (char)0xa2, 'i', 'd', 1 };
  const void *row = NULL;
  size_t len = 0;
  uint64_t id = 0;
  int done = 0;
  char err[256] = "";
  /* NULL pipeline */
  CHECK(rn_pipeline_close_report(NULL, err, sizeof err) == 0);
  CHECK(rn_take_notes(NULL, noop_note, NULL) == RN_EINVAL);
  CHECK(rn_top_declare(NULL, "best", t, &top, &x) == RN_EINVAL);
  CHECK(rn_index_declare(NULL, "ix", t, ord, 1, &x) == RN_EINVAL);
  CHECK(rn_subscribe_durable(NULL, t, "d", noop_sub, NULL) == RN_EINVAL);
  CHECK(rn_subscribe_flags(NULL, t, 0, noop_sub, NULL, NULL) == RN_EINVAL);
  CHECK(rn_unsubscribe(NULL, t, noop_sub, NULL) == RN_EINVAL);
  CHECK(rn_deliver(NULL) == RN_EINVAL);
  CHECK(rn_drop(NULL, "players") == RN_EINVAL);
  CHECK(rn_undeclared(NULL, noop_undeclared, NULL) == RN_EINVAL);
  CHECK(rn_get(NULL, t, key1, sizeof key1, &row, &len, &id) == RN_EINVAL);
  rn_cursor *c = NULL;
  CHECK(rn_cursor_open(NULL, t, &c) == RN_EINVAL && c == NULL);
  CHECK(rn_cursor_next(NULL, &row, &len, &id, &done) == RN_EINVAL);
  rn_cursor_close(NULL);
  CHECK(rn_jetstream_sink(NULL, t, NULL) == RN_EINVAL);
  CHECK(rn_jetstream_run(NULL, NULL, NULL) == RN_EINVAL);
  CHECK(rn_state_copy(NULL, "/tmp/x", err, sizeof err) == RN_EINVAL);
  CHECK(rn_state_copy("/tmp/x", NULL, err, sizeof err) == RN_EINVAL);
  CHECK(rn_state_copy(NULL, NULL, NULL, 0) == RN_EINVAL);
  /* NULL arguments with a pipeline: refused with a message, the pipeline unchanged */
  uint64_t seq = rn_seq(p);
  CHECK(rn_take_notes(p, NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_top_declare(p, NULL, t, &top, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_top_declare(p, "best", NULL, &top, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_top_declare(p, "best", t, NULL, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_top_declare(p, "best", t, &top, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  rn_top_def top_noorder = { .n = 3, .order = NULL, .norder = 1 };
  CHECK(rn_top_declare(p, "best", t, &top_noorder, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  rn_top_def top_nullcol = { .n = 3, .order = nocol, .norder = 1 };
  CHECK(rn_top_declare(p, "best", t, &top_nullcol, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  rn_top_def top_noby = { .n = 3, .by = NULL, .nby = 1, .order = ord, .norder = 1 };
  CHECK(rn_top_declare(p, "best", t, &top_noby, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  const char *const nullby[] = { NULL };
  rn_top_def top_nullby = { .n = 3, .by = nullby, .nby = 1, .order = ord, .norder = 1 };
  CHECK(rn_top_declare(p, "best", t, &top_nullby, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_index_declare(p, NULL, t, ord, 1, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_index_declare(p, "ix", NULL, ord, 1, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_index_declare(p, "ix", t, NULL, 1, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_index_declare(p, "ix", t, nocol, 1, &x) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_index_declare(p, "ix", t, ord, 1, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_subscribe_durable(p, NULL, "d", noop_sub, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_subscribe_durable(p, t, NULL, noop_sub, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_subscribe_durable(p, t, "d", NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_subscribe_flags(p, NULL, 0, noop_sub, NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_subscribe_flags(p, t, 0, NULL, NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_unsubscribe(p, NULL, noop_sub, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_unsubscribe(p, t, NULL, NULL) != 0 && rn_errmsg(p)[0]);
  CHECK(rn_drop(p, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_undeclared(p, NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_get(p, NULL, key1, sizeof key1, &row, &len, &id) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_get(p, t, NULL, sizeof key1, &row, &len, &id) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_get(p, t, key1, sizeof key1, NULL, &len, &id) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_get(p, t, key1, sizeof key1, &row, NULL, &id) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_get(p, t, key1, sizeof key1, &row, &len, NULL) == 0 && row != NULL); /* id may be NULL */
  CHECK(rn_cursor_open(p, NULL, &c) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_cursor_open(p, t, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_cursor_open(p, t, &c) == 0);
  CHECK(rn_cursor_next(c, NULL, &len, &id, &done) == RN_EINVAL);
  CHECK(rn_cursor_next(c, &row, NULL, &id, &done) == RN_EINVAL);
  CHECK(rn_cursor_next(c, &row, &len, NULL, &done) == RN_EINVAL);
  CHECK(rn_cursor_next(c, &row, &len, &id, NULL) == RN_EINVAL);
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done && id == 1); /* the refusals moved nothing */
  rn_cursor_close(c);
  CHECK(rn_jetstream_sink(p, NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_jetstream_sink(p, t, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_jetstream_run(p, NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  rn_js_sink_opts js = { 0 };
  CHECK(rn_jetstream_sink(p, t, &js) == RN_EINVAL && rn_errmsg(p)[0]); /* no url, no subject */
  rn_js_source_opts jr = { 0 };
  CHECK(rn_jetstream_run(p, &jr, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_on_durable(p, NULL, NULL) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_push(p, t, (rn_op)0, key1, sizeof key1) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_push(p, t, RN_OP_INSERT, NULL, 0) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_push(p, t, RN_OP_INSERT, NULL, 5) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_push(p, t, RN_OP_INSERT, key1, 0) == RN_EINVAL && rn_errmsg(p)[0]);
  CHECK(rn_relation(p, NULL) == NULL && rn_relation_name(t) && strcmp(rn_relation_name(t), "players") == 0);
  CHECK(rn_seq(p) == seq && count_rows(p, t) == 1 && rn_relation(p, "best") == NULL && rn_relation(p, "ix") == NULL);
  CHECK(rn_pipeline_close(p) == 0);
}

/* ---- calls from inside a subscriber that earlier rounds did not make ---- */

typedef struct inside {
  rn_pipeline *p;
  rn_rel *t, *other;
  const char *dir;
  int codes[16], n, calls;
  int copied, inspected;
} inside;


static int call_the_rest(void *ctx, const rn_event *ev)
{
  (void)ev;
  inside *in = ctx;
  if (in->calls++) return 0;
  rn_pipeline *p = in->p;
  rn_rel *x = NULL;
  rn_order_def ord[] = { { "name", 0 } };
  rn_top_def top = { .n = 3, .order = ord, .norder = 1 };
  int i = 0;
  in->codes[i++] = rn_top_declare(p, "best", in->t, &top, &x);
  in->codes[i++] = rn_index_declare(p, "by_name", in->t, ord, 1, &x);
  in->codes[i++] = rn_subscribe_durable(p, in->t, "d", noop_sub, NULL);
  in->codes[i++] = rn_subscribe_flags(p, in->t, RN_SUBSCRIBE_CONSOLIDATE, noop_sub, NULL, NULL);
  in->codes[i++] = rn_unsubscribe(p, in->other, noop_sub, NULL); /* another relation's subscriber */
  in->codes[i++] = rn_take_notes(p, noop_note, NULL);
  in->codes[i++] = rn_drop(p, "gone"); /* an undeclared relation the state holds */
  in->codes[i++] = push_row(p, in->other, RN_OP_INSERT, 7, "seven"); /* another table */
  in->codes[i++] = rn_declare_stream(p, "late", id_name, 2, &x);
  in->n = i;
  /* reads: allowed */
  in->codes[i++] = rn_on_durable(p, noop_durable, NULL);
  in->codes[i++] = rn_undeclared(p, noop_undeclared, NULL);
  char dest[160], err[512] = "";
  snprintf(dest, sizeof dest, "%s/copy", in->dir);
  in->copied = rn_state_copy(in->dir, dest, err, sizeof err);
  if (in->copied) fprintf(stderr, "  copy from a subscriber: %s\n", err);
  rn_inspect_state st;
  in->inspected = rn_inspect(in->dir, NULL, NULL, &st, err, sizeof err);
  if (in->inspected) fprintf(stderr, "  inspect from a subscriber: %s\n", err);
  return 0;
}

static void calls_inside(int mode)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = mode & 1, .write_back = mode & 2 ? 1 : -1 };
  inside in = { .dir = dir };
  CHECK(rn_pipeline_open(&o, &in.p, NULL, 0) == 0);
  rn_rel *gone = NULL;
  CHECK(rn_declare_table(in.p, "gone", id_name, 2, key_id, 1, &gone) == 0);
  CHECK(rn_pipeline_close(in.p) == 0);
  CHECK(rn_pipeline_open(&o, &in.p, NULL, 0) == 0);
  CHECK(rn_declare_table(in.p, "players", id_name, 2, key_id, 1, &in.t) == 0);
  CHECK(rn_declare_table(in.p, "other", id_name, 2, key_id, 1, &in.other) == 0);
  CHECK(rn_subscribe(in.p, in.other, noop_sub, NULL) == 0);
  CHECK(rn_subscribe(in.p, in.t, call_the_rest, &in) == 0);
  CHECK(push_row(in.p, in.t, RN_OP_INSERT, 1, "ann") == 0);
  CHECK(in.calls == 1);
  for (int i = 0; i < in.n; i++)
    if (in.codes[i] != RN_EMISUSE) fprintf(stderr, "  mode %d: call #%d from a subscriber: %d\n", mode, i, in.codes[i]);
  for (int i = 0; i < in.n; i++) CHECK(in.codes[i] == RN_EMISUSE);
  CHECK(in.codes[in.n] == 0 && in.codes[in.n + 1] == 0 && in.copied == 0 && in.inspected == 0);
  CHECK(rn_relation(in.p, "best") == NULL && rn_relation(in.p, "late") == NULL);
  CHECK(count_rows(in.p, in.other) == 0 && count_rows(in.p, in.t) == 1);
  CHECK(rn_unsubscribe(in.p, in.other, noop_sub, NULL) == 0); /* it stayed */
  CHECK(rn_pipeline_close(in.p) == 0);
  rm_rf(dir);
}

static void test_calls_inside_a_subscriber(void)
{
  for (int mode = 0; mode < 4; mode++) calls_inside(mode);
}

/* ---- failed groups among carried ones; a group never ended, then close ---- */

static int refuse_bad(void *ctx, const rn_event *ev)
{
  (void)ctx;
  return ev->row && ev->row_len > 4 && memmem(ev->row, ev->row_len, "bad", 3) != NULL;
}

static void failed_groups(int mode)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = mode & 1, .write_back = mode & 2 ? 1 : -1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL, *u = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(rn_declare_table(p, "other", id_name, 2, key_id, 1, &u) == 0);
  CHECK(rn_subscribe(p, u, refuse_bad, NULL) == 0);
  CHECK(push_row(p, t, RN_OP_INSERT, 1, "one") == 0 && push_row(p, u, RN_OP_INSERT, 1, "one") == 0);
  uint64_t seq = rn_seq(p);
  /* a change refused inside a group */
  CHECK(rn_begin(p) == 0 && push_row(p, t, RN_OP_INSERT, 2, "two") == 0 && push_row(p, u, RN_OP_UPDATE, 1, "uno") == 0);
  CHECK(rn_flush(p) == 0); /* inside a group: a no-op */
  CHECK(push_row(p, t, RN_OP_INSERT, 1, "again") == RN_EEXIST);
  CHECK(rn_commit(p) == RN_EMISUSE && rn_flush(p) == 0 && rn_seq(p) == seq);
  /* a group a subscriber fails at commit */
  CHECK(rn_begin(p) == 0 && push_row(p, t, RN_OP_INSERT, 3, "three") == 0 && push_row(p, u, RN_OP_INSERT, 3, "bad") == 0);
  CHECK(rn_commit(p) == RN_ECALLBACK && rn_flush(p) == 0 && rn_seq(p) == seq);
  CHECK(count_rows(p, t) == 1 && count_rows(p, u) == 1);
  CHECK(push_row(p, t, RN_OP_INSERT, 4, "four") == 0 && rn_seq(p) == seq + 1);
  /* a failed single change (its own group) between carried groups */
  CHECK(push_row(p, u, RN_OP_INSERT, 5, "bad") == RN_ECALLBACK && rn_seq(p) == seq + 1);
  CHECK(push_row(p, t, RN_OP_INSERT, 6, "six") == 0 && rn_seq(p) == seq + 2);
  /* a group left open at close: rolled back, the carried ones kept */
  CHECK(rn_begin(p) == 0 && push_row(p, t, RN_OP_INSERT, 7, "seven") == 0);
  char err[512] = "";
  CHECK(rn_pipeline_close_report(p, err, sizeof err) == 0);
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(rn_declare_table(p, "other", id_name, 2, key_id, 1, &u) == 0);
  CHECK(rn_seq(p) == seq + 2 && count_rows(p, t) == 3 && count_rows(p, u) == 1);
  const char key4[] = { (char)0x81, (char)0xa2, 'i', 'd', 4 }, key7[] = { (char)0x81, (char)0xa2, 'i', 'd', 7 };
  const char key_u1[] = { (char)0x81, (char)0xa2, 'i', 'd', 1 };
  const void *row = NULL;
  size_t len = 0;
  CHECK(rn_get(p, t, key4, sizeof key4, &row, &len, NULL) == 0 && row != NULL);
  CHECK(rn_get(p, t, key7, sizeof key7, &row, &len, NULL) == 0 && row == NULL);
  CHECK(rn_get(p, u, key_u1, sizeof key_u1, &row, &len, NULL) == 0 && row && memmem(row, len, "one", 3));
  CHECK(rn_pipeline_close(p) == 0);
  rm_rf(dir);
}

static void test_failed_groups_among_carried_ones(void)
{
  for (int mode = 0; mode < 4; mode++) failed_groups(mode);
}

/* ---- writers in several processes at once ---- */

/* Each of 3 processes, released together, opens a new state and writes 50
 * rows of its own: those that get it write and close; the others are
 * refused, saying a process writes it. Whatever the order, the state holds
 * the rows of exactly the processes that got it. */
static void test_writers_race_for_a_new_state(void)
{
  enum { WRITERS = 3, ROUNDS = 8 };
  for (int round = 0; round < ROUNDS; round++) {
    char dir[] = "/tmp/rn_edges20_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char state[64];
    snprintf(state, sizeof state, "%s/s", dir); /* made by the race's winner */
    int go[2];
    CHECK(pipe(go) == 0);
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
      pids[w] = fork();
      if (pids[w] == 0) {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 0) _exit(1);
        rn_open_opts o = { .path = state, .nosync = 1 };
        rn_pipeline *p = NULL;
        rn_rel *t = NULL;
        char err[512] = "";
        int rc = rn_pipeline_open(&o, &p, err, sizeof err);
        if (rc == RN_EMISUSE && strstr(err, "is open for writing by ")) _exit(10); /* or "another process": no pid yet */
        if (rc) {
          fprintf(stderr, "  writer %d: %s\n", w, err);
          _exit(2);
        }
        if (rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) != 0) _exit(3);
        for (int i = 0; i < 50; i++)
          if (push_row(p, t, RN_OP_INSERT, 1000 * w + i, "w") != 0) _exit(4);
        _exit(rn_pipeline_close(p) == 0 ? 0 : 5);
      }
    }
    close(go[0]);
    close(go[1]); /* all go */
    int won = 0, refused = 0;
    for (int w = 0; w < WRITERS; w++) {
      int status = 0;
      if (pids[w] > 0) waitpid(pids[w], &status, 0);
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      won += code == 0;
      refused += code == 10;
      if (code != 0 && code != 10) fprintf(stderr, "  round %d writer %d: %d\n", round, w, code);
    }
    CHECK(won >= 1 && won + refused == WRITERS);
    rn_open_opts o = { .path = state };
    rn_pipeline *p = NULL;
    rn_rel *t = NULL;
    CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
    CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
    CHECK(count_rows(p, t) == 50 * won && rn_seq(p) == 50 * (uint64_t)won);
    CHECK(rn_pipeline_close(p) == 0);
    rm_rf(dir);
  }
}

/* ---- a map that cannot grow: the address space is limited ---- */

#if defined(__SANITIZE_ADDRESS__)
void __sanitizer_purge_allocator(void); /* sanitizer/allocator_interface.h, which gcc does not ship */
#endif

/* In a child limited to its address space plus 12 MiB (ulimit -v, as
 * hosting often sets): a group that needs the 8 MiB map doubled. LMDB
 * unmapped the map, failed to map the larger one and left the environment
 * without a map: the next call died of SIGSEGV. The growth is refused
 * (RN_EFULL, saying why), nothing else is lost: the pipeline reads, takes
 * groups that fit, and closes; the state opens again elsewhere whole.
 * With nosync the groups carried in LMDB's transaction when the map
 * filled were dropped with no word, their seq kept (the failed growth
 * had freed the log that applies them again): the rows check. */
static int grow_past_the_limit(const char *dir, int mode)
{
  rn_open_opts o = { .path = dir, .map_size = 8 << 20, .nosync = mode & 1, .write_back = mode & 2 ? 1 : -1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  if (rn_pipeline_open(&o, &p, NULL, 0) || rn_declare_table(p, "players", id_name, 2, key_id, 1, &t)) return 1;
  if (fill(p, t, 1, 1000) != 0 || rn_flush(p) != 0) return 2; /* about 1 MiB */
  uint64_t seq0 = rn_seq(p);
#if defined(__SANITIZE_ADDRESS__)
  /* ASan keeps freed blocks in a quarantine and unmaps them later: blocks
   * freed before the limit gave the room back after it, as much as the
   * map's growth takes. Emptied first, the room is what it says. */
  __sanitizer_purge_allocator();
#endif
  struct rlimit lim = { (rlim_t)(vm_size() + (12L << 20)), (rlim_t)(vm_size() + (12L << 20)) };
  if (setrlimit(RLIMIT_AS, &lim) != 0) return 3;
  int rc = 0;
  int64_t next = 1001;
  for (int g = 0; g < 16 && !rc; g++, next += 500) rc = fill(p, t, next, 500); /* 8 MiB more */
  /* with write-back the groups are in memory first: the limit may stop a malloc before the map */
  bool oom = (mode & 2) && rc == RN_ENOMEM;
  if (rc != RN_EFULL && !oom) return fprintf(stderr, "  grow: %d %s\n", rc, rn_errmsg(p)), 4;
  if (!oom && !strstr(rn_errmsg(p), "growing the map")) return fprintf(stderr, "  grow: %s\n", rn_errmsg(p)), 5;
  uint64_t seq = rn_seq(p);
  int64_t rows = count_rows(p, t);
  if (rows != 1000 + (int64_t)(seq - seq0) * 500) /* whole groups: the refused one took nothing */
    return fprintf(stderr, "  rows %lld seq %llu from %llu: %s\n", (long long)rows, (unsigned long long)seq, (unsigned long long)seq0, rn_errmsg(p)), 6;
  if (rows < 1000) return 7;
  if (push_row(p, t, RN_OP_DELETE, 1, NULL) != 0 || rn_seq(p) != seq + 1) return 8; /* a group that fits */
  if (count_rows(p, t) != rows - 1) return 9;
  FILE *f = fopen("/tmp/rn_edges20_rows", "w"); /* for the parent: what the state holds */
  if (!f) return 10;
  fprintf(f, "%lld %llu\n", (long long)(rows - 1), (unsigned long long)rn_seq(p));
  fclose(f);
  return rn_pipeline_close(p) == 0 ? 0 : 11;
}

static void growth_refused(int mode)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(grow_past_the_limit(dir, mode));
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code) fprintf(stderr, "  mode %d: the limited child: %d\n", mode, code);
  CHECK(code == 0);
  long long rows = -1;
  unsigned long long seq = 0;
  FILE *f = fopen("/tmp/rn_edges20_rows", "r");
  CHECK(f && fscanf(f, "%lld %llu", &rows, &seq) == 2);
  if (f) fclose(f);
  remove("/tmp/rn_edges20_rows");
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", id_name, 2, key_id, 1, &t) == 0);
  CHECK(count_rows(p, t) == rows && rn_seq(p) == seq);
  CHECK(fill(p, t, 100000, 3000) == 0); /* without the limit it grows */
  CHECK(rn_pipeline_close(p) == 0);
  rm_rf(dir);
}

static void test_map_growth_refused_by_the_address_space(void)
{
  const char *pre = getenv("LD_PRELOAD");
  if (pre && strstr(pre, "vgpreload")) return; /* valgrind maps for its client itself: RLIMIT_AS does not hold */
  int modes = 4;
#if defined(__SANITIZE_ADDRESS__)
  modes = 2; /* ASan's allocator reserves its memory up front: with write-back (modes 2, 3) no malloc meets the limit */
#endif
  for (int mode = 0; mode < modes; mode++) growth_refused(mode);
}

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

/* A child forked in the middle of everything a host keeps open: groups
 * carried (nosync), the write-back layer's buffered writes, an open group,
 * a cursor between groups. Its calls are refused, its reads of the state
 * from scratch (rn_inspect) see the parent's last LMDB commit, its closes
 * touch nothing of the parent's, and it exits through exit() (atexit,
 * stdio). The parent then goes on as if there had been no child. */
typedef struct forked {
  rn_pipeline *p;
  rn_rel *t;
  rn_cursor *c;
  const char *dir;
  uint64_t committed;   /* the parent's last group in LMDB */
} forked;

static int child_body(forked *f)
{
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  if (push_row(f->p, f->t, RN_OP_INSERT, 99, "child") != RN_EMISUSE) return 1;
  if (!strstr(rn_errmsg(f->p), "before a fork; open it again in this process")) return 2;
  if (rn_commit(f->p) != RN_EMISUSE || rn_rollback(f->p) != RN_EMISUSE || rn_flush(f->p) != RN_EMISUSE) return 3;
  if (rn_cursor_next(f->c, &row, &len, &id, &done) != RN_EMISUSE) return 4;
  rn_cursor_close(f->c);
  rn_inspect_state st;
  char err[512] = "";
  if (rn_inspect(f->dir, NULL, NULL, &st, err, sizeof err) != 0) return fprintf(stderr, "  child inspect: %s\n", err), 5;
  if (st.seq != f->committed) return fprintf(stderr, "  child inspect: seq %llu\n", (unsigned long long)st.seq), 6;
  if (rn_pipeline_close(f->p) != 0) return 7;
  return 0;
}

static void fork_mid_group(int mode)
{
  char dir[] = "/tmp/rn_edges20_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = mode & 1, .write_back = mode & 2 ? 1 : -1 };
  forked f = { .dir = dir };
  CHECK(rn_pipeline_open(&o, &f.p, NULL, 0) == 0);
  CHECK(rn_declare_table(f.p, "players", id_name, 2, key_id, 1, &f.t) == 0);
  CHECK(push_row(f.p, f.t, RN_OP_INSERT, 1, "one") == 0 && rn_flush(f.p) == 0);
  f.committed = rn_seq(f.p);
  CHECK(push_row(f.p, f.t, RN_OP_INSERT, 2, "two") == 0);
  CHECK(rn_cursor_open(f.p, f.t, &f.c) == 0); /* with nosync, commits the carried group first */
  f.committed = rn_seq(f.p);
  CHECK(push_row(f.p, f.t, RN_OP_INSERT, 20, "twenty") == 0 && rn_seq(f.p) == f.committed + 1); /* carried */
  if (!(mode & 1)) f.committed = rn_seq(f.p);
  CHECK(rn_begin(f.p) == 0 && push_row(f.p, f.t, RN_OP_INSERT, 3, "three") == 0);
  fflush(NULL);
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) { /* says its step through the pipe: valgrind counts the parent's memory it leaves as leaks */
    close(fds[0]);
    unsigned char step = (unsigned char)child_body(&f);
    _exit(write(fds[1], &step, 1) == 1 ? 0 : 1); /* _exit: LSan checks no leaks of the parent's memory */
  }
  close(fds[1]);
  unsigned char step = 0;
  int status = 0;
  CHECK(pid > 0 && read(fds[0], &step, 1) == 1);
  close(fds[0]);
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status));
  if (step) fprintf(stderr, "  mode %d: the child failed at step %d\n", mode, step);
  CHECK(step == 0);
  CHECK(push_row(f.p, f.t, RN_OP_INSERT, 4, "four") == 0 && rn_commit(f.p) == 0);
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0, n = 0, rc;
  while ((rc = rn_cursor_next(f.c, &row, &len, &id, &done)) == 0 && !done) n++;
  CHECK(rc == 0 && n == 2); /* the snapshot it was opened on */
  rn_cursor_close(f.c);
  CHECK(push_row(f.p, f.t, RN_OP_INSERT, 5, "five") == 0);
  CHECK(rn_pipeline_close(f.p) == 0);
  CHECK(rn_pipeline_open(&o, &f.p, NULL, 0) == 0);
  CHECK(rn_declare_table(f.p, "players", id_name, 2, key_id, 1, &f.t) == 0);
  CHECK(count_rows(f.p, f.t) == 6 && rn_seq(f.p) == 5);
  CHECK(rn_pipeline_close(f.p) == 0);
  rm_rf(dir);
}

static void test_fork_mid_group(void)
{
  for (int mode = 0; mode < 4; mode++) fork_mid_group(mode);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  RUN(test_inspect_callback_grows_the_map);
  RUN(test_inspect_callback_grows_the_map_nosync);
  RUN(test_inspect_callback_grows_the_map_write_back);
  RUN(test_inspect_callback_grows_the_map_writemap);
  RUN(test_inspect_callback_reopens_the_writer);
  RUN(test_null_arguments);
  RUN(test_calls_inside_a_subscriber);
  RUN(test_failed_groups_among_carried_ones);
  RUN(test_writers_race_for_a_new_state);
  RUN(test_map_growth_refused_by_the_address_space);
  RUN(test_reopen_beside_a_forked_child);
  RUN(test_forked_child_as_a_second_writer);
  RUN(test_fork_mid_group);
  return CHECK_REPORT();
}
