/* api.c — the C API for hosts (runnel.h): declaring from C, pushing msgpack
 * maps keyed by external names, subscribing C callbacks. */
#include <stdlib.h>
#include <string.h>

#include "evolve.h"
#include "json.h"
#include "notes.h"
#include "outbox.h"
#include "pipeline.h"
#include "row.h"
#include "suggest.h"

/* The declaration's shape, before anything is built: a name, 1 or more
 * columns, 0 to ncols key names. */
static int check_declaration(rn_pipeline *p, const char *name, const rn_column_def *cols, int ncols,
                             const char *const *key, int nkey, rn_rel **out)
{
  if (!name) return rn_err_set(&p->err, RN_EINVAL, "declare: the relation name is NULL");
  if (!out) return rn_err_set(&p->err, RN_EINVAL, "%s: declare: out is NULL", name);
  if (ncols <= 0 || !cols)
    return rn_err_set(&p->err, RN_EINVAL, "%s: a relation needs at least one column (ncols is %d%s)", name,
                      ncols, cols ? "" : ", cols is NULL");
  if (nkey < 0 || nkey > ncols)
    return rn_err_set(&p->err, RN_EINVAL, "%s: nkey is %d; it must be 0 (keyless) to ncols (%d)", name, nkey,
                      ncols);
  if (nkey > 0 && !key) return rn_err_set(&p->err, RN_EINVAL, "%s: nkey is %d but key is NULL", name, nkey);
  return 0;
}

/* The key columns' slots into s; slots has nkey entries. */
static int key_slots(rn_pipeline *p, const char *name, const rn_schema *s, const char *const *key, int nkey,
                     int *slots)
{
  for (int i = 0; i < nkey; i++) {
    slots[i] = key[i] ? rn_schema_slot(s, key[i], strlen(key[i])) : -1;
    if (slots[i] < 0) {
      rn_err_set(&p->err, RN_EINVAL, "%s: key column \"%s\" is not a declared column", name,
                 key[i] ? key[i] : "(null)");
      if (key[i]) rn_suggest_append_column(p->err.msg, sizeof p->err.msg, s, key[i], strlen(key[i]));
      return p->err.code;
    }
  }
  return 0;
}

/* A column's default (a msgpack value) and former name (a rename, evolve.h). */
static int column_extras(rn_pipeline *p, const char *name, rn_schema *s, int slot, const rn_column_def *c)
{
  if (c->was && rn_evolve_rename(p, name, c->was, c->name)) return p->err.code;
  if (!c->default_value) return 0;
  msgpack_object v;
  size_t off = 0;
  if (rn_msgpack_size(c->default_value, c->default_len) != c->default_len ||
      rn_unpack(c->default_value, c->default_len, &off, &p->scratch, &v) != MSGPACK_UNPACK_SUCCESS)
    return rn_err_set(&p->err, RN_EINVAL, "%s: column \"%s\": the default is not one msgpack value", name, c->name);
  int rc = rn_schema_set_default(s, slot, &v, name, &p->err);
  msgpack_zone_clear(&p->scratch);
  return rc;
}

static int declare(rn_pipeline *p, const char *name, rn_relkind kind, const rn_column_def *cols,
                   int ncols, const char *const *key, int nkey, rn_rel **out)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  int rc = check_declaration(p, name, cols, ncols, key, nkey, out);
  if (rc) return rc;
  rn_schema *s = rn_schema_new();
  if (!s) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  for (int i = 0; i < ncols; i++) {
    rn_type t;
    if (!cols[i].name || !cols[i].type || rn_type_parse(cols[i].type, &t) != 0) {
      rn_schema_free(s);
      if (!cols[i].name) return rn_err_set(&p->err, RN_EINVAL, "%s: column #%d: the name is NULL", name, i + 1);
      return rn_err_set(&p->err, RN_EINVAL, "%s: column #%d: unknown type %s", name, i + 1,
                        cols[i].type ? cols[i].type : "(null)");
    }
    int slot = rn_schema_add(s, cols[i].name, strlen(cols[i].name), t, cols[i].nullable != 0, NULL, &p->err);
    if (slot < 0) rn_err_prefix(&p->err, name);
    if (slot < 0 || column_extras(p, name, s, slot, &cols[i])) {
      rn_schema_free(s);
      return p->err.code;
    }
  }
  /* On the heap: nkey is the caller's number (check_declaration bounds it by ncols). */
  int *slots = nkey > 0 ? malloc(sizeof *slots * (size_t)nkey) : NULL;
  if (nkey > 0 && !slots) rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) rc = key_slots(p, name, s, key, nkey, slots);
  if (!rc && nkey > 0) rc = rn_schema_set_key(s, slots, nkey, name, &p->err);
  free(slots);
  if (rc) {
    rn_schema_free(s);
    return rc;
  }
  rc = rn_declare_source(p, name, kind, s, out);
  if (!rc) rn_err_clear(&p->err);
  return rc;
}

