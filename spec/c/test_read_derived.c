/* test_read_derived.c — a C host reading derived relations (issue 14):
 * rn_get and rn_cursor_open/next/close over a join, a select over a join,
 * a top, an aggregate, an index and a distinct, through the reader
 * runnel.attach uses; a key that is absent; the refused kinds (a filter,
 * a stream) with their messages; reads inside a group (its own changes),
 * with the write-back layer on and off, in a carried transaction and with a
 * map that fills mid-group; cursors used after their group ended and after
 * their pipeline closed (an error, never a crash). The pipeline is declared
 * by a Lua chunk, as a game server's script would; rows go in from C. */
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runnel.h"

static const char *const DECLARE =
  "runnel = runnel or require('runnel')\n"
  "players = p:table('players', { {'id','int'}, {'name','string'}, {'team','int'},\n"
  "                               {'score','int'}, key = 'id' })\n"
  "teams = p:table('teams', { {'id','int'}, {'tname','string'}, key = 'id' })\n"
  "p:stream('events', { {'what','string'} })\n"
  "local roster = players:join(teams, { on = 'team', name = 'roster' })\n"
  "roster:select({ {'pid','id'}, 'name', 'tname', 'score' }, 'board')\n"
  "players:top{ n = 2, by = 'team', order = { {'score','desc'} }, name = 'best' }\n"
  "players:aggregate{ by = 'team', n = runnel.count(), total = runnel.sum('score'), name = 'per_team' }\n"
  "players:filter(function(r) return r.score > 10 end, 'high')\n"
  "players:index{ 'score', 'desc', name = 'by_score' }\n"
  "players:select({ 'team' }, 'teams_of'):distinct('team_set')\n";

/* ---- msgpack maps, as a host builds them ---- */

typedef struct mp { msgpack_sbuffer sb; msgpack_packer pk; } mp;

/* A map of n pairs from a format: "s" a string value, "i" an int, "n" nil;
 * the arguments are name, value, name, value … */
static void map_of(mp *m, const char *fmt, ...)
{
  msgpack_sbuffer_init(&m->sb);
  msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
  msgpack_pack_map(&m->pk, strlen(fmt));
  va_list ap;
  va_start(ap, fmt);
  for (const char *f = fmt; *f; f++) {
    const char *col = va_arg(ap, const char *);
    msgpack_pack_str_with_body(&m->pk, col, strlen(col));
    if (*f == 's') {
      const char *s = va_arg(ap, const char *);
      msgpack_pack_str_with_body(&m->pk, s, strlen(s));
    } else if (*f == 'i') {
      msgpack_pack_int64(&m->pk, va_arg(ap, int64_t));
    } else {
      msgpack_pack_nil(&m->pk);
    }
  }
  va_end(ap);
}

static void mp_free(mp *m) { msgpack_sbuffer_destroy(&m->sb); }

static int add_player(rn_pipeline *p, int64_t id, const char *name, int64_t team, int64_t score)
{
  mp m;
  map_of(&m, "isii", "id", id, "name", name, "team", team, "score", score);
  int rc = rn_insert(p, rn_relation(p, "players"), m.sb.data, m.sb.size);
  mp_free(&m);
  return rc;
}

static int add_team(rn_pipeline *p, int64_t id, const char *name)
{
  mp m;
  map_of(&m, "is", "id", id, "tname", name);
  int rc = rn_insert(p, rn_relation(p, "teams"), m.sb.data, m.sb.size);
  mp_free(&m);
  return rc;
}

/* Column col of a row map as text ("null" for nil, "?" when absent), or "-" without a row. */
static const char *col_of(const void *row, size_t len, const char *col)
{
  static char out[128];
  snprintf(out, sizeof out, row ? "?" : "-");
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  if (row && msgpack_unpack_next(&u, row, len, NULL) == MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_MAP) {
    for (uint32_t i = 0; i < u.data.via.map.size; i++) {
      const msgpack_object_kv *kv = &u.data.via.map.ptr[i];
      if (kv->key.via.str.size != strlen(col) || memcmp(kv->key.via.str.ptr, col, strlen(col)) != 0) continue;
      if (kv->val.type == MSGPACK_OBJECT_STR) snprintf(out, sizeof out, "%.*s", (int)kv->val.via.str.size, kv->val.via.str.ptr);
      else if (kv->val.type == MSGPACK_OBJECT_NIL) snprintf(out, sizeof out, "null");
      else msgpack_object_print_buffer(out, sizeof out, kv->val);
    }
  }
  msgpack_unpacked_destroy(&u);
  return out;
}

