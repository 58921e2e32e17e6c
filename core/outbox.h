/* outbox.h — durable sinks: outputs delivered after the LMDB transaction
 * holding their group is durable (the invariants are in outbox.c).
 *
 * One layer with group.c and relation.c by design (the only call circle in
 * core/ besides row.c <-> schema.c): a group records into the outbox and
 * delivers from it after its commit, and the outbox commits carried groups
 * (rn_flush) before it reads a mark or delivers on request. */
#ifndef RN_OUTBOX_H
#define RN_OUTBOX_H

#include "pipeline.h"

typedef struct rn_outbox rn_outbox;

/* What a durable sink does with delivered groups. change and commit are
 * the in-group sink callbacks' shapes: change once per change of a group
 * (info->seq is the group's), then commit(seq); after a run of groups (all
 * that wait), finish. A failure anywhere in the run leaves all of its
 * groups in the outbox, to be delivered again later. */
typedef struct rn_outbox_ops {
  rn_sink_fn change;
  rn_sink_commit_fn commit;               /* may be NULL */
  int (*finish)(void *ctx, rn_err *e);    /* makes the run's groups durable outside (one SQLite
                                             transaction, one write); may be NULL */
  void (*discard)(void *ctx);             /* after the run failed: drop what it staged; may be NULL */
  int (*sync)(void *ctx, rn_err *e);      /* makes what was delivered durable before its mark
                                             is committed (fsync); may be NULL */
  uint64_t (*position)(void *ctx);        /* kept with the mark (NDJSON: the file's length); may be NULL */
  void *(*shared)(void *ctx);             /* sinks returning the same non-NULL pointer share one
                                             outside transaction: their runs stage together and
                                             count together (the sinks of one SQLite file); may be NULL */
  uint64_t (*kept)(void *ctx);            /* the last group it put out for good in a run that then failed
                                             (an NDJSON sink on an open file cannot cut it back):
                                             delivered, not retried; may be NULL */
  int (*renew)(void *ctx, bool reopen, rn_err *e); /* before a run: 1 when its output was moved or removed
                                             (an NDJSON file) and, with reopen, it reopened it (the old
                                             one synced), its position now the new one's; 0: the same;
                                             or an RN_E… code; may be NULL */
  bool as_committed;                      /* a log (NDJSON, JetStream; since 0.37): a waiting group whose rows
                                             were committed in other columns is delivered in those (change
                                             gets a stand-in of its relation with the recorded schema),
                                             not refused (outbox.c (11)); false: the relation's rows as
                                             declared now (Lua and C sinks, SQLite mirrors) */
  bool (*file)(void *ctx, uint64_t id[2]); /* the file (device, inode) its position is in, read with each
                                             position and kept with the mark (NDJSON; since 0.38: a file
                                             renamed while the state was closed is found by it); false:
                                             not known; may be NULL */
} rn_outbox_ops;

/* A durable sink's record in the state ("od:" name in meta). */
typedef struct rn_outbox_mark {
  bool found;             /* the state has a record for the name */
  uint64_t seen;          /* the last group committed while the sink was declared */
  uint64_t delivered;     /* the last group delivered (as committed with a later group) */
  uint64_t position;      /* the sink's position after it (a sink without finish: how many
                             changes of the first waiting group it acknowledged) */
  char relation[RN_NAME_MAX + 1]; /* its relation when last declared ("": not recorded, before 0.23) */
  unsigned char formats[2048]; /* the formats its output after the mark may be in, as recorded:
                             a msgpack array of bin (rn_outbox_sink_add_formatted) */
  size_t formats_len;     /* 0: none recorded (a state before 0.23, or a sink without formats) */
  bool has_file;          /* the file its position is in was recorded ("of:"; since 0.38) with this very
                             mark (a runnel before 0.38 moves the mark and leaves the record: not taken) */
  uint64_t file[2];       /* that file's device and inode */
} rn_outbox_mark;

/* One change c of an outbox entry ([verb, id, row|nil, old|nil], each row
 * a msgpack bin, present as its verb needs) into *ch, pointing into c;
 * false when it is not one. Its rows' own bytes are not looked into. */
bool rn_outbox_change(const msgpack_object *c, rn_change *ch);

/* The sink a durable sink's name in the state stands for ("sink:" name,
 * "ndjson:" path …, the key of its mark less "od:"), as its user knows it,
 * into out (n bytes): "durable sink to /tmp/out.ndjson". */
