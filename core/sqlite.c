/* sqlite.c — a relation kept in a real SQLite table.
 *
 * The table is created if absent: quoted identifiers for any column name,
 * the relation's key as primary key (a keyless relation gets "runnel_id",
 * the row id). Types: int and bool INTEGER, float REAL, string TEXT, bytes
 * BLOB, lists, maps, structs and any as JSON TEXT.
 *
 * A durable sink (outbox.c): once the LMDB transaction holding them is
 * durable, the runnel groups waiting for the sinks of one database file
 * become one SQLite transaction holding each group's net effect per key:
 * first the deletes of keys gone at the end of the group, then INSERT …
 * ON CONFLICT DO UPDATE of the final rows, so a group that moves a row
 * between keys never loses one. Statements are prepared once;
 * BEGIN IMMEDIATE takes the write lock first, so no later statement waits
 * for it. SQLite failing (busy, disk full) never undoes the runnel group:
 * the group waits in the outbox and is written at the next delivery.
 *
 * Marks (SINK-n):
 * (1) Each SQLite transaction writes the group's seq into the table
 *     "runnel_sinks" (tbl, seq, …), with the group's rows: a group delivered
 *     again after a crash (the outbox's mark lags, OUTBOX-3) is skipped
 *     when SQLite's mark covers it. Exactly once, with no rewrite.
 * (2) At declaration the table is in step when the outbox holds every
 *     group after SQLite's mark (its record's delivered <= the mark <= the
 *     pipeline's seq), the record names this relation (a sink moved to
 *     another one holds the other's rows) and, for a table-like relation,
 *     the sink saw every group (record's seen = the pipeline's seq) and no group waiting was
 *     recorded before its relation was declared otherwise (OUTBOX-8).
 *     Otherwise (the sink was not declared for some groups, the relation
 *     changed or was rebuilt (evolve.h), the database file was replaced or is an older copy, the
 *     table was dropped) the table's rows are deleted and the relation's
 *     current rows written, with the mark, in one SQLite transaction.
 * (3) A state with no record for the sink (a new sink, or a new state on
 *     an old file) writes the relation's current rows and deletes nothing:
 *     rows already in the table may be another state's or the user's. Not
 *     when runnel_sinks names this state (its record was dropped with the
 *     groups that waited for it: p:drop_outbox): the rows are this
 *     state's, and rows those groups deleted are deleted too, as in (2).
 * (4) One state writes a table: the row of runnel_sinks names the state
 *     (its id, rn_state_id, and its directory). Another state declaring
 *     the table is refused while that state is still there (a runnel
 *     state in its directory); once it is gone (its directory removed, a
 *     temporary state closed) the next state to declare the table takes it
 *     over as in (3). A copy of a state (cp, runnel snapshot) keeps its id,
 *     so a state is its id and its directory: a row of this id from another
 *     directory that still holds a state of this id is the state's copy's
 *     (or the original's), and refused likewise; from a directory holding
 *     none (the state was moved, or the original of this copy removed) it
 *     is this state's, which records its new directory (check_copy). Each
 *     mark is written only over the state's own row (id and directory): a
 *     table taken meanwhile fails the delivery. A row of an older runnel
 *     (no state) goes to the first state that declares the table.
 * (5) A mirror is dropped and made anew (a table-like relation whose
 *     columns or key changed) only when it is exactly as runnel made it:
 *     its CREATE TABLE is the one runnel_sinks recorded ("made", written at
 *     each declaration while the table is exactly what runnel would make)
 *     and it has no index or trigger the user made. Otherwise the sink is
 *     refused, naming the table and what differs: runnel never drops a
 *     column, constraint, index or table of the user's.
 * (6) A row SQLite refuses (a CHECK, NOT NULL or UNIQUE constraint the
 *     user put on the table, a trigger's RAISE(ABORT)) does not fail its run
 *     at once: a later group of the same run (one SQLite transaction) that
 *     writes or deletes that key settles it, so fixing the row in runnel
 *     lets the waiting groups through. A refusal nothing settled fails the
 *     run at its end, naming the relation, the table, the group and the
 *     row's key: every group of the run waits in the outbox and is tried
 *     again at every delivery (each attempt reports it), until the row or
 *     the table is fixed. Nothing is lost or written twice: the run counts
 *     whole or not at all. At most RN_SQLITE_REFUSED_MAX rows wait so.
 * (7) The connection holds the file at its path as it opened it (device
 *     and inode). Before each run (ssink_renew, the outbox's renew) the path
 *     is compared with it: a file moved away, removed or renamed over gets
 *     the path opened again (the file made when absent), each sink of the
 *     connection set up as its declaration does (SINK-4, 5) and its table
 *     written whole from the relation's rows, marked at the pipeline's
 *     seq, in one SQLite transaction. The outbox asks it only with no
 *     carried transaction open, so the rows read are those of every group
 *     committed: the groups waiting are covered, skipped as (1) skips
 *     them, none applied twice. A stream's log is marked where it was and
 *     its waiting groups go on into the new file. Only then is the old
 *     handle closed: it holds no transaction and is written nothing, so
 *     the moved file is left as it was. A file there SQLite cannot use (not
 *     a database, a table of other columns) fails the run, naming the
 *     relation, the file and the table; the old handle is kept, unused,
 *     and each delivery tries again.
 * A stream holds no rows to rewrite: its table is a log keyed by row id,
 * marked like the others; a new or out of step one starts with the next
 * group.
 *
 * Fork: SQLite forbids using a connection in a child of the process that
 * opened it (its file locks are the process's; its record of them, its
 * open transaction and its statements are memory the child inherits). So
 * each connection knows the process that opened it (rn_envs_self), and a
 * child never steps, finalizes, rolls back or closes one of its parent's:
 * a lookup it asks opens a connection of its own, a sink it declares
 * never shares the parent's, and freeing the parent's (closing the
 * pipeline it inherited) only forgets them, to go with the child's exit. */
#include "sqlite.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs.h"
#include "jetstream.h"
#include "json.h"
#include "key.h"
#include "lookup.h"
#include "ndjson.h"
#include "outbox.h"
#include "row.h"
#include "scan.h"

typedef struct op {
  uint64_t id;
  const char *row;        /* the final row (upsert) or the row whose key goes (delete) */
  size_t len;
  char *key;              /* encoded key, for "is this key still there" */
  size_t klen;
} op;

/* One connection per database file per pipeline, shared by its sinks, so
 * a group's writes to one file are one SQLite transaction. */
typedef struct rn_sqlite_conn {
  char *path;             /* the file's real path (as given while it has none) */
  sqlite3 *db;
  int refs;
  bool open_txn;          /* a delivery's transaction is open */
  pid_t pid;              /* the process that opened db: only it uses db (see "Fork" above) */
  dev_t dev;              /* the file it holds, as its first transaction found it at path (see begin) */
  ino_t ino;
  bool known;             /* dev and ino are set */
  int busy_ms;            /* its busy timeout, given again to the file opened anew (SINK-7) */
  struct ssink *sinks;    /* the sinks writing through it */
  struct rn_sqlite_conn *next;
} rn_sqlite_conn;

static char *real_path_of(const char *path)
{
  char real[PATH_MAX];
  return strdup(realpath(path, real) ? real : path);
}

/* Opens the database file at path with flags (a sink's: read and written,
 * made if absent; a lookup source's: read only). A path is a file's path: SQLite, built to read URIs (Debian's is), takes
 * "file:out.db" for out.db and "file:x?mode=memory" or ":memory:" for a
 * database in memory, while the sink knows its file by the path (its real
 * path, device and inode: the connection shared, SINK-4, 7). So such a
 * relative path is given as "./" and the path, which SQLite reads as the
 * file it names. A lookup source reads its path so too: one path is one
 * file to the sinks and the sources of a pipeline. */
static int open_file(const char *path, int flags, sqlite3 **db)
{
  if (strncmp(path, "file:", 5) != 0 && strcmp(path, ":memory:") != 0)
    return sqlite3_open_v2(path, db, flags, NULL);
  size_t n = strlen(path) + 3;
  char *literal = malloc(n);
  if (!literal) {
    *db = NULL;
    return SQLITE_NOMEM;
  }
  snprintf(literal, n, "./%s", path);
  int rc = sqlite3_open_v2(literal, db, flags, NULL);
  free(literal);
  return rc;
}

/* The connection of the file at path (however the path spells it). */
static rn_sqlite_conn *conn_get(rn_pipeline *p, const char *path, const char *rel, rn_err *e)
{
  const char *kind = rn_sink_path_kind(path);
  if (kind) { /* SQLite would say "disk I/O error", or wait on a FIFO */
    rn_err_set(e, RN_EINVAL, "%s: sqlite: %s is %s, not a regular file: SQLite keeps a database in a regular file",
               rel, path, kind);
    return NULL;
  }
  char *where = real_path_of(path);
  for (rn_sqlite_conn *c = p->sqlite_conns; c && where; c = c->next)
    if (c->pid == rn_envs_self() && strcmp(c->path, where) == 0) { c->refs++; free(where); return c; }
  rn_sqlite_conn *c = where ? calloc(1, sizeof *c) : NULL;
  free(where);
  if (!c) {
    rn_err_set(e, RN_ENOMEM, "out of memory");
    return NULL;
  }
  int rc = open_file(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &c->db);
  if (rc != SQLITE_OK) rn_err_set(e, RN_EIO, "%s: sqlite: %s: %s", rel, path, c->db ? sqlite3_errmsg(c->db) : "out of memory");
  else if (!(c->path = real_path_of(path))) rn_err_set(e, RN_ENOMEM, "out of memory"); /* the file may be new: now it has one */
  if (!c->path) {
    sqlite3_close(c->db);
    free(c->path);
    free(c);
    return NULL;
  }
  sqlite3_busy_timeout(c->db, c->busy_ms = 5000); /* another process may be reading it */
  struct stat st; /* the file it holds, before a move could hide it (SINK-7) */
  if (stat(c->path, &st) == 0) c->dev = st.st_dev, c->ino = st.st_ino, c->known = true;
  c->refs = 1;
  c->pid = rn_envs_self();
  c->next = p->sqlite_conns;
  p->sqlite_conns = c;
  return c;
}

static void conn_put(rn_pipeline *p, rn_sqlite_conn *c)
{
  if (--c->refs > 0) return;
  for (rn_sqlite_conn **at = (rn_sqlite_conn **)&p->sqlite_conns; *at; at = &(*at)->next)
    if (*at == c) { *at = c->next; break; }
  if (c->pid == rn_envs_self()) { /* a parent's: its rollback would rewrite the file under the parent ("Fork") */
    if (c->open_txn) sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(c->db);
  }
  free(c->path);
  free(c);
}

/* The table's row in runnel_sinks, as read at declaration. */
typedef struct smark {
  bool found;             /* runnel_sinks has a row for the table */
  uint64_t seq;           /* the last group committed to the table */
  char *state;            /* the id of the state writing it (NULL: an older runnel wrote the row) */
  char *state_path;       /* that state's directory when it last declared the sink, or NULL */
  char *made;             /* the CREATE TABLE runnel made the table with, or NULL: not known (SINK-5) */
} smark;

