/* test_writepath_get_put.c — a row rn_get handed out, given straight back
 * to the next change (copied into another table, written back, or used as
 * a patch): rn_get's map lives in a buffer of the pipeline's that 0.13's
 * write path also packs stored entries into, and the change must read the
 * values it was given before that buffer is reused. */
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runnel.h"

static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL },
                                      { "name", "string", 0, NULL, 0, NULL },
                                      { "note", "string", 1, NULL, 0, NULL },
                                      { "n", "int", 1, NULL, 0, NULL } };
static const char *const key[] = { "id" };

/* A map { id = id, name = name, note = note, n = n } into sb. */
static void row_map(msgpack_sbuffer *sb, int64_t id, const char *name, const char *note, int64_t n)
{
  msgpack_packer pk;
  msgpack_sbuffer_clear(sb);
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 4);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
  msgpack_pack_str_with_body(&pk, "name", 4);
  msgpack_pack_str_with_body(&pk, name, strlen(name));
  msgpack_pack_str_with_body(&pk, "note", 4);
  msgpack_pack_str_with_body(&pk, note, strlen(note));
  msgpack_pack_str_with_body(&pk, "n", 1);
  msgpack_pack_int64(&pk, n);
}

static void key_map(msgpack_sbuffer *sb, int64_t id)
{
  msgpack_packer pk;
  msgpack_sbuffer_clear(sb);
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
}

/* rel's row under id, copied into out (a map), or out cleared when absent. */
static void copy_of(rn_pipeline *p, rn_rel *rel, int64_t id, msgpack_sbuffer *out)
{
  msgpack_sbuffer k;
  msgpack_sbuffer_init(&k);
  key_map(&k, id);
  const void *row;
  size_t len;
  CHECK(rn_get(p, rel, k.data, k.size, &row, &len, NULL) == 0);
  msgpack_sbuffer_clear(out);
  if (row) msgpack_sbuffer_write(out, row, len);
  msgpack_sbuffer_destroy(&k);
}

static bool same(const msgpack_sbuffer *a, const msgpack_sbuffer *b)
{
  return a->size == b->size && memcmp(a->data, b->data, a->size) == 0;
}

static void test_a_got_row_given_back(void)
{
  static const size_t lens[] = { 0, 5, 31, 32, 100, 255, 256, 4000, 70000 };
  static char text[70001];
  for (size_t i = 0; i < sizeof text - 1; i++) text[i] = (char)('a' + i % 26);
  rn_open_opts opts = { 0 };
  rn_pipeline *p;
  CHECK(rn_pipeline_open(&opts, &p, NULL, 0) == 0);
  rn_rel *a, *b;
  CHECK(rn_declare_table(p, "a", cols, 4, key, 1, &a) == 0);
  CHECK(rn_declare_table(p, "b", cols, 4, key, 1, &b) == 0);
  msgpack_sbuffer in, k, want, got;
  msgpack_sbuffer_init(&in);
  msgpack_sbuffer_init(&k);
  msgpack_sbuffer_init(&want);
  msgpack_sbuffer_init(&got);
  int id = 0;
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
    for (size_t j = 0; j < sizeof lens / sizeof *lens; j++) {
      id++;
      char *name = strndup(text + i, lens[i]), *note = strndup(text + j + 1, lens[j]);
      row_map(&in, id, name, note, id * 1000);
      CHECK(rn_insert(p, a, in.data, in.size) == 0);
      copy_of(p, a, id, &want);
      const void *row;
      size_t len;
      key_map(&k, id);
      /* copied into b as it came */
      CHECK(rn_get(p, a, k.data, k.size, &row, &len, NULL) == 0 && row);
      CHECK(rn_insert(p, b, row, len) == 0);
      copy_of(p, b, id, &got);
      CHECK(same(&want, &got));
      /* written back: a no-op */
      CHECK(rn_get(p, a, k.data, k.size, &row, &len, NULL) == 0 && row);
      CHECK(rn_upsert(p, a, row, len) == 0);
      copy_of(p, a, id, &got);
      CHECK(same(&want, &got));
      /* a patch of b from a's row, b's row changed first */
      row_map(&in, id, "other", "x", 1);
      CHECK(rn_upsert(p, b, in.data, in.size) == 0);
      CHECK(rn_get(p, a, k.data, k.size, &row, &len, NULL) == 0 && row);
      CHECK(rn_update(p, b, row, len) == 0);
      copy_of(p, b, id, &got);
      CHECK(same(&want, &got));
      free(name);
      free(note);
    }
  }
  msgpack_sbuffer_destroy(&in);
  msgpack_sbuffer_destroy(&k);
  msgpack_sbuffer_destroy(&want);
  msgpack_sbuffer_destroy(&got);
  CHECK(rn_pipeline_close(p) == 0);
}

int main(void)
{
  RUN(test_a_got_row_given_back);
  return CHECK_REPORT();
}