/* rn_get of rel by a one-int-column key; col of the row ("-": none), or
 * "error" (rn_errmsg says why). */
static const char *get_col(rn_pipeline *p, const char *rel, const char *key, int64_t k, const char *col)
{
  mp m;
  map_of(&m, "i", key, k);
  const void *row = NULL;
  size_t len = 0;
  int rc = rn_get(p, rn_relation(p, rel), m.sb.data, m.sb.size, &row, &len, NULL);
  mp_free(&m);
  return rc ? "error" : col_of(row, len, col);
}

/* Every row of rel through a cursor: "a b c " of column col, or "error …". */
static const char *rows_of(rn_pipeline *p, const char *rel, const char *col)
{
  static char out[512];
  out[0] = '\0';
  rn_cursor *c = NULL;
  int rc = rn_cursor_open(p, rn_relation(p, rel), &c);
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  while (!rc && !(rc = rn_cursor_next(c, &row, &len, &id, &done)) && !done) {
    size_t at = strlen(out);
    snprintf(out + at, sizeof out - at, "%s ", col_of(row, len, col));
  }
  rn_cursor_close(c);
  if (rc) snprintf(out, sizeof out, "error %d", rc);
  return out;
}

/* Only relations whose writes the write-back layer holds (a join, an
 * aggregate): a group's writes stay in memory until something writes them. */
static const char *const DECLARE_LAYERED =
  "runnel = runnel or require('runnel')\n"
  "players = p:table('players', { {'id','int'}, {'name','string'}, {'team','int'}, {'score','int'}, key = 'id' })\n"
  "teams = p:table('teams', { {'id','int'}, {'tname','string'}, key = 'id' })\n"
  "players:join(teams, { on = 'team', name = 'roster' })\n"
  "players:aggregate{ by = 'team', n = runnel.count(), name = 'per_team' }\n";

static rn_pipeline *open_with(const char *dir, int nosync, int write_back, size_t map_size, const char *declare)
{
  rn_open_opts o = { .path = dir, .nosync = nosync, .write_back = write_back, .map_size = map_size,
                     .carry_groups = 1000, .carry_seconds = 1000 };
  rn_pipeline *p = NULL;
  char err[256] = "";
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  if (!p) return NULL;
  int rc = rn_run_lua_string(p, NULL, declare, "=declare");
  if (rc) fprintf(stderr, "declare: %s\n", rn_errmsg(p));
  CHECK(rc == 0);
  return p;
}

static rn_pipeline *open_declared(const char *dir, int nosync, int write_back, size_t map_size)
{
  return open_with(dir, nosync, write_back, map_size, DECLARE);
}

/* Two teams, four players (one without a team, one of a team not there). */
static void fill(rn_pipeline *p)
{
  CHECK(rn_begin(p) == 0);
  CHECK(add_team(p, 1, "red") == 0);
  CHECK(add_team(p, 2, "blue") == 0);
  CHECK(add_player(p, 4, "dee", 2, 40) == 0);
  CHECK(add_player(p, 1, "ann", 1, 10) == 0);
  CHECK(add_player(p, 3, "cy", 1, 30) == 0);
  CHECK(add_player(p, 2, "bob", 1, 20) == 0);
  CHECK(add_player(p, 5, "eve", 7, 5) == 0);
  CHECK(rn_commit(p) == 0);
}