/* A row SQLite refused (a CHECK, NOT NULL, UNIQUE, a trigger's RAISE)
 * while a run was written: a later group of the run may still fix it
 * (SINK-6). */
typedef struct refused {
  char *key;              /* the row's encoded key (malloc'd) */
  size_t klen;
  char *msg;              /* the error, naming the table, the group and the row (malloc'd) */
} refused;

#define RN_SQLITE_REFUSED_MAX 1000 /* rows refused in one run before it fails at once: bounds the list and its scans */

typedef struct ssink {
  rn_pipeline *p;
  rn_sqlite_conn *conn;
  struct ssink *next_on_conn;
  sqlite3 *db;            /* conn->db */
  sqlite3_stmt *upsert, *del, *mark;
  rn_rel *rel;
  char *table;
  char *path;             /* the database as given, for errors */
  char *create;           /* the CREATE TABLE runnel makes the table with */
  char state[33];         /* this state's id (SINK-4) */
  char *state_path;       /* this state's directory (its real path) */
  smark m;                /* the table's row in runnel_sinks */
  bool adopt;             /* the row is a state's that is gone: this one takes the table over (SINK-4) */
  refused *bad;           /* the run's refused rows no later group fixed yet (SINK-6) */
  size_t nbad, capbad;
  int last_rc;            /* the extended code of run's last failed step */
  bool keyless;           /* keyed by runnel_id */
  bool made;              /* the table did not exist at declaration: runnel made it empty */
  bool rewritten;         /* written from the relation's rows at declaration (rn_outbox_sink_holds_told) */
  uint64_t written;       /* SQLite's mark: the last group committed to the table */
  uint64_t staged;        /* the last group written into the open transaction */
  op *dels, *ups;
  size_t ndels, nups, cap_dels, cap_ups;
  msgpack_zone zone;      /* the group's row and key copies */
} ssink;

static void quote(msgpack_sbuffer *b, const char *name)
{
  rn_buf_write(b, "\"", 1);
  for (const char *c = name; *c; c++) {
    if (*c == '"') rn_buf_write(b, "\"", 1);
    rn_buf_write(b, c, 1);
  }
  rn_buf_write(b, "\"", 1);
}

static void add(msgpack_sbuffer *b, const char *s) { rn_buf_write(b, s, strlen(s)); }

/* The quoted names of sc's key columns (or all columns), each followed by
 * suffix, joined by sep: "a", "b" or "a" = ? AND "b" = ?. */
static void names(msgpack_sbuffer *b, const rn_schema *sc, bool keys, const char *sep, const char *suffix)
{
  int n = keys ? sc->nkey : sc->ncols;
  for (int i = 0; i < n; i++) {
    if (i) add(b, sep);
    quote(b, sc->cols[keys ? sc->key_slots[i] : i].name);
    add(b, suffix);
  }
}

static const char *sql_type(rn_type t)
{
  switch (t) {
  case RN_T_INT: case RN_T_BOOL: return "INTEGER";
  case RN_T_FLOAT: return "REAL";
  case RN_T_BYTES: return "BLOB";
  default: return "TEXT";
  }
}

/* A sink's failure at step `what`, naming its relation, table and file. */
static int sink_fail(rn_err *e, const ssink *s, const char *what)
{
  return rn_err_set(e, RN_EIO, "%s: sqlite table \"%s\" in %s: %s: %s", s->rel->name, s->table, s->path, what,
                    s->db ? sqlite3_errmsg(s->db) : "out of memory");
}

/* ---- a mirror whose relation changed (DESIGN §13): its shape ---- */

/* The shape runnel gives table t of s: `"a" INTEGER, "b" TEXT; key ("a")`. */
static void shape_wanted(const ssink *s, msgpack_sbuffer *b)
{
  const rn_schema *sc = s->rel->schema;
  if (s->keyless) add(b, "\"runnel_id\" INTEGER");
  for (int i = 0; i < sc->ncols; i++) {
    if (i || s->keyless) add(b, ", ");
    quote(b, sc->cols[i].name);
    add(b, " ");
    add(b, sql_type(sc->cols[i].type));
  }
  add(b, "; key (");
  if (s->keyless) add(b, "\"runnel_id\"");
  else names(b, sc, true, ", ", "");
  add(b, ")");
  rn_buf_write(b, "", 1);
}

/* Appends the rows of sql (one text column each, table bound) to b, each
 * quoted when quoted, else as is, joined by ", "; *n: how many. */
static int list_of(ssink *s, const char *sql, const char *table, bool quoted, msgpack_sbuffer *b, int *n, rn_err *e)
{
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return sink_fail(e, s, "reading the table's columns");
  sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
  *n = 0;
  for (; sqlite3_step(st) == SQLITE_ROW; (*n)++) {
    const char *text = (const char *)sqlite3_column_text(st, 0);
    if (*n) add(b, ", ");
    if (quoted) quote(b, text ? text : "");
    else add(b, text ? text : "");
  }
  sqlite3_finalize(st);
  return 0;
}

/* The shape table has in s's database, as shape_wanted writes it; b empty
 * (size 0) when there is no such table. */
static int shape_held(ssink *s, const char *table, msgpack_sbuffer *b, rn_err *e)
{
  int n = 0, nkey;
  int rc = list_of(s, "SELECT '\"' || replace(name, '\"', '\"\"') || '\" ' || type FROM pragma_table_info(?) ORDER BY cid",
                   table, false, b, &n, e);
  if (rc || n == 0) {
    msgpack_sbuffer_clear(b);
    return rc;
  }
  add(b, "; key (");
  rc = list_of(s, "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", table, true, b, &nkey, e);
  add(b, ")");
  rn_buf_write(b, "", 1);
  return rc;
}

/* ---- runnel_sinks: the marks (SINK-1, 4, 5) ----
 *
 *     runnel_sinks (tbl TEXT PRIMARY KEY, seq INTEGER NOT NULL, state TEXT, state_path TEXT, made TEXT)
 *
 * An older runnel made (tbl, seq) only: the other columns are added in
 * place, null in its rows (state null: the first state to declare the
 * table takes it, as the older runnel did). */

static char *dup_column(sqlite3_stmt *st, int i)
{
  const char *t = (const char *)sqlite3_column_text(st, i);
  return t ? strdup(t) : NULL;
}

static void smark_clear(smark *m)
{
  free(m->state);
  free(m->state_path);
  free(m->made);
  memset(m, 0, sizeof *m);
}

static const char *const marks_added[] = { "state", "state_path", "made" }; /* the columns an older runnel's lacks */

/* Whether runnel_sinks has column name (*has): SQLITE_OK, or the code
 * that kept it from being read. */
static int marks_column(sqlite3 *db, const char *name, bool *has)
{
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('runnel_sinks') WHERE name = ?", -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    *has = rc == SQLITE_ROW;
    rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  sqlite3_finalize(st);
  return rc;
}

/* Whether runnel_sinks is there with all its columns (*whole). */
static int marks_whole(sqlite3 *db, bool *whole)
{
  int rc = marks_column(db, "tbl", whole);
  for (size_t i = 0; i < sizeof marks_added / sizeof *marks_added && rc == SQLITE_OK && *whole; i++)
    rc = marks_column(db, marks_added[i], whole);
  return rc;
}

/* Creates runnel_sinks, or adds the columns an older runnel's lacks.
 * Several processes may declare sinks on one file at once: the layout is
 * read again, and changed, under SQLite's write lock (BEGIN IMMEDIATE
 * waits for it up to the busy timeout), so what one adds the other sees
 * and does not add again ("duplicate column name"). A file already in
 * this layout is only read: a reader of it never holds up a declaration. */
static int marks_table(ssink *s, rn_err *e)
{
  bool whole = false, own = sqlite3_get_autocommit(s->db); /* an open transaction (BEGIN IMMEDIATE) has the lock */
  int rc = marks_whole(s->db, &whole);
  if (rc == SQLITE_OK && whole) return 0;
  if (rc == SQLITE_OK && own) rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(s->db, "CREATE TABLE IF NOT EXISTS runnel_sinks (tbl TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
                      "state TEXT, state_path TEXT, made TEXT)", NULL, NULL, NULL);
  for (size_t i = 0; i < sizeof marks_added / sizeof *marks_added && rc == SQLITE_OK; i++) {
    bool has = false;
    if ((rc = marks_column(s->db, marks_added[i], &has)) == SQLITE_OK && !has) {
      char alter[80];
      snprintf(alter, sizeof alter, "ALTER TABLE runnel_sinks ADD COLUMN %s TEXT", marks_added[i]);
      rc = sqlite3_exec(s->db, alter, NULL, NULL, NULL);
    }
  }
  if (rc == SQLITE_OK && own) rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
  if (rc == SQLITE_OK) return 0;
  rc = sink_fail(e, s, "preparing the table"); /* before ROLLBACK, which would take SQLite's message */
  if (own && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

static bool state_there(const ssink *s, const char *dir);

/* SQLite's table names ignore ASCII case, runnel_sinks' tbl does not: a
 * mark of the table spelled otherwise ("t" for "T") is the mark of this
 * very table. Taken as another table's, it let a second state write a
 * table another state writes (SINK-4), or one state keep two marks of one
 * table. Refused, naming the spelling the mark holds. A table marked in
 * its own spelling too (an older runnel let a second state in through the
 * other one, or this state renamed it) is refused only while that mark's
 * state, another one, is still there (SINK-4): each is told of the other. */
static int other_spelling(ssink *s, rn_err *e)
{
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT tbl, state_path, state FROM runnel_sinks WHERE tbl = ? COLLATE NOCASE AND "
                         "tbl <> ? ORDER BY tbl", -1, &st, NULL) != SQLITE_OK)
    return sink_fail(e, s, "reading its mark");
  sqlite3_bind_text(st, 1, s->table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, s->table, -1, SQLITE_STATIC);
  int rc = SQLITE_DONE, fail = 0;
  while (!fail && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *tbl = (const char *)sqlite3_column_text(st, 0), *by = (const char *)sqlite3_column_text(st, 1);
    const char *id = (const char *)sqlite3_column_text(st, 2);
    if (!s->m.found) { /* the table's only mark: its writer's, whoever it is */
      fail = rn_err_set(e, RN_EINVAL, "%s: sqlite: table \"%s\" in %s is table \"%s\" to SQLite (its names ignore "
                       "ASCII case), which runnel_sinks records as written by %s%s; one state writes a table: name it "
                       "\"%s\" (the spelling its mark holds), or name another table", s->rel->name, s->table, s->path,
                       tbl ? tbl : "", by ? "the runnel state at " : "an older runnel", by ? by : "", tbl ? tbl : "");
    } else if (id && strcmp(id, s->state) != 0 && state_there(s, by)) {
      fail = rn_err_set(e, RN_EINVAL, "%s: sqlite: table \"%s\" in %s is table \"%s\" to SQLite (its names ignore "
                       "ASCII case), which runnel_sinks records as written by the runnel state at %s too (an older "
                       "runnel let two states write it); one state writes a table: remove one of the two states, or "
                       "the row of runnel_sinks naming it", s->rel->name, s->table, s->path, tbl ? tbl : "", by);
    }
  }
  if (!fail && rc != SQLITE_DONE) fail = sink_fail(e, s, "reading its mark"); /* before finalize: its message */
  sqlite3_finalize(st);
  return fail;
}

