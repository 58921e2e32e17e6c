/* outbox.c — durable sinks: each group's output is kept in the state, in
 * the group's own LMDB transaction, and delivered once that transaction
 * is durable.
 *
 *     named database "outbox"   |u64 tag BE|u64 seq BE| -> msgpack [layout, [verb, id, row|nil, old|nil] …]
 *     meta "od:" name           |u64 seen|u64 delivered|u64 position|
 *     meta "oi:" name           msgpack [relation, [format bin …]]   (0.23; absent before)
 *     meta "ol:" tag layout     msgpack [relation, schema description]   (0.37; absent before)
 *     meta "of:" name           |u64 device|u64 inode|u64 delivered|u64 position|   (0.38; absent before)
 *
 * (tag: a hash of the sink's name; rows are the relation's stored rows as
 * msgpack bin; layout: a hash of what decides how the relation's rows
 * read (layout_of), as a fixed uint64 (states before 0.17 hashed the whole
 * declaration; older ones start with a change instead);
 * a name too long for an LMDB key is "od#" and its hash.)
 *
 * Invariants (OUTBOX-n in specs):
 * (1) A durable sink gets nothing while its group runs and cannot fail it.
 *     At commit, the group's changes of its relation (consolidated if it
 *     asked) become one entry under the group's seq, written in the
 *     group's transaction: carried with carried groups, lost with them,
 *     written again when carried groups are replayed into a new
 *     transaction (rn_outbox_replay), so a seq names the same content
 *     before and after any crash. A group with no change for the sink
 *     leaves no entry.
 * (2) Entries are delivered only after the transaction holding them
 *     committed (rn_commit with sync; rn_flush, the carry bounds, a
 *     declaration or close without), per sink in seq order, each entry
 *     whole: change for each change, then commit(seq). The entries waiting
 *     for a sink go out as one run ended by finish (one SQLite
 *     transaction, one write), and sinks that share an outside
 *     transaction (the tables of one SQLite file) end their runs together;
 *     a run that fails anywhere counts for none of its groups (nor do the
 *     runs it shares with), except for sinks without finish (Lua, C),
 *     which take each group for good as it goes. Deliveries run outside groups, in
 *     state APPLYING: a durable sink may read tables, not change them.
 * (3) Each sink keeps a delivered mark. In memory it moves with each
 *     delivery; in the state it is written with the next group's
 *     transaction (or at close), never in a transaction of its own per
 *     group, together with the deletion of the entries it covers. Before
 *     that transaction commits, a synced state syncs the sink (an NDJSON
 *     file's fsync), so a recorded mark never covers output a crash can
 *     take back; a sync that fails fails no group: the mark stays at the
 *     last group synced, with the entries after it, the sync is tried
 *     again with each mark, and rn_deliver reports it. The state's mark
 *     may lag: after a crash the groups after
 *     it are delivered again, and each sink makes that exactly once its
 *     own way (NDJSON finds them in its file after the mark's position; SQLite
 *     skips a seq its runnel_sinks row already holds) or documents at
 *     least once (Lua and C sinks: the seq in info lets them dedupe).
 * (4) A delivery that fails leaves its entry (its run), and every later one
 *     of that sink, in the outbox: the committed group stands. They are retried
 *     at the next commit that reaches LMDB, at rn_flush and rn_deliver,
 *     which reports the failure; at the next open once the sink is
 *     declared again.
 * (5) "seen" is the last group committed while the sink was declared:
 *     a sink declared on a state whose seq is past it missed groups, which
 *     the outbox never recorded for it (it records only for the sinks
 *     declared). The SQLite sink of a table then rewrites its table; any
 *     other is told, by a note naming it as its user knows it, its
 *     relation and the groups (note_missed), unless none of those groups
 *     changed what it reads (missed_upto: the relations' "ch:" records).
 * (6) A sink with no name (an NDJSON sink on an already open file) keeps
 *     its entries in memory only: delivered after durability like the
 *     others, lost in a crash, never delivered twice (a write that stops
 *     inside a group: ndjson.c, "An open file"); a close whose last
 *     delivery cannot write them says they are lost (rn_outbox_lost).
 * (8) Rows are read back with the schema of the relation the sink is on
 *     now, so a named sink is refused at declaration while groups wait for
 *     it that this schema would read wrong: recorded for another relation,
 *     or another layout of its rows (a column retyped, added, dropped,
 *     moved), or holding a new row with null in a column now declared
 *     not null (an old image's null is as the sink was told it). A
 *     declaration that changed only defaults or made columns nullable
 *     reads them right: they are delivered. A log sink (NDJSON, JetStream:
 *     ops.as_committed) reads them with the columns they were committed
 *     with instead (11): it is refused only for a group whose layout the
 *     state has no record of (a state before 0.37).
 * (7) on_durable hooks (durable.c) run after the deliveries of the LMDB
 *     commit that made their groups durable (group.c).
 * (9) A sink that takes each group for good as it goes (no finish: Lua
 *     and C sinks) takes each change for good too: a change it returned
 *     from is acknowledged, and its position counts the changes of the
 *     first waiting group it acknowledged (kept in its mark like NDJSON's
 *     offset). A delivery that fails on change n of group seq resumes at
 *     change n, numbered n as before, then commit(seq); one that fails in
 *     commit(seq) gets commit(seq) alone again. So within a process each
 *     change reaches it exactly once; after a crash the changes after the
 *     recorded mark come again, (info.seq, info.n) naming each one.
 * (10) A sink's "oi:" record names its relation as last declared, and the
 *     forms its output after the mark may take (an NDJSON sink's line
 *     formats), written with its mark at declaration: the sink's own
 *     format, plus those recorded before while groups wait (a crash may
 *     have left their output in any of them), so the check at open
 *     compares its file with the formats the lines were written in. A
 *     state without it (before 0.23) reads as no format recorded: the
 *     declaration's own. The record also lets a state name the relation
 *     of a sink no declaration collects (rn_outbox_sinks).
 * (11) A log sink (ops.as_committed: an NDJSON file, a JetStream subject)
 *     puts out each group as it was committed: its waiting groups go out in
 *     the columns they were committed with, once and in order, then the new
 *     groups in the new columns, whatever its relation's declaration became
 *     meanwhile (columns added, dropped, renamed, retyped, another key, the
 *     relation dropped and declared again). Its declaration records, in its
 *     own transaction, its relation's schema under its tag and layout
 *     ("ol:" tag layout): the layout of every entry it writes from then on
 *     (one put per declaration, none per group), and a delivery reads an
 *     entry of another layout with the schema recorded for it, through a
 *     stand-in of the relation. A record is checked against its key (its
 *     description hashes to the layout): one that does not check is none.
 *     An entry of a layout with no record (written before 0.37) refuses
 *     the sink as (8) says. The records of layouts no waiting group is in
 *     go at declaration, and once the mark covers the last waiting group
 *     of another layout (write_mark); p:drop_outbox drops them all. Other
 *     sinks keep (8): a Lua or C sink gets rows as its relation's rows, and
 *     rows in other columns would reach it under names it no longer knows;
 *     an SQLite mirror is made again from its relation (sqlite.c). */
#include "outbox.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "row.h"
#include "store_sink.h"

/* The file a sink's position is in (ops.file; meta "of:"): a file renamed
 * while the state was closed is found by it, whatever its new name. */
typedef struct outfile {
  bool known;
  uint64_t id[2];         /* device, inode */
} outfile;

/* A schema an "ol:" record gave (11), read once per sink. */
typedef struct old_layout {
  uint64_t layout;        /* the layout it is recorded under */
  rn_schema *schema;      /* its columns, owned */
} old_layout;

typedef struct obsink {
  rn_rel *rel;
  bool consolidate;
  rn_outbox_ops ops;
  void *ctx;
  rn_free_fn free_ctx;
  char *name;             /* NULL: entries in memory only (6) */
  char *label;            /* the sink as its user knows it, for notes ("durable subscriber audit") */
  char *mkey;             /* meta key of its record */
  size_t mklen;
  uint64_t tag;           /* the key prefix of its entries */
  uint64_t layout;        /* the layout of its relation's rows, hashed (8) */
  uint64_t delivered;     /* the last group delivered (3) */
  uint64_t position;      /* the sink's position after it (9: the changes of the next group it took) */
  uint64_t marking;       /* delivered as written in the open transaction */
  uint64_t marked;        /* delivered as committed in the state */
  uint64_t position_marking; /* position as written in the open transaction */
  uint64_t position_marked; /* position as committed in the state (9: it moves within a group) */
  uint64_t synced;        /* the last group its output is on disk for: what a recorded mark may cover (3) */
  uint64_t position_synced; /* position after it */
  outfile file, file_synced; /* the file position, position_synced are in */
  bool remark;            /* it reopened its output (renew): its mark waits to be recorded before a run */
  uint64_t holds_told;    /* the group whose rebuild's changes it holds already (rn_log_own) */
  rn_err failure;         /* its last delivery failure (said when a close loses its groups, (6)) */
  rn_err unsynced;        /* why its last sync failed, as the sink said it (said by a close, (3)) */
  unsigned char *fmt;     /* the form of its output its declaration chose, or NULL (10) */
  size_t flen;
  old_layout *olds;       /* the recorded schemas of other layouts read for it so far (11) */
  int nolds;
  uint64_t olds_upto;     /* the last group waiting at declaration in another layout: once the recorded
                             mark covers it, the records of other layouts go (11); 0: none */
} obsink;

/* An entry not yet committed to LMDB, or one of a nameless sink (6). */
typedef struct entry {
  struct entry *next;
  obsink *sink;
  uint64_t seq;
  bool committed;
  size_t len;
  char data[];
} entry;

struct rn_outbox {
  MDB_dbi dbi;
  bool has_dbi;
  obsink **sinks;
  int n, cap;
  entry *head;
  entry **tail;           /* the last link of the list (every pass that removes resets it) */
  bool fresh;             /* an LMDB commit since the last delivery pass */
  bool backlog;           /* a delivery failed: retry */
  bool delivering;        /* a pass runs (its callbacks may flush) */
  bool failed;            /* this pass failed somewhere; err says what */
  rn_err err;
  msgpack_sbuffer buf;
};

static rn_outbox *outbox_of(rn_pipeline *p)
{
  if (p->outbox) return p->outbox;
  rn_outbox *ob = calloc(1, sizeof *ob);
  if (!ob) return NULL;
  msgpack_sbuffer_init(&ob->buf);
  ob->tail = &ob->head;
  p->outbox = ob;
  return ob;
}

static void put_be64(char *at, uint64_t v)
{
  for (int i = 7; i >= 0; i--, v >>= 8) at[i] = (char)(v & 0xff);
}

static uint64_t get_be64(const char *at)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | (unsigned char)at[i];
  return v;
}

static char *mark_key(const char *name, size_t *len)
{
  size_t n = strlen(name);
  char *k = malloc(n + 4 > 20 ? n + 4 : 20);
  if (!k) return NULL;
  if (n <= 400) *len = (size_t)sprintf(k, RN_META_DURABLE "%s", name);
  else *len = (size_t)sprintf(k, RN_META_DURABLE_HASHED "%016llx", (unsigned long long)rn_hash64(name, n));
  return k;
}

