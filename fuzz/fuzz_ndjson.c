/* fuzz_ndjson.c — NDJSON text through rn_run_ndjson (p:run's apply) into
 * the state of state.c. The first byte picks the options: bit 0 skip (bad
 * lines go to a rejects stream), bits 1-3 the batch size (1 to 8 lines);
 * the rest is the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndjson.h"
#include "state.h"

/* Every reject is `name:line: reason<TAB>line`: it starts with the name. */
static void check_rejects(const char *text, size_t len, uint64_t rejected)
{
  uint64_t starts = 0;
  for (size_t i = 0; i + 6 <= len; i++)
    if ((i == 0 || text[i - 1] == '\n') && memcmp(text + i, "input:", 6) == 0) starts++;
  if (starts < rejected) {
    fprintf(stderr, "fuzz: %llu rejects counted, %llu written\n", (unsigned long long)rejected,
            (unsigned long long)starts);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) return 0;
  rn_pipeline *p = fuzz_state_open();
  /* fmemopen refuses an empty buffer: give it one byte of newline. */
  char *text = malloc(size);
  if (!text) abort();
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\n';
  FILE *in = fmemopen(text, size, "r");
  char *rejects_text = NULL;
  size_t rejects_len = 0;
  FILE *rejects = open_memstream(&rejects_text, &rejects_len);
  if (!in || !rejects) abort();
  rn_run_opts o = { .batch = 1 + (data[0] >> 1 & 7), .skip = data[0] & 1, .rejects = rejects,
                    .name = "input" };
  rn_run_stats st = { 0 };
  int rc = rn_run_ndjson(p, in, &o, &st);
  if (rc) fuzz_check_failure(p, rc, "rn_run_ndjson");
  if (st.applied + st.rejected > st.lines) abort();
  fclose(in);
  fclose(rejects);
  check_rejects(rejects_text, rejects_len, st.rejected);
  free(rejects_text);
  free(text);
  fuzz_state_close(p);
  return 0;
}
