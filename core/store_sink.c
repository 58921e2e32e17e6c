/* store_sink.c — permanent stores and reading them from elsewhere.
 *
 * rel:sink(runnel.store(name)) keeps rel's rows in this pipeline's own LMDB
 * state, written in the group's own transaction (sinks run inside it), so
 * a reader sees whole groups only:
 *
 *     meta  "S:" name  -> msgpack [schema description]   (for readers)
 *     meta  "Ss:" name -> |u64 seq|: the last group it saw
 *     meta  "So:" name -> the name of the relation it keeps
 *     "st:" name       |encoded key| -> |row|   (keyless: |u64 id BE| -> |row|)
 *
 * A store declared on a table-like relation whose rows it may not hold (it
 * missed groups, is new to them, kept another relation's ("So:"), or they
 * changed with no change emitted: evolve.h) is written again from the
 * relation, in one transaction.
 *
 * A group's net effect per key is written as for SQLite: keys gone first,
 * then the final rows. runnel.attach(state_path, name) opens a reader:
 * in another process through a read-only LMDB environment, in this one
 * through the environment already open (LMDB forbids opening it twice),
 * whose carried groups a read commits first (owner_flushed). */
#include "store_sink.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "envs.h"
#include "evolve.h"
#include "key.h"
#include "longkey.h"
#include "reader.h"
#include "upgrade.h"
#include "row.h"
#include "scan.h"

/* With sync = false the groups carried in one LMDB transaction are replayed
 * into a new one when a later group fails (group.c, GROUP-6), without
 * sinks; a store keeps its writes since LMDB's last commit to redo them:
 *
 *     carried: |u8 put|u32 klen|key|u32 vlen|row| …   (a delete: put 0, no row)
 */
typedef struct stsink {
  rn_pipeline *p;
  rn_rel *rel;
  MDB_dbi dbi;
  msgpack_sbuffer carried; /* its writes since LMDB's last commit (only while groups are carried) */
  size_t group_at;        /* carried.size where the open group's writes begin */
  uint64_t carried_seq;   /* the last group carried (its "Ss:" mark is redone with them) */
  char seen_key[RN_NAME_MAX + 4]; /* meta "Ss:" name */
  size_t seen_klen;
  char name[RN_NAME_MAX + 1]; /* the store's, for errors */
} stsink;

static void free_stsink(void *ctx)
{
  stsink *s = ctx;
  msgpack_sbuffer_destroy(&s->carried);
  free(s);
}

static void journal(stsink *s, bool put, const MDB_val *k, const MDB_val *v)
{
  if (!s->p->carry) return; /* every group commits its own transaction: nothing to redo */
  uint8_t op = put;
  uint32_t klen = (uint32_t)k->mv_size, vlen = put ? (uint32_t)v->mv_size : 0;
  rn_buf_write(&s->carried, (const char *)&op, 1);
  rn_buf_write(&s->carried, (const char *)&klen, 4);
  rn_buf_write(&s->carried, k->mv_data, klen);
  rn_buf_write(&s->carried, (const char *)&vlen, 4);
  if (put) rn_buf_write(&s->carried, v->mv_data, vlen);
}

/* meta "Ss:" name := seq, in the group's transaction. */
static int put_seen(stsink *s, MDB_txn *txn, uint64_t seq, rn_err *e)
{
  MDB_val k = { s->seen_klen, s->seen_key }, v = { sizeof seq, &seq };
  int rc = mdb_put(txn, s->p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(e, rc, s->rel->name) : 0;
}

/* The carried groups were applied again in a new transaction: their rows
 * in the store too — not the open group's, which is being rolled back or
 * regrown and writes its rows again if it commits. */
static int st_replay(void *ctx, rn_err *e)
{
  stsink *s = ctx;
  const char *at = s->carried.data, *end = at + s->group_at;
  while (at < end) {
    uint8_t put = (uint8_t)*at++;
    uint32_t klen, vlen;
    memcpy(&klen, at, 4);
    MDB_val k = { klen, (void *)(at + 4) };
    at += 4 + klen;
    memcpy(&vlen, at, 4);
    MDB_val v = { vlen, (void *)(at + 4) };
    at += 4 + vlen;
    int rc = put ? mdb_put(s->p->store.wtxn, s->dbi, &k, &v, 0) : mdb_del(s->p->store.wtxn, s->dbi, &k, NULL);
    if (rc && rc != MDB_NOTFOUND) return rn_store_fail(e, rc, s->rel->name);
  }
  return s->carried_seq ? put_seen(s, s->p->store.wtxn, s->carried_seq, e) : 0;
}

static int st_commit(void *ctx, uint64_t seq, rn_err *e)
{
  stsink *s = ctx;
  return put_seen(s, s->p->store.wtxn, seq, e);
}

static void st_forget(void *ctx)
{
  stsink *s = ctx;
  msgpack_sbuffer_clear(&s->carried);
  s->group_at = 0;
  s->carried_seq = 0;
}

/* A rolled-back group's writes went with LMDB's transaction: not redone. */
static void st_done(void *ctx, uint64_t seq, bool committed)
{
  (void)seq;
  stsink *s = ctx;
  if (!committed) s->carried.size = s->group_at;
  else if (s->p->carry) s->carried_seq = seq;
  s->group_at = s->carried.size;
}

static int key_of(const rn_schema *s, uint64_t id, const char *row, size_t len, msgpack_zone *z, msgpack_sbuffer *k)
{
  msgpack_sbuffer_clear(k);
  if (!s->nkey) {
    char be[8];
    rn_be64_put(be, id);
    rn_buf_write(k, be, 8);
    return 0;
  }
  const msgpack_object *v = rn_row_unpack(row, len, s->ncols, z);
  if (!v) return -1;
  return rn_key_encode(s, v, k) ? -1 : 0;
}

/* A store's rows hold their keys: the whole key of an entry is its row's. */
typedef struct row_key {
  const rn_schema *s;
  msgpack_zone *z;
  msgpack_sbuffer *k;
} row_key;

static bool row_key_of(void *ctx, const MDB_val *v, const char **key, size_t *klen)
{
  row_key *r = ctx;
  if (key_of(r->s, 0, v->mv_data, v->mv_size, r->z, r->k)) return false;
  *key = r->k->data;
  *klen = r->k->size;
  return true;
}

/* A key that fits is stored as it is (as before); a longer one, or one
 * whose place a hashed entry holds (only a key as long as a hashed form
 * can meet one), under its hashed form: store rows are removed, so the
 * hashed entries are walked with a cursor (rn_longkey_seek). */
int rn_store_row_find(MDB_txn *txn, MDB_dbi dbi, const rn_schema *s, msgpack_zone *z, const char *key, size_t klen,
                      char *stored, MDB_val *at, MDB_val *v)
{
  msgpack_sbuffer buf;
  msgpack_sbuffer_init(&buf);
  row_key rk = { s, z, &buf };
  const char *whole;
  size_t wlen;
  bool exact_free = false;
  int rc = MDB_NOTFOUND;
  *at = (MDB_val){ klen, (void *)key };
  if (klen <= RN_STORE_KEY_MAX) {
    rc = mdb_get(txn, dbi, at, v);
    bool may_be_other = rc == 0 && klen == RN_LONGKEY_STORED; /* a hashed entry's place (LONGKEY-2) */
    if ((rc == 0 && !may_be_other) || (rc && rc != MDB_NOTFOUND)) goto done;
    if (may_be_other && row_key_of(&rk, v, &whole, &wlen) && wlen == klen && memcmp(whole, key, klen) == 0) goto done;
    exact_free = rc == MDB_NOTFOUND;
    rc = MDB_NOTFOUND;
    if (exact_free && klen != RN_LONGKEY_STORED) goto done;
  }
  rc = rn_longkey_seek(txn, dbi, key, klen, row_key_of, &rk, stored, v);
  if (rc == 0 || !exact_free) *at = (MDB_val){ RN_LONGKEY_STORED, stored };
  if (rc == RN_LONGKEY_FULL && exact_free) rc = MDB_NOTFOUND;
done:
  msgpack_sbuffer_destroy(&buf);
  return rc;
}

/* Net changes (consolidated): a DELETE removes the old key; an UPDATE whose
 * key moved removes the old key unless another row of the group holds it
 * now — so deletes are applied first, then upserts overwrite (the sink sees
 * net changes in first-touch order; a later upsert of a freed key wins). */
static int st_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  stsink *s = ctx;
  rn_pipeline *p = rel->p;
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  int rc = 0;
  char stored[RN_LONGKEY_STORED];
  if (c->old && key_of(rel->schema, info->id, c->old, c->old_len, &p->scratch, &k) == 0) {
    MDB_val key, v;
    /* delete only if the stored row is still this one: a key another row
     * took over earlier in this group stays */
    int g = rn_store_row_find(p->store.wtxn, s->dbi, rel->schema, &p->scratch, k.data, k.size, stored, &key, &v);
    if (g == 0 && v.mv_size == c->old_len && memcmp(v.mv_data, c->old, c->old_len) == 0) {
      rc = mdb_del(p->store.wtxn, s->dbi, &key, NULL);
      if (!rc) journal(s, false, &key, NULL);
    }
  }
  if (!rc && c->row) {
    if (key_of(rel->schema, info->id, c->row, c->row_len, &p->scratch, &k) != 0) {
      msgpack_sbuffer_destroy(&k);
      return rn_err_set(e, RN_EINVAL, "%s: store \"%s\": a row whose key could not be encoded", rel->name, s->name);
    }
    MDB_val key, v;
    rc = rn_store_row_find(p->store.wtxn, s->dbi, rel->schema, &p->scratch, k.data, k.size, stored, &key, &v);
    if (rc == RN_LONGKEY_FULL) {
      msgpack_sbuffer_destroy(&k);
      return rn_err_set(e, RN_ESTORE, "%s: store \"%s\": too many long keys share one hash", rel->name, s->name);
    }
    if (rc == MDB_NOTFOUND || rc == 0) {
      v = (MDB_val){ c->row_len, (void *)c->row };
      rc = mdb_put(p->store.wtxn, s->dbi, &key, &v, 0);
    }
    if (!rc) journal(s, true, &key, &v);
  }
  msgpack_sbuffer_destroy(&k);
  return rc ? rn_store_fail(e, rc, rel->name) : 0;
}

