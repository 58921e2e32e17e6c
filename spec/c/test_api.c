/* test_api.c — the public C API (runnel.h) as a host uses it: declaring,
 * pushing msgpack maps, subscribing, Lua scripts in the host's own state or
 * in one runnel creates, two pipelines side by side, every error code. Uses
 * only runnel.h (and msgpack-c and Lua for the host's side). */
#include <lauxlib.h>
#include <lualib.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

/* ---- building msgpack maps: "k", 'i', 5, "name", 's', "ann", NULL ---- */
typedef struct mp { msgpack_sbuffer sb; msgpack_packer pk; } mp;

static void mp_begin(mp *m, int pairs)
{
  msgpack_sbuffer_init(&m->sb);
  msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
  msgpack_pack_map(&m->pk, (size_t)pairs);
}
static void mp_str(mp *m, const char *s) { msgpack_pack_str_with_body(&m->pk, s, strlen(s)); }
static void mp_kv_int(mp *m, const char *k, int64_t v) { mp_str(m, k); msgpack_pack_int64(&m->pk, v); }
static void mp_kv_str(mp *m, const char *k, const char *v) { mp_str(m, k); mp_str(m, v); }
static void mp_kv_nil(mp *m, const char *k) { mp_str(m, k); msgpack_pack_nil(&m->pk); }

static int push1(rn_pipeline *p, rn_rel *r, rn_op op, int64_t id, const char *name, int64_t score)
{
  mp m;
  mp_begin(&m, 1 + (name != NULL) + (score >= 0));
  mp_kv_int(&m, "id", id);
  if (name) mp_kv_str(&m, "name", name);
  if (score >= 0) mp_kv_int(&m, "score", score);
  int rc = rn_push(p, r, op, m.sb.data, m.sb.size);
  msgpack_sbuffer_destroy(&m.sb);
  return rc;
}

static const rn_column_def players_cols[] = {
  { "id", "int", 0, NULL, 0, NULL }, { "name", "string", 0, NULL, 0, NULL }, { "score", "int", 1, NULL, 0, NULL },
};
static const char *const players_key[] = { "id" };

typedef struct seen {
  int n;
  int verbs[32];
  uint64_t ids[32], seqs[32], ns[32];
  char last_name[32];
  int fail_on;             /* a verb to refuse, or 0 */
} seen;

/* Reads "name" from a msgpack map. */
static void name_of(const void *map, size_t len, char *out, size_t outlen)
{
  msgpack_zone z;
  msgpack_zone_init(&z, 256);
  msgpack_object o;
  size_t off = 0;
  out[0] = '\0';
  if (msgpack_unpack(map, len, &off, &z, &o) == MSGPACK_UNPACK_SUCCESS && o.type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < o.via.map.size; i++) {
      const msgpack_object *k = &o.via.map.ptr[i].key, *v = &o.via.map.ptr[i].val;
      if (k->via.str.size == 4 && memcmp(k->via.str.ptr, "name", 4) == 0 && v->type == MSGPACK_OBJECT_STR)
        snprintf(out, outlen, "%.*s", (int)v->via.str.size, v->via.str.ptr);
    }
  msgpack_zone_destroy(&z);
}

static int on_event(void *ctx, const rn_event *ev)
{
  seen *s = ctx;
  if (s->fail_on && ev->verb == s->fail_on) return 7;
  if (s->n < 32) {
    s->verbs[s->n] = ev->verb;
    s->ids[s->n] = ev->id;
    s->seqs[s->n] = ev->seq;
    s->ns[s->n] = ev->n;
    s->n++;
  }
  if (ev->row) name_of(ev->row, ev->row_len, s->last_name, sizeof s->last_name);
  if (ev->verb == RN_VERB_DELETE && (ev->row || !ev->old)) s->n = -100; /* a DELETE has old, not row */
  return 0;
}

