/* join_int.h — what the files of the join share, as SQLite's vdbeInt.h:
 * its state struct, the values its steps pass around, and the functions of
 * one file another calls. Not for use outside the join.
 *
 *     join.c          declaration, rebuild from the inputs, the operator
 *     join_state.c    keys, the right side's rows, results and their ids
 *                     ("jr:"), the fan-out index ("ji:") — join.h draws them
 *     join_apply.c    a change applied: one left row's step, a right
 *                     change's fan-out, stream ⋈ table
 *     join_scan.c     the current results, from a snapshot */
#ifndef RN_JOIN_INT_H
#define RN_JOIN_INT_H

#include "join.h"

#include <string.h>

#include "join_fkmemo.h"
#include "key.h"
#include "row.h"

/* A projection of the default result layout (left columns, then right). */
typedef struct rn_join_proj {
  int n;                  /* output columns */
  int left_ncols;         /* slots below this are left columns */
  int lupto, rupto;       /* 1 + the largest left / right column used: how far rows are walked */
  int slots[];            /* each output column's slot in the default layout */
} rn_join_proj;

typedef struct rn_join {
  rn_rel *out, *left, *right;
  rn_join_kind kind;
  bool stream;            /* the left side is a stream: the output is a stream */
  bool key_join;          /* on = the left key: at most one left row per right key */
  int non;                /* left slots forming the right key (declarative) */
  int *on;
  int on_upto;            /* 1 + the largest of them: how far a left row is walked */
  rn_join_fns fns;
  rn_join_proj *proj;     /* the result is this projection of the default layout (a joiner of
                             column references), or NULL; owned */
  rn_rel *fused;          /* the select the join emits for while it is the join's only reader,
                             or the join itself when nothing reads its projection
                             (join_project.c); valid only while projecting */
  rn_join_proj *fuse;     /* its projection (kept while the select's columns stay); owned */
  bool projecting;        /* this change's results are fused's rows */
  bool right_native;      /* the right side is a keyed source table */
  bool lookup;            /* the right side is a lookup: results are stored, not recomputed */
  bool keeps_results;     /* entries hold the emitted result (lookup or joiner): an old
                             result is read back, never asked of the source or joiner again */
  MDB_dbi index_dbi, result_dbi, right_dbi;
  MDB_txn *reading;       /* a scan's read transaction, or NULL: the group's */
  bool fk_of_index;       /* a reader of the state (join_read.c) without on slots: a left row's right
                             key is the one its index entry is filed under (the mapper is the script's) */
  msgpack_sbuffer keybuf; /* scratch: encoding a key */
  msgpack_sbuffer resultbuf; /* a joiner's result, reused per call */
  bool resultbuf_busy;    /* a joiner re-entered the join (a scan of it) */
  MDB_cursor *index_cur;  /* on index_dbi in the write transaction, positioned by index_entry */
  uint64_t index_cur_txn; /* the store's txn_serial it belongs to (LMDB frees it with it) */
  bool index_at;          /* index_cur is positioned at index_at_key */
  char index_at_key[RN_JOIN_FK_INLINE + 16];
  size_t index_at_len;
  bool index_near;        /* index_cur was left on an entry: a fan-out's next one may be one step on */
  rn_fkmemo *fkmemo;      /* the mapper's keys by the bytes it read (join_fkmemo.h), or NULL; owned */
  uint64_t mapper_read;   /* the columns the mapper read (or, from the memo, would have read)
                             for the last rn_join_left_fk */
  int mapper_column;      /* >= 0: the mapper is recognised as returning this left column
                             (rn_join_spec.mapper_column): its key is read from the row as
                             on = that column reads it, with no call; -1: it is called */
  struct rn_join_longfks *longfks; /* a rebuild's long right keys by their index part
                             (join_scan.c), or NULL; owned while the rebuild reads */
  bool longfk_unread;     /* a scan by index part met a long one it could not read back */
  bool longfk_lazy;       /* a reader of the state (join_read.c): longfks is built in its read
                             transaction when a scan first meets a long key, and freed after it */
  int *right_from;        /* a reader's (rn_join_reader_right_now): per right column as declared,
                             the column of the right table's stored rows that holds it now (-1:
                             dropped: null), or NULL: the rows are stored as declared; owned */
  int right_now_ncols;    /* the stored rows' columns then */
} rn_join;

/* A right key, encoded, with its fk part as the index uses it. */
typedef struct fk {
  bool null;              /* no right key: null foreign key or no mapper match */
  const char *enc;        /* the full encoding (scratch) */
  size_t len;
  char part[RN_JOIN_FK_INLINE + 8];
  size_t part_len;
} fk;

