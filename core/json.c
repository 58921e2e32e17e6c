/* json.c — JSON text to msgpack objects (json.h).
 *
 * jscan.c reads the text in one pass; what it refuses, jansson reads again
 * to word the reason ("malformed JSON at column 4: string or '}' expected
 * near 'not'"), so messages stay what they were before the scanner. Were
 * jansson to accept a text the scanner refused, jansson's reading would
 * stand (slower, still right); fuzz/fuzz_json.c checks they never differ. */
#include "json.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "jscan.h"

static int convert(json_t *j, msgpack_object *out, msgpack_zone *z, int depth)
{
  if (depth > RN_JSCAN_MAX_DEPTH) return -1;
  switch (json_typeof(j)) {
  case JSON_NULL: out->type = MSGPACK_OBJECT_NIL; return 0;
  case JSON_TRUE: case JSON_FALSE:
    out->type = MSGPACK_OBJECT_BOOLEAN;
    out->via.boolean = json_is_true(j);
    return 0;
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(j);
    if (i >= 0) { out->type = MSGPACK_OBJECT_POSITIVE_INTEGER; out->via.u64 = (uint64_t)i; }
    else { out->type = MSGPACK_OBJECT_NEGATIVE_INTEGER; out->via.i64 = i; }
    return 0;
  }
  case JSON_REAL:
    out->type = MSGPACK_OBJECT_FLOAT64;
    out->via.f64 = json_real_value(j);
    return 0;
  case JSON_STRING: {
    size_t n = json_string_length(j);
    char *s = rn_zone_malloc_no_align(z, n ? n : 1);
    if (!s) return -1;
    memcpy(s, json_string_value(j), n);
    out->type = MSGPACK_OBJECT_STR;
    out->via.str.ptr = s;
    out->via.str.size = (uint32_t)n;
    return 0;
  }
  case JSON_ARRAY: {
    size_t n = json_array_size(j);
    msgpack_object *items = rn_zone_malloc(z, sizeof *items * (n ? n : 1));
    if (!items) return -1;
    for (size_t i = 0; i < n; i++)
      if (convert(json_array_get(j, i), &items[i], z, depth + 1)) return -1;
    out->type = MSGPACK_OBJECT_ARRAY;
    out->via.array.size = (uint32_t)n;
    out->via.array.ptr = items;
    return 0;
  }
  case JSON_OBJECT: {
    size_t n = json_object_size(j), i = 0;
    msgpack_object_kv *kv = rn_zone_malloc(z, sizeof *kv * (n ? n : 1));
    if (!kv) return -1;
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach(j, key, klen, val) {
      char *k = rn_zone_malloc_no_align(z, klen ? klen : 1);
      if (!k) return -1;
      memcpy(k, key, klen);
      kv[i].key.type = MSGPACK_OBJECT_STR;
      kv[i].key.via.str.ptr = k;
      kv[i].key.via.str.size = (uint32_t)klen;
      if (convert(val, &kv[i].val, z, depth + 1)) return -1;
      i++;
    }
    out->type = MSGPACK_OBJECT_MAP;
    out->via.map.size = (uint32_t)i;
    out->via.map.ptr = kv;
    return 0;
  }
  }
  return -1;
}

/* Where offset `at` of text is, for a message: "column C", or "line L,
 * column C" past the first line. */
static void position_of(const char *text, size_t at, char *buf, size_t cap)
{
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < at; i++)
    if (text[i] == '\n') line++, line_start = i + 1;
  if (line > 1) snprintf(buf, cap, "line %zu, column %zu", line, at - line_start + 1);
  else snprintf(buf, cap, "column %zu", at + 1);
}

/* Where the number jansson could not hold starts: it stops just after it
 * (its error's position, end); the number starts after the last byte no
 * number holds. */
static size_t number_start(const char *text, size_t end)
{
  size_t at = end;
  while (at > 0 && text[at - 1] && strchr("0123456789+-.eE", text[at - 1])) at--;
  return at;
}

/* A number no int64 or double holds (jansson's "too big integer", "real
 * number overflow"), said as the NDJSON input says it (json_change.c),
 * with where it starts. */
static int number_overflow(const char *text, size_t end, rn_err *e)
{
  size_t start = number_start(text, end), n = end - start;
  char at[64];
  position_of(text, start, at, sizeof at);
  int shown = n > 64 ? 64 : (int)n;
  const char *more = n > 64 ? "…" : "";
  const char *number = text + start;
  if (memchr(number, '.', n) || memchr(number, 'e', n) || memchr(number, 'E', n))
    return rn_err_set(e, RN_EINVAL, "the number %.*s%s is beyond a float's range (about ±1.8e308) at %s", shown,
                      number, more, at);
  return rn_err_set(e, RN_EINVAL, "the integer %.*s%s is beyond int64 (-9223372036854775808 to "
                    "9223372036854775807) at %s", shown, number, more, at);
}