/* Reads the table's row of runnel_sinks into s->m. */
static int read_mark(ssink *s, rn_err *e)
{
  smark_clear(&s->m);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT seq, state, state_path, made FROM runnel_sinks WHERE tbl = ?", -1, &st, NULL) !=
      SQLITE_OK)
    return sink_fail(e, s, "reading its mark");
  sqlite3_bind_text(st, 1, s->table, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    s->m.found = true;
    s->m.seq = (uint64_t)sqlite3_column_int64(st, 0);
    s->m.state = dup_column(st, 1);
    s->m.state_path = dup_column(st, 2);
    s->m.made = dup_column(st, 3);
    for (int i = 1; i <= 3; i++) /* a null read for a value would hand another state's table over */
      if ((i == 1 ? !s->m.state : i == 2 ? !s->m.state_path : !s->m.made) && sqlite3_column_type(st, i) != SQLITE_NULL)
        rc = SQLITE_NOMEM;
  }
  sqlite3_finalize(st);
  if (rc == SQLITE_NOMEM) return rn_err_set(e, RN_ENOMEM, "out of memory");
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sink_fail(e, s, "reading its mark");
  return other_spelling(s, e);
}

/* Whether the state that wrote a row of runnel_sinks is still there: a
 * runnel state (its data.mdb) in dir, its directory, and that directory
 * not this state's (a path holds one state: one made anew there is
 * another). owner_there: the one of the table's row. */
static bool state_there(const ssink *s, const char *dir)
{
  if (!dir || (s->state_path && strcmp(dir, s->state_path) == 0)) return false;
  size_t n = strlen(dir) + sizeof "/data.mdb";
  char *data = malloc(n);
  if (!data) return true; /* not known: the safe answer */
  snprintf(data, n, "%s/data.mdb", dir);
  struct stat st;
  bool there = stat(data, &st) == 0;
  free(data);
  return there;
}

static bool owner_there(const ssink *s) { return state_there(s, s->m.state_path); }

/* The id of the state at dir (rn_state_id's, as its catalogue holds it)
 * into out: 0, RN_ENOTFOUND when it has none yet, RN_ESTORE when it is not
 * 32 hex digits (damaged: *len bytes; jetstream.c's read_id refuses it
 * too), else the reason it could not be read. One read transaction, which
 * opens a database (envs.h). */
static int id_at(const char *dir, char out[33], size_t *len)
{
  rn_err e;
  rn_err_clear(&e);
  MDB_env *env = NULL;
  MDB_txn *txn = NULL;
  MDB_dbi meta;
  rn_envs_dbis_lock();
  int rc = rn_envs_read(dir, &env, &e) ? e.code : rn_store_txn(env, MDB_RDONLY, &txn);
  if (!rc) rc = mdb_dbi_open(txn, RN_DB_META, 0, &meta);
  MDB_val k = { RN_PREFIX_LEN(RN_META_STATE_ID), (void *)RN_META_STATE_ID }, v;
  if (!rc) rc = mdb_get(txn, meta, &k, &v);
  if (!rc) {
    const char *id = v.mv_data;
    bool hex = v.mv_size == 32;
    for (size_t i = 0; hex && i < 32; i++) hex = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
    *len = v.mv_size;
    if (hex) memcpy(out, id, 32), out[32] = 0;
    else rc = RN_ESTORE; /* its first digits are not its id: another state's, or this one's cut */
  } else if (rc == MDB_NOTFOUND) {
    rc = RN_ENOTFOUND;
  }
  if (txn) mdb_txn_abort(txn);
  rn_envs_read_done(env);
  rn_envs_dbis_unlock();
  return rc;
}

/* SINK-4 for a row of this state's id written from another directory. A
 * state keeps its id when it is copied (cp, runnel snapshot, rn_state_copy:
 * JetStream's message ids need it), so the id alone does not tell the
 * state that writes the table from its copy. The row's directory says
 * which: when it holds no state (this state was moved from there, or the
 * original of this copy was removed) or a state of another id (made there
 * after this one moved), this state is the table's and takes its row
 * (check_marks then writes its directory); when it holds a state of this
 * id (or one whose id cannot be read: the safe answer), the two are a
 * state and its copy, and the one declaring the table second is refused:
 * two states writing one table would leave it a mixture of both. */
static int check_copy(ssink *s, rn_err *e)
{
  if (!s->m.state_path || !s->state_path || strcmp(s->m.state_path, s->state_path) == 0 || !owner_there(s)) return 0;
  char there[33];
  size_t len = 0;
  int rc = id_at(s->m.state_path, there, &len);
  if (rc == RN_ENOTFOUND || (rc == 0 && strcmp(there, s->state) != 0)) return 0;
  if (rc == RN_ESTORE)
    return rn_err_set(e, RN_ESTORE, "%s: sqlite table \"%s\" in %s is written by the runnel state at %s, whose id is "
                      "damaged (not 32 hex digits: %zu bytes): whether the state at %s is its copy cannot be told, "
                      "and one state writes a table: name another table, or remove the state at %s", s->rel->name,
                      s->table, s->path, s->m.state_path, len, s->state_path, s->m.state_path);
  return rn_err_set(e, RN_EINVAL, "%s: sqlite table \"%s\" in %s is written by the runnel state at %s, and the state "
                    "at %s has its state id (%s): one is a copy of the other (cp, runnel snapshot); one state writes "
                    "a table: name another table, or remove the state at %s (a state moved, not copied, keeps its "
                    "tables)", s->rel->name, s->table, s->path, s->m.state_path, s->state_path, s->state,
                    s->m.state_path);
}

/* SINK-4: one state writes a table. The row of another state that is
 * still there refuses the sink; one of a state gone is taken over. */
static int check_owner(ssink *s, rn_err *e)
{
  s->adopt = false;
  if (!s->m.found || !s->m.state) return 0;
  if (strcmp(s->m.state, s->state) == 0) return check_copy(s, e);
  if (!owner_there(s)) {
    s->adopt = true;
    return 0;
  }
  return rn_err_set(e, RN_EINVAL, "%s: sqlite table \"%s\" in %s is written by another runnel state (%s, id %s); one "
                    "state writes a table: name another table (or, when that state is no more, remove its directory: "
                    "the table then goes to the next state that declares it)",
                    s->rel->name, s->table, s->path, s->m.state_path, s->m.state);
}

/* Whether runnel_sinks marks table for this state: a mirror it made (not
 * the user's, nor another state's). */
static bool marked(const ssink *s) { return s->m.found && !s->adopt; }

/* The CREATE TABLE the table has in sqlite_master (malloc'd), or NULL. */
static char *table_sql(ssink *s, const char *table)
{
  sqlite3_stmt *st;
  char *sql = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE", -1, &st,
                         NULL) != SQLITE_OK)
    return NULL;
  sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) sql = dup_column(st, 0);
  sqlite3_finalize(st);
  return sql;
}

/* ---- a mirror the user changed (SINK-5) ---- */

typedef struct held_col {
  char *name, *type;
  int pk;                 /* its place in the primary key from 1, or 0 */
} held_col;

/* Appends to b what differs between the table's columns and the ones
 * the relation wants: columns the relation has not, columns it lacks,
 * other types, another key. */
static void shape_diff(ssink *s, const char *table, msgpack_sbuffer *b)
{
  const rn_schema *sc = s->rel->schema;
  held_col *h = NULL;
  int nh = 0, caph = 0;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
      if (nh == caph) {
        held_col *g = realloc(h, (size_t)(caph = caph ? 2 * caph : 8) * sizeof *h);
        if (!g) break;
        h = g;
      }
      h[nh].name = dup_column(st, 0);
      h[nh].type = dup_column(st, 1);
      h[nh].pk = sqlite3_column_int(st, 2);
      if (h[nh].name && h[nh].type) nh++;
      else { free(h[nh].name); free(h[nh].type); }
    }
    sqlite3_finalize(st);
  }
  int nw = sc->ncols + s->keyless;
  const char *wname[nw > 0 ? nw : 1], *wtype[nw > 0 ? nw : 1];
  for (int i = 0; i < nw; i++) {
    bool id = s->keyless && i == 0;
    wname[i] = id ? "runnel_id" : sc->cols[i - s->keyless].name;
    wtype[i] = id ? "INTEGER" : sql_type(sc->cols[i - s->keyless].type);
  }
  const char *sep = "";
  msgpack_sbuffer l;
  msgpack_sbuffer_init(&l);
  int n = 0;
  for (int i = 0; i < nh; i++) { /* columns the relation has not */
    int j = 0;
    while (j < nw && sqlite3_stricmp(h[i].name, wname[j]) != 0) j++;
    if (j < nw) continue;
    if (n++) add(&l, ", ");
    quote(&l, h[i].name);
    add(&l, " ");
    add(&l, h[i].type);
  }
  rn_buf_write(&l, "", 1);
  if (n) {
    add(b, n > 1 ? "it has columns " : "it has column ");
    add(b, l.data);
    add(b, ", which the relation has not");
    sep = "; ";
  }
  msgpack_sbuffer_clear(&l);
  n = 0;
  for (int j = 0; j < nw; j++) { /* columns it lacks */
    int i = 0;
    while (i < nh && sqlite3_stricmp(h[i].name, wname[j]) != 0) i++;
    if (i < nh) continue;
    if (n++) add(&l, ", ");
    quote(&l, wname[j]);
    add(&l, " ");
    add(&l, wtype[j]);
  }
  rn_buf_write(&l, "", 1);
  if (n) {
    add(b, sep);
    add(b, n > 1 ? "it lacks the relation's columns " : "it lacks the relation's column ");
    add(b, l.data);
    sep = "; ";
  }
  msgpack_sbuffer_destroy(&l);
  for (int j = 0; j < nw; j++) /* other types */
    for (int i = 0; i < nh; i++)
      if (sqlite3_stricmp(h[i].name, wname[j]) == 0 && strcmp(h[i].type, wtype[j]) != 0) {
        add(b, sep);
        add(b, "column ");
        quote(b, h[i].name);
        add(b, " is ");
        add(b, h[i].type[0] ? h[i].type : "untyped");
        add(b, ", the relation's ");
        add(b, wtype[j]);
        sep = "; ";
      }
  msgpack_sbuffer hk, wk; /* the keys, quoted, in order */
  msgpack_sbuffer_init(&hk);
  msgpack_sbuffer_init(&wk);
  for (int k = 1; k <= nh; k++)
    for (int i = 0; i < nh; i++)
      if (h[i].pk == k) { if (hk.size) add(&hk, ", "); quote(&hk, h[i].name); }
  if (s->keyless) add(&wk, "\"runnel_id\"");
  else names(&wk, sc, true, ", ", "");
  rn_buf_write(&hk, "", 1);
  rn_buf_write(&wk, "", 1);
  if (sqlite3_stricmp(hk.data, wk.data) != 0) {
    add(b, sep);
    add(b, "its key is (");
    add(b, hk.data);
    add(b, "), the relation's (");
    add(b, wk.data);
    add(b, ")");
    sep = "; ";
  }
  if (!*sep) add(b, "its columns are the relation's, spelled otherwise");
  msgpack_sbuffer_destroy(&hk);
  msgpack_sbuffer_destroy(&wk);
  for (int i = 0; i < nh; i++) { free(h[i].name); free(h[i].type); }
  free(h);
}

