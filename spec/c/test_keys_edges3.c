/* test_keys_edges3.c — keys and row hashes across formats (upgrade.c):
 * a keyed map's keys longer than an LMDB key under longkey.h's form (hash
 * neighbours take the next probe, keys change, reopen, a format-0 state's
 * entries moved at open); rows of keyless tables and distincts that a
 * state of format 0 hashed as their bytes (-0.0, a NaN of other bits) are
 * found by a delete after the state is opened (UPGRADE-1). Format-0 states
 * are made from new ones with LMDB alone, as runnel 0.17 left them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "derive.h"
#include "distinct.h"
#include "key.h"
#include "longkey.h"
#include "pipeline.h"
#include "row.h"

static void remove_state(const char *dir)
{
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

static void make_dir(char *dir, size_t size)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, size, "%s/keys3-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  CHECK(mkdtemp(dir) != NULL);
}

static rn_pipeline *open_at(const char *dir)
{
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p = NULL;
  char err[256] = "";
  int rc = rn_pipeline_open(&opts, &p, err, sizeof err);
  if (rc) fprintf(stderr, "open: %s\n", err);
  CHECK(rc == 0);
  return p;
}

/* An environment of dir opened with LMDB alone. */
static MDB_env *raw_env(const char *dir)
{
  MDB_env *env;
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  return env;
}

/* Forgets the state's format, as a state runnel 0.17 wrote records none. */
static void forget_format(MDB_txn *txn)
{
  MDB_dbi meta;
  CHECK(mdb_dbi_open(txn, RN_DB_META, 0, &meta) == 0);
  MDB_val k = { RN_PREFIX_LEN(RN_META_FORMAT), (void *)RN_META_FORMAT };
  CHECK(mdb_del(txn, meta, &k, NULL) == 0);
}

/* ---- a keyed map's long keys ---- */

static char text[4][700]; /* long keys sharing their first 699 bytes */

/* "u": id int key, k string; "by_k": a select of it keyed by k. */
static void declare_keyed(rn_pipeline *p, rn_rel **u, rn_rel **by_k)
{
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "id", 2, RN_T_INT, false, NULL, &p->err);
  rn_schema_add(s, "k", 1, RN_T_STRING, false, NULL, &p->err);
  int key = 0;
  rn_schema_set_key(s, &key, 1, "u", &p->err);
  CHECK(rn_declare_source(p, "u", RN_REL_TABLE, s, u) == 0);
  int slots[2] = { 1, 0 }, mkey = 0;
  const char *names[2] = { "k", "id" };
  CHECK(rn_declare_select(p, "by_k", *u, slots, names, 2, &mkey, 1, by_k) == 0);
}

static msgpack_object vals[2];
static uint8_t given[2] = { 1, 1 };

static int put(rn_rel *u, int64_t id, int which, bool update)
{
  vals[0] = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)id };
  vals[1] = (msgpack_object){ .type = MSGPACK_OBJECT_STR, .via.str = { sizeof text[which], text[which] } };
  return update ? rn_table_update(u, vals, given) : rn_table_insert(u, vals, given);
}

/* The encoded key of by_k's row of text[which]. */
static void key_of(rn_rel *by_k, int which, msgpack_sbuffer *out)
{
  msgpack_object kv[2] = { { .type = MSGPACK_OBJECT_STR, .via.str = { sizeof text[which], text[which] } },
                           { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 } };
  msgpack_sbuffer_clear(out);
  CHECK(rn_key_encode(by_k->schema, kv, out) == 0);
}

/* Counts by_k's "mk:" entries by key length: *hashed of RN_LONGKEY_STORED
 * bytes, *format0 of 488 (format 0's hashed form). */
static void count_entries(MDB_txn *txn, int *hashed, int *format0)
{
  MDB_dbi dbi;
  MDB_cursor *cur;
  CHECK(mdb_dbi_open(txn, RN_DB_MAP_KEYS "by_k", 0, &dbi) == 0);
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  *hashed = *format0 = 0;
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size == RN_LONGKEY_STORED) ++*hashed;
    if (k.mv_size == RN_LONGKEY_INLINE + 8) ++*format0;
  }
  mdb_cursor_close(cur);
}

