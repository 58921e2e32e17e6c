/* error.h — the detailed error of the last failing call.
 * Two levels, as in SQLite: rn_strerror() gives static text per code, an
 * rn_err carries the message of one failure ("players: column \"@NAME\":
 * expected string, got number"). */
#ifndef RN_ERROR_H
#define RN_ERROR_H

#include "runnel.h"

#define RN_ERRMSG_MAX 1024

typedef struct rn_err {
  int code;                   /* RN_OK or an RN_E… code */
  int cause;                  /* the LMDB or errno code behind it, or 0 */
  char msg[RN_ERRMSG_MAX];    /* the sentence; empty when code is RN_OK */
} rn_err;

/* Sets code and message (printf format); returns code, for `return rn_err_set(…)`. */
int rn_err_set(rn_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* As rn_err_set, then text appended as it is: a callback's own message,
 * which may span lines. rn_err_set escapes the control bytes of what it
 * formats (a declared name holding a newline prints as "\n"). */
int rn_err_set_with(rn_err *e, int code, const char *text, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The escape of control byte c as a quoted name has it (rn_json_quote): \n,
 * \t, \u0001 … written in esc; its length, 0 for a byte that is not one. */
size_t rn_err_escape(unsigned char c, char esc[7]);
/* Writes text (len bytes) into msg (cap bytes, NUL-terminated) with its
 * control bytes escaped: a name declared with a newline or a tab in it
 * ("t\nx: column \"c\tol\" …") keeps a message or a note on one line, as a
 * name the input gave is quoted. Cut, as vsnprintf cuts, at a character's
 * start. */
void rn_err_escape_into(char *msg, size_t cap, const char *text, size_t len);
/* Sets code and text as it is: a message made already, or a callback's own. */
int rn_err_keep(rn_err *e, int code, const char *text);
/* Prefixes the message with "<prefix>: " (e.g. a file and line), the
 * prefix's control bytes escaped. */
void rn_err_prefix(rn_err *e, const char *prefix);
void rn_err_clear(rn_err *e);

#endif
