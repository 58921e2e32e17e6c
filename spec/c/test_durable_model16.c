/* test_durable_model16.c — a host's tick loop against a model: groups of
 * inserts, upserts and deletes, some failed by an in-group subscriber (it
 * is told of each rollback, with the group's seq, once), some rolled back
 * by the host; a durable subscriber that refuses changes at random, so
 * that its deliveries stop mid-group and resume; rn_flush, rn_deliver,
 * closes and reopens between groups; a durability hook. With sync, with
 * nosync (carried groups), with the write-back layer, with small carry
 * bounds. The durable subscriber gets every change of every committed
 * group exactly once, in order, with its (seq, n), and nothing of a group
 * that rolled back; the hook's seq only grows, never passes rn_seq, and
 * reaches it at every flush; after a reopen the table holds what the
 * committed groups imply. Uses runnel.h only. */
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "n", .type = "int" } };
static const char *const key[] = { "id" };

#define NID 12
#define MAXEV 4096

typedef struct change {
  uint64_t seq, n;
  int verb;
  int64_t id, val;
} change;

typedef struct world {
  rn_open_opts opts;
  rn_pipeline *p;
  rn_rel *t;
  int64_t val[NID];       /* the committed table */
  bool present[NID];
  change want[MAXEV];     /* the committed groups' changes, in order */
  int nwant;
  change got[MAXEV];      /* what the durable subscriber took */
  int ngot;
  int refuse_pct;         /* the durable subscriber refuses this share of changes */
  int fail_in;            /* the in-group subscriber fails its fail_in-th change (0: none) */
  uint64_t rolled[1024];  /* the seqs the in-group subscriber was told rolled back */
  int nrolled;
  uint64_t hook_seq;      /* the last seq the durability hook was told */
  int hook_wrong;
} world;

static int64_t field_int(const void *map, size_t len, const char *col)
{
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  int64_t v = -1;
  if (msgpack_unpack_next(&u, map, len, NULL) == MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < u.data.via.map.size; i++) {
      const msgpack_object *k = &u.data.via.map.ptr[i].key;
      if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(col) &&
          memcmp(k->via.str.ptr, col, k->via.str.size) == 0)
        v = u.data.via.map.ptr[i].val.via.i64;
    }
  msgpack_unpacked_destroy(&u);
  return v;
}

static int durable(void *ctx, const rn_event *ev)
{
  world *w = ctx;
  if ((int)check_random(100) < w->refuse_pct) return 5;
  const void *m = ev->row ? ev->row : ev->old;
  size_t len = ev->row ? ev->row_len : ev->old_len;
  if (w->ngot < MAXEV) w->got[w->ngot++] = (change){ ev->seq, ev->n, ev->verb, field_int(m, len, "id"), field_int(m, len, "n") };
  return 0;
}

static int in_group(void *ctx, const rn_event *ev)
{
  (void)ev;
  world *w = ctx;
  return w->fail_in > 0 && --w->fail_in == 0;
}

static void rolled_back(void *ctx, uint64_t seq)
{
  world *w = ctx;
  if (w->nrolled < 1024) w->rolled[w->nrolled++] = seq;
}

static void hook(void *ctx, uint64_t seq)
{
  world *w = ctx;
  if (seq <= w->hook_seq || seq > rn_seq(w->p)) w->hook_wrong++;
  w->hook_seq = seq;
}

static void world_open(world *w)
{
  CHECK(rn_pipeline_open(&w->opts, &w->p, NULL, 0) == 0);
  CHECK(rn_declare_table(w->p, "t", cols, 2, key, 1, &w->t) == 0);
  CHECK(rn_subscribe_durable(w->p, w->t, "audit", durable, w) == 0 || rn_errmsg(w->p)[0]); /* may refuse at once */
  CHECK(rn_subscribe_rollback(w->p, w->t, in_group, rolled_back, w) == 0);
  CHECK(rn_on_durable(w->p, hook, w) == 0);
}

