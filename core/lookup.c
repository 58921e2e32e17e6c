/* lookup.c — lookups: rows fetched on demand through a cache.
 *
 * A lookup is a keyed relation whose rows live elsewhere (a Lua function,
 * a SQLite table, another state's store). Joined as a right side, each left
 * change asks it for one key:
 *
 *   in the cache and fetched less than ttl seconds ago (by the pipeline's
 *   clock; the age counts from the fetch, not the last use; a clock now
 *   before the fetch makes it stale)  -> a hit;
 *   otherwise the source is asked (a miss) and the answer cached — "no
 *   row" too when missing = true. Without a cache every lookup asks.
 *
 * The cache holds at most `size` entries; the least recently used goes
 * first (an eviction). It is memory only: rebuildable, never state.
 *
 * The answers the changes of the open LMDB transaction got are kept in
 * order (the answer log): when a group rolls back, the carried groups
 * before it are applied again (group.c, restart), and they must get the
 * answers they got the first time, not the source's answers of now. A
 * source that answered otherwise would give the state a result its sinks
 * were never told of, under an id the carried groups' counters then give
 * again. */
#include "lookup.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "key.h"
#include "ops.h"
#include "row.h"

typedef struct centry {
  char *key;              /* encoded key, owned */
  size_t klen;
  uint64_t hash;
  char *row;              /* owned; NULL: the source had no row */
  size_t rlen;
  double fetched;         /* clock time of the fetch */
  struct centry *prev, *next; /* recency: head is the most recent */
  struct centry *chain;   /* the bucket's next entry */
} centry;

typedef struct rn_lookup {
  rn_rel *rel;
  rn_lookup_fetch fetch;
  void *ctx;
  rn_free_fn free_ctx;
  rn_lookup_opts o;
  centry **buckets;
  size_t nbuckets, n;
  centry *head, *tail;
  rn_lookup_stats st;
  msgpack_sbuffer buf;
  msgpack_sbuffer answers; /* the answer log: |klen u32|key|found u8|rlen u32|row| per answer */
  size_t answers_mark;     /* its size when the open group began */
  size_t answers_at;       /* where a re-application reads next */
  size_t answers_enter;    /* its size when the change being applied began (group.c) */
  bool retrying;           /* a change retried after the map grew reads the answers it got before (from
                              answers_at, past the replayed changes' own), then asks and logs anew */
} rn_lookup;

