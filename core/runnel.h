/* runnel.h — the one public header of runnel's C core.
 *
 * The model
 * ---------
 * A pipeline owns one LMDB environment (a directory). Relations — tables,
 * streams and the relations derived from them — are declared in it; every
 * row of a relation has a stable positive 64-bit id. Changes are applied in
 * groups: rn_begin() opens one LMDB write transaction, rn_commit() runs the
 * group's changes into the sinks and commits it under the next sequence
 * number (1, 2, 3 …, persisted). A change made with no group open is a
 * group of its own.
 *
 * Rules of use
 * ------------
 * - One pipeline, one thread: runnel never starts threads and no call may
 *   run concurrently with another on the same pipeline. Two pipelines in one
 *   process are independent. A state this process writes is read in the
 *   process only from the pipeline's thread (rn_inspect, rn_verify,
 *   rn_state_copy, attaches); other threads get RN_EMISUSE ("written by
 *   this process in another thread"): LMDB allows one environment per
 *   state per process, and reads beside the pipeline would race with its
 *   commits. Another process reads it at any time.
 * - Fork: LMDB forbids using an environment across fork(). A child's
 *   calls on a pipeline (or a cursor, or an attach) its parent opened
 *   return RN_EMISUSE ("state st was opened by process 1234 before a
 *   fork; open it again in this process"); rn_pipeline_close in the child
 *   frees it without touching the parent's groups, reader slots, locks or
 *   temporary state. A child holds no writer lock of its parent's, closed
 *   or not: the parent's rn_pipeline_close lets the next writer in.
 * - A function returns 0 or a negative RN_E… code. After a failure,
 *   rn_errmsg() holds the detailed message until the next call; a call that
 *   succeeds empties it (the getters rn_errmsg, rn_seq, rn_relation and
 *   rn_relation_name leave it alone). If a change (rn_push …) or rn_commit
 *   fails inside a group, the whole group has been rolled back: no group is
 *   left open and nothing of it is stored. A call refused with RN_EMISUSE
 *   (out of order: rn_begin with a group open, a declaration inside a
 *   group …) leaves the pipeline as it was, an open group included.
 * - Pointers are checked: a NULL pipeline, relation, name, column array,
 *   callback or buffer gives RN_EINVAL, never a crash (with a NULL pipeline
 *   there is nowhere to keep a message). A pipeline used after
 *   rn_pipeline_close, or a relation of a closed pipeline, cannot be
 *   detected in C without a handle table: like any freed pointer, it is
 *   undefined behaviour. (The Lua binding does detect it: an error.)
 * - Strings returned by runnel are owned by runnel; the comment on each
 *   function says how long they stay valid.
 */
#ifndef RUNNEL_H
#define RUNNEL_H

#include <stddef.h>
#include <stdint.h>

#define RN_VERSION "0.42"   /* the one place the version is written */

#if defined(__GNUC__)
#define RN_API __attribute__((visibility("default")))
#else
#define RN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: their own negative range, named by rn_strerror(). */
#define RN_OK        0
#define RN_EINVAL   (-30001) /* bad input: wrong type, unknown column, null key */
#define RN_EEXIST   (-30002) /* insert of a key that is already present */
#define RN_ENOTFOUND (-30003) /* update/delete of an absent row */
#define RN_ESCHEMA  (-30004) /* declaration disagrees with the stored state */
#define RN_EMISUSE  (-30005) /* call out of order: no group open, closed … */
#define RN_ECALLBACK (-30006) /* a user callback (filter, map, sink) failed */
#define RN_ESTORE   (-30007) /* LMDB failed */
#define RN_EFULL    (-30008) /* the disk or the map is full */
#define RN_ENOMEM   (-30009) /* out of memory */
#define RN_EIO      (-30010) /* a file could not be read or written */
#define RN_EINTR    (-30011) /* a run stopped at rn_interrupt_runs (Ctrl-C, SIGTERM) */

typedef struct rn_pipeline rn_pipeline;
typedef struct rn_rel rn_rel;

/* The code's name and a sentence; static, never NULL. */
RN_API const char *rn_strerror(int code);

