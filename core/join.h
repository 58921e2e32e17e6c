/* join.h — joins: table ⋈ table on a foreign key (or on both keys), and
 * stream ⋈ table.
 *
 * State (named databases, "<prefix><join name>"):
 *
 *     "ji:"  fan-out index, one entry per current left row:
 *            |fk part|u64 left id (big-endian)| -> |u64 result id|u32 left length|left row|result|
 *            fk part: the encoded right key the row points at (RN_KEY_NULL
 *            for a null foreign key), or for encodings longer than
 *            RN_JOIN_FK_INLINE its first RN_JOIN_FK_INLINE bytes and a hash;
 *            a prefix scan (MDB_SET_RANGE) at a right key's fk part finds
 *            every left row that references it, in ascending left id.
 *            result id: 0 until the row's result first exists.
 *            left length: host order; its top bit (RN_JOIN_KEPT) says the
 *            entry holds the result it emitted (a join with a joiner, or
 *            with a lookup); empty: none. A lookup join's entries written
 *            before the bit existed hold theirs without it.
 *            left row: so fan-out reads no other database (every left
 *            change rewrites its entry).
 *     "jr:"  result ids: |encoded result key| -> |u64 result id|u64 left id|
 *            kept for ever, so a result key that comes back gets its old
 *            id; the left id holding it (0: none) detects selector clashes.
 *     "jc:"  the right side's rows |encoded right key| -> |row|, only when
 *            the right relation is not a keyed source table.
 *
 * A declared result (no joiner) is a function of its left and right rows,
 * so it is not stored: the old result of a change is made again from the
 * rows before it, the two rows' encodings side by side (nothing decoded or
 * re-packed), or a projection of them (a joiner of column references). A
 * joiner's result is kept in the index entry, so a change calls the joiner
 * once, for the new result (an entry without RN_JOIN_KEPT, from an older
 * state, has its old result made again). A select that is the join's only
 * reader is done by the join itself (join_project.c).
 *
 * Invariants (JOIN-n):
 * (1) After every change, the results emitted so far, applied in order,
 *     equal the join of the current left and right contents.
 * (2) One output per logical change: a result that stays the same emits
 *     nothing; a result whose key moves is a DELETE then an INSERT; a
 *     left-join row whose right side changes is one UPDATE.
 * (3) A right change fans out in ascending left id order; result ids are
 *     allocated in the order results first appear. */
#ifndef RN_JOIN_H
#define RN_JOIN_H

#include "ops.h"

#define RN_JOIN_FK_INLINE 400
#define RN_JOIN_KEPT 0x80000000u /* "ji:" left length: the entry holds its emitted result */

typedef enum rn_join_kind { RN_JOIN_INNER, RN_JOIN_LEFT, RN_JOIN_OUTER } rn_join_kind;

/* Callbacks from the binding; any may be NULL (then the join is pure C). */
typedef struct rn_join_fns {
  /* The right key of a left row: fills out[0..nkey) (normalized by the
   * join); *has_key = 0 for no match. */
  int (*mapper)(void *ctx, rn_rel *left, const char *row, size_t len,
                msgpack_object *out, int nkey, int *has_key, msgpack_zone *z, rn_err *e);
  /* The result key of a (left key, right key) pair, appended to out as a
   * key encoding (key.h). */
  int (*selector)(void *ctx, rn_rel *left, const msgpack_object *lkey, int nl,
                  rn_rel *right, const msgpack_object *rkey, int nr, msgpack_sbuffer *out, rn_err *e);
  /* The result row of left (NULL: none) and right (NULL: none), appended
   * to result as a normalized row of the join; *has_row = 0: no result. */
  int (*joiner)(void *ctx, rn_rel *join, const char *lrow, size_t llen,
                const char *rrow, size_t rlen, msgpack_sbuffer *result, int *has_row, rn_err *e);
  /* The left columns the last mapper call read, a bit per slot (bit 63:
   * slot 63 or later, or all); NULL: unknown. A left update that keeps
   * those columns' bytes keeps the mapper's key: it is not called again. */
  uint64_t (*mapper_reads)(void *ctx);
  void *ctx;
  rn_free_fn free_ctx;
} rn_join_fns;

