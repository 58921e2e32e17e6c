/* aggregate.h — grouped aggregates with exact retraction, and windows.
 *
 * rel:aggregate{ by = …, window = …, name = aggregate, … } is a keyed table
 * of groups: columns are the by columns, then window_start and window_end
 * when windowed, then one column per aggregate. Its state (databases
 * "<prefix><name>"):
 *
 *     "ag:"  |group key| -> |u64 result id|u64 rows|state: msgpack array,
 *            one entry per aggregate|
 *            (a group key too long to store as it is goes under its
 *            hashed form, longkey.h, its whole key in the value: drawn as
 *            group_entry in aggregate_int.h)
 *            group key: the by values then the window start, key-encoded
 *            (key.h); the global group (no by, no window) is |0x00|. A group
 *            whose rows fall to 0 stays as a tombstone: it gets its id back.
 *            A sum of a float column and an avg keep [bin, count]: the exact
 *            sum in fsum.h's stored form, rounded once when read (AGG-4).
 *            |0xfc| -> |u64 0|u64 0|u8 format| marks states whose sums are
 *            exact (format 2); one-byte keys from 0xfc up are not groups.
 *     "am:"  |group key|u8 column slot|encoded value| -> |u64 count|
 *            per-group value counts of min and max (one set per input
 *            column: a min and a max of one column share it): the first
 *            entry under |group key|slot| is the minimum, the last the
 *            maximum, so deleting
 *            the current extreme falls back to the next value exactly,
 *            without rescanning the input. A value too long for the key
 *            (a long string or bytes) is kept in a bucket of the values
 *            sharing its first bytes (drawn in aggregate_fns.c).
 *
 * Invariants (AGG-n):
 * (1) After every change each group's row equals the aggregate of the
 *     input rows currently in it (SQL's null rules: sum, min, max, avg skip
 *     nulls; count() counts rows).
 * (2) A change of a row that stays in its group is one UPDATE; a row that
 *     moves changes its old group first; a group whose rows fall to 0 is a
 *     DELETE.
 * (3) A windowed stream with `grace` drops events for windows whose end plus
 *     grace the largest event time seen has passed, and counts them; such a
 *     window is final: its row is kept as it is and its state dropped
 *     ("aw:" and the final form of "ag:" are drawn in aggregate.c).
 * (4) Float sums retract exactly: a sum (or avg) of a float column is the
 *     exact sum of the non-null values present, rounded once to the nearest
 *     double (ties to even), whatever the order of inserts and deletes; NaN
 *     if a NaN or both infinities are present, else the infinity present.
 *     avg is the exact sum divided by the count, rounded once (an avg of
 *     ints too). A sum of an int column is an int64: a change whose result
 *     leaves int64 fails, naming the aggregate and the column.
 * (5) The result is keyed by its by columns (and window start) when none of
 *     them may be null, or when the declaration states the key (key = …):
 *     a change that would then group under a null fails, naming the column. */
#ifndef RN_AGGREGATE_H
#define RN_AGGREGATE_H

#include "pipeline.h"

typedef enum rn_agg_kind {
  RN_AGG_COUNT,           /* rows */
  RN_AGG_COUNT_COL,       /* non-null values of a column */
  RN_AGG_SUM, RN_AGG_MIN, RN_AGG_MAX, RN_AGG_AVG,
  RN_AGG_USER             /* runnel.agg{ init, add, remove, result } */
} rn_agg_kind;

typedef struct rn_agg_spec {
  const char *name;       /* output column */
  rn_agg_kind kind;
  int slot;               /* input column, or -1 */
} rn_agg_spec;

/* User aggregates (the binding): states and results are msgpack values. */
typedef struct rn_agg_fns {
  int (*init)(void *ctx, int agg, msgpack_sbuffer *state, rn_err *e);
  /* add (or remove) row to state; appends the new state to out. */
  int (*step)(void *ctx, int agg, bool add, const char *state, size_t slen, rn_rel *in,
              const char *row, size_t rlen, msgpack_sbuffer *out, rn_err *e);
  int (*result)(void *ctx, int agg, const char *state, size_t slen, msgpack_sbuffer *out, rn_err *e);
  bool (*can_remove)(void *ctx, int agg);
  void *ctx;
  rn_free_fn free_ctx;
} rn_agg_fns;