/* A state of format 0: every hashed entry loses its probe byte. */
static void to_format0_keys(const char *dir)
{
  MDB_env *env = raw_env(dir);
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, RN_DB_MAP_KEYS "by_k", 0, &dbi) == 0);
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  char keys[8][RN_LONGKEY_STORED], *values[8];
  size_t lens[8], n = 0;
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && n < 8; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != RN_LONGKEY_STORED) continue;
    memcpy(keys[n], k.mv_data, RN_LONGKEY_STORED);
    values[n] = malloc(v.mv_size);
    memcpy(values[n], v.mv_data, v.mv_size);
    lens[n++] = v.mv_size;
  }
  mdb_cursor_close(cur);
  for (size_t i = 0; i < n; i++) {
    MDB_val old = { RN_LONGKEY_STORED, keys[i] }, k0 = { RN_LONGKEY_STORED - 1, keys[i] }, v0 = { lens[i], values[i] };
    CHECK(mdb_del(txn, dbi, &old, NULL) == 0);
    CHECK(mdb_put(txn, dbi, &k0, &v0, 0) == 0);
    free(values[i]);
  }
  forget_format(txn);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

static void test_map_long_keys(void)
{
  char dir[256];
  make_dir(dir, sizeof dir);
  for (int i = 0; i < 4; i++) {
    memset(text[i], 'x', sizeof text[i]);
    text[i][sizeof text[i] - 1] = (char)('0' + i);
  }
  rn_pipeline *p = open_at(dir);
  rn_rel *u, *by_k;
  declare_keyed(p, &u, &by_k);
  CHECK(put(u, 1, 0, false) == 0);
  CHECK(put(u, 2, 1, false) == 0);          /* the same first 699 bytes: another key */
  CHECK(put(u, 3, 0, false) == RN_EEXIST);  /* MAPKEY-1 */
  int hashed, format0;
  MDB_txn *txn;
  CHECK(mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &txn) == 0);
  count_entries(txn, &hashed, &format0);
  mdb_txn_abort(txn);
  CHECK(hashed == 2 && format0 == 0);        /* longkey.h's form, as tables' */

  /* a hash neighbour of text[2] (the same stored form, another whole key)
   * holds probe 0: text[2] takes probe 1 and is told apart (LONGKEY-2) */
  msgpack_sbuffer key, other;
  msgpack_sbuffer_init(&key);
  msgpack_sbuffer_init(&other);
  key_of(by_k, 2, &key);
  key_of(by_k, 3, &other);
  char form[RN_LONGKEY_STORED], nv[8 + 1024];
  rn_longkey_form(key.data, key.size, form);
  rn_be64_put(nv, 99);
  CHECK(other.size <= 1024);
  memcpy(nv + 8, other.data, other.size);
  MDB_dbi dbi;
  CHECK(mdb_txn_begin(p->store.env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, RN_DB_MAP_KEYS "by_k", 0, &dbi) == 0);
  MDB_val fk = { sizeof form, form }, fv = { 8 + other.size, nv };
  CHECK(mdb_put(txn, dbi, &fk, &fv, 0) == 0);
  CHECK(mdb_txn_commit(txn) == 0);
  CHECK(put(u, 4, 2, false) == 0);
  CHECK(put(u, 5, 2, false) == RN_EEXIST);  /* found past the neighbour */
  CHECK(mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &txn) == 0);
  form[RN_LONGKEY_STORED - 1] = 1;
  MDB_val got;
  CHECK(mdb_get(txn, dbi, &fk, &got) == 0 && got.mv_size == 8 + key.size && rn_be64_get(got.mv_data) != 99);
  mdb_txn_abort(txn);
  CHECK(mdb_txn_begin(p->store.env, NULL, 0, &txn) == 0); /* the neighbour goes again */
  form[RN_LONGKEY_STORED - 1] = 0;
  CHECK(mdb_del(txn, dbi, &fk, NULL) == 0);
  CHECK(mdb_txn_commit(txn) == 0);

  /* a key changes: the old one is free, the new one held */
  CHECK(put(u, 1, 3, true) == 0);
  CHECK(put(u, 6, 0, false) == 0);
  CHECK(put(u, 7, 3, false) == RN_EEXIST);
  CHECK(put(u, 4, 2, true) == 0);           /* no change of key: nothing */
  rn_pipeline_close(p);

  /* reopened, every long key is held still */
  p = open_at(dir);
  declare_keyed(p, &u, &by_k);
  for (int i = 0; i < 4; i++) CHECK(put(u, 10 + i, i, false) == RN_EEXIST);
  rn_pipeline_close(p);

  /* a state of format 0: its entries are moved at open, and held still */
  to_format0_keys(dir);
  p = open_at(dir);
  declare_keyed(p, &u, &by_k);
  CHECK(mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &txn) == 0);
  count_entries(txn, &hashed, &format0);
  mdb_txn_abort(txn);
  CHECK(hashed == 4 && format0 == 0);
  for (int i = 0; i < 4; i++) CHECK(put(u, 10 + i, i, false) == RN_EEXIST);
  vals[0] = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 2 };
  CHECK(rn_table_delete(u, vals, given) == 0); /* frees text[1] */
  CHECK(put(u, 11, 1, false) == 0);
  rn_pipeline_close(p);
  msgpack_sbuffer_destroy(&key);
  msgpack_sbuffer_destroy(&other);
  remove_state(dir);
}

