/* test_oom_get_edges28.c — rn_get of a big row when the copy of the row
 * cannot be allocated. The test binary interposes malloc, calloc and
 * realloc (as test_oom.c does): while big_fails is set, an allocation of
 * more than 4 MiB fails. Uses runnel.h only. */
#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runnel.h"

/* ---- the failing allocator ---- */
#if defined(__SANITIZE_ADDRESS__)
#define REAL(f) __interceptor_##f   /* ASan's allocator, so its checks stay on */
#else
#define REAL(f) __libc_##f          /* glibc's (valgrind replaces these too) */
#endif
void *REAL(malloc)(size_t n);
void *REAL(calloc)(size_t n, size_t size);
void *REAL(realloc)(void *ptr, size_t n);

#define BIG ((size_t)4 << 20)
static int big_fails;     /* an allocation of more than BIG bytes fails */
static int big_failed;    /* one did since big_fails was set */
static long countdown;    /* > 0: allocations left before the one that fails (once) */

static int fails(size_t n)
{
  if (countdown > 0 && --countdown == 0) {
    big_failed = 1;
    return 1;
  }
  if (!big_fails || n <= BIG) return 0;
  big_failed = 1;
  return 1;
}

#define EXPORTED __attribute__((visibility("default")))
EXPORTED void *malloc(size_t n)
{
  if (fails(n)) { errno = ENOMEM; return NULL; }
  return REAL(malloc)(n);
}
EXPORTED void *calloc(size_t n, size_t size)
{
  if (fails(size && n > BIG / size ? BIG + 1 : 0)) { errno = ENOMEM; return NULL; }
  return REAL(calloc)(n, size);
}
EXPORTED void *realloc(void *ptr, size_t n)
{
  if (fails(n)) { errno = ENOMEM; return NULL; }
  return REAL(realloc)(ptr, n);
}

/* ---- the state ---- */

static const rn_column_def cols[] = { { .name = "id", .type = "int" }, { .name = "blob", .type = "bytes" } };
static const char *const key[] = { "id" };

static int open_state(const char *dir, rn_pipeline **p, rn_rel **t)
{
  rn_open_opts o = { .path = dir };
  char err[512] = "";
  int rc = rn_pipeline_open(&o, p, err, sizeof err);
  if (rc) fprintf(stderr, "  open: %s\n", err);
  return rc ? rc : rn_declare_table(*p, "t", cols, 2, key, 1, t);
}

/* The one-column key map { id = id }. */
static void key_map(msgpack_sbuffer *sb, int64_t id)
{
  msgpack_packer pk;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, id);
}

/* Row 1 of t with a blob of 8 MiB, committed by p. */
static void insert_big_row(rn_pipeline *p, rn_rel *t)
{
  size_t n = (size_t)8 << 20;
  char *blob = malloc(n);
  memset(blob, 'b', n);
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "id", 2);
  msgpack_pack_int64(&pk, 1);
  msgpack_pack_str_with_body(&pk, "blob", 4);
  msgpack_pack_bin_with_body(&pk, blob, n);
  CHECK(rn_insert(p, t, sb.data, sb.size) == 0);
  msgpack_sbuffer_destroy(&sb);
  free(blob);
}

/* Row 1 of t with a blob of 8 MiB, committed; the pipeline closed. */
static void write_big_row(const char *dir)
{
  rn_pipeline *p;
  rn_rel *t;
  CHECK(open_state(dir, &p, &t) == 0);
  insert_big_row(p, t);
  CHECK(rn_pipeline_close(p) == 0);
}

/* Regression: rn_get copies the row it found into a buffer of the
 * pipeline, then makes the map from that copy. When the copy could not
 * be allocated it went on all the same with the row's length over the
 * buffer (NULL in a pipeline just opened, else a smaller one): the map
 * was made from memory that is not the row (a crash, or bytes past the
 * buffer). It now fails with RN_ENOMEM, and the next rn_get, memory back,
 * reads the row. Inside a group, as outside. */