static int rewrite_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  stsink *s = ctx;
  rn_pipeline *p = s->p;
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  int rc = key_of(s->rel->schema, id, row, len, &p->scratch, &k);
  if (rc) rc = rn_err_set(&p->err, RN_EINVAL, "%s: store \"%s\": a row whose key could not be encoded", s->rel->name,
                          s->name);
  /* a key past LMDB's 511 bytes is hashed, as apply_change stores it (longkey.h) */
  char stored[RN_LONGKEY_STORED];
  MDB_val key, v;
  int mrc = rc ? 0 : rn_store_row_find(p->store.wtxn, s->dbi, s->rel->schema, &p->scratch, k.data, k.size, stored, &key, &v);
  if (mrc == RN_LONGKEY_FULL)
    rc = rn_err_set(&p->err, RN_ESTORE, "%s: store \"%s\": too many long keys share one hash", s->rel->name, s->name);
  else if (mrc && mrc != MDB_NOTFOUND) rc = rn_store_fail(&p->err, mrc, s->rel->name);
  v = (MDB_val){ len, (void *)row };
  if (!rc && (rc = mdb_put(p->store.wtxn, s->dbi, &key, &v, 0))) rc = rn_store_fail(&p->err, rc, s->rel->name);
  msgpack_sbuffer_destroy(&k);
  return rc;
}

/* meta "S:" name := desc (the store's columns, for readers). */
static int put_desc(MDB_txn *txn, MDB_dbi meta, const char *name, const msgpack_sbuffer *desc)
{
  char mk[3 + RN_NAME_MAX];
  size_t nlen = strlen(name);
  memcpy(mk, RN_META_STORE, RN_PREFIX_LEN(RN_META_STORE));
  memcpy(mk + RN_PREFIX_LEN(RN_META_STORE), name, nlen);
  MDB_val k = { nlen + RN_PREFIX_LEN(RN_META_STORE), mk }, v = { desc->size, desc->data };
  return mdb_put(txn, meta, &k, &v, 0);
}

/* The store may not hold rel's rows (it missed groups, or they changed with
 * no change emitted: evolve.h): it is written again from them, with its
 * mark, in a transaction of its own (all or nothing); with desc, its
 * relation's columns changed: its new description goes with its rows, so
 * a reader never reads the old rows with the new columns. */
static int try_rewrite(rn_pipeline *p, stsink *s, const msgpack_sbuffer *desc)
{
  rn_oom_clear();
  int rc = rn_store_begin(&p->store, &p->err);
  if (rc) return rc;
  p->group_serial++;
  p->state = RN_APPLYING; /* the scan may run filters and maps */
  if ((rc = mdb_drop(p->store.wtxn, s->dbi, 0))) rc = rn_store_fail(&p->err, rc, s->rel->name);
  if (!rc && desc && (rc = put_desc(p->store.wtxn, p->store.meta, s->name, desc)))
    rc = rn_store_fail(&p->err, rc, s->rel->name);
  if (!rc) rc = rn_rel_scan(s->rel, rewrite_row, s);
  if (!rc) rc = put_seen(s, p->store.wtxn, p->seq, &p->err);
  rc = rn_group_oom(p, rc);
  msgpack_zone_clear(&p->scratch);
  p->state = RN_IDLE;
  if (!rc) return rn_store_commit(&p->store, &p->err);
  rn_store_abort(&p->store);
  return rc;
}

