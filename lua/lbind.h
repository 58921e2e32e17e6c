/* lbind.h — the Lua binding's shared types. The binding adapts Lua to the
 * core: it turns Lua tables into slot values, Lua functions into core
 * callbacks, and stored rows back into Lua tables.
 *
 * Userdata types (metatables named "runnel.<Type>"):
 *     runnel.Pipeline  an lpipe; closed when p is NULL
 *     runnel.Relation  an lrel; uservalue 1 = its pipeline (kept alive)
 *     runnel.Rows      a rows() iteration; ends its LMDB read at __close
 *
 * Callbacks run under lua_pcall; a failure becomes an RN_ECALLBACK for the
 * core, which rolls the group back; the binding raises after the core has
 * returned (never luaL_error across core frames). */
#ifndef RN_LBIND_H
#define RN_LBIND_H

#include <lauxlib.h>
#include <lua.h>

#include "pipeline.h"

#define RN_PIPELINE_MT "runnel.Pipeline"
#define RN_RELATION_MT "runnel.Relation"
#define RN_ROWS_MT "runnel.Rows"

typedef struct lpipe {
  rn_pipeline *p;        /* NULL once closed */
  bool borrowed;         /* a host's pipeline (rn_run_lua): closing it is the host's */
  struct host_link *host; /* rn_run_lua's bookkeeping (lembed.c), or NULL */
  lua_State *L;          /* the thread running the current call into runnel */
  msgpack_zone zone;     /* decoding rows for Lua; cleared after each push */
  int clock_ref;         /* runnel.open{ clock = fn }, or LUA_NOREF */
  int depth;             /* user functions running now (close is refused inside one) */
  const char *fn_rel;    /* the relation whose function (filter, map, mapper, selector, joiner,
                            aggregate) runs now, or NULL: what it reads is noted (evolve_reads.h) */
  const char *noted_by;  /* the last read noted: by fn_rel … */
  const void *noted_of;  /* … of this relation (the same read again is not looked up) */
  int batches;           /* p:batch(fn) calls running (runnel.lua sets it): a change finding no group
                            open is refused, an error fn caught having rolled the batch's group back */
} lpipe;

/* rn_rel->udata: what the binding keeps per relation (freed by the core
 * through udata_free). */
typedef struct lrelinfo {
  lpipe *lp;             /* whose lua_State holds the refs */
  int names_ref;         /* registry: slot (1-based) -> name string */
  int slots_ref;         /* registry: name -> slot (1-based) */
  int ncols;
  int *after;            /* (after keys) after[s + 1]: the slot of the key that followed slot
                            s's in the last row rn_lua_torow read, after[0] its first: rows
                            built alike iterate alike, so this guess is usually right */
  const void *keys[];    /* lua_topointer of each name string, kept alive by names_ref: a
                            row key that is one of these very objects needs no type check
                            or table lookup */
} lrelinfo;

typedef struct lrel {
  lpipe *lp;             /* the pipeline (kept alive by uservalue 1) */
  rn_rel *rel;           /* valid while lp->p is not NULL */
} lrel;

/* runnel.null: one light userdata for every state. */
extern const char rn_lua_null_tag;
#define RN_LUA_NULL ((void *)&rn_lua_null_tag)

/* lbind.c: errors at the user's line, pipelines and relations, Lua under
 * protection. It calls no other file of the binding. */
#define RN_DSL_SOURCE "runnel.dsl_sources" /* registry: { [chunk name] = true } of the DSL's files (core._dsl) */

/* The name (of a relation, lookup, store, sink table or file) at idx: one
 * rule for every name, as for columns — non-empty, no NUL byte (C would
 * cut it there and use another name). Raises otherwise, naming `what`. */
const char *rn_lua_checkname(lua_State *L, int idx, const char *what);
/* The same for a file or state path ("what: the path must not be empty"). */
const char *rn_lua_checkpath(lua_State *L, int idx, const char *what);
/* Pushes "chunk:line: " of the code that called into runnel: luaL_where(L,
 * 1), except that frames of runnel.lua (the DSL's wrappers) are skipped;
 * "" when that caller is C (pcall, a host). */
void rn_lua_where(lua_State *L);
/* luaL_error at rn_lua_where's position, the message's control bytes
 * escaped (rn_err_escape): every error a user causes names
 * the user's line. */
