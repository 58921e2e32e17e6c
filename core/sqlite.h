/* sqlite.h — SQLite sinks (sqlite.c). */
#ifndef RN_SQLITE_H
#define RN_SQLITE_H

#include "pipeline.h"

/* Keeps rel in table of the SQLite database at path (created if absent). */
int rn_sqlite_sink(rn_pipeline *p, rn_rel *rel, const char *path, const char *table);

#endif
