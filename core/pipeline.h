/* pipeline.h — the pipeline, its relations and the changes that flow
 * between them. Internal: hosts use runnel.h.
 *
 * Groups (the state machine; see group.c for the invariants):
 *
 *     IDLE --rn_begin--> OPEN --rn_commit--> COMMITTING --> IDLE
 *                          |                      |
 *                          +----rn_rollback / any failure----> IDLE
 *
 * A change made in IDLE opens a group for itself and commits it (autocommit).
 * While a change runs through the operators the pipeline is APPLYING; user
 * callbacks may read then, but not change tables (that would re-enter). */
#ifndef RN_PIPELINE_H
#define RN_PIPELINE_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "schema.h"
#include "store.h"

/* A file format: verbs are written into the state (the outbox, store.h). */
typedef enum rn_verb { RN_INSERT = 1, RN_UPDATE = 2, RN_DELETE = 3 } rn_verb;

/* One change of one row. Row pointers are valid while the change is being
 * delivered; copy what you keep. */
typedef struct rn_change {
  rn_verb verb;           /* INSERT, UPDATE or DELETE */
  uint64_t id;            /* the row id */
  const char *row;        /* the new row (INSERT, UPDATE), else NULL */
  size_t row_len;
  const char *old;        /* the previous row (UPDATE, DELETE), else NULL */
  size_t old_len;
} rn_change;

/* A file format: the kind is written into the state (the "r:" entry,
 * store.h), so each value is pinned; never renumber, only add. */
typedef enum rn_relkind {
  RN_REL_TABLE = 0,       /* keyed or keyless table (schema->nkey says) */
  RN_REL_STREAM = 1,      /* append-only source */
  RN_REL_FILTER = 2,      /* derived: rows passing a predicate */
  RN_REL_MAP = 3,         /* derived: rows rewritten by a function */
  RN_REL_CDC = 4,         /* derived at commit: images of a table-like relation */
  RN_REL_JOIN = 5,        /* derived: left joined with right */
  RN_REL_AGGREGATE = 6,   /* derived: groups of an input, with aggregates */
  RN_REL_LOOKUP = 7,      /* rows fetched on demand from outside (a join's right side) */
  RN_REL_DISTINCT = 8,    /* derived: the distinct rows of an input (distinct.c) */
  RN_REL_TOP = 9,         /* derived: the first n rows per group, ranked (top.c) */
  RN_REL_INDEX = 10       /* derived: an input's rows, kept in an order (index.c) */
} rn_relkind;

/* The kind's name ("table", "lookup" …); "?" for a number that is no kind
 * (a damaged catalogue entry). Each operator names its kind (ops.c). */
const char *rn_relkind_name(int64_t kind);

typedef void (*rn_free_fn)(void *ctx);
/* Sets *pass to 0 or 1 for row (a row of in). */
typedef int (*rn_filter_fn)(void *ctx, rn_rel *in, const char *row, size_t len,
                            int *pass, rn_err *e);
/* Appends the output row (a normalized row of out) to result, or sets
 * *has_row to 0 for no row. */
typedef int (*rn_map_fn)(void *ctx, rn_rel *in, rn_rel *out, const char *row, size_t len,
                         msgpack_sbuffer *result, int *has_row, rn_err *e);

/* The changes of one relation in the open group, kept while a sink listens.
 * Row bytes live in the pipeline's group zone. */
typedef struct rn_log {
  rn_change *items;       /* in the order they were made */
  size_t n, cap;
} rn_log;

typedef struct rn_rel_ops rn_rel_ops; /* an operator (ops.h) */

