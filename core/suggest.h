/* suggest.h — "did you mean": what an error about an unknown name can add
 * (the nearest column, the relations there are). */
#ifndef RN_SUGGEST_H
#define RN_SUGGEST_H

#include <stddef.h>

#include "pipeline.h"
#include "schema.h"

/* The column of s nearest to name: the same name in another case, else
 * one at an edit distance of at most a third of its length (at least 1)
 * that does not replace the whole name; NULL when none is that near. */
const char *rn_suggest_column(const rn_schema *s, const char *name, size_t len);

/* Appends " (did you mean \"col\"?)" to msg (a NUL-terminated buffer of
 * cap bytes) when a column of s is near name; cuts rather than overflows. */
void rn_suggest_append_column(char *msg, size_t cap, const rn_schema *s, const char *name, size_t len);

/* Appends " (known: a, b, c)" to msg: the relations that take changes
 * (tables and streams), in declaration order; "(none declared)" if none. */
void rn_suggest_append_relations(char *msg, size_t cap, const rn_pipeline *p);

#endif
