/* store.c — the LMDB environment: open, transactions, map growth. */
#include "store.h"
#include "envs.h"
#include "rowcache.h"
#include "wb.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define RN_MAP_INITIAL ((size_t)64 << 20)
#define RN_MAP_MIN ((size_t)1 << 20)    /* below this the first declarations fill the map */
#define RN_MAP_MAX (SIZE_MAX / 2)        /* the map doubles as it grows (rn_store_grow) */
#define RN_FULL_SLACK ((uint64_t)1 << 20) /* less free than this after a short write: the disk is full */
#define RN_MAX_DBS 4096 /* RN_STORE_MAX_DBI follows it */

const char *rn_store_strerror(int rc)
{
  if (rc == MDB_READERS_FULL) /* each read open between calls holds a slot until closed */
    return "MDB_READERS_FULL: Environment maxreaders limit reached: too many reads open at once (LMDB has 126 "
           "reader slots a state unless opened with max_readers, shared by its processes): close the cursors, rows() "
           "iterations and attachments left open";
  if (rc == MDB_MAP_RESIZED) /* adopt_map could not take the new size */
    return "MDB_MAP_RESIZED: the state grew past the map this process's readers have, and it could not be taken "
           "again: a read of it is still open in this process, or the address space has no room for the larger "
           "one (ulimit -v): end the reads still open (an rn_inspect callback, a cursor) and read again; if it "
           "says so again, close every attachment of this state in this process (its map is then made anew)";
  return mdb_strerror(rc);
}

int rn_store_fail(rn_err *e, int rc, const char *what)
{
  int code = RN_ESTORE;
  if (rc == MDB_MAP_FULL || rc == ENOSPC) code = RN_EFULL;
  else if (rc == ENOMEM) code = RN_ENOMEM;
  else if (rc == EIO || rc == EACCES || rc == ENOENT || rc == EROFS) code = RN_EIO;
  rn_err_set(e, code, "%s: %s", what, rn_store_strerror(rc));
  e->cause = rc;
  return code;
}

int rn_store_read_code(int rc)
{
  return rc == ENOMEM ? RN_ENOMEM : RN_EIO;
}

int rn_store_write_code(int rc, uint64_t free_bytes)
{
  if (rc == ENOSPC || rc == EDQUOT || rc == EFBIG) return RN_EFULL;
  if (rc == EIO) return free_bytes < RN_FULL_SLACK ? RN_EFULL : RN_EIO;
  return 0;
}

/* Bytes an unprivileged writer may still use on the filesystem of path
 * (root may use the reserved blocks too); UINT64_MAX when unknown. */
static uint64_t free_bytes_at(const char *path)
{
  struct statvfs vfs;
  if (!path || statvfs(path, &vfs) != 0) return UINT64_MAX;
  return (uint64_t)(geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail) * vfs.f_frsize;
}

/* LMDB turns a short write (the usual face of a full disk) into EIO, so
 * the filesystem's free space decides. */
int rn_store_write_fail(rn_store *s, rn_err *e, int rc, const char *what)
{
  int code = rn_store_write_code(rc, free_bytes_at(s->path));
  if (!code) return rn_store_fail(e, rc, what);
  rn_err_set(e, code, "disk full or I/O error writing the state at %s (%s: %s)", s->path, what, rn_store_strerror(rc));
  e->cause = rc;
  return code;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
  (void)sb; (void)flag; (void)ftw;
  return remove(path);
}

/* One writer per state (DESIGN 13): an exclusive flock on
 * <path>/writer.lock, which holds the writer's pid for the next one's error.
 * The kernel drops it when the process ends, however it ends (kill -9
 * included); a flock belongs to its open file, so a second open in the same
 * process is refused too. Readers (attach, inspect) never take it. */
static long lock_holder(int fd)
{
  char buf[32] = { 0 };
  return pread(fd, buf, sizeof buf - 1, 0) > 0 ? strtol(buf, NULL, 10) : 0;
}

/* The writer.lock descriptors this process holds its flocks by. A forked
 * child gets copies of them, which kept each flock after the parent's
 * close (a flock belongs to the open file, shared by the copies): the
 * parent's next open of the state, and any other process's while the
 * child lived, were refused. So the parent's close unlocks (LOCK_UN ends
 * the lock for every copy) before it closes, and the child closes its
 * copies as it starts (pthread_atfork), so that a parent that exits
 * without closing leaves no lock behind either; a child's rn_store_close
 * then leaves lock_fd alone (its number may be reused). */
