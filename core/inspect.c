/* inspect.c — reading a state directory's catalogue (runnel inspect). */
#include <lmdb.h>
#include <stdbool.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envs.h"
#include "json.h"
#include "key.h"
#include "outbox.h"
#include "pipeline.h"
#include "row.h"
#include "upgrade.h"
#include "verify.h"

/* A catalogue entry "r:" name is |kind|[columns, key]|, each column
 * [name, type, nullable, default, …] and key the slots of its columns
 * (schema.c): anything else is damage, never read as zeros. */
/* The kinds a catalogue entry may name: every kind (a filter, map or lookup
 * keeps only its entry: its rows are computed or fetched from outside). A
 * new operator is added here. */
static bool stored_kind(uint64_t kind)
{
  return kind <= RN_REL_INDEX; /* every relation is listed (issue 14), top and index too */
}

bool rn_catalogue_entry_valid(const msgpack_object *d)
{
  return d->type == MSGPACK_OBJECT_ARRAY && d->via.array.size == 2 &&
         d->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && stored_kind(d->via.array.ptr[0].via.u64) &&
         rn_schema_desc_valid(&d->via.array.ptr[1], 0);
}

/* The schema description (schema.c), checked by rn_catalogue_entry_valid, as
 * "name type [key] [null] [= default], …", into out (len bytes): false when
 * it does not fit there (what fits is written). */
static bool describe(const msgpack_object *d, char *out, size_t len)
{
  size_t off = 0;
  out[0] = '\0';
  if (d->type != MSGPACK_OBJECT_ARRAY || d->via.array.size != 2) return true;
  const msgpack_object *cols = &d->via.array.ptr[0], *key = &d->via.array.ptr[1];
  for (uint32_t i = 0; i < cols->via.array.size; i++) {
    if (off + 1 >= len) return false;
    const msgpack_object *c = cols->via.array.ptr[i].via.array.ptr;
    bool is_key = false;
    for (uint32_t k = 0; k < key->via.array.size; k++) is_key |= key->via.array.ptr[k].via.u64 == i;
    off += (size_t)snprintf(out + off, len - off, "%s%.*s %.*s%s%s", i ? ", " : "",
                            (int)c[0].via.str.size, c[0].via.str.ptr, (int)c[1].via.str.size, c[1].via.str.ptr,
                            is_key ? " key" : "", c[2].via.boolean ? " null" : "");
    if (off + 1 >= len) return false;
    if (c[3].type != MSGPACK_OBJECT_NIL) {
      off += (size_t)snprintf(out + off, len - off, " = ");
      if (off + 1 >= len) return false;
      off += (size_t)rn_object_text(out + off, len - off, &c[3]);
      if (off + 1 >= len) return false; /* it filled the room: it may have been cut */
    }
  }
  return true;
}

/* describe()'s text whole, malloc'd (NULL: out of memory): a fixed buffer
 * cut the columns of a wide relation mid-word (4096 bytes held 136 of 300
 * columns, the last typed "stri"), and the REPL browsing the state read
 * its schema from that text. */
static char *described(const msgpack_object *d)
{
  for (size_t len = 4096; len <= (size_t)1 << 28; len *= 2) {
    char *out = malloc(len);
    if (!out || describe(d, out, len)) return out;
    free(out);
  }
  return NULL;
}

/* The pages LMDB's free list holds (its database 0: each entry a list of
 * page numbers, the count first), as mdb_stat -f counts them. Of the used
 * pages, the rest hold live data (and the two meta pages). */
static uint64_t free_pages(MDB_txn *txn)
{
  MDB_cursor *cur;
  uint64_t n = 0;
  if (mdb_cursor_open(txn, 0, &cur)) return 0;
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    size_t count;
    if (v.mv_size < sizeof count) continue;
    memcpy(&count, v.mv_data, sizeof count);
    n += count;
  }
  mdb_cursor_close(cur);
  return n;
}

static int fail(char *errbuf, size_t errlen, const char *msg, int code)
{
  if (errbuf) snprintf(errbuf, errlen, "%s", msg);
  return code;
}