static double monotonic(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The pipeline's time; a user clock may fail (the lookup fails with it). */
static int now(rn_pipeline *p, double *t)
{
  if (!p->clock) { *t = monotonic(); return 0; }
  return p->clock(p->clock_ctx, t, &p->err);
}

static void unlink_lru(rn_lookup *lk, centry *c)
{
  if (c->prev) c->prev->next = c->next; else lk->head = c->next;
  if (c->next) c->next->prev = c->prev; else lk->tail = c->prev;
  c->prev = c->next = NULL;
}

static void push_front(rn_lookup *lk, centry *c)
{
  c->next = lk->head;
  c->prev = NULL;
  if (lk->head) lk->head->prev = c;
  lk->head = c;
  if (!lk->tail) lk->tail = c;
}

static void free_entry(centry *c)
{
  free(c->key);
  free(c->row);
  free(c);
}

static void evict_tail(rn_lookup *lk)
{
  centry *c = lk->tail;
  unlink_lru(lk, c);
  for (centry **at = &lk->buckets[c->hash & (lk->nbuckets - 1)]; *at; at = &(*at)->chain)
    if (*at == c) { *at = c->chain; break; }
  free_entry(c);
  lk->n--;
  lk->st.evictions++;
}

static centry *find(rn_lookup *lk, const char *key, size_t klen, uint64_t h)
{
  for (centry *c = lk->buckets[h & (lk->nbuckets - 1)]; c; c = c->chain)
    if (c->hash == h && c->klen == klen && memcmp(c->key, key, klen) == 0) return c;
  return NULL;
}

/* Stores an answer for key (replacing a stale one). */
static int remember(rn_lookup *lk, centry *c, const char *key, size_t klen, uint64_t h, const char *row,
                    size_t rlen, double t)
{
  char *copy = row ? malloc(rlen ? rlen : 1) : NULL;
  if (row && !copy) return -1;
  if (row) memcpy(copy, row, rlen);
  if (!c) {
    if (!(c = calloc(1, sizeof *c)) || !(c->key = malloc(klen))) { free(c); free(copy); return -1; }
    memcpy(c->key, key, klen);
    c->klen = klen;
    c->hash = h;
    c->chain = lk->buckets[h & (lk->nbuckets - 1)];
    lk->buckets[h & (lk->nbuckets - 1)] = c;
    lk->n++;
  } else {
    unlink_lru(lk, c);
    free(c->row);
  }
  c->row = copy;
  c->rlen = rlen;
  c->fetched = t;
  push_front(lk, c);
  while (lk->n > lk->o.size) evict_tail(lk);
  return 0;
}

/* The key of kv (the key columns' values), as rn_key_format writes it. */
static void key_text(const rn_schema *s, const msgpack_object *kv, char *buf, size_t len)
{
  msgpack_object vals[s->ncols];
  for (int i = 0; i < s->nkey; i++) vals[s->key_slots[i]] = kv[i];
  rn_key_format(s, vals, buf, len);
}

void rn_lookup_bad_row(const rn_rel *lk, const msgpack_object *key, rn_err *e)
{
  char asked[256], what[sizeof e->msg];
  key_text(lk->schema, key, asked, sizeof asked);
  size_t nl = strlen(lk->name);
  const char *m = e->msg;
  if (strncmp(m, lk->name, nl) == 0 && m[nl] == ':' && m[nl + 1] == ' ') m += nl + 2;
  snprintf(what, sizeof what, "%s", m);
  rn_err_set(e, e->code ? e->code : RN_EINVAL, "%s: source returned a bad row for key (%s): %s", lk->name, asked, what);
}

/* The row a source found (lk->buf) must be the key's asked: one of another
 * key would be joined, and cached, under the key asked. Compared encoded,
 * so 7.0 given for the int key 7 is the same key. */
static int check_row_key(rn_lookup *lk, const char *key, size_t klen, const msgpack_object *kv)
{
  rn_rel *rel = lk->rel;
  rn_pipeline *p = rel->p;
  const rn_schema *s = rel->schema;
  const msgpack_object *vals = rn_row_unpack(lk->buf.data, lk->buf.size, s->ncols, &p->scratch);
  if (!vals) return rn_err_set(&p->err, RN_ESTORE, "%s: a row its source returned could not be decoded", rel->name);
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  bool same = rn_key_encode(s, vals, &b) == 0 && b.size == klen && memcmp(b.data, key, klen) == 0;
  msgpack_sbuffer_destroy(&b);
  if (same) return 0;
  char got[256];
  rn_key_format(s, vals, got, sizeof got);
  rn_err_set(&p->err, RN_EINVAL, "%s: its key is (%s)", rel->name, got);
  rn_lookup_bad_row(rel, kv, &p->err);
  return p->err.code;
}

/* Appends an answer (row NULL: none) to lk's log; -1 when out of memory. */
static int log_answer(rn_lookup *lk, const char *key, size_t klen, const char *row, size_t rlen)
{
  uint32_t kl = (uint32_t)klen, rl = row ? (uint32_t)rlen : 0;
  unsigned char found = row != NULL;
  msgpack_sbuffer *b = &lk->answers;
  return msgpack_sbuffer_write(b, (const char *)&kl, 4) || msgpack_sbuffer_write(b, key, klen) ||
                 msgpack_sbuffer_write(b, (const char *)&found, 1) || msgpack_sbuffer_write(b, (const char *)&rl, 4) ||
                 (rl && msgpack_sbuffer_write(b, row, rl))
             ? -1
             : 0;
}

static int lookup_get(rn_lookup *lk, rn_rel *rel, const char *key, size_t klen, const char **row, size_t *len);

/* While logged changes are applied again: the next logged answer, when it
 * was for key (1; *row NULL for none); 0 when the log has none for it here
 * (the source is asked, as the first time). */
static int logged_answer(rn_lookup *lk, const char *key, size_t klen, const char **row, size_t *len)
{
  const msgpack_sbuffer *b = &lk->answers;
  if (b->size - lk->answers_at < 9) return 0;
  const char *at = b->data + lk->answers_at;
  uint32_t kl, rl;
  memcpy(&kl, at, 4);
  if (kl != klen || memcmp(at + 4, key, klen) != 0) return 0;
  bool found = at[4 + kl];
  memcpy(&rl, at + 5 + kl, 4);
  *row = found ? at + 9 + kl : NULL;
  *len = found ? rl : 0;
  lk->answers_at += 9 + (size_t)kl + rl;
  return 1;
}

int rn_lookup_get(rn_rel *rel, const char *key, size_t klen, const char **row, size_t *len)
{
  rn_lookup *lk = rel->ctx;
  rn_pipeline *p = rel->p;
  *row = NULL;
  *len = 0;
  bool retried = !p->reapplying && lk->retrying && p->state == RN_APPLYING;
  if (retried && lk->answers_at < lk->answers_enter) lk->answers_at = lk->answers_enter; /* its own, first */
  if ((p->reapplying || retried) && logged_answer(lk, key, klen, row, len)) {
    if (*row && !(*row = rn_scratch_copy(p, *row, *len))) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    return 0;
  }
  if (retried) { /* past what the first try asked: the rest of the log is not this change's */
    lk->answers.size = lk->answers_at;
    lk->retrying = false;
  }
  int rc = lookup_get(lk, rel, key, klen, row, len);
  /* logged while a change is applied: a read between changes is not applied again */
  if (!rc && p->state == RN_APPLYING && !p->reapplying && log_answer(lk, key, klen, *row, *len))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  return rc;
}

/* An answer from the cache or the source (the file comment). */
static int lookup_get(rn_lookup *lk, rn_rel *rel, const char *key, size_t klen, const char **row, size_t *len)
{
  rn_pipeline *p = rel->p;
  uint64_t h = rn_hash64(key, klen);
  double t;
  if (now(p, &t)) {
    rn_err_prefix(&p->err, rel->name);
    return p->err.code;
  }
  centry *c = lk->o.cached ? find(lk, key, klen, h) : NULL;
  /* fresh: a hit, and now the most recent. A clock set back before the fetch gives no age: asked again
   * (else the answer would be served for as long as the clock went back, plus ttl) */
  if (c && t >= c->fetched && t - c->fetched < lk->o.ttl) {
    lk->st.hits++;
    unlink_lru(lk, c);
    push_front(lk, c);
    if (c->row) {
      *row = rn_scratch_copy(p, c->row, c->rlen);
      *len = c->rlen;
      if (!*row) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    }
    return 0;
  }
  lk->st.misses++;
  const rn_schema *s = rel->schema;
  msgpack_object kv[s->nkey];
  if (rn_key_decode(key, klen, kv, s->nkey, &p->scratch) != s->nkey)
    return rn_err_set(&p->err, RN_ESTORE, "%s: a lookup key could not be decoded", rel->name);
  msgpack_sbuffer_clear(&lk->buf);
  int found = 0;
  lk->st.source_calls++;
  int rc = lk->fetch(lk->ctx, rel, kv, s->nkey, &lk->buf, &found, &p->err);
  if (!rc && found) rc = check_row_key(lk, key, klen, kv);
  if (rc) return rc;
  if (found) {
    *row = rn_scratch_copy(p, lk->buf.data, lk->buf.size);
    *len = lk->buf.size;
    if (!*row) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  if (lk->o.cached && (found || lk->o.cache_missing) &&
      remember(lk, c, key, klen, h, found ? lk->buf.data : NULL, lk->buf.size, t))
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (lk->o.cached && !found && !lk->o.cache_missing && c) { /* "missing = false": forget the stale answer */
    unlink_lru(lk, c);
    for (centry **at = &lk->buckets[h & (lk->nbuckets - 1)]; *at; at = &(*at)->chain)
      if (*at == c) { *at = c->chain; break; }
    free_entry(c);
    lk->n--;
  }
  return 0;
}

/* Each lookup of p, for the answer log's hooks. */
static void each_lookup(rn_pipeline *p, void (*fn)(rn_lookup *lk))
{
  for (int i = 0; i < p->nrels; i++)
    if (p->rels[i]->kind == RN_REL_LOOKUP) fn(p->rels[i]->ctx);
}

static void end_retry(rn_lookup *lk);
static void mark_group(rn_lookup *lk)
{
  end_retry(lk);
  lk->answers_mark = lk->answers.size;
}
static void drop_group(rn_lookup *lk) { lk->answers.size = lk->answers_mark; lk->retrying = false; }
static void read_from_start(rn_lookup *lk) { lk->answers_at = 0; }
static void forget_answers(rn_lookup *lk)
{
  lk->answers.size = lk->answers_mark = lk->answers_at = 0;
  lk->retrying = false;
}

void rn_lookups_group_began(rn_pipeline *p) { each_lookup(p, mark_group); }
void rn_lookups_rolled_back(rn_pipeline *p) { each_lookup(p, drop_group); }
void rn_lookups_reapply_starts(rn_pipeline *p) { each_lookup(p, read_from_start); }
void rn_lookups_committed(rn_pipeline *p) { each_lookup(p, forget_answers); }
/* A change retried before read fewer answers than its first try logged
 * (a callback that asked otherwise): the rest go, never an earlier
 * change's (before answers_enter). */
static void end_retry(rn_lookup *lk)
{
  size_t kept = lk->answers_at > lk->answers_enter ? lk->answers_at : lk->answers_enter;
  if (lk->retrying && kept < lk->answers.size) lk->answers.size = kept;
  lk->retrying = false;
}
static void mark_change(rn_lookup *lk)
{
  end_retry(lk);
  lk->answers_enter = lk->answers.size;
}
/* The change is applied again after the map grew: the replay of the
 * group's changes before it reads the log up to answers_enter, and the
 * retry then reads the answers its first try got, asking the source (and
 * counting a hit or miss) only past them, as the run with no regrow did
 * once. Dropping them asked again: another source call, or a cache hit,
 * per regrow (p:stats().lookups), and a source's newer answer. */
static void retry_change(rn_lookup *lk) { lk->retrying = lk->answers_enter < lk->answers.size; }
void rn_lookups_change_began(rn_pipeline *p) { each_lookup(p, mark_change); }
void rn_lookups_change_retried(rn_pipeline *p) { each_lookup(p, retry_change); }

const rn_lookup_stats *rn_lookup_stats_of(const rn_rel *rel)
{
  return &((const rn_lookup *)rel->ctx)->st;
}

static void free_lookup(void *ctx)
{
  rn_lookup *lk = ctx;
  while (lk->tail) evict_tail(lk);
  free(lk->buckets);
  if (lk->free_ctx) lk->free_ctx(lk->ctx);
  msgpack_sbuffer_destroy(&lk->buf);
  msgpack_sbuffer_destroy(&lk->answers);
  free(lk);
}

int rn_declare_lookup(rn_pipeline *p, const char *name, rn_schema *schema, rn_lookup_fetch fetch, void *ctx,
                      rn_free_fn free_ctx, const rn_lookup_opts *o, rn_rel **out)
{
  int rc = rn_check_declarable(p, name);
  if (!rc && !schema->nkey) rc = rn_err_set(&p->err, RN_EINVAL, "%s: a lookup needs a key", name);
  if (!rc && o->cached && (o->size < 1 || !(o->ttl > 0)))
    rc = rn_err_set(&p->err, RN_EINVAL, "%s: a cache needs size >= 1 and ttl > 0", name);
  rn_lookup *lk = rc ? NULL : calloc(1, sizeof *lk);
  size_t nb = 16;
  while (lk && nb < 2 * o->size && nb < ((size_t)1 << 24)) nb *= 2;
  if (lk && !(lk->buckets = calloc(nb, sizeof *lk->buckets))) { free(lk); lk = NULL; }
  if (!rc && !lk) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  rn_rel *r = rc ? NULL : rn_rel_new(p, name, RN_REL_LOOKUP, schema);
  if (!rc && !r) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc) {
    if (lk) free(lk->buckets);
    free(lk);
    rn_schema_free(schema);
    if (free_ctx) free_ctx(ctx);
    return rc;
  }
  lk->rel = r;
  lk->fetch = fetch;
  lk->ctx = ctx;
  lk->free_ctx = free_ctx;
  lk->o = *o;
  lk->nbuckets = nb;
  msgpack_sbuffer_init(&lk->buf);
  msgpack_sbuffer_init(&lk->answers);
  r->ctx = lk;
  if ((rc = rn_rel_record(p, r))) { /* in the catalogue: inspect lists it */
    rn_rel_discard_last(p);
    return rc;
  }
  *out = r;
  return 0;
}

/* ---- the attach source: a store's rows, columns matched by name ---- */

typedef struct attach_src { rn_attached *a; } attach_src;

static int attach_fetch(void *ctx, rn_rel *lk, const msgpack_object *key, int nkey, msgpack_sbuffer *row,
                        int *found, rn_err *e)
{
  attach_src *s = ctx;
  rn_pipeline *p = lk->p;
  const rn_schema *ls = lk->schema;
  msgpack_sbuffer k, r;
  msgpack_sbuffer_init(&k);
  msgpack_sbuffer_init(&r);
  for (int i = 0; i < nkey; i++) rn_key_append(&k, &key[i]);
  int rc = rn_attach_get(s->a, k.data, k.size, &r, found, e);
  if (!rc && *found) {
    /* after the read: one after the pipeline dropped a relation opens the
     * attach again, freeing the schema it had (store_sink.c, reopen) */
    const rn_schema *ss = rn_attach_schema(s->a);
    const msgpack_object *sv = rn_row_unpack(r.data, r.size, ss->ncols, &p->scratch);
    msgpack_object *lv = rn_zone_malloc(&p->scratch, sizeof *lv * (size_t)ls->ncols);
    uint8_t *given = rn_zone_malloc(&p->scratch, (size_t)ls->ncols);
    if (!sv || !lv || !given) rc = rn_err_set(e, RN_ESTORE, "%s: a stored row could not be read", lk->name);
    for (int i = 0; !rc && i < ls->ncols; i++) {
      int slot = rn_schema_slot(ss, ls->cols[i].name, ls->cols[i].name_len);
      given[i] = slot >= 0;
      if (slot >= 0) lv[i] = sv[slot];
    }
    if (!rc && (rc = rn_row_normalize(ls, lk->name, RN_ROW_FULL, lv, given, &p->scratch, e)))
      rn_lookup_bad_row(lk, key, e);
    if (!rc) rn_row_pack(ls, lv, row);
  }
  msgpack_sbuffer_destroy(&k);
  msgpack_sbuffer_destroy(&r);
  return rc;
}

static void free_attach_src(void *ctx)
{
  attach_src *s = ctx;
  rn_attach_close(s->a);
  free(s);
}

const rn_rel *rn_lookup_reading(const rn_pipeline *p, const char *name)
{
  for (int i = 0; i < p->nrels; i++) {
    const rn_rel *r = p->rels[i];
    const rn_lookup *lk = r->kind == RN_REL_LOOKUP ? r->ctx : NULL;
    if (lk && lk->fetch == attach_fetch && rn_attach_reads_own(((const attach_src *)lk->ctx)->a, p, name)) return r;
  }
  return NULL;
}

int rn_lookup_attach_source(rn_attached *a, rn_lookup_fetch *fetch, void **ctx, rn_free_fn *free_ctx)
{
  attach_src *s = malloc(sizeof *s);
  if (!s) return RN_ENOMEM;
  s->a = a;
  *fetch = attach_fetch;
  *ctx = s;
  *free_ctx = free_attach_src;
  return 0;
}

/* A lookup is read by the join whose right side it is (rn_lookup_get): it
 * takes no changes and holds no rows to scan. */
const rn_rel_ops rn_lookup_ops = { .name = "lookup", .apply = NULL, .scan = NULL, .free = free_lookup };