RN_API int rn_declare_table(rn_pipeline *p, const char *name, const rn_column_def *cols, int ncols,
                            const char *const *key, int nkey, rn_rel **out)
{
  int rc = declare(p, name, RN_REL_TABLE, cols, ncols, key, nkey, out);
  rn_notes_tell(p); /* the schema changes it applied */
  return rc;
}

RN_API int rn_declare_stream(rn_pipeline *p, const char *name, const rn_column_def *cols, int ncols,
                             rn_rel **out)
{
  int rc = declare(p, name, RN_REL_STREAM, cols, ncols, NULL, 0, out);
  rn_notes_tell(p);
  return rc;
}

RN_API rn_rel *rn_relation(const rn_pipeline *p, const char *name)
{
  return p && name ? rn_find(p, name) : NULL;
}

RN_API const char *rn_relation_name(const rn_rel *rel)
{
  return rel ? rel->name : NULL;
}

/* The refusal of map key k, which names no column of rel. */
static int not_a_column(rn_pipeline *p, const rn_rel *rel, const msgpack_object *k)
{
  if (k->type != MSGPACK_OBJECT_STR)
    return rn_err_set(&p->err, RN_EINVAL, "%s: column names are strings, got %s", rel->name, rn_value_kind(k));
  char quoted[256]; /* the name with its NUL and control bytes escaped */
  rn_err_set(&p->err, RN_EINVAL, "%s: unknown column %s", rel->name,
             rn_json_quote(quoted, sizeof quoted, k->via.str.ptr, k->via.str.size));
  rn_suggest_append_column(p->err.msg, sizeof p->err.msg, rel->schema, k->via.str.ptr, k->via.str.size);
  return RN_EINVAL;
}

/* A map keyed by external names into slot values (in the scratch zone). */
static int map_to_slots(rn_pipeline *p, rn_rel *rel, const msgpack_object *m,
                        msgpack_object **vals, uint8_t **given)
{
  const rn_schema *s = rel->schema;
  if (m->type != MSGPACK_OBJECT_MAP)
    return rn_err_set(&p->err, RN_EINVAL, "%s: a change is a msgpack map keyed by column names, got %s",
                      rel->name, rn_value_kind_sent(m));
  size_t n = (size_t)(s->ncols ? s->ncols : 1);
  *vals = rn_zone_malloc(&p->scratch, sizeof **vals * n);
  *given = rn_zone_malloc(&p->scratch, n);
  if (!*vals || !*given) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  memset(*given, 0, n);
  for (uint32_t i = 0; i < m->via.map.size; i++) {
    const msgpack_object *k = &m->via.map.ptr[i].key;
    int slot = k->type != MSGPACK_OBJECT_STR ? -1
             : i < RN_SLOT_HINTS ? rn_schema_slot_hinted(s, k->via.str.ptr, k->via.str.size, &rel->slot_hint[i])
             : rn_schema_slot(s, k->via.str.ptr, k->via.str.size);
    char quoted[256]; /* the name with its NUL and control bytes escaped */
    if (slot < 0) return not_a_column(p, rel, k);
    if ((*given)[slot]) /* last-wins would drop a value silently */
      return rn_err_set(&p->err, RN_EINVAL, "%s: duplicate column %s", rel->name,
                        rn_json_quote(quoted, sizeof quoted, k->via.str.ptr, k->via.str.size));
    (*vals)[slot] = m->via.map.ptr[i].val;
    (*given)[slot] = 1;
  }
  return 0;
}

/* rn_scalar_object (sz from rn_value_size), with the host's usual values
 * told inline: a short name (fixstr), a small or unsigned int. The same
 * objects, field for field. */
static inline bool scalar_object(const char *at, size_t sz, msgpack_object *o)
{
  unsigned b = (unsigned char)at[0];
  if (b >= 0xa0 && b <= 0xbf) {
    *o = (msgpack_object){ .type = MSGPACK_OBJECT_STR };
    o->via.str.ptr = at + 1;
    o->via.str.size = (uint32_t)(sz - 1);
    return true;
  }
  if (b <= 0x7f) {
    *o = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = b };
    return true;
  }
  if (b >= 0xcc && b <= 0xcf) {
    uint64_t u = 0;
    for (size_t k = 1; k < sz; k++) u = u << 8 | (unsigned char)at[k];
    *o = (msgpack_object){ .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = u };
    return true;
  }
  return rn_scalar_object((const unsigned char *)at, sz, o);
}

