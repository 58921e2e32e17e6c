/* json_parsers.c — how fast the JSON parsers Debian packages read NDJSON
 * lines, against runnel's scanner (core/jscan.c): the measurement behind
 * choosing the scanner (issue 13). Not part of make bench: it needs
 * libcjson-dev, libjson-c-dev and libyajl-dev, which runnel does not use.
 *
 *   make -s all && cc -O2 -Icore scripts/bench/json_parsers.c \
 *     build/librunnel_core.a -ljansson -lcjson -ljson-c -lyajl -lmsgpackc -llmdb -lsqlite3 -lm \
 *     -o build/json_parsers
 *   build/json_parsers FILE.ndjson PARSER [ROUNDS]      (PARSER: see `parsers` below)
 *   valgrind --tool=callgrind --toggle-collect=parse_lines build/json_parsers FILE PARSER
 *
 * Each parser reads every line into its own form and frees it (jansson,
 * cJSON, json-c, yajl: a tree; jsmn: tokens only, no string or number
 * decoded); "jansson+convert" is the path runnel used before the scanner
 * (a jansson tree copied into msgpack objects); "scanner" is rn_jscan into
 * msgpack objects, what rn_json_parse does now. Prints lines per second. */
#include <cjson/cJSON.h>
#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#define JSMN_STATIC
#include <jsmn.h>

#include "jscan.h"
#include "json.h"

/* json-c's json.h and jansson.h both declare json_object_iter: json-c's
 * few functions used here are declared by hand. */
typedef struct json_tokener json_tokener;
json_tokener *json_tokener_new(void);
struct json_object *json_tokener_parse_ex(json_tokener *tok, const char *str, int len);
void json_tokener_reset(json_tokener *tok);
int json_object_put(struct json_object *obj);

typedef struct line { char *text; size_t len; } line;

static msgpack_zone zone;
static json_tokener *tokener;

static int parse_jansson(const line *l)
{
  json_t *j = json_loadb(l->text, l->len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, NULL);
  json_decref(j);
  return j != NULL;
}

static int parse_jansson_convert(const line *l)
{
  msgpack_object o;
  rn_err e = { .code = RN_OK };
  int ok = rn_json_parse_jansson(l->text, l->len, &o, &zone, &e) == 0;
  msgpack_zone_clear(&zone);
  return ok;
}

static int parse_cjson(const line *l)
{
  cJSON *j = cJSON_ParseWithLength(l->text, l->len);
  cJSON_Delete(j);
  return j != NULL;
}

static int parse_jsonc(const line *l)
{
  struct json_object *j = json_tokener_parse_ex(tokener, l->text, (int)l->len);
  json_tokener_reset(tokener);
  json_object_put(j);
  return j != NULL;
}

static int parse_yajl(const line *l) /* l->text ends with a NUL */
{
  yajl_val v = yajl_tree_parse(l->text, NULL, 0);
  yajl_tree_free(v);
  return v != NULL;
}

static int parse_jsmn(const line *l)
{
  jsmn_parser p;
  jsmntok_t tokens[64];
  jsmn_init(&p);
  return jsmn_parse(&p, l->text, l->len, tokens, 64) > 0;
}

static int parse_scanner(const line *l)
{
  msgpack_object o;
  int ok = rn_jscan(l->text, l->len, &o, &zone) == RN_JSCAN_OK;
  msgpack_zone_clear(&zone);
  return ok;
}

static const struct { const char *name; int (*parse)(const line *); } parsers[] = {
  { "jansson", parse_jansson }, { "jansson+convert", parse_jansson_convert }, { "cjson", parse_cjson },
  { "json-c", parse_jsonc }, { "yajl", parse_yajl }, { "jsmn", parse_jsmn }, { "scanner", parse_scanner },
};

/* Kept out of line: callgrind counts what runs inside it (--toggle-collect). */
__attribute__((noinline)) size_t parse_lines(const line *lines, size_t n, int (*parse)(const line *));
__attribute__((noinline)) size_t parse_lines(const line *lines, size_t n, int (*parse)(const line *))
{
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) ok += (size_t)parse(&lines[i]);
  return ok;
}

static line *read_lines(const char *path, size_t *n)
{
  FILE *f = fopen(path, "r");
  if (!f) { perror(path); exit(2); }
  size_t cap = 1024;
  line *lines = malloc(cap * sizeof *lines);
  char *text = NULL;
  size_t tcap = 0;
  ssize_t got;
  *n = 0;
  while ((got = getline(&text, &tcap, f)) > 0) {
    if (*n == cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
    while (got > 0 && text[got - 1] == '\n') text[--got] = '\0';
    lines[*n].text = strdup(text);
    lines[(*n)++].len = (size_t)got;
  }
  free(text);
  fclose(f);
  return lines;
}

int main(int argc, char **argv)
{
  if (argc < 3) { fprintf(stderr, "usage: json_parsers FILE PARSER [ROUNDS]\n"); return 2; }
  size_t n, rounds = argc > 3 ? (size_t)atol(argv[3]) : 1;
  line *lines = read_lines(argv[1], &n);
  msgpack_zone_init(&zone, 4096);
  tokener = json_tokener_new();
  for (size_t i = 0; i < sizeof parsers / sizeof *parsers; i++) {
    if (strcmp(parsers[i].name, argv[2]) != 0) continue;
    struct timespec t0, t1;
    size_t ok = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t r = 0; r < rounds; r++) ok += parse_lines(lines, n, parsers[i].parse);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s: %zu lines, %zu parsed, %.0f lines/s\n", argv[2], n * rounds, ok, (double)(n * rounds) / s);
    return ok == n * rounds ? 0 : 1;
  }
  fprintf(stderr, "unknown parser %s\n", argv[2]);
  return 2;
}