int rn_lua_error(lua_State *L, const char *fmt, ...);
/* As rn_lua_error with a message made already (a core message, which may
 * end with a callback's own text): not escaped again. */
int rn_lua_error_as_is(lua_State *L, const char *msg);
/* Raises the pipeline's last error at the caller's line. */
int rn_lua_raise(lua_State *L, lpipe *lp);
/* Reports a failure found by the binding before the core ran: rolls back
 * the open group, then raises. */
int rn_lua_fail(lua_State *L, lpipe *lp);
/* Raises when L is running a finalizer (__gc). A finalizer runs at any
 * allocation, also in the middle of a runnel call that holds the
 * pipeline's memory (a row being made, a scan, a schema): closing,
 * changing or even reading the pipeline there frees or reuses that
 * memory. Every method checks (lua_gc answers -1 inside a finalizer, Lua
 * 5.4.4 on); a pipeline's own __gc does not come here. */
void rn_lua_not_in_finalizer(lua_State *L);
/* The open pipeline at idx; raises when it is closed or called from a
 * finalizer. */
lpipe *rn_lua_checkpipe(lua_State *L, int idx);
/* Records the binding's per-relation data (once) for a relation. */
int rn_lua_relinfo(lua_State *L, rn_rel *rel);
/* Pushes a new Relation userdata for rel; the pipeline userdata is at pidx. */
void rn_lua_pushrel(lua_State *L, int pidx, rn_rel *rel);
/* The relation at idx, of an open pipeline, not from a finalizer; raises otherwise. */
lrel *rn_lua_checkrel(lua_State *L, int idx);
/* As rn_lua_checkrel, for a relation that must belong to lp. */
lrel *rn_lua_checkrel_of(lua_State *L, int idx, lpipe *lp);
/* The end of every declaration: pushes the new relation, or nil and the
 * pipeline's error when rc says it failed. Returns the count pushed. */
int rn_lua_declared(lua_State *L, lpipe *lp, int rc, rn_rel *rel);

/* Puts the collector of a state that runs a pipeline in generational mode
 * with a minor multiplier of 5 (lbind.c), unless the program chose its own settings: a stopped
 * collector, a pause or step multiplier other than Lua's defaults, or
 * generational mode already. A joiner or map that returns a new table per
 * call makes young garbage; Lua's default incremental collector lets it
 * grow to the size of everything else the program holds before a cycle
 * starts. collectgarbage("incremental") after runnel.open takes it back. */
void rn_lua_gc_default(lua_State *L);

/* A callback's body: pushes the user function and its arguments, calls it
 * (lua_call) and handles what it returned. Returns 0 or an RN_E… code with
 * e set. */
typedef int (*rn_lua_body)(lua_State *L, void *ud, rn_err *e);
/* Runs body(L, ud, e) under lua_pcall, from a core callback: every Lua API
 * call in it is protected (a function, metamethod or allocation that raises
 * cannot unwind the core's frames). Restores lp->L and turns a Lua error
 * into e ("rel: what: message", or "what: message" when rel is NULL;
 * RN_ECALLBACK, or the code of a runnel error raised inside). */
int rn_lua_protect(lpipe *lp, lua_State *L, rn_lua_body body, void *ud, const char *rel, const char *what,
                   rn_err *e);
/* As rn_lua_protect, with the top nargs values moved into the call: body
 * finds them at 2 .. nargs + 1 (index 1 is the call's own). */
int rn_lua_protect_on(lpipe *lp, lua_State *L, int nargs, rn_lua_body body, void *ud, const char *rel,
                      const char *what, rn_err *e);
/* Calls the function below nargs arguments on L's top under lua_pcall from
 * a core callback, leaving nresults results (LUA_MULTRET: all of them).
 * Only the call is protected: the caller must handle the results without
 * raising (or hand them to rn_lua_protect_on). An error is turned into e
 * as rn_lua_protect does (the message popped); lp->L is restored. */
int rn_lua_pcall(lpipe *lp, lua_State *L, int nargs, int nresults, const char *rel, const char *what, rn_err *e);
/* The text of the error object on L's top, left in its place: a string (or
 * a number), what its __tostring gives (called protected), or NULL (no
 * text: name its type). Raises nothing. */
