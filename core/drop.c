/* drop.c — removing a relation's state, and listing what the state holds
 * that no declaration claims (p:drop, runnel drop, p:undeclared).
 *
 * A relation is named in the catalogue by "r:" name and "n:" name and keeps
 * its rows and operator state in named databases "<prefix>" name (store.h);
 * it leaves its next id ("nd:" name) behind;
 * a permanent store by "S:" name and "st:" name. Dropping removes all of
 * them in one transaction; a store only when no relation has its name
 * (they are named apart). A relation declared in this pipeline is not
 * dropped from under its handles: with dependants the refusal names them,
 * without, it says to drop it before declaring it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evolve.h"
#include "evolve_code.h"
#include "json.h"
#include "key.h"
#include "lookup.h"
#include "notes.h"
#include "outbox.h"
#include "pipeline.h"
#include "reader.h"
#include "store_sink.h"

/* The relations declared in p that read rel (joins, derived, cdc) into buf. */
static int dependants(rn_pipeline *p, const rn_rel *rel, char *buf, size_t len)
{
  int n = 0;
  size_t off = 0;
  buf[0] = '\0';
  for (int i = 0; i < p->nrels; i++) {
    const rn_rel *r = p->rels[i];
    bool reads = r->input == rel;
    for (int o = 0; o < rel->noutputs && !reads; o++) reads = rel->outputs[o] == r;
    if (!reads || r == rel) continue;
    if (off + 4 < len) off += (size_t)snprintf(buf + off, len - off, "%s\"%s\"", n ? ", " : "", r->name);
    n++;
  }
  return n;
}

/* Deletes the meta key prefix name, if present. */
static int del_meta(rn_pipeline *p, MDB_txn *txn, const char *prefix, const char *name, bool *found)
{
  char key[RN_NAME_MAX + 8];
  int klen = snprintf(key, sizeof key, "%s%s", prefix, name);
  MDB_val k = { (size_t)klen, key };
  int rc = mdb_del(txn, p->store.meta, &k, NULL);
  if (rc == 0) *found = true;
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : rn_store_fail(&p->err, rc, name);
}

/* Deletes the named databases "<prefix>" name from txn: a store's ("st:")
 * when store, else a relation's (every other prefix). */
static int del_databases(rn_pipeline *p, MDB_txn *txn, const char *name, bool store, bool *found)
{
  MDB_dbi main_dbi;
  MDB_cursor *cur;
  int rc = rn_store_dbi_open(&p->store, txn, NULL, 0, &main_dbi);
  if (!rc) rc = mdb_cursor_open(txn, main_dbi, &cur);
  if (rc) return rn_store_fail(&p->err, rc, name);
  size_t nlen = strlen(name);
  char dkey[RN_NAME_MAX + 8];
  MDB_val dk = { (size_t)snprintf(dkey, sizeof dkey, "%s%s", RN_META_DROPPED_ENTRY, name), dkey }, dv;
  bool kept = mdb_get(txn, p->store.meta, &dk, &dv) == 0;
  char (*names)[RN_NAME_MAX + 8] = NULL;
  int n = 0;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char *colon = memchr(k.mv_data, ':', k.mv_size);
    size_t plen = colon ? (size_t)(colon - (const char *)k.mv_data) + 1 : 0;
    if (!colon || plen > 4 || k.mv_size - plen != nlen || memcmp(colon + 1, name, nlen) != 0) continue;
    bool of_store = plen == RN_PREFIX_LEN(RN_DB_STORE) && memcmp(k.mv_data, RN_DB_STORE, plen) == 0;
    if (of_store != store) continue; /* a relation and a store may share a name */
    if (kept && plen == RN_PREFIX_LEN(RN_DB_DROPPED) && memcmp(k.mv_data, RN_DB_DROPPED, plen) == 0)
      continue; /* the rows this drop kept (keep_dropped_rows); without "dk:" name, an emptied one goes */
    void *grown = realloc(names, sizeof *names * (size_t)(n + 1));
    if (!grown) { rc = RN_ENOMEM; break; }
    names = grown;
    memcpy(names[n], k.mv_data, k.mv_size);
    names[n++][k.mv_size] = '\0';
  }
  mdb_cursor_close(cur);
  if (rc == RN_ENOMEM) { free(names); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
  rc = 0;
  for (int i = 0; i < n && !rc; i++) { /* closed handles first: dropping a database closes its handle */
    MDB_dbi dbi;
    rc = rn_store_dbi_open(&p->store, txn, names[i], 0, &dbi);
    if (!rc) rc = mdb_drop(txn, dbi, 1);
    if (!rc) *found = true;
    if (rc) rn_store_fail(&p->err, rc, name);
  }
  free(names);
  return rc ? p->err.code : 0;
}

/* A relation leaves the next id it would have given under "nd:" name,
 * raised, never lowered: one declared again goes on from it, whatever its
 * kind (relation.c, continue_dropped), as its sinks' logs and the groups
 * waiting for them hold the dropped one's ids (store.h). */
static int keep_ids(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  char key[RN_NAME_MAX + 8];
  MDB_val k = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_RELATION, name), key }, v;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == MDB_NOTFOUND) return 0; /* a store, or nothing */
  uint64_t next = 0, kept = 0;
  k.mv_size = (size_t)snprintf(key, sizeof key, "%s%s", RN_META_COUNTERS, name);
  if ((rc = mdb_get(txn, p->store.meta, &k, &v)) == 0 && v.mv_size == 24) memcpy(&next, v.mv_data, 8);
  k.mv_size = (size_t)snprintf(key, sizeof key, "%s%s", RN_META_DROPPED_IDS, name);
  if ((rc = mdb_get(txn, p->store.meta, &k, &v)) == 0 && v.mv_size == 8) memcpy(&kept, v.mv_data, 8);
  if (next <= 1 || next <= kept) return 0;
  v = (MDB_val){ sizeof next, &next };
  rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, name) : 0;
}

/* A dropped table's rows as keep_dropped_rows copies them. */
typedef struct kept_rows {
  MDB_txn *txn;
  MDB_dbi dbi;
  int rc;                 /* a put failed: its LMDB code */
} kept_rows;

static int keep_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  kept_rows *k = ctx;
  char kb[8];
  rn_be64_put(kb, id);
  MDB_val key = { 8, kb }, v = { len, (void *)row };
  return k->rc = mdb_put(k->txn, k->dbi, &key, &v, 0);
}

/* Whether the catalogue holds a filter or a map p has not declared: only
 * such a relation, declared again over a table of a dropped one's name,
 * reads the rows the drop kept (the catalogue does not say what a filter
 * or map reads, so any one counts). One p declared is over a relation p
 * declared, never over the dropped table. */
static int tellers_left(rn_pipeline *p, MDB_txn *txn, const char *name, bool *any)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, p->store.meta, &cur);
  if (rc) return rn_store_fail(&p->err, rc, name);
  size_t plen = RN_PREFIX_LEN(RN_META_RELATION);
  MDB_val k = { plen, (void *)RN_META_RELATION }, v;
  *any = false;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; mrc == 0 && !*any; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size < plen || memcmp(k.mv_data, RN_META_RELATION, plen) != 0) break;
    const unsigned char *d = v.mv_data; /* [kind (a fixint), …] */
    if (v.mv_size < 2 || (d[1] != RN_REL_FILTER && d[1] != RN_REL_MAP)) continue;
    char rname[RN_NAME_MAX + 1];
    snprintf(rname, sizeof rname, "%.*s", (int)(k.mv_size - plen), (const char *)k.mv_data + plen);
    *any = !rn_find(p, rname);
  }
  mdb_cursor_close(cur);
  return mrc && mrc != MDB_NOTFOUND ? rn_store_fail(&p->err, mrc, name) : 0;
}

/* With no filter or map left to read them (tellers_left), the rows every
 * earlier drop kept ("dk:" name, "dt:" name) are no one's: forgotten in
 * txn, so a state whose dropped tables are never declared again does not
 * keep their rows for good. A table p declared again keeps its own: the
 * filters and maps p declared over it read them until a group ends. */
