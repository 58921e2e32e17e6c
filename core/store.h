/* store.h — the LMDB environment of one pipeline, and the one list of
 * what the state holds: every key prefix and named database below is a
 * file format (a state one build writes, every build reads), named here
 * and used through these constants only.
 *
 * Named database "meta" (RN_DB_META), the catalogue:
 *
 *     "seq"           |u64 seq|                        last committed group
 *     "r:" name       msgpack [kind, schema description]
 *                     kind: rn_relkind (pipeline.h, pinned values)
 *     "n:" name       |u64 next_id|u64 count|u64 last seq|
 *                     last seq: the group a derived relation's state is
 *                     current as of (stale otherwise: rebuilt at open);
 *                     count: a table's rows, or the events a relation
 *                     numbering events gave (0.34 and later; 0 before):
 *                     next_id > count, or its ids went back (verify.c)
 *     "S:" name       msgpack [schema description]     a permanent store
 *     "ev"            |name\0|…|check\0| the relations changed (a table's rows rewritten
 *                     to a new schema, a declaration or function changed)
 *                     and no group committed since: what is declared over
 *                     them meanwhile is rebuilt, also after a crash between
 *                     the change and their declaration (evolve.c); empty
 *                     (runnel 0.16): every stateful relation; malformed
 *                     or failing its check (damaged): every relation counts as
 *                     changed, noted. check: "\xff" "nl1" and 16 hex digits
 *                     (evolve_reads.h; absent in runnel 0.22 and older: read
 *                     as before)
 *     "Ss:" name      |u64 seq|                        the last group a permanent store saw
 *                     (store_sink.c; damaged: written again, noted)
 *     "d:" name       msgpack: a derived relation's declaration, for readers
 *                     in other processes: an aggregate's (drawn in
 *                     aggregate_read.c), a join's (join_read.c), a
 *                     select's (reader.h)
 *     "od:" sink      |u64 seen|u64 delivered|u64 position|
 *                     a durable sink's record (outbox.c); a sink name too
 *                     long for a key is "od#" and its 16 hex digit hash.
 *                     sink: "sink:" name (Lua and C), "ndjson:" real path,
 *                     "sqlite:" real path "\x1f" table
 *     "ol:" tag layout  msgpack [relation, schema description]
 *                     16 hex digits each: a durable sink's tag (the hash of
 *                     its name, as its outbox keys begin) and a layout its
 *                     waiting groups may be in (outbox.c (11)): the
 *                     columns those rows were committed with, which a log
 *                     sink (NDJSON, JetStream) delivers them in after its
 *                     relation's columns changed. Written at declaration,
 *                     dropped once no waiting group is in it (0.37;
 *                     older builds ignore it: they refuse such a sink)
 *     "sid"           32 hex digits                    the state's id (jetstream.c):
 *                     message ids of JetStream sinks begin with it
 *     "fn:" name      |u64 hash|                       the fingerprint of the Lua functions a
 *                     derived relation runs (evolve_code.h)
 *     "fc:" name      |"\xff" "fc1"|u64 check|code|   a filter's or map's function, to run
 *                     again (lua/runnel.lua's format; empty: it cannot be);
 *                     check: its CRC-64, a copy that fails it is not run
 *                     (evolve_code.c; runnel 0.19 kept |code| alone)
 *     "fo:" name      the same                         the function its sinks' rows came from,
 *                     from a change of function until what it changed is kept
 *                     for them ("rb:", evolve_log.c; evolve_code.h)
 *     "fmt"           |u32 format|                     the state's format (RN_STATE_FORMAT);
 *                     absent: 0 (runnel 0.17 and older). An older format
 *                     is brought up to date at open (upgrade.c)
 *     "rd:" name      |read name\0|…|check\0|         the relations its functions were seen
 *                     to read (other:get(k) in a mapper: evolve_reads.h);
 *                     malformed or failing its check (damaged): its
 *                     declaration is refused. check as "ev"'s
 *     "eg:" name      |u64 n|                          when its rows last changed wholesale:
 *                     declared new or again, or marked changed at declaration
 *                     (rebuilt, rewritten, over a changed input: evolve.h);
 *                     n is unique in the state ("egn"). An attach of it in
 *                     another state reads it (rn_attach_identity)
 *     "egn"           |u64 n|                          the last "eg:" n given
 *     "jp:" stream "\x1f" subject  |u64 seq|           a JetStream source's position:
 *                     the last stream sequence applied, written in the
 *                     group that applied it (js_source.c)
 *     "jm:" stream "\x1f" subject  |i64 ns|            when the stream that position counts
 *                     in was made (JetStream's "created"), written with it;
 *                     another time now: the stream was made again (0.40;
 *                     absent before: not checked)
 *     "ch:" name      |u64 seq|                        the last group in which the relation
 *                     emitted a change (written by runnel 0.19 and later)
 *     "chs"           |u64 from|u64 upto|              the "ch:" records know every change of
 *                     groups from+1 to upto; upto is not "seq" when an
 *                     older build committed groups since: then only the
 *                     groups after the open's seq are known (outbox.c's
 *                     note of the groups a durable sink missed); damaged
 *                     (another size, backwards, past "seq"): not known, noted
 *     "ig:" name      |u64 id|                         a keyed table whose ids are not 1..n: its
 *                     counters were once past its entries + 1 (a damaged "n:"
 *                     raised them) and id, its largest then, was below them
 *                     (relation.c, check_counters): every open reads its
 *                     largest id, as its next id being entries + 1 proves nothing
 *     "nd:" name      |u64 next_id|                    a relation (of any kind: a table's
 *                     waiting groups reach its sinks after the drop too)
 *                     dropped when it had given
 *                     ids up to next_id - 1 (drop.c): one declared again under
 *                     its name goes on from it, so the logs its sinks kept
 *                     never meet an id twice (relation.c); kept for good
 *     "dk:" name      msgpack [kind, schema description] a table dropped (drop.c): its
 *                     catalogue entry, the columns of the rows "dt:" name keeps;
 *                     removed, and "dt:" emptied, by the first group that ends
 *                     while a table of that name is declared again: the filters
 *                     and maps left over it make from them the rows their sinks
 *                     were told, and tell them what left (evolve_log.c); kept
 *                     only while the state holds a filter or map not declared:
 *                     a drop that leaves none forgets them all (drop.c, 0.41)
 *
 * Named database "outbox" (RN_DB_OUTBOX), durable sinks' pending groups:
 *
 *     |u64 tag BE|u64 seq BE| -> msgpack [[verb, id, row|nil, old|nil] …]
 *     (newer entries start with a fixed uint64, the layout: outbox.c (8))
 *
 * Named databases of a relation or store called name, "<prefix>" name:
 *
 *     "t:"   keyed table    |encoded key| -> |u64 id|u8 flags|[u32 klen|key]|row|
 *            keyless table  |u64 id BE| -> |row|
 *     "h:"   keyless table  |u64 hash(row)| -> dup |u64 id BE|
 *     "ji:" "jr:" "jc:"     a join's state (drawn in join.h)
 *     "ag:" "am:" "aw:"     an aggregate's state (drawn in aggregate.h)
 *     "dr:" "dh:"           a distinct's state (drawn in distinct.c)
 *     "tt:" "tx:" "tp:"     a top's state (drawn in top.c):
 *            |by key|order key|u64 id BE| -> |u64 rank|row|   (the tops)
 *            |by key|order key|u64 id BE| -> |row|            (the rest)
 *            "decl" -> msgpack [n, [by slots], [order slots], [desc flags]]
 *     "ix:"  an index's rows in its order (index.c):
 *            |order key|u64 id BE| -> |row|
 *     "rb:"  a rebuild's changes the next group tells the sinks (evolve_log.c):
 *            |u64 id BE| -> |u8 has|u32 told_len|told row|now row|
 *     "dt:"  a dropped table's rows (drop.c; "dk:" name):
 *            |u64 id BE| -> |row|
 *     "st:"  a permanent store's rows (store_sink.c; not a relation):
 *            |encoded key| -> |row|   (keyless: |u64 id BE| -> |row|)
 *
 * Integers are host order except where drawn BE (big-endian: keys that
 * must sort). The write transaction of the open group is store->wtxn; reads
 * outside a group use one read transaction that is reset after each use.
 * LMDB codes become RN_E… codes here and nowhere else. */
