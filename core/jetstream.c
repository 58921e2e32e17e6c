/* jetstream.c — the JetStream sink: a relation's changes published to one
 * subject once their group is durable in LMDB (a durable sink of the
 * outbox, outbox.c), exactly once as the stream sees them.
 *
 *     message   data: the event (an NDJSON line without its newline)
 *               header Nats-Msg-Id: "<state id>:<seq>:<n>"
 *               (seq: the group, n: the change's place among the sink's
 *               changes of the group, from 1)
 *
 * Invariants (JS-n in specs):
 * (1) An event is published only after the LMDB transaction holding its
 *     group committed, with an id that names the same event before and
 *     after any crash (OUTBOX-1: a seq names the same content).
 * (2) A run of groups counts as delivered only when the server acked every
 *     message of it; otherwise it stays in the outbox and is published
 *     again, under the same ids: the server drops the copies it holds
 *     inside its duplicate window.
 * (3) At open the sink reads the subject's last message: when its id is
 *     this state's, every event up to that (seq, n) was stored and is
 *     skipped, so an outage longer than the duplicate window publishes
 *     nothing twice. This needs one publishing state per subject, and
 *     trusts the last message as a mark below which all is stored: a
 *     leader election that drops event k but stores k+1 of the same async
 *     run, followed by a crash before the run's re-send succeeds, loses k
 *     (documented in docs/api.md, runnel.jetstream; not fixed).
 * (4) nats.c's threads touch only the sink's failure counter and the
 *     first refusal's reason, which one of them claims (why_state 0 -> 1),
 *     writes, and hands over (1 -> 2); the caller reads it only at 2.
 * (5) A subject holding this state's events of a group past the state's
 *     seq (a state restored from an older copy) refuses the sink: its
 *     next groups would reuse those ids for other events.
 * (6) A run sent again once the stream's duplicate window has passed
 *     since the first failed run began reads the subject's last message
 *     first, as (3) at open: the server may have stored events whose acks
 *     came too late, and no longer drops them as copies. The limit of (3)
 *     holds for such a re-send too.
 * (7) No event of a run is published after one over the stream's
 *     max_msg_size: the stream would refuse it and store the later ones,
 *     and (3) would then skip it as stored at the next open. Said, and the
 *     run stops there, as for the server's max_payload. The limit is read
 *     at each run: one lowered while a run is published is not seen. */
#include "jetstream.h"

#include <nats/nats.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "notes.h"
#include "outbox.h"

/* ---- the state's id ---- */

/* The id p's state holds into out: 0, MDB_NOTFOUND (none yet), another
 * LMDB code, or RN_ESTORE (said) when it is not 32 hex digits: message
 * ids of another id would not be deduplicated against those sent. */
static int read_id(rn_pipeline *p, MDB_txn *txn, char out[33])
{
  MDB_val k = { RN_PREFIX_LEN(RN_META_STATE_ID), (void *)RN_META_STATE_ID }, v;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc) return rc;
  const char *id = v.mv_data;
  bool hex = v.mv_size == 32;
  for (size_t i = 0; hex && i < 32; i++) hex = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
  if (!hex)
    return rn_err_set(&p->err, RN_ESTORE, "state damaged: %s: its id is not 32 hex digits (%zu bytes)", p->store.path,
                      v.mv_size);
  memcpy(out, v.mv_data, 32);
  out[32] = 0;
  return 0;
}

/* 32 hex digits from /dev/urandom (the time and pid if it cannot be read). */
static void new_id(char out[33])
{
  unsigned char raw[16] = { 0 };
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f || fread(raw, 1, sizeof raw, f) != sizeof raw) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf((char *)raw, sizeof raw, "%lx%lx", (long)ts.tv_nsec, (long)getpid());
  }
  if (f) fclose(f);
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