struct rn_rel {
  rn_pipeline *p;         /* owner */
  char *name;             /* external name, owned */
  rn_relkind kind;
  const rn_rel_ops *ops;  /* the operator of its kind (ops.h) */
  bool tablelike;         /* its changes include updates and deletes */
  rn_schema *schema;      /* owned */
  MDB_dbi rows_dbi;       /* sources: "t:" name */
  MDB_dbi hash_dbi;       /* keyless tables: "h:" name */
  MDB_cursor *rows_cur;   /* keyed tables: a cursor on rows_dbi in the write transaction */
  uint64_t rows_cur_txn;  /* … of this store txn_serial (LMDB frees it with its transaction) */
  uint64_t next_id;       /* sources: the next id to allocate */
  uint64_t count;         /* tables: live rows; streams, cdc, stream joins: events given (store.h) */
  uint64_t saved_next_id; /* values at the last group commit, restored on rollback */
  uint64_t saved_count;
  uint64_t lmdb_next_id;  /* values at the last LMDB commit (replays start there) */
  uint64_t lmdb_count;
  rn_rel *input;          /* derived: the relation it reads */
  rn_rel *right;          /* a join: its right side (input is its left) */
  bool evolved;           /* changed since the last group, or reads one that did: the stateful
                             relations over it are rebuilt (evolve.h) */
  const char *evolved_by; /* then the name of the relation that changed (NULL: not known) */
  void *ctx;              /* the operator's own state (its kind's struct); ops->free frees it */
  rn_rel **outputs;       /* relations derived from this one */
  int noutputs, outcap;
  int listeners;          /* sinks and cdc relations reading its log */
  rn_log log;             /* this group's changes (when listeners > 0) */
  size_t log_told;        /* the first of them a rebuild told (evolve_log.h): a sink written again
                             from the rows the rebuild made skips them (rn_log_own) */
  bool persistent;        /* has counters in meta (sources, cdc, joins) */
  bool stateful;          /* derived state that must see every group (joins) */
  bool rebuild_tells;     /* while its state opens: a rebuild keeps what it changed (evolve_log.h) */
  bool rebuilt_open;      /* rebuilt_dbi ("rb:" name) is open */
  bool decl_changed;      /* its catalogue entry was new or changed when declared (rn_state_open) */
  bool decl_new;          /* its catalogue entry was new: the state never held it, its sinks saw nothing */
  bool rebuilt_pending;   /* it holds a rebuild's changes the next group tells */
  bool rebuilt_unflushed; /* a group told them, in an LMDB transaction not yet committed */
  bool told_rows;         /* its function (or its old one) is making the rows its sinks were told
                             (RN_ROW_AS_TOLD) */
  bool rebuild_captured;  /* its old rows, in its new columns, are in rebuilt_dbi already (evolve_log.h) */
  bool told_unknown;      /* its sinks were not told what its declaration changed: what they hold is not
                             known, nor what relations over it were told (evolve_log.h) */
  int *rebuild_fill;      /* captured: the key slots its old rows lack that take the rebuilt row's value */
  int nfill;
  char *untold_why;       /* the capture found its old rows cannot be told: why (for the note) */
  rn_schema *told_schema; /* a map declared again with other columns: the columns (and defaults) its
                             rows had, read at rn_state_open, until its sinks are told (derive.c), owned */
  int *added_slots;       /* a source table: the columns its declaration added in this run (evolve.c), owned;
                             a map over it made them as nothing when its sinks were told its rows */
  int nadded;
  int *now_slots;         /* a source table whose declaration moved its columns in this run (evolve.c): per
                             stored slot, where the column is now (-1: dropped), owned; NULL: none moved */
  int nstored;            /* how many stored slots now_slots has */
  char **stored_names;    /* with now_slots: the name of each stored column, owned */
  rn_schema *waiting_schema; /* a filter whose catalogue entry changed: the columns the entry held, which the
                               told rows its rebuild left waiting are in, read at rn_state_open until
                               rn_rebuild_opened gives them in its columns now, owned */
  bool as_told;           /* a stand-in for a map making its rows in told_schema (evolve_log.c): names
                             its function gives that those columns lack are left out */
  MDB_dbi rebuilt_dbi;
  MDB_dbi dropped_dbi;    /* a source table declared again after p:drop: "dt:" name, the dropped one's rows */
  rn_schema *dropped_schema; /* … in these columns (meta "dk:" name), owned; NULL: none kept */
  bool dropped_open;      /* they are kept until a group with it declared: the filters and maps over it
                             make the rows their sinks were told from them (evolve_log.c, scan_as_told) */
  bool dropped_unflushed; /* a group emptied them, in an LMDB transaction not yet committed */
  char *reads;            /* |name\0|…|: the relations its Lua functions read (evolve_reads.h), owned */
  size_t reads_len;
  bool reads_dirty;       /* a read not yet written to meta "rd:" */
  uint64_t emitted[3];    /* INSERTs, UPDATEs, DELETEs emitted since open */
  uint64_t emitted_saved; /* their sum when the last group's "ch:" record was written (store.h) */
  uint64_t changed_seq;   /* the last group since open in which it emitted a change, or 0 */
  struct {                /* the three above as the open group began: a group rolled back changed */
    uint64_t emitted[3];  /* nothing, a regrow counts it again from here (group.c, take_back, restart) */
    uint64_t saved, changed_seq;
  } begun;
  void *udata;            /* the binding's data; runnel only hands it to udata_free */
  rn_free_fn udata_free;  /* frees udata when the relation is freed, or NULL */
  uint16_t slot_hint[RN_SLOT_HINTS]; /* the slot of the column named i-th in the last change pushed
                                        as a map (a guess, checked: rn_schema_slot_hinted) */
};

