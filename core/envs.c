/* envs.c — one LMDB environment per state per process (envs.h says why). */
#include "envs.h"
#include "store.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A shared reader environment maps as much as it can of these: address
 * space, not memory (pages are read as they are touched), and far beyond
 * any state's file. A limit on address space (ulimit -v, valgrind) takes a
 * smaller one, down to the map the file records (0). */
static const size_t read_maps[] = { (size_t)1 << 40, (size_t)1 << 36, (size_t)1 << 33, 0 };

/* An entry is found by its directory's device and inode (every path
 * naming the state, through a link or relative, finds it) and, once its
 * environment is open, by its data.mdb's: a state whose files were removed
 * while this process held its environment, and another made in the same
 * directory (or in a new one given the removed one's inode number), is
 * another entry, never taken for the removed one (whose writer an attach
 * would borrow, whose readers' environment on deleted files it would read,
 * beside which its writer would be refused). */
typedef struct entry {
  dev_t dev;
  ino_t ino;
  bool data_known;       /* data_dev and data_ino hold the data.mdb its environment opened */
  dev_t data_dev;
  ino_t data_ino;
  pid_t pid;             /* the process that opened it: a forked child holds no lock of it */
  void *writer;          /* the state's writer (rn_envs_claim), or NULL */
  pthread_t thread;      /* the writer's thread */
  MDB_env *env;          /* the readers' shared environment, or NULL */
  int readers;           /* users of env */
  struct pinned *pins;   /* reads beside the writer (open_beside) */
  /* The writer closed while reads beside it were in flight (an rn_inspect
   * callback closed the pipeline): its environment and writer.lock
   * descriptor are kept, with the pins' read transactions, until the last
   * of those reads ends (unpin), so no writer, here or in another process,
   * reuses the pages they read. The state cannot be opened meanwhile. */
  bool closing;
  MDB_env *closed_env;
  int closed_fd;
  struct entry *next;
} entry;

/* A read beside this thread's writer: its read transaction on the
 * writer's environment (kept past the writer's close: entry.closing). */
typedef struct pinned {
  MDB_txn *txn;
  struct pinned *next;   /* in entry.pins */
} pinned;

static entry *entries;   /* states this process writes or reads */
static pthread_mutex_t entries_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t dbis_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP; /* rn_envs_dbis_lock */

/* What names a state at a path now: its directory, and its data.mdb if it has one. */
typedef struct state_id {
  struct stat dir;
  bool has_data;
  struct stat data;
} state_id;

/* -1 (errno set) when dir cannot be looked at. */
static int state_at(const char *dir, state_id *id)
{
  if (stat(dir, &id->dir) != 0) return -1;
  char data[strlen(dir) + sizeof "/data.mdb"];
  snprintf(data, sizeof data, "%s/data.mdb", dir);
  id->has_data = stat(data, &id->data) == 0;
  return 0;
}

/* Whether x is the state id names, for this process (entries a forked
 * child inherited are not its own: LMDB's locks do not pass to a child,
 * nor may it use the parent's environments). */
static bool same_state(const entry *x, const state_id *id, pid_t self)
{
  if (x->dev != id->dir.st_dev || x->ino != id->dir.st_ino || x->pid != self) return false;
  return !x->data_known || (id->has_data && x->data_dev == id->data.st_dev && x->data_ino == id->data.st_ino);
}

static _Atomic pid_t self_pid;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

static void note_self(void) { self_pid = getpid(); }
static void watch_self(void)
{
  note_self();
  pthread_atfork(NULL, NULL, note_self); /* in the child, after the fork */
}

pid_t rn_envs_self(void)
{
  pthread_once(&self_once, watch_self);
  return self_pid;
}

/* The entry of the state id names (NULL: none yet). */
static entry *find(const state_id *id)
{
  pid_t self = rn_envs_self();
  for (entry *x = entries; x; x = x->next)
    if (same_state(x, id, self)) return x;
  return NULL;
}

/* x's environment is open on env: its data.mdb becomes part of its key. */
static void know_data(entry *x, MDB_env *env)
{
  int fd;
  struct stat st;
  if (mdb_env_get_fd(env, &fd) != 0 || fstat(fd, &st) != 0) return;
  x->data_known = true;
  x->data_dev = st.st_dev;
  x->data_ino = st.st_ino;
}

static entry *add(const state_id *id)
{
  entry *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  x->dev = id->dir.st_dev;
  x->ino = id->dir.st_ino;
  x->pid = rn_envs_self();
  x->next = entries;
  entries = x;
  return x;
}

static void drop(entry *gone)
{
  for (entry **at = &entries; *at; at = &(*at)->next)
    if (*at == gone) {
      *at = gone->next;
      free(gone);
      return;
    }
}

static int still_read(const char *dir, rn_err *e)
{
  return rn_err_set(e, RN_EMISUSE, "state %s was closed inside a call that still reads it (the callback of "
                    "rn_inspect, rn_verify or a copy): open it again once that call has returned", dir);
}

