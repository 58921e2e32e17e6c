/* state.h — the pipeline the push and ndjson fuzz targets write into: a
 * temporary state declared by fuzz/state.c's Lua script with every column
 * type, keyed, composite-keyed and keyless tables, a stream, and a join,
 * aggregates, CDC relations and sinks downstream. */
#ifndef RN_FUZZ_STATE_H
#define RN_FUZZ_STATE_H

#include "runnel.h"

/* The relations a change may go to, in the order fuzz inputs number them. */
#define FUZZ_NRELS 6
extern const char *const fuzz_rel_names[FUZZ_NRELS];

/* Opens a fresh temporary pipeline and declares everything; aborts if that
 * fails (the declarations are fixed, so that is a bug). Close it with
 * fuzz_state_close. */
rn_pipeline *fuzz_state_open(void);
void fuzz_state_close(rn_pipeline *p);

/* Checks what every failing call must leave: an RN_E… code and a
 * message. Aborts otherwise. */
void fuzz_check_failure(rn_pipeline *p, int rc, const char *what);

#endif
