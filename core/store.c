/* store.c — the LMDB environment: open, transactions, map growth. */
#include "store.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RN_MAP_INITIAL ((size_t)64 << 20)
#define RN_MAX_DBS 4096

int rn_store_fail(rn_err *e, int rc, const char *what)
{
  int code = RN_ESTORE;
  if (rc == MDB_MAP_FULL || rc == ENOSPC) code = RN_EFULL;
  else if (rc == ENOMEM) code = RN_ENOMEM;
  else if (rc == EIO || rc == EACCES || rc == ENOENT || rc == EROFS) code = RN_EIO;
  rn_err_set(e, code, "%s: %s", what, mdb_strerror(rc));
  e->cause = rc;
  return code;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
  (void)sb; (void)flag; (void)ftw;
  return remove(path);
}

int rn_store_open(rn_store *s, const char *path, bool nosync, bool writemap, size_t mapsize, rn_err *e)
{
  memset(s, 0, sizeof *s);
  if (path) {
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      return rn_err_set(e, RN_EIO, "cannot create state directory %s: %s", path, strerror(errno));
    s->path = strdup(path);
  } else {
    const char *tmp = getenv("TMPDIR");
    char templ[4096];
    snprintf(templ, sizeof templ, "%s/runnel-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(templ))
      return rn_err_set(e, RN_EIO, "cannot create a temporary state directory: %s", strerror(errno));
    s->path = strdup(templ);
    s->temp = true;
  }
  if (!s->path) return rn_err_set(e, RN_ENOMEM, "out of memory");
  int rc = mdb_env_create(&s->env);
  if (rc) goto fail;
  mdb_env_set_maxdbs(s->env, RN_MAX_DBS);
  /* Keep the map the file already has if it is larger than our start. */
  s->mapsize = mapsize ? mapsize : RN_MAP_INITIAL;
  mdb_env_set_mapsize(s->env, s->mapsize);
  unsigned flags = MDB_NOTLS | (nosync ? MDB_NOSYNC : 0) | (writemap ? MDB_WRITEMAP : 0);
  rc = mdb_env_open(s->env, s->path, flags, 0644);
  if (rc) goto fail;
  MDB_envinfo info;
  mdb_env_info(s->env, &info);
  s->mapsize = info.me_mapsize;
  MDB_txn *txn;
  rc = mdb_txn_begin(s->env, NULL, 0, &txn);
  if (rc) goto fail;
  rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->meta);
  if (rc) { mdb_txn_abort(txn); goto fail; }
  rc = mdb_txn_commit(txn);
  if (rc) goto fail;
  return 0;
fail:
  rn_store_fail(e, rc, s->path);
  rn_store_close(s);
  return e->code;
}

void rn_store_close(rn_store *s)
{
  if (s->wtxn) mdb_txn_abort(s->wtxn);
  if (s->rtxn) mdb_txn_abort(s->rtxn);
  if (s->env) mdb_env_close(s->env);
  if (s->temp && s->path) nftw(s->path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(s->path);
  memset(s, 0, sizeof *s);
}

int rn_store_grow(rn_store *s, rn_err *e)
{
  MDB_envinfo info;
  mdb_env_info(s->env, &info);
  size_t want = info.me_mapsize * 2;
  if (s->rtxn) { mdb_txn_abort(s->rtxn); s->rtxn = NULL; s->rtxn_live = false; }
  int rc = mdb_env_set_mapsize(s->env, want);
  if (rc) return rn_store_fail(e, rc, "growing the map");
  s->mapsize = want;
  return 0;
}

/* Doubles the map while more than half of it is used: LMDB cannot grow it
 * inside a transaction, so growth happens before each group starts (and, if
 * a group fills it all the same, group.c grows it and replays the group). */
static int grow_if_needed(rn_store *s, rn_err *e)
{
  MDB_envinfo info;
  MDB_stat st;
  mdb_env_info(s->env, &info);
  mdb_env_stat(s->env, &st);
  size_t used = (info.me_last_pgno + 1) * (size_t)st.ms_psize;
  return used * 2 < info.me_mapsize ? 0 : rn_store_grow(s, e);
}

int rn_store_begin(rn_store *s, rn_err *e)
{
  int rc = grow_if_needed(s, e);
  if (rc) return rc;
  rc = mdb_txn_begin(s->env, NULL, 0, &s->wtxn);
  if (rc) { s->wtxn = NULL; return rn_store_fail(e, rc, "beginning a group"); }
  s->txn_serial++;
  return 0;
}

int rn_store_commit(rn_store *s, rn_err *e)
{
  int rc = mdb_txn_commit(s->wtxn);
  s->wtxn = NULL;
  if (rc) return rn_store_fail(e, rc, "committing a group");
  return 0;
}

void rn_store_abort(rn_store *s)
{
  if (s->wtxn) mdb_txn_abort(s->wtxn);
  s->wtxn = NULL;
}

int rn_store_reader(rn_store *s, MDB_txn **txn, rn_err *e)
{
  if (s->wtxn) { *txn = s->wtxn; return 0; }
  int rc;
  if (!s->rtxn) rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->rtxn);
  else if (!s->rtxn_live) rc = mdb_txn_renew(s->rtxn);
  else rc = 0;
  if (rc) {
    if (s->rtxn) { mdb_txn_abort(s->rtxn); s->rtxn = NULL; }
    return rn_store_fail(e, rc, "reading");
  }
  s->rtxn_live = true;
  *txn = s->rtxn;
  return 0;
}

void rn_store_reader_done(rn_store *s)
{
  if (s->rtxn && s->rtxn_live) { mdb_txn_reset(s->rtxn); s->rtxn_live = false; }
}

/* The main database lists every named one; a relation's are "<prefix>:"
 * name (rn_state_dbi), except permanent stores' "st:", which are not
 * relations. */
uint64_t rn_store_entries(MDB_txn *txn, const char *name)
{
  uint64_t n = 0;
  size_t nlen = strlen(name);
  MDB_dbi main_dbi;
  MDB_cursor *cur;
  if (mdb_dbi_open(txn, NULL, 0, &main_dbi) || mdb_cursor_open(txn, main_dbi, &cur)) return 0;
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char *colon = memchr(k.mv_data, ':', k.mv_size);
    size_t plen = colon ? (size_t)(colon - (const char *)k.mv_data) + 1 : 0;
    if (!colon || k.mv_size - plen != nlen || memcmp(colon + 1, name, nlen) != 0 ||
        (plen == 3 && memcmp(k.mv_data, "st:", 3) == 0) || k.mv_size >= 4096)
      continue;
    char dbname[4096];
    memcpy(dbname, k.mv_data, k.mv_size);
    dbname[k.mv_size] = '\0';
    MDB_dbi dbi;
    MDB_stat st;
    if (mdb_dbi_open(txn, dbname, 0, &dbi) == 0 && mdb_stat(txn, dbi, &st) == 0) n += st.ms_entries;
  }
  mdb_cursor_close(cur);
  return n;
}

int rn_store_key_cmp(const MDB_val *a, const MDB_val *b)
{
  const unsigned char *x = a->mv_data, *y = b->mv_data;
  size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size, i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; i + 8 <= n; i += 8) {
    uint64_t u, v;
    memcpy(&u, x + i, 8);
    memcpy(&v, y + i, 8);
    if (u != v) return __builtin_bswap64(u) < __builtin_bswap64(v) ? -1 : 1;
  }
#endif
  for (; i < n; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return (a->mv_size > b->mv_size) - (a->mv_size < b->mv_size);
}