/* A note: one line saying what a declaration did that the host should
 * know, though it succeeded: a schema change applied ("players: added
 * \"level\" int = 1"), a relation rebuilt from its inputs, a durable sink
 * or subscriber that missed groups that changed its relation ("orders:
 * durable subscriber audit missed the changes of orders in groups 3 to 7:
 * …"; none when no group it missed changed orders). The same lines as
 * Lua's runnel.open{ notes } and p:changes(). line is owned by runnel
 * and valid during the call only. fn cannot fail; it may read tables
 * (rn_get, cursors), not change them, declare or close the pipeline
 * (RN_EMISUSE). */
typedef void (*rn_note_fn)(void *ctx, const char *line);

/* Options of rn_pipeline_open. Zero-initialise, then set what you need. */
typedef struct rn_open_opts {
  const char *path;   /* state directory; NULL: a temporary one removed at close; "": RN_EINVAL */
  int nosync;         /* 1: commits are not flushed (MDB_NOSYNC) */
  size_t map_size;    /* initial LMDB map size in bytes; 0: 64 MiB. It grows by itself.
                         Above SIZE_MAX / 2: RN_EINVAL ("open: map_size N is too large …");
                         one LMDB cannot map: its code, the message naming map_size. A
                         doubling the address space refuses (ulimit -v) fails the group
                         that needed it with RN_EFULL; groups that fit go on */
  int writemap;       /* 1: MDB_WRITEMAP. Faster writes, but with nosync an OS crash
                         may damage the state rather than only lose its last groups */
  /* With nosync, groups are carried in one LMDB transaction until one of
   * these is reached (0: the default in parentheses); the commit that ends
   * it does the writes of all of them, so smaller bounds mean smaller and
   * more even commit times per tick, larger ones more throughput. */
  int carry_groups;       /* groups (256); 1 commits LMDB with every group */
  size_t carry_changes;   /* source changes (200,000) */
  double carry_seconds;   /* since the first carried group (0.5) */
  /* The write-back layer keeps what a transaction writes in memory and
   * writes it to LMDB, sorted, at its commit (the same state either way).
   * 1: on; -1: off (every read and write straight to LMDB); 0: as the
   * environment says (RUNNEL_WRITE_BACK=1 turns it on), else off: at large
   * working sets the plain path is faster (README, Performance). A host
   * that commits in its idle time (rn_flush after each tick) gains: the
   * LMDB writes move from the tick into the flush. */
  int write_back;
  /* The file bound of carried transactions: N > 0 ends one before its
   * writes would copy (by estimate) 1/N of the pages of the databases they
   * go to, so the file stays within about 1 + 1/N times the live data, at
   * a price in write speed on large states (README, Performance); -1: off;
   * 0: RUNNEL_CARRY_PAGE_SHARE=N says, else off. */
  int carry_page_share;
  /* Told each note (ctx: notes_ctx, passed back as is) once, oldest first,
   * before the call that made it returns (rn_declare_table, rn_top_declare,
   * rn_subscribe_durable, rn_run_lua …), once that call's declarations
   * stand: a declaration that fails and is taken back tells nothing. Lua
   * scripts run on p (rn_run_lua) tell theirs here too, each when its
   * declaration returns, and no longer to stderr. NULL: the notes wait
   * for rn_take_notes. */
  rn_note_fn notes;
  void *notes_ctx;
  /* LMDB's reader slots (0: its 126): each read open at once (a cursor or
   * rows() iteration kept between groups, an attachment, runnel inspect)
   * holds one, shared by every process on the state. The table is sized
   * when the state's lock file is made, by the first process to open the
   * state while no other has it open; later ones share it. At most
   * RN_MAX_READERS, else RN_EINVAL. */
  unsigned max_readers;
} rn_open_opts;
#define RN_MAX_READERS 65536u

/* Opens (creating if needed) a pipeline. On failure returns a negative code
 * and, if errbuf is not NULL, writes the message there (RN_EINVAL when out
 * is NULL). One writer per state: a second open of the same state, in this
 * process or another, fails with RN_EMISUSE ("state st is open for writing
 * by process 1234") while readers (rn_inspect, runnel.attach, runnel
 * verify) are never refused; the lock goes with the process, so a killed
 * writer never blocks the next. RN_EMISUSE too while this process itself
 * holds runnel.attach handles on the state ("state st is open for reading
 * in this process"): LMDB allows one environment per state per process.
 * A truncated, damaged or foreign state is
 * refused with a message saying so. Destructor: rn_pipeline_close. */
RN_API int rn_pipeline_open(const rn_open_opts *opts, rn_pipeline **out,
                            char *errbuf, size_t errlen);