int rn_state_id(rn_pipeline *p, char out[33])
{
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "state id: not inside a group");
  int rc = rn_flush(p);
  if (rc) return rc;
  MDB_txn *txn;
  if ((rc = rn_store_txn(p->store.env, 0, &txn))) return rn_store_fail(&p->err, rc, "state id");
  if ((rc = read_id(p, txn, out)) == MDB_NOTFOUND) {
    new_id(out);
    MDB_val k = { RN_PREFIX_LEN(RN_META_STATE_ID), (void *)RN_META_STATE_ID }, v = { 32, out };
    rc = mdb_put(txn, p->store.meta, &k, &v, 0);
    if (!rc) return (rc = mdb_txn_commit(txn)) ? rn_store_fail(&p->err, rc, "state id") : 0;
  }
  mdb_txn_abort(txn);
  if (rc == RN_ESTORE) return rc; /* damaged: said by read_id */
  return rc ? rn_store_fail(&p->err, rc, "state id") : 0;
}

/* ---- the sink ---- */

typedef struct staged {   /* one event of the run, its bytes in jsink.data */
  size_t at, len;
  uint64_t seq, n;
} staged;

typedef struct jsink {
  natsConnection *nc;
  jsCtx *js;
  char *rel;              /* the relation's name, for errors */
  char *subject;
  char *url;              /* the server URLs, for errors */
  char *id;               /* the first part of message ids */
  char *verb_field;       /* or NULL: rows alone */
  const rn_schema *fields_free; /* the columns last found free of the verb field (rn_ndjson_fields_free) */
  int64_t timeout_ms;     /* the wait for a run's acks */
  msgpack_sbuffer data;   /* the run's events */
  staged *events;
  size_t n, cap;
  msgpack_zone zone;
  uint64_t done_seq, done_n; /* events up to here were stored before this open (JS-3) */
  int64_t dupe_ns;        /* the stream's duplicate window */
  char *stream;           /* the stream holding the subject, as read_last found it (or NULL) */
  int64_t max_msg_size;   /* its max_msg_size, or -1 (JS-7) */
  int64_t failed_at;      /* when the first run that failed since the last success began (ns), or 0 (JS-6) */
  atomic_int failed;      /* publishes the server refused in this run (JS-4) */
  atomic_int why_state;   /* 0: no reason kept, 1: a nats.c thread writes it, 2: why holds it (JS-4) */
  char why[160];          /* the first refusal's reason, as the server gave it */
} jsink;

static void free_jsink(void *ctx)
{
  jsink *s = ctx;
  if (s->nc) natsConnection_Close(s->nc); /* no ack handler runs after this */
  if (s->js) jsCtx_Destroy(s->js);
  if (s->nc) natsConnection_Destroy(s->nc);
  free(s->rel);
  free(s->subject);
  free(s->url);
  free(s->id);
  free(s->verb_field);
  free(s->stream);
  free(s->events);
  msgpack_sbuffer_destroy(&s->data);
  msgpack_zone_destroy(&s->zone);
  free(s);
}

/* On a nats.c thread: counts the failure and keeps the first one's reason
 * (JS-4): "maximum messages exceeded" and a deleted stream were both "the
 * server refused N events". */
static void on_publish_error(jsCtx *js, jsPubAckErr *pae, void *closure)
{
  (void)js;
  jsink *s = closure;
  int empty = 0;
  if (atomic_compare_exchange_strong(&s->why_state, &empty, 1)) {
    const char *text = pae->ErrText && *pae->ErrText ? pae->ErrText : natsStatus_GetText(pae->Err);
    snprintf(s->why, sizeof s->why, "%s%s", text,
             pae->Err == NATS_NO_RESPONDERS ? ": no stream holds the subject" : "");
    atomic_store(&s->why_state, 2);
  }
  atomic_fetch_add(&s->failed, 1);
}

static bool after_done(const jsink *s, uint64_t seq, uint64_t n)
{
  return seq > s->done_seq || (seq == s->done_seq && n > s->done_n);
}

