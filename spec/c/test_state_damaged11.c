/* test_state_damaged11.c — test_state_damaged10.c's sequel: damage the
 * open did not see, now refused (naming the state and the relation and
 * how to recover) or gone on from the safe way with a note. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "damaged_fixture.h"
#include "distinct.h"
#include "evolve_reads.h"
#include "pipeline.h"
#include "push_fixture.h"
#include "raw_meta_fixture.h"
#include "runnel.h"
#include "store.h"
#include "verify.h"

/* ---- a keyed table with id gaps, its counters damaged to entries + 1 ---- */

/* Counters damaged to next id 5, its entries (4) + 1: the open took the
 * ids for 1..n (a walk only when next id is not entries + 1) and passed;
 * key 4 put back later took id 5 and key 5 … id 10 twice. Now the table
 * is marked as holding gaps when an open first finds them, and a marked
 * table's largest id is read at every open: refused, nothing changed. */
static void test_gapped_counters_at_entries_plus_one_are_refused(void)
{
  char dir[] = "/tmp/runnel_damaged11_XXXXXX", want[600];
  CHECK(mkdtemp(dir) != NULL);
  make_gapped_state(dir);
  put_counters(dir, 5, 3, 5);
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *t = NULL;
  int rc = rn_declare_table(p, "t", k_col, 1, k_key, 1, &t);
  CHECK(rc == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: relation \"t\" holds row id 10, its counters say next id 5", dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  rn_pipeline_close(p);
  CHECK(raw_entries(dir, "t:t") == 4);
  size_t len;
  uint64_t c[3] = { 0 };
  char *v = raw_get(dir, "n:t", &len); /* the counters as they were */
  CHECK(v && len == 24);
  if (v) memcpy(c, v, sizeof c);
  CHECK(c[0] == 5 && c[1] == 3 && c[2] == 5);
  free(v);
  cleanup(dir);
}

/* A table whose ids are 1..n opens as before (no walk, no mark) and a
 * drop takes the mark of one that was gapped: declared again, it is a
 * new table whose ids are 1..n. */
static void test_gap_mark_is_dropped_with_its_table(void)
{
  char dir[] = "/tmp/runnel_damaged11_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(insert_int(p, t, "k", 1) == 0);
  rn_pipeline_close(p);
  size_t len;
  char *mark = raw_get(dir, "ig:t", &len);
  CHECK(mark == NULL);
  free(mark);
  cleanup(dir);
  strcpy(dir, "/tmp/runnel_damaged11_XXXXXX");
  CHECK(mkdtemp(dir) != NULL);
  make_gapped_state(dir);
  mark = raw_get(dir, "ig:t", &len);
  CHECK(mark != NULL);
  free(mark);
  if (!(p = open_at(dir))) return;
  CHECK(rn_drop(p, "t") == 0);
  rn_pipeline_close(p);
  mark = raw_get(dir, "ig:t", &len);
  CHECK(mark == NULL);
  free(mark);
  cleanup(dir);
}

/* ---- "rd:" and "ev": a letter flipped inside a name ---- */

/* CRC-64/XZ (ECMA-182, reflected), the check store.h's name lists carry. */
static uint64_t crc64(const void *data, size_t len)
{
  const unsigned char *at = data;
  uint64_t crc = ~(uint64_t)0;
  for (size_t i = 0; i < len; i++) {
    crc ^= at[i];
    for (int bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >> 1) ^ 0xC96C5795D7870F42ULL : crc >> 1;
  }
  return ~crc;
}

/* Record key as this build writes a list: |names|"\xff" "nl1" check\0|,
 * check the 16 hex digits of crc64 over checked (len bytes), the names
 * stored being names. */
static void put_checked(const char *dir, const char *key, const char *checked, const char *names, size_t len)
{
  char rec[256];
  memcpy(rec, names, len);
  snprintf(rec + len, sizeof rec - len, "\xff" "nl1" "%016llx", (unsigned long long)crc64(checked, len));
  raw_put(dir, key, rec, len + 21);
}

/* A state where u's functions were seen to read src: "rd:u" names it. */
static void make_reads_state(const char *dir)
{
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *src = NULL, *u = NULL;
  CHECK(rn_declare_table(p, "src", k_col, 1, k_key, 1, &src) == 0);
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == 0);
  CHECK(rn_reads_note(p, "u", src) == 0);
  CHECK(insert_int(p, src, "k", 1) == 0); /* the group writes it */
  rn_pipeline_close(p);
}

