/* fuzz_json.c — the JSON decoder behind runnel.json_decode and NDJSON
 * input (rn_json_parse) on arbitrary text. What it accepts must survive a
 * round trip through the NDJSON writer (rn_json_value): parse, write,
 * parse again gives the same msgpack. */
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "ndjson.h"

static void pack(const msgpack_object *v, msgpack_sbuffer *out)
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
  msgpack_pack_object(&pk, *v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object v, again;
  rn_err e = { .code = RN_OK };
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