int rn_envs_closing(const char *dir, rn_err *e)
{
  state_id st;
  if (state_at(dir, &st) != 0) return 0; /* no state: the open says so */
  pthread_mutex_lock(&entries_lock);
  entry *x = find(&st);
  int rc = x && x->closing ? still_read(dir, e) : 0;
  pthread_mutex_unlock(&entries_lock);
  return rc;
}

int rn_envs_claim(const char *dir, void *writer, rn_err *e)
{
  state_id st;
  if (state_at(dir, &st) != 0) return rn_err_set(e, RN_EIO, "cannot open the state at %s: %s", dir, strerror(errno));
  pthread_mutex_lock(&entries_lock);
  entry *x = find(&st);
  int rc = 0;
  if (x && x->closing)
    rc = still_read(dir, e);
  else if (x && x->readers)
    rc = rn_err_set(e, RN_EMISUSE, "state %s is open for reading in this process (runnel.attach, a lookup's "
                    "source); close those first, or open the pipeline first: an attach then reads through it", dir);
  else if (!x && !(x = add(&st)))
    rc = rn_err_set(e, RN_ENOMEM, "out of memory");
  if (!rc) {
    x->writer = writer;
    x->thread = pthread_self();
  }
  pthread_mutex_unlock(&entries_lock);
  return rc;
}

void rn_envs_writer_opened(void *writer, MDB_env *env)
{
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next)
    if (x->writer == writer) know_data(x, env);
  pthread_mutex_unlock(&entries_lock);
}

void rn_envs_unclaim(void *writer)
{
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next)
    if (x->writer == writer) {
      drop(x); /* a writer's entry has no readers */
      break;
    }
  pthread_mutex_unlock(&entries_lock);
}

static int another_thread(const char *dir, rn_err *e)
{
  return rn_err_set(e, RN_EMISUSE, "state %s is written by this process in another thread: read it in that "
                    "thread, between its pipeline calls (or from another process)", dir);
}

int rn_envs_writer(const char *dir, void **writer, rn_err *e)
{
  state_id st;
  *writer = NULL;
  if (state_at(dir, &st) != 0) return 0; /* no state: the caller's open says so */
  pthread_mutex_lock(&entries_lock);
  entry *x = find(&st);
  int rc = 0;
  if (x && x->writer && pthread_equal(x->thread, pthread_self())) *writer = x->writer;
  else if (x && x->writer)
    rc = another_thread(dir, e);
  pthread_mutex_unlock(&entries_lock);
  return rc;
}

int rn_envs_writer_here(void *writer, const char *dir, rn_err *e)
{
  bool here = true;
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next)
    if (x->writer == writer) here = pthread_equal(x->thread, pthread_self());
  pthread_mutex_unlock(&entries_lock);
  return here ? 0 : another_thread(dir, e);
}

int rn_envs_readers(const char *dir)
{
  state_id st;
  if (state_at(dir, &st) != 0) return 0;
  pthread_mutex_lock(&entries_lock);
  entry *x = find(&st);
  int n = x ? x->readers : 0;
  pthread_mutex_unlock(&entries_lock);
  return n;
}

/* A read-only environment on dir mapping the first of maps[0..n) the
 * address space allows (mmap refuses with ENOMEM, or EINVAL under valgrind). */
static int open_env(const char *dir, unsigned flags, const size_t *maps, size_t n, MDB_env **env, rn_err *e)
{
  rn_store_keep_std_fds(); /* else lock.mdb may become stdout */
  if (rn_store_check_file(dir, false, e)) return e->code; /* mapping a truncated file dies of SIGBUS */
  int rc = EINVAL; /* enters the loop; it goes on only while the map was refused */
  for (size_t i = 0; i < n && (rc == ENOMEM || rc == EINVAL); i++) {
    rc = mdb_env_create(env);
    if (!rc) rc = mdb_env_set_maxdbs(*env, 4096);
    if (!rc && maps[i]) rc = mdb_env_set_mapsize(*env, maps[i]);
    if (!rc) rc = mdb_env_open(*env, dir, MDB_RDONLY | MDB_NOTLS | flags, 0644);
    if (!rc) return 0;
    if (*env) mdb_env_close(*env);
    *env = NULL;
  }
  if (rc == ENOENT) return rn_err_set(e, rn_store_read_code(rc), "%s: not a runnel state (no data.mdb)", dir);
  if (rc == ENOTDIR) /* LMDB's "Not a directory" names no path of the user's */
    return rn_err_set(e, rn_store_read_code(rc), "%s: not a runnel state (a file, not a state directory)", dir);
  if (rc == EACCES) { /* a user who may read the state but not write its lock file: say which file needs what */
    char file[strlen(dir) + sizeof "/lock.mdb"];
    snprintf(file, sizeof file, "%s/data.mdb", dir);
    if (access(file, R_OK) != 0 && errno == EACCES)
      return rn_err_set(e, RN_EIO, "%s: permission denied: reading needs read access to %s", dir, file);
    snprintf(file, sizeof file, "%s/lock.mdb", dir);
    if (access(file, F_OK) == 0 ? access(file, R_OK | W_OK) != 0 : access(dir, W_OK) != 0)
      return rn_err_set(e, RN_EIO, "%s: permission denied: a reader of a state writes its lock.mdb (LMDB's table of "
                        "readers): reading needs write access to %s", dir, file);
  }
  return rn_err_set(e, rn_store_read_code(rc), "%s: %s", dir, rn_store_strerror(rc));
}