static void test_every_readable_kind(void)
{
  rn_pipeline *p = open_declared(NULL, 0, 0, 0);
  fill(p);
  /* a join by its key, a select over it by its renamed key, an absent key */
  CHECK(strcmp(get_col(p, "roster", "id", 3, "tname"), "red") == 0);
  CHECK(strcmp(get_col(p, "roster", "id", 5, "tname"), "-") == 0); /* team 7: no match in an inner join */
  CHECK(strcmp(get_col(p, "board", "pid", 4, "tname"), "blue") == 0);
  CHECK(strcmp(get_col(p, "board", "pid", 99, "tname"), "-") == 0);
  /* a top by its input's key, with its rank; a player out of the top */
  CHECK(strcmp(get_col(p, "best", "id", 2, "rank"), "2") == 0);
  CHECK(strcmp(get_col(p, "best", "id", 1, "rank"), "-") == 0);
  /* an aggregate by its group key (one seek) */
  CHECK(strcmp(get_col(p, "per_team", "team", 1, "total"), "60") == 0);
  CHECK(strcmp(get_col(p, "per_team", "team", 1, "n"), "3") == 0);
  CHECK(strcmp(get_col(p, "per_team", "team", 42, "n"), "-") == 0);
  /* an index by its input's key */
  CHECK(strcmp(get_col(p, "by_score", "id", 4, "name"), "dee") == 0);

  /* cursors: key order; a top group then rank; an index in its order */
  CHECK(strcmp(rows_of(p, "roster", "name"), "ann bob cy dee ") == 0);
  CHECK(strcmp(rows_of(p, "board", "pid"), "1 2 3 4 ") == 0);
  CHECK(strcmp(rows_of(p, "best", "name"), "cy bob dee eve ") == 0);
  CHECK(strcmp(rows_of(p, "per_team", "total"), "60 40 5 ") == 0);
  CHECK(strcmp(rows_of(p, "by_score", "score"), "40 30 20 10 5 ") == 0);
  CHECK(strcmp(rows_of(p, "team_set", "team"), "2 1 7 ") == 0); /* keyless: id order */

  /* the id is the relation's row id */
  mp m;
  map_of(&m, "i", "id", (int64_t)3);
  const void *row = NULL;
  size_t len = 0;
  uint64_t id = 0, want = 0;
  CHECK(rn_get(p, rn_relation(p, "players"), m.sb.data, m.sb.size, &row, &len, &want) == 0);
  CHECK(rn_get(p, rn_relation(p, "roster"), m.sb.data, m.sb.size, &row, &len, &id) == 0);
  CHECK(row && id == want && id != 0);
  mp_free(&m);
  rn_pipeline_close(p);
}

static void test_refusals(void)
{
  rn_pipeline *p = open_declared(NULL, 0, 0, 0);
  fill(p);
  rn_cursor *c = (rn_cursor *)&c; /* set to NULL by a refusal */
  CHECK(strcmp(get_col(p, "high", "id", 3, "name"), "error") == 0);
  CHECK(strstr(rn_errmsg(p), "rn_get: \"high\" is a filter: a Lua function in the script that declares it chooses "
                             "its rows, and the state does not hold them") == rn_errmsg(p));
  CHECK(rn_cursor_open(p, rn_relation(p, "high"), &c) == RN_EINVAL && c == NULL);
  CHECK(strstr(rn_errmsg(p), "rn_cursor_open: \"high\" is a filter") == rn_errmsg(p));
  CHECK(strcmp(get_col(p, "events", "what", 1, "what"), "error") == 0);
  CHECK(strstr(rn_errmsg(p), "\"events\" is a stream: its events go to its sinks as they come") != NULL);
  /* keyless: no get */
  CHECK(strcmp(get_col(p, "team_set", "team", 1, "team"), "error") == 0);
  CHECK(strcmp(rn_errmsg(p), "team_set: rn_get: a keyless distinct has no key to read by (rn_cursor_open reads "
                             "its rows)") == 0);
  /* bad keys, named as for tables */
  CHECK(strcmp(get_col(p, "roster", "nope", 3, "name"), "error") == 0);
  CHECK(strstr(rn_errmsg(p), "roster: unknown column \"nope\"") == rn_errmsg(p));
  mp m;
  map_of(&m, "s", "team", "x");
  const void *row = NULL;
  size_t len = 0;
  CHECK(rn_get(p, rn_relation(p, "per_team"), m.sb.data, m.sb.size, &row, &len, NULL) == RN_EINVAL && !row);
  CHECK(strstr(rn_errmsg(p), "per_team: column \"team\": expected int") == rn_errmsg(p));
  mp_free(&m);
  map_of(&m, "");
  CHECK(rn_get(p, rn_relation(p, "board"), m.sb.data, m.sb.size, &row, &len, NULL) == RN_EINVAL);
  CHECK(strstr(rn_errmsg(p), "\"pid\"") != NULL);
  mp_free(&m);
  /* a refusal leaves nothing half done: the next read works */
  CHECK(strcmp(get_col(p, "roster", "id", 3, "tname"), "red") == 0);
  CHECK(strcmp(rn_errmsg(p), "") == 0);
  rn_pipeline_close(p);
}

/* Inside a group a read sees the group's own changes, as rel:rows() does
 * in Lua; a cursor opened there ends with the group. */