/* The first index or trigger on table that runnel did not make (an
 * automatic index has no sql), into b as `index "x"`; false: none. */
static bool user_object(ssink *s, const char *table, msgpack_sbuffer *b)
{
  sqlite3_stmt *st;
  bool found = false;
  if (sqlite3_prepare_v2(s->db, "SELECT type, name FROM sqlite_master WHERE type IN ('index', 'trigger') AND "
                         "sql IS NOT NULL AND tbl_name = ? COLLATE NOCASE ORDER BY type, name", -1, &st, NULL) != SQLITE_OK)
    return true; /* not known: the safe answer */
  sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) {
    found = true;
    add(b, (const char *)sqlite3_column_text(st, 0));
    add(b, " ");
    quote(b, (const char *)sqlite3_column_text(st, 1));
  }
  sqlite3_finalize(st);
  rn_buf_write(b, "", 1);
  return found;
}

/* Drops table and its mark in one SQLite transaction. */
static int drop_mirror(ssink *s, const char *table, rn_err *e)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  add(&b, "DROP TABLE ");
  quote(&b, table);
  rn_buf_write(&b, "", 1);
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, b.data, NULL, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(s->db, "DELETE FROM runnel_sinks WHERE tbl = ?", -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(st);
  if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
  msgpack_sbuffer_destroy(&b);
  if (rc == SQLITE_OK) return 0;
  rc = sink_fail(e, s, "dropping the table to follow the relation's columns");
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

/* A table with runnel's columns whose key compares other than bytewise
 * (COLLATE NOCASE, RTRIM) holds keys the relation keeps apart ("A", "a")
 * as one row: the upsert of one overwrites the other, deleting one
 * deletes both. Refused, naming the column. */
static int key_collation(ssink *s, const char *table, const char *path, rn_err *e)
{
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT x.name, x.coll FROM pragma_index_list(?) l, pragma_index_xinfo(l.name) x "
                         "WHERE l.origin = 'pk' AND x.key = 1 AND x.coll <> 'BINARY' COLLATE NOCASE", -1, &st, NULL) != SQLITE_OK)
    return sink_fail(e, s, "reading the table's key");
  sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
  int rc = 0;
  if (sqlite3_step(st) == SQLITE_ROW)
    rc = rn_err_set(e, RN_ESCHEMA, "%s: sqlite table \"%s\" in %s compares its key column \"%s\" with collation %s: keys "
                    "the relation holds apart would be one row there; make the key BINARY (drop the table: runnel then "
                    "makes it), or name another table", s->rel->name, table, path,
                    (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
  sqlite3_finalize(st);
  return rc;
}

/* A mirror runnel made for a table-like relation whose columns or key
 * changed is dropped, with its mark, so that it is created anew and written
 * whole (check_marks: no mark, a rewrite) - only when it is exactly as
 * runnel made it (SINK-5) and holds no index or trigger of the user's. A
 * mirror changed since, one an older runnel made (what it made is not
 * known), a stream's log or a table runnel did not make is refused, saying
 * what differs and what to do: runnel drops no user's table or column. */
static int follow_shape(ssink *s, const char *table, const char *path, rn_err *e)
{
  msgpack_sbuffer want, have, why;
  msgpack_sbuffer_init(&want);
  msgpack_sbuffer_init(&have);
  msgpack_sbuffer_init(&why);
  shape_wanted(s, &want);
  int rc = shape_held(s, table, &have, e);
  s->made = have.size == 0; /* a dropped mirror holds none of its rows, whatever runnel_sinks says */
  char *sql = NULL;
  if (!rc && have.size && strcmp(want.data, have.data) == 0) rc = key_collation(s, table, path, e);
  if (!rc && have.size && strcmp(want.data, have.data) != 0) {
    if (!s->rel->tablelike || !marked(s)) {
      rc = rn_err_set(e, RN_ESCHEMA,
                      "%s: sqlite table \"%s\" in %s has columns %s, the relation %s: %s", s->rel->name, table,
                      path, have.data, want.data,
                      s->rel->tablelike ? "runnel did not make that table, so it leaves it alone: drop or rename it "
                                          "(runnel then makes it and writes the relation's rows), or name another table"
                                        : "a stream's table is its log, kept as written: rename it (or drop it), "
                                          "or name another table");
    } else if (!s->m.made || !(sql = table_sql(s, table)) || strcmp(sql, s->m.made) != 0) {
      shape_diff(s, table, &why);
      rn_buf_write(&why, "", 1);
      rc = rn_err_set(e, RN_ESCHEMA, "%s: sqlite table \"%s\" in %s %s: %s; runnel drops no table it did not make as it "
                      "is: drop or rename it (runnel then makes it and writes the relation's rows), or name another table",
                      s->rel->name, table, path,
                      s->m.made ? "was changed since runnel made it"
                                : "differs from the relation, and runnel has no record of making it as it is (an older "
                                  "runnel made it, or it was changed, or it was there before the sink)",
                      why.data);
    } else if (user_object(s, table, &why)) {
      rc = rn_err_set(e, RN_ESCHEMA, "%s: sqlite table \"%s\" in %s has %s, which runnel did not make: to follow the "
                      "relation's columns runnel would drop the table, and it with it: drop the %s (runnel then makes "
                      "the table anew), or name another table",
                      s->rel->name, table, path, why.size > 1 ? why.data : "an index or trigger",
                      strncmp(why.data ? why.data : "", "trigger", 7) == 0 ? "trigger" : "index");
    } else {
      rc = drop_mirror(s, table, e);
      s->made = !rc;
      if (!rc) smark_clear(&s->m);
    }
  }
  free(sql);
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&have);
  msgpack_sbuffer_destroy(&why);
  return rc;
}

/* SQLite compares column names without ASCII case: two columns of rel
 * that differ only there (or one named like the row id column a keyless
 * relation's table gets) are one column to it. */
static int names_clash(const ssink *s, rn_err *e)
{
  const rn_schema *sc = s->rel->schema;
  for (int i = 0; i < sc->ncols; i++) {
    if (s->keyless && sqlite3_stricmp(sc->cols[i].name, "runnel_id") == 0)
      return rn_err_set(e, RN_EINVAL, "%s: sqlite: column \"%s\" is the name of the row id column that keys the table "
                        "of a relation without a key; rename it (select) or give the relation a key",
                        s->rel->name, sc->cols[i].name);
    for (int j = 0; j < i; j++)
      if (sqlite3_stricmp(sc->cols[i].name, sc->cols[j].name) == 0)
        return rn_err_set(e, RN_EINVAL, "%s: sqlite: columns \"%s\" and \"%s\" are one column to SQLite (its names "
                          "ignore ASCII case); rename one (select)", s->rel->name, sc->cols[j].name, sc->cols[i].name);
  }
  return 0;
}

/* " ON CONFLICT (keys) DO UPDATE SET c = excluded.c …" (DO NOTHING without
 * a column past the key): a table-like relation's row written over its key. */
static void upsert_tail(msgpack_sbuffer *b, const ssink *s, const rn_schema *sc)
{
  add(b, " ON CONFLICT (");
  if (s->keyless) add(b, "\"runnel_id\"");
  else names(b, sc, true, ", ", "");
  int nonkey = 0;
  for (int i = 0; i < sc->ncols; i++) nonkey += s->keyless || !sc->cols[i].is_key;
  add(b, nonkey ? ") DO UPDATE SET " : ") DO NOTHING");
  for (int i = 0, n = 0; i < sc->ncols; i++) {
    if (!s->keyless && sc->cols[i].is_key) continue;
    if (n++) add(b, ", ");
    quote(b, sc->cols[i].name);
    add(b, " = excluded.");
    quote(b, sc->cols[i].name);
  }
}

/* CREATE TABLE IF NOT EXISTS, and the two statements. */
static int prepare(ssink *s, const char *table, const char *path, rn_err *e)
{
  const rn_schema *sc = s->rel->schema;
  if (names_clash(s, e) || follow_shape(s, table, path, e)) return e->code;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  add(&b, "CREATE TABLE IF NOT EXISTS "); /* sqlite_master keeps it without IF NOT EXISTS: SINK-5 compares it */
  quote(&b, table);
  add(&b, " (");
  if (s->keyless) add(&b, "\"runnel_id\" INTEGER PRIMARY KEY, ");
  for (int i = 0; i < sc->ncols; i++) {
    if (i) add(&b, ", ");
    quote(&b, sc->cols[i].name);
    add(&b, " ");
    add(&b, sql_type(sc->cols[i].type));
  }
  if (!s->keyless) {
    add(&b, ", PRIMARY KEY (");
    names(&b, sc, true, ", ", "");
    add(&b, ")");
  }
  add(&b, ")");
  rn_buf_write(&b, "", 1);
  int rc = sqlite3_exec(s->db, b.data, NULL, NULL, NULL);
  const char *rest = b.data + strlen("CREATE TABLE IF NOT EXISTS ");
  if ((s->create = malloc(strlen("CREATE TABLE ") + strlen(rest) + 1))) /* as sqlite_master keeps it */
    strcat(strcpy(s->create, "CREATE TABLE "), rest);
  else rc = SQLITE_NOMEM;
  /* INSERT INTO t (keys…, cols…) VALUES (?…), and upsert_tail for a table-like relation */
  msgpack_sbuffer_clear(&b);
  add(&b, "INSERT INTO ");
  quote(&b, table);
  add(&b, " (");
  if (s->keyless) add(&b, "\"runnel_id\", ");
  names(&b, sc, false, ", ", "");
  add(&b, ") VALUES (");
  for (int i = 0; i < sc->ncols + s->keyless; i++) add(&b, i ? ", ?" : "?");
  add(&b, ")");
  if (s->rel->tablelike || !s->keyless) upsert_tail(&b, s, sc); /* a stream's log is only added to: an id met again is refused */
  rn_buf_write(&b, "", 1);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v3(s->db, b.data, -1, SQLITE_PREPARE_PERSISTENT, &s->upsert, NULL);
  /* DELETE FROM t WHERE k1 = ? AND … */
  msgpack_sbuffer_clear(&b);
  add(&b, "DELETE FROM ");
  quote(&b, table);
  add(&b, " WHERE ");
  if (s->keyless) add(&b, "\"runnel_id\" = ?");
  else names(&b, sc, true, " AND ", " = ?");
  rn_buf_write(&b, "", 1);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v3(s->db, b.data, -1, SQLITE_PREPARE_PERSISTENT, &s->del, NULL);
  if (rc == SQLITE_OK) /* SINK-4: a row another state (or a copy of this one) took meanwhile is left as it is (no change: refused) */
    rc = sqlite3_prepare_v3(s->db, "INSERT INTO runnel_sinks (tbl, seq, state, state_path) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT (tbl) DO UPDATE SET seq = excluded.seq WHERE state IS excluded.state "
                            "AND state_path IS excluded.state_path",
                            -1, SQLITE_PREPARE_PERSISTENT, &s->mark, NULL);
  msgpack_sbuffer_destroy(&b);
  return rc == SQLITE_OK ? 0 : sink_fail(e, s, "preparing the table");
}

