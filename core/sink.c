/* sink.c — the group's logs and their delivery to sinks.
 *
 * A relation keeps a log of its changes in the open group only while some
 * sink listens to it. At commit every sink, in registration order, gets its
 * relation's log: as made, or consolidated to one net change per row id.
 *
 * Phases of a group's delivery (rn_sinks_deliver), each over every sink in
 * registration order: on_change per change, on_commit, on_seal (external
 * commits). Invariant (SINKS-1): a sink any phase reached for the group has
 * on_done called once the group ended, committed or not, wherever the
 * failure was (a sink before or after it, any phase, LMDB's commit); a
 * rolled-back notice is where a sink drops what it buffered.
 *
 * Invariant (SINKS-2): with sync = false a group is told committed while
 * carried, before LMDB holds it. When the carried transaction's commit
 * fails (a full disk), those groups are lost and their seqs are given
 * again; a sink with on_lost (a rollback notice: Lua's rollback, a C
 * subscriber's on_rollback) hears of each carried group it saw, newest
 * first, so that it never holds a group the state lost, nor takes the next
 * group under a seq it saw as another's. Sinks that write into LMDB's
 * transaction (stores) lose their writes with it and have no on_lost.
 *
 * Invariant (SINKS-3): a sink sees each change of a committed group once,
 * or hears the group rolled back before it sees it again. When the map
 * fills in the sink phase the group runs again (group.c, GROUP-5). A sink
 * told of rollbacks (on_lost) hears it rolled back and gets it again
 * whole; so does one writing into LMDB's transaction (on_replay: its
 * writes went with it). Any other cannot be told: it resumes after the
 * changes and phases it took (the group runs again from the same source
 * changes, so its changes are the same ones, in the same order). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline.h"

int rn_sink_add(rn_pipeline *p, rn_rel *rel, bool consolidate, rn_sink_fn on_change,
                rn_sink_commit_fn on_commit, void *ctx, rn_free_fn free_ctx)
{
  if (p->state != RN_IDLE) {
    if (free_ctx) free_ctx(ctx);
    return rn_err_set(&p->err, RN_EMISUSE, "%s: sinks are added outside groups", rel->name);
  }
  if (rel->p != p) { /* every kind of sink: C, NDJSON, SQLite, store */
    if (free_ctx) free_ctx(ctx);
    return rn_err_set(&p->err, RN_EINVAL, "%s: the relation belongs to another pipeline", rel->name);
  }
  /* a sink of the group's phases only (the JetStream source's keeper, on
   * the first relation) reads no change: any relation holds it */
  if (on_change && rn_check_not_lookup(p, rel->name, "sink", rel)) {
    if (free_ctx) free_ctx(ctx);
    return p->err.code;
  }
  rn_sink *s = calloc(1, sizeof *s);
  if (s && p->nsinks == p->sinkcap) {
    int cap = p->sinkcap ? p->sinkcap * 2 : 8;
    rn_sink **a = realloc(p->sinks, (size_t)cap * sizeof *a);
    if (a) { p->sinks = a; p->sinkcap = cap; }
  }
  if (!s || p->nsinks == p->sinkcap) {
    free(s);
    if (free_ctx) free_ctx(ctx);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  *s = (rn_sink){ .rel = rel, .consolidate = consolidate, .on_change = on_change, .on_commit = on_commit,
                  .ctx = ctx, .free_ctx = free_ctx };
  p->sinks[p->nsinks++] = s;
  rel->listeners++;
  return 0;
}

int rn_change_keep(rn_pipeline *p, msgpack_zone *z, const rn_change *c, rn_change *dst)
{
  *dst = *c;
  if (c->row && !(dst->row = rn_zone_malloc_no_align(z, c->row_len)))
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (c->old && !(dst->old = rn_zone_malloc_no_align(z, c->old_len)))
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (c->row) memcpy((char *)dst->row, c->row, c->row_len);
  if (c->old) memcpy((char *)dst->old, c->old, c->old_len);
  return 0;
}

int rn_log_append(rn_pipeline *p, rn_rel *rel, const rn_change *c)
{
  if (p->replaying) return 0; /* a carried group's changes were delivered */
  rn_log *log = &rel->log;
  if (log->n == log->cap) {
    size_t cap = log->cap ? log->cap * 2 : 64;
    rn_change *items = realloc(log->items, cap * sizeof *items);
    if (!items) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    log->items = items;
    log->cap = cap;
  }
  int rc = rn_change_keep(p, &p->group_zone, c, &log->items[log->n]);
  if (rc) return rc;
  log->n++;
  return 0;
}

