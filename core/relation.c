/* relation.c — declaring relations and sending changes along the graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "derive.h"
#include "evolve.h"
#include "evolve_code.h"
#include "evolve_log.h"
#include "evolve_reads.h"
#include "json.h"
#include "key.h"
#include "ops.h"
#include "pipeline.h"
#include "store_sink.h"
#include "reader.h"
#include "row.h"
#include "verify.h"

rn_rel *rn_find(const rn_pipeline *p, const char *name)
{
  for (int i = 0; i < p->nrels; i++)
    if (strcmp(p->rels[i]->name, name) == 0) return p->rels[i];
  return NULL;
}

int rn_push_ptr(void ***arr, int *n, int *cap, void *item)
{
  if (*n == *cap) {
    int c = *cap ? *cap * 2 : 8;
    void **a = realloc(*arr, (size_t)c * sizeof *a);
    if (!a) return RN_ENOMEM;
    *arr = a;
    *cap = c;
  }
  (*arr)[(*n)++] = item;
  return 0;
}

int rn_check_declarable(rn_pipeline *p, const char *name)
{
  size_t len = strlen(name);
  char quoted[RN_NAME_MAX * 4 + 3]; /* the name in messages, its stray bytes escaped: a message is UTF-8 */
  if (p->state != RN_IDLE)
    return rn_err_set(&p->err, RN_EMISUSE, "relation %s: relations are declared outside groups and their callbacks",
                      rn_json_quote(quoted, sizeof quoted, name, len));
  int rc = rn_flush(p); /* a declaration writes in a transaction of its own */
  if (rc) return rc;
  if (!name[0]) return rn_err_set(&p->err, RN_EINVAL, "a relation needs a non-empty name");
  if (len > RN_NAME_MAX) /* its first 24 bytes or so, not cut inside a character */
    return rn_err_set(&p->err, RN_EINVAL, "relation name %s is %zu bytes; the limit is %d",
                      rn_json_quote(quoted, 30, name, len), len, RN_NAME_MAX);
  if (!rn_utf8_valid(name, len)) /* names are UTF-8: they reach JSON (CDC's source, inspect) and messages */
    return rn_err_set(&p->err, RN_EINVAL, "relation name %s is not valid UTF-8",
                      rn_json_quote(quoted, sizeof quoted, name, len));
  if (rn_find(p, name))
    return rn_err_set(&p->err, RN_EINVAL, "relation \"%s\" is already declared", name);
  MDB_txn *txn;
  if ((rc = rn_store_reader(&p->store, &txn, &p->err))) return rc;
  rc = rn_store_owner_check(p, txn, name); /* names are shared with stores */
  rn_store_reader_done(&p->store);
  return rc;
}

rn_rel *rn_rel_new(rn_pipeline *p, const char *name, rn_relkind kind, rn_schema *schema)
{
  rn_rel *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->name = strdup(name);
  if (!r->name || rn_push_ptr((void ***)&p->rels, &p->nrels, &p->relcap, r)) {
    free(r->name);
    free(r);
    return NULL;
  }
  r->p = p;
  r->kind = kind;
  r->ops = rn_rel_ops_of(kind);
  r->schema = schema;
  r->next_id = r->saved_next_id = r->lmdb_next_id = 1;
  return r;
}

void rn_rel_free(rn_rel *r)
{
  if (r->ctx && r->ops->free) r->ops->free(r->ctx);
  if (r->udata_free) r->udata_free(r->udata);
  if (r->kind != RN_REL_FILTER) rn_schema_free(r->schema);
  free(r->outputs);
  free(r->log.items);
  free(r->reads);
  free(r->rebuild_fill);
  free(r->untold_why);
  rn_schema_free(r->told_schema);
  free(r->added_slots);
  free(r->now_slots);
  rn_schema_free(r->waiting_schema);
  rn_schema_free(r->dropped_schema);
  for (int i = 0; r->stored_names && i < r->nstored; i++) free(r->stored_names[i]);
  free(r->stored_names);
  free(r->name);
  free(r);
}

/* Opens a named database "<prefix><name>" in txn. */
int rn_state_dbi(rn_pipeline *p, MDB_txn *txn, const char *prefix, const char *name,
                 unsigned flags, MDB_dbi *out)
{
  size_t plen = strlen(prefix), nlen = strlen(name);
  char *dbname = malloc(plen + nlen + 1);
  if (!dbname) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memcpy(dbname, prefix, plen);
  memcpy(dbname + plen, name, nlen + 1);
  int rc = rn_store_dbi_open(&p->store, txn, dbname, flags | MDB_CREATE, out);
  if (!rc) rc = mdb_set_compare(txn, *out, rn_store_key_cmp);
  free(dbname);
  return rc ? rn_store_fail(&p->err, rc, name) : 0;
}

