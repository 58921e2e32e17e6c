/* runnel.h — the one public header of runnel's C core.
 *
 * The model
 * ---------
 * A pipeline owns one LMDB environment (a directory). Relations — tables,
 * streams and the relations derived from them — are declared in it; every
 * row of a relation has a stable positive 64-bit id. Changes are applied in
 * groups: rn_begin() opens one LMDB write transaction, rn_commit() runs the
 * group's changes into the sinks and commits it under the next sequence
 * number (1, 2, 3 …, persisted). A change made with no group open is a
 * group of its own.
 *
 * Rules of use
 * ------------
 * - One pipeline, one thread: runnel never starts threads and no call may
 *   run concurrently with another on the same pipeline. Two pipelines in one
 *   process are independent.
 * - A function returns 0 or a negative RN_E… code. After a failure,
 *   rn_errmsg() holds the detailed message until the next call. If the
 *   failure happened inside a group, the whole group has been rolled back:
 *   no group is left open and nothing of it is stored.
 * - Strings returned by runnel are owned by runnel; the comment on each
 *   function says how long they stay valid.
 */
#ifndef RUNNEL_H
#define RUNNEL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define RN_API __attribute__((visibility("default")))
#else
#define RN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: their own negative range, named by rn_strerror(). */
#define RN_OK        0
#define RN_EINVAL   (-30001) /* bad input: wrong type, unknown column, null key */
#define RN_EEXIST   (-30002) /* insert of a key that is already present */
#define RN_ENOTFOUND (-30003) /* update/delete of an absent row */
#define RN_ESCHEMA  (-30004) /* declaration disagrees with the stored state */
#define RN_EMISUSE  (-30005) /* call out of order: no group open, closed … */
#define RN_ECALLBACK (-30006) /* a user callback (filter, map, sink) failed */
#define RN_ESTORE   (-30007) /* LMDB failed */
#define RN_EFULL    (-30008) /* the disk or the map is full */
#define RN_ENOMEM   (-30009) /* out of memory */
#define RN_EIO      (-30010) /* a file could not be read or written */

typedef struct rn_pipeline rn_pipeline;
typedef struct rn_rel rn_rel;

/* The code's name and a sentence; static, never NULL. */
RN_API const char *rn_strerror(int code);

/* Options of rn_pipeline_open. Zero-initialise, then set what you need. */
typedef struct rn_open_opts {
  const char *path;   /* state directory; NULL: a temporary one removed at close */
  int nosync;         /* 1: commits are not flushed (MDB_NOSYNC) */
  size_t map_size;    /* initial LMDB map size in bytes; 0: 64 MiB. It grows by itself */
  int writemap;       /* 1: MDB_WRITEMAP. Faster writes, but with nosync an OS crash
                         may damage the state rather than only lose its last groups */
} rn_open_opts;

/* Opens (creating if needed) a pipeline. On failure returns a negative code
 * and, if errbuf is not NULL, writes the message there. Destructor:
 * rn_pipeline_close. */
RN_API int rn_pipeline_open(const rn_open_opts *opts, rn_pipeline **out,
                            char *errbuf, size_t errlen);

/* Rolls back an open group, frees every relation and callback context, closes
 * LMDB and removes a temporary directory. Accepts NULL. */
RN_API void rn_pipeline_close(rn_pipeline *p);

/* The last error's message; owned by the pipeline, valid until the next call
 * on it. Never NULL (empty when there was none). */
RN_API const char *rn_errmsg(const rn_pipeline *p);

RN_API int rn_begin(rn_pipeline *p);
RN_API int rn_commit(rn_pipeline *p);
/* Throws the open group away. RN_EMISUSE from inside a callback. */
RN_API int rn_rollback(rn_pipeline *p);

/* With nosync, several groups may share one LMDB transaction; rn_flush
 * commits the groups carried so far (so other processes see them). A no-op
 * otherwise, and inside a group. Close flushes too. */
RN_API int rn_flush(rn_pipeline *p);

/* Sequence number of the last committed group; 0 before the first. */
RN_API uint64_t rn_seq(const rn_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif
