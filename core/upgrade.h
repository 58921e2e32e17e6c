/* upgrade.h — bringing an older state to this build's format (upgrade.c). */
#ifndef RN_UPGRADE_H
#define RN_UPGRADE_H

#include "store.h"

/* Reads s's format (store.h's "fmt") and, when older than RN_STATE_FORMAT,
 * upgrades s in one write transaction of its own (no group may be open).
 * Errors: RN_ESCHEMA for a state of a newer format, RN_ESTORE for a
 * malformed one, the store's codes. */
int rn_upgrade_state(rn_store *s, rn_err *e);

#endif