int rn_flat_map_slots(rn_pipeline *p, rn_rel *rel, const char *map, size_t len, msgpack_object **vals,
                      uint8_t **given)
{
  const unsigned char *b = (const unsigned char *)map;
  if (!map || len == 0 || b[0] < 0x80 || b[0] > 0x8f) return 0; /* a fixmap: up to 15 columns */
  const char *at = map + 1, *end = map + len;
  const rn_schema *s = rel->schema;
  size_t n = (size_t)(s->ncols ? s->ncols : 1);
  *vals = rn_zone_malloc(&p->scratch, sizeof **vals * n);
  *given = rn_zone_malloc(&p->scratch, n);
  if (!*vals || !*given) return -1;
  memset(*given, 0, n);
  for (unsigned i = 0; i < (b[0] & 0x0fu); i++) {
    size_t ksz = rn_value_size(at, end), vsz;
    msgpack_object k;
    if (!ksz || !scalar_object(at, ksz, &k) || k.type != MSGPACK_OBJECT_STR) return 0;
    int slot = rn_schema_slot_hinted(s, k.via.str.ptr, k.via.str.size, &rel->slot_hint[i]); /* i < 15 */
    if (slot < 0 || (*given)[slot]) return 0;
    at += ksz;
    if (!(vsz = rn_value_size(at, end)) || !scalar_object(at, vsz, &(*vals)[slot])) return 0;
    (*given)[slot] = 1;
    at += vsz;
  }
  return at == end;
}

/* A change's slot values into rel. */
static int push_slots(rn_pipeline *p, rn_rel *rel, rn_op op, msgpack_object *vals, uint8_t *given)
{
  switch (op) {
  case RN_OP_INSERT: return rn_table_insert(rel, vals, given);
  case RN_OP_UPDATE: return rn_table_update(rel, vals, given);
  case RN_OP_UPSERT: return rn_table_upsert(rel, vals, given);
  case RN_OP_DELETE: return rn_table_delete(rel, vals, given);
  }
  rn_err_set(&p->err, RN_EINVAL, "%s: rn_push: unknown op %d", rel->name, (int)op);
  return rn_group_fail(p, RN_EINVAL, p->err.msg);
}

/* Inside a callback: tables cannot be changed. */
static bool applying(const rn_pipeline *p)
{
  return p->state == RN_APPLYING || p->state == RN_COMMITTING;
}

int rn_push_object(rn_pipeline *p, rn_rel *rel, rn_op op, const msgpack_object *m)
{
  rn_err_clear(&p->err);
  if (applying(p))
    return rn_err_set(&p->err, RN_EMISUSE, "tables cannot be changed from inside a callback (filter, map or sink)");
  msgpack_object *vals = NULL;
  uint8_t *given = NULL;
  int rc = map_to_slots(p, rel, m, &vals, &given);
  if (rc) return rn_group_fail(p, rc, p->err.msg); /* GROUP-2: bad input rolls the group back */
  return push_slots(p, rel, op, vals, given);
}

/* A change's relation: not NULL (rn_relation found nothing) and p's own. As
 * bad input, the refusal rolls an open group back (GROUP-2). */
static int check_change_target(rn_pipeline *p, const rn_rel *rel, rn_op op)
{
  if (!rel) rn_err_set(&p->err, RN_EINVAL, "rn_push: the relation is NULL (did rn_relation find it?)");
  else if (rel->p != p) rn_err_set(&p->err, RN_EINVAL, "%s: rn_push: the relation belongs to another pipeline", rel->name);
  else if (op < RN_OP_INSERT || op > RN_OP_DELETE)
    rn_err_set(&p->err, RN_EINVAL, "%s: rn_push: unknown op %d", rel->name, (int)op);
  else return 0;
  return rn_group_fail(p, RN_EINVAL, p->err.msg);
}

/* The container header at v: its size into *head, its elements (a map's
 * keys and values) into *children; false for any other value. */
static bool container_header(const unsigned char *v, const unsigned char *end, size_t *head, uint64_t *children)
{
  size_t have = (size_t)(end - v);
  unsigned b = *v;
  uint64_t n;
  if (b >= 0x80 && b <= 0x9f) { *head = 1; n = b & 0x0f; }
  else if ((b == 0xdc || b == 0xde) && have >= 3) { *head = 3; n = (uint64_t)v[1] << 8 | v[2]; }
  else if ((b == 0xdd || b == 0xdf) && have >= 5)
    { *head = 5; n = (uint64_t)v[1] << 24 | (uint64_t)v[2] << 16 | (uint64_t)v[3] << 8 | v[4]; }
  else return false;
  *children = b <= 0x8f || b >= 0xde ? 2 * n : n;
  return true;
}

/* Whether the msgpack value at v (whole: rn_msgpack_size) nests more than
 * RN_MAX_NESTING lists and maps. Iterative, with one count per level: the
 * values this finds are the ones too deep for a recursion. */
static bool nests_too_deep(const unsigned char *v, const unsigned char *end)
{
  uint64_t left[RN_MAX_NESTING + 1] = { 1 }; /* elements still to walk, per level */
  int depth = 0;
  while (depth >= 0) {
    if (!left[depth]) { depth--; continue; }
    left[depth]--;
    size_t head;
    uint64_t children;
    if (v < end && container_header(v, end, &head, &children)) {
      if (depth == RN_MAX_NESTING) return true;
      left[++depth] = children;
      v += head;
      continue;
    }
    size_t sz = v < end ? rn_msgpack_size((const char *)v, (size_t)(end - v)) : 0;
    if (!sz) return false;
    v += sz;
  }
  return false;
}