static void test_get_whose_row_copy_fails(void)
{
  char dir[] = "/tmp/runnel-oomget28-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  write_big_row(dir);
  for (int in_group = 0; in_group < 2; in_group++) {
    rn_pipeline *p;
    rn_rel *t;
    CHECK(open_state(dir, &p, &t) == 0);
    msgpack_sbuffer k;
    key_map(&k, 1);
    if (in_group) CHECK(rn_begin(p) == 0);
    const void *row = NULL;
    size_t len = 0;
    big_failed = 0;
    big_fails = 1;
    int rc = rn_get(p, t, k.data, k.size, &row, &len, NULL);
    big_fails = 0;
    CHECK(big_failed);
    CHECK(rc == RN_ENOMEM && row == NULL);
    CHECK(strstr(rn_errmsg(p), "out of memory") != NULL);
    rc = rn_get(p, t, k.data, k.size, &row, &len, NULL);
    CHECK(rc == 0 && row != NULL && len > ((size_t)8 << 20));
    if (in_group) CHECK(rn_rollback(p) == 0);
    msgpack_sbuffer_destroy(&k);
    CHECK(rn_pipeline_close(p) == 0);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* Regression: when the map of a stored row could not be allocated (the
 * row read fine), rn_get and rn_cursor_next failed with RN_ESTORE, "a
 * stored row could not be decoded": a damaged state, to a host, for what
 * was out of memory. They now say RN_ENOMEM. (A cursor's map is the
 * only allocation its step makes; rn_get's copy of the row may fail
 * first.) */
static void test_reads_whose_map_cannot_be_allocated_say_out_of_memory(void)
{
  char dir[] = "/tmp/runnel-oomget28-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p;
  rn_rel *t;
  CHECK(open_state(dir, &p, &t) == 0);
  insert_big_row(p, t);
  msgpack_sbuffer k;
  key_map(&k, 1);
  const void *row = NULL;
  size_t len = 0;
  big_failed = 0;
  big_fails = 1;
  int rc = rn_get(p, t, k.data, k.size, &row, &len, NULL);
  big_fails = 0;
  CHECK(big_failed);
  if (rc != RN_ENOMEM) fprintf(stderr, "  rn_get: %d %s\n", rc, rn_errmsg(p));
  CHECK(rc == RN_ENOMEM && row == NULL);
  CHECK(strstr(rn_errmsg(p), "out of memory") != NULL);
  CHECK(rn_get(p, t, k.data, k.size, &row, &len, NULL) == 0 && row != NULL);
  rn_cursor *c;
  CHECK(rn_cursor_open(p, t, &c) == 0);
  uint64_t id;
  int done = 0;
  big_failed = 0;
  big_fails = 1;
  rc = rn_cursor_next(c, &row, &len, &id, &done);
  big_fails = 0;
  if (rc != RN_ENOMEM) fprintf(stderr, "  rn_cursor_next: %d %s\n", rc, rn_errmsg(p));
  CHECK(big_failed);
  CHECK(rc == RN_ENOMEM && row == NULL);
  CHECK(strcmp(rn_errmsg(p), "out of memory") == 0);
  rn_cursor_close(c);
  CHECK(rn_cursor_open(p, t, &c) == 0);
  CHECK(rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done && id == 1);
  rn_cursor_close(c);
  msgpack_sbuffer_destroy(&k);
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* ---- reads of derived relations, every allocation failing once ---- */

/* One read of what (0: rn_get of the top, 1: rn_get of the index, 2: the
 * top's rows, 3: the index's) into *rows (rows read; 1 for a get that
 * found its row). */
static int derived_read(rn_pipeline *p, int what, int *rows)
{
  rn_rel *r = rn_relation(p, what % 2 ? "ix" : "tp");
  static const unsigned char k[] = { 0x81, 0xa2, 'i', 'd', 9 }; /* { id = 9 }, in the top */
  const void *row = NULL;
  size_t len;
  uint64_t id;
  *rows = 0;
  int rc = 0;
  if (what < 2) {
    rc = rn_get(p, r, k, sizeof k, &row, &len, &id);
    *rows = row != NULL;
  } else {
    rn_cursor *c = NULL;
    int done = 0;
    rc = rn_cursor_open(p, r, &c);
    while (!rc && !(rc = rn_cursor_next(c, &row, &len, &id, &done)) && !done) ++*rows;
    rn_cursor_close(c);
  }
  return rc;
}

/* A top (2 per g) and an index of 9 rows in 3 groups g, each read with
 * the Nth allocation failing, for every N until none does. Regression:
 * the readers took a failed allocation for what the state holds: an
 * rn_get of the top or the index failed with RN_EINVAL, "tp: rn_get: a
 * keyless top has no key to read by" (the input's key could not be read,
 * so the reader opened keyless), with RN_ESCHEMA, "a store's description
 * could not be read", or RN_ESTORE, "a record … is malformed". Each read
 * now succeeds or fails with RN_ENOMEM, and the next one reads it all. */
static void test_derived_reads_with_each_allocation_failing(void)
{
  char dir[] = "/tmp/runnel-oomget28-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  static const rn_column_def gcols[] = { { .name = "id", .type = "int" }, { .name = "v", .type = "int" },
                                         { .name = "g", .type = "int" } };
  rn_open_opts o = { .path = dir };
  rn_pipeline *p;
  rn_rel *t, *x;
  char err[512] = "";
  CHECK(rn_pipeline_open(&o, &p, err, sizeof err) == 0);
  CHECK(rn_declare_table(p, "t", gcols, 3, key, 1, &t) == 0);
  rn_order_def by_v = { "v", 1 };
  rn_top_def top = { .n = 2, .order = &by_v, .norder = 1, .by = (const char *const[]){ "g" }, .nby = 1 };
  CHECK(rn_top_declare(p, "tp", t, &top, &x) == 0);
  CHECK(rn_index_declare(p, "ix", t, &by_v, 1, &x) == 0);
  for (int64_t i = 1; i <= 9; i++) {
    unsigned char row[] = { 0x83, 0xa2, 'i', 'd', (unsigned char)i, 0xa1, 'v', (unsigned char)(i * 3),
                            0xa1, 'g', (unsigned char)(i % 3) };
    CHECK(rn_insert(p, t, row, sizeof row) == 0);
  }
  static const int want[] = { 1, 1, 6, 9 };
  for (int what = 0; what < 4; what++) {
    int failures = 0;
    for (long n = 1; n < 10000; n++) {
      int rows;
      big_failed = 0;
      countdown = n;
      int rc = derived_read(p, what, &rows);
      countdown = 0;
      if (rc && rc != RN_ENOMEM) {
        if (failures++ < 3) fprintf(stderr, "  read %d, allocation %ld failing: %d %s\n", what, n, rc, rn_errmsg(p));
      }
      if (!rc && rows != want[what]) {
        if (failures++ < 3) fprintf(stderr, "  read %d, allocation %ld failing: %d rows\n", what, n, rows);
      }
      rc = derived_read(p, what, &rows);
      if (rc || rows != want[what])
        fprintf(stderr, "  read %d after allocation %ld failed: %d %s (%d rows)\n", what, n, rc, rn_errmsg(p), rows);
      CHECK(rc == 0 && rows == want[what]);
      if (!big_failed) break;
    }
    CHECK(failures == 0);
  }
  CHECK(rn_pipeline_close(p) == 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_get_whose_row_copy_fails);
  RUN(test_reads_whose_map_cannot_be_allocated_say_out_of_memory);
  RUN(test_derived_reads_with_each_allocation_failing);
  return CHECK_REPORT();
}
