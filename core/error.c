/* error.c — error codes' names and per-failure messages. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

RN_API const char *rn_strerror(int code)
{
  switch (code) {
  case RN_OK:        return "RN_OK: success";
  case RN_EINVAL:    return "RN_EINVAL: bad input";
  case RN_EEXIST:    return "RN_EEXIST: a row with this key already exists";
  case RN_ENOTFOUND: return "RN_ENOTFOUND: no such row";
  case RN_ESCHEMA:   return "RN_ESCHEMA: declaration disagrees with the stored state";
  case RN_EMISUSE:   return "RN_EMISUSE: call out of order";
  case RN_ECALLBACK: return "RN_ECALLBACK: a callback failed";
  case RN_ESTORE:    return "RN_ESTORE: the LMDB store failed";
  case RN_EFULL:     return "RN_EFULL: the disk or the map is full";
  case RN_ENOMEM:    return "RN_ENOMEM: out of memory";
  case RN_EIO:       return "RN_EIO: input/output error";
  case RN_EINTR:     return "RN_EINTR: the run was interrupted";
  default:           return "RN_E?: unknown error code";
  }
}

size_t rn_err_escape(unsigned char c, char esc[7])
{
  static const char hex[] = "0123456789abcdef";
  const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f" : NULL;
  if (named) { memcpy(esc, named, 3); return 2; }
  if (c >= 0x20 && c != 0x7f) return 0;
  memcpy(esc, "\\u00", 4);
  esc[4] = hex[c >> 4];
  esc[5] = hex[c & 15];
  return 6;
}

/* The length of the UTF-8 character at s (avail bytes readable), or 0 when
 * s starts none: a stray byte, an overlong form, a surrogate, a code point
 * past U+10FFFF, or one cut short (by a buffer that held the name, say). */
static size_t utf8_char(const unsigned char *s, size_t avail)
{
  unsigned c = s[0];
  size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (k > avail) return 0;
  unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
  for (size_t j = 1; j < k; j++, lo = 0x80, hi = 0xBF)
    if (s[j] < lo || s[j] > hi) return 0;
  return k;
}

void rn_err_escape_into(char *msg, size_t cap, const char *text, size_t len)
{
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    char esc[7];
    const unsigned char *at = (const unsigned char *)text + i;
    size_t step = utf8_char(at, len - i), n = step ? rn_err_escape(*at, esc) : 4;
    if (!step) { /* a byte of no character: \xff, so the message stays UTF-8 */
      memcpy(esc, "\\x", 2);
      esc[2] = hex[*at >> 4];
      esc[3] = hex[*at & 15];
      step = 1;
    }
    const char *put = n ? esc : text + i;
    if (!n) n = step;
    if (o + n >= cap) break; /* no room for it and the NUL: cut at a character's start */
    memcpy(msg + o, put, n);
    o += n;
    i += step;
  }
  msg[o] = '\0';
}

/* msg, which snprintf cut, maybe inside a character, ends on a whole one.
 * Only for a cut: a callback's own message ending in bytes of no
 * character is kept as it was said. */
static void end_whole(char *msg, size_t cap)
{
  size_t o = strnlen(msg, cap), start = o;
  while (start > 0 && o - start < 3 && ((unsigned char)msg[start - 1] & 0xC0) == 0x80) start--;
  if (start == 0 || (unsigned char)msg[start - 1] < 0xC0) return; /* ends on ASCII, or on bytes of no character */
  start--; /* the last character's lead byte */
  if (utf8_char((const unsigned char *)msg + start, o - start) != o - start) msg[start] = '\0';
}

/* The message as fmt makes it, its control bytes escaped (rn_err_escape_into). */
static void set_escaped(rn_err *e, const char *fmt, va_list ap)
{
  char raw[RN_ERRMSG_MAX];
  vsnprintf(raw, sizeof raw, fmt, ap);
  rn_err_escape_into(e->msg, sizeof e->msg, raw, strlen(raw));
}

int rn_err_set(rn_err *e, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  set_escaped(e, fmt, ap);
  va_end(ap);
  e->code = code;
  e->cause = 0;
  return code;
}

int rn_err_set_with(rn_err *e, int code, const char *text, const char *fmt, ...)
{
  char kept[RN_ERRMSG_MAX];
  size_t said = (size_t)snprintf(kept, sizeof kept, "%s", text); /* text may be e's own message */
  va_list ap;
  va_start(ap, fmt);
  set_escaped(e, fmt, ap);
  va_end(ap);
  size_t at = strlen(e->msg);
  snprintf(e->msg + at, sizeof e->msg - at, "%s", kept);
  if (strlen(e->msg) - at < said) end_whole(e->msg, sizeof e->msg); /* cut: else kept as it was said */
  e->code = code;
  e->cause = 0;
  return code;
}

int rn_err_keep(rn_err *e, int code, const char *text)
{
  if (text != e->msg) {
    if (snprintf(e->msg, sizeof e->msg, "%s", text) >= (int)sizeof e->msg) end_whole(e->msg, sizeof e->msg);
  }
  e->code = code;
  e->cause = 0;
  return code;
}

void rn_err_prefix(rn_err *e, const char *prefix)
{
  char rest[RN_ERRMSG_MAX];
  memcpy(rest, e->msg, sizeof rest);
  rn_err_escape_into(e->msg, sizeof e->msg, prefix, strlen(prefix)); /* a file's path with a newline in it, too */
  size_t at = strlen(e->msg);
  if (snprintf(e->msg + at, sizeof e->msg - at, ": %s", rest) >= (int)(sizeof e->msg - at))
    end_whole(e->msg, sizeof e->msg);
}

void rn_err_clear(rn_err *e)
{
  e->code = RN_OK;
  e->cause = 0;
  e->msg[0] = '\0';
}
