/* fuzz_json.c — the JSON decoder behind runnel.json_decode and NDJSON
 * input (rn_json_parse) on arbitrary text. The scanner (jscan.c) and
 * jansson must agree: both refuse the text, or both read it to the same
 * msgpack. What it accepts must survive a round trip through the NDJSON
 * writer (rn_json_value): parse, write, parse again gives the same
 * msgpack. */
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jscan.h"
#include "json.h"
#include "ndjson.h"

static void pack(const msgpack_object *v, msgpack_sbuffer *out)
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
  msgpack_pack_object(&pk, *v);
}

static bool same_packing(const msgpack_object *a, const msgpack_object *b)
{
  msgpack_sbuffer x, y;
  msgpack_sbuffer_init(&x);
  msgpack_sbuffer_init(&y);
  pack(a, &x);
  pack(b, &y);
  bool same = x.size == y.size && memcmp(x.data, y.data, x.size) == 0;
  msgpack_sbuffer_destroy(&x);
  msgpack_sbuffer_destroy(&y);
  return same;
}

/* The scanner reads exactly what jansson reads, to the same values. */
static void check_scanner(const uint8_t *data, size_t size, msgpack_zone *z)
{
  msgpack_object scanned, slow;
  rn_err e = { .code = RN_OK };
  rn_jscan_rc rc = rn_jscan((const char *)data, size, &scanned, z);
  int jrc = rn_json_parse_jansson((const char *)data, size, &slow, z, &e);
  if (rc == RN_JSCAN_NOMEM) abort(); /* nothing here runs out */
  if ((rc == RN_JSCAN_OK) != (jrc == 0)) {
    fprintf(stderr, "fuzz: the scanner %s, jansson %s (%s):\n%.*s\n", rc ? "refused" : "accepted",
            jrc ? "refused" : "accepted", e.msg, (int)size, (const char *)data);
    abort();
  }
  if (rc == RN_JSCAN_OK && !same_packing(&scanned, &slow)) {
    fprintf(stderr, "fuzz: the scanner and jansson read different values:\n%.*s\n", (int)size, (const char *)data);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object v, again;
  rn_err e = { .code = RN_OK };
  check_scanner(data, size, &z);
  if (rn_json_parse((const char *)data, size, &v, &z, &e)) {
    if (e.code != RN_EINVAL || !e.msg[0]) abort();
    msgpack_zone_destroy(&z);
    return 0;
  }
  msgpack_sbuffer text, first, second;
  msgpack_sbuffer_init(&text);
  msgpack_sbuffer_init(&first);
  msgpack_sbuffer_init(&second);
  rn_json_value(&text, &v, NULL);
  pack(&v, &first);
  if (rn_json_parse(text.data, text.size, &again, &z, &e)) {
    fprintf(stderr, "fuzz: the writer's JSON does not parse: %s\n%.*s\n", e.msg, (int)text.size, text.data);
    abort();
  }
  pack(&again, &second);
  if (first.size != second.size || memcmp(first.data, second.data, first.size) != 0) {
    fprintf(stderr, "fuzz: JSON round trip changed the value:\n%.*s\n", (int)text.size, text.data);
    abort();
  }
  msgpack_sbuffer_destroy(&text);
  msgpack_sbuffer_destroy(&first);
  msgpack_sbuffer_destroy(&second);
  msgpack_zone_destroy(&z);
  return 0;
}
