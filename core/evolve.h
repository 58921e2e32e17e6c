/* evolve.h — a relation declared again with another declaration than the
 * one its state was written with (DESIGN §13, "Schemas evolve").
 *
 * What happens, by kind (rn_evolve):
 *
 *     source table     the stored rows are brought to the declared schema in
 *                      the declaring transaction (all or nothing): columns
 *                      added (null or their default), dropped (not key),
 *                      renamed (p:alter / was =), reordered, widened
 *                      (int -> float where exact, any type -> any), made
 *                      nullable; row ids and keys stay. Anything else is
 *                      refused naming the column and both types.
 *     stream, cdc      no rows are kept: the new description is recorded
 *     stateful derived its state is rebuilt from its inputs, as stale state
 *     (join, aggregate, (ids of rows whose key stays are kept), and so is
 *      distinct)       every stateful relation declared after it (those over
 *                      it hold its old rows); an aggregate or distinct over
 *                      a stream cannot be replayed: refused, naming the
 *                      choices.
 *     another kind     refused: drop it first.
 *
 * Each change applied leaves one line in p's notes (rn_notes), e.g.
 * `players: added column "level" int = 1; renamed "lvl" to "rank"`. */
#ifndef RN_EVOLVE_H
#define RN_EVOLVE_H

#include "pipeline.h"

/* r is being declared in txn; its catalogue entry (key k) holds stored,
 * which differs from declared (both [kind, description]). Applies the
 * change and records declared, or refuses (p->err). *rebuild: r's derived
 * state was emptied and must be rebuilt from its inputs. */
int rn_evolve(rn_pipeline *p, rn_rel *r, MDB_txn *txn, const MDB_val *k, const MDB_val *stored,
              const msgpack_sbuffer *declared, bool *rebuild);

/* r's declaration record ("d:", reader.h) changed though its catalogue
 * entry did not (another column summed, another join column of the same
 * type): a note that r is rebuilt (and with it every stateful relation
 * declared after it), or the refusal of an aggregate over a stream (p->err). */
int rn_evolve_decl_changed(rn_pipeline *p, rn_rel *r);

/* The functions of relation name changed (evolve_code.h): the note that
 * says so, and the evolved mark in txn (as keep_evolved's), so that the
 * stateful derived relations declared after it are rebuilt. */
int rn_evolve_code_changed(rn_pipeline *p, MDB_txn *txn, const char *name);
/* A select (reader.h) declared again over other columns of the same
 * types: a note, and every stateful relation declared after it rebuilt. */
int rn_evolve_select_changed(rn_pipeline *p, rn_rel *r, MDB_txn *txn);

/* A source table changed since open and r is stateful derived state that
 * can be replayed: its state may hold the table's old rows, so it is rebuilt
 * (the relation need not read that table; a rebuild gives the same rows). */
bool rn_evolve_rebuilds(const rn_rel *r);

/* Registers a rename of a column of source table rel, applied when rel is
 * next declared and its state holds `from` but no `to` (p:alter, was =). */
int rn_evolve_rename(rn_pipeline *p, const char *rel, const char *from, const char *to);

/* The lines of the changes applied since open, oldest first (owned by p). */
int rn_notes(const rn_pipeline *p, const char *const **lines);

/* A declaration's transaction failed: its notes (those after the first
 * nnotes) and its evolved mark are taken back. */
void rn_evolve_forget(rn_pipeline *p, int nnotes, bool evolved);

/* Frees the renames and notes (rn_pipeline_close). */
void rn_evolve_free(rn_pipeline *p);

#endif