typedef struct rn_sink_info {
  uint64_t id;            /* row id */
  uint64_t seq;           /* the group's sequence number */
  uint64_t n;             /* 1-based position among this sink's changes in the group */
} rn_sink_info;

typedef int (*rn_sink_fn)(void *ctx, rn_rel *rel, const rn_change *c,
                          const rn_sink_info *info, rn_err *e);
typedef int (*rn_sink_commit_fn)(void *ctx, uint64_t seq, rn_err *e);
/* After group seq: committed, or rolled back after any phase reached the
 * sink (sink.c, SINKS-1): it drops what it kept of the group then. */
typedef void (*rn_sink_done_fn)(void *ctx, uint64_t seq, bool committed);

typedef struct rn_sink {
  rn_rel *rel;            /* the relation it listens to */
  bool consolidate;       /* one net change per row id per group */
  rn_sink_fn on_change;   /* may be NULL */
  rn_sink_commit_fn on_commit; /* after every sink got the group's changes; may be NULL */
  rn_sink_commit_fn on_seal;   /* after every on_commit succeeded, before LMDB commits: the last
                                  point that can still fail the group (external commits); may be NULL */
  rn_sink_done_fn on_done;     /* once the group committed or rolled back; may be NULL */
  int (*on_replay)(void *ctx, rn_err *e); /* LMDB's transaction was restarted and the carried
                                             groups applied again: redo its own writes of them (GROUP-6) */
  void (*on_forget)(void *ctx); /* LMDB's transaction committed (or was lost): no group is carried */
  void (*on_lost)(void *ctx, uint64_t seq); /* a carried group it was told committed will never reach
                                               LMDB (its commit failed: SINKS-2); may be NULL */
  uint64_t *told;              /* with on_lost: the carried groups it saw, oldest first */
  size_t ntold, told_cap;
  uint64_t told_all_from;      /* with on_lost: 0, or the first carried group it saw that told[] could
                                  not hold (out of memory): it saw every later one, by assumption */
  bool delivered;              /* some phase reached it in the open group (SINKS-1) */
  size_t took;                 /* the open group's changes it took (SINKS-3) */
  uint64_t holds_told;         /* the group whose rebuild's changes it holds already (rn_log_own) */
  bool took_commit, took_seal; /* its on_commit, on_seal returned 0 for the open group (SINKS-3) */
  void *ctx;
  rn_free_fn free_ctx;
} rn_sink;

/* A source change of the open group, kept so the group can be replayed in a
 * new transaction when LMDB's map fills mid-group (group.c). */
typedef struct rn_logged {
  rn_rel *rel;            /* the source */
  rn_change c;            /* bytes in the group zone */
} rn_logged;

typedef struct rn_replay {
  rn_logged *items;
  size_t n, cap;
} rn_replay;

typedef enum rn_gstate { RN_IDLE, RN_OPEN, RN_APPLYING, RN_COMMITTING } rn_gstate;

typedef struct rn_stats {
  uint64_t groups;        /* committed groups since open */
  uint64_t changes;       /* changes applied to sources since open */
  uint64_t rollbacks;     /* groups rolled back since open */
  uint64_t lmdb_commits;  /* LMDB transactions committed since open */
} rn_stats;