/* try_rewrite, again after growing the map when LMDB filled it. */
static int rewrite(rn_pipeline *p, stsink *s, const msgpack_sbuffer *desc)
{
  for (int tries = 0;; tries++) {
    int rc = try_rewrite(p, s, desc);
    if (!rc || p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL || tries >= 16) return rc;
    if (rn_store_grow(&p->store, &p->err)) return p->err.code;
  }
}

/* A store's description ("S:" name) as the state holds it decodes. */
static bool desc_readable(const MDB_val *v)
{
  msgpack_zone z;
  msgpack_object d;
  size_t off = 0;
  if (!rn_zone_init(&z, 1024)) return true; /* out of memory: not known to be damaged */
  bool ok = rn_msgpack_size(v->mv_data, v->mv_size) == v->mv_size && /* before msgpack-c allocates what it claims */
            rn_unpack(v->mv_data, v->mv_size, &off, &z, &d) == MSGPACK_UNPACK_SUCCESS && rn_schema_desc_valid(&d, 0);
  rn_zone_destroy(&z);
  return ok;
}

/* Relations and stores share one namespace: runnel.attach, inspect and
 * drop take either by name, a store first. A store may take its own
 * relation's name (it holds that relation's rows), no other relation's,
 * declared here or held by the state. */
static int store_name_free(rn_pipeline *p, MDB_txn *txn, const rn_rel *rel, const char *name, size_t nlen)
{
  if (strcmp(name, rel->name) == 0) return 0;
  char rk[2 + RN_NAME_MAX];
  memcpy(rk, RN_META_RELATION, RN_PREFIX_LEN(RN_META_RELATION));
  memcpy(rk + 2, name, nlen);
  MDB_val k = { nlen + 2, rk }, v;
  int rc = rn_find(p, name) ? 0 : mdb_get(txn, p->store.meta, &k, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rn_store_fail(&p->err, rc, name);
  return rn_err_set(&p->err, RN_EINVAL,
                    "%s: store \"%s\": a relation of this state is named \"%s\" (relations and stores share "
                    "names: a store takes its own relation's name or one no relation has)", rel->name, name, name);
}

const rn_rel *rn_store_sink_writer(const rn_pipeline *p, const char *name)
{
  for (int i = 0; i < p->nsinks; i++) {
    const rn_sink *k = p->sinks[i];
    if (k->on_change == st_change && strcmp(((const stsink *)k->ctx)->name, name) == 0) return k->rel;
  }
  return NULL;
}

int rn_store_owner_check(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  char key[sizeof RN_META_STORE_OWNER + RN_NAME_MAX];
  size_t nlen = strlen(name), plen = RN_PREFIX_LEN(RN_META_STORE_OWNER);
  if (nlen > RN_NAME_MAX) return 0; /* no store has it: the caller refuses it */
  memcpy(key, RN_META_STORE_OWNER, plen);
  memcpy(key + plen, name, nlen);
  MDB_val k = { plen + nlen, key }, v;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == MDB_NOTFOUND || (rc == 0 && v.mv_size == nlen && memcmp(v.mv_data, name, nlen) == 0)) return 0;
  if (rc) return rn_store_fail(&p->err, rc, name);
  return rn_err_set(&p->err, RN_EINVAL,
                    "relation \"%s\": the state has a store \"%s\" that keeps relation \"%.*s\" (relations and "
                    "stores share names: name the relation otherwise, or drop the store first)", name, name,
                    (int)(v.mv_size < RN_NAME_MAX ? v.mv_size : RN_NAME_MAX), (const char *)v.mv_data);
}

