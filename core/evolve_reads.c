/* evolve_reads.c — the relations a derived relation's functions read
 * (evolve_reads.h). */
#include <stdio.h>
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

uint64_t rn_check64(const void *data, size_t len)
{
  const unsigned char *at = data;
  uint64_t crc = ~(uint64_t)0;
  for (size_t i = 0; i < len; i++) { /* bytewise: a list is a few names, a function's copy a few kilobytes */
    crc ^= at[i];
    for (int bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >> 1) ^ 0xC96C5795D7870F42ULL : crc >> 1;
  }
  return ~crc;
}

#define NAMES_MARKER "\xff" "nl1"
#define NAMES_CHECK (4 + 16 + 1) /* the check's name: marker, 16 hex digits, its \0 */

static void check_name(char *out, const char *names, size_t len)
{
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)rn_check64(names, len));
  memcpy(out, NAMES_MARKER, 4);
  memcpy(out + 4, hex, 17); /* with its \0 */
}

/* A name beginning "\xff" is a check: of its shape, or damaged. */
static bool check_shaped(const char *name, size_t len)
{
  if (len != NAMES_CHECK - 1 || memcmp(name, NAMES_MARKER, 4) != 0) return false;
  for (size_t i = 4; i < len; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
  return true;
}

rn_names_state rn_names_read(const MDB_val *v, const char **names, size_t *len)
{
  const char *at = v->mv_data;
  *names = at, *len = v->mv_size;
  if (!rn_names_readable(at, v->mv_size)) return RN_NAMES_MALFORMED;
  size_t last = 0, nlen = 0;
  for (size_t off = 0; off < v->mv_size; off += nlen + 1) {
    last = off, nlen = strlen(at + off);
    if ((unsigned char)at[off] == 0xff && !check_shaped(at + off, nlen)) return RN_NAMES_MALFORMED; /* damaged */
  }
  if ((unsigned char)at[last] != 0xff) return RN_NAMES_UNCHECKED; /* 0.22's (a check before: 0.22 added names) */
  if (!last) return RN_NAMES_MALFORMED; /* a check of no names: never written */
  char want[NAMES_CHECK];
  check_name(want, at, last);
  *len = last;
  return memcmp(at + last, want, NAMES_CHECK) == 0 ? RN_NAMES_CHECKED : RN_NAMES_FAILED;
}

int rn_names_put(MDB_txn *txn, MDB_dbi meta, MDB_val *k, const char *names, size_t len)
{
  MDB_val v = { len + NAMES_CHECK, NULL };
  int rc = mdb_put(txn, meta, k, &v, MDB_RESERVE); /* written in place: no copy to append the check to */
  if (rc) return rc;
  memcpy(v.mv_data, names, len);
  check_name((char *)v.mv_data + len, names, len);
  return 0;
}

static size_t meta_key(char *key, const char *name)
{
  size_t nlen = strlen(name);
  memcpy(key, RN_META_READS, RN_PREFIX_LEN(RN_META_READS));
  memcpy(key + RN_PREFIX_LEN(RN_META_READS), name, nlen);
  return RN_PREFIX_LEN(RN_META_READS) + nlen;
}

/* RN_ESTORE: r's "rd:" record (v_size bytes) cannot be read (why:
 * "is malformed", "fails its check"). Dropping r deletes it (drop.c);
 * declared again, r is built anew from its inputs and its functions'
 * reads are seen again. */
static int damaged(rn_pipeline *p, const rn_rel *r, const char *why, size_t v_size)
{
  return rn_err_set(&p->err, RN_ESTORE,
                    "state damaged: %s: the list of the relations that relation \"%s\"'s functions read %s "
                    "(%zu bytes): a change of one of them might not rebuild it; drop it to build it anew "
                    "(p:drop(\"%s\") or runnel drop %s %s)", p->store.path, r->name, why, v_size, r->name,
                    p->store.path, r->name);
}

int rn_reads_load(rn_pipeline *p, rn_rel *r, MDB_txn *txn)
{
  char key[8 + RN_NAME_MAX]; /* names are checked at declaration (rn_check_declarable) */
  MDB_val k = { meta_key(key, r->name), key }, v;
  int rc = mdb_get(txn, p->store.meta, &k, &v);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc) return rn_store_fail(&p->err, rc, r->name);
  /* Damaged (cut, a name without its \0; a \0 flipped in, an empty one;
   * or empty, which is never written; a letter flipped, which its check
   * catches): a name read wrong is a read whose change would not rebuild
   * r, and its rows would stay wrong, unsaid. */
  const char *names;
  size_t len;
  rn_names_state state = rn_names_read(&v, &names, &len);
  if (state == RN_NAMES_MALFORMED) return damaged(p, r, "is malformed", v.mv_size);
  if (state == RN_NAMES_FAILED) return damaged(p, r, "fails its check", v.mv_size);
  for (size_t off = 0; off < len;) { /* |name\0|…| */
    size_t nlen = strlen(names + off);
    bool check = (unsigned char)names[off] == 0xff; /* an older check, 0.22 having added names after it */
    if (!check && !holds(r, names + off) && (rc = add(p, r, names + off, nlen))) return rc;
    off += nlen + 1;
  }
  if (state == RN_NAMES_UNCHECKED) r->reads_dirty = p->reads_dirty = true; /* the next group writes its check */
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
    MDB_val k = { meta_key(key, r->name), key };
    int rc = rn_names_put(txn, p->store.meta, &k, r->reads, r->reads_len);
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
