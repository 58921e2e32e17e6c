/* test_writeback.c — the write-back layer (core/wb.c) against the plain
 * LMDB path: the same random changes (inserts, updates, deletes, upserts,
 * refused changes, rolled-back groups among carried ones) through a join
 * with a select and an aggregate with min and max, on a map small enough to
 * grow many times, closed and reopened between phases, must give the same
 * events and, byte for byte, the same databases. */
#include <lauxlib.h>
#include <lmdb.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

#define PHASES 3

static const char *const DECLARE =
  "runnel = runnel or require('runnel')\n"
  "teams = p:table('teams', { {'id','int'}, {'name','string'}, {'region','string'}, key = 'id' })\n"
  "players = p:table('players', { {'id','int'}, {'name','string'}, {'team_id','int', null = true},\n"
  "                               {'score','int'}, key = 'id' })\n"
  "local j = players:join(teams, { on = 'team_id', kind = 'left' })\n"
  "  :select{ {'pid','id'}, {'pname','name'}, 'score', {'tname','teams.name'}, 'region' }\n"
  "local a = players:aggregate{ by = 'team_id', n = runnel.count(), total = runnel.sum('score'),\n"
  "                             lo = runnel.min('score'), hi = runnel.max('score') }\n"
  "log = log or {}\n"
  "local function show(r) if not r then return '-' end local t = {} for k, v in pairs(r) do t[#t + 1] = k .. '=' .. tostring(v) end table.sort(t) return table.concat(t, ',') end\n"
  "j:sink(function(verb, row, old, info) log[#log + 1] = 'j ' .. verb .. ' ' .. info.id .. ' ' .. show(row) .. ' ' .. show(old) end)\n"
  "a:sink(function(verb, row, old, info) log[#log + 1] = 'a ' .. verb .. ' ' .. info.id .. ' ' .. show(row) .. ' ' .. show(old) end)\n";

/* groups(n): n groups of up to 60 calls of change() each; a failing call
 * ends its group (rolled back), one group in ten is rolled back on purpose,
 * one in 25 is followed by p:flush(). */
#define GROUPS \
  "local function groups(n)\n" \
  "  for g = 1, n do\n" \
  "    p:begin()\n" \
  "    local ok = true\n" \
  "    for _ = 1, math.random(60) do\n" \
  "      local e; ok, e = pcall(change)\n" \
  "      if not ok and os.getenv('WB_DEBUG') then io.stderr:write(tostring(e), '\\n') end\n" \
  "      if not ok then break end\n" \
  "    end\n" \
  "    if ok and math.random(10) == 1 then p:rollback() log[#log + 1] = 'rollback'\n" \
  "    elseif ok then p:commit() else log[#log + 1] = 'refused' end\n" \
  "    if math.random(25) == 1 then p:flush() end\n" \
  "  end\n" \
  "end\n"

/* groups of random changes; some fail (a duplicate insert, an update of an
 * absent key) and roll their group back, some are rolled back on purpose */
static const char *const STEPS =
  "local function change()\n"
  "  local r = math.random(100)\n"
  "  if r <= 10 then teams:upsert{ id = math.random(40), name = 't' .. math.random(9), region = 'r' .. math.random(3) }\n"
  "  elseif r <= 12 then teams:delete{ id = math.random(40) }\n"
  "  elseif r <= 40 then players:upsert{ id = math.random(1500), name = ('p'):rep(math.random(400)),\n"
  "                                     team_id = math.random(8) > 1 and math.random(45) or nil, score = math.random(1000) }\n"
  "  elseif r <= 85 then local id = math.random(1500)\n"
  "    if players:get{ id = id } then players:update{ id = id, score = math.random(1000) } end\n"
  "  elseif r <= 95 then local id = math.random(1500)\n"
  "    if players:get{ id = id } then players:delete{ id = id } end\n"
  "  elseif r <= 99 then players:insert{ id = math.random(1500), name = 'new', score = 1 }\n"
  "  else players:update{ id = 99999, score = 0 } end\n"
  "end\n"
  GROUPS
  "groups(60)\n";

/* Every kind of relation over the hot databases, declared per phase: a
 * joiner join (RN_JOIN_KEPT entries), an aggregate, a top dropped in phase 1
 * and declared again in phase 2 (p:drop first), an aggregate missing from
 * phase 1 (stale in phase 2: its groups reset and rebuilt), an index, a keyless table
 * with a distinct, a join with a lookup, a join whose right side is derived
 * (its copy of the right rows), and in phase 2 a new column of players (evolve: its rows
 * rewritten, what reads them rebuilt). */