static char *info_key(const char *name, size_t *len)
{
  char *k = mark_key(name, len);
  if (k) k[1] = 'i'; /* "od:" / "od#" -> "oi:" / "oi#" */
  return k;
}

/* The key of name's "of:" record (the file its mark's position is in). */
static char *file_key(const char *name, size_t *len)
{
  char *k = mark_key(name, len);
  if (k) k[1] = 'f'; /* "od:" / "od#" -> "of:" / "of#" */
  return k;
}

/* s's position as its sink tells it now, and the file it is in. */
static void take_position(obsink *s)
{
  s->position = s->ops.position(s->ctx);
  s->file.known = s->ops.file && s->ops.file(s->ctx, s->file.id);
}

/* Reads the "oi:" record at key in txn (10): its relation into rel (n
 * bytes) and its formats array, whole, into fmts (*flen bytes; 0: none or
 * too long). False when absent or malformed (read as absent: it only
 * names and compares, never decides what is delivered). */
static bool info_read(MDB_txn *txn, MDB_dbi meta, const char *key, size_t klen, char *rel, size_t n,
                      unsigned char *fmts, size_t cap, size_t *flen)
{
  MDB_val k = { klen, (void *)key }, v;
  rel[0] = '\0';
  *flen = 0;
  if (mdb_get(txn, meta, &k, &v) != 0) return false;
  msgpack_zone z;
  msgpack_object o;
  size_t off = 0;
  bool ok = false;
  if (!rn_zone_init(&z, 1024)) return false;
  if (rn_msgpack_size(v.mv_data, v.mv_size) == v.mv_size &&
      rn_unpack(v.mv_data, v.mv_size, &off, &z, &o) == MSGPACK_UNPACK_SUCCESS && o.type == MSGPACK_OBJECT_ARRAY &&
      o.via.array.size == 2 && o.via.array.ptr[0].type == MSGPACK_OBJECT_STR &&
      o.via.array.ptr[1].type == MSGPACK_OBJECT_ARRAY && o.via.array.ptr[0].via.str.size < n) {
    ok = true;
    memcpy(rel, o.via.array.ptr[0].via.str.ptr, o.via.array.ptr[0].via.str.size);
    rel[o.via.array.ptr[0].via.str.size] = '\0';
    const msgpack_object *f = &o.via.array.ptr[1];
    for (uint32_t i = 0; i < f->via.array.size; i++) ok &= f->via.array.ptr[i].type == MSGPACK_OBJECT_BIN;
    /* the formats array is the record's tail: its bytes as they are */
    size_t head = 0, rlen = o.via.array.ptr[0].via.str.size;
    head = 1 + (rlen < 32 ? 1 : rlen < 256 ? 2 : rlen < 65536 ? 3 : 5) + rlen;
    if (ok && head < v.mv_size && v.mv_size - head <= cap) {
      memcpy(fmts, (const char *)v.mv_data + head, v.mv_size - head);
      *flen = v.mv_size - head;
    }
    if (!ok) rel[0] = '\0';
  }
  rn_zone_destroy(&z);
  return ok;
}

/* ---- the record of a sink (3, 5) ---- */

/* The label its declaration gives rn_outbox_sink_add ("sink:" name is a
 * Lua sink's or a subscriber's: "durable sink name"; outbox.h). */
void rn_outbox_key_label(const char *key, char *out, size_t n)
{
  const char *at;
  if (!strncmp(key, RN_SINK_NAMED, RN_PREFIX_LEN(RN_SINK_NAMED))) {
    snprintf(out, n, "durable sink %s", key + RN_PREFIX_LEN(RN_SINK_NAMED));
  } else if (!strncmp(key, RN_SINK_NDJSON, RN_PREFIX_LEN(RN_SINK_NDJSON))) {
    snprintf(out, n, "durable sink to %s", key + RN_PREFIX_LEN(RN_SINK_NDJSON));
  } else if (!strncmp(key, RN_SINK_SQLITE, RN_PREFIX_LEN(RN_SINK_SQLITE)) && (at = strchr(key, '\x1f'))) {
    const char *path = key + RN_PREFIX_LEN(RN_SINK_SQLITE);
    snprintf(out, n, "durable sink to table \"%s\" in %.*s", at + 1, (int)(at - path), path);
  } else if (!strncmp(key, RN_SINK_JETSTREAM, RN_PREFIX_LEN(RN_SINK_JETSTREAM))) {
    snprintf(out, n, "durable sink to JetStream subject %s", key + RN_PREFIX_LEN(RN_SINK_JETSTREAM));
  } else {
    snprintf(out, n, "durable sink %s", key);
  }
}

int rn_outbox_mark_read(rn_pipeline *p, const char *name, const char *label, rn_outbox_mark *m)
{
  memset(m, 0, sizeof *m);
  char derived[2 * PATH_MAX];
  if (!label) rn_outbox_key_label(name, derived, sizeof derived), label = derived;
  int rc = rn_flush(p);
  if (rc) return rc;
  size_t klen;
  char *key = mark_key(name, &klen);
  if (!key) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  MDB_txn *txn;
  if ((rc = rn_store_txn(p->store.env, MDB_RDONLY, &txn))) {
    free(key);
    return rn_store_fail(&p->err, rc, label);
  }
  MDB_val k = { klen, key }, v;
  rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == 0 && v.mv_size == 24) {
    uint64_t r[3];
    memcpy(r, v.mv_data, sizeof r);
    m->found = true, m->seen = r[0], m->delivered = r[1], m->position = r[2];
  }
  if (rc == 0 && v.mv_size != 24) /* read as absent, its waiting groups would vanish */
    rc = rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the mark of %s is %zu bytes, not 24",
                    p->store.path, label, v.mv_size);
  else if (rc == 0 && (m->delivered > m->seen || m->seen > p->seq)) /* the groups up to it would never be delivered */
    rc = rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the mark of %s is past the last group "
                    "(seen %llu, delivered %llu, last group %llu)", p->store.path, label,
                    (unsigned long long)m->seen, (unsigned long long)m->delivered, (unsigned long long)p->seq);
  else if (rc && rc != MDB_NOTFOUND)
    rc = rn_store_fail(&p->err, rc, label);
  else
    rc = 0;
  if (!rc && m->found) {
    char *ik = info_key(name, &klen);
    if (ik) info_read(txn, p->store.meta, ik, klen, m->relation, sizeof m->relation, m->formats,
                      sizeof m->formats, &m->formats_len);
    free(ik);
    char *fk = file_key(name, &klen);
    MDB_val f = { klen, fk };
    uint64_t fr[4];
    if (fk && mdb_get(txn, p->store.meta, &f, &v) == 0 && v.mv_size == sizeof fr) { /* else not known */
      memcpy(fr, v.mv_data, sizeof fr);
      m->has_file = fr[2] == m->delivered && fr[3] == m->position; /* of this mark, not one before it */
      memcpy(m->file, fr, sizeof m->file);
    }
    free(fk);
  }
  mdb_txn_abort(txn);
  free(key);
  return rc;
}

/* Writes s's "oi:" record in txn (10): its relation, its format, and the
 * formats recorded before while groups wait for it (the last 8). */
static int write_info(rn_pipeline *p, obsink *s, MDB_txn *txn)
{
  size_t klen;
  char *key = info_key(s->name, &klen);
  if (!key) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  char rel[RN_NAME_MAX + 1];
  unsigned char old[2048];
  size_t olen = 0;
  msgpack_zone z;
  msgpack_object o = { .type = MSGPACK_OBJECT_NIL };
  size_t off = 0;
  bool zone = rn_zone_init(&z, 1024);
  if (zone && s->fmt && s->delivered < p->seq && /* groups wait: their output may be in the old formats */
      info_read(txn, p->store.meta, key, klen, rel, sizeof rel, old, sizeof old, &olen) && olen &&
      rn_unpack((const char *)old, olen, &off, &z, &o) != MSGPACK_UNPACK_SUCCESS)
    o.type = MSGPACK_OBJECT_NIL;
  const msgpack_object *keep[8];
  uint32_t nkeep = 0;
  for (uint32_t i = 0; o.type == MSGPACK_OBJECT_ARRAY && i < o.via.array.size; i++) {
    const msgpack_object *f = &o.via.array.ptr[i];
    if (f->type != MSGPACK_OBJECT_BIN || (f->via.bin.size == s->flen && !memcmp(f->via.bin.ptr, s->fmt, s->flen)))
      continue;
    if (nkeep == 7) memmove(keep, keep + 1, 6 * sizeof *keep), nkeep = 6; /* the oldest goes */
    keep[nkeep++] = f;
  }
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  rn_oom_clear();
  msgpack_pack_array(&pk, 2);
  msgpack_pack_str_with_body(&pk, s->rel->name, strlen(s->rel->name));
  msgpack_pack_array(&pk, nkeep + (s->fmt != NULL));
  for (uint32_t i = 0; i < nkeep; i++) msgpack_pack_bin_with_body(&pk, keep[i]->via.bin.ptr, keep[i]->via.bin.size);
  if (s->fmt) msgpack_pack_bin_with_body(&pk, s->fmt, s->flen);
  MDB_val k = { klen, key }, v = { b.size, b.data };
  int rc = !zone || rn_oom() ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : 0;
  if (!rc && (rc = mdb_put(txn, p->store.meta, &k, &v, 0))) rc = rn_store_fail(&p->err, rc, s->label);
  msgpack_sbuffer_destroy(&b);
  if (zone) rn_zone_destroy(&z);
  free(key);
  return rc;
}

/* Syncs s's output up to its delivered mark (3). A failure fails no
 * group: it is kept in s->failure (rn_deliver reports it) and the mark
 * stays at the last group synced. */
static void sync_sink(rn_pipeline *p, obsink *s)
{
  rn_err e = { .code = RN_OK };
  if (s->delivered > s->synced && s->ops.sync && !p->carry && s->ops.sync(s->ctx, &e)) {
    rn_err_set(&s->unsynced, e.code ? e.code : RN_EIO, "%s", e.code ? e.msg : "syncing failed");
    rn_err_set(&s->failure, e.code ? e.code : RN_EIO,
               "%s: %s: %s; groups %llu to %llu stay in the outbox (delivered, not known to be on disk) until a "
               "sync succeeds: it is tried again at each commit and by p:deliver()", s->rel->name, s->label,
               e.code ? e.msg : "syncing failed", (unsigned long long)s->synced + 1,
               (unsigned long long)s->delivered);
    return;
  }
  s->synced = s->delivered; /* synced, or nothing to sync (9: a position moves within a group) */
  s->position_synced = s->position;
  s->file_synced = s->file;
}

/* Writes in txn the "of:" record of s's mark (the file its position is
 * in, with the mark's delivered and position: a runnel before 0.38 moves
 * the mark and leaves the record, which then names another mark and is
 * not taken), in the mark's transaction, so the two always go together. */
static int write_file(rn_pipeline *p, obsink *s, MDB_txn *txn)
{
  const outfile *f = &s->file_synced;
  if (!f->known) return 0;
  size_t klen;
  char *key = file_key(s->name, &klen);
  if (!key) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  uint64_t r[4] = { f->id[0], f->id[1], s->synced, s->position_synced };
  MDB_val k = { klen, key }, v = { sizeof r, r };
  int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
  free(key);
  return rc ? rn_store_fail(&p->err, rc, s->label) : 0;
}