/* Binds v, a value of column c (NULL: a key the lookup source binds).
 * An "any" value is JSON text whatever it holds, as lists, maps and
 * structs are: a string written as it is would read back as JSON (the
 * string "[1]" as a list), true as 1. */
static int bind_value(ssink *s, sqlite3_stmt *st, int at, const msgpack_object *v, const rn_column *c)
{
  switch (v->type == MSGPACK_OBJECT_NIL || !c || c->type != RN_T_ANY ? v->type : MSGPACK_OBJECT_ARRAY) {
  case MSGPACK_OBJECT_NIL: return sqlite3_bind_null(st, at);
  case MSGPACK_OBJECT_BOOLEAN: return sqlite3_bind_int(st, at, v->via.boolean);
  case MSGPACK_OBJECT_POSITIVE_INTEGER: return sqlite3_bind_int64(st, at, (sqlite3_int64)v->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return sqlite3_bind_int64(st, at, v->via.i64);
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: return sqlite3_bind_double(st, at, v->via.f64);
  case MSGPACK_OBJECT_STR:
    return sqlite3_bind_text(st, at, v->via.str.size ? v->via.str.ptr : "", (int)v->via.str.size, SQLITE_TRANSIENT);
  case MSGPACK_OBJECT_BIN:
    return sqlite3_bind_blob(st, at, v->via.bin.size ? v->via.bin.ptr : "", (int)v->via.bin.size, SQLITE_TRANSIENT);
  default: { /* lists, maps, structs, any: JSON text */
    msgpack_sbuffer j;
    msgpack_sbuffer_init(&j);
    rn_json_value(&j, v, c);
    int rc = sqlite3_bind_text(st, at, j.data ? j.data : "", (int)j.size, SQLITE_TRANSIENT);
    msgpack_sbuffer_destroy(&j);
    (void)s; /* s may be NULL (the lookup source binds keys) */
    return rc;
  }
  }
}

static int push_op(ssink *s, op **arr, size_t *n, size_t *cap, uint64_t id, const char *row, size_t len, rn_err *e)
{
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 64;
    op *a = realloc(*arr, c * sizeof *a);
    if (!a) return rn_err_set(e, RN_ENOMEM, "out of memory");
    *arr = a;
    *cap = c;
  }
  op *o = &(*arr)[(*n)++];
  o->id = id;
  o->len = len;
  o->row = rn_zone_malloc_no_align(&s->zone, len);
  if (!o->row) return rn_err_set(e, RN_ENOMEM, "out of memory");
  memcpy((char *)o->row, row, len);
  msgpack_sbuffer kb;
  msgpack_sbuffer_init(&kb);
  if (s->keyless) {
    msgpack_object idv = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = id };
    rn_key_append(&kb, &idv);
  } else {
    const msgpack_object *v = rn_row_unpack(o->row, len, s->rel->schema->ncols, &s->zone);
    if (v) rn_key_encode(s->rel->schema, v, &kb);
  }
  o->klen = kb.size;
  o->key = kb.size ? rn_zone_malloc_no_align(&s->zone, kb.size) : NULL; /* empty: the key was not made */
  if (o->key) memcpy(o->key, kb.data, kb.size);
  msgpack_sbuffer_destroy(&kb);
  return o->key ? 0 : rn_err_set(e, RN_ENOMEM, "out of memory");
}

/* Gathers the group's net changes (the sink consolidates): a key that goes
 * is a delete, a final row an upsert. */
static int ssink_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  (void)rel;
  ssink *s = ctx;
  int rc = 0;
  if (c->old) rc = push_op(s, &s->dels, &s->ndels, &s->cap_dels, info->id, c->old, c->old_len, e);
  if (!rc && c->row) rc = push_op(s, &s->ups, &s->nups, &s->cap_ups, info->id, c->row, c->row_len, e);
  return rc;
}

static int cmp_op_key(const void *x, const void *y)
{
  const op *a = x, *b = y;
  size_t n = a->klen < b->klen ? a->klen : b->klen;
  int c = memcmp(a->key, b->key, n);
  return c ? c : (a->klen > b->klen) - (a->klen < b->klen);
}

/* Is d's key among the group's upserts (sorted by key)? */
static bool upserted(const ssink *s, const op *d)
{
  return s->nups && bsearch(d, s->ups, s->nups, sizeof *s->ups, cmp_op_key) != NULL;
}

/* Writes o's row (or deletes its key) with st. A failure names the table,
 * the group (seq; 0: the rewrite at declaration, which has none) and the
 * row; s->last_rc is its extended code. */
static int run(ssink *s, sqlite3_stmt *st, const op *o, bool key_only, uint64_t seq, rn_err *e)
{
  const rn_schema *sc = s->rel->schema;
  const msgpack_object *v = rn_row_unpack(o->row, o->len, sc->ncols, &s->zone);
  if (!v) return rn_err_set(e, RN_ESTORE, "%s: sqlite: a row could not be decoded", s->rel->name);
  sqlite3_reset(st);
  int at = 1, rc = SQLITE_OK;
  if (s->keyless) rc = sqlite3_bind_int64(st, at++, (sqlite3_int64)o->id);
  if (key_only && !s->keyless)
    for (int i = 0; i < sc->nkey && rc == SQLITE_OK; i++) rc = bind_value(s, st, at++, &v[sc->key_slots[i]], &sc->cols[sc->key_slots[i]]);
  if (!key_only)
    for (int i = 0; i < sc->ncols && rc == SQLITE_OK; i++) rc = bind_value(s, st, at++, &v[i], &sc->cols[i]);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return 0;
  s->last_rc = sqlite3_extended_errcode(s->db);
  char row[256], group[40] = "";
  if (s->keyless) snprintf(row, sizeof row, "runnel_id = %llu", (unsigned long long)o->id);
  else rn_key_format(sc, v, row, sizeof row);
  if (seq) snprintf(group, sizeof group, ", group %llu", (unsigned long long)seq);
  bool constraint = (s->last_rc & 0xff) == SQLITE_CONSTRAINT;
  bool again = s->last_rc == SQLITE_CONSTRAINT_PRIMARYKEY && !s->rel->tablelike && s->keyless; /* a log's id met twice */
  rc = rn_err_set(e, RN_EIO, "%s: sqlite: %s: %s (table \"%s\" in %s%s, row %s)%s", s->rel->name,
                  key_only ? "deleting" : "writing", sqlite3_errmsg(s->db), s->table, s->path, group, row,
                  !seq ? "" : again ? "; the table is the log of its events, and this id is in it already: never "
                                      "overwritten, the group waits in the outbox (a copy of the state gave its ids "
                                      "again, or another state wrote the table: runnel verify)"
                  : constraint ? "; the group waits in the outbox: fix the row or the table, and a later delivery writes it"
                               : "; the group waits in the outbox, and a later delivery tries it again");
  sqlite3_reset(st); /* a failed step keeps the statement busy until reset */
  return rc;
}

/* ---- rows SQLite refuses (SINK-6) ---- */

static void forgive(ssink *s)
{
  for (size_t i = 0; i < s->nbad; i++) {
    free(s->bad[i].key);
    free(s->bad[i].msg);
  }
  s->nbad = 0;
}

static refused *refused_of(ssink *s, const op *o)
{
  for (size_t i = 0; i < s->nbad; i++)
    if (s->bad[i].klen == o->klen && memcmp(s->bad[i].key, o->key, o->klen) == 0) return &s->bad[i];
  return NULL;
}

/* After run wrote o's key: a refusal of it earlier in the run is fixed. */
static void settled(ssink *s, const op *o)
{
  refused *r = s->nbad ? refused_of(s, o) : NULL;
  if (!r) return;
  free(r->key);
  free(r->msg);
  *r = s->bad[--s->nbad];
}

/* run failed on o (e): a row SQLite refused, with the run's transaction
 * still open, is kept aside (0), as a later group of the run may fix it;
 * anything else fails the run (e's code). */
static int refuse(ssink *s, const op *o, rn_err *e)
{
  if ((s->last_rc & 0xff) != SQLITE_CONSTRAINT || sqlite3_get_autocommit(s->db)) return e->code;
  refused *r = refused_of(s, o);
  if (!r) {
    if (s->nbad == RN_SQLITE_REFUSED_MAX) return e->code;
    if (s->nbad == s->capbad) {
      size_t c = s->capbad ? 2 * s->capbad : 8;
      refused *g = realloc(s->bad, c * sizeof *g);
      if (!g) return rn_err_set(e, RN_ENOMEM, "out of memory");
      s->bad = g;
      s->capbad = c;
    }
    r = &s->bad[s->nbad];
    if (!(r->key = malloc(o->klen ? o->klen : 1))) return rn_err_set(e, RN_ENOMEM, "out of memory");
    memcpy(r->key, o->key, o->klen);
    r->klen = o->klen;
    r->msg = NULL;
    s->nbad++;
  }
  char *msg = strdup(e->msg); /* the latest refusal of the key: the row a delivery would write */
  if (!msg) return rn_err_set(e, RN_ENOMEM, "out of memory");
  free(r->msg);
  r->msg = msg;
  rn_err_clear(e);
  return 0;
}

static void clear_group(ssink *s)
{
  s->ndels = s->nups = 0;
  msgpack_zone_clear(&s->zone);
}

/* ---- marks and rewrites (SINK-n) ---- */

/* SQLite, not our flag, says whether a transaction is open: a ROLLBACK that
 * itself failed (out of memory) leaves one open that BEGIN would trip on. */
