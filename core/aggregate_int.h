/* aggregate_int.h — what the files of the aggregate share, as SQLite's
 * vdbeInt.h: its state struct, reserved keys, small conversions, and the
 * functions of one file another calls. Not for use outside the aggregate.
 *
 *     aggregate.c         declaration, rebuild, scanning, the operator
 *     aggregate_fns.c     the aggregate functions (count, sum, min, max, avg,
 *                         user): their state, steps and results (AGG-4)
 *     aggregate_window.c  final windows and lateness (windowed streams with
 *                         grace, AGG-3)
 *     aggregate_apply.c   one input change: its group keys, each group's
 *                         step and change (AGG-1, AGG-2) */
#ifndef RN_AGGREGATE_INT_H
#define RN_AGGREGATE_INT_H

#include "aggregate.h"

#include <string.h>

#include "fsum.h"
#include "key.h"
#include "longkey.h"
#include "row.h"

#define MAX_WINDOWS 1024            /* size/step at most: the windows one event falls in */
/* Room for one event's window keys: a float size just under MAX_WINDOWS
 * steps has, by rounding, times that MAX_WINDOWS + 1 windows hold (and far
 * from 0 a few more); window_key refuses past it, never writes past it. */
#define WINDOW_KEYS (MAX_WINDOWS + 8)
static const char GLOBAL_KEY[1] = { 0x00 };
static const char MAX_TS_KEY[1] = { (char)0xff };  /* the largest event time seen */
static const char LATE_KEY[1] = { (char)0xfe };    /* events dropped as late */
static const char FINAL_KEY[1] = { (char)0xfd };   /* windows made final (their state dropped) */
static const char FINAL_MARK = (char)0xc1;         /* never a msgpack byte: a final window's value */
/* |u64 0|u64 0|u8 format|: sums are exact (fsum.h) from format 2 on. Drawn
 * as an empty group so that older versions pass over it. */
static const char FORMAT_KEY[1] = { (char)0xfc };
enum { STATE_FORMAT = 2 };
/* The least room for a min's or max's value beside its group key in "am:"
 * (aggregate_fns.c): a group key leaving less is stored hashed. */
enum { AGG_VALUE_ROOM_MIN = 16 };
/* The least of the aggregates' key_inline (aggregate.c): a group key no
 * longer is never stored hashed, unless its place holds a hashed group. A
 * longer one may be either way: a declaration that drops its last min or
 * max (or grace) stores more keys as they are, and its groups written
 * hashed before are found there (rn_agg_group_find). */
enum { AGG_KEY_INLINE_LEAST = RN_STORE_KEY_MAX - 1 - AGG_VALUE_ROOM_MIN };

/* One-byte keys other than the global group's are counters, not groups. */
static inline bool reserved(const MDB_val *k)
{
  return k->mv_size == 1 && ((const unsigned char *)k->mv_data)[0] >= 0xfc;
}

/* A float sum by its stored form: a group's state is read for its old
 * result, stepped and read for its new one, so each is decoded once. */
struct fsum_seen {
  uint32_t len;                   /* 0: none yet */
  char enc[RN_FSUM_MAX_ENCODED];  /* the stored form */
  rn_fsum f;                      /* what it decodes to */
};

typedef struct rn_aggregate {
  rn_rel *out, *in;
  int nby;
  int *by;                /* input slots of the by columns */
  rn_window w;
  bool time_int;          /* the time column is an int: integer window math */
  bool key_stated;        /* aggregate{ key = … }: the by columns are the key even when nullable */
  int naggs;
  rn_agg_spec *aggs;      /* names owned */
  rn_agg_fns fns;
  bool *counts_owner;     /* per aggregate: the min/max that keeps its column's value counts */
  struct fsum_seen *fseen; /* per aggregate: the float sum read or written last */
  MDB_dbi groups_dbi, values_dbi, windows_dbi; /* windows_dbi: with grace only */
  size_t key_inline;      /* the longest group key stored as it is (rn_agg_group_find) */
  uint64_t next_final_txn;  /* the store's txn_serial next_final was worked out in (0: none) */
  double next_final;        /* the largest event time below which no open window is final */
  __int128 next_final_int;  /* the same for an int time column, exact (rn_agg_window_final) */
  MDB_txn *reading;       /* a scan's read transaction, or NULL: the group's */
  bool rebuilding;        /* a rebuild runs: int sums may leave int64 on the way (rn_agg_sums_fit) */
  msgpack_sbuffer buf;    /* scratch: a group's value */
  msgpack_sbuffer state, answer; /* scratch: a user aggregate's state in, its answer out (the outermost call's) */
  int user_calls;         /* user functions running: one that reads the aggregate calls them again */
  bool final_reached;     /* the change being applied met a window made final (under an earlier grace) */
} rn_aggregate;

/* An event time or window start: as a double, and exactly for an int time
 * column (i; 0 for a float one). */
typedef struct rn_agg_time {
  double d;
  int64_t i;
} rn_agg_time;

/* A group's key: its whole encoding, and the key its entry is stored
 * under in "ag:" (and its value counts under, in "am:"): the whole key
 * when it fits, else its hashed form (longkey.h, rn_agg_group_find). */
