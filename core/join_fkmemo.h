/* join_fkmemo.h — what a join's mapper gave for the bytes it read: a left
 * row whose read columns hold bytes already seen gets its right key without
 * calling the mapper again (join_state.c). Pure C: the mapper and its read
 * mask come from the binding (join.h's rn_join_fns).
 *
 * Sound for a mapper that computes the key from the row alone (README,
 * "Lua mappers and joiners"), deterministically: an earlier call that read
 * exactly the columns of mask M, and found bytes B there, is the call the
 * mapper makes on any row whose columns in M hold B — its first read finds
 * the same bytes, so does every later one, so it reads the same columns in
 * the same order and returns the same key. The memo never depends on the
 * join's state (only on row bytes), so a group's rollback leaves it valid.
 *
 * Bounded: RN_FKMEMO_SLOTS direct-mapped slots of 64 bytes (1 MiB per join
 * with a mapper, calloc'd at its first memoized call, so the pages of slots
 * never written take no memory); a newer call takes an older one's slot. A
 * call whose read bytes and key take more than a slot's 52 bytes is not
 * memoized (the mapper is called as before). A memo that seldom answers
 * (fewer than 1 in 16 of 4,096 probes) rests for 65,536 calls: neither
 * probed nor filled, so a mapper of unique values pays little for it. */
#ifndef RN_JOIN_FKMEMO_H
#define RN_JOIN_FKMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RN_FKMEMO_SLOTS 16384 /* a power of two; 4x the 3,545 distinct team_ids of fkjoin's 121k file */
#define RN_FKMEMO_MASKS 4    /* distinct read masks probed, most recent first */

typedef struct rn_fkmemo rn_fkmemo;

/* A key the mapper gave: null (no right key) or its encoding. */
typedef struct rn_fkmemo_key {
  bool null;
  const char *enc;        /* in the memo: valid until the next store */
  size_t len;
} rn_fkmemo_key;

/* The key an earlier call gave for a row of ncols columns holding the same
 * bytes in every column it read; *mask: what that call read. false: no
 * such call remembered, or the memo rests (m may be NULL). */
bool rn_fkmemo_find(rn_fkmemo *m, const char *row, size_t len, int ncols, uint64_t *mask, rn_fkmemo_key *key);
/* Remembers that the mapper, reading the columns of mask (a bit per slot;
 * bit 63: slot 63 and later) of row, gave key. Allocates *m at first use;
 * remembers nothing when out of memory or when it does not fit a slot. */
void rn_fkmemo_store(rn_fkmemo **m, const char *row, size_t len, int ncols, uint64_t mask, const rn_fkmemo_key *key);
void rn_fkmemo_free(rn_fkmemo *m);

#endif
