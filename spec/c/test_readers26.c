/* test_readers26.c — readers in other processes and the writer's pages
 * (DESIGN 13: "stale LMDB reader slots are reclaimed"). A reader killed
 * inside its read transaction (kill -9: its slot in lock.mdb still names
 * the snapshot it read) must not keep a writer that is already open from
 * reusing the pages it freed since: the file would grow with every commit,
 * without bound. Each reader is a forked child reading through the public
 * rn_inspect, its callback stopped inside the read transaction; the
 * children report through pipes, not timing. */
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "child_fixture.h"
#include "attach_fixture.h"
#include "runnel.h"

static const rn_column_def cols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "string" } };
static const char *const key[] = { "k" };

#define VLEN 1500 /* a row of about a third of a page: each update copies a few pages */

/* {"k": k, "v": <VLEN bytes starting with tag in ten digits>} */
static int put(rn_pipeline *p, rn_rel *t, int k, unsigned tag)
{
  static char map[10 + 3 + 2 + VLEN];
  size_t n = 0;
  map[n++] = (char)0x82, map[n++] = (char)0xa1, map[n++] = 'k';
  map[n++] = (char)0xd1, map[n++] = (char)(k >> 8), map[n++] = (char)k; /* int 16 */
  map[n++] = (char)0xa1, map[n++] = 'v', map[n++] = (char)0xda;
  map[n++] = (char)(VLEN >> 8), map[n++] = (char)(VLEN & 0xff);
  memset(map + n, 'a' + (int)(tag % 26), VLEN);
  char digits[16];
  snprintf(digits, sizeof digits, "%010u", tag);
  memcpy(map + n, digits, 10);
  n += VLEN;
  return rn_upsert(p, t, map, n);
}

