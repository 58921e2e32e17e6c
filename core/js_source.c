/* js_source.c — a JetStream stream applied as groups, its positions in
 * the state: Kafka Streams' "offsets committed with the state", with the
 * group's LMDB transaction as the producer transaction.
 *
 *     meta "jp:" stream "\x1f" subject   |u64 seq|   the last stream sequence
 *                                                    applied from subject
 *     meta "jm:" stream "\x1f" subject   |i64 ns|    when the stream that
 *                                                    sequence counts in was
 *                                                    made (0.40; absent before)
 *     meta "jt:" stream "\x1f" subject   |i64 ns|    the stream's time of the
 *                                                    message at that sequence
 *                                                    (0.41; absent before)
 *
 * Invariants (JSSRC-n in specs):
 * (1) A group applying messages writes, in its own LMDB transaction, the
 *     stream sequence of the last message it applied per subject (the
 *     keeper, a sink with no log: on_seal writes, on_replay writes again
 *     when carried groups are replayed into a new transaction). So the
 *     state and its positions move together: a crash, a rollback, lost
 *     carried groups take both back to the same point.
 * (2) Positions are never trusted from memory across a failure: every run
 *     reads them from the state (after committing carried groups), and a
 *     failed group ends the run. Reading starts at position + 1 with an
 *     ephemeral pull consumer per subject that needs no acks.
 * (3) A stored position below the stream's first sequence minus one
 *     means messages were discarded before they were applied: an error,
 *     never a silent jump; so is one past the stream's last sequence (the
 *     stream was deleted and made again: its sequences start over), and so
 *     is one counted in a stream made at another time than the stream of
 *     that name now (made again and filled up to the position or past
 *     it), unless the stream keeps a message older than its creation
 *     time: that time moved in the server (stream_bounds), and a stream
 *     made again is then not told from the creation time. The message at
 *     the position, while the stream keeps it, must be the one applied
 *     there: the same time (message_kept), which a restart keeps; so a
 *     stream made again is caught whatever its creation time. A state with no
 *     position yet starts at the stream's first message (Kafka's
 *     auto.offset.reset = earliest). Checked at the start of a
 *     run, and again when a fetch begins past the position + 1 (the
 *     consumer passes over what was discarded while the run went on).
 * (4) Messages of several subjects are applied in stream order among those
 *     fetched; one message is never split between groups.
 * (5) No message matches two of a run's subjects: each subject has its
 *     own consumer, so a subject named twice, or two a message can match
 *     both of ("s.*" and "s.0"), would apply it twice. Refused before
 *     connecting. */
#include "jetstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the keeper: positions written with the group (JSSRC-1) ---- */

typedef struct position {
  char *key;              /* "jp:" stream "\x1f" subject */
  size_t klen;
  uint64_t committed;     /* as the state holds it, carried groups included */
  uint64_t applied;       /* as the open group leaves it */
  int64_t made_stored;    /* when the stream the committed position counts in was made (ns; 0: not known) */
  int64_t made;           /* the same, of the stream this run reads (0: no run yet) */
  int64_t committed_time; /* the stream's time of the message at committed (ns; 0: not known) */
  int64_t applied_time;   /* the same at applied */
} position;

typedef struct keeper {
  rn_pipeline *p;
  position **pos;         /* owned; feeds point at them */
  int n, cap;
} keeper;

static void free_keeper(void *ctx)
{
  keeper *k = ctx;
  for (int i = 0; i < k->n; i++) {
    free(k->pos[i]->key);
    free(k->pos[i]);
  }
  free(k->pos);
  free(k);
}

/* "jm:" or "jt:" (prefix) stream "\x1f" subject into buf (RN_STORE_KEY_MAX
 * + 1 bytes): the position's key (key, klen) under another prefix of the
 * same length. */
static MDB_val key_beside(const char *key, size_t klen, const char *prefix, char *buf)
{
  memcpy(buf, key, klen);
  memcpy(buf, prefix, RN_PREFIX_LEN(RN_META_JS_POSITION));
  return (MDB_val){ klen, buf };
}

/* The position seq, when its stream was made and the time of its message
 * at seq (JSSRC-3), in the group. */