size_t rn_log_net(const rn_log *log, rn_net *out, size_t *owner)
{
  size_t cap = 16;
  while (cap < log->n * 2) cap *= 2;
  size_t *slot = calloc(cap, sizeof *slot); /* hash of id -> entry index + 1 */
  size_t n = 0;
  if (!slot) return (size_t)-1;
  for (size_t i = 0; i < log->n; i++) {
    const rn_change *c = &log->items[i];
    size_t h = (size_t)(c->id * 0x9E3779B97F4A7C15ULL) & (cap - 1);
    while (slot[h] && out[slot[h] - 1].id != c->id) h = (h + 1) & (cap - 1);
    if (!slot[h]) {
      slot[h] = ++n;
      out[n - 1] = (rn_net){ c->id, c->old, c->old_len, NULL, 0 };
    }
    out[slot[h] - 1].after = c->row;
    out[slot[h] - 1].after_len = c->row_len;
    if (owner) owner[i] = slot[h] - 1;
  }
  free(slot);
  return n;
}

/* Nets a log per row id, ids in the order first touched:
 *     before the group   after it    net
 *     absent             absent      nothing   (insert+delete)
 *     absent             row         INSERT    (insert+update …)
 *     row                absent      DELETE of the row before the group
 *     row                same row    nothing
 *     row                other row   UPDATE from the row before (delete+re-insert too)
 * Returns the number of net changes written to out (sized log->n). */
static size_t consolidate(const rn_log *log, rn_change *out)
{
  rn_net *net = malloc(log->n * sizeof *net);
  size_t n = net ? rn_log_net(log, net, NULL) : (size_t)-1;
  if (n == (size_t)-1) { free(net); return n; }
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    const rn_net *e = &net[i];
    rn_change c = { 0, e->id, e->after, e->after_len, e->before, e->before_len };
    if (!c.old && !c.row) continue;
    if (c.old && c.row) {
      if (c.old_len == c.row_len && memcmp(c.old, c.row, c.row_len) == 0) continue;
      c.verb = RN_UPDATE;
    } else {
      c.verb = c.row ? RN_INSERT : RN_DELETE;
    }
    out[kept++] = c;
  }
  free(net);
  return kept;
}

size_t rn_log_consolidated(const rn_log *log, rn_change *out)
{
  return consolidate(log, out);
}

rn_log rn_log_own(const rn_rel *rel, uint64_t holds_told, uint64_t seq)
{
  size_t skip = holds_told && holds_told == seq && rel->log_told <= rel->log.n ? rel->log_told : 0;
  return (rn_log){ skip ? rel->log.items + skip : rel->log.items, rel->log.n - skip, 0 }; /* items may be NULL */
}

/* SINKS-3: whether s resumes a group run again rather than get it whole. */
static bool resumes(const rn_sink *s)
{
  return !s->on_lost && !s->on_replay;
}

/* A sink's call returned rc: 0 when it took its change or phase
 * (SINKS-3). Not when the map filled during it (a read that wrote the
 * write-back layer's entries: rn_group_check_store): what it read was
 * refused, so it gets that call again when the group runs again, and no
 * sink is called before. */
static int after_call(rn_pipeline *p, int rc)
{
  return rc ? rc : rn_group_check_store(p, 0);
}

static void forget_took(rn_sink *s)
{
  s->took = 0;
  s->took_commit = s->took_seal = false;
}