/* ---- the columns waiting groups were committed with (11) ---- */

enum { LAYOUT_KEY = 3 + 32 + 1 };

/* The meta key of the "ol:" record of layout for the sink of tag into
 * key; its length. tag 0 with layout 0: the prefix of the records of the
 * sink of tag is the key's first 19 bytes. */
static size_t layout_key(uint64_t tag, uint64_t layout, char key[LAYOUT_KEY])
{
  return (size_t)snprintf(key, LAYOUT_KEY, RN_META_DURABLE_LAYOUT "%016llx%016llx", (unsigned long long)tag,
                          (unsigned long long)layout);
}

/* Deletes in txn the "ol:" records of the sink of tag but those of the
 * nkeep layouts in keep. LMDB's codes. */
static int drop_layouts(MDB_txn *txn, MDB_dbi meta, uint64_t tag, const uint64_t *keep, int nkeep)
{
  char from[LAYOUT_KEY];
  layout_key(tag, 0, from);
  size_t plen = RN_PREFIX_LEN(RN_META_DURABLE_LAYOUT) + 16;
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, meta, &cur);
  if (rc) return rc;
  MDB_val k = { plen, from }, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size < plen || memcmp(k.mv_data, from, plen) != 0) break;
    char hex[17] = ""; /* the key's layout, NUL-terminated: LMDB's bytes are not */
    if (k.mv_size == LAYOUT_KEY - 1) memcpy(hex, (const char *)k.mv_data + plen, 16);
    uint64_t layout = strtoull(hex, NULL, 16);
    bool kept = false;
    for (int i = 0; i < nkeep && !kept; i++) kept = keep[i] == layout;
    if (!kept && (rc = mdb_cursor_del(cur, 0))) break;
  }
  mdb_cursor_close(cur);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Whether the sink of tag has an "ol:" record: a log sink (11). */
static bool has_layouts(MDB_txn *txn, MDB_dbi meta, uint64_t tag)
{
  char from[LAYOUT_KEY];
  layout_key(tag, 0, from);
  size_t plen = RN_PREFIX_LEN(RN_META_DURABLE_LAYOUT) + 16;
  MDB_cursor *cur;
  if (mdb_cursor_open(txn, meta, &cur)) return false;
  MDB_val k = { plen, from }, v;
  bool has = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE) == 0 && k.mv_size >= plen && !memcmp(k.mv_data, from, plen);
  mdb_cursor_close(cur);
  return has;
}

/* Writes s's record (seen, its delivered mark) in txn and deletes the
 * entries the mark newly covers; a synced state syncs the sink first, and
 * the mark covers only what is synced (3). */
static int write_mark(rn_pipeline *p, rn_outbox *ob, obsink *s, MDB_txn *txn, uint64_t seen)
{
  int rc = 0;
  sync_sink(p, s);
  uint64_t r[3] = { seen, s->synced, s->position_synced };
  MDB_val k = { s->mklen, s->mkey }, v = { sizeof r, r };
  if ((rc = mdb_put(txn, p->store.meta, &k, &v, 0))) return rn_store_fail(&p->err, rc, s->label);
  if ((rc = write_file(p, s, txn))) return rc;
  if (s->synced > s->marked) {
    MDB_cursor *cur;
    char from[16];
    put_be64(from, s->tag);
    put_be64(from + 8, s->marked + 1);
    MDB_val ck = { 16, from }, cv;
    if ((rc = mdb_cursor_open(txn, ob->dbi, &cur))) return rn_store_fail(&p->err, rc, s->label);
    for (rc = mdb_cursor_get(cur, &ck, &cv, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &ck, &cv, MDB_NEXT)) {
      if (ck.mv_size != 16 || get_be64(ck.mv_data) != s->tag || get_be64((char *)ck.mv_data + 8) > s->synced) break;
      if ((rc = mdb_cursor_del(cur, 0))) break;
    }
    mdb_cursor_close(cur);
    if (rc && rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, s->label);
  }
  if (s->olds_upto && s->synced >= s->olds_upto && /* no group waits in another layout (11) */
      (rc = drop_layouts(txn, p->store.meta, s->tag, &s->layout, 1)))
    return rn_store_fail(&p->err, rc, s->label);
  s->marking = s->synced;
  s->position_marking = s->position_synced;
  return 0;
}

/* The record written in the transaction that just committed is the state's. */
static void mark_committed(obsink *s)
{
  s->marked = s->marking;
  s->position_marked = s->position_marking;
  if (s->olds_upto && s->marked >= s->olds_upto) s->olds_upto = 0; /* its other layouts' records are gone (11) */
}

/* ---- recording (1) ---- */

/* Packs the group's changes of s's relation into ob->buf; *n: how many. */
static int pack_group(rn_pipeline *p, rn_outbox *ob, obsink *s, uint64_t seq, size_t *n)
{
  rn_log own = rn_log_own(s->rel, s->holds_told, seq);
  const rn_log *log = &own;
  const rn_change *items = log->items;
  rn_change *net = NULL;
  *n = log->n;
  if (s->consolidate && *n) {
    net = malloc(*n * sizeof *net);
    *n = net ? rn_log_consolidated(log, net) : (size_t)-1;
    if (*n == (size_t)-1) { free(net); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
    items = net;
  }
  msgpack_sbuffer_clear(&ob->buf);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &ob->buf, rn_buf_write);
  msgpack_pack_array(&pk, *n + 1);
  msgpack_pack_fix_uint64(&pk, s->layout); /* (8) */
  for (size_t i = 0; i < *n; i++) {
    const rn_change *c = &items[i];
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, (uint8_t)c->verb);
    msgpack_pack_uint64(&pk, c->id);
    if (c->row) { msgpack_pack_bin(&pk, c->row_len); msgpack_pack_bin_body(&pk, c->row, c->row_len); }
    else msgpack_pack_nil(&pk);
    if (c->old) { msgpack_pack_bin(&pk, c->old_len); msgpack_pack_bin_body(&pk, c->old, c->old_len); }
    else msgpack_pack_nil(&pk);
  }
  free(net);
  return 0;
}

static int keep_entry(rn_pipeline *p, rn_outbox *ob, obsink *s, uint64_t seq)
{
  entry *e = malloc(sizeof *e + ob->buf.size);
  if (!e) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  *e = (entry){ NULL, s, seq, false, ob->buf.size };
  memcpy(e->data, ob->buf.data, ob->buf.size);
  *ob->tail = e;
  ob->tail = &e->next;
  return 0;
}

static int put_entry(rn_pipeline *p, rn_outbox *ob, obsink *s, uint64_t seq, const char *data, size_t len)
{
  char key[16];
  put_be64(key, s->tag);
  put_be64(key + 8, seq);
  MDB_val k = { 16, key }, v = { len, (void *)data };
  int rc = mdb_put(p->store.wtxn, ob->dbi, &k, &v, 0);
  return rc ? rn_store_fail(&p->err, rc, s->label) : 0;
}

/* Drops the uncommitted entries of the groups after `after` (0: all). */
static void drop_uncommitted(rn_outbox *ob, uint64_t after)
{
  entry **at = &ob->head;
  while (*at) {
    entry *e = *at;
    if (!e->committed && e->seq > after) { *at = e->next; free(e); }
    else at = &e->next;
  }
  ob->tail = at;
}

int rn_outbox_record(rn_pipeline *p, uint64_t seq)
{
  rn_outbox *ob = p->outbox;
  if (!ob || !ob->n) return 0;
  int rc = 0;
  for (int i = 0; i < ob->n && !rc; i++) {
    obsink *s = ob->sinks[i];
    size_t n;
    rc = pack_group(p, ob, s, seq, &n);
    if (!rc && n) rc = keep_entry(p, ob, s, seq);
    if (!rc && n && s->name) rc = put_entry(p, ob, s, seq, ob->buf.data, ob->buf.size);
    if (!rc && s->name) rc = write_mark(p, ob, s, p->store.wtxn, seq);
  }
  if (rc) drop_uncommitted(ob, seq - 1); /* the group's, as the failure rolls it back */
  return rc;
}

void rn_outbox_committed(rn_pipeline *p)
{
  rn_outbox *ob = p->outbox;
  if (!ob) return;
  entry **at = &ob->head;
  while (*at) {
    entry *e = *at;
    if (!e->committed && e->sink->name) { *at = e->next; free(e); continue; } /* LMDB holds it */
    e->committed = true;
    at = &e->next;
  }
  ob->tail = at;
  for (int i = 0; i < ob->n; i++) mark_committed(ob->sinks[i]);
  ob->fresh = true;
}

int rn_outbox_replay(rn_pipeline *p)
{
  rn_outbox *ob = p->outbox;
  if (!ob) return 0;
  drop_uncommitted(ob, p->seq);
  int rc = 0;
  for (entry *e = ob->head; e && !rc; e = e->next)
    if (!e->committed && e->sink->name) rc = put_entry(p, ob, e->sink, e->seq, e->data, e->len);
  for (int i = 0; i < ob->n && !rc; i++) {
    obsink *s = ob->sinks[i];
    s->marking = s->marked;
    if (s->name) rc = write_mark(p, ob, s, p->store.wtxn, p->seq);
  }
  return rc;
}

void rn_outbox_forget(rn_pipeline *p)
{
  if (!p->outbox) return;
  drop_uncommitted(p->outbox, 0);
  for (int i = 0; i < p->outbox->n; i++) p->outbox->sinks[i]->marking = p->outbox->sinks[i]->marked;
}

/* ---- delivery (2, 4) ---- */

static uint64_t entry_layout(const MDB_val *v);
static uint64_t layout_of(const rn_rel *rel, bool full);
static const rn_schema *old_schema(rn_pipeline *p, obsink *s, MDB_txn *txn, uint64_t layout);

/* Keeps the pass's first failure: rn_deliver reports that one. */
static void delivery_failed(rn_outbox *ob, const rn_err *e)
{
  if (!ob->failed) ob->err = *e;
  ob->failed = ob->backlog = true;
}