static int put_position(keeper *k, const position *at, uint64_t seq, int64_t time, rn_err *e)
{
  MDB_val key = { at->klen, at->key }, val = { sizeof seq, &seq };
  int rc = mdb_put(k->p->store.wtxn, k->p->store.meta, &key, &val, 0);
  char buf[RN_STORE_KEY_MAX + 1];
  MDB_val mk = key_beside(at->key, at->klen, RN_META_JS_MADE, buf), mv = { sizeof at->made, (void *)&at->made };
  if (!rc && at->made) rc = mdb_put(k->p->store.wtxn, k->p->store.meta, &mk, &mv, 0);
  MDB_val tk = key_beside(at->key, at->klen, RN_META_JS_TIME, buf), tv = { sizeof time, &time };
  if (!rc && time) rc = mdb_put(k->p->store.wtxn, k->p->store.meta, &tk, &tv, 0);
  else if (!rc && (rc = mdb_del(k->p->store.wtxn, k->p->store.meta, &tk, NULL)) == MDB_NOTFOUND) rc = 0;
  return rc ? rn_store_fail(e, rc, "jetstream position") : 0;
}

static int keeper_seal(void *ctx, uint64_t seq, rn_err *e)
{
  (void)seq;
  keeper *k = ctx;
  for (int i = 0; i < k->n; i++) {
    position *at = k->pos[i];
    if (at->applied == at->committed) continue;
    int rc = put_position(k, at, at->applied, at->applied_time, e);
    if (rc) return rc;
  }
  return 0;
}

static void keeper_done(void *ctx, uint64_t seq, bool committed)
{
  (void)seq;
  keeper *k = ctx;
  for (int i = 0; i < k->n; i++) {
    position *at = k->pos[i];
    if (committed) at->committed = at->applied, at->committed_time = at->applied_time;
    else at->applied = at->committed, at->applied_time = at->committed_time;
  }
}

/* Carried groups were applied again in a new transaction: their positions too. */
static int keeper_replay(void *ctx, rn_err *e)
{
  keeper *k = ctx;
  for (int i = 0; i < k->n; i++) {
    position *at = k->pos[i];
    int rc = at->committed ? put_position(k, at, at->committed, at->committed_time, e) : 0;
    if (rc) return rc;
  }
  return 0;
}

/* The pipeline's keeper, registered on first use. It listens to no
 * relation's log: it is a sink only for the group's phases. */
static keeper *keeper_of(rn_pipeline *p)
{
  for (int i = 0; i < p->nsinks; i++)
    if (p->sinks[i]->on_seal == keeper_seal) return p->sinks[i]->ctx;
  if (p->nrels == 0) {
    rn_err_set(&p->err, RN_EMISUSE, "jetstream source: declare the relations first");
    return NULL;
  }
  keeper *k = calloc(1, sizeof *k);
  if (!k) { rn_err_set(&p->err, RN_ENOMEM, "out of memory"); return NULL; }
  k->p = p;
  if (rn_sink_add(p, p->rels[0], false, NULL, NULL, k, free_keeper)) return NULL;
  p->rels[0]->listeners--; /* it reads no log */
  rn_sink_set_hooks(p, keeper_seal, keeper_done);
  rn_sink_set_carry(p, keeper_replay, NULL);
  return k;
}

_Static_assert(sizeof RN_META_JS_MADE == sizeof RN_META_JS_POSITION && sizeof RN_META_JS_TIME == sizeof RN_META_JS_POSITION,
               "key_beside swaps the prefixes in place");

static int position_key(const char *stream, const char *subject, char **key, size_t *klen)
{
  *klen = RN_PREFIX_LEN(RN_META_JS_POSITION) + strlen(stream) + 1 + strlen(subject);
  if (*klen > RN_STORE_KEY_MAX) return RN_EINVAL;
  if (!(*key = malloc(*klen + 1))) return RN_ENOMEM;
  size_t pl = RN_PREFIX_LEN(RN_META_JS_POSITION), sl = strlen(stream);
  memcpy(*key, RN_META_JS_POSITION, pl);
  memcpy(*key + pl, stream, sl);
  (*key)[pl + sl] = '\x1f';
  memcpy(*key + pl + sl + 1, subject, strlen(subject) + 1);
  return 0;
}

/* In a read transaction: the position recorded under key (0: none). A
 * record of another size is damage, said so: read as 0, the source would
 * apply its stream again from the start. */
