/* copy.c — rn_state_copy: a consistent, compacted copy of a state, taken
 * from one LMDB read transaction while its writer keeps running (the
 * writer is never blocked). The copy holds everything the state holds: its
 * relations, its outbox and marks, its JetStream positions and its id, so
 * a partition restored from it elsewhere resumes where the copy was
 * taken, exactly once (its sources re-read from the positions in it). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "envs.h"
#include "store.h"

static int copy_fail(char *errbuf, size_t errlen, int code, const char *fmt, const char *a, const char *b)
{
  if (errbuf && errlen) snprintf(errbuf, errlen, fmt, a, b);
  return code;
}

RN_API int rn_state_copy(const char *path, const char *dest, char *errbuf, size_t errlen)
{
  if (!path || !dest) return copy_fail(errbuf, errlen, RN_EINVAL, "rn_state_copy: %s%s is NULL", path ? "dest" : "path", "");
  char data[4096];
  struct stat st;
  snprintf(data, sizeof data, "%s/data.mdb", path);
  if (stat(data, &st) != 0) return copy_fail(errbuf, errlen, RN_EIO, "%s: not a runnel state (no data.mdb)%s", path, "");
  snprintf(data, sizeof data, "%s/data.mdb", dest);
  if (stat(data, &st) == 0) return copy_fail(errbuf, errlen, RN_EMISUSE, "%s: holds a state already (%s)", dest, data);
  if (mkdir(dest, 0755) != 0 && errno != EEXIST)
    return copy_fail(errbuf, errlen, RN_EIO, "%s: %s", dest, strerror(errno));
  rn_err e;
  rn_err_clear(&e);
  MDB_env *env = NULL;
  if (rn_envs_read(path, &env, &e)) return copy_fail(errbuf, errlen, e.code, "%s%s", e.msg, "");
  int rc = mdb_env_copy2(env, dest, MDB_CP_COMPACT); /* one read transaction */
  rn_envs_read_done(env);
  if (rc) return copy_fail(errbuf, errlen, rn_store_read_code(rc), "copying %s: %s", path, mdb_strerror(rc));
  return 0;
}