/* A stored catalogue entry is one msgpack [kind, description]. */
static bool entry_decodes(rn_pipeline *p, const MDB_val *v)
{
  msgpack_object d;
  size_t off = 0;
  return rn_msgpack_size(v->mv_data, v->mv_size) == v->mv_size && /* before msgpack-c allocates what it claims */
         rn_unpack(v->mv_data, v->mv_size, &off, &p->scratch, &d) == MSGPACK_UNPACK_SUCCESS &&
         off == v->mv_size && d.type == MSGPACK_OBJECT_ARRAY && d.via.array.size == 2 &&
         d.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER;
}

/* A map or filter declared again with other columns: the columns its
 * stored entry v describes, with their defaults, kept until its sinks are
 * told what the change gave: a map's in r->told_schema (derive.c), a
 * filter's in r->waiting_schema (the told rows an earlier rebuild left
 * waiting are in them: rn_rebuild_opened). An entry that does not read
 * back keeps none: nothing is told. */
static int keep_entry_schema(rn_pipeline *p, rn_rel *r, const MDB_val *v)
{
  rn_schema_free(r->told_schema), rn_schema_free(r->waiting_schema);
  r->told_schema = r->waiting_schema = NULL;
  rn_schema **keep = r->kind == RN_REL_MAP ? &r->told_schema : r->kind == RN_REL_FILTER ? &r->waiting_schema : NULL;
  if (!keep || !r->tablelike) return 0;
  msgpack_object d;
  size_t off = 0;
  if (rn_unpack(v->mv_data, v->mv_size, &off, &p->scratch, &d) != MSGPACK_UNPACK_SUCCESS ||
      !rn_catalogue_entry_valid(&d))
    return 0;
  rn_err e = { .code = RN_OK };
  rn_schema *s = rn_attach_schema_of(&d.via.array.ptr[1], &e);
  if (!s) return e.code == RN_ENOMEM ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : 0;
  const msgpack_object *cols = &d.via.array.ptr[1].via.array.ptr[0];
  for (int i = 0; i < s->ncols; i++) {
    const msgpack_object *dv = &cols->via.array.ptr[i].via.array.ptr[3];
    if (dv->type != MSGPACK_OBJECT_NIL && rn_schema_set_default(s, i, dv, r->name, &e)) {
      rn_schema_free(s);
      return e.code == RN_ENOMEM ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : 0;
    }
  }
  *keep = s;
  return 0;
}

static size_t changed_key(const rn_rel *r, char *key);

/* A relation of another kind than a table declared new under the name of
 * a table p:drop removed: the rows that drop kept for what was over the
 * table (open_dropped) are no one's: forgotten, in txn. */
static int forget_dropped(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_DROPPED_ENTRY, r->name), key };
  int rc = mdb_del(txn, p->store.meta, &k, NULL);
  if (rc == MDB_NOTFOUND) return 0;
  MDB_dbi dbi;
  snprintf(key, sizeof key, "%s%s", RN_DB_DROPPED, r->name);
  if (!rc && (rc = rn_store_dbi_open(&p->store, txn, key, 0, &dbi)) == MDB_NOTFOUND) return 0;
  if (!rc) rc = mdb_drop(txn, dbi, 0);
  return rc ? rn_store_fail(&p->err, rc, r->name) : 0;
}

/* Source table r is declared while the rows of a table of its name that
 * p:drop removed are kept ("dk:" name, "dt:" name: drop.c): their columns
 * into r->dropped_schema and their database opened, in txn, for the
 * filters and maps over r to make from them the rows their sinks were
 * told (evolve_log.c). Rows that cannot be given in r's columns now: what
 * its sinks were told is not known (r->told_unknown), as the relations
 * over it say. */
static int open_dropped(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_DROPPED_ENTRY, r->name), key }, v;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  msgpack_object d;
  size_t off = 0;
  rn_schema *s = NULL;
  rn_err e = { .code = RN_OK };
  if (rn_msgpack_size(v.mv_data, v.mv_size) == v.mv_size &&
      rn_unpack(v.mv_data, v.mv_size, &off, &p->scratch, &d) == MSGPACK_UNPACK_SUCCESS &&
      rn_catalogue_entry_valid(&d))
    s = rn_attach_schema_of(&d.via.array.ptr[1], &e);
  if (!s && e.code == RN_ENOMEM) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  rn_schema_free(r->dropped_schema);
  r->dropped_schema = s;
  r->dropped_open = false;
  if (!s || !rn_dropped_fits(r)) { /* damaged, or not in these columns */
    r->told_unknown = true;
    return 0;
  }
  if ((rc = rn_state_dbi(p, txn, RN_DB_DROPPED, r->name, 0, &r->dropped_dbi))) return rc;
  r->dropped_open = true;
  p->rebuilt_any = true; /* the group that ends forgets them (rn_rebuild_told) */
  return 0;
}

