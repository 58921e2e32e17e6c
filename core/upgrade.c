/* upgrade.c — a state written by an older build brought to this build's
 * format when a pipeline opens it.
 *
 * The format is meta "fmt" (store.h), |u32 format|; absent, 0. Formats:
 *
 *     0  runnel 0.17 and older.
 *     1  (a) keyless tables' "h:" and distincts' "dh:" hold each row under
 *            rn_row_hash (-0.0 as 0.0, one NaN: row.h). Before 0.17 a row
 *            was hashed as its bytes, and kept -0.0 and any NaN's bits:
 *            such a row stayed under its old hash, so a later delete of it
 *            missed it (and a distinct kept its copy). Every row holding a
 *            float is hashed again.
 *        (b) a keyed map's long keys ("mk:") are under longkey.h's form,
 *            with its probe byte (rn_mapkey_upgrade).
 *
 * Rules (UPGRADE-n in tests):
 * (1) The upgrade is one write transaction with the new format: all or
 *     nothing; a state left at an older format is upgraded at its next
 *     open. A new state gets the format at its first open.
 * (2) Upgrading an upgraded state changes nothing: (a) moves only entries
 *     whose hash differs, (b) only entries of format 0's length.
 * (3) A state of a newer format is refused: this build may not read it. */
#include "upgrade.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "key.h"
#include "mapkey.h"
#include "row.h"

/* Opens database prefix name (name: len bytes) of txn; MDB_NOTFOUND when the state has none. */
static int open_db(MDB_txn *txn, const char *prefix, const char *name, size_t len, unsigned flags, MDB_dbi *dbi)
{
  size_t plen = strlen(prefix);
  char *dbname = malloc(plen + len + 1);
  if (!dbname) return ENOMEM;
  memcpy(dbname, prefix, plen);
  memcpy(dbname + plen, name, len);
  dbname[plen + len] = '\0';
  int rc = mdb_dbi_open(txn, dbname, flags, dbi);
  if (!rc) rc = mdb_set_compare(txn, *dbi, rn_store_key_cmp); /* as rn_state_dbi */
  free(dbname);
  return rc;
}

/* (1a): rows "rows" name, |u64 id BE| -> |skip bytes|row|, hashed in
 * "hashes" name, |u64 hash| -> dup |u64 id BE|. */
static int rehash(MDB_txn *txn, const char *rows, const char *hashes, const char *name, size_t len, size_t skip)
{
  MDB_dbi rdbi, hdbi;
  int rc = open_db(txn, rows, name, len, 0, &rdbi);
  if (!rc) rc = open_db(txn, hashes, name, len, MDB_DUPSORT | MDB_DUPFIXED, &hdbi);
  if (rc) return rc == MDB_NOTFOUND ? 0 : rc; /* a relation dropped halfway holds nothing to find */
  MDB_cursor *cur;
  if ((rc = mdb_cursor_open(txn, rdbi, &cur))) return rc;
  rn_oom_clear();
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != 8 || v.mv_size < skip || !memchr((const char *)v.mv_data + skip, 0xcb, v.mv_size - skip))
      continue; /* no float64 in it: its hash is its bytes' */
    const char *row = (const char *)v.mv_data + skip;
    size_t rlen = v.mv_size - skip;
    uint64_t was = rn_hash64(row, rlen), now = rn_row_hash(row, rlen);
    if (rn_oom()) { rc = ENOMEM; break; }
    if (was == now) continue;
    char id[8];
    memcpy(id, k.mv_data, 8);
    MDB_val wk = { 8, &was }, nk = { 8, &now }, iv = { 8, id };
    rc = mdb_del(txn, hdbi, &wk, &iv);
    if (rc && rc != MDB_NOTFOUND) break; /* not found: a 0.17 state hashed it so already */
    rc = mdb_put(txn, hdbi, &nk, &iv, MDB_NODUPDATA);
    if (rc && rc != MDB_KEYEXIST) break;
  }
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND || rc == MDB_KEYEXIST ? 0 : rc;
}

/* Does key (a database name) begin with prefix? Its rest into *name, *len. */
static bool named(const MDB_val *key, const char *prefix, const char **name, size_t *len)
{
  size_t plen = strlen(prefix);
  if (key->mv_size <= plen || memcmp(key->mv_data, prefix, plen) != 0) return false;
  *name = (const char *)key->mv_data + plen;
  *len = key->mv_size - plen;
  return true;
}

