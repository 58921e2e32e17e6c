/* host.c — a small game server embedding runnel.
 *
 *     host [ticks] [changes_per_tick] [hz] [script] [carry_groups]
 *
 * A fixed-rate tick loop: each tick pushes changes_per_tick player and match
 * changes (score updates, guild moves, new players, matches) through the
 * pipeline that scripts/host/game.lua declares, in one group, and reads the
 * results through C subscriptions (the leaderboard join and the players'
 * CDC log). At the end it prints what it received and the per-tick latency
 * percentiles of the whole group (pushes and commit) and of the commit
 * alone. hz = 0 runs the ticks back to back (benchmarks); the state is
 * temporary, with sync = false. carry_groups bounds how many ticks share
 * one LMDB transaction (rn_open_opts; 0: the default): 1 spreads the LMDB
 * writes evenly over the ticks, a larger bound batches them. With a tick
 * rate, the host keeps a tick's writes in memory (write_back) and commits
 * them to LMDB in the idle time after the tick (rn_flush) when the next
 * tick is far enough away, so no tick pays for the LMDB writes;
 * back to back (hz = 0) the carry bounds decide. With RUNNEL_HOST_HASH set
 * in the environment it also prints a hash of every event its subscribers
 * received (a check that a change to runnel kept them byte for byte). With
 * RUNNEL_HOST_CONTROL set and a tick rate, it also runs a control tick in
 * each tick's idle time: arithmetic alone, calibrated to about
 * CONTROL_TICK_MS, timed the same way, so the report shows how often the
 * machine itself stretches a tick past 1 ms (make bench prints both).
 *
 * It uses runnel.h and msgpack-c only, as a host built against
 * `pkg-config --cflags --libs runnel` would. It builds under plain -std=c11;
 * clock_gettime and nanosleep are POSIX, asked for here. */
#define _POSIX_C_SOURCE 200809L
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runnel.h"

/* Seconds of idle time before the next tick in which the host commits the
 * carried LMDB transaction (rn_flush): the tick that would have ended it
 * pays nothing, and a crash loses at most the last tick. */
#define IDLE_FLUSH_SLACK 0.004

/* The control tick's length (RUNNEL_HOST_CONTROL): about a tick's. */
#define CONTROL_TICK_MS 0.4

typedef struct counts {
  long leaderboard[4];    /* by verb */
  long log_rows;
  int hashing;            /* RUNNEL_HOST_HASH set: hash every event */
  uint64_t hash;          /* FNV-1a of every event's fields and bytes, in order */
} counts;

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
  const unsigned char *b = data;
  for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

/* Folds an event into the hash: a check that what subscribers receive stays
 * the same byte for byte across versions (not needed by a real host). */
static void hash_event(counts *got, int which, const rn_event *ev)
{
  uint64_t head[5] = { (uint64_t)which, (uint64_t)ev->verb, ev->id, ev->seq, ev->n };
  uint64_t lens[2] = { ev->row ? ev->row_len : (uint64_t)-1, ev->old ? ev->old_len : (uint64_t)-1 };
  got->hash = fnv(got->hash, head, sizeof head);
  got->hash = fnv(got->hash, lens, sizeof lens);
  if (ev->row) got->hash = fnv(got->hash, ev->row, ev->row_len);
  if (ev->old) got->hash = fnv(got->hash, ev->old, ev->old_len);
}

static int on_leaderboard(void *ctx, const rn_event *ev)
{
  counts *got = ctx;
  got->leaderboard[ev->verb]++;
  if (got->hashing) hash_event(got, 0, ev);
  return 0;
}