/* A change that is whole msgpack (rn_msgpack_size) but that msgpack-c does
 * not decode: a value nested deeper than its unpacker goes. Refused naming
 * the column as row.c refuses one nested a little less deep; 0 (nothing
 * set) when that is not what is wrong with it. */
static int refuse_nesting(rn_pipeline *p, rn_rel *rel, const char *map, size_t len)
{
  const unsigned char *at = (const unsigned char *)map, *end = at + len;
  size_t head;
  uint64_t n;
  bool map_header = len && ((*at >= 0x80 && *at <= 0x8f) || *at == 0xde || *at == 0xdf);
  if (!map_header || !container_header(at, end, &head, &n)) return 0; /* not a map: said as before */
  for (at += head; n >= 2; n -= 2) {
    size_t ksz = rn_msgpack_size((const char *)at, (size_t)(end - at)), vsz;
    msgpack_object k;
    if (!ksz || !(vsz = rn_msgpack_size((const char *)at + ksz, (size_t)(end - at - ksz)))) return 0;
    if (nests_too_deep(at + ksz, at + ksz + vsz)) {
      if (!rn_scalar_object(at, ksz, &k) || k.type != MSGPACK_OBJECT_STR) return not_a_column(p, rel, &k);
      int slot = rn_schema_slot(rel->schema, k.via.str.ptr, k.via.str.size);
      if (slot < 0) return not_a_column(p, rel, &k);
      char quoted[256];
      return rn_err_set(&p->err, RN_EINVAL, "%s: column %s: expected a value nesting at most %d lists, maps or "
                        "structs, got one nested deeper", rel->name,
                        rn_json_quote(quoted, sizeof quoted, k.via.str.ptr, k.via.str.size), RN_MAX_NESTING);
    }
    at += ksz + vsz;
  }
  return 0;
}

/* A change of any shape decoded into objects (rn_push_object says what is
 * wrong with it, if anything). */
static int push_decoded(rn_pipeline *p, rn_rel *rel, rn_op op, const char *map, size_t len)
{
  msgpack_object m;
  size_t off = 0;
  /* Checked before decoding: msgpack-c allocates what a header claims. */
  int flat = map && rn_msgpack_size(map, len) == len ? rn_unpack_flat_map(map, len, &p->scratch, &m) : -1;
  if (!map || flat < 0 || (!flat && rn_unpack(map, len, &off, &p->scratch, &m) != MSGPACK_UNPACK_SUCCESS)) {
    if (flat < 0 || !refuse_nesting(p, rel, map, len))
      rn_err_set(&p->err, RN_EINVAL, "%s: the change is not valid msgpack", rel->name);
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  return rn_push_object(p, rel, op, &m);
}

RN_API int rn_push(rn_pipeline *p, rn_rel *rel, rn_op op, const void *map, size_t len)
{
  if (!p) return RN_EINVAL;
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  int rc = check_change_target(p, rel, op);
  if (rc) return rc;
  msgpack_object *vals;
  uint8_t *given;
  int fast = applying(p) ? 0 : rn_flat_map_slots(p, rel, map, len, &vals, &given); /* the usual host change */
  if (fast < 0) {
    rn_err_set(&p->err, RN_ENOMEM, "out of memory");
    return rn_group_fail(p, RN_ENOMEM, p->err.msg);
  }
  rc = fast ? push_slots(p, rel, op, vals, given) : push_decoded(p, rel, op, map, len);
  if (!rc) rn_err_clear(&p->err); /* what callbacks were refused is not the change's message */
  return rc;
}

RN_API int rn_insert(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_INSERT, map, len); }
RN_API int rn_update(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_UPDATE, map, len); }
RN_API int rn_upsert(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_UPSERT, map, len); }
RN_API int rn_delete(rn_pipeline *p, rn_rel *rel, const void *map, size_t len) { return rn_push(p, rel, RN_OP_DELETE, map, len); }

/* ---- subscriptions: rows as maps keyed by external names ---- */

static void pack_value_as_map(msgpack_packer *pk, const msgpack_object *v, const rn_column *c);

static void pack_struct(msgpack_packer *pk, const msgpack_object *v, const rn_schema *fields)
{
  msgpack_pack_map(pk, (size_t)fields->ncols);
  for (int i = 0; i < fields->ncols; i++) {
    const rn_column *c = &fields->cols[i];
    msgpack_pack_str_with_body(pk, c->name, c->name_len);
    if ((uint32_t)i < v->via.array.size) pack_value_as_map(pk, &v->via.array.ptr[i], c);
    else msgpack_pack_nil(pk);
  }
}