static int position_stored(rn_pipeline *p, const char *key, size_t klen, const char *stream, const char *subject,
                           uint64_t *seq, int64_t *made, int64_t *time)
{
  MDB_txn *txn;
  int rc = rn_store_txn(p->store.env, MDB_RDONLY, &txn);
  if (rc) return rn_store_fail(&p->err, rc, "jetstream position");
  MDB_val mk = { klen, (void *)key }, v;
  *seq = 0;
  *made = *time = 0;
  char buf[RN_STORE_KEY_MAX + 1];
  MDB_val made_k = key_beside(key, klen, RN_META_JS_MADE, buf), made_v;
  if (mdb_get(txn, p->store.meta, &made_k, &made_v) == 0 && made_v.mv_size == sizeof *made)
    memcpy(made, made_v.mv_data, sizeof *made);
  MDB_val time_k = key_beside(key, klen, RN_META_JS_TIME, buf), time_v;
  if (mdb_get(txn, p->store.meta, &time_k, &time_v) == 0 && time_v.mv_size == sizeof *time)
    memcpy(time, time_v.mv_data, sizeof *time);
  if ((rc = mdb_get(txn, p->store.meta, &mk, &v)) == 0 && v.mv_size == sizeof *seq) memcpy(seq, v.mv_data, sizeof *seq);
  if (rc == 0 && v.mv_size != sizeof *seq)
    rc = rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: the position of JetStream stream %s subject %s is %zu bytes, not 8",
                    p->store.path, stream, subject, v.mv_size);
  else if (rc && rc != MDB_NOTFOUND)
    rc = rn_store_fail(&p->err, rc, "jetstream position");
  else
    rc = 0;
  mdb_txn_abort(txn);
  return rc;
}

/* The keeper's entry for subject, read from the state (JSSRC-2). */
static position *position_read(rn_pipeline *p, keeper *k, const char *stream, const char *subject)
{
  char *key;
  size_t klen;
  int rc = position_key(stream, subject, &key, &klen);
  if (rc) {
    rn_err_set(&p->err, rc, rc == RN_ENOMEM ? "out of memory" : "jetstream: stream and subject names too long");
    return NULL;
  }
  uint64_t seq; /* read again each time: as committed, whatever a run rolled back left in memory */
  int64_t made, time;
  if (position_stored(p, key, klen, stream, subject, &seq, &made, &time)) { free(key); return NULL; }
  position *at = NULL;
  for (int i = 0; i < k->n && !at; i++)
    if (k->pos[i]->klen == klen && memcmp(k->pos[i]->key, key, klen) == 0) at = k->pos[i];
  if (at) {
    free(key);
  } else if (!(at = malloc(sizeof *at)) || rn_push_ptr((void ***)&k->pos, &k->n, &k->cap, at) != 0) {
    free(at);
    free(key);
    rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    return NULL;
  } else {
    at->key = key, at->klen = klen, at->made = 0;
  }
  at->committed = at->applied = seq;
  at->committed_time = at->applied_time = time;
  at->made_stored = made;
  return at;
}

int rn_js_position(rn_pipeline *p, const char *stream, const char *subject, uint64_t *seq)
{
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "jetstream position: not inside a group");
  rn_flush(p); /* carried groups are in the state, or lost: either way the state says */
  keeper *k = keeper_of(p);
  position *at = k ? position_read(p, k, stream, subject) : NULL;
  if (!at) return p->err.code;
  *seq = at->committed;
  return 0;
}

/* ---- feeds: one consumer per subject ---- */

typedef struct feed {
  const char *subject;
  position *at;           /* its position in the keeper */
  natsSubscription *sub;
  natsMsgList got;        /* fetched, not yet applied from index next */
  int next;
  uint64_t pending;       /* messages the consumer still holds after those fetched */
} feed;

typedef struct source {
  rn_pipeline *p;
  const rn_js_source_opts *o;
  natsConnection *nc;
  jsCtx *js;
  feed *feeds;
  msgpack_zone zone;      /* a message's decoded changes */
} source;

/* Drops the fetched messages and the consumer; remove: delete the
 * ephemeral consumer on the server now (the run's end) rather than let it
 * expire (its node is gone: nothing to ask). */
static void feed_drop(feed *f, bool remove)
{
  if (f->got.Msgs) natsMsgList_Destroy(&f->got);
  memset(&f->got, 0, sizeof f->got);
  f->next = 0;
  if (f->sub && remove) natsSubscription_Unsubscribe(f->sub);
  if (f->sub) natsSubscription_Destroy(f->sub);
  f->sub = NULL;
}

/* The server's JSConsumerFilterNotSubsetErr (nats.c 3.4 has no name for it). */
#define JS_FILTER_NOT_SUBSET 10093

/* The stream does not capture f's subject: said with the subjects it does
 * (nats.c said "consumer filter subject is not a valid subset of the
 * interest subjects", the stream unnamed). */
static int no_such_subject(source *s, const feed *f)
{
  char list[512] = "";
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  if (js_GetStreamInfo(&si, s->js, s->o->stream, NULL, &jerr) == NATS_OK) {
    for (int i = 0; si->Config && i < si->Config->SubjectsLen; i++) {
      size_t at = strlen(list);
      snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", si->Config->Subjects[i]);
    }
    jsStreamInfo_Destroy(si);
  }
  return rn_err_set(&s->p->err, RN_EINVAL, "%s: stream %s holds no subject %s (its subjects: %s)", s->o->name,
                    s->o->stream, f->subject, *list ? list : "none");
}