/* ---- rows hashed as their bytes by format 0 ---- */

static const uint64_t other_nan = 0xfff8000000000000ULL; /* -(0/0) on x86: a NaN rows kept before 0.17 */

/* "t": keyless, n int, x float; "dt": its distinct. */
static void declare_keyless(rn_pipeline *p, rn_rel **t, rn_rel **dt)
{
  rn_schema *s = rn_schema_new();
  rn_schema_add(s, "n", 1, RN_T_INT, false, NULL, &p->err);
  rn_schema_add(s, "x", 1, RN_T_FLOAT, false, NULL, &p->err);
  CHECK(rn_declare_source(p, "t", RN_REL_TABLE, s, t) == 0);
  CHECK(rn_declare_distinct(p, "dt", *t, dt) == 0);
}

static int row_op(rn_rel *t, int64_t n, double x, bool del)
{
  msgpack_object v[2] = { { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t)n },
                          { .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = x } };
  uint8_t g[2] = { 1, 1 };
  return del ? rn_table_delete(t, v, g) : rn_table_insert(t, v, g);
}

/* Rewrites rows db (|id BE| -> |skip|row|) as format 0 left them: a
 * canonical NaN as other_nan's bits, a distinct's (skip 8) 0.0 as the -0.0
 * its first copy gave (a distinct holds 0.0 now), and the hashes
 * in hashes db as the rows' bytes'. */
static void to_format0_rows(MDB_txn *txn, const char *rows, const char *hashes, size_t skip)
{
  MDB_dbi rdbi, hdbi;
  CHECK(mdb_dbi_open(txn, rows, 0, &rdbi) == 0);
  CHECK(mdb_dbi_open(txn, hashes, MDB_DUPSORT | MDB_DUPFIXED, &hdbi) == 0);
  CHECK(mdb_drop(txn, hdbi, 0) == 0);
  MDB_cursor *cur;
  CHECK(mdb_cursor_open(txn, rdbi, &cur) == 0);
  MDB_val k, v;
  int changed = 0;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    char row[64], id[8];
    CHECK(v.mv_size <= sizeof row);
    memcpy(row, v.mv_data, v.mv_size);
    memcpy(id, k.mv_data, 8);
    for (size_t i = skip; i + 9 <= v.mv_size; i++)
      if ((unsigned char)row[i] == 0xcb && memcmp(row + i + 1, "\x7f\xf8\0\0\0\0\0\0", 8) == 0) {
        rn_be64_put(row + i + 1, other_nan);
        MDB_val nv = { v.mv_size, row };
        CHECK(mdb_cursor_put(cur, &k, &nv, MDB_CURRENT) == 0);
      } else if (skip == 8 && (unsigned char)row[i] == 0xcb && memcmp(row + i + 1, "\0\0\0\0\0\0\0\0", 8) == 0) {
        row[i + 1] = (char)0x80;
        MDB_val nv = { v.mv_size, row };
        CHECK(mdb_cursor_put(cur, &k, &nv, MDB_CURRENT) == 0);
      }
    uint64_t h = rn_hash64(row + skip, v.mv_size - skip);
    changed += h != rn_row_hash(row + skip, v.mv_size - skip);
    MDB_val hk = { 8, &h }, hv = { 8, id };
    CHECK(mdb_put(txn, hdbi, &hk, &hv, 0) == 0);
  }
  mdb_cursor_close(cur);
  CHECK(changed == 2); /* -0.0's and the NaN's rows hash otherwise now */
}