const char *rn_lua_errtext(lua_State *L);
/* rel is read (get, id_of, count, rows, scan, schema, changes, late; an
 * index's range, count and rank; a top's count): from inside a relation's
 * function, the core notes it as that relation's dependency
 * (evolve_reads.h). Raises on failure. */
void rn_lua_note_read(lua_State *L, lpipe *lp, const rn_rel *rel);

/* lconvert.c */
/* Converts the row table at idx (a full row or a patch, keyed by external
 * names) into slot values in lp's pipeline scratch zone. On failure returns
 * an RN_E… code with the message in p->err (no Lua error raised). */
int rn_lua_torow(lpipe *lp, lua_State *L, int idx, rn_rel *rel,
                 msgpack_object **vals, uint8_t **given);
/* As rn_lua_torow for a key: a table of key columns, or a scalar for a
 * one-column key. */
int rn_lua_tokey(lpipe *lp, lua_State *L, int idx, rn_rel *rel,
                 msgpack_object **vals, uint8_t **given);
/* The scalar at idx (nil, boolean, number or string; type: lua_type of
 * it) into out, raising nothing; false for any other value. */
bool rn_lua_toscalar(lua_State *L, int idx, int type, msgpack_object *out);
/* Converts one Lua value (for a column, or "any" when col is NULL). */
int rn_lua_tovalue(lpipe *lp, lua_State *L, int idx, const rn_column *col,
                   msgpack_object *out, int depth);
/* Pushes a stored row of rel as a table keyed by external names (nulls
 * absent); pushes nil if data is NULL. */
void rn_lua_pushrow(lpipe *lp, lua_State *L, rn_rel *rel, const char *data, size_t len);
/* Pushes a row's values in slot order as a sequence (nulls as runnel.null). */
void rn_lua_pushvalue(lua_State *L, const msgpack_object *o, const rn_column *col);
/* Builds a schema from a normalized column spec (see runnel.lua). Returns
 * NULL with the message in e. */
rn_schema *rn_lua_toschema(lpipe *lp, lua_State *L, int cols_idx, int key_idx,
                           const char *rel, rn_err *e);

/* The binding's "nil, message" return. */

static inline int rn_lua_nil_error(lua_State *L, const char *msg)
{
  lua_pushnil(L);
  lua_pushstring(L, msg);
  return 2;
}

/* Registers funcs into the table at idx. */
static inline void rn_lua_setfuncs_at(lua_State *L, int idx, const luaL_Reg *funcs)
{
  lua_pushvalue(L, idx);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}

/* t[field] = v for the table on top of the stack. */
static inline void rn_lua_setint(lua_State *L, const char *field, lua_Integer v)
{
  lua_pushinteger(L, v);
  lua_setfield(L, -2, field);
}

/* lio.c: pushes a run's counts as { <lines>, applied, rejected, groups },
 * lines named as the source calls its units ("lines", "messages"). */
struct rn_run_stats;
void rn_lua_push_run_stats(lua_State *L, const struct rn_run_stats *st, const char *lines);

/* lrow.c: runnel.Row, a stored row lent to one callback call. The
 * decoding state (an lrow) is kept by the callback and reused call after
 * call; what Lua sees is a Row leasing it (the Row's uservalue keeps the
 * lrow alive), valid while the lrow's gen is the one the Row was given
 * at: a Row kept from an earlier call raises when read, rather than read
 * the current call's row. */
typedef struct lrow {
  lpipe *lp;
  rn_rel *rel;           /* whose schema the row follows (read only while lent) */
  const char *row;       /* NULL: not lent (its call has returned) */
  size_t len;
  uint64_t gen;          /* counts lendings and takings back: a Row given at another gen is stale (never wraps) */
  uint64_t read;         /* the slots read since lent, a bit each (bit 63: slot 63 on, or pairs) */
  int ncols;
  bool spans_ok;         /* spans holds where each column starts */
  const void **names;    /* lua_topointer of each column's name string (after spans) */
  const char *rel_name;  /* rel's name (after names): a Row may outlive rel */
  size_t spans[];        /* ncols + 1 */
} lrow;

/* Pushes a Row of a new lrow for rows of rel, lent to nothing yet;
 * returns the lrow. May raise. */
lrow *rn_lua_newrow(lua_State *L, lpipe *lp, rn_rel *rel);
/* Lends r the row (NULL: takes it back); clears its read mask and makes
 * every Row of it stale. The row must stay valid until it is taken back. */