#ifndef RN_STORE_H
#define RN_STORE_H

#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* The longest LMDB key, in bytes: its default MDB_MAXKEYSIZE. */
#define RN_STORE_KEY_MAX 511

/* The longest relation or store name, in bytes. Names become LMDB keys
 * ("r:" name in meta) and database names ("ji:" name): RN_STORE_KEY_MAX less
 * the longest prefix. A constant, so that a state one build writes every
 * build can open. */
#define RN_NAME_MAX 508

/* Named databases (drawn above). */
#define RN_DB_META        "meta"
#define RN_DB_OUTBOX      "outbox"
/* Keys of meta: "seq", then prefixes followed by a name. */
#define RN_META_SEQ       "seq"
#define RN_META_RELATION  "r:"      /* a relation's kind and schema */
#define RN_META_COUNTERS  "n:"      /* a relation's three counters */
#define RN_META_STORE     "S:"      /* a permanent store's schema */
#define RN_META_STORE_SEEN "Ss:"    /* a store's last group: |u64 seq| (store_sink.c) */
#define RN_META_STORE_OWNER "So:"   /* the relation a store keeps: its name (store_sink.c; absent in
                                       states of 0.26 and before) */
#define RN_META_AGG_DECL  "d:"      /* a derived relation's declaration, for readers (aggregate_read.c,
                                       join_read.c, reader.h) */
