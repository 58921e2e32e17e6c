/* sqlite.h — SQLite sinks (sqlite.c). */
#ifndef RN_SQLITE_H
#define RN_SQLITE_H

#include "lookup.h"

/* Keeps rel in table of the SQLite database at path (created if absent).
 * busy_ms: how long to wait for another connection's lock (-1: 5000). */
int rn_sqlite_sink(rn_pipeline *p, rn_rel *rel, const char *path, const char *table, int busy_ms);

/* A lookup source reading one row of table by the lookup's key (ls). */
int rn_sqlite_source(const char *path, const char *table, const rn_schema *ls, const char *rel,
                     rn_lookup_fetch *fetch, void **ctx, rn_free_fn *free_ctx, rn_err *e);

#endif
