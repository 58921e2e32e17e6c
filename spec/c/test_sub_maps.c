/* test_sub_maps.c — a C subscription's maps on random tables: names short
 * enough for the fixed-size name slots (api.c's slotted_to_map) and too
 * long for them, rows short (copied with room past their end) and long,
 * every scalar kind; each event's row and old map must be what msgpack-c
 * packs for the same columns, byte for byte. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runnel.h"


#define MAXCOLS 20
static const char *const kinds[] = { "int", "string", "float", "bool" };

typedef struct table {
  int ncols;
  char names[MAXCOLS][48];
  rn_column_def cols[MAXCOLS];
} table;

/* Column 0 is the int key "k"; the others get names of 1 to 40 bytes
 * (so a table may or may not fit the 32-byte name slots). */
static void random_table(table *t, int long_names)
{
  t->ncols = 1 + (int)check_random(MAXCOLS);
  snprintf(t->names[0], sizeof t->names[0], "k");
  t->cols[0] = (rn_column_def){ t->names[0], "int", 0, NULL, 0, NULL };
  for (int i = 1; i < t->ncols; i++) {
    int len = 1 + (int)check_random(long_names ? 40 : 29);
    snprintf(t->names[i], sizeof t->names[i], "c%d_", i);
    size_t at = strlen(t->names[i]);
    while ((int)at < len) t->names[i][at++] = (char)('a' + check_random(26));
    t->names[i][at] = 0;
    t->cols[i] = (rn_column_def){ t->names[i], kinds[check_random(4)], 1, NULL, 0, NULL };
  }
}

/* A value for column c (nil now and then), packed as msgpack-c packs it:
 * what the stored row holds and what a subscriber must get. */
static void pack_value(msgpack_packer *pk, const rn_column_def *c, int long_values)
{
  static const char text[400] = "lorem ipsum dolor sit amet, consectetur adipiscing elit";
  if (check_random(6) == 0) { msgpack_pack_nil(pk); return; }
  if (strcmp(c->type, "int") == 0) {
    static const int64_t ints[] = { 0, 1, -1, 127, 128, -32, -33, 255, 256, 65535, 65536, -129, -32769,
                                    INT64_MAX, INT64_MIN, (int64_t)1 << 40 };
    int64_t v = ints[check_random(sizeof ints / sizeof *ints)];
    msgpack_pack_int64(pk, v == INT64_MAX || v == INT64_MIN ? v : v + (int64_t)check_random(5));
  } else if (strcmp(c->type, "string") == 0) {
    size_t n = long_values && check_random(4) == 0 ? 17 + check_random(300) : check_random(17);
    msgpack_pack_str_with_body(pk, text, n);
  } else if (strcmp(c->type, "float") == 0) {
    msgpack_pack_double(pk, (double)check_random(100000) / 16.0);
  } else if (check_random(2)) {
    msgpack_pack_true(pk);
  } else {
    msgpack_pack_false(pk);
  }
}

/* A full row for key k as a change and as the map a subscriber must get
 * (the same map: every column given, in column order). */
static void random_row(const table *t, int64_t k, int long_values, msgpack_sbuffer *sb)
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, (size_t)t->ncols);
  for (int i = 0; i < t->ncols; i++) {
    msgpack_pack_str_with_body(&pk, t->names[i], strlen(t->names[i]));
    if (i == 0) msgpack_pack_int64(&pk, k);
    else pack_value(&pk, &t->cols[i], long_values);
  }
}

typedef struct heard { msgpack_sbuffer got; } heard;

static int on_change(void *ctx, const rn_event *ev)
{
  heard *h = ctx;
  if (ev->row) msgpack_sbuffer_write(&h->got, ev->row, ev->row_len);
  if (ev->old) msgpack_sbuffer_write(&h->got, ev->old, ev->old_len);
  return 0;
}

static void run_table(int long_names, int long_values)
{
  table t;
  random_table(&t, long_names);
  rn_pipeline *p;
  rn_rel *r;
  const char *key[] = { "k" };
  CHECK(rn_pipeline_open(NULL, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", t.cols, t.ncols, key, 1, &r) == 0);
  heard h;
  msgpack_sbuffer_init(&h.got);
  CHECK(rn_subscribe(p, r, on_change, &h) == 0);
  msgpack_sbuffer want, change, last[4];
  msgpack_sbuffer_init(&want);
  msgpack_sbuffer_init(&change);
  for (int k = 0; k < 4; k++) msgpack_sbuffer_init(&last[k]);
  bool stored[4] = { false };
  CHECK(rn_begin(p) == 0);
  for (int i = 0; i < 60; i++) { /* upserts of 4 keys: inserts, then updates with their old rows */
    int k = (int)check_random(4);
    msgpack_sbuffer_clear(&change);
    random_row(&t, k, long_values, &change);
    if (stored[k] && last[k].size == change.size && memcmp(last[k].data, change.data, change.size) == 0)
      continue; /* the same row again: no event */
    CHECK(rn_upsert(p, r, change.data, change.size) == 0);
    msgpack_sbuffer_write(&want, change.data, change.size);
    if (stored[k]) msgpack_sbuffer_write(&want, last[k].data, last[k].size);
    msgpack_sbuffer_clear(&last[k]);
    msgpack_sbuffer_write(&last[k], change.data, change.size);
    stored[k] = true;
  }
  CHECK(rn_commit(p) == 0);
  CHECK(h.got.size == want.size && memcmp(h.got.data, want.data, want.size) == 0);
  for (int k = 0; k < 4; k++) msgpack_sbuffer_destroy(&last[k]);
  msgpack_sbuffer_destroy(&change);
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&h.got);
  rn_pipeline_close(p);
}

static void test_short_names_short_rows(void)
{
  for (int i = 0; i < 40 && !check_failed_now; i++) run_table(0, 0);
}

static void test_short_names_long_rows(void)
{
  for (int i = 0; i < 40 && !check_failed_now; i++) run_table(0, 1);
}

static void test_long_names(void)
{
  for (int i = 0; i < 40 && !check_failed_now; i++) run_table(1, i % 2);
}

int main(void)
{
  RUN(test_short_names_short_rows);
  RUN(test_short_names_long_rows);
  RUN(test_long_names);
  return CHECK_REPORT();
}