/* Format 0 to 1 in txn (the list above). */
static int to_format_1(MDB_txn *txn)
{
  MDB_dbi main_dbi;
  MDB_cursor *cur;
  int rc = mdb_dbi_open(txn, NULL, 0, &main_dbi);
  if (rc || (rc = mdb_cursor_open(txn, main_dbi, &cur))) return rc;
  char **names = NULL; /* the databases to upgrade, copied: the walk writes none while it reads */
  size_t n = 0, cap = 0;
  MDB_val k, v;
  const char *name;
  size_t len;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (!named(&k, RN_DB_ROW_HASHES, &name, &len) && !named(&k, RN_DB_DISTINCT_HASHES, &name, &len) &&
        !named(&k, RN_DB_MAP_KEYS, &name, &len))
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **more = realloc(names, cap * sizeof *more);
      if (!more) { rc = ENOMEM; break; }
      names = more;
    }
    if (!(names[n] = malloc(k.mv_size + 1))) { rc = ENOMEM; break; }
    memcpy(names[n], k.mv_data, k.mv_size);
    names[n++][k.mv_size] = '\0';
  }
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    MDB_val nk = { strlen(names[i]), names[i] };
    MDB_dbi dbi;
    if (named(&nk, RN_DB_ROW_HASHES, &name, &len)) rc = rehash(txn, RN_DB_ROWS, RN_DB_ROW_HASHES, name, len, 0);
    else if (named(&nk, RN_DB_DISTINCT_HASHES, &name, &len))
      rc = rehash(txn, RN_DB_DISTINCT_ROWS, RN_DB_DISTINCT_HASHES, name, len, 8); /* |u64 copies|row| */
    else if (named(&nk, RN_DB_MAP_KEYS, &name, &len) && !(rc = open_db(txn, RN_DB_MAP_KEYS, name, len, 0, &dbi)))
      rc = rn_mapkey_upgrade(txn, dbi);
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}

/* The format txn's state (at path) records, into *format (0 when none).
 * Its result is its own, never e->code: a caller's e may still hold an
 * earlier call's error (an rn_attach after a failed one). */
static int format_in(MDB_txn *txn, MDB_dbi meta, const char *path, uint32_t *format, rn_err *e)
{
  MDB_val k = { RN_PREFIX_LEN(RN_META_FORMAT), (void *)RN_META_FORMAT }, v;
  *format = 0;
  int rc = mdb_get(txn, meta, &k, &v); /* e may hold a caller's earlier error: only what is set here counts */
  if (rc == 0 && v.mv_size == 4) memcpy(format, v.mv_data, 4);
  else if (rc == 0) return rn_err_set(e, RN_ESTORE, "state damaged: %s: its format is %zu bytes, not 4", path, v.mv_size);
  else if (rc != MDB_NOTFOUND) return rn_store_fail(e, rc, path);
  if (*format > RN_STATE_FORMAT) /* (3) */
    return rn_err_set(e, RN_ESCHEMA, "%s: the state is of format %u, written by a newer runnel; this one (%s) reads "
                      "formats up to %d", path, (unsigned)*format, RN_VERSION, RN_STATE_FORMAT);
  return 0;
}

int rn_upgrade_readable(MDB_txn *txn, MDB_dbi meta, const char *path, rn_err *e)
{
  uint32_t format;
  return format_in(txn, meta, path, &format, e);
}

/* The state's format into *format (0 when it records none). */
static int read_format(rn_store *s, uint32_t *format, rn_err *e)
{
  MDB_txn *txn;
  int rc = rn_store_txn(s->env, MDB_RDONLY, &txn);
  if (rc) return rn_store_fail(e, rc, s->path);
  rc = format_in(txn, s->meta, s->path, format, e);
  mdb_txn_abort(txn);
  return rc;
}

int rn_upgrade_state(rn_store *s, rn_err *e)
{
  uint32_t format = 0;
  int rc = read_format(s, &format, e);
  if (rc || format == RN_STATE_FORMAT) return rc;
  for (int tries = 0;; tries++) { /* (1) */
    MDB_txn *txn;
    if ((rc = rn_store_txn(s->env, 0, &txn))) return rn_store_fail(e, rc, s->path);
    rc = to_format_1(txn);
    uint32_t now = RN_STATE_FORMAT;
    MDB_val k = { RN_PREFIX_LEN(RN_META_FORMAT), (void *)RN_META_FORMAT }, v = { 4, &now };
    if (!rc) rc = mdb_put(txn, s->meta, &k, &v, 0);
    if (rc) {
      mdb_txn_abort(txn);
      if (rc == MDB_MAP_FULL && tries < 8 && rn_store_grow(s, e) == 0) continue;
      return e->code ? e->code : rn_store_fail(e, rc, s->path);
    }
    rc = mdb_txn_commit(txn);
    return rc ? rn_store_write_fail(s, e, rc, "upgrading the state's format") : 0;
  }
}