static int forget_unread_dropped(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  bool any;
  int rc = tellers_left(p, txn, name, &any);
  if (rc || any) return rc;
  MDB_cursor *cur;
  if ((rc = mdb_cursor_open(txn, p->store.meta, &cur))) return rn_store_fail(&p->err, rc, name);
  size_t plen = RN_PREFIX_LEN(RN_META_DROPPED_ENTRY);
  MDB_val k = { plen, (void *)RN_META_DROPPED_ENTRY }, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; mrc == 0 && !rc; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size < plen || memcmp(k.mv_data, RN_META_DROPPED_ENTRY, plen) != 0) break;
    char kept[RN_NAME_MAX + 1], dbname[RN_NAME_MAX + 8];
    snprintf(kept, sizeof kept, "%.*s", (int)(k.mv_size - plen), (const char *)k.mv_data + plen);
    if (rn_find(p, kept)) continue;
    if ((rc = mdb_cursor_del(cur, 0))) { rc = rn_store_fail(&p->err, rc, kept); break; }
    snprintf(dbname, sizeof dbname, "%s%s", RN_DB_DROPPED, kept);
    MDB_dbi dbi;
    int drc = rn_store_dbi_open(&p->store, txn, dbname, 0, &dbi);
    if (!drc) drc = mdb_drop(txn, dbi, 1); /* the database too: a name never declared again leaves nothing */
    if (drc && drc != MDB_NOTFOUND) rc = rn_store_fail(&p->err, drc, kept);
  }
  mdb_cursor_close(cur);
  return rc ? rc : mrc && mrc != MDB_NOTFOUND ? rn_store_fail(&p->err, mrc, name) : 0;
}

/* A table's rows go with it, but the sinks of the filters and maps left
 * over it (not dropped: a declared one refuses the drop) were told them:
 * its rows are copied under "dt:" name and its catalogue entry under
 * "dk:" name (store.h), read when a table of that name is declared again
 * (relation.c), so those filters and maps, declared over it, tell their
 * sinks the rows that left as the joins, aggregates, tops and indexes over
 * it do (evolve_log.c), and forgotten by the first group that ends then.
 * A table without rows keeps what an earlier drop kept (no group ended
 * with it declared since, or it would hold none); another kind keeps
 * nothing. */
static int keep_dropped_rows(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  char key[RN_NAME_MAX + 8];
  MDB_val rk = { (size_t)snprintf(key, sizeof key, "%s%s", RN_META_RELATION, name), key }, v;
  int rc = mdb_get(txn, p->store.meta, &rk, &v);
  if (rc == MDB_NOTFOUND) return 0; /* a store, or nothing */
  if (rc) return rn_store_fail(&p->err, rc, name);
  const unsigned char *d = v.mv_data; /* [kind (a fixint), …] */
  bool table = v.mv_size >= 2 && (d[0] & 0xf0) == 0x90 && d[1] == RN_REL_TABLE;
  char dkey[RN_NAME_MAX + 8];
  MDB_val dk = { (size_t)snprintf(dkey, sizeof dkey, "%s%s", RN_META_DROPPED_ENTRY, name), dkey };
  if (!table) {
    rc = mdb_del(txn, p->store.meta, &dk, NULL);
    return rc && rc != MDB_NOTFOUND ? rn_store_fail(&p->err, rc, name) : 0;
  }
  bool tellers;
  if ((rc = tellers_left(p, txn, name, &tellers)) || !tellers) return rc; /* none to read them (forget_unread_dropped) */
  char rows_name[RN_NAME_MAX + 8];
  snprintf(rows_name, sizeof rows_name, "%s%s", RN_DB_ROWS, name);
  MDB_dbi rows;
  MDB_stat st = { 0 };
  rc = rn_store_dbi_open(&p->store, txn, rows_name, 0, &rows);
  if (!rc) rc = mdb_stat(txn, rows, &st);
  if (rc == MDB_NOTFOUND || (!rc && st.ms_entries == 0)) return 0;
  if (rc) return rn_store_fail(&p->err, rc, name);
  char *entry = malloc(v.mv_size); /* LMDB's bytes move with the puts */
  if (!entry) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memcpy(entry, v.mv_data, v.mv_size);
  MDB_val ev = { v.mv_size, entry };
  rn_reader *rd = NULL;
  rn_err e = { .code = RN_OK };
  kept_rows k = { .txn = txn };
  rc = rn_state_dbi(p, txn, RN_DB_DROPPED, name, 0, &k.dbi);
  if (!rc && (rc = mdb_drop(txn, k.dbi, 0))) rc = rn_store_fail(&p->err, rc, name);
  int rrc = rc ? 0 : rn_reader_open(txn, p->store.meta, p->store.path, name, &rd, &e);
  if (!rc && !rrc && (rrc = rn_reader_each(rd, txn, keep_row, &k, &e)) && k.rc) rc = rn_store_fail(&p->err, k.rc, name);
  if (!rc && rrc && (rrc == RN_ENOMEM || rrc == RN_EFULL || rrc == RN_EIO)) p->err = e, rc = rrc;
  if (!rc && rrc) {
    rc = mdb_drop(txn, k.dbi, 0);
    if (!rc && (rc = mdb_del(txn, p->store.meta, &dk, NULL)) == MDB_NOTFOUND) rc = 0;
    if (rc) rc = rn_store_fail(&p->err, rc, name);
  }
  /* rows that cannot be read (the drop of a damaged table): none kept, the drop goes on */
  if (!rc && !rrc && (rc = mdb_put(txn, p->store.meta, &dk, &ev, 0))) rc = rn_store_fail(&p->err, rc, name);
  rn_reader_free(rd);
  free(entry);
  return rc ? p->err.code : 0;
}