void rn_outbox_key_label(const char *key, char *out, size_t n);

/* Commits carried groups, then reads the record of name. label: the sink
 * as its user knows it, for its errors (NULL: made from name, as the
 * sinks of runnel make their labels). */
int rn_outbox_mark_read(rn_pipeline *p, const char *name, const char *label, rn_outbox_mark *m);

/* Registers a durable sink of rel; takes ownership of ctx. name NULL: its
 * groups wait in memory, not in the state (a sink with nothing to resume,
 * such as an NDJSON sink on an open file). delivered/position: where the
 * sink is (the groups after delivered are delivered now). label: the
 * sink as its user knows it, for every message naming it (the note of
 * the groups it missed, refusals, store failures: "durable subscriber
 * audit"; NULL: name). Errors: a name
 * already used in this pipeline, inside a group. */
int rn_outbox_sink_add(rn_pipeline *p, rn_rel *rel, const char *name, const char *label, bool consolidate,
                       const rn_outbox_ops *ops, void *ctx, rn_free_fn free_ctx,
                       uint64_t delivered, uint64_t position);

/* rn_outbox_sink_add for a sink whose output after its mark takes a form
 * its declaration chooses (an NDJSON file's line format): fmt (flen
 * bytes) is recorded with its mark, at declaration, and read back by
 * rn_outbox_mark_read into m->formats. While groups wait (delivered <
 * the state's seq) the formats recorded before are kept too: a crash may
 * have left those groups' output in any of them (OUTBOX-10). */
int rn_outbox_sink_add_formatted(rn_pipeline *p, rn_rel *rel, const char *name, const char *label, bool consolidate,
                                 const rn_outbox_ops *ops, void *ctx, rn_free_fn free_ctx,
                                 uint64_t delivered, uint64_t position, const void *fmt, size_t flen);

/* The durable sink added last was just written from its relation's rows
 * (an SQLite mirror written again at declaration): it holds what a
 * rebuild's changes, told in the next group, bring, and takes only that
 * group's own changes (rn_log_own). */
void rn_outbox_sink_holds_told(rn_pipeline *p);

/* The first group after `after` waiting for the sink called name that was
 * recorded for another relation or another declaration of rel (OUTBOX-8),
 * or 0. Reads committed state: call it after rn_outbox_mark_read. */
uint64_t rn_outbox_stale(rn_pipeline *p, const char *name, const rn_rel *rel, uint64_t after);

/* What rn_outbox_sink_add refuses (inside a group, a name already
 * declared in this pipeline), checked first by a sink that acts on its
 * target before it is added (an NDJSON file cut back to its mark, an
 * SQLite table rewritten): a refused declaration must leave it alone. */
int rn_outbox_sink_check(rn_pipeline *p, const rn_rel *rel, const char *name);

/* The label of a sink of this pipeline whose position is in the file id
 * (device, inode; ops.file) names, or NULL: a path that is another name
 * of a file a sink writes (a hard link) is told from another process's
 * file by it. */
const char *rn_outbox_sink_on_file(const rn_pipeline *p, const uint64_t id[2]);

/* ---- hooks of group.c ---- */
/* In the group's transaction: records the group's changes for every
 * durable sink, the sinks' marks, and deletes the entries delivered. */
int rn_outbox_record(rn_pipeline *p, uint64_t seq);
/* The LMDB transaction committed: its entries are durable. */
void rn_outbox_committed(rn_pipeline *p);
/* After a restart replayed the carried groups into a new transaction:
 * drops the open group's entries and writes the carried ones again. */
int rn_outbox_replay(rn_pipeline *p);
/* The transaction was aborted for good: its entries are gone. */
void rn_outbox_forget(rn_pipeline *p);
/* Outside groups, after an LMDB commit (or to retry): delivers every
 * pending group. Failures are kept for
 * rn_deliver, never returned: the groups are committed. */
void rn_outbox_after_commit(rn_pipeline *p);

/* Removes the first durable sink of rel for which match(change, ctx, arg)
 * holds, after committing carried groups and writing its mark: the groups
 * waiting for it stay in the state, delivered when a sink of its name is
 * declared again. 0; RN_ENOTFOUND (p->err untouched) when none matches;
 * else the error (p->err says why). Outside groups and callbacks. */