/* Whether r numbers events of its own (a stream, a cdc relation, a stream
 * join), so ids it gives again meet earlier events in its sinks' logs (an
 * SQLite log, a consumer's store) where no row of the state shows them. */
static bool gives_event_ids(const rn_rel *r)
{
  return !r->tablelike && (r->kind == RN_REL_STREAM || r->kind == RN_REL_CDC || r->kind == RN_REL_JOIN);
}

/* The counters of a relation numbering events as a damaged catalogue
 * leaves them: next id 0 (ids start at 1); next id not past the events it
 * gave (its count, store.h); as of a group before the last one it gave
 * events in (its "ch:" record, written in the group that gave them, with
 * its counters: they moved); none for a stream or a cdc relation that gave
 * events. Each would give ids that earlier events hold in the logs its
 * sinks keep, where no row of the state shows them. have: "n:" was read;
 * seq: the counters' last seq. */
static int check_event_counters(rn_pipeline *p, rn_rel *r, MDB_txn *txn, bool have, uint64_t seq)
{
  if (!gives_event_ids(r)) return 0;
  if (have && r->next_id == 0)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the counters of relation \"%s\" give id 0 (ids "
                      "start at 1)", p->store.path, r->name);
  if (have && r->next_id <= r->count)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the counters of relation \"%s\" give next id %llu, "
                      "but it gave %llu events: it would give their ids again", p->store.path, r->name,
                      (unsigned long long)r->next_id, (unsigned long long)r->count);
  if (have && r->stateful) return 0; /* its counters are saved in every group */
  if (have && r->kind != RN_REL_STREAM && r->kind != RN_REL_CDC) return 0;
  char key[RN_PREFIX_LEN(RN_META_CHANGED) + RN_NAME_MAX];
  MDB_val k = { changed_key(r, key), key }, v;
  uint64_t changed = 0;
  if (mdb_get(txn, p->store.meta, &k, &v) == 0 && v.mv_size == sizeof changed) memcpy(&changed, v.mv_data, 8);
  if (have && changed > seq)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the counters of relation \"%s\" are as of group "
                      "%llu, but it gave events in group %llu: it would give their ids again", p->store.path,
                      r->name, (unsigned long long)seq, (unsigned long long)changed);
  if (have || !changed) return 0;
  return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the counters of relation \"%s\" are missing, but it "
                    "gave events in group %llu: it would give their ids again", p->store.path, r->name,
                    (unsigned long long)changed);
}

/* The next id relation r's name gave before it was dropped (meta "nd:",
 * written by rn_drop) into *next; 0 when it was never dropped. */
static int dropped_next(rn_pipeline *p, const rn_rel *r, MDB_txn *txn, uint64_t *next)
{
  char key[RN_PREFIX_LEN(RN_META_DROPPED_IDS) + RN_NAME_MAX];
  size_t nlen = strlen(r->name); /* names are checked at declaration (rn_check_declarable) */
  memcpy(key, RN_META_DROPPED_IDS, RN_PREFIX_LEN(RN_META_DROPPED_IDS));
  memcpy(key + RN_PREFIX_LEN(RN_META_DROPPED_IDS), r->name, nlen);
  MDB_val k = { RN_PREFIX_LEN(RN_META_DROPPED_IDS) + nlen, key }, v;
  *next = 0;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  if (v.mv_size != sizeof *next)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the ids relation \"%s\" gave before it was dropped "
                      "are %zu bytes, not 8", p->store.path, r->name, v.mv_size);
  memcpy(next, v.mv_data, sizeof *next);
  return 0;
}

/* A relation declared again after a drop goes on from the ids the dropped
 * one gave, whatever its kind: its durable sinks' logs (and the groups
 * still waiting for them in the outbox, OUTBOX-4, delivered after the
 * drop) hold those ids where no row of the state shows them any more, so
 * an id given again would make a change of a dropped row read as one of
 * a new row (a table's row 1 updated by the dropped table's group). */
static int continue_dropped(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  uint64_t next;
  int rc = dropped_next(p, r, txn, &next);
  if (!rc && next > r->next_id) r->next_id = r->saved_next_id = r->lmdb_next_id = next;
  return rc;
}

/* Reads or records |kind|schema| under "r:" name and the counters
 * |next_id|count|last seq| under "n:" name, in txn. *created says the
 * state held no such relation; *stale that derived state missed groups
 * (its last seq is not the pipeline's) and must be rebuilt. */