static int begin(ssink *s, rn_err *e)
{
  if (s->conn->open_txn) return 0;
  /* The file moved or removed under the open connection (mv, rm, a
   * rotation): SQLite would write on into the moved file, or into one no
   * path names. Each run opens the path again first (ssink_renew, SINK-7);
   * a move after that check, or a sink declared on a connection whose file
   * moved, is refused here: the groups wait in the outbox, and the next
   * delivery opens the path again. */
  struct stat st;
  bool there = stat(s->conn->path, &st) == 0;
  if (s->conn->known && (!there || st.st_dev != s->conn->dev || st.st_ino != s->conn->ino))
    return rn_err_set(e, RN_EIO, "%s: sqlite: %s was %s while the pipeline held it open: the groups for table \"%s\" "
                      "wait, none lost; the next delivery writes the table at %s anew", s->rel->name, s->path,
                      there ? "replaced (moved, renamed over)" : "moved or removed", s->table, s->path);
  if (there && !s->conn->known) s->conn->dev = st.st_dev, s->conn->ino = st.st_ino, s->conn->known = true;
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return sink_fail(e, s, "BEGIN");
  s->conn->open_txn = true;
  return 0;
}

static int commit(ssink *s, rn_err *e)
{
  if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) return sink_fail(e, s, "COMMIT");
  s->conn->open_txn = false;
  return 0;
}

static void rollback(ssink *s)
{
  if (!s->conn->open_txn && sqlite3_get_autocommit(s->db)) return;
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  s->conn->open_txn = false;
}

static int mark_sqlite(ssink *s, uint64_t seq, rn_err *e)
{
  sqlite3_reset(s->mark);
  sqlite3_bind_text(s->mark, 1, s->table, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s->mark, 2, (sqlite3_int64)seq);
  sqlite3_bind_text(s->mark, 3, s->state, -1, SQLITE_STATIC);
  sqlite3_bind_text(s->mark, 4, s->state_path, -1, SQLITE_STATIC);
  if (sqlite3_step(s->mark) == SQLITE_DONE) {
    if (sqlite3_changes(s->db) == 1) return 0;
    return rn_err_set(e, RN_EIO, "%s: sqlite table \"%s\" in %s was taken by another runnel state while this one "
                      "wrote it; one state writes a table: name another table", s->rel->name, s->table, s->path);
  }
  int rc = sink_fail(e, s, "writing its mark");
  sqlite3_reset(s->mark);
  return rc;
}

/* At declaration, in the open transaction: the table's row, this state's
 * (SINK-4), with what runnel made the table with when the table is still
 * exactly that (SINK-5; else null: not runnel's as it is). */
static const char *made_now(ssink *s, char *now) { return now && s->create && strcmp(now, s->create) == 0 ? s->create : NULL; }

static bool same_text(const char *a, const char *b) { return a ? b && strcmp(a, b) == 0 : !b; }

/* Whether the table's row is already what claim(s, seq) would write. */
static bool claimed(ssink *s, uint64_t seq)
{
  if (!s->m.found || s->m.seq != seq || !same_text(s->m.state, s->state) || !same_text(s->m.state_path, s->state_path))
    return false;
  char *now = table_sql(s, s->table);
  bool same = same_text(s->m.made, made_now(s, now));
  free(now);
  return same;
}

static int claim(ssink *s, uint64_t seq, rn_err *e)
{
  char *now = table_sql(s, s->table);
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(s->db, "INSERT INTO runnel_sinks (tbl, seq, state, state_path, made) VALUES (?, ?, ?, ?, ?) "
                              "ON CONFLICT (tbl) DO UPDATE SET seq = excluded.seq, state = excluded.state, "
                              "state_path = excluded.state_path, made = excluded.made", -1, &st, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, s->table, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)seq);
    sqlite3_bind_text(st, 3, s->state, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, s->state_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, made_now(s, now), -1, SQLITE_STATIC); /* NULL binds null */
    rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(st);
  free(now);
  return rc == SQLITE_OK ? 0 : sink_fail(e, s, "writing its mark");
}

static int rewrite_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  ssink *s = ctx;
  op o = { id, row, len, NULL, 0 };
  int rc = run(s, s->upsert, &o, false, 0, &s->p->err);
  msgpack_zone_clear(&s->zone);
  return rc;
}

/* Writes the relation's current rows into the open transaction, after
 * deleting the table's rows when wipe. */
static int rewrite(ssink *s, bool wipe, rn_err *e)
{
  if (wipe) {
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    add(&b, "DELETE FROM ");
    quote(&b, s->table);
    rn_buf_write(&b, "", 1);
    int rc = sqlite3_exec(s->db, b.data, NULL, NULL, NULL);
    msgpack_sbuffer_destroy(&b);
    if (rc != SQLITE_OK) return sink_fail(e, s, "clearing the table for a rewrite");
  }
  return rn_rel_scan(s->rel, rewrite_row, s);
}

/* Whether the outbox's record of the sink names rel as the relation it
 * was last declared on (a state before 0.23 names none: taken as rel). A
 * table kept for another relation holds that one's rows (SINK-2). */
static bool same_relation(const rn_outbox_mark *m, const rn_rel *rel)
{
  return !m->relation[0] || strcmp(m->relation, rel->name) == 0;
}

/* The id the next event of stream-like r gets: a filter or map passes
 * its input's ids on. */
static uint64_t next_event_id(const rn_rel *r)
{
  while ((r->kind == RN_REL_FILTER || r->kind == RN_REL_MAP) && r->input) r = r->input;
  return r->next_id;
}

/* A stream's log starting anew (a new sink, one out of step, a table taken
 * over from a state gone): its events are added by row id and never
 * overwrite one (prepare), so a log already holding an id the stream gives
 * next (another state's, or a copy's of this one that went further) would
 * refuse that group, and every group after it, at each delivery. Refused
 * at declaration instead, naming the table, its ids and the stream's. */
static int log_ids_free(ssink *s, rn_err *e)
{
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  add(&b, "SELECT max(\"runnel_id\") FROM ");
  quote(&b, s->table);
  rn_buf_write(&b, "", 1);
  sqlite3_stmt *st = NULL;
  int rc = b.data ? sqlite3_prepare_v2(s->db, b.data, -1, &st, NULL) : SQLITE_NOMEM;
  msgpack_sbuffer_destroy(&b);
  if (rc != SQLITE_OK) return sink_fail(e, s, "reading the log's ids");
  rc = sqlite3_step(st);
  uint64_t next = next_event_id(s->rel);
  int64_t top = rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return sink_fail(e, s, "reading the log's ids");
  if (top <= 0 || (uint64_t)top < next) return 0;
  return rn_err_set(e, RN_EINVAL, "%s: sqlite table \"%s\" in %s is a log of events holding row ids up to %lld, and "
                    "the next event of %s is id %llu: its events would meet ids the log has (another state wrote "
                    "it, or a copy of this state that went further) and wait for good; name another table, or drop "
                    "or rename this one", s->rel->name, s->table, s->path, (long long)top, s->rel->name,
                    (unsigned long long)next);
}

/* At declaration: SQLite's mark against the outbox's record of the sink
 * (SINK-2, 3); sets s->written, from where the outbox delivers. */
static int check_marks(ssink *s, const char *name, rn_err *e)
{
  rn_pipeline *p = s->p;
  rn_outbox_mark m;
  int rc = rn_outbox_mark_read(p, name, NULL, &m); /* commits carried groups first */
  if (rc) return rc;
  bool table = s->rel->tablelike;
  /* In step: the outbox holds every group after SQLite's mark. A table
   * must also have seen every group (a stream's log just goes on); groups
   * recorded before the relation changed want a rewrite. */
#define IN_STEP(w)                                                                                                      \
  (marked(s) && !(table && s->made) && m.found && same_relation(&m, s->rel) && m.delivered <= (w) && (w) <= p->seq &&  \
   (m.seen == p->seq || !table) && !(table && s->rel->evolved) /* rows changed, no change emitted (evolve.h) */ && \
   !(table && rn_outbox_stale(p, name, s->rel, (w))))
  /* a table in step whose row says all it should needs no write, so no
   * lock: a reader of the file never holds up the declaration */
  if ((rc = read_mark(s, e)) || (rc = check_owner(s, e))) return rc;
  if (IN_STEP(s->m.seq) && claimed(s, s->m.seq)) {
    s->written = s->staged = s->m.seq;
    return 0;
  }
  if ((rc = begin(s, e))) return rc; /* the row read again, checked and written in one transaction (SINK-4) */
  if ((rc = read_mark(s, e)) || (rc = check_owner(s, e))) {
    rollback(s);
    return rc;
  }
  uint64_t w = s->m.seq;
  if (IN_STEP(w)) {
    if (!(rc = claim(s, w, e)) && !(rc = commit(s, e))) {
      s->written = s->staged = w;
      return 0;
    }
    rollback(s);
    return rc;
  }
#undef IN_STEP
  /* A state that kept the table and is out of step with it (the sink was
   * left out of some groups, the file was replaced) rewrites it; a state
   * new to the sink, or taking it over from a state gone, writes its rows
   * (if it has any) and deletes nothing: the table's rows may be another
   * state's or the user's. */
  bool own = marked(s) && s->m.state && strcmp(s->m.state, s->state) == 0; /* SINK-3: this state's rows */
  if (table && (m.found || p->seq > 0)) rc = rewrite(s, (m.found && !s->adopt) || own, e), s->rewritten = true;
  if (!table && s->keyless) rc = log_ids_free(s, e);
  if (!rc) rc = claim(s, p->seq, e);
  if (!rc) rc = commit(s, e);
  if (rc) {
    rollback(s);
    return rc;
  }
  s->written = s->staged = p->seq;
  return 0;
}

/* ---- the file moved under the connection (SINK-7) ---- */

/* What a sink had prepared on a connection's old handle. */
typedef struct held_stmts {
  sqlite3_stmt *upsert, *del, *mark;
  char *create;           /* malloc'd */
} held_stmts;

static held_stmts stmts_of(const ssink *s) { return (held_stmts){ s->upsert, s->del, s->mark, s->create }; }

static void stmts_set(ssink *s, held_stmts h)
{
  s->upsert = h.upsert;
  s->del = h.del;
  s->mark = h.mark;
  s->create = h.create;
}

static void stmts_free(held_stmts h)
{
  sqlite3_finalize(h.upsert);
  sqlite3_finalize(h.del);
  sqlite3_finalize(h.mark);
  free(h.create);
}

/* s on the file opened anew, as its declaration sets it up: runnel_sinks,
 * its owner (SINK-4), its table made, or followed (SINK-5), or refused. */
static int setup_again(ssink *s, rn_err *e)
{
  int rc = marks_table(s, e);
  if (!rc) rc = read_mark(s, e);
  if (!rc) rc = check_owner(s, e);
  if (!rc) rc = prepare(s, s->table, s->path, e);
  return rc;
}

/* In the open transaction on the file opened anew: a table-like
 * relation's table written whole from its rows, as check_marks writes one
 * out of step (its rows deleted first unless another state's gone table
 * is taken over, SINK-3), and marked at the pipeline's seq; a stream's log
 * marked where it was, its waiting groups go on into it. *seq: the mark. */
