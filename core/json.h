/* json.h — JSON text to msgpack objects and back, through jansson.
 * JSON integers become ints, other numbers floats, null NIL, objects maps
 * with string keys; nothing here knows schemas (row.c checks values). */
#ifndef RN_JSON_H
#define RN_JSON_H

#include <msgpack.h>

#include "buf.h"
#include "error.h"

/* Parses one JSON text; memory of out comes from z. On failure sets e to
 * "malformed JSON at column C: reason". */
int rn_json_parse(const char *text, size_t len, msgpack_object *out, msgpack_zone *z, rn_err *e);

#endif