/* Whether the order (a top or an index) `order` reads `input`, as its
 * "tp:" declaration records. */
static bool order_reads(rn_pipeline *p, MDB_txn *txn, const char *order, size_t olen, const char *input)
{
  char dbname[RN_NAME_MAX + 8];
  snprintf(dbname, sizeof dbname, "%s%.*s", RN_DB_TOP_DECL, (int)olen, order);
  MDB_dbi dbi;
  static char input_key[] = "input";
  MDB_val k = { 5, input_key }, v;
  return rn_store_dbi_open(&p->store, txn, dbname, 0, &dbi) == 0 && mdb_get(txn, dbi, &k, &v) == 0 &&
         v.mv_size == strlen(input) && memcmp(v.mv_data, input, v.mv_size) == 0;
}

/* A top or an index holds the row ids of the table it reads: once that is
 * dropped (and maybe declared again, its ids going on), they name no row.
 * Each stored one over name is made stale, its counters as of group 0, so
 * that it is rebuilt when declared again, and read as stale until then
 * (runnel verify notes it), as one that missed groups. */
static int orders_stale(rn_pipeline *p, MDB_txn *txn, const char *name)
{
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, p->store.meta, &cur);
  if (rc) return rn_store_fail(&p->err, rc, name);
  size_t plen = RN_PREFIX_LEN(RN_META_RELATION);
  MDB_val k = { plen, (void *)RN_META_RELATION }, v;
  char **stale = NULL; /* written after the walk: a put under the cursor would move it */
  size_t n = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size < plen || memcmp(k.mv_data, RN_META_RELATION, plen) != 0) break;
    size_t olen = k.mv_size - plen;
    /* |kind|…|: a msgpack array whose first item is a positive fixint */
    const unsigned char *d = v.mv_data;
    bool order = v.mv_size >= 2 && (d[0] & 0xf0) == 0x90 && (d[1] == RN_REL_TOP || d[1] == RN_REL_INDEX);
    if (!order || olen > RN_NAME_MAX || !order_reads(p, txn, (const char *)k.mv_data + plen, olen, name)) continue;
    char **more = realloc(stale, sizeof *stale * (n + 1));
    char *copy = more ? strndup((const char *)k.mv_data + plen, olen) : NULL;
    if (more) stale = more;
    if (!copy) { rc = ENOMEM; break; }
    stale[n++] = copy;
  }
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) rc = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    char key[RN_NAME_MAX + 8];
    k = (MDB_val){ (size_t)snprintf(key, sizeof key, "%s%s", RN_META_COUNTERS, stale[i]), key };
    uint64_t counters[3];
    if (mdb_get(txn, p->store.meta, &k, &v) != 0 || v.mv_size != sizeof counters) continue; /* none: rebuilt anyway */
    memcpy(counters, v.mv_data, sizeof counters);
    counters[2] = 0;
    v = (MDB_val){ sizeof counters, counters };
    rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  }
  for (size_t i = 0; i < n; i++) free(stale[i]);
  free(stale);
  if (rc == ENOMEM) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  return rc ? rn_store_fail(&p->err, rc, name) : 0;
}