static int write_again(ssink *s, uint64_t *seq, rn_err *e)
{
  rn_pipeline *p = s->p;
  int rc = 0;
  *seq = s->written;
  if (s->rel->tablelike) {
    rn_err saved = p->err; /* rewrite's row failures and the scan's say it there */
    rc = rewrite(s, !s->adopt, &p->err);
    rn_err why = p->err;
    p->err = saved;
    if (rc) *e = why; /* after the restore: e may be &p->err (a declaration's conn_renew) */
    *seq = p->seq; /* no carried transaction (ssink_renew): the rows read are those of every group committed */
  }
  if (!rc) rc = claim(s, *seq, e);
  return rc;
}

/* SINK-7: opens the path of c (the connection of `first` and the sinks
 * beside it) again, sets every sink up on it and writes their tables in
 * one SQLite transaction; only then closes the old handle, which holds no
 * transaction and is written nothing (the moved file is left as it was).
 * Any failure closes the new handle and keeps the old one, unused: the
 * next delivery tries again. there: a file was at the path when the move
 * was found. */
static int conn_reopen(ssink *first, bool there, rn_err *e)
{
  rn_sqlite_conn *c = first->conn;
  int n = 0;
  for (ssink *o = c->sinks; o; o = o->next_on_conn) n++;
  held_stmts old[n > 0 ? n : 1];
  uint64_t seqs[n > 0 ? n : 1];
  sqlite3 *db = NULL;
  struct stat st;
  const char *kind = rn_sink_path_kind(c->path);
  int rc = 0, i = 0;
  /* The old handle's WAL, if the file is in WAL mode, is named by the path
   * (path-wal, path-shm), where the new handle would take it for its own
   * file's (or delete it, opening an empty one): its frames go into the
   * moved file first, through the handle's descriptor, and the WAL is left
   * empty. A checkpoint another process's reader holds up leaves the
   * reopen for the next delivery. Without WAL this does nothing. */
  int frames = 0, moved = 0;
  if (c->db && sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &frames, &moved) != SQLITE_OK)
    rc = rn_err_set(e, RN_EIO, "%s: its write-ahead log could not be emptied into the moved file: %s", c->path,
                    sqlite3_errmsg(c->db));
  else if (frames > 0 && moved < frames)
    rc = rn_err_set(e, RN_EIO, "%s: its write-ahead log could not be emptied into the moved file (a reader holds it)",
                    c->path);
  else if (kind) rc = rn_err_set(e, RN_EINVAL, "%s is %s, not a regular file", c->path, kind);
  else if (open_file(c->path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &db) != SQLITE_OK)
    rc = rn_err_set(e, RN_EIO, "%s: %s", c->path, db ? sqlite3_errmsg(db) : "out of memory");
  else if (stat(c->path, &st) != 0)
    rc = rn_err_set(e, RN_EIO, "%s: %s", c->path, strerror(errno));
  if (!rc) sqlite3_busy_timeout(db, c->busy_ms);
  for (ssink *o = c->sinks; o; o = o->next_on_conn, i++) {
    old[i] = stmts_of(o);
    stmts_set(o, (held_stmts){ NULL, NULL, NULL, NULL });
    o->db = db;
  }
  for (ssink *o = c->sinks; o && !rc; o = o->next_on_conn) rc = setup_again(o, e);
  if (!rc && sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) rc = sink_fail(e, first, "BEGIN");
  i = 0;
  for (ssink *o = c->sinks; o && !rc; o = o->next_on_conn, i++) rc = write_again(o, &seqs[i], e);
  if (!rc && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) rc = sink_fail(e, first, "COMMIT");
  if (rc && db && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  i = 0;
  for (ssink *o = c->sinks; o; o = o->next_on_conn, i++) {
    stmts_free(rc ? stmts_of(o) : old[i]);
    if (rc) {
      stmts_set(o, old[i]);
      o->db = c->db;
    } else {
      o->written = o->staged = seqs[i]; /* the waiting groups it covers are skipped (SINK-1) */
    }
  }
  sqlite3 *gone = rc ? db : c->db;
  if (!rc) c->db = db, c->dev = st.st_dev, c->ino = st.st_ino, c->known = true;
  sqlite3_close_v2(gone); /* its statements are finalized; _v2 frees it even if one was not */
  if (!rc) return 0;
  char why[RN_ERRMSG_MAX];
  snprintf(why, sizeof why, "%s", e->msg);
  return rn_err_set(e, rc, "%s: sqlite: %s was %s while the pipeline held it open, and table \"%s\" cannot be made "
                    "at %s anew: %s; the groups for table \"%s\" wait, none lost, and each delivery tries again",
                    first->rel->name, first->path, there ? "replaced (moved, renamed over)" : "moved or removed",
                    first->table, first->path, why, first->table);
}

/* ops.renew, before each run: 0 when the file at the path is the one the
 * connection holds; else 1, and with reopen the path opened again and
 * the tables written there (conn_reopen), or the failure. The outbox asks
 * reopen only with no carried transaction open, so the relations' rows
 * read are what the groups delivered made. A child's connection is its
 * parent's ("Fork"): left alone. */
static int ssink_renew(void *ctx, bool reopen, rn_err *e)
{
  ssink *s = ctx;
  rn_sqlite_conn *c = s->conn;
  struct stat st;
  bool there = stat(c->path, &st) == 0;
  if (c->pid != rn_envs_self() || c->open_txn || !c->known ||
      (there && st.st_dev == c->dev && st.st_ino == c->ino))
    return 0;
  if (!reopen) return 1;
  if (s->p->store.wtxn) /* NEVER: the rows read would hold carried groups a crash may take */
    return rn_err_set(e, RN_EMISUSE, "%s: sqlite: %s moved: not opened again inside a carried transaction",
                      s->rel->name, s->path);
  return conn_reopen(s, there, e) ? e->code : 1;
}

/* ---- one group, after it is durable ---- */

/* Writes a delivered group's net effect and its mark into the run's SQLite
 * transaction; a group SQLite's mark already covers is skipped (SINK-1). */
static int ssink_commit(void *ctx, uint64_t seq, rn_err *e)
{
  ssink *s = ctx;
  if (seq <= s->written) {
    clear_group(s);
    return 0;
  }
  int rc = begin(s, e);
  if (s->nups) qsort(s->ups, s->nups, sizeof *s->ups, cmp_op_key); /* one net row per key: order is free; ups may be NULL */
  for (size_t i = 0; i < s->ndels && !rc; i++) {
    if (upserted(s, &s->dels[i])) continue;
    if (!(rc = run(s, s->del, &s->dels[i], true, seq, e))) settled(s, &s->dels[i]);
    else rc = refuse(s, &s->dels[i], e);
  }
  for (size_t i = 0; i < s->nups && !rc; i++) {
    if (!(rc = run(s, s->upsert, &s->ups[i], false, seq, e))) settled(s, &s->ups[i]);
    else rc = refuse(s, &s->ups[i], e);
  }
  if (!rc) rc = mark_sqlite(s, seq, e);
  if (!rc) s->staged = seq;
  clear_group(s);
  return rc;
}

/* The runs of the file's sinks commit together: one SQLite transaction,
 * committed by the first of them to finish (OUTBOX-2: the outbox calls
 * the others' finish only once it succeeded). */
static int ssink_finish(void *ctx, rn_err *e)
{
  ssink *s = ctx;
  int rc = 0;
  for (ssink *o = s->conn->sinks; o && !rc && s->conn->open_txn; o = o->next_on_conn)
    if (o->nbad) rc = rn_err_keep(e, RN_EIO, o->bad[0].msg); /* refused, and no later group fixed it (SINK-6) */
  if (!rc) rc = s->conn->open_txn ? commit(s, e) : 0;
  if (rc) rollback(s);
  else s->written = s->staged;
  return rc;
}

static void ssink_discard(void *ctx)
{
  ssink *s = ctx;
  rollback(s);
  clear_group(s);
  forgive(s);
  s->staged = s->written;
}

static void *ssink_shared(void *ctx) { return ((ssink *)ctx)->conn; }

static void free_ssink(void *ctx)
{
  ssink *s = ctx;
  if (!s->conn || s->conn->pid == rn_envs_self()) { /* a parent's statements are left alone ("Fork") */
    sqlite3_finalize(s->upsert);
    sqlite3_finalize(s->del);
    sqlite3_finalize(s->mark);
  }
  for (ssink **at = s->conn ? &s->conn->sinks : NULL; at && *at; at = &(*at)->next_on_conn)
    if (*at == s) { *at = s->next_on_conn; break; }
  if (s->conn) conn_put(s->p, s->conn);
  free(s->dels);
  free(s->ups);
  free(s->table);
  free(s->path);
  free(s->create);
  free(s->state_path);
  smark_clear(&s->m);
  forgive(s);
  free(s->bad);
  msgpack_zone_destroy(&s->zone);
  free(s);
}

/* "sqlite:" the database's real path (as given if it has none yet),
 * "\x1f", the table: the sink's name in the outbox. */
static char *name_of(const char *path, const char *table)
{
  char real[PATH_MAX];
  const char *where = realpath(path, real) ? real : path;
  size_t n = RN_PREFIX_LEN(RN_SINK_SQLITE) + strlen(where) + 1 + strlen(table);
  char *k = malloc(n + 1);
  if (k) snprintf(k, n + 1, RN_SINK_SQLITE "%s\x1f%s", where, table);
  return k;
}

/* Whether connections a and b of one process hold one file under two
 * names (a hard link, a bind mount): realpath tells them apart, the
 * device and inode do not. */
static bool same_file(const rn_sqlite_conn *a, const rn_sqlite_conn *b)
{
  return a == b || (a->pid == b->pid && a->known && b->known && a->dev == b->dev && a->ino == b->ino);
}

/* SQLite compares table names without ASCII case: a table another sink
 * of the file keeps, spelled otherwise, is that table. So is one a sink
 * keeps through another name of the file: both would write one table. */
static int table_taken(const ssink *s, const char *path, rn_err *e)
{
  for (const rn_sqlite_conn *c = s->p->sqlite_conns; c; c = c->next) {
    if (!same_file(c, s->conn)) continue;
    for (const ssink *o = c->sinks; o; o = o->next_on_conn) {
      if (sqlite3_stricmp(o->table, s->table) != 0) continue;
      if (c == s->conn)
        return rn_err_set(e, RN_EINVAL, "%s: sqlite: table \"%s\" in %s is table \"%s\" to SQLite (its names ignore "
                          "ASCII case), which a sink of %s keeps; name another table",
                          s->rel->name, s->table, path, o->table, o->rel->name);
      return rn_err_set(e, RN_EINVAL, "%s: sqlite: table \"%s\" in %s is table \"%s\" in %s (one file under two "
                        "names: a hard link), which a sink of %s keeps; name another table",
                        s->rel->name, s->table, path, o->table, o->path, o->rel->name);
    }
  }
  return 0;
}

static const rn_outbox_ops ssink_ops = { ssink_change, ssink_commit, ssink_finish, ssink_discard, NULL, NULL,
                                         ssink_shared, NULL, ssink_renew,
                                         false, NULL }; /* a mirror of the rows now: made again instead */