/* Rolls back an open group, frees every relation and callback context, closes
 * LMDB and removes a temporary directory; returns 0. Accepts NULL (0).
 * RN_EMISUSE ("close: not from inside a callback") when called from inside
 * a callback of p (a subscriber, a Lua filter, mapper, sink …): nothing is
 * closed then, the pipeline keeps working, and the caller closes it after
 * the call into runnel that ran the callback has returned. */
RN_API int rn_pipeline_close(rn_pipeline *p);
/* rn_pipeline_close, saying whether the groups it commits made it: with
 * nosync, close commits the groups carried in LMDB's open transaction; if
 * that commit fails (a full disk: RN_EFULL, RN_EIO) the pipeline is closed
 * all the same, those groups are lost, and this returns the code with
 * errbuf saying which ("close: groups 5 to 9, carried …, could not be
 * committed and are lost; the state holds group 4: disk full …").
 * Likewise groups waiting for an NDJSON sink on an open file (kept in
 * memory only) that the close's last delivery could not write are lost:
 * RN_EIO, errbuf naming them and the write's failure. A durable sink
 * whose output could not be synced (sync on) keeps its groups waiting in
 * the state, for the next open to find in its output: RN_EIO, errbuf
 * naming relation, output and groups.
 * rn_pipeline_close returns 0 then. RN_EMISUSE from inside a callback, as
 * rn_pipeline_close: nothing closed. Only RN_EMISUSE leaves p open. */
RN_API int rn_pipeline_close_report(rn_pipeline *p, char *errbuf, size_t errlen);

/* The last error's message; owned by the pipeline, valid until the next call
 * on it. Never NULL (empty when there was none); for a NULL p, a static text. */
RN_API const char *rn_errmsg(const rn_pipeline *p);

/* Opens a group. RN_EMISUSE when one is open already, and that group stays
 * open (commit or roll it back), or from inside a callback. */
RN_API int rn_begin(rn_pipeline *p);
/* Commits the open group. RN_EMISUSE when none is open. */
RN_API int rn_commit(rn_pipeline *p);
/* Throws the open group away. RN_EMISUSE from inside a callback. */
RN_API int rn_rollback(rn_pipeline *p);

/* With nosync, several groups may share one LMDB transaction; rn_flush
 * commits the groups carried so far (so other processes see them). A no-op
 * otherwise, and inside a group. Close flushes too. */
RN_API int rn_flush(rn_pipeline *p);

/* Sequence number of the last committed group; 0 before the first (and for NULL). */
RN_API uint64_t rn_seq(const rn_pipeline *p);

/* Tells fn (ctx passed back as is) when the groups up to seq are durable,
 * in LMDB and on disk: after every commit with sync; with nosync when the
 * LMDB transaction carrying them commits (rn_flush, a declaration, a
 * snapshot read, close, the carry bounds) and the state's file has then
 * been synced (one sync per such commit, shared with the durable sinks';
 * a sync that fails tells no hook: the next commit or rn_flush syncs
 * again). Called once per such commit, seq increasing, after
 * the call that committed it has done its work; fn cannot fail and may not
 * change tables (it may read them). Any number of hooks, called in the
 * order given. RN_EINVAL without fn; RN_EMISUSE in a forked child (as
 * every call on its parent's pipeline). */
typedef void (*rn_durable_fn)(void *ctx, uint64_t seq);
RN_API int rn_on_durable(rn_pipeline *p, rn_durable_fn fn, void *ctx);

/* Calls fn (ctx passed back as is) with each note not yet told, to the
 * notes callback of rn_open_opts or an earlier rn_take_notes, oldest first,
 * and counts them told; returns how many (0: none waiting, always with a
 * notes callback). Not from inside a callback of p (RN_EMISUSE). RN_EINVAL
 * without fn. Notes of a pipeline Lua opened (runnel.open) go to its
 * notes function instead; so do those of a Lua script run on a pipeline
 * opened without a notes callback (rn_run_lua: to stderr by default), as
 * each declaration returns. */
RN_API int rn_take_notes(rn_pipeline *p, rn_note_fn fn, void *ctx);

/* ---- Relations from C ---------------------------------------------------
 * A column: its external name, its type ("int", "float", "string", "bool",
 * "bytes", "list", "map", "any") and whether it may be null. The strings
 * are copied; the caller keeps ownership. */