static void test_declare_push_subscribe(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_rel *players;
  CHECK(rn_declare_table(p, "players", players_cols, 3, players_key, 1, &players) == 0);
  CHECK(rn_relation(p, "players") == players);
  CHECK(rn_relation(p, "nobody") == NULL);
  CHECK(strcmp(rn_relation_name(players), "players") == 0);
  seen s = { 0 };
  CHECK(rn_subscribe(p, players, on_event, &s) == 0);
  CHECK(push1(p, players, RN_OP_INSERT, 1, "ann", 3) == 0);            /* group 1 */
  CHECK(rn_begin(p) == 0);
  CHECK(rn_update(p, players, NULL, 0) == RN_EINVAL);                  /* rolls group 2 back */
  CHECK(rn_begin(p) == 0);
  CHECK(push1(p, players, RN_OP_UPDATE, 1, "anna", -1) == 0);
  CHECK(push1(p, players, RN_OP_UPSERT, 2, "bob", -1) == 0);
  CHECK(push1(p, players, RN_OP_DELETE, 1, NULL, -1) == 0);
  CHECK(rn_commit(p) == 0);                                            /* group 2 */
  CHECK(rn_seq(p) == 2);
  CHECK(s.n == 4);
  CHECK(s.verbs[0] == RN_VERB_INSERT && s.verbs[1] == RN_VERB_UPDATE && s.verbs[2] == RN_VERB_INSERT &&
        s.verbs[3] == RN_VERB_DELETE);
  CHECK(s.ids[1] == 1 && s.ids[2] == 2 && s.seqs[3] == 2 && s.ns[3] == 3);
  CHECK(strcmp(s.last_name, "bob") == 0);
  rn_pipeline_close(p);
}

static void test_error_codes(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_rel *players;
  CHECK(rn_declare_table(p, "players", players_cols, 3, players_key, 1, &players) == 0);
  CHECK(push1(p, players, RN_OP_INSERT, 1, "ann", 3) == 0);
  CHECK(push1(p, players, RN_OP_INSERT, 1, "ann", 3) == RN_EEXIST);
  CHECK(strcmp(rn_errmsg(p), "players: insert: a row with key (id = 1) already exists") == 0);
  CHECK(push1(p, players, RN_OP_UPDATE, 9, "x", -1) == RN_ENOTFOUND);
  mp m;
  mp_begin(&m, 2);
  mp_kv_int(&m, "id", 3);
  mp_kv_str(&m, "nme", "x");
  CHECK(rn_insert(p, players, m.sb.data, m.sb.size) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: unknown column \"nme\" (did you mean \"name\"?)") == 0);
  msgpack_sbuffer_destroy(&m.sb);
  mp_begin(&m, 2);
  mp_kv_int(&m, "id", 3);
  mp_kv_int(&m, "name", 5);
  CHECK(rn_insert(p, players, m.sb.data, m.sb.size) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: column \"name\": expected string, got number") == 0);
  msgpack_sbuffer_destroy(&m.sb);
  mp_begin(&m, 2);
  mp_kv_nil(&m, "id");
  mp_kv_str(&m, "name", "x");
  CHECK(rn_insert(p, players, m.sb.data, m.sb.size) == RN_EINVAL);
  msgpack_sbuffer_destroy(&m.sb);
  CHECK(rn_insert(p, players, "\x93\x01\x02\x03", 4) == RN_EINVAL);     /* an array, not a map */
  CHECK(rn_commit(p) == RN_EMISUSE);
  CHECK(rn_begin(p) == 0);
  CHECK(rn_begin(p) == RN_EMISUSE);
  CHECK(rn_rollback(p) == 0);
  rn_rel *dup;
  CHECK(rn_declare_table(p, "players", players_cols, 3, players_key, 1, &dup) == RN_EINVAL);
  rn_column_def bad[] = { { "x", "integer", 0, NULL, 0, NULL } };
  CHECK(rn_declare_stream(p, "s", bad, 1, &dup) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "s: column #1: unknown type integer") == 0);
  seen s = { .fail_on = RN_VERB_INSERT };
  CHECK(rn_subscribe(p, players, on_event, &s) == 0);
  CHECK(push1(p, players, RN_OP_INSERT, 5, "eve", 1) == RN_ECALLBACK);
  CHECK(strcmp(rn_errmsg(p), "players: subscriber returned 7") == 0);
  CHECK(rn_subscribe(p, players, NULL, NULL) == RN_EINVAL);
  CHECK(rn_seq(p) == 1);
  CHECK(rn_flush(p) == 0);
  /* Every code has a name and a sentence. */
  int codes[] = { RN_OK, RN_EINVAL, RN_EEXIST, RN_ENOTFOUND, RN_ESCHEMA, RN_EMISUSE, RN_ECALLBACK,
                  RN_ESTORE, RN_EFULL, RN_ENOMEM, RN_EIO, -1 };
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) CHECK(rn_strerror(codes[i]) && rn_strerror(codes[i])[0]);
  CHECK(strncmp(rn_strerror(RN_EEXIST), "RN_EEXIST", 9) == 0);
  rn_pipeline_close(p);
  char err[256];
  rn_open_opts o = { .path = "/proc/runnel-cannot-be-here" };
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == RN_EIO && p == NULL && strstr(err, "/proc/runnel-cannot-be-here"));
  rn_open_opts wrong = { .nosync = 1, .carry_groups = -1 };
  CHECK(rn_pipeline_open(&wrong, &p, err, sizeof err) == RN_EINVAL && p == NULL && strstr(err, "carry_groups"));
  wrong = (rn_open_opts){ .nosync = 1, .carry_seconds = -0.5 };
  CHECK(rn_pipeline_open(&wrong, &p, err, sizeof err) == RN_EINVAL && p == NULL);
  /* carry_groups = 1: every group is its own LMDB commit, and nothing is lost at close */
  rn_open_opts each = { .nosync = 1, .carry_groups = 1 };
  CHECK(rn_pipeline_open(&each, &p, NULL, 0) == 0);
  rn_rel *r;
  CHECK(rn_declare_table(p, "players", players_cols, 3, players_key, 1, &r) == 0);
  CHECK(push1(p, r, RN_OP_INSERT, 1, "ann", 1) == 0 && push1(p, r, RN_OP_INSERT, 2, "bob", 2) == 0);
  CHECK(rn_seq(p) == 2);
  rn_pipeline_close(p);
}