struct rn_pipeline {
  rn_store store;         /* LMDB */
  rn_err err;             /* the last failure */
  rn_rel **rels;          /* every relation, in declaration order */
  int nrels, relcap;
  rn_sink **sinks;        /* in registration order */
  int nsinks, sinkcap;
  rn_gstate state;
  uint64_t group_serial;  /* counts groups begun: cursors know their group */
  struct rn_table_cursor *cursors; /* open cursors, ended at close */
  bool autocommit;        /* the open group was opened by a change for itself */
  uint64_t seq;           /* last committed sequence number */
  uint64_t changes_from;  /* the "ch:" records know every change after this group (store.h's "chs") */
  msgpack_zone scratch;   /* per top-level change: decoded rows, derived rows */
  msgpack_zone group_zone;/* per group: logged row bytes */
  rn_replay replay;       /* source changes of the carried groups and the open one */
  size_t replay_mark;     /* where the open group's changes start in replay */
  msgpack_zone carry_zone;/* replay's row bytes, until the LMDB commit */
#define RN_CARRY_GROUPS 256      /* the default bounds of a carried transaction */
#define RN_CARRY_CHANGES 200000
#define RN_CARRY_SECONDS 0.5
  bool carry;             /* sync = false: several groups may share an LMDB transaction */
  uint32_t carry_groups;  /* the bounds of a carried transaction (rn_open_opts) */
  size_t carry_changes;
  double carry_seconds;
  /* With a share, a carried transaction also ends before it would copy (by
   * estimate) 1/share of the pages its writes went to (wb.h,
   * rn_wb_dirtied_over): the file stays within about 1 + 1/share times the
   * live data (fkjoin: 1.22 with 3, 1.41 with 2), at about two thirds of
   * the apply speed on random updates of a large state, so it is off by
   * default. Either way an empty transaction follows each carried commit
   * (rn_store_release_pages), so the next reuses the pages it freed
   * (fkjoin without the bound: 1.76 times instead of 2.5). */
#define RN_CARRY_PAGE_SHARE 0
  unsigned carry_page_share; /* rn_open_opts, else RUNNEL_CARRY_PAGE_SHARE, else RN_CARRY_PAGE_SHARE */
  uint32_t carried;       /* groups committed but still in the open LMDB transaction */
  double carried_since;   /* monotonic time of the first of them */
  bool replaying;         /* re-applying carried groups: sinks and cdc saw them already */
  bool reapplying;        /* re-applying logged changes, carried or the open group's: lookups answer as
                             they did the first time (lookup.c) */
  bool reads_dirty;       /* some relation's reads are not yet written (evolve_reads.h) */
  bool rebuilt_any;       /* some relation may hold a rebuild's changes (evolve_log.h): the group
                             checks them */
  bool telling;           /* a rebuild's changes go to sinks and stateless relations only: the
                             stateful ones were rebuilt (evolve_log.h) */
  bool tolerate_bad_input;/* p:run's skip mode: a change refused before it wrote
                             anything leaves its group open (see rn_change_leave) */
  size_t replay_at_enter; /* replay.n when the current change began */
  msgpack_sbuffer keybuf; /* scratch: encoded keys */
  msgpack_sbuffer rowbuf; /* scratch: encoded rows */
  msgpack_sbuffer valbuf; /* scratch: stored values */
  msgpack_sbuffer getbuf; /* rn_get's answer: apart from valbuf, which a change packs its entry into, so
                             the row may be given straight to the next change (read_api.c) */
  rn_stats stats;
  void *sqlite_conns;     /* sqlite.c's shared connections, one per database file */
  struct rn_attached *borrowers; /* attaches reading through store.env (store_sink.c) */
  struct rn_outbox *outbox; /* durable sinks and their groups (outbox.c), or NULL */
  /* Seconds, for lookup TTLs, into *now; NULL: the monotonic clock. A
   * nonzero return (with e set) fails the operation that asked the time. */
  int (*clock)(void *ctx, double *now, rn_err *e);
  void *clock_ctx;
  struct rn_durable_hook *durables; /* rn_on_durable's hooks (durable.c) */
  int ndurables;
  uint64_t durable_seq;   /* the last group the hooks were told is on disk */
  bool unsynced;          /* with nosync: LMDB may hold commits the disk does not yet (rn_durable_sync) */
  /* A state that lives through deploys (evolve.c, drop.c). */
  struct rn_rename *renames; /* p:alter's and was ='s pending renames */
  int nrenames, renamecap;
  char **notes;           /* lines of the schema changes applied since open */
  int nnotes, notecap;
  char *evolved_marks;    /* |name\0|…|: the relations that changed since the last group (meta "ev",
                             evolve.h): the stateful relations over them are rebuilt from their inputs */
  size_t evolved_len, evolved_cap;
  bool evolved_all;       /* meta "ev" written by runnel 0.16 or older (empty): every stateful
                             relation declared is rebuilt */
  bool evolved_unread;    /* meta "ev" damaged (evolve.c): every relation counts as marked */
  bool evolved_kept;      /* meta "ev" holds marks (store.h): the next group deletes it */
  char *code_changed;     /* |name\0|…|: the relations whose functions changed since open (evolve_code.h) */
  size_t code_changed_len;
  struct {                /* the functions rn_code_record_again took, written by the declaration that
                             follows, in its transaction (rn_code_apply); name NULL: none */
    char *name;
    uint64_t hash;        /* rn_hash64 of the fingerprint */
    char *framed;         /* a filter's or map's function to run again (code_framed), or NULL */
    size_t framed_len;
    size_t changed_len;   /* code_changed_len before rn_code_apply noted it (taken back if it fails) */
  } code_pending;
  rn_free_fn on_close;    /* the binding's hook, called with binding last by rn_pipeline_close */
  void *binding;          /* the binding's pipeline object (a Lua lpipe), or NULL */
  struct rn_cursor *read_cursors; /* rn_cursor_open's open cursors (read_api.c) */
  /* The host's notes (notes.c): the callback of rn_open_opts, and how many
   * of the notes (p->notes) were told to it or taken (rn_take_notes). */
  rn_note_fn note_fn;
  void *note_ctx;
  int notes_told;
  /* Calls under way that hand control to the host outside a group and go
   * on with p after (rn_undeclared's walk): a close meanwhile is refused. */
  int held;
};