static const char *const verb_names[] = { "", "INSERT", "UPDATE", "DELETE" };

static int jsink_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  jsink *s = ctx;
  if (!after_done(s, info->seq, info->n)) return 0; /* stored before (JS-3) */
  int rc = rn_ndjson_fields_free(rel, info->seq, "jetstream", s->subject, s->verb_field, NULL, &s->fields_free, e);
  if (rc) return rc;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    staged *a = realloc(s->events, cap * sizeof *a);
    if (!a) return rn_err_set(e, RN_ENOMEM, "out of memory");
    s->events = a;
    s->cap = cap;
  }
  bool del = c->verb == RN_DELETE;
  size_t at = s->data.size;
  rc = rn_ndjson_line(rel->schema, del ? c->old : c->row, del ? c->old_len : c->row_len,
                      del && s->verb_field, s->verb_field, verb_names[c->verb], NULL, NULL, &s->zone, &s->data);
  msgpack_zone_clear(&s->zone);
  if (rc) return rn_err_set(e, RN_ESTORE, "%s: jetstream: a row could not be decoded", rel->name);
  size_t len = s->data.size - at;
  if (len && s->data.data[at + len - 1] == '\n') len--;
  s->events[s->n++] = (staged){ at, len, info->seq, info->n };
  return 0;
}

/* Reads the stream's max_msg_size again (JS-7): at each run, as the
 * stream may have been changed since the last (lowered, the server would
 * refuse an event and store the later ones). Unread, the last one read
 * stands: a server that cannot answer fails the run anyway. Waits the
 * sink's timeout at most, not nats.c's 5 s: a stalled server's runs would
 * each take that longer. */
static void read_limit(jsink *s)
{
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  jsOptions o;
  jsOptions_Init(&o);
  o.Wait = s->timeout_ms;
  if (!s->stream || js_GetStreamInfo(&si, s->js, s->stream, &o, &jerr) != NATS_OK) return;
  s->max_msg_size = si->Config && si->Config->MaxMsgSize > 0 ? si->Config->MaxMsgSize : -1;
  jsStreamInfo_Destroy(si);
}

/* "" when the connection is up; otherwise words saying it is down, for
 * errors: nats.c's own ("Insufficient Buffer", "Timeout") name what
 * filled up or ran out meanwhile, not that the server is gone. */
static const char *down_note(const jsink *s, char *buf, size_t cap)
{
  natsConnStatus cs = natsConnection_Status(s->nc);
  if (cs == NATS_CONN_STATUS_CONNECTED) return "";
  snprintf(buf, cap, "; the connection to the server is down (%s %s)",
           cs == NATS_CONN_STATUS_RECONNECTING ? "reconnecting to" : "closed:", s->url);
  return buf;
}

