/* mapkey.h — the keys of a keyed map: one input row per key (mapkey.c). */
#ifndef RN_MAPKEY_H
#define RN_MAPKEY_H

#include "pipeline.h"

/* A key another row claimed while its holder had it, in the open group. */
typedef struct rn_mapkey_claim {
  uint64_t id;            /* the claiming row */
  char *key;              /* its encoded key (malloc'd) */
  size_t klen;
  char text[400];         /* "key (…) is given by row id … already; row id … gives it too" */
} rn_mapkey_claim;

typedef struct rn_mapkey {
  MDB_dbi dbi;            /* "mk:" name */
  msgpack_sbuffer old_key; /* the old row's encoded key, reused per change */
  msgpack_sbuffer new_key; /* the new row's */
  bool strict;            /* rebuilding: a claim is an error at once */
  uint64_t serial;        /* the group (p->group_serial) the claims belong to */
  rn_mapkey_claim *claims; /* MAPKEY-1's claims waiting for the group's end */
  size_t nclaims, cap;
} rn_mapkey;

void rn_mapkey_init(rn_mapkey *k);
void rn_mapkey_destroy(rn_mapkey *k);

/* Opens map d's keys in txn (d declared, its state being opened); when
 * rebuild, empties them and takes every row of d's input again (MAPKEY-2).
 * A key two input rows give fails the declaration (MAPKEY-1). */
int rn_mapkey_open(rn_mapkey *k, rn_rel *d, MDB_txn *txn, bool rebuild);

/* Input row id of map d went from giving row old to giving row (either may
 * be NULL): frees old's key and takes row's; a key another row holds is
 * claimed, and the claim is settled when the holder lets it go in the same
 * group (MAPKEY-1). in: the input row, to name it by its key. Nothing when
 * both give one key. */
int rn_mapkey_change(rn_mapkey *k, rn_rel *d, uint64_t id, const char *old, size_t old_len, const char *row,
                     size_t row_len, const char *in, size_t in_len);

/* The group ends (ops.h's seal): a claim left unsettled fails it, naming
 * the key, the row id that holds it and the one that claims it. */
int rn_mapkey_seal(rn_mapkey *k, rn_rel *d);

/* Brings "mk:" database dbi of a state of format 0 (store.h) to format 1
 * in txn: a long key's entry moves to longkey.h's form. An LMDB code (or
 * ENOMEM) on failure. */
int rn_mapkey_upgrade(MDB_txn *txn, MDB_dbi dbi);

#endif