int rn_state_open(rn_pipeline *p, rn_rel *r, MDB_txn *txn, bool *created, bool *stale)
{
  /* its functions, recorded just before: with its entry, or not at all (a
   * relation of a kind that runs none takes no record left for its name) */
  bool runs_fns = r->kind == RN_REL_FILTER || r->kind == RN_REL_MAP || r->kind == RN_REL_JOIN ||
                  r->kind == RN_REL_AGGREGATE;
  if (runs_fns && rn_code_apply(p, r->name, txn)) return p->err.code;
  size_t nlen = strlen(r->name);
  char *mkey = malloc(nlen + 3);
  if (!mkey) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  msgpack_sbuffer desc;
  msgpack_sbuffer_init(&desc);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &desc, rn_buf_write);
  msgpack_pack_array(&pk, 2);
  msgpack_pack_int(&pk, r->kind);
  rn_schema_describe(r->schema, &pk);

  memcpy(mkey + 2, r->name, nlen + 1);
  memcpy(mkey, RN_META_RELATION, RN_PREFIX_LEN(RN_META_RELATION));
  MDB_val k = { nlen + 2, mkey }, v;
  *created = false;
  *stale = false;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == 0) {
    if ((v.mv_size != desc.size || memcmp(v.mv_data, desc.data, desc.size) != 0) && !entry_decodes(p, &v)) {
      rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the catalogue entry of relation \"%s\" is malformed",
                 p->store.path, r->name);
      goto fail;
    }
    if (v.mv_size != desc.size || memcmp(v.mv_data, desc.data, desc.size) != 0) {
      r->decl_changed = true;
      if (keep_entry_schema(p, r, &v)) goto fail;
      if (txn == p->store.wtxn) { /* derived: its rows as its sinks were told, before the entry changes */
        if (rn_rebuild_capture(r)) goto fail;
        if ((rc = mdb_get(txn, p->store.meta, &k, &v))) goto lmdb_fail; /* the capture wrote: bytes may move */
      }
      if (rn_evolve(p, r, txn, &k, &v, &desc, created)) goto fail; /* a rebuild is built as new state */
    }
  } else if (rc == MDB_NOTFOUND) {
    *created = true;
    r->decl_changed = r->decl_new = true;
    v.mv_size = desc.size;
    v.mv_data = desc.data;
    rc = mdb_put(txn, p->store.meta, &k, &v, 0);
    if (rc) goto lmdb_fail;
    if (r->kind != RN_REL_TABLE && forget_dropped(p, r, txn)) goto fail;
  } else {
    goto lmdb_fail;
  }
  memcpy(mkey, RN_META_COUNTERS, RN_PREFIX_LEN(RN_META_COUNTERS));
  rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == 0 && v.mv_size == 24) {
    uint64_t last_seq;
    memcpy(&r->next_id, v.mv_data, 8);
    memcpy(&r->count, (char *)v.mv_data + 8, 8);
    memcpy(&last_seq, (char *)v.mv_data + 16, 8);
    r->saved_next_id = r->lmdb_next_id = r->next_id;
    r->saved_count = r->lmdb_count = r->count;
    *stale = r->stateful && last_seq != p->seq;
    if (check_event_counters(p, r, txn, true, last_seq)) goto fail;
  } else if (rc == MDB_NOTFOUND && !*created && check_event_counters(p, r, txn, false, 0)) {
    goto fail;
  } else if (rc == MDB_NOTFOUND && r->stateful && !*created) {
    /* Written with its catalogue entry (rn_open_derived_state): lost, the
     * state it keeps (a join's result ids) would meet ids given again. */
    rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the counters of relation \"%s\" are missing", p->store.path,
               r->name);
    goto fail;
  } else if (rc == MDB_NOTFOUND) {
  } else if (rc == 0) { /* never read a malformed record as counters */
    rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the counters of relation \"%s\" are %zu bytes, not 24",
               p->store.path, r->name, v.mv_size);
    goto fail;
  } else {
    goto lmdb_fail;
  }
  if (continue_dropped(p, r, txn)) goto fail;
  if (rn_reads_load(p, r, txn)) goto fail; /* what its functions read: changed ones rebuild it too */
  if (rn_evolve_opened(p, r, txn, *created, stale)) goto fail; /* over a relation that changed: rebuilt */
  free(mkey);
  msgpack_sbuffer_destroy(&desc);
  return 0;
lmdb_fail:
  rn_store_fail(&p->err, rc, r->name);
fail:
  free(mkey);
  msgpack_sbuffer_destroy(&desc);
  return p->err.code;
}

int rn_state_save_counters(rn_pipeline *p, rn_rel *r, MDB_txn *txn, uint64_t seq)
{
  size_t nlen = strlen(r->name);
  char key[2 + RN_NAME_MAX]; /* names are checked at declaration (rn_check_declarable) */
  if (nlen > RN_NAME_MAX) return rn_err_set(&p->err, RN_EINVAL, "relation name is %zu bytes; the limit is %d", nlen, RN_NAME_MAX);
  memcpy(key, RN_META_COUNTERS, RN_PREFIX_LEN(RN_META_COUNTERS));
  memcpy(key + 2, r->name, nlen);
  uint64_t val[3] = { r->next_id, r->count, seq }; /* stateful: saw every group up to seq */
  MDB_val k = { nlen + 2, key }, v = { sizeof val, val };
  int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, r->name) : 0;
}

