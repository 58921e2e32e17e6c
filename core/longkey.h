/* longkey.h — keys longer than an LMDB key (DESIGN.md §2: "hash them and
 * keep the full key beside the id, with an equality check").
 *
 * A key its owner cannot store as it is goes under its stored form
 *
 *     |its first RN_LONGKEY_INLINE bytes|u64 rn_hash64(whole key), big-endian|u8 probe|
 *
 * (RN_LONGKEY_STORED bytes), and the owner keeps the whole key in the
 * entry's value (its layout says where). A lookup walks probes 0, 1, …
 * comparing whole keys until one matches or a probe is free. Invariants:
 * (1) an entry under a stored form is never removed (a tombstone stays), so
 *     no free probe hides a later one;
 * (2) two keys are one entry only when their whole keys are equal: a hash
 *     neighbour (the same first bytes and hash) takes the next probe.
 * Long keys sort by their first RN_LONGKEY_INLINE bytes, then in hash order.
 * Owners: source tables (table.c), aggregate groups (aggregate_apply.c),
 * join results (join_state.c), stores (store_sink.c) and keyed maps' keys
 * (mapkey.c), and their readers (query.c, aggregate_read.c). */
#ifndef RN_LONGKEY_H
#define RN_LONGKEY_H

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

#define RN_LONGKEY_INLINE 480
#define RN_LONGKEY_STORED (RN_LONGKEY_INLINE + 9)
#define RN_LONGKEY_PROBES 256
enum { RN_LONGKEY_FULL = -1 };  /* rn_longkey_find: every probe holds another key */

/* The whole key of the entry whose value is v (ctx: the owner's): false
 * when it keeps none (an entry of a key stored as it is). */
typedef bool (*rn_longkey_whole_fn)(void *ctx, const MDB_val *v, const char **key, size_t *klen);

/* Writes key's stored form, probe 0, into out (RN_LONGKEY_STORED bytes). */
void rn_longkey_form(const char *key, size_t klen, char *out);

/* Finds key (klen bytes, any length) in dbi among the probes of its stored
 * form, read through s in txn (rn_wb_get), or in txn alone when s is NULL
 * (a reader outside the pipeline). Returns 0 with out the entry's stored key and *v its value
 * (owned by LMDB, valid until the next write), MDB_NOTFOUND with out the
 * first free probe, RN_LONGKEY_FULL, or an LMDB error. */
int rn_longkey_find(rn_store *s, MDB_txn *txn, MDB_dbi dbi, const char *key, size_t klen, rn_longkey_whole_fn whole,
                    void *ctx, char *out, MDB_val *v);

/* rn_longkey_find for an owner that removes entries (a store, which
 * breaks LONGKEY-1): walks with a cursor in txn every entry sharing key's
 * first bytes and hash, so a removed probe hides none; MDB_NOTFOUND leaves
 * out at the least free probe. */
int rn_longkey_seek(MDB_txn *txn, MDB_dbi dbi, const char *key, size_t klen, rn_longkey_whole_fn whole, void *ctx,
                    char *out, MDB_val *v);

#endif