/* An ephemeral pull consumer from the position + 1, no acks (JSSRC-2):
 * the position as the open group leaves it, when a consumer is replaced
 * in the middle of a group. */
static int feed_subscribe(source *s, feed *f)
{
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = s->o->stream;
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = f->at->applied + 1; /* the open group may hold some already */
  so.Config.InactiveThreshold = (int64_t)60 * 1000000000; /* a killed worker's consumer goes by itself */
  jsErrCode jerr = 0;
  natsStatus st = js_PullSubscribe(&f->sub, s->js, f->subject, NULL, NULL, &so, &jerr);
  jsConsumerInfo *ci = NULL;
  if (st == NATS_OK && (st = natsSubscription_GetConsumerInfo(&ci, f->sub, NULL, &jerr)) == NATS_OK) {
    f->pending = ci->NumPending;
    jsConsumerInfo_Destroy(ci);
    return 0;
  }
  if (f->sub) natsSubscription_Destroy(f->sub);
  f->sub = NULL;
  if (jerr == JS_FILTER_NOT_SUBSET) return no_such_subject(s, f);
  return rn_err_set(&s->p->err, RN_EIO, "%s: subscribing to %s: %s (%s)", s->o->name, f->subject,
                    natsStatus_GetText(st), nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
}

/* What JSSRC-3 asks of the stream now. */
typedef struct bounds {
  uint64_t first, last;   /* its first and last sequences */
  int64_t made;           /* its creation time as the server says it (ns) */
  bool made_sure;         /* false: it keeps a message older than that, so the time moved (see stream_bounds) */
} bounds;

/* The stream's sequences and creation time. nats-server 2.9 gives a file
 * stream the time of a restart as its creation time once its config was
 * changed after that restart and the server restarted again: a message
 * older than the creation time tells such a time, which says nothing of
 * a stream made again. */
static int stream_bounds(source *s, bounds *b)
{
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus st = js_GetStreamInfo(&si, s->js, s->o->stream, NULL, &jerr);
  if (st != NATS_OK)
    return rn_err_set(&s->p->err, RN_EIO, "%s: stream %s: %s", s->o->name, s->o->stream,
                      jerr == JSStreamNotFoundErr ? "no such stream" : natsStatus_GetText(st));
  b->first = si->State.FirstSeq;
  b->last = si->State.LastSeq;
  b->made = si->Created;
  b->made_sure = !(si->State.Msgs > 0 && si->State.FirstTime > 0 && si->State.FirstTime < si->Created);
  jsStreamInfo_Destroy(si);
  return 0;
}

/* JSSRC-3 for one subject at position at, counted in the stream made at
 * at_made (0: not known), in the stream as b says it is now. */
static int position_kept(source *s, const feed *f, uint64_t at, int64_t at_made, const bounds *b)
{
  uint64_t first = b->first, last = b->last;
  if (at > last) /* the consumer would wait for sequence at + 1 and pass over everything before it */
    return rn_err_set(&s->p->err, RN_EINVAL,
                      "%s: stream %s: the state's position for %s is %llu but the stream ends at %llu: the stream "
                      "was made again (its sequences start over), and messages 1..%llu would be passed over; "
                      "rebuild the state",
                      s->o->name, s->o->stream, f->subject, (unsigned long long)at, (unsigned long long)last,
                      (unsigned long long)at);
  if (at > 0 && at_made && b->made && b->made_sure && at_made != b->made) /* made again and filled up to the position or past it */
    return rn_err_set(&s->p->err, RN_EINVAL,
                      "%s: stream %s: the state's position for %s is %llu of an earlier stream of that name: the "
                      "stream was made again (its sequences start over), and messages 1..%llu would be passed over; "
                      "rebuild the state",
                      s->o->name, s->o->stream, f->subject, (unsigned long long)at, (unsigned long long)at);
  if (at > 0 && at + 1 < first)
    return rn_err_set(&s->p->err, RN_EINVAL,
                      "%s: stream %s: the state's position for %s is %llu but the stream starts at %llu: "
                      "messages %llu..%llu were discarded before they were applied (retention); "
                      "restore the state from a newer snapshot or rebuild it",
                      s->o->name, s->o->stream, f->subject, (unsigned long long)at, (unsigned long long)first,
                      (unsigned long long)at + 1, (unsigned long long)first - 1);
  return 0;
}

/* The server's JSNoMessageFoundErr. */
#define JS_NO_MESSAGE_FOUND 10037

/* JSSRC-3: the message at f's position, while the stream keeps it, is the
 * one applied there (the time the stream gave it then). A restart or an
 * edit of the stream keeps its messages' times; a stream made again gives
 * its message of that sequence a time of its own. */
static int message_kept(source *s, const feed *f)
{
  const position *at = f->at;
  if (!at->committed || !at->committed_time) return 0; /* nothing applied, or before 0.41 */
  natsMsg *m = NULL;
  jsErrCode jerr = 0;
  natsStatus st = js_GetMsg(&m, s->js, s->o->stream, at->committed, NULL, &jerr);
  if (st != NATS_OK) /* gone (deleted, or the retention's front): nothing to compare */
    return jerr == JS_NO_MESSAGE_FOUND ? 0
                                       : rn_err_set(&s->p->err, RN_EIO, "%s: stream %s: reading message %llu: %s",
                                                    s->o->name, s->o->stream, (unsigned long long)at->committed,
                                                    natsStatus_GetText(st));
  int64_t time = natsMsg_GetTime(m);
  natsMsg_Destroy(m);
  if (time == at->committed_time) return 0;
  return rn_err_set(&s->p->err, RN_EINVAL,
                    "%s: stream %s: the state's position for %s is %llu of an earlier stream of that name: the "
                    "stream was made again (its sequences start over: its message %llu is not the one applied), "
                    "and messages 1..%llu would be passed over; rebuild the state",
                    s->o->name, s->o->stream, f->subject, (unsigned long long)at->committed,
                    (unsigned long long)at->committed, (unsigned long long)at->committed);
}

/* JSSRC-3: nothing between the position and the stream's first message
 * may be gone, and the position must count in this stream. */
static int check_retention(source *s)
{
  bounds b;
  int rc = stream_bounds(s, &b);
  for (int i = 0; !rc && i < s->o->nsubjects; i++) {
    position *at = s->feeds[i].at;
    rc = position_kept(s, &s->feeds[i], at->committed, at->made_stored, &b);
    if (!rc) rc = message_kept(s, &s->feeds[i]);
    at->made = b.made; /* written with the position from now on */
  }
  return rc;
}

static uint64_t stream_seq(natsMsg *m)
{
  jsMsgMetaData *md = NULL;
  uint64_t seq = 0;
  if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
    seq = md->Sequence.Stream;
    jsMsgMetaData_Destroy(md);
  }
  return seq;
}

