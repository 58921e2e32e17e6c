/* evolve_reads.c — the relations a derived relation's functions read
 * (evolve_reads.h). */
#include <stdlib.h>
#include <string.h>

#include "evolve_reads.h"
#include "store.h"

static bool holds(const rn_rel *r, const char *name)
{
  for (size_t off = 0; off < r->reads_len; off += strlen(r->reads + off) + 1)
    if (strcmp(r->reads + off, name) == 0) return true;
  return false;
}

static int add(rn_pipeline *p, rn_rel *r, const char *name, size_t len)
{
  char *a = realloc(r->reads, r->reads_len + len + 1);
  if (!a) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memcpy(a + r->reads_len, name, len);
  a[r->reads_len + len] = '\0';
  r->reads = a;
  r->reads_len += len + 1;
  return 0;
}

int rn_reads_note(rn_pipeline *p, const char *reader, const rn_rel *read)
{
  rn_rel *r = reader ? rn_find(p, reader) : NULL;
  if (!r || r == read || read->p != p || holds(r, read->name)) return 0;
  int rc = add(p, r, read->name, strlen(read->name));
  if (!rc) r->reads_dirty = p->reads_dirty = true;
  return rc;
}

bool rn_names_readable(const void *data, size_t len)
{
  const char *at = data, *end = at + len;
  if (!len) return false;
  while (at < end) {
    const char *nul = memchr(at, '\0', (size_t)(end - at));
    if (!nul || nul == at || nul - at > RN_NAME_MAX) return false;
    at = nul + 1;
  }
  return true;
}

static size_t meta_key(char *key, const char *name)
{
  size_t nlen = strlen(name);
  memcpy(key, RN_META_READS, RN_PREFIX_LEN(RN_META_READS));
  memcpy(key + RN_PREFIX_LEN(RN_META_READS), name, nlen);
  return RN_PREFIX_LEN(RN_META_READS) + nlen;
}

/* RN_ESTORE: r's "rd:" record (v_size bytes) cannot be read. Dropping r
 * deletes it (drop.c); declared again, r is built anew from its inputs and
 * its functions' reads are seen again. */
static int damaged(rn_pipeline *p, const rn_rel *r, size_t v_size)
{
  return rn_err_set(&p->err, RN_ESTORE,
                    "state damaged: %s: the list of the relations that relation \"%s\"'s functions read is malformed "
                    "(%zu bytes): a change of one of them might not rebuild it; drop it to build it anew "
                    "(p:drop(\"%s\") or runnel drop %s %s)", p->store.path, r->name, v_size, r->name, p->store.path,
                    r->name);
}

int rn_reads_load(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  char key[8 + RN_NAME_MAX]; /* names are checked at declaration (rn_check_declarable) */
  MDB_val k = { meta_key(key, r->name), key }, v;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  /* Damaged (cut, a name without its \0; a \0 flipped in, an empty one;
   * or empty, which is never written): a name read wrong is a read whose
   * change would not rebuild r, and its rows would stay wrong, unsaid. */
  if (!rn_names_readable(v.mv_data, v.mv_size)) return damaged(p, r, v.mv_size);
  const char *names = v.mv_data;
  for (size_t off = 0; off < v.mv_size;) { /* |name\0|…| */
    size_t len = strlen(names + off);
    if (!holds(r, names + off) && (rc = add(p, r, names + off, len))) return rc;
    off += len + 1;
  }
  return 0;
}

const rn_rel *rn_reads_evolved(const rn_rel *r)
{
  for (size_t off = 0; off < r->reads_len; off += strlen(r->reads + off) + 1) {
    const rn_rel *s = rn_find(r->p, r->reads + off);
    if (s && s != r && s->evolved) return s;
  }
  return NULL;
}

int rn_reads_save(rn_pipeline *p, MDB_txn *txn)
{
  if (!p->reads_dirty) return 0;
  for (int i = 0; i < p->nrels; i++) {
    rn_rel *r = p->rels[i];
    if (!r->reads_dirty) continue;
    char key[8 + RN_NAME_MAX];
    MDB_val k = { meta_key(key, r->name), key }, v = { r->reads_len, r->reads };
    int rc = mdb_put(txn, p->store.meta, &k, &v, 0);
    if (rc) return rn_store_fail(&p->err, rc, r->name);
  }
  return 0;
}

void rn_reads_saved(rn_pipeline *p)
{
  if (!p->reads_dirty) return;
  for (int i = 0; i < p->nrels; i++) p->rels[i]->reads_dirty = false;
  p->reads_dirty = false;
}
