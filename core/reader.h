/* reader.h — a relation's rows read from outside the pipeline that
 * declares it (runnel.attach, runnel query), in the reader's own read
 * transaction: one committed group, never part of one. Joins (join_read.c),
 * tops and selects are read this way, and every relation a select reads
 * (source tables, distincts, aggregates, indexes, joins, tops, selects).
 *
 * What the state cannot make is refused, naming the relation, why, and what
 * to do: a filter's or a map's rows (a Lua function in the script computes
 * them), a stream's events (kept by no one), a lookup's rows (fetched from
 * its source on demand). */
#ifndef RN_READER_H
#define RN_READER_H

#include "store_sink.h"

typedef struct rn_reader rn_reader;

/* Opens a reader of relation `name` in txn, its schema from the catalogue;
 * the database handles it opens stay once the caller commits txn. path
 * names the state in errors. Destructor: rn_reader_free. */
int rn_reader_open(MDB_txn *txn, MDB_dbi meta, const char *path, const char *name, rn_reader **out, rn_err *e);
/* Its columns. A top's key is its input's (a top is keyless; its rows are
 * its input's rows, each at most once): get reads a top by it. */
const rn_schema *rn_reader_schema(const rn_reader *r);
/* "join", "top", "select" …: what it reads. */
const char *rn_reader_kind(const rn_reader *r);
/* Every row with its id, read in txn: in key order when the relation has a
 * key (a top: group then rank order), else in id order (a select of a
 * keyless relation: its input's order). */
int rn_reader_each(rn_reader *r, MDB_txn *txn, rn_attach_each_fn fn, void *ctx, rn_err *e);
/* The row whose key encodes as key (key.h), to fn, read in txn; nothing
 * when none has it. An aggregate's is one seek; the others' rows are made
 * as each makes them until it is found: O(rows). */
int rn_reader_get(rn_reader *r, MDB_txn *txn, const char *key, size_t klen, rn_attach_each_fn fn, void *ctx,
                  rn_err *e);
void rn_reader_free(rn_reader *r);
/* A join's reader (join.h), or NULL: r reads no join. */
struct rn_join_reader *rn_reader_join(rn_reader *r);

/* Records under "d:" name what a reader needs of a select (rel:select{}: a
 * map done in C), in txn, its declaring transaction:
 *
 *     [1, input name, [input slot of each column]]
 *
 * and removes the record of a filter or map of that name (a Lua function:
 * nothing to record). */
int rn_select_decl_record(rn_rel *r, MDB_txn *txn);

/* The "d:" name key of a derived relation's declaration record into key
 * (snprintf's result). */
int rn_decl_key(char *key, size_t size, const char *name);
/* Puts record (a join's or aggregate's declaration) under "d:" name in
 * txn; unless changed is NULL, *changed when a record of its format was
 * there with other bytes (the state was built for another declaration). */
int rn_decl_put(rn_pipeline *p, MDB_txn *txn, const char *name, const msgpack_sbuffer *record, bool *changed);
/* RN_ESTORE "its declaration record is malformed". */
int rn_decl_malformed(rn_err *e);
/* Prefixes e with `what "name"`, after "state damaged: " for RN_ESTORE;
 * returns its code (what: "join", "aggregate"). */
int rn_decl_failed(rn_err *e, const char *what, const char *name);
/* Reads the declaration record of name in txn into d (pointing into the
 * record, or from z), its bytes also appended to raw unless NULL. 0, or an
 * error saying an older runnel declared it (none), or that it could not be
 * read or is malformed, naming it as what "name". */
int rn_decl_record_read(MDB_txn *txn, MDB_dbi meta, const char *what, const char *name, msgpack_zone *z,
                        msgpack_sbuffer *raw, msgpack_object *d, rn_err *e);

#endif