typedef struct gkey {
  char *k;                /* the whole key: scratch */
  size_t len;
  char *sk;               /* the stored key: k, or a hashed form in scratch; NULL until found */
  size_t slen;
} gkey;

/* A group entry's value (aggregate.h) read in place:
 *
 *     |u64 rid|u64 rows|[0xc1 0xfe|u32 klen|whole group key]|state or 0xc1 final row|
 *
 * the bracket present when the group key is hashed (longkey.h). 0xc1 is
 * never a msgpack byte, and a final window's row after it is an array,
 * whose first byte is never 0xfe. */
typedef struct group_entry {
  uint64_t rid, rows;
  const char *key;        /* the whole group key: the entry's LMDB key unless hashed */
  size_t klen;
  const char *head;       /* |0xc1 0xfe|klen|key| of a hashed group (head_len 0: none) */
  size_t head_len;
  const char *rest;       /* the state, or |0xc1|row| of a final window */
  size_t rest_len;
  bool final;             /* rest is |0xc1|row| */
} group_entry;

/* Where the aggregate reads and writes: the group's transaction, or a scan's. */
static inline MDB_txn *txn_of(rn_aggregate *a) { return a->reading ? a->reading : a->out->p->store.wtxn; }
static inline rn_err *err_of(rn_aggregate *a) { return &a->out->p->err; }
static inline msgpack_zone *zone_of(rn_aggregate *a) { return &a->out->p->scratch; }
static inline int nomem(rn_aggregate *a) { return rn_err_set(err_of(a), RN_ENOMEM, "out of memory"); }
static inline int store_fail(rn_aggregate *a, int rc) { return rn_store_fail(err_of(a), rc, a->out->name); }


static inline int64_t floor_div(int64_t x, int64_t y)
{
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

static inline msgpack_object num_obj(rn_aggregate *a, double d, int64_t i)
{
  msgpack_object o;
  if (a->time_int) {
    if (i >= 0) { o.type = MSGPACK_OBJECT_POSITIVE_INTEGER; o.via.u64 = (uint64_t)i; }
    else { o.type = MSGPACK_OBJECT_NEGATIVE_INTEGER; o.via.i64 = i; }
  } else {
    o.type = MSGPACK_OBJECT_FLOAT64;
    o.via.f64 = d;
  }
  return o;
}

static inline double as_double(const msgpack_object *o)
{
  return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)o->via.u64
       : o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (double)o->via.i64 : o->via.f64;
}

static inline int64_t as_int(const msgpack_object *o)
{
  return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)o->via.u64 : o->via.i64;
}

/* An extreme not known yet: result_row looks it up. */
static const msgpack_object UNKNOWN = { .type = MSGPACK_OBJECT_EXT, .via.ext = { 0x7e, 0, NULL } };

/* ---- aggregate_fns.c ---- */

/* What declaring an aggregate function needs of it: its result column and
 * the input column it takes. */
enum { AGG_RESULT_OF_COLUMN = -1 };  /* result_type: the input column's type */
typedef enum agg_takes { AGG_TAKES_ANY, AGG_TAKES_NUMBER, AGG_TAKES_SCALAR } agg_takes;
typedef struct agg_decl {
  int result_type;        /* an rn_type, or AGG_RESULT_OF_COLUMN */
  bool result_nullable;
  agg_takes takes;
  const char *takes_what; /* the refusal's end, e.g. "sum and avg take int or float" */
  bool value_counts;      /* keeps its column's value counts (min, max: one owner per column) */
} agg_decl;

/* The declaration facts of aggregate function kind. */
const agg_decl *rn_agg_decl_of(rn_agg_kind kind);

/* st: aggregate i's state for an empty group. */
int rn_agg_init_state(rn_aggregate *a, int i, msgpack_object *st);
/* A sum kept as an int64: sum of an int column. */
bool rn_agg_int_sum(const rn_aggregate *a, int i);
/* The extremes after a change, from those before it: the same, or the
 * added value if it goes beyond; unknown (looked up) only when the removed
 * value was the extreme. */
void rn_agg_next_extremes(const rn_aggregate *a, const msgpack_object *before, const msgpack_object *rv,
                          const msgpack_object *av, msgpack_object *after);
/* The group's result row: by values, window, aggregates. ext holds each
 * min/max's value where known (UNKNOWN: looked up, and filled in). */
int rn_agg_result_row(rn_aggregate *a, const gkey *g, uint64_t rows, const msgpack_object *st, msgpack_object *ext,
                      const char **row, size_t *len);
/* Moves row's contribution in or out of one aggregate's state. */
int rn_agg_step_state(rn_aggregate *a, int i, const gkey *g, msgpack_object *st, const msgpack_object *v,
                      const char *row, size_t rlen, int delta);
/* Moves the value rx (a row's, or NULL) out of a sum or avg state and ax
 * (or NULL) into it, in one step: an int sum fails only when the result
 * leaves int64, not on the way (nulls are skipped, AGG-1). */
