/* test_ndjson_format12.c — the line formats an NDJSON sink records with its
 * mark (meta "oi:", OUTBOX-10 in outbox.c): a crash before the mark of the
 * last groups is recorded leaves their lines in the file, found at the
 * reopen. A state without the record (written before 0.23) opens as
 * before: the declaration's own format is compared. The crash is a child
 * that _exits without closing. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ndjson_stream_fixture.h"
#include "raw_meta_fixture.h"
#include "ndjson.h"
#include "runnel.h"

/* A child writes groups 1..3 and exits without close; the "oi:" record
 * of its sink is then removed, as in a state before 0.23. */
static void test_a_state_without_the_record_opens_as_before(void)
{
  char dir[] = "/tmp/runnel_format12_XXXXXX", log[64], key[PATH_MAX + 16], real[PATH_MAX];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(log, sizeof log, "%s/out.ndjson", dir);
  crash_after_three_groups(dir, log, "verb");
  CHECK(count_lines(log) == 3);
  CHECK(realpath(log, real) != NULL);
  snprintf(key, sizeof key, RN_META_DURABLE_INFO RN_SINK_NDJSON "%s", real);
  size_t len;
  char *had = raw_get(dir, key, &len);
  CHECK(had != NULL && len > 0);                 /* recorded with the mark */
  free(had);
  raw_del(dir, key);
  rn_rel *s = NULL;
  rn_pipeline *p = open_path_sink(dir, log, "verb", &s);       /* group 3 waits: found in the file, not written again */
  CHECK(count_lines(log) == 3);
  CHECK(insert_row(p, s, 4) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  CHECK(count_lines(log) == 4);
  had = raw_get(dir, key, &len);
  CHECK(had != NULL);                            /* the declaration wrote it again */
  free(had);
  cleanup(dir);
}

int main(void)
{
  RUN(test_a_state_without_the_record_opens_as_before);
  return CHECK_REPORT();
}