/* Fetches up to max messages: those the consumer holds (a pull returns
 * early only when its batch is full, so it asks for no more than are
 * pending), or, with wait_ms, whatever comes within wait_ms. A failed
 * fetch (a node gone) drops the consumer: the next fetch subscribes again
 * from the position in memory, which the open group holds (the run
 * applies synchronously). */
static int feed_fetch(source *s, feed *f, int max, int64_t wait_ms)
{
  if (f->got.Msgs) natsMsgList_Destroy(&f->got);
  memset(&f->got, 0, sizeof f->got);
  f->next = 0;
  if (!f->sub) {
    int rc = feed_subscribe(s, f);
    if (rc) return rc;
  }
  if (!wait_ms && f->pending == 0) return 0;
  jsFetchRequest req;
  jsFetchRequest_Init(&req);
  req.Batch = wait_ms || f->pending > (uint64_t)max ? max : (int)f->pending;
  req.Expires = (wait_ms ? wait_ms : 2000) * 1000000;
  natsStatus st = natsSubscription_FetchRequest(&f->got, f->sub, &req);
  if (st == NATS_OK && f->got.Count > 0) {
    jsMsgMetaData *md = NULL;
    if (natsMsg_GetMetaData(&md, f->got.Msgs[f->got.Count - 1]) == NATS_OK) {
      f->pending = md->NumPending;
      jsMsgMetaData_Destroy(md);
    }
    /* JSSRC-3 during the run: the consumer goes on at the stream's next
     * message, past any discarded since the run began. Discards take the
     * stream's front, so a gap after the position is checked when a fetch
     * begins with one (messages of other subjects make most gaps). */
    uint64_t at = f->at->applied;
    bounds b;
    if (at > 0 && stream_seq(f->got.Msgs[0]) > at + 1) {
      int rc = stream_bounds(s, &b);
      if (!rc) rc = position_kept(s, f, at, f->at->made, &b);
      if (rc) {
        natsMsgList_Destroy(&f->got);
        memset(&f->got, 0, sizeof f->got);
        return rc;
      }
    }
    return 0;
  }
  memset(&f->got, 0, sizeof f->got);
  if (st == NATS_OK || st == NATS_TIMEOUT || st == NATS_NOT_FOUND) return 0;
  feed_drop(f, false); /* the consumer is gone (its node died): a new one next time */
  return 0;
}

