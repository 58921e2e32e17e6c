/* test_wb_room.c — the write-back layer's cache (core/wb.c) keeps its
 * entries across commits, so its hash table fills over many small
 * transactions; doubling it rehashes every entry at once. The table must
 * grow at the commit (a host's idle time), not in the group that crosses
 * the line: after each commit it takes the next transaction's entries. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "store.h"
#include "wb.h"
#include "wb_fixture.h"

#define PER_TXN 100

static void test_room_after_each_commit(void)
{
  char dir[] = "/tmp/rn_wb_roomXXXXXX";
  rn_store s;
  rn_err e = { 0 };
  MDB_dbi dbi;
  wb_store_open(&s, dir, &dbi);
  int short_of_room = 0;
  for (int t = 0; t < 300 && !check_failed_now; t++) { /* 30,000 keys: the table doubles 7 times */
    CHECK(rn_store_begin(&s, &e) == 0);
    for (int i = 0; i < PER_TXN; i++) {
      char key[16], val[8] = "v";
      int n = snprintf(key, sizeof key, "k%07d", t * PER_TXN + i);
      MDB_val k = { (size_t)n, key }, v = { sizeof val, val };
      CHECK(rn_wb_put(&s, s.wtxn, dbi, &k, &v, 0) == 0);
    }
    CHECK(rn_store_commit_keep(&s, &e) == 0);
    if (rn_wb_room(&s, dbi) < PER_TXN) short_of_room++;
  }
  CHECK(short_of_room == 0);
  if (short_of_room) fprintf(stderr, "  %d commits left no room for the next %d entries\n", short_of_room, PER_TXN);
  CHECK(rn_wb_bytes(&s) > 0); /* the entries stayed as a cache */
  wb_store_close(&s, dir);
}

int main(void)
{
  RUN(test_room_after_each_commit);
  return CHECK_REPORT();
}