bool rn_outbox_change(const msgpack_object *c, rn_change *ch)
{
  const msgpack_object *f = c->via.array.ptr;
  if (c->type != MSGPACK_OBJECT_ARRAY || c->via.array.size != 4 || f[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
      f[0].via.u64 < RN_INSERT || f[0].via.u64 > RN_DELETE || f[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
      (f[0].via.u64 != RN_DELETE && f[2].type != MSGPACK_OBJECT_BIN) || /* the rows its verb has (a sink reads them) */
      (f[0].via.u64 != RN_INSERT && f[3].type != MSGPACK_OBJECT_BIN))
    return false;
  bool row = f[2].type == MSGPACK_OBJECT_BIN, old = f[3].type == MSGPACK_OBJECT_BIN;
  *ch = (rn_change){ (rn_verb)f[0].via.u64, f[1].via.u64, row ? f[2].via.bin.ptr : NULL, row ? f[2].via.bin.size : 0,
                     old ? f[3].via.bin.ptr : NULL, old ? f[3].via.bin.size : 0 };
  return true;
}

/* Delivers one entry to s; 0, or the failure (kept in ob->err). as_was:
 * the columns it was committed with when they are not its relation's now
 * (11), given to s through a stand-in of its relation; NULL: the relation's. */
static int deliver_entry(rn_outbox *ob, obsink *s, uint64_t seq, const char *data, size_t len,
                         const rn_schema *as_was)
{
  rn_rel *rel = s->rel, stand_in;
  if (as_was) { /* s->rel with the columns it had; nothing of it is freed */
    stand_in = *s->rel;
    stand_in.schema = (rn_schema *)as_was;
    memset(stand_in.slot_hint, 0, sizeof stand_in.slot_hint);
    rel = &stand_in;
  }
  rn_err e = { .code = RN_OK };
  msgpack_zone z;
  msgpack_object o = { .type = MSGPACK_OBJECT_NIL };
  size_t off = 0;
  int rc = 0;
  bool resumes = !s->ops.finish; /* it takes each change for good as it goes (9) */
  rn_oom_clear(); /* what the sink writes (an NDJSON line) must not be cut short silently */
  if (!rn_zone_init(&z, 4096)) rc = rn_err_set(&e, RN_ENOMEM, "out of memory");
  else if (rn_unpack(data, len, &off, &z, &o) != MSGPACK_UNPACK_SUCCESS || o.type != MSGPACK_OBJECT_ARRAY)
    rc = rn_oom() ? rn_err_set(&e, RN_ENOMEM, "out of memory")
                  : rn_err_set(&e, RN_ESTORE, "%s: outbox: group %llu is damaged", s->rel->name, (unsigned long long)seq);
  uint32_t first = !rc && o.via.array.size && o.via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER; /* (8) */
  for (uint32_t i = first; !rc && i < o.via.array.size; i++) {
    rn_change ch;
    if (!rn_outbox_change(&o.via.array.ptr[i], &ch) || (ch.row && !rn_row_fits(rel->schema, ch.row, ch.row_len)) ||
        (ch.old && !rn_row_fits(rel->schema, ch.old, ch.old_len))) { /* rows a sink would read as nothing */
      rc = rn_err_set(&e, RN_ESTORE, "%s: outbox: group %llu is damaged", s->rel->name, (unsigned long long)seq);
      break;
    }
    rn_sink_info info = { ch.id, seq, i + 1 - first };
    if (resumes && info.n <= s->position) continue; /* acknowledged before (9) */
    rc = s->ops.change(s->ctx, rel, &ch, &info, &e);
    if (!rc && resumes && rn_oom()) rc = rn_err_set(&e, RN_ENOMEM, "%s: out of memory delivering group %llu",
                                                   s->rel->name, (unsigned long long)seq);
    if (!rc && resumes) s->position = info.n;
  }
  if (!rc && s->ops.commit) rc = s->ops.commit(s->ctx, seq, &e);
  if (!rc && !resumes && rn_oom()) rc = rn_err_set(&e, RN_ENOMEM, "%s: out of memory delivering group %llu",
                                                   s->rel->name, (unsigned long long)seq);
  rn_zone_destroy(&z);
  if (rc) {
    if (!e.code) rn_err_set(&e, rc, "%s: delivery of group %llu failed", s->rel->name, (unsigned long long)seq);
    s->failure = e;
    delivery_failed(ob, &e);
    return rc;
  }
  s->delivered = seq;
  if (resumes) s->position = 0;
  return 0;
}

/* Ends the runs of sinks that share one outside transaction (the sinks of
 * one SQLite file; most sinks share with none): finish makes their groups
 * durable outside in one go (one SQLite transaction, one write). If any
 * run failed, or a finish does, none of them counts: each sink discards
 * what it staged and its mark goes back to before its run (4), or to the
 * last group it could not take back (kept). A sink without finish took
 * each group for good as it went. */
static void end_runs(rn_outbox *ob, obsink **v, const uint64_t *before, int n, bool failed)
{
  rn_err e = { .code = RN_OK };
  rn_oom_clear();
  for (int i = 0; i < n && !failed; i++)
    if (v[i]->delivered != before[i] && v[i]->ops.finish &&
        (v[i]->ops.finish(v[i]->ctx, &e) || (rn_oom() && rn_err_set(&e, RN_ENOMEM, "out of memory")))) {
      if (!e.code) rn_err_set(&e, RN_EIO, "%s: delivery failed", v[i]->rel->name);
      v[i]->failure = e;
      delivery_failed(ob, &e);
      failed = true;
    }
  for (int i = 0; i < n; i++) {
    obsink *s = v[i];
    if (failed) {
      if (s->ops.discard) s->ops.discard(s->ctx);
      uint64_t kept = s->ops.kept ? s->ops.kept(s->ctx) : 0; /* never twice: it is out there */
      if (s->ops.finish) s->delivered = kept > before[i] ? kept : before[i];
      if (kept > before[i] && s->ops.position) take_position(s); /* it covers them */
    } else if (s->ops.position) {
      take_position(s);
    }
  }
}

/* Frees the entries of a nameless sink that its mark covers. */
static void drop_delivered(rn_outbox *ob, obsink *s)
{
  entry **at = &ob->head;
  while (*at) {
    entry *e = *at;
    if (e->sink == s && e->committed && e->seq <= s->delivered) { *at = e->next; free(e); }
    else at = &e->next;
  }
  ob->tail = at;
}

/* A sink that reopened its output (an NDJSON file moved or removed:
 * ops.renew) has its mark, with the new output's position, recorded at
 * once in a transaction of its own, before any group goes there: after a
 * crash the groups after the mark are looked for in the new output, not
 * at the old one's position (3). With a carried transaction open (it
 * holds the marks, and no other can begin) a sink whose output moved
 * writes nothing: it waits for the next pass (backlog), which the
 * carried transaction's commit runs; none of its groups goes to the
 * moved output. False: it waits, its failure kept (none when it only
 * waits for the carried transaction). */
static bool renewed(rn_pipeline *p, rn_outbox *ob, obsink *s)
{
  if (!s->ops.renew) return true;
  rn_err e = { .code = RN_OK };
  if (p->store.wtxn) {
    if (!s->remark && s->ops.renew(s->ctx, false, &e) == 0) return true;
    ob->backlog = true;
    return false;
  }
  if (!s->remark) {
    int rc = s->ops.renew(s->ctx, true, &e);
    if (rc < 0) {
      s->failure = e;
      delivery_failed(ob, &e);
      return false;
    }
    if (rc == 0) return true;
    s->synced = s->delivered; /* renew synced the old output */
    if (s->ops.position) take_position(s);
    else s->position = 0;
    s->position_synced = s->position;
    s->file_synced = s->file;
    s->remark = true;
  }
  rn_err saved = p->err; /* a delivery pass after a commit that succeeded leaves it as it was */
  MDB_txn *txn;
  int rc = mdb_txn_begin(p->store.env, NULL, 0, &txn);
  if (rc) rn_store_fail(&p->err, rc, s->label);
  else if ((rc = write_mark(p, ob, s, txn, p->seq))) mdb_txn_abort(txn);
  else if ((rc = mdb_txn_commit(txn))) rn_store_fail(&p->err, rc, s->label);
  if (!rc) {
    mark_committed(s);
    s->remark = false;
  } else {
    s->failure = p->err;
    delivery_failed(ob, &p->err);
  }
  p->err = saved;
  return !rc;
}

/* Stages every durable entry of s after its mark, in seq order; returns
 * whether a delivery failed. */
static bool stage_sink(rn_pipeline *p, rn_outbox *ob, obsink *s)
{
  bool failed = false;
  if (!s->name) {
    for (entry *e = ob->head; e && !failed; e = e->next)
      if (e->sink == s && e->committed && e->seq > s->delivered)
        failed = deliver_entry(ob, s, e->seq, e->data, e->len, NULL) != 0; /* in memory: this declaration's */
    return failed;
  }
  if (!ob->has_dbi) return false;
  if (!renewed(p, ob, s)) return true;
  MDB_txn *txn;
  MDB_cursor *cur = NULL;
  int rc = mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &txn); /* sees only what is durable (2) */
  if (!rc && (rc = mdb_cursor_open(txn, ob->dbi, &cur))) mdb_txn_abort(txn);
  if (rc) {
    rn_err e;
    rn_store_fail(&e, rc, s->label);
    delivery_failed(ob, &e);
    return true;
  }
  char from[16];
  put_be64(from, s->tag);
  put_be64(from + 8, s->delivered + 1);
  MDB_val k = { 16, from }, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && !failed; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != 16 || get_be64(k.mv_data) != s->tag) break;
    uint64_t had = s->ops.as_committed ? entry_layout(&v) : 0;
    const rn_schema *as_was = had && had != s->layout ? old_schema(p, s, txn, had) : NULL; /* (11) */
    if (had && had != s->layout && !as_was && had != layout_of(s->rel, true)) { /* its record could not be read
                                                                                (memory, damage): never read wrong */
      rn_err e;
      rn_err_set(&e, RN_ESTORE, "%s: %s: group %llu waits in columns whose record in the state could not be read",
                 s->rel->name, s->label, (unsigned long long)get_be64((char *)k.mv_data + 8));
      s->failure = e;
      delivery_failed(ob, &e);
      failed = true;
      break;
    }
    failed = deliver_entry(ob, s, get_be64((char *)k.mv_data + 8), v.mv_data, v.mv_size, as_was) != 0;
  }
  mdb_cursor_close(cur);
  mdb_txn_abort(txn); /* staged output holds copies, not LMDB's bytes */
  return failed;
}

static void *shared_of(const obsink *s) { return s->ops.shared ? s->ops.shared(s->ctx) : NULL; }

/* Delivers to sinks[from] and every later sink sharing its transaction,
 * marking them done. */
static void deliver_joint(rn_pipeline *p, rn_outbox *ob, int from, bool *done)
{
  obsink *v[ob->n];
  uint64_t before[ob->n];
  int n = 0;
  void *shared = shared_of(ob->sinks[from]);
  for (int i = from; i < ob->n; i++) {
    if (done[i] || (i != from && (!shared || shared_of(ob->sinks[i]) != shared))) continue;
    done[i] = true;
    v[n] = ob->sinks[i];
    before[n++] = ob->sinks[i]->delivered;
  }
  bool failed = false;
  for (int i = 0; i < n && !failed; i++) failed = stage_sink(p, ob, v[i]);
  end_runs(ob, v, before, n, failed);
  for (int i = 0; i < n; i++)
    if (!v[i]->name) drop_delivered(ob, v[i]);
}

/* One delivery pass; returns whether it failed somewhere. */
/* With nosync, LMDB's commits reach the disk when the kernel writes them:
 * a durable sink fed before then could keep a group that an OS crash
 * takes from the state (and skip the group that later takes its seq). So
 * the file is synced once before a pass delivers groups committed since
 * the last sync (rn_durable_sync). False when it cannot be (the pass then
 * waits, retried). */
static bool synced(rn_pipeline *p, rn_outbox *ob)
{
  int rc = ob->n ? rn_durable_sync(p) : 0;
  if (rc) {
    rn_err_set(&ob->err, RN_EIO, "durable sinks wait: syncing the state to disk failed: %s", rn_store_strerror(rc));
    ob->failed = ob->backlog = true;
    return false;
  }
  return true;
}

