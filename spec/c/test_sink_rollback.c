/* test_sink_rollback.c — a group that rolls back after sinks saw it leaves
 * nothing in them (issue 11 defect 1, SINKS-1 in core/sink.c): a C
 * subscriber is told through rn_subscribe_rollback, an NDJSON file is cut
 * back when a phase after its write fails. Each case: group 1 commits
 * "good", group 2 writes "bad" and fails, group 3 commits "next". */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ndjson.h"
#include "pipeline.h"

/* ---- a recording subscriber: changes of a rolled-back group are dropped ---- */

typedef struct recorder {
  char log[32][32];       /* "seq:verb:k" of every change kept */
  uint64_t seqs[32];
  int n;
  uint64_t rollbacks[8];  /* seqs it was told of */
  int nrollbacks;
} recorder;

static int64_t key_of(const void *map, size_t len)
{
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  int64_t k = -1;
  if (msgpack_unpack_next(&u, map, len, NULL) == MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_MAP)
    for (uint32_t i = 0; i < u.data.via.map.size; i++) {
      msgpack_object_kv *kv = &u.data.via.map.ptr[i];
      if (kv->key.via.str.size == 1 && kv->key.via.str.ptr[0] == 'k') k = kv->val.via.i64;
    }
  msgpack_unpacked_destroy(&u);
  return k;
}

static int record(void *ctx, const rn_event *ev)
{
  recorder *r = ctx;
  const void *m = ev->row ? ev->row : ev->old;
  size_t len = ev->row ? ev->row_len : ev->old_len;
  if (r->n < 32) {
    snprintf(r->log[r->n], 32, "%llu:%d:%lld", (unsigned long long)ev->seq, ev->verb, (long long)key_of(m, len));
    r->seqs[r->n++] = ev->seq;
  }
  return 0;
}

static void forget(void *ctx, uint64_t seq)
{
  recorder *r = ctx;
  while (r->n > 0 && r->seqs[r->n - 1] == seq) r->n--;
  if (r->nrollbacks < 8) r->rollbacks[r->nrollbacks++] = seq;
}

/* ---- sinks that fail group 2, in a chosen phase ---- */

static bool armed; /* group 2 is being committed */

enum phase { FAIL_CHANGE, FAIL_COMMIT, FAIL_SEAL };

static int fail_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  (void)ctx; (void)c;
  return armed && info->seq == 2 ? rn_err_set(e, RN_ECALLBACK, "%s: sink says no", rel->name) : 0;
}

static int fail_hook(void *ctx, uint64_t seq, rn_err *e)
{
  (void)ctx;
  return armed && seq == 2 ? rn_err_set(e, RN_ECALLBACK, "hook says no") : 0;
}

static void add_failing(rn_pipeline *p, rn_rel *rel, enum phase ph)
{
  CHECK(rn_sink_add(p, rel, false, ph == FAIL_CHANGE ? fail_change : NULL, ph == FAIL_COMMIT ? fail_hook : NULL,
                    NULL, NULL) == 0);
  if (ph == FAIL_SEAL) rn_sink_set_hooks(p, fail_hook, NULL);
}

/* ---- the groups ---- */

static const rn_column_def cols[] = { { "k", "int", 0, NULL, 0, NULL }, { "v", "string", 0, NULL, 0, NULL } };
static const char *const key[] = { "k" };

static int push(rn_pipeline *p, rn_rel *rel, rn_op op, int64_t k, const char *v)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "k", 1);
  msgpack_pack_int64(&pk, k);
  msgpack_pack_str_with_body(&pk, "v", 1);
  msgpack_pack_str_with_body(&pk, v, strlen(v));
  int rc = rn_push(p, rel, op, b.data, b.size);
  msgpack_sbuffer_destroy(&b);
  return rc;
}

typedef struct world {
  rn_pipeline *p;
  rn_rel *t, *u;
  bool stream;
} world;

static void open_world(world *w, bool stream)
{
  w->stream = stream;
  CHECK(rn_pipeline_open(NULL, &w->p, NULL, 0) == 0);
  if (stream) {
    CHECK(rn_declare_stream(w->p, "t", cols, 2, &w->t) == 0);
    CHECK(rn_declare_stream(w->p, "u", cols, 2, &w->u) == 0);
  } else {
    CHECK(rn_declare_table(w->p, "t", cols, 2, key, 1, &w->t) == 0);
    CHECK(rn_declare_table(w->p, "u", cols, 2, key, 1, &w->u) == 0);
  }
}