#define RN_META_EVOLVED   "ev"      /* |name|\0|…|: the relations that changed; no group committed since
                                       (evolve.c) */
#define RN_META_DURABLE   "od:"     /* a durable sink's record */
#define RN_META_DURABLE_HASHED "od#" /* the same, for a name too long for a key */
#define RN_META_DURABLE_INFO "oi:"  /* what a durable sink's mark does not say: msgpack [relation, [format…]]
                                       (outbox.c); "oi#" hash for a name too long for a key */
#define RN_META_DURABLE_INFO_HASHED "oi#"
#define RN_META_DURABLE_FILE "of:"  /* the file a durable sink's mark position is in: |u64 device|u64 inode|
                                       u64 delivered|u64 position| (the mark it goes with) (outbox.c; NDJSON
                                       path sinks; 0.38, absent before); "of#" hash as "od#" */
#define RN_META_DURABLE_LAYOUT "ol:" /* the columns a log sink's waiting rows were committed with: "ol:" tag layout,
                                       msgpack [relation, schema description] (outbox.c (11); 0.37) */
/* Durable sinks' names (the sink part of "od:" sink). */
#define RN_SINK_NAMED     "sink:"   /* Lua and C durable sinks: "sink:" name */
#define RN_SINK_NDJSON    "ndjson:" /* "ndjson:" real path */
#define RN_SINK_SQLITE    "sqlite:" /* "sqlite:" real path "\x1f" table */
/* JetStream (jetstream.h). */
#define RN_META_STATE_ID  "sid"     /* the state's id */
#define RN_META_JS_POSITION "jp:"   /* a source's position: "jp:" stream "\x1f" subject */
#define RN_META_JS_MADE   "jm:"     /* when the stream of that position was made: "jm:" stream "\x1f" subject
                                       |i64 ns| (js_source.c; 0.40, absent before) */
#define RN_META_JS_TIME   "jt:"     /* the stream's time of the message at that position: "jt:" stream "\x1f"
                                       subject |i64 ns| (js_source.c; 0.41, absent before) */