/* The feed whose next message comes first in the stream (JSSRC-4), or NULL. */
static feed *first_ready(source *s, natsMsg **m, uint64_t *seq)
{
  feed *best = NULL;
  for (int i = 0; i < s->o->nsubjects; i++) {
    feed *f = &s->feeds[i];
    if (f->next >= f->got.Count) continue;
    uint64_t q = stream_seq(f->got.Msgs[f->next]);
    if (!best || q < *seq) {
      best = f;
      *seq = q;
      *m = f->got.Msgs[f->next];
    }
  }
  return best;
}

/* ---- applying a message ---- */

/* One change, {rel, op, row} or [rel, op, row], applied as an NDJSON
 * line is (ndjson.c). */
static int apply_change(rn_pipeline *p, const msgpack_object *c)
{
  const msgpack_object *rel = NULL, *op = NULL, *row = NULL, *other = NULL;
  if (c->type == MSGPACK_OBJECT_ARRAY && c->via.array.size == 3) {
    rel = &c->via.array.ptr[0];
    op = &c->via.array.ptr[1];
    row = &c->via.array.ptr[2];
  } else {
    rn_change_fields(c, &rel, &op, &row, &other);
  }
  return rn_apply_change(p, rel, op, row, other);
}

static int apply_ndjson(source *s, const char *data, size_t len, uint64_t *changes)
{
  rn_pipeline *p = s->p;
  size_t line_no = 0;
  for (const char *at = data, *end = data + len; at < end;) {
    const char *nl = memchr(at, '\n', (size_t)(end - at));
    size_t n = nl ? (size_t)(nl - at) : (size_t)(end - at);
    const char *line = at;
    at += n + (nl != NULL);
    line_no++;
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
    if (n == 0) continue; /* blank (spaces, tabs, CRs), as rn_run_ndjson skips it */
    msgpack_zone_clear(&s->zone);
    int rc = rn_ndjson_apply_line(p, line, n, &s->zone);
    if (rc) {
      char why[RN_ERRMSG_MAX];
      snprintf(why, sizeof why, "%s", p->err.msg);
      return rn_err_set(&p->err, rc, "line %zu: %s", line_no, why);
    }
    (*changes)++;
  }
  return 0;
}

static int apply_msgpack(source *s, const char *data, size_t len, uint64_t *changes)
{
  rn_pipeline *p = s->p;
  msgpack_object obj;
  msgpack_zone_clear(&s->zone);
  size_t off = 0, lead = 0;
  while (lead < len && (data[lead] == ' ' || data[lead] == '\n' || data[lead] == '\r' || data[lead] == '\t')) lead++;
  if (lead < len && data[lead] == '[') /* msgpack would read "[" as the number 91 */
    return rn_group_fail(p, RN_EINVAL, "a JSON array: a message holds NDJSON lines, one change object each, or a "
                         "msgpack array of changes");
  msgpack_unpack_return ur = msgpack_unpack(data, len, &off, &s->zone, &obj);
  if ((ur != MSGPACK_UNPACK_SUCCESS && ur != MSGPACK_UNPACK_EXTRA_BYTES) || obj.type != MSGPACK_OBJECT_ARRAY)
    return rn_group_fail(p, RN_EINVAL, "expected NDJSON lines or a msgpack array of changes");
  if (ur == MSGPACK_UNPACK_EXTRA_BYTES) { /* said, not just refused: the array itself was good */
    char why[160];
    snprintf(why, sizeof why, "a msgpack array of %u change%s, then %zu bytes that are not part of it (one array a "
             "message)", obj.via.array.size, obj.via.array.size == 1 ? "" : "s", len - off);
    return rn_group_fail(p, RN_EINVAL, why);
  }
  for (uint32_t i = 0; i < obj.via.array.size; i++) {
    int rc = apply_change(p, &obj.via.array.ptr[i]);
    if (rc) {
      char why[RN_ERRMSG_MAX];
      snprintf(why, sizeof why, "%s", p->err.msg);
      return rn_err_set(&p->err, rc, "change %u: %s", i + 1, why);
    }
    (*changes)++;
  }
  return 0;
}