static void test_rows_hashed_by_format0(void)
{
  char dir[256];
  make_dir(dir, sizeof dir);
  rn_pipeline *p = open_at(dir);
  rn_rel *t, *dt;
  declare_keyless(p, &t, &dt);
  CHECK(row_op(t, 1, -0.0, false) == 0);
  CHECK(row_op(t, 2, NAN, false) == 0);
  CHECK(row_op(t, 3, 1.5, false) == 0);
  rn_pipeline_close(p);
  MDB_env *env = raw_env(dir);
  MDB_txn *txn;
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  to_format0_rows(txn, RN_DB_ROWS "t", RN_DB_ROW_HASHES "t", 0);
  to_format0_rows(txn, RN_DB_DISTINCT_ROWS "dt", RN_DB_DISTINCT_HASHES "dt", 8);
  forget_format(txn);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);

  p = open_at(dir);
  declare_keyless(p, &t, &dt);
  CHECK(dt->count == 3);
  CHECK(row_op(t, 1, 0.0, true) == 0);   /* -0.0's row, given as 0.0 */
  CHECK(row_op(t, 2, NAN, true) == 0);   /* the row of the other NaN */
  CHECK(row_op(t, 2, NAN, true) == RN_ENOTFOUND);
  CHECK(t->count == 1);
  CHECK(dt->count == 1);                 /* the distinct found its copies too */
  rn_pipeline_close(p);
  p = open_at(dir);                      /* (2): once upgraded, as it is */
  declare_keyless(p, &t, &dt);
  CHECK(row_op(t, 3, 1.5, true) == 0);
  CHECK(t->count == 0 && dt->count == 0);
  rn_pipeline_close(p);
  remove_state(dir);
}

/* ---- the format itself ---- */

static void test_newer_format_refused(void)
{
  char dir[256];
  make_dir(dir, sizeof dir);
  rn_pipeline_close(open_at(dir));
  MDB_env *env = raw_env(dir);
  MDB_txn *txn;
  MDB_dbi meta;
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, RN_DB_META, 0, &meta) == 0);
  MDB_val k = { RN_PREFIX_LEN(RN_META_FORMAT), (void *)RN_META_FORMAT }, v;
  CHECK(mdb_get(txn, meta, &k, &v) == 0 && v.mv_size == 4); /* a new state records its format */
  uint32_t newer = RN_STATE_FORMAT + 1;
  v = (MDB_val){ 4, &newer };
  CHECK(mdb_put(txn, meta, &k, &v, 0) == 0);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p = NULL;
  char err[512] = "";
  CHECK(rn_pipeline_open(&opts, &p, err, sizeof err) == RN_ESCHEMA);
  CHECK(strstr(err, "written by a newer runnel") != NULL);
  CHECK(p == NULL);
  remove_state(dir);
}

int main(void)
{
  RUN(test_map_long_keys);
  RUN(test_rows_hashed_by_format0);
  RUN(test_newer_format_refused);
  return CHECK_REPORT();
}
