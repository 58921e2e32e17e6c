/* store_sink.h — permanent stores and their readers (store_sink.c). */
#ifndef RN_STORE_SINK_H
#define RN_STORE_SINK_H

#include "index.h"
#include "pipeline.h"
#include "top.h"

/* Keeps rel's rows in this pipeline's LMDB state as store `name`. */
int rn_store_sink(rn_pipeline *p, rn_rel *rel, const char *name);
/* The relation whose store sink declared in p writes store `name`, or NULL. */
const rn_rel *rn_store_sink_writer(const rn_pipeline *p, const char *name);
/* 0 unless the state (read in txn) holds a store `name` kept for another
 * relation: a relation may not take its name (p->err says so). Stores of
 * 0.26 and before have no owner recorded and refuse nothing. */
int rn_store_owner_check(rn_pipeline *p, MDB_txn *txn, const char *name);

typedef struct rn_attached rn_attached;
/* Opens a reader of store `name` in the state at path; owner is a pipeline
 * of this process that has that state open (LMDB forbids opening one
 * environment twice in a process), whose environment it then reads
 * through, or NULL. A read through an owner's environment made outside the
 * owner's groups and callbacks first commits the groups it carries (nosync:
 * rn_flush), so it sees every group the owner committed; inside one, what
 * LMDB holds. Destructor: rn_attach_close. */
int rn_attach(const char *path, const char *name, rn_pipeline *owner, rn_attached **out, rn_err *e);
/* At the owner's close: its attaches stop reading (an error, not a read of a
 * closed environment) until they are closed. */
void rn_attach_orphan_all(rn_pipeline *owner);
/* The owner dropped a relation (its database handles closed, their numbers
 * free for others): its attaches open theirs again at their next read. */
void rn_attach_handles_closed(rn_pipeline *owner);
const rn_schema *rn_attach_schema(const rn_attached *a);
/* Whether a reads `name` of p's own state (through p's environment). */
bool rn_attach_reads_own(const rn_attached *a, const rn_pipeline *p, const char *name);
/* The row under an encoded key, appended to row; *found = 0 when absent.
 * One LMDB read transaction: a committed group, never part of one. */
int rn_attach_get(rn_attached *a, const char *key, size_t klen, msgpack_sbuffer *row, int *found, rn_err *e);
/* Every row, in key order, in one read transaction: one committed group's
 * state, never part of one. */
int rn_attach_rows(rn_attached *a, int (*fn)(void *ctx, const char *row, size_t len), void *ctx, rn_err *e);
void rn_attach_close(rn_attached *a);
/* What identifies what a reads, now, appended to out: its catalogue
 * record ("r:" or "S:" name: kind and columns), its declaration record
 * ("d:"), its functions' fingerprint ("fn:") and when its rows last changed
 * wholesale ("eg:": made, rebuilt, over a changed input), in one read
 * transaction. Another relation, the same declared again otherwise, or
 * rebuilt since, gives other bytes; its rows' own changes do not count. */
int rn_attach_identity(rn_attached *a, msgpack_sbuffer *out, rn_err *e);

/* An index relation (index.h) attached by its name, when no store has it:
 * rn_attach_rows walks it in index order, and rn_attach_index walks the
 * rows from `from` to `to` (w: offset, limit, before, fn; not its bounds),
 * in one read transaction: a committed group, never part of one. */
bool rn_attach_is_index(const rn_attached *a);
int rn_attach_index(rn_attached *a, rn_index_bound *from, rn_index_bound *to, rn_index_walk *w, rn_err *e);

/* ---- attaching source tables too (query.c) ----
 * An attach of a name the state holds as a source table reads its "t:"
 * rows (keyed or keyless), of a distinct its "dr:" rows, of an aggregate
 * rows computed from its groups (aggregate_read.c); any other relation
 * through a reader (reader.h: joins, tops, selects; the rest refused
 * saying why). */
enum { RN_ATTACH_KEYED = 1, RN_ATTACH_KEYLESS = 2, RN_ATTACH_DISTINCT = 3, RN_ATTACH_AGGREGATE = 4,
       RN_ATTACH_DERIVED = 5 };
/* Every row with its id (0 for a store's rows), in key order (id order when
 * keyless), in one read transaction. */
typedef int (*rn_attach_each_fn)(void *ctx, uint64_t id, const char *row, size_t len);
int rn_attach_each(rn_attached *a, rn_attach_each_fn fn, void *ctx, rn_err *e);
/* 0 for a store, else RN_ATTACH_KEYED, _KEYLESS, _DISTINCT, _AGGREGATE or _DERIVED. */
int rn_attach_is_table(const rn_attached *a);
/* What it reads: "store", "table", "index", "distinct", "aggregate",
 * "join", "top" or "select" (att:columns()'s second value). */
const char *rn_attach_kind(const rn_attached *a);
/* Rebuilds a schema from a description rn_schema_desc_valid accepted
 * (schema.c's rn_schema_describe; defaults are not kept). */
rn_schema *rn_attach_schema_of(const msgpack_object *d, rn_err *e);
/* "S:" name is absent from meta: reads "r:" name into *v (the catalogue
 * entry's description, for schema_of) and *table (RN_ATTACH_DERIVED: a
 * reader reads it), or sets e: no such relation. */
int rn_attach_table_entry(MDB_txn *txn, MDB_dbi meta, const char *path, const char *name, MDB_val *v, int *table,
                          rn_err *e);
/* The row of encoded key key in a keyed store's dbi (schema s; z for
 * scratch), in txn: *at is its LMDB key (key itself when it fits, else its
 * hashed form in stored, RN_LONGKEY_STORED bytes: longkey.h), or where it
 * goes. 0 with *v the row, MDB_NOTFOUND, RN_LONGKEY_FULL, or an LMDB code. */
int rn_store_row_find(MDB_txn *txn, MDB_dbi dbi, const rn_schema *s, msgpack_zone *z, const char *key, size_t klen,
                      char *stored, MDB_val *at, MDB_val *v);
/* A get of a keyless table or a distinct is refused (no key to read by). */
int rn_attach_table_key(int table, const char *name, size_t klen, rn_err *e);
/* The entry of a keyed table's encoded key in dbi (in txn): a key longer
 * than the table stores inline is found among its hashed forms (longkey.h;
 * stored, RN_LONGKEY_STORED bytes, holds the one found). mdb_get's codes. */
int rn_attach_table_find(MDB_txn *txn, MDB_dbi dbi, const char *key, size_t klen, char *stored, MDB_val *v);
/* A stored table entry: *v becomes its row and *id its id (RN_ENTRY_LIVE);
 * RN_ENTRY_GONE for a tombstone; RN_ENTRY_DAMAGED for an entry too short
 * for what its header says (rn_attach_damaged's error). */
enum { RN_ENTRY_GONE, RN_ENTRY_LIVE, RN_ENTRY_DAMAGED };
int rn_attach_table_row(int table, const MDB_val *k, MDB_val *v, uint64_t *id);
/* A live entry's row *v as read: a distinct's with its zeros 0.0 and one
 * NaN (distinct.c's DISTINCT-1: a row stored before 0.17 may hold the -0.0
 * of the copy that brought it in, which the pipeline reads as 0.0), copied
 * into form (cleared first) when it may hold one; *v then points there,
 * valid until form changes. 0, or RN_ENOMEM. */
int rn_attach_row_form(int table, MDB_val *v, msgpack_sbuffer *form);
/* The error of a damaged entry of the kind ("table") name. */
int rn_attach_damaged(const char *kind, const char *name, rn_err *e);

#endif
