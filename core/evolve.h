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
 *     (join, aggregate, (ids of rows whose key stays are kept); an aggregate or
 *      distinct)       distinct over a stream cannot be replayed: refused,
 *                      naming the choices.
 *     another kind     refused: drop it first.
 *
 * Each of these marks the relation changed (meta "ev", evolve.c), and the
 * stateful relations declared over it, directly or through others, are
 * rebuilt from their inputs (their state holds what it gave before); those
 * that read a stream are kept as they are (rn_evolve_opened). Relations
 * that do not read it keep their state. A relation a Lua function reads
 * (other:get in a mapper) counts as read (evolve_reads.h). What a rebuild
 * changed reaches the rebuilt relation's sinks, cdc logs and the filters
 * and maps over it at the start of the next group (evolve_log.h).
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
 * type): a note that r is rebuilt (and with it the stateful relations over
 * it), or the refusal of an aggregate over a stream (p->err). */
int rn_evolve_decl_changed(rn_pipeline *p, rn_rel *r);

/* The functions of relation name changed (evolve_code.h): the note that
 * says so, and its evolved mark in txn, so that it and the stateful
 * relations over it are rebuilt when declared. */
int rn_evolve_code_changed(rn_pipeline *p, MDB_txn *txn, const char *name);
/* A select (reader.h) declared again over other columns of the same
 * types: a note, and the stateful relations over it rebuilt. */
int rn_evolve_select_changed(rn_pipeline *p, rn_rel *r, MDB_txn *txn);

/* r's state was opened in its declaring transaction (rn_state_open;
 * created: it is new, or rebuilt as new): sets r->evolved when r or an
 * input is marked changed, and, when r is stateful over an evolved input
 * (or marked itself), sets *stale so it is rebuilt, with a note; over a
 * stream it is kept, and the note says so and why. A relation that comes
 * out evolved gets a new "eg:" stamp in txn (store.h): readers of the state
 * elsewhere (an attach a function holds) see that its rows changed. */
int rn_evolve_opened(rn_pipeline *p, rn_rel *r, MDB_txn *txn, bool created, bool *stale);

/* Reads the marks meta "ev" holds (v, at open). */
int rn_evolve_load(rn_pipeline *p, const MDB_val *v);

/* Registers a rename of a column of source table rel, applied when rel is
 * next declared and its state holds `from` but no `to` (p:alter, was =). */
int rn_evolve_rename(rn_pipeline *p, const char *rel, const char *from, const char *to);
/* The column a rename registered for rel names `to` from (p:alter, was =),
 * or NULL. */
const char *rn_evolve_renamed_from(const rn_pipeline *p, const char *rel, const char *to);
/* p:alter's rename: refused (RN_EMISUSE) once rel is declared in p. */
int rn_evolve_alter(rn_pipeline *p, const char *rel, const char *from, const char *to);

/* The lines of the changes applied since open, oldest first (owned by p). */
int rn_notes(const rn_pipeline *p, const char *const **lines);

/* A declaration's transaction failed: its notes (those after the first
 * nnotes) and its evolved marks (after the first nmarks bytes of
 * p->evolved_marks) are taken back. */
void rn_evolve_forget(rn_pipeline *p, int nnotes, size_t nmarks);

/* Adds a note (a line told to the host, notes.h). */
int rn_evolve_note(rn_pipeline *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees the renames, notes and marks (rn_pipeline_close). */
void rn_evolve_free(rn_pipeline *p);

#endif