static void pack_value_as_map(msgpack_packer *pk, const msgpack_object *v, const rn_column *c)
{
  if (c->type == RN_T_STRUCT && v->type == MSGPACK_OBJECT_ARRAY) pack_struct(pk, v, c->fields);
  else msgpack_pack_object(pk, *v);
}

/* A schema's map header and column names packed once (a subscription turns
 * every row into a map keyed by them): bytes[0, at[0]) is the map header,
 * bytes[at[i], at[i + 1]) column i's name as a msgpack string. */
typedef struct map_names {
  const rn_schema *schema; /* built for; NULL: not built */
  char *bytes;
  uint32_t *at;            /* ncols + 1 offsets */
  bool structs;            /* a struct column: its values are decoded (structs_to_map) */
  /* When every packed name takes at most NAME_SLOT bytes: name i again at
   * slots + i * NAME_SLOT, padded, so that it is one fixed-size copy
   * (slot_len[i] its length); else NULL. */
  char *slots;
  uint8_t *slot_len;
} map_names;

#define NAME_SLOT 32

static void map_names_free(map_names *m)
{
  free(m->bytes);
  free(m->at);
  free(m->slots);
  free(m->slot_len);
  *m = (map_names){ 0 };
}

/* m's names as fixed slots (map_names), when all fit; -1 out of memory. */
static int name_slots_build(map_names *m, const rn_schema *s)
{
  for (int i = 0; i < s->ncols; i++)
    if (m->at[i + 1] - m->at[i] > NAME_SLOT) return 0;
  size_t n = (size_t)(s->ncols ? s->ncols : 1);
  m->slots = calloc(n, NAME_SLOT);
  m->slot_len = malloc(n);
  if (!m->slots || !m->slot_len) return -1;
  for (int i = 0; i < s->ncols; i++) {
    m->slot_len[i] = (uint8_t)(m->at[i + 1] - m->at[i]);
    memcpy(m->slots + (size_t)i * NAME_SLOT, m->bytes + m->at[i], m->slot_len[i]);
  }
  return 0;
}

/* The room a map of s's names takes: its header and each name's. */
static size_t names_size(const rn_schema *s)
{
  size_t need = 5;
  for (int i = 0; i < s->ncols; i++) need += 5 + s->cols[i].name_len;
  return need;
}

/* Builds m for s; -1 when out of memory (m then empty). */
static int map_names_build(map_names *m, const rn_schema *s)
{
  map_names_free(m);
  m->bytes = malloc(names_size(s) + 16); /* + what rn_put_run reads past the last name */
  m->at = malloc(sizeof *m->at * (size_t)(s->ncols + 1));
  if (!m->bytes || !m->at) {
    map_names_free(m);
    rn_oom_note();
    return -1;
  }
  char *w = rn_put_map_header(m->bytes, (uint32_t)s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    const rn_column *c = &s->cols[i];
    m->at[i] = (uint32_t)(w - m->bytes);
    w = rn_put_str_header(w, c->name_len);
    memcpy(w, c->name, c->name_len);
    w += c->name_len;
    m->structs |= c->type == RN_T_STRUCT;
  }
  m->at[s->ncols] = (uint32_t)(w - m->bytes);
  if (name_slots_build(m, s)) {
    map_names_free(m);
    rn_oom_note();
    return -1;
  }
  m->schema = s;
  return 0;
}

/* The row's values after its array header, which must say ncols; NULL if
 * it does not. */
static const char *row_values(const char *row, size_t len, int ncols)
{
  const unsigned char *p = (const unsigned char *)row;
  uint32_t n;
  size_t off;
  if (len == 0) return NULL;
  if (p[0] >= 0x90 && p[0] <= 0x9f) { n = p[0] & 0x0f; off = 1; }
  else if (p[0] == 0xdc && len >= 3) { n = (uint32_t)p[1] << 8 | p[2]; off = 3; }
  else if (p[0] == 0xdd && len >= 5) { n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4]; off = 5; }
  else return NULL;
  return n == (uint32_t)ncols ? row + off : NULL;
}

/* Column i's packed name at w, from m when built, else packed here. */
static char *put_name(char *w, const rn_schema *s, const map_names *m, int i)
{
  if (m) return rn_put_run(w, m->bytes + m->at[i], m->at[i + 1] - m->at[i], 16);
  const rn_column *c = &s->cols[i];
  w = rn_put_str_header(w, c->name_len);
  return rn_put_bytes(w, c->name, c->name_len);
}

/* flat_to_map's loop for a short row (16 readable bytes past its end) and
 * names in slots: each name and each value of up to 16 bytes one
 * fixed-size copy. w has room for the map and NAME_SLOT bytes more. */
static char *slotted_to_map(const map_names *m, int ncols, const char *v, const char *end, char *w)
{
  for (int i = 0; i < ncols; i++) {
    size_t vlen = v < end ? rn_scalar_size[(unsigned char)*v] : 0;
    if (!vlen || vlen > (size_t)(end - v)) vlen = rn_value_size(v, end);
    if (!vlen) return NULL;
    memcpy(w, m->slots + (size_t)i * NAME_SLOT, NAME_SLOT);
    w += m->slot_len[i];
    if (vlen <= 16) memcpy(w, v, 16);
    else memcpy(w, v, vlen);
    w += vlen;
    v += vlen;
  }
  return w;
}

