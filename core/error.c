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

int rn_err_set(rn_err *e, int code, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  e->code = code;
  e->cause = 0;
  return code;
}

void rn_err_prefix(rn_err *e, const char *prefix)
{
  size_t plen = strlen(prefix) + 2, mlen = strlen(e->msg);
  if (plen >= sizeof e->msg) return;
  if (plen + mlen >= sizeof e->msg) mlen = sizeof e->msg - plen - 1;
  memmove(e->msg + plen, e->msg, mlen);
  memcpy(e->msg, prefix, plen - 2);
  memcpy(e->msg + plen - 2, ": ", 2);
  e->msg[plen + mlen] = '\0';
}

void rn_err_clear(rn_err *e)
{
  e->code = RN_OK;
  e->cause = 0;
  e->msg[0] = '\0';
}
