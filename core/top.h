/* top.h — rel:top{}: the first n rows of each group in an order, ranked
 * (the rules and the state: top.c), and the order keys it shares with
 * rel:index{} (index.c). */
#ifndef RN_TOP_H
#define RN_TOP_H

#include "pipeline.h"

/* The encoding of order keys, recorded with a top's or an index's
 * declaration so that a state of another encoding is rebuilt: 2, ints
 * compact (rn_order_value_append). */
#define RN_ORDER_FORMAT 2

/* Columns a top may group by or order by (each). */
#define RN_TOP_COLS 16

/* The order of rows: columns of the input, each ascending or descending. */
typedef struct rn_order {
  int n;                    /* columns */
  int slots[RN_TOP_COLS];   /* their slots in the input */
  bool desc[RN_TOP_COLS];   /* descending */
} rn_order;

/* What rel:top{} declares; names are the input's external column names. */
typedef struct rn_top_spec {
  uint64_t n;               /* rows kept per group, >= 1 */
  int nby;                  /* group columns (0: one group) */
  const char *by[RN_TOP_COLS];
  int norder;               /* order columns, >= 1 */
  const char *order[RN_TOP_COLS];
  bool desc[RN_TOP_COLS];
  const char *rank;         /* the rank column's name */
} rn_top_spec;

/* Declares name over in (table-like): in's columns then the rank column,
 * keyless, row ids those of in; its state is built from in's rows when new
 * or stale or when the declaration changed. */
int rn_declare_top(rn_pipeline *p, const char *name, rn_rel *in, const rn_top_spec *spec, rn_rel **out);

/* Resolves names (with directions) to slots of s, into o; what names the
 * declaring relation in errors. Order columns must be scalar. */
int rn_order_resolve(rn_pipeline *p, const char *what, const rn_schema *s, int n,
                     const char *const *names, const bool *desc, rn_order *o);

/* Appends the order key of vals (a row's values) under o to out: each
 * value's key encoding (key.h), its bytes inverted when descending; null
 * sorts after every value in either direction. -1 for NaN (its slot in
 * *bad_slot). */
int rn_order_append(const rn_order *o, const msgpack_object *vals, msgpack_sbuffer *out, int *bad_slot);

/* Appends one value's order encoding: an int compact (top.c), another
 * scalar as rn_key_append; -1 for NaN. Also a top's group key. */
int rn_order_value_append(msgpack_sbuffer *out, const msgpack_object *v);

/* Appends the key of one bound value v for column i of o (as above). */
int rn_order_append_one(const rn_order *o, int i, const msgpack_object *v, msgpack_sbuffer *out);

/* Records under "tp:" "input" the name of out's input, for runnel verify
 * (a top's and an index's: verify_order.c); *changed is set when another
 * name was recorded (the state was built from another input). */
int rn_order_record_input(rn_rel *out, MDB_txn *txn, MDB_dbi decl_dbi, bool *changed);

#endif