/* "ch:" name of r into key; its length. */
static size_t changed_key(const rn_rel *r, char *key)
{
  size_t nlen = strlen(r->name); /* names are checked at declaration (rn_check_declarable) */
  memcpy(key, RN_META_CHANGED, RN_PREFIX_LEN(RN_META_CHANGED));
  memcpy(key + RN_PREFIX_LEN(RN_META_CHANGED), r->name, nlen);
  return RN_PREFIX_LEN(RN_META_CHANGED) + nlen;
}

int rn_state_save_changed(rn_pipeline *p, rn_rel *r, MDB_txn *txn, uint64_t seq, bool all)
{
  uint64_t emitted = rn_rel_emitted(r);
  if (emitted != r->emitted_saved) {
    r->emitted_saved = emitted;
    r->changed_seq = seq;
  } else if (!all || !r->changed_seq) {
    return 0;
  }
  uint64_t last = r->changed_seq < seq ? r->changed_seq : seq; /* a group rolled back may have left it at seq + 1 */
  char key[RN_PREFIX_LEN(RN_META_CHANGED) + RN_NAME_MAX];
  MDB_val k = { changed_key(r, key), key }, v = { sizeof last, &last };
  int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, r->name) : 0;
}

uint64_t rn_state_changed(rn_pipeline *p, const rn_rel *r, MDB_txn *txn)
{
  char key[RN_PREFIX_LEN(RN_META_CHANGED) + RN_NAME_MAX];
  MDB_val k = { changed_key(r, key), key }, v;
  uint64_t last = 0;
  if (mdb_get(txn, p->store.meta, &k, &v) == 0) {
    if (v.mv_size != sizeof last) return UINT64_MAX; /* damaged: any group may have changed it, not none */
    memcpy(&last, v.mv_data, sizeof last);
  }
  if (r->stateful && r->kind != RN_REL_MAP) return last; /* rebuilt over what it missed, and told (evolve_log.c) */
  /* a keyed map keeps no rows: its rebuild sees its input's rows only as they are now */
  uint64_t in = r->input ? rn_state_changed(p, r->input, txn) : 0, right = r->right ? rn_state_changed(p, r->right, txn) : 0;
  if (in > last) last = in;
  return right > last ? right : last;
}

static int try_open_derived_state(rn_pipeline *p, rn_rel *r, rn_state_setup_fn setup, void *ctx)
{
  bool created = false, stale = false; /* read only when rn_state_open succeeds */
  rn_oom_clear();
  int rc = rn_store_begin(&p->store, &p->err);
  if (rc) return rc;
  p->group_serial++;
  p->state = RN_APPLYING; /* callbacks may read, not change tables */
  rc = rn_state_open(p, r, p->store.wtxn, &created, &stale);
  r->rebuild_tells = !rc && (!created || r->rebuild_captured); /* its rows before a rebuild: read in its layout
                                                                  * now, or captured in the old one */
  if (!rc) rc = setup(ctx, created, stale || created);
  r->rebuild_tells = false;
  if (!rc) rc = rn_rebuild_captured_done(r);
  if (!rc) rc = rn_rebuild_opened(r, p->store.wtxn, created);
  if (!rc) rc = rn_state_save_counters(p, r, p->store.wtxn, p->seq); /* current as of this seq */
  rc = rn_group_oom(p, rc); /* a truncated descriptor or rebuilt row must not be stored */
  msgpack_zone_clear(&p->scratch);
  p->state = RN_IDLE;
  if (!rc) rc = rn_store_commit(&p->store, &p->err);
  else rn_store_abort(&p->store);
  return rc;
}

/* try_open_derived_state, again after growing the map when LMDB filled it:
 * a rebuild (a relation declared over existing rows, or over one that
 * changed) writes all its state in that one transaction. A failed try is
 * taken back whole: its notes, marks and r's counters. */
int rn_open_derived_state(rn_pipeline *p, rn_rel *r, rn_state_setup_fn setup, void *ctx)
{
  uint64_t next_id = r->next_id, count = r->count;
  for (int tries = 0;; tries++) {
    int notes = p->nnotes; /* taken back if the declaration fails */
    size_t marks = p->evolved_len;
    int rc = try_open_derived_state(p, r, setup, ctx);
    if (!rc) { /* committed, a rebuild's rows counted: what a rollback goes back to */
      r->saved_next_id = r->lmdb_next_id = r->next_id;
      r->saved_count = r->lmdb_count = r->count;
      rn_code_done(p, true);
      return 0;
    }
    rn_evolve_forget(p, notes, marks);
    r->next_id = next_id, r->count = count;
    r->rebuilt_open = r->rebuilt_pending = false;
    rn_rebuild_capture_forget(r);
    if (p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL || tries >= 16 || rn_store_grow(&p->store, &p->err)) {
      rn_code_done(p, false); /* its functions' record goes with it */
      return p->err.code;
    }
  }
}

