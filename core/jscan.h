/* jscan.h — a one-pass JSON reader into msgpack objects (jscan.c).
 *
 * It accepts exactly the texts jansson accepts with JSON_DECODE_ANY |
 * JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES (and json.c's depth limit;
 * jansson also reads one NUL byte after a number or a literal as nothing,
 * which both refuse: json.c's nul_outside_strings), and
 * reads them to the same objects; it does not say why it refuses a text:
 * json.c asks jansson, which words the reason. fuzz/fuzz_json.c checks the
 * two agree. */
#ifndef RN_JSCAN_H
#define RN_JSCAN_H

#include <msgpack.h>

#define RN_JSCAN_MAX_DEPTH 64 /* a value nested deeper is refused */

typedef enum rn_jscan_rc {
  RN_JSCAN_OK = 0,
  RN_JSCAN_REFUSED,  /* not JSON, a duplicate or NUL-holding key, or too deep */
  RN_JSCAN_NOMEM     /* an allocation failed (noted, see buf.h) */
} rn_jscan_rc;

/* Reads the JSON text text[0..len) into out. Arrays, maps and unescaped
 * copies of strings come from z; a string without escapes points into
 * text, which must outlive out. */
rn_jscan_rc rn_jscan(const char *text, size_t len, msgpack_object *out, msgpack_zone *z);

#endif