/* ---- relations (relation.c) ---- */
/* Declares a source (table or stream); takes ownership of schema. If the
 * state already holds the relation, its schema must be the same. */
int rn_declare_source(rn_pipeline *p, const char *name, rn_relkind kind,
                      rn_schema *schema, rn_rel **out);
/* Declares a relation of kind derived row by row from in (a filter or map:
 * derive.h); takes ownership of schema (NULL for a filter: it shares in's
 * columns) and of ctx, the operator's state, which its ops->free releases
 * (also on failure). */
int rn_declare_derived(rn_pipeline *p, const char *name, rn_relkind kind, rn_rel *in,
                       rn_schema *schema, void *ctx, rn_rel **out);
/* Declares a cdc relation of in (see cdc.h); takes ownership of schema and ctx. */
int rn_declare_cdc_rel(rn_pipeline *p, const char *name, rn_rel *in, rn_schema *schema,
                       void *ctx, rn_rel **out);
rn_rel *rn_find(const rn_pipeline *p, const char *name);
/* Building blocks of declarations (relation.c). */
int rn_check_declarable(rn_pipeline *p, const char *name);
/* Refuses a lookup as the input of name (what: the operator or "sink"): its
 * rows are fetched only when a join asks for them, so nothing else could
 * ever read or follow them. */
int rn_check_not_lookup(rn_pipeline *p, const char *name, const char *what, const rn_rel *in);
rn_rel *rn_rel_new(rn_pipeline *p, const char *name, rn_relkind kind, rn_schema *schema);
void rn_rel_discard_last(rn_pipeline *p);
/* Records r's catalogue entry ("r:" name, comparing it with the stored one:
 * evolve.h) in a transaction of its own: for relations without state of
 * their own (filter, map, lookup), so the state lists every relation. */
int rn_rel_record(rn_pipeline *p, rn_rel *r);
/* A msgpack map keyed by external names into rel's slot values and given
 * flags, in the scratch zone (api.c; rn_push and rn_get read maps so). */
int rn_map_slots(rn_pipeline *p, rn_rel *rel, const msgpack_object *m, msgpack_object **vals, uint8_t **given);
/* rn_map_slots of a change given as bytes, when it is a host's usual flat
 * map (a fixmap of string keys and scalar values, exactly len bytes; map
 * may be NULL): decoded straight into slot values, without the map's
 * objects, giving what decoding it and rn_map_slots would. 1 when done; 0
 * for anything else, an unknown or repeated column included (decode it and
 * rn_map_slots says what is wrong); -1 out of memory. (api.c) */
int rn_flat_map_slots(rn_pipeline *p, rn_rel *rel, const char *map, size_t len, msgpack_object **vals,
                      uint8_t **given);
int rn_push_ptr(void ***arr, int *n, int *cap, void *item);
int rn_state_open(rn_pipeline *p, rn_rel *r, MDB_txn *txn, bool *created, bool *stale);
int rn_state_dbi(rn_pipeline *p, MDB_txn *txn, const char *prefix, const char *name,
                 unsigned flags, MDB_dbi *out);
/* Writes r's |next_id|count|seq| record in txn. */
int rn_state_save_counters(rn_pipeline *p, rn_rel *r, MDB_txn *txn, uint64_t seq);
/* A derived relation's counters against the ids it keeps in dbi (each
 * value begins |u64 id|; holds_id, if not NULL, says which keys hold one;
 * not_ids of its entries do not), as a damaged catalogue ("n:" rewritten)
 * leaves them: ids are given 1..n and never removed (a key gone keeps its
 * id for when it comes back), so a next id at or below an id kept would
 * give it to a second key, unsaid. Read only when next id is not past the
 * entries holding ids; refused (RN_ESTORE) as a table's counters are. */
int rn_state_check_ids(rn_pipeline *p, rn_rel *r, MDB_txn *txn, MDB_dbi dbi, size_t not_ids,
                       bool (*holds_id)(const MDB_val *k));
/* Writes r's "ch:" record (store.h) in txn when r emitted a change since
 * the last one: group seq changed it. all: also when it did not, if it
 * changed since open (a replay writes again what the carried groups did). */
int rn_state_save_changed(rn_pipeline *p, rn_rel *r, MDB_txn *txn, uint64_t seq, bool all);
/* The changes r emitted since open, of every verb (a replay counts none). */
static inline uint64_t rn_rel_emitted(const rn_rel *r) { return r->emitted[0] + r->emitted[1] + r->emitted[2]; }
/* The last group that may have changed what a sink of r reads, as txn's
 * "ch:" records say: r's own, and for a relation that is not rebuilt when
 * it missed groups (a source, a filter, a map, a cdc, a stream join) its
 * inputs' too, as it would have changed with them had it been declared. A
 * stateful relation rebuilt over groups it missed tells its sinks what
 * changed (evolve_log.c), so they miss nothing of its inputs. A damaged
 * record: UINT64_MAX (any group may have). */