int rn_outbox_sink_remove(rn_pipeline *p, rn_rel *rel, bool (*match)(rn_sink_fn change, void *ctx, void *arg),
                          void *arg);

/* ---- the host's side ---- */
/* fn once per durable sink, in declaration order, with how many groups
 * wait for it: shown names it as errors and notes do, its relation then its
 * label ("t: durable sink d"; a nameless sink's label, and " (2)", " (3)" …
 * after the first of one relation with the same label); key is its key in
 * the state ("sink:d"), or "(unnamed)" (what p:stats() said before 0.21). */
typedef void (*rn_outbox_pending_fn)(void *ctx, const char *shown, const char *key, uint64_t groups);
int rn_outbox_pending(rn_pipeline *p, rn_outbox_pending_fn fn, void *ctx);
/* fn once per durable sink with groups delivered to its output but not
 * yet known to be on disk (its sync failed, (3) in outbox.c): shown as
 * rn_outbox_pending names it, and how many. They wait in the state too,
 * but rn_outbox_pending does not count them: they are delivered. */
typedef void (*rn_outbox_unsynced_fn)(void *ctx, const char *shown, uint64_t groups);
int rn_outbox_unsynced(rn_pipeline *p, rn_outbox_unsynced_fn fn, void *ctx);
/* At close, after the last flush: whether groups still wait for a sink
 * without a name (6), which keeps them in memory only: they are lost with
 * it. 0, or RN_EIO with e saying which groups of which relation, and the
 * last delivery failure. */
int rn_outbox_lost(rn_pipeline *p, rn_err *e);
/* ---- the sinks a state keeps records of (OUTBOX-10) ---- */
/* A durable sink's record and what waits for it, as rn_outbox_sinks_txn
 * reads them. The strings are valid during the call only. */
typedef struct rn_outbox_kept {
  const char *key;        /* its name in the state ("sink:d", "ndjson:/path"; "od#…" for a hashed one) */
  const char *label;      /* as its user knows it: "durable sink d" */
  const char *relation;   /* its relation when last declared; "" when not recorded (before 0.23) */
  const char *shown;      /* as p:stats() names it: "t: durable sink d" (the label alone without relation) */
  uint64_t seen;          /* the last group committed while it was declared (5) */
  uint64_t delivered;     /* its mark */
  uint64_t groups, rows;  /* the groups waiting for it (entries after the mark), their changes */
  uint64_t since;         /* the first of them; 0: none */
  bool relation_gone;     /* its relation is recorded and is not in the catalogue */
  bool log;               /* a log sink (NDJSON, JetStream: it records its columns, "ol:"): its waiting groups
                             go out in the columns they were committed with */
} rn_outbox_kept;
typedef int (*rn_outbox_kept_fn)(void *ctx, const rn_outbox_kept *k);
/* fn once per record of meta in txn, in key order (a nonzero return stops
 * the walk and is returned); a malformed mark is skipped (verify says it). */
int rn_outbox_sinks_txn(MDB_txn *txn, MDB_dbi meta, rn_outbox_kept_fn fn, void *ctx);
/* The records of p's state whose sink this pipeline has not declared and
 * for which groups wait, as committed (no flush: p:stats() may ask from a
 * callback). 0, or the store failure (p->err). */
int rn_outbox_undeclared(rn_pipeline *p, rn_outbox_kept_fn fn, void *ctx);
/* rn_outbox_sinks_txn over the state at path, opened for reading
 * (inspect.c: runnel inspect). 0, or the error (its message in errbuf). */
int rn_inspect_outbox(const char *path, rn_outbox_kept_fn fn, void *ctx, char *errbuf, size_t errlen);
/* Drops the record of the sink named sink (its shown name, its label or its
 * key, as rn_outbox_undeclared gives them) and every group waiting for it,
 * in one transaction: a sink declared again under its name starts afresh.
 * Errors (p->err): inside a group; no such record (RN_ENOTFOUND); the sink
 * declared in this pipeline (RN_EINVAL). */
int rn_outbox_drop(rn_pipeline *p, const char *sink);

/* At close, after the last flush: writes the marks, frees the sinks.
 * RN_EIO (why says which, naming relation, output and groups) when a named
 * sink's output could not be synced: its groups wait in the state for the
 * next open, which looks for them in the output. */
int rn_outbox_close(rn_pipeline *p, rn_err *why);

#endif