int rn_state_check_ids(rn_pipeline *p, rn_rel *r, MDB_txn *txn, MDB_dbi dbi, size_t not_ids,
                       bool (*holds_id)(const MDB_val *k))
{
  MDB_stat st;
  int rc = mdb_stat(txn, dbi, &st);
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  if (r->next_id + not_ids > st.ms_entries) return 0; /* ids 1..n, or fewer: none at or past next id */
  MDB_cursor *cur;
  if ((rc = mdb_cursor_open(txn, dbi, &cur))) return rn_store_fail(&p->err, rc, r->name);
  uint64_t top = 0;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (holds_id && !holds_id(&k)) continue;
    uint64_t id = UINT64_MAX; /* an entry too short to hold one: damaged, refused */
    if (v.mv_size >= 8) memcpy(&id, v.mv_data, 8);
    if (id > top) top = id;
  }
  mdb_cursor_close(cur);
  if (rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, r->name);
  if (r->next_id > top) return 0;
  return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: relation \"%s\" holds row id %llu, its counters say "
                    "next id %llu", p->store.path, r->name, (unsigned long long)top,
                    (unsigned long long)r->next_id);
}

/* A table's counters against its rows, as a damaged catalogue leaves
 * them ("n:" lost, cut or rewritten; "r:" lost over rows kept): new rows
 * would get ids that rows hold. Cheap checks only, on what LMDB counts:
 * a keyed table's entries (rows and the tombstones of deleted keys, each
 * under an id of its own, given from 1 up) number at least its rows and
 * fewer than next_id; a keyless table's are its rows, its last key its
 * largest id. A keyed table's ids are 1..n (its n entries: ROWID-1, -2;
 * from..from+n-1 when declared again after a drop, continue_dropped)
 * unless its counters once said more than it held: then, only then, its
 * largest id is read from every entry, as new ids at or below it would be
 * given twice (two keys under one id), unsaid. The first such open marks
 * the table (meta "ig:", store.h), and a marked table's largest id is
 * read at every open: its counters damaged again to exactly entries + 1
 * look like 1..n. An unmarked table costs one more lookup. */
static int largest_keyed_id(rn_pipeline *p, const rn_rel *r, MDB_txn *txn, uint64_t *top)
{
  MDB_cursor *cur;
  MDB_val k, v;
  int rc = mdb_cursor_open(txn, r->rows_dbi, &cur);
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  *top = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    uint64_t id = UINT64_MAX; /* an entry too short to hold one: damaged, refused */
    if (v.mv_size >= 9) memcpy(&id, v.mv_data, 8);
    if (id > *top) *top = id;
  }
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND ? 0 : rn_store_fail(&p->err, rc, r->name);
}

/* Reads (mark: NULL) or writes (top) keyed table r's gap mark "ig:" in
 * txn; *marked says whether it is there. */
static int gap_mark(rn_pipeline *p, const rn_rel *r, MDB_txn *txn, const uint64_t *top, bool *marked)
{
  char key[8 + RN_NAME_MAX];
  size_t nlen = strlen(r->name); /* names are checked at declaration (rn_check_declarable) */
  memcpy(key, RN_META_ID_GAPS, RN_PREFIX_LEN(RN_META_ID_GAPS));
  memcpy(key + RN_PREFIX_LEN(RN_META_ID_GAPS), r->name, nlen);
  MDB_val k = { RN_PREFIX_LEN(RN_META_ID_GAPS) + nlen, key }, v = { sizeof *top, (void *)top };
  int rc = top ? mdb_put(txn, p->store.meta, &k, &v, 0) : mdb_get(txn, p->store.meta, &k, &v);
  if (marked) *marked = rc == 0; /* of any size: a damaged mark still says "walk" */
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(&p->err, rc, r->name);
}

/* A keyed table's largest id against its counters (a walk: the table is
 * marked, or its counters are past entries + 1); marks it when not yet. */