/* One "r:" entry and its "n:" counters, reported to fn. */
static int report(MDB_txn *txn, MDB_dbi meta, const char *path, const MDB_val *k, const MDB_val *v,
                  msgpack_zone *z, rn_inspect_fn fn, void *ctx, rn_err *e)
{
  char name[1024];
  snprintf(name, sizeof name, "%.*s", (int)k->mv_size - 2, (const char *)k->mv_data + 2);
  msgpack_object d;
  size_t off = 0;
  if (rn_msgpack_size(v->mv_data, v->mv_size) != v->mv_size || /* before msgpack-c allocates what it claims */
      rn_unpack(v->mv_data, v->mv_size, &off, z, &d) != MSGPACK_UNPACK_SUCCESS || off != v->mv_size ||
      !rn_catalogue_entry_valid(&d))
    return rn_err_set(e, RN_ESTORE, "state damaged: %s: the catalogue entry of relation \"%s\" is malformed",
                      path, name);
  int64_t kind = d.via.array.ptr[0].via.i64;
  char *columns = described(&d.via.array.ptr[1]);
  if (!columns) return rn_err_set(e, RN_ENOMEM, "out of memory");
  rn_inspect_relation r = { name, rn_relkind_name(kind), columns, -1, 1, rn_store_entries(txn, name) };
  char nkey[1030];
  int nlen = snprintf(nkey, sizeof nkey, RN_META_COUNTERS "%s", name);
  MDB_val nk = { (size_t)nlen, nkey }, nv;
  int rc = mdb_get(txn, meta, &nk, &nv);
  if (rc == 0 && nv.mv_size != 24) {
    free(columns);
    return rn_err_set(e, RN_ESTORE, "state damaged: %s: the counters of relation \"%s\" are %zu bytes, not 24",
                      path, name, nv.mv_size);
  }
  if (rc == 0) {
    uint64_t counters[2];
    memcpy(counters, nv.mv_data, 16);
    r.next_id = counters[0];
    if (kind == 0) r.rows = (int64_t)counters[1];
  } else if (kind == 0) {
    r.rows = 0;
  }
  rc = fn ? fn(ctx, &r) : 0;
  free(columns);
  return rc ? rn_err_set(e, rc, "%s", "") : 0;
}

/* Opens path's environment read-only with a read transaction on its
 * catalogue, refusing what would crash or mislead: a truncated data.mdb,
 * no catalogue. */
static int open_reader(const char *path, MDB_env **env, MDB_txn **txn, MDB_dbi *meta, rn_err *e)
{
  if (rn_envs_read(path, env, e)) return e->code;
  int rc = rn_store_txn(*env, MDB_RDONLY, txn);
  if (!rc) rc = mdb_dbi_open(*txn, RN_DB_META, 0, meta);
  if (rc == MDB_NOTFOUND) return rn_store_no_catalogue(*txn, path, e);
  if (rc) return rn_err_set(e, rn_store_read_code(rc), "%s: %s", path, rn_store_strerror(rc));
  return rn_upgrade_readable(*txn, *meta, path, e); /* a newer runnel's layout would be misread */
}

/* path's data.mdb, stat'ed into *st; RN_EIO "not a runnel state" without one. */
static int data_file(const char *path, struct stat *st, char *errbuf, size_t errlen)
{
  char data[4096];
  snprintf(data, sizeof data, "%s/data.mdb", path);
  if (stat(data, st) == 0) return 0;
  if (errbuf) snprintf(errbuf, errlen, "%s: not a runnel state (no data.mdb)", path);
  return RN_EIO;
}

static int inspect(const char *path, rn_inspect_fn fn, void *ctx, rn_inspect_state *out, char *errbuf,
                   size_t errlen)
{
  if (!path || !out) {
    if (errbuf && errlen) snprintf(errbuf, errlen, "rn_inspect: %s is NULL", path ? "out" : "the path");
    return RN_EINVAL;
  }
  memset(out, 0, sizeof *out);
  struct stat st;
  if (data_file(path, &st, errbuf, errlen)) return RN_EIO;
  out->file_size = (uint64_t)st.st_size;
  MDB_env *env = NULL;
  MDB_txn *txn = NULL;
  MDB_dbi meta;
  rn_err e;
  rn_err_clear(&e);
  if (open_reader(path, &env, &txn, &meta, &e)) {
    if (txn) mdb_txn_abort(txn);
    rn_envs_read_done(env);
    return fail(errbuf, errlen, e.msg, e.code);
  }
  MDB_envinfo info;
  MDB_stat est;
  mdb_env_info(env, &info);
  mdb_env_stat(env, &est);
  uint64_t state_map = rn_store_file_map(path); /* not the readers' environment's larger map (envs.h) */
  out->map_size = state_map ? state_map : info.me_mapsize;
  out->used = (uint64_t)(info.me_last_pgno + 1) * est.ms_psize;
  out->page_size = est.ms_psize;
  out->free = free_pages(txn) * est.ms_psize;
  MDB_val k = { RN_PREFIX_LEN(RN_META_SEQ), (void *)RN_META_SEQ }, v;
  int rc = mdb_get(txn, meta, &k, &v);
  if (rc == 0 && v.mv_size == 8) memcpy(&out->seq, v.mv_data, 8);
  else if (rc == 0) rn_err_set(&e, RN_ESTORE, "state damaged: %s: the sequence number is %zu bytes, not 8", path, v.mv_size);
  MDB_cursor *cur = NULL;
  rc = e.code;
  if (!rc && (rc = mdb_cursor_open(txn, meta, &cur)))
    rc = rn_err_set(&e, rn_store_read_code(rc), "%s: %s", path, rn_store_strerror(rc));
  msgpack_zone z;
  if (!rn_zone_init(&z, 4096) && !rc) rc = rn_err_set(&e, RN_ENOMEM, "out of memory");
  k.mv_size = 2;
  k.mv_data = (void *)RN_META_RELATION;
  int mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; mrc == 0 && !rc; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size < 2 || memcmp(k.mv_data, RN_META_RELATION, RN_PREFIX_LEN(RN_META_RELATION)) != 0) break;
    rc = report(txn, meta, path, &k, &v, &z, fn, ctx, &e);
    if (!rc) out->relations++;
    msgpack_zone_clear(&z);
  }
  rn_zone_destroy(&z);
  if (cur) mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  rn_envs_read_done(env);
  if (rc && e.msg[0]) return fail(errbuf, errlen, e.msg, rc);
  return rc;
}