static bool deliver_all(rn_pipeline *p, rn_outbox *ob)
{
  ob->fresh = ob->backlog = ob->failed = false;
  if (!synced(p, ob)) return true;
  ob->delivering = true;
  rn_gstate state = p->state;
  p->state = RN_APPLYING; /* (2): read, not change */
  bool done[ob->n > 0 ? ob->n : 1];
  memset(done, 0, sizeof done);
  for (int i = 0; i < ob->n; i++)
    if (!done[i]) deliver_joint(p, ob, i, done);
  p->state = state;
  ob->delivering = false;
  return ob->failed;
}

void rn_outbox_after_commit(rn_pipeline *p)
{
  rn_outbox *ob = p->outbox;
  if (!ob || ob->delivering || p->state != RN_IDLE || (!ob->fresh && !ob->backlog)) return;
  deliver_all(p, ob);
}

RN_API int rn_deliver(rn_pipeline *p)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* before any state: a child's is its parent's */
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "deliver: not inside a group or a callback");
  int rc = rn_flush(p);
  if (rc) return rc;
  rn_outbox *ob = p->outbox;
  if (!ob || ob->delivering) return 0;
  if (deliver_all(p, ob)) {
    p->err = ob->err;
    return p->err.code ? p->err.code : RN_ECALLBACK;
  }
  for (int i = 0; i < ob->n; i++) { /* delivered, not yet synced (3): tried again, said if it fails */
    obsink *s = ob->sinks[i];
    if (!s->name || s->delivered <= s->synced) continue;
    sync_sink(p, s);
    if (s->delivered > s->synced) {
      p->err = s->failure;
      return p->err.code;
    }
  }
  rn_err_clear(&p->err); /* what its subscribers were refused is not the delivery's message */
  return 0;
}

/* ---- sinks ---- */

static void free_sink(obsink *s)
{
  if (s->free_ctx) s->free_ctx(s->ctx);
  free(s->name);
  free(s->label);
  free(s->mkey);
  free(s->fmt);
  for (int i = 0; i < s->nolds; i++) rn_schema_free(s->olds[i].schema);
  free(s->olds);
  free(s);
}

/* The layout of rel's rows (8): a hash of what decides how a stored row
 * reads, tagged "rows1": the relation's name, each column's name and
 * type (a struct's fields whole), the key. Not a column's nullability nor
 * its default: a default only fills rows as they are made, and a column
 * made nullable reads every waiting row the same; one made not null reads
 * them the same unless a waiting new row holds null there (waiting_null).
 * full: the hash of the whole declaration, which states before this one
 * recorded (an entry with it waits for the same declaration). */
static uint64_t layout_of(const rn_rel *rel, bool full)
{
  const rn_schema *sc = rel->schema;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  if (!full) msgpack_pack_str_with_body(&pk, "rows1", 5);
  msgpack_pack_str_with_body(&pk, rel->name, strlen(rel->name));
  if (full) rn_schema_describe(sc, &pk);
  for (int i = 0; !full && i < sc->ncols; i++) {
    const rn_column *c = &sc->cols[i];
    msgpack_pack_str_with_body(&pk, c->name, c->name_len);
    msgpack_pack_str_with_body(&pk, rn_type_name(c->type), strlen(rn_type_name(c->type)));
    if (c->fields) rn_schema_describe(c->fields, &pk); else msgpack_pack_nil(&pk);
  }
  for (int i = 0; !full && i < sc->nkey; i++) msgpack_pack_int(&pk, sc->key_slots[i]);
  uint64_t h = rn_hash64(b.data, b.size);
  msgpack_sbuffer_destroy(&b);
  return h;
}

/* The layout an entry was recorded with, or 0 (a state older than (8)). */
static uint64_t entry_layout(const MDB_val *v)
{
  const unsigned char *b = v->mv_data;
  size_t head = v->mv_size == 0 ? 0 : (b[0] & 0xf0) == 0x90 ? 1 : b[0] == 0xdc ? 3 : b[0] == 0xdd ? 5 : 0;
  if (!head || v->mv_size < head + 9 || b[head] != 0xcf) return 0;
  return get_be64((const char *)b + head + 1);
}

/* The layout (as layout_of packs it) of rows of relation name (nlen
 * bytes) described by d, a description rn_schema_desc_valid accepted:
 * the check of an "ol:" record (11). The description's parts are packed
 * again as rn_schema_describe packed them, the same bytes. */
static uint64_t layout_of_desc(const char *name, size_t nlen, const msgpack_object *d)
{
  const msgpack_object *cols = &d->via.array.ptr[0], *key = &d->via.array.ptr[1];
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  msgpack_pack_str_with_body(&pk, "rows1", 5);
  msgpack_pack_str_with_body(&pk, name, nlen);
  for (uint32_t i = 0; i < cols->via.array.size; i++) {
    const msgpack_object *c = cols->via.array.ptr[i].via.array.ptr; /* name, type, nullable, default, fields */
    msgpack_pack_object(&pk, c[0]);
    msgpack_pack_object(&pk, c[1]);
    msgpack_pack_object(&pk, c[4]);
  }
  for (uint32_t i = 0; i < key->via.array.size; i++) msgpack_pack_object(&pk, key->via.array.ptr[i]);
  uint64_t h = rn_hash64(b.data, b.size);
  msgpack_sbuffer_destroy(&b);
  return h;
}

/* The record [relation, description] in v (n bytes) read into *d, with
 * its relation; false unless it is one and describes rows of layout. */
static bool layout_record(const void *v, size_t n, uint64_t layout, msgpack_zone *z, msgpack_object *d)
{
  msgpack_object o;
  size_t off = 0;
  if (rn_msgpack_size(v, n) != n || rn_unpack(v, n, &off, z, &o) != MSGPACK_UNPACK_SUCCESS ||
      o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size != 2 || o.via.array.ptr[0].type != MSGPACK_OBJECT_STR ||
      !rn_schema_desc_valid(&o.via.array.ptr[1], 0))
    return false;
  *d = o.via.array.ptr[1];
  return layout_of_desc(o.via.array.ptr[0].via.str.ptr, o.via.array.ptr[0].via.str.size, d) == layout && !rn_oom();
}

/* The columns s's entries of layout were committed with, from its "ol:"
 * record in txn, read once and kept with s (11); NULL when the state has
 * no record of them that checks (a state before 0.37), or out of memory. */
static const rn_schema *old_schema(rn_pipeline *p, obsink *s, MDB_txn *txn, uint64_t layout)
{
  for (int i = 0; i < s->nolds; i++)
    if (s->olds[i].layout == layout) return s->olds[i].schema;
  char key[LAYOUT_KEY];
  MDB_val k = { layout_key(s->tag, layout, key), key }, v;
  if (mdb_get(txn, p->store.meta, &k, &v) != 0) return NULL;
  msgpack_zone z;
  msgpack_object d;
  rn_err e = { .code = RN_OK };
  rn_schema *sc = NULL;
  old_layout *more = realloc(s->olds, (size_t)(s->nolds + 1) * sizeof *more);
  if (more) s->olds = more;
  rn_oom_clear();
  if (more && rn_zone_init(&z, 1024)) {
    if (layout_record(v.mv_data, v.mv_size, layout, &z, &d)) sc = rn_attach_schema_of(&d, &e);
    rn_zone_destroy(&z);
  }
  if (sc) s->olds[s->nolds++] = (old_layout){ layout, sc };
  return sc;
}

/* Records in txn the columns of s's relation under s's layout (11), the
 * layout of every entry it writes from now on: one put per declaration.
 * A description that would not check as read back is not recorded (its
 * groups are refused as before 0.37, never read wrong). */
static int write_layout(rn_pipeline *p, obsink *s, MDB_txn *txn)
{
  char key[LAYOUT_KEY];
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, rn_buf_write);
  rn_oom_clear();
  msgpack_pack_array(&pk, 2);
  msgpack_pack_str_with_body(&pk, s->rel->name, strlen(s->rel->name));
  rn_schema_describe(s->rel->schema, &pk);
  msgpack_zone z;
  msgpack_object d;
  int rc = rn_oom() || !rn_zone_init(&z, 1024) ? rn_err_set(&p->err, RN_ENOMEM, "out of memory") : 0;
  if (!rc) {
    bool checks = layout_record(b.data, b.size, s->layout, &z, &d);
    rn_zone_destroy(&z);
    MDB_val k = { layout_key(s->tag, s->layout, key), key }, v = { b.size, b.data };
    if (checks && (rc = mdb_put(txn, p->store.meta, &k, &v, 0))) rc = rn_store_fail(&p->err, rc, s->label);
  }
  msgpack_sbuffer_destroy(&b);
  return rc;
}

/* At s's declaration, in its transaction (11): records its layout, finds
 * the last group waiting in another one (s->olds_upto), and deletes the
 * records of layouts no waiting group is in (an older build delivered
 * them, or their groups were dropped). */
static int keep_layouts(rn_pipeline *p, rn_outbox *ob, obsink *s, MDB_txn *txn)
{
  int rc = write_layout(p, s, txn);
  if (rc) return rc;
  uint64_t keep[64] = { s->layout };
  int nkeep = 1;
  bool all = false; /* more layouts than keep holds: none is deleted (a later declaration does it) */
  MDB_cursor *cur;
  if ((rc = mdb_cursor_open(txn, ob->dbi, &cur))) return rn_store_fail(&p->err, rc, s->label);
  char from[16];
  put_be64(from, s->tag);
  put_be64(from + 8, s->delivered + 1);
  MDB_val k = { 16, from }, v;
  s->olds_upto = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != 16 || get_be64(k.mv_data) != s->tag) break;
    uint64_t had = entry_layout(&v);
    int i = 0;
    if (!had || had == s->layout) continue;
    s->olds_upto = get_be64((char *)k.mv_data + 8);
    while (i < nkeep && keep[i] != had) i++;
    if (i == nkeep && nkeep < 64) keep[nkeep++] = had;
    else if (i == nkeep) all = true;
  }
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) rc = 0;
  if (!rc && !all) rc = drop_layouts(txn, p->store.meta, s->tag, keep, nkeep);
  return rc ? rn_store_fail(&p->err, rc, s->label) : 0;
}

/* Whether one stored row holds null in a column sc declares not null;
 * *col: the first such column. (A row that does not decode is left to
 * its delivery, which says the group is damaged.) */
static bool row_null(const rn_schema *sc, const msgpack_object *row, msgpack_zone *z, int *col)
{
  if (row->type != MSGPACK_OBJECT_BIN) return false;
  const msgpack_object *v = rn_row_unpack(row->via.bin.ptr, row->via.bin.size, sc->ncols, z);
  for (int i = 0; v && i < sc->ncols; i++)
    if (!sc->cols[i].nullable && v[i].type == MSGPACK_OBJECT_NIL) { *col = i; return true; }
  return false;
}

