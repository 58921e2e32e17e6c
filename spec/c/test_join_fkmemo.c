/* test_join_fkmemo.c — the mapper memo alone (core/join_fkmemo.c): which
 * rows it answers for, what it keeps, and when it rests. */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "join_fkmemo.h"

#define NCOLS 70

typedef struct row {
  msgpack_sbuffer b;
} row;

/* A row of NCOLS ints: column c holds vals[c] (0 past nvals). */
static row make_row(const int *vals, int nvals)
{
  row r;
  msgpack_sbuffer_init(&r.b);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &r.b, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, NCOLS);
  for (int c = 0; c < NCOLS; c++) msgpack_pack_int(&pk, c < nvals ? vals[c] : 0);
  return r;
}

static void store(rn_fkmemo **m, const row *r, uint64_t mask, const char *enc)
{
  rn_fkmemo_key k = { .null = enc == NULL, .enc = enc, .len = enc ? strlen(enc) : 0 };
  rn_fkmemo_store(m, r->b.data, r->b.size, NCOLS, mask, &k);
}

/* The key remembered for r ("" for a null key), or NULL. */
static const char *find(rn_fkmemo *m, const row *r, uint64_t *mask)
{
  static char out[64];
  rn_fkmemo_key k;
  uint64_t ignored;
  if (!rn_fkmemo_find(m, r->b.data, r->b.size, NCOLS, mask ? mask : &ignored, &k)) return NULL;
  if (k.null) return "";
  memcpy(out, k.enc, k.len);
  out[k.len] = 0;
  return out;
}

static void answers_for_the_bytes_read(void)
{
  rn_fkmemo *m = NULL;
  row a = make_row((int[]){ 1, 7, 3 }, 3), b = make_row((int[]){ 2, 7, 4 }, 3), c = make_row((int[]){ 1, 8, 3 }, 3);
  CHECK(find(m, &a, NULL) == NULL);
  store(&m, &a, 1u << 1, "K7");
  uint64_t mask = 0;
  const char *got = find(m, &b, &mask); /* other columns differ: not read */
  CHECK(got && strcmp(got, "K7") == 0);
  CHECK(mask == 1u << 1);
  CHECK(find(m, &c, NULL) == NULL); /* the read column differs */
  store(&m, &c, 1u << 1, NULL);
  got = find(m, &c, NULL);
  CHECK(got && strcmp(got, "") == 0); /* a null key is remembered */
  rn_fkmemo_free(m);
  msgpack_sbuffer_destroy(&a.b), msgpack_sbuffer_destroy(&b.b), msgpack_sbuffer_destroy(&c.b);
}

/* Two masks (a mapper reading kind, then x or y): each row is answered
 * under the mask of a call that found its bytes, never under the other. */
static void keeps_masks_apart(void)
{
  rn_fkmemo *m = NULL;
  row kx = make_row((int[]){ 0, 5, 6 }, 3), ky = make_row((int[]){ 1, 5, 6 }, 3), ky2 = make_row((int[]){ 1, 9, 6 }, 3);
  store(&m, &kx, 1u << 0 | 1u << 1, "X5");
  store(&m, &ky, 1u << 0 | 1u << 2, "Y6");
  uint64_t mask;
  const char *got = find(m, &ky2, &mask);
  CHECK(got && strcmp(got, "Y6") == 0);
  CHECK(mask == (1u << 0 | 1u << 2));
  got = find(m, &kx, &mask);
  CHECK(got && strcmp(got, "X5") == 0);
  CHECK(mask == (1u << 0 | 1u << 1));
  rn_fkmemo_free(m);
  msgpack_sbuffer_destroy(&kx.b), msgpack_sbuffer_destroy(&ky.b), msgpack_sbuffer_destroy(&ky2.b);
}

/* Mask 0: the mapper read nothing, so its key is every row's. */
static void a_call_reading_nothing_answers_for_every_row(void)
{
  rn_fkmemo *m = NULL;
  row a = make_row((int[]){ 1 }, 1), b = make_row((int[]){ 2, 3, 4 }, 3);
  store(&m, &a, 0, "C");
  const char *got = find(m, &b, NULL);
  CHECK(got && strcmp(got, "C") == 0);
  rn_fkmemo_free(m);
  msgpack_sbuffer_destroy(&a.b), msgpack_sbuffer_destroy(&b.b);
}

/* Bit 63 stands for every slot from 63 on: all of them are compared. */
static void bit_63_compares_every_later_slot(void)
{
  rn_fkmemo *m = NULL;
  int v[NCOLS] = { 0 };
  v[68] = 1;
  row a = make_row(v, NCOLS);
  v[64] = 5;
  row b = make_row(v, NCOLS);
  v[64] = 0, v[3] = 9;
  row c = make_row(v, NCOLS);
  store(&m, &a, 1ULL << 63, "T1");
  CHECK(find(m, &b, NULL) == NULL);
  const char *got = find(m, &c, NULL);
  CHECK(got && strcmp(got, "T1") == 0);
  rn_fkmemo_free(m);
  msgpack_sbuffer_destroy(&a.b), msgpack_sbuffer_destroy(&b.b), msgpack_sbuffer_destroy(&c.b);
}

/* Read bytes and key that do not fit a slot are not remembered. */
static void a_long_key_is_not_remembered(void)
{
  rn_fkmemo *m = NULL;
  row a = make_row((int[]){ 1 }, 1);
  char key[80];
  memset(key, 'k', sizeof key - 1);
  key[sizeof key - 1] = 0;
  store(&m, &a, 1, key);
  CHECK(find(m, &a, NULL) == NULL);
  rn_fkmemo_free(m);
  msgpack_sbuffer_destroy(&a.b);
}

/* A window of 4,096 probes with almost no hits: the memo rests for 65,536
 * calls (a remembered row is not answered), then answers again. */
static void rests_when_it_seldom_answers(void)
{
  rn_fkmemo *m = NULL;
  row known = make_row((int[]){ 42 }, 1);
  store(&m, &known, 1, "K");
  for (int i = 0; i < 4096; i++) {
    row r = make_row((int[]){ 100000 + i }, 1);
    CHECK(find(m, &r, NULL) == NULL);
    msgpack_sbuffer_destroy(&r.b);
  }
  CHECK(find(m, &known, NULL) == NULL); /* resting */
  for (int i = 1; i < 16 * 4096; i++) CHECK(find(m, &known, NULL) == NULL);
  const char *got = find(m, &known, NULL);
  CHECK(got && strcmp(got, "K") == 0);
  rn_fkmemo_free(m);
  msgpack_sbuffer_destroy(&known.b);
}

int main(void)
{
  RUN(answers_for_the_bytes_read);
  RUN(keeps_masks_apart);
  RUN(a_call_reading_nothing_answers_for_every_row);
  RUN(bit_63_compares_every_later_slot);
  RUN(a_long_key_is_not_remembered);
  RUN(rests_when_it_seldom_answers);
  return CHECK_REPORT();
}