typedef enum rn_window_kind { RN_WINDOW_NONE, RN_WINDOW_TUMBLING, RN_WINDOW_HOPPING } rn_window_kind;

typedef struct rn_window {
  rn_window_kind kind;
  double size, step;      /* step = size for tumbling */
  int slot;               /* the event time column */
  bool has_grace;
  double grace;
} rn_window;

int rn_declare_aggregate(rn_pipeline *p, const char *name, rn_rel *in, const int *by, int nby,
                         const rn_window *w, const rn_agg_spec *aggs, int naggs,
                         const rn_agg_fns *fns, rn_rel **out);

/* rn_declare_aggregate with the by columns stated as its key (aggregate{
 * key = … }) when the input cannot prove them non-null (a left join's
 * right column): they are non-null in the result, and a change that would
 * put a null there fails (AGG-5). */
int rn_declare_aggregate_keyed(rn_pipeline *p, const char *name, rn_rel *in, const int *by, int nby,
                               const rn_window *w, const rn_agg_spec *aggs, int naggs,
                               const rn_agg_fns *fns, rn_rel **out);

int rn_aggregate_apply(rn_rel *agg, const rn_change *c);
int rn_aggregate_scan(rn_rel *agg, int (*fn)(void *ctx, uint64_t id, const char *row, size_t len), void *ctx);
/* Events dropped as late, and windows made final, over the state's life. */
uint64_t rn_aggregate_late(const rn_rel *agg);
uint64_t rn_aggregate_final(const rn_rel *agg);
/* Whether k, a key of an aggregate's groups database, holds one of its
 * counters (largest event time, late events, final windows, the state's
 * format) rather than a group: runnel verify passes over those. */
bool rn_aggregate_counter_key(const MDB_val *k);

/* ---- reading an aggregate from outside its pipeline (aggregate_read.c) ----
 * runnel.attach and runnel query compute its rows from its groups in their
 * own read transaction; its declaration is kept for them under "d:" name. */
typedef struct rn_agg_reader rn_agg_reader;
/* Reads aggregate name's declaration record in txn (and opens its "am:"
 * database there: commit txn to keep it); name and out, its schema from the
 * catalogue, must outlive the reader. Errors: RN_EINVAL for an
 * aggregate it cannot compute (a runnel.agg column, or a state written by
 * an older runnel), RN_ESTORE for a damaged record. Destructor:
 * rn_agg_reader_free. */
int rn_agg_reader_open(MDB_txn *txn, MDB_dbi meta, const char *name, const rn_schema *out, rn_agg_reader **r,
                       rn_err *e);
/* The row of the group stored as k -> d in "ag:" name (read in txn), to
 * fn(ctx, id, row, len) as a normalized msgpack array valid during the call;
 * nothing for a tombstone or a counter. */
int rn_agg_reader_row(rn_agg_reader *r, MDB_txn *txn, const MDB_val *k, const MDB_val *d,
                      int (*fn)(void *ctx, uint64_t id, const char *row, size_t len), void *ctx, rn_err *e);
/* Finds the group whose whole key (the by values, then a window's start,
 * key-encoded) is key in groups ("ag:" name, opened in txn): 0 with k -> d
 * its entry, for rn_agg_reader_row (k valid until the reader's next row, d
 * owned by LMDB), MDB_NOTFOUND, or an error code with *e set. A long key is
 * stored hashed (longkey.h). */
int rn_agg_reader_seek(rn_agg_reader *r, MDB_txn *txn, MDB_dbi groups, const char *key, size_t klen, MDB_val *k,
                       MDB_val *d, rn_err *e);
void rn_agg_reader_free(rn_agg_reader *r);

#endif