static void test_schema_mismatch_on_reopen(void)
{
  char dir[] = "/tmp/runnel-api-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir };
  rn_pipeline *p;
  rn_rel *r;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", players_cols, 3, players_key, 1, &r) == 0);
  CHECK(push1(p, r, RN_OP_INSERT, 1, "ann", 1) == 0);
  rn_pipeline_close(p);
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_seq(p) == 1);
  /* score narrowed from int to string: refused, naming the column and both types */
  static const rn_column_def narrowed[] = { { "id", "int", 0, NULL, 0, NULL }, { "name", "string", 0, NULL, 0, NULL }, { "score", "string", 1, NULL, 0, NULL } };
  CHECK(rn_declare_table(p, "players", narrowed, 3, players_key, 1, &r) == RN_ESCHEMA);
  CHECK(strstr(rn_errmsg(p), "column \"score\": stored as int, declared string") != NULL);
  /* score dropped (not a key column): applied, the row kept under its id */
  CHECK(rn_declare_table(p, "players", players_cols, 2, players_key, 1, &r) == 0);
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

static void test_two_pipelines_side_by_side(void)
{
  rn_pipeline *a, *b;
  CHECK(rn_pipeline_open(NULL, &a, NULL, 0) == 0);
  CHECK(rn_pipeline_open(NULL, &b, NULL, 0) == 0);
  rn_rel *ra, *rb;
  CHECK(rn_declare_table(a, "players", players_cols, 3, players_key, 1, &ra) == 0);
  CHECK(rn_declare_table(b, "players", players_cols, 3, players_key, 1, &rb) == 0);
  CHECK(rn_begin(a) == 0);
  CHECK(push1(a, ra, RN_OP_INSERT, 1, "a", 1) == 0);
  CHECK(push1(b, rb, RN_OP_INSERT, 1, "b", 1) == 0);                  /* b's own group, while a's is open */
  CHECK(push1(b, rb, RN_OP_INSERT, 1, "b", 1) == RN_EEXIST);
  CHECK(rn_commit(a) == 0);
  CHECK(rn_seq(a) == 1 && rn_seq(b) == 1);
  rn_pipeline_close(a);
  CHECK(push1(b, rb, RN_OP_INSERT, 2, "b2", 1) == 0);
  rn_pipeline_close(b);
}

/* A Lua script in the host's own lua_State declares a join; the host pushes
 * and reads the join's changes through a C subscription. */