int rn_envs_acquire(const char *dir, MDB_env **env, rn_err *e)
{
  state_id st;
  *env = NULL;
  if (state_at(dir, &st) != 0) return rn_err_set(e, RN_EIO, "%s: %s", dir, strerror(errno));
  pthread_mutex_lock(&entries_lock);
  entry *x = find(&st);
  int rc = 0;
  if (x && x->closing)
    rc = still_read(dir, e); /* a second environment beside the closed writer's, which is kept */
  else if (x && x->writer)
    rc = rn_err_set(e, RN_EMISUSE, "state %s is open for writing in this process: read it through its pipeline", dir);
  else if (!x && !(x = add(&st)))
    rc = rn_err_set(e, RN_ENOMEM, "out of memory");
  if (!rc && !x->env && (rc = open_env(dir, 0, read_maps, sizeof read_maps / sizeof *read_maps, &x->env, e)))
    drop(x); /* it had no readers: it was new */
  else if (!rc && !x->data_known)
    know_data(x, x->env);
  if (!rc) {
    x->readers++;
    *env = x->env;
  }
  pthread_mutex_unlock(&entries_lock);
  return rc;
}

void rn_envs_release(MDB_env *env)
{
  if (!env) return;
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next)
    if (x->env == env) {
      if (--x->readers == 0) {
        mdb_env_close(env);
        drop(x);
      }
      break;
    }
  pthread_mutex_unlock(&entries_lock);
}

/* Beside this thread's writer: an environment without the lock file, whose
 * readers LMDB's reader table does not know, so a read transaction on the
 * writer's own environment (its user context, ended by rn_envs_read_done)
 * holds the same snapshot's pages there: groups the writer commits
 * meanwhile (an rn_inspect callback may write) do not take them. */
static int open_beside(const char *dir, rn_store *writer, MDB_env **env, rn_err *e)
{
  static const size_t file_map[] = { 0 };
  pinned *pin = calloc(1, sizeof *pin);
  if (!pin) return rn_err_set(e, RN_ENOMEM, "out of memory");
  int rc = rn_store_txn(writer->env, MDB_RDONLY, &pin->txn);
  if (rc) rn_err_set(e, rn_store_read_code(rc), "%s: %s", dir, rn_store_strerror(rc));
  if (rc || open_env(dir, MDB_NOLOCK, file_map, 1, env, e)) {
    if (pin->txn) mdb_txn_abort(pin->txn);
    free(pin);
    return e->code;
  }
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next)
    if (x->writer == writer) pin->next = x->pins, x->pins = pin;
  pthread_mutex_unlock(&entries_lock);
  mdb_env_set_userctx(*env, pin);
  return 0;
}

/* Ends open_beside's pin (unless the writer's close did) and forgets it. */
static void unpin(pinned *pin)
{
  MDB_env *closed = NULL;
  int fd = -1;
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next)
    for (pinned **at = &x->pins; *at; at = &(*at)->next)
      if (*at == pin) {
        *at = pin->next;
        if (x->closing && !x->pins) { /* the last read beside a closed writer: its close ends now */
          closed = x->closed_env;
          fd = x->closed_fd;
          drop(x);
          goto found;
        }
        break;
      }
found:
  pthread_mutex_unlock(&entries_lock);
  if (pin->txn) mdb_txn_abort(pin->txn);
  free(pin);
  if (closed) mdb_env_close(closed);
  if (fd >= 0) rn_store_unlock_writer(fd);
}

bool rn_envs_writer_closing(void *writer, MDB_env *env, int lock_fd)
{
  bool kept = false;
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next)
    if (x->writer == writer && x->pins) {
      x->writer = NULL;
      x->closing = kept = true;
      x->closed_env = env;
      x->closed_fd = lock_fd;
    }
  pthread_mutex_unlock(&entries_lock);
  return kept;
}

int rn_envs_read(const char *dir, MDB_env **env, rn_err *e)
{
  *env = NULL;
  void *writer;
  if (rn_envs_writer(dir, &writer, e)) return e->code;
  if (writer) return open_beside(dir, writer, env, e);
  return rn_envs_acquire(dir, env, e);
}

void rn_envs_read_done(MDB_env *env)
{
  if (!env) return;
  bool shared = false;
  pthread_mutex_lock(&entries_lock);
  for (entry *x = entries; x; x = x->next) shared = shared || x->env == env;
  pthread_mutex_unlock(&entries_lock);
  if (shared) {
    rn_envs_release(env);
    return;
  }
  pinned *pin = mdb_env_get_userctx(env); /* open_beside's */
  if (pin) unpin(pin);
  mdb_env_close(env);
}

void rn_envs_dbis_lock(void) { pthread_mutex_lock(&dbis_lock); }
void rn_envs_dbis_unlock(void) { pthread_mutex_unlock(&dbis_lock); }