typedef struct rn_join_spec {
  rn_join_kind kind;
  const int *on;          /* left slots forming the right key, or NULL with a mapper */
  int non;
  rn_schema *schema;      /* result columns (with a joiner), or NULL for left+right; owned */
  /* A joiner of column references: result column project_to[i] is the
   * column of the default result (left then right, clashes renamed)
   * named project_from[i]; columns in the order of those they refer to.
   * Borrowed for the call. */
  const char *const *project_from, *const *project_to;
  int nproject;
  /* A joiner function recognised as copying columns (the binding reads
   * its code): result column i of schema copies column copies[i] of the
   * default result. The join copies them in C instead of calling the
   * joiner only when that gives exactly schema (names, order, types,
   * nullability, defaults, key) from scalar columns; else it calls the
   * joiner. NULL: not recognised. Borrowed for the call. */
  const int *copies;
  /* A mapper recognised as returning one left column as it is (the
   * binding reads its code): that column's slot. The join reads the key
   * from the row, as on = that column does, instead of calling the mapper,
   * when that gives exactly the mapper's key: the right key is one column
   * of the left column's scalar type. The declaration is the mapper's
   * still (the state is the same either way). NULL: not recognised. */
  const int *mapper_column;
} rn_join_spec;

/* Declares left ⋈ right. Takes ownership of spec->schema and fns->ctx. */
int rn_declare_join(rn_pipeline *p, const char *name, rn_rel *left, rn_rel *right,
                    const rn_join_spec *spec, const rn_join_fns *fns, rn_rel **out);

/* A change of one of the join's inputs. */
int rn_join_apply(rn_rel *join, rn_rel *from, const rn_change *c);

/* Calls fn for every current result row (unordered). */
int rn_join_scan(rn_rel *join, rn_scan_fn fn, void *ctx);

/* ---- reading a join from outside its pipeline (join_read.c) ----
 * runnel.attach and runnel query make its rows from its state in their own
 * read transaction; its declaration is kept for them under "d:" name. */

/* Records join's declaration in txn (its declaring transaction). */
int rn_join_decl_record(rn_rel *join, MDB_txn *txn, bool *changed);

/* In txn: *changed when join name's right side is a source table whose
 * catalogue entry no longer describes the schema its declaration record
 * holds (its columns changed since the join was made): its state holds
 * results made from rows no longer stored. 0, or an LMDB code. */
int rn_join_right_changed(MDB_txn *txn, MDB_dbi meta, const char *name, bool *changed);

typedef struct rn_join_reader rn_join_reader;
/* Reads join name's declaration record in txn (and opens its databases
 * there: commit txn to keep them); name and out, its schema from the
 * catalogue, must outlive the reader. Errors: RN_EINVAL for a join it
 * cannot read (a stream join, a state written by an older runnel),
 * RN_ESTORE for a damaged record. Destructor: rn_join_reader_free. */
int rn_join_reader_open(MDB_txn *txn, MDB_dbi meta, const char *name, const rn_schema *out, rn_join_reader **r,
                        rn_err *e);
/* Every result row with its id, read in txn (unordered, as rn_join_scan);
 * refused when the join's state is behind the right table it reads beside
 * it, or was declared again since the reader opened. */
int rn_join_reader_each(rn_join_reader *r, MDB_txn *txn, MDB_dbi meta, rn_scan_fn fn, void *ctx, rn_err *e);
void rn_join_reader_free(rn_join_reader *r);

/* ---- a join whose input tables' columns changed, read by its rebuild
 * (evolve_log.c) before its declaration record is replaced ---- */

/* The columns (and *name, unless NULL) of its left or right side as the
 * join was declared. */
const rn_schema *rn_join_reader_side(const rn_join_reader *r, bool right, const char **name);
/* Whether its right side is a keyed source table (read from "t:" right). */
bool rn_join_reader_right_is_table(const rn_join_reader *r);
/* Its right table's rows are stored in now_ncols columns since: right
 * column i as declared is now's column from[i] (-1: dropped, read as
 * null). Rows are read so, and the check that the table's schema is the
 * declared one is not made. 0 or RN_ENOMEM. */
int rn_join_reader_right_now(rn_join_reader *r, const int *from, int now_ncols);
/* The slot of the default layout (left columns, then right ones) that its
 * result column slot holds, or -1 (a Lua joiner's result): of the join as
 * the reader read its declaration, or of the declared join. */
int rn_join_reader_origin(const rn_join_reader *r, int slot);
int rn_join_origin(const rn_rel *join, int slot);

#endif
