/* mapkey.h — the keys of a keyed map: one input row per key (mapkey.c). */
#ifndef RN_MAPKEY_H
#define RN_MAPKEY_H

#include "pipeline.h"

typedef struct rn_mapkey {
  MDB_dbi dbi;            /* "mk:" name */
  msgpack_sbuffer old_key; /* the old row's encoded key, reused per change */
  msgpack_sbuffer new_key; /* the new row's */
} rn_mapkey;

void rn_mapkey_init(rn_mapkey *k);
void rn_mapkey_destroy(rn_mapkey *k);

/* Opens map d's keys in txn (d declared, its state being opened); when
 * rebuild, empties them and takes every row of d's input again (MAPKEY-2).
 * A key two input rows give fails the declaration (MAPKEY-1). */
int rn_mapkey_open(rn_mapkey *k, rn_rel *d, MDB_txn *txn, bool rebuild);

/* Input row id of map d went from giving row old to giving row (either may
 * be NULL): frees old's key and takes row's, or fails naming the key, the
 * row id that holds it and this one (and in, its input row, by its key);
 * MAPKEY-1. Nothing when both give one key. */
int rn_mapkey_change(rn_mapkey *k, rn_rel *d, uint64_t id, const char *old, size_t old_len, const char *row,
                     size_t row_len, const char *in, size_t in_len);

#endif
