/* upgrade.h — bringing an older state to this build's format (upgrade.c). */
#ifndef RN_UPGRADE_H
#define RN_UPGRADE_H

#include "store.h"

/* Reads s's format (store.h's "fmt") and, when older than RN_STATE_FORMAT,
 * upgrades s in one write transaction of its own (no group may be open).
 * Errors: RN_ESCHEMA for a state of a newer format, RN_ESTORE for a
 * malformed one, the store's codes. */
int rn_upgrade_state(rn_store *s, rn_err *e);

/* For a reader (inspect, verify, attach, query): 0 when this build may
 * read the state at path that txn reads (meta: its catalogue), that is,
 * its format is not newer than RN_STATE_FORMAT (upgrade.c (3); an older
 * one is read as it is). RN_ESCHEMA naming both formats for a newer one,
 * RN_ESTORE for a malformed format record. Writes nothing. */
int rn_upgrade_readable(MDB_txn *txn, MDB_dbi meta, const char *path, rn_err *e);

#endif