/* A note for each durable sink of the dropped relation (ctx: its name)
 * whose groups still wait: the drop leaves them (outbox.c (OUTBOX-10)). */
typedef struct dropped_sinks {
  rn_pipeline *p;
  const char *name;
} dropped_sinks;

static int note_waiting(void *ctx, const rn_outbox_kept *k)
{
  const dropped_sinks *d = ctx;
  if (!k->groups || strcmp(k->relation, d->name) != 0) return 0;
  char shown[2048]; /* as a Lua string: the label may hold quotes (a table's name) */
  /* a log (NDJSON, JetStream) delivers them in the columns they were
   * committed with (outbox.c (11)); the others need those columns again */
  bool log = k->log || !strncmp(k->key, RN_SINK_NDJSON, RN_PREFIX_LEN(RN_SINK_NDJSON)) ||
             !strncmp(k->key, RN_SINK_JETSTREAM, RN_PREFIX_LEN(RN_SINK_JETSTREAM));
  return rn_evolve_note(d->p, "drop \"%s\": %llu group%s (%llu row%s) since group %llu still wait%s for its %s: "
                        "%s declared again %s and the sink gets them%s, p:drop_outbox(%s) drops "
                        "them", d->name, (unsigned long long)k->groups, k->groups == 1 ? "" : "s",
                        (unsigned long long)k->rows, k->rows == 1 ? "" : "s", (unsigned long long)k->since,
                        k->groups == 1 ? "s" : "", k->label, d->name, log ? "(with any columns)" : "with its columns",
                        log ? " as they were committed" : "",
                        rn_json_quote(shown, sizeof shown, k->shown, strlen(k->shown)));
}

static int try_drop(rn_pipeline *p, const char *name, bool *found_out, bool *store_out);

RN_API int rn_drop(rn_pipeline *p, const char *name)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (!name) return rn_err_set(&p->err, RN_EINVAL, "drop: the name is NULL");
  char quoted[RN_NAME_MAX * 4 + 3]; /* the name as messages quote it: a message is UTF-8 whatever the name */
  if (p->state != RN_IDLE) /* in a group, or in a callback after one (a durable sink, an on_durable hook) */
    return rn_err_set(&p->err, RN_EMISUSE, "drop %s: not inside a group or a callback",
                      rn_json_quote(quoted, sizeof quoted, name, strlen(name)));
  if (strlen(name) > RN_NAME_MAX) /* its first 24 bytes or so, not cut inside a character */
    return rn_err_set(&p->err, RN_ENOTFOUND, "drop: no relation %s", rn_json_quote(quoted, 30, name, strlen(name)));
  rn_rel *rel = rn_find(p, name);
  if (rel) {
    char names[1024];
    int n = dependants(p, rel, names, sizeof names);
    if (n)
      return rn_err_set(&p->err, RN_EMISUSE, "drop \"%s\": %s declared relation%s read%s it: %s (drop %s first)", name,
                        n == 1 ? "a" : "these", n == 1 ? "" : "s", n == 1 ? "s" : "", names, n == 1 ? "it" : "them");
    return rn_err_set(&p->err, RN_EMISUSE,
                      "drop \"%s\": it is declared in this pipeline; drop it before declaring it (at the start of "
                      "the new deploy), or with runnel drop while no pipeline has the state open", name);
  }
  /* A store a sink declared here writes (of another relation than the
   * name's: no relation has its name, store_sink.c): dropped, its database
   * handle would be closed under the sink, and every later group fail on
   * it ("Invalid argument"). */
  const rn_rel *writer = rn_store_sink_writer(p, name);
  if (writer)
    return rn_err_set(&p->err, RN_EMISUSE,
                      "drop \"%s\": the store sink of \"%s\" declared in this pipeline writes it; drop it before "
                      "declaring the sink (at the start of the new deploy), or with runnel drop while no pipeline has "
                      "the state open", name, writer->name);
  /* A lookup declared here that reads it through runnel.attach: the
   * relations read it, as a join reads its input. */
  const rn_rel *lookup = rn_lookup_reading(p, name);
  if (lookup)
    return rn_err_set(&p->err, RN_EMISUSE, "drop \"%s\": lookup \"%s\" declared in this pipeline reads it (its "
                      "source attaches it); drop it before declaring the lookup, or with runnel drop while no "
                      "pipeline has the state open", name, lookup->name);
  int rc = rn_flush(p);
  if (rc) return rc;
  bool found, store;
  for (int tries = 0;; tries++) { /* the rows kept may fill the map: tried again after growing it */
    found = store = false;
    rc = try_drop(p, name, &found, &store);
    if (!rc || p->err.code != RN_EFULL || p->err.cause != MDB_MAP_FULL || tries >= 16) break;
    if ((rc = rn_store_grow(&p->store, &p->err))) break;
  }
  rn_attach_handles_closed(p); /* the dropped databases' handles are closed: attaches open theirs again */
  if (rc) return rc;
  if (!store) { /* notes only: the drop is done, a failure to read the outbox says nothing */
    rn_outbox_undeclared(p, note_waiting, &(dropped_sinks){ p, name });
    rn_err_clear(&p->err);
  }
  rn_notes_tell(p);
  return 0;
}