static const char *const DECLARE_ALL =
  "runnel = runnel or require('runnel')\n"
  "log = log or {}\n"
  "local function show(r) if not r then return '-' end local t = {} for k, v in pairs(r) do t[#t + 1] = k .. '=' .. tostring(v) end table.sort(t) return table.concat(t, ',') end\n"
  "local function logged(rel, tag) rel:sink(function(verb, row, old, info) log[#log + 1] = tag .. ' ' .. verb .. ' ' .. info.id .. ' ' .. show(row) .. ' ' .. show(old) end) end\n"
  "local pcols = { {'id','int'}, {'name','string'}, {'team_id','int', null = true}, {'score','int'}, key = 'id' }\n"
  "if phase >= 2 then pcols[#pcols + 1] = {'bonus','int', null = true} end\n"
  "teams = p:table('teams', { {'id','int'}, {'name','string'}, {'region','string'}, key = 'id' })\n"
  "players = p:table('players', pcols)\n"
  "tags = p:table('tags', { {'team_id','int'}, {'tag','string'} })\n"
  "logged(players:join(teams, { on = 'team_id', kind = 'left', columns = { {'pid','int'}, {'what','string'}, key = 'pid' },\n"
  "  joiner = function(l, r) return { pid = l.id, what = (r and r.name or 'none') .. '/' .. l.score .. '/' .. tostring(l.bonus) } end }), 'jj')\n"
  "logged(players:aggregate{ by = 'team_id', n = runnel.count(), total = runnel.sum('score'), lo = runnel.min('score'),\n"
  "                          hi = runnel.max('score') }, 'a')\n"
  "if phase == 2 then p:drop('tp') end\n"
  "if phase ~= 1 then logged(players:top{ n = 3, by = 'team_id', order = { {'score', 'desc'} }, name = 'tp' }, 'tp') end\n"
  "if phase ~= 1 then logged(players:aggregate{ by = 'team_id', n = runnel.count(), hi = runnel.max('score'),\n"
  "                                              name = 'stale' }, 's') end\n"
  "byscore = players:index{ 'score', 'desc', name = 'byscore' }\n"
  "logged(tags:distinct('dtags'), 'd')\n"
  "logged(tags:join(teams, { on = 'team_id', kind = 'left' }), 'tj')\n"
  "logged(players:join(teams:filter(function(t) return t.region ~= 'r1' end, 'not_r1'),\n"
  "                    { on = 'team_id', kind = 'left', name = 'jd' }), 'jd')\n"
  "local names = p:lookup('names', { {'k','int'}, {'label','string'}, key = 'k',\n"
  "                                  source = function(k) return { label = 'L' .. (k % 7) } end })\n"
  "logged(players:join(names, { on = 'team_id', kind = 'left' }), 'lk')\n";

/* STEPS over every kind, with reads inside the groups: a row just updated
 * (rn_get through the layer), the index's first rows, now and then every
 * row of players; then a relation declared after the groups. */