static void test_lua_in_the_hosts_state(void)
{
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_rel *teams;
  rn_column_def tcols[] = { { "id", "int", 0, NULL, 0, NULL }, { "name", "string", 0, NULL, 0, NULL } };
  CHECK(rn_declare_table(p, "teams", tcols, 2, players_key, 1, &teams) == 0);
  CHECK(rn_run_lua_string(p, L,
        "local players = p:table('players', { {'id','int'}, {'name','string'}, {'team','int', null = true}, key = 'id' })\n"
        "local roster = players:join(p:relation('teams'), { on = 'team', kind = 'left', name = 'roster' })\n"
        "counted = 0\n"
        "roster:sink(function() counted = counted + 1 end)\n", "=script") == 0);
  rn_rel *roster = rn_relation(p, "roster"), *players = rn_relation(p, "players");
  CHECK(roster && players);
  seen s = { 0 };
  CHECK(rn_subscribe(p, roster, on_event, &s) == 0);
  mp m;
  mp_begin(&m, 2);
  mp_kv_int(&m, "id", 7);
  mp_kv_str(&m, "name", "otters");
  CHECK(rn_insert(p, teams, m.sb.data, m.sb.size) == 0);
  msgpack_sbuffer_destroy(&m.sb);
  mp_begin(&m, 3);
  mp_kv_int(&m, "id", 1);
  mp_kv_str(&m, "name", "ann");
  mp_kv_int(&m, "team", 7);
  CHECK(rn_insert(p, players, m.sb.data, m.sb.size) == 0);
  msgpack_sbuffer_destroy(&m.sb);
  CHECK(s.n == 1 && s.verbs[0] == RN_VERB_INSERT && strcmp(s.last_name, "ann") == 0);
  lua_getglobal(L, "counted");
  CHECK(lua_tointeger(L, -1) == 1);
  lua_pop(L, 1);
  CHECK(rn_run_lua_string(p, L, "error('refused')", "=bad") == RN_ECALLBACK);
  CHECK(strstr(rn_errmsg(p), "refused") != NULL);
  CHECK(rn_run_lua(p, L, "/nonexistent/script.lua") == RN_EIO);
  rn_pipeline_close(p);             /* before the host closes its state */
  lua_gc(L, LUA_GCCOLLECT, 0);
  lua_close(L);
}

static void test_lua_in_a_state_runnel_owns(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_run_lua_string(p, NULL, "p:stream('ev', { {'kind','string'} })", "=a") == 0);
  CHECK(rn_run_lua_string(p, NULL, "ev_count = 0; p:relation('ev'):sink(function() ev_count = ev_count + 1 end)", "=b") == 0);
  rn_rel *ev = rn_relation(p, "ev");
  mp m;
  mp_begin(&m, 1);
  mp_kv_str(&m, "kind", "x");
  CHECK(rn_insert(p, ev, m.sb.data, m.sb.size) == 0);
  CHECK(rn_insert(p, ev, m.sb.data, m.sb.size) == 0);
  msgpack_sbuffer_destroy(&m.sb);
  CHECK(rn_run_lua_string(p, NULL, "assert(ev_count == 2, 'ev_count is ' .. ev_count)", "=c") == 0);
  CHECK(rn_run_lua_string(p, NULL, "p:close()", "=d") == 0); /* Lua cannot close a host's pipeline */
  CHECK(rn_seq(p) == 2);
  rn_pipeline_close(p);
}

/* A join scan whose joiner fails, outside a group and inside one, closes its
 * LMDB cursor (make valgrind counts a leak otherwise); a joiner cannot end
 * the group whose transaction the scan reads. */
static void test_failing_join_scan(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_run_lua_string(p, NULL,
        "local t = p:table('t', { {'id','int'}, key = 'id' })\n"
        "local u = p:table('u', { {'uid','int'}, key = 'uid' })\n"
        "mode = nil\n"
        "j = t:join(u, { on = 'id', kind = 'outer', columns = { {'id','int'} }, joiner = function(l, r)\n"
        "  if mode == 'fail' then error('joiner refused') end\n"
        "  if mode == 'end' then ended = { pcall(p.rollback, p) } end\n"
        "  return { id = l and l.id or r.uid } end })\n"
        "t:insert{ id = 1 }; u:insert{ uid = 2 }\n", "=setup") == 0);
  CHECK(rn_run_lua_string(p, NULL, "mode = 'fail'; j:rows()", "=outside") == RN_ECALLBACK);
  CHECK(strstr(rn_errmsg(p), "joiner refused") != NULL);
  /* Scripts run outside groups: these open theirs. */
  CHECK(rn_run_lua_string(p, NULL, "p:begin(); mode = 'fail'; local ok, e = pcall(j.rows, j)\n"
                                   "assert(not ok and e:find('joiner refused'), e); p:rollback()", "=inside") == 0);
  CHECK(rn_run_lua_string(p, NULL, "mode = nil; p:begin(); t = p:relation('t'); t:insert{ id = 3 }\n"
                                   "mode = 'end'; local n = 0; for _ in j:rows() do n = n + 1 end\n"
                                   "assert(n == 3, n); assert(ended[1] == false, 'rollback ran')\n"
                                   "assert(ended[2]:find('not from inside a callback'), ended[2])\n"
                                   "assert(p:in_group()); mode = nil; p:commit()", "=end") == 0);
  CHECK(strcmp(rn_errmsg(p), "") == 0 && rn_seq(p) == 3);
  CHECK(rn_run_lua_string(p, NULL, "mode = nil; assert(j:count() == 3)", "=after") == 0);
  rn_pipeline_close(p);
}