/* rn_drop's transaction: relation (or store) name removed, committed. */
static int try_drop(rn_pipeline *p, const char *name, bool *found_out, bool *store_out)
{
  char quoted[RN_NAME_MAX * 4 + 3];
  MDB_txn *txn;
  int rc;
  if ((rc = rn_store_txn(p->store.env, 0, &txn))) return rn_store_fail(&p->err, rc, name);
  bool found = false, store = false;
  rc = keep_ids(p, txn, name);
  if (!rc) rc = orders_stale(p, txn, name);
  if (!rc) rc = keep_dropped_rows(p, txn, name);
  if (!rc) rc = del_meta(p, txn, RN_META_RELATION, name, &found);
  if (!rc) rc = del_meta(p, txn, RN_META_COUNTERS, name, &found);
  bool decl = false;
  if (!rc) rc = del_meta(p, txn, RN_META_AGG_DECL, name, &decl);
  if (!rc) rc = del_meta(p, txn, RN_META_CODE, name, &decl); /* its functions' fingerprint (evolve_code.h) */
  if (!rc) rc = del_meta(p, txn, RN_META_FN_NOW, name, &decl); /* the function to run again */
  if (!rc) rc = del_meta(p, txn, RN_META_FN_TOLD, name, &decl);
  if (!rc) rc = del_meta(p, txn, RN_META_READS, name, &decl); /* what they read (evolve_reads.h) */
  if (!rc) rc = del_meta(p, txn, RN_META_CHANGED_AT, name, &decl); /* its last wholesale change (evolve.c) */
  if (!rc) rc = del_meta(p, txn, RN_META_CHANGED, name, &decl); /* its last changing group: one declared again is new */
  if (!rc) rc = del_meta(p, txn, RN_META_ID_GAPS, name, &decl); /* its ids' gaps: one declared again has none */
  if (!rc && !found) rc = del_meta(p, txn, RN_META_STORE, name, &store); /* no relation: a store of that name */
  bool seen = false;
  if (!rc && store) rc = del_meta(p, txn, RN_META_STORE_SEEN, name, &seen);
  if (!rc && store) rc = del_meta(p, txn, RN_META_STORE_OWNER, name, &seen);
  if (!rc && (found || store)) rc = del_databases(p, txn, name, store, &found);
  found |= store;
  if (!rc && found) rc = forget_unread_dropped(p, txn, name);
  if (!rc && !found) rc = rn_err_set(&p->err, RN_ENOTFOUND, "drop: the state at %s holds no relation or store %s",
                                     p->store.path, rn_json_quote(quoted, sizeof quoted, name, strlen(name)));
  *found_out = found, *store_out = store;
  if (rc) { mdb_txn_abort(txn); return rc; }
  rc = mdb_txn_commit(txn);
  return rc ? rn_store_write_fail(&p->store, &p->err, rc, name) : 0;
}