/* A sink declared on a file whose connection other sinks share, and whose
 * file moved since: the path is opened again for them first (SINK-7),
 * after the carried groups are committed (their rows are read), so the
 * new sink is set up on the file at the path, not on the moved one. */
static int conn_renew(rn_pipeline *p, rn_sqlite_conn *c)
{
  if (!c->sinks || ssink_renew(c->sinks, false, &p->err) != 1) return 0;
  int rc = p->store.wtxn ? rn_flush(p) : 0; /* its delivery pass may open the path again itself */
  if (!rc && ssink_renew(c->sinks, true, &p->err) < 0) rc = p->err.code;
  return rc;
}

int rn_sqlite_sink(rn_pipeline *p, rn_rel *rel, const char *path, const char *table, int busy_ms)
{
  if (p->state != RN_IDLE) /* the marks are checked, and maybe repaired, outside groups */
    return rn_err_set(&p->err, RN_EMISUSE, "%s: sinks are added outside groups", rel->name);
  if (rn_check_not_lookup(p, rel->name, "sink", rel)) return p->err.code; /* before the file or table is made */
  if (sqlite3_stricmp(table, "runnel_sinks") == 0) /* made as a mirror, it left no room for the marks (SINK-1) */
    return rn_err_set(&p->err, RN_EINVAL, "%s: sqlite: table \"%s\" in %s: runnel keeps its marks in runnel_sinks; "
                      "name another table", rel->name, table, path);
  ssink *s = calloc(1, sizeof *s);
  if (!s || !msgpack_zone_init(&s->zone, 4096)) {
    free(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  s->p = p;
  s->rel = rel;
  s->keyless = rel->schema->nkey == 0;
  int rc = 0;
  char *name = NULL;
  if (!(s->table = strdup(table)) || !(s->path = strdup(path)) || !(s->state_path = real_path_of(p->store.path)))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) rc = rn_state_id(p, s->state);
  if (!rc && !(s->conn = conn_get(p, path, rel->name, &p->err))) rc = p->err.code;
  /* named once the file is there (conn_get made it): a file made by this
   * declaration was named by the path as given, the next declaration by
   * its real path, and the groups waiting under the first name never
   * reached the table */
  if (!rc && !(name = name_of(path, table))) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) rc = rn_outbox_sink_check(p, rel, name); /* before the table is dropped or rewritten: it may be a live sink's */
  if (!rc) rc = conn_renew(p, s->conn);
  if (!rc && !(rc = table_taken(s, path, &p->err))) {
    s->db = s->conn->db;
    if (busy_ms >= 0) sqlite3_busy_timeout(s->db, s->conn->busy_ms = busy_ms); /* the file's connection: the last one given */
    /* another state's table is refused before anything is dropped or written (SINK-4) */
    if (!(rc = marks_table(s, &p->err)) && !(rc = read_mark(s, &p->err)) && !(rc = check_owner(s, &p->err)))
      rc = prepare(s, table, path, &p->err);
  }
  if (!rc) rc = check_marks(s, name, &p->err);
  if (rc) {
    free(name);
    free_ssink(s);
    return rc;
  }
  s->next_on_conn = s->conn->sinks;
  s->conn->sinks = s;
  size_t n = strlen(name) + 40; /* the label: the table and its file, not the key holding a \x1f */
  char *label = malloc(n);
  if (label) snprintf(label, n, "durable sink to table \"%s\" in %s", table, name + RN_PREFIX_LEN(RN_SINK_SQLITE));
  if (label) label[strcspn(label, "\x1f")] = '\0';
  bool rewritten = s->rewritten; /* s is freed when the add fails */
  rc = label ? rn_outbox_sink_add(p, rel, name, label, true, &ssink_ops, s, free_ssink, s->written, 0)
             : (free_ssink(s), rn_err_set(&p->err, RN_ENOMEM, "out of memory"));
  if (!rc && rewritten) rn_outbox_sink_holds_told(p); /* the rows a pending rebuild made are in the table */
  free(label);
  free(name);
  return rc;
}

/* ---- the lookup source: SELECT cols FROM table WHERE key = ? ---- */

typedef struct ssource {
  sqlite3 *db;
  sqlite3_stmt *select;
  pid_t pid;              /* the process that opened db (see "Fork" above) */
  char *path;             /* the database as given */
  char *sql;              /* the SELECT */
  char *table;            /* for errors */
} ssource;

static void free_ssource(void *ctx)
{
  ssource *s = ctx;
  if (s->pid == rn_envs_self()) { /* a parent's connection is left alone ("Fork") */
    sqlite3_finalize(s->select);
    sqlite3_close(s->db);
  }
  free(s->path);
  free(s->sql);
  free(s->table);
  free(s);
}

/* Opens s's own connection and prepares its SELECT; rel names the lookup
 * in errors. The connection it had (a parent's, in a forked child) is
 * left alone. */
static int ssource_open(ssource *s, const char *rel, rn_err *e)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *select = NULL;
  int rc = 0;
  if (open_file(s->path, SQLITE_OPEN_READONLY, &db) != SQLITE_OK)
    rc = rn_err_set(e, RN_EIO, "%s: sqlite_source: %s: %s", rel, s->path, db ? sqlite3_errmsg(db) : "out of memory");
  else if (sqlite3_busy_timeout(db, 5000),
           sqlite3_prepare_v3(db, s->sql, -1, SQLITE_PREPARE_PERSISTENT, &select, NULL) != SQLITE_OK)
    rc = rn_err_set(e, RN_EINVAL, "%s: sqlite_source: %s: %s", rel, s->path, sqlite3_errmsg(db));
  if (rc) {
    sqlite3_close(db); /* its own: the one it had stays as it was */
    return rc;
  }
  s->db = db;
  s->select = select;
  s->pid = rn_envs_self();
  return 0;
}

/* Column i of the selected row as the lookup's column c (text and blobs
 * copied into z: the statement's memory moves on; lists, maps, structs
 * and any parsed from their JSON text). */
static int read_column(ssource *s, int i, const rn_column *c, const char *rel, msgpack_object *v, msgpack_zone *z,
                       rn_err *e)
{
  switch (sqlite3_column_type(s->select, i)) {
  case SQLITE_NULL: v->type = MSGPACK_OBJECT_NIL; return 0;
  case SQLITE_INTEGER: {
    sqlite3_int64 x = sqlite3_column_int64(s->select, i);
    if (c->type == RN_T_BOOL) { v->type = MSGPACK_OBJECT_BOOLEAN; v->via.boolean = x != 0; }
    else if (x >= 0) { v->type = MSGPACK_OBJECT_POSITIVE_INTEGER; v->via.u64 = (uint64_t)x; }
    else { v->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; v->via.i64 = x; }
    return 0;
  }
  case SQLITE_FLOAT: v->type = MSGPACK_OBJECT_FLOAT64; v->via.f64 = sqlite3_column_double(s->select, i); return 0;
  default: break;
  }
  bool blob = sqlite3_column_type(s->select, i) == SQLITE_BLOB;
  int n = sqlite3_column_bytes(s->select, i);
  const void *d = blob ? sqlite3_column_blob(s->select, i) : (const void *)sqlite3_column_text(s->select, i);
  char *copy = rn_zone_malloc_no_align(z, (size_t)(n ? n : 1));
  if (!copy) return rn_err_set(e, RN_ENOMEM, "out of memory");
  if (n) memcpy(copy, d, (size_t)n);
  v->type = blob ? MSGPACK_OBJECT_BIN : MSGPACK_OBJECT_STR;
  v->via.str.ptr = copy;
  v->via.str.size = (uint32_t)n;
  if (c->type != RN_T_LIST && c->type != RN_T_MAP && c->type != RN_T_ANY && c->type != RN_T_STRUCT) return 0;
  if (!rn_json_parse(copy, (size_t)n, v, z, e)) return 0;
  char why[RN_ERRMSG_MAX];
  snprintf(why, sizeof why, "%s", e->msg);
  return rn_err_set(e, e->code, "%s: column \"%s\": sqlite_source table \"%s\": %s", rel, c->name, s->table, why);
}

static int ssource_fetch(void *ctx, rn_rel *lk, const msgpack_object *key, int nkey, msgpack_sbuffer *row,
                         int *found, rn_err *e)
{
  ssource *s = ctx;
  const rn_schema *ls = lk->schema;
  rn_pipeline *p = lk->p;
  if (s->pid != rn_envs_self() && ssource_open(s, lk->name, e)) return e->code; /* a forked child's own ("Fork") */
  sqlite3_reset(s->select);
  for (int i = 0; i < nkey; i++) bind_value(NULL, s->select, i + 1, &key[i], NULL);
  int rc = sqlite3_step(s->select);
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW)
    return rn_err_set(e, RN_EIO, "%s: sqlite_source table \"%s\" in %s: looking up: %s", lk->name, s->table, s->path,
                      sqlite3_errmsg(s->db));
  msgpack_object *v = rn_zone_malloc(&p->scratch, sizeof *v * (size_t)ls->ncols);
  uint8_t *given = rn_zone_malloc(&p->scratch, (size_t)ls->ncols);
  rc = v && given ? 0 : rn_err_set(e, RN_ENOMEM, "out of memory");
  for (int i = 0; i < ls->ncols && !rc; i++) {
    given[i] = 1;
    rc = read_column(s, i, &ls->cols[i], lk->name, &v[i], &p->scratch, e);
  }
  if (!rc) rc = rn_row_normalize(ls, lk->name, RN_ROW_FULL, v, given, &p->scratch, e);
  if (!rc) rn_row_pack(ls, v, row);
  else if (rc != RN_ENOMEM) rn_lookup_bad_row(lk, key, e);
  sqlite3_reset(s->select); /* on every path: a statement left stepping holds the file's read lock */
  return rc;
}

int rn_sqlite_source(const char *path, const char *table, const rn_schema *ls, const char *rel,
                     rn_lookup_fetch *fetch, void **ctx, rn_free_fn *free_ctx, rn_err *e)
{
  ssource *s = calloc(1, sizeof *s);
  if (!s || !(s->table = strdup(table)) || !(s->path = strdup(path))) {
    if (s) free(s->table);
    free(s);
    return rn_err_set(e, RN_ENOMEM, "out of memory");
  }
  s->pid = rn_envs_self();
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  add(&b, "SELECT ");
  names(&b, ls, false, ", ", "");
  add(&b, " FROM ");
  quote(&b, table);
  add(&b, " WHERE ");
  names(&b, ls, true, " AND ", " = ?");
  rn_buf_write(&b, "", 1);
  s->sql = b.data ? strdup(b.data) : NULL;
  msgpack_sbuffer_destroy(&b);
  int rc = s->sql ? ssource_open(s, rel, e) : rn_err_set(e, RN_ENOMEM, "out of memory");
  if (rc) {
    free_ssource(s);
    return rc;
  }
  *fetch = ssource_fetch;
  *ctx = s;
  *free_ctx = free_ssource;
  return 0;
}
