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

/* ---- a list of names kept with its check ("rd:", "ev") ----
 *
 *     |name\0|…|"\xff" "nl1" check\0|   check: rn_check64 of the names
 *                                         before it, 16 lowercase hex digits
 *
 * A letter flipped inside a name still makes a list rn_names_readable: a
 * read of a relation that does not exist, or of the wrong one; a changed
 * relation no longer marked. The check catches it. It is a name of its
 * own, last: runnel 0.22 and older read it as one more name, of no
 * relation (no UTF-8 name begins "\xff"), and pass it by. They wrote the
 * names alone: read as before ("unchecked"), and written again with the
 * check. A name beginning "\xff" is a check, never a relation's: one not
 * of its shape is damage; one before the last name, an older check that
 * 0.22 added names after (the list is unchecked then). */
typedef enum rn_names_state {
  RN_NAMES_CHECKED,   /* the names, their check matching */
  RN_NAMES_UNCHECKED, /* the names, of runnel 0.22 or older */
  RN_NAMES_MALFORMED, /* not a list: cut, a name empty or too long */
  RN_NAMES_FAILED     /* a list whose check does not match: damaged */
} rn_names_state;

/* CRC-64/XZ (ECMA-182, reflected) of the len bytes at data: every burst
 * of up to 64 flipped bits is caught, any other damage but once in 2^64. */
uint64_t rn_check64(const void *data, size_t len);
/* What record v (an "rd:" or "ev" record, not empty) holds; the names
 * into *names and *len (pointing into v) unless MALFORMED or FAILED. */
rn_names_state rn_names_read(const MDB_val *v, const char **names, size_t *len);
/* Puts the list names (len bytes, rn_names_readable) under k in meta of
 * txn with its check. An LMDB code. */
int rn_names_put(MDB_txn *txn, MDB_dbi meta, MDB_val *k, const char *names, size_t len);
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