uint64_t rn_state_changed(rn_pipeline *p, const rn_rel *r, MDB_txn *txn);
/* Opens a stateful derived relation's state in a transaction of its own:
 * its catalogue entry, then setup(ctx, created, rebuild) to open its
 * databases (and, when rebuild, rebuild them from its inputs: new state, or
 * state that missed groups), then its counters as of the current seq. */
typedef int (*rn_state_setup_fn)(void *ctx, bool created, bool rebuild);
int rn_open_derived_state(rn_pipeline *p, rn_rel *r, rn_state_setup_fn setup, void *ctx);
void rn_rel_free(rn_rel *r);
/* Sends a change of rel to its log and to every relation derived from it. */
int rn_emit(rn_rel *rel, const rn_change *c);
/* Copies len bytes into the per-change scratch zone (inline: the tables and
 * the join copy a few rows each change). */
static inline const char *rn_scratch_copy(rn_pipeline *p, const char *data, size_t len)
{
  char *copy = rn_zone_malloc_no_align(&p->scratch, len ? len : 1);
  if (copy && len) memcpy(copy, data, len); /* data is NULL when a write to it failed */
  return copy;
}

/* ---- changes to sources (table.c) ----
 * vals/given describe the input row by slot (see row.h); vals is normalized
 * in place. Each opens and commits a group of its own when none is open, and
 * rolls the whole group back on failure. */
int rn_table_insert(rn_rel *t, msgpack_object *vals, uint8_t *given);
int rn_table_upsert(rn_rel *t, msgpack_object *vals, uint8_t *given);
int rn_table_update(rn_rel *t, msgpack_object *vals, uint8_t *given);
int rn_table_delete(rn_rel *t, msgpack_object *vals, uint8_t *given);
/* Keyless tables: replace the stored row equal to old (smallest id). */
int rn_table_replace(rn_rel *t, msgpack_object *old, uint8_t *old_given,
                     msgpack_object *vals, uint8_t *given);
/* Reads by key (keyed) or by whole row (keyless). *row points into
 * p->rowbuf (valid until the next call); *found = 0 when absent. */
int rn_table_get(rn_rel *t, msgpack_object *vals, uint8_t *given, int *found,
                 uint64_t *id, const char **row, size_t *len);
/* Row access for operators, in txn. Rows point into LMDB, or into the
 * write transaction's row cache (rowcache.h), whose slot the next read of
 * another key may take: copy before any other read or write. *row is NULL
 * when absent. */
int rn_table_row_by_key(rn_rel *t, MDB_txn *txn, const char *key, size_t klen,
                        uint64_t *id, const char **row, size_t *len);
/* Calls fn for each live row, in key order, read in txn straight from LMDB
 * (a reader's read transaction: no group's write buffer to see). */
int rn_table_scan_txn(rn_rel *t, MDB_txn *txn, int (*fn)(void *ctx, uint64_t id, const char *row, size_t len),
                      void *ctx);

/* Iteration over a table's live rows in key order (id order when keyless).
 * Destructor: rn_table_cursor_close; valid only while no group opens or closes
 * unless it was opened inside the group it runs in. */
typedef struct rn_table_cursor rn_table_cursor;
int rn_table_cursor_open(rn_rel *t, rn_table_cursor **out);
/* *done = 1 at the end. Row bytes valid until the next call. */
int rn_table_cursor_next(rn_table_cursor *c, uint64_t *id, const char **row, size_t *len, int *done);
void rn_table_cursor_close(rn_table_cursor *c);
/* At close: ends every open cursor's LMDB work; their handles stay valid
 * for rn_table_cursor_close and report the end. */
void rn_cursors_end_all(rn_pipeline *p);
/* Before the map is remapped (store.h's before_remap; ctx is the
 * pipeline): every cursor opened between groups ends its read
 * transaction, whose pages go; its next step is refused (RN_EMISUSE),
 * rn_table_cursor_grown says so. A group's cursors stay: a regrow opens
 * them again in the group's new transaction. */
void rn_cursors_remapped(void *ctx);
/* Whether c's read transaction was ended by a growth of the map. */
bool rn_table_cursor_grown(const rn_table_cursor *c);
/* At close: every open rn_cursor forgets p (rn_cursor_next then refuses;
 * rn_cursor_close still frees it). read_api.c. */