#define RN_META_FORMAT    "fmt"     /* |u32 format|: the state's format (upgrade.c) */
#define RN_STATE_FORMAT   1         /* the format this build writes (upgrade.c says what each changed) */
#define RN_META_READS     "rd:"     /* the relations a derived relation's functions read: |name\0|…| (evolve_reads.h) */
#define RN_META_CHANGED_AT "eg:"    /* when a relation's rows last changed wholesale: |u64 n| (evolve.c) */
#define RN_META_CHANGED_N "egn"     /* the last n given to one: |u64 n| */
#define RN_META_CODE      "fn:"     /* a derived relation's functions: |u64 hash of their fingerprint| (evolve_code.h) */
#define RN_META_FN_NOW    "fc:"     /* a filter's or map's function, to run again: |marker|check|code| (evolve_code.c) */
#define RN_META_FN_TOLD   "fo:"     /* the function its sinks' rows came from, until they are told (evolve_code.h) */
#define RN_SINK_JETSTREAM "jetstream:" /* "jetstream:" subject */
#define RN_META_CHANGED   "ch:"     /* the last group that changed a relation: |u64 seq| */
#define RN_META_CHANGED_SPAN "chs"  /* the groups the "ch:" records know: |u64 from|u64 upto| */
#define RN_META_ID_GAPS   "ig:"     /* a keyed table whose ids are not 1..n: |u64 id| (relation.c) */
#define RN_META_DROPPED_IDS "nd:"   /* the next id of a dropped relation: |u64 next_id| */
#define RN_META_DROPPED_ENTRY "dk:" /* a dropped table's catalogue entry, while "dt:" keeps its rows */
/* Prefixes of per-relation databases: the prefix then the name. */
#define RN_DB_ROWS        "t:"      /* a table's rows */
#define RN_DB_ROW_HASHES  "h:"      /* a keyless table's rows by hash */
#define RN_DB_JOIN_INDEX  "ji:"     /* a join's fan-out index */
#define RN_DB_JOIN_RESULTS "jr:"    /* a join's result ids */
#define RN_DB_JOIN_RIGHT  "jc:"     /* a join's copy of its right side */
#define RN_DB_AGG_GROUPS  "ag:"     /* an aggregate's groups */
#define RN_DB_AGG_VALUES  "am:"     /* an aggregate's min/max value counts */
#define RN_DB_AGG_WINDOWS "aw:"     /* an aggregate's open windows (grace) */
#define RN_DB_DISTINCT_ROWS "dr:"   /* a distinct's rows and their copies */
#define RN_DB_DISTINCT_HASHES "dh:" /* a distinct's row ids by hash */
#define RN_DB_STORE       "st:"     /* a permanent store's rows */
#define RN_DB_MAP_KEYS    "mk:"     /* a keyed map's row id per key (mapkey.c) */
/* Ordered access (top.c, index.c). */
#define RN_DB_TOP_ROWS    "tt:"     /* a top's ranked rows */
#define RN_DB_TOP_REST    "tx:"     /* a top's other rows, in order */
#define RN_DB_TOP_DECL    "tp:"     /* a top's declaration */
#define RN_DB_INDEX       "ix:"     /* an index's rows in order */
#define RN_DB_REBUILT     "rb:"     /* a rebuild's changes, not yet told to sinks (evolve_log.c) */
#define RN_DB_DROPPED     "dt:"     /* a dropped table's rows, until it is declared again and a group ends */
/* The length of a prefix constant above, without its NUL. */
#define RN_PREFIX_LEN(prefix) (sizeof(prefix) - 1)

typedef struct rn_store {
  MDB_env *env;            /* the environment; NULL when closed */
  MDB_dbi meta;            /* the meta database */
  MDB_txn *wtxn;           /* the open group's write transaction, or NULL */
  bool wtxn_dbis;          /* wtxn opened database handles (rn_store_dbi_open): LMDB exports them at its commit,
                              and until it ends no other transaction of the process may open one */
  MDB_txn *rtxn;           /* reusable read transaction (reset when idle) */
  bool rtxn_live;          /* rtxn is renewed and in use */
  char *path;              /* state directory, owned */
  bool temp;               /* remove the directory at close */
  size_t mapsize;          /* current map size in bytes */
  uint64_t txn_serial;     /* counts write transactions begun: cursors know theirs */
  size_t readers_checked;  /* LMDB's last page when dead readers' slots were last cleared (reclaim_dead_readers) */
  int lock_fd;             /* writer.lock, flocked for the store's life; -1 when closed */
  struct rn_wb *wb;        /* the write-back layer (wb.h), or NULL: off */
  /* The LMDB code of a failed write of the layer's entries into wtxn (0:
   * none). LMDB then refuses the transaction's further writes: whoever
   * ran the write (a read from a callback, read_api.c) may not have ended
   * the group, so group.c checks it (rn_group_check_store). Cleared when
   * wtxn ends. */
  int wb_failed;
  /* Keys written in the open write transaction, by dbi (rn_store_wrote),
   * for the bound on the pages a carried transaction copies
   * (rn_wb_dirtied_over); written_end: one past the highest dbi counted. */
  size_t *written;
  MDB_dbi written_end;
  /* Keyed rows read by key in the write transaction (rowcache.h), made
   * at the first such read; NULL: none yet. */
  struct rn_rowcache *rowcache;
  /* Told before rn_store_grow remaps the map (remap_ctx passed back): the
   * pages a read transaction's cursors point into are unmapped then, and
   * LMDB wants no transaction of the process open across it, so whoever
   * keeps one between calls (a table cursor opened between groups) ends
   * it here. NULL: none. */
  void (*before_remap)(void *ctx);
  void *remap_ctx;
  /* ---- forks ---- */
  pid_t pid;               /* the process that opened it: a forked child may not use it (rn_store_forked) */
  bool unmapped;           /* a growth left LMDB without a map: unusable but closable (rn_store_forked) */
} rn_store;

