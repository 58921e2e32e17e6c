/* test_capi_edges13.c — C API call sequences an independent probe found
 * crashing or misreporting (each failed before its fix):
 *   - rn_run_lua with the host's lua_State, then with NULL: runnel made a
 *     state of its own and pointed every later Lua callback at it (a crash
 *     in the next group's Lua sink); now refused as the opposite order is;
 *   - rn_pipeline_close from inside rn_undeclared's callback freed the
 *     pipeline under the walk (a use after free); now refused, as a close
 *     from any callback is;
 *   - rn_undeclared without a callback left the last call's message;
 *   - rn_jetstream_run with NULL subjects read through them (after
 *     connecting): now refused before connecting;
 *   - a script that began a group and raised left it open, and the host's
 *     next rn_commit committed what the failed script had changed;
 *   - rn_run_lua from inside a callback said "not inside a group". */
#include <lauxlib.h>
#include <lualib.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

static const rn_column_def id_col[] = { { .name = "id", .type = "int" } };
static const char *const id_key[] = { "id" };

static void test_null_state_after_the_hosts_is_refused(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  CHECK(rn_run_lua_string(p, L, "seen = 0\n"
                                "p:table('t', { {'id','int'}, key = 'id' }):sink(function(v, row) seen = row.id end)",
                          "=a") == 0);
  CHECK(rn_run_lua_string(p, NULL, "assert(p)", "=b") == RN_EMISUSE);
  CHECK(strcmp(rn_errmsg(p), "rn_run_lua: this pipeline already runs Lua in another lua_State") == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  CHECK(insert_id(p, rn_relation(p, "t"), 7) == 0); /* its Lua sink runs in the host's state */
  lua_getglobal(L, "seen");
  CHECK(lua_tointeger(L, -1) == 7);
  lua_pop(L, 1);
  CHECK(rn_run_lua_string(p, L, "assert(seen == 7)", "=c") == 0); /* the host's state still works */
  CHECK(rn_pipeline_close(p) == 0);
  lua_close(L);
}

typedef struct walk {
  rn_pipeline *p;
  int told, close_rc;
  char close_msg[256];
} walk;

static int close_from_walk(void *ctx, const char *name, const char *kind)
{
  (void)name;
  (void)kind;
  walk *w = ctx;
  if (w->told++ == 0) {
    w->close_rc = rn_pipeline_close(w->p);
    snprintf(w->close_msg, sizeof w->close_msg, "%s", rn_errmsg(w->p));
  }
  return 0;
}

static void test_close_from_undeclared_walk_is_refused(void)
{
  char dir[] = "/tmp/runnel_capi13_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p;
  rn_rel *r;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "a", id_col, 1, id_key, 1, &r) == 0);
  CHECK(rn_declare_table(p, "b", id_col, 1, id_key, 1, &r) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0); /* declares nothing: a and b are undeclared */
  walk w = { .p = p };
  CHECK(rn_undeclared(p, close_from_walk, &w) == 0);
  CHECK(w.told == 2); /* the walk went on */
  CHECK(w.close_rc == RN_EMISUSE);
  CHECK(strcmp(w.close_msg, "close: not from inside a callback") == 0);
  CHECK(rn_declare_table(p, "a", id_col, 1, id_key, 1, &r) == 0); /* p is whole */
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static void test_undeclared_without_a_callback_says_so(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_drop(p, "nothing") != 0); /* a message to be replaced */
  CHECK(rn_undeclared(p, NULL, NULL) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "rn_undeclared needs a callback") == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_jetstream_null_subjects_are_refused_before_connecting(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p;
  rn_rel *t;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", id_col, 1, id_key, 1, &t) == 0);
  uint64_t n = 0;
  /* port 9 (discard): nothing listens; a connect would fail with RN_EIO */
  rn_js_source_opts js = { .url = "nats://127.0.0.1:9", .stream = "S", .subjects = NULL, .nsubjects = 1 };
  CHECK(rn_jetstream_run(p, &js, &n) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "needs url, stream and at least one subject") != NULL);
  const char *subjects[] = { "a", NULL };
  js.subjects = subjects;
  js.nsubjects = 2;
  CHECK(rn_jetstream_run(p, &js, &n) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "jetstream source: subject 2 of 2 is NULL") == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  CHECK(rn_pipeline_close(p) == 0);
}

/* The script's group is rolled back with it; the host's next group is its own. */
static void test_failed_script_takes_its_group_back(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p;
  rn_rel *t;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", id_col, 1, id_key, 1, &t) == 0);
  CHECK(rn_run_lua_string(p, NULL, "p:begin(); p:relation('t'):insert{ id = 1 }; error('half done')", "=s")
        == RN_ECALLBACK);
  CHECK(strstr(rn_errmsg(p), "half done") != NULL);
  CHECK(rn_commit(p) == RN_EMISUSE); /* no group is open */
  CHECK(rn_seq(p) == 0);
  const void *row;
  size_t len;
  unsigned char key[] = { 0x81, 0xa2, 'i', 'd', 0x01 }; /* {"id": 1} */
  CHECK(rn_get(p, t, key, sizeof key, &row, &len, NULL) == 0 && row == NULL);
  CHECK(insert_id(p, t, 2) == 0);
  CHECK(rn_seq(p) == 1);
  CHECK(rn_pipeline_close(p) == 0);
}

static int run_lua_from_subscriber(void *ctx, const rn_event *ev)
{
  (void)ev;
  rn_pipeline *p = ctx;
  int rc = rn_run_lua_string(p, NULL, "x = 1", "=cb");
  return rc == RN_EMISUSE && strcmp(rn_errmsg(p), "rn_run_lua: not from inside a callback") == 0 ? 0 : -1;
}

static void test_run_lua_from_a_callback_says_so(void)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p;
  rn_rel *t;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", id_col, 1, id_key, 1, &t) == 0);
  CHECK(rn_subscribe(p, t, run_lua_from_subscriber, p) == 0);
  CHECK(insert_id(p, t, 1) == 0); /* the subscriber's checks passed */
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_null_state_after_the_hosts_is_refused);
  RUN(test_close_from_undeclared_walk_is_refused);
  RUN(test_undeclared_without_a_callback_says_so);
  RUN(test_jetstream_null_subjects_are_refused_before_connecting);
  RUN(test_failed_script_takes_its_group_back);
  RUN(test_run_lua_from_a_callback_says_so);
  return CHECK_REPORT();
}