int rn_store_sink(rn_pipeline *p, rn_rel *rel, const char *name)
{
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "%s: stores are added outside groups", rel->name);
  if (rn_check_not_lookup(p, rel->name, "sink", rel)) return p->err.code; /* before its description is written */
  size_t nlen = strlen(name);
  if (nlen > RN_NAME_MAX) /* it becomes the keys "S:" name and "st:" name */
    return rn_err_set(&p->err, RN_EINVAL, "%s: store name \"%.24s…\" is %zu bytes; the limit is %d", rel->name,
                      name, nlen, RN_NAME_MAX);
  const rn_rel *writer = rn_store_sink_writer(p, name);
  if (writer) /* two writers: a row of one, deleted by the other, is gone from the store */
    return rn_err_set(&p->err, RN_EINVAL, "%s: store \"%s\": the store sink of %s%s declared in this pipeline "
                      "writes it already (a store keeps one relation's rows: name another store)", rel->name, name,
                      writer == rel ? "this relation" : "relation ", writer == rel ? "" : writer->name);
  int rc = rn_flush(p);
  if (rc) return rc;
  stsink *s = calloc(1, sizeof *s);
  if (!s) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  s->p = p;
  s->rel = rel;
  memcpy(s->name, name, nlen + 1);
  msgpack_sbuffer_init(&s->carried);
  msgpack_sbuffer desc;
  msgpack_sbuffer_init(&desc);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &desc, rn_buf_write);
  rn_schema_describe(rel->schema, &pk);
  MDB_txn *txn;
  bool in_step = false; /* it saw the last group */
  bool reshaped = false; /* the state holds it with other columns: written again, its description with its rows */
  char bad_mark[96] = ""; /* what is wrong with its "Ss:" mark: damaged */
  rc = mdb_txn_begin(p->store.env, NULL, 0, &txn);
  if (!rc && store_name_free(p, txn, rel, name, nlen)) {
    mdb_txn_abort(txn);
    msgpack_sbuffer_destroy(&desc);
    free_stsink(s);
    return p->err.code;
  }
  if (!rc) {
    char mk[3 + RN_NAME_MAX];
    memcpy(mk, RN_META_STORE, RN_PREFIX_LEN(RN_META_STORE));
    memcpy(mk + 2, name, nlen);
    MDB_val k = { nlen + 2, mk }, v;
    int g = mdb_get(txn, p->store.meta, &k, &v);
    reshaped = g == 0 && (v.mv_size != desc.size || memcmp(v.mv_data, desc.data, desc.size) != 0);
    if (reshaped && (!desc_readable(&v) || !rel->tablelike)) {
      bool readable = desc_readable(&v);
      mdb_txn_abort(txn);
      msgpack_sbuffer_destroy(&desc);
      free_stsink(s);
      if (!readable)
        return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: store \"%s\" has a description that cannot be read",
                          p->store.path, name);
      return rn_err_set(&p->err, RN_ESCHEMA,
                        "%s: store \"%s\" holds the rows of %s with other columns than %s has now, and %s keeps no "
                        "rows to write it again from: drop the store first (p:drop(\"%s\")) or name another store",
                        rel->name, name, rel->name, rel->name, rel->name, name);
    }
    /* kept for another relation (a deploy moved the sink), it holds that one's rows: not in step */
    bool same_owner = true;
    char ok[3 + RN_NAME_MAX];
    memcpy(ok, RN_META_STORE_OWNER, RN_PREFIX_LEN(RN_META_STORE_OWNER));
    memcpy(ok + RN_PREFIX_LEN(RN_META_STORE_OWNER), name, nlen);
    MDB_val okk = { nlen + RN_PREFIX_LEN(RN_META_STORE_OWNER), ok }, ov;
    if (mdb_get(txn, p->store.meta, &okk, &ov) == 0)
      same_owner = ov.mv_size == strlen(rel->name) && memcmp(ov.mv_data, rel->name, ov.mv_size) == 0;
    s->seen_klen = (size_t)snprintf(s->seen_key, sizeof s->seen_key, "%s%s", RN_META_STORE_SEEN, name);
    MDB_val sk = { s->seen_klen, s->seen_key }, sv;
    if (mdb_get(txn, p->store.meta, &sk, &sv) == 0) {
      uint64_t seen = 0;
      if (sv.mv_size == 8) memcpy(&seen, sv.mv_data, 8);
      in_step = sv.mv_size == 8 && seen == p->seq && same_owner;
      if (sv.mv_size != 8) snprintf(bad_mark, sizeof bad_mark, "is %zu bytes, not 8", sv.mv_size);
      else if (seen > p->seq)
        snprintf(bad_mark, sizeof bad_mark, "(%llu) is past the state's (%llu)", (unsigned long long)seen,
                 (unsigned long long)p->seq);
    }
    if (reshaped) { /* out of step until the rewrite, which writes the new description with the rows */
      in_step = false;
      if ((rc = mdb_del(txn, p->store.meta, &sk, NULL)) == MDB_NOTFOUND) rc = 0;
    } else {
      v.mv_size = desc.size;
      v.mv_data = desc.data;
      rc = mdb_put(txn, p->store.meta, &k, &v, 0);
    }
    if (!rc) { /* its owner: a relation declared later with its name is refused (rn_store_owner_check) */
      memcpy(mk, RN_META_STORE_OWNER, RN_PREFIX_LEN(RN_META_STORE_OWNER));
      memcpy(mk + RN_PREFIX_LEN(RN_META_STORE_OWNER), name, nlen);
      k = (MDB_val){ nlen + RN_PREFIX_LEN(RN_META_STORE_OWNER), mk };
      v = (MDB_val){ strlen(rel->name), rel->name };
      rc = mdb_put(txn, p->store.meta, &k, &v, 0);
    }
    if (!rc) rc = rn_state_dbi(p, txn, RN_DB_STORE, name, 0, &s->dbi) ? -1 : 0;
    if (!rc) rc = mdb_txn_commit(txn);
    else mdb_txn_abort(txn);
  }
  if (rc) {
    msgpack_sbuffer_destroy(&desc);
    free_stsink(s);
    return rc == -1 ? p->err.code : rn_store_fail(&p->err, rc, name);
  }
  /* A damaged mark is not in step: the store is written again from rel
   * (the safe answer; a store of a stream has no rows to compare, its mark
   * is written with the next group), said in a note. */
  if (bad_mark[0] && rn_evolve_note(p, "state damaged: %s: store \"%s\": its last group %s: %s", p->store.path, name,
                                    bad_mark, rel->tablelike ? "written again from its relation" :
                                    "written again with the next group")) {
    free_stsink(s);
    return p->err.code;
  }
  bool rewritten = rel->tablelike && (!in_step || rel->evolved);
  if (rewritten) rc = rewrite(p, s, reshaped ? &desc : NULL); /* not rel's rows: written again */
  msgpack_sbuffer_destroy(&desc);
  if (rc) {
    free_stsink(s);
    return rc;
  }
  rc = rn_sink_add(p, rel, true, st_change, st_commit, s, free_stsink);
  if (!rc) {
    rn_sink_set_hooks(p, NULL, st_done);
    rn_sink_set_carry(p, st_replay, st_forget);
    if (rewritten) rn_sink_set_holds_told(p); /* the rows a pending rebuild made are in the store */
  }
  return rc;
}

/* ---- readers ---- */

struct rn_attached {
  MDB_env *env;           /* own environment (another state), or NULL */
  MDB_env *shared;        /* the environment in use; NULL once its owner closed */
  rn_pipeline *owner;     /* the pipeline whose environment it borrows, or NULL */
  rn_attached *next;      /* in owner->borrowers */
  MDB_dbi dbi, meta;
  rn_schema *schema;      /* the store's columns, from its description */
  char *name;
  bool is_index;          /* an index relation's rows ("ix:"), in its order */
  rn_order order;         /* … that order */
  int table;              /* 0: a store ("st:"); RN_ATTACH_KEYED / _KEYLESS: a source table's "t:" rows */
  rn_agg_reader *agg;     /* RN_ATTACH_AGGREGATE: computes its rows from "ag:" */
  rn_reader *reader;      /* RN_ATTACH_DERIVED: a join, top or select (reader.h) */
  MDB_val record;         /* its catalogue record ("S:" or "r:" name) as attached, copied: a read
                             finding another was declared since (evolved, dropped) refuses */
  char record_key[RN_NAME_MAX + 3];
  size_t record_klen;
  bool reopen;            /* its owner dropped a relation: its handles may be closed or another's */
  pid_t pid;              /* the process that attached it: a forked child may not read through it */
};

/* Rebuilds a schema from its description (schema.c's rn_schema_describe). */
static rn_schema *schema_of(const msgpack_object *d, rn_err *e)
{
  rn_schema *s = rn_schema_new();
  if (!s) {
    rn_err_set(e, RN_ENOMEM, "out of memory"); /* not the description's fault */
    return NULL;
  }
  if (d->type != MSGPACK_OBJECT_ARRAY || d->via.array.size != 2) {
    rn_schema_free(s);
    rn_err_set(e, RN_ESCHEMA, "a store's description could not be read");
    return NULL;
  }
  const msgpack_object *cols = &d->via.array.ptr[0], *key = &d->via.array.ptr[1];
  for (uint32_t i = 0; i < cols->via.array.size; i++) {
    const msgpack_object *c = cols->via.array.ptr[i].via.array.ptr;
    char type[16];
    snprintf(type, sizeof type, "%.*s", (int)c[1].via.str.size, c[1].via.str.ptr);
    rn_type t = RN_T_ANY;
    rn_schema *fields = c[4].type == MSGPACK_OBJECT_ARRAY ? schema_of(&c[4], e) : NULL;
    if (rn_type_parse(type, &t) != 0 && !fields) t = RN_T_ANY;
    if (rn_schema_add(s, c[0].via.str.ptr, c[0].via.str.size, t, c[2].via.boolean, fields, e) < 0) {
      rn_schema_free(s);
      return NULL;
    }
  }
  int slots[key->via.array.size ? key->via.array.size : 1];
  for (uint32_t i = 0; i < key->via.array.size; i++) slots[i] = (int)key->via.array.ptr[i].via.u64;
  if (key->via.array.size && rn_schema_set_key(s, slots, (int)key->via.array.size, "store", e)) {
    rn_schema_free(s);
    return NULL;
  }
  return s;
}