int rn_agg_sum_step(rn_aggregate *a, int i, msgpack_object *st, const msgpack_object *rx, const msgpack_object *ax);
/* Aggregate i keeps a sum (sum, avg): stepped by rn_agg_sum_step. */
bool rn_agg_summing(const rn_aggregate *a, int i);
/* 0 when every int sum of the group state st fits int64, else the
 * overflow error: a rebuild's sums, once every row is in. */
int rn_agg_sums_fit(rn_aggregate *a, const msgpack_object *st);

/* ---- aggregate_window.c ---- */

/* Group entry k -> d (not a reserved key) into *e: false when its value is
 * malformed. */
bool rn_agg_entry_parse(const MDB_val *k, const MDB_val *d, group_entry *e);
/* The whole key a hashed group's entry value keeps (rn_longkey_whole_fn). */
bool rn_agg_entry_whole(void *ctx, const MDB_val *d, const char **key, size_t *klen);
/* Finds group g's entry in dbi (the "ag:" of a) in txn: sets g->sk and
 * g->slen to where it is, or where it goes when *found is false; *d its
 * value. A key of at most inline_max bytes goes under itself, a longer one
 * under its hashed form; an entry written under a key up to 511 bytes long
 * by an older runnel, or by a declaration with another inline_max, is found
 * there. A key longer than AGG_KEY_INLINE_LEAST whose own place is free is
 * looked for under its hashed form too before it goes under itself. */
int rn_agg_group_find(rn_aggregate *a, MDB_txn *txn, MDB_dbi dbi, size_t inline_max, gkey *g, MDB_val *d,
                      bool *found);
/* Moves the group entry stored as it is under key to its hashed place
 * (longkey.h), keeping its id, rows and rest (its state, or |0xc1|row| of a
 * final window): a declaration whose key_inline is less than key's length
 * finds it there. *moved (NULL: not wanted) gets the whole and stored key,
 * in scratch. Value counts under the old key are the caller's: a rebuild
 * has dropped them, and a stream aggregate without min or max has none. */
int rn_agg_group_rehash(rn_aggregate *a, MDB_txn *txn, const MDB_val *key, uint64_t rid, uint64_t rows,
                        const char *rest, size_t rest_len, gkey *moved);
/* The aggregates' states of a group entry (e->rest), decoded into scratch. */
int rn_agg_decode_state(rn_aggregate *a, const group_entry *e, msgpack_object **st);
/* Makes final, oldest first, every window max_ts has passed by its grace.
 * Within one LMDB transaction next_final says when the oldest open window
 * becomes final, so most events skip the index; a new transaction (a
 * commit, or a rollback that may bring windows back) works it out again. */
int rn_agg_finalize_windows(rn_aggregate *a, rn_agg_time max_ts);
/* The window at start is final once max_ts passed its end plus grace (AGG-3). */
bool rn_agg_window_final(const rn_aggregate *a, rn_agg_time start, rn_agg_time max_ts);
/* Opens (grace) or drops (none) "aw:", listing the windows made without grace. */
int rn_agg_windows_open(rn_aggregate *a, bool created);
/* Lists window g in "aw:" as not final yet. */
int rn_agg_window_index_put(rn_aggregate *a, const gkey *g);
/* *start: the window start of group key g (its last key part). */
int rn_agg_window_start_of(rn_aggregate *a, const char *g, size_t len, rn_agg_time *start);
/* Adds by to the reserved counter key (late or final windows). */
int rn_agg_counter_add(rn_aggregate *a, const char *key, double by);
/* Drops the windows of an event that are final (AGG-3); keeps the largest
 * event time seen and the late count in the aggregate's own database, so a
 * rollback rolls them back too. */
int rn_agg_drop_late(rn_aggregate *a, const msgpack_object *v, gkey *keys, int *n);

/* ---- aggregate_apply.c ---- */

/* The group keys a row belongs to, ascending: one without a window, the
 * windows holding its event time with one. */
int rn_agg_group_keys(rn_aggregate *a, const msgpack_object *v, gkey *keys, int *n);
/* Moves rem out of and add into group g (either may be NULL), then emits
 * the group's change: one UPDATE, or INSERT / DELETE as it appears or
 * empties (AGG-2). */
int rn_agg_group_apply(rn_aggregate *a, const gkey *g, const msgpack_object *rv, const char *rrow, size_t rlen,
                       const msgpack_object *av, const char *arow, size_t alen, bool quiet);
/* Applies input change c (quiet: no emission, a rebuild). */
int rn_agg_apply(rn_aggregate *a, const rn_change *c, bool quiet);
/* The operator's apply (ops.h): the change's relation is the aggregate's one input. */
int rn_agg_operator_apply(rn_rel *r, rn_rel *from, const rn_change *c);

/* ---- aggregate_read.c ---- */

/* Records a's declaration record under "d:" name (aggregate.h) in txn;
 * *changed: the state held another (the same columns, another result:
 * min for max, a sum of another column). With capture, a's rows are first
 * read as that record gives them, as what its sinks were told
 * (rn_rebuild_capture): the rebuild tells them what changed. */
int rn_agg_decl_record(rn_aggregate *a, MDB_txn *txn, bool capture, bool *changed);

#endif
