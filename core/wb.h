/* wb.h — the write-back layer: what the open LMDB write transaction's
 * hot databases hold, kept in memory until the transaction commits.
 *
 * A change to a table row, a join's index, results or right copy, or an
 * aggregate's groups and value counts goes to an entry here (read-your-
 * writes: a later read in the same transaction sees it); entries read from
 * LMDB are kept too, so a row read by every change is searched for once per
 * transaction. At the commit (rn_store_commit) the written entries reach
 * LMDB in key order, each once, appended where the keys are past the
 * database's last one. Invariants:
 * (1) An entry holds the database's current value of its key in the write
 *     transaction (or its absence: a tombstone); LMDB holds it for every
 *     key with no entry. Only the functions below touch a layered database
 *     while a write transaction is open, except through a cursor that
 *     rn_wb_cursor_open gave (it writes the entries into LMDB first).
 * (2) Written entries live and die with the write transaction: they reach
 *     LMDB at its commit and are dropped at its abort (a rolled-back group is
 *     replayed in a new one, group.c), so a crash or rollback loses nothing
 *     LMDB would have kept and keeps nothing it would not. Entries clean at
 *     a group's commit (rn_store_commit_keep) stay as a cache of LMDB for
 *     the next transaction; any other commit (a declaration's) and every
 *     abort forget them all.
 * (3) Nothing here is seen by other processes or read transactions: they
 *     see LMDB's committed state, which only whole groups reach.
 * (4) Memory is the entries' bytes and their hash tables' (rn_wb_bytes; a
 *     slot is 16 bytes, a pointer and a hash, and a table is at most half
 *     full: 32 to 64 bytes an entry besides its own): past RN_WB_MAX_BYTES at a
 *     group's end, group.c writes them into the carried LMDB transaction
 *     and forgets them (the transaction carries on); past it at a commit,
 *     the cache goes too.
 *
 * Each function takes the store and the transaction the caller reads in:
 * when that is not the store's write transaction, or the layer is off
 * (store->wb NULL: rn_open_opts.write_back = -1, RUNNEL_WRITE_BACK=0), it is
 * plain LMDB. Return values are LMDB codes (0, MDB_NOTFOUND, MDB_KEYEXIST,
 * ENOMEM, MDB_MAP_FULL …), so callers map them as they map mdb_put's.
 * Pointers returned into entries stay valid until the next write of the
 * same key or the end of the transaction, as LMDB's do until an update. */
#ifndef RN_WB_H
#define RN_WB_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>

#include "store.h"

#define RN_WB_MAX_BYTES ((size_t)32 << 20) /* (4) */

typedef struct rn_wb rn_wb;

/* The layer of one store, empty. Destructor: rn_wb_free. NULL: no memory. */
rn_wb *rn_wb_new(void);
void rn_wb_free(rn_wb *wb);

/* mdb_get with read-your-writes. */
int rn_wb_get(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, MDB_val *val);
/* mdb_put with flags 0, MDB_RESERVE (val->mv_data gets the bytes to fill)
 * or MDB_NOOVERWRITE (MDB_KEYEXIST and val the stored value when present). */
int rn_wb_put(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, MDB_val *val, unsigned flags);
/* Deletes key; an absent key is no error (0). */
int rn_wb_del(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const MDB_val *key);

/* mdb_cursor_open on a layered database: its written entries reach LMDB
 * first, so the cursor sees them. writes: the caller writes through the
 * cursor (or drops the database), so the entries are forgotten too (1). */
int rn_wb_cursor_open(rn_store *s, MDB_txn *txn, MDB_dbi dbi, bool writes, MDB_cursor **cur);

/* Writes dbi's written entries into LMDB (they stay, clean), so a cursor
 * rn_wb_cursor_open gave that is still open sees the writes made since it
 * opened, as an LMDB cursor sees mdb_put's (a table's rows() in a group). */
int rn_wb_sync(rn_store *s, MDB_txn *txn, MDB_dbi dbi);

/* mdb_drop, forgetting the database's entries first. */
int rn_wb_drop(rn_store *s, MDB_txn *txn, MDB_dbi dbi, int del);

/* Forward iteration over LMDB and the entries merged, in key order. */
typedef struct rn_wb_iter {
  MDB_cursor *cur;        /* LMDB's side */
  int lrc;                /* its last get: 0 (lk, lv hold an item), MDB_NOTFOUND or an error */
  MDB_val lk, lv;
  struct wb_node *node;   /* the entries' side: the next one, or NULL */
} rn_wb_iter;
/* Positions it at the first key >= from (every key when from is NULL) and
 * returns it in k, v: 0, MDB_NOTFOUND at the end, or an LMDB error. Call
 * rn_wb_iter_close whatever it returns. No write may come between its calls. */
int rn_wb_iter_seek(rn_store *s, MDB_txn *txn, MDB_dbi dbi, rn_wb_iter *it, const MDB_val *from,
                    MDB_val *k, MDB_val *v);
int rn_wb_iter_next(rn_wb_iter *it, MDB_val *k, MDB_val *v);
void rn_wb_iter_close(rn_wb_iter *it);

/* Writes every written entry into the write transaction, each database's in
 * key order (MDB_APPEND past its last key). The entries stay (now clean):
 * a failure (MDB_MAP_FULL) leaves them as they were. */
int rn_wb_flush(rn_store *s);
/* Forgets every entry (the transaction aborted, or others wrote). */
void rn_wb_clear(rn_wb *wb);
/* The transaction committed after rn_wb_flush: the entries, all clean,
 * equal what LMDB holds and stay as a cache for the next transaction, unless
 * they pass RN_WB_MAX_BYTES (then they go). */
void rn_wb_committed(rn_wb *wb);
/* rn_wb_clear, but the transaction goes on: its count of written keys
 * stays (rn_wb_dirtied_over). Only between groups (no pointer is held). */
void rn_wb_forget(rn_wb *wb);
/* Whether the keys the transaction wrote in its `groups` groups, and as
 * many again as one of them wrote on average, have (by estimate) copied
 * more than 1/share of the pages of the databases they went to: a
 * transaction that copies a share D of the state leaves the file about
 * 1 + D times the live data when an empty one follows it
 * (rn_store_release_pages), 1 + 2D otherwise. Counts rn_store_wrote's,
 * layer on or off; with the layer on, pages are LMDB's before the
 * transaction's first flush. Below RN_WB_MIN_PAGES pages, never (small
 * states). */
#define RN_WB_MIN_PAGES 4096
bool rn_wb_dirtied_over(rn_store *s, unsigned share, unsigned groups);
/* Bytes the entries hold (4). */
size_t rn_wb_bytes(const rn_store *s);
/* How many entries dbi's table takes before it must grow (rehashing every
 * entry): after a commit, at least twice what that transaction added. */
size_t rn_wb_room(const rn_store *s, MDB_dbi dbi);

#endif