rn_schema *rn_attach_schema_of(const msgpack_object *d, rn_err *e)
{
  return schema_of(d, e);
}

/* The catalogue record a was opened from, kept to check each read by
 * (unchanged). A store's is "S:" name, any other relation's "r:" name. */
static int keep_record(rn_attached *a, MDB_txn *txn, MDB_dbi meta, rn_err *e)
{
  static const char *const prefixes[] = { RN_META_STORE, RN_META_RELATION };
  size_t nlen = strlen(a->name);
  for (int i = 0; i < 2; i++) {
    a->record_klen = (size_t)snprintf(a->record_key, sizeof a->record_key, "%s%s", prefixes[i], a->name);
    MDB_val k = { a->record_klen, a->record_key }, v;
    if (a->record_klen != strlen(prefixes[i]) + nlen || mdb_get(txn, meta, &k, &v) != 0) continue;
    a->meta = meta;
    a->record.mv_size = v.mv_size;
    if (!(a->record.mv_data = malloc(v.mv_size ? v.mv_size : 1))) return rn_err_set(e, RN_ENOMEM, "out of memory");
    memcpy(a->record.mv_data, v.mv_data, v.mv_size);
    return 0;
  }
  return rn_err_set(e, RN_ENOTFOUND, "attach %s: no relation or store \"%s\" there", a->name, a->name);
}

/* Whether the relation read in txn is still the one attached: a pipeline
 * that dropped it, or declared it again with other columns, since (its
 * rows no longer match the columns read at attach) is refused, saying so. */
static int still_attached(const rn_attached *a, MDB_txn *txn, rn_err *e)
{
  MDB_val k = { a->record_klen, (void *)a->record_key }, v;
  int rc = mdb_get(txn, a->meta, &k, &v);
  if (rc == MDB_NOTFOUND)
    return rn_err_set(e, RN_ENOTFOUND, "attach %s: \"%s\" was dropped from the state since it was attached (attach "
                      "again once it is declared again)", a->name, a->name);
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "attach %s: %s", a->name, rn_store_strerror(rc));
  if (v.mv_size != a->record.mv_size || memcmp(v.mv_data, a->record.mv_data, v.mv_size) != 0)
    return rn_err_set(e, RN_ESCHEMA, "attach %s: \"%s\" was declared again with other columns or another kind "
                      "since it was attached (attach it again to read it as it is now)", a->name, a->name);
  return 0;
}

/* No store `name`: an index relation of that name is read instead (its
 * catalogue entry, its order from "tp:", its rows in "ix:"). */
static int open_index(rn_attached *a, MDB_txn *txn, MDB_dbi meta, const char *path, msgpack_zone *z, rn_err *e)
{
  size_t nlen = strlen(a->name);
  char key[RN_NAME_MAX + 8];
  memcpy(key, RN_META_RELATION, RN_PREFIX_LEN(RN_META_RELATION));
  memcpy(key + RN_PREFIX_LEN(RN_META_RELATION), a->name, nlen);
  MDB_val k = { nlen + RN_PREFIX_LEN(RN_META_RELATION), key }, v;
  msgpack_object d;
  size_t off = 0;
  if (mdb_get(txn, meta, &k, &v) != 0 || rn_msgpack_size(v.mv_data, v.mv_size) != v.mv_size ||
      rn_unpack(v.mv_data, v.mv_size, &off, z, &d) != MSGPACK_UNPACK_SUCCESS || d.type != MSGPACK_OBJECT_ARRAY ||
      d.via.array.size != 2 || d.via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
      d.via.array.ptr[0].via.u64 != RN_REL_INDEX)
    return rn_err_set(e, RN_ENOTFOUND, "attach %s: no store \"%s\" there (nor an index)", path, a->name);
  if (!rn_schema_desc_valid(&d.via.array.ptr[1], 0) || !(a->schema = schema_of(&d.via.array.ptr[1], e)))
    return rn_err_set(e, RN_ESCHEMA, "state damaged: %s: index \"%s\" has a description that cannot be read",
                      path, a->name);
  MDB_dbi decl;
  static char decl_key[] = "decl";
  MDB_val dk = { 4, decl_key }, dv;
  snprintf(key, sizeof key, "%s%s", RN_DB_TOP_DECL, a->name);
  int rc = mdb_dbi_open(txn, key, 0, &decl);
  if (!rc) rc = mdb_get(txn, decl, &dk, &dv);
  if (!rc && rn_index_decl_decode(dv.mv_data, dv.mv_size, a->schema->ncols, &a->order) != 0)
    return rn_err_set(e, RN_ESCHEMA, "state damaged: %s: index \"%s\" has an order that cannot be read", path, a->name);
  snprintf(key, sizeof key, "%s%s", RN_DB_INDEX, a->name);
  if (!rc) rc = mdb_dbi_open(txn, key, 0, &a->dbi);
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "attach %s: index \"%s\": %s", path, a->name, rn_store_strerror(rc));
  a->is_index = true;
  return 0;
}