/* One side of a result: a row and, once needed, its decoded values. */
typedef struct side {
  const char *row;        /* NULL: absent */
  size_t len;
  const msgpack_object *vals; /* NULL until vals_of() */
  struct side *made_of[2]; /* a fused result: the left and right rows it was made of */
  const size_t *starts;   /* the offsets of its first `walked` values (rn_join_spans), or NULL */
  int walked;
} side;

/* Where the join reads and writes: the group's transaction, or a scan's. */
static inline MDB_txn *txn_of(rn_join *j) { return j->reading ? j->reading : j->out->p->store.wtxn; }
static inline rn_err *err_of(rn_join *j) { return &j->out->p->err; }
static inline msgpack_zone *zone_of(rn_join *j) { return &j->out->p->scratch; }

static inline int nomem(rn_join *j) { return rn_err_set(err_of(j), RN_ENOMEM, "out of memory"); }

/* A fan-out index entry ("ji:", join.h) holds its head and the left row
 * its length says: else it is damage, never read past its end. */
static inline bool rn_join_entry_whole(const MDB_val *v)
{
  uint32_t llen;
  if (v->mv_size < 12) return false;
  memcpy(&llen, (const char *)v->mv_data + 8, 4);
  return (llen & ~RN_JOIN_KEPT) <= v->mv_size - 12;
}

static inline int rn_join_entry_damaged(rn_join *j)
{
  return rn_err_set(err_of(j), RN_ESTORE, "state damaged: %s: join \"%s\": an entry of its fan-out index is malformed",
                    j->out->p->store.path, j->out->name);
}

static inline bool same_fk(const fk *a, const fk *b)
{
  if (a->null || b->null) return a->null && b->null;
  return a->len == b->len && memcmp(a->enc, b->enc, a->len) == 0;
}

typedef struct entry {
  uint64_t lid, rid;
  const char *payload;    /* scratch copy: the left row, then the kept result */
  size_t len;             /* of the left row */
  size_t res_len;         /* of the kept result (0: none) */
  bool kept;              /* the entry holds the result it emitted (RN_JOIN_KEPT) */
} entry;


typedef struct entries {
  entry *items;
  size_t n, cap;
  entry *stack;           /* the caller's first items (not freed), or NULL */
} entries;

/* ---- join_state.c ---- */

/* f->part from f->enc: the encoding itself, or for a long one its first
 * RN_JOIN_FK_INLINE bytes and a hash (join.h). */
void rn_join_set_part(fk *f);
/* The offsets of s's first upto values (rn_row_spans) into *starts: the
 * row is walked once for all who ask (its key, the columns a left update
 * compares, a fused select's), as far as any of them reads, and the
 * offsets kept on s (in scratch). 1 when s is not a row of `of` whose
 * first upto values are well formed; RN_ENOMEM (noted). */
int rn_join_spans_walk(rn_join *j, rn_rel *of, side *s, int upto, const size_t **starts);
static inline int rn_join_spans(rn_join *j, rn_rel *of, side *s, int upto, const size_t **starts)
{
  if (!s->starts || s->walked < upto) return rn_join_spans_walk(j, of, s, upto, starts);
  *starts = s->starts; /* walked already: inline, as most asks are */
  return 0;
}
/* The right key a left row points at. */
int rn_join_left_fk(rn_join *j, side *l, fk *f);
/* A right row's own key (its values are already normalized). */
int rn_join_right_key(rn_join *j, side *r, fk *f);
/* The current right row with key f (NULL when absent or f is null). */
int rn_join_right_current(rn_join *j, const fk *f, side *r);
/* A right table's stored row (*row, *len) in the columns the join was
 * declared with, into scratch, when a reader's right_from says they moved
 * (join_read.c); else left as it is. */
int rn_join_right_as_declared(rn_join *j, const char **row, size_t *len);
/* The right row with key f as it was before change undo (a self-join sees
 * its own change on both sides). */
int rn_join_right_before(rn_join *j, const fk *f, const rn_change *undo, side *r);
/* The result row of l and r (either may be absent), into scratch. NULL row:
 * no result (inner join without a match, or the joiner said none). */
int rn_join_make_result(rn_join *j, side *l, side *r, const fk *f, side *res);
/* The key of a left row's result (default: the left key, or the left id
 * when the left side has no key; a key join: the join key; with a
 * selector: what it returns), appended to b. */
int rn_join_result_key(rn_join *j, uint64_t lid, side *l, const fk *f, msgpack_sbuffer *b);
/* With a selector, a joiner's row res (of left row l) holds key, the
 * selector's, in the key columns it declares: else a failure naming the
 * join (0 without a selector, a declared key or a joiner). */
int rn_join_selected_key_check(rn_join *j, side *l, const msgpack_sbuffer *key, side *res);
/* The key result row res's key columns hold, encoded into b. */
int rn_join_row_key(rn_join *j, side *res, msgpack_sbuffer *b);
/* The id of result key k: its old id if it ever had one, else the next.
 * owner: the left id that now holds it (0: release); with a selector two
 * left rows may not hold one key at once. */