static int deliver_one(rn_pipeline *p, rn_sink *s, uint64_t seq)
{
  rn_log own = rn_log_own(s->rel, s->holds_told, seq);
  const rn_log *log = &own;
  const rn_change *items = log->items;
  size_t n = log->n;
  rn_change *net = NULL;
  if (s->consolidate && n) {
    net = malloc(n * sizeof *net);
    n = net ? consolidate(log, net) : (size_t)-1;
    if (n == (size_t)-1) { free(net); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
    items = net;
  }
  int rc = 0;
  if (n && s->on_change) s->delivered = true; /* it holds part of the group from here (SINKS-1) */
  for (size_t i = s->took; i < n && !rc && s->on_change; i++) { /* after what it took (SINKS-3) */
    rn_sink_info info = { items[i].id, seq, i + 1 };
    rc = after_call(p, s->on_change(s->ctx, s->rel, &items[i], &info, &p->err));
    if (!rc) s->took = i + 1;
  }
  free(net);
  return rc;
}

int rn_sinks_deliver(rn_pipeline *p, uint64_t seq)
{
  for (int i = 0; i < p->nsinks; i++) {
    int rc = deliver_one(p, p->sinks[i], seq);
    if (rc) return rc;
  }
  for (int i = 0; i < p->nsinks; i++) { /* every sink saw the group: now they may act on it */
    rn_sink *s = p->sinks[i];
    if (!s->on_commit || s->took_commit) continue;
    s->delivered = true;
    int rc = after_call(p, s->on_commit(s->ctx, seq, &p->err));
    if (rc) return rc;
    s->took_commit = true;
  }
  for (int i = 0; i < p->nsinks; i++) { /* every sink accepted it: external commits */
    rn_sink *s = p->sinks[i];
    if (!s->on_seal || s->took_seal) continue;
    s->delivered = true;
    int rc = after_call(p, s->on_seal(s->ctx, seq, &p->err));
    if (rc) return rc;
    s->took_seal = true;
  }
  return 0;
}

void rn_sink_set_hooks(rn_pipeline *p, rn_sink_commit_fn on_seal, rn_sink_done_fn on_done)
{
  if (!p->nsinks) return;
  p->sinks[p->nsinks - 1]->on_seal = on_seal;
  p->sinks[p->nsinks - 1]->on_done = on_done;
}

void rn_sink_set_carry(rn_pipeline *p, int (*on_replay)(void *ctx, rn_err *e), void (*on_forget)(void *ctx))
{
  if (!p->nsinks) return;
  p->sinks[p->nsinks - 1]->on_replay = on_replay;
  p->sinks[p->nsinks - 1]->on_forget = on_forget;
}

void rn_sink_set_lost(rn_pipeline *p, void (*on_lost)(void *ctx, uint64_t seq))
{
  if (p->nsinks) p->sinks[p->nsinks - 1]->on_lost = on_lost;
}

void rn_sink_set_holds_told(rn_pipeline *p)
{
  if (p->nsinks) p->sinks[p->nsinks - 1]->holds_told = p->seq + 1;
}

void rn_sinks_carried(rn_pipeline *p, uint64_t seq)
{
  for (int i = 0; i < p->nsinks; i++) {
    rn_sink *s = p->sinks[i];
    if (!s->on_lost || !s->delivered || s->told_all_from) continue;
    if (s->ntold == s->told_cap) {
      size_t cap = s->told_cap ? s->told_cap * 2 : 16;
      uint64_t *a = realloc(s->told, cap * sizeof *a);
      if (!a) { /* the group stands: if it is lost, tell the sink of it and every later one */
        s->told_all_from = seq;
        continue;
      }
      s->told = a;
      s->told_cap = cap;
    }
    s->told[s->ntold++] = seq;
  }
}

void rn_sinks_lost(rn_pipeline *p, uint64_t last)
{
  uint64_t first = last;
  for (int i = 0; i < p->nsinks; i++) {
    rn_sink *s = p->sinks[i];
    if (s->ntold && s->told[0] < first) first = s->told[0];
    if (s->told_all_from && s->told_all_from < first) first = s->told_all_from;
  }
  for (uint64_t seq = last; seq >= first && seq > 0; seq--) {
    for (int k = p->nsinks - 1; k >= 0; k--) { /* as a rollback: in reverse order */
      rn_sink *s = p->sinks[k];
      bool saw = s->ntold && s->told[s->ntold - 1] == seq;
      if (saw) s->ntold--;
      if (saw || (s->told_all_from && seq >= s->told_all_from)) s->on_lost(s->ctx, seq);
    }
  }
}

int rn_sinks_replay(rn_pipeline *p)
{
  for (int i = 0; i < p->nsinks; i++) {
    rn_sink *s = p->sinks[i];
    int rc = s->on_replay ? s->on_replay(s->ctx, &p->err) : 0;
    if (rc) return rc;
  }
  return 0;
}

void rn_sinks_forget(rn_pipeline *p)
{
  for (int i = 0; i < p->nsinks; i++) {
    rn_sink *s = p->sinks[i];
    if (s->on_forget) s->on_forget(s->ctx);
    s->ntold = 0; /* LMDB holds what they saw, or rn_sinks_lost told them */
    s->told_all_from = 0;
  }
}

void rn_sinks_done(rn_pipeline *p, uint64_t seq, bool committed)
{
  for (int k = 0; k < p->nsinks; k++) { /* a rollback undoes in reverse order */
    rn_sink *s = p->sinks[committed ? k : p->nsinks - 1 - k];
    if (s->delivered && s->on_done) s->on_done(s->ctx, seq, committed);
    s->delivered = false;
    forget_took(s);
  }
}

void rn_sinks_redo(rn_pipeline *p, uint64_t seq)
{
  for (int k = p->nsinks - 1; k >= 0; k--) { /* as a rollback */
    rn_sink *s = p->sinks[k];
    if (resumes(s)) continue; /* it keeps what it took */
    if (s->delivered && s->on_done) s->on_done(s->ctx, seq, false);
    s->delivered = false;
    forget_took(s);
  }
}

void rn_logs_clear(rn_pipeline *p)
{
  for (int i = 0; i < p->nrels; i++) p->rels[i]->log.n = p->rels[i]->log_told = 0;
  msgpack_zone_clear(&p->group_zone);
}

const char *rn_sink_path_kind(const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return NULL; /* a path that cannot be read is the open's to report */
  if (S_ISFIFO(st.st_mode)) return "a FIFO (a pipe)";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (!S_ISCHR(st.st_mode)) return "a special file";
  int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  bool tty = fd >= 0 && isatty(fd);
  if (fd >= 0) close(fd);
  return tty ? "a terminal" : "a character device";
}