static pthread_mutex_t lock_fds_mu = PTHREAD_MUTEX_INITIALIZER;
static int *lock_fds;
static size_t nlock_fds, lock_fds_room;
static pthread_once_t lock_fds_once = PTHREAD_ONCE_INIT;

static void lock_fds_prepare(void) { pthread_mutex_lock(&lock_fds_mu); }
static void lock_fds_parent(void) { pthread_mutex_unlock(&lock_fds_mu); }
static void lock_fds_child(void)
{
  for (size_t i = 0; i < nlock_fds; i++) close(lock_fds[i]);
  nlock_fds = 0;
  pthread_mutex_unlock(&lock_fds_mu);
}
static void lock_fds_watch(void) { pthread_atfork(lock_fds_prepare, lock_fds_parent, lock_fds_child); }

/* Frees the list once it is empty (lock_fds_mu held): Lua unloads this
 * library at lua_close, and a static pointer then reaches nothing. */
static void lock_fds_shrink(void)
{
  if (nlock_fds) return;
  free(lock_fds);
  lock_fds = NULL;
  lock_fds_room = 0;
}

/* Unlocks and closes fd, a descriptor of writer.lock, forgetting it. */
static void lock_fd_close(int fd)
{
  flock(fd, LOCK_UN); /* a forked child's copy may still be open */
  pthread_mutex_lock(&lock_fds_mu);
  for (size_t i = 0; i < nlock_fds; i++)
    if (lock_fds[i] == fd) {
      lock_fds[i] = lock_fds[--nlock_fds];
      break;
    }
  lock_fds_shrink();
  close(fd);
  pthread_mutex_unlock(&lock_fds_mu);
}

void rn_store_unlock_writer(int fd) { lock_fd_close(fd); }

static int lock_writer_locked(rn_store *s, rn_err *e)
{
  if (nlock_fds == lock_fds_room) {
    size_t room = lock_fds_room ? 2 * lock_fds_room : 8;
    int *more = realloc(lock_fds, room * sizeof *more);
    if (!more) return rn_err_set(e, RN_ENOMEM, "out of memory");
    lock_fds = more;
    lock_fds_room = room;
  }
  char lockpath[strlen(s->path) + sizeof "/writer.lock"];
  snprintf(lockpath, sizeof lockpath, "%s/writer.lock", s->path);
  int fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return rn_err_set(e, RN_EIO, "cannot open %s: %s", lockpath, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int why = errno;
    long pid = lock_holder(fd);
    close(fd);
    if (why != EWOULDBLOCK) return rn_err_set(e, RN_EIO, "cannot lock %s: %s", lockpath, strerror(why));
    if (pid == (long)getpid())
      return rn_err_set(e, RN_EMISUSE, "state %s is already open for writing in this process "
                        "(close it first; runnel.attach reads it)", s->path);
    if (pid > 0) return rn_err_set(e, RN_EMISUSE, "state %s is open for writing by process %ld", s->path, pid);
    return rn_err_set(e, RN_EMISUSE, "state %s is open for writing by another process", s->path);
  }
  char pid[24];
  int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) { /* the lock holds without its note */ }
  s->lock_fd = fd;
  lock_fds[nlock_fds++] = fd;
  return 0;
}

static int lock_writer(rn_store *s, rn_err *e)
{
  pthread_once(&lock_fds_once, lock_fds_watch);
  pthread_mutex_lock(&lock_fds_mu); /* no fork between the open and the descriptor's registration */
  int rc = lock_writer_locked(s, e);
  if (rc) lock_fds_shrink(); /* grown for a lock then refused */
  pthread_mutex_unlock(&lock_fds_mu);
  return rc;
}

/* A reader's environment maps what its open could (envs.c: up to 1 TiB of
 * address space, or under a limit on it only the map its data.mdb then
 * recorded). When the writer, in another process, grows the state past
 * that, LMDB refuses every read transaction (MDB_MAP_RESIZED) until the
 * environment maps the new size. LMDB unmaps the old map to do so, which a
 * read transaction of this process, or a begin in another thread (it
 * reads the meta pages through the map), may be using: read transactions
 * begin under begin_lock's read side, and the map is taken again under
 * its write side, only while no read transaction of this process is live
 * in the environment's reader table. */
