/* evolve_code.h — the Lua functions a derived relation runs (a filter's or
 * map's function, a join's mapper, selector and joiner, an aggregate's
 * runnel.agg functions), changed between runs over one state. Their rows,
 * or the rows built from them downstream, were made by the old functions:
 * like a declaration that changed (evolve.h), a new function has the state
 * built from it rebuilt.
 *
 * The binding gives a fingerprint of the functions (lua/runnel.lua: their
 * bytecode without debug information, and the values of the upvalues they
 * read); the state keeps its hash:
 *
 *     meta "fn:" name   |u64 rn_hash64(fingerprint)|
 *
 * A fingerprint that differs from the one kept marks the relation changed
 * (store.h's "ev", in the same transaction, evolve.h): it, when stateful,
 * and every stateful relation that reads it, directly or through others (a
 * join, aggregate, distinct, top or index), is rebuilt from its inputs, as
 * after a source table's rewrite; one over a stream is kept, with a note
 * saying why. None kept (a new relation, or a state an older runnel wrote)
 * is recorded without a rebuild. */
#ifndef RN_EVOLVE_CODE_H
#define RN_EVOLVE_CODE_H

#include "pipeline.h"

/* Before relation name is declared (outside groups): records the hash of
 * its functions' fingerprint (len bytes); when it differs from the one the
 * state keeps, adds the note "name: its function changed" and marks name
 * changed. Errors as a declaration's (rn_check_declarable).
 *
 * The record is written by the declaration that follows, in its own
 * transaction (rn_code_apply, from rn_state_open): a declaration that
 * fails, or never comes (an error or an interrupt in between), leaves the
 * state as it was, not holding the functions of a relation it does not
 * hold, which the next declaration under that name would take for a
 * change. */
int rn_code_record(rn_pipeline *p, const char *name, const char *fingerprint, size_t len);

/* In txn, at the declaration of relation name (rn_state_open): writes what
 * the last rn_code_record(_again) took for name, if anything, as it would
 * have been written then. */
int rn_code_apply(rn_pipeline *p, const char *name, MDB_txn *txn);
/* The declaration that followed the record ended (ok: committed); the
 * record is dropped, and what rn_code_apply noted in p taken back if not
 * ok. Also at close. */
void rn_code_done(rn_pipeline *p, bool ok);

/* What a filter's or map's function is, to run again. */
typedef enum {
  RN_CODE_NONE,   /* nothing to tell: unchanged, nothing pending */
  RN_CODE_KEPT,   /* code: the function, to run again (the binding's format) */
  RN_CODE_UNKEPT, /* it cannot be run again */
  RN_CODE_ABSENT  /* the state holds no copy (a state of runnel 0.18 or older) */
} rn_code_kind;

typedef struct rn_code_again {
  rn_code_kind kind;
  char *code;     /* KEPT: malloc'd (told) or borrowed (again); told: NULL when why */
  size_t len;
  const char *why; /* told, KEPT: why the state's copy is not run (damaged, or kept without
                      a check by runnel 0.19; evolve_code.c), a static string; else NULL */
} rn_code_again;

/* rn_code_record for a filter or map: keeps again (KEPT or UNKEPT) as its
 * function now, with a check of it; *told: the function its sinks' rows
 * came from when they were not told yet what a change of function did
 * (KEPT, code the caller's to free; or no code and why: the state's copy
 * does not match its check, or has none, and is not to be run), or why
 * they cannot be (UNKEPT, ABSENT), else NONE. */
int rn_code_record_again(rn_pipeline *p, const char *name, const char *fingerprint, size_t len,
                         const rn_code_again *again, rn_code_again *told);
/* Did rn_code_record find relation name's functions changed since p
 * opened? (A map declared again with other columns then tells what
 * changed with its old function, rn_derive_tell_old, not its new one.) */
bool rn_code_changed_since_open(const rn_pipeline *p, const char *name);
/* In txn: name's sinks were told (or cannot be): "fo:" name goes. */
int rn_code_told(rn_pipeline *p, MDB_txn *txn, const char *name);
/* In txn: does "fo:" name say a change of its function is still to be
 * told (rn_derive_tell_old tells it, with all that changed under it)? */
bool rn_code_untold(rn_pipeline *p, MDB_txn *txn, const char *name);

#endif