/* The key token jansson stopped at (it ends just before `end`), as the
 * user wrote it: the duplicate-key error gives only a position. */
static int duplicate_key(const char *text, size_t end, rn_err *e)
{
  size_t start = end >= 2 && text[end - 1] == '"' ? end - 1 : 0;
  while (start > 0) {
    start--;
    if (text[start] != '"') continue;
    size_t slashes = 0;
    while (slashes < start && text[start - 1 - slashes] == '\\') slashes++;
    if (slashes % 2 == 0) break; /* not an escaped quote: the token's opening one */
  }
  char at[64];
  position_of(text, start, at, sizeof at);
  int n = end - start > 200 ? 200 : (int)(end - start);
  while (n < (int)(end - start) && n > 0 && ((unsigned char)text[start + n] & 0xc0) == 0x80)
    n--; /* a cut never splits a UTF-8 character */
  return rn_err_set(e, RN_EINVAL, "duplicate key %.*s%s at %s", n, text + start, n < (int)(end - start) ? "…\"" : "",
                    at);
}

/* Where text (which jansson accepted) holds a NUL byte outside its
 * strings, or len. */
static size_t nul_outside_strings(const char *text, size_t len)
{
  const char *nul = memchr(text, '\0', len);
  bool in_string = false, escaped = false;
  for (size_t i = 0; nul && i < len; i++) {
    char c = text[i];
    if (!c && !in_string) return i;
    if (in_string) {
      bool after_backslash = escaped;
      escaped = !after_backslash && c == '\\';
      in_string = after_backslash || c != '"';
    } else {
      in_string = c == '"';
    }
  }
  return len;
}

/* The text through jansson: its reading, or its reason for refusing it. */
static int jansson_parse(const char *text, size_t len, msgpack_object *out, msgpack_zone *z, rn_err *e)
{
  json_error_t jerr = { 0 }; /* jansson may fail (out of memory) before it fills it */
  /* Duplicate keys are an error: last-wins would drop a value silently. */
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
  if (!j && json_error_code(&jerr) == json_error_duplicate_key && jerr.position > 0 && (size_t)jerr.position <= len)
    return duplicate_key(text, (size_t)jerr.position, e);
  if (!j && json_error_code(&jerr) == json_error_numeric_overflow && jerr.position > 0 && (size_t)jerr.position <= len &&
      number_start(text, (size_t)jerr.position) < (size_t)jerr.position)
    return number_overflow(text, (size_t)jerr.position, e);
  if (!j && json_error_code(&jerr) == json_error_stack_overflow) /* as convert says it, below */
    return rn_err_set(e, RN_EINVAL, "JSON nested more than %d deep", RN_JSCAN_MAX_DEPTH);
  if (!j && (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0]))
    return rn_err_set(e, RN_ENOMEM, "out of memory");
  if (!j) return rn_err_set(e, RN_EINVAL, "malformed JSON at column %d: %s", jerr.column, jerr.text);
  size_t nul = nul_outside_strings(text, len);
  if (nul < len) { /* jansson ends the text at it: "[1\0,2]" would read as [1] */
    json_decref(j);
    char at[64];
    position_of(text, nul, at, sizeof at);
    return rn_err_set(e, RN_EINVAL, "malformed JSON at %s: a NUL byte outside a string", at);
  }
  bool oom = rn_oom();
  rn_oom_clear();
  int rc = convert(j, out, z, 0);
  json_decref(j);
  if (rc && rn_oom()) return rn_err_set(e, RN_ENOMEM, "out of memory");
  if (oom) rn_oom_note(); /* what the caller's group had noted stands */
  if (rc) return rn_err_set(e, RN_EINVAL, "JSON nested more than %d deep", RN_JSCAN_MAX_DEPTH);
  return 0;
}

int rn_json_parse(const char *text, size_t len, msgpack_object *out, msgpack_zone *z, rn_err *e)
{
  rn_jscan_rc rc = rn_jscan(text, len, out, z);
  if (rc == RN_JSCAN_OK) return 0;
  if (rc == RN_JSCAN_NOMEM) return rn_err_set(e, RN_ENOMEM, "out of memory");
  return jansson_parse(text, len, out, z, e);
}

bool rn_json_error_at(const char *text, size_t len, size_t *at)
{
  json_error_t jerr = { 0 };
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
  json_decref(j);
  if (j || json_error_code(&jerr) == json_error_out_of_memory || jerr.position < 0 || (size_t)jerr.position > len)
    return false;
  *at = (size_t)jerr.position;
  return true;
}

int rn_json_parse_jansson(const char *text, size_t len, msgpack_object *out, msgpack_zone *z, rn_err *e)
{
  return jansson_parse(text, len, out, z, e);
}