static pthread_rwlock_t begin_lock = PTHREAD_RWLOCK_INITIALIZER;

/* An environment whose map adopt_map lost (its userctx): LMDB unmaps the
 * old map before it maps the new one, and when that fails (another thread
 * took the address space meanwhile) leaves the environment with no map
 * and its meta pointers into the old one. No read begins on it again: the
 * attachments' last close drops it and the next read opens it anew. */
static char unmapped;

void rn_store_reads_hold(void) { pthread_rwlock_rdlock(&begin_lock); }
void rn_store_reads_release(void) { pthread_rwlock_unlock(&begin_lock); }

/* mdb_reader_list's lines, "%10d %zx %s\n" (pid, thread, txnid or "-"):
 * counts this process's slots whose transaction is live. */
static int own_live_slot(const char *msg, void *ctx)
{
  long pid;
  size_t thread;
  char txnid[32];
  if (sscanf(msg, "%ld %zx %31s", &pid, &thread, txnid) == 3 && pid == (long)getpid() && strcmp(txnid, "-") != 0)
    ++*(int *)ctx;
  return 0;
}

/* env maps the size the state's newest meta page records (0: done). The
 * new size is first reserved as bare address space and let go: LMDB's
 * remap, once it has unmapped the old map, then finds room for the new
 * one (else it would leave the environment without a map). */
static int adopt_map(MDB_env *env)
{
  unsigned flags;
  const char *dir;
  MDB_envinfo info;
  MDB_stat st;
  if (mdb_env_get_flags(env, &flags) || !(flags & MDB_RDONLY) || (flags & MDB_NOLOCK) || mdb_env_get_path(env, &dir) ||
      mdb_env_get_userctx(env) == &unmapped)
    return MDB_MAP_RESIZED; /* a writer's own, or open_beside's (its reads are in no table): not taken again here */
  pthread_rwlock_wrlock(&begin_lock);
  int live = 0, rc = MDB_MAP_RESIZED;
  mdb_reader_list(env, own_live_slot, &live);
  mdb_env_info(env, &info);
  mdb_env_stat(env, &st);
  size_t want = (size_t)rn_store_file_map(dir), least = (info.me_last_pgno + 1) * (size_t)st.ms_psize;
  if (want < least) want = least;
  void *room = live || want <= info.me_mapsize ? MAP_FAILED
             : mmap(NULL, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (room != MAP_FAILED) {
    munmap(room, want);
    rc = mdb_env_set_mapsize(env, want);
    if (rc) { /* no map now: never read again (unmapped) */
      mdb_env_set_userctx(env, &unmapped);
      rc = MDB_MAP_RESIZED;
    }
  }
  pthread_rwlock_unlock(&begin_lock);
  return rc;
}

int rn_store_txn(MDB_env *env, unsigned flags, MDB_txn **txn)
{
  bool read_only = flags & MDB_RDONLY;
  if (read_only && mdb_env_get_userctx(env) == &unmapped) {
    *txn = NULL;
    return MDB_MAP_RESIZED;
  }
  if (read_only) pthread_rwlock_rdlock(&begin_lock);
  int rc = mdb_txn_begin(env, NULL, flags, txn);
  if (rc == MDB_READERS_FULL) {
    int dead;
    mdb_reader_check(env, &dead);
    rc = mdb_txn_begin(env, NULL, flags, txn);
  }
  if (read_only) pthread_rwlock_unlock(&begin_lock);
  if (rc == MDB_MAP_RESIZED && read_only && adopt_map(env) == 0) { /* the writer grew the state past our map */
    pthread_rwlock_rdlock(&begin_lock);
    rc = mdb_txn_begin(env, NULL, flags, txn);
    pthread_rwlock_unlock(&begin_lock);
  }
  if (rc) *txn = NULL;
  return rc;
}

int rn_store_no_catalogue(MDB_txn *txn, const char *path, rn_err *e)
{
  MDB_dbi main_dbi;
  MDB_stat st;
  if (mdb_dbi_open(txn, NULL, 0, &main_dbi) == 0 && mdb_stat(txn, main_dbi, &st) == 0 && st.ms_entries == 0)
    return rn_err_set(e, RN_EIO, "%s: empty state (no group was ever committed)", path);
  return rn_err_set(e, RN_EIO, "%s: not a runnel state (no catalogue): another program's LMDB environment", path);
}

/* Opens (creating if the environment is new) the catalogue "meta". An
 * environment with databases but no catalogue is another program's. */
static int open_catalogue(rn_store *s, rn_err *e)
{
  MDB_txn *txn;
  MDB_dbi main_dbi;
  MDB_stat st;
  int rc = rn_store_txn(s->env, 0, &txn);
  if (rc) return rn_store_fail(e, rc, s->path);
  rc = mdb_dbi_open(txn, RN_DB_META, 0, &s->meta);
  if (rc == MDB_NOTFOUND && mdb_dbi_open(txn, NULL, 0, &main_dbi) == 0 &&
      mdb_stat(txn, main_dbi, &st) == 0 && st.ms_entries > 0) {
    rn_store_no_catalogue(txn, s->path, e);
    mdb_txn_abort(txn);
    return e->code;
  }
  if (rc == MDB_NOTFOUND) rc = mdb_dbi_open(txn, RN_DB_META, MDB_CREATE, &s->meta);
  if (rc) {
    mdb_txn_abort(txn);
    return rn_store_fail(e, rc, s->path);
  }
  rc = mdb_txn_commit(txn);
  return rc ? rn_store_write_fail(s, e, rc, "creating the catalogue") : 0;
}

int rn_store_foreign_entry(const char *dir, char *what, size_t len)
{
  DIR *d = opendir(dir);
  if (!d) return -errno;
  char first[256] = "";
  size_t others = 0;
  for (struct dirent *de; (de = readdir(d));) {
    const char *n = de->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "writer.lock") || !strcmp(n, "lock.mdb") ||
        !strcmp(n, "data.mdb") || !strncmp(n, "data.mdb.copy-", sizeof "data.mdb.copy-" - 1) ||
        !strcmp(n, "lost+found")) /* a volume of the state's own: the file system's, not the user's */
      continue;
    if (!*first) snprintf(first, sizeof first, "%s", n);
    else {
      others++;
      if (strcmp(n, first) < 0) snprintf(first, sizeof first, "%s", n); /* the same name whatever readdir's order */
    }
  }
  closedir(d);
  if (!*first) return 0;
  if (others) snprintf(what, len, "%s and %zu more entr%s", first, others, others == 1 ? "y" : "ies");
  else snprintf(what, len, "%s", first);
  return 1;
}