static int attach(const char *path, const char *name, rn_pipeline *owner, rn_attached **out, rn_err *e)
{
  *out = NULL;
  size_t nlen = strlen(name);
  if (nlen > RN_NAME_MAX)
    return rn_err_set(e, RN_EINVAL, "attach %s: store name \"%.24s…\" is %zu bytes; the limit is %d", path, name,
                      nlen, RN_NAME_MAX);
  rn_attached *a = calloc(1, sizeof *a);
  char *key = malloc(nlen + 4); /* "S:" name, then "st:" name */
  if (!a || !key || !(a->name = strdup(name))) {
    free(a);
    free(key);
    return rn_err_set(e, RN_ENOMEM, "out of memory");
  }
  a->pid = rn_envs_self();
  if (owner && owner->store.pid != a->pid) owner = NULL; /* a parent's pipeline (Lua's registry): open our own */
  void *writer = NULL;
  if (rn_envs_writer(path, &writer, e)) { /* an owner given (the Lua state's pipeline) is checked too */
    free(key);
    rn_attach_close(a);
    return e->code;
  }
  if (writer) /* this thread writes it: read through its pipeline, the one environment on it (envs.h) */
    owner = (rn_pipeline *)((char *)writer - offsetof(rn_pipeline, store));
  else if (!owner && rn_envs_acquire(path, &a->env, e)) {
    free(key);
    rn_attach_close(a);
    if (e->code == RN_ESTORE) return e->code; /* "state damaged: …", as open and inspect say it */
    char why[sizeof e->msg];
    memcpy(why, e->msg, sizeof why);
    return rn_err_set(e, e->code, "attach %s", why); /* "attach st: not a runnel state (no data.mdb)" */
  }
  int rc = 0;
  if (owner && owner->store.wtxn && owner->store.wtxn_dbis && (owner->state != RN_IDLE || rn_flush(owner) != 0)) {
    /* its transaction opened handles LMDB has not exported (store.h, rn_store_dbi_open): opening more in
       another would take the same slot, and the pipeline's commit would fail */
    free(key);
    rn_attach_close(a);
    if (owner->state == RN_IDLE) return rn_err_set_with(e, owner->err.code, owner->err.msg, "attach %s: ", name);
    return rn_err_set(e, RN_EMISUSE, "attach %s: not while its pipeline declares a relation (a callback of the "
                      "declaration): the declaration opens databases, and LMDB lets one transaction at a time do "
                      "that; attach it before the declaration", name);
  }
  if (owner) {
    a->shared = owner->store.env;
    a->owner = owner;
    a->next = owner->borrowers;
    owner->borrowers = a;
  } else {
    a->shared = a->env;
  }
  MDB_txn *txn = NULL;
  MDB_dbi meta;
  msgpack_zone z;
  if (!rn_zone_init(&z, 1024)) {
    rn_err_set(e, RN_ENOMEM, "out of memory");
    goto fail;
  }
  if (!rc) rc = rn_store_txn(a->shared, MDB_RDONLY, &txn);
  if (!rc) rc = mdb_dbi_open(txn, RN_DB_META, 0, &meta);
  if (rc == MDB_NOTFOUND) {
    rn_store_no_catalogue(txn, path, e);
    rn_err_prefix(e, "attach");
    goto fail;
  }
  if (rc) {
    rn_err_set(e, rn_store_read_code(rc), "attach %s: %s", path, rn_store_strerror(rc));
    goto fail;
  }
  if (!owner && rn_upgrade_readable(txn, meta, path, e)) { /* a writer's own state was checked as it opened */
    rn_err_prefix(e, "attach");
    goto fail;
  }
  memcpy(key, RN_META_STORE, RN_PREFIX_LEN(RN_META_STORE));
  memcpy(key + 2, name, nlen);
  MDB_val k = { nlen + 2, key }, v;
  msgpack_object d;
  size_t off = 0;
  if (mdb_get(txn, meta, &k, &v) != 0) { /* not a store: an index, or a source table (query.c)? */
    if (!open_index(a, txn, meta, path, &z, e)) { /* and a reader, for get by its input's key */
      if (!rn_reader_open(txn, meta, path, name, &a->reader, e)) goto opened;
      goto fail;
    }
    if (e->code != RN_ENOTFOUND) goto fail;
    rn_err_clear(e);
    if (rn_attach_table_entry(txn, meta, path, name, &v, &a->table, e)) goto fail;
    if (a->table == RN_ATTACH_DERIVED) {
      if (!rn_reader_open(txn, meta, path, name, &a->reader, e)) goto opened;
      char prefix[PATH_MAX + 8];
      snprintf(prefix, sizeof prefix, "attach %s", path);
      rn_err_prefix(e, prefix);
      goto fail;
    }
  }
  if (rn_unpack(v.mv_data, v.mv_size, &off, &z, &d) != MSGPACK_UNPACK_SUCCESS || !rn_schema_desc_valid(&d, 0)) {
    rn_err_set(e, RN_ESCHEMA, "state damaged: %s: store \"%s\" has a description that cannot be read", path, name);
    goto fail;
  }
  a->schema = schema_of(&d, e);
  if (!a->schema) goto fail;
  if (a->table == RN_ATTACH_KEYED && !a->schema->nkey) a->table = RN_ATTACH_KEYLESS;
  memcpy(key, RN_DB_STORE, RN_PREFIX_LEN(RN_DB_STORE));
  memcpy(key + 3, name, nlen + 1);
  if (a->table == RN_ATTACH_DISTINCT) memcpy(key, RN_DB_DISTINCT_ROWS, 3); /* "dr:" name, as long as "st:" */
  else if (a->table == RN_ATTACH_AGGREGATE) memcpy(key, RN_DB_AGG_GROUPS, 3);
  else if (a->table) memcpy(key, RN_DB_ROWS, 2), memcpy(key + 2, name, nlen + 1);
  rc = mdb_dbi_open(txn, key, 0, &a->dbi);
  if (rc) {
    rn_err_set(e, rn_store_read_code(rc), "attach %s: %s", path, rn_store_strerror(rc));
    goto fail;
  }
  if (a->table == RN_ATTACH_AGGREGATE && rn_agg_reader_open(txn, meta, a->name, a->schema, &a->agg, e)) {
    char prefix[PATH_MAX + 8];
    snprintf(prefix, sizeof prefix, "attach %s", path);
    rn_err_prefix(e, prefix);
    goto fail;
  }
opened:
  if (keep_record(a, txn, meta, e)) goto fail;
  rc = mdb_txn_commit(txn); /* committing keeps the database handle (an abort would close it) */
  txn = NULL;
  if (rc) {
    rn_err_set(e, rn_store_read_code(rc), "attach %s: %s", path, rn_store_strerror(rc));
    goto fail;
  }
  rn_zone_destroy(&z);
  free(key);
  *out = a;
  return 0;
fail:
  if (txn) mdb_txn_abort(txn);
  rn_zone_destroy(&z);
  free(key);
  rn_attach_close(a);
  return e->code;
}

/* The attach's transaction opens databases: one such at a time (envs.h). */
int rn_attach(const char *path, const char *name, rn_pipeline *owner, rn_attached **out, rn_err *e)
{
  rn_envs_dbis_lock();
  int rc = attach(path, name, owner, out, e);
  rn_envs_dbis_unlock();
  return rc;
}

bool rn_attach_reads_own(const rn_attached *a, const rn_pipeline *p, const char *name)
{
  return a->owner == p && a->name && strcmp(a->name, name) == 0;
}

const rn_schema *rn_attach_schema(const rn_attached *a) { return a->reader ? rn_reader_schema(a->reader) : a->schema; }

static int orphaned(const rn_attached *a, rn_err *e)
{
  return rn_err_set(e, RN_EMISUSE, "attach %s: the pipeline whose state it read was closed (attach again)",
                    a->name);
}

/* Its owner dropped a relation, closing its database handles: a's are
 * opened again by name (the same relation: its catalogue record unchanged),
 * else a handle closed or given to another relation since would be read. */
static int reopen(rn_attached *a, rn_err *e)
{
  rn_attached *fresh = NULL;
  int rc = rn_attach(a->owner->store.path, a->name, a->owner, &fresh, e);
  if (rc == RN_ENOTFOUND)
    return rn_err_set(e, RN_ENOTFOUND, "attach %s: \"%s\" was dropped from the state since it was attached (attach "
                      "again once it is declared again)", a->name, a->name);
  if (rc) return rc;
  if (fresh->record.mv_size != a->record.mv_size ||
      memcmp(fresh->record.mv_data, a->record.mv_data, a->record.mv_size) != 0) {
    rn_attach_close(fresh);
    return rn_err_set(e, RN_ESCHEMA, "attach %s: \"%s\" was declared again with other columns or another kind "
                      "since it was attached (attach it again to read it as it is now)", a->name, a->name);
  }
  rn_agg_reader_free(a->agg);
  rn_reader_free(a->reader);
  rn_schema_free(a->schema);
  a->dbi = fresh->dbi;
  a->meta = fresh->meta;
  a->schema = fresh->schema;
  a->is_index = fresh->is_index;
  a->order = fresh->order;
  a->table = fresh->table;
  a->agg = fresh->agg;
  a->reader = fresh->reader;
  fresh->schema = NULL, fresh->agg = NULL, fresh->reader = NULL;
  rn_attach_close(fresh);
  a->reopen = false;
  return 0;
}