static int publish_one(jsink *s, const staged *ev, rn_err *e)
{
  natsMsg *m = NULL;
  char msgid[96];
  snprintf(msgid, sizeof msgid, "%s:%llu:%llu", s->id, (unsigned long long)ev->seq, (unsigned long long)ev->n);
  /* the data and the header (NATS/1.0, the id's line, the blank line) count */
  int64_t size = (int64_t)ev->len + (int64_t)strlen(msgid) + 32, max = natsConnection_GetMaxPayload(s->nc);
  if (max > 0 && size > max) /* never published, whatever the retries: said, with what to change */
    return rn_err_set(e, RN_EINVAL, "%s: jetstream %s: group %llu change %llu is %zu bytes, over the server's "
                      "max_payload of %lld: it cannot be published and its group waits in the outbox (raise "
                      "max_payload in the server's configuration)", s->rel, s->subject, (unsigned long long)ev->seq,
                      (unsigned long long)ev->n, ev->len, (long long)max);
  int64_t stored = (int64_t)ev->len + 27 + (int64_t)strlen(msgid); /* "NATS/1.0\r\nNats-Msg-Id: …\r\n\r\n" */
  if (s->max_msg_size >= 0 && stored > s->max_msg_size) /* as the server counts it: data and header */
    return rn_err_set(e, RN_EINVAL, "%s: jetstream %s: group %llu change %llu is %lld bytes with its header, over the "
                      "max_msg_size of stream %s, %lld: it cannot be published and its group waits in the outbox "
                      "(raise the stream's max_msg_size)", s->rel, s->subject, (unsigned long long)ev->seq,
                      (unsigned long long)ev->n, (long long)stored, s->stream, (long long)s->max_msg_size);
  natsStatus st = natsMsg_Create(&m, s->subject, NULL, s->data.data + ev->at, (int)ev->len);
  if (st == NATS_OK) st = natsMsgHeader_Set(m, "Nats-Msg-Id", msgid);
  if (st == NATS_OK) st = js_PublishMsgAsync(s->js, &m, NULL);
  if (m) natsMsg_Destroy(m); /* NULL once the library took it */
  char down[300];
  return st == NATS_OK ? 0 : rn_err_set(e, RN_EIO, "%s: jetstream %s: group %llu change %llu: publishing: %s%s", s->rel,
                                        s->subject, (unsigned long long)ev->seq, (unsigned long long)ev->n,
                                        natsStatus_GetText(st), down_note(s, down, sizeof down));
}

static void clear_run(jsink *s)
{
  s->n = 0;
  msgpack_sbuffer_clear(&s->data);
  atomic_store(&s->failed, 0);
  int kept = 2;
  atomic_compare_exchange_strong(&s->why_state, &kept, 0); /* one still being written is left to its thread */
}

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int read_last(jsink *s, rn_err *e);

/* "group 4" or "groups 4..7": the groups of the run, for errors. */
static const char *run_groups(const jsink *s, char *buf, size_t cap)
{
  uint64_t a = s->n ? s->events[0].seq : 0, b = s->n ? s->events[s->n - 1].seq : 0;
  if (a == b) snprintf(buf, cap, "group %llu", (unsigned long long)a);
  else snprintf(buf, cap, "groups %llu..%llu", (unsigned long long)a, (unsigned long long)b);
  return buf;
}

/* Publishes the run's events and waits for every ack (JS-2). A run sent
 * again longer than the duplicate window after the first failed one
 * began reads the subject's last message first (JS-6). */