static long long file_size(const char *dir)
{
  char path[256];
  struct stat st;
  snprintf(path, sizeof path, "%s/data.mdb", dir);
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* n groups, one LMDB transaction each (carry_groups 1), over 8 rows. */
static int updates(rn_pipeline *p, rn_rel *t, int n, unsigned *tag)
{
  for (int i = 0; i < n; i++)
    if (put(p, t, 1 + i % 8, ++*tag)) return -1;
  return rn_flush(p);
}

/* The reader's callback: says it reads, then waits inside the read
 * transaction for what never comes (it is killed). */
typedef struct held { int said, wait; } held;
static int hold_here(void *ctx, const rn_inspect_relation *rel)
{
  held *h = ctx;
  (void)rel;
  char c = 'r';
  if (write(h->said, &c, 1) != 1) return 1;
  while (read(h->wait, &c, 1) != 0) { }
  return 1;
}

/* A child reading dir inside rn_inspect, stopped in its callback; its pid
 * once it reads (-1: it could not). It waits on *hold, the write end of a
 * pipe the caller closes once it was killed (so a failed test leaves no
 * process behind: its end closes when this process does). */
static pid_t reader_in_snapshot(const char *dir, int *hold)
{
  int said[2], wait_fds[2];
  if (pipe(said) || pipe(wait_fds)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(said[0]);
    close(wait_fds[1]);
    held h = { said[1], wait_fds[0] };
    rn_inspect_state st;
    rn_inspect(dir, hold_here, &h, &st, NULL, 0);
    _exit(1);
  }
  close(said[1]);
  close(wait_fds[0]);
  char c = 0;
  bool reading = pid > 0 && read(said[0], &c, 1) == 1 && c == 'r';
  close(said[0]);
  *hold = wait_fds[1];
  if (!reading && pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
  return reading ? pid : -1;
}

/* A writer open before a reader is killed inside its read transaction
 * still reuses the pages freed since that snapshot: the file stays within
 * a few pages of its size without the dead reader. */
static void test_killed_reader_does_not_grow_the_file(void)
{
  char dir[] = "/tmp/rn_readers26_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_open_opts o = { .path = dir, .nosync = 1, .carry_groups = 1 };
  rn_pipeline *p = NULL;
  rn_rel *t = NULL;
  unsigned tag = 0;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  CHECK(rn_declare_table(p, "t", cols, 2, key, 1, &t) == 0);
  CHECK(updates(p, t, 400, &tag) == 0); /* the file's steady size */
  long long before = file_size(dir);
  int hold = -1;
  pid_t reader = reader_in_snapshot(dir, &hold);
  CHECK(reader > 0);
  if (reader > 0) {
    kill(reader, SIGKILL);
    waitpid(reader, NULL, 0);
  }
  close(hold);
  CHECK(updates(p, t, 400, &tag) == 0);
  long long after = file_size(dir);
  if (after > before + 16 * 4096) fprintf(stderr, "data.mdb grew from %lld to %lld bytes\n", before, after);
  CHECK(before > 0 && after <= before + 16 * 4096);
  CHECK(rn_pipeline_close(p) == 0);
  remove_state(dir);
}

/* ---- whole groups only, across processes --------------------------------
 * A writer (a forked child) applies groups to table "m": row 0 counts the
 * groups committed, rows 1..10 hold 100 each and every group moves some
 * from one to another in two changes. Between them it rolls groups back
 * (by rn_rollback, and by a change that fails: a duplicate insert), each
 * after a half move and an insert of row 999. The parent reads the table
 * through an attach meanwhile: every read must find the rows summing to
 * 1000, no row 999, and the counter never going back. */
#define MOVES_ROWS 10

static int put_mv(rn_pipeline *p, rn_rel *t, int k, int64_t v, bool insert)
{
  char map[32];
  size_t n = 0;
  map[n++] = (char)0x82, map[n++] = (char)0xa1, map[n++] = 'k', map[n++] = (char)0xd1;
  map[n++] = (char)(k >> 8), map[n++] = (char)k;
  map[n++] = (char)0xa1, map[n++] = 'v', map[n++] = (char)0xd3;
  for (int i = 7; i >= 0; i--) map[n++] = (char)((uint64_t)v >> (8 * i));
  return insert ? rn_insert(p, t, map, n) : rn_upsert(p, t, map, n);
}

typedef struct seen {
  int64_t sum, counter, rows;
  bool stray;       /* row 999, or a row without k and v */
} seen;

static int see_row(void *ctx, uint64_t id, const char *row, size_t len)
{
  seen *s = ctx;
  (void)id;
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  int64_t k = -1, v = 0;
  if (msgpack_unpack_next(&u, row, len, NULL) == MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_ARRAY &&
      u.data.via.array.size == 2) { /* a stored row: its columns in order */
    msgpack_object *col = u.data.via.array.ptr;
    k = col[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)col[0].via.u64 : col[0].via.i64;
    v = col[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)col[1].via.u64 : col[1].via.i64;
  }
  msgpack_unpacked_destroy(&u);
  s->rows++;
  if (k == 0) s->counter = v;
  else if (k >= 1 && k <= MOVES_ROWS) s->sum += v;
  else s->stray = true;
  return 0;
}

typedef struct writer_opts { int write_back, carry_groups, writemap; size_t map_size; } writer_opts;

/* The child: groups until the parent closes its end of stop (or 200,000);
 * exit 0 when every call did what it should. */
static int write_moves(const char *dir, const writer_opts *wo, int ready, int stop)
{
  rn_open_opts o = { .path = dir, .nosync = 1, .carry_groups = wo->carry_groups, .write_back = wo->write_back,
                     .writemap = wo->writemap, .map_size = wo->map_size };
  rn_pipeline *p = NULL;
  rn_rel *m = NULL;
  if (rn_pipeline_open(&o, &p, NULL, 0)) return 1;
  rn_column_def mcols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "int" } };
  if (rn_declare_table(p, "m", mcols, 2, key, 1, &m)) return 2;
  if (rn_begin(p)) return 3;
  for (int k = 0; k <= MOVES_ROWS; k++)
    if (put_mv(p, m, k, k ? 100 : 0, false)) return 3;
  if (rn_commit(p) || rn_flush(p)) return 3;
  char c = 'r';
  if (write(ready, &c, 1) != 1) return 4;
  int64_t bal[MOVES_ROWS + 1] = { 0 }, groups = 0;
  for (int k = 1; k <= MOVES_ROWS; k++) bal[k] = 100;
  uint64_t rng = 12345;
  for (int i = 0; i < 200000; i++) {
    struct timeval none = { 0, 0 };
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(stop, &fds);
    if (select(stop + 1, &fds, NULL, NULL, &none) > 0) break; /* the parent is done reading */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    int a = 1 + (int)(rng % MOVES_ROWS), b = 1 + (int)((rng >> 8) % MOVES_ROWS);
    int64_t x = (int64_t)(rng >> 16) % 50;
    if (rn_begin(p)) return 5;
    if (put_mv(p, m, a, bal[a] - x, false)) return 6;
    if (i % 7 == 3) { /* half a move and a stray row, rolled back */
      if (put_mv(p, m, 999, 1, true) || rn_rollback(p)) return 7;
      continue;
    }
    if (i % 11 == 5) { /* the same, failed by a duplicate insert */
      if (put_mv(p, m, 999, 1, true)) return 8;
      if (put_mv(p, m, 1, 1, true) == 0) return 9;
      continue;
    }
    bal[a] -= x;
    bal[b] += x;
    if (put_mv(p, m, b, bal[b], false) || put_mv(p, m, 0, ++groups, false) || rn_commit(p)) return 10;
  }
  return rn_pipeline_close(p) ? 11 : 0;
}

