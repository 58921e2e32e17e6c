/* schema.h — column types, columns and schemas (the internal schema of KLIP-5).
 *
 * External names live only here and at the edges; everything else addresses
 * a column by its slot, its position in declaration order. Names are any
 * non-empty UTF-8 string without NUL; two columns of one schema may not share
 * one. A struct column carries a nested schema of its fields.
 *
 * One layer with row.c by design: a default is a value normalized by the
 * column's type (rn_value_normalize), and values are checked against
 * columns. */
#ifndef RN_SCHEMA_H
#define RN_SCHEMA_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "bytes.h"
#include "error.h"

typedef enum rn_type {
  RN_T_INT, RN_T_FLOAT, RN_T_STRING, RN_T_BOOL, RN_T_BYTES,
  RN_T_LIST, RN_T_MAP, RN_T_ANY, RN_T_STRUCT
} rn_type;

typedef struct rn_schema rn_schema;

/* Columns of one relation (and fields of one struct), as in SQLite's
 * SQLITE_MAX_COLUMN: it bounds every per-column array, including those on
 * the stack, and a join's result (left and right columns) stays within 2×. */
#define RN_COLUMNS_MAX 1000

typedef struct rn_column {
  char *name;              /* external name, NUL-terminated, owned */
  uint32_t name_len;       /* bytes in name */
  rn_type type;            /* declared type */
  bool nullable;           /* null = true */
  bool is_key;             /* part of the primary key */
  bool has_default;        /* default = v given */
  msgpack_object defval;   /* the normalized default; memory in the schema's zone */
  rn_schema *fields;       /* RN_T_STRUCT: nested columns, owned; else NULL */
} rn_column;

struct rn_schema {
  int ncols;               /* columns in slot order */
  int cap;                 /* allocated entries of cols */
  rn_column *cols;         /* the columns */
  int nkey;                /* key columns; 0 for a keyless relation */
  int *key_slots;          /* slots of the key columns, in key order */
  msgpack_zone zone;       /* owns the defaults' memory */
};

rn_schema *rn_schema_new(void);
void rn_schema_free(rn_schema *s);

/* Appends a column; takes ownership of fields (freed even on failure).
 * Errors: empty name, NUL in name, duplicate name. Returns the slot or < 0. */
int rn_schema_add(rn_schema *s, const char *name, size_t len, rn_type type,
                  bool nullable, rn_schema *fields, rn_err *e);

/* Sets slot's default after checking it against the column's type. */
int rn_schema_set_default(rn_schema *s, int slot, const msgpack_object *v,
                          const char *rel, rn_err *e);

/* Declares the key. Key columns must be scalar and are never null. */
int rn_schema_set_key(rn_schema *s, const int *slots, int n, const char *rel,
                      rn_err *e);

/* Appends copies of src's columns (types, nested fields; no defaults, no
 * key). all_nullable: every copy is nullable; else keys stay non-null. */
int rn_schema_copy_columns(rn_schema *dst, const rn_schema *src, bool all_nullable, rn_err *e);

/* Slot of a name, or -1. Linear: schemas are declared once and the Lua
 * binding resolves names through its own hash. */
int rn_schema_slot(const rn_schema *s, const char *name, size_t len);

/* rn_schema_slot, trying *hint first and leaving the slot found there: the
 * changes of one input name their columns in the same order line after
 * line, so one comparison finds most. */
#define RN_SLOT_HINTS 16
static inline int rn_schema_slot_hinted(const rn_schema *s, const char *name, size_t len, uint16_t *hint)
{
  unsigned h = *hint;
  if (h < (unsigned)s->ncols && s->cols[h].name_len == len && rn_same_bytes(s->cols[h].name, name, len)) return (int)h;
  int slot = rn_schema_slot(s, name, len);
  if (slot >= 0) *hint = (uint16_t)slot;
  return slot;
}

/* A canonical msgpack description (names, types, nullability, defaults,
 * key), compared with the stored one when a relation is declared again. */
int rn_schema_describe(const rn_schema *s, msgpack_packer *pk);
/* Whether d has the shape rn_schema_describe writes (depth: 0). */
bool rn_schema_desc_valid(const msgpack_object *d, int depth);

const char *rn_type_name(rn_type t);
/* Parses "int", "float", "string", "bool", "bytes", "list", "map", "any". */
int rn_type_parse(const char *name, rn_type *out);
bool rn_type_is_scalar(rn_type t);

#endif
