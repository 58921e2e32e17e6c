/* test_interrupt13.c — rn_interrupt_runs: a run of NDJSON lines stops
 * between two lines with what it read committed and returns RN_EINTR; a
 * request made while no run goes waits for the next; a run that ends
 * another way drops the request; rn_interrupt_withdraw drops it too. (A
 * run's open group committed when it stops: cli_interrupt13_spec.)
 * (Before, nothing could stop a run from a signal handler: runnel run's
 * Ctrl-C set a Lua hook that never fired in the C loop.) */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ndjson.h"
#include "pipeline.h"

static const char LINES[] = "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":1}}\n"
                            "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":2}}\n"
                            "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":3}}\n"
                            "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":4}}\n";

static rn_pipeline *open_t(rn_rel **t)
{
  rn_open_opts o = { 0 };
  rn_pipeline *p = NULL;
  static const rn_column_def cols[] = { { .name = "id", .type = "int" } };
  static const char *const key[] = { "id" };
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 1, key, 1, t) == 0);
  return p;
}

static int run(rn_pipeline *p, const char *text, size_t batch, rn_run_stats *st)
{
  FILE *in = fmemopen((void *)text, strlen(text), "r");
  CHECK(in != NULL);
  rn_run_opts o = { .batch = batch, .name = "in" };
  int rc = rn_run_ndjson(p, in, &o, st);
  fclose(in);
  return rc;
}

/* Asks the run to stop when it commits the group holding line 2
 * (whether one was going: it was). */
static int said_going = -1;
static int ask_at_2(void *ctx, const rn_event *ev)
{
  (void)ctx;
  if (ev->seq == 2) said_going = rn_interrupt_runs();
  return 0;
}

static void test_stops_between_lines_with_what_it_read_committed(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  CHECK(rn_subscribe(p, t, ask_at_2, NULL) == 0);
  rn_run_stats st;
  CHECK(run(p, LINES, 1, &st) == RN_EINTR);
  CHECK(said_going == 1);
  CHECK(strcmp(rn_errmsg(p), "in: interrupted after line 2: the lines up to it are applied and committed") == 0);
  CHECK(st.lines == 2 && st.applied == 2 && st.groups == 2);
  CHECK(rn_seq(p) == 2 && t->count == 2);
  CHECK(run(p, LINES + strlen(LINES) / 2, 1, &st) == 0); /* the request was taken: the next run goes on */
  CHECK(rn_seq(p) == 4 && t->count == 4);
  CHECK(rn_pipeline_close(p) == 0);
}

static void test_before_the_run_waits_for_it_withdrawn_does_not(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  CHECK(rn_interrupt_runs() == 0); /* no run is going: the next one takes it */
  rn_run_stats st;
  CHECK(run(p, LINES, 1000, &st) == RN_EINTR);
  CHECK(strcmp(rn_errmsg(p), "in: interrupted after line 0: the lines up to it are applied and committed") == 0);
  CHECK(st.lines == 0 && rn_seq(p) == 0);
  rn_interrupt_runs();
  rn_interrupt_withdraw();
  CHECK(run(p, LINES, 3, &st) == 0); /* lines 1-3, then 4: two groups */
  CHECK(st.lines == 4 && st.groups == 2 && t->count == 4);
  CHECK(rn_pipeline_close(p) == 0);
}

/* A request made while the run's last group commits, when it ends at the
 * end of its input: dropped, the next run goes on. */
static int ask_at_1(void *ctx, const rn_event *ev)
{
  (void)ctx;
  if (ev->seq == 1) rn_interrupt_runs();
  return 0;
}

static void test_a_run_that_ends_drops_the_request(void)
{
  rn_rel *t;
  rn_pipeline *p = open_t(&t);
  CHECK(rn_subscribe(p, t, ask_at_1, NULL) == 0);
  rn_run_stats st;
  CHECK(run(p, LINES, 1000, &st) == 0); /* one group: its commit asks, the input ends */
  CHECK(st.lines == 4 && rn_seq(p) == 1);
  CHECK(run(p, "{\"rel\":\"t\",\"op\":\"insert\",\"row\":{\"id\":9}}\n", 1000, &st) == 0);
  CHECK(t->count == 5);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_stops_between_lines_with_what_it_read_committed);
  RUN(test_before_the_run_waits_for_it_withdrawn_does_not);
  RUN(test_a_run_that_ends_drops_the_request);
  return CHECK_REPORT();
}