/* The map of a row of s without struct columns, in one walk: each column's
 * packed name (from m, if not NULL), then its value's stored bytes. */
static int flat_to_map(const rn_schema *s, const map_names *m, const char *row, size_t len, msgpack_sbuffer *out)
{
  char padded[256 + 16]; /* a short row, copied with room past its end: every value a fixed copy */
  if (len <= 256) row = memcpy(padded, row, len);
  if (len <= 256 && m && m->slots) {
    const char *v = row_values(row, len, s->ncols);
    if (!v || rn_sbuf_reserve(out, m->at[s->ncols] + len + NAME_SLOT + 16)) return -1;
    char *w = rn_put_bytes(out->data + out->size, m->bytes, m->at[0]);
    if (!(w = slotted_to_map(m, s->ncols, v, row + len, w))) return -1;
    out->size = (size_t)(w - out->data);
    return 0;
  }
  const char *v = row_values(row, len, s->ncols), *end = row + len, *readable_end = end + (len <= 256 ? 16 : 0);
  if (!v || rn_sbuf_reserve(out, (m ? m->at[s->ncols] : names_size(s)) + len + 16)) return -1;
  char *w = out->data + out->size;
  w = m ? rn_put_bytes(w, m->bytes, m->at[0]) : rn_put_map_header(w, (uint32_t)s->ncols);
  for (int i = 0; i < s->ncols; i++) {
    size_t vlen = rn_value_size(v, end);
    if (!vlen) return -1;
    w = put_name(w, s, m, i);
    w = rn_put_run(w, v, vlen, (size_t)(readable_end - v));
    v += vlen;
  }
  out->size = (size_t)(w - out->data);
  return 0;
}

/* The map of a row with struct columns: those are decoded to become maps
 * too; the others are copied as they are stored. */
static int structs_to_map(const rn_schema *s, const char *row, size_t len, msgpack_zone *z, msgpack_sbuffer *out)
{
  size_t small[65], *starts = small;
  if (s->ncols >= (int)(sizeof small / sizeof *small) && !(starts = malloc(sizeof *starts * (size_t)(s->ncols + 1))))
    return -1;
  int rc = rn_row_spans(row, len, s->ncols, s->ncols, starts);
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, rn_buf_write);
  if (!rc) msgpack_pack_map(&pk, (size_t)s->ncols);
  for (int i = 0; !rc && i < s->ncols; i++) {
    const rn_column *c = &s->cols[i];
    const char *v = row + starts[i];
    size_t vlen = starts[i + 1] - starts[i];
    msgpack_pack_str_with_body(&pk, c->name, c->name_len);
    if (c->type != RN_T_STRUCT) {
      rc = rn_buf_write(out, v, vlen);
      continue;
    }
    msgpack_object o;
    size_t off = 0;
    if (rn_unpack(v, vlen, &off, z, &o) != MSGPACK_UNPACK_SUCCESS) rc = -1;
    else pack_value_as_map(&pk, &o, c);
  }
  if (starts != small) free(starts);
  return rc ? -1 : 0;
}

/* Appends a stored row of s as a map keyed by external names (packed in
 * m, built for s, or NULL). A value is copied as the bytes it is stored as
 * (the row's array holds msgpack values already). A struct is decoded, to
 * become a map too. Nothing is appended for a row that cannot be read. */
static int row_to_map(const rn_schema *s, const map_names *m, const char *row, size_t len, msgpack_zone *z,
                      msgpack_sbuffer *out)
{
  size_t size = out->size;
  bool structs = m && m->structs;
  for (int i = 0; !m && i < s->ncols; i++) structs |= s->cols[i].type == RN_T_STRUCT;
  int rc = structs ? structs_to_map(s, row, len, z, out) : flat_to_map(s, m, row, len, out);
  if (rc) out->size = size;
  return rc;
}

int rn_row_to_map(const rn_schema *s, const char *row, size_t len, msgpack_zone *z, msgpack_sbuffer *out)
{
  return row_to_map(s, NULL, row, len, z, out);
}

typedef struct csub {
  rn_callback fn;
  rn_rollback_fn on_rollback; /* or NULL */
  void *ctx;
  msgpack_sbuffer row, old;
  msgpack_zone zone;
  map_names names;            /* the relation's, built at the first change */
  char *label;                /* a durable one's, as the host named it ("durable subscriber audit"); else NULL */
} csub;

static void free_csub(void *ctx)
{
  csub *s = ctx;
  msgpack_sbuffer_destroy(&s->row);
  msgpack_sbuffer_destroy(&s->old);
  msgpack_zone_destroy(&s->zone);
  map_names_free(&s->names);
  free(s->label);
  free(s);
}