/* A relation rn_undeclared tells of. */
typedef struct undeclared {
  char *name;
  const char *kind;
} undeclared;

static void undeclared_free(undeclared *list, size_t n)
{
  for (size_t i = 0; i < n; i++) free(list[i].name);
  free(list);
}

/* The relations the state holds that p has not declared, in name order,
 * into *list (*n of them), read in one walk of the catalogue. */
static int undeclared_read(rn_pipeline *p, undeclared **list, size_t *n)
{
  MDB_txn *txn;
  int rc = rn_store_reader(&p->store, &txn, &p->err);
  if (rc) return rc;
  MDB_cursor *cur;
  if ((rc = mdb_cursor_open(txn, p->store.meta, &cur))) {
    rn_store_reader_done(&p->store);
    return rn_store_fail(&p->err, rc, "undeclared");
  }
  size_t cap = 0;
  MDB_val k = { 2, (void *)RN_META_RELATION }, v;
  int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; mrc == 0 && !rc; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size < 2 || memcmp(k.mv_data, RN_META_RELATION, 2) != 0) break;
    char name[RN_NAME_MAX + 1];
    snprintf(name, sizeof name, "%.*s", (int)(k.mv_size - 2), (const char *)k.mv_data + 2);
    if (rn_find(p, name)) continue;
    int64_t kind = v.mv_size > 1 ? ((const unsigned char *)v.mv_data)[1] : -1; /* [kind (a fixint), …] */
    if (*n == cap) {
      undeclared *grown = realloc(*list, sizeof **list * (cap ? cap * 2 : 16));
      if (!grown) { rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory"); break; }
      *list = grown;
      cap = cap ? cap * 2 : 16;
    }
    if (!((*list)[*n].name = strdup(name))) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    else (*list)[(*n)++].kind = rn_relkind_name(kind);
  }
  mdb_cursor_close(cur);
  rn_store_reader_done(&p->store);
  return rc;
}

/* Does the state still hold relation name? (fn may have dropped one the
 * walk listed after the one it was told of.) */
static int still_held(rn_pipeline *p, const char *name, bool *held)
{
  MDB_txn *txn;
  int rc = rn_store_reader(&p->store, &txn, &p->err);
  if (rc) return rc;
  char key[2 + RN_NAME_MAX];
  size_t len = strlen(name);
  memcpy(key, RN_META_RELATION, 2);
  memcpy(key + 2, name, len);
  MDB_val k = { 2 + len, key }, v;
  int mrc = mdb_get(txn, p->store.meta, &k, &v);
  rn_store_reader_done(&p->store);
  if (mrc && mrc != MDB_NOTFOUND) return rn_store_fail(&p->err, mrc, "undeclared");
  *held = mrc == 0;
  return 0;
}

/* fn runs after the walk: it may drop what it is told of (rn_drop commits
 * carried groups, and LMDB frees a cursor of that transaction) or read
 * (which ends the shared read transaction the walk would use). */
RN_API int rn_undeclared(rn_pipeline *p, rn_undeclared_fn fn, void *ctx)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (!fn) return rn_err_set(&p->err, RN_EINVAL, "rn_undeclared needs a callback");
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  undeclared *list = NULL;
  size_t n = 0;
  int rc = undeclared_read(p, &list, &n);
  p->held++; /* fn may drop, not close: the walk goes on with p */
  for (size_t i = 0; !rc && i < n; i++) {
    bool held = true;
    if (i > 0) rc = still_held(p, list[i].name, &held); /* fn may have dropped it */
    if (!rc && held && !rn_find(p, list[i].name)) rc = fn(ctx, list[i].name, list[i].kind); /* or declared it */
  }
  p->held--;
  undeclared_free(list, n);
  return rc;
}
