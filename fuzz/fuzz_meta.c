/* fuzz_meta.c — opening a state whose catalogue ("meta", store.h) was
 * given arbitrary bytes: a damaged state must be refused or read with an
 * RN_E… code and a message, never crash.
 *
 * A pristine state is made once per process (tables, a stream, a join,
 * aggregates, a top, a Lua filter with a durable sink, a few groups) and
 * copied for each input. The input is a list of edits of its meta
 * records, applied in one LMDB transaction, each |k|m|…|: k % the number
 * of meta records picks one (in key order: RUNNEL_FUZZ_TRACE=1 lists
 * them), and m says what becomes of it:
 *
 *     m < 0x80    replaced by the m bytes that follow
 *     0xff        deleted
 *     0xfe, n     truncated to n % (its length + 1) bytes
 *     else, x     its byte at (m & 0x7f) % its length xor x
 *
 * Then rn_inspect reads the state,
 * and rn_pipeline_open, the declarations, a group of changes and cursors
 * over the relations run on it, each failing cleanly or working. */
#include <fcntl.h>
#include <ftw.h>
#include <lmdb.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "must.h"
#include "runnel.h"
#include "store.h"

static const char SCRIPT[] =
  "local runnel = require 'runnel'\n"
  "local t = p:table('t', { {'id','int'}, {'team','int', null = true}, {'score','int', default = 0},\n"
  "  {'s','string', null = true}, key = 'id' })\n"
  "local teams = p:table('teams', { {'tid','int'}, {'name','string'}, key = 'tid' })\n"
  "local kl = p:table('kl', { {'a','int', null = true}, {'b','string', null = true} })\n"
  "local ev = p:stream('ev', { {'player','int'}, {'ts','int'} })\n"
  "t:join(teams, { on = 'team', kind = 'left', name = 'roster' })\n"
  "t:aggregate{ by = 'team', name = 'per_team', n = runnel.count(), total = runnel.sum('score') }\n"
  "ev:aggregate{ by = 'player', window = runnel.tumbling(60, 'ts'), name = 'per_min', n = runnel.count() }\n"
  "t:top{ n = 2, by = 'team', order = { {'score', 'desc'} }, name = 'best' }\n"
  "kl:distinct('kd')\n"
  "local limit = 5\n"
  "t:filter(function(r) return r.score > limit end, 'high')\n"
  "  :sink(function() end, { durable = true, name = 'd' })\n";

static const char *const read_names[] = { "t", "teams", "kl", "roster", "per_team", "per_min", "best", "kd" };
#define NREAD 8