int rn_join_result_id(rn_join *j, const msgpack_sbuffer *k, uint64_t owner, bool take, uint64_t *id);
/* Result key k as text for a message into buf (cap bytes): its one value
 * (1, "a"), or its values in parentheses ((1, "x")); "?" when undecodable. */
void rn_join_key_text(rn_join *j, const msgpack_sbuffer *k, char *buf, size_t cap);
/* The result key that has result id id, shown so ("?" when none has): walks
 * every result key, for an error message only. */
void rn_join_id_key_text(rn_join *j, uint64_t id, char *buf, size_t cap);
/* Emits the change from result old (id old_id) to result now (id new_id):
 * an INSERT, DELETE, UPDATE, or a DELETE then an INSERT when the id moves;
 * nothing when they are equal (JOIN-2). */
int rn_join_emit_result(rn_join *j, uint64_t old_id, const side *old, uint64_t new_id, const side *now);
/* |u64 result id|u32 left length|left row|result|: fan-out reads the left
 * row here, no lookup; a lookup join keeps the result it emitted. An entry
 * index_entry just read is rewritten in place (no second descent). */
int rn_join_index_put(rn_join *j, const fk *f, uint64_t lid, uint64_t rid, const side *l, const side *res);
/* Positions the index at entry (f, lid) for index_put, by one step when it
 * is the entry after the one last read or written (fan-out order). */
int rn_join_index_seek(rn_join *j, const fk *f, uint64_t lid);
/* An entry index_entry just read is deleted where the cursor stands. */
int rn_join_index_del(rn_join *j, const fk *f, uint64_t lid);
/* A left row's entry: its result id (0: none yet or no entry) and, for a
 * join that keeps results, the result it emitted (stored->row NULL: none;
 * *kept false when the entry does not say). */
int rn_join_index_entry(rn_join *j, const fk *f, uint64_t lid, uint64_t *rid, side *stored, bool *kept);

/* The declared result (no joiner): the left and right rows' encodings side
 * by side (an absent right side as nils), into scratch. */
int rn_join_concat(rn_join *j, side *l, side *r, const fk *f, side *res);

/* ---- join_scan.c ---- */

/* Calls fn for every current result, read in txn (j->reading while it
 * runs); scratch is cleared after each row. */
int rn_join_scan_txn(rn_join *j, MDB_txn *txn, rn_scan_fn fn, void *ctx);
/* A rebuild of a mapper join reads its results as its sinks were told
 * (fk_of_index): each left row's right key is the one its index entry is
 * filed under, which for a key longer than RN_JOIN_FK_INLINE bytes is its
 * first bytes and a hash (join.h). These find the whole key again: every
 * right row the join joins with (a keyed source table's rows, else the
 * join's own copy of the right side) is keyed, and the long keys are kept
 * by their part, until rn_join_longfks_free. A part no right row holds is
 * a key without a right row (the result without a match). */
int rn_join_longfks_build(rn_join *j);
/* A reader builds them in its read transaction (j->reading) the first time
 * a scan meets a long key (longfk_lazy). */
void rn_join_longfks_free(rn_join *j);

/* ---- join_project.c ---- */

/* A projection of slots[0..n) of the default layout; NULL: out of memory. */
rn_join_proj *rn_join_proj_new(const int *slots, int n, int left_ncols);
/* The result of l and r as projection pr, into scratch. */
int rn_join_project(rn_join *j, const rn_join_proj *pr, side *l, side *r, const fk *f, side *res);
/* Decides, per change, whether the join does the work of the select that
 * is its only reader (sets projecting, fused, fuse). */
void rn_join_fuse_begin(rn_join *j);
/* Emits the change from old to now as fused emits it, and counts the
 * join's own change (one the fused select's reader would have seen). */
int rn_join_emit_fused(rn_join *j, uint64_t old_id, const side *old, uint64_t new_id, const side *now);

/* ---- join_apply.c ---- */

/* Recomputes the result of left row lid from lb (before) to la (after),
 * keeping its index entry; undo is a right-side change the "before"
 * lookups must not see yet (self-joins), or NULL. */
int rn_join_left_step(rn_join *j, uint64_t lid, side *lb, side *la, const rn_change *undo);
/* Appends to out every index entry of right key f, in ascending left id
 * (JOIN-3); payloads are copied to scratch. */
int rn_join_collect(rn_join *j, const fk *f, entries *out);
/* The current left row of an index entry: the entry holds it. */
void rn_join_left_row(const entry *e, side *l);
/* The result an entry says it emitted; false when it does not say. */
bool rn_join_kept_result(const entry *e, side *res);
/* Keeps the right copy of a derived right side current. */
int rn_join_right_copy(rn_join *j, const fk *ko, const fk *kn, const rn_change *c);

#endif
