/* test_close.c — rn_pipeline_close from inside a callback is refused
 * (RN_EMISUSE) and leaves the pipeline working (issue 10, defect 2). */
#include <msgpack.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "push_fixture.h"
#include "runnel.h"

typedef struct closer {
  rn_pipeline *p;
  int rc;                 /* what rn_pipeline_close answered inside the callback */
  char msg[128];
  int calls;
} closer;

static int close_inside(void *ctx, const rn_event *ev)
{
  (void)ev;
  closer *c = ctx;
  c->rc = rn_pipeline_close(c->p);
  snprintf(c->msg, sizeof c->msg, "%s", rn_errmsg(c->p));
  c->calls++;
  return 0;
}

static void test_close_from_subscriber(void)
{
  rn_pipeline *p;
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL } };
  static const char *const key[] = { "id" };
  rn_rel *t;
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, &t) == 0);
  closer c = { .p = p };
  CHECK(rn_subscribe(p, t, close_inside, &c) == 0);
  CHECK(insert_id(p, t, 1) == 0);
  CHECK(c.calls == 1);
  CHECK(c.rc == RN_EMISUSE);
  CHECK(strstr(c.msg, "not from inside a callback") != NULL);
  CHECK(rn_seq(p) == 1);            /* the group the callback saw committed */
  CHECK(insert_id(p, t, 2) == 0);   /* and the pipeline keeps working */
  CHECK(rn_seq(p) == 2);
  CHECK(c.calls == 2);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_close_null(void)
{
  CHECK(rn_pipeline_close(NULL) == 0);
}

/* Close commits the groups carried with nosync; when that commit fails
 * (the file may not grow: a full disk), the pipeline is closed all the
 * same and rn_pipeline_close_report says which groups were lost (it was
 * silent: the caller believed them stored). Run in a child whose files may
 * not grow past their size once the state is made. */
static void test_close_whose_flush_fails(void)
{
  char dir[] = "/tmp/rn_close_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  pid_t pid = fork();
  if (pid == 0) {
    rn_open_opts o = { .path = dir, .nosync = 1, .carry_groups = 1000000, .carry_changes = 1000000,
                       .carry_seconds = 1e6 };
    rn_pipeline *p = NULL;
    static const rn_column_def cols[] = { { .name = "id", .type = "int" } };
    static const char *const key[] = { "id" };
    rn_rel *t = NULL;
    if (rn_pipeline_open(&o, &p, NULL, 0) || rn_declare_table(p, "t", cols, 1, key, 1, &t)) _exit(10);
    signal(SIGXFSZ, SIG_IGN);
    char data[64];
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    FILE *f = fopen(data, "r");
    fseek(f, 0, SEEK_END);
    struct rlimit r = { (rlim_t)ftell(f), (rlim_t)ftell(f) };
    fclose(f);
    setrlimit(RLIMIT_FSIZE, &r);
    for (int64_t id = 0; id < 20000; id++)
      if (insert_id(p, t, id)) _exit(11); /* carried: nothing written yet */
    char err[512] = "";
    int rc = rn_pipeline_close_report(p, err, sizeof err);
    if (rc != RN_EFULL || !strstr(err, "groups 1 to 20000") || !strstr(err, "could not be committed"))
      fprintf(stderr, "close: %d %s\n", rc, err);
    _exit(rc == RN_EFULL && strstr(err, "groups 1 to 20000") && strstr(err, "could not be committed") ? 0 : 12);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_close_from_subscriber);
  RUN(test_close_null);
  RUN(test_close_whose_flush_fails);
  return CHECK_REPORT();
}