void rn_read_cursors_orphan(rn_pipeline *p);
/* fn(ctx, name, entries) for each relation of p, in declaration order: the
 * LMDB entries it keeps (rows, indexes, operator state), as p:stats()
 * reports them. The write-back layer's entries are written into the open
 * LMDB transaction first so they count, a full map grown as a change
 * grows it; when that fails, the error returns (rn_errmsg) and fn is not
 * called: counts of a transaction LMDB refused would be wrong. read_api.c. */
typedef void (*rn_entries_fn)(void *ctx, const char *name, uint64_t entries);
int rn_state_entries(rn_pipeline *p, rn_entries_fn fn, void *ctx);

/* ---- groups (group.c) ---- */
/* Brackets every change to a source: opens an autocommit group if needed,
 * refuses re-entry, and on leave clears scratch, rolls back on failure or
 * commits an autocommit group. */
int rn_change_enter(rn_pipeline *p);
int rn_change_leave(rn_pipeline *p, int rc);
/* Fails the open group from outside the core (the binding could not even
 * convert its input): rolls it back and records the message. */
int rn_group_fail(rn_pipeline *p, int code, const char *msg);
/* rc, or RN_ENOMEM "out of memory" if an allocation failed since the step
 * began (buf.h), whatever rc says: a step that lost bytes did not succeed. */
int rn_group_oom(rn_pipeline *p, int rc);
/* rc, or the failure of a write of the write-back layer's entries into the
 * group's LMDB transaction since it began (store.h's wb_failed: a read
 * from a callback that went on), whatever rc says: LMDB refuses the
 * transaction's further writes. A full map is RN_EFULL with cause
 * MDB_MAP_FULL, so the caller grows it and runs the group again (5). */
int rn_group_check_store(rn_pipeline *p, int rc);
/* After a change failed with LMDB's map full: grows the map and replays the
 * group's source changes in a new transaction. 0 means the caller may try
 * its change again; otherwise the error stands. */
int rn_group_regrow(rn_pipeline *p);
/* rn_group_regrow for the change being applied (between rn_change_enter
 * and rn_change_leave), which its caller then runs again: the changes
 * logged before it are applied again, not the change itself, whose source
 * write may have been logged before a derived write filled the map. */
int rn_group_regrow_change(rn_pipeline *p);
/* Between groups, the write-back layer's entries into the transaction
 * carrying committed groups (it goes on); a full map grows and the
 * carried groups are applied again, as rn_flush does. 0 without one. */
int rn_group_write_back_idle(rn_pipeline *p);
/* Before a read of the state at dir beside its writer (rn_state_copy,
 * rn_inspect, rn_verify: they read what LMDB holds): a pipeline of this
 * process and thread that writes dir, between groups, commits the groups
 * it carries (rn_flush), so the read holds every committed group, as an
 * attach reads them. Inside a group or one of its callbacks it does
 * nothing: the read holds the groups LMDB holds. 0, or rn_flush's code
 * with its message in *e. */
int rn_flush_before_read(const char *dir, rn_err *e);
/* A count of the groups of the pipeline rn_flush_before_read would flush
 * for dir (this process's writer of dir, between groups, carrying groups;
 * it grows with each, never repeats), or 0: what a read would flush
 * first, told without flushing (rn_state_version). */
uint64_t rn_carried_before_read(const char *dir);
/* Records a source change for replay, then emits it with the record's copy
 * of its new row (c->row need only last until the call). */
int rn_source_emit(rn_rel *src, const rn_change *c);
/* Applies a logged source change again (table.c; the sources' reapply, ops.h). */
int rn_source_reapply(rn_rel *src, const rn_change *c);

/* A change given as a map keyed by external names (api.c, ndjson.c). */
int rn_push_object(rn_pipeline *p, rn_rel *rel, rn_op op, const msgpack_object *map);

/* ---- stopping a run (interrupt.c) ---- */
/* Whether rn_interrupt_runs asked the run to stop; the request is taken. */
bool rn_interrupt_taken(void);
/* Around every run: rn_interrupt_runs says whether one is going; a run
 * that ends not stopped by a request drops one made meanwhile. */
void rn_interrupt_run_begins(void);
void rn_interrupt_run_ends(bool stopped);

/* ---- durability hooks (durable.c) ---- */
/* rn_on_durable with a destructor for ctx (called at close; also on failure). */
int rn_durable_add(rn_pipeline *p, rn_durable_fn fn, void *ctx, rn_free_fn free_ctx);
/* The LMDB transaction holding the groups up to seq committed (group.c):
 * the hooks hear of them once they are on disk (rn_durable_sync). */
void rn_durable_reached(rn_pipeline *p, uint64_t seq);
/* With nosync, syncs LMDB's file to disk unless no commit came since the
 * last sync; 0 or LMDB's code (the disk may not hold the commits then). */
