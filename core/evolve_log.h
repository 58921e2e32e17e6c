/* evolve_log.h — a rebuild's changes told to the sinks of the rebuilt
 * relation in the next group (drawn in evolve_log.c). */
#ifndef RN_EVOLVE_LOG_H
#define RN_EVOLVE_LOG_H

#include "pipeline.h"

/* In the rebuilding transaction, around a stateful relation's rebuild
 * (join.c, aggregate.c …, a keyed map's keys in derive.c): its rows
 * before (what sinks were told) and
 * after; no-ops unless r->rebuild_tells (state kept, not created). A
 * filter or map whose function changed (derive.c, rn_derive_tell_old)
 * has its old function when before is called: its rows before are that
 * function over its input's rows as their sinks were told. */
int rn_rebuild_before(rn_rel *r);
int rn_rebuild_after(rn_rel *r);
/* rn_rebuild_before could not read r's rows as they were: the error is
 * cleared and nothing is told (the sinks are not told wrong changes). */
int rn_rebuild_untold(rn_rel *r);
/* In r's declaring transaction, before its catalogue entry, which its
 * columns changed, is replaced (rn_state_open): the rows it holds, read
 * as a reader of the state reads them (reader.h) in the columns the entry
 * held, given in r's new columns by name (the was = of its own columns,
 * or of its input's when its columns are its input's; a new column null,
 * even with a default or where not nullable: the sinks were told no value
 * of it; a new key column its default, else the rebuilt row's value under
 * its id) as what its sinks were told; the rebuild's rn_rebuild_after compares
 * them with its new rows. Rows that cannot be read or do not fit leave
 * nothing to tell and r->untold_why for the note. Not for a map (its
 * function gives its old rows: rn_rebuild_capture_told) nor over a
 * stream. */
int rn_rebuild_capture(rn_rel *r);
/* In a transaction of its own after map r's declaration, which changed
 * its columns but not its function (derive.c): its rows as its sinks were
 * told are its function over its input's rows as told (their sinks'),
 * made in the columns it had (r->told_schema, read by rn_state_open; their
 * defaults too, names they lack left out) and given in its new columns as
 * rn_rebuild_capture gives them; rn_rebuild_after compares them with its
 * rows now. MISFIT-like outcomes as rn_rebuild_capture's (r->untold_why);
 * its function failing on a row returns that error (p->err). */
int rn_rebuild_capture_told(rn_rel *r);
/* After r's setup: a capture nothing compared is dropped; the note that
 * r's sinks were not told, when they were not. */
int rn_rebuild_captured_done(rn_rel *r);
/* A failed declaration forgets what the capture kept in memory. */
void rn_rebuild_capture_forget(rn_rel *r);
/* The relation under r (its input, through filters and maps) whose sinks
 * were not told what its declaration changed, or NULL: r's rows as its
 * sinks were told cannot be made from it. */
const rn_rel *rn_told_unknown_under(const rn_rel *r);

/* In a transaction of its own at filter r's declaration, while an earlier
 * rebuild's changes wait to be told (r->rebuilt_pending): the rows r holds
 * now are made afresh against the told rows, which rn_rebuild_opened gave
 * in its columns now. Its input's rows may have changed since the changes
 * were made (a table under it declared with other columns, in this run or
 * one between, a rebuild under it), and its input's changes do not pass
 * through it while it tells its own (relation.c, rn_emit). Its function
 * failing on a row now fails the declaration; on a row as told
 * (*before_failed), the caller says its sinks were not told. fn_changed:
 * its function changed in this run (rn_derive_tell_old makes its rows as
 * told): only the rows now of the ids its entries name, none dropped. */
int rn_rebuild_now(rn_rel *r, bool fn_changed, bool *before_failed);

/* After r's state opened (rn_open_derived_state or, for a map or filter,
 * in the transaction that records its catalogue entry): finds what an
 * earlier rebuild left untold; created: dropped, the rows' layout changed.
 * A filter whose entry changed (r->waiting_schema) has the told rows it
 * left waiting given in its columns now, there, or dropped with a note
 * when they do not fit them. */
int rn_rebuild_opened(rn_rel *r, MDB_txn *txn, bool created);

/* Whether the rows of a table p:drop removed, whose columns are
 * t->dropped_schema, can be given in those of t, declared again (by name,
 * a rename followed, an int widened to float, a new column null): the
 * rows the filters and maps over t made of them, as their sinks were
 * told, are made from them then (scan_as_told). */
bool rn_dropped_fits(rn_rel *t);

/* A group opened (or its changes are applied again, group.c): every
 * pending rebuild's changes into its relation's log, first. */
int rn_rebuild_tell(rn_pipeline *p);
/* The group is being sealed in txn: the told changes are removed. */
int rn_rebuild_told(rn_pipeline *p, MDB_txn *txn);
/* The group committed (to the caller): nothing is pending any more. */
void rn_rebuild_committed(rn_pipeline *p);
/* The LMDB transaction committed: no carried group can be replayed. */
void rn_rebuild_flushed(rn_pipeline *p);

#endif