void rn_attach_handles_closed(rn_pipeline *owner)
{
  for (rn_attached *a = owner->borrowers; a; a = a->next) a->reopen = true;
}

/* e's message, "attach NAME: " before it. */
static int named(const rn_attached *a, rn_err *e)
{
  char prefix[RN_NAME_MAX + 16];
  snprintf(prefix, sizeof prefix, "attach %s", a->name);
  rn_err_prefix(e, prefix);
  return e->code;
}

/* Before a read through an owner's environment: the groups its pipeline
 * committed but carries in its open LMDB transaction (sync = false) are
 * committed (rn_flush), so the read transaction sees every group the
 * pipeline committed. Inside one of its groups (or its callbacks) nothing
 * can be committed without the open group: the read sees the groups LMDB
 * holds, whole groups only. */
static int owner_flushed(rn_attached *a, rn_err *e)
{
  rn_pipeline *o = a->owner;
  if (a->pid != rn_envs_self())
    return rn_err_set(e, RN_EMISUSE, "attach %s: opened by process %ld before a fork; attach it again in this process",
                      a->name, (long)a->pid);
  if (!a->shared) return orphaned(a, e);
  if (o && rn_envs_writer_here(&o->store, o->store.path, e)) /* attached in its thread, read in another */
    return named(a, e);
  if (a->reopen) {
    int rc = reopen((rn_attached *)a, e);
    if (rc) return rc;
  }
  if (!o || o->state != RN_IDLE || !o->store.wtxn || rn_flush(o) == 0) return 0;
  *e = o->err;
  return named(a, e);
}

typedef struct copied {
  msgpack_sbuffer *row;
  int *found;
} copied;

/* An aggregate's row into the caller's buffer (rn_attach_get). */
static int copy_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  copied *c = ctx;
  (void)id;
  rn_buf_write(c->row, row, len);
  *c->found = 1;
  return 0;
}

typedef struct rows_only {
  int (*fn)(void *ctx, const char *row, size_t len);
  void *ctx;
} rows_only;

static int row_only(void *ctx, uint64_t id, const char *row, size_t len)
{
  rows_only *r = ctx;
  (void)id;
  return r->fn(r->ctx, row, len);
}

/* A keyed store's row under key (rn_store_row_find), in txn. */
static int store_get(rn_attached *a, MDB_txn *txn, const char *key, size_t klen, char *stored, MDB_val *v)
{
  msgpack_zone z;
  if (!msgpack_zone_init(&z, 1024)) return ENOMEM;
  MDB_val at;
  int rc = rn_store_row_find(txn, a->dbi, a->schema, &z, key, klen, stored, &at, v);
  msgpack_zone_destroy(&z);
  return rc == RN_LONGKEY_FULL ? MDB_NOTFOUND : rc;
}

/* Appends meta prefix name's value (nothing when absent) after its length. */
static int identity_part(const rn_attached *a, MDB_txn *txn, const char *prefix, msgpack_sbuffer *out, rn_err *e)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", prefix, a->name), key }, v = { 0, NULL };
  int rc = mdb_get(txn, a->meta, &k, &v);
  if (rc && rc != MDB_NOTFOUND) return rn_err_set(e, rn_store_read_code(rc), "attach %s: %s", a->name, rn_store_strerror(rc));
  char len[24];
  if (rn_buf_write(out, len, (size_t)snprintf(len, sizeof len, "|%zu:", rc ? (size_t)0 : v.mv_size)) ||
      (!rc && rn_buf_write(out, v.mv_data, v.mv_size)))
    return rn_err_set(e, RN_ENOMEM, "out of memory");
  return 0;
}

/* A read transaction on an attached relation, its owner's carried groups
 * flushed first and the relation still the one attached; aborted on error. */
static int attach_read(rn_attached *a, MDB_txn **txn, rn_err *e)
{
  int rc = owner_flushed(a, e);
  if (rc) return rc;
  rc = rn_store_txn(a->shared, MDB_RDONLY, txn);
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "attach %s: %s", a->name, rn_store_strerror(rc));
  if ((rc = still_attached(a, *txn, e))) mdb_txn_abort(*txn);
  return rc;
}

int rn_attach_identity(rn_attached *a, msgpack_sbuffer *out, rn_err *e)
{
  MDB_txn *txn;
  int rc = attach_read(a, &txn, e);
  if (rc) return rc;
  char len[24];
  if (rn_buf_write(out, a->record_key, a->record_klen) ||
      rn_buf_write(out, len, (size_t)snprintf(len, sizeof len, "|%zu:", a->record.mv_size)) ||
      rn_buf_write(out, a->record.mv_data, a->record.mv_size))
    rc = rn_err_set(e, RN_ENOMEM, "out of memory");
  if (!rc) rc = identity_part(a, txn, RN_META_AGG_DECL, out, e);
  if (!rc) rc = identity_part(a, txn, RN_META_CODE, out, e);
  if (!rc) rc = identity_part(a, txn, RN_META_CHANGED_AT, out, e); /* rebuilt since, for whatever reason */
  mdb_txn_abort(txn);
  return rc;
}