/* A directory that existed before this open and holds no data.mdb becomes
 * a new state only while it is empty: one holding the user's files (a
 * project, notes) is refused rather than given LMDB's files among them. */
static int refuse_foreign_dir(const char *path, rn_err *e)
{
  char data[strlen(path) + sizeof "/data.mdb"];
  struct stat st;
  snprintf(data, sizeof data, "%s/data.mdb", path);
  if (lstat(data, &st) == 0 || errno != ENOENT) return 0; /* a state, or LMDB says why not */
  char what[320];
  int rc = rn_store_foreign_entry(path, what, sizeof what);
  if (rc == -ENOMEM) return rn_err_set(e, RN_ENOMEM, "out of memory");
  if (rc < 0) return rn_err_set(e, RN_EIO, "cannot open state %s: cannot list the directory to see it is empty: %s",
                                path, strerror(-rc));
  if (!rc) return 0;
  return rn_err_set(e, RN_EIO, "cannot open state %s: the directory holds %s and no runnel state (a state is a "
                    "directory, new or empty at first)", path, what);
}

static int make_dir(rn_store *s, const char *path, rn_err *e)
{
  if (path) {
    struct stat st;
    bool made = mkdir(path, 0755) == 0;
    if (!made && errno != EEXIST)
      return rn_err_set(e, RN_EIO, "cannot create state directory %s: %s", path, strerror(errno));
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) /* else writer.lock's open says "Not a directory" */
      return rn_err_set(e, RN_EIO, "cannot open state %s: %s (a state is a directory, new or empty at first)", path,
                        S_ISREG(st.st_mode) ? "it is a file, not a state directory" : "it is not a directory");
    char to[4096];
    ssize_t n;
    if (!made && stat(path, &st) != 0 && errno == ENOENT && (n = readlink(path, to, sizeof to - 1)) >= 0) {
      to[n] = '\0'; /* mkdir found the name taken, by a link leading nowhere */
      return rn_err_set(e, RN_EIO, "cannot open state %s: it is a symbolic link to %s, which does not exist (a state "
                        "is a directory, new or empty at first)", path, to);
    }
    if (!made && refuse_foreign_dir(path, e)) return e->code;
    s->path = strdup(path);
  } else {
    const char *tmp = getenv("TMPDIR");
    char templ[4096];
    snprintf(templ, sizeof templ, "%s/runnel-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(templ))
      return rn_err_set(e, RN_EIO, "cannot create a temporary state directory: %s", strerror(errno));
    s->path = strdup(templ);
    s->temp = true;
  }
  return s->path ? 0 : rn_err_set(e, RN_ENOMEM, "out of memory");
}

