/* evolve_reads.h — the relations a derived relation's Lua functions read
 * (a mapper that calls other:get(k), a filter that counts another table):
 * dependencies no declaration shows. The binding tells the core of each
 * read made from inside a relation's function (rn_reads_note); the state
 * keeps them, and a relation that read one that changed since (evolve.h)
 * is treated as over a changed input: rebuilt when stateful, and marked
 * evolved so what is built over it is rebuilt too.
 *
 *     meta "rd:" name   |read name\0|…|   (the relations name's functions read)
 *
 * A read is recorded when first seen and written with the next group that
 * commits (save_counters, group.c). The relation read must be declared
 * before the one reading it for its change to be seen then (a Lua function
 * holds the relation it reads, so it is).
 *
 * Every read method of a relation counts (get, rows, scan, count, an
 * index's range and rank …: rn_lua_note_read, lua/lbind.h), and a read
 * through runnel.attach of the pipeline's own state is a read of its
 * relation of that name; an attach of another state cannot be one (its
 * evolution rebuilds nothing here): lua/llookup.c, read_attached, says
 * what is done instead and what is not seen. */
#ifndef RN_EVOLVE_READS_H
#define RN_EVOLVE_READS_H

#include "pipeline.h"

/* Whether the len bytes at data are a list |name\0|…| of one or more
 * names of 1 to RN_NAME_MAX bytes: what "rd:" and "ev" records hold. */
bool rn_names_readable(const void *data, size_t len);
/* r's function (reader: the name of the relation running it) read
 * relation read: recorded, unless known already. */
int rn_reads_note(rn_pipeline *p, const char *reader, const rn_rel *read);
/* Loads what r's functions were seen to read, from meta in txn (at declaration). */
int rn_reads_load(rn_pipeline *p, rn_rel *r, MDB_txn *txn);
/* The first relation r's functions read that changed (evolved), or NULL. */
const rn_rel *rn_reads_evolved(const rn_rel *r);
/* Writes the reads recorded since the last LMDB commit, in txn. */
int rn_reads_save(rn_pipeline *p, MDB_txn *txn);
/* The LMDB transaction holding them committed. */
void rn_reads_saved(rn_pipeline *p);

#endif
