/* query.c — reading a source table's rows, or a distinct's, from outside
 * the pipeline that writes them (runnel.attach, runnel query): the catalogue
 * entry gives the schema, "t:" name (a distinct: "dr:" name) the rows
 * (layouts drawn in table.c, distinct.c and store.h). */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "key.h"
#include "longkey.h"
#include "row.h"
#include "store_sink.h"

#define TABLE_KEY_INLINE_MAX RN_LONGKEY_INLINE /* table.c's RN_KEY_INLINE_MAX: longer keys are stored hashed */

int rn_attach_table_entry(MDB_txn *txn, MDB_dbi meta, const char *path, const char *name, MDB_val *v, int *table,
                          rn_err *e)
{
  char key[RN_NAME_MAX + 3];
  int klen = snprintf(key, sizeof key, "%s%s", RN_META_RELATION, name);
  MDB_val k = { (size_t)klen, key };
  if (mdb_get(txn, meta, &k, v) != 0)
    return rn_err_set(e, RN_ENOTFOUND, "attach %s: no relation or store \"%s\" there", path, name);
  const unsigned char *d = v->mv_data;
  if (v->mv_size < 3 || d[0] != 0x92 || d[1] > 0x7f) /* [kind (a positive fixint), description] */
    return rn_err_set(e, RN_ESTORE, "state damaged: %s: the catalogue entry of relation \"%s\" is malformed", path,
                      name);
  *table = d[1] == RN_REL_DISTINCT    ? RN_ATTACH_DISTINCT
         : d[1] == RN_REL_AGGREGATE ? RN_ATTACH_AGGREGATE
         : d[1] == RN_REL_TABLE     ? RN_ATTACH_KEYED /* or keyless: the schema says */
                                    : RN_ATTACH_DERIVED;
  v->mv_data = (char *)v->mv_data + 2;
  v->mv_size -= 2;
  return 0;
}

int rn_attach_table_key(int table, const char *name, size_t klen, rn_err *e)
{
  if (table == RN_ATTACH_KEYLESS || table == RN_ATTACH_DISTINCT)
    return rn_err_set(e, RN_EINVAL, "attach %s: get: a keyless %s has no key to read by (rows() reads it)", name,
                      table == RN_ATTACH_DISTINCT ? "distinct" : "table");
  (void)name, (void)klen; /* a long key is found hashed (rn_attach_table_find) */
  return 0;
}

/* The whole key a keyed table's long-key entry keeps (table.c's layout). */
static bool table_long_key(void *ctx, const MDB_val *v, const char **key, size_t *klen)
{
  (void)ctx;
  const char *d = v->mv_data;
  uint32_t n;
  if (v->mv_size < 13 || !(d[8] & 2)) return false;
  memcpy(&n, d + 9, 4);
  if (v->mv_size - 13 < n) return false;
  *key = d + 13;
  *klen = n;
  return true;
}

int rn_attach_table_find(MDB_txn *txn, MDB_dbi dbi, const char *key, size_t klen, char *stored, MDB_val *v)
{
  if (klen <= TABLE_KEY_INLINE_MAX) return mdb_get(txn, dbi, &(MDB_val){ klen, (void *)key }, v);
  int rc = rn_longkey_find(NULL, txn, dbi, key, klen, table_long_key, NULL, stored, v);
  return rc == RN_LONGKEY_FULL ? MDB_NOTFOUND : rc; /* every probe holds another key: not there */
}

/* Keyed: |u64 id|u8 flags|[u32 klen|key]|row|, flags 1 = live, 2 = long
 * key. Keyless: |u64 id BE| -> |row|. A distinct: |u64 id BE| -> |u64
 * copies|row|. Lengths are checked: a damaged entry is never read past. */
int rn_attach_table_row(int table, const MDB_val *k, MDB_val *v, uint64_t *id)
{
  if (table == RN_ATTACH_DISTINCT) {
    if (k->mv_size != 8 || v->mv_size < 8) return RN_ENTRY_DAMAGED;
    *id = rn_be64_get(k->mv_data);
    v->mv_data = (char *)v->mv_data + 8;
    v->mv_size -= 8;
    return RN_ENTRY_LIVE;
  }
  if (table == RN_ATTACH_KEYLESS) {
    if (k->mv_size != 8) return RN_ENTRY_DAMAGED;
    *id = rn_be64_get(k->mv_data);
    return RN_ENTRY_LIVE;
  }
  const char *d = v->mv_data;
  if (v->mv_size < 9) return RN_ENTRY_DAMAGED;
  if (!(d[8] & 1)) return RN_ENTRY_GONE;
  memcpy(id, d, 8);
  size_t off = 9;
  if (d[8] & 2) {
    uint32_t klen;
    if (v->mv_size < 13) return RN_ENTRY_DAMAGED;
    memcpy(&klen, d + 9, 4);
    off += 4 + (size_t)klen;
  }
  if (off >= v->mv_size) return RN_ENTRY_DAMAGED; /* a row is one byte at least */
  v->mv_data = (char *)d + off;
  v->mv_size -= off;
  return RN_ENTRY_LIVE;
}

int rn_attach_damaged(const char *kind, const char *name, rn_err *e)
{
  return rn_err_set(e, RN_ESTORE, "state damaged: %s \"%s\": a stored row is cut short (restore the state from a "
                    "backup, or drop the relation and fill it again)", kind, name);
}

int rn_attach_row_form(int table, MDB_val *v, msgpack_sbuffer *form)
{
  if (table != RN_ATTACH_DISTINCT || !v->mv_size || !memchr(v->mv_data, 0xcb, v->mv_size)) return 0; /* no float64 */
  msgpack_sbuffer_clear(form);
  if (rn_buf_write(form, v->mv_data, v->mv_size)) return RN_ENOMEM;
  rn_row_zero_signs(form->data, form->size);
  v->mv_data = form->data;
  return 0;
}