/* The map_size option's refusal when LMDB could not map (or, with
 * writemap, size the file to) what it asked for: the option named, as the
 * host wrote it, rather than only LMDB's errno. 0 when rc is not such a
 * failure or the size was not the host's. */
static int map_size_refused(rn_err *e, int rc, size_t mapsize)
{
  if (!mapsize || (rc != ENOMEM && rc != EINVAL && rc != EFBIG && rc != EOVERFLOW)) return 0;
  int code = rn_store_fail(e, rc, "open"); /* the code any failure of LMDB's open gets */
  rn_err_set(e, code, "open: map_size %zu: LMDB could not map that many bytes (%s): give a smaller one (0: 64 MiB; "
             "the map grows by itself)", mapsize, rn_store_strerror(rc));
  e->cause = rc;
  return code;
}

void rn_store_keep_std_fds(void)
{
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int got = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (got >= 0 && got != fd) close(got); /* another thread took fd meanwhile: that one is its own */
  }
}

/* mdb_env_open on s->path. A new state's first open that fails before
 * LMDB wrote its meta pages leaves no empty data.mdb behind:
 * rn_store_check_file calls one damaged. */
static int open_env(rn_store *s, unsigned flags)
{
  char data[strlen(s->path) + sizeof "/data.mdb"];
  struct stat st;
  snprintf(data, sizeof data, "%s/data.mdb", s->path);
  bool fresh = stat(data, &st) != 0 && errno == ENOENT;
  int rc = mdb_env_open(s->env, s->path, flags, 0644);
  if (rc && fresh && stat(data, &st) == 0 && st.st_size == 0) unlink(data);
  return rc;
}

int rn_store_open(rn_store *s, const char *path, bool nosync, bool writemap, size_t mapsize, unsigned max_readers,
                  rn_err *e)
{
  memset(s, 0, sizeof *s);
  s->lock_fd = -1;
  s->pid = rn_envs_self();
  rn_store_keep_std_fds(); /* before writer.lock, lock.mdb and data.mdb are opened */
  if (mapsize > RN_MAP_MAX) /* before anything is made: a size LMDB's rounding and the doubling would overflow */
    return rn_err_set(e, RN_EINVAL, "open: map_size %zu is too large: at most %zu bytes (0: 64 MiB; the map grows "
                      "by itself)", mapsize, RN_MAP_MAX);
  int rc = make_dir(s, path, e);
  if (!rc) rc = rn_envs_closing(s->path, e); /* before the lock, which it still holds */
  if (!rc) rc = lock_writer(s, e);
  if (!rc) rc = rn_envs_claim(s->path, s, e); /* the process's one environment on it (envs.h) */
  if (!rc) rc = rn_store_check_file(s->path, false, e);
  if (rc) {
    rn_store_close(s);
    return rc;
  }
  s->written = calloc(RN_STORE_MAX_DBI, sizeof *s->written);
  if (!s->written) {
    rn_err_set(e, RN_ENOMEM, "out of memory");
    rn_store_close(s);
    return e->code;
  }
  rc = mdb_env_create(&s->env);
  if (rc) goto fail;
  mdb_env_set_maxdbs(s->env, RN_MAX_DBS);
  if (max_readers) mdb_env_set_maxreaders(s->env, max_readers); /* used when the lock file is made */
  /* Keep the map the file already has if it is larger than our start. */
  s->mapsize = mapsize ? mapsize : RN_MAP_INITIAL;
  if (s->mapsize < RN_MAP_MIN) s->mapsize = RN_MAP_MIN;
  mdb_env_set_mapsize(s->env, s->mapsize);
  unsigned flags = MDB_NOTLS | (nosync ? MDB_NOSYNC : 0) | (writemap ? MDB_WRITEMAP : 0);
  rc = open_env(s, flags);
  if (rc && map_size_refused(e, rc, mapsize)) {
    rn_store_close(s);
    return e->code;
  }
  if (rc) goto fail;
  rn_envs_writer_opened(s, s->env);
  int dead;
  mdb_reader_check(s->env, &dead); /* slots of killed processes would lock writers out */
  MDB_envinfo info;
  mdb_env_info(s->env, &info);
  s->mapsize = info.me_mapsize;
  s->readers_checked = info.me_last_pgno;
  if (open_catalogue(s, e)) {
    rn_store_close(s);
    return e->code;
  }
  return 0;
fail:
  rn_store_fail(e, rc, s->path);
  rn_store_close(s);
  return e->code;
}