/* Runs the writer beside the parent's reads until they have seen groups
 * commit (the counter change) news times (or the writer end), each read
 * whole; then the closed state is whole too. */
static void moves_read_whole(const writer_opts *wo, int news)
{
  char dir[] = "/tmp/rn_moves26_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  int ready[2], stop[2];
  CHECK(pipe(ready) == 0 && pipe(stop) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(stop[1]);
    _exit(write_moves(dir, wo, ready[1], stop[0]));
  }
  close(ready[1]);
  close(stop[0]);
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "m", NULL, &a, &e) == 0);
  int64_t last = 0;
  int reads = 0, changed = 0;
  bool torn = false, exited = false;
  int status = -1;
  for (int i = 0; a && changed < news && i < 1000000; i++) {
    if (i % 256 == 255 && waitpid(pid, &status, WNOHANG) == pid) { /* it failed, or wrote all its groups */
      exited = true;
      break;
    }
    seen s = { 0 };
    if (rn_attach_each(a, see_row, &s, &e)) { fprintf(stderr, "read %d: %s\n", i, e.msg); break; }
    if (s.sum != 100 * MOVES_ROWS || s.stray || s.counter < last || s.rows != MOVES_ROWS + 1) {
      fprintf(stderr, "read %d: sum %lld, counter %lld after %lld, %lld rows%s\n", i, (long long)s.sum,
              (long long)s.counter, (long long)last, (long long)s.rows, s.stray ? ", a stray row" : "");
      torn = true;
      break;
    }
    changed += s.counter != last;
    last = s.counter;
    reads++;
  }
  rn_attach_close(a);
  close(stop[1]); /* the writer stops */
  if (!exited) waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status)) fprintf(stderr, "writer: status %d\n", status);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(a && !torn);
  if (getenv("RN_TEST_VERBOSE")) fprintf(stderr, "%d of %d reads saw new groups; last %lld\n", changed, reads, (long long)last);
  close(ready[0]);
  /* and the state the writer closed holds every group it committed, whole */
  CHECK(rn_attach(dir, "m", NULL, &a, &e) == 0);
  seen s = { 0 };
  CHECK(a && rn_attach_each(a, see_row, &s, &e) == 0 && s.sum == 100 * MOVES_ROWS && !s.stray && s.counter >= last);
  rn_attach_close(a);
  remove_state(dir);
}

static void test_reads_see_whole_carried_groups(void)
{
  moves_read_whole(&(writer_opts){ .carry_groups = 4 }, 200);
}

static void test_reads_see_whole_groups_written_back(void)
{
  moves_read_whole(&(writer_opts){ .carry_groups = 16, .write_back = 1 }, 200);
}

static void test_reads_see_whole_groups_while_the_map_grows(void)
{
  moves_read_whole(&(writer_opts){ .carry_groups = 64, .map_size = 64 * 1024 }, 100);
  moves_read_whole(&(writer_opts){ .carry_groups = 8, .writemap = 1, .map_size = 256 * 1024 }, 100);
}

/* ---- a snapshot across a killed writer and the next ---------------------
 * The parent reads "m" in one read transaction; at its first row a writer
 * (forked before, waiting for a byte) carries groups with a stray row 999
 * in them and is killed with kill -9; the next writer opens and commits
 * groups one LMDB transaction each. The parent's read goes on in the
 * snapshot it began: whole, unchanged, none of it reused. */