/* Whether an entry recorded with rel's row layout holds a new row (an
 * INSERT's or UPDATE's) with null in a column rel now declares not null
 * (8); *col: that column. Reads every change of the entry: once per
 * waiting group at declaration.
 *
 * Old images (an UPDATE's old row, a DELETE's row) are not read, by
 * choice: they are rows the sink was told before, as it was told them,
 * not rows it will hold, and the very declaration that records them may
 * tell null in a not null column (a derived relation's new column is
 * null in the old rows its rebuild tells: evolve_log.c, 0.21), so a sink
 * takes such nulls already and no declaration that keeps the layout
 * makes one unreadable. What a user declaring a column not null asks is
 * that the rows the sink goes on to hold have a value there: the new
 * rows. Reading old images refused a sink whose told group waited at any
 * declaration of its relation, the same one too, and one whose waiting
 * UPDATE only replaced a null the sink was told before. */
static bool waiting_null(const rn_rel *rel, const MDB_val *v, int *col)
{
  const rn_schema *sc = rel->schema;
  bool strict = false, found = false;
  for (int i = 0; i < sc->ncols; i++) strict |= !sc->cols[i].nullable && !sc->cols[i].is_key;
  if (!strict) return false; /* every column may hold null (a key never does) */
  msgpack_zone z;
  msgpack_object o;
  size_t off = 0;
  if (!rn_zone_init(&z, 4096)) return false; /* its delivery says so */
  if (rn_unpack(v->mv_data, v->mv_size, &off, &z, &o) != MSGPACK_UNPACK_SUCCESS || o.type != MSGPACK_OBJECT_ARRAY)
    o.via.array.size = 0; /* damaged: its delivery says so */
  for (uint32_t i = 1; !found && i < o.via.array.size; i++) {
    const msgpack_object *c = &o.via.array.ptr[i];
    if (c->type == MSGPACK_OBJECT_ARRAY && c->via.array.size == 4)
      found = row_null(sc, &c->via.array.ptr[2], &z, col);
  }
  rn_zone_destroy(&z);
  return found;
}

/* What waits for a sink that its relation's declaration would read wrong (8). */
typedef struct stale {
  uint64_t seq;           /* the first such group, or 0 */
  int col;                /* its column holding null, now not null; -1: another layout */
} stale;

/* The first group after `after` waiting under tag that rel's declaration
 * would read wrong: recorded with another layout, or holding null in a
 * column now not null. For log, a log sink (11), only a group of another
 * layout the state has no record of: it reads each group in the columns
 * it was committed with, nulls as committed. seq 0: none, or the outbox
 * cannot be read. */
static stale first_stale(rn_pipeline *p, MDB_txn *txn, MDB_dbi dbi, uint64_t tag, uint64_t after, const rn_rel *rel,
                         obsink *log)
{
  stale st = { 0, -1 };
  MDB_cursor *cur;
  if (mdb_cursor_open(txn, dbi, &cur)) return st;
  uint64_t rows = layout_of(rel, false), full = layout_of(rel, true);
  char from[16];
  put_be64(from, tag);
  put_be64(from + 8, after + 1);
  MDB_val k = { 16, from }, v;
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && !st.seq; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (k.mv_size != 16 || get_be64(k.mv_data) != tag) break;
    uint64_t had = entry_layout(&v);
    if (!had || had == full) continue; /* a state older than (8), or the same declaration */
    if (log && (had == rows || old_schema(p, log, txn, had))) continue; /* as committed (11) */
    if (had != rows || waiting_null(rel, &v, &st.col)) st.seq = get_be64((char *)k.mv_data + 8);
  }
  mdb_cursor_close(cur);
  return st;
}

uint64_t rn_outbox_stale(rn_pipeline *p, const char *name, const rn_rel *rel, uint64_t after)
{
  MDB_txn *txn;
  MDB_dbi dbi;
  stale st = { 0, -1 };
  if (rn_store_txn(p->store.env, MDB_RDONLY, &txn)) return 0;
  if (mdb_dbi_open(txn, RN_DB_OUTBOX, 0, &dbi) == 0 && mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0)
    st = first_stale(p, txn, dbi, rn_hash64(name, strlen(name)), after, rel, NULL);
  mdb_txn_abort(txn);
  return st.seq;
}

/* (8): refuses s while a group waits for it that its relation's
 * declaration would read wrong. */
static int check_waiting(rn_pipeline *p, rn_outbox *ob, obsink *s, MDB_txn *txn)
{
  stale st = first_stale(p, txn, ob->dbi, s->tag, s->delivered, s->rel, s->ops.as_committed ? s : NULL);
  if (!st.seq) return 0;
  if (st.col >= 0)
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: %s: group %llu waits for it with null in column \"%s\", now not null; "
                      "declare the column null = true to deliver the waiting groups, or give the sink a new name",
                      s->rel->name, s->label, (unsigned long long)st.seq, s->rel->schema->cols[st.col].name);
  return rn_err_set(&p->err, RN_EINVAL,
                    "%s: %s: group %llu waits for it, recorded for another relation or another "
                    "declaration of %s; its rows would be read wrong: declare the sink as it was to deliver "
                    "the waiting groups, or give it a new name",
                    s->rel->name, s->label, (unsigned long long)st.seq, s->rel->name);
}

/* The last group committed while s's name was declared (5), as its record
 * in txn says; the state's seq when it has none (a new sink misses nothing). */
static uint64_t seen_of(const rn_pipeline *p, const obsink *s, MDB_txn *txn)
{
  MDB_val k = { s->mklen, s->mkey }, v;
  uint64_t r[3];
  if (mdb_get(txn, p->store.meta, &k, &v) != 0 || v.mv_size != sizeof r) return p->seq;
  memcpy(r, v.mv_data, sizeof r);
  return r[0];
}

/* (5): the groups after seen were committed while s was not declared, so
 * the outbox holds none of them for it. Those that changed nothing s
 * reads (rn_state_changed: its relation's "ch:" records, store.h) it
 * missed nothing of; the last that may have: its *upto, or 0 when none.
 * The groups before the records' span (an older build committed them)
 * are counted as changing it. */
static uint64_t missed_upto(rn_pipeline *p, const obsink *s, MDB_txn *txn, uint64_t seen)
{
  if (seen >= p->seq) return 0;
  uint64_t last = rn_state_changed(p, s->rel, txn), upto = last > seen ? last : 0;
  if (seen < p->changes_from && p->changes_from > upto) upto = p->changes_from; /* not known: they may have */
  return upto < p->seq ? upto : p->seq;
}

/* (5): the changes of s's relation in groups seen+1 to upto never reached
 * s. A sink that covered them its own way starts past them (an SQLite
 * table rewritten: delivered = seq); any other is told, in the pipeline's
 * notes (runnel.open{ notes }), naming it as its user knows it (label) and
 * the relation it reads, and goes on from the next group. */
static int note_missed(rn_pipeline *p, const obsink *s, uint64_t seen, uint64_t upto)
{
  char line[2048], groups[64];
  if (upto == seen + 1) snprintf(groups, sizeof groups, "group %llu", (unsigned long long)upto);
  else snprintf(groups, sizeof groups, "groups %llu to %llu", (unsigned long long)seen + 1, (unsigned long long)upto);
  snprintf(line, sizeof line, "%.520s: %.600s missed the changes of %.300s in %s: they were committed while it was "
           "not declared, and the outbox keeps a group only for the durable sinks declared when it commits; it goes "
           "on from group %llu", s->rel->name, s->label, s->rel->name, groups, (unsigned long long)p->seq + 1);
  char *copy = strdup(line);
  if (!copy || rn_push_ptr((void ***)&p->notes, &p->nnotes, &p->notecap, copy)) {
    free(copy);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  return 0;
}

/* A group waiting for s at or before the mark its record in txn holds:
 * the mark and the deletion of the entries it covers are written in one
 * transaction (3), so the record was damaged (moved past groups never
 * delivered, which the declaration would delete unsaid). Refused, naming
 * the group, the mark and the ways on. */
static int check_mark(rn_pipeline *p, rn_outbox *ob, obsink *s, MDB_txn *txn)
{
  MDB_val k = { s->mklen, s->mkey }, v;
  uint64_t r[3];
  if (mdb_get(txn, p->store.meta, &k, &v) != 0 || v.mv_size != sizeof r) return 0;
  memcpy(r, v.mv_data, sizeof r);
  MDB_cursor *cur;
  int rc = mdb_cursor_open(txn, ob->dbi, &cur);
  if (rc) return rn_store_fail(&p->err, rc, s->label);
  char from[16];
  put_be64(from, s->tag);
  put_be64(from + 8, 0);
  MDB_val ek = { 16, from }, ev;
  uint64_t seq = 0;
  rc = mdb_cursor_get(cur, &ek, &ev, MDB_SET_RANGE);
  if (rc == 0 && ek.mv_size == 16 && get_be64(ek.mv_data) == s->tag) seq = get_be64((char *)ek.mv_data + 8);
  mdb_cursor_close(cur);
  if (rc && rc != MDB_NOTFOUND) return rn_store_fail(&p->err, rc, s->label);
  if (!seq || seq > r[1]) return 0;
  return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the mark of %s says groups up to %llu were delivered, "
                    "but group %llu waits for it (runnel verify shows it); to go on, drop what waits for it "
                    "(p:drop_outbox or runnel drop-outbox) or give the sink a new name",
                    p->store.path, s->label, (unsigned long long)r[1], (unsigned long long)seq);
}

/* In a transaction of its own: opens the outbox, checks what waits (8),
 * writes s's record and deletes the entries its mark covers (a rewrite
 * may have passed them). */
static int declare_record(rn_pipeline *p, rn_outbox *ob, obsink *s)
{
  int rc = rn_flush(p);
  if (rc) return rc;
  MDB_txn *txn;
  if ((rc = mdb_txn_begin(p->store.env, NULL, 0, &txn))) return rn_store_fail(&p->err, rc, s->label);
  if (!ob->has_dbi) {
    rc = rn_store_dbi_open(&p->store, txn, RN_DB_OUTBOX, MDB_CREATE, &ob->dbi);
    if (!rc) rc = mdb_set_compare(txn, ob->dbi, rn_store_key_cmp);
    if (rc) { mdb_txn_abort(txn); return rn_store_fail(&p->err, rc, RN_DB_OUTBOX); }
  }
  s->marked = 0; /* delete whatever an older mark left */
  uint64_t seen = seen_of(p, s, txn), upto = missed_upto(p, s, txn, seen);
  rc = check_mark(p, ob, s, txn);
  if (!rc && s->ops.as_committed) rc = keep_layouts(p, ob, s, txn);
  if (!rc) rc = check_waiting(p, ob, s, txn);
  if (!rc) rc = write_mark(p, ob, s, txn, p->seq);
  if (!rc) rc = write_info(p, s, txn);
  if (rc) { mdb_txn_abort(txn); return rc; }
  if ((rc = mdb_txn_commit(txn))) return rn_store_fail(&p->err, rc, s->label);
  ob->has_dbi = true;
  mark_committed(s);
  return upto && s->delivered < upto ? note_missed(p, s, seen, upto) : 0;
}

static int add_sink(rn_outbox *ob, obsink *s)
{
  if (ob->n == ob->cap) {
    int cap = ob->cap ? ob->cap * 2 : 4;
    obsink **a = realloc(ob->sinks, (size_t)cap * sizeof *a);
    if (!a) return -1;
    ob->sinks = a;
    ob->cap = cap;
  }
  ob->sinks[ob->n++] = s;
  return 0;
}

