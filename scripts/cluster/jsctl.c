/* jsctl — the JetStream chores of the cluster tests, demo and benchmark
 * (built as build/jsctl; nats.c only, no runnel):
 *
 *   jsctl URL add STREAM SUBJECT[,SUBJECT…] [replicas=N] [dupe=SECONDS] [maxmsgs=N]
 *       [maxbytes=N] [maxmsgsize=N] [discard=new]
 *   jsctl URL pub SUBJECT FILE [lines=K] [id=PREFIX] [mp=1]
 *       publishes FILE's lines, K per message (default 1), each message
 *       with the id PREFIX:<first line number> so a re-run publishes
 *       nothing twice; mp=1 packs the K changes as one msgpack array
 *   jsctl URL dump STREAM SUBJECT     "<seq>\t<msg id>\t<data>" per message
 *   jsctl URL purge STREAM            discards every message
 *   jsctl URL delete STREAM           deletes the stream (made again, it counts from 1)
 *   jsctl URL info STREAM             "first last messages leader consumers"
 *   jsctl URL wait STREAM SECONDS     waits until the stream has a leader
 *   jsctl URL edit STREAM [maxmsgsize=N] [maxmsgs=N]
 *       changes the stream's config in place (as `nats stream edit`)
 *   jsctl URL created STREAM          the stream's creation time (ns)
 * Exit 0 on success, 1 with a message on stderr. */
#include <jansson.h>
#include <msgpack.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jetstream.h"

static natsConnection *nc;
static jsCtx *js;
static volatile int refused; /* publishes the server refused (counted on a nats.c thread) */

static void on_publish_error(jsCtx *ctx, jsPubAckErr *pae, void *closure)
{
  (void)ctx;
  (void)pae;
  (void)closure;
  __atomic_add_fetch(&refused, 1, __ATOMIC_SEQ_CST);
}

static int fail(const char *what, natsStatus st)
{
  fprintf(stderr, "jsctl: %s: %s %s\n", what, natsStatus_GetText(st), nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
  return 1;
}

static const char *opt(int argc, char **argv, const char *name, const char *dflt)
{
  size_t n = strlen(name);
  for (int i = 0; i < argc; i++)
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  return dflt;
}

static int cmd_add(int argc, char **argv)
{
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = argv[0];
  char *subjects = strdup(argv[1]), *save = NULL;
  const char *list[64];
  int n = 0;
  for (char *s = strtok_r(subjects, ",", &save); s && n < 64; s = strtok_r(NULL, ",", &save)) list[n++] = s;
  sc.Subjects = list;
  sc.SubjectsLen = n;
  sc.Replicas = atoi(opt(argc, argv, "replicas", "1"));
  sc.Duplicates = (int64_t)(atof(opt(argc, argv, "dupe", "120")) * 1e9);
  sc.MaxMsgs = atoll(opt(argc, argv, "maxmsgs", "-1"));
  sc.MaxBytes = atoll(opt(argc, argv, "maxbytes", "-1"));
  sc.MaxMsgSize = atoi(opt(argc, argv, "maxmsgsize", "-1"));
  if (strcmp(opt(argc, argv, "discard", "old"), "new") == 0) sc.Discard = js_DiscardNew;
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus st = NATS_TIMEOUT;
  for (int tries = 0; tries < 100; tries++) { /* a new cluster elects its meta leader first */
    if ((st = js_AddStream(&si, js, &sc, NULL, &jerr)) == NATS_OK || jerr == JSStreamNameExistErr) break;
    usleep(200000);
  }
  free(subjects);
  if (st != NATS_OK) return fail("add", st);
  jsStreamInfo_Destroy(si);
  return 0;
}

/* One change line as msgpack, through jansson. */
static void pack_json(msgpack_packer *pk, json_t *j)
{
  if (json_is_object(j)) {
    msgpack_pack_map(pk, json_object_size(j));
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
      msgpack_pack_str_with_body(pk, k, strlen(k));
      pack_json(pk, v);
    }
  } else if (json_is_array(j)) {
    msgpack_pack_array(pk, json_array_size(j));
    for (size_t i = 0; i < json_array_size(j); i++) pack_json(pk, json_array_get(j, i));
  } else if (json_is_string(j)) {
    msgpack_pack_str_with_body(pk, json_string_value(j), json_string_length(j));
  } else if (json_is_integer(j)) {
    msgpack_pack_int64(pk, json_integer_value(j));
  } else if (json_is_real(j)) {
    msgpack_pack_double(pk, json_real_value(j));
  } else if (json_is_true(j)) {
    msgpack_pack_true(pk);
  } else if (json_is_false(j)) {
    msgpack_pack_false(pk);
  } else {
    msgpack_pack_nil(pk);
  }
}

