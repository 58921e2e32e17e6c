/* envs.h — the LMDB environments this process holds on states, one per
 * state. LMDB's locks on lock.mdb belong to the process, not to an
 * environment: a second environment on a state takes the lock file for
 * unused and resets the reader table under the first (its readers no
 * longer hold their pages), and closing either drops the locks of both, so
 * another process's open resets the table again while this one reads or
 * writes. Every environment runnel opens on a state comes from here:
 *   - the writer's (rn_store_open) is registered as the state's writer,
 *     with its thread. In that thread readers read through its pipeline
 *     (an attach borrows it) or, for one call between pipeline calls
 *     (inspect, verify, copy), through an environment without the lock
 *     file (MDB_NOLOCK), which touches no lock and reads what the writer
 *     committed. Other threads are refused (RN_EMISUSE): the pipeline is
 *     its thread's (runnel.h), LMDB forbids opening databases in two
 *     transactions at once, and a map the writer grows is remapped under
 *     any read in flight;
 *   - readers without a writer in the process share one environment,
 *     counted, closed with the last of them; its map is as large as the
 *     address space allows (up to 1 TiB), so a writer elsewhere that
 *     grows the file never leaves it behind (LMDB's MDB_MAP_RESIZED, which
 *     only a process with no read transaction open could answer);
 *   - a writer is refused while readers share such an environment: it
 *     would be a second one. */
#ifndef RN_ENVS_H
#define RN_ENVS_H

#include <lmdb.h>
#include <sys/types.h>

#include "error.h"

/* Registers writer (an opaque pointer: a pipeline's rn_store, rn_attach
 * finds the pipeline from it) as the state at dir's writer in this process
 * and thread, before its environment opens. RN_EMISUSE ("state dir is open
 * for reading in this process …") while readers share an environment on
 * it; RN_EIO when dir cannot be looked at. */
int rn_envs_claim(const char *dir, void *writer, rn_err *e);
/* The writer's environment is open on env: the state's data.mdb joins its
 * key (envs.c), so files made in its directory after these were removed
 * are another state. */
void rn_envs_writer_opened(void *writer, MDB_env *env);
/* Before the writer's environment closes: when reads beside it are in
 * flight (rn_envs_read; an rn_inspect callback closed the pipeline), takes
 * env and the writer.lock descriptor lock_fd (true) and keeps them, with
 * the read transactions that hold those reads' snapshots, until the last
 * of the reads ends: the caller neither closes them nor unclaims. Until
 * then the state cannot be opened in the process (RN_EMISUSE, from
 * rn_envs_closing, rn_envs_claim and rn_envs_acquire), nor for writing in
 * another (the lock). false: none, close as usual. */
#include <stdbool.h>
bool rn_envs_writer_closing(void *writer, MDB_env *env, int lock_fd);
/* RN_EMISUSE while the state at dir is kept so (above); else 0. */
int rn_envs_closing(const char *dir, rn_err *e);
/* Ends what rn_envs_claim registered (the environment is closed). */
void rn_envs_unclaim(void *writer);
/* The writer of the state at dir in this thread (*writer), or none (NULL);
 * RN_EMISUSE when another thread of the process writes it. */
int rn_envs_writer(const char *dir, void **writer, rn_err *e);
/* 0 when this thread is writer's (registered by rn_envs_claim), else
 * RN_EMISUSE as rn_envs_writer says it: a read through the writer's
 * environment (an attach that borrows it) checks this each time, since a
 * lua_State, and the attaches it holds, may be driven from several threads. */
int rn_envs_writer_here(void *writer, const char *dir, rn_err *e);

/* A read-only environment on the state at dir for a reader in a process
 * that does not write it, shared with the process's other such readers;
 * RN_EMISUSE if the process writes it (read through the pipeline, in its
 * thread). The file is checked first (rn_store_check_file). Release with
 * rn_envs_release. */
int rn_envs_acquire(const char *dir, MDB_env **env, rn_err *e);
void rn_envs_release(MDB_env *env);
/* Readers sharing an environment on the state at dir (0: none, or a writer). */
int rn_envs_readers(const char *dir);

/* An environment to read the state at dir within one call: the shared one
 * above, or, when this thread writes the state, one without the lock file
 * (MDB_NOLOCK), whose snapshot a read transaction on the writer's
 * environment holds (groups the pipeline commits meanwhile, from an
 * rn_inspect callback, leave its pages); RN_EMISUSE when another thread
 * writes it. End with rn_envs_read_done. */
int rn_envs_read(const char *dir, MDB_env **env, rn_err *e);
void rn_envs_read_done(MDB_env *env);

/* Around a read transaction that opens databases (mdb_dbi_open), from its
 * begin to its commit or abort: LMDB forbids two such transactions at once
 * on one environment (the second takes the handle slot the first is
 * filling, and a handle then reads another database), and threads share
 * the readers' environment. Recursive: an rn_inspect callback may attach. */
void rn_envs_dbis_lock(void);
void rn_envs_dbis_unlock(void);

/* This process's id, as getpid() says it, for the checks on every call
 * that a handle is used in the process that opened it (a forked child may
 * not use its parent's LMDB): a load, not a system call (glibc no longer
 * caches getpid); a fork handler keeps it right in the child. */
pid_t rn_envs_self(void);

#endif