typedef struct rn_column_def {
  const char *name;
  const char *type;
  int nullable;
  /* Optional (zero: none). The default, one msgpack value the caller owns
   * (read during the call): an insert without the column takes it, and a
   * state whose rows lack the column gets it (a schema change). */
  const void *default_value;
  size_t default_len;
  const char *was;        /* the column's former name: a rename when the state holds was */
} rn_column_def;

/* Declares a keyed table (nkey > 0: key names the key columns in order) or
 * a keyless one (nkey = 0), as p:table does: ncols >= 1 columns, 0 <= nkey
 * <= ncols, a name of 1 to 508 bytes (it becomes LMDB keys). *out is owned
 * by the pipeline and valid until rn_pipeline_close. Errors: RN_EINVAL (bad
 * declaration), RN_ESCHEMA (the state holds it with another schema),
 * RN_EMISUSE (inside a group). */
RN_API int rn_declare_table(rn_pipeline *p, const char *name, const rn_column_def *cols, int ncols,
                            const char *const *key, int nkey, rn_rel **out);
RN_API int rn_declare_stream(rn_pipeline *p, const char *name, const rn_column_def *cols, int ncols,
                             rn_rel **out);

/* A relation by name (declared from C or by a Lua script), or NULL (also
 * for a NULL p or name; the change functions refuse a NULL relation with
 * RN_EINVAL). Owned by the pipeline. */
RN_API rn_rel *rn_relation(const rn_pipeline *p, const char *name);
/* Owned by the pipeline; valid until rn_pipeline_close. NULL for NULL. */
RN_API const char *rn_relation_name(const rn_rel *rel);

/* ---- Leaderboards: tops and indexes (api_order.c) ----------------------
 * An order column: an external column name of the input, ascending or
 * (desc != 0) descending. Null sorts after every value either way; rows
 * with equal order values are ordered by row id. At most 16 columns. */
typedef struct rn_order_def {
  const char *column;
  int desc;
} rn_order_def;

/* What rel:top{} declares: per group of the nby by columns (0: one group)
 * the first n (>= 1) rows of the input in the norder (>= 1) order columns,
 * ranked 1..n in a last column named rank (NULL: "rank"). */
typedef struct rn_top_def {
  uint64_t n;
  const char *const *by;
  int nby;
  const rn_order_def *order;
  int norder;
  const char *rank;
} rn_top_def;

/* Declares name, the top of in (a table-like relation of p) as def says,
 * like rel:top{}: its changes are the rank movements (an UPDATE with the
 * old and new rank, an INSERT entering the top, a DELETE leaving it). Its
 * state is kept in LMDB and rebuilt from in when new, stale or declared
 * otherwise. *out is owned by the pipeline. Errors: RN_EINVAL (a NULL
 * argument, in a stream or of another pipeline, n < 1, a column that is
 * not there or not a scalar, a rank column already in), RN_EMISUSE
 * (inside a group). */
RN_API int rn_top_declare(rn_pipeline *p, const char *name, rn_rel *in, const rn_top_def *def, rn_rel **out);

/* Declares name, an index of in ordered by the norder columns, like
 * rel:index{}: its rows, ids and changes are in's; runnel.attach(state,
 * name) reads it by range, count and rank. Errors as rn_top_declare. */
RN_API int rn_index_declare(rn_pipeline *p, const char *name, rn_rel *in, const rn_order_def *order, int norder,
                            rn_rel **out);

/* ---- Changes ---------------------------------------------------------------
 * A change is a msgpack map keyed by external column names (the buffer is
 * the caller's and only read during the call): a whole row for insert and
 * upsert, the key plus the columns to set for update, the key for delete
 * (a keyless table's delete takes the whole row). A delete's map (and
 * rn_get's) may hold other columns of the relation too, a whole row say:
 * each is checked as an insert checks it (a wrong type, a null where the
 * column takes none: RN_EINVAL), then not used, the key alone finds the
 * row; a name that is no column of the relation is refused ("t: unknown
 * column \"x\""). An integer for a float column must be one a double
 * holds exactly (any within ±2^53; beyond, 2^60 is, 2^53 + 1 is not):
 * another is refused naming the column, rather than stored as its
 * nearest double (give a float to store that). A change made with no
 * group open is a group of its own. Errors: RN_EINVAL (not a map, unknown
 * column, wrong type, null key …; a NULL relation or one of another
 * pipeline, an op that is no rn_op), RN_EEXIST, RN_ENOTFOUND, RN_ECALLBACK,
 * RN_EMISUSE (from inside a callback); inside a group every error has
 * rolled the whole group back. */
typedef enum rn_op { RN_OP_INSERT = 1, RN_OP_UPDATE, RN_OP_UPSERT, RN_OP_DELETE } rn_op;

RN_API int rn_push(rn_pipeline *p, rn_rel *rel, rn_op op, const void *map, size_t len);
RN_API int rn_insert(rn_pipeline *p, rn_rel *rel, const void *map, size_t len);
RN_API int rn_update(rn_pipeline *p, rn_rel *rel, const void *map, size_t len);
RN_API int rn_upsert(rn_pipeline *p, rn_rel *rel, const void *map, size_t len);
RN_API int rn_delete(rn_pipeline *p, rn_rel *rel, const void *map, size_t len);

/* ---- Subscriptions -----------------------------------------------------
 * When a group commits, a subscriber of a relation gets its changes in
 * order, before LMDB commits them (so it can still fail the group). row and old are msgpack maps keyed by external names
 * (every column; nulls as nil), owned by runnel and valid only during the
 * call. A nonzero return fails the group (RN_ECALLBACK): it is rolled back.
 * (An in-group subscriber; see rn_subscribe_durable for one that gets
 * groups after they are durable.) */
enum { RN_VERB_INSERT = 1, RN_VERB_UPDATE = 2, RN_VERB_DELETE = 3 };

typedef struct rn_event {
  int verb;               /* RN_VERB_… */
  uint64_t id;            /* the row id */
  uint64_t seq;           /* the group's sequence number */
  uint64_t n;             /* 1-based position among this subscriber's changes in the group */
  const void *row;        /* the new row; NULL for DELETE */
  size_t row_len;
  const void *old;        /* the previous row; NULL for INSERT */
  size_t old_len;
} rn_event;

typedef int (*rn_callback)(void *ctx, const rn_event *ev);

/* Subscribes fn (ctx is the caller's, passed back as is) to rel's changes
 * from the next group on. Not inside a group (RN_EMISUSE). */
RN_API int rn_subscribe(rn_pipeline *p, rn_rel *rel, rn_callback fn, void *ctx);

/* Group seq, of which the subscriber got changes, rolled back after all
 * (another subscriber or sink failed, or LMDB did): drop what it kept of
 * them. Called once, after the failure, before the group's error returns. */
typedef void (*rn_rollback_fn)(void *ctx, uint64_t seq);

/* rn_subscribe, and on_rollback (may be NULL) told of rolled-back groups. */
RN_API int rn_subscribe_rollback(rn_pipeline *p, rn_rel *rel, rn_callback fn, rn_rollback_fn on_rollback,
                                 void *ctx);
/* ---- After durability ----------------------------------------------------
 * A durable subscriber gets each group only after the LMDB transaction
 * holding it is durable (with nosync: at rn_flush, the carry bounds, a
 * declaration or close), from an outbox kept in the state: it cannot fail
 * the group, and after a crash it gets again, in order, every group after
 * the last one it was known to have taken — at least once, so dedupe by
 * (ev->seq, ev->n). name identifies it in the state (unique in the
 * pipeline, required). A change it returned 0 for is taken: a nonzero
 * return leaves that change, the rest of its group and the later groups
 * waiting, and the retry (the next commit, rn_flush, rn_deliver, or the
 * next open once it subscribes again) starts at the refused change, with
 * the same ev->n: within a process each change reaches it once. Not
 * inside a group (RN_EMISUSE). */
RN_API int rn_subscribe_durable(rn_pipeline *p, rn_rel *rel, const char *name, rn_callback fn, void *ctx);

/* Delivers every group waiting for a durable sink (NDJSON, SQLite,
 * durable subscribers) after committing carried groups; returns the first
 * delivery failure (the groups stay committed and waiting). Outside groups. */
RN_API int rn_deliver(rn_pipeline *p);


/* ---- Inspecting a state ------------------------------------------------
 * Reads a state directory without disturbing a writer in another process
 * (an LMDB read transaction). fn is called once per relation, in name
 * order; strings are valid during the call only. rows is -1 for relations
 * that keep no row count (streams, derived relations). */
typedef struct rn_inspect_relation {
  const char *name;
  const char *kind;       /* "table", "stream", "cdc", "join", "aggregate" */
  const char *columns;    /* "id int key, name string, team int null, score int = 0" */
  int64_t rows;
  uint64_t next_id;       /* the id the next new row would get */
  uint64_t entries;       /* LMDB entries it keeps: rows, indexes, operator state */
} rn_inspect_relation;