int rn_outbox_sink_check(rn_pipeline *p, const rn_rel *rel, const char *name)
{
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "%s: sinks are added outside groups", rel->name);
  if (rn_check_not_lookup(p, rel->name, "sink", rel)) return p->err.code; /* durable sinks skip rn_sink_add's */
  rn_outbox *ob = p->outbox;
  uint64_t tag = name ? rn_hash64(name, strlen(name)) : 0;
  for (int i = 0; name && ob && i < ob->n; i++)
    if (ob->sinks[i]->name && (ob->sinks[i]->tag == tag || strcmp(ob->sinks[i]->name, name) == 0))
      return rn_err_set(&p->err, RN_EINVAL, "%s: %s is already declared", rel->name, ob->sinks[i]->label);
  return 0;
}

const char *rn_outbox_sink_on_file(const rn_pipeline *p, const uint64_t id[2])
{
  const rn_outbox *ob = p->outbox;
  for (int i = 0; ob && i < ob->n; i++) {
    const obsink *s = ob->sinks[i];
    uint64_t at[2];
    if (s->ops.file && s->ops.file(s->ctx, at) && at[0] == id[0] && at[1] == id[1]) return s->label;
  }
  return NULL;
}

int rn_outbox_sink_add(rn_pipeline *p, rn_rel *rel, const char *name, const char *label, bool consolidate,
                       const rn_outbox_ops *ops, void *ctx, rn_free_fn free_ctx,
                       uint64_t delivered, uint64_t position)
{
  return rn_outbox_sink_add_formatted(p, rel, name, label, consolidate, ops, ctx, free_ctx, delivered, position,
                                      NULL, 0);
}

int rn_outbox_sink_add_formatted(rn_pipeline *p, rn_rel *rel, const char *name, const char *label, bool consolidate,
                                 const rn_outbox_ops *ops, void *ctx, rn_free_fn free_ctx,
                                 uint64_t delivered, uint64_t position, const void *fmt, size_t flen)
{
  rn_outbox *ob = outbox_of(p);
  obsink *s = calloc(1, sizeof *s);
  if (!ob || !s) {
    free(s);
    if (free_ctx) free_ctx(ctx);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  *s = (obsink){ .rel = rel, .consolidate = consolidate, .ops = *ops, .ctx = ctx, .free_ctx = free_ctx,
                 .delivered = delivered, .position = position, .synced = delivered, .position_synced = position,
                 .layout = layout_of(rel, false) }; /* a recorded mark's output was synced before it was recorded */
  s->file.known = ops->file && ops->file(ctx, s->file.id); /* the file position is in */
  s->file_synced = s->file;
  int rc = rn_outbox_sink_check(p, rel, name);
  if (!rc && fmt && !(s->fmt = malloc(flen ? flen : 1))) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  else if (!rc && fmt) memcpy(s->fmt, fmt, flen), s->flen = flen;
  if (!rc && name) {
    s->tag = rn_hash64(name, strlen(name));
    if (!(s->name = strdup(name)) || !(s->label = strdup(label ? label : name)) ||
        !(s->mkey = mark_key(name, &s->mklen)))
      rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    if (!rc) rc = declare_record(p, ob, s);
  } else if (!rc && label && !(s->label = strdup(label))) {
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  if (!rc && add_sink(ob, s)) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc) {
    free_sink(s);
    return rc;
  }
  rel->listeners++;
  if (name && !ob->delivering) { /* the groups after its mark (4) */
    bool failed = ob->failed;
    deliver_all(p, ob);
    ob->failed = failed;
  }
  return 0;
}

void rn_outbox_sink_holds_told(rn_pipeline *p)
{
  rn_outbox *ob = p->outbox;
  if (ob && ob->n) ob->sinks[ob->n - 1]->holds_told = p->seq + 1;
}

/* How many of s's groups after `after`, up to `upto`, wait in the state. */
static uint64_t count_stored(rn_pipeline *p, rn_outbox *ob, obsink *s, uint64_t after, uint64_t upto)
{
  uint64_t n = 0;
  MDB_txn *txn;
  MDB_cursor *cur;
  if (!ob->has_dbi || mdb_txn_begin(p->store.env, NULL, MDB_RDONLY, &txn)) return 0;
  if (mdb_cursor_open(txn, ob->dbi, &cur) == 0) {
    char from[16];
    put_be64(from, s->tag);
    put_be64(from + 8, after + 1);
    MDB_val k = { 16, from }, v;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
         rc == 0 && k.mv_size == 16 && get_be64(k.mv_data) == s->tag && get_be64((char *)k.mv_data + 8) <= upto;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
      n++;
    mdb_cursor_close(cur);
  }
  mdb_txn_abort(txn);
  return n;
}

/* How many sinks before the i-th share its relation and label: only
 * nameless ones can (a name is declared once). */
static int same_shown_before(const rn_outbox *ob, int i)
{
  const obsink *s = ob->sinks[i];
  int n = 0;
  for (int j = 0; j < i; j++) {
    const obsink *o = ob->sinks[j];
    n += o->rel == s->rel && !o->name && !s->name && (o->label && s->label ? !strcmp(o->label, s->label) : o->label == s->label);
  }
  return n;
}

enum { SHOWN_MAX = 1200 };

/* How the i-th sink is named to its user: its relation, then its label,
 * then " (2)", " (3)" … after the first of one relation and label. */
static const char *shown_as(const rn_outbox *ob, int i, char shown[SHOWN_MAX])
{
  const obsink *s = ob->sinks[i];
  char nth[24] = "";
  int before = same_shown_before(ob, i);
  if (before) snprintf(nth, sizeof nth, " (%d)", before + 1);
  snprintf(shown, SHOWN_MAX, "%.300s: %.860s%s", s->rel->name, s->label ? s->label : "durable sink", nth);
  return shown;
}

int rn_outbox_pending(rn_pipeline *p, rn_outbox_pending_fn fn, void *ctx)
{
  rn_outbox *ob = p->outbox;
  for (int i = 0; ob && i < ob->n; i++) {
    obsink *s = ob->sinks[i];
    uint64_t n = s->name ? count_stored(p, ob, s, s->delivered, UINT64_MAX) : 0;
    for (entry *e = ob->head; e; e = e->next) n += e->sink == s && (!s->name || !e->committed);
    char shown[SHOWN_MAX];
    fn(ctx, shown_as(ob, i, shown), s->name ? s->name : "(unnamed)", n);
  }
  return 0;
}

int rn_outbox_unsynced(rn_pipeline *p, rn_outbox_unsynced_fn fn, void *ctx)
{
  rn_outbox *ob = p->outbox;
  for (int i = 0; ob && i < ob->n; i++) {
    obsink *s = ob->sinks[i];
    uint64_t n = s->name && s->delivered > s->synced ? count_stored(p, ob, s, s->synced, s->delivered) : 0;
    char shown[SHOWN_MAX];
    if (n) fn(ctx, shown_as(ob, i, shown), n);
  }
  return 0;
}

int rn_outbox_lost(rn_pipeline *p, rn_err *e)
{
  rn_outbox *ob = p->outbox;
  for (int i = 0; ob && i < ob->n; i++) {
    const obsink *s = ob->sinks[i];
    uint64_t first = 0, last = 0;
    for (const entry *en = ob->head; !s->name && en; en = en->next)
      if (en->sink == s && en->committed && en->seq > s->delivered) {
        if (!first) first = en->seq;
        last = en->seq;
      }
    size_t rl = strlen(s->rel->name);
    const char *why = s->failure.code ? s->failure.msg : "its delivery failed";
    if (!strncmp(why, s->rel->name, rl) && !strncmp(why + rl, ": ", 2)) why += rl + 2; /* named once */
    if (first)
      return rn_err_set(e, RN_EIO, "close: %s: groups %llu to %llu waiting for its NDJSON sink on an open file were "
                        "not delivered and are lost (it keeps them in memory only): %s", s->rel->name,
                        (unsigned long long)first, (unsigned long long)last, why);
  }
  return 0;
}

/* Writes every mark that moved since the last commit, in a small
 * transaction (3): only when no group is carried (their transaction holds
 * the marks then). */
static void write_marks(rn_pipeline *p, rn_outbox *ob)
{
  bool moved = false;
  for (int i = 0; i < ob->n; i++) {
    const obsink *s = ob->sinks[i];
    moved |= s->name && (s->delivered > s->marked || (!s->ops.finish && s->position != s->position_marked)); /* (9) */
  }
  if (!moved || p->store.wtxn || !ob->has_dbi) return;
  MDB_txn *txn;
  if (mdb_txn_begin(p->store.env, NULL, 0, &txn)) return;
  int rc = 0;
  for (int i = 0; i < ob->n && !rc; i++)
    if (ob->sinks[i]->name) rc = write_mark(p, ob, ob->sinks[i], txn, p->seq);
  if (rc || mdb_txn_commit(txn)) { if (rc) mdb_txn_abort(txn); return; }
  for (int i = 0; i < ob->n; i++) mark_committed(ob->sinks[i]);
}

int rn_outbox_sink_remove(rn_pipeline *p, rn_rel *rel, bool (*match)(rn_sink_fn change, void *ctx, void *arg),
                          void *arg)
{
  rn_outbox *ob = p->outbox;
  int i = 0;
  while (ob && i < ob->n && (ob->sinks[i]->rel != rel || !match(ob->sinks[i]->ops.change, ob->sinks[i]->ctx, arg))) i++;
  if (!ob || i == ob->n) return RN_ENOTFOUND;
  int rc = rn_flush(p); /* the carried groups' entries are in LMDB: its mark can be written now */
  if (rc) return rc;
  obsink *s = ob->sinks[i];
  write_marks(p, ob);
  entry **at = &ob->head; /* a nameless sink's groups go with it, as at close */
  while (*at) {
    entry *e = *at;
    if (e->sink == s) { *at = e->next; free(e); }
    else at = &e->next;
  }
  ob->tail = at;
  memmove(&ob->sinks[i], &ob->sinks[i + 1], sizeof *ob->sinks * (size_t)(ob->n - i - 1));
  ob->n--;
  rel->listeners--;
  free_sink(s);
  return 0;
}

/* A close's last word on the named sinks whose output it could not sync
 * (its last try was write_marks'): the groups are in the state, the next
 * open looks for them in the output (3). Each such sink is named, with
 * its relation and groups; the code is the first one's. */
static int unsynced_at_close(const rn_outbox *ob, rn_err *e)
{
  char *at = e->msg, *end = e->msg + sizeof e->msg;
  int code = 0;
  for (int i = 0; i < ob->n && at < end; i++) {
    const obsink *s = ob->sinks[i];
    if (!s->name || s->delivered <= s->synced) continue;
    char groups[96];
    if (s->delivered == s->synced + 1) snprintf(groups, sizeof groups, "group %llu was written but is", (unsigned long long)s->delivered);
    else
      snprintf(groups, sizeof groups, "groups %llu to %llu were written but are", (unsigned long long)s->synced + 1,
               (unsigned long long)s->delivered);
    at += snprintf(at, (size_t)(end - at), "%s%s: %s: %s; %s not known to be on disk", code ? "; " : "close: ",
                   s->rel->name, s->label, s->unsynced.code ? s->unsynced.msg : "syncing failed", groups);
    if (!code) code = s->unsynced.code ? s->unsynced.code : RN_EIO;
  }
  if (code && at < end)
    snprintf(at, (size_t)(end - at), ": they wait in the state, and the next open looks for them in its output "
             "(writing those missing)");
  if (code) e->code = code;
  return code;
}

int rn_outbox_close(rn_pipeline *p, rn_err *why)
{
  rn_outbox *ob = p->outbox;
  if (!ob) return 0;
  if (p->store.env && !p->carried) write_marks(p, ob);
  int rc = unsynced_at_close(ob, why);
  for (int i = 0; i < ob->n; i++) free_sink(ob->sinks[i]);
  free(ob->sinks);
  while (ob->head) {
    entry *e = ob->head;
    ob->head = e->next;
    free(e);
  }
  msgpack_sbuffer_destroy(&ob->buf);
  free(ob);
  p->outbox = NULL;
  return rc;
}

/* ---- the sinks a state keeps records of (10) ---- */

/* How many changes an entry holds: its list less the layout (8). */
static uint64_t entry_changes(const MDB_val *v)
{
  const unsigned char *b = v->mv_data;
  uint64_t n = 0;
  if (v->mv_size >= 1 && (b[0] & 0xf0) == 0x90) n = b[0] & 0x0f;
  else if (v->mv_size >= 3 && b[0] == 0xdc) n = (uint64_t)b[1] << 8 | b[2];
  else if (v->mv_size >= 5 && b[0] == 0xdd) n = (uint64_t)b[1] << 24 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 8 | b[4];
  return n && entry_layout(v) ? n - 1 : n;
}

int rn_outbox_sinks_txn(MDB_txn *txn, MDB_dbi meta, rn_outbox_kept_fn fn, void *ctx)
{
  MDB_cursor *cur, *ocur = NULL;
  MDB_dbi dbi;
  int rc = mdb_cursor_open(txn, meta, &cur);
  if (rc) return rc;
  if (mdb_dbi_open(txn, RN_DB_OUTBOX, 0, &dbi) == 0 && mdb_set_compare(txn, dbi, rn_store_key_cmp) == 0 &&
      mdb_cursor_open(txn, dbi, &ocur))
    ocur = NULL;
  MDB_val k = { 2, (void *)RN_META_DURABLE }, v;
  int mrc;
  for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == 0 && !rc && k.mv_size >= 3 &&
       memcmp(k.mv_data, RN_META_DURABLE, 2) == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    const char *key = k.mv_data;
    uint64_t r[3];
    if ((key[2] != ':' && key[2] != '#') || v.mv_size != sizeof r || k.mv_size > 600) continue;
    memcpy(r, v.mv_data, sizeof r);
    char name[600], whole[610], label[1300], rel[RN_NAME_MAX + 1], shown[1900], ikey[600];
    unsigned char fmts[1];
    size_t flen;
    snprintf(name, sizeof name, "%.*s", (int)k.mv_size - 3, key + 3);
    snprintf(whole, sizeof whole, "%.*s", (int)k.mv_size, key);
    if (key[2] == ':') rn_outbox_key_label(name, label, sizeof label);
    else snprintf(label, sizeof label, "durable sink of a name too long for a key (od#%s)", name);
    memcpy(ikey, key, k.mv_size);
    ikey[1] = 'i';
    info_read(txn, meta, ikey, k.mv_size, rel, sizeof rel, fmts, 0, &flen);
    if (rel[0]) snprintf(shown, sizeof shown, "%s: %s", rel, label);
    else snprintf(shown, sizeof shown, "%s", label);
    uint64_t tag = key[2] == ':' ? rn_hash64(key + 3, k.mv_size - 3) : strtoull(name, NULL, 16);
    rn_outbox_kept kept = { key[2] == ':' ? name : whole, label, rel, shown, r[0], r[1], 0, 0, 0, false,
                            has_layouts(txn, meta, tag) };
    if (rel[0]) {
      char rk[RN_NAME_MAX + 8];
      int rl = snprintf(rk, sizeof rk, RN_META_RELATION "%s", rel);
      MDB_val relk = { (size_t)rl, rk }, relv;
      kept.relation_gone = mdb_get(txn, meta, &relk, &relv) != 0;
    }
    char from[16];
    put_be64(from, tag);
    put_be64(from + 8, r[1] + 1);
    MDB_val ek = { 16, from }, ev;
    for (int erc = ocur ? mdb_cursor_get(ocur, &ek, &ev, MDB_SET_RANGE) : MDB_NOTFOUND;
         erc == 0 && ek.mv_size == 16 && get_be64(ek.mv_data) == tag; erc = mdb_cursor_get(ocur, &ek, &ev, MDB_NEXT)) {
      if (!kept.since) kept.since = get_be64((const char *)ek.mv_data + 8);
      kept.groups++;
      kept.rows += entry_changes(&ev);
    }
    rc = fn(ctx, &kept);
  }
  if (ocur) mdb_cursor_close(ocur);
  mdb_cursor_close(cur);
  return rc;
}