static int publish(const char *subject, const char *data, size_t len, const char *id)
{
  natsMsg *m = NULL;
  natsStatus st = natsMsg_Create(&m, subject, NULL, data, (int)len);
  if (st == NATS_OK && id) st = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
  if (st == NATS_OK) st = js_PublishMsgAsync(js, &m, NULL);
  if (m) natsMsg_Destroy(m);
  return st == NATS_OK ? 0 : fail("publish", st);
}

static int flush_message(const char *subject, msgpack_sbuffer *b, int packed, int nlines, const char *prefix,
                         long first_line)
{
  if (nlines == 0) return 0;
  char id[256];
  snprintf(id, sizeof id, "%s:%ld", prefix, first_line);
  if (!packed) return publish(subject, b->data, b->size, prefix ? id : NULL);
  msgpack_sbuffer out; /* the array header, then the packed changes */
  msgpack_sbuffer_init(&out);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &out, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, (size_t)nlines);
  msgpack_sbuffer_write(&out, b->data, b->size);
  int rc = publish(subject, out.data, out.size, prefix ? id : NULL);
  msgpack_sbuffer_destroy(&out);
  return rc;
}

static int cmd_pub(int argc, char **argv)
{
  const char *subject = argv[0];
  FILE *f = strcmp(argv[1], "-") == 0 ? stdin : fopen(argv[1], "r");
  if (!f) { perror(argv[1]); return 1; }
  int per = atoi(opt(argc, argv, "lines", "1")), packed = atoi(opt(argc, argv, "mp", "0"));
  const char *prefix = opt(argc, argv, "id", NULL);
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  long line_no = 0, first = 1;
  int nlines = 0, rc = 0;
  while (!rc && (got = getline(&line, &cap, f)) > 0) {
    line_no++;
    if (packed) {
      json_t *j = json_loadb(line, (size_t)got, 0, NULL);
      if (!j) { fprintf(stderr, "jsctl: %s:%ld: not JSON\n", argv[1], line_no); rc = 1; break; }
      pack_json(&pk, j);
      json_decref(j);
    } else {
      msgpack_sbuffer_write(&b, line, (size_t)got);
    }
    if (++nlines == per) {
      rc = flush_message(subject, &b, packed, nlines, prefix, first);
      msgpack_sbuffer_clear(&b);
      nlines = 0;
      first = line_no + 1;
    }
  }
  if (!rc) rc = flush_message(subject, &b, packed, nlines, prefix, first);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = 30000;
  natsStatus st = rc ? NATS_OK : js_PublishAsyncComplete(js, &po);
  if (!rc && st != NATS_OK) rc = fail("publish acks", st);
  if (!rc && __atomic_load_n(&refused, __ATOMIC_SEQ_CST)) {
    fprintf(stderr, "jsctl: %d publishes refused; publish again (the ids make it idempotent)\n", refused);
    rc = 1;
  }
  free(line);
  msgpack_sbuffer_destroy(&b);
  if (f != stdin) fclose(f);
  return rc;
}

static int cmd_dump(char **argv)
{
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = argv[0];
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverAll;
  natsSubscription *sub = NULL;
  jsErrCode jerr = 0;
  natsStatus st = js_PullSubscribe(&sub, js, argv[1], NULL, NULL, &so, &jerr);
  if (st != NATS_OK) return fail("subscribe", st);
  jsConsumerInfo *ci = NULL;
  if ((st = natsSubscription_GetConsumerInfo(&ci, sub, NULL, &jerr)) != NATS_OK) return fail("consumer info", st);
  uint64_t pending = ci->NumPending; /* a pull returns early only with its batch full: ask for what is there */
  jsConsumerInfo_Destroy(ci);
  while (pending > 0) {
    natsMsgList l = { 0 };
    jsFetchRequest req;
    jsFetchRequest_Init(&req);
    req.Batch = pending > 1000 ? 1000 : (int)pending;
    req.Expires = (int64_t)5000 * 1000000;
    st = natsSubscription_FetchRequest(&l, sub, &req);
    if (st != NATS_OK || l.Count == 0) return fail("fetch", st);
    for (int i = 0; i < l.Count; i++) {
      jsMsgMetaData *md = NULL;
      const char *id = NULL;
      natsMsg_GetMetaData(&md, l.Msgs[i]);
      natsMsgHeader_Get(l.Msgs[i], "Nats-Msg-Id", &id);
      printf("%llu\t%s\t%.*s\n", md ? (unsigned long long)md->Sequence.Stream : 0ULL, id ? id : "",
             natsMsg_GetDataLength(l.Msgs[i]), natsMsg_GetData(l.Msgs[i]));
      if (md) { pending = md->NumPending; jsMsgMetaData_Destroy(md); }
    }
    natsMsgList_Destroy(&l);
  }
  natsSubscription_Destroy(sub);
  return 0;
}