static int open_m(const char *dir, int carry, rn_pipeline **p, rn_rel **m)
{
  rn_open_opts o = { .path = dir, .nosync = 1, .carry_groups = carry };
  rn_column_def mcols[] = { { .name = "k", .type = "int" }, { .name = "v", .type = "int" } };
  return rn_pipeline_open(&o, p, NULL, 0) || rn_declare_table(*p, "m", mcols, 2, key, 1, m);
}

/* The killed writer: carries 5 groups that insert row 999 and move 1 from
 * row 1 to row 2, says so, waits to be killed. */
static int carry_and_wait(const char *dir, int go, int said)
{
  char c;
  rn_pipeline *p = NULL;
  rn_rel *m = NULL;
  if (read(go, &c, 1) != 1 || open_m(dir, 256, &p, &m)) return 1;
  if (put_mv(p, m, 999, 1, true)) return 2;
  for (int i = 0; i < 5; i++)
    if (rn_begin(p) || put_mv(p, m, 1, 99 - i, false) || put_mv(p, m, 2, 101 + i, false) || rn_commit(p)) return 3;
  if (write(said, &c, 1) != 1) return 4;
  while (read(go, &c, 1) == 1) { } /* killed here (or the parent ended) */
  return 5;
}

/* The next writer: 300 groups, each its own LMDB transaction, each setting
 * every row to new values that still sum to 1000; then it closes. */
static int rewrite_all(const char *dir, int go, int said)
{
  char c;
  rn_pipeline *p = NULL;
  rn_rel *m = NULL;
  if (read(go, &c, 1) != 1 || open_m(dir, 1, &p, &m)) return 1;
  for (int i = 1; i <= 300; i++) {
    if (rn_begin(p)) return 2;
    for (int k = 1; k <= MOVES_ROWS; k++)
      if (put_mv(p, m, k, k == 1 ? 100 + i : k == 2 ? 100 - i : 100, false)) return 3;
    if (put_mv(p, m, 0, 1000 + i, false) || rn_commit(p)) return 4;
  }
  if (rn_pipeline_close(p)) return 5;
  return write(said, &c, 1) == 1 ? 0 : 6;
}

typedef struct across {
  seen s;
  helper killed, next;
  bool done, ok;
} across;

static int see_across(void *ctx, uint64_t id, const char *row, size_t len)
{
  across *x = ctx;
  if (!x->done) { /* the first row: both writers act now, inside this read */
    x->done = true;
    x->ok = helper_step(&x->killed);
    helper_end(&x->killed, true);
    x->ok = x->ok && helper_step(&x->next);
  }
  return see_row(&x->s, id, row, len);
}

static void test_snapshot_survives_a_killed_writer_and_the_next(void)
{
  char dir[] = "/tmp/rn_snap26_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = NULL;
  rn_rel *m = NULL;
  CHECK(open_m(dir, 1, &p, &m) == 0);
  for (int k = 0; k <= MOVES_ROWS; k++) CHECK(put_mv(p, m, k, k ? 100 : 7, false) == 0);
  CHECK(rn_pipeline_close(p) == 0);
  across x = { .killed = start_helper(carry_and_wait, dir), .next = start_helper(rewrite_all, dir) };
  CHECK(x.killed.pid > 0 && x.next.pid > 0);
  rn_attached *a = NULL;
  rn_err e = { 0 };
  CHECK(rn_attach(dir, "m", NULL, &a, &e) == 0);
  CHECK(a && rn_attach_each(a, see_across, &x, &e) == 0);
  CHECK(x.ok);
  CHECK(x.s.rows == MOVES_ROWS + 1 && x.s.sum == 100 * MOVES_ROWS && x.s.counter == 7 && !x.s.stray);
  int status = helper_end(&x.next, false);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  memset(&x.s, 0, sizeof x.s); /* a new read: the next writer's last group, nothing of the killed one's */
  CHECK(a && rn_attach_each(a, see_row, &x.s, &e) == 0);
  CHECK(x.s.rows == MOVES_ROWS + 1 && x.s.sum == 100 * MOVES_ROWS && x.s.counter == 1300 && !x.s.stray);
  rn_attach_close(a);
  remove_state(dir);
}

/* ---- a reader whose address space is limited ---------------------------
 * Under a limit on its address space (ulimit -v) a reader's environment
 * maps only the map data.mdb records when it opens. The writer, in another
 * process, grows the state past it: every read of the long-lived reader
 * failed with "MDB_MAP_RESIZED: Database contents grew beyond environment
 * mapsize", its attach and rn_inspect alike, until it closed them all. */
