/* verify.h — checking a state directory against itself (runnel verify).
 *
 * LMDB keeps no page checksums: a flipped byte opens as wrong data. The
 * walk reads every entry of every named database (a damaged B-tree shows
 * as an LMDB error, or as a crash: run it in a child process), then checks
 * what the state says about itself:
 *   - the catalogue: every "r:" entry decodes, every "n:" record is 24
 *     bytes and belongs to a relation, the sequence number is 8 bytes;
 *     the "rd:" and "ev" lists of names read, the "Ss:", "ch:" and "chs"
 *     groups are of their size and not past the last group, the state's
 *     id is 32 hex digits;
 *   - tables: the rows stored equal the count recorded, every row id (a
 *     keyed table's tombstones' too: the key put back takes it again) is
 *     below the next id and no id is used twice, a keyless table's hash
 *     index has one entry per row;
 *   - derived state (cdc, joins, aggregates): recorded as of the last group
 *     (else it is rebuilt at the next open: said, not counted as damage).
 * Joins' and aggregates' contents are not recomputed from their inputs. */
#ifndef RN_VERIFY_H
#define RN_VERIFY_H

#include <lmdb.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>

/* Writes one line per finding to out ("damaged: …" or "note: …") and a
 * summary line. Returns the number of damages found (0: whole), or a
 * negative RN_E… code when the state cannot be read at all (said on out). */
int rn_verify(const char *path, FILE *out);

/* A catalogue entry decoded from "r:" name: |kind|[columns, key]| as
 * schema.c writes it (inspect.c). */
bool rn_catalogue_entry_valid(const msgpack_object *d);

/* A top's (top) or an index's state checked against itself (verify_order.c):
 * entries at the keys their rows give, row ids held once, ranks 1..k <= n
 * per group, a group's other rows after its full top, rows held = counted.
 * ncols: the relation's columns. Writes "damaged: …" lines to out and
 * returns their number. */
int rn_verify_ordered(MDB_txn *txn, const char *name, bool top, int ncols, const uint64_t counters[3], FILE *out);

#endif