/* "src" read back as "ssc" (a letter flipped) still parsed: u read a
 * relation that does not exist, and a change of src no longer rebuilt
 * it, unsaid. Now the list carries a check: refused at u's declaration,
 * and runnel verify names it. */
static void test_flipped_read_name_is_refused(void)
{
  char dir[] = "/tmp/runnel_damaged11_XXXXXX", want[600], text[4096];
  CHECK(mkdtemp(dir) != NULL);
  make_reads_state(dir);
  size_t len;
  char *rec = raw_get(dir, "rd:u", &len);
  CHECK(rec && len == 25 && memcmp(rec, "src", 4) == 0 && memcmp(rec + 4, "\xff" "nl1", 4) == 0);
  if (!rec || len != 25) return;
  rec[1] ^= 0x01; /* "src" -> "ssc" */
  raw_put(dir, "rd:u", rec, len);
  free(rec);
  FILE *out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) == 1);
  fclose(out);
  CHECK(strstr(text, "damaged: relation \"u\": the list of the relations its functions read fails its check\n") != NULL);
  if (check_failed_now) fprintf(stderr, "%s", text);
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *src = NULL, *u = NULL;
  CHECK(rn_declare_table(p, "src", k_col, 1, k_key, 1, &src) == 0);
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: the list of the relations that relation \"u\"'s functions read "
           "fails its check (25 bytes): a change of one of them might not rebuild it; drop it to build it anew "
           "(p:drop(\"u\") or runnel drop %s u)", dir, dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  CHECK(rn_drop(p, "u") == 0); /* as the message says: u is built anew */
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == 0);
  rn_pipeline_close(p);
  cleanup(dir);
}

/* A list without a check (runnel 0.22 and older wrote it so) is read as
 * before and written again with its check by the next group; a name
 * beginning with "\xff" (no UTF-8 name does) that is not a whole check
 * is refused as malformed. */
static void test_unchecked_reads_are_read_and_checked_again(void)
{
  char dir[] = "/tmp/runnel_damaged11_XXXXXX", want[600];
  CHECK(mkdtemp(dir) != NULL);
  make_reads_state(dir);
  raw_put(dir, "rd:u", "src", 4);
  rn_pipeline *p = open_at(dir);
  if (!p) return;
  rn_rel *src = NULL, *u = NULL;
  CHECK(rn_declare_table(p, "src", k_col, 1, k_key, 1, &src) == 0);
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == 0);
  CHECK(insert_int(p, src, "k", 2) == 0);
  rn_pipeline_close(p);
  size_t len;
  char *rec = raw_get(dir, "rd:u", &len);
  CHECK(rec && len == 25 && memcmp(rec, "src", 4) == 0 && memcmp(rec + 4, "\xff" "nl1", 4) == 0);
  char older[64]; /* runnel 0.22 read the check as a name and wrote it back with a read it saw: "v" */
  if (rec && len == 25) memcpy(older, rec, 25), memcpy(older + 25, "v", 2);
  free(rec);
  raw_put(dir, "rd:u", older, 27);
  if (!(p = open_at(dir))) return;
  CHECK(rn_declare_table(p, "src", k_col, 1, k_key, 1, &src) == 0);
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == 0);
  CHECK(insert_int(p, src, "k", 3) == 0);
  rn_pipeline_close(p);
  rec = raw_get(dir, "rd:u", &len); /* the older check left out, checked again */
  CHECK(rec && len == 27 && memcmp(rec, "src\0v", 6) == 0 && memcmp(rec + 6, "\xff" "nl1", 4) == 0);
  free(rec);
  raw_put(dir, "rd:u", "src\0\xff" "nl1", 9); /* a check cut to its marker */
  if (!(p = open_at(dir))) return;
  CHECK(rn_declare_table(p, "src", k_col, 1, k_key, 1, &src) == 0);
  CHECK(rn_declare_table(p, "u", k_col, 1, k_key, 1, &u) == RN_ESTORE);
  snprintf(want, sizeof want, "state damaged: %s: the list of the relations that relation \"u\"'s functions read "
           "is malformed (9 bytes): a change of one of them might not rebuild it; drop it to build it anew "
           "(p:drop(\"u\") or runnel drop %s u)", dir, dir);
  CHECK(strcmp(rn_errmsg(p), want) == 0);
  if (check_failed_now) fprintf(stderr, "got: %s\n", rn_errmsg(p));
  rn_pipeline_close(p);
  cleanup(dir);
}

/* A table's schema change writes "ev" with its check; "t" read back as
 * "u" (flipped) parsed: t no longer counted as changed and what is over
 * it was not rebuilt, unsaid. Now every relation counts as changed, with
 * a note, as for a malformed record; runnel verify names it. */
static void test_flipped_mark_counts_every_relation(void)
{
  static const rn_column_def kv_cols[] = { { "k", "int", 0, NULL, 0, NULL }, { "v", "int", 1, NULL, 0, NULL } };
  char dir[] = "/tmp/runnel_damaged11_XXXXXX", notes[8192], want[1200], text[4096];
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_at(dir);
  rn_rel *t = NULL, *d = NULL;
  if (!p) return;
  CHECK(rn_declare_table(p, "t", k_col, 1, k_key, 1, &t) == 0);
  CHECK(rn_declare_distinct(p, "d", t, &d) == 0);
  CHECK(insert_int(p, t, "k", 1) == 0);
  rn_pipeline_close(p);
  if (!(p = open_at(dir))) return;
  CHECK(rn_declare_table(p, "t", kv_cols, 2, k_key, 1, &t) == 0); /* gains v: t's rows rewritten, marked */
  rn_pipeline_close(p);
  size_t len;
  char *rec = raw_get(dir, "ev", &len);
  CHECK(rec && len == 23 && memcmp(rec, "t", 2) == 0 && memcmp(rec + 2, "\xff" "nl1", 4) == 0);
  free(rec);
  put_checked(dir, "ev", "t", "u", 2);
  FILE *out = fmemopen(text, sizeof text, "w");
  CHECK(rn_verify(dir, out) == 1);
  fclose(out);
  snprintf(want, sizeof want, "damaged: %s: the record of the relations changed since the last group fails its "
           "check\n", dir);
  CHECK(strstr(text, want) != NULL);
  if (check_failed_now) fprintf(stderr, "%s", text);
  if (!(p = open_at(dir))) return;
  CHECK(rn_declare_table(p, "t", kv_cols, 2, k_key, 1, &t) == 0);
  take_notes(p, notes);
  snprintf(want, sizeof want, "state damaged: %s: the record of the relations changed since the last group fails "
           "its check (23 bytes): every relation declared counts as changed (stateful ones are rebuilt from their "
           "inputs)\n", dir);
  CHECK(strcmp(notes, want) == 0);
  if (check_failed_now) fprintf(stderr, "notes: %s", notes);
  CHECK(rn_declare_distinct(p, "d", t, &d) == 0);
  CHECK(insert_int(p, t, "k", 2) == 0);
  rn_pipeline_close(p);
  rec = raw_get(dir, "ev", &len);
  CHECK(rec == NULL); /* deleted by the group */
  free(rec);
  cleanup(dir);
}

int main(void)
{
  RUN(test_gapped_counters_at_entries_plus_one_are_refused);
  RUN(test_gap_mark_is_dropped_with_its_table);
  RUN(test_flipped_read_name_is_refused);
  RUN(test_unchecked_reads_are_read_and_checked_again);
  RUN(test_flipped_mark_counts_every_relation);
  return CHECK_REPORT();
}