#include <sys/resource.h>

/* The limited reader's rn_inspect callback: at its first call (a read
 * transaction live) it says so and waits for the growth; a read of the
 * attach then cannot map the new size under it, and says what to do. */
typedef struct limited { rn_attached *a; int go, said, calls; char msg[1024]; } limited;

static int read_under_inspect(void *ctx, const rn_inspect_relation *rel)
{
  limited *l = ctx;
  (void)rel;
  if (l->calls++) return 0;
  char c = 'i';
  if (write(l->said, &c, 1) != 1 || read(l->go, &c, 1) != 1) return 1;
  rn_err e = { 0 };
  int n = 0;
  if (rn_attach_each(l->a, fixture_count_row, &n, &e) == 0) return 2; /* the map moved under the live read? */
  memcpy(l->msg, e.msg, sizeof l->msg < sizeof e.msg ? sizeof l->msg : sizeof e.msg);
  l->msg[sizeof l->msg - 1] = 0;
  return 0;
}

/* The limited reader: attaches "m", says how many rows it read, reads
 * inside rn_inspect across the growth (refused, saying why), then again
 * (and rn_inspect too); exit 0 when the reads after it read every row. */
static int limited_reader(const char *dir, int go, int said)
{
  struct rlimit lim = { (rlim_t)(vm_size() + (64L << 20)), (rlim_t)(vm_size() + (64L << 20)) };
  if (setrlimit(RLIMIT_AS, &lim) != 0) return 1;
  rn_attached *a = NULL;
  rn_err e = { 0 };
  if (rn_attach(dir, "m", NULL, &a, &e)) return fprintf(stderr, "  attach: %s\n", e.msg), 2;
  char c = (char)rows(a);
  if (write(said, &c, 1) != 1) return 3;
  limited l = { a, go, said, 0, "" };
  rn_inspect_state st;
  char err[512] = "";
  if (rn_inspect(dir, read_under_inspect, &l, &st, err, sizeof err)) return fprintf(stderr, "  inspect: %s\n", err), 4;
  if (!strstr(l.msg, "attach m: MDB_MAP_RESIZED: the state grew past the map this process's readers have, and it "
              "could not be taken again: a read of it is still open in this process"))
    return fprintf(stderr, "  under inspect: %s\n", l.msg), 5;
  int n = rows(a);
  if (rn_inspect(dir, NULL, NULL, &st, err, sizeof err)) return fprintf(stderr, "  inspect: %s\n", err), 6;
  rn_attach_close(a);
  if (n != 2000 + 100) return fprintf(stderr, "  rows after the growth: %d\n", n), 7;
  return st.seq >= 2 ? 0 : 8;
}

static int put_tagged(rn_pipeline *p, rn_rel *t, int k)
{
  return put(p, t, k, (unsigned)k);
}

static int fill_m(const char *dir, int from, int n)
{
  return fill_table_m(dir, from, n, put_tagged);
}

static void test_limited_reader_follows_a_growing_map(void)
{
  const char *pre = getenv("LD_PRELOAD");
  if (pre && strstr(pre, "vgpreload")) return; /* valgrind maps for its client itself: RLIMIT_AS does not hold */
  char dir[] = "/tmp/rn_limited26_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK(fill_m(dir, 0, 100) == 0); /* the file records a map of 1 MiB */
  helper r = start_helper(limited_reader, dir);
  char c = 0;
  CHECK(r.pid > 0 && read(r.said, &c, 1) == 1 && c == 100);
  CHECK(read(r.said, &c, 1) == 1 && c == 'i'); /* inside rn_inspect */
  CHECK(fill_m(dir, 100, 2000) == 0); /* about 4 MiB of rows: the map doubles past the reader's */
  CHECK(write(r.go, &c, 1) == 1);
  int status = helper_end(&r, false);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  remove_state(dir);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  RUN(test_killed_reader_does_not_grow_the_file);
  RUN(test_reads_see_whole_carried_groups);
  RUN(test_reads_see_whole_groups_written_back);
  RUN(test_reads_see_whole_groups_while_the_map_grows);
  RUN(test_snapshot_survives_a_killed_writer_and_the_next);
  RUN(test_limited_reader_follows_a_growing_map);
  return CHECK_REPORT();
}