static int jsink_finish(void *ctx, rn_err *e)
{
  jsink *s = ctx;
  int rc = 0;
  int64_t began = now_ns();
  char groups[64];
  run_groups(s, groups, sizeof groups);
  atomic_store(&s->failed, 0);
  int kept = 2;
  atomic_compare_exchange_strong(&s->why_state, &kept, 0); /* a late refusal of an earlier run says nothing of this one */
  if (s->failed_at && began - s->failed_at >= s->dupe_ns && (rc = read_last(s, e))) {
    char why[RN_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", e->msg);
    rn_err_set(e, rc, "%s: jetstream %s: %s: reading the subject's last message before sending again past the "
               "duplicate window: %s", s->rel, s->subject, groups, why);
    clear_run(s);
    return rc;
  }
  if (s->n) read_limit(s);
  for (size_t i = 0; i < s->n && !rc; i++)
    if (after_done(s, s->events[i].seq, s->events[i].n)) rc = publish_one(s, &s->events[i], e);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = s->timeout_ms;
  natsStatus st = js_PublishAsyncComplete(s->js, &po);
  char down[300];
  if (!rc && st != NATS_OK)
    rc = rn_err_set(e, RN_EIO, "%s: jetstream %s: %s: no ack for some events within %lld ms (%s)%s; they wait in the "
                    "outbox", s->rel, s->subject, groups, (long long)s->timeout_ms, natsStatus_GetText(st),
                    down_note(s, down, sizeof down));
  int refused = atomic_load(&s->failed);
  if (!rc && refused)
    rc = rn_err_set(e, RN_EIO, "%s: jetstream %s: %s: the server refused %d event%s (%s); they wait in the outbox",
                    s->rel, s->subject, groups, refused, refused == 1 ? "" : "s",
                    atomic_load(&s->why_state) == 2 ? s->why : "no reason given");
  if (rc && !s->failed_at) s->failed_at = began;
  else if (!rc) s->failed_at = 0;
  if (st != NATS_OK) { /* drop what is still in flight: the outbox publishes it again */
    natsMsgList pending = { 0 };
    if (js_PublishAsyncGetPendingList(&pending, s->js) == NATS_OK) natsMsgList_Destroy(&pending);
  }
  clear_run(s);
  return rc;
}

static void jsink_discard(void *ctx) { clear_run(ctx); }

static const rn_outbox_ops jsink_ops = { jsink_change, NULL, jsink_finish, jsink_discard, NULL, NULL, NULL, NULL,
                                          NULL, true, NULL }; /* messages are a log: groups go in their own columns */

/* Parses "<id>:<seq>:<n>" of this state into done (JS-3). */
static void note_published(jsink *s, const char *msgid)
{
  size_t idlen = strlen(s->id);
  unsigned long long seq, n;
  if (!msgid || strncmp(msgid, s->id, idlen) != 0 || msgid[idlen] != ':') return;
  if (sscanf(msgid + idlen + 1, "%llu:%llu", &seq, &n) == 2 && after_done(s, seq, n)) {
    s->done_seq = seq;
    s->done_n = n;
  }
}

/* The stream holding the subject into *found (NULL when none does). */
static int stream_of(jsink *s, char **found, rn_err *e)
{
  jsOptions o;
  jsOptions_Init(&o);
  o.Stream.Info.SubjectsFilter = s->subject;
  jsStreamNamesList *names = NULL;
  *found = NULL;
  natsStatus st = js_StreamNames(&names, s->js, &o, NULL);
  if (st == NATS_NOT_FOUND) return 0;
  if (st != NATS_OK)
    return rn_err_set(e, RN_EIO, "jetstream: finding the stream of subject %s: %s", s->subject, natsStatus_GetText(st));
  if (names && names->Count > 0 && !(*found = strdup(names->List[0]))) st = NATS_NO_MEMORY;
  if (names) jsStreamNamesList_Destroy(names);
  return st == NATS_OK ? 0 : rn_err_set(e, RN_ENOMEM, "out of memory");
}

/* Reads the subject's last message (JS-3); an empty subject has none. */
static int read_last(jsink *s, rn_err *e)
{
  char *stream;
  int rc = stream_of(s, &stream, e);
  if (rc) return rc;
  if (!stream)
    return rn_err_set(e, RN_EIO, "jetstream: no stream holds subject %s (create it first)", s->subject);
  natsMsg *last = NULL;
  jsErrCode jerr = 0;
  jsStreamInfo *si = NULL;
  natsStatus st = js_GetStreamInfo(&si, s->js, stream, NULL, &jerr);
  if (st == NATS_OK) {
    s->dupe_ns = si->Config ? si->Config->Duplicates : 0;
    s->max_msg_size = si->Config && si->Config->MaxMsgSize > 0 ? si->Config->MaxMsgSize : -1;
    jsStreamInfo_Destroy(si);
    st = js_GetLastMsg(&last, s->js, stream, s->subject, NULL, &jerr);
  }
  free(s->stream);
  s->stream = stream;
  if (st == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return 0;
  if (st != NATS_OK)
    return rn_err_set(e, RN_EIO, "jetstream %s: reading the last message: %s", s->subject, natsStatus_GetText(st));
  const char *msgid = NULL;
  if (natsMsgHeader_Get(last, "Nats-Msg-Id", &msgid) == NATS_OK) note_published(s, msgid);
  natsMsg_Destroy(last);
  return 0;
}

natsStatus rn_js_set_servers(natsOptions *o, const char *urls)
{
  char *copy = strdup(urls), *save = NULL;
  const char *list[16];
  int n = 0;
  if (!copy) return NATS_NO_MEMORY;
  for (char *u = strtok_r(copy, ",", &save); u && n < 16; u = strtok_r(NULL, ",", &save)) list[n++] = u;
  natsStatus st = n ? natsOptions_SetServers(o, list, n) : NATS_INVALID_ARG;
  free(copy);
  return st;
}

static atomic_bool nats_used; /* nats.c was opened: rn_js_shutdown has something to tear down */

/* Waits for nats.c's threads to let go (up to 2 s): nats_Close left them
 * running, and a Lua host unloads libnats with runnel's module right
 * after, so one of them ran unmapped code (SEGV at exit, 2 runs in 25
 * under make asan). Every NATS object is destroyed by then. */
void rn_js_shutdown(void)
{
  if (atomic_exchange(&nats_used, false)) nats_CloseAndWait(2000);
}

int rn_js_connect(const char *url, natsConnection **nc, jsCtx **js, rn_err *e)
{
  atomic_store(&nats_used, true);
  natsOptions *o = NULL;
  natsStatus st = natsOptions_Create(&o);
  if (st == NATS_OK) st = rn_js_set_servers(o, url);
  if (st == NATS_OK) st = natsOptions_SetMaxReconnect(o, -1);     /* the cluster heals; keep trying */
  if (st == NATS_OK) st = natsOptions_SetReconnectWait(o, 100);
  if (st == NATS_OK) st = natsOptions_SetTimeout(o, 2000);
  if (st == NATS_OK) st = natsConnection_Connect(nc, o);
  natsOptions_Destroy(o);
  if (st == NATS_OK) st = natsConnection_JetStream(js, *nc, NULL);
  if (st != NATS_OK) {
    if (*nc) natsConnection_Destroy(*nc);
    *nc = NULL;
    return rn_err_set(e, RN_EIO, "jetstream: cannot connect to %s: %s", url, natsStatus_GetText(st));
  }
  return 0;
}

static int open_jsink(rn_pipeline *p, jsink *s, const rn_js_sink_opts *o)
{
  char sid[33];
  int rc = o->id ? 0 : rn_state_id(p, sid);
  if (rc) return rc;
  if (!(s->subject = strdup(o->subject)) || !(s->url = strdup(o->url)) || !(s->id = strdup(o->id ? o->id : sid))
      || (o->verb_field && !(s->verb_field = strdup(o->verb_field))))
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  s->timeout_ms = (int64_t)((o->timeout > 0 ? o->timeout : 10) * 1000);
  if ((rc = rn_js_connect(o->url, &s->nc, &s->js, &p->err))) return rc;
  jsCtx_Destroy(s->js); /* again, with the failure counter */
  s->js = NULL;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.ErrHandler = on_publish_error;
  jo.PublishAsync.ErrHandlerClosure = s;
  jo.PublishAsync.MaxPending = 65536;
  natsStatus st = natsConnection_JetStream(&s->js, s->nc, &jo);
  if (st != NATS_OK) return rn_err_set(&p->err, RN_EIO, "jetstream: %s", natsStatus_GetText(st));
  return read_last(s, &p->err);
}

/* Whether subject can be published to: tokens between dots non-empty,
 * no white space, no wildcard token ("*", ">"). A wildcard was taken as a
 * literal subject, and the subject's last message (JS-3) was then any
 * subject's it matched. */
static bool publishable(const char *subject)
{
  if (subject[strcspn(subject, " \t\r\n")]) return false;
  for (const char *tok = subject;;) {
    size_t n = strcspn(tok, ".");
    if (n == 0 || (n == 1 && (tok[0] == '*' || tok[0] == '>'))) return false;
    if (!tok[n]) return true;
    tok += n + 1;
  }
}

/* Whether an id can go into the Nats-Msg-Id header as it is: no control
 * character. "a\r\nX: 1" wrote a header line of its own, and the message
 * id the server deduplicates by was another. */
static bool header_safe(const char *id)
{
  for (const unsigned char *c = (const unsigned char *)id; *c; c++)
    if (*c < 0x20 || *c == 0x7f) return false;
  return true;
}

/* JS-5: the subject holds this state's events of groups the state does
 * not have: it went back in time (restored from an older snapshot). Its
 * next groups, made anew from its inputs, need not hold what the ones
 * published under their seqs held, and JS-3 (or the server's duplicate
 * window) would drop them as published: refused, never lost silently. */
static int from_the_past(rn_pipeline *p, const rn_rel *rel, const jsink *s)
{
  return rn_err_set(&p->err, RN_EINVAL,
                    "%s: jetstream %s: the subject holds this state's group %llu, but the state holds groups up to "
                    "%llu (restored from an older copy?): its next groups would take message ids already used, and "
                    "be dropped as published; give the sink a new id (id = …: those groups go out again under it), "
                    "or rebuild the state",
                    rel->name, s->subject, (unsigned long long)s->done_seq, (unsigned long long)p->seq);
}

RN_API int rn_jetstream_sink(rn_pipeline *p, rn_rel *rel, const rn_js_sink_opts *o)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (!rel || !o) return rn_err_set(&p->err, RN_EINVAL, "rn_jetstream_sink: %s is NULL", rel ? "o" : "rel");
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "%s: sinks are added outside groups", rel->name);
  if (rn_check_not_lookup(p, rel->name, "sink", rel)) return p->err.code; /* before connecting */
  if (!o->url || !o->subject || !*o->subject)
    return rn_err_set(&p->err, RN_EINVAL, "%s: jetstream: needs url and subject", rel->name);
  if (!publishable(o->subject))
    return rn_err_set(&p->err, RN_EINVAL, "%s: jetstream: cannot publish to subject \"%s\" (empty tokens, white space "
                      "and the wildcards * and > are not allowed)", rel->name, o->subject);
  if (o->id && !header_safe(o->id)) {
    char quoted[200];
    return rn_err_set(&p->err, RN_EINVAL, "%s: jetstream %s: the id %s holds a control character; message ids go in "
                      "a header", rel->name, o->subject, rn_json_quote(quoted, sizeof quoted, o->id, strlen(o->id)));
  }
  if (rn_ndjson_verb_clash(p, rel, o->verb_field)) return p->err.code;
  jsink *s = calloc(1, sizeof *s);
  if (!s || !msgpack_zone_init(&s->zone, 4096)) { free(s); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
  msgpack_sbuffer_init(&s->data);
  s->max_msg_size = -1; /* none known until read_last reads the stream's */
  int rc = (s->rel = strdup(rel->name)) ? open_jsink(p, s, o) : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc && s->done_seq > p->seq) rc = from_the_past(p, rel, s);
  char *name = rc ? NULL : malloc(strlen(o->subject) + sizeof RN_SINK_JETSTREAM);
  if (!rc && !name) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  rn_outbox_mark m = { 0 };
  if (!rc) {
    sprintf(name, RN_SINK_JETSTREAM "%s", o->subject);
    rc = rn_outbox_mark_read(p, name, NULL, &m);
  }
  if (rc) {
    free(name);
    free_jsink(s);
    return rc;
  }
  /* a new sink starts with the next group; a known one where it was */
  char *label = malloc(strlen(o->subject) + 48);
  if (label) sprintf(label, "durable sink to JetStream subject %s", o->subject);
  rc = label ? rn_outbox_sink_add(p, rel, name, label, false, &jsink_ops, s, free_jsink, m.found ? m.delivered : p->seq, 0)
             : (free_jsink(s), rn_err_set(&p->err, RN_ENOMEM, "out of memory"));
  free(label);
  free(name);
  rn_notes_tell(p); /* the groups it missed (outbox.c) */
  return rc;
}