static int push(world *w, rn_op op, int64_t id, int64_t n)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, op == RN_OP_DELETE ? 1 : 2);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  if (op != RN_OP_DELETE) {
    msgpack_pack_str_with_body(&pk, "n", 1);
    msgpack_pack_int64(&pk, n);
  }
  int rc = rn_push(w->p, w->t, op, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* One group: k changes, perhaps failed by the in-group subscriber or rolled
 * back by the host; the model takes it when rn_seq says it committed. */
static void one_group(world *w)
{
  int64_t val[NID];
  bool present[NID];
  memcpy(val, w->val, sizeof val);
  memcpy(present, w->present, sizeof present);
  change pending[16];
  int np = 0;
  uint64_t seq = rn_seq(w->p) + 1;
  bool grouped = check_random(4) != 0;
  int k = grouped ? 1 + (int)check_random(6) : 1;
  w->fail_in = check_random(6) == 0 ? 1 + (int)check_random((uint64_t)k) : 0;
  bool armed = w->fail_in > 0;
  int told = w->nrolled; /* before the changes: one made outside a group commits (or fails) in its push */
  if (grouped) CHECK(rn_begin(w->p) == 0);
  for (int i = 0; i < k; i++) {
    int64_t id = (int64_t)check_random(NID), n = (int64_t)check_random(1000);
    rn_op op = present[id] ? (check_random(3) ? RN_OP_UPSERT : RN_OP_DELETE) : RN_OP_INSERT;
    int rc = push(w, op, id, n);
    if (!grouped && rc) CHECK(rc == RN_ECALLBACK); /* its own group, failed at its commit */
    if (rc) break;
    if (op != RN_OP_UPSERT || val[id] != n) /* an upsert to the same row changes nothing */
      pending[np++] = (change){ seq, 0, op == RN_OP_DELETE ? RN_VERB_DELETE : present[id] ? RN_VERB_UPDATE : RN_VERB_INSERT,
                                id, op == RN_OP_DELETE ? val[id] : n };
    if (op == RN_OP_DELETE) present[id] = false;
    else present[id] = true, val[id] = n;
  }
  if (grouped && rn_seq(w->p) == seq - 1) {
    if (check_random(15) == 0) CHECK(rn_rollback(w->p) == 0);
    else {
      int rc = rn_commit(w->p);
      CHECK(rc == 0 || rc == RN_ECALLBACK);
    }
  }
  bool committed = rn_seq(w->p) == seq;
  CHECK(committed || rn_seq(w->p) == seq - 1);
  CHECK(rn_commit(w->p) == RN_EMISUSE); /* no group left open either way */
  if (armed && w->fail_in == 0) /* the subscriber saw changes of it, then failed it: told once */
    CHECK(!committed && w->nrolled == told + 1 && w->rolled[told] == seq);
  else if (!committed)
    CHECK(w->nrolled == told); /* rolled back before its commit: the subscriber saw none of it */
  if (committed) {
    CHECK(w->nrolled == told);
    memcpy(w->val, val, sizeof val);
    memcpy(w->present, present, sizeof present);
    for (int i = 0; i < np && w->nwant < MAXEV; i++) {
      pending[i].n = (uint64_t)i + 1;
      w->want[w->nwant++] = pending[i];
    }
  }
}

static void run_world(int nosync, int write_back, int carry_groups)
{
  char dir[] = "/tmp/runnel-durmodel-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  world *w = calloc(1, sizeof *w);
  w->opts = (rn_open_opts){ .path = dir, .nosync = nosync, .write_back = write_back ? 1 : -1,
                            .carry_groups = carry_groups };
  w->refuse_pct = 25;
  world_open(w);
  for (int g = 0; g < 250; g++) {
    one_group(w);
    switch (check_random(20)) {
    case 0:
      CHECK(rn_flush(w->p) == 0);
      CHECK(w->hook_seq == rn_seq(w->p));
      break;
    case 1: rn_deliver(w->p); break; /* refusals: RN_ECALLBACK */
    case 2:
      w->refuse_pct = 0; /* the close's last delivery may go through or not: either is kept */
      CHECK(rn_pipeline_close(w->p) == 0);
      w->refuse_pct = 25;
      world_open(w);
      break;
    }
  }
  w->refuse_pct = 0;
  CHECK(rn_flush(w->p) == 0 && rn_deliver(w->p) == 0);
  CHECK(rn_pipeline_close(w->p) == 0);
  world_open(w);
  CHECK(rn_deliver(w->p) == 0);
  CHECK(w->ngot == w->nwant);
  CHECK(w->nwant > 200 && w->nrolled > 5); /* the run did what it is for */
  for (int i = 0; i < w->ngot && i < w->nwant; i++) {
    const change *a = &w->got[i], *b = &w->want[i];
    if (a->seq != b->seq || a->n != b->n || a->verb != b->verb || a->id != b->id || a->val != b->val) {
      fprintf(stderr, "  event %d: got (%llu, %llu) verb %d id %lld n %lld, want (%llu, %llu) verb %d id %lld n %lld\n", i,
              (unsigned long long)a->seq, (unsigned long long)a->n, a->verb, (long long)a->id, (long long)a->val,
              (unsigned long long)b->seq, (unsigned long long)b->n, b->verb, (long long)b->id, (long long)b->val);
      CHECK(0);
      break;
    }
  }
  CHECK(w->hook_wrong == 0);
  rn_cursor *c = NULL;
  CHECK(rn_cursor_open(w->p, w->t, &c) == 0);
  const void *row;
  size_t len;
  uint64_t id;
  int done = 0;
  bool seen[NID] = { false };
  while (c && rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done) {
    int64_t k = field_int(row, len, "id");
    CHECK(k >= 0 && k < NID && w->present[k] && !seen[k] && field_int(row, len, "n") == w->val[k]);
    if (k >= 0 && k < NID) seen[k] = true;
  }
  rn_cursor_close(c);
  for (int i = 0; i < NID; i++) CHECK(seen[i] == w->present[i]);
  CHECK(rn_pipeline_close(w->p) == 0);
  free(w);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

static void test_sync(void) { run_world(0, 0, 0); }
static void test_nosync(void) { run_world(1, 0, 0); }
static void test_nosync_write_back(void) { run_world(1, 1, 0); }
static void test_nosync_write_back_small_carry(void) { run_world(1, 1, 3); }

int main(void)
{
  RUN(test_sync);
  RUN(test_nosync);
  RUN(test_nosync_write_back);
  RUN(test_nosync_write_back_small_carry);
  return CHECK_REPORT();
}
