/* store_sink.h — permanent stores and their readers (store_sink.c). */
#ifndef RN_STORE_SINK_H
#define RN_STORE_SINK_H

#include "pipeline.h"

/* Keeps rel's rows in this pipeline's LMDB state as store `name`. */
int rn_store_sink(rn_pipeline *p, rn_rel *rel, const char *name);

typedef struct rn_attached rn_attached;
/* Opens a reader of store `name` in the state at path; shared_env is an
 * MDB_env already open on that path in this process, or NULL. Destructor:
 * rn_attach_close. */
int rn_attach(const char *path, const char *name, void *shared_env, rn_attached **out, rn_err *e);
const rn_schema *rn_attach_schema(const rn_attached *a);
/* The row under an encoded key, appended to row; *found = 0 when absent.
 * One LMDB read transaction: a committed group, never part of one. */
int rn_attach_get(rn_attached *a, const char *key, size_t klen, msgpack_sbuffer *row, int *found, rn_err *e);
/* Every row, in key order, in one read transaction: one committed group's
 * state, never part of one. */
int rn_attach_rows(rn_attached *a, int (*fn)(void *ctx, const char *row, size_t len), void *ctx, rn_err *e);
void rn_attach_close(rn_attached *a);

#endif