typedef struct rn_inspect_state {
  uint64_t seq;           /* the last committed group */
  uint64_t map_size;      /* LMDB's map, bytes */
  uint64_t used;          /* pages in use, bytes */
  uint64_t file_size;     /* data.mdb on disk, bytes */
  int relations;
  uint64_t free;          /* of used: pages LMDB's free list holds for reuse, bytes */
  uint64_t page_size;     /* LMDB's page, bytes (used / page_size pages) */
} rn_inspect_state;

typedef int (*rn_inspect_fn)(void *ctx, const rn_inspect_relation *rel);

/* path (not "") and out are required (RN_EINVAL); fn may be NULL (out only). A
 * nonzero return of fn stops the walk and is returned. fn may write through
 * the state's pipeline in this thread, and close it: the close then ends
 * when the walk does (its environment and writer lock are kept so no writer
 * reuses the pages the walk reads), and until rn_inspect returns the state
 * is not opened again (RN_EMISUSE: "state st was closed inside a call that
 * still reads it …"; in another process, "open for writing by process …").
 * rn_verify and rn_state_copy read alike. */
RN_API int rn_inspect(const char *path, rn_inspect_fn fn, void *ctx, rn_inspect_state *out,
                      char *errbuf, size_t errlen);

/* (since 0.37) *version gets a value that changes whenever the state at
 * path does: its last LMDB transaction's id (every group, declaration and
 * drop commits one) hashed with its data.mdb's device, inode and mtime (a
 * state removed and made again differs too). Compare for equality: a
 * cheap test whether rn_inspect would read anything new, without walking
 * the catalogue. Reads as rn_inspect does (a writer in this process, between
 * its calls). Errors: RN_EINVAL (path NULL or "", version NULL), RN_EIO
 * and the rest as rn_inspect ("not a runnel state (no data.mdb)"). */
RN_API int rn_state_version(const char *path, uint64_t *version, char *errbuf, size_t errlen);

/* ---- A state that lives through deploys ---------------------------------
 * Declaring a relation the state holds with another declaration applies
 * the change (a source table's rows are brought to the new schema; derived
 * state is rebuilt) or refuses it with RN_ESCHEMA naming what differs. */

/* Removes relation (or permanent store) name and all its state, in one
 * transaction. Errors: RN_ENOTFOUND (the state holds no such name),
 * RN_EMISUSE (inside a group; or name is declared in p: the message names
 * the declared relations that read it, or says to drop it before
 * declaring it). */
RN_API int rn_drop(rn_pipeline *p, const char *name);

/* Calls fn once per relation the state holds that p has not declared (so
 * far), in name order; kind is "table", "aggregate" … Strings are valid
 * during the call. A nonzero return of fn stops the walk and is returned.
 * fn may read, and drop (rn_drop) the relation it is told of; a close of p
 * from fn is refused (RN_EMISUSE), as from any callback. */
typedef int (*rn_undeclared_fn)(void *ctx, const char *name, const char *kind);
RN_API int rn_undeclared(rn_pipeline *p, rn_undeclared_fn fn, void *ctx);

/* ---- Reading from C ----------------------------------------------------
 * rn_get and cursors read every relation runnel.attach reads: tables,
 * aggregates, joins, selects (of any of these), tops, indexes and
 * distincts; a relation whose rows the state does not hold is refused with
 * RN_EINVAL, rn_errmsg saying why and what to read instead, as
 * runnel.attach says it (a filter or a map — a Lua function computes its
 * rows —, a stream, a cdc relation, a stream join, a lookup, an aggregate
 * with a runnel.agg column). Outside a group a read sees every committed
 * group and nothing else (with nosync, carried groups included: it reads
 * their LMDB transaction or commits it first, as rn_flush); inside a group,
 * or from a callback, it sees the group's own changes so far too (as
 * rel:get and rel:rows in Lua). Rows are msgpack maps keyed by external
 * names (nulls as nil), as subscribers get them. */

