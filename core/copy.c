/* copy.c — rn_state_copy: a consistent, compacted copy of a state, taken
 * from one LMDB read transaction while its writer keeps running (the
 * writer is never blocked). The copy holds everything the state holds: its
 * relations, its outbox and marks, its JetStream positions and its id, so
 * a partition restored from it elsewhere resumes where the copy was
 * taken, exactly once (its sources re-read from the positions in it).
 * The copy is written to a file of its own beside where it goes, made
 * durable, and only then named data.mdb: a copy that fails (a full disk)
 * or is killed midway leaves no state behind, nothing a later open would
 * take for one, and nothing that refuses the next copy (a killed copy
 * leaves its data.mdb.copy-PID-N, which may be removed). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envs.h"
#include "pipeline.h"
#include "store.h"

static int copy_fail(char *errbuf, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int copy_fail(char *errbuf, size_t errlen, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  if (errbuf && errlen) vsnprintf(errbuf, errlen, fmt, ap);
  va_end(ap);
  return code;
}

/* Writes env's state into dest/data.mdb as said above, recording map (the
 * state's; 0: unknown) as its map size rather than env's, which a reader's
 * is larger than (envs.h); an errno or LMDB code, and *what says which
 * step failed. */
static int copy_into(MDB_env *env, const char *dest, uint64_t map, const char **what)
{
  static atomic_uint serial; /* with the pid: a name no other copy uses, in any thread */
  char tmp[4096], final[4096];
  snprintf(tmp, sizeof tmp, "%s/data.mdb.copy-%ld-%u", dest, (long)getpid(), atomic_fetch_add(&serial, 1));
  snprintf(final, sizeof final, "%s/data.mdb", dest);
  *what = "creating the copy";
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) /* a killed copy's, whose pid this process has now */
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno == EEXIST ? EAGAIN : errno;
  *what = "copying";
  int rc = mdb_env_copyfd2(env, fd, MDB_CP_COMPACT); /* one read transaction */
  if (!rc && (rc = rn_store_file_set_map(fd, map))) *what = "writing the copy";
  if (!rc && fsync(fd) != 0) rc = errno, *what = "writing the copy to disk";
  if (close(fd) != 0 && !rc) rc = errno, *what = "writing the copy to disk";
  if (!rc && renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) != 0) { /* never over a state */
    rc = errno;
    if (rc == EINVAL) rc = access(final, F_OK) == 0 ? EEXIST : rename(tmp, final) != 0 ? errno : 0; /* no NOREPLACE here */
    *what = "naming the copy data.mdb";
  }
  if (rc) unlink(tmp);
  int dir = rc ? -1 : open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) { /* the name is durable too */
    if (fsync(dir) != 0) rc = errno, *what = "writing the copy's name to disk";
    close(dir);
  }
  return rc;
}

RN_API int rn_state_copy(const char *path, const char *dest, char *errbuf, size_t errlen)
{
  if (!path || !dest) return copy_fail(errbuf, errlen, RN_EINVAL, "rn_state_copy: %s is NULL", path ? "dest" : "path");
  if (!*path || !*dest) /* "" + "/data.mdb" is the root's */
    return copy_fail(errbuf, errlen, RN_EINVAL, "rn_state_copy: %s is empty", *path ? "the destination (dest)" : "the path");
  char data[4096];
  struct stat st;
  snprintf(data, sizeof data, "%s/data.mdb", path);
  if (stat(data, &st) != 0) return copy_fail(errbuf, errlen, RN_EIO, "%s: not a runnel state (no data.mdb)", path);
  snprintf(data, sizeof data, "%s/data.mdb", dest);
  if (stat(data, &st) == 0) return copy_fail(errbuf, errlen, RN_EMISUSE, "%s: holds a state already (%s)", dest, data);
  bool made = mkdir(dest, 0755) == 0; /* removed again if the copy fails: a failed copy leaves nothing behind */
  if (!made) {
    if (errno != EEXIST) return copy_fail(errbuf, errlen, RN_EIO, "%s: %s", dest, strerror(errno));
    /* An existing directory takes the copy only while it holds none of the
     * user's files, as rn_open makes a new state only there: not data.mdb
     * among someone's project (a killed copy's file is runnel's). */
    char what[320];
    int rc = rn_store_foreign_entry(dest, what, sizeof what);
    if (rc == -ENOTDIR) /* else "creating the copy …: Not a directory" */
      return copy_fail(errbuf, errlen, RN_EIO, "%s: it is a file, not a directory (a snapshot goes to a new or empty "
                       "directory)", dest);
    if (rc < 0) return copy_fail(errbuf, errlen, rc == -ENOMEM ? RN_ENOMEM : RN_EIO, "%s: %s", dest, strerror(-rc));
    if (rc > 0)
      return copy_fail(errbuf, errlen, RN_EMISUSE, "%s: the directory holds %s and no runnel state (a snapshot goes "
                       "to a new or empty directory)", dest, what);
  }
  rn_err e;
  rn_err_clear(&e);
  MDB_env *env = NULL;
  if (rn_flush_before_read(path, &e) || rn_envs_read(path, &env, &e)) { /* not a state (a FIFO), damaged, newer */
    if (made) rmdir(dest);
    return copy_fail(errbuf, errlen, e.code, "%s", e.msg);
  }
  MDB_txn *adopt = NULL; /* the map taken again if the writer grew it (rn_store_txn): LMDB's copy begins its own */
  const char *what = "reading";
  int rc = rn_store_txn(env, MDB_RDONLY, &adopt);
  if (!rc) {
    mdb_txn_abort(adopt);
    rn_store_reads_hold(); /* no remap while the copy's own read lives */
    rc = copy_into(env, dest, rn_store_file_map(path), &what);
    rn_store_reads_release();
  }
  rn_envs_read_done(env);
  if (rc && made) rmdir(dest); /* copy_into removed its file */
  if (rc == EEXIST) return copy_fail(errbuf, errlen, RN_EMISUSE, "%s: holds a state already (%s/data.mdb)", dest, dest);
  int code = rn_store_write_code(rc, UINT64_MAX);
  if (rc && errbuf && errlen) snprintf(errbuf, errlen, "%s %s into %s: %s", what, path, dest, rn_store_strerror(rc));
  return rc ? (code ? code : rn_store_read_code(rc)) : 0;
}
