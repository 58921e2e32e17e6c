/* test_order.c — tops and indexes from C (runnel.h's rn_top_declare,
 * rn_index_declare) and runnel verify's checks of their state
 * (verify_order.c): a whole state is whole, a corrupted one is reported. */
#include <lmdb.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"
#include "verify.h"

static const rn_column_def player_cols[] = { { .name = "id", .type = "int" }, { .name = "guild", .type = "int" },
                                             { .name = "score", .type = "int" } };
static const char *const player_key[] = { "id" };
static const char *const by_guild[] = { "guild" };
static const rn_order_def score_desc[] = { { "score", 1 } };

static int put_player(rn_pipeline *p, rn_rel *t, rn_op op, int64_t id, int64_t guild, int64_t score)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  msgpack_pack_str_with_body(&pk, "guild", 5);
  msgpack_pack_int64(&pk, guild);
  msgpack_pack_str_with_body(&pk, "score", 5);
  msgpack_pack_int64(&pk, score);
  int rc = rn_push(p, t, op, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

typedef struct moves {
  int n, inserts, updates, deletes;
} moves;

static int count_move(void *ctx, const rn_event *ev)
{
  moves *m = ctx;
  m->n++;
  m->inserts += ev->verb == RN_VERB_INSERT;
  m->updates += ev->verb == RN_VERB_UPDATE;
  m->deletes += ev->verb == RN_VERB_DELETE;
  return 0;
}

/* players, a per-guild top 2 "board" and an index "by_score", declared from C. */
static rn_pipeline *open_board(const char *dir, rn_rel **players, rn_rel **board, rn_rel **idx)
{
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", player_cols, 3, player_key, 1, players) == 0);
  rn_top_def def = { .n = 2, .by = by_guild, .nby = 1, .order = score_desc, .norder = 1, .rank = "place" };
  CHECK(rn_top_declare(p, "board", *players, &def, board) == 0);
  CHECK(rn_index_declare(p, "by_score", *players, score_desc, 1, idx) == 0);
  return p;
}

/* Six players in two guilds; the board's changes are rank movements. */
static void make_state(const char *dir)
{
  rn_rel *players, *board, *idx;
  rn_pipeline *p = open_board(dir, &players, &board, &idx);
  moves m = { 0 };
  CHECK(rn_subscribe(p, board, count_move, &m) == 0);
  CHECK(rn_begin(p) == 0);
  for (int id = 1; id <= 6; id++) CHECK(put_player(p, players, RN_OP_INSERT, id, id % 2, id * 10) == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(m.inserts - m.deletes == 4); /* each guild's top 2 */
  m = (moves){ 0 };
  CHECK(put_player(p, players, RN_OP_UPDATE, 1, 1, 100) == 0); /* 1 rises to the top of guild 1: 3 leaves */
  CHECK(m.inserts == 1 && m.updates == 1 && m.deletes == 1);
  rn_pipeline_close(p);
}

static void test_declares_from_c(void)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  rn_open_opts opts = { .path = dir };
  rn_pipeline *p = NULL;
  rn_rel *players, *out = NULL;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "players", player_cols, 3, player_key, 1, &players) == 0);
  rn_top_def def = { .n = 0, .order = score_desc, .norder = 1 };
  CHECK(rn_top_declare(p, "t0", players, &def, &out) == RN_EINVAL && strstr(rn_errmsg(p), "n must be at least 1"));
  def.n = 1;
  CHECK(rn_top_declare(p, "t1", players, NULL, &out) == RN_EINVAL);
  CHECK(rn_top_declare(p, NULL, players, &def, &out) == RN_EINVAL);
  CHECK(rn_top_declare(p, "t1", NULL, &def, &out) == RN_EINVAL);
  CHECK(rn_top_declare(NULL, "t1", players, &def, &out) == RN_EINVAL);
  def.nby = 1; /* by NULL */
  CHECK(rn_top_declare(p, "t1", players, &def, &out) == RN_EINVAL && strstr(rn_errmsg(p), "by is NULL"));
  def.nby = 0;
  const rn_order_def nope[] = { { "nope", 0 } };
  CHECK(rn_index_declare(p, "i1", players, nope, 1, &out) == RN_EINVAL && strstr(rn_errmsg(p), "\"nope\""));
  CHECK(rn_index_declare(p, "i1", players, score_desc, 0, &out) == RN_EINVAL);
  CHECK(rn_index_declare(p, "i1", players, NULL, 1, &out) == RN_EINVAL);
  CHECK(rn_begin(p) == 0);
  CHECK(rn_top_declare(p, "t1", players, &def, &out) == RN_EMISUSE);
  CHECK(rn_rollback(p) == 0);
  def.rank = "place";
  CHECK(rn_top_declare(p, "board", players, &def, &out) == 0); /* another n: rebuilt */
  if (!out) fprintf(stderr, "%s\n", rn_errmsg(p));
  CHECK(rn_relation(p, "board") == out);
  rn_pipeline_close(p);
  char rm[64];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  CHECK(system(rm) == 0);
}

/* The text rn_verify writes about dir, and its result. */
static int verify_text(const char *dir, char *text, size_t len)
{
  FILE *out = fmemopen(text, len, "w");
  int rc = rn_verify(dir, out);
  fclose(out);
  return rc;
}

/* Calls change(txn, dbi, cursor on its first entry) on database db of dir. */
static void corrupt(const char *dir, const char *db, void (*change)(MDB_txn *, MDB_dbi, MDB_cursor *))
{
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  MDB_val k, v;
  CHECK(mdb_env_create(&env) == 0);
  mdb_env_set_maxdbs(env, 64);
  CHECK(mdb_env_open(env, dir, 0, 0644) == 0);
  CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
  CHECK(mdb_dbi_open(txn, db, 0, &dbi) == 0);
  CHECK(mdb_cursor_open(txn, dbi, &cur) == 0);
  CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST) == 0);
  change(txn, dbi, cur);
  mdb_cursor_close(cur);
  CHECK(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

static void rank_to_five(MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur)
{
  MDB_val k, v;
  CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT) == 0);
  char val[256];
  CHECK(v.mv_size <= sizeof val);
  memcpy(val, v.mv_data, v.mv_size);
  uint64_t five = 5;
  memcpy(val, &five, 8);
  MDB_val nv = { v.mv_size, val };
  CHECK(mdb_put(txn, dbi, &k, &nv, 0) == 0);
}

static void delete_first(MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur)
{
  (void)txn; (void)dbi;
  CHECK(mdb_cursor_del(cur, 0) == 0);
}

/* A copy of the first top row, unranked, into the rest: one id held twice. */
static void copy_to_rest(MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur)
{
  (void)dbi;
  MDB_val k, v;
  MDB_dbi rest;
  CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT) == 0);
  CHECK(mdb_dbi_open(txn, "tx:board", 0, &rest) == 0);
  MDB_val row = { v.mv_size - 8, (char *)v.mv_data + 8 };
  CHECK(mdb_put(txn, rest, &k, &row, 0) == 0);
}

/* An index entry's row changed under it: its key is no longer its row's. */
static void change_row(MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur)
{
  MDB_val k, v;
  CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT) == 0);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_int(&pk, 1);
  msgpack_pack_int(&pk, 1);
  msgpack_pack_int(&pk, 7); /* the key says 100 */
  MDB_val nv = { sb.size, sb.data };
  CHECK(mdb_put(txn, dbi, &k, &nv, 0) == 0);
  msgpack_sbuffer_destroy(&sb);
}

static void check_finds(void (*change)(MDB_txn *, MDB_dbi, MDB_cursor *), const char *db, const char *want)
{
  char dir[] = "/tmp/runnel-ctest-XXXXXX", text[4096];
  CHECK(mkdtemp(dir) != NULL);
  make_state(dir);
  CHECK(verify_text(dir, text, sizeof text) == 0);
  CHECK(strstr(text, "whole (0 damaged") != NULL);
  corrupt(dir, db, change);
  CHECK(verify_text(dir, text, sizeof text) >= 1);
  CHECK(strstr(text, want) != NULL);
  if (!strstr(text, want)) fprintf(stderr, "verify said:\n%swanted: %s\n", text, want);
  char rm[64];
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  CHECK(system(rm) == 0);
}

static void test_verify_checks_tops_and_indexes(void)
{
  check_finds(rank_to_five, "tt:board", "damaged: top \"board\": row id 6 has rank 5 where 1 was due (n = 2)\n");
  check_finds(delete_first, "tt:board", "damaged: order \"board\": 3 rows held, 4 counted\n");
  check_finds(delete_first, "tt:board", "damaged: top \"board\": row id 4 has rank 2 where 1 was due");
  check_finds(copy_to_rest, "tt:board", "damaged: order \"board\": row id 6 is held twice\n");
  check_finds(copy_to_rest, "tt:board", "damaged: top \"board\": row id 6 is out of the top while it sorts before a row of the top\n");
  check_finds(delete_first, "ix:by_score", "damaged: order \"by_score\": 5 rows held, 6 counted\n");
  check_finds(delete_first, "tx:board", "damaged: order \"board\": row id 2 of players is not held\n");
  check_finds(delete_first, "ix:by_score", "damaged: order \"by_score\": row id 1 of players is not held\n");
  check_finds(change_row, "ix:by_score", "damaged: order \"by_score\": row id 1 of \"ix:\" is not at the key its row gives\n");
}

int main(void)
{
  RUN(test_declares_from_c);
  RUN(test_verify_checks_tops_and_indexes);
  return CHECK_REPORT();
}