/* Whether p declared the sink of record k. */
static bool declared(const rn_pipeline *p, const rn_outbox_kept *k)
{
  const rn_outbox *ob = p->outbox;
  for (int i = 0; ob && i < ob->n; i++) {
    const obsink *s = ob->sinks[i];
    if (!s->name) continue;
    if (!strcmp(s->name, k->key)) return true;
    if (!strncmp(k->key, RN_META_DURABLE_HASHED, 3) &&
        s->tag == strtoull(k->key + RN_PREFIX_LEN(RN_META_DURABLE_HASHED), NULL, 16))
      return true;
  }
  return false;
}

typedef struct undeclared_walk {
  const rn_pipeline *p;
  rn_outbox_kept_fn fn;
  void *ctx;
} undeclared_walk;

static int undeclared_one(void *ctx, const rn_outbox_kept *k)
{
  undeclared_walk *w = ctx;
  return k->groups && !declared(w->p, k) ? w->fn(w->ctx, k) : 0;
}

int rn_outbox_undeclared(rn_pipeline *p, rn_outbox_kept_fn fn, void *ctx)
{
  MDB_txn *txn; /* what is committed: an undeclared sink gets no entry from carried groups (1) */
  int rc;
  /* From a declaration's callback, whose transaction opened databases: a read transaction opening the
     outbox's would take the slot of one of them (store.h, rn_store_dbi_open). The declaration's
     transaction carries no group, and sinks' records of undeclared sinks are what it holds too. */
  bool own = p->store.wtxn && p->store.wtxn_dbis;
  if (own) txn = p->store.wtxn;
  else if ((rc = rn_store_txn(p->store.env, MDB_RDONLY, &txn))) return rn_store_fail(&p->err, rc, RN_DB_OUTBOX);
  undeclared_walk w = { p, fn, ctx };
  rc = rn_outbox_sinks_txn(txn, p->store.meta, undeclared_one, &w);
  if (!own) mdb_txn_abort(txn);
  return rc ? rn_store_fail(&p->err, rc, RN_DB_OUTBOX) : 0;
}

typedef struct drop_walk {
  const char *want;
  const rn_pipeline *p;
  bool found, declared;
  char key[600], shown[1900];
} drop_walk;

static int drop_find(void *ctx, const rn_outbox_kept *k)
{
  drop_walk *w = ctx;
  if (strcmp(w->want, k->shown) && strcmp(w->want, k->label) && strcmp(w->want, k->key)) return 0;
  w->found = true;
  w->declared = declared(w->p, k);
  snprintf(w->key, sizeof w->key, "%s", k->key);
  snprintf(w->shown, sizeof w->shown, "%s", k->shown);
  return 1; /* the first that answers to the name */
}

int rn_outbox_drop(rn_pipeline *p, const char *sink)
{
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "drop_outbox: not inside a group or a callback");
  int rc = rn_flush(p);
  if (rc) return rc;
  drop_walk w = { .want = sink, .p = p };
  MDB_txn *txn;
  if ((rc = mdb_txn_begin(p->store.env, NULL, 0, &txn))) return rn_store_fail(&p->err, rc, RN_DB_OUTBOX);
  rc = rn_outbox_sinks_txn(txn, p->store.meta, drop_find, &w);
  if (rc != 0 && rc != 1) { mdb_txn_abort(txn); return rn_store_fail(&p->err, rc, RN_DB_OUTBOX); }
  if (!w.found) {
    mdb_txn_abort(txn);
    return rn_err_set(&p->err, RN_ENOTFOUND, "drop_outbox: no durable sink \"%s\" in the state (p:stats().outbox "
                      "and runnel inspect name them)", sink);
  }
  if (w.declared) {
    mdb_txn_abort(txn);
    return rn_err_set(&p->err, RN_EINVAL, "drop_outbox \"%s\": it is declared in this pipeline (its groups are "
                      "delivered to it)", w.shown);
  }
  bool hashed = !strncmp(w.key, RN_META_DURABLE_HASHED, 3);
  uint64_t tag = hashed ? strtoull(w.key + 3, NULL, 16) : rn_hash64(w.key, strlen(w.key));
  char mk[610];
  int ml = hashed ? snprintf(mk, sizeof mk, "%s", w.key) : snprintf(mk, sizeof mk, RN_META_DURABLE "%s", w.key);
  MDB_val k = { (size_t)ml, mk };
  rc = mdb_del(txn, p->store.meta, &k, NULL);
  mk[1] = 'i'; /* its "oi:" record */
  if (!rc && (rc = mdb_del(txn, p->store.meta, &k, NULL)) == MDB_NOTFOUND) rc = 0;
  mk[1] = 'f'; /* its "of:" record */
  if (!rc && (rc = mdb_del(txn, p->store.meta, &k, NULL)) == MDB_NOTFOUND) rc = 0;
  if (!rc) rc = drop_layouts(txn, p->store.meta, tag, NULL, 0); /* its "ol:" records (11) */
  MDB_dbi dbi;
  MDB_cursor *cur;
  int orc = rc ? rc : rn_store_dbi_open(&p->store, txn, RN_DB_OUTBOX, 0, &dbi);
  if (!rc && !orc && !(rc = mdb_set_compare(txn, dbi, rn_store_key_cmp)) && !(rc = mdb_cursor_open(txn, dbi, &cur))) {
    char from[16];
    put_be64(from, tag);
    put_be64(from + 8, 0);
    MDB_val ek = { 16, from }, ev;
    for (rc = mdb_cursor_get(cur, &ek, &ev, MDB_SET_RANGE); rc == 0 && ek.mv_size == 16 && get_be64(ek.mv_data) == tag;
         rc = mdb_cursor_get(cur, &ek, &ev, MDB_NEXT))
      if ((rc = mdb_cursor_del(cur, 0))) break;
    if (rc == MDB_NOTFOUND || rc == 0) rc = 0;
    mdb_cursor_close(cur);
  }
  if (!rc) rc = mdb_txn_commit(txn);
  else mdb_txn_abort(txn);
  return rc ? rn_store_fail(&p->err, rc, RN_DB_OUTBOX) : 0;
}