int rn_attach_get(rn_attached *a, const char *key, size_t klen, msgpack_sbuffer *row, int *found, rn_err *e)
{
  MDB_txn *txn;
  *found = 0;
  int rc = attach_read(a, &txn, e);
  if (rc) return rc;
  MDB_val k = { klen, (void *)key }, v;
  if (a->reader) {
    rc = rn_reader_get(a->reader, txn, key, klen, copy_row, &(copied){ row, found }, e);
    mdb_txn_abort(txn);
    return rc;
  }
  if (a->table && (rc = rn_attach_table_key(a->table, a->name, klen, e))) {
    mdb_txn_abort(txn);
    return rc;
  }
  char stored[RN_LONGKEY_STORED];
  rc = a->agg && a->schema->nkey ? rn_agg_reader_seek(a->agg, txn, a->dbi, key, klen, &k, &v, e)
     : a->table == RN_ATTACH_KEYED ? rn_attach_table_find(txn, a->dbi, key, klen, stored, &v)
     : !a->table && !a->is_index && a->schema->nkey ? store_get(a, txn, key, klen, stored, &v)
                                  : mdb_get(txn, a->dbi, &k, &v);
  uint64_t id = 0;
  if (rc && rc != MDB_NOTFOUND && a->agg && a->schema->nkey) { /* rn_agg_reader_seek set e */
    mdb_txn_abort(txn);
    return e->code;
  }
  if (a->agg && !a->schema->nkey) {
    mdb_txn_abort(txn);
    return rn_err_set(e, RN_EINVAL, "attach %s: get: a keyless aggregate has no key to read by (rows() reads it)",
                      a->name);
  }
  if (a->agg) {
    rc = rc ? rc : rn_agg_reader_row(a->agg, txn, &k, &v, copy_row, &(copied){ row, found }, e);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : e->code;
  }
  int entry = rc == 0 && a->table ? rn_attach_table_row(a->table, &k, &v, &id) : RN_ENTRY_LIVE;
  if (entry == RN_ENTRY_DAMAGED) {
    mdb_txn_abort(txn);
    return rn_attach_damaged(rn_attach_kind(a), a->name, e);
  }
  if (rc == 0 && entry == RN_ENTRY_LIVE) {
    size_t at = row->size;
    rn_buf_write(row, v.mv_data, v.mv_size);
    if (a->table == RN_ATTACH_DISTINCT) rn_row_zero_signs(row->data + at, row->size - at); /* rn_attach_row_form */
    *found = 1;
  }
  mdb_txn_abort(txn);
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_err_set(e, rn_store_read_code(rc), "attach %s: %s", a->name, rn_store_strerror(rc));
}

static int attach_walk(rn_attached *a, int (*fn)(void *ctx, const char *row, size_t len), rn_attach_each_fn each,
                       void *ctx, rn_err *e)
{
  MDB_txn *txn;
  MDB_cursor *cur;
  int rc = attach_read(a, &txn, e);
  if (rc) return rc;
  if (a->reader) {
    rc = rn_reader_each(a->reader, txn, fn ? row_only : each, fn ? &(rows_only){ fn, ctx } : ctx, e);
    mdb_txn_abort(txn);
    return rc;
  }
  rc = mdb_cursor_open(txn, a->dbi, &cur);
  MDB_val k, v;
  int mrc = rc ? rc : mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  int frc = 0;
  msgpack_sbuffer form; /* a row as read (rn_attach_row_form) */
  msgpack_sbuffer_init(&form);
  for (; mrc == 0 && !frc; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t id = 0;
    if (a->agg) {
      frc = rn_agg_reader_row(a->agg, txn, &k, &v, fn ? row_only : each, fn ? &(rows_only){ fn, ctx } : ctx, e);
      continue;
    }
    int entry = a->table ? rn_attach_table_row(a->table, &k, &v, &id) : RN_ENTRY_LIVE;
    if (entry == RN_ENTRY_DAMAGED) {
      frc = rn_attach_damaged(rn_attach_kind(a), a->name, e);
      break;
    }
    if (entry == RN_ENTRY_GONE) continue; /* a tombstone */
    if (a->table && rn_attach_row_form(a->table, &v, &form)) {
      frc = rn_err_set(e, RN_ENOMEM, "out of memory");
      break;
    }
    frc = fn ? fn(ctx, v.mv_data, v.mv_size) : each(ctx, id, v.mv_data, v.mv_size);
  }
  msgpack_sbuffer_destroy(&form);
  if (!rc) mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  if (frc) return frc;
  return mrc == MDB_NOTFOUND ? 0 : rn_err_set(e, rn_store_read_code(mrc), "attach %s: %s", a->name, rn_store_strerror(mrc));
}

bool rn_attach_is_index(const rn_attached *a) { return a->is_index; }

int rn_attach_index(rn_attached *a, rn_index_bound *from, rn_index_bound *to, rn_index_walk *w, rn_err *e)
{
  if (!a->is_index) /* the binding says what it is first (lua/llookup.c need_index) */
    return rn_err_set(e, RN_EMISUSE, "attach %s: %s is no index: it has no order", a->name, a->name);
  int flushed = owner_flushed(a, e);
  if (flushed) return flushed;
  msgpack_zone z;
  msgpack_sbuffer fk, tk;
  msgpack_sbuffer_init(&fk);
  msgpack_sbuffer_init(&tk);
  if (!rn_zone_init(&z, 256)) return rn_err_set(e, RN_ENOMEM, "out of memory");
  int rc = rn_index_encode_bound(&a->order, a->schema, from, &z, &fk, a->name, e);
  if (!rc) rc = rn_index_encode_bound(&a->order, a->schema, to, &z, &tk, a->name, e);
  w->from = fk.size ? fk.data : NULL;
  w->from_len = fk.size;
  w->to = tk.size ? tk.data : NULL;
  w->to_len = tk.size;
  w->order = &a->order;
  w->ncols = a->schema->ncols;
  MDB_txn *txn = NULL;
  int lmdb_rc = rc ? 0 : rn_store_txn(a->shared, MDB_RDONLY, &txn);
  if (!rc && !lmdb_rc) rc = still_attached(a, txn, e);
  if (!rc && !lmdb_rc) rc = rn_index_walk_db(txn, a->dbi, w, &lmdb_rc);
  if (txn) mdb_txn_abort(txn);
  if (lmdb_rc) rc = rn_err_set(e, rn_store_read_code(lmdb_rc), "attach %s: %s", a->name, rn_store_strerror(lmdb_rc));
  msgpack_sbuffer_destroy(&fk);
  msgpack_sbuffer_destroy(&tk);
  rn_zone_destroy(&z);
  return rc;
}


int rn_attach_rows(rn_attached *a, int (*fn)(void *ctx, const char *row, size_t len), void *ctx, rn_err *e)
{
  return attach_walk(a, fn, NULL, ctx, e);
}

int rn_attach_each(rn_attached *a, rn_attach_each_fn fn, void *ctx, rn_err *e)
{
  return attach_walk(a, NULL, fn, ctx, e);
}

int rn_attach_is_table(const rn_attached *a) { return a->table; }

const char *rn_attach_kind(const rn_attached *a)
{
  if (a->reader) return rn_reader_kind(a->reader);
  if (a->is_index) return "index";
  return a->table == RN_ATTACH_DISTINCT ? "distinct" : a->table == RN_ATTACH_AGGREGATE ? "aggregate"
       : a->table ? "table" : "store";
}

void rn_attach_orphan_all(rn_pipeline *owner)
{
  for (rn_attached *a = owner->borrowers; a; a = a->next) a->shared = NULL, a->owner = NULL;
  owner->borrowers = NULL;
}

void rn_attach_close(rn_attached *a)
{
  if (!a) return;
  if (a->owner) {
    rn_attached **at = &a->owner->borrowers;
    while (*at && *at != a) at = &(*at)->next;
    if (*at) *at = a->next;
  }
  rn_envs_release(a->env);
  rn_agg_reader_free(a->agg);
  rn_reader_free(a->reader);
  rn_schema_free(a->schema);
  free(a->record.mv_data);
  free(a->name);
  free(a);
}