static int csub_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  csub *s = ctx;
  msgpack_sbuffer_clear(&s->row);
  msgpack_sbuffer_clear(&s->old);
  if (s->names.schema != rel->schema && map_names_build(&s->names, rel->schema))
    return rn_err_set(e, RN_ENOMEM, "out of memory");
  if ((c->row && row_to_map(rel->schema, &s->names, c->row, c->row_len, &s->zone, &s->row)) ||
      (c->old && row_to_map(rel->schema, &s->names, c->old, c->old_len, &s->zone, &s->old))) {
    msgpack_zone_clear(&s->zone);
    return rn_err_set(e, RN_ESTORE, "%s: a row could not be decoded", rel->name);
  }
  if (s->names.structs) msgpack_zone_clear(&s->zone); /* only structs are decoded into it */
  rn_event ev = { (int)c->verb, info->id, info->seq, info->n,
                  c->row ? s->row.data : NULL, c->row ? s->row.size : 0,
                  c->old ? s->old.data : NULL, c->old ? s->old.size : 0 };
  int rc = s->fn(s->ctx, &ev);
  if (rc && s->label) /* the groups wait for this one: say which, and where it stopped */
    return rn_err_set(e, RN_ECALLBACK, "%s: %s: subscriber returned %d at change %llu of group %llu (delivered again "
                      "from there)", rel->name, s->label, rc, (unsigned long long)info->n, (unsigned long long)info->seq);
  return rc ? rn_err_set(e, RN_ECALLBACK, "%s: subscriber returned %d", rel->name, rc) : 0;
}

static void csub_done(void *ctx, uint64_t seq, bool committed)
{
  csub *s = ctx;
  if (!committed && s->on_rollback) s->on_rollback(s->ctx, seq);
}

/* A carried group it was told committed was lost (sink.c, SINKS-2). */
static void csub_lost(void *ctx, uint64_t seq)
{
  csub_done(ctx, seq, false);
}

static csub *new_csub(rn_callback fn, rn_rollback_fn on_rollback, void *ctx)
{
  csub *s = calloc(1, sizeof *s);
  if (!s || !msgpack_zone_init(&s->zone, 4096)) {
    free(s);
    return NULL;
  }
  s->fn = fn;
  s->on_rollback = on_rollback;
  s->ctx = ctx;
  msgpack_sbuffer_init(&s->row);
  msgpack_sbuffer_init(&s->old);
  return s;
}

/* The checks every subscription makes; 0 or the error set. */
static int check_subscription(rn_pipeline *p, rn_rel *rel, rn_callback fn, const char *what)
{
  rn_err_clear(&p->err);
  if (rn_store_forked(&p->store, &p->err)) return p->err.code; /* a child's use of its parent's LMDB */
  if (!rel) return rn_err_set(&p->err, RN_EINVAL, "%s: the relation is NULL (did rn_relation find it?)", what);
  if (rel->p != p)
    return rn_err_set(&p->err, RN_EINVAL, "%s: %s: the relation belongs to another pipeline", rel->name, what);
  if (!fn) return rn_err_set(&p->err, RN_EINVAL, "%s: %s needs a callback", rel->name, what);
  return 0;
}

RN_API int rn_subscribe_rollback(rn_pipeline *p, rn_rel *rel, rn_callback fn, rn_rollback_fn on_rollback,
                                 void *ctx)
{
  if (!p) return RN_EINVAL;
  int rc = check_subscription(p, rel, fn, "rn_subscribe");
  if (rc) return rc;
  csub *s = new_csub(fn, on_rollback, ctx);
  if (!s) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  rc = rn_sink_add(p, rel, false, csub_change, NULL, s, free_csub);
  if (!rc) rn_sink_set_hooks(p, NULL, csub_done);
  if (!rc && on_rollback) rn_sink_set_lost(p, csub_lost);
  return rc;
}

RN_API int rn_subscribe(rn_pipeline *p, rn_rel *rel, rn_callback fn, void *ctx)
{
  return rn_subscribe_rollback(p, rel, fn, NULL, ctx);
}

static int subscribe_durable(rn_pipeline *p, rn_rel *rel, const char *name, rn_callback fn, void *ctx);

/* Named "sink:" name in the state, like a Lua durable sink. */
RN_API int rn_subscribe_durable(rn_pipeline *p, rn_rel *rel, const char *name, rn_callback fn, void *ctx)
{
  int rc = subscribe_durable(p, rel, name, fn, ctx);
  rn_notes_tell(p); /* the groups it missed (outbox.c) */
  return rc;
}