static void test_lua_entry_points_check_pointers(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_run_lua(NULL, NULL, "x.lua") == RN_EINVAL);
  CHECK(rn_run_lua_string(NULL, NULL, "return 1", "=x") == RN_EINVAL);
  CHECK(rn_run_lua(p, NULL, NULL) == RN_EINVAL && strstr(rn_errmsg(p), "path is NULL"));
  CHECK(rn_run_lua_string(p, NULL, NULL, "=x") == RN_EINVAL && strstr(rn_errmsg(p), "chunk is NULL"));
  CHECK(rn_run_lua_string(p, NULL, "return 1", NULL) == 0 && rn_errmsg(p)[0] == '\0');
  CHECK(rn_run_lua_string(p, NULL, "p:begin(); assert(not pcall(p.begin, p)); p:rollback()\n"
                                   "assert(not pcall(p.commit, p))", "=caught") == 0);
  CHECK(rn_errmsg(p)[0] == '\0'); /* what the script caught is not its message */
  rn_pipeline_close(p);
}

/* Random and mutated msgpack never crashes the push path: each call returns
 * 0 or an error, and the pipeline stays usable. */
static void test_garbage_pushes(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_rel *players;
  CHECK(rn_declare_table(p, "players", players_cols, 3, players_key, 1, &players) == 0);
  uint64_t rng = 424242;
  unsigned char buf[96];
  mp good;
  mp_begin(&good, 3);
  mp_kv_int(&good, "id", 1);
  mp_kv_str(&good, "name", "ann");
  mp_kv_int(&good, "score", 7);
  int ok = 0, refused = 0;
  for (int i = 0; i < 20000; i++) {
    size_t n;
    if (i % 2) { /* a valid change with a few bytes changed */
      n = good.sb.size;
      memcpy(buf, good.sb.data, n);
      for (int k = 0; k < 3; k++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        buf[(rng >> 33) % n] = (unsigned char)(rng >> 17);
      }
    } else {
      rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
      n = (rng >> 33) % sizeof buf;
      for (size_t k = 0; k < n; k++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        buf[k] = (unsigned char)(rng >> 40);
      }
    }
    int rc = rn_push(p, players, (rn_op)(1 + (rng >> 20) % 4), buf, n);
    if (rc == 0) ok++; else refused++;
    CHECK(rc == 0 || rc == RN_EINVAL || rc == RN_EEXIST || rc == RN_ENOTFOUND);
  }
  CHECK(ok + refused == 20000 && refused > 0);
  msgpack_sbuffer_destroy(&good.sb);
  CHECK(push1(p, players, RN_OP_UPSERT, 99, "still fine", 1) == 0);
  rn_pipeline_close(p);
}

/* ---- subscription maps, byte for byte ---- */

/* Every event's row and old map, appended. */
typedef struct heard_maps { int n; msgpack_sbuffer rows; } heard_maps;

static int on_map(void *ctx, const rn_event *ev)
{
  heard_maps *h = ctx;
  h->n++;
  if (ev->row) msgpack_sbuffer_write(&h->rows, ev->row, ev->row_len);
  if (ev->old) msgpack_sbuffer_write(&h->rows, ev->old, ev->old_len);
  return 0;
}

/* Packs a map from "name", kind, value …, NULL; kinds: 'i' int64, 's' string,
 * 'n' nil, 't' true, 'f' double. msgpack-c's own packing: what a subscriber
 * must receive. */
static void pack_map(msgpack_packer *pk, int pairs, ...)
{
  va_list ap;
  va_start(ap, pairs);
  msgpack_pack_map(pk, (size_t)pairs);
  for (int i = 0; i < pairs; i++) {
    const char *name = va_arg(ap, const char *);
    msgpack_pack_str_with_body(pk, name, strlen(name));
    switch (va_arg(ap, int)) {
    case 'i': msgpack_pack_int64(pk, va_arg(ap, int64_t)); break;
    case 's': { const char *v = va_arg(ap, const char *); msgpack_pack_str_with_body(pk, v, strlen(v)); break; }
    case 't': msgpack_pack_true(pk); break;
    case 'f': msgpack_pack_double(pk, va_arg(ap, double)); break;
    default: msgpack_pack_nil(pk);
    }
  }
  va_end(ap);
}

#define LONG_NAME "a column name longer than thirty-one bytes"
#define LONG_TEXT "a string value well over sixteen bytes long"