static int cmd_info(char **argv, double wait)
{
  for (int tries = 0;; tries++) {
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetStreamInfo(&si, js, argv[0], NULL, &jerr);
    if (st == NATS_OK && (wait == 0 || !si->Cluster || si->Cluster->Leader)) { /* a lone server leads */
      if (wait == 0)
        printf("%llu %llu %llu %s %lld\n", (unsigned long long)si->State.FirstSeq, (unsigned long long)si->State.LastSeq,
               (unsigned long long)si->State.Msgs, si->Cluster && si->Cluster->Leader ? si->Cluster->Leader : "-",
               (long long)si->State.Consumers);
      jsStreamInfo_Destroy(si);
      return 0;
    }
    if (si) jsStreamInfo_Destroy(si);
    if (tries * 0.1 >= wait) return fail("info", st);
    usleep(100000);
  }
}

/* Changes the options given of the stream's config, keeping the rest. */
static int cmd_edit(int argc, char **argv)
{
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus st = js_GetStreamInfo(&si, js, argv[0], NULL, &jerr);
  if (st != NATS_OK) return fail("info", st);
  jsStreamConfig *sc = si->Config;
  sc->MaxMsgSize = atoi(opt(argc, argv, "maxmsgsize", "0")) ? atoi(opt(argc, argv, "maxmsgsize", "0")) : sc->MaxMsgSize;
  sc->MaxMsgs = atoll(opt(argc, argv, "maxmsgs", "0")) ? atoll(opt(argc, argv, "maxmsgs", "0")) : sc->MaxMsgs;
  jsStreamInfo *after = NULL;
  st = js_UpdateStream(&after, js, sc, NULL, &jerr);
  jsStreamInfo_Destroy(si);
  if (st != NATS_OK) return fail("edit", st);
  jsStreamInfo_Destroy(after);
  return 0;
}

static int cmd_created(char **argv)
{
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus st = js_GetStreamInfo(&si, js, argv[0], NULL, &jerr);
  if (st != NATS_OK) return fail("info", st);
  printf("%lld\n", (long long)si->Created);
  jsStreamInfo_Destroy(si);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: jsctl URL add|pub|dump|purge|delete|info|wait|edit|created …\n");
    return 2;
  }
  natsOptions *o = NULL;
  natsOptions_Create(&o);
  rn_js_set_servers(o, argv[1]);
  natsOptions_SetMaxReconnect(o, -1);
  natsOptions_SetReconnectWait(o, 100);
  natsStatus st = natsConnection_Connect(&nc, o);
  natsOptions_Destroy(o);
  if (st != NATS_OK) return fail("connect", st);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.ErrHandler = on_publish_error;
  jo.PublishAsync.MaxPending = 4096;
  if ((st = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK) return fail("jetstream", st);
  const char *cmd = argv[2];
  int rc = 2;
  if (strcmp(cmd, "add") == 0 && argc >= 5) rc = cmd_add(argc - 3, argv + 3);
  else if (strcmp(cmd, "pub") == 0 && argc >= 5) rc = cmd_pub(argc - 3, argv + 3);
  else if (strcmp(cmd, "dump") == 0 && argc >= 5) rc = cmd_dump(argv + 3);
  else if (strcmp(cmd, "purge") == 0) rc = (st = js_PurgeStream(js, argv[3], NULL, NULL)) ? fail("purge", st) : 0;
  else if (strcmp(cmd, "delete") == 0) rc = (st = js_DeleteStream(js, argv[3], NULL, NULL)) ? fail("delete", st) : 0;
  else if (strcmp(cmd, "info") == 0) rc = cmd_info(argv + 3, 0);
  else if (strcmp(cmd, "wait") == 0 && argc >= 5) rc = cmd_info(argv + 3, atof(argv[4]));
  else if (strcmp(cmd, "edit") == 0) rc = cmd_edit(argc - 3, argv + 3);
  else if (strcmp(cmd, "created") == 0) rc = cmd_created(argv + 3);
  else fprintf(stderr, "jsctl: unknown command or missing arguments: %s\n", cmd);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  nats_Close();
  return rc;
}