static int apply_message(source *s, feed *f, natsMsg *m, uint64_t seq, rn_run_stats *st)
{
  const char *data = natsMsg_GetData(m);
  size_t len = (size_t)natsMsg_GetDataLength(m), i = 0;
  if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) data += 3, len -= 3; /* a UTF-8 BOM: text, as a file's */
  while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t')) i++;
  /* an empty message is NDJSON of no lines: no change, but its place is taken */
  int rc = i == len || data[i] == '{' ? apply_ndjson(s, data, len, &st->applied)
                                      : apply_msgpack(s, data, len, &st->applied);
  if (rc) {
    char why[RN_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", s->p->err.msg);
    return rn_err_set(&s->p->err, rc, "%s: %s seq %llu: %s", s->o->name, f->subject, (unsigned long long)seq, why);
  }
  f->at->applied = seq;
  f->at->applied_time = 0; /* not known: the record goes (put_position) rather than say another message's */
  jsMsgMetaData *md = NULL;
  if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
    f->at->applied_time = md->Timestamp;
    jsMsgMetaData_Destroy(md);
  }
  st->lines++;
  return 0;
}

/* ---- the run ---- */

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Fills every empty feed without waiting; true when anything is ready. */
static int top_up(source *s, bool *ready)
{
  *ready = false;
  for (int i = 0; i < s->o->nsubjects; i++) {
    feed *f = &s->feeds[i];
    if (f->next >= f->got.Count) {
      int rc = feed_fetch(s, f, (int)(s->o->batch ? s->o->batch : 100), 0);
      if (rc) return rc;
    }
    if (f->next < f->got.Count) *ready = true;
  }
  return 0;
}

/* Waits up to wait_ms for a message on any feed (each in turn). */
static int wait_any(source *s, int64_t wait_ms, bool *ready)
{
  int64_t each = wait_ms / s->o->nsubjects > 20 ? wait_ms / s->o->nsubjects : 20;
  *ready = false;
  for (int i = 0; i < s->o->nsubjects && !*ready; i++) {
    feed *f = &s->feeds[i];
    int rc = feed_fetch(s, f, (int)(s->o->batch ? s->o->batch : 100), each);
    if (rc) return rc;
    *ready = f->next < f->got.Count;
  }
  return 0;
}

/* One group of up to batch messages; *applied = messages in it. */
static int run_group(source *s, rn_run_stats *st, size_t *applied)
{
  size_t batch = s->o->batch ? s->o->batch : 100;
  *applied = 0;
  int rc = rn_begin(s->p);
  bool ready = true;
  while (!rc && *applied < batch && ready) {
    natsMsg *m = NULL;
    uint64_t seq = 0;
    feed *f = first_ready(s, &m, &seq);
    if (!f) {
      if (!(rc = top_up(s, &ready))) continue;
      break;
    }
    if (s->o->limit && st->lines >= s->o->limit) break;
    rc = apply_message(s, f, m, seq, st);
    f->next++;
    if (!rc) ++*applied;
  }
  if (rc) {
    if (s->p->state == RN_OPEN) { /* a fetch failed: the group goes, its reason stays */
      rn_err why = s->p->err;
      rn_rollback(s->p);
      s->p->err = why;
    }
    return rc;
  }
  if (*applied == 0) return rn_rollback(s->p);
  if ((rc = rn_commit(s->p))) return rc;
  st->groups++;
  return 0;
}

static int run_loop(source *s, rn_run_stats *st)
{
  double quiet_since = now();
  for (;;) {
    if (s->o->limit && st->lines >= s->o->limit) return 0;
    if (rn_interrupt_taken()) /* between groups: nothing is open */
      return rn_err_set(&s->p->err, RN_EINTR, "%s: interrupted after %llu messages: the messages up to there are "
                        "applied and committed", s->o->name ? s->o->name : "jetstream", (unsigned long long)st->lines);
    size_t applied;
    int rc = run_group(s, st, &applied);
    if (rc) return rc;
    if (applied) { quiet_since = now(); continue; }
    /* caught up: carried groups are written before the wait, so that none
     * waits for the next message to reach LMDB, readers and durable sinks */
    if (s->p->carried && (rc = rn_flush(s->p))) return rc;
    double quiet = now() - quiet_since;
    if (s->o->idle >= 0 && quiet >= s->o->idle) return 0;
    bool ready;
    /* at most a second per wait: a pull request the server lost (it
     * restarted) goes unanswered until it expires, and a long idle made
     * the run deaf that long */
    double left = s->o->idle < 0 || s->o->idle - quiet > 1.0 ? 1.0 : s->o->idle - quiet;
    if ((rc = wait_any(s, (int64_t)(left * 1000 > 20 ? left * 1000 : 20), &ready))) return rc;
  }
}

static int open_feeds(source *s)
{
  rn_pipeline *p = s->p;
  rn_flush(p); /* JSSRC-2: carried groups reach the state (or are lost) first */
  keeper *k = keeper_of(p);
  if (!k) return p->err.code;
  if (!(s->feeds = calloc((size_t)s->o->nsubjects, sizeof *s->feeds))) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  for (int i = 0; i < s->o->nsubjects; i++) {
    s->feeds[i].subject = s->o->subjects[i];
    if (!(s->feeds[i].at = position_read(p, k, s->o->stream, s->o->subjects[i]))) return p->err.code;
  }
  return check_retention(s);
}