static int check_keyed_ids(rn_pipeline *p, rn_rel *r, MDB_txn *txn, uint64_t entries, uint64_t *top)
{
  bool marked = false;
  uint64_t from = 0; /* declared again after a drop, its ids go on from the dropped one's (continue_dropped) */
  int rc = gap_mark(p, r, txn, NULL, &marked);
  if (!rc && !marked) rc = dropped_next(p, r, txn, &from);
  if (from < 1) from = 1;
  /* ids from..from+n-1 (1..n but after a drop, where counters damaged to
   * look like 1..n would give ids rows hold) */
  if (rc || (!marked && (r->next_id <= entries || from + entries == r->next_id))) return rc;
  if ((rc = largest_keyed_id(p, r, txn, top))) return rc;
  if (r->next_id <= *top)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: relation \"%s\" holds row id %llu, its counters say "
                      "next id %llu", p->store.path, r->name, (unsigned long long)*top,
                      (unsigned long long)r->next_id);
  return marked ? 0 : gap_mark(p, r, txn, top, NULL);
}

static int check_counters(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  MDB_stat st;
  int rc = mdb_stat(txn, r->rows_dbi, &st);
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  uint64_t entries = st.ms_entries, top = entries;
  bool ok = r->count <= entries;
  if (entries && r->schema->nkey == 0) {
    MDB_cursor *cur;
    MDB_val k, v;
    rc = mdb_cursor_open(txn, r->rows_dbi, &cur);
    if (!rc) rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
    if (!rc) top = k.mv_size == 8 ? rn_be64_get(k.mv_data) : UINT64_MAX;
    mdb_cursor_close(cur);
    if (rc) return rn_store_fail(&p->err, rc, r->name);
    ok = r->count == entries;
  }
  if (ok && r->schema->nkey && (rc = check_keyed_ids(p, r, txn, entries, &top))) return rc;
  if (ok && r->next_id > top) return 0;
  return rn_err_set(&p->err, RN_ESTORE,
                    "state damaged: %s: relation \"%s\" holds %llu entries, its counters say %llu rows and next id %llu",
                    p->store.path, r->name, (unsigned long long)entries, (unsigned long long)r->count,
                    (unsigned long long)r->next_id);
}

/* A source's meta and databases, in one transaction of its own. */
static int try_open_source_state(rn_pipeline *p, rn_rel *r)
{
  MDB_txn *txn;
  bool created, stale;
  rn_oom_clear();
  int rc = rn_store_txn(p->store.env, 0, &txn);
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  rc = rn_state_open(p, r, txn, &created, &stale);
  if (!rc && (r->kind == RN_REL_MAP || r->kind == RN_REL_FILTER))
    rc = rn_select_decl_record(r, txn); /* a select is read from outside through its input (reader.h) */
  if (!rc && (r->kind == RN_REL_MAP || r->kind == RN_REL_FILTER)) {
    rc = rn_rebuild_opened(r, txn, created); /* what a change of its function left untold (evolve_log.h) */
  }
  if (!rc && r->kind == RN_REL_TABLE) {
    rc = rn_state_dbi(p, txn, RN_DB_ROWS, r->name, 0, &r->rows_dbi);
    if (!rc && r->schema->nkey == 0)
      rc = rn_state_dbi(p, txn, RN_DB_ROW_HASHES, r->name, MDB_DUPSORT | MDB_DUPFIXED, &r->hash_dbi);
    if (!rc) rc = check_counters(p, r, txn);
    if (!rc) rc = open_dropped(p, r, txn);
  }
  rc = rn_group_oom(p, rc);
  if (rc) { mdb_txn_abort(txn); return rc; }
  rc = mdb_txn_commit(txn);
  return rc ? rn_store_write_fail(&p->store, &p->err, rc, r->name) : 0;
}

/* try_open_source_state, again after growing the map when LMDB filled it
 * (a schema change rewrites every row of a table in that one transaction);
 * the notes of a failed try are taken back. */
static int open_source_state(rn_pipeline *p, rn_rel *r)
{
  for (int tries = 0;; tries++) {
    int notes = p->nnotes;
    size_t marks = p->evolved_len;
    int rc = try_open_source_state(p, r);
    if (!rc) {
      rn_code_done(p, true);
      return 0;
    }
    rn_evolve_forget(p, notes, marks);
    r->rebuilt_open = r->rebuilt_pending = r->dropped_open = false; /* opened in the transaction taken back */
    if (p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL || tries >= 16 || rn_store_grow(&p->store, &p->err)) {
      rn_code_done(p, false); /* its functions' record goes with it */
      return p->err.code;
    }
  }
}

int rn_rel_record(rn_pipeline *p, rn_rel *r)
{
  return open_source_state(p, r);
}

void rn_rel_discard_last(rn_pipeline *p)
{
  rn_rel_free(p->rels[--p->nrels]);
}