/* The row of rel under key, a msgpack map of the key columns (other
 * columns of rel may be given: checked, then not used, as for rn_delete): a table's by
 * its key (a keyless table's by the whole row: the stored row equal to it
 * with the smallest id), an aggregate's by its group key (one seek), a
 * top's and an index's by their input's key, a join's or a select's by
 * theirs; a join's, select's, top's and index's rows are made until the
 * one is found: O(rows), as rel:get of a derived relation in Lua. *row and
 * *row_len, owned by p and valid until the next call on p (which may take
 * it: rn_insert of it into another table, say), or *row = NULL when
 * absent; *id (id may be NULL) its id. Errors: RN_EINVAL (a NULL
 * argument; key not a map, an unknown column, a missing or wrongly typed
 * key column; a keyless derived relation; a relation refused as above),
 * RN_ESTORE, RN_ENOMEM. */
RN_API int rn_get(rn_pipeline *p, rn_rel *rel, const void *key, size_t key_len, const void **row, size_t *row_len,
                  uint64_t *id);

/* A relation's rows (any rn_get reads) in key order (id order when
 * keyless; a top: group then rank order; an index: its order). A table's
 * are read as the cursor goes; any other's are made when it opens, all in
 * memory. Outside a group a cursor reads the state when it was opened
 * until closed; opened inside a group (or from a callback), it ends with
 * the group, committed or rolled back: rn_cursor_next then fails with
 * RN_EMISUSE. A table's cursor opened outside a group ends too when a
 * later group grows the map (LMDB remaps it under the cursor's read):
 * RN_EMISUSE ("t: rn_cursor_next: the cursor was opened before the state
 * grew …: open it again"). Destructor: rn_cursor_close (also after an error, and after
 * rn_pipeline_close; accepts NULL). */
typedef struct rn_cursor rn_cursor;
RN_API int rn_cursor_open(rn_pipeline *p, rn_rel *rel, rn_cursor **out);
/* The next row into *row (a map owned by the cursor, valid until the next
 * call on it) and *id; *done = 1 (and *row NULL) after the last. Errors:
 * RN_EMISUSE (its group ended; the map grew under it; its pipeline was closed: no message then,
 * there is no pipeline to hold one), RN_EINVAL (a NULL argument). */
RN_API int rn_cursor_next(rn_cursor *c, const void **row, size_t *row_len, uint64_t *id, int *done);
RN_API void rn_cursor_close(rn_cursor *c);

/* rn_subscribe_rollback with flags: RN_SUBSCRIBE_CONSOLIDATE gives one net
 * change per row id per group (insert then update: one INSERT of the final
 * row; insert then delete: nothing; delete then insert of a key: one
 * UPDATE …), ids in the order first touched, as a Lua consolidate sink. */
enum { RN_SUBSCRIBE_CONSOLIDATE = 1 };
RN_API int rn_subscribe_flags(rn_pipeline *p, rn_rel *rel, int flags, rn_callback fn, rn_rollback_fn on_rollback,
                              void *ctx);
/* Removes the subscriber of rel registered with fn and ctx (the first, if
 * several; in-group ones first): it gets nothing of later groups. A durable
 * one's mark is written first (carried groups are committed for it), and
 * the groups waiting for it stay in the state until a subscriber of its
 * name comes again. Errors: RN_ENOTFOUND (no such subscriber), RN_EMISUSE
 * (inside a group or a callback). */
RN_API int rn_unsubscribe(rn_pipeline *p, rn_rel *rel, rn_callback fn, void *ctx);

/* ---- NATS JetStream (jetstream.c, js_source.c) ---------------------------
 * Strings are the caller's, read during the call only. Connections use
 * nats.c, whose own threads never call into runnel. */
typedef struct rn_js_sink_opts {
  const char *url;        /* server URLs, comma-separated ("nats://127.0.0.1:4222,…") */
  const char *subject;    /* every event goes to this subject: one state per subject */
  const char *verb_field; /* NDJSON events with the verb in this field; NULL: the row alone
                             (cdc relations in the debezium and flink forms) */
  const char *id;         /* the first part of message ids; NULL: the state's id */
  double timeout;         /* seconds to wait for the acks of a run (0: 10) */
} rn_js_sink_opts;

/* A durable sink publishing each change of rel as one message on
 * o->subject, with the message id "<id>:<seq>:<n>" (Nats-Msg-Id: the
 * server drops a re-send inside its duplicate window). At open it reads
 * the subject's last message and skips what that id says was published
 * already (a re-send after an outage longer than the window). A run whose
 * acks do not all arrive fails and stays in the outbox. */
RN_API int rn_jetstream_sink(rn_pipeline *p, rn_rel *rel, const rn_js_sink_opts *o);

