/* test_open_opts_edges28.c — rn_open_opts fields out of their range are
 * refused at open, naming the field and the value. Until 0.40 write_back
 * took any value (2 meant on, -5 off) and carry_page_share any negative
 * one (off), so a host's typo went unseen; the Lua binding already
 * refused a write_back that is not a boolean. Uses runnel.h only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runnel.h"

/* rn_pipeline_open with opts; the message into err. A state opened is
 * closed at once. */
static int open_with(rn_open_opts opts, char *err, size_t errlen)
{
  rn_pipeline *p = NULL;
  err[0] = 0;
  int rc = rn_pipeline_open(&opts, &p, err, errlen);
  if (p) CHECK(rn_pipeline_close(p) == 0);
  return rc;
}

static void test_write_back_out_of_range_is_refused(void)
{
  char err[512];
  int values[] = { 2, -2, 100, -5 };
  for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
    CHECK(open_with((rn_open_opts){ .write_back = values[i] }, err, sizeof err) == RN_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "not %d", values[i]);
    if (!strstr(err, "write_back") || !strstr(err, want)) fprintf(stderr, "  got: %s\n", err);
    CHECK(strstr(err, "open: write_back is 1 (on), -1 (off) or 0") && strstr(err, want));
  }
  int good[] = { -1, 0, 1 };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    int rc = open_with((rn_open_opts){ .write_back = good[i] }, err, sizeof err);
    if (rc) fprintf(stderr, "  write_back %d: %s\n", good[i], err);
    CHECK(rc == 0);
  }
}

static void test_carry_page_share_below_minus_one_is_refused(void)
{
  char err[512];
  CHECK(open_with((rn_open_opts){ .carry_page_share = -2 }, err, sizeof err) == RN_EINVAL);
  if (!strstr(err, "carry_page_share")) fprintf(stderr, "  got: %s\n", err);
  CHECK(strstr(err, "open: carry_page_share is N > 0, -1 (off) or 0") && strstr(err, "not -2"));
  int good[] = { -1, 0, 3 };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    int rc = open_with((rn_open_opts){ .carry_page_share = good[i] }, err, sizeof err);
    if (rc) fprintf(stderr, "  carry_page_share %d: %s\n", good[i], err);
    CHECK(rc == 0);
  }
}

int main(void)
{
  RUN(test_write_back_out_of_range_is_refused);
  RUN(test_carry_page_share_below_minus_one_is_refused);
  return CHECK_REPORT();
}
