/* test_jetstream.c — the JetStream source and sink from C (runnel.h only
 * for runnel; nats.c to set the stream up), against a nats-server started
 * here on 127.0.0.1 with its data in a temporary directory and killed at
 * exit. Without nats-server the tests say so and count as skipped. */
#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

static pid_t server;
static char url[64], dir[64] = "/tmp/rn_js_XXXXXX";

static void stop_server(void)
{
  if (server > 0) { kill(server, SIGKILL); waitpid(server, NULL, 0); }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) { /* a scratch directory left behind */ }
}

/* Starts nats-server on a random port; 0 when it serves JetStream. */
static int start_server(void)
{
  if (!mkdtemp(dir)) return -1;
  atexit(stop_server);
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  for (int attempt = 0; attempt < 5; attempt++) {
    int port = 20000 + rand() % 40000;
    char portstr[16], store[96];
    snprintf(portstr, sizeof portstr, "%d", port);
    snprintf(store, sizeof store, "%s/js", dir);
    if ((server = fork()) == 0) {
      freopen("/dev/null", "w", stderr);
      freopen("/dev/null", "w", stdout);
      execlp("nats-server", "nats-server", "-a", "127.0.0.1", "-p", portstr, "-js", "-sd", store, (char *)NULL);
      _exit(127);
    }
    snprintf(url, sizeof url, "nats://127.0.0.1:%d", port);
    for (int i = 0; i < 50; i++) { /* up to 2.5 s */
      natsConnection *nc = NULL;
      if (natsConnection_ConnectTo(&nc, url) == NATS_OK) { natsConnection_Destroy(nc); return 0; }
      if (waitpid(server, NULL, WNOHANG) == server) break; /* it died: the port was taken */
      usleep(50000);
    }
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    server = 0;
  }
  return -1;
}

/* Creates stream name on subjects "<lower>.>" and publishes lines to subject. */
static void setup_stream(const char *name, const char *subjects, const char *subject, const char *const *msgs, int n)
{
  natsConnection *nc = NULL;
  jsCtx *js = NULL;
  CHECK(natsConnection_ConnectTo(&nc, url) == NATS_OK);
  CHECK(natsConnection_JetStream(&js, nc, NULL) == NATS_OK);
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = name;
  sc.Subjects = &subjects;
  sc.SubjectsLen = 1;
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  CHECK(js_AddStream(&si, js, &sc, NULL, &jerr) == NATS_OK);
  jsStreamInfo_Destroy(si);
  for (int i = 0; i < n && subject; i++) {
    jsPubAck *ack = NULL;
    CHECK(js_Publish(&ack, js, subject, msgs[i], (int)strlen(msgs[i]), NULL, &jerr) == NATS_OK);
    jsPubAck_Destroy(ack);
  }
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
}

static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "name", .type = "string" } };
static const char *const key[] = { "id" };

static int count_rows(void *ctx, const rn_event *ev)
{
  (void)ev;
  ++*(int *)ctx;
  return 0;
}

/* JSSRC-1/2: a run from C applies the messages as groups and the next
 * open resumes after them; JS-1: a sink from C publishes after commit. */
static void test_run_and_resume(void)
{
  static const char *const msgs[] = {
    "{\"rel\":\"people\",\"op\":\"insert\",\"row\":{\"id\":1,\"name\":\"ann\"}}\n"
    "{\"rel\":\"people\",\"op\":\"insert\",\"row\":{\"id\":2,\"name\":\"bob\"}}",
    "{\"rel\":\"people\",\"op\":\"update\",\"row\":{\"id\":1,\"name\":\"anna\"}}",
  };
  setup_stream("CIN", "cin.>", "cin.0", msgs, 2);
  setup_stream("COUT", "cout.>", NULL, NULL, 0);
  char state[128];
  snprintf(state, sizeof state, "%s/state", dir);
  rn_open_opts oo = { 0 };
  oo.path = state;
  rn_pipeline *p = NULL;
  rn_rel *people = NULL;
  CHECK(rn_pipeline_open(&oo, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "people", cols, 2, key, 1, &people) == 0);
  rn_js_sink_opts so = { url, "cout.people", "verb", NULL, 5 };
  CHECK(rn_jetstream_sink(p, people, &so) == 0);
  int seen = 0;
  CHECK(rn_subscribe(p, people, count_rows, &seen) == 0);
  const char *subjects[] = { "cin.0" };
  rn_js_source_opts ro = { url, "CIN", subjects, 1, 10, 0, 0, NULL };
  uint64_t applied = 0;
  CHECK(rn_jetstream_run(p, &ro, &applied) == 0);
  CHECK(applied == 2);
  CHECK(seen == 3);
  CHECK(rn_seq(p) == 1); /* both messages in one group */
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(rn_pipeline_open(&oo, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "people", cols, 2, key, 1, &people) == 0);
  CHECK(rn_jetstream_run(p, &ro, &applied) == 0);
  CHECK(applied == 0); /* the position came from the state */
  CHECK(rn_jetstream_run(NULL, &ro, &applied) == RN_EINVAL);
  CHECK(rn_jetstream_sink(p, NULL, &so) == RN_EINVAL);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  if (start_server() != 0) {
    fprintf(stderr, "test_jetstream: skipped: nats-server cannot start\n");
    return CHECK_REPORT();
  }
  RUN(test_run_and_resume);
  nats_Close();
  return CHECK_REPORT();
}