typedef struct rn_js_source_opts {
  const char *url;        /* server URLs, comma-separated */
  const char *stream;     /* the stream to read */
  const char *const *subjects; /* subjects of the stream, one position each */
  int nsubjects;
  size_t batch;           /* messages per group at most (0: 100) */
  double idle;            /* stop once caught up and nothing came for this many seconds
                             (0: as soon as caught up); < 0: never stop */
  uint64_t limit;         /* stop after this many messages (0: no limit) */
  const char *name;       /* the input's name in messages ("nats://…") */
} rn_js_source_opts;

/* Applies the messages of o->subjects of o->stream as groups of up to
 * o->batch messages, from the positions the state holds (written in each
 * group, "jp:" in the state), until caught up and idle (see above); a
 * message is NDJSON change lines or a msgpack array of change maps
 * {rel, op, row}. *messages (may be NULL) counts the messages applied. A
 * bad message rolls its group back and is an error naming subject and
 * stream sequence; so is a position the stream's retention passed. */
RN_API int rn_jetstream_run(rn_pipeline *p, const rn_js_source_opts *o, uint64_t *messages);

/* ---- Stopping a run (interrupt.c) ---------------------------------------
 * Asks the run going in this process (p:run over NDJSON or JetStream,
 * rn_jetstream_run), or the next one to start, to stop between two
 * changes, as at the end of its input: what it applied is committed (its
 * open group too), and it returns RN_EINTR, its message saying where it
 * stopped. A run blocked reading a pipe or a terminal stops at once when
 * the signal's handler was installed without SA_RESTART; a JetStream run
 * within a second. Async-signal-safe: made for a SIGINT or SIGTERM
 * handler. One request for the process, taken by the run that stops; a
 * run that ends another way drops it. Returns 1 when a run is going (it
 * will stop), 0 when none is (a host may then stop its own work, as
 * `runnel run` raises "interrupted!" in Lua). rn_interrupt_withdraw drops
 * a request no run has taken. `runnel run` and the REPL call it on Ctrl-C
 * (and `runnel run` on SIGTERM). */
RN_API int rn_interrupt_runs(void);
RN_API void rn_interrupt_withdraw(void);

/* ---- Copying a state (copy.c) -------------------------------------------
 * A consistent, compacted copy of the state at path into the directory
 * dest (created if absent; one holding a state is refused, RN_EMISUSE; an
 * empty path or dest, RN_EINVAL),
 * from one LMDB read transaction: the state's writer, in any process,
 * keeps running. The copy is a whole state with its positions, outbox and
 * id: open it elsewhere and it resumes where the copy was taken. Called
 * between groups by the thread of a pipeline that writes the state, it
 * first commits the groups that pipeline carries (sync = false: rn_flush),
 * so the copy holds every group committed so far; inside a group or a
 * callback it holds those LMDB holds. rn_inspect and rn_verify read alike. It is
 * written beside, made durable (fsync), then named dest/data.mdb: a copy
 * that fails (a full disk: RN_EFULL) or is killed leaves no state in dest,
 * and the next copy there is not refused; a dest it created is removed
 * again when the copy fails. */
RN_API int rn_state_copy(const char *path, const char *dest, char *errbuf, size_t errlen);

/* ---- Lua ---------------------------------------------------------------
 * Runs a Lua pipeline script against p: it sees the pipeline as the global
 * `p` (and as its first argument), declares relations, sinks and so on,
 * which the host then finds with rn_relation. L is the host's own state
 * (it keeps ownership, and must close p before closing L) or NULL: runnel
 * then creates one, kept until rn_pipeline_close. A pipeline runs Lua in
 * one state: every script after the first must be given the same L (NULL
 * again for runnel's own). A script that raises with a group it began
 * still open has that group rolled back. Errors: RN_EIO (the file),
 * RN_ECALLBACK (the script raised: rn_errmsg has its message), RN_EINVAL (a
 * NULL path or chunk), RN_EMISUSE (another state than the first script's,
 * a group open, or from inside a callback). */
struct lua_State;
RN_API int rn_run_lua(rn_pipeline *p, struct lua_State *L, const char *path);
/* The same for a chunk of Lua source; name is used in its messages. */
RN_API int rn_run_lua_string(rn_pipeline *p, struct lua_State *L, const char *chunk, const char *name);

#ifdef __cplusplus
}
#endif
#endif