/* Its transaction opens databases (rn_store_entries): one such at a time (envs.h). */
RN_API int rn_inspect(const char *path, rn_inspect_fn fn, void *ctx, rn_inspect_state *out,
                      char *errbuf, size_t errlen)
{
  rn_err e;
  rn_err_clear(&e);
  if (path && !*path) return fail(errbuf, errlen, "rn_inspect: the path is empty", RN_EINVAL); /* "" + "/data.mdb" */
  if (path && out && rn_flush_before_read(path, &e)) return fail(errbuf, errlen, e.msg, e.code);
  rn_envs_dbis_lock();
  int rc = inspect(path, fn, ctx, out, errbuf, errlen);
  rn_envs_dbis_unlock();
  return rc;
}

/* A value that changes whenever the state at path does: the id of its last
 * LMDB transaction committed, from a read transaction's snapshot
 * (mdb_txn_id; every group, declaration and drop commits one), mixed with
 * its data.mdb's device, inode and modification time, since a state
 * removed and made again starts its ids again (it may even get the same
 * inode), and with a count of the groups a writer of this process carries
 * (sync = false), which rn_inspect would flush before it reads: told, not
 * flushed, so asking on every REPL line leaves the carried transaction
 * alone (0.37 flushed it each time). An unchanged value means rn_inspect
 * would read what it read before. No catalogue is walked and no database
 * opened. */
RN_API int rn_state_version(const char *path, uint64_t *version, char *errbuf, size_t errlen)
{
  if (!path || !*path || !version)
    return fail(errbuf, errlen, !version ? "rn_state_version: version is NULL" : "rn_state_version: the path is NULL or empty",
                RN_EINVAL);
  struct stat st;
  if (data_file(path, &st, errbuf, errlen)) return RN_EIO;
  rn_err e;
  rn_err_clear(&e);
  uint64_t carried = rn_carried_before_read(path);
  MDB_env *env = NULL;
  if (rn_envs_read(path, &env, &e)) return fail(errbuf, errlen, e.msg, e.code);
  MDB_txn *txn;
  int rc = rn_store_txn(env, MDB_RDONLY, &txn);
  if (rc) rn_err_set(&e, rn_store_read_code(rc), "%s: %s", path, rn_store_strerror(rc));
  else {
    uint64_t mix[6] = { (uint64_t)mdb_txn_id(txn), (uint64_t)st.st_dev, (uint64_t)st.st_ino,
                        (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec, carried };
    *version = rn_hash64(mix, sizeof mix);
    mdb_txn_abort(txn);
  }
  rn_envs_read_done(env);
  return rc ? fail(errbuf, errlen, e.msg, e.code) : 0;
}

/* The durable sinks' records of the state at path (rn_outbox_sinks_txn),
 * in one read transaction: what runnel inspect lists of the outbox. */
int rn_inspect_outbox(const char *path, rn_outbox_kept_fn fn, void *ctx, char *errbuf, size_t errlen)
{
  if (!path || !*path) return fail(errbuf, errlen, "rn_inspect: the path is empty", RN_EINVAL);
  rn_envs_dbis_lock();
  MDB_env *env = NULL;
  MDB_txn *txn = NULL;
  MDB_dbi meta;
  rn_err e;
  rn_err_clear(&e);
  int rc = open_reader(path, &env, &txn, &meta, &e);
  if (!rc && (rc = rn_outbox_sinks_txn(txn, meta, fn, ctx)) != 0 && rc != RN_ENOMEM)
    rc = rn_err_set(&e, rn_store_read_code(rc), "%s: the outbox: %s", path, rn_store_strerror(rc));
  if (txn) mdb_txn_abort(txn);
  rn_envs_read_done(env);
  rn_envs_dbis_unlock();
  return rc ? fail(errbuf, errlen, e.msg[0] ? e.msg : rn_strerror(rc), rc) : 0;
}