static const char *const STEPS_ALL =
  "local function change()\n"
  "  local r = math.random(100)\n"
  "  if r <= 8 then teams:upsert{ id = math.random(40), name = 't' .. math.random(9), region = 'r' .. math.random(3) }\n"
  "  elseif r <= 10 then teams:delete{ id = math.random(40) }\n"
  "  elseif r <= 16 then tags:insert{ team_id = math.random(40), tag = 'g' .. math.random(5) }\n"
  "  elseif r <= 19 then local t = { team_id = math.random(40), tag = 'g' .. math.random(5) }\n"
  "    if tags:get(t) then tags:delete(t) end\n"
  "  elseif r <= 40 then players:upsert{ id = math.random(1500), name = ('p'):rep(math.random(300)),\n"
  "                                     team_id = math.random(8) > 1 and math.random(45) or nil, score = math.random(1000),\n"
  "                                     bonus = phase >= 2 and math.random(5) or nil }\n"
  "  elseif r <= 85 then local id = math.random(1500)\n"
  "    if players:get{ id = id } then local s = math.random(1000) players:update{ id = id, score = s }\n"
  "      local now = players:get{ id = id } log[#log + 1] = 'get ' .. id .. ' ' .. tostring(now and now.score) .. ' ' .. s end\n"
  "  elseif r <= 93 then local id = math.random(1500)\n"
  "    if players:get{ id = id } then players:delete{ id = id } log[#log + 1] = 'gone ' .. tostring(players:get{ id = id }) end\n"
  "  elseif r <= 97 then local t = {} for row in byscore:range{ limit = 3 } do t[#t + 1] = row.id .. ':' .. row.score end\n"
  "    log[#log + 1] = 'ix ' .. table.concat(t, ' ')\n"
  "  elseif r <= 98 then local n, sum = 0, 0 for row in players:rows() do n = n + 1 sum = sum + row.score end\n"
  "    log[#log + 1] = 'rows ' .. n .. ' ' .. sum\n"
  "  elseif r <= 99 then players:insert{ id = math.random(1500), name = 'new', score = 1 }\n"
  "  else players:update{ id = 99999, score = 0 } end\n"
  "end\n"
  GROUPS
  "groups(40)\n"
  "local late = players:join(teams, { on = 'team_id', name = 'late' .. phase })\n"
  "late:sink(function(verb, row, old, info) log[#log + 1] = 'late ' .. verb .. ' ' .. info.id .. ' ' .. tostring(row and row.score) end)\n"
  "groups(20)\n";

/* Every named database's entries, as text. */
static char *dump(const char *dir, size_t *len)
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi main_dbi;
  MDB_cursor *names;
  char *out = NULL;
  FILE *f = open_memstream(&out, len);
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, MDB_RDONLY, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0);
  CHECK(mdb_dbi_open(txn, NULL, 0, &main_dbi) == 0);
  CHECK(mdb_cursor_open(txn, main_dbi, &names) == 0);
  MDB_val n, unused;
  for (int rc = mdb_cursor_get(names, &n, &unused, MDB_FIRST); rc == 0; rc = mdb_cursor_get(names, &n, &unused, MDB_NEXT)) {
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)n.mv_size, (const char *)n.mv_data);
    MDB_dbi dbi;
    MDB_cursor *cur;
    CHECK(mdb_dbi_open(txn, name, 0, &dbi) == 0);
    CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
    fprintf(f, "[%s]\n", name);
    MDB_val k, v;
    for (int r = mdb_cursor_get(cur, &k, &v, MDB_FIRST); r == 0; r = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      for (size_t i = 0; i < k.mv_size; i++) fprintf(f, "%02x", ((unsigned char *)k.mv_data)[i]);
      fputc('=', f);
      for (size_t i = 0; i < v.mv_size; i++) fprintf(f, "%02x", ((unsigned char *)v.mv_data)[i]);
      fputc('\n', f);
    }
    mdb_cursor_close(cur);
  }
  mdb_cursor_close(names);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  fclose(f);
  return out;
}

/* Runs seed's phases in dir with the layer on or off; returns the events. */
static char *run_with(const char *dir, int seed, int write_back, uint64_t *map_grew, const char *declare,
                      const char *steps)
{
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  char chunk[64];
  snprintf(chunk, sizeof chunk, "math.randomseed(%d)", seed);
  CHECK(luaL_dostring(L, chunk) == 0);
  *map_grew = 0;
  for (int phase = 0; phase < PHASES; phase++) { /* reopened every phase */
    rn_open_opts o = { .path = dir, .nosync = 1, .map_size = 1 << 20, .carry_groups = 1000,
                       .carry_changes = 1000000, .carry_seconds = 1000, .write_back = write_back };
    rn_pipeline *p;
    char err[256];
    CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
    snprintf(chunk, sizeof chunk, "phase = %d", phase);
    CHECK(luaL_dostring(L, chunk) == 0);
    int rc = rn_run_lua_string(p, L, declare, "=declare");
    if (rc) fprintf(stderr, "declare: %s\n", rn_errmsg(p));
    CHECK(rc == 0);
    rc = rn_run_lua_string(p, L, steps, "=steps");
    if (rc) fprintf(stderr, "steps: %s\n", rn_errmsg(p));
    CHECK(rc == 0);
    CHECK(rn_run_lua_string(p, L, "maps = (maps or 0) + 1; map_size = p:stats().map_size", "=stats") == 0);
    lua_getglobal(L, "map_size");
    if (getenv("WB_DEBUG")) fprintf(stderr, "phase %d map %lld\n", phase, (long long)lua_tointeger(L, -1));
    *map_grew = (uint64_t)lua_tointeger(L, -1) > (1u << 20) ? 1 : *map_grew;
    lua_pop(L, 1);
    rn_pipeline_close(p);
  }
  CHECK(luaL_dostring(L, "return table.concat(log, '\\n')") == 0);
  if (getenv("WB_DEBUG")) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  char *events = strdup(lua_tostring(L, -1));
  lua_close(L);
  return events;
}