static int on_log(void *ctx, const rn_event *ev)
{
  counts *got = ctx;
  got->log_rows++;
  if (got->hashing) hash_event(got, 1, ev);
  return 0;
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* This thread's CPU time: a tick slow by the clock but not by this was
 * preempted (other processes had the CPU), not slow itself. */
static double cpu_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 12345;
static uint64_t next(uint64_t n)
{
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (rng >> 33) % n;
}

typedef struct change { msgpack_sbuffer sb; msgpack_packer pk; } change;

static void kv_int(change *c, const char *k, int64_t v)
{
  msgpack_pack_str_with_body(&c->pk, k, strlen(k));
  msgpack_pack_int64(&c->pk, v);
}

static void kv_str(change *c, const char *k, const char *v)
{
  msgpack_pack_str_with_body(&c->pk, k, strlen(k));
  msgpack_pack_str_with_body(&c->pk, v, strlen(v));
}

/* The control tick: n steps of a generator that touches no memory, so
 * what stretches it is the machine (other processes, the hypervisor), not
 * caches or the allocator. Returns the last value (kept, so it runs). */
static uint64_t control_work(long n)
{
  uint64_t x = 88172645463325252ULL;
  for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

/* Steps of control_work that take about CONTROL_TICK_MS: the fastest of a
 * few timed tries (the least disturbed), scaled. */
static long control_steps(void)
{
  long n = 100000;
  double best = 1e9;
  volatile uint64_t keep = 0;
  for (int i = 0; i < 20; i++) {
    double t0 = now();
    keep ^= control_work(n);
    double dt = now() - t0;
    if (dt < best) best = dt;
  }
  (void)keep;
  return best > 0 ? (long)((double)n * CONTROL_TICK_MS / 1e3 / best) : n;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void report(const char *what, double *ms, int n)
{
  qsort(ms, (size_t)n, sizeof *ms, cmp_double);
  int over = 0;
  for (int i = 0; i < n; i++) over += ms[i] > 1.0;
  printf("%s_ms: p50 %.3f p99 %.3f max %.3f over_1ms %d\n", what, ms[n / 2],
         ms[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], ms[n - 1], over);
}

static int fail(rn_pipeline *p, const char *what)
{
  fprintf(stderr, "host: %s: %s\n", what, rn_errmsg(p));
  rn_pipeline_close(p);
  return 1;
}

int main(int argc, char **argv)
{
  int ticks = argc > 1 ? atoi(argv[1]) : 600;
  int per_tick = argc > 2 ? atoi(argv[2]) : 300;
  double hz = argc > 3 ? atof(argv[3]) : 60;
  const char *script = argc > 4 ? argv[4] : "scripts/host/game.lua";
  if (ticks < 1 || per_tick < 1) {
    fprintf(stderr, "usage: host [ticks] [changes_per_tick] [hz] [script] [carry_groups]\n");
    return 2;
  }

  /* With a tick rate there is idle time after each tick: the tick keeps its
   * writes in memory (write-back, read-your-writes) and the commit in the
   * idle time writes them to LMDB, so the B-tree writes and page copies
   * leave the tick (about a quarter of its instructions). Back to back
   * there is no idle time, and the commit that ends a carried transaction
   * would write 256 ticks' keys at once: write-back stays off. */
  rn_open_opts opts = { .nosync = 1, .carry_groups = argc > 5 ? atoi(argv[5]) : 0, .write_back = hz > 0 ? 1 : -1 };
  rn_pipeline *p;
  char err[512];
  if (rn_pipeline_open(&opts, &p, err, sizeof err)) { fprintf(stderr, "host: %s\n", err); return 1; }
  if (rn_run_lua(p, NULL, script)) return fail(p, script);
  /* The relations the host uses, by name: one the script does not declare
   * is said by name (runnel itself would only see a NULL relation). */
  static const char *const used[] = { "players", "guilds", "matches", "leaderboard", "player_log" };
  rn_rel *rels[5];
  for (int i = 0; i < 5; i++)
    if (!(rels[i] = rn_relation(p, used[i]))) {
      fprintf(stderr, "host: %s declares no relation \"%s\"\n", script, used[i]);
      rn_pipeline_close(p);
      return 1;
    }
  rn_rel *players = rels[0], *guilds = rels[1], *matches = rels[2];
  counts got = { { 0 }, 0, getenv("RUNNEL_HOST_HASH") != NULL, 0xcbf29ce484222325ULL };
  if (rn_subscribe(p, rels[3], on_leaderboard, &got) || rn_subscribe(p, rels[4], on_log, &got))
    return fail(p, "subscribe");

  change c;
  msgpack_sbuffer_init(&c.sb);
  msgpack_packer_init(&c.pk, &c.sb, msgpack_sbuffer_write);
  char name[32];
  for (int g = 1; g <= 20; g++) { /* the world before the first tick */
    msgpack_sbuffer_clear(&c.sb);
    msgpack_pack_map(&c.pk, 2);
    kv_int(&c, "id", g);
    snprintf(name, sizeof name, "guild%d", g);
    kv_str(&c, "name", name);
    if (rn_insert(p, guilds, c.sb.data, c.sb.size)) return fail(p, "guild");
  }
  int nplayers = 0;
  long match_id = 0;
  double *group_ms = malloc(sizeof *group_ms * (size_t)ticks), *commit_ms = malloc(sizeof *commit_ms * (size_t)ticks);
  double *cpu_ms = malloc(sizeof *cpu_ms * (size_t)ticks);
  long control = hz > 0 && getenv("RUNNEL_HOST_CONTROL") ? control_steps() : 0;
  double *control_ms = malloc(sizeof *control_ms * (size_t)ticks);
  if (!group_ms || !commit_ms || !cpu_ms || !control_ms) {
    fprintf(stderr, "host: out of memory for %d ticks' timings\n", ticks);
    return fail(p, "timings");
  }
  int controls = 0;
  volatile uint64_t control_keep = 0;
  int preempted = 0; /* ticks over 1 ms by the clock, under it in CPU time */
  int idle_flushes = 0;
  double start = now();
  for (int t = 0; t < ticks; t++) {
    if (hz > 0) { /* the fixed rate: wait for this tick's moment */
      double due = start + t / hz, wait = due - now();
      if (wait > 0) nanosleep(&(struct timespec){ (time_t)wait, (long)((wait - (time_t)wait) * 1e9) }, NULL);
    }
    double t0 = now(), c0 = cpu_now();
    if (rn_begin(p)) return fail(p, "begin");
    for (int i = 0; i < per_tick; i++) {
      msgpack_sbuffer_clear(&c.sb);
      uint64_t r = next(100);
      int rc;
      if (nplayers < 50 || r < 10) {        /* a player joins */
        nplayers++;
        msgpack_pack_map(&c.pk, 3);
        kv_int(&c, "id", nplayers);
        snprintf(name, sizeof name, "p%d", nplayers);
        kv_str(&c, "name", name);
        kv_int(&c, "guild", (int64_t)next(20) + 1);
        rc = rn_insert(p, players, c.sb.data, c.sb.size);
      } else if (r < 70) {                  /* a score changes */
        msgpack_pack_map(&c.pk, 2);
        kv_int(&c, "id", (int64_t)next((uint64_t)nplayers) + 1);
        kv_int(&c, "score", (int64_t)next(100000));
        rc = rn_update(p, players, c.sb.data, c.sb.size);
      } else if (r < 80) {                  /* someone changes guild */
        msgpack_pack_map(&c.pk, 2);
        kv_int(&c, "id", (int64_t)next((uint64_t)nplayers) + 1);
        kv_int(&c, "guild", (int64_t)next(22) + 1); /* 21 and 22 do not exist */
        rc = rn_update(p, players, c.sb.data, c.sb.size);
      } else {                              /* a match is recorded */
        msgpack_pack_map(&c.pk, 3);
        kv_int(&c, "id", ++match_id);
        kv_int(&c, "player", (int64_t)next((uint64_t)nplayers) + 1);
        kv_int(&c, "points", (int64_t)next(10));
        rc = rn_insert(p, matches, c.sb.data, c.sb.size);
      }
      if (rc) return fail(p, "push");
    }
    double t1 = now();
    if (rn_commit(p)) return fail(p, "commit");
    double t2 = now();
    cpu_ms[t] = (cpu_now() - c0) * 1e3;
    group_ms[t] = (t2 - t0) * 1e3;
    preempted += group_ms[t] > 1.0 && cpu_ms[t] <= 1.0;
    if (hz > 0 && start + (t + 1) / hz - now() > IDLE_FLUSH_SLACK) { /* idle until the next tick */
      if (rn_flush(p)) return fail(p, "flush");
      idle_flushes++;
    }
    commit_ms[t] = (t2 - t1) * 1e3;
    if (control && start + (t + 1) / hz - now() > 2 * CONTROL_TICK_MS / 1e3) { /* idle: the control tick */
      double c1 = now();
      control_keep ^= control_work(control);
      control_ms[controls++] = (now() - c1) * 1e3;
    }
  }
  printf("ticks: %d, changes per tick: %d, hz: %g\n", ticks, per_tick, hz);
  printf("players: %d, matches: %ld, last group: %llu\n", nplayers, match_id, (unsigned long long)rn_seq(p));
  printf("leaderboard: %ld inserts, %ld updates, %ld deletes; player log rows: %ld\n",
         got.leaderboard[RN_VERB_INSERT], got.leaderboard[RN_VERB_UPDATE], got.leaderboard[RN_VERB_DELETE],
         got.log_rows);
  if (got.hashing) printf("events hash: %016llx\n", (unsigned long long)got.hash);
  report("group", group_ms, ticks);
  report("commit", commit_ms, ticks);
  report("group_cpu", cpu_ms, ticks);
  printf("ticks_over_1_ms: %d preempted (under 1 ms of CPU); idle flushes: %d\n", preempted, idle_flushes);
  if (controls) report("control", control_ms, controls);
  (void)control_keep;
  free(control_ms);
  free(cpu_ms);
  free(group_ms);
  free(commit_ms);
  msgpack_sbuffer_destroy(&c.sb);
  rn_pipeline_close(p);
  return 0;
}
