/* json.h — JSON text to msgpack objects (jscan.c, jansson for errors).
 * JSON integers become ints, other numbers floats, null NIL, objects maps
 * with string keys; nothing here knows schemas (row.c checks values). */
#ifndef RN_JSON_H
#define RN_JSON_H

#include <msgpack.h>

#include "buf.h"
#include "error.h"

/* Parses one JSON text; memory of out comes from z, except strings
 * without escapes, which point into text (it must outlive out). On failure
 * sets e to "malformed JSON at column C: reason", or for an object with a
 * key twice to "duplicate key "K" at column C" (K as written in text), for
 * a number no int64 or double holds to "the number 1e400 is beyond a
 * float's range (about ±1.8e308) at column C" (or "the integer … is
 * beyond int64 (…) at column C"). */
int rn_json_parse(const char *text, size_t len, msgpack_object *out, msgpack_zone *z, rn_err *e);

/* Where text holds a number out of range, if that is why rn_json_parse
 * refuses it (an integer beyond int64, a real beyond a double: "too big
 * integer", "real number overflow"): the first such number's offset and
 * length; false if text is refused for another reason, or accepted. */
bool rn_json_overflow_at(const char *text, size_t len, size_t *start, size_t *n);

/* Where jansson stops reading text that is not JSON: the byte offset it
 * gives (just past what it could not read), into *at; false when jansson
 * reads it (or runs out of memory). */
bool rn_json_error_at(const char *text, size_t len, size_t *at);

/* The same through jansson alone (strings copied into z): what the
 * scanner is checked against (fuzz/fuzz_json.c). */
int rn_json_parse_jansson(const char *text, size_t len, msgpack_object *out, msgpack_zone *z, rn_err *e);

/* Whether two keys of a map (kv, n keys, unique as msgpack values) would
 * be one key in JSON, where they are text: a key that is no string is
 * written as its value's JSON text (ndjson.c's rn_json_value: 1 as "1",
 * true as "true", both infinities as "null"), so 1 and "1" clash. The
 * clashing pair's indices into *x and *y; -1 when out of memory. */
int rn_json_keys_clash(const msgpack_object_kv *kv, uint32_t n, uint32_t *x, uint32_t *y);

/* Writes s[0..len) into buf as a JSON string literal with its quotes, for
 * quoting a user's name in a message: NUL and control bytes become \u0000,
 * \n…, so the message stays one readable line. Cut with … to fit cap;
 * returns buf. */
const char *rn_json_quote(char *buf, size_t cap, const char *s, size_t len);

/* msgpack_object_print_buffer(buf, cap, *v), always ended by NUL within
 * cap: msgpack-c leaves a buffer that a string's printable bytes fill
 * unended, and a message made of it read past it. A float, in a list or
 * a map too, is written by rn_float_text (msgpack-c writes %f: 1.500000,
 * 300 digits for 1e300).
 * The length written. */
int rn_object_text(char *buf, size_t cap, const msgpack_object *v);

/* A float as its shortest text that reads back as it, written as Lua
 * writes a float: 1.5, 1e+300, 7.0 and -0.0 (not 7 and -0, which read as
 * integers), nan (not x86's -nan), inf, -inf. As snprintf: the length it
 * needs. */
int rn_float_text(char *buf, size_t cap, double d);

#endif