/* Puts /dev/null on whichever of descriptors 0, 1 and 2 is closed (stdin
 * write-only, stdout and stderr read-only: reads and writes through them
 * still fail, as on a closed one). Else a state's files opened next take
 * them, and a print or an error message is written into writer.lock,
 * lock.mdb or data.mdb (SQLite guards its files the same way). Called
 * before every open of a state; no errors. */
void rn_store_keep_std_fds(void);
/* mapsize 0: the default initial map (64 MiB), and never less than 1 MiB;
 * the map grows by doubling. Takes the state's writer lock first: a second
 * writer, in this process or another, gets RN_EMISUSE ("state st is open for
 * writing by process 1234"). Reclaims reader slots of dead processes. A
 * truncated data.mdb and another program's environment are refused.
 * writemap: MDB_WRITEMAP (faster writes; with nosync, LMDB warns that an OS
 * crash may damage the environment, not only lose its last transactions). */
int rn_store_open(rn_store *s, const char *path, bool nosync, bool writemap, size_t mapsize, unsigned max_readers,
                  rn_err *e);
void rn_store_close(rn_store *s);
/* ---- forks ----
 * LMDB forbids using an environment across fork(): a child's use of the
 * parent's write or read transaction, or of its reader slots, is undefined
 * and may corrupt the parent's state. 0 in the process that opened s;
 * in a forked child RN_EMISUSE ("state st was opened by process 1234
 * before a fork; open it again in this process"). rn_store_close in the
 * child releases the child's memory and descriptors only: it ends no
 * transaction, and a temporary state's directory stays (the parent's).
 * RN_ESTORE too once a growth of the map failed after LMDB unmapped it
 * (s->unmapped): every call is refused rather than reading no map. */
int rn_store_forked(const rn_store *s, rn_err *e);
/* Keeps a transaction of the parent's, which a forked child may neither
 * end nor free, reachable until the child exits (not a leak: valgrind's
 * check of the fork tests). Best effort. */
void rn_store_keep_parents_txn(MDB_txn *txn);
/* Ends the writer lock held by fd (a descriptor of writer.lock that a
 * closed store handed to envs.c: rn_envs_writer_closing). */
void rn_store_unlock_writer(int fd);
/* ---- a pipeline that will never be closed ----
 * Its Lua state closes under one of its callbacks (os.exit(code, true) in
 * a sink, a mapper, a filter): the close is refused (core frames below
 * still use it) and the process ends after. A temporary state's directory
 * is removed now (in the process that made it; its environment reads on
 * from the removed files); a later close does not try again. */
void rn_store_remove_temp(rn_store *s);

/* mdb_strerror, and for MDB_READERS_FULL what holds the slots and what to
 * close. Static. */
const char *rn_store_strerror(int rc);
/* Maps an LMDB or errno code to an RN_E… code and sets e ("what: reason"). */
int rn_store_fail(rn_err *e, int mdb_rc, const char *what);

/* RN_EFULL or RN_EIO for a failed write of the state (errno or LMDB code
 * rc) given the free bytes left on its filesystem: LMDB reports a short write,
 * the usual sign of a full disk, as EIO. 0 when rc is no write failure. */
/* The RN_E… code of an LMDB or errno failure while only reading (attach,
 * inspect): RN_ENOMEM for ENOMEM, else RN_EIO. */
int rn_store_read_code(int rc);
int rn_store_write_code(int rc, uint64_t free_bytes);
/* Sets e for a failed commit of the state: "disk full or I/O error writing
 * the state at <path> (what: reason)" with RN_EFULL or RN_EIO as above, any
 * other failure as rn_store_fail does. Returns the code. */
int rn_store_write_fail(rn_store *s, rn_err *e, int rc, const char *what);

/* Refuses (RN_ESTORE, "state damaged: …") a data.mdb in dir that is empty,
 * or shorter than a page its newest transaction reaches: mapping it would
 * die of SIGBUS (store_file.c). deep: every page of every tree is read
 * (runnel verify); else only what can reach past the file's end. 0 when it
 * is whole, absent, or not LMDB's (mdb_env_open says so then). */
int rn_store_check_file(const char *dir, bool deep, rn_err *e);
/* The map size the last transaction of the state at dir recorded (what its
 * writer maps; a reader's environment may map more), or 0 if unreadable. */
