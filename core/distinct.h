/* distinct.h — rel:distinct() (the rules and the state: distinct.c). */
#ifndef RN_DISTINCT_H
#define RN_DISTINCT_H

#include "pipeline.h"

/* Declares name, the distinct rows of in (table-like), keyless, with in's
 * columns; its state is built from in's rows when new or stale. */
int rn_declare_distinct(rn_pipeline *p, const char *name, rn_rel *in, rn_rel **out);

#endif
