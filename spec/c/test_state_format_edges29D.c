/* A state of a newer format (upgrade.c (3): "this build may not read it")
 * was refused by rn_pipeline_open alone: runnel inspect listed it,
 * runnel verify called it "whole (0 damaged)", and runnel query and
 * runnel.attach read its rows, all as if this build knew its layout. Each
 * reader now refuses it naming both formats, and writes nothing; a state
 * of this build's format or an older one (no "fmt": 0.17) still reads. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raw_meta_fixture.h"
#include "small_state_fixture.h"
#include "store_sink.h"
#include "verify.h"

/* Sets the state's format record: format, or none at all (format < 0). */
static void set_format(const char *dir, long format)
{
  uint32_t f = (uint32_t)format;
  if (format < 0) raw_del(dir, RN_META_FORMAT);
  else raw_put(dir, RN_META_FORMAT, &f, sizeof f);
}

static char *slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  rewind(f);
  char *s = malloc(*len + 1);
  CHECK(s && fread(s, 1, *len, f) == *len);
  fclose(f);
  return s;
}

/* What rn_verify wrote, and its result in *rc. */
static char *verify_text(const char *dir, int *rc)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  *rc = rn_verify(dir, out);
  fclose(out);
  return buf;
}

static int attach_rows(const char *dir, rn_err *e)
{
  rn_attached *a = NULL;
  rn_err_clear(e);
  int rc = rn_attach(dir, "t", NULL, &a, e);
  if (a) rn_attach_close(a);
  return rc;
}

static void test_newer_format_refused_by_readers(void)
{
  char dir[256], data[300];
  small_state(dir, sizeof dir, "fmt29D", 3);
  set_format(dir, RN_STATE_FORMAT + 1);
  snprintf(data, sizeof data, "%s/data.mdb", dir);
  size_t before_len, after_len;
  char *before = slurp(data, &before_len);
  char want[160];
  snprintf(want, sizeof want, "the state is of format %d, written by a newer runnel; this one (%s) reads formats up to %d",
           RN_STATE_FORMAT + 1, RN_VERSION, RN_STATE_FORMAT);

  rn_inspect_state st;
  char err[1024] = "";
  CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == RN_ESCHEMA);
  CHECK(strstr(err, dir) != NULL && strstr(err, want) != NULL);

  int rc;
  char *text = verify_text(dir, &rc);
  CHECK(rc != 0);
  CHECK(text && strstr(text, want) != NULL);
  CHECK(text && strstr(text, "whole") == NULL);
  free(text);

  rn_err e;
  CHECK(attach_rows(dir, &e) == RN_ESCHEMA);
  CHECK(strstr(e.msg, "attach") == e.msg && strstr(e.msg, want) != NULL);

  char *after = slurp(data, &after_len); /* readers write nothing */
  CHECK(before && after && before_len == after_len && memcmp(before, after, before_len) == 0);
  free(before);
  free(after);
  cleanup(dir);
}

static void test_this_and_older_formats_read(void)
{
  for (long format = -1; format <= RN_STATE_FORMAT; format++) { /* none (0.17), 0, this build's */
    char dir[256];
    small_state(dir, sizeof dir, "fmt29D", 3);
    set_format(dir, format);
    rn_inspect_state st;
    char err[1024] = "";
    CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == 0);
    CHECK(st.relations == 1);
    int rc;
    char *text = verify_text(dir, &rc);
    CHECK(text && strstr(text, "whole") != NULL);
    free(text);
    rn_err e;
    CHECK(attach_rows(dir, &e) == 0);
    cleanup(dir);
  }
}

static void test_malformed_format_is_damage(void)
{
  char dir[256];
  small_state(dir, sizeof dir, "fmt29D", 3);
  raw_put(dir, RN_META_FORMAT, "abc", 3);
  rn_inspect_state st;
  char err[1024] = "";
  CHECK(rn_inspect(dir, NULL, NULL, &st, err, sizeof err) == RN_ESTORE);
  CHECK(strstr(err, "state damaged") && strstr(err, "its format is 3 bytes, not 4"));
  int rc;
  char *text = verify_text(dir, &rc);
  CHECK(rc != 0 && text && strstr(text, "its format is 3 bytes, not 4") && !strstr(text, "whole"));
  free(text);
  cleanup(dir);
}

int main(void)
{
  RUN(test_newer_format_refused_by_readers);
  RUN(test_this_and_older_formats_read);
  RUN(test_malformed_format_is_damage);
  return CHECK_REPORT();
}