int rn_declare_source(rn_pipeline *p, const char *name, rn_relkind kind,
                      rn_schema *schema, rn_rel **out)
{
  int rc = rn_check_declarable(p, name);
  if (rc) { rn_schema_free(schema); return rc; }
  if (kind == RN_REL_STREAM && schema->nkey) {
    rn_schema_free(schema);
    return rn_err_set(&p->err, RN_EINVAL, "%s: a stream has no key", name);
  }
  rn_rel *r = rn_rel_new(p, name, kind, schema);
  if (!r) { rn_schema_free(schema); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
  r->tablelike = kind == RN_REL_TABLE;
  r->persistent = true;
  rc = open_source_state(p, r);
  if (rc) { rn_rel_discard_last(p); return rc; }
  *out = r;
  return 0;
}

/* Unless rc already failed the declaration, makes *out, the relation that
 * owns ctx; it lives on used, a schema of its own (schema) or its input's.
 * On failure schema and ctx are released and the error returned. */
static int rel_owning(rn_pipeline *p, int rc, const char *name, rn_relkind kind, rn_schema *schema,
                      rn_schema *used, void *ctx, rn_rel **out)
{
  rn_rel *r = rc ? NULL : rn_rel_new(p, name, kind, used);
  if (!r) {
    const rn_rel_ops *ops = rn_rel_ops_of(kind);
    rn_schema_free(schema);
    if (ctx && ops->free) ops->free(ctx);
    return rc ? rc : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  r->ctx = ctx;
  *out = r;
  return 0;
}

/* in must be a relation of p: another pipeline's rows live in another
 * LMDB environment, and its changes in other groups. */
static int check_own(rn_pipeline *p, const char *name, const rn_rel *in)
{
  if (in->p == p) return 0;
  return rn_err_set(&p->err, RN_EINVAL, "%s: %s belongs to a different pipeline", name, in->name);
}

int rn_check_not_lookup(rn_pipeline *p, const char *name, const char *what, const rn_rel *in)
{
  if (in->kind != RN_REL_LOOKUP) return 0;
  return rn_err_set(&p->err, RN_EINVAL, "%s: %s is a lookup, whose rows are fetched only when a join asks for them: "
                    "no %s ever sees them (join a relation with %s instead)", name, in->name, what, in->name);
}

int rn_declare_derived(rn_pipeline *p, const char *name, rn_relkind kind, rn_rel *in,
                       rn_schema *schema, void *ctx, rn_rel **out)
{
  int rc = rn_check_declarable(p, name);
  if (!rc) rc = check_own(p, name, in);
  if (!rc) rc = rn_check_not_lookup(p, name, kind == RN_REL_FILTER ? "filter" : "map", in);
  rn_rel *r = NULL;
  rc = rel_owning(p, rc, name, kind, schema, kind == RN_REL_FILTER ? in->schema : schema, ctx, &r);
  if (rc) return rc;
  if (rn_push_ptr((void ***)&in->outputs, &in->noutputs, &in->outcap, r)) {
    rn_rel_discard_last(p);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  r->input = in;
  r->tablelike = in->tablelike;
  /* A filter or map goes in the catalogue here (inspect lists it, drop and
   * undeclared see it); a distinct, top or index when its state opens
   * (rn_open_derived_state), in the transaction that sees whether its
   * declaration changed and rebuilds it: recorded here first, the change
   * was committed unseen and the old state kept. */
  bool own_state = kind != RN_REL_FILTER && (kind != RN_REL_MAP || rn_derive_keeps_keys(ctx));
  if (!own_state && (rc = rn_rel_record(p, r))) {
    in->noutputs--;
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

int rn_declare_cdc_rel(rn_pipeline *p, const char *name, rn_rel *in, rn_schema *schema,
                       void *ctx, rn_rel **out)
{
  int rc = rn_check_declarable(p, name);
  if (!rc) rc = check_own(p, name, in);
  if (!rc) rc = rn_check_not_lookup(p, name, "cdc", in);
  if (!rc && !in->tablelike)
    rc = rn_err_set(&p->err, RN_EINVAL,
                    "%s: cdc needs a table-like relation (a table, or a filter or map of one); %s is a stream",
                    name, in->name);
  rn_rel *r = NULL;
  rc = rel_owning(p, rc, name, RN_REL_CDC, schema, schema, ctx, &r);
  if (rc) return rc;
  r->input = in;
  r->persistent = true;
  rc = open_source_state(p, r);
  if (rc) { rn_rel_discard_last(p); return rc; }
  in->listeners++; /* it reads in's log at commit */
  *out = r;
  return 0;
}

int rn_emit(rn_rel *rel, const rn_change *c)
{
  if (!rel->p->replaying) rel->emitted[c->verb - 1]++;
  if (rel->listeners) {
    int rc = rn_log_append(rel->p, rel, c);
    if (rc) return rc;
  }
  for (int i = 0; i < rel->noutputs; i++) {
    rn_rel *out = rel->outputs[i];
    if (rel->p->telling && (out->stateful || out->rebuilt_pending))
      continue; /* rebuilt, or a filter or map whose own changes tell these too: it holds them already */
    int rc = out->ops->apply(out, rel, c);
    if (rc) return rc;
  }
  return 0;
}