/* A wide row (a map16, a str8 name, values short and long, at the row's
 * end and not) reaches a subscriber, and rn_get, as msgpack-c packs it. */
static void test_subscription_maps_are_exact(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  rn_column_def cols[17] = { { "id", "int", 0, NULL, 0, NULL }, { LONG_NAME, "string", 0, NULL, 0, NULL } };
  static char names[15][16];
  static const char *const types[] = { "int", "int", "float", "bool", "string", "string", "int" };
  for (int i = 0; i < 15; i++) {
    snprintf(names[i], sizeof names[i], "c%d", i);
    cols[2 + i] = (rn_column_def){ names[i], types[i % 7], 1, NULL, 0, NULL };
  }
  rn_rel *wide;
  CHECK(rn_declare_table(p, "wide", cols, 17, players_key, 1, &wide) == 0);
  heard_maps h = { 0 };
  msgpack_sbuffer_init(&h.rows);
  CHECK(rn_subscribe(p, wide, on_map, &h) == 0);
  mp m;
  mp_begin(&m, 17);
  mp_kv_int(&m, "id", 1);
  mp_kv_str(&m, LONG_NAME, LONG_TEXT);
  for (int i = 0; i < 15; i++) {
    mp_str(&m, names[i]);
    switch (i % 7) {
    case 0: msgpack_pack_int64(&m.pk, (int64_t)1 << 40); break;
    case 1: msgpack_pack_int64(&m.pk, -5); break;
    case 2: msgpack_pack_double(&m.pk, 1.5); break;
    case 3: msgpack_pack_true(&m.pk); break;
    case 4: mp_str(&m, LONG_TEXT); break;
    case 5: mp_str(&m, "x"); break;
    default: msgpack_pack_nil(&m.pk);
    }
  }
  CHECK(rn_insert(p, wide, m.sb.data, m.sb.size) == 0);
  msgpack_sbuffer_destroy(&m.sb);
  mp_begin(&m, 1);
  mp_kv_int(&m, "id", 1);
  const void *got;
  size_t got_len;
  CHECK(rn_get(p, wide, m.sb.data, m.sb.size, &got, &got_len, NULL) == 0);
  msgpack_sbuffer_destroy(&m.sb);

  mp want;
  mp_begin(&want, 0);
  want.sb.size = 0;
  pack_map(&want.pk, 17, "id", 'i', (int64_t)1, LONG_NAME, 's', LONG_TEXT,
           "c0", 'i', (int64_t)1 << 40, "c1", 'i', (int64_t)-5, "c2", 'f', 1.5, "c3", 't', "c4", 's', LONG_TEXT,
           "c5", 's', "x", "c6", 'n', "c7", 'i', (int64_t)1 << 40, "c8", 'i', (int64_t)-5, "c9", 'f', 1.5,
           "c10", 't', "c11", 's', LONG_TEXT, "c12", 's', "x", "c13", 'n', "c14", 'i', (int64_t)1 << 40);
  CHECK(h.n == 1);
  CHECK(h.rows.size == want.sb.size && memcmp(h.rows.data, want.sb.data, want.sb.size) == 0);
  CHECK(got_len == want.sb.size && memcmp(got, want.sb.data, want.sb.size) == 0);
  msgpack_sbuffer_destroy(&want.sb);
  msgpack_sbuffer_destroy(&h.rows);
  rn_pipeline_close(p);
}

/* Inserts player 1 given a name and a guild, else updates it. */
static void push_player(rn_pipeline *p, rn_rel *players, int pairs, const char *name, int guild, int64_t score)
{
  mp m;
  mp_begin(&m, pairs);
  mp_kv_int(&m, "id", 1);
  if (name) mp_kv_str(&m, "name", name);
  if (guild > 0) mp_kv_int(&m, "guild", guild);
  else if (guild == 0) mp_kv_nil(&m, "guild");
  if (score >= 0) mp_kv_int(&m, "score", score);
  int rc = rn_push(p, players, name && guild > 0 ? RN_OP_INSERT : RN_OP_UPDATE, m.sb.data, m.sb.size);
  CHECK(rc == 0);
  if (rc) fprintf(stderr, "%s\n", rn_errmsg(p));
  msgpack_sbuffer_destroy(&m.sb);
}

/* One log row as a subscriber must see it: meta, the player's columns, the
 * deleted flag of guild. */