int rn_store_forked(const rn_store *s, rn_err *e)
{
  if (s->unmapped)
    return rn_err_set(e, RN_ESTORE, "state %s: its map could not be mapped again after growing; close the pipeline "
                      "and open it again", s->path ? s->path : "(closed)");
  if (s->pid == rn_envs_self()) return 0;
  return rn_err_set(e, RN_EMISUSE, "state %s was opened by process %ld before a fork; open it again in this process",
                    s->path ? s->path : "(closed)", (long)s->pid);
}

void rn_store_remove_temp(rn_store *s)
{
  if (s->temp && s->path && s->pid == rn_envs_self()) nftw(s->path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  s->temp = false;
}

/* In a forked child (rn_store_forked) the transactions are the parent's:
 * aborting a read transaction would clear the parent's reader slot in
 * lock.mdb (a writer elsewhere may then reuse the pages it reads), and a
 * write transaction's pages are its own. mdb_env_close touches only the
 * reader slots of the calling process (none in the child), and closing the
 * inherited descriptors releases none of the parent's locks (fcntl locks
 * are the parent's; the writer.lock flock stays with the parent's open
 * file). */
/* The parent's transactions (or, with its write transaction open, the
 * environment that holds it, its dirty pages and cursors) a forked
 * child's close left alone, kept reachable: their memory is the child's
 * until it exits, on purpose, and not a leak (valgrind's and LSan's check
 * of the fork tests). Best effort. */
static void **parents_kept;
static size_t nparents_kept;

static void keep_parents(void *what)
{
  if (!what) return;
  void **more = realloc(parents_kept, sizeof *more * (nparents_kept + 1));
  if (!more) return;
  parents_kept = more;
  parents_kept[nparents_kept++] = what;
}

void rn_store_keep_parents_txn(MDB_txn *txn) { keep_parents(txn); }

void rn_store_close(rn_store *s)
{
  bool child = s->pid != rn_envs_self();
  rn_wb_free(s->wb);
  rn_rowcache_free(s->rowcache);
  if (s->wtxn && !child) mdb_txn_abort(s->wtxn);
  if (s->rtxn && !child) mdb_txn_abort(s->rtxn);
  if (child) rn_store_keep_parents_txn(s->rtxn);
  bool kept = !child && s->env && rn_envs_writer_closing(s, s->env, s->lock_fd); /* reads beside it end later */
  if (child && s->wtxn) { /* the parent's write transaction: the environment's own, its pages not freed by a close */
    keep_parents(s->env);
    rn_envs_unclaim(s);
  } else if (!kept) {
    if (s->env) mdb_env_close(s->env);
    rn_envs_unclaim(s);
    if (s->lock_fd >= 0 && !child) lock_fd_close(s->lock_fd); /* after LMDB let go: the next writer may start */
  }
  if (s->temp && s->path && !child) nftw(s->path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(s->path);
  free(s->written);
  memset(s, 0, sizeof *s);
  s->lock_fd = -1;
}

int rn_store_grow(rn_store *s, rn_err *e)
{
  MDB_envinfo info;
  mdb_env_info(s->env, &info);
  if (info.me_mapsize > RN_MAP_MAX) return rn_err_set(e, RN_EFULL, "growing the map: it is %zu bytes already",
                                                      info.me_mapsize);
  size_t want = info.me_mapsize * 2;
  /* LMDB unmaps the map before mapping the larger one: when that mapping
   * fails (a limited address space: ulimit -v, RLIMIT_AS) the environment
   * is left with no map, and its next use dies of SIGSEGV; no call maps it
   * again. So the address space is asked first, for the new map beside
   * the old (stricter than LMDB needs, never less). */
  void *room = mmap(NULL, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (room == MAP_FAILED)
    return rn_err_set(e, RN_EFULL, "state %s: growing the map from %zu to %zu bytes: the process's address space "
                      "refuses it (ulimit -v?): %s", s->path, info.me_mapsize, want, strerror(errno));
  munmap(room, want);
  if (s->before_remap) s->before_remap(s->remap_ctx); /* cursors would read the old, unmapped pages */
  if (s->rtxn) { mdb_txn_abort(s->rtxn); s->rtxn = NULL; s->rtxn_live = false; }
  int rc = mdb_env_set_mapsize(s->env, want);
  if (rc && rc != EINVAL) s->unmapped = true; /* EINVAL: refused before unmapping (a transaction open) */
  if (rc) return rn_store_fail(e, rc, "growing the map");
  s->mapsize = want;
  return 0;
}

/* Doubles the map while more than half of it is used: LMDB cannot grow it
 * inside a transaction, so growth happens before each group starts (and, if
 * a group fills it all the same, group.c grows it and replays the group). */
static int grow_if_needed(rn_store *s, const MDB_envinfo *info, rn_err *e)
{
  MDB_stat st;
  mdb_env_stat(s->env, &st);
  size_t used = (info->me_last_pgno + 1) * (size_t)st.ms_psize;
  if (used * 2 < info->me_mapsize) return 0;
  int rc = rn_store_grow(s, e);
  if (rc == RN_EFULL && !s->unmapped) { /* refused (the address space): a group that fits still goes */
    rn_err_clear(e);
    return 0;
  }
  return rc;
}

/* A reader killed inside its read transaction (kill -9) leaves its slot in
 * lock.mdb naming the snapshot it read, and LMDB then reuses no page freed
 * since: for as long as this writer lives (its open clears dead slots, and
 * a full table does, but nothing else) the file would grow with every
 * commit. So whenever the file has grown since the last look, the slots of
 * dead processes are cleared before the next write transaction: a few
 * system calls (one per other reading process), only while it grows. */
static void reclaim_dead_readers(rn_store *s, const MDB_envinfo *info)
{
  if (info->me_last_pgno <= s->readers_checked) return;
  int dead;
  mdb_reader_check(s->env, &dead);
  s->readers_checked = info->me_last_pgno;
}

int rn_store_begin(rn_store *s, rn_err *e)
{
  MDB_envinfo info;
  mdb_env_info(s->env, &info);
  reclaim_dead_readers(s, &info);
  int rc = grow_if_needed(s, &info, e);
  if (rc) return rc;
  rc = rn_store_txn(s->env, 0, &s->wtxn);
  if (rc) return rn_store_fail(e, rc, "beginning a group");
  s->wb_failed = 0;
  s->txn_serial++;
  rn_rowcache_began(s->rowcache, mdb_txn_id(s->wtxn));
  return 0;
}

/* The transaction ended: no key is written in the next one yet. */
static void forget_written(rn_store *s)
{
  if (s->written) memset(s->written, 0, s->written_end * sizeof *s->written);
  s->written_end = 0;
}

/* The write-back layer's entries reach LMDB first (wb.h); a failure there
 * aborts the transaction like a failed commit. keep: the entries stay as a
 * cache (wb.h (2)). */
static int commit(rn_store *s, bool keep, rn_err *e)
{
  int rc = rn_wb_flush(s);
  if (rc) {
    rn_store_abort(s);
    return rn_store_fail(e, rc, "committing a group");
  }
  size_t txnid = mdb_txn_id(s->wtxn);
  rc = mdb_txn_commit(s->wtxn);
  s->wtxn = NULL;
  s->wtxn_dbis = false;
  s->wb_failed = 0;
  forget_written(s);
  if (rc) rn_rowcache_aborted(s->rowcache);
  else rn_rowcache_committed(s->rowcache, txnid);
  if (keep && !rc) rn_wb_committed(s->wb);
  else rn_wb_clear(s->wb);
  return rc ? rn_store_write_fail(s, e, rc, "committing a group") : 0;
}

int rn_store_commit(rn_store *s, rn_err *e) { return commit(s, false, e); }

/* LMDB reuses the pages a transaction freed only from the one after next
 * (it keeps the last one's for a reader that may not have registered yet):
 * a transaction that rewrites one catalogue entry in between lets the next
 * group's transaction reuse the pages the last one freed, so the file holds
 * the live pages and one transaction's copies, not two. Best effort: a
 * failure changes nothing. */
void rn_store_release_pages(rn_store *s)
{
  MDB_txn *txn;
  if (s->wtxn || rn_store_txn(s->env, 0, &txn)) return;
  MDB_val k = { RN_PREFIX_LEN(RN_META_SEQ), (void *)RN_META_SEQ }, v;
  char seq[16];
  if (mdb_get(txn, s->meta, &k, &v) || v.mv_size > sizeof seq) { mdb_txn_abort(txn); return; }
  memcpy(seq, v.mv_data, v.mv_size);
  v.mv_data = seq;
  if (mdb_put(txn, s->meta, &k, &v, 0)) { mdb_txn_abort(txn); return; }
  size_t txnid = mdb_txn_id(txn);
  if (mdb_txn_commit(txn)) return;
  rn_rowcache_passed(s->rowcache, txnid);
}

int rn_store_commit_keep(rn_store *s, rn_err *e) { return commit(s, true, e); }

void rn_store_abort(rn_store *s)
{
  forget_written(s);
  rn_rowcache_aborted(s->rowcache);
  rn_wb_clear(s->wb);
  if (s->wtxn) mdb_txn_abort(s->wtxn);
  s->wtxn = NULL;
  s->wtxn_dbis = false;
  s->wb_failed = 0;
}

int rn_store_dbi_open(rn_store *s, MDB_txn *txn, const char *name, unsigned flags, MDB_dbi *dbi)
{
  if (txn == s->wtxn) s->wtxn_dbis = true; /* a new handle's slot is taken now, whatever the outcome */
  return mdb_dbi_open(txn, name, flags, dbi);
}

int rn_store_reader(rn_store *s, MDB_txn **txn, rn_err *e)
{
  if (s->wtxn) { *txn = s->wtxn; return 0; }
  int rc;
  if (!s->rtxn) rc = rn_store_txn(s->env, MDB_RDONLY, &s->rtxn);
  else if (!s->rtxn_live) rc = mdb_txn_renew(s->rtxn);
  else rc = 0;
  if (rc) {
    if (s->rtxn) { mdb_txn_abort(s->rtxn); s->rtxn = NULL; }
    return rn_store_fail(e, rc, "reading");
  }
  s->rtxn_live = true;
  *txn = s->rtxn;
  return 0;
}

void rn_store_reader_done(rn_store *s)
{
  if (s->rtxn && s->rtxn_live) { mdb_txn_reset(s->rtxn); s->rtxn_live = false; }
}

/* The main database lists every named one; a relation's are "<prefix>:"
 * name (rn_state_dbi), except permanent stores' "st:", which are not
 * relations. */
uint64_t rn_store_entries(MDB_txn *txn, const char *name)
{
  uint64_t n = 0;
  size_t nlen = strlen(name);
  MDB_dbi main_dbi;
  MDB_cursor *cur;
  if (mdb_dbi_open(txn, NULL, 0, &main_dbi) || mdb_cursor_open(txn, main_dbi, &cur)) return 0;
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char *colon = memchr(k.mv_data, ':', k.mv_size);
    size_t plen = colon ? (size_t)(colon - (const char *)k.mv_data) + 1 : 0;
    if (!colon || k.mv_size - plen != nlen || memcmp(colon + 1, name, nlen) != 0 ||
        (plen == RN_PREFIX_LEN(RN_DB_STORE) && memcmp(k.mv_data, RN_DB_STORE, plen) == 0) || k.mv_size >= 4096)
      continue;
    char dbname[4096];
    memcpy(dbname, k.mv_data, k.mv_size);
    dbname[k.mv_size] = '\0';
    MDB_dbi dbi;
    MDB_stat st;
    if (mdb_dbi_open(txn, dbname, 0, &dbi) == 0 && mdb_stat(txn, dbi, &st) == 0) n += st.ms_entries;
  }
  mdb_cursor_close(cur);
  return n;
}

int rn_store_key_cmp(const MDB_val *a, const MDB_val *b)
{
  const unsigned char *x = a->mv_data, *y = b->mv_data;
  size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size, i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; i + 8 <= n; i += 8) {
    uint64_t u, v;
    memcpy(&u, x + i, 8);
    memcpy(&v, y + i, 8);
    if (u != v) return __builtin_bswap64(u) < __builtin_bswap64(v) ? -1 : 1;
  }
#endif
  for (; i < n; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return (a->mv_size > b->mv_size) - (a->mv_size < b->mv_size);
}