/* Whether some subject matches both filters a and b (NATS wildcards: "*"
 * one token, ">" one or more at the end). */
static bool subjects_overlap(const char *a, const char *b)
{
  for (;;) {
    size_t na = strcspn(a, "."), nb = strcspn(b, ".");
    if ((na == 1 && *a == '>') || (nb == 1 && *b == '>')) return true;
    bool any = (na == 1 && *a == '*') || (nb == 1 && *b == '*');
    if (!any && (na != nb || memcmp(a, b, na) != 0)) return false;
    a += na, b += nb;
    if (!*a || !*b) return !*a && !*b; /* one ends first: no subject has both lengths */
    a++, b++;
  }
}

/* Whether a message can have a subject filter matches: tokens between
 * dots non-empty, no white space, ">" only as the last token. "s..0" was
 * said to overlap "s.*.0", and alone to be a subject the stream lacks. */
static bool subject_valid(const char *subject)
{
  if (subject[strcspn(subject, " \t\r\n")]) return false;
  for (const char *tok = subject;;) {
    size_t n = strcspn(tok, ".");
    if (n == 0) return false;
    if (!tok[n]) return true;
    if (n == 1 && tok[0] == '>') return false;
    tok += n + 1;
  }
}

/* JSSRC-5: no message may match two of o's subjects. */
static int subjects_apart(rn_pipeline *p, const rn_js_source_opts *o)
{
  for (int i = 0; i < o->nsubjects; i++)
    if (!subject_valid(o->subjects[i]))
      return rn_err_set(&p->err, RN_EINVAL, "%s: stream %s: subject \"%s\" is no subject (empty tokens and white "
                        "space are not allowed, and > only as the last token)", o->name, o->stream, o->subjects[i]);
  for (int i = 0; i < o->nsubjects; i++)
    for (int j = i + 1; j < o->nsubjects; j++) {
      const char *a = o->subjects[i], *b = o->subjects[j];
      if (strcmp(a, b) == 0)
        return rn_err_set(&p->err, RN_EINVAL, "%s: stream %s: subject %s is named twice: its messages would be "
                          "applied twice", o->name, o->stream, a);
      if (subjects_overlap(a, b))
        return rn_err_set(&p->err, RN_EINVAL, "%s: stream %s: subjects %s and %s overlap: a message of both "
                          "would be applied twice", o->name, o->stream, a, b);
    }
  return 0;
}

int rn_run_jetstream(rn_pipeline *p, const rn_js_source_opts *o, rn_run_stats *st)
{
  memset(st, 0, sizeof *st);
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "run: not inside a group or a callback");
  if (!o->url || !o->stream || o->nsubjects < 1 || !o->subjects)
    return rn_err_set(&p->err, RN_EINVAL, "jetstream source: needs url, stream and at least one subject");
  for (int i = 0; i < o->nsubjects; i++) /* before connecting: a bad option is not a server's failure */
    if (!o->subjects[i])
      return rn_err_set(&p->err, RN_EINVAL, "jetstream source: subject %d of %d is NULL", i + 1, o->nsubjects);
  if (subjects_apart(p, o)) return p->err.code;
  source s;
  memset(&s, 0, sizeof s);
  s.p = p;
  s.o = o;
  if (!msgpack_zone_init(&s.zone, 4096)) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  int rc = rn_js_connect(o->url, &s.nc, &s.js, &p->err);
  if (!rc) rc = open_feeds(&s);
  rn_interrupt_run_begins();
  if (!rc) rc = run_loop(&s, st);
  rn_interrupt_run_ends(rc == RN_EINTR);
  for (int i = 0; s.feeds && i < o->nsubjects; i++) feed_drop(&s.feeds[i], rc == 0);
  free(s.feeds);
  if (s.js) jsCtx_Destroy(s.js);
  if (s.nc) natsConnection_Destroy(s.nc);
  msgpack_zone_destroy(&s.zone);
  return rc;
}

RN_API int rn_jetstream_run(rn_pipeline *p, const rn_js_source_opts *o, uint64_t *messages)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (!o) return rn_err_set(&p->err, RN_EINVAL, "rn_jetstream_run: the options are NULL");
  rn_js_source_opts named = *o;
  if (!named.name) named.name = o->url ? o->url : "jetstream";
  rn_run_stats st;
  int rc = rn_run_jetstream(p, &named, &st);
  if (messages) *messages = st.lines;
  return rc;
}