static void want_log_row(mp *m, uint64_t seq, int batch, int op, uint64_t id, const char *name, int guild,
                         int64_t score, bool guild_deleted)
{
  msgpack_pack_map(&m->pk, 9);
  mp_kv_int(m, "cdc$seq", (int64_t)seq);
  mp_kv_int(m, "cdc$batch_seq_no", batch);
  mp_kv_int(m, "cdc$operation", op);
  mp_kv_int(m, "cdc$id", (int64_t)id);
  mp_kv_int(m, "id", 1);
  if (name) mp_kv_str(m, "name", name); else mp_kv_nil(m, "name");
  if (guild) mp_kv_int(m, "guild", guild); else mp_kv_nil(m, "guild");
  mp_kv_int(m, "score", score);
  mp_str(m, "cdc$deleted_guild");
  if (guild_deleted) msgpack_pack_true(&m->pk); else msgpack_pack_nil(&m->pk);
}

/* A CDC log with pre- and postimages reaches a C subscriber as msgpack-c
 * packs its rows: an update that nulls a column, one with long values. */
static void test_cdc_log_maps_are_exact(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_run_lua_string(p, NULL,
        "local players = p:table('players', { {'id','int'}, {'name','string'}, {'guild','int', null = true},\n"
        "  {'score','int', default = 0}, key = 'id' })\n"
        "players:cdc{ preimage = true, postimage = true, name = 'player_log' }\n", "=script") == 0);
  rn_rel *players = rn_relation(p, "players");
  heard_maps h = { 0 };
  msgpack_sbuffer_init(&h.rows);
  CHECK(players && rn_subscribe(p, rn_relation(p, "player_log"), on_map, &h) == 0);
  push_player(p, players, 3, "ann", 7, -1);
  uint64_t seq = rn_seq(p), id = 0;
  mp m;
  mp_begin(&m, 1);
  mp_kv_int(&m, "id", 1);
  const void *row;
  size_t row_len;
  CHECK(rn_get(p, players, m.sb.data, m.sb.size, &row, &row_len, &id) == 0 && id > 0);
  msgpack_sbuffer_destroy(&m.sb);
  h.n = 0;
  h.rows.size = 0;
  push_player(p, players, 3, NULL, 0, 5);                      /* guild to null, a score */
  push_player(p, players, 3, LONG_TEXT, -1, (int64_t)1 << 40); /* long values */
  mp want;
  mp_begin(&want, 0);
  want.sb.size = 0;
  want_log_row(&want, seq + 1, 0, 0, id, NULL, 7, 0, false);
  want_log_row(&want, seq + 1, 1, 1, id, NULL, 0, 5, true);
  want_log_row(&want, seq + 1, 2, 9, id, "ann", 0, 5, false);
  want_log_row(&want, seq + 2, 0, 0, id, "ann", 0, 5, false);
  want_log_row(&want, seq + 2, 1, 1, id, LONG_TEXT, 0, (int64_t)1 << 40, false);
  want_log_row(&want, seq + 2, 2, 9, id, LONG_TEXT, 0, (int64_t)1 << 40, false);
  CHECK(h.n == 6);
  CHECK(h.rows.size == want.sb.size && memcmp(h.rows.data, want.sb.data, want.sb.size) == 0);
  msgpack_sbuffer_destroy(&want.sb);
  msgpack_sbuffer_destroy(&h.rows);
  rn_pipeline_close(p);
}

/* The CDC log of a pipeline where nothing follows it (its rows are logged
 * straight from the builder's buffer) and of one where a filter follows it
 * (each row first copied to the scratch zone for the relations after it):
 * the same events, byte for byte, over groups of inserts, updates that
 * null a column and deletes. */