static int subscribe_durable(rn_pipeline *p, rn_rel *rel, const char *name, rn_callback fn, void *ctx)
{
  if (!p) return RN_EINVAL;
  int rc = check_subscription(p, rel, fn, "rn_subscribe_durable");
  if (rc) return rc;
  if (!name || !*name) return rn_err_set(&p->err, RN_EINVAL, "%s: a durable subscriber needs a name", rel->name);
  if (p->state != RN_IDLE) /* before the flush that reads its mark: that refusal would name the flush */
    return rn_err_set(&p->err, RN_EMISUSE, "%s: rn_subscribe_durable: not inside a group or a callback", rel->name);
  csub *s = new_csub(fn, NULL, ctx);
  size_t nlen = strlen(name);
  bool plain = rn_utf8_valid(name, nlen); /* else quoted in its label, stray bytes escaped: messages are UTF-8 */
  size_t shown = plain ? nlen : 4 * nlen + 16;
  char *key = s ? malloc(nlen + 6) : NULL, *label = key ? malloc(shown + 32) : NULL;
  if (!label) {
    free(key);
    if (s) free_csub(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  sprintf(key, RN_SINK_NAMED "%s", name);
  if (plain) sprintf(label, "durable subscriber %s", name); /* as the host named it, not its key in the state */
  else rn_json_quote(label + sprintf(label, "durable subscriber "), shown, name, nlen);
  s->label = strdup(label);
  if (!s->label) {
    free(key);
    free(label);
    free_csub(s);
    return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  rn_outbox_mark m;
  rc = rn_outbox_sink_check(p, rel, key); /* before the mark's read, whose flush a callback is refused */
  if (!rc) rc = rn_outbox_mark_read(p, key, label, &m);
  static const rn_outbox_ops ops = { csub_change, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                     false, NULL }; /* a C subscriber reads rows in the relation's columns now */
  if (rc) free_csub(s);
  else rc = rn_outbox_sink_add(p, rel, key, label, false, &ops, s, free_csub, m.found ? m.delivered : p->seq,
                               m.found ? m.position : 0); /* resumes mid-group (OUTBOX-9) */
  free(key);
  free(label);
  if (!rc) rn_err_clear(&p->err); /* what it was refused delivering the waiting groups is not its message */
  return rc;
}

/* ---- subscriptions with flags, unsubscribing; map keys for rn_get ---- */

RN_API int rn_subscribe_flags(rn_pipeline *p, rn_rel *rel, int flags, rn_callback fn, rn_rollback_fn on_rollback,
                              void *ctx)
{
  if (!p) return RN_EINVAL;
  int rc = check_subscription(p, rel, fn, "rn_subscribe_flags");
  if (rc) return rc;
  if (flags & ~RN_SUBSCRIBE_CONSOLIDATE) return rn_err_set(&p->err, RN_EINVAL, "%s: unknown flags %#x", rel->name, flags);
  csub *s = new_csub(fn, on_rollback, ctx);
  if (!s) return rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  rc = rn_sink_add(p, rel, flags & RN_SUBSCRIBE_CONSOLIDATE, csub_change, NULL, s, free_csub);
  if (!rc) rn_sink_set_hooks(p, NULL, csub_done);
  if (!rc && on_rollback) rn_sink_set_lost(p, csub_lost);
  return rc;
}

/* Whether a durable sink is the subscriber want describes (its fn and ctx). */
static bool same_csub(rn_sink_fn change, void *ctx, void *arg)
{
  const csub *s = ctx, *want = arg;
  return change == csub_change && s->fn == want->fn && s->ctx == want->ctx;
}

RN_API int rn_unsubscribe(rn_pipeline *p, rn_rel *rel, rn_callback fn, void *ctx)
{
  if (!p) return RN_EINVAL;
  int rc = check_subscription(p, rel, fn, "rn_unsubscribe");
  if (rc) return rc;
  if (p->state != RN_IDLE) /* inside a callback too: the sinks are being walked */
    return rn_err_set(&p->err, RN_EMISUSE, "%s: rn_unsubscribe: not inside a group or a callback", rel->name);
  for (int i = 0; i < p->nsinks; i++) {
    rn_sink *k = p->sinks[i];
    const csub *s = k->ctx;
    if (k->rel != rel || k->on_change != csub_change || s->fn != fn || s->ctx != ctx) continue;
    memmove(&p->sinks[i], &p->sinks[i + 1], sizeof *p->sinks * (size_t)(p->nsinks - i - 1));
    p->nsinks--;
    rel->listeners--;
    k->free_ctx(k->ctx);
    free(k->told); /* the carried groups a rollback subscriber saw */
    free(k);
    return 0;
  }
  csub want = { .fn = fn, .ctx = ctx };
  if ((rc = rn_outbox_sink_remove(p, rel, same_csub, &want)) != RN_ENOTFOUND) return rc; /* a durable one */
  return rn_err_set(&p->err, RN_ENOTFOUND, "%s: rn_unsubscribe: no subscriber with this callback and context",
                    rel->name);
}

int rn_map_slots(rn_pipeline *p, rn_rel *rel, const msgpack_object *m, msgpack_object **vals, uint8_t **given)
{
  return map_to_slots(p, rel, m, vals, given);
}