int rn_durable_sync(rn_pipeline *p);
void rn_durable_free(rn_pipeline *p);

/* ---- sinks (sink.c) ---- */
/* What the file at path is, in words for an error ("a FIFO (a pipe)"),
 * when it is no regular file (a FIFO, a socket, a terminal, a device, a
 * directory): a durable sink cannot keep such a path. NULL for a regular
 * file or none (the sink makes it). Links are followed: /dev/stdout is
 * what standard output is. */
const char *rn_sink_path_kind(const char *path);
/* Registers a sink; takes ownership of ctx. Not allowed inside a group. */
int rn_sink_add(rn_pipeline *p, rn_rel *rel, bool consolidate, rn_sink_fn on_change,
                rn_sink_commit_fn on_commit, void *ctx, rn_free_fn free_ctx);
/* Gives the sink added last an on_seal and an on_done hook (either NULL). */
void rn_sink_set_hooks(rn_pipeline *p, rn_sink_commit_fn on_seal, rn_sink_done_fn on_done);
/* Gives the sink added last the hooks of a sink that writes into LMDB's
 * transaction itself (a store): carried groups are replayed without sinks. */
void rn_sink_set_carry(rn_pipeline *p, int (*on_replay)(void *ctx, rn_err *e), void (*on_forget)(void *ctx));
/* Gives the sink added last an on_lost hook (SINKS-2): it hears of
 * rollbacks (SINKS-3). */
void rn_sink_set_lost(rn_pipeline *p, void (*on_lost)(void *ctx, uint64_t seq));
/* The sink added last was just written from its relation's rows (a store
 * written again at declaration): it holds what a rebuild's changes, told
 * in the next group, bring (rn_log_own). */
void rn_sink_set_holds_told(rn_pipeline *p);
/* Calls every on_replay (group.c: restart), every on_forget (LMDB committed). */
int rn_sinks_replay(rn_pipeline *p);
void rn_sinks_forget(rn_pipeline *p);
/* Group seq, which every sink that saw it was just told committed, is
 * carried: sinks with on_lost keep its seq (SINKS-2). */
void rn_sinks_carried(rn_pipeline *p, uint64_t seq);
/* The carried groups up to last were lost (their LMDB commit failed):
 * every sink with on_lost hears of each one it saw, newest first. The
 * caller then forgets them (rn_sinks_forget clears what sinks saw). */
void rn_sinks_lost(rn_pipeline *p, uint64_t last);
/* Tells every sink that saw any part of group seq how it ended (group.c). */
void rn_sinks_done(rn_pipeline *p, uint64_t seq, bool committed);
/* Group seq is run again after the map grew (GROUP-5): the sinks that get
 * it again whole hear it rolled back; the others resume it (SINKS-3). */
void rn_sinks_redo(rn_pipeline *p, uint64_t seq);
int rn_log_append(rn_pipeline *p, rn_rel *rel, const rn_change *c);
/* Copies a change's row bytes into the group zone. */
int rn_change_keep(rn_pipeline *p, msgpack_zone *z, const rn_change *c, rn_change *dst);
/* One row id's net effect over a group. */
typedef struct rn_net {
  uint64_t id;
  const char *before;     /* the row before the group, or NULL */
  size_t before_len;
  const char *after;      /* the row after it, or NULL */
  size_t after_len;
} rn_net;
/* Groups a log by row id, ids in the order first touched. out holds
 * log->n entries; owner (may be NULL, else log->n entries) gets each
 * change's entry index. Returns the entry count, or (size_t)-1 (no memory). */
size_t rn_log_net(const rn_log *log, rn_net *out, size_t *owner);
/* A log netted to one change per row id (as a consolidating sink gets it)
 * into out (log->n entries); returns the count, or (size_t)-1 (no memory). */
size_t rn_log_consolidated(const rn_log *log, rn_change *out);
/* The part of rel's log of group seq that a sink holding the rows of a
 * rebuild as of holds_told (rn_sink_set_holds_told, an SQLite mirror
 * written again at declaration) takes: the whole log, or, in group
 * holds_told, what follows the rebuild's told changes (rel->log_told).
 * Told again on top of the rows they made, netted per row id with the
 * group's own changes, a row the rebuild added and the group deleted
 * would come to nothing and stay in the sink for good. */
rn_log rn_log_own(const rn_rel *rel, uint64_t holds_told, uint64_t seq);
/* Delivers the group's logs to every sink, in registration order, then
 * calls every sink's on_commit, then every on_seal. On failure the caller
 * still calls rn_sinks_done(p, seq, false). */
int rn_sinks_deliver(rn_pipeline *p, uint64_t seq);
void rn_logs_clear(rn_pipeline *p);

#endif