const char *rn_json_quote(char *buf, size_t cap, const char *s, size_t len)
{
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  if (cap < 16) { if (cap) buf[0] = '\0'; return buf; }
  buf[o++] = '"';
  size_t follow = 0; /* the continuation bytes left of a well-formed UTF-8 character */
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[7] = { '\\', 0 };
    size_t n = 2;
    if (c >= 0x80 && !follow) { /* a byte of no well-formed character: \xff, not a byte no terminal shows */
      size_t k = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
      bool whole = k && i + k <= len;
      /* the second byte's range rules out overlong forms, surrogates and code points past U+10FFFF */
      unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
      for (size_t j = 1; whole && j < k; j++, lo = 0x80, hi = 0xBF)
        whole = (unsigned char)s[i + j] >= lo && (unsigned char)s[i + j] <= hi;
      if (whole) follow = k;
      else c = 0; /* escaped below */
    }
    if (follow) follow--;
    if (c == 0 && s[i]) {
      esc[1] = 'x';
      esc[2] = hex[(unsigned char)s[i] >> 4];
      esc[3] = hex[(unsigned char)s[i] & 15];
      n = 4;
    } else switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\n': esc[1] = 'n'; break;
    case '\t': esc[1] = 't'; break;
    case '\r': esc[1] = 'r'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    default:
      if (c < 0x20 || c == 0x7f) {
        memcpy(esc + 1, "u00", 3);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        n = 6;
      } else {
        esc[0] = (char)c;
        n = 1;
      }
    }
    if (o + n + (i + 1 < len ? 5 : 2) > cap) { /* room for …" (or the last ") and the NUL */
      while (o > 1 && ((unsigned char)buf[o - 1] & 0xC0) == 0x80) o--; /* no half character before … */
      if (o > 1 && ((unsigned char)buf[o - 1] & 0x80)) o--;
      memcpy(buf + o, "\xe2\x80\xa6", 3);
      o += 3;
      break;
    }
    memcpy(buf + o, esc, n);
    o += n;
  }
  buf[o++] = '"';
  buf[o] = '\0';
  return buf;
}

bool rn_json_overflow_at(const char *text, size_t len, size_t *start, size_t *n)
{
  json_error_t jerr = { 0 };
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
  json_decref(j);
  if (j || json_error_code(&jerr) != json_error_numeric_overflow || jerr.position <= 0 || (size_t)jerr.position > len)
    return false;
  size_t end = (size_t)jerr.position, at = number_start(text, end);
  if (at == end) return false;
  *start = at;
  *n = end - at;
  return true;
}

int rn_float_text(char *buf, size_t cap, double d)
{
  if (d != d) return snprintf(buf, cap, "nan");
  char text[40];
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, d);
    if (strtod(text, NULL) == d) break;
  }
  if (text[strspn(text, "-0123456789")] == '\0') return snprintf(buf, cap, "%s.0", text);
  return snprintf(buf, cap, "%s", text);
}

/* s after the off bytes of buf, cut to end within cap. */
static void put_text(char *buf, size_t cap, size_t *off, const char *s)
{
  if (*off + 1 >= cap) return;
  int n = snprintf(buf + *off, cap - *off, "%s", s);
  if (n > 0) *off = *off + (size_t)n < cap ? *off + (size_t)n : cap - 1;
}

int rn_object_text(char *buf, size_t cap, const msgpack_object *v)
{
  if (!cap) return 0;
  if (v->type == MSGPACK_OBJECT_FLOAT32 || v->type == MSGPACK_OBJECT_FLOAT64) {
    int n = rn_float_text(buf, cap, v->via.f64);
    return n < 0 ? 0 : (size_t)n < cap ? n : (int)strlen(buf);
  }
  if (v->type == MSGPACK_OBJECT_ARRAY || v->type == MSGPACK_OBJECT_MAP) { /* as msgpack-c, its floats as above */
    bool map = v->type == MSGPACK_OBJECT_MAP;
    uint32_t n = map ? v->via.map.size : v->via.array.size;
    size_t off = 0;
    buf[0] = '\0';
    put_text(buf, cap, &off, map ? "{" : "[");
    for (uint32_t i = 0; i < n && off + 1 < cap; i++) {
      if (i) put_text(buf, cap, &off, ", ");
      if (map) {
        off += (size_t)rn_object_text(buf + off, cap - off, &v->via.map.ptr[i].key);
        put_text(buf, cap, &off, "=>");
      }
      if (off + 1 < cap)
        off += (size_t)rn_object_text(buf + off, cap - off, map ? &v->via.map.ptr[i].val : &v->via.array.ptr[i]);
    }
    put_text(buf, cap, &off, map ? "}" : "]");
    return (int)off;
  }
  memset(buf, 0, cap); /* whatever msgpack-c leaves unended ends at the first byte it did not write */
  if (cap > 1) msgpack_object_print_buffer(buf, cap - 1, *v);
  return (int)strlen(buf);
}
