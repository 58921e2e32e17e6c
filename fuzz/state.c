/* state.c — the fuzzed pipeline (state.h). */
#include "state.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const fuzz_rel_names[FUZZ_NRELS] = { "t", "teams", "c", "kl", "ev", "d" };

/* Lua functions in a filter and a sink run on every change too. */
static const char SCRIPT[] =
  "local runnel = require 'runnel'\n"
  "local t = p:table('t', { {'id','int'}, {'f','float', null = true}, {'s','string', default = 'x'},\n"
  "  {'b','bool', null = true}, {'y','bytes', null = true}, {'l','list', null = true},\n"
  "  {'m','map', null = true}, {'a','any', null = true},\n"
  "  {'pos', { {'x','int'}, {'y','float', null = true}, {'in', { {'z','string', null = true} }, null = true} }, null = true},\n"
  "  {'team','int', null = true}, {'score','int', default = 0}, key = 'id' })\n"
  "local teams = p:table('teams', { {'tid','int'}, {'name','string'}, {'region','string', null = true}, key = 'tid' })\n"
  "local c = p:table('c', { {'k1','string'}, {'k2','int'}, {'k3','bool'}, {'k4','bytes'}, {'k5','float'},\n"
  "  {'v','any', null = true}, key = {'k1','k2','k3','k4','k5'} })\n"
  "local kl = p:table('kl', { {'a','int', null = true}, {'b','string', null = true}, {'l','list', null = true} })\n"
  "local ev = p:stream('ev', { {'player','int'}, {'ts','int'}, {'v','float', null = true} })\n"
  "local d = p:table('d', { {'id','string'}, {'n','int', default = 7}, {'m','map', null = true}, key = 'id' })\n"
  "local roster = t:join(teams, { on = 'team', kind = 'left' })\n"
  "local board = roster:select{ {'pid','id'}, 'score', {'tname','name'} }\n"
  "local per_team = t:aggregate{ by = 'team', n = runnel.count(), total = runnel.sum('score'),\n"
  "  best = runnel.max('score'), low = runnel.min('s'), mean = runnel.avg('f') }\n"
  "local per_min = ev:aggregate{ by = 'player', window = runnel.tumbling(60, 'ts'), grace = 10,\n"
  "  n = runnel.count(), total = runnel.sum('v') }\n"
  "local enriched = ev:join(t, { on = 'player', kind = 'left' })\n"
  "local high = t:filter(function(r) return r.score > 5 end)\n"
  "local log = t:cdc{ preimage = true, postimage = true }\n"
  "local deb = roster:cdc{ preimage = 'full', format = 'debezium' }\n"
  "local flink = kl:cdc{ format = 'flink' }\n"
  "local cdc_c = c:cdc{ postimage = true }\n"
  "local seen = 0\n"
  "for _, r in ipairs{ board, per_team, per_min, enriched, high, log, deb, flink, cdc_c } do\n"
  "  r:sink(function(verb, row, old, info) seen = seen + 1 end)\n"
  "end\n";

/* A C subscriber: every event must carry msgpack maps that decode whole. */
static int check_event(void *ctx, const rn_event *ev)
{
  (void)ctx;
  const void *maps[2] = { ev->row, ev->old };
  size_t lens[2] = { ev->row_len, ev->old_len };
  if (ev->verb < RN_VERB_INSERT || ev->verb > RN_VERB_DELETE) abort();
  for (int i = 0; i < 2; i++) {
    if (!maps[i]) continue;
    msgpack_zone z;
    msgpack_zone_init(&z, 1024);
    msgpack_object o;
    size_t off = 0;
    int rc = msgpack_unpack(maps[i], lens[i], &off, &z, &o);
    if (rc != MSGPACK_UNPACK_SUCCESS || off != lens[i] || o.type != MSGPACK_OBJECT_MAP) abort();
    msgpack_zone_destroy(&z);
  }
  return 0;
}

rn_pipeline *fuzz_state_open(void)
{
  rn_open_opts o = { .path = NULL, .nosync = 1, .carry_groups = 1 };
  rn_pipeline *p = NULL;
  char err[256];
  if (rn_pipeline_open(&o, &p, err, sizeof err)) { fprintf(stderr, "fuzz: open: %s\n", err); abort(); }
  if (rn_run_lua_string(p, NULL, SCRIPT, "=fuzz-state")) {
    fprintf(stderr, "fuzz: script: %s\n", rn_errmsg(p));
    abort();
  }
  static const char *const subscribed[] = { "t", "kl", "ev", "d", "c" };
  for (size_t i = 0; i < sizeof subscribed / sizeof *subscribed; i++)
    if (rn_subscribe(p, rn_relation(p, subscribed[i]), check_event, NULL)) abort();
  return p;
}

void fuzz_state_close(rn_pipeline *p)
{
  rn_pipeline_close(p);
}

void fuzz_check_failure(rn_pipeline *p, int rc, const char *what)
{
  if (rc > RN_EINVAL || rc < RN_EIO) {
    fprintf(stderr, "fuzz: %s returned %d, not an RN_E… code\n", what, rc);
    abort();
  }
  if (rc == RN_ESTORE || rc == RN_EIO) {
    /* A fresh temporary state always has room: its own rows must read back. */
    fprintf(stderr, "fuzz: %s failed in the store: %s\n", what, rn_errmsg(p));
    abort();
  }
  if (!rn_errmsg(p)[0]) {
    fprintf(stderr, "fuzz: %s failed with %s and an empty message\n", what, rn_strerror(rc));
    abort();
  }
}