static void reads_in_group(int write_back)
{
  rn_pipeline *p = open_declared(NULL, 0, write_back, 0);
  fill(p);
  CHECK(rn_begin(p) == 0);
  CHECK(add_player(p, 6, "fay", 2, 50) == 0);
  CHECK(strcmp(get_col(p, "roster", "id", 6, "tname"), "blue") == 0);
  CHECK(strcmp(get_col(p, "board", "pid", 6, "name"), "fay") == 0);
  CHECK(strcmp(get_col(p, "best", "id", 6, "rank"), "1") == 0);
  CHECK(strcmp(get_col(p, "best", "id", 4, "rank"), "2") == 0);
  CHECK(strcmp(get_col(p, "per_team", "team", 2, "total"), "90") == 0);
  CHECK(strcmp(rows_of(p, "per_team", "n"), "3 2 1 ") == 0);
  rn_cursor *c = NULL, *t = NULL;
  CHECK(rn_cursor_open(p, rn_relation(p, "best"), &c) == 0);
  CHECK(rn_cursor_open(p, rn_relation(p, "players"), &t) == 0);
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done);
  CHECK(strcmp(col_of(row, len, "name"), "cy") == 0);
  CHECK(rn_rollback(p) == 0);
  /* after the rollback: an error, for the derived cursor and the table's */
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == RN_EMISUSE && row == NULL);
  CHECK(strstr(rn_errmsg(p), "best: rn_cursor_next: the group this cursor was opened in has ended") == rn_errmsg(p));
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == RN_EMISUSE);
  CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE);
  rn_cursor_close(c);
  rn_cursor_close(t);
  /* the group's rows went with it */
  CHECK(strcmp(get_col(p, "roster", "id", 6, "tname"), "-") == 0);
  CHECK(strcmp(get_col(p, "per_team", "team", 2, "total"), "40") == 0);
  /* a cursor opened in a group that commits ends with it too; one opened
   * outside any group reads on across later groups (its state when opened) */
  rn_cursor *outside = NULL;
  CHECK(rn_cursor_open(p, rn_relation(p, "roster"), &outside) == 0);
  CHECK(rn_begin(p) == 0);
  CHECK(add_player(p, 7, "gus", 1, 1) == 0);
  CHECK(rn_cursor_open(p, rn_relation(p, "roster"), &c) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == RN_EMISUSE);
  rn_cursor_close(c);
  int n = 0;
  while (rn_cursor_next(outside, &row, &len, &id, &done) == 0 && !done) n++;
  CHECK(done && n == 4);
  rn_cursor_close(outside);
  CHECK(strcmp(get_col(p, "roster", "id", 7, "name"), "gus") == 0);
  rn_pipeline_close(p);
}

static void test_reads_in_group(void) { reads_in_group(-1); }
static void test_reads_in_group_write_back(void) { reads_in_group(1); }

typedef struct in_callback { rn_pipeline *p; char seen[256]; } in_callback;

/* A subscriber of players reading the aggregate and the top while the
 * group commits: they hold the group's changes already. */
static int read_at_commit(void *ctx, const rn_event *ev)
{
  in_callback *cb = ctx;
  size_t at = strlen(cb->seen);
  snprintf(cb->seen + at, sizeof cb->seen - at, "%llu:%s/", (unsigned long long)ev->id,
           get_col(cb->p, "per_team", "team", 2, "total"));
  at = strlen(cb->seen);
  snprintf(cb->seen + at, sizeof cb->seen - at, "%s", rows_of(cb->p, "best", "rank"));
  return 0;
}