static char base[64];
static char pristine[96], state[96];
static char **keys;     /* the pristine state's meta keys, in order */
static size_t *key_lens;
static size_t nkeys;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static void remove_base(void)
{
  nftw(base, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* {"id": id, "team": id % 3, "score": id} into t, or {"player": id, "ts": id * 20} into ev. */
static void push_row(rn_pipeline *p, const char *rel, int64_t id)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  bool stream = strcmp(rel, "ev") == 0;
  msgpack_pack_map(&pk, stream ? 2 : 3);
  msgpack_pack_str_with_body(&pk, stream ? "player" : "id", stream ? 6 : 2);
  msgpack_pack_int64(&pk, id);
  msgpack_pack_str_with_body(&pk, stream ? "ts" : "team", stream ? 2 : 4);
  msgpack_pack_int64(&pk, stream ? id * 20 : id % 3);
  if (!stream) {
    msgpack_pack_str_with_body(&pk, "score", 5);
    msgpack_pack_int64(&pk, id);
  }
  int rc = rn_push(p, rn_relation(p, rel), stream ? RN_OP_INSERT : RN_OP_UPSERT, b.data, b.size);
  msgpack_sbuffer_destroy(&b);
  if (rc) { fprintf(stderr, "fuzz: pristine push: %s\n", rn_errmsg(p)); abort(); }
}

static int ignore_event(void *ctx, const rn_event *ev)
{
  (void)ctx;
  (void)ev;
  return 0;
}

static void make_pristine(void)
{
  snprintf(base, sizeof base, "%s/runnel-fuzz-meta-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  MUST(mkdtemp(base));
  atexit(remove_base);
  snprintf(pristine, sizeof pristine, "%s/pristine", base);
  snprintf(state, sizeof state, "%s/st", base);
  rn_open_opts o = { .path = pristine, .nosync = 1 };
  rn_pipeline *p;
  char err[256];
  if (rn_pipeline_open(&o, &p, err, sizeof err)) { fprintf(stderr, "fuzz: open: %s\n", err); abort(); }
  if (rn_run_lua_string(p, NULL, SCRIPT, "=fuzz-meta")) { fprintf(stderr, "fuzz: %s\n", rn_errmsg(p)); abort(); }
  MUST(rn_subscribe_durable(p, rn_relation(p, "t"), "c-durable", ignore_event, NULL) == 0);
  for (int g = 0; g < 3; g++) {
    MUST(rn_begin(p) == 0);
    for (int i = 0; i < 4; i++) {
      push_row(p, "t", g * 4 + i);
      push_row(p, "ev", g * 4 + i);
    }
    MUST(rn_commit(p) == 0);
  }
  MUST(rn_pipeline_close(p) == 0);

  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  MUST(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 256);
  MUST(mdb_env_open(env, pristine, MDB_RDONLY, 0644) == 0);
  MUST(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0);
  MUST(mdb_dbi_open(txn, RN_DB_META, 0, &dbi) == 0);
  MUST(mdb_cursor_open(txn, dbi, &cur) == 0);
  MDB_val k, v;
  for (int op = MDB_FIRST; mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
    keys = realloc(keys, (nkeys + 1) * sizeof *keys);
    key_lens = realloc(key_lens, (nkeys + 1) * sizeof *key_lens);
    MUST(keys && key_lens && (keys[nkeys] = malloc(k.mv_size)));
    memcpy(keys[nkeys], k.mv_data, k.mv_size);
    key_lens[nkeys++] = k.mv_size;
  }
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  MUST(nkeys > 0);
  if (getenv("RUNNEL_FUZZ_TRACE")) /* the records an input's k picks */
    for (size_t i = 0; i < nkeys; i++) fprintf(stderr, "%zu %.*s\n", i, (int)key_lens[i], keys[i]);
}

static void copy_file(const char *from, const char *to)
{
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  MUST(in && out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) MUST(fwrite(buf, 1, n, out) == n);
  fclose(in);
  MUST(fclose(out) == 0);
}

/* The pristine state copied to state, its meta records edited as data says. */
static void damaged_copy(const uint8_t *data, size_t size)
{
  char from[128], to[128];
  nftw(state, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  MUST(mkdir(state, 0700) == 0);
  snprintf(from, sizeof from, "%s/data.mdb", pristine);
  snprintf(to, sizeof to, "%s/data.mdb", state);
  copy_file(from, to);
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MUST(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 256);
  MUST(mdb_env_open(env, state, MDB_NOSYNC, 0644) == 0);
  MUST(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  MUST(mdb_dbi_open(txn, RN_DB_META, 0, &dbi) == 0);
  for (size_t at = 0; at < size;) {
    uint8_t k = data[at++], m = at < size ? data[at++] : 0xff;
    MDB_val key = { key_lens[k % nkeys], keys[k % nkeys] }, v;
    /* "fc:" and "fo:" hold Lua bytecode, which Lua does not verify: a
     * damaged copy crashed the VM (input 19 81 01 17 b1 fe, in
     * fuzz/regressions/meta) until the copies carried a CRC-64
     * (core/evolve_code.c); they are fuzzed like every other record. */
    if (m == 0xff) { /* deleted */
      mdb_del(txn, dbi, &key, NULL);
      continue;
    }
    if (m >= 0x80) { /* the value now, truncated or one byte changed */
      uint8_t arg = at < size ? data[at++] : 0;
      if (mdb_get(txn, dbi, &key, &v)) continue;
      char value[1024];
      size_t len = v.mv_size < sizeof value ? v.mv_size : sizeof value;
      memcpy(value, v.mv_data, len);
      if (m == 0xfe) len = len ? arg % (len + 1) : 0;
      else if (len) value[(m & 0x7f) % len] ^= (char)arg;
      v = (MDB_val){ len, value };
      MUST(mdb_put(txn, dbi, &key, &v, 0) == 0);
      continue;
    }
    size_t len = m; /* replaced by the next m bytes */
    if (len > size - at) len = size - at;
    v = (MDB_val){ len, (void *)(data + at) };
    MUST(mdb_put(txn, dbi, &key, &v, 0) == 0);
    at += len;
  }
  MUST(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
  snprintf(to, sizeof to, "%s/lock.mdb", state);
  remove(to);
}

static void failed(rn_pipeline *p, int rc, const char *what)
{
  if (getenv("RUNNEL_FUZZ_TRACE")) fprintf(stderr, "%s: %s\n", what, p ? rn_errmsg(p) : rn_strerror(rc));
  if (rc > RN_EINVAL || rc < RN_EIO) {
    fprintf(stderr, "fuzz: %s returned %d, not an RN_E… code\n", what, rc);
    abort();
  }
  if (p && !rn_errmsg(p)[0]) {
    fprintf(stderr, "fuzz: %s failed with %s and an empty message\n", what, rn_strerror(rc));
    abort();
  }
}

static int count_relation(void *ctx, const rn_inspect_relation *rel)
{
  MUST(rel->name && rel->kind && rel->columns);
  (*(int *)ctx)++;
  return 0;
}

static void note(void *ctx, const char *line)
{
  (void)ctx;
  MUST(line);
}

#define MAXROWS 4096
static uint64_t ids[MAXROWS];

static int by_value(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!base[0]) make_pristine();
  damaged_copy(data, size);
  char err[256] = "";
  rn_inspect_state st;
  int seen = 0;
  int rc = rn_inspect(state, count_relation, &seen, &st, err, sizeof err);
  if (rc) {
    failed(NULL, rc, "rn_inspect");
    MUST(err[0]);
  }
  rn_open_opts o = { .path = state, .nosync = 1, .notes = note };
  rn_pipeline *p = NULL;
  err[0] = 0;
  rc = rn_pipeline_open(&o, &p, err, sizeof err);
  if (rc) {
    failed(NULL, rc, "rn_pipeline_open");
    MUST(err[0]);
    return 0;
  }
  rc = rn_run_lua_string(p, NULL, SCRIPT, "=fuzz-meta");
  if (rc) failed(p, rc, "the declarations");
  else {
    rc = rn_subscribe_durable(p, rn_relation(p, "t"), "c-durable", ignore_event, NULL);
    if (rc) failed(p, rc, "rn_subscribe_durable");
    rc = rn_begin(p);
    if (rc) failed(p, rc, "rn_begin");
    else {
      msgpack_sbuffer b;
      msgpack_sbuffer_init(&b);
      msgpack_packer pk;
      msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
      for (int i = 0; i < 3 && rc == 0; i++) {
        msgpack_sbuffer_clear(&b);
        msgpack_pack_map(&pk, 3);
        msgpack_pack_str_with_body(&pk, "id", 2);
        msgpack_pack_int64(&pk, 100 + i);
        msgpack_pack_str_with_body(&pk, "team", 4);
        msgpack_pack_int64(&pk, i);
        msgpack_pack_str_with_body(&pk, "score", 5);
        msgpack_pack_int64(&pk, 7 * i);
        rc = rn_push(p, rn_relation(p, "t"), i ? RN_OP_UPSERT : RN_OP_INSERT, b.data, b.size);
        if (rc) failed(p, rc, "rn_push");
      }
      msgpack_sbuffer_destroy(&b);
      if (!rc) {
        rc = rn_commit(p);
        if (rc) failed(p, rc, "rn_commit");
      }
    }
    for (int i = 0; i < NREAD; i++) {
      rn_cursor *c = NULL;
      rc = rn_cursor_open(p, rn_relation(p, read_names[i]), &c);
      if (rc) { failed(p, rc, "rn_cursor_open"); continue; }
      size_t nids = 0;
      for (int n = 0; n < MAXROWS; n++) {
        const void *row;
        size_t len;
        uint64_t id;
        int done = 0;
        rc = rn_cursor_next(c, &row, &len, &id, &done);
        if (rc) { failed(p, rc, "rn_cursor_next"); break; }
        if (done) break;
        ids[nids++] = id;
      }
      rn_cursor_close(c);
      /* Whatever the damage, a relation never shows two rows under one id. */
      qsort(ids, nids, sizeof *ids, by_value);
      for (size_t k = 1; k < nids; k++)
        if (ids[k] == ids[k - 1]) {
          fprintf(stderr, "fuzz: %s has two rows with id %llu\n", read_names[i], (unsigned long long)ids[k]);
          abort();
        }
    }
    rc = rn_flush(p);
    if (rc) failed(p, rc, "rn_flush");
  }
  err[0] = 0;
  rc = rn_pipeline_close_report(p, err, sizeof err);
  if (rc) {
    failed(NULL, rc, "rn_pipeline_close_report");
    MUST(err[0]);
  }
  return 0;
}