void rn_lua_row_lend(lrow *r, const char *row, size_t len);
/* The Row at idx (one of ours) made valid for its lrow's current lending:
 * raises nothing. For a function that cannot keep it past the call. */
void rn_lua_row_renew(lua_State *L, int idx);
/* Replaces the Row on top of the stack with a new Row of the same lrow,
 * valid for its current lending only. May raise (it allocates). */
void rn_lua_lease(lua_State *L);
/* The lrow of the Row at idx while that Row is valid; NULL otherwise,
 * with *stale set when it is a Row whose call has returned. */
lrow *rn_lua_testrow(lua_State *L, int idx, bool *stale);

/* lrelation.c: the runnel.Relation metatable and methods. */
void rn_lua_relation_open(lua_State *L);

/* lcallback.c */
int rn_lua_declare_filter(lua_State *L);
int rn_lua_declare_map(lua_State *L);
int rn_lua_add_sink(lua_State *L);
int rn_lua_on_durable(lua_State *L);
int rn_lua_declare_join(lua_State *L);
int rn_lua_declare_select(lua_State *L);

/* lio.c: adds p:_ndjson_sink and p:_run to the methods table at index methods. */
void rn_lua_io_open(lua_State *L, int methods);
/* The JetStream sink and source methods (ljetstream.c). */
void rn_lua_jetstream_open(lua_State *L, int methods);

/* llookup.c */
void rn_lua_opened(lua_State *L, lpipe *lp, int pidx);
void rn_lua_push_lookup_stats(lua_State *L, rn_pipeline *p);
void rn_lua_lookup_open(lua_State *L, int methods, int module);

/* laggregate.c */
int rn_lua_declare_aggregate(lua_State *L);
int rn_lua_aggregate_late(lua_State *L);

/* lorder.c: ordered access (p:_top, p:_index; an index's reads) */
int rn_lua_declare_top(lua_State *L);
int rn_lua_declare_index(lua_State *L);
int rn_lua_index_range(lua_State *L);
int rn_lua_index_count(lua_State *L);
int rn_lua_index_rank(lua_State *L);
int rn_lua_ordered_count(lua_State *L);
/* An index read's checks, shared with an attached index's (llookup.c);
 * who names the relation ("by_score", "attach by_score"), what the read.
 * Refuses a key of the options table at idx outside allowed (a
 * NULL-terminated list). */
void rn_lua_check_read_opts(lua_State *L, int idx, const char *who, const char *what, const char *const *allowed);
/* Refuses a bound at idx (named opt) that is not nil, a scalar or a
 * sequence of scalars, or that holds NaN. */
void rn_lua_check_bound(lua_State *L, int idx, const char *who, const char *what, const char *opt);
/* The offset or limit at idx (nil: 0): an integer, or a float that is one,
 * not negative. */
lua_Integer rn_lua_read_count_opt(lua_State *L, int idx, const char *who, const char *what, const char *opt);

/* lpipeline.c: the runnel.Pipeline metatable and methods (with lio.c's
 * and llookup.c's; llookup.c adds its module functions to the table at
 * module); runnel.open; forgetting a closed pipeline. */
void rn_lua_pipeline_open(lua_State *L, int module);
int rn_lua_open(lua_State *L);
void rn_lua_detach(lpipe *lp);

/* llive.c: adds the methods of a state that lives through deploys
 * (p:_rename, p:_notes, p:_drop, p:_undeclared) to the table at methods. */
void rn_lua_live_open(lua_State *L, int methods);

/* lmodule.c: luaopen_runnel_core (exported), the module's entry. */

/* lembed.c: makes require "runnel" work in L (modules compiled in). */
void rn_lua_preload(lua_State *L);

/* linspect.c */
/* Pushes a durable sink's record and what waits for it (outbox.h) as
 * { sink, key, relation, groups, rows, since, seen, relation_gone }: the
 * shape of p:stats().outbox_undeclared and runnel.inspect's outbox_waiting. */
struct rn_outbox_kept;
void rn_lua_push_waiting(lua_State *L, const struct rn_outbox_kept *k);
int rn_lua_inspect(lua_State *L);
int rn_lua_state_version(lua_State *L);

#endif