static void reads_from_callback(int write_back)
{
  rn_pipeline *p = open_declared(NULL, 0, write_back, 0);
  fill(p);
  in_callback cb = { p, "" };
  CHECK(rn_subscribe(p, rn_relation(p, "players"), read_at_commit, &cb) == 0);
  CHECK(rn_begin(p) == 0);
  CHECK(add_player(p, 6, "fay", 2, 50) == 0);
  CHECK(add_player(p, 7, "gus", 2, 45) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(strcmp(cb.seen, "6:135/1 2 1 2 1 7:135/1 2 1 2 1 ") == 0);
  rn_pipeline_close(p);
}

static void test_reads_from_callback(void) { reads_from_callback(-1); }
static void test_reads_from_callback_write_back(void) { reads_from_callback(1); }

static int durable_seq;
static void on_durable(void *ctx, uint64_t seq) { (void)ctx; durable_seq = (int)seq; }

/* With nosync, groups share an LMDB transaction: reads outside a group see
 * every committed group; with the write-back layer off they read the
 * carried transaction itself (the carry goes on), with it on the carried
 * groups are committed first. */
static void carried(int write_back)
{
  rn_pipeline *p = open_declared(NULL, 1, write_back, 0);
  CHECK(rn_on_durable(p, on_durable, NULL) == 0);
  durable_seq = 0;
  CHECK(add_team(p, 1, "red") == 0);
  CHECK(add_player(p, 1, "ann", 1, 10) == 0);
  CHECK(add_player(p, 2, "bob", 1, 20) == 0);
  CHECK(rn_seq(p) == 3);
  CHECK(strcmp(get_col(p, "per_team", "team", 1, "total"), "30") == 0);
  CHECK(strcmp(rows_of(p, "roster", "name"), "ann bob ") == 0);
  CHECK(strcmp(get_col(p, "best", "id", 2, "rank"), "1") == 0);
  CHECK(durable_seq == (write_back == 1 ? 3 : 0));
  CHECK(add_player(p, 3, "cy", 1, 30) == 0);
  CHECK(strcmp(get_col(p, "per_team", "team", 1, "n"), "3") == 0);
  /* a cursor opened in a group ends with it, though its LMDB transaction
   * carries on after the commit (a table's too) */
  rn_cursor *t = NULL, *d = NULL;
  CHECK(rn_begin(p) == 0);
  CHECK(rn_cursor_open(p, rn_relation(p, "players"), &t) == 0);
  CHECK(rn_cursor_open(p, rn_relation(p, "roster"), &d) == 0);
  CHECK(rn_commit(p) == 0);
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE);
  CHECK(strstr(rn_errmsg(p), "players: rn_cursor_next: the group this cursor was opened in has ended") == rn_errmsg(p));
  CHECK(rn_cursor_next(d, &row, &len, &id, &done) == RN_EMISUSE);
  rn_cursor_close(t);
  rn_cursor_close(d);
  rn_pipeline_close(p);
}

static void test_carried(void) { carried(-1); }
static void test_carried_write_back(void) { carried(1); }

/* The write-back layer holds a group's writes in memory: a read inside the
 * group writes them into LMDB first, and when that fills the map it grows
 * (the group applied again) and the read goes on. */
static void test_map_full_in_group(void)
{
  char dir[] = "/tmp/rn_read_derivedXXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_with(dir, 1, 1, 1 << 20, DECLARE_LAYERED);
  char name[600];
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  CHECK(rn_begin(p) == 0);
  CHECK(add_team(p, 1, "red") == 0);
  for (int i = 0; i < 4000; i++) {
    int rc = add_player(p, i, name, 1, i);
    if (rc) fprintf(stderr, "%d: %s\n", i, rn_errmsg(p));
    CHECK(rc == 0);
  }
  CHECK(strcmp(get_col(p, "per_team", "team", 1, "n"), "4000") == 0);
  CHECK(strcmp(rn_errmsg(p), "") == 0);
  CHECK(add_player(p, 5000, "last", 1, 0) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(strcmp(get_col(p, "per_team", "team", 1, "n"), "4001") == 0);
  CHECK(strcmp(get_col(p, "roster", "id", 5000, "name"), "last") == 0);
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* A cursor outliving its pipeline: rn_cursor_next refuses (there is no
 * pipeline to hold a message), rn_cursor_close frees it. */
static void test_cursor_after_close(void)
{
  rn_pipeline *p = open_declared(NULL, 0, 0, 0);
  fill(p);
  rn_cursor *t = NULL, *d = NULL;
  CHECK(rn_cursor_open(p, rn_relation(p, "players"), &t) == 0);
  CHECK(rn_cursor_open(p, rn_relation(p, "per_team"), &d) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  const void *row = (const void *)&row;
  size_t len;
  uint64_t id;
  int done = 0;
  CHECK(rn_cursor_next(t, &row, &len, &id, &done) == RN_EMISUSE && row == NULL && !done);
  CHECK(rn_cursor_next(d, &row, &len, &id, &done) == RN_EMISUSE);
  rn_cursor_close(t);
  rn_cursor_close(d);
}

int main(void)
{
  RUN(test_every_readable_kind);
  RUN(test_refusals);
  RUN(test_reads_in_group);
  RUN(test_reads_in_group_write_back);
  RUN(test_reads_from_callback);
  RUN(test_reads_from_callback_write_back);
  RUN(test_carried);
  RUN(test_carried_write_back);
  RUN(test_map_full_in_group);
  RUN(test_cursor_after_close);
  return CHECK_REPORT();
}