static void run_groups(world *w)
{
  CHECK(push(w->p, w->t, RN_OP_INSERT, 1, "good") == 0);
  CHECK(rn_begin(w->p) == 0);
  CHECK(push(w->p, w->t, w->stream ? RN_OP_INSERT : RN_OP_UPDATE, w->stream ? 2 : 1, "bad") == 0);
  CHECK(push(w->p, w->u, RN_OP_INSERT, 1, "bad") == 0);
  armed = true;
  CHECK(rn_commit(w->p) == RN_ECALLBACK);
  armed = false;
  CHECK(push(w->p, w->t, RN_OP_INSERT, 3, "next") == 0);
  CHECK(rn_seq(w->p) == 2);
}

/* The subscriber on t; the failing sink on t or u, before or after it. */
static void subscriber_case(bool stream, enum phase ph, bool before, bool other)
{
  world w;
  open_world(&w, stream);
  recorder r = { 0 };
  if (before) add_failing(w.p, other ? w.u : w.t, ph);
  CHECK(rn_subscribe_rollback(w.p, w.t, record, forget, &r) == 0);
  if (!before) add_failing(w.p, other ? w.u : w.t, ph);
  run_groups(&w);
  bool got_part = !(before && ph == FAIL_CHANGE); /* the failure came before it got anything */
  CHECK(r.nrollbacks == (got_part ? 1 : 0));
  CHECK(!got_part || r.rollbacks[0] == 2);
  CHECK(r.n == 2);
  CHECK(strcmp(r.log[0], "1:1:1") == 0);
  CHECK(strcmp(r.log[1], "2:1:3") == 0);
  rn_pipeline_close(w.p);
}

static void test_subscriber_told_of_rollbacks(void)
{
  for (int stream = 0; stream < 2; stream++)
    for (int ph = FAIL_CHANGE; ph <= FAIL_SEAL; ph++)
      for (int before = 0; before < 2; before++)
        for (int other = 0; other < 2; other++) subscriber_case(stream, (enum phase)ph, before, other);
}

static void test_plain_subscriber_still_works(void)
{
  world w;
  open_world(&w, false);
  recorder r = { 0 };
  CHECK(rn_subscribe(w.p, w.t, record, &r) == 0);
  add_failing(w.p, w.t, FAIL_COMMIT);
  run_groups(&w);
  CHECK(r.n == 3); /* no rollback hook: it kept group 2's change, as it was told nothing */
  rn_pipeline_close(w.p);
}

/* An NDJSON sink writes a group at its seal; a sink whose seal comes after
 * it fails: the file is cut back to the group's start. */
static void ndjson_case(bool stream, enum phase ph, bool before)
{
  world w;
  open_world(&w, stream);
  char path[] = "/tmp/runnel_test_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *f = fdopen(fd, "w");
  if (before) add_failing(w.p, w.t, ph);
  CHECK(rn_ndjson_sink(w.p, w.t, f, true, "verb", NULL, NULL, NULL) == 0);
  if (!before) add_failing(w.p, w.t, ph);
  run_groups(&w);
  rn_pipeline_close(w.p); /* closes f */
  char buf[512] = { 0 };
  FILE *in = fopen(path, "r");
  size_t n = in ? fread(buf, 1, sizeof buf - 1, in) : 0;
  if (in) fclose(in);
  unlink(path);
  buf[n] = 0;
  CHECK(strcmp(buf, "{\"verb\":\"INSERT\",\"k\":1,\"v\":\"good\"}\n{\"verb\":\"INSERT\",\"k\":3,\"v\":\"next\"}\n") == 0);
}

static void test_ndjson_keeps_committed_groups_only(void)
{
  for (int stream = 0; stream < 2; stream++)
    for (int ph = FAIL_CHANGE; ph <= FAIL_SEAL; ph++)
      for (int before = 0; before < 2; before++) ndjson_case(stream, (enum phase)ph, before);
}

int main(void)
{
  RUN(test_subscriber_told_of_rollbacks);
  RUN(test_plain_subscriber_still_works);
  RUN(test_ndjson_keeps_committed_groups_only);
  return CHECK_REPORT();
}