static void cdc_log_events(bool followed, msgpack_sbuffer *out, int *events)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  char script[1024];
  snprintf(script, sizeof script,
           "local players = p:table('players', { {'id','int'}, {'name','string'}, {'guild','int', null = true},\n"
           "  {'score','int', default = 0}, key = 'id' })\n"
           "local log = players:cdc{ preimage = true, postimage = true, name = 'player_log' }\n%s",
           followed ? "log:filter(function(r) return true end, 'after_log')\n" : "");
  CHECK(rn_run_lua_string(p, NULL, script, "=script") == 0);
  rn_rel *players = rn_relation(p, "players");
  heard_maps h = { 0 };
  msgpack_sbuffer_init(&h.rows);
  CHECK(players && rn_subscribe(p, rn_relation(p, "player_log"), on_map, &h) == 0);
  bool exists[10] = { false };
  for (int g = 0; g < 5; g++) {
    CHECK(rn_begin(p) == 0);
    for (int i = 0; i < 12; i++) {
      mp m;
      int id = 1 + (g * 7 + i * 5) % 9, what = exists[id] ? (g + i) % 4 : 0;
      mp_begin(&m, what == 3 ? 1 : 3);
      mp_kv_int(&m, "id", id);
      if (what == 0) { mp_kv_str(&m, "name", i % 2 ? "ann" : LONG_TEXT); mp_kv_int(&m, "guild", g); }
      else if (what == 1) { mp_kv_nil(&m, "guild"); mp_kv_int(&m, "score", g * 100 + i); }
      else if (what == 2) { mp_kv_int(&m, "guild", i); mp_kv_int(&m, "score", (int64_t)1 << (20 + i)); }
      int rc = what == 0 ? rn_upsert(p, players, m.sb.data, m.sb.size)
             : what == 3 ? rn_delete(p, players, m.sb.data, m.sb.size)
             : rn_update(p, players, m.sb.data, m.sb.size);
      CHECK(rc == 0);
      exists[id] = what != 3;
      msgpack_sbuffer_destroy(&m.sb);
    }
    CHECK(rn_commit(p) == 0);
  }
  *events = h.n;
  msgpack_sbuffer_write(out, h.rows.data, h.rows.size);
  msgpack_sbuffer_destroy(&h.rows);
  rn_pipeline_close(p);
}

static void test_cdc_log_rows_alone_and_followed(void)
{
  msgpack_sbuffer alone, followed;
  msgpack_sbuffer_init(&alone);
  msgpack_sbuffer_init(&followed);
  int n_alone = 0, n_followed = 0;
  cdc_log_events(false, &alone, &n_alone);
  cdc_log_events(true, &followed, &n_followed);
  CHECK(n_alone > 20 && n_alone == n_followed);
  CHECK(alone.size == followed.size && memcmp(alone.data, followed.data, alone.size) == 0);
  msgpack_sbuffer_destroy(&alone);
  msgpack_sbuffer_destroy(&followed);
}

/* A script that changed a table from inside a coroutine leaves the host's
 * pushes running their Lua sinks on the state's own thread, not on the
 * coroutine: it may have been collected since (a use after free), be
 * suspended (a call on it would break its resume) or dead of an error; and
 * the host's next script runs in the host's state without being refused as
 * "another lua_State". */
static void test_lua_script_with_a_coroutine(void)
{
  static const char *const scripts[] = {
    "coroutine.wrap(function() t:insert{ id = 1, name = 'ann' } end)()",
    "kept = coroutine.create(function() t:insert{ id = 1, name = 'ann' }; coroutine.yield(); resumed = true end)\n"
    "assert(coroutine.resume(kept))",
    "assert(not pcall(coroutine.wrap(function() t:insert{ id = 1, name = 'ann' }; error('ended') end)))",
  };
  for (int hosts = 0; hosts < 2; hosts++)
    for (int i = 0; i < 3; i++) {
      lua_State *L = hosts ? luaL_newstate() : NULL;
      if (L) luaL_openlibs(L);
      rn_pipeline *p;
      CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
      CHECK(rn_run_lua_string(p, L,
            "t = p:table('players', { {'id','int'}, {'name','string'}, {'score','int', null = true}, key = 'id' })\n"
            "seen = 0; t:sink(function() seen = seen + 1 end)\n", "=setup") == 0);
      CHECK(rn_run_lua_string(p, L, scripts[i], "=co") == 0);
      if (L) lua_gc(L, LUA_GCCOLLECT, 0); /* the host's own Lua: the ended coroutine is freed */
      rn_rel *players = rn_relation(p, "players");
      CHECK(players && push1(p, players, RN_OP_INSERT, 2, "bob", 1) == 0);
      CHECK(rn_run_lua_string(p, L, "assert(seen == 2, seen)\n"
                                    "if kept then assert(coroutine.resume(kept)); assert(resumed) end", "=check") == 0);
      rn_pipeline_close(p);
      if (L) lua_close(L);
    }
}

int main(void)
{
  RUN(test_garbage_pushes);
  RUN(test_declare_push_subscribe);
  RUN(test_error_codes);
  RUN(test_schema_mismatch_on_reopen);
  RUN(test_two_pipelines_side_by_side);
  RUN(test_lua_in_the_hosts_state);
  RUN(test_lua_in_a_state_runnel_owns);
  RUN(test_failing_join_scan);
  RUN(test_lua_script_with_a_coroutine);
  RUN(test_lua_entry_points_check_pointers);
  RUN(test_subscription_maps_are_exact);
  RUN(test_cdc_log_maps_are_exact);
  RUN(test_cdc_log_rows_alone_and_followed);
  return CHECK_REPORT();
}