static char *run(const char *dir, int seed, int write_back, uint64_t *map_grew)
{
  return run_with(dir, seed, write_back, map_grew, DECLARE, STEPS);
}

static void first_difference(const char *a, const char *b)
{
  size_t i = 0;
  while (a[i] && a[i] == b[i]) i++;
  size_t from = i > 200 ? i - 200 : 0;
  fprintf(stderr, "differ at %zu:\n--- write-back\n%.400s\n--- plain\n%.400s\n", i, a + from, b + from);
}

static void test_same_state_and_events(void)
{
  for (int seed = 1; seed <= 6; seed++) {
    char on_dir[] = "/tmp/rn_wb_onXXXXXX", off_dir[] = "/tmp/rn_wb_offXXXXXX";
    CHECK(mkdtemp(on_dir) && mkdtemp(off_dir));
    uint64_t grew_on, grew_off;
    char *ev_on = run(on_dir, seed, 1, &grew_on), *ev_off = run(off_dir, seed, -1, &grew_off);
    CHECK(grew_on && grew_off); /* the map grew: regrows were part of it */
    CHECK(strstr(ev_on, "rollback") && strstr(ev_on, "refused") && strstr(ev_on, "a UPDATE"));
    if (strcmp(ev_on, ev_off) != 0) first_difference(ev_on, ev_off);
    CHECK(strcmp(ev_on, ev_off) == 0);
    size_t lon, loff;
    char *d_on = dump(on_dir, &lon), *d_off = dump(off_dir, &loff);
    CHECK(lon > 1000);
    if (strcmp(d_on, d_off) != 0) first_difference(d_on, d_off);
    CHECK(strcmp(d_on, d_off) == 0);
    free(ev_on);
    free(ev_off);
    free(d_on);
    free(d_off);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", on_dir, off_dir);
    CHECK(system(cmd) == 0);
  }
}

/* Joiner joins, aggregates, top, index, distinct, a keyless table, evolve,
 * drop and declare again, declarations after groups and reads inside
 * groups: the same events and databases with the layer on and off. */
static void test_every_kind_same_state_and_events(void)
{
  for (int seed = 11; seed <= 13; seed++) {
    char on_dir[] = "/tmp/rn_wb_onXXXXXX", off_dir[] = "/tmp/rn_wb_offXXXXXX";
    CHECK(mkdtemp(on_dir) && mkdtemp(off_dir));
    uint64_t grew_on, grew_off;
    char *ev_on = run_with(on_dir, seed, 1, &grew_on, DECLARE_ALL, STEPS_ALL);
    char *ev_off = run_with(off_dir, seed, -1, &grew_off, DECLARE_ALL, STEPS_ALL);
    CHECK(strstr(ev_on, "jj UPDATE") && strstr(ev_on, "tp ") && strstr(ev_on, "d INSERT") && strstr(ev_on, "late ") &&
          strstr(ev_on, "lk UPDATE") && strstr(ev_on, "s UPDATE"));
    CHECK(strstr(ev_on, "ix ") && strstr(ev_on, "rows ") && strstr(ev_on, "get "));
    if (strcmp(ev_on, ev_off) != 0) first_difference(ev_on, ev_off);
    CHECK(strcmp(ev_on, ev_off) == 0);
    size_t lon, loff;
    char *d_on = dump(on_dir, &lon), *d_off = dump(off_dir, &loff);
    if (strcmp(d_on, d_off) != 0) first_difference(d_on, d_off);
    CHECK(strcmp(d_on, d_off) == 0);
    free(ev_on);
    free(ev_off);
    free(d_on);
    free(d_off);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", on_dir, off_dir);
    CHECK(system(cmd) == 0);
  }
}

int main(void)
{
  RUN(test_same_state_and_events);
  RUN(test_every_kind_same_state_and_events);
  return CHECK_REPORT();
}