uint64_t rn_store_file_map(const char *dir);
/* Records map (bytes) as the map size in both meta pages of the data.mdb
 * open read-write on fd, where they record a larger one that map still
 * holds all of: a copy made through a reader's environment (copy.c)
 * records that environment's map, not its state's. 0, or an errno
 * (EINVAL: not an LMDB file). */
int rn_store_file_set_map(int fd, uint64_t map);

/* Whether dir holds an entry that is not runnel's: 1 with the smallest
 * such name and the count of the others in what ("notes.txt and 2 more
 * entries", for a message), 0 when it holds only
 * runnel's (writer.lock and lock.mdb, which a first open that failed or a
 * removed data.mdb leave; data.mdb, which another process may be making;
 * data.mdb.copy-*, a killed rn_state_copy's; lost+found, at the root of
 * a volume given to the state), -errno when it cannot be
 * listed. A new state, or a copy, is made only where it is 0. */
int rn_store_foreign_entry(const char *dir, char *what, size_t len);

/* mdb_txn_begin; on MDB_READERS_FULL reclaims dead processes' reader slots
 * (mdb_reader_check) and tries once more. *txn is NULL on failure. */
int rn_store_txn(MDB_env *env, unsigned flags, MDB_txn **txn);
/* Holds off a reader environment's map being taken again (rn_store_txn)
 * while a read begins outside rn_store_txn (LMDB's copy begins its own). */
void rn_store_reads_hold(void);
void rn_store_reads_release(void);

/* A reader found no catalogue ("meta") in txn: says "empty state" when the
 * environment holds nothing (killed before its first transaction), else
 * "not a runnel state (no catalogue)". Returns the code it set. */
int rn_store_no_catalogue(MDB_txn *txn, const char *path, rn_err *e);

/* Doubles the map; no transaction may be open: the read transactions kept
 * between calls are ended first, through before_remap. */
int rn_store_grow(rn_store *s, rn_err *e);
int rn_store_begin(rn_store *s, rn_err *e);   /* grows the map first when half used */
int rn_store_commit(rn_store *s, rn_err *e);
/* The same for a group's transaction: the write-back layer keeps what it
 * read and wrote as a cache of LMDB (wb.h (2)). */
int rn_store_commit_keep(rn_store *s, rn_err *e);
void rn_store_abort(rn_store *s);
/* mdb_dbi_open, noting in s->wtxn_dbis when txn is the write transaction.
 * LMDB lets one transaction at a time open database handles: a handle new
 * to the environment takes a slot that a read transaction opening another
 * would take again, its name freed and the write transaction's commit
 * refused (MDB_BAD_DBI). A reader borrowing the writer's environment
 * opens none while wtxn_dbis (store_sink.c). */
int rn_store_dbi_open(rn_store *s, MDB_txn *txn, const char *name, unsigned flags, MDB_dbi *dbi);
/* A transaction that rewrites the catalogue's "seq" as it is, so the next
 * one may reuse the pages the last one freed (store.c says why). Outside a
 * write transaction only; best effort. */
void rn_store_release_pages(rn_store *s);

/* The transaction reads should use: the write transaction if a group is
 * open, else the read transaction (renewed on demand). */
int rn_store_reader(rn_store *s, MDB_txn **txn, rn_err *e);
/* Ends what rn_store_reader started outside a group. */
void rn_store_reader_done(rn_store *s);

/* LMDB's own order for keys (bytes, then length), compared 8 bytes at a
 * time: every runnel database uses it, and a reader that does not (attach,
 * inspect, LMDB's tools) sees the same order. */
int rn_store_key_cmp(const MDB_val *a, const MDB_val *b);

/* dbi values go up to the named databases' bound and LMDB's own two. */
#define RN_STORE_MAX_DBI (4096 + 2)
/* Counts a key written into dbi in the write transaction (with the
 * write-back layer, once per key; without it, once per write: an estimate
 * that runs high for keys written again). */
static inline void rn_store_wrote(rn_store *s, MDB_dbi dbi)
{
  if (!s->written || dbi >= RN_STORE_MAX_DBI) return;
  s->written[dbi]++;
  if (dbi >= s->written_end) s->written_end = dbi + 1;
}

/* The LMDB entries of every database kept for relation `name`: its rows,
 * indexes and operator state (a measure of what it holds). */
uint64_t rn_store_entries(MDB_txn *txn, const char *name);


#endif
