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

void rn_err_escape_into(char *msg, size_t cap, const char *text, size_t len)
{
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    char esc[7];
    size_t n = rn_err_escape((unsigned char)text[i], esc);
    const char *put = n ? esc : text + i;
    if (!n) n = 1;
    if (o + n >= cap) { /* no room for it and the NUL */
      if (((unsigned char)text[i] & 0xC0) == 0x80) { /* no half character: back to its first byte */
        while (o > 0 && ((unsigned char)msg[o - 1] & 0xC0) == 0x80) o--;
        if (o > 0) o--;
      }
      break;
    }
    memcpy(msg + o, put, n);
    o += n;
  }
  msg[o] = '\0';
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
  snprintf(kept, sizeof kept, "%s", text); /* text may be e's own message */
  va_list ap;
  va_start(ap, fmt);
  set_escaped(e, fmt, ap);
  va_end(ap);
  size_t at = strlen(e->msg);
  snprintf(e->msg + at, sizeof e->msg - at, "%s", kept);
  e->code = code;
  e->cause = 0;
  return code;
}

int rn_err_keep(rn_err *e, int code, const char *text)
{
  if (text != e->msg) snprintf(e->msg, sizeof e->msg, "%s", text);
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
  snprintf(e->msg + at, sizeof e->msg - at, ": %s", rest);
}

void rn_err_clear(rn_err *e)
{
  e->code = RN_OK;
  e->cause = 0;
  e->msg[0] = '\0';
}
